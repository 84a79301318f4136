//! The egress proxy (issue #15): the one way a job reaches anything but its
//! model. An HTTP forward proxy (`CONNECT` for HTTPS, absolute-URI requests
//! for plain HTTP) that checks each destination by host name and port
//! against the current phase's list (setup or agent, switched at runtime by
//! the host side; a connection opened in one phase is closed when it ends),
//! resolves names itself and refuses any address on the deny list unless
//! the host profile opened that exact `address:port`, requires a tunnel's
//! TLS server name to be its CONNECT host, answers a refusal with a
//! readable 403, and records every attempt as an `EgressRecord` on a
//! channel. A job whose spec lists destinations gets one from its rung
//! (`Rung::bind_egress`), started with the broker (docs/egress.md). A
//! tunnel to a host the host profile holds a credential for is terminated
//! with the job's own CA, so the real value goes into one header of its
//! requests without ever entering the job (`credential`, `terminate`).

use std::net::SocketAddr;
use std::sync::Arc;

use paddock_protocol::{EgressPhase, EgressRecord, HostProfile, JobSpec};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

pub mod allowlist;
pub mod auth;
pub mod ca;
pub mod credential;
pub mod deny;
pub mod direct;
pub mod env;
pub mod forms;
mod framing;
pub mod head;
pub mod hello;
pub mod pool;
pub mod quickack;
pub mod refusal;
pub mod relay;
pub mod resolve;
pub mod response;
pub mod roots;
pub mod scan;
mod server;
pub mod terminate;

pub use allowlist::{Allowlist, PhaseLists};
pub use auth::PROXY_USER;
pub use credential::{Credential, CredentialError, Credentials};
pub use deny::DenyList;
pub use env::proxy_env;
pub use refusal::InForce;
pub use resolve::{Resolver, SystemResolver};
pub use server::{ProxyLimits, ProxyListener};

#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    #[error("egress proxy: cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("egress proxy: cannot listen on the Unix socket {path}: {source}")]
    BindUnix {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("egress proxy: cannot read the listener's address: {source}")]
    LocalAddr { source: std::io::Error },
    #[error("egress proxy for job {job_id}: cannot list this host's addresses: {source}")]
    HostAddresses { job_id: String, source: nix::Error },
    #[error("egress proxy for job {job_id}: {source}")]
    Credentials {
        job_id: String,
        source: Box<CredentialError>,
    },
    #[error("egress proxy for job {job_id}: {field}: {reason}")]
    List {
        job_id: String,
        field: String,
        reason: String,
    },
}

/// What one proxy enforces.
#[derive(Clone)]
pub struct EgressConfig {
    pub lists: PhaseLists,
    pub deny: DenyList,
    pub resolver: Arc<dyn Resolver>,
    pub limits: ProxyLimits,
    /// The phase the proxy starts in.
    pub phase: EgressPhase,
    /// The host profile's credentials for this job (`None`: no tunnel is
    /// ever terminated).
    pub credentials: Option<Arc<Credentials>>,
    /// The host profile the job runs under, as a refusal's advice names
    /// it (`refusal::InForce`).
    pub in_force: InForce,
}

impl EgressConfig {
    /// A job's proxy: its spec's lists (already admitted against the
    /// profile's maximum), this host's deny list with the profile's opened
    /// addresses, the system resolver; it starts in the setup phase when
    /// the spec has setup commands, else in the agent phase.
    pub fn for_job(
        job_id: &str,
        spec: &JobSpec,
        profile: Option<&HostProfile>,
    ) -> Result<EgressConfig, EgressError> {
        let list_error = |field: &'static str| {
            move |(i, reason): (usize, String)| EgressError::List {
                job_id: job_id.to_string(),
                field: format!("{field}[{i}]"),
                reason,
            }
        };
        let setup =
            Allowlist::parse(&spec.setup.network.entries()).map_err(list_error("setup.network"))?;
        let agent = Allowlist::parse(&spec.network.allow).map_err(list_error("network.allow"))?;
        let opened = match profile.and_then(|p| p.network.as_ref()) {
            Some(limits) => limits
                .opened()
                .map_err(list_error("network.open_addresses"))?,
            None => Vec::new(),
        };
        let deny = DenyList::of_this_host(opened).map_err(|source| EgressError::HostAddresses {
            job_id: job_id.to_string(),
            source,
        })?;
        let specs = profile
            .and_then(|p| p.network.as_ref())
            .map(|n| n.credentials.as_slice())
            .unwrap_or_default();
        let credentials = if specs.is_empty() {
            None
        } else {
            let failed = |source| EgressError::Credentials {
                job_id: job_id.to_string(),
                source: Box::new(source),
            };
            let system =
                roots::Roots::system().map_err(|e| failed(CredentialError::SystemRoots(e)))?;
            // The job's CA outlives the job: its timeout, its setup's, a day.
            let valid_for = std::time::Duration::from_secs(
                spec.limits
                    .timeout_secs
                    .saturating_add(spec.setup.timeout_secs)
                    .saturating_add(86_400),
            );
            Some(Arc::new(
                Credentials::build(job_id, specs, &system, valid_for).map_err(failed)?,
            ))
        };
        Ok(EgressConfig {
            lists: PhaseLists { setup, agent },
            deny,
            resolver: Arc::new(SystemResolver),
            limits: ProxyLimits::default(),
            phase: if spec.setup.commands.is_empty() {
                EgressPhase::Agent
            } else {
                EgressPhase::Setup
            },
            credentials,
            in_force: InForce::of(profile),
        })
    }
}

/// A running proxy. Dropping it stops accepting and closes every
/// connection it relays.
pub struct EgressProxy {
    addr: Option<SocketAddr>,
    phase: watch::Sender<EgressPhase>,
    accept: JoinHandle<()>,
    /// The job's kept connections to its credential hosts, emptied at a
    /// phase switch and when the proxy is dropped.
    pool: Arc<pool::UpstreamPool>,
    /// Closes the kept connections when they expire.
    reaper: JoinHandle<()>,
    /// How many accepted connections are being served (`server::Serving`).
    serving: watch::Receiver<usize>,
}

impl EgressProxy {
    /// Listens on `addr` (port 0: any free port) and serves; each attempt's
    /// record goes to `records` when it ends.
    pub async fn bind(
        addr: SocketAddr,
        config: EgressConfig,
        records: mpsc::Sender<EgressRecord>,
    ) -> Result<EgressProxy, EgressError> {
        EgressProxy::bind_tcp(addr, config, records, None).await
    }

    /// Listens on `addr` like [`EgressProxy::bind`], serving only requests
    /// that carry `Proxy-Authorization: Basic` of [`PROXY_USER`] and
    /// `token` (the job's proxy URL holds them: [`EgressProxy::url`]); any
    /// other gets a `407`, rule `proxy_auth`. A loopback TCP port is open
    /// to every process of the host, whatever its user: without the token
    /// one could use the job's list, its opened addresses and its
    /// credentials.
    pub async fn bind_authenticated(
        addr: SocketAddr,
        config: EgressConfig,
        records: mpsc::Sender<EgressRecord>,
        token: crate::secret::Secret,
    ) -> Result<EgressProxy, EgressError> {
        let auth = auth::ProxyAuth::new(&token);
        EgressProxy::bind_tcp(addr, config, records, Some(auth)).await
    }

    /// Listens on `addr` and serves, requiring `auth` when given.
    async fn bind_tcp(
        addr: SocketAddr,
        config: EgressConfig,
        records: mpsc::Sender<EgressRecord>,
        auth: Option<auth::ProxyAuth>,
    ) -> Result<EgressProxy, EgressError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| EgressError::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| EgressError::LocalAddr { source })?;
        Ok(EgressProxy::serve_with(
            ProxyListener::Tcp(listener),
            Some(addr),
            config,
            records,
            auth,
        ))
    }

    /// The URL a client uses: `http://[USER:TOKEN@]ADDR` (`None` on a Unix
    /// socket).
    pub fn url(&self, token: Option<&crate::secret::Secret>) -> Option<String> {
        let addr = self.addr?;
        Some(match token {
            Some(t) => format!("http://{PROXY_USER}:{}@{addr}", t.expose()),
            None => format!("http://{addr}"),
        })
    }

    /// Listens on the Unix socket `path` (what the sandbox's forwarder
    /// relays a job's connections to) and serves.
    pub fn bind_unix(
        path: &std::path::Path,
        config: EgressConfig,
        records: mpsc::Sender<EgressRecord>,
    ) -> Result<EgressProxy, EgressError> {
        // Whatever the path's length, like the broker's socket.
        let listener = crate::broker::bind_unix(path).map_err(|source| EgressError::BindUnix {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(EgressProxy::serve(
            ProxyListener::Unix(listener),
            None,
            config,
            records,
        ))
    }

    /// Serves on `listener` (`addr`: its TCP address, if it has one).
    pub fn serve(
        listener: ProxyListener,
        addr: Option<SocketAddr>,
        config: EgressConfig,
        records: mpsc::Sender<EgressRecord>,
    ) -> EgressProxy {
        EgressProxy::serve_with(listener, addr, config, records, None)
    }

    fn serve_with(
        listener: ProxyListener,
        addr: Option<SocketAddr>,
        config: EgressConfig,
        records: mpsc::Sender<EgressRecord>,
        auth: Option<auth::ProxyAuth>,
    ) -> EgressProxy {
        let (phase, phase_rx) = watch::channel(config.phase);
        let pool = Arc::new(pool::UpstreamPool::new(config.limits.kept_idle));
        let reaper = tokio::spawn(pool.clone().reap());
        let (serving_tx, serving) = watch::channel(0);
        let shared = Arc::new(server::Shared {
            pool: pool.clone(),
            lists: config.lists,
            deny: config.deny,
            resolver: config.resolver,
            limits: config.limits,
            credentials: config.credentials,
            in_force: config.in_force,
            records,
            auth,
            serving: serving_tx,
        });
        let accept = tokio::spawn(server::serve(listener, shared, phase_rx));
        EgressProxy {
            addr,
            phase,
            accept,
            pool,
            reaper,
            serving,
        }
    }

    /// Resolves once no connection the proxy accepted is being served:
    /// every one has ended and its record is sent (to `records`, whose
    /// receiver must be read meanwhile: a full channel holds the last
    /// sends). Once the job's processes are gone, what they asked of the
    /// proxy is then on the record: a setup's refusals are known before
    /// its output is stored (`runner/setup.rs`). A connection still in
    /// the listener's backlog is not counted.
    pub fn settled(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut serving = self.serving.clone();
        async move {
            // An error: the accept loop and every connection are gone.
            let _ = serving.wait_for(|n| *n == 0).await;
        }
    }

    /// The TCP address it listens on (`None` on a Unix socket).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// The phase whose list is in force.
    pub fn phase(&self) -> EgressPhase {
        *self.phase.borrow()
    }

    /// Makes `phase`'s list the one in force; every connection opened
    /// before is closed, the kept ones too. False when it already was.
    pub fn switch(&self, phase: EgressPhase) -> bool {
        let changed = self.phase.send_if_modified(|p| {
            let changed = *p != phase;
            *p = phase;
            changed
        });
        // After the new phase is in force: a tunnel ending now sees it and
        // keeps nothing, one that kept its connection before is emptied.
        self.pool.clear();
        changed
    }

    /// How many connections to credential hosts the proxy keeps for the
    /// job's next tunnels (docs/egress.md, "Kept upstream connections").
    pub fn kept_connections(&self) -> usize {
        self.pool.len()
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.reaper.abort();
        self.pool.clear();
    }
}

//! The broker: the only holder of provider keys. Each job gets its own
//! loopback endpoint and a worthless job token; the broker checks the token,
//! the model's price and the job's budget, injects the real key, forwards the
//! request upstream, streams the answer back unbuffered, and meters a copy of
//! it into one ledger row per model call. The `scripted` upstream
//! (`crate::scripted`) is served over loopback HTTP too, so every provider
//! takes the same path.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::mpsc;

pub mod allowlist;
pub mod aws_http;
pub mod bedrock;
pub mod bounded;
pub mod budget;
mod call;
pub mod connections;
pub mod entra;
mod error_text;
pub mod eventstream;
pub mod google_adc;
pub mod google_auth;
mod input_bound;
mod json_walk;
pub mod ledger;
pub mod meter;
mod metered;
pub mod oauth;
pub mod prices;
pub mod prices_import;
pub mod provider;
mod provider_fetch;
mod provider_state;
pub mod reading;
pub mod retry;
pub use crate::secret;
mod server;
pub mod shared_spend;
pub mod spend;
pub mod token_cache;
mod unpriced_use;
pub mod upstream;
pub mod vertex;
pub mod wire;

pub use allowlist::ModelAllowlist;
pub use budget::{Ceiling, Scope};
pub use prices::PriceTable;
pub use provider::{AzureAuth, Provider};
pub use retry::RetryPolicy;
pub use secret::Secret;
pub use server::{error_response, READ_AT_ONCE};
pub use upstream::Upstream;

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("broker for job {job_id}: cannot read the listener's address: {source}")]
    LocalAddr {
        job_id: String,
        source: std::io::Error,
    },
    #[error("broker for job {job_id}: cannot build the upstream HTTP client: {source}")]
    Client {
        job_id: String,
        source: reqwest::Error,
    },
}

/// What one job's broker enforces and where it forwards.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub job_id: String,
    pub attempt: u32,
    pub upstream: Upstream,
    pub prices: Arc<PriceTable>,
    /// The job's budget ceilings (job, ticket, project per day); none means
    /// unlimited.
    pub ceilings: Vec<Ceiling>,
    /// The models the job may use (its own list and its HostProfile's).
    pub allowlist: ModelAllowlist,
    /// Forward calls to models without a price (priced at 0) instead of
    /// refusing them.
    pub allow_unpriced: bool,
    /// Whether calls may carry the model provider's web search
    /// (`[network] web_search`): refused when false (`provider_fetch.rs`).
    pub web_search: bool,
    /// Retries of transient upstream failures (`[broker.retry]`, the job's
    /// deadline).
    pub retry: retry::RetryPolicy,
    /// The most the broker holds of one upstream SSE event, event-stream
    /// frame or whole JSON answer (`broker.max_upstream_event_bytes`).
    pub max_upstream_event_bytes: usize,
    /// Where the job's ledger rows are written (ledger.rs: ahead of each
    /// forwarded call, settled when its answer ends).
    pub ledger: Arc<dyn ledger::Ledger>,
}

/// A policy decision the broker took, for the job's `policy` events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyNotice {
    /// The rule, e.g. `budget`.
    pub rule: String,
    pub message: String,
}

/// Shared state of one job's broker.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: BrokerConfig,
    pub token: Secret,
    pub client: reqwest::Client,
    pub next_seq: AtomicU64,
    pub budget: Arc<budget::Budget>,
    pub recorder: ledger::Recorder,
    pub policy: mpsc::UnboundedSender<PolicyNotice>,
    /// The first answer served by a model outside the allowlist (cut or
    /// withheld): the job cannot end `done`.
    pub served_refused: std::sync::Mutex<Option<String>>,
    /// Requests read and judged at once (`server::READ_AT_ONCE`): each
    /// holds its body and its parse in Paddock's memory.
    pub reading: Arc<tokio::sync::Semaphore>,
    /// Calls upstream at once (`connections::MAX_CONNECTIONS`), each from
    /// its forwarding to its settled row: a call the engine hung up on is
    /// still followed to its end (`metered.rs`), without its connection,
    /// so its upstream connection is counted here.
    pub upstream_calls: Arc<tokio::sync::Semaphore>,
    /// Cancelled when the job's broker stops: the calls it still follows
    /// for an engine that hung up end then (their rows as far as seen).
    pub closed: tokio_util::sync::CancellationToken,
}

impl Shared {
    /// Remembers the first answer served by a model outside the allowlist.
    pub fn note_served_refused(&self, message: &str) {
        if let Ok(mut first) = self.served_refused.lock() {
            first.get_or_insert_with(|| message.to_string());
        }
    }
}

/// A running per-job broker. Dropping it stops the endpoint: the job token
/// dies with it.
#[derive(Debug)]
pub struct BrokerHandle {
    /// `http://127.0.0.1:PORT`, without a path.
    pub url: String,
    pub token: Secret,
    /// One ledger row per model call, in completion order, once the
    /// broker wrote it to the ledger or failed to (`Settled::unwritten`).
    pub calls: mpsc::UnboundedReceiver<ledger::Settled>,
    /// Budget refusals and cuts, as they happen.
    pub policy: mpsc::UnboundedReceiver<PolicyNotice>,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
    /// Cancelled when the handle goes: every connection of the job closes.
    closed: tokio_util::sync::CancellationToken,
}

impl BrokerHandle {
    /// True once the broker has refused a call, or cut a response, because
    /// a budget was spent.
    pub fn held(&self) -> bool {
        self.shared.budget.held()
    }

    /// Why an answer was refused for its served model (outside the
    /// allowlist), if one was: the job then fails whatever the engine does.
    pub fn served_refused(&self) -> Option<String> {
        self.shared.served_refused.lock().ok()?.clone()
    }

    /// Micro-dollars settled so far.
    pub fn spent_micros(&self) -> i64 {
        self.shared.budget.spent()
    }

    /// Waits until every ledger row of the job is settled (calls still in
    /// flight included), at most `bound`; false when some are not.
    pub async fn settled(&self, bound: std::time::Duration) -> bool {
        self.shared.recorder.settled(bound).await
    }

    /// The job's budget (for `shared_spend::follow`).
    pub fn budget(&self) -> Arc<budget::Budget> {
        self.shared.budget.clone()
    }
}

impl Drop for BrokerHandle {
    fn drop(&mut self) {
        self.closed.cancel();
        self.task.abort();
    }
}

/// Starts a job's broker on `listener` (normally `127.0.0.1:0`).
pub fn start(listener: TcpListener, config: BrokerConfig) -> Result<BrokerHandle, BrokerError> {
    let addr = listener
        .local_addr()
        .map_err(|source| BrokerError::LocalAddr {
            job_id: config.job_id.clone(),
            source,
        })?;
    // No Nagle delay on the engine's connection: streamed chunks leave as
    // soon as the upstream's arrive.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    serve(listener, format!("http://{addr}"), config)
}

/// Binds a job's broker socket at `path`, however long the path is
/// (`paddock_sandbox::unix_path`: the state directory may be deep).
pub fn bind_unix(path: &std::path::Path) -> std::io::Result<tokio::net::UnixListener> {
    let listener = paddock_sandbox::unix_path::bind(path)?;
    listener.set_nonblocking(true)?;
    tokio::net::UnixListener::from_std(listener)
}

/// Starts a job's broker on a per-job Unix socket (the `sandbox` rung: the
/// job reaches it through its sandbox's forwarder, and only its own socket
/// identifies it). `url` is the address the engine is given, the
/// forwarder's `http://127.0.0.1:PORT` inside the job's network namespace.
pub fn start_unix(
    listener: tokio::net::UnixListener,
    url: String,
    config: BrokerConfig,
) -> Result<BrokerHandle, BrokerError> {
    serve(listener, url, config)
}

fn serve<L>(listener: L, url: String, config: BrokerConfig) -> Result<BrokerHandle, BrokerError>
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(|source| BrokerError::Client {
            job_id: config.job_id.clone(),
            source,
        })?;
    let (tx, rx) = mpsc::unbounded_channel();
    let (policy_tx, policy_rx) = mpsc::unbounded_channel();
    let token = secret::job_token();
    let closed = tokio_util::sync::CancellationToken::new();
    let shared = Arc::new(Shared {
        budget: budget::Budget::new(config.ceilings.clone()),
        recorder: ledger::Recorder::new(
            config.ledger.clone(),
            tx,
            token.clone(),
            config.prices.clone(),
        ),
        config,
        token: token.clone(),
        client,
        next_seq: AtomicU64::new(1),
        policy: policy_tx,
        served_refused: std::sync::Mutex::new(None),
        reading: Arc::new(tokio::sync::Semaphore::new(server::READ_AT_ONCE)),
        upstream_calls: Arc::new(tokio::sync::Semaphore::new(connections::MAX_CONNECTIONS)),
        closed: closed.clone(),
    });
    let app = server::router(shared.clone());
    let listener =
        connections::Limited::new(listener, connections::MAX_CONNECTIONS, closed.clone());
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "broker server stopped");
        }
    });
    Ok(BrokerHandle {
        url,
        token,
        calls: rx,
        policy: policy_rx,
        shared,
        task,
        closed,
    })
}

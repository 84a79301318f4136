//! The broker: the only holder of provider keys. Each job gets its own
//! loopback endpoint and a worthless job token; the broker checks the token,
//! the model's price and the job's budget, injects the real key, forwards the
//! request upstream, streams the answer back unbuffered, and meters a copy of
//! it into one ledger row per model call. The `scripted` upstream is served
//! over loopback HTTP too, so every provider takes the same path.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};
use std::sync::Arc;

use paddock_protocol::ModelCall;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

pub mod meter;
pub mod prices;
pub mod scripted;
pub mod scripted_http;
pub mod secret;
mod server;
pub mod upstream;

pub use prices::PriceTable;
pub use secret::Secret;
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
    /// The job's ceiling in micro-dollars.
    pub budget_micros: Option<i64>,
}

/// Shared state of one job's broker.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: BrokerConfig,
    pub token: Secret,
    pub client: reqwest::Client,
    pub next_seq: AtomicU64,
    pub spent_micros: AtomicI64,
    pub held: AtomicBool,
    pub calls: mpsc::UnboundedSender<ModelCall>,
}

/// A running per-job broker. Dropping it stops the endpoint: the job token
/// dies with it.
#[derive(Debug)]
pub struct BrokerHandle {
    /// `http://127.0.0.1:PORT`, without a path.
    pub url: String,
    pub token: Secret,
    /// One ledger row per model call, in completion order.
    pub calls: mpsc::UnboundedReceiver<ModelCall>,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl BrokerHandle {
    /// True once the broker has refused a call because the budget was spent.
    pub fn held(&self) -> bool {
        self.shared.held.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Micro-dollars settled so far.
    pub fn spent_micros(&self) -> i64 {
        self.shared
            .spent_micros
            .load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for BrokerHandle {
    fn drop(&mut self) {
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
    serve(listener, format!("http://{addr}"), config)
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
    let token = secret::job_token();
    let shared = Arc::new(Shared {
        config,
        token: token.clone(),
        client,
        next_seq: AtomicU64::new(1),
        spent_micros: AtomicI64::new(0),
        held: AtomicBool::new(false),
        calls: tx,
    });
    let app = server::router(shared.clone());
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "broker server stopped");
        }
    });
    Ok(BrokerHandle {
        url,
        token,
        calls: rx,
        shared,
        task,
    })
}

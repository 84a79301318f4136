//! `paddock serve`: the HTTP runtime other systems dispatch jobs to. The
//! axum app is built from what it is given — a bound `TcpListener`, a
//! shutdown future, the store, the [`Runner`] (the same one `paddock run`
//! drives), the settings — so tests run it on `127.0.0.1:0` in temporary
//! directories. `jobs.rs` the jobs API, `events.rs` a job's events as SSE
//! or JSONL, `discover.rs` what the server offers (engines, rungs,
//! profiles, prices, capacity), `health.rs` liveness and readiness, `openapi.rs` the OpenAPI 3.1
//! document (utoipa) served at `/openapi.json`, `queue.rs` the scheduler over the store's persistent queue,
//! `turns.rs` one assistant turn streamed back on its response,
//! `usage.rs` spend rollups and the ledger, `json.rs` every JSON answer's writer (terminal controls escaped), `hub.rs` the live events of running jobs, `measured.rs` an event with its JSON size (measured once for the backlog and every stream), `outbox.rs` what an event stream buffers and how many a token holds, `headers.rs` the security headers of every answer, `body_deadline.rs` how long a request body may take, `head_limits.rs` how large a request's head may be, `write_deadline.rs` how long an answer may wait for its client to read, `problem.rs` errors as
//! problem+json (`extract.rs` makes malformed requests problems too, `job_id.rs` the job ids they name), `state.rs` what handlers share, `config.rs` the
//! settings. Routes and wire shapes: docs/api.md; operation: docs/serve.md.
//!
//! The operations layer is wired in here: `auth.rs` guards every route but
//! health with a bearer token of the route's scope, `metrics.rs` renders
//! `/metrics`. [`router`] is where a route or a layer is added,
//! [`AppState`] where what it needs is kept.

pub mod asker;
pub mod auth;
mod body_deadline;
mod config;
mod connections;
pub mod dashboard;
mod discover;
mod events;
mod extract;
mod head_limits;
mod headers;
mod health;
mod hub;
mod job_id;
mod jobs;
mod json;
mod measured;
pub mod metrics;
mod openapi;
mod outbox;
mod problem;
mod queue;
mod read_wait;
mod slots;
mod state;
pub mod submissions;
mod turns;
mod usage;
pub mod webhooks;
mod write_deadline;

use std::future::Future;
use std::sync::Arc;

use axum::routing::{delete, get, post};
use axum::Router;

pub use self::config::{ServeConfig, DEFAULT_LISTEN};
pub use self::connections::ConnectionLimits;
pub use self::discover::Discovery;
pub use self::events::NDJSON;
pub use self::health::Readiness;
pub use self::jobs::JobPage;
pub use self::openapi::document as openapi_document;
pub use self::problem::{Problem, PROBLEM_JSON};
pub use self::queue::{passed_over_reason, PassOver, Queue, CANCELLED_QUEUED};
pub use self::state::AppState;
pub use self::turns::JOB_ID_HEADER;
use crate::api_token::Scope;
use crate::runner::Runner;
use crate::store::SharedStore;

/// How often histogram samples are drained when nobody scrapes.
const METRICS_UPKEEP: std::time::Duration = std::time::Duration::from_secs(5);

/// What a server is built from.
pub struct Deps<S, H> {
    /// Bound already (port 0 in tests).
    pub listener: tokio::net::TcpListener,
    /// Resolves when the server should drain and stop (SIGTERM).
    pub shutdown: S,
    /// Resolves when the drain's grace is to be cut short, the running
    /// jobs cancelled at once (a second SIGTERM or Ctrl-C).
    pub hurry: H,
    pub store: SharedStore,
    pub runner: Runner,
    pub config: ServeConfig,
    /// The user's config: defaults for submitted specs.
    pub defaults: crate::config::Config,
    /// Completion webhooks, when configured.
    pub webhooks: Option<webhooks::Webhooks>,
}

/// The routes over `state`: health is open; everything else needs a
/// bearer token (`auth.rs`) of scope `read` (reading jobs, events, the
/// document, the metrics) or `submit` (submitting, cancelling,
/// disposing, turns).
pub fn router(state: AppState) -> Router {
    let authenticator = auth::Authenticator::new(state.store.clone());
    let gate = |needed| {
        axum::middleware::from_fn_with_state(
            auth::Gate {
                auth: authenticator.clone(),
                needed,
            },
            auth::require,
        )
    };
    let read = Router::new()
        .route("/v1/jobs", get(jobs::list))
        .route("/v1/jobs/{id}", get(jobs::get))
        .route("/v1/jobs/{id}/events", get(events::events))
        .route("/v1/discover", get(discover::discover))
        .route("/v1/usage", get(usage::usage))
        .route("/v1/ledger", get(usage::ledger))
        .route("/openapi.json", get(openapi::openapi_json))
        .route("/metrics", get(exposition))
        .route_layer(gate(Scope::Read))
        .route_layer(axum::middleware::from_fn(read_wait::promptly));
    let submit = Router::new()
        .route("/v1/jobs", post(jobs::submit))
        .route("/v1/jobs/{id}", delete(jobs::dispose))
        .route("/v1/jobs/{id}/cancel", post(jobs::cancel))
        .route("/v1/turns", post(turns::turn))
        .route_layer(gate(Scope::Submit));
    Router::new()
        .merge(read)
        .merge(submit)
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .merge(dashboard::routes(&state))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn(head_limits::checked))
        .layer(axum::middleware::map_response(headers::secured))
        .layer(axum::extract::DefaultBodyLimit::max(extract::BODY_LIMIT))
        .layer(axum::middleware::from_fn_with_state(
            state.config.connections.body_read_timeout,
            body_deadline::bounded,
        ))
        .with_state(state)
}

/// The answer to a method a route does not take: 405 as a problem
/// naming the method and the path (axum adds the route's `Allow`).
async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> Problem {
    Problem::new(
        405,
        "method_not_allowed",
        "the route does not take this method",
        format!(
            "{method} {}: this route does not take {method} (the Allow header lists what it takes)",
            uri.path()
        ),
    )
}

/// `GET /metrics`: the Prometheus exposition (`metrics.rs`).
#[utoipa::path(get, path = "/metrics", tag = "runtime", security(("bearer" = ["read"])),
    responses(
        (status = 200, description = "Prometheus text exposition (docs/serve.md lists the metrics)", content_type = "text/plain"),
        (status = 503, description = "No metrics recorder in this process", body = Problem, content_type = "application/problem+json"),
    ))]
async fn exposition(
    axum::extract::State(state): axum::extract::State<AppState>,
) -> Result<axum::response::Response, Problem> {
    use axum::response::IntoResponse as _;
    match &state.metrics {
        Some(m) => Ok((
            [(axum::http::header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
            m.render(),
        )
            .into_response()),
        None => Err(Problem::new(
            503,
            "metrics_unavailable",
            "no metrics recorder",
            "another metrics recorder is installed in this process".into(),
        )),
    }
}

/// 404 naming the path; a browser's page request (`dashboard::wants_page`)
/// gets it as the dashboard's error page.
async fn not_found(
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let problem = Problem::not_found(format!("no route {}", uri.path())).into_response();
    if dashboard::wants_page(&headers, uri.path()) {
        return dashboard::as_page(problem).await;
    }
    problem
}

/// Serves until `deps.shutdown` resolves, then drains: no job is claimed
/// any more, running jobs get the configured grace (cut short when
/// `deps.hurry` resolves), then are cancelled and concluded; event
/// streams end and the server stops.
pub async fn serve<S, H>(deps: Deps<S, H>)
where
    S: Future<Output = ()> + Send + 'static,
    H: Future<Output = ()> + Send + 'static,
{
    let Deps {
        listener,
        shutdown,
        hurry,
        store,
        runner,
        config,
        defaults,
        webhooks,
    } = deps;
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    let grace = config.drain_grace;
    let limits = config.connections;
    let mut state = AppState::new(store, runner, config, defaults, webhooks);
    let upkeep = match metrics::install() {
        Ok(m) => {
            let task = m.upkeep(METRICS_UPKEEP);
            state.metrics = Some(m);
            Some(task)
        }
        Err(e) => {
            tracing::warn!("serve: no /metrics: {e}");
            None
        }
    };
    turns::sweep(&state).await;
    let scheduler = tokio::spawn(Arc::clone(&state.queue).run());
    let reclaimer = tokio::spawn(Arc::clone(&state.queue).reclaim());
    let app = router(state.clone());
    let closing = state.closing.clone();
    let queue = Arc::clone(&state.queue);
    let stopped = async move {
        shutdown.await;
        tracing::info!("serve: draining");
        queue.drain_or_sooner(grace, hurry).await;
        closing.cancel();
    };
    connections::serve(listener, app, limits, stopped).await;
    tracing::debug!("serve: stopped serving {addr}");
    scheduler.abort();
    reclaimer.abort();
    if let Some(task) = upkeep {
        task.abort();
    }
}

//! `GET /healthz` (liveness: the process answers) and `GET /readyz`
//! (readiness: the store answers a query, at least one engine is on the
//! server's PATH, and the sandbox starts unless the user's config never
//! asks for it (`isolation = "sandbox"` makes it required): the sandbox
//! rung's answer, a failure of which is checked again after a minute,
//! `rung/sandbox.rs`). Readiness is
//! 200 when every required check passes, 503 otherwise; the body lists
//! every check either way.

use super::json::Json;
use axum::extract::State;
use axum::http::StatusCode;
use paddock_protocol::Isolation;
use serde::{Deserialize, Serialize};

use super::state::AppState;

/// Liveness.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Health {
    /// `ok`.
    pub status: String,
}

/// One readiness check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Check {
    /// `store`, `engine codex`, `engine claude`, `sandbox`.
    pub name: String,
    pub ok: bool,
    /// Whether readiness needs it.
    pub required: bool,
    pub detail: String,
}

/// Readiness.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Readiness {
    pub ready: bool,
    pub checks: Vec<Check>,
}

/// Liveness.
#[utoipa::path(get, path = "/healthz", tag = "runtime",
    responses((status = 200, description = "The server answers", body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
    })
}

/// Readiness.
#[utoipa::path(get, path = "/readyz", tag = "runtime",
    responses(
        (status = 200, description = "Every required check passes", body = Readiness),
        (status = 503, description = "A required check fails", body = Readiness),
    ))]
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Readiness>) {
    let mut checks = Vec::new();
    let store = state.store.queue_depth().await;
    checks.push(Check {
        name: "store".into(),
        ok: store.is_ok(),
        required: true,
        detail: match store {
            Ok(_) => format!("{} answers", state.runner.config().paths.db),
            Err(e) => super::problem::chain(&e),
        },
    });
    let engines = super::discover::engines(&state);
    let any_engine = engines.iter().any(|e| e.path.is_some());
    for e in engines {
        checks.push(Check {
            name: format!("engine {}", e.kind),
            ok: e.path.is_some(),
            // One engine is enough to run jobs.
            required: !any_engine,
            detail: match e.path {
                Some(p) => format!("{p} (pinned {})", e.pinned_version),
                None => format!(
                    "`{}` is not on PATH (pinned {})",
                    e.binary, e.pinned_version
                ),
            },
        });
    }
    let sandbox = state.runner.sandbox_problem().await;
    checks.push(Check {
        name: "sandbox".into(),
        ok: sandbox.is_none(),
        required: state.defaults.isolation == Some(Isolation::Sandbox),
        detail: sandbox.unwrap_or_else(|| "a sandbox starts on this host".into()),
    });
    let ready = checks.iter().all(|c| c.ok || !c.required);
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(Readiness { ready, checks }))
}

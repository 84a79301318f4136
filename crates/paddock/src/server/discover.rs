//! `GET /v1/discover`: what an orchestrator asks before it dispatches —
//! the engines at their pinned versions (and where this host has them),
//! the isolation rungs this host supports (the sandbox probe `paddock
//! doctor` and admission share), the host profiles (shipped presets and
//! the store's), the price table in effect, and the capacity (slots, what
//! runs, what is queued, whether the server is draining).

use super::json::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};

use super::problem::Problem;
use super::state::AppState;

/// What this server offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Discovery {
    /// Paddock's version.
    pub version: String,
    pub engines: Vec<Engine>,
    pub rungs: Vec<RungSupport>,
    pub profiles: Vec<Profile>,
    pub prices: Prices,
    pub capacity: Capacity,
    /// The queued jobs this server takes (`[[serve.lanes]]`); empty: every
    /// job. A job no server's lane takes stays queued.
    pub lanes: Vec<crate::store::Lane>,
}

/// An engine and its pin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Engine {
    /// `codex`, `claude`: a spec's `engine.kind`.
    pub kind: String,
    pub binary: String,
    pub package: String,
    /// The version Paddock is tested with (a job checks it at start).
    pub pinned_version: String,
    /// Where this host has it on the server's PATH, if it does.
    pub path: Option<String>,
}

/// An isolation rung on this host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RungSupport {
    /// `process`, `sandbox`.
    pub name: String,
    pub supported: bool,
    pub detail: String,
}

/// A host profile a spec can name (`policy.profile`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Profile {
    pub id: String,
    /// `preset` (shipped) or `store` (`paddock profile add`).
    pub source: String,
}

/// The price table in effect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Prices {
    pub version: String,
    pub sources: Vec<String>,
}

/// The queue's capacity now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Capacity {
    pub max_concurrent_jobs: u64,
    pub running: u64,
    pub queued: u64,
    pub draining: bool,
}

/// The engines and where the server's PATH has them.
pub fn engines(state: &AppState) -> Vec<Engine> {
    let config = state.runner.config();
    crate::engines::KINDS
        .iter()
        .map(|&kind| {
            let pin = crate::engines::pins::pin(kind);
            let path = which::which_in(pin.binary, config.host_path.as_ref(), &config.cwd)
                .ok()
                .map(|p| p.display().to_string());
            Engine {
                kind: kind.as_str().to_owned(),
                binary: pin.binary.to_owned(),
                package: pin.package.to_owned(),
                pinned_version: pin.version.to_owned(),
                path,
            }
        })
        .collect()
}

/// The rungs: `process` always, `sandbox` where one starts.
pub async fn rungs(state: &AppState) -> Vec<RungSupport> {
    let sandbox = state.runner.sandbox_problem().await;
    vec![
        RungSupport {
            name: "process".into(),
            supported: true,
            detail: "always available (no isolation)".into(),
        },
        RungSupport {
            name: "sandbox".into(),
            supported: sandbox.is_none(),
            detail: sandbox.unwrap_or_else(|| "a sandbox starts on this host".into()),
        },
    ]
}

/// What this server offers.
#[utoipa::path(get, path = "/v1/discover", tag = "runtime", security(("bearer" = ["read"])),
    responses(
        (status = 200, description = "Engines, rungs, profiles, prices, capacity", body = Discovery),
        (status = 503, description = "The store failed", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn discover(State(state): State<AppState>) -> Result<Json<Discovery>, Problem> {
    let mut profiles: Vec<Profile> = crate::policy::profile::PRESETS
        .iter()
        .map(|(id, _)| Profile {
            id: (*id).to_owned(),
            source: "preset".into(),
        })
        .collect();
    profiles.extend(state.store.profiles().await?.into_iter().map(|p| Profile {
        id: p.id,
        source: "store".into(),
    }));
    let prices = &state.runner.config().prices;
    Ok(Json(Discovery {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        engines: engines(&state),
        rungs: rungs(&state).await,
        profiles,
        prices: Prices {
            version: prices.version.clone(),
            sources: prices.sources.clone(),
        },
        capacity: Capacity {
            max_concurrent_jobs: state.queue.capacity() as u64,
            running: state.queue.running() as u64,
            queued: state.store.queue_depth().await?,
            draining: state.queue.is_draining(),
        },
        lanes: state.config.lanes.clone(),
    }))
}

//! The runner's errors, one enum per phase that can fail outside a job's
//! own record: [`AdmitError`] (the spec cannot run: nothing exists yet),
//! [`NotHere`] (this host cannot run an admitted job another might) and
//! [`RunError`] (the job could not be recorded to its end). A job that
//! fails once it exists is not an error here: it ends `failed` with its
//! reason. Each error has a stable [`ErrorCode`], which the CLI maps to
//! its exit code and a server to an HTTP status.

use std::path::PathBuf;

use crate::rung::RungError;

/// The stable code of a runner error (in the protocol crate: API
/// consumers branch on it too).
pub use paddock_protocol::api::ErrorCode;

/// Why a spec is not admitted (nothing of the job exists yet).
#[derive(Debug, thiserror::Error)]
pub enum AdmitError {
    #[error("{0}")]
    ResolveKey(String),
    /// The provider's credentials (`upstream.key`, `upstream.entra`).
    #[error("{0}")]
    Provider(#[from] crate::broker::provider::ProviderError),
    #[error(
        "engine.model `{model}` has no price in price table {table}; Paddock refuses models it cannot meter (set upstream.allow_unpriced = true to run it unpriced)"
    )]
    Unpriced { model: String, table: String },
    #[error(
        "engine.model `{model}` is not allowed by the {list} model allowlist (engine.allowed_models)"
    )]
    ModelNotAllowed { model: String, list: String },
    #[error("{0}")]
    LoadScenario(String),
    #[error("upstream.provider `scripted`: this paddock was built without the `scripted` feature")]
    ScriptedNotBuilt,
    #[error("{0}")]
    LoadTemplates(String),
    #[error("serialize job spec: {0}")]
    SerializeSpec(String),
    #[error("{0}")]
    Rung(#[from] RungError),
    #[error("{0}")]
    HostProfile(String),
    /// The host profile refuses the job (fail closed): a rule its rung or
    /// engine cannot enforce and its spec did not accept as degraded, or
    /// a limit it asks past. A server answers with code `policy_refused`
    /// and the rule.
    #[error("job refused before start: {0}")]
    PolicyRefused(crate::policy::Refusal),
    /// The sandbox would refuse one of the job's paths at its launch
    /// (`sandbox_view.rs`): a path on or under a part its view makes
    /// itself.
    #[error("job refused before start: {0}")]
    SandboxView(Box<super::sandbox_view::Unbindable>),
    /// The engine's binary cannot be resolved on this host
    /// (`engine_bin.rs`): `engine.binary` names no executable, or the
    /// engine is not on PATH. Asked by the callers whose job runs on the
    /// host that admits it (`Runner::engine_here`).
    #[error("job refused before start: {0}")]
    EngineNotFound(Box<super::engine_bin::Unresolved>),
    /// The host runs every job under one profile and the spec names
    /// another (or, given to the runner without the config's defaults,
    /// none).
    #[error(
        "policy.profile {}: this host runs every job under host profile `{host}` (host_profile in the config file); a job cannot choose another",
        named.as_deref().map_or("is not set".to_string(), |n| format!("`{n}` is not the host's"))
    )]
    NotHostProfile { named: Option<String>, host: String },
}

impl AdmitError {
    /// The error with the job spec's file named, where it says the host
    /// profile refuses the job, or the spec's `engine.binary` cannot be
    /// found or the sandbox cannot bind it (the refusal names the spec's fields; the caller
    /// that read the spec from `file` knows which file they are in).
    /// Other errors are as they were.
    pub fn in_spec_file(self, file: &std::path::Path) -> AdmitError {
        match self {
            AdmitError::PolicyRefused(mut refusal) => {
                let spec = format!("job spec {}", file.display());
                refusal.named = Some(match refusal.named.take() {
                    Some(by) => format!("{spec}: {by}"),
                    None => spec,
                });
                AdmitError::PolicyRefused(refusal)
            }
            AdmitError::SandboxView(unbindable) => {
                AdmitError::SandboxView(Box::new(unbindable.in_spec_file(file)))
            }
            AdmitError::EngineNotFound(unresolved) => {
                AdmitError::EngineNotFound(Box::new(unresolved.in_spec_file(file)))
            }
            e => e,
        }
    }

    /// The error with the config file's `key` named, where the host
    /// profile that could not be resolved (not in the store, a file that
    /// does not load) came from it, the spec naming none
    /// (`Config::profile_key`): `host_profile in the config file FILE:
    /// host profile …`. Before, it read as if the spec had named it.
    /// Other errors are as they were.
    pub fn in_config_file(self, key: &str, file: &std::path::Path) -> AdmitError {
        match self {
            AdmitError::HostProfile(e) => {
                AdmitError::HostProfile(format!("{key} in the config file {}: {e}", file.display()))
            }
            e => e,
        }
    }

    /// The error with what named the host profile (`by`: the spec's
    /// `policy.profile`, or a server's default for a spec naming none),
    /// where the host profile refuses the job or cannot be resolved or
    /// read (not in the store, a stored profile that does not validate, a
    /// file that does not load): `by: host profile …`. For a server,
    /// whose submitter reads the detail without the server's defaults
    /// before them. Other errors are as they were.
    pub fn profile_named_by(self, by: &str) -> AdmitError {
        match self {
            AdmitError::PolicyRefused(mut refusal) => {
                refusal.named = Some(match refusal.named.take() {
                    Some(spec) => format!("{spec}: {by}"),
                    None => by.to_owned(),
                });
                AdmitError::PolicyRefused(refusal)
            }
            AdmitError::HostProfile(e) => AdmitError::HostProfile(format!("{by}: {e}")),
            e => e,
        }
    }

    pub fn code(&self) -> ErrorCode {
        match self {
            AdmitError::SerializeSpec(_) => ErrorCode::Internal,
            _ => ErrorCode::BadInput,
        }
    }
}

/// Why this host cannot run an admitted job that another host might
/// (`Runner::runs_here`): what of the job depends on the host that runs
/// it. A server asks it of a job it claimed, before anything of the job
/// starts, and passes a job it refuses over to the fleet's other servers
/// (`server::queue`); each says what to fix on this host.
#[derive(Debug, thiserror::Error)]
pub enum NotHere {
    /// The engine's binary cannot be resolved here (`engine_bin.rs`).
    #[error("{0}")]
    Engine(Box<super::engine_bin::Unresolved>),
    /// On the `sandbox` rung, the sandbox here would refuse one of the
    /// job's paths (`sandbox_view.rs`: the engine's directories, the jobs
    /// directory, the hook's).
    #[error("{0}")]
    SandboxView(Box<super::sandbox_view::Unbindable>),
    /// The job asks for the `sandbox` rung and no sandbox starts here
    /// (`RungError::SandboxUnavailable`, from its admission again here).
    #[error("{0}")]
    Rung(RungError),
}

/// Why a started job could not run to a final record.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("take the job's lease: {dir}: {error}")]
    TakeLease {
        job_id: String,
        dir: PathBuf,
        error: std::io::Error,
    },
    /// The store failed under the job: its record is not whole.
    #[error("write the job to the store: {db}: {message}")]
    WriteStore {
        job_id: String,
        /// The store (a file's path, a PostgreSQL URL without its password).
        db: String,
        message: String,
    },
    /// The job's task ended without a result (it panicked or was aborted).
    #[error("job {job_id}: its task ended without a result: {message}")]
    JoinJob { job_id: String, message: String },
    /// Another host's reaper took the job for dead (its heartbeat was
    /// late) and failed it; this process stopped it.
    #[error(
        "job {job_id} was reclaimed by another host's reaper (its heartbeat in the store was \
         older than that host's TTL): it was stopped here, and its record is the one that \
         reaper wrote (`paddock show {job_id}`)"
    )]
    Reclaimed { job_id: String },
}

impl RunError {
    pub fn code(&self) -> ErrorCode {
        match self {
            RunError::WriteStore { .. } => ErrorCode::StoreLost,
            RunError::TakeLease { .. } | RunError::JoinJob { .. } | RunError::Reclaimed { .. } => {
                ErrorCode::Internal
            }
        }
    }

    /// The job the error is about.
    pub fn job_id(&self) -> &str {
        match self {
            RunError::TakeLease { job_id, .. }
            | RunError::WriteStore { job_id, .. }
            | RunError::JoinJob { job_id, .. }
            | RunError::Reclaimed { job_id } => job_id,
        }
    }
}

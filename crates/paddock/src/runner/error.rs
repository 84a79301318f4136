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
    /// A secret the spec names (`upstream.key`, a forge's or a push's
    /// credential) does not resolve: a variable not set, a file not
    /// there, an empty or malformed value. `publish`: one needed only to
    /// publish the job's result.
    #[error(
        "{field}: {error}{}",
        if *publish { " (needed to publish the job's result)" } else { "" }
    )]
    Secret {
        field: &'static str,
        error: crate::secret::SecretError,
        publish: bool,
    },
    /// The provider's credentials (`upstream.key`, `upstream.entra`).
    #[error(transparent)]
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
    /// The spec's local source is surely no repository on this host
    /// (`source_here.rs`): nothing of the job was made.
    #[error("{0}")]
    Source(super::source_here::SourceMissing),
    #[error("serialize job spec: {0}")]
    SerializeSpec(String),
    #[error(transparent)]
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

/// Why this host cannot run a queued job that another host might
/// (`Runner::runs_here`, `Runner::has_here`, [`NotHere::of_admission`]):
/// what of the job depends on the host that runs it. A server asks it of
/// a job it claimed, before anything of the job starts, and passes a job
/// it refuses over to the fleet's other servers (`server::queue`); each
/// says what to fix on this host.
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
    /// A file or directory the spec names (`JobSpec::host_references`:
    /// its local repository, templates, skills, scenario, host profile
    /// file, a push's known hosts...) cannot be looked at here.
    #[error(
        "{field} {}: cannot be read on this host ({error}); the server that runs the job reads \
         it there: put it at that path on this host for this server to run the job",
        path.display()
    )]
    Path {
        field: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
    /// The spec's local source is surely no repository here
    /// (`source_here.rs`), with what to do on this host by what was
    /// found: nothing there (put the repository there), something that is
    /// no repository's top level (name one: the spec's to change, or this
    /// host's path), a look the system refused (let the server's user
    /// reach it). Before, each said to put the repository at that path,
    /// also after "set repository.path to TOP".
    #[error("{missing}, on this host; {fix}", missing = .0, fix = source_fix(.0.why()))]
    Source(super::source_here::SourceMissing),
    /// A secret the spec names does not resolve here (a variable not in
    /// this server's environment, a file not there, an empty or malformed
    /// value).
    #[error("{field}: {error}, on this host; {}", secret_fix(error))]
    Secret {
        field: &'static str,
        error: crate::secret::SecretError,
    },
    /// The provider's credentials are this host's and are not found or
    /// not taken here (cloud credentials, a token endpoint).
    #[error(
        "{0}, on this host; the server that runs the job uses its own provider credentials: \
         give this server working ones for this server to run the job"
    )]
    Provider(crate::broker::provider::ProviderError),
    /// The job's upstream is the scripted one and this paddock was built
    /// without it.
    #[error(
        "upstream.provider `scripted`: this paddock was built without the `scripted` feature; \
         a server built with it (the default features) runs the job"
    )]
    ScriptedNotBuilt,
    /// This host runs every job under one host profile and the spec
    /// names another.
    #[error(
        "policy.profile {}: this host runs every job under host profile `{host}` (host_profile \
         in its config file), which a job cannot choose against",
        named.as_deref().map_or("is not set".to_string(), |n| format!("`{n}` is not this host's"))
    )]
    HostProfile { named: Option<String>, host: String },
    /// The host profile refuses the job for a rule the `process` rung
    /// cannot enforce, where `isolation = "auto"` fell back to it because
    /// no sandbox starts here (`Refusal::on_fallback`): on a host whose
    /// sandbox starts the rule is enforced.
    #[error(
        "job refused before start: {0}; a server whose sandbox starts runs the job there, where \
         the rule is enforced: make Paddock's sandbox start on this host (`paddock doctor` shows \
         what is missing) for this server to run the job"
    )]
    Policy(crate::policy::Refusal),
}

/// What to do on this host about a local source that is surely no
/// repository here.
fn source_fix(why: &super::source_here::Why) -> &'static str {
    use super::source_here::Why;
    match why {
        Why::NotThere(_) => {
            "the server that runs the job clones it there: put the repository at that path on \
             this host for this server to run the job"
        }
        Why::NotARepository(_) => {
            "the server that runs the job clones the repository whose top level the spec names: \
             name one that is there on this host for this server to run the job"
        }
        Why::Refused(_) => {
            "the server that runs the job looks at it as its own user: let this server's user \
             reach that path for this server to run the job"
        }
    }
}

/// What to do on this host about a secret that does not resolve here.
fn secret_fix(error: &crate::secret::SecretError) -> &'static str {
    use crate::secret::SecretError;
    match error {
        SecretError::EnvMissing { .. } => {
            "the server that runs the job reads the variable from its own environment: start \
             this server with it set for this server to run the job"
        }
        SecretError::FileRead { .. } => {
            "the server that runs the job reads the file there: put it at that path on this \
             host, readable by this server's user, for this server to run the job"
        }
        SecretError::Empty { .. } | SecretError::Malformed { .. } => {
            "the server that runs the job reads its own value: give this server a value of one \
             line for this server to run the job"
        }
    }
}

impl NotHere {
    /// Why this host cannot run a job whose admission here failed with
    /// `error`, where what failed is this host's (its credentials, its
    /// sandbox, for a job asking for it or a host profile's rule the rung
    /// `auto` fell back to here cannot enforce, its build, its host
    /// profile): another host's admission of the same spec may pass.
    /// Any other error, the spec's own, is given back: a model the price
    /// table has no price for among them (a fleet meters with one table,
    /// and such a model is most often written wrong: passed over, it
    /// waited for a server that never came).
    pub fn of_admission(error: AdmitError) -> Result<NotHere, AdmitError> {
        use crate::broker::provider::ProviderError;
        Ok(match error {
            AdmitError::Rung(e @ RungError::SandboxUnavailable { .. }) => NotHere::Rung(e),
            AdmitError::Secret { field, error, .. } => NotHere::Secret { field, error },
            AdmitError::Provider(ProviderError::NoKey { provider }) => {
                return Err(AdmitError::Provider(ProviderError::NoKey { provider }))
            }
            AdmitError::Provider(e) => NotHere::Provider(e),
            AdmitError::ScriptedNotBuilt => NotHere::ScriptedNotBuilt,
            AdmitError::NotHostProfile { named, host } => NotHere::HostProfile { named, host },
            AdmitError::PolicyRefused(refusal) if refusal.on_fallback => NotHere::Policy(refusal),
            AdmitError::EngineNotFound(e) => NotHere::Engine(e),
            AdmitError::SandboxView(e) => NotHere::SandboxView(e),
            AdmitError::Source(e) => NotHere::Source(e),
            e => return Err(e),
        })
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An admission error that wraps another says it once in its chain
    /// (what a server's 422 `detail` and a failed job's reason are): the
    /// wrapper is transparent. Before, `Rung` and `Provider` displayed
    /// the inner error and gave it as their source too, and the chain
    /// said it twice (`isolation = "sandbox": …: isolation = "sandbox":
    /// …`).
    #[test]
    fn a_wrapped_admission_error_is_said_once_in_its_chain() {
        let errors = [
            AdmitError::Rung(RungError::SandboxUnavailable {
                why: "no user namespaces".into(),
            }),
            AdmitError::Provider(crate::broker::provider::ProviderError::NoKey {
                provider: "openai",
            }),
        ];
        assert_eq!(
            errors
                .iter()
                .map(|e| crate::error_chain::chain(e))
                .collect::<Vec<_>>(),
            [
                "isolation = \"sandbox\": this host cannot start Paddock's sandbox: no user \
                 namespaces (`paddock doctor` shows what is missing; `isolation = \"process\"` \
                 runs unconfined)",
                "upstream.key: provider openai needs a key",
            ]
        );
    }
}

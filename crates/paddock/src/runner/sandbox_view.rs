//! Admission's check of a sandboxed job's paths against the sandbox's
//! view: the engine's directories (its package tree, its own directory
//! and node's, read-only), the job's work, home and tmp under the jobs
//! directory, and what the host profile's hook needs. The helper's
//! planning refuses a path on or under a part the view makes itself (a
//! path under /proc, /tmp or /dev/shm themselves, `paddock_sandbox`'s
//! `own_parts.rs`); the same rules run here, on the paths the launch
//! would give it (`launcher::unbindable`), so such a job is refused before
//! it is recorded or provisioned instead of failing at its launch. The
//! helper still checks at launch (the paths may have changed since).
//!
//! A read-only path that would show the job what is not its own is
//! refused here too (`launcher::shows_private`): one that is or holds
//! Paddock's jobs directory, store, artifacts or host directory (every
//! job's workspace, record and sockets: read-only is enough to connect to
//! another job's egress proxy), the home directory of the user Paddock
//! runs as, or a file one of the job's credentials is read from; or one
//! inside Paddock's directories but not the job's own. An engine binary
//! in such a directory (`engine.binary = "~/codex"` binds the home
//! directory whole), or a `[jobs]` path holding it, is the way in; and
//! the system directories every view binds (`/usr`, `/opt`, /etc's shared
//! files) are read-only paths of it too: a jobs directory under `/opt`
//! refuses every sandboxed job.

use std::path::{Path, PathBuf};

use paddock_protocol::{EngineKind, JobSpec, KeyRef};

use super::engine_bin::{engine_path, resolve_engine};
use super::RunnerConfig;
use crate::engines::{self, CommandSpec};
use crate::launcher::{self, SandboxPaths, Source};
use crate::policy::JobPolicy;

/// A path of a sandboxed job's view the sandbox would refuse, with where
/// it comes from and what to change.
#[derive(Debug)]
pub struct Unbindable {
    whence: Whence,
    refused: Refused,
    /// The job spec's file, when the path comes from one of its fields
    /// and the caller read it from a file ([`Unbindable::in_spec_file`]).
    spec_file: Option<String>,
}

/// Why the path is refused.
#[derive(Debug)]
enum Refused {
    /// It is on or under a part the view makes itself.
    Replaced(paddock_sandbox::own_parts::Replaced),
    /// Read-only, it would show the job a private place of the host.
    Shows {
        bind: PathBuf,
        private: launcher::Private,
    },
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Replaced(r) => r.fmt(f),
            Refused::Shows { bind, private } => {
                let how = if private.path.starts_with(bind) {
                    if private.path == *bind {
                        "it is"
                    } else {
                        "it holds"
                    }
                } else {
                    "it is inside"
                };
                write!(
                    f,
                    "{} would show the job, read-only, what is not its own: {how} {} ({})",
                    bind.display(),
                    private.path.display(),
                    private.what
                )
            }
        }
    }
}

/// Which of the job's paths, from which setting.
#[derive(Debug)]
enum Whence {
    /// The engine's directories; `pinned`: its binary is the spec's
    /// `engine.binary`, else found on PATH.
    Engine {
        kind: EngineKind,
        binary: PathBuf,
        pinned: bool,
    },
    /// The job's work, home and tmp, under the jobs directory.
    Job { jobs: PathBuf },
    /// What the host profile's hook needs.
    Hook { exe: PathBuf, jobs: PathBuf },
    /// The config file's `[jobs]` (`key` is `jobs.path` or
    /// `jobs.read_only`).
    Tools { key: &'static str },
    /// The system directories and /etc's shared files every view binds.
    System,
}

impl Unbindable {
    /// The refusal naming `file`, the job spec's, when the path comes
    /// from one of its fields (`engine.binary`).
    pub fn in_spec_file(mut self, file: &Path) -> Unbindable {
        if let Whence::Engine { pinned: true, .. } = self.whence {
            self.spec_file = Some(file.display().to_string());
        }
        self
    }
}

impl std::fmt::Display for Unbindable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let refused = &self.refused;
        match &self.whence {
            Whence::Engine {
                kind,
                binary,
                pinned,
            } => {
                let chosen = match (pinned, &self.spec_file) {
                    (true, Some(file)) => {
                        format!("engine.binary {} in job spec {file}", binary.display())
                    }
                    (true, None) => format!("engine.binary {}", binary.display()),
                    (false, _) => format!("`{kind}` found on PATH at {}", binary.display()),
                };
                write!(
                    f,
                    "the sandbox cannot bind engine {kind}'s directories (its package tree, its \
                     own directory and node's, read-only; {chosen}): {refused} (install the \
                     engine in a directory of its own and set engine.binary or PATH to it)"
                )
            }
            Whence::Job { jobs } => write!(
                f,
                "the sandbox cannot bind the job's work, home and tmp (under the jobs directory \
                 {}: --jobs-dir or PADDOCK_JOBS_DIR): {refused}",
                jobs.display()
            ),
            Whence::Hook { exe, jobs } => write!(
                f,
                "the sandbox cannot bind what the host profile's hook needs (the paddock binary \
                 {}, the profile and record under the jobs directory {}): {refused}",
                exe.display(),
                jobs.display()
            ),
            Whence::Tools { key } => write!(
                f,
                "the sandbox cannot bind the host's tools ({key} in the config file, read-only): \
                 {refused} (name the tools' own directories)"
            ),
            Whence::System => write!(
                f,
                "the sandbox binds the system directories into every job, read-only (/usr, /bin, \
                 /sbin, /lib…, /opt and /etc's shared files): {refused} (keep Paddock's \
                 directories, its user's home and credentials' files out of them)"
            ),
        }
    }
}

impl std::error::Error for Unbindable {}

/// Refuses `spec`, to run on the `sandbox` rung as job `id` (under the
/// host profile `policy`, when it has one), when its sandbox would refuse
/// one of its paths, or one would show it a private place of the host
/// ([`private_places`]). An engine binary that cannot be resolved is
/// left to [`super::Runner::engine_here`] and provisioning, which name it.
pub fn check(
    spec: &JobSpec,
    id: &str,
    policy: Option<&JobPolicy>,
    config: &RunnerConfig,
) -> Result<(), Box<Unbindable>> {
    let host_path = config.host_path.as_deref();
    let Ok(binary) = resolve_engine(spec, host_path, &config.cwd) else {
        return Ok(());
    };
    let engine = Engine {
        kind: spec.engine.kind,
        binary,
        pinned: spec
            .engine
            .binary
            .as_ref()
            .is_some_and(|p| p.components().count() > 1),
    };
    let host = ViewHost::of(config);
    let private = private_places(spec, policy, &host);
    view(engine, id, policy.is_some(), &private, &host)
}

/// What of the host a sandboxed job's view is built from: its PATH and
/// working directory (the engine found, its PATH's directories), the
/// config file's `[jobs]`, the `paddock` binary (the hook's), Paddock's
/// own directories and the server's secrets (places the view may not
/// show). A [`RunnerConfig`]'s ([`ViewHost::of`]), or `paddock doctor`'s.
#[derive(Debug, Clone, Copy)]
pub struct ViewHost<'a> {
    pub paths: &'a crate::paths::Paths,
    pub host_path: Option<&'a std::ffi::OsStr>,
    pub cwd: &'a Path,
    pub host_dir: &'a Path,
    pub helper_exe: &'a Path,
    pub tools: &'a super::JobTools,
    pub host_secrets: &'a [(String, PathBuf)],
}

impl<'a> ViewHost<'a> {
    /// The host a runner with `config` runs its jobs on.
    pub fn of(config: &'a RunnerConfig) -> ViewHost<'a> {
        ViewHost {
            paths: &config.paths,
            host_path: config.host_path.as_deref(),
            cwd: &config.cwd,
            host_dir: &config.host_dir,
            helper_exe: &config.helper_exe,
            tools: &config.tools,
            host_secrets: &config.host_secrets,
        }
    }
}

/// Refuses the engine of `kind` as this host's PATH gives it (a spec
/// naming no `engine.binary` runs it), when the sandbox of any job it ran
/// in would refuse one of its directories or show through one a private
/// place of the host (those every job has: [`host_places`]), for `paddock
/// doctor` to say before a job is refused for it. `Ok(None)`: the engine
/// is not on PATH; `Ok(Some(binary))`: its view is whole.
pub fn check_engine(
    kind: EngineKind,
    host: &ViewHost<'_>,
) -> Result<Option<PathBuf>, Box<Unbindable>> {
    let pin = engines::adapter(kind).install();
    let Ok(binary) = which::which_in(pin.binary, host.host_path, host.cwd) else {
        return Ok(None);
    };
    let engine = Engine {
        kind,
        binary: binary.clone(),
        pinned: false,
    };
    view(engine, "doctor", false, &host_places(host), host).map(|()| Some(binary))
}

/// The engine whose directories a view binds.
struct Engine {
    kind: EngineKind,
    binary: PathBuf,
    /// Its binary is the spec's `engine.binary`, else found on PATH.
    pinned: bool,
}

/// Refuses the view of job `id` running `engine` (with the host
/// profile's hook, `hook`) when the sandbox would refuse one of its paths,
/// or one would show it a place of `private`.
fn view(
    engine: Engine,
    id: &str,
    hook: bool,
    private: &[launcher::Private],
    host: &ViewHost<'_>,
) -> Result<(), Box<Unbindable>> {
    let Engine {
        kind,
        binary,
        pinned,
    } = engine;
    let host_path = host.host_path;
    let (program, _) = engines::adapter(kind).native_program(&binary);
    let root = host.paths.jobs.join(id);
    let meta = root.join("meta");
    let cmd = CommandSpec {
        program,
        args: Vec::new(),
        env: vec![(
            "PATH".to_string(),
            engine_path(&binary, host_path, host.cwd, &host.tools.path),
        )],
        cwd: root.join("work"),
        stdin: None,
        protect: Vec::new(),
    };
    let (mut extra_ro, extra_rw) = match hook {
        true => launcher::hook_paths(&meta, Some(host.helper_exe)),
        false => (Vec::new(), Vec::new()),
    };
    extra_ro.extend(host.tools.read_only.iter().cloned());
    let paths = SandboxPaths {
        job_id: id.to_string(),
        work: root.join("work"),
        home: root.join("home"),
        tmp: root.join("tmp"),
        broker_socket: meta.join("broker.sock"),
        egress_socket: None,
        // Every command of a sandboxed job is watched (`rung/sandbox.rs`).
        direct: Some(paddock_sandbox::DirectWatch {
            report: meta.join("direct.sock"),
            tag: String::new(),
        }),
        timeout_secs: 0,
        extra_ro,
        extra_rw,
        limits: launcher::default_limits(),
        allow_without_cgroups: true,
        cgroup_root: None,
        notices: None,
        hidden: Vec::new(),
    };
    let (source, refused) = match launcher::unbindable(&cmd, &paths) {
        Some((source, refused)) => (source, Refused::Replaced(refused)),
        None => match launcher::shows_private(&cmd, &paths, private, &root) {
            Some((source, bind, private)) => (
                source,
                Refused::Shows {
                    bind,
                    private: private.clone(),
                },
            ),
            None => return Ok(()),
        },
    };
    // A `[jobs]` entry is named as such: its directories reach the view
    // through PATH (as the engine's) or as the hook's extra paths.
    let bind = match &refused {
        Refused::Replaced(r) => r.path.clone(),
        Refused::Shows { bind, .. } => bind.clone(),
    };
    let is = |list: &[PathBuf]| {
        list.iter()
            .any(|p| p.canonicalize().unwrap_or_else(|_| p.clone()) == bind)
    };
    let tools = if source == Source::System {
        None
    } else if is(&host.tools.path) {
        Some("jobs.path")
    } else if is(&host.tools.read_only) {
        Some("jobs.read_only")
    } else {
        None
    };
    let whence = match (tools, source) {
        (Some(key), _) => Whence::Tools { key },
        (None, source) => match source {
            Source::Engine => Whence::Engine {
                kind,
                pinned,
                binary,
            },
            Source::Job => Whence::Job {
                jobs: host.paths.jobs.clone(),
            },
            Source::Hook => Whence::Hook {
                exe: host.helper_exe.to_path_buf(),
                jobs: host.paths.jobs.clone(),
            },
            Source::System => Whence::System,
        },
    };
    Err(Box::new(Unbindable {
        whence,
        refused,
        spec_file: None,
    }))
}

/// The places of this host no read-only path of job `spec`'s view may
/// show (`launcher::shows_private`): Paddock's jobs directory, store,
/// artifacts and host directory (and no path inside them but the job's
/// own), the home directories of the user Paddock runs as and the stores
/// of keys and tokens inside them (`user_home.rs`), and
/// each file a credential of the job or of its host profile is read from
/// (`file:` references).
fn private_places(
    spec: &JobSpec,
    policy: Option<&JobPolicy>,
    host: &ViewHost<'_>,
) -> Vec<launcher::Private> {
    let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let mut places = host_places(host);
    for (field, reference) in credential_files(spec, policy) {
        if let KeyRef::File(path) = reference {
            places.push(launcher::Private {
                path: real(path),
                what: format!("the file {field} is read from"),
                inside_too: false,
            });
        }
    }
    places
}

/// The places of this host no read-only path of any job's view may
/// show, whatever the job: the user's homes and the stores of keys in
/// them, Paddock's own directories, and the server's secrets.
fn host_places(host: &ViewHost<'_>) -> Vec<launcher::Private> {
    let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let own = |path: &Path, what: &str| launcher::Private {
        path: real(path),
        what: what.to_string(),
        inside_too: true,
    };
    let mut places: Vec<launcher::Private> = super::user_home::private_places();
    places.extend([
        own(
            &host.paths.jobs,
            "Paddock's jobs directory: every job's workspace, and its broker and egress sockets",
        ),
        own(
            &host.paths.artifacts,
            "Paddock's artifacts: every job's patch, closeout and output",
        ),
        own(
            host.host_dir,
            "Paddock's host directory: its slots and caches",
        ),
    ]);
    if let crate::store::StoreAt::File(db) = &host.paths.db {
        places.push(own(
            db,
            "Paddock's store: every job's record, events and ledger",
        ));
    }
    for (setting, path) in host.host_secrets {
        places.push(launcher::Private {
            path: real(path),
            what: format!("the file {setting} is read from"),
            inside_too: false,
        });
    }
    places
}

/// Every credential reference of the job: its spec's and its host
/// profile's, each with the setting that names it.
fn credential_files<'a>(
    spec: &'a JobSpec,
    policy: Option<&'a JobPolicy>,
) -> Vec<(String, &'a KeyRef)> {
    let results = &spec.results;
    let github = results.github.as_ref();
    let mut refs: Vec<(String, &KeyRef)> = [
        ("upstream.key", spec.upstream.key.as_ref()),
        ("repository.token", spec.repository.token.as_ref()),
        (
            "results.github.token",
            github.and_then(|g| g.token.as_ref()),
        ),
        (
            "results.github.app.private_key",
            github.and_then(|g| g.app.as_ref()).map(|a| &a.private_key),
        ),
        (
            "results.gitlab.token",
            results.gitlab.as_ref().map(|g| &g.token),
        ),
        (
            "results.push.token",
            results.push.as_ref().and_then(|p| p.token.as_ref()),
        ),
        (
            "results.push.ssh_key",
            results.push.as_ref().and_then(|p| p.ssh_key.as_ref()),
        ),
    ]
    .into_iter()
    .filter_map(|(field, r)| r.map(|r| (field.to_string(), r)))
    .collect();
    if let Some(network) = policy.and_then(|p| p.profile.network.as_ref()) {
        refs.extend(network.credentials.iter().map(|c| {
            (
                format!("the host profile's network.credentials `{}`", c.name),
                &c.secret,
            )
        }));
    }
    refs
}

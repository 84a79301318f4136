//! Which engine binary a job runs and the PATH it gets: the spec's pinned
//! path, or the engine's name looked up on the host's PATH (relative
//! entries against the directory the runner was given, never the process's
//! own lookup); never a fallback to another engine.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use paddock_protocol::{EngineKind, JobSpec};

use crate::engines::{self, Pin};

/// An engine binary that cannot be resolved: where it was looked for,
/// the setting that said so and what to do. Admission refuses a job with
/// it where the job runs on the host that admits it (`Runner::engine_here`);
/// provisioning fails a job with it (the binary may have gone since).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    kind: EngineKind,
    missing: Missing,
    /// The job spec's file, when the binary is its `engine.binary` and the
    /// caller read it from a file ([`Unresolved::in_spec_file`]).
    spec_file: Option<String>,
}

/// Which binary is missing, by the setting that chose it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Missing {
    /// `engine.binary`, a path: no executable file there.
    Pinned(PathBuf),
    /// `engine.binary`, a bare name: not on PATH.
    Named(String),
    /// No `engine.binary`: the engine's own name, not on PATH.
    Default(Pin),
}

impl Unresolved {
    /// The refusal naming `file`, the job spec's, when the binary is its
    /// `engine.binary`.
    pub fn in_spec_file(mut self, file: &Path) -> Unresolved {
        if !matches!(self.missing, Missing::Default(_)) {
            self.spec_file = Some(file.display().to_string());
        }
        self
    }
}

impl std::fmt::Display for Unresolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = self.kind;
        let file = match &self.spec_file {
            Some(file) => format!(" in job spec {file}"),
            None => String::new(),
        };
        match &self.missing {
            Missing::Pinned(binary) => write!(
                f,
                "engine {kind}: engine.binary {}{file} does not exist or is not executable (set \
                 engine.binary to the engine's executable, or remove it to run `{}` from PATH)",
                binary.display(),
                engines::adapter(kind).install().binary
            ),
            Missing::Named(name) => write!(
                f,
                "engine {kind}: engine.binary `{name}`{file} was not found on PATH (add its \
                 directory to PATH, or set engine.binary to the executable's path)"
            ),
            Missing::Default(pin) => write!(
                f,
                "engine {kind}: `{}` was not found on PATH (engine.binary is not set); Paddock is \
                 tested with {} {}: {}; or set engine.binary to the engine's executable",
                pin.binary,
                pin.package,
                pin.version,
                pin.install_hint()
            ),
        }
    }
}

impl std::error::Error for Unresolved {}

/// The engine binary: the spec's pinned path, or the engine's name on PATH.
/// Never a fallback to another engine.
pub fn resolve_engine(
    spec: &JobSpec,
    host_path: Option<&OsStr>,
    cwd: &Path,
) -> Result<PathBuf, Unresolved> {
    let kind = spec.engine.kind;
    let unresolved = |missing| Unresolved {
        kind,
        missing,
        spec_file: None,
    };
    match &spec.engine.binary {
        Some(p) if p.components().count() > 1 => match is_executable(p) {
            true => Ok(p.clone()),
            false => Err(unresolved(Missing::Pinned(p.clone()))),
        },
        Some(p) => {
            let name = p.display().to_string();
            which::which_in(&name, host_path, cwd).map_err(|_| unresolved(Missing::Named(name)))
        }
        None => {
            let pin = engines::adapter(kind).install();
            which::which_in(pin.binary, host_path, cwd)
                .map_err(|_| unresolved(Missing::Default(pin)))
        }
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// PATH for the engine: its own directory (and its real directory when it
/// is a symlink), the directory of `node` when found, the host's tool
/// directories (the config file's `[jobs] path`, `RunnerConfig::tools`),
/// and the system dirs.
pub fn engine_path(
    binary: &Path,
    host_path: Option<&OsStr>,
    cwd: &Path,
    tools: &[std::path::PathBuf],
) -> String {
    let mut dirs: Vec<String> = Vec::new();
    let mut push = |p: Option<&Path>| {
        if let Some(d) = p {
            let d = d.display().to_string();
            if !d.is_empty() && !dirs.contains(&d) {
                dirs.push(d);
            }
        }
    };
    push(binary.parent());
    if let Ok(real) = std::fs::canonicalize(binary) {
        push(real.parent());
    }
    if let Ok(node) = which::which_in("node", host_path, cwd) {
        push(node.parent());
    }
    for d in tools {
        push(Some(d));
    }
    for d in [
        "/usr/local/sbin",
        "/usr/local/bin",
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
    ] {
        push(Some(Path::new(d)));
    }
    dirs.join(":")
}

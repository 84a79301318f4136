//! Which engine binary a job runs and the PATH it gets: the spec's pinned
//! path, or the engine's name looked up on the host's PATH (relative
//! entries against the directory the runner was given, never the process's
//! own lookup); never a fallback to another engine.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use paddock_protocol::JobSpec;

use crate::engines;

/// The engine binary: the spec's pinned path, or the engine's name on PATH.
/// Never a fallback to another engine.
pub fn resolve_engine(
    spec: &JobSpec,
    host_path: Option<&OsStr>,
    cwd: &Path,
) -> Result<PathBuf, String> {
    let pin = engines::adapter(spec.engine.kind).install();
    let default = pin.binary;
    match &spec.engine.binary {
        Some(p) if p.components().count() > 1 => {
            if is_executable(p) {
                Ok(p.clone())
            } else {
                Err(format!(
                    "engine {}: binary {} does not exist or is not executable",
                    spec.engine.kind,
                    p.display()
                ))
            }
        }
        other => {
            let name = other
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| default.to_string());
            which::which_in(&name, host_path, cwd).map_err(|_| {
                format!(
                    "engine {}: `{name}` was not found on PATH; Paddock is tested with {} {}: {}; or set engine.binary",
                    spec.engine.kind,
                    pin.package,
                    pin.version,
                    pin.install_hint()
                )
            })
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
/// is a symlink), the directory of `node` when found, and the system dirs.
pub fn engine_path(binary: &Path, host_path: Option<&OsStr>, cwd: &Path) -> String {
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

//! Why a sandbox could not be set up. Each variant is named after the step
//! that failed and carries the path, port or errno involved; the helper
//! prints it and the command does not run (fail closed).

use std::path::PathBuf;

use nix::errno::Errno;

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("read the sandbox policy from ${var}: {detail}")]
    ReadPolicy { var: &'static str, detail: String },
    #[error("the sandbox policy has an empty command")]
    EmptyCommand,
    #[error("cgroup {path}: {detail}")]
    Cgroup { path: PathBuf, detail: String },
    #[error("scheduling policy ({step}): {source}")]
    Scheduling { step: &'static str, source: Errno },
    #[error("mark inherited file descriptors close-on-exec: {source}")]
    Descriptors { source: Errno },
    #[error("unshare the {what} namespaces: {source}")]
    Unshare { what: &'static str, source: Errno },
    #[error("write the user namespace map {path}: {source}")]
    IdMap {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("idmap {path} (for a root caller, so that the host's root-only system files stay closed to the job): {source}")]
    Idmap { path: PathBuf, source: Errno },
    #[error("set up the stop signals (SIGINT, SIGTERM, SIGHUP): {source}")]
    Signals { source: Errno },
    #[error("bring up loopback in the new network namespace: {source}")]
    Loopback { source: Errno },
    #[error("start the forwarder on 127.0.0.1:{port} for {socket}: {source}")]
    Forwarder {
        port: u16,
        socket: PathBuf,
        source: std::io::Error,
    },
    #[error("wait until PID 1 is in the run's cgroup ({step}): {source}")]
    Gate { step: &'static str, source: Errno },
    #[error("fork the sandbox's PID 1: {source}")]
    Fork { source: Errno },
    #[error("mount {what} at {target}: {source}")]
    Mount {
        what: String,
        target: PathBuf,
        source: Errno,
    },
    #[error("plan the view: {0}")]
    Replaced(#[from] crate::own_parts::Replaced),
    #[error("prepare mount point {path}: {source}")]
    MountPoint {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("copy {path} into the new root: {source}")]
    Copy {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("set mount flags ({what}) on {target}: {source}")]
    MountFlags {
        what: &'static str,
        target: PathBuf,
        source: Errno,
    },
    #[error("path {path} to mount into the sandbox: {source}")]
    Source {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("path {path} to mount into the sandbox is not a resolved path (a symbolic link on the way or at its end, or `.`/`..`), or it changed since it was resolved: {source}")]
    Link { path: PathBuf, source: Errno },
    #[error("pivot_root into the new root: {source}")]
    PivotRoot { source: Errno },
    #[error("set the sandbox hostname: {source}")]
    Hostname { source: Errno },
    #[error("set rlimit {name}: {source}")]
    Rlimit { name: &'static str, source: Errno },
    #[error("drop capabilities: {source}")]
    Capabilities { source: Errno },
    #[error("set no_new_privs: {source}")]
    NoNewPrivs { source: Errno },
    #[error("start a new session: {source}")]
    Session { source: Errno },
    #[error("Landlock: {detail}")]
    Landlock { detail: String },
    #[error("seccomp: {detail}")]
    Seccomp { detail: String },
    #[error("change directory to {path}: {source}")]
    Chdir { path: PathBuf, source: Errno },
}

impl SetupError {
    /// The helper's exit code for this failure: [`exit::SETUP_SHORT`]
    /// when the step failed for want of a resource of the host (a process,
    /// memory, a descriptor, a namespace: what a concurrent job, or another
    /// user, may be holding), else [`exit::SETUP_FAILED`]. A caller must
    /// never take a shortage for a host that cannot start a sandbox (an
    /// `auto` job moved to an unconfined rung because something else held
    /// the host's processes). `ENOSPC` is not one: from an unshare it is a
    /// limit on namespaces, this user namespace's or a parent's (which a
    /// process reads nowhere), and the counts it bounds are this user's
    /// own, which a sandboxed job cannot add to (seccomp) and another user
    /// cannot touch.
    ///
    /// [`exit::SETUP_SHORT`]: crate::exit::SETUP_SHORT
    /// [`exit::SETUP_FAILED`]: crate::exit::SETUP_FAILED
    pub fn exit_code(&self) -> i32 {
        if self.shortage() {
            crate::exit::SETUP_SHORT
        } else {
            crate::exit::SETUP_FAILED
        }
    }

    fn shortage(&self) -> bool {
        let io = |e: &std::io::Error| e.raw_os_error().map(Errno::from_raw);
        let errno = match self {
            SetupError::Scheduling { source, .. }
            | SetupError::Descriptors { source }
            | SetupError::Unshare { source, .. }
            | SetupError::Idmap { source, .. }
            | SetupError::Signals { source }
            | SetupError::Loopback { source }
            | SetupError::Gate { source, .. }
            | SetupError::Fork { source }
            | SetupError::Mount { source, .. }
            | SetupError::MountFlags { source, .. }
            | SetupError::Link { source, .. }
            | SetupError::PivotRoot { source }
            | SetupError::Hostname { source }
            | SetupError::Rlimit { source, .. }
            | SetupError::Capabilities { source }
            | SetupError::NoNewPrivs { source }
            | SetupError::Session { source }
            | SetupError::Chdir { source, .. } => Some(*source),
            SetupError::IdMap { source, .. }
            | SetupError::Forwarder { source, .. }
            | SetupError::MountPoint { source, .. }
            | SetupError::Copy { source, .. }
            | SetupError::Source { source, .. } => io(source),
            _ => None,
        };
        errno.is_some_and(short)
    }
}

/// Whether `errno` says a resource ran out rather than that something is
/// not allowed or not there.
fn short(errno: Errno) -> bool {
    matches!(
        errno,
        Errno::EAGAIN | Errno::ENOMEM | Errno::EMFILE | Errno::ENFILE
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::{SETUP_FAILED, SETUP_SHORT};

    /// A step short of a process, memory or descriptors exits
    /// `SETUP_SHORT`; one refused, absent or unsupported `SETUP_FAILED`.
    #[test]
    fn a_shortage_is_told_from_a_refusal() {
        let unshare = |source| SetupError::Unshare {
            what: "PID and mount",
            source,
        };
        let copy = |raw| SetupError::Copy {
            path: PathBuf::from("/etc/hosts"),
            source: std::io::Error::from_raw_os_error(raw),
        };
        let codes = [
            unshare(Errno::EAGAIN).exit_code(),
            SetupError::Fork {
                source: Errno::ENOMEM,
            }
            .exit_code(),
            copy(libc::EMFILE).exit_code(),
            unshare(Errno::EPERM).exit_code(),
            unshare(Errno::ENOSPC).exit_code(),
            unshare(Errno::EINVAL).exit_code(),
            copy(libc::ENOENT).exit_code(),
            SetupError::Landlock {
                detail: "not supported".into(),
            }
            .exit_code(),
        ];
        assert_eq!(
            codes,
            [
                SETUP_SHORT,
                SETUP_SHORT,
                SETUP_SHORT,
                SETUP_FAILED,
                SETUP_FAILED,
                SETUP_FAILED,
                SETUP_FAILED,
                SETUP_FAILED
            ]
        );
    }
}

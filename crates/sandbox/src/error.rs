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

//! What one sandboxed command may see and use: the filesystem view, the
//! environment, the network mode, resource caps and the timeout. The
//! caller serializes it to the helper process as JSON; everything in it is
//! decided before any namespace exists, so the helper does no policy work.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Exit codes of a sandboxed run besides the command's own status (a
/// command killed by signal N exits with 128 + N, like a shell).
pub mod exit {
    /// The sandbox killed the command's whole tree at its timeout.
    pub const TIMED_OUT: i32 = 124;
    /// A requested protection could not be set up; the command did not run.
    pub const SETUP_FAILED: i32 = 125;
    /// A set-up step failed for want of a resource of the host (processes,
    /// memory, descriptors: `EAGAIN`, `ENOMEM`, `EMFILE`, `ENFILE`), which
    /// another job or user may be holding; the
    /// command did not run. Not a host without a sandbox
    /// ([`SetupError::exit_code`](crate::SetupError::exit_code)).
    pub const SETUP_SHORT: i32 = 122;
    /// The command exists but could not be executed.
    pub const CANNOT_EXECUTE: i32 = 126;
    /// The command was not found.
    pub const NOT_FOUND: i32 = 127;
    /// The kernel killed the command at its cgroup memory cap.
    pub const MEMORY_LIMIT: i32 = 123;
}

/// How the command may reach the network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetMode {
    /// An empty network namespace with only loopback.
    None,
    /// An empty network namespace whose loopback port `port` forwards every
    /// connection to the broker's Unix socket `socket` on the host, and
    /// each of `more` its own port to its own socket (the job's egress
    /// proxy).
    Broker {
        socket: PathBuf,
        port: u16,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        more: Vec<Forward>,
    },
}

/// One more loopback port inside the job's network namespace forwarded to
/// a Unix socket on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Forward {
    pub socket: PathBuf,
    pub port: u16,
    /// Hand each accepted connection itself to the socket (`handoff.rs`:
    /// the egress proxy) rather than relay its bytes (`net.rs`).
    #[serde(default)]
    pub hand_off: bool,
}

/// The direct-connection watcher (`direct.rs`): a TUN device as the job's
/// default routes, whose packets are answered and reported to the Unix
/// datagram socket `report`, each report carrying `tag` (the runner's
/// name for the command's phase).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectWatch {
    pub report: PathBuf,
    pub tag: String,
}

/// Resource caps enforced by cgroups (None: not requested).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    pub memory_mb: Option<u64>,
    pub pids: Option<u64>,
    /// Percent of one CPU (100 = one core).
    pub cpu_percent: Option<u64>,
}

/// One sandboxed command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// The program (a path, or a name looked up in the sandbox's PATH) and
    /// its arguments.
    pub argv: Vec<String>,
    /// The command's whole environment (an allowlist resolved by the caller).
    pub env: Vec<(String, String)>,
    /// Working directory inside the sandbox.
    pub cwd: PathBuf,
    /// Extra read-only paths (besides the system directories).
    pub ro: Vec<PathBuf>,
    /// Writable paths (the job's work, home and tmp).
    pub rw: Vec<PathBuf>,
    /// Paths inside writable ones that stay read-only (`.git/hooks`, shell
    /// rc files of the workspace).
    pub protect: Vec<PathBuf>,
    /// Files of the read-only view covered by an empty file that cannot be
    /// executed (a host profile's denied programs); a path that is not a
    /// regular file on the host is skipped.
    #[serde(default)]
    pub hidden: Vec<PathBuf>,
    /// Size of the private /tmp tmpfs.
    pub tmp_mb: u64,
    pub net: NetMode,
    /// Watch what the job sends past its forwarders (none: the namespace
    /// has no route but loopback's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct: Option<DirectWatch>,
    pub limits: Limits,
    /// Run even if the requested cgroup caps cannot be applied.
    pub allow_without_cgroups: bool,
    /// Where the helper appends what it accepted doing without (one line
    /// each: the caps it could not apply), so that its caller reports it
    /// once rather than finding it in the command's stderr; a path the
    /// command cannot reach (its caller's). None, or a file that cannot be
    /// opened there (a link is never followed): the helper's stderr.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notices: Option<PathBuf>,
    /// Wall-clock limit; the whole tree is killed when it passes.
    pub timeout_secs: Option<u64>,
    /// Where job cgroups are created (v1: the directory holding the
    /// controllers; v2: a delegated directory). None: /sys/fs/cgroup.
    pub cgroup_root: Option<PathBuf>,
    /// A name for this run (cgroup directory name, hostname suffix).
    pub name: String,
    /// A descriptor the helper inherited (the write end of its caller's
    /// pipe, `pass_fd`) on which PID 1 writes [`STARTED`] once the command
    /// runs; closed unwritten when the run ends before it (the set-up
    /// failed, or the command could not be executed). The command never
    /// holds it (close-on-exec), so nothing the command does can write it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<i32>,
}

/// What PID 1 writes on [`Policy::started`] once the command runs.
pub const STARTED: u8 = b'S';

/// System directories mounted read-only into every sandbox (those that exist).
pub const SYSTEM_RO: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt",
];

/// Entries of the host's /etc that the sandbox sees read-only (those that
/// exist and everyone may read: a root caller's job runs as the host's
/// uid 0 on files, so nothing root-only may be in the view). Everything
/// else in /etc (shadow, ssh keys, machine-id, `ssl/private`) is absent;
/// /etc/passwd and /etc/group are generated.
pub const ETC_RO: &[&str] = &[
    "alternatives",
    "bash.bashrc",
    "ca-certificates",
    "ca-certificates.conf",
    "debian_version",
    "gitconfig",
    "host.conf",
    "hosts",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "profile",
    "profile.d",
    "protocols",
    "resolv.conf",
    "services",
    "ssl/certs",
    "ssl/openssl.cnf",
    "terminfo",
    "timezone",
];

/// The default PATH inside the sandbox.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Files and directories of a writable path that stay read-only: git hooks
/// and config (which the host's git would execute or obey) and shell rc
/// files (which a later shell would source). All of them, present or not:
/// a present one (a link included: a link is not followed here, and the
/// view binds only what it reaches without one, see `fs.rs`) is bound
/// read-only over itself, a missing one gets a placeholder for the run
/// (`absent.rs`) so that the job cannot create it either.
pub fn protected_in(dir: &std::path::Path) -> Vec<PathBuf> {
    [
        ".git/hooks",
        ".git/config",
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".profile",
        ".zshrc",
        ".zshenv",
        ".zprofile",
    ]
    .iter()
    .map(|p| dir.join(p))
    .collect()
}

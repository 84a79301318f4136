//! The pids cap where a run has no cgroup. A run asked for a pids cap
//! whose cgroup cannot be made (an ordinary user without a delegated
//! cgroup, a container whose cgroup tree is read-only) and that accepted
//! running without cgroups would otherwise have no bound on its processes:
//! a fork bomb in the job would fill the host's process table (`pid_max`,
//! 32768 by default) and stop every other job and the host's own services
//! from starting anything. Two kernel mechanisms hold it instead:
//!
//! - **The run's PID namespace's `pid_max`** (Linux 6.14+, where the
//!   sysctl is per PID namespace): PID 1 writes `cap + 300` through the
//!   fresh /proc it mounts, before that /proc's `sys` is made read-only, so
//!   the command cannot raise it. The
//!   namespace then numbers its processes below that, and every process
//!   and thread of the job needs a number there: at most `cap + 299` at
//!   once, never fewer than `cap` (the kernel skips the first 300 numbers
//!   after its first wrap). It holds for every caller, root included.
//!   On an older kernel the file is the host's own `pid_max`; a caller
//!   that is the host's root ([`host_root`]: its PID 1 is host uid 0, in
//!   a user namespace) could write it through the file's mode bits, so
//!   PID 1 writes it only where the kernel is 6.14 or later
//!   ([`per_namespace_pid_max`]); any other caller's write of the host's
//!   file is refused by its mode.
//! - **`RLIMIT_NPROC`** for any caller but the host's root: the kernel counts it per
//!   user namespace and user, so in the run's own user namespace it counts
//!   the run's processes and threads (the helper's too) and nothing else
//!   of the caller's. The helper sets it on PID 1 (soft and hard: the job
//!   cannot raise a hard limit without `CAP_SYS_RESOURCE` in the host's
//!   namespace) before PID 1 starts the command, which inherits it. The
//!   kernel does not apply it to processes of host uid 0, so a caller
//!   that is the host's root has only `pid_max` (root in a rootless
//!   container is not: its uid 0 maps to another host uid).
//!
//! Which one held is said in the helper's notice ([`Fallback`]'s text):
//! the host's root on a kernel before 6.14 without a cgroup runs
//! uncapped, and says so.

use std::fmt;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use nix::errno::Errno;
use nix::unistd::Pid;

/// The process numbers the kernel does not reuse once a namespace's
/// numbers have wrapped (`RESERVED_PIDS`).
const RESERVED: u64 = 300;

/// The largest `pid_max` the kernel accepts on 64-bit (`PID_MAX_LIMIT`).
const PID_MAX_LIMIT: u64 = 4_194_304;

/// The `pid_max` that holds a namespace to `cap` processes: room for
/// `cap` numbers above the reserved ones, within the kernel's bounds.
pub fn pid_max(cap: u64) -> u64 {
    cap.saturating_add(RESERVED)
        .clamp(RESERVED + 1, PID_MAX_LIMIT)
}

/// Whether this kernel's `pid_max` is per PID namespace (Linux 6.14+),
/// from its release (`uname -r`: `6.14.0-…`). Unknown forms count as not.
pub fn per_namespace_pid_max() -> bool {
    nix::sys::utsname::uname()
        .ok()
        .and_then(|u| u.release().to_str().map(at_least_6_14))
        .unwrap_or(false)
}

/// Whether a kernel release string is 6.14 or later.
fn at_least_6_14(release: &str) -> bool {
    let mut parts = release.split(['.', '-', '+']);
    let number = |p: Option<&str>| p.and_then(|s| s.parse::<u32>().ok());
    match (number(parts.next()), number(parts.next())) {
        (Some(major), Some(minor)) => (major, minor) >= (6, 14),
        _ => false,
    }
}

/// PID 1's part: writes the run's namespace's `pid_max` for `cap` through
/// `proc` (the run's fresh /proc, its `sys` still writable), where the
/// kernel keeps it per namespace or the caller is not root (whose write
/// of a host-wide file is refused by its mode). Whether it now holds: the
/// value read back is the one written.
pub fn write_pid_max(proc: &Path, cap: u64, host_root: bool) -> bool {
    if host_root && !per_namespace_pid_max() {
        return false;
    }
    let path = proc.join("sys/kernel/pid_max");
    let value = pid_max(cap);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .and_then(|mut f| f.write_all(format!("{value}\n").as_bytes()));
    written.is_ok()
        && std::fs::read_to_string(&path).is_ok_and(|text| text.trim() == value.to_string())
}

/// What holds a run's processes where it has no cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// `RLIMIT_NPROC` at the cap (an ordinary caller), with the
    /// namespace's `pid_max` too when it held.
    Rlimit { cap: u64, pid_max: bool },
    /// The namespace's `pid_max` alone (a root caller).
    PidMax { cap: u64 },
    /// Nothing: a root caller on a kernel without a per-namespace
    /// `pid_max`; or the limit could not be set (`errno`).
    Uncapped { errno: Option<Errno> },
}

/// The helper's part, for a run without a cgroup: sets `RLIMIT_NPROC` on
/// PID 1 (before it starts the command) for an ordinary caller, and says
/// what holds, given whether PID 1's `pid_max` held.
pub fn hold(pid1: Pid, cap: u64, host_root: bool, pid_max_held: bool) -> Fallback {
    if host_root {
        return if pid_max_held {
            Fallback::PidMax { cap }
        } else {
            Fallback::Uncapped { errno: None }
        };
    }
    match nproc(pid1, cap) {
        Ok(()) => Fallback::Rlimit {
            cap,
            pid_max: pid_max_held,
        },
        Err(_) if pid_max_held => Fallback::PidMax { cap },
        Err(errno) => Fallback::Uncapped { errno: Some(errno) },
    }
}

/// What would hold a run's `cap` without a cgroup for a caller of
/// `caller_uid` on this kernel, before any run (`paddock doctor`): what
/// [`hold`] says unless a limit then fails to be set.
pub fn expected(cap: u64, host_root: bool) -> Fallback {
    match (host_root, per_namespace_pid_max()) {
        (true, true) => Fallback::PidMax { cap },
        (true, false) => Fallback::Uncapped { errno: None },
        (false, pid_max) => Fallback::Rlimit { cap, pid_max },
    }
}

/// Whether this process's user is the host's root (uid 0 of the host's
/// user namespace), to which the kernel does not apply `RLIMIT_NPROC`
/// and whose write of a host-wide sysctl its mode allows; root in a user
/// namespace of its own (a rootless container) maps elsewhere and is
/// not. From `/proc/self/uid_map` (`inside outside count` lines); an
/// unreadable map counts uid 0 as the host's root.
pub fn host_root() -> bool {
    let uid = nix::unistd::getuid().as_raw();
    match std::fs::read_to_string("/proc/self/uid_map") {
        Ok(map) => maps_to_host_root(&map, uid),
        Err(_) => uid == 0,
    }
}

/// Whether `uid` maps to the host's uid 0 in `map` (a `uid_map`).
fn maps_to_host_root(map: &str, uid: u32) -> bool {
    map.lines().any(|line| {
        let mut fields = line.split_whitespace().map(str::parse::<u64>);
        match (fields.next(), fields.next(), fields.next()) {
            (Some(Ok(inside)), Some(Ok(outside)), Some(Ok(count))) => {
                let uid = u64::from(uid);
                (inside..inside.saturating_add(count)).contains(&uid)
                    && outside + (uid - inside) == 0
            }
            _ => false,
        }
    })
}

/// Sets another process's `RLIMIT_NPROC`, soft and hard, with
/// `prlimit(2)` (nix has only `setrlimit`, for the caller itself).
fn nproc(pid: Pid, cap: u64) -> Result<(), Errno> {
    let limit = libc::rlimit {
        rlim_cur: cap,
        rlim_max: cap,
    };
    // SAFETY: `limit` is a live `rlimit` for the duration of the call,
    // which only reads it; the old-limit pointer is null (nothing is
    // written).
    let rc = unsafe {
        libc::prlimit(
            pid.as_raw(),
            libc::RLIMIT_NPROC,
            &limit,
            std::ptr::null_mut(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(Errno::last())
    }
}

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fallback::Rlimit { cap, pid_max: true } => write!(
                f,
                "the job's processes are held to {cap} by RLIMIT_NPROC and below {} by its PID namespace's pid_max",
                pid_max(*cap)
            ),
            Fallback::Rlimit {
                cap,
                pid_max: false,
            } => write!(f, "the job's processes are held to {cap} by RLIMIT_NPROC"),
            Fallback::PidMax { cap } => write!(
                f,
                "the job's processes are held below {} by its PID namespace's pid_max",
                pid_max(*cap)
            ),
            Fallback::Uncapped { errno: Some(e) } => {
                write!(f, "the job's processes are not capped (RLIMIT_NPROC: {e})")
            }
            Fallback::Uncapped { errno: None } => write!(
                f,
                "the job's processes are not capped (a root caller's are not held by RLIMIT_NPROC, and this kernel has no per-namespace pid_max, Linux 6.14+)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_max_leaves_room_for_the_cap_above_the_reserved_numbers() {
        assert_eq!(
            [0, 1, 64, 1024, u64::MAX].map(pid_max),
            [301, 301, 364, 1324, 4_194_304]
        );
    }

    #[test]
    fn kernels_from_6_14_keep_pid_max_per_namespace() {
        let releases = [
            "6.18.44-fc-v1147",
            "6.14.0",
            "6.14",
            "7.0.1-arch1",
            "6.13.12-200.fc41.x86_64",
            "6.8.0-52-generic",
            "5.15.0+",
            "",
            "x.y",
            "6",
        ];
        assert_eq!(
            releases.map(at_least_6_14),
            [true, true, true, true, false, false, false, false, false, false]
        );
    }

    #[test]
    fn a_root_caller_gets_no_rlimit_and_says_what_holds() {
        // The pid is never used for a root caller.
        let pid = Pid::from_raw(i32::MAX);
        assert_eq!(
            [hold(pid, 64, true, true), hold(pid, 64, true, false)],
            [
                Fallback::PidMax { cap: 64 },
                Fallback::Uncapped { errno: None }
            ]
        );
    }

    #[test]
    fn only_a_uid_mapped_to_the_hosts_0_is_the_hosts_root() {
        let host = "         0          0 4294967295\n";
        let rootless = "         0     100000      65536\n";
        let sandboxed = "      1000       1000          1\n";
        assert_eq!(
            [
                maps_to_host_root(host, 0),
                maps_to_host_root(host, 1000),
                maps_to_host_root(rootless, 0),
                maps_to_host_root(rootless, 5),
                maps_to_host_root(sandboxed, 1000),
                maps_to_host_root("garbage\n", 0),
            ],
            [true, false, false, false, false, false]
        );
    }

    #[test]
    fn the_notice_says_which_limit_holds() {
        let texts = [
            Fallback::Rlimit {
                cap: 64,
                pid_max: true,
            },
            Fallback::Rlimit {
                cap: 64,
                pid_max: false,
            },
            Fallback::PidMax { cap: 64 },
            Fallback::Uncapped {
                errno: Some(Errno::EPERM),
            },
            Fallback::Uncapped { errno: None },
        ]
        .map(|f| f.to_string());
        assert_eq!(
            texts,
            [
                "the job's processes are held to 64 by RLIMIT_NPROC and below 364 by its PID namespace's pid_max",
                "the job's processes are held to 64 by RLIMIT_NPROC",
                "the job's processes are held below 364 by its PID namespace's pid_max",
                "the job's processes are not capped (RLIMIT_NPROC: EPERM: Operation not permitted)",
                "the job's processes are not capped (a root caller's are not held by RLIMIT_NPROC, and this kernel has no per-namespace pid_max, Linux 6.14+)",
            ]
        );
    }
}

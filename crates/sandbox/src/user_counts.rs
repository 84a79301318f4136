//! The caller's per-user kernel counts a run may use: a share, not all.
//! The kernel counts some objects per user, across every process of that
//! user on the host: inotify instances (128 by default) and watches,
//! fanotify groups (128) and marks. A run's processes are the caller's
//! user as far as those counts go (its user namespace maps to the
//! caller's uid), so a job that opened inotify instances until the kernel
//! refused left none to the caller's user: while it ran, nothing else of
//! that user (root's daemons and tools, for a root caller; the user's
//! editor, `tail -f`, `paddock serve`'s own watch of cancels) could start
//! watching a file.
//!
//! The kernel checks each count at every user namespace from the
//! process's own up to the host's, against that namespace's maximum
//! (`/proc/sys/user/max_*`, per user namespace; a new namespace starts at
//! `INT_MAX`, and only a holder of `CAP_SYS_RESOURCE` in it may change
//! them). So the helper reads the caller's maxima and the host's (the
//! lower binds: a caller in a user namespace of its own has `INT_MAX`
//! there), before it makes the run's user namespace ([`shares`]), and
//! PID 1, which holds every
//! capability in the run's namespace until it drops them, writes an
//! eighth of each (at least [`FLOOR`]) as the run's namespace's maxima
//! through its fresh /proc, before that /proc's `sys` is bound read-only
//! ([`write`]); the command can neither raise them (no capability, a
//! read-only file) nor get around them (a namespace it could make below
//! is checked against these too; it cannot make one, `filter.rs`). A run
//! therefore holds at most an eighth of its user's inotify instances;
//! eight concurrent runs of one user could still hold them all, which a
//! host running that many hostile jobs at once under one user should
//! answer with a higher `fs.inotify.max_user_instances`.
//!
//! Two resource limits are counted per user the same way (each user
//! namespace's count checked up to the host's): pending signals
//! (`RLIMIT_SIGPENDING`: a job that queued real-time signals to itself
//! until refused left its user unable to `sigqueue` or arm a POSIX timer)
//! and POSIX message queue bytes (`RLIMIT_MSGQUEUE`). PID 1 lowers its own
//! to an eighth of the caller's, soft and hard, before it starts the
//! command, which inherits them and cannot raise a hard limit
//! ([`limit_rlimits`]).
//!
//! A count the kernel does not have (fanotify's before Linux 5.13) is
//! left alone; a write the kernel refuses leaves that maximum as it was
//! (the run goes on: these are shares of a shared resource, not the
//! run's confinement).

use std::io::Write as _;

use nix::sys::resource::{getrlimit, setrlimit, Resource};

use crate::error::SetupError;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

/// The counts shared: their file in `/proc/sys/user` (the caller's user
/// namespace's maximum) and in `/proc/sys/fs` (the host's, which binds a
/// caller in a user namespace of its own too).
const COUNTS: [(&str, &str); 4] = [
    ("max_inotify_instances", "inotify/max_user_instances"),
    ("max_inotify_watches", "inotify/max_user_watches"),
    ("max_fanotify_groups", "fanotify/max_user_groups"),
    ("max_fanotify_marks", "fanotify/max_user_marks"),
];

/// A run gets this part of each of its caller's maxima.
const PART: u64 = 8;

/// Never less than this (an engine's own few watchers).
pub const FLOOR: u64 = 4;

/// Each count's share for a run, from the lower of the caller's and the
/// host's maximum (`proc_sys` is `/proc/sys` as the caller sees it):
/// (file name in `user/`, share), for the counts this kernel has.
pub fn shares(proc_sys: &Path) -> Vec<(&'static str, u64)> {
    let read =
        |path: PathBuf| -> Option<u64> { std::fs::read_to_string(path).ok()?.trim().parse().ok() };
    COUNTS
        .iter()
        .filter_map(|(name, host)| {
            let caller = read(proc_sys.join("user").join(name));
            let host = read(proc_sys.join("fs").join(host));
            let max = caller.into_iter().chain(host).min()?;
            Some((*name, share(max)))
        })
        .collect()
}

/// The resource limits counted per user that a run gets a share of.
const RLIMITS: [(Resource, &str); 2] = [
    (Resource::RLIMIT_SIGPENDING, "RLIMIT_SIGPENDING"),
    (Resource::RLIMIT_MSGQUEUE, "RLIMIT_MSGQUEUE"),
];

/// PID 1's part, before it starts the command: its own pending-signal
/// and message-queue limits lowered to a share of the caller's (which it
/// still has), soft and hard. An unlimited one is left (nothing to share).
pub fn limit_rlimits() -> Result<(), SetupError> {
    for (resource, name) in RLIMITS {
        let (soft, _) =
            getrlimit(resource).map_err(|source| SetupError::Rlimit { name, source })?;
        if soft == libc::RLIM_INFINITY {
            continue;
        }
        let limit = share(soft);
        setrlimit(resource, limit, limit).map_err(|source| SetupError::Rlimit { name, source })?;
    }
    Ok(())
}

/// A run's share of a maximum of `max`.
fn share(max: u64) -> u64 {
    (max / PART).max(FLOOR).min(max)
}

/// PID 1's part: writes each share as the run's user namespace's maximum
/// through `proc` (the run's fresh /proc, its `sys` still writable).
/// Returns the names it could not write (none, normally).
pub fn write(proc: &Path, shares: &[(&'static str, u64)]) -> Vec<&'static str> {
    shares
        .iter()
        .filter(|(name, value)| {
            let written = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(proc.join("sys/user").join(name))
                .and_then(|mut f| f.write_all(format!("{value}\n").as_bytes()));
            written.is_err()
        })
        .map(|(name, _)| *name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_gets_an_eighth_of_each_maximum_and_never_more_than_it() {
        assert_eq!(
            [128, 192_530, 8192, 31, 2, 0].map(share),
            [16, 24_066, 1024, 4, 2, 0]
        );
    }

    #[test]
    fn the_shares_come_from_the_lower_maxima_this_kernel_has() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user");
        let inotify = dir.path().join("fs/inotify");
        std::fs::create_dir_all(&user).unwrap();
        std::fs::create_dir_all(&inotify).unwrap();
        // A caller in a user namespace of its own: its maximum is
        // INT_MAX, the host's binds.
        std::fs::write(user.join("max_inotify_instances"), "2147483647\n").unwrap();
        std::fs::write(inotify.join("max_user_instances"), "128\n").unwrap();
        std::fs::write(user.join("max_inotify_watches"), "8192\n").unwrap();
        std::fs::write(inotify.join("max_user_watches"), "65536\n").unwrap();
        // No fanotify counts (a kernel before 5.13); an unreadable value
        // is left out too.
        std::fs::write(user.join("max_fanotify_marks"), "many\n").unwrap();
        assert_eq!(
            shares(dir.path()),
            vec![("max_inotify_instances", 16), ("max_inotify_watches", 1024)]
        );
    }
}

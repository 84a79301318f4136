//! Paddock's own helper processes that work in a job's directory while
//! the job runs (the patch's early `git` reads, started beside the
//! engine: `workspace/host_git.rs`; the disk walk in a user namespace,
//! `workspace/disk_walk.rs`), registered so that the job's
//! leftovers scan at its end (`leftovers.rs`) never takes them for the
//! job's. Without this a fast engine's end killed Paddock's own `git`,
//! the job got an error event for "its" leftover and the patch read the
//! base again.
//!
//! A process counts as Paddock's when it, or one of its ancestors (its
//! parent's chain in `/proc/PID/stat`, each no younger than it), is a
//! registered helper: its pid registered here and its parent this
//! process. A job cannot meet the second: only Paddock forks its own
//! children, and an orphan is reparented to a subreaper or init, never to
//! Paddock (which is not a subreaper). So a registered pid that was
//! reaped and then reused by a job's process before its registration was
//! dropped is still scanned. Nor can a job's process get below a helper:
//! only the helper forks there, and it runs nothing of the job's (no
//! pager, hook, filter or textconv runs under Paddock's git settings);
//! re-parenting only ever moves a process up. A helper's descendants
//! are Paddock's: a `git` on `PATH` that is a wrapper (a shim, a tracing
//! script) starts the real git as its child, and git starts its own
//! subprocesses. Before, only the registered pid itself was spared, and
//! the job's end killed the real git under a wrapper: the early patch's
//! `pack-objects` died and the job's branch was not kept.
//!
//! Registration happens under the same lock as the spawn, and the scan
//! reads the set under it: a helper whose pid the scan can see is already
//! registered.
//!
//! Paddock's host gits also carry their owner in their environment
//! ([`OWNER_ENV`]: this process's pid and start time, which their
//! children inherit), so that a git outliving a `paddock` killed with
//! `kill -9` (a clone of a URL's mirror or an overlay's snapshot, which
//! names no job's directory, or a fetch hung on the network: nothing
//! bounds it once its `paddock` is gone) is found by the next reaper
//! pass and killed with its process group ([`orphaned_owner`],
//! `leftovers::kill_orphaned_host_gits`). Once the binary has named its
//! jobs directory ([`set_jobs_dir`]), they carry that too ([`JOBS_ENV`]),
//! and a pass kills only the orphans of its own jobs directory (or of
//! none named): another Paddock home's reaper on the same host leaves
//! them to that home's own pass, which reports them as its own.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

/// The pids of this process's registered helpers.
static OWN: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

fn own() -> MutexGuard<'static, BTreeSet<u32>> {
    // A panic while holding the lock leaves the set as it was: still valid.
    OWN.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A registered helper: its registration ends when this is dropped
/// (after the helper was reaped or killed).
#[derive(Debug)]
pub struct Registered(Option<u32>);

impl Drop for Registered {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            own().remove(&pid);
        }
    }
}

/// Runs `spawn` and registers the pid `pid_of` reads from what it
/// started, under the registry's lock (so no scan sees the process
/// unregistered). A spawn that fails registers nothing.
pub fn spawn<T>(
    spawn: impl FnOnce() -> std::io::Result<T>,
    pid_of: impl FnOnce(&T) -> Option<u32>,
) -> std::io::Result<(T, Registered)> {
    let mut set = own();
    let started = spawn()?;
    let pid = pid_of(&started);
    if let Some(pid) = pid {
        set.insert(pid);
    }
    Ok((started, Registered(pid)))
}

/// The most ancestors [`is_own`] climbs before it gives up (a helper's
/// subprocesses are a few levels deep).
const MAX_DEPTH: usize = 32;

/// True when process `pid` (`/proc/<pid>` is `proc_dir`) is one of this
/// process's registered helpers (registered, and this process's child) or
/// a descendant of one (module text).
pub fn is_own(pid: u32, proc_dir: &Path) -> bool {
    let set = own();
    if set.is_empty() {
        return false;
    }
    let me = std::process::id();
    let Some(born) = stat_field(proc_dir, 22) else {
        return false;
    };
    let mut at = (pid, proc_dir.to_path_buf());
    for _ in 0..=MAX_DEPTH {
        let Some(up) = parent(&at.1) else {
            return false;
        };
        if up == me {
            return set.contains(&at.0);
        }
        if up <= 1 {
            return false;
        }
        let up_dir = Path::new("/proc").join(up.to_string());
        // An ancestor is never younger than its descendant.
        if stat_field(&up_dir, 22).is_none_or(|t| t > born) {
            return false;
        }
        at = (up, up_dir);
    }
    false
}

/// The environment variable naming the `paddock` process that started a
/// host git: `<pid>.<start time>` (clock ticks since boot, `/proc/PID/stat`'s
/// 22nd field), which no reused pid matches.
pub const OWNER_ENV: &str = "PADDOCK_HOST_GIT_OWNER";

/// The environment variable naming the jobs directory of the `paddock`
/// that started a host git ([`set_jobs_dir`]), as that process named it.
pub const JOBS_ENV: &str = "PADDOCK_HOST_GIT_JOBS";

/// The jobs directory this process's host gits name ([`JOBS_ENV`]).
static JOBS_DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Names this process's jobs directory in the environment of every host
/// git it starts from now on ([`JOBS_ENV`]); the binary calls it once, as
/// soon as its paths are resolved. A later call with another directory
/// changes nothing (one process serves one home).
pub fn set_jobs_dir(jobs: &Path) {
    let _ = JOBS_DIR.set(jobs.to_path_buf());
}

/// The jobs directory [`set_jobs_dir`] named, if any.
pub fn jobs_dir() -> Option<&'static Path> {
    JOBS_DIR.get().map(std::path::PathBuf::as_path)
}

/// This process as [`OWNER_ENV`] names it; `None` when its start time
/// cannot be read (then its gits carry no owner).
pub fn owner_mark() -> Option<&'static str> {
    static MARK: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    MARK.get_or_init(|| {
        let started = stat_field(Path::new("/proc/self"), 22)?;
        Some(format!("{}.{started}", std::process::id()))
    })
    .as_deref()
}

/// The owner process `proc_dir`'s environment names ([`OWNER_ENV`]) when
/// that owner is gone (no process with its pid, or one started at another
/// time: the pid reused) and the process belongs to the jobs directory
/// `jobs` (its [`JOBS_ENV`] names `jobs`, or it names none); `None` for a
/// process with no owner named, a live one, another jobs directory's, a
/// daemon of the user's ([`users_daemon`]), or a process in another PID
/// namespace than this one (a container's, whose pids name other
/// processes here).
///
/// The environment is read first, and the rest only for a process that
/// names an owner: a pass reads every process of the host, and nearly all
/// name none (issue #14: the reaper's pass is on every job's start-up
/// path; the namespace links, `stat` and command line read first cost
/// four more system calls per process, two thirds of the pass).
pub fn orphaned_owner(proc_dir: &Path, jobs: &Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt as _;
    let env = std::fs::read(proc_dir.join("environ")).ok()?;
    let var = |name: &str| {
        let prefix = format!("{name}=");
        env.split(|b| *b == 0)
            .find_map(|v| v.strip_prefix(prefix.as_bytes()))
    };
    let mark = std::str::from_utf8(var(OWNER_ENV)?).ok()?;
    if var(JOBS_ENV).is_some_and(|named| named != jobs.as_os_str().as_bytes()) {
        return None;
    }
    let ns = |dir: &Path| std::fs::read_link(dir.join("ns/pid")).ok();
    if ns(proc_dir)? != ns(Path::new("/proc/self"))? || users_daemon(proc_dir) {
        return None;
    }
    let (pid, started) = mark.split_once('.')?;
    let (pid, started) = (pid.parse::<u32>().ok()?, started.parse::<u64>().ok()?);
    let owner = Path::new("/proc").join(pid.to_string());
    match stat_field(&owner, 22) {
        Some(now) if now == started => None,
        _ => Some(mark.to_string()),
    }
}

/// True when process `proc_dir` is a daemon that a host git's user
/// configuration started to outlive the git on purpose, and that serves the
/// user beyond Paddock: git's credential cache (`git
/// credential-cache--daemon`, which stays in the git's process group and
/// session) or its file-system monitor, or any process that made itself a
/// session leader (an ssh `ControlPersist` master, which `daemon(3)`
/// detaches, and which the user's own ssh sessions may come to share).
/// None of Paddock's host gits, nor what they start for their own work (a
/// remote helper, an ssh to the remote), does either; killing one would
/// end a user's cached credentials or shared connection.
fn users_daemon(proc_dir: &Path) -> bool {
    let pid = proc_dir
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.parse::<u64>().ok());
    if pid.is_some() && stat_field(proc_dir, 6) == pid {
        return true;
    }
    const GIT_DAEMONS: [&[u8]; 2] = [b"credential-cache--daemon", b"fsmonitor--daemon"];
    let Ok(cmdline) = std::fs::read(proc_dir.join("cmdline")) else {
        return false;
    };
    let mut args = cmdline.split(|b| *b == 0);
    let program = args.next().unwrap_or_default();
    let name = program.rsplit(|b| *b == b'/').next().unwrap_or_default();
    let sub = args.next().unwrap_or_default();
    GIT_DAEMONS
        .iter()
        .any(|d| name.strip_prefix(b"git-") == Some(*d) || (name == b"git" && sub == *d))
}

/// The parent's pid of process `proc_dir`.
fn parent(proc_dir: &Path) -> Option<u32> {
    u32::try_from(stat_field(proc_dir, 4)?).ok()
}

/// Field `n` (counted from 1, as `proc(5)` does: 4 the parent's pid, 22
/// the start time) of process `proc_dir`'s `stat` (`PID (COMM) STATE PPID
/// …`; COMM may hold anything but ends at the last `)`), as a number.
pub(crate) fn stat_field(proc_dir: &Path, n: usize) -> Option<u64> {
    let mut buf = [0u8; crate::proc_read::STAT_BYTES];
    let stat = crate::proc_read::small(&proc_dir.join("stat"), &mut buf)?;
    let close = stat.iter().rposition(|b| *b == b')')?;
    let field = stat[close + 1..]
        .split(|b| *b == b' ')
        .filter(|f| !f.is_empty())
        .nth(n.checked_sub(3)?)?;
    std::str::from_utf8(field).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc_dir(pid: u32) -> std::path::PathBuf {
        Path::new("/proc").join(pid.to_string())
    }

    /// A registered child is Paddock's until its registration is dropped;
    /// an unregistered child is not.
    #[test]
    fn a_registered_child_is_own_until_dropped() {
        let (mut child, registered) = spawn(
            || std::process::Command::new("sleep").arg("30").spawn(),
            |c| Some(c.id()),
        )
        .unwrap();
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let before = (
            is_own(child.id(), &proc_dir(child.id())),
            is_own(other.id(), &proc_dir(other.id())),
        );
        drop(registered);
        let after = is_own(child.id(), &proc_dir(child.id()));
        for c in [&mut child, &mut other] {
            c.kill().unwrap();
            c.wait().unwrap();
        }
        assert_eq!((before, after), ((true, false), false));
    }

    /// A registered pid whose process is not this process's child (a pid
    /// reused by someone else's process) is not Paddock's.
    #[test]
    fn a_registered_pid_that_is_not_a_child_is_not_own() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let (mut sh, _registered) = spawn(
            || {
                std::process::Command::new("sh")
                    .arg("-c")
                    .arg("sleep 30 & echo $! > \"$0\"; wait")
                    .arg(&pidfile)
                    .spawn()
            },
            |_| None,
        )
        .unwrap();
        let grandchild: u32 = loop {
            match std::fs::read_to_string(&pidfile) {
                Ok(s) if s.ends_with('\n') => break s.trim().parse().unwrap(),
                _ => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        };
        let (_none, registered) = spawn(|| Ok(()), |()| Some(grandchild)).unwrap();
        let seen = is_own(grandchild, &proc_dir(grandchild));
        drop(registered);
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(grandchild).unwrap()),
            nix::sys::signal::Signal::SIGKILL,
        );
        sh.wait().unwrap();
        assert!(!seen);
    }

    #[test]
    fn the_parent_is_read_past_a_comm_holding_spaces_and_parentheses() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("stat"), "42 (a) b (c) S 7 42 42 0 -1").unwrap();
        assert_eq!(parent(dir.path()), Some(7));
    }
}

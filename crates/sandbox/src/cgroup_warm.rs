//! The run's cgroup attach made fast by entering the kernel's lock early.
//! Moving a process into a cgroup (the helper moving PID 1 into the run's
//! cgroup, `cgroup.rs`) takes the kernel's one global
//! `cgroup_threadgroup_rwsem` for writing, and the first writer after a
//! quiet spell waits for an RCU grace period before it gets it
//! (`rcu_sync_enter`): 5–16 ms on this project's reference machine, slept
//! on the sandbox's start-up path while PID 1 waits at its gate for the
//! attach. A writer within about one grace period of the previous one does
//! not wait (0.3 ms). The kernel takes the lock before it looks at what it
//! is asked to move, a move of a thread into the cgroup it is already in
//! included.
//!
//! [`Warm`] is a thread that does just that, into its own cgroup, every
//! [`INTERVAL`]: the runner starts one when it begins provisioning a
//! sandboxed job and drops it once the engine runs (after the helper moved
//! its PID 1: the caller waits for the helper's `started.rs` byte), so
//! the grace period is waited for beside the provisioning instead of in
//! front of the engine. It names only itself, in the cgroup it is in (read
//! again before each move: were the process moved meanwhile, only this
//! short-lived thread would be put back, and it ends with the warming), so
//! it changes no cgroup's membership. Best effort: where the file cannot be
//! written (an ordinary user, no cgroup file system), the thread ends at its
//! first try and the attach waits as before. On a host whose cgroup file
//! system is mounted with `favordynmods`, no writer waits and the moves are
//! merely redundant.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the thread moves itself: under one grace period, so the lock
/// never goes back to its slow state between two moves.
pub const INTERVAL: Duration = Duration::from_millis(3);

/// Where the cgroup file systems are mounted.
const MOUNTS: &str = "/sys/fs/cgroup";

/// The warming thread; dropped, it stops at once.
#[derive(Debug)]
pub struct Warm {
    until: Option<Sender<Instant>>,
    thread: Option<JoinHandle<u32>>,
}

impl Warm {
    /// Starts warming, for `at_most` unless let go sooner.
    pub fn start(at_most: Duration) -> Warm {
        let (until, asked) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("cgroup-warm".into())
            .spawn(move || warm(Path::new(MOUNTS), Instant::now() + at_most, &asked))
            .ok();
        Warm {
            until: Some(until),
            thread,
        }
    }

    /// Tells the thread to end `linger` from now (sooner if its own
    /// deadline comes first).
    #[cfg(test)]
    fn let_go(&mut self, linger: Duration) {
        if let Some(until) = self.until.take() {
            let _ = until.send(Instant::now() + linger);
        }
    }

    /// Whether the thread has ended.
    #[cfg(test)]
    fn ended(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Stops now and says how many moves the thread made.
    pub fn finish(mut self) -> u32 {
        self.until = None;
        self.thread.take().and_then(|t| t.join().ok()).unwrap_or(0)
    }
}

/// The thread: a move, then one every [`INTERVAL`] until `deadline` (or
/// an earlier one its handle sends), or until the handle is dropped or
/// a move fails. Returns the moves made.
fn warm(mounts: &Path, mut deadline: Instant, asked: &mpsc::Receiver<Instant>) -> u32 {
    let tid = nix::unistd::gettid().as_raw();
    let mut moves = 0;
    let mut listening = true;
    loop {
        if move_into_own(mounts, tid).is_err() {
            return moves;
        }
        moves += 1;
        let now = Instant::now();
        let Some(left) = deadline.checked_duration_since(now) else {
            return moves;
        };
        let wait = INTERVAL.min(left);
        if listening {
            match asked.recv_timeout(wait) {
                Ok(until) => {
                    deadline = deadline.min(until);
                    listening = false;
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return moves,
            }
        } else {
            std::thread::sleep(wait);
        }
    }
}

/// Moves thread `tid` (the caller) into the cgroup it is in: on the
/// unified hierarchy where there is one (`cgroup.threads`), else on the v1
/// `pids` hierarchy (`tasks`).
fn move_into_own(mounts: &Path, tid: i32) -> std::io::Result<()> {
    let own = std::fs::read_to_string("/proc/thread-self/cgroup")?;
    let file = own_file(mounts, &own).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no cgroup hierarchy to move into",
        )
    })?;
    let mut f = std::fs::OpenOptions::new().write(true).open(file)?;
    f.write_all(tid.to_string().as_bytes())
}

/// The file that moves a thread into its own cgroup, from the thread's
/// `/proc/thread-self/cgroup` text: the unified hierarchy's (mounted at
/// `mounts` or at `mounts/unified`) where the thread has a line for it,
/// else the v1 `pids` hierarchy's.
fn own_file(mounts: &Path, own: &str) -> Option<PathBuf> {
    let line = |wanted: &dyn Fn(&str) -> bool| {
        own.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            // A path is absolute; one that climbs is not followed.
            let relative = path.strip_prefix('/')?;
            (wanted(controllers) && !relative.split('/').any(|p| p == ".."))
                .then(|| relative.to_string())
        })
    };
    if let Some(path) = line(&|c| c.is_empty()) {
        for base in [mounts.to_path_buf(), mounts.join("unified")] {
            if base.join("cgroup.controllers").exists() {
                return Some(base.join(&path).join("cgroup.threads"));
            }
        }
    }
    let path = line(&|c| c.split(',').any(|c| c == "pids"))?;
    Some(mounts.join("pids").join(path).join("tasks"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The file is the unified hierarchy's where it is mounted (at the
    /// mounts or under `unified`), else the v1 `pids` one's; a path that
    /// climbs, or no usable line, is none.
    #[test]
    fn the_file_is_the_threads_own_cgroups() {
        let pure = tempfile::tempdir().unwrap();
        std::fs::write(pure.path().join("cgroup.controllers"), "").unwrap();
        let hybrid = tempfile::tempdir().unwrap();
        std::fs::create_dir(hybrid.path().join("unified")).unwrap();
        std::fs::write(hybrid.path().join("unified/cgroup.controllers"), "").unwrap();
        let v1 = tempfile::tempdir().unwrap();
        let both = "12:pids:/user.slice\n4:cpu,cpuacct:/x\n0::/user.slice/s-1.scope\n";
        let only_v1 = "12:blkio:/\n3:pids:/docker/ab\n";
        let found = |mounts: &Path, own: &str| {
            own_file(mounts, own).map(|f| f.strip_prefix(mounts).unwrap().to_path_buf())
        };
        assert_eq!(
            [
                found(pure.path(), both),
                found(hybrid.path(), both),
                found(v1.path(), both),
                found(v1.path(), only_v1),
                found(pure.path(), "0::/a/../../etc\n3:pids:/b/..\n"),
                found(pure.path(), "0::relative\n"),
                found(pure.path(), ""),
            ],
            [
                Some(PathBuf::from("user.slice/s-1.scope/cgroup.threads")),
                Some(PathBuf::from("unified/user.slice/s-1.scope/cgroup.threads")),
                Some(PathBuf::from("pids/user.slice/tasks")),
                Some(PathBuf::from("pids/docker/ab/tasks")),
                None,
                None,
                None,
            ]
        );
    }

    /// Where the thread can move itself (root on a host with a cgroup file
    /// system) it does, again and again while let run and for as long as
    /// it is told to linger, then ends by itself, and no cgroup of the
    /// process changes; where it cannot, it ends at once, having made no
    /// move. Stopped, it ends at once.
    #[test]
    fn the_warming_moves_only_itself_where_it_may_and_ends() {
        let before = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let writable = own_file(Path::new(MOUNTS), &before)
            .is_some_and(|f| std::fs::OpenOptions::new().write(true).open(f).is_ok());
        if !writable {
            eprintln!("no cgroup file this process may write: the warming must make no move");
        }
        let mut warm = Warm::start(Duration::from_secs(30));
        std::thread::sleep(INTERVAL * 10);
        warm.let_go(Duration::from_millis(300));
        std::thread::sleep(INTERVAL * 10);
        let lingering = !warm.ended();
        std::thread::sleep(Duration::from_millis(900));
        let ended = warm.ended();
        let moves = warm.finish();
        let after = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        // Stopped (the handle's channel closed), a warming with a long
        // deadline ends too: `finish` would otherwise wait out its 30 s.
        let stopped = Warm::start(Duration::from_secs(30));
        std::thread::sleep(INTERVAL * 3);
        let started = Instant::now();
        stopped.finish();
        assert_eq!(
            (
                lingering,
                ended,
                moves >= 10,
                moves == 0,
                after,
                started.elapsed() < Duration::from_secs(10)
            ),
            (writable, true, writable, !writable, before, true)
        );
    }
}

//! The job's disk, bounded while it runs (`limits.max_disk_bytes`) and the
//! host kept from filling up. Everything a job can write on either local
//! rung is a host directory under the job's own (`work/` or the overlay's
//! upper layer in `meta/upper`, `home/` with its engine's session files,
//! `tmp/`), so a watcher thread measures that directory
//! (`workspace::disk_usage::charged`: allocated blocks, so sparse and
//! `fallocate`d files count what they hold; each file once whatever its
//! hard links, so linking cannot hide one; every entry at least 4 KiB, so
//! millions of empty files or directories count; no link followed, no
//! mount entered, a tree too deep or unreadable to count stops the job
//! too) against what it held when provisioned, and between two
//! measurements checks the jobs file system's free space and inodes
//! (`statvfs`, cheap) against a reserve, so a writer faster than the walk
//! is stopped before the disk is full whatever it writes to. The walk
//! stops once past the limit (its cost is bounded by it) and waits nine
//! times its own length before the next (a tenth of a core at most). Past
//! either the watcher says why once; the runner then stops the job as it
//! stops a cancelled one (setup commands and engine with every process
//! they started, teardown reaping what is left), fails it naming the limit
//! and the size seen, and measures once more after teardown (a daemon the
//! engine left, a writer that ended between two walks): that last walk
//! starts as soon as teardown has killed what was left of the job
//! ([`DiskWatch::begin_last`]), beside the rest of teardown (the broker's
//! calls settled, the engine's stderr and session taken in: none of it
//! writes to the job's directory), and is waited for where the job's end
//! is decided, so it is no longer one more step after them on the engine's
//! exit (issue #14). Paddock running as the user, not root, cannot read
//! a directory the job closed (`mkdir d; chmod 000 d`, as
//! permission-error tests do), which root can: when a walk meets one, that
//! measurement is made again by `paddock __disk-walk` in a user namespace
//! of its own (`workspace/disk_walk.rs`: the same walk, where the user's
//! own directories are readable), so such a job runs on; where that
//! namespace cannot be made (unprivileged user namespaces turned off) the
//! job is still stopped, the reason naming the step that failed. A
//! directory left uncounted could hide any amount of disk: the walk never
//! guesses. The common walk, meeting no such directory, starts nothing.
//! A kernel quota
//! was not chosen: a size-capped file system for the writable layer needs
//! a mount by root on the host (or, inside the sandbox's user namespace,
//! a tmpfs charged to the job's memory, not its disk, and absent on the
//! `process` rung), and project quotas need root-only setup of the jobs
//! file system; the watcher works on both rungs as they are.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::leftovers::Since;
use crate::workspace::disk_usage::{self, Charged, Incomplete, MAX_DEPTH, MAX_ENTRIES};
use crate::workspace::disk_walk;

/// How often the jobs file system's free space is checked.
const FLOOR_EVERY: Duration = Duration::from_millis(100);
/// The shortest wait between two walks of the job's directory.
const MIN_WALK_GAP: Duration = Duration::from_millis(250);
/// The wait between two walks, in walks' lengths.
const WALK_GAPS: u32 = 9;
/// Free space of the jobs file system below which a running job is
/// stopped, unless the host's `PADDOCK_DISK_RESERVE_MB` says otherwise.
pub const DEFAULT_RESERVE_BYTES: u64 = 512 << 20;
/// The variable that sets the reserve, in MiB.
pub const RESERVE_ENV: &str = "PADDOCK_DISK_RESERVE_MB";
/// Free inodes of the jobs file system below which a running job is
/// stopped (a file system that reports inodes).
const INODE_RESERVE: u64 = 10_000;

/// What the watcher has seen so far.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Measuring the directory as provisioned.
    Measuring,
    /// Watching, the provisioned directory's charge known.
    Watching { baseline: u64 },
    /// Past a limit: why (the job's failure).
    Tripped(String),
}

/// The watcher of one job's directory.
#[derive(Debug)]
pub(super) struct DiskWatch {
    root: PathBuf,
    /// The `paddock` binary, for a walk in a user namespace.
    helper_exe: PathBuf,
    limit: u64,
    reserve: u64,
    stop: Arc<AtomicBool>,
    /// When the job began: its processes are those created since
    /// (`unlinked.rs`).
    since: Option<Since>,
    state: watch::Receiver<State>,
    /// The last measurement, once started ([`DiskWatch::begin_last`]).
    last: std::sync::Mutex<Option<LastWalk>>,
}

/// The last measurement of the job's directory, on a blocking thread: why
/// the job is past a limit, or `None`.
type LastWalk = tokio::task::JoinHandle<Option<String>>;

impl DiskWatch {
    /// Starts watching the job directory `root`: it may grow by `limit`
    /// bytes; the file system holding it keeps `reserve` bytes free;
    /// `helper_exe` (the `paddock` binary) counts a directory Paddock
    /// cannot read when it is not root.
    pub fn start(root: PathBuf, limit: u64, reserve: u64, helper_exe: PathBuf) -> DiskWatch {
        let (tx, state) = watch::channel(State::Measuring);
        let stop = Arc::new(AtomicBool::new(false));
        let since = Since::now();
        let watcher = Watcher {
            root: root.clone(),
            helper_exe: helper_exe.clone(),
            limit,
            reserve,
            stop: stop.clone(),
            since,
            tx,
        };
        let spawned = std::thread::Builder::new()
            .name("paddock-disk-watch".into())
            .spawn(move || watcher.run());
        if let Err(e) = spawned {
            // Without its thread the job is measured once, after it ran.
            tracing::warn!(
                "cannot start the disk watcher of {}: {e}; measured at its end only",
                root.display()
            );
        }
        DiskWatch {
            root,
            helper_exe,
            limit,
            reserve,
            stop,
            since,
            state,
            last: std::sync::Mutex::new(None),
        }
    }

    /// Waits until the directory as provisioned is measured (the job's
    /// commands must not run before: what they write would count as
    /// provisioned).
    pub async fn ready(&self) {
        let mut state = self.state.clone();
        let _ = state.wait_for(|s| *s != State::Measuring).await;
    }

    /// Resolves when the job is past a limit, with why; never otherwise.
    pub fn tripped(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut state = self.state.clone();
        async move {
            if state
                .wait_for(|s| matches!(s, State::Tripped(_)))
                .await
                .is_err()
            {
                // The watcher is gone without tripping: never.
                std::future::pending::<()>().await;
            }
        }
    }

    /// Stops watching and starts the last measurement now, on a blocking
    /// thread, for [`DiskWatch::finish`] to take: called once nothing of
    /// the job is left running (teardown killed it), so that the walk runs
    /// beside what teardown does next instead of after it. Once is enough:
    /// a second call, or one after the watcher tripped, does nothing.
    pub fn begin_last(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let Ok(mut last) = self.last.lock() else {
            return;
        };
        if last.is_none() {
            *last = self.last_walk();
        }
    }

    /// The last measurement started on a blocking thread; `None` when
    /// there is nothing to measure (the watcher tripped already, or never
    /// measured the directory as provisioned).
    fn last_walk(&self) -> Option<LastWalk> {
        let baseline = match &*self.state.borrow() {
            State::Watching { baseline } => *baseline,
            State::Tripped(_) | State::Measuring => return None,
        };
        let (root, limit, reserve, since) =
            (self.root.clone(), self.limit, self.reserve, self.since);
        let helper_exe = self.helper_exe.clone();
        Some(tokio::task::spawn_blocking(move || {
            floor(&root, reserve).or_else(|| {
                let stop_above = baseline.saturating_add(limit);
                // The watch is stopped already: this walk is bounded by
                // its own time only.
                judge(
                    &measure(&root, stop_above, (&helper_exe, since), None),
                    baseline,
                    limit,
                )
            })
        }))
    }

    /// Why the job is past a limit now: the watcher's reason once it has
    /// tripped, else a measurement made now (the host's reserve, then the
    /// job's directory, as the watcher measures it), beside the watch;
    /// `None` when within, or before the directory as provisioned is
    /// measured. The setup cache stores nothing of a job past it.
    pub async fn past_limit_now(&self) -> Option<String> {
        let baseline = match &*self.state.borrow() {
            State::Watching { baseline } => *baseline,
            State::Tripped(why) => return Some(why.clone()),
            State::Measuring => return None,
        };
        let (root, limit, reserve, since) =
            (self.root.clone(), self.limit, self.reserve, self.since);
        let helper_exe = self.helper_exe.clone();
        let stop = self.stop.clone();
        tokio::task::spawn_blocking(move || {
            floor(&root, reserve).or_else(|| {
                let stop_above = baseline.saturating_add(limit);
                judge(
                    &measure(&root, stop_above, (&helper_exe, since), Some(&stop)),
                    baseline,
                    limit,
                )
            })
        })
        .await
        .unwrap_or_else(|e| Some(format!("the job's disk could not be measured: {e}")))
    }

    /// Stops watching and measures once more (the job's processes are
    /// gone; the measurement [`DiskWatch::begin_last`] started, if it was):
    /// why the job is past a limit, or `None`.
    pub async fn finish(self) -> Option<String> {
        self.stop.store(true, Ordering::Relaxed);
        if let State::Tripped(why) = &*self.state.borrow() {
            return Some(why.clone());
        }
        let started = self.last.lock().ok().and_then(|mut last| last.take());
        let walk = match started {
            Some(walk) => walk,
            None => self.last_walk()?,
        };
        walk.await
            .unwrap_or_else(|e| Some(format!("the job's disk could not be measured: {e}")))
    }
}

/// A job that ends before its engine's part (or whose task is dropped)
/// stops its watcher too.
impl Drop for DiskWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The watcher thread's part.
struct Watcher {
    root: PathBuf,
    helper_exe: PathBuf,
    limit: u64,
    reserve: u64,
    stop: Arc<AtomicBool>,
    since: Option<Since>,
    tx: watch::Sender<State>,
}

impl Watcher {
    fn run(self) {
        let helper = (self.helper_exe.as_path(), self.since);
        // The baseline is the walk alone: no process of the job exists yet
        // (the engine and the setup commands start once it is taken,
        // `DiskWatch::ready`), so none holds a removed file of its
        // directory, and the scan of the host's processes for such files
        // (`unlinked.rs`) would find none on the launch's path (issue
        // #14). A baseline without it is never larger than one with it:
        // what the job is charged is never less.
        let baseline = walk(&self.root, u64::MAX, &self.helper_exe, Some(&self.stop))
            .charged
            .bytes;
        self.tx.send_replace(State::Watching { baseline });
        let stop_above = baseline.saturating_add(self.limit);
        let mut next_walk = Instant::now();
        while !self.stop.load(Ordering::Relaxed) {
            let mut why = floor(&self.root, self.reserve);
            if why.is_none() && Instant::now() >= next_walk {
                let began = Instant::now();
                let measured = measure(&self.root, stop_above, helper, Some(&self.stop));
                why = judge(&measured, baseline, self.limit);
                next_walk = Instant::now() + (began.elapsed() * WALK_GAPS).max(MIN_WALK_GAP);
            }
            if let Some(why) = why {
                // Said once: the runner stops the job.
                if !self.stop.load(Ordering::Relaxed) {
                    self.tx.send_replace(State::Tripped(why));
                }
                return;
            }
            std::thread::sleep(FLOOR_EVERY);
        }
    }
}

/// One measurement of the job's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Measured {
    charged: Charged,
    /// Why a directory Paddock could not read was not counted in a user
    /// namespace of its own either (Paddock not root); `None` for root,
    /// or when it was.
    closed: Option<String>,
    /// The job's processes hold more descriptors and mappings than
    /// `unlinked.rs` looks at (`MAX_LOOKED_AT`).
    too_many_held: bool,
}

/// Measures the job directory `root`: [`walk`], plus the files removed
/// from it that processes created since `since` (the job's) still hold
/// open or mapped (`unlinked.rs`: their blocks are still allocated, and
/// no walk sees them).
fn measure(
    root: &Path,
    stop_above: u64,
    (helper_exe, since): (&Path, Option<Since>),
    stop: Option<&AtomicBool>,
) -> Measured {
    let mut measured = walk(root, stop_above, helper_exe, stop);
    let held = super::unlinked::held(root, since);
    measured.charged.bytes = measured.charged.bytes.saturating_add(held.bytes);
    measured.too_many_held = held.partial;
    measured
}

/// Walks the job directory `root`, the walk stopped past `stop_above`:
/// in this thread, and when that walk met a directory it could not read
/// and Paddock is not root, again in a user namespace of its own by
/// `helper_exe` (`workspace/disk_walk.rs`), whose count is then the
/// measurement; `stop`, once set, ends that one early.
fn walk(root: &Path, stop_above: u64, helper_exe: &Path, stop: Option<&AtomicBool>) -> Measured {
    let charged = disk_usage::charged(root, stop_above);
    // Past the limit already, or all read: nothing to count again.
    if charged.incomplete != Some(Incomplete::Unreadable)
        || charged.bytes > stop_above
        || nix::unistd::geteuid().is_root()
    {
        return Measured {
            charged,
            closed: None,
            too_many_held: false,
        };
    }
    match disk_walk::charged_in_namespace(helper_exe, root, stop_above, stop) {
        Ok(counted) if counted.incomplete == Some(Incomplete::Unreadable) => Measured {
            charged: counted,
            closed: Some(
                "it is unreadable there too: it is not its user's (another owner or group)"
                    .to_string(),
            ),
            too_many_held: false,
        },
        Ok(counted) => Measured {
            charged: counted,
            closed: None,
            too_many_held: false,
        },
        Err(e) => Measured {
            charged,
            closed: Some(e.to_string()),
            too_many_held: false,
        },
    }
}

/// Why the job is past its limit, from a measurement of its directory.
fn judge(measured: &Measured, baseline: u64, limit: u64) -> Option<String> {
    let charged = &measured.charged;
    let grown = charged.bytes.saturating_sub(baseline);
    if grown > limit {
        let seen = match charged.incomplete {
            Some(Incomplete::Over) => format!("at least {grown} bytes"),
            _ => format!("{grown} bytes"),
        };
        return Some(format!(
            "the job wrote more than limits.max_disk_bytes ({limit} bytes) to its directory \
             ({seen} more than it was given, counted in allocated blocks and at least 4096 \
             bytes a file); it was stopped"
        ));
    }
    if measured.too_many_held {
        return Some(format!(
            "the job's processes hold more than {} open files and mappings, more than Paddock \
             looks at for files removed from its directory that still count against \
             limits.max_disk_bytes ({limit} bytes); it was stopped",
            super::unlinked::MAX_LOOKED_AT
        ));
    }
    match charged.incomplete {
        None | Some(Incomplete::Over) => None,
        Some(Incomplete::Entries) => Some(format!(
            "the job's directory holds more than {MAX_ENTRIES} files and directories, more than \
             Paddock counts against limits.max_disk_bytes ({limit} bytes); it was stopped"
        )),
        Some(Incomplete::Depth) => Some(format!(
            "the job's directory holds directories deeper than {MAX_DEPTH} levels, deeper than \
             Paddock counts against limits.max_disk_bytes ({limit} bytes); it was stopped"
        )),
        Some(Incomplete::Unreadable) => Some(match &measured.closed {
            None => format!(
                "the job's directory holds a directory Paddock cannot read to count against \
                 limits.max_disk_bytes ({limit} bytes); it was stopped"
            ),
            Some(why) => format!(
                "the job's directory holds a directory Paddock cannot read to count against \
                 limits.max_disk_bytes ({limit} bytes); Paddock runs as uid {}, not root, and \
                 could not count it in a user namespace of its own either: {why}; it was stopped",
                nix::unistd::geteuid()
            ),
        }),
    }
}

/// Why the file system holding `root` is too full for the job to go on:
/// its free space below `reserve`, or its free inodes below
/// [`INODE_RESERVE`]; never with no reserve (`0`).
fn floor(root: &Path, reserve: u64) -> Option<String> {
    // A host that turned its reserve off (`0`) has no floor.
    if reserve == 0 {
        return None;
    }
    let fs = nix::sys::statvfs::statvfs(root).ok()?;
    #[allow(clippy::useless_conversion)]
    let free = u64::from(fs.blocks_available()).saturating_mul(u64::from(fs.fragment_size()));
    if free < reserve {
        return Some(format!(
            "the file system of the job's directory {} has {free} bytes free, below the host's \
             reserve of {reserve} bytes ({RESERVE_ENV}); the job was stopped",
            root.display()
        ));
    }
    #[allow(clippy::useless_conversion)]
    let (files, free_files) = (u64::from(fs.files()), u64::from(fs.files_available()));
    if files > 0 && free_files < INODE_RESERVE {
        return Some(format!(
            "the file system of the job's directory {} has {free_files} inodes free, below \
             the host's reserve of {INODE_RESERVE}; the job was stopped",
            root.display()
        ));
    }
    None
}

/// The reserve a host asks for in [`RESERVE_ENV`] (MiB), else
/// [`DEFAULT_RESERVE_BYTES`]; a value that is not a number is the default.
pub fn reserve_from(value: Option<&std::ffi::OsStr>) -> u64 {
    value
        .and_then(|v| v.to_str())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|mb| mb.saturating_mul(1 << 20))
        .unwrap_or(DEFAULT_RESERVE_BYTES)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The in-thread walk's measurement of `root`.
    fn walked(root: &Path, stop_above: u64) -> Measured {
        Measured {
            charged: disk_usage::charged(root, stop_above),
            closed: None,
            too_many_held: false,
        }
    }

    /// A measurement whose scan for removed files held open stopped at
    /// its bound stops the job, whatever it counted: what it did not look
    /// at could hide any amount.
    #[test]
    fn too_many_held_files_to_look_at_stop_the_job() {
        let measured = Measured {
            charged: Charged {
                bytes: 10,
                entries: 1,
                incomplete: None,
            },
            closed: None,
            too_many_held: true,
        };
        assert_eq!(
            judge(&measured, 10, 1 << 20),
            Some(
                "the job's processes hold more than 1000000 open files and mappings, more than \
                 Paddock looks at for files removed from its directory that still count against \
                 limits.max_disk_bytes (1048576 bytes); it was stopped"
                    .to_string()
            )
        );
    }

    /// Sparse and `fallocate`d files count what they hold, a file's hard
    /// links count it once (also when its other name is outside the
    /// directory), empty files
    /// count a block each, and a tree deeper than the walk enters stops
    /// the job instead of hiding what is in it.
    #[test]
    fn what_a_job_writes_is_charged_however_it_is_written() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("job");
        std::fs::create_dir(&root).unwrap();
        let base = disk_usage::charged(&root, u64::MAX).bytes;
        let limit = 1 << 20;
        let judged = |root: &Path| judge(&walked(root, base + limit), base, limit);
        assert_eq!(judged(&root), None);

        // A sparse GiB holds nothing.
        let sparse = std::fs::File::create(root.join("sparse")).unwrap();
        sparse.set_len(1 << 30).unwrap();
        assert_eq!(judged(&root), None);

        // Two MiB under two names inside and one outside: counted once,
        // whole.
        std::fs::write(root.join("big"), vec![1u8; 2 << 20]).unwrap();
        std::fs::hard_link(root.join("big"), root.join("big-again")).unwrap();
        std::fs::hard_link(root.join("big"), tmp.path().join("outside")).unwrap();
        let c = disk_usage::charged(&root, u64::MAX);
        assert_eq!(
            (c.bytes - base) >> 20,
            2,
            "charged {} over a base of {base}",
            c.bytes
        );
        assert!(judged(&root).unwrap().starts_with(
            "the job wrote more than limits.max_disk_bytes (1048576 bytes) to its directory (at least"
        ));
        std::fs::remove_file(root.join("big")).unwrap();
        std::fs::remove_file(root.join("big-again")).unwrap();
        assert_eq!(judged(&root), None);

        // 300 empty files: 300 blocks of 4 KiB.
        for i in 0..300 {
            std::fs::write(root.join(format!("e{i}")), b"").unwrap();
        }
        assert_eq!(
            judge(&walked(&root, u64::MAX), base, limit),
            Some(format!(
                "the job wrote more than limits.max_disk_bytes (1048576 bytes) to its directory \
                 ({} bytes more than it was given, counted in allocated blocks and at least 4096 \
                 bytes a file); it was stopped",
                301 * 4096
            ))
        );
        for i in 0..300 {
            std::fs::remove_file(root.join(format!("e{i}"))).unwrap();
        }

        // Deeper than the walk enters.
        let mut at = root.join("deep");
        for _ in 0..MAX_DEPTH + 2 {
            at = at.join("d");
        }
        std::fs::create_dir_all(&at).unwrap();
        assert_eq!(
            judge(&walked(&root, u64::MAX), base, 1 << 30),
            Some(format!(
                "the job's directory holds directories deeper than {MAX_DEPTH} levels, deeper \
                 than Paddock counts against limits.max_disk_bytes (1073741824 bytes); it was \
                 stopped"
            ))
        );
    }

    /// The last walk teardown begins is the one the job's end takes: what
    /// is written after it began is not measured again (before, the end
    /// walked the directory anew, one more step after teardown's); a
    /// watch that did not begin it walks at its end and sees the write.
    #[tokio::test]
    async fn the_end_takes_the_last_walk_begun_at_teardown() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("job");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(root.join("given"), b"provisioned").unwrap();
        let limit = 1 << 20;
        let begun = DiskWatch::start(
            root.clone(),
            limit,
            0,
            PathBuf::from("/nonexistent/paddock"),
        );
        let not_begun = DiskWatch::start(
            root.clone(),
            limit,
            0,
            PathBuf::from("/nonexistent/paddock"),
        );
        begun.ready().await;
        not_begun.ready().await;
        begun.begin_last();
        begun.begin_last();
        // Begun: its walk finishes by itself (bounded, should it never
        // have begun).
        for _ in 0..4000 {
            let finished = {
                let last = begun.last.lock().unwrap();
                last.as_ref().is_some_and(|w| w.is_finished())
            };
            if finished {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        std::fs::write(root.join("late"), vec![1u8; 2 << 20]).unwrap();
        let (begun, not_begun) = (begun.finish().await, not_begun.finish().await);
        assert_eq!(begun, None);
        assert!(
            not_begun.as_deref().is_some_and(|why| why.starts_with(
                "the job wrote more than limits.max_disk_bytes (1048576 bytes) to its directory"
            )),
            "{not_begun:?}"
        );
    }

    /// The host's floor: below the reserve (here more than any disk has
    /// free) the job is stopped, naming the directory and the reserve.
    #[test]
    fn a_file_system_below_the_reserve_stops_the_job() {
        let tmp = tempfile::tempdir().unwrap();
        let why = floor(tmp.path(), u64::MAX).unwrap();
        assert!(
            why.starts_with(&format!(
                "the file system of the job's directory {} has ",
                tmp.path().display()
            )) && why.ends_with(&format!(
                "bytes free, below the host's reserve of {} bytes (PADDOCK_DISK_RESERVE_MB); \
                 the job was stopped",
                u64::MAX
            )),
            "{why}"
        );
        assert_eq!(floor(tmp.path(), 0), None);
        assert_eq!(reserve_from(Some("3".as_ref())), 3 << 20);
        assert_eq!(reserve_from(Some("x".as_ref())), DEFAULT_RESERVE_BYTES);
        assert_eq!(reserve_from(None), DEFAULT_RESERVE_BYTES);
    }
}

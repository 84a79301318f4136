//! Removing a job's directory off the job's path (issue #14): teardown
//! renames it into `<jobs>/.trash/` (one `rename(2)`, whatever the size of
//! the tree; an overlay workspace's mount moves with it) and the overlay
//! is unmounted and the files are deleted afterwards: by a background
//! thread of a long-running Paddock; by a detached `paddock
//! __empty-trash` that goes once `paddock run` has exited (started while
//! the job's engine runs, it waits for the end of its standard input, a
//! pipe `paddock run` holds, so that neither its start nor its work is on
//! the job's exit path; it takes the trash's lock, checkpoints the store,
//! then lowers itself to nice 19, `SCHED_IDLE` and the idle I/O class, so
//! that its unmounts and deletions get only the CPU the next job leaves);
//! and by every reaper pass (the start of each `paddock run` and `paddock
//! serve`, for at most [`START_BUDGET`]; `paddock gc`, which then empties
//! the rest), which finishes what a killed remover left. A directory
//! whose `work` is still a mount is unmounted before anything in it is
//! deleted (`overlay::unmount_work`), and left for a later pass when it
//! stays mounted: nothing walks through a mount into the snapshot
//! beneath. Deleting never follows a link and never enters another
//! device or mount (`remove.rs`, which needs no stack or descriptor per
//! level, and removes all but what it cannot, naming that),
//! and nothing of the job is running by then (teardown killed it).
//! Emptying takes an exclusive `flock` on `<jobs>/.trash.lock`, so two
//! removers never delete the same tree at once; a reaper on the start-up
//! path does not wait for it (the holder finishes), a background remover
//! does.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};

/// How long a reaper pass on a job's start-up path spends emptying the
/// trash ([`empty_until`]): what it does not finish is left to the remover
/// the run starts, which goes once the run has exited, or to `paddock gc`.
pub const START_BUDGET: Duration = Duration::from_millis(500);

/// The trash directory, under the jobs directory.
pub const TRASH: &str = ".trash";
/// The lock file of whoever empties the trash, under the jobs directory.
pub const TRASH_LOCK: &str = ".trash.lock";

/// The hidden subcommand of the detached remover: `paddock __empty-trash
/// JOBS_DIR` (dispatched before the runtime, like the sandbox helper).
pub const EMPTY_ARG: &str = "__empty-trash";

/// Starts `exe __empty-trash jobs [--checkpoint db] [--cap max_bytes]`
/// detached (its own process group, no standard streams, an empty
/// environment; it changes to `/` itself, so that it is started with
/// `posix_spawn` rather than a fork of this process, on the job's exit
/// path), not waited for: the SQLite store `db`'s write-ahead log folded
/// in, the trash deleted, and the caches held to `max_bytes`
/// (`crate::cache_cap::after_job_main`), after this process has exited.
/// Only when there is a store to checkpoint, the trash holds anything or
/// there is a cap.
pub fn empty_detached(
    exe: &Path,
    jobs: &Path,
    max_bytes: Option<u64>,
    db: Option<&Path>,
) -> std::io::Result<()> {
    if !has_entries(jobs) && max_bytes.is_none() && db.is_none() {
        return Ok(());
    }
    remover(exe, jobs, max_bytes, db).spawn().map(drop)
}

/// A remover started ahead of the job's end ([`start_waiting`]): it waits
/// for the end of its standard input, a pipe whose only writer this is,
/// so it does its work once [`WaitingRemover::release`] is called or this
/// process ends, however it ends.
#[derive(Debug)]
pub struct WaitingRemover {
    /// The pipe's writing end (close-on-exec: nothing this process starts
    /// holds it).
    release: std::process::ChildStdin,
    /// Never waited for: it outlives this process.
    child: std::process::Child,
}

impl WaitingRemover {
    /// Lets the remover go: it checkpoints, empties and caps as
    /// [`empty_detached`]'s does, now.
    pub fn release(self) {
        drop(self.release);
    }

    /// The remover's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Lets the remover go once this process has exited (its last
    /// descriptor of the pipe closed by the kernel), so that its work
    /// does not share the CPU with this process's own end.
    pub fn release_at_exit(self) {
        std::mem::forget(self);
    }
}

/// Starts the remover [`empty_detached`] starts, but now, waiting for
/// [`WaitingRemover::release`] (or this process's end) before it does
/// anything: `paddock run` starts it while the job's engine runs, where
/// Paddock is idle, instead of on the job's exit path (issue #14). Its
/// standard input is that pipe, its other streams and environment none,
/// its process group its own, as [`empty_detached`]'s.
pub fn start_waiting(
    exe: &Path,
    jobs: &Path,
    max_bytes: Option<u64>,
    db: Option<&Path>,
) -> std::io::Result<WaitingRemover> {
    let mut child = remover(exe, jobs, max_bytes, db)
        .stdin(std::process::Stdio::piped())
        .spawn()?;
    let release = child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("the remover's standard input is not a pipe"))?;
    Ok(WaitingRemover { release, child })
}

/// The remover's command: `exe __empty-trash jobs [--checkpoint db]
/// [--cap max_bytes]`, no standard streams, an empty environment, a
/// process group of its own.
fn remover(
    exe: &Path,
    jobs: &Path,
    max_bytes: Option<u64>,
    db: Option<&Path>,
) -> std::process::Command {
    use std::os::unix::process::CommandExt as _;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg(EMPTY_ARG).arg(jobs);
    if let Some(db) = db {
        cmd.arg("--checkpoint").arg(db);
    }
    if let Some(cap) = max_bytes {
        cmd.arg("--cap").arg(cap.to_string());
    }
    cmd.env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0);
    cmd
}

/// Moves the job directory `root` (directly under the jobs directory)
/// into the trash, under a name no other entry has. Errors are the
/// rename's: the caller removes the directory in place then.
pub fn discard(root: &Path) -> std::io::Result<PathBuf> {
    let (Some(jobs), Some(name)) = (root.parent(), root.file_name()) else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a directory under the jobs directory",
        ));
    };
    let trash = jobs.join(TRASH);
    std::fs::create_dir_all(&trash)?;
    let mut target = trash.join(name);
    let mut n = 0u32;
    while std::fs::symlink_metadata(&target).is_ok() {
        n += 1;
        let mut unique = name.to_os_string();
        unique.push(format!(".{n}"));
        target = trash.join(unique);
    }
    std::fs::rename(root, &target)?;
    Ok(target)
}

/// Whether the trash under `jobs` holds anything.
pub fn has_entries(jobs: &Path) -> bool {
    std::fs::read_dir(jobs.join(TRASH)).is_ok_and(|mut rd| rd.next().is_some())
}

/// The exclusive lock of whoever empties the trash under `jobs`
/// ([`TRASH_LOCK`]), held until dropped.
#[derive(Debug)]
pub struct Emptying(#[allow(dead_code)] Flock<File>);

/// Takes the lock of whoever empties the trash under `jobs`, when the
/// trash holds anything: `wait` for another remover to let it go, or
/// else leave the trash to it. `Ok(None)`: nothing to do (empty, or
/// held by another remover and not waited for).
pub fn lock(jobs: &Path, wait: bool) -> Result<Option<Emptying>, String> {
    if !has_entries(jobs) {
        return Ok(None);
    }
    let lock_path = jobs.join(TRASH_LOCK);
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| e.to_string())
        .and_then(|file| {
            let how = if wait {
                FlockArg::LockExclusive
            } else {
                FlockArg::LockExclusiveNonblock
            };
            Flock::lock(file, how).map_err(|(_, e)| e.to_string())
        });
    match lock {
        Ok(lock) => Ok(Some(Emptying(lock))),
        // Held: another remover empties it.
        Err(_) if !wait => Ok(None),
        Err(e) => Err(format!("lock {}: {e}", lock_path.display())),
    }
}

/// Deletes everything in the trash under `jobs`; `wait` for another
/// remover to finish first, or else leave the trash to it. What could not
/// be deleted, as messages naming the path (it stays for a later pass).
pub fn empty(jobs: &Path, wait: bool) -> Vec<String> {
    empty_until(jobs, wait, None)
}

/// [`empty`], stopped once `deadline` has passed: what is left (an entry
/// not reached, or one partly deleted, mounted or not) stays for the next
/// remover, and is no error. A reaper pass on a job's start-up path
/// empties within [`START_BUDGET`]: a remover killed mid-way (session 47's
/// note) left the whole trash to it, mounts and trees of any size, all
/// deleted before the job could start.
pub fn empty_until(jobs: &Path, wait: bool, deadline: Option<Instant>) -> Vec<String> {
    match lock(jobs, wait) {
        Ok(Some(held)) => empty_held(jobs, &held, deadline),
        Ok(None) => Vec::new(),
        Err(e) => vec![e],
    }
}

/// [`empty_until`] under the lock `_held` (taken by [`lock`]).
pub fn empty_held(jobs: &Path, _held: &Emptying, deadline: Option<Instant>) -> Vec<String> {
    let trash = jobs.join(TRASH);
    let mut errors = Vec::new();
    let Ok(entries) = std::fs::read_dir(&trash) else {
        return errors;
    };
    let past = || deadline.is_some_and(|d| Instant::now() >= d);
    for entry in entries.flatten() {
        if past() {
            break;
        }
        let path = entry.path();
        // A job directory comes here with its overlay still mounted at
        // `work` (`Workspace::remove`): unmounted first, so that nothing
        // walks through it; one that stays mounted is left for a later
        // pass. Only a directory's own (`lstat`), never a link's target.
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            if let Err(e) = super::overlay::unmount_work(&path) {
                errors.push(format!("unmount {}: {e}", path.join("work").display()));
                continue;
            }
        }
        // A directory is removed without following any link in it,
        // whatever permissions the job left on it (`remove.rs`); a link
        // or file is unlinked itself.
        let removed = super::remove::remove_tree_until(&path, deadline);
        match removed {
            // Left for the next remover.
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => break,
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                errors.push(format!("remove {}: {e}", path.display()));
            }
            _ => {}
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A job's tree deeper than the open-file limit lets a walk holding a
    /// descriptor per level go (`mkdir d; cd d` in a loop) leaves the
    /// trash when it is emptied, nothing said. The standard removal failed with `EMFILE`, and the directory
    /// stayed in the trash for good, every pass failing on it again.
    #[test]
    fn a_tree_deeper_than_the_open_file_limit_leaves_the_trash() {
        use rustix::fs::{Mode, OFlags};
        let (soft, _) =
            nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
        let depth = soft.saturating_add(64).max(2000);
        if depth > 200_000 {
            eprintln!("skipping: an open-file limit of {soft} asks for a tree too deep to make");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let jobs = dir.path().join("jobs");
        let root = jobs.join("job-deep");
        std::fs::create_dir_all(root.join("work")).unwrap();
        let mut at = rustix::fs::open(
            root.join("work"),
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        )
        .unwrap();
        for level in 0..depth {
            rustix::fs::mkdirat(&at, c"d", Mode::from_raw_mode(0o755)).unwrap();
            if level % 1000 == 0 {
                rustix::fs::openat(&at, c"f", OFlags::CREATE | OFlags::WRONLY, Mode::empty())
                    .unwrap();
            }
            at = rustix::fs::openat(&at, c"d", OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
                .unwrap();
        }
        drop(at);
        discard(&root).unwrap();
        assert_eq!(
            (empty(&jobs, false), has_entries(&jobs)),
            (Vec::<String>::new(), false)
        );
    }

    /// Emptying within a deadline already past leaves every entry, partly
    /// deleted or not, for the next remover and says no error; the next
    /// emptying, without one, finishes them. Before, every reaper pass
    /// (the start of each `paddock run`) deleted the whole trash a killed
    /// remover left before the job could start, whatever its size.
    #[test]
    fn emptying_within_a_deadline_leaves_the_rest_to_the_next_remover() {
        let dir = tempfile::tempdir().unwrap();
        let jobs = dir.path().join("jobs");
        for id in ["job-a", "job-b"] {
            let root = jobs.join(id);
            for d in 0..20 {
                std::fs::create_dir_all(root.join(format!("work/d{d}/e"))).unwrap();
                std::fs::write(root.join(format!("work/d{d}/e/f")), "x").unwrap();
            }
            discard(&root).unwrap();
        }
        let count = || std::fs::read_dir(jobs.join(TRASH)).unwrap().count();
        let stopped = empty_until(&jobs, false, Some(Instant::now()));
        let left = count();
        assert_eq!(
            (stopped, left, empty(&jobs, false), has_entries(&jobs)),
            (Vec::<String>::new(), 2, Vec::<String>::new(), false)
        );
    }

    /// A discarded directory is gone from its place at once, and emptying
    /// deletes it without following a link planted in it: the link's
    /// target outside survives.
    #[test]
    fn discard_then_empty_follows_no_link() {
        let dir = tempfile::tempdir().unwrap();
        let jobs = dir.path().join("jobs");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(outside.join("sub")).unwrap();
        std::fs::write(outside.join("sub/keep.txt"), "keep").unwrap();
        for id in ["job-a", "job-a"] {
            let root = jobs.join(id);
            std::fs::create_dir_all(root.join("work/deep")).unwrap();
            std::fs::write(root.join("work/deep/f"), "x").unwrap();
            std::os::unix::fs::symlink(&outside, root.join("work/link")).unwrap();
            discard(&root).unwrap();
            assert!(!root.exists());
        }
        let mut names: Vec<String> = std::fs::read_dir(jobs.join(TRASH))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["job-a", "job-a.1"]);
        assert!(has_entries(&jobs));
        assert_eq!(empty(&jobs, false), Vec::<String>::new());
        assert!(!has_entries(&jobs));
        assert_eq!(
            std::fs::read_to_string(outside.join("sub/keep.txt")).unwrap(),
            "keep"
        );
    }

    /// A job directory discarded with its overlay mounted keeps the mount
    /// in the trash (teardown does not unmount, issue #14); emptying
    /// unmounts it before deleting, so nothing is deleted through it: the
    /// lower layer (the snapshot) keeps every file, the trash is empty and
    /// nothing stays mounted.
    #[test]
    fn a_mounted_work_tree_is_unmounted_before_its_directory_is_deleted() {
        if !super::super::overlay::testable_here() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let jobs = dir.path().join("jobs");
        let lower = dir.path().join("snapshot");
        std::fs::create_dir_all(lower.join("src")).unwrap();
        std::fs::write(lower.join("src/kept.txt"), "kept").unwrap();
        let root = jobs.join("job-m");
        let (upper, workdir, work) = (
            root.join("meta/upper"),
            root.join("meta/w"),
            root.join("work"),
        );
        for d in [&upper, &workdir, &work] {
            std::fs::create_dir_all(d).unwrap();
        }
        super::super::overlay::mount_at(&lower, &upper, &workdir, &work).unwrap();
        std::fs::write(work.join("new.txt"), "the job's").unwrap();
        let moved = discard(&root).unwrap();
        let mounted_in_trash = super::super::overlay::is_mounted(&moved.join("work"));
        let listed = std::fs::read_to_string(moved.join("work/src/kept.txt")).ok();
        let errors = empty(&jobs, false);
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert_eq!(
            (
                mounted_in_trash,
                listed,
                errors,
                has_entries(&jobs),
                std::fs::read_to_string(lower.join("src/kept.txt")).ok(),
                mounts.contains(&*jobs.to_string_lossy()),
            ),
            (
                true,
                Some("kept".to_string()),
                Vec::<String>::new(),
                false,
                Some("kept".to_string()),
                false,
            )
        );
    }

    /// A remover started ahead does nothing until released: it is given
    /// the remover's arguments, and reads its
    /// standard input to its end (a stand-in for `paddock` that records
    /// them once it got there), which comes only with the release.
    #[test]
    fn a_remover_started_ahead_waits_for_its_release() {
        let dir = tempfile::tempdir().unwrap();
        let done = dir.path().join("done");
        let exe = dir.path().join("paddock");
        paddock_test_support::script::write_script(
            &exe,
            &format!(
                "#!/bin/sh\ncat >/dev/null\necho \"$*\" > {}.tmp\nmv {}.tmp {}\n",
                done.display(),
                done.display(),
                done.display()
            ),
        );
        let jobs = dir.path().join("jobs");
        let db = dir.path().join("paddock.db");
        let waiting = start_waiting(&exe, &jobs, Some(7), Some(&db)).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!done.exists(), "the remover ran before its release");
        waiting.release();
        for _ in 0..400 {
            if done.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        assert_eq!(
            std::fs::read_to_string(&done).unwrap(),
            format!(
                "{EMPTY_ARG} {} --checkpoint {} --cap 7\n",
                jobs.display(),
                db.display()
            )
        );
    }

    /// A remover that holds the lock is left to finish: a reaper that
    /// does not wait deletes nothing, one that waits does once it is free.
    #[test]
    fn a_held_trash_is_left_to_its_remover() {
        let dir = tempfile::tempdir().unwrap();
        let jobs = dir.path().to_path_buf();
        std::fs::create_dir_all(jobs.join("job-b/work")).unwrap();
        discard(&jobs.join("job-b")).unwrap();
        let held = Flock::lock(
            File::create(jobs.join(TRASH_LOCK)).unwrap(),
            FlockArg::LockExclusive,
        )
        .unwrap();
        assert_eq!(empty(&jobs, false), Vec::<String>::new());
        assert!(has_entries(&jobs));
        drop(held);
        assert_eq!(empty(&jobs, true), Vec::<String>::new());
        assert!(!has_entries(&jobs));
    }
}

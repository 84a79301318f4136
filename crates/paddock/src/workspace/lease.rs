//! A job's lease: `<jobs>/.leases/<job id>.lock`, on which the process
//! running the job holds an exclusive `flock` from before the job is
//! recorded until it ends (the kernel drops it when that process ends,
//! however it ends). The workspace is provisioned under it; the reaper
//! (`crate::reaper`) takes the leases no live process holds and cleans up
//! after their jobs. The file appears only once it is locked (locked under
//! a temporary name, then renamed), so a reaper never wins a race against
//! a job that is starting; the lock's descriptor is close-on-exec.
//! `paddock publish` of a finished job holds the same lease while it
//! publishes, marked kept ([`Lease::take_to_publish`]): a reaper that finds
//! it abandoned (the publish was killed) finishes what the publish left
//! (its push's scratch, a GitLab token) and never removes a job directory.
//!
//! A lease is never taken from its holder: a new lease file is made and
//! locked without a name (`O_TMPFILE` in the leases directory) and linked
//! at the lease's path only if no lease file is there (`linkat`, which
//! never replaces), so a process killed while it places one leaves
//! nothing behind. Where the file system has no `O_TMPFILE` (or `/proc`
//! is missing), it is made under a name of its own (`<id>.lock.new<random>`)
//! and put in place with `renameat2(RENAME_NOREPLACE)` (or a hard link);
//! a writer killed then leaves that file, unlocked, which the reaper
//! removes once it is a minute old ([`remove_stale_pending`]). A lease
//! file that was locked is checked to still be the one at the lease's
//! path (its holder may have released it in between). So of two `paddock publish JOB` at
//! once exactly one holds the lease and the other is told it is busy,
//! whether or not a lease file was there (`tests/it/lease_race.rs`).

use std::fs::File;
use std::io::Write as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::fcntl::{Flock, FlockArg};

/// The directory of the leases, under the jobs directory.
pub(crate) const LEASES: &str = ".leases";

/// What a kept job's lease file holds.
pub(crate) const KEPT: &[u8] = b"kept\n";

/// How many times a lock file removed while it was waited for is taken
/// again before giving up (a pruner removes each at most once a pass).
const LOCK_ROUNDS: usize = 8;

/// Opens (creating it when missing) the lock file `path` and waits, off
/// the async runtime, for `how` (shared or exclusive) on it: how jobs hold
/// a mirror or a snapshot while they use it (`mirror.rs`, `snapshot.rs`)
/// and fetches into a local source take turns (`source_lock.rs`). The
/// pruner (`prune.rs`) removes a lock file while it holds it exclusively;
/// a waiter that opened the file before and locked it after finds it is
/// no longer the file at `path` ([`is_at`]) and takes the lock of the one
/// there now (made anew), so two holders never hold one lock through two
/// files. The file is opened as `own_file::open_lock` opens it: a link, a
/// FIFO or anything but a regular file planted at `path` (by a
/// `process`-rung job, or another user of a shared host directory) is
/// refused, never followed or waited on for ever.
pub(crate) async fn lock_file(path: &Path, how: FlockArg) -> std::io::Result<Flock<File>> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        for _ in 0..LOCK_ROUNDS {
            let file = crate::own_file::open_lock(&path)?;
            let held = Flock::lock(file, how).map_err(|(_, errno)| std::io::Error::from(errno))?;
            if is_at(&held, &path) {
                return Ok(held);
            }
        }
        Err(std::io::Error::other(format!(
            "the lock file was removed under each of {LOCK_ROUNDS} waits for it"
        )))
    })
    .await
    .map_err(std::io::Error::other)
    .and_then(|locked| locked)
}

/// Whether `file` is the file at `path` now (not one removed from there).
pub(crate) fn is_at(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(held), Ok(there)) => held.dev() == there.dev() && held.ino() == there.ino(),
        _ => false,
    }
}

/// How many times [`Lease::take_to_publish`] looks again.
const ROUNDS: usize = 8;

/// The infix of a lease file being placed under a name of its own.
const PENDING: &str = ".lock.new";

/// How old a named pending lease file must be before the reaper takes it
/// for a killed writer's (a live one holds it for microseconds).
const PENDING_STALE: std::time::Duration = std::time::Duration::from_secs(60);

/// Makes a lease file holding `content`, locked, and puts it at `path`
/// only if nothing is there; `None` when something is. Unnamed until it
/// is in place where the file system allows it, else under a name of its
/// own (module text).
fn place(dir: &Path, name: &str, path: &Path, content: &[u8]) -> std::io::Result<Option<Lease>> {
    match place_unnamed(dir, path, content) {
        Ok(placed) => Ok(placed),
        Err(_) => place_named(dir, name, path, content),
    }
}

/// [`place`] with an `O_TMPFILE` file linked at `path`: nothing is left
/// when the process is killed at any point.
fn place_unnamed(dir: &Path, path: &Path, content: &[u8]) -> std::io::Result<Option<Lease>> {
    use rustix::fs::{AtFlags, Mode, OFlags, CWD};
    let fd = rustix::fs::open(
        dir,
        OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let lock = Flock::lock(File::from(fd), FlockArg::LockExclusiveNonblock)
        .map_err(|(_, e)| std::io::Error::from(e))?;
    (&*lock).write_all(content)?;
    let name = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&*lock));
    match rustix::fs::linkat(CWD, name.as_str(), CWD, path, AtFlags::SYMLINK_FOLLOW) {
        Ok(()) => Ok(Some(Lease::held(lock, path.to_path_buf()))),
        Err(rustix::io::Errno::EXIST) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// [`place`] under a temporary name, renamed into place.
fn place_named(
    dir: &Path,
    name: &str,
    path: &Path,
    content: &[u8],
) -> std::io::Result<Option<Lease>> {
    let pending = tempfile::Builder::new()
        .prefix(&format!("{name}{PENDING}"))
        .tempfile_in(dir)?;
    let lock = Flock::lock(
        pending.as_file().try_clone()?,
        FlockArg::LockExclusiveNonblock,
    )
    .map_err(|(_, e)| std::io::Error::from(e))?;
    (&*lock).write_all(content)?;
    match pending.persist_noclobber(path) {
        Ok(_) => Ok(Some(Lease::held(lock, path.to_path_buf()))),
        // The temporary file goes with `e`.
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => Ok(None),
        Err(e) => Err(e.error),
    }
}

/// Removes the pending lease files (`<id>.lock.new…`) under the leases
/// directory `dir` whose writer is gone: a regular file (looked at with
/// `lstat`; a link or anything else is left alone), unchanged for
/// [`PENDING_STALE`], that nobody holds locked (its lock taken without
/// waiting, through a descriptor opened with `O_NOFOLLOW`, and checked to
/// be the file still at that name). Returns the names removed and what
/// could not be done.
pub(crate) fn remove_stale_pending(dir: &Path) -> (Vec<PathBuf>, Vec<String>) {
    use std::os::unix::fs::OpenOptionsExt as _;
    let (mut removed, mut errors) = (Vec::new(), Vec::new());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (removed, errors);
    };
    let now = std::time::SystemTime::now();
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().contains(PENDING) {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let old = meta
            .modified()
            .is_ok_and(|t| crate::file_age::age(t, now) >= PENDING_STALE);
        if !meta.file_type().is_file() || !old {
            continue;
        }
        let Ok(file) = File::options()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
            .open(&path)
        else {
            continue;
        };
        // Held: its writer is alive (however unlikely after a minute).
        let Ok(lock) = Flock::lock(file, FlockArg::LockExclusiveNonblock) else {
            continue;
        };
        if !still_at(&lock, &path) {
            continue;
        }
        match std::fs::remove_file(&path) {
            Ok(()) => removed.push(path),
            Err(e) => errors.push(format!("remove {}: {e}", path.display())),
        }
        drop(lock);
    }
    removed.sort();
    (removed, errors)
}

/// Whether the file `lock` holds is still the one at `path`.
pub(crate) fn still_at(lock: &File, path: &Path) -> bool {
    match (lock.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(held), Ok(there)) => held.dev() == there.dev() && held.ino() == there.ino(),
        _ => false,
    }
}

/// A job's lease, held while the job runs. Cheap to clone; the lock is
/// released when the last clone is dropped (the kernel releases it when the
/// process ends). The lease file is deleted only by [`Lease::release`],
/// once the job's record is final: a job whose `paddock` unwound or gave
/// up on its store leaves the file, unlocked, for the next reaper.
#[derive(Debug, Clone)]
pub struct Lease(Arc<Held>);

#[derive(Debug)]
struct Held {
    lock: Flock<File>,
    path: PathBuf,
}

impl Lease {
    /// Takes the lease of job (or scratch directory) `name` under
    /// `jobs_root`; an `AlreadyExists` error when its lease file is there
    /// (held, or left by a dead process for the reaper).
    pub fn take(jobs_root: &Path, name: &str) -> std::io::Result<Lease> {
        let dir = jobs_root.join(LEASES);
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(format!("{name}.lock"));
        place(&dir, name, &path, b"")?.ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("{}: the lease is there already", path.display()),
            )
        })
    }

    /// [`Lease::take`], waiting up to `within` while the lease file is
    /// there: a queued job's claimer may meet the lease a reaper pass
    /// took to look at the job again and gives back at once
    /// (`reaper::reap_unleased`), which is no reason to fail the claim.
    /// Looked at again every 20 ms, then at doubling intervals of up to
    /// 200 ms; the last `AlreadyExists` when it stays.
    pub async fn take_within(
        jobs_root: &Path,
        name: &str,
        within: std::time::Duration,
    ) -> std::io::Result<Lease> {
        let until = tokio::time::Instant::now() + within;
        let mut pause = std::time::Duration::from_millis(20);
        loop {
            match Lease::take(jobs_root, name) {
                Err(e)
                    if e.kind() == std::io::ErrorKind::AlreadyExists
                        && tokio::time::Instant::now() + pause <= until =>
                {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(std::time::Duration::from_millis(200));
                }
                taken => return taken,
            }
        }
    }

    /// The lease of the ended job `name` for one `paddock publish`, marked
    /// kept from before it appears; `None` while a live process holds it.
    /// An abandoned one (a killed publish's) is taken over as it is.
    pub fn take_to_publish(jobs_root: &Path, name: &str) -> std::io::Result<Option<Lease>> {
        let dir = jobs_root.join(LEASES);
        let path = dir.join(format!("{name}.lock"));
        // The lease file may come (another publish placed it) or go (its
        // holder released it) between the steps: look again, a few times.
        for _ in 0..ROUNDS {
            match File::options().read(true).write(true).open(&path) {
                Ok(file) => match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                    Ok(lock) if still_at(&lock, &path) => {
                        let lease = Lease::held(lock, path);
                        lease.keep()?;
                        return Ok(Some(lease));
                    }
                    // Released and deleted while this process waited.
                    Ok(_) => continue,
                    Err((_, nix::errno::Errno::EWOULDBLOCK)) => return Ok(None),
                    Err((_, e)) => return Err(e.into()),
                },
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            std::fs::create_dir_all(&dir)?;
            if let Some(lease) = place(&dir, name, &path, KEPT)? {
                return Ok(Some(lease));
            }
        }
        Err(std::io::Error::other(format!(
            "{}: the lease file kept appearing and going",
            path.display()
        )))
    }

    pub(crate) fn held(lock: Flock<File>, path: PathBuf) -> Lease {
        Lease(Arc::new(Held { lock, path }))
    }

    /// Deletes the lease file: the job ended and its record is final.
    /// While the lock is still held, so a reaper never finds the file free.
    pub fn release(&self) -> std::io::Result<()> {
        match std::fs::remove_file(&self.0.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Marks the job directory as kept (`--keep`): if this process dies
    /// before the job's record is final, a reaper fails the job but leaves
    /// its directory; once the lease is released, nothing ever removes it.
    pub fn keep(&self) -> std::io::Result<()> {
        (&*self.0.lock).write_all(KEPT)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Where the file system has `O_TMPFILE` (this host's ext4 and tmpfs),
    /// a lease is placed without ever having a name of its own, so a kill
    /// at any moment leaves nothing; placing over an existing one refuses.
    #[test]
    fn a_lease_is_placed_unnamed_and_never_over_another() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job-1.lock");
        let first = place_unnamed(dir.path(), &path, KEPT).unwrap();
        assert!(first.is_some());
        assert_eq!(std::fs::read(&path).unwrap(), KEPT);
        assert!(place_unnamed(dir.path(), &path, b"").unwrap().is_none());
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["job-1.lock"]);
    }

    /// A lease held by another for a moment is waited for and taken once
    /// given back; one that stays is refused as taken, once the wait is
    /// over (not before it, not much after).
    #[tokio::test]
    async fn a_lease_is_waited_for_while_held_and_refused_past_the_wait() {
        let jobs = tempfile::tempdir().unwrap();
        let looking = Lease::take(jobs.path(), "job-1").unwrap();
        let gives_back = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(150)).await;
            looking.release().unwrap();
        });
        let wait = std::time::Duration::from_secs(5);
        let taken = Lease::take_within(jobs.path(), "job-1", wait).await;
        gives_back.await.unwrap();
        let _stays = Lease::take(jobs.path(), "job-2").unwrap();
        let began = std::time::Instant::now();
        let wait = std::time::Duration::from_millis(300);
        let refused = Lease::take_within(jobs.path(), "job-2", wait).await;
        let took = began.elapsed();
        assert_eq!(
            (
                taken.is_ok(),
                refused.map(|_| ()).map_err(|e| e.kind()),
                took >= std::time::Duration::from_millis(100),
                took < std::time::Duration::from_secs(2),
            ),
            (true, Err(std::io::ErrorKind::AlreadyExists), true, true)
        );
    }

    /// A lock file removed while a job waited for it (the pruner holds it
    /// and removes it): the waiter, woken on the removed file, takes the
    /// one made at the path anew instead of holding a lock no one else
    /// can see. (Before, it held the removed file's lock: two holders.)
    #[tokio::test]
    async fn a_lock_file_removed_while_waited_for_is_taken_anew() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.lock");
        std::fs::write(&path, "the removed one").unwrap();
        let pruner = Flock::lock(File::open(&path).unwrap(), FlockArg::LockExclusive).unwrap();
        let waiter = {
            let path = path.clone();
            tokio::spawn(async move { lock_file(&path, FlockArg::LockExclusive).await })
        };
        // Once the waiter has the file open too (no sleep: its descriptor
        // names the file).
        while !opened_by_two(&path) {
            tokio::task::yield_now().await;
        }
        std::fs::remove_file(&path).unwrap();
        drop(pruner);
        let held = waiter.await.unwrap().unwrap();
        // The file made anew is empty.
        assert_eq!(
            (is_at(&held, &path), held.metadata().unwrap().len()),
            (true, 0)
        );
    }

    /// What is planted at a lock's path (a FIFO, a link to a file that
    /// is not there yet, a link to another file) is refused at once: no
    /// wait on the FIFO (it opened without a writer's reader for ever:
    /// the test gives up after 5 s), no file made or locked through the
    /// link. Before, the FIFO's open never returned and each link had
    /// its target made (anywhere Paddock may write) and locked.
    #[tokio::test]
    async fn a_planted_fifo_or_link_at_a_lock_is_refused_never_waited_on() {
        use std::os::unix::fs::OpenOptionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.lock");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let elsewhere = dir.path().join("elsewhere");
        let dangling = dir.path().join("dangling.lock");
        std::os::unix::fs::symlink(&elsewhere, &dangling).unwrap();
        let theirs = dir.path().join("theirs");
        std::fs::write(&theirs, "theirs").unwrap();
        let linked = dir.path().join("linked.lock");
        std::os::unix::fs::symlink(&theirs, &linked).unwrap();
        let mut seen = Vec::new();
        for path in [&fifo, &dangling, &linked] {
            let taken = tokio::time::timeout(
                std::time::Duration::from_secs(5),
                lock_file(path, FlockArg::LockExclusive),
            )
            .await;
            seen.push(match taken {
                Err(_) => "waited",
                Ok(Ok(_)) => "taken",
                Ok(Err(_)) => "refused",
            });
        }
        // A FIFO's open left blocked on its thread is let go (a reader
        // comes), so that the test ends either way.
        let _ = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(&fifo);
        assert_eq!(
            (
                seen,
                elsewhere.exists(),
                std::fs::read_to_string(&theirs).unwrap()
            ),
            (vec!["refused"; 3], false, "theirs".to_string())
        );
    }

    /// Whether two descriptors of this process name `path` (the test's
    /// own and the waiter's).
    fn opened_by_two(path: &Path) -> bool {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter(|e| std::fs::read_link(e.path()).is_ok_and(|l| l == path))
            .count()
            >= 2
    }
}

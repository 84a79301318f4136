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
//! locked under a name of its own (`<id>.lock.new<random>`) and put in
//! place only if no lease file is there (`renameat2(RENAME_NOREPLACE)`,
//! or a hard link where that is missing), and a lease file that was
//! locked is checked to still be the one at the lease's path (its holder
//! may have released it in between). So of two `paddock publish JOB` at
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

/// Opens (creating it when missing) the lock file `path` and waits, off
/// the async runtime, for `how` (shared or exclusive) on it: how jobs hold
/// a mirror or a snapshot while they use it (`mirror.rs`, `snapshot.rs`).
pub(crate) async fn lock_file(path: &Path, how: FlockArg) -> std::io::Result<Flock<File>> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)?;
        Flock::lock(file, how).map_err(|(_, errno)| errno.into())
    })
    .await
    .map_err(std::io::Error::other)
    .and_then(|locked| locked)
}

/// How many times [`Lease::take_to_publish`] looks again.
const ROUNDS: usize = 8;

/// Makes a lease file holding `content`, locked, and puts it at `path`
/// only if nothing is there; `None` when something is.
fn place(dir: &Path, name: &str, path: &Path, content: &[u8]) -> std::io::Result<Option<Lease>> {
    let pending = tempfile::Builder::new()
        .prefix(&format!("{name}.lock.new"))
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

//! Layer 3: the per-host semaphore for `max_concurrent_jobs`. A profile with
//! N slots owns N lock files `<host dir>/slots/<profile id>/slot-<i>.lock`;
//! a job holds an exclusive `flock` on one of them from admission to
//! teardown. The kernel releases the lock when the holding process dies, so
//! the semaphore holds across separate `paddock` processes and never leaks
//! a slot after a crash. The host directory is passed in (tests use a temp
//! directory).

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

#[derive(Debug, thiserror::Error)]
pub enum SemaphoreError {
    #[error("cannot create the slot directory {path}: {source}")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open the slot file {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot lock the slot file {path}: {errno}")]
    Lock { path: PathBuf, errno: Errno },
}

/// The semaphores of one host.
#[derive(Debug, Clone)]
pub struct HostSemaphore {
    dir: PathBuf,
}

/// A held slot; dropping it releases the slot.
#[derive(Debug)]
pub struct Slot {
    pub index: u32,
    pub path: PathBuf,
    _lock: Flock<File>,
}

/// How often a waiting job retries.
const POLL: Duration = Duration::from_millis(100);

impl HostSemaphore {
    pub fn new(host_dir: &Path) -> HostSemaphore {
        HostSemaphore {
            dir: host_dir.join("slots"),
        }
    }

    /// One of `max` slots of `key`, if one is free now.
    pub fn try_acquire(
        &self,
        key: &str,
        max: u32,
        holder: &str,
    ) -> Result<Option<Slot>, SemaphoreError> {
        let dir = self.dir.join(key);
        std::fs::create_dir_all(&dir).map_err(|source| SemaphoreError::CreateDir {
            path: dir.clone(),
            source,
        })?;
        for index in 0..max {
            let path = dir.join(format!("slot-{index}.lock"));
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .map_err(|source| SemaphoreError::Open {
                    path: path.clone(),
                    source,
                })?;
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(mut lock) => {
                    // Who holds it, for operators; the lock, not this text, is the truth.
                    let _ = lock.set_len(0);
                    let _ = writeln!(*lock, "{holder} pid {}", std::process::id());
                    return Ok(Some(Slot {
                        index,
                        path,
                        _lock: lock,
                    }));
                }
                Err((_, Errno::EWOULDBLOCK)) => continue,
                Err((_, errno)) => return Err(SemaphoreError::Lock { path, errno }),
            }
        }
        Ok(None)
    }

    /// Waits for one of `max` slots of `key`.
    pub async fn acquire(&self, key: &str, max: u32, holder: &str) -> Result<Slot, SemaphoreError> {
        loop {
            if let Some(slot) = self.try_acquire(key, max, holder)? {
                return Ok(slot);
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn slots_are_exclusive_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let sem = HostSemaphore::new(dir.path());
        let a = sem.try_acquire("box", 2, "a").unwrap().unwrap();
        let b = sem.try_acquire("box", 2, "b").unwrap().unwrap();
        assert_eq!((a.index, b.index), (0, 1));
        assert!(sem.try_acquire("box", 2, "c").unwrap().is_none());
        // Another key has its own slots.
        assert!(sem.try_acquire("other", 1, "d").unwrap().is_some());
        drop(a);
        assert_eq!(sem.try_acquire("box", 2, "e").unwrap().unwrap().index, 0);
    }
}

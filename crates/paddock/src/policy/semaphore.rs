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
        let dir_fd = slot_dir(&self.dir, key).map_err(|source| SemaphoreError::CreateDir {
            path: dir.clone(),
            source,
        })?;
        for index in 0..max {
            let name = format!("slot-{index}.lock");
            let path = dir.join(&name);
            let (file, own) = open_slot(&dir_fd, &name).map_err(|source| SemaphoreError::Open {
                path: path.clone(),
                source,
            })?;
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(mut lock) => {
                    // Who holds it, for operators; the lock, not this text,
                    // is the truth. Written only into this user's own file
                    // of one name (not a hard link to another file).
                    if own {
                        let _ = lock.set_len(0);
                        let _ = writeln!(*lock, "{holder} pid {}", std::process::id());
                    }
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

/// The directory `slots/key` (`slots` the host directory's), each of the
/// two made when missing and opened without following a link
/// (`O_NOFOLLOW | O_DIRECTORY`), the slot files then opened beneath it:
/// a link planted as either (by another user of a shared host directory,
/// or a `process`-rung job) had the slot files made, and the holder's
/// text written, in whatever directory it named. The host directory
/// itself is the operator's, and followed.
fn slot_dir(slots: &Path, key: &str) -> std::io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags, CWD};
    let host = slots.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(host)?;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut fd = rustix::fs::openat(CWD, host, flags, Mode::empty())?;
    let names = [
        slots.file_name().unwrap_or(std::ffi::OsStr::new("slots")),
        std::ffi::OsStr::new(key),
    ];
    for name in names {
        match rustix::fs::mkdirat(&fd, name, Mode::from_raw_mode(0o777)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        fd = rustix::fs::openat(&fd, name, flags | OFlags::NOFOLLOW, Mode::empty())?;
    }
    Ok(fd)
}

/// The slot file `name` of the directory `dir`, made when missing, opened
/// without following a link or waiting on a FIFO (`O_NOFOLLOW | O_NONBLOCK`), and refused
/// when it is not a regular file; with whether it is this user's own
/// file of one name (the holder's text is written only into such a one).
/// A host directory may be shared (`--host-dir`: state shared by every
/// `paddock` process on the host), and a `process`-rung job can write it:
/// a FIFO planted there held the job's start (and the async worker it
/// opened on) for ever, and a link had the holder's text written over
/// whatever file it named.
fn open_slot(dir: &std::os::fd::OwnedFd, name: &str) -> std::io::Result<(File, bool)> {
    use rustix::fs::{Mode, OFlags};
    use std::os::unix::fs::MetadataExt as _;
    let flags =
        OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = File::from(rustix::fs::openat(
        dir,
        name,
        flags,
        Mode::from_raw_mode(0o644),
    )?);
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let own = meta.uid() == nix::unistd::geteuid().as_raw() && meta.nlink() == 1;
    Ok((file, own))
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

    /// What a job (or another user of a shared host directory) plants at
    /// a slot's path is never followed, waited on or written through: a
    /// FIFO and a link are refused (the error names the slot), a hard
    /// link to another file is locked but not written, and the files they
    /// name keep their text. Before, the FIFO held the open for ever (the
    /// test would hang: it opens on a thread and gives up after 5 s), and
    /// the link and the hard link had the file they name emptied and the
    /// holder's text written into it.
    #[test]
    fn a_planted_fifo_or_link_is_never_waited_on_or_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let host = dir.path().join("host");
        let slots = host.join("slots");
        for key in ["fifo", "link", "hard"] {
            std::fs::create_dir_all(slots.join(key)).unwrap();
        }
        let mine = dir.path().join("authorized_keys");
        std::fs::write(&mine, "mine").unwrap();
        nix::unistd::mkfifo(
            &slots.join("fifo/slot-0.lock"),
            nix::sys::stat::Mode::S_IRWXU,
        )
        .unwrap();
        std::os::unix::fs::symlink(&mine, slots.join("link/slot-0.lock")).unwrap();
        std::fs::hard_link(&mine, slots.join("hard/slot-0.lock")).unwrap();
        let sem = HostSemaphore::new(&host);
        let (tx, rx) = std::sync::mpsc::channel();
        let on_thread = sem.clone();
        std::thread::spawn(move || {
            let r = on_thread
                .try_acquire("fifo", 1, "a")
                .map(|s| s.is_some())
                .map_err(|e| e.to_string());
            let _ = tx.send(r);
        });
        let fifo = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("the FIFO's open did not return");
        let link = sem
            .try_acquire("link", 1, "b")
            .map(|s| s.is_some())
            .map_err(|e| e.to_string());
        let hard = sem.try_acquire("hard", 1, "c").unwrap();
        assert_eq!(
            (
                fifo,
                link,
                hard.map(|s| s.index),
                std::fs::read_to_string(&mine).unwrap()
            ),
            (
                Err(format!(
                    "cannot open the slot file {}: {}",
                    slots.join("fifo/slot-0.lock").display(),
                    std::io::Error::from(Errno::ENXIO)
                )),
                Err(format!(
                    "cannot open the slot file {}: {}",
                    slots.join("link/slot-0.lock").display(),
                    std::io::Error::from(Errno::ELOOP)
                )),
                Some(0),
                "mine".to_string()
            )
        );
    }

    /// A link planted as the profile's slot directory (`slots/<profile>`)
    /// or as `slots` itself is not followed: the slot files are not made
    /// in the directory it names (here one of this user's own), and the
    /// error names the directory. Before, `create_dir_all` and the open
    /// went through the link: `slot-0.lock` was made there, holding the
    /// holder's text.
    #[test]
    fn a_planted_link_to_a_directory_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let mut seen = Vec::new();
        for planted in ["slots/box", "slots"] {
            let host = dir.path().join(format!("host-{}", seen.len()));
            let elsewhere = dir.path().join(format!("elsewhere-{}", seen.len()));
            std::fs::create_dir_all(&elsewhere).unwrap();
            std::fs::create_dir_all(host.join("slots")).unwrap();
            if planted == "slots" {
                std::fs::remove_dir(host.join("slots")).unwrap();
            }
            std::os::unix::fs::symlink(&elsewhere, host.join(planted)).unwrap();
            let got = HostSemaphore::new(&host)
                .try_acquire("box", 2, "job-1")
                .map(|s| s.map(|s| s.index))
                .map_err(|e| e.to_string());
            let made: Vec<String> = std::fs::read_dir(&elsewhere)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            seen.push((got, made));
        }
        let refused = |host: &str| {
            Err(format!(
                "cannot create the slot directory {}: {}",
                dir.path().join(host).join("slots/box").display(),
                std::io::Error::from(Errno::ENOTDIR)
            ))
        };
        assert_eq!(
            seen,
            vec![
                (refused("host-0"), Vec::<String>::new()),
                (refused("host-1"), Vec::<String>::new()),
            ]
        );
    }
}

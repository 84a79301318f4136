//! The identity of a jobs directory (docs/store.md, "Several hosts, one
//! database"): a random id kept in `<jobs>/.host-id`, made once and never
//! changed, which every job run from that directory records as its owner
//! in the store (`store::Owner`). It belongs to the jobs directory, not
//! the machine, because a job's lease lives there: two jobs directories
//! on one machine are two "hosts" to the reaper, which judges another
//! host's job by its heartbeat, never by its own leases. The file is
//! written under a name of its own and linked in place only if none is
//! there, so two processes starting at once agree on one id. It is read
//! as the host's other records under the jobs directory are: never
//! through a link (`O_NOFOLLOW`), only a regular file (a FIFO or device
//! put in its place is refused at once, never waited on), and never more
//! than a few bytes past an id's length. The host's name goes with it
//! for messages only.

use std::io::{Read as _, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use crate::store::Owner;

/// The file holding the id, under the jobs directory.
pub const FILE: &str = ".host-id";

/// How many hex digits an id has (128 random bits).
const DIGITS: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum HostIdError {
    #[error("create the jobs directory {dir}: {source}")]
    CreateDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("write the host id {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("read the host id {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the host id {path} is {found}, not a regular file: remove it only if no job of this \
         jobs directory is running, and a new one is made"
    )]
    NotAFile { path: PathBuf, found: &'static str },
    #[error(
        "the host id {path} is not {DIGITS} lowercase hex digits (found {found:?}): remove it \
         only if no job of this jobs directory is running, and a new one is made"
    )]
    Malformed { path: PathBuf, found: String },
}

/// The owner this jobs directory's jobs record: its id (made now when it
/// has none) and this machine's name.
pub fn owner(jobs: &Path) -> Result<Owner, HostIdError> {
    Ok(Owner {
        host: load_or_create(jobs)?,
        name: host_name(),
    })
}

/// The id in `<jobs>/.host-id`, made when missing (module text).
pub fn load_or_create(jobs: &Path) -> Result<String, HostIdError> {
    let path = jobs.join(FILE);
    match read(&path) {
        Err(HostIdError::Read { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
        other => return other,
    }
    std::fs::create_dir_all(jobs).map_err(|source| HostIdError::CreateDir {
        dir: jobs.to_path_buf(),
        source,
    })?;
    let write = |source| HostIdError::Write {
        path: path.clone(),
        source,
    };
    let id = hex::encode(rand::random::<[u8; DIGITS / 2]>());
    let mut pending = tempfile::Builder::new()
        .prefix(".host-id.new")
        .tempfile_in(jobs)
        .map_err(write)?;
    pending
        .write_all(format!("{id}\n").as_bytes())
        .and_then(|()| pending.as_file().sync_all())
        .map_err(write)?;
    match pending.persist_noclobber(&path) {
        Ok(_) => Ok(id),
        // Another process made it first: its id is the one.
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => read(&path),
        Err(e) => Err(write(e.error)),
    }
}

/// The most of the file that is read: an id, its newline, and enough
/// past them to tell a longer file from an id.
const READ_MAX: u64 = DIGITS as u64 + 8;

/// The id in `path`, checked (module text: no link, no FIFO, bounded).
fn read(path: &Path) -> Result<String, HostIdError> {
    let failed = |source| HostIdError::Read {
        path: path.to_path_buf(),
        source,
    };
    let not_a_file = |found| HostIdError::NotAFile {
        path: path.to_path_buf(),
        found,
    };
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
            return Err(not_a_file("a symbolic link"));
        }
        Err(e) => return Err(failed(e)),
    };
    let kind = file.metadata().map_err(failed)?.file_type();
    if !kind.is_file() {
        return Err(not_a_file(if kind.is_dir() {
            "a directory"
        } else {
            "a FIFO, socket or device"
        }));
    }
    let mut bytes = Vec::new();
    file.take(READ_MAX)
        .read_to_end(&mut bytes)
        .map_err(failed)?;
    let text = String::from_utf8_lossy(&bytes);
    let id = text.trim_end_matches('\n');
    let ok = id.len() == DIGITS
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !ok {
        return Err(HostIdError::Malformed {
            path: path.to_path_buf(),
            found: id.chars().take(80).collect(),
        });
    }
    Ok(id.to_owned())
}

/// This machine's name (`/proc/sys/kernel/hostname`), for messages.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|n| n.trim().to_owned())
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "an unnamed host".to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Made once, then read back the same; a jobs directory made on the
    /// way; another directory gets another id.
    #[test]
    fn an_id_is_made_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let jobs = dir.path().join("jobs");
        let first = load_or_create(&jobs).unwrap();
        assert_eq!(
            std::fs::read_to_string(jobs.join(FILE)).unwrap(),
            format!("{first}\n")
        );
        assert_eq!(load_or_create(&jobs).unwrap(), first);
        let other = load_or_create(&dir.path().join("other")).unwrap();
        assert_ne!(other, first);
        let names: Vec<_> = std::fs::read_dir(&jobs)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [FILE]);
    }

    /// Threads racing to make the id all get the one that was placed.
    #[test]
    fn racing_makers_agree() {
        let dir = tempfile::tempdir().unwrap();
        let jobs = dir.path().to_path_buf();
        let ids: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| load_or_create(&jobs).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let placed = std::fs::read_to_string(jobs.join(FILE)).unwrap();
        assert_eq!(ids, vec![placed.trim_end().to_owned(); 8]);
    }

    /// A link, a FIFO or a directory in the id's place is refused at once,
    /// naming it, and left as it is: never followed, never waited on,
    /// never replaced by a new id (the jobs directory's jobs would change
    /// hands).
    #[test]
    fn what_is_not_a_regular_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "0123456789abcdef0123456789abcdef\n").unwrap();
        let refusal = |found: &str| {
            format!(
                "the host id {} is {found}, not a regular file: remove it only if no job of this \
                 jobs directory is running, and a new one is made",
                path.display()
            )
        };
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let err = load_or_create(dir.path()).unwrap_err();
        assert_eq!(err.to_string(), refusal("a symbolic link"));
        assert!(std::fs::symlink_metadata(&path).unwrap().is_symlink());
        // A dangling link is refused too, not taken for a missing id.
        std::fs::remove_file(&target).unwrap();
        let err = load_or_create(dir.path()).unwrap_err();
        assert_eq!(err.to_string(), refusal("a symbolic link"));
        assert!(!target.exists());

        std::fs::remove_file(&path).unwrap();
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
        // No writer ever opens the FIFO: a blocking open would hang here.
        let err = load_or_create(dir.path()).unwrap_err();
        assert_eq!(err.to_string(), refusal("a FIFO, socket or device"));

        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let err = load_or_create(dir.path()).unwrap_err();
        assert_eq!(err.to_string(), refusal("a directory"));
    }

    /// A large file is read only as far as an id and a little past it:
    /// refused as malformed, what it shows bounded.
    #[test]
    fn a_long_file_is_read_only_so_far() {
        let dir = tempfile::tempdir().unwrap();
        let long = format!("0123456789abcdef0123456789abcdef{}", "a".repeat(1 << 20));
        std::fs::write(dir.path().join(FILE), long).unwrap();
        let err = load_or_create(dir.path()).unwrap_err();
        let HostIdError::Malformed { found, .. } = err else {
            panic!("not refused as malformed: {err}");
        };
        assert_eq!(
            found,
            format!("0123456789abcdef0123456789abcdef{}", "a".repeat(8))
        );
    }

    /// A file that is not an id is refused, naming it, and left alone.
    #[test]
    fn a_malformed_id_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE), "not-an-id\n").unwrap();
        let err = load_or_create(dir.path()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "the host id {} is not 32 lowercase hex digits (found \"not-an-id\"): remove it \
                 only if no job of this jobs directory is running, and a new one is made",
                dir.path().join(FILE).display()
            )
        );
    }
}

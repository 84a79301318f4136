//! Cancel wake-ups between processes on one SQLite file (so on one host),
//! SQLite's counterpart of PostgreSQL's `NOTIFY`: a process that records
//! a cancel of a running job (`paddock cancel`, a server's `DELETE`)
//! touches `<database>-cancels` beside the database (made 0600, never
//! opened through a link), and a process that runs jobs watches that file
//! with inotify (set up before its first subscription returns) and
//! announces [`ANY_JOB`] to its subscribers: each job's heartbeat task
//! reads its own job's request at once, not at its next poll
//! (`heartbeat::CANCEL_POLL`, 1 s). The touch names no job (the file
//! never grows); a notice is only a wake-up, and one missed (the watch
//! could not be set, the file was replaced) is found by the poll, which
//! stays.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
use rustix::fs::{Mode, OFlags};
use tokio::io::unix::AsyncFd;
use tokio::sync::broadcast;

use crate::store::cancel_notices::ANY_JOB;

/// The file beside the database at `db`.
pub(crate) fn path_for(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-cancels");
    PathBuf::from(name)
}

/// The file at `path`, made (0600) when missing; never through a link.
fn open(path: &Path) -> io::Result<File> {
    let flags =
        OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(File::from(rustix::fs::open(
        path,
        flags,
        Mode::from_raw_mode(0o600),
    )?))
}

/// Tells the watchers a cancel was recorded: the file's modification time
/// set to now.
pub(crate) fn touch(path: &Path) -> io::Result<()> {
    open(path)?.set_modified(std::time::SystemTime::now())
}

/// Watches `path` (made when missing), sending [`ANY_JOB`] on `tx` each
/// time it is touched, until the returned task is aborted or the watch
/// fails (logged).
pub(crate) fn watch(
    path: &Path,
    tx: broadcast::Sender<String>,
) -> io::Result<tokio::task::JoinHandle<()>> {
    drop(open(path)?);
    let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
    inotify::add_watch(&fd, path, WatchFlags::ATTRIB | WatchFlags::MODIFY)?;
    // `AsyncFd::new` is deprecated for types whose descriptor may change
    // under it (tokio#8587); an `OwnedFd` it owns is the same open
    // descriptor for its whole life, which is what `register` asks (and
    // `unsafe` is forbidden in this crate).
    #[allow(deprecated)]
    let fd = AsyncFd::new(fd)?;
    let shown = path.display().to_string();
    Ok(tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        loop {
            let mut ready = match fd.readable().await {
                Ok(ready) => ready,
                Err(e) => return tracing::warn!("store: cancel notices: watch {shown}: {e}"),
            };
            // Every event queued is read: one wake-up for all of them.
            let read = ready
                .try_io(|fd| rustix::io::read(fd.get_ref(), &mut buf[..]).map_err(io::Error::from));
            match read {
                Ok(Ok(_)) => {
                    // No subscriber: nobody here runs a job.
                    let _ = tx.send(ANY_JOB.to_owned());
                }
                Ok(Err(e)) => return tracing::warn!("store: cancel notices: read {shown}: {e}"),
                // Nothing to read after all: wait again.
                Err(_) => {}
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Each touch is one wake-up; the file is made 0600 and stays empty.
    #[tokio::test]
    async fn a_touch_wakes_the_watcher() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = path_for(&dir.path().join("paddock.db"));
        let (tx, mut rx) = broadcast::channel(8);
        let task = watch(&path, tx).unwrap();
        touch(&path).unwrap();
        let woke = tokio::time::timeout(std::time::Duration::from_secs(30), rx.recv())
            .await
            .unwrap()
            .unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(
            (woke, meta.permissions().mode() & 0o777, meta.len()),
            (ANY_JOB.to_owned(), 0o600, 0)
        );
        task.abort();
    }

    /// A store watches the cancel file only once asked
    /// (`Store::watch_other_processes`, what `paddock serve` does): a
    /// `paddock run`'s subscription sets no inotify watch, whose release
    /// would hold its exit (issue #14); the file is made by the watch.
    #[tokio::test]
    async fn only_a_store_asked_to_watches_the_cancel_file() {
        use crate::store::Store as _;
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("paddock.db");
        let store = crate::store::sqlite::SqliteStore::open(&db).await.unwrap();
        let _run = store.cancel_notices().await;
        let before = path_for(&db).exists();
        store.watch_other_processes();
        let _serve = store.cancel_notices().await;
        assert_eq!((before, path_for(&db).exists()), (false, true));
    }
}

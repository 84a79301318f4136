//! What a mirror's last passing check saw (`mirror.rs`: `git fsck
//! --connectivity-only` after each fetch), so that the next job's fetch
//! that changed nothing skips the check (a git process, about 2 ms of CPU
//! on every URL job: issue #14). The state is every file and directory
//! of the mirror's git directory by name, type, size, inode, modification
//! and change time (a loose object's directory by its own entry only, not
//! its files), read without following a link; `FETCH_HEAD` and the state
//! file itself are left out. A fetch that wrote a ref, a pack or a loose
//! object, a crash in the middle of one, anything that rewrote a file of
//! it: the state differs and the check runs (then the state is kept again
//! once it passes). What is left unseen is damage that no write through
//! the file system made (a disk's bad sector under a file unchanged since
//! the check): the base's name failing to read from it has it checked
//! after all (`mirror.rs`); a later git reading it fails. A `sandbox`-rung
//! job never sees the mirror; a `process`-rung one runs as Paddock's user
//! and can reach it, so the state file is read as `own_file::read` reads a
//! record (no link followed, no FIFO waited on, bounded: anything else
//! only means the check runs) and written with no link followed.

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use sha2::Digest as _;

/// The state file, in the mirror's git directory (a name git never uses).
const CHECKED: &str = "paddock-checked";

/// Files that are no part of the state: the last fetch's heads (a fetch
/// that changed nothing still writes it unless told not to), the state
/// file and the names resolved under it (`mirror_names.rs`).
const LEFT_OUT: &[&str] = &[
    "FETCH_HEAD",
    CHECKED,
    super::mirror_names::NAMES,
    super::bundle_source::FETCHED,
];

/// The most of a kept state read back: a longer one is not taken (the
/// check runs).
const MAX_STATE: u64 = 64 << 20;

/// The names kept for the mirror `dir` (`mirror_names.rs`) when it is as
/// its last passing check saw it; `None` when it is not.
pub(super) fn unchanged_names(dir: &Path) -> Option<super::mirror_names::Names> {
    unchanged(dir).map(|(names, _)| names)
}

/// [`unchanged_names`] with a digest of the state (SHA-256 of it, hex).
pub(super) fn unchanged(dir: &Path) -> Option<(super::mirror_names::Names, String)> {
    let kept = crate::own_file::read(&dir.join(CHECKED), MAX_STATE).ok()?;
    let now = state(dir)?;
    (now == kept).then(|| {
        let digest = hex::encode(sha2::Sha256::digest(kept.as_bytes()));
        (super::mirror_names::Names::unchanged(dir, &kept), digest)
    })
}

/// Keeps the state of the mirror `dir`, whose check passed; a failure to
/// keep it only means that the next job checks again (the file is
/// removed, so no older state stands).
pub(super) fn checked(dir: &Path) {
    let file = dir.join(CHECKED);
    let kept = state(dir).is_some_and(|now| write_own(&file, now.as_bytes()).is_ok());
    if !kept {
        let _ = std::fs::remove_file(&file);
    }
}

/// `bytes` as the whole of the regular file `path`, opened with no link
/// followed and no FIFO waited on (a link or FIFO planted there is left
/// as it is: the error only means the next job checks again).
fn write_own(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .mode(0o644)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    file.set_len(0)?;
    file.write_all(bytes)
}

/// Forgets the kept state of the mirror `dir` (the check about to run
/// again, or failed): the next job checks.
pub(super) fn forget(dir: &Path) {
    let _ = std::fs::remove_file(dir.join(CHECKED));
}

/// The state of `dir` (see the module comment), one sorted line per
/// entry; `None` when some part of it cannot be read.
fn state(dir: &Path) -> Option<String> {
    let mut lines = Vec::new();
    walk(dir, "", &mut lines).ok()?;
    lines.sort();
    Some(lines.concat())
}

fn walk(dir: &Path, rel: &str, lines: &mut Vec<String>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir.join(rel))? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_str().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, "a name not UTF-8")
        })?;
        if rel.is_empty() && LEFT_OUT.contains(&name) {
            continue;
        }
        let path = if rel.is_empty() {
            name.to_string()
        } else {
            format!("{rel}/{name}")
        };
        // Not followed: a link is an entry like any other.
        let meta = std::fs::symlink_metadata(dir.join(&path))?;
        let kind = if meta.is_dir() {
            'd'
        } else if meta.is_file() {
            'f'
        } else {
            'o'
        };
        lines.push(format!(
            "{path}\t{kind}\t{}\t{}\t{}.{}\t{}.{}\n",
            meta.len(),
            meta.ino(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime(),
            meta.ctime_nsec()
        ));
        if meta.is_dir() && !is_loose_objects(&path) {
            walk(dir, &path, lines)?;
        }
    }
    Ok(())
}

/// A directory of loose objects (`objects/xx`): its files are not
/// listed (a mirror gathers many over its fetches); an object added or
/// removed changes the directory's own times.
fn is_loose_objects(path: &str) -> bool {
    path.strip_prefix("objects/")
        .is_some_and(|d| d.len() == 2 && d.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link planted as the state file is not written through (the file
    /// it names keeps its text) nor read (a link to a state that matches
    /// is not taken: the check runs); a FIFO there is refused at once,
    /// not waited on (was: the next job's provisioning held for ever).
    #[test]
    fn a_planted_state_file_is_neither_followed_nor_waited_on() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("mirror");
        std::fs::create_dir_all(dir.join("refs/heads")).unwrap();
        let host = tmp.path().join("host-file");
        std::fs::write(&host, "the host's file\n").unwrap();
        std::os::unix::fs::symlink(&host, dir.join(CHECKED)).unwrap();
        checked(&dir);
        let written_through = std::fs::read_to_string(&host).unwrap();
        // A link to a state that matches the mirror's.
        std::fs::write(&host, state(&dir).unwrap()).unwrap();
        std::fs::remove_file(dir.join(CHECKED)).ok();
        std::os::unix::fs::symlink(&host, dir.join(CHECKED)).unwrap();
        let through_link = unchanged_names(&dir).is_some();
        std::fs::remove_file(dir.join(CHECKED)).unwrap();
        nix::unistd::mkfifo(&dir.join(CHECKED), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let fifo_dir = dir.clone();
        std::thread::spawn(move || tx.send(unchanged_names(&fifo_dir).is_some()));
        let through_fifo = rx.recv_timeout(std::time::Duration::from_secs(10)).ok();
        assert_eq!(
            (written_through.as_str(), through_link, through_fifo),
            ("the host's file\n", false, Some(false))
        );
    }

    /// The state changes with a ref written, a file rewritten in place,
    /// a loose object added; not with `FETCH_HEAD` nor with the state
    /// file itself. A link is listed, not followed.
    #[test]
    fn the_state_sees_every_write_but_fetch_head() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        for d in ["refs/heads", "objects/pack", "objects/ab"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        std::fs::write(dir.join("packed-refs"), "x\n").unwrap();
        std::fs::write(dir.join("objects/ab/cdef"), "o").unwrap();
        std::os::unix::fs::symlink("/nonexistent", dir.join("refs/heads/link")).unwrap();
        // Whether the mirror is as its last passing check saw it, at each
        // step.
        let unchanged = || unchanged_names(dir).is_some();
        let mut seen = vec![unchanged()];
        checked(dir);
        seen.push(unchanged());
        std::fs::write(dir.join("FETCH_HEAD"), "heads\n").unwrap();
        seen.push(unchanged());

        let changes: [&dyn Fn(); 3] = [
            &|| std::fs::write(dir.join("refs/heads/main"), "1\n").unwrap(),
            &|| {
                use std::io::Write as _;
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(dir.join("packed-refs"))
                    .unwrap();
                f.write_all(b"y").unwrap();
            },
            &|| std::fs::write(dir.join("objects/ab/0123"), "p").unwrap(),
        ];
        for change in changes {
            // Apart in time from the state kept (a coarse clock).
            std::thread::sleep(std::time::Duration::from_millis(20));
            change();
            seen.push(unchanged());
            checked(dir);
            seen.push(unchanged());
        }
        forget(dir);
        seen.push(unchanged());
        assert_eq!(
            seen,
            [false, true, true, false, true, false, true, false, true, false]
        );
    }
}

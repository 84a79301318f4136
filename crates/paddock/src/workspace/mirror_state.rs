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
//! after all (`mirror.rs`); a later git reading it fails. The job never sees the
//! mirror, so nothing it does reaches either the mirror or this file.

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

/// The state file, in the mirror's git directory (a name git never uses).
const CHECKED: &str = "paddock-checked";

/// Files that are no part of the state: the last fetch's heads (a fetch
/// that changed nothing still writes it unless told not to) and the
/// state file.
const LEFT_OUT: &[&str] = &["FETCH_HEAD", CHECKED];

/// Whether the mirror `dir` is as its last passing check saw it.
pub(super) fn unchanged_since_check(dir: &Path) -> bool {
    let Ok(kept) = std::fs::read_to_string(dir.join(CHECKED)) else {
        return false;
    };
    state(dir).is_some_and(|now| now == kept)
}

/// Keeps the state of the mirror `dir`, whose check passed; a failure to
/// keep it only means that the next job checks again (the file is
/// removed, so no older state stands).
pub(super) fn checked(dir: &Path) {
    let file = dir.join(CHECKED);
    let kept = state(dir).is_some_and(|now| std::fs::write(&file, now).is_ok());
    if !kept {
        let _ = std::fs::remove_file(&file);
    }
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
        assert!(!unchanged_since_check(dir));
        checked(dir);
        assert!(unchanged_since_check(dir));
        std::fs::write(dir.join("FETCH_HEAD"), "heads\n").unwrap();
        assert!(unchanged_since_check(dir));

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
            assert!(!unchanged_since_check(dir));
            checked(dir);
            assert!(unchanged_since_check(dir));
        }
        forget(dir);
        assert!(!unchanged_since_check(dir));
    }
}

//! Removing a tree a job wrote, whatever permissions it left on it. A
//! job may leave a directory its owner cannot list or write (`chmod 000
//! dir`, `chmod 500 dir`: a test suite checking its error paths, or a job
//! that wants its workspace to outlive it). Paddock running as root
//! removes it anyway; running as the user (a laptop, a build box), the
//! removal fails with `EACCES` and the job's directory would stay on disk
//! for good, retried and refused by every reaper pass. Such a tree is the
//! user's own (the `process` rung runs as the user, the `sandbox` rung's
//! user namespace maps only the user's id), so [`remove_tree`] gives every
//! directory in it that lacks them its owner's read, write and search bits
//! back, then removes it. Nothing is followed: each directory is opened
//! relative to its parent with `O_NOFOLLOW | O_DIRECTORY` (a link in its
//! place is not a directory and is left to the removal, which unlinks it),
//! and its mode is changed through that descriptor (`O_PATH`, through
//! `/proc/self/fd`, as the C library's `fchmodat(AT_SYMLINK_NOFOLLOW)`
//! does), never through a path a link could redirect; files are never
//! changed (unlinking needs only their directory's bits).

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, CWD};

/// The deepest tree whose permissions are mended (a descriptor is held per
/// level): far past what a job's disk watcher lets it make (256 levels).
const MAX_DEPTH: usize = 512;

/// The owner's read, write and search bits.
const OWNER_ALL: u32 = 0o700;

/// Removes `path` (a directory and what it holds, or a file or link)
/// without following links: as it is, and when that is refused for
/// permissions, again once every directory under it is its owner's to list
/// and change. Gone already is success.
pub fn remove_tree(path: &Path) -> io::Result<()> {
    let first = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) => Err(e),
    };
    match first {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) if e.kind() != io::ErrorKind::PermissionDenied => return Err(e),
        Err(_) => {}
    }
    // The tree itself, then the directory holding it (its entry must be
    // removable too; Paddock made it, so that is rarely the refusal).
    let parent = path.parent().unwrap_or(Path::new("/"));
    let name = path.file_name().unwrap_or(OsStr::new("."));
    let parent_fd = rustix::fs::openat(
        CWD,
        parent,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    mend(parent_fd.as_fd(), &c_name(name.as_bytes())?, 0)?;
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        done => done,
    }
}

/// Gives the directory `name` in `parent` (when it is one, not a link)
/// and every directory under it its owner's bits.
fn mend(parent: BorrowedFd<'_>, name: &CString, depth: usize) -> io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(io::Error::other(format!(
            "a tree deeper than {MAX_DEPTH} levels"
        )));
    }
    // The entry itself (a link is opened as a link: O_DIRECTORY refuses
    // it, and it is left alone).
    let at = match rustix::fs::openat(
        parent,
        name.as_c_str(),
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP | rustix::io::Errno::NOENT) => {
            return Ok(())
        }
        Err(e) => return Err(e.into()),
    };
    let mode = rustix::fs::fstat(&at)?.st_mode;
    if mode & OWNER_ALL != OWNER_ALL {
        chmod_fd(&at, (mode & 0o7777) | OWNER_ALL)?;
    }
    let dir = rustix::fs::openat(
        &at,
        c".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut subdirs = Vec::new();
    for entry in Dir::read_from(&dir)? {
        let entry = entry?;
        let child = entry.file_name();
        if child == c"." || child == c".." {
            continue;
        }
        let is_dir = match entry.file_type() {
            FileType::Directory => true,
            FileType::Unknown => {
                let st = rustix::fs::statat(&dir, child, AtFlags::SYMLINK_NOFOLLOW)?;
                FileType::from_raw_mode(st.st_mode) == FileType::Directory
            }
            _ => false,
        };
        if is_dir {
            subdirs.push(child.to_owned());
        }
    }
    for child in subdirs {
        mend(dir.as_fd(), &child, depth + 1)?;
    }
    Ok(())
}

/// `chmod` of what the `O_PATH` descriptor `fd` names (a directory, or a
/// file for `reopen_tree.rs`), never through a path a link could redirect.
pub(super) fn chmod_fd(fd: &OwnedFd, mode: u32) -> io::Result<()> {
    use std::os::fd::AsRawFd as _;
    let via = format!("/proc/self/fd/{}", fd.as_raw_fd());
    std::fs::set_permissions(via, std::fs::Permissions::from_mode(mode))
}

fn c_name(name: &[u8]) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::other("a name with a NUL byte"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    }

    /// A tree with directories its owner cannot list, enter or change,
    /// one behind another, and a link to a directory outside that is as
    /// closed: the tree is gone, the outside directory and what it holds
    /// untouched (its mode too: the link was never followed).
    #[test]
    fn a_tree_of_closed_directories_is_removed_and_no_link_followed() {
        let root = tempfile::tempdir().unwrap();
        let outside = root.path().join("outside");
        std::fs::create_dir_all(outside.join("inner")).unwrap();
        std::fs::write(outside.join("inner/keep"), "k").unwrap();
        let tree = root.path().join("tree");
        std::fs::create_dir_all(tree.join("a/b/c")).unwrap();
        std::fs::write(tree.join("a/b/c/f"), "x").unwrap();
        std::fs::create_dir_all(tree.join("w/x")).unwrap();
        std::fs::write(tree.join("w/x/g"), "y").unwrap();
        std::os::unix::fs::symlink(&outside, tree.join("a/b/link")).unwrap();
        let closed = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        closed(&tree.join("a/b/c"), 0o000);
        closed(&tree.join("a/b"), 0o000);
        closed(&tree.join("w"), 0o500);
        closed(&outside, 0o500);
        remove_tree(&tree).unwrap();
        assert_eq!(
            (
                tree.exists(),
                mode(&outside),
                std::fs::read_to_string(outside.join("inner/keep")).unwrap()
            ),
            (false, 0o500, "k".to_string())
        );
        closed(&outside, 0o700);
    }

    /// The mending walk by itself (what a root test process needs no
    /// mending for): every directory is its owner's to list and change
    /// after it, a file's mode and a link's target's are as they were.
    #[test]
    fn mending_opens_every_directory_and_changes_nothing_else() {
        let root = tempfile::tempdir().unwrap();
        let outside = root.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        let tree = root.path().join("tree");
        std::fs::create_dir_all(tree.join("a/b")).unwrap();
        std::fs::write(tree.join("a/file"), "x").unwrap();
        std::os::unix::fs::symlink(&outside, tree.join("a/link")).unwrap();
        let set = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        set(&tree.join("a/file"), 0o000);
        set(&outside, 0o000);
        set(&tree.join("a/b"), 0o010);
        set(&tree.join("a"), 0o1500);
        let parent = rustix::fs::openat(
            CWD,
            root.path(),
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        )
        .unwrap();
        mend(parent.as_fd(), &c_name(b"tree").unwrap(), 0).unwrap();
        assert_eq!(
            [
                mode(&tree.join("a")),
                mode(&tree.join("a/b")),
                mode(&tree.join("a/file")),
                mode(&outside)
            ],
            [0o1700, 0o710, 0o000, 0o000]
        );
        set(&outside, 0o700);
    }

    /// Gone already, or a file or link in its place: no error, and a
    /// link's target stays.
    #[test]
    fn a_missing_path_a_file_and_a_link_are_removed_as_they_are() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("target");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(root.path().join("file"), "x").unwrap();
        std::os::unix::fs::symlink(&target, root.path().join("link")).unwrap();
        remove_tree(&root.path().join("missing")).unwrap();
        remove_tree(&root.path().join("file")).unwrap();
        remove_tree(&root.path().join("link")).unwrap();
        assert_eq!(
            (
                root.path().join("file").exists(),
                root.path().join("link").exists(),
                target.is_dir()
            ),
            (false, false, true)
        );
    }
}

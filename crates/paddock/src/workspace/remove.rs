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
//! changed (unlinking needs only their directory's bits). The walk is
//! `reopen_tree.rs`'s, which opens a job's closed files for its patch.

use std::io;
use std::path::Path;

use super::reopen_tree::{give_bits, REMOVING};

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
    give_bits(path, nix::unistd::geteuid().as_raw(), REMOVING)?;
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        done => done,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

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
        give_bits(&tree, nix::unistd::geteuid().as_raw(), REMOVING).unwrap();
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

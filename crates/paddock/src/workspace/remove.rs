//! Removing a tree a job wrote, whatever permissions it left on it and
//! however deep it made it. A job may leave a directory its owner cannot
//! list or write (`chmod 000 dir`, `chmod 500 dir`: a test suite checking
//! its error paths, or a job that wants its workspace to outlive it).
//! Paddock running as root removes it anyway; running as the user (a
//! laptop, a build box), the removal failed with `EACCES` and the job's
//! directory would stay on disk for good, retried and refused by every
//! reaper pass. Such a tree is the user's own (the `process` rung runs as
//! the user, the `sandbox` rung's user namespace maps only the user's id),
//! so [`remove_deep`] gives every directory in it that lacks them its
//! owner's read, write and search bits back as it enters it. Nothing is
//! followed: each directory is opened relative to its parent with
//! `O_PATH | O_NOFOLLOW | O_DIRECTORY` (a link in its place is not a
//! directory and is unlinked itself), and its mode is changed through that
//! descriptor (through `/proc/self/fd`, as the C library's
//! `fchmodat(AT_SYMLINK_NOFOLLOW)` does), never through a path a link
//! could redirect; files are never changed (unlinking needs only their
//! directory's bits).
//!
//! A job may also make its tree deeper than any walk holding a descriptor
//! or a stack frame per level can go: `mkdir d; cd d` in a loop makes
//! thousands of levels in a fraction of a second, before the disk watcher
//! stops it (past 256). The standard library's `remove_dir_all` recurses
//! once per level holding a descriptor in each: 20,000 levels overflowed
//! a 2 MiB thread's stack (the trash's emptier and the reaper run on such
//! threads: the whole `paddock` process aborted, `paddock serve` too, and
//! again at every next start, whose reaper pass empties the trash), and
//! past the open-file limit (1,024 levels under a common soft limit) it
//! failed with `EMFILE`, so the directory stayed in the trash for good,
//! its snapshot held by it. [`remove_deep`] holds two descriptors at most
//! and no stack per level, whatever the depth: it goes down by each
//! directory's own descriptor and back up by `..`, checked to be the
//! directory it came from (device and inode), and never enters a
//! directory on another device than the tree's (a mount: left, and the
//! removal fails).

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::time::Instant;

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, CWD};

use super::reopen_tree::chmod_fd;

/// Removes `path` (a directory and what it holds, or a file or link)
/// without following links, a directory by [`remove_deep`] (its owner's
/// bits given back to each directory it must list and change). Gone
/// already is success.
pub fn remove_tree(path: &Path) -> io::Result<()> {
    remove_tree_until(path, None)
}

/// [`remove_tree`], stopped once `deadline` has passed (between two
/// directories) with `ErrorKind::TimedOut`: what is left is a tree still,
/// for a later removal to finish.
pub fn remove_tree_until(path: &Path, deadline: Option<Instant>) -> io::Result<()> {
    let removed = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => remove_deep(path, deadline),
        Ok(_) => std::fs::remove_file(path),
        Err(e) => Err(e),
    };
    match removed {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        done => done,
    }
}

/// One directory of [`remove_deep`]'s way down: its name in its parent,
/// its identity (device, inode) and the directories in it not yet removed.
struct Level {
    name: CString,
    id: (u64, u64),
    subdirs: Vec<CString>,
}

/// Removes the directory `path` and what it holds, whatever its depth,
/// with at most two descriptors open (module text): each directory is
/// entered by its descriptor (no link followed, its owner's bits given
/// back when it is this user's and lacks them), its other entries
/// unlinked, its directories removed one by one, and left by `..`,
/// which must be the directory it was entered from. A directory on
/// another device than `path`'s is not entered: the removal fails. Past
/// `deadline`, it stops (`TimedOut`).
fn remove_deep(path: &Path, deadline: Option<Instant>) -> io::Result<()> {
    let parent = path.parent().unwrap_or(Path::new("/"));
    let name = CString::new(path.file_name().unwrap_or(path.as_os_str()).as_bytes())
        .map_err(|_| io::Error::other("a name with a NUL byte"))?;
    let top = rustix::fs::openat(
        CWD,
        parent,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let me = nix::unistd::geteuid().as_raw();
    let (mut cur, id) = match enter(top.as_fd(), &name, me, None)? {
        Entered::Dir(fd, id) => (fd, id),
        // Not a directory (any more): unlinked as it is.
        Entered::NotDir | Entered::Mount => return unlink(top.as_fd(), &name, AtFlags::empty()),
    };
    let device = id.0;
    let mut levels = vec![Level {
        name,
        id,
        subdirs: empty_out(cur.as_fd())?,
    }];
    loop {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{} not removed within its time", path.display()),
            ));
        }
        let Some(level) = levels.last_mut() else {
            return Ok(());
        };
        if let Some(child) = level.subdirs.pop() {
            match enter(cur.as_fd(), &child, me, Some(device))? {
                Entered::Mount => {
                    return Err(io::Error::other(format!(
                        "{} holds a mount (another device): not entered",
                        path.display()
                    )));
                }
                Entered::Dir(fd, id) => {
                    let subdirs = empty_out(fd.as_fd())?;
                    cur = fd;
                    levels.push(Level {
                        name: child,
                        id,
                        subdirs,
                    });
                }
                Entered::NotDir => unlink(cur.as_fd(), &child, AtFlags::empty())?,
            }
            continue;
        }
        let Some(done) = levels.pop() else {
            return Ok(());
        };
        let Some(up) = levels.last() else {
            drop(cur);
            return unlink(top.as_fd(), &done.name, AtFlags::REMOVEDIR);
        };
        let parent = rustix::fs::openat(
            &cur,
            c"..",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let st = rustix::fs::fstat(&parent)?;
        if (st.st_dev, st.st_ino) != up.id {
            return Err(io::Error::other(format!(
                "a directory under {} was moved while it was removed",
                path.display()
            )));
        }
        cur = parent;
        unlink(cur.as_fd(), &done.name, AtFlags::REMOVEDIR)?;
    }
}

/// What [`enter`] found.
enum Entered {
    /// A directory, opened to be listed and changed, and its identity.
    Dir(OwnedFd, (u64, u64)),
    /// Not a directory (a link, a file, gone).
    NotDir,
    /// A directory on another device than the tree's (a mount), left as
    /// it is.
    Mount,
}

/// The directory `name` in `dir` opened to be listed and changed
/// ([`Entered`]). Its owner's read, write and search bits are given back
/// first when this user (`me`) owns it and it lacks them, unless it is on
/// another device than `device` (the tree's, once known).
fn enter(
    dir: rustix::fd::BorrowedFd<'_>,
    name: &CStr,
    me: u32,
    device: Option<u64>,
) -> io::Result<Entered> {
    let at = match rustix::fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP | rustix::io::Errno::NOENT) => {
            return Ok(Entered::NotDir)
        }
        Err(e) => return Err(e.into()),
    };
    let st = rustix::fs::fstat(&at)?;
    if device.is_some_and(|d| d != st.st_dev) {
        return Ok(Entered::Mount);
    }
    if st.st_uid == me && st.st_mode & 0o700 != 0o700 {
        chmod_fd(&at, (st.st_mode & 0o7777) | 0o700)?;
    }
    let fd = rustix::fs::openat(
        &at,
        c".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    Ok(Entered::Dir(fd, (st.st_dev, st.st_ino)))
}

/// Unlinks every entry of `dir` but its directories, which it returns.
fn empty_out(dir: rustix::fd::BorrowedFd<'_>) -> io::Result<Vec<CString>> {
    let mut subdirs = Vec::new();
    let mut others = Vec::new();
    for entry in Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let is_dir = match entry.file_type() {
            FileType::Directory => true,
            FileType::Unknown => rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory),
            _ => false,
        };
        if is_dir {
            subdirs.push(name.to_owned());
        } else {
            others.push(name.to_owned());
        }
    }
    for name in others {
        unlink(dir, &name, AtFlags::empty())?;
    }
    Ok(subdirs)
}

/// `unlinkat`, gone already being success.
fn unlink(dir: rustix::fd::BorrowedFd<'_>, name: &CStr, flags: AtFlags) -> io::Result<()> {
    match rustix::fs::unlinkat(dir, name, flags) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(e) => Err(e.into()),
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

    /// A mount inside the tree (a tmpfs here) is not entered: the removal
    /// fails naming it, and what the mount holds is as it was. Before,
    /// the standard removal deleted through it.
    #[test]
    fn a_mount_inside_the_tree_is_not_entered() {
        use nix::mount::{mount, umount2, MntFlags, MsFlags};
        let root = tempfile::tempdir().unwrap();
        let tree = root.path().join("tree");
        let inner = tree.join("a/m");
        std::fs::create_dir_all(&inner).unwrap();
        std::fs::write(tree.join("a/f"), "x").unwrap();
        let mounted = super::super::overlay::may_mount()
            && mount(
                Some("tmpfs"),
                &inner,
                Some("tmpfs"),
                MsFlags::empty(),
                None::<&str>,
            )
            .is_ok();
        if !mounted {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "a tmpfs mount needs CAP_SYS_ADMIN in CI"
            );
            eprintln!("skipping: mounting a tmpfs needs CAP_SYS_ADMIN");
            return;
        }
        std::fs::write(inner.join("kept"), "k").unwrap();
        let removed = remove_tree(&tree).map_err(|e| e.to_string());
        let kept = std::fs::read_to_string(inner.join("kept")).ok();
        umount2(&inner, MntFlags::MNT_DETACH).unwrap();
        assert_eq!(
            (removed, kept),
            (
                Err(format!(
                    "{} holds a mount (another device): not entered",
                    tree.display()
                )),
                Some("k".to_string())
            )
        );
        remove_tree(&tree).unwrap();
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

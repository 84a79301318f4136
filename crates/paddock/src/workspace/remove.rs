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
//! directory on another device or mount than the tree's (a mount, a bind
//! mount of the tree's own file system too, whose device is the tree's:
//! only `statx`'s mount id tells it; before, such a bind mount was walked
//! and the directory it shows emptied).
//!
//! What cannot be removed (a mount, an immutable file, someone else's
//! closed directory) is left with the directories that hold it, and
//! everything else is removed: the error names each path left and why
//! (the first [`LEFT_NAMED`], the rest counted). Before, the first such
//! entry stopped the removal naming only the tree, and whatever the walk
//! had not reached stayed too, at every later pass alike.

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
/// its identity (device, inode), the directories in it not yet removed,
/// and whether anything under it was left (then it is not removed).
struct Level {
    name: CString,
    id: (u64, u64),
    subdirs: Vec<CString>,
    kept: bool,
}

/// The most entries a removal that left some names (the rest counted).
const LEFT_NAMED: usize = 8;

/// What a removal left: each entry it could not remove, by path, and why.
#[derive(Default)]
struct Left {
    count: usize,
    named: Vec<String>,
}

impl Left {
    fn add(&mut self, path: &Path, why: impl std::fmt::Display) {
        self.count += 1;
        if self.named.len() < LEFT_NAMED {
            self.named.push(format!("{}: {why}", path.display()));
        }
    }

    /// The removal of `tree`'s outcome: an error naming what was left.
    fn outcome(self, tree: &Path) -> io::Result<()> {
        if self.count == 0 {
            return Ok(());
        }
        let more = self.count - self.named.len();
        Err(io::Error::other(format!(
            "{} not wholly removed: {}{}",
            tree.display(),
            self.named.join("; "),
            if more > 0 {
                format!("; and {more} more")
            } else {
                String::new()
            }
        )))
    }
}

/// The path of `name` in the directory `levels` lead to under `tree`.
fn path_of(tree: &Path, levels: &[Level], name: &CStr) -> std::path::PathBuf {
    let mut path = tree.to_path_buf();
    for level in levels.iter().skip(1) {
        path.push(std::ffi::OsStr::from_bytes(level.name.as_bytes()));
    }
    path.push(std::ffi::OsStr::from_bytes(name.to_bytes()));
    path
}

/// Removes the directory `path` and what it holds, whatever its depth,
/// with at most two descriptors open (module text): each directory is
/// entered by its descriptor (no link followed, its owner's bits given
/// back when it is this user's and lacks them), its other entries
/// unlinked, its directories removed one by one, and left by `..`,
/// which must be the directory it was entered from. A mount in the tree
/// (another device, or another mount of the same one: a bind mount) is
/// not entered, and an entry that cannot be removed (someone else's
/// closed directory, an immutable file) is left with the directories
/// that hold it; everything else is removed, and the error names each
/// path left and why. Past `deadline`, it stops (`TimedOut`).
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
    let (mut cur, id, mount) = match enter(top.as_fd(), &name, me, None)? {
        Entered::Dir(fd, id, mount) => (fd, id, mount),
        // Not a directory (any more): unlinked as it is.
        Entered::NotDir | Entered::Mount => return unlink(top.as_fd(), &name, AtFlags::empty()),
    };
    let within = Within {
        device: id.0,
        mount,
    };
    let mut left = Left::default();
    let mut levels = vec![Level {
        name,
        id,
        subdirs: Vec::new(),
        kept: false,
    }];
    let top_level = empty_out(cur.as_fd(), path, &levels, &mut left);
    if let Some(level) = levels.last_mut() {
        (level.subdirs, level.kept) = top_level;
    }
    loop {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{} not removed within its time", path.display()),
            ));
        }
        let Some(child) = levels.last_mut().and_then(|level| level.subdirs.pop()) else {
            let Some(done) = levels.pop() else {
                return left.outcome(path);
            };
            let Some(up) = levels.last() else {
                drop(cur);
                if !done.kept {
                    if let Err(e) = unlink(top.as_fd(), &done.name, AtFlags::REMOVEDIR) {
                        left.add(path, e);
                    }
                }
                return left.outcome(path);
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
            let kept = done.kept
                || match unlink(cur.as_fd(), &done.name, AtFlags::REMOVEDIR) {
                    Ok(()) => false,
                    Err(e) => {
                        left.add(&path_of(path, &levels, &done.name), e);
                        true
                    }
                };
            if let Some(up) = levels.last_mut() {
                up.kept |= kept;
            }
            continue;
        };
        let here = path_of(path, &levels, &child);
        let kept = match enter(cur.as_fd(), &child, me, Some(within)) {
            Ok(Entered::Dir(fd, id, _)) => {
                levels.push(Level {
                    name: child,
                    id,
                    subdirs: Vec::new(),
                    kept: false,
                });
                let emptied = empty_out(fd.as_fd(), path, &levels, &mut left);
                if let Some(level) = levels.last_mut() {
                    (level.subdirs, level.kept) = emptied;
                }
                cur = fd;
                false
            }
            Ok(Entered::Mount) => {
                left.add(&here, "a mount (another device or mount): not entered");
                true
            }
            Ok(Entered::NotDir) => match unlink(cur.as_fd(), &child, AtFlags::empty()) {
                Ok(()) => false,
                Err(e) => {
                    left.add(&here, e);
                    true
                }
            },
            Err(e) => {
                left.add(&here, e);
                true
            }
        };
        if let Some(level) = levels.last_mut() {
            level.kept |= kept;
        }
    }
}

/// The tree's device and mount (when the kernel says), which no
/// directory removed may be on another of.
#[derive(Debug, Clone, Copy)]
struct Within {
    device: u64,
    mount: Option<u64>,
}

/// What [`enter`] found.
enum Entered {
    /// A directory, opened to be listed and changed, its identity and
    /// its mount's id (when the kernel gives it).
    Dir(OwnedFd, (u64, u64), Option<u64>),
    /// Not a directory (a link, a file, gone).
    NotDir,
    /// A directory on another device or mount than the tree's, left as
    /// it is.
    Mount,
}

/// The id of the mount `fd` is on (`statx`'s `STATX_MNT_ID`, Linux
/// 5.8); none where the kernel does not give it.
fn mount_id(fd: &OwnedFd) -> Option<u64> {
    use rustix::fs::StatxFlags;
    let st = rustix::fs::statx(fd, c"", AtFlags::EMPTY_PATH, StatxFlags::MNT_ID).ok()?;
    (st.stx_mask & StatxFlags::MNT_ID.bits() != 0).then_some(st.stx_mnt_id)
}

/// The directory `name` in `dir` opened to be listed and changed
/// ([`Entered`]). Its owner's read, write and search bits are given back
/// first when this user (`me`) owns it and it lacks them, unless it is on
/// another device or mount than `within` (the tree's, once known): a
/// bind mount of the tree's own file system has its device.
fn enter(
    dir: rustix::fd::BorrowedFd<'_>,
    name: &CStr,
    me: u32,
    within: Option<Within>,
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
    let mount = mount_id(&at);
    if let Some(within) = within {
        let other_mount = matches!((within.mount, mount), (Some(a), Some(b)) if a != b);
        if within.device != st.st_dev || other_mount {
            return Ok(Entered::Mount);
        }
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
    Ok(Entered::Dir(fd, (st.st_dev, st.st_ino), mount))
}

/// Unlinks every entry of `dir` (the last of `levels` under `tree`) but
/// its directories, which it returns, with whether anything was left
/// (each named in `left`): an entry that cannot be unlinked, or the
/// directory that cannot be listed.
fn empty_out(
    dir: rustix::fd::BorrowedFd<'_>,
    tree: &Path,
    levels: &[Level],
    left: &mut Left,
) -> (Vec<CString>, bool) {
    let here = |name: &CStr| path_of(tree, levels, name);
    let mut subdirs = Vec::new();
    let mut others = Vec::new();
    let mut kept = false;
    let listed = Dir::read_from(dir).and_then(|entries| {
        for entry in entries {
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
        Ok(())
    });
    if let Err(e) = listed {
        left.add(&here(c"."), format!("list it: {e}"));
        kept = true;
    }
    for name in others {
        if let Err(e) = unlink(dir, &name, AtFlags::empty()) {
            left.add(&here(&name), e);
            kept = true;
        }
    }
    (subdirs, kept)
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

    /// Whether this test may mount (CAP_SYS_ADMIN); without it, skipped
    /// with the reason printed (in CI, failed).
    fn may_mount(what: &str) -> bool {
        if super::super::overlay::may_mount() {
            return true;
        }
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{what} needs CAP_SYS_ADMIN in CI"
        );
        eprintln!("skipping: {what} needs CAP_SYS_ADMIN");
        false
    }

    /// The names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// A tree of `tree/a/m` (the mount point) among sibling directories
    /// and files that are all removable.
    fn tree_around(tree: &Path, inner: &Path) {
        std::fs::create_dir_all(inner).unwrap();
        std::fs::write(tree.join("a/f"), "x").unwrap();
        for d in 0..12 {
            std::fs::create_dir_all(tree.join(format!("a/s{d}/t"))).unwrap();
            std::fs::write(tree.join(format!("a/s{d}/t/f")), "x").unwrap();
            std::fs::create_dir_all(tree.join(format!("b{d}/t"))).unwrap();
        }
    }

    /// Mounts at `tree/a/m` with `mount_at` (given the test's directory
    /// and the mount point; it returns a file the mount shows), removes
    /// the tree, and checks: the file is kept, the error names the
    /// mount's own path, everything else in the tree is gone; unmounted,
    /// the tree is then removed whole.
    fn a_mount_is_left_whole(
        what: &str,
        mount_at: impl FnOnce(&Path, &Path) -> std::path::PathBuf,
    ) {
        use nix::mount::{umount2, MntFlags};
        if !may_mount(what) {
            return;
        }
        let root = tempfile::tempdir().unwrap();
        let tree = root.path().join("tree");
        let inner = tree.join("a/m");
        tree_around(&tree, &inner);
        let shown = mount_at(root.path(), &inner);
        let removed = remove_tree(&tree).map_err(|e| e.to_string());
        let kept = std::fs::read_to_string(&shown).ok();
        let left = (names(&tree), names(&tree.join("a")));
        umount2(&inner, MntFlags::MNT_DETACH).unwrap();
        assert_eq!(
            (removed, kept, left),
            (
                Err(format!(
                    "{} not wholly removed: {}: a mount (another device or mount): not entered",
                    tree.display(),
                    inner.display()
                )),
                Some("k".to_string()),
                (vec!["a".to_string()], vec!["m".to_string()])
            )
        );
        remove_tree(&tree).unwrap();
        assert!(!tree.exists());
    }

    /// A mount inside the tree (a tmpfs here) is not entered: what the
    /// mount holds is as it was, everything else in the tree is removed,
    /// and the error names the mount's own path. Before, the standard
    /// removal deleted through it; then the removal stopped at the mount,
    /// naming only the tree, and left whatever it had not reached yet.
    #[test]
    fn a_mount_inside_the_tree_is_not_entered() {
        a_mount_is_left_whole("a tmpfs mount", |_, inner| {
            nix::mount::mount(
                Some("tmpfs"),
                inner,
                Some("tmpfs"),
                nix::mount::MsFlags::empty(),
                None::<&str>,
            )
            .unwrap();
            std::fs::write(inner.join("kept"), "k").unwrap();
            inner.join("kept")
        });
    }

    /// A bind mount inside the tree of a directory outside it on the
    /// same file system (the same device: only the mount's id tells) is
    /// not entered: the directory it shows keeps what it holds. Before,
    /// the removal took it for a directory of the tree and deleted what
    /// the outside directory held.
    #[test]
    fn a_bind_mount_of_the_same_file_system_is_not_entered() {
        a_mount_is_left_whole("a bind mount", |root, inner| {
            let outside = root.join("outside");
            std::fs::create_dir_all(outside.join("inner")).unwrap();
            std::fs::write(outside.join("inner/keep"), "k").unwrap();
            nix::mount::mount(
                Some(&outside),
                inner,
                None::<&str>,
                nix::mount::MsFlags::MS_BIND,
                None::<&str>,
            )
            .unwrap();
            outside.join("inner/keep")
        });
    }

    /// A file that cannot be unlinked (immutable: `chattr +i`, which a
    /// job running as root could set) is left with the directories that
    /// hold it, named with why; the rest of the tree is removed. Before,
    /// the first such entry stopped the removal, naming neither it nor
    /// what was left unreached.
    #[test]
    fn an_entry_that_cannot_be_removed_is_named_and_the_rest_removed() {
        let root = tempfile::tempdir().unwrap();
        let tree = root.path().join("tree");
        let inner = tree.join("a/m");
        tree_around(&tree, &inner);
        let stuck = inner.join("stuck");
        std::fs::write(&stuck, "s").unwrap();
        let chattr = |flag: &str| {
            std::process::Command::new("chattr")
                .arg(flag)
                .arg(&stuck)
                .status()
                .is_ok_and(|s| s.success())
        };
        if !chattr("+i") {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "chattr +i needs CAP_LINUX_IMMUTABLE and a file system with it in CI"
            );
            eprintln!("skipping: chattr +i did not work here");
            return;
        }
        let removed = remove_tree(&tree).map_err(|e| e.to_string());
        let left = (names(&tree), names(&tree.join("a")), names(&inner));
        assert!(chattr("-i"));
        assert_eq!(
            (removed, left),
            (
                Err(format!(
                    "{} not wholly removed: {}: {}",
                    tree.display(),
                    stuck.display(),
                    io::Error::from(rustix::io::Errno::PERM)
                )),
                (
                    vec!["a".to_string()],
                    vec!["m".to_string()],
                    vec!["stuck".to_string()]
                )
            )
        );
        remove_tree(&tree).unwrap();
        assert!(!tree.exists());
    }

    /// Names with every byte a name may hold (1 to 255 but `/`: newlines,
    /// escapes, invalid UTF-8, `..` lookalikes) as directories and files,
    /// and a FIFO, a socket and a hard link to a file outside: all are
    /// removed, none opened (the FIFO is not waited on), and the outside
    /// file keeps its text.
    #[test]
    fn names_of_every_byte_and_special_files_are_removed() {
        use std::ffi::OsStr;
        let root = tempfile::tempdir().unwrap();
        let outside = root.path().join("outside");
        std::fs::write(&outside, "k").unwrap();
        let tree = root.path().join("tree");
        std::fs::create_dir_all(tree.join("d")).unwrap();
        std::fs::create_dir_all(tree.join("f")).unwrap();
        for b in 1u8..=255 {
            if b == b'/' || b == b'.' {
                continue;
            }
            let name = OsStr::from_bytes(&[b, b'.', b'.', b]).to_owned();
            std::fs::create_dir(tree.join("d").join(&name)).unwrap();
            std::fs::write(tree.join("d").join(&name).join(&name), "x").unwrap();
            std::fs::write(tree.join("f").join(OsStr::from_bytes(&[b])), "x").unwrap();
        }
        std::fs::create_dir(tree.join("...")).unwrap();
        nix::unistd::mkfifo(&tree.join("d/fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let _socket = std::os::unix::net::UnixListener::bind(tree.join("d/sock")).unwrap();
        std::fs::hard_link(&outside, tree.join("d/hard")).unwrap();
        std::fs::set_permissions(tree.join("d"), std::fs::Permissions::from_mode(0o000)).unwrap();
        remove_tree(&tree).unwrap();
        assert_eq!(
            (tree.exists(), std::fs::read_to_string(&outside).unwrap()),
            (false, "k".to_string())
        );
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

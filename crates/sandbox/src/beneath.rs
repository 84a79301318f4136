//! Paths the job could have written are never resolved through a link.
//! A writable directory may hold symbolic links the job (or a committed
//! file of its repository) planted; if the set-up followed one, a bind
//! would mount the link's target (the host's /tmp, /etc/shadow) into the
//! view, or a `mkdir` would land on the host. So every path under a
//! writable directory, and every caller path bound into the view, is
//! opened with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` from a
//! directory descriptor (`O_PATH | O_NOFOLLOW`: a link in the last
//! component is opened as the link itself), mount points are made with
//! `mkdirat` in a directory opened that way, and binds go from descriptor
//! to descriptor (`open_tree(2)` then `move_mount(2)`), so no path is
//! looked up again between the check and the mount.

use std::ffi::CString;
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd};
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::Mode;

const OPEN_TREE_CLONE: libc::c_uint = 1;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;

fn owned(fd: std::os::fd::RawFd) -> OwnedFd {
    // SAFETY: `fd` was just returned by the kernel to this thread, is open
    // and owned by nothing else; the OwnedFd closes it exactly once.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// Opens `rel` (relative; no `..`) under `dir` as an `O_PATH` descriptor
/// without following any symbolic link: ELOOP when a directory on the way
/// is a link, and a link in the last component is opened as itself.
pub fn open(dir: BorrowedFd<'_>, rel: &Path) -> Result<OwnedFd, Errno> {
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
    openat2(dir.as_raw_fd(), rel, how).map(owned)
}

/// An `O_PATH` descriptor of an absolute path the caller trusts (the
/// staging roots), following nothing it does not have to.
pub fn open_dir(path: &Path) -> Result<OwnedFd, Errno> {
    nix::fcntl::open(
        path,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map(owned)
}

/// Makes the directory `name` in `dir` (a descriptor from [`open`]); an
/// existing entry (even a link, which `mkdirat` does not follow) is fine.
pub fn mkdir(dir: BorrowedFd<'_>, name: &Path) -> Result<(), Errno> {
    match nix::sys::stat::mkdirat(Some(dir.as_raw_fd()), name, Mode::from_bits_truncate(0o755)) {
        Ok(()) | Err(Errno::EEXIST) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Makes the empty regular file `name` in `dir` (a mount point for a file
/// bind); an existing entry is fine and is not followed.
pub fn file_point(dir: BorrowedFd<'_>, name: &Path) -> Result<(), Errno> {
    match nix::sys::stat::mknodat(
        Some(dir.as_raw_fd()),
        name,
        nix::sys::stat::SFlag::S_IFREG,
        Mode::from_bits_truncate(0o644),
        0,
    ) {
        Ok(()) | Err(Errno::EEXIST) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Bind-mounts what `src` names onto what `dst` names (both descriptors,
/// so neither path is looked up again; either may be a symbolic link
/// itself, which is then bound as the link). Submounts come along only
/// when the kernel requires it (a tree with locked submounts). Returns a
/// descriptor of the new mount's root (for its flags).
pub fn bind(src: BorrowedFd<'_>, dst: BorrowedFd<'_>) -> Result<OwnedFd, Errno> {
    let tree = match open_tree(src, 0) {
        Err(Errno::EINVAL) => open_tree(src, AT_RECURSIVE)?,
        other => other?,
    };
    attach(tree.as_fd(), dst)?;
    Ok(tree)
}

/// Attaches the detached mount tree `tree` (from `open_tree(2)`, here or
/// in the helper) onto what `dst` names, descriptor to descriptor.
pub fn attach(tree: BorrowedFd<'_>, dst: BorrowedFd<'_>) -> Result<(), Errno> {
    let empty = c"";
    // SAFETY: move_mount reads two NUL-terminated (empty) paths and uses
    // two descriptors that are open for the duration of the call; it
    // attaches the detached tree `tree` at `dst` and touches no memory of
    // this process.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            empty.as_ptr(),
            dst.as_raw_fd(),
            empty.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(Errno::last())
    }
}

fn open_tree(src: BorrowedFd<'_>, extra: libc::c_uint) -> Result<OwnedFd, Errno> {
    let empty = CString::default();
    // SAFETY: open_tree reads one NUL-terminated (empty) path; `src` is
    // open for the call. It returns a new close-on-exec descriptor of a
    // detached copy of the mount, or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            src.as_raw_fd(),
            empty.as_ptr(),
            OPEN_TREE_CLONE
                | libc::O_CLOEXEC as libc::c_uint
                | libc::AT_EMPTY_PATH as libc::c_uint
                | extra,
        )
    };
    if fd < 0 {
        return Err(Errno::last());
    }
    let fd = libc::c_int::try_from(fd).map_err(|_| Errno::EBADF)?;
    Ok(owned(fd))
}

/// `path` (absolute) relative to `/`, or None when it has a `.` or `..`
/// component (the caller passes resolved paths only).
pub fn relative(path: &Path) -> Option<&Path> {
    use std::path::Component;
    let rel = path.strip_prefix("/").ok()?;
    rel.components()
        .all(|c| matches!(c, Component::Normal(_)))
        .then_some(rel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_on_the_way_and_at_the_end_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("real")).unwrap();
        std::fs::write(root.join("real/file"), "x").unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("via")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("real/link")).unwrap();
        let fd = open_dir(root).unwrap();
        let kind = |rel: &str| {
            open(fd.as_fd(), Path::new(rel)).map(|f| {
                let st = nix::sys::stat::fstat(f.as_raw_fd()).unwrap();
                st.st_mode & libc::S_IFMT
            })
        };
        assert_eq!(
            [
                kind("real/file"),
                kind("via/file"),
                kind("real/link"),
                kind("../etc"),
                kind("/etc")
            ],
            [
                Ok(libc::S_IFREG),
                Err(Errno::ELOOP),
                Ok(libc::S_IFLNK),
                Err(Errno::EXDEV),
                Err(Errno::EXDEV)
            ]
        );
        // mkdir through a link is not possible either.
        let via = open(fd.as_fd(), Path::new("via"));
        assert_eq!(via.as_ref().map(|_| ()), Ok(()));
        assert_eq!(
            mkdir(via.unwrap().as_fd(), Path::new("made")),
            Err(Errno::ENOTDIR)
        );
        assert!(!root.join("real/made").exists());
    }

    #[test]
    fn relative_refuses_dot_components() {
        assert_eq!(relative(Path::new("/a/b")), Some(Path::new("a/b")));
        assert_eq!(relative(Path::new("/a/../b")), None);
        assert_eq!(relative(Path::new("a/b")), None);
    }
}

//! Opening for reading what a job closed in its work tree, before its patch
//! is made. A job may leave a file its owner cannot read (`chmod 000
//! secret`, a test of an error path) or a directory its owner cannot list
//! (`chmod 000 dir`, `chmod 600 dir`). Paddock running as root reads them
//! anyway and they are in the patch; running as the user (a laptop, a build
//! box), the walk or Paddock's git failed with `EACCES` and the job had no
//! patch at all. The work tree is the user's own (the `process` rung runs
//! as the user, the `sandbox` rung's user namespace maps only the user's
//! id), so when Paddock is not root, [`open_for_reading`] gives every
//! directory that lacks them its owner's read and search bits and every
//! regular file its owner's read bit; nothing else changes (the patch
//! records only a file's execute bit, which is left as it is, so the patch
//! is the one root would make). Nothing is followed: each entry is opened
//! relative to its directory's descriptor with `O_PATH | O_NOFOLLOW` and
//! changed through that descriptor ([`chmod_fd`], which `remove.rs`
//! shares); a link is left as it is, and no entry named `.git` is entered
//! (the patch never reads it).
//! An entry owned by someone else is left alone (its `chmod` would fail).
//! [`open_closed_file`] reads one such file and leaves its mode as it was
//! (the setup cache storing what a setup command made, before the engine
//! runs: the job sees its file as it left it).

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, CWD};

/// The deepest tree opened (a descriptor is held per level): far past what
/// a job's disk watcher lets it make (256 levels).
const MAX_DEPTH: usize = 512;

/// A file's owner read bit.
const FILE_BITS: u32 = 0o400;

/// What a walk gives back to the entries its user owns.
#[derive(Debug, Clone, Copy)]
struct Bits {
    /// Added to every directory that lacks them.
    dir: u32,
    /// Added to every regular file that lacks them (0: files untouched).
    file: u32,
    /// Whether `.git` entries are entered.
    git: bool,
}

/// For the patch: directories listed and entered, files read, `.git`
/// (which the patch never reads) left as it is.
const READING: Bits = Bits {
    dir: 0o500,
    file: FILE_BITS,
    git: false,
};

/// Gives every directory under `work` (itself included) its owner's read
/// and search bits and every regular file its owner's read bit, where they
/// lack them and belong to this process's user; a no-op when Paddock is
/// root (it reads them as they are).
pub fn open_for_reading(work: &Path) -> io::Result<()> {
    let me = nix::unistd::geteuid();
    if me.is_root() {
        return Ok(());
    }
    give_bits(work, me.as_raw(), READING)
}

/// Gives what user `me` owns under `work` (itself included) `bits`,
/// whoever runs it ([`open_for_reading`]; a removal gives its own,
/// `remove.rs`).
fn give_bits(work: &Path, me: u32, bits: Bits) -> io::Result<()> {
    let parent = work.parent().unwrap_or(Path::new("/"));
    let name = work.file_name().unwrap_or(std::ffi::OsStr::new("."));
    let parent_fd = rustix::fs::openat(
        CWD,
        parent,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let name = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(name))
        .map_err(|_| io::Error::other("a name with a NUL byte"))?;
    open_dir(parent_fd.as_fd(), &name, me, bits, 0)
}

/// Opens the directory `name` in `parent` (when it is one, not a link) and
/// everything under it.
fn open_dir(
    parent: BorrowedFd<'_>,
    name: &CStr,
    me: u32,
    bits: Bits,
    depth: usize,
) -> io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(io::Error::other(format!(
            "a tree deeper than {MAX_DEPTH} levels"
        )));
    }
    let at = match rustix::fs::openat(
        parent,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP | rustix::io::Errno::NOENT) => {
            return Ok(())
        }
        Err(e) => return Err(e.into()),
    };
    let st = rustix::fs::fstat(&at)?;
    if st.st_uid != me {
        return Ok(());
    }
    if st.st_mode & bits.dir != bits.dir {
        chmod_fd(&at, (st.st_mode & 0o7777) | bits.dir)?;
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
        if child == c"." || child == c".." || (child == c".git" && !bits.git) {
            continue;
        }
        match entry.file_type() {
            FileType::Directory => subdirs.push(child.to_owned()),
            FileType::RegularFile | FileType::Unknown => {
                open_file(dir.as_fd(), child, me, bits.file, &mut subdirs)?
            }
            _ => {}
        }
    }
    for child in subdirs {
        open_dir(dir.as_fd(), &child, me, bits, depth + 1)?;
    }
    Ok(())
}

/// Gives the regular file `name` in `dir` the owner's bits `file` (opened
/// as itself, never through a link; none when `file` is 0); a directory
/// found here (a file system without entry types) is added to `subdirs`.
fn open_file(
    dir: BorrowedFd<'_>,
    name: &CStr,
    me: u32,
    file: u32,
    subdirs: &mut Vec<std::ffi::CString>,
) -> io::Result<()> {
    let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(rustix::io::Errno::NOENT) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => subdirs.push(name.to_owned()),
        FileType::RegularFile if file != 0 && st.st_uid == me && st.st_mode & file != file => {
            let fd = match rustix::fs::openat(
                dir,
                name,
                OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            ) {
                Ok(fd) => fd,
                Err(rustix::io::Errno::NOENT | rustix::io::Errno::LOOP) => return Ok(()),
                Err(e) => return Err(e.into()),
            };
            // The same file the stat saw (not one swapped in since).
            let now = rustix::fs::fstat(&fd)?;
            if now.st_ino == st.st_ino && now.st_dev == st.st_dev {
                chmod_fd(&fd, (now.st_mode & 0o7777) | file)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// `chmod` of what the `O_PATH` descriptor `fd` names, never through a
/// path a link could redirect (as the C library's
/// `fchmodat(AT_SYMLINK_NOFOLLOW)` does).
pub(super) fn chmod_fd(fd: &OwnedFd, mode: u32) -> io::Result<()> {
    use std::os::fd::AsRawFd as _;
    use std::os::unix::fs::PermissionsExt as _;
    let via = format!("/proc/self/fd/{}", fd.as_raw_fd());
    std::fs::set_permissions(via, std::fs::Permissions::from_mode(mode))
}

/// Opens for reading the regular file `name` in `dir` that its owner, this
/// process's user, closed (`chmod 000`), leaving its mode as it was: the
/// owner's read bit is given through an `O_PATH` descriptor (no link
/// followed), the file is opened through that descriptor, and its mode is
/// set back. Anything else (a link, someone else's file) is refused with
/// `EACCES` as the plain open was.
pub(crate) fn open_closed_file(dir: BorrowedFd<'_>, name: &std::ffi::OsStr) -> io::Result<OwnedFd> {
    let at = rustix::fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let st = rustix::fs::fstat(&at)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile
        || st.st_uid != nix::unistd::geteuid().as_raw()
    {
        return Err(io::ErrorKind::PermissionDenied.into());
    }
    let mode = st.st_mode & 0o7777;
    chmod_fd(&at, mode | FILE_BITS)?;
    let via = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&at));
    let opened = rustix::fs::open(
        via.as_str(),
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    );
    chmod_fd(&at, mode)?;
    Ok(opened?)
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

    #[test]
    fn closed_entries_get_their_owner_read_bits_and_nothing_else_changes() {
        let t = tempfile::tempdir().unwrap();
        let w = t.path().join("work");
        std::fs::create_dir_all(w.join("a/b")).unwrap();
        std::fs::create_dir_all(w.join(".git/x")).unwrap();
        std::fs::write(w.join("a/b/secret"), "s").unwrap();
        std::fs::write(w.join("run"), "r").unwrap();
        std::fs::write(w.join(".git/x/f"), "g").unwrap();
        std::os::unix::fs::symlink("run", w.join("link")).unwrap();
        let set = |p: &str, m: u32| {
            std::fs::set_permissions(w.join(p), std::fs::Permissions::from_mode(m)).unwrap()
        };
        set("run", 0o4111);
        set("a/b/secret", 0o000);
        set(".git/x/f", 0o000);
        set("a/b", 0o000);
        set("a", 0o600);
        give_bits(&w, nix::unistd::geteuid().as_raw(), READING).unwrap();
        let modes: Vec<u32> = ["a", "a/b", "a/b/secret", "run", ".git/x/f"]
            .iter()
            .map(|p| mode(&w.join(p)))
            .collect();
        assert_eq!(modes, vec![0o700, 0o500, 0o400, 0o4511, 0o000]);
    }

    #[test]
    fn a_closed_file_is_read_and_keeps_its_mode() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("f"), "s").unwrap();
        std::fs::set_permissions(t.path().join("f"), std::fs::Permissions::from_mode(0o000))
            .unwrap();
        let dir = std::fs::File::open(t.path()).unwrap();
        let fd = open_closed_file(dir.as_fd(), std::ffi::OsStr::new("f")).unwrap();
        let text = std::io::read_to_string(std::fs::File::from(fd)).unwrap();
        assert_eq!((text, mode(&t.path().join("f"))), ("s".to_string(), 0o000));
    }
}

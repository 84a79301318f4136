//! A kept overlay workspace (`--keep`) made a plain directory: the merged
//! view of `work/` is copied into a new tree, the overlay unmounted, the
//! copy put in its place, and the upper layer, overlay's work directory,
//! Paddock's git directory (which borrowed the snapshot's objects) and
//! `meta/overlay` removed, so the user gets a work tree that survives a
//! restart and needs no `paddock` command to release, and the snapshot is
//! no longer named by the job (pruning may take it). Done by the job's
//! end, and by the reaper for a kept job whose process died; each step
//! can be taken again after a kill (the copy is made under `meta/` and
//! renamed, `meta/overlay` goes last). The copy is read through
//! descriptors and never follows a link: directories and regular files
//! (their permission bits, without setuid/setgid; bytes in new inodes)
//! and links (their text) are carried; FIFOs, sockets and devices are
//! left out and named. Nothing walks through the mount to remove it.
//!
//! What a hostile job can plant in the tree, and why each holds (probed by
//! `tests/it/keep_attacks.rs`): a link (to a host file, to `/proc`) is
//! copied as its text, never read through; a hard link to a file outside
//! gives a new inode with the bytes the job could read anyway; setuid and
//! setgid bits are dropped and no extended attribute is copied (no file
//! capability, no ACL); FIFOs, sockets and devices are left out, and a
//! regular file swapped for one after it was listed is opened without
//! blocking and refused; a directory or file swapped for a link while the
//! copy runs fails its `O_NOFOLLOW` open (every open is relative to its
//! parent's descriptor); a sparse file is copied sparse (only its data
//! ranges, `SEEK_DATA`/`SEEK_HOLE`), so a job cannot make the copy write a
//! terabyte of zeros it never paid for; a directory deeper than 256 levels
//! is left out and named (the walk keeps its levels on a heap stack, not
//! the thread's, and two descriptors per level); a name with a newline or terminal escapes is named
//! with its control characters escaped; modes 0000 are copied as 0000 (the
//! copy runs with `CAP_SYS_ADMIN`, as root: read permission does not stop
//! it). The copy is made under `meta/`, outside the sandboxed job's view;
//! a `meta/kept-work` that is not a directory (a link a `process`-rung job,
//! which runs as the user, could plant) is removed, never renamed into
//! place.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use super::{beneath, overlay, WorkspaceError, OVERLAY, OVERLAY_WORK, UPPER};

/// The copy being made, then made (under `meta/`).
const COPYING: &str = "kept-work.tmp";
const COPIED: &str = "kept-work";
/// The deepest directory copied (each level holds two descriptors, so at
/// most 512 are open); deeper ones are left out. The setup cache's bound.
const MAX_DEPTH: usize = 256;
/// How many left-out paths are named.
const NAMED: usize = 10;

/// What making a kept workspace plain did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Settled {
    /// Entries copied.
    pub entries: u64,
    /// Paths left out (not a file, directory or link, or a directory
    /// deeper than 256 levels), at most ten named, control characters
    /// escaped.
    pub left_out: Vec<String>,
}

impl Settled {
    /// The sentence a job's events carry.
    pub fn note(&self) -> String {
        let mut s = format!(
            "the kept overlay work tree was copied into a plain directory ({} entries); \
             nothing is mounted for it any more",
            self.entries
        );
        if !self.left_out.is_empty() {
            s.push_str(&format!(
                "; left out (not a file, directory or link, or too deep): {}",
                self.left_out.join(", ")
            ));
        }
        s
    }
}

/// Makes the kept workspace at `root` plain when it is an overlay (else,
/// or when done already, `None`): the module's steps, from wherever a
/// killed earlier attempt stopped.
pub fn settle(root: &Path) -> Result<Option<Settled>, WorkspaceError> {
    let meta = root.join("meta");
    let marker = meta.join(OVERLAY);
    let fail = |step: &'static str| {
        let path = root.to_path_buf();
        move |source: io::Error| WorkspaceError::Keep { path, step, source }
    };
    let lower = match crate::own_file::read(&marker, super::MAX_NAME_RECORD) {
        Ok(text) => std::path::PathBuf::from(text.trim_end_matches('\n')),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(fail("read meta/overlay")(e)),
    };
    let (work, upper, workdir) = (root.join("work"), meta.join(UPPER), meta.join(OVERLAY_WORK));
    let (copying, copied) = (meta.join(COPYING), meta.join(COPIED));
    let mut settled = Settled::default();
    let exists = |p: &Path| std::fs::symlink_metadata(p).is_ok();
    // Only a directory is a copy made; anything else there was planted.
    match std::fs::symlink_metadata(&copied) {
        Ok(m) if !m.is_dir() => {
            std::fs::remove_file(&copied).map_err(fail("remove a kept-work that is no copy"))?
        }
        _ => {}
    }
    // Not yet copied and the layers still there: copy the merged view.
    if !exists(&copied) && exists(&upper) {
        if exists(&copying) {
            super::remove::remove_tree(&copying).map_err(fail("remove a half-made copy"))?;
        }
        if !overlay::is_mounted(&work) {
            overlay::forget_volatile(&workdir).map_err(fail("drop overlay's volatile marker"))?;
            overlay::mount_at(&lower, &upper, &workdir, &work).map_err(fail("mount it again"))?;
        }
        std::fs::create_dir(&copying).map_err(fail("create the copy"))?;
        let from = beneath::open_root(&work).map_err(fail("open work/"))?;
        let to = beneath::open_root(&copying).map_err(fail("open the copy"))?;
        copy_tree(from, to, &mut settled).map_err(fail("copy work/"))?;
        std::fs::rename(&copying, &copied).map_err(fail("name the copy"))?;
    }
    if exists(&copied) {
        overlay::unmount_work(root).map_err(fail("unmount work/"))?;
        // The mount point: empty once nothing is mounted there.
        match std::fs::remove_dir(&work) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(fail("remove the mount point")(e)),
            _ => Ok(()),
        }?;
        for dir in [&upper, &workdir] {
            remove_all(dir).map_err(fail("remove the overlay's layers"))?;
        }
        std::fs::rename(&copied, &work).map_err(fail("put the copy in place"))?;
    }
    remove_all(&meta.join("git")).map_err(fail("remove Paddock's git directory"))?;
    std::fs::remove_file(&marker).map_err(fail("remove meta/overlay"))?;
    Ok(Some(settled))
}

/// Removes `dir`, a tree the job wrote (the overlay's upper layer holds
/// its whole tree, deeper than the copy too): by `remove.rs`, with no
/// stack or descriptor per level (the standard library's recursive
/// removal overflowed a 2 MiB thread's stack on a tree 25,000 deep).
fn remove_all(dir: &Path) -> io::Result<()> {
    super::remove::remove_tree(dir)
}

fn join(base: &[u8], name: &[u8]) -> Vec<u8> {
    let mut out = base.to_vec();
    if !out.is_empty() {
        out.push(b'/');
    }
    out.extend_from_slice(name);
    out
}

/// `rel` as text, every control character escaped (a name may hold a
/// newline or a terminal escape).
fn printable(rel: &[u8]) -> String {
    String::from_utf8_lossy(rel)
        .chars()
        .map(|c| match c.is_control() {
            true => c.escape_default().to_string(),
            false => c.to_string(),
        })
        .collect()
}

fn leave_out(acc: &mut Settled, rel: &[u8]) {
    if acc.left_out.len() < NAMED {
        acc.left_out.push(printable(rel));
    }
}

/// A directory being copied: its descriptors, where it is, the entries
/// still to copy, and the mode it gets once they are.
struct Level {
    from: OwnedFd,
    to: OwnedFd,
    rel: Vec<u8>,
    entries: std::vec::IntoIter<beneath::Entry>,
    mode: Mode,
}

impl Level {
    fn open(from: OwnedFd, to: OwnedFd, rel: Vec<u8>, mode: Mode) -> io::Result<Level> {
        let mut entries = beneath::entries(&from)?;
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Level {
            from,
            to,
            rel,
            entries: entries.into_iter(),
            mode,
        })
    }
}

/// Copies the tree under `from` into the empty directory `to`, without
/// recursion (a level is a `Level` on a heap stack, not a frame: a deep
/// tree cannot overflow the thread's stack).
fn copy_tree(from: OwnedFd, to: OwnedFd, acc: &mut Settled) -> io::Result<()> {
    let mut stack = vec![Level::open(
        from,
        to,
        Vec::new(),
        Mode::from_raw_mode(0o755),
    )?];
    while let Some(level) = stack.last_mut() {
        let Some(entry) = level.entries.next() else {
            if let Some(done) = stack.pop() {
                rustix::fs::fchmod(&done.to, done.mode).map_err(|e| named(&done.rel, e.into()))?;
            }
            continue;
        };
        let child = join(&level.rel, &entry.name);
        let depth = stack.len() - 1;
        let level = &stack[depth];
        let below = copy_entry(
            level.from.as_fd(),
            level.to.as_fd(),
            &entry.name,
            &child,
            depth,
            acc,
        )
        .map_err(|e| named(&child, e))?;
        if let Some(below) = below {
            stack.push(below);
        }
    }
    Ok(())
}

fn named(rel: &[u8], e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", printable(rel)))
}

/// Copies one entry; a directory is made and returned to be filled.
fn copy_entry(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    name: &[u8],
    rel: &[u8],
    depth: usize,
    acc: &mut Settled,
) -> io::Result<Option<Level>> {
    let os_name = OsStr::from_bytes(name);
    let stat = rustix::fs::statat(src, os_name, AtFlags::SYMLINK_NOFOLLOW)?;
    let mode = Mode::from_raw_mode(stat.st_mode & 0o777);
    let mut below = None;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::Directory if depth >= MAX_DEPTH => {
            leave_out(acc, rel);
            return Ok(None);
        }
        FileType::Directory => {
            rustix::fs::mkdirat(dst, os_name, Mode::from_raw_mode(0o700))?;
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let from = rustix::fs::openat(src, os_name, flags, Mode::empty())?;
            let to = rustix::fs::openat(dst, os_name, flags, Mode::empty())?;
            below = Some(Level::open(from, to, rel.to_vec(), mode)?);
        }
        FileType::RegularFile => {
            let read = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
            let from = rustix::fs::openat(src, os_name, read, Mode::empty())?;
            // What was opened is what is copied.
            if FileType::from_raw_mode(rustix::fs::fstat(&from)?.st_mode) != FileType::RegularFile {
                return Err(io::Error::other("changed while it was copied"));
            }
            let write =
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let to = rustix::fs::openat(dst, os_name, write, Mode::from_raw_mode(0o600))?;
            let (from, to) = (std::fs::File::from(from), std::fs::File::from(to));
            copy_data(&from, &to)?;
            // No setuid/setgid bit (`mode` holds none); the umask ignored.
            rustix::fs::fchmod(&to, mode)?;
        }
        FileType::Symlink => {
            let target = rustix::fs::readlinkat(src, os_name, Vec::new())?;
            rustix::fs::symlinkat(target.as_c_str(), dst, os_name)?;
        }
        _ => {
            leave_out(acc, rel);
            return Ok(None);
        }
    }
    acc.entries += 1;
    Ok(below)
}

/// Copies the bytes of `from` (as long as it was when opened) into the
/// empty file `to`, only its data ranges: a hole stays a hole, so a sparse
/// file costs the copy no more disk than the job's layer spent on it. A
/// file system without `SEEK_DATA` reports the whole file as data.
fn copy_data(from: &std::fs::File, to: &std::fs::File) -> io::Result<()> {
    use io::{Read as _, Seek as _};
    use rustix::fs::SeekFrom;
    let size = from.metadata()?.len();
    let mut at = 0;
    while at < size {
        let data = match rustix::fs::seek(from, SeekFrom::Data(at)) {
            Ok(data) => data,
            // No data after `at`: the rest is a hole.
            Err(rustix::io::Errno::NXIO) => break,
            Err(e) => return Err(e.into()),
        };
        let end = rustix::fs::seek(from, SeekFrom::Hole(data))?.min(size);
        if data >= end {
            break;
        }
        let (mut src, mut dst) = (from, to);
        src.seek(io::SeekFrom::Start(data))?;
        dst.seek(io::SeekFrom::Start(data))?;
        let copied = io::copy(&mut src.take(end - data), &mut dst)?;
        if copied < end - data {
            return Err(io::Error::other("shrank while it was copied"));
        }
        at = end;
    }
    // The trailing hole, if any.
    to.set_len(size)
}

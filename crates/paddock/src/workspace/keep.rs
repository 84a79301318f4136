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
/// The deepest directory copied (each level a descriptor and a frame).
const MAX_DEPTH: usize = 1024;
/// How many left-out paths are named.
const NAMED: usize = 10;

/// What making a kept workspace plain did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Settled {
    /// Entries copied.
    pub entries: u64,
    /// Paths left out (not a file, directory or link), at most ten named.
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
                "; left out (not a file, directory or link): {}",
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
    let lower = match std::fs::read_to_string(&marker) {
        Ok(text) => std::path::PathBuf::from(text.trim_end_matches('\n')),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(fail("read meta/overlay")(e)),
    };
    let (work, upper, workdir) = (root.join("work"), meta.join(UPPER), meta.join(OVERLAY_WORK));
    let (copying, copied) = (meta.join(COPYING), meta.join(COPIED));
    let mut settled = Settled::default();
    let exists = |p: &Path| std::fs::symlink_metadata(p).is_ok();
    // Not yet copied and the layers still there: copy the merged view.
    if !exists(&copied) && exists(&upper) {
        if exists(&copying) {
            std::fs::remove_dir_all(&copying).map_err(fail("remove a half-made copy"))?;
        }
        if !overlay::is_mounted(&work) {
            overlay::forget_volatile(&workdir).map_err(fail("drop overlay's volatile marker"))?;
            overlay::mount_at(&lower, &upper, &workdir, &work).map_err(fail("mount it again"))?;
        }
        std::fs::create_dir(&copying).map_err(fail("create the copy"))?;
        let from = beneath::open_root(&work).map_err(fail("open work/"))?;
        let to = beneath::open_root(&copying).map_err(fail("open the copy"))?;
        copy_dir(&from, &to, b"", &mut settled).map_err(fail("copy work/"))?;
        rustix::fs::fchmod(&to, Mode::from_raw_mode(0o755))
            .map_err(|e| fail("copy work/")(e.into()))?;
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

fn remove_all(dir: &Path) -> io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn join(base: &[u8], name: &[u8]) -> Vec<u8> {
    let mut out = base.to_vec();
    if !out.is_empty() {
        out.push(b'/');
    }
    out.extend_from_slice(name);
    out
}

/// Copies the entries of `from` (at `rel`) into the empty directory `to`.
fn copy_dir(from: &OwnedFd, to: &OwnedFd, rel: &[u8], acc: &mut Settled) -> io::Result<()> {
    if rel.split(|b| *b == b'/').count() > MAX_DEPTH {
        return Err(io::Error::other(format!(
            "{}: deeper than {MAX_DEPTH} directories",
            String::from_utf8_lossy(rel)
        )));
    }
    let mut entries = beneath::entries(from)?;
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    for entry in entries {
        let child = join(rel, &entry.name);
        copy_entry(from.as_fd(), to.as_fd(), &entry.name, &child, acc).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("{}: {e}", String::from_utf8_lossy(&child)),
            )
        })?;
    }
    Ok(())
}

fn copy_entry(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    name: &[u8],
    rel: &[u8],
    acc: &mut Settled,
) -> io::Result<()> {
    let os_name = OsStr::from_bytes(name);
    let stat = rustix::fs::statat(src, os_name, AtFlags::SYMLINK_NOFOLLOW)?;
    let mode = Mode::from_raw_mode(stat.st_mode & 0o777);
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::Directory => {
            rustix::fs::mkdirat(dst, os_name, Mode::from_raw_mode(0o700))?;
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let from = rustix::fs::openat(src, os_name, flags, Mode::empty())?;
            let to = rustix::fs::openat(dst, os_name, flags, Mode::empty())?;
            copy_dir(&from, &to, rel, acc)?;
            rustix::fs::fchmod(&to, mode)?;
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
            let (mut from, mut to) = (std::fs::File::from(from), std::fs::File::from(to));
            io::copy(&mut from, &mut to)?;
            // No setuid/setgid bit (`mode` holds none); the umask ignored.
            rustix::fs::fchmod(&to, mode)?;
        }
        FileType::Symlink => {
            let target = rustix::fs::readlinkat(src, os_name, Vec::new())?;
            rustix::fs::symlinkat(target.as_c_str(), dst, os_name)?;
        }
        _ => {
            if acc.left_out.len() < NAMED {
                acc.left_out.push(String::from_utf8_lossy(rel).into_owned());
            }
            return Ok(());
        }
    }
    acc.entries += 1;
    Ok(())
}

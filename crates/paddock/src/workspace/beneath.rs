//! What lies under the job's work tree, opened without ever following a
//! link: the work tree's root once (`O_NOFOLLOW | O_DIRECTORY`), then every
//! path relative to that descriptor with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS)`, so a job that swaps a directory for a link while
//! Paddock walks or reads its tree gets an error, never a redirection to
//! the host. Where `openat2` is missing (Linux before 5.6, or a filter that
//! refuses it) the path is opened one component at a time, each with
//! `O_NOFOLLOW` relative to the one before, which holds the same promise.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// A directory entry's name and type (a link is a link, never its target).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub name: Vec<u8>,
    pub file_type: FileType,
}

/// The work tree's root directory, itself not a link.
pub(crate) fn open_root(work: &Path) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rustix::fs::open(work, flags, Mode::empty())?)
}

/// `rel` (relative to `root`, `/`-separated; empty for `root` itself)
/// opened with `flags`, through no link and never above `root`.
pub(crate) fn open_beneath(root: BorrowedFd<'_>, rel: &[u8], flags: OFlags) -> io::Result<OwnedFd> {
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let path: &[u8] = if rel.is_empty() { b"." } else { rel };
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    match rustix::fs::openat2(root, OsStr::from_bytes(path), flags, Mode::empty(), resolve) {
        Err(Errno::NOSYS | Errno::PERM) => by_components(root, path, flags),
        other => Ok(other?),
    }
}

/// [`open_beneath`] without `openat2`: one component at a time.
fn by_components(root: BorrowedFd<'_>, path: &[u8], flags: OFlags) -> io::Result<OwnedFd> {
    let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let parts: Vec<&[u8]> = path.split(|b| *b == b'/').collect();
    let mut current: Option<OwnedFd> = None;
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() || *part == b".." || (*part == b"." && parts.len() > 1) {
            return Err(io::Error::from(Errno::XDEV));
        }
        let last = i + 1 == parts.len();
        let at = current.as_ref().map_or(root, |fd| fd.as_fd());
        let next = rustix::fs::openat(
            at,
            OsStr::from_bytes(part),
            if last { flags } else { dir_flags },
            Mode::empty(),
        )?;
        current = Some(next);
    }
    current.ok_or_else(|| io::Error::from(Errno::INVAL))
}

/// The entries of the directory `dir` (without `.` and `..`), each with its
/// own type: an entry whose type the file system does not report is
/// `lstat`ed relative to `dir`.
pub(crate) fn entries(dir: &OwnedFd) -> io::Result<Vec<Entry>> {
    Ok(entries_at_most(dir, usize::MAX)?.unwrap_or_default())
}

/// [`entries`], or `None` when the directory holds more than `at_most`:
/// a directory a job filled (millions of names) is not listed whole into
/// Paddock's memory by a walk that bounds what it takes anyway.
pub(crate) fn entries_at_most(dir: &OwnedFd, at_most: usize) -> io::Result<Option<Vec<Entry>>> {
    let mut out = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let file_type = match entry.file_type() {
            FileType::Unknown => {
                let stat = rustix::fs::statat(dir, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)?;
                FileType::from_raw_mode(stat.st_mode)
            }
            known => known,
        };
        if out.len() == at_most {
            return Ok(None);
        }
        out.push(Entry {
            name: name.to_vec(),
            file_type,
        });
    }
    Ok(Some(out))
}

/// The text of the regular file `rel` under `work`, read through no link
/// and only when it is a regular file (never a FIFO or device).
pub(super) fn read_text(work: &Path, rel: &str) -> Option<String> {
    use std::io::Read as _;
    let root = open_root(work).ok()?;
    let flags = OFlags::RDONLY | OFlags::NONBLOCK;
    let fd = open_beneath(root.as_fd(), rel.as_bytes(), flags).ok()?;
    let stat = rustix::fs::fstat(&fd).ok()?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return None;
    }
    let mut text = String::new();
    std::fs::File::from(fd).read_to_string(&mut text).ok()?;
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link anywhere on the way (a directory swapped for one, or the
    /// last component) is refused, whichever way the path is opened; the
    /// twin without the link opens.
    #[test]
    fn no_link_is_followed_on_the_way() {
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().join("work");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(work.join("real")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(work.join("real/f"), "in\n").unwrap();
        std::fs::write(outside.join("f"), "out\n").unwrap();
        std::os::unix::fs::symlink(&outside, work.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.join("f"), work.join("real/lf")).unwrap();
        let root = open_root(&work).unwrap();
        let open = |rel: &str, fallback: bool| {
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let opened = if fallback {
                by_components(root.as_fd(), rel.as_bytes(), flags)
            } else {
                open_beneath(root.as_fd(), rel.as_bytes(), OFlags::RDONLY)
            };
            // A link met as a directory is "not a directory", as the
            // last component "too many levels of links".
            opened.map(|_| ()).map_err(|e| match e.raw_os_error() {
                Some(n) if n == Errno::NOTDIR.raw_os_error() => "ENOTDIR",
                Some(n) if n == Errno::LOOP.raw_os_error() => "ELOOP",
                _ => "other",
            })
        };
        for fallback in [false, true] {
            let refused = [open("link/f", fallback), open("real/lf", fallback)];
            assert_eq!(
                (
                    open("real/f", fallback),
                    refused
                        .iter()
                        .all(|r| matches!(r, Err("ENOTDIR" | "ELOOP")))
                ),
                (Ok(()), true),
                "fallback {fallback}: {refused:?}"
            );
        }
        assert_eq!(
            (read_text(&work, "real/f"), read_text(&work, "link/f")),
            (Some("in\n".to_owned()), None)
        );
    }
}

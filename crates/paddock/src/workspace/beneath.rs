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
    entries_within(dir, at_most, u64::MAX)
}

/// What an [`Entry`] held costs beside its name's bytes (the entry, the
/// name's allocation): what [`entries_within`] charges each.
pub(crate) const HELD_PER_ENTRY: u64 = 64;

/// [`entries_at_most`], also `None` when the names held would pass
/// `max_bytes` (each name's bytes and [`HELD_PER_ENTRY`] together): a
/// directory of long names is not listed past that bound either.
pub(crate) fn entries_within(
    dir: &OwnedFd,
    at_most: usize,
    max_bytes: u64,
) -> io::Result<Option<Vec<Entry>>> {
    let mut out = Vec::new();
    let mut held: u64 = 0;
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
        held = held.saturating_add(name.len() as u64 + HELD_PER_ENTRY);
        if out.len() == at_most || held > max_bytes {
            return Ok(None);
        }
        out.push(Entry {
            name: name.to_vec(),
            file_type,
        });
    }
    Ok(Some(out))
}

/// Each entry of the directory `dir` (without `.` and `..`, typed as
/// [`entries`] types them) handed to `each` with the directory's
/// descriptor as it is read: nothing of the listing is held but the
/// kernel's buffer of a few entries, so a walk that keeps only what it
/// needs of each name holds no directory whole, however many names (or
/// however long) a job or a repository gave it.
pub(crate) fn each_entry<E: From<io::Error>>(
    dir: OwnedFd,
    mut each: impl FnMut(BorrowedFd<'_>, Entry) -> Result<(), E>,
) -> Result<(), E> {
    let mut listing = rustix::fs::Dir::new(dir).map_err(io::Error::from)?;
    while let Some(entry) = listing.read() {
        let entry = entry.map_err(io::Error::from)?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let fd = listing.fd().map_err(io::Error::from)?;
        let file_type = match entry.file_type() {
            FileType::Unknown => {
                let stat = rustix::fs::statat(fd, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                    .map_err(io::Error::from)?;
                FileType::from_raw_mode(stat.st_mode)
            }
            known => known,
        };
        each(
            fd,
            Entry {
                name: name.to_vec(),
                file_type,
            },
        )?;
    }
    Ok(())
}

/// The regular file `name` of the directory `dir`, read whole: opened
/// with no link followed and without blocking (never a FIFO waited on),
/// refused unless `fstat` shows a regular file of at most `max` bytes, and
/// read to exactly that length (a file whose length changes while it is
/// read is refused); with its mode bits.
pub(crate) fn read_regular_at(
    dir: BorrowedFd<'_>,
    name: &[u8],
    max: u64,
) -> Result<(u32, Vec<u8>), Refused> {
    use std::io::Read as _;
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, OsStr::from_bytes(name), flags, Mode::empty())
        .map_err(|e| Refused::Why(e.to_string()))?;
    let st = rustix::fs::fstat(&fd).map_err(|e| Refused::Why(e.to_string()))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(Refused::Why("not a regular file".to_string()));
    }
    let size = u64::try_from(st.st_size).unwrap_or(u64::MAX);
    if size > max {
        return Err(Refused::Longer(size));
    }
    let mut content = Vec::new();
    std::fs::File::from(fd)
        .take(size.saturating_add(1))
        .read_to_end(&mut content)
        .map_err(|e| Refused::Why(e.to_string()))?;
    if content.len() as u64 != size {
        return Err(Refused::Why(format!(
            "its length changed while it was read ({size} bytes, then {})",
            content.len()
        )));
    }
    Ok((st.st_mode, content))
}

/// Why [`read_regular_at`] read nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// A regular file of this many bytes, more than the bound.
    Longer(u64),
    /// Not a regular file, gone, or changed while read: what was wrong.
    Why(String),
}

/// Writes `bytes` as the regular file `rel` beneath the directory `root`
/// (`rel` of plain names only), creating its directories, through no
/// link: whatever is in the way of one of its directories or of the file
/// and is not a directory (a link to the host a job left there, a file, a
/// FIFO a write would block on) is removed first, so what is written is a
/// new file Paddock made beneath `root`. A directory where the file goes
/// is an error. Directories are made 0755 and the file 0644, as a plain
/// write would under the usual umask.
pub(crate) fn write_replacing(root: &Path, rel: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write as _;
    let mut parts = Vec::new();
    for part in rel.components() {
        match part {
            std::path::Component::Normal(name) => parts.push(name),
            _ => {
                return Err(io::Error::other(format!(
                    "{} is not a path of plain names",
                    rel.display()
                )))
            }
        }
    }
    let Some((file, dirs)) = parts.split_last() else {
        return Err(io::Error::other("an empty path"));
    };
    let dir_flags =
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let mut current = open_root(root)?;
    for part in dirs {
        let next = match rustix::fs::openat(&current, *part, dir_flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(e @ (Errno::NOENT | Errno::LOOP | Errno::NOTDIR)) => {
                if e != Errno::NOENT {
                    rustix::fs::unlinkat(&current, *part, AtFlags::empty())?;
                }
                rustix::fs::mkdirat(&current, *part, Mode::from_raw_mode(0o755))?;
                rustix::fs::openat(&current, *part, dir_flags, Mode::empty())?
            }
            Err(e) => return Err(e.into()),
        };
        current = next;
    }
    match rustix::fs::unlinkat(&current, *file, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => {}
        Err(e) => return Err(e.into()),
    }
    let fd = rustix::fs::openat(
        &current,
        *file,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )?;
    std::fs::File::from(fd).write_all(bytes)
}

/// What [`read_text`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Text {
    /// The whole file, UTF-8.
    Whole(String),
    /// A regular file longer than the bound (its length): not read. A job
    /// can make a file of any length that holds no disk (`truncate -s
    /// 64G`), which the disk limit, counting blocks, never sees.
    Longer(u64),
}

/// The text of the regular file `rel` under `work`, read through no link
/// and only when it is a regular file (never a FIFO or device) of at most
/// `max` bytes; `None` when it is not one, or not UTF-8.
pub(super) fn read_text(work: &Path, rel: &str, max: u64) -> Option<Text> {
    use std::io::Read as _;
    let root = open_root(work).ok()?;
    let flags = OFlags::RDONLY | OFlags::NONBLOCK;
    let fd = open_beneath(root.as_fd(), rel.as_bytes(), flags).ok()?;
    let stat = rustix::fs::fstat(&fd).ok()?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return None;
    }
    let size = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
    if size > max {
        return Some(Text::Longer(size));
    }
    // The job may still be growing it: never more than `max` read.
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() as u64 > max {
        return Some(Text::Longer(bytes.len() as u64));
    }
    String::from_utf8(bytes).ok().map(Text::Whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link to the host in the way of a directory or of the file, a
    /// FIFO and a file in the file's place: each is replaced, nothing is
    /// written through a link, and the write does not block on the FIFO.
    #[test]
    fn a_write_replaces_what_is_in_its_way_and_follows_no_link() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("home");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(root.join("b")).unwrap();
        std::fs::create_dir_all(root.join("c")).unwrap();
        std::fs::create_dir_all(root.join("d")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("victim"), "precious\n").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("a")).unwrap();
        std::os::unix::fs::symlink(outside.join("victim"), root.join("b/f")).unwrap();
        nix::unistd::mkfifo(&root.join("c/f"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        std::fs::write(root.join("d/f"), "old").unwrap();
        for rel in ["a/f", "b/f", "c/f", "d/f", "e/g/f"] {
            write_replacing(&root, Path::new(rel), b"new").unwrap();
        }
        let kinds: Vec<(String, bool, String)> = ["a", "a/f", "b/f", "c/f", "d/f", "e/g/f"]
            .iter()
            .map(|rel| {
                let m = std::fs::symlink_metadata(root.join(rel)).unwrap();
                let text = if m.is_file() {
                    std::fs::read_to_string(root.join(rel)).unwrap()
                } else {
                    String::new()
                };
                (rel.to_string(), m.is_dir(), text)
            })
            .collect();
        let file = |rel: &str| (rel.to_string(), false, "new".to_string());
        assert_eq!(
            (
                kinds,
                std::fs::read_to_string(outside.join("victim")).unwrap(),
                std::fs::read_dir(&outside).unwrap().count()
            ),
            (
                vec![
                    ("a".to_string(), true, String::new()),
                    file("a/f"),
                    file("b/f"),
                    file("c/f"),
                    file("d/f"),
                    file("e/g/f"),
                ],
                "precious\n".to_string(),
                1
            )
        );
        std::fs::create_dir_all(root.join("dir/f")).unwrap();
        assert_eq!(
            write_replacing(&root, Path::new("dir/f"), b"x").map_err(|e| e.raw_os_error()),
            Err(Some(nix::libc::EISDIR))
        );
        assert!(write_replacing(&root, Path::new("../x"), b"x").is_err());
    }

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
            (
                read_text(&work, "real/f", 3),
                read_text(&work, "real/f", 2),
                read_text(&work, "link/f", 3)
            ),
            (
                Some(Text::Whole("in\n".to_owned())),
                Some(Text::Longer(3)),
                None
            )
        );
    }
}

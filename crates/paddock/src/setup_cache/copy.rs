//! Trees copied between a job's directory and the setup cache, one entry
//! at a time through directory descriptors, never following a link: every
//! entry is `lstat`ed relative to its directory's descriptor and opened
//! with `O_NOFOLLOW`, so a link is read as a link (`readlinkat`) and only
//! its text is copied. What is carried: directories (mode 0755), regular
//! files without setuid/setgid bits (mode 0755 when the owner could run
//! them, else 0644; their bytes copied into a new inode, never linked), and
//! relative links whose target stays inside the tree they belong to
//! (checked on the text, lexically). Everything else (a link to an
//! absolute path or out of the tree, a setuid or setgid file, a FIFO,
//! socket or device) is left out and named. Both directions use the same
//! rules, so the cache holds nothing a restore would refuse.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use crate::workspace::beneath;

/// The most a stored setup output may hold, in entries and bytes; more and
/// it is not stored.
pub(crate) const MAX_ENTRIES: u64 = 500_000;
pub(crate) const MAX_BYTES: u64 = 2 << 30;
/// The deepest path a walk or copy enters (each level is one descriptor
/// and one stack frame).
pub(crate) const MAX_DEPTH: usize = 256;

/// How many left-out paths a summary names (the count is whole).
const NAMED: usize = 10;

/// What a copy carried and left out.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Copied {
    pub entries: u64,
    pub bytes: u64,
    /// Paths left out, with why.
    pub left_out: Vec<(String, &'static str)>,
    /// How many were left out (`left_out` names at most [`NAMED`]).
    pub left_out_count: u64,
}

impl Copied {
    fn leave_out(&mut self, rel: &[u8], why: &'static str) {
        self.left_out_count += 1;
        if self.left_out.len() < NAMED {
            self.left_out
                .push((String::from_utf8_lossy(rel).into_owned(), why));
        }
    }
}

/// Why a copy stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CopyError {
    #[error("{rel}: {source}")]
    Io { rel: String, source: io::Error },
    #[error("more than {MAX_ENTRIES} entries or {MAX_BYTES} bytes, or deeper than {MAX_DEPTH} directories")]
    TooBig,
}

fn io_err(rel: &[u8], source: impl Into<io::Error>) -> CopyError {
    CopyError::Io {
        rel: String::from_utf8_lossy(rel).into_owned(),
        source: source.into(),
    }
}

pub(crate) fn join(base: &[u8], name: &[u8]) -> Vec<u8> {
    let mut out = base.to_vec();
    if !out.is_empty() {
        out.push(b'/');
    }
    out.extend_from_slice(name);
    out
}

fn open_dir_at(dir: BorrowedFd<'_>, name: &[u8]) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rustix::fs::openat(
        dir,
        OsStr::from_bytes(name),
        flags,
        Mode::empty(),
    )?)
}

/// Every path under `root` (relative, `/`-separated), not entering the
/// top-level names in `skip`.
pub(crate) fn inventory(root: &Path, skip: &[&[u8]]) -> io::Result<HashSet<Vec<u8>>> {
    let mut out = HashSet::new();
    let fd = beneath::open_root(root)?;
    walk(&fd, b"", skip, &mut out)?;
    Ok(out)
}

fn walk(dir: &OwnedFd, rel: &[u8], skip: &[&[u8]], out: &mut HashSet<Vec<u8>>) -> io::Result<()> {
    too_deep(rel)?;
    for entry in beneath::entries(dir)? {
        if rel.is_empty() && skip.contains(&entry.name.as_slice()) {
            continue;
        }
        let child = join(rel, &entry.name);
        if entry.file_type == FileType::Directory {
            let sub = open_dir_at(dir.as_fd(), &entry.name)?;
            walk(&sub, &child, skip, out)?;
        }
        out.insert(child);
    }
    Ok(())
}

/// The paths under `root` that are not in `before` while their parent
/// is (or is the root): what was made since `before` was taken, as the
/// roots of new subtrees. Entries of `before` that changed are not
/// included.
pub(crate) fn new_roots(
    root: &Path,
    before: &HashSet<Vec<u8>>,
    skip: &[&[u8]],
) -> io::Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let fd = beneath::open_root(root)?;
    find_new(&fd, b"", before, skip, &mut out)?;
    out.sort();
    Ok(out)
}

fn find_new(
    dir: &OwnedFd,
    rel: &[u8],
    before: &HashSet<Vec<u8>>,
    skip: &[&[u8]],
    out: &mut Vec<Vec<u8>>,
) -> io::Result<()> {
    too_deep(rel)?;
    for entry in beneath::entries(dir)? {
        if rel.is_empty() && skip.contains(&entry.name.as_slice()) {
            continue;
        }
        let child = join(rel, &entry.name);
        if !before.contains(&child) {
            out.push(child);
        } else if entry.file_type == FileType::Directory {
            let sub = open_dir_at(dir.as_fd(), &entry.name)?;
            find_new(&sub, &child, before, skip, out)?;
        }
    }
    Ok(())
}

fn depth(rel: &[u8]) -> usize {
    rel.iter().filter(|b| **b == b'/').count()
}

fn too_deep(rel: &[u8]) -> io::Result<()> {
    if depth(rel) > MAX_DEPTH {
        return Err(io::Error::other(format!(
            "{}: deeper than {MAX_DEPTH} directories",
            String::from_utf8_lossy(rel)
        )));
    }
    Ok(())
}

/// Whether the link at `rel` (relative to its tree's root) with `target`
/// stays inside the tree, judged on the text: relative, and no `..` climbs
/// above the root.
pub(crate) fn link_stays_inside(rel: &[u8], target: &[u8]) -> bool {
    if target.is_empty() || target.starts_with(b"/") {
        return false;
    }
    // The link's own directory's depth.
    let mut depth = rel.split(|b| *b == b'/').count() as i64 - 1;
    for part in target.split(|b| *b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => depth += 1,
        }
    }
    true
}

/// Copies the entry `name` of `src` (its path `rel` from the tree's root)
/// to a new entry `name` of `dst`, by the module's rules. `dst` must not
/// have it yet.
pub(crate) fn copy_entry(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    name: &[u8],
    rel: &[u8],
    acc: &mut Copied,
) -> Result<(), CopyError> {
    let os_name = OsStr::from_bytes(name);
    let stat =
        rustix::fs::statat(src, os_name, AtFlags::SYMLINK_NOFOLLOW).map_err(|e| io_err(rel, e))?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::Directory => {
            if depth(rel) > MAX_DEPTH {
                return Err(CopyError::TooBig);
            }
            count(acc, 0)?;
            rustix::fs::mkdirat(dst, os_name, Mode::from_raw_mode(0o755))
                .map_err(|e| io_err(rel, e))?;
            let from = open_dir_at(src, name).map_err(|e| io_err(rel, e))?;
            let to = open_dir_at(dst, name).map_err(|e| io_err(rel, e))?;
            let mut entries = beneath::entries(&from).map_err(|e| io_err(rel, e))?;
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            for entry in entries {
                let child = join(rel, &entry.name);
                copy_entry(from.as_fd(), to.as_fd(), &entry.name, &child, acc)?;
            }
        }
        FileType::RegularFile if stat.st_mode & 0o6000 != 0 => {
            acc.leave_out(rel, "setuid or setgid");
        }
        FileType::RegularFile => copy_file(src, dst, name, rel, acc)?,
        FileType::Symlink => {
            let target =
                rustix::fs::readlinkat(src, os_name, Vec::new()).map_err(|e| io_err(rel, e))?;
            if link_stays_inside(rel, target.as_bytes()) {
                count(acc, 0)?;
                rustix::fs::symlinkat(target.as_c_str(), dst, os_name)
                    .map_err(|e| io_err(rel, e))?;
            } else {
                acc.leave_out(rel, "a link out of the tree");
            }
        }
        _ => acc.leave_out(rel, "not a file, directory or link"),
    }
    Ok(())
}

/// One more entry of `bytes`, within the bounds.
fn count(acc: &mut Copied, bytes: u64) -> Result<(), CopyError> {
    acc.entries += 1;
    acc.bytes = acc.bytes.saturating_add(bytes);
    if acc.entries > MAX_ENTRIES || acc.bytes > MAX_BYTES {
        return Err(CopyError::TooBig);
    }
    Ok(())
}

/// A regular file's bytes into a new file (its own inode).
fn copy_file(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    name: &[u8],
    rel: &[u8],
    acc: &mut Copied,
) -> Result<(), CopyError> {
    let os_name = OsStr::from_bytes(name);
    let read = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let from = rustix::fs::openat(src, os_name, read, Mode::empty()).map_err(|e| io_err(rel, e))?;
    // What was opened is what is copied: a regular file without the
    // setuid/setgid bits, whatever the name pointed at before.
    let stat = rustix::fs::fstat(&from).map_err(|e| io_err(rel, e))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile || stat.st_mode & 0o6000 != 0
    {
        acc.leave_out(rel, "changed while it was copied");
        return Ok(());
    }
    count(acc, u64::try_from(stat.st_size).unwrap_or(u64::MAX))?;
    let mode = if stat.st_mode & 0o100 != 0 {
        0o755
    } else {
        0o644
    };
    let write = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let to = rustix::fs::openat(dst, os_name, write, Mode::from_raw_mode(mode))
        .map_err(|e| io_err(rel, e))?;
    let (mut from, mut to) = (std::fs::File::from(from), std::fs::File::from(to));
    io::copy(&mut from, &mut to).map_err(|e| io_err(rel, e))?;
    // The umask may have narrowed the mode.
    rustix::fs::fchmod(&to, Mode::from_raw_mode(mode)).map_err(|e| io_err(rel, e))?;
    Ok(())
}

/// Splits `rel` into its parent directory and its last name.
pub(crate) fn split(rel: &[u8]) -> (&[u8], &[u8]) {
    match rel.iter().rposition(|b| *b == b'/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => (b"", rel),
    }
}

/// Whether `rel` is a plain relative path: no empty, `.` or `..` part.
pub(crate) fn is_plain(rel: &[u8]) -> bool {
    !rel.is_empty()
        && rel
            .split(|b| *b == b'/')
            .all(|p| !p.is_empty() && p != b"." && p != b"..")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn links_are_judged_on_their_text() {
        let cases = [
            (&b"node_modules/.bin/x"[..], &b"../x/cli.js"[..], true),
            (b"a/l", b"../b", true),
            (b"a/l", b"../../b", false),
            (b"l", b"../b", false),
            (b"l", b"/etc/passwd", false),
            (b"a/b/l", b"./.././../c", true),
            (b"a/b/l", b"../../../c", false),
            (b"l", b"", false),
        ];
        for (rel, target, inside) in cases {
            assert_eq!(
                link_stays_inside(rel, target),
                inside,
                "{} -> {}",
                String::from_utf8_lossy(rel),
                String::from_utf8_lossy(target)
            );
        }
    }

    /// New subtrees are found under unchanged directories; the copy
    /// carries files, directories and inside links, and leaves out links
    /// out of the tree, setuid files and FIFOs, naming them; every copied
    /// file is a new inode.
    #[test]
    fn new_subtrees_are_copied_by_the_rules() {
        let tmp = tempfile::tempdir().unwrap();
        let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
        std::fs::create_dir_all(src.join("old/deep")).unwrap();
        std::fs::create_dir_all(&dst).unwrap();
        std::fs::write(src.join("old/f"), "old").unwrap();
        let before = inventory(&src, &[]).unwrap();
        std::fs::create_dir_all(src.join("old/deep/new/bin")).unwrap();
        std::fs::write(src.join("old/deep/new/lib.js"), "lib").unwrap();
        std::fs::write(src.join("old/deep/new/run"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            src.join("old/deep/new/run"),
            std::fs::Permissions::from_mode(0o700),
        )
        .unwrap();
        std::os::unix::fs::symlink("../lib.js", src.join("old/deep/new/bin/lib")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", src.join("old/deep/new/bin/out")).unwrap();
        std::os::unix::fs::symlink("../../../../../x", src.join("old/deep/new/bin/up")).unwrap();
        std::fs::write(src.join("old/deep/new/suid"), "s").unwrap();
        std::fs::set_permissions(
            src.join("old/deep/new/suid"),
            std::fs::Permissions::from_mode(0o4755),
        )
        .unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(src.join("old/deep/new/fifo"))
            .status()
            .unwrap();
        assert!(made.success());
        std::fs::write(src.join("top"), "t").unwrap();
        // A changed old file is not new.
        std::fs::write(src.join("old/f"), "changed").unwrap();
        let roots = new_roots(&src, &before, &[]).unwrap();
        assert_eq!(roots, vec![b"old/deep/new".to_vec(), b"top".to_vec()]);
        let mut acc = Copied::default();
        for rel in &roots {
            let (parent, name) = split(rel);
            std::fs::create_dir_all(dst.join(OsStr::from_bytes(parent))).unwrap();
            let s = beneath::open_root(&src.join(OsStr::from_bytes(parent))).unwrap();
            let d = beneath::open_root(&dst.join(OsStr::from_bytes(parent))).unwrap();
            copy_entry(s.as_fd(), d.as_fd(), name, rel, &mut acc).unwrap();
        }
        let mut names: Vec<_> = acc
            .left_out
            .iter()
            .map(|(p, w)| format!("{p}: {w}"))
            .collect();
        names.sort();
        assert_eq!(
            (acc.entries, acc.bytes, acc.left_out_count, names),
            (
                6,
                "lib".len() as u64 + "#!/bin/sh\n".len() as u64 + 1,
                4,
                vec![
                    "old/deep/new/bin/out: a link out of the tree".to_string(),
                    "old/deep/new/bin/up: a link out of the tree".to_string(),
                    "old/deep/new/fifo: not a file, directory or link".to_string(),
                    "old/deep/new/suid: setuid or setgid".to_string(),
                ]
            )
        );
        let mode = |p: &str| {
            std::fs::symlink_metadata(dst.join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o7777
        };
        assert_eq!(
            (
                std::fs::read_to_string(dst.join("old/deep/new/bin/lib")).unwrap(),
                std::fs::read_link(dst.join("old/deep/new/bin/lib")).unwrap(),
                mode("old/deep/new/run"),
                mode("old/deep/new/lib.js"),
                std::fs::read_to_string(dst.join("top")).unwrap(),
            ),
            (
                "lib".to_string(),
                std::path::PathBuf::from("../lib.js"),
                0o755,
                0o644,
                "t".to_string()
            )
        );
        use std::os::unix::fs::MetadataExt as _;
        assert_ne!(
            std::fs::metadata(src.join("top")).unwrap().ino(),
            std::fs::metadata(dst.join("top")).unwrap().ino()
        );
    }
}

//! Trees copied between a job's directory and the setup cache, one entry
//! at a time through directory descriptors, never following a link: every
//! entry is `lstat`ed relative to its directory's descriptor and opened
//! with `O_NOFOLLOW`, so a link is read as a link (`readlinkat`) and only
//! its text is copied. What is carried: directories (mode 0755), regular
//! files without setuid/setgid bits (mode 0755 when the owner could run
//! them, else 0644; their bytes copied into a new inode, never linked,
//! their holes left holes: only a sparse file's data is written),
//! relative links whose target stays inside the tree they belong to
//! (checked on the text, lexically) and links to absolute paths (a
//! virtualenv's `bin/python3 -> /usr/bin/python3`: text the job could
//! write itself, which the host never follows). Everything else (a
//! relative link climbing out of the tree, a setuid or setgid file, a
//! FIFO, socket or device) is left out and named. Both directions use the
//! same rules, so the cache holds nothing a restore would refuse.
//!
//! A restore may also carry the entry to its new place ([`Rewrite`]): the
//! producing job's directory, wherever a file's bytes or an absolute
//! link's text name it, becomes the new job's, byte for byte and only
//! when both names have the same length (a job's directory is
//! `<jobs>/job-<32 hex digits>`, so they do), which keeps binaries,
//! length-prefixed strings (`.pyc`) and offsets intact.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use super::path_set::{PathSet, Print};
use crate::workspace::beneath;
use crate::workspace::beneath::HELD_PER_ENTRY;

/// The most a stored setup output may hold, in entries and bytes; more and
/// it is not stored.
pub(crate) const MAX_ENTRIES: u64 = 500_000;
pub(crate) const MAX_BYTES: u64 = 2 << 30;
/// The most of the names a copy holds at once (each name's bytes and
/// `beneath::HELD_PER_ENTRY` together: the directories being copied,
/// listed and not yet copied): some 200,000 entries under 20-byte names,
/// where the entries' bound alone let 500,000 names of 255 bytes be held,
/// 127 MB of them in the memory of the process that runs every job.
pub(crate) const MAX_HELD_NAMES: u64 = 16 << 20;
/// The deepest path a walk or copy enters (each level is one descriptor
/// and one stack frame).
pub(crate) const MAX_DEPTH: usize = 256;

/// How many left-out paths a summary names (the count is whole).
const NAMED: usize = 10;

/// What a copy carried and left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Copied {
    pub entries: u64,
    pub bytes: u64,
    /// Paths left out, with why.
    pub left_out: Vec<(String, &'static str)>,
    /// How many were left out (`left_out` names at most [`NAMED`]).
    pub left_out_count: u64,
    /// Files and links whose bytes or text named the producing job's
    /// directory, rewritten ([`Rewrite`]).
    pub rewritten: u64,
    /// Entries of the directories being copied that are listed and not
    /// yet copied: a directory is listed only as far as the entries still
    /// allowed go, so a directory the job filled with millions of names is
    /// never listed whole into Paddock's memory.
    pending: u64,
    /// What the names of those entries cost held
    /// (`beneath::entries_within`'s charge).
    pending_names: u64,
    /// The most entries a copy carries ([`MAX_ENTRIES`]).
    max_entries: u64,
    /// The most `pending_names` may reach ([`MAX_HELD_NAMES`]).
    max_names: u64,
}

impl Default for Copied {
    fn default() -> Copied {
        Copied {
            entries: 0,
            bytes: 0,
            left_out: Vec::new(),
            left_out_count: 0,
            rewritten: 0,
            pending: 0,
            pending_names: 0,
            max_entries: MAX_ENTRIES,
            max_names: MAX_HELD_NAMES,
        }
    }
}

/// The producing job's directory, and the new job's, as a restore
/// rewrites one into the other; an empty `from` rewrites nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Rewrite {
    pub from: Vec<u8>,
    pub to: Vec<u8>,
}

impl Rewrite {
    /// Whether there is something to rewrite: two different names of the
    /// same length (a shorter or longer name would move every byte after
    /// it, which a binary does not survive).
    pub fn applies(&self) -> bool {
        !self.from.is_empty() && self.from.len() == self.to.len() && self.from != self.to
    }

    /// `text` with every `from` replaced by `to`, when there was one.
    fn text(&self, text: &[u8]) -> Option<Vec<u8>> {
        if !self.applies() || memchr::memmem::find(text, &self.from).is_none() {
            return None;
        }
        let mut out = text.to_vec();
        replace_in(&mut out, 0, &self.from, &self.to);
        Some(out)
    }
}

/// Replaces each `from` in `buf[start..]` by `to` (the same length),
/// left to right, a replaced range not searched again; the end of the
/// last replacement, or `start`.
fn replace_in(buf: &mut [u8], start: usize, from: &[u8], to: &[u8]) -> usize {
    let finder = memchr::memmem::Finder::new(from);
    let mut at = start;
    while let Some(i) = buf.get(at..).and_then(|rest| finder.find(rest)) {
        let s = at + i;
        if let Some(dst) = buf.get_mut(s..s + to.len()) {
            dst.copy_from_slice(to);
        }
        at = s + to.len();
    }
    at
}

/// Copies `from` to `to`, replacing `rw.from` by `rw.to` (the same
/// length) through a fixed buffer, a name split across two reads
/// included; whether anything was replaced.
fn copy_rewriting(
    from: &mut impl io::Read,
    to: &mut impl io::Write,
    rw: &Rewrite,
) -> io::Result<bool> {
    // What is held back after each read: the longest start of a name
    // that the next read could finish.
    let keep = rw.from.len() - 1;
    let mut buf = vec![0u8; 64 * 1024 + keep];
    let (mut held, mut changed) = (0, false);
    loop {
        let n = from.read(&mut buf[held..])?;
        let end = held + n;
        let done = replace_in(&mut buf[..end], 0, &rw.from, &rw.to);
        changed |= done > 0;
        if n == 0 {
            to.write_all(&buf[..end])?;
            return Ok(changed);
        }
        // Never hold back part of a replacement: it is not searched again.
        let out = end.saturating_sub(keep).max(done);
        to.write_all(&buf[..out])?;
        buf.copy_within(out..end, 0);
        held = end - out;
    }
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
    #[error(
        "more than {MAX_ENTRIES} entries or {MAX_BYTES} bytes, deeper than {MAX_DEPTH} \
         directories, or directories whose names held pass {MAX_HELD_NAMES} bytes (each name's \
         bytes and {HELD_PER_ENTRY} more)"
    )]
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

/// Every path under `root`, not entering the top-level names in `skip`,
/// as fingerprints ([`PathSet`]): each directory read as it is walked,
/// never listed whole, and no path held by its name. More than
/// [`super::path_set::MAX_PATHS`] is an error saying so.
pub(crate) fn inventory(root: &Path, skip: &[&[u8]]) -> io::Result<PathSet> {
    let mut out = PathSet::default();
    let fd = beneath::open_root(root)?;
    walk(fd, b"", PathSet::root(), skip, &mut out)?;
    Ok(out)
}

fn walk(
    dir: OwnedFd,
    rel: &[u8],
    print: Print,
    skip: &[&[u8]],
    out: &mut PathSet,
) -> io::Result<()> {
    too_deep(rel)?;
    beneath::each_entry(dir, |fd, entry| {
        if rel.is_empty() && skip.contains(&entry.name.as_slice()) {
            return Ok(());
        }
        let child = out.child(print, &entry.name);
        out.insert(child).map_err(io::Error::other)?;
        if entry.file_type == FileType::Directory {
            let sub = open_dir_at(fd, &entry.name)?;
            walk(sub, &join(rel, &entry.name), child, skip, out)?;
        }
        Ok(())
    })
}

/// The paths under `root` that are not in `before` while their parent
/// is (or is the root): what was made since `before` was taken, as the
/// roots of new subtrees. Entries of `before` that changed are not
/// included.
/// More than [`MAX_ENTRIES`] new roots, or their paths longer than
/// [`MAX_ROOTS_BYTES`] together, is [`CopyError::TooBig`] (the copy could
/// not carry them, nor the manifest name them); each directory is read as
/// it is walked, never listed whole.
pub(crate) fn new_roots(
    root: &Path,
    before: &PathSet,
    skip: &[&[u8]],
) -> Result<Vec<Vec<u8>>, CopyError> {
    let mut out = Vec::new();
    let fd = beneath::open_root(root).map_err(|e| io_err(b".", e))?;
    find_new(fd, b"", PathSet::root(), before, skip, &mut (0, &mut out))?;
    out.sort();
    Ok(out)
}

/// Why a directory's walk for new paths stopped: reading it, or below.
enum Found {
    Io(io::Error),
    Copy(CopyError),
}

impl From<io::Error> for Found {
    fn from(e: io::Error) -> Found {
        Found::Io(e)
    }
}

/// The most bytes the paths of the subtrees a store holds may take
/// together: the manifest names each (as JSON, up to four characters a
/// byte) and is read back at most 16 MiB long.
pub(crate) const MAX_ROOTS_BYTES: usize = 4 << 20;

fn find_new(
    dir: OwnedFd,
    rel: &[u8],
    print: Print,
    before: &PathSet,
    skip: &[&[u8]],
    out: &mut (usize, &mut Vec<Vec<u8>>),
) -> Result<(), CopyError> {
    too_deep(rel).map_err(|e| io_err(rel, e))?;
    beneath::each_entry(dir, |fd, entry| {
        if rel.is_empty() && skip.contains(&entry.name.as_slice()) {
            return Ok(());
        }
        let child = join(rel, &entry.name);
        let child_print = before.child(print, &entry.name);
        if !before.contains(child_print) {
            out.0 = out.0.saturating_add(child.len());
            if out.1.len() as u64 >= MAX_ENTRIES || out.0 > MAX_ROOTS_BYTES {
                return Err(Found::Copy(CopyError::TooBig));
            }
            out.1.push(child);
        } else if entry.file_type == FileType::Directory {
            let sub = open_dir_at(fd, &entry.name).map_err(|e| Found::Copy(io_err(&child, e)))?;
            find_new(sub, &child, child_print, before, skip, out).map_err(Found::Copy)?;
        }
        Ok(())
    })
    .map_err(|e| match e {
        Found::Copy(e) => e,
        Found::Io(e) => io_err(rel, e),
    })
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
    rw: &Rewrite,
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
            let room = acc
                .max_entries
                .saturating_sub(acc.entries.saturating_add(acc.pending));
            let room = usize::try_from(room).unwrap_or(usize::MAX);
            let names_room = acc.max_names.saturating_sub(acc.pending_names);
            let mut entries = beneath::entries_within(&from, room, names_room)
                .map_err(|e| io_err(rel, e))?
                .ok_or(CopyError::TooBig)?;
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            let held = |entry: &beneath::Entry| entry.name.len() as u64 + HELD_PER_ENTRY;
            acc.pending = acc.pending.saturating_add(entries.len() as u64);
            acc.pending_names =
                (entries.iter().map(held)).fold(acc.pending_names, u64::saturating_add);
            for entry in entries {
                acc.pending = acc.pending.saturating_sub(1);
                acc.pending_names = acc.pending_names.saturating_sub(held(&entry));
                let child = join(rel, &entry.name);
                copy_entry(from.as_fd(), to.as_fd(), &entry.name, &child, rw, acc)?;
            }
        }
        FileType::RegularFile if stat.st_mode & 0o6000 != 0 => {
            acc.leave_out(rel, "setuid or setgid");
        }
        FileType::RegularFile => copy_file(src, dst, name, rel, rw, acc)?,
        FileType::Symlink => {
            let target =
                rustix::fs::readlinkat(src, os_name, Vec::new()).map_err(|e| io_err(rel, e))?;
            let target = target.as_bytes();
            if target.starts_with(b"/") || link_stays_inside(rel, target) {
                count(acc, 0)?;
                let text = match rw.text(target).filter(|_| target.starts_with(b"/")) {
                    Some(text) => {
                        acc.rewritten += 1;
                        text
                    }
                    None => target.to_vec(),
                };
                rustix::fs::symlinkat(OsStr::from_bytes(&text), dst, os_name)
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
    if acc.entries > acc.max_entries || acc.bytes > MAX_BYTES {
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
    rw: &Rewrite,
    acc: &mut Copied,
) -> Result<(), CopyError> {
    let os_name = OsStr::from_bytes(name);
    let read = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let from = match rustix::fs::openat(src, os_name, read, Mode::empty()) {
        // A file its owner closed (`chmod 000`), read as root would read
        // it, its mode left as it was (Paddock running as the user).
        Err(rustix::io::Errno::ACCESS) => {
            crate::workspace::reopen_tree::open_closed_file(src, os_name)
                .map_err(|e| io_err(rel, e))?
        }
        opened => opened.map_err(|e| io_err(rel, e))?,
    };
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
    let len = u64::try_from(stat.st_size).unwrap_or(0);
    if copy_sparse(&mut from, &mut to, len, rw).map_err(|e| io_err(rel, e))? {
        acc.rewritten += 1;
    }
    // The umask may have narrowed the mode.
    rustix::fs::fchmod(&to, Mode::from_raw_mode(mode)).map_err(|e| io_err(rel, e))?;
    Ok(())
}

/// `from`'s data copied into `to` at the same offsets, its holes left
/// holes (`SEEK_DATA`/`SEEK_HOLE`; a file system that reports none has
/// its files read as all data), `to` then `len` long; with `rw` applied
/// within each run of data (a name cannot span a hole: holes read as NUL
/// bytes, which no path holds). What is written is what the file holds,
/// never its length: a setup's `truncate -s 50G` had the host write its
/// zeros into the cache, and a restore into the next job, while the
/// producing job was charged for the blocks it held (none). Whether
/// anything was rewritten.
fn copy_sparse(
    from: &mut std::fs::File,
    to: &mut std::fs::File,
    len: u64,
    rw: &Rewrite,
) -> io::Result<bool> {
    use std::io::{Seek as _, SeekFrom};
    let mut changed = false;
    let mut at = 0u64;
    while at < len {
        let data = match rustix::fs::seek(&*from, rustix::fs::SeekFrom::Data(at)) {
            Ok(data) => data,
            // No data past `at`: the rest is a hole.
            Err(rustix::io::Errno::NXIO) => break,
            Err(e) => return Err(e.into()),
        };
        if data >= len {
            break;
        }
        let hole = rustix::fs::seek(&*from, rustix::fs::SeekFrom::Hole(data))?.min(len);
        from.seek(SeekFrom::Start(data))?;
        to.seek(SeekFrom::Start(data))?;
        let mut run = io::Read::take(&mut *from, hole.saturating_sub(data));
        if rw.applies() {
            changed |= copy_rewriting(&mut run, to, rw)?;
        } else {
            io::copy(&mut run, to)?;
        }
        at = hole.max(data + 1);
    }
    to.set_len(len)?;
    Ok(changed)
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
            (b"l", b"/etc/passwd", false), // (copy_entry carries it: absolute)
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

    /// The paths listed before setup are held by fingerprint, each
    /// directory read as it is walked: 12,000 files under 3,300-byte
    /// paths (40 MB of names) are listed in under 8 MB of memory, measured
    /// in a process of its own (this test's binary run again for this
    /// test alone), where each path was held by its name (over 40 MB).
    #[test]
    fn a_tree_of_long_paths_is_listed_in_bounded_memory() {
        const ENV: &str = "PADDOCK_PROBE_INVENTORY";
        if let Some(dir) = std::env::var_os(ENV) {
            // The code the listing runs paged in first (this binary's
            // pages count as resident), on the tree's top directory
            // alone, then the peak reset to what is resident now
            // (`clear_refs` 5).
            inventory(&Path::new(&dir).join("empty"), &[]).unwrap();
            let _ = paddock_test_support::processes::own_memory_kib();
            std::fs::write("/proc/self/clear_refs", "5").unwrap();
            let (_, rss) = paddock_test_support::processes::own_memory_kib();
            let listed = inventory(Path::new(&dir), &[]).unwrap();
            let (peak, _) = paddock_test_support::processes::own_memory_kib();
            println!("probe: {} {}", listed.len(), peak.saturating_sub(rss));
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let mut deep = tmp.path().to_path_buf();
        for i in 0..12 {
            deep.push(format!("{i:02}{}", "d".repeat(248)));
        }
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::create_dir(tmp.path().join("empty")).unwrap();
        for i in 0..12_000 {
            std::fs::write(deep.join(format!("{i:05}{}", "f".repeat(245))), "").unwrap();
        }
        let (listed, grew_kib) = paddock_test_support::processes::probe_alone(
            "setup_cache::copy::tests::a_tree_of_long_paths_is_listed_in_bounded_memory",
            ENV,
            tmp.path(),
        );
        let listed: usize = listed.parse().unwrap();
        assert_eq!(
            (listed, grew_kib < 8 << 10),
            (1 + 12 + 12_000, true),
            "listing grew the peak by {grew_kib} KiB"
        );
    }

    /// A directory whose names would pass what the copy holds of names
    /// (`MAX_HELD_NAMES` for a setup's output; 2 MiB here) is refused
    /// before it is listed past it, nothing of it copied: 60,000 files
    /// under 250-byte names (15 MB of names) cost under 6 MB of memory,
    /// measured in a process of its own (this test's binary run again for
    /// this test alone), where the whole directory was listed, within the
    /// entries' bound, and copied (over 17 MB held; 127 MB for 500,000
    /// such names).
    #[test]
    fn a_directory_of_long_names_is_refused_in_bounded_memory() {
        const ENV: &str = "PADDOCK_PROBE_COPY_NAMES";
        if let Some(dir) = std::env::var_os(ENV) {
            let (src, dst) = (Path::new(&dir).join("src"), Path::new(&dir).join("dst"));
            let s = beneath::open_root(&src).unwrap();
            let d = beneath::open_root(&dst).unwrap();
            let copy = |name: &[u8]| {
                let mut acc = Copied {
                    max_names: 2 << 20,
                    ..Copied::default()
                };
                let made = copy_entry(
                    s.as_fd(),
                    d.as_fd(),
                    name,
                    name,
                    &Rewrite::default(),
                    &mut acc,
                );
                (made.map_err(|e| e.to_string()), acc.entries)
            };
            // The code the copy runs paged in first, then the peak reset
            // to what is resident now (`clear_refs` 5).
            assert_eq!(copy(b"small"), (Ok(()), 2));
            let _ = paddock_test_support::processes::own_memory_kib();
            std::fs::write("/proc/self/clear_refs", "5").unwrap();
            let (_, rss) = paddock_test_support::processes::own_memory_kib();
            let (made, entries) = copy(b"big");
            let (peak, _) = paddock_test_support::processes::own_memory_kib();
            println!(
                "probe: {} {entries} {}",
                made.err().unwrap_or_else(|| "copied".to_string()),
                peak.saturating_sub(rss)
            );
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir_all(src.join("big")).unwrap();
        std::fs::create_dir_all(src.join("small")).unwrap();
        std::fs::create_dir_all(tmp.path().join("dst")).unwrap();
        std::fs::write(src.join("small/f"), "x").unwrap();
        for i in 0..60_000 {
            std::fs::write(src.join(format!("big/{i:05}{}", "f".repeat(245))), "").unwrap();
        }
        let (made, grew_kib) = paddock_test_support::processes::probe_alone(
            "setup_cache::copy::tests::a_directory_of_long_names_is_refused_in_bounded_memory",
            ENV,
            tmp.path(),
        );
        let copied = std::fs::read_dir(tmp.path().join("dst/big"))
            .unwrap()
            .count();
        assert_eq!(
            (made, copied, grew_kib < 6 << 10),
            (format!("{} 1", CopyError::TooBig), 0, true),
            "the copy grew the peak by {grew_kib} KiB"
        );
    }

    /// A directory with more entries than the copy may still carry is
    /// refused before any of them is listed past that or copied (a
    /// directory a job filled with millions of names is never listed whole
    /// into Paddock's memory; before, each was, and copied until the count
    /// ran out); one within the bound is copied whole.
    #[test]
    fn a_directory_past_the_entries_left_is_refused_before_it_is_copied() {
        let tmp = tempfile::tempdir().unwrap();
        let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
        std::fs::create_dir_all(src.join("big")).unwrap();
        std::fs::create_dir_all(src.join("small")).unwrap();
        std::fs::create_dir_all(&dst).unwrap();
        for i in 0..11 {
            std::fs::write(src.join(format!("big/f{i:02}")), "x").unwrap();
        }
        for i in 0..3 {
            std::fs::write(src.join(format!("small/f{i}")), "x").unwrap();
        }
        let s = beneath::open_root(&src).unwrap();
        let d = beneath::open_root(&dst).unwrap();
        let copy = |name: &[u8]| {
            let mut acc = Copied {
                max_entries: 10,
                ..Copied::default()
            };
            let made = copy_entry(
                s.as_fd(),
                d.as_fd(),
                name,
                name,
                &Rewrite::default(),
                &mut acc,
            );
            let mut copied: Vec<String> = std::fs::read_dir(dst.join(OsStr::from_bytes(name)))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            copied.sort();
            (
                made.map_err(|e| e.to_string()),
                acc.entries,
                acc.pending,
                copied,
            )
        };
        assert_eq!(
            copy(b"big"),
            (
                Err(CopyError::TooBig.to_string()),
                1,
                0,
                Vec::<String>::new()
            )
        );
        assert_eq!(
            copy(b"small"),
            (
                Ok(()),
                4,
                0,
                vec!["f0".to_string(), "f1".to_string(), "f2".to_string()]
            )
        );
    }

    /// New subtrees are found under unchanged directories; the copy
    /// carries files, directories, inside links and absolute links (as
    /// text), and leaves out relative links out of the tree, setuid files
    /// and FIFOs, naming them; every copied file is a new inode.
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
            copy_entry(
                s.as_fd(),
                d.as_fd(),
                name,
                rel,
                &Rewrite::default(),
                &mut acc,
            )
            .unwrap();
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
                7,
                "lib".len() as u64 + "#!/bin/sh\n".len() as u64 + 1,
                3,
                vec![
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
                std::fs::read_link(dst.join("old/deep/new/bin/out")).unwrap(),
            ),
            (
                "lib".to_string(),
                std::path::PathBuf::from("../lib.js"),
                0o755,
                0o644,
                "t".to_string(),
                std::path::PathBuf::from("/etc/passwd"),
            )
        );
        use std::os::unix::fs::MetadataExt as _;
        assert_ne!(
            std::fs::metadata(src.join("top")).unwrap().ino(),
            std::fs::metadata(dst.join("top")).unwrap().ino()
        );
    }

    /// A restore's rewrite: the producing job's directory becomes the new
    /// job's in a file's bytes wherever it is (across the copy buffer's
    /// edge, back to back, at the very end, in a binary's bytes) and in an
    /// absolute link's text; a relative link, and names of another length,
    /// are left as they were.
    #[test]
    fn the_producing_jobs_directory_is_rewritten_byte_for_byte() {
        let tmp = tempfile::tempdir().unwrap();
        let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
        std::fs::create_dir_all(src.join("venv/bin")).unwrap();
        std::fs::create_dir_all(&dst).unwrap();
        let (old, new) = ("/jobs/job-0123", "/jobs/job-abcd");
        let mut big = vec![b'x'; 64 * 1024 - 5];
        big.extend_from_slice(format!("{old}/work{old}\0\x01{old}").as_bytes());
        std::fs::write(src.join("venv/big"), &big).unwrap();
        std::fs::write(
            src.join("venv/bin/pip"),
            format!("#!{old}/work/.venv/bin/python3\n"),
        )
        .unwrap();
        std::fs::write(src.join("venv/same"), "no name here").unwrap();
        std::os::unix::fs::symlink(format!("{old}/work/x"), src.join("venv/abs")).unwrap();
        std::os::unix::fs::symlink("/usr/bin/python3", src.join("venv/bin/python3")).unwrap();
        std::os::unix::fs::symlink("python3", src.join("venv/bin/python")).unwrap();
        let copy = |rw: &Rewrite, to: &Path| {
            let mut acc = Copied::default();
            let (s, d) = (
                beneath::open_root(&src).unwrap(),
                beneath::open_root(to).unwrap(),
            );
            copy_entry(s.as_fd(), d.as_fd(), b"venv", b"venv", rw, &mut acc).unwrap();
            acc
        };
        let rw = Rewrite {
            from: old.as_bytes().to_vec(),
            to: new.as_bytes().to_vec(),
        };
        let acc = copy(&rw, &dst);
        let mut want = vec![b'x'; 64 * 1024 - 5];
        want.extend_from_slice(format!("{new}/work{new}\0\x01{new}").as_bytes());
        assert_eq!(
            (
                acc.rewritten,
                acc.left_out_count,
                std::fs::read(dst.join("venv/big")).unwrap() == want,
                std::fs::read_to_string(dst.join("venv/bin/pip")).unwrap(),
                std::fs::read_to_string(dst.join("venv/same")).unwrap(),
                std::fs::read_link(dst.join("venv/abs")).unwrap(),
                std::fs::read_link(dst.join("venv/bin/python3")).unwrap(),
                std::fs::read_link(dst.join("venv/bin/python")).unwrap(),
            ),
            (
                3,
                0,
                true,
                format!("#!{new}/work/.venv/bin/python3\n"),
                "no name here".to_string(),
                std::path::PathBuf::from(format!("{new}/work/x")),
                std::path::PathBuf::from("/usr/bin/python3"),
                std::path::PathBuf::from("python3"),
            )
        );
        // Names of different lengths: nothing is rewritten.
        let other = tmp.path().join("other");
        std::fs::create_dir_all(&other).unwrap();
        let longer = Rewrite {
            from: old.as_bytes().to_vec(),
            to: b"/jobs/job-abcde".to_vec(),
        };
        let acc = copy(&longer, &other);
        assert_eq!(
            (
                acc.rewritten,
                std::fs::read(other.join("venv/big")).unwrap() == big,
                std::fs::read_link(other.join("venv/abs")).unwrap(),
            ),
            (0, true, std::path::PathBuf::from(format!("{old}/work/x")))
        );
    }
}

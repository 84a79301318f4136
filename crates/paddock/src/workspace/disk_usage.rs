//! How much disk a cache entry takes (a URL mirror, an overlay snapshot, a
//! setup cache entry), for the caches' size cap (`crate::cache_cap`), and
//! what a running job's directory is charged against its
//! `limits.max_disk_bytes` ([`charged`], `runner/disk_watch.rs`). What
//! an entry holds may have been written by a job (a `process`-rung job
//! runs as the user and can write a snapshot's files), so the walk trusts
//! nothing in it: every entry is looked at with `lstat` relative to its
//! directory's descriptor (`fstatat(AT_SYMLINK_NOFOLLOW)`: a link counts
//! as the link, never its target), nothing but a directory is ever opened
//! (so a FIFO cannot block it), and a directory is opened relative to its
//! parent's descriptor with `O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK` (a
//! directory swapped for a link or a FIFO between the two calls fails to
//! open and is only counted). Memory and descriptors are bounded: one open
//! directory per level, at most [`MAX_DEPTH`] levels (deeper ones are
//! counted as the directory itself), at most [`MAX_ENTRIES`] entries
//! looked at (then the count stops); either limit marks the figure
//! `partial`. Each file counts its allocated blocks (`st_blocks`, so a
//! sparse file counts what it holds), divided among its hard links: a
//! snapshot's objects hard-linked from its mirror count half in each, and
//! the caches' total is what removing them all would free, whatever the
//! links between them.

use std::ffi::CStr;
use std::os::fd::{AsFd as _, BorrowedFd};
use std::path::Path;

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, Stat};

/// How deep the walk goes; deeper directories count as themselves only.
pub(crate) const MAX_DEPTH: usize = 256;
/// How many entries one walk looks at, at most.
pub(crate) const MAX_ENTRIES: u64 = 4_000_000;

/// The disk one entry takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Allocated bytes (each file's share when it has several links).
    pub bytes: u64,
    /// Entries looked at (the entry itself included).
    pub entries: u64,
    /// A limit stopped the count, or part of it could not be read: the
    /// figure is at least this.
    pub partial: bool,
}

impl Usage {
    fn add(&mut self, st: &Stat) {
        let blocks = u64::try_from(st.st_blocks).unwrap_or(0).saturating_mul(512);
        // `st_nlink` is narrower than u64 on some targets.
        #[allow(clippy::useless_conversion)]
        let links = u64::from(st.st_nlink).max(1);
        let is_dir = FileType::from_raw_mode(st.st_mode) == FileType::Directory;
        self.bytes = self
            .bytes
            .saturating_add(if is_dir { blocks } else { blocks / links });
        self.entries += 1;
    }
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NONBLOCK)
    .union(OFlags::CLOEXEC);

/// The disk `path` takes (nothing when it is missing); a link at `path`
/// counts as a link.
pub fn of(path: &Path) -> Usage {
    let mut walker = Walker::default();
    let Ok(st) = rustix::fs::lstat(path) else {
        return walker.usage;
    };
    walker.usage.add(&st);
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        return walker.usage;
    }
    match rustix::fs::open(path, DIR_FLAGS, Mode::empty()).map(Dir::new) {
        Ok(Ok(root)) => walk(root, &mut walker),
        _ => walker.usage.partial = true,
    }
    walker.usage
}

/// The least a file or directory is charged to a job: one 4 KiB block,
/// so that empty files and directories (an inode and a directory entry
/// each) count too.
pub const ENTRY_CHARGE: u64 = 4096;

/// What a job's directory is charged ([`charged`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charged {
    /// Allocated bytes, each file counted once whatever its links, each
    /// entry at least [`ENTRY_CHARGE`].
    pub bytes: u64,
    /// Entries looked at.
    pub entries: u64,
    /// Why the figure is not the whole directory's; `None`: it is.
    pub incomplete: Option<Incomplete>,
}

/// Why a [`charged`] walk stopped short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Incomplete {
    /// The charge passed the walk's `stop_above`: the figure is at least
    /// that (the rest was not looked at).
    Over,
    /// More than [`MAX_ENTRIES`] entries.
    Entries,
    /// A directory deeper than [`MAX_DEPTH`] levels, not entered.
    Depth,
    /// A directory or entry that could not be read (not one that went
    /// away while the walk ran).
    Unreadable,
}

/// What the walk of a job's directory adds up besides [`Usage`].
#[derive(Debug)]
struct Charge {
    /// The root's file system: a mount inside (an overlay's merged work
    /// tree) is charged as one entry, never entered.
    dev: u64,
    /// Files with several links already charged (by device and inode).
    seen: std::collections::HashSet<(u64, u64)>,
    stop_above: u64,
    incomplete: Option<Incomplete>,
}

/// One walk's counts.
#[derive(Debug, Default)]
struct Walker {
    usage: Usage,
    charge: Option<Charge>,
}

impl Walker {
    /// Counts one entry's `st`.
    fn add(&mut self, st: &Stat) {
        let Some(charge) = &mut self.charge else {
            self.usage.add(st);
            return;
        };
        self.usage.entries += 1;
        // `st_nlink` is narrower than u64 on some targets.
        #[allow(clippy::useless_conversion)]
        let links = u64::from(st.st_nlink);
        #[allow(clippy::useless_conversion)]
        let key = (u64::from(st.st_dev), u64::from(st.st_ino));
        let is_dir = FileType::from_raw_mode(st.st_mode) == FileType::Directory;
        if !is_dir && links > 1 && !charge.seen.insert(key) {
            return;
        }
        let blocks = u64::try_from(st.st_blocks).unwrap_or(0).saturating_mul(512);
        self.usage.bytes = self.usage.bytes.saturating_add(blocks.max(ENTRY_CHARGE));
    }

    /// Notes why the figure stops short (the first reason kept).
    fn short(&mut self, why: Incomplete) {
        self.usage.partial = true;
        if let Some(charge) = &mut self.charge {
            charge.incomplete.get_or_insert(why);
        }
    }

    /// Whether the walk stops now.
    fn done(&mut self) -> bool {
        if self.usage.entries >= MAX_ENTRIES {
            self.short(Incomplete::Entries);
            return true;
        }
        match &self.charge {
            Some(c) if self.usage.bytes > c.stop_above => {
                self.short(Incomplete::Over);
                true
            }
            _ => false,
        }
    }
}

/// What a job's directory `path` is charged: every file's allocated blocks
/// (`st_blocks`: a sparse file counts what it holds, an `fallocate`d one
/// what it reserved) counted once however many hard links it has, inside
/// or outside `path` (a link to a file elsewhere is charged whole: a job
/// cannot make its file count for less by linking it), and every entry at
/// least [`ENTRY_CHARGE`] (millions of empty files count). Links are not
/// followed, another file system mounted inside is not entered (an
/// overlay's merged work tree: its upper layer lies under `path` and is
/// counted there), nothing but a directory is opened. The walk stops once
/// the charge passes `stop_above` (its cost is bounded by the limit it is
/// held to), and says why it stopped short: deeper than [`MAX_DEPTH`],
/// more than [`MAX_ENTRIES`] entries, something it cannot read. An entry
/// that goes away while it runs is not counted.
pub fn charged(path: &Path, stop_above: u64) -> Charged {
    let mut walker = Walker::default();
    let Ok(st) = rustix::fs::lstat(path) else {
        return Charged {
            bytes: 0,
            entries: 0,
            incomplete: None,
        };
    };
    #[allow(clippy::useless_conversion)]
    let dev = u64::from(st.st_dev);
    walker.charge = Some(Charge {
        dev,
        seen: std::collections::HashSet::new(),
        stop_above,
        incomplete: None,
    });
    walker.add(&st);
    if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
        match rustix::fs::open(path, DIR_FLAGS, Mode::empty()).map(Dir::new) {
            Ok(Ok(root)) => walk(root, &mut walker),
            _ => walker.short(Incomplete::Unreadable),
        }
    }
    Charged {
        bytes: walker.usage.bytes,
        entries: walker.usage.entries,
        incomplete: walker.charge.and_then(|c| c.incomplete),
    }
}

/// Adds what is under `root` to the walker's counts: depth first, one
/// open directory per level.
fn walk(root: Dir, walker: &mut Walker) {
    let mut stack = vec![root];
    loop {
        let depth = stack.len();
        let Some(dir) = stack.last_mut() else {
            return;
        };
        let entry = match dir.read() {
            None => {
                stack.pop();
                continue;
            }
            Some(Err(_)) => {
                walker.short(Incomplete::Unreadable);
                stack.pop();
                continue;
            }
            Some(Ok(entry)) => entry,
        };
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        if walker.done() {
            return;
        }
        let Ok(fd) = dir.fd() else {
            walker.short(Incomplete::Unreadable);
            stack.pop();
            continue;
        };
        match look(fd, name, depth < MAX_DEPTH, walker) {
            Ok(Some(child)) => stack.push(child),
            Ok(None) => {}
            Err(why) => walker.short(why),
        }
    }
}

/// Counts `name` in `dir`; its open directory when it is one to enter.
fn look(
    dir: BorrowedFd<'_>,
    name: &CStr,
    enter: bool,
    walker: &mut Walker,
) -> Result<Option<Dir>, Incomplete> {
    let charging = walker.charge.is_some();
    // Gone since the directory was read: a job's walk counts it no more.
    let gone = |e: rustix::io::Errno| {
        if charging && e == rustix::io::Errno::NOENT {
            Ok(None)
        } else {
            Err(Incomplete::Unreadable)
        }
    };
    let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(e) => return gone(e),
    };
    walker.add(&st);
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        return Ok(None);
    }
    #[allow(clippy::useless_conversion)]
    if walker
        .charge
        .as_ref()
        .is_some_and(|c| c.dev != u64::from(st.st_dev))
    {
        return Ok(None);
    }
    if !enter {
        return Err(Incomplete::Depth);
    }
    let fd = match rustix::fs::openat(dir.as_fd(), name, DIR_FLAGS, Mode::empty()) {
        Ok(fd) => fd,
        Err(e) => return gone(e),
    };
    Dir::new(fd).map(Some).map_err(|_| Incomplete::Unreadable)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Links are counted as links (a link to a large file outside, or to
    /// `/`, adds nothing of its target), a FIFO is not opened (the walk
    /// would block), hard links share their file's blocks, a sparse file
    /// counts what it holds, and a tree deeper than [`MAX_DEPTH`] is
    /// counted to that depth and marked partial.
    #[test]
    fn links_fifos_hard_links_and_depth_are_counted_without_following() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::write(&outside, vec![7u8; 1 << 20]).unwrap();
        let entry = tmp.path().join("entry");
        std::fs::create_dir(&entry).unwrap();
        std::fs::write(entry.join("file"), vec![1u8; 64 * 1024]).unwrap();
        let file_alone = of(&entry.join("file")).bytes;
        let dir_alone = of(&entry).bytes - file_alone;
        assert!(file_alone >= 64 * 1024, "{file_alone}");

        std::os::unix::fs::symlink(&outside, entry.join("to-outside")).unwrap();
        std::os::unix::fs::symlink("/", entry.join("to-root")).unwrap();
        nix::unistd::mkfifo(&entry.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        std::fs::hard_link(entry.join("file"), entry.join("file-again")).unwrap();
        let sparse = std::fs::File::create(entry.join("sparse")).unwrap();
        sparse.set_len(1 << 30).unwrap();
        let usage = of(&entry);
        // Links take no block here (their target fits the inode).
        assert_eq!(
            usage,
            Usage {
                bytes: dir_alone + file_alone,
                entries: 7,
                partial: false,
            }
        );

        // A link in place of the entry is only a link.
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        assert_eq!(of(&link).entries, 1);
        assert!(of(&link).bytes < 4096);

        let deep = tmp.path().join("deep");
        let mut at = deep.clone();
        for _ in 0..MAX_DEPTH + 3 {
            at = at.join("d");
        }
        std::fs::create_dir_all(&at).unwrap();
        std::fs::write(at.join("hidden"), vec![1u8; 1 << 20]).unwrap();
        let usage = of(&deep);
        assert!(usage.partial);
        assert_eq!(usage.entries, 1 + MAX_DEPTH as u64);
    }
}

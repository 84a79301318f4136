//! A fingerprint of everything an overlay workspace's job wrote: every
//! entry of the upper layer (`meta/upper`, the only place the job's writes
//! land), by path, with its type, mode, owner, inode, size, link target,
//! device number (a whiteout) and its modification and change times, and
//! for each regular file a hash of its content as the merged `work/`
//! shows it. Two prints of the same workspace are equal only when nothing
//! the patch reads changed between them (`workspace.rs`, `upper.rs`: the
//! patch reads the merged view at the paths the upper layer lists, the
//! base's snapshot is not the job's to change), which is what lets a patch
//! made while the engine was still shutting down stand for the one made
//! after it (`runner/early_patch.rs`, issue #14).
//!
//! The change time alone would not do: a write through a shared mapping
//! whose page is already dirty changes a file without touching its times.
//! The content hash catches that; it is keyed per process (the standard
//! library's `RandomState`), so a job cannot choose two contents that hash
//! alike. The upper layer is the job's, so it is read as the patch reads
//! it: directories opened beneath the layer's root with no link followed
//! (`beneath.rs`), names as bytes, content only through the merged mount
//! (mounted `nodev`: a device node the job made there cannot be opened)
//! and only from what `fstat` shows to be a regular file, opened without
//! blocking (no FIFO waited on). A layer past [`MAX_ENTRIES`] entries or
//! [`MAX_CONTENT`] bytes of regular files, or one that cannot be read
//! whole, has no print: then nothing made early is taken.

use std::hash::{BuildHasher as _, Hasher as _};
use std::io;
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, OFlags};

use super::beneath;
use super::disk_usage::MAX_DEPTH;

/// The most entries a print walks.
pub(crate) const MAX_ENTRIES: usize = 10_000;
/// The most bytes of regular files a print reads.
pub(crate) const MAX_CONTENT: u64 = 16 << 20;
/// What a file's content is read in.
const CHUNK: usize = 64 << 10;

/// One entry of the upper layer.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Item {
    path: Vec<u8>,
    mode: u32,
    uid: u32,
    gid: u32,
    ino: u64,
    size: i64,
    rdev: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    /// A link's target.
    target: Option<Vec<u8>>,
    /// A regular file's content hash, read through the merged view.
    content: Option<u64>,
}

/// The upper layer's entries in walk order (each directory's names
/// sorted), with the key their contents were hashed with.
#[derive(Debug, Clone)]
pub(crate) struct UpperPrint {
    items: Vec<Item>,
    key: std::collections::hash_map::RandomState,
}

impl PartialEq for UpperPrint {
    /// Equal entries; prints taken with different keys never compare equal
    /// unless neither holds a regular file.
    fn eq(&self, other: &UpperPrint) -> bool {
        self.items == other.items
    }
}

impl Eq for UpperPrint {}

impl UpperPrint {
    /// The print of the upper layer `upper` of the merged view `work`,
    /// contents hashed with a fresh key; `None` when it cannot be taken
    /// whole (see the module's text).
    pub(crate) fn take(upper: &Path, work: &Path) -> Option<UpperPrint> {
        Self::take_keyed(upper, work, std::collections::hash_map::RandomState::new())
    }

    /// Another print of the same layer with this print's key, to compare.
    pub(crate) fn again(&self, upper: &Path, work: &Path) -> Option<UpperPrint> {
        Self::take_keyed(upper, work, self.key.clone())
    }

    fn take_keyed(
        upper: &Path,
        work: &Path,
        key: std::collections::hash_map::RandomState,
    ) -> Option<UpperPrint> {
        let upper_root = beneath::open_root(upper).ok()?;
        let work_root = beneath::open_root(work).ok()?;
        let mut walk = Walk {
            work: work_root,
            key: &key,
            items: Vec::new(),
            content_left: MAX_CONTENT,
            buf: vec![0u8; CHUNK],
        };
        walk.dir(&upper_root, &mut Vec::new(), 0).ok()?;
        let items = walk.items;
        Some(UpperPrint { items, key })
    }

    /// How many entries the print holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }
}

struct Walk<'a> {
    work: OwnedFd,
    key: &'a std::collections::hash_map::RandomState,
    items: Vec<Item>,
    content_left: u64,
    /// What a file's content is read into, one for the whole walk.
    buf: Vec<u8>,
}

/// Why a walk stopped: an entry could not be read, or a bound was passed.
fn over() -> io::Error {
    io::Error::new(io::ErrorKind::FileTooLarge, "past the print's bounds")
}

impl Walk<'_> {
    fn dir(&mut self, dir: &OwnedFd, rel: &mut Vec<u8>, depth: usize) -> io::Result<()> {
        if depth > MAX_DEPTH {
            return Err(over());
        }
        let left = MAX_ENTRIES.saturating_sub(self.items.len());
        let mut entries = beneath::entries_at_most(dir, left)?.ok_or_else(over)?;
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        for entry in entries {
            let at = rel.len();
            if !rel.is_empty() {
                rel.push(b'/');
            }
            rel.extend_from_slice(&entry.name);
            let name = std::ffi::OsStr::from_bytes(&entry.name);
            let stat = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
            let kind = FileType::from_raw_mode(stat.st_mode);
            let target = if kind == FileType::Symlink {
                Some(
                    rustix::fs::readlinkat(dir, name, Vec::new())?
                        .into_bytes()
                        .to_vec(),
                )
            } else {
                None
            };
            let content = if kind == FileType::RegularFile {
                Some(self.content(rel)?)
            } else {
                None
            };
            self.items.push(Item {
                path: rel.clone(),
                mode: stat.st_mode,
                uid: stat.st_uid,
                gid: stat.st_gid,
                ino: stat.st_ino,
                size: stat.st_size,
                rdev: stat.st_rdev,
                mtime: (stat.st_mtime, stat.st_mtime_nsec as i64),
                ctime: (stat.st_ctime, stat.st_ctime_nsec as i64),
                target,
                content,
            });
            if kind == FileType::Directory {
                let sub = beneath::open_beneath(
                    dir.as_fd(),
                    &entry.name,
                    OFlags::RDONLY | OFlags::DIRECTORY,
                )?;
                self.dir(&sub, rel, depth + 1)?;
            }
            rel.truncate(at);
        }
        Ok(())
    }

    /// The hash of the merged view's file at `rel`: read whole, in
    /// [`CHUNK`]-sized pieces (each filled unless at the end, so the same
    /// content hashes alike), within what is left of [`MAX_CONTENT`].
    fn content(&mut self, rel: &[u8]) -> io::Result<u64> {
        let file = beneath::open_beneath(
            self.work.as_fd(),
            rel,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
        )?;
        let stat = rustix::fs::fstat(&file)?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not a regular file in the merged view",
            ));
        }
        let mut file = std::fs::File::from(file);
        let mut hasher = self.key.build_hasher();
        let buf = &mut self.buf;
        loop {
            let mut filled = 0;
            while filled < CHUNK {
                match io::Read::read(&mut file, &mut buf[filled..]) {
                    Ok(0) => break,
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            if filled as u64 > self.content_left {
                return Err(over());
            }
            self.content_left -= filled as u64;
            hasher.write(&buf[..filled]);
            if filled < CHUNK {
                break;
            }
        }
        hasher.write_u64(stat.st_size as u64);
        Ok(hasher.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An "upper layer" and a "merged view" as two plain directories
    /// holding the same names (the print reads names from the first and
    /// content from the second, as it does on a mounted overlay).
    fn layers() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let upper = dir.path().join("upper");
        let work = dir.path().join("work");
        for root in [&upper, &work] {
            std::fs::create_dir_all(root.join("src")).unwrap();
            std::fs::write(root.join("src/a.txt"), "a\n").unwrap();
            std::os::unix::fs::symlink("a.txt", root.join("src/link")).unwrap();
        }
        (dir, upper, work)
    }

    /// Untouched, a second print equals the first; every kind of change
    /// the job can make to what the patch reads makes it differ.
    #[test]
    fn a_print_differs_after_any_change_and_only_then() {
        let (_dir, upper, work) = layers();
        let first = UpperPrint::take(&upper, &work).unwrap();
        assert_eq!(
            (
                first.len(),
                first.again(&upper, &work).as_ref() == Some(&first)
            ),
            (3, true)
        );
        type Change = Box<dyn Fn(&Path, &Path)>;
        let changes: Vec<(&str, Change)> = vec![
            (
                "content in the merged view only",
                Box::new(|_, w| std::fs::write(w.join("src/a.txt"), "b\n").unwrap()),
            ),
            (
                "a new file",
                Box::new(|u, w| {
                    std::fs::write(u.join("src/new.txt"), "").unwrap();
                    std::fs::write(w.join("src/new.txt"), "").unwrap();
                }),
            ),
            (
                "a mode",
                Box::new(|u, _| {
                    use std::os::unix::fs::PermissionsExt as _;
                    std::fs::set_permissions(
                        u.join("src/a.txt"),
                        std::fs::Permissions::from_mode(0o755),
                    )
                    .unwrap()
                }),
            ),
            (
                "a link's target",
                Box::new(|u, _| {
                    std::fs::remove_file(u.join("src/link")).unwrap();
                    std::os::unix::fs::symlink("elsewhere", u.join("src/link")).unwrap();
                }),
            ),
            (
                "a removed entry",
                Box::new(|u, _| std::fs::remove_file(u.join("src/link")).unwrap()),
            ),
        ];
        let mut changed = Vec::new();
        for (what, change) in changes {
            let (_dir, upper, work) = layers();
            let before = UpperPrint::take(&upper, &work).unwrap();
            change(&upper, &work);
            changed.push((what, before.again(&upper, &work) != Some(before)));
        }
        assert!(changed.iter().all(|(_, c)| *c), "{changed:?}");
    }

    /// The same content read again hashes alike, whatever its size (a
    /// file of several chunks); a change in its last byte does not.
    #[test]
    fn a_large_files_content_is_hashed_whole() {
        let (_dir, upper, work) = layers();
        let big: Vec<u8> = (0..(3 * CHUNK + 17)).map(|i| (i % 251) as u8).collect();
        for root in [&upper, &work] {
            std::fs::write(root.join("big.bin"), &big).unwrap();
        }
        let first = UpperPrint::take(&upper, &work).unwrap();
        let same = first.again(&upper, &work);
        let mut last = big.clone();
        *last.last_mut().unwrap() ^= 1;
        // Written in place: same size, and the times set back, so only the
        // content tells.
        let times = std::fs::metadata(work.join("big.bin"))
            .unwrap()
            .modified()
            .unwrap();
        std::fs::write(work.join("big.bin"), &last).unwrap();
        std::fs::File::options()
            .write(true)
            .open(work.join("big.bin"))
            .unwrap()
            .set_modified(times)
            .unwrap();
        assert_eq!(
            (
                same == Some(first.clone()),
                first.again(&upper, &work) == Some(first)
            ),
            (true, false)
        );
    }

    /// A FIFO in the merged view where the upper layer has a file is no
    /// print (nothing blocks on it), nor is a layer past its bounds.
    #[test]
    fn a_fifo_or_too_much_content_gives_no_print() {
        let (_dir, upper, work) = layers();
        std::fs::write(upper.join("pipe"), "").unwrap();
        nix::unistd::mkfifo(&work.join("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let fifo = UpperPrint::take(&upper, &work);
        let (_dir2, upper2, work2) = layers();
        let file = std::fs::File::create(work2.join("huge")).unwrap();
        file.set_len(MAX_CONTENT + 1).unwrap();
        std::fs::write(upper2.join("huge"), "").unwrap();
        let huge = UpperPrint::take(&upper2, &work2);
        assert_eq!((fifo.is_none(), huge.is_none()), (true, true));
    }
}

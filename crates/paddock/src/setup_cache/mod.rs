//! The setup cache (issue #15): what a job's setup commands added to its
//! work tree and home, kept by the host under `<jobs>/.setup-cache/` (0700)
//! and copied into a later job with the same key instead of running the
//! commands again. The key (`key.rs`) is everything that decides what
//! setup produces; its first part is the source's own hash, so two
//! sources never share an entry. An entry is written only from what setup
//! added (paths that did not exist before it ran, the work tree's `.git`
//! aside), once the commands succeeded and nothing they started is left,
//! before the engine starts, so nothing the agent does reaches it. It is
//! copied out and in by `copy.rs` (no link followed, no setuid/setgid
//! file, FIFO or device, no link leaving its tree, every file a new
//! inode: the job never holds a writable inode of the cache). A restore
//! first checks that none of the entry's paths exists in the new job and
//! that each one's directory does, else it is a miss and setup runs.
//! Stores go to a temporary directory renamed into place; restores hold a
//! shared lock on `.lock`, stores and pruning an exclusive one. Pruning,
//! when an entry is stored: entries unused for [`MAX_AGE`] go, and of each
//! source only the [`KEEP_PER_SOURCE`] used last are kept. The cache's
//! own files are opened from its directory's descriptor (itself no link)
//! through no link, and only when regular, without waiting (`O_NONBLOCK`):
//! a job on the `process` rung can write the directory (below), and a FIFO
//! as a manifest or the lock, or a link as the directory or an entry, held
//! every later job's setup, or had it restore another directory's entry.
//!
//! Trust: setup runs the checkout's own code (npm's `postinstall`, a
//! `build.rs`, a `setup.py`), which the key does not cover, so an entry
//! is only as trustworthy as the commit it was produced from. Each entry
//! is named by its key and that commit, and the runner restores it only
//! into a job whose base commit is that commit or descends from it
//! ([`SetupCache::commits`], then `git merge-base --is-ancestor` in
//! Paddock's git directory): a job on main never restores what a job on
//! another branch produced (unless main has merged that branch), while a
//! branch restores main's. docs/egress.md, "The setup cache", has the
//! threat model.

pub(crate) mod copy;
mod key;
mod path_set;

use std::ffi::OsStr;
use std::io;
use std::os::fd::AsFd as _;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags};
use serde::{Deserialize, Serialize};

use crate::workspace::beneath;
use copy::{copy_entry, Copied, CopyError, Rewrite};
pub(crate) use key::{is_commit, is_key_file, Key, KeyInput};

/// Entries unused for this long are removed when another is stored.
pub const MAX_AGE: Duration = Duration::from_secs(14 * 24 * 3600);
/// Entries kept per source (the ones used last).
pub const KEEP_PER_SOURCE: usize = 3;
/// The cache's directory under the jobs directory.
pub const DIR: &str = ".setup-cache";
/// The manifest's version: 2 names the commit the entry was produced from.
const VERSION: u32 = 2;
/// The longest manifest read (16 MiB): one names each path setup added at
/// the top of what it made, and the copy holds at most 100,000 entries.
const MAX_MANIFEST_BYTES: u64 = 16 << 20;
/// A store left half-made (its process died) is removed after this long.
const STALE_TMP: Duration = Duration::from_secs(24 * 3600);

/// The trees setup may add to: the work tree (its `.git` aside) and HOME.
const TREES: [&str; 2] = ["work", "home"];

fn skip_of(tree: &str) -> &'static [&'static [u8]] {
    if tree == "work" {
        &[b".git"]
    } else {
        &[]
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SetupCacheError {
    #[error("setup cache {path}: cannot {step}: {source}")]
    Io {
        path: PathBuf,
        step: &'static str,
        source: io::Error,
    },
    #[error("setup cache {path}: cannot copy {tree}/{source}")]
    Copy {
        path: PathBuf,
        tree: &'static str,
        source: CopyError,
    },
}

fn io_error<'a>(
    path: &'a Path,
    step: &'static str,
) -> impl FnOnce(io::Error) -> SetupCacheError + 'a {
    move |source| SetupCacheError::Io {
        path: path.to_path_buf(),
        step,
        source,
    }
}

/// The job's two trees.
#[derive(Debug, Clone, Copy)]
pub struct JobTrees<'a> {
    pub work: &'a Path,
    pub home: &'a Path,
}

impl JobTrees<'_> {
    /// The job's own directory (`<jobs>/<job id>`), both trees' parent:
    /// what a restore rewrites; empty when they have none in common.
    fn origin(&self) -> Vec<u8> {
        match (self.work.parent(), self.home.parent()) {
            (Some(a), Some(b)) if a == b => a.as_os_str().as_bytes().to_vec(),
            _ => Vec::new(),
        }
    }

    fn root(&self, tree: &str) -> &Path {
        if tree == "work" {
            self.work
        } else {
            self.home
        }
    }
}

/// What was copied, for the event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub key: String,
    pub entries: u64,
    pub bytes: u64,
    /// Paths left out (at most ten) with why, and how many in all.
    pub left_out: Vec<(String, &'static str)>,
    pub left_out_count: u64,
    /// Files and links of a restore in which the producing job's
    /// directory was rewritten to this job's.
    pub rewritten: u64,
    /// A restore that could not rewrite the producing job's directory:
    /// (its name, this job's), of different lengths.
    pub not_rewritten: Option<(String, String)>,
}

impl Summary {
    fn of(key: &Key, c: Copied) -> Summary {
        Summary {
            key: key.short().to_string(),
            entries: c.entries,
            bytes: c.bytes,
            left_out: c.left_out,
            left_out_count: c.left_out_count,
            rewritten: c.rewritten,
            not_rewritten: None,
        }
    }
}

/// How a restore went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restore {
    Restored(Summary),
    /// No entry for the key.
    Miss,
    /// An entry, but it does not fit this checkout (why).
    Unfit(String),
}

/// How a store went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    Stored(Summary),
    /// Not stored (why).
    Declined(String),
}

/// The paths of both trees before setup ran.
#[derive(Debug, Default)]
pub struct Before {
    trees: Vec<path_set::PathSet>,
}

/// What an entry holds besides its trees.
#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    version: u32,
    source: String,
    /// The base commit of the job whose setup produced the entry.
    #[serde(default)]
    commit: String,
    /// The directory of the job whose setup produced the entry
    /// (`<jobs>/<job id>`), which a restore rewrites to its own.
    #[serde(default)]
    origin: Vec<u8>,
    /// (tree, path) of each subtree setup added.
    roots: Vec<(String, Vec<u8>)>,
    entries: u64,
    bytes: u64,
}

/// The cache under one jobs directory.
#[derive(Debug, Clone)]
pub struct SetupCache {
    dir: PathBuf,
}

impl SetupCache {
    pub fn under(jobs_root: &Path) -> SetupCache {
        SetupCache {
            dir: jobs_root.join(DIR),
        }
    }

    /// The paths of the job's trees before setup runs.
    pub fn before(trees: JobTrees<'_>) -> Result<Before, SetupCacheError> {
        let mut out = Before::default();
        for tree in TREES {
            let root = trees.root(tree);
            out.trees.push(
                copy::inventory(root, skip_of(tree)).map_err(io_error(root, "list the tree"))?,
            );
        }
        Ok(out)
    }

    /// The cache's directory, private.
    fn make_dir(&self) -> Result<(), SetupCacheError> {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(io_error(&self.dir, "create the directory"))
    }

    /// The cache's directory, opened: a link in its place is refused.
    fn open_dir(&self) -> io::Result<std::os::fd::OwnedFd> {
        beneath::open_root(&self.dir)
    }

    /// The regular file `rel` beneath the cache's directory, opened with
    /// `flags` through no link and without waiting (a FIFO is refused,
    /// never waited on).
    fn open_file(&self, rel: &[u8], flags: OFlags) -> io::Result<std::fs::File> {
        let dir = self.open_dir()?;
        let fd = beneath::open_beneath(dir.as_fd(), rel, flags | OFlags::NONBLOCK)?;
        regular(fd)
    }

    /// The cache's lock, taken `op`.
    fn lock(&self, op: FlockOperation) -> Result<std::fs::File, SetupCacheError> {
        self.make_dir()?;
        let path = self.dir.join(".lock");
        let file = self
            .open_dir()
            .and_then(|dir| {
                let flags = OFlags::WRONLY
                    | OFlags::CREATE
                    | OFlags::NOFOLLOW
                    | OFlags::NONBLOCK
                    | OFlags::CLOEXEC;
                Ok(rustix::fs::openat(
                    &dir,
                    ".lock",
                    flags,
                    Mode::from_raw_mode(0o600),
                )?)
            })
            .and_then(regular)
            .map_err(io_error(&path, "open the lock"))?;
        rustix::fs::flock(&file, op).map_err(|e| io_error(&path, "lock")(e.into()))?;
        Ok(file)
    }

    /// The commits `key`'s entries were produced from, the entry used
    /// last first. Which of them a job may restore is the caller's to
    /// decide (its base commit must be one of them or descend from it).
    pub fn commits(&self, key: &Key) -> Result<Vec<String>, SetupCacheError> {
        let listed = self
            .open_dir()
            .and_then(|dir| Ok((beneath::entries(&dir)?, dir)));
        let (entries, dir) = match listed {
            Ok(listed) => listed,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_error(&self.dir, "list the directory")(e)),
        };
        let prefix = key.prefix();
        let mut found = Vec::new();
        for e in entries {
            if e.file_type != FileType::Directory {
                continue;
            }
            let Some(commit) = std::str::from_utf8(&e.name)
                .ok()
                .and_then(|n| n.strip_prefix(prefix.as_str()))
            else {
                continue;
            };
            if !is_commit(commit) {
                continue;
            }
            let flags = OFlags::RDONLY | OFlags::DIRECTORY;
            let used = beneath::open_beneath(dir.as_fd(), &e.name, flags)
                .ok()
                .and_then(|entry| {
                    rustix::fs::statat(&entry, "manifest.json", AtFlags::SYMLINK_NOFOLLOW).ok()
                })
                .map(|st| (st.st_mtime, st.st_mtime_nsec));
            found.push((used, commit.to_string()));
        }
        found.sort_by(|a, b| b.cmp(a));
        Ok(found.into_iter().map(|(_, commit)| commit).collect())
    }

    /// Copies the entry of `key` produced from `commit` into the job's
    /// trees, when there is one and it fits; nothing is left of a restore
    /// that failed. The caller has checked that the job trusts `commit`.
    pub fn restore(
        &self,
        key: &Key,
        commit: &str,
        trees: JobTrees<'_>,
    ) -> Result<Restore, SetupCacheError> {
        if !is_commit(commit) {
            return Ok(Restore::Miss);
        }
        let name = key.entry_name(commit);
        let entry = self.dir.join(&name);
        let manifest_path = entry.join("manifest.json");
        let manifest_rel = format!("{name}/manifest.json");
        match self.open_file(manifest_rel.as_bytes(), OFlags::RDONLY) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Restore::Miss),
            Err(e) => return Err(io_error(&manifest_path, "read the manifest")(e)),
            Ok(_) => {}
        }
        let _lock = self.lock(FlockOperation::LockShared)?;
        // Opened again under the lock: pruned meanwhile, it is a miss.
        let file = match self.open_file(manifest_rel.as_bytes(), OFlags::RDONLY) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Restore::Miss),
            Err(e) => return Err(io_error(&manifest_path, "read the manifest")(e)),
        };
        let text = read_at_most(&file, MAX_MANIFEST_BYTES)
            .map_err(io_error(&manifest_path, "read the manifest"))?;
        let manifest: Manifest = serde_json::from_slice(&text)
            .map_err(|e| io_error(&manifest_path, "read the manifest")(io::Error::other(e)))?;
        if (
            manifest.version,
            manifest.source.as_str(),
            manifest.commit.as_str(),
        ) != (VERSION, key.source.as_str(), commit)
        {
            return Ok(Restore::Unfit(format!(
                "its manifest does not name this source and commit {commit}"
            )));
        }
        if let Some(why) = unfit(&manifest, trees) {
            return Ok(Restore::Unfit(why));
        }
        let rw = Rewrite {
            from: manifest.origin.clone(),
            to: trees.origin(),
        };
        let mut acc = Copied::default();
        let mut made: Vec<PathBuf> = Vec::new();
        for (tree, rel) in &manifest.roots {
            let tree = tree_name(tree);
            let dst_root = trees.root(tree);
            // The entry's tree beneath the cache's directory, through no link.
            let src = self.open_dir().and_then(|dir| {
                let rel = format!("{name}/{tree}");
                beneath::open_beneath(
                    dir.as_fd(),
                    rel.as_bytes(),
                    OFlags::RDONLY | OFlags::DIRECTORY,
                )
            });
            let copied = src
                .map_err(|source| CopyError::Io {
                    rel: String::new(),
                    source,
                })
                .and_then(|src| copy_root(src.as_fd(), dst_root, rel, &rw, &mut acc));
            made.push(dst_root.join(OsStr::from_bytes(rel)));
            if let Err(source) = copied {
                for path in &made {
                    remove(path);
                }
                return Err(SetupCacheError::Copy {
                    path: entry,
                    tree,
                    source,
                });
            }
        }
        // Its last use, for pruning (the file read, its owner's).
        let _ = file.set_modified(SystemTime::now());
        let mut summary = Summary::of(key, acc);
        if !rw.from.is_empty() && rw.from != rw.to && !rw.applies() {
            summary.not_rewritten = Some((
                String::from_utf8_lossy(&rw.from).into_owned(),
                String::from_utf8_lossy(&rw.to).into_owned(),
            ));
        }
        Ok(Restore::Restored(summary))
    }

    /// Stores what setup added to the job's trees since `before` under
    /// `key` as produced from `commit` (the job's base commit), then
    /// prunes.
    pub fn store(
        &self,
        key: &Key,
        commit: &str,
        trees: JobTrees<'_>,
        before: &Before,
    ) -> Result<Stored, SetupCacheError> {
        if !is_commit(commit) {
            return Ok(Stored::Declined(format!(
                "`{commit}` is not a commit's name"
            )));
        }
        let entry = self.dir.join(key.entry_name(commit));
        if std::fs::symlink_metadata(&entry).is_ok() {
            return Ok(Stored::Declined(format!(
                "an entry for key {} from commit {commit} is already there",
                key.short()
            )));
        }
        self.make_dir()?;
        // Refused when a link: what is stored goes nowhere else.
        self.open_dir()
            .map_err(io_error(&self.dir, "open the directory"))?;
        let tmp = self
            .dir
            .join(format!(".tmp-{:016x}", rand::random::<u64>()));
        let made = self.fill(&tmp, key, commit, trees, before);
        let summary = match made {
            Ok(s) => s,
            Err(SetupCacheError::Copy {
                source: CopyError::TooBig,
                ..
            }) => {
                remove(&tmp);
                return Ok(Stored::Declined(CopyError::TooBig.to_string()));
            }
            Err(e) => {
                remove(&tmp);
                return Err(e);
            }
        };
        let _lock = self.lock(FlockOperation::LockExclusive)?;
        if std::fs::rename(&tmp, &entry).is_err() {
            // Another job stored the same key first.
            remove(&tmp);
        }
        self.prune();
        Ok(Stored::Stored(summary))
    }

    /// The new entry's trees and manifest in `tmp`.
    fn fill(
        &self,
        tmp: &Path,
        key: &Key,
        commit: &str,
        trees: JobTrees<'_>,
        before: &Before,
    ) -> Result<Summary, SetupCacheError> {
        let mut acc = Copied::default();
        let mut roots = Vec::new();
        for (i, tree) in TREES.into_iter().enumerate() {
            let src_root = trees.root(tree);
            let dst_root = tmp.join(tree);
            std::fs::create_dir_all(&dst_root).map_err(io_error(&dst_root, "create"))?;
            let empty = path_set::PathSet::default();
            let new = copy::new_roots(
                src_root,
                before.trees.get(i).unwrap_or(&empty),
                skip_of(tree),
            )
            .map_err(|source| SetupCacheError::Copy {
                path: src_root.to_path_buf(),
                tree,
                source,
            })?;
            for rel in new {
                let (parent, _) = copy::split(&rel);
                let parent = dst_root.join(OsStr::from_bytes(parent));
                std::fs::create_dir_all(&parent).map_err(io_error(&parent, "create"))?;
                beneath::open_root(src_root)
                    .map_err(|source| CopyError::Io {
                        rel: String::new(),
                        source,
                    })
                    .and_then(|src| {
                        copy_root(src.as_fd(), &dst_root, &rel, &Rewrite::default(), &mut acc)
                    })
                    .map_err(|source| SetupCacheError::Copy {
                        path: tmp.to_path_buf(),
                        tree,
                        source,
                    })?;
                roots.push((tree.to_string(), rel));
            }
        }
        let manifest = Manifest {
            version: VERSION,
            source: key.source.clone(),
            commit: commit.to_string(),
            origin: trees.origin(),
            roots,
            entries: acc.entries,
            bytes: acc.bytes,
        };
        let path = tmp.join("manifest.json");
        let text = serde_json::to_vec(&manifest)
            .map_err(|e| io_error(&path, "write")(io::Error::other(e)))?;
        std::fs::write(&path, text).map_err(io_error(&path, "write"))?;
        Ok(Summary::of(key, acc))
    }

    /// Removes half-made stores, entries unused for [`MAX_AGE`], and each
    /// source's entries beyond the [`KEEP_PER_SOURCE`] used last (the
    /// caller holds the exclusive lock).
    fn prune(&self) {
        // Never through a link in the directory's place.
        if self.open_dir().is_err() {
            return;
        }
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let now = SystemTime::now();
        // How long since an entry was last used, for its order (one dated
        // ahead of now counts as just used).
        let age = |p: &Path| {
            std::fs::symlink_metadata(p)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .unwrap_or_default()
        };
        let mut by_source: std::collections::BTreeMap<String, Vec<(Duration, PathBuf)>> =
            Default::default();
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let path = e.path();
            if name.starts_with(".tmp-") {
                // Dated ahead of now, it is as old as it is ahead.
                if crate::file_age::of(&path, now).is_some_and(|a| a > STALE_TMP) {
                    remove(&path);
                }
                continue;
            }
            let Some((source, _)) = name.split_once('-') else {
                continue;
            };
            let used = age(&path.join("manifest.json"));
            if used > MAX_AGE {
                remove(&path);
                continue;
            }
            by_source
                .entry(source.to_string())
                .or_default()
                .push((used, path));
        }
        for mut entries in by_source.into_values() {
            entries.sort();
            for (_, path) in entries.into_iter().skip(KEEP_PER_SOURCE) {
                remove(&path);
            }
        }
    }
}

/// The size cap's view of the cache under `jobs_root` (`crate::cache_cap`):
/// its entries with their last use (their manifest's modification time),
/// half-made stores (`.tmp-…`) apart, which are counted but never removed
/// by the cap. Directories only, looked at with `lstat`.
pub(crate) fn entries_for_cap(
    jobs_root: &Path,
) -> (Vec<(PathBuf, Option<SystemTime>)>, Vec<PathBuf>) {
    let dir = jobs_root.join(DIR);
    let (mut entries, mut half_made) = (Vec::new(), Vec::new());
    // A link in the directory's place: nothing of where it leads is the
    // cache's, to count or remove.
    if beneath::open_root(&dir).is_err() {
        return (entries, half_made);
    }
    for (name, path) in crate::workspace::prune::subdirs(&dir) {
        if name.starts_with(".tmp-") {
            half_made.push(path);
        } else {
            let used = crate::workspace::prune::last_use(&path.join("manifest.json"));
            entries.push((path, used));
        }
    }
    (entries, half_made)
}

/// The cache's lock under `jobs_root`, taken exclusively without waiting
/// (as a store's pruning takes it); `None` while a job restores or stores
/// (or there is no cache).
pub(crate) fn lock_for_cap(jobs_root: &Path) -> Option<std::fs::File> {
    // Beneath the cache's directory, itself no link; a FIFO in the lock's
    // place is not waited on (O_NONBLOCK), nor taken.
    let file = SetupCache::under(jobs_root)
        .open_file(b".lock", OFlags::WRONLY)
        .ok()?;
    rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive).ok()?;
    Some(file)
}

fn tree_name(tree: &str) -> &'static str {
    if tree == "work" {
        "work"
    } else {
        "home"
    }
}

/// Why an entry does not fit the job's trees: a path it holds exists
/// already, or its directory does not; `None` when it fits.
fn unfit(manifest: &Manifest, trees: JobTrees<'_>) -> Option<String> {
    for (tree, rel) in &manifest.roots {
        let shown = format!("{tree}/{}", String::from_utf8_lossy(rel));
        if !TREES.contains(&tree.as_str()) || !copy::is_plain(rel) {
            return Some(format!("`{shown}` is not a path the cache holds"));
        }
        let (parent, name) = copy::split(rel);
        let Ok(root) = beneath::open_root(trees.root(tree)) else {
            return Some(format!("the job's {tree} directory cannot be opened"));
        };
        let flags = OFlags::RDONLY | OFlags::DIRECTORY;
        let Ok(dir) = beneath::open_beneath(root.as_fd(), parent, flags) else {
            return Some(format!("`{shown}`: its directory is not in the checkout"));
        };
        match rustix::fs::statat(&dir, OsStr::from_bytes(name), AtFlags::SYMLINK_NOFOLLOW) {
            Err(rustix::io::Errno::NOENT) => {}
            _ => return Some(format!("`{shown}` exists in the checkout already")),
        }
    }
    None
}

/// Copies the subtree `rel` of the directory `src_root` to the same place
/// under `dst_root` (whose parent directory exists).
fn copy_root(
    src_root: std::os::fd::BorrowedFd<'_>,
    dst_root: &Path,
    rel: &[u8],
    rw: &Rewrite,
    acc: &mut Copied,
) -> Result<(), CopyError> {
    let (parent, name) = copy::split(rel);
    let under = |root: std::os::fd::BorrowedFd<'_>| {
        beneath::open_beneath(root, parent, OFlags::RDONLY | OFlags::DIRECTORY).map_err(|source| {
            CopyError::Io {
                rel: String::from_utf8_lossy(parent).into_owned(),
                source,
            }
        })
    };
    let dst_root = beneath::open_root(dst_root).map_err(|source| CopyError::Io {
        rel: String::new(),
        source,
    })?;
    let (src, dst) = (under(src_root)?, under(dst_root.as_fd())?);
    copy_entry(src.as_fd(), dst.as_fd(), name, rel, rw, acc)
}

/// `fd` as a file when it is a regular one; a FIFO, device, socket or
/// directory is an error naming what it is not.
fn regular(fd: std::os::fd::OwnedFd) -> io::Result<std::fs::File> {
    let st = rustix::fs::fstat(&fd)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(io::Error::other("not a regular file"));
    }
    Ok(std::fs::File::from(fd))
}

/// All of `file` when at most `max` bytes long, else an error saying so.
fn read_at_most(file: &std::fs::File, max: u64) -> io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(io::Error::other(format!("longer than {max} bytes")));
    }
    Ok(bytes)
}

/// Removes `path` (a directory with what it holds, or a file or link)
/// without following links, whatever permissions setup left in it.
fn remove(path: &Path) {
    let _ = crate::workspace::remove::remove_tree(path);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two commits' names.
    const C1: &str = "1111111111111111111111111111111111111111";
    const C2: &str = "2222222222222222222222222222222222222222";

    fn key(source: &str, command: &str) -> Key {
        Key::of(KeyInput {
            source,
            key_files: Vec::new(),
            commands: &[command.to_string()],
            network: Vec::new(),
            rung: "process",
            profile: None,
            path_env: "",
            tools_env: &[],
            read_only: &[],
        })
    }

    /// A job's trees under `dir`, `deps/f` added by its "setup".
    fn job(dir: &Path) -> (PathBuf, PathBuf, Before) {
        let (work, home) = (dir.join("work"), dir.join("home"));
        std::fs::create_dir_all(work.join(".git")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let before = SetupCache::before(JobTrees {
            work: &work,
            home: &home,
        })
        .unwrap();
        std::fs::create_dir_all(work.join("deps")).unwrap();
        std::fs::write(work.join("deps/f"), "f").unwrap();
        std::fs::write(work.join(".git/planted"), "x").unwrap();
        (work, home, before)
    }

    /// A key is stored once; an entry whose path exists in the new job,
    /// or whose directory does not, is unfit and nothing is copied; the
    /// job's `.git` is never carried.
    #[test]
    fn stored_once_and_restored_only_where_it_fits() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = SetupCache::under(&tmp.path().join("jobs"));
        let k = key("/src", "make deps");
        let (work, home, before) = job(&tmp.path().join("a"));
        let trees = JobTrees {
            work: &work,
            home: &home,
        };
        let stored = cache.store(&k, C1, trees, &before).unwrap();
        assert_eq!(
            (
                matches!(stored, Stored::Stored(ref s) if (s.entries, s.bytes) == (2, 1)),
                cache.store(&k, C1, trees, &before).unwrap(),
            ),
            (
                true,
                Stored::Declined(format!(
                    "an entry for key {} from commit {C1} is already there",
                    k.short()
                ))
            )
        );
        // The same job's trees already have `deps`.
        assert_eq!(
            cache.restore(&k, C1, trees).unwrap(),
            Restore::Unfit("`work/deps` exists in the checkout already".into())
        );
        let fresh = tmp.path().join("b");
        std::fs::create_dir_all(fresh.join("work")).unwrap();
        std::fs::create_dir_all(fresh.join("home")).unwrap();
        let fresh_trees = JobTrees {
            work: &fresh.join("work"),
            home: &fresh.join("home"),
        };
        assert_eq!(
            (
                cache
                    .restore(&key("/other", "make deps"), C1, fresh_trees)
                    .unwrap(),
                matches!(
                    cache.restore(&k, C1, fresh_trees).unwrap(),
                    Restore::Restored(_)
                ),
                std::fs::read_to_string(fresh.join("work/deps/f")).unwrap(),
                fresh.join("work/.git").exists(),
            ),
            (Restore::Miss, true, "f".to_string(), false)
        );
    }

    /// Storing prunes: entries unused for longer than `MAX_AGE` go, and a
    /// source keeps the `KEEP_PER_SOURCE` used last.
    #[test]
    fn storing_prunes_old_entries_and_keeps_three_per_source() {
        let tmp = tempfile::tempdir().unwrap();
        let jobs = tmp.path().join("jobs");
        let cache = SetupCache::under(&jobs);
        let set_age = |k: &Key, secs: u64| {
            let manifest = jobs.join(DIR).join(k.entry_name(C1)).join("manifest.json");
            let f = std::fs::File::options().write(true).open(manifest).unwrap();
            f.set_modified(SystemTime::now() - Duration::from_secs(secs))
                .unwrap();
        };
        let old = key("/old", "make");
        let (work, home, before) = job(&tmp.path().join("old"));
        let trees = JobTrees {
            work: &work,
            home: &home,
        };
        cache.store(&old, C1, trees, &before).unwrap();
        set_age(&old, MAX_AGE.as_secs() + 60);
        let keys: Vec<Key> = (0..4).map(|i| key("/src", &format!("make {i}"))).collect();
        for (i, k) in keys.iter().enumerate() {
            cache.store(k, C1, trees, &before).unwrap();
            // The earlier a key, the longer ago it was used.
            set_age(k, 1000 - 100 * i as u64);
        }
        let mut left: Vec<String> = std::fs::read_dir(jobs.join(DIR))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.'))
            .collect();
        left.sort();
        let mut expected: Vec<String> = keys[1..].iter().map(|k| k.entry_name(C1)).collect();
        expected.sort();
        // Pruned when the fourth was stored (before its age was set): the
        // old source's entry and the first key, used longest ago.
        assert_eq!(left, expected);
    }

    /// One key, entries from two commits: both are listed, the one used
    /// last first; each restores only under its own commit; a commit
    /// without an entry, or a name that is not a commit, is a miss; a
    /// manifest naming another commit than its directory is unfit.
    #[test]
    fn a_key_has_an_entry_per_commit_and_each_restores_only_as_itself() {
        let tmp = tempfile::tempdir().unwrap();
        let jobs = tmp.path().join("jobs");
        let cache = SetupCache::under(&jobs);
        let k = key("/src", "make deps");
        assert_eq!(cache.commits(&k).unwrap(), Vec::<String>::new());
        let (work, home, before) = job(&tmp.path().join("a"));
        let trees = JobTrees {
            work: &work,
            home: &home,
        };
        for c in [C1, C2] {
            assert!(matches!(
                cache.store(&k, c, trees, &before).unwrap(),
                Stored::Stored(_)
            ));
        }
        let manifest = |c: &str| jobs.join(DIR).join(k.entry_name(c)).join("manifest.json");
        let touch = |c: &str, secs: u64| {
            let f = std::fs::File::options()
                .write(true)
                .open(manifest(c))
                .unwrap();
            f.set_modified(SystemTime::now() - Duration::from_secs(secs))
                .unwrap();
        };
        touch(C1, 10);
        touch(C2, 20);
        assert_eq!(
            cache.commits(&k).unwrap(),
            vec![C1.to_string(), C2.to_string()]
        );
        touch(C1, 30);
        assert_eq!(
            cache.commits(&k).unwrap(),
            vec![C2.to_string(), C1.to_string()]
        );
        // C2's entry moved under C1's name: its manifest says C2.
        std::fs::remove_dir_all(jobs.join(DIR).join(k.entry_name(C1))).unwrap();
        std::fs::rename(
            jobs.join(DIR).join(k.entry_name(C2)),
            jobs.join(DIR).join(k.entry_name(C1)),
        )
        .unwrap();
        let fresh = tmp.path().join("b");
        std::fs::create_dir_all(fresh.join("work")).unwrap();
        std::fs::create_dir_all(fresh.join("home")).unwrap();
        let fresh_trees = JobTrees {
            work: &fresh.join("work"),
            home: &fresh.join("home"),
        };
        assert_eq!(
            [
                cache.restore(&k, C2, fresh_trees).unwrap(),
                cache.restore(&k, "../x", fresh_trees).unwrap(),
                cache.restore(&k, C1, fresh_trees).unwrap(),
            ],
            [
                Restore::Miss,
                Restore::Miss,
                Restore::Unfit(format!(
                    "its manifest does not name this source and commit {C1}"
                )),
            ]
        );
        assert!(!fresh.join("work/deps").exists());
    }

    /// `f`'s answer on a thread of its own within ten seconds; `None`: it
    /// hung (the thread is left behind).
    fn within<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(10)).ok()
    }

    /// What a `process`-rung job (which runs as Paddock's user and can
    /// write `<jobs>/.setup-cache/`) plants there neither holds a later
    /// job's restore nor redirects it: a FIFO as an entry's manifest or as
    /// the cache's lock is refused at once (the size cap's lock too), and
    /// a link as the cache's directory, an entry or its manifest (to
    /// another jobs directory's cache) is not followed; nothing is copied.
    /// Before, each FIFO held the restore for ever (every later job's
    /// setup with it) and each link was followed, the other cache's entry
    /// restored.
    #[test]
    fn a_fifo_or_link_planted_in_the_cache_neither_holds_nor_redirects_a_restore() {
        let tmp = tempfile::tempdir().unwrap();
        let k = key("/src", "make deps");
        let (work, home, before) = job(&tmp.path().join("a"));
        let trees = JobTrees {
            work: &work,
            home: &home,
        };
        // A real entry elsewhere, in another jobs directory's cache.
        let elsewhere = tmp.path().join("other-jobs");
        let other = SetupCache::under(&elsewhere);
        assert!(matches!(
            other.store(&k, C1, trees, &before).unwrap(),
            Stored::Stored(_)
        ));
        let other_entry = elsewhere.join(DIR).join(k.entry_name(C1));
        let fifo = |p: &Path| {
            let _ = std::fs::remove_file(p);
            nix::unistd::mkfifo(p, nix::sys::stat::Mode::S_IRWXU).unwrap();
        };
        type Plant = Box<dyn Fn(&Path, &Path)>;
        let cases: Vec<(&str, Plant)> = vec![
            (
                "manifest a FIFO",
                Box::new(move |cache: &Path, entry: &Path| {
                    let _ = cache;
                    fifo(&entry.join("manifest.json"))
                }),
            ),
            (
                "lock a FIFO",
                Box::new(move |cache: &Path, _: &Path| fifo(&cache.join(".lock"))),
            ),
            (
                "manifest a link",
                Box::new({
                    let target = other_entry.join("manifest.json");
                    move |_: &Path, entry: &Path| {
                        std::fs::remove_file(entry.join("manifest.json")).unwrap();
                        std::os::unix::fs::symlink(&target, entry.join("manifest.json")).unwrap();
                    }
                }),
            ),
            (
                "entry a link",
                Box::new({
                    let target = other_entry.clone();
                    move |_: &Path, entry: &Path| {
                        std::fs::remove_dir_all(entry).unwrap();
                        std::os::unix::fs::symlink(&target, entry).unwrap();
                    }
                }),
            ),
            (
                "cache a link",
                Box::new({
                    let target = elsewhere.join(DIR);
                    move |cache: &Path, _: &Path| {
                        std::fs::remove_dir_all(cache).unwrap();
                        std::os::unix::fs::symlink(&target, cache).unwrap();
                    }
                }),
            ),
        ];
        let mut seen = Vec::new();
        for (i, (name, plant)) in cases.iter().enumerate() {
            let jobs = tmp.path().join(format!("jobs-{i}"));
            let cache = SetupCache::under(&jobs);
            // The entry the planting job could not change the content of:
            // an empty one of its own.
            let (w, h, b) = job(&tmp.path().join(format!("producer-{i}")));
            let produced = JobTrees { work: &w, home: &h };
            std::fs::remove_dir_all(w.join("deps")).unwrap();
            assert!(matches!(
                cache.store(&k, C1, produced, &b).unwrap(),
                Stored::Stored(_)
            ));
            plant(&jobs.join(DIR), &jobs.join(DIR).join(k.entry_name(C1)));
            let fresh = tmp.path().join(format!("fresh-{i}"));
            std::fs::create_dir_all(fresh.join("work")).unwrap();
            std::fs::create_dir_all(fresh.join("home")).unwrap();
            let (c, k2, f) = (cache.clone(), k.clone(), fresh.clone());
            let outcome = within(move || {
                let trees = JobTrees {
                    work: &f.join("work"),
                    home: &f.join("home"),
                };
                match c.restore(&k2, C1, trees) {
                    Ok(Restore::Restored(_)) => "restored".to_string(),
                    Ok(other) => format!("{other:?}"),
                    Err(SetupCacheError::Io { step, .. }) => format!("refused: {step}"),
                    Err(e) => format!("{e}"),
                }
            });
            let capped = {
                let jobs = jobs.clone();
                within(move || lock_for_cap(&jobs).is_some())
            };
            seen.push((
                name.to_string(),
                outcome.unwrap_or_else(|| "hung".into()),
                fresh.join("work/deps").exists(),
                capped.map_or("hung", |taken| if taken { "taken" } else { "not taken" }),
            ));
        }
        let want = |name: &str, step: &str, cap: &'static str| {
            (name.to_string(), format!("refused: {step}"), false, cap)
        };
        assert_eq!(
            seen,
            vec![
                want("manifest a FIFO", "read the manifest", "taken"),
                want("lock a FIFO", "open the lock", "not taken"),
                want("manifest a link", "read the manifest", "taken"),
                want("entry a link", "read the manifest", "taken"),
                want("cache a link", "read the manifest", "not taken"),
            ]
        );
    }
}

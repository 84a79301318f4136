//! The job's work tree at the end, listed without trusting it. The walk
//! opens every directory by descriptor beneath the work tree's root
//! (`beneath.rs`: no link followed on the way, so a job that swaps a
//! directory for a link while the walk runs gets an error, never the host's
//! files), and classifies every entry by its directory entry type, so a
//! symbolic link is content (git stores links as links) and is never
//! followed; it never enters or reads an entry named `.git` at any depth (a
//! nested repository's files are plain content, its `.git` ignored), nor a
//! directory the base commit records as a submodule (kept as it was); and it
//! asks Paddock's git for ignore rules (one `check-ignore` for the whole
//! walk, which reads `.gitignore` files as data: `check_ignore.rs`) one
//! depth at a time, so ignored directories are not walked; untracked build output (`junk.rs`) is set apart, not
//! walked either. The result is what git's `add --all` would have chosen,
//! without git ever looking at the work tree by itself. On an overlay
//! workspace the walk reads only what the upper layer says the job touched
//! (`upper.rs`: names to look at, never content), and the base's files it
//! did not read are kept as the index has them, not staged again: at
//! 10,000 files, reading every file through a fresh mount had cost more
//! than the rest of the patch.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::fd::AsFd as _;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, OFlags};

use super::beneath;
use super::check_ignore::IgnoreQuery;
use super::host_git::HostGit;
use super::ignore_shadow::{IgnoreShadow, ATTRIBUTES_FILE, IGNORE_FILE, MAX_IGNORE_FILE};
use super::junk::is_junk;
use super::upper::{Listing, Upper};
use super::WorkspaceError;

/// A submodule entry's mode in the index.
const GITLINK: &str = "160000";

/// What the walk charges a path it lists beside its bytes
/// ([`Budget::max_paths`]): holding it (its vector and allocation, its
/// place in the walk's lists), so that a million one-byte names count
/// for what they cost, not a megabyte.
pub(super) const HELD_PER_PATH: u64 = 64;

/// Files whose content git reads by path while it hashes or checks
/// ignores: one that is not a regular file is refused (a FIFO or a device
/// would block Paddock's git), but a link, which git 2.32 and later open
/// without following and so do not read (`host_git::git_follows_rule_links`):
/// it is content then, as any link (a repository may commit its
/// `.gitignore` as a link; every patch of it was refused). With an older
/// git, which would read whatever the link names, it is refused too.
const READ_BY_GIT: &[&[u8]] = &[IGNORE_FILE, ATTRIBUTES_FILE];

/// The paths of the base commit (from the private index).
#[derive(Debug, Default)]
pub(super) struct Tracked {
    /// Each tracked path with its mode, in path order (bytewise, as git's
    /// index holds them), so that the paths under a directory are one
    /// range: what the patch looks up of the base is what the walk
    /// reached ([`gone_paths`]), never every path of a large base.
    modes: Vec<(Vec<u8>, String)>,
    /// Every leading directory of a tracked path.
    dirs: HashSet<Vec<u8>>,
    /// The tracked files git reads by path while it stages or checks
    /// ignores ([`READ_BY_GIT`]), each with its mode and object name: what
    /// a staging that reads nothing by path (`sealed_stage.rs`) copies or
    /// refuses.
    read_by_git: Vec<TrackedFile>,
    /// The bytes of the paths and directories held, each charged
    /// [`HELD_PER_PATH`] more.
    bytes: u64,
}

/// A tracked path with its mode and object name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TrackedFile {
    pub path: Vec<u8>,
    pub mode: String,
    pub object: String,
}

impl Tracked {
    /// Parses `git ls-files --stage -z`: `MODE SHA STAGE\tPATH\0`.
    pub fn parse(ls_files: &[u8]) -> Tracked {
        let mut t = Tracked::default();
        for record in ls_files.split(|b| *b == 0).filter(|r| !r.is_empty()) {
            t.add(record);
        }
        t.sorted()
    }

    /// The index of `git` listed (`git ls-files --stage -z`), read record
    /// by record ([`HostGit::each_record`], each at most `max_record`
    /// bytes), the paths held at most `max_bytes` together (each charged
    /// [`HELD_PER_PATH`] besides its bytes): past it the
    /// listing is stopped and the error (`ListingPastLimit`) names the
    /// bound, the listing never held whole besides what is kept of it.
    pub async fn read(
        git: &HostGit,
        max_bytes: u64,
        max_record: usize,
    ) -> Result<Tracked, WorkspaceError> {
        let args = ["ls-files", "--stage", "-z"];
        let mut t = Tracked::default();
        git.each_record(args, max_record, |record| {
            t.add(record);
            if t.bytes > max_bytes {
                return Err(WorkspaceError::ListingPastLimit {
                    path: git.root.clone(),
                    args: args.join(" "),
                    what: "of the base's paths (each path's bytes and 64 for holding it; the \
                           patch's first step)",
                    limit: max_bytes,
                });
            }
            Ok(())
        })
        .await?;
        Ok(t.sorted())
    }

    /// The paths in order, each once (the last record of a path standing,
    /// as an index with conflict stages lists it more than once). Git
    /// lists its index in this order already: the sort then only checks.
    fn sorted(mut self) -> Tracked {
        if !self.modes.is_sorted_by(|a, b| a.0 < b.0) {
            // Stable: of a path's records, the last is the last listed.
            self.modes.sort_by(|a, b| a.0.cmp(&b.0));
            let mut kept: Vec<(Vec<u8>, String)> = Vec::with_capacity(self.modes.len());
            for entry in std::mem::take(&mut self.modes) {
                match kept.last_mut() {
                    Some(last) if last.0 == entry.0 => *last = entry,
                    _ => kept.push(entry),
                }
            }
            self.modes = kept;
        }
        self
    }

    /// One record of `git ls-files --stage -z`, without its NUL.
    fn add(&mut self, record: &[u8]) {
        let Some(tab) = record.iter().position(|b| *b == b'\t') else {
            return;
        };
        let mut head = record[..tab].split(|b| *b == b' ');
        let mode = String::from_utf8_lossy(head.next().unwrap_or(b"")).into_owned();
        let path = record[tab + 1..].to_vec();
        // A path held costs its vector and its mode's besides its bytes:
        // millions of one-byte names are not a few megabytes.
        self.bytes = self.bytes.saturating_add(path.len() as u64 + HELD_PER_PATH);
        let name = path.rsplit(|b| *b == b'/').next().unwrap_or(&path);
        if READ_BY_GIT.contains(&name) {
            self.read_by_git.push(TrackedFile {
                path: path.clone(),
                mode: mode.clone(),
                object: String::from_utf8_lossy(head.next().unwrap_or(b"")).into_owned(),
            });
        }
        // The deepest directory first: one held already holds its own
        // (each path's directories are then hashed once, not once a
        // path: a deep path's are its length squared).
        for i in memchr::memrchr_iter(b'/', &path) {
            if self.dirs.contains(&path[..i]) {
                break;
            }
            self.bytes = self.bytes.saturating_add(i as u64 + HELD_PER_PATH);
            self.dirs.insert(path[..i].to_vec());
        }
        self.modes.push((path, mode));
    }

    /// The mode of a tracked path.
    pub fn mode(&self, path: &[u8]) -> Option<&str> {
        self.entry(path).map(|(_, mode)| mode.as_str())
    }

    /// The tracked paths under the directory `dir` (`/` separated, empty
    /// for the root: every path), with their modes.
    fn under(&self, dir: &[u8]) -> &[(Vec<u8>, String)] {
        if dir.is_empty() {
            return &self.modes;
        }
        let mut prefix = dir.to_vec();
        prefix.push(b'/');
        let start = self
            .modes
            .partition_point(|(p, _)| p.as_slice() < prefix.as_slice());
        let len = self.modes[start..].partition_point(|(p, _)| p.starts_with(&prefix));
        &self.modes[start..start + len]
    }

    /// The tracked path `path` with its mode, if it is one.
    fn entry(&self, path: &[u8]) -> Option<&(Vec<u8>, String)> {
        self.modes
            .binary_search_by(|(p, _)| p.as_slice().cmp(path))
            .ok()
            .map(|i| &self.modes[i])
    }

    /// The tracked files git reads by path ([`READ_BY_GIT`]).
    pub fn read_by_git(&self) -> &[TrackedFile] {
        &self.read_by_git
    }

    fn is_gitlink(&self, path: &[u8]) -> bool {
        self.mode(path) == Some(GITLINK)
    }
}

/// What the final tree is made of.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct FinalTree {
    /// The regular files and symbolic links read and to be staged,
    /// relative to the work tree, in order: all of the final tree's,
    /// unless an overlay's upper layer narrowed the walk (then the files
    /// the job touched; the base's others are kept as the index has them,
    /// [`FinalTree::is_present`]).
    pub staged: Vec<Vec<u8>>,
    /// Tracked paths (not submodules) that are no longer a file or link,
    /// in order.
    pub gone: Vec<Vec<u8>>,
    /// Untracked build output left out (`junk.rs`): a directory as
    /// `dir/` (not walked), a file as its path.
    pub junk: Vec<Vec<u8>>,
    /// Paths `update-index` refused to stage (git's "Ignoring path"): a
    /// `.git` under another spelling (`.GIT`, `git~1`, `.g\u{200c}it`).
    pub refused: Vec<Vec<u8>>,
    /// Files the job changed that were not staged because their length
    /// (`st_size`) did not fit in the [`Budget`], each with that length:
    /// a tracked one is kept as the index has it, an untracked one is not
    /// in the tree.
    pub too_long: Vec<(Vec<u8>, u64)>,
}

impl FinalTree {
    /// Whether the final tree records `path` (a regular file or symbolic
    /// link): staged, or tracked by the base (not as a submodule) and not
    /// gone. `tracked` is what the walk was given.
    pub fn is_present(&self, tracked: &Tracked, path: &[u8]) -> bool {
        self.staged
            .binary_search_by(|p| p.as_slice().cmp(path))
            .is_ok()
            || (tracked.mode(path).is_some_and(|m| m != GITLINK)
                && self
                    .gone
                    .binary_search_by(|p| p.as_slice().cmp(path))
                    .is_err())
    }

    /// Every path the final tree records, in order (what the tests compare
    /// a narrowed walk's with a whole one's by).
    #[cfg(test)]
    pub fn present(&self, tracked: &Tracked) -> Vec<Vec<u8>> {
        let mut present: Vec<Vec<u8>> = tracked
            .modes
            .iter()
            .filter(|(p, _)| self.is_present(tracked, p))
            .map(|(p, _)| p.clone())
            .chain(self.staged.iter().cloned())
            .collect();
        present.sort();
        present.dedup();
        present
    }
}

/// How much of the files the job changed the staging may have git read
/// (and hash): their lengths together at most `max` bytes, taken in path
/// order, a file that does not fit left out ([`FinalTree::too_long`]).
/// A file's length is its `st_size`, which a sparse file makes any size
/// without holding disk (`truncate -s 50G`), so the disk limit bounds
/// nothing here; git would read and hash every byte of it, minutes of CPU
/// per file and up to `host_git`'s timeout, after which the job had no
/// patch at all.
#[derive(Debug, Clone, Copy)]
pub(super) struct Budget {
    /// The files counted are those whose status changed after this
    /// instant (`st_ctime`, which no job can set back), the modification
    /// time of the index the staging starts from: a file left as the
    /// checkout wrote it has its index stamps and git does not read it.
    /// `None`: every file is counted.
    pub changed_after: Option<(i64, i64)>,
    /// The most of their lengths together.
    pub max: u64,
    /// The most of the paths the walk lists (each path's bytes and
    /// [`HELD_PER_PATH`] together, every directory's entries as it is
    /// read): past it the walk stops with `FinalTreePastLimit`. A job can
    /// make millions of empty files under long paths within its disk
    /// limit (an empty file holds no block, a deep path's name only its
    /// last part in a directory), each of which the walk, the staging's
    /// lists and `update-index`'s input held by name in the memory of the
    /// process that runs every job.
    pub max_paths: u64,
}

impl Budget {
    /// No bound (what the tests that compare walks use).
    #[cfg(test)]
    pub fn unbounded() -> Budget {
        Budget {
            changed_after: None,
            max: u64::MAX,
            max_paths: u64::MAX,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    /// A regular file or a symbolic link.
    Content,
    /// A FIFO, socket or device: not content.
    Other,
}

fn join(base: &[u8], name: &[u8]) -> Vec<u8> {
    let mut out = base.to_vec();
    if !out.is_empty() {
        out.push(b'/');
    }
    out.extend_from_slice(name);
    out
}

fn abs(work: &Path, rel: &[u8]) -> PathBuf {
    work.join(OsStr::from_bytes(rel))
}

/// Lists the final tree of `work` (see the module comment), every
/// directory read (what the tests compare a narrowed walk with).
#[cfg(test)]
pub(super) async fn list(
    git: &HostGit,
    work: &Path,
    tracked: &Tracked,
) -> Result<FinalTree, WorkspaceError> {
    list_with(
        git,
        work,
        tracked,
        None,
        Budget::unbounded(),
        &mut |_| {},
        None,
    )
    .await
}

/// Whether the link `name` in `dir` names the sandbox's placeholder target.
fn is_placeholder(dir: &impl std::os::fd::AsFd, name: &[u8]) -> bool {
    rustix::fs::readlinkat(dir, name, Vec::new())
        .is_ok_and(|target| target.as_bytes() == paddock_sandbox::absent::TARGET.as_bytes())
}

/// The directories a walk read: `None` for one read whole, else the only
/// names of it that were looked at (the rest are the base's own).
type Visited = HashMap<Vec<u8>, Option<HashSet<Vec<u8>>>>;

/// Whether the tracked `path` was left as the base has it, by what the
/// walk read: some directory on its way was read narrowed to names that
/// do not include the next step. Otherwise the walk looked at the path
/// (or found a directory on its way gone or replaced), and its finding
/// stands.
fn untouched(visited: &Visited, path: &[u8]) -> bool {
    let mut start = 0;
    loop {
        let end = path[start..]
            .iter()
            .position(|b| *b == b'/')
            .map(|i| start + i);
        let parent = &path[..start.saturating_sub(1)];
        let name = &path[start..end.unwrap_or(path.len())];
        match visited.get(parent) {
            None => return false,
            Some(Some(names)) if !names.contains(name) => return true,
            Some(_) => {}
        }
        match end {
            Some(e) => start = e + 1,
            None => return false,
        }
    }
}

/// [`list`], reading of an overlay's merged `work` only what `upper` (its
/// upper layer, `upper.rs`) says the job touched when given, and calling
/// `after_level` with each depth once it is read (the tests race the walk
/// there). The tracked files it does not read are the base's, kept as
/// they are in the index: in [`FinalTree::present`], not in
/// [`FinalTree::staged`]. The changed files longer than `budget` lets git
/// read are left out ([`FinalTree::too_long`]).
pub(super) async fn list_with(
    git: &HostGit,
    work: &Path,
    tracked: &Tracked,
    upper: Option<&Upper>,
    budget: Budget,
    after_level: &mut (dyn FnMut(usize) + Send),
    shadow: Option<&IgnoreShadow>,
) -> Result<FinalTree, WorkspaceError> {
    let read_err = |rel: &[u8]| {
        let file = abs(work, rel).display().to_string();
        move |source| WorkspaceError::Read {
            path: git.root.clone(),
            file,
            source,
        }
    };
    let root = beneath::open_root(work).map_err(read_err(b""))?;
    let shadow_err = |rel: &[u8]| {
        let file = abs(work, rel).display().to_string();
        move |source: std::io::Error| WorkspaceError::SealedStaging {
            path: git.root.clone(),
            file,
            why: format!("its ignore and attribute rules' copy: {source}"),
        }
    };
    let mut rules = IgnoreQuery::new(shadow.map_or(git, IgnoreShadow::git));
    // What the walk charged of `budget.max_paths`.
    let mut held: u64 = 0;
    let past_limit = || WorkspaceError::FinalTreePastLimit {
        path: git.root.clone(),
        limit: budget.max_paths,
        per_path: HELD_PER_PATH,
    };
    let mut visited = Visited::new();
    // (directory, under an ignored directory, read whole)
    let mut level: Vec<(Vec<u8>, bool, bool)> = vec![(Vec::new(), false, upper.is_none())];
    let mut staged = Vec::new();
    let mut junk = Vec::new();
    // The lengths of the regular files changed after the budget's instant.
    let mut changed: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut depth = 0;
    while !level.is_empty() {
        let mut entries: Vec<(Vec<u8>, Kind, bool, bool)> = Vec::new();
        for (dir, ignored, whole) in &level {
            // No directory listed past what the bound has left, one entry
            // charged at least its directory's path and `HELD_PER_PATH`
            // (the upper layer's neither: past it, the merged directory is
            // read whole, and stopped).
            let least = dir.len() as u64 + 1 + HELD_PER_PATH;
            let left = budget.max_paths.saturating_sub(held) / least;
            let left = usize::try_from(left).unwrap_or(usize::MAX);
            let names = match (whole, upper) {
                (false, Some(upper)) => match upper.listing(dir, left) {
                    Listing::Names(names) => Some(names),
                    Listing::Whole => None,
                },
                _ => None,
            };
            let flags = OFlags::RDONLY | OFlags::DIRECTORY;
            let fd = beneath::open_beneath(root.as_fd(), dir, flags).map_err(read_err(dir))?;
            // This directory's ignore and attribute files read (a sealed
            // walk).
            let mut rule_files_read: Vec<Vec<u8>> = Vec::new();
            let listed = beneath::entries_at_most(&fd, left)
                .map_err(read_err(dir))?
                .ok_or_else(past_limit)?;
            for entry in listed {
                let path_len = dir.len() + 1 + entry.name.len();
                held = held.saturating_add(path_len as u64 + HELD_PER_PATH);
                if held > budget.max_paths {
                    return Err(past_limit());
                }
                if entry.name == b".git" {
                    continue;
                }
                // The entry's own type: a link is not followed.
                let kind = match entry.file_type {
                    FileType::Directory => Kind::Dir,
                    FileType::RegularFile | FileType::Symlink => Kind::Content,
                    _ => Kind::Other,
                };
                let rel = join(dir, &entry.name);
                let read_by_git = READ_BY_GIT.contains(&entry.name.as_slice());
                let unread_link = entry.file_type == FileType::Symlink
                    && read_by_git
                    && !super::host_git::git_follows_rule_links().await;
                if read_by_git
                    && entry.file_type != FileType::RegularFile
                    && kind != Kind::Dir
                    && !unread_link
                {
                    return Err(WorkspaceError::NotAFile {
                        path: git.root.clone(),
                        file: String::from_utf8_lossy(&rel).into_owned(),
                    });
                }
                // The base's own entry, untouched by the job.
                if names.as_ref().is_some_and(|n| !n.contains(&entry.name)) {
                    continue;
                }
                // A sealed walk copies the ignore and attribute files it
                // reads into the shadow, for git to read there.
                if let Some(shadow) = shadow {
                    // Git does not read an attribute file that is a link
                    // by path, but once staged, reads its blob in the
                    // index (the link's target) as attribute rules: where
                    // a file beside it is staged after it, rules the
                    // shadow cannot hold.
                    if entry.name == ATTRIBUTES_FILE && entry.file_type == FileType::Symlink {
                        return Err(WorkspaceError::SealedStaging {
                            path: git.root.clone(),
                            file: abs(work, &rel).display().to_string(),
                            why: super::ignore_shadow::LINKED_ATTRIBUTES.to_string(),
                        });
                    }
                    if read_by_git && entry.file_type == FileType::RegularFile {
                        let read =
                            beneath::read_regular_at(fd.as_fd(), &entry.name, MAX_IGNORE_FILE);
                        let (_, content) =
                            read.map_err(|refused| WorkspaceError::SealedStaging {
                                path: git.root.clone(),
                                file: abs(work, &rel).display().to_string(),
                                why: match refused {
                                    beneath::Refused::Longer(len) => format!(
                                        "{len} bytes, more than the {MAX_IGNORE_FILE} of an \
                                         ignore or attribute file copied"
                                    ),
                                    beneath::Refused::Why(why) => why,
                                },
                            })?;
                        shadow.put(&rel, &content).map_err(shadow_err(&rel))?;
                        rule_files_read.push(entry.name.clone());
                    }
                }
                if tracked.is_gitlink(&rel) {
                    continue;
                }
                // A sandbox placeholder for a protected name (a link to a
                // path that cannot exist) left by a run that was killed
                // before its helper removed it: not the job's work.
                if entry.file_type == FileType::Symlink
                    && tracked.mode(&rel).is_none()
                    && is_placeholder(&fd, &entry.name)
                {
                    continue;
                }
                if entry.file_type == FileType::RegularFile {
                    if let Some(len) = changed_length(&fd, &entry.name, budget.changed_after) {
                        changed.insert(rel.clone(), len);
                    }
                }
                entries.push((rel, kind, *ignored, names.is_none()));
            }
            // An ignore or attribute file the job removed (the upper layer
            // names it, or the directory was read whole, and it is not
            // there as a regular file) is not the shadow's either.
            if let Some(shadow) = shadow {
                for name in READ_BY_GIT {
                    let listed = names.as_ref().is_none_or(|n| n.contains(*name));
                    if listed && !rule_files_read.iter().any(|read| read == name) {
                        let rel = join(dir, name);
                        shadow.remove(&rel).map_err(shadow_err(&rel))?;
                    }
                }
            }
            visited.insert(dir.clone(), names);
        }
        after_level(depth);
        depth += 1;
        let query: Vec<&[u8]> = entries
            .iter()
            .filter(|(rel, kind, under_ignored, _)| {
                !under_ignored && *kind != Kind::Other && tracked.mode(rel).is_none()
            })
            .map(|(rel, _, _, _)| rel.as_slice())
            .collect();
        // The shadow has each path asked about as the job's tree has it,
        // a directory or not, so that git finds a directory exactly where
        // the job has one (a pattern ending in `/`): nothing of the
        // base's is left where the job's file or link now is (a directory
        // of the base made for its ignore file).
        if let Some(shadow) = shadow {
            for (rel, kind, _, _) in entries.iter().filter(|(rel, kind, under_ignored, _)| {
                !under_ignored && *kind != Kind::Other && tracked.mode(rel).is_none()
            }) {
                match kind {
                    Kind::Dir => shadow.make_dir(rel),
                    _ => shadow.make_no_dir(rel),
                }
                .map_err(shadow_err(rel))?;
            }
        }
        let ignored = rules.ignored(&query).await?;
        let mut next = Vec::new();
        for (rel, kind, under_ignored, whole) in entries {
            let is_ignored = under_ignored || ignored.contains(&rel);
            let untracked = tracked.mode(&rel).is_none() && !tracked.dirs.contains(&rel);
            let name = rel.rsplit(|b| *b == b'/').next().unwrap_or(&rel);
            if !is_ignored && untracked && kind != Kind::Other && is_junk(name, kind == Kind::Dir) {
                let mut shown = rel.clone();
                if kind == Kind::Dir {
                    shown.push(b'/');
                }
                junk.push(shown);
                continue;
            }
            match kind {
                Kind::Dir if !is_ignored || tracked.dirs.contains(&rel) => {
                    next.push((rel, is_ignored, whole));
                }
                Kind::Content if !is_ignored || tracked.mode(&rel).is_some() => {
                    staged.push(rel);
                }
                _ => {}
            }
        }
        level = next;
    }
    rules.finish().await?;
    staged.sort();
    let mut left = budget.max;
    let mut too_long = Vec::new();
    staged.retain(|rel| match changed.get(rel) {
        Some(&len) if len > left => {
            too_long.push((rel.clone(), len));
            false
        }
        Some(&len) => {
            left -= len;
            true
        }
        None => true,
    });
    let gone = gone_paths(tracked, &visited, &staged, &too_long);
    junk.sort();
    Ok(FinalTree {
        staged,
        gone,
        junk,
        refused: Vec::new(),
        too_long,
    })
}

/// The tracked paths (not submodules) the final tree no longer records:
/// neither staged nor left out as too long (kept as the base has them),
/// and reached by the walk ([`untouched`] says no), the walk having found
/// them gone or replaced. Only what the walk reached is looked at, by
/// ranges of the base's ordered paths: under each directory it read whole
/// (one under another read whole is in that one's range), and each name a
/// narrowed directory's listing gave, with what lies under it where it is
/// no directory the walk read (a directory it read has its own entry). At
/// 10,000 files a patch of two files so looks at a few paths, where every
/// path of the base was copied, hashed and sorted on the job's exit path
/// (issue #14); the paths the filter below keeps are those of the whole
/// base that [`untouched`] says no to, each of which lies in such a range.
fn gone_paths(
    tracked: &Tracked,
    visited: &Visited,
    staged: &[Vec<u8>],
    too_long: &[(Vec<u8>, u64)],
) -> Vec<Vec<u8>> {
    let mut reached: Vec<&(Vec<u8>, String)> = Vec::new();
    for (dir, names) in visited {
        match names {
            None => {
                let parent = dir
                    .iter()
                    .rposition(|b| *b == b'/')
                    .map_or(&[][..], |i| &dir[..i]);
                let in_whole_parent = !dir.is_empty() && matches!(visited.get(parent), Some(None));
                if !in_whole_parent {
                    reached.extend(tracked.under(dir));
                }
            }
            Some(names) => {
                for name in names {
                    let path = join(dir, name);
                    reached.extend(tracked.entry(&path));
                    if !visited.contains_key(&path) {
                        reached.extend(tracked.under(&path));
                    }
                }
            }
        }
    }
    reached.sort_by(|a, b| a.0.cmp(&b.0));
    reached.dedup_by(|a, b| a.0 == b.0);
    reached
        .into_iter()
        .filter(|(path, mode)| {
            mode != GITLINK
                && !untouched(visited, path)
                && staged.binary_search(path).is_err()
                && too_long
                    .binary_search_by(|(p, _)| p.as_slice().cmp(path))
                    .is_err()
        })
        .map(|(path, _)| path.clone())
        .collect()
}

/// The length of the regular file `name` in `dir` if its status changed
/// after `after` (always, without one); `None` for a file left alone
/// since then, or one gone or no longer regular (git finds it so too).
fn changed_length(
    dir: &impl std::os::fd::AsFd,
    name: &[u8],
    after: Option<(i64, i64)>,
) -> Option<u64> {
    let st = rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return None;
    }
    #[allow(clippy::unnecessary_cast)]
    let ctime = (st.st_ctime as i64, st.st_ctime_nsec as i64);
    if after.is_some_and(|after| ctime <= after) {
        return None;
    }
    u64::try_from(st.st_size).ok()
}

/// `paths` as git's `-z` input.
pub(super) fn nul_list<P: AsRef<[u8]>>(paths: &[P]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in paths {
        out.extend_from_slice(p.as_ref());
        out.push(0);
    }
    out
}

/// The paths `update-index` said it ignores on `stderr` (its "Ignoring
/// path P" lines: a path git refuses as a `.git` of some file system).
pub(super) fn refused_paths(stderr: &[u8]) -> Vec<Vec<u8>> {
    stderr
        .split(|b| *b == b'\n')
        .filter_map(|line| line.strip_prefix(b"Ignoring path ".as_slice()))
        .map(<[u8]>::to_vec)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracked(paths: &[(&str, &str)]) -> Tracked {
        let mut listing = Vec::new();
        // Out of order, and one path listed twice (as conflict stages
        // are): the last record stands.
        for (path, mode) in paths.iter().rev().chain(paths.first()) {
            listing.extend_from_slice(format!("{mode} {:040} 0\t{path}\0", 0).as_bytes());
        }
        Tracked::parse(&listing)
    }

    fn names(n: &[&str]) -> Option<HashSet<Vec<u8>>> {
        Some(n.iter().map(|n| n.as_bytes().to_vec()).collect())
    }

    /// What `gone_paths` finds by ranges of what the walk reached is what
    /// looking at every tracked path finds (the definition it replaces):
    /// narrowed directories, one read whole under a narrowed one and one
    /// under that, a name whose directory is gone (not read), a submodule,
    /// a staged path and a path left out as too long.
    #[test]
    fn gone_paths_are_every_tracked_path_the_walk_reached_and_did_not_keep() {
        let t = tracked(&[
            ("README.md", "100644"),
            ("a/b/c.txt", "100644"),
            ("a/b/d.txt", "100644"),
            ("a/keep.txt", "100644"),
            ("a/x", "100755"),
            ("a0", "100644"),
            ("gone_dir/f", "100644"),
            ("gone_dir/g/h", "100644"),
            ("long.bin", "100644"),
            ("sub", "160000"),
            ("w/deep/one", "100644"),
            ("w/two", "120000"),
            ("z/untouched", "100644"),
        ]);
        let mut visited = Visited::new();
        visited.insert(
            Vec::new(),
            names(&["a", "gone_dir", "long.bin", "sub", "w", "README.md"]),
        );
        visited.insert(b"a".to_vec(), names(&["b", "x"]));
        visited.insert(b"a/b".to_vec(), names(&["c.txt"]));
        visited.insert(b"w".to_vec(), None);
        visited.insert(b"w/deep".to_vec(), None);
        let staged = vec![b"a/x".to_vec(), b"new.txt".to_vec()];
        let too_long = vec![(b"long.bin".to_vec(), 1 << 30)];
        let brute: Vec<Vec<u8>> = t
            .modes
            .iter()
            .filter(|(p, m)| {
                m != GITLINK
                    && !untouched(&visited, p)
                    && !staged.contains(p)
                    && !too_long.iter().any(|(l, _)| l == p)
            })
            .map(|(p, _)| p.clone())
            .collect();
        let text = |v: &[Vec<u8>]| -> Vec<String> {
            v.iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect()
        };
        let found = gone_paths(&t, &visited, &staged, &too_long);
        assert_eq!(
            (text(&found), text(&brute)),
            (
                vec![
                    "README.md".to_string(),
                    "a/b/c.txt".to_string(),
                    "gone_dir/f".to_string(),
                    "gone_dir/g/h".to_string(),
                    "w/deep/one".to_string(),
                    "w/two".to_string(),
                ],
                text(&found)
            )
        );
        let tree = FinalTree {
            staged,
            gone: found,
            ..FinalTree::default()
        };
        assert_eq!(
            text(&tree.present(&t)),
            [
                "a/b/d.txt",
                "a/keep.txt",
                "a/x",
                "a0",
                "long.bin",
                "new.txt",
                "z/untouched"
            ]
        );
    }

    /// The base's paths are held in path order whatever order they were
    /// listed in, each once, so that a directory's paths are one range.
    #[test]
    fn tracked_paths_are_ordered_and_a_directorys_are_one_range() {
        let t = tracked(&[
            ("a", "100644"),
            ("a-b", "100644"),
            ("a/b", "100644"),
            ("a/c/d", "100755"),
            ("a0", "100644"),
        ]);
        let paths = |v: &[(Vec<u8>, String)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(p, m)| (String::from_utf8_lossy(p).into_owned(), m.clone()))
                .collect()
        };
        assert_eq!(
            (
                paths(&t.modes),
                paths(t.under(b"a")),
                paths(t.under(b"a/c")),
                t.mode(b"a/c/d")
            ),
            (
                vec![
                    ("a".to_string(), "100644".to_string()),
                    ("a-b".to_string(), "100644".to_string()),
                    ("a/b".to_string(), "100644".to_string()),
                    ("a/c/d".to_string(), "100755".to_string()),
                    ("a0".to_string(), "100644".to_string()),
                ],
                vec![
                    ("a/b".to_string(), "100644".to_string()),
                    ("a/c/d".to_string(), "100755".to_string()),
                ],
                vec![("a/c/d".to_string(), "100755".to_string())],
                Some("100755")
            )
        );
    }
}

//! The ignore and attribute files of the job's tree, copied into a
//! directory of Paddock's own for `git check-ignore` (`check_ignore.rs`)
//! and `git check-attr` (`sealed_stage.rs`) to read, when the patch is
//! staged while the job still runs (`sealed_stage.rs`, the early patch).
//! Git reads a work tree's `.gitignore` and `.gitattributes` files by
//! path, and looks up by path the type of what it is asked about (a
//! pattern ending in `/` matches only a directory): a live job could swap
//! a directory of its tree for a link between Paddock's walk and git's
//! read, and so have Paddock's git read a host file. Nothing in the
//! shadow is the job's to change: each directory's ignore and attribute
//! files are the base's (read from Paddock's own objects by the name its
//! index gives) unless the job touched them, and then they are what the
//! walk read beneath the work tree's root with no link followed
//! (`final_tree.rs`), or none when the job removed them; each directory
//! asked about is made there as a directory, every other path asked about
//! is no directory there, whatever the base's files had put on its way
//! (git then takes it for no directory, as it takes the job's file or
//! link). Only regular files are copied: a tracked `.gitignore` or
//! `.gitattributes` that is a link is not read by git either (2.32 and
//! later open it without following, and fall back to the index's copy,
//! as they do for a file the shadow lacks). That copy of an attribute
//! file is the index entry whatever its mode, a link's blob (its target)
//! read as rules: a `.gitattributes` link, the base's or one the job made
//! (staged by path before the files beside it), refuses the sealed
//! staging ([`LINKED_ATTRIBUTES`]).

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use super::final_tree::TrackedFile;
use super::host_git::HostGit;
use super::WorkspaceError;

/// The shadow's directory in the job's `meta/`.
const SHADOW: &str = "ignore-shadow";

/// The ignore file's name.
pub(super) const IGNORE_FILE: &[u8] = b".gitignore";

/// The attribute file's name.
pub(super) const ATTRIBUTES_FILE: &[u8] = b".gitattributes";

/// The attribute whose conversion (a re-encoding) applies to any content;
/// an attribute file that names it, even in a macro, makes every staged
/// file's attributes worth asking for (`sealed_stage.rs`).
const ENCODING: &[u8] = b"working-tree-encoding";

/// Why an attribute file that is not a regular file (a link, in the
/// base's index or the job's tree) refuses the sealed staging: git falls
/// back from one it cannot read by path to the index's entry of that name,
/// whatever its mode, and reads its blob (a link's target) as attribute
/// rules, the job's link too once staged (before the files beside it).
pub(super) const LINKED_ATTRIBUTES: &str =
    "a link, whose target git reads from the index as attribute rules";

/// The most bytes of one ignore or attribute file the shadow holds. A
/// longer one (the base's or the job's) is refused: the staging is then made by path,
/// once the job has ended.
pub(super) const MAX_IGNORE_FILE: u64 = 1 << 20;

/// The most bytes of ignore files, and the most entries (files and
/// directories), one shadow holds: a walk of a tree the early patch's
/// print took whole (at most `upper_print::MAX_CONTENT` bytes and
/// `MAX_ENTRIES` entries) stays within them; one past them is of a tree
/// the job changed since, whose early patch is made again anyway, and the
/// shadow does not copy onto the host's disk what the job may write.
const MAX_BYTES: u64 = super::upper_print::MAX_CONTENT;
const MAX_ENTRIES: usize = super::upper_print::MAX_ENTRIES;

/// A regular file's mode in the index.
const FILE_MODES: [&str; 2] = ["100644", "100755"];

/// The shadow work tree, and Paddock's git with it as its work tree.
#[derive(Debug)]
pub(super) struct IgnoreShadow {
    dir: PathBuf,
    git: HostGit,
    /// Bytes and entries put so far ([`MAX_BYTES`], [`MAX_ENTRIES`]).
    bytes: AtomicU64,
    entries: AtomicUsize,
    /// Whether an attribute file was ever put, and whether one named
    /// [`ENCODING`] (kept when it is removed again: the index's copy may
    /// stand in for it).
    attributes: AtomicBool,
    encoding: AtomicBool,
}

impl IgnoreShadow {
    /// A fresh shadow in `meta` holding the base's ignore and attribute
    /// files (those of `base` named `.gitignore` or `.gitattributes`, regular
    /// files), read from `git`'s objects. A base attribute file that is not
    /// a regular file (a link: [`LINKED_ATTRIBUTES`]) refuses the sealed
    /// staging, named under `work`.
    pub async fn make(
        git: &HostGit,
        meta: &Path,
        work: &Path,
        base: &[TrackedFile],
    ) -> Result<IgnoreShadow, WorkspaceError> {
        if let Some(f) = base
            .iter()
            .find(|f| name_of(&f.path) == ATTRIBUTES_FILE && !FILE_MODES.contains(&f.mode.as_str()))
        {
            return Err(WorkspaceError::SealedStaging {
                path: git.root.clone(),
                file: work.join(OsStr::from_bytes(&f.path)).display().to_string(),
                why: LINKED_ATTRIBUTES.to_string(),
            });
        }
        let dir = meta.join(SHADOW);
        let fail = |source| WorkspaceError::Write {
            path: git.root.clone(),
            file: dir.display().to_string(),
            source,
        };
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(fail(e)),
        }
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(fail)?;
        let shadow = IgnoreShadow {
            dir: dir.clone(),
            git: HostGit {
                work_tree: Some(dir.clone()),
                index: None,
                ..git.clone()
            },
            bytes: AtomicU64::new(0),
            entries: AtomicUsize::new(0),
            attributes: AtomicBool::new(false),
            encoding: AtomicBool::new(false),
        };
        let files: Vec<&TrackedFile> = base
            .iter()
            .filter(|f| {
                [IGNORE_FILE, ATTRIBUTES_FILE].contains(&name_of(&f.path))
                    && FILE_MODES.contains(&f.mode.as_str())
            })
            .collect();
        if files.is_empty() {
            return Ok(shadow);
        }
        let objects = HostGit {
            work_tree: None,
            index: None,
            ..git.clone()
        };
        let mut input = Vec::new();
        for f in &files {
            input.extend_from_slice(f.object.as_bytes());
            input.push(b'\n');
        }
        let args = ["cat-file", "--batch"];
        // Each answer is a header, the content and a newline.
        let bound = (MAX_IGNORE_FILE + 128) * files.len() as u64;
        let (status, out, stderr) = objects.start(args)?.at_most(bound).finish(&input).await?;
        if !status.success() {
            return Err(objects.failed(args, &stderr));
        }
        let contents =
            parse_batch(&out, files.len()).map_err(|why| WorkspaceError::SealedStaging {
                path: git.root.clone(),
                file: "the base's ignore and attribute files".to_string(),
                why,
            })?;
        for (f, content) in files.iter().zip(contents) {
            shadow.put(&f.path, content).map_err(fail)?;
        }
        Ok(shadow)
    }

    /// The shadow's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The git that answers ignore queries from the shadow.
    pub fn git(&self) -> &HostGit {
        &self.git
    }

    /// Whether an attribute file was put ([`IgnoreShadow::put`]): with
    /// none, git reads no attributes at all, and converts nothing.
    pub fn has_attributes(&self) -> bool {
        self.attributes.load(Ordering::Relaxed)
    }

    /// Whether an attribute file put named `working-tree-encoding`, the
    /// one conversion that does not depend on what a file holds.
    pub fn may_reencode(&self) -> bool {
        self.encoding.load(Ordering::Relaxed)
    }

    /// Writes `content` as the ignore or attribute file `rel` (relative to
    /// the work tree), its directories made.
    pub fn put(&self, rel: &[u8], content: &[u8]) -> io::Result<()> {
        let path = self.path(rel)?;
        self.count(content.len() as u64)?;
        if name_of(rel) == ATTRIBUTES_FILE {
            self.attributes.store(true, Ordering::Relaxed);
            if content.windows(ENCODING.len()).any(|w| w == ENCODING) {
                self.encoding.store(true, Ordering::Relaxed);
            }
        }
        if let Some(parent) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)?;
        }
        std::fs::write(path, content)
    }

    /// Removes the ignore or attribute file `rel`, if the shadow has it.
    pub fn remove(&self, rel: &[u8]) -> io::Result<()> {
        match std::fs::remove_file(self.path(rel)?) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    /// Makes `rel` a directory of the shadow (with its parents).
    pub fn make_dir(&self, rel: &[u8]) -> io::Result<()> {
        let path = self.path(rel)?;
        self.count(0)?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path)
    }

    /// Makes sure the shadow has no directory at `rel` (a path the job's
    /// tree has as a file or a link): git then takes it for no directory,
    /// as it takes the job's. A directory of the base left there (made for
    /// its ignore file) goes, with what it holds; a file there (the job's
    /// own ignore file, copied) stays.
    pub fn make_no_dir(&self, rel: &[u8]) -> io::Result<()> {
        let path = self.path(rel)?;
        let gone = match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(&path),
            Ok(_) => return Ok(()),
            Err(e) => Err(e),
        };
        match gone {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    /// Counts one more entry of `bytes` against the shadow's bounds.
    fn count(&self, bytes: u64) -> io::Result<()> {
        let total = self.bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        let entries = self.entries.fetch_add(1, Ordering::Relaxed) + 1;
        if total > MAX_BYTES || entries > MAX_ENTRIES {
            return Err(io::Error::other(format!(
                "more than the {MAX_BYTES} bytes or {MAX_ENTRIES} entries a copy of the \
                 tree's ignore and attribute rules holds"
            )));
        }
        Ok(())
    }

    /// `rel` in the shadow: plain names only (no empty, `.` or `..` part).
    fn path(&self, rel: &[u8]) -> io::Result<PathBuf> {
        if rel
            .split(|b| *b == b'/')
            .any(|part| part.is_empty() || part == b"." || part == b"..")
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "not a plain relative path: {}",
                    String::from_utf8_lossy(rel)
                ),
            ));
        }
        Ok(self.dir.join(OsStr::from_bytes(rel)))
    }
}

impl Drop for IgnoreShadow {
    /// The shadow goes with the staging that made it (a kept workspace's
    /// `meta/` keeps none); a new one replaces whatever a killed staging
    /// left.
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The last part of a `/`-separated path.
fn name_of(path: &[u8]) -> &[u8] {
    path.rsplit(|b| *b == b'/').next().unwrap_or(path)
}

/// The contents of `count` answers of `git cat-file --batch`, each a blob
/// of at most [`MAX_IGNORE_FILE`] bytes (`OBJECT blob SIZE\n`, the
/// content, `\n`).
fn parse_batch(out: &[u8], count: usize) -> Result<Vec<&[u8]>, String> {
    let mut rest = out;
    let mut contents = Vec::with_capacity(count);
    for _ in 0..count {
        let end = rest
            .iter()
            .position(|b| *b == b'\n')
            .ok_or("an answer without its header")?;
        let header = String::from_utf8_lossy(&rest[..end]).into_owned();
        let size = match header.split(' ').collect::<Vec<_>>()[..] {
            [_, "blob", size] => size
                .parse::<u64>()
                .map_err(|_| format!("an answer's size is not a number: {header}"))?,
            _ => return Err(format!("not a blob: {header}")),
        };
        if size > MAX_IGNORE_FILE {
            return Err(format!(
                "an ignore or attribute file of {size} bytes, more than the {MAX_IGNORE_FILE} copied"
            ));
        }
        let size = usize::try_from(size).map_err(|_| "an answer's size".to_string())?;
        let body = &rest[end + 1..];
        if body.len() <= size || body[size] != b'\n' {
            return Err(format!("an answer shorter than its header says: {header}"));
        }
        contents.push(&body[..size]);
        rest = &body[size + 1..];
    }
    Ok(contents)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_read_answer_by_answer_and_refused_when_it_is_not_whole() {
        let out = b"aa blob 3\nx\ny\nbb blob 0\n\n";
        assert_eq!(
            parse_batch(out, 2),
            Ok(vec![b"x\ny".as_slice(), b"".as_slice()])
        );
        assert_eq!(
            parse_batch(b"aa missing\n", 1),
            Err("not a blob: aa missing".to_string())
        );
        assert_eq!(
            parse_batch(b"aa blob 5\nabc\n", 1),
            Err("an answer shorter than its header says: aa blob 5".to_string())
        );
        assert_eq!(
            parse_batch(b"aa blob 2\nab\n", 2),
            Err("an answer without its header".to_string())
        );
    }

    /// An empty shadow in `dir`, its git never run.
    fn shadow_in(dir: &Path) -> IgnoreShadow {
        IgnoreShadow {
            dir: dir.to_path_buf(),
            git: HostGit {
                git_dir: None,
                work_tree: None,
                index: None,
                excludes: None,
                root: dir.to_path_buf(),
                timeout: std::time::Duration::from_secs(1),
                cpu_limit: None,
            },
            bytes: AtomicU64::new(0),
            entries: AtomicUsize::new(0),
            attributes: AtomicBool::new(false),
            encoding: AtomicBool::new(false),
        }
    }

    #[test]
    fn the_shadow_takes_plain_relative_paths_only() {
        let tmp = tempfile::tempdir().unwrap();
        let shadow = shadow_in(tmp.path());
        shadow.put(b"a/b/.gitignore", b"*.o\n").unwrap();
        shadow.make_dir(b"a/c").unwrap();
        let refused: Vec<io::ErrorKind> = [&b"../x"[..], b"a//b", b"./a", b""]
            .iter()
            .map(|rel| shadow.put(rel, b"").unwrap_err().kind())
            .collect();
        shadow.remove(b"a/b/.gitignore").unwrap();
        shadow.remove(b"a/b/.gitignore").unwrap();
        assert_eq!(
            (
                refused,
                tmp.path().join("a/b").is_dir(),
                tmp.path().join("a/b/.gitignore").exists(),
                tmp.path().join("a/c").is_dir()
            ),
            (vec![io::ErrorKind::InvalidInput; 4], true, false, true)
        );
        // Past its bounds it copies nothing more.
        let big = vec![b'#'; MAX_BYTES as usize];
        assert_eq!(
            shadow.put(b"big/.gitignore", &big).unwrap_err().to_string(),
            format!(
                "more than the {MAX_BYTES} bytes or {MAX_ENTRIES} entries a copy of the tree's \
                 ignore and attribute rules holds"
            )
        );
    }

    /// An attribute file put is seen, and one naming the re-encoding
    /// (here in a macro) is seen as such, even once it is removed again
    /// (the index's copy may stand in for it); ignore files are neither.
    #[test]
    fn the_shadow_says_whether_it_holds_attributes_and_which() {
        let tmp = tempfile::tempdir().unwrap();
        let shadow = shadow_in(tmp.path());
        let seen = |s: &IgnoreShadow| (s.has_attributes(), s.may_reencode());
        shadow
            .put(b"a/.gitignore", b"working-tree-encoding\n")
            .unwrap();
        let ignore_only = seen(&shadow);
        shadow.put(b"a/.gitattributes", b"*.txt text\n").unwrap();
        let attributes = seen(&shadow);
        shadow
            .put(
                b".gitattributes",
                b"[attr]utf16 working-tree-encoding=UTF-16\n",
            )
            .unwrap();
        shadow.remove(b".gitattributes").unwrap();
        assert_eq!(
            (ignore_only, attributes, seen(&shadow)),
            ((false, false), (true, false), (true, true))
        );
    }
}

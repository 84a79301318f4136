//! Whether any worktree of a local source stands in the way of the job's
//! new branch, read by Paddock from the source's own files instead of a
//! `git worktree list` process (issue #14: one process fewer on the
//! publish). It answers only "clear", and only where reading git's files
//! is certain to agree with the listing `source_pack.rs` would read:
//! `<source>/.git` a plain directory (not a link, not a `gitdir:` file,
//! no `commondir` file, with `objects` and `refs` directories, so that git
//! finds this directory and no other), no `GIT_DIR`, `GIT_COMMON_DIR`,
//! `GIT_OBJECT_DIRECTORY` or `GIT_NAMESPACE` in Paddock's environment
//! (which its host gits of the source inherit), and each `HEAD` (the
//! main worktree's, then `worktrees/<id>/HEAD` for every entry of the
//! `worktrees` directory) a plain file reading `ref: refs/heads/<name>`,
//! `<name>` a branch name of plain ASCII other than the job's branch,
//! whose own loose ref is absent or a plain object name (so not itself a
//! symbolic ref that git would resolve to the job's branch; a packed ref
//! never is one), and no `reftable` directory (a reftable repository's
//! HEADs are in its tables, whatever its `HEAD` files say). Every file is opened beneath `.git` without following
//! any link (`workspace/beneath.rs`). Anything else (a detached `HEAD`, a
//! worktree on the branch, a reftable repository, whose `HEAD` files read
//! `ref: refs/heads/.invalid`, a link anywhere, an unreadable file) is
//! `Ask`: the caller asks git, as before, so git's own listing decides
//! every case this reading is not sure of, and says why in git's words.

use std::io::{self, Read as _};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;

use rustix::fs::{FileType, OFlags};
use rustix::io::Errno;

use crate::workspace::beneath::{entries_at_most, open_beneath, open_root};

/// The environment that moves git to another repository or namespace
/// than `<source>/.git`'s own files describe.
const REDIRECTING: [&str; 4] = [
    "GIT_DIR",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_NAMESPACE",
];

/// A `HEAD` or loose ref larger than this is not one git wrote.
const SMALL: u64 = 4096;

/// More worktrees than this are left to git's listing.
const MANY: usize = 1024;

/// What [`clear_of`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Heads {
    /// No worktree of the source is on the branch or detached.
    Clear,
    /// Not sure (why, for the trace): git's own listing is to be read.
    Ask(String),
}

/// Whether no worktree of `source` has `wanted` (`refs/heads/…`) checked
/// out, born or not, and none has a detached `HEAD` (module text).
pub fn clear_of(source: &Path, wanted: &str) -> Heads {
    if let Some(var) = REDIRECTING.iter().find(|v| std::env::var_os(v).is_some()) {
        return Heads::Ask(format!("{var} is set"));
    }
    match read_heads(source, wanted) {
        Ok(None) => Heads::Clear,
        Ok(Some(why)) => Heads::Ask(why),
        Err((file, e)) => Heads::Ask(format!("{file}: {e}")),
    }
}

type Read<T> = Result<T, (String, io::Error)>;

fn read_heads(source: &Path, wanted: &str) -> Read<Option<String>> {
    fn at(file: &'static str) -> impl Fn(io::Error) -> (String, io::Error) {
        move |e| (file.to_string(), e)
    }
    let root = open_root(source).map_err(at("the source"))?;
    let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY;
    let git = open_beneath(root.as_fd(), b".git", dir_flags).map_err(at(".git"))?;
    for needed in ["objects", "refs"] {
        open_beneath(git.as_fd(), needed.as_bytes(), dir_flags).map_err(at(needed))?;
    }
    match open_beneath(git.as_fd(), b"commondir", OFlags::RDONLY) {
        Err(e) if e.raw_os_error() == Some(Errno::NOENT.raw_os_error()) => {}
        _ => return Ok(Some("a commondir file".into())),
    }
    // A reftable repository's HEADs are in its tables: git reads no
    // `HEAD` file for them (it writes `ref: refs/heads/.invalid` there,
    // but a tool writing `HEAD` by hand may have left a branch's name).
    match open_beneath(git.as_fd(), b"reftable", OFlags::PATH) {
        Err(e) if e.raw_os_error() == Some(Errno::NOENT.raw_os_error()) => {}
        _ => return Ok(Some("a reftable directory".into())),
    }
    if let Some(why) = head_in_the_way(git.as_fd(), "HEAD", wanted)? {
        return Ok(Some(why));
    }
    let worktrees = match open_beneath(git.as_fd(), b"worktrees", dir_flags) {
        Err(e) if e.raw_os_error() == Some(Errno::NOENT.raw_os_error()) => return Ok(None),
        other => other.map_err(at("worktrees"))?,
    };
    let Some(entries) = entries_at_most(&worktrees, MANY).map_err(at("worktrees"))? else {
        return Ok(Some("more worktrees than Paddock reads".into()));
    };
    for entry in entries {
        let Ok(id) = std::str::from_utf8(&entry.name) else {
            return Ok(Some("a worktree whose name is not UTF-8".into()));
        };
        if entry.file_type != FileType::Directory {
            return Ok(Some(format!("worktrees/{id} is not a directory")));
        }
        if let Some(why) = head_in_the_way(git.as_fd(), &format!("worktrees/{id}/HEAD"), wanted)? {
            return Ok(Some(why));
        }
    }
    Ok(None)
}

/// Why the `HEAD` at `head` (under `git`) may stand in the way of
/// `wanted`, or `None` when it is surely on another branch.
fn head_in_the_way(git: BorrowedFd<'_>, head: &str, wanted: &str) -> Read<Option<String>> {
    let Some(bytes) = small_file(git, head)? else {
        return Ok(Some(format!("{head} is not a small file")));
    };
    let Some(target) = symref_target(&bytes) else {
        return Ok(Some(format!("{head} is not a branch's name")));
    };
    if !plain_branch_name(target) {
        return Ok(Some(format!("{head} names a branch Paddock does not read")));
    }
    if target == wanted {
        return Ok(Some(format!("{head} is on {wanted}")));
    }
    // The branch's own loose ref: absent (packed or unborn) or an object
    // name, not a link or a symbolic ref git would follow further.
    match small_file(git, target) {
        Err((_, e)) if e.raw_os_error() == Some(Errno::NOENT.raw_os_error()) => Ok(None),
        Err(e) => Err(e),
        Ok(Some(bytes)) if is_object_line(&bytes) => Ok(None),
        Ok(_) => Ok(Some(format!("{target} is not an object name"))),
    }
}

/// The file `rel` under `dir`, when it is a regular file of at most
/// [`SMALL`] bytes; `None` when it is something else.
fn small_file(dir: BorrowedFd<'_>, rel: &str) -> Read<Option<Vec<u8>>> {
    let at = |e: io::Error| (rel.to_string(), e);
    let fd = open_beneath(dir, rel.as_bytes(), OFlags::RDONLY).map_err(at)?;
    let stat = rustix::fs::fstat(&fd).map_err(|e| at(e.into()))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(SMALL + 1)
        .read_to_end(&mut bytes)
        .map_err(at)?;
    Ok((bytes.len() as u64 <= SMALL).then_some(bytes))
}

/// `ref: TARGET` as git's files backend reads it (trailing whitespace
/// trimmed, whitespace after `ref:` skipped); `None` for anything else.
fn symref_target(bytes: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(bytes).ok()?;
    let rest = text.trim_end().strip_prefix("ref:")?;
    Some(rest.trim_start())
}

/// `refs/heads/…` whose every component is plain ASCII git accepts in a
/// ref name (letters, digits, `-_+.,=@%` and no component starting with
/// a dot or ending in `.lock`, no `..`, no `@{`): a name that maps to
/// its loose file one to one.
fn plain_branch_name(name: &str) -> bool {
    let Some(branch) = name.strip_prefix("refs/heads/") else {
        return false;
    };
    !branch.contains("..")
        && !branch.contains("@{")
        && branch.split('/').all(|c| {
            !c.is_empty()
                && !c.starts_with('.')
                && !c.ends_with(".lock")
                && !c.ends_with('.')
                && c.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_+.,=@%".contains(&b))
        })
}

/// A loose ref's content: one object name (SHA-1 or SHA-256), then
/// whitespace only.
fn is_object_line(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes)
        .map(|t| {
            let t = t.trim_end();
            (t.len() == 40 || t.len() == 64) && t.bytes().all(|b| b.is_ascii_hexdigit())
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use paddock_test_support::git::{git, repo};

    const WANTED: &str = "refs/heads/paddock/T-1/1";

    /// Git's own listing's verdict (`source_pack.rs`'s reading of `git
    /// worktree list --porcelain -z`): in the way or not.
    fn gits_verdict(source: &Path) -> bool {
        let listing = git(source, &["worktree", "list", "--porcelain", "-z"]);
        super::super::source_pack::worktree_in_the_way(&listing, WANTED).is_some()
    }

    /// Each source as a user may have it, Paddock's reading against
    /// git's: clear only where git's listing finds nothing in the way,
    /// and clear in the common cases (the main worktree on a branch,
    /// packed or loose; other worktrees on other branches, born or not).
    #[test]
    fn clear_only_where_gits_listing_finds_nothing_in_the_way() {
        let cases = [
            "on main",
            "on main, refs packed",
            "a worktree on another branch",
            "a worktree on an unborn other branch",
            "main detached",
            "a worktree detached",
            "a worktree on the branch",
            "a worktree on the branch unborn",
            "main on a branch naming the branch",
            "HEAD a link",
            "a worktree directory a link",
            ".git a file",
            "reftable",
            "reftable on the branch, its HEAD file naming another",
        ];
        let mut seen = Vec::new();
        for case in cases {
            let dir = tempfile::tempdir().unwrap();
            let source = repo(dir.path());
            let other = dir.path().join("other");
            let o = other.to_str().unwrap();
            let mut source_for_git = source.clone();
            match case {
                "on main" => {}
                "on main, refs packed" => {
                    git(&source, &["pack-refs", "--all"]);
                }
                "a worktree on another branch" => {
                    git(&source, &["worktree", "add", "-q", "-b", "other", o]);
                }
                "a worktree on an unborn other branch" => {
                    git(
                        &source,
                        &["worktree", "add", "-q", "--orphan", "-b", "x", o],
                    );
                }
                "main detached" => {
                    git(&source, &["checkout", "-q", "--detach"]);
                }
                "a worktree detached" => {
                    git(&source, &["worktree", "add", "-q", "--detach", o, "main"]);
                }
                "a worktree on the branch" => {
                    git(
                        &source,
                        &["worktree", "add", "-q", "-b", "paddock/T-1/1", o],
                    );
                }
                "a worktree on the branch unborn" => {
                    let b = "paddock/T-1/1";
                    git(&source, &["worktree", "add", "-q", "--orphan", "-b", b, o]);
                }
                "main on a branch naming the branch" => {
                    git(&source, &["branch", "paddock/T-1/1"]);
                    git(&source, &["symbolic-ref", "refs/heads/alias", WANTED]);
                    git(&source, &["symbolic-ref", "HEAD", "refs/heads/alias"]);
                }
                "HEAD a link" => {
                    let head = source.join(".git/HEAD");
                    std::fs::remove_file(&head).unwrap();
                    std::os::unix::fs::symlink("refs/heads/main", &head).unwrap();
                }
                "a worktree directory a link" => {
                    git(&source, &["worktree", "add", "-q", "-b", "other", o]);
                    let wt = source.join(".git/worktrees/other");
                    let moved = dir.path().join("moved");
                    std::fs::rename(&wt, &moved).unwrap();
                    std::os::unix::fs::symlink(&moved, &wt).unwrap();
                }
                ".git a file" => {
                    git(&source, &["worktree", "add", "-q", "-b", "other", o]);
                    source_for_git = other.clone();
                }
                _ => {
                    let r = dir.path().join("rt");
                    let made = std::process::Command::new("git")
                        .args(["init", "-q", "--ref-format=reftable", "-b", "main"])
                        .arg(&r)
                        .status()
                        .unwrap()
                        .success();
                    if !made {
                        eprintln!("note: this git makes no reftable repository");
                        seen.push((case, false, case != "reftable"));
                        continue;
                    }
                    git(&r, &["commit", "-q", "--allow-empty", "-m", "one"]);
                    if case != "reftable" {
                        git(&r, &["checkout", "-q", "-b", "paddock/T-1/1"]);
                        std::fs::write(r.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
                        // The stub older gits stop at, a directory now
                        // (git's reftable backend reads neither).
                        std::fs::remove_file(r.join(".git/refs/heads")).unwrap();
                        std::fs::create_dir(r.join(".git/refs/heads")).unwrap();
                    }
                    source_for_git = r;
                }
            }
            let ours = clear_of(&source_for_git, WANTED) == Heads::Clear;
            seen.push((case, ours, gits_verdict(&source_for_git)));
        }
        // (case, Paddock reads it clear, git's listing finds it in the way)
        let want = [
            ("on main", true, false),
            ("on main, refs packed", true, false),
            ("a worktree on another branch", true, false),
            ("a worktree on an unborn other branch", true, false),
            ("main detached", false, true),
            ("a worktree detached", false, true),
            ("a worktree on the branch", false, true),
            ("a worktree on the branch unborn", false, true),
            ("main on a branch naming the branch", false, true),
            ("HEAD a link", false, false),
            ("a worktree directory a link", false, false),
            (".git a file", false, false),
            ("reftable", false, false),
            (
                "reftable on the branch, its HEAD file naming another",
                false,
                true,
            ),
        ];
        assert_eq!(seen, want);
    }

    /// What a `HEAD` file says, as git's files backend reads it.
    #[test]
    fn a_head_names_a_plain_branch_or_is_left_to_git() {
        assert_eq!(
            [
                &b"ref: refs/heads/main\n"[..],
                b"ref:refs/heads/main",
                b"ref: \trefs/heads/a/b-c_d \n",
                b"ref: refs/heads/.invalid\n",
                b"ref: refs/heads/a..b\n",
                b"ref: refs/heads/a.lock\n",
                b"ref: refs/heads/a b\n",
                b"ref: refs/tags/v1\n",
                b"ref: refs/heads/\xc3\xa9\n",
                b"0123456789012345678901234567890123456789\n",
            ]
            .map(|b| symref_target(b).filter(|t| plain_branch_name(t))),
            [
                Some("refs/heads/main"),
                Some("refs/heads/main"),
                Some("refs/heads/a/b-c_d"),
                None,
                None,
                None,
                None,
                None,
                None,
                None,
            ]
        );
    }
}

//! The job's branch into a local source without `git fetch`, where it can
//! be (issue #14): the bundle's pack indexed into the source by `git
//! index-pack --strict --fix-thin` and the branch created by `git
//! update-ref` with the zero id as its old value (create-only). A fetch
//! of the same bundle starts four processes, and its connectivity check
//! (a `rev-list` of the new objects `--not --all`) walks the base's whole
//! tree: at 10,000 files 87% of the fetch's instructions.
//!
//! Why the walk may go: the bundle's pack is Paddock's `pack-objects
//! --revs <commit> ^<base>` in its own git directory
//! (`workspace/result_branch.rs`), of a commit Paddock wrote
//! (`workspace/commit_object.rs`) on a tree its own `write-tree` made of
//! its own index: the base's entries, and blobs its own git or Paddock
//! itself hashed from bytes Paddock read (`update-index --add`,
//! `hash-object`, `sealed_stage.rs`'s `fast-import` or loose blobs); no
//! object the job wrote is taken as it is. Such a pack holds every object its commit reaches that the
//! base does not, so every object it names outside itself is the base's
//! (a submodule's commit, which no check follows, aside), which the
//! source holds complete: it is the commit the source gave the job.
//! `--strict` checks every object of the pack (git's fsck) and that
//! every object one names exists with the type named (a base the source
//! lost fails here); lazy fetches of a partial clone are off
//! (`GIT_NO_LAZY_FETCH`).
//!
//! Only the common case is taken: a bundle of the job's new objects on a
//! base (a whole history is fetched: it need not pass today's fsck), the
//! base there, its commit not (the branch is made on the pack's own; a
//! publish killed between the pack and the branch is fetched the next
//! time, as `git fetch` finds the objects there), no
//! branch of that name, and no worktree of the source on
//! that branch (an unborn one too) or on a detached `HEAD` (a rebase or
//! bisection in progress names its branch in files `git worktree list`
//! does not read): the worktrees' `HEAD`s read by Paddock where that is
//! sure to agree with git (`worktree_heads.rs`: one process fewer), else
//! `git worktree list` beside the checks' `cat-file`, and again once the
//! branch is made: a checkout of the branch's name, unborn, takes no lock
//! Paddock could hold across the checks and the update (`checkout
//! --orphan` writes only the worktree's `HEAD`), so one made in between
//! has the branch removed again by `update-ref -d` with the job's commit
//! as the expected old value (a commit the user made on it in that instant
//! is left as it is, said in the trace) and the fetch refuses it as
//! checked out. Anything else is left to the fetch
//! (`results/source.rs`), with the source as it was, so its refusals
//! (the branch checked out, a branch the job does not continue, the
//! prerequisite's message `fetch_branch_after` reads) are git's as
//! before, and a branch the job continues is fast-forwarded by it. What
//! the user's configuration says is read as a fetch reads it (the
//! pack's syncs, `core.fsync`); no hook runs (`core.hooksPath=/dev/null`:
//! `update-ref` runs `reference-transaction`). Failures are left to the
//! fetch too, and what they leave is what a fetch leaves: a pack indexed
//! whose branch is then refused (made by someone else between the check
//! and the update) keeps its objects, as git's fetch keeps those of a
//! branch it refuses as not a fast-forward, unreachable until `git gc`
//! prunes them (the fetch after it finds them there and fast-forwards or
//! refuses); an `index-pack` that refuses the job's objects (its fsck, or
//! a check the user's `fetch.fsck.*` settings would have allowed) leaves
//! its `objects/pack/tmp_pack_*` as git's own does when a fetch's
//! `index-pack` refuses them (the fetch after it, refusing too, leaves a
//! second one), removed by `git gc`'s prune once older than
//! `gc.pruneExpire`.

use std::path::Path;

use crate::workspace::{user_git_given, user_git_with, UserGitInput};

/// No hook of the source runs (module text).
const NO_HOOKS: (&str, &str) = ("core.hooksPath", "/dev/null");

/// What [`publish`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Published {
    /// The branch is in the source.
    Done,
    /// Not taken (why, for the trace): the fetch is to be made.
    Left(String),
}

/// Creates `refs/heads/<branch>` in `source` from `bundle` (module text),
/// or says why it left it to the fetch. The caller holds the source's
/// lock.
pub async fn publish(
    job: &str,
    source: &Path,
    bundle: &Path,
    branch: &str,
    git_cpu: std::time::Duration,
) -> Published {
    publish_racing(job, source, bundle, branch, git_cpu, std::future::ready(())).await
}

/// [`publish`] with `meanwhile` awaited between the checks and the
/// branch's creation: what a user of the source may do then (a test's).
async fn publish_racing(
    job: &str,
    source: &Path,
    bundle: &Path,
    branch: &str,
    git_cpu: std::time::Duration,
    meanwhile: impl std::future::Future<Output = ()>,
) -> Published {
    match try_publish(job, source, bundle, branch, git_cpu, meanwhile).await {
        Ok(()) => Published::Done,
        Err(why) => Published::Left(why),
    }
}

async fn try_publish(
    job: &str,
    source: &Path,
    bundle: &Path,
    branch: &str,
    git_cpu: std::time::Duration,
    meanwhile: impl std::future::Future<Output = ()>,
) -> Result<(), String> {
    let opened = super::base_objects::opened(bundle).map_err(|e| format!("the bundle: {e}"))?;
    let wanted = format!("refs/heads/{branch}");
    let tip = match opened.refs.as_slice() {
        [(tip, name)] if *name == wanted && crate::workspace::is_object_name(tip) => tip.clone(),
        _ => return Err("the bundle holds other refs".into()),
    };
    if opened.prerequisites.is_empty() {
        return Err("a whole history".into());
    }
    if !opened
        .prerequisites
        .iter()
        .all(|p| p.len() == tip.len() && crate::workspace::is_object_name(p))
    {
        return Err("a prerequisite is not an object name".into());
    }
    let settings = [(NO_HOOKS.0.to_string(), NO_HOOKS.1.to_string())];
    let no_lazy = [("GIT_NO_LAZY_FETCH", "1")];
    // The base there, the tip and the branch absent: one `cat-file`,
    // each prerequisite's type and whether the others name anything.
    let mut asked = String::new();
    for p in &opened.prerequisites {
        asked.push_str(p);
        asked.push('\n');
    }
    asked.push_str(&tip);
    asked.push('\n');
    asked.push_str(&wanted);
    asked.push('\n');
    let checks = user_git_given(
        source,
        ["cat-file", "--batch-check=%(objectname) %(objecttype)"],
        &settings,
        &no_lazy,
        UserGitInput::Bytes(asked.as_bytes()),
        None,
    );
    // The worktrees read from the source's files where that is sure to
    // agree with git's listing (`worktree_heads.rs`), else listed by git
    // beside the `cat-file`.
    let worktrees = match super::worktree_heads::clear_of(source, &wanted) {
        super::worktree_heads::Heads::Clear => None,
        super::worktree_heads::Heads::Ask(why) => {
            tracing::debug!(job, source = %source.display(), why, "the worktrees listed by git");
            Some(user_git_with(
                source,
                ["worktree", "list", "--porcelain", "-z"],
                &settings,
            ))
        }
    };
    let (checks, worktrees) = match worktrees {
        None => (checks.await, None),
        Some(listed) => {
            let (checks, listed) = tokio::join!(checks, listed);
            (checks, Some(listed))
        }
    };
    let checks = checks.map_err(|e| e.to_string())?;
    let mut lines = checks.lines();
    for p in &opened.prerequisites {
        if lines.next() != Some(format!("{p} commit").as_str()) {
            return Err(format!("the base {p} is not a commit there"));
        }
    }
    // The tip new there, so that the branch is made on the commit of
    // the pack indexed below, whose links `--strict` checks.
    if lines.next() != Some(format!("{tip} missing").as_str()) {
        return Err(format!("the commit {tip} is there already"));
    }
    if lines.next() != Some(format!("{wanted} missing").as_str()) || lines.next().is_some() {
        return Err(format!("{wanted} names an object there"));
    }
    if let Some(listed) = worktrees {
        let listed = listed.map_err(|e| e.to_string())?;
        if let Some(why) = worktree_in_the_way(&listed, &wanted) {
            return Err(why);
        }
    }
    user_git_given(
        source,
        ["index-pack", "--strict", "--fix-thin", "--stdin"],
        &settings,
        &no_lazy,
        UserGitInput::File(opened.pack),
        // The job's objects.
        Some(git_cpu),
    )
    .await
    .map_err(|e| e.to_string())?;
    meanwhile.await;
    let zero = "0".repeat(tip.len());
    let message = format!("paddock: job {job}'s branch");
    user_git_with(
        source,
        [
            "update-ref",
            "--no-deref",
            "-m",
            message.as_str(),
            wanted.as_str(),
            tip.as_str(),
            zero.as_str(),
        ],
        &settings,
    )
    .await
    .map_err(|e| e.to_string())?;
    // A worktree put on the branch (unborn: `checkout --orphan`) after
    // the check above now has it born under its index, as no fetch would
    // leave it; git locks nothing a checkout of an unborn branch takes.
    // Looked for again, it has the branch removed, if it is still the
    // job's commit (the expected old value), and the fetch refuses it.
    let why = match in_the_way(source, &wanted, &settings).await {
        Ok(None) => return Ok(()),
        Ok(Some(why)) => why,
        Err(e) => format!("the worktrees could not be read again ({e})"),
    };
    let undo = format!("paddock: job {job}'s branch taken back");
    match user_git_with(
        source,
        [
            "update-ref",
            "--no-deref",
            "-m",
            undo.as_str(),
            "-d",
            wanted.as_str(),
            tip.as_str(),
        ],
        &settings,
    )
    .await
    {
        Ok(_) => Err(format!("{why} once the branch was made: removed again")),
        Err(e) => Err(format!(
            "{why} once the branch was made, and it moved since: left as it is ({e})"
        )),
    }
}

/// Why a worktree of `source` stands in the way of `wanted`
/// ([`worktree_in_the_way`]), from the worktrees' files where that is
/// sure to agree with git, else from `git worktree list`.
async fn in_the_way(
    source: &Path,
    wanted: &str,
    settings: &[(String, String)],
) -> Result<Option<String>, String> {
    match super::worktree_heads::clear_of(source, wanted) {
        super::worktree_heads::Heads::Clear => Ok(None),
        super::worktree_heads::Heads::Ask(_) => {
            let listed = user_git_with(source, ["worktree", "list", "--porcelain", "-z"], settings)
                .await
                .map_err(|e| e.to_string())?;
            Ok(worktree_in_the_way(&listed, wanted))
        }
    }
}

/// Why `git worktree list --porcelain -z`'s `listing` leaves the branch
/// `wanted` to the fetch: a worktree on it (born or not), or one whose
/// `HEAD` is detached (a rebase or bisection may be under way on it).
pub(super) fn worktree_in_the_way(listing: &str, wanted: &str) -> Option<String> {
    let mut at = "";
    for field in listing.split('\0') {
        if let Some(path) = field.strip_prefix("worktree ") {
            at = path;
        } else if field == "detached" {
            return Some(format!("the worktree {at} has a detached HEAD"));
        } else if field.strip_prefix("branch ") == Some(wanted) {
            return Some(format!("the worktree {at} is on {wanted}"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::workspace::host_git::JOB_GIT_CPU;
    use paddock_test_support::git::{git, repo};
    use std::path::PathBuf;

    const BRANCH: &str = "paddock/T-1/1";

    /// A source with one commit on `main`, a `reference-transaction`
    /// hook that leaves a marker, and a bundle of [`BRANCH`]: one commit
    /// on that base (a file added, one changed), as a job's result is
    /// (`whole`: the branch's whole history instead); the bundle, its tip.
    fn source_and_bundle(dir: &Path, whole: bool) -> (PathBuf, PathBuf, String) {
        let source = repo(dir);
        paddock_test_support::script::write_script(
            &source.join(".git/hooks/reference-transaction"),
            &format!("#!/bin/sh\ntouch '{}/hook-ran'\n", dir.display()),
        );
        let job = dir.join("job");
        git(dir, &["clone", "-q", source.to_str().unwrap(), "job"]);
        git(&job, &["checkout", "-q", "-b", BRANCH]);
        std::fs::write(job.join("hello.txt"), "hello\n").unwrap();
        std::fs::write(job.join("README.md"), "# sample\n\nChanged.\n").unwrap();
        git(&job, &["add", "."]);
        git(&job, &["commit", "-q", "-m", "the job's"]);
        let tip = git(&job, &["rev-parse", "HEAD"]).trim().to_string();
        let bundle = dir.join("branch.bundle");
        let range = if whole {
            BRANCH.to_string()
        } else {
            format!("main..{BRANCH}")
        };
        git(
            &job,
            &["bundle", "create", "-q", bundle.to_str().unwrap(), &range],
        );
        (source, bundle, tip)
    }

    /// Every file under the source's object directory and every ref:
    /// what a publish that did nothing leaves as it was.
    fn objects_and_refs(source: &Path) -> (Vec<String>, String) {
        let mut files = Vec::new();
        let mut dirs = vec![source.join(".git/objects")];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                } else {
                    files.push(p.display().to_string());
                }
            }
        }
        files.sort();
        (files, git(source, &["show-ref"]))
    }

    /// The common case: the branch is created at the bundle's tip without
    /// a fetch (its reflog says Paddock's message, not a fetch's), from
    /// one pack and nothing else left in the source's pack directory,
    /// with no hook run; its objects pass `git fsck`.
    #[tokio::test]
    async fn a_new_branch_on_the_base_is_indexed_and_created() {
        let dir = tempfile::tempdir().unwrap();
        let (source, bundle, tip) = source_and_bundle(dir.path(), false);
        let done = publish("job-1", &source, &bundle, BRANCH, JOB_GIT_CPU).await;
        let mut packs: Vec<String> = std::fs::read_dir(source.join(".git/objects/pack"))
            .unwrap()
            .map(|e| {
                let name = e.unwrap().file_name().to_string_lossy().into_owned();
                match name.rsplit_once('.') {
                    Some((stem, ext)) if stem.starts_with("pack-") => format!("pack-*.{ext}"),
                    _ => name,
                }
            })
            .collect();
        packs.sort();
        let reflog = format!("refs/heads/{BRANCH}");
        assert_eq!(
            (
                done,
                git(&source, &["rev-parse", BRANCH]).trim().to_string(),
                git(&source, &["reflog", "--format=%gs", &reflog]),
                packs,
                git(&source, &["fsck", "--strict", "--no-progress"]),
                dir.path().join("hook-ran").exists(),
            ),
            (
                Published::Done,
                tip,
                "paddock: job job-1's branch\n".to_string(),
                vec![
                    "pack-*.idx".to_string(),
                    "pack-*.pack".to_string(),
                    "pack-*.rev".to_string()
                ],
                String::new(),
                false,
            )
        );
    }

    /// What it does not take is left to the fetch with the source as it
    /// was (no object, no pack, no ref written): a whole history, a
    /// branch that exists, a base the source lacks, a worktree on the
    /// branch unborn, a worktree with a detached `HEAD`, the job's commit
    /// there already (fetched, not as a branch). The fetch then
    /// refuses the unborn worktree's branch as git does.
    #[tokio::test]
    async fn what_it_does_not_take_is_left_as_it_was() {
        let mut seen = Vec::new();
        let mut want = Vec::new();
        for case in [
            "whole",
            "exists",
            "no base",
            "unborn worktree",
            "detached worktree",
            "tip there",
        ] {
            let dir = tempfile::tempdir().unwrap();
            let (source, bundle, tip) = source_and_bundle(dir.path(), case == "whole");
            let base = git(&source, &["rev-parse", "main"]).trim().to_string();
            let other = dir.path().join("other");
            let why = match case {
                "whole" => "a whole history".to_string(),
                "exists" => {
                    git(&source, &["branch", BRANCH, "main"]);
                    format!("refs/heads/{BRANCH} names an object there")
                }
                "no base" => {
                    git(&source, &["commit", "-q", "--amend", "-m", "rewritten"]);
                    git(&source, &["reflog", "expire", "--expire=now", "--all"]);
                    git(&source, &["gc", "-q", "--prune=now"]);
                    format!("the base {base} is not a commit there")
                }
                "unborn worktree" => {
                    let o = other.to_str().unwrap();
                    git(
                        &source,
                        &["worktree", "add", "-q", "--orphan", "-b", BRANCH, o],
                    );
                    format!("the worktree {} is on refs/heads/{BRANCH}", other.display())
                }
                "tip there" => {
                    let job = dir.path().join("job");
                    git(&source, &["fetch", "-q", job.to_str().unwrap(), BRANCH]);
                    format!("the commit {tip} is there already")
                }
                _ => {
                    let o = other.to_str().unwrap();
                    git(&source, &["worktree", "add", "-q", "--detach", o, "main"]);
                    format!("the worktree {} has a detached HEAD", other.display())
                }
            };
            let before = objects_and_refs(&source);
            let left = publish("job-1", &source, &bundle, BRANCH, JOB_GIT_CPU).await;
            seen.push((case, left, objects_and_refs(&source) == before));
            want.push((case, Published::Left(why), true));
            if case == "unborn worktree" {
                let jobs = dir.path().join("jobs");
                let fetched = super::super::source::fetch_branch(
                    "job-1",
                    &source,
                    &bundle,
                    BRANCH,
                    &jobs,
                    JOB_GIT_CPU,
                )
                .await
                .map_err(|e| match e {
                    super::super::source::SourceFetchError::Fetch(
                        crate::workspace::WorkspaceError::Git { stderr, .. },
                    ) => stderr,
                    other => other.to_string(),
                });
                seen.push((case, Published::Left(format!("{fetched:?}")), true));
                want.push((
                    case,
                    Published::Left(format!(
                        "{:?}",
                        Err::<(), String>(format!(
                            "fatal: refusing to fetch into branch 'refs/heads/{BRANCH}' checked \
                             out at '{}'",
                            other.display()
                        ))
                    )),
                    true,
                ));
            }
        }
        assert_eq!(seen, want);
    }

    /// A user who checks the branch's name out unborn (`checkout
    /// --orphan`, in the source's own worktree or a new one) after the
    /// checks and before the branch is made keeps it unborn: the branch is
    /// removed again (its reflog says both), the publish is left to the
    /// fetch, which refuses it as git does. Before, the branch was made
    /// under the user's worktree (born at the job's commit, their index
    /// and files not its tree's): `Published::Done`.
    #[tokio::test]
    async fn a_worktree_put_on_the_branch_during_the_publish_keeps_it_unborn() {
        let mut seen = Vec::new();
        let mut want = Vec::new();
        for case in ["the source's worktree", "a new worktree"] {
            let dir = tempfile::tempdir().unwrap();
            let (source, bundle, _) = source_and_bundle(dir.path(), false);
            let other = dir.path().join("other");
            let (at, on) = match case {
                "a new worktree" => (other.clone(), other.clone()),
                _ => (source.clone(), source.clone()),
            };
            let racing = async {
                match case {
                    "a new worktree" => {
                        let o = other.to_str().unwrap();
                        git(
                            &source,
                            &["worktree", "add", "-q", "--orphan", "-b", BRANCH, o],
                        );
                    }
                    _ => {
                        git(&source, &["checkout", "-q", "--orphan", BRANCH]);
                    }
                }
            };
            let left = publish_racing("job-1", &source, &bundle, BRANCH, JOB_GIT_CPU, racing).await;
            let wanted = format!("refs/heads/{BRANCH}");
            let born = std::process::Command::new("git")
                .args(["rev-parse", "--verify", "--quiet", &wanted])
                .current_dir(&source)
                .output()
                .unwrap()
                .status
                .success();
            seen.push((
                case,
                left,
                born,
                git(&on, &["symbolic-ref", "HEAD"]).trim().to_string(),
            ));
            want.push((
                case,
                Published::Left(format!(
                    "the worktree {} is on {wanted} once the branch was made: removed again",
                    at.display()
                )),
                false,
                wanted.clone(),
            ));
        }
        assert_eq!(seen, want);
    }

    /// A worktree listing's fields: the branch's own worktree and a
    /// detached one stand in the way, others do not.
    #[test]
    fn a_worktree_on_the_branch_or_detached_stands_in_the_way() {
        let wanted = "refs/heads/paddock/T-1/1";
        let listing = |fields: &[&str]| fields.join("\0") + "\0";
        assert_eq!(
            [
                listing(&["worktree /a", "HEAD 1234", "branch refs/heads/main", ""]),
                listing(&[
                    "worktree /a",
                    "bare",
                    "",
                    "worktree /b",
                    "HEAD 1",
                    "detached",
                    ""
                ]),
                listing(&[
                    "worktree /a",
                    "HEAD 0",
                    "branch refs/heads/paddock/T-1/1",
                    ""
                ]),
                listing(&[
                    "worktree /a",
                    "HEAD 0",
                    "branch refs/heads/paddock/T-1/10",
                    ""
                ]),
            ]
            .map(|l| worktree_in_the_way(&l, wanted)),
            [
                None,
                Some("the worktree /b has a detached HEAD".to_string()),
                Some("the worktree /a is on refs/heads/paddock/T-1/1".to_string()),
                None,
            ]
        );
    }
}

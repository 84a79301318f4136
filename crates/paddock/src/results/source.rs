//! The branch into the user's local source repository: fetched from the
//! job's bundle as `refs/heads/<branch>` and nothing else, so the user's
//! working tree, index, current branch and configuration stay as they
//! were (a fetch writes objects and that one ref; `FETCH_HEAD` is not
//! written; git itself refuses to update the branch checked out). Run with
//! the user's own git configuration (`workspace::user_git`): it is their
//! repository, and nothing of the job is read but the bundle Paddock
//! wrote. A branch that already exists is only fast-forwarded, never
//! rewritten.

use std::path::Path;

use crate::workspace::{user_git, WorkspaceError};

/// Fetches `branch` from `bundle` into `source` as `refs/heads/<branch>`.
pub async fn fetch_branch(
    source: &Path,
    bundle: &Path,
    branch: &str,
) -> Result<(), WorkspaceError> {
    let refspec = format!("refs/heads/{branch}:refs/heads/{branch}");
    // The job's new objects on the base (the bundle's prerequisite) are
    // checked as they are indexed; a whole history is the user's own,
    // which need not pass today's fsck (their own setting stands). The
    // fetch verifies the bundle.
    let thin = super::base_objects::prerequisites(bundle)
        .map(|p| !p.is_empty())
        .map_err(|e| WorkspaceError::Read {
            path: source.to_path_buf(),
            file: bundle.display().to_string(),
            source: e,
        })?;
    let bundle = bundle.to_string_lossy().into_owned();
    let mut args = Vec::new();
    if thin {
        args.extend(["-c", "fetch.fsckObjects=true"]);
    }
    args.extend([
        "fetch",
        "--quiet",
        "--no-write-fetch-head",
        "--no-tags",
        "--no-recurse-submodules",
        "--no-auto-gc",
        "--",
        bundle.as_str(),
        refspec.as_str(),
    ]);
    user_git(source, args).await.map(|_| ())
}

/// The source's uncommitted changes (`git status --porcelain` entries),
/// read without writing its index: the job ran on the committed base, not
/// on these.
pub async fn uncommitted(source: &Path) -> Result<Vec<String>, WorkspaceError> {
    let out = user_git(
        source,
        ["status", "--porcelain", "-z", "--untracked-files=normal"],
    )
    .await?;
    Ok(out
        .split('\0')
        .filter(|r| !r.is_empty())
        .map(str::to_string)
        .collect())
}

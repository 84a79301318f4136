//! The branch of the attempt a job follows (`paddock run --attempt-after`,
//! resumed on its branch), when the source does not have it: a URL source
//! whose result was never pushed (no forge, or its push failed), a local
//! source the branch was deleted from, or one a cancelled job's branch
//! never went into (`results::into_source_at_end`). The prior job kept its
//! branch as a bundle in its artifacts (`<artifacts>/<job>/branch.bundle`,
//! `result_branch.rs`); it is fetched from there into this job's own bare
//! git directory (a clone's `meta/git`), never into a shared cache: a URL's
//! mirror and the snapshots are shared by every job of the source, and a
//! job's objects reach no other job that way. A workspace on such a base
//! is a clone, not an overlay (whose snapshot is made from the mirror).
//!
//! A bundle holds only its job's new objects when the source kept the
//! job's base, which may be an earlier attempt's branch: a source that
//! lost that one as well (its branches deleted and pruned) cannot give
//! the bundle's prerequisites. Then the earlier attempts' bundles are
//! fetched first, oldest first, objects only (no ref), and the branch's
//! own again.
//!
//! The bundle's objects are a job's, so the fetch checks them as a fetch
//! from any remote is checked (`transfer.fsckObjects`), runs with
//! Paddock's git settings (no hook, no protocol but `file`) and takes only
//! the branch's one ref.

use std::path::{Path, PathBuf};

use super::host_git::{HostGit, GIT_TIMEOUT};
use super::WorkspaceError;

/// The prior attempt's branch and the bundle that keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriorBranch {
    /// `paddock/<ticket>/<attempt>`: the job's `repository.base_ref`.
    pub name: String,
    /// The prior job's `branch.bundle`.
    pub bundle: PathBuf,
    /// The earlier attempts' branches this one is built on, nearest
    /// first (`session::branch_chain`), for the prerequisites of a bundle
    /// holding only its job's new objects.
    pub earlier: Vec<PriorBranch>,
    /// The CPU each git fetching it may use (`host_git::job_git_cpu`;
    /// an earlier attempt's is fetched by the later one's gits).
    pub git_cpu: std::time::Duration,
}

impl PriorBranch {
    /// Whether `err` is the source lacking this branch (the case this
    /// bundle answers).
    pub(super) fn answers(&self, err: &WorkspaceError) -> bool {
        matches!(err, WorkspaceError::BaseRef { base_ref, .. } if *base_ref == self.name)
    }

    /// Fetches the branch from the bundle into the bare git directory
    /// `git_dir` of the job directory `root`, as `refs/heads/<name>`.
    pub(super) async fn fetch_into(
        &self,
        root: &Path,
        git_dir: &Path,
    ) -> Result<(), WorkspaceError> {
        let failed = |why: String| WorkspaceError::PriorBundle {
            bundle: self.bundle.clone(),
            branch: self.name.clone(),
            why,
        };
        if !is_plain_branch(&self.name) {
            return Err(failed("it is not a plain branch name".into()));
        }
        let git = HostGit {
            git_dir: Some(git_dir.to_path_buf()),
            work_tree: None,
            index: None,
            excludes: None,
            root: root.to_path_buf(),
            timeout: GIT_TIMEOUT,
            // A prior job's objects.
            cpu_limit: Some(self.git_cpu),
        };
        let refspec = format!("refs/heads/{0}:refs/heads/{0}", self.name);
        let first = match self.fetch(&git, refspec.clone()).await? {
            Ok(()) => return Ok(()),
            Err(why) => why,
        };
        if self.earlier.is_empty() {
            return Err(failed(first));
        }
        // Its prerequisites from the earlier attempts' bundles, oldest
        // first, objects only; then the branch again.
        let mut notes = Vec::new();
        for earlier in self.earlier.iter().rev() {
            if !is_plain_branch(&earlier.name) {
                continue;
            }
            let from = format!("refs/heads/{}", earlier.name);
            if let Err(why) = earlier.fetch(&git, from).await? {
                notes.push(format!("{}: {why}", earlier.bundle.display()));
            }
        }
        match self.fetch(&git, refspec).await? {
            Ok(()) => Ok(()),
            Err(why) => Err(failed(format!(
                "{why} (the earlier attempts' bundles {} were fetched first{})",
                self.earlier
                    .iter()
                    .map(|e| e.bundle.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                if notes.is_empty() {
                    String::new()
                } else {
                    format!("; {}", notes.join("; "))
                }
            ))),
        }
    }

    /// One fetch of `refspec` from this bundle: `Err` with git's message
    /// when git refused it.
    async fn fetch(
        &self,
        git: &HostGit,
        refspec: String,
    ) -> Result<Result<(), String>, WorkspaceError> {
        if !std::fs::symlink_metadata(&self.bundle).is_ok_and(|m| m.file_type().is_file()) {
            return Ok(Err("it is missing or not a regular file".into()));
        }
        let mut args: Vec<std::ffi::OsString> = [
            "-c",
            "transfer.fsckObjects=true",
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--no-recurse-submodules",
            "--",
        ]
        .iter()
        .map(Into::into)
        .collect();
        args.push(self.bundle.clone().into_os_string());
        args.push(refspec.into());
        let (status, _, stderr) = git.status(&args, None).await?;
        Ok(if status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&stderr).trim().to_string())
        })
    }
}

/// True for a branch name git takes that cannot be read as more than one
/// ref (no refspec syntax: `:`, `*`, `+`, `^`, whitespace, a leading `-`).
fn is_plain_branch(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(['-', '+', '/'])
        && !name
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || ":*^~?[\\".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_branch_names_are_taken() {
        let names = [
            "paddock/HELLO-1/1",
            "paddock/a.b_c/12",
            "",
            "-x",
            "+refs/heads/a",
            "a:b",
            "a*",
            "a b",
            "a^",
            "/a",
        ];
        assert_eq!(
            names.map(is_plain_branch),
            [true, true, false, false, false, false, false, false, false, false]
        );
    }
}

//! The job's result as a branch: one commit of the patch's tree on the base
//! commit, made in Paddock's own git directory (`meta/git`) with Paddock's
//! identity and a message Paddock writes, on `paddock/<ticket>/<attempt>`,
//! and saved as a git bundle beside the patch, so the branch outlives the
//! workspace (`paddock publish` and `paddock apply` read it later). Nothing
//! of the job's own repository (its commits, refs, messages, config) is
//! read: the host never runs git on what the job wrote.

use std::path::Path;

use super::{Patch, Workspace, WorkspaceError};

/// The commit's author and committer.
const IDENTITY: [&str; 4] = [
    "-c",
    "user.name=Paddock",
    "-c",
    "user.email=paddock@localhost",
];

impl Workspace {
    /// Commits `patch`'s tree on the base commit with `message` and points
    /// `refs/heads/<branch>` of Paddock's git directory at it; the commit.
    pub async fn commit_result(
        &self,
        patch: &Patch,
        message: &str,
    ) -> Result<String, WorkspaceError> {
        let git = self.paddock_git(None, false);
        let mut args: Vec<&str> = IDENTITY.to_vec();
        args.extend([
            "commit-tree",
            &patch.tree,
            "-p",
            &self.base_commit,
            "-F",
            "-",
        ]);
        let commit = git.run(&args, Some(message.as_bytes())).await?;
        let commit = String::from_utf8_lossy(&commit).trim().to_string();
        let head = format!("refs/heads/{}", self.branch);
        git.run(["update-ref", "--no-deref", &head, &commit], None)
            .await?;
        Ok(commit)
    }

    /// Writes the branch as a git bundle at `dest`, with its whole
    /// history: a bundle with the base as a prerequisite could only be
    /// fetched into a repository that has the base, and `paddock publish`
    /// pushes from a scratch repository that has nothing.
    pub async fn bundle_result(&self, dest: &Path) -> Result<(), WorkspaceError> {
        let git = self.paddock_git(None, false);
        let head = format!("refs/heads/{}", self.branch);
        let dest = dest.to_string_lossy();
        git.run(["bundle", "create", "--quiet", &dest, &head], None)
            .await
            .map(|_| ())
    }
}

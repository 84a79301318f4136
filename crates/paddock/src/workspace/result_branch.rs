//! The job's result as a branch: one commit of the patch's tree on the base
//! commit, made in Paddock's own git directory (`meta/git`) with Paddock's
//! identity and a message Paddock writes, on `paddock/<ticket>/<attempt>`,
//! and saved as a git bundle beside the patch, so the branch outlives the
//! workspace (`paddock publish` and `paddock apply` read it later): the
//! job's new objects only, on the base as the bundle's prerequisite, or
//! the whole history when nothing on the host keeps the base. Nothing
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

    /// Writes the branch as a git bundle at `dest`: by default only the
    /// job's new objects, with the base commit as the bundle's
    /// prerequisite (`git bundle create dest base..branch`), which can be
    /// fetched only into a repository that has the base (the local source,
    /// a push's scratch repository borrowing the source's or its mirror's
    /// objects: `results/base_objects.rs`); with `whole`, the branch's
    /// whole history, which needs nothing.
    pub async fn bundle_result(&self, dest: &Path, whole: bool) -> Result<(), WorkspaceError> {
        let git = self.paddock_git(None, false);
        let head = format!("refs/heads/{}", self.branch);
        let not_base = format!("^{}", self.base_commit);
        let dest = dest.to_string_lossy();
        let mut args = vec!["bundle", "create", "--quiet", &dest, &head];
        if !whole {
            args.push(&not_base);
        }
        git.run(&args, None).await.map(|_| ())
    }
}

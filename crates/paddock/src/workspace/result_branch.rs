//! The job's result as a branch: one commit of the patch's tree on the base
//! commit, made in Paddock's own git directory (`meta/git`) with Paddock's
//! identity and a message Paddock writes, and saved as a git bundle beside
//! the patch naming it `paddock/<ticket>/<attempt>`, so the branch outlives the
//! workspace (`paddock publish` and `paddock apply` read it later): the
//! job's new objects only, on the base as the bundle's prerequisite, or
//! the whole history when nothing on the host keeps the base. Nothing
//! of the job's own repository (its commits, refs, messages, config) is
//! read: the host never runs git on what the job wrote.

use std::path::Path;

use super::{Workspace, WorkspaceError};

impl Workspace {
    /// Commits the tree `tree` (a patch's) on the base commit with
    /// `message`, dated now; the commit. Written by Paddock itself
    /// (`commit_object.rs`: the object `git commit-tree` would write, one
    /// process fewer on the job's end). No ref names it in Paddock's git
    /// directory: the branch is the bundle's ([`Workspace::bundle_result`]).
    pub async fn commit_result(&self, tree: &str, message: &str) -> Result<String, WorkspaceError> {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        super::commit_object::write_commit(
            &self.git_dir(),
            tree,
            &self.base_commit,
            message,
            now,
            super::commit_object::local_offset_secs(),
        )
        .map_err(|source| WorkspaceError::Commit {
            path: self.root.clone(),
            source,
        })
    }

    /// Writes `commit` as the branch `refs/heads/<branch>` in a git bundle
    /// at `dest` (created new): by default only the job's new objects,
    /// with the base commit as the bundle's prerequisite (what `git bundle
    /// create dest branch ^base` makes), which can be fetched only into a
    /// repository that has the base (the local source, a push's scratch
    /// repository borrowing the source's or its mirror's objects:
    /// `results/base_objects.rs`); with `whole`, the branch's whole
    /// history, which needs nothing. The header is written here (the
    /// bundle format's: its version, the prerequisite, the ref) and the
    /// pack by one `git pack-objects`, where `git bundle create` needs the
    /// branch as a ref first (`update-ref`) and starts `pack-objects`
    /// itself: two processes fewer, one after another, on the job's end.
    pub async fn bundle_result(
        &self,
        commit: &str,
        dest: &Path,
        whole: bool,
    ) -> Result<(), WorkspaceError> {
        let header = bundle_header(commit, (!whole).then_some(&*self.base_commit), &self.branch);
        let failed = |source| WorkspaceError::Write {
            path: self.root.clone(),
            file: dest.display().to_string(),
            source,
        };
        let mut file = std::fs::File::options()
            .write(true)
            .create_new(true)
            .open(dest)
            .map_err(failed)?;
        std::io::Write::write_all(&mut file, header.as_bytes()).map_err(failed)?;
        let mut revs = format!("{commit}\n");
        if !whole {
            revs.push_str(&format!("^{}\n", self.base_commit));
        }
        let args = [
            "pack-objects",
            "--stdout",
            "--thin",
            "--delta-base-offset",
            "--revs",
            "-q",
        ];
        let packed = self
            .paddock_git(None, false)
            .run_into(args, Some(revs.as_bytes()), file)
            .await;
        if packed.is_err() {
            let _ = std::fs::remove_file(dest);
        }
        packed
    }
}

/// A bundle's header (gitformat-bundle): version 2 for SHA-1 names, 3
/// with the object format for SHA-256 ones; the prerequisite `base`, if
/// any; `commit` as `refs/heads/<branch>`; the blank line before the pack.
fn bundle_header(commit: &str, base: Option<&str>, branch: &str) -> String {
    let mut header = match commit.len() {
        64 => "# v3 git bundle\n@object-format=sha256\n".to_string(),
        _ => "# v2 git bundle\n".to_string(),
    };
    if let Some(base) = base {
        header.push_str(&format!("-{base}\n"));
    }
    header.push_str(&format!("{commit} refs/heads/{branch}\n\n"));
    header
}

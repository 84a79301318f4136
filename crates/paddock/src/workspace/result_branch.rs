//! The job's result as a branch: one commit of the patch's tree on the base
//! commit, made in Paddock's own git directory (`meta/git`) with Paddock's
//! identity and a message Paddock writes, and saved as a git bundle beside
//! the patch naming it `paddock/<ticket>/<attempt>`, so the branch outlives the
//! workspace (`paddock publish` and `paddock apply` read it later): the
//! job's new objects only, on the base as the bundle's prerequisite, or
//! the whole history when nothing on the host keeps the base. Nothing
//! of the job's own repository (its commits, refs, messages, config) is
//! read: the host never runs git on what the job wrote. A whole history's
//! bundle is kept only when the job's new objects pass git's check of a
//! fetch (`new_objects.rs`): no fetch of it checks them.

use std::path::Path;

/// The branch's bundle's file name, in the job's artifacts directory.
pub const BUNDLE: &str = "branch.bundle";

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
        self.start_bundle(dest, whole)?.finish(commit).await
    }

    /// [`Workspace::bundle_result`] begun before the commit exists: `dest`
    /// created with room for the header, and `pack-objects` started
    /// (reading the commit to pack from its stdin, which
    /// [`StartedBundle::finish`] writes), so that its start-up runs beside
    /// the patch's staging instead of after the commit (issue #14). git
    /// reads every object only once it is given the commit. `dest` is
    /// removed when the bundle is not finished.
    pub fn start_bundle(&self, dest: &Path, whole: bool) -> Result<StartedBundle, WorkspaceError> {
        let failed = |source| WorkspaceError::Write {
            path: self.root.clone(),
            file: dest.display().to_string(),
            source,
        };
        let base = (!whole).then(|| self.base_commit.clone());
        // The header's length is known before the commit: its name is as
        // long as the base's (one object format).
        let placeholder = bundle_header(&self.base_commit, base.as_deref(), &self.branch);
        let mut file = std::fs::File::options()
            .write(true)
            .create_new(true)
            .open(dest)
            .map_err(failed)?;
        let guard = RemoveUnlessDone {
            path: dest.to_path_buf(),
            done: false,
        };
        std::io::Write::write_all(&mut file, placeholder.as_bytes()).map_err(failed)?;
        let args = [
            "pack-objects",
            "--stdout",
            "--thin",
            "--delta-base-offset",
            "--revs",
            "-q",
        ];
        let out = file.try_clone().map_err(failed)?;
        let started = self.paddock_git(None, false).start_into(args, out)?;
        Ok(StartedBundle {
            file,
            started,
            base,
            checked_on: whole.then(|| NewObjects {
                git: self.paddock_git(None, false),
                meta: self.meta.clone(),
                base: self.base_commit.clone(),
            }),
            branch: self.branch.clone(),
            root: self.root.clone(),
            guard,
        })
    }
}

/// A bundle of [`Workspace::start_bundle`]: its file and its
/// `pack-objects`, waiting for the commit.
pub struct StartedBundle {
    file: std::fs::File,
    started: super::host_git::Started,
    base: Option<String>,
    /// A whole history's: where the job's new objects are checked
    /// (`new_objects.rs`), which no fetch of it checks.
    checked_on: Option<NewObjects>,
    branch: String,
    root: std::path::PathBuf,
    guard: RemoveUnlessDone,
}

/// What [`super::new_objects::check`] needs of the workspace.
struct NewObjects {
    git: super::host_git::HostGit,
    meta: std::path::PathBuf,
    base: String,
}

impl StartedBundle {
    /// Packs `commit` (and, with a prerequisite, only what the base lacks)
    /// after the header naming it: the bundle, complete.
    pub async fn finish(mut self, commit: &str) -> Result<(), WorkspaceError> {
        let failed = |source| WorkspaceError::Write {
            path: self.root.clone(),
            file: self.guard.path.display().to_string(),
            source,
        };
        let header = bundle_header(commit, self.base.as_deref(), &self.branch);
        std::os::unix::fs::FileExt::write_all_at(&self.file, header.as_bytes(), 0)
            .map_err(failed)?;
        let mut revs = format!("{commit}\n");
        if let Some(base) = &self.base {
            revs.push_str(&format!("^{base}\n"));
        }
        // The job's new objects checked beside the pack's writing.
        let checked = async {
            match &self.checked_on {
                Some(on) => super::new_objects::check(&on.git, &on.meta, commit, &on.base).await,
                None => Ok(()),
            }
        };
        let (packed, checked) = tokio::join!(self.started.finish(revs.as_bytes()), checked);
        checked?;
        let (status, _, stderr) = packed?;
        if !status.success() {
            return Err(WorkspaceError::Git {
                path: self.root.clone(),
                args: "pack-objects --stdout --thin --delta-base-offset --revs -q".to_string(),
                stderr: String::from_utf8_lossy(&stderr).trim().to_string(),
            });
        }
        self.guard.done = true;
        Ok(())
    }
}

/// A bundle file removed when dropped before it was finished.
struct RemoveUnlessDone {
    path: std::path::PathBuf,
    done: bool,
}

impl Drop for RemoveUnlessDone {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.path);
        }
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

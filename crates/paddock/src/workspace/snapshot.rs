//! The read-only snapshot of a base commit that overlay workspaces share
//! (`overlay.rs`): `<jobs>/.snapshots/<commit>-<source key>/` holds `git`
//! (Paddock's bare clone of the source, hard-linked, as a clone workspace's
//! `meta/git` is) and `tree` (the job's repository as a clone workspace's
//! `work/` is: its own copy of every object, hooks off, the source as its
//! remote, checked out detached at the commit, its index with the stat
//! stamps of these files). It is made once per source and commit, under a
//! temporary name then renamed into place, so a job never sees a half-made
//! one and two jobs making it at once both end up with a whole one. Jobs
//! only ever see it as an overlay's lower layer, never writable; nothing
//! changes it once it is in place. A job takes `<name>.lock` shared while
//! it gets the snapshot and until its `meta/overlay` names it, and stamps
//! the snapshot as used (its modification time): what pruning
//! (`prune.rs`) reads.

use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use sha2::{Digest as _, Sha256};

use super::{Workspace, WorkspaceError};

/// Where the snapshots live, under the jobs directory.
pub(super) const SNAPSHOTS: &str = ".snapshots";

/// One base commit's snapshot.
#[derive(Debug, Clone)]
pub(super) struct Snapshot {
    pub dir: PathBuf,
    /// Its lock, held shared while this value lives (none for one being
    /// made under a temporary name).
    _in_use: Option<std::sync::Arc<Flock<std::fs::File>>>,
}

impl Snapshot {
    /// Paddock's bare clone of the source.
    pub fn git(&self) -> PathBuf {
        self.dir.join("git")
    }

    /// The checkout at the commit, with the job's `.git`: the lower layer.
    pub fn tree(&self) -> PathBuf {
        self.dir.join("tree")
    }

    /// The snapshot of `commit` of `source` under `jobs_root`, made when
    /// there is none yet.
    pub async fn get_or_make(
        jobs_root: &Path,
        source: &str,
        commit: &str,
    ) -> Result<Snapshot, WorkspaceError> {
        let root = jobs_root.join(SNAPSHOTS);
        let key = hex::encode(&Sha256::digest(source.as_bytes())[..8]);
        let create = |path: &Path| {
            let path = path.to_path_buf();
            move |source| WorkspaceError::Create { path, source }
        };
        std::fs::create_dir_all(&root).map_err(create(&root))?;
        // The source's files: private, as every job directory is.
        super::set_private(&root);
        let name = format!("{commit}-{key}");
        let lock_path = root.join(format!("{name}.lock"));
        let in_use = super::lease::lock_file(&lock_path, FlockArg::LockShared)
            .await
            .map_err(create(&lock_path))?;
        let snap = Snapshot {
            dir: root.join(name),
            _in_use: Some(std::sync::Arc::new(in_use)),
        };
        if snap.tree().is_dir() {
            super::prune::stamp(&snap.dir);
            return Ok(snap);
        }
        let nonce = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let tmp = Snapshot {
            dir: root.join(format!(
                ".tmp-{commit}-{key}-{}-{nonce}",
                std::process::id()
            )),
            _in_use: None,
        };
        std::fs::create_dir(&tmp.dir).map_err(create(&tmp.dir))?;
        let made = tmp.make(source, commit).await;
        let placed = made.and_then(|()| {
            match std::fs::rename(&tmp.dir, &snap.dir) {
                Ok(()) => Ok(()),
                // Another job placed it first: theirs is as good.
                Err(_) if snap.tree().is_dir() => Ok(()),
                Err(source) => Err(WorkspaceError::Create {
                    path: snap.dir.clone(),
                    source,
                }),
            }
        });
        if tmp.dir.exists() {
            let _ = std::fs::remove_dir_all(&tmp.dir);
        }
        placed.map(|()| snap)
    }

    /// Fills this (temporary) snapshot directory.
    async fn make(&self, source: &str, commit: &str) -> Result<(), WorkspaceError> {
        Workspace::clone_bare(&self.dir, source, &self.git()).await?;
        let checkout = ["checkout", "--quiet", "--detach", commit];
        Workspace::clone_job(&self.dir, source, &self.git(), &self.tree(), &checkout).await?;
        let index = self.git().join("index");
        std::fs::copy(self.tree().join(".git/index"), &index).map_err(|source| {
            WorkspaceError::Write {
                path: self.dir.clone(),
                file: index.display().to_string(),
                source,
            }
        })?;
        Ok(())
    }
}

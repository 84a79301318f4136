//! The read-only snapshot of a base commit that overlay workspaces share
//! (`overlay.rs`): `<jobs>/.snapshots/<commit>-<source key>/` holds `git`
//! (Paddock's bare clone of the source, hard-linked, as a clone workspace's
//! `meta/git` is; for a URL, of its bare mirror, `mirror.rs`; the key a
//! hash of the kind of source and its path or URL, so a path and a URL, or
//! two URLs, never share one) and `tree` (the job's repository as a clone workspace's
//! `work/` is: its own copy of every object, hooks off, the source as its
//! remote, checked out detached at the commit, its index with the stat
//! stamps of these files, written again in a later second than any of
//! them: [`settle_index`]). It is made once per source and commit, under a
//! temporary name then renamed into place, so a job never sees a half-made
//! one and two jobs making it at once both end up with a whole one. Jobs
//! only ever see it as an overlay's lower layer, never writable; nothing
//! changes it once it is in place. A job takes `<name>.lock` shared while
//! it gets the snapshot and until its `meta/overlay` names it, and stamps
//! the snapshot as used (its modification time): what pruning
//! (`prune.rs`) reads.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nix::fcntl::{Flock, FlockArg};
use sha2::{Digest as _, Sha256};

use super::host_git::{self, HostGit};
use super::{CheckoutBound, Workspace, WorkspaceError};

/// Where the snapshots live, under the jobs directory.
pub const SNAPSHOTS: &str = ".snapshots";

/// One base commit's snapshot.
#[derive(Debug, Clone)]
pub(super) struct Snapshot {
    pub dir: PathBuf,
    /// Its lock, held shared while this value lives (none for one being
    /// made under a temporary name).
    _in_use: Option<std::sync::Arc<Flock<std::fs::File>>>,
}

/// What a snapshot is made of.
#[derive(Debug, Clone, Copy)]
pub(super) enum Source<'a> {
    /// A local repository, by its path.
    Path(&'a str),
    /// A URL (the job repository's `origin`), cloned from its `mirror`.
    Url { url: &'a str, mirror: &'a str },
}

impl Source<'_> {
    /// The snapshot's key: a hash of the kind of source and its name.
    fn key(&self) -> String {
        let (kind, name) = match self {
            Source::Path(p) => ("path", *p),
            Source::Url { url, .. } => ("url", *url),
        };
        let mut h = Sha256::new();
        h.update(kind.as_bytes());
        h.update([0]);
        h.update(name.as_bytes());
        hex::encode(&h.finalize()[..16])
    }
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

    /// The snapshot of `commit` of `source` under `jobs_root`, made from
    /// `from` (the source itself, or a URL's mirror) when there is none
    /// yet, each git on the commit's content held to `cpu` of CPU (its
    /// attribute rules are the repository's, as hostile as a job's:
    /// `Workspace::clone_job`).
    pub async fn get_or_make(
        jobs_root: &Path,
        source: &Source<'_>,
        commit: &str,
        (cpu, bound): (Duration, CheckoutBound),
    ) -> Result<Snapshot, WorkspaceError> {
        let root = jobs_root.join(SNAPSHOTS);
        let key = source.key();
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
        let made = tmp.make(source, commit, cpu, bound).await;
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
    async fn make(
        &self,
        source: &Source<'_>,
        commit: &str,
        cpu: Duration,
        bound: CheckoutBound,
    ) -> Result<(), WorkspaceError> {
        let (name, from) = match source {
            Source::Path(p) => (*p, *p),
            Source::Url { url, mirror } => (*url, *mirror),
        };
        Workspace::clone_bare(&self.dir, from, &self.git()).await?;
        let checkout = ["checkout", "--quiet", "--detach", commit];
        let (git, tree, checkout) = (self.git(), self.tree(), (&checkout[..], commit));
        Workspace::clone_job(&self.dir, name, &git, &tree, checkout, cpu, bound).await?;
        settle_index(&self.dir, &self.tree(), cpu).await?;
        let index = self.git().join("index");
        super::copy_index(&self.tree().join(".git/index"), &index).map_err(|source| {
            WorkspaceError::Write {
                path: self.dir.clone(),
                file: index.display().to_string(),
                source,
            }
        })?;
        Ok(())
    }
}

/// Writes the checkout's index (`tree/.git/index`) again once the clock
/// is in a later second than the one it was written in, so that none of
/// its entries is racily clean. Git (built without nanosecond stamps, as
/// it is by default) takes an entry whose file was modified in the same
/// second as the index, or later, as possibly changed behind a matching
/// stat, and every git that writes an index copied from this one (the
/// patch's `update-index` and `write-tree`, the job's own `git status`)
/// reads and hashes each such file again: the whole base when its checkout
/// took less than a second, ≈ 0.3 s per write at 10,000 files. The write
/// itself compares those files' content once (nothing has changed them:
/// the tree is private until it is renamed into place) and stamps the
/// index with the new second. The protection stays whole: a file a job
/// changes later gets a new `ctime`, which git compares (`core.trustctime`),
/// and one changed in the index's own second is racy again, as git wants.
async fn settle_index(root: &Path, tree: &Path, cpu: Duration) -> Result<(), WorkspaceError> {
    let index = tree.join(".git/index");
    let written = std::fs::metadata(&index)
        .and_then(|m| m.modified())
        .map_err(|source| WorkspaceError::Read {
            path: root.to_path_buf(),
            file: index.display().to_string(),
            source,
        })?;
    let second = written
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    // File times come from the kernel's coarse clock, a tick behind the
    // one `now` reads: a margin past the second's end covers it.
    let next = UNIX_EPOCH + Duration::from_secs(second + 1) + Duration::from_millis(20);
    if let Ok(wait) = next.duration_since(SystemTime::now()) {
        tokio::time::sleep(wait).await;
    }
    let git = HostGit {
        git_dir: Some(tree.join(".git")),
        work_tree: Some(tree.to_path_buf()),
        index: None,
        excludes: None,
        root: root.to_path_buf(),
        timeout: host_git::GIT_TIMEOUT,
        // It hashes the files again, by the repository's attribute rules.
        cpu_limit: Some(cpu),
    };
    git.run(["update-index", "-q", "--force-write-index"], None)
        .await?;
    Ok(())
}

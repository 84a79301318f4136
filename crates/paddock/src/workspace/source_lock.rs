//! The locks under which Paddock's fetches into one local source take
//! turns (`results/source.rs`): `<jobs>/.source-locks/<hash of the
//! source's path>.lock`, one file a source, held exclusively (`flock`)
//! for the fetch, its modification time stamped as the lock's last use.
//! Pruned with the other caches (`prune.rs`) once unused for
//! `prune::UNUSED_FOR` and not held; the pruner removes the file while it
//! holds its lock, so a fetch that opened the file before it was removed
//! and locked it after finds it is no longer the file at that path, and
//! takes the lock of the one there now (made anew): two fetches into one
//! source never hold the lock at once through two files.

use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

use super::WorkspaceError;

/// Where the locks of the fetches into local sources are, under
/// Paddock's jobs directory: one file a source (a hash of its path).
pub const SOURCE_LOCKS: &str = ".source-locks";

/// The lock file of `source` under `jobs_root`.
pub fn path_of(jobs_root: &Path, source: &Path) -> PathBuf {
    use sha2::Digest as _;
    let named = std::fs::canonicalize(source).unwrap_or_else(|_| source.to_path_buf());
    let key = hex::encode(&sha2::Sha256::digest(named.as_os_str().as_encoded_bytes())[..12]);
    jobs_root.join(SOURCE_LOCKS).join(format!("{key}.lock"))
}

/// Holds the lock of the fetches into `source` (module text), stamped as
/// used now.
pub async fn hold(jobs_root: &Path, source: &Path) -> Result<Flock<std::fs::File>, WorkspaceError> {
    let dir = jobs_root.join(SOURCE_LOCKS);
    std::fs::create_dir_all(&dir).map_err(|e| WorkspaceError::Create {
        path: dir.clone(),
        source: e,
    })?;
    let path = path_of(jobs_root, source);
    let held = super::lease::lock_file(&path, FlockArg::LockExclusive)
        .await
        .map_err(|e| WorkspaceError::Create {
            path: path.clone(),
            source: e,
        })?;
    super::prune::stamp(&path);
    Ok(held)
}

//! URL sources cached as bare mirrors: `<jobs>/.mirrors/<url key>.git`,
//! made once by `git clone --mirror` and brought up to date by `git
//! fetch --prune` before each job, which then clones from it (a local,
//! hard-linked clone into Paddock's own git directory; the job never sees
//! either). Jobs on one URL take turns (an exclusive `flock` on
//! `<url key>.lock` while the mirror is made or fetched and a job clones
//! from it). A broken mirror
//! (not a repository, or a commit its refs name missing: `git rev-list
//! --all` fails after the fetch) is removed and made again, and the job
//! says so (a non-fatal error event). Made with the user's git
//! configuration (their credentials for the URL), like a clone of the URL.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use nix::fcntl::{Flock, FlockArg};
use sha2::{Digest as _, Sha256};
use tokio::process::Command;

use super::{host_git, WorkspaceError};

/// Where the mirrors live, under the jobs directory.
pub(super) const MIRRORS: &str = ".mirrors";

/// A mirror ready to clone from, and what happened to it on the way;
/// no other job fetches or remakes it while this is held.
#[derive(Debug)]
pub(super) struct Mirror {
    pub dir: PathBuf,
    /// Why it was made again (a broken mirror), for the job's events.
    pub remade: Option<String>,
    _lock: Flock<std::fs::File>,
}

/// The up-to-date mirror of `url` under `jobs_root`.
pub(super) async fn fetched(jobs_root: &Path, url: &str) -> Result<Mirror, WorkspaceError> {
    let root = jobs_root.join(MIRRORS);
    std::fs::create_dir_all(&root).map_err(|source| WorkspaceError::Create {
        path: root.clone(),
        source,
    })?;
    let key = hex::encode(&Sha256::digest(url.as_bytes())[..12]);
    let dir = root.join(format!("{key}.git"));
    let lock_path = root.join(format!("{key}.lock"));
    let lock = {
        let path = lock_path.clone();
        tokio::task::spawn_blocking(move || {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)?;
            Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, errno)| errno.into())
        })
        .await
        .map_err(std::io::Error::other)
        .and_then(|r: std::io::Result<Flock<std::fs::File>>| r)
        .map_err(|source| WorkspaceError::Create {
            path: lock_path,
            source,
        })?
    };
    let mut remade = None;
    if dir.is_dir() {
        let fetch = [
            "--git-dir",
            &arg(&dir),
            "fetch",
            "--prune",
            "--quiet",
            "origin",
        ];
        let fetched = git(&dir, url, &fetch).await;
        match (fetched, broken(&dir, url).await) {
            (_, Some(why)) => {
                remade = Some(format!(
                    "the mirror of {url} was broken ({why}); it was made again"
                ));
                std::fs::remove_dir_all(&dir).map_err(|source| WorkspaceError::Create {
                    path: dir.clone(),
                    source,
                })?;
            }
            (Err(e), None) => return Err(e),
            (Ok(()), None) => {}
        }
    }
    if !dir.is_dir() {
        let tmp = root.join(format!(".tmp-{key}-{}", std::process::id()));
        if tmp.exists() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        let cloned = git(
            &root,
            url,
            &[
                "clone",
                "--mirror",
                "--quiet",
                "--template=",
                "--",
                url,
                &arg(&tmp),
            ],
        )
        .await;
        let placed = cloned.and_then(|()| {
            std::fs::rename(&tmp, &dir).map_err(|source| WorkspaceError::Create {
                path: dir.clone(),
                source,
            })
        });
        if tmp.exists() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        placed?;
    }
    Ok(Mirror {
        dir,
        remade,
        _lock: lock,
    })
}

fn arg(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Why the mirror `dir` is broken (`git fsck` fails), or `None`.
async fn broken(dir: &Path, url: &str) -> Option<String> {
    let args = [
        "--git-dir",
        &arg(dir),
        "fsck",
        "--connectivity-only",
        "--no-dangling",
    ];
    match git(dir, url, &args).await {
        Ok(()) => None,
        Err(WorkspaceError::Clone { stderr, .. }) => Some(
            stderr
                .lines()
                .next()
                .unwrap_or("git rev-list --all failed")
                .to_string(),
        ),
        Err(e) => Some(e.to_string()),
    }
}

/// Runs the user's git with `args` (hooks off, no prompt) in `cwd`; a
/// failure is a `Clone` error of `url` with git's stderr.
async fn git(cwd: &Path, url: &str, args: &[&str]) -> Result<(), WorkspaceError> {
    let mut cmd = Command::new("git");
    // No automatic gc: a job may be cloning from it.
    cmd.args(["-c", "core.hooksPath=/dev/null", "-c", "gc.auto=0"])
        .args(args)
        .current_dir(cwd)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null());
    let out = host_git::output_within(cmd, None, host_git::CLONE_TIMEOUT)
        .await
        .map_err(|source| WorkspaceError::Spawn {
            path: cwd.to_path_buf(),
            source,
        })?
        .ok_or_else(|| WorkspaceError::GitTimeout {
            path: cwd.to_path_buf(),
            args: args.join(" "),
            after: host_git::CLONE_TIMEOUT,
        })?;
    if !out.status.success() {
        return Err(WorkspaceError::Clone {
            source_repo: url.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

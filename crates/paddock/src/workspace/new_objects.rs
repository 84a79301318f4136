//! The job's new objects checked as git checks a remote's before a
//! result branch's bundle holding the whole history is kept. A bundle of
//! only the job's new objects (on the base as its prerequisite) is
//! checked wherever it is fetched (`fetch.fsckObjects`,
//! `results/source.rs`, `results/push.rs`), but a whole history is
//! fetched without that check (the user's own history need not pass
//! today's `fsck`), which let the job's objects through unchecked: a
//! `.gitmodules` whose submodule URL is an option (`-u./payload`), whose
//! name climbs out of `.git/modules`, or that is a symbolic link, reached
//! the user's repository or the push's remote. Here the job's new objects
//! alone (what the base lacks: the job's trees and blobs, Paddock's
//! commit) are packed into a scratch directory under the job's `meta/`
//! and indexed with `git index-pack --strict`, the check a fetch with
//! `fetch.fsckObjects` makes, with git's own message levels (Paddock's git
//! reads no configuration of the user's): a refusal fails the branch as a
//! refused fetch would, and no bundle is kept.

use std::path::{Path, PathBuf};

use super::host_git::HostGit;
use super::WorkspaceError;

/// The scratch directory's name under the job's `meta/`.
const SCRATCH: &str = "new-objects";

/// Checks the objects `commit` has that `base` lacks in `git`'s
/// repository (module text), in a scratch directory under `meta`
/// removed afterwards; `Err(NewObjectsRefused)` with git's reason.
pub(super) async fn check(
    git: &HostGit,
    meta: &Path,
    commit: &str,
    base: &str,
) -> Result<(), WorkspaceError> {
    let dir = meta.join(SCRATCH);
    let result = check_in(git, &dir, commit, base).await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn check_in(
    git: &HostGit,
    dir: &Path,
    commit: &str,
    base: &str,
) -> Result<(), WorkspaceError> {
    let write_err = |file: &PathBuf| {
        let file = file.display().to_string();
        let path = git.root.clone();
        move |source| WorkspaceError::Write { path, file, source }
    };
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir(dir).map_err(write_err(&dir.to_path_buf()))?;
    let pack = dir.join("new.pack");
    let idx = dir.join("new.idx");
    let file = std::fs::File::options()
        .write(true)
        .create_new(true)
        .open(&pack)
        .map_err(write_err(&pack))?;
    // Not thin: every object the base lacks is whole in the pack, so it
    // indexes alone; what it names of the base is found in the repository.
    let args = ["pack-objects", "--stdout", "--revs", "-q"];
    let revs = format!("{commit}\n^{base}\n");
    let (status, _, stderr) = git.start_into(args, file)?.finish(revs.as_bytes()).await?;
    if !status.success() {
        return Err(git.failed(args, &stderr));
    }
    let mut index: Vec<std::ffi::OsString> = ["index-pack", "--strict", "-o"]
        .iter()
        .map(Into::into)
        .collect();
    index.push(idx.into_os_string());
    index.push(pack.into_os_string());
    let (status, _, stderr) = git.status(&index, None).await?;
    if status.success() {
        return Ok(());
    }
    Err(WorkspaceError::NewObjectsRefused {
        path: git.root.clone(),
        commit: commit.to_string(),
        fsck: said(&stderr),
    })
}

/// The most characters of git's reason kept: it quotes the job's text
/// (a submodule's URL, a name).
const SAID_CHARS: usize = 2048;

/// git's reason on one line, at most [`SAID_CHARS`] characters.
fn said(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    match text.char_indices().nth(SAID_CHARS) {
        Some((at, _)) => format!("{}… ({} bytes)", &text[..at], text.len()),
        None => text,
    }
}

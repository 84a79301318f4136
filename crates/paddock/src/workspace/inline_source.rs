//! A source repository made from inline files (a turn's `files`,
//! docs/api.md#turns): a fresh directory, the files written into it (each
//! path made of plain segments, created new, never following a link:
//! nothing else is in the directory), and one commit by Paddock's hardened
//! git. A job then clones it like any local source; the caller removes
//! the directory when the job has ended ([`remove`]). Those gits match
//! every file against the files' own `.gitattributes`, the client's, whose
//! rules can make git compute for minutes on the 100 files a turn may
//! hold (deep paths, tens of thousands of `a/**/b<n>` patterns), on the
//! server's CPU before the job exists: each is held to the CPU the job's
//! host profile gives its gits (`host_git::job_git_cpu`).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Component, Path};

use super::host_git::{HostGit, GIT_TIMEOUT};
use super::WorkspaceError;

/// Makes `dir` (which must not exist; its parent is made, private, when
/// missing) a git repository whose one commit
/// holds exactly `files` (relative path → text), each git held to `cpu`
/// of CPU (past it: `WorkspaceError::GitCpuLimit`).
pub async fn make(
    dir: &Path,
    files: &BTreeMap<String, String>,
    cpu: std::time::Duration,
) -> Result<(), WorkspaceError> {
    let create = |source| WorkspaceError::Create {
        path: dir.to_path_buf(),
        source,
    };
    if let Some(parent) = dir.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(create)?;
    }
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(dir)
        .map_err(create)?;
    for (name, text) in files {
        write_file(dir, name, text)?;
    }
    let git = HostGit {
        git_dir: Some(dir.join(".git")),
        work_tree: Some(dir.to_path_buf()),
        index: None,
        excludes: None,
        root: dir.to_path_buf(),
        timeout: GIT_TIMEOUT,
        // The client's files and attribute rules.
        cpu_limit: Some(cpu),
    };
    git.run(["init", "-q"], None).await?;
    git.run(["add", "-A"], None).await?;
    git.run(
        [
            "-c",
            "user.name=Paddock",
            "-c",
            "user.email=paddock@localhost",
            "commit",
            "-q",
            "--allow-empty",
            "--no-verify",
            "-m",
            "the turn's files",
        ],
        None,
    )
    .await?;
    Ok(())
}

/// Writes `text` to `dir/name`, its directories made as needed; refuses a
/// name that is not plain relative segments (the request's check is
/// repeated here, where the file is made).
fn write_file(dir: &Path, name: &str, text: &str) -> Result<(), WorkspaceError> {
    let write = |source| WorkspaceError::Write {
        path: dir.to_path_buf(),
        file: name.to_owned(),
        source,
    };
    let relative = Path::new(name);
    let plain = relative.components().all(|c| match c {
        Component::Normal(s) => !s.eq_ignore_ascii_case(".git"),
        _ => false,
    });
    if !plain || name.is_empty() {
        return Err(write(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a plain relative path",
        )));
    }
    let path = dir.join(relative);
    if let Some(parent) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(write)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(&path)
        .map_err(write)?;
    file.write_all(text.as_bytes()).map_err(write)?;
    Ok(())
}

/// Removes a source made by [`make`]; one already gone is fine.
pub fn remove(dir: &Path) -> Result<(), WorkspaceError> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(WorkspaceError::Remove {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::workspace::host_git::JOB_GIT_CPU;

    #[tokio::test]
    async fn the_files_are_committed_and_nothing_else() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("src");
        let files = BTreeMap::from([
            ("a.txt".to_owned(), "one\n".to_owned()),
            ("d/e/f.md".to_owned(), "two\n".to_owned()),
        ]);
        make(&dir, &files, JOB_GIT_CPU).await.unwrap();
        let out = std::process::Command::new("git")
            .args([
                "-C",
                dir.to_str().unwrap(),
                "ls-tree",
                "-r",
                "--name-only",
                "HEAD",
            ])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "a.txt\nd/e/f.md\n");
        assert_eq!(
            std::fs::read_to_string(dir.join("d/e/f.md")).unwrap(),
            "two\n"
        );
        // An existing directory is never written into.
        assert!(matches!(
            make(&dir, &BTreeMap::new(), JOB_GIT_CPU).await,
            Err(WorkspaceError::Create { .. })
        ));
        let bad = BTreeMap::from([("../x".to_owned(), String::new())]);
        let other = tmp.path().join("other");
        assert!(matches!(
            make(&other, &bad, JOB_GIT_CPU).await,
            Err(WorkspaceError::Write { .. })
        ));
        assert!(!tmp.path().join("x").exists());
        remove(&dir).unwrap();
        remove(&dir).unwrap();
        assert!(!dir.exists());
    }
}

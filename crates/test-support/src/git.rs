//! Git fixtures: `git` run with a fixed identity, a real repository
//! with one commit on `main`, a file committed to one, and a bare clone
//! of one as a remote.

use std::path::{Path, PathBuf};

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@localhost")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@localhost")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A real git repository with one commit on `main`.
pub fn repo(dir: &Path) -> PathBuf {
    let r = dir.join("repo");
    std::fs::create_dir_all(&r).unwrap();
    git(&r, &["init", "-q", "-b", "main"]);
    std::fs::write(r.join("README.md"), "# sample\n\nA sample repository.\n").unwrap();
    git(&r, &["add", "."]);
    git(&r, &["commit", "-q", "-m", "init"]);
    r
}

/// Writes `name` (a path in `repo`'s work tree) with `contents`, adds it
/// and commits it with `message`.
pub fn commit_file(repo: &Path, name: &str, contents: impl AsRef<[u8]>, message: &str) {
    std::fs::write(repo.join(name), contents).unwrap();
    git(repo, &["add", name]);
    git(repo, &["commit", "-q", "-m", message]);
}

/// A bare remote `widgets.git` (a clone of `repo`) under `root`.
pub fn bare_remote(root: &Path, repo: &Path) -> PathBuf {
    let bare = root.join("widgets.git");
    let out = std::process::Command::new("git")
        .args(["clone", "-q", "--bare"])
        .arg(repo)
        .arg(&bare)
        .output()
        .unwrap();
    assert!(out.status.success());
    bare
}

//! `paddock apply` against what the user's environment and repository
//! can make of its git: a repository the environment names (`GIT_DIR`,
//! `GIT_WORK_TREE`), one git refuses to read (`safe.directory`), a store
//! that fails once the patch is written. Each with the real binary, a
//! stand-in engine and real git.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use paddock_test_support::prelude::*;

use super::results::stand_in_job;

/// A job writing `new.txt` and a git hook, `hooks/post-checkout` (what a
/// git directory would run), its id.
async fn hook_writing_job(home: &Home) -> String {
    let repo = repo(home.path());
    let body = finishing(
        "printf 'x\\n' > new.txt; mkdir -p hooks; printf 'echo owned\\n' > hooks/post-checkout",
    );
    let spec = stand_in_job(home, &repo, &body);
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    record(&out).id
}

/// Exit code, stdout and stderr.
fn outcome(out: std::process::Output) -> (Option<i32>, String, String) {
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A new directory `name` under `home`, by its canonical path.
fn new_dir(home: &Home, name: &str) -> PathBuf {
    let dir = home.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::canonicalize(&dir).unwrap()
}

/// The files under `dir`, `.git` left out.
fn files(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().is_some_and(|n| n == ".git") {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else {
                found.push(path.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    found.sort();
    found
}

/// `GIT_DIR` and `GIT_WORK_TREE` in the user's environment (a dotfiles
/// repository's, a git hook's) name another repository: `paddock apply`
/// asks and applies in the directory it was given all the same. In a
/// plain directory it is refused as no working tree (before, git's
/// answer named the other work tree, and the job's files, its hook
/// included, were written there unasked); in a bare repository, refused
/// as a git directory even with `--outside-git` (before, written among
/// git's own files: a hook git runs).
#[tokio::test]
async fn paddock_apply_takes_no_repository_from_the_environment() {
    let home = Home::new();
    let job = hook_writing_job(&home).await;
    let victim = new_dir(&home, "victim");
    git(&victim, &["init", "-q"]);
    let plain = new_dir(&home, "plain");
    let bare = new_dir(&home, "bare.git");
    git(&bare, &["init", "-q", "--bare"]);
    let hooks_before = files(&bare);
    let victim_git = victim.join(".git");
    let elsewhere = [
        ("GIT_DIR", victim_git.to_str().unwrap()),
        ("GIT_WORK_TREE", victim.to_str().unwrap()),
    ];
    let mut here = home.command(&["apply", &job]);
    here.current_dir(&plain).envs(elsewhere);
    let in_plain = outcome(here.output().await.unwrap());
    let into_git = [
        ("GIT_DIR", bare.to_str().unwrap()),
        ("GIT_WORK_TREE", bare.to_str().unwrap()),
    ];
    let args = [
        "apply",
        &job,
        "--outside-git",
        "--repo",
        bare.to_str().unwrap(),
    ];
    let in_bare = outcome(home.paddock(&args, &into_git).await);
    assert_eq!(
        (in_plain, in_bare),
        (
            (
                Some(2),
                String::new(),
                format!(
                    "paddock: {} is in no git working tree: job {job}'s patch was not applied; \
                     run `paddock apply` in a checkout of the job's repository, name one with \
                     --repo DIR, or pass --outside-git to write its files in this directory \
                     anyway\n",
                    plain.display()
                )
            ),
            (
                Some(2),
                String::new(),
                format!(
                    "paddock: {} is inside the git directory {}, not a working tree: job {job}'s \
                     patch was not applied (its files would land among git's own, such as the \
                     hooks git runs); name the working tree with --repo DIR\n",
                    bare.display(),
                    bare.display()
                )
            ),
        )
    );
    assert_eq!(
        (files(&victim), files(&plain), files(&bare)),
        (Vec::<String>::new(), Vec::new(), hooks_before)
    );
}

/// A repository git refuses to read (here as one another user owns,
/// `safe.directory`: git's own test switch makes it so) is refused with
/// git's reason, with or without `--outside-git`, nothing written.
/// Before, it read as no working tree, the message told to pass
/// `--outside-git`, and with it the job's files were written into the
/// repository unread by git.
#[tokio::test]
async fn paddock_apply_in_a_repository_git_refuses_says_gits_reason() {
    let home = Home::new();
    let job = hook_writing_job(&home).await;
    let theirs = new_dir(&home, "theirs");
    git(&theirs, &["init", "-q"]);
    let refused_by_git = [
        ("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1"),
        // No `safe.directory` of the user's lets it through.
        ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ];
    let mut said = Vec::new();
    for extra in [&[][..], &["--outside-git"][..]] {
        let mut args = vec!["apply", &job, "--repo", theirs.to_str().unwrap()];
        args.extend(extra);
        said.push(outcome(home.paddock(&args, &refused_by_git).await));
    }
    let refusal = (
        Some(2),
        String::new(),
        format!(
            "paddock: {dir} is in a repository git refuses to read: job {job}'s patch was not \
             applied; git says:\nfatal: detected dubious ownership in repository at '{dir}'\n\
             To add an exception for this directory, call:\n\n\
             \tgit config --global --add safe.directory {dir}\n",
            dir = theirs.display()
        ),
    );
    assert_eq!(said, vec![refusal.clone(), refusal]);
    assert_eq!(files(&theirs), Vec::<String>::new());
}

/// The store failing once the patch is written (here made unreadable by
/// a `git` first on `PATH` as `git apply` ends) does not fail `paddock
/// apply`: what it needs of the store is read before anything is
/// written, and what was applied is said. Before, the files were written
/// and the command failed on the store, so the patch read as not
/// applied.
#[tokio::test]
async fn paddock_apply_says_what_it_applied_whatever_the_store_does_after() {
    let home = Home::new();
    let job = hook_writing_job(&home).await;
    let target = new_dir(&home, "target");
    git(&target, &["init", "-q"]);
    let real = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("git"))
        .find(|g| g.is_file())
        .unwrap();
    let bin = new_dir(&home, "bin");
    let db = home.db();
    write_script(
        &bin.join("git"),
        &format!(
            "#!/bin/sh\n'{real}' \"$@\"\nrc=$?\ncase \" $* \" in *\" apply -- \"*) printf 'not a \
             database' > '{db}'; rm -f '{db}-wal' '{db}-shm';; esac\nexit $rc\n",
            real = real.display(),
            db = db.display()
        ),
    );
    let mut path = std::ffi::OsString::from(&bin);
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap());
    let args = ["apply", &job, "--repo", target.to_str().unwrap()];
    let applied = outcome(
        home.paddock(&args, &[("PATH", path.to_str().unwrap())])
            .await,
    );
    assert_eq!(
        (applied, files(&target), std::fs::read(&db).unwrap()),
        (
            (
                Some(0),
                String::new(),
                format!(
                    "paddock: applied job {job}'s patch in {} (2 files: hooks/post-checkout, \
                     new.txt)\n",
                    target.display()
                )
            ),
            vec!["hooks/post-checkout".to_string(), "new.txt".to_string()],
            b"not a database".to_vec()
        )
    );
}

/// `GIT_CEILING_DIRECTORIES` (and `GIT_DISCOVERY_ACROSS_FILESYSTEM`) in
/// the user's environment do not hide the repository above the directory:
/// with a ceiling at a checkout's `.git`, its `hooks/` is still found to
/// be inside that git directory and refused, `--outside-git` or not,
/// nothing written. Before, git stopped at the ceiling, said "not a git
/// repository", and `--outside-git` wrote the job's files, its hook
/// among them, into `.git/hooks/`.
#[tokio::test]
async fn paddock_apply_finds_the_git_directory_past_a_ceiling() {
    let home = Home::new();
    let job = hook_writing_job(&home).await;
    let repo = new_dir(&home, "r");
    git(&repo, &["init", "-q"]);
    let git_dir = repo.join(".git");
    let hooks = git_dir.join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let hooks_before = files(&git_dir);
    let ceiling = [
        ("GIT_CEILING_DIRECTORIES", git_dir.to_str().unwrap()),
        ("GIT_DISCOVERY_ACROSS_FILESYSTEM", "0"),
    ];
    let args = [
        "apply",
        &job,
        "--outside-git",
        "--repo",
        hooks.to_str().unwrap(),
    ];
    let said = outcome(home.paddock(&args, &ceiling).await);
    assert_eq!(
        (said, files(&git_dir)),
        (
            (
                Some(2),
                String::new(),
                format!(
                    "paddock: {} is inside the git directory {}, not a working tree: job {job}'s \
                     patch was not applied (its files would land among git's own, such as the \
                     hooks git runs); name the working tree with --repo DIR\n",
                    hooks.display(),
                    git_dir.display()
                )
            ),
            hooks_before
        )
    );
}

/// A `.git` file naming a git directory that is not there is a
/// repository git cannot read, not a plain directory: refused with git's
/// message, `--outside-git` or not, nothing written. Before, git's "not a
/// git repository: PATH" read as no repository at all, and
/// `--outside-git` wrote the job's files beside the `.git` file.
#[tokio::test]
async fn paddock_apply_refuses_a_git_file_naming_no_directory() {
    let home = Home::new();
    let job = hook_writing_job(&home).await;
    let dir = new_dir(&home, "linked");
    let missing = dir.join("missing");
    std::fs::write(dir.join(".git"), format!("gitdir: {}\n", missing.display())).unwrap();
    let mut said = Vec::new();
    for extra in [&[][..], &["--outside-git"][..]] {
        let mut args = vec!["apply", &job, "--repo", dir.to_str().unwrap()];
        args.extend(extra);
        said.push(outcome(home.paddock(&args, &[]).await));
    }
    let refusal = (
        Some(2),
        String::new(),
        format!(
            "paddock: {} is in a repository git refuses to read: job {job}'s patch was not \
             applied; git says:\nfatal: not a git repository: {}\n",
            dir.display(),
            missing.display()
        ),
    );
    assert_eq!(
        (said, files(&dir)),
        (vec![refusal.clone(), refusal], Vec::<String>::new())
    );
}

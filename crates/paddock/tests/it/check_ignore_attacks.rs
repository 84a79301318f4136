//! A hostile work tree against the patch step's one `git check-ignore
//! --stdin -z -v -n` (`workspace/check_ignore.rs`), fed every path of the
//! walk: names git or a line-based reader could misread, ignore files
//! whose answers could fall out of step with the questions, more answers
//! than a pipe holds, and excludes the job wrote itself (its `.git`'s
//! `info/exclude` and `core.excludesFile`, a nested repository's), which
//! Paddock's git must never obey. On the clone layout (any user); the
//! overlay's walk is the same code.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::time::Duration;

use paddock::workspace::Layout;
use paddock_test_support::prelude::*;

/// What git's own `add --all` (in the work tree, no excludes file) adds:
/// the changed names as the patch lists them.
fn git_add_all_names(work: &Path, base: &str) -> Vec<String> {
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(work)
            .args([
                "-c",
                "core.quotePath=false",
                "-c",
                "core.excludesFile=/dev/null",
            ])
            .args(args)
            .env("HOME", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        out.stdout
    };
    git(&["add", "--all"]);
    let tree = String::from_utf8(git(&["write-tree"])).unwrap();
    let names = git(&[
        "diff",
        "--name-only",
        "-z",
        "--no-renames",
        base,
        tree.trim(),
        "--",
    ]);
    names
        .split(|b| *b == 0)
        .filter(|n| !n.is_empty())
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect()
}

/// Names with a newline, quotes, a backslash, pathspec magic (`:(exclude)`,
/// `:!`), glob characters, a leading `!`, `#` and `-`, a trailing space, a
/// 255-byte name and one not UTF-8; a directory named with a newline and
/// its own `.gitignore` (git's answer then names a source with a newline);
/// a `.gitignore` with CRLF lines, escaped `\#` and `\!` patterns and a
/// glob that matches `a.txt` but not the file named `[ab].txt`; and 4,000
/// names of 200 bytes in one directory, half of them ignored (about 800 KB
/// asked and more answered, far past a 64 KiB pipe, so a git that
/// answers before it has read everything must be read while it is
/// written). The patch's names are git's own `add --all`'s, and it ends
/// in bounded time.
#[tokio::test]
async fn hostile_names_and_ignore_files_are_answered_in_step() {
    let Some(job) = OverlayJob::with_layout("c1", Layout::Clone).await else {
        return;
    };
    let w = job.ws.work.clone();
    let long = format!("{}.txt", "l".repeat(251));
    for name in [
        "new\nline.txt",
        "quote\"d'.txt",
        "back\\slash.txt",
        ":(exclude)magic.txt",
        ":!bang-magic.txt",
        "!bang.txt",
        "#hash.txt",
        "-dash.txt",
        "*star.txt",
        "[ab].txt",
        "a.txt",
        "trail ",
        "x.log",
        "keep.log",
        long.as_str(),
    ] {
        std::fs::write(w.join(name), "f\n").unwrap();
    }
    std::fs::write(w.join(OsStr::from_bytes(b"bad\xff.txt")), "f\n").unwrap();
    std::fs::write(
        w.join(".gitignore"),
        "*.log\r\n!keep.log\r\n\\#hash.txt\n\\!bang.txt\n[ab].txt\n",
    )
    .unwrap();
    let odd = w.join("dir\nwith newline");
    std::fs::create_dir(&odd).unwrap();
    std::fs::write(odd.join(".gitignore"), "drop*\n").unwrap();
    std::fs::write(odd.join("drop"), "d\n").unwrap();
    std::fs::write(odd.join("keep"), "k\n").unwrap();
    let many = w.join("many");
    std::fs::create_dir(&many).unwrap();
    std::fs::write(many.join(".gitignore"), "*.ign\n").unwrap();
    for i in 0..4000 {
        let ext = if i % 2 == 0 { "ign" } else { "txt" };
        let name = format!("{i:05}-{}.{ext}", "m".repeat(190));
        std::fs::write(many.join(name), "m\n").unwrap();
    }
    let patch = tokio::time::timeout(Duration::from_secs(300), job.ws.patch())
        .await
        .expect("the patch ended")
        .unwrap();
    let want = git_add_all_names(&w, &job.ws.base_commit);
    let ignored_by_us = [
        "a.txt",
        "x.log",
        "#hash.txt",
        "!bang.txt",
        "dir\nwith newline/drop",
    ];
    assert_eq!(
        (
            patch.changed_files.len(),
            patch.changed_files.clone() == want,
            ignored_by_us
                .iter()
                .filter(|n| patch.changed_files.iter().any(|c| c == *n))
                .count(),
            [
                "[ab].txt",
                "keep.log",
                "dir\nwith newline/keep",
                ":(exclude)magic.txt"
            ]
            .iter()
            .all(|n| patch.changed_files.iter().any(|c| c == *n)),
        ),
        (want.len(), true, 0, true),
        "ours {:?}\ngit's {:?}",
        patch
            .changed_files
            .iter()
            .filter(|n| !n.starts_with("many/"))
            .collect::<Vec<_>>(),
        want.iter()
            .filter(|n| !n.starts_with("many/"))
            .collect::<Vec<_>>()
    );
}

/// The job's own excludes: `.git/info/exclude` and a `core.excludesFile`
/// in `.git/config` (a `process`-rung job can write both; on the sandbox
/// rung `.git/config` is read-only) each saying `*`, and a nested
/// repository's `info/exclude` saying `*` too. Paddock's git reads none
/// of them: every new file is in the patch.
#[tokio::test]
async fn excludes_the_job_wrote_are_not_obeyed() {
    let Some(job) = OverlayJob::with_layout("c2", Layout::Clone).await else {
        return;
    };
    let w = job.ws.work.clone();
    let everything = job.dir().join("ignore-everything");
    std::fs::write(&everything, "*\n").unwrap();
    std::fs::create_dir_all(w.join(".git/info")).unwrap();
    std::fs::write(w.join(".git/info/exclude"), "*\n").unwrap();
    let config = std::fs::read_to_string(w.join(".git/config")).unwrap_or_default();
    std::fs::write(
        w.join(".git/config"),
        format!(
            "{config}[core]\n\texcludesFile = {}\n",
            everything.display()
        ),
    )
    .unwrap();
    std::fs::write(w.join("new.txt"), "n\n").unwrap();
    std::fs::create_dir_all(w.join("sub/.git/info")).unwrap();
    std::fs::write(w.join("sub/.git/info/exclude"), "*\n").unwrap();
    std::fs::write(w.join("sub/inner.txt"), "i\n").unwrap();
    let patch = job.ws.patch().await.unwrap();
    assert_eq!(patch.changed_files, ["new.txt", "sub/inner.txt"]);
}

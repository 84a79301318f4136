//! A hostile job names directories as git's own `.git` under the
//! spellings another file system folds to it: `.g\u{200c}it` and
//! `.git\u{200c}` (HFS+ ignores the zero-width non-joiner), `git~1` and
//! `.git.` (NTFS's short name and trailing dot), `.GIT` and a nested
//! `.Git` (case-insensitive file systems), each holding a `config` whose
//! `core.fsmonitor` would run a program in whoever checks the branch out
//! there. Through the real `paddock` binary: none of them reaches the
//! patch, the result branch or the user's source (which gets the branch:
//! its `fetch.fsckObjects` refuses such a tree, and the job's work with
//! it), and the job is told which it left out and why.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use paddock_test_support::prelude::*;

/// The directories the job makes, each with a `config`.
const ALIASES: [&str; 6] = [
    ".g\u{200c}it",
    ".git\u{200c}",
    "git~1",
    ".git.",
    ".GIT",
    "sub/.Git",
];

/// On both rungs: the early patch, made beside the job's exit, is the
/// sealed staging (`workspace/sealed_stage.rs`), whose `update-index
/// --index-info` skips such a path with only a line on its stderr; those
/// lines name the paths in the same warning as the staging by path (they
/// had been dropped: the paths were left out, but the job was not told).
#[tokio::test(flavor = "multi_thread")]
async fn no_spelling_of_dot_git_reaches_the_result_branch() {
    let mut rungs = vec!["process"];
    if paddock_test_support::skip::sandbox_available() {
        rungs.push("sandbox");
    }
    for rung in rungs {
        aliases_left_out_on(rung).await;
    }
}

async fn aliases_left_out_on(rung: &str) {
    let home = Home::new();
    let repo = repo(home.path());
    // Written into the engine's script (a file of the host's the sandbox
    // cannot read would leave the job nothing to make there).
    let make: String = ALIASES
        .iter()
        .map(|d| {
            format!(
                "mkdir -p '{d}' && printf '[core]\\n\\tfsmonitor = touch {pwned}\\n' > '{d}/config'\n",
                pwned = home.path().join("pwned").display()
            )
        })
        .collect();
    let body = finishing(&format!("printf 'fixed\\n' > fix.txt\n{make}"));
    let spec = stand_in_spec(home.path(), &repo, rung, &body);
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let record = record(&out);
    // The branch's files in the source, if it got the branch.
    let listed = std::process::Command::new("git")
        .arg("-C")
        .arg(&repo)
        .args(["ls-tree", "-r", "--name-only", "-z", "paddock/T-1/1"])
        .output()
        .unwrap();
    let tree = listed.status.success().then(|| {
        String::from_utf8(listed.stdout)
            .unwrap()
            .split('\0')
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect::<Vec<_>>()
    });
    let warnings: Vec<String> = home
        .warnings(&record.id)
        .await
        .into_iter()
        // Not the rung's own notes (a user without a cgroup to delegate
        // runs the sandbox without its caps, and is told so).
        .filter(|m| !m.starts_with("running without cgroup caps"))
        .collect();
    let mut refused: Vec<String> = ALIASES.iter().map(|d| format!("{d}/config")).collect();
    refused.sort();
    assert_eq!(
        (record.status, record.changed_files.clone(), tree, warnings,),
        (
            paddock_protocol::JobStatus::Done,
            vec!["fix.txt".to_string()],
            Some(vec!["README.md".to_string(), "fix.txt".to_string()]),
            vec![format!(
                "left out of the patch, named as git's own directory (.git) under another \
                 spelling, which git never stages: {}",
                refused.join(", ")
            )],
        ),
        "on the {rung} rung"
    );
    assert!(!home.path().join("pwned").exists());
}

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

#[tokio::test(flavor = "multi_thread")]
async fn no_spelling_of_dot_git_reaches_the_result_branch() {
    let home = Home::new();
    let repo = repo(home.path());
    let names = home.path().join("names");
    std::fs::write(&names, ALIASES.join("\n")).unwrap();
    let body = finishing(&format!(
        r#"printf 'fixed\n' > fix.txt
while IFS= read -r d || [ -n "$d" ]; do
  mkdir -p "$d" && printf '[core]\n\tfsmonitor = touch {pwned}\n' > "$d/config"
done < {names}"#,
        pwned = home.path().join("pwned").display(),
        names = names.display()
    ));
    let spec = stand_in_spec(home.path(), &repo, "process", &body);
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
        .store()
        .await
        .events(&record.id, 0)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.body {
            paddock_protocol::EventBody::Error {
                message,
                fatal: false,
                ..
            } => Some(message),
            _ => None,
        })
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
        )
    );
    assert!(!home.path().join("pwned").exists());
}

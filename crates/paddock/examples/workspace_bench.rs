//! Workspace provisioning benchmark: Paddock's per-job workspace (clone at
//! the base ref onto a new branch, hooks off, `home/ tmp/ meta/`, then
//! removal) side by side with `git worktree add`/`remove` and a plain
//! `git clone --local`, on the same generated repository. Prints medians and
//! ratios as a Markdown table for BENCHMARKS.md. Run it with
//! `scripts/bench-workspace` (release build).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use paddock::workspace::Workspace;
use paddock_protocol::RepositorySpec;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@localhost")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@localhost")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A packed repository of `files` files of about `size` bytes in nested
/// directories.
fn make_repo(root: &Path, files: usize, size: usize) -> PathBuf {
    let repo = root.join(format!("repo-{files}"));
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    let line = "fn sample() -> u64 { 42 } // padding padding padding padding\n";
    let body: String = line.repeat(size / line.len() + 1);
    for i in 0..files {
        let dir = repo.join(format!("src/m{:02}/n{:02}", i % 37, i % 11));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("f{i}.rs")), format!("// file {i}\n{body}")).unwrap();
    }
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "bench"]);
    // Packed, as a fetched or long-lived repository is.
    git(&repo, &["gc", "-q"]);
    repo
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs: usize = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.parse().unwrap())
        .unwrap_or(15);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    println!("| repository | Paddock workspace | git worktree add | git clone --local | Paddock ÷ worktree |");
    println!("| --- | --- | --- | --- | --- |");
    for (files, size) in [(200usize, 2_000usize), (5_000, 4_000)] {
        let repo = make_repo(tmp.path(), files, size);
        let jobs = tmp.path().join("jobs");
        let spec = RepositorySpec {
            path: Some(repo.clone()),
            url: None,
            base_ref: "main".into(),
        };
        let (mut paddock, mut worktree, mut clone) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..runs {
            let t = Instant::now();
            let ws = rt
                .block_on(Workspace::provision(
                    &jobs,
                    &format!("job-{i}"),
                    &spec,
                    "paddock/BENCH/1",
                ))
                .unwrap();
            ws.remove().unwrap();
            paddock.push(t.elapsed());

            let wt = tmp.path().join(format!("wt-{i}"));
            let t = Instant::now();
            git(
                &repo,
                &[
                    "worktree",
                    "add",
                    "-q",
                    "-b",
                    &format!("bench-{i}"),
                    wt.to_str().unwrap(),
                    "main",
                ],
            );
            git(
                &repo,
                &["worktree", "remove", "--force", wt.to_str().unwrap()],
            );
            worktree.push(t.elapsed());

            let cl = tmp.path().join(format!("clone-{i}"));
            let t = Instant::now();
            let out = Command::new("git")
                .args(["clone", "-q", "--local"])
                .arg(&repo)
                .arg(&cl)
                .output()
                .unwrap();
            assert!(out.status.success());
            std::fs::remove_dir_all(&cl).unwrap();
            clone.push(t.elapsed());
        }
        let (p, w, c) = (median(paddock), median(worktree), median(clone));
        println!(
            "| {files} files × {} KB | {} | {} | {} | {:.2}× |",
            size / 1000,
            ms(p),
            ms(w),
            ms(c),
            p.as_secs_f64() / w.as_secs_f64()
        );
    }
    println!(
        "\nMedians of {runs} runs, each including removal. git {}.",
        git_version()
    );
}

fn git_version() -> String {
    let out = Command::new("git").arg("--version").output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .trim_start_matches("git version ")
        .to_string()
}

//! Workspace benchmark (issue #14, "Workspaces at the physical limit"):
//! Paddock's per-job workspace phase by phase (provision; the patch after
//! the job changed one file; removal) side by side with `git worktree
//! add`/`remove` and a plain `git clone --local`, on generated packed
//! repositories, the largest the 10,000 files of ~42 MB. Prints
//! medians as Markdown tables, the ratio of Paddock's provisioning to
//! `git worktree add` against the goal (≤ 20 ms and ≥ 40× faster), and the
//! load average before and after (the figures mean little on a busy
//! machine). Run it with `scripts/bench-workspace [--runs N] [--small]`.

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
/// directories; its checked-out size in bytes.
fn make_repo(root: &Path, files: usize, size: usize) -> (PathBuf, u64) {
    let repo = root.join(format!("repo-{files}"));
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    let line = "fn sample() -> u64 { 42 } // padding padding padding padding\n";
    let body: String = line.repeat(size / line.len() + 1);
    let mut bytes = 0u64;
    for i in 0..files {
        let dir = repo.join(format!("src/m{:02}/n{:02}", i % 37, i % 11));
        std::fs::create_dir_all(&dir).unwrap();
        let text = format!("// file {i}\n{body}");
        bytes += text.len() as u64;
        std::fs::write(dir.join(format!("f{i}.rs")), text).unwrap();
    }
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "bench"]);
    // Packed, as a fetched or long-lived repository is.
    git(&repo, &["gc", "-q"]);
    (repo, bytes)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Medians of one repository's runs.
struct Row {
    provision: Duration,
    patch: Duration,
    remove: Duration,
    worktree_add: Duration,
    worktree_remove: Duration,
    clone: Duration,
}

fn measure(rt: &tokio::runtime::Runtime, tmp: &Path, repo: &Path, runs: usize) -> Row {
    let jobs = tmp.join("jobs");
    let spec = RepositorySpec {
        path: Some(repo.to_path_buf()),
        url: None,
        base_ref: "main".into(),
    };
    let mut t: [Vec<Duration>; 6] = Default::default();
    let changed = "src/m00/n00/f0.rs";
    for i in 0..runs {
        let start = Instant::now();
        let ws = rt
            .block_on(Workspace::provision(
                &jobs,
                &format!("job-{i}"),
                &spec,
                "paddock/BENCH/1",
            ))
            .unwrap();
        t[0].push(start.elapsed());
        std::fs::write(ws.work.join(changed), "changed by the job\n").unwrap();
        let start = Instant::now();
        let patch = rt.block_on(ws.patch()).unwrap();
        t[1].push(start.elapsed());
        assert_eq!(patch.changed_files, vec![changed.to_string()]);
        let start = Instant::now();
        ws.remove().unwrap();
        t[2].push(start.elapsed());

        let wt = tmp.join(format!("wt-{i}"));
        let start = Instant::now();
        let branch = format!("bench-{i}");
        let wt_arg = wt.to_str().unwrap();
        git(
            repo,
            &["worktree", "add", "-q", "-b", &branch, wt_arg, "main"],
        );
        t[3].push(start.elapsed());
        let start = Instant::now();
        git(repo, &["worktree", "remove", "--force", wt_arg]);
        t[4].push(start.elapsed());

        let cl = tmp.join(format!("clone-{i}"));
        let start = Instant::now();
        let out = Command::new("git")
            .args(["clone", "-q", "--local"])
            .arg(repo)
            .arg(&cl)
            .output()
            .unwrap();
        assert!(out.status.success());
        std::fs::remove_dir_all(&cl).unwrap();
        t[5].push(start.elapsed());
    }
    let [p, pa, r, wa, wr, c] = t.map(median);
    Row {
        provision: p,
        patch: pa,
        remove: r,
        worktree_add: wa,
        worktree_remove: wr,
        clone: c,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs: usize = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.parse().unwrap())
        .unwrap_or(15);
    let sizes: &[(usize, usize)] = if args.iter().any(|a| a == "--small") {
        &[(200, 2_000)]
    } else {
        &[(200, 2_000), (10_000, 4_200)]
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let repos: Vec<(usize, PathBuf, u64)> = sizes
        .iter()
        .map(|&(files, size)| {
            let (repo, bytes) = make_repo(tmp.path(), files, size);
            (files, repo, bytes)
        })
        .collect();
    let load_before = load();
    let rows: Vec<Row> = repos
        .iter()
        .map(|(_, repo, _)| measure(&rt, tmp.path(), repo, runs))
        .collect();
    let load_after = load();
    println!("| repository | Paddock provision | git worktree add | provision ÷ worktree add | git clone --local (+ rm) |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for ((files, _, bytes), row) in repos.iter().zip(&rows) {
        let ratio = row.provision.as_secs_f64() / row.worktree_add.as_secs_f64();
        println!(
            "| {files} files, {:.1} MB | {} ms | {} ms | {ratio:.2}× ({:.1}× faster) | {} ms |",
            *bytes as f64 / 1e6,
            ms(row.provision),
            ms(row.worktree_add),
            1.0 / ratio,
            ms(row.clone),
        );
    }
    println!();
    println!(
        "| repository | provision | patch (one file changed) | remove | git worktree remove |"
    );
    println!("| --- | ---: | ---: | ---: | ---: |");
    for ((files, _, _), row) in repos.iter().zip(&rows) {
        println!(
            "| {files} files | {} ms | {} ms | {} ms | {} ms |",
            ms(row.provision),
            ms(row.patch),
            ms(row.remove),
            ms(row.worktree_remove),
        );
    }
    println!(
        "\nMedians of {runs} runs. Goal (issue #14): provision ≤ 20 ms and ≥ 40× faster than \
         `git worktree add` at 10,000 files. git {}, load average before {load_before}, after {load_after}.",
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

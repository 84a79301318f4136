//! Workspace benchmark (issue #14, "Workspaces at the physical limit"):
//! Paddock's per-job workspace, the clone and the overlay layout (as
//! root), phase by phase (provision; the patch after
//! the job changed one file; removal) side by side with `git worktree
//! add`/`remove` and a plain `git clone --local`, on generated packed
//! repositories, the largest the 10,000 files of ~42 MB. Prints
//! medians as Markdown tables, the ratio of Paddock's provisioning to
//! `git worktree add` against the goal (≤ 20 ms and ≥ 40× faster), and the
//! load average before and after (the figures mean little on a busy
//! machine). Before every timed step, untimed and the same for every
//! variant, the jobs directory's trash is emptied and the page cache's
//! dirty pages are written out (`sync`): otherwise a step pays for the
//! writeback of the step before it (a clone writes 42 MB at 10,000 files),
//! which fell on whichever variant came next in the round. Run it with
//! `scripts/bench-workspace [--runs N] [--small]`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use paddock::workspace::{Layout, Lease, Workspace};
use paddock_protocol::RepositorySpec;
use paddock_test_support::bench::loadavg;
use paddock_test_support::git::git;

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
    // No automatic gc in the background: it would race the one below.
    git(&repo, &["-c", "gc.auto=0", "commit", "-q", "-m", "bench"]);
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

/// Paddock's phases for one layout.
#[derive(Clone, Copy)]
struct Phases {
    provision: Duration,
    patch: Duration,
    remove: Duration,
}

/// Untimed, before each timed step: what earlier steps left to the kernel
/// or to the trash is done with, so no step pays for another's.
fn settle(jobs: &Path) {
    if jobs.exists() {
        let errors = paddock::workspace::trash::empty(jobs, true);
        assert!(errors.is_empty(), "{errors:?}");
    }
    assert!(Command::new("sync").status().unwrap().success());
}

/// Provisions, changes one file, computes the patch and removes, timed.
fn paddock_run(
    rt: &tokio::runtime::Runtime,
    jobs: &Path,
    id: &str,
    spec: &RepositorySpec,
    layout: Layout,
) -> [Duration; 3] {
    let changed = "src/m00/n00/f0.rs";
    let start = Instant::now();
    let lease = Lease::take(jobs, id).unwrap();
    let ws = rt
        .block_on(Workspace::provision_as(
            jobs,
            id,
            lease.clone(),
            spec,
            "paddock/BENCH/1",
            layout,
        ))
        .unwrap();
    let provision = start.elapsed();
    std::fs::write(ws.work.join(changed), "changed by the job\n").unwrap();
    let start = Instant::now();
    let patch = rt.block_on(ws.patch()).unwrap();
    let patched = start.elapsed();
    assert_eq!(patch.changed_files, vec![changed.to_string()]);
    let start = Instant::now();
    ws.remove().unwrap();
    let removed = start.elapsed();
    // As the runner does once the job's record is final: a lease is never
    // taken over while its file is there, and the next repository's
    // untimed first job has this one's name.
    lease.release().unwrap();
    [provision, patched, removed]
}

/// Medians of one repository's runs.
struct Row {
    clone_ws: Phases,
    /// `None` where the overlay is not allowed (not root).
    overlay: Option<Phases>,
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
        token: None,
    };
    let mut t: [Vec<Duration>; 9] = Default::default();
    // The overlay's snapshot is made once per commit: by a first job,
    // not timed; then whether the overlay was used at all.
    paddock_run(rt, &jobs, "warm", &spec, Layout::Overlay);
    let overlay = overlay_allowed();
    for i in 0..runs {
        settle(&jobs);
        let clone = paddock_run(rt, &jobs, &format!("job-{i}"), &spec, Layout::Clone);
        for (k, d) in clone.into_iter().enumerate() {
            t[k].push(d);
        }
        if overlay {
            settle(&jobs);
            let layered = paddock_run(rt, &jobs, &format!("ov-{i}"), &spec, Layout::Overlay);
            for (k, d) in layered.into_iter().enumerate() {
                t[6 + k].push(d);
            }
        }

        let wt = tmp.join(format!("wt-{i}"));
        settle(&jobs);
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
        settle(&jobs);
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
    let [p, pa, r, wa, wr, c, op, opa, or] = t.map(|v| {
        if v.is_empty() {
            Duration::ZERO
        } else {
            median(v)
        }
    });
    Row {
        clone_ws: Phases {
            provision: p,
            patch: pa,
            remove: r,
        },
        overlay: overlay.then_some(Phases {
            provision: op,
            patch: opa,
            remove: or,
        }),
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
    let load_before = loadavg();
    let rows: Vec<Row> = repos
        .iter()
        .map(|(_, repo, _)| measure(&rt, tmp.path(), repo, runs))
        .collect();
    let load_after = loadavg();
    println!("| repository | layout | Paddock provision | git worktree add | provision ÷ worktree add | git clone --local (+ rm) |");
    println!("| --- | --- | ---: | ---: | ---: | ---: |");
    for ((files, _, bytes), row) in repos.iter().zip(&rows) {
        for (layout, phases) in row.layouts() {
            let ratio = phases.provision.as_secs_f64() / row.worktree_add.as_secs_f64();
            println!(
                "| {files} files, {:.1} MB | {layout} | {} ms | {} ms | {ratio:.3}× ({:.1}× faster) | {} ms |",
                *bytes as f64 / 1e6,
                ms(phases.provision),
                ms(row.worktree_add),
                1.0 / ratio,
                ms(row.clone),
            );
        }
    }
    println!();
    println!("| repository | layout | provision | patch (one file changed) | remove | git worktree remove |");
    println!("| --- | --- | ---: | ---: | ---: | ---: |");
    for ((files, _, _), row) in repos.iter().zip(&rows) {
        for (layout, phases) in row.layouts() {
            println!(
                "| {files} files | {layout} | {} ms | {} ms | {} ms | {} ms |",
                ms(phases.provision),
                ms(phases.patch),
                ms(phases.remove),
                ms(row.worktree_remove),
            );
        }
    }
    if rows.iter().any(|r| r.overlay.is_none()) {
        println!(
            "\nThe overlay layout was not measured: mounting needs CAP_SYS_ADMIN (run as root)."
        );
    }
    println!(
        "\nMedians of {runs} runs. Goal (issue #14): provision ≤ 20 ms and ≥ 40× faster than \
         `git worktree add` at 10,000 files. git {}, load average before {load_before}, after {load_after}.",
        git_version()
    );
}

impl Row {
    fn layouts(&self) -> Vec<(&'static str, Phases)> {
        let mut out = vec![("clone", self.clone_ws)];
        out.extend(self.overlay.map(|o| ("overlay", o)));
        out
    }
}

/// Whether this process may mount an overlay (a workspace asked for one
/// falls back to the clone otherwise).
fn overlay_allowed() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << 21) != 0)
}

fn git_version() -> String {
    let out = Command::new("git").arg("--version").output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .trim_start_matches("git version ")
        .to_string()
}

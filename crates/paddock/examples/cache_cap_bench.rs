//! The caches' size cap pass when the caches are under the cap (issue
//! #14; run it with `scripts/bench-cache-cap`): what the pass after each
//! job costs when it removes nothing, which is every pass but the few
//! that find the caches over. A jobs directory in a temporary directory
//! gets `--entries` snapshot-shaped entries under `.snapshots/` (default
//! 5), each `--files` files (default 10,000, 100 per directory, a few
//! bytes each) and one mirror-shaped entry; the pass
//! (`paddock::cache_cap::enforce` with a cap above their size) is timed
//! against GNU `du -s` over the same directories, interleaved, warm,
//! medians of `--runs` rounds (default 7), with the load average before
//! and after: the first pass measures every entry (no memo of their sizes
//! yet, as after each new snapshot), the later ones walk the mirror only.
//! The directory is removed at the end.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::{Duration, Instant};

use paddock_test_support::bench::loadavg;

fn arg(name: &str, default: usize) -> usize {
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        if a == name {
            return it.next().and_then(|v| v.parse().ok()).unwrap_or(default);
        }
    }
    default
}

fn fill(dir: &Path, files: usize) {
    for i in 0..files {
        let sub = dir.join(format!("d{:03}", i / 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(&sub).unwrap();
        }
        std::fs::write(sub.join(format!("f{i}.txt")), format!("{i}\n")).unwrap();
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let (entries, files, runs) = (
        arg("--entries", 5),
        arg("--files", 10_000),
        arg("--runs", 7),
    );
    let tmp = tempfile::tempdir().unwrap();
    let jobs = tmp.path().join("jobs");
    for e in 0..entries {
        fill(
            &jobs.join(format!(".snapshots/{e:040x}-{:032x}/tree", e)),
            files,
        );
    }
    fill(&jobs.join(format!(".mirrors/{:024x}.git/objects", 1)), 256);
    let before = loadavg();
    let (mut pass, mut du) = (Vec::new(), Vec::new());
    let mut measured = None;
    for _ in 0..runs {
        let t = Instant::now();
        let capped = paddock::cache_cap::enforce(&jobs, u64::MAX);
        pass.push(t.elapsed());
        assert!(capped.removed.is_empty());
        measured = Some((capped.entries, capped.bytes_before));
        let t = Instant::now();
        let out = std::process::Command::new("du")
            .arg("-s")
            .arg(jobs.join(".snapshots"))
            .arg(jobs.join(".mirrors"))
            .output()
            .unwrap();
        du.push(t.elapsed());
        assert!(out.status.success());
    }
    let (n, bytes) = measured.unwrap();
    let first = pass.remove(0);
    println!(
        "cache entries: {n} ({entries} x {files} files + 1 mirror), {:.1} MiB",
        bytes as f64 / f64::from(1 << 20)
    );
    println!(
        "cap pass under the cap: first (every entry measured) {:.1} ms, then median {:.2} ms; du -s: median {:.1} ms ({runs} rounds, interleaved)",
        first.as_secs_f64() * 1e3,
        median(pass).as_secs_f64() * 1e3,
        median(du).as_secs_f64() * 1e3
    );
    println!("load average before {before}, after {}", loadavg());
}

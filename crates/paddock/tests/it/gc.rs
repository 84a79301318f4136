//! The caches' size cap (`paddock::cache_cap`), with real jobs on URL
//! sources served over smart HTTP: each job leaves a bare mirror (and,
//! where this process can mount an overlay, a snapshot of its base); the
//! cap, set in the config file, is enforced by the detached pass each
//! `paddock run` starts as it exits and by `paddock gc`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};
use paddock_test_support::git_http::basic;
use paddock_test_support::prelude::*;

const TOKEN: &str = "ghs_paddockCapTestToken0123456789";

/// The directories (cache entries) under `dir`, `.tmp-` ones aside.
fn entries(dir: &Path) -> BTreeSet<PathBuf> {
    match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().unwrap().is_dir())
            .filter(|e| !e.file_name().to_string_lossy().starts_with(".tmp-"))
            .map(|e| e.path())
            .collect(),
        Err(_) => BTreeSet::new(),
    }
}

/// Every cache entry under the jobs directory.
fn cache(jobs: &Path) -> BTreeSet<PathBuf> {
    let mut all = entries(&jobs.join(".mirrors"));
    all.extend(entries(&jobs.join(".snapshots")));
    all
}

fn bytes(set: &BTreeSet<PathBuf>) -> u64 {
    set.iter()
        .map(|p| paddock::workspace::disk_usage::of(p).bytes)
        .sum()
}

/// Waits (at most a minute) until `done` holds: the detached pass of a
/// `paddock run` that has exited.
async fn eventually(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(60), "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

struct Rig {
    home: Home,
    server: paddock_test_support::git_http::GitHttpServer,
    spec: String,
    gitconfig: String,
}

impl Rig {
    /// Three remotes `a`, `b`, `c` (the same repository with a 256 KiB
    /// file of random bytes, so each URL's entries take about the same).
    async fn new() -> Rig {
        let home = Home::new();
        let repo = repo(home.path());
        let noise: Vec<u8> = (0..256 * 1024).map(|_| rand::random::<u8>()).collect();
        commit_file(&repo, "noise.bin", noise, "noise");
        let remotes = home.path().join("remotes");
        std::fs::create_dir_all(&remotes).unwrap();
        for name in ["a", "b", "c"] {
            let out = std::process::Command::new("git")
                .args(["clone", "-q", "--bare"])
                .arg(&repo)
                .arg(remotes.join(format!("{name}.git")))
                .output()
                .unwrap();
            assert!(out.status.success());
        }
        let server =
            paddock_test_support::git_http::GitHttpServer::start(&remotes, &basic(TOKEN)).await;
        let gitconfig = home.path().join("user.gitconfig");
        std::fs::write(
            &gitconfig,
            format!("[http]\n\textraHeader = Authorization: {}\n", basic(TOKEN)),
        )
        .unwrap();
        let spec = stand_in_spec(
            home.path(),
            &repo,
            "process",
            &finishing("echo x > out.txt"),
        );
        let spec = std::fs::read_to_string(&spec).unwrap();
        let spec = spec.replace(&format!("path = \"{}\"", repo.display()), "url = \"URL\"");
        Rig {
            home,
            server,
            spec,
            gitconfig: gitconfig.display().to_string(),
        }
    }

    fn cap(&self, max_size: &str) {
        self.home
            .write_config(&format!("[caches]\nmax_size = {max_size}\n"));
    }

    /// Runs a job on remote `name`; it must end `done`.
    async fn run(&self, name: &str) {
        let spec = self
            .home
            .path()
            .join(format!("job-{name}-{}.toml", rand::random::<u32>()));
        let url = format!("{}/{name}.git", self.server.url);
        std::fs::write(
            &spec,
            self.spec
                .replace("url = \"URL\"", &format!("url = \"{url}\"")),
        )
        .unwrap();
        let out = self
            .home
            .paddock(
                &["run", "--json", spec.to_str().unwrap()],
                &[("GIT_CONFIG_GLOBAL", &self.gitconfig)],
            )
            .await;
        let rec = record(&out);
        assert_eq!(
            (rec.status, rec.reason.clone()),
            (paddock_protocol::JobStatus::Done, None),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Runs a job on remote `name` and returns the cache entries it made.
    async fn run_new(&self, name: &str) -> BTreeSet<PathBuf> {
        let before = cache(&self.home.jobs());
        self.run(name).await;
        // Measured once the detached remover has deleted the job's
        // directory: until then a clone layout's bare copy in its `meta/`
        // hard-links the mirror's pack, which is charged `blocks / nlink`
        // (an ordinary user's jobs, which cannot mount an overlay).
        let trash = self.home.jobs().join(".trash");
        eventually("the job's directory deleted", || {
            std::fs::read_dir(&trash).map_or(true, |mut d| d.next().is_none())
        })
        .await;
        cache(&self.home.jobs())
            .difference(&before)
            .cloned()
            .collect()
    }
}

/// Real jobs fill the caches past a small cap: the detached pass after
/// a job removes the least recently used entries (the first URL's mirror
/// and snapshot) and nothing else; then, with the next-oldest URL's
/// mirror lock held exclusively and its snapshot's lock held shared (jobs
/// using them), those stay and the URL after them goes instead; `paddock
/// gc --json` names what it removed and why.
#[tokio::test(flavor = "multi_thread")]
async fn a_small_cap_removes_the_least_recently_used_entries_never_one_in_use() {
    let rig = Rig::new().await;
    let jobs = rig.home.jobs();
    rig.cap("\"unlimited\"");
    let a = rig.run_new("a").await;
    let b = rig.run_new("b").await;
    // A mirror for each; a snapshot too where overlays can be mounted.
    assert!(
        a.len() == b.len() && (a.len() == 1 || a.len() == 2),
        "{a:?} {b:?}"
    );
    let (size_a, size_b) = (bytes(&a), bytes(&b));
    eprintln!("entries per URL: {a:?}; {size_a} and {size_b} bytes");
    // Room for two URLs' entries and a quarter: a third URL's pushes the
    // caches over, and removing the oldest URL's brings them under.
    let cap = size_a + size_b + size_b / 4;
    rig.cap(&cap.to_string());
    let c = rig.run_new("c").await;
    eventually("the first URL's entries pruned", || {
        a.iter().all(|p| !p.exists())
    })
    .await;
    let expected: BTreeSet<PathBuf> = b.union(&c).cloned().collect();
    assert_eq!(cache(&jobs), expected);
    assert!(bytes(&cache(&jobs)) <= cap);

    // b's entries in use: its mirror's lock held exclusively (a job
    // fetching it) and its snapshot's shared (a job mounting it).
    let held_mirror = b
        .iter()
        .find(|p| p.parent().unwrap().ends_with(".mirrors"))
        .unwrap();
    let mirror_lock = std::fs::File::open(held_mirror.with_extension("lock")).unwrap();
    let _mirror_lock = Flock::lock(mirror_lock, FlockArg::LockExclusive).unwrap();
    let _snapshot_lock = b
        .iter()
        .find(|p| p.parent().unwrap().ends_with(".snapshots"))
        .map(|snap| {
            let f = std::fs::File::open(snap.with_extension("lock")).unwrap();
            Flock::lock(f, FlockArg::LockShared).unwrap()
        });
    // A job on `a` again: its entries are made anew, and the caches are
    // over the cap; b's are the oldest but held, so c's go.
    let a2 = rig.run_new("a").await;
    assert_eq!(a2.len(), a.len());
    eventually("the third URL's entries pruned", || {
        c.iter().all(|p| !p.exists())
    })
    .await;
    let expected: BTreeSet<PathBuf> = b.union(&a2).cloned().collect();
    assert_eq!(cache(&jobs), expected);

    // `paddock gc` with a cap below one URL's entries: b's stay (held),
    // a2's go, named with their reason and size.
    rig.cap(&(size_b / 2).to_string());
    let sizes: Vec<(PathBuf, u64)> = a2
        .iter()
        .map(|p| (p.clone(), paddock::workspace::disk_usage::of(p).bytes))
        .collect();
    let out = rig.home.paddock(&["gc", "--json"], &[]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut pruned = report["pruned"].as_array().unwrap().clone();
    pruned.sort_by_key(|e| e["path"].as_str().unwrap().to_string());
    let mut expected: Vec<serde_json::Value> = sizes
        .iter()
        .map(|(p, n)| serde_json::json!({"path": p, "reason": "cap", "bytes": n}))
        .collect();
    expected.sort_by_key(|e| e["path"].as_str().unwrap().to_string());
    assert_eq!(pruned, expected);
    assert_eq!(cache(&jobs), b);
}

/// Jobs running while the cap is tiny: each job's own pass, and `paddock
/// gc` run over and over beside them, remove whatever no job uses, and
/// every job still ends `done` (its mirror held while it fetches and
/// clones, its snapshot held until its `meta/overlay` names it).
#[tokio::test(flavor = "multi_thread")]
async fn a_tiny_cap_does_not_break_jobs_running_beside_its_passes() {
    let rig = Rig::new().await;
    rig.cap("4096");
    let done = std::sync::atomic::AtomicBool::new(false);
    let gc_loop = async {
        let mut passes = 0;
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            let out = rig.home.paddock(&["gc", "--json"], &[]).await;
            assert_eq!(
                out.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            passes += 1;
        }
        passes
    };
    let jobs = async {
        for _ in 0..2 {
            tokio::join!(rig.run("a"), rig.run("b"), rig.run("a"));
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
    };
    let (passes, ()) = tokio::join!(gc_loop, jobs);
    assert!(passes > 0);
    // Nothing in use any more: the last passes leave nothing over 4 KiB.
    let out = rig.home.paddock(&["gc"], &[]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eventually("the caches emptied", || cache(&rig.home.jobs()).is_empty()).await;
}

/// `paddock serve` holds the cap from its start, before any job: two
/// URLs' entries made by `paddock run` under no cap, then a cap with room
/// for one URL's and a quarter, and `paddock serve` started (no job
/// submitted) removes the first URL's entries, the least recently used,
/// and leaves the second's. (`paddock run` makes no pass at its start:
/// its detached pass after the job holds the cap, off the job's path.)
#[tokio::test(flavor = "multi_thread")]
async fn serve_holds_the_cap_from_its_start() {
    let rig = Rig::new().await;
    let jobs = rig.home.jobs();
    rig.cap("\"unlimited\"");
    let a = rig.run_new("a").await;
    let b = rig.run_new("b").await;
    let size_b = bytes(&b);
    rig.cap(&(size_b + size_b / 4).to_string());
    let server = super::serve::Server::start(&rig.home, &[]).await;
    eventually("the first URL's entries pruned", || {
        a.iter().all(|p| !p.exists())
    })
    .await;
    assert_eq!(cache(&jobs), b, "{}", server.stderr());
    let mut server = server;
    nix::sys::signal::kill(server.pid(), nix::sys::signal::Signal::SIGTERM).unwrap();
    server.child.wait().await.unwrap();
}

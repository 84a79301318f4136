//! The setup cache benchmark (issue #15; run it with
//! `scripts/bench-setup-cache`): a small npm project (a committed
//! `package.json` and v3 lockfile naming one package) whose job runs the
//! real `npm ci` as its setup, through the job's egress proxy, against the
//! npm registry stand-in of `paddock-test-support` on loopback. Each round
//! is a fresh Paddock home (an empty setup cache) and two jobs of the same
//! repository one after the other: the first runs `npm ci` and stores what
//! it added, the second is restored from the cache. The setup's time is
//! read from each job's own events: from its first `setup_cache` status
//! (the key made, the cache looked up) to the `launching` status (the
//! engine about to start), so the first includes the store and the
//! second the restore. The engine is a stand-in shell script that reads
//! the installed package. Medians of `--runs` rounds (default 5), the
//! load average before and after.
//!
//! `--rung sandbox|process` (default: sandbox), `--paddock BIN` (default:
//! the `paddock` Cargo built beside this example).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::Instant;

use paddock::store::Store as _;
use paddock_protocol::event::{EventBody, Phase};
use paddock_test_support::bench::loadavg;
use paddock_test_support::git::git;
use paddock_test_support::npm_registry::{NpmRegistryStandIn, NPM_PACKAGE, NPM_VERSION};

struct Args {
    runs: usize,
    rung: String,
    paddock: PathBuf,
}

fn args() -> Args {
    let mut runs = 5;
    let mut rung = "sandbox".to_string();
    let mut paddock = None;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => runs = it.next().and_then(|v| v.parse().ok()).expect("--runs N"),
            "--rung" => rung = it.next().expect("--rung sandbox|process"),
            "--paddock" => paddock = it.next().map(PathBuf::from),
            other => panic!("unknown argument {other} (--runs N, --rung R, --paddock BIN)"),
        }
    }
    Args {
        runs,
        rung,
        paddock: paddock.unwrap_or_else(paddock_test_support::home::paddock_bin),
    }
}

/// The project, its spec and host profile in `dir`.
fn project(dir: &Path, registry: &NpmRegistryStandIn, rung: &str) -> PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    let manifest = serde_json::json!({
        "name": "project", "version": "1.0.0",
        "dependencies": {NPM_PACKAGE: NPM_VERSION},
    });
    std::fs::write(repo.join("package.json"), manifest.to_string()).unwrap();
    std::fs::write(repo.join("package-lock.json"), registry.lockfile("project")).unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "npm project"]);
    let at = format!("127.0.0.1:{}", registry.port);
    std::fs::write(
        dir.join("profile.toml"),
        format!(
            "id = \"bench\"\n[network]\nsetup_allow = [\"{at}\"]\nopen_addresses = [\"{at}\"]\n"
        ),
    )
    .unwrap();
    let engine = paddock_test_support::jobs::stand_in_codex(
        &dir.join("fakebin"),
        "cat node_modules/paddock-standin/index.js > /dev/null",
    );
    const ONE_TURN: &str = "[[turn]]\ntext = \"hi\"\nusage = { input = 1, output = 1 }\n";
    let spec = paddock_test_support::jobs::job(
        dir,
        "codex",
        &repo,
        paddock_test_support::jobs::SCRIPTED,
        Some(ONE_TURN),
    );
    paddock_test_support::jobs::use_engine_binary(&spec, &engine);
    paddock_test_support::jobs::on_rung(&spec, rung);
    let npm_ci = format!(
        "NO_PROXY= no_proxy= npm ci --registry {} --cache \"$HOME/.npm\" --fetch-retries 0 --no-audit --no-fund --no-update-notifier",
        registry.url()
    );
    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(
        &spec,
        format!(
            "{text}\n[budget]\nmax_usd = 1.0\n\n[setup]\ncommands = ['''{npm_ci}''']\nnetwork = [\"{at}\"]\n\n[policy]\nprofile = \"profile.toml\"\n"
        ),
    )
    .unwrap();
    spec
}

/// One job: its setup's seconds (first `setup_cache` status to
/// `launching`), whether it was restored, the whole run's seconds.
async fn job(args: &Args, dir: &Path, spec: &Path) -> (f64, bool, f64) {
    let started = Instant::now();
    let out = tokio::process::Command::new(&args.paddock)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--jobs-dir")
        .arg(dir.join("jobs"))
        .args(["run", "--json", spec.to_str().unwrap()])
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env_remove("PADDOCK_DB")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    let whole = started.elapsed().as_secs_f64();
    let rec: paddock_protocol::JobRecord = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no record ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    let store = paddock::store::SqliteStore::open(&dir.join("data/paddock.db"))
        .await
        .unwrap();
    let events = store.events(&rec.id, 0).await.unwrap();
    let at = |want: &dyn Fn(&EventBody) -> bool| {
        events
            .iter()
            .find(|e| want(&e.body))
            .unwrap_or_else(|| panic!("job {}: an event is missing: {events:?}", rec.id))
            .at
    };
    let start = at(&|b| {
        matches!(
            b,
            EventBody::Status {
                phase: Phase::SetupCache,
                ..
            }
        )
    });
    let end = at(&|b| {
        matches!(
            b,
            EventBody::Status {
                phase: Phase::Launching,
                ..
            }
        )
    });
    let restored = events.iter().any(|e| {
        matches!(&e.body, EventBody::Status { phase: Phase::SetupCache, detail: Some(d) } if d.starts_with("restored"))
    });
    ((end - start).as_seconds_f64(), restored, whole)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    let args = args();
    let registry = NpmRegistryStandIn::start().await;
    let before = loadavg();
    let (mut first, mut second, mut first_run, mut second_run) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..args.runs {
        let dir = tempfile::tempdir().unwrap();
        let spec = project(dir.path(), &registry, &args.rung);
        let (a, a_restored, a_whole) = job(&args, dir.path(), &spec).await;
        let (b, b_restored, b_whole) = job(&args, dir.path(), &spec).await;
        assert_eq!(
            (a_restored, b_restored),
            (false, true),
            "round {round}: the first job runs npm ci, the second is restored"
        );
        eprintln!("round {round}: first {a:.3} s, second {b:.3} s");
        first.push(a);
        second.push(b);
        first_run.push(a_whole);
        second_run.push(b_whole);
    }
    let after = loadavg();
    let (f, s) = (median(first), median(second));
    println!(
        "| setup of the same repository (`npm ci`, {} rung) | first: npm ci + store | second: restored | first / second |",
        args.rung
    );
    println!("| --- | --- | --- | --- |");
    println!(
        "| setup (first `setup_cache` event → `launching`), median of {} | {:.0} ms | {:.1} ms | {:.1}× |",
        args.runs,
        f * 1e3,
        s * 1e3,
        f / s
    );
    let (fr, sr) = (median(first_run), median(second_run));
    println!(
        "| whole `paddock run` | {:.0} ms | {:.0} ms | {:.2}× |",
        fr * 1e3,
        sr * 1e3,
        fr / sr
    );
    println!("\nload average before: {before}; after: {after}");
}

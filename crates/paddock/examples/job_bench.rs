//! The per-job overhead benchmark (issue #14; run it with
//! `scripts/bench-job`): the hello job (`examples/hello`) run by the real
//! Codex CLI against the scripted upstream, three ways, interleaved so load
//! changes hit each alike:
//!
//! - **bare**: `codex exec` by itself, in a fresh clone of the hello
//!   repository, against the same scripted upstream directly (a minimal
//!   `config.toml` like the one Paddock writes, no broker, no workspace),
//!   twice: through the npm launcher a user types (`codex`, a Node
//!   script), the reference of the "vs bare" ratio, and as the native
//!   binary behind it, which is the program Paddock starts
//!   (`engines::codex::native`); each bare run's directory is removed
//!   only after the last run (see `bare`);
//! - **process** and **sandbox**: `paddock run` of the hello job on each
//!   rung, one after another in one data directory per rung and case, as a
//!   user's jobs run (the mirror of a URL source fetched, not cloned; the
//!   engine's version remembered), after one untimed first job; with
//!   `--cold`, a fresh data directory per run instead (nothing cached that
//!   a first job would not have).
//!
//! The same three again on the hello repository grown to `--files` more
//! files (default 10,000 files of about 4 KB in nested directories, the
//! size issue #14 names; `--files 0` leaves it out), given to Paddock as a
//! local repository path (the bare run gets a fresh clone of it).
//!
//! For the Paddock runs it also prints where the time went, from the job's
//! own status events: provisioning → launching (the workspace, the
//! context, the version check), launching → turn completed (the broker,
//! the rung and the engine, the engine's turn), turn completed →
//! concluding (the engine's exit), concluding → publishing (the patch),
//! publishing → done (the branch, the closeout, the record), and the rest
//! of the process (start-up before the first event, exit after the last).
//! "Paddock's own time" is the whole run minus launching → turn completed;
//! that span holds the broker's and the rung's start (the sandbox's
//! namespaces, its PID 1) beside the engine's, so the first table also
//! gives the whole run less the last bare run's (the native binary's),
//! the part of the wall time no bare run has, rung included (noisier: it
//! holds the turns' differences too).
//! The engine's exit phase holds the engine's own shutdown after its
//! last event, which a bare run pays too: the bare runs time it (their
//! `turn.completed` line to their exit), and the first table also shows
//! Paddock's own time less the native binary's median, the part no bare
//! run has (the launcher's shutdown is longer, a Node process waiting
//! for its child: subtracting it would count part of Paddock's own time
//! as the engine's).
//! With `--pause MS`, each timed run (bare or Paddock's) starts that long
//! after the one before it ended, so that none follows a 10,000-file
//! overlay job's teardown (its detached remover unmounting and deleting
//! the trash) within a fraction of a second, as one does by default.
//! Medians of `--runs` rounds (default 7); the load average before and
//! after is printed, figures belong in BENCHMARKS.md only when it stayed
//! under 2.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use paddock::scripted::{RenderContext, Scenario, ScriptedServer};
use paddock::store::Store as _;
use paddock_protocol::event::{EventBody, Phase};
use paddock_test_support::bench::loadavg;
use paddock_test_support::git::git;
use time::OffsetDateTime;

struct Args {
    runs: usize,
    cold: bool,
    /// How long to wait before each timed run (`--pause MS`; none by
    /// default).
    pause: Duration,
    files: usize,
    paddock: PathBuf,
    codex: PathBuf,
    hello: PathBuf,
}

fn args() -> Args {
    let mut runs = 7;
    let mut files = 10_000;
    let mut cold = false;
    let mut pause = Duration::ZERO;
    let mut paddock = None;
    let mut codex = None;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => runs = it.next().and_then(|v| v.parse().ok()).expect("--runs N"),
            "--cold" => cold = true,
            "--pause" => {
                pause = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .map(Duration::from_millis)
                    .expect("--pause MS")
            }
            "--files" => files = it.next().and_then(|v| v.parse().ok()).expect("--files N"),
            "--paddock" => paddock = it.next().map(PathBuf::from),
            "--codex" => codex = it.next().map(PathBuf::from),
            other => {
                panic!("unknown argument {other} (--runs N, --files N, --cold, --pause MS, --paddock BIN, --codex BIN)")
            }
        }
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    Args {
        runs,
        cold,
        pause,
        files,
        paddock: paddock.expect("--paddock BIN (scripts/bench-job passes the release build)"),
        codex: codex
            .or_else(|| which::which("codex").ok())
            .expect("codex on PATH or --codex BIN (scripts/install-engines)"),
        hello: manifest
            .join("../../examples/hello")
            .canonicalize()
            .unwrap(),
    }
}

/// The hello repository with `files` more files of about 4 KB in nested
/// directories, committed and packed (as a long-lived repository is).
fn big_repo(args: &Args, scratch: &Path, files: usize) -> PathBuf {
    let repo = scratch.join(format!("hello-{files}"));
    git(
        scratch,
        &[
            "clone",
            "-q",
            "--branch",
            "main",
            args.hello.join("repo.bundle").to_str().unwrap(),
            repo.to_str().unwrap(),
        ],
    );
    let line = "fn sample() -> u64 { 42 } // padding padding padding padding\n";
    let body = line.repeat(4096 / line.len() + 1);
    for i in 0..files {
        let dir = repo.join(format!("src/m{:02}/n{:02}", i % 37, i % 11));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("f{i}.rs")), format!("// file {i}\n{body}")).unwrap();
    }
    git(&repo, &["add", "-A"]);
    git(
        &repo,
        &[
            "-c",
            "gc.auto=0",
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@localhost",
            "commit",
            "-q",
            "-m",
            "grow",
        ],
    );
    git(&repo, &["gc", "-q"]);
    repo
}

/// The program a bare run starts: the `codex` a user types (the npm
/// launcher), or the native binary behind it, which Paddock starts.
struct Engine<'a> {
    program: &'a Path,
    env: &'a [(String, String)],
}

/// One bare `codex exec` of the hello prompt by `engine` in a fresh clone
/// of `source` (not timed); its wall time, the time from its
/// `turn.completed` line to its exit (the engine's own shutdown), and its
/// directory, which the caller removes only once every run is done: a
/// 10,000-file clone removed between the timed runs would slow the next
/// runs' file creation on a file system without a journal (ext4 skips
/// inodes freed in the last minute, `recently_deleted`), a cost of the
/// bench, not of Paddock.
fn bare(
    engine: &Engine<'_>,
    base: &str,
    scratch: &Path,
    prompt: &str,
    source: &Path,
) -> (Duration, Duration, tempfile::TempDir) {
    let dir = tempfile::tempdir_in(scratch).unwrap();
    let work = dir.path().join("work");
    git(
        dir.path(),
        &[
            "clone",
            "-q",
            "--branch",
            "main",
            source.to_str().unwrap(),
            "work",
        ],
    );
    let home = dir.path().join("home");
    let codex_home = home.join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::write(
        codex_home.join("config.toml"),
        format!(
            "model = \"gpt-5.5\"\nmodel_provider = \"bench\"\ncheck_for_update_on_startup = false\n\
             [analytics]\nenabled = false\n[features]\nplugins = false\n\
             [shell_environment_policy]\ninherit = \"core\"\n\
             [model_providers.bench]\nname = \"bench\"\nbase_url = \"{base}\"\nenv_key = \"BENCH_KEY\"\n\
             wire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n"
        ),
    )
    .unwrap();
    let started = Instant::now();
    let mut child = Command::new(engine.program)
        .args([
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "-m",
            "gpt-5.5",
            "-",
        ])
        .current_dir(&work)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("CODEX_HOME", &codex_home)
        .env("BENCH_KEY", "bench")
        .envs(engine.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(prompt.as_bytes())
            .unwrap();
    }
    let mut stdout = String::new();
    let mut completed = None;
    {
        use std::io::BufRead as _;
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while lines.read_line(&mut line).unwrap() > 0 {
            if completed.is_none() && line.contains("\"turn.completed\"") {
                completed = Some(Instant::now());
            }
            stdout.push_str(&line);
            line.clear();
        }
    }
    let status = child.wait().unwrap();
    let took = started.elapsed();
    let completed = completed.filter(|_| status.success());
    let Some(completed) = completed else {
        panic!("bare codex failed: {stdout}");
    };
    (took, completed.elapsed(), dir)
}

/// The phases of one Paddock run, in milliseconds.
#[derive(Default, Clone)]
struct Phases {
    total: f64,
    startup: f64,
    provision: f64,
    engine: f64,
    exit: f64,
    patch: f64,
    publish: f64,
    after: f64,
}

impl Phases {
    fn own(&self) -> f64 {
        self.total - self.engine
    }
}

/// One `paddock run` of the hello job on `rung` (on the local repository
/// `repo` instead of the hello bundle, if given); its wall time and phases.
async fn paddock(args: &Args, home: &Path, rung: &str, repo: Option<&Path>) -> Phases {
    let fresh = tempfile::tempdir_in(home).unwrap();
    let dir: &Path = if args.cold { fresh.path() } else { home };
    for f in ["repo.bundle", "scenario.toml"] {
        std::fs::copy(args.hello.join(f), dir.join(f)).unwrap();
    }
    let mut spec = std::fs::read_to_string(args.hello.join("job.toml")).unwrap();
    if let Some(repo) = repo {
        spec = spec.replace(
            "url = \"repo.bundle\"",
            &format!("path = \"{}\"", repo.display()),
        );
    }
    std::fs::write(
        dir.join("job.toml"),
        format!("isolation = \"{rung}\"\n{spec}"),
    )
    .unwrap();
    let db = dir.join("paddock.db");
    let wall_start = OffsetDateTime::now_utc();
    let started = Instant::now();
    let out = Command::new(&args.paddock)
        .arg("--db")
        .arg(&db)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--jobs-dir")
        .arg(dir.join("jobs"))
        .args(["run", "--json", "job.toml"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let total = started.elapsed();
    let wall_end = wall_start + total;
    assert!(
        out.status.success(),
        "paddock run ({rung}) failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let record: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = record["id"].as_str().unwrap().to_string();
    if let Some(repo) = repo {
        // The job's branch reached the local source (the publish timed is
        // the one a user's first run of a ticket pays, not a refusal of a
        // branch an earlier round left); removed for the next round.
        let branch = format!("refs/heads/{}", record["branch"].as_str().unwrap());
        git(repo, &["rev-parse", "--verify", "--quiet", &branch]);
        git(repo, &["update-ref", "-d", &branch]);
    }
    let store = paddock::store::SqliteStore::open(&db).await.unwrap();
    let events = store.events(&id, 0).await.unwrap();
    // Left open, as every `paddock` command leaves its own: the last
    // connection's close would fold the log in and delete it, and the
    // next run would start a new one (a synced header) that no run after
    // a user's last command starts.
    std::mem::forget(store);
    let at = |want: Phase| {
        events
            .iter()
            .find_map(|e| match &e.body {
                EventBody::Status { phase, .. } if *phase == want => Some(e.at),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no {want:?} status in job {id}"))
    };
    let ms = |a: OffsetDateTime, b: OffsetDateTime| (b - a).as_seconds_f64() * 1000.0;
    let (prov, launch, turn, concl, publ, done) = (
        at(Phase::Provisioning),
        at(Phase::Launching),
        at(Phase::TurnCompleted),
        at(Phase::Concluding),
        at(Phase::Publishing),
        at(Phase::Done),
    );
    Phases {
        total: total.as_secs_f64() * 1000.0,
        startup: ms(wall_start, prov),
        provision: ms(prov, launch),
        engine: ms(launch, turn),
        exit: ms(turn, concl),
        patch: ms(concl, publ),
        publish: ms(publ, done),
        after: ms(done, wall_end),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    let args = args();
    let scratch = tempfile::tempdir().unwrap();
    let scenario = Scenario::load(&args.hello.join("scenario.toml")).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = ScriptedServer::start(
        listener,
        Arc::new(scenario),
        RenderContext {
            workdir: PathBuf::from("."),
        },
    )
    .unwrap();
    // The prompt Paddock would give is not what is measured here: the
    // scenario answers by turn, whatever the prompt says.
    let prompt = "Add a greeting file and fix the README typo.";
    println!(
        "job bench: the hello job × {} rounds, {} ms before each timed run; paddock: {}; codex: {}; load average before: {}\n",
        args.runs,
        args.pause.as_millis(),
        args.paddock.display(),
        args.codex.display(),
        loadavg()
    );
    let bundle = args.hello.join("repo.bundle");
    let big = (args.files > 0).then(|| big_repo(&args, scratch.path(), args.files));
    // Each case: its name, its source (the bare run's clone), the repository
    // Paddock is given (None: the hello job's bundle).
    let mut cases: Vec<(String, PathBuf, Option<PathBuf>)> =
        vec![("hello".to_string(), bundle.clone(), None)];
    if let Some(big) = &big {
        cases.push((
            format!("hello + {} files", args.files),
            big.clone(),
            Some(big.clone()),
        ));
    }
    // The bare runs: the launcher a user types, and the native binary
    // behind it, which is what Paddock starts (its shutdown is the one a
    // Paddock run's engine exit holds).
    let native = paddock::engines::codex::native::behind_launcher(&args.codex);
    let launcher = Engine {
        program: &args.codex,
        env: &[],
    };
    let native = native.as_ref().map(|n| Engine {
        program: &n.program,
        env: &n.env,
    });
    let engines: Vec<(&str, &Engine<'_>)> =
        std::iter::once(("`codex exec`, npm launcher", &launcher))
            .chain(native.as_ref().map(|n| ("`codex exec`, native binary", n)))
            .collect();
    let mut bare_ms: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); engines.len()]; cases.len()];
    let mut shutdown_ms: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); engines.len()]; cases.len()];
    // Removed once every run is done (see `bare`).
    let mut bare_dirs = Vec::new();
    // One data directory per case and rung, its first job untimed.
    let homes: Vec<Vec<PathBuf>> = (0..cases.len())
        .map(|i| {
            ["process", "sandbox"]
                .iter()
                .map(|rung| {
                    let home = scratch.path().join(format!("home-{i}-{rung}"));
                    std::fs::create_dir_all(&home).unwrap();
                    home
                })
                .collect()
        })
        .collect();
    if !args.cold {
        for (i, (_, _, repo)) in cases.iter().enumerate() {
            for (j, rung) in ["process", "sandbox"].iter().enumerate() {
                paddock(&args, &homes[i][j], rung, repo.as_deref()).await;
            }
        }
    }
    let mut runs: Vec<Vec<(&str, Vec<Phases>)>> = cases
        .iter()
        .map(|_| vec![("process", Vec::new()), ("sandbox", Vec::new())])
        .collect();
    for _ in 0..args.runs {
        for (i, (_, source, repo)) in cases.iter().enumerate() {
            for (k, (_, engine)) in engines.iter().enumerate() {
                // The scripted upstream runs on the runtime's other threads.
                tokio::time::sleep(args.pause).await;
                let (wall, shutdown, dir) = tokio::task::block_in_place(|| {
                    bare(engine, &server.base, scratch.path(), prompt, source)
                });
                bare_ms[i][k].push(wall.as_secs_f64() * 1000.0);
                shutdown_ms[i][k].push(shutdown.as_secs_f64() * 1000.0);
                bare_dirs.push(dir);
            }
            for (j, (rung, v)) in runs[i].iter_mut().enumerate() {
                tokio::time::sleep(args.pause).await;
                v.push(paddock(&args, &homes[i][j], rung, repo.as_deref()).await);
            }
        }
    }
    drop(bare_dirs);
    println!("| case | run | wall [ms] | vs bare `codex exec` | more than the last bare run [ms] | Paddock's own [ms] | less the engine's own shutdown [ms] |");
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: |");
    for (i, (case, _, _)) in cases.iter().enumerate() {
        let bare = median(bare_ms[i][0].clone());
        // The bare run compared with and the shutdown subtracted: the
        // native binary's when it was run (Paddock's engine), else the
        // launcher's.
        let (mut closest, mut shutdown) = (bare, 0.0);
        for (k, (name, _)) in engines.iter().enumerate() {
            closest = median(bare_ms[i][k].clone());
            shutdown = median(shutdown_ms[i][k].clone());
            println!(
                "| {case} | bare {name} (turn completed → exit: {shutdown:.0} ms) | {closest:.0} | {:.2}× | – | – | – |",
                closest / bare
            );
        }
        for (rung, v) in &runs[i] {
            let total = median(v.iter().map(|p| p.total).collect());
            let own = median(v.iter().map(Phases::own).collect());
            println!(
                "| {case} | `paddock run` ({rung}) | {total:.0} | {:.2}× | {:.0} | {own:.0} | {:.0} |",
                total / bare,
                total - closest,
                own - shutdown
            );
        }
    }
    println!("\nWhere Paddock's time goes (medians, ms):\n");
    println!("| case | rung | start-up | provision + context | engine (broker, rung, turn) | engine exit | patch | publish + record | exit |");
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for ((case, _, _), runs) in cases.iter().zip(&runs) {
        for (rung, v) in runs {
            let m = |f: fn(&Phases) -> f64| median(v.iter().map(f).collect());
            println!(
                "| {case} | {rung} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
                m(|p| p.startup),
                m(|p| p.provision),
                m(|p| p.engine),
                m(|p| p.exit),
                m(|p| p.patch),
                m(|p| p.publish),
                m(|p| p.after),
            );
        }
    }
    println!("\nload average after: {}", loadavg());
}

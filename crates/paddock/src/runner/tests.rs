//! The runner driven as a library, on the fake rung and a temp SQLite
//! store: what a job records and leaves, without spawning the binary.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use paddock_protocol::{EventBody, JobSpec, JobStatus, Phase};

use super::*;
use crate::rung::fake::{FakeEngine, FakeRung};
use crate::store::{SqliteStore, StoreError};

/// A Codex turn that completes.
pub(crate) const DONE: &[&str] = &[
    r#"{"type":"thread.started","thread_id":"t-1"}"#,
    r#"{"type":"turn.started"}"#,
    r#"{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"Done."}}"#,
    r#"{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"output_tokens":2}}"#,
];

/// A host in a temp directory: a repository, a stand-in Codex binary (for
/// the version check), a scenario, a store and paths.
pub(crate) struct Host {
    pub dir: tempfile::TempDir,
    pub paths: Paths,
    pub store: SharedStore,
}

fn git(dir: &Path, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        // A fixed date, so the same commit each run: the one whose id
        // begins like its tree's (`85`), which shares the tree's fan-out
        // directory under `.git/objects` (a kept tree's count of entries
        // once flaked on it).
        .env("GIT_AUTHOR_DATE", "@1700000053 +0000")
        .env("GIT_COMMITTER_DATE", "@1700000053 +0000")
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

impl Host {
    pub async fn new() -> Host {
        let dir = tempfile::tempdir().unwrap();
        let root = crate::paths::canonical(dir.path()).unwrap();
        let repo = root.join("repo");
        std::fs::create_dir(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("README.md"), "hello\n").unwrap();
        git(&repo, &["add", "."]);
        git(&repo, &["commit", "-q", "-m", "init"]);
        let bin = root.join("bin");
        std::fs::create_dir(&bin).unwrap();
        let codex = bin.join("codex");
        paddock_test_support::script::write_script(
            &codex,
            &format!(
                "#!/bin/sh\necho 'codex-cli {}'\n",
                crate::engines::codex::PIN.version
            ),
        );
        std::fs::write(
            root.join("scenario.toml"),
            "[[turn]]\ntext = \"hi\"\nusage = { input = 1, output = 1 }\n",
        )
        .unwrap();
        let paths = Paths::under(&root.join("data"));
        std::fs::create_dir_all(&paths.jobs).unwrap();
        let store: SharedStore =
            Arc::new(SqliteStore::open(paths.db.file().unwrap()).await.unwrap());
        Host { dir, paths, store }
    }

    pub fn root(&self) -> PathBuf {
        crate::paths::canonical(self.dir.path()).unwrap()
    }

    /// A scripted Codex job on the `process` rung, with a budget.
    pub fn spec(&self) -> JobSpec {
        let root = self.root();
        let text = format!(
            "isolation = \"process\"\n\
             [ticket]\nid = \"T-1\"\ntitle = \"t\"\nproject = \"p\"\n\
             [repository]\npath = \"{repo}\"\nbase_ref = \"main\"\n\
             [engine]\nkind = \"codex\"\nmodel = \"gpt-5.5\"\nbinary = \"{bin}\"\n\
             [upstream]\nprovider = \"scripted\"\nscenario = \"{scenario}\"\nallow_unpriced = true\n\
             [limits]\ntimeout_secs = 30\n\
             [budget]\nmax_usd = 1.0\n",
            repo = root.join("repo").display(),
            bin = root.join("bin/codex").display(),
            scenario = root.join("scenario.toml").display(),
        );
        JobSpec::from_toml(&text, &root.join("job.toml")).unwrap()
    }

    /// `spec` admitted by `runner` and queued in this host's store (no
    /// priority, following nothing).
    pub async fn enqueue(&self, runner: &Runner, spec: &JobSpec) -> Admitted {
        let admitted = runner.admit(spec).await.unwrap();
        self.store
            .enqueue_job(
                &admitted.record(JobStatus::Queued),
                admitted.spec_json(),
                0,
                None,
            )
            .await
            .unwrap();
        admitted
    }

    /// This test host's identity, its heartbeat renewed every 10 s.
    pub fn liveness(&self) -> crate::heartbeat::Liveness {
        crate::heartbeat::Liveness {
            owner: crate::host_id::owner(&self.paths.jobs).unwrap(),
            interval: std::time::Duration::from_secs(10),
            ttl: std::time::Duration::from_secs(60),
            requeues: 1,
            cancel_poll: std::time::Duration::from_secs(1),
        }
    }

    /// A runner on `rung` (both rungs are it).
    pub fn runner(&self, rung: Arc<FakeRung>) -> Runner {
        self.runner_with(self.store.clone(), rung)
    }

    pub fn runner_with(&self, store: SharedStore, rung: Arc<FakeRung>) -> Runner {
        self.runner_beating(store, rung, self.liveness())
    }

    /// [`Host::runner_with`] renewing heartbeats as `liveness` says.
    pub fn runner_beating(
        &self,
        store: SharedStore,
        rung: Arc<FakeRung>,
        liveness: crate::heartbeat::Liveness,
    ) -> Runner {
        self.runner_on(
            store,
            crate::rung::Rungs {
                process: rung.clone(),
                sandbox: rung,
            },
            liveness,
        )
    }

    /// A runner on `rungs`.
    pub fn runner_on(
        &self,
        store: SharedStore,
        rungs: crate::rung::Rungs,
        liveness: crate::heartbeat::Liveness,
    ) -> Runner {
        let root = self.root();
        Runner::with_rungs(
            store,
            RunnerConfig {
                paths: self.paths.clone(),
                prices: Arc::new(PriceTable::effective(None).unwrap()),
                host_path: Some(std::ffi::OsString::from("/usr/bin:/bin")),
                cwd: root.clone(),
                host_dir: root.join("host"),
                helper_exe: root.join("bin/paddock-not-used"),
                cgroup_root: None,
                liveness,
                host_profile: None,
                disk_reserve: 0,
                tools: Default::default(),
                host_secrets: Vec::new(),
                source_within: None,
            },
            rungs,
        )
    }

    /// The job directories and lease files left under the jobs directory,
    /// and what of the trash its background remover has not deleted
    /// within 10 s (as `.trash/NAME`).
    pub fn left(&self) -> Vec<String> {
        let trash = self.paths.jobs.join(crate::workspace::trash::TRASH);
        for _ in 0..200 {
            if !crate::workspace::trash::has_entries(&self.paths.jobs) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let skip = [
            ".leases",
            crate::workspace::trash::TRASH,
            crate::workspace::trash::TRASH_LOCK,
            crate::engines::version::REMEMBERED,
            // The jobs directory's identity, kept on purpose.
            crate::host_id::FILE,
            // The cache of base commits' snapshots (overlay workspaces),
            // shared by jobs and pruned by the reaper.
            crate::workspace::SNAPSHOTS,
        ];
        let mut out: Vec<String> = std::fs::read_dir(&self.paths.jobs)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !skip.contains(&n.as_str()))
            .collect();
        if let Ok(left) = std::fs::read_dir(&trash) {
            out.extend(
                left.flatten()
                    .map(|e| format!(".trash/{}", e.file_name().to_string_lossy())),
            );
        }
        if let Ok(leases) = std::fs::read_dir(self.paths.jobs.join(".leases")) {
            out.extend(
                leases
                    .flatten()
                    .map(|e| format!(".leases/{}", e.file_name().to_string_lossy())),
            );
        }
        out.sort();
        out
    }
}

/// The phases of a job's status events, in order.
pub(super) fn phases(events: &[paddock_protocol::AgentEvent]) -> Vec<Phase> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::Status { phase, .. } => Some(*phase),
            _ => None,
        })
        .collect()
}

/// Runs `spec` on `runner` to its end, following its updates.
pub(super) async fn run(
    runner: &Runner,
    spec: &JobSpec,
) -> (Result<RunResult, RunError>, Vec<JobUpdate>) {
    run_from(runner, spec, None).await
}

/// [`run`] of a spec read from `spec_file` (`Admitted::spec_file`, as
/// `paddock run` sets it).
pub(super) async fn run_from(
    runner: &Runner,
    spec: &JobSpec,
    spec_file: Option<&str>,
) -> (Result<RunResult, RunError>, Vec<JobUpdate>) {
    let mut admitted = runner.admit(spec).await.unwrap();
    admitted.spec_file = spec_file.map(std::path::PathBuf::from);
    let mut job = runner.start(admitted, std::future::pending());
    let mut seen = Vec::new();
    while let Ok(u) = job.events.recv().await {
        seen.push(u);
    }
    (job.finished().await, seen)
}

#[tokio::test]
async fn a_job_on_the_fake_rung_runs_to_done_and_leaves_nothing() {
    let host = Host::new().await;
    let rung = Arc::new(FakeRung::new(FakeEngine {
        stdout: DONE.iter().map(|s| s.to_string()).collect(),
        ..FakeEngine::default()
    }));
    let runner = host.runner(rung.clone());
    let (result, seen) = run(&runner, &host.spec()).await;
    let result = result.unwrap();
    assert_eq!(
        (result.record.status, result.record.reason.clone()),
        (JobStatus::Done, None)
    );
    let events = host.store.events(&result.record.id, 0).await.unwrap();
    assert_eq!(
        phases(&events),
        vec![
            Phase::Provisioning,
            // The workspace's layout, and why.
            Phase::Provisioning,
            Phase::Launching,
            Phase::SessionStarted,
            Phase::TurnStarted,
            Phase::TurnCompleted,
            Phase::Concluding,
            Phase::Publishing,
            Phase::Done
        ]
    );
    // Every stored event reached the followers, in order.
    let followed: Vec<u64> = seen
        .iter()
        .filter_map(|u| match u {
            JobUpdate::Event(e) => Some(e.seq),
            JobUpdate::Call { .. } => None,
        })
        .collect();
    assert_eq!(followed, (1..=events.len() as u64).collect::<Vec<_>>());
    assert_eq!(host.left(), Vec::<String>::new());
    // The engine got its prompt on stdin, and ran as Codex.
    let launched = rung.launched.lock().unwrap().clone();
    assert_eq!(launched.len(), 1);
    assert!(!rung.stdin.lock().unwrap().is_empty());
}

/// An engine binary that is not there: `Runner::engine_here` (the
/// admission of a job that runs on this host) refuses it naming
/// `engine.binary`; `Runner::admit` alone (a server's submission, which
/// another server may run) admits it, and provisioning fails the job with
/// the same words after the host that cannot run it (its name and jobs
/// directory: a fleet's record is read from anywhere), an `error` event,
/// its input's fault, its workspace never made (the check kept there: the
/// binary may go after admission). Before, the failure named no host.
#[tokio::test]
async fn an_engine_that_is_not_there_is_refused_here_and_failed_at_provisioning() {
    let host = Host::new().await;
    let rung = Arc::new(FakeRung::new(FakeEngine {
        stdout: DONE.iter().map(|s| s.to_string()).collect(),
        ..FakeEngine::default()
    }));
    let runner = host.runner(rung.clone());
    let mut spec = host.spec();
    let gone = host.root().join("bin/gone");
    spec.engine.binary = Some(gone.clone());
    let said = format!(
        "engine codex: engine.binary {} does not exist or is not executable (set \
         engine.binary to the engine's executable, or remove it to run `codex` from PATH)",
        gone.display()
    );
    let refused = runner.engine_here(&spec).map_err(|e| e.to_string());
    let me = &runner.config().liveness.owner;
    let failed = format!(
        "host {} (jobs directory {}) cannot run the job: {said}",
        me.name, me.host
    );
    let result = run(&runner, &spec).await.0.unwrap();
    let events = host.store.events(&result.record.id, 0).await.unwrap();
    let errors: Vec<(String, bool)> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::Error { message, fatal, .. } => Some((message.clone(), *fatal)),
            _ => None,
        })
        .collect();
    assert_eq!(
        (
            refused,
            result.record.status,
            result.record.reason.clone(),
            result.bad_input,
            errors,
            rung.launched.lock().unwrap().len(),
            host.left(),
        ),
        (
            Err(format!("job refused before start: {said}")),
            JobStatus::Failed,
            Some(failed.clone()),
            true,
            vec![(failed, true)],
            0,
            Vec::<String>::new(),
        )
    );
}

/// The patch's early reads (the base's paths and tree, the user's
/// excludes file: three `git` processes) start once the engine is
/// launched, beside its turn, not during provisioning, where they took
/// the launch's CPU on a busy host (issue #14); they still start.
#[tokio::test]
async fn the_patchs_early_reads_start_once_the_engine_is_launched() {
    let host = Host::new().await;
    let rung = Arc::new(FakeRung::new(FakeEngine {
        stdout: DONE.iter().map(|s| s.to_string()).collect(),
        ..FakeEngine::default()
    }));
    let runner = host.runner(rung.clone());
    let (result, _) = run(&runner, &host.spec()).await;
    assert_eq!(result.unwrap().record.status, JobStatus::Done);
    let seen: Vec<(bool, bool)> = rung
        .early_reads
        .lock()
        .unwrap()
        .iter()
        .map(|(at_launch, flag)| (*at_launch, flag.load(std::sync::atomic::Ordering::SeqCst)))
        .collect();
    assert_eq!(seen, vec![(false, true)]);
}

/// A log written to memory.
#[derive(Debug, Clone, Default)]
struct Log(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Log {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A heartbeat renewal that lands after the job's own final record (the
/// store refuses it: the job is no longer `running`) is not a reclaim:
/// the job ends `done`, as recorded, and nothing warns that it was taken.
/// The store lingers 50 ms after the final record and the heartbeat is
/// renewed every 5 ms, so ticks fall between the record and the run's end.
#[tokio::test]
async fn a_heartbeat_after_the_jobs_own_end_is_not_a_reclaim() {
    // This thread's log (the runtime's one thread runs the heartbeat too).
    let log = Log::default();
    let writer = log.clone();
    let _logging = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::WARN)
            .finish(),
    );
    let host = Host::new().await;
    let mut liveness = host.liveness();
    liveness.interval = std::time::Duration::from_millis(5);
    let mut ends = Vec::new();
    for _ in 0..3 {
        let rung = Arc::new(FakeRung::new(FakeEngine {
            stdout: DONE.iter().map(|s| s.to_string()).collect(),
            ..FakeEngine::default()
        }));
        let store: SharedStore = Arc::new(FailingStore {
            inner: host.store.clone(),
            fails: |_| false,
            linger: std::time::Duration::from_millis(50),
            reaps: None,
            settle_fails: std::sync::atomic::AtomicUsize::new(0),
            hold: None,
        });
        let runner = host.runner_beating(store, rung, liveness.clone());
        let (result, _) = run(&runner, &host.spec()).await;
        ends.push(result.map(|r| r.record.status).map_err(|e| e.to_string()));
    }
    assert_eq!(ends, vec![Ok(JobStatus::Done); 3]);
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let taken: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("no longer this host's"))
        .collect();
    assert_eq!(taken, Vec::<&str>::new());
}

#[tokio::test]
async fn the_job_id_is_minted_at_admission() {
    let host = Host::new().await;
    let runner = host.runner(Arc::new(FakeRung::new(FakeEngine {
        stdout: DONE.iter().map(|s| s.to_string()).collect(),
        ..FakeEngine::default()
    })));
    let admitted = runner.admit(&host.spec()).await.unwrap();
    let id = admitted.id.clone();
    // Admitted, not started: the store has no such job yet.
    assert_eq!(host.store.job(&id).await.unwrap(), None);
    let job = runner.start(admitted, std::future::pending());
    assert_eq!(job.id, id);
    let result = job.finished().await.unwrap();
    assert_eq!(result.record.id, id);
}

#[tokio::test]
async fn a_crashed_engine_fails_with_its_stderr_tail() {
    let host = Host::new().await;
    let runner = host.runner(Arc::new(FakeRung::new(FakeEngine {
        stderr: b"boom: out of cheese\n".to_vec(),
        exit_code: 3,
        ..FakeEngine::default()
    })));
    let (result, _) = run(&runner, &host.spec()).await;
    let record = result.unwrap().record;
    assert_eq!(record.status, JobStatus::Failed);
    assert_eq!(record.engine_exit_code, Some(3));
    let reason = record.reason.unwrap();
    assert!(reason.ends_with(": boom: out of cheese"), "{reason}");
    assert_eq!(host.left(), Vec::<String>::new());
}

#[tokio::test]
async fn a_cancelled_job_is_cancelled_and_leaves_nothing() {
    let host = Host::new().await;
    let runner = host.runner(Arc::new(FakeRung::new(FakeEngine {
        hang: true,
        ..FakeEngine::default()
    })));
    let admitted = runner.admit(&host.spec()).await.unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let job = runner.start(admitted, async move {
        let _ = rx.await;
    });
    let mut events = job.events.resubscribe();
    // Cancel once the engine is launching.
    while let Ok(u) = events.recv().await {
        if matches!(&u, JobUpdate::Event(e) if matches!(e.body, EventBody::Status { phase: Phase::Launching, .. }))
        {
            break;
        }
    }
    tx.send(()).unwrap();
    let record = job.finished().await.unwrap().record;
    assert_eq!(
        (record.status, record.reason),
        (JobStatus::Cancelled, Some("cancelled".into()))
    );
    assert_eq!(host.left(), Vec::<String>::new());
}

/// A cancel asked by another process on the same SQLite database (its own
/// store handle, as `paddock cancel` has) reaches a running job at once,
/// woken by the cancel file the request touches: here the job's poll and
/// renewal are an hour apart, so the job ends only if it is woken. Before,
/// SQLite had no cross-process wake-up and such a cancel waited for the
/// poll (1 s by default; here the test would time out).
#[tokio::test]
async fn a_cancel_from_another_process_on_sqlite_wakes_the_job() {
    let host = Host::new().await;
    let mut liveness = host.liveness();
    liveness.interval = std::time::Duration::from_secs(3600);
    liveness.cancel_poll = std::time::Duration::from_secs(3600);
    let rung = Arc::new(FakeRung::new(FakeEngine {
        hang: true,
        ..FakeEngine::default()
    }));
    // What `paddock serve` asks of its store (a `paddock run` finds
    // another process's cancel at its poll).
    host.store.watch_other_processes();
    let runner = host.runner_beating(host.store.clone(), rung, liveness);
    let admitted = runner.admit(&host.spec()).await.unwrap();
    let id = admitted.id.clone();
    let job = runner.start(admitted, std::future::pending());
    let mut events = job.events.resubscribe();
    while let Ok(u) = events.recv().await {
        if matches!(&u, JobUpdate::Event(e) if matches!(e.body, EventBody::Status { phase: Phase::Launching, .. }))
        {
            break;
        }
    }
    let other: SharedStore = Arc::new(
        SqliteStore::open(host.paths.db.file().unwrap())
            .await
            .unwrap(),
    );
    let asked = other
        .request_cancel(&id, "there", time::OffsetDateTime::now_utc())
        .await
        .unwrap();
    let record = tokio::time::timeout(std::time::Duration::from_secs(60), job.finished())
        .await
        .expect("the job was not woken by the cancel")
        .unwrap()
        .record;
    // Who asked, in the reason (before: plain `cancelled`).
    let reason = asked_reason(&*host.store, &id).await;
    assert_eq!(
        (asked, record.status, record.reason),
        (
            Some(host.liveness().owner),
            JobStatus::Cancelled,
            Some(reason)
        )
    );
    assert_eq!(host.left(), Vec::<String>::new());
}

/// The reason of a job stopped on the cancel `there` asked through the
/// store: `cancelled, asked by there at <its time>`.
async fn asked_reason(store: &dyn crate::store::Store, id: &str) -> String {
    let at = store
        .cancel_requested(id)
        .await
        .unwrap()
        .unwrap()
        .at
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    format!("cancelled, asked by there at {at}")
}

/// A cancel that resolved before the engine's launch starts no engine:
/// the job ends `cancelled` as a cancel of a running one does, nothing
/// launched, nothing left.
#[tokio::test]
async fn a_cancel_before_the_launch_starts_no_engine() {
    let host = Host::new().await;
    let rung = Arc::new(FakeRung::new(FakeEngine::default()));
    let runner = host.runner(rung.clone());
    let admitted = runner.admit(&host.spec()).await.unwrap();
    let record = runner
        .start(admitted, async {})
        .finished()
        .await
        .unwrap()
        .record;
    assert_eq!(
        (
            record.status,
            record.reason,
            rung.launched.lock().unwrap().len()
        ),
        (JobStatus::Cancelled, Some("cancelled".into()), 0)
    );
    assert_eq!(host.left(), Vec::<String>::new());
}

/// A job claimed from the queue that another process asked to cancel
/// through the store before its runner started (a server answered 202
/// `requested`) starts no engine: the request is read before anything
/// runs, not at the heartbeat task's first poll a second later.
#[tokio::test]
async fn a_claimed_job_asked_to_cancel_before_it_starts_launches_nothing() {
    let host = Host::new().await;
    let rung = Arc::new(FakeRung::new(FakeEngine::default()));
    let runner = host.runner(rung.clone());
    let admitted = host.enqueue(&runner, &host.spec()).await;
    let now = time::OffsetDateTime::now_utc();
    let owner = host.liveness().owner;
    let claimed = host
        .store
        .claim_job(&[], &owner, now, &[])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            claimed.id.as_str(),
            host.store
                .request_cancel(&claimed.id, "there", now)
                .await
                .unwrap()
        ),
        (admitted.id.as_str(), Some(owner))
    );
    let lease = Lease::take(&host.paths.jobs, &admitted.id).unwrap();
    let record = runner
        .start_claimed(admitted, lease, std::future::pending())
        .finished()
        .await
        .unwrap()
        .record;
    let reason = asked_reason(&*host.store, &record.id).await;
    assert_eq!(
        (
            record.status,
            record.reason,
            rung.launched.lock().unwrap().len()
        ),
        (JobStatus::Cancelled, Some(reason), 0)
    );
    assert_eq!(host.left(), Vec::<String>::new());
}

/// A store that fails to append the events `fails` picks (a full disk at
/// that moment), takes `linger` more after writing a job's final record,
/// runs a reaper pass where `reaps` says, and is the SQLite store
/// otherwise.
#[derive(Debug)]
pub(crate) struct FailingStore {
    pub inner: SharedStore,
    pub fails: fn(&paddock_protocol::AgentEvent) -> bool,
    pub linger: std::time::Duration,
    pub reaps: Option<ReapAt>,
    /// How many of the next settlings of a model call's row fail (a full
    /// disk at that moment).
    pub settle_fails: std::sync::atomic::AtomicUsize,
    /// Where the first listing of running jobs (a reaper pass's) waits.
    pub hold: Option<Arc<Hold>>,
}

/// Holds the first `running_jobs` read of a [`FailingStore`] (a reaper
/// pass's, in the store) until `release` is notified; `entered` is
/// notified once it is held. Later reads pass.
#[derive(Debug, Default)]
pub(crate) struct Hold {
    pub taken: std::sync::atomic::AtomicBool,
    pub entered: tokio::sync::Notify,
    pub release: tokio::sync::Notify,
}

/// Where a [`FailingStore`] runs a full reaper pass (`paddock gc`'s) of
/// `paths` with `liveness`, and the reports of those passes: a pass that
/// falls in a window between two steps of a starting job.
#[derive(Debug)]
pub(crate) struct ReapAt {
    pub step: ReapStep,
    pub paths: Paths,
    pub liveness: crate::heartbeat::Liveness,
    pub reports: std::sync::Mutex<Vec<crate::reaper::Report>>,
    /// How long reading a stored spec takes (a slow re-admission).
    pub slow_spec: std::time::Duration,
}

/// The store call a [`ReapAt`] pass follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReapStep {
    /// Right after a job's owned record is inserted (a turn's).
    InsertOwned,
    /// Right after a job's stored spec is read (a claimed job's
    /// re-admission).
    ReadSpec,
    /// Right before a claimed job is put back in the queue (a server
    /// that may not run it passed it over, its lease given up).
    Unclaim,
}

impl FailingStore {
    /// The SQLite store `inner` with a reaper pass after `step`.
    pub(crate) fn reaping(inner: SharedStore, reaps: ReapAt) -> FailingStore {
        FailingStore {
            inner,
            fails: |_| false,
            linger: std::time::Duration::ZERO,
            reaps: Some(reaps),
            settle_fails: std::sync::atomic::AtomicUsize::new(0),
            hold: None,
        }
    }

    async fn reap_after(&self, step: ReapStep) {
        if let Some(at) = self.reaps.as_ref().filter(|at| at.step == step) {
            let report = crate::reaper::reap_with(&at.paths, &*self.inner, &at.liveness, &[]).await;
            at.reports.lock().unwrap().push(report);
        }
    }
}

#[async_trait::async_trait]
impl crate::store::Store for FailingStore {
    async fn insert_job(
        &self,
        job: &paddock_protocol::JobRecord,
        spec_json: &str,
    ) -> Result<(), StoreError> {
        self.inner.insert_job(job, spec_json).await
    }
    async fn finish_job(
        &self,
        job: &paddock_protocol::JobRecord,
        from: JobStatus,
    ) -> Result<(), StoreError> {
        self.inner.finish_job(job, from).await?;
        if job.status != JobStatus::Running {
            tokio::time::sleep(self.linger).await;
        }
        Ok(())
    }
    async fn job(&self, id: &str) -> Result<Option<paddock_protocol::JobRecord>, StoreError> {
        self.inner.job(id).await
    }
    async fn job_spec(&self, id: &str) -> Result<Option<String>, StoreError> {
        let spec = self.inner.job_spec(id).await;
        if let Some(at) = &self.reaps {
            tokio::time::sleep(at.slow_spec).await;
        }
        self.reap_after(ReapStep::ReadSpec).await;
        spec
    }
    async fn set_closeout(&self, id: &str, text: &str) -> Result<(), StoreError> {
        self.inner.set_closeout(id, text).await
    }
    async fn closeout(&self, id: &str) -> Result<Option<String>, StoreError> {
        self.inner.closeout(id).await
    }
    async fn set_engine_session(&self, id: &str, session: &str) -> Result<(), StoreError> {
        self.inner.set_engine_session(id, session).await
    }
    async fn engine_session(&self, id: &str) -> Result<Option<String>, StoreError> {
        self.inner.engine_session(id).await
    }
    async fn jobs(&self, limit: u32) -> Result<Vec<paddock_protocol::JobRecord>, StoreError> {
        self.inner.jobs(limit).await
    }
    async fn insert_owned_job(
        &self,
        job: &paddock_protocol::JobRecord,
        spec_json: &str,
        owner: &crate::store::Owner,
        at: time::OffsetDateTime,
    ) -> Result<(), StoreError> {
        self.inner
            .insert_owned_job(job, spec_json, owner, at)
            .await?;
        self.reap_after(ReapStep::InsertOwned).await;
        Ok(())
    }
    async fn heartbeat(
        &self,
        id: &str,
        host: &str,
        at: time::OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.inner.heartbeat(id, host, at).await
    }
    async fn reclaim_job(&self, reclaim: &crate::store::Reclaim<'_>) -> Result<bool, StoreError> {
        self.inner.reclaim_job(reclaim).await
    }
    async fn running_jobs(&self) -> Result<Vec<crate::store::RunningJob>, StoreError> {
        if let Some(hold) = &self.hold {
            if !hold.taken.swap(true, std::sync::atomic::Ordering::SeqCst) {
                hold.entered.notify_one();
                hold.release.notified().await;
            }
        }
        self.inner.running_jobs().await
    }
    async fn request_cancel(
        &self,
        id: &str,
        by: &str,
        at: time::OffsetDateTime,
    ) -> Result<Option<crate::store::Owner>, StoreError> {
        self.inner.request_cancel(id, by, at).await
    }
    async fn cancel_requested(
        &self,
        id: &str,
    ) -> Result<Option<crate::store::CancelRequest>, StoreError> {
        self.inner.cancel_requested(id).await
    }
    async fn cancel_notices(&self) -> tokio::sync::broadcast::Receiver<String> {
        self.inner.cancel_notices().await
    }
    async fn job_owner(&self, id: &str) -> Result<Option<crate::store::Owner>, StoreError> {
        self.inner.job_owner(id).await
    }
    async fn claim_standing(
        &self,
        id: &str,
    ) -> Result<Option<crate::store::ClaimStanding>, StoreError> {
        self.inner.claim_standing(id).await
    }
    async fn job_owners(
        &self,
        limit: u32,
    ) -> Result<Vec<(String, crate::store::Owner)>, StoreError> {
        self.inner.job_owners(limit).await
    }
    async fn enqueue_job(
        &self,
        job: &paddock_protocol::JobRecord,
        spec_json: &str,
        priority: i64,
        follows: Option<&crate::store::Follows>,
    ) -> Result<(), StoreError> {
        self.inner
            .enqueue_job(job, spec_json, priority, follows)
            .await
    }
    async fn job_follows(&self, id: &str) -> Result<Option<crate::store::Follows>, StoreError> {
        self.inner.job_follows(id).await
    }
    async fn claim_job(
        &self,
        lanes: &[crate::store::Lane],
        owner: &crate::store::Owner,
        at: time::OffsetDateTime,
        skip: &[String],
    ) -> Result<Option<paddock_protocol::JobRecord>, StoreError> {
        self.inner.claim_job(lanes, owner, at, skip).await
    }
    async fn unclaim_job(&self, id: &str, host: &str, reason: &str) -> Result<bool, StoreError> {
        self.reap_after(ReapStep::Unclaim).await;
        self.inner.unclaim_job(id, host, reason).await
    }
    async fn queue_depth(&self) -> Result<u64, StoreError> {
        self.inner.queue_depth().await
    }
    async fn still_queued(&self, ids: &[String]) -> Result<Vec<String>, StoreError> {
        self.inner.still_queued(ids).await
    }
    async fn pass_over(
        &self,
        id: &str,
        at: time::OffsetDateTime,
    ) -> Result<Option<crate::store::PassedOver>, StoreError> {
        self.inner.pass_over(id, at).await
    }
    async fn mark_able(
        &self,
        id: &str,
        owner: &crate::store::Owner,
        at: time::OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.inner.mark_able(id, owner, at).await
    }
    async fn passed_over_queued(
        &self,
        lanes: &[crate::store::Lane],
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        self.inner.passed_over_queued(lanes, limit).await
    }
    async fn job_counts(&self) -> Result<Vec<(JobStatus, u64)>, StoreError> {
        self.inner.job_counts().await
    }
    async fn list_jobs(
        &self,
        query: &crate::store::JobQuery,
    ) -> Result<Vec<paddock_protocol::JobRecord>, StoreError> {
        self.inner.list_jobs(query).await
    }
    async fn job_ids_with_prefix(
        &self,
        prefix: &str,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        self.inner.job_ids_with_prefix(prefix, limit).await
    }
    async fn append_event(&self, event: &paddock_protocol::AgentEvent) -> Result<(), StoreError> {
        if (self.fails)(event) {
            return Err(StoreError::NoSuchJob {
                job_id: event.job_id.clone(),
            });
        }
        self.inner.append_event(event).await
    }
    async fn last_event_seq(&self, job_id: &str) -> Result<u64, StoreError> {
        self.inner.last_event_seq(job_id).await
    }
    async fn events_page(
        &self,
        job_id: &str,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<paddock_protocol::AgentEvent>, StoreError> {
        self.inner.events_page(job_id, after_seq, limit).await
    }
    async fn insert_model_call(
        &self,
        call: &paddock_protocol::ModelCall,
    ) -> Result<(), StoreError> {
        self.inner.insert_model_call(call).await
    }
    async fn settle_model_call(
        &self,
        call: &paddock_protocol::ModelCall,
    ) -> Result<bool, StoreError> {
        use std::sync::atomic::Ordering;
        let failing = self
            .settle_fails
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failing {
            return Err(StoreError::InsertModelCall {
                job_id: call.job_id.clone(),
                seq: call.seq,
                source: sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::StorageFull)),
            });
        }
        self.inner.settle_model_call(call).await
    }
    async fn interrupt_model_calls(&self, job_id: &str, why: &str) -> Result<u64, StoreError> {
        self.inner.interrupt_model_calls(job_id, why).await
    }
    async fn model_calls(
        &self,
        job_id: &str,
    ) -> Result<Vec<paddock_protocol::ModelCall>, StoreError> {
        self.inner.model_calls(job_id).await
    }
    async fn spent_micros(
        &self,
        scope: &crate::store::SpendScope,
        except_job: &str,
    ) -> Result<i64, StoreError> {
        self.inner.spent_micros(scope, except_job).await
    }
    async fn record_egress(
        &self,
        job_id: &str,
        seq: u64,
        record: &paddock_protocol::EgressRecord,
    ) -> Result<(), StoreError> {
        self.inner.record_egress(job_id, seq, record).await
    }
    async fn egress(
        &self,
        job_id: &str,
    ) -> Result<Vec<paddock_protocol::EgressRecord>, StoreError> {
        self.inner.egress(job_id).await
    }
    async fn put_profile(&self, profile: &paddock_protocol::HostProfile) -> Result<(), StoreError> {
        self.inner.put_profile(profile).await
    }
    async fn profile(&self, id: &str) -> Result<Option<paddock_protocol::HostProfile>, StoreError> {
        self.inner.profile(id).await
    }
    async fn remove_profile(&self, id: &str) -> Result<bool, StoreError> {
        self.inner.remove_profile(id).await
    }
    async fn profiles(&self) -> Result<Vec<paddock_protocol::HostProfile>, StoreError> {
        self.inner.profiles().await
    }
    async fn insert_api_token(
        &self,
        token: &crate::api_token::StoredToken,
    ) -> Result<(), StoreError> {
        self.inner.insert_api_token(token).await
    }
    async fn api_token(
        &self,
        id: &str,
    ) -> Result<Option<crate::api_token::StoredToken>, StoreError> {
        self.inner.api_token(id).await
    }
    async fn api_tokens(&self) -> Result<Vec<crate::api_token::StoredToken>, StoreError> {
        self.inner.api_tokens().await
    }
    async fn revoke_api_token(
        &self,
        id: &str,
        at: time::OffsetDateTime,
    ) -> Result<Option<crate::api_token::StoredToken>, StoreError> {
        self.inner.revoke_api_token(id, at).await
    }
    async fn record_webhook_attempt(
        &self,
        attempt: &crate::store::WebhookAttempt,
    ) -> Result<(), StoreError> {
        self.inner.record_webhook_attempt(attempt).await
    }
    async fn webhook_attempts(
        &self,
        job_id: &str,
    ) -> Result<Vec<crate::store::WebhookAttempt>, StoreError> {
        self.inner.webhook_attempts(job_id).await
    }
    async fn owe_webhook(&self, job_id: &str, at: time::OffsetDateTime) -> Result<(), StoreError> {
        self.inner.owe_webhook(job_id, at).await
    }
    async fn lease_owed_webhooks(
        &self,
        lease: &crate::store::WebhookLease<'_>,
    ) -> Result<Vec<String>, StoreError> {
        self.inner.lease_owed_webhooks(lease).await
    }
    async fn renew_webhook_lease(
        &self,
        job_id: &str,
        by: &str,
        until: time::OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.inner.renew_webhook_lease(job_id, by, until).await
    }
    async fn settle_owed_webhook(
        &self,
        job_id: &str,
        by: &str,
        at: time::OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.inner.settle_owed_webhook(job_id, by, at).await
    }
    async fn ledger(
        &self,
        after: Option<i64>,
        limit: u32,
    ) -> Result<Vec<(i64, paddock_protocol::ledger::ModelCall)>, StoreError> {
        self.inner.ledger(after, limit).await
    }
    async fn usage(
        &self,
    ) -> Result<(Vec<crate::store::UsageJob>, Vec<crate::store::UsageCalls>), StoreError> {
        self.inner.usage().await
    }
    async fn close(&self) {
        self.inner.close().await
    }
}

/// The engine of `DONE`, on a fresh fake rung.
fn done_rung() -> Arc<FakeRung> {
    Arc::new(FakeRung::new(FakeEngine {
        stdout: DONE.iter().map(|s| s.to_string()).collect(),
        ..FakeEngine::default()
    }))
}

/// The store fails under the job once its workspace exists (at the
/// concluding status): the job's record is not final, so its lease stays
/// for the reaper, but its workspace is removed (it was left behind).
#[tokio::test]
async fn a_store_failure_after_provisioning_still_removes_the_workspace() {
    let host = Host::new().await;
    let store: SharedStore = Arc::new(FailingStore {
        inner: host.store.clone(),
        fails: |e| {
            matches!(
                e.body,
                EventBody::Status {
                    phase: Phase::Concluding,
                    ..
                }
            )
        },
        linger: std::time::Duration::ZERO,
        reaps: None,
        settle_fails: std::sync::atomic::AtomicUsize::new(0),
        hold: None,
    });
    let runner = host.runner_with(store, done_rung());
    let (result, _) = run(&runner, &host.spec()).await;
    let err = result.unwrap_err();
    assert_eq!(err.code(), ErrorCode::StoreLost);
    let id = err.job_id().to_string();
    assert_eq!(host.left(), vec![format!(".leases/{id}.lock")]);
    // The reaper finds the lease and finishes the job.
    let report = crate::reaper::reap(&host.paths, &*host.store, &host.liveness()).await;
    assert_eq!(
        report
            .jobs
            .iter()
            .map(|j| j.name.clone())
            .collect::<Vec<_>>(),
        vec![id.clone()]
    );
    let record = host.store.job(&id).await.unwrap().unwrap();
    assert_eq!(record.status, JobStatus::Failed);
    assert_eq!(host.left(), Vec::<String>::new());
}

/// A job whose task is dropped mid-run (aborted, as a server shutting down
/// or a panic would) stops its engine, removes its workspace and leaves
/// its lease, which the reaper finds.
#[tokio::test]
async fn a_job_dropped_mid_run_leaves_only_its_lease_for_the_reaper() {
    let host = Host::new().await;
    let runner = host.runner(Arc::new(FakeRung::new(FakeEngine {
        hang: true,
        ..FakeEngine::default()
    })));
    let admitted = runner.admit(&host.spec()).await.unwrap();
    let mut job = runner.start(admitted, std::future::pending());
    while let Ok(u) = job.events.recv().await {
        if matches!(&u, JobUpdate::Event(e) if matches!(e.body, EventBody::Status { phase: Phase::Launching, .. }))
        {
            break;
        }
    }
    let id = job.id.clone();
    job.join.abort();
    assert!(job.join.await.unwrap_err().is_cancelled());
    assert_eq!(host.left(), vec![format!(".leases/{id}.lock")]);
    let report = crate::reaper::reap(&host.paths, &*host.store, &host.liveness()).await;
    assert_eq!(
        report
            .jobs
            .iter()
            .map(|j| j.name.clone())
            .collect::<Vec<_>>(),
        vec![id.clone()]
    );
    let record = host.store.job(&id).await.unwrap().unwrap();
    assert_eq!(
        (record.status, record.reason.as_deref()),
        (
            JobStatus::Failed,
            Some(crate::reaper::Aftermath::NoWorkspace.reason())
        )
    );
    assert_eq!(host.left(), Vec::<String>::new());
}

/// Something the engine left holds its stderr open past its exit: the
/// runner stops copying it after the drain grace and lets go of it (the
/// copy was left running, detached, holding the pipe).
#[tokio::test]
async fn the_stderr_copy_ends_with_the_job_even_when_stderr_stays_open() {
    let host = Host::new().await;
    let rung = Arc::new(FakeRung::new(FakeEngine {
        stdout: DONE.iter().map(|s| s.to_string()).collect(),
        stderr: b"warming up\n".to_vec(),
        stderr_open: true,
        ..FakeEngine::default()
    }));
    let runner = host.runner(rung.clone());
    let (result, _) = run(&runner, &host.spec()).await;
    let record = result.unwrap().record;
    assert_eq!(record.status, JobStatus::Done);
    let mut held = rung.held_stderr.lock().unwrap().pop().unwrap();
    use tokio::io::AsyncWriteExt as _;
    let write = held.write_all(b"still here\n").await;
    assert_eq!(
        write.map_err(|e| e.kind()),
        Err(std::io::ErrorKind::BrokenPipe)
    );
    let artifact =
        std::fs::read_to_string(host.paths.artifacts.join(&record.id).join("engine.stderr"))
            .unwrap();
    assert_eq!(artifact, "warming up\n");
}

/// The stderr tail and artifact are decoded once: a character split across
/// reads and invalid bytes come out the same in both.
#[tokio::test]
async fn stderr_is_decoded_once_for_its_artifact_and_its_tail() {
    let host = Host::new().await;
    let runner = host.runner(Arc::new(FakeRung::new(FakeEngine {
        stderr: b"caf\xc3\xa9 \xff\n".to_vec(),
        exit_code: 1,
        ..FakeEngine::default()
    })));
    let (result, _) = run(&runner, &host.spec()).await;
    let record = result.unwrap().record;
    let artifact =
        std::fs::read_to_string(host.paths.artifacts.join(&record.id).join("engine.stderr"))
            .unwrap();
    assert_eq!(artifact, "café \u{fffd}\n");
    assert!(
        record
            .reason
            .as_deref()
            .unwrap()
            .ends_with(": café \u{fffd}"),
        "{:?}",
        record.reason
    );
}

/// A kept workspace is named by the one `concluding` status (there were
/// two, the second only to name it).
#[tokio::test]
async fn a_kept_job_has_one_concluding_status_naming_its_workspace() {
    let host = Host::new().await;
    let runner = host.runner(done_rung());
    let mut admitted = runner.admit(&host.spec()).await.unwrap();
    admitted.keep = true;
    let job = runner.start(admitted, std::future::pending());
    let result = job.finished().await.unwrap();
    let root = result.kept_workspace.clone().unwrap();
    let events = host.store.events(&result.record.id, 0).await.unwrap();
    let concluding: Vec<Option<String>> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::Status {
                phase: Phase::Concluding,
                detail,
            } => Some(detail.clone()),
            _ => None,
        })
        .collect();
    // The job's directory is redacted in events. A kept overlay (the
    // default where the host can mount) is then made a plain directory,
    // and a second status says so.
    let overlay = events.iter().any(|e| {
        matches!(&e.body, EventBody::Status { phase: Phase::Provisioning, detail: Some(d) }
            if d.starts_with("workspace layout: overlay"))
    });
    // The count is what the kept tree holds, not a number: the source's
    // commit (and so the fan-out directory of `.git/objects` it lands
    // in) is new each run, so the tree has one entry fewer when its two
    // first hex digits are those of the tree or the blob.
    let kept = tree_entries(&root.join("work"));
    let mut expected = vec![Some("workspace kept at <job-dir>".to_string())];
    if overlay {
        expected.push(Some(format!(
            "the kept overlay work tree was copied into a plain directory ({} entries); \
             nothing is mounted for it any more",
            kept.len()
        )));
    }
    // What it holds: the source's file, the context Paddock wrote, and a
    // `.git` holding the source's objects.
    let loose = |objects: &Path| -> Vec<String> {
        tree_entries(objects)
            .into_iter()
            .filter(|e| e.len() == 41 && e.as_bytes()[2] == b'/')
            .collect()
    };
    let outside_git: Vec<&str> = kept
        .iter()
        .filter(|e| !e.starts_with(".git"))
        .map(String::as_str)
        .collect();
    assert_eq!(
        (
            outside_git,
            loose(&root.join("work/.git/objects")),
            kept.iter().any(|e| e == ".git/index")
        ),
        (
            vec![
                ".paddock",
                ".paddock/environment.json",
                ".paddock/tools.json",
                "AGENTS.md",
                "CLAUDE.md",
                "README.md"
            ],
            loose(&host.root().join("repo/.git/objects")),
            true
        )
    );
    assert_eq!(concluding, expected);
    assert!(root.join("work").is_dir());
    assert!(!crate::workspace::overlay::is_mounted(&root.join("work")));
    std::fs::remove_dir_all(&root).unwrap();
}

/// Every entry under `dir` (not following links), as sorted paths relative
/// to it.
fn tree_entries(dir: &Path) -> Vec<String> {
    let mut entries = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            if std::fs::symlink_metadata(&path).unwrap().is_dir() {
                stack.push(path.clone());
            }
            let rel = path.strip_prefix(dir).unwrap();
            entries.push(rel.to_string_lossy().into_owned());
        }
    }
    entries.sort();
    entries
}

/// A new engine is one directory: the test-only stand-in
/// (`engines/stand_in/`) runs end to end on the fake rung, its own
/// version checked, its files prepared, its command launched and its
/// stream parsed, with nothing outside its directory naming it.
#[cfg(feature = "stand-in-engine")]
#[tokio::test]
async fn a_stand_in_engine_added_in_one_directory_runs_to_done() {
    use crate::engines::stand_in;
    let host = Host::new().await;
    let root = host.root();
    let bin = root.join("bin/stand-in");
    paddock_test_support::script::write_script(
        &bin,
        &format!("#!/bin/sh\necho 'stand-in {}'\n", stand_in::PIN.version),
    );
    let codex = host.spec();
    let mut spec = codex.clone();
    spec.engine.kind = paddock_protocol::EngineKind::StandIn;
    spec.engine.binary = Some(bin.clone());
    let rung = Arc::new(FakeRung::new(FakeEngine {
        stdout: [
            r#"{"type":"session"}"#,
            r#"{"type":"say","text":"Standing in."}"#,
            r#"{"type":"done"}"#,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        ..FakeEngine::default()
    }));
    let runner = host.runner(rung.clone());
    let (result, _) = run(&runner, &spec).await;
    let record = result.unwrap().record;
    assert_eq!(
        (record.status, record.reason.clone(), record.engine.as_str()),
        (JobStatus::Done, None, "stand_in")
    );
    let events = host.store.events(&record.id, 0).await.unwrap();
    assert_eq!(
        phases(&events),
        vec![
            Phase::Provisioning,
            // The workspace's layout, and why.
            Phase::Provisioning,
            Phase::Launching,
            Phase::SessionStarted,
            Phase::TurnStarted,
            Phase::TurnCompleted,
            Phase::Concluding,
            Phase::Publishing,
            Phase::Done
        ]
    );
    let texts: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, vec!["Standing in."]);
    // Its own command line, with its config file kept read-only.
    let launched = rung.launched.lock().unwrap().clone();
    let [cmd] = launched.as_slice() else {
        panic!("launched {launched:?}")
    };
    let home = cmd.protect[0].parent().unwrap().to_path_buf();
    let config = home.join(".stand-in/config.json");
    assert_eq!(
        (&cmd.program, &cmd.args, &cmd.protect),
        (
            &bin,
            &vec![
                "run".to_owned(),
                "--config".to_owned(),
                config.display().to_string()
            ],
            &vec![home.join(".stand-in")]
        )
    );
    assert_eq!(host.left(), Vec::<String>::new());
}

mod metrics;
mod rung_fallback;
mod settle_again;

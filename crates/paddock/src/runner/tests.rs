//! The runner driven as a library, on the fake rung and a temp SQLite
//! store: what a job records and leaves, without spawning the binary.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use paddock_protocol::{EventBody, JobSpec, JobStatus, Phase};

use super::*;
use crate::rung::fake::{FakeEngine, FakeRung};
use crate::store::SqliteStore;

/// A Codex turn that completes.
pub(super) const DONE: &[&str] = &[
    r#"{"type":"thread.started","thread_id":"t-1"}"#,
    r#"{"type":"turn.started"}"#,
    r#"{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"Done."}}"#,
    r#"{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"output_tokens":2}}"#,
];

/// A host in a temp directory: a repository, a stand-in Codex binary (for
/// the version check), a scenario, a store and paths.
pub(super) struct Host {
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
        std::fs::write(
            &codex,
            format!(
                "#!/bin/sh\necho 'codex-cli {}'\n",
                crate::engines::codex::PIN.version
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&codex, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(
            root.join("scenario.toml"),
            "[[turn]]\ntext = \"hi\"\nusage = { input = 1, output = 1 }\n",
        )
        .unwrap();
        let paths = Paths::under(&root.join("data"));
        std::fs::create_dir_all(&paths.jobs).unwrap();
        let store: SharedStore = Arc::new(SqliteStore::open(&paths.db).await.unwrap());
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

    /// A runner on `rung` (both rungs are it).
    pub fn runner(&self, rung: Arc<FakeRung>) -> Runner {
        self.runner_with(self.store.clone(), rung)
    }

    pub fn runner_with(&self, store: SharedStore, rung: Arc<FakeRung>) -> Runner {
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
            },
            crate::rung::Rungs {
                process: rung.clone(),
                sandbox: rung,
            },
        )
    }

    /// The job directories and lease files left under the jobs directory.
    pub fn left(&self) -> Vec<String> {
        let mut out: Vec<String> = std::fs::read_dir(&self.paths.jobs)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != ".leases")
            .collect();
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
    let admitted = runner.admit(spec).await.unwrap();
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
            Phase::Launching,
            Phase::SessionStarted,
            Phase::TurnStarted,
            Phase::TurnCompleted,
            Phase::Concluding,
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

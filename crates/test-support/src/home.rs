//! One test's private Paddock home (database, artifacts, workspaces, a
//! config directory of its own) and the real `paddock` binary run on it.
//! The binary is the one Cargo built beside the running test binary (an
//! integration test's `target/<profile>/deps/NAME-HASH` → its
//! `target/<profile>/paddock`), so this library needs no build-time path.

use std::path::{Path, PathBuf};
use std::process::Output;

use paddock::store::SqliteStore;

/// The `paddock` binary Cargo built for the running integration test.
pub fn paddock_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("a test binary lives in target/<profile>/deps");
    profile_dir.join("paddock")
}

/// One test's private Paddock home: database, artifacts, workspaces.
pub struct Home {
    pub dir: tempfile::TempDir,
}

/// A job a test killed (or left running) may leave its overlay work tree
/// mounted: unmounted here, so that removing the directory never walks
/// through a mount (and no mount outlives the test).
impl Drop for Home {
    fn drop(&mut self) {
        // A job's overlay, in its directory or moved with it into the
        // trash (which only a later reaper pass would empty), so that no
        // mount outlives the test's directory.
        let trash = self.jobs().join(paddock::workspace::trash::TRASH);
        for dir in [self.jobs(), trash] {
            if let Ok(jobs) = std::fs::read_dir(dir) {
                for job in jobs.flatten() {
                    let _ = paddock::workspace::overlay::unmount_work(&job.path());
                }
            }
        }
    }
}

impl Default for Home {
    fn default() -> Home {
        Home::new()
    }
}

impl Home {
    pub fn new() -> Home {
        Home {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn data(&self) -> PathBuf {
        self.path().join("data")
    }

    pub fn jobs(&self) -> PathBuf {
        self.path().join("jobs")
    }

    pub fn db(&self) -> PathBuf {
        self.data().join("paddock.db")
    }

    /// Runs the real `paddock` binary with this home and extra environment.
    pub async fn paddock(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = self.command(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().await.unwrap()
    }

    /// `paddock run --json SPEC --attempt-after PRIOR` on this home with
    /// extra environment: the next attempt after job `prior`.
    pub async fn run_after(&self, spec: &str, prior: &str, env: &[(&str, &str)]) -> Output {
        self.paddock(&["run", "--json", spec, "--attempt-after", prior], env)
            .await
    }

    /// `paddock ARGS` on this home, not started (for a test that runs it
    /// alongside others, or kills it).
    pub fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(paddock_bin());
        cmd.arg("--data-dir")
            .arg(self.data())
            .arg("--jobs-dir")
            .arg(self.jobs())
            .args(args)
            .env_remove("PADDOCK_DB")
            // The user's own config file (docs/cli.md) stays out of tests.
            .env("XDG_CONFIG_HOME", self.path().join("config"))
            .stdin(std::process::Stdio::null());
        cmd
    }

    /// `paddock ARGS` on this home, started, its stdout and stderr piped
    /// (for a test that signals it, or watches it run).
    pub fn spawn(&self, args: &[&str]) -> tokio::process::Child {
        self.command(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Writes `text` as this home's user config file
    /// (`config/paddock/config.toml`: `XDG_CONFIG_HOME` is `config`).
    pub fn write_config(&self, text: &str) {
        let dir = self.path().join("config/paddock");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.toml"), text).unwrap();
    }

    pub async fn store(&self) -> SqliteStore {
        SqliteStore::open(&self.db()).await.unwrap()
    }

    /// Job `id`'s closeout as its artifacts keep it (`closeout.md`).
    pub fn closeout(&self, id: &str) -> String {
        std::fs::read_to_string(self.data().join("artifacts").join(id).join("closeout.md")).unwrap()
    }

    /// Job `id`'s stored events, their bodies in order.
    pub async fn event_bodies(&self, id: &str) -> Vec<paddock_protocol::EventBody> {
        paddock::store::Store::events(&self.store().await, id, 0)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.body)
            .collect()
    }

    /// Job `id`'s warnings: the messages of its non-fatal `error` events,
    /// in order, whatever their source.
    pub async fn warnings(&self, id: &str) -> Vec<String> {
        self.event_bodies(id)
            .await
            .into_iter()
            .filter_map(|body| match body {
                paddock_protocol::EventBody::Error {
                    message,
                    fatal: false,
                    ..
                } => Some(message),
                _ => None,
            })
            .collect()
    }

    /// Job `id`'s egress records as its `network` events carry them, in
    /// order.
    pub async fn network_events(&self, id: &str) -> Vec<paddock_protocol::EgressRecord> {
        self.event_bodies(id)
            .await
            .into_iter()
            .filter_map(|body| match body {
                paddock_protocol::EventBody::Network(r) => Some(r),
                _ => None,
            })
            .collect()
    }

    /// Job `id`'s session status events (`session_resumed`,
    /// `session_forked`) in order: their phase and detail.
    pub async fn session_statuses(
        &self,
        id: &str,
    ) -> Vec<(paddock_protocol::Phase, Option<String>)> {
        use paddock_protocol::{EventBody, Phase};
        self.event_bodies(id)
            .await
            .into_iter()
            .filter_map(|body| match body {
                EventBody::Status {
                    phase: phase @ (Phase::SessionResumed | Phase::SessionForked),
                    detail,
                } => Some((phase, detail)),
                _ => None,
            })
            .collect()
    }

    /// Saves the host profile `json` in this home's store (`paddock
    /// profile add`), failing the test with paddock's stderr if refused.
    pub async fn add_profile(&self, json: &str) {
        let file = self.path().join(format!("profile-{}.json", uuid_like()));
        std::fs::write(&file, json).unwrap();
        let add = self
            .paddock(&["profile", "add", file.to_str().unwrap()], &[])
            .await;
        assert_eq!(
            add.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&add.stderr)
        );
    }

    /// Workspaces left under the jobs directory, job leases left in its
    /// `.leases/` (as `.leases/NAME`), and what of its trash (job
    /// directories teardown moved there) the background remover has not
    /// deleted within 30 s (as `.trash/NAME`: the remover runs at
    /// `SCHED_IDLE`, so a machine whose cores are all busy, a build
    /// beside the suite, starves it for seconds); not Paddock's remembered
    /// engine versions (`.engine-versions.json`) nor the base commits'
    /// snapshots overlay workspaces share (`.snapshots`) nor the jobs
    /// directory's identity (`.host-id`), kept on purpose.
    pub fn leftover_workspaces(&self) -> Vec<String> {
        let trash = self.jobs().join(".trash");
        for _ in 0..600 {
            if !std::fs::read_dir(&trash).is_ok_and(|mut rd| rd.next().is_some()) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let names = |dir: &Path| -> Vec<String> {
            match std::fs::read_dir(dir) {
                Ok(rd) => rd
                    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect(),
                Err(_) => Vec::new(),
            }
        };
        // The caches kept on purpose (URL sources' mirrors, the local
        // sources' snapshots), the locks of the fetches into local
        // sources, the caches' size memo, and its temporary
        // file while the detached remover writes it (a stale one is
        // removed by the next pass: cache_cap.rs).
        let mut out: Vec<String> = names(&self.jobs())
            .into_iter()
            .filter(|n| {
                ![
                    ".leases",
                    ".trash",
                    ".trash.lock",
                    ".engine-versions.json",
                    ".snapshots",
                    ".mirrors",
                    ".source-locks",
                    ".cache-sizes.json",
                    paddock::host_id::FILE,
                ]
                .contains(&n.as_str())
                    && !n.starts_with(".cache-sizes.tmp")
            })
            .collect();
        out.extend(names(&trash).into_iter().map(|n| format!(".trash/{n}")));
        out.extend(
            names(&self.jobs().join(".leases"))
                .into_iter()
                .map(|n| format!(".leases/{n}")),
        );
        out
    }
}

/// A name no other call of this process gave.
fn uuid_like() -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    )
}

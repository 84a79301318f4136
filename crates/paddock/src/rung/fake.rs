//! A scripted rung for the runner's tests: its "engine" prints the lines
//! it was given on stdout, and bytes on stderr, then exits with its code;
//! or it hangs until stopped. Its broker is on loopback like the `process`
//! rung's. It records what it launched and can hold the engine's stderr
//! open past its exit (a grandchild that kept it), so a test can see
//! whether the runner let go of it.

use std::os::unix::process::ExitStatusExt as _;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};

use paddock_protocol::{HostProfile, Isolation};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _, DuplexStream};
use tokio::sync::watch;

use super::{EngineProcess, Leftovers, Output, Reap, Rung, RungError, RungJob, Stdin};
use crate::broker::{BrokerConfig, BrokerHandle};
use crate::engines::CommandSpec;

/// What the fake engine does.
#[derive(Debug, Clone, Default)]
pub struct FakeEngine {
    /// Lines printed on stdout (each with a newline), then stdout closes.
    pub stdout: Vec<String>,
    /// Bytes printed on stderr.
    pub stderr: Vec<u8>,
    pub exit_code: i32,
    /// Never exits by itself: only stopping or killing ends it.
    pub hang: bool,
    /// Its stderr stays open after it exits (held by the rung).
    pub stderr_open: bool,
    /// Request bodies it POSTs to its broker's `/v1/responses` with the
    /// job's token, one after the other, reading each answer to its end,
    /// before it prints (model calls, as Codex makes them).
    pub calls: Vec<String>,
}

/// One reap asked of the fake rung: job id, directory, kill passes,
/// cgroup roots.
pub type Reaped = (String, PathBuf, usize, Vec<PathBuf>);

/// The fake rung.
#[derive(Debug, Default)]
pub struct FakeRung {
    pub engine: FakeEngine,
    /// Every command launched, in order.
    pub launched: Mutex<Vec<CommandSpec>>,
    /// The write ends of stderrs held open (`stderr_open`).
    pub held_stderr: Mutex<Vec<DuplexStream>>,
    /// What the engine read on stdin.
    pub stdin: Arc<Mutex<Vec<u8>>>,
    /// The job's broker, once bound.
    pub broker_url: Mutex<Option<String>>,
    /// What each reap finds.
    pub leftovers: Leftovers,
    /// Every reap asked.
    pub reaped: Mutex<Vec<Reaped>>,
    /// At each launch: whether the workspace's early reads for the patch
    /// had started then, and their flag (read again after the job).
    pub early_reads: Mutex<Vec<(bool, Arc<std::sync::atomic::AtomicBool>)>>,
    /// Stands for the `sandbox` rung (its isolation), else `process`.
    pub sandbox: bool,
    /// Every launch fails in the rung's set-up with these words
    /// (`RungError::SandboxSetup`): nothing runs.
    pub setup_fails: Option<String>,
    /// That set-up failure is one for want of a resource of the host
    /// (`RungError::SandboxShort`).
    pub setup_short: bool,
    /// What [`Rung::probe`] answers: why no sandbox starts on this host.
    pub probe: Option<String>,
    /// What [`Rung::probe_afresh`] answers.
    pub afresh: Option<String>,
    /// What of every host profile it cannot enforce.
    pub gaps: Vec<(&'static str, String)>,
    /// At each launch: the work tree's `.paddock/environment.json`.
    pub environments: Mutex<Vec<String>>,
}

impl FakeRung {
    pub fn new(engine: FakeEngine) -> FakeRung {
        FakeRung {
            engine,
            ..FakeRung::default()
        }
    }
}

#[async_trait::async_trait]
impl Rung for FakeRung {
    fn isolation(&self) -> Isolation {
        if self.sandbox {
            Isolation::Sandbox
        } else {
            Isolation::Process
        }
    }

    async fn probe(&self) -> Option<String> {
        self.probe.clone()
    }

    async fn probe_afresh(&self) -> Option<String> {
        self.afresh.clone()
    }

    fn gaps(&self, _profile: &HostProfile) -> Vec<(&'static str, String)> {
        self.gaps.clone()
    }

    async fn bind_broker(
        &self,
        job: &RungJob<'_>,
        config: BrokerConfig,
    ) -> Result<BrokerHandle, RungError> {
        let broker = super::process::bind_loopback_broker(job, config).await?;
        if let Ok(mut url) = self.broker_url.lock() {
            *url = Some(broker.url.clone());
        }
        Ok(broker)
    }

    async fn bind_egress(
        &self,
        job: &RungJob<'_>,
        config: crate::egress::EgressConfig,
        records: tokio::sync::mpsc::Sender<paddock_protocol::EgressRecord>,
    ) -> Result<super::EgressHandle, RungError> {
        super::process::bind_loopback_egress(job, config, records).await
    }

    async fn launch(
        &self,
        job: &RungJob<'_>,
        cmd: &CommandSpec,
    ) -> Result<Box<dyn EngineProcess>, RungError> {
        if let Ok(mut l) = self.launched.lock() {
            l.push(cmd.clone());
        }
        if let Ok(mut r) = self.early_reads.lock() {
            let flag = job.ws.early_reads();
            r.push((flag.load(std::sync::atomic::Ordering::SeqCst), flag));
        }
        if let Ok(mut e) = self.environments.lock() {
            let path = job.ws.work.join(".paddock/environment.json");
            e.push(std::fs::read_to_string(path).unwrap_or_default());
        }
        if let Some(why) = &self.setup_fails {
            let (job_id, why) = (job.job_id.to_string(), why.clone());
            return Err(match self.setup_short {
                true => RungError::SandboxShort { job_id, why },
                false => RungError::SandboxSetup { job_id, why },
            });
        }
        let (stdin_w, mut stdin_r) = tokio::io::duplex(64 << 10);
        let (mut out_w, out_r) = tokio::io::duplex(64 << 10);
        let (mut err_w, err_r) = tokio::io::duplex(64 << 10);
        let (exit_tx, exit_rx) = watch::channel(None);
        let exit_tx = Arc::new(exit_tx);
        let read = self.stdin.clone();
        tokio::spawn(async move {
            let mut buf = Vec::new();
            let _ = stdin_r.read_to_end(&mut buf).await;
            if let Ok(mut r) = read.lock() {
                *r = buf;
            }
        });
        let engine = self.engine.clone();
        let (held_tx, held_rx) = tokio::sync::oneshot::channel();
        let ends = exit_tx.clone();
        let broker = self.broker_url.lock().ok().and_then(|u| u.clone());
        let token = cmd
            .env
            .iter()
            .find(|(k, _)| k == crate::engines::codex::TOKEN_VAR)
            .map(|(_, v)| v.clone());
        tokio::spawn(async move {
            if let (Some(broker), Some(token)) = (broker, token) {
                call_broker(&broker, &token, &engine.calls).await;
            }
            for line in &engine.stdout {
                let _ = out_w.write_all(format!("{line}\n").as_bytes()).await;
            }
            let _ = err_w.write_all(&engine.stderr).await;
            drop(out_w);
            if engine.stderr_open {
                let _ = held_tx.send(err_w);
            } else {
                drop(err_w);
            }
            if !engine.hang {
                ends.send_if_modified(|s| {
                    s.get_or_insert(ExitStatus::from_raw(engine.exit_code << 8));
                    true
                });
            }
        });
        if self.engine.stderr_open {
            if let Ok(w) = held_rx.await {
                if let Ok(mut h) = self.held_stderr.lock() {
                    h.push(w);
                }
            }
        }
        Ok(Box::new(FakeProcess {
            stdin: Some(stdin_w),
            stdout: Some(out_r),
            stderr: Some(err_r),
            exit_tx,
            exit_rx,
        }))
    }

    async fn reap(&self, job: &Reap<'_>) -> Leftovers {
        if let Ok(mut reaped) = self.reaped.lock() {
            reaped.push((
                job.job_id.to_owned(),
                job.root.to_path_buf(),
                job.kill_passes,
                job.cgroup_roots.to_vec(),
            ));
        }
        self.leftovers.clone()
    }
}

/// POSTs each of `calls` to the broker at `url` with `token`, in turn,
/// reading each answer to its end (a failure ends the calls).
async fn call_broker(url: &str, token: &str, calls: &[String]) {
    let client = reqwest::Client::new();
    for body in calls {
        let sent = client
            .post(format!("{url}/v1/responses"))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await;
        match sent {
            Ok(response) => {
                let _ = response.bytes().await;
            }
            Err(_) => return,
        }
    }
}

struct FakeProcess {
    stdin: Option<DuplexStream>,
    stdout: Option<DuplexStream>,
    stderr: Option<DuplexStream>,
    exit_tx: Arc<watch::Sender<Option<ExitStatus>>>,
    exit_rx: watch::Receiver<Option<ExitStatus>>,
}

impl FakeProcess {
    fn end(&self, signal: i32) {
        self.exit_tx.send_if_modified(|s| {
            if s.is_some() {
                return false;
            }
            *s = Some(ExitStatus::from_raw(signal));
            true
        });
    }
}

#[async_trait::async_trait]
impl EngineProcess for FakeProcess {
    fn take_stdin(&mut self) -> Option<Stdin> {
        self.stdin.take().map(|s| Box::new(s) as Stdin)
    }

    fn take_stdout(&mut self) -> Option<Output> {
        self.stdout.take().map(|s| Box::new(s) as Output)
    }

    fn take_stderr(&mut self) -> Option<Output> {
        self.stderr.take().map(|s| Box::new(s) as Output)
    }

    async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        let status = self
            .exit_rx
            .wait_for(Option::is_some)
            .await
            .map_err(std::io::Error::other)?;
        Ok(status.unwrap_or_else(|| ExitStatus::from_raw(9)))
    }

    fn stop(&mut self) {
        self.end(15);
    }

    fn kill(&mut self) {
        self.end(9);
    }
}

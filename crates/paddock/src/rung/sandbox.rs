//! The `sandbox` rung: the engine inside Paddock's sandbox, started by the
//! `paddock` binary re-executed as the sandbox helper (launcher.rs builds
//! its policy), with the broker on the job's own Unix socket, reached only
//! through the helper's forwarder at `127.0.0.1:`[`SANDBOX_BROKER_PORT`]
//! inside the job's network namespace (its egress proxy, when it has one,
//! on its own socket through a second forwarder at
//! `127.0.0.1:`[`SANDBOX_EGRESS_PORT`]). A host profile's memory and CPU
//! caps are cgroup caps here. Whether this host can start a sandbox is
//! probed by a real start running `true`: a success is the rung's answer
//! from then on (until a job's first launch could not be set up:
//! `Rung::probe_afresh`), a failure only for [`FAILURE_KEPT_FOR`], so a
//! server started while no sandbox could start (a kernel switch, an LSM
//! policy, a limit, changed since) runs its `auto` jobs sandboxed again
//! once one can, without a restart. With a [`ProbeCache`] (`paddock run`)
//! the answer is taken from the host's last success (probe_cache.rs); a
//! helper that could not set up clears that record. A
//! command's launch is told from its set-up's failure by the helper's
//! "the command runs" pipe ([`EngineProcess::started`]), on which PID 1
//! then says how many processes the command left running when it exited
//! ([`EngineProcess::left_running`]).

use std::os::fd::{AsFd as _, AsRawFd as _, OwnedFd};
use std::path::PathBuf;

use paddock_protocol::{EgressRecord, HostProfile, Isolation};
use tokio::io::AsyncReadExt as _;
use tokio::process::Command;
use tokio::sync::{mpsc, Mutex};

use super::probe_cache::ProbeCache;
use super::process::ChildProcess;
use super::{EgressHandle, EngineProcess, Leftovers, Reap, Rung, RungError, RungJob};
use crate::broker::{self, BrokerConfig, BrokerHandle};
use crate::egress::{EgressConfig, EgressProxy};
use crate::engines::CommandSpec;
use crate::launcher::{self, SANDBOX_BROKER_PORT, SANDBOX_EGRESS_PORT};

/// How long a job's provisioning is overlapped with the entry into the
/// kernel's cgroup-attach lock (`paddock_sandbox::cgroup_warm`): past
/// that, the wait is small beside the provisioning's own time.
const WARM_AT_MOST: std::time::Duration = std::time::Duration::from_secs(2);

/// How long a failed probe stays the rung's answer before the next
/// admission probes again (module text): a probe is a sandbox's start,
/// about 10 ms, so at most one a minute while a host cannot start one.
pub const FAILURE_KEPT_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// A probe's answer (None: a sandbox starts) and when it was had.
#[derive(Debug, Clone)]
struct Probed {
    answer: Option<String>,
    at: std::time::Instant,
}

/// The `sandbox` rung.
#[derive(Debug)]
pub struct SandboxRung {
    helper_exe: PathBuf,
    /// Where jobs' cgroups are made: a delegated cgroup
    /// (`PADDOCK_CGROUP_ROOT`); None: `/sys/fs/cgroup`.
    cgroup_root: Option<PathBuf>,
    /// The last probe's answer (None: not probed yet): a success kept
    /// until [`Rung::probe_afresh`] replaces it, a failure for
    /// `failure_kept_for`.
    probed: Mutex<Option<Probed>>,
    /// Where the host's last successful probe is kept (None: probe).
    probe_cache: Option<ProbeCache>,
    /// [`FAILURE_KEPT_FOR`], or a test's.
    failure_kept_for: std::time::Duration,
}

impl SandboxRung {
    /// `helper_exe` is the `paddock` binary, run as the sandbox helper;
    /// jobs' cgroups are made under `cgroup_root` (None: `/sys/fs/cgroup`).
    pub fn new(helper_exe: PathBuf, cgroup_root: Option<PathBuf>) -> SandboxRung {
        SandboxRung {
            helper_exe,
            cgroup_root,
            probed: Mutex::new(None),
            probe_cache: None,
            failure_kept_for: FAILURE_KEPT_FOR,
        }
    }

    /// This rung keeping a failed probe's answer for `kept_for` instead of
    /// [`FAILURE_KEPT_FOR`].
    pub fn with_failure_kept_for(self, kept_for: std::time::Duration) -> SandboxRung {
        SandboxRung {
            failure_kept_for: kept_for,
            ..self
        }
    }

    /// A probe now (past the host directory's kept success when
    /// `afresh`, which it then forgets), its answer the rung's from now
    /// on; one short of a resource answers none and is not kept (the
    /// next admission probes again).
    async fn ask(&self, probed: &mut Option<Probed>, afresh: bool) -> Option<String> {
        let exe = self.helper_exe.clone();
        let cache = self.probe_cache.clone();
        let answer = tokio::task::spawn_blocking(move || {
            if let (true, Some(cache)) = (afresh, &cache) {
                cache.forget();
            }
            probe_or_cached(&exe, cache.as_ref())
        })
        .await
        .unwrap_or_else(|e| Ok(Some(format!("the sandbox probe did not finish: {e}"))));
        match answer {
            Ok(answer) => {
                *probed = Some(Probed {
                    answer: answer.clone(),
                    at: std::time::Instant::now(),
                });
                answer
            }
            Err(why) => {
                *probed = None;
                short(why)
            }
        }
    }

    /// This rung taking its probe's answer from `cache` where it holds a
    /// fresh success of this host, and keeping its own success there.
    pub fn with_probe_cache(self, cache: ProbeCache) -> SandboxRung {
        SandboxRung {
            probe_cache: Some(cache),
            ..self
        }
    }
}

/// The probe's answer for the helper `exe` (None: a sandbox starts),
/// from `cache` when it holds a fresh success under this process's key,
/// else probed, a success kept there; `Err` (why) when the probe was
/// short of a resource of the host ([`super::SandboxProbe::Short`]),
/// which answers nothing: a job is neither admitted to nor moved to the
/// `process` rung for it.
fn probe_or_cached(
    exe: &std::path::Path,
    cache: Option<&ProbeCache>,
) -> Result<Option<String>, String> {
    let cached = cache.and_then(|cache| match super::probe_cache::key(exe) {
        Ok(key) => Some((cache, key)),
        Err(e) => {
            tracing::debug!(error = %e, "the sandbox probe's key: probing");
            None
        }
    });
    if let Some((cache, key)) = &cached {
        if cache.holds(key, std::time::SystemTime::now()) {
            return Ok(None);
        }
    }
    let answer = match super::probe_sandbox_now(exe) {
        super::SandboxProbe::Starts => None,
        super::SandboxProbe::Cannot(why) => Some(why),
        super::SandboxProbe::Short(why) => return Err(why),
    };
    if let (None, Some((cache, key))) = (&answer, &cached) {
        if let Err(e) = cache.keep(key, std::time::SystemTime::now()) {
            tracing::warn!(path = %cache.path().display(), error = %e, "keep the sandbox probe's success");
        }
    }
    Ok(answer)
}

/// A probe short of a resource: said in the log, and taken as no answer
/// (a sandbox is tried: a job's own launch then fails, never moved).
fn short(why: String) -> Option<String> {
    tracing::warn!(
        why = %why,
        "the sandbox probe was short of a resource of this host (another job or user may hold \
         it): not taken as a host without a sandbox"
    );
    None
}

/// The most of the helper's notices read after a command.
const NOTICES_MAX: u64 = 64 * 1024;

/// Where the helper writes what the job's commands ran without (in the
/// job's `meta`, outside its view).
fn notices(root: &std::path::Path) -> PathBuf {
    root.join("meta").join("sandbox-notices")
}

/// The helper's notices since the last read (the file is removed once
/// read); none when there are none or they cannot be read as Paddock's own
/// file (a link, not a regular file, too long).
fn take_notices(root: &std::path::Path) -> Vec<String> {
    let path = notices(root);
    let text = match crate::own_file::read(&path, NOTICES_MAX) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "sandbox notices");
            String::new()
        }
    };
    let _ = std::fs::remove_file(&path);
    let mut lines: Vec<String> = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if !lines.iter().any(|l| l == line) {
            lines.push(line.to_string());
        }
    }
    lines
}

/// The job's own broker socket.
fn socket(job: &RungJob<'_>) -> PathBuf {
    job.ws.meta.join("broker.sock")
}

/// The job's own egress proxy socket.
fn egress_socket(job: &RungJob<'_>) -> PathBuf {
    job.ws.meta.join("egress.sock")
}

/// The job's report socket of direct connection attempts (the sandbox
/// helper's watcher sends to it, `egress::direct` reads it).
fn direct_socket(job: &RungJob<'_>) -> PathBuf {
    job.ws.meta.join("direct.sock")
}

#[async_trait::async_trait]
impl Rung for SandboxRung {
    fn isolation(&self) -> Isolation {
        Isolation::Sandbox
    }

    async fn probe(&self) -> Option<String> {
        let mut probed = self.probed.lock().await;
        if let Some(Probed { answer, at }) = &*probed {
            if answer.is_none() || at.elapsed() < self.failure_kept_for {
                return answer.clone();
            }
        }
        self.ask(&mut probed, false).await
    }

    /// A real start, now, whatever this rung or the host directory
    /// kept; its answer is the rung's from now on (a server's later jobs
    /// are admitted by it), and a success is kept again. One short of a
    /// resource answers none (no move) and keeps none: the next
    /// admission probes again.
    async fn probe_afresh(&self) -> Option<String> {
        let mut probed = self.probed.lock().await;
        self.ask(&mut probed, true).await
    }

    /// cgroup caps (docs/sandbox.md): a host that cannot apply them
    /// refuses the job when it starts, unless the rules were accepted as
    /// degraded.
    fn gaps(&self, _profile: &HostProfile) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    async fn bind_broker(
        &self,
        job: &RungJob<'_>,
        config: BrokerConfig,
    ) -> Result<BrokerHandle, RungError> {
        // The job's own socket: only its sandbox's forwarder reaches it.
        let socket = socket(job);
        let listener = broker::bind_unix(&socket).map_err(|error| RungError::BindBroker {
            job_id: job.job_id.to_string(),
            socket: Some(socket.clone()),
            error,
        })?;
        let url = format!("http://127.0.0.1:{SANDBOX_BROKER_PORT}");
        broker::start_unix(listener, url, config).map_err(|error| RungError::StartBroker {
            job_id: job.job_id.to_string(),
            error,
        })
    }

    /// On the job's own socket, reached only through the sandbox's second
    /// forwarder: the job's network namespace has no other way out.
    async fn bind_egress(
        &self,
        job: &RungJob<'_>,
        config: EgressConfig,
        records: mpsc::Sender<EgressRecord>,
    ) -> Result<EgressHandle, RungError> {
        let proxy =
            EgressProxy::bind_unix(&egress_socket(job), config, records).map_err(|error| {
                RungError::BindEgress {
                    job_id: job.job_id.to_string(),
                    error,
                }
            })?;
        Ok(EgressHandle {
            proxy,
            url: format!("http://127.0.0.1:{SANDBOX_EGRESS_PORT}"),
            token: None,
        })
    }

    /// Every command of the job is watched: its report socket.
    fn direct_reports(&self, job: &RungJob<'_>) -> Option<PathBuf> {
        Some(direct_socket(job))
    }

    /// The helper moves the job's PID 1 into a cgroup: the kernel's lock
    /// for that is entered beside the provisioning, not in front of the
    /// engine (for at most [`WARM_AT_MOST`]).
    fn warm_up(&self) -> Option<paddock_sandbox::cgroup_warm::Warm> {
        Some(paddock_sandbox::cgroup_warm::Warm::start(WARM_AT_MOST))
    }

    async fn launch(
        &self,
        job: &RungJob<'_>,
        cmd: &CommandSpec,
    ) -> Result<Box<dyn EngineProcess>, RungError> {
        let ws = job.ws;
        let mut paths = launcher::SandboxPaths {
            job_id: job.job_id.to_string(),
            work: ws.work.clone(),
            home: ws.home.clone(),
            tmp: ws.tmp.clone(),
            broker_socket: socket(job),
            egress_socket: job.egress.then(|| egress_socket(job)),
            direct: Some(paddock_sandbox::DirectWatch {
                report: direct_socket(job),
                tag: job.phase.as_str().to_string(),
            }),
            timeout_secs: job.timeout_secs,
            extra_ro: job.read_only.to_vec(),
            extra_rw: Vec::new(),
            limits: launcher::default_limits(),
            allow_without_cgroups: true,
            cgroup_root: self.cgroup_root.clone(),
            notices: Some(notices(&ws.root)),
            hidden: Vec::new(),
        };
        if let Some(p) = job.policy {
            launcher::apply_profile(
                &mut paths,
                p,
                job.accept_degraded,
                Some(job.helper_exe),
                &ws.meta,
                cmd.env
                    .iter()
                    .find(|(k, _)| k == "PATH")
                    .map(|(_, v)| v.as_str()),
            )
            .map_err(|error| RungError::ApplyProfile {
                job_id: job.job_id.to_string(),
                error,
            })?;
        }
        // The helper's "the command runs" pipe (`paddock_sandbox`'s
        // `started.rs`): a set-up failure told from the command's own exit.
        let (started, started_tx) = std::io::pipe().map_err(|error| RungError::Spawn {
            job_id: job.job_id.to_string(),
            program: self.helper_exe.clone(),
            role: "sandbox helper",
            engine: cmd.program.clone(),
            error,
        })?;
        let mut policy = launcher::sandbox_policy(cmd, &paths);
        policy.started = Some(started_tx.as_raw_fd());
        let mut std_cmd =
            paddock_sandbox::launch::command(&self.helper_exe, &policy).map_err(|error| {
                RungError::SandboxPolicy {
                    job_id: job.job_id.to_string(),
                    error,
                }
            })?;
        paddock_sandbox::pass_fd::pass_fd(&mut std_cmd, started_tx.as_fd());
        let mut c = Command::from(std_cmd);
        c.kill_on_drop(true);
        let helper = ChildProcess::spawn(c, "sandbox helper", job.job_id, cmd)?;
        // The helper and PID 1 hold the only write ends now.
        drop(started_tx);
        Ok(Box::new(SandboxRun {
            helper,
            started: Some(OwnedFd::from(started)),
            report: None,
            cache: self.probe_cache.clone(),
            job_id: job.job_id.to_string(),
        }))
    }

    async fn reap(&self, job: &Reap<'_>) -> Leftovers {
        // The jobs' own cgroup root too, where it is not already asked.
        let mut roots = job.cgroup_roots.to_vec();
        roots.extend(self.cgroup_root.clone());
        roots.dedup();
        let mut left = super::reap_local(&Reap {
            cgroup_roots: &roots,
            ..*job
        })
        .await;
        left.notices = take_notices(job.root);
        left
    }
}

/// The most of the helper's stderr a set-up failure's error quotes.
const SETUP_WORDS_MAX: u64 = 4 * 1024;

/// A command on the `sandbox` rung: its helper, the read end of the
/// helper's "the command runs" pipe until [`EngineProcess::started`] read
/// it, and the rung's [`ProbeCache`]: a run that ended in its set-up (the
/// pipe closed unwritten, the helper's exit
/// [`paddock_sandbox::exit::SETUP_FAILED`]) clears the record, so the next
/// job probes again. The command's own exit 125 does not: it ran.
struct SandboxRun {
    helper: ChildProcess,
    started: Option<OwnedFd>,
    /// The same pipe once its "the command runs" byte was read: what PID 1
    /// says after the command exited (`paddock_sandbox::left`).
    report: Option<tokio::net::unix::pipe::Receiver>,
    cache: Option<ProbeCache>,
    job_id: String,
}

impl SandboxRun {
    /// The pipe, when PID 1 said the command runs (none: the pipe closed
    /// unwritten, or could not be read).
    async fn told_started(pipe: OwnedFd) -> Option<tokio::net::unix::pipe::Receiver> {
        let mut pipe = tokio::net::unix::pipe::Receiver::from_owned_fd(pipe).ok()?;
        let mut byte = [0u8; 1];
        match pipe.read(&mut byte).await {
            Ok(1) if byte[0] == paddock_sandbox::policy::STARTED => Some(pipe),
            _ => None,
        }
    }

    /// The helper's own words on stderr (nothing of the command ran, so
    /// nothing else wrote there), one line, escaped.
    async fn helper_words(&mut self) -> String {
        let mut text = Vec::new();
        if let Some(stderr) = self.helper.take_stderr() {
            let _ = stderr.take(SETUP_WORDS_MAX).read_to_end(&mut text).await;
        }
        let text = String::from_utf8_lossy(&text);
        let text = text.trim();
        let text = text.strip_prefix("paddock sandbox: ").unwrap_or(text);
        crate::terminal_text::line(text).into_owned()
    }
}

#[async_trait::async_trait]
impl EngineProcess for SandboxRun {
    fn take_stdin(&mut self) -> Option<super::Stdin> {
        self.helper.take_stdin()
    }
    fn take_stdout(&mut self) -> Option<super::Output> {
        self.helper.take_stdout()
    }
    fn take_stderr(&mut self) -> Option<super::Output> {
        self.helper.take_stderr()
    }
    async fn started(&mut self) -> Result<(), RungError> {
        let Some(pipe) = self.started.take() else {
            return Ok(());
        };
        if let Some(report) = Self::told_started(pipe).await {
            self.report = Some(report);
            return Ok(());
        }
        // PID 1 ended before the command ran: its status says why (a
        // command not found or not executable is the command's, 127/126).
        let status = self.helper.wait().await.map_err(|error| RungError::Wait {
            job_id: self.job_id.clone(),
            error,
        })?;
        // Short of a resource now: the host's kept probe stays (it says
        // nothing of whether a sandbox starts here), and the job is not
        // one to move (`RungError::SandboxShort`).
        if status.code() == Some(paddock_sandbox::exit::SETUP_SHORT) {
            return Err(RungError::SandboxShort {
                job_id: self.job_id.clone(),
                why: self.helper_words().await,
            });
        }
        if status.code() != Some(paddock_sandbox::exit::SETUP_FAILED) {
            return Ok(());
        }
        if let Some(cache) = &self.cache {
            cache.forget();
        }
        Err(RungError::SandboxSetup {
            job_id: self.job_id.clone(),
            why: self.helper_words().await,
        })
    }
    async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.helper.wait().await
    }
    async fn left_running(&mut self) -> Option<super::LeftRunning> {
        let report = match (self.report.take(), self.started.take()) {
            (Some(report), _) => Some(report),
            // Never asked whether the command ran: that byte first.
            (None, Some(pipe)) => Self::told_started(pipe).await,
            (None, None) => return None,
        };
        Some(match report {
            Some(report) => super::process::read_left(report).await,
            None => super::LeftRunning::Unreadable,
        })
    }
    fn stop(&mut self) {
        self.helper.stop();
    }
    fn kill(&mut self) {
        self.helper.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in helper in `dir` that counts its starts in `dir/probes`
    /// and starts a "sandbox" only while `dir/starts` exists. Written by a
    /// child process, so no descriptor of this (forking) test binary holds
    /// it open for writing when it runs.
    fn stand_in_helper(dir: &std::path::Path) -> PathBuf {
        let exe = dir.join("helper");
        let script = format!(
            "#!/bin/sh\necho . >> '{d}/probes'\n[ -e '{d}/starts' ] && exit 0\n\
             echo 'paddock sandbox: stand-in: none here' >&2\nexit 125\n",
            d = dir.display()
        );
        let written = std::process::Command::new("sh")
            .args(["-c", "printf '%s' \"$1\" > \"$2\" && chmod 755 \"$2\""])
            .args(["sh", script.as_str()])
            .arg(&exe)
            .status()
            .unwrap();
        assert!(written.success());
        exe
    }

    /// A failed probe is the rung's answer only for its keep: a rung (a
    /// server's) whose host could not start a sandbox asks again at the
    /// next admission once the failure is older than that, and keeps the
    /// success it then gets; within the keep it does not ask. Before, a
    /// failure was the answer until the server restarted.
    #[tokio::test]
    async fn a_failed_probe_is_asked_again_once_older_than_its_keep() {
        let dir = tempfile::tempdir().unwrap();
        let exe = stand_in_helper(dir.path());
        let starts = dir.path().join("starts");
        let none = Some("paddock sandbox: stand-in: none here".to_string());
        let probes = || {
            std::fs::read_to_string(dir.path().join("probes"))
                .unwrap_or_default()
                .len()
                / 2
        };

        let kept = SandboxRung::new(exe.clone(), None)
            .with_failure_kept_for(std::time::Duration::from_secs(3600));
        let first = kept.probe().await;
        std::fs::write(&starts, "").unwrap();
        let within_keep = kept.probe().await;
        let kept_probes = probes();

        std::fs::remove_file(&starts).unwrap();
        let retried = SandboxRung::new(exe, None).with_failure_kept_for(std::time::Duration::ZERO);
        let failed = retried.probe().await;
        std::fs::write(&starts, "").unwrap();
        let started = retried.probe().await;
        std::fs::remove_file(&starts).unwrap();
        let success_kept = retried.probe().await;
        assert_eq!(
            (
                first,
                within_keep,
                kept_probes,
                failed,
                started,
                success_kept,
                probes()
            ),
            (none.clone(), none.clone(), 1, none, None, None, 3)
        );
    }
}

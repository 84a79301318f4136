//! The isolation rungs a job runs on, behind the [`Rung`] trait: probe
//! the host, say what of a host profile the rung cannot enforce (its
//! gaps), bind the job's broker where the rung reaches it, launch the
//! engine (an [`EngineProcess`]: stdin, stdout, stderr, wait, stop, kill)
//! and kill what a job left (after its end, or a crash); a command's own
//! leftovers, killed when it exited, are counted by the rung
//! ([`EngineProcess::left_running`]). `process`
//! (`process.rs`: the engine under Paddock's supervisor) and `sandbox`
//! (`sandbox.rs`: Paddock's sandbox helper) implement it, `fake.rs` a
//! scripted stand-in for the runner's tests; a container or Kubernetes
//! rung is one more implementation. [`Rungs`] picks one:
//! `isolation = "auto"` (the default) becomes `sandbox` where this host can
//! start Paddock's sandbox (the same check `paddock doctor` makes: start
//! one running `true`) and `process` elsewhere, with the reason carried to
//! a `policy` event. An explicit `sandbox` on a host that cannot start one
//! refuses the job, naming what failed (fail closed); `process` needs no
//! check. `paddock run` takes the probe's answer from the host's last
//! success when it is fresh and made under the same conditions
//! (`probe_cache.rs`).

#[cfg(test)]
pub(crate) mod fake;
pub mod probe_cache;
mod process;
mod sandbox;

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;

use paddock_protocol::{EgressPhase, EgressRecord, HostProfile, Isolation};
use paddock_sandbox::{launch, Limits, NetMode, Policy};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

use crate::broker::{BrokerConfig, BrokerHandle};
use crate::egress::{EgressConfig, EgressError, EgressProxy};
use crate::engines::CommandSpec;
use crate::policy::JobPolicy;
use crate::workspace::Workspace;

#[cfg(test)]
pub(crate) use self::process::gaps as process_gaps;
pub use self::process::ProcessRung;
pub use self::sandbox::SandboxRung;

/// The engine's stdin, as a rung hands it over.
pub type Stdin = Box<dyn AsyncWrite + Send + Unpin>;
/// The engine's stdout or stderr, as a rung hands it over.
pub type Output = Box<dyn AsyncRead + Send + Unpin>;

/// What a rung needs of a job to bind its broker and launch its engine.
#[derive(Debug, Clone, Copy)]
pub struct RungJob<'a> {
    pub job_id: &'a str,
    pub ws: &'a Workspace,
    /// The job's wall-clock limit (a rung's backstop comes after it).
    pub timeout_secs: u64,
    /// The host profile, whose caps and hooks the rung applies.
    pub policy: Option<&'a JobPolicy>,
    /// The rules the spec accepts as degraded.
    pub accept_degraded: &'a [String],
    /// The `paddock` executable (the supervisor, the sandbox helper, the
    /// engine hooks).
    pub helper_exe: &'a Path,
    /// The job has an egress proxy ([`Rung::bind_egress`]): what the rung
    /// launches reaches it too.
    pub egress: bool,
    /// The phase the commands launched now run in (setup commands, or
    /// the engine): what their direct connection attempts are recorded
    /// under.
    pub phase: EgressPhase,
    /// More paths bound read-only into a sandbox (the host's tools,
    /// `RunnerConfig::tools`); nothing on the `process` rung.
    pub read_only: &'a [std::path::PathBuf],
}

/// A job's running egress proxy and the URL what runs on the rung reaches
/// it at (its `HTTPS_PROXY`).
pub struct EgressHandle {
    pub proxy: EgressProxy,
    pub url: String,
    /// The proxy credentials the URL holds (a loopback TCP proxy's,
    /// `egress::auth`), redacted wherever the job's text goes.
    pub token: Option<crate::secret::Secret>,
}

/// A started engine, on whatever rung. Dropping it before it exited stops
/// it with everything it started.
#[async_trait::async_trait]
pub trait EngineProcess: Send {
    fn take_stdin(&mut self) -> Option<Stdin>;
    fn take_stdout(&mut self) -> Option<Output>;
    fn take_stderr(&mut self) -> Option<Output>;
    /// Waits until the command runs: `Err` when the rung could not set
    /// it up (nothing of it ran; [`RungError::SandboxSetup`]), `Ok` once
    /// it runs or ended otherwise (its exit says how). Call it before
    /// taking stderr. Rungs that start the command directly return at
    /// once.
    async fn started(&mut self) -> Result<(), RungError> {
        Ok(())
    }
    /// Waits for the engine to exit (cancel-safe: a `select!` may drop it).
    async fn wait(&mut self) -> std::io::Result<ExitStatus>;
    /// Once [`EngineProcess::wait`] said the command exited by itself
    /// (not stopped): how many processes of the command's tree were still
    /// running then (and were killed), as the rung's supervisor or the
    /// sandbox's PID 1 counted them and said on a pipe the command never
    /// holds (`paddock_sandbox::left`); none when the rung does not count.
    async fn left_running(&mut self) -> Option<LeftRunning> {
        None
    }
    /// Asks the engine to stop, with everything it started.
    fn stop(&mut self);
    /// Kills whatever is left of the engine now.
    fn kill(&mut self);
}

/// What a rung said of the processes a command left running when it
/// exited ([`EngineProcess::left_running`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeftRunning {
    /// This many were still running, and were killed.
    Counted(u64),
    /// The rung counts, but its pipe held no single count (none, or more
    /// than one report: only a process allowed to open its supervisor's
    /// descriptors, a job running as root on the `process` rung, writes
    /// there): what was left is not known.
    Unreadable,
}

/// What a rung found left of a job: processes killed, cgroups removed
/// (with the processes killed in each), and cgroups it could not remove.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Leftovers {
    /// Processes still running (pointing into the job's directory).
    pub killed: usize,
    /// The job's cgroups removed, each with the processes killed in it.
    pub cgroups: Vec<(PathBuf, usize)>,
    /// The job's cgroups that could not be removed, and why.
    pub stuck: Vec<(PathBuf, String)>,
    /// What the rung ran the job's commands without since the last reap
    /// (the sandbox helper's notices: caps it could not apply), each once.
    pub notices: Vec<String>,
}

/// What a reap is asked: the job, and how thoroughly.
#[derive(Debug, Clone, Copy)]
pub struct Reap<'a> {
    pub job_id: &'a str,
    /// The job's directory.
    pub root: &'a Path,
    /// Scans for processes pointing into `root`, another only after one
    /// that killed something (0: none, a kept job's).
    pub kill_passes: usize,
    /// The cgroup hierarchies the job's cgroups are looked for under.
    pub cgroup_roots: &'a [PathBuf],
    /// When the job began, if known: only processes created since are
    /// its own (`leftovers.rs`); `None` reads every process.
    pub since: Option<crate::leftovers::Since>,
}

/// An isolation rung.
#[async_trait::async_trait]
pub trait Rung: Send + Sync + std::fmt::Debug {
    /// The rung's isolation (never `auto`).
    fn isolation(&self) -> Isolation;
    /// None when this host can run jobs on the rung, else why not.
    async fn probe(&self) -> Option<String>;
    /// [`Rung::probe`] asked again now, past any answer it kept (the
    /// `sandbox` rung's kept success proved wrong at a job's first
    /// launch: `runner/rung_fallback.rs`).
    async fn probe_afresh(&self) -> Option<String> {
        self.probe().await
    }
    /// What of `profile` the rung cannot enforce: (rule, why).
    fn gaps(&self, profile: &HostProfile) -> Vec<(&'static str, String)>;
    /// Starts the job's broker where the rung's engine reaches it.
    async fn bind_broker(
        &self,
        job: &RungJob<'_>,
        config: BrokerConfig,
    ) -> Result<BrokerHandle, RungError>;
    /// Starts the job's egress proxy where what runs on the rung reaches
    /// it; each attempt's record goes to `records`.
    async fn bind_egress(
        &self,
        job: &RungJob<'_>,
        config: EgressConfig,
        records: mpsc::Sender<EgressRecord>,
    ) -> Result<EgressHandle, RungError>;
    /// Where the job's commands report the connections they tried past
    /// the proxy (`egress::direct`), on a rung that watches for them (the
    /// `sandbox` rung); none elsewhere.
    fn direct_reports(&self, _job: &RungJob<'_>) -> Option<PathBuf> {
        None
    }
    /// Readies the host, beside a job's provisioning, for the rung's next
    /// launch; dropped once the launch returned (the command runs), or
    /// when the job ends first. The `sandbox` rung enters the kernel's cgroup-attach lock
    /// early (`paddock_sandbox::cgroup_warm`); nothing elsewhere.
    fn warm_up(&self) -> Option<paddock_sandbox::cgroup_warm::Warm> {
        None
    }
    /// Starts `cmd` on the rung, stdio piped.
    async fn launch(
        &self,
        job: &RungJob<'_>,
        cmd: &CommandSpec,
    ) -> Result<Box<dyn EngineProcess>, RungError>;
    /// Kills what a job left running and removes what it left of the
    /// rung (after its end, or after a crash: the reaper).
    async fn reap(&self, job: &Reap<'_>) -> Leftovers;
}

/// The rungs a runner picks from.
#[derive(Debug, Clone)]
pub struct Rungs {
    pub process: Arc<dyn Rung>,
    pub sandbox: Arc<dyn Rung>,
}

impl Rungs {
    /// This host's rungs; `helper_exe` is the `paddock` binary, and the
    /// sandbox's jobs' cgroups are made under `cgroup_root` (a delegated
    /// cgroup, `PADDOCK_CGROUP_ROOT`; None: `/sys/fs/cgroup`).
    pub fn host(helper_exe: &Path, cgroup_root: Option<&Path>) -> Rungs {
        Rungs {
            process: Arc::new(ProcessRung::new(helper_exe.to_path_buf())),
            sandbox: Arc::new(SandboxRung::new(
                helper_exe.to_path_buf(),
                cgroup_root.map(Path::to_path_buf),
            )),
        }
    }

    /// [`Rungs::host`] whose sandbox probe's success is kept in, and taken
    /// from, `cache` (`probe_cache.rs`): `paddock run`, one job per
    /// process.
    pub fn host_caching_probe(
        helper_exe: &Path,
        cgroup_root: Option<&Path>,
        cache: probe_cache::ProbeCache,
    ) -> Rungs {
        let sandbox =
            SandboxRung::new(helper_exe.to_path_buf(), cgroup_root.map(Path::to_path_buf));
        Rungs {
            sandbox: Arc::new(sandbox.with_probe_cache(cache)),
            ..Rungs::host(helper_exe, cgroup_root)
        }
    }

    /// The rung for `requested` (see [`resolve`]); the sandbox is probed
    /// only when the answer depends on it.
    pub async fn pick(&self, requested: Isolation) -> Result<(Arc<dyn Rung>, Resolved), RungError> {
        let answer = match requested {
            Isolation::Process => None,
            Isolation::Sandbox | Isolation::Auto => self.sandbox.probe().await,
        };
        let resolved = resolve(requested, || answer)?;
        let rung = match resolved.isolation {
            Isolation::Sandbox => self.sandbox.clone(),
            Isolation::Process | Isolation::Auto => self.process.clone(),
        };
        Ok((rung, resolved))
    }
}

/// The rung a job runs on, and why it is not the sandbox when `auto` fell
/// back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub isolation: Isolation,
    pub fallback: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum RungError {
    #[error(
        "isolation = \"sandbox\": this host cannot start Paddock's sandbox: {why} \
         (`paddock doctor` shows what is missing; `isolation = \"process\"` runs unconfined)"
    )]
    SandboxUnavailable { why: String },
    #[error("bind the broker{}: {error}", socket.as_ref().map(|s| format!(" socket {}", s.display())).unwrap_or_default())]
    BindBroker {
        job_id: String,
        socket: Option<PathBuf>,
        error: std::io::Error,
    },
    #[error("start the broker: {error}")]
    StartBroker {
        job_id: String,
        error: crate::broker::BrokerError,
    },
    #[error("start the egress proxy: {error}")]
    BindEgress { job_id: String, error: EgressError },
    #[error("prepare the sandbox for the host profile: {error}")]
    ApplyProfile {
        job_id: String,
        error: std::io::Error,
    },
    #[error("prepare the launch: serialize the sandbox policy for job {job_id}: {error}")]
    SandboxPolicy {
        job_id: String,
        error: serde_json::Error,
    },
    /// The rung's own child (the supervisor or the sandbox helper: the
    /// `paddock` binary) did not start; the engine was never reached.
    #[error(
        "start {} (Paddock's {role} for {}): {error}",
        program.display(),
        engine.display()
    )]
    Spawn {
        job_id: String,
        /// What was started: the `paddock` binary.
        program: PathBuf,
        /// `supervisor` or `sandbox helper`.
        role: &'static str,
        /// The engine it was to run.
        engine: PathBuf,
        error: std::io::Error,
    },
    #[error("the engine's stdout/stderr were not captured")]
    Stdio { job_id: String },
    /// The sandbox helper ended in its set-up (its "the command runs"
    /// pipe closed unwritten, its exit 125): nothing of the command ran.
    #[error("the sandbox could not be set up, so nothing ran: {why}")]
    SandboxSetup { job_id: String, why: String },
    /// The sandbox helper ended in its set-up for want of a resource of
    /// the host (its exit 122, `paddock_sandbox::exit::SETUP_SHORT`):
    /// nothing of the command ran, and nothing says this host has no
    /// sandbox (another job or user may hold what ran out): the job is
    /// never moved to another rung for it.
    #[error(
        "the sandbox could not be set up for want of a resource of this host (processes, \
         memory or descriptors, which another job or user may be holding), so nothing ran: \
         {why}"
    )]
    SandboxShort { job_id: String, why: String },
    #[error("wait for the sandbox helper: {error}")]
    Wait {
        job_id: String,
        error: std::io::Error,
    },
}

/// Resolves `requested` with `probe` (None when a sandbox starts, else the
/// reason it does not); the probe runs only when the answer depends on it.
pub fn resolve(
    requested: Isolation,
    probe: impl FnOnce() -> Option<String>,
) -> Result<Resolved, RungError> {
    let isolation = |isolation, fallback| Resolved {
        isolation,
        fallback,
    };
    match requested {
        Isolation::Process => Ok(isolation(Isolation::Process, None)),
        Isolation::Sandbox => match probe() {
            None => Ok(isolation(Isolation::Sandbox, None)),
            Some(why) => Err(RungError::SandboxUnavailable { why }),
        },
        Isolation::Auto => match probe() {
            None => Ok(isolation(Isolation::Sandbox, None)),
            Some(why) => Ok(isolation(
                Isolation::Process,
                Some(format!(
                    "isolation auto: running on the `process` rung (unconfined) because this \
                     host cannot start Paddock's sandbox: {why}"
                )),
            )),
        },
    }
}

/// What a real start of a sandbox said ([`probe_sandbox_now`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxProbe {
    /// A sandbox started.
    Starts,
    /// This host cannot start one: the helper's error.
    Cannot(String),
    /// None started for want of a resource of the host now (the helper's
    /// set-up short of processes, memory or descriptors:
    /// `paddock_sandbox::exit::SETUP_SHORT`; the helper killed by a
    /// signal, or timed out; the helper not started for `EAGAIN`,
    /// `ENOMEM`, `EMFILE`, `ENFILE`): what a concurrent job or another
    /// user may be holding, never proof that this host has no sandbox.
    Short(String),
}

/// Starts a minimal sandbox with the helper `exe` (the `paddock` binary);
/// None when it works, else the helper's error (a shortage's too:
/// [`probe_sandbox_now`] tells them apart).
pub fn probe_sandbox(exe: &Path) -> Option<String> {
    match probe_sandbox_now(exe) {
        SandboxProbe::Starts => None,
        SandboxProbe::Cannot(why) => Some(why),
        SandboxProbe::Short(why) => Some(format!(
            "{why} (for want of a resource of this host now, not for want of a sandbox)"
        )),
    }
}

/// Starts a minimal sandbox with the helper `exe` (the `paddock` binary),
/// now: whether it started, could not on this host, or was short of a
/// resource of the host ([`SandboxProbe`]).
pub fn probe_sandbox_now(exe: &Path) -> SandboxProbe {
    use std::os::unix::process::ExitStatusExt as _;
    let policy = Policy {
        argv: vec!["true".into()],
        env: vec![],
        cwd: "/".into(),
        ro: vec![],
        rw: vec![],
        protect: vec![],
        hidden: Vec::new(),
        tmp_mb: 1,
        net: NetMode::None,
        direct: None,
        limits: Limits::default(),
        allow_without_cgroups: false,
        notices: None,
        timeout_secs: Some(10),
        cgroup_root: None,
        name: "doctor".into(),
        started: None,
    };
    let mut cmd = match launch::command(exe, &policy) {
        Ok(c) => c,
        Err(e) => return SandboxProbe::Cannot(e.to_string()),
    };
    match cmd.stdin(Stdio::null()).stdout(Stdio::null()).output() {
        Ok(out) if out.status.success() => SandboxProbe::Starts,
        Ok(out) => {
            let words = String::from_utf8_lossy(&out.stderr).trim().to_string();
            match (out.status.code(), out.status.signal()) {
                (Some(paddock_sandbox::exit::SETUP_SHORT), _) => SandboxProbe::Short(words),
                (Some(paddock_sandbox::exit::TIMED_OUT), _) => SandboxProbe::Short(format!(
                    "the helper's start of `true` took more than {} s: {words}",
                    policy.timeout_secs.unwrap_or_default()
                )),
                (_, Some(signal)) => {
                    SandboxProbe::Short(format!("the helper was killed by signal {signal}"))
                }
                _ => SandboxProbe::Cannot(words),
            }
        }
        Err(e) => {
            let why = format!("start the helper: {e}");
            match e.raw_os_error() {
                Some(
                    nix::libc::EAGAIN | nix::libc::ENOMEM | nix::libc::EMFILE | nix::libc::ENFILE,
                ) => SandboxProbe::Short(why),
                _ => SandboxProbe::Cannot(why),
            }
        }
    }
}

/// The rungs whose leftovers the reaper looks for on this host. Both
/// local rungs leave the same things ([`reap_local`]: processes pointing
/// into the job's directory, its cgroups), so the `process` rung stands
/// for both; a container or Kubernetes rung adds itself here.
pub fn host_reapers() -> Vec<Arc<dyn Rung>> {
    vec![Arc::new(ProcessRung::new(PathBuf::new()))]
}

/// Kills what still points into the job's directory and removes its
/// cgroups (a stopped sandbox helper, killed with its group, could not):
/// what both local rungs leave after a job.
async fn reap_local(job: &Reap<'_>) -> Leftovers {
    let root = job.root.to_path_buf();
    let job_id = job.job_id.to_string();
    let passes = job.kill_passes;
    let since = job.since;
    let cgroup_roots = job.cgroup_roots.to_vec();
    tokio::task::spawn_blocking(move || {
        let mut left = Leftovers::default();
        for _ in 0..passes {
            let n = crate::leftovers::kill_processes(&root, since);
            left.killed += n;
            if n == 0 {
                break;
            }
        }
        for dir in cgroup_roots
            .iter()
            .flat_map(|r| crate::leftovers::cgroups(r, &job_id))
        {
            match crate::leftovers::remove_cgroup(&dir) {
                Ok(n) => left.cgroups.push((dir, n)),
                Err(e) => left.stuck.push((dir, e.to_string())),
            }
        }
        left
    })
    .await
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_probe() -> Option<String> {
        unreachable!("process needs no probe")
    }

    #[test]
    fn process_is_never_probed() {
        assert_eq!(
            resolve(Isolation::Process, no_probe).ok(),
            Some(Resolved {
                isolation: Isolation::Process,
                fallback: None
            })
        );
    }

    #[test]
    fn auto_is_the_sandbox_where_one_starts() {
        assert_eq!(
            resolve(Isolation::Auto, || None).ok(),
            Some(Resolved {
                isolation: Isolation::Sandbox,
                fallback: None
            })
        );
    }

    #[test]
    fn auto_falls_back_to_process_and_says_why() {
        assert_eq!(
            resolve(Isolation::Auto, || Some("Landlock: not supported".into())).ok(),
            Some(Resolved {
                isolation: Isolation::Process,
                fallback: Some(
                    "isolation auto: running on the `process` rung (unconfined) because this \
                     host cannot start Paddock's sandbox: Landlock: not supported"
                        .into()
                ),
            })
        );
    }

    #[test]
    fn an_explicit_sandbox_fails_closed_naming_what_is_missing() {
        let err = resolve(Isolation::Sandbox, || {
            Some("unshare the user namespaces: EPERM".into())
        })
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "isolation = \"sandbox\": this host cannot start Paddock's sandbox: unshare the user \
             namespaces: EPERM (`paddock doctor` shows what is missing; `isolation = \"process\"` \
             runs unconfined)"
        );
    }

    #[test]
    fn an_explicit_sandbox_where_one_starts() {
        assert_eq!(
            resolve(Isolation::Sandbox, || None).ok(),
            Some(Resolved {
                isolation: Isolation::Sandbox,
                fallback: None
            })
        );
    }
}

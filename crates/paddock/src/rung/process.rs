//! The `process` rung: the engine as a plain child of Paddock's supervisor
//! (`paddock __supervise DIR -- ENGINE…`, supervise.rs), which kills its whole
//! tree when it ends or on SIGTERM, with an environment built from scratch;
//! the broker on loopback. A plain child has no CPU or memory cap and can
//! connect anywhere: those rules of a host profile (`cpu_limit`,
//! `mem_limit_mb`, its `[network]` maximum) are its gaps. [`ChildProcess`]
//! is how both local rungs hand over a started engine. The supervisor of
//! a command without stdin (a setup command) reports what the command
//! left running when it exited on a pipe given as its stdin
//! (`--report-stdin`, `paddock_sandbox::left`), so that it is still
//! spawned, never forked (a descriptor of another number needs a
//! `pre_exec` hook, the standard library's fork path).

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::ExitStatus;

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use paddock_protocol::{EgressRecord, HostProfile, Isolation};
use tokio::net::TcpListener;
use tokio::process::Command;
use tokio::sync::mpsc;

use super::{
    EgressHandle, EngineProcess, LeftRunning, Leftovers, Output, Reap, Rung, RungError, RungJob,
    Stdin,
};
use crate::broker::{self, BrokerConfig, BrokerHandle};
use crate::egress::{EgressConfig, EgressProxy};
use crate::engines::CommandSpec;

/// The `process` rung.
#[derive(Debug, Clone)]
pub struct ProcessRung {
    helper_exe: PathBuf,
}

impl ProcessRung {
    /// `helper_exe` is the `paddock` binary, run as the supervisor.
    pub fn new(helper_exe: PathBuf) -> ProcessRung {
        ProcessRung { helper_exe }
    }
}

#[async_trait::async_trait]
impl Rung for ProcessRung {
    fn isolation(&self) -> Isolation {
        Isolation::Process
    }

    async fn probe(&self) -> Option<String> {
        None
    }

    fn gaps(&self, profile: &HostProfile) -> Vec<(&'static str, String)> {
        gaps(profile)
    }

    async fn bind_broker(
        &self,
        job: &RungJob<'_>,
        config: BrokerConfig,
    ) -> Result<BrokerHandle, RungError> {
        bind_loopback_broker(job, config).await
    }

    /// On loopback, like the broker: advisory on this rung, where nothing
    /// stops the job connecting around it (docs/egress.md).
    async fn bind_egress(
        &self,
        job: &RungJob<'_>,
        config: EgressConfig,
        records: mpsc::Sender<EgressRecord>,
    ) -> Result<EgressHandle, RungError> {
        bind_loopback_egress(job, config, records).await
    }

    async fn launch(
        &self,
        job: &RungJob<'_>,
        cmd: &CommandSpec,
    ) -> Result<Box<dyn EngineProcess>, RungError> {
        // A command without stdin (a setup command) gets the supervisor's
        // report of what it left running (`paddock_sandbox::left`): a pipe
        // whose write end is the supervisor's stdin, which it takes for
        // itself alone.
        if cmd.stdin.is_some() {
            let c = supervisor(&self.helper_exe, cmd, false);
            return Ok(Box::new(ChildProcess::spawn(
                c,
                "supervisor",
                job.job_id,
                cmd,
            )?));
        }
        let (report, report_tx) = std::io::pipe().map_err(|error| RungError::Spawn {
            job_id: job.job_id.to_string(),
            program: self.helper_exe.clone(),
            role: "supervisor",
            engine: cmd.program.clone(),
            error,
        })?;
        let mut c = supervisor(&self.helper_exe, cmd, true);
        c.stdin(OwnedFd::from(report_tx));
        let child = ChildProcess::spawn_with_stdin(c, "supervisor", job.job_id, cmd)?;
        Ok(Box::new(child.with_report(OwnedFd::from(report))))
    }

    async fn reap(&self, job: &Reap<'_>) -> Leftovers {
        super::reap_local(job).await
    }
}

/// The engine under Paddock's supervisor (`helper_exe`), which kills its
/// whole tree when it ends or on SIGTERM; a SIGKILL would leave that tree
/// running, so the runner stops it, never by dropping it. The engine's
/// directory is the supervisor's argument, not the child's own: the
/// standard library forks (a copy of Paddock's whole memory map) for a
/// child with a directory of its own in the static build, and spawns one
/// without.
fn supervisor(helper_exe: &std::path::Path, cmd: &CommandSpec, report: bool) -> Command {
    let mut c = Command::new(helper_exe);
    c.arg(crate::supervise::SUPERVISE_ARG);
    if report {
        c.arg(crate::supervise::REPORT_ARG);
    }
    c.arg(&cmd.cwd)
        .arg("--")
        .arg(&cmd.program)
        .args(&cmd.args)
        .env_clear()
        .envs(cmd.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .kill_on_drop(false);
    c
}

/// What the `process` rung cannot cap, with the reason.
pub(crate) fn gaps(profile: &HostProfile) -> Vec<(&'static str, String)> {
    let mut gaps = Vec::new();
    if let Some(cpu) = &profile.cpu_limit {
        gaps.push((
            "cpu_limit",
            format!("({cpu}) cannot be enforced on the `process` rung: a plain child process has no CPU cap"),
        ));
    }
    if let Some(mb) = profile.mem_limit_mb {
        gaps.push((
            "mem_limit_mb",
            format!("({mb} MB) cannot be enforced on the `process` rung: an address-space rlimit breaks the engines' runtimes and does not cap the process tree"),
        ));
    }
    if profile.network.is_some() {
        gaps.push((
            "network",
            "(its [network] maximum and the deny list) cannot be enforced on the `process` rung: the job's processes can connect directly, past its egress proxy; the `sandbox` rung enforces it (docs/egress.md)".to_string(),
        ));
    }
    gaps
}

/// A local child (the supervisor, or the sandbox helper) in its own
/// process group, stdio piped, and the read end of the supervisor's
/// report of what the command left running. Dropped before it exited, it
/// gets SIGTERM: the supervisor and the sandbox helper then kill
/// everything the engine started.
#[derive(Debug)]
pub(super) struct ChildProcess {
    child: tokio::process::Child,
    pgid: Option<Pid>,
    exited: bool,
    report: Option<OwnedFd>,
}

impl ChildProcess {
    /// Spawns `c`, the rung's `role` (its supervisor or sandbox helper),
    /// for `cmd` (its stdin piped when it has one).
    pub(super) fn spawn(
        mut c: Command,
        role: &'static str,
        job_id: &str,
        cmd: &CommandSpec,
    ) -> Result<ChildProcess, RungError> {
        c.stdin(if cmd.stdin.is_some() {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        });
        ChildProcess::spawn_with_stdin(c, role, job_id, cmd)
    }

    /// [`ChildProcess::spawn`] of `c`, whose stdin is set already.
    fn spawn_with_stdin(
        mut c: Command,
        role: &'static str,
        job_id: &str,
        cmd: &CommandSpec,
    ) -> Result<ChildProcess, RungError> {
        c.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0);
        let child = c.spawn().map_err(|error| RungError::Spawn {
            job_id: job_id.to_string(),
            program: PathBuf::from(c.as_std().get_program()),
            role,
            engine: cmd.program.clone(),
            error,
        })?;
        let pgid = child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .map(Pid::from_raw);
        Ok(ChildProcess {
            child,
            pgid,
            exited: false,
            report: None,
        })
    }

    /// This child, whose report of what the command left running is read
    /// from `report` ([`EngineProcess::left_running`]).
    fn with_report(mut self, report: OwnedFd) -> ChildProcess {
        self.report = Some(report);
        self
    }
}

/// The most a report pipe is read for: its writer has exited once the
/// command's end is known, so its end of file is at once unless something
/// else held the write end.
const REPORT_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The count of processes left running that `pipe` says
/// (`paddock_sandbox::left`), read to its end (a report's bytes and one
/// more at most, and [`REPORT_WAIT`] at most): unreadable unless it holds
/// exactly one report, so that nothing written beside the rung's own
/// report (a job running as root on the `process` rung can open its
/// supervisor's descriptor) reads as a count.
pub(super) async fn read_left(pipe: tokio::net::unix::pipe::Receiver) -> LeftRunning {
    use tokio::io::AsyncReadExt as _;
    let mut bytes = Vec::new();
    let mut pipe = pipe.take(paddock_sandbox::left::report(0).len() as u64 + 1);
    let read = pipe.read_to_end(&mut bytes);
    match tokio::time::timeout(REPORT_WAIT, read).await {
        Ok(Ok(_)) => paddock_sandbox::left::read(&bytes)
            .map_or(LeftRunning::Unreadable, LeftRunning::Counted),
        _ => LeftRunning::Unreadable,
    }
}

#[async_trait::async_trait]
impl EngineProcess for ChildProcess {
    fn take_stdin(&mut self) -> Option<Stdin> {
        self.child.stdin.take().map(|s| Box::new(s) as Stdin)
    }

    fn take_stdout(&mut self) -> Option<Output> {
        self.child.stdout.take().map(|s| Box::new(s) as Output)
    }

    fn take_stderr(&mut self) -> Option<Output> {
        self.child.stderr.take().map(|s| Box::new(s) as Output)
    }

    async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        let status = self.child.wait().await?;
        self.exited = true;
        Ok(status)
    }

    async fn left_running(&mut self) -> Option<LeftRunning> {
        let report = self.report.take()?;
        Some(
            match tokio::net::unix::pipe::Receiver::from_owned_fd(report) {
                Ok(pipe) => read_left(pipe).await,
                Err(_) => LeftRunning::Unreadable,
            },
        )
    }

    /// SIGTERM to the supervisor or the sandbox helper: each kills the
    /// engine's tree (the helper its namespace's PID 1, which takes the
    /// rest, and removes its placeholders) and exits.
    fn stop(&mut self) {
        if let Some(pid) = self.child.id().and_then(|p| i32::try_from(p).ok()) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
    }

    /// SIGKILL to the child's process group, and to the child.
    fn kill(&mut self) {
        if let Some(pgid) = self.pgid {
            let _ = killpg(pgid, Signal::SIGKILL);
        }
        let _ = self.child.start_kill();
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        if !self.exited {
            self.stop();
        }
    }
}

/// The job's broker on a loopback TCP port (the `process` rung's, and the
/// fake rung's): the engine reaches it as `127.0.0.1:PORT`.
pub(crate) async fn bind_loopback_broker(
    job: &RungJob<'_>,
    config: BrokerConfig,
) -> Result<BrokerHandle, RungError> {
    let listener =
        TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|error| RungError::BindBroker {
                job_id: job.job_id.to_string(),
                socket: None,
                error,
            })?;
    broker::start(listener, config).map_err(|error| RungError::StartBroker {
        job_id: job.job_id.to_string(),
        error,
    })
}

/// The job's egress proxy on a loopback TCP port (the `process` rung's,
/// and the fake rung's), open to every process of the host: it serves
/// only requests with the job's own proxy credentials, which its URL
/// holds (`egress::auth`).
pub(crate) async fn bind_loopback_egress(
    job: &RungJob<'_>,
    config: EgressConfig,
    records: mpsc::Sender<EgressRecord>,
) -> Result<EgressHandle, RungError> {
    let loopback = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let token = crate::egress::auth::new_token();
    let proxy = EgressProxy::bind_authenticated(loopback, config, records, token.clone())
        .await
        .map_err(|error| RungError::BindEgress {
            job_id: job.job_id.to_string(),
            error,
        })?;
    let url = proxy.url(Some(&token)).unwrap_or_default();
    Ok(EgressHandle {
        proxy,
        url,
        token: Some(token),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The supervisor is started with no directory of its own (so the
    /// static build spawns it rather than forking Paddock) and is told the
    /// engine's directory before `--` (after `--report-stdin`, for a
    /// command without stdin); the engine's program, arguments and
    /// environment follow as given, nothing of Paddock's environment.
    #[test]
    fn the_supervisor_gets_the_engines_directory_as_an_argument() {
        let cmd = CommandSpec {
            program: PathBuf::from("/opt/engine"),
            args: vec!["exec".to_string(), "--json".to_string()],
            env: vec![("HOME".to_string(), "/jobs/j/home".to_string())],
            cwd: PathBuf::from("/jobs/j/work"),
            stdin: None,
            protect: Vec::new(),
        };
        let c = supervisor(std::path::Path::new("/usr/bin/paddock"), &cmd, true);
        let std = c.as_std();
        assert_eq!(
            (
                std.get_program().to_os_string(),
                std.get_args().map(|a| a.to_os_string()).collect::<Vec<_>>(),
                std.get_envs()
                    .map(|(k, v)| (k.to_os_string(), v.map(|v| v.to_os_string())))
                    .collect::<Vec<_>>(),
                std.get_current_dir(),
            ),
            (
                "/usr/bin/paddock".into(),
                [
                    "__supervise",
                    "--report-stdin",
                    "/jobs/j/work",
                    "--",
                    "/opt/engine",
                    "exec",
                    "--json"
                ]
                .map(Into::into)
                .to_vec(),
                vec![("HOME".into(), Some("/jobs/j/home".into()))],
                None,
            )
        );
    }

    /// A supervisor that does not start (the `paddock` binary gone or
    /// replaced while the process ran) is named as what failed, beside
    /// the engine it was to run, which was never reached.
    #[tokio::test]
    async fn a_supervisor_that_does_not_start_is_named_not_the_engine() {
        let dir = tempfile::tempdir().unwrap();
        let helper = dir.path().join("gone/paddock");
        let cmd = CommandSpec {
            program: PathBuf::from("/opt/engine"),
            args: Vec::new(),
            env: Vec::new(),
            cwd: dir.path().to_path_buf(),
            stdin: None,
            protect: Vec::new(),
        };
        let Err(e) =
            ChildProcess::spawn(supervisor(&helper, &cmd, false), "supervisor", "j1", &cmd)
        else {
            panic!("a missing supervisor started");
        };
        assert_eq!(
            e.to_string(),
            format!(
                "start {} (Paddock's supervisor for /opt/engine): No such file or directory (os error 2)",
                helper.display()
            )
        );
    }
}

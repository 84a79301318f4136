//! The `paddock` command line: `run` a job spec, render its `context`
//! without running it, list `jobs`, print a job's `events`. Exit codes are part of the interface (docs/cli.md): 0 done,
//! 1 failed, 2 bad input, 3 held by budget, 4 timed out, 5 cancelled,
//! 70 internal error.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use paddock::broker::PriceTable;
use paddock::paths::Paths;
use paddock::runner::{self, RunError, RunOptions};
use paddock::store::Store;
use paddock_protocol::{JobSpec, JobStatus, KeyRef};

#[macro_use]
mod stdio;

mod context_cmd;
mod doctor;
mod policy_cmd;
mod prices_cmd;
mod progress;
mod sandbox_cmd;

#[derive(Parser)]
#[command(
    name = "paddock",
    version,
    about = "Run coding agents as sandboxed, metered jobs"
)]
struct Cli {
    /// The SQLite database (default: $XDG_DATA_HOME/paddock/paddock.db).
    #[arg(long, global = true, env = "PADDOCK_DB")]
    db: Option<PathBuf>,
    /// Where the database and artifacts live (default: $XDG_DATA_HOME/paddock).
    #[arg(long, global = true, env = "PADDOCK_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Where job workspaces are created (default: $XDG_STATE_HOME/paddock/jobs).
    #[arg(long, global = true, env = "PADDOCK_JOBS_DIR")]
    jobs_dir: Option<PathBuf>,
    /// This host's shared state, e.g. the `maxConcurrentJobs` slots
    /// (default: `host/` next to the jobs directory).
    #[arg(long, global = true, env = "PADDOCK_HOST_DIR")]
    host_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a job spec (TOML or JSON) to its end.
    Run {
        spec: PathBuf,
        /// Print the final job record as one JSON object on stdout.
        #[arg(long)]
        json: bool,
        /// Keep the workspace after the job.
        #[arg(long)]
        keep: bool,
        /// A price table merged over the shipped one (its models replace or
        /// add to the shipped ones; `paddock prices` shows the result).
        #[arg(long, env = "PADDOCK_PRICES")]
        prices: Option<PathBuf>,
    },
    /// Print the price table in effect: the shipped one with `--prices`
    /// merged over it (USD per million tokens).
    Prices(prices_cmd::PricesArgs),
    /// Render a job's context (AGENTS.md, CLAUDE.md, .paddock/, skills, the
    /// prompt) into a directory without running an engine, and report its size.
    Context {
        spec: PathBuf,
        /// The directory to write into (created; must be empty).
        #[arg(long, default_value = "paddock-context")]
        out: PathBuf,
        /// Print the size report as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// List jobs, newest first.
    Jobs {
        #[arg(long, default_value_t = 50)]
        limit: u32,
        #[arg(long)]
        json: bool,
    },
    /// Run a command confined by Paddock's sandbox (docs/sandbox.md).
    Sandbox(sandbox_cmd::SandboxArgs),
    /// Clean up after jobs whose `paddock` process died: kill what they left
    /// running, remove their cgroups, save their patch so far, remove their
    /// workspaces and leases, and mark them failed.
    Gc {
        /// Print the report as one JSON object on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Report what this host supports for each isolation rung.
    Doctor {
        #[arg(long)]
        json: bool,
    },
    /// Print a job's stored events as JSONL.
    Events {
        job_id: String,
        /// Only events after this sequence number.
        #[arg(long, default_value_t = 0)]
        after: u64,
    },
    /// Spend rolled up by day, project, task type, engine and model.
    Usage {
        /// Print the report as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Host profiles: save one in the store, list them, show one.
    Profile {
        #[command(subcommand)]
        cmd: policy_cmd::ProfileCmd,
    },
    /// Called by engine hooks inside a job; not for direct use.
    #[command(hide = true)]
    Hook {
        #[command(subcommand)]
        cmd: policy_cmd::HookCmd,
    },
}

/// Process exit codes.
mod exit {
    pub const DONE: u8 = 0;
    pub const FAILED: u8 = 1;
    pub const BAD_INPUT: u8 = 2;
    pub const HELD: u8 = 3;
    pub const TIMED_OUT: u8 = 4;
    pub const CANCELLED: u8 = 5;
    pub const INTERNAL: u8 = 70;
}

fn main() -> ExitCode {
    // No descriptor the caller left open reaches anything this process
    // starts: the sandbox helper and its command, an engine on the
    // `process` rung, git (docs/sandbox.md, threat model).
    if let Err(e) = paddock_sandbox::caps::cloexec_inherited() {
        eprintln!("paddock: cannot mark inherited file descriptors close-on-exec: {e}");
        return ExitCode::from(exit::INTERNAL);
    }
    // The sandbox helper: freshly exec'd, single-threaded, before anything
    // else of this binary runs (docs/sandbox.md).
    let first = std::env::args_os().nth(1);
    if first.as_deref() == Some(std::ffi::OsStr::new(paddock_sandbox::launch::INIT_ARG)) {
        let code = paddock_sandbox::init::main();
        return ExitCode::from(u8::try_from(code).unwrap_or(exit::INTERNAL));
    }
    // The `process` rung's supervisor: single-threaded, no runtime.
    if first.as_deref() == Some(std::ffi::OsStr::new(paddock::supervise::SUPERVISE_ARG)) {
        let code = paddock::supervise::main(std::env::args_os().skip(2));
        return ExitCode::from(u8::try_from(code).unwrap_or(exit::INTERNAL));
    }
    // `paddock sandbox ...` is on the start-up path of every confined
    // command: it parses only its own arguments and sets up no logging
    // (`paddock --db X sandbox ...` still works, through the full parser).
    if first.as_deref() == Some(std::ffi::OsStr::new("sandbox")) {
        paddock_sandbox::trace::init();
        return sandbox_cmd::main_from_args(std::env::args_os().skip(1));
    }
    // Paddock holds the provider keys: its /proc entries (environ, mem)
    // belong to root from now on, so a job's engine of the same uid cannot
    // read them (a root engine with CAP_SYS_PTRACE still can; docs/host-profile.md).
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        eprintln!("paddock: cannot make this process non-dumpable: {e}");
        return ExitCode::from(exit::INTERNAL);
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PADDOCK_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(|| paddock::redact::RedactingWriter::new(std::io::stderr()))
        .init();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                exit::BAD_INPUT
            } else {
                exit::DONE
            });
        }
    };
    if let Cmd::Hook { cmd } = &cli.command {
        return ExitCode::from(policy_cmd::run_hook(cmd));
    }
    // The job's provider key leaves the environment before the runtime's
    // threads exist (`dispatch` reports a spec that does not load).
    if let Cmd::Run { spec, .. } = &cli.command {
        if let Ok(JobSpec {
            upstream:
                paddock_protocol::UpstreamSpec {
                    key: Some(KeyRef::Env(name)),
                    ..
                },
            ..
        }) = JobSpec::load(spec)
        {
            paddock::broker::secret::withdraw_env(&name);
        }
    }
    // `paddock sandbox` needs no runtime: it becomes the helper (exec).
    let cli = match cli.command {
        Cmd::Sandbox(args) => return sandbox_cmd::main(args),
        command => Cli { command, ..cli },
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            errln!("paddock: cannot start the runtime: {e}");
            return ExitCode::from(exit::INTERNAL);
        }
    };
    match rt.block_on(dispatch(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(Failure::BadInput(e)) => {
            errln!("paddock: {e:#}");
            ExitCode::from(exit::BAD_INPUT)
        }
        Err(Failure::Internal(e)) => {
            errln!("paddock: {e:#}");
            ExitCode::from(exit::INTERNAL)
        }
    }
}

enum Failure {
    BadInput(anyhow::Error),
    Internal(anyhow::Error),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Internal(e)
    }
}

async fn dispatch(cli: Cli) -> Result<u8, Failure> {
    let paths = Paths::resolve(cli.db, cli.data_dir, cli.jobs_dir)
        .map_err(|e| Failure::Internal(e.into()))?;
    match cli.command {
        Cmd::Run {
            spec,
            json,
            keep,
            prices,
        } => {
            let spec = JobSpec::load(&spec).map_err(|e| Failure::BadInput(e.into()))?;
            let prices = PriceTable::effective(prices.as_deref())
                .map_err(|e| Failure::BadInput(e.into()))?;
            let store = open_store(&paths).await?;
            // Teardown also after a crash: what earlier `paddock` processes
            // left behind when they died mid-job (what `paddock gc` does).
            for line in paddock::reaper::render(&paddock::reaper::reap(&paths, &store).await) {
                errln!("paddock: {line}");
            }
            let opts = RunOptions {
                paths: paths.clone(),
                keep,
                prices: Arc::new(prices),
                host_path: std::env::var_os("PATH"),
                host_dir: cli
                    .host_dir
                    .clone()
                    .unwrap_or_else(|| paths.jobs.parent().unwrap_or(&paths.jobs).join("host")),
                paddock_exe: std::env::current_exe().ok(),
            };
            let mut view = progress::Progress::new();
            // Listen for Ctrl-C, and for SIGTERM and SIGHUP (what systemd,
            // Docker and CI send, a closed terminal), from now on: each
            // cancels the job. `ctrl_c()` would install its handler only
            // when first polled, and a signal before that (the job waiting
            // for a host slot) would kill paddock uncleaned.
            let cancel = cancel_signals().context("listen for Ctrl-C, SIGTERM and SIGHUP")?;
            let result = runner::run(&spec, &store, &opts, &mut view, cancel).await;
            view.finish();
            if let Ok(r) = &result {
                if let Some(dir) = &r.kept_workspace {
                    errln!("paddock: workspace kept at {}", dir.display());
                }
            }
            let result = match result {
                Ok(r) => r,
                Err(RunError::BadInput(msg)) => {
                    return Err(Failure::BadInput(anyhow::anyhow!(msg)))
                }
                Err(e) => return Err(Failure::Internal(e.into())),
            };
            if json {
                let out =
                    serde_json::to_string(&result.record).context("serialize the job record")?;
                outln!("{out}");
            } else {
                out!("{}", progress::summary(&result.record));
            }
            Ok(match result.record.status {
                _ if result.bad_input => exit::BAD_INPUT,
                JobStatus::Done => exit::DONE,
                JobStatus::Failed | JobStatus::Running => exit::FAILED,
                JobStatus::Held => exit::HELD,
                JobStatus::TimedOut => exit::TIMED_OUT,
                JobStatus::Cancelled => exit::CANCELLED,
            })
        }
        // Handled in `main`, before the runtime exists.
        Cmd::Sandbox(_) => Err(Failure::Internal(anyhow::anyhow!(
            "`paddock sandbox` runs without the async runtime"
        ))),
        Cmd::Doctor { json } => {
            let report = doctor::report();
            if json {
                outln!(
                    "{}",
                    serde_json::to_string(&report).context("serialize the report")?
                );
            } else {
                out!("{}", doctor::render(&report));
            }
            Ok(if report.rungs.iter().all(|r| r.supported) {
                exit::DONE
            } else {
                exit::FAILED
            })
        }
        Cmd::Gc { json } => {
            let store = open_store(&paths).await?;
            let report = paddock::reaper::reap(&paths, &store).await;
            if json {
                outln!(
                    "{}",
                    serde_json::to_string(&report).context("serialize the report")?
                );
            } else {
                let lines = paddock::reaper::render(&report);
                if lines.is_empty() {
                    outln!("nothing to clean up");
                }
                for line in lines {
                    outln!("{line}");
                }
            }
            let clean = report.errors.is_empty() && report.jobs.iter().all(|j| j.errors.is_empty());
            Ok(if clean { exit::DONE } else { exit::FAILED })
        }
        Cmd::Context { spec, out, json } => {
            let spec = JobSpec::load(&spec).map_err(|e| Failure::BadInput(e.into()))?;
            let store = match spec.policy.profile {
                Some(_) => Some(open_store(&paths).await?),
                None => None,
            };
            let report = context_cmd::render(&spec, &paths, store.as_ref(), &out).await?;
            if json {
                let text = serde_json::to_string(&serde_json::json!({
                    "out": out.display().to_string(),
                    "report": report,
                }))
                .context("serialize the size report")?;
                outln!("{text}");
            } else {
                out!("{}", context_cmd::table(&spec, &out, &report));
            }
            Ok(exit::DONE)
        }
        Cmd::Jobs { limit, json } => {
            let store = open_store(&paths).await?;
            let jobs = store.jobs(limit).await.context("list jobs")?;
            if json {
                for j in &jobs {
                    outln!("{}", serde_json::to_string(j).context("serialize a job")?);
                }
            } else {
                out!("{}", progress::jobs_table(&jobs));
            }
            Ok(exit::DONE)
        }
        Cmd::Prices(args) => {
            let text = prices_cmd::run(&args).map_err(Failure::BadInput)?;
            out!("{text}");
            Ok(exit::DONE)
        }
        Cmd::Usage { json } => {
            let store = open_store(&paths).await?;
            let (jobs, calls) = store.usage().await.context("read the ledger")?;
            let report = paddock::usage::report(&jobs, &calls);
            if json {
                outln!(
                    "{}",
                    serde_json::to_string(&report).context("serialize the usage report")?
                );
            } else {
                out!("{}", paddock::usage::render(&report));
            }
            Ok(exit::DONE)
        }
        Cmd::Hook { cmd } => Ok(policy_cmd::run_hook(&cmd)),
        Cmd::Profile { cmd } => {
            let store = open_store(&paths).await?;
            let out = policy_cmd::run_profile(&cmd, &store)
                .await
                .map_err(|e| match e {
                    policy_cmd::ProfileFailure::BadInput(e) => Failure::BadInput(e),
                    policy_cmd::ProfileFailure::Internal(e) => Failure::Internal(e),
                })?;
            out!("{out}");
            Ok(exit::DONE)
        }
        Cmd::Events { job_id, after } => {
            let store = open_store(&paths).await?;
            if store
                .job(&job_id)
                .await
                .context("look up the job")?
                .is_none()
            {
                return Err(Failure::BadInput(anyhow::anyhow!(
                    "no job `{job_id}` in {}",
                    paths.db.display()
                )));
            }
            let events = store.events(&job_id, after).await.context("read events")?;
            let mut out = String::new();
            for e in &events {
                out.push_str(&serde_json::to_string(e).context("serialize an event")?);
                out.push('\n');
            }
            out!("{out}");
            Ok(exit::DONE)
        }
    }
}

/// Resolves on the first SIGINT, SIGTERM or SIGHUP; the handlers are
/// installed before this returns.
fn cancel_signals() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
            _ = hup.recv() => {}
        }
    })
}

async fn open_store(paths: &Paths) -> Result<Store, Failure> {
    Store::open(&paths.db)
        .await
        .with_context(|| format!("open the store at {}", paths.db.display()))
        .map_err(Failure::Internal)
}

//! The `paddock` command line: `run` a job spec, render its `context`
//! without running it, list `jobs`, print a job's `events`. Exit codes are part of the interface (docs/cli.md): 0 done,
//! 1 failed, 2 bad input, 3 held by budget, 4 timed out, 5 cancelled,
//! 70 internal error.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use cli::{exit, Failure};
use paddock::paths::Paths;
use paddock_protocol::{JobSpec, KeyRef};

#[macro_use]
mod stdio;

mod cli;
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
    Run(cli::run::RunArgs),
    /// Print the price table in effect: the shipped one with `--prices`
    /// merged over it (USD per million tokens).
    Prices(prices_cmd::PricesArgs),
    /// Render a job's context (AGENTS.md, CLAUDE.md, .paddock/, skills, the
    /// prompt) into a directory without running an engine, and report its size.
    Context(cli::context::ContextArgs),
    /// List jobs, newest first.
    Jobs(cli::jobs::JobsArgs),
    /// Run a command confined by Paddock's sandbox (docs/sandbox.md).
    Sandbox(sandbox_cmd::SandboxArgs),
    /// Clean up after jobs whose `paddock` process died: kill what they left
    /// running, remove their cgroups, save their patch so far, remove their
    /// workspaces and leases, and mark them failed.
    Gc(cli::gc::GcArgs),
    /// Report what this host supports for each isolation rung.
    Doctor(cli::doctor::DoctorArgs),
    /// Print a job's stored events as JSONL.
    Events(cli::events::EventsArgs),
    /// Spend rolled up by day, project, task type, engine and model.
    Usage(cli::usage::UsageArgs),
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
    // Inside `paddock doctor`'s sandbox: reach the broker socket.
    if first.as_deref() == Some(std::ffi::OsStr::new(paddock::host_check::CONNECT_ARG)) {
        let port = std::env::args().nth(2);
        return ExitCode::from(paddock::host_check::connect_main(port.as_deref()));
    }
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
    if let Cmd::Run(cli::run::RunArgs { spec, .. }) = &cli.command {
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
        // A Bedrock API key read without a reference (`bedrock` without a key).
        paddock::broker::secret::withdraw_env(paddock::runner::BEDROCK_API_KEY_VAR);
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

async fn dispatch(cli: Cli) -> Result<u8, Failure> {
    let paths = Paths::resolve(cli.db, cli.data_dir, cli.jobs_dir)
        .map_err(|e| Failure::Internal(e.into()))?;
    match cli.command {
        Cmd::Run(args) => cli::run::exec(args, &paths, cli.host_dir).await,
        // Handled in `main`, before the runtime exists.
        Cmd::Sandbox(_) => Err(Failure::Internal(anyhow::anyhow!(
            "`paddock sandbox` runs without the async runtime"
        ))),
        Cmd::Doctor(args) => cli::doctor::exec(args, &paths),
        Cmd::Gc(args) => cli::gc::exec(args, &paths).await,
        Cmd::Context(args) => cli::context::exec(args, &paths).await,
        Cmd::Jobs(args) => cli::jobs::exec(args, &paths).await,
        Cmd::Prices(args) => {
            let text = prices_cmd::run(&args).map_err(Failure::BadInput)?;
            out!("{text}");
            Ok(exit::DONE)
        }
        Cmd::Usage(args) => cli::usage::exec(args, &paths).await,
        Cmd::Hook { cmd } => Ok(policy_cmd::run_hook(&cmd)),
        Cmd::Profile { cmd } => cli::profile::exec(cmd, &paths).await,
        Cmd::Events(args) => cli::events::exec(args, &paths).await,
    }
}

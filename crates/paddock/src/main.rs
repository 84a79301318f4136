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

/// Every environment variable Paddock reads, for `--help`.
const ENVIRONMENT: &str = "\
Environment:
  PADDOCK_DB, PADDOCK_DATA_DIR,   the same as --db, --data-dir, --jobs-dir,
  PADDOCK_JOBS_DIR,               --host-dir and run's --prices
  PADDOCK_HOST_DIR, PADDOCK_PRICES
  PADDOCK_LOG                     log filter (tracing's syntax, e.g. `debug`;
                                  default `warn`, raised by -v)
  PADDOCK_CGROUP_ROOT             the cgroup under which jobs' cgroups are made
  NO_COLOR                        set and not empty: no color (like --color never)
  XDG_DATA_HOME, XDG_STATE_HOME,  where the defaults above live
  XDG_CONFIG_HOME, HOME
  TZ                              the time zone of times shown
  PATH                            where the engines (codex, claude) and git are found
  The variable a spec's upstream.key names (env:NAME) holds its provider key.

Docs: README.md and docs/cli.md in Paddock's repository.";

#[derive(Parser)]
#[command(
    name = "paddock",
    version,
    about = "Run coding agents as sandboxed, metered jobs",
    after_help = ENVIRONMENT
)]
struct Cli {
    /// Print less: no live progress, only errors and the result.
    #[arg(long, short = 'q', global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Print more: -v logs at info, -vv at debug (PADDOCK_LOG overrides).
    #[arg(long, short = 'v', global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// When to color output (NO_COLOR set and not empty means never on auto).
    #[arg(long, global = true, value_enum, default_value_t = cli::color::When::Auto)]
    color: cli::color::When,
    /// The SQLite database (default: $XDG_DATA_HOME/paddock/paddock.db).
    #[arg(long, global = true, env = "PADDOCK_DB")]
    db: Option<PathBuf>,
    /// Where the database and artifacts live (default: $XDG_DATA_HOME/paddock).
    #[arg(long, global = true, env = "PADDOCK_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Where job workspaces are created (default: $XDG_STATE_HOME/paddock/jobs).
    #[arg(long, global = true, env = "PADDOCK_JOBS_DIR")]
    jobs_dir: Option<PathBuf>,
    /// This host's shared state, e.g. the `max_concurrent_jobs` slots
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
    /// Print a shell completion script (e.g. `paddock completions bash >
    /// ~/.local/share/bash-completion/completions/paddock`).
    Completions(cli::completions::CompletionsArgs),
    /// Print the man page, paddock(1), as roff (`paddock man > paddock.1`).
    Man,
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
    let color = cli::color::init(cli.color);
    let level = match (cli.quiet, cli.verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, _) => "debug",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PADDOCK_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level)),
        )
        .with_ansi(color)
        .with_writer(|| paddock::redact::RedactingWriter::new(std::io::stderr()))
        .init();
    if let Cmd::Hook { cmd } = &cli.command {
        return ExitCode::from(policy_cmd::run_hook(cmd));
    }
    // The job's provider key leaves the environment before the runtime's
    // threads exist (`dispatch` reports a spec that does not load).
    if let Cmd::Run(cli::run::RunArgs { spec, .. }) = &cli.command {
        if let Err(e) = cli::run::read_stdin_spec(spec) {
            errln!("paddock: cannot read the spec from stdin: {e}");
            return ExitCode::from(exit::BAD_INPUT);
        }
        if let Ok(JobSpec {
            upstream:
                paddock_protocol::UpstreamSpec {
                    key: Some(KeyRef::Env(name)),
                    ..
                },
            ..
        }) = cli::run::load_spec(spec)
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
            errln!("{}", error_line(&e));
            ExitCode::from(exit::BAD_INPUT)
        }
        Err(Failure::Internal(e)) => {
            errln!("{}", error_line(&e));
            ExitCode::from(exit::INTERNAL)
        }
    }
}

/// A failed command's one line on stderr: `paddock: ` and the error chain,
/// each cause once (the prefix in red when colored).
fn error_line(e: &anyhow::Error) -> String {
    format!(
        "{} {}",
        cli::color::paint("paddock:", cli::color::ERROR),
        cli::error_chain::render(e.as_ref())
    )
}

async fn dispatch(cli: Cli) -> Result<u8, Failure> {
    use clap::CommandFactory as _;
    match cli.command {
        Cmd::Completions(args) => cli::completions::completions(args, Cli::command()),
        Cmd::Man => cli::completions::man(Cli::command()),
        command => dispatch_job_commands(Cli { command, ..cli }).await,
    }
}

async fn dispatch_job_commands(cli: Cli) -> Result<u8, Failure> {
    let paths = Paths::resolve(cli.db, cli.data_dir, cli.jobs_dir)
        .map_err(|e| Failure::Internal(e.into()))?;
    match cli.command {
        Cmd::Run(args) => cli::run::exec(args, &paths, cli.host_dir, cli.quiet).await,
        Cmd::Completions(_) | Cmd::Man => Err(Failure::Internal(anyhow::anyhow!(
            "`paddock completions` and `paddock man` need no store"
        ))),
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;

    /// Every argument of every subcommand (hidden ones aside) has help text.
    #[test]
    fn every_argument_has_help() {
        fn missing(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                let builtin = matches!(a.get_id().as_str(), "help" | "version");
                if !builtin && !a.is_hide_set() && a.get_help().is_none() {
                    out.push(format!("{path} {}", a.get_id()));
                }
            }
            for sub in cmd.get_subcommands() {
                if !sub.is_hide_set() {
                    missing(sub, &format!("{path} {}", sub.get_name()), out);
                }
            }
        }
        let mut out = Vec::new();
        missing(&Cli::command(), "paddock", &mut out);
        assert_eq!(out, Vec::<String>::new());
    }

    /// `--help` lists every environment variable Paddock's code reads.
    #[test]
    fn help_lists_every_environment_variable() {
        let help = Cli::command().render_long_help().to_string();
        let read = [
            "PADDOCK_DB",
            "PADDOCK_DATA_DIR",
            "PADDOCK_JOBS_DIR",
            "PADDOCK_HOST_DIR",
            "PADDOCK_PRICES",
            "PADDOCK_LOG",
            "PADDOCK_CGROUP_ROOT",
            "NO_COLOR",
            "XDG_DATA_HOME",
            "XDG_STATE_HOME",
            "XDG_CONFIG_HOME",
            "HOME",
            "TZ",
            "PATH",
        ];
        let absent: Vec<&str> = read.into_iter().filter(|v| !help.contains(v)).collect();
        assert_eq!(absent, Vec::<&str>::new());
    }

    /// docs/cli.md names every visible subcommand and every long option.
    #[test]
    fn docs_cover_every_command_and_option() {
        let doc = include_str!("../../../docs/cli.md");
        fn missing(cmd: &clap::Command, path: &str, doc: &str, out: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                if let Some(long) = a.get_long() {
                    if !a.is_hide_set() && !doc.contains(&format!("--{long}")) {
                        out.push(format!("{path} --{long}"));
                    }
                }
            }
            for sub in cmd.get_subcommands() {
                if sub.is_hide_set() || sub.get_name() == "help" {
                    continue;
                }
                let name = format!("{path} {}", sub.get_name());
                if !doc.contains(&name) {
                    out.push(name.clone());
                }
                missing(sub, &name, doc, out);
            }
        }
        let mut out = Vec::new();
        missing(&Cli::command(), "paddock", doc, &mut out);
        assert_eq!(out, Vec::<String>::new());
    }
}

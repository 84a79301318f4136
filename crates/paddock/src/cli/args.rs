//! The command line's shape: the global options, the subcommands (each
//! one's arguments live in its own file of `cli/`), and the environment
//! variables `--help` lists. Tests check that every argument has help
//! text, `--help` names every variable Paddock reads, and docs/cli.md
//! covers every command and option.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Every environment variable Paddock reads, for `--help`.
const ENVIRONMENT: &str = "\
Environment:
  PADDOCK_DB, PADDOCK_DATA_DIR,   the same as --db, --data-dir, --jobs-dir,
  PADDOCK_JOBS_DIR,               --host-dir and run's --prices
  PADDOCK_HOST_DIR, PADDOCK_PRICES
  PADDOCK_LOG                     log filter (tracing's syntax, e.g. `debug`;
                                  default `warn`, raised by -v)
  PADDOCK_LOG_FORMAT              the same as --log-format (text, json)
  PADDOCK_CGROUP_ROOT             the cgroup under which jobs' cgroups are made
  PADDOCK_WORKSPACE_LAYOUT        `clone` or `overlay` (an error where it cannot
                                  be mounted); unset: an overlay on a cached
                                  snapshot of the base where this process may
                                  mount (root), else a clone
  PADDOCK_FORGE_RATE_LIMIT_WAIT_SECS
                                  how long a forge request waits, at most, for
                                  a rate limit before publishing fails
                                  (default 60; 0: never waits)
  NO_COLOR                        set and not empty: no color (like --color never)
  XDG_DATA_HOME, XDG_STATE_HOME,  where the defaults above live
  XDG_CONFIG_HOME, HOME
  TZ                              the time zone of times shown
  PATH                            where the engines (codex, claude) and git are found
  The variable a spec's upstream.key names (env:NAME) holds its provider key.

Docs: README.md and docs/cli.md in Paddock's repository.";

/// The heading the options every subcommand takes are listed under, apart
/// from the subcommand's own.
const GLOBAL: &str = "Global options";

#[derive(Parser)]
#[command(
    name = "paddock",
    version,
    about = "Run coding agents as sandboxed, metered jobs",
    after_help = ENVIRONMENT
)]
pub struct Cli {
    /// Print less: no live progress, only errors and the result.
    #[arg(long, short = 'q', global = true, conflicts_with = "verbose", help_heading = GLOBAL)]
    pub quiet: bool,
    /// Print more: -v logs at info, -vv at debug (PADDOCK_LOG overrides).
    #[arg(long, short = 'v', global = true, action = clap::ArgAction::Count, help_heading = GLOBAL)]
    pub verbose: u8,
    /// The log's format on stderr: text, or one JSON object per line
    /// (default: text; for `paddock serve`, the config file's
    /// `[serve] log_format`).
    #[arg(long, global = true, value_enum, env = "PADDOCK_LOG_FORMAT", help_heading = GLOBAL)]
    pub log_format: Option<paddock::config::LogFormat>,
    /// When to color output (NO_COLOR set and not empty means never on auto).
    #[arg(long, global = true, value_enum, default_value_t = super::color::When::Auto, help_heading = GLOBAL)]
    pub color: super::color::When,
    /// The SQLite database, or a `postgres://user@host/database` URL
    /// (default: $XDG_DATA_HOME/paddock/paddock.db).
    #[arg(long, global = true, env = "PADDOCK_DB", help_heading = GLOBAL)]
    pub db: Option<PathBuf>,
    /// Where the database and artifacts live (default: $XDG_DATA_HOME/paddock).
    #[arg(long, global = true, env = "PADDOCK_DATA_DIR", help_heading = GLOBAL)]
    pub data_dir: Option<PathBuf>,
    /// Where job workspaces are created (default: $XDG_STATE_HOME/paddock/jobs).
    #[arg(long, global = true, env = "PADDOCK_JOBS_DIR", help_heading = GLOBAL)]
    pub jobs_dir: Option<PathBuf>,
    /// This host's shared state, e.g. the `max_concurrent_jobs` slots
    /// (default: `host/` next to the jobs directory).
    #[arg(long, global = true, env = "PADDOCK_HOST_DIR", help_heading = GLOBAL)]
    pub host_dir: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Cmd,
}

#[derive(Subcommand)]
pub enum Cmd {
    /// Run a job spec (TOML or JSON) to its end.
    Run(super::run::RunArgs),
    /// Serve the HTTP API other systems dispatch jobs to: a persistent
    /// queue, live events, cancellation (docs/serve.md, docs/api.md).
    Serve(super::serve::ServeArgs),
    /// Print the price table in effect: the shipped one with `--prices`
    /// merged over it (USD per million tokens).
    Prices(super::prices::PricesArgs),
    /// Render a job's context (AGENTS.md, CLAUDE.md, .paddock/, skills, the
    /// prompt) into a directory without running an engine, and report its size.
    Context(super::context::ContextArgs),
    /// List jobs, newest first.
    Jobs(super::jobs::JobsArgs),
    /// Run a command confined by Paddock's sandbox (docs/sandbox.md).
    Sandbox(super::sandbox::SandboxArgs),
    /// Clean up after jobs whose `paddock` process died: kill what they left
    /// running, remove their cgroups, save their patch so far, remove their
    /// workspaces and leases, and mark them failed.
    Gc(super::gc::GcArgs),
    /// Report what this host supports for each isolation rung.
    Doctor(super::doctor::DoctorArgs),
    /// Print a job's stored events, one readable line each (JSONL with
    /// `--json`; `--follow` until the job ends).
    Events(super::events::EventsArgs),
    /// A job's summary and its closeout (what was done, what failed, cost).
    Show(super::show::ShowArgs),
    /// Cancel a job from another terminal: a queued one at once, a running
    /// one (on any host of the store) as Ctrl-C would; waits for it to end.
    Cancel(super::cancel::CancelArgs),
    /// Print a job's patch.
    Diff(super::diff::DiffArgs),
    /// Apply a job's patch to a working tree with `git apply`.
    Apply(super::apply::ApplyArgs),
    /// Publish a finished job's result again (after a forge outage or a
    /// rejected push): branch, pull request, closeout. Never merges.
    Publish(super::publish::PublishArgs),
    /// Spend rolled up by day, project, task type, engine and model.
    Usage(super::usage::UsageArgs),
    /// Host profiles: save one in the store, list them, show one.
    Profile {
        #[command(subcommand)]
        cmd: super::profile::ProfileCmd,
    },
    /// API tokens of `paddock serve`: create (printed once), list, revoke.
    Token {
        #[command(subcommand)]
        cmd: super::token::TokenCmd,
    },
    /// Print a shell completion script (e.g. `paddock completions bash >
    /// ~/.local/share/bash-completion/completions/paddock`).
    Completions(super::completions::CompletionsArgs),
    /// Print the man page, paddock(1), as roff (`paddock man > paddock.1`).
    Man,
    /// Called by engine hooks inside a job; not for direct use.
    #[command(hide = true)]
    Hook {
        #[command(subcommand)]
        cmd: super::hook::HookCmd,
    },
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
    /// A subcommand's help lists its own options under "Options:" and the
    /// global ones apart, under "Global options:" (they were interleaved).
    #[test]
    fn a_subcommands_help_keeps_its_own_options_apart_from_the_global_ones() {
        let mut cmd = Cli::command();
        cmd.build();
        let jobs = cmd.find_subcommand_mut("jobs").unwrap();
        let help = jobs.render_help().to_string();
        let longs = |heading: &str| -> Vec<String> {
            let section = help.split(heading).nth(1).unwrap_or("");
            let section = section.split("\n\n").next().unwrap_or("");
            section
                .lines()
                .filter_map(|l| l.split("--").nth(1))
                .filter_map(|l| l.split([' ', ',']).next())
                .map(str::to_owned)
                .collect()
        };
        assert_eq!(
            (longs("\nOptions:\n"), longs("\nGlobal options:\n")),
            (
                ["limit", "json", "status", "engine", "rung", "help"]
                    .map(String::from)
                    .to_vec(),
                [
                    "quiet",
                    "verbose...",
                    "log-format",
                    "color",
                    "db",
                    "data-dir",
                    "jobs-dir",
                    "host-dir"
                ]
                .map(String::from)
                .to_vec()
            ),
            "{help}"
        );
    }

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
            "PADDOCK_WORKSPACE_LAYOUT",
            "PADDOCK_FORGE_RATE_LIMIT_WAIT_SECS",
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

    /// `events`' summary says what it prints by default (readable lines;
    /// it said "as JSONL", which only `--json` prints) and `--db` that it
    /// takes a PostgreSQL URL too.
    #[test]
    fn events_and_db_help_say_what_they_do() {
        let cmd = Cli::command();
        let about = |name: &str| {
            cmd.find_subcommand(name)
                .and_then(|c| c.get_about())
                .map(|a| a.to_string())
        };
        let db = cmd
            .get_arguments()
            .find(|a| a.get_id() == "db")
            .and_then(|a| a.get_help())
            .map(|h| h.to_string());
        assert_eq!(
            (about("events"), db),
            (
                Some(
                    "Print a job's stored events, one readable line each (JSONL with `--json`; \
                     `--follow` until the job ends)"
                        .to_owned()
                ),
                Some(
                    "The SQLite database, or a `postgres://user@host/database` URL (default: \
                     $XDG_DATA_HOME/paddock/paddock.db)"
                        .to_owned()
                )
            )
        );
    }

    /// docs/cli.md names every visible subcommand and every long option.
    #[test]
    fn docs_cover_every_command_and_option() {
        let doc = include_str!("../../../../docs/cli.md");
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

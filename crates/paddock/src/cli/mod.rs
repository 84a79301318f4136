//! One file per `paddock` subcommand: its arguments (a clap `Args`
//! struct) and what it does (`exec`); `args.rs` the command line's shape.
//! `main.rs` runs the helper entry points and hands the parsed command
//! line here; what the subcommands share (output set-up, the runtime, the
//! dispatch, the exit codes, the failure kinds, opening the store) lives
//! in this file. Rendering lives in `cli/`, domain logic in the library.

use std::process::ExitCode;

use anyhow::Context as _;
use paddock::paths::Paths;
use paddock::store::{SharedStore, Store, StoreError};
use paddock_protocol::KeyRef;

use args::{Cli, Cmd};

pub mod apply;
pub mod args;
pub mod cancel;
pub mod color;
pub mod completions;
pub mod config_reads;
pub mod context;
pub mod context_render;
pub mod diff;
pub mod doctor;
pub mod events;
pub mod gc;
pub mod hook;
pub mod jobs;
pub mod local_time;
pub mod prices;
pub mod profile;
pub mod progress;
pub mod publish;
pub mod run;
pub mod sandbox;
pub mod serve;
pub mod show;
pub mod stale_note;
pub mod token;
pub mod usage;

/// `--color` and `NO_COLOR`, and the log (`-q`/`-v`, `PADDOCK_LOG`) on
/// stderr, redacted and terminal-safe (`paddock::log`), as text or JSON lines (`--log-format`, else for
/// `paddock serve` the config file's `[serve] log_format`).
pub fn init_output(cli: &Cli) {
    use paddock::config::LogFormat;
    let color = color::init(cli.color);
    let level = match (cli.quiet, cli.verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, _) => "debug",
    };
    let format = cli.log_format.unwrap_or_else(|| match &cli.command {
        // A config file that does not load is reported by the command.
        Cmd::Serve(_) => run::user_config(&[paddock::config::Section::Serve])
            .ok()
            .and_then(|c| c.serve.log_format)
            .unwrap_or_default(),
        _ => LogFormat::Text,
    });
    let filter = tracing_subscriber::EnvFilter::try_from_env("PADDOCK_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    use tracing_subscriber::util::SubscriberInitExt as _;
    paddock::log::subscriber(format, color, filter, std::io::stderr).init();
}

/// Runs `cli`'s command on a multi-threaded runtime; the exit code, a
/// failure printed once on stderr.
pub fn run_async(cli: Cli) -> ExitCode {
    // The store's PostgreSQL password (PGPASSWORD, a URL in PADDOCK_DB)
    // leaves the environment before the runtime's threads exist.
    paddock::store::withdraw_env();
    if let Cmd::Run(args) = &cli.command {
        // A `paddock run` that executed itself again without a stored
        // profile's `env:` credentials (cli/run.rs): their values, and a
        // spec it read from stdin, were handed over.
        match paddock::env_handover::take() {
            Ok(Some(text)) => run::set_stdin_spec(text),
            Ok(None) => {}
            Err(e) => {
                errln!("paddock: {e}");
                return ExitCode::from(exit::INTERNAL);
            }
        }
        if let Err(e) = withdraw_keys(args) {
            errln!("paddock: cannot read the spec from stdin: {e}");
            return ExitCode::from(exit::BAD_INPUT);
        }
    }
    if let Cmd::Serve(args) = &cli.command {
        // A `paddock serve` that executed itself again without a stored
        // profile's `env:` credentials (cli/serve.rs): their values.
        if let Err(e) = paddock::env_handover::take() {
            errln!("paddock: {e}");
            return ExitCode::from(exit::INTERNAL);
        }
        serve::withdraw_keys(args);
    }
    // A command that runs jobs compiles the redaction rules beside its
    // start-up (after the keys left the environment: a thread of its own).
    if matches!(cli.command, Cmd::Run(_) | Cmd::Serve(_)) {
        paddock::redact::warm_up();
    }
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
    let dispatched = rt.block_on(dispatch(cli));
    // Before the runtime goes: the stores left open keep their
    // connections (`LEFT_OPEN`).
    rt.block_on(settle_left_open());
    let (code, e) = match dispatched {
        Ok(code) => return ExitCode::from(code),
        Err(Failure::BadInput(e)) => (exit::BAD_INPUT, e),
        Err(Failure::Internal(e)) => (exit::INTERNAL, e),
    };
    errln!(
        "{} {}",
        color::paint("paddock:", color::ERROR),
        paddock::terminal_text::text(&paddock::error_chain::chain(e.as_ref()))
    );
    ExitCode::from(code)
}

/// The job's provider key leaves the environment before the runtime's
/// threads exist (`run` reports a spec that does not load); `Err` when the
/// spec is `-` and stdin cannot be read.
fn withdraw_keys(args: &run::RunArgs) -> std::io::Result<()> {
    run::read_stdin_spec(&args.spec)?;
    if let Ok(spec) = run::load_spec(&args.spec) {
        if let Some(KeyRef::Env(name)) = &spec.upstream.key {
            paddock::broker::secret::withdraw_env(name);
        }
        // The forge's token or App key (results.github) is Paddock's alone too.
        if let Some(gh) = &spec.results.github {
            let app_key = gh.app.as_ref().map(|a| &a.private_key);
            for key in gh.token.iter().chain(app_key) {
                if let KeyRef::Env(name) = key {
                    paddock::broker::secret::withdraw_env(name);
                }
            }
        }
        // So is GitLab's (results.gitlab.token).
        if let Some(KeyRef::Env(name)) = spec.results.gitlab.as_ref().map(|g| &g.token) {
            paddock::broker::secret::withdraw_env(name);
        }
        // And the token a URL source is fetched with (repository.token).
        if let Some(KeyRef::Env(name)) = &spec.repository.token {
            paddock::broker::secret::withdraw_env(name);
        }
        // So is the push's token or deploy key (results.push).
        for key in spec.results.push.iter().flat_map(|p| p.keys()) {
            if let KeyRef::Env(name) = key {
                paddock::broker::secret::withdraw_env(name);
            }
        }
        // And a host profile file's credentials for allowed hosts
        // (network.credentials; a profile from the store is read later,
        // and its variables leave by a re-execution, cli/run.rs).
        let profile = spec.policy.profile.as_deref();
        if let Some(path) = profile.filter(|p| paddock_protocol::PolicySpec::profile_is_file(p)) {
            if let Ok(loaded) = paddock_protocol::HostProfile::load(std::path::Path::new(path)) {
                for c in loaded.profile.network.iter().flat_map(|n| &n.credentials) {
                    if let KeyRef::Env(name) = &c.secret {
                        paddock::broker::secret::withdraw_env(name);
                    }
                }
            }
        }
        // Not read and parsed again by the run.
        run::keep_loaded_spec(&args.spec, spec);
    }
    // A Bedrock API key read without a reference (`bedrock` without a key).
    paddock::broker::secret::withdraw_env(paddock::runner::BEDROCK_API_KEY_VAR);
    Ok(())
}

async fn dispatch(cli: Cli) -> Result<u8, Failure> {
    use clap::CommandFactory as _;
    // `--db` or `PADDOCK_DB` (clap takes the flag first): a missing store
    // one names is an error saying which (`open_store_or_empty`).
    let db = cli.db.clone().map(|db| {
        let by = match std::env::var_os(paddock::store::PADDOCK_DB) {
            Some(env) if env == db.as_os_str() => paddock::paths::StoreNamedBy::Env,
            _ => paddock::paths::StoreNamedBy::Flag,
        };
        (db, by)
    });
    let paths = || {
        let paths = Paths::resolve(db.clone(), cli.data_dir.clone(), cli.jobs_dir.clone())
            .map_err(|e| match e {
                paddock::paths::PathsError::StoreUrl { .. } => Failure::BadInput(e.into()),
                e => Failure::Internal(e.into()),
            })?;
        // The host gits this process starts name its jobs directory, so
        // that only this home's reaper passes kill them once orphaned.
        paddock::own_children::set_jobs_dir(&paths.jobs);
        Ok::<_, Failure>(paths)
    };
    match cli.command {
        Cmd::Completions(args) => completions::completions(args, Cli::command()),
        Cmd::Man => completions::man(Cli::command()),
        Cmd::Prices(args) => prices::exec(args),
        Cmd::Run(args) => run::exec(args, &paths()?, cli.host_dir, cli.quiet).await,
        Cmd::Serve(args) => serve::exec(args, &paths()?, cli.host_dir).await,
        Cmd::Doctor(args) => doctor::exec(args, &paths()?, cli.host_dir),
        Cmd::Gc(args) => gc::exec(args, &paths()?).await,
        Cmd::Context(args) => context::exec(args, &paths()?).await,
        Cmd::Jobs(args) => jobs::exec(args, &paths()?).await,
        Cmd::Usage(args) => usage::exec(args, &paths()?).await,
        Cmd::Profile { cmd } => profile::exec(cmd, &paths()?).await,
        Cmd::Token { cmd } => token::exec(cmd, &paths()?).await,
        Cmd::Events(args) => events::exec(args, &paths()?).await,
        Cmd::Show(args) => show::exec(args, &paths()?).await,
        Cmd::Cancel(args) => cancel::exec(args, &paths()?).await,
        Cmd::Diff(args) => diff::exec(args, &paths()?).await,
        Cmd::Apply(args) => apply::exec(args, &paths()?).await,
        Cmd::Publish(args) => publish::exec(args, &paths()?).await,
        Cmd::Hook { cmd } => Ok(hook::exec(&cmd)),
        // Run in `main`, without the async runtime.
        Cmd::Sandbox(_) => Err(Failure::Internal(anyhow::anyhow!(
            "`paddock sandbox` runs without the async runtime"
        ))),
    }
}

/// Process exit codes.
pub mod exit {
    pub const DONE: u8 = 0;
    pub const FAILED: u8 = 1;
    pub const BAD_INPUT: u8 = 2;
    pub const HELD: u8 = 3;
    pub const TIMED_OUT: u8 = 4;
    pub const CANCELLED: u8 = 5;
    pub const INTERNAL: u8 = 70;
}

/// Why a subcommand failed: the caller's input (exit 2) or Paddock itself (exit 70).
pub enum Failure {
    BadInput(anyhow::Error),
    Internal(anyhow::Error),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Internal(e)
    }
}

/// The store `paths.db` names: a SQLite file created (with its directory)
/// when missing, or a PostgreSQL database migrated.
pub async fn open_store(paths: &Paths) -> Result<SharedStore, Failure> {
    paddock::store::open(&paths.db)
        .await
        .with_context(|| format!("open the store at {}", paths.db))
        .map_err(Failure::Internal)
        .map(|store| left_open(paths, store))
}

/// The SQLite stores this process opened, their connections left open
/// until it exits (`paddock serve` closes its own when it stops). The last
/// connection's close folds the write-ahead log into the database file,
/// syncs both and deletes the log: on `paddock run`'s exit path that took
/// tens of ms on a busy disk (and an exit during it left the log half
/// folded), and after any command it left the next job to start a new log,
/// whose header it must sync before its first event. The detached pass
/// after each job folds the log in instead and starts the next one
/// (`paddock::store::checkpoint`); every transaction is committed by then.
static LEFT_OPEN: std::sync::Mutex<Vec<SharedStore>> = std::sync::Mutex::new(Vec::new());

/// Waits for the connections of the stores in [`LEFT_OPEN`] to be back
/// in their pools (`Store::settle`): dropped with the runtime's tasks,
/// one would be closed, and the last close folds the log in and deletes
/// it after all.
async fn settle_left_open() {
    let open: Vec<SharedStore> = match LEFT_OPEN.lock() {
        Ok(open) => open.clone(),
        Err(_) => return,
    };
    for store in open {
        store.settle().await;
    }
}

/// `store`, kept in [`LEFT_OPEN`] when it is a SQLite file.
fn left_open(paths: &Paths, store: SharedStore) -> SharedStore {
    if paths.db.file().is_some() {
        if let Ok(mut open) = LEFT_OPEN.lock() {
            open.push(store.clone());
        }
    }
    store
}

/// The existing store `paths.db` names: nothing is created or migrated,
/// and a missing one is `StoreError::Missing` ([`open_store_or_empty`]
/// reads it as empty).
async fn open_existing_store(paths: &Paths) -> Result<SharedStore, Failure> {
    match paddock::store::open_existing(&paths.db).await {
        Ok(store) => Ok(left_open(paths, store)),
        Err(e @ (StoreError::Missing { .. } | StoreError::PgSchema { .. })) => {
            Err(Failure::BadInput(e.into()))
        }
        Err(e) => Err(Failure::Internal(
            anyhow::Error::new(e).context(format!("open the store at {}", paths.db)),
        )),
    }
}

/// The store `paths.db` names for a command that only reads (`jobs`,
/// `usage`, `show`, `events`, `diff`, `apply`, `cancel`, `publish`, the
/// token and profile reads): a SQLite file that does not exist (a fresh
/// install, where nothing has run yet) is read as an empty store, created
/// in memory, and nothing is written to disk, so each says there are no
/// jobs (or tokens) in that file, naming it; a PostgreSQL database without
/// Paddock's schema is still the caller's mistake. Before, `paddock jobs`
/// and `paddock usage` on a fresh install exited 2 where `paddock token
/// list` answered an empty table.
///
/// Only the default store (under the data directory) reads so: one that
/// `--db` or `PADDOCK_DB` names and that is not there (a typo, an
/// unmounted share) is an error naming it and which of the two named it
/// (exit 2), so that a billing script reading `paddock usage` never
/// records nothing for a store it did not reach. Before, it read as
/// empty, exit 0.
pub async fn open_store_or_empty(paths: &Paths) -> Result<SharedStore, Failure> {
    match open_existing_store(paths).await {
        Err(Failure::BadInput(e))
            if matches!(
                e.downcast_ref::<StoreError>(),
                Some(StoreError::Missing { .. })
            ) =>
        {
            if let Some(by) = paths.db_named_by {
                return Err(Failure::BadInput(anyhow::anyhow!(
                    "no store at {}, which {by} names: nothing has run with this database \
                     (check {by})",
                    paths.db
                )));
            }
            let empty = paddock::store::SqliteStore::open_in_memory()
                .await
                .context("open an empty store in memory")?;
            Ok(std::sync::Arc::new(empty))
        }
        other => other,
    }
}

/// The full id of the job `given` names (an id, a unique prefix, `latest`):
/// a name that matches no job, or several, is the caller's mistake.
pub async fn resolve_job(store: &dyn Store, given: &str, paths: &Paths) -> Result<String, Failure> {
    use paddock::job_ref::{resolve, JobRefError};
    resolve(store, given).await.map_err(|e| match e {
        JobRefError::Lookup { .. } => Failure::Internal(e.into()),
        JobRefError::NoMatch { .. } | JobRefError::NoJobs => {
            Failure::BadInput(anyhow::anyhow!("{e} in {}", paths.db))
        }
        e => Failure::BadInput(e.into()),
    })
}

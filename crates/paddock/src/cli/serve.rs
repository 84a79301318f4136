//! `paddock serve`: the HTTP runtime (docs/serve.md, docs/api.md) on the
//! same store and the same `Runner` as `paddock run`. Its address is
//! bound first (one it cannot listen on is said before anything else is
//! done); then what earlier processes left behind when they died is
//! reaped (as `run` and `gc` do), so jobs a killed server was running end
//! `failed` and what it had queued runs. SIGTERM or Ctrl-C drains and
//! stops.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use paddock::config::ServeFile;
use paddock::paths::Paths;
use paddock::runner::Runner;
use paddock::server::{self, ServeConfig};

use super::{exit, open_store, Failure};

/// `--max-concurrent-jobs`: at least 1 (0 was raised to 1 without a word).
fn at_least_one(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(0) => Err("give at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("`{s}` is not a number of jobs: {e}")),
    }
}

/// `--max-passed-over-secs`: at least 1 (0 failed a job at its first pass).
fn secs_at_least_one(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err(
            "give at least 1: 0 would fail a job at its first pass, before any other server \
             looked at it"
                .to_owned(),
        ),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("`{s}` is not a number of seconds: {e}")),
    }
}

#[derive(clap::Args)]
pub struct ServeArgs {
    /// The address to listen on (default 127.0.0.1:8012; port 0 picks a
    /// free one, printed at start): an IP address and a port, host names
    /// are not looked up.
    #[arg(long, value_parser = paddock::listen_addr::parse)]
    pub listen: Option<SocketAddr>,
    /// How many queued jobs run at once (default 2).
    #[arg(long, value_parser = at_least_one)]
    pub max_concurrent_jobs: Option<u32>,
    /// On SIGTERM, how long running jobs may go on before they are
    /// cancelled, in seconds (default 30).
    #[arg(long)]
    pub drain_grace_secs: Option<u64>,
    /// How long a job may wait queued, passed over by every server that
    /// claimed it (none could run it), before it fails with why, in
    /// seconds (default 86400, a day; at least 1).
    #[arg(long, value_parser = secs_at_least_one)]
    pub max_passed_over_secs: Option<u64>,
    /// POST every job's final record here, signed (docs/serve.md,
    /// "Completion webhooks").
    #[arg(long)]
    pub webhook_url: Option<String>,
    /// The webhooks' HMAC key: `env:NAME` or `file:PATH`.
    #[arg(long)]
    pub webhook_secret: Option<String>,
    /// A price table merged over the shipped one (as for `paddock run`).
    #[arg(long, env = "PADDOCK_PRICES")]
    pub prices: Option<PathBuf>,
    /// A secret reference (`env:NAME`, `file:PATH`) a submitted spec may
    /// name, or the server's own cloud credentials a keyless upstream
    /// uses (`aws:credential-chain`, `aws:profile:NAME`,
    /// `google:application-default`), or its user's git credentials
    /// (`git:credentials`: a source URL without a token, an SSH push
    /// without a key); repeatable (docs/serve.md, "What a submitted spec
    /// may name").
    #[arg(long = "allow-ref", value_name = "REF")]
    pub allow_refs: Vec<String>,
    /// A directory under which a submitted spec may name files (its
    /// repository, scenario, engine binary, ...); repeatable.
    #[arg(long = "allow-path", value_name = "DIR")]
    pub allow_paths: Vec<PathBuf>,
    /// A host a submitted spec may have this server's credentials sent to
    /// (its `upstream.base_url`, a forge's or a push's URL); repeatable.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// A host profile (a stored id or a preset) a submitted spec may
    /// choose besides the default one; repeatable.
    #[arg(long = "allow-profile", value_name = "ID")]
    pub allow_profiles: Vec<String>,
    /// Let a submitted spec ask for the `process` rung (no isolation: the
    /// job runs as this server's user, with its files and network).
    #[arg(long)]
    pub allow_process: bool,
    /// Let a submitted spec set `results.allow_ci_changes`: its result
    /// pushed though it changes a CI definition (`.github/workflows/`,
    /// `.gitlab-ci.yml`, …), which the forge runs at the push with the
    /// repository's CI secrets.
    #[arg(long)]
    pub allow_ci_changes: bool,
    /// Accept a job this server cannot run (a secret, a file or a
    /// credential of its spec only another server of the fleet sharing
    /// the store has) and queue it for that server, where without it such
    /// a submission is refused (422) naming what is missing here.
    #[arg(long)]
    pub accept_for_fleet: bool,
}

/// The `env:` secrets the server's settings name leave its environment
/// before the runtime's threads exist, as `paddock run`'s keys do
/// (`secret::withdraw_env`): the references a submitted spec may name
/// (`--allow-ref`, `[serve] allow_refs`), the webhook secret, and the
/// credentials of the default host profile when it is a file. Without it
/// every program the server starts that does not clear its environment
/// (the user's git that snapshots and clones a job's source) had them.
/// What does not parse is left for `exec` to report.
pub fn withdraw_keys(args: &ServeArgs) {
    let config = super::run::user_config(&[
        paddock::config::Section::Top,
        paddock::config::Section::Serve,
    ])
    .unwrap_or_default();
    let serve = &config.serve;
    let refs = args
        .allow_refs
        .iter()
        .chain(serve.allow_refs.iter().flatten())
        .chain(args.webhook_secret.iter())
        .chain(serve.webhook_secret.iter());
    for reference in refs {
        if let Ok(paddock_protocol::KeyRef::Env(name)) = paddock_protocol::KeyRef::parse(reference)
        {
            paddock::broker::secret::withdraw_env(&name);
        }
    }
    let default = config.host_profile.as_deref().or(config.profile.as_deref());
    if let Some(file) = default.filter(|p| paddock_protocol::PolicySpec::profile_is_file(p)) {
        if let Ok(loaded) = paddock_protocol::HostProfile::load(std::path::Path::new(file)) {
            for name in credential_vars(&loaded.profile) {
                paddock::broker::secret::withdraw_env(&name);
            }
        }
    }
}

/// The `env:` variables `profile`'s `network.credentials` name.
fn credential_vars(profile: &paddock_protocol::HostProfile) -> Vec<String> {
    profile
        .network
        .iter()
        .flat_map(|n| &n.credentials)
        .filter_map(|c| match &c.secret {
            paddock_protocol::KeyRef::Env(v) => Some(v.clone()),
            paddock_protocol::KeyRef::File(_) => None,
        })
        .collect()
}

/// The stored host profiles this server's jobs may run under (its
/// default and `allow_profiles`) whose `network.credentials` name `env:`
/// variables still in its environment: those leave it by this process
/// executing itself again without them (`paddock::env_handover`, as
/// `paddock run` does for its job's profile), before anything is reaped,
/// bound or run. The threads exist by now, so `remove_var` would be
/// unsound. Returns when there is nothing to withdraw.
async fn withdraw_stored_credentials(
    store: &paddock::store::SharedStore,
    ids: &[String],
) -> Result<(), Failure> {
    let mut names = Vec::new();
    for id in ids
        .iter()
        .filter(|p| !paddock_protocol::PolicySpec::profile_is_file(p))
    {
        // A profile the store does not hold is a preset (no credentials)
        // or unknown (admission reports it).
        if let Ok(Some(profile)) = store.profile(id).await {
            names.extend(credential_vars(&profile));
        }
    }
    let names = paddock::env_handover::present(names);
    if names.is_empty() {
        return Ok(());
    }
    store.close().await;
    let e = paddock::env_handover::reexec_without(&names, None);
    Err(Failure::Internal(anyhow::Error::new(e).context(format!(
        "withdraw the credentials of the server's host profiles ({}) from its environment",
        names.join(", ")
    ))))
}

pub async fn exec(
    args: ServeArgs,
    paths: &Paths,
    host_dir: Option<PathBuf>,
) -> Result<u8, Failure> {
    let defaults = super::run::user_config(super::config_reads::SERVE)?;
    let listen_from = match (&args.listen, &defaults.serve.listen) {
        (Some(_), _) => "--listen".to_owned(),
        (None, Some(_)) => match super::run::config_location() {
            Some(file) => format!("[serve] listen in the config file {}", file.display()),
            None => "[serve] listen in the config file".to_owned(),
        },
        (None, None) => "the default".to_owned(),
    };
    let flags = ServeFile {
        listen: args.listen,
        max_concurrent_jobs: args.max_concurrent_jobs,
        drain_grace_secs: args.drain_grace_secs,
        max_passed_over_secs: args.max_passed_over_secs,
        webhook_url: args.webhook_url,
        webhook_secret: args.webhook_secret,
        // Read where the log starts (`init_output`).
        log_format: None,
        lanes: None,
        allow_refs: Some(args.allow_refs),
        allow_paths: Some(
            args.allow_paths
                .into_iter()
                .map(|p| std::path::absolute(&p).unwrap_or(p))
                .collect(),
        ),
        allow_hosts: Some(args.allow_hosts),
        allow_profiles: Some(args.allow_profiles),
        allow_process: args.allow_process.then_some(true),
        allow_ci_changes: args.allow_ci_changes.then_some(true),
        accept_for_fleet: args.accept_for_fleet.then_some(true),
    };
    let store = open_store(paths).await?;
    // Cancels asked by other processes (`paddock cancel`) reach this
    // server's jobs at once, not at their poll.
    store.watch_other_processes();
    let profiles: Vec<String> = defaults
        .host_profile
        .iter()
        .chain(defaults.profile.iter())
        .chain(flags.allow_profiles.iter().flatten())
        .chain(defaults.serve.allow_profiles.iter().flatten())
        .cloned()
        .collect();
    withdraw_stored_credentials(&store, &profiles).await?;
    // The config file's profiles resolve at start, named by their key and
    // the file as `paddock run` names them. Before, a `host_profile` that
    // does not resolve (every submission refused) was said of no job
    // until one came, and a `profile` that does not was said without
    // where it was set.
    let config_file = super::run::config_location().unwrap_or_else(|| PathBuf::from("config.toml"));
    let in_config = |key: &str, e: paddock::policy::profile::ResolveError| {
        Failure::BadInput(anyhow::Error::new(e).context(format!(
            "{key} in the config file {}",
            config_file.display()
        )))
    };
    if let Some(id) = &defaults.host_profile {
        paddock::policy::profile::resolve(id, &*store)
            .await
            .map_err(|e| in_config("host_profile", e))?;
    }
    // The default host profile's slots cap the queue unless a flag or
    // `[serve]` says otherwise.
    let profile_cap = match &defaults.profile {
        Some(id) => {
            paddock::policy::profile::resolve(id, &*store)
                .await
                .map_err(|e| in_config("profile", e))?
                .0
                .max_concurrent_jobs
        }
        None => None,
    };
    // An allowed profile that does not resolve (a typo) refuses every
    // spec naming it: said at start, once for each id, however many
    // times the flags and the file name it (before, one given both ways
    // was warned about twice). Not an error: it may be saved later
    // (`paddock profile add`), as an allowed path may be mounted.
    let mut allowed: Vec<&String> = Vec::new();
    for id in flags
        .allow_profiles
        .iter()
        .flatten()
        .chain(defaults.serve.allow_profiles.iter().flatten())
    {
        if !allowed.contains(&id) {
            allowed.push(id);
        }
    }
    for id in allowed {
        if let Err(e) = paddock::policy::profile::resolve(id, &*store).await {
            errln!(
                "paddock: warning: allowed profile (--allow-profile, [serve] allow_profiles): {}: \
                 a submitted spec naming it is refused until it resolves",
                paddock::terminal_text::text(&paddock::error_chain::chain(&e))
            );
        }
    }
    let config = ServeConfig::resolve_with_profile(&flags, &defaults.serve, profile_cap);
    // Bound before anything is reaped or started: an address it cannot
    // listen on (a port in use: another server, perhaps this one's twin
    // started by mistake) is said at once, before a pass that may take
    // seconds and would report (and settle) leftovers for a server that
    // never serves. Connections made meanwhile wait in the backlog.
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| Failure::BadInput(bind_failed(config.listen, listen_from, e)))?;
    // A mistyped allowed directory refuses every spec naming files there
    // (422, "outside the directories a submitted spec may name"): said
    // at start. Not an error: it may be mounted later.
    for dir in config.submissions.paths.iter().filter(|d| !d.is_dir()) {
        errln!(
            "paddock: warning: allowed path {} (--allow-path, [serve] allow_paths) {}: a \
             submitted spec may name nothing under it until it is one",
            paddock::terminal_text::text(&dir.display().to_string()),
            if dir.exists() {
                "is not a directory"
            } else {
                "does not exist"
            }
        );
    }
    let prices = super::run::price_table(args.prices.as_deref(), defaults.prices.as_deref())
        .map_err(Failure::BadInput)?;
    let liveness = super::run::liveness(paths, &defaults.hosts)?;
    let webhooks = webhooks(&config, &store)?.map(|w| {
        w.held_by(&liveness.owner.name)
            .checked_by(config.submissions.clone())
    });
    for line in super::gc::render(&paddock::reaper::reap_here(paths, &*store, &liveness).await) {
        errln!("paddock: {line}");
    }
    // What the pass left in the trash (it empties for a bounded time),
    // emptied on a thread of its own: nothing waits for it.
    if paddock::workspace::trash::has_entries(&paths.jobs) {
        let jobs = paths.jobs.clone();
        tokio::task::spawn_blocking(move || {
            for e in paddock::workspace::trash::empty(&jobs, true) {
                tracing::warn!("trash: {e}");
            }
        });
    }
    // The caches held to their cap from the start, not only after the
    // first job (a cap lowered in the config, a pass a killed process
    // never made), on a thread of its own: cheap when the size memo is
    // fresh, and nothing waits for it.
    if let Some(cap) = defaults.caches.max_bytes() {
        let jobs = paths.jobs.clone();
        tokio::task::spawn_blocking(move || {
            for e in paddock::cache_cap::enforce(&jobs, cap).errors {
                tracing::warn!("caches: {e}");
            }
        });
    }
    let runner = Runner::new(
        store.clone(),
        paddock::runner::RunnerConfig {
            host_profile: defaults.host_profile.clone(),
            tools: super::run::job_tools(&defaults.jobs)?,
            host_secrets: secret_files(&config),
            source_within: Some(source_within(&config.submissions.paths)),
            ..super::run::runner_config(paths, host_dir, prices, liveness)?
        },
    )
    .capping_caches(defaults.caches.max_bytes());
    let addr = listener.local_addr().context("read the bound address")?;
    let stop = stop_signals(config.drain_grace).context("listen for SIGTERM and Ctrl-C")?;
    errln!("paddock: serving on http://{addr}");
    server::serve(server::Deps {
        listener,
        shutdown: stop.drain.cancelled_owned(),
        hurry: stop.hurry.cancelled_owned(),
        store: store.clone(),
        runner,
        config,
        defaults,
        webhooks,
    })
    .await;
    store.close().await;
    errln!("paddock: stopped");
    Ok(exit::DONE)
}

/// The directories the look at a submitted spec's local source may go
/// into (`RunnerConfig::source_within`): the allowed ones, as given and
/// with their links resolved, as the submission's check reads them.
fn source_within(allowed: &[std::path::PathBuf]) -> Vec<std::path::PathBuf> {
    let mut within = allowed.to_vec();
    within.extend(allowed.iter().filter_map(|p| std::fs::canonicalize(p).ok()));
    within
}

/// The failure to bind `addr` (which `from` set), with its fix when the
/// cause is a known one: `paddock: listen on 127.0.0.1:8012 (the
/// default): Address already in use (os error 98): another process
/// (another `paddock serve`?) listens on port 8012 already: stop it, or
/// give another address …`.
fn bind_failed(addr: SocketAddr, from: String, e: std::io::Error) -> anyhow::Error {
    match paddock::listen_addr::bind_hint(addr, &e) {
        Some(hint) => anyhow::anyhow!("listen on {addr} ({from}): {e}: {hint}"),
        None => anyhow::Error::new(e).context(format!("listen on {addr} ({from})")),
    }
}

/// The files of the server's own secrets (its `allow_refs` and
/// `webhook_secret` `file:` references), each with the setting naming
/// it: no sandboxed job's read-only path may show them
/// (`RunnerConfig::host_secrets`), whichever job names them.
fn secret_files(config: &ServeConfig) -> Vec<(String, std::path::PathBuf)> {
    let named = config
        .submissions
        .refs
        .iter()
        .map(|r| ("the server's allow_refs", r))
        .chain(
            config
                .webhook_secret
                .iter()
                .map(|r| ("the server's webhook_secret", r)),
        );
    named
        .filter_map(
            |(what, reference)| match paddock_protocol::KeyRef::parse(reference) {
                Ok(paddock_protocol::KeyRef::File(path)) => Some((what.to_string(), path)),
                Ok(paddock_protocol::KeyRef::Env(_)) | Err(_) => None,
            },
        )
        .collect()
}

/// The completion webhooks the settings ask for (a URL needs a secret).
fn webhooks(
    config: &ServeConfig,
    store: &paddock::store::SharedStore,
) -> Result<Option<server::webhooks::Webhooks>, Failure> {
    use server::webhooks::{WebhookConfig, Webhooks};
    // A secret alone signs the jobs' own webhooks (`results.webhook_url`).
    let reference = match (&config.webhook_url, config.webhook_secret.as_deref()) {
        (None, None) => return Ok(None),
        (Some(_), None) => {
            return Err(Failure::BadInput(anyhow::anyhow!(
                "--webhook-url needs --webhook-secret (env:NAME or file:PATH)"
            )))
        }
        (_, Some(reference)) => reference,
    };
    let reference = paddock_protocol::KeyRef::parse(reference)
        .map_err(|e| Failure::BadInput(anyhow::anyhow!("--webhook-secret: {e}")))?;
    let secret =
        paddock::secret::Secret::resolve(paddock::secret::SecretKind::WebhookSecret, &reference)
            .map_err(|e| Failure::BadInput(anyhow::anyhow!("--webhook-secret: {e}")))?;
    Webhooks::new(
        WebhookConfig::new(config.webhook_url.clone(), secret),
        store.clone(),
    )
    .map(Some)
    .map_err(|e| Failure::BadInput(e.into()))
}

/// How the server is stopped: `drain` is cancelled on the first SIGTERM
/// or SIGINT, `hurry` on the next.
struct Stop {
    drain: tokio_util::sync::CancellationToken,
    hurry: tokio_util::sync::CancellationToken,
}

/// The first SIGTERM or SIGINT drains (running jobs get `grace`), the
/// next cancels the running jobs at once; each says so on stderr. Before,
/// a Ctrl-C said nothing for up to the whole grace (30 s by default) and
/// a second one was swallowed: only `kill -9` stopped the server sooner,
/// leaving its jobs for a reaper. The handlers are installed before this
/// returns.
fn stop_signals(grace: std::time::Duration) -> std::io::Result<Stop> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let stop = Stop {
        drain: tokio_util::sync::CancellationToken::new(),
        hurry: tokio_util::sync::CancellationToken::new(),
    };
    let (drain, hurry) = (stop.drain.clone(), stop.hurry.clone());
    tokio::spawn(async move {
        for (token, said) in [
            (
                drain,
                format!(
                    "paddock: stopping: no job is claimed any more; running jobs get up to {} s \
                     to finish (drain_grace_secs), then are cancelled; Ctrl-C again (or \
                     SIGTERM) cancels them now",
                    grace.as_secs()
                ),
            ),
            (
                hurry,
                "paddock: stopping now: cancelling the running jobs".to_owned(),
            ),
        ] {
            let got = tokio::select! {
                got = int.recv() => got,
                got = term.recv() => got,
            };
            if got.is_none() {
                return;
            }
            errln!("{said}");
            token.cancel();
        }
    });
    Ok(stop)
}

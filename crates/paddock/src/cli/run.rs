//! `paddock run`: run a job spec to its end, with live progress on stderr
//! and the summary (or the job record as JSON) on stdout.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use paddock::broker::PriceTable;
use paddock::config::Section;
use paddock::heartbeat::Liveness;
use paddock::paths::Paths;
use paddock::runner::{ErrorCode, RunError, Runner, RunnerConfig};
use paddock_protocol::{Isolation, JobSpec, JobStatus};

use super::progress;
use super::{exit, open_store, Failure};

/// How errors name the spec read from stdin (`paddock run -`).
const STDIN_ORIGIN: &str = "<stdin>";

/// The spec read from stdin for `paddock run -` (read once, in `main`,
/// before the runtime starts).
static STDIN_SPEC: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Reads the spec from stdin if `spec` is `-`; once, before `load_spec`.
pub fn read_stdin_spec(spec: &std::path::Path) -> std::io::Result<()> {
    if spec == std::path::Path::new("-") && STDIN_SPEC.get().is_none() {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)?;
        let _ = STDIN_SPEC.set(text);
    }
    Ok(())
}

/// The spec read from stdin by the paddock that executed this one again
/// (`paddock::env_handover`); stdin is not read again.
pub fn set_stdin_spec(text: String) {
    let _ = STDIN_SPEC.set(text);
}

/// The spec `withdraw_keys` (in `main`, before the runtime starts) loaded
/// to take its credentials' variables out of the environment, kept with
/// the argument it was loaded from so that the run does not read and parse
/// it again (issue #14: the job's start-up path). Taken once.
static LOADED_SPEC: std::sync::Mutex<Option<(PathBuf, JobSpec)>> = std::sync::Mutex::new(None);

/// Keeps `loaded`, the spec `spec` named, for [`take_loaded_spec`].
pub fn keep_loaded_spec(spec: &Path, loaded: JobSpec) {
    if let Ok(mut kept) = LOADED_SPEC.lock() {
        *kept = Some((spec.to_path_buf(), loaded));
    }
}

/// The spec [`keep_loaded_spec`] kept for the argument `spec`, if any;
/// else it is loaded ([`load_spec`]).
fn take_loaded_spec(spec: &Path) -> Result<JobSpec, paddock_protocol::SpecError> {
    let kept = LOADED_SPEC.lock().ok().and_then(|mut k| k.take());
    match kept {
        Some((named, loaded)) if named == spec => Ok(loaded),
        _ => load_spec(spec),
    }
}

/// The spec `spec` names: a file, or `-` for the one read from stdin
/// (relative paths in it resolved against the current directory).
pub fn load_spec(spec: &std::path::Path) -> Result<JobSpec, paddock_protocol::SpecError> {
    match STDIN_SPEC.get() {
        Some(text) if spec == std::path::Path::new("-") => JobSpec::from_text(
            text,
            std::path::Path::new(STDIN_ORIGIN),
            std::path::Path::new("."),
        ),
        _ => JobSpec::load(spec),
    }
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// The job spec, a .toml or .json file (docs/job-spec.md); `-` reads
    /// it from stdin (JSON if it starts with `{`, TOML otherwise).
    pub spec: PathBuf,
    /// Print the final job record as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Keep the workspace after the job.
    #[arg(long)]
    pub keep: bool,
    /// A price table merged over the shipped one (its models replace or
    /// add to the shipped ones; `paddock prices` shows the result).
    #[arg(long, env = "PADDOCK_PRICES")]
    pub prices: Option<PathBuf>,
    /// Run the next attempt after this job of the same ticket: its
    /// outcome, closeout and review comments join the ticket's prior
    /// attempts (docs/results.md).
    #[arg(long, value_name = "JOB")]
    pub attempt_after: Option<String>,
}

pub async fn exec(
    args: RunArgs,
    paths: &Paths,
    host_dir: Option<PathBuf>,
    quiet: bool,
) -> Result<u8, Failure> {
    let mut pass = StartPass::default();
    let result = exec_beside(args, paths, host_dir, quiet, &mut pass).await;
    // However the run ended, its reaper's pass is not cut short by the
    // process's exit (it has long finished by the time a job has).
    pass.finished().await;
    result
}

/// The reaper's pass a `paddock run` starts with (what earlier `paddock`
/// processes left behind when they died mid-job: what `paddock gc` does),
/// run beside the job's admission and provisioning rather than before
/// them (issue #14: the job's start-up path; the pass reads every
/// process's environment, so it grew with the host's process count). It
/// may: the pass is built to run beside live jobs (every other
/// `paddock run` on the host, and a server's jobs, run beside it), and
/// this job is as live as they are from before anything of it appears
/// (its lease is held before its file is placed, its gits carry this
/// process's mark). Its report's lines come through a channel: shown
/// above the job's progress as they come (`follow`, so that the spinner
/// is not drawn over), or printed where the pass is awaited without it.
/// Awaited before anything that must come after it: a prior job named by
/// `--attempt-after` (one whose paddock was killed is failed by then),
/// the pass after a cancelled admission, and the process's exit.
#[derive(Default)]
struct StartPass {
    pass: Option<tokio::task::JoinHandle<()>>,
    lines: Option<tokio::sync::mpsc::UnboundedReceiver<String>>,
}

impl StartPass {
    fn start(&mut self, paths: &Paths, store: &paddock::store::SharedStore, liveness: &Liveness) {
        let (paths, store, liveness) = (paths.clone(), store.clone(), liveness.clone());
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.lines = Some(rx);
        self.pass = Some(tokio::spawn(async move {
            let report = paddock::reaper::reap_here(&paths, &*store, &liveness).await;
            for line in super::gc::render(&report) {
                let _ = tx.send(format!("paddock: {line}"));
            }
        }));
    }

    /// Waits for the pass, if one was started and is not awaited yet, and
    /// prints what of its report was not shown yet.
    async fn finished(&mut self) {
        if let Some(pass) = self.pass.take() {
            if let Err(e) = pass.await {
                errln!("paddock: the reaper's pass at the run's start failed: {e}");
            }
        }
        if let Some(mut lines) = self.lines.take() {
            while let Ok(line) = lines.try_recv() {
                errln!("{line}");
            }
        }
    }
}

async fn exec_beside(
    args: RunArgs,
    paths: &Paths,
    host_dir: Option<PathBuf>,
    quiet: bool,
    pass: &mut StartPass,
) -> Result<u8, Failure> {
    let RunArgs {
        spec,
        json,
        keep,
        prices,
        attempt_after,
    } = args;
    let config = user_config(super::config_reads::RUN)?;
    // Where the spec came from, which a host profile's refusal names:
    // its file, or `<stdin>` as its parse errors name the spec read from
    // stdin (`load_spec`).
    let spec_file = if spec == Path::new("-") {
        PathBuf::from(STDIN_ORIGIN)
    } else {
        spec.clone()
    };
    let loaded = take_loaded_spec(&spec).map_err(|e| Failure::BadInput(e.into()))?;
    let profile_from = profile_from_config(&config, &loaded);
    let spec = config.apply(loaded);
    // The sandbox's probe (a minimal sandbox started, which admission
    // waits for when the job asks for the sandbox or `auto`) runs beside
    // the store's opening and the reaper's pass instead of after them
    // (issue #14: the job's start-up path); admission reads its answer.
    // Its last success on this host is taken when fresh and made under
    // the same conditions (`rung/probe_cache.rs`): no sandbox started
    // just to learn again what the previous job learnt.
    let rungs = paddock::rung::Rungs::host_caching_probe(
        &std::env::current_exe().context("locate the paddock binary")?,
        cgroup_root().as_deref(),
        paddock::rung::probe_cache::ProbeCache::in_dir(&host_dir_of(paths, host_dir.as_deref())),
    );
    if matches!(spec.isolation, Isolation::Sandbox | Isolation::Auto) {
        let sandbox = rungs.sandbox.clone();
        tokio::spawn(async move { sandbox.probe().await });
    }
    // A URL source's mirror is fetched with the user's git configuration
    // (`workspace/remote_config.rs`): read beside the store's opening and
    // the reaper's pass, not on the provisioning path (issue #14).
    if spec.repository.url.is_some() && spec.repository.path.is_none() {
        paddock::workspace::read_remote_config_ahead();
    }
    // The price table (the shipped one parsed, about 18 KB of TOML, a
    // user's merged over it) is read on a blocking thread beside the
    // store's opening rather than before it (issue #14: the job's
    // start-up path); a bad table is still reported before the store's
    // failure.
    let from_config = config.prices.clone();
    let prices =
        tokio::task::spawn_blocking(move || price_table(prices.as_deref(), from_config.as_deref()));
    let early_store = withdraw_stored_credentials(&spec, paths).await?;
    let cache_cap = config.caches.max_bytes();
    let store = match early_store {
        Some(store) => Ok(store),
        None => open_store(paths).await,
    };
    let prices = prices
        .await
        .context("read the price table")
        .map_err(Failure::Internal)?
        .map_err(Failure::BadInput)?;
    let store = store?;
    // Teardown also after a crash: what earlier `paddock` processes
    // left behind when they died mid-job (what `paddock gc` does).
    let liveness = liveness(paths, &config.hosts)?;
    pass.start(paths, &store, &liveness);
    // The prior job named after the reaper's pass: one whose paddock was
    // killed is failed by then, not taken for a job still running.
    let prior = match attempt_after {
        Some(prior) => {
            pass.finished().await;
            Some(super::resolve_job(&*store, &prior, paths).await?)
        }
        None => None,
    };
    let config = RunnerConfig {
        host_profile: config.host_profile.clone(),
        tools: job_tools(&config.jobs)?,
        ..runner_config(paths, host_dir, prices, liveness)?
    };
    let helper = config.helper_exe.clone();
    // The job's directory goes into the trash at teardown, deleted after
    // this process exits by a detached remover (issue #14: teardown off
    // the job's path); the next reaper pass finishes what it does not.
    let reaper_store = store.clone();
    let runner = Runner::with_rungs(store, config, rungs).leaving_trash();
    // Listen for Ctrl-C, and for SIGTERM and SIGHUP (what systemd,
    // Docker and CI send, a closed terminal), from now on: each
    // cancels the job. `ctrl_c()` would install its handler only
    // when first polled, and a signal before that (the job waiting
    // for a host slot) would kill paddock uncleaned. One during the
    // admission (the prior attempt's pull request read from a forge that
    // may be slow, the sandbox's probe) stops it there: nothing started,
    // nothing recorded.
    let cancel = futures::FutureExt::shared(Box::pin(
        cancel_signals().context("listen for Ctrl-C, SIGTERM and SIGHUP")?,
    ));
    let admission = async {
        let named = |e: paddock::runner::AdmitError| {
            let e = e.in_spec_file(&spec_file);
            match &profile_from {
                Some((key, file)) => e.in_config_file(key, file),
                None => e,
            }
        };
        // The job runs here: an engine this host cannot find is refused
        // now, before anything of the job exists.
        runner
            .engine_here(&spec)
            .map_err(|e| failure(e.code(), named(e).into()))?;
        // Admission looks at a local source first (surely no repository
        // here: refused before a token is fetched or the sandbox probed).
        let admitted = match &prior {
            None => runner
                .admit(&spec)
                .await
                .map_err(|e| failure(e.code(), named(e).into())),
            // The engine's own session resumed, or a new one and why, is
            // said once the job has it (`follow`), not here: its
            // provisioning may still fail.
            Some(prior) => runner.admit_after(&spec, prior).await.map_err(|e| match e {
                paddock::runner::AfterError::Admit(e) => failure(e.code(), named(e).into()),
                e => failure(e.code(), e.into()),
            }),
        }?;
        // What its sandbox here would refuse at launch, refused now.
        runner
            .view_here(&admitted)
            .map_err(|e| failure(e.code(), named(e).into()))?;
        Ok::<_, Failure>(admitted)
    };
    let mut admitted = tokio::select! {
        admitted = admission => admitted?,
        () = cancel.clone() => {
            // The admission dropped mid-way: what it held of the prior job
            // (its lease, a token minted for the read) is the reaper's,
            // cleaned up now as a killed read's would be (after the
            // start's pass, which may still be at it).
            pass.finished().await;
            for line in super::gc::render(
                &paddock::reaper::reap_here(paths, &*reaper_store, &runner.config().liveness).await,
            ) {
                errln!("paddock: {line}");
            }
            let what = match &prior {
                Some(prior) => format!(
                    "the next attempt after job {} was admitted",
                    paddock::terminal_text::line(prior)
                ),
                None => "the job was admitted".to_string(),
            };
            errln!(
                "paddock: cancelled (paddock was stopped) while {what}, before it started: no job \
                 was recorded"
            );
            return Ok(exit::CANCELLED);
        }
    };
    admitted.keep = keep;
    admitted.spec_file = Some(spec_file);
    let mut view = progress::Progress::new(quiet);
    // The remover of the job's directory (and the store's checkpoint, the
    // caches' cap) after this process: started while the engine runs,
    // going once this process has exited (issue #14: its start off the
    // exit path, its work after it).
    let remover = Remover {
        exe: helper,
        jobs: paths.jobs.clone(),
        cap: cache_cap,
        db: paths.db.file().map(std::path::Path::to_path_buf),
        waiting: None,
    };
    let (result, remover) = follow(
        runner.start(admitted, cancel),
        &mut view,
        remover,
        &mut pass.lines,
    )
    .await;
    view.finish();
    remover.release().await;
    if let Ok(r) = &result {
        if let Some(dir) = &r.kept_workspace {
            errln!("paddock: workspace kept at {}", dir.display());
        }
    }
    let result = result.map_err(|e| failure(e.code(), e.into()))?;
    if json {
        let out = paddock::terminal_text::json::to_string(&result.record)
            .context("serialize the job record")?;
        outln!("{out}");
    } else {
        out!(
            "{}",
            progress::summary_fetched(&result.record, result.in_source.as_deref())
        );
    }
    Ok(match result.record.status {
        _ if result.bad_input => exit::BAD_INPUT,
        JobStatus::Done => exit::DONE,
        JobStatus::Failed | JobStatus::Queued | JobStatus::Running | JobStatus::Bounced => {
            exit::FAILED
        }
        JobStatus::Held => exit::HELD,
        JobStatus::TimedOut => exit::TIMED_OUT,
        JobStatus::Cancelled => exit::CANCELLED,
    })
}

/// Shows a started job's updates until it ends, and the start's reaper
/// pass's lines (`pass_lines`) above them as they come; its end, and
/// `remover` (started once the job's engine is launched).
async fn follow(
    mut job: paddock::runner::JobHandle,
    view: &mut progress::Progress,
    mut remover: Remover,
    pass_lines: &mut Option<tokio::sync::mpsc::UnboundedReceiver<String>>,
) -> (Result<paddock::runner::RunResult, RunError>, Remover) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        let mut pass_done = false;
        let next_line = async {
            match pass_lines.as_mut() {
                Some(lines) => lines.recv().await,
                None => std::future::pending().await,
            }
        };
        let update = tokio::select! {
            line = next_line => {
                match line {
                    Some(line) => view.notice(line),
                    None => pass_done = true,
                }
                None
            }
            update = job.events.recv() => Some(update),
        };
        if pass_done {
            *pass_lines = None;
        }
        match update {
            None => {}
            Some(Ok(update)) => {
                if remover.waiting.is_none() && update.is_launching() {
                    remover.start();
                }
                // The engine's own session resumed (its files in the job's
                // home), or a new one and why; and a prior pull request
                // closed without a merge: said under `-q` too, where no
                // progress line says it.
                if let Some(detail) = update.session_continuation() {
                    view.notice_unless_shown(format!(
                        "paddock: {}",
                        paddock::terminal_text::line(detail)
                    ));
                }
                update.deliver(view)
            }
            // A view too slow for the job misses updates; the store has them.
            Some(Err(RecvError::Lagged(_))) => {}
            Some(Err(RecvError::Closed)) => break,
        }
    }
    (job.finished().await, remover)
}

/// The detached remover `paddock run` leaves the trash, the store's
/// checkpoint and the caches' cap to (`workspace::trash`).
struct Remover {
    exe: PathBuf,
    jobs: PathBuf,
    cap: Option<u64>,
    db: Option<PathBuf>,
    /// Started ahead, waiting to be released (`trash::start_waiting`).
    waiting:
        Option<tokio::task::JoinHandle<std::io::Result<paddock::workspace::trash::WaitingRemover>>>,
}

impl Remover {
    /// Starts it now, waiting, off the runtime's threads (a store to
    /// checkpoint or a cap to hold: there is always work for it then);
    /// otherwise it is started at the end, if the trash holds anything.
    fn start(&mut self) {
        if self.db.is_none() && self.cap.is_none() {
            return;
        }
        let (exe, jobs, cap, db) = (
            self.exe.clone(),
            self.jobs.clone(),
            self.cap,
            self.db.clone(),
        );
        self.waiting = Some(tokio::task::spawn_blocking(move || {
            paddock::workspace::trash::start_waiting(&exe, &jobs, cap, db.as_deref())
        }));
    }

    /// Lets the remover started ahead go once this process has exited, or
    /// starts one now (none was, or it could not be).
    async fn release(self) {
        let started = match self.waiting {
            Some(waiting) => waiting
                .await
                .unwrap_or_else(|e| Err(std::io::Error::other(e))),
            None => Err(std::io::Error::other("not started")),
        };
        let Err(_) = started.map(paddock::workspace::trash::WaitingRemover::release_at_exit) else {
            return;
        };
        if let Err(e) = paddock::workspace::trash::empty_detached(
            &self.exe,
            &self.jobs,
            self.cap,
            self.db.as_deref(),
        ) {
            errln!(
                "paddock: cannot start deleting the job's directory in {}: {e} (the next run's reaper deletes it)",
                self.jobs.join(paddock::workspace::trash::TRASH).display()
            );
        }
    }
}

/// The delegated cgroup the sandbox rung makes its jobs' cgroups under
/// (`PADDOCK_CGROUP_ROOT`, when set and not empty).
pub fn cgroup_root() -> Option<PathBuf> {
    std::env::var_os("PADDOCK_CGROUP_ROOT")
        .filter(|r| !r.is_empty())
        .map(PathBuf::from)
}

/// The host directory: `--host-dir`, else `host/` beside the jobs
/// directory.
pub fn host_dir_of(paths: &Paths, host_dir: Option<&Path>) -> PathBuf {
    host_dir.map_or_else(
        || paths.jobs.parent().unwrap_or(&paths.jobs).join("host"),
        Path::to_path_buf,
    )
}

/// The config file's `[jobs]` as the runner takes it; a path it names
/// that does not exist on this host is bad input, named.
pub fn job_tools(jobs: &paddock::config::JobsFile) -> Result<paddock::runner::JobTools, Failure> {
    if let Some(missing) = jobs.missing() {
        let file = config_location()
            .map(|p| format!(" {}", p.display()))
            .unwrap_or_default();
        return Err(Failure::BadInput(anyhow::anyhow!(
            "config file{file}: {missing} does not exist on this host (docs/cli.md#the-hosts-tools-jobs)"
        )));
    }
    Ok(paddock::runner::JobTools {
        path: jobs.path.iter().map(|d| d.0.clone()).collect(),
        read_only: jobs.read_only.iter().map(|d| d.0.clone()).collect(),
        env: jobs.env_pairs(),
    })
}

/// What a [`Runner`] of this process runs with (`run` and `serve`).
pub fn runner_config(
    paths: &Paths,
    host_dir: Option<PathBuf>,
    prices: PriceTable,
    liveness: Liveness,
) -> Result<RunnerConfig, Failure> {
    Ok(RunnerConfig {
        paths: paths.clone(),
        prices: Arc::new(prices),
        host_path: std::env::var_os("PATH"),
        cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        host_dir: host_dir_of(paths, host_dir.as_deref()),
        helper_exe: std::env::current_exe().context("locate the paddock binary")?,
        cgroup_root: cgroup_root(),
        liveness,
        host_profile: None,
        disk_reserve: paddock::runner::disk_reserve_from(
            std::env::var_os(paddock::runner::DISK_RESERVE_ENV).as_deref(),
        ),
        tools: Default::default(),
        host_secrets: Vec::new(),
        source_within: None,
    })
}

/// This jobs directory's identity (its `.host-id`, made on first use) and
/// the heartbeat timing of the config's `[hosts]` (`run`, `serve`, `gc`).
pub fn liveness(paths: &Paths, hosts: &paddock::config::HostsFile) -> Result<Liveness, Failure> {
    let (interval, ttl) = hosts
        .timing()
        .map_err(|e| Failure::BadInput(anyhow::anyhow!(e)))?;
    let owner = paddock::host_id::owner(&paths.jobs)
        .context("this jobs directory's host id")
        .map_err(Failure::Internal)?;
    Ok(Liveness {
        owner,
        interval,
        ttl,
        requeues: hosts
            .requeue_reclaimed
            .unwrap_or(paddock::config::DEFAULT_REQUEUE_RECLAIMED),
        cancel_poll: hosts.cancel_poll_secs.filter(|s| *s > 0).map_or(
            paddock::heartbeat::CANCEL_POLL,
            std::time::Duration::from_secs,
        ),
    })
}

/// A runner error as the CLI's failure, by its code.
fn failure(code: ErrorCode, e: anyhow::Error) -> Failure {
    match code {
        ErrorCode::BadInput => Failure::BadInput(e),
        ErrorCode::StoreLost | ErrorCode::Internal => Failure::Internal(e),
    }
}

/// The user's config file's path (whether or not it exists).
pub fn config_location() -> Option<PathBuf> {
    paddock::config::location(
        std::env::var_os("XDG_CONFIG_HOME").as_deref(),
        std::env::var_os("HOME").as_deref(),
    )
}

/// The config file's key that gives `spec` its host profile, and the
/// file (`Config::profile_key`): what an admission error about that
/// profile names (`AdmitError::in_config_file`).
pub fn profile_from_config(
    config: &paddock::config::Config,
    spec: &JobSpec,
) -> Option<(&'static str, PathBuf)> {
    let key = config.profile_key(spec)?;
    Some((
        key,
        config_location().unwrap_or_else(|| PathBuf::from("config.toml")),
    ))
}

/// The user's config file (`paddock::config`), the parts a command reads
/// (`reads`) and the others at their defaults; a part of them that does
/// not read is bad input, a mistake in another part is no concern of the
/// command's (`paddock doctor` reports it).
pub fn user_config(reads: &[Section]) -> Result<paddock::config::Config, Failure> {
    match config_location() {
        Some(path) => {
            paddock::config::load_only(&path, reads).map_err(|e| Failure::BadInput(e.into()))
        }
        None => Ok(paddock::config::Config::default()),
    }
}

/// The price table in effect: the shipped one with `flag` (`--prices`,
/// `PADDOCK_PRICES`) merged over it, else the config file's `prices`
/// (`config`). A table of the config file's that does not load is named
/// by that setting and the file (`prices in the config file PATH: price
/// table …`), where its error named the table alone and the user looked
/// for what had chosen it.
pub fn price_table(flag: Option<&Path>, config: Option<&Path>) -> anyhow::Result<PriceTable> {
    match (flag, config) {
        (None, Some(table)) => PriceTable::effective(Some(table)).with_context(|| {
            let file = config_location().unwrap_or_else(|| PathBuf::from("config.toml"));
            format!("prices in the config file {}", file.display())
        }),
        (flag, _) => Ok(PriceTable::effective(flag)?),
    }
}

/// A host profile from the store (not a file) whose `network.credentials`
/// name `env:` variables set in this process's environment: those leave
/// it by this process executing itself again without them, their values
/// handed over (`paddock::env_handover`), before anything of the job is
/// done; the new image finds none left and goes on. Its threads exist by
/// now, so `remove_var` would be unsound. The store, when it was opened
/// (and nothing was withdrawn), for the caller to use.
async fn withdraw_stored_credentials(
    spec: &JobSpec,
    paths: &Paths,
) -> Result<Option<paddock::store::SharedStore>, Failure> {
    let Some(name) = spec
        .policy
        .profile
        .as_deref()
        .filter(|p| !paddock_protocol::PolicySpec::profile_is_file(p))
    else {
        return Ok(None);
    };
    let store = open_store(paths).await?;
    // A profile the store does not hold is a preset, or unknown (which
    // admission reports); a store error is admission's to report too.
    let Ok(Some(profile)) = store.profile(name).await else {
        return Ok(Some(store));
    };
    let names = paddock::env_handover::present(
        profile
            .network
            .iter()
            .flat_map(|n| &n.credentials)
            .filter_map(|c| match &c.secret {
                paddock_protocol::KeyRef::Env(v) => Some(v.clone()),
                paddock_protocol::KeyRef::File(_) => None,
            }),
    );
    if names.is_empty() {
        return Ok(Some(store));
    }
    drop(store);
    let stdin = STDIN_SPEC.get().map(String::as_str);
    let e = paddock::env_handover::reexec_without(&names, stdin);
    Err(Failure::Internal(anyhow::Error::new(e).context(format!(
        "withdraw the credentials of host profile {name} ({}) from paddock's environment",
        names.join(", ")
    ))))
}

/// Resolves on the first SIGINT, SIGTERM or SIGHUP; the handlers are
/// installed before this returns.
pub(super) fn cancel_signals() -> std::io::Result<impl std::future::Future<Output = ()>> {
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

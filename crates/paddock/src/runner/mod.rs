//! The job lifecycle, as phases each in its own module, passing typed
//! values: [`admit`] (everything checked before the job exists: an
//! [`Admitted`] job with its id), [`provision`] (the lease, the job's
//! record, a host slot, the engine binary, the workspace: a `Provisioned`
//! job), [`assemble`] (the context), [`launch`] (the job's broker, its
//! egress proxy ([`network`]) and the engine on its rung; an `auto` job
//! whose sandbox could not be set up moves rungs, [`rung_fallback`]),
//! [`stream`] (stdout into stored events while the
//! ledger rows arrive; timeout and cancellation), [`teardown`] (nothing
//! left running, calls in flight waited for) and [`conclude`] (the
//! outcome, the patch artifact, the final record); [`resume`] carries the
//! engine's session from one attempt to the next. A [`Runner`] is built
//! once per process (a CLI run, a server) and starts each job as a task:
//! its [`JobHandle`] carries the job's id, its live updates and its end.
//! Every step's failure is recorded as an `error` event on the job.

pub mod admit;
mod assemble;
mod calls;
mod clock;
mod conclude;
mod disk_watch;
mod early_patch;
mod emit;
mod engine_bin;
mod error;
mod host_needs;
mod launch;
mod network;
mod next_attempt;
mod provision;
mod resume;
mod rung_fallback;
mod sandbox_view;
mod setup;
mod setup_cache;
mod source_here;
mod stream;
mod teardown;
#[cfg(test)]
pub(crate) mod tests;
mod unlinked;
mod user_home;
pub mod warnings;

use std::ffi::OsString;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use paddock_protocol::{JobRecord, JobSpec, JobStatus};
use tokio::sync::broadcast;

pub use self::admit::{Admitted, Shaped};
use self::emit::Emitter;
pub use self::emit::{JobUpdate, Observer};
pub use self::engine_bin::{engine_path, resolve_engine, Unresolved};
pub use self::error::{AdmitError, ErrorCode, NotHere, RunError};
pub use self::next_attempt::AfterError;
pub use self::sandbox_view::{check_engine as engine_view, ViewHost};
pub use self::source_here::SourceMissing;
pub use crate::broker::provider::BEDROCK_API_KEY_VAR;
use crate::broker::PriceTable;
use crate::error_chain::chain;
pub use crate::error_chain::chain as error_chain;
use crate::paths::Paths;
use crate::policy::JobPolicy;
use crate::reaper::Lease;
use crate::redact::Redactor;
use crate::rung::{Rung, Rungs};
use crate::store::{SharedStore, StoreError};

/// Free space below which a store failure is reported as a full disk.
const FULL_BELOW: u64 = 1 << 20;
/// How many updates a slow follower may fall behind before it misses some
/// (the store has them all).
const UPDATES: usize = 4096;

/// What a [`Runner`] needs of its host, given once: nothing is looked up
/// from the process inside the library.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    pub paths: Paths,
    pub prices: Arc<PriceTable>,
    /// The host PATH used to look up engines and `node`.
    pub host_path: Option<OsString>,
    /// The directory relative PATH entries are looked up against.
    pub cwd: PathBuf,
    /// This host's shared state (the `max_concurrent_jobs` slots), common to
    /// every `paddock` process on the host.
    pub host_dir: PathBuf,
    /// The `paddock` executable: re-executed as the sandbox helper and the
    /// `process` rung's supervisor, and called back by engine hooks.
    pub helper_exe: PathBuf,
    /// The delegated cgroup the sandbox rung makes its jobs' cgroups under
    /// (`PADDOCK_CGROUP_ROOT`); None: `/sys/fs/cgroup`.
    pub cgroup_root: Option<PathBuf>,
    /// Who owns the jobs this runner starts (the jobs directory's id) and
    /// how often their heartbeats are renewed (`crate::heartbeat`).
    pub liveness: crate::heartbeat::Liveness,
    /// The profile every job this runner admits must run under (the config
    /// file's `host_profile`); `None`: a spec names its own, or none.
    pub host_profile: Option<String>,
    /// Free space the jobs file system keeps: a running job is stopped
    /// below it (`PADDOCK_DISK_RESERVE_MB`, [`DEFAULT_DISK_RESERVE`]).
    pub disk_reserve: u64,
    /// The host's tools every job gets (the config file's `[jobs]`).
    pub tools: JobTools,
    /// Files of the host's own secrets that no sandboxed job's read-only
    /// path may show (`sandbox_view::private_places`), each with the
    /// setting that names it: a server's `allow_refs` and `webhook_secret`
    /// `file:` references (docs/sandbox.md).
    pub host_secrets: Vec<(String, PathBuf)>,
    /// The directories the look at a spec's local source may go into
    /// before its job exists (`source_here.rs`): a server's
    /// `allow_paths`, so a submitter learns nothing of the host outside
    /// what it may name; `None`: anywhere (`paddock run`, the user's own
    /// files).
    pub source_within: Option<Vec<PathBuf>>,
}

/// The host's tools installed outside the system directories that every
/// job gets (the config file's `[jobs]`, `config::JobsFile`): directories
/// on its PATH before the system ones (bound read-only into its sandbox,
/// as the engine's PATH directories are), more paths bound read-only
/// into its sandbox, and variables in its environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobTools {
    pub path: Vec<PathBuf>,
    pub read_only: Vec<PathBuf>,
    pub env: Vec<(String, String)>,
}

pub use self::disk_watch::{
    reserve_from as disk_reserve_from, DEFAULT_RESERVE_BYTES as DEFAULT_DISK_RESERVE,
    RESERVE_ENV as DISK_RESERVE_ENV,
};

/// Runs jobs: built once, with the store every job is recorded in.
#[derive(Debug, Clone)]
pub struct Runner {
    store: SharedStore,
    config: Arc<RunnerConfig>,
    rungs: Rungs,
    /// Whether the runner deletes the trash after each job itself (a
    /// background thread); `paddock run`, which exits next, leaves it
    /// to a detached remover instead (`workspace/trash.rs`).
    empties_trash: bool,
    /// The caches' size cap the runner enforces after each job, with the
    /// trash (`crate::cache_cap`); none: not held.
    cache_cap: Option<u64>,
}

/// A started job.
#[derive(Debug)]
pub struct JobHandle {
    pub id: String,
    /// The job's updates from its first event on.
    pub events: broadcast::Receiver<JobUpdate>,
    /// The job's end.
    pub join: tokio::task::JoinHandle<Result<RunResult, RunError>>,
}

impl JobHandle {
    /// Waits for the job's end (a job whose task panicked is an error
    /// naming it).
    pub async fn finished(self) -> Result<RunResult, RunError> {
        let id = self.id;
        match self.join.await {
            Ok(result) => result,
            Err(e) => Err(RunError::JoinJob {
                job_id: id,
                message: e.to_string(),
            }),
        }
    }
}

/// The end of a run.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub record: JobRecord,
    /// The job failed because of its input (repository, engine binary).
    pub bad_input: bool,
    /// The workspace, when it was kept (`--keep`).
    pub kept_workspace: Option<PathBuf>,
    /// The local source repository the job's branch was fetched into;
    /// `None` when it was not (no change, a fetch that failed, a URL
    /// source).
    pub in_source: Option<PathBuf>,
}

impl Runner {
    /// A runner on this host's rungs.
    pub fn new(store: SharedStore, config: RunnerConfig) -> Runner {
        let rungs = Rungs::host(&config.helper_exe, config.cgroup_root.as_deref());
        Runner::with_rungs(store, config, rungs)
    }

    /// A runner on `rungs` (a test's fake rung, a container rung).
    pub fn with_rungs(store: SharedStore, config: RunnerConfig, rungs: Rungs) -> Runner {
        Runner {
            store,
            config: Arc::new(config),
            rungs,
            empties_trash: true,
            cache_cap: None,
        }
    }

    /// A runner that holds the caches to `max_bytes` after each job it
    /// empties the trash for (`crate::cache_cap`).
    pub fn capping_caches(self, max_bytes: Option<u64>) -> Runner {
        Runner {
            cache_cap: max_bytes,
            ..self
        }
    }

    /// A runner that leaves the job directories it moved into the trash
    /// for the caller to delete (a process about to exit: a thread of its
    /// own would die with it half done).
    pub fn leaving_trash(self) -> Runner {
        Runner {
            empties_trash: false,
            ..self
        }
    }

    pub fn config(&self) -> &RunnerConfig {
        &self.config
    }

    /// Why this host cannot run jobs on the `sandbox` rung (`None`: it
    /// can): the probe admission uses, run once.
    pub async fn sandbox_problem(&self) -> Option<String> {
        self.rungs.sandbox.probe().await
    }

    /// Admits `spec`: everything checked before the job exists that
    /// does not depend on which host runs it (the engine's binary and the
    /// sandbox's view do: [`Runner::engine_here`], [`Runner::view_here`]).
    /// Every admission passes here (`paddock run`, its next attempt, a
    /// server's submission, turn and claim): its local source is looked
    /// at first (`source_here.rs`: surely no repository here, refused
    /// with nothing of the job made), before a token is fetched or the
    /// sandbox probed.
    pub async fn admit(&self, spec: &JobSpec) -> Result<Admitted, AdmitError> {
        self.admit_made(spec, None).await
    }

    /// [`Runner::admit`] of a spec whose source is `made`, a repository
    /// this host makes for the job after its admission (a turn's inline
    /// files): that source alone is not looked at, being not there yet;
    /// a spec whose source is another is, as every admission's.
    pub async fn admit_made_source(
        &self,
        spec: &JobSpec,
        made: &Path,
    ) -> Result<Admitted, AdmitError> {
        self.admit_made(spec, Some(made)).await
    }

    async fn admit_made(
        &self,
        spec: &JobSpec,
        made: Option<&Path>,
    ) -> Result<Admitted, AdmitError> {
        admit::host_profile(spec, self.config.host_profile.as_deref())?;
        let own = spec
            .local_source()
            .is_some_and(|s| made.is_some_and(|m| m == s.path));
        if !own {
            self.source_missing(spec).map_err(AdmitError::Source)?;
        }
        admit::admit(spec, &self.config.prices, &*self.store, &self.rungs).await
    }

    /// Why `spec`'s local source is surely no repository on this host
    /// (`source_here.rs`), looked at only where this runner may look.
    fn source_missing(&self, spec: &JobSpec) -> Result<(), source_here::SourceMissing> {
        source_here::check(spec, self.config.source_within.as_deref())
    }

    /// Refuses what is wrong with `spec` wherever it runs, reading nothing
    /// of this host's (`admit::spec_own`: a provider needing a key named
    /// with none, a model the price table cannot meter, a model outside
    /// the spec's own allowlist). A server's submission asks it before it
    /// looks at what the spec names on its host, which is the claiming
    /// server's to judge ([`Runner::has_here`], [`NotHere::of_admission`]).
    pub fn spec_own(&self, spec: &JobSpec) -> Result<(), AdmitError> {
        admit::spec_own(spec, &self.config.prices)
    }

    /// Refuses `admitted`, a job on the `sandbox` rung, when its sandbox
    /// on this host would refuse one of its paths (`sandbox_view.rs`: the
    /// engine's directories, the jobs directory, the hook's). For the
    /// callers whose job runs on the host that admits it (`paddock run`, a
    /// server's turn), after [`Runner::admit`], as [`Runner::engine_here`];
    /// not a server's submission, whose job any server of a fleet may claim
    /// and run: the claiming server asks [`Runner::runs_here`].
    pub fn view_here(&self, admitted: &Admitted) -> Result<(), AdmitError> {
        if admitted.spec().isolation != paddock_protocol::Isolation::Sandbox {
            return Ok(());
        }
        let policy = admitted.shaped.policy.as_ref();
        sandbox_view::check(admitted.spec(), &admitted.id, policy, &self.config)
            .map_err(AdmitError::SandboxView)
    }

    /// Refuses `spec` when this host lacks what it names beyond its
    /// engine, its sandbox and its source (`host_needs.rs`: a file or
    /// directory not here, a secret that does not resolve here, the
    /// scripted upstream not built in), though another host may have it.
    /// A server asks it of a queued job it claimed before admitting it
    /// again (whose admission looks at the source), and passes a job it
    /// refuses over to the fleet's other servers (`server::queue`);
    /// `paddock run` and a turn, which run where they are admitted, are
    /// refused by their admission.
    pub fn has_here(&self, spec: &JobSpec) -> Result<(), NotHere> {
        host_needs::check(spec)
    }

    /// Refuses `admitted` when this host cannot run it though another
    /// host might: what it names is not here ([`Runner::has_here`]), its
    /// engine's binary is not found here ([`Runner::engine_here`]'s
    /// rules), or on the `sandbox` rung its sandbox here would refuse one
    /// of its paths ([`Runner::view_here`]'s). A server asks it of a
    /// queued job it claimed, whoever admitted it, before anything of the
    /// job starts, and passes a job it refuses over to the fleet's other
    /// servers (`server::queue`).
    pub fn runs_here(&self, admitted: &Admitted) -> Result<(), NotHere> {
        self.has_here(admitted.spec())?;
        // Its source again: a job admitted here at its submission is
        // claimed later, and one admitted by another server here first.
        self.source_missing(admitted.spec())
            .map_err(NotHere::Source)?;
        resolve_engine(
            admitted.spec(),
            self.config.host_path.as_deref(),
            &self.config.cwd,
        )
        .map_err(|e| NotHere::Engine(Box::new(e)))?;
        if admitted.spec().isolation != paddock_protocol::Isolation::Sandbox {
            return Ok(());
        }
        let policy = admitted.shaped.policy.as_ref();
        sandbox_view::check(admitted.spec(), &admitted.id, policy, &self.config)
            .map_err(NotHere::SandboxView)
    }

    /// Refuses `spec` when its engine's binary cannot be resolved on this
    /// host (`engine.binary` naming no executable, or the engine not on
    /// PATH), with the rules provisioning resolves it by. For the callers
    /// whose job runs on the host that admits it (`paddock run`, a
    /// server's turn), before [`Runner::admit`]; not a server's
    /// submission, whose job any server of a fleet may claim and run: the
    /// claiming server asks [`Runner::runs_here`].
    pub fn engine_here(&self, spec: &JobSpec) -> Result<(), AdmitError> {
        resolve_engine(spec, self.config.host_path.as_deref(), &self.config.cwd)
            .map(drop)
            .map_err(|e| AdmitError::EngineNotFound(Box::new(e)))
    }

    /// Starts an admitted job as a task; `cancel` resolving cancels it.
    pub fn start(
        &self,
        admitted: Admitted,
        cancel: impl Future<Output = ()> + Send + 'static,
    ) -> JobHandle {
        self.spawn(admitted, (Recorded::No, None), cancel)
    }

    /// Starts an admitted job whose record a queue already holds and has
    /// claimed (`running`, see `Store::claim_job`, or a turn's record),
    /// on its `lease`, which the queue took before the record was
    /// `running` here or right after its claim (so that no reaper takes
    /// a starting job for a dead one): its record is brought up to date
    /// instead of inserted.
    pub fn start_claimed(
        &self,
        admitted: Admitted,
        lease: Lease,
        cancel: impl Future<Output = ()> + Send + 'static,
    ) -> JobHandle {
        self.spawn(admitted, (Recorded::Claimed, Some(lease)), cancel)
    }

    fn spawn(
        &self,
        admitted: Admitted,
        (recorded, lease): (Recorded, Option<Lease>),
        cancel: impl Future<Output = ()> + Send + 'static,
    ) -> JobHandle {
        let (updates, events) = broadcast::channel(UPDATES);
        let id = admitted.id.clone();
        let join = tokio::spawn(run_job(
            self.store.clone(),
            self.config.clone(),
            (
                admitted,
                (recorded, lease),
                (self.empties_trash, self.cache_cap),
            ),
            updates,
            cancel,
        ));
        JobHandle { id, events, join }
    }

    /// The budget gate before a job runs: why `admitted` is held (its
    /// ticket's, project's or own ceiling already spent), or `None`.
    pub async fn budget_hold(&self, admitted: &Admitted) -> Result<Option<String>, StoreError> {
        self.budget_hold_spec(admitted.spec(), &admitted.id).await
    }

    /// [`Runner::budget_hold`] of a job `id` not admitted here, by its
    /// `spec` as submitted (a server's submission this host cannot run,
    /// queued for a server that can).
    pub async fn budget_hold_spec(
        &self,
        spec: &JobSpec,
        id: &str,
    ) -> Result<Option<String>, StoreError> {
        launch::budget_gate(spec, id, &self.store)
            .await
            .map(|(_, held)| held)
    }
}

impl Admitted {
    /// The job's record before it runs, with `status` (`queued`, or
    /// `held`): what a queue stores at submission.
    pub fn record(&self, status: JobStatus) -> JobRecord {
        let mut record = JobRecord::new(&self.id, &self.shaped.spec, self.submitted);
        record.status = status;
        record
    }

    /// The spec as submitted, as the store keeps it.
    pub fn spec_json(&self) -> &str {
        &self.spec_json
    }
}

/// Whether the job's record exists before it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Recorded {
    /// It does not: the job inserts it.
    No,
    /// A queue holds it, claimed (`running`): the job updates it.
    Claimed,
}

/// One job as its phases see it.
pub(super) struct Job {
    /// The spec as the job runs it (rung resolved, timeout capped).
    pub spec: JobSpec,
    pub policy: Option<JobPolicy>,
    pub rung: Arc<dyn Rung>,
    /// Where an `auto` job moves when its sandbox cannot be set up at its
    /// first launch (`rung_fallback.rs`); none once moved, and for any
    /// other job.
    pub fallback_rung: Option<Arc<dyn Rung>>,
    pub config: Arc<RunnerConfig>,
    pub keep: bool,
    /// Where the spec came from (`Admitted::spec_file`).
    pub spec_file: Option<std::path::PathBuf>,
    pub record: JobRecord,
    pub started: Instant,
    /// The prior attempt it follows (`--attempt-after`): resumed or forked.
    pub continuation: Option<crate::session::Continuation>,
}

/// A job ended before its engine ran.
pub(super) struct Ended {
    pub status: JobStatus,
    pub reason: Option<String>,
    pub bad_input: bool,
}

impl Ended {
    fn failed(reason: String, bad_input: bool) -> Ended {
        Ended {
            status: JobStatus::Failed,
            reason: Some(reason),
            bad_input,
        }
    }
}

/// Why a phase stops the job: it ended, or the store failed under it.
pub(super) enum Stop {
    End(Ended),
    Store(StoreError),
}

impl From<StoreError> for Stop {
    fn from(e: StoreError) -> Self {
        Stop::Store(e)
    }
}

/// Why the engine's part of a job failed: a step, or the store.
pub(super) enum LaunchFailure {
    Store(StoreError),
    Step(String),
    /// The rung could not set up the job's first command (a setup
    /// command or the engine): nothing of the job ran
    /// (`RungError::SandboxSetup`). An `auto` job may move to the
    /// `process` rung (`rung_fallback.rs`); otherwise a step's failure.
    Unstarted(String),
}

impl From<StoreError> for LaunchFailure {
    fn from(e: StoreError) -> Self {
        LaunchFailure::Store(e)
    }
}

/// Runs one job to its end, holding its lease (`leased`: the one its
/// queue took; none: taken here): only a job whose record is final gives
/// it up; any other end (the store lost, a panic, the task dropped) leaves
/// it for the reaper.
#[allow(clippy::type_complexity)]
async fn run_job(
    store: SharedStore,
    config: Arc<RunnerConfig>,
    (admitted, (recorded, leased), (empties_trash, cache_cap)): (
        Admitted,
        (Recorded, Option<Lease>),
        (bool, Option<u64>),
    ),
    updates: broadcast::Sender<JobUpdate>,
    cancel: impl Future<Output = ()>,
) -> Result<RunResult, RunError> {
    let job_id = admitted.id.clone();
    // The job's lease before its record: a crash from here on (also while
    // waiting for a host slot) is found by the next start's reaper.
    let lease = match leased {
        Some(lease) => lease,
        None => Lease::take(&config.paths.jobs, &job_id).map_err(|error| RunError::TakeLease {
            job_id: job_id.clone(),
            dir: config.paths.jobs.join(".leases"),
            error,
        })?,
    };
    let held = lease.clone();
    let db = config.paths.db.clone();
    let jobs = config.paths.jobs.clone();
    let artifacts = config.paths.artifacts.join(&job_id);
    let found = crate::heartbeat::Found::default();
    let lost = found.lost.clone();
    let result = drive(
        store,
        config,
        (admitted, recorded),
        updates,
        (lease, found),
        cancel,
    )
    .await;
    // The job's directory, moved into the trash by its teardown, deleted
    // off the job's path (a remover already at it is waited for); then
    // the caches held to their cap.
    if empties_trash && (cache_cap.is_some() || crate::workspace::trash::has_entries(&jobs)) {
        tokio::task::spawn_blocking(move || {
            for e in crate::workspace::trash::empty(&jobs, true) {
                tracing::warn!("trash: {e}");
            }
            if let Some(cap) = cache_cap {
                for e in crate::cache_cap::enforce(&jobs, cap).errors {
                    tracing::warn!("caches: {e}");
                }
            }
        });
    }
    // Reclaimed by another host's reaper: the record is final (that
    // reaper's), the job stopped; whatever its own end wrote is refused.
    // A job whose own final record was written was not reclaimed (the
    // record is a compare-and-set from `running`, which a reclaim ends): a
    // renewal refused after it (the job no longer `running`) only found
    // the job ended, by itself.
    if lost.is_set() && result.is_err() {
        tracing::warn!(
            "job {job_id}: no longer this host's in the store (another host's reaper reclaimed \
             it): stopped"
        );
        if let Err(e) = held.release() {
            tracing::warn!("job {job_id}: cannot delete its lease file: {e}");
        }
        return Err(RunError::Reclaimed { job_id });
    }
    let result = result.map_err(|lost| RunError::WriteStore {
        job_id: job_id.clone(),
        message: format!(
            "{lost}{}",
            db.file().map(full_disk_note).unwrap_or_default()
        ),
        db: db.to_string(),
    });
    // A minted token whose revocation failed or was cut short (a cancel's
    // 10 s) keeps its record in the artifacts: the lease file then stays
    // too, so the reaper's next pass visits the ended job and revokes it.
    if result.is_ok() && !crate::results::tokens_left(&artifacts) {
        if let Err(e) = held.release() {
            tracing::warn!("job {job_id}: cannot delete its lease file: {e}");
        }
    }
    result
}

/// The phases in order; the error is the store's, lost under the job.
async fn drive(
    store: SharedStore,
    config: Arc<RunnerConfig>,
    (admitted, recorded): (Admitted, Recorded),
    updates: broadcast::Sender<JobUpdate>,
    (lease, found): (Lease, crate::heartbeat::Found),
    cancel: impl Future<Output = ()>,
) -> Result<RunResult, String> {
    let Admitted {
        id,
        submitted,
        keep,
        spec_file,
        shaped,
        spec_json,
        key,
        provider,
        scenario,
        continuation,
    } = admitted;
    let Shaped {
        spec,
        prepared,
        rung,
        fallback,
        policy,
        fallback_rung,
    } = shaped;
    let record = JobRecord::new(&id, &spec, submitted);
    let liveness = &config.liveness;
    let claimed = matches!(recorded, Recorded::Claimed);
    match recorded {
        Recorded::No => {
            let now = time::OffsetDateTime::now_utc();
            store
                .insert_owned_job(&record, &spec_json, &liveness.owner, now)
                .await
        }
        // The claim set it `running` and this host its owner; the rest as
        // this admission shaped it.
        Recorded::Claimed => store.finish_job(&record, JobStatus::Running).await,
    }
    .map_err(|e| chain(&e))?;
    // A claimed job may have been asked to stop through the store between
    // the claim and now (by another server, answered 202 `requested`):
    // stopped before it provisions or starts anything.
    if claimed {
        match store.cancel_requested(&id).await {
            Ok(Some(_)) => found.cancel.mark(),
            Ok(None) => {}
            Err(e) => tracing::warn!("job {id}: cannot read whether a cancel was asked: {e}"),
        }
    }
    // Renewed until the job ends; a renewal that finds the job taken by
    // another host, or a cancel asked through the store by another
    // process, stops it as a cancel does.
    let _heartbeat = crate::heartbeat::start(
        store.clone(),
        id.clone(),
        liveness.owner.host.clone(),
        (liveness.interval, liveness.cancel_poll),
        found.clone(),
    );
    let cancel = async move {
        tokio::select! {
            () = cancel => {}
            () = found.lost.wait() => {}
            () = found.cancel.wait() => {}
        }
    };
    // Fused: a cancel spent on the engine (the job `cancelled`) is not
    // seen again by its publishing; one that comes later cuts that short.
    let cancel = futures::FutureExt::fuse(cancel);
    tokio::pin!(cancel);
    let mut redactor = Redactor::new();
    if let Some(key) = &key {
        redactor.add_secret(key);
    }
    let max_event = usize::try_from(spec.limits.max_event_bytes).unwrap_or(usize::MAX);
    let records = crate::record_limit::RecordLimit::new(spec.limits.max_records);
    let mut em = Emitter::new(id, store, updates, redactor, max_event, records);
    let job = Job {
        spec,
        policy,
        rung,
        fallback_rung,
        config,
        keep,
        spec_file,
        record,
        started: Instant::now(),
        continuation,
    };
    let creds = launch::Credentials { provider, scenario };
    let result = phases(
        job,
        &mut em,
        lease,
        (&prepared, fallback),
        creds,
        &mut cancel,
    )
    .await;
    let result = match result {
        Ok(r) => r,
        Err(e) => return Err(chain(&e)),
    };
    // Events were lost: the record is not whole, the reaper finishes it.
    match em.lost.take() {
        Some(lost) => Err(lost),
        None => Ok(result),
    }
}

/// Provision, assemble, launch, stream, tear down, conclude.
async fn phases(
    mut job: Job,
    em: &mut Emitter,
    lease: Lease,
    (prepared, fallback): (&crate::context::Prepared, Option<String>),
    creds: launch::Credentials,
    cancel: &mut (impl Future<Output = ()> + Unpin),
) -> Result<RunResult, StoreError> {
    // Whatever the rung needs the host ready for at its launch, readied
    // beside the provisioning.
    let warm = job.rung.warm_up();
    let provisioned = match provision::begin(&job, em, fallback).await {
        Ok(()) => provision::provision(&job, em, lease, cancel).await,
        Err(stop) => Err(stop),
    };
    let mut prov = match provisioned {
        Ok(p) => p,
        Err(stop) => return ended_early(job, em, stop).await,
    };
    // Whatever the job writes from here on is held to its disk limit.
    let disk = disk_watch::DiskWatch::start(
        prov.ws().root.clone(),
        job.spec.limits.max_disk_bytes,
        job.config.disk_reserve,
        job.config.helper_exe.clone(),
    );
    let assembled = match assemble::assemble(&job, em, &mut prov, prepared).await {
        Ok(a) => a,
        Err(stop) => return ended_early(job, em, stop).await,
    };
    disk.ready().await;
    let launched = {
        // Past either limit (its disk, its records) the job is stopped as
        // a cancel stops it.
        let tripped = disk.tripped();
        let too_many = em.records.tripped();
        let mut stopped = Box::pin(async {
            tokio::select! {
                () = &mut *cancel => {}
                () = tripped => {}
                () = too_many => {}
            }
        });
        let mut warm = warm;
        loop {
            let launched = engine(
                &job,
                em,
                (&prov, &disk),
                assembled.clone(),
                (creds.clone(), warm.take()),
                &mut stopped,
            )
            .await;
            // Nothing of the job ran: an `auto` job may move rungs.
            let Err(LaunchFailure::Unstarted(why)) = launched else {
                break launched;
            };
            match rung_fallback::fall_back(&mut job, em, &prov, why).await {
                Ok(rung_fallback::Moved::Yes) => {}
                Ok(rung_fallback::Moved::No(why)) => break Err(LaunchFailure::Step(why)),
                Err(e) => break Err(e),
            }
        }
    };
    let past = match disk.finish().await {
        Some(why) => Some(why),
        None => em.records.why(),
    };
    let launched = match (launched, past) {
        (Ok(mut launched), Some(why)) => {
            em.emit(paddock_protocol::EventBody::Policy {
                rule: "limits".into(),
                message: why.clone(),
            })
            .await?;
            launched.status = JobStatus::Failed;
            launched.reason = Some(why);
            Ok(launched)
        }
        // A step that failed once the job was past its limit (a setup
        // command writing to a full disk): the limit is why.
        (Err(LaunchFailure::Step(_)), Some(why)) => {
            em.emit(paddock_protocol::EventBody::Policy {
                rule: "limits".into(),
                message: why.clone(),
            })
            .await?;
            Err(LaunchFailure::Step(why))
        }
        (launched, _) => launched,
    };
    conclude::conclude(job, em, prov, launched, cancel).await
}

/// A job that ended before its engine ran: its final record.
async fn ended_early(job: Job, em: &mut Emitter, stop: Stop) -> Result<RunResult, StoreError> {
    match stop {
        Stop::End(end) => {
            conclude::finish(
                em,
                job.record,
                job.started,
                end.status,
                end.reason,
                end.bad_input,
            )
            .await
        }
        Stop::Store(e) => Err(e),
    }
}

/// The engine's part: launched, streamed, torn down, its outcome.
async fn engine(
    job: &Job,
    em: &mut Emitter,
    (prov, disk): (&provision::Provisioned, &disk_watch::DiskWatch),
    assembled: assemble::Assembled,
    (creds, warm): (
        launch::Credentials,
        Option<paddock_sandbox::cgroup_warm::Warm>,
    ),
    cancel: &mut (impl Future<Output = ()> + Unpin),
) -> Result<conclude::Launched, LaunchFailure> {
    let start = launch::launch(
        job,
        em,
        (prov, disk),
        assembled.prompt,
        assembled.path_env,
        creds,
        cancel,
    )
    .await;
    // The helper moved the engine's PID 1 into its cgroup before the
    // engine ran, which the launch waited for (`EngineProcess::started`):
    // the lock needs no more warming.
    drop(warm);
    let start = start?;
    let (status, message) = match start {
        launch::Start::Running(run) => {
            let mut run = *run;
            let mut streamed =
                stream::stream(job, em, &mut run, prov.adapter.as_ref(), cancel).await?;
            let torn = teardown::tear_down(
                em,
                run,
                &mut streamed,
                (job.rung.as_ref(), disk),
                &prov.ws().root,
            )
            .await?;
            return Ok(conclude::outcome(job, em, prov, streamed, torn).await?);
        }
        launch::Start::Held(message) => (JobStatus::Held, message),
        launch::Start::Cancelled(message) => (JobStatus::Cancelled, message),
    };
    Ok(conclude::Launched {
        status,
        reason: Some(message),
        exit_code: None,
        calls: Vec::new(),
        session_save: None,
        withheld: false,
    })
}

/// `; the file system of DIR is full (ENOSPC)` when the directory of `path`
/// has (almost) no space left, else nothing: SQLite says only "database or
/// disk is full".
fn full_disk_note(path: &Path) -> String {
    let dir = path.parent().unwrap_or(path);
    match nix::sys::statvfs::statvfs(dir) {
        Ok(fs) if fs.blocks_available().saturating_mul(fs.fragment_size()) < FULL_BELOW => {
            format!(
                "; the file system of {} is full (ENOSPC: no space left on device)",
                dir.display()
            )
        }
        _ => String::new(),
    }
}

//! The server's scheduler over the store's persistent queue. A submitted
//! spec is admitted by the [`Runner`] (the CLI's checks, its errors), put
//! through the budget gate (a spent ticket, project or job ceiling: the
//! job is stored `held`, with the reason, and never runs), and stored
//! `queued` with its priority. One task claims queued jobs
//! (`Store::claim_job`: priority, then age, one running attempt per
//! ticket) while fewer than `max_concurrent_jobs` run, and starts each on
//! the runner as a claimed job. A job admitted by this process runs as it
//! was admitted; one found queued after a restart is admitted again from
//! its stored spec under its own id. A claimed job this server may not
//! run (its `[serve] allow_*`) or cannot (what depends on the host that
//! runs it: a file, directory or secret its spec names not here,
//! `Runner::has_here`; its engine's binary not found here, or its sandbox
//! here unable to bind its paths, `Runner::runs_here`; its admission here
//! refusing this host's sandbox, credentials, build or host profile,
//! `NotHere::of_admission`) is passed over before anything of it starts:
//! back in the queue with the reason, for a server that may and can, and
//! claimed again by this one after `RECHECK_PASSED_OVER`, to be looked at
//! anew, until it has waited passed over for `max_passed_over` since a
//! server of the fleet first passed it over (the store's record, the
//! same on every server and after a restart: `Store::pass_over`), no
//! server that claimed it able to run it and none that can, but has no
//! free slot, having said so lately (`Store::mark_able`, which a server
//! whose slots are all taken writes every heartbeat interval for the
//! passed-over jobs it can run), when the server passing it over fails
//! it with why. One whose stored spec no server can run
//! (unreadable, or refused for what it asks) fails. A submission is
//! refused only for what is wrong with the spec wherever it runs
//! (`Runner::spec_own`); one this host cannot run is stored `queued` for a
//! server that can, its reason saying why this one will not. Cancelling a queued job is a
//! compare-and-set to `cancelled`; a running one is signalled through its
//! runner's cancel future, or, when another process runs it (another
//! server on the store), the cancel is recorded in the store for its
//! owner, which stops it when it next looks; an owner on another host
//! whose heartbeat is already older than the TTL, and which this server's
//! reclaim pass has seen miss renewals on its monotonic clock, is dead,
//! and its job is reclaimed `cancelled` there and then
//! (`reaper::reclaim_cancelled`).
//! The request names who asked (`asker.rs`: this server's host and the
//! API token). Another task reclaims, every
//! heartbeat interval, other hosts' running jobs whose heartbeat is older
//! than the TTL and this host's whose lease nobody holds or that have no
//! lease file at all, a claim older than the TTL (another server on this
//! jobs directory, killed mid-job or between a claim and its lease: a
//! claimed job's lease is taken right after the claim, a turn's before its
//! record), and sends the final records owed to the webhooks that no
//! live server is sending (`webhooks.rs`). A drain stops the claiming, waits for running
//! jobs up to a grace, then cancels what still runs and waits for it to
//! conclude.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use paddock_protocol::event::{EventBody, Phase};
use paddock_protocol::{AgentEvent, JobRecord, JobSpec, JobStatus};
use time::OffsetDateTime;
use tokio::sync::{oneshot, Notify};
use tokio_util::sync::CancellationToken;

use super::asker::Asker;
use super::hub::Hub;
use super::slots::{SlotError, Slots};
use super::submissions::{SubmissionError, Submissions};
use super::webhooks::Webhooks;
use crate::reaper::Lease;
use crate::runner::{AdmitError, Admitted, AfterError, JobHandle, NotHere, Runner};
use crate::store::{Owner, SharedStore, StoreError};
use crate::workspace::inline_source;

/// How often the scheduler looks at the queue without being woken (jobs
/// another process enqueued, tickets freed elsewhere).
const POLL: Duration = Duration::from_secs(1);
/// How long a drain waits for cancelled jobs to conclude.
const CANCEL_WAIT: Duration = Duration::from_secs(60);
/// How long a claim waits for its job's lease while another process holds
/// it (a reaper pass looking at the job, which gives it back at once).
const LEASE_WAIT: Duration = Duration::from_secs(5);
/// How long a server leaves a queued job it passed over (`PassOver`)
/// before claiming it again, to look at it anew: a key file put in
/// place, an engine installed, a sandbox enabled since is seen then, with
/// no restart ([`Queue::rechecking_after`] sets another).
pub const RECHECK_PASSED_OVER: Duration = Duration::from_secs(60);
/// Why a job cancelled before it ran is `cancelled` (one definition, with
/// `paddock cancel`'s).
pub use crate::cancel::CANCELLED_QUEUED;
use crate::cancel::{cancelled_queued, cancelled_unrun_event, ended_unrun};

/// A job's cancel future from its cancel channel: a dropped sender (the
/// job ended) is not a cancel.
async fn cancel_future(cancelled: oneshot::Receiver<()>) {
    if cancelled.await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Why a submission is refused.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error("{0}")]
    Admit(#[from] AdmitError),
    /// The next attempt after a prior job cannot be admitted.
    #[error("{0}")]
    After(#[from] AfterError),
    #[error("enqueue the job: {0}")]
    Store(#[from] StoreError),
    /// This server cannot run the job (what its spec names is not here,
    /// or its admission here refuses this host's part) and does not
    /// accept jobs for the fleet's other servers (`[serve]
    /// accept_for_fleet`).
    #[error("{0}")]
    NotHere(NotHere),
}

/// Why a turn is refused before it starts.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error("{0}")]
    Admit(#[from] AdmitError),
    #[error("record the turn: {0}")]
    Store(#[from] StoreError),
    #[error("every slot is taken: {running} of {max} jobs run here; try again shortly")]
    NoSlot { running: usize, max: usize },
    #[error("the server is draining: it starts no more turns")]
    Draining,
    #[error("make the turn's files: {0}")]
    Source(#[from] crate::workspace::WorkspaceError),
    #[error("take the turn's lease: {dir}: {error}")]
    Lease { dir: PathBuf, error: std::io::Error },
}

/// A turn the queue took.
#[derive(Debug)]
pub enum Turn {
    /// Running in a slot of its own; `ended` is told once its record is
    /// final and its inline source removed.
    Started {
        id: String,
        ended: oneshot::Receiver<()>,
    },
    /// Held by its budget at admission (stored `held`, never run): its id.
    Held(String),
}

/// Why a claimed job could not be put back in the queue
/// (`Queue::pass_over`).
#[derive(Debug)]
enum Unclaimed {
    /// It runs here and a cancel was asked of it (by whom, as the
    /// request records it): it ends `cancelled`.
    CancelAsked(String),
    /// Anything else (it is no longer this server's: reclaimed, ended):
    /// left as it is, why for the log.
    Leave(String),
}

/// Why a claimed job cannot start here.
#[derive(Debug)]
enum Readmit {
    /// This server may not or cannot run it, where another may: it goes
    /// back to the queue.
    Refused(PassOver),
    /// It cannot run anywhere (its spec unreadable, its admission
    /// failed): it fails.
    Failed(String),
}

/// Why a server passes a job it claimed over to the fleet's other
/// servers, back to the queue.
#[derive(Debug)]
pub enum PassOver {
    /// Its settings do not let it run the spec (`[serve] allow_*`).
    MayNot(SubmissionError),
    /// Its host cannot run the job ([`NotHere`]: what the spec names is
    /// not here, the engine's binary is not found here, its sandbox here
    /// cannot bind the job's paths, or its admission here refuses this
    /// host's sandbox, credentials, build or host profile).
    Cannot(NotHere),
}

impl From<SubmissionError> for PassOver {
    fn from(refused: SubmissionError) -> PassOver {
        PassOver::MayNot(refused)
    }
}

impl From<NotHere> for PassOver {
    fn from(cannot: NotHere) -> PassOver {
        PassOver::Cannot(cannot)
    }
}

/// The most of why a server passes a job over that the job's reason
/// keeps, in bytes (its end, which says what to do, after `…`): the
/// spec's paths and URLs are in it, as long as a submitter makes them
/// (a request body is up to 2 MiB), and every list of jobs carries it.
const WHY_MAX: usize = 1500;

/// The reason a queued job carries once server `me` passed it over for
/// `why` (at most [`WHY_MAX`] bytes of it): what happens next in words
/// true of a lone server as of a fleet's: this server looks again every
/// [`RECHECK_PASSED_OVER`], so what is fixed here is seen; the job fails
/// once passed over for `most` (`[serve] max_passed_over_secs`, what
/// `Queue::waited_too_long` holds it to) unless a server able to run it
/// but without a free slot has said so lately; a cancel ends it. Before,
/// "it stays queued for a server that can" read, on a server with no
/// other, as waiting for one that does not exist, and then "it stays
/// queued until a server that can run it claims it" left out the failure
/// that ends every such wait on a lone server.
pub fn passed_over_reason(id: &str, me: &Owner, most: Duration, why: &PassOver) -> String {
    let (not, can, why) = match why {
        PassOver::MayNot(refused) => ("may not", "may", refused.to_string()),
        PassOver::Cannot(cannot) => ("cannot", "can", cannot.to_string()),
    };
    let why = crate::output::keep_end(&why, WHY_MAX);
    format!(
        "not run by host {} (jobs directory {}), which {not} run job {id}: {why}; it stays \
         queued until a server that {can} run it claims it (this one looks again every {} s) \
         and fails once passed over for {} s (`[serve] max_passed_over_secs`) unless such a \
         server, all its slots taken, has said so lately; a cancel ends it",
        me.name,
        me.host,
        RECHECK_PASSED_OVER.as_secs(),
        most.as_secs()
    )
}

/// The reason a queued job fails with once server `me`, which `why` may
/// not or cannot run it, has passed it over for `most`
/// (`[serve] max_passed_over_secs`), the job queued all along and no
/// server that claimed it meanwhile able to run it (at most [`WHY_MAX`]
/// bytes of `why`).
pub fn passed_over_too_long_reason(id: &str, me: &Owner, most: Duration, why: &PassOver) -> String {
    let (not, why) = match why {
        PassOver::MayNot(refused) => ("may not", refused.to_string()),
        PassOver::Cannot(cannot) => ("cannot", cannot.to_string()),
    };
    format!(
        "job {id} waited passed over for {} s, the most a job waits for a server able to run \
         it (`[serve] max_passed_over_secs`), and no server that claimed it ran it; last, host \
         {} (jobs directory {}) {not} run it: {}",
        most.as_secs(),
        me.name,
        me.host,
        crate::output::keep_end(&why, WHY_MAX)
    )
}

/// The reason a claimed job fails with once server `me` could not
/// admit it again from its stored spec for `why` (its spec unreadable, or
/// what it asks refused wherever it runs), at most [`WHY_MAX`] bytes of
/// `why` kept (its end).
pub fn readmit_failed_reason(id: &str, me: &Owner, why: &str) -> String {
    format!(
        "claimed by host {} (jobs directory {}), job {id} could not be admitted again from its \
         stored spec: {}",
        me.name,
        me.host,
        crate::output::keep_end(why, WHY_MAX)
    )
}

/// What a cancel did.
#[derive(Debug, Clone, PartialEq)]
pub enum Cancel {
    /// The job runs here: it was told to stop and concludes `cancelled`.
    Signalled,
    /// The job was still queued: it is `cancelled` now.
    Dequeued(JobRecord),
    /// The job had already ended.
    Final(JobRecord),
    /// The job runs in another process (another server or a `paddock
    /// run` on the store, this host's or another's): the cancel is
    /// recorded in the store for `owner`, which stops the job when it next
    /// looks (`heartbeat::CANCEL_POLL`).
    Requested(Owner),
    /// The job ran in another host's process whose heartbeat was already
    /// older than the TTL (its host dead, by the rule a reaper judges
    /// by): the cancel recorded, the job was reclaimed at once and is
    /// `cancelled` now (`reaper::reclaim_cancelled`): its record, and the
    /// host it ran on.
    Settled {
        record: JobRecord,
        owner: Owner,
    },
    /// The job runs in another process that cannot be asked (recorded
    /// before jobs had owners).
    Elsewhere,
    NotFound,
}

/// The queue's clock for how long jobs have been passed over: the
/// monotonic clock (when this server last passed a job over, its recheck
/// counting from then) and the wall clock (when the fleet first passed
/// it over and when a server said it can run it, kept in the store for
/// every server), or both moved on by a test's.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> Duration + Send + Sync>);

impl Clock {
    /// A clock reading `ahead()` past the real ones.
    pub fn ahead_by(ahead: impl Fn() -> Duration + Send + Sync + 'static) -> Clock {
        Clock(Arc::new(ahead))
    }

    fn now(&self) -> Instant {
        Instant::now() + (self.0)()
    }

    fn wall(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc() + (self.0)()
    }
}

impl Default for Clock {
    fn default() -> Clock {
        Clock::ahead_by(|| Duration::ZERO)
    }
}

/// How many of the oldest passed-over jobs a server with no free slot
/// looks at each heartbeat interval to mark those it can run
/// ([`Queue::mark_able`]).
const MARK_MAX: u32 = 16;

/// How many heartbeat TTLs a server's mark that it can run a job
/// (`Store::mark_able`, renewed every heartbeat interval while it has no
/// free slot) keeps the job from failing for its wait.
const ABLE_FRESH_TTLS: u32 = 2;

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Clock")
    }
}

/// The scheduler and the jobs it runs.
#[derive(Debug)]
pub struct Queue {
    store: SharedStore,
    runner: Runner,
    hub: Hub,
    /// The jobs this server claims (none: every job).
    lanes: Vec<crate::store::Lane>,
    /// What a spec may name on this host: checked again when this server
    /// claims a job another server (or an earlier process) admitted.
    submissions: Submissions,
    /// Queued jobs this server may not run (`submissions`) or cannot
    /// (`Runner::has_here`, `Runner::runs_here`, `NotHere::of_admission`),
    /// each with when it last passed it over: passed over by its claims
    /// for `recheck` from then, and claimed again after that; forgotten
    /// once they leave the queue. When the fleet first passed it over is
    /// the store's (`Store::pass_over`).
    refused: Mutex<HashMap<String, Instant>>,
    /// Other hosts' heartbeats, aged on this process's monotonic clock:
    /// the reclaim pass's, which a cancel of a dead host's job reads too
    /// (`reaper::reclaim_cancelled`).
    /// Locked only inside its own methods, never across the store's work
    /// (`reaper::Sightings`).
    sightings: crate::reaper::Sightings,
    /// Passed-over jobs this server found it can run while busy
    /// ([`Queue::mark_able`]), each with when it checked: marked again
    /// without a check until `recheck` from then (its spec does not
    /// change; what this host has may, which the next check sees), and
    /// forgotten once they are no longer among those listed.
    able: Mutex<HashMap<String, Instant>>,
    /// How many times [`Queue::mark_able`] checked a job (re-admitted it
    /// and asked whether it runs here): the work a busy server does.
    able_checks: std::sync::atomic::AtomicU64,
    /// How long a passed-over job is left before it is claimed again
    /// ([`RECHECK_PASSED_OVER`]).
    recheck: Duration,
    /// How long this server passes a job over before it fails it instead
    /// (`[serve] max_passed_over_secs`).
    max_passed_over: Duration,
    /// What `refused` is timed by.
    clock: Clock,
    /// Whether a submission this host cannot run is queued for another
    /// server of the fleet (`[serve] accept_for_fleet`) rather than
    /// refused.
    accept_for_fleet: bool,
    /// Jobs admitted by this process and not claimed yet.
    pending: Mutex<HashMap<String, Admitted>>,
    /// The `max_concurrent_jobs` slots: jobs running here, with their
    /// cancel, and the claim in flight.
    slots: Slots,
    /// Wakes the scheduler (a submission, a job's end).
    wake: Notify,
    /// Set by a drain: nothing more is claimed.
    draining: CancellationToken,
    /// Completion webhooks: every final record is sent.
    webhooks: Option<Webhooks>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Deletes job `id`'s lease file (the lock goes with the last clone): its
/// record is final, back in the queue, or was never written. A file left
/// (the deletion failed) is a free lease, which the next reaper pass
/// deletes.
fn release_lease(id: &str, lease: &Lease) {
    if let Err(e) = lease.release() {
        tracing::warn!("serve: job {id}: cannot delete its lease file: {e}");
    }
}

impl Queue {
    pub fn new(
        store: SharedStore,
        runner: Runner,
        hub: Hub,
        max_concurrent_jobs: u32,
        lanes: Vec<crate::store::Lane>,
        submissions: Submissions,
        webhooks: Option<Webhooks>,
    ) -> Queue {
        Queue {
            store,
            runner,
            hub,
            lanes,
            submissions,
            refused: Mutex::new(HashMap::new()),
            sightings: crate::reaper::Sightings::default(),
            able: Mutex::new(HashMap::new()),
            able_checks: std::sync::atomic::AtomicU64::new(0),
            recheck: RECHECK_PASSED_OVER,
            max_passed_over: Duration::from_secs(super::config::DEFAULT_MAX_PASSED_OVER_SECS),
            clock: Clock::default(),
            accept_for_fleet: false,
            pending: Mutex::new(HashMap::new()),
            slots: Slots::new(usize::try_from(max_concurrent_jobs).unwrap_or(usize::MAX)),
            wake: Notify::new(),
            draining: CancellationToken::new(),
            webhooks,
        }
    }

    /// The queue with the jobs it passes over claimed again `after` that
    /// long (a test's short wait), not [`RECHECK_PASSED_OVER`].
    pub fn rechecking_after(self, after: Duration) -> Queue {
        Queue {
            recheck: after,
            ..self
        }
    }

    /// The queue failing a job it has passed over for `most` (it stayed
    /// queued all along, no server that claimed it able to run it), not
    /// the default day.
    pub fn passing_over_at_most(self, most: Duration) -> Queue {
        Queue {
            max_passed_over: most,
            ..self
        }
    }

    /// The queue storing a submission this host cannot run queued for
    /// another server of the fleet (`[serve] accept_for_fleet`), where by
    /// default it is refused.
    pub fn accepting_for_fleet(self, accept_for_fleet: bool) -> Queue {
        Queue {
            accept_for_fleet,
            ..self
        }
    }

    /// The queue timing the jobs it passes over by `clock` (a test's).
    pub fn timed_by(self, clock: Clock) -> Queue {
        Queue { clock, ..self }
    }

    /// Whether final records can be signed and sent (the server has a
    /// webhook secret): a job's own `results.webhook_url` needs it.
    pub fn has_webhooks(&self) -> bool {
        self.webhooks.is_some()
    }

    /// Sends job `id`'s final record to the server's webhook and to the
    /// job's own (`results.webhook_url`), where there are: owed in the
    /// store first, so that another server sends it if this one dies
    /// first (`Webhooks::send_owed`).
    async fn completed(&self, id: &str) {
        if let Some(webhooks) = &self.webhooks {
            // Sent in the background; nothing here waits for it.
            drop(webhooks.owe_and_send(id).await);
        }
    }

    /// Records job `id`'s final record as owed to the webhooks, before
    /// it ends: whoever ends it (this server, another one's reaper, a
    /// `paddock gc`), a server with webhooks sends it.
    async fn owe(&self, id: &str) {
        if let Some(webhooks) = &self.webhooks {
            webhooks.owe(id).await;
        }
    }

    /// How many jobs run here now.
    pub fn running(&self) -> usize {
        self.slots.running()
    }

    /// How many jobs may run here at once.
    pub fn capacity(&self) -> usize {
        self.slots.capacity()
    }

    /// Whether a drain has begun.
    pub fn is_draining(&self) -> bool {
        self.draining.is_cancelled()
    }

    /// Admits `spec` (as the next attempt after the job `after` names,
    /// when it names one: `Runner::admit_after`), gates it on its budget
    /// and stores it: `queued` (with `priority`, higher first, and the
    /// prior job it follows) or `held`. The record as stored.
    pub async fn submit(
        &self,
        spec: &JobSpec,
        priority: i64,
        after: Option<&str>,
    ) -> Result<JobRecord, SubmitError> {
        let admitted = match after {
            None => match self.admit_or_not_here(spec).await? {
                Ok(admitted) => admitted,
                Err(cannot) => return self.queue_for_another(spec, priority, None, cannot).await,
            },
            // The prior attempts read here (the store and the forge are
            // the fleet's); the prior's session and branch followed by the
            // server that admits it, this one or the one that claims it.
            Some(prior) => {
                let (spec, follows) = self.runner.prior_attempts(spec, prior).await?;
                match self.admit_or_not_here(&spec).await? {
                    Ok(mut admitted) => {
                        self.runner.follow_stored(&mut admitted, &follows).await?;
                        admitted
                    }
                    Err(cannot) => {
                        return self
                            .queue_for_another(&spec, priority, Some(&follows), cannot)
                            .await
                    }
                }
            }
        };
        if let Some(message) = self.runner.budget_hold(&admitted).await? {
            let record = admitted.record(JobStatus::Held);
            let follows = admitted.follows();
            return Ok(self
                .hold(
                    record,
                    admitted.spec_json(),
                    follows.as_ref(),
                    message,
                    priority,
                )
                .await?);
        }
        let record = admitted.record(JobStatus::Queued);
        self.store
            .enqueue_job(
                &record,
                admitted.spec_json(),
                priority,
                admitted.follows().as_ref(),
            )
            .await?;
        self.owe(&record.id).await;
        locked(&self.pending).insert(record.id.clone(), admitted);
        self.wake.notify_one();
        Ok(record)
    }

    /// Admits submitted `spec` here, or says why this host cannot run it
    /// where another server of the fleet may (`NotHere`): what is wrong
    /// with the spec wherever it runs is refused first
    /// (`Runner::spec_own`), then what it names on this host is looked
    /// for (`Runner::has_here`), then it is admitted, a refusal of what is
    /// this host's (`NotHere::of_admission`) not the spec's. Before, a
    /// server refused (422) a spec whose key, templates or scenario only
    /// the fleet's other servers had, so a front server without them
    /// could not accept jobs for its workers.
    async fn admit_or_not_here(
        &self,
        spec: &JobSpec,
    ) -> Result<Result<Admitted, NotHere>, AdmitError> {
        self.runner.spec_own(spec)?;
        if let Err(cannot) = self.runner.has_here(spec) {
            return Ok(Err(cannot));
        }
        match self.runner.admit(spec).await {
            Ok(admitted) => Ok(Ok(admitted)),
            Err(e) => NotHere::of_admission(e).map(Err),
        }
    }

    /// Stores submitted `spec` (the next attempt after the prior job it
    /// `follows`, when it is one), which this host cannot run (`cannot`),
    /// for a server of the fleet that can: gated on its budget by its
    /// spec as submitted (`held`), else `queued` with `priority` and the
    /// reason a server passing it over gives, which the 202 answer
    /// carries (no server has been seen able to run it yet); this server
    /// passes it over as if it had claimed it, claiming it again after
    /// its recheck. The server that claims it admits it from its stored
    /// spec.
    async fn queue_for_another(
        &self,
        spec: &JobSpec,
        priority: i64,
        follows: Option<&crate::store::Follows>,
        cannot: NotHere,
    ) -> Result<JobRecord, SubmitError> {
        // A server that is no front for a fleet (the default) refuses it,
        // naming what is missing here, as `paddock run` would: queued, it
        // would wait `max_passed_over` for a server that may not exist.
        if !self.accept_for_fleet {
            return Err(SubmitError::NotHere(cannot));
        }
        let id = crate::job_ref::new_id();
        let mut record = JobRecord::new(&id, spec, OffsetDateTime::now_utc());
        let spec_json =
            serde_json::to_string(spec).map_err(|e| AdmitError::SerializeSpec(e.to_string()))?;
        if let Some(message) = self.runner.budget_hold_spec(spec, &id).await? {
            record.status = JobStatus::Held;
            return Ok(self
                .hold(record, &spec_json, follows, message, priority)
                .await?);
        }
        let me = &self.runner.config().liveness.owner;
        let why = PassOver::Cannot(cannot);
        record.status = JobStatus::Queued;
        record.reason = Some(passed_over_reason(&id, me, self.max_passed_over, &why));
        locked(&self.refused).insert(id.clone(), self.clock.now());
        if let Err(e) = self
            .store
            .enqueue_job(&record, &spec_json, priority, follows)
            .await
        {
            locked(&self.refused).remove(&id);
            return Err(e.into());
        }
        // Passed over from now on, for every server's count.
        if let Err(e) = self.store.pass_over(&id, self.clock.wall()).await {
            tracing::warn!("serve: job {id}: cannot record that it was passed over: {e}");
        }
        // A front server of a fleet does this for every job by design.
        tracing::info!("serve: {}", record.reason.as_deref().unwrap_or_default());
        self.owe(&record.id).await;
        Ok(record)
    }

    /// Runs a turn now, in a free slot of `max_concurrent_jobs` or not at
    /// all: admitted as a job (under job id `id`), gated on its budget (held: stored `held`
    /// as a submission is), its `files` written into `source` as a
    /// repository when it has them, its lease taken, recorded `running`
    /// (never `queued`: the scheduler never sees it) and started as a
    /// claimed job on that lease. The lease before the record, as every
    /// job's: a reaper pass (`paddock gc`, another server's) never finds
    /// the turn `running` here with no lease and fails it while it starts.
    pub async fn turn(
        self: &Arc<Self>,
        id: &str,
        spec: &JobSpec,
        source: Option<(PathBuf, &BTreeMap<String, String>)>,
    ) -> Result<Turn, TurnError> {
        // A turn runs on this server: an engine it cannot find is refused
        // now (a queued job's is not: another server may claim it).
        self.runner.engine_here(spec)?;
        // A `repository` the turn names is the client's, looked at by
        // its admission; its inline source is the server's, made below.
        let mut admitted = match &source {
            Some((dir, _)) => self.runner.admit_made_source(spec, dir).await?,
            None => self.runner.admit(spec).await?,
        };
        id.clone_into(&mut admitted.id);
        self.runner.view_here(&admitted)?;
        if let Some(message) = self.runner.budget_hold(&admitted).await? {
            let record = admitted.record(JobStatus::Held);
            let follows = admitted.follows();
            let held = self
                .hold(record, admitted.spec_json(), follows.as_ref(), message, 0)
                .await?;
            return Ok(Turn::Held(held.id));
        }
        let (cancel, cancelled) = oneshot::channel::<()>();
        self.slots
            .take_for_turn(&admitted.id, cancel, || self.is_draining())
            .await
            .map_err(|e| match e {
                SlotError::Full { running, max } => TurnError::NoSlot { running, max },
                SlotError::Draining => TurnError::Draining,
            })?;
        let id = admitted.id.clone();
        let made = async {
            if let Some((dir, files)) = &source {
                inline_source::make(dir, files, admitted.git_cpu()).await?;
            }
            let jobs = &self.runner.config().paths.jobs;
            let lease = Lease::take(jobs, &id).map_err(|error| TurnError::Lease {
                dir: jobs.join(".leases"),
                error,
            })?;
            let inserted = self
                .store
                .insert_owned_job(
                    &admitted.record(JobStatus::Running),
                    admitted.spec_json(),
                    &self.runner.config().liveness.owner,
                    OffsetDateTime::now_utc(),
                )
                .await;
            if let Err(e) = inserted {
                // No record: nothing for a reaper to end.
                release_lease(&id, &lease);
                return Err(e.into());
            }
            Ok::<Lease, TurnError>(lease)
        }
        .await;
        let lease = match made {
            Ok(lease) => lease,
            Err(e) => {
                if let Some((dir, _)) = &source {
                    if let Err(e) = inline_source::remove(dir) {
                        tracing::warn!("serve: turn {id}: {e}");
                    }
                }
                self.slots.release(&id);
                return Err(e);
            }
        };
        self.owe(&id).await;
        let handle = self
            .runner
            .start_claimed(admitted, lease, cancel_future(cancelled));
        let (ended_tx, ended) = oneshot::channel();
        self.watch(handle, Some((source.map(|(dir, _)| dir), ended_tx)));
        Ok(Turn::Started { id, ended })
    }

    /// Stores job `record` (with its spec as submitted, `spec_json`, and
    /// the prior job it `follows`) `held` for `message` with its `policy`
    /// and `status` events, and sends its webhooks; the record.
    async fn hold(
        &self,
        mut record: JobRecord,
        spec_json: &str,
        follows: Option<&crate::store::Follows>,
        message: String,
        priority: i64,
    ) -> Result<JobRecord, StoreError> {
        ended_unrun(&mut record, JobStatus::Held, message.clone());
        self.store
            .enqueue_job(&record, spec_json, priority, follows)
            .await?;
        let events = [
            EventBody::Policy {
                rule: "budget".into(),
                message: message.clone(),
            },
            EventBody::Status {
                phase: Phase::Held,
                detail: Some(message),
            },
        ];
        self.append(&record.id, events).await?;
        self.completed(&record.id).await;
        Ok(record)
    }

    /// Tells job `id` to stop if it runs here (a turn whose client went
    /// away); nothing when it does not.
    pub fn cancel_here(&self, id: &str) {
        self.slots.cancel(id);
    }

    /// Appends `bodies` as the first events of job `id` (a job that never
    /// ran has none).
    async fn append(
        &self,
        id: &str,
        bodies: impl IntoIterator<Item = EventBody>,
    ) -> Result<(), StoreError> {
        for (seq, body) in (1..).zip(bodies) {
            let event = AgentEvent {
                job_id: id.to_owned(),
                seq,
                at: OffsetDateTime::now_utc(),
                body,
            };
            self.store.append_event(&event).await?;
        }
        Ok(())
    }

    /// Claims and starts queued jobs until the drain begins.
    pub async fn run(self: Arc<Self>) {
        while !self.is_draining() {
            self.fill().await;
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(POLL) => {}
                _ = self.draining.cancelled() => {}
            }
        }
    }

    /// Starts queued jobs while there is room; the queue's depth and the
    /// jobs by status for `/metrics`.
    async fn fill(self: &Arc<Self>) {
        self.claim_while_room().await;
        if let Ok(depth) = self.store.queue_depth().await {
            crate::telemetry::queue_depth(depth);
        }
        if let Ok(counts) = self.store.job_counts().await {
            crate::telemetry::jobs_by_state(&counts);
        }
    }

    /// Claims queued jobs while a slot is free. The slot is taken before
    /// the claim and handed to the claimed job, so a turn
    /// ([`Queue::turn`]) never takes it meanwhile; a turn that arrives
    /// then waits for the claim to settle ([`Slots::take_for_turn`]).
    async fn claim_while_room(self: &Arc<Self>) {
        while !self.is_draining() {
            if !self.slots.begin_claim() {
                break;
            }
            // Owned by this host from the claim's own statement on. The
            // jobs passed over a while ago are claimed again, to be looked
            // at anew: what this host lacked may be here now.
            let now = self.clock.now();
            let skip: Vec<String> = locked(&self.refused)
                .iter()
                .filter(|(_, last)| now.saturating_duration_since(**last) < self.recheck)
                .map(|(id, _)| id.clone())
                .collect();
            let claimed = self
                .store
                .claim_job(
                    &self.lanes,
                    &self.runner.config().liveness.owner,
                    OffsetDateTime::now_utc(),
                    &skip,
                )
                .await;
            let (cancel, cancelled) = oneshot::channel::<()>();
            self.slots.end_claim(match &claimed {
                Ok(Some(record)) => Some((record.id.clone(), cancel)),
                Ok(None) | Err(_) => None,
            });
            match claimed {
                Ok(Some(record)) => {
                    self.owe(&record.id).await;
                    self.start(record, cancelled).await
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!("serve: cannot claim the next queued job: {e}");
                    break;
                }
            }
        }
    }

    /// Starts the claimed job `record` on the runner, in the slot taken
    /// for it; `cancelled` is its cancel. Its lease is taken first, right
    /// after the claim: re-admitting a stored spec may take longer than
    /// the heartbeat TTL, and a reaper pass meanwhile (`paddock gc`,
    /// another server's on this jobs directory) would take a claim older
    /// than that with no lease for a dead server's and fail it.
    async fn start(self: &Arc<Self>, record: JobRecord, cancelled: oneshot::Receiver<()>) {
        let id = record.id.clone();
        let jobs = &self.runner.config().paths.jobs;
        // A reaper pass may hold it for a moment, to look at the job again
        // (one it listed before this claim, with an old claim and no
        // lease file: passed over by another server, say): it gives it
        // back at once, so the claim waits for it rather than failing.
        let lease = match Lease::take_within(jobs, &id, LEASE_WAIT).await {
            Ok(lease) => lease,
            Err(e) => {
                locked(&self.pending).remove(&id);
                let reason = format!(
                    "claimed by host {}, it could not take its lease in {}: {e}",
                    self.runner.config().liveness.owner.name,
                    jobs.join(".leases").display()
                );
                self.fail_claimed(record, reason).await;
                self.slots.release(&id);
                self.wake.notify_one();
                return;
            }
        };
        let pending = locked(&self.pending).remove(&id);
        let admitted = match pending {
            Some(a) => Ok(a),
            None => self.readmit(&record).await,
        };
        // What of the job depends on this host, checked before anything
        // of it starts, whoever admitted it: a server whose submission
        // accepted it does not check them (another server may claim it).
        let admitted = admitted.and_then(|a| match self.runner.runs_here(&a) {
            Ok(()) => Ok(a),
            Err(e) => Err(Readmit::Refused(e.into())),
        });
        let admitted = match admitted {
            Ok(a) => a,
            Err(Readmit::Refused(why)) => {
                self.give_back(record, lease, &why).await;
                return;
            }
            Err(Readmit::Failed(why)) => {
                let me = &self.runner.config().liveness.owner;
                self.fail_claimed(record, readmit_failed_reason(&id, me, &why))
                    .await;
                release_lease(&id, &lease);
                self.slots.release(&id);
                self.wake.notify_one();
                return;
            }
        };
        let handle = self
            .runner
            .start_claimed(admitted, lease, cancel_future(cancelled));
        self.watch(handle, None);
    }

    /// Puts claimed job `record`, which this server will not run (`why`),
    /// back in the queue for another server: its slot freed, its claim
    /// renewed, its `lease` given up, then [`Queue::pass_over`]. A signal
    /// that reached its slot (its `cancelled`, dropped) asks nothing of
    /// the job: an
    /// API cancel (`Queue::cancel`) recorded who asked in the store before
    /// it signalled, where putting the job back finds it; the drain's
    /// (`Slots::cancel_all`) names no one and is for the jobs this server
    /// runs, not one it passes over, which another server may run. Before,
    /// the drain's signal was recorded as a cancel "(its server's drain)",
    /// and the job ended `cancelled while queued`.
    async fn give_back(&self, record: JobRecord, lease: Lease, why: &PassOver) {
        let id = record.id.clone();
        // From here a cancel goes through the store, where putting the
        // job back finds it.
        self.slots.release(&id);
        // Given up before the job is queued again, so that the server
        // that claims it next finds no lease file; its claim renewed
        // first, so that a reaper pass in between (re-admitting may have
        // taken longer than the TTL) finds a fresh claim, not a dead
        // server's with no lease, and leaves it alone (`crate::reaper`
        // looks again once it holds the lease).
        let me = &self.runner.config().liveness.owner;
        if let Err(e) = self
            .store
            .heartbeat(&id, &me.host, OffsetDateTime::now_utc())
            .await
        {
            tracing::warn!("serve: job {id}: cannot renew its claim: {e}");
        }
        release_lease(&id, &lease);
        self.pass_over(record, why).await;
    }

    /// Follows a started job: its live events into the hub; at its end its
    /// inline source (a turn's) removed, its slot freed, its webhooks sent,
    /// then `ended` told.
    fn watch(
        self: &Arc<Self>,
        handle: JobHandle,
        turn: Option<(Option<PathBuf>, oneshot::Sender<()>)>,
    ) {
        let JobHandle { id, events, join } = handle;
        self.hub.attach(&id, events);
        let queue = Arc::clone(self);
        tokio::spawn(async move {
            match join.await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::warn!("serve: job {id}: {e}"),
                Err(e) => tracing::warn!("serve: job {id}: its task ended without a result: {e}"),
            }
            let (source, ended) = match turn {
                Some((source, ended)) => (source, Some(ended)),
                None => (None, None),
            };
            if let Some(dir) = source {
                if let Err(e) = inline_source::remove(&dir) {
                    tracing::warn!("serve: turn {id}: {e}");
                }
            }
            queue.slots.release(&id);
            queue.wake.notify_one();
            queue.completed(&id).await;
            if let Some(ended) = ended {
                let _ = ended.send(());
            }
        });
    }

    /// A job this process did not admit (another server's, or one found
    /// queued after a restart), checked against what this server allows
    /// (`submissions`: the server that took it may allow more, or its
    /// paths be other files there) and admitted again from its stored
    /// spec under its own id and submission time.
    async fn readmit(&self, record: &JobRecord) -> Result<Admitted, Readmit> {
        let failed = |e: &dyn std::error::Error| Readmit::Failed(super::problem::chain(e));
        let text = match self.store.job_spec(&record.id).await {
            Ok(Some(text)) => text,
            Ok(None) => return Err(Readmit::Failed("its stored spec is missing".into())),
            Err(e) => return Err(failed(&e)),
        };
        let spec =
            JobSpec::from_stored(&text, Path::new("<stored spec>")).map_err(|e| failed(&e))?;
        // A relative path would be read against this server's directory,
        // another file on each server: no server can run it as it was
        // meant (and `allow_paths` judges absolute paths alone).
        if let Some((field, path)) = spec.relative_host_paths().first() {
            return Err(Readmit::Failed(format!(
                "its stored spec names {field} {}, a relative path, which no server can resolve: \
                 admission stores every path absolute, and nothing says which directory this \
                 one is relative to (a spec stored by an earlier version, or written into the \
                 store directly); submit the job again with the path absolute",
                path.display()
            )));
        }
        self.submissions
            .check(&spec, None)
            .map_err(|e| Readmit::Refused(e.into()))?;
        // What the spec names on the host that runs it, looked for here
        // before its admission reads it: a server that has it runs it.
        self.runner
            .has_here(&spec)
            .map_err(|e| Readmit::Refused(e.into()))?;
        // What admission finds of this host's (its sandbox, its
        // credentials, its build, its host profile) and
        // refuses: another server's, which admitted the job, did not.
        let mut admitted =
            self.runner
                .admit(&spec)
                .await
                .map_err(|e| match NotHere::of_admission(e) {
                    Ok(cannot) => Readmit::Refused(cannot.into()),
                    Err(e) => failed(&e),
                })?;
        // The next attempt after a prior job follows it again: its session
        // and branch read now, on this host.
        match self.store.job_follows(&record.id).await {
            Ok(None) => {}
            Ok(Some(follows)) => self
                .runner
                .follow_stored(&mut admitted, &follows)
                .await
                .map_err(|e| failed(&e))?,
            Err(e) => return Err(failed(&e)),
        }
        admitted.id.clone_from(&record.id);
        admitted.submitted = record.created_at;
        Ok(admitted)
    }

    /// A claimed job this server may not or cannot run (`why`): back in
    /// the queue, passed over by this server's claims for its `recheck`
    /// (then claimed again and looked at anew: a key file put in place or
    /// an engine installed since is seen with no restart), the reason
    /// on its record for `paddock show` and the API until a server that
    /// may run it claims it. One a cancel was asked of meanwhile ends
    /// `cancelled`, as a queued job's cancel does. One that is no longer
    /// this server's (a reaper found its claim dead and reclaimed it, or
    /// it ended) is left as it is: before, any refused unclaim was taken
    /// for a cancel and the job's record overwritten `cancelled`.
    async fn pass_over(&self, record: JobRecord, why: &PassOver) {
        let me = &self.runner.config().liveness.owner;
        let id = record.id.clone();
        locked(&self.refused).insert(id.clone(), self.clock.now());
        // Passed over for long enough, no server that claimed it able to
        // run it and none that can saying so lately: failed with why, not
        // queued for ever. A cancel asked of it meanwhile ends it
        // `cancelled` below, as ever.
        if self.waited_too_long(&id).await {
            if let Ok(Some(standing)) = self.store.claim_standing(&id).await {
                if standing.cancel.is_none() {
                    locked(&self.refused).remove(&id);
                    let reason = passed_over_too_long_reason(&id, me, self.max_passed_over, why);
                    tracing::warn!("serve: {reason}");
                    self.fail_claimed(record, reason).await;
                    self.wake.notify_one();
                    return;
                }
            }
        }
        let reason = passed_over_reason(&id, me, self.max_passed_over, why);
        match self.store.unclaim_job(&id, &me.host, &reason).await {
            // Back in the queue: nothing more of it is this server's. (Before,
            // this went on to the cancel's finish, a compare-and-set on
            // `running` that failed with a warning, or, had another server
            // claimed the job in between, overwrote its running job
            // `cancelled`.)
            Ok(true) => tracing::warn!("serve: {reason}"),
            Ok(false) => match self.unclaim_refused(&id, me).await {
                Ok(Unclaimed::CancelAsked(by)) => self.cancel_passed_over(record, &by).await,
                Ok(Unclaimed::Leave(why)) => tracing::warn!(
                    "serve: job {id}: not put back in the queue, and left as it is: {why}"
                ),
                Err(e) => tracing::warn!(
                    "serve: job {id}: not put back in the queue, and it cannot be read back: {e}"
                ),
            },
            // Left `running` on this host, never renewed: another
            // server's reclaim (after the TTL) or this server's next
            // start ends it, queued again.
            Err(e) => tracing::warn!("serve: job {id}: cannot put it back in the queue: {e}"),
        }
    }

    /// Claimed job `record`, ours and `running`, which a cancel asked by
    /// `by` (the request's) reached while it was being passed over: it
    /// ends `cancelled` as a queued job's cancel ends it, naming who
    /// asked. The finish is a compare-and-set on `running`: a job leaves
    /// it for good once it is no longer this server's (a reclaim finishes
    /// it), so one reclaimed since it was read back stays as the reclaim
    /// left it.
    async fn cancel_passed_over(&self, mut record: JobRecord, by: &str) {
        let id = record.id.clone();
        ended_unrun(&mut record, JobStatus::Cancelled, cancelled_queued(by));
        match self.store.finish_job(&record, JobStatus::Running).await {
            Ok(()) => {
                if let Err(e) = self.append(&id, [cancelled_unrun_event(by)]).await {
                    tracing::warn!("serve: job {id}: {e}");
                }
                self.completed(&id).await;
            }
            Err(e) => tracing::warn!("serve: job {id}: cannot mark it cancelled: {e}"),
        }
    }

    /// Whether job `id`, which this server passes over now, has waited
    /// passed over for `max_passed_over` since a server of the fleet first
    /// passed it over (the store's record, `Store::pass_over`: the same
    /// on every server and after a restart, set now when none was), with
    /// no server that can run it but had no free slot saying so within
    /// [`ABLE_FRESH_TTLS`] heartbeat TTLs (`Store::mark_able`). Before,
    /// each server counted from its own first pass, in its memory, and
    /// failed the job while a busy server that could run it existed. A
    /// store that cannot be read fails nothing.
    async fn waited_too_long(&self, id: &str) -> bool {
        let wall = self.clock.wall();
        let standing = match self.store.pass_over(id, wall).await {
            Ok(Some(standing)) => standing,
            Ok(None) => return false,
            Err(e) => {
                tracing::warn!("serve: job {id}: cannot record that it was passed over: {e}");
                return false;
            }
        };
        let most = time::Duration::try_from(self.max_passed_over).unwrap_or(time::Duration::MAX);
        if wall - standing.first < most {
            return false;
        }
        let liveness = &self.runner.config().liveness;
        let fresh =
            time::Duration::try_from(liveness.ttl * ABLE_FRESH_TTLS).unwrap_or(time::Duration::MAX);
        match standing.able {
            Some((able, at)) if wall - at <= fresh => {
                tracing::info!(
                    "serve: job {id}: passed over for longer than {} s, but host {} (jobs \
                     directory {}), which can run it, said so at {at} while it had no free slot: \
                     it stays queued for it",
                    self.max_passed_over.as_secs(),
                    able.name,
                    able.host,
                    at = crate::time_text::rfc3339(at),
                );
                false
            }
            _ => true,
        }
    }

    /// While every slot here is taken, marks the queued jobs that servers
    /// of the fleet passed over (`Store::passed_over_queued`, the oldest
    /// [`MARK_MAX`] this server's lanes take, each heartbeat interval) that
    /// this server can run (`Queue::readmit` and `Runner::runs_here`, as
    /// its claim would check them, nothing of them started) as such
    /// (`Store::mark_able`), so the server that passes one over does not
    /// fail it for its wait while this one is busy; once a slot is free
    /// this server claims it. Jobs this server passed over itself are
    /// not looked at (it cannot run them), and one it finds it cannot run
    /// is counted as passed over by it (looked at again after its
    /// recheck, not every interval); one it finds it can run is
    /// remembered so (`able`) and marked again without a check until its
    /// recheck. Before, a busy server checked every such job again every
    /// heartbeat interval: up to [`MARK_MAX`] admissions (the spec read
    /// and parsed, its files and engine looked for, its sandbox view
    /// planned) each interval, for as long as it stayed busy.
    async fn mark_able(&self) {
        if self.is_draining() || self.slots.running() < self.slots.capacity() {
            return;
        }
        let ids = match self.store.passed_over_queued(&self.lanes, MARK_MAX).await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::warn!("serve: cannot list the queued jobs passed over: {e}");
                return;
            }
        };
        let me = &self.runner.config().liveness.owner;
        let now = self.clock.now();
        locked(&self.able).retain(|id, _| ids.contains(id));
        for id in ids {
            if locked(&self.refused).contains_key(&id) {
                continue;
            }
            let known = locked(&self.able)
                .get(&id)
                .is_some_and(|at| now.saturating_duration_since(*at) < self.recheck);
            if !known {
                match self.able_here(&id).await {
                    Ok(true) => {
                        locked(&self.able).insert(id.clone(), now);
                    }
                    // This server cannot run it either: looked at again
                    // after its recheck, as a job it passed over is, not
                    // every heartbeat interval.
                    Ok(false) => {
                        locked(&self.refused).insert(id, now);
                        continue;
                    }
                    // Not queued any more, or no server can run it (the
                    // claim that takes it fails it).
                    Err(()) => continue,
                }
            }
            if let Err(e) = self.store.mark_able(&id, me, self.clock.wall()).await {
                tracing::warn!("serve: job {id}: cannot mark it as one this server can run: {e}");
            }
        }
    }

    /// Whether queued job `id` is one this server can run, checked as its
    /// claim would check it (`Queue::readmit`, `Runner::runs_here`);
    /// `Err` when it is not queued or no server can run it.
    async fn able_here(&self, id: &str) -> Result<bool, ()> {
        let record = match self.store.job(id).await {
            Ok(Some(record)) if record.status == JobStatus::Queued => record,
            Ok(_) => return Err(()),
            Err(e) => {
                tracing::warn!("serve: job {id}: cannot read it: {e}");
                return Err(());
            }
        };
        self.able_checks
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let checked = match self.readmit(&record).await {
            Ok(admitted) => self
                .runner
                .runs_here(&admitted)
                .map_err(|e| Readmit::Refused(e.into())),
            Err(e) => Err(e),
        };
        match checked {
            Ok(()) => Ok(true),
            Err(Readmit::Refused(_)) => Ok(false),
            Err(Readmit::Failed(_)) => Err(()),
        }
    }

    /// How many passed-over jobs [`Queue::mark_able`] has checked (each a
    /// re-admission): the work a busy server spends on them.
    pub fn able_checks(&self) -> u64 {
        self.able_checks.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Why claimed job `id` could not be put back in the queue: a cancel
    /// was asked of it while it is still `running` on `me`, or it is no
    /// longer `me`'s (what it is now, for the log).
    /// Its status, owner and cancel request are read as one row.
    async fn unclaim_refused(&self, id: &str, me: &Owner) -> Result<Unclaimed, StoreError> {
        let Some(now) = self.store.claim_standing(id).await? else {
            return Ok(Unclaimed::Leave("it is gone from the store".into()));
        };
        if now.status != JobStatus::Running {
            return Ok(Unclaimed::Leave(format!(
                "it is no longer this server's: it is {}",
                now.status.as_str()
            )));
        }
        match now.owner {
            Some(owner) if owner.host == me.host => {}
            Some(owner) => {
                return Ok(Unclaimed::Leave(format!(
                    "it is no longer this server's: it runs on host {} (jobs directory {})",
                    owner.name, owner.host
                )))
            }
            None => return Ok(Unclaimed::Leave("it runs without an owner".into())),
        }
        Ok(match now.cancel {
            Some(asked) => Unclaimed::CancelAsked(asked.by),
            None => Unclaimed::Leave("it runs here and no cancel was asked of it".into()),
        })
    }

    /// Forgets the refused jobs that have left the queue (run by another
    /// server, cancelled), read in one query (`Store::still_queued`),
    /// where before it was one read per job (a front server of a fleet
    /// passes over every job it accepts, as many as are submitted). One
    /// passed over meanwhile is kept; a read that fails forgets nothing
    /// (before, it forgot the job, its wait counted afresh).
    async fn prune_refused(&self) {
        let ids: Vec<String> = locked(&self.refused).keys().cloned().collect();
        if ids.is_empty() {
            return;
        }
        let queued = match self.store.still_queued(&ids).await {
            Ok(queued) => queued,
            Err(e) => {
                tracing::warn!(
                    "serve: cannot read which jobs it passed over are still queued: {e}"
                );
                return;
            }
        };
        let looked: std::collections::HashSet<String> = ids.into_iter().collect();
        let queued: std::collections::HashSet<String> = queued.into_iter().collect();
        locked(&self.refused).retain(|id, _| queued.contains(id) || !looked.contains(id));
    }

    /// A claimed job that cannot start: `failed` with `reason`.
    async fn fail_claimed(&self, mut record: JobRecord, reason: String) {
        ended_unrun(&mut record, JobStatus::Failed, reason);
        match self.store.finish_job(&record, JobStatus::Running).await {
            Ok(()) => self.completed(&record.id).await,
            Err(e) => tracing::warn!("serve: job {}: cannot mark it failed: {e}", record.id),
        }
    }

    /// Cancels job `id`, asked by `asker` (recorded with a request through
    /// the store, said in the reason of a job whose dead owner's reaper
    /// ends it).
    pub async fn cancel(&self, id: &str, asker: &Asker) -> Result<Cancel, StoreError> {
        let me = &self.runner.config().liveness.owner;
        let by = asker.described(&me.name);
        // The owner a cancel through the store was recorded for.
        let mut requested = None;
        // A claim in flight (`running` in the store, not yet here) settles
        // within a few tries.
        for _ in 0..50 {
            if self.slots.holds(id) {
                // Who asked, kept in the store first (the job's end reads
                // it: `cancel::with_asker`); a job not yet recorded
                // `running` (a turn starting) records nothing here.
                if let Err(e) = self
                    .store
                    .request_cancel(id, &by, OffsetDateTime::now_utc())
                    .await
                {
                    tracing::warn!("serve: job {id}: cannot record who asked to cancel it: {e}");
                }
            }
            if self.slots.cancel(id) {
                return Ok(Cancel::Signalled);
            }
            let Some(mut record) = self.store.job(id).await? else {
                return Ok(Cancel::NotFound);
            };
            match record.status {
                JobStatus::Queued => {
                    ended_unrun(&mut record, JobStatus::Cancelled, cancelled_queued(&by));
                    match self.store.finish_job(&record, JobStatus::Queued).await {
                        Ok(()) => {
                            locked(&self.pending).remove(id);
                            self.append(id, [cancelled_unrun_event(&by)]).await?;
                            self.completed(id).await;
                            return Ok(Cancel::Dequeued(record));
                        }
                        Err(StoreError::StatusChanged { .. }) => {}
                        Err(e) => return Err(e),
                    }
                }
                // Recorded in the store whoever runs it: another host's
                // job is stopped by its owner; this host's that is not
                // here yet (a claim in flight) sees it too, or is here at
                // the next try.
                JobStatus::Running => {
                    if let Some(owner) = self
                        .store
                        .request_cancel(id, &by, OffsetDateTime::now_utc())
                        .await?
                    {
                        if owner.host != me.host {
                            return Ok(self.settle_if_dead(id, owner).await);
                        }
                        requested = Some(owner);
                    }
                }
                // Cancelled since this cancel recorded its request: the
                // process running it (a `paddock run` on this jobs
                // directory) read the request and stopped, so the
                // cancel reached it. A job that had ended before, or
                // ended on its own meanwhile, is `job_final`.
                JobStatus::Cancelled if requested.is_some() => {
                    return Ok(requested.map_or(Cancel::Final(record), Cancel::Requested));
                }
                _ => return Ok(Cancel::Final(record)),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // This host's job run by another process (a `paddock run` on the
        // same jobs directory) stops when it reads the request.
        Ok(requested.map_or(Cancel::Elsewhere, Cancel::Requested))
    }

    /// Another host's running job `id` that a cancel was just recorded
    /// for (its `owner`): reclaimed now, `cancelled`, when that owner is
    /// dead by a rule no single clock's jump satisfies (its heartbeat
    /// dated older than the TTL and seen unchanged by this server's pass
    /// for `reaper::MISSED_RENEWALS` intervals, or for the TTL, on its
    /// monotonic clock: `reaper::reclaim_cancelled`, then
    /// a compare-and-set on the owner, that heartbeat and the request, so
    /// an owner that renewed meanwhile keeps it and stops it itself), its
    /// final record sent to the webhooks; otherwise left to the owner
    /// ([`Cancel::Requested`]). Before, a cancel of a dead host's job
    /// waited for this server's reaper pass, the TTL again on its own
    /// clock. A reclaim that fails is logged: the request stays recorded,
    /// and that pass ends the job.
    async fn settle_if_dead(&self, id: &str, owner: Owner) -> Cancel {
        let liveness = &self.runner.config().liveness;
        let now = (OffsetDateTime::now_utc(), tokio::time::Instant::now());
        let reclaimed =
            crate::reaper::reclaim_cancelled(&*self.store, liveness, id, &self.sightings, now)
                .await;
        match reclaimed {
            Ok(Some((from, by))) => match self.store.job(id).await {
                Ok(Some(record)) => {
                    tracing::warn!(
                        "serve: job {id}: reclaimed from {} ({}), {}, on the cancel asked of \
                         it: {}",
                        from.name,
                        from.host,
                        by.describe(liveness),
                        record.reason.as_deref().unwrap_or_default()
                    );
                    self.completed(id).await;
                    // Its ticket has no running attempt any more.
                    self.wake.notify_one();
                    Cancel::Settled {
                        record,
                        owner: from,
                    }
                }
                Ok(None) => Cancel::NotFound,
                Err(e) => {
                    tracing::warn!("serve: job {id}: reclaimed, and cannot be read back: {e}");
                    self.completed(id).await;
                    Cancel::Requested(owner)
                }
            },
            Ok(None) => Cancel::Requested(owner),
            Err(e) => {
                tracing::warn!(
                    "serve: job {id}: cannot reclaim it from its dead host on the cancel asked \
                     of it (the reaper's pass will): {e}"
                );
                Cancel::Requested(owner)
            }
        }
    }

    /// Reclaims, every heartbeat interval until the drain begins, the
    /// running jobs of other hosts whose heartbeat is older than the TTL
    /// (`reaper::reclaim_others`), and reaps this host's jobs whose lease
    /// nobody holds (`reaper::reap_abandoned`: another server on this jobs
    /// directory, killed): a server killed while running jobs has
    /// them failed (or cancelled) by another server on the store without
    /// waiting for anyone's `paddock gc` or its restart, their final
    /// records sent to the webhooks; and sends, first and then every interval, the final
    /// records owed to the webhooks that no server is sending (their
    /// server died, or another process ended the job).
    pub async fn reclaim(self: Arc<Self>) {
        let liveness = self.runner.config().liveness.clone();
        while !self.is_draining() {
            // Final records owed whose server died, or whose job another
            // process ended (a `paddock gc`, the start-up pass).
            if let Some(webhooks) = &self.webhooks {
                webhooks.send_owed(None).await;
            }
            tokio::select! {
                () = tokio::time::sleep(liveness.interval) => {}
                () = self.draining.cancelled() => return,
            }
            // Not every claim: one read of the jobs passed over.
            self.prune_refused().await;
            // Busy: the passed-over jobs this server could run are marked
            // so, for the servers passing them over.
            self.mark_able().await;
            // Other hosts' heartbeats, aged on this process's monotonic
            // clock.
            let (mut reclaimed, errors) = crate::reaper::reclaim_others(
                &*self.store,
                &liveness,
                crate::reaper::Watch::Periodic(&self.sightings),
            )
            .await;
            for e in errors {
                tracing::warn!("serve: reclaim: {e}");
            }
            // This host's jobs whose process died (another server on this
            // jobs directory, killed): their lease is free.
            let paths = &self.runner.config().paths;
            reclaimed.extend(crate::reaper::reap_abandoned(paths, &*self.store, &liveness).await);
            for r in &reclaimed {
                let Some(from) = r.reclaimed_from.as_deref() else {
                    let ended = match (r.marked_failed, r.marked_cancelled) {
                        (true, _) => "; marked it failed",
                        (_, true) => "; marked it cancelled, as a cancel had been asked of it",
                        _ => "",
                    };
                    let again = r
                        .requeued_as
                        .as_ref()
                        .map(|next| format!("; queued again as job {next}"))
                        .unwrap_or_default();
                    tracing::warn!(
                        "serve: job {}: its paddock process on this jobs directory ended without \
                         ending it (killed or crashed): reaped it{ended}{again}",
                        r.name
                    );
                    for e in &r.errors {
                        tracing::warn!("serve: job {}: cannot clean up: {e}", r.name);
                    }
                    continue;
                };
                let again = r
                    .requeued_as
                    .as_ref()
                    .map(|next| format!("; queued again as job {next}"))
                    .unwrap_or_default();
                let cancelled = if r.marked_cancelled {
                    "; cancelled, as a cancel had been asked of it"
                } else {
                    ""
                };
                match r.errors.as_slice() {
                    // This pass reclaims only a heartbeat it saw unchanged
                    // for the TTL (`reaper::reclaim_others` with its
                    // sightings), whatever its date says.
                    [] => tracing::warn!(
                        "serve: job {}: reclaimed from {from} ({}){cancelled}{again}",
                        r.name,
                        crate::reaper::DeadBy::SeenUnchanged.describe(&liveness)
                    ),
                    errors => tracing::warn!(
                        "serve: job {}: reclaim from {from}: {}",
                        r.name,
                        errors.join("; ")
                    ),
                }
            }
            // Their final records go to the webhooks as any job's do: the
            // server that ran them is gone and sends nothing.
            for r in reclaimed.iter().filter(|r| r.errors.is_empty()) {
                if r.marked_failed || r.marked_cancelled {
                    self.completed(&r.name).await;
                }
            }
            if !reclaimed.is_empty() {
                // Their tickets have no running attempt any more.
                self.wake.notify_one();
            }
        }
    }

    /// Stops claiming; waits up to `grace` for running jobs, then cancels
    /// the rest and waits for them to conclude.
    pub async fn drain(&self, grace: Duration) {
        self.drain_or_sooner(grace, std::future::pending()).await;
    }

    /// [`drain`](Queue::drain), the grace cut short when `sooner`
    /// resolves first (a second Ctrl-C): the running jobs are cancelled
    /// then.
    pub async fn drain_or_sooner(
        &self,
        grace: Duration,
        sooner: impl std::future::Future<Output = ()>,
    ) {
        self.draining.cancel();
        tokio::select! {
            () = self.wait_idle(grace) => {}
            () = sooner => {}
        }
        self.slots.cancel_all();
        self.wait_idle(CANCEL_WAIT).await;
    }

    /// Waits (up to `limit`) until nothing runs here.
    async fn wait_idle(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        while !self.slots.is_idle() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[cfg(test)]
mod tests;

//! The store: jobs, their normalized events, the broker's ledger rows (model
//! calls) and host profiles, behind the [`Store`] trait of domain operations
//! (create a job, append an event, finish a job with a compare-and-set on its
//! status, record a call, read events after a seq, sum spend by scope, keep
//! profiles, API tokens). Every caller holds a `dyn Store` ([`SharedStore`] where it
//! keeps one), so a backend is one implementation: SQLite (`sqlite/`, the
//! default) and PostgreSQL (`postgres/`), chosen by [`StoreAt`]
//! (`location.rs`: a path or a `postgres://` URL) in [`open`]. What a backend must do is pinned by the
//! conformance suite (`conformance.rs`), which every backend runs. The
//! server's queue is here too: enqueue (a job `queued` with a priority),
//! claim (the next runnable queued job set `running` by compare-and-set)
//! and the filtered, paginated list of jobs.

mod cancel_notices;
#[cfg(test)]
pub(crate) mod conformance;
mod error;
pub mod event_pages;
#[cfg(test)]
pub(crate) mod fixtures;
mod follows;
mod location;
mod owner;
mod passed_over;
mod postgres;
pub(crate) mod retry;
mod sql;
mod sqlite;
mod webhook;

use std::sync::Arc;

use paddock_protocol::event::AgentEvent;
use paddock_protocol::job::{JobRecord, JobStatus};
use paddock_protocol::ledger::ModelCall;
use paddock_protocol::{EgressRecord, HostProfile};
use time::OffsetDateTime;

use crate::api_token::StoredToken;

pub(crate) use cancel_notices::ANY_JOB;
pub use error::StoreError;
pub use follows::Follows;
pub use location::{is_postgres_url, withdraw_env, PgUrl, StoreAt, PADDOCK_DB, PGPASSWORD};
pub use owner::{CancelRequest, ClaimStanding, NextAttempt, Owner, Reclaim, RunningJob};
pub use passed_over::PassedOver;
pub use postgres::PgStore;
pub use sql::usage::{UsageCalls, UsageJob};
pub use sqlite::checkpoint::{checkpoint, checkpoint_blocking};
pub use sqlite::SqliteStore;
pub use webhook::{WebhookAttempt, WebhookLease};

/// A store shared by the parts of a running job (runner, broker, followers).
pub type SharedStore = Arc<dyn Store>;

/// Opens the store `at` names for a command that writes: a SQLite file is
/// created (with its directory) when missing, a PostgreSQL database is
/// migrated (it must exist). The one place the CLI and the server choose a
/// backend.
pub async fn open(at: &StoreAt) -> Result<SharedStore, StoreError> {
    Ok(match at {
        StoreAt::File(path) => Arc::new(SqliteStore::open(path).await?),
        StoreAt::Postgres(url) => Arc::new(PgStore::open(url).await?),
    })
}

/// Opens the store `at` names for a command that only reads: nothing is
/// created or migrated; a missing file fails with `Missing`, a PostgreSQL
/// database without this Paddock's schema with `PgSchema`.
pub async fn open_existing(at: &StoreAt) -> Result<SharedStore, StoreError> {
    Ok(match at {
        StoreAt::File(path) => Arc::new(SqliteStore::open_existing(path).await?),
        StoreAt::Postgres(url) => Arc::new(PgStore::open_existing(url).await?),
    })
}

/// The domain operations on Paddock's records. Every method names what it
/// works on in its error (`StoreError`); none of them trusts the order in
/// which concurrent callers arrive: events are dense per job, and a job is
/// finished only from the status its finisher saw.
#[async_trait::async_trait]
pub trait Store: std::fmt::Debug + Send + Sync {
    /// Records a new job with its spec as submitted (any text; the caller's
    /// JSON). Fails with `JobExists` if the id is taken.
    async fn insert_job(&self, job: &JobRecord, spec_json: &str) -> Result<(), StoreError>;

    /// Overwrites every field of the stored job `job.id` (its spec is kept)
    /// if its stored status is still `from`: the compare-and-set that lets
    /// exactly one of the runner and the reaper finish a job. Fails with
    /// `StatusChanged` (naming what is stored) when another finisher came
    /// first, `NoSuchJob` when there is no such job.
    async fn finish_job(&self, job: &JobRecord, from: JobStatus) -> Result<(), StoreError>;

    /// The job `id`, if the store has it.
    async fn job(&self, id: &str) -> Result<Option<JobRecord>, StoreError>;

    /// The spec the job `id` was submitted with, as given to `insert_job`.
    async fn job_spec(&self, id: &str) -> Result<Option<String>, StoreError>;

    /// Keeps `text` as the closeout of the job `id` (replacing an earlier
    /// one: `paddock publish` renders it again). Fails with `NoSuchJob`.
    async fn set_closeout(&self, id: &str, text: &str) -> Result<(), StoreError>;

    /// The closeout of the job `id`; `None` when the job has none (yet) or
    /// does not exist.
    async fn closeout(&self, id: &str) -> Result<Option<String>, StoreError>;

    /// Keeps `session` as the engine's own session id of the job `id`
    /// (what a next attempt resumes). Fails with `NoSuchJob`.
    async fn set_engine_session(&self, id: &str, session: &str) -> Result<(), StoreError>;

    /// The engine's session id of the job `id`; `None` when its engine
    /// announced none or the job does not exist.
    async fn engine_session(&self, id: &str) -> Result<Option<String>, StoreError>;

    /// Up to `limit` jobs, newest (`created_at`) first; jobs created at the
    /// same instant come in descending id order.
    async fn jobs(&self, limit: u32) -> Result<Vec<JobRecord>, StoreError>;

    /// Records a new job `running` on `owner` (`owner.rs`), its heartbeat
    /// `at`: the insert a job's own process makes. Fails with `JobExists`
    /// if the id is taken.
    async fn insert_owned_job(
        &self,
        job: &JobRecord,
        spec_json: &str,
        owner: &Owner,
        at: OffsetDateTime,
    ) -> Result<(), StoreError>;

    /// Renews the heartbeat of job `id` to `at` if it is still `running`
    /// and owned by `host`; false when it is not (another host reclaimed
    /// it, or it ended): its process must stop it. Fails with `NoSuchJob`
    /// only when there is no such job.
    async fn heartbeat(&self, id: &str, host: &str, at: OffsetDateTime)
        -> Result<bool, StoreError>;

    /// Reclaims a dead host's running job, all in one transaction: every
    /// field of the stored job `reclaim.job.id` overwritten (as
    /// `finish_job`) if it is still `running`, owned by `reclaim.host`,
    /// with the heartbeat `reclaim.heartbeat` a reaper saw and a cancel
    /// request recorded exactly when `reclaim.cancel_asked` (the
    /// compare-and-set that lets exactly one reaper reclaim another host's
    /// dead job, never one its owner renewed meanwhile, and never misses a
    /// cancel recorded meanwhile); `reclaim.last`, the job's final event,
    /// appended with the next seq (at `job.finished_at`), so a reader who
    /// sees the record final finds that event stored, as after a job's own
    /// end; its `in_flight` calls settled `interrupted`; its totals summed
    /// from the ledger; and `reclaim.next`, its next attempt, queued. A
    /// reaper that dies in between leaves none of it, and the job for the
    /// next reaper. Whether it did (false: the compare-and-set did not
    /// hold, nothing written).
    async fn reclaim_job(&self, reclaim: &Reclaim<'_>) -> Result<bool, StoreError>;

    /// Every job still `running`, oldest first, with its owner and last
    /// heartbeat (the reaper's candidates: a job of this host without a
    /// live lease is dead, another host's when its heartbeat is stale).
    async fn running_jobs(&self) -> Result<Vec<RunningJob>, StoreError>;

    /// Records that host `by` (its name, for messages) asked at `at` to
    /// cancel job `id`, which another process runs, if it is `running` and
    /// has an owner (the first request's time and host are kept); its
    /// owner, which stops the job when it next looks
    /// (`cancel_requested`). `None` when the job is not running (queued,
    /// ended, unknown) or was recorded before owners were.
    async fn request_cancel(
        &self,
        id: &str,
        by: &str,
        at: OffsetDateTime,
    ) -> Result<Option<Owner>, StoreError>;

    /// Job ids a cancel was just asked of (`request_cancel`): those asked
    /// in this process, and, on PostgreSQL, those asked by any process on
    /// the database (`LISTEN`ing when this returns). A wake-up for a
    /// running job's owner to read `cancel_requested` at once; lossy (a
    /// missed one is found by the owner's poll).
    async fn cancel_notices(&self) -> tokio::sync::broadcast::Receiver<String>;

    /// Makes [`Store::cancel_notices`] announce, from the next
    /// subscription on, the cancels asked by other processes on the
    /// database too, where that costs the process something to set up and
    /// to end: on SQLite a watch of the database's cancel file
    /// (`sqlite/cancel_file.rs`), whose inotify instance takes the kernel
    /// 5–20 ms to release (an RCU grace period), paid at the process's
    /// exit. A long-lived process (`paddock serve`) asks for it; a
    /// `paddock run` does not (issue #14: that exit is on every job's
    /// path) and finds another process's cancel at its poll
    /// (`heartbeat::CANCEL_POLL`). PostgreSQL's `LISTEN` is always on:
    /// nothing to do.
    fn watch_other_processes(&self) {}

    /// The cancel asked of job `id` (`request_cancel`: the first
    /// request's time and asking host), if one was. Fails with `NoSuchJob`
    /// when there is no such job.
    async fn cancel_requested(&self, id: &str) -> Result<Option<CancelRequest>, StoreError>;

    /// The owner of job `id` (the host whose process ran it, or runs it):
    /// `None` when it has none (it never ran: queued, held, cancelled while
    /// queued; or it was recorded before jobs had owners) or there is no
    /// such job.
    async fn job_owner(&self, id: &str) -> Result<Option<Owner>, StoreError>;

    /// The status, owner and cancel request of job `id` (each as `job`,
    /// `job_owner` and `cancel_requested` give it) in one read: `None`
    /// when there is no such job.
    async fn claim_standing(&self, id: &str) -> Result<Option<ClaimStanding>, StoreError>;

    /// The owners of the `limit` newest jobs (as `jobs` lists them) that
    /// have one (every job recorded since jobs had owners that started
    /// running), by job id.
    async fn job_owners(&self, limit: u32) -> Result<Vec<(String, Owner)>, StoreError>;

    /// Records a new job waiting to run (`queued`, or `held` by the budget
    /// gate) with its spec and its queue priority (higher runs first).
    /// Fails with `JobExists` if the id is taken.
    async fn enqueue_job(
        &self,
        job: &JobRecord,
        spec_json: &str,
        priority: i64,
        follows: Option<&Follows>,
    ) -> Result<(), StoreError>;

    /// The prior job the job `id` was queued to follow (`enqueue_job`'s
    /// `follows`); `None` when it follows none or does not exist.
    async fn job_follows(&self, id: &str) -> Result<Option<Follows>, StoreError>;

    /// Claims the next job of the queue and returns it `running`: the
    /// highest priority, then the oldest (`created_at`, then id) `queued`
    /// job whose ticket (project and ticket id) has no `running` attempt.
    /// The claim is a compare-and-set on `queued`: concurrent claimers never
    /// get the same job. Only jobs in one of `lanes` are claimed (any job
    /// when `lanes` is empty). The claimed job is owned by `owner`, its
    /// heartbeat `at`, in the same statement. `None` when no queued job
    /// can run. Jobs whose ids are in `skip` (the claimer may not run
    /// them: `unclaim_job`) are passed over. The claim clears a queued
    /// job's reason (why a server passed it over). `owner`'s host and `at`
    /// are the claim's key (its `claimed_at`), so each claim gives its own
    /// `at`: a claim retried after its commit landed and its answer was
    /// lost returns the job that key claimed (`store/retry.rs`).
    async fn claim_job(
        &self,
        lanes: &[Lane],
        owner: &Owner,
        at: OffsetDateTime,
        skip: &[String],
    ) -> Result<Option<JobRecord>, StoreError>;

    /// Puts job `id`, claimed by host `host` and not started, back in the
    /// queue with `reason` (why that host may not run it), if it is still
    /// `running` on `host` and no cancel was asked of it: whether it did
    /// (also when a retry finds its earlier try's commit landed: the job
    /// queued again with that reason).
    async fn unclaim_job(&self, id: &str, host: &str, reason: &str) -> Result<bool, StoreError>;

    /// How many jobs are `queued`.
    async fn queue_depth(&self) -> Result<u64, StoreError>;

    /// Of jobs `ids`, those still `queued` (in no order), in one read
    /// however many: the ids are one parameter, a JSON array, as a claim's
    /// skip list is (a server forgets the jobs it passed over that left
    /// the queue, every heartbeat interval).
    async fn still_queued(&self, ids: &[String]) -> Result<Vec<String>, StoreError>;

    /// Records that job `id` was passed over at `at` (a server may not or
    /// cannot run it: `store/passed_over.rs`) unless an earlier pass was
    /// recorded, by any server: when it was first passed over and the
    /// last mark of a server able to run it (`mark_able`). `None` when
    /// there is no such job.
    async fn pass_over(
        &self,
        id: &str,
        at: OffsetDateTime,
    ) -> Result<Option<PassedOver>, StoreError>;

    /// Marks queued job `id` as one that server `owner` can run but has
    /// no free slot for, at `at` (the last mark kept): a server passing
    /// it over does not fail it for its wait while the mark is fresh.
    /// False when it is not queued.
    async fn mark_able(
        &self,
        id: &str,
        owner: &Owner,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError>;

    /// The `limit` oldest queued jobs some server passed over
    /// (`pass_over`) that `lanes` take (none: every job).
    async fn passed_over_queued(
        &self,
        lanes: &[Lane],
        limit: u32,
    ) -> Result<Vec<String>, StoreError>;

    /// How many jobs have each status, every status listed (zeros
    /// included), in `JobStatus` order.
    async fn job_counts(&self) -> Result<Vec<(JobStatus, u64)>, StoreError>;

    /// A page of the jobs matching `query`, newest (`created_at`, then id)
    /// first, starting after the job `query.after` (the previous page's
    /// last id; an unknown id gives an empty page).
    async fn list_jobs(&self, query: &JobQuery) -> Result<Vec<JobRecord>, StoreError>;

    /// The ids of the jobs whose id starts with `prefix` (taken literally),
    /// newest first, at most `limit` of them.
    async fn job_ids_with_prefix(
        &self,
        prefix: &str,
        limit: u32,
    ) -> Result<Vec<String>, StoreError>;

    /// Appends `event` to its job's stream. Its `seq` must be the job's last
    /// stored seq + 1 (1 for the first event): anything else fails with
    /// `EventSeq`, naming the job, the seq given and the last one stored;
    /// a seq that holds another event fails with `EventConflict`, naming
    /// both, and one that holds this very event (a retry whose first
    /// commit landed) counts as stored. A job the store does not have
    /// fails with `NoSuchJob`. Failures that pass are retried
    /// (`retry.rs`), as for the other writes of a running job.
    async fn append_event(&self, event: &AgentEvent) -> Result<(), StoreError>;

    /// Job `job_id`'s last stored seq: 0 when it has none (or there is no
    /// such job). What an append after a job's end numbers its event from.
    async fn last_event_seq(&self, job_id: &str) -> Result<u64, StoreError>;

    /// Every event of job `job_id` with `seq > after_seq`, in ascending seq
    /// order, in memory at once: for tests and benches only, whose
    /// histories are small. No reader of Paddock's uses it (a history may
    /// be gigabytes): they read [`Store::events_page`] a page at a time
    /// ([`event_pages`]), or [`Store::last_event_seq`].
    async fn events(&self, job_id: &str, after_seq: u64) -> Result<Vec<AgentEvent>, StoreError> {
        let mut all: Vec<AgentEvent> = Vec::new();
        loop {
            let after = all.last().map_or(after_seq, |e| e.seq);
            let page = self.events_page(job_id, after, u32::MAX).await?;
            if page.is_empty() {
                return Ok(all);
            }
            all.extend(page);
        }
    }

    /// The events of job `job_id` with `seq > after_seq`, in ascending seq
    /// order, at most `limit` of them and, past the first, no more than
    /// [`event_pages::PAGE_BYTES`] of their stored bodies (so a page may
    /// come back short before the end: the end is an empty page); empty
    /// for an unknown job. There is no read of a job's whole history: a
    /// job may have stored `limits.max_records` events of up to
    /// `limits.max_event_bytes` each, gigabytes, so whoever reads them (a
    /// stream, `paddock show`, the reaper, a closeout) reads a page at a
    /// time ([`event_pages`]).
    async fn events_page(
        &self,
        job_id: &str,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<AgentEvent>, StoreError>;

    /// Records one model call on the ledger. `(job_id, seq)` is unique; a
    /// job the store does not have fails with `NoSuchJob`.
    async fn insert_model_call(&self, call: &ModelCall) -> Result<(), StoreError>;

    /// Settles one model call: completes its in-flight row (written ahead
    /// by `insert_model_call` with status `in_flight`), or inserts it when
    /// it has none (a call refused before it was forwarded). A row already
    /// settled is left as it is (false). A job the store does not have
    /// fails with `NoSuchJob`.
    async fn settle_model_call(&self, call: &ModelCall) -> Result<bool, StoreError>;

    /// Settles the `in_flight` rows of job `job_id` as `interrupted` (their
    /// end was never recorded), keeping what they carry, their error `why`
    /// unless they have one; how many there were.
    async fn interrupt_model_calls(&self, job_id: &str, why: &str) -> Result<u64, StoreError>;

    /// The model calls of job `job_id`, by seq.
    async fn model_calls(&self, job_id: &str) -> Result<Vec<ModelCall>, StoreError>;

    /// Micro-dollars on the ledger in `scope`, by every job but `except_job`.
    async fn spent_micros(&self, scope: &SpendScope, except_job: &str) -> Result<i64, StoreError>;

    /// Appends attempt `seq` (1, 2, 3... per job) of job `job_id` through
    /// its egress proxy (docs/egress.md); an unknown job is refused. A
    /// seq holding this very attempt already (a retried write whose first
    /// commit landed) counts as written; one holding another fails with
    /// `EgressConflict`, naming the job's last seq.
    async fn record_egress(
        &self,
        job_id: &str,
        seq: u64,
        record: &EgressRecord,
    ) -> Result<(), StoreError>;

    /// The egress attempts of job `job_id`, by seq.
    async fn egress(&self, job_id: &str) -> Result<Vec<EgressRecord>, StoreError>;

    /// Saves `profile`, replacing a stored profile with the same id.
    async fn put_profile(&self, profile: &HostProfile) -> Result<(), StoreError>;

    /// The stored profile `id`, if any.
    async fn profile(&self, id: &str) -> Result<Option<HostProfile>, StoreError>;

    /// Removes the stored profile `id`; whether there was one.
    async fn remove_profile(&self, id: &str) -> Result<bool, StoreError>;

    /// Every stored profile, by id.
    async fn profiles(&self) -> Result<Vec<HostProfile>, StoreError>;

    /// Saves a new API token (its salted hash, never the token). Fails with
    /// `TokenExists` if the id is taken.
    async fn insert_api_token(&self, token: &StoredToken) -> Result<(), StoreError>;

    /// The API token `id`, revoked or not, if the store has it.
    async fn api_token(&self, id: &str) -> Result<Option<StoredToken>, StoreError>;

    /// Every API token, revoked ones too, oldest first (then by id).
    async fn api_tokens(&self) -> Result<Vec<StoredToken>, StoreError>;

    /// Revokes the API token `id` at `at`; one already revoked keeps its
    /// first revocation time. The token as stored afterwards, `None` if
    /// there is no such token.
    async fn revoke_api_token(
        &self,
        id: &str,
        at: OffsetDateTime,
    ) -> Result<Option<StoredToken>, StoreError>;

    /// Appends one delivery attempt of a completion webhook; an unknown
    /// job is refused (`NoSuchJob`).
    async fn record_webhook_attempt(&self, attempt: &WebhookAttempt) -> Result<(), StoreError>;

    /// The webhook delivery attempts of job `job_id`, in the order they
    /// were recorded.
    async fn webhook_attempts(&self, job_id: &str) -> Result<Vec<WebhookAttempt>, StoreError>;

    /// Records that job `job_id`'s final record is owed to the completion
    /// webhooks, since `at` (a row already there, settled or not, is kept
    /// as it is). Fails
    /// with `NoSuchJob` when there is no such job.
    async fn owe_webhook(&self, job_id: &str, at: OffsetDateTime) -> Result<(), StoreError>;

    /// Leases owed final records (`lease`): those whose job has ended (not
    /// `queued` or `running`) and whose row is not leased, or leased until
    /// before `lease.now`, oldest owed first; each is leased to `lease.by`
    /// until `lease.until` by a compare-and-set, so concurrent servers
    /// never lease the same row. The job ids leased.
    async fn lease_owed_webhooks(
        &self,
        lease: &WebhookLease<'_>,
    ) -> Result<Vec<String>, StoreError>;

    /// Extends the lease of job `job_id`'s owed record to `until` if `by`
    /// still holds it; false when it does not (it ran out and another
    /// server took it, or it was settled).
    async fn renew_webhook_lease(
        &self,
        job_id: &str,
        by: &str,
        until: OffsetDateTime,
    ) -> Result<bool, StoreError>;

    /// Job `job_id`'s final record is owed no more (every URL has had it,
    /// or every attempt): its row settled at `at` if `by` holds its lease,
    /// and never leased again (owing it again changes nothing); whether it
    /// did.
    async fn settle_owed_webhook(
        &self,
        job_id: &str,
        by: &str,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError>;

    /// The ledger a page at a time: at most `limit` model calls of every
    /// job in the order they were first recorded, after the row at
    /// `after` (a position this returned), each with its position.
    async fn ledger(
        &self,
        after: Option<i64>,
        limit: u32,
    ) -> Result<Vec<(i64, ModelCall)>, StoreError>;

    /// Every job and its calls per model and day (`paddock usage`).
    async fn usage(&self) -> Result<(Vec<UsageJob>, Vec<UsageCalls>), StoreError>;

    /// Closes the backend (flushing what it buffers). Other holders of this
    /// store fail afterwards.
    async fn close(&self);

    /// Waits, briefly, until the connections used a moment ago are back
    /// in the pool, for a process about to exit with its store left open
    /// (`cli::open_store`): a connection's return is a task of the
    /// runtime (sqlx), and one the runtime's shutdown dropped is closed.
    /// On SQLite that close, the last connection's, folded the
    /// write-ahead log in and deleted it, on the exit path, and left the
    /// next job to start a new log (`store/sqlite/checkpoint.rs`). A
    /// backend without such a cost does nothing.
    async fn settle(&self) {}
}

/// Which jobs a page of [`Store::list_jobs`] holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobQuery {
    /// Only jobs with this status.
    pub status: Option<JobStatus>,
    /// Only jobs of this engine (`codex`, `claude`).
    pub engine: Option<String>,
    /// Only jobs on this isolation rung (`process`, `sandbox`).
    pub isolation: Option<String>,
    /// The page starts after this job (the cursor: the last id of the
    /// previous page).
    pub after: Option<String>,
    /// At most this many jobs.
    pub limit: u32,
    /// Only jobs on this result branch (`paddock/<ticket>/<attempt>`):
    /// the earlier runs of a spec's attempt (`runner/ended_pull.rs`).
    pub branch: Option<String>,
}

/// A lane of a server: the queued jobs it takes (`[[serve.lanes]]`,
/// docs/serve.md). A job is in the lane when its ticket's task type
/// (`chore` when the spec names none) is one of `task_types` and its
/// project one of `projects`; an empty list takes any.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(deny_unknown_fields)]
pub struct Lane {
    #[serde(default)]
    pub task_types: Vec<String>,
    #[serde(default)]
    pub projects: Vec<String>,
}

/// The budgets that span jobs, as sums over the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpendScope {
    /// A ticket across all its attempts.
    Ticket { project: String, ticket_id: String },
    /// A project over the UTC day containing `at` (calls started from
    /// 00:00:00 UTC that day to the next).
    ProjectDay { project: String, at: OffsetDateTime },
}

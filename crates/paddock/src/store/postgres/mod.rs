//! The PostgreSQL backend of the [`Store`], chosen by a `postgres://` URL
//! (`--db`, `PADDOCK_DB`): the same tables and columns as SQLite's, in
//! PostgreSQL's dialect (`crates/paddock/migrations-postgres/`, every text
//! column `COLLATE "C"` so it sorts by bytes as SQLite does, timestamps the
//! same fixed-width RFC 3339 text). Rows are read and checked by the same
//! row types and codec as SQLite's (`sqlite/`); the queries live in one
//! file per table. Where SQLite's single writer made a statement safe,
//! PostgreSQL takes a lock: an event is appended under a row lock on its
//! job (dense `seq` under concurrent appenders, in any process), a claim
//! under a transaction-scoped advisory lock with `FOR UPDATE SKIP LOCKED`.
//! A command that writes migrates the schema at open (sqlx's migrator,
//! which takes PostgreSQL's advisory lock); a read-only one never does and
//! says when the schema is missing or not this Paddock's.

mod egress;
mod events;
mod jobs;
mod ledger;
mod nul_free;
mod profiles;
mod queue;
mod spend;
mod tokens;
mod usage;
mod webhooks;

use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgPool, PgPoolOptions};

use paddock_protocol::event::AgentEvent;
use paddock_protocol::job::{JobRecord, JobStatus};
use paddock_protocol::ledger::ModelCall;
use paddock_protocol::{EgressRecord, HostProfile};
use time::OffsetDateTime;

use super::location::PgUrl;
use super::retry;
use super::{
    CancelRequest, ClaimStanding, Follows, JobQuery, Lane, NextAttempt, Owner, Reclaim, RunningJob,
    SpendScope, Store, StoreError,
};
use super::{UsageCalls, UsageJob};

use crate::api_token::StoredToken;

/// The PostgreSQL schema, embedded from `crates/paddock/migrations-postgres/`.
static MIGRATOR: Migrator = sqlx::migrate!("./migrations-postgres");

/// Connections per process: the runner, the broker's ledger and the
/// followers of a job each hold one briefly.
const MAX_CONNECTIONS: u32 = 8;

/// How long a connection (or a free one from the pool) is waited for
/// before the step fails naming the server.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// A handle to the store in one PostgreSQL database. Cheap to clone (it
/// wraps a connection pool).
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    notices: std::sync::Arc<crate::store::cancel_notices::CancelNotices>,
}

impl PgStore {
    fn with(pool: PgPool) -> PgStore {
        PgStore {
            pool,
            notices: std::sync::Arc::new(crate::store::cancel_notices::CancelNotices::new()),
        }
    }

    /// Tells whoever runs job `id` that a cancel was asked of it: this
    /// process's subscribers, and every process on the database with
    /// `NOTIFY` (a failure is logged: the owner's poll finds the request).
    pub(super) async fn announce_cancel(&self, id: &str) {
        self.notices.announce(id);
        if let Err(e) = sqlx::query("SELECT pg_notify($1, $2)")
            .bind(crate::store::cancel_notices::CHANNEL)
            .bind(id)
            .execute(&self.pool)
            .await
        {
            tracing::warn!("job {id}: cannot announce its cancel on the database: {e}");
        }
    }

    /// Connects to the database `url` names and brings its schema up to
    /// date (migrations already applied are skipped; concurrent openers
    /// wait on the migrator's advisory lock). The database itself must
    /// exist. The schema's check and migration are retried when their
    /// connection fails for a reason that passes (`store/retry.rs`: a
    /// server restarting, a connection terminated), as a running job's
    /// writes are: each migration is one transaction with its record, so
    /// one cut short left nothing applied, and the retry's migrator skips
    /// what is. The first connection is not: a wrong address fails at
    /// once.
    pub async fn open(url: &PgUrl) -> Result<PgStore, StoreError> {
        let pool = connect(url).await?;
        retry::transient("migrate", |_| async {
            if schema_current(&pool).await {
                return Ok(());
            }
            MIGRATOR
                .run(&pool)
                .await
                .map_err(|source| StoreError::PgMigrate {
                    target: url.label().to_owned(),
                    source,
                })
        })
        .await?;
        Ok(PgStore::with(pool))
    }

    /// Connects for a command that only reads: nothing is created or
    /// migrated, and a database without this Paddock's schema fails with
    /// `PgSchema`. The schema's check is retried as [`PgStore::open`]'s
    /// is; the first connection is not.
    pub async fn open_existing(url: &PgUrl) -> Result<PgStore, StoreError> {
        let pool = connect(url).await?;
        // Retried as `open`'s check is: a server restarting or a
        // connection terminated passes.
        let problem = retry::transient("schema check", |_| async {
            schema_problem(&pool)
                .await
                .map_err(|source| StoreError::PgSchemaRead {
                    target: url.label().to_owned(),
                    source,
                })
        })
        .await;
        match problem {
            Ok(None) => Ok(PgStore::with(pool)),
            Ok(Some(problem)) => {
                pool.close().await;
                Err(StoreError::PgSchema {
                    target: url.label().to_owned(),
                    problem,
                })
            }
            Err(e) => {
                pool.close().await;
                Err(e)
            }
        }
    }
}

async fn connect(url: &PgUrl) -> Result<PgPool, StoreError> {
    let options = url.options()?;
    PgPoolOptions::new()
        .max_connections(MAX_CONNECTIONS)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_with(options)
        .await
        .map_err(|source| StoreError::PgConnect {
            target: url.label().to_owned(),
            source,
        })
}

/// The migrations applied to the database: version, checksum, success.
async fn applied(pool: &PgPool) -> Result<Vec<(i64, Vec<u8>, bool)>, sqlx::Error> {
    sqlx::query_as("SELECT version, checksum, success FROM _sqlx_migrations ORDER BY version")
        .fetch_all(pool)
        .await
}

/// True when the database holds exactly the embedded migrations (one
/// query instead of the migrator's lock, table creation and listing).
async fn schema_current(pool: &PgPool) -> bool {
    matches!(applied(pool).await, Ok(rows) if matches_embedded(&rows))
}

fn matches_embedded(applied: &[(i64, Vec<u8>, bool)]) -> bool {
    let mut wanted: Vec<(i64, &[u8])> = MIGRATOR
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
        .map(|m| (m.version, m.checksum.as_ref()))
        .collect();
    wanted.sort_by_key(|(v, _)| *v);
    applied.len() == wanted.len()
        && applied
            .iter()
            .zip(&wanted)
            .all(|((v, sum, ok), (want_v, want_sum))| {
                *ok && v == want_v && sum.as_slice() == *want_sum
            })
}

/// Why the database's schema is not this Paddock's, for a read-only
/// command; `None` when it is.
async fn schema_problem(pool: &PgPool) -> Result<Option<String>, sqlx::Error> {
    let table: Option<String> = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations')::text")
        .fetch_one(pool)
        .await?;
    if table.is_none() {
        return Ok(Some(
            "has no Paddock schema: nothing has run with this database".to_owned(),
        ));
    }
    let rows = applied(pool).await?;
    if matches_embedded(&rows) {
        return Ok(None);
    }
    let newest = rows.iter().map(|r| r.0).max().unwrap_or(0);
    let ours = MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
    Ok(Some(if newest > ours {
        format!(
            "has a newer schema (migration {newest}) than this Paddock's ({ours}); \
             upgrade Paddock"
        )
    } else {
        format!(
            "has an older or different schema (migration {newest}, this Paddock's \
             is {ours})"
        )
    }))
}

/// The queries live in one file per table, as SQLite's do; this is the
/// seam.
#[async_trait::async_trait]
impl Store for PgStore {
    async fn insert_job(&self, job: &JobRecord, spec_json: &str) -> Result<(), StoreError> {
        PgStore::insert_job_with_priority(self, &nul_free::record(job), spec_json, 0, None).await
    }

    async fn finish_job(&self, job: &JobRecord, from: JobStatus) -> Result<(), StoreError> {
        // Compared as stored: without NUL.
        let job = nul_free::record(job);
        retry::transient("finish_job", |attempt| {
            let job = &job;
            async move {
                match PgStore::finish_job(self, job, from).await {
                    // An earlier attempt's commit landed, its answer was lost.
                    Err(StoreError::StatusChanged { .. })
                        if attempt > 0 && retry::finished_already(self, job).await =>
                    {
                        Ok(())
                    }
                    done => done,
                }
            }
        })
        .await
    }

    async fn job(&self, id: &str) -> Result<Option<JobRecord>, StoreError> {
        retry::transient("job", |_| PgStore::job(self, id)).await
    }

    async fn job_spec(&self, id: &str) -> Result<Option<String>, StoreError> {
        PgStore::job_spec(self, id).await
    }

    async fn set_closeout(&self, id: &str, text: &str) -> Result<(), StoreError> {
        let text = nul_free::text(text);
        retry::transient("set_closeout", |_| {
            PgStore::set_one(
                self,
                id,
                "UPDATE jobs SET closeout = $1 WHERE id = $2",
                &text,
            )
        })
        .await
    }

    async fn closeout(&self, id: &str) -> Result<Option<String>, StoreError> {
        PgStore::get_one(self, id, "SELECT closeout FROM jobs WHERE id = $1").await
    }

    async fn set_engine_session(&self, id: &str, session: &str) -> Result<(), StoreError> {
        let session = nul_free::text(session);
        retry::transient("set_engine_session", |_| {
            PgStore::set_one(
                self,
                id,
                "UPDATE jobs SET engine_session = $1 WHERE id = $2",
                &session,
            )
        })
        .await
    }

    async fn engine_session(&self, id: &str) -> Result<Option<String>, StoreError> {
        PgStore::get_one(self, id, "SELECT engine_session FROM jobs WHERE id = $1").await
    }

    async fn jobs(&self, limit: u32) -> Result<Vec<JobRecord>, StoreError> {
        PgStore::jobs(self, limit).await
    }

    async fn insert_owned_job(
        &self,
        job: &JobRecord,
        spec_json: &str,
        owner: &Owner,
        at: OffsetDateTime,
    ) -> Result<(), StoreError> {
        // Compared as stored: without NUL.
        let job = nul_free::record(job);
        retry::transient("insert_owned_job", |attempt| {
            let job = &job;
            async move {
                match PgStore::insert_owned_job(self, job, spec_json, owner, at).await {
                    // An earlier attempt's commit landed, its answer was lost.
                    Err(StoreError::JobExists { .. })
                        if attempt > 0 && retry::finished_already(self, job).await =>
                    {
                        Ok(())
                    }
                    done => done,
                }
            }
        })
        .await
    }

    async fn heartbeat(
        &self,
        id: &str,
        host: &str,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        retry::transient("heartbeat", |_| PgStore::heartbeat(self, id, host, at)).await
    }

    async fn reclaim_job(&self, reclaim: &Reclaim<'_>) -> Result<bool, StoreError> {
        let job = nul_free::record(reclaim.job);
        let next_job = reclaim.next.map(|n| nul_free::record(n.job));
        let next = reclaim
            .next
            .zip(next_job.as_deref())
            .map(|(n, job)| NextAttempt { job, ..n });
        let reclaim = Reclaim {
            job: &job,
            next,
            ..*reclaim
        };
        retry::transient("reclaim_job", |attempt| {
            let reclaim = &reclaim;
            async move {
                match PgStore::reclaim_job(self, reclaim).await {
                    // An earlier attempt's commit landed, its answer was lost.
                    Ok(false)
                        if attempt > 0 && retry::reclaimed_already(self, reclaim.job).await =>
                    {
                        Ok(true)
                    }
                    done => done,
                }
            }
        })
        .await
    }

    async fn running_jobs(&self) -> Result<Vec<RunningJob>, StoreError> {
        PgStore::running_jobs(self).await
    }

    async fn request_cancel(
        &self,
        id: &str,
        by: &str,
        at: OffsetDateTime,
    ) -> Result<Option<Owner>, StoreError> {
        PgStore::request_cancel(self, id, by, at).await
    }

    async fn cancel_notices(&self) -> tokio::sync::broadcast::Receiver<String> {
        self.notices.subscribe_listening(&self.pool).await
    }

    async fn cancel_requested(&self, id: &str) -> Result<Option<CancelRequest>, StoreError> {
        retry::transient("cancel_requested", |_| PgStore::cancel_requested(self, id)).await
    }

    async fn job_owner(&self, id: &str) -> Result<Option<Owner>, StoreError> {
        PgStore::job_owner(self, id).await
    }

    async fn claim_standing(&self, id: &str) -> Result<Option<ClaimStanding>, StoreError> {
        retry::transient("claim_standing", |_| PgStore::claim_standing(self, id)).await
    }

    async fn job_owners(&self, limit: u32) -> Result<Vec<(String, Owner)>, StoreError> {
        PgStore::job_owners(self, limit).await
    }

    async fn enqueue_job(
        &self,
        job: &JobRecord,
        spec_json: &str,
        priority: i64,
        follows: Option<&Follows>,
    ) -> Result<(), StoreError> {
        PgStore::insert_job_with_priority(
            self,
            &nul_free::record(job),
            spec_json,
            priority,
            follows,
        )
        .await
    }

    async fn job_follows(&self, id: &str) -> Result<Option<Follows>, StoreError> {
        PgStore::job_follows(self, id).await
    }

    async fn claim_job(
        &self,
        lanes: &[Lane],
        owner: &Owner,
        at: OffsetDateTime,
        skip: &[String],
    ) -> Result<Option<JobRecord>, StoreError> {
        retry::transient("claim_job", |attempt| async move {
            // An earlier attempt's commit may have landed, its answer lost:
            // the job it claimed is this claim's (keyed on host and time).
            if attempt > 0 {
                if let Some(job) = PgStore::claimed_by(self, owner, at).await? {
                    return Ok(Some(job));
                }
            }
            PgStore::claim_job(self, lanes, owner, at, skip).await
        })
        .await
    }

    async fn unclaim_job(&self, id: &str, host: &str, reason: &str) -> Result<bool, StoreError> {
        let reason = nul_free::text(reason);
        retry::transient("unclaim_job", |attempt| {
            let reason = &reason;
            async move {
                match PgStore::unclaim_job(self, id, host, reason).await {
                    // An earlier attempt's commit landed, its answer was lost.
                    Ok(false)
                        if attempt > 0 && retry::unclaimed_already(self, id, reason).await =>
                    {
                        Ok(true)
                    }
                    done => done,
                }
            }
        })
        .await
    }

    async fn queue_depth(&self) -> Result<u64, StoreError> {
        PgStore::queue_depth(self).await
    }

    async fn still_queued(&self, ids: &[String]) -> Result<Vec<String>, StoreError> {
        retry::transient("still_queued", |_| PgStore::still_queued(self, ids)).await
    }

    async fn pass_over(
        &self,
        id: &str,
        at: OffsetDateTime,
    ) -> Result<Option<crate::store::PassedOver>, StoreError> {
        retry::transient("pass_over", |_| PgStore::pass_over(self, id, at)).await
    }

    async fn mark_able(
        &self,
        id: &str,
        owner: &Owner,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        retry::transient("mark_able", |_| PgStore::mark_able(self, id, owner, at)).await
    }

    async fn passed_over_queued(
        &self,
        lanes: &[Lane],
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        retry::transient("passed_over_queued", |_| {
            PgStore::passed_over_queued(self, lanes, limit)
        })
        .await
    }

    async fn job_counts(&self) -> Result<Vec<(JobStatus, u64)>, StoreError> {
        PgStore::job_counts(self).await
    }

    async fn list_jobs(&self, query: &JobQuery) -> Result<Vec<JobRecord>, StoreError> {
        PgStore::list_jobs(self, query).await
    }

    async fn job_ids_with_prefix(
        &self,
        prefix: &str,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        PgStore::job_ids_with_prefix(self, prefix, limit).await
    }

    async fn append_event(&self, event: &AgentEvent) -> Result<(), StoreError> {
        retry::transient("append_event", |_| PgStore::append_event(self, event)).await
    }

    async fn last_event_seq(&self, job_id: &str) -> Result<u64, StoreError> {
        retry::transient("last_event_seq", |_| PgStore::last_event_seq(self, job_id)).await
    }

    async fn events_page(
        &self,
        job_id: &str,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<AgentEvent>, StoreError> {
        retry::transient("events_page", |_| {
            PgStore::events_page(self, job_id, after_seq, limit)
        })
        .await
    }

    async fn insert_model_call(&self, call: &ModelCall) -> Result<(), StoreError> {
        let call = nul_free::record(call);
        retry::transient("insert_model_call", |_| {
            PgStore::insert_model_call(self, &call)
        })
        .await
    }

    async fn settle_model_call(&self, call: &ModelCall) -> Result<bool, StoreError> {
        let call = nul_free::record(call);
        retry::transient("settle_model_call", |_| {
            PgStore::settle_model_call(self, &call)
        })
        .await
    }

    async fn interrupt_model_calls(&self, job_id: &str, why: &str) -> Result<u64, StoreError> {
        let why = nul_free::text(why);
        retry::transient("interrupt_model_calls", |_| {
            PgStore::interrupt_model_calls(self, job_id, &why)
        })
        .await
    }

    async fn model_calls(&self, job_id: &str) -> Result<Vec<ModelCall>, StoreError> {
        retry::transient("model_calls", |_| PgStore::model_calls(self, job_id)).await
    }

    async fn spent_micros(&self, scope: &SpendScope, except_job: &str) -> Result<i64, StoreError> {
        PgStore::spent_micros(self, scope, except_job).await
    }

    async fn record_egress(
        &self,
        job_id: &str,
        seq: u64,
        record: &EgressRecord,
    ) -> Result<(), StoreError> {
        let record = nul_free::record(record);
        retry::transient("record_egress", |_| {
            PgStore::record_egress(self, job_id, seq, &record)
        })
        .await
    }

    async fn egress(&self, job_id: &str) -> Result<Vec<EgressRecord>, StoreError> {
        PgStore::egress(self, job_id).await
    }

    async fn put_profile(&self, profile: &HostProfile) -> Result<(), StoreError> {
        PgStore::put_profile(self, profile).await
    }

    async fn profile(&self, id: &str) -> Result<Option<HostProfile>, StoreError> {
        PgStore::profile(self, id).await
    }

    async fn remove_profile(&self, id: &str) -> Result<bool, StoreError> {
        PgStore::remove_profile(self, id).await
    }

    async fn profiles(&self) -> Result<Vec<HostProfile>, StoreError> {
        PgStore::profiles(self).await
    }

    async fn insert_api_token(&self, token: &StoredToken) -> Result<(), StoreError> {
        PgStore::insert_api_token(self, token).await
    }

    async fn api_token(&self, id: &str) -> Result<Option<StoredToken>, StoreError> {
        PgStore::api_token(self, id).await
    }

    async fn api_tokens(&self) -> Result<Vec<StoredToken>, StoreError> {
        PgStore::api_tokens(self).await
    }

    async fn revoke_api_token(
        &self,
        id: &str,
        at: OffsetDateTime,
    ) -> Result<Option<StoredToken>, StoreError> {
        PgStore::revoke_api_token(self, id, at).await
    }

    async fn record_webhook_attempt(
        &self,
        attempt: &crate::store::WebhookAttempt,
    ) -> Result<(), StoreError> {
        let attempt = crate::store::WebhookAttempt {
            url: nul_free::text(&attempt.url).into_owned(),
            error: attempt
                .error
                .as_deref()
                .map(|e| nul_free::text(e).into_owned()),
            ..attempt.clone()
        };
        PgStore::record_webhook_attempt(self, &attempt).await
    }

    async fn webhook_attempts(
        &self,
        job_id: &str,
    ) -> Result<Vec<crate::store::WebhookAttempt>, StoreError> {
        PgStore::webhook_attempts(self, job_id).await
    }

    async fn owe_webhook(&self, job_id: &str, at: OffsetDateTime) -> Result<(), StoreError> {
        retry::transient("owe_webhook", |_| PgStore::owe_webhook(self, job_id, at)).await
    }

    async fn lease_owed_webhooks(
        &self,
        lease: &crate::store::WebhookLease<'_>,
    ) -> Result<Vec<String>, StoreError> {
        PgStore::lease_owed_webhooks(self, lease).await
    }

    async fn renew_webhook_lease(
        &self,
        job_id: &str,
        by: &str,
        until: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        PgStore::renew_webhook_lease(self, job_id, by, until).await
    }

    async fn settle_owed_webhook(
        &self,
        job_id: &str,
        by: &str,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        PgStore::settle_owed_webhook(self, job_id, by, at).await
    }

    async fn ledger(
        &self,
        after: Option<i64>,
        limit: u32,
    ) -> Result<Vec<(i64, ModelCall)>, StoreError> {
        PgStore::ledger(self, after, limit).await
    }

    async fn usage(&self) -> Result<(Vec<UsageJob>, Vec<UsageCalls>), StoreError> {
        PgStore::usage(self).await
    }

    /// Closes every connection. Other clones of this `PgStore` fail
    /// afterwards.
    async fn close(&self) {
        self.notices.stop().await;
        self.pool.close().await;
    }
}

#[cfg(test)]
mod tests;

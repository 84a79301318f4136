//! The server's queue on PostgreSQL. A claim is one transaction: a
//! transaction-scoped advisory lock first (claims from every server on the
//! database take turns, so two never both see a ticket without a running
//! attempt and start two), then the same `UPDATE` as SQLite's (which
//! records the claimer as the job's owner, with its heartbeat), its
//! candidate row taken `FOR UPDATE SKIP LOCKED` (a queued row another
//! transaction holds is passed over, not waited for). The list and counts
//! are SQLite's statements.

use paddock_protocol::job::{JobRecord, JobStatus};
use time::OffsetDateTime;

use super::{PgStore, StoreError};
use crate::store::sqlite::codec::RowRef;
use crate::store::sqlite::jobs::{JobRow, SELECT};
use crate::store::sqlite::queue::{claim_sql, every_status, skipped_json, still_queued_sql};
use crate::store::{JobQuery, Lane, Owner};

/// The advisory lock key the claims share (`paddock` in ASCII).
const CLAIM_LOCK: i64 = 0x0070_6164_646f_636b;

/// The ids of a claim's JSON array parameter (`claim_sql`).
const SKIPPED: &str = "SELECT jsonb_array_elements_text({}::jsonb)";

/// A queued row's task type: its spec's `ticket.type`, `chore` when absent.
const TASK_TYPE: &str = "COALESCE(q.spec_json::jsonb #>> '{ticket,type}', 'chore')";

impl PgStore {
    /// The next queued job, now `running`; `None` when nothing can run.
    pub(super) async fn claim_job(
        &self,
        lanes: &[Lane],
        owner: &Owner,
        at: OffsetDateTime,
        skip: &[String],
    ) -> Result<Option<JobRecord>, StoreError> {
        let sql = claim_sql(
            lanes,
            !skip.is_empty(),
            TASK_TYPE,
            SKIPPED,
            " FOR UPDATE SKIP LOCKED",
        );
        let heartbeat = RowRef::new("jobs", "claimed".to_owned()).time("heartbeat_at", at)?;
        let claim_error = |source| StoreError::ClaimJob { source };
        let mut tx = self.pool.begin().await.map_err(claim_error)?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(CLAIM_LOCK)
            .execute(&mut *tx)
            .await
            .map_err(claim_error)?;
        let mut query = sqlx::query_scalar::<_, String>(&sql)
            .bind(owner.host.as_str())
            .bind(owner.name.as_str())
            .bind(heartbeat);
        for lane in lanes {
            for value in lane.task_types.iter().chain(&lane.projects) {
                query = query.bind(value);
            }
        }
        if !skip.is_empty() {
            query = query.bind(skipped_json(skip)?);
        }
        let claimed = query.fetch_optional(&mut *tx).await.map_err(claim_error)?;
        tx.commit().await.map_err(claim_error)?;
        match claimed {
            Some(id) => self.job(&id).await,
            None => Ok(None),
        }
    }

    /// Of jobs `ids`, those still `queued` (`Store::still_queued`).
    pub(super) async fn still_queued(&self, ids: &[String]) -> Result<Vec<String>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        sqlx::query_scalar::<_, String>(&still_queued_sql(SKIPPED))
            .bind(skipped_json(ids)?)
            .fetch_all(&self.pool)
            .await
            .map_err(|source| StoreError::ListJobs { source })
    }

    /// The `limit` oldest queued jobs some server passed over that `lanes`
    /// take (`Store::passed_over_queued`).
    pub(super) async fn passed_over_queued(
        &self,
        lanes: &[Lane],
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        let sql = crate::store::passed_over::passed_over_queued_sql(lanes, TASK_TYPE);
        let mut query = sqlx::query_scalar::<_, String>(&sql).bind(i64::from(limit));
        for lane in lanes {
            for value in lane.task_types.iter().chain(&lane.projects) {
                query = query.bind(value);
            }
        }
        query
            .fetch_all(&self.pool)
            .await
            .map_err(|source| StoreError::ListJobs { source })
    }

    pub(super) async fn queue_depth(&self) -> Result<u64, StoreError> {
        let n = sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM jobs WHERE status = 'queued'")
            .fetch_one(&self.pool)
            .await
            .map_err(|source| StoreError::ListJobs { source })?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    pub(super) async fn job_counts(&self) -> Result<Vec<(JobStatus, u64)>, StoreError> {
        let rows =
            sqlx::query_as::<_, (String, i64)>("SELECT status, COUNT(*) FROM jobs GROUP BY status")
                .fetch_all(&self.pool)
                .await
                .map_err(|source| StoreError::ListJobs { source })?;
        Ok(every_status(&rows))
    }

    pub(super) async fn list_jobs(&self, query: &JobQuery) -> Result<Vec<JobRecord>, StoreError> {
        let sql = format!(
            "{} WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR engine = $2) \
             AND ($3::text IS NULL OR (created_at, id) < \
                  (SELECT created_at, id FROM jobs WHERE id = $3)) \
             AND ($5::text IS NULL OR branch = $5) \
             AND ($6::text IS NULL OR isolation = $6) \
             ORDER BY created_at DESC, id DESC LIMIT $4",
            SELECT.as_str()
        );
        sqlx::query_as::<_, JobRow>(&sql)
            .bind(query.status.map(|s: JobStatus| s.as_str()))
            .bind(query.engine.as_deref())
            .bind(query.after.as_deref())
            .bind(i64::from(query.limit))
            .bind(query.branch.as_deref())
            .bind(query.isolation.as_deref())
            .fetch_all(&self.pool)
            .await
            .map_err(|source| StoreError::ListJobs { source })?
            .into_iter()
            .map(JobRow::into_record)
            .collect()
    }
}

//! The server's queue over the `jobs` table: a submitted job is a row
//! `queued` (or `held`) with a `priority`; the claim is one `UPDATE` that
//! picks the highest priority, then the oldest, queued job whose ticket has
//! no `running` attempt and sets it `running` only if it is still `queued`
//! (a compare-and-set, so two servers on one database never claim the same
//! job), recording the claimer as its owner with its first heartbeat in
//! the same statement (`store/owner.rs`); the list is a page of jobs by filter, newest first, after a cursor.

use paddock_protocol::job::{JobRecord, JobStatus};
use time::OffsetDateTime;

use super::codec::RowRef;
use super::jobs::{JobRow, SELECT};
use super::{SqliteStore, StoreError};
use crate::store::Owner;
use crate::store::{JobQuery, Lane};

impl SqliteStore {
    /// Stores `job` (`queued`, or `held` by the budget gate) with its spec,
    /// priority and the prior job it follows.
    pub(super) async fn enqueue_job(
        &self,
        job: &JobRecord,
        spec_json: &str,
        priority: i64,
        follows: Option<&crate::store::Follows>,
    ) -> Result<(), StoreError> {
        self.insert_job_with_priority(job, spec_json, priority, follows)
            .await
    }

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
            SQLITE_TASK_TYPE,
            SQLITE_SKIPPED,
            "",
        );
        let heartbeat = RowRef::new("jobs", "claimed".to_owned()).time("heartbeat_at", at)?;
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
        let claimed = query
            .fetch_optional(&self.pool)
            .await
            .map_err(|source| StoreError::ClaimJob { source })?;
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
        sqlx::query_scalar::<_, String>(&still_queued_sql(SQLITE_SKIPPED))
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
        let sql = crate::store::passed_over::passed_over_queued_sql(lanes, SQLITE_TASK_TYPE);
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

    /// How many jobs are `queued`.
    pub(super) async fn queue_depth(&self) -> Result<u64, StoreError> {
        let n = sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM jobs WHERE status = 'queued'")
            .fetch_one(&self.pool)
            .await
            .map_err(|source| StoreError::ListJobs { source })?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// How many jobs have each status, zeros included.
    pub(super) async fn job_counts(&self) -> Result<Vec<(JobStatus, u64)>, StoreError> {
        let rows =
            sqlx::query_as::<_, (String, i64)>("SELECT status, COUNT(*) FROM jobs GROUP BY status")
                .fetch_all(&self.pool)
                .await
                .map_err(|source| StoreError::ListJobs { source })?;
        Ok(every_status(&rows))
    }

    /// A page of jobs matching `query`, newest first.
    pub(super) async fn list_jobs(&self, query: &JobQuery) -> Result<Vec<JobRecord>, StoreError> {
        let sql = format!(
            "{} WHERE ($1 IS NULL OR status = $1) AND ($2 IS NULL OR engine = $2) \
             AND ($3 IS NULL OR (created_at, id) < \
                  (SELECT created_at, id FROM jobs WHERE id = $3)) \
             AND ($5 IS NULL OR branch = $5) \
             AND ($6 IS NULL OR isolation = $6) \
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

/// The claim's `UPDATE` (module text): the owner's host, name and
/// heartbeat (also the claim's time, `claimed_at`) are `$1`-`$3`, each
/// lane's lists the parameters after them, then, when it `skip`s any, the
/// ids passed over as one parameter, a JSON array (`skipped_json`) that
/// `skipped` (the backend's query of the ids in it, `{}` the parameter)
/// reads: one parameter each would fail the claim past the backend's
/// most (SQLite's 32766, PostgreSQL's 65535), and a server passes over
/// every job its host cannot run, as many as are submitted;
/// `task_type` the backend's expression of a queued row's task type and
/// `lock` what follows the candidate's `LIMIT 1` (PostgreSQL's
/// `FOR UPDATE SKIP LOCKED`).
pub(in crate::store) fn claim_sql(
    lanes: &[Lane],
    skip: bool,
    task_type: &str,
    skipped: &str,
    lock: &str,
) -> String {
    let mut n = 3;
    let mut param = || {
        n += 1;
        format!("${n}")
    };
    let filter = lanes_filter(lanes, task_type, &mut param);
    let skip = if skip {
        format!(" AND q.id NOT IN ({})", skipped.replace("{}", &param()))
    } else {
        String::new()
    };
    format!(
        "UPDATE jobs SET status = 'running', owner_host = $1, owner_name = $2, \
           heartbeat_at = $3, claimed_at = $3, reason = NULL WHERE status = 'queued' AND id = ( \
           SELECT q.id FROM jobs q WHERE q.status = 'queued' AND NOT EXISTS ( \
             SELECT 1 FROM jobs r WHERE r.status = 'running' \
               AND r.project = q.project AND r.ticket_id = q.ticket_id){filter}{skip} \
           ORDER BY q.priority DESC, q.created_at, q.id LIMIT 1{lock}) \
         RETURNING id"
    )
}

/// The ids of the JSON array `$1` that are `queued` jobs' (`skipped` the
/// backend's query of the ids in it, as `claim_sql`'s).
pub(in crate::store) fn still_queued_sql(skipped: &str) -> String {
    format!(
        "SELECT id FROM jobs WHERE status = 'queued' AND id IN ({})",
        skipped.replace("{}", "$1")
    )
}

/// Every status with its count from `(status, count)` rows, zeros
/// included, in `JobStatus` order.
pub(in crate::store) fn every_status(rows: &[(String, i64)]) -> Vec<(JobStatus, u64)> {
    JobStatus::ALL
        .iter()
        .map(|&status| {
            let n = rows
                .iter()
                .find(|(s, _)| s == status.as_str())
                .map_or(0, |(_, n)| u64::try_from(*n).unwrap_or(0));
            (status, n)
        })
        .collect()
}

/// SQLite's query of the ids of a JSON array parameter (`claim_sql`).
const SQLITE_SKIPPED: &str = "SELECT value FROM json_each({})";

/// The ids a claim passes over as the JSON array its one parameter is
/// (`claim_sql`).
pub(in crate::store) fn skipped_json(skip: &[String]) -> Result<String, StoreError> {
    serde_json::to_string(skip).map_err(|source| StoreError::SkipList { source })
}

/// How a backend's SQL names a queued row's task type (its ticket's
/// `type` in the spec, `chore` when absent).
pub(in crate::store) const SQLITE_TASK_TYPE: &str =
    "COALESCE(json_extract(q.spec_json, '$.ticket.type'), 'chore')";

/// ` AND (lane OR lane …)` over the queued row `q`, each lane's lists as
/// parameters (`param` spells the next one) in order (task types, then
/// projects), `task_type` the backend's expression of the row's task type;
/// nothing for no lanes.
pub(in crate::store) fn lanes_filter(
    lanes: &[Lane],
    task_type: &str,
    param: &mut dyn FnMut() -> String,
) -> String {
    if lanes.is_empty() {
        return String::new();
    }
    let mut list = |n: usize| (0..n).map(|_| param()).collect::<Vec<_>>().join(", ");
    let each: Vec<String> = lanes
        .iter()
        .map(|lane| {
            let mut parts = vec![String::from("1 = 1")];
            if !lane.task_types.is_empty() {
                parts.push(format!("{task_type} IN ({})", list(lane.task_types.len())));
            }
            if !lane.projects.is_empty() {
                parts.push(format!("q.project IN ({})", list(lane.projects.len())));
            }
            format!("({})", parts.join(" AND "))
        })
        .collect();
    format!(" AND ({})", each.join(" OR "))
}

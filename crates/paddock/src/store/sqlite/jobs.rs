//! The `jobs` table: one row per job, holding its `JobRecord` (the five token
//! counts as columns, `changed_files` as a JSON array) and the job's spec as
//! submitted (`spec_json`, written once at insert).

use std::sync::LazyLock;

use paddock_protocol::job::{JobRecord, JobStatus};
use sqlx::sqlite::{Sqlite, SqliteArguments};

use super::codec::RowRef;
use super::{is_unique_violation, SqliteStore, StoreError};

/// The columns of a `JobRecord` after `id`, in bind order (`$2`...).
pub(in crate::store) const COLUMNS: [&str; 24] = [
    "ticket_id",
    "project",
    "attempt",
    "engine",
    "model",
    "isolation",
    "status",
    "reason",
    "branch",
    "base_ref",
    "patch_path",
    "changed_files",
    "input_tokens",
    "cached_input_tokens",
    "cache_write_tokens",
    "output_tokens",
    "reasoning_tokens",
    "model_calls",
    "cost_micros",
    "engine_exit_code",
    "created_at",
    "finished_at",
    "duration_ms",
    "disposed_at",
];

/// `INSERT` of `id`, the `COLUMNS`, `spec_json`, `priority`,
/// `follows_job`, `follows_ended` and `follows_closed` (`store/follows.rs`).
pub(in crate::store) static INSERT: LazyLock<String> = LazyLock::new(|| {
    let last = COLUMNS.len() + 6;
    let placeholders: Vec<String> = (1..=last).map(|n| format!("${n}")).collect();
    format!(
        "INSERT INTO jobs (id, {}, spec_json, priority, follows_job, follows_ended, follows_closed) \
         VALUES ({})",
        COLUMNS.join(", "),
        placeholders.join(", ")
    )
});

/// `UPDATE` of the `COLUMNS` of the job `$1`.
pub(in crate::store) static UPDATE: LazyLock<String> = LazyLock::new(|| {
    let sets: Vec<String> = COLUMNS
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{c} = ${}", i + 2))
        .collect();
    format!("UPDATE jobs SET {} WHERE id = $1", sets.join(", "))
});

/// `SELECT` list matching `JobRow`.
pub(in crate::store) static SELECT: LazyLock<String> =
    LazyLock::new(|| format!("SELECT id, {} FROM jobs", COLUMNS.join(", ")));

/// A `jobs` row as stored.
#[derive(sqlx::FromRow)]
pub(in crate::store) struct JobRow {
    id: String,
    ticket_id: String,
    project: String,
    attempt: i64,
    engine: String,
    model: String,
    isolation: String,
    status: String,
    reason: Option<String>,
    branch: String,
    base_ref: String,
    patch_path: Option<String>,
    changed_files: String,
    input_tokens: i64,
    cached_input_tokens: i64,
    cache_write_tokens: i64,
    output_tokens: i64,
    reasoning_tokens: i64,
    model_calls: i64,
    cost_micros: i64,
    engine_exit_code: Option<i64>,
    created_at: String,
    finished_at: Option<String>,
    duration_ms: Option<i64>,
    disposed_at: Option<String>,
}

impl JobRow {
    pub(in crate::store) fn into_record(self) -> Result<JobRecord, StoreError> {
        let row = RowRef::new("jobs", format!("job {}", self.id));
        let status = JobStatus::parse(&self.status).ok_or_else(|| {
            row.decode_error("status", format!("unknown job status {:?}", self.status))
        })?;
        Ok(JobRecord {
            ticket_id: self.ticket_id,
            project: self.project,
            attempt: row.narrow("attempt", self.attempt)?,
            engine: self.engine,
            model: self.model,
            isolation: self.isolation,
            status,
            reason: self.reason,
            branch: self.branch,
            base_ref: self.base_ref,
            patch_path: self.patch_path,
            changed_files: row.parse_json("changed_files", &self.changed_files)?,
            tokens: paddock_protocol::event::TokenUsage {
                input_tokens: row.narrow("input_tokens", self.input_tokens)?,
                cached_input_tokens: row.narrow("cached_input_tokens", self.cached_input_tokens)?,
                cache_write_tokens: row.narrow("cache_write_tokens", self.cache_write_tokens)?,
                output_tokens: row.narrow("output_tokens", self.output_tokens)?,
                reasoning_tokens: row.narrow("reasoning_tokens", self.reasoning_tokens)?,
            },
            model_calls: row.narrow("model_calls", self.model_calls)?,
            cost_micros: self.cost_micros,
            engine_exit_code: row.opt_narrow("engine_exit_code", self.engine_exit_code)?,
            created_at: row.parse_time("created_at", &self.created_at)?,
            finished_at: row.opt_parse_time("finished_at", self.finished_at.as_deref())?,
            duration_ms: row.opt_narrow("duration_ms", self.duration_ms)?,
            disposed_at: row.opt_parse_time("disposed_at", self.disposed_at.as_deref())?,
            id: self.id,
        })
    }
}

type Query<'q> = sqlx::query::Query<'q, Sqlite, SqliteArguments<'q>>;

/// Binds `id` then the `COLUMNS` of `job`, in order.
fn bind_job<'q>(query: Query<'q>, job: &'q JobRecord) -> Result<Query<'q>, StoreError> {
    let row = RowRef::new("jobs", format!("job {}", job.id));
    Ok(query
        .bind(job.id.as_str())
        .bind(job.ticket_id.as_str())
        .bind(job.project.as_str())
        .bind(i64::from(job.attempt))
        .bind(job.engine.as_str())
        .bind(job.model.as_str())
        .bind(job.isolation.as_str())
        .bind(job.status.as_str())
        .bind(job.reason.as_deref())
        .bind(job.branch.as_str())
        .bind(job.base_ref.as_str())
        .bind(job.patch_path.as_deref())
        .bind(row.json("changed_files", &job.changed_files)?)
        .bind(row.int("input_tokens", job.tokens.input_tokens)?)
        .bind(row.int("cached_input_tokens", job.tokens.cached_input_tokens)?)
        .bind(row.int("cache_write_tokens", job.tokens.cache_write_tokens)?)
        .bind(row.int("output_tokens", job.tokens.output_tokens)?)
        .bind(row.int("reasoning_tokens", job.tokens.reasoning_tokens)?)
        .bind(row.int("model_calls", job.model_calls)?)
        .bind(job.cost_micros)
        .bind(job.engine_exit_code.map(i64::from))
        .bind(row.time("created_at", job.created_at)?)
        .bind(row.opt_time("finished_at", job.finished_at)?)
        .bind(row.opt_int("duration_ms", job.duration_ms)?)
        .bind(row.opt_time("disposed_at", job.disposed_at)?))
}

/// Why inserting job `job_id` failed: its id taken, or the store's error.
pub(in crate::store) fn insert_error(job_id: &str, source: sqlx::Error) -> StoreError {
    if is_unique_violation(&source) {
        StoreError::JobExists {
            job_id: job_id.to_owned(),
        }
    } else {
        StoreError::InsertJob {
            job_id: job_id.to_owned(),
            source,
        }
    }
}

/// A `LIKE` pattern (backslash as its escape) matching what starts with `prefix`, taken
/// literally (its `%`, `_` and backslashes escaped).
pub(in crate::store) fn like_prefix(prefix: &str) -> String {
    let mut pattern: String = prefix
        .chars()
        .flat_map(|c| match c {
            '%' | '_' | '\\' => vec!['\\', c],
            c => vec![c],
        })
        .collect();
    pattern.push('%');
    pattern
}

crate::store::sql::jobs::jobs_queries!(SqliteStore);

impl SqliteStore {
    /// Records a new job with its spec as submitted (any text; the caller's
    /// JSON). Fails with `JobExists` if the id is taken.
    pub(super) async fn insert_job(
        &self,
        job: &JobRecord,
        spec_json: &str,
    ) -> Result<(), StoreError> {
        self.insert_job_with_priority(job, spec_json, 0, None).await
    }

    /// Overwrites every field of the stored job `job.id` (its spec is kept)
    /// if its stored status is `from` (see `Store::finish_job`).
    pub(super) async fn finish_job(
        &self,
        job: &JobRecord,
        from: JobStatus,
    ) -> Result<(), StoreError> {
        let update_error = |source| StoreError::UpdateJob {
            job_id: job.id.clone(),
            source,
        };
        let from_param = COLUMNS.len() + 2;
        let sql = format!("{} AND status = ${from_param}", UPDATE.as_str());
        let done = bind_job(sqlx::query(&sql), job)?
            .bind(from.as_str())
            .execute(&self.pool)
            .await
            .map_err(update_error)?;
        if done.rows_affected() == 1 {
            return Ok(());
        }
        // Refused: say whether the job is missing or finished by another.
        let stored = sqlx::query_scalar::<_, String>("SELECT status FROM jobs WHERE id = $1")
            .bind(job.id.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(update_error)?;
        match stored {
            None => Err(StoreError::NoSuchJob {
                job_id: job.id.clone(),
            }),
            Some(found) => Err(StoreError::StatusChanged {
                job_id: job.id.clone(),
                expected: from.as_str(),
                found,
            }),
        }
    }

    /// The job `id`, if the store has it.
    pub(super) async fn job(&self, id: &str) -> Result<Option<JobRecord>, StoreError> {
        let sql = format!("{} WHERE id = $1", SELECT.as_str());
        sqlx::query_as::<_, JobRow>(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(|source| StoreError::ReadJob {
                job_id: id.to_owned(),
                source,
            })?
            .map(JobRow::into_record)
            .transpose()
    }

    /// The spec the job `id` was submitted with, as given to `insert_job`.
    pub(super) async fn job_spec(&self, id: &str) -> Result<Option<String>, StoreError> {
        sqlx::query_scalar::<_, String>("SELECT spec_json FROM jobs WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(|source| StoreError::ReadJob {
                job_id: id.to_owned(),
                source,
            })
    }

    /// Keeps `text` as the job's closeout.
    pub(super) async fn set_closeout(&self, id: &str, text: &str) -> Result<(), StoreError> {
        self.set_one(id, "UPDATE jobs SET closeout = $1 WHERE id = $2", text)
            .await
    }

    /// Keeps `session` as the job's engine session id.
    pub(super) async fn set_engine_session(
        &self,
        id: &str,
        session: &str,
    ) -> Result<(), StoreError> {
        self.set_one(
            id,
            "UPDATE jobs SET engine_session = $1 WHERE id = $2",
            session,
        )
        .await
    }

    /// Runs `update` (one text column of job `id`, `$1` the value, `$2`
    /// the id); a job that does not exist is an error.
    async fn set_one(&self, id: &str, update: &'static str, value: &str) -> Result<(), StoreError> {
        let done = sqlx::query(update)
            .bind(value)
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(|source| StoreError::UpdateJob {
                job_id: id.to_owned(),
                source,
            })?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NoSuchJob {
                job_id: id.to_owned(),
            });
        }
        Ok(())
    }

    /// The job's engine session id, if it has one.
    pub(super) async fn engine_session(&self, id: &str) -> Result<Option<String>, StoreError> {
        sqlx::query_scalar::<_, Option<String>>("SELECT engine_session FROM jobs WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map(Option::flatten)
            .map_err(|source| StoreError::ReadJob {
                job_id: id.to_owned(),
                source,
            })
    }

    /// The job's closeout, if it has one.
    pub(super) async fn closeout(&self, id: &str) -> Result<Option<String>, StoreError> {
        sqlx::query_scalar::<_, Option<String>>("SELECT closeout FROM jobs WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map(Option::flatten)
            .map_err(|source| StoreError::ReadJob {
                job_id: id.to_owned(),
                source,
            })
    }

    /// The ids of the jobs whose id starts with `prefix`, newest first, at
    /// most `limit` of them (`LIKE` wildcards in `prefix` match themselves).
    pub(super) async fn job_ids_with_prefix(
        &self,
        prefix: &str,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        sqlx::query_scalar::<_, String>(
            "SELECT id FROM jobs WHERE id LIKE $1 ESCAPE '\\' \
             ORDER BY created_at DESC, id DESC LIMIT $2",
        )
        .bind(like_prefix(prefix))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(|source| StoreError::ListJobs { source })
    }

    /// Up to `limit` jobs, newest (`created_at`) first; jobs created at the
    /// same instant come in descending id order.
    pub(super) async fn jobs(&self, limit: u32) -> Result<Vec<JobRecord>, StoreError> {
        let sql = format!(
            "{} ORDER BY created_at DESC, id DESC LIMIT $1",
            SELECT.as_str()
        );
        sqlx::query_as::<_, JobRow>(&sql)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await
            .map_err(|source| StoreError::ListJobs { source })?
            .into_iter()
            .map(JobRow::into_record)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use paddock_protocol::event::TokenUsage;
    use time::Duration;

    use super::*;
    use crate::store::fixtures::job;

    fn finished(mut job: JobRecord) -> JobRecord {
        job.status = JobStatus::Done;
        job.reason = Some("engine exited 0".to_owned());
        job.patch_path = Some("/var/lib/paddock/jobs/j1/patch.diff".to_owned());
        job.changed_files = vec!["src/lib.rs".to_owned(), "dir with space/ü.txt".to_owned()];
        job.tokens = TokenUsage {
            input_tokens: 1,
            cached_input_tokens: 2,
            cache_write_tokens: 3,
            output_tokens: 4,
            reasoning_tokens: 5,
        };
        job.model_calls = 7;
        job.cost_micros = -8; // signed on the wire: a refund must survive too
        job.engine_exit_code = Some(-9);
        job.finished_at = Some(job.created_at + Duration::milliseconds(61_234));
        job.duration_ms = Some(61_234);
        job
    }

    #[tokio::test]
    async fn insert_then_read_then_update() {
        let store = SqliteStore::open_in_memory().await.unwrap();
        let written = job("j1", 0);
        store
            .insert_job(&written, r#"{"prompt":"fix it"}"#)
            .await
            .unwrap();
        assert_eq!(store.job("j1").await.unwrap(), Some(written.clone()));
        assert_eq!(
            store.job_spec("j1").await.unwrap().as_deref(),
            Some(r#"{"prompt":"fix it"}"#)
        );

        let updated = finished(written);
        store
            .finish_job(&updated, JobStatus::Running)
            .await
            .unwrap();
        assert_eq!(store.job("j1").await.unwrap(), Some(updated));
        assert_eq!(
            store.job_spec("j1").await.unwrap().as_deref(),
            Some(r#"{"prompt":"fix it"}"#),
            "update keeps the spec"
        );
    }
}

//! The `jobs` table on PostgreSQL: the same columns, statements and row
//! type as SQLite's (`sqlite/jobs.rs`); finishing is the same
//! compare-and-set (`UPDATE … AND status = from`: a second finisher waits
//! for the first's row lock, then finds the status changed).

use paddock_protocol::job::{JobRecord, JobStatus};
use sqlx::postgres::{PgArguments, Postgres};

use super::{PgStore, StoreError};
use crate::store::sqlite::codec::RowRef;
use crate::store::sqlite::jobs::{like_prefix, JobRow, COLUMNS, SELECT, UPDATE};

type Query<'q> = sqlx::query::Query<'q, Postgres, PgArguments>;

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

crate::store::sql::jobs::jobs_queries!(PgStore);

impl PgStore {
    /// Overwrites the stored job if its status is still `from`.
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

    /// Runs `update` (one text column of job `id`, `$1` the value, `$2`
    /// the id); a job that does not exist is an error.
    pub(super) async fn set_one(
        &self,
        id: &str,
        update: &'static str,
        value: &str,
    ) -> Result<(), StoreError> {
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

    /// Runs `select` (one nullable text column of job `$1`).
    pub(super) async fn get_one(
        &self,
        id: &str,
        select: &'static str,
    ) -> Result<Option<String>, StoreError> {
        sqlx::query_scalar::<_, Option<String>>(select)
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map(Option::flatten)
            .map_err(|source| StoreError::ReadJob {
                job_id: id.to_owned(),
                source,
            })
    }

    /// Ids starting with `prefix` taken literally (`LIKE`'s wildcards
    /// escaped), newest first.
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

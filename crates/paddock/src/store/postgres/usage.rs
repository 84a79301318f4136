//! What `paddock usage` reads, on PostgreSQL: SQLite's queries with the
//! NUMERIC sums clamped to BIGINT (saturating as SQLite's `TOTAL` does) and jobs created at the same instant in id order; the
//! rows are decoded by SQLite's row types.

use super::{PgStore, StoreError};
use crate::store::sqlite::usage::{CallsRow, JobRow, UsageCalls, UsageJob};

const JOBS: &str =
    "SELECT id, ticket_id, project, engine, attempt, status, created_at, finished_at, \
     spec_json FROM jobs ORDER BY created_at, id";

const CALLS: &str = "SELECT job_id, COALESCE(served_model, requested_model) AS model, \
     SUBSTR(started_at, 1, 10) AS day, COUNT(*) AS calls, \
     LEAST(SUM(input_tokens), 9223372036854775807)::BIGINT AS input_tokens, \
     LEAST(SUM(cached_input_tokens), 9223372036854775807)::BIGINT AS cached_input_tokens, \
     LEAST(SUM(cache_write_tokens), 9223372036854775807)::BIGINT AS cache_write_tokens, \
     LEAST(SUM(output_tokens), 9223372036854775807)::BIGINT AS output_tokens, \
     LEAST(SUM(reasoning_tokens), 9223372036854775807)::BIGINT AS reasoning_tokens, \
     LEAST(GREATEST(SUM(cost_micros), -9223372036854775808), \
     9223372036854775807)::BIGINT AS cost_micros \
     FROM model_calls GROUP BY job_id, COALESCE(served_model, requested_model), \
     SUBSTR(started_at, 1, 10) ORDER BY job_id, model, day";

impl PgStore {
    pub(super) async fn usage(&self) -> Result<(Vec<UsageJob>, Vec<UsageCalls>), StoreError> {
        let jobs = sqlx::query_as::<_, JobRow>(JOBS)
            .fetch_all(&self.pool)
            .await
            .map_err(|source| StoreError::ReadSpend {
                scope: "every job".into(),
                source,
            })?;
        let calls = sqlx::query_as::<_, CallsRow>(CALLS)
            .fetch_all(&self.pool)
            .await
            .map_err(|source| StoreError::ReadSpend {
                scope: "every model call".into(),
                source,
            })?;
        let jobs = jobs
            .into_iter()
            .map(JobRow::into_usage)
            .collect::<Result<Vec<_>, StoreError>>()?;
        let calls = calls
            .into_iter()
            .map(CallsRow::into_usage)
            .collect::<Result<Vec<_>, StoreError>>()?;
        Ok((jobs, calls))
    }
}

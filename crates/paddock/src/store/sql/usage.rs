//! What `paddock usage` rolls up, read from the store: every job (with its
//! ticket's task type from the stored spec) and its ledger summed per model
//! and UTC day. The rollups themselves live in `crate::usage`. The sums
//! are each backend's own statement (both saturate at BIGINT).

use paddock_protocol::TokenUsage;
use time::OffsetDateTime;

use crate::store::sqlite::codec::RowRef;
use crate::store::StoreError;

/// One job as the usage report needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageJob {
    pub id: String,
    pub ticket_id: String,
    pub project: String,
    /// The ticket's `type` from the job's spec (`chore` when absent).
    pub task_type: String,
    pub engine: String,
    /// The job's attempt number for its ticket (1 + its prior attempts):
    /// a rerun of one spec repeats its attempt, it is not a bounce.
    pub attempt: u32,
    pub status: String,
    pub created_at: OffsetDateTime,
    pub finished_at: Option<OffsetDateTime>,
}

/// One job's calls on one model on one UTC day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageCalls {
    pub job_id: String,
    /// The served model, else the requested one.
    pub model: String,
    /// `YYYY-MM-DD` (UTC).
    pub day: String,
    pub calls: u64,
    pub tokens: TokenUsage,
    pub cost_micros: i64,
}

/// A `jobs` row as [`JOBS`] reads it.
#[derive(sqlx::FromRow)]
pub(in crate::store) struct JobRow {
    id: String,
    ticket_id: String,
    project: String,
    engine: String,
    attempt: i64,
    status: String,
    created_at: String,
    finished_at: Option<String>,
    spec_json: String,
}

/// One job's calls on one model on one day, as a backend's sums read them.
#[derive(sqlx::FromRow)]
pub(in crate::store) struct CallsRow {
    job_id: String,
    model: String,
    day: String,
    calls: i64,
    input_tokens: i64,
    cached_input_tokens: i64,
    cache_write_tokens: i64,
    output_tokens: i64,
    reasoning_tokens: i64,
    cost_micros: i64,
}

impl JobRow {
    /// The row as the usage report's job.
    pub(in crate::store) fn into_usage(self) -> Result<UsageJob, StoreError> {
        let j = self;
        let row = RowRef::new("jobs", format!("job {}", j.id));
        let spec: serde_json::Value = row.parse_json("spec_json", &j.spec_json)?;
        Ok(UsageJob {
            task_type: spec
                .pointer("/ticket/type")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("chore")
                .to_string(),
            created_at: row.parse_time("created_at", &j.created_at)?,
            finished_at: row.opt_parse_time("finished_at", j.finished_at.as_deref())?,
            attempt: row.narrow("attempt", j.attempt)?,
            id: j.id,
            ticket_id: j.ticket_id,
            project: j.project,
            engine: j.engine,
            status: j.status,
        })
    }
}

impl CallsRow {
    /// The row as the usage report's calls.
    pub(in crate::store) fn into_usage(self) -> Result<UsageCalls, StoreError> {
        let c = self;
        let row = RowRef::new("model_calls", format!("calls of job {}", c.job_id));
        Ok(UsageCalls {
            calls: row.narrow("seq", c.calls)?,
            tokens: TokenUsage {
                input_tokens: row.narrow("input_tokens", c.input_tokens)?,
                cached_input_tokens: row.narrow("cached_input_tokens", c.cached_input_tokens)?,
                cache_write_tokens: row.narrow("cache_write_tokens", c.cache_write_tokens)?,
                output_tokens: row.narrow("output_tokens", c.output_tokens)?,
                reasoning_tokens: row.narrow("reasoning_tokens", c.reasoning_tokens)?,
            },
            cost_micros: c.cost_micros,
            job_id: c.job_id,
            model: c.model,
            day: c.day,
        })
    }
}

/// Every job, oldest first (jobs created at the same instant by id).
pub(in crate::store) const JOBS: &str =
    "SELECT id, ticket_id, project, engine, attempt, status, created_at, finished_at, \
     spec_json FROM jobs ORDER BY created_at, id";

/// `usage` (every job and its calls per model and day, summed with the
/// statement `$calls`) for the store type `$store` (a struct with a sqlx
/// `pool`).
macro_rules! usage_queries {
    ($store:ident, $calls:expr) => {
        const _: () = {
            use $crate::store::sql::usage::{CallsRow, JobRow, UsageCalls, UsageJob, JOBS};
            use $crate::store::StoreError;

            impl $store {
                /// Every job and its calls per model and day.
                pub(super) async fn usage(
                    &self,
                ) -> Result<(Vec<UsageJob>, Vec<UsageCalls>), StoreError> {
                    let jobs = sqlx::query_as::<_, JobRow>(JOBS)
                        .fetch_all(&self.pool)
                        .await
                        .map_err(|source| StoreError::ReadSpend {
                            scope: "every job".into(),
                            source,
                        })?;
                    let calls = sqlx::query_as::<_, CallsRow>($calls)
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
        };
    };
}
pub(in crate::store) use usage_queries;

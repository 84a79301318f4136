//! The `model_calls` table: the broker's ledger, one row per model call of a
//! job (`seq` per job, unique), with its five token counts, latency, outcome
//! and cost in integer micro-dollars. A call forwarded upstream is written
//! ahead (`in_flight`) and settled when its answer ends; a row still in
//! flight when its job ends (or its process dies) is settled `interrupted`.
//! A row written again as it is stored (a retried write whose first
//! commit landed) counts as written; another row at its seq is refused.
//! The page by position is each backend's own (SQLite's `rowid`,
//! PostgreSQL's identity column `position`).

use paddock_protocol::event::TokenUsage;
use paddock_protocol::ledger::{CallStatus, ModelCall};

use crate::store::sqlite::codec::RowRef;
use crate::store::StoreError;

pub(in crate::store) const INSERT: &str =
    "INSERT INTO model_calls (job_id, attempt, seq, provider, requested_model, \
     served_model, input_tokens, cached_input_tokens, cache_write_tokens, output_tokens, \
     reasoning_tokens, ttft_ms, duration_ms, status, http_status, error, estimated, \
     price_version, cost_micros, started_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, \
     $19, $20)";

/// Settles a row: inserted when new (a call never forwarded), else its
/// in-flight row completed; a row already settled is left alone.
pub(in crate::store) const SETTLE_SUFFIX: &str =
    " ON CONFLICT (job_id, seq) DO UPDATE SET attempt = excluded.attempt, \
     provider = excluded.provider, requested_model = excluded.requested_model, \
     served_model = excluded.served_model, input_tokens = excluded.input_tokens, \
     cached_input_tokens = excluded.cached_input_tokens, \
     cache_write_tokens = excluded.cache_write_tokens, output_tokens = excluded.output_tokens, \
     reasoning_tokens = excluded.reasoning_tokens, ttft_ms = excluded.ttft_ms, \
     duration_ms = excluded.duration_ms, status = excluded.status, \
     http_status = excluded.http_status, error = excluded.error, \
     estimated = excluded.estimated, price_version = excluded.price_version, \
     cost_micros = excluded.cost_micros, started_at = excluded.started_at \
     WHERE model_calls.status = 'in_flight'";

/// Settles every in-flight row of a job as interrupted, keeping what it
/// carries (its estimate) and saying why.
pub(in crate::store) const INTERRUPT: &str = "UPDATE model_calls SET status = 'interrupted', \
     error = COALESCE(error, $2) WHERE job_id = $1 AND status = 'in_flight'";

/// A job's rows, by seq.
pub(in crate::store) const SELECT: &str =
    "SELECT job_id, attempt, seq, provider, requested_model, served_model, \
     input_tokens, cached_input_tokens, cache_write_tokens, output_tokens, reasoning_tokens, \
     ttft_ms, duration_ms, status, http_status, error, estimated, price_version, cost_micros, \
     started_at FROM model_calls WHERE job_id = $1 ORDER BY seq";

/// The row of job `$1`'s call `$2`.
pub(in crate::store) const ONE: &str =
    "SELECT job_id, attempt, seq, provider, requested_model, served_model, \
     input_tokens, cached_input_tokens, cache_write_tokens, output_tokens, reasoning_tokens, \
     ttft_ms, duration_ms, status, http_status, error, estimated, price_version, cost_micros, \
     started_at FROM model_calls WHERE job_id = $1 AND seq = $2";

/// How an error names a ledger row: its status, model, start, tokens and
/// cost.
pub(in crate::store) fn describe(call: &ModelCall) -> String {
    format!(
        "{} call to {} ({}) started at {}, {} in / {} out tokens, {} micro-dollars",
        call.status.as_str(),
        call.provider,
        call.requested_model,
        call.started_at
            .checked_to_offset(time::UtcOffset::UTC)
            .unwrap_or(call.started_at),
        call.tokens.input_tokens,
        call.tokens.output_tokens,
        call.cost_micros
    )
}

/// A ledger row with its position.
#[derive(sqlx::FromRow)]
pub(in crate::store) struct PositionedRow {
    pub(in crate::store) position: i64,
    #[sqlx(flatten)]
    pub(in crate::store) row: ModelCallRow,
}

/// A `model_calls` row as stored.
#[derive(sqlx::FromRow)]
pub(in crate::store) struct ModelCallRow {
    job_id: String,
    attempt: i64,
    seq: i64,
    provider: String,
    requested_model: String,
    served_model: Option<String>,
    input_tokens: i64,
    cached_input_tokens: i64,
    cache_write_tokens: i64,
    output_tokens: i64,
    reasoning_tokens: i64,
    ttft_ms: Option<i64>,
    duration_ms: i64,
    status: String,
    http_status: Option<i64>,
    error: Option<String>,
    estimated: bool,
    price_version: String,
    cost_micros: i64,
    started_at: String,
}

impl ModelCallRow {
    pub(in crate::store) fn into_call(self) -> Result<ModelCall, StoreError> {
        let row = RowRef::new(
            "model_calls",
            format!("model call {} of job {}", self.seq, self.job_id),
        );
        let status = CallStatus::parse(&self.status).ok_or_else(|| {
            row.decode_error("status", format!("unknown call status {:?}", self.status))
        })?;
        Ok(ModelCall {
            attempt: row.narrow("attempt", self.attempt)?,
            seq: row.narrow("seq", self.seq)?,
            provider: self.provider,
            requested_model: self.requested_model,
            served_model: self.served_model,
            tokens: TokenUsage {
                input_tokens: row.narrow("input_tokens", self.input_tokens)?,
                cached_input_tokens: row.narrow("cached_input_tokens", self.cached_input_tokens)?,
                cache_write_tokens: row.narrow("cache_write_tokens", self.cache_write_tokens)?,
                output_tokens: row.narrow("output_tokens", self.output_tokens)?,
                reasoning_tokens: row.narrow("reasoning_tokens", self.reasoning_tokens)?,
            },
            ttft_ms: row.opt_narrow("ttft_ms", self.ttft_ms)?,
            duration_ms: row.narrow("duration_ms", self.duration_ms)?,
            status,
            http_status: row.opt_narrow("http_status", self.http_status)?,
            error: self.error,
            estimated: self.estimated,
            price_version: self.price_version,
            cost_micros: self.cost_micros,
            started_at: row.parse_time("started_at", &self.started_at)?,
            job_id: self.job_id,
        })
    }
}

/// `insert_model_call`, `settle_model_call`, `interrupt_model_calls`,
/// `ledger` (paging with the statement `$page`) and `model_calls` for the
/// store type `$store` (a struct with a sqlx `pool`).
macro_rules! ledger_queries {
    ($store:ident, $page:expr) => {
        const _: () = {
            use paddock_protocol::ledger::ModelCall;
            use $crate::store::sql::ledger::{
                describe, ModelCallRow, PositionedRow, INSERT, INTERRUPT, ONE, SELECT,
                SETTLE_SUFFIX,
            };
            use $crate::store::sqlite::codec::RowRef;
            use $crate::store::sqlite::{is_foreign_key_violation, is_unique_violation};
            use $crate::store::StoreError;

            impl $store {
                /// Records one model call. Its job must exist (`NoSuchJob` otherwise) and
                /// `(job_id, seq)` must be new, or hold this very row (a retried write
                /// whose first commit landed: written); another row there fails with
                /// `ModelCallConflict`, naming both. Seqs need not be dense here.
                pub(super) async fn insert_model_call(
                    &self,
                    call: &ModelCall,
                ) -> Result<(), StoreError> {
                    match self.write_model_call(INSERT, call).await {
                        Ok(_) => Ok(()),
                        Err(StoreError::InsertModelCall { source, .. })
                            if is_unique_violation(&source) =>
                        {
                            let row = RowRef::new(
                                "model_calls",
                                format!("model call {} of job {}", call.seq, call.job_id),
                            );
                            let stored = sqlx::query_as::<_, ModelCallRow>(ONE)
                                .bind(call.job_id.as_str())
                                .bind(row.int("seq", call.seq)?)
                                .fetch_optional(&self.pool)
                                .await
                                .map_err(|source| StoreError::ReadModelCalls {
                                    job_id: call.job_id.clone(),
                                    source,
                                })?
                                .map(ModelCallRow::into_call)
                                .transpose()?;
                            match stored {
                                Some(stored) if &stored == call => Ok(()),
                                stored => Err(StoreError::ModelCallConflict {
                                    job_id: call.job_id.clone(),
                                    seq: call.seq,
                                    stored: stored
                                        .as_ref()
                                        .map_or_else(|| "none".to_owned(), describe)
                                        .into(),
                                    given: describe(call).into(),
                                }),
                            }
                        }
                        Err(e) => Err(e),
                    }
                }

                /// Settles one model call: completes its in-flight row, or inserts it
                /// when it has none (a call the broker refused before forwarding it).
                /// False when its row was already settled (left as it is). Its job must
                /// exist (`NoSuchJob` otherwise).
                pub(super) async fn settle_model_call(
                    &self,
                    call: &ModelCall,
                ) -> Result<bool, StoreError> {
                    let query = format!("{INSERT}{SETTLE_SUFFIX}");
                    self.write_model_call(&query, call).await.map(|n| n > 0)
                }

                /// Settles the in-flight rows of job `job_id` as `interrupted` (their
                /// end was never recorded), their error `why` unless they have one;
                /// how many there were.
                pub(super) async fn interrupt_model_calls(
                    &self,
                    job_id: &str,
                    why: &str,
                ) -> Result<u64, StoreError> {
                    sqlx::query(INTERRUPT)
                        .bind(job_id)
                        .bind(why)
                        .execute(&self.pool)
                        .await
                        .map(|r| r.rows_affected())
                        .map_err(|source| StoreError::InterruptModelCalls {
                            job_id: job_id.to_owned(),
                            source,
                        })
                }

                async fn write_model_call(
                    &self,
                    query: &str,
                    call: &ModelCall,
                ) -> Result<u64, StoreError> {
                    let row = RowRef::new(
                        "model_calls",
                        format!("model call {} of job {}", call.seq, call.job_id),
                    );
                    sqlx::query(query)
                        .bind(call.job_id.as_str())
                        .bind(i64::from(call.attempt))
                        .bind(row.int("seq", call.seq)?)
                        .bind(call.provider.as_str())
                        .bind(call.requested_model.as_str())
                        .bind(call.served_model.as_deref())
                        .bind(row.int("input_tokens", call.tokens.input_tokens)?)
                        .bind(row.int("cached_input_tokens", call.tokens.cached_input_tokens)?)
                        .bind(row.int("cache_write_tokens", call.tokens.cache_write_tokens)?)
                        .bind(row.int("output_tokens", call.tokens.output_tokens)?)
                        .bind(row.int("reasoning_tokens", call.tokens.reasoning_tokens)?)
                        .bind(row.opt_int("ttft_ms", call.ttft_ms)?)
                        .bind(row.int("duration_ms", call.duration_ms)?)
                        .bind(call.status.as_str())
                        .bind(call.http_status.map(i64::from))
                        .bind(call.error.as_deref())
                        .bind(call.estimated)
                        .bind(call.price_version.as_str())
                        .bind(call.cost_micros)
                        .bind(row.time("started_at", call.started_at)?)
                        .execute(&self.pool)
                        .await
                        .map(|r| r.rows_affected())
                        .map_err(|source| {
                            if is_foreign_key_violation(&source) {
                                StoreError::NoSuchJob {
                                    job_id: call.job_id.clone(),
                                }
                            } else {
                                StoreError::InsertModelCall {
                                    job_id: call.job_id.clone(),
                                    seq: call.seq,
                                    source,
                                }
                            }
                        })
                }

                /// At most `limit` ledger rows after position `after`, in the order
                /// they were first written, with their positions.
                pub(super) async fn ledger(
                    &self,
                    after: Option<i64>,
                    limit: u32,
                ) -> Result<Vec<(i64, ModelCall)>, StoreError> {
                    sqlx::query_as::<_, PositionedRow>($page)
                        .bind(after.unwrap_or(0))
                        .bind(i64::from(limit))
                        .fetch_all(&self.pool)
                        .await
                        .map_err(|source| StoreError::ReadLedger { after, source })?
                        .into_iter()
                        .map(|r| Ok((r.position, r.row.into_call()?)))
                        .collect()
                }

                /// The model calls of job `job_id`, in ascending seq order. Empty for an
                /// unknown job.
                pub(super) async fn model_calls(
                    &self,
                    job_id: &str,
                ) -> Result<Vec<ModelCall>, StoreError> {
                    sqlx::query_as::<_, ModelCallRow>(SELECT)
                        .bind(job_id)
                        .fetch_all(&self.pool)
                        .await
                        .map_err(|source| StoreError::ReadModelCalls {
                            job_id: job_id.to_owned(),
                            source,
                        })?
                        .into_iter()
                        .map(ModelCallRow::into_call)
                        .collect()
                }
            }
        };
    };
}
pub(in crate::store) use ledger_queries;

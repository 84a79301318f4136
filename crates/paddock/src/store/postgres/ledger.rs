//! The `model_calls` table on PostgreSQL: the same statements and row type
//! as SQLite's (`sqlite/ledger.rs`); the ledger's paging position is the
//! identity column `position` where SQLite has its `rowid`. A position is
//! taken when a row is inserted, not when it commits: a page read while
//! another process's insert is in flight can miss that row (SQLite's
//! single writer cannot).

use paddock_protocol::ledger::ModelCall;

use super::{PgStore, StoreError};
use crate::store::sqlite::codec::RowRef;
use crate::store::sqlite::is_foreign_key_violation;
use crate::store::sqlite::ledger::{
    ModelCallRow, PositionedRow, INSERT, INTERRUPT, SELECT, SETTLE_SUFFIX,
};

const PAGE: &str = "SELECT position, job_id, attempt, seq, provider, requested_model, \
     served_model, input_tokens, cached_input_tokens, cache_write_tokens, output_tokens, \
     reasoning_tokens, ttft_ms, duration_ms, status, http_status, error, estimated, \
     price_version, cost_micros, started_at FROM model_calls WHERE position > $1 \
     ORDER BY position LIMIT $2";

impl PgStore {
    pub(super) async fn settle_model_call(&self, call: &ModelCall) -> Result<bool, StoreError> {
        let query = format!("{INSERT}{SETTLE_SUFFIX}");
        self.write_model_call(&query, call).await.map(|n| n > 0)
    }

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

    pub(super) async fn write_model_call(
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

    pub(super) async fn ledger(
        &self,
        after: Option<i64>,
        limit: u32,
    ) -> Result<Vec<(i64, ModelCall)>, StoreError> {
        sqlx::query_as::<_, PositionedRow>(PAGE)
            .bind(after.unwrap_or(0))
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await
            .map_err(|source| StoreError::ReadLedger { after, source })?
            .into_iter()
            .map(|r| Ok((r.position, r.row.into_call()?)))
            .collect()
    }

    pub(super) async fn model_calls(&self, job_id: &str) -> Result<Vec<ModelCall>, StoreError> {
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

//! The `model_calls` table on PostgreSQL: the shared statements
//! (`sql/ledger.rs`); the ledger's paging position is the identity column
//! `position` where SQLite has its `rowid`. A position is taken when a row
//! is inserted, not when it commits: a page read while another process's
//! insert is in flight can miss that row (SQLite's single writer cannot).

use super::PgStore;

/// The ledger after a position, a page at a time.
const PAGE: &str = "SELECT position, job_id, attempt, seq, provider, requested_model, \
     served_model, input_tokens, cached_input_tokens, cache_write_tokens, output_tokens, \
     reasoning_tokens, ttft_ms, duration_ms, status, http_status, error, estimated, \
     price_version, cost_micros, started_at FROM model_calls WHERE position > $1 \
     ORDER BY position LIMIT $2";

crate::store::sql::ledger::ledger_queries!(PgStore, PAGE);

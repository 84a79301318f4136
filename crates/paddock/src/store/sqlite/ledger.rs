//! The `model_calls` table on SQLite: the shared statements
//! (`sql/ledger.rs`), paged by `rowid`.

use super::SqliteStore;

/// The ledger after a position (the row's `rowid`: the order rows were
/// first written; settling a row keeps it), a page at a time.
const PAGE: &str = "SELECT rowid AS position, job_id, attempt, seq, provider, requested_model, \
     served_model, input_tokens, cached_input_tokens, cache_write_tokens, output_tokens, \
     reasoning_tokens, ttft_ms, duration_ms, status, http_status, error, estimated, \
     price_version, cost_micros, started_at FROM model_calls WHERE rowid > $1 \
     ORDER BY rowid LIMIT $2";

crate::store::sql::ledger::ledger_queries!(SqliteStore, PAGE);

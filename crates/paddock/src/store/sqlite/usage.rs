//! What `paddock usage` reads, on SQLite: the shared statements
//! (`sql/usage.rs`), the ledger summed with `TOTAL` (a float, so sums
//! past BIGINT saturate instead of failing).

use super::SqliteStore;

/// A job's calls summed per model and UTC day.
const CALLS: &str = "SELECT job_id, COALESCE(served_model, requested_model) AS model, \
     SUBSTR(started_at, 1, 10) AS day, COUNT(*) AS calls, \
     CAST(TOTAL(input_tokens) AS INTEGER) AS input_tokens, \
     CAST(TOTAL(cached_input_tokens) AS INTEGER) AS cached_input_tokens, \
     CAST(TOTAL(cache_write_tokens) AS INTEGER) AS cache_write_tokens, \
     CAST(TOTAL(output_tokens) AS INTEGER) AS output_tokens, \
     CAST(TOTAL(reasoning_tokens) AS INTEGER) AS reasoning_tokens, \
     CAST(TOTAL(cost_micros) AS INTEGER) AS cost_micros \
     FROM model_calls GROUP BY job_id, COALESCE(served_model, requested_model), \
     SUBSTR(started_at, 1, 10) ORDER BY job_id, model, day";

crate::store::sql::usage::usage_queries!(SqliteStore, CALLS);

//! What `paddock usage` reads, on PostgreSQL: the shared statements
//! (`sql/usage.rs`), the ledger's NUMERIC sums clamped to BIGINT
//! (saturating as SQLite's `TOTAL` does).

use super::PgStore;

/// A job's calls summed per model and UTC day.
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

crate::store::sql::usage::usage_queries!(PgStore, CALLS);

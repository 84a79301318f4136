//! Spend already on the ledger for the budgets that span jobs, on
//! PostgreSQL: the shared method (`sql/spend.rs`) with NUMERIC `SUM`s of BIGINTs
//! clamped to BIGINT's range (saturating as SQLite's `TOTAL` does, instead
//! of failing the budget check) and `COALESCE` for none.

use super::PgStore;

/// A ticket's spend, clamped to BIGINT.
const TICKET: &str = "SELECT LEAST(GREATEST(COALESCE(SUM(c.cost_micros), 0), \
     -9223372036854775808), 9223372036854775807)::BIGINT FROM model_calls c \
     JOIN jobs j ON j.id = c.job_id WHERE j.project = $1 AND j.ticket_id = $2 \
     AND c.job_id <> $3";

/// A project's spend on one day, clamped to BIGINT.
const PROJECT_DAY: &str = "SELECT LEAST(GREATEST(COALESCE(SUM(c.cost_micros), 0), \
     -9223372036854775808), 9223372036854775807)::BIGINT FROM model_calls c \
     JOIN jobs j ON j.id = c.job_id WHERE j.project = $1 AND c.started_at >= $2 \
     AND c.started_at < $3 AND c.job_id <> $4";

crate::store::sql::spend::spend_queries!(PgStore, TICKET, PROJECT_DAY);

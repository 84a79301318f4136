//! Spend already on the ledger for the budgets that span jobs, on
//! PostgreSQL: SQLite's sums, PostgreSQL's NUMERIC `SUM` of BIGINTs
//! clamped to BIGINT's range (saturating as SQLite's `TOTAL` does, instead
//! of failing the budget check) and `COALESCE` for none.

use time::{OffsetDateTime, Time, UtcOffset};

use super::{PgStore, StoreError};
use crate::store::sqlite::codec::RowRef;
use crate::store::SpendScope;

const TICKET: &str = "SELECT LEAST(GREATEST(COALESCE(SUM(c.cost_micros), 0), \
     -9223372036854775808), 9223372036854775807)::BIGINT FROM model_calls c \
     JOIN jobs j ON j.id = c.job_id WHERE j.project = $1 AND j.ticket_id = $2 \
     AND c.job_id <> $3";

const PROJECT_DAY: &str = "SELECT LEAST(GREATEST(COALESCE(SUM(c.cost_micros), 0), \
     -9223372036854775808), 9223372036854775807)::BIGINT FROM model_calls c \
     JOIN jobs j ON j.id = c.job_id WHERE j.project = $1 AND c.started_at >= $2 \
     AND c.started_at < $3 AND c.job_id <> $4";

impl PgStore {
    pub(super) async fn spent_micros(
        &self,
        scope: &SpendScope,
        except_job: &str,
    ) -> Result<i64, StoreError> {
        match scope {
            SpendScope::Ticket { project, ticket_id } => sqlx::query_scalar::<_, i64>(TICKET)
                .bind(project)
                .bind(ticket_id)
                .bind(except_job)
                .fetch_one(&self.pool)
                .await
                .map_err(|source| StoreError::ReadSpend {
                    scope: format!("ticket {ticket_id} of project {project}"),
                    source,
                }),
            SpendScope::ProjectDay { project, at } => {
                let scope = || {
                    format!(
                        "project {project} on {}",
                        at.to_offset(UtcOffset::UTC).date()
                    )
                };
                let row = RowRef::new("model_calls", scope());
                let day: OffsetDateTime = at.to_offset(UtcOffset::UTC).replace_time(Time::MIDNIGHT);
                let next = day + time::Duration::days(1);
                sqlx::query_scalar::<_, i64>(PROJECT_DAY)
                    .bind(project)
                    .bind(row.time("started_at", day)?)
                    .bind(row.time("started_at", next)?)
                    .bind(except_job)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(|source| StoreError::ReadSpend {
                        scope: scope(),
                        source,
                    })
            }
        }
    }
}

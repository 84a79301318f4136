//! Spend already on the ledger, summed for the budgets that span jobs: a
//! ticket across all its attempts, and a project over one UTC day, by every
//! job but the one asking. The broker enforces them from these sums plus
//! what the running job spends.

use time::{OffsetDateTime, Time, UtcOffset};

use super::codec::RowRef;
use super::{SqliteStore, StoreError};

const TICKET: &str = "SELECT CAST(TOTAL(c.cost_micros) AS INTEGER) FROM model_calls c \
     JOIN jobs j ON j.id = c.job_id WHERE j.project = $1 AND j.ticket_id = $2 \
     AND c.job_id <> $3";

const PROJECT_DAY: &str = "SELECT CAST(TOTAL(c.cost_micros) AS INTEGER) FROM model_calls c \
     JOIN jobs j ON j.id = c.job_id WHERE j.project = $1 AND c.started_at >= $2 \
     AND c.started_at < $3 AND c.job_id <> $4";

impl SqliteStore {
    /// Micro-dollars spent by every job of ticket `ticket_id` in `project`
    /// but `except_job`.
    pub(super) async fn ticket_spent_micros(
        &self,
        project: &str,
        ticket_id: &str,
        except_job: &str,
    ) -> Result<i64, StoreError> {
        sqlx::query_scalar::<_, i64>(TICKET)
            .bind(project)
            .bind(ticket_id)
            .bind(except_job)
            .fetch_one(&self.pool)
            .await
            .map_err(|source| StoreError::ReadSpend {
                scope: format!("ticket {ticket_id} of project {project}"),
                source,
            })
    }

    /// Micro-dollars spent by project `project` on the UTC day containing
    /// `at` (calls started from 00:00:00 UTC that day to the next), by every
    /// job but `except_job`.
    pub(super) async fn project_day_spent_micros(
        &self,
        project: &str,
        at: OffsetDateTime,
        except_job: &str,
    ) -> Result<i64, StoreError> {
        let scope = || {
            format!(
                "project {project} on {}",
                at.to_offset(UtcOffset::UTC).date()
            )
        };
        let row = RowRef::new("model_calls", scope());
        let day = at.to_offset(UtcOffset::UTC).replace_time(Time::MIDNIGHT);
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use time::macros::datetime;

    use super::*;
    use crate::store::fixtures;

    /// Sums past `i64::MAX` saturate (SQLite's SUM failed with "integer
    /// overflow", losing the budget check and `paddock usage`).
    #[tokio::test]
    async fn sums_saturate_instead_of_overflowing() {
        let store = SqliteStore::open_in_memory().await.unwrap();
        let mut job = fixtures::job("job-a", 0);
        job.project = "p".into();
        job.ticket_id = "T-1".into();
        store.insert_job(&job, "{}").await.unwrap();
        let day = datetime!(2026-11-30 12:00 UTC);
        for seq in [1, 2] {
            let mut call = fixtures::model_call("job-a", seq);
            call.cost_micros = i64::MAX;
            call.tokens.input_tokens = i64::MAX as u64;
            call.started_at = day;
            store.insert_model_call(&call).await.unwrap();
        }
        let (_, calls) = store.usage().await.unwrap();
        assert_eq!(
            (
                store.ticket_spent_micros("p", "T-1", "").await.unwrap(),
                store.project_day_spent_micros("p", day, "").await.unwrap(),
                calls
                    .iter()
                    .map(|c| (c.calls, c.tokens.input_tokens, c.cost_micros))
                    .collect::<Vec<_>>(),
            ),
            (i64::MAX, i64::MAX, vec![(2, i64::MAX as u64, i64::MAX)])
        );
    }
}

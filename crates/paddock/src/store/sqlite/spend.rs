//! Spend on the ledger for the budgets that span jobs, on SQLite: the
//! shared method (`sql/spend.rs`) with `TOTAL` sums.

use super::SqliteStore;

/// A ticket's spend (`TOTAL`: a float, so past BIGINT it saturates).
const TICKET: &str = "SELECT CAST(TOTAL(c.cost_micros) AS INTEGER) FROM model_calls c \
     JOIN jobs j ON j.id = c.job_id WHERE j.project = $1 AND j.ticket_id = $2 \
     AND c.job_id <> $3";

/// A project's spend on one day.
const PROJECT_DAY: &str = "SELECT CAST(TOTAL(c.cost_micros) AS INTEGER) FROM model_calls c \
     JOIN jobs j ON j.id = c.job_id WHERE j.project = $1 AND c.started_at >= $2 \
     AND c.started_at < $3 AND c.job_id <> $4";

crate::store::sql::spend::spend_queries!(SqliteStore, TICKET, PROJECT_DAY);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use time::macros::datetime;

    use super::*;
    use crate::store::fixtures;
    use crate::store::SpendScope;

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
                store
                    .spent_micros(
                        &SpendScope::Ticket {
                            project: "p".into(),
                            ticket_id: "T-1".into(),
                        },
                        ""
                    )
                    .await
                    .unwrap(),
                store
                    .spent_micros(
                        &SpendScope::ProjectDay {
                            project: "p".into(),
                            at: day,
                        },
                        ""
                    )
                    .await
                    .unwrap(),
                calls
                    .iter()
                    .map(|c| (c.calls, c.tokens.input_tokens, c.cost_micros))
                    .collect::<Vec<_>>(),
            ),
            (i64::MAX, i64::MAX, vec![(2, i64::MAX as u64, i64::MAX)])
        );
    }
}

//! The `events` table on PostgreSQL. An append runs in a transaction that
//! first locks the job's row (`FOR NO KEY UPDATE`): appenders of one job,
//! in any process, take turns, and each one's density check (`seq` = the
//! last stored + 1) sees every event committed before it; a job that does
//! not exist is found by the same lock. Reading is shared (`sql/events.rs`).

use paddock_protocol::event::AgentEvent;

use super::{PgStore, StoreError};
use crate::store::sql::events::APPEND;
use crate::store::sqlite::codec::RowRef;
use crate::store::sqlite::is_unique_violation;

impl PgStore {
    /// Appends `event` if its `seq` is its job's last stored seq + 1.
    pub(super) async fn append_event(&self, event: &AgentEvent) -> Result<(), StoreError> {
        let row = RowRef::new(
            "events",
            format!("event {} of job {}", event.seq, event.job_id),
        );
        let seq = row.int("seq", event.seq)?;
        let at = row.time("at", event.at)?;
        let body = row.json("body", &event.body)?;
        let append_error = |source| StoreError::AppendEvent {
            job_id: event.job_id.clone(),
            seq: event.seq,
            source,
        };
        let mut tx = self.pool.begin().await.map_err(append_error)?;
        let job =
            sqlx::query_scalar::<_, i32>("SELECT 1 FROM jobs WHERE id = $1 FOR NO KEY UPDATE")
                .bind(event.job_id.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(append_error)?;
        if job.is_none() {
            return Err(StoreError::NoSuchJob {
                job_id: event.job_id.clone(),
            });
        }
        let done = sqlx::query(APPEND)
            .bind(event.job_id.as_str())
            .bind(seq)
            .bind(at)
            .bind(event.body.kind())
            .bind(body)
            .execute(&mut *tx)
            .await;
        let inserted = match done {
            Ok(done) => done.rows_affected() == 1,
            // Under the lock this cannot happen; if it does, the seq is taken.
            Err(e) if is_unique_violation(&e) => false,
            Err(e) => return Err(append_error(e)),
        };
        if inserted {
            tx.commit().await.map_err(append_error)?;
            return Ok(());
        }
        // Refused by the density check: release the lock, say why.
        drop(tx);
        let last: Option<i64> = sqlx::query_scalar("SELECT MAX(seq) FROM events WHERE job_id = $1")
            .bind(event.job_id.as_str())
            .fetch_one(&self.pool)
            .await
            .map_err(append_error)?;
        Err(StoreError::EventSeq {
            job_id: event.job_id.clone(),
            seq: event.seq,
            last: row.narrow("seq", last.unwrap_or(0))?,
        })
    }
}

crate::store::sql::events::events_queries!(PgStore);

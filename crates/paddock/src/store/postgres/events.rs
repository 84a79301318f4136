//! The `events` table on PostgreSQL. An append runs in a transaction that
//! first locks the job's row (`FOR NO KEY UPDATE`): appenders of one job,
//! in any process, take turns, and each one's density check (`seq` = the
//! last stored + 1) sees every event committed before it; a job that does
//! not exist is found by the same lock. A seq that holds the very event
//! given already (a retry whose first commit landed) counts as stored. Reading is shared (`sql/events.rs`).

use paddock_protocol::event::AgentEvent;

use super::{PgStore, StoreError};
use crate::store::sql::events::{refused, Stored, APPEND, AT_SEQ};
use crate::store::sqlite::codec::RowRef;
use crate::store::sqlite::is_unique_violation;

impl PgStore {
    /// Appends `event` if its `seq` is its job's last stored seq + 1; one
    /// refused because that seq holds the very same event (a retry whose
    /// first commit landed) counts as stored.
    pub(super) async fn append_event(&self, event: &AgentEvent) -> Result<(), StoreError> {
        let row = RowRef::new(
            "events",
            format!("event {} of job {}", event.seq, event.job_id),
        );
        let seq = row.int("seq", event.seq)?;
        let given = Stored {
            kind: event.body.kind().to_owned(),
            at: row.time("at", event.at)?,
            body: row.json("body", &event.body)?,
        };
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
            .bind(given.at.as_str())
            .bind(given.kind.as_str())
            .bind(given.body.as_str())
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
        // Refused by the density check: release the lock; stored already
        // (a retry), or say why.
        drop(tx);
        let last: Option<i64> = sqlx::query_scalar("SELECT MAX(seq) FROM events WHERE job_id = $1")
            .bind(event.job_id.as_str())
            .fetch_one(&self.pool)
            .await
            .map_err(append_error)?;
        let stored = sqlx::query_as::<_, Stored>(AT_SEQ)
            .bind(event.job_id.as_str())
            .bind(seq)
            .fetch_optional(&self.pool)
            .await
            .map_err(append_error)?;
        let last = row.narrow("seq", last.unwrap_or(0))?;
        refused(&event.job_id, event.seq, last, &given, stored)
    }
}

crate::store::sql::events::events_queries!(PgStore);

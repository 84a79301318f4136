//! The `events` table: a job's normalized `AgentEvent`s, dense per job
//! (`seq` 1, 2, 3...). `body` holds the JSON of the `EventBody` (with its
//! `kind` tag), so reading returns exactly what was written; `kind` repeats
//! the tag as a column for queries. Reading is shared; an append is each
//! backend's own (SQLite's single writer, PostgreSQL's row lock).

use paddock_protocol::event::{AgentEvent, EventBody};

use crate::store::sqlite::codec::RowRef;
use crate::store::StoreError;

/// Inserts the event only if `$2` is the job's last seq + 1, in one statement
/// (so no other writer can slip in between the check and the insert).
pub(in crate::store) const APPEND: &str = "INSERT INTO events (job_id, seq, at, kind, body) \
     SELECT $1, $2, $3, $4, $5 \
     WHERE $2 = (SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE job_id = $1)";

/// Inserts job `$1`'s event with the next seq, whatever it is: only inside
/// a transaction that holds the job's row (the reclaim's, which appends
/// the reclaimed job's final event with its compare-and-set).
pub(in crate::store) const APPEND_NEXT: &str = "INSERT INTO events (job_id, seq, at, kind, body) \
     SELECT $1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE job_id = $1), $2, $3, $4";

/// The event stored at job `$1`'s seq `$2`: what a refused append compares
/// with the one it was given.
pub(in crate::store) const AT_SEQ: &str =
    "SELECT kind, at, body FROM events WHERE job_id = $1 AND seq = $2";

/// An event as its columns hold it (`kind`, `at`, `body`).
#[derive(Debug, PartialEq, Eq, sqlx::FromRow)]
pub(in crate::store) struct Stored {
    pub(in crate::store) kind: String,
    pub(in crate::store) at: String,
    pub(in crate::store) body: String,
}

impl Stored {
    /// `kind at <at>`: how an error names the event.
    fn describe(&self) -> String {
        format!("{} at {}", self.kind, self.at)
    }
}

/// Why an append of `given` (seq `seq` of job `job_id`) was refused, the
/// job's last seq being `last`: none when the event stored at that seq is
/// the very one (a retried append whose first commit landed: it is
/// stored), `EventConflict` naming both when another is, `EventSeq` when
/// the seq is not the next.
pub(in crate::store) fn refused(
    job_id: &str,
    seq: u64,
    last: u64,
    given: &Stored,
    stored: Option<Stored>,
) -> Result<(), StoreError> {
    match stored {
        Some(stored) if &stored == given => Ok(()),
        Some(stored) => Err(StoreError::EventConflict {
            job_id: job_id.to_owned(),
            seq,
            last,
            stored: stored.describe().into(),
            given: given.describe().into(),
        }),
        None => Err(StoreError::EventSeq {
            job_id: job_id.to_owned(),
            seq,
            last,
        }),
    }
}

/// An `events` row as stored.
#[derive(sqlx::FromRow)]
pub(in crate::store) struct EventRow {
    job_id: String,
    seq: i64,
    at: String,
    body: String,
}

impl EventRow {
    pub(in crate::store) fn into_event(self) -> Result<AgentEvent, StoreError> {
        let row = RowRef::new(
            "events",
            format!("event {} of job {}", self.seq, self.job_id),
        );
        Ok(AgentEvent {
            seq: row.narrow("seq", self.seq)?,
            at: row.parse_time("at", &self.at)?,
            body: row.parse_json::<EventBody>("body", &self.body)?,
            job_id: self.job_id,
        })
    }
}

/// `events_page` (a page of a job's events after a seq) and `last_event_seq`
/// for the store type `$store` (a
/// struct with a sqlx `pool`).
macro_rules! events_queries {
    ($store:ident) => {
        const _: () = {
            use paddock_protocol::event::AgentEvent;
            use $crate::store::sql::events::EventRow;
            use $crate::store::StoreError;

            impl $store {
                /// Job `job_id`'s last stored seq (0 when it has no events,
                /// or there is no such job): one row, whatever its history.
                pub(super) async fn last_event_seq(&self, job_id: &str) -> Result<u64, StoreError> {
                    let last: i64 = sqlx::query_scalar(
                        "SELECT COALESCE(MAX(seq), 0) FROM events WHERE job_id = $1",
                    )
                    .bind(job_id)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(|source| StoreError::ReadEvents {
                        job_id: job_id.to_owned(),
                        source,
                    })?;
                    Ok(u64::try_from(last).unwrap_or(0))
                }

                /// Job `job_id`'s events with `seq > after_seq`, in ascending seq
                /// order, at most `limit` of them and, past the first, no more
                /// than `event_pages::PAGE_BYTES` of their bodies. Empty for an
                /// unknown job. Their sizes are read first (not their
                /// bodies), then the bodies of those that fit: stored events
                /// never change, so the second read holds what the first
                /// measured.
                pub(super) async fn events_page(
                    &self,
                    job_id: &str,
                    after_seq: u64,
                    limit: u32,
                ) -> Result<Vec<AgentEvent>, StoreError> {
                    let Ok(after_seq) = i64::try_from(after_seq) else {
                        return Ok(Vec::new());
                    };
                    let read_error = |source| StoreError::ReadEvents {
                        job_id: job_id.to_owned(),
                        source,
                    };
                    let sizes: Vec<(i64, i64)> = sqlx::query_as(
                        "SELECT seq, CAST(octet_length(body) AS BIGINT) FROM events \
                         WHERE job_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                    )
                    .bind(job_id)
                    .bind(after_seq)
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(read_error)?;
                    let Some(last) = $crate::store::event_pages::fitting(&sizes) else {
                        return Ok(Vec::new());
                    };
                    sqlx::query_as::<_, EventRow>(
                        "SELECT job_id, seq, at, body FROM events \
                         WHERE job_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq",
                    )
                    .bind(job_id)
                    .bind(after_seq)
                    .bind(last)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(read_error)?
                    .into_iter()
                    .map(EventRow::into_event)
                    .collect()
                }
            }
        };
    };
}
pub(in crate::store) use events_queries;

//! The ledger (the broker's `model_calls` rows, docs/store.md) a page at a
//! time, as `paddock usage --ledger` prints it and `GET /v1/ledger` serves
//! it: the rows of every job in the order they were first recorded, at
//! most `limit` a page, and a cursor after the page's last row. The cursor
//! is always given back, so a client that keeps the last one later gets
//! just the rows recorded since (a row still `in_flight` when it was read
//! is settled in place: read a job's calls again, `GET /v1/jobs/{id}`, for
//! its final figures).

use paddock_protocol::ledger::ModelCall;
use serde::{Deserialize, Serialize};

use crate::cut_text::{cut, Cut};
use crate::store::{Store, StoreError};

/// The longest page.
pub const MAX_PAGE: u32 = 500;
/// The page without a limit.
pub const DEFAULT_PAGE: u32 = 100;

/// A page of the ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LedgerPage {
    pub calls: Vec<ModelCall>,
    /// Pass back as `cursor` for the rows after this page (the given
    /// cursor again when the page is empty).
    pub next_cursor: String,
    /// Whether the page is full: more rows may follow now.
    pub more: bool,
}

/// Why a page cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("`{cursor}` is not a ledger cursor (pass a page's `next_cursor` back as it is)")]
    ParseCursor { cursor: String },
    #[error("limit must be 1 to {MAX_PAGE}, not {limit}")]
    CheckLimit { limit: u32 },
    #[error("read the ledger")]
    Read(#[source] StoreError),
}

/// The page after `cursor` (from the start without one), of at most
/// `limit` rows ([`DEFAULT_PAGE`] without one).
pub async fn page(
    store: &dyn Store,
    cursor: Option<&str>,
    limit: Option<u32>,
) -> Result<LedgerPage, LedgerError> {
    let limit = limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(LedgerError::CheckLimit { limit });
    }
    let after = match cursor {
        None => 0,
        Some(c) => c.parse::<i64>().ok().filter(|p| *p >= 0).ok_or_else(|| {
            // Named back cut: a megabyte of query is not echoed.
            LedgerError::ParseCursor {
                cursor: cut(c, Cut::chars(64)),
            }
        })?,
    };
    let rows = store
        .ledger(Some(after), limit)
        .await
        .map_err(LedgerError::Read)?;
    let last = rows.last().map_or(after, |(position, _)| *position);
    Ok(LedgerPage {
        more: rows.len() == limit as usize,
        calls: rows.into_iter().map(|(_, call)| call).collect(),
        next_cursor: last.to_string(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::store::fixtures;

    #[tokio::test]
    async fn pages_follow_the_recording_order_and_resume_after_the_cursor() {
        let store = crate::store::SqliteStore::open_in_memory().await.unwrap();
        for id in ["job-a", "job-b"] {
            store.insert_job(&fixtures::job(id, 0), "{}").await.unwrap();
        }
        // Recorded interleaved: the ledger's order is the recording's.
        let recorded: Vec<ModelCall> = [("job-a", 1), ("job-b", 1), ("job-a", 2)]
            .into_iter()
            .map(|(job, seq)| fixtures::model_call(job, seq))
            .collect();
        for call in &recorded {
            store.insert_model_call(call).await.unwrap();
        }
        let first = page(&store, None, Some(2)).await.unwrap();
        let second = page(&store, Some(&first.next_cursor), Some(2))
            .await
            .unwrap();
        let empty = page(&store, Some(&second.next_cursor), None).await.unwrap();
        assert_eq!(
            (
                first
                    .calls
                    .iter()
                    .chain(&second.calls)
                    .cloned()
                    .collect::<Vec<_>>(),
                first.more,
                second.more,
                empty.calls.len(),
                empty.next_cursor == second.next_cursor,
            ),
            (recorded, true, false, 0, true)
        );
        let refused = (
            page(&store, Some("x"), None).await.unwrap_err().to_string(),
            page(&store, None, Some(0)).await.unwrap_err().to_string(),
            page(&store, Some(&"9".repeat(10_000)), None)
                .await
                .unwrap_err()
                .to_string(),
        );
        assert_eq!(
            refused,
            (
                "`x` is not a ledger cursor (pass a page's `next_cursor` back as it is)".into(),
                "limit must be 1 to 500, not 0".into(),
                format!(
                    "`{}…` is not a ledger cursor (pass a page's `next_cursor` back as it is)",
                    "9".repeat(64)
                ),
            )
        );
    }
}

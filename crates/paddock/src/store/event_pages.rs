//! A job's events read a page at a time: what every reader of a whole
//! history uses (`paddock show`, the reaper, a closeout, `paddock
//! publish`). A job may store `limits.max_records` events of up to
//! `limits.max_event_bytes` each (a hostile job writes as many output lines
//! as it may), so no reader holds more than one page of them
//! ([`PAGE`] events) beside what it keeps of each.

use paddock_protocol::event::AgentEvent;

use super::{Store, StoreError};

/// How many events one read holds.
pub const PAGE: u32 = 256;

/// Calls `each` with every event of job `job_id` after seq `after`, in seq
/// order, reading them [`PAGE`] at a time; events appended meanwhile are
/// read too, up to the page that comes back short.
pub async fn each_event(
    store: &dyn Store,
    job_id: &str,
    after: u64,
    mut each: impl FnMut(&AgentEvent) + Send,
) -> Result<(), StoreError> {
    let mut after = after;
    loop {
        let page = store.events_page(job_id, after, PAGE).await?;
        for event in &page {
            each(event);
            after = event.seq;
        }
        if page.len() < PAGE as usize {
            return Ok(());
        }
    }
}

/// The last of job `job_id`'s events that `pick` makes something of (what
/// it made of it), read a page at a time.
pub async fn last_of<T: Send>(
    store: &dyn Store,
    job_id: &str,
    mut pick: impl FnMut(&AgentEvent) -> Option<T> + Send,
) -> Result<Option<T>, StoreError> {
    let mut last = None;
    each_event(store, job_id, 0, |e| {
        if let Some(found) = pick(e) {
            last = Some(found);
        }
    })
    .await?;
    Ok(last)
}

/// The most events one read of this thread returned (tests: a reader of
/// a long history must never hold more than a page). SQLite's reads note
/// theirs; a `#[tokio::test]` runs its tasks on its own thread.
#[cfg(test)]
pub(crate) mod most_read {
    use std::cell::Cell;

    thread_local! {
        static MOST: Cell<usize> = const { Cell::new(0) };
    }

    /// Notes a read of `rows` events.
    pub(crate) fn note(rows: usize) {
        MOST.with(|m| m.set(m.get().max(rows)));
    }

    /// The most events one read returned since the last call (which
    /// starts the count again).
    pub(crate) fn take() -> usize {
        MOST.with(|m| m.replace(0))
    }
}

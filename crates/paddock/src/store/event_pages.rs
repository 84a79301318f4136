//! A job's events read a page at a time: what every reader of a whole
//! history uses (the API's and the dashboard's event streams, `paddock
//! events`, `paddock show`, the reaper, a closeout, `paddock publish`). A
//! job may store `limits.max_records` events of up to
//! `limits.max_event_bytes` in each field (a hostile job writes as many
//! output lines, each as long, as it may), so a page is bounded twice: at
//! most [`PAGE`] events, and no more than [`PAGE_BYTES`] of their stored
//! bodies (one larger event comes alone). A page can thus come back short
//! before the end: the end is the page that comes back empty ([`Pages`]).

use paddock_protocol::event::AgentEvent;

use super::{Store, StoreError};

/// How many events one read holds at most.
pub const PAGE: u32 = 256;

/// How many bytes of stored event bodies one read holds at most, unless
/// its first event alone is larger (it is read alone).
pub const PAGE_BYTES: u64 = 8 << 20;

/// The last seq of a page given the `(seq, body bytes)` of the events
/// after its start, in seq order: as many as fit in [`PAGE_BYTES`], at
/// least the first; `None` when there are none.
pub(crate) fn fitting(sizes: &[(i64, i64)]) -> Option<i64> {
    let mut last = None;
    let mut bytes: u64 = 0;
    for &(seq, size) in sizes {
        bytes = bytes.saturating_add(u64::try_from(size).unwrap_or(0));
        if last.is_some() && bytes > PAGE_BYTES {
            break;
        }
        last = Some(seq);
    }
    last
}

/// A job's events after a seq, read a page at a time
/// ([`Store::events_page`]) until one comes back empty: events appended
/// meanwhile are read too.
#[derive(Debug)]
pub struct Pages<'a> {
    store: &'a dyn Store,
    job_id: &'a str,
    after: u64,
}

impl<'a> Pages<'a> {
    /// Job `job_id`'s events after seq `after`.
    pub fn new(store: &'a dyn Store, job_id: &'a str, after: u64) -> Self {
        Pages {
            store,
            job_id,
            after,
        }
    }

    /// The next page; `None` past the last stored event.
    pub async fn next(&mut self) -> Result<Option<Vec<AgentEvent>>, StoreError> {
        let page = self
            .store
            .events_page(self.job_id, self.after, PAGE)
            .await?;
        match page.last() {
            Some(last) => {
                self.after = last.seq;
                Ok(Some(page))
            }
            None => Ok(None),
        }
    }
}

/// Calls `each` with every event of job `job_id` after seq `after`, in seq
/// order, a page at a time ([`Pages`]); events appended meanwhile are read
/// too.
pub async fn each_event(
    store: &dyn Store,
    job_id: &str,
    after: u64,
    mut each: impl FnMut(&AgentEvent) + Send,
) -> Result<(), StoreError> {
    let mut pages = Pages::new(store, job_id, after);
    while let Some(page) = pages.next().await? {
        page.iter().for_each(&mut each);
    }
    Ok(())
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

/// The most events one read of this thread returned, and the most bytes
/// of event bodies (as stored: their JSON) (tests: a reader of a long
/// history must never hold more than a page). SQLite's reads note theirs;
/// a `#[tokio::test]` runs its tasks on its own thread.
#[cfg(test)]
pub(crate) mod most_read {
    use std::cell::Cell;

    use paddock_protocol::event::AgentEvent;

    thread_local! {
        static MOST: Cell<usize> = const { Cell::new(0) };
        static MOST_BYTES: Cell<usize> = const { Cell::new(0) };
    }

    /// Notes a read of `page`.
    pub(crate) fn note(page: &[AgentEvent]) {
        let bytes = page
            .iter()
            .map(|e| serde_json::to_string(&e.body).map_or(0, |b| b.len()))
            .sum::<usize>();
        MOST.with(|m| m.set(m.get().max(page.len())));
        MOST_BYTES.with(|m| m.set(m.get().max(bytes)));
    }

    /// The most events one read returned since the last call (which
    /// starts the count again).
    pub(crate) fn take() -> usize {
        MOST.with(|m| m.replace(0))
    }

    /// The most bytes of event bodies one read returned since the last
    /// call (which starts the count again).
    pub(crate) fn take_bytes() -> usize {
        MOST_BYTES.with(|m| m.replace(0))
    }
}

//! The job's records in the store, bounded (`limits.max_records`): its
//! events, its egress attempts and its ledger rows, counted together,
//! whoever writes them (the runner's emitter, the egress records it takes
//! in, the job's broker). A record Paddock writes of its own accord (the
//! events of a job's phases, its stop, its conclusion) and the ledger row
//! of a call written ahead of going upstream (billing is never lost) are
//! always kept, and counted. A record the job causes (an event of its
//! output, a denial, a refused request's row and events, a denied
//! connection) is kept only while the count is below the limit; the first
//! past it is not kept and trips the limit, and so is every later one,
//! counted as not kept. The runner stops a tripped job as it stops a
//! cancelled one and fails it naming the limit and how many records were
//! not kept. Stopping at the count bounds the rate's cost too: a job
//! writing at wire speed makes at most the limit's records before it is
//! stopped, however fast it goes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

/// The record count of one job and its limit.
#[derive(Debug)]
pub struct RecordLimit {
    max: u64,
    /// Records kept so far.
    kept: AtomicU64,
    /// Records the job caused past the limit, not kept.
    refused: AtomicU64,
    /// True once a record was refused.
    tripped: watch::Sender<bool>,
}

impl RecordLimit {
    /// A job's count, none kept yet, `max` its limit.
    pub fn new(max: u64) -> Arc<RecordLimit> {
        Arc::new(RecordLimit {
            max,
            kept: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            tripped: watch::Sender::new(false),
        })
    }

    /// Counts a record kept whatever the count (Paddock's own, a call's
    /// row written ahead).
    pub fn charge(&self) {
        self.kept.fetch_add(1, Ordering::SeqCst);
    }

    /// Counts a record the job caused: true when it is kept (the count
    /// below the limit); false past it, the limit tripped.
    pub fn admit(&self) -> bool {
        let kept = self
            .kept
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.max).then_some(n + 1)
            })
            .is_ok();
        if !kept {
            self.refused.fetch_add(1, Ordering::SeqCst);
            self.tripped
                .send_if_modified(|t| !std::mem::replace(t, true));
        }
        kept
    }

    /// Records kept so far.
    pub fn kept(&self) -> u64 {
        self.kept.load(Ordering::SeqCst)
    }

    /// Resolves once a record was refused; never otherwise.
    pub fn tripped(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut tripped = self.tripped.subscribe();
        async move {
            // The sender lives as long as this count, which the job holds.
            if tripped.wait_for(|t| *t).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Why the job is stopped, once a record was refused: the limit and
    /// how many records were not kept.
    pub fn why(&self) -> Option<String> {
        let refused = self.refused.load(Ordering::SeqCst);
        (refused > 0).then(|| {
            format!(
                "the job made more than limits.max_records ({}) records in the store (its \
                 events, egress attempts and ledger rows); it was stopped, and what it made \
                 past the limit is not kept ({refused} records)",
                self.max
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the job causes are kept below the limit, refused past it
    /// (the first one trips it, each counted); Paddock's own are kept
    /// past it, and take the job's room below it.
    #[tokio::test]
    async fn records_past_the_limit_are_refused_and_trip_it() {
        let limit = RecordLimit::new(3);
        let tripped = limit.tripped();
        limit.charge();
        let first = [limit.admit(), limit.admit(), limit.admit(), limit.admit()];
        let before = limit.why();
        limit.charge();
        let after = (limit.admit(), limit.kept());
        tokio::time::timeout(std::time::Duration::from_secs(10), tripped)
            .await
            .unwrap();
        assert_eq!(
            (first, before.is_some(), after, limit.why()),
            (
                [true, true, false, false],
                true,
                (false, 4),
                Some(
                    "the job made more than limits.max_records (3) records in the store (its \
                     events, egress attempts and ledger rows); it was stopped, and what it \
                     made past the limit is not kept (3 records)"
                        .to_string()
                )
            )
        );
    }

    /// Within the limit nothing trips.
    #[tokio::test]
    async fn within_the_limit_nothing_trips() {
        let limit = RecordLimit::new(2);
        let kept = [limit.admit(), limit.admit()];
        // The watch is read at the first poll.
        let tripped = futures::FutureExt::now_or_never(limit.tripped()).is_some();
        assert_eq!((kept, tripped, limit.why()), ([true, true], false, None));
    }
}

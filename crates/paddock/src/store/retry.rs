//! Retries of the store's writes (and a running job's reads) that failed
//! for a reason that passes: a PostgreSQL connection dropped or terminated,
//! a server restarting or shutting down, a serialization failure or a
//! deadlock, a pool with no free connection in time, SQLite busy past its
//! timeout. Each is retried with a growing pause (from [`FIRST_PAUSE`],
//! doubling, at most [`MAX_PAUSE`]) until [`BUDGET`] has passed; any other
//! error is returned at once. A write whose commit landed but whose answer
//! was lost is retried too, so every retried write is idempotent: an
//! event or a ledger row already stored identically counts as written
//! (`append_event`, `insert_model_call`, `record_egress`, each keyed on
//! its job and seq), an update sets the same values again, and a job's
//! compare-and-set that finds the very record it wrote is done
//! ([`finished_already`], a reclaim's [`reclaimed_already`], an unclaim's
//! [`unclaimed_already`]), and a queue's claim is keyed on its host and
//! time (`claimed_at`): a retry first looks for the job that key claimed
//! (`claimed_by`), so a claim whose answer was lost is never left running
//! without its server.

use std::future::Future;
use std::time::Duration;

use super::StoreError;

/// The first pause before a retry.
pub const FIRST_PAUSE: Duration = Duration::from_millis(50);

/// The longest pause between two tries.
pub const MAX_PAUSE: Duration = Duration::from_secs(2);

/// How long a write is retried before its error is returned: longer than
/// a PostgreSQL server takes to restart.
pub const BUDGET: Duration = Duration::from_secs(30);

impl StoreError {
    /// Whether the error may pass on its own (see the module's list): the
    /// same statement, tried again later, can succeed.
    pub fn is_transient(&self) -> bool {
        let mut source = std::error::Error::source(self);
        while let Some(s) = source {
            if let Some(e) = s.downcast_ref::<sqlx::Error>() {
                return sqlx_transient(e);
            }
            source = s.source();
        }
        false
    }
}

/// SQLSTATEs (PostgreSQL) and result codes (SQLite, extended) that pass.
fn sqlx_transient(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::Protocol(_) => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            let code = code.as_ref();
            // PostgreSQL: connection exceptions (class 08), admin or crash
            // shutdown, cannot connect now, serialization failure,
            // deadlock, too many connections.
            code.starts_with("08")
                || matches!(code, "57P01" | "57P02" | "57P03" | "40001" | "40P01" | "53300")
                // SQLite: BUSY, LOCKED and their extended codes.
                || matches!(code, "5" | "6" | "261" | "262" | "517" | "773")
        }),
        _ => false,
    }
}

/// Runs `op` until it succeeds, fails for good, or [`BUDGET`] has passed
/// (its last error then). `what` names the write in the log. The
/// attempt's number (0 first) is handed to `op`: an attempt after a
/// failed one may find its own earlier write committed.
pub async fn transient<T, F, Fut>(what: &str, op: F) -> Result<T, StoreError>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    within(BUDGET, what, op).await
}

/// [`transient`] with another budget.
async fn within<T, F, Fut>(budget: Duration, what: &str, mut op: F) -> Result<T, StoreError>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    let start = tokio::time::Instant::now();
    let mut pause = FIRST_PAUSE;
    let mut attempt = 0u32;
    loop {
        match op(attempt).await {
            Err(e) if e.is_transient() && start.elapsed() + pause <= budget => {
                tracing::warn!(
                    write = what,
                    attempt,
                    error = %crate::error_chain::chain(&e),
                    "the store failed for a reason that passes: retrying in {} ms",
                    pause.as_millis()
                );
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
                attempt = attempt.saturating_add(1);
            }
            done => return done,
        }
    }
}

/// Whether a compare-and-set on job `job.id` that failed with
/// `StatusChanged` on a retry found the very record it was writing: its
/// earlier attempt committed, only its answer was lost.
pub async fn finished_already<S: super::Store + ?Sized>(
    store: &S,
    job: &paddock_protocol::JobRecord,
) -> bool {
    matches!(store.job(&job.id).await, Ok(Some(stored)) if &stored == job)
}

/// Whether a reclaim of job `job.id` that was refused on a retry found
/// the very record it was writing (its totals aside, which the reclaim
/// sums from the ledger): its earlier attempt committed, only its answer
/// was lost. Another reaper's record differs (its reason names its host,
/// its end is its own clock's).
pub async fn reclaimed_already<S: super::Store + ?Sized>(
    store: &S,
    job: &paddock_protocol::JobRecord,
) -> bool {
    match store.job(&job.id).await {
        Ok(Some(stored)) => {
            let mine = paddock_protocol::JobRecord {
                tokens: stored.tokens,
                cost_micros: stored.cost_micros,
                model_calls: stored.model_calls,
                ..job.clone()
            };
            mine == stored
        }
        _ => false,
    }
}

/// Whether an unclaim of job `id` with `reason` that was refused on a
/// retry finds it queued again with that very reason: its earlier attempt
/// committed, only its answer was lost.
pub async fn unclaimed_already<S: super::Store + ?Sized>(
    store: &S,
    id: &str,
    reason: &str,
) -> bool {
    matches!(
        store.job(id).await,
        Ok(Some(stored)) if stored.status == paddock_protocol::JobStatus::Queued
            && stored.reason.as_deref() == Some(reason)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn io_error() -> StoreError {
        StoreError::AppendEvent {
            job_id: "j1".into(),
            seq: 1,
            source: sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::BrokenPipe)),
        }
    }

    #[tokio::test]
    async fn a_transient_failure_is_retried_until_it_passes() {
        let tries = AtomicU32::new(0);
        let got = transient("test", |attempt| {
            let n = tries.fetch_add(1, Ordering::SeqCst);
            assert_eq!(n, attempt);
            async move {
                if n < 3 {
                    Err(io_error())
                } else {
                    Ok(n)
                }
            }
        })
        .await
        .unwrap();
        assert_eq!((got, tries.load(Ordering::SeqCst)), (3, 4));
    }

    #[tokio::test]
    async fn a_lasting_failure_ends_within_the_budget() {
        let budget = Duration::from_millis(400);
        let tries = AtomicU32::new(0);
        let start = tokio::time::Instant::now();
        let err = within(budget, "test", |_| {
            tries.fetch_add(1, Ordering::SeqCst);
            async { Err::<(), _>(io_error()) }
        })
        .await
        .unwrap_err();
        let waited = start.elapsed();
        // Pauses of 50, 100 and 200 ms fit in 400 ms; the next (400) does not.
        assert_eq!(
            (err.is_transient(), tries.load(Ordering::SeqCst)),
            (true, 4)
        );
        assert!(waited >= Duration::from_millis(350), "{waited:?}");
    }

    #[tokio::test]
    async fn a_lasting_error_is_not_retried() {
        let tries = AtomicU32::new(0);
        let err = transient("test", |_| {
            tries.fetch_add(1, Ordering::SeqCst);
            async {
                Err::<(), _>(StoreError::NoSuchJob {
                    job_id: "j1".into(),
                })
            }
        })
        .await
        .unwrap_err();
        assert_eq!(
            (err.to_string(), tries.load(Ordering::SeqCst)),
            ("no job j1 in the store".to_owned(), 1)
        );
    }

    #[test]
    fn closed_pools_and_decode_errors_do_not_pass() {
        let closed = StoreError::AppendEvent {
            job_id: "j1".into(),
            seq: 1,
            source: sqlx::Error::PoolClosed,
        };
        assert!(!closed.is_transient());
        assert!(io_error().is_transient());
        let timed_out = StoreError::ReadJob {
            job_id: "j1".into(),
            source: sqlx::Error::PoolTimedOut,
        };
        assert!(timed_out.is_transient());
    }
}

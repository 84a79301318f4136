//! A running job's heartbeat in the store (docs/store.md, "Several hosts,
//! one database"): the process running a job renews the job's
//! `heartbeat_at` every [`Liveness::interval`] (`Store::heartbeat`, a
//! compare-and-set on the job still `running` and owned by this jobs
//! directory). A reaper on another host reclaims a job whose heartbeat is
//! older than its [`Liveness::ttl`]; a renewal that finds the job no
//! longer its own (reclaimed, or ended by someone else) sets the `lost`
//! [`Latch`], which stops the job as an API cancel would (its events and
//! ledger rows are kept); whether that was a reclaim is the runner's to
//! say, once it knows whether the job's own end was recorded first. Every
//! [`Liveness::cancel_poll`] ([`CANCEL_POLL`] by default; or every
//! renewal, when they are more frequent), and at once when the store
//! announces a cancel of the job (`Store::cancel_notices`: asked in this
//! process, or by any process: on PostgreSQL `LISTEN`/`NOTIFY`, on
//! SQLite a touched file, which names no job), the
//! task also reads whether another process asked to cancel the job
//! (`Store::cancel_requested`, set by `Store::request_cancel`) and sets the
//! `cancel` latch, which stops the job exactly as a local cancel does; it
//! keeps renewing while the job stops. A renewal or read the store refuses
//! for another reason (the database unreachable) is logged and retried at
//! the next tick: the owner keeps running, and learns at its next
//! successful renewal whether another host took the job meanwhile.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::Notify;

use crate::store::{Owner, SharedStore};

pub use crate::config::{
    DEFAULT_HEARTBEAT as DEFAULT_INTERVAL, DEFAULT_HEARTBEAT_TTL as DEFAULT_TTL,
};

/// Who this process's jobs belong to and how their liveness is judged
/// (`[hosts]` in the config file, docs/cli.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Liveness {
    /// This jobs directory's identity (`crate::host_id`).
    pub owner: Owner,
    /// How often this process renews its jobs' heartbeats.
    pub interval: Duration,
    /// How stale another host's heartbeat must be to be reclaimed.
    pub ttl: Duration,
    /// How many times a reclaimed job from a server's queue is queued
    /// again (`crate::requeue`).
    pub requeues: u32,
    /// How often a running job reads whether another process asked to
    /// cancel it, when it is not woken first (`Store::cancel_notices`);
    /// never less often than it renews.
    pub cancel_poll: Duration,
}

/// How often a running job looks for a cancel asked by another process
/// when its heartbeat is renewed less often and no wake-up came
/// (`[hosts] cancel_poll_secs`): a cancel whose notice was missed reaches
/// the job within this (plus one read of the store), not within a
/// heartbeat interval (10 s by default).
pub const CANCEL_POLL: Duration = Duration::from_secs(1);

/// Set once, by the renewing task (the job found taken, or a cancel asked
/// from elsewhere); waited for by the job.
#[derive(Debug, Default)]
pub struct Latch {
    set: AtomicBool,
    notify: Notify,
}

impl Latch {
    /// Whether it was set.
    pub fn is_set(&self) -> bool {
        self.set.load(Ordering::SeqCst)
    }

    /// Resolves once it is set.
    pub async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_set() {
                return;
            }
            notified.await;
        }
    }

    /// Sets it and wakes whoever waits.
    pub fn mark(&self) {
        self.set.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }
}

/// The renewing task of one job; it stops when this is dropped.
#[derive(Debug)]
pub struct Heartbeat {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Where the renewing task says what it found: the job taken (`lost`), a
/// cancel asked by another process (`cancel`).
#[derive(Debug, Clone, Default)]
pub struct Found {
    pub lost: Arc<Latch>,
    pub cancel: Arc<Latch>,
}

/// Renews job `job_id`'s heartbeat as `host` every `interval` until the
/// returned [`Heartbeat`] is dropped or a renewal finds the job taken
/// (then `found.lost` is set and renewals stop); looks for a cancel asked
/// from elsewhere when the store announces one for this job
/// (`Store::cancel_notices`: at once) and every `cancel_poll` or
/// `interval`, the shorter (then `found.cancel` is set, and renewals go
/// on while the job stops).
pub fn start(
    store: SharedStore,
    job_id: String,
    host: String,
    (interval, cancel_poll): (Duration, Duration),
    found: Found,
) -> Heartbeat {
    let poll = interval.min(cancel_poll).max(Duration::from_millis(1));
    // Renewed every so many polls: never less often than `interval`.
    let every = (interval.as_nanos() / poll.as_nanos().max(1)).max(1);
    let task = tokio::spawn(async move {
        // Listening before the first read below: a cancel asked before it
        // is read, one asked after it announced.
        let mut notices = store.cancel_notices().await;
        let mut tick = tokio::time::interval(poll);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first tick is immediate: the record was written just now.
        tick.tick().await;
        let mut polls: u128 = 0;
        let mut listening = true;
        read_cancel(&*store, &job_id, &found).await;
        loop {
            let renew = tokio::select! {
                _ = tick.tick() => true,
                notice = notices.recv(), if listening && !found.cancel.is_set() => {
                    match notice {
                        Ok(id) if id == job_id || id == crate::store::ANY_JOB => {
                            read_cancel(&*store, &job_id, &found).await;
                        }
                        Ok(_) => {}
                        // Missed some: one of them may be this job's.
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                            read_cancel(&*store, &job_id, &found).await;
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => listening = false,
                    }
                    false
                }
            };
            if !renew {
                continue;
            }
            polls += 1;
            if polls.is_multiple_of(every) {
                match store
                    .heartbeat(&job_id, &host, OffsetDateTime::now_utc())
                    .await
                {
                    Ok(true) => {}
                    Ok(false) | Err(crate::store::StoreError::NoSuchJob { .. }) => {
                        // Reclaimed, or ended (perhaps by itself just now):
                        // the runner tells which.
                        tracing::debug!("job {job_id}: no longer running as this host's");
                        found.lost.mark();
                        return;
                    }
                    Err(e) => tracing::warn!("job {job_id}: cannot renew its heartbeat: {e}"),
                }
            }
            read_cancel(&*store, &job_id, &found).await;
        }
    });
    Heartbeat { task }
}

/// Reads whether another process asked to cancel job `job_id`, unless
/// `found.cancel` is set already; sets it when one did.
async fn read_cancel(store: &dyn crate::store::Store, job_id: &str, found: &Found) {
    if found.cancel.is_set() {
        return;
    }
    match store.cancel_requested(job_id).await {
        Ok(Some(_)) => {
            tracing::info!("job {job_id}: a cancel was asked through the store: stopping it");
            found.cancel.mark();
        }
        Ok(None) => {}
        Err(e) => tracing::warn!("job {job_id}: cannot read whether a cancel was asked: {e}"),
    }
}

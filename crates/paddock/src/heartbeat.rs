//! A running job's heartbeat in the store (docs/store.md, "Several hosts,
//! one database"): the process running a job renews the job's
//! `heartbeat_at` every [`Liveness::interval`] (`Store::heartbeat`, a
//! compare-and-set on the job still `running` and owned by this jobs
//! directory). A reaper on another host reclaims a job whose heartbeat is
//! older than its [`Liveness::ttl`]; a renewal that finds the job no
//! longer its own (reclaimed, or ended by someone else) sets [`Lost`],
//! which stops the job as an API cancel would (its events and ledger rows
//! are kept). A renewal the store refuses for another reason (the
//! database unreachable) is logged and retried at the next tick: the
//! owner keeps running, and learns at its next successful renewal whether
//! another host took the job meanwhile.

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
}

/// Set once a renewal finds the job no longer this process's; shared by
/// the renewing task and the job.
#[derive(Debug, Default)]
pub struct Lost {
    set: AtomicBool,
    notify: Notify,
}

impl Lost {
    /// Whether the job was found taken.
    pub fn is_set(&self) -> bool {
        self.set.load(Ordering::SeqCst)
    }

    /// Resolves once the job is found taken.
    pub async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_set() {
                return;
            }
            notified.await;
        }
    }

    fn mark(&self) {
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

/// Renews job `job_id`'s heartbeat as `host` every `interval` until the
/// returned [`Heartbeat`] is dropped or a renewal finds the job taken
/// (then `lost` is set and renewals stop).
pub fn start(
    store: SharedStore,
    job_id: String,
    host: String,
    interval: Duration,
    lost: Arc<Lost>,
) -> Heartbeat {
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first tick is immediate: the record was written just now.
        tick.tick().await;
        loop {
            tick.tick().await;
            match store
                .heartbeat(&job_id, &host, OffsetDateTime::now_utc())
                .await
            {
                Ok(true) => {}
                Ok(false) | Err(crate::store::StoreError::NoSuchJob { .. }) => {
                    tracing::warn!(
                        "job {job_id}: no longer this host's in the store (another host's \
                         reaper reclaimed it, or it was ended elsewhere): stopping it"
                    );
                    lost.mark();
                    return;
                }
                Err(e) => tracing::warn!("job {job_id}: cannot renew its heartbeat: {e}"),
            }
        }
    });
    Heartbeat { task }
}

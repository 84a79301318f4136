//! The live events of the jobs this server runs: each running job's
//! runner updates are forwarded into a backlog of its stored events that
//! any number of followers read from, each at its own pace. The backlog is
//! bounded in bytes, not in events (a job's event may be up to 16 MiB):
//! past [`BACKLOG_BYTES`] of events (their JSON size) its oldest are
//! dropped, the newest always kept. A follower that falls behind them
//! loses events here, never in the store: it is told it lagged and fills
//! the gap from the store (`events.rs`). The entry goes when the job's
//! updates end (the runner is done with it), which ends every follower's
//! reading once it has read what is left.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use paddock_protocol::AgentEvent;
use tokio::sync::{broadcast, Notify};

use super::measured::Measured;
use crate::runner::JobUpdate;

/// The most bytes of events (their JSON size) a job's backlog holds; its
/// newest event is held whatever its size.
pub const BACKLOG_BYTES: usize = 8 << 20;

/// The live events of this server's running jobs, by job id.
#[derive(Debug, Clone, Default)]
pub struct Hub {
    live: Arc<Mutex<HashMap<String, Arc<Live>>>>,
}

/// One job's live events: its backlog and the followers' wake-up.
#[derive(Debug, Default)]
struct Live {
    backlog: Mutex<Backlog>,
    pushed: Notify,
}

/// The newest events of a job, at most [`BACKLOG_BYTES`] of them (or its
/// newest one alone).
#[derive(Debug, Default)]
struct Backlog {
    /// Each event with its JSON size, oldest first.
    events: VecDeque<Measured>,
    /// The sum of their sizes.
    bytes: usize,
    /// How many events were dropped from the front: the first held one
    /// is the job's `dropped`th live event (from 0).
    dropped: u64,
    /// Whether the job's updates ended (no more events come).
    ended: bool,
}

/// Why a follower got no event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Missed {
    /// It fell behind the backlog: this many events were dropped before
    /// it read them (the store has them).
    #[error("fell {0} events behind")]
    Lagged(u64),
    /// The job's updates ended and it read every event held.
    #[error("the job's live events ended")]
    Ended,
}

/// A follower of one job's live events from when it subscribed.
#[derive(Debug)]
pub struct Follower {
    live: Arc<Live>,
    /// The index of the next live event it reads (as `Backlog::dropped`).
    next: u64,
}

/// Marks a job's live events ended when the forwarding task ends, however
/// it ends (its updates closed, or the runtime dropped it).
struct Ending(Arc<Live>);

impl Drop for Ending {
    fn drop(&mut self) {
        self.0.backlog().ended = true;
        self.0.pushed.notify_waiters();
    }
}

impl Live {
    fn backlog(&self) -> MutexGuard<'_, Backlog> {
        self.backlog.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds `event` to the backlog, measured once for it and for every
    /// follower, dropping its oldest past the budget, and wakes the
    /// followers.
    fn push(&self, event: AgentEvent) {
        let event = Measured::new(event);
        {
            let mut backlog = self.backlog();
            backlog.bytes = backlog.bytes.saturating_add(event.bytes);
            backlog.events.push_back(event);
            while backlog.bytes > BACKLOG_BYTES && backlog.events.len() > 1 {
                if let Some(dropped) = backlog.events.pop_front() {
                    backlog.bytes = backlog.bytes.saturating_sub(dropped.bytes);
                    backlog.dropped += 1;
                }
            }
        }
        self.pushed.notify_waiters();
    }
}

impl Hub {
    fn live(&self) -> MutexGuard<'_, HashMap<String, Arc<Live>>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forwards the events of job `id` from its runner `updates` until they
    /// end.
    pub fn attach(&self, id: &str, mut updates: broadcast::Receiver<JobUpdate>) {
        use broadcast::error::RecvError;
        let live = Arc::new(Live::default());
        self.live().insert(id.to_owned(), Arc::clone(&live));
        let hub = self.clone();
        let id = id.to_owned();
        tokio::spawn(async move {
            let ending = Ending(live);
            loop {
                match updates.recv().await {
                    Ok(JobUpdate::Event(e)) => ending.0.push(e),
                    Ok(JobUpdate::Call { .. }) | Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => break,
                }
            }
            let mut live = hub.live();
            // Only this job's entry: a later run of the same id may have
            // attached its own meanwhile.
            if live.get(&id).is_some_and(|l| Arc::ptr_eq(l, &ending.0)) {
                live.remove(&id);
            }
        });
    }

    /// The live events of job `id` from now on, if this server runs it.
    pub fn subscribe(&self, id: &str) -> Option<Follower> {
        let live = Arc::clone(self.live().get(id)?);
        let next = {
            let backlog = live.backlog();
            backlog.dropped + backlog.events.len() as u64
        };
        Some(Follower { live, next })
    }

    /// What job `id`'s backlog holds: its events' seqs and their bytes
    /// (tests).
    #[cfg(test)]
    fn held(&self, id: &str) -> Option<(Vec<u64>, usize)> {
        let live = Arc::clone(self.live().get(id)?);
        let backlog = live.backlog();
        let seqs = backlog.events.iter().map(|e| e.event.seq).collect();
        Some((seqs, backlog.bytes))
    }
}

impl Follower {
    /// The next live event, measured; [`Missed::Lagged`] when the backlog dropped
    /// some this follower had not read (it then reads on from the oldest
    /// held), [`Missed::Ended`] once the job's events ended and it read
    /// them all.
    pub async fn recv(&mut self) -> Result<Measured, Missed> {
        loop {
            let pushed = self.live.pushed.notified();
            tokio::pin!(pushed);
            // Woken by any push from here on, even one before the await.
            pushed.as_mut().enable();
            {
                let backlog = self.live.backlog();
                if self.next < backlog.dropped {
                    let missed = backlog.dropped - self.next;
                    self.next = backlog.dropped;
                    return Err(Missed::Lagged(missed));
                }
                let held = usize::try_from(self.next - backlog.dropped).unwrap_or(usize::MAX);
                if let Some(event) = backlog.events.get(held) {
                    self.next += 1;
                    return Ok(event.clone());
                }
                if backlog.ended {
                    return Err(Missed::Ended);
                }
            }
            pushed.await;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::server::measured::json_len;
    use crate::store::fixtures::event;
    use paddock_protocol::EventBody;

    /// An event of job-1 at `seq` whose text is `len` bytes.
    fn text(seq: u64, len: usize) -> AgentEvent {
        event(
            "job-1",
            seq,
            EventBody::Text {
                text: "x".repeat(len),
            },
        )
    }

    /// Waits until job-1's backlog holds the event at `seq` (the
    /// forwarding task is its own).
    async fn until_held(hub: &Hub, seq: u64) {
        for _ in 0..1000 {
            if hub
                .held("job-1")
                .is_some_and(|(seqs, _)| seqs.last() == Some(&seq))
            {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("event {seq} never reached the backlog");
    }

    /// A job writing large events while a follower reads none: the
    /// backlog holds at most `BACKLOG_BYTES` of them (before, 1024 events
    /// whatever their size: up to 16 GiB of 16 MiB events); the follower
    /// is told how many it missed, then reads the held ones in order, then
    /// the end. One event over the budget is held alone. A follower gets
    /// each event with the size the hub measured once for all of them.
    #[tokio::test]
    async fn the_backlog_is_bounded_in_bytes_and_a_lagging_follower_is_told() {
        let hub = Hub::default();
        let (updates, rx) = broadcast::channel(16);
        hub.attach("job-1", rx);
        let mut follower = hub.subscribe("job-1").unwrap();
        // Events of a quarter of the budget: four fit (with their JSON
        // around the text, three and a bit: three are held).
        let quarter = BACKLOG_BYTES / 4;
        for seq in 1..=10 {
            updates.send(JobUpdate::Event(text(seq, quarter))).unwrap();
            until_held(&hub, seq).await;
        }
        let (seqs, bytes) = hub.held("job-1").unwrap();
        assert_eq!(
            (seqs, bytes),
            (
                vec![8, 9, 10],
                (8..=10).map(|seq| json_len(&text(seq, quarter))).sum()
            )
        );
        assert!(bytes <= BACKLOG_BYTES);

        // A late subscriber starts after the newest.
        let mut late = hub.subscribe("job-1").unwrap();
        let huge = text(11, BACKLOG_BYTES + 1);
        updates.send(JobUpdate::Event(huge.clone())).unwrap();
        until_held(&hub, 11).await;
        assert_eq!(hub.held("job-1").unwrap(), (vec![11], json_len(&huge)));
        drop(updates);
        let mut read = Vec::new();
        loop {
            match follower.recv().await {
                Ok(e) => read.push(Ok(e.event.seq)),
                Err(missed) => {
                    read.push(Err(missed));
                    if missed == Missed::Ended {
                        break;
                    }
                }
            }
        }
        let measured = Measured {
            bytes: json_len(&huge),
            event: huge,
        };
        assert_eq!(
            (read, late.recv().await, late.recv().await),
            (
                vec![Err(Missed::Lagged(10)), Ok(11), Err(Missed::Ended)],
                Ok(measured),
                Err(Missed::Ended)
            )
        );
    }

    /// A follower keeping up reads every event once, in order, waiting
    /// for each; the job's entry goes when its updates end.
    #[tokio::test]
    async fn a_follower_keeping_up_reads_every_event_once() {
        let hub = Hub::default();
        let (updates, rx) = broadcast::channel(16);
        hub.attach("job-1", rx);
        let mut follower = hub.subscribe("job-1").unwrap();
        let reader = tokio::spawn(async move {
            let mut seqs = Vec::new();
            while let Ok(e) = follower.recv().await {
                seqs.push(e.event.seq);
            }
            seqs
        });
        for seq in 1..=50 {
            updates.send(JobUpdate::Event(text(seq, 10))).unwrap();
            tokio::task::yield_now().await;
        }
        drop(updates);
        assert_eq!(reader.await.unwrap(), (1..=50).collect::<Vec<_>>());
        for _ in 0..1000 {
            if hub.subscribe("job-1").is_none() {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("the ended job's entry stayed");
    }
}

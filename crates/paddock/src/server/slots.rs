//! The server's `max_concurrent_jobs` slots: which jobs run here, each
//! with its cancel, and the one claim in flight. The scheduler takes a
//! slot before it asks the store for the next queued job (so a turn
//! never takes the slot the claimed job needs) and settles it when the
//! store answers: handed to the claimed job, or given back when nothing
//! was queued. A turn that finds every slot taken while a claim is in
//! flight waits for that claim to settle and looks again, rather than
//! being refused (`no_slot`) for a slot no job holds: the scheduler
//! polls the queue every second, so on a one-slot server a turn would
//! otherwise be refused whenever it arrived during a poll.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{oneshot, Notify};

/// The key of the slot a claim in flight holds (never a job id: ids are
/// never empty).
const CLAIMING: &str = "";

/// How long a turn waits for a claim in flight to settle before it is
/// refused: a claim is one store transaction.
const CLAIM_WAIT: Duration = Duration::from_secs(10);

/// Why a turn got no slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SlotError {
    #[error("every slot is taken: {running} of {max} jobs run here; try again shortly")]
    Full { running: usize, max: usize },
    #[error("the server is draining: it starts no more turns")]
    Draining,
}

/// The slots and the jobs in them.
#[derive(Debug)]
pub struct Slots {
    max: usize,
    /// Jobs running here, with their cancel (taken once sent); the
    /// [`CLAIMING`] key while a claim is in flight.
    held: Mutex<HashMap<String, Option<oneshot::Sender<()>>>>,
    /// Told whenever a claim in flight settles.
    settled: Notify,
}

impl Slots {
    pub fn new(max: usize) -> Slots {
        Slots {
            max,
            held: Mutex::new(HashMap::new()),
            settled: Notify::new(),
        }
    }

    fn held(&self) -> MutexGuard<'_, HashMap<String, Option<oneshot::Sender<()>>>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many slots may be held at once.
    pub fn capacity(&self) -> usize {
        self.max
    }

    /// How many jobs run here now (a claim in flight is not a job).
    pub fn running(&self) -> usize {
        let held = self.held();
        held.len() - usize::from(held.contains_key(CLAIMING))
    }

    /// Whether no slot is held, by a job or a claim in flight (a drain
    /// waits for both: a claim that settles on a job starts it).
    pub fn is_idle(&self) -> bool {
        self.held().is_empty()
    }

    /// Takes a slot for turn `id` with its `cancel`, now, or once a claim
    /// in flight has given its slot back; refused when every slot is held
    /// by a job, or `draining` says so.
    pub async fn take_for_turn(
        &self,
        id: &str,
        cancel: oneshot::Sender<()>,
        draining: impl Fn() -> bool,
    ) -> Result<(), SlotError> {
        let deadline = tokio::time::Instant::now() + CLAIM_WAIT;
        let mut cancel = Some(cancel);
        loop {
            let settled = self.settled.notified();
            tokio::pin!(settled);
            // Registered before the slots are looked at, so a claim that
            // settles in between still wakes this turn.
            settled.as_mut().enable();
            let full = {
                let mut held = self.held();
                if draining() {
                    return Err(SlotError::Draining);
                }
                if held.len() < self.max {
                    held.insert(id.to_owned(), cancel.take());
                    return Ok(());
                }
                let full = SlotError::Full {
                    running: held.len(),
                    max: self.max,
                };
                if !held.contains_key(CLAIMING) {
                    return Err(full);
                }
                full
            };
            if tokio::time::timeout_at(deadline, settled).await.is_err() {
                return Err(full);
            }
        }
    }

    /// Takes a slot for a claim, if one is free; `false` when none is.
    pub fn begin_claim(&self) -> bool {
        let mut held = self.held();
        if held.len() >= self.max || held.contains_key(CLAIMING) {
            return false;
        }
        held.insert(CLAIMING.to_owned(), None);
        true
    }

    /// Settles the claim in flight: its slot handed to the claimed job
    /// `id` with its `cancel`, or given back (`None`: nothing claimed).
    pub fn end_claim(&self, claimed: Option<(String, oneshot::Sender<()>)>) {
        {
            let mut held = self.held();
            held.remove(CLAIMING);
            if let Some((id, cancel)) = claimed {
                held.insert(id, Some(cancel));
            }
        }
        self.settled.notify_waiters();
    }

    /// Gives back job `id`'s slot (it ended, or never started).
    pub fn release(&self, id: &str) {
        self.held().remove(id);
    }

    /// Whether job `id` holds a slot here.
    pub fn holds(&self, id: &str) -> bool {
        self.held().contains_key(id)
    }

    /// Tells job `id` to stop; whether it runs here.
    pub fn cancel(&self, id: &str) -> bool {
        match self.held().get_mut(id) {
            Some(slot) => {
                if let Some(cancel) = slot.take() {
                    let _ = cancel.send(());
                }
                true
            }
            None => false,
        }
    }

    /// Tells every job running here to stop.
    pub fn cancel_all(&self) {
        for slot in self.held().values_mut() {
            if let Some(cancel) = slot.take() {
                let _ = cancel.send(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never() -> bool {
        false
    }

    /// A one-slot server: a turn arriving while the scheduler's claim is
    /// in flight gets the slot once the claim finds nothing queued; the
    /// next turn is refused, naming the job that holds it.
    #[tokio::test]
    async fn a_turn_waits_for_a_claim_that_finds_nothing() {
        let slots = std::sync::Arc::new(Slots::new(1));
        assert!(slots.begin_claim());
        assert_eq!(slots.running(), 0);
        let (cancel, _rx) = oneshot::channel();
        let waiting = tokio::spawn({
            let slots = std::sync::Arc::clone(&slots);
            async move { slots.take_for_turn("job-a", cancel, never).await }
        });
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        assert!(
            !waiting.is_finished(),
            "the turn did not wait for the claim"
        );
        slots.end_claim(None);
        assert_eq!(waiting.await.ok(), Some(Ok(())));
        assert_eq!(slots.running(), 1);
        let (cancel, _rx2) = oneshot::channel();
        assert_eq!(
            slots.take_for_turn("job-b", cancel, never).await,
            Err(SlotError::Full { running: 1, max: 1 })
        );
    }

    /// When the claim takes a queued job, the waiting turn is refused:
    /// the slot is that job's.
    #[tokio::test]
    async fn a_turn_is_refused_when_the_claim_takes_a_job() {
        let slots = std::sync::Arc::new(Slots::new(1));
        assert!(slots.begin_claim());
        let (cancel, _rx) = oneshot::channel();
        let waiting = tokio::spawn({
            let slots = std::sync::Arc::clone(&slots);
            async move { slots.take_for_turn("turn", cancel, never).await }
        });
        tokio::task::yield_now().await;
        let (job_cancel, job_cancelled) = oneshot::channel();
        slots.end_claim(Some(("queued-job".into(), job_cancel)));
        assert_eq!(
            waiting.await.ok(),
            Some(Err(SlotError::Full { running: 1, max: 1 }))
        );
        assert!(slots.cancel("queued-job"));
        assert_eq!(job_cancelled.await, Ok(()));
        assert!(!slots.cancel("turn"));
        slots.release("queued-job");
        assert_eq!(slots.running(), 0);
    }

    /// No claim can begin while the slots are full or another is in
    /// flight; a draining server refuses turns at once.
    #[tokio::test]
    async fn claims_and_drains_respect_the_slots() {
        let slots = Slots::new(2);
        assert!(slots.begin_claim());
        assert!(!slots.begin_claim());
        slots.end_claim(None);
        let (a, _ra) = oneshot::channel();
        let (b, _rb) = oneshot::channel();
        assert_eq!(slots.take_for_turn("a", a, never).await, Ok(()));
        assert_eq!(slots.take_for_turn("b", b, never).await, Ok(()));
        assert!(!slots.begin_claim());
        let (c, _rc) = oneshot::channel();
        assert_eq!(
            slots.take_for_turn("c", c, || true).await,
            Err(SlotError::Draining)
        );
        slots.cancel_all();
        assert_eq!((_ra.await, _rb.await), (Ok(()), Ok(())));
    }
}

//! What an event stream may hold for its client, and how many streams a
//! token may hold open. Between a job's follower (`events.rs`) and the
//! response body sit at most [`BUFFERED_BYTES`] of events (their JSON
//! size; one larger event passes alone): the follower waits while the
//! client has not taken them. A client that takes nothing for [`STALL`]
//! (it never reads, or reads a trickle) is dropped: its follower stops,
//! the stream ends after what was already buffered (SSE with a final
//! comment saying why), and it resumes with `Last-Event-ID`. A token holds
//! at most [`STREAMS_PER_TOKEN`] event streams at once (the API's and the
//! dashboard's together); one more is answered 429 `too_many_streams`.
//! Limits and codes: docs/serve.md#event-streams.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use paddock_protocol::AgentEvent;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use super::measured::Measured;
use super::problem::Problem;

/// The most event bytes buffered for one stream's client.
pub const BUFFERED_BYTES: usize = 1 << 20;
/// How long a stream waits for its client to take an event before it
/// drops the client.
pub const STALL: Duration = Duration::from_secs(30);
/// The most event streams one token holds open at once.
pub const STREAMS_PER_TOKEN: usize = 16;
/// Events (of any size) the channel holds; the byte budget binds first.
const SLOTS: usize = 1024;

/// What the follower sends into: bounded by bytes.
#[derive(Debug, Clone)]
pub struct Outbox {
    tx: mpsc::Sender<Held>,
    budget: Arc<Semaphore>,
    stall: Option<Duration>,
    stalled: Arc<AtomicBool>,
    failed: Arc<AtomicBool>,
}

/// What the response body reads from.
#[derive(Debug)]
pub struct Inbox {
    rx: mpsc::Receiver<Held>,
    stalled: Arc<AtomicBool>,
    failed: Arc<AtomicBool>,
}

/// An event and its share of the byte budget (given back when dropped).
#[derive(Debug)]
struct Held {
    event: AgentEvent,
    _bytes: OwnedSemaphorePermit,
}

/// Why an event was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Undelivered {
    #[error("the client went away")]
    Closed,
    #[error("the client took no event for {} s", STALL.as_secs())]
    Stalled,
}

/// A stream's outbox and inbox; a client stalled past `stall` (when
/// given) is dropped. A turn's stream has none: dropping its client
/// would cancel the turn, and the turn's own time limit ends it.
pub fn outbox(stall: Option<Duration>) -> (Outbox, Inbox) {
    let (tx, rx) = mpsc::channel(SLOTS);
    let stalled = Arc::new(AtomicBool::new(false));
    let failed = Arc::new(AtomicBool::new(false));
    (
        Outbox {
            tx,
            budget: Arc::new(Semaphore::new(BUFFERED_BYTES)),
            stall,
            stalled: Arc::clone(&stalled),
            failed: Arc::clone(&failed),
        },
        Inbox {
            rx,
            stalled,
            failed,
        },
    )
}

/// The bytes an event of JSON length `bytes` counts for: at most the
/// budget.
fn weight(bytes: usize) -> u32 {
    u32::try_from(bytes.clamp(1, BUFFERED_BYTES)).unwrap_or(u32::MAX)
}

impl Outbox {
    /// Sends `event` once the budget has room for it: a live one as the
    /// hub measured it, a stored one measured here.
    pub async fn send(&self, event: impl Into<Measured>) -> Result<(), Undelivered> {
        let Measured { event, bytes } = event.into();
        let bytes = weight(bytes);
        let deliver = async {
            let permit = Arc::clone(&self.budget)
                .acquire_many_owned(bytes)
                .await
                .map_err(|_| Undelivered::Closed)?;
            self.tx
                .send(Held {
                    event,
                    _bytes: permit,
                })
                .await
                .map_err(|_| Undelivered::Closed)
        };
        let Some(stall) = self.stall else {
            return deliver.await;
        };
        tokio::select! {
            sent = deliver => sent,
            _ = self.tx.closed() => Err(Undelivered::Closed),
            _ = tokio::time::sleep(stall) => {
                self.stalled.store(true, Ordering::Relaxed);
                Err(Undelivered::Stalled)
            }
        }
    }

    /// Resolves when the client went away.
    pub async fn closed(&self) {
        self.tx.closed().await
    }

    /// Marks the stream as ended because the store could not be read (its
    /// retries spent): once every outbox is dropped, the body says so
    /// instead of ending as a finished job's stream does.
    pub fn store_failed(&self) {
        self.failed.store(true, Ordering::Relaxed);
    }
}

impl Inbox {
    /// The next event; `None` once the follower is done.
    pub async fn recv(&mut self) -> Option<AgentEvent> {
        self.rx.recv().await.map(|held| held.event)
    }

    /// Whether the stream ended because its client stalled.
    pub fn stalled(&self) -> bool {
        self.stalled.load(Ordering::Relaxed)
    }

    /// Why the stream ended before its job did, as the SSE comment it ends
    /// with: its client stalled, or the store could not be read; `None`
    /// for a stream that ended as it should (its job final, every event
    /// sent).
    pub fn ending(&self) -> Option<&'static str> {
        if self.stalled() {
            Some(STALLED_COMMENT)
        } else if self.failed.load(Ordering::Relaxed) {
            Some(STORE_FAILED_COMMENT)
        } else {
            None
        }
    }
}

/// The SSE comment a stream ends with when the store could not be read
/// while following its job (its reads' retries spent).
pub const STORE_FAILED_COMMENT: &str =
    "paddock: store_unavailable: the store could not be read; resume with Last-Event-ID";

/// The SSE comment a stalled stream ends with.
pub const STALLED_COMMENT: &str =
    "paddock: slow_consumer: the client took no event for 30 s; resume with Last-Event-ID";

/// The open streams of each token.
#[derive(Debug, Clone, Default)]
pub struct Streams {
    open: Arc<Mutex<HashMap<String, usize>>>,
}

/// One open stream of a token; dropping it closes it.
#[derive(Debug)]
pub struct StreamSlot {
    streams: Streams,
    token_id: String,
}

impl Streams {
    fn open(&self) -> MutexGuard<'_, HashMap<String, usize>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A stream of token `token_id`, unless it holds
    /// [`STREAMS_PER_TOKEN`] already.
    pub fn take(&self, token_id: &str) -> Result<StreamSlot, TooManyStreams> {
        let mut open = self.open();
        let n = open.entry(token_id.to_owned()).or_insert(0);
        if *n >= STREAMS_PER_TOKEN {
            return Err(TooManyStreams {
                token_id: token_id.to_owned(),
            });
        }
        *n += 1;
        Ok(StreamSlot {
            streams: self.clone(),
            token_id: token_id.to_owned(),
        })
    }
}

/// A token holds [`STREAMS_PER_TOKEN`] streams already: 429
/// `too_many_streams`, `Retry-After: 1`.
#[derive(Debug, thiserror::Error)]
#[error(
    "token {token_id} holds {STREAMS_PER_TOKEN} event streams open already (the most one \
     token may); close one and ask again"
)]
pub struct TooManyStreams {
    pub token_id: String,
}

impl IntoResponse for TooManyStreams {
    fn into_response(self) -> Response {
        let mut response = Problem::new(
            429,
            "too_many_streams",
            "the token holds too many event streams",
            self.to_string(),
        )
        .into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        response
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.streams.open();
        if let Some(n) = open.get_mut(&self.token_id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.token_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use paddock_protocol::EventBody;

    /// A stall limit a test waits out.
    const QUICK_STALL: Duration = Duration::from_millis(200);

    fn event(seq: u64, text_len: usize) -> AgentEvent {
        AgentEvent {
            job_id: "job-1".into(),
            seq,
            at: time::OffsetDateTime::UNIX_EPOCH,
            body: EventBody::Text {
                text: "x".repeat(text_len),
            },
        }
    }

    #[tokio::test]
    async fn a_client_that_never_reads_holds_at_most_the_budget_then_is_dropped() {
        let (out, inbox) = outbox(Some(QUICK_STALL));
        let mut sent = 0usize;
        let mut seq = 0;
        let why = loop {
            seq += 1;
            match out.send(event(seq, 64 << 10)).await {
                Ok(()) => sent += 1,
                Err(why) => break why,
            }
        };
        // 64 KiB events: 15 fit in 1 MiB with their JSON around them.
        assert_eq!(
            (why, sent, inbox.stalled()),
            (Undelivered::Stalled, 15, true)
        );
    }

    #[tokio::test]
    async fn an_event_larger_than_the_budget_passes_alone_and_reading_frees_room() {
        let (out, mut inbox) = outbox(Some(QUICK_STALL));
        out.send(event(1, 4 << 20)).await.unwrap();
        let blocked = out.send(event(2, 10)).await;
        assert_eq!(blocked, Err(Undelivered::Stalled));
        let (out, mut inbox2) = outbox(None);
        out.send(event(1, 4 << 20)).await.unwrap();
        let next = tokio::spawn(async move { out.send(event(2, 10)).await });
        assert_eq!(inbox2.recv().await.map(|e| e.seq), Some(1));
        assert_eq!(next.await.unwrap(), Ok(()));
        assert_eq!(inbox2.recv().await.map(|e| e.seq), Some(2));
        assert_eq!(inbox.recv().await.map(|e| e.seq), Some(1));
    }

    /// The budget charges an event the size it came measured with (the
    /// hub's, once for every stream), not a size of its own: a small
    /// event measured as the whole budget leaves no room for the next.
    #[tokio::test]
    async fn an_event_is_charged_as_it_was_measured() {
        let (out, mut inbox) = outbox(Some(QUICK_STALL));
        let full = Measured {
            event: event(1, 10),
            bytes: BUFFERED_BYTES,
        };
        out.send(full).await.unwrap();
        assert_eq!(out.send(event(2, 10)).await, Err(Undelivered::Stalled));
        assert_eq!(inbox.recv().await, Some(event(1, 10)));
    }

    #[test]
    fn a_token_holds_at_most_its_streams_and_a_closed_one_frees_a_place() {
        let streams = Streams::default();
        let mut held: Vec<StreamSlot> = (0..STREAMS_PER_TOKEN)
            .map(|_| streams.take("a").unwrap())
            .collect();
        let refused = streams.take("a").unwrap_err().into_response();
        assert_eq!(
            (
                refused.status().as_u16(),
                refused.headers()[header::RETRY_AFTER].to_str().unwrap(),
                streams.take("b").is_ok(),
            ),
            (429, "1", true)
        );
        held.pop();
        assert!(streams.take("a").is_ok());
        drop(held);
        assert_eq!(*streams.open(), HashMap::new());
    }
}

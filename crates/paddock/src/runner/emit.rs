//! The job's emitter: assigns dense sequence numbers, redacts, caps, stores
//! and fans out each event (to the job's broadcast, which a CLI's progress
//! view or a server's followers read). A failure that passes (a dropped
//! connection, a restarting server, SQLite busy) is retried by the store
//! (`store/retry.rs`), and a retried append that finds its own event
//! stored counts as stored. The first store failure that lasts is kept:
//! the job stops and tears down, showing what it still emits. Every event
//! stored counts among the job's records (`limits.max_records`,
//! `record_limit.rs`); one the job caused ([`Emitter::emit_job`]) is
//! neither stored nor shown past the limit.

use paddock_protocol::{AgentEvent, EventBody, ModelCall};
use std::sync::Arc;
use time::OffsetDateTime;
use tokio::sync::broadcast;

use crate::output;
use crate::record_limit::RecordLimit;
use crate::redact::Redactor;
use crate::store::{SharedStore, StoreError};

/// What a job's followers receive, in the order it happened.
#[derive(Debug, Clone)]
pub enum JobUpdate {
    /// An event, as stored.
    Event(AgentEvent),
    /// A ledger row the broker stored, and the job's spend so far.
    Call { call: ModelCall, spent_micros: i64 },
}

/// Receives a job's updates (the CLI's progress view).
pub trait Observer: Send {
    fn event(&mut self, event: &AgentEvent);
    fn model_call(&mut self, call: &ModelCall, spent_micros: i64);
}

impl JobUpdate {
    /// Hands the update to `observer`.
    pub fn deliver(&self, observer: &mut dyn Observer) {
        match self {
            JobUpdate::Event(e) => observer.event(e),
            JobUpdate::Call { call, spent_micros } => observer.model_call(call, *spent_micros),
        }
    }

    /// The detail of the job's `session_resumed` or `session_forked`
    /// status: the engine's session now resumed, or a new one and why,
    /// said once its prior session's files are in the job's home (or
    /// could not be put there), just before the engine starts.
    pub fn session_continuation(&self) -> Option<&str> {
        match self {
            JobUpdate::Event(AgentEvent {
                body:
                    EventBody::Status {
                        phase:
                            paddock_protocol::Phase::SessionResumed
                            | paddock_protocol::Phase::SessionForked,
                        detail: Some(detail),
                    },
                ..
            }) => Some(detail),
            _ => None,
        }
    }

    /// Whether this is the job's `launching` status: its engine is being
    /// started, and Paddock waits for it from here on.
    pub fn is_launching(&self) -> bool {
        matches!(
            self,
            JobUpdate::Event(AgentEvent {
                body: EventBody::Status {
                    phase: paddock_protocol::Phase::Launching,
                    ..
                },
                ..
            })
        )
    }
}

/// How many times an event is moved after others' appended first.
pub(super) const APPEND_ROUNDS: usize = 8;

/// Assigns dense sequence numbers, redacts, stores and fans out each event.
pub(super) struct Emitter {
    pub job_id: String,
    seq: u64,
    pub store: SharedStore,
    updates: broadcast::Sender<JobUpdate>,
    /// Learns the job's directories and secrets as the job gets them.
    pub redactor: Redactor,
    /// The longest text an event field keeps (`limits.max_event_bytes`).
    max_event: usize,
    /// The first failure to store an event: the store is lost for the job.
    pub lost: Option<String>,
    /// The job's records in the store, and their limit.
    pub records: Arc<RecordLimit>,
    /// The seq of the job's last egress attempt stored (`network.rs`).
    pub egress_seq: u64,
    /// When the job began (before its workspace or any of its processes):
    /// the leftovers scan at its end reads only processes created since.
    pub since: Option<crate::leftovers::Since>,
    /// The rung's notices already on the job's stream (each is told once,
    /// however many of the job's commands ran without the same thing).
    pub notices: Vec<String>,
    /// The engine's session id last written to the job's record (as its
    /// stream announced it): not written again at the job's end.
    pub session_stored: Option<String>,
}

impl Emitter {
    pub fn new(
        job_id: String,
        store: SharedStore,
        updates: broadcast::Sender<JobUpdate>,
        redactor: Redactor,
        max_event: usize,
        records: Arc<RecordLimit>,
    ) -> Emitter {
        Emitter {
            job_id,
            seq: 0,
            store,
            updates,
            redactor,
            max_event,
            lost: None,
            records,
            egress_seq: 0,
            since: crate::leftovers::Since::now(),
            notices: Vec::new(),
            session_stored: None,
        }
    }

    /// Stores and shows an event. The first store failure is returned (so
    /// the job stops) and kept: later events are only shown, so the job
    /// can still conclude and tear down (a full disk).
    /// An event another writer appended first (a reaper on another host
    /// that reclaimed the job, `crate::heartbeat`) moves this one after
    /// it: nothing of either is lost.
    pub async fn emit(&mut self, body: EventBody) -> Result<(), StoreError> {
        self.records.charge();
        self.store_and_show(body).await
    }

    /// Stores and shows an event the job caused (its output, a denial, a
    /// refused request or connection), as [`Emitter::emit`] does, while
    /// the job's records are within their limit; past it the event is
    /// dropped (the limit trips: the job is stopped).
    pub async fn emit_job(&mut self, body: EventBody) -> Result<(), StoreError> {
        if !self.records.admit() {
            return Ok(());
        }
        self.store_and_show(body).await
    }

    async fn store_and_show(&mut self, body: EventBody) -> Result<(), StoreError> {
        let mut event = AgentEvent {
            job_id: self.job_id.clone(),
            seq: self.seq + 1,
            at: OffsetDateTime::now_utc(),
            body: output::cap_event(self.redactor.event(body), self.max_event),
        };
        if self.lost.is_none() {
            let mut stored = self.store.append_event(&event).await;
            for _ in 0..APPEND_ROUNDS {
                match stored {
                    Err(
                        StoreError::EventSeq { last, .. } | StoreError::EventConflict { last, .. },
                    ) if last >= event.seq => {
                        self.seq = last;
                        event.seq = last + 1;
                        stored = self.store.append_event(&event).await;
                    }
                    _ => break,
                }
            }
            if let Err(e) = stored {
                self.lost = Some(crate::error_chain::chain(&e));
                self.show(JobUpdate::Event(event));
                return Err(e);
            }
            self.seq = event.seq;
        }
        self.show(JobUpdate::Event(event));
        Ok(())
    }

    /// An `error` event from `source`.
    pub async fn error(
        &mut self,
        source: &str,
        message: String,
        fatal: bool,
    ) -> Result<(), StoreError> {
        self.emit(EventBody::Error {
            message,
            source: Some(source.to_string()),
            fatal,
        })
        .await
    }

    /// An `error` event from `source` that the job caused (`emit_job`).
    pub async fn error_job(
        &mut self,
        source: &str,
        message: String,
        fatal: bool,
    ) -> Result<(), StoreError> {
        self.emit_job(EventBody::Error {
            message,
            source: Some(source.to_string()),
            fatal,
        })
        .await
    }

    /// Fans an update out; nobody following is not an error.
    pub fn show(&self, update: JobUpdate) {
        let _ = self.updates.send(update);
    }
}

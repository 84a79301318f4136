//! Where the broker writes its ledger rows, and when. Money spent upstream
//! is always on the ledger, whatever kills Paddock: a call is written ahead
//! (`in_flight`, with the estimate of its request) and acknowledged by the
//! ledger before it is forwarded upstream; its row is settled when its
//! answer ends, and the answer's final chunk reaches the engine only once
//! the settled row is written (each wait bounded by [`LEDGER_WAIT`]). A call
//! whose end is never seen (its `paddock` dies, the engine hangs up before
//! the answer) stays `in_flight` until the runner's teardown or the reaper
//! settles it `interrupted`. The broker never waits for a row it cannot
//! write ahead: it refuses that call (nothing was spent). A settled row it
//! cannot write goes to the runner all the same ([`Settled::unwritten`]),
//! which writes it again (`runner/calls.rs`).
//!
//! A call refused before it was forwarded (nothing spent) leaves a row
//! only while the job's records are within `limits.max_records`
//! ([`Ledger::keeps_refused`]); a row written ahead is always written.
//!
//! [`Ledger`] is the seam (the store behind it, [`StoreLedger`]); the
//! [`Recorder`] tracks the rows not yet settled so the runner can wait for
//! them at teardown, and tells the runner of each settled row.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use paddock_protocol::{CallStatus, ModelCall};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::Secret;
use crate::record_limit::RecordLimit;
use crate::redact::{Redactor, REDACTED};
use crate::store::{SharedStore, StoreError};

/// How long the broker waits for the ledger to acknowledge a row (written
/// ahead, or settled) before it gives up on it.
pub const LEDGER_WAIT: Duration = Duration::from_secs(5);

/// What a row of a call the engine hung up on before its answer says.
pub const HUNG_UP: &str = "the engine closed the connection before the call's answer ended";

/// A future a ledger returns.
pub type LedgerFuture<'a> = Pin<Box<dyn Future<Output = Result<(), LedgerError>> + Send + 'a>>;

/// Where one job's ledger rows go.
pub trait Ledger: Send + Sync + std::fmt::Debug {
    /// Writes the row of a call about to be forwarded (`in_flight`); a
    /// duplicate `(job_id, seq)` is an error.
    fn write_ahead<'a>(&'a self, call: &'a ModelCall) -> LedgerFuture<'a>;
    /// Settles a call's row: completes its in-flight row, or inserts it
    /// when it has none; a row already settled is left alone.
    fn settle<'a>(&'a self, call: &'a ModelCall) -> LedgerFuture<'a>;
    /// Whether the row of one more call refused before it was forwarded
    /// is to be written (counted as the job's record when it is): false
    /// once the job's records are past their limit.
    fn keeps_refused(&self) -> bool {
        true
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("write model call {seq} of job {job_id} to the ledger: {source}")]
    Write {
        job_id: String,
        seq: u64,
        #[source]
        source: StoreError,
    },
    #[error("write model call {seq} of job {job_id} ahead: the ledger already has it")]
    Duplicate { job_id: String, seq: u64 },
    #[error("write model call {seq} of job {job_id} to the ledger: no answer in {} ms", LEDGER_WAIT.as_millis())]
    TimedOut { job_id: String, seq: u64 },
}

/// The store as a job's ledger; error messages are redacted (the job's
/// key and directories) before they are written. Its rows count among the
/// job's records when it has a limit (`records`).
#[derive(Debug, Clone)]
pub struct StoreLedger {
    pub store: SharedStore,
    pub redactor: Redactor,
    pub records: Option<Arc<RecordLimit>>,
}

impl StoreLedger {
    fn redacted(&self, call: &ModelCall) -> ModelCall {
        let mut call = call.clone();
        if let Some(e) = call.error.as_mut() {
            self.redactor.string(e);
        }
        call
    }
}

fn write_error(call: &ModelCall) -> impl FnOnce(StoreError) -> LedgerError + '_ {
    |source| LedgerError::Write {
        job_id: call.job_id.clone(),
        seq: call.seq,
        source,
    }
}

impl Ledger for StoreLedger {
    fn write_ahead<'a>(&'a self, call: &'a ModelCall) -> LedgerFuture<'a> {
        Box::pin(async move {
            self.store
                .insert_model_call(&self.redacted(call))
                .await
                .map_err(write_error(call))?;
            if let Some(records) = &self.records {
                records.charge();
            }
            Ok(())
        })
    }

    fn settle<'a>(&'a self, call: &'a ModelCall) -> LedgerFuture<'a> {
        Box::pin(async move {
            self.store
                .settle_model_call(&self.redacted(call))
                .await
                .map(|_| ())
                .map_err(write_error(call))
        })
    }

    fn keeps_refused(&self) -> bool {
        self.records.as_ref().is_none_or(|r| r.admit())
    }
}

/// A settled row as the runner is told of it: the row, and why it is not
/// on the ledger when the broker could not write it (the store failed, or
/// did not answer in [`LEDGER_WAIT`]); the runner writes it then, so that
/// the ledger keeps the call's own figures, not the estimate it was
/// written ahead with.
#[derive(Debug)]
pub struct Settled {
    pub row: ModelCall,
    pub unwritten: Option<LedgerError>,
}

/// Writes one job's rows through its [`Ledger`], counts the rows not yet
/// settled, and hands each settled row to the runner.
#[derive(Debug, Clone)]
pub(crate) struct Recorder {
    ledger: Arc<dyn Ledger>,
    calls: mpsc::UnboundedSender<Settled>,
    /// Rows written ahead and not settled, plus settled rows being written.
    pending: Arc<watch::Sender<usize>>,
    /// The job's token: never in a row.
    token: Secret,
    /// The price table: which model names a metric may carry.
    prices: Arc<super::PriceTable>,
}

/// The `model` label of a call whose model the price table does not
/// price: a name the job chose is no series of its own.
pub const UNPRICED_LABEL: &str = "unpriced";

impl Recorder {
    pub fn new(
        ledger: Arc<dyn Ledger>,
        calls: mpsc::UnboundedSender<Settled>,
        token: Secret,
        prices: Arc<super::PriceTable>,
    ) -> Recorder {
        Recorder {
            prices,
            ledger,
            calls,
            pending: Arc::new(watch::Sender::new(0)),
            token,
        }
    }

    /// Writes `row` ahead of forwarding its call (bounded): the call's
    /// guard, which settles the row exactly once.
    pub async fn write_ahead(&self, row: ModelCall) -> Result<InFlight, LedgerError> {
        self.pending.send_modify(|n| *n += 1);
        // Cancelled while writing (the engine hung up), the guard settles
        // the row as interrupted.
        let mut guard = InFlight {
            recorder: self.clone(),
            row: Some(row.clone()),
        };
        let failed = match tokio::time::timeout(LEDGER_WAIT, self.ledger.write_ahead(&row)).await {
            Ok(Ok(())) => return Ok(guard),
            Ok(Err(e)) => e,
            Err(_) => LedgerError::TimedOut {
                job_id: row.job_id,
                seq: row.seq,
            },
        };
        // Not written: the call is not forwarded, there is nothing to settle.
        guard.row = None;
        self.done();
        Err(failed)
    }

    /// The model a settled row's metrics are labelled with: its served
    /// model, else its requested one, when the price table prices it, else
    /// [`UNPRICED_LABEL`] (a bounded set of names, whatever the job asks).
    fn metric_model<'a>(&'a self, row: &'a ModelCall) -> &'a str {
        [
            row.served_model.as_deref(),
            Some(row.requested_model.as_str()),
        ]
        .into_iter()
        .flatten()
        .find(|m| self.prices.price(m).is_some())
        .unwrap_or(UNPRICED_LABEL)
    }

    fn done(&self) {
        self.pending.send_modify(|n| *n = n.saturating_sub(1));
    }

    /// Settles the row of a call that was never written ahead (refused
    /// before it was forwarded), in the background; past the job's record
    /// limit it is not written, nor told to the runner (nothing was spent).
    pub fn settle(&self, row: ModelCall) -> JoinHandle<()> {
        if !self.ledger.keeps_refused() {
            return tokio::spawn(std::future::ready(()));
        }
        self.pending.send_modify(|n| *n += 1);
        self.spawn_settle(row)
    }

    /// Writes `row` (bounded), tells the runner, and gives one pending
    /// count back.
    fn spawn_settle(&self, mut row: ModelCall) -> JoinHandle<()> {
        let recorder = self.clone();
        // The upstream's text (its error, the model it says it served) is
        // kept cut short, after the job's token is taken out of it.
        if let Some(e) = row.error.as_mut() {
            if e.contains(self.token.expose()) {
                *e = e.replace(self.token.expose(), REDACTED);
            }
            if e.chars().nth(super::call::SHOWN_ERROR_CHARS).is_some() {
                *e = super::call::shown_error(e);
            }
        }
        if let Some(m) = row.served_model.as_mut() {
            if m.chars().nth(super::call::SHOWN_MODEL_CHARS).is_some() {
                *m = super::call::shown_model(m);
            }
        }
        tokio::spawn(async move {
            let unwritten =
                match tokio::time::timeout(LEDGER_WAIT, recorder.ledger.settle(&row)).await {
                    Ok(Ok(())) => None,
                    Ok(Err(e)) => Some(e),
                    Err(_) => Some(LedgerError::TimedOut {
                        job_id: row.job_id.clone(),
                        seq: row.seq,
                    }),
                };
            if let Some(e) = &unwritten {
                tracing::warn!(error = %e, "broker ledger: the settled row is left to the runner");
            }
            crate::telemetry::model_call(&row, recorder.metric_model(&row));
            let _ = recorder.calls.send(Settled { row, unwritten });
            recorder.done();
        })
    }

    /// Waits until every row is settled, at most `bound`; false when some
    /// are still pending then.
    pub async fn settled(&self, bound: Duration) -> bool {
        let mut rx = self.pending.subscribe();
        let settled = tokio::time::timeout(bound, rx.wait_for(|n| *n == 0)).await;
        settled.is_ok()
    }
}

/// A call written ahead and not yet settled. Dropped unsettled (the
/// handler cancelled because the engine hung up) it settles its row as
/// `interrupted`, keeping its estimate.
#[derive(Debug)]
pub(crate) struct InFlight {
    recorder: Recorder,
    row: Option<ModelCall>,
}

impl InFlight {
    /// Settles the call's row with `row` (same job and seq), in the
    /// background; the handle ends once it is written (bounded).
    pub fn settle(mut self, row: ModelCall) -> JoinHandle<()> {
        self.row = None;
        self.recorder.spawn_settle(row)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // Settled (or never written): its count is already accounted for.
        let Some(mut row) = self.row.take() else {
            return;
        };
        row.status = CallStatus::Interrupted;
        row.error = Some(HUNG_UP.to_string());
        // Dropped outside a runtime, the row stays in flight for the
        // runner's teardown or the reaper.
        if tokio::runtime::Handle::try_current().is_ok() {
            drop(self.recorder.spawn_settle(row));
        } else {
            self.recorder.done();
        }
    }
}

/// A ledger in memory, with the store's rules (written ahead once, settled
/// once): for the broker alone (tests, the benchmark).
#[derive(Debug, Default)]
pub struct MemoryLedger {
    rows: std::sync::Mutex<std::collections::BTreeMap<(String, u64), ModelCall>>,
}

impl MemoryLedger {
    /// The rows, by job and seq.
    pub fn rows(&self) -> Vec<ModelCall> {
        self.rows
            .lock()
            .map(|r| r.values().cloned().collect())
            .unwrap_or_default()
    }

    fn write(&self, call: &ModelCall, ahead: bool) -> Result<(), LedgerError> {
        let mut rows = self.rows.lock().map_err(|_| LedgerError::TimedOut {
            job_id: call.job_id.clone(),
            seq: call.seq,
        })?;
        let key = (call.job_id.clone(), call.seq);
        match rows.get(&key) {
            Some(_) if ahead => Err(LedgerError::Duplicate {
                job_id: call.job_id.clone(),
                seq: call.seq,
            }),
            Some(row) if row.status != CallStatus::InFlight => Ok(()),
            _ => {
                rows.insert(key, call.clone());
                Ok(())
            }
        }
    }
}

impl Ledger for MemoryLedger {
    fn write_ahead<'a>(&'a self, call: &'a ModelCall) -> LedgerFuture<'a> {
        Box::pin(async move { self.write(call, true) })
    }

    fn settle<'a>(&'a self, call: &'a ModelCall) -> LedgerFuture<'a> {
        Box::pin(async move { self.write(call, false) })
    }
}

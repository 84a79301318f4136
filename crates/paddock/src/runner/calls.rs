//! The ledger rows the job's broker settled, shown as they arrive: each
//! goes to the job's followers, and failed or refused calls become `error`
//! events (budget and allowlist refusals are `policy` events already). A
//! settled row the broker could not write (the store failed, or did not
//! answer within the broker's bound, `LEDGER_WAIT`) is written here again,
//! with the store's own retries: the ledger keeps the call's own figures,
//! not the estimate its row was written ahead with. Should that fail too,
//! an `error` event says so, naming the call and both failures (the row is
//! then settled `interrupted` at the job's end, keeping its estimate).

use paddock_protocol::{CallStatus, ModelCall};

use super::emit::{Emitter, JobUpdate};
use crate::broker::ledger::Settled;
use crate::error_chain::chain;
use crate::store::StoreError;

/// Shows a ledger row the broker settled (writing it when the broker could
/// not) and surfaces failed and refused calls as events; true when the row
/// is still not on the ledger (it stays `in_flight` until the job's end
/// settles it `interrupted`).
pub(super) async fn record_call(
    em: &mut Emitter,
    settled: Settled,
    spent: i64,
) -> Result<bool, StoreError> {
    let Settled {
        row: mut call,
        unwritten,
    } = settled;
    if let Some(error) = call.error.as_mut() {
        em.redactor.string(error);
    }
    let unwritten = match unwritten {
        Some(first) => !write_again(em, &call, &first).await?,
        None => false,
    };
    let msg = call.error.clone().unwrap_or_default();
    let (status, http_status, seq, provider) = (
        call.status,
        call.http_status,
        call.seq,
        call.provider.clone(),
    );
    em.show(JobUpdate::Call {
        call,
        spent_micros: spent,
    });
    match status {
        CallStatus::Ok => {}
        // Budget and allowlist refusals: the broker's policy notice already
        // became a `policy` event.
        CallStatus::Refused if matches!(http_status, Some(402 | 403)) => {}
        CallStatus::Refused => {
            em.error_job("broker", msg, false).await?;
        }
        // Cut by the broker itself (budget, allowlist): the policy event
        // already says why; the row keeps the message.
        CallStatus::StreamError if msg.starts_with("paddock broker:") => {}
        // Written ahead only: the broker reports a call once it is settled.
        CallStatus::InFlight => {}
        CallStatus::HttpError | CallStatus::StreamError | CallStatus::Interrupted => {
            let status = http_status
                .map(|s| format!(" (HTTP {s})"))
                .unwrap_or_default();
            em.error_job(
                "upstream",
                format!("model call {seq} to {provider}{status}: {msg}"),
                false,
            )
            .await?;
        }
    }
    Ok(unwritten)
}

/// Writes the settled row the broker could not (`first` says why); false
/// when it could not either (said in an `error` event).
async fn write_again(
    em: &mut Emitter,
    call: &ModelCall,
    first: &crate::broker::ledger::LedgerError,
) -> Result<bool, StoreError> {
    match em.store.settle_model_call(call).await {
        Ok(_) => {
            tracing::info!(job_id = %call.job_id, seq = call.seq, "ledger: the broker's unwritten settled row is written");
            Ok(true)
        }
        Err(e) => {
            let message = format!(
                "model call {}: its settled row is not on the ledger ({}; written again: {}); it \
                 keeps the estimate it was written ahead with and is settled `interrupted` at \
                 the job's end",
                call.seq,
                chain(first),
                chain(&e)
            );
            em.error("ledger", message, false).await?;
            Ok(false)
        }
    }
}

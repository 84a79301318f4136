//! The ledger rows the job's broker stored, shown as they arrive: each goes
//! to the job's followers, and failed or refused calls become `error`
//! events (budget and allowlist refusals are `policy` events already).

use paddock_protocol::{CallStatus, ModelCall};

use super::emit::{Emitter, JobUpdate};
use crate::store::StoreError;

/// Shows a ledger row the broker stored and surfaces failed and refused
/// calls as events.
pub(super) async fn record_call(
    em: &mut Emitter,
    mut call: ModelCall,
    spent: i64,
) -> Result<(), StoreError> {
    if let Some(error) = call.error.as_mut() {
        em.redactor.string(error);
    }
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
    Ok(())
}

//! Cancelling a job through the store, from a process that does not run
//! it (`paddock cancel JOB`): a queued job is cancelled at once, as a
//! server's `POST /v1/jobs/{id}/cancel` cancels one in its queue (`failed`
//! never: `cancelled`, reason `cancelled while queued`, one `status`
//! event); a running one has the cancel recorded for its owner
//! (`Store::request_cancel`), which stops it as Ctrl-C does when it next
//! looks (a `paddock run` at its poll, `[hosts] cancel_poll_secs`; a
//! `paddock serve` at once), and a dead one's reaper marks it `cancelled`;
//! an ended job is left as it is. The server's own cancel
//! (`server::queue`) also signals the jobs it runs itself.

use std::time::Duration;

use paddock_protocol::event::{EventBody, Phase};
use paddock_protocol::{AgentEvent, JobRecord, JobStatus};
use time::OffsetDateTime;

use crate::store::{Owner, Store, StoreError};

/// The reason of a job cancelled before it started.
pub const CANCELLED_QUEUED: &str = "cancelled while queued";

/// What a cancel did.
#[derive(Debug, Clone, PartialEq)]
pub enum Asked {
    /// The job was queued: it is `cancelled` now (its record).
    Dequeued(JobRecord),
    /// The job is running: the cancel is recorded for its owner.
    Requested(Owner),
    /// The job had ended (its record): nothing was changed.
    Final(JobRecord),
    /// There is no such job.
    NotFound,
}

/// `record`, ended before it ran: `status` with `reason`, now.
pub fn ended_unrun(record: &mut JobRecord, status: JobStatus, reason: String) {
    record.status = status;
    record.reason = Some(reason);
    record.finished_at = Some(OffsetDateTime::now_utc());
    record.duration_ms = Some(0);
}

/// The status event of a job a cancel ended before it started.
pub fn cancelled_unrun_event() -> EventBody {
    EventBody::Status {
        phase: Phase::Cancelled,
        detail: Some(CANCELLED_QUEUED.into()),
    }
}

/// Cancels job `id` through `store`, asked by host `by` (its name, said
/// in the reason of a job its reaper ends). A job that changes status
/// meanwhile (claimed, started, ended) is looked at again, a few times.
pub async fn cancel(store: &dyn Store, id: &str, by: &str) -> Result<Asked, StoreError> {
    let mut found = String::new();
    for _ in 0..50 {
        let Some(mut record) = store.job(id).await? else {
            return Ok(Asked::NotFound);
        };
        found = record.status.as_str().to_owned();
        match record.status {
            JobStatus::Queued => {
                ended_unrun(&mut record, JobStatus::Cancelled, CANCELLED_QUEUED.into());
                match store.finish_job(&record, JobStatus::Queued).await {
                    Ok(()) => {
                        store
                            .append_event(&AgentEvent {
                                job_id: id.to_owned(),
                                seq: 1,
                                at: OffsetDateTime::now_utc(),
                                body: cancelled_unrun_event(),
                            })
                            .await?;
                        return Ok(Asked::Dequeued(record));
                    }
                    // Claimed meanwhile: running now.
                    Err(StoreError::StatusChanged { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            JobStatus::Running => {
                if let Some(owner) = store
                    .request_cancel(id, by, OffsetDateTime::now_utc())
                    .await?
                {
                    return Ok(Asked::Requested(owner));
                }
                // Ended meanwhile, or a claim whose owner is not yet
                // recorded: looked at again.
            }
            _ => return Ok(Asked::Final(record)),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(StoreError::StatusChanged {
        job_id: id.to_owned(),
        expected: "queued, running with its owner recorded, or ended",
        found,
    })
}

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
//!
//! Every cancel names who asked ([`asked_by`]): a queued job's reason and
//! status event say it ([`cancelled_queued`]), a running job's request
//! keeps it in the store (`Store::request_cancel`'s `by`), which the
//! owner's end reads ([`with_asker`]: `cancelled, asked by …`), and so does
//! the reaper's end of a dead owner's job. `paddock cancel` asks as
//! [`cli_asker`] (`user@host`), a server as `server/asker.rs` describes
//! its API token or dashboard session.

use std::time::Duration;

use paddock_protocol::event::{EventBody, Phase};
use paddock_protocol::{AgentEvent, JobRecord, JobStatus};
use time::OffsetDateTime;

use crate::store::{Owner, Store, StoreError};

/// How the reason of a job cancelled before it started begins.
pub const CANCELLED_QUEUED: &str = "cancelled while queued";

/// How a cancel's reason names who asked (`by`, as the request records
/// it): `asked by …`.
pub fn asked_by(by: &str) -> String {
    format!("asked by {by}")
}

/// The reason (and status event detail) of a job cancelled while queued,
/// asked by `by`: `cancelled while queued, asked by …`. Before, it named
/// nobody.
pub fn cancelled_queued(by: &str) -> String {
    format!("{CANCELLED_QUEUED}, {}", asked_by(by))
}

/// Who asked a cancel through the store and when (`asked`,
/// `Store::cancel_requested`): `asked by … at <RFC 3339>`, as every
/// reason of a job ended on such a request says it ([`with_asker`],
/// `reaper::cancelled_reason`).
pub fn asked_at(asked: &crate::store::CancelRequest) -> String {
    format!(
        "{} at {}",
        asked_by(&asked.by),
        crate::time_text::rfc3339(asked.at)
    )
}

/// A cancelled job's `reason` (its own wording: `cancelled`, or a setup
/// command's) with who asked, when the cancel was asked through the store
/// (`asked`: `Store::cancel_requested`): `…, asked by … at <RFC 3339>`.
/// Without a request (Ctrl-C in the job's own terminal) it is left as it
/// is. Before, a job its owner stopped on another process's request ended
/// plain `cancelled`, as a local cancel does.
pub fn with_asker(
    reason: Option<String>,
    asked: Option<&crate::store::CancelRequest>,
) -> Option<String> {
    let Some(asked) = asked else {
        return reason;
    };
    let asker = asked_at(asked);
    Some(match reason {
        Some(reason) => format!("{reason}, {asker}"),
        None => format!("cancelled, {asker}"),
    })
}

/// Who `paddock cancel` asks as: `user@host (paddock cancel)`, the user
/// this process runs as (its passwd entry's name, else its uid) and the
/// jobs directory's host name (`host_id::owner`), shown safe for a
/// terminal.
pub fn cli_asker(host: &str) -> String {
    let uid = nix::unistd::Uid::current();
    let user = nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| format!("uid {uid}"));
    format!(
        "{}@{} (paddock cancel)",
        crate::terminal_text::line(&user),
        crate::terminal_text::line(host)
    )
}

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

/// The status event of a job a cancel asked by `by` ended before it
/// started.
pub fn cancelled_unrun_event(by: &str) -> EventBody {
    EventBody::Status {
        phase: Phase::Cancelled,
        detail: Some(cancelled_queued(by)),
    }
}

/// Cancels job `id` through `store`, asked by `by` (said in the reason of
/// a queued job it cancels, recorded with the request of a running one:
/// [`cli_asker`] for `paddock cancel`). A job that changes status
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
                ended_unrun(&mut record, JobStatus::Cancelled, cancelled_queued(by));
                match store.finish_job(&record, JobStatus::Queued).await {
                    Ok(()) => {
                        store
                            .append_event(&AgentEvent {
                                job_id: id.to_owned(),
                                seq: 1,
                                at: OffsetDateTime::now_utc(),
                                body: cancelled_unrun_event(by),
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

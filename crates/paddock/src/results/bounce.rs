//! The next attempt learns from the last (`paddock run --attempt-after
//! JOB`): the prior job's attempts plus one for that job itself, filled
//! from the store and the forge rather than by hand: its outcome, its
//! closeout as the summary, its reason as what failed, its branch, and the
//! review comments on its pull request (GitHub, or a GitLab merge
//! request's notes; read with a token minted for the read and revoked
//! after it, `conclude.rs`'s `open_forge`) or its outbox's
//! `review.md` as the bounce comment. The existing prompt appendix and
//! context render them (docs/context.md).

use std::path::Path;

use paddock_protocol::{JobSpec, PriorAttempt};

use super::conclude::{open_forge, CLOSEOUT};
use super::forge::Forge as _;
use crate::store::{Store, StoreError};

/// How much of the prior closeout becomes the attempt's summary.
const SUMMARY_MAX: usize = 8000;

#[derive(Debug, thiserror::Error)]
pub enum BounceError {
    #[error("--attempt-after {job_id}: no such job")]
    NoJob { job_id: String },
    #[error("--attempt-after {job_id}: that job is for ticket {theirs}, this spec for {ours}")]
    OtherTicket {
        job_id: String,
        theirs: String,
        ours: String,
    },
    #[error("--attempt-after {job_id}: its stored spec does not load: {message}")]
    Spec { job_id: String, message: String },
    #[error("--attempt-after {job_id}: reading the review failed: {message}")]
    Review { job_id: String, message: String },
    #[error("--attempt-after {job_id}: {source}")]
    Store { job_id: String, source: StoreError },
}

/// The prior attempts of a job after `job_id` for the ticket `ticket_id`.
pub async fn attempts_after(
    store: &dyn Store,
    job_id: &str,
    ticket_id: &str,
    artifacts_root: &Path,
) -> Result<Vec<PriorAttempt>, BounceError> {
    let store_err = |source| BounceError::Store {
        job_id: job_id.to_string(),
        source,
    };
    let record = store
        .job(job_id)
        .await
        .map_err(store_err)?
        .ok_or_else(|| BounceError::NoJob {
            job_id: job_id.to_string(),
        })?;
    if record.ticket_id != ticket_id {
        return Err(BounceError::OtherTicket {
            job_id: job_id.to_string(),
            theirs: record.ticket_id,
            ours: ticket_id.to_string(),
        });
    }
    let text = store
        .job_spec(job_id)
        .await
        .map_err(store_err)?
        .unwrap_or_default();
    let spec =
        JobSpec::from_json(&text, Path::new("the store")).map_err(|e| BounceError::Spec {
            job_id: job_id.to_string(),
            message: e.to_string(),
        })?;
    let artifacts = artifacts_root.join(job_id);
    let session = open_forge(&spec, &artifacts)
        .await
        .map_err(|message| BounceError::Review {
            job_id: job_id.to_string(),
            message,
        })?;
    let comments = session.forge.review_comments(&record.branch).await;
    // A minted token is revoked whatever the read gave; a failed
    // revocation only leaves it to expire within the hour.
    let _ = session.close().await;
    let comments = comments.map_err(|e| BounceError::Review {
        job_id: job_id.to_string(),
        message: e.to_string(),
    })?;
    let bounce = comments
        .iter()
        .map(|c| match (&c.path, c.line) {
            (Some(path), Some(line)) => format!("{} on {path}:{line}: {}", c.author, c.body),
            (Some(path), None) => format!("{} on {path}: {}", c.author, c.body),
            _ => format!("{}: {}", c.author, c.body),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let summary = std::fs::read_to_string(artifacts.join(CLOSEOUT))
        .map(|t| crate::output::keep_end(&t, SUMMARY_MAX))
        .unwrap_or_default();
    let mut attempts = spec.ticket.prior_attempts;
    attempts.push(PriorAttempt {
        attempt: record.attempt,
        outcome: record.status.as_str().to_string(),
        summary,
        branch: Some(record.branch),
        tried: Vec::new(),
        failed: record.reason.into_iter().collect(),
        bounce_comment: (!bounce.is_empty()).then_some(bounce),
    });
    Ok(attempts)
}

//! `POST /v1/turns`: one assistant turn, its events streamed back on the
//! same response (docs/api.md#turns). The request ([`TurnRequest`]) is
//! made into a job spec of ticket `turn-<uuid>`, type `turn`, checked as
//! `POST /v1/jobs` checks a spec (the user's config defaults, then
//! `Runner::admit`: the same problems), and run by the queue at once in a
//! free slot of `max_concurrent_jobs` (429 `no_slot` when none is free,
//! 503 `draining` while the server drains): a job in the store like any
//! other, with its ledger rows, usage, events and budget gate. Inline
//! `files` become a repository under the jobs directory (`.turn-<uuid>`),
//! removed with the job's workspace when the turn ends. The response is
//! SSE (or JSON lines for `Accept: application/x-ndjson`) from the job's
//! first event to its final `status`; it closes once the workspace and the
//! inline source are gone. A client that goes away cancels the turn.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use paddock_protocol::TurnRequest;

use super::events::{follow, respond, wants_jsonl};
use super::extract::{json_object_text, JsonBody};
use super::outbox::outbox;
use super::problem::Problem;
use super::queue::{Queue, Turn, TurnError};
use super::state::AppState;
use crate::runner::ErrorCode;

/// The header naming the turn's job id.
pub const JOB_ID_HEADER: &str = "paddock-job-id";
/// A turn's inline source is `<jobs>/.turn-<key>`; its job `job-<key>`
/// and its ticket `turn-<key>` (`key` a fresh UUID v7).
const SOURCE_PREFIX: &str = ".turn-";
const JOB_PREFIX: &str = "job-";
/// How old an inline source whose job is not in the store must be before
/// [`sweep`] removes it (a turn writes its files just before its record).
const ORPHAN_AGE: std::time::Duration = std::time::Duration::from_secs(600);

/// A turn request as JSON (docs/api.md#turns): `engine`, `upstream` and
/// `input` required; `instructions`, `skills`, `files` or `repository`,
/// `project`, `budget`, `limits`, `isolation`, `policy` optional. Unknown
/// fields are refused.
#[derive(utoipa::ToSchema)]
#[schema(value_type = Object)]
#[expect(
    dead_code,
    reason = "the request body's schema only: the body is read as text"
)]
pub struct TurnBody(serde_json::Value);

/// Runs one turn and streams its events until its final status.
#[utoipa::path(post, path = "/v1/turns", tag = "turns", security(("bearer" = ["submit"])),
    request_body(content = TurnBody, content_type = "application/json"),
    responses(
        (status = 200, description = "The turn's events (docs/events.md) from its first to its final `status`, one per SSE event (`id:` the seq, `event:` the kind, `data:` the event) or JSON line (`Accept: application/x-ndjson`); the stream ends once the turn's workspace is removed",
            content((String = "text/event-stream"), (String = "application/x-ndjson")),
            headers(("paddock-job-id" = String, description = "The turn's job id"),
                ("location" = String, description = "The turn's job URL"))),
        (status = 422, description = "The turn cannot run (the job spec's errors, naming the turn's fields)", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Every slot of max_concurrent_jobs is taken (`no_slot`)", body = Problem, content_type = "application/problem+json",
            headers(("retry-after" = String, description = "Seconds to wait"))),
        (status = 500, description = "The turn's files or its lease could not be written (`internal`)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The store failed (`store_lost`) or the server is draining (`draining`)", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn turn(
    State(state): State<AppState>,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Response, Problem> {
    let body = json_object_text(&body, "a JSON turn request (docs/api.md#turns)")?;
    let request = TurnRequest::from_json(body)?;
    let key = uuid::Uuid::now_v7().simple().to_string();
    let source = match request.repository {
        Some(_) => None,
        None => Some(
            state
                .runner
                .config()
                .paths
                .jobs
                .join(format!("{SOURCE_PREFIX}{key}")),
        ),
    };
    let spec = request.to_spec(
        &format!("turn-{key}"),
        source.as_deref(),
        &state.runner.config().cwd,
    )?;
    state
        .config
        .submissions
        .check(&spec, source.as_deref())
        .map_err(|e| Problem::runner(ErrorCode::BadInput, e.to_string()))?;
    let by = super::jobs::profile_named_by(&state.defaults, &spec);
    let spec = state.defaults.apply(spec);
    let taken = state
        .queue
        .turn(
            &format!("{JOB_PREFIX}{key}"),
            &spec,
            source.map(|dir| (dir, &request.files)),
        )
        .await;
    let (id, ended) = match taken {
        Ok(Turn::Started { id, ended }) => (id, Some(ended)),
        Ok(Turn::Held(id)) => (id, None),
        Err(e) => {
            let e = match (e, &by) {
                (TurnError::Admit(e), Some(by)) => TurnError::Admit(e.profile_named_by(by)),
                (e, _) => e,
            };
            let mut response = refused(e).into_response();
            if response.status() == axum::http::StatusCode::TOO_MANY_REQUESTS {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            return Ok(response);
        }
    };
    // No stall limit: dropping the client would cancel the turn, which
    // its own time limit ends; the byte budget still bounds what waits.
    let (tx, rx) = outbox(None);
    let follower = state.clone();
    let job = id.clone();
    tokio::spawn(async move {
        if let Err(e) = follow(&follower, &job, 0, tx.clone()).await {
            tracing::warn!("serve: following turn {job}: {e}");
        }
        // The stream closes once the workspace and the source are gone.
        if let Some(ended) = ended {
            let _ = ended.await;
        }
        drop(tx);
    });
    let guard = CancelOnDrop {
        queue: Arc::clone(&state.queue),
        id: id.clone(),
    };
    let mut response = respond(rx, wants_jsonl(&headers), guard);
    for (name, value) in [
        (header::LOCATION, format!("/v1/jobs/{id}")),
        (header::HeaderName::from_static(JOB_ID_HEADER), id.clone()),
    ] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().insert(name, value);
        }
    }
    Ok(response)
}

/// A refused turn as a problem: 429 `no_slot` with `Retry-After`, 503
/// `draining`, the runner's codes otherwise.
fn refused(e: TurnError) -> Problem {
    match e {
        TurnError::Admit(e) => Problem::from(e),
        TurnError::Store(e) => Problem::from(e),
        e @ TurnError::NoSlot { .. } => {
            Problem::new(429, "no_slot", "every slot is taken", e.to_string())
        }
        e @ TurnError::Draining => {
            Problem::new(503, "draining", "the server is draining", e.to_string())
        }
        // The client's files made git compute past its limit: their fault,
        // named as theirs.
        e @ TurnError::Source(crate::workspace::WorkspaceError::GitCpuLimit { .. }) => {
            Problem::runner(
                ErrorCode::BadInput,
                format!("files: {}", super::problem::chain(&e)),
            )
        }
        e @ (TurnError::Source(_) | TurnError::Lease { .. }) => {
            Problem::runner(ErrorCode::Internal, super::problem::chain(&e))
        }
    }
}

/// Cancels the turn when the response's body is dropped: the client went
/// away (or the server closed the stream). A turn that has ended is no
/// longer in the queue's slots, so nothing happens then.
struct CancelOnDrop {
    queue: Arc<Queue>,
    id: String,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.queue.cancel_here(&self.id);
    }
}

/// Whether an inline source last modified at `modified`, whose job is
/// not in the store, is an orphan as of `now`: further than
/// [`ORPHAN_AGE`] from it either way. A source dated in the future (the
/// clock went back since it was written, or its date was set ahead) is
/// judged by how far ahead it is, so it does not stay forever.
fn orphaned(modified: std::time::SystemTime, now: std::time::SystemTime) -> bool {
    crate::file_age::age(modified, now) > ORPHAN_AGE
}

/// Removes the inline sources (`<jobs>/.turn-<key>`) of turns that have
/// ended, which a server killed mid-turn leaves behind (its reaper at the
/// next start finishes the job and removes its workspace, not this
/// directory): each whose job `job-<key>` is final, or not in the store
/// and older than [`ORPHAN_AGE`] (or dated further ahead: [`orphaned`]).
/// A running turn's, another server's on the same store, is kept. What could not be read or removed is logged.
pub async fn sweep(state: &AppState) {
    let jobs = &state.runner.config().paths.jobs;
    let Ok(entries) = std::fs::read_dir(jobs) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(key) = name.to_str().and_then(|n| n.strip_prefix(SOURCE_PREFIX)) else {
            continue;
        };
        let ended = match state.store.job(&format!("{JOB_PREFIX}{key}")).await {
            Ok(Some(job)) => !matches!(
                job.status,
                paddock_protocol::JobStatus::Queued | paddock_protocol::JobStatus::Running
            ),
            Ok(None) => entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| orphaned(t, std::time::SystemTime::now())),
            Err(e) => {
                tracing::warn!("serve: cannot sweep {}: {e}", entry.path().display());
                false
            }
        };
        if ended {
            if let Err(e) = crate::workspace::inline_source::remove(&entry.path()) {
                tracing::warn!("serve: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::{orphaned, ORPHAN_AGE};

    /// A source whose job is not in the store is an orphan once it is
    /// further than the orphan age from now, before or after it: one
    /// dated a day or a year ahead (the clock went back) is swept too.
    #[test]
    fn a_source_is_orphaned_by_its_distance_from_now_either_way() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let second = Duration::from_secs(1);
        let day = Duration::from_secs(86_400);
        let cases = [
            now,
            now - ORPHAN_AGE,
            now - ORPHAN_AGE - second,
            now - day,
            now + ORPHAN_AGE,
            now + ORPHAN_AGE + second,
            now + day,
            now + 365 * day,
        ];
        let judged: Vec<bool> = cases.iter().map(|t| orphaned(*t, now)).collect();
        assert_eq!(
            judged,
            vec![false, false, true, true, false, true, true, true]
        );
    }
}

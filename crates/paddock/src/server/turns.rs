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

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use paddock_protocol::TurnRequest;
use tokio::sync::mpsc;

use super::events::{follow, respond, wants_jsonl, BUFFER};
use super::extract::CheckedBody;
use super::problem::Problem;
use super::queue::{Queue, Turn, TurnError};
use super::state::AppState;
use crate::runner::ErrorCode;

/// The header naming the turn's job id.
pub const JOB_ID_HEADER: &str = "paddock-job-id";

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
        (status = 500, description = "The turn's files could not be written (`internal`)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The store failed (`store_lost`) or the server is draining (`draining`)", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn turn(
    State(state): State<AppState>,
    headers: HeaderMap,
    CheckedBody(body): CheckedBody<Bytes>,
) -> Result<Response, Problem> {
    let body = std::str::from_utf8(&body).map_err(|e| {
        Problem::runner(
            ErrorCode::BadInput,
            format!("the request body is not UTF-8: {e}"),
        )
    })?;
    if !body.trim_start().starts_with('{') {
        return Err(Problem::runner(
            ErrorCode::BadInput,
            "the request body must be a JSON turn request (docs/api.md#turns)".into(),
        ));
    }
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
                .join(format!(".turn-{key}")),
        ),
    };
    let spec = request.to_spec(
        &format!("turn-{key}"),
        source.as_deref(),
        &state.runner.config().cwd,
    )?;
    let spec = state.defaults.apply(spec);
    let taken = state
        .queue
        .turn(&spec, source.map(|dir| (dir, &request.files)))
        .await;
    let (id, ended) = match taken {
        Ok(Turn::Started { id, ended }) => (id, Some(ended)),
        Ok(Turn::Held(id)) => (id, None),
        Err(e) => {
            let mut response = refused(e).into_response();
            if response.status() == axum::http::StatusCode::TOO_MANY_REQUESTS {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            return Ok(response);
        }
    };
    let (tx, rx) = mpsc::channel(BUFFER);
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
        e @ TurnError::Source(_) => Problem::runner(ErrorCode::Internal, super::problem::chain(&e)),
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

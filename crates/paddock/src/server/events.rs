//! A job's events as a stream that resumes without gaps or doubles: the
//! stored events after the client's last seq, then the live ones from the
//! [`Hub`](super::hub::Hub), each sent once in seq order, the stored ones
//! read a page at a time. The follower
//! subscribes to the live events *before* it reads the store (an event is
//! stored before it is broadcast, so nothing falls between the two), drops
//! live events it already sent, and goes back to the store on any gap (it
//! fell behind the broadcast). It ends once the job's record is final and
//! every event stored before that was sent (a job's last event is stored
//! before its record is finished), when the client goes away, or when the
//! server closes. Served as SSE (`id:` is the seq, `event:` the kind;
//! `Last-Event-ID` resumes) or as JSONL.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use paddock_protocol::JobStatus;
use serde::Deserialize;
use tokio::sync::broadcast;

use super::auth::Caller;
use super::extract::Checked;
use super::outbox::{outbox, Inbox, Outbox, STALL, STALLED_COMMENT};
use super::problem::Problem;
use super::state::AppState;
use crate::store::StoreError;

/// How often a follower of a job not running here looks again.
const POLL: Duration = Duration::from_millis(250);
/// Stored events a follower reads at once: what it holds is this page and
/// the client's buffer, however many events the job stored.
pub(crate) const PAGE: u32 = 256;
/// The JSONL media type.
pub const NDJSON: &str = "application/x-ndjson";

/// `GET /v1/jobs/{id}/events` query.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// `jsonl` for JSON lines (as `Accept: application/x-ndjson`).
    pub format: Option<String>,
    /// Start after this seq (as `Last-Event-ID`, which wins).
    pub after: Option<u64>,
}

/// The events of job `id` as SSE or JSONL.
#[utoipa::path(get, path = "/v1/jobs/{id}/events", tag = "jobs", security(("bearer" = ["read"])),
    params(("id" = String, Path, description = "The job's id"), EventsQuery,
        ("last-event-id" = Option<u64>, Header, description = "Resume after this seq")),
    responses(
        (status = 200, description = "The job's events (docs/events.md), one per SSE event (`id:` the seq, `event:` the kind, `data:` the event) or JSON line, until the job is final",
            content((String = "text/event-stream"), (String = "application/x-ndjson"))),
        (status = 400, description = "A bad Last-Event-ID or format", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such job", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "The token holds too many event streams open (`too_many_streams`)", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn events(
    State(state): State<AppState>,
    axum::Extension(caller): axum::Extension<Caller>,
    Checked(Path(id)): Checked<Path<String>>,
    Checked(Query(query)): Checked<Query<EventsQuery>>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    if state.store.job(&id).await?.is_none() {
        return Err(Problem::no_job(&id));
    }
    let after = match headers.get("last-event-id") {
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .ok_or_else(|| {
                Problem::bad_request(format!("Last-Event-ID must be an event seq, not {v:?}"))
            })?,
        None => query.after.unwrap_or(0),
    };
    let jsonl = match query.format.as_deref() {
        Some("jsonl") => true,
        Some("sse") | None => wants_jsonl(&headers),
        Some(other) => {
            return Err(Problem::bad_request(format!(
                "format must be `sse` or `jsonl`, not `{other}`"
            )))
        }
    };
    let slot = match state.streams.take(&caller.token_id) {
        Ok(slot) => slot,
        Err(refused) => return Ok(refused.into_response()),
    };
    let (tx, rx) = outbox(Some(STALL));
    let follower = state.clone();
    tokio::spawn(async move {
        if let Err(e) = follow(&follower, &id, after, tx).await {
            tracing::warn!("serve: following job {id}: {e}");
        }
    });
    Ok(respond(rx, jsonl, slot))
}

/// Whether `headers` ask for JSON lines (`Accept: application/x-ndjson`).
pub fn wants_jsonl(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains(NDJSON))
}

/// The events from `rx` as the response body: SSE (`id:` the seq,
/// `event:` the kind), or JSON lines when `jsonl`. `keep` lives as long
/// as the body: it is dropped when the stream ends or the client goes
/// away. A stream whose client stalled (`outbox.rs`) ends, as SSE, with
/// a comment saying so.
pub fn respond<K: Send + Sync + 'static>(rx: Inbox, jsonl: bool, keep: K) -> Response {
    let stream = futures::stream::unfold(Some((rx, keep)), |open| async move {
        let (mut rx, keep) = open?;
        match rx.recv().await {
            Some(e) => Some((Some(e), Some((rx, keep)))),
            None if rx.stalled() => Some((None, None)),
            None => None,
        }
    });
    if jsonl {
        let lines = stream.filter_map(|e| {
            futures::future::ready(e.map(|e| {
                super::json::to_string(&e).map(|mut line| {
                    line.push('\n');
                    line
                })
            }))
        });
        let mut response = Body::from_stream(lines).into_response();
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(NDJSON));
        return response;
    }
    let sse = stream.map(|e| {
        let Some(e) = e else {
            return Ok::<Event, Infallible>(Event::default().comment(STALLED_COMMENT));
        };
        let event = Event::default().id(e.seq.to_string());
        Ok(match super::json::to_string(&e) {
            Ok(data) => event.event(e.body.kind()).data(data),
            Err(_) => event.comment("unserializable"),
        })
    });
    Sse::new(sse)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// Sends the events of job `id` after seq `after` to `out`, once each, in
/// order, until the job is final and all were sent.
pub async fn follow(
    state: &AppState,
    id: &str,
    mut after: u64,
    out: Outbox,
) -> Result<(), StoreError> {
    use broadcast::error::RecvError;
    loop {
        let live = state.hub.subscribe(id);
        // Read before the events: a final record means they are all stored.
        let ended = state
            .store
            .job(id)
            .await?
            .is_none_or(|j| !matches!(j.status, JobStatus::Queued | JobStatus::Running));
        loop {
            let page = state.store.events_page(id, after, PAGE).await?;
            let last = page.len() < PAGE as usize;
            for event in page {
                after = event.seq;
                if out.send(event).await.is_err() {
                    return Ok(());
                }
            }
            if last {
                break;
            }
        }
        if ended {
            return Ok(());
        }
        match live {
            Some(mut live) => loop {
                tokio::select! {
                    update = live.recv() => match update {
                        Ok(e) if e.seq <= after => {}
                        Ok(e) if e.seq == after + 1 => {
                            after = e.seq;
                            if out.send(e).await.is_err() {
                                return Ok(());
                            }
                        }
                        // A gap (this follower fell behind) or the end:
                        // the store has the rest.
                        Ok(_) | Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => break,
                    },
                    _ = out.closed() => return Ok(()),
                    _ = state.closing.cancelled() => return Ok(()),
                }
            },
            None => tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = out.closed() => return Ok(()),
                _ = state.closing.cancelled() => return Ok(()),
            },
        }
    }
}

//! A job's events as a stream that resumes without gaps or doubles: the
//! stored events after the client's last seq, then the live ones from the
//! [`Hub`](super::hub::Hub), each sent once in seq order, the stored ones
//! read a page at a time (`store/event_pages.rs`: bounded in events and in
//! bytes, so what a follower holds is a page and its client's buffer). The follower
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
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use paddock_protocol::JobStatus;
use serde::Deserialize;

use super::auth::Caller;
use super::extract::Checked;
use super::hub::Missed;
use super::job_id::JobId;
use super::outbox::{outbox, Inbox, Outbox, STALL};
use super::problem::Problem;
use super::state::AppState;
use crate::store::event_pages::Pages;
use crate::store::StoreError;

/// How often a follower of a job not running here looks again.
const POLL: Duration = Duration::from_millis(250);
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
    JobId(id): JobId,
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
    spawn_follow(state.clone(), id, after, tx, "serve");
    Ok(respond(rx, jsonl, slot))
}

/// Runs [`follow`] for job `id` into `out` in a task of its own; a store
/// that cannot be read (its retries spent) is logged (as `who`'s) and
/// marks the stream so its body says so (`Inbox::ending`).
pub fn spawn_follow(state: AppState, id: String, after: u64, out: Outbox, who: &'static str) {
    tokio::spawn(async move {
        let mark = out.clone();
        if let Err(e) = follow(&state, &id, after, out).await {
            mark.store_failed();
            tracing::warn!("{who}: following job {id}: {e}");
        }
    });
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
/// away. A stream that ended before its job did (its client stalled,
/// `outbox.rs`, or the store could not be read) ends, as SSE, with a
/// comment saying so, and as JSON lines by breaking off the body (the
/// client sees an unfinished response, not a finished job's end).
pub fn respond<K: Send + Sync + 'static>(rx: Inbox, jsonl: bool, keep: K) -> Response {
    let stream = futures::stream::unfold(Some((rx, keep)), |open| async move {
        let (mut rx, keep) = open?;
        match rx.recv().await {
            Some(e) => Some((Ok(e), Some((rx, keep)))),
            None => rx.ending().map(|why| (Err(why), None)),
        }
    });
    if jsonl {
        let lines = stream.map(|e| match e {
            Ok(e) => super::json::to_string(&e)
                .map(|mut line| {
                    line.push('\n');
                    line
                })
                .map_err(std::io::Error::other),
            Err(why) => Err(std::io::Error::other(why)),
        });
        let mut response = Body::from_stream(lines).into_response();
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(NDJSON));
        return response;
    }
    let sse = stream.map(|e| {
        let e = match e {
            Ok(e) => e,
            Err(why) => return Ok::<Event, Infallible>(Event::default().comment(why)),
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
    loop {
        let live = state.hub.subscribe(id);
        // Read before the events: a final record means they are all stored.
        let ended = state
            .store
            .job(id)
            .await?
            .is_none_or(|j| !matches!(j.status, JobStatus::Queued | JobStatus::Running));
        let mut pages = Pages::new(&*state.store, id, after);
        while let Some(page) = pages.next().await? {
            for event in page {
                after = event.seq;
                if out.send(event).await.is_err() {
                    return Ok(());
                }
            }
        }
        if ended {
            return Ok(());
        }
        match live {
            Some(mut live) => loop {
                tokio::select! {
                    update = live.recv() => match update {
                        Ok(e) if e.event.seq <= after => {}
                        Ok(e) if e.event.seq == after + 1 => {
                            after = e.event.seq;
                            if out.send(e).await.is_err() {
                                return Ok(());
                            }
                        }
                        // A gap (this follower fell behind the hub's
                        // backlog) or the end: the store has the rest.
                        Ok(_) | Err(Missed::Lagged(_)) | Err(Missed::Ended) => break,
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::store::fixtures::event;
    use paddock_protocol::EventBody;

    /// A follower of a job whose history is large events: it sends every
    /// one once, whole, in order, and never reads more than a page of
    /// `PAGE_BYTES` from the store at once (before, a page was 256 events
    /// whatever their size: up to 4 GiB of 16 MiB events); a page cut
    /// short by its bytes is not taken for the end.
    #[tokio::test]
    async fn a_follower_reads_large_events_a_bounded_page_at_a_time() {
        use crate::rung::fake::{FakeEngine, FakeRung};
        use crate::runner::tests::Host;
        use crate::store::event_pages::{most_read, PAGE_BYTES};
        let host = Host::new().await;
        let runner = host.runner(std::sync::Arc::new(FakeRung::new(FakeEngine::default())));
        let state = AppState::new(
            host.store.clone(),
            runner,
            crate::server::config::ServeConfig::default(),
            crate::config::Config::default(),
            None,
        );
        let mut record = crate::store::fixtures::job("job-1", 0);
        record.status = JobStatus::Done;
        state.store.insert_job(&record, "{}").await.unwrap();
        // Twenty events of 1 MiB: three pages' worth.
        let text = "x".repeat(1 << 20);
        let written: Vec<_> = (1..=20)
            .map(|seq| event("job-1", seq, EventBody::Text { text: text.clone() }))
            .collect();
        for e in &written {
            state.store.append_event(e).await.unwrap();
        }
        most_read::take();
        most_read::take_bytes();
        let (tx, mut rx) = outbox(None);
        let read = async move {
            let mut read = Vec::new();
            while let Some(e) = rx.recv().await {
                read.push(e);
            }
            read
        };
        let (followed, read) = tokio::join!(follow(&state, "job-1", 0, tx), read);
        followed.unwrap();
        let (rows, bytes) = (most_read::take(), most_read::take_bytes());
        let size = serde_json::to_string(&written[0].body).unwrap().len();
        assert_eq!(
            (read.len(), read == written, rows, bytes),
            (20, true, 7, 7 * size)
        );
        assert!(bytes <= usize::try_from(PAGE_BYTES).unwrap());
    }

    /// The body of `respond` over an inbox that got `text` and then ended
    /// as `end` says: each frame's bytes, and whether the body broke off.
    async fn body(end: fn(&Outbox), jsonl: bool) -> (String, bool) {
        let (tx, rx) = outbox(None);
        tx.send(event("job-1", 1, EventBody::Text { text: "hi".into() }))
            .await
            .unwrap();
        end(&tx);
        drop(tx);
        let mut frames = respond(rx, jsonl, ()).into_body().into_data_stream();
        let mut text = String::new();
        while let Some(frame) = frames.next().await {
            match frame {
                Ok(bytes) => text.push_str(&String::from_utf8_lossy(&bytes)),
                Err(_) => return (text, true),
            }
        }
        (text, false)
    }

    /// A stream whose store could not be read says so at its end: SSE
    /// with a comment, JSON lines by breaking off (a client must not take
    /// it for a finished job's end); a stream that ended as it should ends
    /// plainly. Before, both ended as a finished job's stream does.
    #[tokio::test]
    async fn a_stream_whose_store_failed_says_so_at_its_end() {
        let line = serde_json::to_string(&event("job-1", 1, EventBody::Text { text: "hi".into() }))
            .unwrap();
        let sse_event = format!("id: 1\nevent: text\ndata: {line}\n\n");
        assert_eq!(
            (
                body(Outbox::store_failed, false).await,
                body(|_| {}, false).await,
                body(Outbox::store_failed, true).await,
                body(|_| {}, true).await,
            ),
            (
                (
                    format!(
                        "{sse_event}: paddock: store_unavailable: the store could not be \
                         read; resume with Last-Event-ID\n\n"
                    ),
                    false
                ),
                (sse_event, false),
                (format!("{line}\n"), true),
                (format!("{line}\n"), false),
            )
        );
    }
}

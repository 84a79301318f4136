//! Serves a [`Scenario`] over loopback HTTP, as a provider would: `POST
//! /v1/responses` in the OpenAI Responses format, `POST /v1/messages` in
//! the Anthropic Messages format and `POST /v1/chat/completions` in the
//! OpenAI Chat Completions format. The broker forwards `scripted` jobs
//! here, so scripted calls cross the same forwarding and metering code as
//! real ones. [`Replies`] and [`into_response`] are the pieces the test
//! stand-ins of other providers (`crates/test-support`: Vertex and Bedrock
//! paths, key checks, a request recorder) build on.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use axum::Router;
use bytes::Bytes;
use futures::StreamExt as _;
use http::{Method, StatusCode};
use serde_json::Value;
use tokio::net::TcpListener;

use super::{RenderContext, Scenario, ScriptedReply, Wire};
use crate::broker::error_response;
use crate::broker::meter::Api;

/// The largest request body the scripted upstream reads.
pub const MAX_REQUEST_BYTES: usize = 64 << 20;

/// A scenario's replies, with the count of transient failures served.
pub struct Replies {
    scenario: Arc<Scenario>,
    ctx: RenderContext,
    /// How often each turn's transient failure was served.
    transient_served: Mutex<HashMap<usize, u32>>,
}

/// One reply and the extra headers it goes with (`Retry-After`,
/// `retry-after-ms`).
pub struct Reply {
    pub reply: ScriptedReply,
    pub headers: Vec<(&'static str, String)>,
}

impl Replies {
    pub fn new(scenario: Arc<Scenario>, ctx: RenderContext) -> Replies {
        Replies {
            scenario,
            ctx,
            transient_served: Mutex::new(HashMap::new()),
        }
    }

    /// The reply to `request` on `wire`: the turn's transient failure while
    /// it was served fewer than its `times`, else the turn.
    pub fn reply(&self, wire: Wire, request: &Value) -> Reply {
        match self.transient(wire, request) {
            Some(t) => Reply {
                reply: t.reply,
                headers: t.headers,
            },
            None => Reply {
                reply: self.scenario.respond(wire, request, &self.ctx),
                headers: Vec::new(),
            },
        }
    }

    fn transient(&self, wire: Wire, request: &Value) -> Option<super::TransientReply> {
        let t = self.scenario.transient(wire, request)?;
        let mut served = match self.transient_served.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let count = served.entry(t.turn).or_insert(0);
        if *count >= t.times {
            return None;
        }
        *count += 1;
        Some(t)
    }
}

/// The wire (and the broker's API) of a request to `path`, for the three
/// provider routes.
pub fn route(method: &Method, path: &str) -> Option<(Wire, Api)> {
    let api = Api::of_path(path).filter(|_| method == Method::POST)?;
    Some((api, api))
}

/// The 404 of a path the upstream does not serve.
pub fn no_route(method: &Method, path: &str) -> Response {
    let msg = format!("scripted upstream: no route for {method} {path}");
    error_response(
        Api::Responses,
        StatusCode::NOT_FOUND,
        "not_found_error",
        &msg,
    )
}

/// The 400 of a request body the upstream cannot read.
pub fn bad_request(api: Api, message: &str) -> Response {
    error_response(
        api,
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        &format!("scripted upstream: {message}"),
    )
}

/// A reply as an HTTP response: its chunks one write each, then a clean end
/// or a cut connection.
pub fn into_response(reply: Reply, api: Api) -> Response {
    let Reply { reply, headers } = reply;
    let stream = async_stream_of(reply.chunks, reply.abort_after);
    let mut builder = Response::builder()
        .status(reply.status)
        .header(http::header::CONTENT_TYPE, reply.content_type);
    for (name, value) in &headers {
        builder = builder.header(*name, value);
    }
    builder.body(Body::from_stream(stream)).unwrap_or_else(|_| {
        error_response(
            api,
            StatusCode::INTERNAL_SERVER_ERROR,
            "api_error",
            "scripted upstream: bad reply",
        )
    })
}

/// A running scripted upstream; dropping it stops the server.
pub struct ScriptedServer {
    /// Base URL including `/v1`, e.g. `http://127.0.0.1:4000/v1`.
    pub base: String,
    task: tokio::task::JoinHandle<()>,
}

impl ScriptedServer {
    /// Serves `scenario` on `listener`.
    pub fn start(
        listener: TcpListener,
        scenario: Arc<Scenario>,
        ctx: RenderContext,
    ) -> std::io::Result<ScriptedServer> {
        let addr = listener.local_addr()?;
        let replies = Arc::new(Replies::new(scenario, ctx));
        let app = Router::new().fallback(handle).with_state(replies);
        // No Nagle delay: a reply's small writes (SSE events) leave at once
        // instead of waiting for the client's delayed ACK (≈ 40 ms a call).
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "scripted upstream stopped");
            }
        });
        Ok(ScriptedServer {
            base: format!("http://{addr}/v1"),
            task,
        })
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(State(replies): State<Arc<Replies>>, req: Request) -> Response {
    let Some((wire, api)) = route(req.method(), req.uri().path()) else {
        return no_route(req.method(), req.uri().path());
    };
    let body = match axum::body::to_bytes(req.into_body(), MAX_REQUEST_BYTES).await {
        Ok(b) => b,
        Err(e) => return bad_request(api, &format!("cannot read the body: {e}")),
    };
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return bad_request(api, &format!("the body is not JSON: {e}")),
    };
    into_response(replies.reply(wire, &request), api)
}

/// The reply's chunks, one write each, then a clean end or a cut connection.
fn async_stream_of(
    chunks: Vec<Bytes>,
    abort: bool,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send {
    let mut items: Vec<Result<Bytes, std::io::Error>> = chunks.into_iter().map(Ok).collect();
    if abort {
        items.push(Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "scripted disconnect",
        )));
    }
    futures::stream::iter(items).then(|item| async move {
        // Yield between chunks so each one leaves as its own write.
        tokio::task::yield_now().await;
        item
    })
}

//! Serves a [`Scenario`] over loopback HTTP, as a provider would: `POST
//! /v1/responses` in the OpenAI Responses format, `POST /v1/messages` in
//! the Anthropic Messages format and `POST /v1/chat/completions` in the
//! OpenAI Chat Completions format (and Google Vertex AI's Anthropic
//! `…/models/MODEL:streamRawPredict` paths as Messages). The broker forwards `scripted` jobs here,
//! so scripted calls cross the same forwarding and metering code as real
//! ones; tests also use it as a stand-in provider that checks the key the
//! broker injects and records what reached it.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use axum::Router;
use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use serde_json::Value;
use tokio::net::TcpListener;

use super::meter::Api;
use super::scripted::{RenderContext, Scenario, Wire};
use super::secret::Secret;
use super::server::error_response;

/// One request as the scripted upstream received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

struct ScriptedState {
    scenario: Arc<Scenario>,
    ctx: RenderContext,
    expect_key: Option<Secret>,
    requests: Mutex<Vec<RecordedRequest>>,
}

/// A running scripted upstream; dropping it stops the server.
pub struct ScriptedServer {
    /// Base URL including `/v1`, e.g. `http://127.0.0.1:4000/v1`.
    pub base: String,
    state: Arc<ScriptedState>,
    task: tokio::task::JoinHandle<()>,
}

impl ScriptedServer {
    /// Serves `scenario` on `listener`. With `expect_key`, a request that does
    /// not carry exactly that key (bearer, `x-api-key` or `api-key`) gets a 401.
    pub fn start(
        listener: TcpListener,
        scenario: Arc<Scenario>,
        ctx: RenderContext,
        expect_key: Option<Secret>,
    ) -> std::io::Result<ScriptedServer> {
        let addr = listener.local_addr()?;
        let state = Arc::new(ScriptedState {
            scenario,
            ctx,
            expect_key,
            requests: Mutex::new(Vec::new()),
        });
        let app = Router::new().fallback(handle).with_state(state.clone());
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "scripted upstream stopped");
            }
        });
        Ok(ScriptedServer {
            base: format!("http://{addr}/v1"),
            state,
            task,
        })
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        match self.state.requests.lock() {
            Ok(r) => r.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(State(state): State<Arc<ScriptedState>>, req: Request) -> Response {
    // Google Vertex AI's Anthropic paths: Messages, the model in the path.
    let vertex_model = match req.method() {
        &Method::POST => super::vertex::parse_path(req.uri().path()).map(|(m, _)| m),
        _ => None,
    };
    let (wire, api) = match (req.method(), req.uri().path()) {
        _ if vertex_model.is_some() => (Wire::Messages, Api::Messages),
        (&Method::POST, "/v1/responses") => (Wire::Responses, Api::Responses),
        (&Method::POST, "/v1/messages") => (Wire::Messages, Api::Messages),
        (&Method::POST, "/v1/chat/completions") => (Wire::Chat, Api::Chat),
        (m, p) => {
            let msg = format!("scripted upstream: no route for {m} {p}");
            return error_response(
                Api::Responses,
                StatusCode::NOT_FOUND,
                "not_found_error",
                &msg,
            );
        }
    };
    let path = req.uri().path().to_string();
    let headers = req.headers().clone();
    if let Some(key) = &state.expect_key {
        let bearer = format!("Bearer {}", key.expose());
        let ok = ["x-api-key", "api-key"].iter().any(|h| {
            headers
                .get(*h)
                .is_some_and(|v| v.as_bytes() == key.expose().as_bytes())
        }) || headers
            .get(http::header::AUTHORIZATION)
            .is_some_and(|v| v.as_bytes() == bearer.as_bytes());
        if !ok {
            return error_response(
                api,
                StatusCode::UNAUTHORIZED,
                "authentication_error",
                "scripted upstream: the provider key did not arrive",
            );
        }
    }
    let body = match axum::body::to_bytes(req.into_body(), 64 << 20).await {
        Ok(b) => b,
        Err(e) => {
            let msg = format!("scripted upstream: cannot read the body: {e}");
            return error_response(api, StatusCode::BAD_REQUEST, "invalid_request_error", &msg);
        }
    };
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            let msg = format!("scripted upstream: the body is not JSON: {e}");
            return error_response(api, StatusCode::BAD_REQUEST, "invalid_request_error", &msg);
        }
    };
    let mut request = request;
    if let (Some(m), Some(obj)) = (&vertex_model, request.as_object_mut()) {
        obj.insert("model".into(), Value::String(m.clone()));
    }
    let reply = state.scenario.respond(wire, &request, &state.ctx);
    if let Ok(mut r) = state.requests.lock() {
        r.push(RecordedRequest {
            path,
            headers,
            body: request,
        });
    }
    let abort = reply.abort_after;
    let chunks = reply.chunks;
    let stream = async_stream_of(chunks, abort);
    Response::builder()
        .status(reply.status)
        .header(http::header::CONTENT_TYPE, reply.content_type)
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| {
            error_response(
                api,
                StatusCode::INTERNAL_SERVER_ERROR,
                "api_error",
                "scripted upstream: bad reply",
            )
        })
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

use futures::StreamExt as _;

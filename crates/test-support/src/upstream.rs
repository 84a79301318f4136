//! A recording stand-in provider: serves a scenario (through the product's
//! `paddock::scripted::server::Replies`) on the OpenAI and Anthropic paths
//! and on Google Vertex AI's Anthropic paths (`…/models/MODEL:rawPredict`
//! as Messages); started with [`MockUpstream::start_bedrock`] it is an
//! Amazon Bedrock runtime (`/model/MODEL/invoke-with-response-stream` in
//! the AWS event stream, `/model/MODEL/invoke` as JSON) that verifies every
//! request's SigV4 signature, or with [`MockUpstream::start_bedrock_api_key`]
//! one that checks a Bedrock API key. With an expected key it refuses
//! requests without it; it records every request it answers.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use axum::Router;
use http::{HeaderMap, Method, StatusCode};
use paddock::broker::meter::Api;
use paddock::broker::{bedrock, error_response, eventstream, vertex, Secret};
use paddock::scripted::server::{self, Replies};
use paddock::scripted::{RenderContext, Scenario, Wire};
use serde_json::Value;
use tokio::net::TcpListener;

use crate::bedrock::{to_eventstream, verify_sigv4, AwsCredentials, INVALID_SIGNATURE};

/// One request as the stand-in received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub path: String,
    /// The query string, when there was one.
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: Value,
}

struct MockState {
    replies: Replies,
    expect_key: Option<Secret>,
    aws: Option<AwsCredentials>,
    /// Serves Amazon Bedrock's runtime paths.
    bedrock: bool,
    requests: Mutex<Vec<RecordedRequest>>,
}

/// A running stand-in upstream; dropping it stops the server.
pub struct MockUpstream {
    /// Base URL including `/v1`, e.g. `http://127.0.0.1:4000/v1`.
    pub base: String,
    state: Arc<MockState>,
    task: tokio::task::JoinHandle<()>,
}

impl MockUpstream {
    /// Serves `scenario` on `listener`. With `expect_key`, a request that does
    /// not carry exactly that key (bearer, `x-api-key` or `api-key`) gets a 401.
    pub fn start(
        listener: TcpListener,
        scenario: Arc<Scenario>,
        ctx: RenderContext,
        expect_key: Option<Secret>,
    ) -> std::io::Result<MockUpstream> {
        Self::start_with(listener, scenario, ctx, expect_key, None, false)
    }

    /// Serves `scenario` as an Amazon Bedrock runtime that accepts only
    /// requests SigV4-signed with `aws` (anything else: HTTP 403
    /// `InvalidSignatureException` with AWS's message).
    pub fn start_bedrock(
        listener: TcpListener,
        scenario: Arc<Scenario>,
        ctx: RenderContext,
        aws: AwsCredentials,
    ) -> std::io::Result<MockUpstream> {
        Self::start_with(listener, scenario, ctx, None, Some(aws), true)
    }

    /// Serves `scenario` as an Amazon Bedrock runtime that accepts only
    /// requests carrying the Bedrock API key `key` as `Authorization:
    /// Bearer` (anything else: HTTP 401).
    pub fn start_bedrock_api_key(
        listener: TcpListener,
        scenario: Arc<Scenario>,
        ctx: RenderContext,
        key: Secret,
    ) -> std::io::Result<MockUpstream> {
        Self::start_with(listener, scenario, ctx, Some(key), None, true)
    }

    fn start_with(
        listener: TcpListener,
        scenario: Arc<Scenario>,
        ctx: RenderContext,
        expect_key: Option<Secret>,
        aws: Option<AwsCredentials>,
        bedrock: bool,
    ) -> std::io::Result<MockUpstream> {
        let addr = listener.local_addr()?;
        let state = Arc::new(MockState {
            replies: Replies::new(scenario, ctx),
            expect_key,
            aws,
            bedrock,
            requests: Mutex::new(Vec::new()),
        });
        let app = Router::new().fallback(handle).with_state(state.clone());
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "stand-in upstream stopped");
            }
        });
        Ok(MockUpstream {
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

impl Drop for MockUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What a request path asks for: the wire, and for Vertex and Bedrock the
/// model (and Bedrock's method) named in the path.
struct Routed {
    wire: Wire,
    api: Api,
    vertex_model: Option<String>,
    bedrock: Option<(String, String)>,
}

fn route(state: &MockState, method: &Method, path: &str) -> Option<Routed> {
    let post = method == Method::POST;
    let vertex_model = post
        .then(|| vertex::parse_path(path).map(|(m, _)| m))
        .flatten();
    let bedrock = (post && state.bedrock)
        .then(|| bedrock::parse_path(path))
        .flatten();
    let (wire, api) = if vertex_model.is_some() || bedrock.is_some() {
        (Wire::Messages, Api::Messages)
    } else {
        server::route(method, path)?
    };
    Some(Routed {
        wire,
        api,
        vertex_model,
        bedrock,
    })
}

fn key_arrived(key: &Secret, headers: &HeaderMap) -> bool {
    let bearer = format!("Bearer {}", key.expose());
    ["x-api-key", "api-key"].iter().any(|h| {
        headers
            .get(*h)
            .is_some_and(|v| v.as_bytes() == key.expose().as_bytes())
    }) || headers
        .get(http::header::AUTHORIZATION)
        .is_some_and(|v| v.as_bytes() == bearer.as_bytes())
}

fn invalid_signature() -> Response {
    Response::builder()
        .status(StatusCode::FORBIDDEN)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header("x-amzn-errortype", "InvalidSignatureException")
        .body(Body::from(
            serde_json::json!({"message": INVALID_SIGNATURE}).to_string(),
        ))
        .unwrap()
}

async fn handle(State(state): State<Arc<MockState>>, req: Request) -> Response {
    let Some(routed) = route(&state, req.method(), req.uri().path()) else {
        return server::no_route(req.method(), req.uri().path());
    };
    let api = routed.api;
    let path = req.uri().path().to_string();
    let query = req.uri().query().map(str::to_string);
    let headers = req.headers().clone();
    if let Some(key) = &state.expect_key {
        if !key_arrived(key, &headers) {
            return error_response(
                api,
                StatusCode::UNAUTHORIZED,
                "authentication_error",
                "scripted upstream: the provider key did not arrive",
            );
        }
    }
    let body = match axum::body::to_bytes(req.into_body(), server::MAX_REQUEST_BYTES).await {
        Ok(b) => b,
        Err(e) => return server::bad_request(api, &format!("cannot read the body: {e}")),
    };
    if let (Some(aws), Some(_)) = (&state.aws, &routed.bedrock) {
        if let Err(why) = verify_sigv4(aws, &path, &headers, &body) {
            tracing::debug!(why, "stand-in Bedrock: signature rejected");
            return invalid_signature();
        }
    }
    let mut request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return server::bad_request(api, &format!("the body is not JSON: {e}")),
    };
    if let (Some(m), Some(obj)) = (&routed.vertex_model, request.as_object_mut()) {
        obj.insert("model".into(), Value::String(m.clone()));
    }
    if let (Some((m, method)), Some(obj)) = (&routed.bedrock, request.as_object_mut()) {
        // Bedrock names the model in the path and streams by path.
        obj.insert("model".into(), Value::String(bedrock::decode_model(m)));
        obj.insert(
            "stream".into(),
            Value::Bool(method == "invoke-with-response-stream"),
        );
    }
    let mut reply = state.replies.reply(routed.wire, &request);
    if routed.bedrock.is_some() && reply.reply.content_type.starts_with("text/event-stream") {
        reply.reply.chunks = to_eventstream(&reply.reply.chunks);
        reply.reply.content_type = eventstream::CONTENT_TYPE.to_string();
    }
    if let Ok(mut r) = state.requests.lock() {
        r.push(RecordedRequest {
            path,
            query,
            headers,
            body: request,
        });
    }
    server::into_response(reply, api)
}

//! Serves a [`Scenario`] over loopback HTTP, as a provider would: `POST
//! /v1/responses` in the OpenAI Responses format, `POST /v1/messages` in
//! the Anthropic Messages format and `POST /v1/chat/completions` in the
//! OpenAI Chat Completions format (and Google Vertex AI's Anthropic
//! `…/models/MODEL:streamRawPredict` paths as Messages). Started with
//! [`ScriptedServer::start_bedrock`] it is a mock Amazon Bedrock runtime:
//! `/model/MODEL/invoke-with-response-stream` answered in the AWS event
//! stream, `/model/MODEL/invoke` as JSON, every request's SigV4 signature
//! verified with the test's credentials (or, started with
//! [`ScriptedServer::start_bedrock_api_key`], a Bedrock API key checked
//! instead). The broker forwards `scripted` jobs here,
//! so scripted calls cross the same forwarding and metering code as real
//! ones; tests also use it as a stand-in provider that checks the key the
//! broker injects and records what reached it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use axum::Router;
use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use serde_json::Value;
use tokio::net::TcpListener;

use super::{RenderContext, Scenario, TransientReply, Wire};
use crate::broker::meter::Api;
use crate::broker::secret::Secret;
use crate::broker::{bedrock, error_response, eventstream, vertex};

/// One request as the scripted upstream received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

/// The AWS credentials a mock Bedrock endpoint verifies signatures with.
#[derive(Debug, Clone)]
pub struct AwsCredentials {
    pub access_key_id: String,
    pub secret_access_key: Secret,
    pub region: String,
}

struct ScriptedState {
    scenario: Arc<Scenario>,
    ctx: RenderContext,
    expect_key: Option<Secret>,
    aws: Option<AwsCredentials>,
    /// Serves Amazon Bedrock's runtime paths.
    bedrock: bool,
    requests: Mutex<Vec<RecordedRequest>>,
    /// How often each turn's transient failure was served.
    transient_served: Mutex<HashMap<usize, u32>>,
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
        Self::start_with(listener, scenario, ctx, expect_key, None, false)
    }

    /// Serves `scenario` as a mock Amazon Bedrock runtime that accepts only
    /// requests SigV4-signed with `aws` (anything else: HTTP 403
    /// `InvalidSignatureException` with AWS's message).
    pub fn start_bedrock(
        listener: TcpListener,
        scenario: Arc<Scenario>,
        ctx: RenderContext,
        aws: AwsCredentials,
    ) -> std::io::Result<ScriptedServer> {
        Self::start_with(listener, scenario, ctx, None, Some(aws), true)
    }

    /// Serves `scenario` as a mock Amazon Bedrock runtime that accepts only
    /// requests carrying the Bedrock API key `key` as `Authorization:
    /// Bearer` (anything else: HTTP 401).
    pub fn start_bedrock_api_key(
        listener: TcpListener,
        scenario: Arc<Scenario>,
        ctx: RenderContext,
        key: Secret,
    ) -> std::io::Result<ScriptedServer> {
        Self::start_with(listener, scenario, ctx, Some(key), None, true)
    }

    fn start_with(
        listener: TcpListener,
        scenario: Arc<Scenario>,
        ctx: RenderContext,
        expect_key: Option<Secret>,
        aws: Option<AwsCredentials>,
        bedrock: bool,
    ) -> std::io::Result<ScriptedServer> {
        let addr = listener.local_addr()?;
        let state = Arc::new(ScriptedState {
            scenario,
            ctx,
            expect_key,
            aws,
            bedrock,
            requests: Mutex::new(Vec::new()),
            transient_served: Mutex::new(HashMap::new()),
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
        &Method::POST => vertex::parse_path(req.uri().path()).map(|(m, _)| m),
        _ => None,
    };
    // Amazon Bedrock's runtime paths (mock Bedrock only).
    let bedrock = match (req.method(), state.bedrock) {
        (&Method::POST, true) => bedrock::parse_path(req.uri().path()),
        _ => None,
    };
    let (wire, api) = match (req.method(), req.uri().path()) {
        _ if vertex_model.is_some() || bedrock.is_some() => (Wire::Messages, Api::Messages),
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
    if let (Some(aws), Some(_)) = (&state.aws, &bedrock) {
        if let Err(why) = verify_sigv4(aws, &path, &headers, &body) {
            tracing::debug!(why, "mock Bedrock: signature rejected");
            return Response::builder()
                .status(StatusCode::FORBIDDEN)
                .header(http::header::CONTENT_TYPE, "application/json")
                .header("x-amzn-errortype", "InvalidSignatureException")
                .body(Body::from(
                    serde_json::json!({"message": INVALID_SIGNATURE}).to_string(),
                ))
                .unwrap_or_else(|_| {
                    error_response(
                        api,
                        StatusCode::FORBIDDEN,
                        "InvalidSignatureException",
                        INVALID_SIGNATURE,
                    )
                });
        }
    }
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
    if let (Some((m, method)), Some(obj)) = (&bedrock, request.as_object_mut()) {
        // Bedrock names the model in the path and streams by path.
        obj.insert("model".into(), Value::String(bedrock::decode_model(m)));
        obj.insert(
            "stream".into(),
            Value::Bool(method == "invoke-with-response-stream"),
        );
    }
    let transient = state.transient(wire, &request);
    let mut reply = match &transient {
        Some(t) => t.reply.clone(),
        None => state.scenario.respond(wire, &request, &state.ctx),
    };
    if bedrock.is_some() && reply.content_type.starts_with("text/event-stream") {
        reply.chunks = to_eventstream(&reply.chunks);
        reply.content_type = eventstream::CONTENT_TYPE.to_string();
    }
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
    let mut builder = Response::builder()
        .status(reply.status)
        .header(http::header::CONTENT_TYPE, reply.content_type);
    for (name, value) in transient.iter().flat_map(|t| &t.headers) {
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

impl ScriptedState {
    /// The transient failure to serve for this request, while its turn has
    /// served it fewer than `times` times.
    fn transient(&self, wire: Wire, request: &Value) -> Option<TransientReply> {
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

/// AWS's message for a request whose signature does not verify.
pub const INVALID_SIGNATURE: &str = "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.";

/// Re-signs the request as received with `aws` and compares signatures.
fn verify_sigv4(
    aws: &AwsCredentials,
    path_and_query: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(), String> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let auth = text("authorization").ok_or("no authorization header")?;
    let signed_headers = auth
        .split(", ")
        .find_map(|p| p.strip_prefix("SignedHeaders="))
        .ok_or("no SignedHeaders")?;
    let credential = auth
        .split(", ")
        .find_map(|p| p.strip_prefix("AWS4-HMAC-SHA256 Credential="))
        .ok_or("not AWS4-HMAC-SHA256")?;
    if credential.split('/').next() != Some(aws.access_key_id.as_str()) {
        return Err(format!("unknown access key in {credential}"));
    }
    let date = text("x-amz-date").ok_or("no x-amz-date")?;
    let format = time::macros::format_description!("[year][month][day]T[hour][minute][second]Z");
    let when = time::PrimitiveDateTime::parse(date, format)
        .map_err(|e| format!("x-amz-date {date}: {e}"))?
        .assume_utc();
    let host = text("host").ok_or("no host")?;
    let mut signed = Vec::new();
    for name in signed_headers.split(';') {
        match name {
            "host" | "x-amz-date" | "x-amz-security-token" => {}
            other => signed.push((other, text(other).ok_or(format!("no {other}"))?)),
        }
    }
    let expected = bedrock::sign_with(
        &aws.access_key_id,
        aws.secret_access_key.expose(),
        text("x-amz-security-token"),
        &aws.region,
        "POST",
        &format!("http://{host}{path_and_query}"),
        &signed,
        body,
        std::time::SystemTime::from(when),
    )?;
    match expected.iter().find(|(n, _)| n == "authorization") {
        Some((_, v)) if v == auth => Ok(()),
        _ => Err("signature mismatch".into()),
    }
}

/// SSE chunks (one Messages event each) as AWS event-stream `chunk` frames.
fn to_eventstream(chunks: &[Bytes]) -> Vec<Bytes> {
    let all: Vec<u8> = chunks.iter().flat_map(|c| c.to_vec()).collect();
    String::from_utf8_lossy(&all)
        .split("\n\n")
        .filter_map(|event| {
            let data: String = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            serde_json::from_str::<Value>(&data).ok()
        })
        .map(|v| eventstream::chunk(&v))
        .collect()
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

//! The broker's HTTP endpoint for one job: authenticates the job token,
//! admits the call (price known, budget left), forwards it upstream, and
//! streams the answer back through a [`MeteredBody`] that writes the ledger
//! row when the body ends, breaks, or is abandoned by the engine.

use std::future::Future as _;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use axum::Router;
use bytes::Bytes;
use futures::Stream;
use http::{HeaderMap, Method, StatusCode};
use paddock_protocol::{CallStatus, ModelCall, TokenUsage};
use serde_json::{json, Value};
use time::OffsetDateTime;

use super::budget::{estimate_micros, Admission, Reservation};
use super::ledger::{InFlight, LedgerError};
use super::meter::{Api, Meter};
use super::retry::{retry_after, retryable_error, retryable_status, NoRetry};
use super::upstream::forwardable_response_header;
use super::{PolicyNotice, Shared};

/// The largest request body the broker accepts from an engine.
const MAX_REQUEST_BYTES: usize = 32 << 20;

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new().fallback(handle).with_state(shared)
}

async fn handle(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let vertex_call = match (&shared.config.vertex, req.method()) {
        (Some(_), &Method::POST) => super::vertex::parse_path(req.uri().path()),
        _ => None,
    };
    let vertex_only = shared.config.vertex.is_some() && req.method() == Method::POST;
    let bedrock_call = match (&shared.config.bedrock, req.method()) {
        (Some(_), &Method::POST) => super::bedrock::parse_path(req.uri().path()),
        _ => None,
    };
    let api = match (req.method(), req.uri().path()) {
        _ if vertex_call.is_some() || bedrock_call.is_some() => Api::Messages,
        // A Bedrock job reaches the Bedrock runtime's invoke paths only. Claude
        // Code first lists inference profiles (a control-plane call it
        // tolerates failing): not implemented here.
        (&Method::GET, "/inference-profiles") if shared.config.bedrock.is_some() => {
            return error_response(
                Api::Messages,
                StatusCode::NOT_IMPLEMENTED,
                "not_implemented",
                "paddock broker: Bedrock inference profiles are not listed through the broker",
            );
        }
        (m, path) if shared.config.bedrock.is_some() => {
            return error_response(
                Api::Messages,
                StatusCode::NOT_FOUND,
                "not_found_error",
                &format!("paddock broker: no route for {m} {path} (this job uses Amazon Bedrock)"),
            );
        }
        // A Vertex job reaches Vertex's paths only: its token goes nowhere else.
        (_, path) if vertex_only => {
            return error_response(
                Api::Messages,
                StatusCode::NOT_FOUND,
                "not_found_error",
                &format!("paddock broker: no route for POST {path} (this job uses Vertex AI)"),
            );
        }
        (&Method::POST, "/v1/responses") => Api::Responses,
        (&Method::POST, "/v1/messages") => Api::Messages,
        (&Method::POST, "/v1/chat/completions") => Api::Chat,
        (&Method::GET, "/v1/models") => return models(&shared, req.headers()),
        (_, path) => {
            let path = path.to_string();
            return error_response(
                Api::Responses,
                StatusCode::NOT_FOUND,
                "not_found_error",
                &format!("paddock broker: no route for {} {path}", req.method()),
            );
        }
    };
    if !authorized(req.headers(), shared.token.expose()) {
        return error_response(
            api,
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "paddock broker: missing or invalid job token",
        );
    }
    let started = Instant::now();
    let started_at = OffsetDateTime::now_utc();
    let seq = shared.next_seq.fetch_add(1, Ordering::SeqCst);
    let mut call = Call {
        shared: &shared,
        api,
        seq,
        model: String::new(),
        started,
        started_at,
        in_flight: None,
    };
    let path = req.uri().path().to_string();
    let query = req.uri().query().map(str::to_string);
    let headers = req.headers().clone();
    let body = match axum::body::to_bytes(req.into_body(), MAX_REQUEST_BYTES).await {
        Ok(b) => b,
        Err(e) => {
            let msg = format!("paddock broker: cannot read the request body: {e}");
            return call.refuse(StatusCode::BAD_REQUEST, "invalid_request_error", msg);
        }
    };
    let mut request: Value = match serde_json::from_slice(&body) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => {
            let msg = "paddock broker: the request body is not a JSON object".to_string();
            return call.refuse(StatusCode::BAD_REQUEST, "invalid_request_error", msg);
        }
        Err(e) => {
            let msg = format!("paddock broker: the request body is not JSON: {e}");
            return call.refuse(StatusCode::BAD_REQUEST, "invalid_request_error", msg);
        }
    };
    // Chat Completions streams carry usage only when asked: ask.
    let mut body = match include_usage(api, &mut request) {
        Some(rewritten) => rewritten,
        None => body,
    };
    let model = match (&vertex_call, &bedrock_call) {
        // Vertex and Bedrock name the model in the path, not the body.
        (Some((m, _)), _) => m.clone(),
        (None, Some((m, _))) => super::bedrock::decode_model(m),
        (None, None) => request
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
    };
    call.model = model.clone();
    if let Err(list) = shared.config.allowlist.check(&model) {
        let msg =
            format!("paddock broker: model `{model}` is not allowed by the {list} model allowlist");
        let _ = shared.policy.send(PolicyNotice {
            rule: "model".into(),
            message: msg.clone(),
        });
        return call.refuse(StatusCode::FORBIDDEN, "permission_error", msg);
    }
    let prices = &shared.config.prices;
    if prices.price(&model).is_none() && !shared.config.allow_unpriced {
        let msg = format!(
            "paddock broker: model `{model}` has no price in price table {}; Paddock refuses calls it cannot meter (set upstream.allow_unpriced to run it unpriced)",
            prices.version
        );
        return call.refuse(StatusCode::BAD_REQUEST, "invalid_request_error", msg);
    }
    let max_output = ["max_output_tokens", "max_completion_tokens", "max_tokens"]
        .iter()
        .find_map(|k| request.get(*k).and_then(Value::as_u64));
    let mut estimate = estimate_micros(prices, &model, body.len() as u64, max_output);
    // A worst case past what is left: the output is capped to what fits.
    if let Some(left) = shared.budget.left() {
        if estimate > left {
            if let Some((cap, rewritten)) =
                cap_output(api, &mut request, prices, &model, body.len() as u64, left)
            {
                body = rewritten;
                estimate = estimate_micros(prices, &model, body.len() as u64, Some(cap));
            }
        }
    }
    let reservation = match shared.budget.admit(seq, estimate).await {
        Admission::Admitted(r) => r,
        Admission::Refused(msg) => {
            let _ = shared.policy.send(PolicyNotice {
                rule: "budget".into(),
                message: msg.clone(),
            });
            return call.refuse(StatusCode::PAYMENT_REQUIRED, "budget_exceeded", msg);
        }
    };

    let upstream = &shared.config.upstream;
    let (url, out_headers) = match (&shared.config.vertex, &vertex_call, &bedrock_call) {
        (_, _, Some((m, method))) => {
            // The job picks only the model and the method; no AWS header of
            // the engine's survives (the broker signs).
            let mut h = upstream.request_headers(api, &headers);
            let amz: Vec<_> = h
                .keys()
                .filter(|n| n.as_str().starts_with("x-amz-"))
                .cloned()
                .collect();
            for n in amz {
                h.remove(n);
            }
            (
                upstream.url(&super::bedrock::Bedrock::path(m, method), query.as_deref()),
                h,
            )
        }
        (Some(vertex), Some((m, method)), None) => (
            // Rebuilt from the spec's project and region: the job picks
            // only the model and the method.
            upstream.url(&vertex.path(m, method), query.as_deref()),
            upstream.request_headers(api, &headers),
        ),
        _ => (
            upstream.url(&path, query.as_deref()),
            upstream.request_headers(api, &headers),
        ),
    };
    let retry = shared.config.retry;
    let mut failed = 0u32;
    let resp = loop {
        let attempt_headers = match credentials(&shared, &url, &body, out_headers.clone()).await {
            Ok(h) => h,
            Err(msg) => return call.bad_gateway(reservation, msg),
        };
        // On the ledger before it leaves: whatever kills Paddock now, the
        // call's cost is accounted for (ledger.rs).
        if let Err(e) = call.write_ahead(body.len() as u64).await {
            reservation.settle(0);
            let msg = format!("paddock broker: the call was not forwarded: {e}");
            tracing::error!("{msg}");
            return error_response(api, StatusCode::SERVICE_UNAVAILABLE, "api_error", &msg);
        }
        let sent = shared
            .client
            .post(&url)
            .headers(attempt_headers)
            .body(body.clone())
            .send()
            .await;
        let (answered, unreachable) = match sent {
            Ok(r) if retryable_status(r.status().as_u16()) => (Some(r), None),
            Ok(r) => break r,
            Err(e) => {
                let msg = format!(
                    "paddock broker: upstream {} unreachable: {}",
                    upstream.provider,
                    without_url(&e)
                );
                if !retryable_error(&e) {
                    return call.bad_gateway(reservation, msg);
                }
                (None, Some(msg))
            }
        };
        failed += 1;
        let asked = answered
            .as_ref()
            .and_then(|r| retry_after(r.headers(), std::time::SystemTime::now()));
        let delay = if shared.budget.held() {
            Err(NoRetry::Held)
        } else {
            retry.delay(failed, asked, Instant::now())
        };
        let delay = match (answered, delay) {
            (Some(r), Err(_)) => break r,
            (None, Err(_)) => {
                let msg = unreachable.unwrap_or_default();
                return call.bad_gateway(reservation, msg);
            }
            (Some(r), Ok(d)) => {
                call.record_retried(r, failed, d).await;
                d
            }
            (None, Ok(d)) => {
                call.record_unreachable(&unreachable.unwrap_or_default(), failed, d);
                d
            }
        };
        tokio::time::sleep(delay).await;
        call.next_attempt();
    };
    let status = resp.status();
    let content_type = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let mut builder = Response::builder().status(status.as_u16());
    for (name, value) in resp.headers() {
        if forwardable_response_header(name) {
            builder = builder.header(name, value);
        }
    }
    let limit = shared.config.max_upstream_event_bytes;
    let mut meter = Meter::new(api, &content_type, limit);
    let (inner, cut, broke): (ByteStream, Cut, Option<String>) =
        if meter.is_sse() || !status.is_success() {
            (Box::pin(resp.bytes_stream()), Cut::No, None)
        } else {
            // A whole (JSON) answer is judged before any of it reaches the
            // engine: it names its served model only as a whole.
            match whole_answer(&shared, resp, limit, &mut meter).await {
                Ok(Whole::Pass(bytes)) => (
                    Box::pin(futures::stream::once(async move { Ok(bytes) })),
                    Cut::No,
                    None,
                ),
                Ok(Whole::Withheld(w)) => {
                    let _ = shared.policy.send(PolicyNotice {
                        rule: w.rule.into(),
                        message: w.message.clone(),
                    });
                    builder = Response::builder()
                        .status(w.status)
                        .header(http::header::CONTENT_TYPE, "application/json");
                    let body = error_body(api, w.kind, &w.message);
                    (
                        Box::pin(futures::stream::empty()),
                        Cut::Pending(Bytes::from(body)),
                        Some(w.message),
                    )
                }
                Err(e) => {
                    let msg = format!(
                        "paddock broker: the upstream answer broke: {}",
                        without_url(&e)
                    );
                    return call.bad_gateway(reservation, msg);
                }
            }
        };
    let withheld = broke.is_some();
    let whole = !meter.is_sse() && status.is_success();
    let metered = MeteredBody {
        in_flight: call.in_flight.take(),
        closing: None,
        whole,
        inner,
        meter: Some(meter),
        shared: shared.clone(),
        seq: call.seq,
        model,
        http_status: status.as_u16(),
        request_bytes: body.len() as u64,
        started: call.started,
        started_at: call.started_at,
        ttft_ms: None,
        broke,
        reservation: Some(reservation),
        cut,
        withheld,
    };
    builder
        .body(Body::from_stream(metered))
        .unwrap_or_else(|_| {
            plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "paddock broker: bad response",
            )
        })
}

/// A whole (non-streaming) answer as the broker judged it.
enum Whole {
    /// Passed to the engine as it came.
    Pass(Bytes),
    /// Replaced by the broker's error (the ledger still prices what the
    /// upstream answered, or estimates it when it was not read).
    Withheld(Withheld),
}

struct Withheld {
    status: StatusCode,
    /// The policy rule, for the job's `policy` event.
    rule: &'static str,
    /// The error kind in the API's error body.
    kind: &'static str,
    message: String,
}

/// Reads a whole answer (at most `limit` bytes: past it the answer is
/// withheld unread) and judges its served model against the allowlist.
async fn whole_answer(
    shared: &Shared,
    resp: reqwest::Response,
    limit: usize,
    meter: &mut Meter,
) -> Result<Whole, reqwest::Error> {
    let bytes = match super::bounded::read(resp, limit).await {
        Ok(b) => b,
        Err(super::bounded::BodyError::TooLarge { limit }) => {
            return Ok(Whole::Withheld(Withheld {
                status: StatusCode::BAD_GATEWAY,
                rule: "limits",
                kind: "api_error",
                message: format!(
                    "paddock broker: the upstream answered with a body of more than {limit} bytes, past broker.max_upstream_event_bytes: the response was withheld"
                ),
            }))
        }
        Err(super::bounded::BodyError::Read(e)) => return Err(e),
    };
    let Some(message) = served_outside_allowlist(shared, &bytes) else {
        return Ok(Whole::Pass(bytes));
    };
    // Metered here: none of it goes through the body.
    meter.feed(&bytes);
    shared.note_served_refused(&message);
    Ok(Whole::Withheld(Withheld {
        status: StatusCode::FORBIDDEN,
        rule: "model",
        kind: "permission_error",
        message,
    }))
}

/// The upstream credentials of one attempt, added to `headers`: Bedrock's
/// SigV4 signature (made per attempt, so a retried call is signed at the
/// moment it leaves), or Vertex's or Entra ID's access token (cached until
/// shortly before it expires).
async fn credentials(
    shared: &Shared,
    url: &str,
    body: &[u8],
    mut headers: HeaderMap,
) -> Result<HeaderMap, String> {
    if let Some(bedrock) = &shared.config.bedrock {
        let content_type = headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/json")
            .to_string();
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_str(&content_type)
                .unwrap_or(http::HeaderValue::from_static("application/json")),
        );
        let signed = bedrock
            .sign(
                "POST",
                url,
                &[("content-type", content_type.as_str())],
                body,
                std::time::SystemTime::now(),
            )
            .await
            .map_err(|e| format!("paddock broker: {e}"))?;
        for (name, value) in signed {
            if let (Ok(n), Ok(mut v)) = (
                http::HeaderName::from_bytes(name.as_bytes()),
                http::HeaderValue::from_str(&value),
            ) {
                v.set_sensitive(true);
                headers.insert(n, v);
            }
        }
    }
    let bearer = match (&shared.config.vertex, &shared.config.entra) {
        (Some(vertex), _) => Some(
            vertex
                .token()
                .await
                .map_err(|e| format!("paddock broker: {e}"))?,
        ),
        (None, Some(entra)) => Some(
            entra
                .token()
                .await
                .map_err(|e| format!("paddock broker: {e}"))?,
        ),
        (None, None) => None,
    };
    if let Some(token) = bearer {
        if let Ok(mut v) = http::HeaderValue::from_str(&format!("Bearer {}", token.expose())) {
            v.set_sensitive(true);
            headers.insert(http::header::AUTHORIZATION, v);
        }
    }
    Ok(headers)
}

/// The fewest output tokens the broker caps a call to: below it, a call
/// whose worst case does not fit is refused instead.
pub const MIN_OUTPUT_CAP: u64 = 1_024;

/// Caps the call's output so that its worst case fits `left` micro-dollars:
/// sets the API's own field (`max_output_tokens`, `max_tokens`,
/// `max_completion_tokens`) to the output tokens that fit after the input
/// estimate and returns the cap and the rewritten body; `None` when fewer
/// than [`MIN_OUTPUT_CAP`] tokens fit or the model has no price.
fn cap_output(
    api: Api,
    request: &mut Value,
    prices: &super::PriceTable,
    model: &str,
    request_bytes: u64,
    left: i64,
) -> Option<(u64, Bytes)> {
    // The rewritten body is the estimate's input: the field adds at most
    // 64 bytes.
    let input = TokenUsage {
        input_tokens: (request_bytes + 64) / 4,
        ..TokenUsage::default()
    };
    let input_cost = prices.cost_micros(model, &input)?;
    let per_million = prices.price(model)?.rates_for(&input).output;
    if per_million == 0 {
        return None;
    }
    // One micro-dollar for the rounding of the whole call's cost.
    let room = u64::try_from(left.checked_sub(input_cost)?.checked_sub(1)?).ok()?;
    let cap = u64::try_from(u128::from(room) * 1_000_000 / u128::from(per_million)).ok()?;
    if cap < MIN_OUTPUT_CAP {
        return None;
    }
    let field = match api {
        Api::Responses => "max_output_tokens",
        Api::Messages => "max_tokens",
        Api::Chat if request.get("max_tokens").is_some() => "max_tokens",
        Api::Chat => "max_completion_tokens",
    };
    request
        .as_object_mut()?
        .insert(field.to_string(), Value::from(cap));
    serde_json::to_vec(request)
        .ok()
        .map(|b| (cap, Bytes::from(b)))
}

/// For a streaming Chat Completions request, sets
/// `stream_options.include_usage` and returns the rewritten body; `None`
/// when the body passes unchanged.
fn include_usage(api: Api, request: &mut Value) -> Option<Bytes> {
    if api != Api::Chat || request.get("stream").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    if request.pointer("/stream_options/include_usage") == Some(&Value::Bool(true)) {
        return None;
    }
    let obj = request.as_object_mut()?;
    let options = obj.entry("stream_options").or_insert_with(|| json!({}));
    if !options.is_object() {
        *options = json!({});
    }
    options
        .as_object_mut()?
        .insert("include_usage".into(), Value::Bool(true));
    serde_json::to_vec(request).ok().map(Bytes::from)
}

/// `GET /v1/models`: the models the job may use, in Anthropic's list format
/// when the request carries `anthropic-version`, else OpenAI's.
fn models(shared: &Shared, headers: &HeaderMap) -> Response {
    let anthropic = headers.contains_key("anthropic-version");
    let api = if anthropic {
        Api::Messages
    } else {
        Api::Responses
    };
    if !authorized(headers, shared.token.expose()) {
        return error_response(
            api,
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "paddock broker: missing or invalid job token",
        );
    }
    let names = shared.config.allowlist.listed(&shared.config.prices);
    let body = if anthropic {
        let data: Vec<Value> = names
            .iter()
            .map(|m| json!({"type": "model", "id": m, "display_name": m, "created_at": "1970-01-01T00:00:00Z"}))
            .collect();
        json!({"data": data, "has_more": false, "first_id": names.first(), "last_id": names.last()})
    } else {
        let data: Vec<Value> = names
            .iter()
            .map(|m| json!({"id": m, "object": "model", "created": 0, "owned_by": "paddock"}))
            .collect();
        json!({"object": "list", "data": data})
    };
    Response::builder()
        .status(StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap_or_else(|_| {
            plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "paddock broker: bad response",
            )
        })
}

fn without_url(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

/// True when the request carries the job token as `x-api-key` or bearer.
fn authorized(headers: &HeaderMap, token: &str) -> bool {
    let presented = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| {
            headers
                .get(http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::to_string)
        });
    match presented {
        Some(p) => constant_time_eq(p.as_bytes(), token.as_bytes()),
        None => false,
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// One model call before any upstream answer: what the ledger row of a
/// call that gets no answer needs.
struct Call<'a> {
    shared: &'a Shared,
    api: Api,
    seq: u64,
    /// Empty until the request body has been read.
    model: String,
    started: Instant,
    started_at: OffsetDateTime,
    /// The current attempt's row, written ahead and not yet settled.
    in_flight: Option<InFlight>,
}

impl Call<'_> {
    /// The broker refuses the call: a `refused` row and an error in the
    /// API's wire format.
    fn refuse(&mut self, status: StatusCode, kind: &str, message: String) -> Response {
        self.settle(self.unanswered(CallStatus::Refused, status, &message));
        error_response(self.api, status, kind, &message)
    }

    /// Writes the attempt's row ahead of forwarding it: `in_flight`, its
    /// input estimated from the request's size (about four bytes a token).
    async fn write_ahead(&mut self, request_bytes: u64) -> Result<(), LedgerError> {
        let tokens = TokenUsage {
            input_tokens: request_bytes / 4,
            ..TokenUsage::default()
        };
        let row = ModelCall {
            status: CallStatus::InFlight,
            http_status: None,
            error: None,
            estimated: true,
            cost_micros: self
                .shared
                .config
                .prices
                .cost_micros(&self.model, &tokens)
                .unwrap_or(0),
            tokens,
            ..self.unanswered(CallStatus::InFlight, StatusCode::OK, "")
        };
        self.in_flight = Some(self.shared.recorder.write_ahead(row).await?);
        Ok(())
    }

    /// Settles the attempt's row (its in-flight row, if written ahead), in
    /// the background.
    fn settle(&mut self, row: ModelCall) {
        drop(match self.in_flight.take() {
            Some(in_flight) => in_flight.settle(row),
            None => self.shared.recorder.settle(row),
        });
    }

    /// The upstream could not be asked (unreachable, credentials not
    /// minted): a 502 to the engine, an `http_error` row, the reservation
    /// released.
    fn bad_gateway(&mut self, reservation: Reservation, message: String) -> Response {
        self.settle(self.unanswered(CallStatus::HttpError, StatusCode::BAD_GATEWAY, &message));
        reservation.settle(0);
        error_response(self.api, StatusCode::BAD_GATEWAY, "api_error", &message)
    }

    /// The next attempt of a retried call: its own ledger row (a new `seq`)
    /// and its own clock.
    fn next_attempt(&mut self) {
        self.seq = self.shared.next_seq.fetch_add(1, Ordering::SeqCst);
        self.started = Instant::now();
        self.started_at = OffsetDateTime::now_utc();
    }

    /// The row of an attempt the upstream answered with a retryable error
    /// (429, 5xx): the upstream's status and message, no cost. The error
    /// body (at most 64 KiB of it) is read and dropped; the engine never
    /// sees it.
    async fn record_retried(&mut self, resp: reqwest::Response, failed: u32, delay: Duration) {
        let ttft_ms = Some(self.started.elapsed().as_millis() as u64);
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let mut meter = Meter::new(
            self.api,
            &content_type,
            self.shared.config.max_upstream_event_bytes,
        );
        let mut resp = resp;
        let mut read = 0usize;
        while let Ok(Some(chunk)) = resp.chunk().await {
            read += chunk.len();
            meter.feed(&chunk);
            if read >= 64 << 10 {
                break;
            }
        }
        let reading = meter.finish(status);
        let upstream_error = reading
            .error
            .unwrap_or_else(|| format!("HTTP {status} from the upstream"));
        let mut row = self.unanswered(
            CallStatus::HttpError,
            StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY),
            &self.retrying(&upstream_error, failed, delay),
        );
        row.ttft_ms = ttft_ms;
        row.served_model = reading.served_model;
        self.settle(row);
    }

    /// The row of an attempt whose connection failed before any answer: no
    /// HTTP status, no cost.
    fn record_unreachable(&mut self, message: &str, failed: u32, delay: Duration) {
        let mut row = self.unanswered(
            CallStatus::HttpError,
            StatusCode::BAD_GATEWAY,
            &self.retrying(message, failed, delay),
        );
        row.http_status = None;
        self.settle(row);
    }

    fn retrying(&self, error: &str, failed: u32, delay: Duration) -> String {
        format!(
            "{error} (attempt {failed} of {}; the broker retries in {} ms)",
            self.shared.config.retry.max_attempts(),
            delay.as_millis()
        )
    }

    /// The ledger row of a call without an upstream answer: no tokens, no
    /// cost, the broker's own status and message.
    fn unanswered(&self, status: CallStatus, http_status: StatusCode, message: &str) -> ModelCall {
        let config = &self.shared.config;
        ModelCall {
            job_id: config.job_id.clone(),
            attempt: config.attempt,
            seq: self.seq,
            provider: config.upstream.provider.clone(),
            requested_model: self.model.clone(),
            served_model: None,
            tokens: TokenUsage::default(),
            ttft_ms: None,
            duration_ms: self.started.elapsed().as_millis() as u64,
            status,
            http_status: Some(http_status.as_u16()),
            error: Some(message.to_string()),
            estimated: false,
            price_version: config.prices.version.clone(),
            cost_micros: 0,
            started_at: self.started_at,
        }
    }
}

/// An error body in the wire format of `api`, so the engine shows the message.
pub fn error_response(api: Api, status: StatusCode, kind: &str, message: &str) -> Response {
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(error_body(api, kind, message)))
        .unwrap_or_else(|_| plain(status, message))
}

fn error_body(api: Api, kind: &str, message: &str) -> String {
    match api {
        Api::Responses | Api::Chat => {
            json!({"error": {"message": message, "type": kind, "code": kind}})
        }
        Api::Messages => json!({"type": "error", "error": {"type": kind, "message": message}}),
    }
    .to_string()
}

/// The refusal for a whole answer whose served model (its `model` field:
/// Messages, Responses, Chat, and the Messages bodies of Bedrock and
/// Vertex) the allowlist does not allow.
fn served_outside_allowlist(shared: &Shared, body: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let served = v
        .get("model")
        .or_else(|| v.pointer("/response/model"))
        .and_then(Value::as_str)?;
    let list = shared.config.allowlist.check(served).err()?;
    Some(format!(
        "paddock broker: the upstream served model `{served}`, which the {list} model allowlist does not allow: the response was withheld"
    ))
}

fn plain(status: StatusCode, message: &str) -> Response {
    let mut r = Response::new(Body::from(message.to_string()));
    *r.status_mut() = status;
    r
}

type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, reqwest::Error>> + Send>>;

/// The upstream body on its way to the engine, metered as it passes. The
/// ledger row is settled exactly once: when the answer completes (its
/// final chunk, or its end, held until the row is written), when the
/// upstream breaks it, or when the engine drops it.
struct MeteredBody {
    /// The call's row, written ahead.
    in_flight: Option<InFlight>,
    /// The settled row being written, and the chunk held until it is
    /// (none: the body's end).
    closing: Option<(tokio::task::JoinHandle<()>, Option<Bytes>)>,
    /// A whole (JSON) answer: its one chunk is its final one.
    whole: bool,
    inner: ByteStream,
    meter: Option<Meter>,
    shared: Arc<Shared>,
    seq: u64,
    model: String,
    http_status: u16,
    request_bytes: u64,
    started: Instant,
    started_at: OffsetDateTime,
    ttft_ms: Option<u64>,
    broke: Option<String>,
    reservation: Option<Reservation>,
    cut: Cut,
    /// A whole answer replaced by the broker's error (the ledger still
    /// prices what the upstream answered).
    withheld: bool,
}

/// Whether the broker cut the stream (budget ceiling, model allowlist).
enum Cut {
    No,
    /// Cut: the error event still to send to the engine.
    Pending(Bytes),
    /// Cut and the error event sent.
    Sent,
}

impl MeteredBody {
    /// Checks the served model against the allowlist and updates the
    /// call's running cost; past either, drops the upstream
    /// stream (closing its connection) and queues an error event for the
    /// engine.
    fn check_policy(&mut self) {
        let (Some(meter), Some(reservation)) = (self.meter.as_ref(), self.reservation.as_ref())
        else {
            return;
        };
        // A JSON body is priced whole at its end; a completed stream has
        // nothing left to cut.
        if !meter.is_sse() || meter.completed() {
            return;
        }
        // Past the limit the meter stopped reading: what it cannot meter
        // does not reach the engine.
        if let Some(message) = meter.over_limit() {
            let message = format!("{message}: the response was cut");
            self.cut_with("limits", "api_error", message);
            return;
        }
        let tokens = meter.running_usage(self.request_bytes);
        let prices = &self.shared.config.prices;
        let tier = meter.service_tier();
        let running = meter
            .served_model()
            .and_then(|m| prices.cost_micros_in(m, &tokens, tier))
            .or_else(|| prices.cost_micros_in(&self.model, &tokens, tier))
            .unwrap_or(0);
        if let Some(served) = meter.served_model() {
            if let Err(list) = self.shared.config.allowlist.check(served) {
                let message = format!(
                    "paddock broker: the upstream served model `{served}`, which the {list} model allowlist does not allow: the response was cut"
                );
                self.shared.note_served_refused(&message);
                self.cut_with("model", "permission_error", message);
                return;
            }
        }
        let Some(message) = reservation.observe(running) else {
            return;
        };
        self.cut_with("budget", "budget_exceeded", message);
    }

    /// Drops the upstream stream (closing its connection) and queues an
    /// error event of `kind` with `message` for the engine.
    fn cut_with(&mut self, rule: &str, kind: &str, message: String) {
        let Some(meter) = self.meter.as_ref() else {
            return;
        };
        if meter.is_eventstream() {
            let event = super::eventstream::exception(kind, &message);
            let _ = self.shared.policy.send(PolicyNotice {
                rule: rule.into(),
                message: message.clone(),
            });
            self.broke = Some(message);
            self.inner = Box::pin(futures::stream::empty());
            self.cut = Cut::Pending(event);
            return;
        }
        let mut event = if meter.mid_event() {
            b"\n\n".to_vec()
        } else {
            Vec::new()
        };
        let (name, data) = match meter.api() {
            Api::Chat => (
                "",
                json!({"error": {"message": message, "type": kind, "code": kind}}),
            ),
            Api::Responses => (
                "response.failed",
                json!({"type": "response.failed", "response": {
                    "id": format!("resp_paddock_cut_{}", self.seq), "object": "response",
                    "status": "failed", "model": self.model,
                    "error": {"code": kind, "message": message}}}),
            ),
            Api::Messages => (
                "error",
                json!({"type": "error", "error": {"type": kind, "message": message}}),
            ),
        };
        let frame = if name.is_empty() {
            format!("data: {data}\n\n")
        } else {
            format!("event: {name}\ndata: {data}\n\n")
        };
        event.extend_from_slice(frame.as_bytes());
        let _ = self.shared.policy.send(PolicyNotice {
            rule: rule.into(),
            message: message.clone(),
        });
        self.broke = Some(message);
        self.inner = Box::pin(futures::stream::empty());
        self.cut = Cut::Pending(Bytes::from(event));
    }

    /// Settles the call's row (once; later calls do nothing): the
    /// handle of its write.
    fn settle(&mut self) -> Option<tokio::task::JoinHandle<()>> {
        let meter = self.meter.take()?;
        let reading = meter.finish(self.http_status);
        let mut error = reading.error.clone();
        // A response whose terminal event arrived is complete even when the
        // engine hangs up before the body's last byte.
        if let (Some(broke), false) = (&self.broke, reading.completed && !self.withheld) {
            error.get_or_insert_with(|| broke.clone());
        }
        let (tokens, estimated) = match reading.usage {
            Some(u) if reading.usage_final => (u, false),
            None if self.http_status >= 400 => (TokenUsage::default(), false),
            Some(u) if self.http_status >= 400 => (u, false),
            // No final usage arrived (cut by the upstream, the engine or the
            // broker): what was seen, with about four characters a token.
            _ => (reading.running_usage(self.request_bytes), true),
        };
        let status = if self.http_status >= 400 {
            CallStatus::HttpError
        } else if error.is_some() || !reading.completed {
            if error.is_none() {
                error = Some("the stream ended before the response completed".to_string());
            }
            CallStatus::StreamError
        } else {
            CallStatus::Ok
        };
        let prices = &self.shared.config.prices;
        let priced_model = reading.served_model.as_deref().unwrap_or(&self.model);
        // At the service tier the answer reports (priority, flex...).
        let tier = reading.service_tier.as_deref();
        let cost = prices
            .cost_micros_in(priced_model, &tokens, tier)
            .or_else(|| prices.cost_micros_in(&self.model, &tokens, tier))
            .unwrap_or(0);
        if let Some(r) = self.reservation.take() {
            r.settle(cost);
        }
        let call = ModelCall {
            job_id: self.shared.config.job_id.clone(),
            attempt: self.shared.config.attempt,
            seq: self.seq,
            provider: self.shared.config.upstream.provider.clone(),
            requested_model: self.model.clone(),
            served_model: reading.served_model,
            tokens,
            ttft_ms: self.ttft_ms,
            duration_ms: self.started.elapsed().as_millis() as u64,
            status,
            http_status: Some(self.http_status),
            error,
            estimated,
            price_version: prices.version.clone(),
            cost_micros: cost,
            started_at: self.started_at,
        };
        Some(match self.in_flight.take() {
            Some(in_flight) => in_flight.settle(call),
            None => self.shared.recorder.settle(call),
        })
    }

    /// True when `chunk`, just metered, completes the answer.
    fn completes(&self) -> bool {
        matches!(self.cut, Cut::No)
            && (self.whole || self.meter.as_ref().is_some_and(|m| m.completed()))
    }
}

impl Stream for MeteredBody {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            // The answer's final chunk (or its end) waits for its settled
            // row, which the write bounds.
            if let Some((write, _)) = self.closing.as_mut() {
                let _ = futures::ready!(Pin::new(write).poll(cx));
                let held = self.closing.take().and_then(|(_, chunk)| chunk);
                return Poll::Ready(held.map(Ok));
            }
            match std::mem::replace(&mut self.cut, Cut::Sent) {
                Cut::Pending(event) => return Poll::Ready(Some(Ok(event))),
                Cut::Sent => match self.settle() {
                    Some(write) => {
                        self.closing = Some((write, None));
                        continue;
                    }
                    None => return Poll::Ready(None),
                },
                Cut::No => self.cut = Cut::No,
            }
            return match self.inner.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(chunk))) => {
                    if self.ttft_ms.is_none() {
                        self.ttft_ms = Some(self.started.elapsed().as_millis() as u64);
                    }
                    if let Some(m) = self.meter.as_mut() {
                        m.feed(&chunk);
                    }
                    self.check_policy();
                    if self.completes() {
                        if let Some(write) = self.settle() {
                            self.closing = Some((write, Some(chunk)));
                            continue;
                        }
                    }
                    Poll::Ready(Some(Ok(chunk)))
                }
                Poll::Ready(Some(Err(e))) => {
                    self.broke = Some(format!("the upstream stream broke: {}", without_url(&e)));
                    drop(self.settle());
                    Poll::Ready(Some(Err(std::io::Error::other(e))))
                }
                Poll::Ready(None) => match self.settle() {
                    Some(write) => {
                        self.closing = Some((write, None));
                        continue;
                    }
                    None => Poll::Ready(None),
                },
                Poll::Pending => Poll::Pending,
            };
        }
    }
}

impl Drop for MeteredBody {
    fn drop(&mut self) {
        if self.meter.is_some() {
            self.broke
                .get_or_insert_with(|| "the engine closed the connection mid-stream".to_string());
            drop(self.settle());
        }
    }
}

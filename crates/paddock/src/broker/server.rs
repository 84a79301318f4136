//! The broker's HTTP endpoint for one job: authenticates the job token,
//! admits the call (price known, budget left), forwards it upstream, and
//! streams the answer back through a [`MeteredBody`] that writes the ledger
//! row when the body ends, breaks, or is abandoned by the engine.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use axum::Router;
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use paddock_protocol::TokenUsage;
use serde_json::{json, Value};

use super::budget::{
    estimate_micros, worst_case_tokens, Admission,
    InputReckoning::{Alone, Beside},
    Reservation, WorstCase, DEFAULT_OUTPUT_RESERVE,
};
use super::call::Call;
use super::ledger::LedgerError;
use super::meter::{Api, Meter};
use super::metered::{ByteStream, Cut, MeteredBody};
use super::provider::Route;
use super::retry::{retry_after, retryable_error, retryable_status, NoRetry};
use super::upstream::{forwardable_response_header, Upstream};
use super::{PolicyNotice, Shared};

/// The largest request body the broker accepts from an engine.
const MAX_REQUEST_BYTES: usize = 32 << 20;

/// The most JSON values (objects, arrays, strings, numbers...) one request
/// body may hold: parsed, each takes tens of bytes of Paddock's memory
/// whatever its size in the body (`[0,0,…]`: 2 bytes each), so a body of
/// 32 MiB could take a gigabyte. An engine's request holds tens of
/// thousands.
pub const MAX_REQUEST_VALUES: usize = 1_000_000;

/// Requests of one job read and judged at once (their bodies and parses in
/// memory); more wait for their turn before their bodies are read. The
/// budget's own wait comes after, without holding one.
pub const READ_AT_ONCE: usize = 2;

/// The answer to a request without the job's token (`None` with it).
fn unauthorized(api: Api, headers: &HeaderMap, shared: &Shared) -> Option<Response> {
    (!authorized(headers, shared.token.expose())).then(|| {
        error_response(
            api,
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "paddock broker: missing or invalid job token",
        )
    })
}

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new().fallback(handle).with_state(shared)
}

/// One request: routed by the job's provider, authenticated, admitted,
/// forwarded (with retries) and answered through a [`MeteredBody`].
async fn handle(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let (api, path_model, upstream_path) = match shared
        .config
        .upstream
        .provider
        .route(&parts.method, parts.uri.path())
    {
        Route::Call {
            api,
            model,
            upstream_path,
        } => (api, model, upstream_path),
        Route::Models => return models(&shared, &parts.headers),
        Route::Refused {
            api,
            status,
            kind,
            message,
        } => return unrouted(&shared, &parts.headers, api, status, kind, message),
    };
    if let Some(refused) = unauthorized(api, &parts.headers, &shared) {
        return refused;
    }
    // The semaphore is never closed.
    let reading = shared.reading.clone().acquire_owned().await.ok();
    let mut call = Call::start(&shared, api);
    if let Some(refused) = super::provider_state::refused_header(&parts.headers) {
        let msg = refused.message();
        let _ = shared.policy.send(PolicyNotice {
            rule: "provider_state".into(),
            message: msg.clone(),
        });
        return call.refuse(StatusCode::BAD_REQUEST, "invalid_request_error", msg);
    }
    let request = match read_request(&mut call, body).await {
        Ok(r) => r,
        Err(refusal) => return refusal,
    };
    let admitted = match admit(&shared, &mut call, request, path_model, reading).await {
        Ok(a) => a,
        Err(refusal) => return refusal,
    };
    let upstream = &shared.config.upstream;
    let query = parts
        .uri
        .query()
        .filter(|_| upstream.provider.keeps_query());
    let url = upstream.url(&upstream_path, query);
    let headers = Upstream::request_headers(&parts.headers);
    // The semaphore is never closed.
    let permit = shared.upstream_calls.clone().acquire_owned().await.ok();
    // From here the call is the broker's, whatever the engine does: its
    // own task, which an engine hanging up does not cancel, forwards it
    // and reads the answer to its end (for the engine, or without it), so
    // what the upstream bills is on the ledger. It ends with the broker.
    let call = call.detach();
    let followed = shared.clone();
    let task = tokio::spawn(async move {
        let shared = followed;
        let closed = shared.closed.clone();
        let call = call.attach(&shared);
        tokio::select! {
            answered = follow(&shared, call, admitted, &url, headers, permit) => Some(answered),
            () = closed.cancelled() => None,
        }
    });
    match task.await {
        Ok(Some(answered)) => answered,
        _ => error_response(
            api,
            StatusCode::SERVICE_UNAVAILABLE,
            "api_error",
            "paddock broker: the job's broker stopped before the call's answer",
        ),
    }
}

/// Forwards an admitted call (with retries) and answers it; `permit` is
/// its place among the job's calls upstream, held until its row settles.
async fn follow(
    shared: &Arc<Shared>,
    mut call: Call<'_>,
    admitted: Admitted,
    url: &str,
    headers: HeaderMap,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
) -> Response {
    let resp = match forward(shared, &mut call, url, &admitted, headers).await {
        Ok(r) => r,
        Err(NotForwarded::Unreachable(message)) => {
            return call.bad_gateway(admitted.reservation, message)
        }
        Err(NotForwarded::NotOnLedger(e)) => {
            admitted.reservation.settle(0);
            let msg = format!("paddock broker: the call was not forwarded: {e}");
            tracing::error!("{msg}");
            return error_response(
                call.own.api,
                StatusCode::SERVICE_UNAVAILABLE,
                "api_error",
                &msg,
            );
        }
    };
    answer(shared, call, admitted, resp, permit).await
}

/// A request the broker has no route for (the provider's Files, Batches,
/// a stored response by id, any other path): nothing goes upstream; when
/// the job's token is on it, a `refused` row naming its method and path
/// (never its body) and a `policy` event with rule `broker_route`, as the
/// job's other refused requests leave.
fn unrouted(
    shared: &Shared,
    headers: &HeaderMap,
    api: Api,
    status: StatusCode,
    kind: &'static str,
    message: String,
) -> Response {
    if let Some(refused) = unauthorized(api, headers, shared) {
        return refused;
    }
    let _ = shared.policy.send(PolicyNotice {
        rule: "broker_route".into(),
        message: message.clone(),
    });
    Call::start(shared, api).refuse(status, kind, message)
}

/// Why a call got no upstream answer.
enum NotForwarded {
    /// The upstream could not be asked (unreachable, credentials not
    /// minted): a 502 and an `http_error` row.
    Unreachable(String),
    /// Its row could not be written ahead: it never left.
    NotOnLedger(LedgerError),
}

/// A request body read whole and parsed as a JSON object.
struct ReadRequest {
    body: Bytes,
    json: Value,
}

/// Reads the request body (at most [`MAX_REQUEST_BYTES`]); a body that is
/// not a JSON object is refused.
async fn read_request(call: &mut Call<'_>, body: Body) -> Result<ReadRequest, Response> {
    let body = match axum::body::to_bytes(body, MAX_REQUEST_BYTES).await {
        Ok(b) => b,
        Err(e) => {
            let msg = format!("paddock broker: cannot read the request body: {e}");
            return Err(call.refuse(StatusCode::BAD_REQUEST, "invalid_request_error", msg));
        }
    };
    if json_values(&body) > MAX_REQUEST_VALUES {
        let msg = format!(
            "paddock broker: the request body holds more than {MAX_REQUEST_VALUES} JSON values, \
             past the broker's limit; refused"
        );
        return Err(call.refuse(StatusCode::BAD_REQUEST, "invalid_request_error", msg));
    }
    match serde_json::from_slice(&body) {
        Ok(json @ Value::Object(_)) => Ok(ReadRequest { body, json }),
        Ok(_) => {
            let msg = "paddock broker: the request body is not a JSON object".to_string();
            Err(call.refuse(StatusCode::BAD_REQUEST, "invalid_request_error", msg))
        }
        Err(e) => {
            let msg = format!("paddock broker: the request body is not JSON: {e}");
            Err(call.refuse(StatusCode::BAD_REQUEST, "invalid_request_error", msg))
        }
    }
}

/// About how many JSON values `body` holds, counted without parsing it:
/// one, and one more for each `,`, `[` and `{` outside strings (at least
/// the values there are; a malformed body is refused by the parse after).
fn json_values(body: &[u8]) -> usize {
    let (mut count, mut in_string, mut escaped) = (1usize, false, false);
    for &b in body {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else {
            match b {
                b'"' => in_string = true,
                b',' | b'[' | b'{' => count += 1,
                _ => {}
            }
        }
    }
    count
}

/// A call the broker lets through: the body to forward (possibly
/// rewritten), the model, and its budget reservation.
struct Admitted {
    body: Bytes,
    model: String,
    reservation: Reservation,
    /// Its worst case, tokens and micro-dollars: what its row written
    /// ahead holds until it settles.
    worst: (TokenUsage, i64),
}

/// Admission: the model (named in the path for Vertex and Bedrock, else in
/// the body) must be allowed and priced, and the call's worst case must fit
/// the budget (its output capped to what is left when needed).
async fn admit(
    shared: &Shared,
    call: &mut Call<'_>,
    request: ReadRequest,
    path_model: Option<String>,
    reading: Option<tokio::sync::OwnedSemaphorePermit>,
) -> Result<Admitted, Response> {
    let ReadRequest {
        body,
        json: mut request,
    } = request;
    let api = call.own.api;
    // A background response runs on upstream after its answer (which says
    // `queued`, without usage), billed in full where the broker never
    // sees it: unmetered spend past any budget. Engines never ask for one.
    if api == Api::Responses
        && !matches!(
            request.get("background"),
            None | Some(Value::Null | Value::Bool(false))
        )
    {
        let msg = "paddock broker: a background response (`background`) runs after its answer, \
                   where the broker cannot meter it; refused"
            .to_string();
        return Err(call.refuse(StatusCode::BAD_REQUEST, "invalid_request_error", msg));
    }
    if let Some(what) = super::unpriced_use::unpriced_use(&request) {
        let msg = format!(
            "paddock broker: {what} which the broker cannot meter against the job's budget; \
             refused"
        );
        return Err(call.refuse(StatusCode::BAD_REQUEST, "invalid_request_error", msg));
    }
    if let Some(what) = super::provider_fetch::provider_fetch(api, &request) {
        let msg = format!(
            "paddock broker: {what} would have the provider connect to a server the job names, \
             past the job's network policy; refused"
        );
        let _ = shared.policy.send(PolicyNotice {
            rule: "network".into(),
            message: msg.clone(),
        });
        return Err(call.refuse(StatusCode::BAD_REQUEST, "invalid_request_error", msg));
    }
    if let Some(what) = super::provider_state::provider_state(api, &request) {
        let msg = format!(
            "paddock broker: {what} names state the model provider keeps for the account every \
             job of this host shares, not the job's own; refused"
        );
        let _ = shared.policy.send(PolicyNotice {
            rule: "provider_state".into(),
            message: msg.clone(),
        });
        return Err(call.refuse(StatusCode::BAD_REQUEST, "invalid_request_error", msg));
    }
    if !shared.config.web_search {
        if let Some(what) = super::provider_fetch::web_search(api, &request) {
            let msg = format!(
                "paddock broker: {what} would have the provider search and open pages on the \
                 web for the job, past its network policy; the job's `[network] web_search` is \
                 off (a host profile's `network.web_search` permits turning it on); refused"
            );
            let _ = shared.policy.send(PolicyNotice {
                rule: "network".into(),
                message: msg.clone(),
            });
            return Err(call.refuse(StatusCode::BAD_REQUEST, "invalid_request_error", msg));
        }
    }
    // Chat Completions streams carry usage only when asked: ask.
    let mut body = include_usage(api, &mut request).unwrap_or(body);
    let model = path_model.unwrap_or_else(|| {
        request
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    });
    // Named in the ledger and the messages cut short: the job's text.
    call.own.model = super::call::shown_model(&model);
    let shown = call.own.model.clone();
    if !shared.config.web_search && super::provider_fetch::searching_model(&model) {
        let msg = format!(
            "paddock broker: model `{shown}` searches the web by itself, past the job's network \
             policy; the job's `[network] web_search` is off (a host profile's \
             `network.web_search` permits turning it on); refused"
        );
        let _ = shared.policy.send(PolicyNotice {
            rule: "network".into(),
            message: msg.clone(),
        });
        return Err(call.refuse(StatusCode::BAD_REQUEST, "invalid_request_error", msg));
    }
    if let Err(list) = shared.config.allowlist.check(&model) {
        let msg =
            format!("paddock broker: model `{shown}` is not allowed by the {list} model allowlist");
        let _ = shared.policy.send(PolicyNotice {
            rule: "model".into(),
            message: msg.clone(),
        });
        return Err(call.refuse(StatusCode::FORBIDDEN, "permission_error", msg));
    }
    let prices = &shared.config.prices;
    if prices.price(&model).is_none() && !shared.config.allow_unpriced {
        let msg = format!(
            "paddock broker: model `{shown}` has no price in price table {}; Paddock refuses calls it cannot meter (set upstream.allow_unpriced to run it unpriced)",
            prices.version
        );
        return Err(call.refuse(StatusCode::BAD_REQUEST, "invalid_request_error", msg));
    }
    if let Some(what) = prices
        .price(&model)
        .and_then(|price| super::unpriced_use::dearer_service(&request, price))
    {
        let msg = format!(
            "paddock broker: {what} which the broker cannot meter against the job's budget; \
             refused"
        );
        return Err(call.refuse(StatusCode::BAD_REQUEST, "invalid_request_error", msg));
    }
    let asked = match output_asked(&request) {
        Ok(asked) => asked,
        Err(what) => {
            let msg = format!(
                "paddock broker: {what}, which the broker cannot read for the call's worst case; \
                 refused"
            );
            return Err(call.refuse(StatusCode::BAD_REQUEST, "invalid_request_error", msg));
        }
    };
    let (mut max_output, choices) = (asked.max_output, asked.choices);
    // A model the table gives no most output (a user's table may not) is
    // reserved the default a choice: an uncapped call is capped at it, so
    // the upstream cannot produce more than was reserved.
    if max_output.is_none() && prices.price(&model).is_some_and(|p| p.max_output.is_none()) {
        if let Some(rewritten) = write_cap(api, &mut request, DEFAULT_OUTPUT_RESERVE) {
            body = rewritten;
            max_output = Some(DEFAULT_OUTPUT_RESERVE);
        }
    }
    // Its input counted by what its images, files or searches hold, not by
    // its bytes: it runs only alone (`input_bound.rs`).
    let bounded = super::input_bound::unbounded_input(api, &model, &request).is_none();
    let mut estimate = estimate_micros(
        prices,
        &model,
        body.len() as u64,
        max_output,
        choices,
        Alone,
    );
    // A worst case past what is left: the output is capped to what fits.
    if let Some(left) = shared.budget.left() {
        if estimate > left {
            if let Some((cap, rewritten)) = cap_output(
                api,
                &mut request,
                prices,
                &model,
                body.len() as u64,
                left,
                &asked,
            ) {
                body = rewritten;
                max_output = Some(cap);
                estimate = estimate_micros(
                    prices,
                    &model,
                    body.len() as u64,
                    max_output,
                    choices,
                    Alone,
                );
            }
        }
    }
    // Judged: the parse goes, and another request's turn comes, before
    // the budget's wait.
    drop(request);
    drop(reading);
    let bytes = body.len() as u64;
    let worst = WorstCase {
        alone: estimate,
        beside: bounded
            .then(|| estimate_micros(prices, &model, bytes, max_output, choices, Beside)),
    };
    match shared.budget.admit(call.own.seq, worst).await {
        Admission::Admitted(reservation) => {
            let input = reservation.input();
            let tokens = worst_case_tokens(prices, &model, bytes, max_output, choices, input);
            let micros = match input {
                Alone => worst.alone,
                Beside => worst.beside.unwrap_or(worst.alone),
            };
            Ok(Admitted {
                body,
                model,
                reservation,
                worst: (tokens, micros),
            })
        }
        Admission::Refused(msg) => {
            let _ = shared.policy.send(PolicyNotice {
                rule: "budget".into(),
                message: msg.clone(),
            });
            Err(call.refuse(StatusCode::PAYMENT_REQUIRED, "budget_exceeded", msg))
        }
    }
}

/// Sends the call upstream, retrying what [`RetryPolicy`](super::RetryPolicy)
/// allows (each failed attempt its own ledger row, each attempt on the
/// ledger before it leaves); the upstream's answer, or why there is none.
async fn forward(
    shared: &Shared,
    call: &mut Call<'_>,
    url: &str,
    admitted: &Admitted,
    headers: HeaderMap,
) -> Result<reqwest::Response, NotForwarded> {
    let body = &admitted.body;
    let upstream = &shared.config.upstream;
    let mut failed = 0u32;
    loop {
        let attempt_headers = upstream
            .provider
            .credentials(call.own.api, url, body, headers.clone())
            .await
            .map_err(NotForwarded::Unreachable)?;
        // On the ledger before it leaves: whatever kills Paddock now, the
        // call's cost is accounted for (ledger.rs).
        call.write_ahead(admitted.worst.0, admitted.worst.1)
            .await
            .map_err(NotForwarded::NotOnLedger)?;
        let sent = shared
            .client
            .post(url)
            .headers(attempt_headers)
            .body(body.clone())
            .send()
            .await;
        let (answered, unreachable) = match sent {
            Ok(r) if retryable_status(r.status().as_u16()) => (Some(r), None),
            Ok(r) => return Ok(r),
            Err(e) => {
                let msg = format!(
                    "paddock broker: upstream {} unreachable: {}",
                    upstream.provider.label(),
                    without_url(&e)
                );
                if !retryable_error(&e) {
                    return Err(NotForwarded::Unreachable(msg));
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
            shared.config.retry.delay(failed, asked, Instant::now())
        };
        let delay = match (answered, delay) {
            (Some(r), Err(_)) => return Ok(r),
            (None, Err(_)) => {
                return Err(NotForwarded::Unreachable(unreachable.unwrap_or_default()))
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
    }
}

/// The upstream's answer on its way to the engine: streams pass through a
/// [`MeteredBody`]; a whole (JSON) answer is read first (bounded) and
/// judged before any of it reaches the engine.
async fn answer(
    shared: &Arc<Shared>,
    mut call: Call<'_>,
    admitted: Admitted,
    resp: reqwest::Response,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
) -> Response {
    let status = resp.status();
    let content_type = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        // A media type's case is not significant: `Text/Event-Stream` is a
        // stream the engine reads as one.
        .trim()
        .to_ascii_lowercase();
    let mut builder = Response::builder().status(status.as_u16());
    for (name, value) in resp.headers() {
        if forwardable_response_header(name) {
            builder = builder.header(name, value);
        }
    }
    let limit = shared.config.max_upstream_event_bytes;
    let mut meter = Meter::new(call.own.api, &content_type, limit);
    let (inner, cut, broke): (ByteStream, Cut, Option<String>) =
        if meter.is_sse() || !status.is_success() {
            (Box::pin(resp.bytes_stream()), Cut::No, None)
        } else {
            // It names its served model only as a whole.
            match whole_answer(shared, resp, limit, &mut meter, &content_type).await {
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
                    let body = error_body(call.own.api, w.kind, &w.message);
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
                    return call.bad_gateway(admitted.reservation, msg);
                }
            }
        };
    let withheld = broke.is_some();
    let whole = !meter.is_sse() && status.is_success();
    let metered = MeteredBody {
        in_flight: call.own.in_flight.take(),
        closing: None,
        whole,
        inner,
        meter: Some(meter),
        shared: shared.clone(),
        seq: call.own.seq,
        model: admitted.model,
        http_status: status.as_u16(),
        request_bytes: admitted.body.len() as u64,
        started: call.own.started,
        started_at: call.own.started_at,
        ttft_ms: None,
        broke,
        reservation: Some(admitted.reservation),
        cut,
        withheld,
        draining: false,
        _upstream: permit,
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
    content_type: &str,
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
    // What is not JSON (an SSE stream under another content type, say)
    // the meter cannot read: it does not reach the engine unmetered.
    if serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_err() {
        return Ok(Whole::Withheld(Withheld {
            status: StatusCode::BAD_GATEWAY,
            rule: "limits",
            kind: "api_error",
            message: format!(
                "paddock broker: the upstream answered with a body that is neither JSON nor an event stream (content-type `{}`), which the broker cannot meter: the response was withheld",
                crate::broker::error_text::truncate(content_type, 100)
            ),
        }));
    }
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

/// The fewest output tokens the broker caps a call to: below it, a call
/// whose worst case does not fit is refused instead.
pub const MIN_OUTPUT_CAP: u64 = 1_024;

/// The request fields that cap a call's output: every API's (a body
/// naming another API's field too is read by its largest, whichever the
/// upstream heeds).
const MAX_OUTPUT_FIELDS: [&str; 3] = ["max_output_tokens", "max_completion_tokens", "max_tokens"];

/// What a request asks of its output, as its worst case counts it.
struct OutputAsked {
    /// The largest of its output caps, if it sets one.
    max_output: Option<u64>,
    /// How many answers it asks for (Chat Completions' `n`; 1 without
    /// one): each has the cap, and all are billed.
    choices: u64,
}

/// Reads the fields a call's worst case depends on: its output caps
/// ([`MAX_OUTPUT_FIELDS`], the largest counts), its number of choices
/// (`n`) and whether it streams (`stream`, which decides whether a Chat
/// Completions stream is asked for its usage). A field in another form
/// than the number or boolean the API defines (a string, a float, `n`
/// below 1) is what the refusal says: an upstream that reads it leniently
/// could produce more than the broker reserved, or stream without usage.
fn output_asked(request: &Value) -> Result<OutputAsked, String> {
    let mut max_output: Option<u64> = None;
    for field in MAX_OUTPUT_FIELDS {
        match request.get(field) {
            None | Some(Value::Null) => {}
            Some(v) => {
                let cap = v
                    .as_u64()
                    .ok_or_else(|| format!("`{field}` is not a whole number of tokens"))?;
                max_output = Some(max_output.map_or(cap, |m| m.max(cap)));
            }
        }
    }
    let choices = match request.get("n") {
        None | Some(Value::Null) => 1,
        Some(v) => v
            .as_u64()
            .filter(|n| *n >= 1)
            .ok_or_else(|| "`n` is not a whole number of choices from 1".to_string())?,
    };
    if !matches!(
        request.get("stream"),
        None | Some(Value::Null | Value::Bool(_))
    ) {
        return Err("`stream` is not a boolean".to_string());
    }
    Ok(OutputAsked {
        max_output,
        choices,
    })
}

/// Caps the call's output so that its worst case fits `left` micro-dollars:
/// sets the API's own field (`max_output_tokens`, `max_tokens`,
/// `max_completion_tokens`), and every other cap field the request sets,
/// to the output tokens per choice that fit after the input estimate and
/// returns the cap and the rewritten body; `None` when fewer than
/// [`MIN_OUTPUT_CAP`] tokens a choice fit or the model has no price.
fn cap_output(
    api: Api,
    request: &mut Value,
    prices: &super::PriceTable,
    model: &str,
    request_bytes: u64,
    left: i64,
    asked: &OutputAsked,
) -> Option<(u64, Bytes)> {
    let field = api.max_output_field(request);
    let written = MAX_OUTPUT_FIELDS
        .iter()
        .filter(|f| **f == field || request.get(**f).is_some_and(|v| !v.is_null()))
        .count() as u64;
    // The rewritten body is the estimate's input: each field written adds
    // at most 64 bytes.
    let input = TokenUsage {
        input_tokens: (request_bytes + 64 * written) / 4,
        ..TokenUsage::default()
    };
    let input_cost = prices.cost_micros(model, &input)?;
    let per_million = prices.price(model)?.rates_for(&input).output;
    if per_million == 0 {
        return None;
    }
    // One micro-dollar for the rounding of the whole call's cost.
    let room = u64::try_from(left.checked_sub(input_cost)?.checked_sub(1)?).ok()?;
    let cap = u64::try_from(
        u128::from(room) * 1_000_000 / u128::from(per_million) / u128::from(asked.choices.max(1)),
    )
    .ok()?;
    if cap < MIN_OUTPUT_CAP {
        return None;
    }
    write_cap(api, request, cap).map(|b| (cap, b))
}

/// Sets the API's own output cap field, and every other cap field the
/// request sets, to `cap`: the rewritten body.
fn write_cap(api: Api, request: &mut Value, cap: u64) -> Option<Bytes> {
    let field = api.max_output_field(request);
    let object = request.as_object_mut()?;
    for other in MAX_OUTPUT_FIELDS {
        if let Some(v) = object.get_mut(other).filter(|v| !v.is_null()) {
            *v = Value::from(cap);
        }
    }
    object.insert(field.to_string(), Value::from(cap));
    serde_json::to_vec(request).ok().map(Bytes::from)
}

/// For a streaming Chat Completions request, the body rewritten with
/// `stream_options.include_usage` set; `None` when it passes unchanged.
fn include_usage(api: Api, request: &mut Value) -> Option<Bytes> {
    if api != Api::Chat {
        return None;
    }
    super::wire::chat::include_usage(request).map(Bytes::from)
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
    if let Some(refused) = unauthorized(api, headers, shared) {
        return refused;
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

pub(super) fn without_url(e: &reqwest::Error) -> String {
    crate::error_chain::chain(e)
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

/// An error body in the wire format of `api`, so the engine shows the message.
pub fn error_response(api: Api, status: StatusCode, kind: &str, message: &str) -> Response {
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(error_body(api, kind, message)))
        .unwrap_or_else(|_| plain(status, message))
}

pub(super) fn error_body(api: Api, kind: &str, message: &str) -> String {
    api.error_body(kind, message).to_string()
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

//! A provider that lies about its usage: counts that are negative, a
//! fraction, a string, or past what a ledger row holds. The broker must
//! not price such a call at the lie (0, or a count the store cannot
//! write): it is estimated, each count at least its estimate, and its row
//! says why. And one that mislabels its stream: a stream is metered
//! whatever the case of its content type, and a success answer the meter
//! cannot read (an SSE stream labelled JSON) is withheld. And one whose
//! whole JSON answer has no usage to price: its output is estimated from
//! its text.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use paddock::broker::ledger::MemoryLedger;
use paddock::broker::{
    self, BrokerConfig, BrokerHandle, ModelAllowlist, PriceTable, Provider, RetryPolicy, Upstream,
};
use paddock_protocol::{CallStatus, TokenUsage};
use tokio::net::TcpListener;

/// 400 characters of generated text: 100 output tokens by the estimate.
const TEXT: usize = 400;

/// An upstream answering every request with `content_type` and `body`;
/// the sizes of the request bodies it received.
async fn lying_upstream(
    content_type: &'static str,
    body: String,
) -> (String, Arc<Mutex<Vec<u64>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let sizes = Arc::new(Mutex::new(Vec::new()));
    let seen = sizes.clone();
    let app = axum::Router::new().fallback(move |request: bytes::Bytes| {
        let (body, seen) = (body.clone(), seen.clone());
        async move {
            seen.lock().unwrap().push(request.len() as u64);
            axum::response::Response::builder()
                .header("content-type", content_type)
                .body(axum::body::Body::from(body))
                .unwrap()
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/v1"), sizes)
}

async fn broker_at(base: String) -> BrokerHandle {
    broker::start(
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
        BrokerConfig {
            job_id: "job-usage".into(),
            attempt: 1,
            upstream: Upstream {
                base,
                provider: Provider::Scripted,
            },
            prices: Arc::new(PriceTable::vendored().unwrap()),
            ceilings: vec![],
            allowlist: ModelAllowlist::any(),
            allow_unpriced: false,
            web_search: false,
            retry: RetryPolicy::default(),
            max_upstream_event_bytes: 16 << 20,
            ledger: Arc::new(MemoryLedger::default()),
        },
    )
    .unwrap()
}

fn sse(events: &[(&str, serde_json::Value)]) -> String {
    events
        .iter()
        .map(|(name, data)| {
            if name.is_empty() {
                format!("data: {data}\n\n")
            } else {
                format!("event: {name}\ndata: {data}\n\n")
            }
        })
        .collect()
}

/// Each API's completed stream (and a whole JSON answer) whose final
/// usage carries one malformed count (and an honest rest): the row is `ok` (the answer completed) but
/// `estimated`: the malformed count read as 0, each of input and output at
/// least its estimate (request bytes / 4, generated characters / 4), the
/// honest counts kept; its error names the field and the value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_usage_count_is_estimated_not_trusted() {
    let text = "x".repeat(TEXT);
    let cases = [
        (
            "/v1/responses",
            serde_json::json!({"model": "gpt-5.5", "stream": true, "input": "hello"}),
            sse(&[
                (
                    "response.created",
                    serde_json::json!({"type": "response.created", "response": {"model": "gpt-5.5"}}),
                ),
                (
                    "response.output_text.delta",
                    serde_json::json!({"type": "response.output_text.delta", "delta": text}),
                ),
                (
                    "response.completed",
                    serde_json::json!({"type": "response.completed", "response": {"model": "gpt-5.5",
                    "usage": {"input_tokens": 1000, "output_tokens": -100, "total_tokens": 900}}}),
                ),
            ]),
            "`usage.output_tokens` is -100",
            Some(1000),
        ),
        (
            "/v1/messages",
            serde_json::json!({"model": "claude-sonnet-4-5", "stream": true, "max_tokens": 1000,
                "messages": [{"role": "user", "content": "hello"}]}),
            sse(&[
                (
                    "message_start",
                    serde_json::json!({"type": "message_start", "message": {"model": "claude-sonnet-4-5",
                    "usage": {"input_tokens": 1000, "output_tokens": 1}}}),
                ),
                (
                    "content_block_delta",
                    serde_json::json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": text}}),
                ),
                (
                    "message_delta",
                    serde_json::json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                    "usage": {"output_tokens": 1e30}}),
                ),
                ("message_stop", serde_json::json!({"type": "message_stop"})),
            ]),
            "`usage.output_tokens` is 1e+30",
            Some(1000),
        ),
        (
            "/v1/chat/completions",
            serde_json::json!({"model": "gpt-5.5", "stream": true,
                "messages": [{"role": "user", "content": "hello"}]}),
            format!(
                "{}data: [DONE]\n\n",
                sse(&[
                    (
                        "",
                        serde_json::json!({"model": "gpt-5.5", "choices": [{"index": 0, "delta": {"content": text}}]})
                    ),
                    (
                        "",
                        serde_json::json!({"model": "gpt-5.5", "choices": [],
                        "usage": {"prompt_tokens": 9_223_372_036_854_775_808u64, "completion_tokens": 100}})
                    ),
                ])
            ),
            "`usage.prompt_tokens` is 9223372036854775808",
            None,
        ),
        (
            "/v1/chat/completions",
            serde_json::json!({"model": "gpt-5.5", "stream": true,
                "messages": [{"role": "user", "content": "hello"}]}),
            format!(
                "{}data: [DONE]\n\n",
                sse(&[
                    (
                        "",
                        serde_json::json!({"model": "gpt-5.5", "choices": [{"index": 0, "delta": {"content": text}}]})
                    ),
                    (
                        "",
                        serde_json::json!({"model": "gpt-5.5", "choices": [],
                        "usage": {"prompt_tokens": 1000, "completion_tokens": "100"}})
                    ),
                ])
            ),
            "`usage.completion_tokens` is \"100\"",
            Some(1000),
        ),
        (
            "/v1/responses",
            serde_json::json!({"model": "gpt-5.5", "input": "hello"}),
            serde_json::json!({"model": "gpt-5.5", "output": [{"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": text}]}],
                "usage": {"input_tokens": -1, "output_tokens": 100}})
            .to_string(),
            "`usage.input_tokens` is -1",
            None,
        ),
    ];
    for (path, request, answer, field, input) in cases {
        let content_type = if answer.starts_with('{') {
            "application/json"
        } else {
            "text/event-stream"
        };
        let message = format!(
            "paddock broker: the upstream's {field}, not a token count (a whole number from 0 to 9223372036854775807): the call is estimated"
        );
        let label = format!("{path} {field}");
        estimated_call(
            &label,
            path,
            &request,
            content_type,
            answer,
            &message,
            input,
        )
        .await;
    }
}

/// An SSE answer whose content type is `Text/Event-Stream` is metered as
/// the stream it is (before: read as a JSON body, its usage unread, its
/// output priced at nothing); one labelled `application/json` is withheld
/// with a 502 naming why, not passed to the engine unmetered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mislabelled_stream_is_metered_or_withheld() {
    let answer = sse(&[
        (
            "response.created",
            serde_json::json!({"type": "response.created", "response": {"model": "gpt-5.5"}}),
        ),
        (
            "response.output_text.delta",
            serde_json::json!({"type": "response.output_text.delta", "delta": "x".repeat(TEXT)}),
        ),
        (
            "response.completed",
            serde_json::json!({"type": "response.completed", "response": {"model": "gpt-5.5",
            "usage": {"input_tokens": 1000, "output_tokens": 100000}}}),
        ),
    ]);
    let request = serde_json::json!({"model": "gpt-5.5", "stream": true, "input": "hello"});
    for content_type in ["Text/Event-Stream", "application/json"] {
        let (base, _) = lying_upstream(content_type, answer.clone()).await;
        let mut broker = broker_at(base).await;
        let resp = post(&broker, "/v1/responses", &request).await;
        let status = resp.status().as_u16();
        let body = resp.text().await.unwrap();
        let call = broker.calls.recv().await.unwrap().row;
        if content_type == "Text/Event-Stream" {
            assert_eq!((status, body.as_str()), (200, answer.as_str()));
            assert_eq!(
                (
                    call.status,
                    call.estimated,
                    call.tokens,
                    call.error.as_deref()
                ),
                (
                    CallStatus::Ok,
                    false,
                    TokenUsage {
                        input_tokens: 1000,
                        output_tokens: 100_000,
                        ..TokenUsage::default()
                    },
                    None
                ),
                "{call:?}"
            );
        } else {
            let message = "paddock broker: the upstream answered with a body that is neither JSON nor an event stream (content-type `application/json`), which the broker cannot meter: the response was withheld";
            assert_eq!(
                (
                    status,
                    serde_json::from_str::<serde_json::Value>(&body).unwrap()
                ),
                (
                    502,
                    serde_json::json!({"error": {"message": message, "type": "api_error", "code": "api_error"}})
                )
            );
            assert_eq!(
                (call.status, call.estimated, call.error.as_deref()),
                (CallStatus::StreamError, true, Some(message)),
                "{call:?}"
            );
        }
    }
}

/// A whole JSON answer (each API's shape) whose usage cannot be priced as
/// it is (none at all, or its output count malformed) is estimated from
/// its text: the model's text, reasoning and tool calls, not its ids,
/// types or model name. Before, such an answer's output was priced at
/// nothing (the estimate counted only a stream's deltas) and one without
/// usage was recorded as a stream cut short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_answer_without_a_priced_usage_is_estimated_from_its_text() {
    let quarter = "x".repeat(TEXT / 4);
    let no_usage =
        "paddock broker: the upstream's answer has no `usage` object: the call is estimated";
    let cases = [
        (
            "/v1/responses",
            serde_json::json!({"model": "gpt-5.5", "input": "hello"}),
            serde_json::json!({"id": "resp_0123456789", "object": "response", "model": "gpt-5.5",
                "status": "completed", "output": [
                {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": quarter}]},
                {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "text": format!("{quarter}{quarter}"), "annotations": []}]},
                {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "",
                 "arguments": quarter}]}),
            no_usage.to_string(),
            None,
        ),
        (
            "/v1/messages",
            serde_json::json!({"model": "claude-sonnet-4-5", "max_tokens": 1000,
                "messages": [{"role": "user", "content": "hello"}]}),
            serde_json::json!({"id": "msg_0123456789", "type": "message", "role": "assistant",
                "model": "claude-sonnet-4-5", "stop_reason": "end_turn", "content": [
                {"type": "thinking", "thinking": quarter, "signature": ""},
                {"type": "text", "text": quarter},
                {"type": "tool_use", "id": "toolu_1", "name": "", "input": {"command": format!("{quarter}{quarter}")}}],
                "usage": {"input_tokens": 1000, "output_tokens": -5}}),
            "paddock broker: the upstream's `usage.output_tokens` is -5, not a token count (a whole number from 0 to 9223372036854775807): the call is estimated".to_string(),
            Some(1000),
        ),
        (
            "/v1/chat/completions",
            serde_json::json!({"model": "gpt-5.5", "messages": [{"role": "user", "content": "hello"}]}),
            serde_json::json!({"id": "chatcmpl-0123456789", "object": "chat.completion", "model": "gpt-5.5",
                "system_fingerprint": "fp_1", "choices": [{"index": 0, "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": format!("{quarter}{quarter}{quarter}"),
                "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "", "arguments": quarter}}]}}]}),
            no_usage.to_string(),
            None,
        ),
    ];
    for (path, request, answer, message, input) in cases {
        let body = estimated_call(
            path,
            path,
            &request,
            "application/json",
            answer.to_string(),
            &message,
            input,
        )
        .await;
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&body).unwrap(),
            answer,
            "{path}: the answer reaches the engine as it is"
        );
    }
}

/// Sends `request` to `path` of a broker before an upstream answering
/// `answer` as `content_type`; asserts the answer passed (200) and the
/// call's row: `ok`, estimated, its input `input` (else the request
/// bytes / 4), its output [`TEXT`] / 4, its error `message`, a cost.
/// The body the client got.
async fn estimated_call(
    label: &str,
    path: &str,
    request: &serde_json::Value,
    content_type: &'static str,
    answer: String,
    message: &str,
    input: Option<u64>,
) -> bytes::Bytes {
    let (base, sizes) = lying_upstream(content_type, answer).await;
    let mut broker = broker_at(base).await;
    let resp = post(&broker, path, request).await;
    assert_eq!(resp.status(), 200, "{label}");
    let body = resp.bytes().await.unwrap();
    let call = broker.calls.recv().await.unwrap().row;
    let request_bytes = sizes.lock().unwrap()[0];
    assert_eq!(
        (
            call.status,
            call.estimated,
            call.tokens,
            call.error.as_deref()
        ),
        (
            CallStatus::Ok,
            true,
            TokenUsage {
                input_tokens: input.unwrap_or(request_bytes / 4),
                output_tokens: (TEXT / 4) as u64,
                ..TokenUsage::default()
            },
            Some(message),
        ),
        "{label}: {call:?}"
    );
    assert!(call.cost_micros > 0, "{label}: {call:?}");
    body
}

/// POSTs `request` to `path` of `broker` with the job's token, as an
/// engine does.
async fn post(broker: &BrokerHandle, path: &str, request: &serde_json::Value) -> reqwest::Response {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("{}{path}", broker.url))
        .bearer_auth(broker.token.expose())
        .header("content-type", "application/json")
        .body(request.to_string())
        .send()
        .await
        .unwrap()
}

//! The wire APIs the broker speaks, one module each: `responses` (OpenAI
//! Responses, Codex), `messages` (Anthropic Messages, Claude Code; also
//! inside Bedrock's event stream and Vertex's bodies) and `chat` (OpenAI
//! Chat Completions). Each owns its route (the path an engine posts to),
//! what the meter reads of it (a stream event, a whole JSON body's usage),
//! its error body, the event that cuts its stream, and the request field
//! that caps its output. [`Api`] names one and dispatches to its module;
//! the meter, the server and the metered body ask it rather than matching
//! on an API themselves. A new wire API is one more module here and one
//! more variant.

use paddock_protocol::TokenUsage;
use serde_json::{json, Value};

use super::reading::Reading;

pub mod chat;
pub mod messages;
pub mod responses;

/// Which API a call speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI Responses (`POST /v1/responses`), spoken by Codex.
    Responses,
    /// Anthropic Messages (`POST /v1/messages`), spoken by Claude Code.
    Messages,
    /// OpenAI Chat Completions (`POST /v1/chat/completions`).
    Chat,
}

impl Api {
    /// The API whose route is `POST path`, if any.
    pub fn of_path(path: &str) -> Option<Api> {
        [Api::Responses, Api::Messages, Api::Chat]
            .into_iter()
            .find(|api| api.path() == path)
    }

    /// The path an engine posts a call to.
    pub fn path(self) -> &'static str {
        match self {
            Api::Responses => responses::PATH,
            Api::Messages => messages::PATH,
            Api::Chat => chat::PATH,
        }
    }

    /// Reads one decoded stream event (`kind`: its `type`, empty if none)
    /// into `reading`.
    pub(super) fn read_event(self, reading: &mut Reading, kind: &str, v: &Value) {
        match self {
            Api::Responses => responses::read_event(reading, kind, v),
            Api::Messages => messages::read_event(reading, kind, v),
            Api::Chat => chat::read_event(reading, v),
        }
    }

    /// The usage of a whole JSON answer's `usage` object.
    pub(super) fn body_usage(self, reading: &mut Reading, usage: &Value) -> TokenUsage {
        let mut bad = None;
        let read = match self {
            Api::Responses => responses::usage(usage, &mut bad),
            Api::Messages => messages::usage(usage, &mut bad),
            Api::Chat => chat::usage(usage, &mut bad),
        };
        note_bad(reading, bad);
        read
    }

    /// Notes what of a whole JSON answer's `usage` object is priced apart
    /// from its tokens (Messages: the cache writes kept an hour).
    pub(super) fn note_body_usage(self, reading: &mut Reading, usage: &Value) {
        match self {
            Api::Messages => messages::note_hour_writes(reading, usage),
            Api::Responses | Api::Chat => {}
        }
    }

    /// An error body in this API's format, so the engine shows `message`.
    pub fn error_body(self, kind: &str, message: &str) -> Value {
        match self {
            Api::Responses | Api::Chat => openai_error(kind, message),
            Api::Messages => messages::error_body(kind, message),
        }
    }

    /// The SSE event (name, data; no name: a bare `data:` line) that ends
    /// a cut stream of a call of `model`, `id` naming the cut answer.
    pub(super) fn cut_event(
        self,
        kind: &str,
        message: &str,
        id: u64,
        model: &str,
    ) -> (&'static str, Value) {
        match self {
            Api::Responses => responses::cut_event(kind, message, id, model),
            Api::Messages => ("error", messages::error_body(kind, message)),
            Api::Chat => ("", openai_error(kind, message)),
        }
    }

    /// The request field that caps the answer's output tokens.
    pub(super) fn max_output_field(self, request: &Value) -> &'static str {
        match self {
            Api::Responses => responses::MAX_OUTPUT_FIELD,
            Api::Messages => messages::MAX_OUTPUT_FIELD,
            Api::Chat => chat::max_output_field(request),
        }
    }
}

/// OpenAI's error body (Responses and Chat Completions).
fn openai_error(kind: &str, message: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "code": kind}})
}

/// Notes `v`'s `service_tier` (a string), if it has one.
pub(super) fn note_tier(reading: &mut Reading, v: Option<&Value>) {
    if let Some(t) = v
        .and_then(|v| v.get("service_tier"))
        .and_then(Value::as_str)
    {
        reading.service_tier = Some(t.to_string());
    }
}

/// Adds the text the model generated in `v` (a delta: a string, or an
/// object whose strings but its bookkeeping are text, as
/// [`answer_bytes`] reads a whole answer) to what the reading has seen, in
/// UTF-8 bytes. Bytes, not characters: a tokenizer splits text outside
/// ASCII finer than English (a CJK character is about a token, and 3
/// bytes), so characters / 4 priced such a stream at a quarter of its
/// tokens, where bytes / 4 comes near them.
fn generated(reading: &mut Reading, v: Option<&Value>) {
    if let Some(v) = v {
        reading.generated_bytes = reading.generated_bytes.saturating_add(answer_bytes(v));
    }
}

/// The token count at `ptr`, 0 when absent (or null). A value there that
/// is no whole number from 0 to `i64::MAX` (the most a ledger row holds)
/// reads as 0 and is noted in `bad` (the first such field), so that the
/// call is estimated rather than priced on a count the upstream did not
/// give.
fn u(v: &Value, ptr: &str, bad: &mut Option<String>) -> u64 {
    match v.pointer(ptr) {
        None | Some(Value::Null) => 0,
        Some(n) => count(n, ptr, bad),
    }
}

/// `n`, the usage's field at `ptr`, as a token count, or 0 noted in
/// `bad` (see [`u`]).
fn count(n: &Value, ptr: &str, bad: &mut Option<String>) -> u64 {
    match n.as_u64() {
        Some(c) if i64::try_from(c).is_ok() => c,
        _ => {
            bad.get_or_insert_with(|| {
                format!(
                    "paddock broker: the upstream's `usage{}` is {}, not a token count (a whole number from 0 to {}): the call is estimated",
                    ptr.replace('/', "."),
                    crate::broker::error_text::truncate(&n.to_string(), 40),
                    i64::MAX
                )
            });
            0
        }
    }
}

/// What a whole JSON answer without a usage to price says: the call is
/// estimated, its output from the answer's text ([`answer_bytes`]).
pub(super) const NO_BODY_USAGE: &str =
    "paddock broker: the upstream's answer has no `usage` object: the call is estimated";

/// The keys of an answer whose string values are its bookkeeping, not
/// text the model generated.
const NOT_GENERATED: &[&str] = &[
    "id",
    "object",
    "model",
    "type",
    "role",
    "status",
    "service_tier",
    "finish_reason",
    "stop_reason",
    "stop_sequence",
    "system_fingerprint",
    "call_id",
    "tool_use_id",
];

/// The UTF-8 bytes of every string in a
/// whole JSON answer `v` but its
/// bookkeeping ([`NOT_GENERATED`]) and its `usage`: the text, reasoning,
/// tool calls and their arguments the model generated, in any of the
/// APIs' shapes, known or not (a text the list misses counts; none is
/// left out), for estimating the output of an answer whose usage cannot
/// be priced. Iterative, so an answer nested deep costs no stack.
pub(super) fn answer_bytes(v: &Value) -> u64 {
    let mut total: u64 = 0;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) => total = total.saturating_add(s.len() as u64),
            Value::Array(items) => stack.extend(items.iter()),
            Value::Object(map) => stack.extend(
                map.iter()
                    .filter(|(k, _)| k.as_str() != "usage" && !NOT_GENERATED.contains(&k.as_str()))
                    .map(|(_, v)| v),
            ),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
    total
}

/// Keeps the first malformed usage field of a reading.
fn note_bad(reading: &mut Reading, bad: Option<String>) {
    if reading.bad_usage.is_none() {
        reading.bad_usage = bad;
    }
}

//! Anthropic Messages (`POST /v1/messages`), spoken by Claude Code (and
//! inside Bedrock's event stream and Vertex's bodies): its stream events
//! as the meter reads them, its cumulative usage, and its error body (also
//! the event that ends a cut stream).

use paddock_protocol::TokenUsage;
use serde_json::{json, Value};

use super::{count, generated, note_bad, note_tier};
use crate::broker::error_text::error_message;
use crate::broker::reading::Reading;

pub const PATH: &str = "/v1/messages";

/// The request field that caps the answer's output tokens.
pub const MAX_OUTPUT_FIELD: &str = "max_tokens";

/// One stream event of `kind`.
pub(super) fn read_event(reading: &mut Reading, kind: &str, v: &Value) {
    match kind {
        "message_start" => {
            let msg = v.get("message").unwrap_or(&Value::Null);
            if let Some(m) = msg.get("model").and_then(Value::as_str) {
                reading.served_model = Some(m.to_string());
            }
            if let Some(u) = msg.get("usage") {
                let mut bad = None;
                reading.usage = Some(usage(u, &mut bad));
                note_bad(reading, bad);
                note_hour_writes(reading, u);
            }
            note_tier(reading, msg.get("usage"));
        }
        "content_block_delta" => {
            // Text, thinking, a tool call's JSON, a citation: all of it but
            // its bookkeeping.
            generated(reading, v.get("delta"));
        }
        "message_delta" => {
            // Cumulative: the latest value of each field wins; never add.
            if let Some(u) = v.get("usage") {
                let mut usage = reading.usage.unwrap_or_default();
                let mut bad = None;
                merge_usage(&mut usage, u, &mut bad);
                note_bad(reading, bad);
                reading.usage = Some(usage);
                reading.usage_final = true;
                note_hour_writes(reading, u);
            }
            note_tier(reading, v.get("usage"));
        }
        "message_stop" => reading.completed = true,
        "error" => reading.error = Some(error_message(v)),
        _ => {}
    }
}

/// A whole `usage` object (a malformed count noted in `bad`).
pub(super) fn usage(v: &Value, bad: &mut Option<String>) -> TokenUsage {
    let mut usage = TokenUsage::default();
    merge_usage(&mut usage, v, bad);
    usage
}

/// Notes the cache writes kept an hour that `usage` reports, if it says.
pub(super) fn note_hour_writes(reading: &mut Reading, usage: &Value) {
    const FIELD: &str = "/cache_creation/ephemeral_1h_input_tokens";
    if let Some(n) = usage.pointer(FIELD).filter(|n| !n.is_null()) {
        let mut bad = None;
        reading.hour_writes = count(n, FIELD, &mut bad);
        note_bad(reading, bad);
    }
}

/// Anthropic usage: each field present replaces the previous value (a
/// malformed count noted in `bad`).
fn merge_usage(usage: &mut TokenUsage, v: &Value, bad: &mut Option<String>) {
    let mut set = |field: &mut u64, key: &str| {
        if let Some(n) = v.pointer(key).filter(|n| !n.is_null()) {
            *field = count(n, key, bad);
        }
    };
    set(&mut usage.input_tokens, "/input_tokens");
    set(&mut usage.cached_input_tokens, "/cache_read_input_tokens");
    set(
        &mut usage.cache_write_tokens,
        "/cache_creation_input_tokens",
    );
    set(&mut usage.output_tokens, "/output_tokens");
}

/// Anthropic's error body (and `error` event; the scripted upstream's too).
pub(crate) fn error_body(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

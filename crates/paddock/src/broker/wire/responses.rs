//! OpenAI Responses (`POST /v1/responses`), spoken by Codex: its stream
//! events as the meter reads them, its usage, and the `response.failed`
//! event that ends a cut stream.

use paddock_protocol::TokenUsage;
use serde_json::{json, Value};

use super::{generated, note_bad, note_tier, u};
use crate::broker::error_text::error_message;
use crate::broker::reading::Reading;

pub const PATH: &str = "/v1/responses";

/// The request field that caps the answer's output tokens.
pub const MAX_OUTPUT_FIELD: &str = "max_output_tokens";

/// One stream event of `kind`.
pub(super) fn read_event(reading: &mut Reading, kind: &str, v: &Value) {
    match kind {
        "response.created" | "response.in_progress" => {
            if let Some(m) = v.pointer("/response/model").and_then(Value::as_str) {
                reading.served_model = Some(m.to_string());
            }
            note_tier(reading, v.get("response"));
        }
        // Every delta is text the model generated (its output, reasoning,
        // refusal, a tool call's arguments or input, a transcript), the
        // ones named here and any other: all count for a cut stream's
        // estimate.
        _ if kind.starts_with("response.") && kind.ends_with(".delta") => {
            generated(reading, v.get("delta"));
        }
        "response.completed" | "response.incomplete" | "response.failed" => {
            let resp = v.get("response").unwrap_or(&Value::Null);
            if let Some(m) = resp.get("model").and_then(Value::as_str) {
                reading.served_model = Some(m.to_string());
            }
            note_tier(reading, Some(resp));
            if let Some(u) = resp.get("usage").filter(|u| u.is_object()) {
                let mut bad = None;
                reading.usage = Some(usage(u, &mut bad));
                reading.usage_final = true;
                note_bad(reading, bad);
            }
            if kind == "response.failed" {
                reading.error = Some(
                    resp.pointer("/error/message")
                        .and_then(Value::as_str)
                        .unwrap_or("response.failed without a message")
                        .to_string(),
                );
            } else {
                reading.completed = true;
            }
        }
        "error" => {
            reading.error = Some(error_message(v));
        }
        _ => {}
    }
}

/// Responses usage: cached and cache-write tokens are part of `input_tokens`;
/// Paddock's `input_tokens` excludes them.
pub(super) fn usage(v: &Value, bad: &mut Option<String>) -> TokenUsage {
    let input = u(v, "/input_tokens", bad);
    let cached = u(v, "/input_tokens_details/cached_tokens", bad);
    let cache_write = u(v, "/input_tokens_details/cache_write_tokens", bad);
    TokenUsage {
        input_tokens: input.saturating_sub(cached).saturating_sub(cache_write),
        cached_input_tokens: cached,
        cache_write_tokens: cache_write,
        output_tokens: u(v, "/output_tokens", bad),
        reasoning_tokens: u(v, "/output_tokens_details/reasoning_tokens", bad),
    }
}

/// The `response.failed` event that ends a cut stream.
pub(super) fn cut_event(kind: &str, message: &str, id: u64, model: &str) -> (&'static str, Value) {
    (
        "response.failed",
        json!({"type": "response.failed", "response": {
            "id": format!("resp_paddock_cut_{id}"), "object": "response",
            "status": "failed", "model": model,
            "error": {"code": kind, "message": message}}}),
    )
}

//! OpenAI Chat Completions (`POST /v1/chat/completions`): its stream
//! chunks as the meter reads them, its usage, the `include_usage` option a
//! streaming request needs for its usage to be metered, and which of its
//! two fields caps the output.

use paddock_protocol::TokenUsage;
use serde_json::{json, Value};

use super::{generated, note_bad, note_tier, u};
use crate::broker::error_text::error_message;
use crate::broker::reading::Reading;

pub const PATH: &str = "/v1/chat/completions";

/// One chunk: the model, content and tool-call argument deltas, the usage
/// chunk (`include_usage`), or an in-stream error.
pub(super) fn read_event(reading: &mut Reading, v: &Value) {
    if let Some(m) = v.get("model").and_then(Value::as_str) {
        reading.served_model = Some(m.to_string());
    }
    note_tier(reading, Some(v));
    if v.get("error").is_some_and(|e| !e.is_null()) {
        reading.error = Some(error_message(v));
    }
    for choice in v
        .get("choices")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        // All the delta's text (content, reasoning, a refusal, tool calls'
        // names and arguments, an audio transcript) but its bookkeeping.
        generated(reading, choice.get("delta"));
    }
    if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
        let mut bad = None;
        reading.usage = Some(usage(u, &mut bad));
        reading.usage_final = true;
        note_bad(reading, bad);
    }
}

/// Chat Completions usage: cached tokens are part of `prompt_tokens`;
/// Paddock's `input_tokens` excludes them.
pub(super) fn usage(v: &Value, bad: &mut Option<String>) -> TokenUsage {
    let prompt = u(v, "/prompt_tokens", bad);
    let cached = u(v, "/prompt_tokens_details/cached_tokens", bad);
    TokenUsage {
        input_tokens: prompt.saturating_sub(cached),
        cached_input_tokens: cached,
        cache_write_tokens: 0,
        output_tokens: u(v, "/completion_tokens", bad),
        reasoning_tokens: u(v, "/completion_tokens_details/reasoning_tokens", bad),
    }
}

/// The field that caps the output: the request's own `max_tokens` if it
/// uses the older name, else `max_completion_tokens`.
pub(super) fn max_output_field(request: &Value) -> &'static str {
    if request.get("max_tokens").is_some() {
        "max_tokens"
    } else {
        "max_completion_tokens"
    }
}

/// For a streaming request, sets `stream_options.include_usage` and
/// returns the rewritten request; `None` when it passes unchanged.
pub(crate) fn include_usage(request: &mut Value) -> Option<Vec<u8>> {
    if request.get("stream").and_then(Value::as_bool) != Some(true) {
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
    serde_json::to_vec(request).ok()
}

//! Calls the model provider bills for more than the tokens the price
//! table prices: its image generation tool (each image at the image
//! model's own rates), its code interpreter (a charge per container) and
//! Anthropic's code execution tool (container hours), and audio, asked for
//! (`modalities` with `audio`, Chat Completions' `audio`) or given
//! (`input_audio`), billed at audio rates many times the text rates the
//! table holds. The broker meters tokens at the table's rates, so such a
//! call's spend would pass every budget unseen: it refuses them, as it
//! refuses a model without a price. So too ([`dearer_service`]) a call
//! asking to be served dearer than the table prices its model: OpenAI's
//! priority tier where the table has no priority rates for it (about
//! twice the standard ones), Anthropic's fast mode (`speed`, six times)
//! and inference kept in one geography (`inference_geo`, 1.1 times). The
//! engines use none of them.

use serde_json::Value;

use super::json_walk::Entry;
use super::prices::ModelPrice;

/// What in `request` the provider would bill beyond its priced tokens, as
/// the refusal says it; `None`: nothing.
pub(super) fn unpriced_use(request: &Value) -> Option<&'static str> {
    let tools = request
        .get("tools")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for tool in tools {
        let kind = tool.get("type").and_then(Value::as_str).unwrap_or("");
        if kind == "image_generation" {
            return Some("the provider's image generation tool (`tools[].type` `image_generation`), billed per image at the image model's rates,");
        }
        if kind == "code_interpreter" {
            return Some("the provider's code interpreter (`tools[].type` `code_interpreter`), billed per container,");
        }
        if kind.starts_with("code_execution") {
            return Some("the provider's code execution tool (`tools[].type` `code_execution_…`), billed per container hour,");
        }
    }
    let audio_out = request
        .get("modalities")
        .and_then(Value::as_array)
        .is_some_and(|m| m.iter().any(|m| m.as_str() == Some("audio")))
        || request.get("audio").is_some_and(|a| !a.is_null());
    if audio_out {
        return Some("audio output (`modalities` `audio`, `audio`), billed at audio rates the price table has none of,");
    }
    super::json_walk::find(request, |map, key, value| {
        let kind = map.get("type").and_then(Value::as_str).unwrap_or("");
        match key {
            "input_audio" => Entry::Found(
                "audio input (`input_audio`), billed at audio rates the price table has none of,",
            ),
            "type" if value.as_str() == Some("input_audio") => Entry::Found(
                "audio input (`input_audio`), billed at audio rates the price table has none of,",
            ),
            // The model's own tool input: not a request.
            "input" if kind.ends_with("tool_use") => Entry::Skip,
            _ => Entry::Enter,
        }
    })
}

/// What in `request` asks the provider to serve it dearer than `price`
/// (the requested model's, from the table) has rates for, as the refusal
/// says it; `None`: nothing. A cheaper tier (`flex`, `batch`) the table
/// lacks is metered at the standard rates, above what is billed, and
/// passes.
pub(super) fn dearer_service(request: &Value, price: &ModelPrice) -> Option<&'static str> {
    let asked = |field: &str, plain: &[&str]| {
        request
            .get(field)
            .filter(|v| !v.is_null())
            .is_some_and(|v| v.as_str().is_none_or(|s| !plain.contains(&s)))
    };
    if request.get("service_tier").and_then(Value::as_str) == Some("priority")
        && !price.tiers.contains_key("priority")
    {
        return Some("the priority tier (`service_tier` `priority`), billed above the standard rates, for a model the price table has no priority rates for,");
    }
    if asked("speed", &["standard"]) {
        return Some("fast mode (`speed`), billed at a premium the price table has no rates for,");
    }
    if asked("inference_geo", &["", "global"]) {
        return Some("inference kept in one geography (`inference_geo`), billed at a multiplier the price table has none of,");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Each use billed beyond the priced tokens is found, wherever the
    /// audio sits; the engines' own requests (functions, custom tools,
    /// tool search, web search, text output) and the model's own tool
    /// input are not.
    #[test]
    fn uses_billed_beyond_their_tokens_are_found() {
        let found = [
            json!({"tools": [{"type": "function", "name": "f"}, {"type": "image_generation"}]}),
            json!({"tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]}),
            json!({"tools": [{"type": "code_execution_20250522", "name": "code_execution"}]}),
            json!({"modalities": ["text", "audio"]}),
            json!({"audio": {"voice": "alloy", "format": "wav"}}),
            json!({"messages": [{"role": "user", "content": [{"type": "input_audio",
                "input_audio": {"data": "", "format": "wav"}}]}]}),
            json!({"input": [{"role": "user", "content": [{"type": "input_audio", "data": ""}]}]}),
        ];
        for request in &found {
            assert!(unpriced_use(request).is_some(), "{request}");
        }
        let passed = [
            json!({"tools": [{"type": "function", "name": "shell"}, {"type": "custom",
                "name": "apply_patch"}, {"type": "tool_search"}, {"type": "web_search"}],
                "modalities": ["text"], "audio": null}),
            json!({"tools": [{"name": "Bash", "input_schema": {}}],
                "messages": [{"role": "user", "content": "input_audio audio modalities"},
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f",
                        "input": {"input_audio": "x", "type": "input_audio"}}]}]}),
        ];
        for request in &passed {
            assert_eq!(unpriced_use(request), None, "{request}");
        }
    }

    /// The requests the pinned engines sent (recorded fixtures) pass.
    #[test]
    fn the_engines_requests_pass() {
        for text in [
            include_str!("../../tests/fixtures/requests/codex-0.171.0/turn-3.json"),
            include_str!("../../tests/fixtures/requests/claude-2.1.197/turn-3.json"),
            include_str!("../../tests/fixtures/requests/claude-2.1.197/title.json"),
        ] {
            let request: Value = serde_json::from_str(text).unwrap_or_default();
            assert!(request.is_object());
            assert_eq!(unpriced_use(&request), None);
        }
    }

    /// A dearer service than the model's prices is found; the standard
    /// ones, a tier the table prices and a cheaper one are not.
    #[test]
    fn dearer_services_than_the_table_prices_are_found() {
        let t = crate::broker::PriceTable::vendored().unwrap_or_else(|e| panic!("{e}"));
        let price = |m: &str| t.price(m).unwrap_or_else(|| panic!("{m}"));
        let dearer = [
            ("gpt-5.5", json!({"service_tier": "priority"})),
            ("claude-opus-4-6", json!({"speed": "fast"})),
            ("claude-opus-4-6", json!({"speed": 6})),
            ("claude-opus-4-6", json!({"inference_geo": "us"})),
        ];
        for (model, request) in &dearer {
            assert!(dearer_service(request, price(model)).is_some(), "{request}");
        }
        let plain = [
            ("gpt-5.1", json!({"service_tier": "priority"})),
            ("gpt-5.5", json!({"service_tier": "flex"})),
            ("gpt-5.5", json!({"service_tier": "auto", "speed": null})),
            (
                "claude-opus-4-6",
                json!({"speed": "standard", "inference_geo": "global"}),
            ),
        ];
        for (model, request) in &plain {
            assert_eq!(dearer_service(request, price(model)), None, "{request}");
        }
    }
}

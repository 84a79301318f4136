//! Whether a request's input tokens are bounded by its bytes: text
//! tokenizes at one token a byte at most (byte-level tokenizers), but an
//! image, a file (a PDF's pages are read as images too), audio, or the
//! pages a web search brings in are counted by what they hold, so a few
//! kilobytes can cost thousands of input tokens. The budget reckons a call
//! that runs beside others of its job at one token a byte; a call whose
//! input its bytes do not bound runs only alone (`budget.rs`,
//! `InputReckoning`), so that at most one call's input can pass its
//! estimate.

use serde_json::Value;

use super::json_walk::Entry;
use super::wire::Api;

/// The content part types whose tokens are not their bytes', in each
/// API: Responses `input_image`, `input_file`, `input_audio` and a
/// computer call's screenshot; Chat Completions `image_url`, `file` and
/// `input_audio`; Messages `image` and `document`.
const COUNTED_BY_CONTENT: [&str; 8] = [
    "input_image",
    "input_file",
    "input_audio",
    "computer_screenshot",
    "image_url",
    "file",
    "image",
    "document",
];

/// What in `request` (a call to `api` for `model`) has input tokens its
/// bytes do not bound, as the docs name it; `None`: its input is text,
/// at most one token a byte.
pub(super) fn unbounded_input(api: Api, model: &str, request: &Value) -> Option<&'static str> {
    if super::provider_fetch::web_search(api, request).is_some()
        || super::provider_fetch::searching_model(model)
    {
        return Some("a web search");
    }
    super::json_walk::find(request, |_, key, value| {
        let content = match key {
            "type" => value
                .as_str()
                .is_some_and(|t| COUNTED_BY_CONTENT.contains(&t)),
            "image_url" | "file_data" | "input_audio" => true,
            _ => false,
        };
        match content {
            true => Entry::Found("an image, file or audio part"),
            false => Entry::Enter,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Images, files and audio in each API's forms, at any depth (a tool's
    /// result), and web search are found; text, tool calls and a `type`
    /// naming text are not.
    #[test]
    fn inputs_counted_by_their_content_are_found() {
        let found: Vec<Option<&str>> = [
            (Api::Responses, json!({"input": [{"role": "user", "content": [{"type": "input_text", "text": "image"}]}]})),
            (Api::Responses, json!({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]}]})),
            (Api::Responses, json!({"input": [{"type": "function_call_output", "call_id": "c", "output": [{"type": "input_file", "file_data": "JVBERi0="}]}]})),
            (Api::Responses, json!({"input": [{"type": "computer_call_output", "call_id": "c", "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AAAA"}}]})),
            (Api::Responses, json!({"input": "hi", "tools": [{"type": "web_search"}]})),
            (Api::Chat, json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "file"}]}]})),
            (Api::Chat, json!({"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]}]})),
            (Api::Messages, json!({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]}]}]})),
            (Api::Messages, json!({"messages": [{"role": "user", "content": [{"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}}]}]})),
            (Api::Messages, json!({"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Read", "input": {"file_path": "a.png"}}]}]})),
        ]
        .iter()
        .map(|(api, request)| unbounded_input(*api, "gpt-5.5", request))
        .collect();
        let part = Some("an image, file or audio part");
        assert_eq!(
            found,
            [
                None,
                part,
                part,
                part,
                Some("a web search"),
                None,
                part,
                part,
                part,
                None
            ]
        );
        assert_eq!(
            unbounded_input(Api::Chat, "gpt-4o-search-preview", &json!({"messages": []})),
            Some("a web search")
        );
    }
}

//! Rendering a turn in the OpenAI Chat Completions API (`POST
//! /v1/chat/completions`), as OpenAI-compatible clients consume it.
//!
//! A streamed completion is a run of `chat.completion.chunk` objects as bare
//! `data:` lines: the role, the text as `content` deltas, each action as one
//! `tool_calls` delta (a function named after the action's type, `shell`,
//! `write`, `edit` or `read`, with the action's fields as JSON arguments),
//! a last chunk with `finish_reason`, then — only when the request asked for
//! it with `stream_options.include_usage` — a chunk with empty `choices` and
//! the usage, and `data: [DONE]`. Without `"stream": true` the same content
//! is one `chat.completion` object with its usage. Failures are OpenAI's
//! error body, as an HTTP response or as an in-stream `data:` chunk.

use bytes::Bytes;
use serde_json::{json, Value};

use super::scenario::{Action, Ending, HttpFailure, Usage};
use super::sse::{deltas, json_reply, stream_reply};
use super::{responses, RenderInput, ScriptedReply};

/// Renders the input's turn.
pub(crate) fn render(input: &RenderInput<'_>) -> ScriptedReply {
    match &input.turn.ending {
        Ending::HttpError(failure) => error_reply(failure),
        Ending::Complete if input.streaming() => stream(input, None, false),
        Ending::Complete => json_reply(200, &whole(input)),
        Ending::StreamError(failure) if input.streaming() => {
            let error = json!({"error": {"message": failure.message,
                "type": failure.kind.as_deref().unwrap_or("server_error"), "code": null}});
            stream(input, Some(error), false)
        }
        Ending::StreamError(failure) => error_reply(&HttpFailure {
            status: 500,
            message: failure.message.clone(),
            kind: failure.kind.clone(),
            code: None,
        }),
        Ending::Disconnect if input.streaming() => stream(input, None, true),
        Ending::Disconnect => ScriptedReply {
            status: 200,
            content_type: "application/json".to_owned(),
            chunks: Vec::new(),
            abort_after: true,
        },
    }
}

/// An HTTP error with OpenAI's error body.
pub(crate) fn error_reply(failure: &HttpFailure) -> ScriptedReply {
    responses::error_reply(failure)
}

fn id(input: &RenderInput<'_>) -> String {
    format!("chatcmpl-paddock-{}", input.number)
}

fn tool_calls(input: &RenderInput<'_>) -> Vec<Value> {
    input
        .turn
        .actions
        .iter()
        .enumerate()
        .map(|(i, action)| {
            let (name, args) = match action {
                Action::Shell { command, .. } => ("shell", json!({"command": command})),
                Action::Write { path, content } => {
                    ("write", json!({"path": path, "content": content}))
                }
                Action::Edit { path, old, new } => {
                    ("edit", json!({"path": path, "old": old, "new": new}))
                }
                Action::Read { path } => ("read", json!({"path": path})),
                Action::Call { name, arguments } => {
                    (name.as_str(), super::call::fill(arguments, input.request))
                }
            };
            json!({"index": i, "id": format!("call_paddock_{}_{i}", input.number), "type": "function",
                   "function": {"name": name, "arguments": args.to_string()}})
        })
        .collect()
}

fn finish_reason(input: &RenderInput<'_>) -> &'static str {
    if input.turn.actions.is_empty() {
        "stop"
    } else {
        "tool_calls"
    }
}

/// Chat usage: `prompt_tokens` includes the cached tokens.
fn usage_json(usage: &Usage) -> Value {
    json!({
        "prompt_tokens": usage.input + usage.cached + usage.cache_write,
        "completion_tokens": usage.output,
        "total_tokens": usage.input + usage.cached + usage.cache_write + usage.output,
        "prompt_tokens_details": {"cached_tokens": usage.cached},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning},
    })
}

fn whole(input: &RenderInput<'_>) -> Value {
    let calls = tool_calls(input);
    let mut message = json!({"role": "assistant", "content": input.turn.text});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    json!({"id": id(input), "object": "chat.completion", "created": input.created_at,
           "model": input.model,
           "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(input)}],
           "usage": usage_json(&input.turn.usage)})
}

fn include_usage(input: &RenderInput<'_>) -> bool {
    input
        .request
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn data(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

/// The streamed completion; `error` ends it with an in-stream error after
/// the text, `abort` cuts it after the text.
fn stream(input: &RenderInput<'_>, error: Option<Value>, abort: bool) -> ScriptedReply {
    let chunk = |delta: Value, finish: Value| {
        data(&json!({"id": id(input), "object": "chat.completion.chunk",
                     "created": input.created_at, "model": input.model,
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}))
    };
    let mut chunks = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    if let Some(text) = &input.turn.text {
        for piece in deltas(text) {
            chunks.push(chunk(json!({"content": piece}), Value::Null));
        }
    }
    if let Some(error) = error {
        chunks.push(data(&error));
        return stream_reply(chunks, false);
    }
    if abort {
        return stream_reply(chunks, true);
    }
    for call in tool_calls(input) {
        chunks.push(chunk(json!({"tool_calls": [call]}), Value::Null));
    }
    chunks.push(chunk(json!({}), json!(finish_reason(input))));
    if include_usage(input) {
        chunks.push(data(
            &json!({"id": id(input), "object": "chat.completion.chunk",
            "created": input.created_at, "model": input.model, "choices": [],
            "usage": usage_json(&input.turn.usage)}),
        ));
    }
    chunks.push(Bytes::from_static(b"data: [DONE]\n\n"));
    stream_reply(chunks, false)
}

//! Rendering a turn in the Anthropic Messages API, as Claude Code consumes it.
//!
//! A streamed message is `message_start` (with the input side of the usage
//! and `output_tokens` 1), a `ping`, then per content block
//! `content_block_start`, its deltas (`thinking_delta` and `signature_delta`,
//! `text_delta`, `input_json_delta`) and `content_block_stop`, then
//! `message_delta` (`stop_reason` `tool_use` or `end_turn`, cumulative usage
//! with the final output tokens) and `message_stop`. Without `"stream": true`
//! the same content is one JSON message. Actions become Claude Code's tools:
//! `Bash` {command, description}, `Write` {file_path, content}, `Edit`
//! {file_path, old_string, new_string, replace_all} and `Read` {file_path},
//! with absolute paths under the checkout. Failures are Anthropic's error
//! body (`{"type": "error", "error": {type, message}}`), as an HTTP response
//! or as an in-stream `error` event.

use bytes::Bytes;
use serde_json::{json, Value};

use super::scenario::{Action, Ending, HttpFailure, StreamFailure, Usage};
use super::sse::{deltas, frame, json_reply, stream_reply};
use super::{RenderInput, ScriptedReply};
use crate::broker::wire::messages::error_body;

/// Renders the input's turn.
pub(crate) fn render(input: &RenderInput<'_>) -> ScriptedReply {
    let turn = input.turn;
    match &turn.ending {
        Ending::HttpError(failure) => error_reply(failure),
        Ending::Complete => {
            let blocks = plan_blocks(input);
            if input.streaming() {
                complete_stream(input, &blocks)
            } else {
                json_reply(200, &whole_message(input, &blocks))
            }
        }
        Ending::StreamError(failure) => {
            if input.streaming() {
                failing_stream(input, Some(failure))
            } else {
                let kind = failure.kind.as_deref().unwrap_or("api_error");
                error_reply(&HttpFailure {
                    status: if kind == "overloaded_error" { 529 } else { 500 },
                    message: failure.message.clone(),
                    kind: Some(kind.to_owned()),
                    code: None,
                })
            }
        }
        Ending::Disconnect => {
            if input.streaming() {
                failing_stream(input, None)
            } else {
                ScriptedReply {
                    status: 200,
                    content_type: "application/json".to_owned(),
                    chunks: Vec::new(),
                    abort_after: true,
                }
            }
        }
    }
}

/// An HTTP error with Anthropic's error body.
pub(crate) fn error_reply(failure: &HttpFailure) -> ScriptedReply {
    let kind = failure
        .kind
        .clone()
        .unwrap_or_else(|| default_error_type(failure.status).to_owned());
    json_reply(failure.status, &error_body(&kind, &failure.message))
}

/// Anthropic's error `type` for a status.
fn default_error_type(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        504 => "timeout_error",
        529 => "overloaded_error",
        500..=599 => "api_error",
        _ => "invalid_request_error",
    }
}

/// One content block of a message.
#[derive(Debug, Clone, PartialEq)]
enum Block {
    Thinking(String),
    Text(String),
    ToolUse { name: String, input: Value },
}

impl Block {
    /// The whole block, as in a non-streaming message.
    fn whole(&self, id: &str, signature: &str) -> Value {
        match self {
            Block::Thinking(text) => {
                json!({"type": "thinking", "thinking": text, "signature": signature})
            }
            Block::Text(text) => json!({"type": "text", "text": text}),
            Block::ToolUse { name, input } => {
                json!({"type": "tool_use", "id": id, "name": name, "input": input})
            }
        }
    }
}

fn tool_use_id(turn: usize, index: usize) -> String {
    format!("toolu_paddock_{turn}_{index}")
}

/// A stand-in for the signature that lets Anthropic verify a thinking block
/// it is sent back; Claude Code keeps it opaque.
fn signature(turn: usize) -> String {
    format!("paddock-scripted-signature-{turn}")
}

/// The content blocks of a complete turn, in order.
fn plan_blocks(input: &RenderInput<'_>) -> Vec<Block> {
    let turn = input.turn;
    let mut blocks = Vec::new();
    if let Some(reasoning) = &turn.reasoning {
        blocks.push(Block::Thinking(reasoning.clone()));
    }
    if let Some(text) = &turn.text {
        blocks.push(Block::Text(text.clone()));
    }
    for action in &turn.actions {
        blocks.push(match action {
            Action::Shell {
                command,
                description,
            } => Block::ToolUse {
                name: "Bash".into(),
                input: json!({
                    "command": command,
                    "description": description.clone().unwrap_or_else(|| describe(command)),
                }),
            },
            Action::Write { path, content } => Block::ToolUse {
                name: "Write".into(),
                input: json!({"file_path": input.absolute(path), "content": content}),
            },
            Action::Edit { path, old, new } => Block::ToolUse {
                name: "Edit".into(),
                input: json!({
                    "file_path": input.absolute(path),
                    "old_string": old,
                    "new_string": new,
                    "replace_all": false,
                }),
            },
            Action::Read { path } => Block::ToolUse {
                name: "Read".into(),
                input: json!({"file_path": input.absolute(path)}),
            },
            Action::Call { name, arguments } => Block::ToolUse {
                name: name.clone(),
                input: super::call::fill(arguments, input.request),
            },
        });
    }
    blocks
}

/// Bash's `description` when the scenario gives none: the command's first
/// line, shortened.
fn describe(command: &str) -> String {
    let first = command.lines().next().unwrap_or(command).trim();
    let mut short: String = first.chars().take(60).collect();
    if short.len() < first.len() || command.trim().lines().nth(1).is_some() {
        short.push('…');
    }
    format!("Run {short}")
}

fn stop_reason(blocks: &[Block]) -> &'static str {
    if blocks
        .iter()
        .any(|block| matches!(block, Block::ToolUse { .. }))
    {
        "tool_use"
    } else {
        "end_turn"
    }
}

/// Usage in the Messages convention: `input_tokens` excludes cache reads and
/// writes. `output` is the output so far.
fn usage_json(usage: &Usage, output: u64) -> Value {
    json!({
        "input_tokens": usage.input,
        "cache_creation_input_tokens": usage.cache_write,
        "cache_read_input_tokens": usage.cached,
        "output_tokens": output,
    })
}

fn message_id(input: &RenderInput<'_>) -> String {
    format!("msg_paddock_{}", input.number)
}

fn whole_message(input: &RenderInput<'_>, blocks: &[Block]) -> Value {
    let content: Vec<Value> = blocks
        .iter()
        .enumerate()
        .map(|(index, block)| {
            block.whole(&tool_use_id(input.number, index), &signature(input.number))
        })
        .collect();
    json!({
        "id": message_id(input),
        "type": "message",
        "role": "assistant",
        "model": input.model,
        "content": content,
        "stop_reason": stop_reason(blocks),
        "stop_sequence": null,
        "usage": usage_json(&input.turn.usage, input.turn.usage.output),
    })
}

/// SSE events, named after their `type`.
struct Events {
    chunks: Vec<Bytes>,
}

impl Events {
    fn push(&mut self, data: Value) {
        let name = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message")
            .to_owned();
        self.chunks.push(frame(&name, &data));
    }

    fn start(input: &RenderInput<'_>) -> Events {
        let usage = &input.turn.usage;
        let mut events = Events { chunks: Vec::new() };
        events.push(json!({
            "type": "message_start",
            "message": {
                "id": message_id(input),
                "type": "message",
                "role": "assistant",
                "model": input.model,
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": usage_json(usage, usage.output.min(1)),
            },
        }));
        events.push(json!({"type": "ping"}));
        events
    }

    /// Opens a block and streams its content; the caller closes it.
    fn open_block(&mut self, input: &RenderInput<'_>, index: usize, block: &Block) {
        let start = match block {
            Block::Thinking(_) => json!({"type": "thinking", "thinking": "", "signature": ""}),
            Block::Text(_) => json!({"type": "text", "text": ""}),
            Block::ToolUse { name, .. } => json!({
                "type": "tool_use", "id": tool_use_id(input.number, index), "name": name, "input": {},
            }),
        };
        self.push(json!({"type": "content_block_start", "index": index, "content_block": start}));
        let mut delta = |delta: Value| {
            self.push(json!({"type": "content_block_delta", "index": index, "delta": delta}));
        };
        match block {
            Block::Thinking(text) => {
                for piece in deltas(text) {
                    delta(json!({"type": "thinking_delta", "thinking": piece}));
                }
                delta(json!({"type": "signature_delta", "signature": signature(input.number)}));
            }
            Block::Text(text) => {
                for piece in deltas(text) {
                    delta(json!({"type": "text_delta", "text": piece}));
                }
            }
            Block::ToolUse {
                input: arguments, ..
            } => {
                delta(json!({"type": "input_json_delta", "partial_json": arguments.to_string()}));
            }
        }
    }

    fn close_block(&mut self, index: usize) {
        self.push(json!({"type": "content_block_stop", "index": index}));
    }
}

fn complete_stream(input: &RenderInput<'_>, blocks: &[Block]) -> ScriptedReply {
    let usage = &input.turn.usage;
    let mut events = Events::start(input);
    for (index, block) in blocks.iter().enumerate() {
        events.open_block(input, index, block);
        events.close_block(index);
    }
    events.push(json!({
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason(blocks), "stop_sequence": null},
        "usage": usage_json(usage, usage.output),
    }));
    events.push(json!({"type": "message_stop"}));
    stream_reply(events.chunks, false)
}

/// A stream that starts (whole thinking block, then the text as deltas of a
/// block that never closes) and then fails in-stream (`failure`) or is cut
/// (`None`).
fn failing_stream(input: &RenderInput<'_>, failure: Option<&StreamFailure>) -> ScriptedReply {
    let turn = input.turn;
    let mut events = Events::start(input);
    let mut index = 0;
    if let Some(reasoning) = &turn.reasoning {
        events.open_block(input, index, &Block::Thinking(reasoning.clone()));
        events.close_block(index);
        index += 1;
    }
    if let Some(text) = &turn.text {
        events.open_block(input, index, &Block::Text(text.clone()));
    }
    match failure {
        Some(failure) => {
            let kind = failure.kind.as_deref().unwrap_or("api_error");
            events.push(error_body(kind, &failure.message));
            stream_reply(events.chunks, false)
        }
        None => stream_reply(events.chunks, true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_per_status() {
        let body = |status: u16, kind: Option<&str>| {
            let reply = error_reply(&HttpFailure {
                status,
                message: "no".into(),
                kind: kind.map(str::to_owned),
                code: None,
            });
            assert_eq!(reply.status, status);
            assert_eq!(reply.content_type, "application/json");
            serde_json::from_str::<Value>(&reply.body_text()).unwrap()
        };
        assert_eq!(
            body(400, None),
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "no"}})
        );
        assert_eq!(
            body(429, None),
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "no"}})
        );
        assert_eq!(
            body(500, None),
            json!({"type": "error", "error": {"type": "api_error", "message": "no"}})
        );
        assert_eq!(
            body(529, None),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "no"}})
        );
        assert_eq!(
            body(500, Some("custom_error")),
            json!({"type": "error", "error": {"type": "custom_error", "message": "no"}})
        );
    }

    #[test]
    fn describes_commands() {
        assert_eq!(describe("cargo test"), "Run cargo test");
        assert_eq!(describe("set -e\nmake"), "Run set -e…");
        assert_eq!(
            describe(&"x".repeat(70)),
            format!("Run {}…", "x".repeat(60))
        );
    }
}

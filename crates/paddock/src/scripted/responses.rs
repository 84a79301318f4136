//! Rendering a turn in the OpenAI Responses API, as Codex consumes it.
//!
//! A streamed response is `response.created`, `response.in_progress`, then
//! per output item `response.output_item.added`, its deltas (reasoning
//! summary text, output text, function-call arguments or custom-tool input)
//! and `response.output_item.done`, and finally `response.completed` with the
//! response's `id`, `model`, `output` and `usage`. Every event carries a
//! `sequence_number`. Actions become the tool calls this Codex offers in the
//! request's `tools`: a shell command goes to `exec_command` (`{"cmd": …}`),
//! `shell_command` or `shell` (`["bash", "-lc", …]`); a write or an edit
//! becomes an `apply_patch` envelope sent to the freeform `apply_patch` tool,
//! to an `apply_patch` function, or through the shell tool as a heredoc; a
//! read becomes `cat`. Failures are OpenAI's error body
//! (`{"error": {message, type, param, code}}`) or an in-stream
//! `response.failed`.

use bytes::Bytes;
use serde_json::{json, Value};

use super::patch;
use super::scenario::{Action, Ending, HttpFailure, StreamFailure, Usage};
use super::sse::{deltas, frame, json_reply, stream_reply};
use super::{RenderInput, ScriptedReply};

/// Renders the input's turn.
pub(crate) fn render(input: &RenderInput<'_>) -> ScriptedReply {
    let turn = input.turn;
    match &turn.ending {
        Ending::HttpError(failure) => error_reply(failure),
        Ending::Complete => {
            let items = plan_items(input);
            if input.streaming() {
                complete_stream(input, &items)
            } else {
                let output = items
                    .iter()
                    .enumerate()
                    .map(|(index, item)| item.done(&ItemIds::new(input.number, index)))
                    .collect();
                json_reply(
                    200,
                    &response_object(
                        input,
                        "completed",
                        output,
                        usage_json(&turn.usage),
                        Value::Null,
                    ),
                )
            }
        }
        Ending::StreamError(failure) => {
            if input.streaming() {
                failing_stream(input, Some(failure))
            } else {
                error_reply(&HttpFailure {
                    status: 500,
                    message: failure.message.clone(),
                    kind: None,
                    code: failure.kind.clone(),
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

/// An HTTP error with OpenAI's error body.
pub(crate) fn error_reply(failure: &HttpFailure) -> ScriptedReply {
    let kind = failure
        .kind
        .clone()
        .unwrap_or_else(|| default_error_type(failure.status).to_owned());
    let code = match (&failure.code, failure.status) {
        (Some(code), _) => Value::String(code.clone()),
        (None, 429) => Value::String("rate_limit_exceeded".to_owned()),
        (None, _) => Value::Null,
    };
    json_reply(
        failure.status,
        &json!({"error": {
            "message": failure.message,
            "type": kind,
            "param": null,
            "code": code,
        }}),
    )
}

/// OpenAI's error `type` for a status.
fn default_error_type(status: u16) -> &'static str {
    match status {
        429 => "requests",
        500..=599 => "server_error",
        _ => "invalid_request_error",
    }
}

/// One output item of a response.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Item {
    Reasoning(String),
    Message(String),
    FunctionCall { name: String, arguments: String },
    CustomToolCall { name: String, input: String },
}

/// The ids of the item at `index` in turn `turn`: stable, so that a retried
/// request gets the same reply, and unique within a conversation.
struct ItemIds {
    item: String,
    call: String,
    index: usize,
}

impl ItemIds {
    fn new(turn: usize, index: usize) -> ItemIds {
        ItemIds {
            item: format!("paddock_{turn}_{index}"),
            call: format!("call_paddock_{turn}_{index}"),
            index,
        }
    }
}

impl Item {
    /// The item as it appears in `response.output_item.done` and `output`.
    fn done(&self, ids: &ItemIds) -> Value {
        match self {
            Item::Reasoning(text) => json!({
                "id": reasoning_id(&ids.item),
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": text}],
            }),
            Item::Message(text) => json!({
                "id": message_id(&ids.item),
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [output_text(text)],
            }),
            Item::FunctionCall { name, arguments } => json!({
                "id": function_call_id(&ids.item),
                "type": "function_call",
                "status": "completed",
                "call_id": ids.call,
                "name": name,
                "arguments": arguments,
            }),
            Item::CustomToolCall { name, input } => json!({
                "id": custom_call_id(&ids.item),
                "type": "custom_tool_call",
                "status": "completed",
                "call_id": ids.call,
                "name": name,
                "input": input,
            }),
        }
    }
}

fn reasoning_id(base: &str) -> String {
    format!("rs_{base}")
}

fn message_id(base: &str) -> String {
    format!("msg_{base}")
}

fn function_call_id(base: &str) -> String {
    format!("fc_{base}")
}

fn custom_call_id(base: &str) -> String {
    format!("ctc_{base}")
}

fn output_text(text: &str) -> Value {
    json!({"type": "output_text", "annotations": [], "logprobs": [], "text": text})
}

/// How this Codex runs shell commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ShellTool {
    /// `exec_command` with `{"cmd": "…"}` (unified exec; codex-cli 0.171.0).
    ExecCommand,
    /// `shell_command` with `{"command": "…"}`.
    ShellCommand,
    /// `shell` with `{"command": ["bash", "-lc", "…"]}`.
    Shell,
}

/// How this Codex applies patches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PatchTool {
    /// The freeform custom tool `apply_patch` (input: the patch text).
    Custom,
    /// A function `apply_patch` with `{"input": "…"}`.
    Function,
    /// No patch tool: `apply_patch <<'EOF'` through the shell tool, which
    /// Codex intercepts.
    ThroughShell,
}

/// The tools the request offers that scripted actions can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tools {
    shell: ShellTool,
    patch: PatchTool,
}

fn offered_tools(request: &Value) -> Tools {
    let tools = request
        .get("tools")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let offers = |kind: &str, name: &str| {
        tools.iter().any(|tool| {
            tool.get("type").and_then(Value::as_str) == Some(kind)
                && tool.get("name").and_then(Value::as_str) == Some(name)
        })
    };
    let shell = if offers("function", "exec_command") {
        ShellTool::ExecCommand
    } else if offers("function", "shell_command") {
        ShellTool::ShellCommand
    } else if offers("function", "shell") {
        ShellTool::Shell
    } else {
        ShellTool::ExecCommand
    };
    let patch = if offers("custom", "apply_patch") {
        PatchTool::Custom
    } else if offers("function", "apply_patch") {
        PatchTool::Function
    } else {
        PatchTool::ThroughShell
    };
    Tools { shell, patch }
}

/// The output items of a complete turn, in order.
fn plan_items(input: &RenderInput<'_>) -> Vec<Item> {
    let turn = input.turn;
    let tools = offered_tools(input.request);
    let mut items = Vec::new();
    if let Some(reasoning) = &turn.reasoning {
        items.push(Item::Reasoning(reasoning.clone()));
    }
    if let Some(text) = &turn.text {
        items.push(Item::Message(text.clone()));
    }
    for action in &turn.actions {
        items.push(match action {
            Action::Shell { command, .. } => shell_call(tools, command),
            Action::Read { path } => shell_call(tools, &patch::read_command(path)),
            Action::Write { path, content } => patch_call(tools, patch::add_file(path, content)),
            Action::Edit { path, old, new } => {
                patch_call(tools, patch::update_file(path, old, new))
            }
            Action::Call { name, arguments } => Item::FunctionCall {
                name: name.clone(),
                arguments: super::call::fill(arguments, input.request).to_string(),
            },
        });
    }
    items
}

fn shell_call(tools: Tools, command: &str) -> Item {
    let (name, arguments) = match tools.shell {
        ShellTool::ExecCommand => ("exec_command", json!({"cmd": command})),
        ShellTool::ShellCommand => ("shell_command", json!({"command": command})),
        ShellTool::Shell => ("shell", json!({"command": ["bash", "-lc", command]})),
    };
    Item::FunctionCall {
        name: name.to_string(),
        arguments: arguments.to_string(),
    }
}

fn patch_call(tools: Tools, patch: String) -> Item {
    match tools.patch {
        PatchTool::Custom => Item::CustomToolCall {
            name: "apply_patch".into(),
            input: patch,
        },
        PatchTool::Function => Item::FunctionCall {
            name: "apply_patch".into(),
            arguments: json!({ "input": patch }).to_string(),
        },
        PatchTool::ThroughShell => shell_call(tools, &patch::as_shell_command(&patch)),
    }
}

/// The response object of `response.created`, `response.completed`,
/// `response.failed` and of a non-streaming reply.
fn response_object(
    input: &RenderInput<'_>,
    status: &str,
    output: Vec<Value>,
    usage: Value,
    error: Value,
) -> Value {
    json!({
        "id": format!("resp_paddock_{}", input.number),
        "object": "response",
        "created_at": input.created_at,
        "status": status,
        "error": error,
        "incomplete_details": null,
        "model": input.model,
        "output": output,
        "usage": usage,
    })
}

/// Usage in the Responses convention: input includes cached and cache-write
/// tokens; reasoning is a part of output.
fn usage_json(usage: &Usage) -> Value {
    let input = usage
        .input
        .saturating_add(usage.cached)
        .saturating_add(usage.cache_write);
    let mut input_details = json!({"cached_tokens": usage.cached});
    if usage.cache_write > 0 {
        input_details["cache_write_tokens"] = json!(usage.cache_write);
    }
    json!({
        "input_tokens": input,
        "input_tokens_details": input_details,
        "output_tokens": usage.output,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning},
        "total_tokens": input.saturating_add(usage.output),
    })
}

/// SSE events with their `sequence_number`s.
struct Events {
    next: u64,
    chunks: Vec<Bytes>,
}

impl Events {
    fn new() -> Events {
        Events {
            next: 0,
            chunks: Vec::new(),
        }
    }

    /// Adds an event; `data` must be an object with a `type`.
    fn push(&mut self, mut data: Value) {
        let name = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message")
            .to_owned();
        if let Some(object) = data.as_object_mut() {
            object.insert("sequence_number".to_owned(), json!(self.next));
        }
        self.next += 1;
        self.chunks.push(frame(&name, &data));
    }

    fn start(&mut self, input: &RenderInput<'_>) {
        for kind in ["response.created", "response.in_progress"] {
            self.push(json!({
                "type": kind,
                "response": response_object(input, "in_progress", Vec::new(), Value::Null, Value::Null),
            }));
        }
    }

    /// The events of one whole item; returns the done item.
    fn item(&mut self, item: &Item, ids: &ItemIds) -> Value {
        let done = item.done(ids);
        let index = ids.index;
        match item {
            Item::Reasoning(text) => {
                let id = reasoning_id(&ids.item);
                self.push(json!({
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {"id": id, "type": "reasoning", "summary": []},
                }));
                let part = |text: &str| json!({"type": "summary_text", "text": text});
                self.push(json!({
                    "type": "response.reasoning_summary_part.added",
                    "item_id": id, "output_index": index, "summary_index": 0,
                    "part": part(""),
                }));
                for delta in deltas(text) {
                    self.push(json!({
                        "type": "response.reasoning_summary_text.delta",
                        "item_id": id, "output_index": index, "summary_index": 0,
                        "delta": delta,
                    }));
                }
                self.push(json!({
                    "type": "response.reasoning_summary_text.done",
                    "item_id": id, "output_index": index, "summary_index": 0,
                    "text": text,
                }));
                self.push(json!({
                    "type": "response.reasoning_summary_part.done",
                    "item_id": id, "output_index": index, "summary_index": 0,
                    "part": part(text),
                }));
            }
            Item::Message(text) => {
                let id = self.message_start(ids);
                for delta in deltas(text) {
                    self.text_delta(&id, index, delta);
                }
                self.push(json!({
                    "type": "response.output_text.done",
                    "item_id": id, "output_index": index, "content_index": 0,
                    "text": text, "logprobs": [],
                }));
                self.push(json!({
                    "type": "response.content_part.done",
                    "item_id": id, "output_index": index, "content_index": 0,
                    "part": output_text(text),
                }));
            }
            Item::FunctionCall { name, arguments } => {
                let id = function_call_id(&ids.item);
                self.push(json!({
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {
                        "id": id, "type": "function_call", "status": "in_progress",
                        "call_id": ids.call, "name": name, "arguments": "",
                    },
                }));
                self.push(json!({
                    "type": "response.function_call_arguments.delta",
                    "item_id": id, "output_index": index, "delta": arguments,
                }));
                self.push(json!({
                    "type": "response.function_call_arguments.done",
                    "item_id": id, "output_index": index, "arguments": arguments,
                }));
            }
            Item::CustomToolCall { name, input } => {
                let id = custom_call_id(&ids.item);
                self.push(json!({
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {
                        "id": id, "type": "custom_tool_call", "status": "in_progress",
                        "call_id": ids.call, "name": name, "input": "",
                    },
                }));
                for delta in deltas(input) {
                    self.push(json!({
                        "type": "response.custom_tool_call_input.delta",
                        "item_id": id, "output_index": index, "delta": delta,
                    }));
                }
                self.push(json!({
                    "type": "response.custom_tool_call_input.done",
                    "item_id": id, "output_index": index, "input": input,
                }));
            }
        }
        self.push(json!({
            "type": "response.output_item.done",
            "output_index": index,
            "item": done,
        }));
        done
    }

    /// Opens an assistant message item; returns its id.
    fn message_start(&mut self, ids: &ItemIds) -> String {
        let id = message_id(&ids.item);
        self.push(json!({
            "type": "response.output_item.added",
            "output_index": ids.index,
            "item": {
                "id": id, "type": "message", "status": "in_progress",
                "role": "assistant", "content": [],
            },
        }));
        self.push(json!({
            "type": "response.content_part.added",
            "item_id": id, "output_index": ids.index, "content_index": 0,
            "part": output_text(""),
        }));
        id
    }

    fn text_delta(&mut self, id: &str, index: usize, delta: &str) {
        self.push(json!({
            "type": "response.output_text.delta",
            "item_id": id, "output_index": index, "content_index": 0,
            "delta": delta, "logprobs": [],
        }));
    }
}

fn complete_stream(input: &RenderInput<'_>, items: &[Item]) -> ScriptedReply {
    let mut events = Events::new();
    events.start(input);
    let output = items
        .iter()
        .enumerate()
        .map(|(index, item)| events.item(item, &ItemIds::new(input.number, index)))
        .collect();
    events.push(json!({
        "type": "response.completed",
        "response": response_object(input, "completed", output, usage_json(&input.turn.usage), Value::Null),
    }));
    stream_reply(events.chunks, false)
}

/// A stream that starts (whole reasoning, then the text as deltas of a
/// message that never completes) and then fails in-stream (`failure`) or is
/// cut (`None`).
fn failing_stream(input: &RenderInput<'_>, failure: Option<&StreamFailure>) -> ScriptedReply {
    let turn = input.turn;
    let mut events = Events::new();
    events.start(input);
    let mut index = 0;
    if let Some(reasoning) = &turn.reasoning {
        events.item(
            &Item::Reasoning(reasoning.clone()),
            &ItemIds::new(input.number, index),
        );
        index += 1;
    }
    if let Some(text) = &turn.text {
        let ids = ItemIds::new(input.number, index);
        let id = events.message_start(&ids);
        for delta in deltas(text) {
            events.text_delta(&id, index, delta);
        }
    }
    match failure {
        Some(failure) => {
            let error = json!({
                "code": failure.kind.as_deref().unwrap_or("server_error"),
                "message": failure.message,
            });
            events.push(json!({
                "type": "response.failed",
                "response": response_object(input, "failed", Vec::new(), Value::Null, error),
            }));
            stream_reply(events.chunks, false)
        }
        None => stream_reply(events.chunks, true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_tools_this_codex_offers() {
        let codex_0_171 = json!({"tools": [
            {"type": "function", "name": "exec_command"},
            {"type": "function", "name": "write_stdin"},
            {"type": "custom", "name": "apply_patch"},
            {"type": "web_search"}
        ]});
        assert_eq!(
            offered_tools(&codex_0_171),
            Tools {
                shell: ShellTool::ExecCommand,
                patch: PatchTool::Custom
            }
        );
        let older = json!({"tools": [
            {"type": "function", "name": "shell"},
            {"type": "function", "name": "apply_patch"}
        ]});
        assert_eq!(
            offered_tools(&older),
            Tools {
                shell: ShellTool::Shell,
                patch: PatchTool::Function
            }
        );
        let shell_command = json!({"tools": [{"type": "function", "name": "shell_command"}]});
        assert_eq!(
            offered_tools(&shell_command),
            Tools {
                shell: ShellTool::ShellCommand,
                patch: PatchTool::ThroughShell
            }
        );
        assert_eq!(
            offered_tools(&json!({})),
            Tools {
                shell: ShellTool::ExecCommand,
                patch: PatchTool::ThroughShell
            }
        );
    }

    #[test]
    fn shell_and_patch_calls_per_tool() {
        let tools = |shell, patch| Tools { shell, patch };
        assert_eq!(
            shell_call(tools(ShellTool::ExecCommand, PatchTool::Custom), "ls -a"),
            Item::FunctionCall {
                name: "exec_command".into(),
                arguments: r#"{"cmd":"ls -a"}"#.into()
            }
        );
        assert_eq!(
            shell_call(tools(ShellTool::Shell, PatchTool::Custom), "ls -a"),
            Item::FunctionCall {
                name: "shell".into(),
                arguments: r#"{"command":["bash","-lc","ls -a"]}"#.into()
            }
        );
        assert_eq!(
            shell_call(tools(ShellTool::ShellCommand, PatchTool::Custom), "ls -a"),
            Item::FunctionCall {
                name: "shell_command".into(),
                arguments: r#"{"command":"ls -a"}"#.into()
            }
        );
        assert_eq!(
            patch_call(tools(ShellTool::Shell, PatchTool::Function), "P".into()),
            Item::FunctionCall {
                name: "apply_patch".into(),
                arguments: r#"{"input":"P"}"#.into()
            }
        );
        assert_eq!(
            patch_call(
                tools(ShellTool::ExecCommand, PatchTool::ThroughShell),
                "P".into()
            ),
            Item::FunctionCall {
                name: "exec_command".into(),
                arguments: r#"{"cmd":"apply_patch <<'EOF'\nP\nEOF"}"#.into()
            }
        );
    }

    #[test]
    fn usage_includes_cache_in_input() {
        let usage = Usage {
            input: 100,
            cached: 20,
            cache_write: 5,
            output: 40,
            reasoning: 10,
        };
        assert_eq!(
            usage_json(&usage),
            json!({
                "input_tokens": 125,
                "input_tokens_details": {"cached_tokens": 20, "cache_write_tokens": 5},
                "output_tokens": 40,
                "output_tokens_details": {"reasoning_tokens": 10},
                "total_tokens": 165,
            })
        );
        assert_eq!(
            usage_json(&Usage::default()),
            json!({
                "input_tokens": 0,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 0,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 0,
            })
        );
    }

    #[test]
    fn error_bodies() {
        let reply = error_reply(&HttpFailure {
            status: 400,
            message: "bad input".into(),
            kind: None,
            code: None,
        });
        assert_eq!(reply.status, 400);
        assert_eq!(reply.content_type, "application/json");
        assert!(!reply.abort_after);
        let body: Value = serde_json::from_str(&reply.body_text()).unwrap();
        assert_eq!(
            body,
            json!({"error": {"message": "bad input", "type": "invalid_request_error", "param": null, "code": null}})
        );
        let reply = error_reply(&HttpFailure {
            status: 429,
            message: "slow down".into(),
            kind: None,
            code: None,
        });
        let body: Value = serde_json::from_str(&reply.body_text()).unwrap();
        assert_eq!(
            body,
            json!({"error": {"message": "slow down", "type": "requests", "param": null, "code": "rate_limit_exceeded"}})
        );
        let reply = error_reply(&HttpFailure {
            status: 503,
            message: "down".into(),
            kind: Some("custom".into()),
            code: Some("c".into()),
        });
        let body: Value = serde_json::from_str(&reply.body_text()).unwrap();
        assert_eq!(
            body,
            json!({"error": {"message": "down", "type": "custom", "param": null, "code": "c"}})
        );
    }
}

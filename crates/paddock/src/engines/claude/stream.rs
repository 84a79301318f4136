//! The Claude Code stream parser: turns `claude -p --output-format stream-json
//! --verbose` JSONL (system/init, assistant and user messages with their
//! content blocks, result) into normalized [`EventBody`]s, following the
//! mapping table in `docs/events.md`. It remembers each `tool_use` by id so that
//! a successful Write/Edit/MultiEdit/NotebookEdit result also yields a
//! `file_change`. Every line goes through `serde_json::Value`; a malformed line
//! becomes a non-fatal `error` event, an event or block Paddock does not map
//! becomes a `raw` event, and parsing always goes on. Paths inside the workdir
//! are reported relative to it.

use crate::engines::jsonl::{self, u64_field, NO_TYPE};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use paddock_protocol::{ChangeKind, EngineKind, EventBody, Phase, TokenUsage};
use serde_json::{Map, Value};

use crate::engines::{relative_to, StreamParser, StreamSummary};

const ENGINE: EngineKind = EngineKind::Claude;

/// The model name Claude Code puts on assistant messages it makes up itself,
/// such as `API Error: …`.
const SYNTHETIC_MODEL: &str = "<synthetic>";

/// What the parser remembers of a `tool_use` until its result arrives.
#[derive(Debug, Clone)]
struct ToolUse {
    name: String,
    /// `file_path` (or `notebook_path`) from the tool's input.
    file_path: Option<String>,
}

/// A tool's name as remembered until its result: the engine's names are
/// short words, a job's output may be anything.
fn cut_name(name: &str) -> String {
    let end = crate::output::floor_char_boundary(name, crate::engines::CALL_ID_MAX);
    name[..end].to_string()
}

/// Stateful parser for one `claude -p --output-format stream-json` run.
#[derive(Debug)]
pub struct ClaudeParser {
    workdir: PathBuf,
    tools: HashMap<String, ToolUse>,
    summary: StreamSummary,
}

impl ClaudeParser {
    pub fn new(workdir: &Path) -> ClaudeParser {
        ClaudeParser {
            workdir: workdir.to_path_buf(),
            tools: HashMap::new(),
            summary: StreamSummary::default(),
        }
    }

    fn event(&mut self, obj: &Map<String, Value>, whole: &Value) -> Vec<EventBody> {
        let Some(event_type) = obj.get("type").and_then(Value::as_str) else {
            return vec![raw(NO_TYPE, whole)];
        };
        match event_type {
            "system" => match obj.get("subtype").and_then(Value::as_str) {
                Some("init") => {
                    let session = obj.get("session_id").and_then(Value::as_str);
                    self.summary.session = session.and_then(crate::engines::session_id);
                    let model = obj.get("model").and_then(Value::as_str);
                    vec![EventBody::Status {
                        phase: Phase::SessionStarted,
                        detail: Some(format!(
                            "session {}, model {}",
                            session.unwrap_or("unknown"),
                            model.unwrap_or("unknown")
                        )),
                    }]
                }
                Some(subtype) => vec![raw(&format!("system/{subtype}"), whole)],
                None => vec![raw("system", whole)],
            },
            "assistant" => self.assistant(obj, whole),
            "user" => self.user(obj, whole),
            "result" => self.result(obj),
            "stream_event" => {
                match obj
                    .get("event")
                    .and_then(|e| e.get("type"))
                    .and_then(Value::as_str)
                {
                    Some(inner) => vec![raw(&format!("stream_event/{inner}"), whole)],
                    None => vec![raw("stream_event", whole)],
                }
            }
            _ => vec![raw(event_type, whole)],
        }
    }

    fn assistant(&mut self, obj: &Map<String, Value>, whole: &Value) -> Vec<EventBody> {
        let message = obj.get("message");
        let blocks = message
            .and_then(|m| m.get("content"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        if blocks.is_empty() {
            return vec![raw("assistant", whole)];
        }
        let synthetic =
            message.and_then(|m| m.get("model")).and_then(Value::as_str) == Some(SYNTHETIC_MODEL);
        if synthetic {
            let text = text_parts(blocks);
            if obj.contains_key("error") || text.starts_with("API Error") {
                let message = if text.is_empty() {
                    "Claude Code reported an API error without a message".to_string()
                } else {
                    text
                };
                return vec![self.fatal(message)];
            }
        }
        // The blocks Paddock does not map are kept once, as the whole
        // line in one `raw` event where the first of them stood (as
        // `user` keeps its other blocks). Before, each such block made a
        // `raw` event of the whole line: a line of N of them was stored N
        // times over (a 4 MiB line of `{"type":"x"}` blocks, some 300,000
        // copies of it, held in memory before any limit counted them).
        let mut events = Vec::new();
        let mut kept_raw = false;
        for block in blocks {
            match self.assistant_block(block) {
                Ok(event) => events.push(event),
                Err(_) if kept_raw => {}
                Err(kind) => {
                    kept_raw = true;
                    events.push(raw(&format!("assistant/{kind}"), whole));
                }
            }
        }
        events
    }

    /// The event of one assistant content block; `Err` with the block's
    /// type when Paddock does not map it (kept raw by [`Self::assistant`]).
    fn assistant_block<'b>(&mut self, block: &'b Value) -> Result<EventBody, &'b str> {
        let block_type = block.get("type").and_then(Value::as_str).unwrap_or("");
        let text = |key: &str| block.get(key).and_then(Value::as_str).map(str::to_string);
        Ok(match block_type {
            "text" => match text("text") {
                Some(text) => EventBody::Text { text },
                None => return Err(block_type),
            },
            "thinking" => match text("thinking") {
                Some(text) => EventBody::Thought { text },
                None => return Err(block_type),
            },
            "tool_use" => {
                let call_id = text("id");
                let name = text("name").unwrap_or_default();
                let input = block.get("input").cloned().unwrap_or(Value::Null);
                let field = |key: &str| input.get(key).and_then(Value::as_str).map(str::to_string);
                let command = if name == "Bash" {
                    field("command")
                } else {
                    None
                };
                // Remembered within bounds (`engines::OPEN_CALLS_MAX`):
                // the stream is the job's.
                if let Some(id) = call_id.as_ref().filter(|id| {
                    crate::engines::may_remember(self.tools.len(), id)
                        || self.tools.contains_key(id.as_str())
                }) {
                    let file_path = field("file_path")
                        .or_else(|| field("notebook_path"))
                        .filter(|p| p.len() <= crate::engines::CALL_PATH_MAX);
                    self.tools.insert(
                        id.clone(),
                        ToolUse {
                            name: cut_name(&name),
                            file_path,
                        },
                    );
                }
                EventBody::ToolCall {
                    call_id,
                    tool: name,
                    command,
                    input,
                }
            }
            _ => return Err(block_type),
        })
    }

    fn user(&mut self, obj: &Map<String, Value>, whole: &Value) -> Vec<EventBody> {
        if obj.get("isSynthetic").and_then(Value::as_bool) == Some(true) {
            return vec![raw("user", whole)];
        }
        let blocks = obj
            .get("message")
            .and_then(|m| m.get("content"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let (results, others): (Vec<&Value>, Vec<&Value>) = blocks
            .iter()
            .partition(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"));
        if results.is_empty() {
            return vec![raw("user", whole)];
        }
        // `tool_use_result` describes the message's result when it has one.
        let structured = match results.len() {
            1 => obj.get("tool_use_result"),
            _ => None,
        };
        let mut events = Vec::new();
        for block in results {
            events.extend(self.tool_result(block, structured));
        }
        if !others.is_empty() {
            events.push(raw("user", whole));
        }
        events
    }

    fn tool_result(&mut self, block: &Value, structured: Option<&Value>) -> Vec<EventBody> {
        let call_id = block
            .get("tool_use_id")
            .and_then(Value::as_str)
            .map(str::to_string);
        let is_error = block
            .get("is_error")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let output = match block.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => text_parts(parts),
            _ => String::new(),
        };
        let tool = call_id.as_ref().and_then(|id| self.tools.remove(id));
        let change = match &tool {
            Some(tool) if !is_error => self.file_change(tool, structured),
            _ => None,
        };
        std::iter::once(EventBody::ToolResult {
            call_id,
            exit_code: None,
            is_error,
            output,
        })
        .chain(change)
        .collect()
    }

    fn file_change(&self, tool: &ToolUse, structured: Option<&Value>) -> Option<EventBody> {
        let structured = structured.and_then(Value::as_object);
        let change = match tool.name.as_str() {
            "Write" => match structured
                .and_then(|s| s.get("type"))
                .and_then(Value::as_str)
            {
                Some("create") => ChangeKind::Add,
                _ => ChangeKind::Update,
            },
            "Edit" | "MultiEdit" | "NotebookEdit" => ChangeKind::Update,
            _ => return None,
        };
        let path = structured
            .and_then(|s| s.get("filePath").or_else(|| s.get("notebook_path")))
            .and_then(Value::as_str)
            .or(tool.file_path.as_deref())?;
        Some(EventBody::FileChange {
            path: relative_to(&self.workdir, path),
            change,
        })
    }

    fn result(&mut self, obj: &Map<String, Value>) -> Vec<EventBody> {
        let usage = obj.get("usage").and_then(Value::as_object);
        let mut events = vec![EventBody::Usage {
            tokens: usage.map(claude_tokens).unwrap_or_default(),
            cost_usd: obj.get("total_cost_usd").and_then(Value::as_f64),
        }];
        let subtype = obj.get("subtype").and_then(Value::as_str).unwrap_or("");
        let is_error = obj.get("is_error").and_then(Value::as_bool) == Some(true);
        if is_error || subtype.starts_with("error") {
            events.push(self.fatal(result_error(obj, subtype)));
        } else {
            // `claude -p` runs one turn, and its successful `result` is
            // that turn's end, as Codex's `turn.completed` is: the runner
            // starts the early patch on it (`runner/early_patch.rs`).
            self.summary.completed = true;
            events.push(EventBody::Status {
                phase: Phase::TurnCompleted,
                detail: None,
            });
        }
        events
    }

    fn fatal(&mut self, message: String) -> EventBody {
        jsonl::fatal(&mut self.summary, ENGINE, message)
    }
}

impl StreamParser for ClaudeParser {
    fn parse_line(&mut self, line: &str) -> Vec<EventBody> {
        jsonl::parse_line(ENGINE, line, |obj, value| self.event(obj, value))
    }

    fn summary(&self) -> StreamSummary {
        self.summary.clone()
    }
}

fn raw(event_type: &str, whole: &Value) -> EventBody {
    jsonl::raw(ENGINE, event_type, whole)
}

/// The `text` of the blocks that have one, joined by newlines.
fn text_parts(blocks: &[Value]) -> String {
    blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Why a result failed: its `result` text, else its `errors`, else the API
/// status, else its subtype.
fn result_error(obj: &Map<String, Value>, subtype: &str) -> String {
    if let Some(text) = obj.get("result").and_then(Value::as_str) {
        if !text.trim().is_empty() {
            return text.to_string();
        }
    }
    let errors: Vec<&str> = obj
        .get("errors")
        .and_then(Value::as_array)
        .map(|e| e.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !errors.is_empty() {
        return errors.join("; ");
    }
    match obj.get("api_error_status") {
        Some(Value::Null) | None => format!("Claude Code ended with result {subtype:?}"),
        Some(status) => format!("API error status {status}"),
    }
}

/// Anthropic's `input_tokens` already excludes cache reads and writes.
fn claude_tokens(usage: &Map<String, Value>) -> TokenUsage {
    TokenUsage {
        input_tokens: u64_field(usage, "input_tokens"),
        cached_input_tokens: u64_field(usage, "cache_read_input_tokens"),
        cache_write_tokens: u64_field(usage, "cache_creation_input_tokens"),
        output_tokens: u64_field(usage, "output_tokens"),
        reasoning_tokens: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const WORKDIR: &str = "/tmp/cap/work-claude";

    fn parse_all(text: &str) -> (Vec<EventBody>, StreamSummary) {
        let mut parser = ClaudeParser::new(Path::new(WORKDIR));
        let events = text.lines().flat_map(|l| parser.parse_line(l)).collect();
        (events, parser.summary())
    }

    fn one(line: &str) -> Vec<EventBody> {
        ClaudeParser::new(Path::new(WORKDIR)).parse_line(line)
    }

    /// Calls that never get their result are remembered up to
    /// `OPEN_CALLS_MAX`, one whose id is past `CALL_ID_MAX` never, and a
    /// path past `CALL_PATH_MAX` not with its call: a hostile stream holds
    /// a bounded share of Paddock's memory, where each call it left open
    /// was held whole.
    #[test]
    fn calls_waiting_for_their_result_are_remembered_within_bounds() {
        let mut parser = ClaudeParser::new(Path::new(WORKDIR));
        let call = |id: &str, path: &str| {
            json!({"type": "assistant", "message": {"model": "claude-sonnet-4-5", "content": [
                {"type": "tool_use", "id": id, "name": "Write",
                 "input": {"file_path": path, "content": "x"}}
            ]}})
            .to_string()
        };
        let long_id = "i".repeat(300);
        parser.parse_line(&call(
            "long-path",
            &format!("{WORKDIR}/{}", "p".repeat(5000)),
        ));
        parser.parse_line(&call(&long_id, "a.txt"));
        for n in 0..5000 {
            parser.parse_line(&call(&format!("toolu_{n}"), "a.txt"));
        }
        assert_eq!(
            (
                parser.tools.len(),
                parser.tools.get("long-path").map(|t| t.file_path.clone()),
                parser.tools.contains_key(&long_id),
                parser.tools.get("toolu_4094").map(|t| t.file_path.clone()),
                parser.tools.contains_key("toolu_4095"),
            ),
            (
                crate::engines::OPEN_CALLS_MAX,
                Some(None),
                false,
                Some(Some("a.txt".to_string())),
                false
            )
        );
    }

    fn claude() -> Option<String> {
        Some("claude".to_string())
    }

    fn raw_of(event_type: &str, line: &str) -> EventBody {
        EventBody::Raw {
            engine: "claude".into(),
            event_type: event_type.into(),
            data: serde_json::from_str(line).unwrap(),
        }
    }

    fn fatal(message: &str) -> EventBody {
        EventBody::Error {
            message: message.into(),
            source: claude(),
            fatal: true,
        }
    }

    fn zero_usage() -> EventBody {
        EventBody::Usage {
            tokens: TokenUsage::default(),
            cost_usd: Some(0.0),
        }
    }

    fn result_ok(call_id: &str, output: &str) -> EventBody {
        EventBody::ToolResult {
            call_id: Some(call_id.into()),
            exit_code: None,
            is_error: false,
            output: output.into(),
        }
    }

    #[test]
    fn recorded_tool_run() {
        let text =
            include_str!("../../../tests/fixtures/streams/parser/claude-2.1.197-tools.jsonl");
        let (events, summary) = parse_all(text);
        let thinking_tokens = text.lines().nth(1).unwrap();
        assert_eq!(
            events,
            vec![
                EventBody::Status {
                    phase: Phase::SessionStarted,
                    detail: Some(
                        "session d65804ca-9dc6-48d3-baf1-6db70ecb6818, model claude-opus-4-8[1m]"
                            .into()
                    ),
                },
                raw_of("system/thinking_tokens", thinking_tokens),
                EventBody::Thought {
                    text: "I should run a command first.".into()
                },
                EventBody::ToolCall {
                    call_id: Some("toolu_453e3e4d46".into()),
                    tool: "Bash".into(),
                    command: Some("echo hello".into()),
                    input: json!({"command": "echo hello", "description": "Say hello"}),
                },
                result_ok("toolu_453e3e4d46", "hello"),
                EventBody::ToolCall {
                    call_id: Some("toolu_36f2cd561d".into()),
                    tool: "Write".into(),
                    command: None,
                    input: json!({"file_path": "/tmp/cap/work-claude/hello.txt", "content": "hi\n"}),
                },
                result_ok(
                    "toolu_36f2cd561d",
                    "File created successfully at: /tmp/cap/work-claude/hello.txt (file state is current in your context — no need to Read it back)"
                ),
                EventBody::FileChange {
                    path: "hello.txt".into(),
                    change: ChangeKind::Add
                },
                EventBody::ToolCall {
                    call_id: Some("toolu_9b221de7bd".into()),
                    tool: "Edit".into(),
                    command: None,
                    input: json!({
                        "replace_all": false,
                        "file_path": "/tmp/cap/work-claude/hello.txt",
                        "old_string": "hi",
                        "new_string": "hello"
                    }),
                },
                result_ok(
                    "toolu_9b221de7bd",
                    "The file /tmp/cap/work-claude/hello.txt has been updated successfully. (file state is current in your context — no need to Read it back)"
                ),
                EventBody::FileChange {
                    path: "hello.txt".into(),
                    change: ChangeKind::Update
                },
                EventBody::ToolCall {
                    call_id: Some("toolu_7f562b5e54".into()),
                    tool: "Bash".into(),
                    command: Some("exit 3".into()),
                    input: json!({"command": "exit 3", "description": "Fail"}),
                },
                EventBody::ToolResult {
                    call_id: Some("toolu_7f562b5e54".into()),
                    exit_code: None,
                    is_error: true,
                    output: "Exit code 3".into(),
                },
                EventBody::Text {
                    text: "Done: wrote hello.txt.".into()
                },
                EventBody::Usage {
                    tokens: TokenUsage {
                        input_tokens: 1500,
                        cached_input_tokens: 10000,
                        cache_write_tokens: 5000,
                        output_tokens: 200,
                        reasoning_tokens: 0,
                    },
                    cost_usd: Some(0.04875),
                },
                EventBody::Status {
                    phase: Phase::TurnCompleted,
                    detail: None,
                },
            ]
        );
        assert_eq!(
            summary,
            StreamSummary {
                completed: true,
                failure: None,
                session: Some("d65804ca-9dc6-48d3-baf1-6db70ecb6818".into())
            }
        );
    }

    #[test]
    fn recorded_dead_broker_is_a_fatal_api_error() {
        let (events, summary) = parse_all(include_str!(
            "../../../tests/fixtures/streams/parser/claude-2.1.197-dead-broker.jsonl"
        ));
        let message = "API Error: Unable to connect to API (ConnectionRefused)";
        assert_eq!(
            events,
            vec![
                EventBody::Status {
                    phase: Phase::SessionStarted,
                    detail: Some(
                        "session ca5a5f52-2818-4936-9a30-95482b859deb, model claude-opus-4-8[1m]"
                            .into()
                    ),
                },
                fatal(message),
                zero_usage(),
                fatal(message),
            ]
        );
        assert_eq!(
            summary,
            StreamSummary {
                completed: false,
                failure: Some(message.into()),
                session: Some("ca5a5f52-2818-4936-9a30-95482b859deb".into())
            }
        );
    }

    #[test]
    fn recorded_http_400() {
        let text =
            include_str!("../../../tests/fixtures/streams/parser/claude-2.1.197-http-400.jsonl");
        let (events, summary) = parse_all(text);
        let message = "API Error: 400 model: not allowed by the job's allowlist";
        assert_eq!(events[1..], [fatal(message), zero_usage(), fatal(message)]);
        assert_eq!(summary.failure.as_deref(), Some(message));
        assert!(!summary.completed);
    }

    #[test]
    fn result_error_falls_back_to_errors_status_and_subtype() {
        let max_turns = r#"{"type":"result","subtype":"error_max_turns","is_error":false,"num_turns":3,"errors":["Reached maximum number of turns (3)"],"total_cost_usd":0.5,"usage":{"input_tokens":1,"cache_creation_input_tokens":2,"cache_read_input_tokens":3,"output_tokens":4}}"#;
        assert_eq!(
            one(max_turns),
            vec![
                EventBody::Usage {
                    tokens: TokenUsage {
                        input_tokens: 1,
                        cached_input_tokens: 3,
                        cache_write_tokens: 2,
                        output_tokens: 4,
                        reasoning_tokens: 0,
                    },
                    cost_usd: Some(0.5),
                },
                fatal("Reached maximum number of turns (3)"),
            ]
        );
        let status = r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":529,"result":""}"#;
        assert_eq!(
            one(status),
            vec![
                EventBody::Usage {
                    tokens: TokenUsage::default(),
                    cost_usd: None
                },
                fatal("API error status 529"),
            ]
        );
        let bare = r#"{"type":"result","subtype":"error_during_execution","is_error":true}"#;
        assert_eq!(
            one(bare)[1],
            fatal(r#"Claude Code ended with result "error_during_execution""#)
        );
    }

    #[test]
    fn denied_tool_result_string_and_array_content() {
        let mut parser = ClaudeParser::new(Path::new(WORKDIR));
        let write = r#"{"type":"assistant","message":{"id":"msg_1","model":"claude-opus-4-8","role":"assistant","content":[{"type":"tool_use","id":"toolu_w","name":"Write","input":{"file_path":"/tmp/cap/work-claude/x.txt","content":"x"}}]},"session_id":"s"}"#;
        let denied = r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"Claude requested permissions to write to /tmp/cap/work-claude/x.txt, but you haven't granted it yet.","is_error":true,"tool_use_id":"toolu_w"}]},"session_id":"s","tool_use_result":"Error: Claude requested permissions to write to /tmp/cap/work-claude/x.txt, but you haven't granted it yet."}"#;
        let read = r#"{"type":"assistant","message":{"id":"msg_2","model":"claude-opus-4-8","role":"assistant","content":[{"type":"tool_use","id":"toolu_r","name":"Read","input":{"file_path":"/tmp/cap/work-claude/a.md"}}]},"session_id":"s"}"#;
        let read_result = r#"{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_r","type":"tool_result","content":[{"type":"text","text":"line one"},{"type":"image","source":{}},{"type":"text","text":"line two"}]}]},"session_id":"s","tool_use_result":{"type":"text","file":{"filePath":"/tmp/cap/work-claude/a.md"}}}"#;
        assert_eq!(parser.parse_line(write).len(), 1);
        assert_eq!(
            parser.parse_line(denied),
            vec![EventBody::ToolResult {
                call_id: Some("toolu_w".into()),
                exit_code: None,
                is_error: true,
                output: "Claude requested permissions to write to /tmp/cap/work-claude/x.txt, but you haven't granted it yet.".into(),
            }]
        );
        assert_eq!(
            parser.parse_line(read),
            vec![EventBody::ToolCall {
                call_id: Some("toolu_r".into()),
                tool: "Read".into(),
                command: None,
                input: json!({"file_path": "/tmp/cap/work-claude/a.md"}),
            }]
        );
        assert_eq!(
            parser.parse_line(read_result),
            vec![result_ok("toolu_r", "line one\nline two")]
        );
    }

    #[test]
    fn edits_without_structured_result_use_the_tool_input() {
        let mut parser = ClaudeParser::new(Path::new(WORKDIR));
        let calls = r#"{"type":"assistant","message":{"model":"claude-opus-4-8","content":[{"type":"tool_use","id":"t1","name":"MultiEdit","input":{"file_path":"/tmp/cap/work-claude/src/lib.rs","edits":[]}},{"type":"tool_use","id":"t2","name":"NotebookEdit","input":{"notebook_path":"/tmp/cap/work-claude/nb.ipynb","new_source":"x"}},{"type":"tool_use","id":"t3","name":"Write","input":{"file_path":"/elsewhere/out.txt","content":""}}]}}"#;
        let results = r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"},{"type":"tool_result","tool_use_id":"t2","content":"ok"},{"type":"tool_result","tool_use_id":"t3","content":"ok"}]},"tool_use_result":{"type":"create","filePath":"/ignored"}}"#;
        assert_eq!(parser.parse_line(calls).len(), 3);
        assert_eq!(
            parser.parse_line(results),
            vec![
                result_ok("t1", "ok"),
                EventBody::FileChange {
                    path: "src/lib.rs".into(),
                    change: ChangeKind::Update
                },
                result_ok("t2", "ok"),
                EventBody::FileChange {
                    path: "nb.ipynb".into(),
                    change: ChangeKind::Update
                },
                result_ok("t3", "ok"),
                EventBody::FileChange {
                    path: "/elsewhere/out.txt".into(),
                    change: ChangeKind::Update
                },
            ]
        );
    }

    #[test]
    fn write_update_and_unknown_tool_id() {
        let mut parser = ClaudeParser::new(Path::new(WORKDIR));
        let call = r#"{"type":"assistant","message":{"model":"m","content":[{"type":"tool_use","id":"w","name":"Write","input":{"file_path":"/tmp/cap/work-claude/a","content":"b"}}]}}"#;
        let result = r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"w","content":"ok"}]},"tool_use_result":{"type":"update","filePath":"/tmp/cap/work-claude/a"}}"#;
        let orphan = r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"nobody","content":"?"}]}}"#;
        parser.parse_line(call);
        assert_eq!(
            parser.parse_line(result),
            vec![
                result_ok("w", "ok"),
                EventBody::FileChange {
                    path: "a".into(),
                    change: ChangeKind::Update
                },
            ]
        );
        // The same id again: the call is forgotten, no second file change.
        assert_eq!(parser.parse_line(result), vec![result_ok("w", "ok")]);
        assert_eq!(parser.parse_line(orphan), vec![result_ok("nobody", "?")]);
    }

    #[test]
    fn synthetic_and_plain_user_messages_are_raw() {
        let synthetic = r#"{"type":"user","isSynthetic":true,"message":{"role":"user","content":[{"type":"text","text":"[Request interrupted]"}]}}"#;
        let prompt = r#"{"type":"user","message":{"role":"user","content":"hi"}}"#;
        let mixed = r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"},{"type":"text","text":"hook says hi"}]}}"#;
        assert_eq!(one(synthetic), vec![raw_of("user", synthetic)]);
        assert_eq!(one(prompt), vec![raw_of("user", prompt)]);
        assert_eq!(
            one(mixed),
            vec![result_ok("t", "ok"), raw_of("user", mixed)]
        );
    }

    #[test]
    fn unknown_types_subtypes_and_blocks_are_raw() {
        let lines = [
            (
                "system/status",
                r#"{"type":"system","subtype":"status","status":"compacting"}"#,
            ),
            (
                "system/hook_started",
                r#"{"type":"system","subtype":"hook_started","hook_name":"PreToolUse"}"#,
            ),
            ("system", r#"{"type":"system"}"#),
            (
                "stream_event/content_block_delta",
                r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}},"session_id":"s"}"#,
            ),
            (
                "control_request",
                r#"{"type":"control_request","request_id":"1"}"#,
            ),
            (NO_TYPE, r#"{"type":7}"#),
            (
                "assistant/redacted_thinking",
                r#"{"type":"assistant","message":{"model":"m","content":[{"type":"redacted_thinking","data":"abc"}]}}"#,
            ),
            (
                "assistant",
                r#"{"type":"assistant","message":{"model":"m","content":[]}}"#,
            ),
        ];
        for (event_type, line) in lines {
            assert_eq!(one(line), vec![raw_of(event_type, line)], "{line}");
        }
    }

    /// The blocks of an assistant line Paddock does not map are kept once,
    /// the whole line in one `raw` event where the first stood, whatever
    /// their number; the mapped ones around them are events of their own.
    /// Before, each unmapped block made a `raw` event of the whole line
    /// (5,000 blocks: 5,000 copies).
    #[test]
    fn an_assistant_lines_unmapped_blocks_are_kept_once() {
        let mut blocks = vec![r#"{"type":"text","text":"a"}"#.to_string()];
        blocks.extend(std::iter::repeat_n(r#"{"type":"x"}"#.to_string(), 5_000));
        blocks.push(r#"{"type":"text"}"#.into());
        blocks.push(r#"{"type":"thinking","thinking":"b"}"#.into());
        let line = format!(
            r#"{{"type":"assistant","message":{{"model":"m","content":[{}]}}}}"#,
            blocks.join(",")
        );
        assert_eq!(
            one(&line),
            vec![
                EventBody::Text { text: "a".into() },
                raw_of("assistant/x", &line),
                EventBody::Thought { text: "b".into() },
            ]
        );
    }

    #[test]
    fn synthetic_model_without_error_is_mapped_normally() {
        let line = r#"{"type":"assistant","message":{"model":"<synthetic>","content":[{"type":"text","text":"No response requested."}]}}"#;
        assert_eq!(
            one(line),
            vec![EventBody::Text {
                text: "No response requested.".into()
            }]
        );
    }

    #[test]
    fn duplicate_keys_keep_the_last_value() {
        let line = r#"{"type":"assistant","message":{"model":"m","content":[{"type":"text","text":"first","text":"second"}]}}"#;
        assert_eq!(
            one(line),
            vec![EventBody::Text {
                text: "second".into()
            }]
        );
    }

    #[test]
    fn malformed_lines_become_errors_and_parsing_goes_on() {
        let mut parser = ClaudeParser::new(Path::new(WORKDIR));
        let truncated = r#"{"type":"result","subtype":"success","is_error":fal"#;
        assert_eq!(
            parser.parse_line(truncated),
            vec![EventBody::Error {
                message: format!("malformed claude output line: EOF while parsing a value at line 1 column 51; line starts: {truncated}"),
                source: claude(),
                fatal: false,
            }]
        );
        assert_eq!(
            parser.parse_line("not json"),
            vec![EventBody::Error {
                message: "malformed claude output line: expected ident at line 1 column 2; line starts: not json".into(),
                source: claude(),
                fatal: false,
            }]
        );
        assert_eq!(
            parser.parse_line("42"),
            vec![EventBody::Error {
                message: "malformed claude output line: expected a JSON object, found a number; line starts: 42".into(),
                source: claude(),
                fatal: false,
            }]
        );
        assert_eq!(parser.parse_line("   "), vec![]);
        assert_eq!(
            parser.parse_line(
                r#"{"type":"result","subtype":"success","is_error":false,"result":"ok"}"#
            ),
            vec![
                EventBody::Usage {
                    tokens: TokenUsage::default(),
                    cost_usd: None
                },
                EventBody::Status {
                    phase: Phase::TurnCompleted,
                    detail: None,
                }
            ]
        );
        assert_eq!(
            parser.summary(),
            StreamSummary {
                completed: true,
                failure: None,
                session: None
            }
        );
    }
}

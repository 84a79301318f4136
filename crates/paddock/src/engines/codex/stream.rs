//! The Codex CLI stream parser: turns `codex exec --json` JSONL (thread.started,
//! turn.*, item.* with their item types, top-level error) into normalized
//! [`EventBody`]s, following the mapping table in `docs/events.md`. Every line
//! goes through `serde_json::Value` (Codex's `web_search` item repeats its
//! `"id"` key, which a strict struct rejects); a malformed line becomes a
//! non-fatal `error` event, an event or item Paddock does not map becomes a
//! `raw` event, and parsing always goes on. Paths inside the workdir are
//! reported relative to it.

use crate::engines::jsonl::{self, u64_field, NO_TYPE};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

use paddock_protocol::{ChangeKind, EngineKind, EventBody, Phase, TokenUsage};
use serde_json::{Map, Value};

use crate::engines::{relative_to, StreamParser, StreamSummary};

const ENGINE: EngineKind = EngineKind::Codex;

/// Stateful parser for one `codex exec --json` run.
#[derive(Debug)]
pub struct CodexParser {
    workdir: PathBuf,
    /// Ids of command / MCP items whose `tool_call` was already emitted (at
    /// `item.started`), so `item.completed` does not repeat it.
    open_calls: HashSet<String>,
    summary: StreamSummary,
}

impl CodexParser {
    pub fn new(workdir: &Path) -> CodexParser {
        CodexParser {
            workdir: workdir.to_path_buf(),
            open_calls: HashSet::new(),
            summary: StreamSummary::default(),
        }
    }

    fn event(&mut self, obj: &Map<String, Value>, whole: &Value) -> Vec<EventBody> {
        let Some(event_type) = obj.get("type").and_then(Value::as_str) else {
            return vec![raw(NO_TYPE, whole)];
        };
        match event_type {
            "thread.started" => {
                let thread = str_field(obj, "thread_id");
                self.summary.session = thread.as_deref().and_then(crate::engines::session_id);
                vec![EventBody::Status {
                    phase: Phase::SessionStarted,
                    detail: thread,
                }]
            }
            "turn.started" => vec![EventBody::Status {
                phase: Phase::TurnStarted,
                detail: None,
            }],
            "turn.completed" => {
                self.summary.completed = true;
                let usage = obj.get("usage").and_then(Value::as_object);
                vec![
                    EventBody::Usage {
                        tokens: usage.map(codex_tokens).unwrap_or_default(),
                        cost_usd: None,
                    },
                    EventBody::Status {
                        phase: Phase::TurnCompleted,
                        detail: None,
                    },
                ]
            }
            "turn.failed" => {
                let message = obj
                    .get("error")
                    .and_then(|e| e.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or("the turn failed without a message")
                    .to_string();
                vec![self.fatal(message)]
            }
            // Codex writes both its critical errors and its retry notices
            // ("Reconnecting... 1/5") as top-level `error`; only `turn.failed`
            // says the turn is lost, so this one is not fatal.
            "error" => vec![EventBody::Error {
                message: str_field(obj, "message")
                    .unwrap_or_else(|| "codex reported an error without a message".to_string()),
                source: Some(ENGINE.as_str().to_string()),
                fatal: false,
            }],
            "item.started" => match obj.get("item").and_then(Value::as_object) {
                Some(item) => self.item_started(item, whole),
                None => vec![raw(event_type, whole)],
            },
            "item.completed" => match obj.get("item").and_then(Value::as_object) {
                Some(item) => self.item_completed(item, whole),
                None => vec![raw(event_type, whole)],
            },
            _ => vec![raw(&typed(event_type, obj.get("item")), whole)],
        }
    }

    fn item_started(&mut self, item: &Map<String, Value>, whole: &Value) -> Vec<EventBody> {
        let item_type = item.get("type").and_then(Value::as_str).unwrap_or("");
        match item_type {
            "command_execution" => self.open_call(item, command_call(item)),
            "mcp_tool_call" => self.open_call(item, mcp_call(item)),
            _ => vec![raw(&format!("item.started/{item_type}"), whole)],
        }
    }

    fn open_call(&mut self, item: &Map<String, Value>, call: EventBody) -> Vec<EventBody> {
        // Remembered within bounds (`engines::OPEN_CALLS_MAX`): the
        // stream is the job's.
        if let Some(id) = str_field(item, "id")
            .filter(|id| crate::engines::may_remember(self.open_calls.len(), id))
        {
            self.open_calls.insert(id);
        }
        vec![call]
    }

    /// The `tool_call` for a completed item unless `item.started` emitted it.
    fn close_call(&mut self, item: &Map<String, Value>, call: EventBody) -> Option<EventBody> {
        match item.get("id").and_then(Value::as_str) {
            Some(id) if self.open_calls.remove(id) => None,
            _ => Some(call),
        }
    }

    fn item_completed(&mut self, item: &Map<String, Value>, whole: &Value) -> Vec<EventBody> {
        let item_type = item.get("type").and_then(Value::as_str).unwrap_or("");
        match item_type {
            "agent_message" => match str_field(item, "text") {
                Some(text) => vec![EventBody::Text { text }],
                None => vec![raw("item.completed/agent_message", whole)],
            },
            "reasoning" => match str_field(item, "text") {
                Some(text) => vec![EventBody::Thought { text }],
                None => vec![raw("item.completed/reasoning", whole)],
            },
            "command_execution" => {
                let status = item.get("status").and_then(Value::as_str).unwrap_or("");
                let exit_code = item.get("exit_code").and_then(Value::as_i64);
                let result = EventBody::ToolResult {
                    call_id: str_field(item, "id"),
                    exit_code,
                    is_error: matches!(status, "failed" | "declined")
                        || exit_code.is_some_and(|c| c != 0),
                    output: str_field(item, "aggregated_output").unwrap_or_default(),
                };
                self.close_call(item, command_call(item))
                    .into_iter()
                    .chain([result])
                    .collect()
            }
            "mcp_tool_call" => {
                let error = item
                    .get("error")
                    .and_then(|e| e.get("message"))
                    .and_then(Value::as_str);
                let status = item.get("status").and_then(Value::as_str).unwrap_or("");
                let output = match error {
                    Some(message) => message.to_string(),
                    None => mcp_output(item.get("result")),
                };
                let result = EventBody::ToolResult {
                    call_id: str_field(item, "id"),
                    exit_code: None,
                    is_error: error.is_some() || status == "failed",
                    output,
                };
                self.close_call(item, mcp_call(item))
                    .into_iter()
                    .chain([result])
                    .collect()
            }
            "file_change" => self.file_changes(item, whole),
            "web_search" => {
                let mut input = Map::new();
                for key in ["query", "action"] {
                    if let Some(v) = item.get(key) {
                        input.insert(key.to_string(), v.clone());
                    }
                }
                vec![EventBody::ToolCall {
                    call_id: str_field(item, "id"),
                    tool: "web_search".to_string(),
                    command: None,
                    input: Value::Object(input),
                }]
            }
            // Warnings such as "Model metadata for `x` not found".
            "error" => vec![EventBody::Error {
                message: str_field(item, "message")
                    .unwrap_or_else(|| "codex reported an error item without a message".into()),
                source: Some(ENGINE.as_str().to_string()),
                fatal: false,
            }],
            _ => vec![raw(&format!("item.completed/{item_type}"), whole)],
        }
    }

    /// One `file_change` per change of an applied patch. A failed patch, or one
    /// whose changes Paddock cannot read, is kept whole as `raw`.
    fn file_changes(&self, item: &Map<String, Value>, whole: &Value) -> Vec<EventBody> {
        let kept = || vec![raw("item.completed/file_change", whole)];
        if item.get("status").and_then(Value::as_str) == Some("failed") {
            return kept();
        }
        let Some(changes) = item.get("changes").and_then(Value::as_array) else {
            return kept();
        };
        let parsed: Option<Vec<EventBody>> = changes
            .iter()
            .map(|change| {
                let path = change.get("path")?.as_str()?;
                let change = match change.get("kind")?.as_str()? {
                    "add" => ChangeKind::Add,
                    "update" => ChangeKind::Update,
                    "delete" => ChangeKind::Delete,
                    _ => return None,
                };
                Some(EventBody::FileChange {
                    path: relative_to(&self.workdir, path),
                    change,
                })
            })
            .collect();
        match parsed {
            Some(events) if !events.is_empty() => events,
            _ => kept(),
        }
    }

    fn fatal(&mut self, message: String) -> EventBody {
        jsonl::fatal(&mut self.summary, ENGINE, message)
    }
}

impl StreamParser for CodexParser {
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

/// `item.updated/todo_list` for item events, else the bare type.
fn typed(event_type: &str, item: Option<&Value>) -> String {
    match item.and_then(|i| i.get("type")).and_then(Value::as_str) {
        Some(item_type) => format!("{event_type}/{item_type}"),
        None => event_type.to_string(),
    }
}

fn str_field(obj: &Map<String, Value>, key: &str) -> Option<String> {
    obj.get(key).and_then(Value::as_str).map(str::to_string)
}

fn command_call(item: &Map<String, Value>) -> EventBody {
    EventBody::ToolCall {
        call_id: str_field(item, "id"),
        tool: "shell".to_string(),
        command: str_field(item, "command"),
        input: Value::Null,
    }
}

fn mcp_call(item: &Map<String, Value>) -> EventBody {
    let server = item.get("server").and_then(Value::as_str).unwrap_or("");
    let tool = item.get("tool").and_then(Value::as_str).unwrap_or("");
    EventBody::ToolCall {
        call_id: str_field(item, "id"),
        tool: format!("mcp:{server}/{tool}"),
        command: None,
        input: item.get("arguments").cloned().unwrap_or(Value::Null),
    }
}

/// The text parts of an MCP result's `content`, else its structured content
/// as JSON.
fn mcp_output(result: Option<&Value>) -> String {
    let Some(result) = result else {
        return String::new();
    };
    let texts: Vec<&str> = result
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    if !texts.is_empty() {
        return texts.join("\n");
    }
    match result.get("structured_content") {
        Some(Value::Null) | None => String::new(),
        Some(v) => v.to_string(),
    }
}

/// Codex's `input_tokens` includes cached and cache-write tokens; Paddock's
/// excludes both.
fn codex_tokens(usage: &Map<String, Value>) -> TokenUsage {
    let cached = u64_field(usage, "cached_input_tokens");
    let cache_write = u64_field(usage, "cache_write_input_tokens");
    TokenUsage {
        input_tokens: u64_field(usage, "input_tokens")
            .saturating_sub(cached)
            .saturating_sub(cache_write),
        cached_input_tokens: cached,
        cache_write_tokens: cache_write,
        output_tokens: u64_field(usage, "output_tokens"),
        reasoning_tokens: u64_field(usage, "reasoning_output_tokens"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const WORKDIR: &str = "/tmp/cap/work-codex";

    fn parse_all(text: &str) -> (Vec<EventBody>, StreamSummary) {
        let mut parser = CodexParser::new(Path::new(WORKDIR));
        let events = text.lines().flat_map(|l| parser.parse_line(l)).collect();
        (events, parser.summary())
    }

    fn one(line: &str) -> Vec<EventBody> {
        CodexParser::new(Path::new(WORKDIR)).parse_line(line)
    }

    /// Items started and never completed are remembered up to
    /// `OPEN_CALLS_MAX`, one whose id is past `CALL_ID_MAX` never: a
    /// hostile stream holds a bounded share of Paddock's memory. One not
    /// remembered still has its `tool_call` at its start, and again at its
    /// completion.
    #[test]
    fn items_waiting_for_their_completion_are_remembered_within_bounds() {
        let mut parser = CodexParser::new(Path::new(WORKDIR));
        let started = |id: &str| {
            serde_json::json!({"type": "item.started", "item": {"id": id,
                "type": "command_execution", "command": "ls", "aggregated_output": "",
                "exit_code": null, "status": "in_progress"}})
            .to_string()
        };
        let long_id = "i".repeat(300);
        parser.parse_line(&started(&long_id));
        for n in 0..5000 {
            parser.parse_line(&started(&format!("item_{n}")));
        }
        let completed = serde_json::json!({"type": "item.completed", "item": {"id": "item_4999",
            "type": "command_execution", "command": "ls", "aggregated_output": "",
            "exit_code": 0, "status": "completed"}})
        .to_string();
        let calls = parser
            .parse_line(&completed)
            .iter()
            .filter(|e| matches!(e, EventBody::ToolCall { .. }))
            .count();
        assert_eq!(
            (
                parser.open_calls.len(),
                parser.open_calls.contains(&long_id),
                parser.open_calls.contains("item_4095"),
                parser.open_calls.contains("item_4096"),
                calls,
            ),
            (crate::engines::OPEN_CALLS_MAX, false, true, false, 1)
        );
    }

    fn codex() -> Option<String> {
        Some("codex".to_string())
    }

    fn status(phase: Phase, detail: Option<&str>) -> EventBody {
        EventBody::Status {
            phase,
            detail: detail.map(str::to_string),
        }
    }

    fn raw_of(event_type: &str, line: &str) -> EventBody {
        EventBody::Raw {
            engine: "codex".into(),
            event_type: event_type.into(),
            data: serde_json::from_str(line).unwrap(),
        }
    }

    fn warning(message: &str) -> EventBody {
        EventBody::Error {
            message: message.into(),
            source: codex(),
            fatal: false,
        }
    }

    #[test]
    fn recorded_shell_and_patch_run() {
        let (events, summary) = parse_all(include_str!(
            "../../../tests/fixtures/streams/parser/codex-0.171.0-shell-and-patch.jsonl"
        ));
        let started = r#"{"type":"item.started","item":{"id":"item_3","type":"file_change","changes":[{"path":"/tmp/cap/work-codex/README.md","kind":"update"},{"path":"/tmp/cap/work-codex/hello.txt","kind":"add"}],"status":"in_progress"}}"#;
        assert_eq!(
            events,
            vec![
                status(
                    Phase::SessionStarted,
                    Some("01a22aa2-7bdc-7033-b915-985e2c91408f")
                ),
                status(Phase::TurnStarted, None),
                EventBody::Thought {
                    text: "**Checking the workspace**\n\nI will list files first.".into()
                },
                EventBody::ToolCall {
                    call_id: Some("item_1".into()),
                    tool: "shell".into(),
                    command: Some("/bin/bash -lc 'echo hello && ls'".into()),
                    input: Value::Null,
                },
                EventBody::ToolResult {
                    call_id: Some("item_1".into()),
                    exit_code: Some(0),
                    is_error: false,
                    output: "hello\nREADME.md\n".into(),
                },
                EventBody::ToolCall {
                    call_id: Some("item_2".into()),
                    tool: "shell".into(),
                    command: Some("/bin/bash -lc false".into()),
                    input: Value::Null,
                },
                EventBody::ToolResult {
                    call_id: Some("item_2".into()),
                    exit_code: Some(1),
                    is_error: true,
                    output: String::new(),
                },
                raw_of("item.started/file_change", started),
                EventBody::FileChange {
                    path: "README.md".into(),
                    change: ChangeKind::Update
                },
                EventBody::FileChange {
                    path: "hello.txt".into(),
                    change: ChangeKind::Add
                },
                EventBody::Text {
                    text: "Done: wrote hello.txt.".into()
                },
                EventBody::Usage {
                    tokens: TokenUsage {
                        input_tokens: 800,
                        cached_input_tokens: 4000,
                        cache_write_tokens: 0,
                        output_tokens: 200,
                        reasoning_tokens: 80,
                    },
                    cost_usd: None,
                },
                status(Phase::TurnCompleted, None),
            ]
        );
        assert_eq!(
            summary,
            StreamSummary {
                completed: true,
                failure: None,
                session: Some("01a22aa2-7bdc-7033-b915-985e2c91408f".into())
            }
        );
    }

    #[test]
    fn recorded_http_400_fails_the_turn() {
        let (events, summary) = parse_all(include_str!(
            "../../../tests/fixtures/streams/parser/codex-0.171.0-http-400.jsonl"
        ));
        let message = r#"{"error": {"message": "model not allowed by the job's allowlist", "type": "invalid_request_error", "code": "model_not_allowed"}}"#;
        assert_eq!(
            events,
            vec![
                status(
                    Phase::SessionStarted,
                    Some("01a22aa1-f36b-7ce3-85c9-42df957b769d")
                ),
                status(Phase::TurnStarted, None),
                warning(message),
                EventBody::Error {
                    message: message.into(),
                    source: codex(),
                    fatal: true
                },
            ]
        );
        assert_eq!(
            summary,
            StreamSummary {
                completed: false,
                failure: Some(message.into()),
                session: Some("01a22aa1-f36b-7ce3-85c9-42df957b769d".into())
            }
        );
    }

    #[test]
    fn recorded_dead_broker_only_warns() {
        let (events, summary) = parse_all(include_str!(
            "../../../tests/fixtures/streams/parser/codex-0.171.0-dead-broker.jsonl"
        ));
        let reconnect = warning(
            "Reconnecting... waiting for network (Connection failed: error sending request)",
        );
        let mut expected = vec![
            status(Phase::SessionStarted, Some("01a22a98-f52f-7461-bcb3-3e8bdcdcf60e")),
            warning("Model metadata for `mystery-model` not found. Defaulting to fallback metadata; this can degrade performance and cause issues."),
            status(Phase::TurnStarted, None),
        ];
        expected.extend(std::iter::repeat_n(reconnect, 13));
        assert_eq!(events, expected);
        assert_eq!(
            summary,
            StreamSummary {
                session: Some("01a22a98-f52f-7461-bcb3-3e8bdcdcf60e".into()),
                ..StreamSummary::default()
            }
        );
    }

    #[test]
    fn command_completed_without_start_emits_the_call_first() {
        let line = r#"{"type":"item.completed","item":{"id":"item_9","type":"command_execution","command":"bash -lc 'exit 2'","aggregated_output":"boom\n","exit_code":2,"status":"failed"}}"#;
        assert_eq!(
            one(line),
            vec![
                EventBody::ToolCall {
                    call_id: Some("item_9".into()),
                    tool: "shell".into(),
                    command: Some("bash -lc 'exit 2'".into()),
                    input: Value::Null,
                },
                EventBody::ToolResult {
                    call_id: Some("item_9".into()),
                    exit_code: Some(2),
                    is_error: true,
                    output: "boom\n".into(),
                },
            ]
        );
    }

    #[test]
    fn declined_command_is_an_error() {
        let mut parser = CodexParser::new(Path::new(WORKDIR));
        let start = r#"{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"true","aggregated_output":"","exit_code":null,"status":"in_progress"}}"#;
        let done = r#"{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"true","aggregated_output":"","exit_code":null,"status":"declined"}}"#;
        assert_eq!(parser.parse_line(start).len(), 1);
        assert_eq!(
            parser.parse_line(done),
            vec![EventBody::ToolResult {
                call_id: Some("item_1".into()),
                exit_code: None,
                is_error: true,
                output: String::new(),
            }]
        );
    }

    #[test]
    fn file_change_delete_and_outside_path() {
        let line = r#"{"type":"item.completed","item":{"id":"item_4","type":"file_change","changes":[{"path":"/tmp/cap/work-codex/src/old.rs","kind":"delete"},{"path":"/etc/hosts","kind":"update"},{"path":"rel.txt","kind":"add"}],"status":"completed"}}"#;
        assert_eq!(
            one(line),
            vec![
                EventBody::FileChange {
                    path: "src/old.rs".into(),
                    change: ChangeKind::Delete
                },
                EventBody::FileChange {
                    path: "/etc/hosts".into(),
                    change: ChangeKind::Update
                },
                EventBody::FileChange {
                    path: "rel.txt".into(),
                    change: ChangeKind::Add
                },
            ]
        );
    }

    #[test]
    fn failed_or_unreadable_file_change_is_kept_raw() {
        let failed = r#"{"type":"item.completed","item":{"id":"item_4","type":"file_change","changes":[{"path":"/tmp/cap/work-codex/a","kind":"update"}],"status":"failed"}}"#;
        let odd_kind = r#"{"type":"item.completed","item":{"id":"item_5","type":"file_change","changes":[{"path":"a","kind":"rename"}],"status":"completed"}}"#;
        assert_eq!(
            one(failed),
            vec![raw_of("item.completed/file_change", failed)]
        );
        assert_eq!(
            one(odd_kind),
            vec![raw_of("item.completed/file_change", odd_kind)]
        );
    }

    #[test]
    fn mcp_tool_call_success_and_failure() {
        let mut parser = CodexParser::new(Path::new(WORKDIR));
        let start = r#"{"type":"item.started","item":{"id":"item_2","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{"q":"serde"},"result":null,"error":null,"status":"in_progress"}}"#;
        let done = r#"{"type":"item.completed","item":{"id":"item_2","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{"q":"serde"},"result":{"content":[{"type":"text","text":"found 2"},{"type":"image","data":"AA=="},{"type":"text","text":"done"}],"structured_content":null},"error":null,"status":"completed"}}"#;
        let failed = r#"{"type":"item.completed","item":{"id":"item_3","type":"mcp_tool_call","server":"docs","tool":"fetch","arguments":{},"result":null,"error":{"message":"server crashed"},"status":"failed"}}"#;
        let structured = r#"{"type":"item.completed","item":{"id":"item_4","type":"mcp_tool_call","server":"db","tool":"count","arguments":null,"result":{"content":[],"structured_content":{"n":3}},"error":null,"status":"completed"}}"#;
        assert_eq!(
            parser.parse_line(start),
            vec![EventBody::ToolCall {
                call_id: Some("item_2".into()),
                tool: "mcp:docs/search".into(),
                command: None,
                input: json!({"q": "serde"}),
            }]
        );
        assert_eq!(
            parser.parse_line(done),
            vec![EventBody::ToolResult {
                call_id: Some("item_2".into()),
                exit_code: None,
                is_error: false,
                output: "found 2\ndone".into(),
            }]
        );
        assert_eq!(
            parser.parse_line(failed),
            vec![
                EventBody::ToolCall {
                    call_id: Some("item_3".into()),
                    tool: "mcp:docs/fetch".into(),
                    command: None,
                    input: json!({}),
                },
                EventBody::ToolResult {
                    call_id: Some("item_3".into()),
                    exit_code: None,
                    is_error: true,
                    output: "server crashed".into(),
                },
            ]
        );
        assert_eq!(
            parser.parse_line(structured),
            vec![
                EventBody::ToolCall {
                    call_id: Some("item_4".into()),
                    tool: "mcp:db/count".into(),
                    command: None,
                    input: Value::Null,
                },
                EventBody::ToolResult {
                    call_id: Some("item_4".into()),
                    exit_code: None,
                    is_error: false,
                    output: r#"{"n":3}"#.into(),
                },
            ]
        );
    }

    #[test]
    fn web_search_with_duplicate_id_key() {
        // Codex 0.171 writes the item's id and the search call's id both as "id".
        let line = r#"{"type":"item.completed","item":{"id":"item_5","type":"web_search","id":"ws_0a1b","query":"rust serde duplicate keys","action":{"type":"search","query":"rust serde duplicate keys"}}}"#;
        assert_eq!(
            one(line),
            vec![EventBody::ToolCall {
                call_id: Some("ws_0a1b".into()),
                tool: "web_search".into(),
                command: None,
                input: json!({
                    "query": "rust serde duplicate keys",
                    "action": {"type": "search", "query": "rust serde duplicate keys"}
                }),
            }]
        );
    }

    #[test]
    fn todo_list_updates_and_unknown_types_are_raw() {
        let lines = [
            (
                "item.started/todo_list",
                r#"{"type":"item.started","item":{"id":"item_1","type":"todo_list","items":[{"text":"read","completed":false}]}}"#,
            ),
            (
                "item.updated/todo_list",
                r#"{"type":"item.updated","item":{"id":"item_1","type":"todo_list","items":[{"text":"read","completed":true}]}}"#,
            ),
            (
                "item.completed/todo_list",
                r#"{"type":"item.completed","item":{"id":"item_1","type":"todo_list","items":[{"text":"read","completed":true}]}}"#,
            ),
            (
                "item.completed/collab_tool_call",
                r#"{"type":"item.completed","item":{"id":"item_7","type":"collab_tool_call","tool":"spawn_agent"}}"#,
            ),
            (
                "thread.resumed",
                r#"{"type":"thread.resumed","thread_id":"t"}"#,
            ),
            (NO_TYPE, r#"{"kind":"surprise"}"#),
            (
                "item.completed",
                r#"{"type":"item.completed","item":"not an object"}"#,
            ),
        ];
        for (event_type, line) in lines {
            assert_eq!(one(line), vec![raw_of(event_type, line)], "{line}");
        }
    }

    #[test]
    fn usage_input_excludes_cached_and_cache_write_saturating() {
        let line = r#"{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":90,"cache_write_input_tokens":30,"output_tokens":7,"reasoning_output_tokens":3}}"#;
        assert_eq!(
            one(line),
            vec![
                EventBody::Usage {
                    tokens: TokenUsage {
                        input_tokens: 0,
                        cached_input_tokens: 90,
                        cache_write_tokens: 30,
                        output_tokens: 7,
                        reasoning_tokens: 3,
                    },
                    cost_usd: None,
                },
                status(Phase::TurnCompleted, None),
            ]
        );
        // Older Codex versions omit the fields they do not know.
        let old = r#"{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":4,"output_tokens":2}}"#;
        assert_eq!(
            one(old)[0],
            EventBody::Usage {
                tokens: TokenUsage {
                    input_tokens: 6,
                    cached_input_tokens: 4,
                    cache_write_tokens: 0,
                    output_tokens: 2,
                    reasoning_tokens: 0,
                },
                cost_usd: None,
            }
        );
    }

    #[test]
    fn malformed_lines_become_errors_and_parsing_goes_on() {
        let mut parser = CodexParser::new(Path::new(WORKDIR));
        let truncated = r#"{"type":"item.completed","item":{"id":"item_1","type":"agent_mes"#;
        assert_eq!(
            parser.parse_line("Reading additional input from stdin..."),
            vec![EventBody::Error {
                message: "malformed codex output line: expected value at line 1 column 1; line starts: Reading additional input from stdin...".into(),
                source: codex(),
                fatal: false,
            }]
        );
        assert_eq!(
            parser.parse_line(truncated),
            vec![EventBody::Error {
                message: format!("malformed codex output line: EOF while parsing a string at line 1 column 64; line starts: {truncated}"),
                source: codex(),
                fatal: false,
            }]
        );
        assert_eq!(
            parser.parse_line(r#"["turn.started"]"#),
            vec![EventBody::Error {
                message: r#"malformed codex output line: expected a JSON object, found an array; line starts: ["turn.started"]"#.into(),
                source: codex(),
                fatal: false,
            }]
        );
        assert_eq!(parser.parse_line(""), vec![]);
        assert_eq!(parser.parse_line("  \t\r"), vec![]);
        assert_eq!(
            parser.parse_line(r#"{"type":"turn.started"}"#),
            vec![status(Phase::TurnStarted, None)]
        );
        assert_eq!(parser.summary(), StreamSummary::default());
    }

    #[test]
    fn long_malformed_line_is_cut_at_200_chars() {
        let line = format!("{{\"type\":\"é{}", "x".repeat(400));
        let events: [EventBody; 1] = one(&line).try_into().unwrap();
        let [EventBody::Error { message, .. }] = events else {
            panic!("expected one error");
        };
        let start = message.split("; line starts: ").nth(1).unwrap();
        assert_eq!(start.chars().count(), 200);
        assert!(line.starts_with(start));
    }

    #[test]
    fn first_fatal_error_is_the_failure() {
        let (events, summary) = parse_all(concat!(
            r#"{"type":"turn.failed","error":{"message":"first"}}"#,
            "\n",
            r#"{"type":"turn.failed","error":{}}"#,
        ));
        assert_eq!(
            events,
            vec![
                EventBody::Error {
                    message: "first".into(),
                    source: codex(),
                    fatal: true
                },
                EventBody::Error {
                    message: "the turn failed without a message".into(),
                    source: codex(),
                    fatal: true
                },
            ]
        );
        assert_eq!(summary.failure.as_deref(), Some("first"));
        assert!(!summary.completed);
    }
}

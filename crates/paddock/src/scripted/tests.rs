//! Whole-reply tests of the scripted upstream: a sample scenario rendered on
//! both wires, compared in full (insta snapshots in `snapshots/`), plus turn
//! selection from real request shapes, failures and exhaustion.

use std::path::PathBuf;

use serde_json::{json, Map, Value};

use super::*;

const SAMPLE: &str = r#"
description = "run a command, write a file, edit it, finish"

[[turn]]
reasoning = "The user wants a notes file. I will check the tree first."
text = "Let me look around and add the notes file."
usage = { input = 1200, cached = 800, cache_write = 100, output = 90, reasoning = 30 }

[[turn.action]]
type = "shell"
command = "ls -la"

[[turn.action]]
type = "write"
path = "notes/todo.txt"
content = "first line\nsecond line\n"

[[turn]]
text = "Now the edit."

[[turn.action]]
type = "edit"
path = "notes/todo.txt"
old = "second line\n"
new = "edited line\n"

[[turn.action]]
type = "read"
path = "notes/todo.txt"

[[turn]]
text = "Done: notes/todo.txt has two lines."
usage = { input = 50, output = 12 }

[[turn]]
error = { status = 400, message = "Your request was malformed." }

[[turn]]
reasoning = "Thinking."
text = "Partial answer that will"
stream_error = { message = "Upstream overloaded, try again.", type = "overloaded_error" }

[[turn]]
text = "Cut off"
disconnect = true
"#;

fn ctx() -> RenderContext {
    RenderContext {
        workdir: PathBuf::from("/job/work"),
    }
}

/// Re-serializes JSON with sorted keys, so that snapshots do not depend on
/// serde_json's `preserve_order` feature.
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for key in keys {
                out.insert(key.clone(), sorted(&map[key]));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// The reply as text for a snapshot: the status line, then each SSE chunk
/// (checked to be exactly one `event:`/`data:` frame) or the JSON body.
fn show(reply: &ScriptedReply) -> String {
    let mut out = format!(
        "status: {}\ncontent-type: {}\nabort_after: {}\n\n",
        reply.status, reply.content_type, reply.abort_after
    );
    for chunk in &reply.chunks {
        let text = std::str::from_utf8(chunk).unwrap();
        if reply.content_type == "text/event-stream" {
            let frame = text
                .strip_suffix("\n\n")
                .expect("frame ends with a blank line");
            let (event, data) = frame.split_once('\n').expect("event and data lines");
            let name = event.strip_prefix("event: ").expect("event line");
            let data: Value =
                serde_json::from_str(data.strip_prefix("data: ").expect("data line")).unwrap();
            assert_eq!(data["type"], name, "event name matches the data's type");
            out.push_str(&format!("event: {name}\ndata: {}\n\n", sorted(&data)));
        } else {
            let data: Value = serde_json::from_str(text).unwrap();
            out.push_str(&serde_json::to_string_pretty(&sorted(&data)).unwrap());
            out.push('\n');
        }
    }
    out
}

/// The body of each SSE event's data, for structural assertions.
fn events(reply: &ScriptedReply) -> Vec<Value> {
    reply
        .chunks
        .iter()
        .map(|chunk| {
            let text = std::str::from_utf8(chunk).unwrap();
            let data = text.split_once("\ndata: ").unwrap().1.trim_end();
            serde_json::from_str(data).unwrap()
        })
        .collect()
}

/// A Codex request at `answered` answers into the conversation, with the
/// tools codex-cli 0.171.0 offers gpt-5.5.
fn codex_request(answered: usize) -> Value {
    let mut input = vec![
        json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]}),
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "do it"}]}),
    ];
    for turn in 0..answered {
        input.push(json!({"type": "reasoning", "summary": []}));
        input.push(json!({"type": "function_call", "call_id": format!("c{turn}"), "name": "exec_command", "arguments": "{}"}));
        input.push(
            json!({"type": "function_call_output", "call_id": format!("c{turn}"), "output": "ok"}),
        );
    }
    json!({
        "model": "gpt-5.5",
        "stream": true,
        "input": input,
        "tools": [
            {"type": "function", "name": "exec_command"},
            {"type": "function", "name": "write_stdin"},
            {"type": "custom", "name": "apply_patch"},
            {"type": "web_search"}
        ],
    })
}

/// A Claude Code request at `answered` answers into the conversation.
fn claude_request(answered: usize, stream: bool) -> Value {
    let mut messages =
        vec![json!({"role": "user", "content": [{"type": "text", "text": "do it"}]})];
    for turn in 0..answered {
        messages.push(json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": format!("t{turn}"), "name": "Bash", "input": {"command": "ls"}}
        ]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("t{turn}"), "content": "ok"}
        ]}));
    }
    let mut request =
        json!({"model": "claude-sonnet-4-5", "max_tokens": 32000, "messages": messages});
    if stream {
        request["stream"] = json!(true);
    }
    request
}

fn respond(wire: Wire, request: &Value) -> ScriptedReply {
    scenario_for_test(SAMPLE).respond_at(wire, request, &ctx(), 1_700_000_000)
}

#[test]
fn responses_stream_with_actions() {
    insta::assert_snapshot!(show(&respond(Wire::Responses, &codex_request(0))));
}

#[test]
fn responses_stream_with_edit_and_read() {
    insta::assert_snapshot!(show(&respond(Wire::Responses, &codex_request(1))));
}

#[test]
fn responses_final_text() {
    let reply = respond(Wire::Responses, &codex_request(2));
    let last = events(&reply).pop().unwrap();
    assert_eq!(
        sorted(&last),
        sorted(&json!({
            "type": "response.completed",
            "sequence_number": 9,
            "response": {
                "id": "resp_paddock_3",
                "object": "response",
                "created_at": 1_700_000_000,
                "status": "completed",
                "error": null,
                "incomplete_details": null,
                "model": "gpt-5.5",
                "output": [{
                    "id": "msg_paddock_3_0",
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": "Done: notes/todo.txt has two lines."}],
                }],
                "usage": {
                    "input_tokens": 50,
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": 12,
                    "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": 62,
                },
            },
        }))
    );
}

#[test]
fn responses_non_streaming() {
    let mut request = codex_request(2);
    request["stream"] = json!(false);
    insta::assert_snapshot!(show(&respond(Wire::Responses, &request)));
}

#[test]
fn responses_failures() {
    let error = respond(Wire::Responses, &codex_request(3));
    assert_eq!(
        show(&error),
        "status: 400\ncontent-type: application/json\nabort_after: false\n\n{\n  \"error\": {\n    \"code\": null,\n    \"message\": \"Your request was malformed.\",\n    \"param\": null,\n    \"type\": \"invalid_request_error\"\n  }\n}\n"
    );
    insta::assert_snapshot!(
        "responses_stream_error",
        show(&respond(Wire::Responses, &codex_request(4)))
    );
    let cut = respond(Wire::Responses, &codex_request(5));
    assert!(cut.abort_after);
    assert_eq!(cut.status, 200);
    let types: Vec<Value> = events(&cut)
        .iter()
        .map(|event| event["type"].clone())
        .collect();
    assert_eq!(
        types,
        vec![
            json!("response.created"),
            json!("response.in_progress"),
            json!("response.output_item.added"),
            json!("response.content_part.added"),
            json!("response.output_text.delta"),
        ]
    );
}

#[test]
fn responses_exhausted() {
    let reply = respond(Wire::Responses, &codex_request(6));
    assert_eq!(reply.status, 500);
    let body: Value = serde_json::from_str(&reply.body_text()).unwrap();
    assert_eq!(
        body,
        json!({"error": {
            "message": "Paddock scripted upstream: scenario test.toml is exhausted: this request asks for turn 7 but the scenario has 6 turns",
            "type": "server_error",
            "param": null,
            "code": null,
        }})
    );
}

#[test]
fn messages_stream_with_actions() {
    insta::assert_snapshot!(show(&respond(Wire::Messages, &claude_request(0, true))));
}

#[test]
fn messages_stream_with_edit_and_read() {
    insta::assert_snapshot!(show(&respond(Wire::Messages, &claude_request(1, true))));
}

#[test]
fn messages_non_streaming() {
    insta::assert_snapshot!(show(&respond(Wire::Messages, &claude_request(0, false))));
}

#[test]
fn messages_final_text_usage() {
    let reply = respond(Wire::Messages, &claude_request(2, true));
    let events = events(&reply);
    assert_eq!(
        events[0]["message"]["usage"],
        json!({"input_tokens": 50, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1})
    );
    assert_eq!(
        events[events.len() - 2],
        json!({
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": null},
            "usage": {"input_tokens": 50, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 12},
        })
    );
    assert_eq!(events[events.len() - 1], json!({"type": "message_stop"}));
}

#[test]
fn messages_failures() {
    let error = respond(Wire::Messages, &claude_request(3, true));
    assert_eq!(
        show(&error),
        "status: 400\ncontent-type: application/json\nabort_after: false\n\n{\n  \"error\": {\n    \"message\": \"Your request was malformed.\",\n    \"type\": \"invalid_request_error\"\n  },\n  \"type\": \"error\"\n}\n"
    );
    insta::assert_snapshot!(
        "messages_stream_error",
        show(&respond(Wire::Messages, &claude_request(4, true)))
    );
    let cut = respond(Wire::Messages, &claude_request(5, true));
    assert!(cut.abort_after);
    let types: Vec<Value> = events(&cut)
        .iter()
        .map(|event| event["type"].clone())
        .collect();
    assert_eq!(
        types,
        vec![
            json!("message_start"),
            json!("ping"),
            json!("content_block_start"),
            json!("content_block_delta"),
        ]
    );
    // Without a stream, an in-stream failure becomes the HTTP error it
    // stands for, and a disconnect sends nothing.
    let error = respond(Wire::Messages, &claude_request(4, false));
    assert_eq!(error.status, 529);
    assert_eq!(
        serde_json::from_str::<Value>(&error.body_text()).unwrap(),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Upstream overloaded, try again."}})
    );
    let cut = respond(Wire::Messages, &claude_request(5, false));
    assert_eq!((cut.chunks.len(), cut.abort_after), (0, true));
}

#[test]
fn messages_exhausted() {
    let reply = respond(Wire::Messages, &claude_request(6, true));
    assert_eq!(reply.status, 500);
    assert_eq!(
        serde_json::from_str::<Value>(&reply.body_text()).unwrap(),
        json!({"type": "error", "error": {
            "type": "api_error",
            "message": "Paddock scripted upstream: scenario test.toml is exhausted: this request asks for turn 7 but the scenario has 6 turns",
        }})
    );
}

#[test]
fn retried_request_gets_the_same_reply() {
    let scenario = scenario_for_test(SAMPLE);
    for (wire, request) in [
        (Wire::Responses, codex_request(1)),
        (Wire::Messages, claude_request(1, true)),
    ] {
        let first = scenario.respond_at(wire, &request, &ctx(), 1);
        let again = scenario.respond_at(wire, &request, &ctx(), 1);
        assert_eq!(first, again);
        assert_eq!(scenario.turn_index(wire, &request), Some(1));
    }
}

#[test]
fn served_model_overrides_the_request() {
    let scenario = scenario_for_test(
        "served_model = \"scenario-model\"\n[[turn]]\ntext = \"a\"\n[[turn]]\ntext = \"b\"\nserved_model = \"turn-model\"\n",
    );
    let model = |answered: usize| {
        let reply =
            scenario.respond_at(Wire::Messages, &claude_request(answered, false), &ctx(), 0);
        serde_json::from_str::<Value>(&reply.body_text()).unwrap()["model"].clone()
    };
    assert_eq!(model(0), json!("scenario-model"));
    assert_eq!(model(1), json!("turn-model"));
    let echo = scenario_for_test("[[turn]]\ntext = \"a\"\n");
    let reply = echo.respond_at(Wire::Responses, &codex_request(0), &ctx(), 0);
    let last = events(&reply).pop().unwrap();
    assert_eq!(last["response"]["model"], json!("gpt-5.5"));
}

#[test]
fn title_request_uses_no_turn() {
    let scenario = scenario_for_test(SAMPLE);
    let request = json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 32000,
        "stream": true,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "<session>\ndo it\n</session>"}]}],
        "output_config": {"format": {"type": "json_schema", "schema": {
            "type": "object",
            "properties": {"title": {"type": "string"}},
            "required": ["title"],
            "additionalProperties": false
        }}}
    });
    assert_eq!(scenario.turn_index(Wire::Messages, &request), None);
    insta::assert_snapshot!(show(&scenario.respond_at(
        Wire::Messages,
        &request,
        &ctx(),
        0
    )));
}

/// Real request bodies (trimmed) recorded from the pinned CLIs running the
/// sample "shell, write, edit, read, finish" scenario: the third request of
/// each, and Claude Code's session-title request.
mod recorded {
    use super::*;

    fn fixture(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn codex_0_171_third_request() {
        let request = fixture(include_str!(
            "../../tests/fixtures/requests/codex-0.171.0/turn-3.json"
        ));
        let scenario = scenario_for_test(SAMPLE);
        assert_eq!(scenario.turn_index(Wire::Responses, &request), Some(2));
        // The tools this Codex offers gpt-5.5: `exec_command` and the
        // freeform `apply_patch`.
        let mut first = request.clone();
        first["input"] = json!([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "do it"}]}]);
        let reply = scenario.respond_at(Wire::Responses, &first, &ctx(), 0);
        let done: Vec<Value> = events(&reply)
            .into_iter()
            .filter(|event| event["type"] == "response.output_item.done")
            .map(|event| json!([event["item"]["type"], event["item"]["name"]]))
            .collect();
        assert_eq!(
            done,
            vec![
                json!(["reasoning", null]),
                json!(["message", null]),
                json!(["function_call", "exec_command"]),
                json!(["custom_tool_call", "apply_patch"]),
            ]
        );
    }

    #[test]
    fn claude_2_1_197_third_request() {
        let request = fixture(include_str!(
            "../../tests/fixtures/requests/claude-2.1.197/turn-3.json"
        ));
        assert_eq!(request["stream"], json!(true));
        let scenario = scenario_for_test(SAMPLE);
        assert_eq!(scenario.turn_index(Wire::Messages, &request), Some(2));
    }

    #[test]
    fn claude_2_1_197_title_request() {
        let request = fixture(include_str!(
            "../../tests/fixtures/requests/claude-2.1.197/title.json"
        ));
        let scenario = scenario_for_test(SAMPLE);
        assert_eq!(scenario.turn_index(Wire::Messages, &request), None);
        let reply = scenario.respond_at(Wire::Messages, &request, &ctx(), 0);
        let text: String = events(&reply)
            .iter()
            .filter_map(|event| event["delta"]["text"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(text, r#"{"title":"Scripted session"}"#);
    }
}

#[test]
fn example_scenarios_load() {
    let examples = [
        (
            "notes.toml",
            include_str!("../../../../examples/scenarios/notes.toml"),
            3,
        ),
        (
            "http-error.toml",
            include_str!("../../../../examples/scenarios/http-error.toml"),
            2,
        ),
        (
            "stream-error.toml",
            include_str!("../../../../examples/scenarios/stream-error.toml"),
            2,
        ),
        (
            "disconnect.toml",
            include_str!("../../../../examples/scenarios/disconnect.toml"),
            2,
        ),
    ];
    for (name, text, turns) in examples {
        let scenario = Scenario::from_toml(text, std::path::Path::new(name))
            .unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(scenario.turn_count(), turns, "{name}");
    }
}

/// A `call` action is the named tool with its arguments, the session id
/// filled in from the request, on both wires.
#[test]
fn raw_calls_with_the_session_id() {
    let scenario = scenario_for_test(
        r#"
[[turn]]
[[turn.action]]
type = "call"
name = "write_stdin"
arguments = { session_id = "{{session_id}}", chars = "ls\n" }
"#,
    );
    let mut request = codex_request(0);
    request["stream"] = json!(false);
    request["input"].as_array_mut().unwrap().push(json!({
        "type": "function_call_output", "call_id": "c", "output": "Process running with session ID 4242\n"
    }));
    let reply = scenario.respond_at(Wire::Responses, &request, &ctx(), 1_700_000_000);
    let body: Value = serde_json::from_slice(&reply.chunks.concat()).unwrap();
    let call = &body["output"][0];
    assert_eq!(
        (
            call["type"].clone(),
            call["name"].clone(),
            serde_json::from_str::<Value>(call["arguments"].as_str().unwrap()).unwrap()
        ),
        (
            json!("function_call"),
            json!("write_stdin"),
            json!({"session_id": 4242, "chars": "ls\n"})
        )
    );
    let reply = scenario.respond_at(
        Wire::Messages,
        &claude_request(0, false),
        &ctx(),
        1_700_000_000,
    );
    let body: Value = serde_json::from_slice(&reply.chunks.concat()).unwrap();
    let block = &body["content"][0];
    assert_eq!(
        (
            block["type"].clone(),
            block["name"].clone(),
            block["input"].clone()
        ),
        (
            json!("tool_use"),
            json!("write_stdin"),
            json!({"session_id": 0, "chars": "ls\n"})
        )
    );
}

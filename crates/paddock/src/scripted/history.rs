//! Turn selection: which scenario turn answers a request, read from the
//! request's own history rather than from a counter.
//!
//! Both engines resend the whole conversation with every request, so the
//! number of answers the model has already given is visible in the request:
//! for the Messages API it is the number of `assistant` messages; for the
//! Responses API it is the number of runs of consecutive model-produced items
//! in `input` (one response may produce several items: reasoning, a message,
//! tool calls; the tool outputs and user messages that follow separate it
//! from the next response). A retried request therefore gets the same turn,
//! and the scripted upstream keeps no state between requests.

use serde_json::Value;

use super::Wire;

/// The 0-based turn that answers `request`.
pub(crate) fn turn_index(wire: Wire, request: &Value) -> usize {
    match wire {
        // Chat, like Messages, resends `messages` with `assistant` entries.
        Wire::Messages | Wire::Chat => messages_answered(request),
        Wire::Responses => responses_answered(request),
    }
}

/// Messages: the number of `role: "assistant"` entries in `messages`.
fn messages_answered(request: &Value) -> usize {
    request
        .get("messages")
        .and_then(Value::as_array)
        .map_or(0, |messages| {
            messages
                .iter()
                .filter(|message| message.get("role").and_then(Value::as_str) == Some("assistant"))
                .count()
        })
}

/// Responses: the number of runs of consecutive model-produced items in
/// `input` (a plain-string `input` has none).
fn responses_answered(request: &Value) -> usize {
    let Some(items) = request.get("input").and_then(Value::as_array) else {
        return 0;
    };
    let mut runs = 0;
    let mut in_run = false;
    for item in items {
        let produced = is_model_produced(item);
        if produced && !in_run {
            runs += 1;
        }
        in_run = produced;
    }
    runs
}

/// Items only a model produces. Everything else (user and developer
/// messages, `*_output` items, unknown types) is input.
fn is_model_produced(item: &Value) -> bool {
    let role = item.get("role").and_then(Value::as_str);
    match item.get("type").and_then(Value::as_str) {
        // An "easy" input message has a role and no type.
        Some("message") | None => role == Some("assistant"),
        Some(
            "reasoning"
            | "function_call"
            | "custom_tool_call"
            | "local_shell_call"
            | "web_search_call"
            | "tool_search_call"
            | "image_generation_call"
            | "file_search_call"
            | "computer_call"
            | "mcp_call",
        ) => true,
        Some(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn messages_counts_assistant_messages() {
        assert_eq!(turn_index(Wire::Messages, &json!({})), 0);
        assert_eq!(
            turn_index(
                Wire::Messages,
                &json!({"messages": [{"role": "user", "content": "do it"}]})
            ),
            0
        );
        let request = json!({"messages": [
            {"role": "user", "content": "do it"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hm", "signature": "s"},
                {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
            ]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"}]},
            {"role": "system", "content": "a reminder"},
            {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
            {"role": "user", "content": "again"}
        ]});
        assert_eq!(turn_index(Wire::Messages, &request), 2);
    }

    #[test]
    fn responses_counts_runs_of_model_items() {
        assert_eq!(turn_index(Wire::Responses, &json!({"input": "hello"})), 0);
        let first = json!({"input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "do it"}]}
        ]});
        assert_eq!(turn_index(Wire::Responses, &first), 0);
        let third = json!({"input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "do it"}]},
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "hm"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "running"}]},
            {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"},
            {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "*** Begin Patch"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            {"type": "custom_tool_call_output", "call_id": "c2", "output": "ok"},
            {"type": "function_call", "call_id": "c3", "name": "exec_command", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c3", "output": "ok"},
            {"role": "user", "content": "easy message"}
        ]});
        assert_eq!(turn_index(Wire::Responses, &third), 2);
        let ends_with_model_items = json!({"input": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"type": "web_search_call", "status": "completed"},
            {"type": "local_shell_call", "call_id": "c", "action": {}}
        ]});
        assert_eq!(turn_index(Wire::Responses, &ends_with_model_items), 1);
    }
}

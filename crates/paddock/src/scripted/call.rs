//! Raw tool calls (`type = "call"` actions): a scenario names a tool the
//! engine offers and gives its arguments as a table, sent as they are, so
//! that tests can drive tools Paddock has no engine-neutral action for, such
//! as Codex's interactive `exec_command` (`tty = true`) and `write_stdin`.
//! A scenario keeps no state, yet `write_stdin` needs the session id Codex
//! chose at random: a string argument `"{{session_id}}"` becomes the last
//! "session ID N" found in the request's history (0 when there is none).

use serde_json::Value;

/// The placeholder for the last unified-exec session id of the conversation.
pub(crate) const SESSION_ID: &str = "{{session_id}}";

/// `arguments` with [`SESSION_ID`] filled in from `request`.
pub(crate) fn fill(arguments: &Value, request: &Value) -> Value {
    match arguments {
        Value::String(s) if s == SESSION_ID => Value::from(last_session_id(request)),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), fill(v, request)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| fill(v, request)).collect()),
        other => other.clone(),
    }
}

fn last_session_id(request: &Value) -> u64 {
    let text = request.to_string();
    const MARK: &str = "session ID ";
    text.rmatch_indices(MARK)
        .find_map(|(i, _)| {
            let digits: String = text[i + MARK.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().ok()
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fills_the_last_session_id() {
        let request = json!({"input": [
            {"type": "function_call_output", "output": "Process running with session ID 12\n"},
            {"type": "function_call_output", "output": "Chunk\nProcess running with session ID 26075\nOutput:"},
        ]});
        assert_eq!(
            fill(
                &json!({"session_id": "{{session_id}}", "chars": "ls\n", "n": ["{{session_id}}"]}),
                &request
            ),
            json!({"session_id": 26075, "chars": "ls\n", "n": [26075]})
        );
        assert_eq!(
            fill(&json!({"session_id": "{{session_id}}"}), &json!({})),
            json!({"session_id": 0})
        );
    }
}

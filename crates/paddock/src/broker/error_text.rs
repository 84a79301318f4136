//! The message of an upstream's error body, read by the meter and by
//! the event-stream decoder (which therefore do not import each other).

use serde_json::Value;

/// The message of an OpenAI or Anthropic error body.
pub fn error_message(v: &Value) -> String {
    if let Some(m) = v.pointer("/error/message").and_then(Value::as_str) {
        return m.to_string();
    }
    if let Some(m) = v.get("message").and_then(Value::as_str) {
        return m.to_string();
    }
    if let Some(m) = v.get("error").and_then(Value::as_str) {
        return m.to_string();
    }
    truncate(&v.to_string(), 500)
}

pub(super) fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max).collect();
        t.push('…');
        t
    }
}

//! A provider SDK's error on one line: its message and each cause's,
//! joined by `: `, a cause whose text is already in the line skipped
//! (`aws-config` errors often repeat their cause in their
//! own message). Used where the broker reports a credential failure.
//! And the message of an upstream's error body, read by the meter and by
//! the event-stream decoder (which therefore do not import each other).

use serde_json::Value;

/// `e` and its causes on one line, each said once.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}

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

//! What both stream parsers share: splitting an engine's stdout into JSON
//! objects (blank lines skipped, anything else that is not an object becomes
//! a non-fatal `error` event naming the engine and the line's start), `raw`
//! events for what is not normalized, and recording the first fatal error.

use paddock_protocol::{EngineKind, EventBody};
use serde_json::{Map, Value};

use super::StreamSummary;

/// The `type` of a `raw` event whose object has no string `type`.
pub const NO_TYPE: &str = "(no type)";

/// Parses one line and hands its object to `event`; a malformed line
/// becomes one `error` event, a blank line nothing.
pub fn parse_line(
    engine: EngineKind,
    line: &str,
    event: impl FnOnce(&Map<String, Value>, &Value) -> Vec<EventBody>,
) -> Vec<EventBody> {
    if line.trim().is_empty() {
        return Vec::new();
    }
    match serde_json::from_str::<Value>(line) {
        Ok(value) => match value.as_object() {
            Some(obj) => event(obj, &value),
            None => vec![malformed(
                engine,
                &format!("expected a JSON object, found {}", json_kind(&value)),
                line,
            )],
        },
        Err(err) => vec![malformed(engine, &err.to_string(), line)],
    }
}

/// An engine event kept verbatim.
pub fn raw(engine: EngineKind, event_type: &str, whole: &Value) -> EventBody {
    EventBody::Raw {
        engine: engine.as_str().to_string(),
        event_type: event_type.to_string(),
        data: whole.clone(),
    }
}

/// A fatal `error` event; the first one becomes the summary's failure.
pub fn fatal(summary: &mut StreamSummary, engine: EngineKind, message: String) -> EventBody {
    if summary.failure.is_none() {
        summary.failure = Some(message.clone());
    }
    EventBody::Error {
        message,
        source: Some(engine.as_str().to_string()),
        fatal: true,
    }
}

/// A numeric field, 0 when absent or not a non-negative integer.
pub fn u64_field(obj: &Map<String, Value>, key: &str) -> u64 {
    obj.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn malformed(engine: EngineKind, error: &str, line: &str) -> EventBody {
    let start: String = line.chars().take(200).collect();
    EventBody::Error {
        message: format!(
            "malformed {} output line: {error}; line starts: {start}",
            engine.as_str()
        ),
        source: Some(engine.as_str().to_string()),
        fatal: false,
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

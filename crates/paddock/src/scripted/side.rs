//! Requests that are not turns: an engine's own side requests, answered
//! without consuming or repeating a scenario turn.
//!
//! Claude Code 2.1.197, unless `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC` is
//! set, sends a session-title request next to the first turn: no tools, and
//! `output_config.format` = `{"type": "json_schema", "schema": …}` asking for
//! `{"title": …}`. Answered with a turn, it would replay (and meter) the first
//! turn twice; so any Messages request with a JSON-schema output format and no
//! tools is answered with a minimal JSON value that fits the schema, with zero
//! usage. Codex 0.171.0 sends no side requests (its `--output-schema` applies
//! to a real turn, whose text the scenario author writes).

use serde_json::{json, Map, Value};

use super::scenario::{Ending, Turn, Usage};
use super::Wire;

/// The synthetic turn that answers `request`, if it is a side request.
pub(crate) fn side_turn(wire: Wire, request: &Value) -> Option<Turn> {
    match wire {
        Wire::Responses | Wire::Chat => None,
        Wire::Messages => {
            let format = request.get("output_config")?.get("format")?;
            if format.get("type").and_then(Value::as_str) != Some("json_schema") {
                return None;
            }
            let has_tools = request
                .get("tools")
                .and_then(Value::as_array)
                .is_some_and(|tools| !tools.is_empty());
            if has_tools {
                return None;
            }
            let schema = format.get("schema").unwrap_or(&Value::Null);
            Some(Turn {
                reasoning: None,
                text: Some(example(schema, 0).to_string()),
                actions: Vec::new(),
                usage: Usage::default(),
                ending: Ending::Complete,
                served_model: None,
                transient: None,
            })
        }
    }
}

/// A small value that satisfies a (simple) JSON schema: required properties
/// of objects, the first of an `enum`, `const`, placeholder scalars.
fn example(schema: &Value, depth: usize) -> Value {
    if depth > 16 {
        return Value::Null;
    }
    if let Some(value) = schema.get("const") {
        return value.clone();
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|values| values.first())
    {
        return first.clone();
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(first) = schema
            .get(key)
            .and_then(Value::as_array)
            .and_then(|schemas| schemas.first())
        {
            return example(first, depth + 1);
        }
    }
    let kind = match schema.get("type") {
        Some(Value::String(kind)) => kind.as_str(),
        Some(Value::Array(kinds)) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|kind| *kind != "null")
            .unwrap_or("null"),
        _ if schema.get("properties").is_some() => "object",
        _ => "null",
    };
    match kind {
        "object" => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|names| names.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut object = Map::new();
            if let Some(properties) = properties {
                for (name, property) in properties {
                    if required.is_empty() || required.contains(&name.as_str()) {
                        object.insert(name.clone(), example(property, depth + 1));
                    }
                }
            }
            Value::Object(object)
        }
        "array" => json!([]),
        "string" => json!("Scripted session"),
        "integer" | "number" => json!(0),
        "boolean" => json!(false),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_claude_code_title_request() {
        let request = json!({
            "model": "claude-sonnet-4-5",
            "stream": true,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "<session>…</session>"}]}],
            "output_config": {"format": {"type": "json_schema", "schema": {
                "type": "object",
                "properties": {"title": {"type": "string"}},
                "required": ["title"],
                "additionalProperties": false
            }}},
            "tools": []
        });
        let turn = side_turn(Wire::Messages, &request).unwrap();
        assert_eq!(
            turn.text.as_deref(),
            Some(r#"{"title":"Scripted session"}"#)
        );
        assert_eq!(turn.usage, Usage::default());
        assert!(side_turn(Wire::Responses, &request).is_none());
    }

    #[test]
    fn a_turn_is_not_a_side_request() {
        let with_tools = json!({
            "output_config": {"format": {"type": "json_schema", "schema": {}}},
            "tools": [{"name": "Bash"}]
        });
        assert!(side_turn(Wire::Messages, &with_tools).is_none());
        assert!(side_turn(Wire::Messages, &json!({"messages": []})).is_none());
    }

    #[test]
    fn examples_fit_schemas() {
        let schema = json!({
            "type": "object",
            "properties": {
                "kind": {"enum": ["a", "b"]},
                "count": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "nested": {"type": ["object", "null"], "properties": {"ok": {"type": "boolean"}}},
                "fixed": {"const": 7},
                "either": {"anyOf": [{"type": "number"}, {"type": "string"}]}
            }
        });
        assert_eq!(
            example(&schema, 0),
            json!({"kind": "a", "count": 0, "tags": [], "nested": {"ok": false}, "fixed": 7, "either": 0})
        );
    }
}

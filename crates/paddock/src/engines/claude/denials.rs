//! The denials one line of Claude Code's stream-json reports: a tool
//! result carrying Claude's own denial text "Permission to use … has been
//! denied." (as it happens: its `permissions.deny` rules, which Paddock
//! sets from the profile, deny without the hook), and the `result` event's
//! `permission_denials` (all of them, the hook's too, at the end). Records
//! share the tool-use id with the hook's, so `policy` counts a call once.
//!
//! Paddock gives the profile's rules to Claude Code for Bash only (the
//! hook and `Bash(RULE:*)` deny rules) and runs it with
//! `--permission-mode acceptEdits --allowedTools Bash`: a denied Bash call
//! is the profile's, a denied call of any other tool (WebFetch, WebSearch,
//! an MCP tool…) is Claude Code's own permission mode refusing it, a
//! `policy` event with or without a profile.

use serde_json::Value;

use crate::engines::denial::{DeniedBy, EngineDenial};

/// The rule of a Bash denial made by Claude Code's permission rules whose
/// command the profile's matcher does not see (Paddock sets only
/// `Bash(RULE:*)` rules, so this is a `deny_commands` denial all the same).
pub const PERMISSION_RULE: &str = "deny_commands";

/// The denials of one line (none for anything but those two forms).
pub fn in_line(line: &str) -> Vec<EngineDenial> {
    let Ok(v) = serde_json::from_str::<Value>(line) else {
        return Vec::new();
    };
    let record = |tool: &str, command: String, id: Option<&str>| {
        EngineDenial {
        by: match tool {
            "Bash" => DeniedBy::Profile {
                rule: Some(PERMISSION_RULE.to_string()),
            },
            other => DeniedBy::Engine {
                reason: format!(
                    "its permission mode does not allow the {other} tool (Paddock allows edits and Bash)"
                ),
            },
        },
        command: if tool == "Bash" {
            command
        } else {
            format!("{tool} {command}")
        },
        call_id: id.map(str::to_string),
    }
    };
    match v.get("type").and_then(Value::as_str) {
        Some("result") => v
            .get("permission_denials")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|d| {
                let tool = d.get("tool_name").and_then(Value::as_str).unwrap_or("");
                let input = d.get("tool_input").unwrap_or(&Value::Null);
                let command = match input.get("command").and_then(Value::as_str) {
                    Some(c) => c.to_string(),
                    None => input.to_string(),
                };
                record(tool, command, d.get("tool_use_id").and_then(Value::as_str))
            })
            .collect(),
        Some("user") => v
            .pointer("/message/content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
            .filter(|b| b.get("is_error").and_then(Value::as_bool) == Some(true))
            .filter_map(|b| {
                let text = match b.get("content") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Array(parts)) => parts
                        .iter()
                        .filter_map(|p| p.get("text").and_then(Value::as_str))
                        .collect::<Vec<_>>()
                        .join(""),
                    _ => return None,
                };
                let (tool, command) = denial_text(&text)?;
                Some(record(
                    &tool,
                    command,
                    b.get("tool_use_id").and_then(Value::as_str),
                ))
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Claude Code's own denial: "Permission to use TOOL with command COMMAND
/// has been denied." (or without "with command").
fn denial_text(text: &str) -> Option<(String, String)> {
    let rest = text.strip_prefix("Permission to use ")?;
    let rest = rest.strip_suffix(" has been denied.")?;
    Some(match rest.split_once(" with command ") {
        Some((tool, command)) => (tool.to_string(), command.to_string()),
        None => (rest.to_string(), String::new()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::denial::ReportedIn;

    #[test]
    fn denials_from_tool_results_and_the_result_event() {
        let denied = r#"{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_2","type":"tool_result","content":"Permission to use Bash with command ls && curl x has been denied.","is_error":true}]},"tool_use_result":"Error: Permission to use Bash with command ls && curl x has been denied."}"#;
        let rec = |rule: &str, cmd: &str, id: &str| EngineDenial {
            command: cmd.into(),
            call_id: Some(id.into()),
            by: DeniedBy::Profile {
                rule: Some(rule.into()),
            },
        };
        assert_eq!(
            in_line(denied),
            vec![rec("deny_commands", "ls && curl x", "toolu_2")]
        );
        // A failed command is no denial; nor is the hook's reason (the
        // hook recorded it already).
        let failed = r#"{"type":"user","message":{"content":[{"tool_use_id":"toolu_3","type":"tool_result","content":"Exit code 1","is_error":true}]}}"#;
        let hooked = r#"{"type":"user","message":{"content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"paddock policy: host profile `p` denies `curl` on this host","is_error":true}]}}"#;
        assert_eq!(in_line(failed), vec![]);
        assert_eq!(in_line(hooked), vec![]);
        let result = r#"{"type":"result","subtype":"success","permission_denials":[{"tool_name":"Bash","tool_use_id":"toolu_1","tool_input":{"command":"curl x","description":"d"}},{"tool_name":"Bash","tool_use_id":"toolu_4","tool_input":{"command":"c=curl; $c x"}},{"tool_name":"WebFetch","tool_use_id":"toolu_5","tool_input":{"url":"http://x"}}]}"#;
        assert_eq!(
            in_line(result),
            vec![
                rec("deny_commands", "curl x", "toolu_1"),
                rec("deny_commands", "c=curl; $c x", "toolu_4"),
                EngineDenial {
                    command: "WebFetch {\"url\":\"http://x\"}".into(),
                    call_id: Some("toolu_5".into()),
                    by: DeniedBy::Engine {
                        reason: "its permission mode does not allow the WebFetch tool (Paddock allows edits and Bash)".into()
                    },
                },
            ]
        );
        // Claude Code's own refusal is a policy event of its own, with or
        // without a profile; the profile's are not (policy reports them).
        let found = in_line(result);
        assert_eq!(
            found[0].refusal_event(paddock_protocol::EngineKind::Claude, ReportedIn::Output),
            None
        );
        assert_eq!(
            found[2].refusal_event(paddock_protocol::EngineKind::Claude, ReportedIn::Output),
            Some(paddock_protocol::EventBody::Policy {
                rule: "claude".into(),
                message: "the engine's output, which the job could write, reports: claude refused `WebFetch {\"url\":\"http://x\"}` on its own: its permission mode does not allow the WebFetch tool (Paddock allows edits and Bash)".into(),
            })
        );
        assert_eq!(in_line("not json"), vec![]);
    }
}

//! `paddock hook pre-tool-use`: Claude Code's PreToolUse hook calls back
//! into Paddock with the tool call as JSON on stdin; a Bash command that runs
//! a denied command is answered with a `deny` decision and its reason (and
//! recorded, so the runner can emit a `policy` event). Input that cannot be
//! read is denied too: the hook fails closed.

use paddock_protocol::HostProfile;
use serde_json::{json, Value};

use super::matcher::{Denial, Matcher, UNPARSEABLE};
use crate::engines::denial::{reason, JUSTIFICATION_MARK};

#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("paddock hook: the hook input is not JSON: {0}")]
    Input(serde_json::Error),
    #[error("paddock hook: the Bash call carries no `tool_input.command`")]
    NoCommand,
}

/// What the hook answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Not ours to judge: Claude Code goes on as usual.
    Pass,
    Deny {
        rule: String,
        command: String,
        tool_use_id: Option<String>,
        reason: String,
    },
}

/// The reason given for one denial by the matcher: the rule's
/// [`reason`], or why a command line that cannot be parsed is refused.
pub fn denial_reason(profile_id: &str, denial: &Denial) -> String {
    if denial.rule == UNPARSEABLE {
        format!(
            "{JUSTIFICATION_MARK} host profile `{profile_id}` denies commands on this host and refuses a command line it cannot judge ({}); write it as plain shell",
            denial.matched
        )
    } else {
        reason(profile_id, &denial.rule)
    }
}

/// Judges one PreToolUse input.
pub fn pre_tool_use(input: &str, profile: &HostProfile) -> Result<Decision, HookError> {
    let v: Value = serde_json::from_str(input).map_err(HookError::Input)?;
    if v.get("tool_name").and_then(Value::as_str) != Some("Bash") {
        return Ok(Decision::Pass);
    }
    let command = v
        .pointer("/tool_input/command")
        .and_then(Value::as_str)
        .ok_or(HookError::NoCommand)?;
    let matcher = Matcher::new(&profile.deny_commands);
    Ok(match matcher.check(command) {
        None => Decision::Pass,
        Some(d) => Decision::Deny {
            reason: denial_reason(&profile.id, &d),
            rule: d.rule,
            command: command.to_string(),
            tool_use_id: v
                .get("tool_use_id")
                .and_then(Value::as_str)
                .map(str::to_string),
        },
    })
}

/// The hook's stdout for a denial.
pub fn deny_answer(reason: &str) -> String {
    json!({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    fn profile() -> HostProfile {
        HostProfile::from_json(r#"{"id":"box","deny_commands":["touch denied"]}"#, "t").unwrap()
    }

    #[test]
    fn denies_a_wrapped_command() {
        let input = r#"{"session_id":"s","tool_name":"Bash","tool_use_id":"toolu_1","tool_input":{"command":"env A=1 bash -lc 'true && touch denied'","description":"x"}}"#;
        assert_eq!(
            pre_tool_use(input, &profile()).unwrap(),
            Decision::Deny {
                rule: "touch denied".into(),
                command: "env A=1 bash -lc 'true && touch denied'".into(),
                tool_use_id: Some("toolu_1".into()),
                reason: "paddock policy: host profile `box` denies `touch denied` on this host"
                    .into(),
            }
        );
    }

    #[test]
    fn denies_a_command_line_it_cannot_parse() {
        let input =
            r#"{"tool_name":"Bash","tool_use_id":"toolu_2","tool_input":{"command":"echo 'open"}}"#;
        let Decision::Deny { rule, reason, .. } = pre_tool_use(input, &profile()).unwrap() else {
            panic!("not denied");
        };
        assert_eq!(rule, "deny_commands");
        assert!(
            reason.starts_with("paddock policy: host profile `box` denies commands on this host and refuses a command line it cannot judge (not a shell command line the parser accepts"),
            "{reason}"
        );
    }

    #[test]
    fn passes_other_tools_and_allowed_commands() {
        let write =
            r#"{"tool_name":"Write","tool_input":{"file_path":"/x","content":"touch denied"}}"#;
        assert_eq!(pre_tool_use(write, &profile()).unwrap(), Decision::Pass);
        let ls = r#"{"tool_name":"Bash","tool_input":{"command":"ls"}}"#;
        assert_eq!(pre_tool_use(ls, &profile()).unwrap(), Decision::Pass);
    }

    #[test]
    fn unreadable_input_is_an_error() {
        assert!(matches!(
            pre_tool_use("{", &profile()),
            Err(HookError::Input(_))
        ));
        assert!(matches!(
            pre_tool_use(r#"{"tool_name":"Bash","tool_input":{}}"#, &profile()),
            Err(HookError::NoCommand)
        ));
    }

    #[test]
    fn answer_format() {
        assert_eq!(
            deny_answer("no"),
            r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no"}}"#
        );
    }
}

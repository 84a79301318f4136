//! Claude Code's `--settings` file for the host profile's
//! `deny_commands`: a PreToolUse hook on Bash that calls back into
//! `paddock hook pre-tool-use` (the full matcher) plus `permissions.deny`
//! prefix rules `Bash(RULE:*)`.

use serde_json::json;

/// The settings: the hook (a shell command line) and the deny rules.
pub fn claude_settings(deny_commands: &[String], hook_command: &str) -> String {
    let deny: Vec<String> = deny_commands
        .iter()
        .map(|r| format!("Bash({r}:*)"))
        .collect();
    let settings = json!({
        "hooks": {
            "PreToolUse": [{
                "matcher": "Bash",
                "hooks": [{ "type": "command", "command": hook_command, "timeout": 30 }]
            }]
        },
        "permissions": { "deny": deny }
    });
    serde_json::to_string_pretty(&settings).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn claude_settings_json() {
        let v: serde_json::Value = serde_json::from_str(&claude_settings(
            &["cargo build --release".into(), "touch \"a b\"".into()],
            "/bin/paddock hook",
        ))
        .unwrap();
        assert_eq!(
            v,
            json!({
                "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
                    {"type": "command", "command": "/bin/paddock hook", "timeout": 30}]}]},
                "permissions": {"deny": ["Bash(cargo build --release:*)", "Bash(touch \"a b\":*)"]}
            })
        );
    }
}

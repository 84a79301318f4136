//! Layer 2: the engines' own enforcement of `deny_commands`, as the files
//! they read. Claude Code: a `--settings` file with a PreToolUse hook on Bash
//! that calls back into `paddock hook pre-tool-use` (the full matcher) plus
//! `permissions.deny` prefix rules. Codex: `$CODEX_HOME/rules/default.rules`
//! with one `prefix_rule(..., decision="forbidden")` per denied command,
//! whose justification starts with [`JUSTIFICATION_MARK`] so that the denial
//! can be found in Codex's rollout file afterwards.

use serde_json::json;

use super::matcher::Matcher;

/// Starts the justification of every Paddock rule (and every hook reason).
pub const JUSTIFICATION_MARK: &str = "paddock policy:";

/// The reason given to the engine (and the agent) for a denial.
pub fn reason(profile_id: &str, rule: &str) -> String {
    format!("{JUSTIFICATION_MARK} host profile `{profile_id}` denies `{rule}` on this host")
}

/// The reason given for one denial by the matcher: the rule's
/// [`reason`], or why a command line that cannot be parsed is refused.
pub fn denial_reason(profile_id: &str, denial: &super::matcher::Denial) -> String {
    if denial.rule == super::matcher::UNPARSEABLE {
        format!(
            "{JUSTIFICATION_MARK} host profile `{profile_id}` denies commands on this host and refuses a command line it cannot judge ({}); write it as plain shell",
            denial.matched
        )
    } else {
        reason(profile_id, &denial.rule)
    }
}

/// Claude Code's settings: the hook (a shell command line) and deny rules.
pub fn claude_settings(matcher: &Matcher, hook_command: &str) -> String {
    let deny: Vec<String> = matcher
        .rules()
        .iter()
        .map(|r| format!("Bash({}:*)", r.text))
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

/// Codex's execpolicy rules (Starlark; strings in JSON syntax are valid
/// Starlark strings).
pub fn codex_rules(profile_id: &str, matcher: &Matcher) -> String {
    let mut out = String::from("# Written by Paddock for one job from its host profile.\n");
    for rule in matcher.rules() {
        let words = shlex::split(&rule.text).unwrap_or_default();
        let pattern: Vec<String> = words
            .iter()
            .map(|w| serde_json::to_string(w).unwrap_or_default())
            .collect();
        let justification =
            serde_json::to_string(&reason(profile_id, &rule.text)).unwrap_or_default();
        out.push_str(&format!(
            "prefix_rule(pattern=[{}], decision=\"forbidden\", justification={justification})\n",
            pattern.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn matcher() -> Matcher {
        Matcher::new(&["cargo build --release".into(), "touch \"a b\"".into()])
    }

    #[test]
    fn codex_rules_text() {
        assert_eq!(
            codex_rules("box", &matcher()),
            "# Written by Paddock for one job from its host profile.\n\
prefix_rule(pattern=[\"cargo\", \"build\", \"--release\"], decision=\"forbidden\", justification=\"paddock policy: host profile `box` denies `cargo build --release` on this host\")\n\
prefix_rule(pattern=[\"touch\", \"a b\"], decision=\"forbidden\", justification=\"paddock policy: host profile `box` denies `touch \\\"a b\\\"` on this host\")\n"
        );
    }

    #[test]
    fn claude_settings_json() {
        let v: serde_json::Value =
            serde_json::from_str(&claude_settings(&matcher(), "/bin/paddock hook")).unwrap();
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

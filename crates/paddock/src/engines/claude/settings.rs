//! Claude Code's `--settings` file for the host profile's
//! `deny_commands`: a PreToolUse hook on Bash that calls back into
//! `paddock hook pre-tool-use` (the full matcher) plus `permissions.deny`
//! prefix rules `Bash(RULE:*)`.
//!
//! Claude Code also reads settings the job writes: the repository's
//! `.claude/settings.json` and `.claude/settings.local.json` (committed, or
//! left by a setup command or an earlier attempt on the job's branch) and
//! `$CLAUDE_CONFIG_DIR/settings.json` in the job's home. It merges them
//! below this file (`--settings` outranks all three, key by key), and two
//! of their keys would switch the hook off: `disableAllHooks`, and an
//! `env` entry turning on its bare mode (`CLAUDE_CODE_SIMPLE`), which
//! skips every settings hook (its safe mode, `CLAUDE_CODE_SAFE_MODE`,
//! keeps only managed hooks); Claude Code 2.1.197 then ran
//! `bash -lc 'RULE'` with no hook asked and no denial reported. So this
//! file sets each of them itself ([`PINNED_ENV`]): hooks
//! and deny rules from the other files only add to Paddock's (a deny wins
//! over any allow, a hook's deny over another's allow), so nothing else
//! there takes Paddock's away.

use serde_json::json;

/// The variables Claude Code reads from its settings' `env` that would
/// skip the settings' hooks (bare mode, safe mode), each set off here so
/// that a value from a settings file the job writes is outranked.
const PINNED_ENV: [(&str, &str); 2] = [("CLAUDE_CODE_SIMPLE", "0"), ("CLAUDE_CODE_SAFE_MODE", "0")];

/// The settings: the hook (a shell command line) and the deny rules, with
/// what would turn the hook off pinned (see the module's text).
pub fn claude_settings(deny_commands: &[String], hook_command: &str) -> String {
    let deny: Vec<String> = deny_commands
        .iter()
        .map(|r| format!("Bash({r}:*)"))
        .collect();
    let env: serde_json::Map<String, serde_json::Value> = PINNED_ENV
        .iter()
        .map(|(name, value)| ((*name).to_string(), json!(value)))
        .collect();
    let settings = json!({
        "disableAllHooks": false,
        "env": env,
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
                "disableAllHooks": false,
                "env": {"CLAUDE_CODE_SIMPLE": "0", "CLAUDE_CODE_SAFE_MODE": "0"},
                "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
                    {"type": "command", "command": "/bin/paddock hook", "timeout": 30}]}]},
                "permissions": {"deny": ["Bash(cargo build --release:*)", "Bash(touch \"a b\":*)"]}
            })
        );
    }
}

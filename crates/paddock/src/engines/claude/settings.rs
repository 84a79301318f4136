//! Claude Code's `--settings` file for the host profile's
//! `deny_commands`: a PreToolUse hook on Bash that calls back into
//! `paddock hook pre-tool-use` (the full matcher) plus `permissions.deny`
//! prefix rules `Bash(RULE:*)`.
//!
//! Claude Code also reads settings the job writes: the repository's
//! `.claude/settings.json` and `.claude/settings.local.json` (committed, or
//! left by a setup command or an earlier attempt on the job's branch) and
//! `$CLAUDE_CONFIG_DIR/settings.json` in the job's home. It merges them
//! below this file (`--settings` outranks all three, key by key); their
//! hooks and deny rules only add to Paddock's (a deny wins over any allow,
//! a hook's deny over another's allow), but some of their keys took
//! Paddock's hook away, and with it every denial only the hook makes
//! (`bash -lc 'RULE'`), with no denial reported (Claude Code 2.1.197):
//!
//! - `disableAllHooks`;
//! - their `env`, which Claude Code puts in its own environment, so in the
//!   hook's: `CLAUDE_CODE_SIMPLE` (bare mode, which skips every settings
//!   hook; its safe mode, `CLAUDE_CODE_SAFE_MODE`, keeps only managed
//!   ones), `CLAUDE_CODE_SHELL_PREFIX` (a program of the job's that every
//!   hook command line is handed to, which can answer for the hook), and
//!   the dynamic loader's `LD_PRELOAD`, `LD_LIBRARY_PATH` and `LD_AUDIT`
//!   (a library of the job's loaded into the shell that runs the hook,
//!   which can end it with exit 0).
//!
//! So this file sets each of them itself ([`PINNED_ENV`]), which no file
//! the job writes outranks. The rest of their `env` still reaches the
//! hook, which Claude Code runs with `/bin/sh -c`: its command line names
//! Paddock's binary by its absolute path (no `PATH` search) and ends in
//! `|| exit 2`, so an environment that makes Paddock fail blocks the call.
//!
//! The hook's `timeout` (seconds) is longer than the engine may run
//! ([`hook_timeout_secs`](crate::engines::hook_timeout_secs)): Claude Code
//! reads a hook it stopped at its timeout as "go on", and the hook runs
//! beside the job's processes, which can slow it.

use serde_json::json;

use crate::engines::EnginePolicy;

/// The variables of a settings file's `env` that would skip the hook or
/// run it otherwise (see the module's text), each set off or empty here so
/// that a value from a settings file the job writes is outranked.
const PINNED_ENV: [(&str, &str); 6] = [
    ("CLAUDE_CODE_SIMPLE", "0"),
    ("CLAUDE_CODE_SAFE_MODE", "0"),
    ("CLAUDE_CODE_SHELL_PREFIX", ""),
    ("LD_PRELOAD", ""),
    ("LD_LIBRARY_PATH", ""),
    ("LD_AUDIT", ""),
];

/// The settings: the hook (a shell command line, with its timeout) and the
/// deny rules, with what would turn the hook off pinned (see the module's
/// text).
pub fn claude_settings(policy: &EnginePolicy) -> String {
    let deny: Vec<String> = policy
        .deny_commands
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
                "hooks": [{
                    "type": "command",
                    "command": policy.hook_command,
                    "timeout": policy.hook_timeout_secs
                }]
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
        let v: serde_json::Value = serde_json::from_str(&claude_settings(&EnginePolicy {
            profile_id: "box".into(),
            deny_commands: vec!["cargo build --release".into(), "touch \"a b\"".into()],
            hook_command: "/bin/paddock hook".into(),
            hook_timeout_secs: 1860,
        }))
        .unwrap();
        assert_eq!(
            v,
            json!({
                "disableAllHooks": false,
                "env": {
                    "CLAUDE_CODE_SIMPLE": "0",
                    "CLAUDE_CODE_SAFE_MODE": "0",
                    "CLAUDE_CODE_SHELL_PREFIX": "",
                    "LD_PRELOAD": "",
                    "LD_LIBRARY_PATH": "",
                    "LD_AUDIT": ""
                },
                "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
                    {"type": "command", "command": "/bin/paddock hook", "timeout": 1860}]}]},
                "permissions": {"deny": ["Bash(cargo build --release:*)", "Bash(touch \"a b\":*)"]}
            })
        );
    }
}

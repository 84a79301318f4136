//! The trust Codex wants for the PreToolUse hook Paddock writes into the
//! job's CODEX_HOME. codex-cli 0.171.0 runs a hook of `config.toml` only
//! when it is trusted: either per invocation with
//! `--dangerously-bypass-hook-trust` (which prints a warning item on the
//! `--json` stream, twice) or persisted in the same file as
//! `[hooks.state."<config.toml path>:pre_tool_use:<group>:<handler>"]
//! trusted_hash = "sha256:…"`. Paddock persists it, as a user who reviewed
//! the hook would: the hash is SHA-256 of the hook's normalized identity
//! as compact JSON with sorted keys and without unset fields (Codex's
//! `command_hook_hash` and `version_for_toml`). A hash that does not match
//! leaves the hook untrusted, so it never runs: the policy tests that run
//! the real CLI catch a change of the scheme.

use std::path::Path;

use sha2::{Digest as _, Sha256};

/// The key of the first handler of the first PreToolUse group of the
/// `config.toml` at `config_path` (the only hook Paddock writes).
pub fn state_key(config_path: &Path) -> String {
    format!("{}:pre_tool_use:0:0", config_path.display())
}

/// The trusted hash of a PreToolUse command hook without a matcher.
pub fn trusted_hash(command: &str, timeout_secs: u64) -> String {
    // Written out rather than built as a map, so that key order cannot
    // depend on serde_json's features.
    let identity = format!(
        r#"{{"event_name":"pre_tool_use","hooks":[{{"async":false,"command":{},"timeout":{timeout_secs},"type":"command"}}]}}"#,
        serde_json::Value::String(command.to_string())
    );
    format!(
        "sha256:{}",
        hex::encode(Sha256::digest(identity.as_bytes()))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_and_hash_of_a_hook() {
        assert_eq!(
            state_key(Path::new("/j/home/.codex/config.toml")),
            "/j/home/.codex/config.toml:pre_tool_use:0:0"
        );
        // sha256 of {"event_name":"pre_tool_use","hooks":[{"async":false,"command":"a \"b\"","timeout":30,"type":"command"}]}
        assert_eq!(
            trusted_hash("a \"b\"", 30),
            format!(
                "sha256:{}",
                hex::encode(Sha256::digest(
                    br#"{"event_name":"pre_tool_use","hooks":[{"async":false,"command":"a \"b\"","timeout":30,"type":"command"}]}"#
                ))
            )
        );
    }
}

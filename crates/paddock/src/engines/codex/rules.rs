//! Codex's execpolicy rules for the host profile's `deny_commands`
//! (`$CODEX_HOME/rules/default.rules`): one `prefix_rule(...,
//! decision="forbidden")` per denied command, whose justification starts
//! with [`JUSTIFICATION_MARK`](crate::engines::denial::JUSTIFICATION_MARK)
//! so that the denial can be found in Codex's rollout file afterwards.

use crate::engines::denial::reason;

/// The rules file (Starlark; strings in JSON syntax are valid Starlark
/// strings).
pub fn codex_rules(profile_id: &str, deny_commands: &[String]) -> String {
    let mut out = String::from("# Written by Paddock for one job from its host profile.\n");
    for rule in deny_commands {
        let words = shlex::split(rule).unwrap_or_default();
        let pattern: Vec<String> = words
            .iter()
            .map(|w| serde_json::to_string(w).unwrap_or_default())
            .collect();
        let justification = serde_json::to_string(&reason(profile_id, rule)).unwrap_or_default();
        out.push_str(&format!(
            "prefix_rule(pattern=[{}], decision=\"forbidden\", justification={justification})\n",
            pattern.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_rules_text() {
        assert_eq!(
            codex_rules("box", &["cargo build --release".into(), "touch \"a b\"".into()]),
            "# Written by Paddock for one job from its host profile.\n\
prefix_rule(pattern=[\"cargo\", \"build\", \"--release\"], decision=\"forbidden\", justification=\"paddock policy: host profile `box` denies `cargo build --release` on this host\")\n\
prefix_rule(pattern=[\"touch\", \"a b\"], decision=\"forbidden\", justification=\"paddock policy: host profile `box` denies `touch \\\"a b\\\"` on this host\")\n"
        );
    }
}

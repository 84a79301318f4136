//! How an engine is installed and the version Paddock is tested with (the
//! pins of `scripts/install-engines`, docs/engines.md): each adapter names
//! its [`Pin`] (`EngineAdapter::install`); named in a missing engine's
//! error, checked when a job starts (`version`) and by `paddock doctor`.

use paddock_protocol::EngineKind;

/// One pinned engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pin {
    /// The binary's name on PATH.
    pub binary: &'static str,
    /// The npm package that ships it.
    pub package: &'static str,
    /// The version Paddock is tested with.
    pub version: &'static str,
}

/// The pin of an engine kind (its adapter's).
pub fn pin(kind: EngineKind) -> Pin {
    super::adapter(kind).install()
}

impl Pin {
    /// How to put the pinned engine on PATH.
    pub fn install_hint(&self) -> String {
        format!(
            "from Paddock's checkout: export PATH=\"$(scripts/install-engines):$PATH\"; or: npm install -g {}@{}",
            self.package, self.version
        )
    }

    /// Whether `--version` output `out` names this pin's version (as a
    /// whole word: `codex-cli 0.171.0`, `2.1.197 (Claude Code)`).
    pub fn matches(&self, out: &str) -> bool {
        out.split(|c: char| c.is_whitespace() || c == '(' || c == ')')
            .any(|w| w == self.version)
    }
}

#[cfg(test)]
mod tests {
    use crate::engines::{claude::PIN as CLAUDE, codex::PIN as CODEX};

    /// The pins here are those `scripts/install-engines` installs.
    #[test]
    fn pins_match_the_install_script() {
        let script = include_str!("../../../../scripts/install-engines");
        let var = |name: &str| {
            script
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name}=")))
                .map(str::to_owned)
        };
        assert_eq!(
            (var("CODEX_VERSION"), var("CLAUDE_VERSION")),
            (
                Some(CODEX.version.to_owned()),
                Some(CLAUDE.version.to_owned())
            )
        );
    }

    #[test]
    fn version_output_matches_whole_words_only() {
        assert!(CODEX.matches("codex-cli 0.171.0\n"));
        assert!(CLAUDE.matches("2.1.197 (Claude Code)\n"));
        assert!(!CODEX.matches("codex-cli 0.171.01\n"));
        assert!(!CLAUDE.matches("2.1.19 (Claude Code)\n"));
    }
}

//! Layer 3 for `deny_commands` on the `sandbox` rung: a rule that names a
//! program alone (`curl`, `/usr/bin/wget`) makes that program absent from
//! the job's view: every file it resolves to in the sandbox's PATH (and in
//! the engine's) is covered by an empty file that cannot be executed. This
//! holds whatever the agent types and however (variables, `eval "$x"`, a
//! terminal, another interpreter's `os.system`), which the matcher cannot
//! see. Only programs in the read-only system directories are hidden (a
//! copy the job makes itself is not), and never the ones the engines run
//! on (`sh`, `bash`, `env`, `node`, `git`): a rule naming them still works
//! through the hook. Multi-word rules (`cargo build --release`) hide
//! nothing: the program itself stays allowed.

use std::path::{Path, PathBuf};

use paddock_sandbox::policy::{DEFAULT_PATH, SYSTEM_RO};

use super::matcher::Matcher;

/// Programs the engines need to run at all.
const NEVER_HIDDEN: &[&str] = &["sh", "bash", "dash", "env", "node", "git"];

/// The host files to hide for `matcher`'s one-word rules, looked up in the
/// sandbox's default PATH and in `engine_path` (the engine's PATH).
pub fn hidden_programs(matcher: &Matcher, engine_path: Option<&str>) -> Vec<PathBuf> {
    let dirs: Vec<&str> = DEFAULT_PATH
        .split(':')
        .chain(engine_path.unwrap_or("").split(':'))
        .filter(|d| d.starts_with('/'))
        .collect();
    let mut out: Vec<PathBuf> = Vec::new();
    for rule in matcher.rules() {
        let [word] = rule.words() else {
            continue;
        };
        let name = word.rsplit('/').next().unwrap_or(word);
        if name.is_empty() || NEVER_HIDDEN.contains(&name) {
            continue;
        }
        let candidates: Vec<PathBuf> = if word.starts_with('/') {
            vec![PathBuf::from(word)]
        } else {
            dirs.iter().map(|d| Path::new(d).join(name)).collect()
        };
        for c in candidates {
            let Ok(real) = c.canonicalize() else {
                continue;
            };
            let system = SYSTEM_RO.iter().any(|s| real.starts_with(s));
            if system && real.is_file() && !out.contains(&real) {
                out.push(real);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn one_word_rules_in_system_directories() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("curl"), "").unwrap();
        let matcher = Matcher::new(&[
            "sh".into(),
            "cargo build --release".into(),
            "no-such-program-anywhere".into(),
            "/bin/sh".into(),
        ]);
        // `sh` is never hidden, by name or by path; a multi-word rule or a
        // program that does not exist hides nothing.
        assert_eq!(hidden_programs(&matcher, None), Vec::<PathBuf>::new());
        // A program outside the system directories (the job's own copy,
        // a tool in the engine's PATH elsewhere) is not hidden.
        let engine_path = dir.path().display().to_string();
        let only_local = Matcher::new(&["curl".into()]);
        let found = hidden_programs(&only_local, Some(&engine_path));
        assert!(!found.contains(&dir.path().join("curl")), "{found:?}");
        // Whatever `curl` resolves to in the system directories is.
        let want: Vec<PathBuf> = ["/usr/local/bin/curl", "/usr/bin/curl", "/bin/curl"]
            .iter()
            .filter_map(|p| Path::new(p).canonicalize().ok())
            .fold(Vec::new(), |mut v, p| {
                if !v.contains(&p) {
                    v.push(p);
                }
                v
            });
        assert_eq!(found, want);
    }
}

//! A git ref's name as a spec gives it: `results.base_branch` (the branch
//! a pull request merges into) and `repository.base_ref` (the revision a
//! job starts from). Both are shown (the closeout, the job tables, a
//! forge's page) and handed to git and to a forge, so a name git would
//! never take (a control character that starts a terminal's command or
//! forges a line, a bidirectional control that shows it reordered, `..`,
//! a component `.hidden` or `x.lock`) is refused where the spec is read,
//! naming the field and the rule, never echoing a control. The rules are
//! git's `check-ref-format` (a branch: `--branch`, one level allowed); a
//! revision keeps the characters its syntax uses (`~`, `^`, `:`, `@{`,
//! and `@` alone) and is otherwise held to the same rules.

/// Why `name` is no valid branch name, or `None`.
pub fn branch_fault(name: &str) -> Option<String> {
    fault(name, false)
}

/// Why `rev` is no valid revision as a spec may name its base (a branch,
/// a tag, a commit, a revision expression), or `None`.
pub fn revision_fault(rev: &str) -> Option<String> {
    fault(rev, true)
}

fn fault(name: &str, revision: bool) -> Option<String> {
    if name.is_empty() {
        return Some("it is empty".into());
    }
    // By its code point, first: the name is not echoed with it.
    if let Some(why) = crate::plain_text::first_not_plain(name) {
        return Some(why);
    }
    if let Some(c) = name.chars().find(|c| c.is_whitespace()) {
        return Some(format!("it holds white space (U+{:04X})", u32::from(c)));
    }
    if name.starts_with('-') {
        return Some("it starts with `-`".into());
    }
    let refused: &[char] = if revision {
        &['?', '*', '[', '\\']
    } else {
        &['~', '^', ':', '?', '*', '[', '\\']
    };
    if let Some(c) = name.chars().find(|c| refused.contains(c)) {
        return Some(format!("it holds `{c}`"));
    }
    if name.contains("..") {
        return Some("it holds `..`".into());
    }
    if !revision && name.contains("@{") {
        return Some("it holds `@{`".into());
    }
    if !revision && name == "@" {
        return Some("it is `@`".into());
    }
    if name.starts_with('/') || name.ends_with('/') || name.contains("//") {
        return Some("it starts or ends with `/` or holds `//`".into());
    }
    if name.ends_with('.') {
        return Some("it ends with `.`".into());
    }
    if name.split('/').any(|part| part.starts_with('.')) {
        return Some("a component of it starts with `.`".into());
    }
    if name.split('/').any(|part| part.ends_with(".lock")) {
        return Some("a component of it ends with `.lock`".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Git's rules, each by an example a branch breaks, and what a
    /// revision may hold that a branch may not.
    #[test]
    fn names_git_would_refuse_are_refused_with_the_rule() {
        let cases = [
            "main",
            "feature/x-1",
            "",
            "ma\u{1b}[2Jin",
            "ma\nin",
            "main\u{202e}",
            "ma in",
            "-x",
            "a~1",
            "a^",
            "a:b",
            "a?",
            "a*",
            "a[b",
            "a\\b",
            "a..b",
            "a@{1}",
            "@",
            "/a",
            "a/",
            "a//b",
            "a.",
            "a/.b",
            "a.lock/b",
            "caf\u{e9}",
        ];
        let none = || None::<String>;
        let some = |s: &str| Some(s.to_string());
        assert_eq!(
            cases.map(branch_fault),
            [
                none(),
                none(),
                some("it is empty"),
                some("U+001B at byte 2 is a control character"),
                some("U+000A at byte 2 is a control character"),
                some("U+202E at byte 4 is a bidirectional control"),
                some("it holds white space (U+0020)"),
                some("it starts with `-`"),
                some("it holds `~`"),
                some("it holds `^`"),
                some("it holds `:`"),
                some("it holds `?`"),
                some("it holds `*`"),
                some("it holds `[`"),
                some("it holds `\\`"),
                some("it holds `..`"),
                some("it holds `@{`"),
                some("it is `@`"),
                some("it starts or ends with `/` or holds `//`"),
                some("it starts or ends with `/` or holds `//`"),
                some("it starts or ends with `/` or holds `//`"),
                some("it ends with `.`"),
                some("a component of it starts with `.`"),
                some("a component of it ends with `.lock`"),
                none(),
            ]
        );
        assert_eq!(
            [
                "HEAD~1",
                "v1.0^{commit}",
                "main@{1}",
                "@",
                "a:b",
                "origin/main"
            ]
            .map(revision_fault),
            [none(), none(), none(), none(), none(), none()]
        );
        assert_eq!(
            ["a..b", "a\u{7f}", "a\u{2066}b"].map(revision_fault),
            [
                some("it holds `..`"),
                some("U+007F at byte 1 is a control character"),
                some("U+2066 at byte 1 is a bidirectional control"),
            ]
        );
    }
}

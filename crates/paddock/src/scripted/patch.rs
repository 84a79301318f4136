//! Codex's `apply_patch` format, for the scripted `write` and `edit` actions.
//!
//! Codex edits files with a patch envelope (`*** Begin Patch` … `*** End
//! Patch`): `*** Add File: path` followed by `+` lines creates (or
//! overwrites) a file; `*** Update File: path` followed by an `@@` hunk of
//! `-old` and `+new` lines replaces those lines. apply_patch works on whole
//! lines, so a scripted edit's `old` must be one or more whole lines of the
//! file, and an added file always ends with a line break.

use crate::shell_word::quote as shell_quote;

/// A patch that creates `path` (or replaces its content) with `content`.
pub(crate) fn add_file(path: &str, content: &str) -> String {
    let mut patch = format!("*** Begin Patch\n*** Add File: {path}\n");
    for line in lines(content) {
        patch.push('+');
        patch.push_str(line);
        patch.push('\n');
    }
    patch.push_str("*** End Patch");
    patch
}

/// A patch that replaces the lines `old` with the lines `new` in `path`.
pub(crate) fn update_file(path: &str, old: &str, new: &str) -> String {
    let mut patch = format!("*** Begin Patch\n*** Update File: {path}\n@@\n");
    for line in lines(old) {
        patch.push('-');
        patch.push_str(line);
        patch.push('\n');
    }
    for line in lines(new) {
        patch.push('+');
        patch.push_str(line);
        patch.push('\n');
    }
    patch.push_str("*** End Patch");
    patch
}

/// The patch as a shell command, for a Codex that offers no `apply_patch`
/// tool: Codex intercepts `apply_patch <<'EOF'` sent through its shell tool.
pub(crate) fn as_shell_command(patch: &str) -> String {
    let mut delimiter = String::from("EOF");
    while patch.lines().any(|line| line == delimiter) {
        delimiter.push('_');
    }
    format!("apply_patch <<'{delimiter}'\n{patch}\n{delimiter}")
}

/// The `cat` command a Codex runs for a scripted `read`.
pub(crate) fn read_command(path: &str) -> String {
    format!("cat {}", shell_quote(path))
}

/// The lines of `text`, without their line breaks; a final line break does
/// not start another line, and empty text has no lines.
fn lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    text.strip_suffix('\n')
        .unwrap_or(text)
        .split('\n')
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_a_file() {
        assert_eq!(
            add_file("src/a.txt", "one\ntwo\n"),
            "*** Begin Patch\n*** Add File: src/a.txt\n+one\n+two\n*** End Patch"
        );
        assert_eq!(
            add_file("a", "no newline"),
            "*** Begin Patch\n*** Add File: a\n+no newline\n*** End Patch"
        );
        assert_eq!(
            add_file("a", ""),
            "*** Begin Patch\n*** Add File: a\n*** End Patch"
        );
        assert_eq!(
            add_file("a", "\n"),
            "*** Begin Patch\n*** Add File: a\n+\n*** End Patch"
        );
    }

    #[test]
    fn updates_a_file() {
        assert_eq!(
            update_file("a.txt", "hello world\n", "hello paddock\nbye\n"),
            "*** Begin Patch\n*** Update File: a.txt\n@@\n-hello world\n+hello paddock\n+bye\n*** End Patch"
        );
        assert_eq!(
            update_file("a.txt", "gone", ""),
            "*** Begin Patch\n*** Update File: a.txt\n@@\n-gone\n*** End Patch"
        );
    }

    #[test]
    fn shell_forms() {
        assert_eq!(
            as_shell_command("*** Begin Patch\n*** End Patch"),
            "apply_patch <<'EOF'\n*** Begin Patch\n*** End Patch\nEOF"
        );
        assert_eq!(
            as_shell_command("*** Begin Patch\n*** Add File: a\n+x\nEOF\n*** End Patch"),
            "apply_patch <<'EOF_'\n*** Begin Patch\n*** Add File: a\n+x\nEOF\n*** End Patch\nEOF_"
        );
        assert_eq!(read_command("a b.txt"), "cat 'a b.txt'");
    }
}

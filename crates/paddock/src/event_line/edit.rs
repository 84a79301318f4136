//! A file edit as progress shows it: the tool calls that carry the text
//! they write (Claude Code's `Edit`, `MultiEdit` and `Write`) become a
//! `✎` line and the changed lines, `-` old and `+` new, each kept whole
//! with its indentation (tabs included), instead of one flattened line of
//! JSON. Codex reports a patch only as the paths it changed (`file_change`
//! events, shown as `✎ updated PATH` for both engines). The text is
//! written by the job: control characters are shown escaped
//! (`crate::terminal_text`), lines and hunks are cut to a few.

use serde_json::Value;

use crate::cut_text::{cut, Cut};
use crate::terminal_text;

/// Lines of one side of a hunk shown at most.
const MAX_LINES: usize = 8;
/// Characters of one line shown at most.
const MAX_CHARS: usize = 160;
/// Where the changed lines start.
const INDENT: &str = "      ";

/// The lines of an edit call; `None` for any other call (or an edit
/// whose input lacks what it needs).
pub fn lines(tool: &str, input: &Value) -> Option<String> {
    let path = input.get("file_path").and_then(Value::as_str)?;
    let path = terminal_text::line(path.strip_prefix("<workspace>/").unwrap_or(path));
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    match tool {
        "Edit" => {
            let (old, new) = (text(input, "old_string")?, text(input, "new_string")?);
            Some(format!("  ✎ edit {path}\n{}", hunk(&old, &new)))
        }
        "MultiEdit" => {
            let edits = input.get("edits").and_then(Value::as_array)?;
            let mut out = format!("  ✎ edit {path} ({} change(s))", edits.len());
            for e in edits {
                let (old, new) = (text(e, "old_string")?, text(e, "new_string")?);
                out.push('\n');
                out.push_str(&hunk(&old, &new));
            }
            Some(out)
        }
        "Write" => {
            let content = text(input, "content")?;
            Some(format!(
                "  ✎ write {path} ({} line(s))",
                content.lines().count()
            ))
        }
        _ => None,
    }
}

/// The changed lines of `old` → `new`: the lines both share at the start
/// and end are left out (at least one line of each side is shown).
fn hunk(old: &str, new: &str) -> String {
    let old: Vec<&str> = old.lines().collect();
    let new: Vec<&str> = new.lines().collect();
    let head = old
        .iter()
        .zip(&new)
        .take_while(|(a, b)| a == b)
        .count()
        .min(old.len().saturating_sub(1))
        .min(new.len().saturating_sub(1));
    let tail = old[head..]
        .iter()
        .rev()
        .zip(new[head..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count()
        .min(old.len().saturating_sub(head + 1))
        .min(new.len().saturating_sub(head + 1));
    let mut out = Vec::new();
    side(&mut out, '-', &old[head..old.len() - tail]);
    side(&mut out, '+', &new[head..new.len() - tail]);
    out.join("\n")
}

/// One side of a hunk, at most `MAX_LINES` lines.
fn side(out: &mut Vec<String>, mark: char, lines: &[&str]) {
    for line in lines.iter().take(MAX_LINES) {
        // One line of a `lines()` split: a tab kept, every other control
        // character escaped.
        out.push(format!(
            "{INDENT}{mark} {}",
            cut(&terminal_text::text(line), Cut::chars(MAX_CHARS))
        ));
    }
    if lines.len() > MAX_LINES {
        out.push(format!(
            "{INDENT}{mark} … {} more line(s)",
            lines.len() - MAX_LINES
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_edit_keeps_indentation_and_drops_shared_lines() {
        let input = json!({
            "file_path": "<workspace>/src/lib.rs",
            "old_string": "fn f() {\n    let x = 1;\n\tx\n}",
            "new_string": "fn f() {\n    let x = 2;\n\tx + 1\n}",
        });
        assert_eq!(
            lines("Edit", &input).as_deref(),
            Some(
                "  ✎ edit src/lib.rs\n      -     let x = 1;\n      - \tx\n      +     let x = 2;\n      + \tx + 1"
            )
        );
    }

    #[test]
    fn hostile_text_is_escaped_and_cut() {
        let long: Vec<String> = (0..10).map(|i| format!("  line {i}")).collect();
        let input = json!({
            "file_path": "a\u{1b}[2J.txt",
            "old_string": "\u{1b}]0;pwned\u{7}",
            "new_string": long.join("\n"),
        });
        let shown = lines("Edit", &input).unwrap();
        let want: Vec<String> = [
            "  ✎ edit a\\u{1b}[2J.txt".to_string(),
            "      - \\u{1b}]0;pwned\\u{7}".to_string(),
        ]
        .into_iter()
        .chain((0..8).map(|i| format!("      +   line {i}")))
        .chain(["      + … 2 more line(s)".to_string()])
        .collect();
        assert_eq!(shown, want.join("\n"));
    }

    #[test]
    fn other_tools_and_incomplete_input_are_not_edits() {
        assert_eq!(lines("Read", &json!({"file_path": "a"})), None);
        assert_eq!(
            lines("Edit", &json!({"file_path": "a", "old_string": "x"})),
            None
        );
    }
}

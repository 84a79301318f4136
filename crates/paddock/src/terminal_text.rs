//! Text from a job made safe to print on a terminal. A job is hostile and
//! much of what Paddock prints comes from it: the agent's messages, the
//! commands it ran, the names of the files it changed, the engine's
//! stderr in a failure's reason, a patch. Printed as they are, control
//! characters in them are commands to the user's terminal: an escape
//! sequence can rewrite what is on screen (hide a line, fake a `done`),
//! set the window title, write the clipboard (OSC 52) or make a link
//! that says one thing and opens another (OSC 8), and Unicode's
//! bidirectional overrides reorder what is shown ("Trojan Source"). So
//! every such character is shown as its escape (`\u{1b}`) instead: the
//! C0 and C1 controls and DEL (Unicode's `Cc`), the bidirectional
//! embeddings, overrides, isolates and marks, the line and paragraph
//! separators, and the invisible characters that make one text look like
//! another (zero-width space, word joiner and invisible operators, the
//! byte order mark, the soft hyphen, the variation selectors but the
//! emoji's U+FE0E and U+FE0F, the tag characters: `plain_text::is_invisible`;
//! zero-width joiner and non-joiner stay, as emoji and some scripts need
//! them). The dashboard shows job text through the same
//! function (server/dashboard/pages.rs). A line view escapes newlines
//! too ([`line`]); a text view keeps newlines and tabs ([`text`]).
//! Paddock's own colours are added after, never passed through here.
//! JSON Paddock prints escapes the same characters as `\uXXXX` ([`json`]).

pub mod json;
pub mod log_line;

use std::borrow::Cow;

/// `s` with every control character, newline and tab included, escaped:
/// for a view that shows one line per item.
pub fn line(s: &str) -> Cow<'_, str> {
    escape(s, false)
}

/// `s` with every control character but newline and tab escaped: for
/// multi-line text (a closeout, a patch, an error's causes).
pub fn text(s: &str) -> Cow<'_, str> {
    escape(s, true)
}

fn escape(s: &str, keep_layout: bool) -> Cow<'_, str> {
    let unsafe_char = |c: char| dangerous(c) && !(keep_layout && (c == '\n' || c == '\t'));
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A file name a job made, as Paddock's own text names it (its warnings,
/// the closeout's lists): every [`dangerous`] character and any
/// whitespace but a space (which a forge's code span would show as a
/// space, or a list of names split on) as its escape (`docs/a\u{9}b.md`),
/// runs of spaces kept.
pub fn path(s: &str) -> String {
    let mut shown = String::with_capacity(s.len());
    for c in s.chars() {
        if dangerous(c) || (c.is_whitespace() && c != ' ') {
            shown.extend(c.escape_unicode());
        } else {
            shown.push(c);
        }
    }
    shown
}

/// Whether a terminal could take `c` as a command rather than a glyph,
/// show the text around it in another order than it is, or show nothing
/// for it.
pub fn dangerous(c: char) -> bool {
    // A control character, a bidirectional control (the marks,
    // embeddings, overrides and isolates) or a character shown as nothing
    // (zero-width space, word joiner, invisible operators, byte order
    // mark, Mongolian vowel separator, tag characters): not plain text,
    // by the one code-point rule a ticket title is held to.
    !paddock_protocol::plain_text::is_plain(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_commands_are_shown_escaped() {
        let hostile =
            "ok\x1b[2K\x1b[1Adone\x1b]52;c;ZXZpbA==\x07 \u{9b}31m \x7f\u{202e}fdp.exe\t\nnext";
        assert_eq!(
            line("a\u{200b}b\u{2060}c\u{feff}d\u{180e}e\u{2062}f"),
            "a\\u{200b}b\\u{2060}c\\u{feff}d\\u{180e}e\\u{2062}f"
        );
        // A line separator, a soft hyphen, a variation selector that is
        // no emoji's are escaped, in a text view too.
        assert_eq!(
            (
                line("a\u{2028}b\u{ad}c\u{fe00}d"),
                text("a\u{2029}b\u{e0100}c")
            ),
            (
                Cow::Owned::<str>("a\\u{2028}b\\u{ad}c\\u{fe00}d".into()),
                Cow::Owned::<str>("a\\u{2029}b\\u{e0100}c".into())
            )
        );
        // Joiners and an emoji's presentation selector stay: emoji
        // sequences and some scripts are made of them.
        assert_eq!(
            line("👩\u{200d}💻 \u{200c} \u{2764}\u{fe0f}"),
            "👩\u{200d}💻 \u{200c} \u{2764}\u{fe0f}"
        );
        assert_eq!(
            line(hostile),
            "ok\\u{1b}[2K\\u{1b}[1Adone\\u{1b}]52;c;ZXZpbA==\\u{7} \\u{9b}31m \\u{7f}\\u{202e}fdp.exe\\u{9}\\u{a}next"
        );
        assert_eq!(
            text(hostile),
            "ok\\u{1b}[2K\\u{1b}[1Adone\\u{1b}]52;c;ZXZpbA==\\u{7} \\u{9b}31m \\u{7f}\\u{202e}fdp.exe\t\nnext"
        );
    }

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        let plain = "café.md — 3 files, 100 % «ok»\n\tindented";
        assert!(matches!(text(plain), Cow::Borrowed(p) if p == plain));
        assert_eq!(
            line(plain),
            "café.md — 3 files, 100 % «ok»\\u{a}\\u{9}indented"
        );
    }
}

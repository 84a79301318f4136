//! Plain text: what a ticket title, a name or a brief's text may hold.
//! A control character (an escape starting a terminal command, a line
//! break forging another line, a NUL) or a bidirectional control (which
//! shows the text after it reordered, so that what is shown differs from
//! what is stored) is not plain. The one code-point rule for it: a spec's
//! title refuses such a character by it ([`JobSpec::validate`]), a turn's
//! title and a stored spec's leave them out ([`line`]), the next attempt's
//! brief leaves them out of what the forge and the prior job wrote
//! ([`text`], [`line`]), and the terminal's escaping
//! (`paddock::terminal_text`) starts from it.
//!
//! [`JobSpec::validate`]: crate::spec::JobSpec

use std::borrow::Cow;

/// A character that reorders the text shown after it (the bidirectional
/// embeddings, overrides and isolates, the marks): in a title it makes
/// what is shown differ from what is stored.
pub fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}

/// Whether `c` may be in one line of plain text: not a control character
/// (Unicode's `Cc`: C0, DEL, C1; a line break and a tab too) nor a
/// bidirectional control.
pub fn is_plain(c: char) -> bool {
    !c.is_control() && !is_bidi_control(c)
}

/// `s` as one line of plain text: every character [`is_plain`] refuses
/// left out (a line break too, so that nothing in it starts a line of its
/// own).
pub fn line(s: &str) -> Cow<'_, str> {
    keep(s, is_plain)
}

/// `s` as plain text of several lines: as [`line`], but its line breaks
/// (`\n`) and tabs kept (a carriage return is left out, so `\r\n` is a
/// line break).
pub fn text(s: &str) -> Cow<'_, str> {
    keep(s, |c| is_plain(c) || c == '\n' || c == '\t')
}

fn keep(s: &str, kept: impl Fn(char) -> bool) -> Cow<'_, str> {
    match s.chars().all(&kept) {
        true => Cow::Borrowed(s),
        false => Cow::Owned(s.chars().filter(|c| kept(*c)).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Escapes, NUL, DEL, a C1 control, carriage returns and every
    /// bidirectional control are left out; a line keeps no break or tab,
    /// a text keeps both; other unicode (accents composed or not, a
    /// joiner in an emoji) is kept, and plain text is borrowed.
    #[test]
    fn controls_and_bidi_characters_are_left_out_of_plain_text() {
        let hostile = "a\u{1b}[2Jb\0c\u{7f}d\u{9b}e\r\nf\tg\u{202e}h\u{2066}i\u{200f}j\u{61c}k";
        assert_eq!(
            (line(hostile), text(hostile)),
            (
                Cow::Owned::<str>("a[2Jbcdefghijk".into()),
                Cow::Owned::<str>("a[2Jbcde\nf\tghijk".into())
            )
        );
        let plain = "café cafe\u{301} 👩\u{200d}💻";
        assert!(matches!(line(plain), Cow::Borrowed(p) if p == plain));
        assert!(matches!(text("a\n\tb"), Cow::Borrowed("a\n\tb")));
    }
}

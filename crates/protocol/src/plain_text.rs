//! Plain text: what a ticket title, a name or a brief's text may hold.
//! A control character (an escape starting a terminal command, a line
//! break forging another line, a NUL) or a bidirectional control (which
//! shows the text after it reordered, so that what is shown differs from
//! what is stored) is not plain, nor is a character shown as nothing
//! (a zero-width space, a byte order mark, a tag character spelling text
//! no reader sees but a model reads). The one code-point rule for it: a spec's
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

/// A character shown as nothing that carries no meaning of its own in
/// text a person reads: the zero-width space, the word joiner and the
/// invisible operators, the byte order mark (a zero-width no-break space
/// inside text), the Mongolian vowel separator, and the tag characters
/// (U+E0000–U+E007F), which spell ASCII no reader sees and a model reads
/// (hidden instructions in a brief that looks plain). The joiners U+200C
/// and U+200D are not among them: emoji sequences and several scripts
/// are made of them.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{200B}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}' | '\u{180E}' | '\u{E0000}'..='\u{E007F}'
    )
}

/// Whether `c` may be in one line of plain text: not a control character
/// (Unicode's `Cc`: C0, DEL, C1; a line break and a tab too), nor a
/// bidirectional control, nor an invisible character ([`is_invisible`]).
pub fn is_plain(c: char) -> bool {
    !c.is_control() && !is_bidi_control(c) && !is_invisible(c)
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

/// Where `s` first holds a character [`is_plain`] refuses, said by its
/// code point and byte offset (the character itself never echoed):
/// "U+001B at byte 4 is a control character, a bidirectional control or
/// an invisible character".
pub fn first_not_plain(s: &str) -> Option<String> {
    let (at, c) = s.char_indices().find(|(_, c)| !is_plain(*c))?;
    Some(format!(
        "U+{:04X} at byte {at} is a control character, a bidirectional control or an invisible \
         character",
        u32::from(c)
    ))
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

    /// Escapes, NUL, DEL, a C1 control, carriage returns, every
    /// bidirectional control and every invisible character (zero-width
    /// space, word joiner, byte order mark, tag characters spelling
    /// hidden text) are left out; a line keeps no break or tab, a text
    /// keeps both; other unicode (accents composed or not, a joiner in an
    /// emoji) is kept, and plain text is borrowed.
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
        let hidden =
            "ok\u{200b}\u{2060}\u{2062}\u{feff}\u{180e}\u{e0001}\u{e0069}\u{e0067}\u{e007f}\ndone";
        assert_eq!(
            (line(hidden), text(hidden)),
            (
                Cow::Owned::<str>("okdone".into()),
                Cow::Owned::<str>("ok\ndone".into())
            )
        );
        let plain = "café cafe\u{301} 👩\u{200d}💻 \u{200c}";
        assert!(matches!(line(plain), Cow::Borrowed(p) if p == plain));
        assert!(matches!(text("a\n\tb"), Cow::Borrowed("a\n\tb")));
    }
}

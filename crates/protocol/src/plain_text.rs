//! Plain text: what a ticket title, a name or a brief's text may hold.
//! A control character (an escape starting a terminal command, a line
//! break forging another line, a NUL), a line or paragraph separator
//! (U+2028, U+2029: a line break to some readers) or a bidirectional control (which
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
/// text a person reads (Unicode's default-ignorable code points, less the
/// joiners and the emoji presentation selectors):
///
/// - U+00AD soft hyphen, U+034F combining grapheme joiner;
/// - U+115F, U+1160, U+3164, U+FFA0, the Hangul fillers (blank letters);
/// - U+17B4, U+17B5, the Khmer inherent vowels;
/// - U+180B–U+180F, the Mongolian variation selectors and vowel separator;
/// - U+200B zero-width space, U+2060–U+2065 the word joiner, the invisible
///   operators and the next, reserved one, U+206A–U+206F the deprecated
///   format characters;
/// - U+FE00–U+FE0D, the variation selectors 1 to 14, and U+E0100–U+E01EF,
///   the variation selectors supplement (they pick a glyph, and a string
///   of them hides text as tag characters do);
/// - U+FEFF byte order mark (a zero-width no-break space inside text),
///   U+FFF0–U+FFF8 (reserved), U+FFF9–U+FFFB interlinear annotation;
/// - U+1BCA0–U+1BCA3, the shorthand format controls, U+1D173–U+1D17A,
///   the musical format characters;
/// - U+E0000–U+E0FFF, the tag characters (U+E0000–U+E007F, which spell
///   ASCII no reader sees and a model reads: hidden instructions in a
///   brief that looks plain), the variation selectors supplement and
///   the block's reserved rest.
///
/// Not among them: the joiners U+200C and U+200D (emoji sequences and
/// several scripts are made of them) and the variation selectors U+FE0E
/// and U+FE0F, which ask for a character's text or emoji presentation
/// (`❤\u{FE0F}`, the keycaps, an emoji in a ZWJ sequence): each shows as
/// the character before it, no more.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{115F}'
            | '\u{1160}'
            | '\u{17B4}'
            | '\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'
            | '\u{2060}'..='\u{2065}'
            | '\u{206A}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0D}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF0}'..='\u{FFFB}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
}

/// U+2028 line separator and U+2029 paragraph separator: not Unicode's
/// controls (`Cc`), but a line break to a JavaScript string, a Markdown
/// renderer and some terminals, so that a name holding one shows as two
/// lines (a forged line under the title) while a reader that does not
/// break there shows nothing. Neither is in one line of plain text, and
/// plain text of several lines breaks its lines with `\n` only.
pub fn is_line_separator(c: char) -> bool {
    matches!(c, '\u{2028}' | '\u{2029}')
}

/// Whether `c` may be in one line of plain text: not a control character
/// (Unicode's `Cc`: C0, DEL, C1; a line break and a tab too), nor a line
/// or paragraph separator ([`is_line_separator`]), nor a bidirectional
/// control, nor an invisible character ([`is_invisible`]).
pub fn is_plain(c: char) -> bool {
    kind(c).is_none()
}

/// What `c` is when it is not plain ([`is_plain`]), as an error says it.
fn kind(c: char) -> Option<&'static str> {
    if c.is_control() {
        Some("a control character")
    } else if is_line_separator(c) {
        Some("a line or paragraph separator")
    } else if is_bidi_control(c) {
        Some("a bidirectional control")
    } else if is_invisible(c) {
        Some("an invisible character")
    } else {
        None
    }
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
/// code point, byte offset and kind (the character itself never echoed):
/// "U+001B at byte 4 is a control character", "U+2028 at byte 0 is a line
/// or paragraph separator", "U+202E at byte 2 is a bidirectional
/// control", "U+200B at byte 1 is an invisible character".
pub fn first_not_plain(s: &str) -> Option<String> {
    s.char_indices().find_map(|(at, c)| {
        kind(c).map(|what| format!("U+{:04X} at byte {at} is {what}", u32::from(c)))
    })
}

/// `s` with every character [`is_plain`] refuses shown as its escape
/// (`\u{1b}`), the rest as it is: what an error quoting a hostile value
/// says of it, which a terminal, a log and a JSON reader show as text.
pub fn escaped(s: &str) -> Cow<'_, str> {
    if s.chars().all(is_plain) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match is_plain(c) {
            true => out.push(c),
            false => out.extend(c.escape_unicode()),
        }
    }
    Cow::Owned(out)
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

    /// The line and paragraph separators and every default-ignorable
    /// character but the joiners and the emoji presentation selectors
    /// (the soft hyphen, the combining grapheme joiner, the Hangul
    /// fillers, the Khmer inherent vowels, the Mongolian selectors, the
    /// variation selectors 1 to 14 and 17 to 256, the deprecated format
    /// characters, the interlinear annotation, the shorthand and musical
    /// format controls) are left out of a line and of a text; an emoji's
    /// U+FE0F and U+FE0E, a keycap and a ZWJ sequence are kept.
    #[test]
    fn separators_and_every_default_ignorable_but_the_emoji_selectors_are_left_out() {
        let hidden = "a\u{2028}b\u{2029}c\u{ad}d\u{34f}e\u{115f}\u{1160}\u{3164}\u{ffa0}f\u{17b4}\u{17b5}\
                      g\u{180b}\u{180c}\u{180d}\u{180f}h\u{2065}\u{206a}\u{206f}i\u{fe00}\u{fe0d}j\
                      \u{e0100}\u{e01ef}k\u{fff9}\u{fffa}\u{fffb}l\u{1bca0}\u{1bca3}\u{1d173}\u{1d17a}m";
        assert_eq!(
            (line(hidden), text(&format!("{hidden}\nn"))),
            (
                Cow::Owned::<str>("abcdefghijklm".into()),
                Cow::Owned::<str>("abcdefghijklm\nn".into())
            )
        );
        let emoji = "\u{2764}\u{fe0f} 1\u{fe0f}\u{20e3} \u{270c}\u{fe0e} \
                     \u{1f3f3}\u{fe0f}\u{200d}\u{1f308} \u{1f469}\u{200d}\u{1f4bb}";
        assert!(matches!(line(emoji), Cow::Borrowed(e) if e == emoji));
        assert_eq!(
            [
                "a\u{1b}",
                "a\u{2028}",
                "ab\u{202e}",
                "\u{fe00}",
                "x\u{e0100}"
            ]
            .map(first_not_plain),
            [
                Some("U+001B at byte 1 is a control character".to_string()),
                Some("U+2028 at byte 1 is a line or paragraph separator".to_string()),
                Some("U+202E at byte 2 is a bidirectional control".to_string()),
                Some("U+FE00 at byte 0 is an invisible character".to_string()),
                Some("U+E0100 at byte 1 is an invisible character".to_string()),
            ]
        );
    }
}

//! Text someone else wrote (a caller's cursor or id, a job's request path,
//! a line of a job's edit) named back in a message, cut short: at most
//! [`Cut::chars`] characters of it, an ellipsis where it was cut, and, as
//! the place asks, its length said after the ellipsis (in characters or
//! bytes) and its control characters escaped (`\u{0}`). The cut falls
//! between characters, never inside a UTF-8 sequence. The one helper for
//! it: the server's job lists and job ids, the ledger's cursor, the
//! broker's refused paths and the progress lines of an edit.

/// How [`cut`] cuts: [`Cut::chars`], then the options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    max: usize,
    controls: Controls,
    length: Length,
}

/// What becomes of the control characters (C0, DEL, C1) of what is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Controls {
    /// Kept as they are (the text is escaped elsewhere, or is never shown
    /// on a terminal).
    Kept,
    /// Written as their escape (`\u{1b}`).
    Escaped,
}

/// What a cut text says of its whole length after the ellipsis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Length {
    /// Nothing: `head…`.
    Unsaid,
    /// `head… (N characters)`.
    Characters,
    /// `head… (N bytes)`.
    Bytes,
}

impl Cut {
    /// At most `max` characters kept, controls kept, the length unsaid.
    pub const fn chars(max: usize) -> Cut {
        Cut {
            max,
            controls: Controls::Kept,
            length: Length::Unsaid,
        }
    }

    /// The same, with control characters escaped.
    pub const fn escaping_controls(self) -> Cut {
        Cut {
            controls: Controls::Escaped,
            ..self
        }
    }

    /// The same, saying the whole length as `length` does when cut.
    pub const fn saying(self, length: Length) -> Cut {
        Cut { length, ..self }
    }
}

/// `text` as `how` names it back: whole when it has at most the most
/// characters, else its first that many and `…` (and its length, when
/// asked).
pub fn cut(text: &str, how: Cut) -> String {
    let (head, cut_at) = match text.char_indices().nth(how.max) {
        Some((at, _)) => (&text[..at], true),
        None => (text, false),
    };
    let mut out = match how.controls {
        Controls::Kept => head.to_owned(),
        Controls::Escaped => {
            let mut out = String::with_capacity(head.len());
            for c in head.chars() {
                if c.is_control() {
                    out.extend(c.escape_unicode());
                } else {
                    out.push(c);
                }
            }
            out
        }
    };
    if cut_at {
        out.push('…');
        match how.length {
            Length::Unsaid => {}
            Length::Characters => {
                out.push_str(&format!(" ({} characters)", text.chars().count()));
            }
            Length::Bytes => out.push_str(&format!(" ({} bytes)", text.len())),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_of_exactly_the_most_characters_is_kept_whole() {
        assert_eq!(cut("abcd", Cut::chars(4)), "abcd");
        assert_eq!(
            cut("abcd", Cut::chars(4).saying(Length::Characters)),
            "abcd"
        );
        assert_eq!(cut("", Cut::chars(4)), "");
        assert_eq!(cut("abcde", Cut::chars(4)), "abcd…");
    }

    /// Characters, not bytes, are counted, and the cut never splits one:
    /// a multi-byte character straddling the byte where a byte count would
    /// cut is kept whole or left out whole.
    #[test]
    fn multi_byte_characters_at_the_cut_stay_whole() {
        // 'é' is 2 bytes, '€' 3, '𝄞' 4.
        assert_eq!(cut("é€𝄞é€𝄞", Cut::chars(3)), "é€𝄞…");
        assert_eq!(cut("aé€𝄞", Cut::chars(4)), "aé€𝄞");
        assert_eq!(cut("a𝄞b", Cut::chars(1)), "a…");
        assert_eq!(cut("a𝄞b", Cut::chars(2)), "a𝄞…");
        assert_eq!(
            cut("é€𝄞é€𝄞", Cut::chars(2).saying(Length::Characters)),
            "é€… (6 characters)"
        );
        assert_eq!(
            cut("é€𝄞é€𝄞", Cut::chars(2).saying(Length::Bytes)),
            "é€… (18 bytes)"
        );
    }

    #[test]
    fn controls_are_escaped_only_when_asked_and_count_as_one_character() {
        let text = "a\0b\u{1b}c\u{7f}d\u{85}e";
        assert_eq!(cut(text, Cut::chars(9)), text);
        assert_eq!(
            cut(text, Cut::chars(9).escaping_controls()),
            "a\\u{0}b\\u{1b}c\\u{7f}d\\u{85}e"
        );
        assert_eq!(cut(text, Cut::chars(3).escaping_controls()), "a\\u{0}b…");
        assert_eq!(
            cut(
                text,
                Cut::chars(2).escaping_controls().saying(Length::Characters)
            ),
            "a\\u{0}… (9 characters)"
        );
    }

    #[test]
    fn a_huge_text_is_named_by_its_head_and_length() {
        let text = "x".repeat(1 << 20);
        assert_eq!(
            cut(&text, Cut::chars(8).saying(Length::Bytes)),
            format!("xxxxxxxx… ({} bytes)", 1 << 20)
        );
    }
}

//! The log Paddock writes on stderr, safe on a terminal and one event per
//! line. Its messages quote what a job and the outside wrote (a job's
//! failure with its engine's stderr, a refused request's reason, a file
//! name), and `tracing-subscriber` leaves some of that raw: its text lines
//! escape C0, C1 and DEL in a message but write the bidirectional
//! overrides and isolates and a newline as they are (a newline in a
//! message starts what reads as a second, forged log line), and its JSON
//! lines (serde_json) write DEL, C1 (U+009B is a CSI) and the
//! bidirectional characters raw. [`SafeLogWriter`] sits between the
//! formatter and stderr and rewrites each line it is given (the formatter
//! writes one whole event per call): in a JSON line every such character
//! becomes its `\uXXXX` escape, which can only be inside a string there,
//! so the line parses to the same value; in a text line it becomes the
//! `\u{…}` escape [`super::line`] shows, the line's own final newline and
//! tabs kept, and, when the log is coloured, the colour sequences the
//! formatter adds (`ESC [ digits ; m`, nothing else) kept.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io;

use super::dangerous;

/// What kind of line the formatter writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogStyle {
    /// One JSON object per line.
    Json,
    /// A line for people; `color` when the formatter adds colour sequences.
    Text { color: bool },
}

/// `line` (one event, with or without its final newline) with nothing a
/// terminal would obey left raw, written as `style` escapes it.
pub fn log_line(line: &str, style: LogStyle) -> Cow<'_, str> {
    let (body, end) = match line.strip_suffix('\n') {
        Some(body) => (body, "\n"),
        None => (line, ""),
    };
    let keep_colour = matches!(style, LogStyle::Text { color: true });
    let needs = body.char_indices().any(|(at, c)| {
        dangerous(c) && c != '\t' && !(keep_colour && colour_at(body, at).is_some())
    });
    if !needs {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len() + 16);
    let mut at = 0;
    while let Some(c) = body.get(at..).and_then(|rest| rest.chars().next()) {
        if keep_colour {
            if let Some(len) = colour_at(body, at) {
                out.push_str(body.get(at..at + len).unwrap_or_default());
                at += len;
                continue;
            }
        }
        if !dangerous(c) || c == '\t' {
            out.push(c);
        } else {
            match style {
                LogStyle::Json => {
                    for unit in c.encode_utf16(&mut [0; 2]) {
                        // Writing into a String cannot fail.
                        let _ = write!(out, "\\u{unit:04x}");
                    }
                }
                LogStyle::Text { .. } => out.extend(c.escape_unicode()),
            }
        }
        at += c.len_utf8();
    }
    out.push_str(end);
    Cow::Owned(out)
}

/// The length of the colour sequence (SGR: `ESC [`, digits and `;`, `m`)
/// starting at byte `at` of `text`, if one does.
pub(crate) fn colour_at(text: &str, at: usize) -> Option<usize> {
    let rest = text.as_bytes().get(at..)?;
    let params = rest.strip_prefix(b"\x1b[")?;
    let digits = params
        .iter()
        .take_while(|b| b.is_ascii_digit() || **b == b';')
        .count();
    (params.get(digits) == Some(&b'm')).then_some(2 + digits + 1)
}

/// A writer for the log formatter: each write is one event's line,
/// rewritten by [`log_line`] before it reaches `inner`.
#[derive(Debug)]
pub struct SafeLogWriter<W> {
    inner: W,
    style: LogStyle,
}

impl<W: io::Write> SafeLogWriter<W> {
    pub fn new(inner: W, style: LogStyle) -> SafeLogWriter<W> {
        SafeLogWriter { inner, style }
    }
}

impl<W: io::Write> io::Write for SafeLogWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        self.inner
            .write_all(log_line(&text, self.style).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_rewritten_exactly() {
        assert_eq!(
            log_line(
                "{\"m\":\"a\u{9b}b\u{202e}\x7f\u{1f600}\"}\n",
                LogStyle::Json
            ),
            "{\"m\":\"a\\u009bb\\u202e\\u007f\u{1f600}\"}\n"
        );
        assert_eq!(
            log_line(
                "\x1b[2mts\x1b[0m a\nb\u{202e}\tc\x1b]0;t\x07\n",
                LogStyle::Text { color: true }
            ),
            "\x1b[2mts\x1b[0m a\\u{a}b\\u{202e}\tc\\u{1b}]0;t\\u{7}\n"
        );
        assert_eq!(
            log_line("\x1b[2mts\x1b[0m\n", LogStyle::Text { color: false }),
            "\\u{1b}[2mts\\u{1b}[0m\n"
        );
        assert!(matches!(
            log_line("plain café\n", LogStyle::Text { color: false }),
            Cow::Borrowed(_)
        ));
    }
}

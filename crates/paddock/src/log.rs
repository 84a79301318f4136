//! The log `paddock` writes on stderr, built in one place for the CLI and
//! its tests: filtered (`-q`/`-v`, `PADDOCK_LOG`), as text lines for
//! people or one JSON object per event for a collector (`--log-format`),
//! every line redacted (`redact::RedactingWriter`: a key that reaches a
//! message is not printed) and made safe on a terminal
//! (`terminal_text::log_line`: nothing a job wrote reaches the terminal as
//! a control, and one event stays one line), a line the sink refuses
//! dropped (a closed stderr never panics a thread). The sink is passed in,
//! stderr for the binary, a buffer for a test.

use std::io;

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;
use crate::redact::RedactingWriter;
use crate::terminal_text::log_line::{LogStyle, SafeLogWriter};

/// The log's subscriber writing to what `sink` makes, each event's line
/// redacted then escaped; `color` adds the formatter's colours to text.
pub fn subscriber<S, F>(
    format: LogFormat,
    color: bool,
    filter: EnvFilter,
    sink: F,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    S: io::Write,
    F: Fn() -> S + Send + Sync + 'static,
{
    let style = match format {
        LogFormat::Text => LogStyle::Text { color },
        LogFormat::Json => LogStyle::Json,
    };
    // A line the sink refuses (stderr a pipe whose reader went away:
    // `paddock run … 2>&1 | head`) is dropped: the formatter's own report
    // of it is an `eprintln!`, which panics on that same closed stderr,
    // and did in whichever thread logged (the store's worker: the job
    // failed, exit 70, mid-run).
    let log = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .log_internal_errors(false)
        .with_writer(move || RedactingWriter::new(SafeLogWriter::new(sink(), style)));
    match format {
        LogFormat::Text => Box::new(log.with_ansi(color).finish()),
        LogFormat::Json => Box::new(log.json().with_ansi(false).finish()),
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use crate::terminal_text::dangerous;
    use crate::terminal_text::log_line::colour_at;

    use super::*;

    /// What the job says: erase the line, move up, the clipboard, a C1
    /// CSI, a right-to-left override, DEL, C1's next line, an isolate, a
    /// right-to-left mark, and a newline that starts a forged line.
    const HOSTILE: &str = "a\x1b[2K\x1b[1Ab\x1b]52;c;ZXZpbA==\x07 \u{9b}31m \u{202e}evil \x7f\u{85}\u{2066}x\u{2069}\u{200f}\u{61c}\n2026-01-01T00:00:00Z  INFO forged";

    fn raw(text: &str) -> Option<char> {
        text.trim_end_matches('\n')
            .chars()
            .find(|&c| dangerous(c) && c != '\t' && c != '\x1b')
    }

    /// The log as `paddock` builds it (`subscriber`), with a
    /// hostile message and field, captured.
    fn logged(format: LogFormat, color: bool) -> String {
        #[derive(Clone, Default)]
        struct Buf(Arc<Mutex<Vec<u8>>>);
        impl io::Write for Buf {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let sink = buf.clone();
        let subscriber = subscriber(
            format,
            color,
            tracing_subscriber::EnvFilter::new("info"),
            move || sink.clone(),
        );
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!("serve: job j1: {HOSTILE}");
            tracing::info!(reason = %HOSTILE, path = "/x", "refused a request");
        });
        let bytes = buf.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn json_lines_carry_no_control_and_parse_back_to_the_text() {
        let text = logged(LogFormat::Json, false);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        for line in &lines {
            assert_eq!(line.chars().find(|&c| dangerous(c)), None, "{line}");
        }
        let first: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(
            first["fields"]["message"],
            serde_json::json!(format!("serve: job j1: {HOSTILE}"))
        );
        let second: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(
            (&second["fields"]["reason"], &second["fields"]["path"]),
            (&serde_json::json!(HOSTILE), &serde_json::json!("/x"))
        );
    }

    #[test]
    fn text_lines_are_one_per_event_with_controls_shown_escaped() {
        for color in [false, true] {
            let text = logged(LogFormat::Text, color);
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), 2, "{text}");
            for line in &lines {
                assert_eq!(raw(line), None, "{line}");
                // The only escape sequences left are the formatter's colours.
                let mut rest = *line;
                while let Some(at) = rest.find('\x1b') {
                    let len = colour_at(rest, at).unwrap_or_else(|| panic!("{line:?}"));
                    rest = &rest[at + len..];
                }
                assert_eq!(color, line.contains('\x1b'), "{line:?}");
            }
            assert!(
                lines[0].contains(r"\u{202e}evil") && lines[0].contains(r"\u{a}2026-01-01"),
                "{:?}",
                lines[0]
            );
        }
    }
}

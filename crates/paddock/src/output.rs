//! What Paddock keeps of an engine's output, in bounded memory whatever the
//! engine prints: the raw bytes go to their artifact (`engine.jsonl`,
//! `engine.stderr`) as they arrive, redacted in windows that never cut a
//! secret or token in two ([`ArtifactWriter`]); stdout is split into lines
//! of which at most `limits.max_line_bytes` are held ([`LineSplitter`]);
//! stderr keeps only a short tail for the job's reason ([`Tail`]); and the
//! text fields of an event are cut to `limits.max_event_bytes`
//! ([`cap_event`]). Invalid UTF-8 never stops the reading: it is decoded
//! lossily and reported.

use std::path::PathBuf;

use paddock_protocol::EventBody;
use serde_json::Value;
use tokio::io::AsyncWriteExt;

use crate::redact::Redactor;

/// Text gathered before an artifact window is redacted and written.
const WINDOW: usize = 256 << 10;
/// The end of a window kept back for the next one, so that a match that
/// starts near the end is seen whole.
const OVERLAP: usize = 64 << 10;
/// Past this much pending text a window is written even when a match
/// spans its whole length (a hostile, endless "token").
const PENDING_MAX: usize = 4 << 20;

/// Decodes UTF-8 arriving in arbitrary chunks: a character cut between two
/// chunks is completed by the next one; invalid bytes become U+FFFD.
#[derive(Debug, Default)]
pub struct Utf8Decoder {
    partial: Vec<u8>,
    /// Invalid bytes were replaced.
    pub lossy: bool,
}

impl Utf8Decoder {
    /// The text of `bytes`, keeping an incomplete last character back.
    pub fn decode(&mut self, bytes: &[u8]) -> String {
        let mut all = std::mem::take(&mut self.partial);
        all.extend_from_slice(bytes);
        let keep = incomplete_tail(&all);
        self.partial = all.split_off(all.len() - keep);
        self.lossy_text(&all)
    }

    /// What is left at the end of the stream.
    pub fn finish(&mut self) -> String {
        let rest = std::mem::take(&mut self.partial);
        self.lossy_text(&rest)
    }

    fn lossy_text(&mut self, bytes: &[u8]) -> String {
        match String::from_utf8_lossy(bytes) {
            std::borrow::Cow::Borrowed(s) => s.to_string(),
            std::borrow::Cow::Owned(s) => {
                self.lossy = true;
                s
            }
        }
    }
}

/// How many bytes at the end of `bytes` start a character that is not
/// complete yet (0 to 3).
fn incomplete_tail(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Ok(_) => 0,
        Err(e) if e.error_len().is_none() => bytes.len() - e.valid_up_to(),
        Err(_) => {
            // An invalid byte earlier; look at the last character only.
            let start = bytes.len().saturating_sub(3);
            (start..bytes.len())
                .find(|&i| {
                    let b = bytes[i];
                    b >= 0xC0
                        && std::str::from_utf8(&bytes[i..])
                            .err()
                            .is_some_and(|e| e.error_len().is_none())
                })
                .map_or(0, |i| bytes.len() - i)
        }
    }
}

/// A redacted artifact written as the output arrives. A write error (a full
/// disk) stops the writing and is kept for the runner to report.
pub struct ArtifactWriter {
    path: PathBuf,
    file: Option<tokio::fs::File>,
    redactor: Redactor,
    decoder: Utf8Decoder,
    pending: String,
    /// The pending length at which a cut is looked for again: a search that
    /// found none (a match spans the whole window) is not repeated until the
    /// pending text has doubled, so each byte is scanned a bounded number of
    /// times however small the chunks (was: the whole pending text rescanned
    /// per chunk, quadratic on a long line).
    next_try_len: usize,
    /// Bytes handed to `safe_split` so far (what the bound above bounds).
    scanned: u64,
    error: Option<std::io::Error>,
}

impl ArtifactWriter {
    /// Creates (truncates) the artifact at `path`, never through a link
    /// or into a FIFO the job put there (`own_file::open_to_write`): that
    /// is the writer's first error, and nothing is written.
    pub async fn create(path: PathBuf, redactor: Redactor) -> ArtifactWriter {
        let (file, error) = match crate::own_file::open_to_write(&path) {
            Ok(f) => (Some(tokio::fs::File::from_std(f)), None),
            Err(e) => (None, Some(e)),
        };
        ArtifactWriter {
            path,
            file,
            redactor,
            decoder: Utf8Decoder::default(),
            pending: String::new(),
            next_try_len: WINDOW + OVERLAP,
            scanned: 0,
            error,
        }
    }

    /// Appends output bytes; writes a redacted window once enough arrived.
    pub async fn write(&mut self, bytes: &[u8]) {
        let text = self.decoder.decode(bytes);
        self.write_text(&text).await;
    }

    /// Appends output already decoded (a caller that needs the text itself
    /// decodes once and hands it here).
    pub async fn write_text(&mut self, text: &str) {
        self.pending.push_str(text);
        let len = self.pending.len();
        if len < self.next_try_len && len <= PENDING_MAX {
            return;
        }
        self.scanned += len as u64;
        let mut split = self.redactor.safe_split(&self.pending, OVERLAP);
        if split == 0 && len > PENDING_MAX {
            split = floor_char_boundary(&self.pending, len - OVERLAP);
        }
        if split > 0 {
            let rest = self.pending.split_off(split);
            let window = std::mem::replace(&mut self.pending, rest);
            self.put(&window).await;
            self.next_try_len = WINDOW + OVERLAP;
        } else {
            self.next_try_len = len.saturating_mul(2);
        }
    }

    /// Writes what is pending and flushes; the first error, if any, as
    /// `cannot write PATH: ERROR`.
    pub async fn finish(&mut self) -> Option<String> {
        let tail = self.decoder.finish();
        self.pending.push_str(&tail);
        let rest = std::mem::take(&mut self.pending);
        self.put(&rest).await;
        if let Some(f) = self.file.as_mut() {
            if let Err(e) = f.flush().await {
                self.error.get_or_insert(e);
            }
        }
        self.error
            .as_ref()
            .map(|e| format!("cannot write {}: {e}", self.path.display()))
    }

    /// The artifact's path.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// How many bytes the search for a safe cut has scanned so far.
    pub fn scanned(&self) -> u64 {
        self.scanned
    }

    /// The first write error, if any.
    pub fn error(&self) -> Option<&std::io::Error> {
        self.error.as_ref()
    }

    async fn put(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let Some(f) = self.file.as_mut() else {
            return;
        };
        let redacted = self.redactor.text(text);
        if let Err(e) = f.write_all(redacted.as_bytes()).await {
            self.error.get_or_insert(e);
            self.file = None;
        }
    }
}

/// The largest char boundary of `s` at or below `at`.
pub fn floor_char_boundary(s: &str, at: usize) -> usize {
    let mut i = at.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// One line of the engine's stdout, as much of it as is held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The line's first bytes, at most the cap (without the newline).
    pub bytes: Vec<u8>,
    /// The line's whole length in bytes.
    pub len: u64,
}

impl Line {
    /// The whole line was held.
    pub fn complete(&self) -> bool {
        self.len == self.bytes.len() as u64
    }
}

/// Splits output into lines holding at most `cap` bytes of each.
#[derive(Debug)]
pub struct LineSplitter {
    cap: usize,
    current: Vec<u8>,
    len: u64,
}

impl LineSplitter {
    pub fn new(cap: usize) -> LineSplitter {
        LineSplitter {
            cap,
            current: Vec::new(),
            len: 0,
        }
    }

    /// The lines `bytes` completes.
    pub fn push(&mut self, mut bytes: &[u8]) -> Vec<Line> {
        let mut lines = Vec::new();
        while !bytes.is_empty() {
            let (part, done) = match bytes.iter().position(|b| *b == b'\n') {
                Some(i) => (&bytes[..i], Some(i + 1)),
                None => (bytes, None),
            };
            let room = self.cap.saturating_sub(self.current.len());
            self.current
                .extend_from_slice(&part[..part.len().min(room)]);
            self.len += part.len() as u64;
            match done {
                Some(next) => {
                    lines.push(self.take());
                    bytes = &bytes[next..];
                }
                None => bytes = &[],
            }
        }
        lines
    }

    /// The last line, when the output did not end with a newline.
    pub fn finish(&mut self) -> Option<Line> {
        (self.len > 0).then(|| self.take())
    }

    fn take(&mut self) -> Line {
        let mut bytes = std::mem::take(&mut self.current);
        if bytes.last() == Some(&b'\r') && self.len == bytes.len() as u64 {
            bytes.pop();
            self.len -= 1;
        }
        let len = std::mem::take(&mut self.len);
        Line { bytes, len }
    }
}

/// The last bytes of a stream (stderr for the job's reason, a setup
/// command's output).
#[derive(Debug)]
pub struct Tail {
    max: usize,
    text: String,
}

impl Tail {
    pub fn new(max: usize) -> Tail {
        Tail {
            max,
            text: String::new(),
        }
    }

    pub fn push(&mut self, text: &str) {
        self.text.push_str(text);
        if self.text.len() > 2 * self.max {
            let cut = floor_char_boundary(&self.text, self.text.len() - self.max);
            self.text.drain(..cut);
        }
    }

    /// The last `max` bytes as they came (marked with `…` when cut).
    pub fn text(&self) -> String {
        keep_end(&self.text, self.max)
    }

    /// The last three non-empty lines, joined by ` | `, at most `max`
    /// bytes (the end kept).
    pub fn summary(&self) -> String {
        let lines: Vec<&str> = self
            .text
            .lines()
            .map(str::trim_end)
            .filter(|l| !l.trim().is_empty())
            .collect();
        let start = lines.len().saturating_sub(3);
        keep_end(&lines[start..].join(" | "), self.max)
    }
}

/// The longest reason a job record keeps (its end), in bytes: the
/// runner's conclusion and `paddock publish` (`results/republish.rs`)
/// keep a failure's reason to it alike.
pub const REASON_MAX: usize = 2000;

/// `text` cut to its last `max` bytes (at a character boundary), marked
/// with `…` when cut.
pub fn keep_end(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

/// The marker that ends cut text.
pub fn truncated_marker(original: usize) -> String {
    format!("…[truncated by paddock: {original} bytes]")
}

/// `s` cut to at most `max` bytes (plus the marker) when longer.
pub fn cap_string(s: &mut String, max: usize) {
    if s.len() > max {
        let original = s.len();
        let cut = floor_char_boundary(s, max);
        s.truncate(cut);
        s.push_str(&truncated_marker(original));
    }
}

/// How deep the JSON an event carries (a `raw` event's line, a tool
/// call's input) may nest: a value below is replaced by
/// [`too_deep_marker`]. An engine's line is read with serde_json's limit
/// of 128 levels, and the stored event wraps it in one more: a line
/// nested 127 deep was stored, then every read of the job's history
/// failed with serde_json's "recursion limit exceeded" (`paddock show`,
/// `events`, the closeout's facts, the reaper's reading of a dead job).
/// 64 leaves any reader room for the envelopes around an event.
pub const EVENT_JSON_DEPTH: usize = 64;

/// What stands for a JSON value nested deeper than [`EVENT_JSON_DEPTH`].
pub fn too_deep_marker() -> Value {
    Value::String(format!(
        "[paddock: nested deeper than {EVENT_JSON_DEPTH} levels, cut]"
    ))
}

/// `v` with every string cut to `max` bytes and every value nested
/// deeper than [`EVENT_JSON_DEPTH`] (`depth` is `v`'s own, 1 at the top)
/// replaced by [`too_deep_marker`].
fn cap_json(v: &mut Value, max: usize, depth: usize) {
    match v {
        Value::Array(_) | Value::Object(_) if depth > EVENT_JSON_DEPTH => *v = too_deep_marker(),
        Value::String(s) => cap_string(s, max),
        Value::Array(items) => items.iter_mut().for_each(|i| cap_json(i, max, depth + 1)),
        Value::Object(map) => map.values_mut().for_each(|i| cap_json(i, max, depth + 1)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// The event with every text field cut to `max` bytes, and the JSON it
/// carries cut at [`EVENT_JSON_DEPTH`] levels.
pub fn cap_event(mut body: EventBody, max: usize) -> EventBody {
    let opt = |s: &mut Option<String>| {
        if let Some(s) = s {
            cap_string(s, max);
        }
    };
    match &mut body {
        EventBody::Status { detail, .. } => opt(detail),
        EventBody::Text { text } | EventBody::Thought { text } => cap_string(text, max),
        EventBody::ToolCall {
            call_id,
            tool,
            command,
            input,
        } => {
            opt(call_id);
            cap_string(tool, max);
            opt(command);
            cap_json(input, max, 1);
        }
        EventBody::ToolResult {
            call_id, output, ..
        } => {
            opt(call_id);
            cap_string(output, max);
        }
        EventBody::FileChange { path, .. } => cap_string(path, max),
        EventBody::Usage { .. } | EventBody::ArtifactSummary { .. } => {}
        EventBody::Policy { rule, message } => {
            cap_string(rule, max);
            cap_string(message, max);
        }
        EventBody::Error {
            message, source, ..
        } => {
            cap_string(message, max);
            opt(source);
        }
        EventBody::Network(record) => {
            cap_string(&mut record.host, max);
            opt(&mut record.address);
            opt(&mut record.rule);
            opt(&mut record.reason);
        }
        EventBody::Raw {
            engine,
            event_type,
            data,
        } => {
            cap_string(engine, max);
            cap_string(event_type, max);
            cap_json(data, max, 1);
        }
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_hold_at_most_the_cap_and_count_the_rest() {
        let mut s = LineSplitter::new(4);
        assert_eq!(s.push(b"ab"), vec![]);
        assert_eq!(
            s.push(b"cdefg\nhi\r\n\nxyz"),
            vec![
                Line {
                    bytes: b"abcd".to_vec(),
                    len: 7
                },
                Line {
                    bytes: b"hi".to_vec(),
                    len: 2
                },
                Line {
                    bytes: vec![],
                    len: 0
                },
            ]
        );
        assert_eq!(
            s.finish(),
            Some(Line {
                bytes: b"xyz".to_vec(),
                len: 3
            })
        );
        assert_eq!(s.finish(), None);
    }

    #[test]
    fn utf8_split_between_chunks_is_joined_and_invalid_bytes_are_replaced() {
        let mut d = Utf8Decoder::default();
        let e = "é".as_bytes();
        assert_eq!(d.decode(&[b'a', e[0]]), "a");
        assert_eq!(d.decode(&[e[1], 0xFF, b'b']), "é\u{FFFD}b");
        assert!(d.lossy);
        assert_eq!(d.decode(&[0xE2, 0x82]), "");
        assert_eq!(d.finish(), "\u{FFFD}");
    }

    #[test]
    fn text_fields_are_cut_with_the_original_size() {
        let body = EventBody::ToolCall {
            call_id: None,
            tool: "shell".into(),
            command: Some("x".repeat(10)),
            input: serde_json::json!({"a": ["é".repeat(5)], "n": 1}),
        };
        assert_eq!(
            cap_event(body, 5),
            EventBody::ToolCall {
                call_id: None,
                tool: "shell".into(),
                command: Some(format!("xxxxx{}", truncated_marker(10))),
                input: serde_json::json!({"a": [format!("éé{}", truncated_marker(10))], "n": 1}),
            }
        );
    }

    #[test]
    fn the_tail_keeps_the_last_lines_within_its_size() {
        let mut t = Tail::new(30);
        t.push("first\n\nsecond\nthird\n");
        assert_eq!(t.summary(), "first | second | third");
        t.push(&"x".repeat(100));
        t.push("\nlast\n");
        assert_eq!(t.summary(), format!("…{} | last", "x".repeat(23)));
    }

    #[tokio::test]
    async fn an_artifact_is_redacted_across_windows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let mut w = ArtifactWriter::create(path.clone(), Redactor::new()).await;
        let token = "ghp_0123456789abcdefghijklmnopqrstuvwxyz";
        // Chunks of a size that puts the token across a window boundary.
        let mut expected = String::new();
        for i in 0..40 {
            let chunk = format!("{}{token} ", "a".repeat(20_000 + i));
            expected.push_str(&format!("{}[REDACTED] ", "a".repeat(20_000 + i)));
            for piece in chunk.as_bytes().chunks(7_777) {
                w.write(piece).await;
            }
        }
        assert!(w.finish().await.is_none());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), expected);
    }

    /// An artifact's path holding a link the job planted (to a host file)
    /// or a FIFO: nothing is written through it, the open does not wait,
    /// and the writer's error names the path.
    #[tokio::test]
    async fn an_artifact_is_never_written_through_a_link_or_into_a_fifo() {
        let dir = tempfile::tempdir().unwrap();
        let host = dir.path().join("bashrc");
        std::fs::write(&host, "the host's file\n").unwrap();
        let link = dir.path().join("engine.jsonl");
        std::os::unix::fs::symlink(&host, &link).unwrap();
        let fifo = dir.path().join("engine.stderr");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let mut said = Vec::new();
        for path in [&link, &fifo] {
            let opened = tokio::time::timeout(
                std::time::Duration::from_secs(5),
                ArtifactWriter::create(path.clone(), Redactor::new()),
            )
            .await;
            let Ok(mut w) = opened else {
                said.push(format!("{}: waited on", path.display()));
                continue;
            };
            w.write(b"hostile\n").await;
            said.push(w.finish().await.unwrap_or_else(|| "written".into()));
        }
        let eloop = std::io::Error::from_raw_os_error(nix::libc::ELOOP);
        let enxio = std::io::Error::from_raw_os_error(nix::libc::ENXIO);
        assert_eq!(
            (said, std::fs::read_to_string(&host).unwrap()),
            (
                vec![
                    format!("cannot write {}: {eloop}", link.display()),
                    format!("cannot write {}: {enxio}", fifo.display()),
                ],
                "the host's file\n".to_string()
            )
        );
    }

    /// One long "token" (a key pattern spanning several windows, so no cut
    /// is safe while it lasts) arriving in small chunks: the search for a
    /// cut scans each byte a bounded number of times (it rescanned the
    /// whole pending text per chunk: 290 MB for these 1.5 MiB, 160 s), and
    /// the artifact is still the redaction of the whole.
    #[tokio::test]
    async fn a_long_match_is_not_rescanned_per_chunk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let mut w = ArtifactWriter::create(path.clone(), Redactor::new()).await;
        let text = format!("sk-{}\nafter\n", "a".repeat(3 << 19));
        for piece in text.as_bytes().chunks(4 << 10) {
            w.write(piece).await;
        }
        assert!(w.finish().await.is_none());
        let total = text.len() as u64;
        assert!(
            w.scanned() <= 4 * total,
            "scanned {} bytes for {total}",
            w.scanned()
        );
        let written = std::fs::read_to_string(&path).unwrap();
        assert_eq!(written, "[REDACTED]\nafter\n");
    }
}

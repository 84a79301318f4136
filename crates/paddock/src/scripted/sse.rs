//! Server-sent-event framing and the small text helpers both wire renderers
//! share: one `event:`/`data:` frame per chunk, text cut into deltas the way a
//! model streams it, and JSON bodies (shell quoting is `crate::shell_word`).

use bytes::Bytes;
use serde_json::Value;

use super::ScriptedReply;

/// One SSE frame: `event: <name>\ndata: <json>\n\n`.
pub(crate) fn frame(name: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// A 200 `text/event-stream` reply.
pub(crate) fn stream_reply(chunks: Vec<Bytes>, abort_after: bool) -> ScriptedReply {
    ScriptedReply {
        status: 200,
        content_type: "text/event-stream".to_owned(),
        chunks,
        abort_after,
    }
}

/// A complete `application/json` reply.
pub(crate) fn json_reply(status: u16, body: &Value) -> ScriptedReply {
    ScriptedReply {
        status,
        content_type: "application/json".to_owned(),
        chunks: vec![Bytes::from(body.to_string())],
        abort_after: false,
    }
}

/// Cuts text into the pieces a model would stream: runs of about
/// [`DELTA_LEN`] bytes, broken after whitespace where possible. The pieces
/// concatenate to `text`; empty text has none.
pub(crate) fn deltas(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for (index, ch) in text.char_indices() {
        let end = index + ch.len_utf8();
        let len = end - start;
        if (ch.is_whitespace() && len >= DELTA_LEN) || len >= 2 * DELTA_LEN {
            if let Some(piece) = text.get(start..end) {
                pieces.push(piece);
            }
            start = end;
        }
    }
    if let Some(rest) = text.get(start..) {
        if !rest.is_empty() {
            pieces.push(rest);
        }
    }
    pieces
}

/// The preferred size of a text delta, in bytes.
const DELTA_LEN: usize = 16;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn frames_an_event() {
        assert_eq!(
            frame("ping", &json!({"type": "ping"})),
            Bytes::from_static(b"event: ping\ndata: {\"type\":\"ping\"}\n\n")
        );
    }

    #[test]
    fn deltas_concatenate_to_the_text() {
        assert_eq!(deltas(""), Vec::<&str>::new());
        assert_eq!(deltas("short"), vec!["short"]);
        assert_eq!(
            deltas("I will run the tests and then write the notes file."),
            vec![
                "I will run the tests ",
                "and then write the ",
                "notes file."
            ]
        );
        let unbroken = "é".repeat(40);
        let pieces = deltas(&unbroken);
        assert_eq!(pieces.concat(), unbroken);
        assert_eq!(pieces.len(), 3);
    }
}

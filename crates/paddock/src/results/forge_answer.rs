//! A forge's answer read within bounds, as it streams in. Anyone may post
//! the comments Paddock lists (GitLab takes 1,000,000 characters a note,
//! and JSON may spell each one in 12 bytes: a page of 100 notes is up to
//! 1.2 GB of answer), and the forge's endpoint is whatever URL the user
//! configured. So the answer is never read whole first: each JSON string
//! in it is cut at [`MAX_STRING`] bytes as its bytes arrive (at a
//! character and escape boundary, so the rest still decodes), and the
//! whole answer, so cut, is at most [`MAX_ANSWER`] bytes. Paddock reads no
//! field of a forge's answer that needs more than a few kilobytes (the
//! longest, a comment's body, is kept to `forge_http::BODY_KEPT`), so a
//! cut string only ever loses what would have been cut later, and a real
//! page of 100 items fits the whole bound many times over.

/// The most bytes of one JSON string kept as an answer is read (as sent,
/// escapes and all; the string's closing quote kept). At 12 bytes a
/// character (an escaped surrogate pair) that is still more than
/// `forge_http::BODY_KEPT`, so a comment's body cut here is cut again,
/// and marked as cut, as it is decoded.
pub const MAX_STRING: usize = 256 * 1024;

/// The most bytes of one answer kept, its strings cut: past it, a
/// successful answer is an error (nothing of it is taken), a failure's
/// body is read no further.
pub const MAX_ANSWER: usize = 64 * 1024 * 1024;

/// Where the cutter is in the JSON text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escape {
    /// Not in an escape.
    None,
    /// Right after a backslash.
    Backslash,
    /// In a `\u` escape: how many hex digits were seen and their value.
    Hex(u8, u16),
}

/// Cuts the long strings of a JSON text fed to it in pieces. It follows
/// only strings and their escapes: what is not valid JSON stays invalid
/// (and fails to decode), but never makes the cutter keep more.
#[derive(Debug)]
pub struct StringCutter {
    /// The bytes of one string kept at most.
    limit: usize,
    in_string: bool,
    /// Bytes of the current string kept so far.
    len: usize,
    escape: Escape,
    /// The last escape was a high surrogate (`\uD800`–`\uDBFF`): a cut
    /// before its low half would leave a lone surrogate, which does not
    /// decode.
    after_high: bool,
    /// The rest of the current string is dropped, up to its closing quote.
    cutting: bool,
}

impl StringCutter {
    /// A cutter keeping `limit` bytes of each string.
    pub fn new(limit: usize) -> StringCutter {
        StringCutter {
            limit,
            in_string: false,
            len: 0,
            escape: Escape::None,
            after_high: false,
            cutting: false,
        }
    }

    /// Appends `chunk`, its strings cut, to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        for &b in chunk {
            self.byte(b, out);
        }
    }

    fn byte(&mut self, b: u8, out: &mut Vec<u8>) {
        if !self.in_string {
            out.push(b);
            if b == b'"' {
                self.in_string = true;
                self.len = 0;
                self.escape = Escape::None;
                self.after_high = false;
                self.cutting = false;
            }
            return;
        }
        if !self.cutting && self.len >= self.limit {
            // A cut here keeps whole characters and escapes; past a few
            // bytes more (a surrogate pair's low half) it is made anyway:
            // text that keeps it from a boundary is not JSON.
            let at_boundary =
                self.escape == Escape::None && !self.after_high && (b & 0xC0) != 0x80 && b != b'"';
            if at_boundary || self.len >= self.limit + 16 {
                self.cutting = true;
                self.escape = match self.escape {
                    Escape::Backslash => Escape::Backslash,
                    Escape::None | Escape::Hex(..) => Escape::None,
                };
            }
        }
        if self.cutting {
            match (self.escape, b) {
                (Escape::Backslash, _) => self.escape = Escape::None,
                (_, b'\\') => self.escape = Escape::Backslash,
                (_, b'"') => {
                    out.push(b);
                    self.in_string = false;
                }
                _ => {}
            }
            return;
        }
        out.push(b);
        self.len += 1;
        match self.escape {
            Escape::None => match b {
                b'\\' => self.escape = Escape::Backslash,
                b'"' => self.in_string = false,
                _ => self.after_high = false,
            },
            Escape::Backslash => {
                self.escape = match b {
                    b'u' => Escape::Hex(0, 0),
                    _ => {
                        self.after_high = false;
                        Escape::None
                    }
                }
            }
            Escape::Hex(seen, value) => {
                let digit = (b as char).to_digit(16).unwrap_or(0) as u16;
                let value = value.wrapping_mul(16).wrapping_add(digit);
                self.escape = if seen + 1 == 4 {
                    self.after_high = (0xD800..=0xDBFF).contains(&value);
                    Escape::None
                } else {
                    Escape::Hex(seen + 1, value)
                };
            }
        }
    }
}

/// An answer's body as read: its strings cut, and whether it was read to
/// its end (`false`: it was over [`MAX_ANSWER`], and reading stopped).
#[derive(Debug)]
pub struct Answer {
    pub bytes: Vec<u8>,
    pub whole: bool,
}

/// Reads `resp`'s body as it streams in, its strings cut at
/// [`MAX_STRING`], and stops past [`MAX_ANSWER`].
pub async fn read(mut resp: reqwest::Response) -> Result<Answer, reqwest::Error> {
    read_within(&mut resp, MAX_STRING, MAX_ANSWER).await
}

async fn read_within(
    resp: &mut reqwest::Response,
    max_string: usize,
    max_answer: usize,
) -> Result<Answer, reqwest::Error> {
    let mut cutter = StringCutter::new(max_string);
    let mut bytes = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        cutter.feed(&chunk, &mut bytes);
        if bytes.len() > max_answer {
            bytes.truncate(max_answer);
            return Ok(Answer {
                bytes,
                whole: false,
            });
        }
    }
    Ok(Answer { bytes, whole: true })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(text: &str, limit: usize) -> String {
        let mut out = Vec::new();
        let mut cutter = StringCutter::new(limit);
        // Byte by byte: every boundary between two pieces is met.
        for b in text.as_bytes() {
            cutter.feed(std::slice::from_ref(b), &mut out);
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn short_strings_and_everything_outside_strings_pass_as_they_are() {
        let text =
            r#"[{"id": 1, "body": "a \"quoted\" \\ word \u00e9", "n": [1, 2.5, null, true]}]"#;
        assert_eq!(cut(text, 64), text);
    }

    #[test]
    fn a_long_string_is_cut_at_the_limit_and_the_rest_of_the_text_kept() {
        let long = "x".repeat(100);
        let text = format!(r#"{{"body": "{long}", "id": 7, "other": "short"}}"#);
        assert_eq!(
            cut(&text, 10),
            r#"{"body": "xxxxxxxxxx", "id": 7, "other": "short"}"#
        );
    }

    #[test]
    fn a_cut_never_splits_a_character_an_escape_or_a_surrogate_pair() {
        // Each cut string must still decode, whatever the limit falls on.
        let body = "é€😀\\\"\n\u{1}".repeat(20);
        let encoded = serde_json::to_string(&serde_json::json!({
            "body": body,
            "pair": "\u{1F600}".repeat(20),
        }))
        .unwrap();
        // serde_json writes 😀 raw; an escaped pair is what other writers send.
        let escaped = encoded.replace('😀', "\\ud83d\\ude00");
        for text in [&encoded, &escaped] {
            // From 4: object keys are strings too, and these are 4 bytes.
            for limit in 4..80 {
                let kept = cut(text, limit);
                let value: serde_json::Value = serde_json::from_str(&kept)
                    .unwrap_or_else(|e| panic!("limit {limit}: {e}: {kept}"));
                for (field, whole) in [("body", &body), ("pair", &"\u{1F600}".repeat(20))] {
                    let kept = value[field].as_str().unwrap();
                    assert!(
                        whole.starts_with(kept) && kept.len() <= limit + 4,
                        "limit {limit}, {field}: {kept:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_string_that_never_reaches_a_boundary_is_cut_a_few_bytes_past_the_limit() {
        // High surrogates, each keeping the cut off the next: not JSON, and
        // never kept past the limit and one escape.
        let text = format!(r#"["{}"]"#, "\\ud83d".repeat(1000));
        let kept = cut(&text, 100);
        assert!(kept.len() < 100 + 16 + 8, "{} bytes", kept.len());
        assert!(kept.ends_with("\"]"), "{kept}");
    }

    /// Serves `body` once on a loopback port, as a forge would, without a
    /// length (read to the connection's close), in 64 KiB writes.
    async fn serve(body: Vec<u8>) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 4096];
            let _ = conn.read(&mut request).await.unwrap();
            let head =
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";
            conn.write_all(head.as_bytes()).await.unwrap();
            for piece in body.chunks(64 * 1024) {
                if conn.write_all(piece).await.is_err() {
                    return;
                }
            }
        });
        format!("http://{addr}/")
    }

    #[tokio::test]
    async fn an_answer_is_read_with_its_strings_cut_and_stops_past_its_bound() {
        let mut page = b"[".to_vec();
        for id in 0..4 {
            page.extend(format!(r#"{{"id": {id}, "body": ""#).bytes());
            page.extend(std::iter::repeat_n(b'a', 3 << 20));
            page.extend(br#""},"#);
        }
        page.extend(br#"{"id": 4, "body": "short"}]"#);
        let url = serve(page).await;
        let mut resp = reqwest::get(&url).await.unwrap();
        let answer = read_within(&mut resp, 1024, 1 << 20).await.unwrap();
        assert!(answer.whole);
        let items: Vec<serde_json::Value> = serde_json::from_slice(&answer.bytes).unwrap();
        let kept: Vec<(u64, usize)> = items
            .iter()
            .map(|i| (i["id"].as_u64().unwrap(), i["body"].as_str().unwrap().len()))
            .collect();
        assert_eq!(
            kept,
            vec![(0, 1024), (1, 1024), (2, 1024), (3, 1024), (4, 5)]
        );

        // Outside strings nothing is cut: 3 MiB of spaces is over a 1 MiB
        // answer, and reading stops there.
        let mut page = b"[".to_vec();
        page.extend(std::iter::repeat_n(b' ', 3 << 20));
        page.extend(b"]");
        let url = serve(page).await;
        let mut resp = reqwest::get(&url).await.unwrap();
        let answer = read_within(&mut resp, 1024, 1 << 20).await.unwrap();
        assert!(!answer.whole);
        assert_eq!(answer.bytes.len(), 1 << 20);
    }
}

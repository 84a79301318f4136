//! The meter reads a copy of an upstream response as it streams past and
//! extracts what the ledger needs: the served model, token usage, whether the
//! response completed, and the upstream's error message. It understands the
//! OpenAI Responses, OpenAI Chat Completions and Anthropic Messages SSE
//! streams and their JSON (non-streaming and error) bodies, and Bedrock's
//! AWS event stream, whose chunks carry Messages events; and the service
//! tier the answer says it was served in (OpenAI's `service_tier`,
//! Anthropic's `usage.service_tier`), which prices the call. It never
//! changes a byte of the stream.

use paddock_protocol::TokenUsage;
use serde_json::Value;

use super::error_text::{error_message, truncate};
use super::wire::{answer_bytes, note_tier, NO_BODY_USAGE};

pub use super::wire::Api;

pub use super::reading::Reading;

/// An incremental reader of one response body.
#[derive(Debug)]
pub struct Meter {
    api: Api,
    sse: bool,
    /// Bedrock's AWS event stream: frames whose chunks are Messages events.
    frames: Option<super::eventstream::Decoder>,
    buf: Vec<u8>,
    /// How far `buf` has been searched for an event's end: each byte is
    /// looked at once, however the upstream splits its chunks.
    scanned: usize,
    /// The most the meter holds of one SSE event or a JSON body
    /// (`broker.max_upstream_event_bytes`).
    limit: usize,
    /// Set once the body passed `limit`: why the meter stopped reading.
    over_limit: Option<String>,
    reading: Reading,
    /// Bytes looked at while searching for event ends (tests check that
    /// the search is linear).
    #[cfg(test)]
    examined: usize,
}

impl Meter {
    /// A meter of an `api` body of `content_type`, holding at most `limit`
    /// bytes of one event (or of a whole JSON body).
    pub fn new(api: Api, content_type: &str, limit: usize) -> Meter {
        Meter {
            api,
            sse: content_type.starts_with("text/event-stream"),
            frames: content_type
                .starts_with(super::eventstream::CONTENT_TYPE)
                .then(|| super::eventstream::Decoder::new(limit)),
            buf: Vec::new(),
            scanned: 0,
            limit,
            over_limit: None,
            reading: Reading::default(),
            #[cfg(test)]
            examined: 0,
        }
    }

    /// Feeds the next chunk of the body.
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.over_limit.is_some() {
            return;
        }
        if let Some(frames) = self.frames.as_mut() {
            for event in frames.feed(chunk) {
                match event {
                    super::eventstream::Event::Chunk(v) => {
                        let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
                        self.api.read_event(&mut self.reading, kind, &v);
                    }
                    super::eventstream::Event::Exception { kind, message } => {
                        self.reading.error = Some(format!("{kind}: {message}"));
                    }
                    super::eventstream::Event::TooLarge { len } => {
                        self.stop(format!("an event-stream frame of {len} bytes"));
                    }
                    super::eventstream::Event::Other => {}
                }
            }
            return;
        }
        if self.buf.len() + chunk.len() > self.limit && !self.sse {
            self.stop(format!("a response body of more than {} bytes", self.limit));
            return;
        }
        self.buf.extend_from_slice(chunk);
        if !self.sse {
            return;
        }
        while let Some((end, sep)) = self.next_event_end() {
            let event: Vec<u8> = self.buf.drain(..end + sep).collect();
            self.scanned = 0;
            self.sse_event(&event[..end]);
        }
        if self.buf.len() > self.limit {
            self.stop(format!("an SSE event of more than {} bytes", self.limit));
        }
    }

    /// Stops reading past the limit: the copy is dropped and the reading
    /// carries why.
    fn stop(&mut self, what: String) {
        let message = format!(
            "paddock broker: the upstream sent {what}, past broker.max_upstream_event_bytes ({} bytes)",
            self.limit
        );
        self.buf = Vec::new();
        self.scanned = 0;
        self.reading.error = Some(message.clone());
        self.over_limit = Some(message);
    }

    /// Why the meter stopped reading (the body passed the limit), if it did:
    /// the broker then cuts the response, since it can no longer meter it.
    pub fn over_limit(&self) -> Option<&str> {
        self.over_limit.as_deref()
    }

    /// The end of the first complete SSE event in `buf`: (index of the
    /// blank line, length of the separator). Only bytes not searched before
    /// are looked at (from three bytes back, for a separator split across
    /// chunks).
    fn next_event_end(&mut self) -> Option<(usize, usize)> {
        let from = self.scanned.saturating_sub(3);
        let found = find_event_end(&self.buf[from..]).map(|(i, sep)| (from + i, sep));
        #[cfg(test)]
        {
            self.examined += found.map_or(self.buf.len(), |(i, sep)| i + sep) - from;
        }
        self.scanned = self.buf.len();
        found
    }

    /// The tokens of the response so far, for budget checks while it
    /// streams: the usage reported so far, with output at least the
    /// generated bytes / 4; before any usage, the request bytes / 4 as
    /// input.
    pub fn running_usage(&self, request_bytes: u64) -> TokenUsage {
        self.reading.running_usage(request_bytes)
    }

    pub fn api(&self) -> Api {
        self.api
    }

    /// True once the response's terminal event arrived.
    pub fn completed(&self) -> bool {
        self.reading.completed
    }

    /// True when the body is a stream (SSE or an AWS event stream).
    pub fn is_sse(&self) -> bool {
        self.sse || self.frames.is_some()
    }

    /// True when the body is an AWS event stream.
    pub fn is_eventstream(&self) -> bool {
        self.frames.is_some()
    }

    /// True when an SSE event (or an event-stream frame) has started but
    /// not ended.
    pub fn mid_event(&self) -> bool {
        match &self.frames {
            Some(frames) => frames.mid_frame(),
            // Past the limit the copy is gone but the engine holds part of
            // an event.
            None => self.sse && (!self.buf.is_empty() || self.over_limit.is_some()),
        }
    }

    /// The model the upstream says serves the response, so far.
    pub fn served_model(&self) -> Option<&str> {
        self.reading.served_model.as_deref()
    }

    /// Of the cache writes reported so far, those kept an hour.
    pub fn hour_writes(&self) -> u64 {
        self.reading.hour_writes
    }

    /// The service tier the upstream says serves the response, so far.
    pub fn service_tier(&self) -> Option<&str> {
        self.reading.service_tier.as_deref()
    }

    /// Ends the body and returns the reading.
    pub fn finish(mut self, http_status: u16) -> Reading {
        if self.frames.is_some() || self.over_limit.is_some() {
            // A partial last frame carries nothing complete to read; past
            // the limit nothing is left to read.
        } else if self.sse {
            if !self.buf.is_empty() {
                let rest = std::mem::take(&mut self.buf);
                self.sse_event(&rest);
            }
        } else {
            let body = std::mem::take(&mut self.buf);
            match serde_json::from_slice::<Value>(&body) {
                Ok(v) if http_status >= 400 => self.reading.error = Some(error_message(&v)),
                Ok(v) => self.json_body(&v),
                Err(_) if http_status >= 400 => {
                    let text = String::from_utf8_lossy(&body);
                    self.reading.error = Some(truncate(text.trim(), 500));
                }
                Err(_) => {}
            }
        }
        if http_status >= 400 && self.reading.error.is_none() {
            self.reading.error = Some(format!("HTTP {http_status}"));
        }
        self.reading
    }

    fn sse_event(&mut self, raw: &[u8]) {
        let text = String::from_utf8_lossy(raw);
        let mut data = String::new();
        for line in text.lines() {
            if let Some(d) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(d.strip_prefix(' ').unwrap_or(d));
            }
        }
        if data == "[DONE]" && self.api == Api::Chat {
            self.reading.completed = true;
            return;
        }
        if data.is_empty() || data == "[DONE]" {
            return;
        }
        let Ok(v) = serde_json::from_str::<Value>(&data) else {
            return;
        };
        let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
        self.api.read_event(&mut self.reading, kind, &v);
    }

    fn json_body(&mut self, v: &Value) {
        if let Some(m) = v.get("model").and_then(Value::as_str) {
            self.reading.served_model = Some(m.to_string());
        }
        // OpenAI: top level; Anthropic: in `usage`.
        note_tier(&mut self.reading, Some(v));
        note_tier(&mut self.reading, v.get("usage"));
        match v.get("usage").filter(|u| u.is_object()) {
            Some(u) => {
                self.reading.usage = Some(self.api.body_usage(&mut self.reading, u));
                self.api.note_body_usage(&mut self.reading, u);
            }
            // The answer came whole: complete, but with nothing to price
            // it by.
            None => {
                self.reading
                    .bad_usage
                    .get_or_insert_with(|| NO_BODY_USAGE.to_string());
            }
        }
        // An answer whose usage is not priced as it is (none, or a count
        // malformed) is estimated: its output from its text, as a stream's
        // is from its deltas.
        if self.reading.bad_usage.is_some() {
            self.reading.generated_bytes = answer_bytes(v);
        }
        self.reading.completed = true;
        self.reading.usage_final = self.reading.usage.is_some();
    }
}

/// Finds the end of the first SSE event in `buf`: (index of the blank line,
/// length of the separator).
fn find_event_end(buf: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    while i + 1 < buf.len() {
        if buf[i] == b'\n' && buf[i + 1] == b'\n' {
            return Some((i, 2));
        }
        if i + 3 < buf.len() && &buf[i..i + 4] == b"\r\n\r\n" {
            return Some((i, 4));
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: usize = 1 << 20;

    fn sse(events: &[(&str, Value)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, data) in events {
            out.extend_from_slice(format!("event: {name}\ndata: {data}\n\n").as_bytes());
        }
        out
    }

    #[test]
    fn responses_stream_usage_split_across_chunks() {
        let body = sse(&[
            (
                "response.created",
                serde_json::json!({"type":"response.created","response":{"model":"gpt-5.5"}}),
            ),
            (
                "response.output_text.delta",
                serde_json::json!({"type":"response.output_text.delta","delta":"hello"}),
            ),
            (
                "response.completed",
                serde_json::json!({"type":"response.completed","response":{"model":"gpt-5.5-2026","service_tier":"priority","usage":{
                    "input_tokens": 1200, "input_tokens_details": {"cached_tokens": 200},
                    "output_tokens": 80, "output_tokens_details": {"reasoning_tokens": 30}, "total_tokens": 1280}}}),
            ),
        ]);
        let mut m = Meter::new(Api::Responses, "text/event-stream", LIMIT);
        for chunk in body.chunks(7) {
            m.feed(chunk);
        }
        assert_eq!(
            m.finish(200),
            Reading {
                served_model: Some("gpt-5.5-2026".into()),
                usage: Some(TokenUsage {
                    input_tokens: 1000,
                    cached_input_tokens: 200,
                    cache_write_tokens: 0,
                    output_tokens: 80,
                    reasoning_tokens: 30,
                }),
                usage_final: true,
                completed: true,
                error: None,
                generated_bytes: 5,
                service_tier: Some("priority".into()),
                hour_writes: 0,
                bad_usage: None,
            }
        );
    }

    #[test]
    fn messages_delta_usage_is_cumulative_not_summed() {
        let body = sse(&[
            (
                "message_start",
                serde_json::json!({"type":"message_start","message":{"model":"claude-sonnet-4-5","usage":{
                    "input_tokens": 10, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 1000, "output_tokens": 1,
                    "cache_creation": {"ephemeral_5m_input_tokens": 600, "ephemeral_1h_input_tokens": 400},
                    "service_tier": "standard"}}}),
            ),
            (
                "message_delta",
                serde_json::json!({"type":"message_delta","usage":{"output_tokens": 5}}),
            ),
            (
                "message_delta",
                serde_json::json!({"type":"message_delta","usage":{"output_tokens": 7}}),
            ),
            ("message_stop", serde_json::json!({"type":"message_stop"})),
        ]);
        let mut m = Meter::new(Api::Messages, "text/event-stream; charset=utf-8", LIMIT);
        m.feed(&body);
        assert_eq!(
            m.finish(200),
            Reading {
                served_model: Some("claude-sonnet-4-5".into()),
                usage: Some(TokenUsage {
                    input_tokens: 10,
                    cached_input_tokens: 100,
                    cache_write_tokens: 1000,
                    output_tokens: 7,
                    reasoning_tokens: 0,
                }),
                usage_final: true,
                completed: true,
                error: None,
                generated_bytes: 0,
                service_tier: Some("standard".into()),
                hour_writes: 400,
                bad_usage: None,
            }
        );
    }

    #[test]
    fn bedrock_event_stream_is_metered_as_messages() {
        use crate::broker::eventstream::{chunk, exception};
        let events = [
            serde_json::json!({"type":"message_start","message":{"model":"claude-sonnet-4-5-20250929","usage":{
                "input_tokens": 10, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 1000, "output_tokens": 1}}}),
            serde_json::json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hello"}}),
            serde_json::json!({"type":"message_delta","usage":{"output_tokens": 7}}),
            serde_json::json!({"type":"message_stop"}),
        ];
        let body: Vec<u8> = events.iter().flat_map(|e| chunk(e).to_vec()).collect();
        let mut m = Meter::new(Api::Messages, "application/vnd.amazon.eventstream", LIMIT);
        for piece in body.chunks(5) {
            m.feed(piece);
        }
        assert!(m.is_sse() && m.is_eventstream() && !m.mid_event());
        assert_eq!(
            m.finish(200),
            Reading {
                served_model: Some("claude-sonnet-4-5-20250929".into()),
                usage: Some(TokenUsage {
                    input_tokens: 10,
                    cached_input_tokens: 100,
                    cache_write_tokens: 1000,
                    output_tokens: 7,
                    reasoning_tokens: 0,
                }),
                usage_final: true,
                completed: true,
                error: None,
                generated_bytes: 5,
                service_tier: None,
                hour_writes: 0,
                bad_usage: None,
            }
        );

        let mut m = Meter::new(Api::Messages, "application/vnd.amazon.eventstream", LIMIT);
        m.feed(&chunk(&events[0]));
        m.feed(&exception("throttlingException", "Too many tokens"));
        let r = m.finish(200);
        assert_eq!(
            (r.error.as_deref(), r.completed, r.usage_final),
            (Some("throttlingException: Too many tokens"), false, false)
        );
    }

    #[test]
    fn in_stream_errors_and_http_errors_carry_the_message() {
        let body = sse(&[(
            "error",
            serde_json::json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}),
        )]);
        let mut m = Meter::new(Api::Messages, "text/event-stream", LIMIT);
        m.feed(&body);
        let r = m.finish(200);
        assert_eq!(r.error.as_deref(), Some("Overloaded"));
        assert!(!r.completed);

        let mut m = Meter::new(Api::Responses, "application/json", LIMIT);
        m.feed(
            br#"{"error":{"message":"Invalid model","type":"invalid_request_error","code":null}}"#,
        );
        assert_eq!(m.finish(400).error.as_deref(), Some("Invalid model"));

        let mut m = Meter::new(Api::Responses, "text/plain", LIMIT);
        m.feed(b"upstream exploded");
        assert_eq!(m.finish(502).error.as_deref(), Some("upstream exploded"));
    }

    #[test]
    fn response_failed_keeps_usage_and_message() {
        let body = sse(&[(
            "response.failed",
            serde_json::json!({"type":"response.failed","response":{"model":"gpt-5.5","error":{"code":"server_error","message":"boom"},"usage":null}}),
        )]);
        let mut m = Meter::new(Api::Responses, "text/event-stream", LIMIT);
        m.feed(&body);
        let r = m.finish(200);
        assert_eq!(r.error.as_deref(), Some("boom"));
        assert_eq!(r.usage, None);
        assert!(!r.completed);
    }

    #[test]
    fn chat_stream_usage_chunk_and_done() {
        let mut body = Vec::new();
        for data in [
            serde_json::json!({"model":"gpt-5.5","choices":[{"index":0,"delta":{"role":"assistant","content":"hello"}}]}),
            serde_json::json!({"model":"gpt-5.5","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}),
            serde_json::json!({"model":"gpt-5.5-2026-03-05","choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":80,
                "prompt_tokens_details":{"cached_tokens":200},"completion_tokens_details":{"reasoning_tokens":30}}}),
        ] {
            body.extend_from_slice(format!("data: {data}\n\n").as_bytes());
        }
        body.extend_from_slice(b"data: [DONE]\n\n");
        let mut m = Meter::new(Api::Chat, "text/event-stream", LIMIT);
        for chunk in body.chunks(5) {
            m.feed(chunk);
        }
        assert_eq!(
            m.finish(200),
            Reading {
                served_model: Some("gpt-5.5-2026-03-05".into()),
                usage: Some(TokenUsage {
                    input_tokens: 1000,
                    cached_input_tokens: 200,
                    cache_write_tokens: 0,
                    output_tokens: 80,
                    reasoning_tokens: 30,
                }),
                usage_final: true,
                completed: true,
                error: None,
                generated_bytes: 5,
                service_tier: None,
                hour_writes: 0,
                bad_usage: None,
            }
        );
    }

    #[test]
    fn non_streaming_message_body() {
        let mut m = Meter::new(Api::Messages, "application/json", LIMIT);
        m.feed(br#"{"id":"msg_1","type":"message","model":"claude-haiku-4-5","usage":{"input_tokens":3,"output_tokens":4}}"#);
        let r = m.finish(200);
        assert_eq!(r.served_model.as_deref(), Some("claude-haiku-4-5"));
        assert_eq!(
            r.usage,
            Some(TokenUsage {
                input_tokens: 3,
                output_tokens: 4,
                ..TokenUsage::default()
            })
        );
        assert!(r.completed);
    }

    /// The service tier of a JSON body: OpenAI's at the top level (also
    /// Chat Completions'), Anthropic's in `usage`.
    #[test]
    fn json_bodies_report_their_service_tier() {
        let tier = |api: Api, body: Value| {
            let mut m = Meter::new(api, "application/json", LIMIT);
            m.feed(body.to_string().as_bytes());
            m.finish(200).service_tier
        };
        assert_eq!(
            [
                tier(
                    Api::Responses,
                    serde_json::json!({"model":"gpt-5","service_tier":"flex","usage":{"input_tokens":1,"output_tokens":1}})
                ),
                tier(
                    Api::Chat,
                    serde_json::json!({"model":"gpt-5","service_tier":"priority","usage":{"prompt_tokens":1,"completion_tokens":1}})
                ),
                tier(
                    Api::Messages,
                    serde_json::json!({"model":"claude-sonnet-4-5","usage":{"input_tokens":1,"output_tokens":1,"service_tier":"priority"}})
                ),
                tier(
                    Api::Responses,
                    serde_json::json!({"model":"gpt-5","usage":{"input_tokens":1,"output_tokens":1}})
                ),
            ],
            [
                Some("flex".to_string()),
                Some("priority".to_string()),
                Some("priority".to_string()),
                None
            ]
        );
    }
    #[test]
    fn an_sse_event_past_the_limit_stops_the_meter_and_drops_its_copy() {
        let mut m = Meter::new(Api::Responses, "text/event-stream", 64 << 10);
        m.feed(b"event: response.output_text.delta\ndata: {\"delta\":\"");
        for _ in 0..100 {
            m.feed(&[b'x'; 1024]);
        }
        let want = "paddock broker: the upstream sent an SSE event of more than 65536 bytes, past broker.max_upstream_event_bytes (65536 bytes)";
        assert_eq!(
            (m.over_limit(), m.buf.capacity(), m.mid_event()),
            (Some(want), 0, true)
        );
        // Nothing after the limit is read, not even a complete event.
        m.feed(b"\n\nevent: response.completed\ndata: {\"type\":\"response.completed\"}\n\n");
        assert_eq!(
            m.finish(200),
            Reading {
                error: Some(want.to_string()),
                ..Reading::default()
            }
        );
    }

    #[test]
    fn a_json_body_past_the_limit_stops_the_meter() {
        let mut m = Meter::new(Api::Messages, "application/json", 64 << 10);
        m.feed(&[b' '; 60 << 10]);
        m.feed(&[b' '; 8 << 10]);
        // A later small chunk is not appended to a truncated copy.
        m.feed(br#"{"model":"m","usage":{"input_tokens":3,"output_tokens":4}}"#);
        let want = "paddock broker: the upstream sent a response body of more than 65536 bytes, past broker.max_upstream_event_bytes (65536 bytes)";
        assert_eq!((m.over_limit(), m.buf.capacity()), (Some(want), 0));
        assert_eq!(
            m.finish(200),
            Reading {
                error: Some(want.to_string()),
                ..Reading::default()
            }
        );
    }

    /// One long event fed in small chunks: each byte is searched once (plus
    /// three bytes of overlap per chunk), not again with every chunk.
    #[test]
    fn the_event_search_looks_at_each_byte_once() {
        let delta = "y".repeat(200_000);
        let body = sse(&[(
            "response.output_text.delta",
            serde_json::json!({"type":"response.output_text.delta","delta": delta}),
        )]);
        let mut m = Meter::new(Api::Responses, "text/event-stream", LIMIT);
        let chunks = body.chunks(100).count();
        for chunk in body.chunks(100) {
            m.feed(chunk);
        }
        assert_eq!(m.reading.generated_bytes, 200_000);
        assert!(
            m.examined <= body.len() + 3 * chunks,
            "examined {} bytes of a {}-byte body",
            m.examined,
            body.len()
        );
    }

    /// A cut stream's output is estimated from its text's UTF-8 bytes, of
    /// every delta: 400 CJK characters (about 400 tokens, 1,200 bytes) are
    /// 300 tokens, where characters / 4 made them 100.
    #[test]
    fn a_cut_streams_text_is_estimated_by_its_bytes_from_every_delta() {
        let body = sse(&[(
            "response.output_text.delta",
            serde_json::json!({"type":"response.output_text.delta","delta": "字".repeat(400)}),
        )]);
        let mut m = Meter::new(Api::Responses, "text/event-stream", LIMIT);
        m.feed(&body);
        assert_eq!(
            m.running_usage(40),
            TokenUsage {
                input_tokens: 10,
                output_tokens: 300,
                ..TokenUsage::default()
            }
        );
        // Every delta's text counts, the kinds not named too: a refusal, a
        // reasoning text, an audio transcript (before, only the output
        // text, reasoning summaries and tool calls were counted).
        let body = sse(&[
            (
                "response.refusal.delta",
                serde_json::json!({"type": "response.refusal.delta", "delta": "no".repeat(20)}),
            ),
            (
                "response.reasoning_text.delta",
                serde_json::json!({"type": "response.reasoning_text.delta", "delta": "hm".repeat(20)}),
            ),
        ]);
        let mut m = Meter::new(Api::Responses, "text/event-stream", LIMIT);
        m.feed(&body);
        assert_eq!(m.running_usage(0).output_tokens, 20);
        let chunk = serde_json::json!({"choices": [{"delta": {"role": "assistant", "refusal": "x".repeat(40), "audio": {"id": "a1", "transcript": "y".repeat(40)}}}]});
        let mut m = Meter::new(Api::Chat, "text/event-stream", LIMIT);
        m.feed(format!("data: {chunk}\n\n").as_bytes());
        assert_eq!(m.running_usage(0).output_tokens, 20);
        let delta = serde_json::json!({"type": "content_block_delta", "index": 0, "delta": {"type": "citations_delta", "citation": {"cited_text": "z".repeat(80)}}});
        let mut m = Meter::new(Api::Messages, "text/event-stream", LIMIT);
        m.feed(format!("event: content_block_delta\ndata: {delta}\n\n").as_bytes());
        assert_eq!(m.running_usage(0).output_tokens, 20);
        let whole = serde_json::json!({"model": "m", "choices": [{"message": {"role": "assistant", "content": "é".repeat(10)}}]});
        let mut m = Meter::new(Api::Chat, "application/json", LIMIT);
        m.feed(whole.to_string().as_bytes());
        assert_eq!(m.finish(200).generated_bytes, 20);
    }

    #[test]
    fn separators_split_across_chunks_are_found() {
        let body =
            b"data: {\"choices\":[{\"delta\":{\"content\":\"ab\"}}]}\r\n\r\ndata: [DONE]\n\n";
        for size in 1..8 {
            let mut m = Meter::new(Api::Chat, "text/event-stream", LIMIT);
            for chunk in body.chunks(size) {
                m.feed(chunk);
            }
            assert_eq!(
                (m.reading.generated_bytes, m.completed(), m.mid_event()),
                (2, true, false),
                "chunks of {size}"
            );
        }
    }

    /// A malformed count of hour-kept cache writes (a Messages body) reads
    /// as 0 and is noted: the call is estimated, never priced at it.
    #[test]
    fn a_malformed_hour_writes_count_is_noted() {
        let body = serde_json::json!({"model": "claude-sonnet-4-5", "usage": {
            "input_tokens": 10, "cache_creation_input_tokens": 1000, "output_tokens": 7,
            "cache_creation": {"ephemeral_1h_input_tokens": -400}}});
        let mut m = Meter::new(Api::Messages, "application/json", LIMIT);
        m.feed(body.to_string().as_bytes());
        let r = m.finish(200);
        assert_eq!(
            (r.hour_writes, r.bad_usage.as_deref()),
            (
                0,
                Some("paddock broker: the upstream's `usage.cache_creation.ephemeral_1h_input_tokens` is -400, not a token count (a whole number from 0 to 9223372036854775807): the call is estimated")
            )
        );
    }
}

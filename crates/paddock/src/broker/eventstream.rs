//! The AWS event stream (`application/vnd.amazon.eventstream`) that Bedrock's
//! `invoke-with-response-stream` answers with: binary frames (prelude,
//! headers, payload, CRC32s; framing and checksums by
//! `aws-smithy-eventstream`). Each `chunk` event's payload is JSON
//! `{"bytes": base64(<an Anthropic Messages stream event's JSON>)}`; an
//! `exception` message carries the upstream's error. [`Decoder`] turns the
//! bytes back into those events for the meter; [`chunk`] and [`exception`]
//! encode them (the mock Bedrock endpoint, the broker's cut event).

use aws_smithy_eventstream::frame::{read_message_from, write_message_to};
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use bytes::{Bytes, BytesMut};
use serde_json::{json, Value};

/// The content type of an AWS event stream.
pub const CONTENT_TYPE: &str = "application/vnd.amazon.eventstream";

/// The smallest well-formed frame: prelude, its CRC and the message CRC.
const MIN_FRAME: usize = 16;

/// One decoded message of a Bedrock response stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A `chunk`: the inner Anthropic Messages stream event.
    Chunk(Value),
    /// An `exception` (or an undecodable frame): the error's type and message.
    Exception { kind: String, message: String },
    /// Any other event (ignored by the meter).
    Other,
    /// A frame announced longer than the decoder's limit: nothing after it
    /// is decoded.
    TooLarge { len: usize },
}

/// Incremental decoder of an event-stream body.
#[derive(Debug)]
pub struct Decoder {
    buf: BytesMut,
    broken: bool,
    /// The longest frame held (`broker.max_upstream_event_bytes`).
    limit: usize,
}

impl Decoder {
    /// A decoder holding frames of at most `limit` bytes.
    pub fn new(limit: usize) -> Decoder {
        Decoder {
            buf: BytesMut::new(),
            broken: false,
            limit,
        }
    }

    /// Feeds the next bytes; returns the events completed by them.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<Event> {
        let mut events = Vec::new();
        if self.broken {
            return events;
        }
        self.buf.extend_from_slice(chunk);
        while let Some(len) = self.frame_len() {
            if len > self.limit {
                self.broken = true;
                self.buf = BytesMut::new();
                events.push(Event::TooLarge { len });
                return events;
            }
            if len < MIN_FRAME {
                self.broken = true;
                events.push(Event::Exception {
                    kind: "eventstream".into(),
                    message: format!("paddock broker: bad event-stream frame length {len}"),
                });
                return events;
            }
            if self.buf.len() < len {
                break;
            }
            let frame = self.buf.split_to(len).freeze();
            match read_message_from(frame) {
                Ok(message) => events.push(event_of(&message)),
                Err(e) => {
                    self.broken = true;
                    events.push(Event::Exception {
                        kind: "eventstream".into(),
                        message: format!("paddock broker: bad event-stream frame: {e}"),
                    });
                    return events;
                }
            }
        }
        events
    }

    /// True when a frame has started but not ended.
    pub fn mid_frame(&self) -> bool {
        !self.buf.is_empty()
    }

    fn frame_len(&self) -> Option<usize> {
        let prelude: [u8; 4] = self.buf.get(..4)?.try_into().ok()?;
        Some(u32::from_be_bytes(prelude) as usize)
    }
}

fn header<'a>(message: &'a Message, name: &str) -> Option<&'a str> {
    message
        .headers()
        .iter()
        .find(|h| h.name().as_str() == name)
        .and_then(|h| h.value().as_string().ok())
        .map(|s| s.as_str())
}

fn event_of(message: &Message) -> Event {
    match header(message, ":message-type") {
        Some("event") => {}
        Some("exception") | Some("error") => {
            let kind = header(message, ":exception-type")
                .or_else(|| header(message, ":error-code"))
                .unwrap_or("exception")
                .to_string();
            let payload = String::from_utf8_lossy(message.payload());
            let text = serde_json::from_str::<Value>(&payload)
                .ok()
                .map(|v| super::error_text::error_message(&v))
                .or_else(|| header(message, ":error-message").map(str::to_string))
                .unwrap_or_else(|| payload.trim().to_string());
            return Event::Exception {
                kind,
                message: text,
            };
        }
        _ => return Event::Other,
    }
    if header(message, ":event-type") != Some("chunk") {
        return Event::Other;
    }
    let inner = serde_json::from_slice::<Value>(message.payload())
        .ok()
        .and_then(|v| v.get("bytes").and_then(Value::as_str).map(str::to_string))
        .and_then(|b| STANDARD.decode(b).ok())
        .and_then(|raw| serde_json::from_slice::<Value>(&raw).ok());
    match inner {
        Some(v) => Event::Chunk(v),
        None => Event::Other,
    }
}

fn encode(headers: Vec<Header>, payload: Vec<u8>) -> Bytes {
    let message = Message::new_from_parts(headers, payload);
    let mut out = Vec::new();
    // Writing to a Vec fails only for oversize headers, which these are not.
    match write_message_to(&message, &mut out) {
        Ok(()) => Bytes::from(out),
        Err(_) => Bytes::new(),
    }
}

fn string(name: &'static str, value: &str) -> Header {
    Header::new(name, HeaderValue::String(value.to_string().into()))
}

/// A `chunk` event carrying one Anthropic Messages stream event.
pub fn chunk(inner: &Value) -> Bytes {
    let payload = json!({"bytes": STANDARD.encode(inner.to_string())});
    encode(
        vec![
            string(":event-type", "chunk"),
            string(":content-type", "application/json"),
            string(":message-type", "event"),
        ],
        payload.to_string().into_bytes(),
    )
}

/// An `exception` message of type `kind` with `message`.
pub fn exception(kind: &str, message: &str) -> Bytes {
    encode(
        vec![
            string(":exception-type", kind),
            string(":content-type", "application/json"),
            string(":message-type", "exception"),
        ],
        json!({"message": message}).to_string().into_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_chunks_and_exceptions_split_anywhere() {
        let a = json!({"type": "message_start", "message": {"model": "m"}});
        let b = json!({"type": "message_stop"});
        let mut body = Vec::new();
        body.extend_from_slice(&chunk(&a));
        body.extend_from_slice(&chunk(&b));
        body.extend_from_slice(&exception("throttlingException", "slow down"));
        for size in [1, 3, 7, 64, body.len()] {
            let mut d = Decoder::new(1 << 20);
            let mut events = Vec::new();
            for piece in body.chunks(size) {
                events.extend(d.feed(piece));
            }
            assert!(!d.mid_frame());
            assert_eq!(
                events,
                vec![
                    Event::Chunk(a.clone()),
                    Event::Chunk(b.clone()),
                    Event::Exception {
                        kind: "throttlingException".into(),
                        message: "slow down".into()
                    }
                ]
            );
        }
    }

    #[test]
    fn a_corrupt_frame_is_an_exception() {
        let mut frame = chunk(&json!({"type": "ping"})).to_vec();
        let last = frame.len() - 1;
        frame[last] ^= 0xff;
        let mut d = Decoder::new(1 << 20);
        let events = d.feed(&frame);
        assert_eq!(events.len(), 1);
        assert!(matches!(&events[0], Event::Exception { kind, .. } if kind == "eventstream"));
        assert_eq!(d.feed(&chunk(&json!({"type": "ping"}))), vec![]);
    }

    #[test]
    fn a_frame_past_the_limit_is_too_large_and_nothing_after_is_read() {
        let big =
            chunk(&json!({"type": "content_block_delta", "delta": {"text": "z".repeat(4096)}}));
        let small = chunk(&json!({"type": "ping"}));
        let mut d = Decoder::new(1024);
        let mut body = big.to_vec();
        body.extend_from_slice(&small);
        assert_eq!(d.feed(&body), vec![Event::TooLarge { len: big.len() }]);
        assert_eq!((d.feed(&small), d.mid_frame()), (vec![], false));
    }
}

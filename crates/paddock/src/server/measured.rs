//! A job's event with the length of its JSON, measured once: the live
//! backlog (`hub.rs`) bounds itself by it and every event stream's
//! buffer (`outbox.rs`) charges it, so an event a running job writes is
//! serialised to measure it when the hub takes it, not again for each
//! follower that streams it. An event read from the store is measured
//! when it is sent.

use paddock_protocol::AgentEvent;

/// An event and the length of its JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub event: AgentEvent,
    /// `json_len(&event)`.
    pub bytes: usize,
}

impl Measured {
    /// `event`, measured.
    pub fn new(event: AgentEvent) -> Measured {
        let bytes = json_len(&event);
        Measured { event, bytes }
    }
}

impl From<AgentEvent> for Measured {
    fn from(event: AgentEvent) -> Measured {
        Measured::new(event)
    }
}

/// The length of `event`'s JSON, counted as it is written (not held).
pub fn json_len(event: &AgentEvent) -> usize {
    /// Counts the bytes written to it.
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, event) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::store::fixtures::event;
    use paddock_protocol::EventBody;

    #[test]
    fn an_event_is_measured_as_its_json_is_long() {
        let e = event(
            "job-1",
            7,
            EventBody::Text {
                text: "é\u{1b}".into(),
            },
        );
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(
            Measured::from(e.clone()),
            Measured {
                event: e,
                bytes: json.len()
            }
        );
    }
}

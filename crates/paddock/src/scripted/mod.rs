//! The scripted upstream: a stand-in for OpenAI and Anthropic that replays a
//! scenario file in the real wire formats, so that the real Codex CLI and
//! Claude Code run offline, in tests and in demos.
//!
//! A [`Scenario`] is an ordered list of turns (see `docs/scenarios.md`). Each
//! model request gets one turn, chosen from the request's own history (how many
//! answers the model has already given in it), never from a counter: a retried
//! request gets the same turn again, and two jobs can share one scenario. The
//! chosen turn is rendered as a [`ScriptedReply`] in the wire the request came
//! in on ([`Wire`]): the OpenAI Responses API (Codex) or the Anthropic Messages
//! API (Claude Code), streaming or not, including HTTP errors, in-stream
//! failures and cut connections. Side requests an engine makes on its own
//! (Claude Code's session title) get a fitting answer without using a turn.
//! [`ScriptedServer`] serves a scenario over loopback HTTP, so the broker
//! forwards scripted calls like any provider's.
//!
//! A product feature (the offline demo), behind the default cargo feature
//! `scripted`; it sits above the broker (it speaks the broker's wire APIs)
//! and nothing below it uses it.

mod call;
mod chat;
mod history;
mod messages;
mod patch;
mod responses;
mod scenario;
pub mod server;
mod side;
mod sse;

use std::path::PathBuf;

use bytes::Bytes;

pub use scenario::{Scenario, ScenarioError};
pub use server::ScriptedServer;

/// The wire protocol a model request came in on: the broker's [`Api`]
/// (`crate::broker::wire`), whose routes the scripted upstream serves.
///
/// [`Api`]: crate::broker::wire::Api
pub use crate::broker::wire::Api as Wire;

/// What the renderer needs to know about the job beyond the request itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderContext {
    /// The checkout directory as the engine sees it. Claude Code's `Write`,
    /// `Edit` and `Read` tools need absolute paths, built from this.
    pub workdir: PathBuf,
}

/// One HTTP response, ready to be written by the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptedReply {
    /// The HTTP status code.
    pub status: u16,
    /// `text/event-stream` or `application/json`.
    pub content_type: String,
    /// The body, sent in order, one write each (SSE: one event per chunk).
    pub chunks: Vec<Bytes>,
    /// When true, the connection is cut after the chunks (no clean end of the
    /// body), as an upstream that drops mid-stream would.
    pub abort_after: bool,
}

impl ScriptedReply {
    /// The whole body as one string (for logs and tests).
    pub fn body_text(&self) -> String {
        self.chunks
            .iter()
            .map(|chunk| String::from_utf8_lossy(chunk))
            .collect()
    }
}

impl Scenario {
    /// Which turn (0-based) answers this request: the number of answers the
    /// model has already given in the request's history. `None` for an
    /// engine's side request (Claude Code's session title), which is answered
    /// without a turn. The index may be past the last turn (exhausted).
    pub fn turn_index(&self, wire: Wire, request: &serde_json::Value) -> Option<usize> {
        match side::side_turn(wire, request) {
            Some(_) => None,
            None => Some(history::turn_index(wire, request)),
        }
    }

    /// Picks the turn for this request from the request's own history and
    /// renders it in the request's wire format. A request past the last turn
    /// gets an HTTP 500 saying the scenario is exhausted.
    pub fn respond(
        &self,
        wire: Wire,
        request: &serde_json::Value,
        ctx: &RenderContext,
    ) -> ScriptedReply {
        self.respond_at(wire, request, ctx, unix_now())
    }

    /// [`Scenario::respond`] with a fixed clock (`created_at` of Responses
    /// objects), so that tests compare whole outputs.
    pub(crate) fn respond_at(
        &self,
        wire: Wire,
        request: &serde_json::Value,
        ctx: &RenderContext,
        created_at: i64,
    ) -> ScriptedReply {
        if let Some(turn) = side::side_turn(wire, request) {
            let model = self
                .served_model()
                .or_else(|| request.get("model").and_then(serde_json::Value::as_str))
                .unwrap_or("scripted");
            return render(
                &RenderInput {
                    turn: &turn,
                    number: 0,
                    model,
                    request,
                    ctx,
                    created_at,
                },
                wire,
            );
        }
        let index = history::turn_index(wire, request);
        let Some(turn) = self.turns().get(index) else {
            let message = format!(
                "Paddock scripted upstream: scenario {} is exhausted: this request asks for turn {} but the scenario has {} turn{}",
                self.origin().display(),
                index + 1,
                self.turns().len(),
                if self.turns().len() == 1 { "" } else { "s" },
            );
            let failure = scenario::HttpFailure {
                status: 500,
                message,
                kind: None,
                code: None,
            };
            return match wire {
                Wire::Responses => responses::error_reply(&failure),
                Wire::Messages => messages::error_reply(&failure),
                Wire::Chat => chat::error_reply(&failure),
            };
        };
        let model = turn
            .served_model
            .as_deref()
            .or(self.served_model())
            .or_else(|| request.get("model").and_then(serde_json::Value::as_str))
            .unwrap_or("scripted")
            .to_owned();
        let input = RenderInput {
            turn,
            number: index + 1,
            model: &model,
            request,
            ctx,
            created_at,
        };
        render(&input, wire)
    }
}

/// A turn's transient failure, ready to serve (see [`Scenario::transient`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransientReply {
    /// The 0-based turn it belongs to.
    pub turn: usize,
    /// How many requests for the turn get it before the turn is answered.
    pub times: u32,
    pub reply: ScriptedReply,
    /// `Retry-After`, `retry-after-ms`.
    pub headers: Vec<(&'static str, String)>,
}

impl Scenario {
    /// The transient failure of the turn this request asks for, if the turn
    /// has one. The caller counts how often it served it (`times`).
    pub fn transient(&self, wire: Wire, request: &serde_json::Value) -> Option<TransientReply> {
        let index = self.turn_index(wire, request)?;
        let t = self.turns().get(index)?.transient.as_ref()?;
        let reply = match wire {
            Wire::Responses => responses::error_reply(&t.failure),
            Wire::Messages => messages::error_reply(&t.failure),
            Wire::Chat => chat::error_reply(&t.failure),
        };
        let mut headers = Vec::new();
        if let Some(v) = &t.retry_after {
            headers.push(("retry-after", v.clone()));
        }
        if let Some(ms) = t.retry_after_ms {
            headers.push(("retry-after-ms", ms.to_string()));
        }
        Some(TransientReply {
            turn: index,
            times: t.times,
            reply,
            headers,
        })
    }
}

fn render(input: &RenderInput<'_>, wire: Wire) -> ScriptedReply {
    match wire {
        Wire::Responses => responses::render(input),
        Wire::Messages => messages::render(input),
        Wire::Chat => chat::render(input),
    }
}

/// Everything a wire renderer needs for one reply.
pub(crate) struct RenderInput<'a> {
    pub turn: &'a scenario::Turn,
    /// The turn's 1-based number, used in ids; 0 for a side request.
    pub number: usize,
    /// The model name the reply claims to come from.
    pub model: &'a str,
    pub request: &'a serde_json::Value,
    pub ctx: &'a RenderContext,
    /// Unix seconds, for Responses' `created_at`.
    pub created_at: i64,
}

impl RenderInput<'_> {
    /// Whether the client asked for a stream (`"stream": true`).
    pub fn streaming(&self) -> bool {
        self.request
            .get("stream")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false)
    }

    /// An absolute path inside the checkout, as the engine sees it.
    pub fn absolute(&self, relative: &str) -> String {
        self.ctx
            .workdir
            .join(relative)
            .to_string_lossy()
            .into_owned()
    }
}

fn unix_now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// Reads a scenario for tests: the origin shown in messages is `path`.
#[cfg(test)]
pub(crate) fn scenario_for_test(text: &str) -> Scenario {
    match Scenario::from_toml(text, std::path::Path::new("test.toml")) {
        Ok(scenario) => scenario,
        Err(err) => panic!("test scenario does not parse: {err}"),
    }
}

#[cfg(test)]
mod tests;

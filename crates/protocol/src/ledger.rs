//! A ledger row: one model call seen by the broker, with its tokens read from
//! the provider's own stream and its cost in integer micro-dollars.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::event::TokenUsage;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModelCall {
    pub job_id: String,
    pub attempt: u32,
    /// Dense per job, starting at 1.
    pub seq: u64,
    pub provider: String,
    /// The model the engine asked for.
    pub requested_model: String,
    /// The model the upstream says served the call (`None` if it never said).
    pub served_model: Option<String>,
    #[serde(flatten)]
    pub tokens: TokenUsage,
    /// Milliseconds from the request to the first response byte.
    pub ttft_ms: Option<u64>,
    pub duration_ms: u64,
    pub status: CallStatus,
    pub http_status: Option<u16>,
    /// The upstream's error message, when the call failed.
    pub error: Option<String>,
    /// True when the stream ended before its usage and the tokens are estimated.
    pub estimated: bool,
    pub price_version: String,
    pub cost_micros: i64,
    #[serde(with = "time::serde::rfc3339")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub started_at: OffsetDateTime,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    /// The call completed with usage.
    Ok,
    /// The upstream answered with an HTTP error status.
    HttpError,
    /// The stream reported an error or broke before it completed.
    StreamError,
    /// The broker refused the call (bad token, unknown model, budget).
    Refused,
    /// Written ahead, before the call was forwarded upstream: its end is
    /// not recorded yet.
    InFlight,
    /// The call's end was never recorded (its `paddock` process died, or
    /// the job ended while it was still streaming): what was metered so
    /// far, estimated.
    Interrupted,
}

impl CallStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            CallStatus::Ok => "ok",
            CallStatus::HttpError => "http_error",
            CallStatus::StreamError => "stream_error",
            CallStatus::Refused => "refused",
            CallStatus::InFlight => "in_flight",
            CallStatus::Interrupted => "interrupted",
        }
    }

    pub fn parse(s: &str) -> Option<CallStatus> {
        match s {
            "ok" => Some(CallStatus::Ok),
            "http_error" => Some(CallStatus::HttpError),
            "stream_error" => Some(CallStatus::StreamError),
            "refused" => Some(CallStatus::Refused),
            "in_flight" => Some(CallStatus::InFlight),
            "interrupted" => Some(CallStatus::Interrupted),
            _ => None,
        }
    }
}

//! What the meter reads of one answer (the served model, token usage,
//! completion, the upstream's error, the service tier): filled by each
//! wire API's module (`wire/`) as the meter decodes events, kept apart so
//! that the wire modules and the meter do not import each other.

use paddock_protocol::TokenUsage;

/// What the meter concluded about one response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reading {
    pub served_model: Option<String>,
    pub usage: Option<TokenUsage>,
    /// The usage is the response's final count (Responses terminal event,
    /// Messages `message_delta`, Chat usage chunk, a JSON body), not the
    /// `message_start` snapshot.
    pub usage_final: bool,
    /// The response reached its terminal event (or was a complete JSON body).
    pub completed: bool,
    /// The upstream's own error message (HTTP error body or in-stream error).
    pub error: Option<String>,
    /// Bytes of generated text seen, for estimating a cut stream's output.
    pub generated_chars: u64,
    /// The service tier the answer reports (`default`, `priority`, `flex`,
    /// `standard`, `batch`...), the latest seen.
    pub service_tier: Option<String>,
    /// Of the cache writes, those kept an hour (Anthropic's
    /// `cache_creation.ephemeral_1h_input_tokens`), priced at their own
    /// rate (`PriceTable::cost_micros_kept`); the latest seen.
    pub hour_writes: u64,
    /// Why the upstream's usage is not read as its count: a field that is
    /// there but no whole number from 0 to `i64::MAX` (negative, a
    /// fraction, a string, past what the ledger holds). The call is then
    /// estimated: each count at least its estimate (request bytes / 4,
    /// generated characters / 4), never priced at the malformed value.
    pub bad_usage: Option<String>,
}

impl Reading {
    /// The tokens seen so far: the usage reported, with output at least the
    /// generated characters / 4 (and, when a count was malformed, input at
    /// least the request bytes / 4); without usage, the request bytes / 4
    /// as input.
    pub fn running_usage(&self, request_bytes: u64) -> TokenUsage {
        let generated = self.generated_chars.div_ceil(4);
        match self.usage {
            Some(mut u) => {
                u.output_tokens = u.output_tokens.max(generated);
                // A malformed count read as 0: the input is at least the
                // estimate too.
                if self.bad_usage.is_some() {
                    u.input_tokens = u.input_tokens.max(request_bytes / 4);
                }
                u
            }
            None => TokenUsage {
                input_tokens: request_bytes / 4,
                output_tokens: generated,
                ..TokenUsage::default()
            },
        }
    }
}

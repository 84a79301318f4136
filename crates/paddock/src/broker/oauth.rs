//! One OAuth 2.0 access-token request (RFC 6749 §5), as the broker's token
//! sources make it (Entra ID client credentials, Google's JWT bearer and
//! refresh-token grants, the GCE metadata server): the answer is read up
//! to [`MAX_TOKEN_ANSWER`] bytes ([`super::bounded`]), a status other than
//! 200 is a refusal carrying the start of the body, and a 200 answer must
//! hold `access_token` and `expires_in`. The callers add who
//! asked and where to their own errors.

use std::time::Duration;

use serde::Deserialize;

use super::secret::Secret;
use super::token_cache::Fetched;

/// The most of a token endpoint's answer read (a token answer is a few
/// kilobytes).
pub const MAX_TOKEN_ANSWER: usize = 64 << 10;

/// How much of a refusal's body its error keeps.
const REFUSAL_CHARS: usize = 300;

#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    /// Sending the request, reading the answer (past the bound too) or
    /// parsing it failed.
    #[error("{0}")]
    Request(String),
    /// The endpoint answered with another status than 200.
    #[error("HTTP {status}: {body}")]
    Refused { status: u16, body: String },
}

/// A token endpoint's answer (RFC 6749 §5.1).
#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    expires_in: u64,
}

/// Sends `request` and reads the access token it is answered with.
pub async fn exchange(request: reqwest::RequestBuilder) -> Result<Fetched<Secret>, ExchangeError> {
    let resp = request
        .send()
        .await
        .map_err(|e| ExchangeError::Request(e.without_url().to_string()))?;
    let status = resp.status().as_u16();
    let body = super::bounded::read_text(resp, MAX_TOKEN_ANSWER)
        .await
        .map_err(|e| ExchangeError::Request(crate::error_chain::chain(&e)))?;
    if status != 200 {
        return Err(ExchangeError::Refused {
            status,
            body: body.chars().take(REFUSAL_CHARS).collect(),
        });
    }
    let answer: TokenAnswer = serde_json::from_str(&body)
        .map_err(|e| ExchangeError::Request(format!("bad token answer: {e}")))?;
    Ok(Fetched {
        value: Secret::new(answer.access_token),
        expires_in: Some(Duration::from_secs(answer.expires_in)),
    })
}

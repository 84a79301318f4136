//! Microsoft Entra ID tokens for Azure OpenAI: the broker holds an app
//! registration's client secret and gets access tokens with the OAuth 2.0
//! client-credentials grant (`POST {authority}/{tenant}/oauth2/v2.0/token`,
//! scope `https://cognitiveservices.azure.com/.default`), caches each until
//! shortly before it expires ([`fresh_until`]) and sends it upstream as
//! `Authorization: Bearer`. The authority is overridable (sovereign clouds,
//! tests).

use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::sync::Mutex;

use super::secret::Secret;

/// The public cloud's Entra authority.
pub const AUTHORITY: &str = "https://login.microsoftonline.com";
/// The scope Azure OpenAI (Cognitive Services) calls need.
pub const SCOPE: &str = "https://cognitiveservices.azure.com/.default";

#[derive(Debug, thiserror::Error)]
pub enum EntraError {
    #[error("Entra ID app {client_id}: cannot reach token endpoint {token_url}: {message}")]
    TokenRequest {
        client_id: String,
        token_url: String,
        message: String,
    },
    #[error("Entra ID app {client_id}: token endpoint {token_url} answered HTTP {status}: {body}")]
    TokenRefused {
        client_id: String,
        token_url: String,
        status: u16,
        body: String,
    },
}

/// A token endpoint's answer (RFC 6749 §5.1).
#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    expires_in: u64,
}

/// Until when a token valid for `expires_in` from `now` is used: up to five
/// minutes before its expiry, or after half its life for a short-lived one.
pub fn fresh_until(now: Instant, expires_in: Duration) -> Instant {
    let margin = (expires_in / 2).min(Duration::from_secs(300));
    now + (expires_in - margin)
}

/// An app registration's client-credentials token source.
pub struct Entra {
    client_id: String,
    token_url: String,
    scope: String,
    client_secret: Secret,
    client: reqwest::Client,
    cached: Mutex<Option<(Secret, Instant)>>,
}

impl std::fmt::Debug for Entra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entra")
            .field("client_id", &self.client_id)
            .field("token_url", &self.token_url)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl Entra {
    /// The app `client_id` of `tenant_id` with its `client_secret`;
    /// `authority` defaults to [`AUTHORITY`], `scope` to [`SCOPE`].
    pub fn new(
        tenant_id: &str,
        client_id: &str,
        client_secret: Secret,
        authority: Option<&str>,
        scope: Option<&str>,
    ) -> Result<Entra, EntraError> {
        let token_url = format!(
            "{}/{tenant_id}/oauth2/v2.0/token",
            authority.unwrap_or(AUTHORITY).trim_end_matches('/')
        );
        let client = reqwest::Client::builder().no_proxy().build().map_err(|e| {
            EntraError::TokenRequest {
                client_id: client_id.to_string(),
                token_url: token_url.clone(),
                message: e.to_string(),
            }
        })?;
        Ok(Entra {
            client_id: client_id.to_string(),
            token_url,
            scope: scope.unwrap_or(SCOPE).to_string(),
            client_secret,
            client,
            cached: Mutex::new(None),
        })
    }

    /// A valid access token: the cached one while fresh, else a new one.
    pub async fn token(&self) -> Result<Secret, EntraError> {
        let mut cached = self.cached.lock().await;
        if let Some((token, until)) = cached.as_ref() {
            if Instant::now() < *until {
                return Ok(token.clone());
            }
        }
        let err = |message: String| EntraError::TokenRequest {
            client_id: self.client_id.clone(),
            token_url: self.token_url.clone(),
            message,
        };
        let asked = Instant::now();
        let resp = self
            .client
            .post(&self.token_url)
            .form(&[
                ("grant_type", "client_credentials"),
                ("client_id", self.client_id.as_str()),
                ("client_secret", self.client_secret.expose()),
                ("scope", self.scope.as_str()),
            ])
            .send()
            .await
            .map_err(|e| err(e.without_url().to_string()))?;
        let status = resp.status().as_u16();
        let body = resp
            .text()
            .await
            .map_err(|e| err(e.without_url().to_string()))?;
        if status != 200 {
            return Err(EntraError::TokenRefused {
                client_id: self.client_id.clone(),
                token_url: self.token_url.clone(),
                status,
                body: body.chars().take(300).collect(),
            });
        }
        let answer: TokenAnswer =
            serde_json::from_str(&body).map_err(|e| err(format!("bad token answer: {e}")))?;
        let token = Secret::new(answer.access_token);
        *cached = Some((
            token.clone(),
            fresh_until(asked, Duration::from_secs(answer.expires_in)),
        ));
        Ok(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_used_until_five_minutes_or_half_their_life_before_expiry() {
        let now = Instant::now();
        let cases = [(3600, 3300), (600, 300), (4, 2), (0, 0)];
        let got: Vec<Duration> = cases
            .iter()
            .map(|(life, _)| fresh_until(now, Duration::from_secs(*life)) - now)
            .collect();
        let want: Vec<Duration> = cases
            .iter()
            .map(|(_, fresh)| Duration::from_secs(*fresh))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn the_token_url_follows_the_authority() {
        let secret = Secret::new("s3cret".into());
        let public = Entra::new("tid", "cid", secret.clone(), None, None).unwrap();
        let mock = Entra::new("tid", "cid", secret, Some("http://127.0.0.1:9/"), None).unwrap();
        assert_eq!(
            (public.token_url.as_str(), mock.token_url.as_str()),
            (
                "https://login.microsoftonline.com/tid/oauth2/v2.0/token",
                "http://127.0.0.1:9/tid/oauth2/v2.0/token"
            )
        );
        assert!(!format!("{public:?}").contains("s3cret"));
    }
}

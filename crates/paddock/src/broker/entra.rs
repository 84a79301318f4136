//! Microsoft Entra ID tokens for Azure OpenAI: the broker holds an app
//! registration's client secret and gets access tokens with the OAuth 2.0
//! client-credentials grant (`POST {authority}/{tenant}/oauth2/v2.0/token`,
//! scope `https://cognitiveservices.azure.com/.default`), caches each until
//! shortly before it expires ([`super::token_cache`]; the answer read by
//! [`super::oauth`], bounded) and sends it upstream
//! as `Authorization: Bearer`. The authority is overridable (sovereign
//! clouds, tests).

use super::oauth::ExchangeError;
use super::secret::Secret;
use super::token_cache::{Fetched, TokenCache};

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

/// An app registration's client-credentials token source.
pub struct Entra {
    client_id: String,
    token_url: String,
    scope: String,
    client_secret: Secret,
    client: reqwest::Client,
    cached: TokenCache<Secret>,
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
            cached: TokenCache::default(),
        })
    }

    /// A valid access token: the cached one while fresh, else a new one.
    pub async fn token(&self) -> Result<Secret, EntraError> {
        self.cached.get(|| self.fetch()).await
    }

    /// A new access token from the token endpoint.
    async fn fetch(&self) -> Result<Fetched<Secret>, EntraError> {
        let request = self.client.post(&self.token_url).form(&[
            ("grant_type", "client_credentials"),
            ("client_id", self.client_id.as_str()),
            ("client_secret", self.client_secret.expose()),
            ("scope", self.scope.as_str()),
        ]);
        super::oauth::exchange(request).await.map_err(|e| match e {
            ExchangeError::Request(message) => EntraError::TokenRequest {
                client_id: self.client_id.clone(),
                token_url: self.token_url.clone(),
                message,
            },
            ExchangeError::Refused { status, body } => EntraError::TokenRefused {
                client_id: self.client_id.clone(),
                token_url: self.token_url.clone(),
                status,
                body,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A token endpoint that never stops answering is read up to 64 KiB
    /// only.
    #[tokio::test]
    async fn an_endless_token_answer_is_an_error_not_a_hang() {
        let addr = paddock_test_support::endless::serve().await;
        let authority = format!("http://{addr}");
        let entra = Entra::new(
            "tid",
            "cid",
            Secret::new("s".into()),
            Some(&authority),
            None,
        )
        .unwrap();
        let got = tokio::time::timeout(Duration::from_secs(20), entra.token())
            .await
            .expect("the token request ends")
            .unwrap_err()
            .to_string();
        assert_eq!(
            got,
            format!("Entra ID app cid: cannot reach token endpoint http://{addr}/tid/oauth2/v2.0/token: the answer is longer than 65536 bytes")
        );
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

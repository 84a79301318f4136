//! Google Vertex AI for Claude Code: the broker holds the service account,
//! mints its OAuth access token (an RS256-signed JWT exchanged at the
//! account's `token_uri`, cached until shortly before it expires) and sends
//! it upstream as `Authorization: Bearer`. Claude Code runs in Vertex mode
//! with its own Google auth skipped and its job token in a custom header;
//! the broker rebuilds the upstream path from the spec's project and
//! region, taking only the model and the method from the engine's request.

use std::time::{Duration, Instant};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use rsa::pkcs1v15::SigningKey;
use rsa::pkcs8::DecodePrivateKey as _;
use rsa::signature::{SignatureEncoding as _, Signer as _};
use rsa::RsaPrivateKey;
use serde::Deserialize;
use sha2::Sha256;
use tokio::sync::Mutex;

use super::secret::Secret;

/// The scope Vertex AI calls need.
pub const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

#[derive(Debug, thiserror::Error)]
pub enum VertexError {
    #[error("Vertex service account: not a service-account JSON key: {0}")]
    ParseKey(String),
    #[error(
        "Vertex service account {client_email}: private_key is not a PKCS#8 PEM RSA key: {message}"
    )]
    PrivateKey {
        client_email: String,
        message: String,
    },
    #[error(
        "Vertex service account {client_email}: cannot reach token endpoint {token_uri}: {message}"
    )]
    TokenRequest {
        client_email: String,
        token_uri: String,
        message: String,
    },
    #[error("Vertex service account {client_email}: token endpoint {token_uri} answered HTTP {status}: {body}")]
    TokenRefused {
        client_email: String,
        token_uri: String,
        status: u16,
        body: String,
    },
}

#[derive(Deserialize)]
struct KeyFile {
    client_email: String,
    private_key: String,
    #[serde(default = "default_token_uri")]
    token_uri: String,
}

fn default_token_uri() -> String {
    "https://oauth2.googleapis.com/token".to_string()
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default = "default_expiry")]
    expires_in: u64,
}

fn default_expiry() -> u64 {
    3600
}

/// Where a job's Vertex calls go and how they are authorized.
pub struct Vertex {
    pub project: String,
    pub region: String,
    client_email: String,
    token_uri: String,
    key: SigningKey<Sha256>,
    client: reqwest::Client,
    cached: Mutex<Option<(Secret, Instant)>>,
}

impl std::fmt::Debug for Vertex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vertex")
            .field("project", &self.project)
            .field("region", &self.region)
            .field("client_email", &self.client_email)
            .field("token_uri", &self.token_uri)
            .finish_non_exhaustive()
    }
}

impl Vertex {
    /// From the service account's JSON key (the secret the spec references).
    pub fn new(key_json: &Secret, project: &str, region: &str) -> Result<Vertex, VertexError> {
        let file: KeyFile = serde_json::from_str(key_json.expose())
            .map_err(|e| VertexError::ParseKey(e.to_string()))?;
        let private = RsaPrivateKey::from_pkcs8_pem(&file.private_key).map_err(|e| {
            VertexError::PrivateKey {
                client_email: file.client_email.clone(),
                message: e.to_string(),
            }
        })?;
        let client = reqwest::Client::builder().no_proxy().build().map_err(|e| {
            VertexError::TokenRequest {
                client_email: file.client_email.clone(),
                token_uri: file.token_uri.clone(),
                message: e.to_string(),
            }
        })?;
        Ok(Vertex {
            project: project.to_string(),
            region: region.to_string(),
            client_email: file.client_email,
            token_uri: file.token_uri,
            key: SigningKey::<Sha256>::new(private),
            client,
            cached: Mutex::new(None),
        })
    }

    /// The signed JWT assertion for the token exchange.
    fn assertion(&self, now_unix: i64) -> String {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256","typ":"JWT"}"#);
        let claims = serde_json::json!({
            "iss": self.client_email, "scope": SCOPE, "aud": self.token_uri,
            "iat": now_unix, "exp": now_unix + 3600,
        });
        let claims = URL_SAFE_NO_PAD.encode(claims.to_string().as_bytes());
        let signing_input = format!("{header}.{claims}");
        let signature = self.key.sign(signing_input.as_bytes()).to_bytes();
        format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature))
    }

    /// A valid access token: the cached one, or a fresh one.
    pub async fn token(&self) -> Result<Secret, VertexError> {
        let mut cached = self.cached.lock().await;
        if let Some((token, until)) = cached.as_ref() {
            if Instant::now() < *until {
                return Ok(token.clone());
            }
        }
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let form = format!(
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion={}",
            self.assertion(now)
        );
        let err = |message: String| VertexError::TokenRequest {
            client_email: self.client_email.clone(),
            token_uri: self.token_uri.clone(),
            message,
        };
        let resp = self
            .client
            .post(&self.token_uri)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form)
            .send()
            .await
            .map_err(|e| err(e.to_string()))?;
        let status = resp.status().as_u16();
        let body = resp.text().await.map_err(|e| err(e.to_string()))?;
        if status != 200 {
            return Err(VertexError::TokenRefused {
                client_email: self.client_email.clone(),
                token_uri: self.token_uri.clone(),
                status,
                body: body.chars().take(300).collect(),
            });
        }
        let answer: TokenAnswer =
            serde_json::from_str(&body).map_err(|e| err(format!("bad token answer: {e}")))?;
        let token = Secret::new(answer.access_token);
        let life = Duration::from_secs(answer.expires_in.saturating_sub(60).max(1));
        *cached = Some((token.clone(), Instant::now() + life));
        Ok(token)
    }

    /// The upstream path for `model` and `method` (`streamRawPredict` or
    /// `rawPredict`), under the base's `/v1`.
    pub fn path(&self, model: &str, method: &str) -> String {
        format!(
            "/v1/projects/{}/locations/{}/publishers/anthropic/models/{model}:{method}",
            self.project, self.region
        )
    }
}

/// `(model, method)` of an engine's Vertex request path
/// `/v1/projects/P/locations/R/publishers/anthropic/models/MODEL:METHOD`.
pub fn parse_path(path: &str) -> Option<(String, String)> {
    let rest = path.strip_prefix("/v1/projects/")?;
    let (_, tail) = rest.split_once("/publishers/anthropic/models/")?;
    let (model, method) = tail.split_once(':')?;
    match method {
        "streamRawPredict" | "rawPredict" if !model.is_empty() && !model.contains('/') => {
            Some((model.to_string(), method.to_string()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_vertex_paths() {
        assert_eq!(
            parse_path("/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict"),
            Some(("claude-sonnet-4-5@20250929".into(), "streamRawPredict".into()))
        );
        assert_eq!(
            parse_path("/v1/projects/p/locations/r/publishers/anthropic/models/m:predict"),
            None
        );
        assert_eq!(parse_path("/v1/messages"), None);
    }
}

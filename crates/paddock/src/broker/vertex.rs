//! Google Vertex AI for Claude Code: the broker holds the Google
//! credentials, gets OAuth access tokens with them (through `gcp_auth`,
//! cached and refreshed shortly before they expire) and sends the token
//! upstream as `Authorization: Bearer`. The credentials are the service
//! account's JSON key the spec references (`upstream.key`; the RS256 JWT
//! assertion is exchanged at the key's `token_uri`), or, without a key,
//! Google's Application Default Credentials as `gcp_auth` finds them: the
//! service-account file named by `GOOGLE_APPLICATION_CREDENTIALS`, gcloud's
//! `application_default_credentials.json` (an `authorized_user` refresh
//! token), the metadata server of a GCE/GKE/Cloud Run workload, then
//! `gcloud auth print-access-token`. Claude Code runs in Vertex mode with
//! its own Google auth skipped and its job token in a custom header; the
//! broker rebuilds the upstream path from the spec's project and region,
//! taking only the model and the method from the engine's request.

use super::error_text::error_chain;
use std::sync::Arc;

use gcp_auth::TokenProvider;
use serde::Deserialize;

use super::secret::Secret;

/// The scope Vertex AI calls need.
pub const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

#[derive(Debug, thiserror::Error)]
pub enum VertexError {
    #[error("Vertex service account: not a service-account JSON key: {0}")]
    ParseKey(String),
    #[error("Vertex service account {client_email}: {message}")]
    PrivateKey {
        client_email: String,
        message: String,
    },
    #[error("Vertex: no Application Default Credentials (set upstream.key to a service-account key, or GOOGLE_APPLICATION_CREDENTIALS, or run `gcloud auth application-default login`): {message}")]
    NoDefaultCredentials { message: String },
    #[error("Vertex {source_name}: cannot get an access token: {message}")]
    Token {
        source_name: String,
        message: String,
    },
}

/// The parts of a service-account key Paddock names in messages; the rest
/// is `gcp_auth`'s.
#[derive(Deserialize)]
struct KeyFile {
    client_email: String,
    #[serde(default)]
    token_uri: Option<String>,
}

/// Where a job's Vertex calls go and how they are authorized.
pub struct Vertex {
    pub project: String,
    pub region: String,
    /// What the credentials are, for messages: `service account EMAIL` or
    /// `Application Default Credentials`.
    source_name: String,
    provider: Arc<dyn TokenProvider>,
}

impl std::fmt::Debug for Vertex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vertex")
            .field("project", &self.project)
            .field("region", &self.region)
            .field("credentials", &self.source_name)
            .finish_non_exhaustive()
    }
}

impl Vertex {
    /// From the service account's JSON key (the secret the spec references).
    pub fn new(key_json: &Secret, project: &str, region: &str) -> Result<Vertex, VertexError> {
        let file: KeyFile = serde_json::from_str(key_json.expose())
            .map_err(|e| VertexError::ParseKey(e.to_string()))?;
        if file.token_uri.is_none() {
            return Err(VertexError::ParseKey("missing field `token_uri`".into()));
        }
        let account =
            gcp_auth::CustomServiceAccount::from_json(key_json.expose()).map_err(|e| {
                VertexError::PrivateKey {
                    client_email: file.client_email.clone(),
                    message: error_chain(&e),
                }
            })?;
        Ok(Vertex {
            project: project.to_string(),
            region: region.to_string(),
            source_name: format!("service account {}", file.client_email),
            provider: Arc::new(account),
        })
    }

    /// From Google's Application Default Credentials (no key in the spec).
    /// Finding them gets a first token, so a missing or broken source fails
    /// here, before the job starts.
    pub async fn from_default_credentials(
        project: &str,
        region: &str,
    ) -> Result<Vertex, VertexError> {
        let provider =
            gcp_auth::provider()
                .await
                .map_err(|e| VertexError::NoDefaultCredentials {
                    message: match &e {
                        gcp_auth::Error::NoAuthMethod(a, b, c) => {
                            format!(
                                "{}; {}; {}",
                                error_chain(&**c),
                                error_chain(&**b),
                                error_chain(&**a)
                            )
                        }
                        other => error_chain(other),
                    },
                })?;
        Ok(Vertex {
            project: project.to_string(),
            region: region.to_string(),
            source_name: "Application Default Credentials".into(),
            provider,
        })
    }

    /// A valid access token. `gcp_auth` caches it (per provider, not with
    /// [`super::token_cache`]) and fetches a new one once the cached one is
    /// within 20 seconds of its expiry; concurrent callers may each fetch.
    pub async fn token(&self) -> Result<Secret, VertexError> {
        let token = self
            .provider
            .token(&[SCOPE])
            .await
            .map_err(|e| VertexError::Token {
                source_name: self.source_name.clone(),
                message: error_chain(&e),
            })?;
        Ok(Secret::new(token.as_str().to_string()))
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

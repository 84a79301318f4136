//! Google Vertex AI for Claude Code: the broker holds the Google
//! credentials, gets OAuth access tokens with them ([`super::google_auth`]:
//! Paddock makes the requests, reads each answer up to a bound, caches the
//! token and fetches a new one before it expires) and sends the token
//! upstream as `Authorization: Bearer`. The credentials are the service
//! account's JSON key the spec references (`upstream.key`; the RS256 JWT
//! assertion is exchanged at the key's `token_uri`), or, without a key,
//! Google's Application Default Credentials ([`super::google_adc`]).
//! Claude Code runs in Vertex mode with its own Google auth skipped and its
//! job token in a custom header; the broker rebuilds the upstream path from
//! the spec's project and region, taking only the model and the method from
//! the engine's request.

use super::google_adc::{AdcEnv, AdcError};
use super::google_auth::{GoogleAuthError, GoogleTokens};
use super::secret::Secret;

pub use super::google_auth::SCOPE;

#[derive(Debug, thiserror::Error)]
pub enum VertexError {
    #[error("Vertex {0}")]
    Credentials(#[from] GoogleAuthError),
    #[error("Vertex: no Application Default Credentials (set upstream.key to a service-account key, or GOOGLE_APPLICATION_CREDENTIALS, or run `gcloud auth application-default login`): {0}")]
    NoDefaultCredentials(#[from] AdcError),
}

/// Where a job's Vertex calls go and how they are authorized.
pub struct Vertex {
    pub project: String,
    pub region: String,
    /// What the credentials are, for messages: `service account EMAIL` or
    /// `Application Default Credentials`.
    source_name: String,
    tokens: GoogleTokens,
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
        let tokens = GoogleTokens::service_account(key_json)?;
        Ok(Vertex {
            project: project.to_string(),
            region: region.to_string(),
            source_name: tokens.source_name(),
            tokens,
        })
    }

    /// From Google's Application Default Credentials in Paddock's
    /// environment (no key in the spec).
    pub async fn from_default_credentials(
        project: &str,
        region: &str,
    ) -> Result<Vertex, VertexError> {
        Vertex::from_default_credentials_in(&AdcEnv::from_process(), project, region).await
    }

    /// From Google's Application Default Credentials in `env`. Finding them
    /// gets a first token, so a missing or broken source fails here, before
    /// the job starts.
    pub async fn from_default_credentials_in(
        env: &AdcEnv,
        project: &str,
        region: &str,
    ) -> Result<Vertex, VertexError> {
        let tokens = super::google_adc::find(env).await?;
        Ok(Vertex {
            project: project.to_string(),
            region: region.to_string(),
            source_name: "Application Default Credentials".into(),
            tokens,
        })
    }

    /// A valid access token: the cached one until five minutes (or half its
    /// life, for a short-lived one) before it expires, then a new one; one
    /// fetch at a time ([`super::token_cache`]).
    pub async fn token(&self) -> Result<Secret, VertexError> {
        Ok(self.tokens.token().await?)
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
        "streamRawPredict" | "rawPredict" if is_model_id(model) => {
            Some((model.to_string(), method.to_string()))
        }
        _ => None,
    }
}

/// Whether `model` is a Vertex model id as the path may carry it: an
/// ASCII letter or digit, then those and `.`, `_`, `@`, `-`
/// (`claude-sonnet-4-5@20250929`).
/// Anything else is not routed: the model is pasted into the upstream's
/// path as sent, and a `%`-escape there (`x%2F..%2F..%2Fprojects%2FOTHER`)
/// is decoded by no Paddock check but may be by the provider's front end,
/// naming another project's path the server's identity can reach.
fn is_model_id(model: &str) -> bool {
    model
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric())
        && model
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'@' | b'-'))
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
        // A model holding anything but a model id's characters is not
        // routed, an escaped path above all.
        for model in [
            "x%2F%2E%2E%2F%2E%2E%2Fprojects%2FOTHER%2Flocations%2Fus-east5%2Fpublishers%2Fanthropic%2Fmodels%2Fus.anthropic.claude-sonnet-4-5-20250929-v1",
            "claude-sonnet-4-5%4020250929",
            "claude sonnet",
            "claude-sonnet-4-5?x=1",
            "..",
            "",
        ] {
            assert_eq!(
                parse_path(&format!(
                    "/v1/projects/p/locations/us-east5/publishers/anthropic/models/{model}:rawPredict"
                )),
                None,
                "{model}"
            );
        }
    }
}

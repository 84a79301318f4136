//! The credentials of a cloud upstream (Vertex, Bedrock, Azure OpenAI
//! with Entra ID), found at admission (and, without a key, a first token
//! fetched) before the job exists.

use std::sync::Arc;
use std::time::Duration;

use paddock_protocol::{JobSpec, KeyHeaderKind, ProviderKind};

use super::error::AdmitError;
use crate::broker::{self, Secret};

/// The variable a Bedrock API key is read from when the spec has no key,
/// as the AWS SDKs and Claude Code do.
pub const BEDROCK_API_KEY_VAR: &str = "AWS_BEARER_TOKEN_BEDROCK";

/// The Bedrock upstream of a `bedrock` spec, first match wins: the key as a
/// Bedrock API key (`key_header = "bearer"`) or as AWS credentials; without
/// a key `AWS_BEARER_TOKEN_BEDROCK`, else the AWS credential chain.
async fn bedrock_of(
    spec: &JobSpec,
    key: Option<&Secret>,
) -> Result<broker::bedrock::Bedrock, broker::bedrock::BedrockError> {
    let region = spec.upstream.bedrock_region.as_deref().unwrap_or("");
    let env_key = paddock_protocol::KeyRef::Env(BEDROCK_API_KEY_VAR.into());
    match (key, spec.upstream.key_header) {
        (Some(k), Some(KeyHeaderKind::Bearer)) => {
            Ok(broker::bedrock::Bedrock::with_api_key(k.clone(), region))
        }
        (Some(k), _) => broker::bedrock::Bedrock::new(k, region),
        (None, _) => match Secret::resolve(&env_key) {
            Ok(k) => Ok(broker::bedrock::Bedrock::with_api_key(k, region)),
            Err(_) => {
                let client = reqwest::Client::builder()
                    .no_proxy()
                    .connect_timeout(Duration::from_secs(5))
                    .build()
                    .map_err(|e| broker::bedrock::BedrockError::Chain {
                        profile: String::new(),
                        message: e.to_string(),
                    })?;
                broker::bedrock::Bedrock::from_chain(
                    region,
                    spec.upstream.aws_profile.as_deref(),
                    client,
                )
                .await
            }
        },
    }
}

/// The Vertex AI upstream of a `vertex` spec: its service-account key, or
/// without one Google's Application Default Credentials.
async fn vertex_of(
    spec: &JobSpec,
    key: Option<&Secret>,
) -> Result<broker::vertex::Vertex, broker::vertex::VertexError> {
    let project = spec.upstream.vertex_project.as_deref().unwrap_or("");
    let region = spec.upstream.vertex_region.as_deref().unwrap_or("");
    match key {
        Some(key) => broker::vertex::Vertex::new(key, project, region),
        None => broker::vertex::Vertex::from_default_credentials(project, region).await,
    }
}

/// The credentials of a cloud upstream (Vertex, Bedrock, Azure OpenAI with
/// Entra ID), made at admission.
pub(super) struct CloudAuth {
    pub vertex: Option<Arc<broker::vertex::Vertex>>,
    pub bedrock: Option<Arc<broker::bedrock::Bedrock>>,
    pub entra: Option<Arc<broker::entra::Entra>>,
}

impl CloudAuth {
    /// The cloud credentials of `spec`'s upstream (`key` the resolved key).
    pub(super) async fn of(spec: &JobSpec, key: Option<&Secret>) -> Result<CloudAuth, AdmitError> {
        let cloud = |e: &dyn std::fmt::Display| AdmitError::CloudCredentials(e.to_string());
        Ok(CloudAuth {
            vertex: match spec.upstream.provider {
                ProviderKind::Vertex => {
                    Some(Arc::new(vertex_of(spec, key).await.map_err(|e| cloud(&e))?))
                }
                _ => None,
            },
            bedrock: match spec.upstream.provider {
                ProviderKind::Bedrock => Some(Arc::new(
                    bedrock_of(spec, key).await.map_err(|e| cloud(&e))?,
                )),
                _ => None,
            },
            // The key is the app's client secret: it goes to the token
            // endpoint only, never upstream.
            entra: match (&spec.upstream.entra, key) {
                (Some(e), Some(secret)) => Some(Arc::new(
                    broker::entra::Entra::new(
                        &e.tenant_id,
                        &e.client_id,
                        secret.clone(),
                        e.authority.as_deref(),
                        e.scope.as_deref(),
                    )
                    .map_err(|e| AdmitError::EntraClient(e.to_string()))?,
                )),
                _ => None,
            },
        })
    }
}

//! Who the broker forwards a job's calls to and how it authorizes them:
//! one [`Provider`] per job, made from the spec's `[upstream]` at
//! admission ([`Provider::from_spec`]; cloud credentials are found, and a
//! first token fetched, before the job exists). Each provider knows its
//! ledger label, its default base URL, which request paths it serves (a
//! Vertex or Bedrock job reaches only its provider's paths, the model named
//! in the path) and the credentials of one attempt (a key in the API's
//! header, an Entra ID or Vertex token, a SigV4 signature).

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue, Method};
use paddock_protocol::spec::{KeyHeaderKind, ProviderKind, UpstreamSpec};

use super::bedrock::{Bedrock, BedrockError};
use super::entra::{Entra, EntraError};
use super::meter::Api;
use super::secret::{Secret, SecretKind};
use super::vertex::{Vertex, VertexError};
use crate::cut_text::{cut, Cut, Length};

/// The default OpenAI API base (the path after `/v1` is appended).
pub const OPENAI_BASE: &str = "https://api.openai.com/v1";
/// The default Anthropic API base (the path after `/v1` is appended).
pub const ANTHROPIC_BASE: &str = "https://api.anthropic.com/v1";
/// The environment variable holding a Bedrock API key, read when a
/// `bedrock` spec has no key, as the AWS SDKs and Claude Code do.
pub const BEDROCK_API_KEY_VAR: &str = "AWS_BEARER_TOKEN_BEDROCK";

#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("upstream.key: {0}")]
    Vertex(#[from] VertexError),
    #[error("upstream.key: {0}")]
    Bedrock(#[from] BedrockError),
    #[error("upstream.entra: {0}")]
    Entra(#[from] EntraError),
    #[error("upstream.key: provider {provider} needs a key")]
    NoKey { provider: &'static str },
}

/// How an Azure OpenAI (or other OpenAI-compatible) resource is
/// authorized.
#[derive(Debug, Clone)]
pub enum AzureAuth {
    /// The resource's API key, sent as `api-key`.
    ApiKey(Secret),
    /// A Microsoft Entra ID app's tokens, sent as `Authorization: Bearer`.
    Entra(Arc<Entra>),
}

/// The upstream provider of a job.
#[derive(Debug, Clone)]
pub enum Provider {
    /// OpenAI (or an upstream speaking its APIs): the key as each API
    /// expects it (`Authorization: Bearer` for Responses and Chat,
    /// `x-api-key` for Messages).
    OpenAi { key: Secret },
    /// Anthropic: the key as each API expects it, like [`Provider::OpenAi`].
    Anthropic { key: Secret },
    /// Azure OpenAI or AI Foundry (ledger label `openai`).
    Azure(AzureAuth),
    /// Google Vertex AI: its paths only, a token minted per call.
    Vertex(Arc<Vertex>),
    /// Amazon Bedrock: its runtime paths only, each attempt SigV4-signed
    /// (or a Bedrock API key).
    Bedrock(Arc<Bedrock>),
    /// The scripted upstream on loopback: no credentials.
    Scripted,
}

/// What a request path asks of the provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// A model call of `api`; `model` when the path names it (Vertex,
    /// Bedrock), `upstream_path` the path to forward to.
    Call {
        api: Api,
        model: Option<String>,
        upstream_path: String,
    },
    /// `GET /v1/models`.
    Models,
    /// Not served: the status, the error kind and the message, in the
    /// format of `api`.
    Refused {
        api: Api,
        status: http::StatusCode,
        kind: &'static str,
        message: String,
    },
}

impl Provider {
    /// The name `provider` is refused by ([`ProviderError::NoKey`]) when
    /// a spec names no key for it; `None` when it runs without one (a
    /// cloud's own credentials, the scripted upstream). What
    /// [`from_spec`](Self::from_spec) needs, which a server checks of a
    /// submission before anything of its host is read.
    pub fn key_needed(provider: ProviderKind) -> Option<&'static str> {
        match provider {
            ProviderKind::Openai => Some("openai"),
            ProviderKind::Anthropic => Some("anthropic"),
            ProviderKind::Vertex | ProviderKind::Bedrock | ProviderKind::Scripted => None,
        }
    }

    /// The provider of `spec` with its resolved `key` (none for
    /// `scripted`): cloud credentials are found here.
    pub async fn from_spec(
        spec: &UpstreamSpec,
        key: Option<Secret>,
    ) -> Result<Provider, ProviderError> {
        let need = || {
            key.clone().ok_or(ProviderError::NoKey {
                provider: Provider::key_needed(spec.provider).unwrap_or_default(),
            })
        };
        Ok(match spec.provider {
            ProviderKind::Scripted => Provider::Scripted,
            ProviderKind::Vertex => {
                Provider::Vertex(Arc::new(vertex_of(spec, key.as_ref()).await?))
            }
            ProviderKind::Bedrock => {
                Provider::Bedrock(Arc::new(bedrock_of(spec, key.as_ref()).await?))
            }
            // The key is the app's client secret: it goes to the token
            // endpoint only, never upstream.
            ProviderKind::Openai => match (&spec.entra, spec.key_header) {
                (Some(e), _) => Provider::Azure(AzureAuth::Entra(Arc::new(Entra::new(
                    &e.tenant_id,
                    &e.client_id,
                    need()?,
                    e.authority.as_deref(),
                    e.scope.as_deref(),
                )?))),
                (None, Some(KeyHeaderKind::ApiKey)) => Provider::Azure(AzureAuth::ApiKey(need()?)),
                (None, _) => Provider::OpenAi { key: need()? },
            },
            ProviderKind::Anthropic => Provider::Anthropic { key: need()? },
        })
    }

    /// The ledger's provider label.
    pub fn label(&self) -> &'static str {
        match self {
            Provider::OpenAi { .. } | Provider::Azure(_) => "openai",
            Provider::Anthropic { .. } => "anthropic",
            Provider::Vertex(_) => "vertex",
            Provider::Bedrock(_) => "bedrock",
            Provider::Scripted => "scripted",
        }
    }

    /// The base URL of `spec`'s upstream: its `base_url` or the provider's
    /// own; `None` for `scripted` (its server's, known once it runs).
    pub fn base_url(spec: &UpstreamSpec) -> Option<String> {
        let base = spec.base_url.clone();
        Some(match spec.provider {
            ProviderKind::Scripted => return None,
            // The broker signs each call with SigV4; the base has no `/v1`.
            ProviderKind::Bedrock => base.unwrap_or_else(|| {
                format!(
                    "https://bedrock-runtime.{}.amazonaws.com",
                    spec.bedrock_region.as_deref().unwrap_or("us-east-1")
                )
            }),
            // The broker mints the token per call; the base keeps `/v1`.
            ProviderKind::Vertex => base.unwrap_or_else(|| {
                format!(
                    "https://{}-aiplatform.googleapis.com/v1",
                    spec.vertex_region.as_deref().unwrap_or("us-east5")
                )
            }),
            ProviderKind::Openai => base.unwrap_or_else(|| OPENAI_BASE.into()),
            ProviderKind::Anthropic => match base {
                // ANTHROPIC_BASE_URL convention: without `/v1`.
                Some(b) if !b.trim_end_matches('/').ends_with("/v1") => {
                    format!("{}/v1", b.trim_end_matches('/'))
                }
                Some(b) => b,
                None => ANTHROPIC_BASE.into(),
            },
        })
    }

    /// Whether the job's query string goes upstream with its call: not to
    /// Vertex AI or Bedrock, whose paths the broker rebuilds from the spec
    /// (the engines send no query there), where a Google system parameter
    /// (`userProject`, `quotaUser`) would bill another project the
    /// server's identity may use.
    pub fn keeps_query(&self) -> bool {
        !matches!(self, Provider::Vertex(_) | Provider::Bedrock(_))
    }

    /// The Vertex AI project and region, for a Vertex job.
    pub fn vertex(&self) -> Option<&Vertex> {
        match self {
            Provider::Vertex(v) => Some(v),
            _ => None,
        }
    }

    /// The Bedrock credentials and region, for a Bedrock job.
    pub fn bedrock(&self) -> Option<&Bedrock> {
        match self {
            Provider::Bedrock(b) => Some(b),
            _ => None,
        }
    }

    /// What a request of `method` to `path` asks for.
    pub fn route(&self, method: &Method, path: &str) -> Route {
        let post = method == Method::POST;
        match self {
            Provider::Vertex(vertex) => match super::vertex::parse_path(path).filter(|_| post) {
                // Rebuilt from the spec's project and region: the job
                // picks only the model and the method.
                Some((model, m)) => Route::Call {
                    api: Api::Messages,
                    upstream_path: vertex.path(&model, &m),
                    model: Some(model),
                },
                None if post => refused(
                    Api::Messages,
                    http::StatusCode::NOT_FOUND,
                    "not_found_error",
                    format!(
                        "paddock broker: no route for POST {} (this job uses Vertex AI)",
                        shown(path)
                    ),
                ),
                // A Vertex job reaches Vertex's paths only: its token goes
                // nowhere else.
                None => standard_route(method, path),
            },
            Provider::Bedrock(_) => match super::bedrock::parse_path(path).filter(|_| post) {
                Some((model, m)) => Route::Call {
                    api: Api::Messages,
                    upstream_path: Bedrock::path(&model, &m),
                    model: Some(super::bedrock::decode_model(&model)),
                },
                // Claude Code first lists inference profiles (a
                // control-plane call it tolerates failing): not served.
                None if method == Method::GET && path == "/inference-profiles" => refused(
                    Api::Messages,
                    http::StatusCode::NOT_IMPLEMENTED,
                    "not_implemented",
                    "paddock broker: Bedrock inference profiles are not listed through the broker"
                        .into(),
                ),
                None => refused(
                    Api::Messages,
                    http::StatusCode::NOT_FOUND,
                    "not_found_error",
                    format!(
                        "paddock broker: no route for {method} {} (this job uses Amazon Bedrock)",
                        shown(path)
                    ),
                ),
            },
            _ => standard_route(method, path),
        }
    }

    /// The request headers of one attempt for `api`: `headers` (the
    /// engine's, already filtered) plus the credentials: the key in the
    /// header the API or the provider expects, an Entra ID or Vertex access
    /// token (cached until shortly before it expires), or Bedrock's SigV4
    /// signature of `url` and `body` (made per attempt, so a retried call
    /// is signed at the moment it leaves; no `x-amz-*` header of the
    /// engine's survives).
    pub async fn credentials(
        &self,
        api: Api,
        url: &str,
        body: &[u8],
        mut headers: HeaderMap,
    ) -> Result<HeaderMap, String> {
        let (name, value) = match self {
            Provider::Scripted => return Ok(headers),
            Provider::OpenAi { key } | Provider::Anthropic { key } => match api {
                Api::Responses | Api::Chat => (
                    http::header::AUTHORIZATION,
                    format!("Bearer {}", key.expose()),
                ),
                Api::Messages => (
                    HeaderName::from_static("x-api-key"),
                    key.expose().to_string(),
                ),
            },
            Provider::Azure(AzureAuth::ApiKey(key)) => {
                (HeaderName::from_static("api-key"), key.expose().to_string())
            }
            Provider::Azure(AzureAuth::Entra(entra)) => {
                let token = entra
                    .token()
                    .await
                    .map_err(|e| format!("paddock broker: {e}"))?;
                (
                    http::header::AUTHORIZATION,
                    format!("Bearer {}", token.expose()),
                )
            }
            Provider::Vertex(vertex) => {
                let token = vertex
                    .token()
                    .await
                    .map_err(|e| format!("paddock broker: {e}"))?;
                (
                    http::header::AUTHORIZATION,
                    format!("Bearer {}", token.expose()),
                )
            }
            Provider::Bedrock(bedrock) => {
                sign_bedrock(bedrock, url, body, &mut headers).await?;
                return Ok(headers);
            }
        };
        if let Ok(mut v) = HeaderValue::from_str(&value) {
            v.set_sensitive(true);
            headers.insert(name, v);
        }
        Ok(headers)
    }
}

fn refused(api: Api, status: http::StatusCode, kind: &'static str, message: String) -> Route {
    Route::Refused {
        api,
        status,
        kind,
        message,
    }
}

/// The OpenAI and Anthropic routes every other provider serves.
fn standard_route(method: &Method, path: &str) -> Route {
    let call = |api| Route::Call {
        api,
        model: None,
        upstream_path: path.to_string(),
    };
    match (method, Api::of_path(path)) {
        (&Method::POST, Some(api)) => call(api),
        (&Method::GET, None) if path == "/v1/models" => Route::Models,
        _ => refused(
            Api::Responses,
            http::StatusCode::NOT_FOUND,
            "not_found_error",
            format!("paddock broker: no route for {method} {}", shown(path)),
        ),
    }
}

/// The most characters of a refused request's path its message (a ledger
/// row's error, a policy event) keeps.
const SHOWN_PATH_CHARS: usize = 512;

/// `path` as a refusal names it: cut at [`SHOWN_PATH_CHARS`] characters,
/// the cut said with the path's length in bytes.
fn shown(path: &str) -> String {
    cut(path, Cut::chars(SHOWN_PATH_CHARS).saying(Length::Bytes))
}

/// Adds Bedrock's authorization to `headers`: the engine's `x-amz-*`
/// headers removed, the content type signed as sent.
async fn sign_bedrock(
    bedrock: &Bedrock,
    url: &str,
    body: &[u8],
    headers: &mut HeaderMap,
) -> Result<(), String> {
    let amz: Vec<_> = headers
        .keys()
        .filter(|n| n.as_str().starts_with("x-amz-"))
        .cloned()
        .collect();
    for n in amz {
        headers.remove(n);
    }
    let content_type = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_str(&content_type)
            .unwrap_or(HeaderValue::from_static("application/json")),
    );
    let signed = bedrock
        .sign(
            "POST",
            url,
            &[("content-type", content_type.as_str())],
            body,
            std::time::SystemTime::now(),
        )
        .await
        .map_err(|e| format!("paddock broker: {e}"))?;
    for (name, value) in signed {
        if let (Ok(n), Ok(mut v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            v.set_sensitive(true);
            headers.insert(n, v);
        }
    }
    Ok(())
}

/// The Bedrock credentials of a `bedrock` spec, first match wins: the key
/// as a Bedrock API key (`key_header = "bearer"`) or as AWS credentials;
/// without a key `AWS_BEARER_TOKEN_BEDROCK`, else the AWS credential chain.
async fn bedrock_of(spec: &UpstreamSpec, key: Option<&Secret>) -> Result<Bedrock, BedrockError> {
    let region = spec.bedrock_region.as_deref().unwrap_or("");
    let env_key = paddock_protocol::KeyRef::Env(BEDROCK_API_KEY_VAR.into());
    match (key, spec.key_header) {
        (Some(k), Some(KeyHeaderKind::Bearer)) => Ok(Bedrock::with_api_key(k.clone(), region)),
        (Some(k), _) => Bedrock::new(k, region),
        (None, _) => match Secret::resolve(SecretKind::ProviderKey, &env_key) {
            Ok(k) => Ok(Bedrock::with_api_key(k, region)),
            Err(_) => {
                let client = reqwest::Client::builder()
                    .no_proxy()
                    .connect_timeout(Duration::from_secs(5))
                    .build()
                    .map_err(|e| BedrockError::Chain {
                        profile: String::new(),
                        message: e.to_string(),
                    })?;
                Bedrock::from_chain(region, spec.aws_profile.as_deref(), client).await
            }
        },
    }
}

/// The Vertex AI credentials of a `vertex` spec: its service-account key,
/// or without one Google's Application Default Credentials.
async fn vertex_of(spec: &UpstreamSpec, key: Option<&Secret>) -> Result<Vertex, VertexError> {
    let project = spec.vertex_project.as_deref().unwrap_or("");
    let region = spec.vertex_region.as_deref().unwrap_or("");
    match key {
        Some(key) => Vertex::new(key, project, region),
        None => Vertex::from_default_credentials(project, region).await,
    }
}

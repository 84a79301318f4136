//! Amazon Bedrock for Claude Code: the broker holds the AWS credentials
//! and signs every forwarded request with SigV4 (service `bedrock`, the
//! spec's region), or sends a Bedrock API key as `Authorization: Bearer`.
//! The credentials are the file the spec's `key` references (JSON or an
//! INI profile), or, without a key, `AWS_BEARER_TOKEN_BEDROCK` (an API key)
//! or else the standard AWS chain of `aws-config` (environment, shared
//! config and credentials files with profiles, SSO, assume-role,
//! `credential_process`, web identity, container and instance metadata),
//! whose temporary credentials are reused until shortly before they expire
//! ([`super::token_cache`]). Claude Code runs in Bedrock mode with its own AWS auth
//! skipped and its job token in a custom header; the broker takes only the
//! model and the method from the engine's path
//! (`/model/MODEL/invoke-with-response-stream` or `/model/MODEL/invoke`)
//! and rebuilds the rest. Bedrock model ids (`anthropic.claude-…-v1:0`, with
//! an optional inference-profile prefix `us.`, `eu.`, `global.`, …) are
//! priced as the Anthropic model they name ([`price_name`]).

use crate::error_chain::chain as error_chain;
use std::time::SystemTime;

use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use serde::Deserialize;

use super::secret::Secret;
use super::token_cache::{Fetched, TokenCache};

/// The SigV4 service name of the Bedrock runtime.
pub const SERVICE: &str = "bedrock";

#[derive(Debug, thiserror::Error)]
pub enum BedrockError {
    #[error("AWS credentials: not a JSON object with AccessKeyId and SecretAccessKey: {0}")]
    ParseCredentials(String),
    #[error("AWS credentials: shared credentials file (INI): {0}")]
    ParseIni(String),
    #[error("AWS credential chain{profile}: no credentials: {message} (it reads AWS_* variables, ~/.aws/config and ~/.aws/credentials with SSO and assume-role, web identity, container and instance metadata; docs/broker.md#amazon-bedrock)")]
    Chain { profile: String, message: String },
    #[error("AWS credentials {access_key_id}: SigV4 signing of {url} failed: {message}")]
    Sign {
        access_key_id: String,
        url: String,
        message: String,
    },
}

/// The credentials file: the JSON that `aws configure export-credentials`
/// and `credential_process` print, or the same keys in snake case.
#[derive(Deserialize)]
struct CredentialsFile {
    #[serde(alias = "access_key_id", alias = "aws_access_key_id")]
    #[serde(rename = "AccessKeyId")]
    access_key_id: String,
    #[serde(alias = "secret_access_key", alias = "aws_secret_access_key")]
    #[serde(rename = "SecretAccessKey")]
    secret_access_key: String,
    #[serde(alias = "session_token", alias = "aws_session_token")]
    #[serde(rename = "SessionToken", default)]
    session_token: Option<String>,
}

/// The `[default]` profile (or the only one) of an AWS shared credentials
/// file: `aws_access_key_id`, `aws_secret_access_key`, `aws_session_token`.
fn from_ini(text: &str) -> Result<CredentialsFile, BedrockError> {
    let mut profiles: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            profiles.push((name.trim().to_string(), Vec::new()));
            continue;
        }
        let (Some((key, value)), Some((_, entries))) = (line.split_once('='), profiles.last_mut())
        else {
            return Err(BedrockError::ParseIni(format!(
                "line {}: expected `[profile]` or `key = value`",
                n + 1
            )));
        };
        entries.push((key.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let entries = match profiles.iter().find(|(name, _)| name == "default") {
        Some((_, e)) => e,
        None => match profiles.as_slice() {
            [(_, e)] => e,
            [] => return Err(BedrockError::ParseIni("no profile".into())),
            _ => {
                return Err(BedrockError::ParseIni(
                    "several profiles and no [default]: reference a file with one".into(),
                ))
            }
        },
    };
    let get = |key: &str| {
        entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    Ok(CredentialsFile {
        access_key_id: get("aws_access_key_id")
            .ok_or_else(|| BedrockError::ParseIni("no aws_access_key_id".into()))?,
        secret_access_key: get("aws_secret_access_key")
            .ok_or_else(|| BedrockError::ParseIni("no aws_secret_access_key".into()))?,
        session_token: get("aws_session_token"),
    })
}

/// How the broker authorizes a job's Bedrock calls.
enum Auth {
    /// Fixed keys (the spec's credentials file).
    Keys {
        access_key_id: String,
        secret_access_key: Secret,
        session_token: Option<Secret>,
    },
    /// The AWS credential chain, its last credentials cached until shortly
    /// before they expire.
    Chain {
        profile: Option<String>,
        provider: SharedCredentialsProvider,
        cached: TokenCache<Credentials>,
    },
    /// A Bedrock API key, sent as `Authorization: Bearer`.
    ApiKey(Secret),
}

/// Where a job's Bedrock calls go and how they are authorized.
pub struct Bedrock {
    pub region: String,
    auth: Auth,
}

impl std::fmt::Debug for Bedrock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Bedrock");
        d.field("region", &self.region);
        match &self.auth {
            Auth::Keys { access_key_id, .. } => d.field("access_key_id", access_key_id),
            Auth::Chain { profile, .. } => d.field("chain_profile", profile),
            Auth::ApiKey(key) => d.field("api_key", &key.fingerprint()),
        };
        d.finish_non_exhaustive()
    }
}

impl Bedrock {
    /// From the credentials (the secret the spec references): JSON, or an
    /// AWS shared credentials file (INI).
    pub fn new(credentials: &Secret, region: &str) -> Result<Bedrock, BedrockError> {
        let text = credentials.expose().trim_start();
        let file: CredentialsFile = if text.starts_with('{') {
            serde_json::from_str(text).map_err(|e| BedrockError::ParseCredentials(e.to_string()))?
        } else {
            from_ini(text)?
        };
        if file.access_key_id.is_empty() || file.secret_access_key.is_empty() {
            return Err(BedrockError::ParseCredentials(
                "AccessKeyId or SecretAccessKey is empty".into(),
            ));
        }
        Ok(Bedrock {
            region: region.to_string(),
            auth: Auth::Keys {
                access_key_id: file.access_key_id,
                secret_access_key: Secret::new(file.secret_access_key),
                session_token: file
                    .session_token
                    .filter(|t| !t.is_empty())
                    .map(Secret::new),
            },
        })
    }

    /// With a Bedrock API key (`AWS_BEARER_TOKEN_BEDROCK`), sent as
    /// `Authorization: Bearer` instead of a SigV4 signature.
    pub fn with_api_key(key: Secret, region: &str) -> Bedrock {
        Bedrock {
            region: region.to_string(),
            auth: Auth::ApiKey(key),
        }
    }

    /// With the standard AWS credential chain (`profile`, or `AWS_PROFILE`,
    /// or `default`), its HTTP calls made with `client`. The first
    /// credentials are fetched here, so a chain that finds none fails before
    /// the job starts.
    pub async fn from_chain(
        region: &str,
        profile: Option<&str>,
        client: reqwest::Client,
    ) -> Result<Bedrock, BedrockError> {
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new(region.to_string()))
            .http_client(super::aws_http::ReqwestHttpClient::new(client));
        if let Some(p) = profile {
            loader = loader.profile_name(p);
        }
        let config = loader.load().await;
        let shown = profile
            .map(|p| format!(" (profile {p})"))
            .unwrap_or_default();
        let Some(provider) = config.credentials_provider() else {
            return Err(BedrockError::Chain {
                profile: shown,
                message: "aws-config made no credentials provider".into(),
            });
        };
        let bedrock = Bedrock {
            region: region.to_string(),
            auth: Auth::Chain {
                profile: profile.map(str::to_string),
                provider,
                cached: TokenCache::default(),
            },
        };
        bedrock.chain_credentials().await?;
        Ok(bedrock)
    }

    /// The chain's credentials: the cached ones while fresh, else new ones.
    async fn chain_credentials(&self) -> Result<Option<Credentials>, BedrockError> {
        let Auth::Chain {
            profile,
            provider,
            cached,
        } = &self.auth
        else {
            return Ok(None);
        };
        let fetch = || async {
            let asked = SystemTime::now();
            let creds = provider
                .provide_credentials()
                .await
                .map_err(|e| BedrockError::Chain {
                    profile: profile
                        .as_deref()
                        .map(|p| format!(" (profile {p})"))
                        .unwrap_or_default(),
                    message: error_chain(&e),
                })?;
            let expires_in = creds
                .expiry()
                .map(|expiry| expiry.duration_since(asked).unwrap_or_default());
            Ok(Fetched {
                value: creds,
                expires_in,
            })
        };
        cached.get(fetch).await.map(Some)
    }

    /// The headers that authorize a request of `method` to `url` with
    /// `headers` (signed as given) and `body`: the SigV4 ones
    /// (`authorization`, `x-amz-date`, and `x-amz-security-token` with a
    /// session token), or `authorization: Bearer` with an API key.
    pub async fn sign(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        time: SystemTime,
    ) -> Result<Vec<(String, String)>, BedrockError> {
        let chain = self.chain_credentials().await?;
        let (access_key_id, secret, token) = match (&self.auth, &chain) {
            (Auth::ApiKey(key), _) => {
                return Ok(vec![(
                    "authorization".into(),
                    format!("Bearer {}", key.expose()),
                )])
            }
            (
                Auth::Keys {
                    access_key_id,
                    secret_access_key,
                    session_token,
                },
                _,
            ) => (
                access_key_id.as_str(),
                secret_access_key.expose(),
                session_token.as_ref().map(Secret::expose),
            ),
            (Auth::Chain { .. }, Some(c)) => {
                (c.access_key_id(), c.secret_access_key(), c.session_token())
            }
            (Auth::Chain { .. }, None) => {
                return Err(BedrockError::Chain {
                    profile: String::new(),
                    message: "no credentials cached".into(),
                })
            }
        };
        sign_with(
            &SigningKey {
                access_key_id,
                secret_access_key: secret,
                session_token: token,
                region: &self.region,
            },
            &SignedRequest {
                method,
                url,
                headers,
                body,
                time,
            },
        )
        .map_err(|message| BedrockError::Sign {
            access_key_id: access_key_id.to_string(),
            url: url.to_string(),
            message,
        })
    }

    /// The upstream path for `model` (as the engine sent it) and `method`
    /// (`invoke-with-response-stream` or `invoke`): the model id decoded and
    /// percent-encoded again as the AWS SDKs do (`:` → `%3A`).
    pub fn path(model: &str, method: &str) -> String {
        format!("/model/{}/{method}", encode_model(&decode_model(model)))
    }
}

/// The credentials a request is SigV4-signed with.
#[derive(Debug, Clone, Copy)]
pub struct SigningKey<'a> {
    pub access_key_id: &'a str,
    pub secret_access_key: &'a str,
    pub session_token: Option<&'a str>,
    pub region: &'a str,
}

/// The parts of a request a SigV4 signature covers.
#[derive(Debug, Clone, Copy)]
pub struct SignedRequest<'a> {
    pub method: &'a str,
    pub url: &'a str,
    /// The headers signed as given (`host` and the `x-amz-*` ones are added).
    pub headers: &'a [(&'a str, &'a str)],
    pub body: &'a [u8],
    pub time: SystemTime,
}

/// SigV4-signs a request with explicit credentials; the headers to add.
/// Shared by the broker and the test stand-in Bedrock
/// (`crates/test-support`), which re-signs what it received with the
/// test's credentials to verify the signature.
pub fn sign_with(
    key: &SigningKey<'_>,
    request: &SignedRequest<'_>,
) -> Result<Vec<(String, String)>, String> {
    let identity = Credentials::new(
        key.access_key_id,
        key.secret_access_key,
        key.session_token.map(str::to_string),
        None,
        "paddock",
    )
    .into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(key.region)
        .name(SERVICE)
        .time(request.time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| e.to_string())?
        .into();
    let signable = SignableRequest::new(
        request.method,
        request.url,
        request.headers.iter().copied(),
        SignableBody::Bytes(request.body),
    )
    .map_err(|e| e.to_string())?;
    let (instructions, _signature) = sign(signable, &params)
        .map_err(|e| e.to_string())?
        .into_parts();
    Ok(instructions
        .headers()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect())
}

/// `(model, method)` of an engine's Bedrock request path
/// `/model/MODEL/invoke-with-response-stream` or `/model/MODEL/invoke`;
/// the model stays as sent (percent-encoded). A model that is a dot
/// segment (`.`, `..`, or either percent-encoded, which [`Bedrock::path`]
/// decodes and, dots being unreserved, sends plain) is none: the
/// upstream URL's parse would resolve `/model/../invoke` to `/invoke`, a
/// path of Bedrock's other than the two the broker forwards to, signed
/// with the job's provider's key.
pub fn parse_path(path: &str) -> Option<(String, String)> {
    let rest = path.strip_prefix("/model/")?;
    let (model, method) = rest.split_once('/')?;
    let dots = matches!(decode_model(model).as_str(), "." | "..");
    match method {
        "invoke-with-response-stream" | "invoke" if !model.is_empty() && !dots => {
            Some((model.to_string(), method.to_string()))
        }
        _ => None,
    }
}

/// A percent-encoded model id decoded (`%3A` → `:`; an escape that is not
/// one is kept as it is).
pub fn decode_model(model: &str) -> String {
    percent_encoding::percent_decode_str(model)
        .decode_utf8_lossy()
        .into_owned()
}

/// A model id percent-encoded for a path segment: all but `A-Z a-z 0-9 - _ . ~`.
pub fn encode_model(model: &str) -> String {
    let mut out = String::with_capacity(model.len());
    for b in model.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(b))
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The price-table name of a Bedrock model id:
/// `us.anthropic.claude-sonnet-4-5-20250929-v1:0` → `claude-sonnet-4-5-20250929`
/// (an inference-profile prefix, `anthropic.` and the `-vN[:M]` version
/// removed); `None` for a name that is not a Bedrock Anthropic id.
pub fn price_name(model: &str) -> Option<&str> {
    let start = model.find("anthropic.")?;
    let prefix = &model[..start];
    let prefix_ok =
        prefix.is_empty() || (prefix.ends_with('.') && !prefix[..prefix.len() - 1].contains('.'));
    if !prefix_ok {
        return None;
    }
    let name = &model[start + "anthropic.".len()..];
    let name = name.split_once(':').map_or(name, |(n, _)| n);
    match name.rsplit_once("-v") {
        Some((stem, v)) if !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()) => Some(stem),
        _ => Some(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bedrock_paths() {
        assert_eq!(
            parse_path(
                "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke-with-response-stream"
            ),
            Some((
                "us.anthropic.claude-sonnet-4-5-20250929-v1%3A0".into(),
                "invoke-with-response-stream".into()
            ))
        );
        assert_eq!(parse_path("/model/m/converse"), None);
        // A dot segment, plain or encoded, would leave `/model/` upstream.
        let dots: Vec<Option<(String, String)>> = [".", "..", "%2e", "%2E%2e", ".%2E"]
            .iter()
            .map(|m| parse_path(&format!("/model/{m}/invoke")))
            .collect();
        assert_eq!(dots, vec![None; 5]);
        assert_eq!(
            parse_path("/model/...%2e/invoke").map(|(m, _)| Bedrock::path(&m, "invoke")),
            Some("/model/..../invoke".to_string())
        );
        assert_eq!(parse_path("/v1/messages"), None);
        assert_eq!(
            decode_model("anthropic.claude-haiku-4-5-20251001-v1%3A0"),
            "anthropic.claude-haiku-4-5-20251001-v1:0"
        );
        // Raw or encoded from the engine, encoded upstream as the SDKs do.
        for m in ["us.anthropic.c-v1:0", "us.anthropic.c-v1%3A0"] {
            assert_eq!(
                Bedrock::path(m, "invoke"),
                "/model/us.anthropic.c-v1%3A0/invoke"
            );
        }
    }

    #[test]
    fn bedrock_ids_map_onto_price_names() {
        let cases = [
            (
                "anthropic.claude-sonnet-4-5-20250929-v1:0",
                Some("claude-sonnet-4-5-20250929"),
            ),
            (
                "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
                Some("claude-sonnet-4-5-20250929"),
            ),
            (
                "global.anthropic.claude-opus-4-1-20250805-v1:0",
                Some("claude-opus-4-1-20250805"),
            ),
            ("anthropic.claude-sonnet-4-5", Some("claude-sonnet-4-5")),
            ("claude-sonnet-4-5", None),
            ("a.b.anthropic.claude-x-v1:0", None),
        ];
        let got: Vec<_> = cases.iter().map(|(m, _)| price_name(m)).collect();
        let want: Vec<_> = cases.iter().map(|(_, w)| *w).collect();
        assert_eq!(got, want);
    }

    /// The fixed keys of `b`.
    fn keys(b: &Bedrock) -> (&str, &str, Option<&str>) {
        match &b.auth {
            Auth::Keys {
                access_key_id,
                secret_access_key,
                session_token,
            } => (
                access_key_id.as_str(),
                secret_access_key.expose(),
                session_token.as_ref().map(Secret::expose),
            ),
            _ => panic!("not fixed keys"),
        }
    }

    #[tokio::test]
    async fn an_api_key_is_sent_as_bearer_instead_of_a_signature() {
        let b = Bedrock::with_api_key(
            Secret::new("ABSKQmVkcm9ja0FQSUtleS1zZWNyZXQ=".into()),
            "us-east-1",
        );
        let signed = b
            .sign(
                "POST",
                "https://x/model/m/invoke",
                &[],
                b"{}",
                SystemTime::now(),
            )
            .await
            .unwrap();
        assert_eq!(
            signed,
            vec![(
                "authorization".to_string(),
                "Bearer ABSKQmVkcm9ja0FQSUtleS1zZWNyZXQ=".to_string()
            )]
        );
        assert!(!format!("{b:?}").contains("ABSK"));
    }

    #[tokio::test]
    async fn credentials_parse_and_sign() {
        let creds = Secret::new(
            r#"{"AccessKeyId":"AKIDEXAMPLE","SecretAccessKey":"wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY","SessionToken":"tok"}"#
                .into(),
        );
        let b = Bedrock::new(&creds, "us-east-1").unwrap();
        assert!(!format!("{b:?}").contains("wJalr"));
        let time = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        let url = "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/invoke";
        let headers = [("content-type", "application/json")];
        let signed = b.sign("POST", url, &headers, b"{}", time).await.unwrap();
        let names: Vec<&str> = signed.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            vec!["x-amz-date", "authorization", "x-amz-security-token"]
        );
        let auth = &signed[1].1;
        assert!(auth.starts_with(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20231114/us-east-1/bedrock/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, Signature="
        ), "{auth}");
        // Deterministic, and bound to the secret and the body.
        assert_eq!(
            signed,
            b.sign("POST", url, &headers, b"{}", time).await.unwrap()
        );
        let other = sign_with(
            &SigningKey {
                access_key_id: "AKIDEXAMPLE",
                secret_access_key: "wrong",
                session_token: Some("tok"),
                region: "us-east-1",
            },
            &SignedRequest {
                method: "POST",
                url,
                headers: &headers,
                body: b"{}",
                time,
            },
        )
        .unwrap();
        assert_ne!(other[1], signed[1]);
        let body2 = b.sign("POST", url, &headers, b"{ }", time).await.unwrap();
        assert_ne!(body2[1], signed[1]);
    }

    #[test]
    fn shared_credentials_files_parse() {
        let ini = "# comment\n[other]\naws_access_key_id = AKIAOTHER\n\n[default]\naws_access_key_id = AKIADEF\nAWS_SECRET_ACCESS_KEY = s3cret\naws_session_token = tok\n";
        let b = Bedrock::new(&Secret::new(ini.into()), "eu-west-1").unwrap();
        assert_eq!(keys(&b), ("AKIADEF", "s3cret", Some("tok")));
        let one = "[ci]\naws_access_key_id=AKIACI\naws_secret_access_key=x\n";
        let b = Bedrock::new(&Secret::new(one.into()), "eu-west-1").unwrap();
        assert_eq!((keys(&b).0, keys(&b).2), ("AKIACI", None));
        let errs: Vec<String> = [
            "[a]\naws_access_key_id=A\n[b]\naws_access_key_id=B\n",
            "[default]\naws_access_key_id=A\n",
            "aws_access_key_id=A\n",
        ]
        .iter()
        .map(|t| {
            Bedrock::new(&Secret::new(t.to_string()), "r")
                .unwrap_err()
                .to_string()
        })
        .collect();
        assert_eq!(
            errs,
            vec![
                "AWS credentials: shared credentials file (INI): several profiles and no [default]: reference a file with one",
                "AWS credentials: shared credentials file (INI): no aws_secret_access_key",
                "AWS credentials: shared credentials file (INI): line 1: expected `[profile]` or `key = value`",
            ]
        );
    }

    #[test]
    fn bad_credentials_are_named() {
        let err = Bedrock::new(&Secret::new(r#"{"AccessKeyId":"A"}"#.into()), "us-east-1")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("AWS credentials: not a JSON object with AccessKeyId and SecretAccessKey: missing field `SecretAccessKey`"),
            "{err}"
        );
    }
}

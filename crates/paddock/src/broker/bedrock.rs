//! Amazon Bedrock for Claude Code: the broker holds the AWS credentials
//! and signs every forwarded request with SigV4 (service `bedrock`, the
//! spec's region). Claude Code runs in Bedrock mode with its own AWS auth
//! skipped and its job token in a custom header; the broker takes only the
//! model and the method from the engine's path
//! (`/model/MODEL/invoke-with-response-stream` or `/model/MODEL/invoke`)
//! and rebuilds the rest. Bedrock model ids (`anthropic.claude-…-v1:0`, with
//! an optional inference-profile prefix `us.`, `eu.`, `global.`, …) are
//! priced as the Anthropic model they name ([`price_name`]).

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use serde::Deserialize;

use super::secret::Secret;

/// The SigV4 service name of the Bedrock runtime.
pub const SERVICE: &str = "bedrock";

#[derive(Debug, thiserror::Error)]
pub enum BedrockError {
    #[error("AWS credentials: not a JSON object with AccessKeyId and SecretAccessKey: {0}")]
    ParseCredentials(String),
    #[error("AWS credentials: shared credentials file (INI): {0}")]
    ParseIni(String),
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

/// Where a job's Bedrock calls go and how they are signed.
pub struct Bedrock {
    pub region: String,
    access_key_id: String,
    secret_access_key: Secret,
    session_token: Option<Secret>,
}

impl std::fmt::Debug for Bedrock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bedrock")
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
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
            access_key_id: file.access_key_id,
            secret_access_key: Secret::new(file.secret_access_key),
            session_token: file
                .session_token
                .filter(|t| !t.is_empty())
                .map(Secret::new),
        })
    }

    /// The SigV4 headers (`authorization`, `x-amz-date`, and
    /// `x-amz-security-token` with a session token) for a request of
    /// `method` to `url` with `headers` (signed as given) and `body`.
    pub fn sign(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        time: SystemTime,
    ) -> Result<Vec<(String, String)>, BedrockError> {
        sign_with(
            &self.access_key_id,
            self.secret_access_key.expose(),
            self.session_token.as_ref().map(Secret::expose),
            &self.region,
            method,
            url,
            headers,
            body,
            time,
        )
        .map_err(|message| BedrockError::Sign {
            access_key_id: self.access_key_id.clone(),
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

/// SigV4-signs a request with explicit credentials; the headers to add.
/// Shared by the broker and the mock Bedrock endpoint, which re-signs what
/// it received with the test's credentials to verify the signature.
#[allow(clippy::too_many_arguments)]
pub fn sign_with(
    access_key_id: &str,
    secret_access_key: &str,
    session_token: Option<&str>,
    region: &str,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    time: SystemTime,
) -> Result<Vec<(String, String)>, String> {
    let identity = Credentials::new(
        access_key_id,
        secret_access_key,
        session_token.map(str::to_string),
        None,
        "paddock",
    )
    .into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SERVICE)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| e.to_string())?
        .into();
    let request = SignableRequest::new(
        method,
        url,
        headers.iter().copied(),
        SignableBody::Bytes(body),
    )
    .map_err(|e| e.to_string())?;
    let (instructions, _signature) = sign(request, &params)
        .map_err(|e| e.to_string())?
        .into_parts();
    Ok(instructions
        .headers()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect())
}

/// `(model, method)` of an engine's Bedrock request path
/// `/model/MODEL/invoke-with-response-stream` or `/model/MODEL/invoke`;
/// the model stays as sent (percent-encoded).
pub fn parse_path(path: &str) -> Option<(String, String)> {
    let rest = path.strip_prefix("/model/")?;
    let (model, method) = rest.split_once('/')?;
    match method {
        "invoke-with-response-stream" | "invoke" if !model.is_empty() => {
            Some((model.to_string(), method.to_string()))
        }
        _ => None,
    }
}

/// A percent-encoded model id decoded (`%3A` → `:`).
pub fn decode_model(model: &str) -> String {
    let bytes = model.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
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

    #[test]
    fn credentials_parse_and_sign() {
        let creds = Secret::new(
            r#"{"AccessKeyId":"AKIDEXAMPLE","SecretAccessKey":"wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY","SessionToken":"tok"}"#
                .into(),
        );
        let b = Bedrock::new(&creds, "us-east-1").unwrap();
        assert!(!format!("{b:?}").contains("wJalr"));
        let time = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        let url = "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/invoke";
        let headers = [("content-type", "application/json")];
        let signed = b.sign("POST", url, &headers, b"{}", time).unwrap();
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
        assert_eq!(signed, b.sign("POST", url, &headers, b"{}", time).unwrap());
        let other = sign_with(
            "AKIDEXAMPLE",
            "wrong",
            Some("tok"),
            "us-east-1",
            "POST",
            url,
            &headers,
            b"{}",
            time,
        )
        .unwrap();
        assert_ne!(other[1], signed[1]);
        let body2 = b.sign("POST", url, &headers, b"{ }", time).unwrap();
        assert_ne!(body2[1], signed[1]);
    }

    #[test]
    fn shared_credentials_files_parse() {
        let ini = "# comment\n[other]\naws_access_key_id = AKIAOTHER\n\n[default]\naws_access_key_id = AKIADEF\nAWS_SECRET_ACCESS_KEY = s3cret\naws_session_token = tok\n";
        let b = Bedrock::new(&Secret::new(ini.into()), "eu-west-1").unwrap();
        assert_eq!(
            (
                b.access_key_id.as_str(),
                b.secret_access_key.expose(),
                b.session_token.as_ref().map(Secret::expose)
            ),
            ("AKIADEF", "s3cret", Some("tok"))
        );
        let one = "[ci]\naws_access_key_id=AKIACI\naws_secret_access_key=x\n";
        let b = Bedrock::new(&Secret::new(one.into()), "eu-west-1").unwrap();
        assert_eq!(
            (b.access_key_id.as_str(), b.session_token.is_none()),
            ("AKIACI", true)
        );
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

//! Google OAuth 2.0 access tokens (scope `cloud-platform`) for Vertex AI,
//! fetched by Paddock itself so that every answer is read through the
//! broker's bounded reader ([`super::oauth`], 64 KiB) and every request has
//! a deadline. Four sources, as Google's Application Default Credentials
//! know them: a service account's JSON key (an RS256 JWT assertion signed
//! with `jsonwebtoken` and exchanged at the key's `token_uri`, RFC 7523),
//! an `authorized_user` refresh token (RFC 6749 §6), the metadata server
//! of a GCE VM, GKE pod or Cloud Run service, and `gcloud auth
//! print-access-token` (its output read up to the same bound). Tokens are
//! cached by [`super::token_cache`]: one fetch at a time, reused until five
//! minutes (or half their life, for a short-lived one) before they expire.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;

use super::oauth::{ExchangeError, MAX_TOKEN_ANSWER};
use super::secret::Secret;
use super::token_cache::{Fetched, TokenCache};

/// The scope Vertex AI calls need.
pub const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// Google's token endpoint, for refresh tokens whose file names none.
pub const TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

/// The metadata server's address when `GCE_METADATA_HOST` names none.
pub const METADATA_HOST: &str = "metadata.google.internal";

/// How long a JWT assertion is valid (Google accepts at most an hour).
const ASSERTION_LIFE: Duration = Duration::from_secs(3600);

/// The longest a token request (or the metadata server, or `gcloud`) may
/// take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest the metadata server may take: it is a link-local service
/// that answers at once where it exists, and where it does not (any host
/// outside Google Cloud) looking for it must not hold the job up.
const METADATA_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a token `gcloud` prints is taken to be valid: it says nothing,
/// and prints a cached token until it is within a few minutes of its
/// expiry. So `gcloud` is asked again every two minutes.
const GCLOUD_TOKEN_LIFE: Duration = Duration::from_secs(240);

#[derive(Debug, thiserror::Error)]
pub enum GoogleAuthError {
    #[error("service account: not a service-account JSON key: {0}")]
    ParseKey(String),
    #[error("authorized user: not an `authorized_user` JSON file: {0}")]
    ParseUser(String),
    #[error("service account {client_email}: {message}")]
    PrivateKey {
        client_email: String,
        message: String,
    },
    #[error("cannot make the token client: {0}")]
    Client(String),
    #[error("{source_name}: cannot get an access token from {endpoint}: {message}")]
    TokenRequest {
        source_name: String,
        endpoint: String,
        message: String,
    },
    #[error("{source_name}: {endpoint} refused the token request: {message}")]
    TokenRefused {
        source_name: String,
        endpoint: String,
        message: String,
    },
}

/// The parts of a service-account JSON key Paddock uses.
#[derive(Deserialize)]
struct KeyFile {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    client_email: String,
    private_key: String,
    token_uri: String,
}

/// The parts of an `authorized_user` file (`gcloud auth
/// application-default login`) Paddock uses.
#[derive(Deserialize)]
struct UserFile {
    client_id: String,
    client_secret: String,
    refresh_token: String,
    #[serde(default)]
    token_uri: Option<String>,
}

/// The JWT assertion's claims (RFC 7523 §3).
#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    scope: &'a str,
    aud: &'a str,
    iat: u64,
    exp: u64,
}

/// Where the tokens come from.
enum Source {
    ServiceAccount {
        client_email: String,
        token_uri: String,
        key: jsonwebtoken::EncodingKey,
    },
    AuthorizedUser {
        client_id: String,
        client_secret: Secret,
        refresh_token: Secret,
        token_uri: String,
    },
    Metadata {
        token_url: String,
    },
    Gcloud {
        program: PathBuf,
    },
}

/// One source of Google access tokens and its cached token.
pub struct GoogleTokens {
    source: Source,
    client: reqwest::Client,
    cached: TokenCache<Secret>,
}

impl std::fmt::Debug for GoogleTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GoogleTokens")
            .field("source", &self.source_name())
            .field("endpoint", &self.endpoint())
            .finish_non_exhaustive()
    }
}

impl GoogleTokens {
    fn with(source: Source) -> Result<GoogleTokens, GoogleAuthError> {
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| GoogleAuthError::Client(e.to_string()))?;
        Ok(GoogleTokens {
            source,
            client,
            cached: TokenCache::default(),
        })
    }

    /// A service account's JSON key. The private key is checked here (a
    /// first assertion is signed), so a broken key fails before any job.
    pub fn service_account(key_json: &Secret) -> Result<GoogleTokens, GoogleAuthError> {
        let file: KeyFile = serde_json::from_str(key_json.expose())
            .map_err(|e| GoogleAuthError::ParseKey(e.to_string()))?;
        if let Some(kind) = file.kind.as_deref().filter(|k| *k != "service_account") {
            return Err(GoogleAuthError::ParseKey(format!(
                "its type is `{kind}`, not `service_account`"
            )));
        }
        let key_err = |e: jsonwebtoken::errors::Error| GoogleAuthError::PrivateKey {
            client_email: file.client_email.clone(),
            message: format!("private_key is not an RSA private key in PEM: {e}"),
        };
        let key = jsonwebtoken::EncodingKey::from_rsa_pem(file.private_key.as_bytes())
            .map_err(key_err)?;
        assertion(&file.client_email, &file.token_uri, &key).map_err(key_err)?;
        GoogleTokens::with(Source::ServiceAccount {
            client_email: file.client_email,
            token_uri: file.token_uri,
            key,
        })
    }

    /// An `authorized_user` file's refresh token.
    pub fn authorized_user(json: &Secret) -> Result<GoogleTokens, GoogleAuthError> {
        let file: UserFile = serde_json::from_str(json.expose())
            .map_err(|e| GoogleAuthError::ParseUser(e.to_string()))?;
        GoogleTokens::with(Source::AuthorizedUser {
            client_id: file.client_id,
            client_secret: Secret::new(file.client_secret),
            refresh_token: Secret::new(file.refresh_token),
            token_uri: file.token_uri.unwrap_or_else(|| TOKEN_URI.to_string()),
        })
    }

    /// The metadata server at `host` (`metadata.google.internal`, or
    /// `GCE_METADATA_HOST`).
    pub fn metadata(host: &str) -> Result<GoogleTokens, GoogleAuthError> {
        GoogleTokens::with(Source::Metadata {
            token_url: format!(
                "http://{host}/computeMetadata/v1/instance/service-accounts/default/token"
            ),
        })
    }

    /// `PROGRAM auth print-access-token` (the gcloud CLI).
    pub fn gcloud(program: PathBuf) -> Result<GoogleTokens, GoogleAuthError> {
        GoogleTokens::with(Source::Gcloud { program })
    }

    /// What the credentials are, for messages.
    pub fn source_name(&self) -> String {
        match &self.source {
            Source::ServiceAccount { client_email, .. } => {
                format!("service account {client_email}")
            }
            Source::AuthorizedUser { client_id, .. } => format!("authorized user {client_id}"),
            Source::Metadata { .. } => "the metadata server".into(),
            Source::Gcloud { .. } => "gcloud".into(),
        }
    }

    /// Where the tokens are asked for, for messages.
    pub fn endpoint(&self) -> String {
        match &self.source {
            Source::ServiceAccount { token_uri, .. } | Source::AuthorizedUser { token_uri, .. } => {
                token_uri.clone()
            }
            Source::Metadata { token_url } => token_url.clone(),
            Source::Gcloud { program } => {
                format!("`{} auth print-access-token`", program.display())
            }
        }
    }

    /// A valid access token: the cached one while fresh, else a new one.
    pub async fn token(&self) -> Result<Secret, GoogleAuthError> {
        self.cached.get(|| self.fetch()).await
    }

    /// A new access token from the source.
    async fn fetch(&self) -> Result<Fetched<Secret>, GoogleAuthError> {
        let request = match &self.source {
            Source::ServiceAccount {
                client_email,
                token_uri,
                key,
            } => {
                let jwt = assertion(client_email, token_uri, key)
                    .map_err(|e| self.request_error(e.to_string()))?;
                self.client.post(token_uri).form(&[
                    ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
                    ("assertion", jwt.expose()),
                ])
            }
            Source::AuthorizedUser {
                client_id,
                client_secret,
                refresh_token,
                token_uri,
            } => self.client.post(token_uri).form(&[
                ("grant_type", "refresh_token"),
                ("client_id", client_id.as_str()),
                ("client_secret", client_secret.expose()),
                ("refresh_token", refresh_token.expose()),
            ]),
            Source::Metadata { token_url } => self
                .client
                .get(token_url)
                .header("Metadata-Flavor", "Google")
                .timeout(METADATA_TIMEOUT),
            Source::Gcloud { program } => return self.gcloud_token(program).await,
        };
        super::oauth::exchange(request).await.map_err(|e| match e {
            ExchangeError::Request(message) => self.request_error(message),
            refused @ ExchangeError::Refused { .. } => GoogleAuthError::TokenRefused {
                source_name: self.source_name(),
                endpoint: self.endpoint(),
                message: refused.to_string(),
            },
        })
    }

    fn request_error(&self, message: String) -> GoogleAuthError {
        GoogleAuthError::TokenRequest {
            source_name: self.source_name(),
            endpoint: self.endpoint(),
            message,
        }
    }

    /// The token `gcloud auth print-access-token` prints (its output read
    /// up to [`MAX_TOKEN_ANSWER`] bytes, within [`REQUEST_TIMEOUT`]).
    async fn gcloud_token(
        &self,
        program: &std::path::Path,
    ) -> Result<Fetched<Secret>, GoogleAuthError> {
        let token = tokio::time::timeout(REQUEST_TIMEOUT, run_gcloud(program))
            .await
            .map_err(|_| format!("no answer within {} s", REQUEST_TIMEOUT.as_secs()))
            .and_then(|r| r)
            .map_err(|m| self.request_error(m))?;
        Ok(Fetched {
            value: Secret::new(token),
            expires_in: Some(GCLOUD_TOKEN_LIFE),
        })
    }
}

/// Runs `PROGRAM auth print-access-token`: the token it prints, or why
/// not. More than [`MAX_TOKEN_ANSWER`] bytes of output stop the reading
/// and the program (dropped, it is killed).
async fn run_gcloud(program: &std::path::Path) -> Result<String, String> {
    let mut child = tokio::process::Command::new(program)
        .args(["auth", "print-access-token"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| e.to_string())?;
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let (out, err) = tokio::try_join!(
        async {
            let mut out = Vec::new();
            if let Some(s) = stdout {
                let limit = MAX_TOKEN_ANSWER as u64 + 1;
                s.take(limit)
                    .read_to_end(&mut out)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            if out.len() > MAX_TOKEN_ANSWER {
                return Err(format!(
                    "the answer is longer than {MAX_TOKEN_ANSWER} bytes"
                ));
            }
            Ok(out)
        },
        async {
            let mut err = Vec::new();
            if let Some(s) = stderr {
                // Only the start is shown; a program that writes more
                // is cut off by the deadline.
                let _ = s.take(4096).read_to_end(&mut err).await;
            }
            Ok(err)
        }
    )?;
    let status = child.wait().await.map_err(|e| e.to_string())?;
    let token = String::from_utf8_lossy(&out).trim().to_string();
    if !status.success() || token.is_empty() || token.contains(char::is_whitespace) {
        let said = String::from_utf8_lossy(&err);
        return Err(format!(
            "it failed ({status}): {}",
            said.trim().chars().take(300).collect::<String>()
        ));
    }
    Ok(token)
}

/// A JWT assertion of `client_email` for `token_uri`, valid from now for
/// an hour.
fn assertion(
    client_email: &str,
    token_uri: &str,
    key: &jsonwebtoken::EncodingKey,
) -> Result<Secret, jsonwebtoken::errors::Error> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let claims = Claims {
        iss: client_email,
        scope: SCOPE,
        aud: token_uri,
        iat: now,
        exp: now + ASSERTION_LIFE.as_secs(),
    };
    let header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    jsonwebtoken::encode(&header, &claims, key).map(Secret::new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use paddock_test_support::google::{key_pair, token_endpoint};
    use std::sync::atomic::Ordering;

    /// `token()` of `tokens`, which must end within 20 s.
    async fn token_of(tokens: &GoogleTokens) -> Result<String, String> {
        tokio::time::timeout(Duration::from_secs(20), tokens.token())
            .await
            .expect("the token request ends")
            .map(|t| t.expose().to_string())
            .map_err(|e| e.to_string())
    }

    /// A service account's key with `token_uri`; `None` (skipped locally)
    /// without openssl.
    fn service_account(dir: &std::path::Path, token_uri: &str) -> Option<(Secret, String)> {
        let Some((private, public)) = key_pair(dir) else {
            assert!(!paddock_test_support::in_ci(), "openssl makes the test key");
            eprintln!("skipping: openssl cannot make a test key");
            return None;
        };
        let key = serde_json::json!({"type": "service_account", "client_email": "sa@p.iam",
            "private_key": private, "token_uri": token_uri});
        Some((Secret::new(key.to_string()), public))
    }

    /// Every source's answer is read up to 64 KiB only: a token endpoint, a
    /// metadata server or a `gcloud` that never stops answering is an error
    /// naming where the token was asked for, not a hang or an exhausted
    /// memory. (Through `gcp_auth`, the answers were read unbounded.)
    #[tokio::test]
    async fn an_endless_answer_is_an_error_naming_the_endpoint() {
        let dir = tempfile::tempdir().unwrap();
        let addr = paddock_test_support::endless::serve().await;
        let Some((key, _)) = service_account(dir.path(), &format!("http://{addr}/token")) else {
            return;
        };
        let user = serde_json::json!({"client_id": "cid", "client_secret": "s",
            "refresh_token": "r", "token_uri": format!("http://{addr}/token")});
        let gcloud = dir.path().join("gcloud");
        paddock_test_support::script::write_script(&gcloud, "#!/bin/sh\nexec yes\n");
        let sources = [
            GoogleTokens::service_account(&key).unwrap(),
            GoogleTokens::authorized_user(&Secret::new(user.to_string())).unwrap(),
            GoogleTokens::metadata(&addr.to_string()).unwrap(),
            GoogleTokens::gcloud(gcloud.clone()).unwrap(),
        ];
        let mut got = Vec::new();
        for tokens in &sources {
            got.push(token_of(tokens).await);
        }
        let too_long = "the answer is longer than 65536 bytes";
        assert_eq!(
            got,
            vec![
                Err(format!("service account sa@p.iam: cannot get an access token from http://{addr}/token: {too_long}")),
                Err(format!("authorized user cid: cannot get an access token from http://{addr}/token: {too_long}")),
                Err(format!("the metadata server: cannot get an access token from http://{addr}/computeMetadata/v1/instance/service-accounts/default/token: {too_long}")),
                Err(format!("gcloud: cannot get an access token from `{} auth print-access-token`: {too_long}", gcloud.display())),
            ]
        );
    }

    /// A service account's token is fetched with a JWT the endpoint
    /// verifies, then reused while fresh; a refusal names the endpoint and
    /// carries Google's answer.
    #[tokio::test]
    async fn a_service_account_token_is_fetched_once_and_a_refusal_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let Some((probe, public)) = service_account(dir.path(), "http://unused") else {
            return;
        };
        let (uri, hits) = token_endpoint(public, "ya29.t".into(), "sa@p.iam".into(), 3600).await;
        let mut key: serde_json::Value = serde_json::from_str(probe.expose()).unwrap();
        key["token_uri"] = uri.clone().into();
        let tokens = GoogleTokens::service_account(&Secret::new(key.to_string())).unwrap();
        let got = (token_of(&tokens).await, token_of(&tokens).await);
        // Another key than the endpoint knows: the signature is refused.
        let other = tempfile::tempdir().unwrap();
        let (stranger, _) = service_account(other.path(), &uri).unwrap();
        let refused = token_of(&GoogleTokens::service_account(&stranger).unwrap()).await;
        assert_eq!(
            (got, hits.load(Ordering::SeqCst), refused),
            (
                (Ok("ya29.t-1".to_string()), Ok("ya29.t-1".to_string())),
                2,
                Err(format!("service account sa@p.iam: {uri} refused the token request: HTTP 401: {{\"error\":\"invalid_grant\",\"error_description\":\"Invalid JWT Signature.\"}}"))
            )
        );
    }

    #[test]
    fn a_key_that_is_not_a_service_account_key_is_refused() {
        let got: Vec<String> = [
            r#"{"type":"authorized_user","client_email":"a@b","private_key":"k","token_uri":"u"}"#,
            r#"{"client_email":"a@b","private_key":"not a key","token_uri":"u"}"#,
            r#"{"client_email":"a@b","private_key":"k"}"#,
        ]
        .iter()
        .map(|k| {
            GoogleTokens::service_account(&Secret::new(k.to_string()))
                .unwrap_err()
                .to_string()
        })
        .collect();
        assert_eq!(
            got,
            vec![
                "service account: not a service-account JSON key: its type is `authorized_user`, not `service_account`".to_string(),
                "service account a@b: private_key is not an RSA private key in PEM: InvalidKeyFormat".to_string(),
                "service account: not a service-account JSON key: missing field `token_uri` at line 1 column 40".to_string(),
            ]
        );
    }
}

//! Secrets as a type (provider keys, repository and forge tokens, webhook
//! and egress credential values): the value is read from its reference
//! (`env:`, `file:`) only where it is used, is redacted in Debug and
//! Display, its errors name what kind of secret failed ([`SecretKind`]) and
//! its reference, never its value; it is
//! identified elsewhere only by its reference and a fingerprint. An `env:`
//! key is taken out of Paddock's own environment before any thread starts
//! ([`withdraw_env`]), so that no child inherits it; what the kernel shows in
//! `/proc/<pid>/environ` cannot be wiped, which is why `paddock` also makes
//! itself non-dumpable (docs/host-profile.md, "Threat model").

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, OnceLock};

use paddock_protocol::KeyRef;
use sha2::{Digest, Sha256};

/// What a secret is for, as its errors name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretKind {
    /// `upstream.key`, and a cloud provider's key found in the environment.
    ProviderKey,
    /// `repository.token`: fetching a private URL source.
    RepositoryToken,
    /// `results.push.token`.
    PushToken,
    /// `results.push.ssh_key`.
    PushSshKey,
    /// `results.github.token`.
    GitHubToken,
    /// `results.github.app.private_key`.
    GitHubAppKey,
    /// `results.gitlab.token`: the host-held token that mints job tokens.
    GitLabToken,
    /// `paddock serve --webhook-secret`.
    WebhookSecret,
    /// A host profile's `network.credentials` value.
    Credential,
    /// The PostgreSQL store's password (`PGPASSWORD`).
    StorePassword,
}

impl fmt::Display for SecretKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SecretKind::ProviderKey => "provider key",
            SecretKind::RepositoryToken => "repository token",
            SecretKind::PushToken => "push token",
            SecretKind::PushSshKey => "push SSH key",
            SecretKind::GitHubToken => "GitHub token",
            SecretKind::GitHubAppKey => "GitHub App private key",
            SecretKind::GitLabToken => "GitLab host token",
            SecretKind::WebhookSecret => "webhook secret",
            SecretKind::Credential => "secret",
            SecretKind::StorePassword => "store password",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("{kind} {reference}: environment variable is not set")]
    EnvMissing { kind: SecretKind, reference: String },
    #[error("{kind} {reference}: cannot read the file: {source}")]
    FileRead {
        kind: SecretKind,
        reference: String,
        source: std::io::Error,
    },
    #[error("{kind} {reference}: the value is empty")]
    Empty { kind: SecretKind, reference: String },
    #[error("{kind} {reference}: the value contains a line break or control character")]
    Malformed { kind: SecretKind, reference: String },
}

/// A secret value. Never printed, never logged.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Secret {
        Secret(value)
    }

    /// Reads the value a reference to a `kind` of secret points to. A
    /// file's trailing newline is dropped; a value with a line break or
    /// other control character is refused (it would be a header).
    pub fn resolve(kind: SecretKind, reference: &KeyRef) -> Result<Secret, SecretError> {
        Secret::read(kind, reference, |c| c.is_control())
    }

    /// Reads a multi-line value (a PEM key) a reference points to: line
    /// breaks are kept, other control characters refused.
    pub fn resolve_multiline(kind: SecretKind, reference: &KeyRef) -> Result<Secret, SecretError> {
        Secret::read(kind, reference, |c| {
            c.is_control() && !matches!(c, '\n' | '\r')
        })
    }

    fn read(
        kind: SecretKind,
        reference: &KeyRef,
        refused: fn(char) -> bool,
    ) -> Result<Secret, SecretError> {
        let shown = reference.to_string();
        let value = match reference {
            KeyRef::Env(name) => match withdrawn(name) {
                Some(v) => v,
                None => std::env::var(name).map_err(|_| SecretError::EnvMissing {
                    kind,
                    reference: shown.clone(),
                })?,
            },
            KeyRef::File(path) => std::fs::read_to_string(path)
                .map_err(|source| SecretError::FileRead {
                    kind,
                    reference: shown.clone(),
                    source,
                })?
                .trim_end_matches(['\n', '\r'])
                .to_string(),
        };
        if value.is_empty() {
            return Err(SecretError::Empty {
                kind,
                reference: shown,
            });
        }
        if value.chars().any(refused) {
            return Err(SecretError::Malformed {
                kind,
                reference: shown,
            });
        }
        Ok(Secret(value))
    }

    /// The value, for the one place that must send it upstream.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `sha256:` and the first 12 hex digits of the value's digest.
    /// git's `http.extraHeader` for this secret as the password of HTTP
    /// basic `user` (`Authorization: Basic base64(user:SECRET)`), itself a
    /// secret: it goes only into one git process's environment.
    pub fn basic_auth_header(&self, user: &str) -> Secret {
        use base64::Engine as _;
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{}", self.0));
        Secret(format!("Authorization: Basic {basic}"))
    }

    pub fn fingerprint(&self) -> String {
        let digest = Sha256::digest(self.0.as_bytes());
        format!("sha256:{}", &hex::encode(digest)[..12])
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret([REDACTED {}])", self.fingerprint())
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[REDACTED]")
    }
}

/// Values taken out of the environment by [`withdraw_env`].
fn vault() -> &'static Mutex<HashMap<String, String>> {
    static VAULT: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    VAULT.get_or_init(|| Mutex::new(HashMap::new()))
}

fn withdrawn(name: &str) -> Option<String> {
    vault().lock().ok()?.get(name).cloned()
}

/// Moves the variable `name` from this process's environment into memory,
/// where [`Secret::resolve`] finds it: children started afterwards do not
/// inherit it. Call it before any other thread exists (setenv/unsetenv race
/// with concurrent reads of the environment).
pub fn withdraw_env(name: &str) {
    let Some(value) = std::env::var_os(name) else {
        return;
    };
    if let (Some(v), Ok(mut vault)) = (value.to_str(), vault().lock()) {
        vault.insert(name.to_string(), v.to_string());
        std::env::remove_var(name);
    }
}

/// Keeps `value` as the withdrawn variable `name` (what a re-executed
/// paddock was handed, `crate::env_handover`), where [`Secret::resolve`]
/// finds it.
pub(crate) fn deposit(name: &str, value: String) {
    if let Ok(mut vault) = vault().lock() {
        vault.insert(name.to_string(), value);
    }
}

/// A fresh random per-job token (worthless outside its job's broker).
pub fn job_token() -> Secret {
    let bytes: [u8; 24] = rand::random();
    Secret(format!("pdk-job-{}", hex::encode(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_basic_auth_header_carries_user_and_secret() {
        let header = Secret::new("tok".into()).basic_auth_header("x-access-token");
        assert_eq!(
            (header.expose(), format!("{header}")),
            (
                "Authorization: Basic eC1hY2Nlc3MtdG9rZW46dG9r",
                "[REDACTED]".to_string()
            )
        );
    }

    #[test]
    fn secret_is_redacted_in_debug_and_display() {
        let s = Secret::new("sk-very-secret".into());
        assert_eq!(format!("{s}"), "[REDACTED]");
        assert!(!format!("{s:?}").contains("sk-very-secret"));
        assert!(format!("{s:?}").starts_with("Secret([REDACTED sha256:"));
    }

    #[test]
    fn resolve_reads_file_and_trims_newline() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("key");
        std::fs::write(&p, "sk-abc\n").unwrap();
        let s = Secret::resolve(SecretKind::ProviderKey, &KeyRef::File(p)).unwrap();
        assert_eq!(s.expose(), "sk-abc");
    }

    #[test]
    fn a_withdrawn_variable_resolves_but_is_gone_from_the_environment() {
        let name = "PADDOCK_TEST_WITHDRAWN_KEY";
        std::env::set_var(name, "sk-withdrawn");
        withdraw_env(name);
        assert_eq!(
            (
                std::env::var_os(name),
                Secret::resolve(SecretKind::ProviderKey, &KeyRef::Env(name.into()))
                    .unwrap()
                    .expose()
                    .to_string()
            ),
            (None, "sk-withdrawn".to_string())
        );
    }

    /// Each error names the kind of secret and its reference: the
    /// provider key's, a forge token's, an egress credential's.
    #[test]
    fn resolve_errors_name_the_kind_and_the_reference() {
        let unset = KeyRef::Env("PADDOCK_TEST_SURELY_UNSET_VAR".into());
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("empty");
        std::fs::write(&p, "\n").unwrap();
        let bell = dir.path().join("bell");
        std::fs::write(&bell, "a\u{7}b\n").unwrap();
        let missing = dir.path().join("missing");
        let err = |kind, r: &KeyRef| Secret::resolve(kind, r).unwrap_err().to_string();
        assert_eq!(
            [
                err(SecretKind::ProviderKey, &unset),
                err(SecretKind::GitLabToken, &KeyRef::File(p.clone())),
                Secret::resolve_multiline(SecretKind::GitHubAppKey, &KeyRef::File(bell.clone()))
                    .unwrap_err()
                    .to_string(),
                err(SecretKind::Credential, &KeyRef::File(missing.clone())),
            ],
            [
                "provider key env:PADDOCK_TEST_SURELY_UNSET_VAR: environment variable is not set"
                    .to_string(),
                format!("GitLab host token file:{}: the value is empty", p.display()),
                format!(
                    "GitHub App private key file:{}: the value contains a line break or control character",
                    bell.display()
                ),
                format!(
                    "secret file:{}: cannot read the file: No such file or directory (os error 2)",
                    missing.display()
                ),
            ]
        );
    }

    #[test]
    fn job_tokens_are_unique() {
        assert_ne!(job_token().expose(), job_token().expose());
    }
}

//! Google's Application Default Credentials, found as Google's client
//! libraries find them, first match wins: the JSON file
//! `GOOGLE_APPLICATION_CREDENTIALS` names (a service account's key or an
//! `authorized_user` refresh token; no fall-through when it is set but
//! broken), gcloud's `application_default_credentials.json` (in
//! `CLOUDSDK_CONFIG`, else `~/.config/gcloud`), the metadata server
//! (`GCE_METADATA_HOST`, else `metadata.google.internal`), then `gcloud
//! auth print-access-token`. Finding a source gets its first token, so a
//! missing or broken one fails here, before a job starts; the environment
//! is passed in ([`AdcEnv`]), never read deeper down.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::google_auth::{GoogleAuthError, GoogleTokens, METADATA_HOST};
use super::secret::Secret;

/// The most of a credentials file read (they are a few kilobytes).
const MAX_FILE: u64 = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum AdcError {
    #[error("GOOGLE_APPLICATION_CREDENTIALS {path}: {message}")]
    CredentialsFile { path: PathBuf, message: String },
    #[error("{0}")]
    Source(#[from] GoogleAuthError),
    #[error("none found: {0}")]
    NotFound(String),
}

/// The environment Application Default Credentials are looked for in.
#[derive(Debug, Clone, Default)]
pub struct AdcEnv {
    /// `GOOGLE_APPLICATION_CREDENTIALS`.
    pub credentials_file: Option<PathBuf>,
    /// gcloud's configuration directory: `CLOUDSDK_CONFIG`, else
    /// `$HOME/.config/gcloud`.
    pub gcloud_config: Option<PathBuf>,
    /// `GCE_METADATA_HOST`.
    pub metadata_host: Option<String>,
    /// Where `gcloud` is looked for: `PATH`.
    pub path: Option<OsString>,
}

impl AdcEnv {
    /// From Paddock's own environment.
    pub fn from_process() -> AdcEnv {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        AdcEnv {
            credentials_file: var("GOOGLE_APPLICATION_CREDENTIALS").map(PathBuf::from),
            gcloud_config: var("CLOUDSDK_CONFIG")
                .map(PathBuf::from)
                .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".config/gcloud"))),
            metadata_host: var("GCE_METADATA_HOST").and_then(|h| h.into_string().ok()),
            path: var("PATH"),
        }
    }
}

/// The `type` of a credentials file.
#[derive(Deserialize)]
struct Kind {
    #[serde(default, rename = "type")]
    kind: Option<String>,
}

/// The first source of `env` that gives a token, with that token cached.
pub async fn find(env: &AdcEnv) -> Result<GoogleTokens, AdcError> {
    if let Some(path) = &env.credentials_file {
        let file_err = |message: String| AdcError::CredentialsFile {
            path: path.clone(),
            message,
        };
        let tokens = from_file(path).map_err(file_err)?;
        tokens.token().await?;
        return Ok(tokens);
    }
    let mut tried = Vec::new();
    match env
        .gcloud_config
        .as_ref()
        .map(|d| d.join("application_default_credentials.json"))
    {
        Some(file) if file.exists() => match from_file(&file) {
            Ok(tokens) => match tokens.token().await {
                Ok(_) => return Ok(tokens),
                Err(e) => tried.push(format!("{}: {e}", file.display())),
            },
            Err(e) => tried.push(format!("{}: {e}", file.display())),
        },
        Some(file) => tried.push(format!("no {}", file.display())),
        None => tried.push("no gcloud configuration directory (HOME is unset)".into()),
    }
    let metadata = GoogleTokens::metadata(env.metadata_host.as_deref().unwrap_or(METADATA_HOST))?;
    match metadata.token().await {
        Ok(_) => return Ok(metadata),
        Err(e) => tried.push(e.to_string()),
    }
    // PATH's relative entries (if any) are taken from the root.
    match which::which_in("gcloud", env.path.as_ref(), "/") {
        Ok(program) => {
            let gcloud = GoogleTokens::gcloud(program)?;
            match gcloud.token().await {
                Ok(_) => return Ok(gcloud),
                Err(e) => tried.push(e.to_string()),
            }
        }
        Err(_) => tried.push("no gcloud on PATH".into()),
    }
    Err(AdcError::NotFound(tried.join("; ")))
}

/// A credentials file: a service account's key or an `authorized_user`
/// refresh token, by its `type`.
fn from_file(path: &Path) -> Result<GoogleTokens, String> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_FILE).read_to_string(&mut text))
        .map_err(|e| format!("cannot read it: {e}"))?;
    let json = Secret::new(text);
    let kind: Kind = serde_json::from_str(json.expose()).map_err(|e| format!("not JSON: {e}"))?;
    match kind.kind.as_deref() {
        Some("service_account") => GoogleTokens::service_account(&json),
        Some("authorized_user") => GoogleTokens::authorized_user(&json),
        Some(other) => {
            return Err(format!(
                "credentials of type `{other}` are not supported (service_account and authorized_user are)"
            ))
        }
        None => return Err("no `type` field".into()),
    }
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use paddock_test_support::google::{metadata_server, refresh_endpoint};
    use std::sync::atomic::Ordering;

    /// An `authorized_user` file, its token endpoint counting requests.
    async fn user_file(path: &Path) -> std::sync::Arc<std::sync::atomic::AtomicU64> {
        let (uri, hits) = refresh_endpoint(
            "cid".into(),
            "csecret".into(),
            "1//refresh".into(),
            "ya29.u".into(),
            3600,
        )
        .await;
        let file = serde_json::json!({"type": "authorized_user", "client_id": "cid",
            "client_secret": "csecret", "refresh_token": "1//refresh", "token_uri": uri});
        std::fs::write(path, file.to_string()).unwrap();
        hits
    }

    /// The sources in their order: the file the variable names, then
    /// gcloud's file, then the metadata server; each found source has its
    /// first token fetched (and cached) when it is found.
    #[tokio::test]
    async fn the_first_source_that_gives_a_token_wins() {
        let dir = tempfile::tempdir().unwrap();
        let named = dir.path().join("named.json");
        let named_hits = user_file(&named).await;
        let config = dir.path().join("gcloud");
        std::fs::create_dir(&config).unwrap();
        let config_hits = user_file(&config.join("application_default_credentials.json")).await;
        let (host, metadata_hits) = metadata_server("ya29.m".into(), 3600).await;
        let all = AdcEnv {
            credentials_file: Some(named),
            gcloud_config: Some(config),
            metadata_host: Some(host),
            path: Some("".into()),
        };
        let no_file = AdcEnv {
            credentials_file: None,
            ..all.clone()
        };
        let no_config = AdcEnv {
            gcloud_config: Some(dir.path().join("none")),
            ..no_file.clone()
        };
        let mut got = Vec::new();
        for env in [&all, &no_file, &no_config] {
            let tokens = find(env).await.unwrap();
            got.push((
                tokens.source_name(),
                tokens.token().await.unwrap().expose().to_string(),
            ));
        }
        let hits = [&named_hits, &config_hits, &metadata_hits].map(|h| h.load(Ordering::SeqCst));
        assert_eq!(
            (got, hits),
            (
                vec![
                    ("authorized user cid".to_string(), "ya29.u-1".to_string()),
                    ("authorized user cid".to_string(), "ya29.u-1".to_string()),
                    ("the metadata server".to_string(), "ya29.m-1".to_string()),
                ],
                [1, 1, 1]
            )
        );
    }

    /// No source: the error says what each one said; a broken file the
    /// variable names is its own error (no fall-through).
    #[tokio::test]
    async fn without_credentials_each_source_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let endless = paddock_test_support::endless::serve().await;
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let gcloud = bin.join("gcloud");
        paddock_test_support::script::write_script(
            &gcloud,
            "#!/bin/sh\necho 'ERROR: no active account' >&2\nexit 1\n",
        );
        let env = AdcEnv {
            credentials_file: None,
            gcloud_config: Some(dir.path().join("gcloud")),
            metadata_host: Some(endless.to_string()),
            path: Some(bin.into_os_string()),
        };
        let external = dir.path().join("external.json");
        std::fs::write(&external, r#"{"type":"external_account","audience":"x"}"#).unwrap();
        let named = AdcEnv {
            credentials_file: Some(external.clone()),
            ..env.clone()
        };
        let got = (
            find(&env).await.unwrap_err().to_string(),
            find(&named).await.unwrap_err().to_string(),
        );
        assert_eq!(
            got,
            (
                format!(
                    "none found: no {}/gcloud/application_default_credentials.json; \
                     the metadata server: cannot get an access token from http://{endless}/computeMetadata/v1/instance/service-accounts/default/token: the answer is longer than 65536 bytes; \
                     gcloud: cannot get an access token from `{} auth print-access-token`: it failed (exit status: 1): ERROR: no active account",
                    dir.path().display(),
                    gcloud.display()
                ),
                format!(
                    "GOOGLE_APPLICATION_CREDENTIALS {}: credentials of type `external_account` are not supported (service_account and authorized_user are)",
                    external.display()
                )
            )
        );
    }
}

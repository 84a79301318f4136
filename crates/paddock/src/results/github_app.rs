//! GitHub App installation tokens, one per job: Paddock signs a short JWT
//! with the App's private key (RS256, `jsonwebtoken`), asks
//! `POST /app/installations/{id}/access_tokens` for a token restricted to
//! the job's one repository and to `contents` and `pull_requests` write,
//! checks that the answer grants no more than that (a broader token is
//! revoked and never used), pushes and talks to the forge with it, and
//! revokes it (`DELETE /installation/token`) once the job's results are
//! published, whatever happened (`conclude.rs`). The App's key and the
//! token never reach the job: it has ended before either is read. The
//! token is recorded on the host until it is revoked
//! (`github_app_record.rs`), so that the reaper can revoke one a `kill -9`
//! left.

use reqwest::Method;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use std::path::Path;

use super::forge::ForgeError;
use super::github::GitHub;
use super::github_app_record::{self, Recorded};
use crate::secret::Secret;
use paddock_protocol::GitHubAppSpec;

const FORGE: &str = "github";

/// What the token may do: push the branch, open the pull request and
/// comment on it. GitHub adds `metadata: read` to every token.
const PERMISSIONS: [(&str, &str); 2] = [("contents", "write"), ("pull_requests", "write")];

/// The JWT's claims: GitHub accepts at most ten minutes; `iat` is set a
/// minute back for clock drift, as GitHub's documentation advises.
#[derive(Serialize)]
struct Claims {
    iat: i64,
    exp: i64,
    iss: String,
}

#[derive(Serialize)]
struct TokenRequest<'a> {
    repositories: [&'a str; 1],
    permissions: std::collections::BTreeMap<&'static str, &'static str>,
}

#[derive(Deserialize)]
struct TokenAnswer {
    token: String,
    #[serde(default)]
    permissions: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    repositories: Option<Vec<Repository>>,
}

#[derive(Deserialize)]
struct Repository {
    name: String,
}

/// The App's JWT for `app` signed with `key` (PEM, PKCS#1 or PKCS#8) at `now`.
fn app_jwt(app: &GitHubAppSpec, key: &Secret, now: OffsetDateTime) -> Result<Secret, ForgeError> {
    let key_err = |e: jsonwebtoken::errors::Error| ForgeError::AppKey {
        forge: FORGE,
        message: e.to_string(),
    };
    let key = jsonwebtoken::EncodingKey::from_rsa_pem(key.expose().as_bytes()).map_err(key_err)?;
    let now = now.unix_timestamp();
    let claims = Claims {
        iat: now - 60,
        exp: now + 9 * 60,
        iss: app.id.to_string(),
    };
    let header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    jsonwebtoken::encode(&header, &claims, &key)
        .map(Secret::new)
        .map_err(key_err)
}

/// The permissions and repositories in `answer` beyond what was asked for
/// `repo`, as text; empty when there are none.
fn beyond_asked(answer: &TokenAnswer, repo: &str) -> Vec<String> {
    let mut extra: Vec<String> = answer
        .permissions
        .iter()
        .filter(|(k, v)| {
            let asked = PERMISSIONS.iter().any(|(pk, pv)| pk == k && pv == v);
            let metadata = k.as_str() == "metadata" && v.as_str() == "read";
            !asked && !metadata
        })
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    match &answer.repositories {
        Some(repos) => extra.extend(
            repos
                .iter()
                .filter(|r| r.name != repo)
                .map(|r| format!("repository {}", r.name)),
        ),
        None => extra.push("every repository of the installation".to_string()),
    }
    extra
}

/// What signs the App's JWT: the App and its private key, kept by the
/// client of one of its installation tokens to find the App's bot account
/// when it needs it (`github.rs`, `GitHub::app_account`).
#[derive(Clone)]
pub struct AppSigner {
    app: GitHubAppSpec,
    key: Secret,
}

impl AppSigner {
    /// The App's JWT, signed at `now`.
    pub(super) fn jwt(&self, now: OffsetDateTime) -> Result<Secret, ForgeError> {
        app_jwt(&self.app, &self.key, now)
    }
}

/// Mints the job's installation token for `owner/repo` at the API root
/// `api`, recorded in `artifacts` (`github_app_record.rs`: an intent
/// before asking, the token the moment it is answered): a client that uses
/// it, the token (for the push) and its record.
pub async fn mint(
    api: &str,
    owner: &str,
    repo: &str,
    app: &GitHubAppSpec,
    key: &Secret,
    now: OffsetDateTime,
    artifacts: &Path,
) -> Result<(GitHub, Secret, Recorded), ForgeError> {
    let as_app = GitHub::new(api, owner, repo, app_jwt(app, key, now)?)?;
    let body = TokenRequest {
        repositories: [repo],
        permissions: PERMISSIONS.into_iter().collect(),
    };
    // The intent first: a kill between GitHub's answer and the record is
    // then named by the reaper (the token cannot be found otherwise).
    let intent = github_app_record::intend(artifacts)?;
    let answer: TokenAnswer = match as_app
        .request(
            "mint the installation token",
            Method::POST,
            &format!("/app/installations/{}/access_tokens", app.installation_id),
            serde_json::to_value(&body).ok(),
        )
        .await
    {
        Ok(answer) => answer,
        // GitHub refused: no token was made.
        Err(e @ ForgeError::Status { .. }) => {
            intent.abandon();
            return Err(e);
        }
        // No answer, or one not understood: GitHub may have made a token
        // this process cannot know; the intent stays to say so.
        Err(e) => return Err(e),
    };
    let token = Secret::new(answer.token.clone());
    let client = GitHub::new(api, owner, repo, token.clone())?.with_app(AppSigner {
        app: app.clone(),
        key: key.clone(),
    });
    let recorded = match intent.record(&token) {
        Ok(recorded) => recorded,
        Err(e) => {
            // Not recorded: revoked now, unused.
            let _ = revoke(&client).await;
            return Err(e);
        }
    };
    let extra = beyond_asked(&answer, repo);
    if !extra.is_empty() {
        // Never used: revoked at once (a failed revocation leaves the
        // record for the reaper; the token expires within the hour).
        if github_app_record::revoke_dead_or_alive(&client)
            .await
            .is_ok()
        {
            let _ = github_app_record::remove(&recorded.path);
        }
        return Err(ForgeError::TokenTooBroad {
            forge: FORGE,
            token: "installation token",
            granted: super::forge_http::quoted(extra.join(", ")),
        });
    }
    Ok((client, token, recorded))
}

/// Revokes the job's token (`client`'s) and removes its record; the
/// record stays when the revocation failed, for the reaper and the next
/// `paddock publish`.
pub async fn close(client: &GitHub, recorded: Recorded) -> Result<(), ForgeError> {
    github_app_record::revoke_dead_or_alive(client).await?;
    github_app_record::remove(&recorded.path)
}

/// Revokes the token `client` uses.
pub async fn revoke(client: &GitHub) -> Result<(), ForgeError> {
    client
        .request::<()>(
            "revoke the installation token",
            Method::DELETE,
            "/installation/token",
            None,
        )
        .await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn answer(json: &str) -> TokenAnswer {
        serde_json::from_str(json).unwrap()
    }

    /// Only the asked permissions (plus GitHub's `metadata: read`) on only
    /// the job's repository pass; anything broader is named.
    #[test]
    fn a_token_broader_than_asked_is_named() {
        let ok = answer(
            r#"{"token":"t","permissions":{"contents":"write","metadata":"read","pull_requests":"write"},"repositories":[{"name":"widgets"}]}"#,
        );
        let broad = answer(
            r#"{"token":"t","permissions":{"contents":"write","administration":"write","pull_requests":"write"},"repositories":[{"name":"widgets"},{"name":"secrets"}]}"#,
        );
        let every = answer(r#"{"token":"t","permissions":{"contents":"write"}}"#);
        assert_eq!(
            (
                beyond_asked(&ok, "widgets"),
                beyond_asked(&broad, "widgets"),
                beyond_asked(&every, "widgets"),
            ),
            (
                Vec::<String>::new(),
                vec![
                    "administration: write".to_string(),
                    "repository secrets".to_string()
                ],
                vec!["every repository of the installation".to_string()],
            )
        );
    }

    #[test]
    fn a_key_that_is_not_pem_is_a_clear_error() {
        let app = GitHubAppSpec {
            id: 1,
            installation_id: 2,
            private_key: paddock_protocol::KeyRef::Env("K".into()),
        };
        let err = app_jwt(
            &app,
            &Secret::new("not a key".into()),
            OffsetDateTime::now_utc(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("github: the App's private key: "), "{err}");
    }
}

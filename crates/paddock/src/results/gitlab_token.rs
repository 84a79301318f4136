//! GitLab project access tokens, one per job (GitLab's counterpart of a
//! GitHub App's installation token, `github_app.rs`): the host-held token
//! of `[results.gitlab]` mints and revokes them (and edits the closeout an
//! earlier token of the job posted, `gitlab.rs`). Before a publish (or a
//! review read) Paddock asks `POST /projects/:id/access_tokens` for a token
//! named `paddock-<job>-<random>`, scoped `api` + `write_repository`, at
//! Developer level (30: push a branch, open a merge request, note on it),
//! expiring tomorrow (GitLab's smallest lifetime is a date); an answer
//! granting more is revoked unused. That token pushes the branch and makes
//! every merge request call, and is revoked (`DELETE
//! /projects/:id/access_tokens/:token_id`) when the session closes,
//! whatever happened (`conclude.rs`). So that a `kill -9` cannot leave it
//! alive, a record of it is written into the job's artifacts directory
//! before it is asked for (`.gitlab-token-<random>.json`: its name, then
//! its id; never its value) and removed once it is revoked; the reaper and
//! the next `paddock publish` of the job revoke what a record names
//! ([`revoke_leftovers`]): by id (after checking the token of that id has
//! the job's name), else by name among the project's active tokens (a kill
//! between the request and the record of its id). The API root and the
//! project are always the job spec's, never the record's.
//!
//! The record is hostile input only where the job could write it: it lies
//! in `<artifacts>/<job>/`, outside a sandboxed job's view (work, home,
//! tmp), and a `process`-rung job runs as the user. Even so a record
//! cannot send the host token elsewhere (no field names a place; unknown
//! fields are refused), revoke another job's token (its name must start
//! `paddock-<this job's id>-`, and job ids are one fixed-length form; by
//! id, the listed token must carry that name too), or stall the reaper (a
//! link, FIFO or directory is not read; at most 4 KiB is); every error
//! names the record's file (`tests/it/gitlab_token_attacks.rs`).

use std::path::{Path, PathBuf};

use reqwest::Method;
use serde::{Deserialize, Serialize};
use time::Date;

use super::forge::ForgeError;
use super::gitlab::GitLab;
use super::token_record;
use crate::secret::Secret;

const FORGE: &str = "gitlab";

/// What the token may do: the API (merge requests, notes) and a push.
pub const SCOPES: [&str; 2] = ["api", "write_repository"];

/// Developer: enough to push a branch and open a merge request.
pub const ACCESS_LEVEL: u64 = 30;

/// How a token record's file name starts, in the job's artifacts.
const RECORD_PREFIX: &str = ".gitlab-token-";

/// A minted token as recorded on disk: never its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenRecord {
    /// `paddock-<job>-<random>`.
    pub name: String,
    /// GitLab's id of it, once known.
    pub token_id: Option<u64>,
}

#[derive(Serialize)]
struct TokenRequest<'a> {
    name: &'a str,
    scopes: [&'static str; 2],
    access_level: u64,
    expires_at: String,
}

#[derive(Deserialize)]
struct TokenAnswer {
    id: u64,
    token: String,
    #[serde(default)]
    scopes: Vec<String>,
    #[serde(default)]
    access_level: Option<u64>,
}

#[derive(Deserialize)]
struct ListedToken {
    id: u64,
    name: String,
    #[serde(default)]
    active: bool,
}

/// A token minted for one session: what revokes it.
pub struct Issued {
    /// The client with the host-held token.
    host: GitLab,
    id: u64,
    record: PathBuf,
}

/// `YYYY-MM-DD` of the day after `today`.
fn tomorrow(today: Date) -> String {
    let day = today.next_day().unwrap_or(today);
    format!(
        "{:04}-{:02}-{:02}",
        day.year(),
        u8::from(day.month()),
        day.day()
    )
}

/// The scopes and level in `answer` beyond what was asked, as text.
fn beyond_asked(answer: &TokenAnswer) -> Vec<String> {
    let mut extra: Vec<String> = answer
        .scopes
        .iter()
        .filter(|s| !SCOPES.contains(&s.as_str()))
        .map(|s| format!("scope {s}"))
        .collect();
    match answer.access_level {
        Some(level) if level <= ACCESS_LEVEL => {}
        Some(level) => extra.push(format!("access level {level}")),
        None => extra.push("an unknown access level".to_string()),
    }
    extra
}

fn write_record(path: &Path, record: &TokenRecord) -> Result<(), ForgeError> {
    let text = serde_json::to_string(record).unwrap_or_default();
    // Not through a link the job planted between the record's two writes,
    // nor readable by other users (as the GitHub App record).
    crate::own_file::write_private(path, text.as_bytes()).map_err(|source| {
        ForgeError::TokenRecord {
            forge: FORGE,
            path: path.to_path_buf(),
            step: "write it",
            source,
        }
    })
}

/// Mints the job `job_id`'s token for `project` at the API root `api` with
/// the host-held `host_token`, recorded in `artifacts`: a client that
/// uses it, the token (for the push) and what revokes it.
pub async fn mint(
    api: &str,
    project: &str,
    host_token: Secret,
    job_id: &str,
    artifacts: &Path,
    today: Date,
) -> Result<(GitLab, Secret, Issued), ForgeError> {
    let host = GitLab::new(api, project, host_token.clone())?;
    let nonce = hex::encode(rand::random::<[u8; 4]>());
    let name = format!("paddock-{job_id}-{nonce}");
    let record_path = artifacts.join(format!("{RECORD_PREFIX}{nonce}.json"));
    std::fs::create_dir_all(artifacts).map_err(|source| ForgeError::TokenRecord {
        forge: FORGE,
        path: record_path.clone(),
        step: "make its directory",
        source,
    })?;
    let mut record = TokenRecord {
        name: name.clone(),
        token_id: None,
    };
    write_record(&record_path, &record)?;
    let body = TokenRequest {
        name: &name,
        scopes: SCOPES,
        access_level: ACCESS_LEVEL,
        expires_at: tomorrow(today),
    };
    let answer: TokenAnswer = match host
        .call(
            "mint the job's project access token",
            Method::POST,
            &host.project_path("/access_tokens"),
            serde_json::to_string(&body).ok(),
        )
        .await
    {
        Ok(answer) => answer,
        // GitLab answered no: no token was made, nothing to revoke. (A
        // request that got no answer may have made one: its record stays.)
        Err(e @ ForgeError::Status { .. }) => {
            let _ = remove_record(&record_path);
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    record.token_id = Some(answer.id);
    let issued = Issued {
        host,
        id: answer.id,
        record: record_path.clone(),
    };
    if let Err(e) = write_record(&record_path, &record) {
        // Its id not kept: revoked now, unused.
        let _ = revoke(issued).await;
        return Err(e);
    }
    let extra = beyond_asked(&answer);
    if !extra.is_empty() {
        let _ = revoke(issued).await;
        return Err(ForgeError::TokenTooBroad {
            forge: FORGE,
            token: "project access token",
            granted: super::forge_http::quoted(extra.join(", ")),
        });
    }
    let token = Secret::new(answer.token);
    let client = GitLab::new(api, project, token.clone())?.with_editor(host_token);
    Ok((client, token, issued))
}

/// Revokes the token `issued` names with the host-held token, then removes
/// its record. One GitLab no longer knows (revoked already) counts as
/// revoked.
pub async fn revoke(issued: Issued) -> Result<(), ForgeError> {
    revoke_id(&issued.host, issued.id).await?;
    remove_record(&issued.record)
}

async fn revoke_id(host: &GitLab, id: u64) -> Result<(), ForgeError> {
    let path = host.project_path(&format!("/access_tokens/{id}"));
    match host
        .call::<()>(
            "revoke the job's project access token",
            Method::DELETE,
            &path,
            None,
        )
        .await
    {
        Ok(()) | Err(ForgeError::Status { status: 404, .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

fn remove_record(path: &Path) -> Result<(), ForgeError> {
    token_record::remove(path, FORGE)
}

/// The token records in `artifacts` (regular files only; a link is never
/// followed).
pub fn leftover_records(artifacts: &Path) -> Vec<PathBuf> {
    token_record::list(artifacts, RECORD_PREFIX)
}

/// Reads a record as [`token_record::read_text`] does (a FIFO swapped in
/// after the listing is refused, not waited on: a reaper must never wait).
fn read_record(path: &Path) -> Result<TokenRecord, String> {
    let text = token_record::read_text(path)?;
    serde_json::from_str(&text).map_err(|e| format!("read {}: {e}", path.display()))
}

/// Revokes every token a record in `artifacts` names for the job `job_id`
/// (a killed publish's), through the spec's `api`, `project` and host-held
/// token (`host_token`: resolved only when there is a record); removes the
/// records revoked. The names revoked and what failed (the record stays
/// for a later pass).
pub async fn revoke_leftovers(
    api: &str,
    project: &str,
    host_token: impl FnOnce() -> Result<Secret, String>,
    job_id: &str,
    artifacts: &Path,
) -> token_record::Pass {
    let mut pass = token_record::Pass::default();
    let records = leftover_records(artifacts);
    if records.is_empty() {
        return pass;
    }
    let host = match host_token().and_then(|t| {
        GitLab::new(api, project, t)
            .map(GitLab::without_waiting)
            .map_err(|e| e.to_string())
    }) {
        Ok(host) => host,
        Err(e) => {
            return token_record::Pass::failed(format!("revoke the job's GitLab tokens: {e}"))
        }
    };
    let prefix = format!("paddock-{job_id}-");
    for path in records {
        match revoke_recorded(&host, &prefix, &path).await {
            Ok(name) => pass.revoked.push(name),
            Err(e) => pass.errors.push(e),
        }
    }
    pass
}

/// Revokes what the record at `path` names (a token whose name starts
/// with `prefix`), then removes it; its name.
async fn revoke_recorded(host: &GitLab, prefix: &str, path: &Path) -> Result<String, String> {
    let record = read_record(path)?;
    let named = |e: ForgeError| format!("{}: revoke {}: {e}", path.display(), record.name);
    if !record.name.starts_with(prefix) {
        return Err(format!(
            "{}: the token {} is not this job's; left alone",
            path.display(),
            record.name
        ));
    }
    let tokens: Vec<ListedToken> = host
        .list(
            "list the project access tokens",
            &host.project_path("/access_tokens"),
        )
        .await
        .map_err(named)?;
    for t in tokens {
        let ours = match record.token_id {
            Some(id) => t.id == id && t.name == record.name,
            None => t.name == record.name,
        };
        if ours && t.active {
            revoke_id(host, t.id).await.map_err(named)?;
        }
    }
    remove_record(path).map_err(|e| e.to_string())?;
    Ok(record.name)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_token_expires_tomorrow() {
        use time::macros::date;
        assert_eq!(
            [
                tomorrow(date!(2026 - 12 - 01)),
                tomorrow(date!(2026 - 12 - 31))
            ],
            ["2026-12-02".to_string(), "2027-01-01".to_string()]
        );
    }

    /// Only the asked scopes at Developer level or below pass; anything
    /// broader is named.
    #[test]
    fn a_token_broader_than_asked_is_named() {
        let answer = |json: &str| serde_json::from_str::<TokenAnswer>(json).unwrap();
        assert_eq!(
            [
                beyond_asked(&answer(
                    r#"{"id":1,"token":"t","scopes":["api","write_repository"],"access_level":30}"#
                )),
                beyond_asked(&answer(
                    r#"{"id":1,"token":"t","scopes":["api","sudo"],"access_level":50}"#
                )),
                beyond_asked(&answer(r#"{"id":1,"token":"t","scopes":["api"]}"#)),
            ],
            [
                Vec::<String>::new(),
                vec!["scope sudo".to_string(), "access level 50".to_string()],
                vec!["an unknown access level".to_string()],
            ]
        );
    }

    /// A record is written without following a link (one the job put in
    /// its place between the record's two writes, to a host file), never
    /// into a FIFO, and readable by Paddock's user alone.
    #[test]
    fn a_record_is_never_written_through_a_link() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let host = dir.path().join("bashrc");
        std::fs::write(&host, "the host's file\n").unwrap();
        let planted = dir.path().join(".gitlab-token-aa.json");
        std::os::unix::fs::symlink(&host, &planted).unwrap();
        let fifo = dir.path().join(".gitlab-token-bb.json");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let fresh = dir.path().join(".gitlab-token-cc.json");
        let record = TokenRecord {
            name: "paddock-j-aa".into(),
            token_id: Some(7),
        };
        let eloop = std::io::Error::from_raw_os_error(nix::libc::ELOOP).to_string();
        let enxio = std::io::Error::from_raw_os_error(nix::libc::ENXIO).to_string();
        let said = |path: &Path| match write_record(path, &record) {
            Ok(()) => "written".to_string(),
            Err(ForgeError::TokenRecord { source, .. }) => source.to_string(),
            Err(e) => e.to_string(),
        };
        assert_eq!(
            (
                [said(&planted), said(&fifo), said(&fresh)],
                std::fs::read_to_string(&host).unwrap(),
                read_record(&fresh),
                std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777,
            ),
            (
                [eloop, enxio, "written".to_string()],
                "the host's file\n".to_string(),
                Ok(record.clone()),
                0o600,
            )
        );
    }

    /// A record is read without following a link, and only files count.
    #[test]
    fn records_are_files_never_links() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join(".gitlab-token-aa.json");
        std::fs::write(&real, r#"{"name":"paddock-j-aa","token_id":7}"#).unwrap();
        let outside = dir.path().join("outside.json");
        std::fs::write(&outside, r#"{"name":"paddock-j-bb","token_id":8}"#).unwrap();
        std::os::unix::fs::symlink(&outside, dir.path().join(".gitlab-token-bb.json")).unwrap();
        std::fs::create_dir(dir.path().join(".gitlab-token-cc.json")).unwrap();
        // A FIFO, as one swapped in after the listing: refused at once,
        // not waited on (nothing ever opens its other end).
        let fifo = dir.path().join(".gitlab-token-dd.json");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert_eq!(
            (
                leftover_records(dir.path()),
                read_record(&real),
                read_record(&dir.path().join(".gitlab-token-bb.json")).is_err(),
                read_record(&fifo),
            ),
            (
                vec![real.clone()],
                Ok(TokenRecord {
                    name: "paddock-j-aa".into(),
                    token_id: Some(7),
                }),
                true,
                Err(format!("read {}: not a regular file", fifo.display())),
            )
        );
    }
}

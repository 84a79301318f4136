//! The branch pushed to a remote with Paddock's credentials: from the
//! job's bundle through a scratch bare repository, by Paddock's hardened
//! git (`workspace/host_git.rs`), to a `file://`, `https://` or loopback
//! `http://` URL. The token reaches git only as configuration in the
//! environment of that one host process (`GIT_CONFIG_COUNT`: an
//! `http.extraHeader` with HTTP basic `x-access-token`), never in its
//! argv (readable by any process in `/proc`), a file, or the job. The push
//! is never forced: a branch that moved is a rejection, reported with the
//! remote's message.

use std::path::Path;

use base64::Engine as _;

use crate::secret::Secret;
use crate::workspace::host_git::{HostGit, GIT_TIMEOUT};
use crate::workspace::WorkspaceError;

#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("push to {url}: only file://, https:// and loopback http:// URLs are pushed to")]
    Scheme { url: String },
    #[error("push to {url}: cannot make a scratch repository in {dir}: {source}")]
    Scratch {
        url: String,
        dir: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("push to {url}: {source}")]
    Git { url: String, source: WorkspaceError },
}

/// The protocols git may use for `url`, or why it is refused.
fn protocols(url: &str) -> Result<&'static str, PushError> {
    let refused = || PushError::Scheme {
        url: url.to_string(),
    };
    if url.starts_with("file://") {
        return Ok("file");
    }
    if url.starts_with("https://") {
        return Ok("https");
    }
    if let Some(rest) = url.strip_prefix("http://") {
        let host = rest.split(['/', '@']).next().unwrap_or("");
        let host = host.rsplit_once(':').map_or(host, |(h, _)| h);
        return match host {
            "127.0.0.1" | "localhost" | "[::1]" => Ok("http"),
            _ => Err(refused()),
        };
    }
    Err(refused())
}

/// The `Authorization` header git sends with `token`.
fn auth_header(token: &Secret) -> String {
    let basic = base64::engine::general_purpose::STANDARD
        .encode(format!("x-access-token:{}", token.expose()));
    format!("Authorization: Basic {basic}")
}

/// Pushes `branch` of `bundle` to `url` as the same branch, with `token`
/// when the URL is HTTP(S); `scratch_parent` holds the scratch repository
/// while it runs.
pub async fn push_branch(
    bundle: &Path,
    branch: &str,
    url: &str,
    token: Option<&Secret>,
    scratch_parent: &Path,
) -> Result<(), PushError> {
    let protocol = protocols(url)?;
    let scratch = tempfile::Builder::new()
        .prefix(".push-")
        .tempdir_in(scratch_parent)
        .map_err(|source| PushError::Scratch {
            url: url.to_string(),
            dir: scratch_parent.to_path_buf(),
            source,
        })?;
    let git_err = |source| PushError::Git {
        url: url.to_string(),
        source,
    };
    let repo = scratch.path().join("repo.git");
    let init = HostGit {
        git_dir: None,
        work_tree: None,
        index: None,
        excludes: None,
        root: scratch.path().to_path_buf(),
        timeout: GIT_TIMEOUT,
    };
    let repo_arg = repo.to_string_lossy().into_owned();
    init.run(["init", "--quiet", "--bare", &repo_arg], None)
        .await
        .map_err(git_err)?;
    let git = HostGit {
        git_dir: Some(repo.clone()),
        ..init
    };
    let head = format!("refs/heads/{branch}");
    let bundle_arg = bundle.to_string_lossy().into_owned();
    git.run(
        [
            "fetch",
            "--quiet",
            "--no-write-fetch-head",
            "--",
            &bundle_arg,
            &format!("{head}:{head}"),
        ],
        None,
    )
    .await
    .map_err(git_err)?;
    let args = [
        "-c".to_string(),
        format!("protocol.{protocol}.allow=always"),
        "push".to_string(),
        "--quiet".to_string(),
        "--no-verify".to_string(),
        "--".to_string(),
        url.to_string(),
        format!("{head}:{head}"),
    ];
    let mut cmd = git.command(&args);
    cmd.env("GIT_ALLOW_PROTOCOL", protocol);
    if let (Some(token), "http" | "https") = (token, protocol) {
        cmd.env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", "http.extraHeader")
            .env("GIT_CONFIG_VALUE_0", auth_header(token));
    }
    let out = crate::workspace::host_git::output_within(cmd, None, GIT_TIMEOUT)
        .await
        .map_err(|source| {
            git_err(WorkspaceError::Spawn {
                path: scratch.path().to_path_buf(),
                source,
            })
        })?
        .ok_or_else(|| {
            git_err(WorkspaceError::GitTimeout {
                path: scratch.path().to_path_buf(),
                args: format!("push {url} {head}"),
                after: GIT_TIMEOUT,
            })
        })?;
    if !out.status.success() {
        return Err(git_err(git.failed(["push", url, &head], &out.stderr)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_file_https_and_loopback_http_are_pushed_to() {
        let got: Vec<Option<&str>> = [
            "file:///srv/r.git",
            "https://github.com/o/r.git",
            "http://127.0.0.1:8080/r.git",
            "http://localhost/r.git",
            "http://example.com/r.git",
            "http://127.0.0.1.example.com/r.git",
            "ssh://git@github.com/o/r.git",
            "/srv/r.git",
        ]
        .iter()
        .map(|u| protocols(u).ok())
        .collect();
        assert_eq!(
            got,
            vec![
                Some("file"),
                Some("https"),
                Some("http"),
                Some("http"),
                None,
                None,
                None,
                None
            ]
        );
    }

    #[test]
    fn the_header_is_basic_with_the_access_token_user() {
        assert_eq!(
            auth_header(&Secret::new("tok".into())),
            "Authorization: Basic eC1hY2Nlc3MtdG9rZW46dG9r"
        );
    }
}

//! The branch pushed to a remote with Paddock's credentials: from the
//! job's bundle through a scratch bare repository (which borrows the
//! base's objects read-only from the local source or the URL's mirror,
//! `objects/info/alternates`, when the bundle holds only the job's new
//! objects: `base_objects.rs`; verified, and its objects checked by
//! `fsck` as they are indexed), by Paddock's hardened
//! git (`workspace/host_git.rs`), to a `file://`, `https://`, `ssh://` or
//! loopback `http://` URL, and to no server that one redirects to
//! (`http.followRedirects=false`; Paddock's git reads no configuration of
//! the user's, so no `url.<base>.pushInsteadOf` rewrites it). A token reaches git only as configuration in
//! the environment of that one host process (`GIT_CONFIG_COUNT`: an
//! `http.extraHeader` with HTTP basic `x-access-token`), never in its
//! argv (readable by any process in `/proc`), a file, or the job. An SSH
//! deploy key is never a file on disk: it is a sealed memory file
//! (`memfd_create`, 0600) that only the push's git inherits
//! (`paddock_sandbox::pass_fd`), and ssh opens it through git's
//! descriptor table, `-i /proc/$PPID/fd/N` (`GIT_SSH_COMMAND` runs in a
//! shell whose parent is that git), with `IdentitiesOnly=yes`,
//! `StrictHostKeyChecking=yes` against the configured `known_hosts`,
//! `BatchMode=yes`, no user config, and bounds on a remote that stalls
//! (`ConnectTimeout`, `ServerAliveInterval`). The key goes when the last
//! process holding it ends, however Paddock ends: a `kill -9` leaves no
//! copy of it anywhere on disk, and the reaper kills what a killed push
//! left running ([`leftover_pushes`]). The push is never forced: a branch
//! that moved is a rejection, reported with the remote's message.

use std::os::fd::{AsFd as _, AsRawFd as _};
use std::path::Path;

use crate::secret::Secret;
use crate::workspace::host_git::{HostGit, GIT_TIMEOUT};
use crate::workspace::WorkspaceError;

#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error(
        "push to {url}: only file://, https://, ssh:// and loopback http:// URLs are pushed to"
    )]
    Scheme { url: String },
    #[error("push to {url}: cannot hold the deploy key in memory: {source}")]
    HoldKey { url: String, source: std::io::Error },
    #[error("push to {url}: cannot make a scratch repository in {dir}: {source}")]
    Scratch {
        url: String,
        dir: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("push to {url}: {source}")]
    Git { url: String, source: WorkspaceError },
    /// The push itself failed (the remote or its hook refused it, its
    /// credentials, the network): git's words, with the command that said
    /// them. The scratch repository it ran in, removed by then, is not
    /// named (it was, as a "workspace" the user then looked for).
    #[error("push to {url}: `git push {url} {head}` failed: {stderr}")]
    Failed {
        url: String,
        head: String,
        stderr: String,
    },
    #[error(
        "push to {url}: the remote's branch {branch} holds commits this job's branch does not \
         continue (an earlier run of the same ticket and attempt, or someone else's push), and \
         Paddock never force-pushes: git said `{git}`; run the ticket's next attempt on its own \
         branch (`paddock run SPEC --attempt-after {job}`), or remove the remote's branch and \
         `paddock publish {job}` again"
    )]
    NotFastForward {
        job: String,
        url: String,
        branch: String,
        git: String,
    },
    #[error("push to {url}: the branch's bundle holds only the job's new objects, and their base commit {base} is not in what the push borrows ({borrowed}): the source was rewritten and pruned, or its mirror removed: {source}")]
    BaseGone {
        url: String,
        base: String,
        borrowed: String,
        source: Box<WorkspaceError>,
    },
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
    if url.starts_with("ssh://") {
        return Ok("ssh");
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

/// The credential a push presents.
#[derive(Debug, Clone, Copy)]
pub enum PushAuth<'a> {
    /// None (a `file://` remote).
    None,
    /// HTTP basic `x-access-token:TOKEN` (HTTP(S) URLs).
    Token(&'a Secret),
    /// HTTP basic `oauth2:TOKEN` (GitLab's form for a token over HTTPS).
    OAuth2(&'a Secret),
    /// An SSH deploy key, the server's key checked against `known_hosts`.
    SshKey {
        key: &'a Secret,
        known_hosts: &'a Path,
    },
}

/// `text` quoted for the shell git runs `GIT_SSH_COMMAND` with.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// The `GIT_SSH_COMMAND` of a push whose git holds the deploy key as its
/// descriptor `key_fd` (`$PPID`: the shell git runs the command in is
/// git's child).
fn ssh_command(key_fd: i32, known_hosts: &Path) -> String {
    format!(
        "ssh -F /dev/null -i /proc/$PPID/fd/{key_fd} -o IdentitiesOnly=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile={} -o BatchMode=yes -o ConnectTimeout=30 -o ServerAliveInterval=15 -o ServerAliveCountMax=4",
        shell_quote(&known_hosts.to_string_lossy()),
    )
}

/// The deploy key as a sealed memory file, readable by its owner only,
/// ending with the newline OpenSSH wants; close-on-exec (only the push's
/// git is given it).
fn key_in_memory(key: &Secret) -> std::io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::{MemfdFlags, SealFlags};
    let fd = rustix::fs::memfd_create(
        "paddock-deploy-key",
        MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
    )?;
    rustix::fs::fchmod(&fd, rustix::fs::Mode::from_raw_mode(0o600))?;
    let text = format!("{}\n", key.expose().trim_end());
    let mut bytes = text.as_bytes();
    while !bytes.is_empty() {
        let n = rustix::io::write(&fd, bytes)?;
        bytes = &bytes[n..];
    }
    rustix::fs::fcntl_add_seals(
        &fd,
        SealFlags::SEAL | SealFlags::SHRINK | SealFlags::GROW | SealFlags::WRITE,
    )?;
    Ok(fd)
}

/// The scratch directories of pushes under `artifacts` (a job's artifacts
/// directory) that a killed Paddock left: the reaper kills what still
/// runs in them and removes them.
pub fn leftover_pushes(artifacts: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(artifacts) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(SCRATCH_PREFIX))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect()
}

/// Kills what still runs in each scratch directory a killed push left in
/// `artifacts` (git, ssh) and removes it, never following a link (a link
/// in place of one is not a scratch directory; links inside are removed,
/// not followed): how many processes were killed, and what could not be
/// removed.
pub fn remove_leftover_pushes(artifacts: &Path) -> (usize, Vec<String>) {
    let mut killed = 0;
    let mut errors = Vec::new();
    for push in leftover_pushes(artifacts) {
        killed += crate::leftovers::kill_processes(&push, None);
        if let Err(e) = std::fs::remove_dir_all(&push) {
            errors.push(format!("remove {}: {e}", push.display()));
        }
    }
    (killed, errors)
}

/// The name a push's scratch directory starts with.
const SCRATCH_PREFIX: &str = ".push-";

/// The bundle a push takes the branch from.
#[derive(Debug, Clone, Copy)]
pub struct Bundle<'a> {
    /// The job whose branch it is (its errors name it).
    pub job: &'a str,
    pub bundle: &'a Path,
    /// Its prerequisite, when it holds only the job's new objects on the
    /// base (`results/base_objects.rs`); `None` for the whole history.
    pub base: Option<&'a str>,
    /// An object directory that has the base (the local source's, the
    /// URL's mirror's), borrowed read-only by the scratch repository.
    pub borrow: Option<&'a Path>,
    /// The CPU each git of the push may use (`host_git::job_git_cpu`).
    pub git_cpu: std::time::Duration,
}

/// Pushes `branch` of `from`'s bundle to `url` as the same branch, with
/// `auth`; `scratch_parent` holds the scratch repository while it runs.
pub async fn push_branch(
    from: &Bundle<'_>,
    branch: &str,
    url: &str,
    auth: PushAuth<'_>,
    scratch_parent: &Path,
) -> Result<(), PushError> {
    let protocol = protocols(url)?;
    let scratch = tempfile::Builder::new()
        .prefix(SCRATCH_PREFIX)
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
        // The job's objects, from its bundle.
        cpu_limit: Some(from.git_cpu),
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
    let bundle_arg = from.bundle.to_string_lossy().into_owned();
    if let Some(base) = from.base {
        // The base's objects, borrowed: the new ones alone are no history.
        if let Some(objects) = from.borrow {
            let alternates = repo.join("objects/info/alternates");
            std::fs::write(&alternates, format!("{}\n", objects.display())).map_err(|source| {
                PushError::Scratch {
                    url: url.to_string(),
                    dir: alternates.clone(),
                    source,
                }
            })?;
        }
        if let Err(e) = git
            .run(["bundle", "verify", "--quiet", &bundle_arg], None)
            .await
        {
            return Err(PushError::BaseGone {
                url: url.to_string(),
                base: base.to_string(),
                borrowed: from
                    .borrow
                    .map_or("nothing".into(), |p| p.display().to_string()),
                source: Box::new(e),
            });
        }
    }
    // The job's new objects are checked as they are indexed; a whole
    // history is the user's own, which need not pass today's fsck (its
    // job's new objects were checked as it was kept:
    // `workspace/new_objects.rs`).
    let refspec = format!("{head}:{head}");
    let mut fetch = Vec::new();
    if from.base.is_some() {
        fetch.extend(["-c", "fetch.fsckObjects=true"]);
    }
    fetch.extend([
        "fetch",
        "--quiet",
        "--no-write-fetch-head",
        "--",
        bundle_arg.as_str(),
        refspec.as_str(),
    ]);
    git.run(&fetch, None).await.map_err(git_err)?;
    let args = [
        "-c".to_string(),
        format!("protocol.{protocol}.allow=always"),
        // The URL's server, not one it redirects to (git follows a
        // redirect of a push's first request by default): the spec or
        // the operator named that server.
        "-c".to_string(),
        "http.followRedirects=false".to_string(),
        "push".to_string(),
        "--quiet".to_string(),
        "--no-verify".to_string(),
        "--".to_string(),
        url.to_string(),
        format!("{head}:{head}"),
    ];
    let mut cmd = git.command(&args);
    cmd.env("GIT_ALLOW_PROTOCOL", protocol);
    // Held open until git has been started with it.
    let mut key_fd = None;
    match (auth, protocol) {
        (PushAuth::Token(token), "http" | "https") => {
            cmd.env("GIT_CONFIG_COUNT", "1")
                .env("GIT_CONFIG_KEY_0", "http.extraHeader")
                .env(
                    "GIT_CONFIG_VALUE_0",
                    token.basic_auth_header("x-access-token").expose(),
                );
        }
        (PushAuth::OAuth2(token), "http" | "https") => {
            cmd.env("GIT_CONFIG_COUNT", "1")
                .env("GIT_CONFIG_KEY_0", "http.extraHeader")
                .env(
                    "GIT_CONFIG_VALUE_0",
                    token.basic_auth_header("oauth2").expose(),
                );
        }
        (PushAuth::SshKey { key, known_hosts }, "ssh") => {
            let fd = key_in_memory(key).map_err(|source| PushError::HoldKey {
                url: url.to_string(),
                source,
            })?;
            cmd.env("GIT_SSH_COMMAND", ssh_command(fd.as_raw_fd(), known_hosts))
                .env("GIT_SSH_VARIANT", "ssh");
            paddock_sandbox::pass_fd::pass_fd(cmd.as_std_mut(), fd.as_fd());
            key_fd = Some(fd);
        }
        _ => {}
    }
    // Its `pack-objects` deltifies the job's objects: held to the CPU
    // limit of a host git on a job's content, as the fetch above is.
    let out =
        crate::workspace::host_git::output_within_cpu(cmd, None, GIT_TIMEOUT, from.git_cpu).await;
    drop(key_fd);
    let out = out
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
    crate::workspace::host_git::check_cpu(
        &out.status,
        Some(from.git_cpu),
        scratch.path(),
        &["push", url, &head],
    )
    .map_err(git_err)?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        if let Some(line) = not_fast_forward(&stderr, branch) {
            return Err(PushError::NotFastForward {
                job: from.job.to_string(),
                url: url.to_string(),
                branch: branch.to_string(),
                git: line,
            });
        }
        return Err(PushError::Failed {
            url: url.to_string(),
            head,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// Git's `! [rejected] … (fetch first)` or `(non-fast-forward)` line for
/// `branch` in a push's stderr: the remote's branch holds commits the
/// job's does not continue.
fn not_fast_forward(stderr: &str, branch: &str) -> Option<String> {
    stderr
        .lines()
        .map(str::trim)
        .find(|l| {
            l.starts_with("! [rejected]")
                && l.contains(branch)
                && (l.ends_with("(fetch first)") || l.ends_with("(non-fast-forward)"))
        })
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
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
            "git@github.com:o/r.git",
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
                Some("ssh"),
                None,
                None
            ]
        );
    }

    /// The deploy key is named through git's descriptor, only that
    /// identity is offered, the host key must be known, nothing is asked
    /// or read from the user's config, a stalled remote is given up on;
    /// quotes in paths stay inside their words.
    #[test]
    fn the_ssh_command_offers_only_the_deploy_key_to_a_known_host() {
        assert_eq!(
            ssh_command(7, Path::new("/etc/it's/known_hosts")),
            "ssh -F /dev/null -i /proc/$PPID/fd/7 -o IdentitiesOnly=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile='/etc/it'\\''s/known_hosts' -o BatchMode=yes -o ConnectTimeout=30 -o ServerAliveInterval=15 -o ServerAliveCountMax=4"
        );
    }

    /// The key in memory is the key with one final newline, readable by
    /// its owner only, sealed, close-on-exec, and no file of any
    /// directory.
    #[test]
    fn the_deploy_key_is_a_private_sealed_memory_file() {
        use std::io::Read as _;
        use std::os::unix::fs::PermissionsExt as _;
        let fd = key_in_memory(&Secret::new(
            "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n\n"
                .into(),
        ))
        .unwrap();
        let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
        let mut text = String::new();
        std::fs::File::open(&path)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        let link = std::fs::read_link(&path).unwrap();
        let written = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"x"));
        assert_eq!(
            (
                text,
                std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                link.display().to_string(),
                written.is_err(),
                rustix::io::fcntl_getfd(&fd).unwrap(),
            ),
            (
                "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n"
                    .to_string(),
                0o600,
                "/memfd:paddock-deploy-key (deleted)".to_string(),
                true,
                rustix::io::FdFlags::CLOEXEC,
            )
        );
    }
}

//! The git configuration a host git that reaches a URL source's server
//! runs with (the mirror's clone and fetches, `mirror.rs`): the user's
//! own (system, global and command-line scopes: their credential
//! helpers, `~/.netrc` use, proxies, CA files, SSH command), read once
//! per fetch with `git config --list --includes` outside any repository
//! (the first fetch of a `paddock run` of a URL source takes the read
//! [`read_ahead`] started as the run began, beside its store's opening:
//! one git process fewer on the job's provisioning path, issue #14),
//! and given to that one git process in its environment
//! (`GIT_CONFIG_COUNT`), git itself reading no configuration file but the
//! repository's (Paddock's mirror's). Left out is whatever would have the
//! fetch reach another place than the URL the spec names: every
//! `url.<base>.insteadOf` and `url.<base>.pushInsteadOf` (an SSH rewrite
//! with the server user's keys and agent, a directory of the host's; the
//! included files' settings are read in already, so no `include.*` or
//! `includeIf.*` is passed on to be read again), and a redirect of the
//! URL's server is not followed (`http.followRedirects=false`: a host the
//! server reaches and the submitter does not). The same whether the spec
//! gives a `repository.token` or the server's credentials
//! (`git:credentials`): the operator allowing those credentials for a
//! host is not allowing the fetch to go elsewhere with them.

use std::path::Path;
use std::process::Stdio;
use std::sync::Mutex;

use tokio::process::Command;
use tokio::task::JoinHandle;

use super::{host_git, WorkspaceError};

/// A read of the configuration under way.
type Reading = JoinHandle<Result<RemoteConfig, WorkspaceError>>;

/// The read [`read_ahead`] started, for this process's next
/// [`RemoteConfig::read`] to take.
static AHEAD: Mutex<Option<Reading>> = Mutex::new(None);

/// Starts reading the user's configuration now (on the current Tokio
/// runtime), for the next [`RemoteConfig::read`] of this process to take
/// instead of starting its own: a `paddock run` of a URL source, whose
/// mirror's fetch waits for the read, starts it before its store's
/// opening and the reaper's pass. The configuration is the same wherever
/// git runs (outside any repository), so reading it in `/` gives what
/// the fetch's own read would have; a read that failed is done again by
/// the fetch (its error naming the mirror, as before). Only the next
/// read takes it: any later one reads the configuration as it is then.
pub fn read_ahead() {
    put(&AHEAD, tokio::spawn(RemoteConfig::read_now(Path::new("/"))));
}

/// `reading` in `slot`, in place of (and aborting) any read there.
fn put(slot: &Mutex<Option<Reading>>, reading: Reading) {
    if let Ok(mut ahead) = slot.lock() {
        if let Some(earlier) = ahead.replace(reading) {
            earlier.abort();
        }
    }
}

/// A git directory that is none: `git config --list` outside any
/// repository, whatever directory it runs in.
const NO_REPOSITORY: &str = "/dev/null/paddock-no-repository";

/// The user's configuration, less what would send a fetch elsewhere, as
/// (key, value) pairs in git's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RemoteConfig(Vec<(String, String)>);

impl RemoteConfig {
    /// The user's configuration as git in `cwd` (named in errors) reads
    /// it outside a repository: the read [`read_ahead`] started, when
    /// there is one and it succeeded, else read now.
    pub async fn read(cwd: &Path) -> Result<RemoteConfig, WorkspaceError> {
        RemoteConfig::read_taking(&AHEAD, cwd).await
    }

    /// [`RemoteConfig::read`] taking the read in `slot`.
    async fn read_taking(
        slot: &Mutex<Option<Reading>>,
        cwd: &Path,
    ) -> Result<RemoteConfig, WorkspaceError> {
        let ahead = slot.lock().ok().and_then(|mut ahead| ahead.take());
        if let Some(reading) = ahead {
            if let Ok(Ok(config)) = reading.await {
                return Ok(config);
            }
        }
        RemoteConfig::read_now(cwd).await
    }

    /// [`RemoteConfig::read`] by a git process started now.
    async fn read_now(cwd: &Path) -> Result<RemoteConfig, WorkspaceError> {
        let args = ["config", "--list", "--includes", "-z"];
        let mut cmd = Command::from(super::users_git::command());
        cmd.arg("-C")
            .arg(cwd)
            .args(args)
            .env("GIT_DIR", NO_REPOSITORY)
            .stdin(Stdio::null());
        let failed = |stderr: String| WorkspaceError::Git {
            path: cwd.to_path_buf(),
            args: args.join(" "),
            stderr,
        };
        let out =
            host_git::finished_within(cmd, cwd, &args.join(" "), host_git::CONFIG_TIMEOUT).await?;
        if !out.status.success() {
            return Err(failed(
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ));
        }
        Ok(RemoteConfig::from_listing(&String::from_utf8_lossy(
            &out.stdout,
        )))
    }

    /// The entries of `git config --list -z` output (`key\nvalue\0`, or
    /// `key\0` for a key with no value, which git takes as true) that a
    /// fetch of a URL keeps.
    pub fn from_listing(listing: &str) -> RemoteConfig {
        let entries = listing
            .split('\0')
            .filter(|entry| !entry.is_empty())
            .map(|entry| match entry.split_once('\n') {
                Some((key, value)) => (key.to_string(), value.to_string()),
                None => (entry.to_string(), "true".to_string()),
            })
            .filter(|(key, _)| kept(key))
            .collect();
        RemoteConfig(entries)
    }

    /// Has `cmd` read no configuration file but its repository's, and
    /// these entries, then `extra` (which outrank them), then
    /// `http.followRedirects=false`, all in its environment.
    pub fn apply(&self, cmd: &mut Command, extra: &[(&str, &str)]) {
        cmd.env_remove("GIT_CONFIG_PARAMETERS")
            .env_remove("GIT_CONFIG")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_SYSTEM", "/dev/null")
            .env("GIT_CONFIG_GLOBAL", "/dev/null");
        let all = self
            .0
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain(extra.iter().copied())
            .chain([("http.followRedirects", "false")]);
        let mut count = 0;
        for (i, (key, value)) in all.enumerate() {
            cmd.env(format!("GIT_CONFIG_KEY_{i}"), key)
                .env(format!("GIT_CONFIG_VALUE_{i}"), value);
            count = i + 1;
        }
        cmd.env("GIT_CONFIG_COUNT", count.to_string());
    }
}

/// Whether the setting `key` (as `git config --list` prints it: section
/// and name lower case) is passed on to a fetch of a URL.
fn kept(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    let rewrite = lower.starts_with("url.")
        && (lower.ends_with(".insteadof") || lower.ends_with(".pushinsteadof"));
    let include = lower.starts_with("include.") || lower.starts_with("includeif.");
    !(rewrite || include)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rewrites and includes go, whatever their case; credential
    /// helpers (an empty one resetting the list), proxies and a key with
    /// no value (true) stay, in order.
    #[test]
    fn a_listing_loses_its_rewrites_and_includes() {
        let listing = "user.name\nU\0url.ssh://git@git.example/.insteadof\nhttps://git.example/\0\
                       url./srv/.pushInsteadOf\nhttps://git.example/\0credential.helper\n\0\
                       credential.https://git.example.helper\nstore\0include.path\n~/.more\0\
                       includeif.gitdir:/x/.path\n/y\0http.proxy\nhttp://proxy:3128\0\
                       http.sslverify\0url.https://a/.name\nkept\0";
        assert_eq!(
            RemoteConfig::from_listing(listing),
            RemoteConfig(
                [
                    ("user.name", "U"),
                    ("credential.helper", ""),
                    ("credential.https://git.example.helper", "store"),
                    ("http.proxy", "http://proxy:3128"),
                    ("http.sslverify", "true"),
                    ("url.https://a/.name", "kept"),
                ]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .to_vec()
            )
        );
    }

    /// The next read takes the read started ahead (here one whose answer
    /// no git gives), and only the next: the one after it reads anew, as
    /// does a read whose read ahead failed.
    #[tokio::test]
    async fn only_the_next_read_takes_the_read_started_ahead() {
        let dir = tempfile::tempdir().unwrap();
        let now = RemoteConfig::read_now(dir.path()).await.unwrap();
        let marked = RemoteConfig(vec![("paddock.test".to_string(), "ahead".to_string())]);
        let slot = Mutex::new(None);
        put(&slot, tokio::spawn(std::future::ready(Ok(marked.clone()))));
        let first = RemoteConfig::read_taking(&slot, dir.path()).await.unwrap();
        let second = RemoteConfig::read_taking(&slot, dir.path()).await.unwrap();
        assert_eq!((first, second), (marked, now.clone()));
        put(
            &slot,
            tokio::spawn(std::future::ready(Err(WorkspaceError::Spawn {
                path: dir.path().to_path_buf(),
                source: std::io::Error::other("refused"),
            }))),
        );
        let after_failure = RemoteConfig::read_taking(&slot, dir.path()).await.unwrap();
        assert_eq!(after_failure, now);
    }
}

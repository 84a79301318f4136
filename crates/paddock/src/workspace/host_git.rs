//! Paddock's own git on the host, hardened against everything a job writes.
//! Every command names its git directory (`GIT_DIR`) and work tree
//! (`GIT_WORK_TREE`) explicitly, so git never discovers a repository from
//! a `.git` directory, gitfile, `commondir` or worktree link; it starts
//! from an empty environment and reads no system, global or `$HOME`
//! configuration; and the `-c` settings below, which outrank any
//! repository config, turn off every program git could start (fsmonitor,
//! hooks, pagers, external diff, textconv, remote transports) and every
//! path git would read besides the two it is given (attributes and
//! excludes files, replace refs). The only repository config read is that
//! of the git directory named, which Paddock wrote. See ARCHITECTURE.md,
//! "Paddock's git and the job's git".

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};

use tokio::io::AsyncWriteExt as _;
use tokio::process::Command;

use super::WorkspaceError;

/// Settings given as `-c` to every command. They outrank the repository's
/// own config, so even a config file git reads cannot turn any of these on.
const SETTINGS: &[&str] = &[
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.attributesFile=/dev/null",
    "core.untrackedCache=false",
    "core.splitIndex=false",
    "core.sparseCheckout=false",
    "core.pager=cat",
    "core.askPass=",
    "core.autocrlf=false",
    "core.symlinks=true",
    "core.ignoreCase=false",
    "core.precomposeUnicode=false",
    "core.trustctime=true",
    "core.checkStat=default",
    "diff.external=",
    "diff.submodule=short",
    "submodule.recurse=false",
    "protocol.allow=never",
    "protocol.file.allow=always",
    "credential.helper=",
    "gc.auto=0",
    "maintenance.auto=false",
    "advice.detachedHead=false",
    "init.templateDir=",
];

/// One repository as Paddock's git sees it: a git directory, optionally a
/// work tree and an index file.
#[derive(Debug, Clone)]
pub(super) struct HostGit {
    /// `None` only for `clone`, which makes its own.
    pub git_dir: Option<PathBuf>,
    pub work_tree: Option<PathBuf>,
    pub index: Option<PathBuf>,
    /// The user's own excludes file (`core.excludesFile`), read like the
    /// repository's `info/exclude`; `/dev/null` when there is none.
    pub excludes: Option<PathBuf>,
    /// The job directory, for errors.
    pub root: PathBuf,
}

impl HostGit {
    /// The command for `git ARGS`, not started.
    pub fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new("git");
        cmd.env_clear();
        if let Some(path) = std::env::var_os("PATH") {
            cmd.env("PATH", path);
        }
        cmd.env("HOME", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_SYSTEM", "/dev/null")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_ATTR_NOSYSTEM", "1")
            .env("GIT_NO_REPLACE_OBJECTS", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_PAGER", "cat")
            .env("PAGER", "cat")
            .env("GIT_ALLOW_PROTOCOL", "file")
            .env("LC_ALL", "C");
        if let Some(dir) = &self.git_dir {
            cmd.env("GIT_DIR", dir);
        }
        match (&self.work_tree, &self.git_dir) {
            (Some(work), _) => cmd.env("GIT_WORK_TREE", work).current_dir(work),
            (None, Some(dir)) => cmd.current_dir(dir),
            (None, None) => cmd.current_dir(&self.root),
        };
        if let Some(index) = &self.index {
            cmd.env("GIT_INDEX_FILE", index);
        }
        for setting in SETTINGS {
            cmd.arg("-c").arg(setting);
        }
        let mut excludes = std::ffi::OsString::from("core.excludesFile=");
        excludes.push(self.excludes.as_deref().unwrap_or(Path::new("/dev/null")));
        cmd.arg("-c").arg(excludes);
        cmd.args(args).stdin(Stdio::null());
        cmd
    }

    /// Runs `git ARGS` with `input` on stdin; its stdout on success.
    pub async fn run<I, S>(&self, args: I, input: Option<&[u8]>) -> Result<Vec<u8>, WorkspaceError>
    where
        I: IntoIterator<Item = S> + Clone,
        S: AsRef<OsStr>,
    {
        let (status, stdout, stderr) = self.status(args.clone(), input).await?;
        if status.success() {
            Ok(stdout)
        } else {
            Err(self.failed(args, &stderr))
        }
    }

    /// Runs `git ARGS` with `input` on stdin (written while stdout is
    /// read); its exit status, stdout and stderr.
    pub async fn status<I, S>(
        &self,
        args: I,
        input: Option<&[u8]>,
    ) -> Result<(ExitStatus, Vec<u8>, Vec<u8>), WorkspaceError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = self.command(args);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        if input.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let spawn_err = |source| WorkspaceError::Spawn {
            path: self.root.clone(),
            source,
        };
        let mut child = cmd.spawn().map_err(spawn_err)?;
        let stdin = child.stdin.take();
        let write = async move {
            if let (Some(mut pipe), Some(data)) = (stdin, input) {
                // A git that exits early closes the pipe: its status says why.
                let _ = pipe.write_all(data).await;
                let _ = pipe.shutdown().await;
            }
        };
        let (_, out) = tokio::join!(write, child.wait_with_output());
        let out = out.map_err(spawn_err)?;
        Ok((out.status, out.stdout, out.stderr))
    }

    /// The error for a failed `git ARGS`.
    pub fn failed<I, S>(&self, args: I, stderr: &[u8]) -> WorkspaceError
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        WorkspaceError::Git {
            path: self.root.clone(),
            args: args
                .into_iter()
                .map(|a| a.as_ref().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" "),
            stderr: String::from_utf8_lossy(stderr).trim().to_string(),
        }
    }
}

/// The user's own excludes file, as their git would read it: the global
/// `core.excludesFile`, else `$XDG_CONFIG_HOME/git/ignore` or
/// `~/.config/git/ignore` when it exists. Read from the user's
/// configuration (never the job's), by Paddock's own process.
pub(super) fn user_excludes_file() -> Option<PathBuf> {
    let out = std::process::Command::new("git")
        .args(["config", "--global", "--path", "--get", "core.excludesFile"])
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let configured = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let path = if out.status.success() && !configured.is_empty() {
        PathBuf::from(configured)
    } else {
        let config = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
        config.join("git/ignore")
    };
    path.is_file().then_some(path)
}

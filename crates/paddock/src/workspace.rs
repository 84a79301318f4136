//! The per-job workspace: a fresh directory with `work/` (the repository at
//! the base ref on a new branch, hooks disabled), `home/` (HOME, XDG dirs,
//! the engines' config dirs), `tmp/` and `meta/` (Paddock's own files). The
//! job's patch is the diff of `work/` against the base, new files included,
//! Paddock's generated files excluded. The directory is removed at the end
//! unless the job is kept.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use paddock_protocol::RepositorySpec;
use tokio::process::Command;

#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("workspace {path}: cannot create: {source}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("repository {path}: not a git repository")]
    NotARepository { path: PathBuf },
    #[error("repository {source_repo}: git clone failed: {stderr}")]
    Clone { source_repo: String, stderr: String },
    #[error("repository {source_repo}: base ref `{base_ref}` is not a commit in it")]
    BaseRef {
        source_repo: String,
        base_ref: String,
    },
    #[error("workspace {path}: `git {args}` failed: {stderr}")]
    Git {
        path: PathBuf,
        args: String,
        stderr: String,
    },
    #[error("workspace {path}: cannot run git: {source}")]
    Spawn {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("workspace {path}: cannot write {file}: {source}")]
    Write {
        path: PathBuf,
        file: String,
        source: std::io::Error,
    },
    #[error("workspace {path}: cannot remove: {source}")]
    Remove {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// One job's directories.
#[derive(Debug, Clone)]
pub struct Workspace {
    pub root: PathBuf,
    pub work: PathBuf,
    pub home: PathBuf,
    pub tmp: PathBuf,
    pub meta: PathBuf,
    /// The commit the job starts from.
    pub base_commit: String,
    pub branch: String,
}

/// What the job changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    /// `git diff --binary` of the work tree against the base commit.
    pub diff: String,
    pub changed_files: Vec<String>,
}

impl Workspace {
    /// Creates `<jobs_root>/<job_id>` and checks the repository out into it.
    /// On failure nothing is left behind.
    pub async fn provision(
        jobs_root: &Path,
        job_id: &str,
        repo: &RepositorySpec,
        branch: &str,
    ) -> Result<Workspace, WorkspaceError> {
        let root = jobs_root.join(job_id);
        let result = Workspace::provision_in(root.clone(), repo, branch).await;
        if result.is_err() && root.exists() {
            let _ = std::fs::remove_dir_all(&root);
        }
        result
    }

    async fn provision_in(
        root: PathBuf,
        repo: &RepositorySpec,
        branch: &str,
    ) -> Result<Workspace, WorkspaceError> {
        let source = match (&repo.path, &repo.url) {
            (Some(path), _) => {
                let probe = git(path, ["rev-parse", "--git-dir"]).await;
                if !path.is_dir() || probe.is_err() {
                    return Err(WorkspaceError::NotARepository { path: path.clone() });
                }
                path.display().to_string()
            }
            (None, Some(url)) => url.clone(),
            (None, None) => {
                return Err(WorkspaceError::NotARepository {
                    path: PathBuf::new(),
                })
            }
        };
        if let Some(parent) = root.parent() {
            std::fs::create_dir_all(parent).map_err(|source| WorkspaceError::Create {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        std::fs::create_dir(&root).map_err(|source| WorkspaceError::Create {
            path: root.clone(),
            source,
        })?;
        set_private(&root);
        let ws = Workspace {
            work: root.join("work"),
            home: root.join("home"),
            tmp: root.join("tmp"),
            meta: root.join("meta"),
            root,
            base_commit: String::new(),
            branch: branch.to_string(),
        };
        for dir in [&ws.home, &ws.tmp, &ws.meta] {
            std::fs::create_dir_all(dir).map_err(|source| WorkspaceError::Create {
                path: dir.clone(),
                source,
            })?;
        }
        let out = Command::new("git")
            .args([
                "-c",
                "core.hooksPath=/dev/null",
                "clone",
                "--quiet",
                "--no-checkout",
                "--",
            ])
            .arg(&source)
            .arg(&ws.work)
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(|source| WorkspaceError::Spawn {
                path: ws.root.clone(),
                source,
            })?;
        if !out.status.success() {
            return Err(WorkspaceError::Clone {
                source_repo: source,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        let base = &repo.base_ref;
        let mut base_commit = None;
        for candidate in [
            format!("{base}^{{commit}}"),
            format!("origin/{base}^{{commit}}"),
        ] {
            if let Ok(c) = git(&ws.work, ["rev-parse", "--verify", "--quiet", &candidate]).await {
                base_commit = Some(c.trim().to_string());
                break;
            }
        }
        let Some(base_commit) = base_commit else {
            return Err(WorkspaceError::BaseRef {
                source_repo: source,
                base_ref: base.clone(),
            });
        };
        git(&ws.work, ["config", "core.hooksPath", "/dev/null"]).await?;
        git(&ws.work, ["config", "user.name", "Paddock"]).await?;
        git(&ws.work, ["config", "user.email", "paddock@localhost"]).await?;
        git(
            &ws.work,
            ["checkout", "--quiet", "-b", branch, &base_commit],
        )
        .await?;
        Ok(Workspace { base_commit, ..ws })
    }

    /// Writes a generated file at the checkout root and keeps it out of the
    /// patch (via `.git/info/exclude`). A file the repository tracks is left
    /// alone and `false` is returned.
    pub async fn write_generated(
        &self,
        name: &str,
        contents: &str,
    ) -> Result<bool, WorkspaceError> {
        let tracked = git(&self.work, ["ls-files", "--error-unmatch", "--", name])
            .await
            .is_ok();
        if tracked || self.work.join(name).exists() {
            return Ok(false);
        }
        let write = |file: PathBuf, data: &str, append: bool| {
            use std::io::Write as _;
            let mut opts = std::fs::OpenOptions::new();
            opts.create(true);
            if append {
                opts.append(true);
            } else {
                opts.write(true).truncate(true);
            }
            opts.open(&file)
                .and_then(|mut f| f.write_all(data.as_bytes()))
                .map_err(|source| WorkspaceError::Write {
                    path: self.root.clone(),
                    file: file.display().to_string(),
                    source,
                })
        };
        let info = self.work.join(".git").join("info");
        std::fs::create_dir_all(&info).map_err(|source| WorkspaceError::Create {
            path: info.clone(),
            source,
        })?;
        write(info.join("exclude"), &format!("/{name}\n"), true)?;
        write(self.work.join(name), contents, false)?;
        Ok(true)
    }

    /// The diff of the work tree against the base commit, with new files and
    /// without ignored or excluded ones. The work tree's own index is not touched.
    pub async fn patch(&self) -> Result<Patch, WorkspaceError> {
        let index = self.meta.join("patch.index");
        let _ = std::fs::remove_file(&index);
        let run = |args: Vec<&str>| {
            let index = index.clone();
            let work = self.work.clone();
            let args: Vec<String> = args.into_iter().map(str::to_string).collect();
            async move { git_env(&work, &args, &[("GIT_INDEX_FILE", index.as_os_str())]).await }
        };
        run(vec!["read-tree", &self.base_commit]).await?;
        run(vec!["add", "--all", "--", "."]).await?;
        let diff = run(vec![
            "diff",
            "--cached",
            "--binary",
            "--no-color",
            "--no-ext-diff",
            &self.base_commit,
        ])
        .await?;
        let names = run(vec![
            "diff",
            "--cached",
            "--name-only",
            "--no-renames",
            &self.base_commit,
        ])
        .await?;
        let _ = std::fs::remove_file(&index);
        Ok(Patch {
            diff,
            changed_files: names.lines().map(str::to_string).collect(),
        })
    }

    /// Removes the whole job directory.
    pub fn remove(&self) -> Result<(), WorkspaceError> {
        std::fs::remove_dir_all(&self.root).map_err(|source| WorkspaceError::Remove {
            path: self.root.clone(),
            source,
        })
    }
}

#[cfg(unix)]
fn set_private(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700));
}

#[cfg(not(unix))]
fn set_private(_path: &Path) {}

async fn git<I, S>(dir: &Path, args: I) -> Result<String, WorkspaceError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<String> = args
        .into_iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect();
    git_env(dir, &args, &[]).await
}

async fn git_env(
    dir: &Path,
    args: &[String],
    env: &[(&str, &OsStr)],
) -> Result<String, WorkspaceError> {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(dir).args(args);
    cmd.env("GIT_TERMINAL_PROMPT", "0").stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().await.map_err(|source| WorkspaceError::Spawn {
        path: dir.to_path_buf(),
        source,
    })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(WorkspaceError::Git {
            path: dir.to_path_buf(),
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(dir: &Path, args: &[&str]) {
        let ok = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }

    fn repo(dir: &Path) -> PathBuf {
        let r = dir.join("repo");
        std::fs::create_dir(&r).unwrap();
        sh(&r, &["init", "-q", "-b", "main"]);
        std::fs::write(r.join("README.md"), "hello\n").unwrap();
        std::fs::write(r.join(".gitignore"), "target/\n").unwrap();
        sh(&r, &["add", "."]);
        sh(&r, &["commit", "-q", "-m", "init"]);
        r
    }

    fn spec(path: PathBuf, base: &str) -> RepositorySpec {
        RepositorySpec {
            path: Some(path),
            url: None,
            base_ref: base.into(),
        }
    }

    #[tokio::test]
    async fn provision_patch_and_remove() {
        let tmp = tempfile::tempdir().unwrap();
        let r = repo(tmp.path());
        let jobs = tmp.path().join("jobs");
        let ws = Workspace::provision(&jobs, "job1", &spec(r, "main"), "paddock/T-1/1")
            .await
            .unwrap();
        assert!(ws.work.join("README.md").exists());
        assert_eq!(
            git(&ws.work, ["rev-parse", "--abbrev-ref", "HEAD"])
                .await
                .unwrap()
                .trim(),
            "paddock/T-1/1"
        );
        assert_eq!(
            git(&ws.work, ["config", "core.hooksPath"])
                .await
                .unwrap()
                .trim(),
            "/dev/null"
        );
        assert!(ws.write_generated("AGENTS.md", "# brief\n").await.unwrap());
        std::fs::write(ws.work.join("README.md"), "hello\nworld\n").unwrap();
        std::fs::write(ws.work.join("new.txt"), "new\n").unwrap();
        std::fs::create_dir(ws.work.join("target")).unwrap();
        std::fs::write(ws.work.join("target/out"), "ignored\n").unwrap();
        let p = ws.patch().await.unwrap();
        assert_eq!(
            p.changed_files,
            vec!["README.md".to_string(), "new.txt".to_string()]
        );
        assert!(p.diff.contains("+world"));
        assert!(p.diff.contains("+++ b/new.txt"));
        assert!(!p.diff.contains("AGENTS.md"));
        // The work tree's own index is untouched: nothing staged.
        assert_eq!(
            git(&ws.work, ["diff", "--cached", "--name-only"])
                .await
                .unwrap(),
            ""
        );
        ws.remove().unwrap();
        assert!(!ws.root.exists());
    }

    #[tokio::test]
    async fn bad_inputs_name_what_and_leave_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let r = repo(tmp.path());
        let jobs = tmp.path().join("jobs");
        let err = Workspace::provision(&jobs, "j2", &spec(r.clone(), "nope"), "b")
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "repository {}: base ref `nope` is not a commit in it",
                r.display()
            )
        );
        assert!(!jobs.join("j2").exists());
        let plain = tmp.path().join("plain");
        std::fs::create_dir(&plain).unwrap();
        let err = Workspace::provision(&jobs, "j3", &spec(plain.clone(), "main"), "b")
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("repository {}: not a git repository", plain.display())
        );
        assert!(!jobs.join("j3").exists());
    }
}

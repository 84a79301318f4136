//! Writing an [`Assembled`] context: into a job's checkout (every path
//! checked first, so that a collision with the repository's files or a
//! symbolic link on the way stops the job before anything is written; new
//! files excluded from the patch, the repository's own `AGENTS.md`/`CLAUDE.md`
//! extended and restored for the patch), or into a plain directory for
//! `paddock context`.

use std::path::{Component, Path, PathBuf};

use super::{Assembled, PROMPT_FILE};
use crate::workspace::{Workspace, WorkspaceError};

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("context: {file} already exists in the repository; Paddock does not overwrite it (rename the skill or remove the file)")]
    Collision { file: String },
    #[error("context: {file}: {component} is a symbolic link in the repository; Paddock does not write through links")]
    Symlink { file: String, component: String },
    #[error("context: {file}: cannot inspect {path}: {source}")]
    Inspect {
        file: String,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("context: not a relative path inside the checkout: {file}")]
    Path { file: String },
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    #[error("context output {dir}: the directory is not empty; give a new or empty one")]
    OutputNotEmpty { dir: PathBuf },
    #[error("context output {dir}: not a directory; give a new or empty directory")]
    OutputNotDirectory { dir: PathBuf },
    #[error("context output {dir}: {what}: {source}")]
    Output {
        dir: PathBuf,
        what: String,
        source: std::io::Error,
    },
}

/// Checks that `rel` can be created under `root`: relative, no `..`, no
/// symbolic link on the way, and (unless `may_exist`) not there yet.
fn check_target(root: &Path, rel: &str, may_exist: bool) -> Result<(), InstallError> {
    let path = Path::new(rel);
    if rel.is_empty() || !path.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(InstallError::Path {
            file: rel.to_string(),
        });
    }
    let mut here = root.to_path_buf();
    let count = path.components().count();
    for (i, c) in path.components().enumerate() {
        here.push(c);
        match std::fs::symlink_metadata(&here) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(source) => {
                return Err(InstallError::Inspect {
                    file: rel.to_string(),
                    path: here,
                    source,
                })
            }
            Ok(m) if m.file_type().is_symlink() => {
                return Err(InstallError::Symlink {
                    file: rel.to_string(),
                    component: here
                        .strip_prefix(root)
                        .unwrap_or(&here)
                        .display()
                        .to_string(),
                })
            }
            Ok(_) if i + 1 == count && !may_exist => {
                return Err(InstallError::Collision {
                    file: rel.to_string(),
                })
            }
            Ok(_) => {}
        }
    }
    Ok(())
}

/// Writes the context into the job's checkout. Every target is checked
/// before the first write.
pub async fn install(ctx: &Assembled, ws: &Workspace) -> Result<(), InstallError> {
    for f in &ctx.files {
        check_target(&ws.work, &f.path, f.extends.is_some())?;
    }
    for f in &ctx.files {
        match &f.extends {
            Some(ext) => {
                ws.extend_tracked(&f.path, &ext.original, &ext.appended)
                    .await?
            }
            None => ws.write_generated(&f.path, &f.contents).await?,
        }
    }
    Ok(())
}

/// Writes the context into `dir` (created; must be empty or absent): the
/// files at their checkout paths and the prompt as `PROMPT.md`.
pub fn write_to_dir(ctx: &Assembled, dir: &Path) -> Result<(), InstallError> {
    let out = |what: String, source| InstallError::Output {
        dir: dir.to_path_buf(),
        what,
        source,
    };
    if std::fs::symlink_metadata(dir).is_ok_and(|m| !m.is_dir()) {
        return Err(InstallError::OutputNotDirectory {
            dir: dir.to_path_buf(),
        });
    }
    if let Ok(mut rd) = std::fs::read_dir(dir) {
        if rd.next().is_some() {
            return Err(InstallError::OutputNotEmpty {
                dir: dir.to_path_buf(),
            });
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| out("cannot create it".to_string(), e))?;
    let mut all: Vec<(&str, &[u8])> = vec![(PROMPT_FILE, ctx.prompt.as_bytes())];
    all.extend(
        ctx.files
            .iter()
            .map(|f| (f.path.as_str(), f.contents.as_slice())),
    );
    for (rel, contents) in all {
        check_target(dir, rel, false)?;
        let target = dir.join(rel);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| out(format!("cannot create {}", parent.display()), e))?;
        }
        std::fs::write(&target, contents).map_err(|e| out(format!("cannot write {rel}"), e))?;
    }
    Ok(())
}

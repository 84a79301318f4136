//! Where Paddock keeps things on the host, following the XDG base directory
//! conventions: the database and artifacts under `$XDG_DATA_HOME/paddock`,
//! job workspaces under `$XDG_STATE_HOME/paddock/jobs`. Each can be set
//! explicitly (flags or `PADDOCK_*` variables), which is what tests do.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum PathsError {
    #[error("cannot find a home for Paddock's data: neither {xdg} nor HOME is set")]
    NoHome { xdg: &'static str },
}

/// The host locations one `paddock` process uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// The SQLite database file.
    pub db: PathBuf,
    /// Per-job artifacts (patch, raw engine output) that outlive the workspace.
    pub artifacts: PathBuf,
    /// Per-job workspaces, removed at the end of each job.
    pub jobs: PathBuf,
}

impl Paths {
    /// Defaults from the environment, overridden by the given values.
    pub fn resolve(
        db: Option<PathBuf>,
        data_dir: Option<PathBuf>,
        jobs_dir: Option<PathBuf>,
    ) -> Result<Paths, PathsError> {
        let data = match data_dir {
            Some(d) => d,
            None => xdg_dir("XDG_DATA_HOME", ".local/share")?.join("paddock"),
        };
        let jobs = match jobs_dir {
            Some(d) => d,
            None => xdg_dir("XDG_STATE_HOME", ".local/state")?
                .join("paddock")
                .join("jobs"),
        };
        Ok(Paths {
            db: db.unwrap_or_else(|| data.join("paddock.db")),
            artifacts: data.join("artifacts"),
            jobs,
        })
    }

    /// All locations under one directory (tests, demos).
    pub fn under(root: &Path) -> Paths {
        Paths {
            db: root.join("paddock.db"),
            artifacts: root.join("artifacts"),
            jobs: root.join("jobs"),
        }
    }
}

fn xdg_dir(var: &'static str, fallback: &str) -> Result<PathBuf, PathsError> {
    if let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) {
        let p = PathBuf::from(v);
        if p.is_absolute() {
            return Ok(p);
        }
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(fallback)),
        None => Err(PathsError::NoHome { xdg: var }),
    }
}

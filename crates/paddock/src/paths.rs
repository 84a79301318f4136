//! Where Paddock keeps things on the host (and which store it uses: a
//! `postgres://` URL in `--db` names a PostgreSQL database instead of a file), following the XDG base directory
//! conventions: the database and artifacts under `$XDG_DATA_HOME/paddock`,
//! job workspaces under `$XDG_STATE_HOME/paddock/jobs`. Each can be set
//! explicitly (flags or `PADDOCK_*` variables), which is what tests do.
//!
//! The locations are made canonical once, here: absolute, with every
//! symbolic link on the way resolved (`/home` → `/data/home` is common).
//! Everything derived from them (the sandbox's binds, the job's working
//! directory, the paths an engine is told) then names the same real
//! directory, which is the only name that exists inside a sandbox, and the
//! one an engine sees as its working directory.

use std::path::{Path, PathBuf};

use crate::store::{is_postgres_url, PgUrl, StoreAt};

#[derive(Debug, thiserror::Error)]
pub enum PathsError {
    #[error("cannot find a home for Paddock's data: neither {xdg} nor HOME is set")]
    NoHome { xdg: &'static str },
    /// `--db` (or `PADDOCK_DB`) is a `postgres://` URL that does not parse.
    #[error("--db (or PADDOCK_DB) names a PostgreSQL store")]
    StoreUrl {
        #[source]
        source: crate::store::StoreError,
    },
    #[error("cannot resolve {path}: {source}")]
    Resolve {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What named the store, where it is not the default one under the data
/// directory: `--db` or `PADDOCK_DB`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreNamedBy {
    Flag,
    Env,
}

impl std::fmt::Display for StoreNamedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StoreNamedBy::Flag => "--db",
            StoreNamedBy::Env => "PADDOCK_DB",
        })
    }
}

/// The host locations one `paddock` process uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// The store: a SQLite database file, or a PostgreSQL database.
    pub db: StoreAt,
    /// What named `db`; `None` for the default one under the data
    /// directory (a fresh install has none yet, which a command that only
    /// reads reads as empty, where one named that is not there is an
    /// error: a typo, an unmounted share).
    pub db_named_by: Option<StoreNamedBy>,
    /// Per-job artifacts (patch, raw engine output) that outlive the workspace.
    pub artifacts: PathBuf,
    /// Per-job workspaces, removed at the end of each job.
    pub jobs: PathBuf,
}

impl Paths {
    /// Defaults from the environment, overridden by the given values (the
    /// store with what named it).
    pub fn resolve(
        db: Option<(PathBuf, StoreNamedBy)>,
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
        // A location that cannot be resolved (under a file, unreadable) is
        // kept as given: the step that uses it fails naming it, and
        // `paddock doctor` reports it with a fix.
        let real = |p: PathBuf| canonical(&p).unwrap_or(p);
        let data = real(data);
        Ok(Paths {
            db_named_by: db.as_ref().map(|(_, by)| *by),
            db: match db.map(|(db, _)| db) {
                Some(db) => match db.to_str().filter(|d| is_postgres_url(d)) {
                    Some(url) => StoreAt::Postgres(
                        PgUrl::parse(url).map_err(|source| PathsError::StoreUrl { source })?,
                    ),
                    None => StoreAt::File(real(db)),
                },
                None => StoreAt::File(data.join("paddock.db")),
            },
            artifacts: data.join("artifacts"),
            jobs: real(jobs),
        })
    }

    /// All locations under one directory (tests, demos).
    pub fn under(root: &Path) -> Paths {
        Paths {
            db: StoreAt::File(root.join("paddock.db")),
            db_named_by: None,
            artifacts: root.join("artifacts"),
            jobs: root.join("jobs"),
        }
    }
}

/// `path` absolute and with every symbolic link resolved: its longest
/// existing ancestor made canonical, the rest (created later, by Paddock)
/// appended. `..` in the part that does not exist yet is refused.
pub fn canonical(path: &Path) -> Result<PathBuf, PathsError> {
    let err = |source| PathsError::Resolve {
        path: path.to_path_buf(),
        source,
    };
    let absolute = std::path::absolute(path).map_err(err)?;
    let mut rest = Vec::new();
    let mut existing = absolute.as_path();
    loop {
        match existing.canonicalize() {
            Ok(real) => {
                let mut out = real;
                for part in rest.iter().rev() {
                    out.push(part);
                }
                return Ok(out);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else {
                    return Err(err(e));
                };
                rest.push(name.to_os_string());
                existing = parent;
            }
            Err(e) => return Err(err(e)),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_is_canonical_through_links_and_not_yet_existing_parts() {
        let root = tempfile::tempdir().unwrap();
        let real = root.path().canonicalize().unwrap().join("data/home");
        std::fs::create_dir_all(&real).unwrap();
        let link = root.path().join("home");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert_eq!(
            (
                canonical(&link.join("u/.local/state/paddock/jobs")).unwrap(),
                canonical(&link).unwrap(),
                canonical(&real.join("x/../y")).is_err(),
            ),
            (real.join("u/.local/state/paddock/jobs"), real.clone(), true)
        );
    }
}

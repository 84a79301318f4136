//! A job's repository as next attempts compare them (`results::bounce`,
//! `session::branch_maker`): a prior attempt of another repository is
//! never the one a next attempt resumes or starts on. Here, below both,
//! so that neither module reaches into the other for it.

use paddock_protocol::JobSpec;

/// A spec's repository, as compared between attempts: its URL, or its
/// local path (made canonical where it still resolves, so `./repo` and
/// the same directory named another way are one).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Repository {
    Url(String),
    Path(std::path::PathBuf),
    None,
}

impl std::fmt::Display for Repository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Repository::Url(url) => write!(f, "repository {}", crate::terminal_text::line(url)),
            Repository::Path(path) => write!(
                f,
                "repository {}",
                crate::terminal_text::line(&path.display().to_string())
            ),
            Repository::None => f.write_str("no repository"),
        }
    }
}

pub(crate) fn repository(spec: &JobSpec) -> Repository {
    match (&spec.repository.url, &spec.repository.path) {
        (Some(url), _) => Repository::Url(url.clone()),
        (None, Some(path)) => {
            Repository::Path(std::fs::canonicalize(path).unwrap_or_else(|_| path.clone()))
        }
        (None, None) => Repository::None,
    }
}

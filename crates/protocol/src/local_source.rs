//! Which repository on the host a spec's source names, as git takes it,
//! and every path git may open for it: the one reading of
//! `repository.path` and a local `repository.url` that the host's checks
//! share (`JobSpec::host_references`, which a server's `allow_paths` and
//! own-places checks read, and the runner's look at the source before the
//! job exists). Before, each had its own parser and they disagreed: a
//! `file://` URL's trailing slashes, which git drops, were kept by one and
//! dropped by another, and `file:///srv/allowed/x` was checked as
//! `/srv/allowed/x` while git opened `/srv/allowed/x.git`, a link leading
//! out, or `/srv/allowed.git` for the allowed directory itself.
//!
//! Git's rules (git 2.47, `clone.c` `get_repo_path`, `path.c`
//! `enter_repo`, `connect.c` `url_is_local_not_ssh`): a URL is
//! `scheme://…` (a scheme of letters, digits, `+`, `-`, `.`), or scp-like
//! (`host:path`, a `:` before any `/`); anything else is a local path. A
//! local path is looked for as `P/.git`, `P`, `P.git/.git`, `P.git`, then,
//! as a bundle, `P.bundle`, `P`; a `file://` URL's path, its trailing
//! slashes dropped, the same but for the bundles. `repository.path` is a
//! directory Paddock clones as it is: `P/.git`, or `P` a git directory.

use std::path::{Path, PathBuf};

/// How git looks for the repository a local source names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceForm {
    /// `repository.path`: the directory itself (its `.git`, or itself a
    /// git directory).
    Directory,
    /// A `repository.url` that is a path: also `P.git`, and a bundle.
    PathUrl,
    /// A `file://` `repository.url`: also `P.git`; no bundle.
    FileUrl,
}

/// The local repository a spec's source names ([`crate::JobSpec::local_source`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalSource<'a> {
    /// `repository.path` or `repository.url`.
    pub field: &'static str,
    /// The path git starts from: a `file://` URL's without its trailing
    /// slashes, as git drops them; a path as written.
    pub path: &'a Path,
    pub form: SourceForm,
}

impl LocalSource<'_> {
    /// The names git looks for the repository under: the path, then a
    /// URL's `P.git`, then a path URL's bundle `P.bundle`.
    pub fn names(&self) -> Vec<PathBuf> {
        let with = |suffix: &str| {
            let mut p = self.path.as_os_str().to_owned();
            p.push(suffix);
            PathBuf::from(p)
        };
        let mut names = vec![self.path.to_path_buf()];
        match self.form {
            SourceForm::Directory => {}
            SourceForm::FileUrl => names.push(with(".git")),
            SourceForm::PathUrl => names.extend([with(".git"), with(".bundle")]),
        }
        names
    }

    /// Every path git may open for this source: each name, and in a
    /// directory's the `.git` (not a bundle's), each after the name it
    /// is in (`P` before `P/.git`, `P.git` before `P.git/.git`), so a
    /// check walking them in order has judged a link before it looks
    /// through it.
    pub fn tried(&self) -> Vec<PathBuf> {
        let mut names = self.names();
        let bundle = match self.form {
            SourceForm::PathUrl => names.pop(),
            SourceForm::Directory | SourceForm::FileUrl => None,
        };
        let mut tried: Vec<PathBuf> = names
            .into_iter()
            .flat_map(|name| {
                let inside = name.join(".git");
                [name, inside]
            })
            .collect();
        tried.extend(bundle);
        tried
    }
}

/// What git makes of a URL: a place elsewhere, or a path on this host
/// (with its form).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlIs<'a> {
    /// `scheme://…` but `file://`, or scp-like `host:path`.
    Remote,
    /// A local path, as git starts from it.
    Local(&'a Path, SourceForm),
}

/// What git makes of `url` (module text).
pub fn url_is(url: &str) -> UrlIs<'_> {
    if let Some(rest) = url.strip_prefix("file://") {
        // `enter_repo` drops trailing slashes, keeping a lone `/`.
        let kept = rest.trim_end_matches('/');
        let path = if kept.is_empty() && !rest.is_empty() {
            "/"
        } else {
            kept
        };
        return UrlIs::Local(Path::new(path), SourceForm::FileUrl);
    }
    let scheme = url.split_once("://").map(|(scheme, _)| scheme);
    let is_url = scheme.is_some_and(|s| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    });
    let scp_like = match (url.find(':'), url.find('/')) {
        (Some(colon), Some(slash)) => colon < slash,
        (Some(_), None) => true,
        (None, _) => false,
    };
    if is_url || scp_like {
        UrlIs::Remote
    } else {
        UrlIs::Local(Path::new(url), SourceForm::PathUrl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Git's reading of each form of URL, and the paths it may open for
    /// a local one; a `file://` URL's trailing slashes dropped as git
    /// drops them (probed against git by `paddock`'s
    /// `runner::source_here` tests).
    #[test]
    fn a_url_is_read_as_git_reads_it() {
        let got: Vec<(&str, UrlIs)> = [
            "https://example.com/r.git",
            "git+ssh://example.com/r",
            "git@example.com:r.git",
            "example.com:r",
            "file:///srv/r",
            "file:///srv/r//",
            "file:///",
            "/srv/r",
            "/srv/a:b",
            "/srv/a://b",
            "r/x",
        ]
        .into_iter()
        .map(|u| (u, url_is(u)))
        .collect();
        let local = |p: &'static str, form| UrlIs::Local(Path::new(p), form);
        assert_eq!(
            got,
            vec![
                ("https://example.com/r.git", UrlIs::Remote),
                ("git+ssh://example.com/r", UrlIs::Remote),
                ("git@example.com:r.git", UrlIs::Remote),
                ("example.com:r", UrlIs::Remote),
                ("file:///srv/r", local("/srv/r", SourceForm::FileUrl)),
                ("file:///srv/r//", local("/srv/r", SourceForm::FileUrl)),
                ("file:///", local("/", SourceForm::FileUrl)),
                ("/srv/r", local("/srv/r", SourceForm::PathUrl)),
                ("/srv/a:b", local("/srv/a:b", SourceForm::PathUrl)),
                ("/srv/a://b", local("/srv/a://b", SourceForm::PathUrl)),
                ("r/x", local("r/x", SourceForm::PathUrl)),
            ]
        );
        let tried = |field, path: &str, form| {
            LocalSource {
                field,
                path: Path::new(path),
                form,
            }
            .tried()
        };
        let paths = |ps: &[&str]| ps.iter().map(PathBuf::from).collect::<Vec<_>>();
        assert_eq!(
            [
                tried("repository.path", "/s/r", SourceForm::Directory),
                tried("repository.url", "/s/r", SourceForm::FileUrl),
                tried("repository.url", "/s/r", SourceForm::PathUrl),
            ],
            [
                paths(&["/s/r", "/s/r/.git"]),
                paths(&["/s/r", "/s/r/.git", "/s/r.git", "/s/r.git/.git"]),
                paths(&[
                    "/s/r",
                    "/s/r/.git",
                    "/s/r.git",
                    "/s/r.git/.git",
                    "/s/r.bundle"
                ]),
            ]
        );
    }
}

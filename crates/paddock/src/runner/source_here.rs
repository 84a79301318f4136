//! The job's source repository looked at before the job exists, where
//! that can be known cheaply and surely: a local one (`repository.path`,
//! or a `repository.url` that is a path or a `file://` URL) that is not
//! there or is no git repository is refused by admission (`paddock run`:
//! exit 2) and by a server's submission on its own view of the path (code
//! `repository_not_found`), naming the field and what was tried. Before,
//! the job was made, recorded, given a workspace and failed at its clone.
//! Only the file system is read (no git is run): a remote URL, and a
//! `file://` URL holding a `%` (which git decodes), are left to the clone,
//! as is anything git might still take (a file: a bundle, or a `.git`
//! file; a directory holding a `HEAD`).

use std::path::{Path, PathBuf};

use paddock_protocol::JobSpec;

/// Why the spec's source is surely no repository on this host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceMissing {
    #[error("repository.path {}: {why}", path.display())]
    Path { path: PathBuf, why: String },
    #[error("repository.url `{url}`: {why}")]
    Url { url: String, why: String },
}

/// Refuses `spec` when its local source is surely not a repository git
/// can clone here (module text); `Ok` for a remote URL.
pub fn check(spec: &JobSpec) -> Result<(), SourceMissing> {
    let repo = &spec.repository;
    if let Some(path) = &repo.path {
        return path_source(path).map_err(|why| SourceMissing::Path {
            path: path.clone(),
            why,
        });
    }
    let Some(url) = &repo.url else {
        return Ok(());
    };
    let local = match url.strip_prefix("file://") {
        // git's upload-pack takes the path without its trailing slashes
        // before it tries `.git` and `.bundle` after it.
        Some(rest) if !rest.contains('%') => match rest.trim_end_matches('/') {
            "" => Path::new("/"),
            trimmed => Path::new(trimmed),
        },
        Some(_) => return Ok(()),
        None if !url.contains(':') => Path::new(url.as_str()),
        None => return Ok(()),
    };
    url_source(local).map_err(|why| SourceMissing::Url {
        url: url.clone(),
        why,
    })
}

/// `repository.path`: a directory that is a repository's top level (a
/// work tree's, with its `.git`, or a bare repository's, with its
/// `HEAD`), as provisioning clones it.
fn path_source(path: &Path) -> Result<(), String> {
    match looked_at(path)? {
        None => return Err("no such directory".into()),
        Some(meta) if !meta.is_dir() => return Err("not a directory".into()),
        Some(_) => {}
    }
    if is_repository(path) {
        return Ok(());
    }
    Err(
        match path.ancestors().skip(1).find(|a| a.join(".git").exists()) {
            Some(top) => format!(
                "it is the directory `{}/` inside the git repository {}, not a repository's top \
             level: set repository.path to {} (a job works on the whole repository)",
                path.strip_prefix(top).unwrap_or(path).display(),
                top.display(),
                top.display()
            ),
            None => {
                "not a git repository (no `.git` in it, and no bare repository's `HEAD`)".into()
            }
        },
    )
}

/// A URL's local path, as `git clone` looks for it: the path itself, or
/// with `.git` or `.bundle` added.
fn url_source(local: &Path) -> Result<(), String> {
    let with = |suffix: &str| {
        let mut p = local.as_os_str().to_owned();
        p.push(suffix);
        PathBuf::from(p)
    };
    let (dot_git, bundle) = (with(".git"), with(".bundle"));
    if maybe_there(&dot_git) || maybe_there(&bundle) {
        return Ok(());
    }
    let Some(meta) = looked_at(local)? else {
        return Err(format!(
            "{} does not exist (nor {} or {}, which git clone also tries)",
            local.display(),
            dot_git.display(),
            bundle.display()
        ));
    };
    if meta.is_dir() && !is_repository(local) {
        return Err(format!(
            "{} is a directory but no git repository (no `.git` in it, and no bare repository's \
             `HEAD`)",
            local.display()
        ));
    }
    Ok(())
}

/// Whether `dir` may be a repository git clones: a work tree's top level
/// (`.git`, a directory or a file) or a git directory (`HEAD`). What has
/// neither surely is none.
fn is_repository(dir: &Path) -> bool {
    maybe_there(&dir.join(".git")) || maybe_there(&dir.join("HEAD"))
}

/// What `path` is (links followed), `None` when it is not there; any
/// other failure (a directory on the way this user may not search, a
/// file on the way) said with the system's error, where it read as not
/// there.
fn looked_at(path: &Path) -> Result<Option<std::fs::Metadata>, String> {
    match std::fs::metadata(path) {
        Ok(meta) => Ok(Some(meta)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot be looked at on this host ({e})")),
    }
}

/// Whether `path` may be there: itself (a link too, even dangling, as a
/// bare repository's legacy `HEAD`), or a failure other than not being
/// there, which leaves it to the clone.
fn maybe_there(path: &Path) -> bool {
    match std::fs::symlink_metadata(path) {
        Ok(_) => true,
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn spec_with(path: Option<&Path>, url: Option<&str>) -> JobSpec {
        let text = "[ticket]\nid = \"T-1\"\ntitle = \"t\"\nproject = \"p\"\n\
                    description = \"d\"\n[repository]\nurl = \"https://example.invalid/r\"\n\
                    [engine]\nkind = \"codex\"\nmodel = \"gpt-5\"\n\
                    [upstream]\nprovider = \"openai\"\nkey = \"env:OPENAI_API_KEY\"\n";
        let mut spec = JobSpec::from_toml(text, Path::new("/job.toml")).unwrap();
        spec.repository.path = path.map(Path::to_path_buf);
        spec.repository.url = url.map(str::to_owned);
        spec
    }

    /// Every local source that is surely no repository is refused with
    /// the field and what was tried; a repository (a work tree, a bare
    /// one, one named without its `.git`, a bundle) and anything not
    /// local pass.
    #[test]
    fn a_local_source_that_is_no_repository_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for made in ["work/.git", "work/sub", "bare.git/objects", "plain"] {
            std::fs::create_dir_all(d.join(made)).unwrap();
        }
        std::fs::write(d.join("bare.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(d.join("b.bundle"), "# v2 git bundle\n").unwrap();
        let shown = |p: &str| d.join(p).display().to_string();
        let cases: Vec<(Option<PathBuf>, Option<String>)> = vec![
            (Some(d.join("work")), None),
            (Some(d.join("bare.git")), None),
            (Some(d.join("none")), None),
            (Some(d.join("b.bundle")), None),
            (Some(d.join("plain")), None),
            (Some(d.join("work/sub")), None),
            (None, Some(format!("file://{}", shown("work")))),
            (None, Some(shown("bare"))),
            (None, Some(shown("b"))),
            (None, Some(format!("file://{}", shown("none")))),
            (None, Some(shown("plain"))),
            (None, Some(format!("file://{}", shown("no%20ne")))),
            (None, Some("https://example.invalid/none.git".into())),
            (None, Some("git@example.invalid:none.git".into())),
            // git takes a `file://` path without its trailing slashes.
            (None, Some(format!("file://{}//", shown("bare")))),
            // A file on the way: said as the system says it, where it
            // read as no such directory.
            (Some(d.join("b.bundle/x")), None),
        ];
        let got: Vec<Result<(), SourceMissing>> = cases
            .iter()
            .map(|(p, u)| check(&spec_with(p.as_deref(), u.as_deref())))
            .collect();
        let path = |p: &str, why: String| {
            Err(SourceMissing::Path {
                path: d.join(p),
                why,
            })
        };
        assert_eq!(
            got,
            vec![
                Ok(()),
                Ok(()),
                path("none", "no such directory".into()),
                path("b.bundle", "not a directory".into()),
                path(
                    "plain",
                    "not a git repository (no `.git` in it, and no bare repository's `HEAD`)"
                        .into()
                ),
                path(
                    "work/sub",
                    format!(
                        "it is the directory `sub/` inside the git repository {}, not a \
                         repository's top level: set repository.path to {} (a job works on the \
                         whole repository)",
                        shown("work"),
                        shown("work")
                    )
                ),
                Ok(()),
                Ok(()),
                Ok(()),
                Err(SourceMissing::Url {
                    url: format!("file://{}", shown("none")),
                    why: format!(
                        "{} does not exist (nor {}.git or {}.bundle, which git clone also tries)",
                        shown("none"),
                        shown("none"),
                        shown("none")
                    ),
                }),
                Err(SourceMissing::Url {
                    url: shown("plain"),
                    why: format!(
                        "{} is a directory but no git repository (no `.git` in it, and no bare \
                         repository's `HEAD`)",
                        shown("plain")
                    ),
                }),
                Ok(()),
                Ok(()),
                Ok(()),
                Ok(()),
                path(
                    "b.bundle/x",
                    "cannot be looked at on this host (Not a directory (os error 20))".into()
                ),
            ]
        );
    }
}

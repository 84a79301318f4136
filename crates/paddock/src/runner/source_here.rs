//! The job's source repository looked at before the job exists, where
//! that can be known cheaply and surely: a local one
//! (`JobSpec::local_source`: `repository.path`, or a `repository.url`
//! git reads as a path, `file://` or none) that is not there or is no git
//! repository is refused by admission (`paddock run`: exit 2; a server's
//! submission: code `repository_not_found`), naming the field and what
//! was tried. Before, the job was made, recorded, given a workspace and
//! failed at its clone. Only the file system is read (no git is run), at
//! the paths git may open (`LocalSource::tried`), each looked at once
//! (`Look`); anything git might still take (a file: a bundle or a `.git`
//! file; a directory holding a `HEAD`; a link) is left to the clone.
//!
//! On a server the look stays inside the directories a submitted spec may
//! name (`[serve] allow_paths`, `RunnerConfig::source_within`): a path
//! outside them is not looked at, and the advice for a directory inside a
//! work tree names the work tree's top only when it is inside them too.
//! Before, it walked every directory above the one named, up to `/`,
//! looking for a `.git`, and named the first it found: the submitter
//! learnt the server's layout outside what it may name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use paddock_protocol::{JobSpec, LocalSource, SourceForm};

/// Why the spec's source is surely no repository on this host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceMissing {
    #[error("repository.path {}: {why}", path.display())]
    Path { path: PathBuf, why: Why },
    #[error("repository.url `{url}`: {why}")]
    Url { url: String, why: Why },
}

/// What was found at the source's path, by what is to be done about it
/// (a server's advice, `NotHere::Source`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Why {
    /// Nothing there, under any name git tries.
    #[error("{0}")]
    NotThere(String),
    /// Something there that is no repository's top level (a file, a
    /// plain directory, a directory inside a work tree).
    #[error("{0}")]
    NotARepository(String),
    /// The system refused the look (this user may not search a
    /// directory on the way; a file on the way).
    #[error("{0}")]
    Refused(String),
}

impl SourceMissing {
    /// What was found.
    pub fn why(&self) -> &Why {
        match self {
            SourceMissing::Path { why, .. } | SourceMissing::Url { why, .. } => why,
        }
    }
}

/// Refuses `spec` when its local source is surely not a repository git
/// can clone here (module text); `Ok` for a remote URL. `within`: the
/// directories the look may go into (a server's `allow_paths`), `None`
/// for anywhere (`paddock run`: the user's own files).
pub fn check(spec: &JobSpec, within: Option<&[PathBuf]>) -> Result<(), SourceMissing> {
    let Some(source) = spec.local_source() else {
        return Ok(());
    };
    let mut looks = Looks {
        within,
        seen: BTreeMap::new(),
    };
    let verdict = match source.form {
        SourceForm::Directory => directory(&source, &mut looks),
        SourceForm::PathUrl | SourceForm::FileUrl => url(&source, &mut looks),
    };
    verdict.map_err(|why| match (source.form, &spec.repository.url) {
        (SourceForm::PathUrl | SourceForm::FileUrl, Some(url)) => SourceMissing::Url {
            url: url.clone(),
            why,
        },
        _ => SourceMissing::Path {
            path: source.path.to_path_buf(),
            why,
        },
    })
}

/// What one look at a path found (links followed).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Look {
    /// Surely not there: no such file, nor a link.
    Missing,
    Directory,
    /// A file, or a link that leads nowhere (a bare repository's legacy
    /// `HEAD`): there, for git to make of it what it will.
    Other,
    /// Not looked at: outside the directories the look may go into.
    Unseen,
    /// The system refused the look (a directory on the way this user may
    /// not search, a file on the way): said with its error.
    Refused(String),
}

/// The paths looked at, each once, and where the look may go.
struct Looks<'a> {
    within: Option<&'a [PathBuf]>,
    seen: BTreeMap<PathBuf, Look>,
}

impl Looks<'_> {
    /// Whether `path` is a place the look may go (lexically: the
    /// submission's check has held the path and its links to the same
    /// directories, `server::submissions`).
    fn may_see(&self, path: &Path) -> bool {
        self.within
            .is_none_or(|roots| roots.iter().any(|root| path.starts_with(root)))
    }

    /// `path` looked at, once, by the one rule.
    fn at(&mut self, path: &Path) -> Look {
        if let Some(look) = self.seen.get(path) {
            return look.clone();
        }
        let look = if !self.may_see(path) {
            Look::Unseen
        } else {
            match std::fs::metadata(path) {
                Ok(meta) if meta.is_dir() => Look::Directory,
                Ok(_) => Look::Other,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    match std::fs::symlink_metadata(path) {
                        Ok(_) => Look::Other,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Look::Missing,
                        Err(e) => Look::Refused(e.to_string()),
                    }
                }
                Err(e) => Look::Refused(e.to_string()),
            }
        };
        self.seen.insert(path.to_path_buf(), look.clone());
        look
    }

    /// Whether the directory `dir` may be a repository git clones: a work
    /// tree's top level (`.git`, a directory or a file) or a git
    /// directory (`HEAD`). What has neither surely is none; one the
    /// system refuses the look at is said so, as every refused look is.
    fn may_be_repository(&mut self, dir: &Path) -> Result<bool, Why> {
        for inside in [dir.join(".git"), dir.join("HEAD")] {
            match self.at(&inside) {
                Look::Missing => {}
                Look::Refused(e) => return Err(refused(Some(&inside), &e)),
                Look::Directory | Look::Other | Look::Unseen => return Ok(true),
            }
        }
        Ok(false)
    }
}

/// What a refused look at `path` says (the path named when it is not
/// the one the field names).
fn refused(path: Option<&Path>, error: &str) -> Why {
    let at = path
        .map(|p| format!("{}: ", p.display()))
        .unwrap_or_default();
    Why::Refused(format!("{at}cannot be looked at on this host ({error})"))
}

/// `repository.path`: a directory that is a repository's top level (a
/// work tree's, with its `.git`, or a bare repository's, with its
/// `HEAD`), as provisioning clones it.
fn directory(source: &LocalSource<'_>, looks: &mut Looks<'_>) -> Result<(), Why> {
    let path = source.path;
    match looks.at(path) {
        Look::Missing => return Err(Why::NotThere("no such directory".into())),
        Look::Other => return Err(Why::NotARepository("not a directory".into())),
        Look::Refused(e) => return Err(refused(None, &e)),
        Look::Unseen => return Ok(()),
        Look::Directory => {}
    }
    if looks.may_be_repository(path)? {
        return Ok(());
    }
    // The work tree it is in, looked for only where the look may go.
    let above: Vec<&Path> = path
        .ancestors()
        .skip(1)
        .take_while(|a| looks.may_see(a))
        .collect();
    let top = above
        .into_iter()
        .find(|a| matches!(looks.at(&a.join(".git")), Look::Directory | Look::Other));
    Err(Why::NotARepository(match top {
        Some(top) => format!(
            "it is the directory `{}/` inside the git repository {}, not a repository's top \
             level: set repository.path to {} (a job works on the whole repository)",
            path.strip_prefix(top).unwrap_or(path).display(),
            top.display(),
            top.display()
        ),
        None => "not a git repository (no `.git` in it, and no bare repository's `HEAD`)".into(),
    }))
}

/// A URL's local path, as git looks for it (`LocalSource::tried`): the
/// path itself, or with `.git` added, or a bundle (a path URL's).
fn url(source: &LocalSource<'_>, looks: &mut Looks<'_>) -> Result<(), Why> {
    let path = source.path;
    // `P.git`, and a path URL's `P.bundle`: git's other names for it.
    let others: Vec<PathBuf> = source.names().into_iter().skip(1).collect();
    for other in &others {
        match looks.at(other) {
            Look::Missing => {}
            Look::Refused(e) => return Err(refused(Some(other), &e)),
            Look::Directory | Look::Other | Look::Unseen => return Ok(()),
        }
    }
    let also = others
        .iter()
        .map(|o| o.display().to_string())
        .collect::<Vec<_>>()
        .join(" or ");
    match looks.at(path) {
        Look::Missing => Err(Why::NotThere(format!(
            "{} does not exist (nor {also}, which git clone also tries)",
            path.display(),
        ))),
        Look::Refused(e) => Err(refused(Some(path), &e)),
        Look::Directory if !looks.may_be_repository(path)? => Err(Why::NotARepository(format!(
            "{} is a directory but no git repository (no `.git` in it, and no bare repository's \
             `HEAD`)",
            path.display()
        ))),
        Look::Directory | Look::Other | Look::Unseen => Ok(()),
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
    /// one, one named without its `.git`, a bundle by path) and anything
    /// not local pass.
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
            (None, Some("https://example.invalid/none.git".into())),
            (None, Some("git@example.invalid:none.git".into())),
            // git takes a `file://` path without its trailing slashes.
            (None, Some(format!("file://{}//", shown("bare")))),
            // A file on the way: said as the system says it, where it
            // read as no such directory.
            (Some(d.join("b.bundle/x")), None),
            // git takes no bundle from a `file://` URL.
            (None, Some(format!("file://{}", shown("b")))),
        ];
        let got: Vec<Result<(), SourceMissing>> = cases
            .iter()
            .map(|(p, u)| check(&spec_with(p.as_deref(), u.as_deref()), None))
            .collect();
        let path = |p: &str, why: Why| {
            Err(SourceMissing::Path {
                path: d.join(p),
                why,
            })
        };
        let url = |u: String, why: Why| Err(SourceMissing::Url { url: u, why });
        assert_eq!(
            got,
            vec![
                Ok(()),
                Ok(()),
                path("none", Why::NotThere("no such directory".into())),
                path("b.bundle", Why::NotARepository("not a directory".into())),
                path(
                    "plain",
                    Why::NotARepository(
                        "not a git repository (no `.git` in it, and no bare repository's `HEAD`)"
                            .into()
                    )
                ),
                path(
                    "work/sub",
                    Why::NotARepository(format!(
                        "it is the directory `sub/` inside the git repository {}, not a \
                         repository's top level: set repository.path to {} (a job works on the \
                         whole repository)",
                        shown("work"),
                        shown("work")
                    ))
                ),
                Ok(()),
                Ok(()),
                Ok(()),
                url(
                    format!("file://{}", shown("none")),
                    Why::NotThere(format!(
                        "{} does not exist (nor {}.git, which git clone also tries)",
                        shown("none"),
                        shown("none"),
                    ))
                ),
                url(
                    shown("plain"),
                    Why::NotARepository(format!(
                        "{} is a directory but no git repository (no `.git` in it, and no bare \
                         repository's `HEAD`)",
                        shown("plain")
                    ))
                ),
                Ok(()),
                Ok(()),
                Ok(()),
                path(
                    "b.bundle/x",
                    Why::Refused(
                        "cannot be looked at on this host (Not a directory (os error 20))".into()
                    )
                ),
                url(
                    format!("file://{}", shown("b")),
                    Why::NotThere(format!(
                        "{} does not exist (nor {}.git, which git clone also tries)",
                        shown("b"),
                        shown("b"),
                    ))
                ),
            ]
        );
    }

    /// The probe: a source named in every way git reads as the same path
    /// (trailing slashes, `file://localhost/`) gets one verdict, here and
    /// in what a server's `allow_paths` check reads (`host_references`):
    /// the source `/…/x` whose repository is `x.git`. Before, the
    /// trailing slashes were dropped here and kept there (the server's
    /// check judged `/…/x/`, git opened `/…/x.git`). A path URL git takes
    /// as written, its trailing slash kept.
    #[test]
    fn a_source_named_as_git_reads_it_gets_one_verdict() {
        let dir = tempfile::tempdir().unwrap();
        let x = dir.path().join("x");
        std::fs::create_dir_all(dir.path().join("x.git/objects")).unwrap();
        std::fs::write(dir.path().join("x.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        let shown = x.display().to_string();
        let urls = [
            format!("file://{shown}"),
            format!("file://{shown}/"),
            format!("file://{shown}//"),
            format!("file://localhost{shown}/"),
        ];
        let got: Vec<(Result<(), SourceMissing>, Vec<PathBuf>)> = urls
            .iter()
            .map(|u| {
                let text = format!(
                    "[ticket]\nid = \"T-1\"\ntitle = \"t\"\nproject = \"p\"\n\
                     description = \"d\"\n[repository]\nurl = \"{u}\"\n\
                     [engine]\nkind = \"codex\"\nmodel = \"gpt-5\"\n\
                     [upstream]\nprovider = \"openai\"\nkey = \"env:OPENAI_API_KEY\"\n"
                );
                let spec = JobSpec::from_toml(&text, Path::new("/job.toml")).unwrap();
                let read: Vec<PathBuf> = spec
                    .host_references()
                    .into_iter()
                    .filter_map(|r| match r {
                        paddock_protocol::HostReference::Source(s) => Some(s.tried()),
                        _ => None,
                    })
                    .flatten()
                    .collect();
                (check(&spec, None), read)
            })
            .collect();
        let tried: Vec<PathBuf> = ["", "/.git", ".git", ".git/.git"]
            .iter()
            .map(|s| PathBuf::from(format!("{shown}{s}")))
            .collect();
        assert_eq!(got, vec![(Ok(()), tried); 4]);
        // A path URL git takes as written: with a trailing slash it is
        // the directory `x/`, which is not there (git: "does not exist").
        let with_slash = format!("{shown}/");
        assert_eq!(
            check(&spec_with(None, Some(&with_slash)), None),
            Err(SourceMissing::Url {
                url: with_slash.clone(),
                why: Why::NotThere(format!(
                    "{with_slash} does not exist (nor {with_slash}.git or {with_slash}.bundle, \
                     which git clone also tries)"
                )),
            })
        );
    }

    /// The probe: on a server, whose look stays inside its allowed
    /// directories, a directory inside a work tree whose top is outside
    /// them is said to be no repository, the top neither looked for nor
    /// named; inside them the top is named as for `paddock run`. Before,
    /// every directory above it up to `/` was looked at and the first
    /// holding a `.git` named, whatever the server allowed.
    #[test]
    fn on_a_server_nothing_outside_the_allowed_directories_is_looked_at() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        std::fs::create_dir_all(top.join(".git")).unwrap();
        std::fs::create_dir_all(top.join("allowed/sub")).unwrap();
        std::fs::create_dir_all(top.join("allowed/repo/.git")).unwrap();
        std::fs::create_dir_all(top.join("allowed/repo/inner")).unwrap();
        let allowed = [top.join("allowed")];
        let got: Vec<Result<(), SourceMissing>> = ["allowed/sub", "allowed/repo/inner"]
            .iter()
            .flat_map(|p| {
                let spec = spec_with(Some(&top.join(p)), None);
                [check(&spec, Some(&allowed)), check(&spec, None)]
            })
            .collect();
        let inside = |p: &str, top: &Path| {
            Err(SourceMissing::Path {
                path: dir.path().join(p),
                why: Why::NotARepository(format!(
                    "it is the directory `{}/` inside the git repository {}, not a \
                     repository's top level: set repository.path to {} (a job works on the \
                     whole repository)",
                    dir.path().join(p).strip_prefix(top).unwrap().display(),
                    top.display(),
                    top.display()
                )),
            })
        };
        assert_eq!(
            got,
            vec![
                Err(SourceMissing::Path {
                    path: top.join("allowed/sub"),
                    why: Why::NotARepository(
                        "not a git repository (no `.git` in it, and no bare repository's `HEAD`)"
                            .into()
                    ),
                }),
                inside("allowed/sub", top),
                inside("allowed/repo/inner", &top.join("allowed/repo")),
                inside("allowed/repo/inner", &top.join("allowed/repo")),
            ]
        );
    }
}

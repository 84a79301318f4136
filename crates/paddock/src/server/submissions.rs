//! What a job spec submitted over the API may name on the server's host.
//! A spec from the user at a terminal names what is theirs: their files,
//! their keys, wherever they send them. A spec submitted to `paddock
//! serve` comes from whoever holds a `submit` token, and every file it
//! names is read by the server, every `env:`/`file:` reference resolved
//! by the server, every URL it gives for a credential sent the server's
//! credential: without a check, a `submit` token reads any file the
//! server can (`upstream.key = "file:/etc/…"` with `upstream.base_url`
//! pointing at the submitter's own host receives it as a bearer token)
//! and sends the server's keys anywhere. So a submitted spec may name
//! (`JobSpec::host_references`) only what the server's operator allows:
//! secret references listed exactly (`[serve] allow_refs`), paths under
//! the directories listed (`allow_paths`; `..` and links leading out are
//! refused), and URLs the server connects to for it (its upstream, its
//! source, a forge, a push, its webhook), credentials with them, whose
//! host is listed (`allow_hosts`; without a `base_url` the provider's own
//! endpoint needs no listing). Nothing is allowed by default. The server's own paths
//! (a turn's inline source) are not the submitter's and are not checked.
//! A host profile is what the operator holds jobs to, and a preset or
//! another stored profile may be wider (no network maximum): a spec may
//! name the server's default profile, and any other stored profile,
//! preset or profile file only when listed as it names it
//! (`allow_profiles`): a file under an allowed directory is still the
//! submitter's policy.
//! Nor may a submitted spec ask for the `process` rung unless the
//! operator allows it (`allow_process`, or the config file's `isolation`
//! is `process`): there the job runs as the server's user, and every
//! file, key and host the check keeps from the spec is the job's to
//! take. `auto` (the default) stays the operator's: the configured
//! `isolation`, else the sandbox where the host can start one, else
//! `process` (a host without a sandbox, e.g. a container, is the
//! operator's choice of isolation).
//! Nor may it set `results.allow_ci_changes` unless the operator allows
//! it (`allow_ci_changes`): its result, pushed into the project's
//! repository, would have the forge run the CI definitions the job wrote,
//! with the repository's CI secrets.
//! The same check runs again on the server that claims a queued job
//! (`server::queue`), against that server's own settings: a fleet's
//! servers may allow different things, and a path means its own host's
//! file.

use std::path::{Component, Path, PathBuf};

use paddock_protocol::{AmbientCredentials, HostReference, Isolation, JobSpec, LocalSource};

/// The operator's allowances (`ServeConfig::submissions`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Submissions {
    /// Secret references (`env:NAME`, `file:PATH`), each exactly as a
    /// spec writes it.
    pub refs: Vec<String>,
    /// Directories under which a submitted spec may name files.
    pub paths: Vec<PathBuf>,
    /// Host names a URL that carries a host secret may point at.
    pub hosts: Vec<String>,
    /// Host profiles (stored ids, presets) a submitted spec may choose
    /// (`[serve] allow_profiles`), besides `default_profile`.
    pub profiles: Vec<String>,
    /// The profile the server gives a spec that names none (the config
    /// file's `host_profile`, else its `profile`): a spec may always name
    /// it, as written there (an id or a file).
    pub default_profile: Option<String>,
    /// Whether a spec may ask for the `process` rung (`[serve]
    /// allow_process`).
    pub process: bool,
    /// Whether a spec may set `results.allow_ci_changes` (`[serve]
    /// allow_ci_changes`).
    pub ci_changes: bool,
    /// The server's own places (its jobs directory, its artifacts, its
    /// SQLite file), never a submitted spec's to name even under an
    /// allowed directory: every job's workspace, source mirror, patch and
    /// output is there, other submitters' and hostile jobs' alike. Set by
    /// the server (`AppState::new`).
    pub server_own: Vec<PathBuf>,
}

/// Why a submitted spec was refused: the field, what it names and the
/// setting that would allow it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubmissionError {
    #[error(
        "{field}: `{reference}` names a secret of this server, which a submitted spec may name \
         only when the server allows it (`[serve] allow_refs` or `paddock serve --allow-ref \
         {reference}`)"
    )]
    Ref { field: String, reference: String },
    #[error(
        "{field}: {path} is a path on this server outside the directories a submitted spec may \
         name ({allowed}); the server allows a directory with `[serve] allow_paths` or \
         `paddock serve --allow-path DIR`"
    )]
    Path {
        field: String,
        path: PathBuf,
        allowed: String,
    },
    #[error(
        "{field}: git, given {path}, also opens {tried} when it is there, a path on this server \
         outside the directories a submitted spec may name ({allowed}) or a link leading out of \
         them; the server allows a directory with `[serve] allow_paths` or `paddock serve \
         --allow-path DIR`"
    )]
    Tried {
        field: String,
        path: PathBuf,
        tried: PathBuf,
        allowed: String,
    },
    #[error(
        "{field}: `{url}` is a place this server would connect to (with its credentials, where \
         the spec names one), and {host} is not a host a submitted spec may have it connect to; \
         the server allows a host with `[serve] allow_hosts` or `paddock serve --allow-host {host}`"
    )]
    Host {
        field: String,
        url: String,
        host: String,
    },
    #[error(
        "policy.profile: `{profile}` is a host profile this server does not let a submitted spec \
         choose (it allows {allowed}); the server allows one with `[serve] allow_profiles` or \
         `paddock serve --allow-profile {profile}`"
    )]
    Profile { profile: String, allowed: String },
    #[error(
        "{field}: none given, so this server would use its own cloud credentials \
         (`{reference}`), which a submitted spec may use only when the server allows it \
         (`[serve] allow_refs` or `paddock serve --allow-ref {reference}`)"
    )]
    Ambient { field: String, reference: String },
    #[error(
        "{field}: this server would reach it with its own git credentials (its user's credential \
         helpers, `~/.netrc`, SSH keys and agent: `git:credentials`), which a submitted spec may \
         use only when the server allows it (`[serve] allow_refs` or `paddock serve --allow-ref \
         git:credentials`); give `repository.token` for an HTTPS source (or a key of the spec's \
         for an SSH push)"
    )]
    GitCredentials { field: String },
    #[error(
        "{field}: {path} is one of this server's own places ({own}: every job's workspace, \
         output and record is there), which a submitted spec may not name even under an \
         allowed directory"
    )]
    ServerOwn {
        field: String,
        path: PathBuf,
        own: PathBuf,
    },
    #[error("{field}: `{url}` has no host this server could check against `[serve] allow_hosts`")]
    NoHost { field: String, url: String },
    #[error(
        "isolation: a submitted spec may not ask for the `process` rung, which runs the job as \
         this server's user with its files, keys and network, unless the server allows it \
         (`[serve] allow_process = true` or `paddock serve --allow-process`); leave `isolation` \
         out (or `auto`) or ask for `sandbox`"
    )]
    Process,
    #[error(
        "results.allow_ci_changes: a submitted spec may not have its result pushed when it \
         changes a CI definition (`.github/workflows/`, `.gitlab-ci.yml`, …), which the forge \
         runs at the push with the repository's CI secrets, unless the server allows it \
         (`[serve] allow_ci_changes = true` or `paddock serve --allow-ci-changes`); leave it \
         out, and such a result is kept, not pushed"
    )]
    CiChanges,
}

impl Submissions {
    /// Checks what `spec` (as submitted, before the server's defaults)
    /// names on this host; `own` is a path the server made for it (a
    /// turn's inline source), not checked.
    pub fn check(&self, spec: &JobSpec, own: Option<&Path>) -> Result<(), SubmissionError> {
        if spec.isolation == Isolation::Process && !self.process {
            return Err(SubmissionError::Process);
        }
        if spec.results.allow_ci_changes && !self.ci_changes {
            return Err(SubmissionError::CiChanges);
        }
        // The server's default profile, whatever it names; another stored
        // profile, preset or profile file only when listed as it is named:
        // a profile file anywhere (one under an allowed directory too) is
        // a policy of the submitter's, which could open the deny list,
        // allow any destination and send a server secret to its own host.
        let profile = spec.policy.profile.as_deref();
        let default = profile.is_some() && profile == self.default_profile.as_deref();
        let listed = profile.is_some_and(|n| self.profiles.iter().any(|p| p == n));
        if let Some(name) = profile.filter(|_| !default && !listed) {
            return Err(SubmissionError::Profile {
                profile: name.to_owned(),
                allowed: self.profiles_allowed(),
            });
        }
        for reference in spec.host_references() {
            match reference {
                HostReference::Path { field, path } => {
                    if own.is_some_and(|o| o == path) || field == "policy.profile" {
                        continue;
                    }
                    self.check_path(field, path)?;
                }
                HostReference::Source(source) => {
                    if own.is_some_and(|o| o == source.path) {
                        continue;
                    }
                    self.check_source(&source)?;
                }
                HostReference::Secret { field, key } => {
                    let text = key.to_string();
                    if !self.refs.contains(&text) {
                        return Err(SubmissionError::Ref {
                            field: field.to_owned(),
                            reference: text,
                        });
                    }
                }
                HostReference::Destination { field, url } => self.check_url(field, url)?,
                HostReference::Ambient { field, source } => {
                    let text = source.to_string();
                    if !self.refs.contains(&text) {
                        return Err(match source {
                            AmbientCredentials::Git => SubmissionError::GitCredentials {
                                field: field.to_owned(),
                            },
                            AmbientCredentials::GoogleDefault
                            | AmbientCredentials::AwsChain
                            | AmbientCredentials::AwsProfile(_) => SubmissionError::Ambient {
                                field: field.to_owned(),
                                reference: text,
                            },
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// What `profiles_allowed` names in a refusal: the default profile
    /// and the listed ones, or none.
    fn profiles_allowed(&self) -> String {
        let mut named: Vec<String> = Vec::new();
        if let Some(d) = &self.default_profile {
            named.push(format!("its default profile `{d}`"));
        }
        named.extend(self.profiles.iter().map(|p| format!("`{p}`")));
        if named.is_empty() {
            "none".to_owned()
        } else {
            named.join(", ")
        }
    }

    /// What `allowed` names in a refusal: the allowed directories, or
    /// none.
    fn paths_allowed(&self) -> String {
        if self.paths.is_empty() {
            "none".to_owned()
        } else {
            self.paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        }
    }

    /// The local source: every path git may open for it
    /// (`LocalSource::tried`: `P`, `P/.git`, `P.git`, …), each held to
    /// the directories as a path is, in that order, so a link is judged
    /// before anything is looked at through it. Before, only `P` was
    /// (with a `file://` URL's trailing slashes kept, which git drops):
    /// `file:///srv/allowed/x` passed while git cloned
    /// `/srv/allowed/x.git`, a link leading out, and the allowed
    /// directory itself passed while git cloned its sibling
    /// `/srv/allowed.git`.
    fn check_source(&self, source: &LocalSource<'_>) -> Result<(), SubmissionError> {
        for tried in source.tried() {
            match self.check_path(source.field, &tried) {
                Err(SubmissionError::Path { field, allowed, .. }) if tried != source.path => {
                    return Err(SubmissionError::Tried {
                        field,
                        path: source.path.to_path_buf(),
                        tried,
                        allowed,
                    })
                }
                checked => checked?,
            }
        }
        Ok(())
    }

    fn check_path(&self, field: &str, path: &Path) -> Result<(), SubmissionError> {
        let refused = || SubmissionError::Path {
            field: field.to_owned(),
            path: path.to_path_buf(),
            allowed: self.paths_allowed(),
        };
        // Lexically: absolute, no `..`; then as the file system resolves
        // it (a link inside an allowed directory leading out), where it
        // exists.
        if !path.is_absolute() || path.components().any(|c| c == Component::ParentDir) {
            return Err(refused());
        }
        let resolved = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let inside = |p: &Path| {
            self.paths.iter().any(|root| {
                let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.clone());
                p.starts_with(&root)
            })
        };
        if !(inside(path) && inside(&resolved)) {
            return Err(refused());
        }
        // Not the server's own, lexically or resolved (a path through a
        // link).
        for own in &self.server_own {
            let canonical = std::fs::canonicalize(own).unwrap_or_else(|_| own.clone());
            let under = |p: &Path| p.starts_with(own) || p.starts_with(&canonical);
            if under(path) || under(&resolved) {
                return Err(SubmissionError::ServerOwn {
                    field: field.to_owned(),
                    path: path.to_path_buf(),
                    own: own.clone(),
                });
            }
        }
        Ok(())
    }

    /// Whether this server may connect to `url` for a submitted spec's
    /// `field`: its host is one of `hosts`.
    pub fn check_url(&self, field: &str, url: &str) -> Result<(), SubmissionError> {
        let host = if url.contains("://") {
            reqwest::Url::parse(url)
                .ok()
                .and_then(|u| u.host_str().map(str::to_owned))
        } else {
            // scp-like `user@host:path`.
            url.split(':')
                .next()
                .map(|a| a.rsplit('@').next().unwrap_or(a).to_owned())
        };
        let host = host
            .map(|h| h.trim_end_matches('.').to_ascii_lowercase())
            .filter(|h| !h.is_empty());
        let Some(host) = host else {
            return Err(SubmissionError::NoHost {
                field: field.to_owned(),
                url: url.to_owned(),
            });
        };
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if self.hosts.iter().any(|h| {
            h.trim_end_matches('.').eq_ignore_ascii_case(bare) || h.eq_ignore_ascii_case(&host)
        }) {
            Ok(())
        } else {
            Err(SubmissionError::Host {
                field: field.to_owned(),
                url: url.to_owned(),
                host,
            })
        }
    }
}

#[cfg(test)]
mod tests;

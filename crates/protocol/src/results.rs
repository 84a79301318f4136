//! `[results]` of a job spec: where the job's result goes once it ends.
//! Without it the branch is fetched into a local source and the pull
//! request body and closeout are written to the job's outbox; with
//! `[results.github]` a pull request is opened (or updated) on GitHub and
//! the closeout posted on it. Paddock never merges. Documented in
//! `docs/results.md`.

use serde::{Deserialize, Serialize};

use crate::spec::KeyRef;

/// `[results]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultsSpec {
    /// Open the pull request as a draft (the default).
    #[serde(default = "yes")]
    pub draft: bool,
    /// Labels put on the pull request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// The ticket's page, linked from the pull request and the closeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket_url: Option<String>,
    /// The branch the pull request asks to merge into (default: the
    /// repository's `base_ref` without a leading `origin/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_branch: Option<String>,
    /// `[results.github]`: the forge. Absent: the file outbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github: Option<GitHubSpec>,
    /// `[results.gitlab]`: the forge is GitLab (merge requests). At most
    /// one of `github` and `gitlab`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gitlab: Option<GitLabSpec>,
    /// `[results.push]`: a git remote the branch is pushed to with a plain
    /// token or an SSH deploy key held on the host (instead of
    /// `results.github`'s push; with the outbox when there is no forge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push: Option<PushSpec>,
    /// Where `paddock serve` POSTs this job's final record, signed with
    /// the server's webhook secret (besides the server's own URL): an
    /// `http://` or `https://` URL with a host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_url: Option<String>,
    /// Whether the result may be pushed (and proposed) when it adds,
    /// changes, deletes or renames a CI definition (`.github/workflows/`,
    /// `.gitlab-ci.yml`, …): the forge runs such a file at the push, with
    /// the repository's CI secrets, before anyone reviews it. Default
    /// `false`: such a result is kept, not published. A server lets a
    /// submitted spec set it only when its operator allows it (`[serve]
    /// allow_ci_changes`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_ci_changes: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Why `url` is not a ticket URL: an absolute `http://` or `https://` URL
/// with a host, of printable ASCII, holding none of the characters
/// RFC 3986 keeps out of a URL and Markdown reads (a space, `"`, `<`,
/// `>`, `\`, `^`, `` ` ``, `{`, `|`, `}`). It is written into the pull
/// request's body and the closeout on the forge as an autolink (`<URL>`),
/// which such a URL cannot end early: a line break in it started a line of
/// its own there (a GitLab quick action such as `/merge`, run with the
/// bot's token; a mention; a forged section; an HTML comment hiding the
/// rest). A non-ASCII character is written percent-encoded. The reason
/// quotes the URL (the spec's errors escape what is not plain text).
pub fn check_ticket_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| format!("`{url}` must start with http:// or https://"))?;
    if let Some(c) = url.chars().find(|c| !c.is_ascii_graphic()) {
        return Err(format!(
            "`{url}` holds U+{:04X}: a ticket URL is printable ASCII without spaces \
             (percent-encode the rest)",
            u32::from(c)
        ));
    }
    if let Some(c) = url.chars().find(|c| TICKET_URL_REFUSED.contains(*c)) {
        return Err(format!(
            "`{url}` holds {c:?}: a ticket URL holds none of {TICKET_URL_REFUSED_SHOWN} \
             (percent-encode them)"
        ));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.is_empty() || authority.starts_with(':') {
        return Err(format!("`{url}` has no host"));
    }
    Ok(())
}

/// The printable ASCII characters a ticket URL may not hold
/// ([`check_ticket_url`]).
const TICKET_URL_REFUSED: &str = "\"<>\\^`{|}";
/// [`TICKET_URL_REFUSED`] as its refusal names them.
const TICKET_URL_REFUSED_SHOWN: &str = "`\"`, `<`, `>`, `\\`, `^`, `` ` ``, `{`, `|` and `}`";

/// Why `url` is not a webhook URL: `http://` or `https://`, a host, no
/// spaces or control characters.
pub fn check_webhook_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| format!("`{url}` must start with http:// or https://"))?;
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "`{url}` must not contain spaces or control characters"
        ));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    if host.is_empty() || host.starts_with(':') {
        return Err(format!("`{url}` has no host"));
    }
    Ok(())
}

/// `[results.push]`: where the branch goes and the one credential
/// Paddock (never the job) pushes it with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PushSpec {
    /// `https://…` (with `token`), `ssh://…` (with `ssh_key`), `file://…`
    /// or loopback `http://…` (tests).
    pub url: String,
    /// A token sent as HTTP basic `x-access-token:TOKEN`, as `env:NAME` or
    /// `file:PATH`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<KeyRef>,
    /// An SSH deploy key (OpenSSH private key), as `env:NAME` or `file:PATH`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_key: Option<KeyRef>,
    /// The `known_hosts` file the SSH host key is checked against (needed
    /// with `ssh_key`: an unknown host is refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known_hosts: Option<std::path::PathBuf>,
}

/// The credential a [`PushSpec`] names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PushCredential<'a> {
    /// None (a `file://` remote).
    None,
    Token(&'a KeyRef),
    SshKey {
        key: &'a KeyRef,
        known_hosts: &'a std::path::Path,
    },
}

impl PushSpec {
    /// The one credential this section names, or why it does not fit its URL.
    pub fn credential(&self) -> Result<PushCredential<'_>, String> {
        let ssh = self.url.starts_with("ssh://");
        match (&self.token, &self.ssh_key, &self.known_hosts) {
            (Some(_), Some(_), _) => Err("set `token` or `ssh_key`, not both".into()),
            (None, Some(_), None) => Err("`ssh_key` needs `known_hosts`".into()),
            (None, Some(key), Some(known_hosts)) if ssh => {
                Ok(PushCredential::SshKey { key, known_hosts })
            }
            (None, Some(_), Some(_)) => Err("`ssh_key` needs an `ssh://` url".into()),
            (_, None, _) if ssh => Err("an `ssh://` url needs `ssh_key`".into()),
            (Some(token), None, _) => Ok(PushCredential::Token(token)),
            (None, None, _) => Ok(PushCredential::None),
        }
    }

    /// Every key reference (Paddock withdraws `env:` ones at start).
    pub fn keys(&self) -> impl Iterator<Item = &KeyRef> {
        self.token.iter().chain(self.ssh_key.iter())
    }
}

fn yes() -> bool {
    true
}

impl Default for ResultsSpec {
    fn default() -> Self {
        ResultsSpec {
            draft: true,
            labels: Vec::new(),
            ticket_url: None,
            base_branch: None,
            github: None,
            gitlab: None,
            push: None,
            webhook_url: None,
            allow_ci_changes: false,
        }
    }
}

impl ResultsSpec {
    pub fn is_default(&self) -> bool {
        *self == ResultsSpec::default()
    }
}

/// `[results.github]`: a GitHub repository and the credential Paddock
/// (never the job) uses for it: a token, or a GitHub App that mints one
/// per job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitHubSpec {
    /// `owner/name`.
    pub repository: String,
    /// A token with `contents` and `pull_requests` write on that
    /// repository, as `env:NAME` or `file:PATH`. Exactly one of `token`
    /// and `app`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<KeyRef>,
    /// `[results.github.app]`: a GitHub App installation; each job gets
    /// its own installation token, scoped to this one repository and to
    /// `contents` and `pull_requests` write, revoked when the job's
    /// results are published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<GitHubAppSpec>,
    /// The REST API's root (GitHub Enterprise: `https://HOST/api/v3`).
    #[serde(default = "default_api_url")]
    pub api_url: String,
    /// Where the branch is pushed (default:
    /// `https://github.com/OWNER/NAME.git`; `file://` and other URLs are
    /// taken as they are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_url: Option<String>,
}

/// `[results.github.app]`: the App and the installation whose tokens
/// Paddock mints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitHubAppSpec {
    /// The App's id (its settings page, "App ID").
    pub id: u64,
    /// The installation on the repository's owner.
    pub installation_id: u64,
    /// The App's private key (PEM), as `env:NAME` or `file:PATH`.
    pub private_key: KeyRef,
}

/// The credential a [`GitHubSpec`] names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GitHubCredential<'a> {
    Token(&'a KeyRef),
    App(&'a GitHubAppSpec),
}

fn default_api_url() -> String {
    "https://api.github.com".to_string()
}

impl GitHubSpec {
    /// `(owner, name)` of `repository`, or why it is not `owner/name`.
    pub fn owner_and_name(&self) -> Result<(&str, &str), String> {
        let valid = |s: &str| {
            !s.is_empty()
                && !s.starts_with('.')
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        match self.repository.split_once('/') {
            Some((owner, name)) if valid(owner) && valid(name) => Ok((owner, name)),
            _ => Err(format!(
                "`{}` must be `owner/name` (letters, digits, `-`, `_`, `.`)",
                self.repository
            )),
        }
    }

    /// The one credential this section names, or why it names none or two.
    pub fn credential(&self) -> Result<GitHubCredential<'_>, String> {
        match (&self.token, &self.app) {
            (Some(token), None) => Ok(GitHubCredential::Token(token)),
            (None, Some(app)) if app.id == 0 || app.installation_id == 0 => {
                Err("`app.id` and `app.installation_id` must be GitHub's ids (not 0)".into())
            }
            (None, Some(app)) => Ok(GitHubCredential::App(app)),
            (Some(_), Some(_)) => Err("set `token` or `app`, not both".into()),
            (None, None) => {
                Err("needs `token` (env:NAME or file:PATH) or `[results.github.app]`".into())
            }
        }
    }

    /// Where the branch is pushed.
    pub fn push_url(&self) -> String {
        self.push_url
            .clone()
            .unwrap_or_else(|| format!("https://github.com/{}.git", self.repository))
    }
}

/// `[results.gitlab]`: a GitLab project and the token Paddock (never the
/// job) uses for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitLabSpec {
    /// The project: its path (`group/sub/name`) or its numeric id.
    pub project: String,
    /// The host-held token, as `env:NAME` or `file:PATH`: a Maintainer's
    /// with `api`, which only mints and revokes each job's project access
    /// token (that one pushes, as HTTP basic `oauth2:TOKEN`, and makes the
    /// merge request calls, as `PRIVATE-TOKEN`).
    pub token: KeyRef,
    /// The REST API's root (self-managed: `https://HOST/api/v4`).
    #[serde(default = "default_gitlab_api_url")]
    pub api_url: String,
    /// Where the branch is pushed (default: `https://HOST/PROJECT.git`
    /// from `api_url` and a project path; needed with a numeric id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_url: Option<String>,
}

fn default_gitlab_api_url() -> String {
    "https://gitlab.com/api/v4".to_string()
}

impl GitLabSpec {
    /// Why `project` is neither a numeric id nor a `group/name` path.
    pub fn check_project(&self) -> Result<(), String> {
        let p = &self.project;
        if !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()) {
            return Ok(());
        }
        let valid = |s: &str| {
            !s.is_empty()
                && !s.starts_with('.')
                && !s.ends_with(".git")
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        let parts: Vec<&str> = p.split('/').collect();
        if parts.len() >= 2 && parts.iter().all(|s| valid(s)) {
            return Ok(());
        }
        Err(format!(
            "`{p}` must be a project id (digits) or a path `group/name` (letters, digits, `-`, `_`, `.`)"
        ))
    }

    /// Where the branch is pushed, or why there is no default.
    pub fn push_url(&self) -> Result<String, String> {
        if let Some(url) = &self.push_url {
            return Ok(url.clone());
        }
        if self.project.chars().all(|c| c.is_ascii_digit()) {
            return Err("a numeric `project` id needs `push_url`".into());
        }
        let root = self.api_url.trim_end_matches('/');
        let root = root.strip_suffix("/api/v4").ok_or_else(|| {
            format!("`api_url` `{root}` does not end in `/api/v4`: set `push_url`")
        })?;
        Ok(format!("{root}/{}.git", self.project))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_github_section_parses_with_its_defaults() {
        let spec: ResultsSpec = toml::from_str(
            "labels = [\"paddock\"]\n[github]\nrepository = \"acme/widgets\"\ntoken = \"env:GH_TOKEN\"\n",
        )
        .unwrap();
        assert_eq!(
            spec,
            ResultsSpec {
                draft: true,
                labels: vec!["paddock".into()],
                ticket_url: None,
                base_branch: None,
                github: Some(GitHubSpec {
                    repository: "acme/widgets".into(),
                    token: Some(KeyRef::Env("GH_TOKEN".into())),
                    app: None,
                    api_url: "https://api.github.com".into(),
                    push_url: None,
                }),
                gitlab: None,
                push: None,
                webhook_url: None,
                allow_ci_changes: false,
            }
        );
        let gh = spec.github.unwrap();
        assert_eq!(
            (gh.owner_and_name(), gh.push_url()),
            (
                Ok(("acme", "widgets")),
                "https://github.com/acme/widgets.git".to_string()
            )
        );
    }

    /// A push section's credential fits its URL: a token (or nothing) for
    /// HTTP(S) and `file://`, a deploy key with its known hosts for `ssh://`.
    #[test]
    fn a_push_sections_credential_fits_its_url() {
        let key = KeyRef::File("/etc/paddock/deploy".into());
        let token = KeyRef::Env("GIT_TOKEN".into());
        let hosts = std::path::PathBuf::from("/etc/paddock/known_hosts");
        let push = |url: &str, token: Option<&KeyRef>, ssh: Option<&KeyRef>, kh: bool| PushSpec {
            url: url.into(),
            token: token.cloned(),
            ssh_key: ssh.cloned(),
            known_hosts: kh.then(|| hosts.clone()),
        };
        let cases = [
            (
                push("https://git.example/r.git", Some(&token), None, false),
                Ok(PushCredential::Token(&token)),
            ),
            (
                push("file:///srv/r.git", None, None, false),
                Ok(PushCredential::None),
            ),
            (
                push("ssh://git@git.example/r.git", None, Some(&key), true),
                Ok(PushCredential::SshKey {
                    key: &key,
                    known_hosts: &hosts,
                }),
            ),
            (
                push("ssh://git@git.example/r.git", None, Some(&key), false),
                Err("`ssh_key` needs `known_hosts`"),
            ),
            (
                push("ssh://git@git.example/r.git", Some(&token), None, false),
                Err("an `ssh://` url needs `ssh_key`"),
            ),
            (
                push("https://git.example/r.git", None, Some(&key), true),
                Err("`ssh_key` needs an `ssh://` url"),
            ),
            (
                push("https://git.example/r.git", Some(&token), Some(&key), true),
                Err("set `token` or `ssh_key`, not both"),
            ),
        ];
        for (spec, want) in &cases {
            assert_eq!(
                spec.credential(),
                (*want).map_err(str::to_string),
                "{spec:?}"
            );
        }
        let parsed: ResultsSpec = toml::from_str(
            "[push]\nurl = \"ssh://git@git.example/r.git\"\nssh_key = \"file:/etc/paddock/deploy\"\nknown_hosts = \"/etc/paddock/known_hosts\"\n",
        )
        .unwrap();
        assert_eq!(
            parsed.push,
            Some(push("ssh://git@git.example/r.git", None, Some(&key), true))
        );
    }

    #[test]
    fn a_repository_that_is_not_owner_slash_name_is_refused() {
        let gh = |r: &str| GitHubSpec {
            repository: r.into(),
            token: Some(KeyRef::Env("T".into())),
            app: None,
            api_url: default_api_url(),
            push_url: None,
        };
        let got: Vec<bool> = ["acme/widgets", "acme", "acme/../x", "/x", "a/b/c", "a/.git"]
            .iter()
            .map(|r| gh(r).owner_and_name().is_ok())
            .collect();
        assert_eq!(got, vec![true, false, false, false, false, false]);
    }

    #[test]
    fn an_app_section_parses_and_exactly_one_credential_is_required() {
        let parse = |t: &str| toml::from_str::<GitHubSpec>(t).unwrap();
        let app = parse(
            "repository = \"acme/widgets\"\n[app]\nid = 42\ninstallation_id = 7\nprivate_key = \"file:/etc/paddock/app.pem\"\n",
        );
        assert_eq!(
            app.credential(),
            Ok(GitHubCredential::App(&GitHubAppSpec {
                id: 42,
                installation_id: 7,
                private_key: KeyRef::File("/etc/paddock/app.pem".into()),
            }))
        );
        let errors: Vec<String> = [
            "repository = \"a/b\"\n",
            "repository = \"a/b\"\ntoken = \"env:T\"\n[app]\nid = 1\ninstallation_id = 2\nprivate_key = \"env:K\"\n",
            "repository = \"a/b\"\n[app]\nid = 0\ninstallation_id = 2\nprivate_key = \"env:K\"\n",
        ]
        .iter()
        .map(|t| parse(t).credential().unwrap_err())
        .collect();
        assert_eq!(
            errors,
            vec![
                "needs `token` (env:NAME or file:PATH) or `[results.github.app]`".to_string(),
                "set `token` or `app`, not both".to_string(),
                "`app.id` and `app.installation_id` must be GitHub's ids (not 0)".to_string(),
            ]
        );
    }

    #[test]
    fn a_gitlab_section_parses_with_its_defaults_and_its_project_is_checked() {
        let spec: ResultsSpec = toml::from_str(
            "[gitlab]\nproject = \"acme/tools/widgets\"\ntoken = \"env:GL_TOKEN\"\n",
        )
        .unwrap();
        let gl = GitLabSpec {
            project: "acme/tools/widgets".into(),
            token: KeyRef::Env("GL_TOKEN".into()),
            api_url: "https://gitlab.com/api/v4".into(),
            push_url: None,
        };
        assert_eq!(spec.gitlab.as_ref(), Some(&gl));
        assert_eq!(
            gl.push_url(),
            Ok("https://gitlab.com/acme/tools/widgets.git".to_string())
        );
        let with = |project: &str| GitLabSpec {
            project: project.into(),
            ..gl.clone()
        };
        let checked: Vec<bool> = ["acme/w", "1234", "acme", "acme/../x", "a/w.git", "", "a//b"]
            .iter()
            .map(|p| with(p).check_project().is_ok())
            .collect();
        assert_eq!(checked, vec![true, true, false, false, false, false, false]);
        assert_eq!(
            with("1234").push_url(),
            Err("a numeric `project` id needs `push_url`".to_string())
        );
    }

    #[test]
    fn a_webhook_url_is_http_or_https_with_a_host() {
        let checked: Vec<Result<(), String>> = [
            "https://hooks.example/paddock?x=1",
            "http://127.0.0.1:9000/hook",
            "ftp://hooks.example/",
            "https:///path",
            "https://a b/",
        ]
        .into_iter()
        .map(check_webhook_url)
        .collect();
        assert_eq!(
            checked,
            vec![
                Ok(()),
                Ok(()),
                Err("`ftp://hooks.example/` must start with http:// or https://".into()),
                Err("`https:///path` has no host".into()),
                Err("`https://a b/` must not contain spaces or control characters".into()),
            ]
        );
    }
}

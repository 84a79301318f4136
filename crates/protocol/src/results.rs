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
        }
    }
}

impl ResultsSpec {
    pub fn is_default(&self) -> bool {
        *self == ResultsSpec::default()
    }
}

/// `[results.github]`: a GitHub repository and the token Paddock (never
/// the job) uses for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitHubSpec {
    /// `owner/name`.
    pub repository: String,
    /// A token with `contents` and `pull_requests` write on that
    /// repository, as `env:NAME` or `file:PATH`.
    pub token: KeyRef,
    /// The REST API's root (GitHub Enterprise: `https://HOST/api/v3`).
    #[serde(default = "default_api_url")]
    pub api_url: String,
    /// Where the branch is pushed (default:
    /// `https://github.com/OWNER/NAME.git`; `file://` and other URLs are
    /// taken as they are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_url: Option<String>,
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

    /// Where the branch is pushed.
    pub fn push_url(&self) -> String {
        self.push_url
            .clone()
            .unwrap_or_else(|| format!("https://github.com/{}.git", self.repository))
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
                    token: KeyRef::Env("GH_TOKEN".into()),
                    api_url: "https://api.github.com".into(),
                    push_url: None,
                }),
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

    #[test]
    fn a_repository_that_is_not_owner_slash_name_is_refused() {
        let gh = |r: &str| GitHubSpec {
            repository: r.into(),
            token: KeyRef::Env("T".into()),
            api_url: default_api_url(),
            push_url: None,
        };
        let got: Vec<bool> = ["acme/widgets", "acme", "acme/../x", "/x", "a/b/c", "a/.git"]
            .iter()
            .map(|r| gh(r).owner_and_name().is_ok())
            .collect();
        assert_eq!(got, vec![true, false, false, false, false, false]);
    }
}

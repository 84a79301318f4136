//! The forge seam: where a job's branch becomes a pull request. One trait,
//! an enum of its backends (GitHub, GitLab, the file outbox when no forge is
//! configured) and, in tests, a fake. A forge opens or updates the pull
//! request for a branch, posts the closeout and reads a review back for
//! the next attempt. There is deliberately no operation that merges,
//! approves or enables auto-merge, and the GitHub and GitLab clients
//! refuse such a request even if one were built (`refuse_merging` in
//! `github.rs` and `gitlab.rs`).

use async_trait::async_trait;

use super::github::GitHub;
use super::gitlab::GitLab;
use super::outbox::Outbox;

#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    #[error("{forge}: {step}: cannot reach {url}: {message}")]
    Request {
        forge: &'static str,
        step: &'static str,
        url: String,
        message: String,
    },
    #[error("{forge}: {step}: HTTP {status}: {message}{limit}")]
    Status {
        forge: &'static str,
        step: &'static str,
        status: u16,
        message: String,
        /// When a rate limit answered (`forge_http::rate_limit`): `; …`
        /// saying when to try again; else empty.
        limit: String,
    },
    #[error("{forge}: {step}: unexpected answer: {message}")]
    Decode {
        forge: &'static str,
        step: &'static str,
        message: String,
    },
    #[error("{forge}: refused to send {method} {path}: Paddock never merges, approves or enables auto-merge")]
    NeverMerge {
        forge: &'static str,
        method: String,
        path: String,
    },
    #[error("{forge}: the App's private key: {message}")]
    AppKey {
        forge: &'static str,
        message: String,
    },
    #[error(
        "{forge}: the {token} grants more than the job needs ({granted}); it was revoked unused"
    )]
    TokenTooBroad {
        forge: &'static str,
        /// Which token (`installation token`, `project access token`).
        token: &'static str,
        granted: String,
    },
    #[error("{forge}: the job's token record {path}: cannot {step}: {source}")]
    TokenRecord {
        forge: &'static str,
        path: std::path::PathBuf,
        step: &'static str,
        source: std::io::Error,
    },
    /// The job's closeout record (`gitlab_closeout.rs`,
    /// `github_closeout.rs`) is there but not
    /// one Paddock wrote whole, or cannot be written: no closeout is posted
    /// or edited, lest a second be posted beside the one it names.
    #[error(
        "{forge}: the job's closeout record {path}: cannot {step}: {source} (no closeout posted \
         or edited; remove the record to have one looked for by its author and posted)"
    )]
    CloseoutRecord {
        forge: &'static str,
        path: std::path::PathBuf,
        step: &'static str,
        source: std::io::Error,
    },
    #[error("outbox {path}: cannot {step}: {source}")]
    Outbox {
        path: std::path::PathBuf,
        step: &'static str,
        source: std::io::Error,
    },
}

impl ForgeError {
    /// The forge did not answer as a forge that works does: no connection
    /// or answer in time (`Request`), a server error (5xx), a rate limit
    /// (429, or a 403 that says when to try again). Not the caller's to
    /// fix (unlike a 401, a 404 or a 422), and asking again later may
    /// succeed.
    pub fn unavailable(&self) -> bool {
        match self {
            ForgeError::Request { .. } => true,
            ForgeError::Status { status, limit, .. } => {
                *status >= 500 || *status == 429 || !limit.is_empty()
            }
            _ => false,
        }
    }
}

/// The pull request a job asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequestDraft {
    /// The job's branch (`paddock/<ticket>/<attempt>`).
    pub head: String,
    /// The branch it asks to merge into.
    pub base: String,
    pub title: String,
    pub body: String,
    pub draft: bool,
    pub labels: Vec<String>,
}

/// A pull request as the forge knows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PullRequest {
    pub number: u64,
    /// Its page (a file for the outbox); `None` when the address the
    /// forge answered was not one to keep (`forge_url.rs`; `refused_url`
    /// says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Why the forge's address for it was not kept, a warning for the
    /// job; never recorded.
    #[serde(skip)]
    pub refused_url: Option<String>,
    /// Opened now (else an open one for the branch was updated).
    pub created: bool,
    /// `merged` or `closed`: the branch's pull request was ended on the
    /// forge (merged, or closed by a reviewer), and is left as it is: not
    /// reopened, updated or opened again (a new one would put work a
    /// reviewer merged or turned down before them again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    /// A draft, as the forge has it now (an open one a reviewer marked
    /// ready is updated as ready).
    #[serde(default)]
    pub draft: bool,
    /// Who opened it, by the account's id (GitHub's and GitLab's alike:
    /// a name may be taken by someone else), none once that account is
    /// gone (the forge's ghost's): Paddock's own identity for one it
    /// opened. Only a
    /// closeout this identity wrote is edited by a later publish; never
    /// recorded.
    #[serde(skip)]
    pub author: Option<String>,
}

impl PullRequest {
    /// How it is named to a person: its page, else its number (the
    /// address the forge answered was not kept).
    pub fn page(&self) -> String {
        match &self.url {
            Some(url) => url.clone(),
            None => format!("number {} (its address not kept)", self.number),
        }
    }
}

/// Where a closeout was posted or written, and what the forge says of
/// it that the job should hear (a warning event of its publish).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Posted {
    /// Its page (a file for the outbox); `None`: nowhere to put it (no
    /// pull request).
    pub url: Option<String>,
    /// Why an earlier closeout of the job was left beside the one posted:
    /// the forge's ghost holds one or more notes of the job's closeout,
    /// which may be the closeout a publish stopped before recording it
    /// posted (its account deleted since) or a copy someone else posted
    /// and deleted their account after; they cannot be told apart, so
    /// none is edited and a new closeout is posted.
    pub warning: Option<String>,
    /// Why the address the forge answered for it was not kept
    /// (`forge_url.rs`): a warning for the job, and `url` is `None`.
    pub refused_url: Option<String>,
}

impl Posted {
    /// Posted at `url`, nothing to say of it.
    pub fn at(url: String) -> Self {
        Posted {
            url: Some(url),
            ..Posted::default()
        }
    }
}

/// A reviewer's word on a pull request, for the next attempt's brief.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReviewComment {
    pub author: String,
    pub body: String,
    /// The file and line a line comment is on.
    pub path: Option<String>,
    pub line: Option<u64>,
    /// A review's verdict (`CHANGES_REQUESTED`, `COMMENTED`...).
    pub state: Option<String>,
}

/// The review comments of a pull request that reach the next attempt's
/// brief, and how many were left out: written by someone who may not
/// write to the repository (GitHub's `author_association` other than
/// `OWNER`, `MEMBER` or `COLLABORATOR`; on GitLab no project access of
/// Developer or above). On a public repository anyone may review a pull
/// request, and the brief is the agent's instructions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reviews {
    pub comments: Vec<ReviewComment>,
    /// Comments left out, by their authors' lack of write access.
    pub untrusted: usize,
    /// More comments than Paddock reads (`forge_http::MAX_PAGES` pages of
    /// a list) were left unread: anyone may add to them, and their number
    /// must not keep the next attempt from starting.
    pub unread: bool,
}

/// What a forge does for Paddock. Nothing here merges.
#[async_trait]
pub trait Forge: Send + Sync {
    /// Its name in messages (`github`, `gitlab`, `outbox`).
    fn name(&self) -> &'static str;
    /// The pull request of `branch` (the open one, else the newest), as
    /// [`Forge::propose`] takes it: `ended` set when it was merged or
    /// closed on the forge; `None` when the branch has none (the outbox:
    /// always). Only one into `base`, always: anyone who may open a pull
    /// request may open one of the job's branch into another base (GitHub
    /// allows one open per head and base), which is not the job's and is
    /// never updated, given its closeout, read for a review or taken for
    /// an ended one; so there is no lookup by the branch alone, and a
    /// caller that cannot tell the base does not ask. Asked before the
    /// branch is pushed: an ended one's branch is not pushed again (the
    /// forge, or a reviewer, may have deleted it).
    async fn find_pull_request(
        &self,
        branch: &str,
        base: &str,
    ) -> Result<Option<PullRequest>, ForgeError>;
    /// Opens the pull request for `draft.head`, or updates `found`, the
    /// branch's open one (title, body, labels), as
    /// [`Forge::find_pull_request`] found it; an ended one is returned as
    /// it is (never reopened, updated or opened again).
    async fn propose(
        &self,
        draft: &PullRequestDraft,
        found: Option<PullRequest>,
    ) -> Result<PullRequest, ForgeError>;
    /// [`Forge::find_pull_request`] then [`Forge::propose`].
    async fn open_pull_request(&self, draft: &PullRequestDraft) -> Result<PullRequest, ForgeError> {
        let found = self.find_pull_request(&draft.head, &draft.base).await?;
        self.propose(draft, found).await
    }
    /// Posts the closeout: on the pull request when there is one; a forge
    /// with nowhere to put it without one has no url ([`Posted`]).
    async fn post_closeout(
        &self,
        pull_request: Option<&PullRequest>,
        body: &str,
    ) -> Result<Posted, ForgeError>;
    /// The review comments on the pull request of `branch` into `base` (as
    /// [`Forge::find_pull_request`] finds it) by those who
    /// may write to the repository, and how many others were left out
    /// ([`Reviews`]; none when there is no pull request).
    async fn review_comments(&self, branch: &str, base: &str) -> Result<Reviews, ForgeError>;
}

/// The forges Paddock ships.
pub enum ForgeBackend {
    GitHub(GitHub),
    GitLab(GitLab),
    Outbox(Outbox),
}

impl ForgeBackend {
    fn inner(&self) -> &dyn Forge {
        match self {
            ForgeBackend::GitHub(f) => f,
            ForgeBackend::GitLab(f) => f,
            ForgeBackend::Outbox(f) => f,
        }
    }
}

#[async_trait]
impl Forge for ForgeBackend {
    fn name(&self) -> &'static str {
        self.inner().name()
    }
    async fn find_pull_request(
        &self,
        branch: &str,
        base: &str,
    ) -> Result<Option<PullRequest>, ForgeError> {
        self.inner().find_pull_request(branch, base).await
    }
    async fn propose(
        &self,
        draft: &PullRequestDraft,
        found: Option<PullRequest>,
    ) -> Result<PullRequest, ForgeError> {
        self.inner().propose(draft, found).await
    }
    async fn post_closeout(
        &self,
        pull_request: Option<&PullRequest>,
        body: &str,
    ) -> Result<Posted, ForgeError> {
        self.inner().post_closeout(pull_request, body).await
    }
    async fn review_comments(&self, branch: &str, base: &str) -> Result<Reviews, ForgeError> {
        self.inner().review_comments(branch, base).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only what a working forge would not answer (no answer, a 5xx, a
    /// rate limit) is the forge unavailable; a refusal (401, 403, 404,
    /// 422) and an answer not understood are not.
    #[test]
    fn a_forge_is_unavailable_only_when_it_does_not_answer_as_one_that_works() {
        let status = |status: u16, limit: &str| ForgeError::Status {
            forge: "github",
            step: "read",
            status,
            message: "m".into(),
            limit: limit.into(),
        };
        let errors = [
            ForgeError::Request {
                forge: "github",
                step: "read",
                url: "https://api.example/".into(),
                message: "timed out".into(),
            },
            status(502, ""),
            status(503, ""),
            status(429, ""),
            status(403, "; the forge's rate limit is spent"),
            status(403, ""),
            status(401, ""),
            status(404, ""),
            status(422, ""),
            ForgeError::Decode {
                forge: "github",
                step: "read",
                message: "m".into(),
            },
        ];
        assert_eq!(
            errors
                .iter()
                .map(ForgeError::unavailable)
                .collect::<Vec<_>>(),
            [true, true, true, true, true, false, false, false, false, false]
        );
    }
}

//! GitHub's REST API for the forge seam, with reqwest and typed models of
//! the few shapes Paddock reads (a pull request, a comment, a review, a
//! review comment, an error). The token is Paddock's, sent only to the API
//! root the job spec names, never to the job. Every request passes
//! [`refuse_merging`] first: a merge, an approving review, auto-merge or a
//! GraphQL mutation is refused before anything is sent.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use reqwest::header::HeaderMap;
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::forge::{
    Forge, ForgeError, Posted, PullRequest, PullRequestDraft, ReviewComment, Reviews,
};
use super::forge_http::{form, path_segment, quoted, raw_message, ForgeHttp};
use super::found_closeout::Found;
use crate::secret::Secret;

const FORGE: &str = "github";

/// The REST API version Paddock speaks.
const API_VERSION: &str = "2022-11-28";

/// One GitHub repository, reached with Paddock's token.
pub struct GitHub {
    http: ForgeHttp,
    owner: String,
    repo: String,
    token: Secret,
    /// Where the job's closeout comment is recorded
    /// (`github_closeout.rs`), when it is.
    closeout_record: Option<PathBuf>,
    /// The App whose installation token `token` is, when it is one: its
    /// bot account is found with its JWT (`GET /app`'s slug), since the
    /// token has no account `GET /user` answers for.
    app: Option<super::github_app::AppSigner>,
    /// The token's account once asked ([`GitHub::own_account`]): a
    /// publish asks it at most once (looking for the closeout, then
    /// recording its post).
    token_account: tokio::sync::OnceCell<Option<u64>>,
}

/// The App as `GET /app` answers it (to the App's JWT).
#[derive(Debug, Deserialize)]
struct ApiApp {
    slug: String,
}

#[derive(Debug, Deserialize)]
struct ApiPull {
    number: u64,
    html_url: String,
    /// `open` or `closed`.
    #[serde(default)]
    state: String,
    /// When it was merged (a closed one that was not: `None`).
    #[serde(default)]
    merged_at: Option<String>,
    #[serde(default)]
    draft: bool,
    /// Who opened it.
    #[serde(default)]
    user: Option<ApiUser>,
}

/// A comment as posted or edited.
#[derive(Debug, Deserialize)]
struct ApiComment {
    html_url: String,
    #[serde(default)]
    id: u64,
    #[serde(default)]
    user: Option<ApiUser>,
}

/// A comment on the pull request's conversation, as listed.
#[derive(Debug, Deserialize)]
struct ApiIssueComment {
    id: u64,
    #[serde(default, deserialize_with = "super::forge_http::cut_body")]
    body: String,
    #[serde(default)]
    user: Option<ApiUser>,
    /// The API address of the issue (pull request) it is on.
    #[serde(default)]
    issue_url: String,
}

#[derive(Debug, Deserialize)]
struct ApiUser {
    login: String,
    /// The account's id: a login may be renamed and then taken by
    /// someone else; an id is never given twice.
    #[serde(default)]
    id: u64,
}

/// An account as `GET /users/{login}` answers it, with its type
/// (`User`, `Bot`, `Organization`).
#[derive(Debug, Deserialize)]
struct ApiBot {
    login: String,
    #[serde(default)]
    id: u64,
    #[serde(default, rename = "type")]
    kind: String,
}

/// The account GitHub gives a deleted account's pull requests and
/// comments, one for them all.
const GHOST: &str = "ghost";

/// The id of the account that opened a pull request, as
/// [`PullRequest::author`]; none once that account is gone (the pull
/// request GitHub's ghost's, who holds every deleted account's comments).
fn opener(user: Option<ApiUser>) -> Option<String> {
    user.filter(|u| u.id != 0 && u.login != GHOST)
        .map(|u| u.id.to_string())
}

#[derive(Debug, Deserialize)]
struct ApiReview {
    user: Option<ApiUser>,
    /// The author's relation to the repository (`OWNER`, `MEMBER`,
    /// `COLLABORATOR`, `CONTRIBUTOR`, `NONE`...).
    #[serde(default)]
    author_association: Option<String>,
    #[serde(default, deserialize_with = "super::forge_http::cut_body_or_none")]
    body: Option<String>,
    state: String,
}

/// A user's permission on the repository as `GET …/collaborators/
/// LOGIN/permission` gives it: `admin`, `write` (also for Maintain),
/// `read` (also for Triage) or `none`.
#[derive(Debug, Deserialize)]
struct ApiPermission {
    permission: String,
}

/// The most authors of a pull request's reviews whose permission is asked,
/// in the order they first reviewed; the reviews of any after them are
/// left out of the next brief (counted).
const MAX_AUTHORS_ASKED: usize = 100;

#[derive(Debug, Deserialize)]
struct ApiReviewComment {
    user: Option<ApiUser>,
    #[serde(default)]
    author_association: Option<String>,
    #[serde(deserialize_with = "super::forge_http::cut_body")]
    body: String,
    path: Option<String>,
    line: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct ApiError {
    message: String,
    #[serde(default)]
    errors: Vec<serde_json::Value>,
}

#[derive(Serialize)]
struct NewPull<'a> {
    title: &'a str,
    head: &'a str,
    base: &'a str,
    body: &'a str,
    draft: bool,
}

#[derive(Serialize)]
struct PullUpdate<'a> {
    title: &'a str,
    body: &'a str,
}

#[derive(Serialize)]
struct Labels<'a> {
    labels: &'a [String],
}

#[derive(Serialize)]
struct NewComment<'a> {
    body: &'a str,
}

/// `Err` for a request that would merge, approve or enable auto-merge:
/// `PUT …/pulls/N/merge`, a review submitted or created with an event
/// (`POST …/pulls/N/reviews[/ID/events]`; Paddock never reviews), any
/// path naming auto-merge, and GraphQL (where auto-merge is enabled).
pub fn refuse_merging(method: &Method, path: &str) -> Result<(), ForgeError> {
    let path_only = path.split('?').next().unwrap_or(path);
    let lower = path_only.to_ascii_lowercase();
    let refused = lower.ends_with("/merge")
        || lower.contains("/merges")
        || lower.contains("auto-merge")
        || lower.contains("auto_merge")
        || lower.contains("automerge")
        || lower.starts_with("/graphql")
        || (*method != Method::GET && lower.contains("/reviews"));
    if refused {
        return Err(ForgeError::NeverMerge {
            forge: FORGE,
            method: method.to_string(),
            path: path_only.to_string(),
        });
    }
    Ok(())
}

/// GitHub's error body: `message`, with the `errors`' messages.
fn error_message(bytes: &[u8]) -> String {
    let Ok(err) = serde_json::from_slice::<ApiError>(bytes) else {
        return raw_message(bytes);
    };
    let details: Vec<String> = err
        .errors
        .iter()
        .filter_map(|e| {
            e.get("message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
        })
        .collect();
    if details.is_empty() {
        err.message
    } else {
        format!("{} ({})", err.message, details.join("; "))
    }
}

impl GitHub {
    /// The client for `owner/repo` at the API root `api`.
    pub fn new(api: &str, owner: &str, repo: &str, token: Secret) -> Result<GitHub, ForgeError> {
        Ok(GitHub {
            http: ForgeHttp::new(FORGE, api)?,
            owner: owner.to_string(),
            repo: repo.to_string(),
            token,
            closeout_record: None,
            app: None,
            token_account: tokio::sync::OnceCell::new(),
        })
    }

    /// The client of an installation token of the App `app` signs for:
    /// what it posts is the App's bot account's (`<slug>[bot]`).
    pub(super) fn with_app(self, app: super::github_app::AppSigner) -> GitHub {
        GitHub {
            app: Some(app),
            ..self
        }
    }

    /// The client recording the job's closeout comment at `path`
    /// (`github_closeout.rs`) and editing the comment recorded there.
    pub fn with_closeout_record(self, path: PathBuf) -> GitHub {
        GitHub {
            closeout_record: Some(path),
            ..self
        }
    }

    /// This client, never waiting for a rate limit
    /// ([`ForgeHttp::without_waiting`]).
    pub fn without_waiting(self) -> GitHub {
        GitHub {
            http: self.http.without_waiting(),
            ..self
        }
    }

    /// The repository's name (`widgets` of `acme/widgets`).
    pub fn repo_name(&self) -> &str {
        &self.repo
    }

    /// Sends one request to the API as this client's bearer (the App's
    /// JWT or a token), for `github_app.rs`.
    pub(super) async fn request<T: DeserializeOwned>(
        &self,
        step: &'static str,
        method: Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<T, ForgeError> {
        self.call(step, method, path, body).await
    }

    fn repo_path(&self, rest: &str) -> String {
        format!("/repos/{}/{}{rest}", self.owner, self.repo)
    }

    async fn call<T: DeserializeOwned>(
        &self,
        step: &'static str,
        method: Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<T, ForgeError> {
        Ok(self.call_with_headers(step, method, path, body).await?.0)
    }

    async fn call_with_headers<T: DeserializeOwned>(
        &self,
        step: &'static str,
        method: Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<(T, HeaderMap), ForgeError> {
        self.send_as(&self.token, step, method, path, body).await
    }

    /// [`GitHub::call_with_headers`] as `bearer` (the App's JWT, for
    /// `GET /app`).
    async fn send_as<T: DeserializeOwned>(
        &self,
        bearer: &Secret,
        step: &'static str,
        method: Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<(T, HeaderMap), ForgeError> {
        refuse_merging(&method, path)?;
        let (req, url) = self.http.request(method, path);
        let mut req = req
            .header("Accept", "application/vnd.github+json")
            .header("X-GitHub-Api-Version", API_VERSION)
            .bearer_auth(bearer.expose());
        if let Some(body) = body {
            req = req
                .header("Content-Type", "application/json")
                .body(body.to_string());
        }
        self.http.send(step, &url, req, error_message).await
    }

    /// The items of the list at `path` on its first pages, and whether
    /// more were left unread (`ForgeHttp::first_pages`).
    async fn list_some<T: DeserializeOwned>(
        &self,
        step: &'static str,
        path: &str,
    ) -> Result<(Vec<T>, bool), ForgeError> {
        self.http
            .first_pages(step, path, |page| async move {
                self.call_with_headers(step, Method::GET, &page, None).await
            })
            .await
    }

    /// The pull request whose head is `branch` of this repository (a
    /// fork's branch of the same name is another head, `owner:branch`),
    /// into `base` (`state`: `open` or `all`): the open one if there
    /// is one (GitHub allows one open per head and base; an older one a
    /// reviewer reopened is it), else the newest. Every page is read (up
    /// to `forge_http::MAX_PAGES` of 100, newest first): GitHub answers 30
    /// a page unless asked, and a branch closed and opened again more
    /// often than that had its open pull request pushed off the first
    /// page, a closed one taken for it, and its publish left undone.
    async fn pull_for(
        &self,
        branch: &str,
        base: &str,
        state: &str,
    ) -> Result<Option<ApiPull>, ForgeError> {
        let head = format!("{}:{branch}", self.owner);
        let query = form(&[
            ("head", head.as_str()),
            ("state", state),
            ("base", base),
            ("sort", "created"),
            ("direction", "desc"),
        ]);
        let path = self.repo_path(&format!("/pulls?{query}"));
        let (pulls, _): (Vec<ApiPull>, bool) =
            self.list_some("find the pull request", &path).await?;
        let open = pulls.iter().position(|p| p.state == "open").unwrap_or(0);
        Ok(pulls.into_iter().nth(open))
    }

    /// The id of the comment on `pr` (whose comments are listed at `path`)
    /// that is job `job`'s closeout, Paddock's own: the one recorded when
    /// it was posted (`github_closeout.rs`), if it is still there, on this
    /// pull request, still this job's closeout and by the account recorded
    /// as its poster; with only its poster recorded (a kill between the
    /// post and the record of its comment, or the post's answer lost), the
    /// first comment of this job's closeout by that account (none found
    /// while GitHub's ghost holds one or more: [`Found::Unsure`], none
    /// edited and a new closeout posted, `found_closeout.rs`); with no
    /// record (a job published before records were kept), the first by the
    /// account of this publish's token, by id (none known: none found). Only a comment Paddock's
    /// identity wrote is its closeout: anyone may comment on a public
    /// repository's pull request, a copy of the closeout too; edited, it
    /// would hold Paddock's closeout under its author's name, theirs to
    /// rewrite, and no closeout of Paddock's would be posted. Anyone may
    /// add comments: past the bound, Paddock's is not looked for further,
    /// and a new closeout is posted. A record there but not read whole is
    /// an error: nothing is posted or edited.
    async fn closeout_of(
        &self,
        path: &str,
        pr: &PullRequest,
        job: &str,
    ) -> Result<Found, ForgeError> {
        let kept = match &self.closeout_record {
            Some(p) => super::github_closeout::read_any(p)
                .map_err(|source| self.record_error(p, "read it", source))?,
            None => None,
        };
        let recorded = kept.filter(|r| r.pull_request == pr.number);
        let holds_ours = |c: &ApiIssueComment| super::closeout::job_of(&c.body) == Some(job);
        let by = |c: &ApiIssueComment, account: &str| {
            c.user
                .as_ref()
                .is_some_and(|u| u.id != 0 && u.id.to_string() == account)
        };
        let poster = recorded.and_then(|r| r.poster).map(|p| p.to_string());
        if let Some(id) = recorded.and_then(|r| r.comment) {
            let read: Result<ApiIssueComment, _> = self
                .call(
                    "read the closeout",
                    Method::GET,
                    &self.repo_path(&format!("/issues/comments/{id}")),
                    None,
                )
                .await;
            let on_this_pull = format!("/issues/{}", pr.number);
            return match read {
                Ok(c) => Ok(Found::ours(
                    (c.issue_url.ends_with(&on_this_pull)
                        && holds_ours(&c)
                        && poster.as_deref().is_none_or(|p| by(&c, p)))
                    .then_some(c.id),
                )),
                // Deleted (a reviewer deleted the closeout).
                Err(ForgeError::Status { status: 404, .. }) => Ok(Found::Nothing),
                Err(e) => Err(e),
            };
        }
        // A record for another pull request: the job's closeout went
        // there, and every closeout of this job is recorded, so the one on
        // this pull request, if any, is by the account that posted that
        // one; never by this one's opener, which may be anyone (who
        // reopened the job's branch as a pull request of their own, a copy
        // of the closeout on it). With no record at all (a job published
        // before records were kept, a publish stopped before its record),
        // the account of this publish's token: never the opener as such,
        // who may be anyone that opened the job's branch as a pull request
        // first, a copy of the closeout posted while no record named
        // Paddock's (the pull request's body holds the job's id before
        // the closeout is posted).
        let author = match kept.filter(|r| r.pull_request != pr.number) {
            Some(elsewhere) => elsewhere.poster.map(|p| p.to_string()),
            None => match &poster {
                Some(p) => Some(p.clone()),
                None => self.own_account(pr).await?.map(|id| id.to_string()),
            },
        };
        let Some(author) = author else {
            return Ok(Found::Nothing);
        };
        let (posted, _): (Vec<ApiIssueComment>, _) = self
            .list_some("read the pull request's comments", path)
            .await?;
        let found = posted
            .iter()
            .find(|c| by(c, &author) && holds_ours(c))
            .map(|c| c.id);
        // A poster recorded whose closeout is not found by it: its post
        // never made one, a reviewer deleted it, or its account was deleted
        // and the comment is now the ghost's, which an outsider's deleted
        // copy may be too. The last cannot be told apart: none is edited,
        // and a new closeout is posted beside them (as on GitLab).
        if let (None, Some(_), Some(_)) = (found, &poster, &self.closeout_record) {
            let ghosts: Vec<u64> = posted
                .iter()
                .filter(|c| c.user.as_ref().is_some_and(|u| u.login == GHOST) && holds_ours(c))
                .map(|c| c.id)
                .collect();
            if !ghosts.is_empty() {
                return Ok(Found::Unsure(ghosts));
            }
        }
        Ok(Found::ours(found))
    }

    /// The error of the closeout record at `path`.
    fn record_error(&self, path: &Path, step: &'static str, source: std::io::Error) -> ForgeError {
        ForgeError::CloseoutRecord {
            forge: FORGE,
            path: path.to_path_buf(),
            step,
            source,
        }
    }

    /// Records that the account of this publish's token
    /// ([`GitHub::own_account`]) is about to post the job's closeout on
    /// `pr`, before the post: a kill after it leaves the next publish that
    /// account to look for. Not recorded, nothing is posted. A token with
    /// no account known (an Actions token) records nothing before its post
    /// (a kill after it: the next publish posts another).
    async fn record_posting(&self, pr: &PullRequest) -> Result<(), ForgeError> {
        let Some(path) = &self.closeout_record else {
            return Ok(());
        };
        let Some(poster) = self.own_account(pr).await? else {
            return Ok(());
        };
        let record = super::github_closeout::CloseoutComment {
            pull_request: pr.number,
            comment: None,
            poster: Some(poster),
        };
        super::github_closeout::write(path, record)
            .map_err(|source| self.record_error(path, "write it", source))
    }

    /// The account of this publish's token, which posts the closeout: the
    /// pull request's opener when this publish opened it (no request
    /// made), else `GET /user`'s; an App's installation token has no
    /// account that answers there (403): its account is the App's bot
    /// ([`GitHub::app_account`]). None for a token refused there that is
    /// no App's Paddock minted (an Actions token).
    async fn own_account(&self, pr: &PullRequest) -> Result<Option<u64>, ForgeError> {
        let opener = pr
            .author
            .as_deref()
            .filter(|_| pr.created)
            .and_then(|id| id.parse::<u64>().ok());
        if let Some(id) = opener {
            return Ok(Some(id));
        }
        self.token_account
            .get_or_try_init(|| self.ask_token_account())
            .await
            .copied()
    }

    /// `GET /user`'s account, or an App's bot's ([`GitHub::own_account`]).
    async fn ask_token_account(&self) -> Result<Option<u64>, ForgeError> {
        let me: Result<ApiUser, _> = self
            .call("read the token's account", Method::GET, "/user", None)
            .await;
        match me {
            Ok(me) if me.id != 0 => Ok(Some(me.id)),
            // No account answered (an answer without an id; an
            // installation token's 403); a rate limit's 403 is not that,
            // and fails the closeout as any error does.
            Ok(_) => Ok(None),
            Err(ForgeError::Status {
                status: 403, limit, ..
            }) if limit.is_empty() => match &self.app {
                Some(app) => self.app_account(app).await.map(Some),
                None => Ok(None),
            },
            Err(e) => Err(e),
        }
    }

    /// The id of the App's bot account, which posts what its installation
    /// tokens post: the App's slug from `GET /app` (asked with the App's
    /// JWT), then `GET /users/<slug>[bot]`. Its answer must name that
    /// login, and a bot: any other account's id would have the next
    /// publish edit a comment not Paddock's.
    async fn app_account(&self, app: &super::github_app::AppSigner) -> Result<u64, ForgeError> {
        let jwt = app.jwt(time::OffsetDateTime::now_utc())?;
        let (me, _): (ApiApp, _) = self
            .send_as(&jwt, "read the App", Method::GET, "/app", None)
            .await?;
        let login = format!("{}[bot]", me.slug);
        let bot: ApiBot = self
            .call(
                "read the App's bot account",
                Method::GET,
                &format!("/users/{}", path_segment(&login)),
                None,
            )
            .await?;
        if me.slug.is_empty() || bot.login != login || bot.kind != "Bot" || bot.id == 0 {
            return Err(ForgeError::Decode {
                forge: FORGE,
                step: "read the App's bot account",
                message: format!(
                    "asked for {}, answered {} (type {:?}, id {})",
                    quoted(login),
                    quoted(bot.login),
                    quoted(bot.kind),
                    bot.id
                ),
            });
        }
        Ok(bot.id)
    }

    /// The closeout comment posted at `raw`, the address GitHub answered,
    /// held as every address it answers is (`forge_url.rs`).
    fn posted_at(&self, raw: &str) -> Posted {
        let (url, refused_url) = self.http.held_url("the closeout comment", raw);
        Posted {
            url,
            warning: None,
            refused_url,
        }
    }

    /// Records `comment` as the job's closeout on pull request `number`,
    /// for the next publish to edit; a record that cannot be written
    /// leaves the one before it (naming the comment or its poster).
    fn record_closeout(&self, number: u64, comment: &ApiComment) {
        if let (Some(path), true) = (&self.closeout_record, comment.id != 0) {
            let record = super::github_closeout::CloseoutComment {
                pull_request: number,
                comment: Some(comment.id),
                poster: comment.user.as_ref().map(|u| u.id).filter(|id| *id != 0),
            };
            let _ = super::github_closeout::write(path, record);
        }
    }
}

fn json<T: Serialize>(value: &T) -> Option<serde_json::Value> {
    serde_json::to_value(value).ok()
}

#[async_trait]
impl Forge for GitHub {
    fn name(&self) -> &'static str {
        FORGE
    }

    async fn find_pull_request(
        &self,
        branch: &str,
        base: &str,
    ) -> Result<Option<PullRequest>, ForgeError> {
        // The branch's pull request, open or not: one merged or closed is
        // left as it is, never reopened nor opened again.
        Ok(self.pull_for(branch, base, "all").await?.map(|pull| {
            let ended = match (pull.state.as_str(), &pull.merged_at) {
                ("open", _) => None,
                (_, Some(_)) => Some("merged".to_string()),
                (_, None) => Some("closed".to_string()),
            };
            let (url, refused_url) = self.http.held_url("the pull request", &pull.html_url);
            PullRequest {
                number: pull.number,
                url,
                refused_url,
                created: false,
                ended,
                draft: pull.draft,
                author: opener(pull.user),
            }
        }))
    }

    async fn propose(
        &self,
        draft: &PullRequestDraft,
        found: Option<PullRequest>,
    ) -> Result<PullRequest, ForgeError> {
        let (pull, created) = match found {
            Some(ended) if ended.ended.is_some() => return Ok(ended),
            Some(open) => {
                let path = self.repo_path(&format!("/pulls/{}", open.number));
                let update = PullUpdate {
                    title: &draft.title,
                    body: &draft.body,
                };
                let pull: ApiPull = self
                    .call(
                        "update the pull request",
                        Method::PATCH,
                        &path,
                        json(&update),
                    )
                    .await?;
                (pull, false)
            }
            None => {
                let new = NewPull {
                    title: &draft.title,
                    head: &draft.head,
                    base: &draft.base,
                    body: &draft.body,
                    draft: draft.draft,
                };
                let path = self.repo_path("/pulls");
                let pull: ApiPull = self
                    .call("open the pull request", Method::POST, &path, json(&new))
                    .await?;
                (pull, true)
            }
        };
        if !draft.labels.is_empty() {
            let path = self.repo_path(&format!("/issues/{}/labels", pull.number));
            let labels = Labels {
                labels: &draft.labels,
            };
            let _: serde_json::Value = self
                .call("label the pull request", Method::POST, &path, json(&labels))
                .await?;
        }
        let (url, refused_url) = self.http.held_url("the pull request", &pull.html_url);
        Ok(PullRequest {
            number: pull.number,
            url,
            refused_url,
            created,
            ended: None,
            draft: pull.draft,
            author: opener(pull.user),
        })
    }

    async fn post_closeout(
        &self,
        pull_request: Option<&PullRequest>,
        body: &str,
    ) -> Result<Posted, ForgeError> {
        let Some(pr) = pull_request else {
            return Ok(Posted::default());
        };
        let path = self.repo_path(&format!("/issues/{}/comments", pr.number));
        // One closeout a job: publishing it again (`paddock publish`, also
        // after a kill that came after the post) edits the one an earlier
        // publish posted or edited ([`GitHub::closeout_of`]: the comment
        // recorded, else one by the account recorded as posting it, else
        // one by the account that opened the pull request). A pull request
        // this publish opened has none yet; one whose closeout a reviewer
        // deleted gets a new one (also when the comment goes between the
        // read and the edit: its 404). The comment posted or edited is
        // recorded for the next publish. The ghost's comments of the
        // closeout that cannot be told from a copy are left as they are,
        // and a new one is posted (`found_closeout.rs`).
        let mut left = Vec::new();
        if let Some(job) = super::closeout::job_of(body).filter(|_| !pr.created) {
            let ours;
            (ours, left) = self.closeout_of(&path, pr, job).await?.into_parts();
            if let Some(ours) = ours {
                let edited: Result<ApiComment, _> = self
                    .call(
                        "update the closeout",
                        Method::PATCH,
                        &self.repo_path(&format!("/issues/comments/{ours}")),
                        json(&NewComment { body }),
                    )
                    .await;
                match edited {
                    Ok(comment) => {
                        self.record_closeout(pr.number, &comment);
                        return Ok(self.posted_at(&comment.html_url));
                    }
                    // Deleted since it was found (a reviewer deleted the
                    // closeout): a new one is posted below.
                    Err(ForgeError::Status { status: 404, .. }) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        self.record_posting(pr).await?;
        let comment: ApiComment = self
            .call(
                "post the closeout",
                Method::POST,
                &path,
                json(&NewComment { body }),
            )
            .await?;
        self.record_closeout(pr.number, &comment);
        let posted = self.posted_at(&comment.html_url);
        Ok(Posted {
            warning: (!left.is_empty()).then(|| {
                super::found_closeout::left_beside(
                    FORGE,
                    "GitHub's ghost account",
                    "comment",
                    &left,
                    posted.url.as_deref().unwrap_or("(its address not kept)"),
                )
            }),
            ..posted
        })
    }

    async fn review_comments(&self, branch: &str, base: &str) -> Result<Reviews, ForgeError> {
        let Some(pull) = self.pull_for(branch, base, "all").await? else {
            return Ok(Reviews::default());
        };
        // Anyone may review: what is past the bound is left unread, and
        // the brief says so, rather than no next attempt starting.
        let (reviews, more_reviews): (Vec<ApiReview>, _) = self
            .list_some(
                "read the reviews",
                &self.repo_path(&format!("/pulls/{}/reviews", pull.number)),
            )
            .await?;
        let (lines, more_lines): (Vec<ApiReviewComment>, _) = self
            .list_some(
                "read the review comments",
                &self.repo_path(&format!("/pulls/{}/comments", pull.number)),
            )
            .await?;
        let login = |u: Option<ApiUser>| u.map(|u| u.login).unwrap_or_else(|| "ghost".into());
        let reviews: Vec<ApiReview> = reviews
            .into_iter()
            .filter(|r| r.body.as_deref().is_some_and(|b| !b.trim().is_empty()))
            .collect();
        // Who may write, asked of the repository for each author whose
        // association may mean it (an organization's member, a
        // collaborator: either may only read), once an author, the first
        // [`MAX_AUTHORS_ASKED`] of them.
        let mut writers: HashMap<String, bool> = HashMap::new();
        let candidates = reviews
            .iter()
            .map(|r| (&r.user, r.author_association.as_deref()))
            .chain(
                lines
                    .iter()
                    .map(|c| (&c.user, c.author_association.as_deref())),
            );
        for (user, association) in candidates {
            let Some(login) = user.as_ref().map(|u| u.login.as_str()) else {
                continue;
            };
            if !may_write(association) || writers.contains_key(login) {
                continue;
            }
            if association == Some("OWNER") {
                writers.insert(login.to_string(), true);
                continue;
            }
            if writers.len() == MAX_AUTHORS_ASKED {
                continue;
            }
            let path = self.repo_path(&format!(
                "/collaborators/{}/permission",
                path_segment(login)
            ));
            let asked: Result<ApiPermission, ForgeError> = self
                .call("read a reviewer's permission", Method::GET, &path, None)
                .await;
            let writes = match asked {
                Ok(p) => matches!(p.permission.as_str(), "admin" | "write"),
                Err(ForgeError::Status { status: 404, .. }) => false,
                Err(e) => return Err(e),
            };
            writers.insert(login.to_string(), writes);
        }
        let writes = |user: &Option<ApiUser>, association: Option<&str>| {
            may_write(association)
                && user
                    .as_ref()
                    .is_some_and(|u| writers.get(&u.login).copied().unwrap_or(false))
        };
        let (reviews, untrusted_reviews): (Vec<ApiReview>, Vec<ApiReview>) = reviews
            .into_iter()
            .partition(|r| writes(&r.user, r.author_association.as_deref()));
        let (lines, untrusted_lines): (Vec<ApiReviewComment>, Vec<ApiReviewComment>) = lines
            .into_iter()
            .partition(|c| writes(&c.user, c.author_association.as_deref()));
        let mut out: Vec<ReviewComment> = reviews
            .into_iter()
            .map(|r| ReviewComment {
                author: login(r.user),
                body: r.body.unwrap_or_default(),
                path: None,
                line: None,
                state: Some(r.state),
            })
            .collect();
        out.extend(lines.into_iter().map(|c| ReviewComment {
            author: login(c.user),
            body: c.body,
            path: c.path,
            line: c.line,
            state: None,
        }));
        Ok(Reviews {
            comments: out,
            untrusted: untrusted_reviews.len() + untrusted_lines.len(),
            unread: more_reviews || more_lines,
        })
    }
}

/// Whether a comment's `author_association` says its author may write to
/// the repository: its owner, a member of its organization, or a
/// collaborator. A contributor, a first-timer or anyone else (what anyone
/// on a public repository is), or no association given, may not. A member
/// or a collaborator may also only read (an organization's base
/// permission, a collaborator given Read or Triage): their permission is
/// asked of the repository besides.
fn may_write(association: Option<&str>) -> bool {
    matches!(association, Some("OWNER" | "MEMBER" | "COLLABORATOR"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Comments, reviews and line comments as long as GitHub allows
    /// (65,536 characters, here 4 bytes each) are cut to `BODY_KEPT` as
    /// their page is read; a review without a body stays without one.
    #[test]
    fn long_bodies_are_cut_as_they_are_read() {
        let body = "😀".repeat(65_536);
        let mut kept = body.clone();
        crate::output::cap_string(&mut kept, super::super::forge_http::BODY_KEPT);
        let user = serde_json::json!({"login": "alice", "id": 2});
        let comments: Vec<ApiIssueComment> =
            serde_json::from_value(serde_json::json!([{"id": 1, "body": body, "user": user}]))
                .unwrap_or_default();
        let reviews: Vec<ApiReview> = serde_json::from_value(serde_json::json!([
            {"user": user, "body": body, "state": "COMMENTED"},
            {"user": user, "body": null, "state": "APPROVED"},
        ]))
        .unwrap_or_default();
        let lines: Vec<ApiReviewComment> = serde_json::from_value(serde_json::json!([
            {"user": user, "body": body, "path": "a.rs", "line": 1},
        ]))
        .unwrap_or_default();
        assert_eq!(
            (
                comments.iter().map(|c| c.body.clone()).collect::<Vec<_>>(),
                reviews.iter().map(|r| r.body.clone()).collect::<Vec<_>>(),
                lines.iter().map(|c| c.body.clone()).collect::<Vec<_>>(),
                kept.len() < 17 * 1024,
            ),
            (
                vec![kept.clone()],
                vec![Some(kept.clone()), None],
                vec![kept],
                true
            )
        );
    }

    /// Merging, approving, reviewing and auto-merge are refused by path,
    /// whatever built the request; reading reviews and the calls Paddock
    /// makes pass.
    #[test]
    fn merging_requests_are_refused_before_they_are_sent() {
        let cases = [
            (Method::PUT, "/repos/o/r/pulls/1/merge", false),
            (Method::POST, "/repos/o/r/pulls/1/reviews", false),
            (Method::POST, "/repos/o/r/pulls/1/reviews/7/events", false),
            (Method::PUT, "/repos/o/r/pulls/1/auto-merge", false),
            (Method::POST, "/repos/o/r/merges", false),
            (Method::POST, "/graphql", false),
            (Method::GET, "/repos/o/r/pulls/1/reviews", true),
            (Method::GET, "/repos/o/r/pulls?head=o%3Ab&state=open", true),
            (Method::POST, "/repos/o/r/pulls", true),
            (Method::PATCH, "/repos/o/r/pulls/1", true),
            (Method::POST, "/repos/o/r/issues/1/comments", true),
            (Method::POST, "/repos/o/r/issues/1/labels", true),
        ];
        let got: Vec<(String, bool)> = cases
            .iter()
            .map(|(m, p, _)| (format!("{m} {p}"), refuse_merging(m, p).is_ok()))
            .collect();
        let want: Vec<(String, bool)> = cases
            .iter()
            .map(|(m, p, ok)| (format!("{m} {p}"), *ok))
            .collect();
        assert_eq!(got, want);
    }
}

//! GitLab's REST API v4 for the forge seam, with reqwest and typed models
//! of the few shapes Paddock reads (a merge request, a note, a user, an
//! error). A pull request is a merge request here: a draft is a title
//! prefixed `Draft: `, the closeout is a note, a review is the merge
//! request's human notes, every page of them (system notes and Paddock's
//! own left out: its token's user's, and closeouts). The token is the
//! job's project access token (`gitlab_token.rs`; the host-held token
//! mints and revokes it, and edits the closeout an earlier publish of the
//! job posted, which only a note's author or a Maintainer may: the note
//! recorded in the job's artifacts, `gitlab_closeout.rs`), sent as
//! `PRIVATE-TOKEN` only to the API root the job spec names. Every request
//! passes [`refuse_merging`] first: a merge,
//! an approval or "merge when the pipeline succeeds" is refused before
//! anything is sent.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use reqwest::header::HeaderMap;
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::closeout::HEADING;
use super::forge::{
    Forge, ForgeError, Posted, PullRequest, PullRequestDraft, ReviewComment, Reviews,
};
use super::forge_http::{form, path_segment, raw_message, ForgeHttp};
use super::found_closeout::Found;
use crate::secret::Secret;

const FORGE: &str = "gitlab";

/// How a draft merge request's title starts.
pub const DRAFT_PREFIX: &str = "Draft: ";

/// One GitLab project, reached with a token of Paddock's.
pub struct GitLab {
    http: ForgeHttp,
    /// The project's id or its URL-encoded path.
    project: String,
    /// The project's numeric id, asked once (`GET /projects/:path`)
    /// when `project` is a path ([`GitLab::project_id`]).
    project_id: std::sync::OnceLock<u64>,
    token: Secret,
    /// The host-held token (a Maintainer's: it mints the job's tokens),
    /// used only to edit the closeout an earlier token of the same job
    /// posted: each token has its own bot user, and GitLab lets only a
    /// note's author or a Maintainer edit it.
    editor: Option<Secret>,
    /// Where the job's closeout note is recorded (`gitlab_closeout.rs`),
    /// for a client that posts a job's closeout.
    closeout_record: Option<PathBuf>,
}

/// The user GitLab moves a deleted user's notes and merge requests to (a
/// revoked token's bot user may be deleted; anyone may delete their own
/// account): one id for them all.
const GHOST: &str = "ghost";

#[derive(Debug, Deserialize)]
struct ApiMergeRequest {
    iid: u64,
    web_url: String,
    #[serde(default)]
    draft: bool,
    /// `opened`, `closed`, `merged` or `locked`.
    #[serde(default)]
    state: String,
    /// Who opened it (the bot user of the token that did, for one of
    /// Paddock's).
    #[serde(default)]
    author: Option<ApiUser>,
    /// The project its branch is in, and the one it is into: this
    /// project's merge requests include those from its forks' branches.
    #[serde(default)]
    source_project_id: Option<u64>,
    #[serde(default)]
    target_project_id: Option<u64>,
}

/// A project as `GET /projects/:id` gives it: its numeric id.
#[derive(Debug, Deserialize)]
struct ApiProject {
    id: u64,
}

#[derive(Debug, Deserialize)]
struct ApiNote {
    id: u64,
    #[serde(deserialize_with = "super::forge_http::cut_body")]
    body: String,
    author: ApiUser,
    #[serde(default)]
    system: bool,
    #[serde(default)]
    position: Option<ApiPosition>,
}

#[derive(Debug, Deserialize)]
struct ApiPosition {
    new_path: Option<String>,
    new_line: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct ApiUser {
    /// The user's id (a note's author's, to ask for their access; the
    /// merge request's, to know Paddock's own notes).
    #[serde(default)]
    id: u64,
    username: String,
}

/// A project member as `GET /projects/:id/members/all/:user_id` gives
/// it (direct or inherited).
#[derive(Debug, Deserialize)]
struct ApiMember {
    access_level: u64,
}

/// GitLab's Developer role: the least that may push to a branch.
const DEVELOPER: u64 = 30;

/// The most authors of a merge request's notes whose access is asked, in
/// the order they first commented; the notes of any after them are left
/// out of the next brief (counted).
const MAX_AUTHORS_ASKED: usize = 100;

#[derive(Serialize)]
struct NewMergeRequest<'a> {
    source_branch: &'a str,
    target_branch: &'a str,
    title: &'a str,
    description: &'a str,
    /// Comma-separated.
    #[serde(skip_serializing_if = "str::is_empty")]
    labels: &'a str,
}

#[derive(Serialize)]
struct MergeRequestUpdate<'a> {
    title: &'a str,
    description: &'a str,
    /// Added to the labels it has (a reviewer's stay).
    #[serde(skip_serializing_if = "str::is_empty")]
    add_labels: &'a str,
}

#[derive(Serialize)]
struct NewNote<'a> {
    body: &'a str,
}

/// `Err` for a request that would merge, approve or set "merge when the
/// pipeline succeeds": a path ending in `/merge`, `/approve` or
/// `/approvals`, naming a merge train or auto-merge, or a body or query
/// asking for `merge_when_pipeline_succeeds` or `auto_merge`.
pub fn refuse_merging(method: &Method, path: &str, body: Option<&str>) -> Result<(), ForgeError> {
    let lower = path.to_ascii_lowercase();
    let path_only = lower.split('?').next().unwrap_or(&lower);
    let asks = |s: &str| s.contains("merge_when_pipeline_succeeds") || s.contains("auto_merge");
    let refused = path_only.ends_with("/merge")
        || path_only.ends_with("/approve")
        || path_only.ends_with("/approvals")
        || path_only.contains("/merge_trains")
        || asks(&lower)
        || body.is_some_and(|b| asks(&b.to_ascii_lowercase()));
    if refused {
        return Err(ForgeError::NeverMerge {
            forge: FORGE,
            method: method.to_string(),
            path: path.split('?').next().unwrap_or(path).to_string(),
        });
    }
    Ok(())
}

/// GitLab's error body: `message` (a string, a list or a map of field to
/// messages) or `error`.
pub(super) fn error_message(bytes: &[u8]) -> String {
    let text = || raw_message(bytes);
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes) else {
        return text();
    };
    match value.get("message").or_else(|| value.get("error")) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => crate::output::keep_end(&other.to_string(), 500),
        None => text(),
    }
}

impl GitLab {
    /// The client for `project` (an id or a path) at the API root `api`.
    pub fn new(api: &str, project: &str, token: Secret) -> Result<GitLab, ForgeError> {
        Ok(GitLab {
            http: ForgeHttp::new(FORGE, api)?,
            project: path_segment(project),
            project_id: std::sync::OnceLock::new(),
            token,
            editor: None,
            closeout_record: None,
        })
    }

    /// The client with `editor`, the host-held token that may edit a
    /// closeout an earlier token of the job posted ([`GitLab::editor`]).
    pub fn with_editor(self, editor: Secret) -> GitLab {
        GitLab {
            editor: Some(editor),
            ..self
        }
    }

    /// The client recording the job's closeout note at `path`
    /// (`gitlab_closeout.rs`) and editing the note recorded there.
    pub fn with_closeout_record(self, path: PathBuf) -> GitLab {
        GitLab {
            closeout_record: Some(path),
            ..self
        }
    }

    /// This client, never waiting for a rate limit
    /// ([`ForgeHttp::without_waiting`]).
    pub fn without_waiting(self) -> GitLab {
        GitLab {
            http: self.http.without_waiting(),
            ..self
        }
    }

    pub(super) fn project_path(&self, rest: &str) -> String {
        format!("/projects/{}{rest}", self.project)
    }

    /// The project's numeric id: `project` when it is one, else asked of
    /// GitLab once (`GET /projects/:path`, its `id`).
    async fn project_id(&self) -> Result<u64, ForgeError> {
        if let Ok(id) = self.project.parse::<u64>() {
            return Ok(id);
        }
        if let Some(id) = self.project_id.get() {
            return Ok(*id);
        }
        let project: ApiProject = self
            .call(
                "read the project",
                Method::GET,
                &self.project_path(""),
                None,
            )
            .await?;
        Ok(*self.project_id.get_or_init(|| project.id))
    }

    pub(super) async fn call<T: DeserializeOwned>(
        &self,
        step: &'static str,
        method: Method,
        path: &str,
        body: Option<String>,
    ) -> Result<T, ForgeError> {
        Ok(self.call_with_headers(step, method, path, body).await?.0)
    }

    async fn call_with_headers<T: DeserializeOwned>(
        &self,
        step: &'static str,
        method: Method,
        path: &str,
        body: Option<String>,
    ) -> Result<(T, HeaderMap), ForgeError> {
        self.send_as(&self.token, step, method, path, body).await
    }

    /// A request with `token`.
    async fn send_as<T: DeserializeOwned>(
        &self,
        token: &Secret,
        step: &'static str,
        method: Method,
        path: &str,
        body: Option<String>,
    ) -> Result<(T, HeaderMap), ForgeError> {
        refuse_merging(&method, path, body.as_deref())?;
        let (req, url) = self.http.request(method, path);
        let mut req = req.header("PRIVATE-TOKEN", token.expose());
        if let Some(body) = body {
            req = req.header("Content-Type", "application/json").body(body);
        }
        self.http.send(step, &url, req, error_message).await
    }

    /// Every item of the list at `path`, every page of it.
    pub(super) async fn list<T: DeserializeOwned>(
        &self,
        step: &'static str,
        path: &str,
    ) -> Result<Vec<T>, ForgeError> {
        self.http
            .all_pages(step, path, |page| async move {
                self.call_with_headers(step, Method::GET, &page, None).await
            })
            .await
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

    /// The merge request from this project's `branch` into `target`
    /// (`state`: `opened` or `all`): the open one if there is one (an
    /// older one a reviewer reopened is it), else the newest. One from a
    /// fork's branch of the same name is never it: GitLab lists those
    /// among this project's merge requests and filters `source_branch` by
    /// name alone, and anyone may fork a public project, name a branch
    /// `paddock/<ticket>/<attempt>` and open it here; taken for the job's,
    /// it would get Paddock's title, body and closeout, its reviews would
    /// reach the next attempt, and closed, it would stop the job's branch
    /// being pushed. One that does not say where its branch is counts as
    /// a fork's. GitLab is asked for this project's own alone
    /// (`source_project_id`, [`GitLab::project_id`]), so forks' are not
    /// listed at all: only those who may push to the project make a
    /// merge request from its branch. Before, every fork's of the same
    /// branch name was listed and left out here, and more of them than
    /// `forge_http::MAX_PAGES` pages of 100 (anyone may fork and open
    /// them) failed the lookup, and with it the job's publish and its
    /// next attempt. Every page is still read (up to that bound, more an
    /// error), and forks' still left out here, should a GitLab ignore
    /// the filter: the job's must not be hidden behind them (its publish
    /// would open a second, which GitLab refuses, or miss that it ended).
    async fn merge_request_for(
        &self,
        branch: &str,
        target: &str,
        state: &str,
    ) -> Result<Option<ApiMergeRequest>, ForgeError> {
        let own = self.project_id().await?.to_string();
        let query = [
            ("source_branch", branch),
            ("source_project_id", own.as_str()),
            ("state", state),
            ("target_branch", target),
        ];
        let query = form(&query);
        let path = self.project_path(&format!("/merge_requests?{query}"));
        let found: Vec<ApiMergeRequest> = self.list("find the merge request", &path).await?;
        let mut own: Vec<ApiMergeRequest> = found
            .into_iter()
            .filter(|m| m.source_project_id.is_some() && m.source_project_id == m.target_project_id)
            .collect();
        let open = own.iter().position(|m| m.state == "opened").unwrap_or(0);
        Ok((open < own.len()).then(|| own.swap_remove(open)))
    }

    /// The id of the note on merge request `mr` (its notes at `path`)
    /// that is job `job`'s closeout, Paddock's own: the one recorded when
    /// it was posted (`gitlab_closeout.rs`), if it is still there, still
    /// this job's closeout and by the user recorded as its poster; with
    /// only its poster recorded (a kill between the post and the record of
    /// its note, or the post's answer lost), the first note of this job's
    /// closeout by that user; with no record (a job published before
    /// records were kept), the first note of this job's closeout by this
    /// publish's token's user, by id (never the opener's as such: anyone
    /// may open the job's branch as a merge request first). Never by a name: anyone may take a bot's display name, and
    /// GitLab's ghost user holds the notes of everyone deleted (a copy of
    /// the closeout whose author deleted their account too), so a merge
    /// request by the ghost (its bot user deleted) has none found this
    /// way. Anyone may add notes: past the bound, Paddock's is not looked
    /// for further, and a new closeout is posted. A record there but not
    /// read whole is an error: nothing is posted or edited. With only its
    /// poster recorded and the ghost holding notes of this closeout that
    /// cannot be told from a copy: [`Found::Unsure`] (`found_closeout.rs`).
    async fn closeout_of(
        &self,
        path: &str,
        mr: &PullRequest,
        job: &str,
    ) -> Result<Found, ForgeError> {
        let kept = match &self.closeout_record {
            Some(p) => super::gitlab_closeout::read_any(p)
                .map_err(|source| self.record_error(p, "read it", source))?,
            None => None,
        };
        let recorded = kept.filter(|r| r.merge_request == mr.number);
        let holds_ours = |n: &ApiNote| !n.system && super::closeout::job_of(&n.body) == Some(job);
        if let Some(id) = recorded.and_then(|r| r.note) {
            // Its author is not checked: GitLab gives a deleted user's
            // notes to its ghost (a revoked token's bot user).
            let note: Result<(ApiNote, _), _> = self
                .call_with_headers(
                    "read the closeout",
                    Method::GET,
                    &format!("{path}/{id}"),
                    None,
                )
                .await;
            return match note {
                Ok((note, _)) => Ok(Found::ours(holds_ours(&note).then_some(note.id))),
                // Deleted (a reviewer deleted the closeout).
                Err(ForgeError::Status { status: 404, .. }) => Ok(Found::Nothing),
                Err(e) => Err(e),
            };
        }
        let poster = recorded.and_then(|r| r.poster);
        // A record for another merge request: the job's closeout went
        // there, and every post is recorded before it is made, so none of
        // this job's is on this one unless by that record's poster; never
        // looked for by this one's opener, which may be anyone (who
        // opened the job's branch as a merge request of their own again, a
        // copy of the closeout on it). With no record at all (a job
        // published before records were kept), the token's user's: never
        // the opener as such, who may be anyone that opened the job's
        // branch as a merge request first, a copy of the closeout posted
        // while no record named Paddock's.
        let elsewhere = kept.filter(|r| r.merge_request != mr.number);
        let author = match (poster, elsewhere) {
            (Some(poster), _) => poster.to_string(),
            (None, Some(elsewhere)) => match elsewhere.poster {
                Some(poster) => poster.to_string(),
                None => return Ok(Found::Nothing),
            },
            (None, None) => self.token_user().await?.id.to_string(),
        };
        let listed = format!("{path}?sort=asc&order_by=created_at");
        let (notes, cut): (Vec<ApiNote>, _) = self
            .list_some("read the merge request's notes", &listed)
            .await?;
        let found = notes
            .iter()
            .find(|n| n.author.id.to_string() == author && holds_ours(n))
            .map(|n| n.id);
        // A poster recorded whose closeout is not found by it: its post
        // never made one, a reviewer deleted it, or its user was deleted
        // (a revoked token's bot) and the note is now the ghost's, which
        // an outsider's deleted copy may be too. The ghost's one note of
        // this closeout above the newest before the post is the post's
        // (a copy comes after what it copies, so it would be a second);
        // otherwise they cannot be told apart: none is edited, and a new
        // closeout is posted beside them.
        if let (None, Some(_), Some(_)) = (found, poster, &self.closeout_record) {
            let ghosts: Vec<u64> = notes
                .iter()
                .filter(|n| n.author.username == GHOST && holds_ours(n))
                .map(|n| n.id)
                .collect();
            let above: Vec<u64> = match recorded.and_then(|r| r.newest_before) {
                Some(newest) if !cut => ghosts.iter().copied().filter(|id| *id > newest).collect(),
                _ => Vec::new(),
            };
            if let [posted] = above.as_slice() {
                return Ok(Found::Ours(*posted));
            }
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

    /// Records that the user of this publish's token is about to post the
    /// job's closeout on merge request `iid`, before the post: a kill
    /// after it leaves the next publish that user to look for. Not
    /// recorded, nothing is posted.
    async fn record_posting(&self, iid: u64, notes: &str) -> Result<(), ForgeError> {
        let Some(path) = &self.closeout_record else {
            return Ok(());
        };
        let me = self.token_user().await?;
        // The newest note now: the post's is above it.
        let newest: Vec<ApiNote> = self
            .call(
                "read the newest note",
                Method::GET,
                &format!("{notes}?sort=desc&order_by=created_at&per_page=1"),
                None,
            )
            .await?;
        let record = super::gitlab_closeout::CloseoutNote {
            merge_request: iid,
            note: None,
            poster: Some(me.id),
            newest_before: Some(newest.first().map_or(0, |n| n.id)),
        };
        super::gitlab_closeout::write(path, record)
            .map_err(|source| self.record_error(path, "write it", source))
    }

    /// The user of this publish's token (a project or group token's bot
    /// user), who posts the closeout.
    async fn token_user(&self) -> Result<ApiUser, ForgeError> {
        self.call("read the token's user", Method::GET, "/user", None)
            .await
    }

    /// Records `note` as the job's closeout on merge request `iid`, for
    /// the next publish to edit; a record that cannot be written leaves
    /// the one before it (naming the note or its poster).
    fn record_closeout(&self, iid: u64, note: &ApiNote) {
        if let Some(path) = &self.closeout_record {
            let record = super::gitlab_closeout::CloseoutNote {
                merge_request: iid,
                note: Some(note.id),
                poster: Some(note.author.id),
                newest_before: None,
            };
            let _ = super::gitlab_closeout::write(path, record);
        }
    }
}

/// The id of the user who opened a merge request, as
/// [`PullRequest::author`]; none once that user is gone (the merge request
/// GitLab's ghost user's, whose id every deleted user's notes share).
fn opener(author: Option<ApiUser>) -> Option<String> {
    author
        .filter(|u| u.id != 0 && u.username != GHOST)
        .map(|u| u.id.to_string())
}

fn json<T: Serialize>(value: &T) -> Option<String> {
    serde_json::to_string(value).ok()
}

/// `title` as a draft's (once prefixed) or a ready one's.
fn titled(title: &str, draft: bool) -> String {
    let bare = title.strip_prefix(DRAFT_PREFIX).unwrap_or(title);
    if draft {
        format!("{DRAFT_PREFIX}{bare}")
    } else {
        bare.to_string()
    }
}

/// The closeout note `id` on merge request `mr`: its page is the merge
/// request's, held when it was read (`forge_url.rs`), and the note's
/// number; none when the merge request's address was not kept (its
/// warning said why).
fn note_posted(mr: &PullRequest, id: u64) -> Posted {
    Posted {
        url: mr.url.as_ref().map(|url| format!("{url}#note_{id}")),
        ..Posted::default()
    }
}

#[async_trait]
impl Forge for GitLab {
    fn name(&self) -> &'static str {
        FORGE
    }

    async fn find_pull_request(
        &self,
        branch: &str,
        base: &str,
    ) -> Result<Option<PullRequest>, ForgeError> {
        // The branch's merge request, open or not: one merged, closed or
        // locked is left as it is, never reopened nor opened again.
        Ok(self
            .merge_request_for(branch, base, "all")
            .await?
            .map(|mr| {
                let (url, refused_url) = self.http.held_url("the merge request", &mr.web_url);
                PullRequest {
                    number: mr.iid,
                    url,
                    refused_url,
                    created: false,
                    ended: (mr.state != "opened").then_some(mr.state),
                    draft: mr.draft,
                    author: opener(mr.author),
                }
            }))
    }

    async fn propose(
        &self,
        draft: &PullRequestDraft,
        found: Option<PullRequest>,
    ) -> Result<PullRequest, ForgeError> {
        let labels = draft.labels.join(",");
        let (mr, created) = match found {
            Some(ended) if ended.ended.is_some() => return Ok(ended),
            // An open one keeps its draft state (a reviewer may have marked
            // it ready).
            Some(open) => {
                let title = titled(&draft.title, open.draft);
                let update = MergeRequestUpdate {
                    title: &title,
                    description: &draft.body,
                    add_labels: &labels,
                };
                let path = self.project_path(&format!("/merge_requests/{}", open.number));
                let mr: ApiMergeRequest = self
                    .call(
                        "update the merge request",
                        Method::PUT,
                        &path,
                        json(&update),
                    )
                    .await?;
                (mr, false)
            }
            None => {
                let title = titled(&draft.title, draft.draft);
                let new = NewMergeRequest {
                    source_branch: &draft.head,
                    target_branch: &draft.base,
                    title: &title,
                    description: &draft.body,
                    labels: &labels,
                };
                let path = self.project_path("/merge_requests");
                let mr: ApiMergeRequest = self
                    .call("open the merge request", Method::POST, &path, json(&new))
                    .await?;
                (mr, true)
            }
        };
        let (url, refused_url) = self.http.held_url("the merge request", &mr.web_url);
        Ok(PullRequest {
            number: mr.iid,
            url,
            refused_url,
            created,
            ended: None,
            draft: mr.draft,
            author: opener(mr.author),
        })
    }

    async fn post_closeout(
        &self,
        pull_request: Option<&PullRequest>,
        body: &str,
    ) -> Result<Posted, ForgeError> {
        let Some(mr) = pull_request else {
            return Ok(Posted::default());
        };
        let path = self.project_path(&format!("/merge_requests/{}/notes", mr.number));
        // One closeout a job: publishing it again (`paddock publish`, also
        // after a kill that came after the post) edits the one an earlier
        // publish posted or edited ([`GitLab::closeout_of`]), with the
        // host-held token, a Maintainer's, since only a note's author or a
        // Maintainer may edit it, and each publish's token has its own bot
        // user. A merge request this publish opened has none yet; one whose
        // closeout a reviewer deleted gets a new one (also when the note
        // goes between the read and the edit: its 404). The note posted or
        // edited is recorded for the next publish. The ghost's notes of
        // the closeout that cannot be told from a copy are left as they
        // are, and a new one is posted (`found_closeout.rs`).
        let mut left = Vec::new();
        if let Some(job) = super::closeout::job_of(body).filter(|_| !mr.created) {
            let ours;
            (ours, left) = self.closeout_of(&path, mr, job).await?.into_parts();
            if let Some(ours) = ours {
                let token = self.editor.as_ref().unwrap_or(&self.token);
                let edited: Result<(ApiNote, _), _> = self
                    .send_as(
                        token,
                        "update the closeout",
                        Method::PUT,
                        &format!("{path}/{ours}"),
                        json(&NewNote { body }),
                    )
                    .await;
                match edited {
                    Ok((note, _)) => {
                        self.record_closeout(mr.number, &note);
                        return Ok(note_posted(mr, note.id));
                    }
                    // Deleted since it was found (a reviewer deleted the
                    // closeout): a new one is posted below.
                    Err(ForgeError::Status { status: 404, .. }) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        self.record_posting(mr.number, &path).await?;
        let note: ApiNote = self
            .call(
                "post the closeout",
                Method::POST,
                &path,
                json(&NewNote { body }),
            )
            .await?;
        self.record_closeout(mr.number, &note);
        let posted = note_posted(mr, note.id);
        Ok(Posted {
            warning: (!left.is_empty()).then(|| {
                super::found_closeout::left_beside(
                    FORGE,
                    "GitLab's ghost user",
                    "note",
                    &left,
                    posted.url.as_deref().unwrap_or("(its address not kept)"),
                )
            }),
            ..posted
        })
    }

    async fn review_comments(&self, branch: &str, base: &str) -> Result<Reviews, ForgeError> {
        let Some(mr) = self.merge_request_for(branch, base, "all").await? else {
            return Ok(Reviews::default());
        };
        let me: ApiUser = self
            .call("read the token's user", Method::GET, "/user", None)
            .await?;
        let path = self.project_path(&format!(
            "/merge_requests/{}/notes?sort=asc&order_by=created_at",
            mr.iid
        ));
        // Anyone may comment: what is past the bound is left unread, and
        // the brief says so, rather than no next attempt starting.
        let (notes, unread): (Vec<ApiNote>, _) =
            self.list_some("read the review notes", &path).await?;
        // Each job's token has its own bot user: an earlier job's closeout
        // is known by its heading.
        let notes: Vec<ApiNote> = notes
            .into_iter()
            .filter(|n| {
                !n.system
                    && n.author.username != me.username
                    && !n.body.trim().is_empty()
                    && !n.body.starts_with(HEADING)
            })
            .collect();
        // Each author's access to the project, asked once: Developer (30)
        // or above may push; anyone else (a Reporter, a Guest, someone who
        // is no member, as anyone commenting on a public project may be)
        // is left out of the brief.
        let mut writers = std::collections::HashMap::new();
        for n in &notes {
            // At most so many authors asked after (a request each): a
            // flood of commenters past them is left out, not asked after.
            if writers.contains_key(&n.author.id) || writers.len() == MAX_AUTHORS_ASKED {
                continue;
            }
            let path = self.project_path(&format!("/members/all/{}", n.author.id));
            let member: Result<ApiMember, ForgeError> = self
                .call("read a reviewer's access", Method::GET, &path, None)
                .await;
            let writes = match member {
                Ok(m) => m.access_level >= DEVELOPER,
                Err(ForgeError::Status { status: 404, .. }) => false,
                Err(e) => return Err(e),
            };
            writers.insert(n.author.id, writes);
        }
        let (notes, untrusted): (Vec<ApiNote>, Vec<ApiNote>) = notes
            .into_iter()
            .partition(|n| writers.get(&n.author.id).copied().unwrap_or(false));
        let comments = notes
            .into_iter()
            .map(|n| {
                let (path, line) = n
                    .position
                    .map(|p| (p.new_path, p.new_line))
                    .unwrap_or((None, None));
                ReviewComment {
                    author: n.author.username,
                    body: n.body,
                    path,
                    line,
                    state: None,
                }
            })
            .collect();
        Ok(Reviews {
            comments,
            untrusted: untrusted.len(),
            unread,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A note's body as long as GitLab allows (1,000,000 characters, here
    /// 2,000,000 bytes) is cut to `BODY_KEPT` as its page is read, its
    /// beginning (a closeout's heading and job line) kept: a flood of such
    /// notes on a public project's merge request holds no more than that
    /// each in Paddock's memory.
    #[test]
    fn a_long_notes_body_is_cut_as_it_is_read() {
        let body = format!(
            "{}T-1 attempt 1\n\nJob `job-0a`\n{}",
            super::super::closeout::HEADING,
            "é".repeat(1_000_000)
        );
        let page = serde_json::json!([
            {"id": 1, "body": body, "author": {"id": 2, "username": "alice"}},
        ]);
        let notes: Vec<ApiNote> = serde_json::from_value(page).unwrap();
        let mut kept = body.clone();
        crate::output::cap_string(&mut kept, super::super::forge_http::BODY_KEPT);
        assert_eq!(
            (
                notes[0].body.as_str(),
                notes[0].body.len() < 17 * 1024,
                super::super::closeout::job_of(&notes[0].body)
            ),
            (kept.as_str(), true, Some("job-0a"))
        );
    }

    /// Merging, approving and "merge when the pipeline succeeds" are
    /// refused before anything is sent; opening, updating, noting and
    /// reading are not.
    #[test]
    fn merging_and_approving_are_refused_before_sending() {
        let cases: [(Method, &str, Option<&str>, bool); 10] = [
            (
                Method::PUT,
                "/projects/a%2Fw/merge_requests/1/merge",
                None,
                false,
            ),
            (
                Method::POST,
                "/projects/a%2Fw/merge_requests/1/approve",
                None,
                false,
            ),
            (
                Method::POST,
                "/projects/7/merge_requests/1/approvals",
                None,
                false,
            ),
            (
                Method::POST,
                "/projects/7/merge_trains/merge_requests/1",
                None,
                false,
            ),
            (
                Method::PUT,
                "/projects/7/merge_requests/1",
                Some(r#"{"merge_when_pipeline_succeeds":true}"#),
                false,
            ),
            (
                Method::PUT,
                "/projects/7/merge_requests/1?auto_merge=true",
                None,
                false,
            ),
            (
                Method::GET,
                "/projects/7/merge_requests?source_branch=b&state=opened",
                None,
                true,
            ),
            (
                Method::POST,
                "/projects/7/merge_requests",
                Some(r#"{"title":"t"}"#),
                true,
            ),
            (
                Method::PUT,
                "/projects/7/merge_requests/1",
                Some(r#"{"title":"t"}"#),
                true,
            ),
            (
                Method::POST,
                "/projects/7/merge_requests/1/notes",
                Some(r#"{"body":"b"}"#),
                true,
            ),
        ];
        let got: Vec<(String, bool)> = cases
            .iter()
            .map(|(m, p, b, _)| (format!("{m} {p}"), refuse_merging(m, p, *b).is_ok()))
            .collect();
        let want: Vec<(String, bool)> = cases
            .iter()
            .map(|(m, p, _, ok)| (format!("{m} {p}"), *ok))
            .collect();
        assert_eq!(got, want);
        assert_eq!(
            refuse_merging(&Method::PUT, "/projects/7/merge_requests/1/merge?x=1", None)
                .unwrap_err()
                .to_string(),
            "gitlab: refused to send PUT /projects/7/merge_requests/1/merge: Paddock never merges, approves or enables auto-merge"
        );
    }

    #[test]
    fn a_draft_title_is_prefixed_once() {
        assert_eq!(
            [
                titled("T-1: fix", true),
                titled("Draft: T-1: fix", true),
                titled("Draft: T-1: fix", false),
                titled("T-1: fix", false),
            ],
            ["Draft: T-1: fix", "Draft: T-1: fix", "T-1: fix", "T-1: fix"].map(String::from)
        );
    }

    #[test]
    fn gitlab_error_bodies_are_read() {
        assert_eq!(
            [
                error_message(br#"{"message":"403 Forbidden"}"#),
                error_message(br#"{"message":["Another open merge request already exists"]}"#),
                error_message(br#"{"error":"invalid_token"}"#),
                error_message(b"Bad Gateway"),
            ],
            [
                "403 Forbidden",
                r#"["Another open merge request already exists"]"#,
                "invalid_token",
                "Bad Gateway",
            ]
            .map(String::from)
        );
    }
}

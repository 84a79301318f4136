//! A GitHub REST API **mock** for the results loop: pull requests (list by
//! `head`, `base` and `state`, newest first, create, update), issue labels
//! and comments (post, list, read one, edit; deleted by a reviewer between
//! a client's list or read and its edit: `delete_comment_when_listed`),
//! pull request reviews and review comments, every list paged as GitHub
//! pages them (`per_page`, 30 unless asked, `page`, a `Link` header),
//! answered in GitHub's own JSON
//! shapes and errors (`{"message", "documentation_url", "errors"}`: 401 Bad
//! credentials, 404 Not Found, 422 Validation Failed when a pull request
//! already exists for the head). It checks the bearer token and records
//! every request (method, path with query, authorization, body), so a test
//! can assert what was, and what was never, sent. `down` makes it answer
//! 503 like an outage, `stall` leaves requests unanswered (a hang),
//! `hold_mint_answers` mints a token and holds its answer back,
//! `answer_next_revocation` answers the next revocation as told (a rate limit),
//! `hang_revocations` leaves each `DELETE /installation/token` unanswered
//! while it lasts and then answers it 503 (the token stays alive: a
//! revocation that never got through). With [`MockGitHub::enable_app`] it is a GitHub App's
//! installation instead: `POST /app/installations/{id}/access_tokens`
//! checks the App's RS256 JWT (signature, `iss`, lifetime at most ten
//! minutes) and mints installation tokens (the first one is the token
//! given to `start`), which the repository routes then accept until
//! `DELETE /installation/token` revokes them (401 Bad credentials after).
//! Each token is an account's: the one given to `start` (and every
//! installation token) is `paddock-bot`'s, [`MockGitHub::add_token`] adds
//! another account's, whose pull requests and comments are that account's
//! (`GET /user` answers it; an installation token is refused there, 403
//! "Resource not accessible by integration", as GitHub refuses it). An
//! App's installation tokens are its bot account's, `<slug>[bot]`
//! ([`APP_SLUG`]): `GET /app` answers the App (its `id` and `slug`) to
//! the App's JWT only, and `GET /users/{login}` any account (its `login`,
//! `id` and `type`, `Bot` for a bot). [`MockGitHub::open_pull_as`] opens
//! a pull request as another account (one the App did not open).
//! `refuse_comments` answers each comment's post 403 (nothing posted),
//! `lose_comment_answers` posts it and answers 500 (the answer lost).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use http::{Method, StatusCode};
use serde_json::{json, Value};

use crate::forge_mock::{self, Incoming, Paging, Reply};

/// One request as the mock received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitHubRequest {
    pub method: String,
    /// The path and query, as sent.
    pub path: String,
    pub authorization: Option<String>,
    pub body: String,
}

/// A review (or line comment) the mock serves for a pull request.
#[derive(Debug, Clone)]
pub struct SeededReview {
    pub pull: u64,
    pub login: String,
    pub body: String,
    /// `Some(state)` for a review, `None` for a line comment.
    pub state: Option<String>,
    pub path: Option<String>,
    pub line: Option<u64>,
    /// The author's `author_association` (`COLLABORATOR`, `NONE`, ...).
    pub association: String,
}

/// The slug of the mock's GitHub App: its installation tokens post as
/// `paddock-app[bot]`.
pub const APP_SLUG: &str = "paddock-app";

/// The mock as a GitHub App installation.
struct App {
    id: u64,
    installation_id: u64,
    key: jsonwebtoken::DecodingKey,
    /// Extra permissions granted beyond those asked (a misconfigured App).
    grant_extra: Option<(String, String)>,
}

#[derive(Default)]
struct State {
    requests: Vec<GitHubRequest>,
    app: Option<App>,
    minted: Vec<String>,
    revoked: Vec<String>,
    pulls: Vec<Value>,
    labels: Vec<(u64, Vec<String>)>,
    comments: Vec<(u64, String)>,
    /// Users' permissions on the repository as `GET …/collaborators/
    /// LOGIN/permission` says them (`write` unless set).
    permissions: std::collections::HashMap<String, String>,
    /// The authors of comments not the token's own (by id).
    authors: std::collections::HashMap<usize, String>,
    /// Comments deleted (their ids), and those a reviewer deletes right
    /// after they are next listed.
    deleted: Vec<usize>,
    delete_when_listed: Vec<usize>,
    reviews: Vec<SeededReview>,
    /// Other accounts' tokens: token to login.
    accounts: std::collections::HashMap<String, String>,
    /// While set, a comment's post is refused (403), nothing posted.
    refuse_comments: bool,
    /// While set, a comment is posted and its answer lost (500).
    lose_comment_answers: bool,
}

/// The running mock.
#[derive(Clone)]
pub struct MockGitHub {
    /// The API root to configure (`results.github.api_url`).
    pub url: String,
    /// Where its pages are: the API root's host, as Paddock holds a
    /// forge's addresses to (`https://github.com/acme/widgets/pull/1`
    /// is `{web}/acme/widgets/pull/1` here).
    pub web: String,
    /// While set, every `html_url` answered is this
    /// ([`MockGitHub::answer_html_url`]).
    html_url: Arc<Mutex<Option<String>>>,
    owner: String,
    repo: String,
    token: String,
    state: Arc<Mutex<State>>,
    down: Arc<AtomicBool>,
    stall: Arc<AtomicBool>,
    hang_revocations: Arc<AtomicBool>,
    /// While set, a mint is made and its answer held back.
    hold_mints: Arc<AtomicBool>,
    /// Answers given, in order, to the next repository requests instead
    /// of the mock's own (a rate limit, a 502).
    scripted: Arc<Mutex<std::collections::VecDeque<Reply>>>,
    /// Answers given, in order, to the next revocations instead of the
    /// mock's own (a rate limit).
    scripted_revocations: Arc<Mutex<std::collections::VecDeque<Reply>>>,
}

fn error(status: StatusCode, message: &str, errors: Option<Value>) -> (StatusCode, Value) {
    let mut body = json!({
        "message": message,
        "documentation_url": "https://docs.github.com/rest",
        "status": status.as_u16().to_string(),
    });
    if let Some(errors) = errors {
        body["errors"] = errors;
    }
    (status, body)
}

impl MockGitHub {
    /// Serves `owner/repo` on loopback, accepting `token`.
    pub async fn start(owner: &str, repo: &str, token: &str) -> MockGitHub {
        let (listener, url) = forge_mock::bind().await;
        let mock = MockGitHub {
            web: url.clone(),
            url,
            html_url: Arc::default(),
            owner: owner.into(),
            repo: repo.into(),
            token: token.into(),
            state: Arc::default(),
            down: Arc::default(),
            stall: Arc::default(),
            hang_revocations: Arc::default(),
            hold_mints: Arc::default(),
            scripted: Arc::default(),
            scripted_revocations: Arc::default(),
        };
        let served = mock.clone();
        forge_mock::serve(listener, "application/json; charset=utf-8", move |req| {
            let mock = served.clone();
            async move { mock.answer(req).await }
        });
        mock
    }

    /// Answers `html_url` as every pull request's and comment's address
    /// (a hostile or broken forge's); `None`: its own again.
    pub fn answer_html_url(&self, html_url: Option<&str>) {
        *self.html_url.lock().unwrap() = html_url.map(str::to_string);
    }

    /// The address answered for `own`, the mock's own.
    fn html(&self, own: String) -> String {
        self.html_url.lock().unwrap().clone().unwrap_or(own)
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<GitHubRequest> {
        self.state.lock().unwrap().requests.clone()
    }

    /// The pull requests as stored (GitHub's JSON).
    pub fn pulls(&self) -> Vec<Value> {
        self.state.lock().unwrap().pulls.clone()
    }

    /// The comments posted, as (issue number, body), edits applied,
    /// deleted ones left out.
    pub fn comments(&self) -> Vec<(u64, String)> {
        let state = self.state.lock().unwrap();
        (1..=state.comments.len())
            .filter(|id| !state.deleted.contains(id))
            .map(|id| state.comments[id - 1].clone())
            .collect()
    }

    /// The ids of the comments not deleted, in order.
    pub fn comment_ids(&self) -> Vec<usize> {
        let state = self.state.lock().unwrap();
        (1..=state.comments.len())
            .filter(|id| !state.deleted.contains(id))
            .collect()
    }

    /// Sets `login`'s permission on the repository (`admin`, `write`,
    /// `read` or `none`, GitHub's legacy names: `maintain` says `write`,
    /// `triage` says `read`); every other user's is `write`.
    pub fn set_permission(&self, login: &str, permission: &str) {
        let mut state = self.state.lock().unwrap();
        state
            .permissions
            .insert(login.to_string(), permission.to_string());
    }

    /// Posts `body` on the issue `number` as `login` (someone else than
    /// the token's own user, `paddock-bot`); its id.
    pub fn comment_as(&self, number: u64, login: &str, body: &str) -> usize {
        let mut state = self.state.lock().unwrap();
        state.comments.push((number, body.to_string()));
        let id = state.comments.len();
        state.authors.insert(id, login.to_string());
        id
    }

    /// Accepts `token` as the token of the account `login` (another than
    /// `paddock-bot`): what it opens and posts is that account's.
    pub fn add_token(&self, token: &str, login: &str) {
        let mut state = self.state.lock().unwrap();
        state.accounts.insert(token.to_string(), login.to_string());
    }

    /// While `refused`, each comment's post is answered 403 and nothing is
    /// posted (a publish that fails once its pull request is open).
    pub fn refuse_comments(&self, refused: bool) {
        self.state.lock().unwrap().refuse_comments = refused;
    }

    /// While `lost`, each comment is posted and its answer lost (a 500): a
    /// publish killed between the post and learning its comment.
    pub fn lose_comment_answers(&self, lost: bool) {
        self.state.lock().unwrap().lose_comment_answers = lost;
    }

    /// Each comment not deleted as (its id, its author's login, its body).
    pub fn comments_by(&self) -> Vec<(usize, String, String)> {
        let state = self.state.lock().unwrap();
        (1..=state.comments.len())
            .filter(|id| !state.deleted.contains(id))
            .map(|id| {
                let login = state.authors.get(&id).map_or("paddock-bot", String::as_str);
                (id, login.to_string(), state.comments[id - 1].1.clone())
            })
            .collect()
    }

    /// Deletes the account `login` as GitHub does: its pull requests and
    /// comments become the ghost's (`ghost`, one id for all).
    pub fn delete_user(&self, login: &str) {
        let mut state = self.state.lock().unwrap();
        for pull in state.pulls.iter_mut() {
            if pull["user"]["login"] == login {
                pull["user"] = user(GHOST);
            }
        }
        let ids: Vec<usize> = (1..=state.comments.len())
            .filter(|id| state.authors.get(id).map_or("paddock-bot", String::as_str) == login)
            .collect();
        for id in ids {
            state.authors.insert(id, GHOST.to_string());
        }
    }

    /// Deletes the comment `id` (a reviewer deleted it).
    pub fn delete_comment(&self, id: usize) {
        self.state.lock().unwrap().deleted.push(id);
    }

    /// Deletes the comment `id` just after the next list of comments that
    /// shows it, or the next read of it (a reviewer deleting it between a
    /// client's list or read and its edit): gone from lists, a 404 for an
    /// edit.
    pub fn delete_comment_when_listed(&self, id: usize) {
        self.state.lock().unwrap().delete_when_listed.push(id);
    }

    /// The labels of each pull request, as added.
    pub fn labels(&self) -> Vec<(u64, Vec<String>)> {
        self.state.lock().unwrap().labels.clone()
    }

    /// Adds a review or line comment to serve.
    pub fn seed_review(&self, review: SeededReview) {
        self.state.lock().unwrap().reviews.push(review);
    }

    /// Makes the mock the installation `installation_id` of the App `id`
    /// whose public key is `public_pem`: only tokens it mints are accepted.
    pub fn enable_app(&self, id: u64, installation_id: u64, public_pem: &str) {
        self.state.lock().unwrap().app = Some(App {
            id,
            installation_id,
            key: jsonwebtoken::DecodingKey::from_rsa_pem(public_pem.as_bytes()).unwrap(),
            grant_extra: None,
        });
    }

    /// Makes the App grant `permission: access` beyond what is asked.
    pub fn grant_extra(&self, permission: &str, access: &str) {
        if let Some(app) = self.state.lock().unwrap().app.as_mut() {
            app.grant_extra = Some((permission.into(), access.into()));
        }
    }

    /// The installation tokens minted, in order.
    pub fn minted(&self) -> Vec<String> {
        self.state.lock().unwrap().minted.clone()
    }

    /// The installation tokens revoked, in order.
    pub fn revoked(&self) -> Vec<String> {
        self.state.lock().unwrap().revoked.clone()
    }

    /// `(status, body)` for the App's routes, `None` for other paths.
    fn app_route(
        &self,
        state: &mut State,
        method: &Method,
        route: &str,
        bearer: &str,
        input: &Value,
    ) -> Option<(StatusCode, Value)> {
        let app = state.app.as_ref()?;
        if *method == Method::DELETE && route == "/installation/token" {
            if !state.minted.iter().any(|t| t == bearer)
                || state.revoked.iter().any(|t| t == bearer)
            {
                return Some(error(StatusCode::UNAUTHORIZED, "Bad credentials", None));
            }
            state.revoked.push(bearer.to_string());
            return Some((StatusCode::NO_CONTENT, Value::Null));
        }
        if *method == Method::GET && route == "/app" {
            if let Err(refused) = app_jwt(app, bearer) {
                return Some(refused);
            }
            return Some((
                StatusCode::OK,
                json!({
                    "id": app.id,
                    "slug": APP_SLUG,
                    "node_id": format!("A_kw{}", app.id),
                    "name": "Paddock App",
                    "owner": user(&self.owner),
                    "html_url": format!("https://github.com/apps/{APP_SLUG}"),
                }),
            ));
        }
        let wanted = format!("/app/installations/{}/access_tokens", app.installation_id);
        if *method != Method::POST || route != wanted {
            return None;
        }
        if let Err(refused) = app_jwt(app, bearer) {
            return Some(refused);
        }
        let mut permissions = input["permissions"].clone();
        if !permissions.is_object() {
            permissions = json!({"contents": "write", "pull_requests": "write", "issues": "write", "administration": "write"});
        }
        permissions["metadata"] = json!("read");
        if let Some((k, v)) = &app.grant_extra {
            permissions[k.as_str()] = json!(v);
        }
        let repositories: Vec<Value> = match input["repositories"].as_array() {
            Some(names) => names
                .iter()
                .map(|n| json!({"name": n, "full_name": format!("{}/{}", self.owner, n.as_str().unwrap_or_default())}))
                .collect(),
            None => Vec::new(),
        };
        let token = match state.minted.len() {
            0 => self.token.clone(),
            n => format!("{}_{n}", self.token),
        };
        state.minted.push(token.clone());
        let mut answer = json!({
            "token": token,
            "expires_at": "2026-01-01T01:00:00Z",
            "permissions": permissions,
            "repository_selection": if repositories.is_empty() { "all" } else { "selected" },
        });
        if !repositories.is_empty() {
            answer["repositories"] = Value::Array(repositories);
        }
        Some((StatusCode::CREATED, answer))
    }

    /// While `stall`, every request is recorded and then left unanswered
    /// until the stall ends (a forge that hangs mid-publish).
    pub fn set_stall(&self, stall: bool) {
        self.stall.store(stall, Ordering::SeqCst);
    }

    /// While `hold`, an installation token is minted (in
    /// [`MockGitHub::minted`] at once) and its answer held back until the
    /// hold ends (GitHub made the token; its answer is slow to arrive).
    pub fn hold_mint_answers(&self, hold: bool) {
        self.hold_mints.store(hold, Ordering::SeqCst);
    }

    /// While `hang`, each `DELETE /installation/token` is recorded and
    /// left unanswered; once the hang ends it is answered 503 Service
    /// Unavailable and revokes nothing (its client may have given up long
    /// before), so [`MockGitHub::revoked`] lists only revocations that got
    /// through.
    pub fn hang_revocations(&self, hang: bool) {
        self.hang_revocations.store(hang, Ordering::SeqCst);
    }

    /// Answers every request with 503 while `down`.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    /// Answers the next repository request (after it is recorded) with
    /// `status`, GitHub's error body with `message`, and `headers`, as
    /// GitHub answers a spent rate limit (403 with `x-ratelimit-remaining:
    /// 0`), a secondary one (429 or 403 with `retry-after`) or a bad
    /// gateway (502); several calls answer the next requests in turn.
    pub fn answer_next(&self, status: u16, message: &str, headers: &[(&str, &str)]) {
        let status = StatusCode::from_u16(status).unwrap();
        let (status, body) = error(status, message, None);
        self.scripted.lock().unwrap().push_back(Reply {
            status,
            body,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        });
    }

    /// Answers the next `DELETE /installation/token` with `status`, GitHub's
    /// error body of `message` and `headers` (revoking nothing).
    pub fn answer_next_revocation(&self, status: u16, message: &str, headers: &[(&str, &str)]) {
        let status = StatusCode::from_u16(status).unwrap();
        let (status, body) = error(status, message, None);
        self.scripted_revocations.lock().unwrap().push_back(Reply {
            status,
            body,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        });
    }

    /// Opens a pull request from `head` into `base` as the account
    /// `login` (a person, or another token's account: not the App's), as
    /// GitHub would; its number.
    pub fn open_pull_as(&self, login: &str, head: &str, base: &str) -> u64 {
        let mut state = self.state.lock().unwrap();
        let number = state.pulls.len() as u64 + 1;
        let mut pull = self.pull_json(number, "Opened by hand", head, base, "", false);
        pull["user"] = user(login);
        state.pulls.push(pull);
        number
    }

    /// Reopens the pull request `number`, as a reviewer may.
    pub fn reopen_pull(&self, number: u64) {
        let mut state = self.state.lock().unwrap();
        if let Some(pull) = state
            .pulls
            .iter_mut()
            .find(|p| p["number"].as_u64() == Some(number))
        {
            pull["state"] = json!("open");
            pull["closed_at"] = Value::Null;
        }
    }

    /// Ends the pull request `number` as a reviewer would: merged, or
    /// closed unmerged (`state` `closed`, `merged_at` set or null).
    pub fn end_pull(&self, number: u64, merged: bool) {
        let mut state = self.state.lock().unwrap();
        if let Some(pull) = state
            .pulls
            .iter_mut()
            .find(|p| p["number"].as_u64() == Some(number))
        {
            pull["state"] = json!("closed");
            pull["merged"] = json!(merged);
            pull["merged_at"] = match merged {
                true => json!("2026-01-02T00:00:00Z"),
                false => Value::Null,
            };
            pull["closed_at"] = json!("2026-01-02T00:00:00Z");
        }
    }

    fn pull_json(
        &self,
        number: u64,
        title: &str,
        head: &str,
        base: &str,
        body: &str,
        draft: bool,
    ) -> Value {
        let html = self.html(format!(
            "{}/{}/{}/pull/{number}",
            self.web, self.owner, self.repo
        ));
        json!({
            "url": format!("{}/repos/{}/{}/pulls/{number}", self.url, self.owner, self.repo),
            "id": 1000 + number,
            "node_id": format!("PR_kw{number}"),
            "html_url": html,
            "number": number,
            "state": "open",
            "locked": false,
            "title": title,
            "user": user("paddock-bot"),
            "body": body,
            "labels": [],
            "draft": draft,
            "merged": false,
            "merged_at": null,
            "mergeable": null,
            "auto_merge": null,
            "head": {"label": format!("{}:{head}", self.owner), "ref": head, "sha": "0000000000000000000000000000000000000000"},
            "base": {"label": format!("{}:{base}", self.owner), "ref": base, "sha": "0000000000000000000000000000000000000000"},
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z",
        })
    }

    async fn answer(&self, req: Incoming) -> Reply {
        let authorization = req.header("authorization");
        self.state.lock().unwrap().requests.push(GitHubRequest {
            method: req.method.to_string(),
            path: req.path.clone(),
            authorization: authorization.clone(),
            body: req.body.clone(),
        });
        let Incoming {
            method, path, body, ..
        } = req;
        while self.stall.load(Ordering::SeqCst) {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        if method == Method::DELETE
            && path == "/installation/token"
            && self.hang_revocations.load(Ordering::SeqCst)
        {
            while self.hang_revocations.load(Ordering::SeqCst) {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            return error(StatusCode::SERVICE_UNAVAILABLE, "Service Unavailable", None).into();
        }
        if self.down.load(Ordering::SeqCst) {
            return error(StatusCode::SERVICE_UNAVAILABLE, "Service Unavailable", None).into();
        }
        if method == Method::DELETE && path == "/installation/token" {
            if let Some(reply) = self.scripted_revocations.lock().unwrap().pop_front() {
                return reply;
            }
        }
        let (route, query) = path.split_once('?').unwrap_or((&path, ""));
        let bearer = authorization
            .as_deref()
            .and_then(|a| a.strip_prefix("Bearer "))
            .unwrap_or_default()
            .to_string();
        let input: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        let minted = {
            let mut state = self.state.lock().unwrap();
            self.app_route(&mut state, &method, route, &bearer, &input)
        };
        if let Some(answer) = minted {
            if method == Method::POST {
                while self.hold_mints.load(Ordering::SeqCst) {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
            }
            return answer.into();
        }
        {
            let state = self.state.lock().unwrap();
            let valid = if state.app.is_some() {
                state.minted.contains(&bearer) && !state.revoked.contains(&bearer)
            } else {
                bearer == self.token || state.accounts.contains_key(&bearer)
            };
            if !valid {
                return error(StatusCode::UNAUTHORIZED, "Bad credentials", None).into();
            }
            if method == Method::GET && route == "/user" {
                if state.app.is_some() {
                    return error(
                        StatusCode::FORBIDDEN,
                        "Resource not accessible by integration",
                        None,
                    )
                    .into();
                }
                let login = state
                    .accounts
                    .get(&bearer)
                    .map_or("paddock-bot", String::as_str);
                return (StatusCode::OK, user(login)).into();
            }
            if let (&Method::GET, Some(login)) = (&method, route.strip_prefix("/users/")) {
                let login = percent_decoded(login);
                if login.is_empty() || login.contains('/') {
                    return error(StatusCode::NOT_FOUND, "Not Found", None).into();
                }
                return (StatusCode::OK, user(&login)).into();
            }
        }
        let login = self.account_of(&bearer);
        let prefix = format!("/repos/{}/{}/", self.owner, self.repo);
        if route.starts_with(&prefix) {
            if let Some(reply) = self.scripted.lock().unwrap().pop_front() {
                return reply;
            }
        }
        let Some(rest) = route.strip_prefix(&prefix) else {
            return error(StatusCode::NOT_FOUND, "Not Found", None).into();
        };
        let parts: Vec<&str> = rest.split('/').collect();
        let mut state = self.state.lock().unwrap();
        let number = |n: &str| n.parse::<u64>().unwrap_or(0);
        let answer = match (&method, parts.as_slice()) {
            (&Method::GET, ["pulls"]) => {
                let url = format!("{}{route}", self.url);
                return forge_mock::page(list_pulls(&state, query), &url, query, Paging::GitHub);
            }
            (&Method::POST, ["pulls"]) => self.create_pull(&mut state, &input, &login),
            (&Method::PATCH, ["pulls", n]) => update_pull(&mut state, number(n), &input),
            (&Method::POST, ["issues", n, "labels"]) => add_labels(&mut state, number(n), &input),
            (&Method::POST, ["issues", n, "comments"]) => {
                if state.refuse_comments {
                    return error(StatusCode::FORBIDDEN, "Resource not accessible", None).into();
                }
                let posted = self.add_comment(&mut state, number(n), &input, &login);
                if state.lose_comment_answers {
                    return error(StatusCode::INTERNAL_SERVER_ERROR, "Server Error", None).into();
                }
                posted
            }
            (&Method::GET, ["issues", "comments", id]) => {
                match usize::try_from(number(id)).ok().filter(|id| {
                    (1..=state.comments.len()).contains(id) && !state.deleted.contains(id)
                }) {
                    Some(id) => {
                        let answer = self.comment_json(&state, id);
                        if state.delete_when_listed.contains(&id) {
                            state.delete_when_listed.retain(|d| *d != id);
                            state.deleted.push(id);
                        }
                        (StatusCode::OK, answer)
                    }
                    None => error(StatusCode::NOT_FOUND, "Not Found", None),
                }
            }
            (&Method::GET, ["issues", n, "comments"]) => {
                let items = self.list_comments(&state, number(n));
                let listed: Vec<usize> = items
                    .iter()
                    .filter_map(|c| c["id"].as_u64())
                    .filter_map(|id| usize::try_from(id).ok())
                    .collect();
                let gone: Vec<usize> = state
                    .delete_when_listed
                    .iter()
                    .copied()
                    .filter(|id| listed.contains(id))
                    .collect();
                state.delete_when_listed.retain(|id| !gone.contains(id));
                state.deleted.extend(gone);
                let url = format!("{}{route}", self.url);
                return forge_mock::page(items, &url, query, Paging::GitHub);
            }
            (&Method::PATCH, ["issues", "comments", id]) => {
                self.edit_comment(&mut state, number(id), &input)
            }
            (&Method::GET, ["collaborators", login, "permission"]) => {
                let permission = state
                    .permissions
                    .get(*login)
                    .map_or("write", String::as_str);
                (
                    StatusCode::OK,
                    json!({"permission": permission, "role_name": permission, "user": {"login": login}}),
                )
            }
            (&Method::GET, ["pulls", n, kind @ ("reviews" | "comments")]) => {
                let items = list_reviews(&state, number(n), *kind == "reviews");
                let url = format!("{}{route}", self.url);
                return forge_mock::page(items, &url, query, Paging::GitHub);
            }
            _ => error(StatusCode::NOT_FOUND, "Not Found", None),
        };
        answer.into()
    }

    /// The login of the account whose token `bearer` is (`paddock-bot`'s
    /// unless [`MockGitHub::add_token`] gave it to another).
    fn account_of(&self, bearer: &str) -> String {
        let state = self.state.lock().unwrap();
        if state.app.is_some() && state.minted.iter().any(|t| t == bearer) {
            return format!("{APP_SLUG}[bot]");
        }
        state
            .accounts
            .get(bearer)
            .cloned()
            .unwrap_or_else(|| "paddock-bot".to_string())
    }

    /// `POST /repos/O/R/pulls`: 422 when an open one has the head and
    /// the base (GitHub allows one of a head into each base).
    fn create_pull(&self, state: &mut State, input: &Value, login: &str) -> (StatusCode, Value) {
        let head = input["head"].as_str().unwrap_or_default().to_string();
        let label = format!("{}:{head}", self.owner);
        let base = input["base"].as_str().unwrap_or_default();
        if state.pulls.iter().any(|p| {
            p["head"]["label"] == label.as_str() && p["base"]["ref"] == base && p["state"] == "open"
        }) {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Validation Failed",
                Some(
                    json!([{"resource": "PullRequest", "code": "custom", "message": format!("A pull request already exists for {label}.")}]),
                ),
            );
        }
        let number = state.pulls.len() as u64 + 1;
        let mut pull = self.pull_json(
            number,
            input["title"].as_str().unwrap_or_default(),
            &head,
            input["base"].as_str().unwrap_or_default(),
            input["body"].as_str().unwrap_or_default(),
            input["draft"].as_bool().unwrap_or(false),
        );
        pull["user"] = user(login);
        state.pulls.push(pull.clone());
        (StatusCode::CREATED, pull)
    }

    /// `POST /repos/O/R/issues/N/comments`.
    fn add_comment(
        &self,
        state: &mut State,
        number: u64,
        input: &Value,
        login: &str,
    ) -> (StatusCode, Value) {
        state.comments.push((
            number,
            input["body"].as_str().unwrap_or_default().to_string(),
        ));
        let id = state.comments.len();
        if login != "paddock-bot" {
            state.authors.insert(id, login.to_string());
        }
        (StatusCode::CREATED, self.comment_json(state, id))
    }

    /// The comment `id` (its place in `comments`, from 1) as GitHub
    /// answers it.
    fn comment_json(&self, state: &State, id: usize) -> Value {
        let (number, body) = &state.comments[id - 1];
        json!({
            "id": id,
            "html_url": self.html(format!("{}/{}/{}/pull/{number}#issuecomment-{id}", self.web, self.owner, self.repo)),
            "issue_url": format!("{}/repos/{}/{}/issues/{number}", self.url, self.owner, self.repo),
            "body": body,
            "user": user(state.authors.get(&id).map_or("paddock-bot", String::as_str)),
            "created_at": "2026-01-01T00:00:00Z",
        })
    }

    /// `GET /repos/O/R/issues/N/comments`: the comments, all of
    /// them (paged by the caller).
    fn list_comments(&self, state: &State, number: u64) -> Vec<Value> {
        (1..=state.comments.len())
            .filter(|id| state.comments[id - 1].0 == number && !state.deleted.contains(id))
            .map(|id| self.comment_json(state, id))
            .collect()
    }

    /// `PATCH /repos/O/R/issues/comments/ID`: its body replaced.
    fn edit_comment(&self, state: &mut State, id: u64, input: &Value) -> (StatusCode, Value) {
        let Some(comment) = usize::try_from(id)
            .ok()
            .filter(|id| (1..=state.comments.len()).contains(id) && !state.deleted.contains(id))
        else {
            return error(StatusCode::NOT_FOUND, "Not Found", None);
        };
        state.comments[comment - 1].1 = input["body"].as_str().unwrap_or_default().to_string();
        (StatusCode::OK, self.comment_json(state, comment))
    }
}

/// `GET /repos/O/R/pulls?head=…&base=…&state=…` (open ones unless
/// `state=all`).
fn list_pulls(state: &State, query: &str) -> Vec<Value> {
    let q = crate::entra::form(query);
    let head = q.get("head").cloned();
    let base = q.get("base").cloned();
    let open_only = q.get("state").map(String::as_str) != Some("all");
    // Newest first, as GitHub sorts by default (and as `sort=created&
    // direction=desc` asks); paged by the caller.
    state
        .pulls
        .iter()
        .rev()
        .filter(|p| head.as_deref().is_none_or(|h| p["head"]["label"] == h))
        .filter(|p| base.as_deref().is_none_or(|b| p["base"]["ref"] == b))
        .filter(|p| !open_only || p["state"] == "open")
        .cloned()
        .collect()
}

/// `PATCH /repos/O/R/pulls/N`: the title and body.
fn update_pull(state: &mut State, number: u64, input: &Value) -> (StatusCode, Value) {
    let Some(pull) = state
        .pulls
        .iter_mut()
        .find(|p| p["number"].as_u64() == Some(number))
    else {
        return error(StatusCode::NOT_FOUND, "Not Found", None);
    };
    for key in ["title", "body"] {
        if let Some(v) = input.get(key) {
            pull[key] = v.clone();
        }
    }
    (StatusCode::OK, pull.clone())
}

/// `POST /repos/O/R/issues/N/labels`.
fn add_labels(state: &mut State, number: u64, input: &Value) -> (StatusCode, Value) {
    let labels: Vec<String> = input["labels"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|l| l.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    state.labels.push((number, labels.clone()));
    let out: Vec<Value> = labels
        .iter()
        .enumerate()
        .map(|(i, l)| json!({"id": i + 1, "name": l, "color": "ededed", "default": false}))
        .collect();
    (StatusCode::OK, Value::Array(out))
}

/// `GET /repos/O/R/pulls/N/reviews` (`reviews`) or `…/comments` (line
/// comments), all of them (paged by the caller).
fn list_reviews(state: &State, number: u64, reviews: bool) -> Vec<Value> {
    state
        .reviews
        .iter()
        .filter(|r| r.pull == number && (r.state.is_some() == reviews))
        .enumerate()
        .map(|(i, r)| match &r.state {
            Some(s) => json!({"id": i + 1, "user": {"login": r.login}, "body": r.body, "state": s, "submitted_at": "2026-01-01T00:00:00Z", "author_association": r.association}),
            None => json!({"id": i + 1, "user": {"login": r.login}, "body": r.body, "path": r.path, "line": r.line, "side": "RIGHT", "author_association": r.association}),
        })
        .collect()
}

/// A GitHub App's RSA key made with `openssl` in `dir`: the private key's
/// path (PEM) and the public key (PEM); `None` when openssl cannot make it.
pub fn app_key(dir: &std::path::Path) -> Option<(std::path::PathBuf, String)> {
    crate::google::rsa_key(&dir.join("app.pem"))
}

/// The account GitHub gives a deleted account's pull requests and
/// comments.
pub const GHOST: &str = "ghost";

/// An account as GitHub answers it: the token's own (`paddock-bot`, id 1),
/// the ghost (GitHub's id for it, 10137), anyone else an id made of their
/// login (stable, never 1).
fn user(login: &str) -> Value {
    let id = match login {
        "paddock-bot" => 1,
        GHOST => 10137,
        other => {
            200 + other.bytes().fold(0u64, |h, b| {
                h.wrapping_mul(31).wrapping_add(u64::from(b)) % 1_000_000
            })
        }
    };
    let bot = login == "paddock-bot" || login.ends_with("[bot]");
    json!({"login": login, "id": id, "type": if bot { "Bot" } else { "User" }})
}

/// Whether `bearer` is the App's JWT (RS256, its `iss`, a lifetime of at
/// most ten minutes), else GitHub's refusal.
fn app_jwt(app: &App, bearer: &str) -> Result<(), (StatusCode, Value)> {
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
    validation.set_required_spec_claims(&["exp", "iat", "iss"]);
    validation.set_issuer(&[app.id.to_string()]);
    let claims = match jsonwebtoken::decode::<Value>(bearer, &app.key, &validation) {
        Ok(data) => data.claims,
        Err(_) => {
            return Err(error(
                StatusCode::UNAUTHORIZED,
                "A JSON web token could not be decoded",
                None,
            ))
        }
    };
    let lifetime = claims["exp"].as_i64().unwrap_or(0) - claims["iat"].as_i64().unwrap_or(0);
    if lifetime > 11 * 60 {
        return Err(error(
            StatusCode::UNAUTHORIZED,
            "'Expiration time' claim ('exp') is too far in the future",
            None,
        ));
    }
    Ok(())
}

/// A path segment with its `%XX` escapes decoded (`paddock-app%5Bbot%5D`
/// is `paddock-app[bot]`); an escape that is not one is kept as it is.
fn percent_decoded(segment: &str) -> String {
    percent_encoding::percent_decode_str(segment)
        .decode_utf8_lossy()
        .into_owned()
}

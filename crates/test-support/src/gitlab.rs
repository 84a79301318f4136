//! A GitLab REST API v4 **mock** for the results loop: merge requests
//! (list by `source_branch`, `source_project_id`, `target_branch` and
//! `state`, paged as notes are, create, update; the project itself, `GET
//! /projects/:path`, its numeric id), their notes
//! (post, or refused with a 500 while `refuse_notes`, or posted and
//! answered with a 500 while `lose_note_answers`; list paged as GitLab
//! pages them: `page`, `per_page`, `Link` and the `X-Next-Page`… headers,
//! newest first unless `sort=asc`, as GitLab's default is;
//! with system notes and line positions; one read, `GET …/notes/:id`;
//! edit, `PUT …/notes/:id`, as GitLab allows it: by the note's author or a
//! Maintainer, else 403; a minted token's bot user is named after the
//! token, as GitLab names it; deleted by a reviewer, also between a
//! client's read and its edit: `delete_note_when_listed`), a user deleted
//! as GitLab deletes one (`delete_user`: their notes and merge requests
//! become the ghost user's),
//! `GET /user`, and project access tokens (`POST`, `GET` and `DELETE
//! /projects/:id/access_tokens[/:token_id]`: name, scopes, access level
//! and expiry checked as GitLab checks them, each token with its own bot
//! user `project_42_bot_…`, a revoked or expired one refused from then on),
//! answered in GitLab's own JSON shapes and errors (`{"message": …}` or
//! `{"error": …}`: 400, 401 Unauthorized, 403 Forbidden, 404 Not Found,
//! 409 when an open merge request already exists for the source branch,
//! as GitLab validates it: the same source project, source branch and
//! target branch; merge requests from a fork's branch, listed among this
//! project's with the fork's `source_project_id`, as GitLab lists them).
//! The token given to `start` is a Maintainer's (it alone may manage
//! access tokens); a minted token acts as its bot at its access level. It
//! checks the token (`PRIVATE-TOKEN` or `Authorization: Bearer`) and
//! records every request (method, path with query, the token header,
//! body), so a test can assert what was, and what was never, sent; its
//! [`MockGitLab::git_authorization_ok`] is the check a git remote makes
//! of a push's HTTP basic credential. Served under `/api/v4`; `down`
//! answers 503 like an outage.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use http::{Method, StatusCode};
use serde_json::{json, Value};

use crate::forge_mock::{self, Incoming, Paging, Reply};

/// One request as the mock received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitLabRequest {
    pub method: String,
    /// The path (below `/api/v4`) and query, as sent.
    pub path: String,
    /// `PRIVATE-TOKEN: …` or `Authorization: …`, as sent.
    pub token_header: Option<String>,
    pub body: String,
}

/// The user the Maintainer's token (the one given to `start`) belongs to.
pub const BOT: &str = "paddock-bot";

/// The user GitLab gives a deleted user's notes and merge requests.
pub const GHOST: &str = "ghost";

/// The project's numeric id.
pub const PROJECT_ID: u64 = 42;

/// The access levels GitLab knows (Guest … Owner).
const ACCESS_LEVELS: [u64; 5] = [10, 20, 30, 40, 50];

/// The scopes a project access token may have.
const SCOPES: [&str; 9] = [
    "api",
    "read_api",
    "read_registry",
    "write_registry",
    "read_repository",
    "write_repository",
    "create_runner",
    "manage_runner",
    "ai_features",
];

/// A project access token the mock minted.
#[derive(Debug, Clone)]
struct AccessToken {
    id: u64,
    name: String,
    scopes: Vec<String>,
    access_level: u64,
    expires_at: String,
    value: String,
    revoked: bool,
    bot: String,
}

impl AccessToken {
    /// GitLab's JSON for it (`token` only when just created).
    fn json(&self, with_value: bool, today: &str) -> Value {
        let mut v = json!({
            "id": self.id,
            "name": self.name,
            "revoked": self.revoked,
            "created_at": "2026-01-01T00:00:00.000Z",
            "description": null,
            "scopes": self.scopes,
            "user_id": 1000 + self.id,
            "last_used_at": null,
            "active": self.active(today),
            "expires_at": self.expires_at,
            "access_level": self.access_level,
        });
        if with_value {
            v["token"] = json!(self.value);
        }
        v
    }

    fn active(&self, today: &str) -> bool {
        !self.revoked && self.expires_at.as_str() > today
    }
}

/// Who a request's token is.
enum Caller {
    /// The Maintainer's token given to `start`.
    Maintainer,
    /// A minted access token, by index.
    Minted(usize),
}

#[derive(Default)]
struct State {
    requests: Vec<GitLabRequest>,
    merge_requests: Vec<Value>,
    /// (merge request iid, note as GitLab's JSON).
    notes: Vec<(u64, Value)>,
    /// Notes a reviewer deletes right after they are next listed or read
    /// (the answer shows them, the note gone for what follows).
    delete_when_listed: Vec<u64>,
    /// How many notes were ever made (ids are never given twice, as
    /// GitLab's, a deleted note's included).
    notes_made: u64,
    /// Each note author's user id, by username, in the order first seen.
    users: Vec<String>,
    /// Project access by username: absent, Developer (30); `None` a
    /// user who is no member ([`MockGitLab::set_access`]).
    access: std::collections::HashMap<String, Option<u64>>,
    tokens: Vec<AccessToken>,
}

/// The running mock.
#[derive(Clone)]
pub struct MockGitLab {
    /// The API root to configure (`results.gitlab.api_url`).
    pub url: String,
    /// Where its pages are: the API root's host, as Paddock holds a
    /// forge's addresses to (`https://gitlab.example/acme/widgets/-/
    /// merge_requests/1` is `{web}/acme/widgets/-/merge_requests/1` here).
    pub web: String,
    /// While set, every merge request's `web_url` is this
    /// ([`MockGitLab::answer_web_url`]).
    web_url: Arc<Mutex<Option<String>>>,
    /// The project as it appears in paths (`acme%2Fwidgets`).
    project: String,
    project_path: String,
    token: String,
    state: Arc<Mutex<State>>,
    down: Arc<AtomicBool>,
    /// The host's token is a Developer's, not a Maintainer's.
    developer: Arc<AtomicBool>,
    /// Posting a note answers 500 ([`MockGitLab::refuse_notes`]).
    refuse_notes: Arc<AtomicBool>,
    /// Posting a note posts it but answers 500
    /// ([`MockGitLab::lose_note_answers`]).
    lose_note_answers: Arc<AtomicBool>,
}

fn error(status: StatusCode, message: Value) -> (StatusCode, Value) {
    (status, json!({ "message": message }))
}

impl MockGitLab {
    /// Serves the project `path` (`group/name`) on loopback, accepting `token`.
    pub async fn start(path: &str, token: &str) -> MockGitLab {
        let (listener, root) = forge_mock::bind().await;
        let mock = MockGitLab {
            url: format!("{root}/api/v4"),
            web: root.clone(),
            web_url: Arc::default(),
            project: path.replace('/', "%2F"),
            project_path: path.into(),
            token: token.into(),
            state: Arc::default(),
            down: Arc::default(),
            developer: Arc::default(),
            refuse_notes: Arc::default(),
            lose_note_answers: Arc::default(),
        };
        let served = mock.clone();
        forge_mock::serve(listener, "application/json", move |req| {
            let mock = served.clone();
            async move { mock.answer(req) }
        });
        mock
    }

    /// Answers `web_url` as every merge request's address (a hostile or
    /// broken forge's); `None`: its own again.
    pub fn answer_web_url(&self, web_url: Option<&str>) {
        *self.web_url.lock().unwrap() = web_url.map(str::to_string);
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<GitLabRequest> {
        self.state.lock().unwrap().requests.clone()
    }

    /// The merge requests as stored (GitLab's JSON).
    pub fn merge_requests(&self) -> Vec<Value> {
        self.state.lock().unwrap().merge_requests.clone()
    }

    /// The merge requests from the project's own branches (not a fork's),
    /// as (iid, title).
    pub fn own_merge_requests(&self) -> Vec<(u64, String)> {
        self.merge_requests()
            .iter()
            .filter(|m| m["source_project_id"] == PROJECT_ID)
            .map(|m| {
                (
                    m["iid"].as_u64().unwrap(),
                    m["title"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    /// The notes, as (merge request iid, author, body).
    pub fn notes(&self) -> Vec<(u64, String, String)> {
        let state = self.state.lock().unwrap();
        state
            .notes
            .iter()
            .map(|(iid, n)| {
                (
                    *iid,
                    n["author"]["username"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    n["body"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    }

    /// The project access tokens as GitLab lists them (no values), in the
    /// order they were minted.
    pub fn access_tokens(&self) -> Vec<Value> {
        let today = today();
        let state = self.state.lock().unwrap();
        state.tokens.iter().map(|t| t.json(false, &today)).collect()
    }

    /// The values of the tokens minted, in order.
    pub fn minted(&self) -> Vec<String> {
        let state = self.state.lock().unwrap();
        state.tokens.iter().map(|t| t.value.clone()).collect()
    }

    /// The bot user of each minted token, in order.
    pub fn bots(&self) -> Vec<String> {
        let state = self.state.lock().unwrap();
        state.tokens.iter().map(|t| t.bot.clone()).collect()
    }

    /// Whether a git remote of this project takes a push with the HTTP
    /// `authorization` (`Basic base64(user:token)`): the Maintainer's token,
    /// or a minted one that is active, has `write_repository` and is at
    /// least Developer.
    pub fn git_authorization_ok(&self, authorization: &str) -> bool {
        let Some(pair) = authorization
            .strip_prefix("Basic ")
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .and_then(|b| String::from_utf8(b).ok())
        else {
            return false;
        };
        let Some((user, token)) = pair.split_once(':') else {
            return false;
        };
        if user.is_empty() {
            return false;
        }
        let state = self.state.lock().unwrap();
        match self.caller(&state, Some(token)) {
            Some(Caller::Maintainer) => true,
            Some(Caller::Minted(i)) => {
                let t = &state.tokens[i];
                t.scopes.iter().any(|s| s == "write_repository") && t.access_level >= 30
            }
            None => false,
        }
    }

    /// The caller `token` is, if it is valid now.
    fn caller(&self, state: &State, token: Option<&str>) -> Option<Caller> {
        let token = token?;
        if token == self.token {
            return Some(Caller::Maintainer);
        }
        let today = today();
        state
            .tokens
            .iter()
            .position(|t| t.value == token && t.active(&today))
            .map(Caller::Minted)
    }

    /// Adds `count` reviewer notes by `author` (`note 1`, `note 2`…).
    pub fn seed_notes(&self, iid: u64, author: &str, count: usize) {
        for n in 1..=count {
            self.seed_note(iid, author, &format!("note {n}"), None, false);
        }
    }

    /// Sets `username`'s access to the project: a role's level (10 Guest,
    /// 20 Reporter, 30 Developer, 40 Maintainer), or `None` for no member
    /// (what anyone commenting on a public project may be). A note's
    /// author is a Developer unless set.
    pub fn set_access(&self, username: &str, level: Option<u64>) {
        let mut state = self.state.lock().unwrap();
        state.access.insert(username.to_string(), level);
    }

    /// Adds a reviewer's note (on `path:line` when given) or, with
    /// `system`, a system note ("changed the description").
    pub fn seed_note(
        &self,
        iid: u64,
        author: &str,
        body: &str,
        line: Option<(&str, u64)>,
        system: bool,
    ) {
        let mut state = self.state.lock().unwrap();
        let note = self.note_json(&mut state, (author, author), body, line, system);
        state.notes.push((iid, note));
    }

    /// Adds a note by `username` under the display name `name` (which
    /// any user may set to anything); its id.
    pub fn seed_note_named(&self, iid: u64, (username, name): (&str, &str), body: &str) -> u64 {
        let mut state = self.state.lock().unwrap();
        let note = self.note_json(&mut state, (username, name), body, None, false);
        let id = note["id"].as_u64().unwrap_or_default();
        state.notes.push((iid, note));
        id
    }

    /// Deletes the note `id`, as a reviewer (or its author) may: gone from
    /// lists, a 404 for an edit.
    pub fn delete_note(&self, id: u64) {
        self.state
            .lock()
            .unwrap()
            .notes
            .retain(|(_, n)| n["id"].as_u64() != Some(id));
    }

    /// Deletes the note `id` just after the next list of notes, or read
    /// of it, that shows it (a reviewer deleting it between a client's
    /// read and its edit).
    pub fn delete_note_when_listed(&self, id: u64) {
        self.state.lock().unwrap().delete_when_listed.push(id);
    }

    /// The notes' ids, in order.
    pub fn note_ids(&self) -> Vec<u64> {
        let state = self.state.lock().unwrap();
        state
            .notes
            .iter()
            .filter_map(|(_, n)| n["id"].as_u64())
            .collect()
    }

    /// Makes the token given to `start` a Developer's: it may no longer
    /// manage access tokens (403, as GitLab answers).
    pub fn demote_to_developer(&self) {
        self.developer.store(true, Ordering::SeqCst);
    }

    /// Opens a merge request from `source` into `target` as the user
    /// `username` (a person, not a token's bot user), as GitLab would; its
    /// iid.
    pub fn open_merge_request_as(&self, username: &str, source: &str, target: &str) -> u64 {
        self.open_merge_request_from(PROJECT_ID, username, source, target)
    }

    /// As [`MockGitLab::open_merge_request_as`], from the branch `source`
    /// of the project `fork` (the user's fork of this one: anyone may fork
    /// a public project and name a branch of theirs as they like) into
    /// `target` of this project; GitLab lists it among this project's
    /// merge requests, with `source_project_id` the fork's.
    pub fn open_merge_request_from_fork_as(
        &self,
        username: &str,
        fork: u64,
        source: &str,
        target: &str,
    ) -> u64 {
        self.open_merge_request_from(fork, username, source, target)
    }

    fn open_merge_request_from(
        &self,
        source_project: u64,
        username: &str,
        source: &str,
        target: &str,
    ) -> u64 {
        let mut state = self.state.lock().unwrap();
        let iid = state.merge_requests.len() as u64 + 1;
        let mr = json!({
            "id": 9000 + iid,
            "iid": iid,
            "project_id": PROJECT_ID,
            "source_project_id": source_project,
            "target_project_id": PROJECT_ID,
            "title": "Opened by hand",
            "description": "",
            "state": "opened",
            "source_branch": source,
            "target_branch": target,
            "labels": [],
            "draft": false,
            "work_in_progress": false,
            "merge_when_pipeline_succeeds": false,
            "merge_status": "checking",
            "author": {"id": user_id(&mut state, username), "username": username, "name": username},
            "web_url": self.web_url.lock().unwrap().clone().unwrap_or_else(|| format!("{}/{}/-/merge_requests/{iid}", self.web, self.project_path)),
            "created_at": "2026-01-01T00:00:00.000Z",
        });
        state.merge_requests.push(mr);
        iid
    }

    /// Ends the merge request `iid` as a reviewer would: `merged` or
    /// `closed`.
    pub fn end_merge_request(&self, iid: u64, ended: &str) {
        let mut state = self.state.lock().unwrap();
        if let Some(mr) = state
            .merge_requests
            .iter_mut()
            .find(|m| m["iid"].as_u64() == Some(iid))
        {
            mr["state"] = json!(ended);
        }
    }

    /// Answers every note posted with 500 while `refused` (a publish that
    /// fails after opening its merge request).
    pub fn refuse_notes(&self, refused: bool) {
        self.refuse_notes.store(refused, Ordering::SeqCst);
    }

    /// Posts every note posted but answers it with 500 while `lost`: the
    /// client never learns the note's id, as when it is killed between
    /// the post and what it does with the answer.
    pub fn lose_note_answers(&self, lost: bool) {
        self.lose_note_answers.store(lost, Ordering::SeqCst);
    }

    /// Deletes the user `username` as GitLab does (an account its owner
    /// deleted, a revoked token's bot user): their notes and merge
    /// requests become GitLab's ghost user's (`ghost`, one id for all).
    pub fn delete_user(&self, username: &str) {
        let mut state = self.state.lock().unwrap();
        let ghost = json!({"id": user_id(&mut state, GHOST), "username": GHOST, "name": "Ghost User", "state": "active"});
        for (_, note) in state.notes.iter_mut() {
            if note["author"]["username"] == username {
                note["author"] = ghost.clone();
            }
        }
        for mr in state.merge_requests.iter_mut() {
            if mr["author"]["username"] == username {
                mr["author"] = ghost.clone();
            }
        }
    }

    /// Answers every request with 503 while `down`.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    fn note_json(
        &self,
        state: &mut State,
        (author, name): (&str, &str),
        body: &str,
        line: Option<(&str, u64)>,
        system: bool,
    ) -> Value {
        let id = 500 + state.notes_made;
        state.notes_made += 1;
        let user_id = user_id(state, author);
        let mut note = json!({
            "id": id,
            "type": if line.is_some() { Value::from("DiffNote") } else { Value::Null },
            "body": body,
            "author": {"id": user_id, "username": author, "name": name, "state": "active"},
            "created_at": "2026-01-01T00:00:00.000Z",
            "system": system,
            "noteable_type": "MergeRequest",
            "resolvable": line.is_some(),
        });
        if let Some((path, new_line)) = line {
            note["position"] = json!({
                "position_type": "text",
                "old_path": path,
                "new_path": path,
                "old_line": null,
                "new_line": new_line,
            });
        }
        note
    }

    fn answer(&self, req: Incoming) -> Reply {
        let private = req.header("private-token");
        let bearer = req.header("authorization");
        let path = req.path.strip_prefix("/api/v4").unwrap_or(&req.path);
        let token_header = private
            .as_ref()
            .map(|t| format!("PRIVATE-TOKEN: {t}"))
            .or_else(|| bearer.as_ref().map(|a| format!("Authorization: {a}")));
        let mut state = self.state.lock().unwrap();
        state.requests.push(GitLabRequest {
            method: req.method.to_string(),
            path: path.to_string(),
            token_header,
            body: req.body.clone(),
        });
        if self.down.load(Ordering::SeqCst) {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                json!("503 Service Unavailable"),
            )
            .into();
        }
        let token = private.or_else(|| {
            bearer
                .as_deref()
                .and_then(|b| b.strip_prefix("Bearer "))
                .map(str::to_string)
        });
        let Some(caller) = self.caller(&state, token.as_deref()) else {
            return error(StatusCode::UNAUTHORIZED, json!("401 Unauthorized")).into();
        };
        if let Caller::Minted(i) = caller {
            if !state.tokens[i].scopes.iter().any(|s| s == "api") {
                return (
                    StatusCode::FORBIDDEN,
                    json!({"error": "insufficient_scope", "error_description": "The request requires higher privileges than provided by the access token.", "scope": "api"}),
                )
                    .into();
            }
        }
        // A project access token's bot user is named after the token.
        let (author, author_name) = match caller {
            Caller::Maintainer => (BOT.to_string(), BOT.to_string()),
            Caller::Minted(i) => (state.tokens[i].bot.clone(), state.tokens[i].name.clone()),
        };
        let maintainer =
            matches!(caller, Caller::Maintainer) && !self.developer.load(Ordering::SeqCst);
        let input: Value = serde_json::from_str(&req.body).unwrap_or(Value::Null);
        let (route, query) = path.split_once('?').unwrap_or((path, ""));
        let method = &req.method;
        if *method == Method::GET && route == "/user" {
            let id = user_id(&mut state, &author);
            return (
                StatusCode::OK,
                json!({"id": id, "username": author, "name": author, "state": "active", "bot": true}),
            )
                .into();
        }
        if *method == Method::GET && route == format!("/projects/{}", self.project) {
            return (
                StatusCode::OK,
                json!({
                    "id": PROJECT_ID,
                    "path_with_namespace": self.project_path,
                    "web_url": format!("{}/{}", self.web, self.project_path),
                }),
            )
                .into();
        }
        let prefix = format!("/projects/{}/", self.project);
        let Some(rest) = route.strip_prefix(&prefix) else {
            return error(StatusCode::NOT_FOUND, json!("404 Project Not Found")).into();
        };
        let parts: Vec<&str> = rest.split('/').collect();
        let iid = |n: &str| n.parse::<u64>().unwrap_or(0);
        if let (&Method::GET, ["members", "all", uid]) = (method, parts.as_slice()) {
            return member(&state, iid(uid)).into();
        }
        if parts.first() == Some(&"access_tokens") {
            // Managing access tokens needs a Maintainer.
            if !matches!(caller, Caller::Maintainer) || self.developer.load(Ordering::SeqCst) {
                return error(StatusCode::FORBIDDEN, json!("403 Forbidden")).into();
            }
            let url = format!("{}{route}", self.url);
            return match (method, parts.as_slice()) {
                (&Method::POST, ["access_tokens"]) => mint(&mut state, &input).into(),
                (&Method::GET, ["access_tokens"]) => {
                    let today = today();
                    let all = state.tokens.iter().map(|t| t.json(false, &today)).collect();
                    forge_mock::page(all, &url, query, Paging::GitLab)
                }
                (&Method::DELETE, ["access_tokens", id]) => revoke(&mut state, iid(id)).into(),
                _ => error(StatusCode::NOT_FOUND, json!("404 Not Found")).into(),
            };
        }
        match (method, parts.as_slice()) {
            (&Method::GET, ["merge_requests"]) => {
                let url = format!("{}{route}", self.url);
                return forge_mock::page(list(&state, query), &url, query, Paging::GitLab);
            }
            (&Method::POST, ["merge_requests"]) => self.create(&mut state, &input, &author),
            (&Method::PUT, ["merge_requests", n]) => update(&mut state, iid(n), &input),
            (&Method::POST, ["merge_requests", n, "notes"]) => {
                if self.refuse_notes.load(Ordering::SeqCst) {
                    return error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        json!("500 Internal Server Error"),
                    )
                    .into();
                }
                let note = self.note_json(
                    &mut state,
                    (&author, &author_name),
                    input["body"].as_str().unwrap_or_default(),
                    None,
                    false,
                );
                state.notes.push((iid(n), note.clone()));
                if self.lose_note_answers.load(Ordering::SeqCst) {
                    return error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        json!("500 Internal Server Error"),
                    )
                    .into();
                }
                (StatusCode::CREATED, note)
            }
            (&Method::GET, ["merge_requests", n, "notes", id]) => {
                let (n, id) = (iid(n), iid(id));
                let found = state
                    .notes
                    .iter()
                    .find(|(i, v)| *i == n && v["id"].as_u64() == Some(id))
                    .map(|(_, note)| note.clone());
                if found.is_some() && state.delete_when_listed.contains(&id) {
                    state.delete_when_listed.retain(|d| *d != id);
                    state.notes.retain(|(_, v)| v["id"].as_u64() != Some(id));
                }
                match found {
                    Some(note) => (StatusCode::OK, note),
                    None => error(StatusCode::NOT_FOUND, json!("404 Not found")),
                }
            }
            (&Method::PUT, ["merge_requests", n, "notes", id]) => {
                edit_note(&mut state, (iid(n), iid(id)), (&author, maintainer), &input)
            }
            (&Method::GET, ["merge_requests", n, "notes"]) => {
                let n = iid(n);
                let mut notes: Vec<Value> = state
                    .notes
                    .iter()
                    .filter(|(i, _)| *i == n)
                    .map(|(_, v)| v.clone())
                    .collect();
                // Oldest first with `sort=asc`; GitLab's default is newest
                // first (notes are kept in the order they were made).
                if crate::entra::form(query).get("sort").map(String::as_str) != Some("asc") {
                    notes.reverse();
                }
                let url = format!("{}{route}", self.url);
                let listed: Vec<u64> = notes.iter().filter_map(|v| v["id"].as_u64()).collect();
                let gone: Vec<u64> = state
                    .delete_when_listed
                    .iter()
                    .copied()
                    .filter(|id| listed.contains(id))
                    .collect();
                state.delete_when_listed.retain(|id| !gone.contains(id));
                state
                    .notes
                    .retain(|(_, v)| !v["id"].as_u64().is_some_and(|id| gone.contains(&id)));
                return forge_mock::page(notes, &url, query, Paging::GitLab);
            }
            _ => error(StatusCode::NOT_FOUND, json!("404 Not Found")),
        }
        .into()
    }

    /// `POST /projects/P/merge_requests` (from this project's own
    /// branch): 409 when an open one has the same source project, source
    /// branch and target branch, as GitLab validates it (one from a fork's
    /// branch of the same name does not stand in the way).
    fn create(&self, state: &mut State, input: &Value, author: &str) -> (StatusCode, Value) {
        let source = input["source_branch"].as_str().unwrap_or_default();
        if let Some(open) = state.merge_requests.iter().find(|m| {
            m["source_branch"] == source
                && m["source_project_id"] == PROJECT_ID
                && m["target_branch"] == input["target_branch"]
                && m["state"] == "opened"
        }) {
            return error(
                StatusCode::CONFLICT,
                json!([format!(
                    "Another open merge request already exists for this source branch: !{}",
                    open["iid"]
                )]),
            );
        }
        let iid = state.merge_requests.len() as u64 + 1;
        let title = input["title"].as_str().unwrap_or_default();
        let labels: Vec<&str> = input["labels"]
            .as_str()
            .unwrap_or_default()
            .split(',')
            .filter(|l| !l.is_empty())
            .collect();
        let mr = json!({
            "id": 9000 + iid,
            "iid": iid,
            "project_id": PROJECT_ID,
            "source_project_id": PROJECT_ID,
            "target_project_id": PROJECT_ID,
            "title": title,
            "description": input["description"],
            "state": "opened",
            "source_branch": source,
            "target_branch": input["target_branch"],
            "labels": labels,
            "draft": title.starts_with("Draft:") || title.starts_with("[Draft]") || title.starts_with("(Draft)"),
            "work_in_progress": title.starts_with("Draft:"),
            "merge_when_pipeline_succeeds": false,
            "merge_status": "checking",
            "author": {"id": user_id(state, author), "username": author, "name": author},
            "web_url": self.web_url.lock().unwrap().clone().unwrap_or_else(|| format!("{}/{}/-/merge_requests/{iid}", self.web, self.project_path)),
            "created_at": "2026-01-01T00:00:00.000Z",
        });
        state.merge_requests.push(mr.clone());
        (StatusCode::CREATED, mr)
    }
}

/// `GET /projects/P/merge_requests?source_branch=…&state=…`: the
/// merge requests it lists, newest first (paged by the caller), of the
/// source project `source_project_id` alone when asked, as GitLab filters
/// them (forks' left out).
fn list(state: &State, query: &str) -> Vec<Value> {
    let q = crate::entra::form(query);
    let source = q.get("source_branch").cloned();
    let source_project = q
        .get("source_project_id")
        .map(|p| p.parse::<u64>().unwrap_or(0));
    let target = q.get("target_branch").cloned();
    let wanted = q.get("state").cloned().unwrap_or_else(|| "all".into());
    state
        .merge_requests
        .iter()
        .rev()
        .filter(|m| source.as_deref().is_none_or(|s| m["source_branch"] == s))
        .filter(|m| source_project.is_none_or(|p| m["source_project_id"] == p))
        .filter(|m| target.as_deref().is_none_or(|t| m["target_branch"] == t))
        .filter(|m| wanted == "all" || m["state"] == wanted.as_str())
        .cloned()
        .collect()
}

/// `PUT /projects/P/merge_requests/IID/notes/ID`: its body replaced, as
/// GitLab allows it: by the note's author, or by a Maintainer (who may
/// edit anyone's comment); anyone else (another token's Developer bot) is
/// answered 403.
fn edit_note(
    state: &mut State,
    (iid, id): (u64, u64),
    (caller, maintainer): (&str, bool),
    input: &Value,
) -> (StatusCode, Value) {
    let Some((_, note)) = state
        .notes
        .iter_mut()
        .find(|(i, n)| *i == iid && n["id"].as_u64() == Some(id))
    else {
        return error(StatusCode::NOT_FOUND, json!("404 Note Not Found"));
    };
    if note["author"]["username"].as_str() != Some(caller) && !maintainer {
        return error(StatusCode::FORBIDDEN, json!("403 Forbidden"));
    }
    note["body"] = input["body"].clone();
    (StatusCode::OK, note.clone())
}

/// `PUT /projects/P/merge_requests/IID`: title, description, labels.
fn update(state: &mut State, iid: u64, input: &Value) -> (StatusCode, Value) {
    let Some(mr) = state
        .merge_requests
        .iter_mut()
        .find(|m| m["iid"].as_u64() == Some(iid))
    else {
        return error(StatusCode::NOT_FOUND, json!("404 Not found"));
    };
    if let Some(title) = input["title"].as_str() {
        mr["title"] = json!(title);
        mr["draft"] = json!(title.starts_with("Draft:"));
    }
    if let Some(d) = input.get("description") {
        mr["description"] = d.clone();
    }
    if let Some(add) = input["add_labels"].as_str() {
        let mut labels: Vec<Value> = mr["labels"].as_array().cloned().unwrap_or_default();
        for l in add.split(',').filter(|l| !l.is_empty()) {
            if !labels.iter().any(|x| x == l) {
                labels.push(json!(l));
            }
        }
        mr["labels"] = Value::Array(labels);
    }
    (StatusCode::OK, mr.clone())
}

/// Today (UTC) as GitLab writes a date.
fn today() -> String {
    let now = time::OffsetDateTime::now_utc().date();
    format!(
        "{:04}-{:02}-{:02}",
        now.year(),
        u8::from(now.month()),
        now.day()
    )
}

/// `POST /projects/P/access_tokens`: checked as GitLab checks it (a name,
/// known scopes, a known access level, an expiry date in the future).
fn mint(state: &mut State, input: &Value) -> (StatusCode, Value) {
    let bad = |e: &str| (StatusCode::BAD_REQUEST, json!({ "error": e }));
    let Some(name) = input["name"].as_str().filter(|n| !n.is_empty()) else {
        return bad("name is missing");
    };
    let scopes: Vec<String> = input["scopes"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if scopes.is_empty() {
        return bad("scopes is missing");
    }
    if scopes.iter().any(|s| !SCOPES.contains(&s.as_str())) {
        return bad("scopes does not have a valid value");
    }
    let access_level = input["access_level"].as_u64().unwrap_or(40);
    if !ACCESS_LEVELS.contains(&access_level) {
        return bad("access_level does not have a valid value");
    }
    let Some(expires_at) = input["expires_at"].as_str() else {
        return bad("expires_at is missing");
    };
    let valid_date = expires_at.len() == 10
        && expires_at.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        });
    if !valid_date {
        return bad("expires_at is invalid");
    }
    if expires_at <= today().as_str() {
        return (
            StatusCode::BAD_REQUEST,
            json!({"message": {"expires_at": ["must be in the future"]}}),
        );
    }
    let id = 70 + state.tokens.len() as u64;
    let token = AccessToken {
        id,
        name: name.to_string(),
        scopes,
        access_level,
        expires_at: expires_at.to_string(),
        value: format!("glpat-pdkMinted{id}Xq7Lm2Rv9Tz4"),
        revoked: false,
        bot: format!("project_{PROJECT_ID}_bot_{:032x}", 0xb07_u64 * id),
    };
    let answer = token.json(true, &today());
    state.tokens.push(token);
    (StatusCode::CREATED, answer)
}

/// `DELETE /projects/P/access_tokens/ID`: 204; a token it does not know,
/// or one revoked already (its bot user is gone), 404.
fn revoke(state: &mut State, id: u64) -> (StatusCode, Value) {
    match state.tokens.iter_mut().find(|t| t.id == id && !t.revoked) {
        Some(t) => {
            t.revoked = true;
            (StatusCode::NO_CONTENT, Value::Null)
        }
        None => error(
            StatusCode::NOT_FOUND,
            json!(format!(
                "404 Could not find project access token with token_id: {id} Not Found"
            )),
        ),
    }
}

/// The user id of `username` (ids from 100, in the order first seen).
fn user_id(state: &mut State, username: &str) -> u64 {
    let at = match state.users.iter().position(|u| u == username) {
        Some(i) => i,
        None => {
            state.users.push(username.to_string());
            state.users.len() - 1
        }
    };
    100 + at as u64
}

/// `GET /projects/:id/members/all/:user_id`: the member with their access
/// level, or GitLab's 404 for a user who is none.
fn member(state: &State, uid: u64) -> (StatusCode, Value) {
    let name = uid
        .checked_sub(100)
        .and_then(|i| state.users.get(i as usize));
    let Some(name) = name else {
        return error(StatusCode::NOT_FOUND, json!("404 Not found"));
    };
    match state.access.get(name).copied().unwrap_or(Some(30)) {
        Some(level) => (
            StatusCode::OK,
            json!({"id": uid, "username": name, "state": "active", "access_level": level}),
        ),
        None => error(StatusCode::NOT_FOUND, json!("404 Not found")),
    }
}

//! A GitLab REST API v4 **mock** for the results loop: merge requests
//! (list by `source_branch` and `state`, create, update), their notes
//! (post, list, with system notes and line positions) and `GET /user`,
//! answered in GitLab's own JSON shapes and errors (`{"message": …}`: 401
//! Unauthorized, 404 Not Found, 409 when an open merge request already
//! exists for the source branch). It checks the token (`PRIVATE-TOKEN` or
//! `Authorization: Bearer`) and records every request (method, path with
//! query, the token header, body), so a test can assert what was, and
//! what was never, sent. Served under `/api/v4`; `down` answers 503 like
//! an outage.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use http::{Method, Request, StatusCode};
use serde_json::{json, Value};

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

/// The user the token belongs to (authors Paddock's notes).
pub const BOT: &str = "paddock-bot";

#[derive(Default)]
struct State {
    requests: Vec<GitLabRequest>,
    merge_requests: Vec<Value>,
    /// (merge request iid, note as GitLab's JSON).
    notes: Vec<(u64, Value)>,
}

/// The running mock.
#[derive(Clone)]
pub struct MockGitLab {
    /// The API root to configure (`results.gitlab.api_url`).
    pub url: String,
    /// The project as it appears in paths (`acme%2Fwidgets`).
    project: String,
    project_path: String,
    token: String,
    state: Arc<Mutex<State>>,
    down: Arc<AtomicBool>,
}

fn error(status: StatusCode, message: Value) -> (StatusCode, Value) {
    (status, json!({ "message": message }))
}

impl MockGitLab {
    /// Serves the project `path` (`group/name`) on loopback, accepting `token`.
    pub async fn start(path: &str, token: &str) -> MockGitLab {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mock = MockGitLab {
            url: format!("http://{addr}/api/v4"),
            project: path.replace('/', "%2F"),
            project_path: path.into(),
            token: token.into(),
            state: Arc::default(),
            down: Arc::default(),
        };
        let served = mock.clone();
        let router = axum::Router::new().fallback(move |req: Request<Body>| {
            let mock = served.clone();
            async move {
                let (status, body) = mock.answer(req).await;
                (
                    status,
                    [("content-type", "application/json")],
                    body.to_string(),
                )
            }
        });
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        mock
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<GitLabRequest> {
        self.state.lock().unwrap().requests.clone()
    }

    /// The merge requests as stored (GitLab's JSON).
    pub fn merge_requests(&self) -> Vec<Value> {
        self.state.lock().unwrap().merge_requests.clone()
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
        let note = self.note_json(&state, author, body, line, system);
        state.notes.push((iid, note));
    }

    /// Answers every request with 503 while `down`.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    fn note_json(
        &self,
        state: &State,
        author: &str,
        body: &str,
        line: Option<(&str, u64)>,
        system: bool,
    ) -> Value {
        let id = 500 + state.notes.len() as u64;
        let mut note = json!({
            "id": id,
            "type": if line.is_some() { Value::from("DiffNote") } else { Value::Null },
            "body": body,
            "author": {"id": 7, "username": author, "name": author, "state": "active"},
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

    async fn answer(&self, req: Request<Body>) -> (StatusCode, Value) {
        let method = req.method().clone();
        let path = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default();
        let private = req
            .headers()
            .get("private-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let bearer = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = axum::body::to_bytes(req.into_body(), 1 << 20)
            .await
            .unwrap();
        let body = String::from_utf8_lossy(&body).into_owned();
        let path = path.strip_prefix("/api/v4").unwrap_or(&path).to_string();
        let token_header = private
            .as_ref()
            .map(|t| format!("PRIVATE-TOKEN: {t}"))
            .or_else(|| bearer.as_ref().map(|a| format!("Authorization: {a}")));
        let mut state = self.state.lock().unwrap();
        state.requests.push(GitLabRequest {
            method: method.to_string(),
            path: path.clone(),
            token_header,
            body: body.clone(),
        });
        if self.down.load(Ordering::SeqCst) {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                json!("503 Service Unavailable"),
            );
        }
        let valid = private.as_deref() == Some(self.token.as_str())
            || bearer.as_deref() == Some(format!("Bearer {}", self.token).as_str());
        if !valid {
            return error(StatusCode::UNAUTHORIZED, json!("401 Unauthorized"));
        }
        let input: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        let (route, query) = path.split_once('?').unwrap_or((&path, ""));
        if method == Method::GET && route == "/user" {
            return (
                StatusCode::OK,
                json!({"id": 1, "username": BOT, "name": "Paddock", "state": "active", "bot": true}),
            );
        }
        let prefix = format!("/projects/{}/", self.project);
        let Some(rest) = route.strip_prefix(&prefix) else {
            return error(StatusCode::NOT_FOUND, json!("404 Project Not Found"));
        };
        let parts: Vec<&str> = rest.split('/').collect();
        let iid = |n: &str| n.parse::<u64>().unwrap_or(0);
        match (&method, parts.as_slice()) {
            (&Method::GET, ["merge_requests"]) => list(&state, query),
            (&Method::POST, ["merge_requests"]) => self.create(&mut state, &input),
            (&Method::PUT, ["merge_requests", n]) => update(&mut state, iid(n), &input),
            (&Method::POST, ["merge_requests", n, "notes"]) => {
                let note = self.note_json(
                    &state,
                    BOT,
                    input["body"].as_str().unwrap_or_default(),
                    None,
                    false,
                );
                state.notes.push((iid(n), note.clone()));
                (StatusCode::CREATED, note)
            }
            (&Method::GET, ["merge_requests", n, "notes"]) => {
                let n = iid(n);
                let notes: Vec<Value> = state
                    .notes
                    .iter()
                    .filter(|(i, _)| *i == n)
                    .map(|(_, v)| v.clone())
                    .collect();
                (StatusCode::OK, Value::Array(notes))
            }
            _ => error(StatusCode::NOT_FOUND, json!("404 Not Found")),
        }
    }

    /// `POST /projects/P/merge_requests`: 409 when an open one has the
    /// source branch.
    fn create(&self, state: &mut State, input: &Value) -> (StatusCode, Value) {
        let source = input["source_branch"].as_str().unwrap_or_default();
        if let Some(open) = state
            .merge_requests
            .iter()
            .find(|m| m["source_branch"] == source && m["state"] == "opened")
        {
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
            "project_id": 42,
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
            "author": {"id": 1, "username": BOT},
            "web_url": format!("https://gitlab.example/{}/-/merge_requests/{iid}", self.project_path),
            "created_at": "2026-01-01T00:00:00.000Z",
        });
        state.merge_requests.push(mr.clone());
        (StatusCode::CREATED, mr)
    }
}

/// `GET /projects/P/merge_requests?source_branch=…&state=…`.
fn list(state: &State, query: &str) -> (StatusCode, Value) {
    let q = crate::entra::form(query);
    let source = q.get("source_branch").cloned();
    let wanted = q.get("state").cloned().unwrap_or_else(|| "all".into());
    let found: Vec<Value> = state
        .merge_requests
        .iter()
        .rev()
        .filter(|m| source.as_deref().is_none_or(|s| m["source_branch"] == s))
        .filter(|m| wanted == "all" || m["state"] == wanted.as_str())
        .cloned()
        .collect();
    (StatusCode::OK, Value::Array(found))
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

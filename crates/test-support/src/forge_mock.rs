//! What the GitHub and GitLab API mocks (`github.rs`, `gitlab.rs`) share:
//! the loopback server, each request read whole (method, path with query,
//! headers, body) for the mock to record and answer, the answer (a status,
//! a JSON body, none for a 204, and headers), and a list answered page by
//! page as both forges do: `page` and `per_page` in the query (GitHub's
//! default 30 a page, GitLab's 20, at most 100), a `Link` header with
//! `rel="next"`, `"prev"`, `"first"` and `"last"`, and for GitLab its
//! `X-Page`, `X-Per-Page`, `X-Next-Page`, `X-Prev-Page`, `X-Total` and
//! `X-Total-Pages`.

use std::future::Future;

use axum::body::Body;
use http::{HeaderMap, Method, Request, StatusCode};
use serde_json::Value;

/// One request as a mock received it.
#[derive(Debug, Clone)]
pub struct Incoming {
    pub method: Method,
    /// The path and query, as sent.
    pub path: String,
    pub headers: HeaderMap,
    pub body: String,
}

impl Incoming {
    /// The header `name` as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }
}

/// A mock's answer.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: StatusCode,
    pub body: Value,
    pub headers: Vec<(String, String)>,
}

impl From<(StatusCode, Value)> for Reply {
    fn from((status, body): (StatusCode, Value)) -> Reply {
        Reply {
            status,
            body,
            headers: Vec::new(),
        }
    }
}

/// A loopback listener for a mock, and its `http://127.0.0.1:PORT`.
pub async fn bind() -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    (listener, url)
}

/// Serves `answer` on `listener`, its bodies as `content_type`.
pub fn serve<F, Fut>(listener: tokio::net::TcpListener, content_type: &'static str, answer: F)
where
    F: Fn(Incoming) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Reply> + Send + 'static,
{
    let router = axum::Router::new().fallback(move |req: Request<Body>| {
        let answer = answer.clone();
        async move {
            let reply = answer(read(req).await).await;
            let body = match reply.status {
                StatusCode::NO_CONTENT => String::new(),
                _ => reply.body.to_string(),
            };
            let mut resp = http::Response::builder()
                .status(reply.status)
                .header("content-type", content_type);
            for (k, v) in &reply.headers {
                resp = resp.header(k.as_str(), v.as_str());
            }
            resp.body(Body::from(body)).unwrap()
        }
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
}

async fn read(req: Request<Body>) -> Incoming {
    let method = req.method().clone();
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    let headers = req.headers().clone();
    let body = axum::body::to_bytes(req.into_body(), 1 << 20)
        .await
        .unwrap();
    Incoming {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// Which forge's paging a list follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paging {
    /// 30 a page by default, `Link` only.
    GitHub,
    /// 20 a page by default, `Link` and the `X-` headers.
    GitLab,
}

/// The page of `items` the query asks for, at `url` (the full URL of the
/// route, without its query), with the forge's paging headers.
pub fn page(items: Vec<Value>, url: &str, query: &str, paging: Paging) -> Reply {
    let q = crate::entra::form(query);
    let default = match paging {
        Paging::GitHub => 30,
        Paging::GitLab => 20,
    };
    let per_page = q
        .get("per_page")
        .and_then(|p| p.parse::<usize>().ok())
        .filter(|p| *p > 0)
        .unwrap_or(default)
        .min(100);
    let page = q
        .get("page")
        .and_then(|p| p.parse::<usize>().ok())
        .filter(|p| *p > 0)
        .unwrap_or(1);
    let total = items.len();
    let pages = total.div_ceil(per_page).max(1);
    let body: Vec<Value> = items
        .into_iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .collect();
    let link = |n: usize| {
        let mut pairs: Vec<(String, String)> = q
            .iter()
            .filter(|(k, _)| *k != "page" && *k != "per_page")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        pairs.sort();
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (k, v) in &pairs {
            query.append_pair(k, v);
        }
        query.append_pair("page", &n.to_string());
        query.append_pair("per_page", &per_page.to_string());
        format!("{url}?{}", query.finish())
    };
    let mut rels = Vec::new();
    if page > 1 {
        rels.push(format!("<{}>; rel=\"prev\"", link(page - 1)));
    }
    if page < pages {
        rels.push(format!("<{}>; rel=\"next\"", link(page + 1)));
    }
    rels.push(format!("<{}>; rel=\"first\"", link(1)));
    rels.push(format!("<{}>; rel=\"last\"", link(pages)));
    let mut headers = Vec::new();
    // GitHub sends no `Link` for a list that fits one page.
    if paging == Paging::GitLab || pages > 1 {
        headers.push(("link".to_string(), rels.join(", ")));
    }
    if paging == Paging::GitLab {
        let or_empty = |n: Option<usize>| n.map(|n| n.to_string()).unwrap_or_default();
        headers.extend([
            ("x-page".to_string(), page.to_string()),
            ("x-per-page".to_string(), per_page.to_string()),
            (
                "x-next-page".to_string(),
                or_empty((page < pages).then_some(page + 1)),
            ),
            (
                "x-prev-page".to_string(),
                or_empty((page > 1).then(|| page - 1)),
            ),
            ("x-total".to_string(), total.to_string()),
            ("x-total-pages".to_string(), pages.to_string()),
        ]);
    }
    Reply {
        status: StatusCode::OK,
        body: Value::Array(body),
        headers,
    }
}

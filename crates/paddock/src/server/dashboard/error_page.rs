//! Every dashboard error as a page: a handler's refusal (a bad filter, a
//! job id no job has, a store that failed) is an `application/problem+json`
//! body or, from an extractor or a session check, plain text; for a person
//! in a browser, `guarded` (dashboard.rs) turns either into an HTML page
//! with the same status, saying what was wrong and linking back to the
//! jobs. The event stream (`text/event-stream`), redirects and pages
//! already HTML pass unchanged.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use minijinja::context;
use serde::Deserialize;

use super::pages::render;
use crate::server::problem::PROBLEM_JSON;

/// The most of an error body read back (a problem's detail is a few
/// hundred bytes).
const MAX_BODY: usize = 64 * 1024;

/// What a problem body says, as far as a page shows it.
#[derive(Deserialize)]
struct Said {
    title: String,
    detail: String,
    code: Option<String>,
}

/// `response`, an error page when it is an error that is not one yet.
pub async fn as_page(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let media = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if media.starts_with("text/html") || media.starts_with("text/event-stream") {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_BODY)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    let said = if media.starts_with(PROBLEM_JSON) {
        serde_json::from_str::<Said>(&text).ok()
    } else {
        None
    };
    let said = said.unwrap_or_else(|| Said {
        title: status.canonical_reason().unwrap_or("error").to_owned(),
        detail: text.trim().to_owned(),
        code: None,
    });
    let page = render(
        "error.html",
        context! {
            status => status.as_u16(),
            title => said.title,
            detail => said.detail,
            code => said.code,
        },
    );
    let (page_parts, page_body) = page.into_parts();
    if page_parts.status != StatusCode::OK {
        // The error page itself failed to render: what render answered.
        return Response::from_parts(page_parts, page_body);
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    Response::from_parts(parts, page_body)
}

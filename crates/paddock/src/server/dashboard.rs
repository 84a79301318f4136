//! The dashboard at `/`: server-rendered pages for people, embedded in the
//! binary (minijinja templates and one small script, `include_str!`, no
//! build step, nothing from another origin). The jobs list (filtered by
//! status, engine and rung, with cost and duration), a job's page with its
//! live event view (the same lines `paddock run` prints, `crate::event_line`,
//! streamed as SSE from the follower the API's event route uses, so it
//! resumes with `Last-Event-ID` the same way), spend by day, model, project
//! and task type as SVG bar charts (`charts.rs`), and the host's capacity,
//! rungs and engines (`/v1/discover`'s answer). A browser logs in once with
//! a token and then holds a session cookie (`session.rs`). Everything a job
//! wrote is escaped: the templates auto-escape, the script sets text only,
//! and every page carries a strict Content-Security-Policy (scripts,
//! styles and connections from this server only, no inline code).

mod charts;
mod error_page;
mod pages;
mod session;

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};

pub use self::session::{Sessions, Viewer, COOKIE};
use super::state::AppState;

/// The policy every dashboard answer carries: nothing but this server's
/// own script, style and event stream; no inline script or style, no
/// frames, forms only to this server.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The dashboard's routes; every page but the login form needs a session.
pub fn routes(state: &AppState) -> Router<AppState> {
    let dash = pages::Dash::new(Sessions::new(state.store.clone()));
    // The pages that read the store answer within the API's read wait
    // (`read_wait.rs`): a 503 page, not a browser left waiting out the
    // store's 30 s of retries.
    let reads = Router::new()
        .route("/", get(pages::jobs))
        .route("/jobs/{id}", get(pages::job))
        .route("/jobs/{id}/lines", get(pages::lines))
        .route("/spend", get(pages::spend))
        .route("/host", get(pages::host))
        .route_layer(axum::middleware::from_fn(super::read_wait::promptly));
    Router::new()
        .merge(reads)
        .route("/jobs/{id}/cancel", post(pages::cancel))
        .route("/login", get(pages::login_form).post(pages::login))
        .route("/logout", post(pages::logout))
        .route("/assets/dash.js", get(script))
        .route("/assets/dash.css", get(style))
        .route(
            "/favicon.ico",
            get(|| async { axum::http::StatusCode::NO_CONTENT }),
        )
        .layer(Extension(dash))
        .layer(axum::middleware::map_response(guarded))
}

/// Whether a request that no route takes came from a browser navigating
/// to a page: it accepts HTML and names no API path. It then gets the
/// dashboard's error page, as a refused dashboard request does; API
/// clients keep their problem+json.
pub fn wants_page(headers: &axum::http::HeaderMap, path: &str) -> bool {
    let api = ["/v1/", "/openapi.json", "/metrics", "/healthz", "/readyz"]
        .iter()
        .any(|p| path == p.trim_end_matches('/') || path.starts_with(p));
    !api && headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("text/html"))
}

/// `response` as the dashboard answers (`guarded`): an error made a page,
/// with the CSP and its companions.
pub async fn as_page(response: Response) -> Response {
    guarded(response).await
}

/// Adds the CSP and its companions to every dashboard answer, an error
/// made a page first (`error_page.rs`).
async fn guarded(response: Response) -> Response {
    let mut response = error_page::as_page(response).await;
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("dashboard/assets/dash.js"),
    )
        .into_response()
}

async fn style() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("dashboard/assets/dash.css"),
    )
        .into_response()
}

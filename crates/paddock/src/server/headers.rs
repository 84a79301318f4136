//! The security headers every answer of `paddock serve` carries, the API's
//! as well as the dashboard's (which sets its own, stricter for pages,
//! first: `dashboard.rs`): nothing sniffs a JSON body into markup, no
//! answer runs, frames or loads anything, none is cached on the way, and
//! no other site's page may embed one. Applied by [`router`](super::router)
//! over every route, the fallbacks and the refusals of the auth layer.

use axum::http::{header, HeaderName, HeaderValue};
use axum::response::Response;

/// What an answer that is not a dashboard page may do: nothing.
pub const API_CSP: &str =
    "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// Every header this adds and its value, where the answer has none.
pub const HEADERS: [(HeaderName, &str); 6] = [
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    (header::CONTENT_SECURITY_POLICY, API_CSP),
    (header::X_FRAME_OPTIONS, "DENY"),
    (header::REFERRER_POLICY, "no-referrer"),
    (header::CACHE_CONTROL, "no-store"),
    (
        HeaderName::from_static("cross-origin-resource-policy"),
        "same-origin",
    ),
];

/// Adds [`HEADERS`] the answer does not set itself.
pub async fn secured(mut response: Response) -> Response {
    let h = response.headers_mut();
    for (name, value) in HEADERS {
        h.entry(name).or_insert(HeaderValue::from_static(value));
    }
    response
}

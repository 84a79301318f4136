//! How large a request's head may be. hyper refuses a head it will not
//! read with an empty body (414 for a request target over 65,534 bytes,
//! 431 for a head over its read buffer or more headers than it parses),
//! so a client was told nothing it could branch on. [`checked`], a layer
//! over the whole router, holds every request to smaller limits hyper
//! lets through first: a request target over [`URI_MAX`] bytes is 414
//! `uri_too_long`, more than [`HEADERS_MAX`] header fields or over
//! [`HEADER_BYTES_MAX`] bytes of them are 431 `headers_too_large`, each a
//! problem+json (a dashboard page for a browser), before any token is
//! checked or any route runs. What hyper still refuses itself, with an
//! empty body and the connection closed, is a head past the limits it is
//! given here ([`HYPER_MAX_HEADERS`] fields, [`HYPER_HEAD_BUFFER`] bytes;
//! its own 65,534-byte request target) and a head it cannot parse (a raw
//! `<` or a space in the request target, a malformed header line: 400).

use axum::extract::Request;
use axum::http::{HeaderMap, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};

use super::problem::Problem;

/// The longest request target (path and query; scheme and authority too
/// when sent in absolute form), in bytes. No route needs more: an id is
/// at most 128 characters, a query a few filters.
pub const URI_MAX: usize = 8 * 1024;

/// The most header fields a request may send.
pub const HEADERS_MAX: usize = 100;

/// The most bytes a request's header fields may hold together (each
/// counted as `name: value` and its line end).
pub const HEADER_BYTES_MAX: usize = 64 * 1024;

/// The most header fields hyper parses (past it: its own empty 431). Above
/// [`HEADERS_MAX`], so a request over that is seen here first.
pub const HYPER_MAX_HEADERS: usize = 2 * HEADERS_MAX;

/// hyper's read buffer, which a request's whole head must fit (past it:
/// its own empty 431). Above [`URI_MAX`] and [`HEADER_BYTES_MAX`]
/// together, so a request over either is seen here first.
pub const HYPER_HEAD_BUFFER: usize = 256 * 1024;

const _: () = assert!(HYPER_MAX_HEADERS > HEADERS_MAX);
const _: () = assert!(HYPER_HEAD_BUFFER > URI_MAX + HEADER_BYTES_MAX + 1024);

/// The request target's length in bytes, as it was sent.
fn target_len(uri: &Uri) -> usize {
    let scheme = uri.scheme_str().map_or(0, |s| s.len() + "://".len());
    let authority = uri.authority().map_or(0, |a| a.as_str().len());
    let rest = uri.path_and_query().map_or(0, |pq| pq.as_str().len());
    scheme + authority + rest
}

/// The header fields' count and their bytes (`name: value\r\n` each).
fn header_size(headers: &HeaderMap) -> (usize, usize) {
    headers
        .iter()
        .fold((0, 0), |(count, bytes), (name, value)| {
            (
                count + 1,
                bytes + name.as_str().len() + ": ".len() + value.len() + "\r\n".len(),
            )
        })
}

/// Why a head is refused, if it is.
fn refusal(request: &Request) -> Option<Problem> {
    let target = target_len(request.uri());
    if target > URI_MAX {
        return Some(Problem::new(
            414,
            "uri_too_long",
            "the request target is too long",
            format!("the request target is {target} bytes; at most {URI_MAX} are read"),
        ));
    }
    let (count, bytes) = header_size(request.headers());
    if count > HEADERS_MAX || bytes > HEADER_BYTES_MAX {
        return Some(Problem::new(
            431,
            "headers_too_large",
            "the request's headers are too large",
            format!(
                "the request sent {count} header fields of {bytes} bytes; at most \
                 {HEADERS_MAX} fields of {HEADER_BYTES_MAX} bytes together are read"
            ),
        ));
    }
    None
}

/// Middleware (`from_fn(checked)`): a head over the limits is refused
/// (module text) before the request goes further.
pub async fn checked(request: Request, next: Next) -> Response {
    let Some(problem) = refusal(&request) else {
        return next.run(request).await;
    };
    tracing::info!(code = %problem.code, detail = %problem.detail, "serve: refused a request's head");
    let page = super::dashboard::wants_page(request.headers(), request.uri().path());
    let response = problem.into_response();
    if page {
        return super::dashboard::as_page(response).await;
    }
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_target_is_measured_as_sent() {
        let lens: Vec<usize> = [
            "/v1/jobs?status=done",
            "http://host:8080/v1/jobs?status=done",
            "*",
        ]
        .iter()
        .map(|u| target_len(&u.parse::<Uri>().unwrap()))
        .collect();
        assert_eq!(lens, vec![20, 36, 1]);
    }
}

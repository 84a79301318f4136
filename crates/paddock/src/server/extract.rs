//! Extractors whose refusals are problem bodies: axum's own extractors
//! (`Query`, `Path`, `Json`, `Bytes`, …) answer a malformed request with a
//! `text/plain` body, which is not the API's error shape (docs/api.md#errors)
//! nor what the OpenAPI document promises. [`Checked`] wraps an extractor
//! of the request's parts, [`CheckedBody`] one of its body; either turns
//! the refusal into a problem of the same status: 400 `bad_request`, 413
//! `too_large`, 415 `unsupported_media_type`, 422 `bad_input`, with axum's
//! message as the detail. [`JsonBody`] is the body of a route that takes
//! JSON: a request naming another media type (`text/plain`, a form) is
//! refused with 415 before its body is read. [`json_object_text`] is the
//! one check every JSON-object body (a job spec, a turn request) goes
//! through before its own parser: UTF-8, and an object, with the document
//! that describes it named.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue};
use axum::response::IntoResponse;

use super::problem::Problem;
use crate::runner::ErrorCode;

/// The largest request body the API reads, in bytes (2 MiB): a longer one
/// is refused with 413 `too_large` before it is read whole.
pub const BODY_LIMIT: usize = 2 << 20;

/// The longest refusal message kept as a problem's detail.
const MAX_DETAIL: usize = 4096;

/// A parts extractor `E` (query, path, headers) refusing with a problem.
#[derive(Debug, Clone, Copy, Default)]
pub struct Checked<E>(pub E);

/// A body extractor `E` (JSON, bytes) refusing with a problem.
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckedBody<E>(pub E);

impl<S, E> FromRequestParts<S> for Checked<E>
where
    S: Send + Sync,
    E: FromRequestParts<S>,
    E::Rejection: IntoResponse,
{
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Problem> {
        let refused = match E::from_request_parts(parts, state).await {
            Ok(e) => return Ok(Checked(e)),
            Err(rejection) => rejection.into_response(),
        };
        Err(problem(refused).await)
    }
}

impl<S, E> FromRequest<S> for CheckedBody<E>
where
    S: Send + Sync,
    E: FromRequest<S>,
    E::Rejection: IntoResponse,
{
    type Rejection = Problem;

    async fn from_request(request: Request, state: &S) -> Result<Self, Problem> {
        let refused = match E::from_request(request, state).await {
            Ok(e) => return Ok(CheckedBody(e)),
            Err(rejection) => rejection.into_response(),
        };
        Err(problem(refused).await)
    }
}

/// The body of a route that takes JSON, as bytes. A request whose
/// `Content-Type` is JSON (`application/json`, `application/…+json`, any
/// parameters) or absent is read; any other, or two `Content-Type`
/// headers, is refused with 415 `unsupported_media_type` naming the type
/// it gave (cut to 100 characters) and the one to give.
#[derive(Debug, Clone)]
pub struct JsonBody(pub Bytes);

impl<S> FromRequest<S> for JsonBody
where
    S: Send + Sync,
{
    type Rejection = Problem;

    async fn from_request(request: Request, state: &S) -> Result<Self, Problem> {
        let mut given = request.headers().get_all(header::CONTENT_TYPE).iter();
        if let Some(first) = given.next() {
            // Not the first one picked: a proxy in front may have read the
            // other (as with a doubled `Authorization`, auth.rs).
            if given.next().is_some() {
                return Err(Problem::new(
                    415,
                    "unsupported_media_type",
                    "the request body's media type is not accepted",
                    "the request has more than one Content-Type header; send exactly one: \
                     `Content-Type: application/json`"
                        .into(),
                ));
            }
            json_media_type(first)?;
        }
        let CheckedBody(body) = CheckedBody::<Bytes>::from_request(request, state).await?;
        Ok(JsonBody(body))
    }
}

/// `Ok` when `given` names JSON.
fn json_media_type(given: &HeaderValue) -> Result<(), Problem> {
    let text = String::from_utf8_lossy(given.as_bytes());
    let essence = text
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let json = essence == "application/json"
        || essence
            .strip_prefix("application/")
            .is_some_and(|sub| sub.ends_with("+json"));
    if json {
        return Ok(());
    }
    let shown: String = text.chars().take(100).collect();
    let cut = if shown.len() < text.len() { "…" } else { "" };
    Err(Problem::new(
        415,
        "unsupported_media_type",
        "the request body's media type is not accepted",
        format!(
            "the request body is `{shown}{cut}`; this route reads JSON: send `Content-Type: application/json`"
        ),
    ))
}

/// The body as text when it is UTF-8 and a JSON object; otherwise a
/// `bad_input` problem naming `what` the body must be (e.g. "a JSON job
/// spec (docs/job-spec.md)"). The object itself is parsed by its own type,
/// which names the field that is wrong.
pub fn json_object_text<'a>(body: &'a [u8], what: &str) -> Result<&'a str, Problem> {
    let text = std::str::from_utf8(body).map_err(|e| {
        Problem::runner(
            ErrorCode::BadInput,
            format!("the request body is not UTF-8: {e}"),
        )
    })?;
    let start = text.trim_start();
    if start.is_empty() {
        return Err(Problem::runner(
            ErrorCode::BadInput,
            format!("the request body is empty; it must be {what}"),
        ));
    }
    if !start.starts_with('{') {
        // What it begins with, cut and escaped: enough to recognise a
        // TOML spec, a form or an array sent by mistake.
        let begins: String = start.chars().take(16).collect();
        return Err(Problem::runner(
            ErrorCode::BadInput,
            format!(
                "the request body must be {what}, a JSON object `{{…}}`; it begins {}",
                serde_json::Value::from(begins)
            ),
        ));
    }
    Ok(text)
}

/// The problem of an extractor's refusal: its status, its message.
async fn problem(response: axum::response::Response) -> Problem {
    let status = response.status().as_u16();
    let detail = match axum::body::to_bytes(response.into_body(), MAX_DETAIL).await {
        // axum's words (`Failed to buffer the request body: length limit
        // exceeded`) say neither the limit nor whose it is.
        Ok(_) if status == 413 => {
            format!("the request body is longer than this server reads ({BODY_LIMIT} bytes, 2 MiB)")
        }
        Ok(bytes) => {
            let said = String::from_utf8_lossy(&bytes);
            // axum's own words before serde's say only that it failed.
            match said.strip_prefix("Failed to deserialize query string: ") {
                Some(rest) => format!("the query string: {rest}"),
                None => said.into_owned(),
            }
        }
        Err(_) => String::from("the request is malformed"),
    };
    let (code, title) = match status {
        413 => ("too_large", "the request body is too large"),
        415 => (
            "unsupported_media_type",
            "the request body's media type is not accepted",
        ),
        422 => ("bad_input", "the request body does not fit its schema"),
        _ => ("bad_request", "the request is malformed"),
    };
    Problem::new(status, code, title, detail)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use axum::extract::Query;
    use axum::http::Uri;

    #[derive(Debug, serde::Deserialize)]
    struct Limit {
        #[allow(dead_code)]
        limit: u32,
    }

    #[test]
    fn only_json_media_types_are_read_as_json() {
        let verdict = |given: &[u8]| match json_media_type(&HeaderValue::from_bytes(given).unwrap())
        {
            Ok(()) => None,
            Err(p) => Some((p.status, p.code, p.detail)),
        };
        let refused = |shown: &str| {
            Some((
                415,
                "unsupported_media_type".to_string(),
                format!("the request body is `{shown}`; this route reads JSON: send `Content-Type: application/json`"),
            ))
        };
        let long = format!("text/{}", "x".repeat(200));
        assert_eq!(
            [
                verdict(b"application/json"),
                verdict(b"Application/JSON; charset=utf-8"),
                verdict(b"application/merge-patch+json"),
                verdict(b"text/plain"),
                verdict(b"application/x-www-form-urlencoded"),
                verdict(b"text/json+plain"),
                verdict(long.as_bytes()),
            ],
            [
                None,
                None,
                None,
                refused("text/plain"),
                refused("application/x-www-form-urlencoded"),
                refused("text/json+plain"),
                refused(&format!("{}…", &long[..100])),
            ]
        );
    }

    #[test]
    fn a_json_object_body_is_its_text_and_anything_else_is_bad_input() {
        assert_eq!(
            json_object_text(b" \n{\"a\": 1}", "a JSON thing (docs/x.md)"),
            Ok(" \n{\"a\": 1}")
        );
        assert_eq!(
            [
                json_object_text(b"[1]", "a JSON thing (docs/x.md)"),
                json_object_text(b" \n", "a JSON thing (docs/x.md)"),
                json_object_text(b"[ticket]\nid = \"T-1\"\n", "a JSON thing (docs/x.md)"),
            ],
            [
                "the request body must be a JSON thing (docs/x.md), a JSON object `{…}`; it \
                 begins \"[1]\"",
                "the request body is empty; it must be a JSON thing (docs/x.md)",
                "the request body must be a JSON thing (docs/x.md), a JSON object `{…}`; it \
                 begins \"[ticket]\\nid = \\\"T\"",
            ]
            .map(|detail| Err(Problem::runner(ErrorCode::BadInput, detail.into())))
        );
        assert_eq!(
            json_object_text(b"{\"a\": \"\xff\"}", "a JSON thing (docs/x.md)"),
            Err(Problem::runner(
                ErrorCode::BadInput,
                "the request body is not UTF-8: invalid utf-8 sequence of 1 bytes from index 7"
                    .into()
            ))
        );
    }

    /// Probe: a body sent with two `Content-Type` headers, JSON first, is
    /// refused, not read by the first (a proxy may have read the other);
    /// one JSON type is read.
    #[tokio::test]
    async fn a_doubled_content_type_is_refused() {
        let read = |types: &[&str]| {
            let mut request = Request::builder().method("POST").uri("/v1/jobs");
            for t in types {
                request = request.header(header::CONTENT_TYPE, *t);
            }
            let request = request.body(axum::body::Body::from("{}")).unwrap();
            async move {
                JsonBody::from_request(request, &())
                    .await
                    .map(|JsonBody(b)| b)
                    .map_err(|p| (p.status, p.code, p.detail))
            }
        };
        assert_eq!(
            [
                read(&["application/json", "text/plain"]).await,
                read(&["application/json", "application/json"]).await,
                read(&["application/json"]).await,
            ],
            [
                Err((
                    415,
                    "unsupported_media_type".into(),
                    "the request has more than one Content-Type header; send exactly one: \
                     `Content-Type: application/json`"
                        .into()
                )),
                Err((
                    415,
                    "unsupported_media_type".into(),
                    "the request has more than one Content-Type header; send exactly one: \
                     `Content-Type: application/json`"
                        .into()
                )),
                Ok(Bytes::from_static(b"{}")),
            ]
        );
    }

    #[tokio::test]
    async fn a_malformed_query_is_a_bad_request_problem() {
        let request = Request::builder()
            .uri(Uri::from_static("/v1/jobs?limit=-1"))
            .body(axum::body::Body::empty())
            .unwrap();
        let (mut parts, _) = request.into_parts();
        let refused = Checked::<Query<Limit>>::from_request_parts(&mut parts, &())
            .await
            .unwrap_err();
        assert_eq!(
            refused,
            Problem::new(
                400,
                "bad_request",
                "the request is malformed",
                "the query string: limit: invalid digit found in string".into()
            )
        );
    }
}

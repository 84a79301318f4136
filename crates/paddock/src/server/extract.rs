//! Extractors whose refusals are problem bodies: axum's own extractors
//! (`Query`, `Path`, `Json`, `Bytes`, …) answer a malformed request with a
//! `text/plain` body, which is not the API's error shape (docs/api.md#errors)
//! nor what the OpenAPI document promises. [`Checked`] wraps an extractor
//! of the request's parts, [`CheckedBody`] one of its body; either turns
//! the refusal into a problem of the same status: 400 `bad_request`, 413
//! `too_large`, 415 `unsupported_media_type`, 422 `bad_input`, with axum's
//! message as the detail.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::response::IntoResponse;

use super::problem::Problem;

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

/// The problem of an extractor's refusal: its status, its message.
async fn problem(response: axum::response::Response) -> Problem {
    let status = response.status().as_u16();
    let detail = match axum::body::to_bytes(response.into_body(), MAX_DETAIL).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
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
                "Failed to deserialize query string: limit: invalid digit found in string".into()
            )
        );
    }
}

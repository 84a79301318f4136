//! The API's JSON responses, written by the same terminal-safe writer as
//! the CLI's `--json` (`terminal_text::json`): a job's text in a record,
//! an event or a usage key (the C1 controls, DEL, bidirectional overrides)
//! reaches a dispatcher's logs or a `curl` on a terminal as `\uXXXX`, and
//! parses to the same value. [`Json`] is axum's `Json` response with that
//! writer; the problem+json errors (`problem.rs`) and the event streams
//! (`events.rs`) call [`to_string`] themselves.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

pub use crate::terminal_text::json::to_string;

/// A JSON response body (`application/json`).
pub struct Json<T>(pub T);

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        match to_string(&self.0) {
            Ok(body) => {
                let mut response = body.into_response();
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                response
            }
            Err(e) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot write the answer as JSON: {e}"),
            )
                .into_response(),
        }
    }
}

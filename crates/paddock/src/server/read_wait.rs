//! How long a read of the API (`GET` of jobs, events, usage, the ledger;
//! the dashboard's pages that read the store)
//! waits for the store: at most [`READ_WAIT`], then it is answered 503
//! `store_unavailable` (docs/api.md#errors). The store retries a failure
//! that passes for up to 30 s (`store/retry.rs`), which a running job's
//! writes need to outlast a PostgreSQL restart; a client reading
//! meanwhile wants a prompt, clear answer instead, and can ask again. The
//! jobs' own writes run in their own tasks, which this never cuts: they
//! keep retrying. A read cut here is dropped mid-statement (its
//! connection closed or returned), which a read may be.

use std::time::Duration;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};

use super::problem::Problem;

/// The longest a read request waits for its answer.
pub const READ_WAIT: Duration = Duration::from_secs(5);

/// Runs the read `request`, or answers 503 `store_unavailable` once it
/// has waited [`READ_WAIT`].
pub async fn promptly(request: Request, next: Next) -> Response {
    let what = format!("{} {}", request.method(), request.uri().path());
    match tokio::time::timeout(READ_WAIT, next.run(request)).await {
        Ok(response) => response,
        Err(_) => Problem::store_unavailable(format!(
            "{what}: the store did not answer within {} s (it may be restarting or \
             unreachable); ask again later",
            READ_WAIT.as_secs()
        ))
        .into_response(),
    }
}

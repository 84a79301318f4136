//! Errors as HTTP answers: `application/problem+json` (RFC 9457) bodies
//! with a stable `code` a client branches on. The runner's errors keep
//! their own codes and statuses (`runner::ErrorCode`: `bad_input` 422,
//! `store_lost` 503, `internal` 500); the server adds its own few
//! (`not_found`, `bad_request`, `method_not_allowed`, `store_unavailable`, `job_final`,
//! `job_elsewhere`, `policy_refused` with the host profile's `rule`, …).
//! The `detail` is the error's whole chain, for people; never branch on
//! it.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::runner::{AdmitError, ErrorCode};
use crate::store::StoreError;

/// The media type of a problem body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// A problem body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Problem {
    /// `urn:paddock:problem:<code>`.
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// The stable code (docs/api.md#errors).
    pub code: String,
    /// The host profile's rule that refused the job (code
    /// `policy_refused`: `network`, `cpu_limit`, `allowed_models`, …).
    /// (A `Box<str>`: a problem is the error of many results, kept
    /// small.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<Box<str>>,
}

impl Problem {
    pub fn new(status: u16, code: &str, title: &str, detail: String) -> Problem {
        Problem {
            kind: format!("urn:paddock:problem:{code}"),
            title: title.to_owned(),
            status,
            detail,
            code: code.to_owned(),
            rule: None,
        }
    }

    /// A runner error by its code.
    pub fn runner(code: ErrorCode, detail: String) -> Problem {
        let title = match code {
            ErrorCode::BadInput => "the job spec cannot run",
            ErrorCode::StoreLost => "the store failed",
            ErrorCode::Internal => "paddock failed",
        };
        Problem::new(code.http_status(), code.as_str(), title, detail)
    }

    pub fn not_found(what: String) -> Problem {
        Problem::new(404, "not_found", "no such resource", what)
    }

    /// 404 for a job id no job has. The id is the caller's text from the
    /// URL: it is named as given up to 64 characters, a longer one cut
    /// with its length said, so a client's mistake is recognisable and a
    /// megabyte of path is not echoed back into its logs.
    pub fn no_job(id: &str) -> Problem {
        const SHOWN: usize = 64;
        let count = id.chars().count();
        let named = if count <= SHOWN {
            format!("no job {id}")
        } else {
            let head: String = id.chars().take(SHOWN).collect();
            format!("no job {head}… (an id of {count} characters)")
        };
        Problem::not_found(named)
    }

    /// 503 `store_unavailable`: the store failed for a reason that passes
    /// (a dropped connection, a restarting server, SQLite busy), or did
    /// not answer a read in time (`read_wait.rs`); asking again later may
    /// succeed.
    pub fn store_unavailable(detail: String) -> Problem {
        Problem::new(503, "store_unavailable", "the store is unavailable", detail)
    }

    /// 422 `repository_not_found`: the spec's local source (a path, a
    /// `file://` URL) is surely no repository on this server
    /// (`runner::SourceMissing`): not there, or no git repository. The
    /// runner's `bad_input` with a code of its own a client branches on.
    pub fn repository_not_found(detail: String) -> Problem {
        Problem::new(
            ErrorCode::BadInput.http_status(),
            "repository_not_found",
            "the job's repository is not there",
            detail,
        )
    }

    pub fn bad_request(detail: String) -> Problem {
        Problem::new(400, "bad_request", "the request is malformed", detail)
    }
}

/// An error with its sources, `a: b: c`, as the runner writes them.
pub use crate::runner::error_chain as chain;

impl From<AdmitError> for Problem {
    fn from(e: AdmitError) -> Problem {
        match &e {
            // Still the runner's `bad_input` (422, `paddock run`'s exit 2),
            // with a code of its own and the rule a client branches on.
            AdmitError::PolicyRefused(refusal) => Problem {
                rule: Some(refusal.rule.as_str().into()),
                ..Problem::new(
                    e.code().http_status(),
                    "policy_refused",
                    "the host profile refuses the job",
                    chain(&e),
                )
            },
            AdmitError::Source(_) => Problem::repository_not_found(chain(&e)),
            _ => Problem::runner(e.code(), chain(&e)),
        }
    }
}

impl From<StoreError> for Problem {
    fn from(e: StoreError) -> Problem {
        if e.is_transient() {
            Problem::store_unavailable(chain(&e))
        } else {
            Problem::runner(ErrorCode::StoreLost, chain(&e))
        }
    }
}

impl From<paddock_protocol::SpecError> for Problem {
    fn from(e: paddock_protocol::SpecError) -> Problem {
        Problem::runner(ErrorCode::BadInput, chain(&e))
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = super::json::to_string(&self).unwrap_or_else(|_| String::from("{}"));
        let mut response = (status, body).into_response();
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_job_id_is_named_and_a_long_one_cut() {
        let long = format!("job-{}", "é".repeat(1000));
        assert_eq!(
            [
                Problem::no_job("job-none").detail,
                Problem::no_job(&long).detail
            ],
            [
                "no job job-none".to_string(),
                format!("no job job-{}… (an id of 1004 characters)", "é".repeat(60)),
            ]
        );
    }

    /// A store failure that passes (a dropped connection) is 503
    /// `store_unavailable`: the client may ask again; one that does not
    /// stays `store_lost`.
    #[test]
    fn a_store_failure_that_passes_is_unavailable_and_another_lost() {
        let dropped = StoreError::ReadJob {
            job_id: "j1".into(),
            source: sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::BrokenPipe)),
        };
        let closed = StoreError::ReadJob {
            job_id: "j1".into(),
            source: sqlx::Error::PoolClosed,
        };
        assert_eq!(
            [Problem::from(dropped), Problem::from(closed)],
            [
                Problem {
                    kind: "urn:paddock:problem:store_unavailable".into(),
                    title: "the store is unavailable".into(),
                    status: 503,
                    // The I/O error said once: sqlx's message names it
                    // and returns it as its source too.
                    detail: "cannot read job j1: error communicating with database: broken pipe"
                        .into(),
                    code: "store_unavailable".into(),
                    rule: None,
                },
                Problem {
                    kind: "urn:paddock:problem:store_lost".into(),
                    title: "the store failed".into(),
                    status: 503,
                    detail: "cannot read job j1: attempted to acquire a connection on a closed \
                             pool"
                        .into(),
                    code: "store_lost".into(),
                    rule: None,
                },
            ]
        );
    }
}

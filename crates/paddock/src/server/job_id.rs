//! A job id as a request names it: in a path (`/v1/jobs/{id}`, its
//! events, cancel and dispose; the dashboard's `/jobs/{id}`) or a query
//! (`cursor`, `attempt_after`). Every id Paddock mints is `job-` and 32 hex
//! digits; one that cannot be any job's is answered here, before the store
//! is asked: over [`MAX`] characters, empty, or holding a control character
//! (NUL, which PostgreSQL cannot bind as text: the query failed and the
//! caller got a 503 `store_lost` echoing the raw id and the database's
//! words; the C0/C1 controls, DEL). [`JobId`] is the path extractor (404
//! `not_found`, as for an id no job has, or 400 `bad_request` for a
//! segment that is not UTF-8), [`check_query`] a query's (400
//! `bad_request`). The id is named back cut to 64 characters with its
//! controls escaped.

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;

use super::extract::Checked;
use super::problem::Problem;
use crate::cut_text::{cut, Cut};

/// The longest job id a request may name, in characters.
pub const MAX: usize = 128;

/// How an id is named back: its first 64 characters, controls escaped.
const SHOWN: Cut = Cut::chars(64).escaping_controls();

/// Why an id can be no job's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Empty,
    /// Its length in characters.
    Long(usize),
    Control,
}

/// Why `id` can be no job's id, if it cannot.
fn fault(id: &str) -> Option<Fault> {
    let count = id.chars().count();
    if count == 0 {
        Some(Fault::Empty)
    } else if count > MAX {
        Some(Fault::Long(count))
    } else if id.chars().any(char::is_control) {
        Some(Fault::Control)
    } else {
        None
    }
}

/// `id` as [`SHOWN`] names it (`\u{0}` for a NUL).
fn shown(id: &str) -> String {
    cut(id, SHOWN)
}

/// The job id of a route's `{id}` segment, refused with 404 `not_found`
/// when it can be no job's (module text) and 400 `bad_request` when the
/// segment is not UTF-8.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for JobId {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Problem> {
        let Checked(Path(id)) = Checked::<Path<String>>::from_request_parts(parts, state).await?;
        let why = match fault(&id) {
            None => return Ok(JobId(id)),
            // As for an id no job has (`Problem::no_job`), with the limit.
            Some(Fault::Long(count)) => {
                format!("(an id of {count} characters; a job's has at most {MAX})")
            }
            Some(Fault::Control) => "(an id has no control characters)".to_owned(),
            // No route matches an empty segment.
            Some(Fault::Empty) => "(an empty id)".to_owned(),
        };
        Err(Problem::not_found(format!("no job {} {why}", shown(&id))))
    }
}

/// Refuses query parameter `name`'s job id with 400 `bad_request` when it
/// can be no job's (module text).
pub fn check_query(name: &str, id: &str) -> Result<(), Problem> {
    let why = match fault(id) {
        None => return Ok(()),
        Some(Fault::Empty) => "empty; name the job by its id".to_owned(),
        Some(Fault::Long(count)) => {
            format!("an id of {count} characters is no job's (at most {MAX})")
        }
        Some(Fault::Control) => format!(
            "`{}` is no job's id (an id has no control characters)",
            shown(id)
        ),
    };
    Err(Problem::bad_request(format!("{name}: {why}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind of id that can be no job's is named for what is wrong,
    /// cut and escaped; a minted id, a short one and one of exactly the
    /// limit pass.
    #[test]
    fn an_id_that_can_be_no_job_s_is_refused_naming_why() {
        let long = "é".repeat(MAX + 1);
        let checked = [
            "job-0193a7c1d2e34f5a8b9c0d1e2f3a4b5c".to_owned(),
            "j1".to_owned(),
            "x".repeat(MAX),
            String::new(),
            long.clone(),
            "job-\0x".to_owned(),
            format!("{}\u{1b}[31m", "a".repeat(70)),
            "\u{85}\u{7f}".to_owned(),
        ]
        .map(|id| check_query("cursor", &id).map_err(|p| (p.status, p.code, p.detail)));
        let bad = |detail: &str| Err((400, "bad_request".to_owned(), detail.to_owned()));
        assert_eq!(
            checked,
            [
                Ok(()),
                Ok(()),
                Ok(()),
                bad("cursor: empty; name the job by its id"),
                bad("cursor: an id of 129 characters is no job's (at most 128)"),
                bad("cursor: `job-\\u{0}x` is no job's id (an id has no control characters)"),
                bad(&format!(
                    "cursor: `{}…` is no job's id (an id has no control characters)",
                    "a".repeat(64)
                )),
                bad("cursor: `\\u{85}\\u{7f}` is no job's id (an id has no control characters)"),
            ]
        );
    }
}

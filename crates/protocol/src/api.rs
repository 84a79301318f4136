//! The types of Paddock's API beyond the job spec, record and events that
//! it carries: the stable error codes every caller branches on (the CLI's
//! exit codes and the server's HTTP statuses derive from them) and a page
//! of jobs (`GET /v1/jobs`). The server's problem body and query strings
//! stay with the server (docs/api.md, ARCHITECTURE.md).

use serde::{Deserialize, Serialize};

use crate::JobRecord;

/// The stable code of a runner error: what callers branch on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// The spec (or what it names) cannot run; the caller can fix it.
    BadInput,
    /// The store failed under the job; its record is not whole (the
    /// reaper finishes it).
    StoreLost,
    /// Paddock itself failed (a lease, a task that ended unexpectedly).
    Internal,
}

impl ErrorCode {
    /// The code's stable name (`bad_input`, `store_lost`, `internal`).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadInput => "bad_input",
            ErrorCode::StoreLost => "store_lost",
            ErrorCode::Internal => "internal",
        }
    }

    /// The CLI's exit code (docs/cli.md): 2 bad input, 70 internal.
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorCode::BadInput => 2,
            ErrorCode::StoreLost | ErrorCode::Internal => 70,
        }
    }

    /// The HTTP status a server answers with.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::BadInput => 422,
            ErrorCode::StoreLost => 503,
            ErrorCode::Internal => 500,
        }
    }
}

/// A page of jobs.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobPage {
    pub jobs: Vec<JobRecord>,
    /// Pass as `cursor` for the next page; absent on the last one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

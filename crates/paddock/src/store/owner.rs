//! Who runs a job, and whether it is still alive (docs/store.md, "Several
//! hosts, one database"): every job that starts running records its
//! [`Owner`] (the random id of the jobs directory whose `paddock` process
//! runs it, `crate::host_id`, and that host's name for messages) and a
//! heartbeat time, which the owner renews while the job runs
//! (`crate::heartbeat`). A reaper on another host reads them as
//! [`RunningJob`]s: a job whose heartbeat is older than its TTL is
//! reclaimed by a compare-and-set on the owner and the very heartbeat the
//! reaper saw, so two reapers never both reclaim it and an owner that
//! renewed in between keeps it. A cancel asked of a running job by a
//! process that does not run it (another server on the store) is recorded
//! on its row ([`REQUEST_CANCEL`]), which its owner reads while it renews
//! ([`STANDING`]); a reaper that reclaims the job of a dead owner
//! reads it too, and ends the job `cancelled` when one was asked
//! ([`Reclaim`]: the compare-and-set also holds on whether a request is
//! recorded, so one recorded meanwhile is never lost). The statements
//! are written once here, in the dialect both backends accept (`$n`
//! parameters, RFC 3339 text times); both backends run them through one
//! macro (`sql/jobs.rs`).

use std::sync::LazyLock;

use paddock_protocol::event::EventBody;
use paddock_protocol::JobRecord;
use time::OffsetDateTime;

use super::sqlite::jobs::{COLUMNS, UPDATE};

/// The jobs directory (one "host") running a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// The jobs directory's random id (`<jobs>/.host-id`).
    pub host: String,
    /// Its host's name, for messages only (never compared).
    pub name: String,
}

/// A `running` job as a reaper sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningJob {
    pub id: String,
    /// Who runs it and when it last renewed its heartbeat; `None` for a
    /// job recorded before owners were (the reaper's local rules apply).
    pub owner: Option<(Owner, OffsetDateTime)>,
    /// Its queue priority when a server's queue claimed it; `None` for a
    /// job its own process recorded (`paddock run`, a turn).
    pub queued: Option<i64>,
}

/// A cancel of a running job asked by a process that does not run it
/// (`Store::request_cancel`): the first request's time and asking host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CancelRequest {
    pub at: OffsetDateTime,
    /// The asking host's name.
    pub by: String,
}

/// Where a job stands for a claimer that could not put it back in the
/// queue (`Store::claim_standing`): its status, owner and cancel request,
/// read as one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimStanding {
    pub status: paddock_protocol::JobStatus,
    /// As `Store::job_owner` gives it.
    pub owner: Option<Owner>,
    /// As `Store::cancel_requested` gives it.
    pub cancel: Option<CancelRequest>,
}

/// Everything a reaper writes when it reclaims a dead host's running job,
/// in one transaction (`Store::reclaim_job`): all of it or, when the
/// compare-and-set does not hold or a step fails, none of it.
#[derive(Debug, Clone, Copy)]
pub struct Reclaim<'a> {
    /// The job's final record (`failed`, or `cancelled` when a cancel was
    /// asked); its totals are summed from the ledger in the transaction.
    pub job: &'a JobRecord,
    /// The owner the reaper saw, and its last heartbeat.
    pub host: &'a str,
    pub heartbeat: OffsetDateTime,
    /// Whether the reaper saw a cancel request on the job: the
    /// compare-and-set holds only while that is still so.
    pub cancel_asked: bool,
    /// The job's final event, appended with the next seq.
    pub last: &'a EventBody,
    /// Why its calls still `in_flight` are settled `interrupted`.
    pub interrupted: &'a str,
    /// Its next attempt, queued in the same transaction (a job from a
    /// server's queue, `crate::requeue`).
    pub next: Option<NextAttempt<'a>>,
}

/// A job queued by a reclaim: its record, spec, queue priority and the
/// prior job it follows.
#[derive(Debug, Clone, Copy)]
pub struct NextAttempt<'a> {
    pub job: &'a JobRecord,
    pub spec_json: &'a str,
    pub priority: i64,
    /// The prior job the reclaimed one followed, followed again.
    pub follows: Option<&'a super::Follows>,
}

/// `INSERT` of `id`, the `COLUMNS`, `spec_json`, `priority`,
/// `follows_job`, `follows_ended`, `follows_closed`, `owner_host`,
/// `owner_name` and `heartbeat_at`.
pub(in crate::store) static INSERT_OWNED: LazyLock<String> = LazyLock::new(|| {
    let last = COLUMNS.len() + 9;
    let placeholders: Vec<String> = (1..=last).map(|n| format!("${n}")).collect();
    format!(
        "INSERT INTO jobs (id, {}, spec_json, priority, follows_job, follows_ended, follows_closed, owner_host, owner_name, heartbeat_at) \
         VALUES ({})",
        COLUMNS.join(", "),
        placeholders.join(", ")
    )
});

/// Renews the heartbeat (`$3`) of job `$1` if it is still `running` and
/// owned by `$2`.
pub(in crate::store) const HEARTBEAT: &str = "UPDATE jobs SET heartbeat_at = $3 \
     WHERE id = $1 AND status = 'running' AND owner_host = $2";

/// The `UPDATE` of every column of job `$1` (bound as `finish_job` binds
/// them) if it is still `running`, owned by the host after the columns,
/// with the heartbeat after that, and with a cancel request recorded or
/// not as the flag after that says.
pub(in crate::store) static RECLAIM: LazyLock<String> = LazyLock::new(|| {
    let owner = COLUMNS.len() + 2;
    format!(
        "{} AND status = 'running' AND owner_host = ${owner} AND heartbeat_at = ${} \
         AND (cancel_requested_at IS NOT NULL) = ${}",
        UPDATE.as_str(),
        owner + 1,
        owner + 2
    )
});

/// Records a cancel of job `$1` asked at `$2` by host name `$3` (the first
/// request's kept) if it is `running` with an owner: its owner's host and
/// name, no row when it is not.
pub(in crate::store) const REQUEST_CANCEL: &str = "UPDATE jobs \
     SET cancel_requested_at = COALESCE(cancel_requested_at, $2), \
         cancel_requested_by = COALESCE(cancel_requested_by, $3) \
     WHERE id = $1 AND status = 'running' AND owner_host IS NOT NULL \
     RETURNING owner_host, owner_name";

/// The job host `$1` claimed from the queue at `$2` (its `claimed_at`,
/// the claim's key), if it still runs there: a retried claim's own.
pub(in crate::store) const CLAIMED_BY: &str = "SELECT id FROM jobs \
     WHERE status = 'running' AND owner_host = $1 AND claimed_at = $2";

/// Puts the claimed job `$1` back in the queue with the reason `$3`
/// (why its claimer may not run it), if it is still `running`, owned by
/// host `$2`, and no cancel was asked of it meanwhile.
pub(in crate::store) const UNCLAIM: &str = "UPDATE jobs \
     SET status = 'queued', owner_host = NULL, owner_name = NULL, heartbeat_at = NULL, \
         claimed_at = NULL, reason = $3 \
     WHERE id = $1 AND status = 'running' AND owner_host = $2 \
       AND cancel_requested_at IS NULL";

/// The status, owner and cancel request of job `$1` (no row: no job):
/// also what `job_owner` and `cancel_requested` read.
pub(in crate::store) const STANDING: &str = "SELECT status, owner_host, owner_name, \
            cancel_requested_at, cancel_requested_by FROM jobs WHERE id = $1";

/// A row of [`STANDING`].
pub(in crate::store) type StandingRow = (
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// Decodes a row of [`STANDING`] of job `id`: an owner only with its
/// host, a cancel request only with its time.
pub(in crate::store) fn standing(
    id: &str,
    (status, host, name, asked_at, asked_by): StandingRow,
) -> Result<ClaimStanding, super::StoreError> {
    let row = super::sqlite::codec::RowRef::new("jobs", format!("job {id}"));
    let status = paddock_protocol::JobStatus::parse(&status)
        .ok_or_else(|| row.decode_error("status", format!("unknown job status {status:?}")))?;
    let owner = host.map(|host| Owner {
        host,
        name: name.unwrap_or_default(),
    });
    let cancel = match asked_at {
        Some(at) => Some(CancelRequest {
            at: row.parse_time("cancel_requested_at", &at)?,
            by: asked_by.unwrap_or_default(),
        }),
        None => None,
    };
    Ok(ClaimStanding {
        status,
        owner,
        cancel,
    })
}

/// The owners of the `$1` newest jobs (as `Store::jobs` lists them), of
/// those that have one.
pub(in crate::store) const OWNERS: &str = "SELECT id, owner_host, owner_name FROM jobs \
     ORDER BY created_at DESC, id DESC LIMIT $1";

/// The running jobs with their owners, oldest first.
pub(in crate::store) const RUNNING: &str = "SELECT id, owner_host, owner_name, heartbeat_at, \
            CASE WHEN claimed_at IS NULL THEN NULL ELSE priority END FROM jobs \
     WHERE status = 'running' ORDER BY created_at, id";

/// A row of [`RUNNING`].
pub(in crate::store) type RunningRow = (
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<i64>,
);

/// Decodes a row of [`RUNNING`]: an owner only with its heartbeat.
pub(in crate::store) fn running_job(
    (id, host, name, heartbeat, queued): RunningRow,
) -> Result<RunningJob, super::StoreError> {
    let row = super::sqlite::codec::RowRef::new("jobs", format!("job {id}"));
    let owner = match (host, heartbeat) {
        (Some(host), Some(at)) => Some((
            Owner {
                host,
                name: name.unwrap_or_default(),
            },
            row.parse_time("heartbeat_at", &at)?,
        )),
        _ => None,
    };
    Ok(RunningJob { id, owner, queued })
}

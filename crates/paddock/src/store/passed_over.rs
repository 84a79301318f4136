//! A queued job the fleet's servers pass over (docs/serve.md, "A job no
//! server runs"), as the store keeps it for every server: when a server
//! first passed it over (`jobs.passed_over_at`, set once, by the first
//! server that may not or cannot run it, whether it claimed it or
//! accepted it for the fleet at submission) and the last time a server
//! that can run it but had no free slot said so (`able_at`, with that
//! server's jobs directory id and host name). A server passing the job
//! over fails it only once the first pass is `[serve]
//! max_passed_over_secs` old and no such mark is fresh: before, each
//! server counted from its own first pass in its memory, a restart
//! counted afresh, and a server that could not run the job failed it
//! while one that could was busy. Migrations 0031 and PostgreSQL's 0010.
//! The statements are written once, in the dialect both backends accept.

use time::OffsetDateTime;

use super::{Owner, StoreError};

/// Where a passed-over job stands for the fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassedOver {
    /// When a server first passed it over.
    pub first: OffsetDateTime,
    /// The last server that can run it and said so while it had no free
    /// slot, and when.
    pub able: Option<(Owner, OffsetDateTime)>,
}

/// Records that job `$1` was passed over at `$2` unless an earlier pass
/// was recorded; the first pass's time and the last mark of a server able
/// to run it (no row: no such job).
pub(in crate::store) const PASS_OVER: &str = "UPDATE jobs \
     SET passed_over_at = COALESCE(passed_over_at, $2) WHERE id = $1 \
     RETURNING passed_over_at, able_at, able_host, able_name";

/// Marks queued job `$1` as one the server of jobs directory `$3` (host
/// name `$4`) can run, at `$2`.
pub(in crate::store) const MARK_ABLE: &str = "UPDATE jobs \
     SET able_at = $2, able_host = $3, able_name = $4 \
     WHERE id = $1 AND status = 'queued'";

/// The `$1` oldest queued jobs some server passed over that `lanes` take
/// (each lane's lists the parameters after `$1`, as the claim's:
/// `sqlite::queue::lanes_filter`, `task_type` the backend's expression of
/// a queued row's task type).
pub(in crate::store) fn passed_over_queued_sql(lanes: &[super::Lane], task_type: &str) -> String {
    let mut n = 1;
    let mut param = || {
        n += 1;
        format!("${n}")
    };
    let filter = super::sqlite::queue::lanes_filter(lanes, task_type, &mut param);
    format!(
        "SELECT q.id FROM jobs q WHERE q.status = 'queued' AND q.passed_over_at IS NOT NULL{filter} \
         ORDER BY q.created_at, q.id LIMIT $1"
    )
}

/// A row of [`PASS_OVER`].
pub(in crate::store) type PassOverRow = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// Decodes a row of [`PASS_OVER`] of job `id`: a mark only with its time
/// and host.
pub(in crate::store) fn passed_over(
    id: &str,
    (first, able_at, able_host, able_name): PassOverRow,
) -> Result<PassedOver, StoreError> {
    let row = super::sqlite::codec::RowRef::new("jobs", format!("job {id}"));
    let first = first
        .ok_or_else(|| row.decode_error("passed_over_at", "NULL after it was set".to_owned()))?;
    let first = row.parse_time("passed_over_at", &first)?;
    let able = match (able_at, able_host) {
        (Some(at), Some(host)) => Some((
            Owner {
                host,
                name: able_name.unwrap_or_default(),
            },
            row.parse_time("able_at", &at)?,
        )),
        _ => None,
    };
    Ok(PassedOver { first, able })
}

//! The prior job a queued job follows (`POST /v1/jobs?attempt_after=JOB`,
//! docs/results.md): written with the queued row, in the same statement
//! (`Store::enqueue_job`, and a reclaim's next attempt, which follows what
//! the reclaimed one followed), and read when a server claims the job and
//! admits its stored spec again (`Store::job_follows`), so the attempt
//! resumes or forks the prior engine session on the prior branch whichever
//! server runs it, after a restart too. A job its own process records
//! (`paddock run --attempt-after`) holds its prior in memory and stores
//! none.

/// The prior job of a next attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Follows {
    /// The prior job's id.
    pub job: String,
    /// `its pull request URL was merged on the forge` when it was, read
    /// from the forge when the attempt was submitted (`bounce::After`):
    /// the attempt then starts on the spec's base in a new session.
    pub ended: Option<String>,
    /// `its pull request URL was closed on the forge without being
    /// merged` when it was, read when the attempt was submitted: the
    /// attempt builds on its branch in a pull request of its own, and its
    /// session status event and closeout say so
    /// (`session::Continuation::describe`).
    pub closed: Option<String>,
}

/// The statement reading them (`$1` the job id).
pub(in crate::store) const SELECT: &str =
    "SELECT follows_job, follows_ended, follows_closed FROM jobs WHERE id = $1";

/// The columns as read (`SELECT`'s).
pub(in crate::store) type Row = (Option<String>, Option<String>, Option<String>);

/// The columns as read: a job that follows none has no `follows_job`.
pub(in crate::store) fn from_row(row: Option<Row>) -> Option<Follows> {
    match row {
        Some((Some(job), ended, closed)) => Some(Follows { job, ended, closed }),
        Some((None, ..)) | None => None,
    }
}

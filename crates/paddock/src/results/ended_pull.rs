//! A rerun of an attempt whose pull request has ended is refused before
//! it spends anything. The same spec run again is the same attempt, on
//! the same branch `paddock/<ticket>/<attempt>`; when an earlier job of
//! this store was on that branch and the branch's pull request has since
//! been merged or closed on the forge, the run could push nothing (an
//! ended pull request is left as it is, `conclude.rs`) and would only put
//! a closeout on it. So the runner asks the forge first, once the job's
//! artifacts directory exists and before its workspace, its engine or any
//! model call, and ends the job (bad input, exit 2) naming the pull
//! request and the next attempt (`paddock run SPEC --attempt-after JOB`).
//!
//! The forge is asked only when the store holds an earlier job on the
//! branch that proposed a change: ended `done` with one, or failed only at
//! publishing it (a first run, or a rerun of one that made none or
//! proposed none, failing, held, timed out or cancelled on its own, asks
//! nothing more than before); a branch pushed by
//! a Paddock with another store is found at publishing, as before. A
//! forge that cannot be asked is a warning: the job runs, and its publish
//! meets the forge as any publish does.

use std::path::Path;

use paddock_protocol::JobSpec;

use super::conclude::{open_forge, proposes};
use super::forge::Forge as _;
use crate::store::{JobQuery, Store};

/// How many earlier jobs on the branch are read (the newest names the
/// next attempt).
const EARLIER: u32 = 20;

/// Whether a job of the store on `branch` (the newest [`EARLIER`])
/// proposed its change ([`super::conclude::proposed`]): only then may the
/// branch have a pull request of this store's to read.
pub async fn branch_proposed(
    store: &dyn Store,
    branch: &str,
) -> Result<bool, crate::store::StoreError> {
    let jobs = earlier_on(store, branch).await?;
    Ok(jobs.iter().any(super::conclude::proposed))
}

/// The newest [`EARLIER`] jobs of the store on `branch`.
async fn earlier_on(
    store: &dyn Store,
    branch: &str,
) -> Result<Vec<paddock_protocol::JobRecord>, crate::store::StoreError> {
    store
        .list_jobs(&JobQuery {
            status: None,
            engine: None,
            isolation: None,
            after: None,
            limit: EARLIER,
            branch: Some(branch.to_string()),
        })
        .await
}

/// What the check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// Nothing stands in the way (no forge, no earlier job on the
    /// branch, or its pull request is open or gone).
    Go,
    /// The job is refused: the whole reason.
    Refused(String),
    /// The forge could not be asked: a warning, and the job runs.
    Unknown(String),
}

/// Whether the job `job_id` of `spec` may run (module text); a minted
/// token's record goes into `artifacts` while it lives.
pub async fn check(
    store: &dyn Store,
    spec: &JobSpec,
    job_id: &str,
    artifacts: &Path,
    jobs_root: &Path,
) -> Check {
    if !proposes(spec) {
        return Check::Go;
    }
    let branch = spec.branch();
    let earlier = match earlier_on(store, &branch).await {
        Ok(jobs) => jobs,
        Err(e) => {
            return Check::Unknown(format!(
                "whether an earlier job's pull request for {branch} has ended was not checked: \
                 {e}"
            ))
        }
    };
    // Only a job that made a change and ended `done` (or failed only at
    // publishing it) pushed a branch and proposed it: one that failed,
    // was held, timed out or was cancelled on its own proposed nothing,
    // and no token is minted to ask for what none opened. The newest job
    // with a change names the next attempt.
    let changed: Vec<_> = earlier
        .into_iter()
        .filter(|j| j.id != job_id && !j.changed_files.is_empty())
        .collect();
    let (Some(last), true) = (
        changed.first(),
        changed.iter().any(super::conclude::proposed),
    ) else {
        return Check::Go;
    };
    let unknown = |why: String| {
        Check::Unknown(format!(
            "the earlier job {} ran on {branch}; whether its pull request has ended was not \
             checked ({why}): should it have, this job's publish leaves it as it is",
            last.id
        ))
    };
    // The job's pull request is the one into its base (a pull request of
    // the branch into another is anyone's, and so is its end: taken for
    // the job's, a forge user could refuse every rerun). A base that
    // cannot be told is not checked, and a warning: the job's publish,
    // which needs it too, says why.
    // The earlier job's base, as it kept it (`pinned_base.rs`).
    let earlier_artifacts = artifacts.parent().unwrap_or(artifacts).join(&last.id);
    let base =
        match super::conclude::job_pull_request_base(spec, jobs_root, &earlier_artifacts).await {
            Ok(base) => base,
            Err(why) => return unknown(why),
        };
    let session = match open_forge(spec, artifacts).await {
        Ok(session) => session,
        Err(e) => return unknown(e.message),
    };
    let found = session.forge.find_pull_request(&branch, &base).await;
    let revoke = session.close().await;
    match found {
        Err(e) => unknown(match revoke {
            None => e.to_string(),
            Some(warning) => format!("{e}; {warning}"),
        }),
        Ok(Some(pr)) => match pr.ended.clone() {
            None => Check::Go,
            Some(how) => Check::Refused(format!(
                "the pull request {} for {branch} (attempt {} of ticket {}, the earlier job {}) \
                 was {how} on the forge: a run of the same attempt would push nothing and only \
                 put a closeout on it, so this one is refused before it starts. Run the ticket's \
                 next attempt, on a branch of its own: `paddock run SPEC --attempt-after {}`",
                pr.page(),
                spec.attempt(),
                spec.ticket.id,
                last.id,
                last.id
            )),
        },
        Ok(None) => Check::Go,
    }
}

//! A job from a server's queue whose host died runs again (docs/store.md,
//! "Several hosts, one database"): when a reaper reclaims a running job
//! that a `paddock serve` had claimed from the queue
//! (`RunningJob::queued`), it queues a new attempt of it with the queue
//! priority it had, in the reclaim's own transaction (so a reaper that
//! dies mid-way leaves the job running for the next reaper, never failed
//! without its next attempt, and of two reapers only the one whose
//! reclaim holds queues it), once by default (`[hosts] requeue_reclaimed`,
//! `Liveness::requeues`; 0 never). The new attempt is the stored spec with
//! one more prior attempt, outcome `reclaimed` and the reclaim's reason as
//! what failed, so its brief says why it runs again as a bounce's does
//! (docs/context.md), and its attempt number and branch are the next. The
//! bound counts the spec's prior attempts whose outcome is `reclaimed`: a
//! job whose host dies every time it runs (a poison job that takes its
//! host down) stops being queued after that many. A job its own process
//! recorded (`paddock run`, a turn) is never queued again: its user is
//! there to run it again; nor is a job a cancel was asked of.

use std::path::Path;

use paddock_protocol::{JobRecord, JobSpec, JobStatus, PriorAttempt};
use time::OffsetDateTime;

use crate::store::{Follows, Store, StoreError};

/// The outcome of a prior attempt that was reclaimed from a dead host.
pub const RECLAIMED: &str = "reclaimed";

#[derive(Debug, thiserror::Error)]
pub enum RequeueError {
    #[error("read the stored spec of job {job_id} (or the prior job it follows): {source}")]
    ReadSpec { job_id: String, source: StoreError },
    #[error("job {job_id} has no stored spec: it cannot be queued again")]
    NoSpec { job_id: String },
    #[error(
        "the stored spec of job {job_id} does not load, so it cannot be queued again: {message}"
    )]
    LoadSpec { job_id: String, message: String },
    #[error("write the spec of job {job_id}'s next attempt: {message}")]
    WriteSpec { job_id: String, message: String },
}

/// What became of a reclaimed job from the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requeued {
    /// Its next attempt is queued as this job.
    Queued { id: String, attempt: u32 },
    /// Not queued: its spec already records this many reclaimed attempts,
    /// the bound.
    Spent(u32),
}

impl Requeued {
    /// What the reclaimed job's reason adds: where its next attempt is, or
    /// why there is none.
    pub fn note(&self, bound: u32) -> String {
        match self {
            Requeued::Queued { id, attempt } => {
                format!("; queued again as job {id} (attempt {attempt})")
            }
            Requeued::Spent(n) => format!(
                "; not queued again: {n} earlier attempt(s) of it were reclaimed already \
                 ([hosts] requeue_reclaimed = {bound})"
            ),
        }
    }
}

/// The next attempt of a reclaimed job, made but not stored: the reaper
/// queues it in the reclaim's own transaction (`Store::reclaim_job`), so
/// a reaper that dies in between leaves neither.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Its record (`queued`, a new id), spec (JSON) and the prior job it
    /// follows: the one the reclaimed job was queued to follow (its
    /// engine session and branch, `store::Follows`), not the reclaimed job,
    /// which ended mid-way.
    Attempt {
        record: Box<JobRecord>,
        spec_json: String,
        follows: Option<Follows>,
    },
    /// None: its spec already records this many reclaimed attempts, the
    /// bound.
    Spent(u32),
}

impl Next {
    /// What becomes of the reclaimed job once this is stored.
    pub fn requeued(&self) -> Requeued {
        match self {
            Next::Attempt { record, .. } => Requeued::Queued {
                id: record.id.clone(),
                attempt: record.attempt,
            },
            Next::Spent(n) => Requeued::Spent(*n),
        }
    }
}

/// The next attempt of `reclaimed` (reclaimed just now for `reason`)
/// unless its spec records `bound` reclaimed attempts already (module
/// text), for the caller to queue.
pub async fn next_attempt(
    store: &dyn Store,
    reclaimed: &JobRecord,
    reason: &str,
    bound: u32,
) -> Result<Next, RequeueError> {
    let job_id = reclaimed.id.clone();
    let text = store
        .job_spec(&job_id)
        .await
        .map_err(|source| RequeueError::ReadSpec {
            job_id: job_id.clone(),
            source,
        })?
        .ok_or_else(|| RequeueError::NoSpec {
            job_id: job_id.clone(),
        })?;
    let mut spec = JobSpec::from_stored(&text, Path::new("the store")).map_err(|e| {
        RequeueError::LoadSpec {
            job_id: job_id.clone(),
            message: e.to_string(),
        }
    })?;
    let follows = store
        .job_follows(&job_id)
        .await
        .map_err(|source| RequeueError::ReadSpec {
            job_id: job_id.clone(),
            source,
        })?;
    let before = spec
        .ticket
        .prior_attempts
        .iter()
        .filter(|a| a.outcome == RECLAIMED)
        .count();
    let before = u32::try_from(before).unwrap_or(u32::MAX);
    if before >= bound {
        return Ok(Next::Spent(before));
    }
    spec.ticket.prior_attempts.push(PriorAttempt {
        attempt: reclaimed.attempt,
        outcome: RECLAIMED.to_owned(),
        summary: String::new(),
        branch: None,
        tried: Vec::new(),
        failed: vec![reason.to_owned()],
        bounce_comment: None,
    });
    let spec_json = serde_json::to_string(&spec).map_err(|e| RequeueError::WriteSpec {
        job_id: job_id.clone(),
        message: e.to_string(),
    })?;
    // What the queue lists until a server claims it and admits its spec
    // again (which shapes the rest).
    let mut record = JobRecord::new(&crate::job_ref::new_id(), &spec, OffsetDateTime::now_utc());
    record.status = JobStatus::Queued;
    Ok(Next::Attempt {
        record: Box::new(record),
        spec_json,
        follows,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::store::{fixtures, Owner, SqliteStore};
    use paddock_protocol::TokenUsage;

    const SPEC: &str = r#"
[ticket]
id = "T-1"
title = "t"
project = "p"
[repository]
path = "."
[engine]
kind = "codex"
model = "gpt-5.5"
[upstream]
provider = "scripted"
scenario = "s.toml"
"#;

    /// A job of ticket T-1, attempt 1, stored with its spec, as reclaimed.
    async fn reclaimed(store: &SqliteStore) -> JobRecord {
        let spec = JobSpec::from_toml(SPEC, Path::new("/specs/job.toml")).unwrap();
        let mut record = fixtures::job("job-1", 0);
        record.ticket_id = "T-1".into();
        record.project = "p".into();
        record.status = JobStatus::Failed;
        record.reason = Some("the host died".into());
        store
            .insert_job(&record, &serde_json::to_string(&spec).unwrap())
            .await
            .unwrap();
        record
    }

    /// Its next attempt, as a reaper queues it (its own statement here; the
    /// reclaim's transaction in the reaper) with `priority`.
    async fn requeue(
        store: &SqliteStore,
        reclaimed: &JobRecord,
        priority: i64,
        reason: &str,
        bound: u32,
    ) -> Result<Requeued, RequeueError> {
        let next = next_attempt(store, reclaimed, reason, bound).await?;
        if let Next::Attempt {
            record,
            spec_json,
            follows,
        } = &next
        {
            store
                .enqueue_job(record, spec_json, priority, follows.as_ref())
                .await
                .unwrap();
        }
        Ok(next.requeued())
    }

    /// A reclaimed job stored before a repeated destination was refused
    /// (009c378: `network.allow` naming `example.com` twice) is queued
    /// again as any job, its next attempt's stored spec holding the
    /// destination once (`JobSpec::from_stored`). Before, the reclaim
    /// failed reading its spec and queued nothing.
    #[tokio::test]
    async fn a_job_stored_with_a_repeated_destination_is_queued_again() {
        let store = SqliteStore::open_in_memory().await.unwrap();
        let spec = JobSpec::from_toml(SPEC, Path::new("/specs/job.toml")).unwrap();
        let mut stored = serde_json::to_value(&spec).unwrap();
        stored["network"] = serde_json::json!({"allow": ["example.com", "Example.COM:443"]});
        let mut first = fixtures::job("job-1", 0);
        first.ticket_id = "T-1".into();
        first.project = "p".into();
        first.status = JobStatus::Failed;
        store.insert_job(&first, &stored.to_string()).await.unwrap();
        let requeued = requeue(&store, &first, 0, "the host died", 1).await;
        let Ok(Requeued::Queued { id, attempt }) = requeued else {
            panic!("{requeued:?}");
        };
        let next = JobSpec::from_json(
            &store.job_spec(&id).await.unwrap().unwrap(),
            Path::new("the store"),
        )
        .unwrap();
        assert_eq!(
            (attempt, next.network.allow),
            (2, vec!["example.com".to_string()])
        );
    }

    /// Queued again as attempt 2 with the reclaim as its prior attempt and
    /// the priority it had; its own reclaim then finds the bound spent.
    #[tokio::test]
    async fn a_reclaimed_job_is_queued_again_once_with_the_reason_in_its_brief() {
        let store = SqliteStore::open_in_memory().await.unwrap();
        let first = reclaimed(&store).await;
        let requeued = requeue(&store, &first, 5, "the host died", 1)
            .await
            .unwrap();
        let Requeued::Queued { id, attempt } = requeued.clone() else {
            panic!("{requeued:?}");
        };
        let next = store.job(&id).await.unwrap().unwrap();
        let spec = JobSpec::from_json(
            &store.job_spec(&id).await.unwrap().unwrap(),
            Path::new("the store"),
        )
        .unwrap();
        assert_eq!(
            next,
            JobRecord {
                id: id.clone(),
                ticket_id: "T-1".into(),
                project: "p".into(),
                attempt: 2,
                engine: "codex".into(),
                model: "gpt-5.5".into(),
                isolation: spec.isolation.as_str().into(),
                status: JobStatus::Queued,
                reason: None,
                branch: "paddock/T-1/2".into(),
                base_ref: spec.repository.base_ref.clone(),
                patch_path: None,
                changed_files: Vec::new(),
                tokens: TokenUsage::default(),
                model_calls: 0,
                cost_micros: 0,
                engine_exit_code: None,
                created_at: next.created_at,
                finished_at: None,
                duration_ms: None,
                disposed_at: None,
            }
        );
        assert_eq!(attempt, 2);
        assert_eq!(
            spec.ticket.prior_attempts,
            vec![PriorAttempt {
                attempt: 1,
                outcome: RECLAIMED.into(),
                summary: String::new(),
                branch: None,
                tried: Vec::new(),
                failed: vec!["the host died".into()],
                bounce_comment: None,
            }]
        );
        assert_eq!(
            requeued.note(1),
            format!("; queued again as job {id} (attempt 2)")
        );
        // Claimed, it carries its priority; reclaimed again, the bound of
        // one is spent and nothing more is queued.
        let owner = Owner {
            host: "a".repeat(32),
            name: "a".into(),
        };
        let at = OffsetDateTime::now_utc();
        let claimed = store
            .claim_job(&[], &owner, at, &[])
            .await
            .unwrap()
            .unwrap();
        let running = store.running_jobs().await.unwrap();
        assert_eq!(
            (claimed.id, running.len(), running[0].queued),
            (id, 1, Some(5))
        );
        let again = requeue(&store, &next, 5, "died again", 1).await.unwrap();
        assert_eq!(again, Requeued::Spent(1));
        assert_eq!(
            again.note(1),
            "; not queued again: 1 earlier attempt(s) of it were reclaimed already \
             ([hosts] requeue_reclaimed = 1)"
        );
        assert_eq!(store.queue_depth().await.unwrap(), 0);
    }

    /// A bound of 0 never queues; a job without a stored spec is an error
    /// naming it.
    #[tokio::test]
    async fn a_bound_of_zero_never_queues_and_no_spec_is_said() {
        let store = SqliteStore::open_in_memory().await.unwrap();
        let first = reclaimed(&store).await;
        assert_eq!(
            requeue(&store, &first, 0, "x", 0).await.unwrap(),
            Requeued::Spent(0)
        );
        let mut unknown = first.clone();
        unknown.id = "job-none".into();
        let err = requeue(&store, &unknown, 0, "x", 1).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "job job-none has no stored spec: it cannot be queued again"
        );
        assert_eq!(store.queue_depth().await.unwrap(), 0);
    }
}

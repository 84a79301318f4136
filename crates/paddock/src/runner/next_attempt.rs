//! The next attempt after a prior job of the same ticket (`paddock run
//! --attempt-after JOB`, `POST /v1/jobs?attempt_after=JOB`): the prior
//! attempts are filled from the store and the forge (`results::bounce`:
//! outcomes, closeouts, review comments, whether its pull request was
//! merged or closed), the spec is admitted with them as its
//! `ticket.prior_attempts`, and the admitted job follows the prior one
//! (`Admitted::follow`: its engine session resumed on its branch, or a new
//! session and why). The CLI and the server both go through
//! [`Runner::admit_after`]. A queued job keeps the prior it follows in the
//! store (`store::Follows`, written with the queued row), and whichever
//! server claims it follows it again from there
//! ([`Runner::follow_stored`]), after a restart too.

use paddock_protocol::JobSpec;

use super::{AdmitError, Admitted, ErrorCode, Runner};
use crate::results::bounce::{self, BounceError};
use crate::session::Prior;
use crate::store::{Follows, StoreError};

/// Why a next attempt cannot be admitted.
#[derive(Debug, thiserror::Error)]
pub enum AfterError {
    /// The prior job cannot be followed (none, another ticket's, not
    /// ended, its review unreadable...).
    #[error(transparent)]
    Prior(#[from] BounceError),
    /// Reading the prior job's record and session failed.
    #[error("the next attempt after job {job_id}: read its record and engine session: {source}")]
    ReadPrior { job_id: String, source: StoreError },
    /// The prior job left the store meanwhile (disposed of).
    #[error("the next attempt after job {job_id}: that job is no longer in the store (disposed of since the attempt was submitted?)")]
    Gone { job_id: String },
    /// The next attempt's pull request would ask to merge into `HEAD`
    /// (the spec's default `base_ref`), and which branch that is cannot
    /// be told: the prior job kept none and the source's `HEAD` names no
    /// branch now.
    #[error("the next attempt after job {job_id}: {reason}")]
    Base { job_id: String, reason: String },
    /// The spec itself cannot run.
    #[error(transparent)]
    Admit(#[from] AdmitError),
}

impl AfterError {
    /// The stable code the API and the CLI's exit code give it.
    pub fn code(&self) -> ErrorCode {
        match self {
            AfterError::Prior(e) => e.code(),
            AfterError::ReadPrior { .. } => ErrorCode::StoreLost,
            AfterError::Gone { .. } | AfterError::Base { .. } => ErrorCode::BadInput,
            AfterError::Admit(e) => e.code(),
        }
    }
}

impl Runner {
    /// Admits `spec` as the next attempt after job `prior` (its exact id):
    /// the prior attempts read from the store and the forge become its
    /// `ticket.prior_attempts` (what the prompt shows), and it resumes or
    /// forks the prior job's engine session on its branch (a prior pull
    /// request closed without a merge is in its continuation: the attempt
    /// builds on that branch, on a pull request of its own).
    pub async fn admit_after(&self, spec: &JobSpec, prior: &str) -> Result<Admitted, AfterError> {
        let (spec, follows) = self.prior_attempts(spec, prior).await?;
        let mut admitted = self.admit(&spec).await?;
        self.follow_stored(&mut admitted, &follows).await?;
        Ok(admitted)
    }

    /// `spec` as the next attempt after job `prior` (its exact id): its
    /// `ticket.prior_attempts` filled from the store and the forge, and
    /// the prior it follows as a queue stores it. [`Runner::admit_after`]
    /// admits it; a server's submission this host cannot run stores it so
    /// for the server that claims it ([`Runner::follow_stored`] there).
    pub async fn prior_attempts(
        &self,
        spec: &JobSpec,
        prior: &str,
    ) -> Result<(JobSpec, Follows), AfterError> {
        let paths = &self.config.paths;
        let after =
            bounce::attempts_after(&*self.store, prior, spec, &paths.artifacts, &paths.jobs)
                .await?;
        let mut spec = spec.clone();
        spec.ticket.prior_attempts = after.attempts;
        let follows = Follows {
            job: prior.to_string(),
            ended: after.ended,
            closed: after.closed,
        };
        Ok((spec, follows))
    }

    /// Makes `admitted` follow the prior job `follows` names, as recorded
    /// with a queued job: the prior job's record and session read again now
    /// (a server claiming the job may not be the one that admitted it).
    pub async fn follow_stored(
        &self,
        admitted: &mut Admitted,
        follows: &Follows,
    ) -> Result<(), AfterError> {
        let prior = Prior::load(&*self.store, &follows.job, &self.config.paths.artifacts)
            .await
            .map_err(|source| AfterError::ReadPrior {
                job_id: follows.job.clone(),
                source,
            })?
            .ok_or_else(|| AfterError::Gone {
                job_id: follows.job.clone(),
            })?;
        let base = self.prior_base(admitted.spec(), &follows.job).await?;
        admitted.follow(
            Prior {
                ended: follows.ended.clone(),
                closed: follows.closed.clone(),
                ..prior
            },
            base,
        );
        Ok(())
    }

    /// The branch the next attempt's pull request asks to merge into,
    /// when its spec leaves that to `HEAD` (the default `base_ref`, no
    /// `results.base_branch`) and it has a forge: the prior job's base,
    /// kept when it was provisioned (`results/pinned_base.rs`; the
    /// attempt's work is on the prior's branch, whose review is about
    /// that base, whichever branch the source is on now), else, for a
    /// prior from before that record, the branch the source's `HEAD`
    /// names now. `None` when the spec names its base itself. The
    /// attempt starts on the prior's branch, so `HEAD` left unread would
    /// become the literal base `HEAD`, which no forge takes.
    async fn prior_base(&self, spec: &JobSpec, prior: &str) -> Result<Option<String>, AfterError> {
        use crate::results::conclude;
        if !conclude::proposes(spec)
            || spec.results.base_branch.is_some()
            || conclude::base_branch(spec) != "HEAD"
        {
            return Ok(None);
        }
        let paths = &self.config.paths;
        conclude::job_pull_request_base(spec, &paths.jobs, &paths.artifacts.join(prior))
            .await
            .map(Some)
            .map_err(|reason| AfterError::Base {
                job_id: prior.to_string(),
                reason,
            })
    }
}

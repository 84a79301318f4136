//! An `auto` job whose sandbox could not be set up at its first launch.
//! `paddock run` takes the sandbox probe's answer from the host's kept
//! success (`rung/probe_cache.rs`), which can be wrong: a change its key
//! does not see. The job was admitted on the `sandbox` rung and the
//! helper ended in its set-up (its "the command runs" pipe closed
//! unwritten: nothing of the job ran, `RungError::SandboxSetup`). The rung
//! is asked afresh, past what it kept; when a sandbox does not start on
//! this host at all, the job moves to the `process` rung, as its admission
//! would have put it with a fresh probe: its host profile admitted again
//! for that rung (a refusal fails the job, saying why it was moved), its
//! record's rung, a `policy` event (`isolation`) saying why, the sandbox's
//! placeholders removed from the work tree and the context's
//! `.paddock/environment.json` written for the new rung, a next attempt's
//! engine session resumed or forked as the new rung decides (a session is
//! resumed only on the rung it was made on: `Continuation::decide`); then
//! the engine's part starts again (`mod.rs`'s `phases`). When a sandbox starts, the
//! failure was this job's own (a cap its host profile asks for that the
//! host cannot apply, say): it fails, never moved to an unconfined rung.

use paddock_protocol::{EventBody, Isolation, JobStatus};

use super::emit::Emitter;
use super::provision::Provisioned;
use super::{Job, LaunchFailure};
use crate::policy::{JobPolicy, JobPolicyError};
use crate::session::Continuation;

/// Whether the job moved.
pub(super) enum Moved {
    /// To the `process` rung: start the engine's part again.
    Yes,
    /// No: the job fails with this reason.
    No(String),
}

/// Moves `job`, whose first launch failed in the rung's set-up (`why`),
/// to its fallback rung when it has one and a fresh probe says no sandbox
/// starts on this host.
pub(super) async fn fall_back(
    job: &mut Job,
    em: &mut Emitter,
    prov: &Provisioned,
    why: String,
) -> Result<Moved, LaunchFailure> {
    let Some(process) = job.fallback_rung.clone() else {
        return Ok(Moved::No(why));
    };
    let Some(cannot) = job.rung.probe_afresh().await else {
        return Ok(Moved::No(why));
    };
    job.fallback_rung = None;
    // The probe's answer is usually the launch's own error again (the
    // helper's words, prefixed): said once.
    let probe = cannot.strip_prefix("paddock sandbox: ").unwrap_or(&cannot);
    let cannot = if why.ends_with(probe) {
        "a fresh probe fails the same way"
    } else {
        &cannot
    };
    let message = format!(
        "isolation auto: {why}, although this host's kept sandbox probe said one starts; running \
         on the `process` rung (unconfined) because this host cannot start Paddock's sandbox: \
         {cannot}"
    );
    let mut spec = job.spec.clone();
    spec.isolation = Isolation::Process;
    let policy = match (&spec.policy.profile, &job.policy) {
        (Some(name), Some(_)) => {
            match JobPolicy::admit(name, &spec, &*em.store, |p| process.gaps(p)).await {
                Ok(p) => Some(p),
                Err(JobPolicyError::Refused(r)) => {
                    let refused = super::admit::refused(r, Some(&message), &[]);
                    let refused = match &job.spec_file {
                        Some(file) => refused.in_spec_file(file),
                        None => refused,
                    };
                    return Ok(Moved::No(refused.to_string()));
                }
                Err(e) => return Ok(Moved::No(e.to_string())),
            }
        }
        _ => None,
    };
    if let Some(p) = &policy {
        super::admit::capped_by(&mut spec, p);
    }
    em.emit(EventBody::Policy {
        rule: "isolation".into(),
        message,
    })
    .await?;
    job.spec = spec;
    job.policy = policy;
    job.rung = process;
    // A next attempt resumes its prior attempt's engine session only on
    // the rung that session was made on: asked again for the new rung
    // (the engine's part starts over, restoring or forking by this).
    if let Some(continuation) = &job.continuation {
        let can_resume = crate::engines::adapter(job.spec.engine.kind)
            .capabilities()
            .resume;
        job.continuation = Some(Continuation::decide(
            continuation.prior().clone(),
            (
                job.spec.engine.kind.as_str(),
                job.spec.engine.model.as_str(),
                Isolation::Process.as_str(),
            ),
            can_resume,
        ));
    }
    job.record.isolation = Isolation::Process.as_str().to_string();
    em.store.finish_job(&job.record, JobStatus::Running).await?;
    prov.early_patch.release_placeholders();
    let context = job.policy.as_ref().map(|p| p.context()).unwrap_or_default();
    crate::context::rewrite_environment(&job.spec, &context, prov.ws())
        .await
        .map_err(|e| LaunchFailure::Step(e.to_string()))?;
    Ok(Moved::Yes)
}

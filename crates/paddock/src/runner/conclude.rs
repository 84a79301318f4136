//! Conclude: what the job came to (its engine's result, a timeout, a
//! cancellation, the budget, a refused model, a crash with its stderr's
//! tail), the refusals read from what the engine left, the totals from the
//! ledger, the patch artifact whatever happened, the result branch, pull
//! request and closeout (`results::conclude_job`), the workspace removed or
//! kept, and the final status event and record (a compare-and-set from
//! `running`).

use std::os::unix::process::ExitStatusExt as _;
use std::time::Instant;

use paddock_protocol::{EventBody, JobRecord, JobSpec, JobStatus, ModelCall, Phase};
use time::OffsetDateTime;

use super::emit::Emitter;
use super::provision::Provisioned;
use super::stream::Streamed;
use super::teardown::TornDown;
use super::{Job, LaunchFailure, RunResult};
use crate::engines::Outcome;
use crate::error_chain::chain;
use crate::output;
use crate::output::REASON_MAX;
use crate::results::{KeptOrNot, SourceFetching};
use crate::store::StoreError;
use crate::workspace::Patch;

/// How the engine's part of the job ended.
pub(super) struct Launched {
    pub status: JobStatus,
    pub reason: Option<String>,
    pub exit_code: Option<i32>,
    pub calls: Vec<ModelCall>,
    /// The engine's session files being copied into the artifacts.
    pub session_save: Option<super::resume::SessionSave>,
    /// Stopped for a denied command its engine ran (`policy::backstop`):
    /// no patch, branch or closeout leaves the job.
    pub withheld: bool,
}

/// The job's status and reason from how its engine ended.
pub(super) async fn outcome(
    job: &Job,
    em: &mut Emitter,
    prov: &Provisioned,
    streamed: Streamed,
    mut torn: TornDown,
) -> Result<Launched, StoreError> {
    let adapter = prov.adapter.as_ref();
    // What the engine refused, read from what it left: its own refusals
    // are events with or without a profile; the profile's go through it.
    // Read on a blocking thread (up to 128 MiB of files the job wrote),
    // beside the session's keeping: the job is gone, neither writes what
    // the other reads.
    let home = prov.ws().home.clone();
    let kind = adapter.kind();
    let denials_read =
        tokio::task::spawn_blocking(move || crate::engines::adapter(kind).denials_after(&home));
    // The session it ran, for a next attempt to resume (its files copied
    // beside the patch).
    let session_save =
        super::resume::keep(em, prov, adapter, torn.parser.summary().session).await?;
    let found = match denials_read.await {
        Ok(found) => found,
        Err(e) => {
            em.error(
                "paddock",
                format!("reading the engine's refused calls failed: {e}"),
                false,
            )
            .await?;
            crate::engines::FoundAfter::default()
        }
    };
    // Each read from files the job could write: the engine's report, and
    // its event says so (`denial::ReportedIn`).
    use crate::engines::denial::ReportedIn;
    for event in found
        .denials
        .iter()
        .filter_map(|d| d.refusal_event(adapter.kind(), ReportedIn::Files))
    {
        em.emit_job(event).await?;
    }
    if found.more > 0 {
        em.error(
            "paddock",
            format!(
                "the engine's files record {} more refused calls than the {} read one by one: \
                 they are not events of the job",
                found.more,
                crate::engines::denial::MAX_FOUND_AFTER
            ),
            false,
        )
        .await?;
    }
    if let (Some(p), Some(tail)) = (&job.policy, torn.denials.as_mut()) {
        let (hooks, in_files) = p.new_denials(tail, found.denials);
        for denial in &hooks {
            em.emit_job(p.denial_event(denial, ReportedIn::Record))
                .await?;
        }
        for denial in &in_files {
            em.emit_job(p.denial_event(denial, ReportedIn::Files))
                .await?;
        }
    }
    let exit_code = torn.exit.code();
    let (status, reason) = match streamed.ended {
        Some(JobStatus::TimedOut) => (JobStatus::TimedOut, streamed.timeout_reason.clone()),
        Some(JobStatus::Failed) => (JobStatus::Failed, streamed.failed_reason.clone()),
        Some(other) => (other, Some("cancelled".to_string())),
        None if torn.held => (
            JobStatus::Held,
            Some(
                streamed
                    .held_reason
                    .unwrap_or_else(|| "the job's budget is spent".to_string()),
            ),
        ),
        None => {
            let summary = torn.parser.summary();
            match adapter.finish(exit_code, &summary) {
                // Whatever the engine made of it, an answer from a model
                // outside the allowlist reached the broker: not done.
                Outcome::Completed if torn.served_refused.is_some() => {
                    (JobStatus::Failed, torn.served_refused)
                }
                Outcome::Completed => (JobStatus::Done, None),
                // The engine said why: its own error event is stored.
                Outcome::Failed { reason } if summary.failure.is_some() => (
                    JobStatus::Failed,
                    Some(with_upstream_cause(reason, &torn.calls)),
                ),
                // A crash, or an exit without a result: an error event
                // says how it ended and what it last wrote on stderr.
                Outcome::Failed { reason } => {
                    let reason = crash_reason(reason, &torn);
                    em.error(adapter.kind().as_str(), reason.clone(), true)
                        .await?;
                    (JobStatus::Failed, Some(reason))
                }
            }
        }
    };
    Ok(Launched {
        status,
        reason,
        exit_code,
        calls: torn.calls,
        session_save,
        withheld: streamed.withheld,
    })
}

/// The engine's own reason for failing, with the upstream's answer to
/// the job's last model call when that call failed and the engine's text
/// does not carry it: Codex words any 5xx as "We’re currently
/// experiencing high demand, which may cause temporary errors.", whatever
/// the provider (or the scripted upstream: "scenario … is exhausted")
/// said. The broker's own cuts (budget, allowlist) are policy events, not
/// this.
fn with_upstream_cause(reason: String, calls: &[ModelCall]) -> String {
    use paddock_protocol::CallStatus;
    let Some(last) = calls.iter().max_by_key(|c| c.seq) else {
        return reason;
    };
    let failed = matches!(last.status, CallStatus::HttpError | CallStatus::StreamError);
    let msg = last.error.as_deref().unwrap_or_default().trim();
    if !failed || msg.is_empty() || msg.starts_with("paddock broker:") || reason.contains(msg) {
        return reason;
    }
    let status = last
        .http_status
        .map(|s| format!(" (HTTP {s})"))
        .unwrap_or_default();
    format!(
        "{reason} (the upstream's answer to model call {} to {}{status}: {msg})",
        last.seq, last.provider
    )
}

/// How a crashed engine ended, and the end of its stderr.
fn crash_reason(reason: String, torn: &TornDown) -> String {
    let reason = match torn.exit.signal() {
        Some(sig) => format!("the engine was killed by signal {}", signal_name(sig)),
        None => reason,
    };
    if torn.stderr_tail.is_empty() {
        reason
    } else {
        format!("{reason}: {}", torn.stderr_tail)
    }
}

/// Concludes a job whose workspace exists: its totals, the patch, the
/// workspace removed or kept, the final record. `cancel` (a cancel not
/// already spent on the engine) cuts its publishing short: the push and
/// the forge's requests are dropped, and a `done` job fails at publishing
/// for `paddock publish` to finish.
pub(super) async fn conclude(
    job: Job,
    em: &mut Emitter,
    mut prov: Provisioned,
    launched: Result<Launched, LaunchFailure>,
    cancel: &mut (impl std::future::Future<Output = ()> + Unpin),
) -> Result<RunResult, StoreError> {
    let Job {
        spec,
        mut record,
        started,
        keep,
        policy,
        ..
    } = job;
    let ws = prov.ws();
    if keep {
        // A reaper leaves a kept directory alone (should this process
        // die before the record is final); then the lease goes.
        if let Err(e) = ws.lease.keep() {
            em.error(
                "paddock",
                format!(
                    "workspace {}: cannot mark its lease kept: {e}",
                    ws.root.display()
                ),
                false,
            )
            .await?;
        }
    }
    // One status for the phase, naming a kept workspace.
    em.emit(EventBody::Status {
        phase: Phase::Concluding,
        detail: keep.then(|| format!("workspace kept at {}", ws.root.display())),
    })
    .await?;
    let mut session_save = None;
    // The local source the job's branch was fetched into, if it was.
    let mut in_source = None;
    let withheld = matches!(&launched, Ok(l) if l.withheld);
    let mut status_reason = match launched {
        Ok(Launched {
            status,
            reason,
            exit_code,
            calls,
            session_save: save,
            ..
        }) => {
            session_save = save;
            record.engine_exit_code = exit_code;
            for c in &calls {
                record.tokens.add(&c.tokens);
                record.cost_micros += c.cost_micros;
            }
            record.model_calls = calls.len() as u64;
            (status, reason)
        }
        // The store failed under the job (a full disk): the job ends
        // here, concludes and tears down as far as the store allows.
        Err(LaunchFailure::Store(e)) => {
            let e = chain(&e);
            em.lost.get_or_insert_with(|| e.clone());
            (
                JobStatus::Failed,
                Some(format!("the store failed under the job: {e}")),
            )
        }
        Err(LaunchFailure::Step(msg) | LaunchFailure::Unstarted(msg)) => {
            em.error("paddock", msg.clone(), true).await?;
            (JobStatus::Failed, Some(msg))
        }
    };
    // A denied command ran (`policy::backstop`): the job failed, and
    // nothing it made is kept as its result or published (no patch, no
    // branch, no closeout).
    let saved_patch = if withheld {
        Err(status_reason.clone())
    } else {
        save_patch(em, &mut record, &prov, (&spec, status_reason.0)).await?
    };
    // The session's files, copied while the patch was made.
    if let Some(save) = session_save {
        save.finish(em).await?;
    }
    match saved_patch {
        // A job already ended otherwise (stopped at a limit, its engine
        // failed, cancelled) keeps that as its reason: the first cause,
        // the patch's failure an event of its own. A job that was to end
        // `done` fails with it.
        Err(failed) if status_reason.0 == JobStatus::Done => status_reason = failed,
        Err(_) => {}
        Ok((patch, kept, into_source)) => {
            // The branch, the forge and the closeout (results/).
            let mut ending = record.clone();
            (ending.status, ending.reason) = status_reason.clone();
            // What leaves the job (the closeout, the forge) is redacted
            // as its events are: a reason may quote the provider's key.
            ending.reason = ending.reason.map(|r| em.redactor.text(&r).into_owned());
            ending.duration_ms = Some(started.elapsed().as_millis() as u64);
            // Should this process die while publishing, the reaper reads
            // this and leaves the job for `paddock publish` to finish.
            em.emit(EventBody::Status {
                phase: Phase::Publishing,
                detail: Some(ending.status.as_str().to_string()),
            })
            .await?;
            // Read beside the engine; one that failed is read again.
            let source_dirty = match prov.source_changes.take() {
                Some(read) => read.read().await,
                None => None,
            };
            let cancelled = tokio_util::sync::CancellationToken::new();
            // What stopped the publish when no one cancelled it.
            let stopped_by = crate::results::StopCause::new();
            // The workspace, once the branch is kept, removed beside the
            // publish (which reads only the branch's bundle).
            let ws = prov.ws().clone();
            let guard = &mut prov.guard;
            let mut removal = None;
            // The whole job's cap (the host profile's `timeout_min`) and
            // a grace past it: then the publish is stopped as a cancel
            // stops it, and the job fails naming the cap.
            let over = policy.as_ref().and_then(|p| {
                let min = p.profile.timeout_min?;
                let grace = super::clock::publish_grace(min);
                let at = prov.cap_ends? + grace;
                Some((
                    at,
                    super::clock::PublishingOver {
                        id: p.profile.id.clone(),
                        min,
                        grace_secs: grace.as_secs(),
                    },
                ))
            });
            let mut overran = None;
            let published = {
                let publishing = crate::results::conclude_job(
                    &ws,
                    &spec,
                    (&patch, kept),
                    &ending,
                    &*em.store,
                    &prov.artifacts,
                    (source_dirty, into_source, (&cancelled, &stopped_by), || {
                        removal = guard.remove_beside()
                    }),
                );
                tokio::pin!(publishing);
                let past_cap = async {
                    match &over {
                        Some((at, _)) => tokio::time::sleep_until(*at).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    published = &mut publishing => published,
                    () = &mut *cancel => {
                        cancelled.cancel();
                        publishing.await
                    }
                    () = past_cap => {
                        overran = over.as_ref().map(|(_, o)| o.clone());
                        if let Some(over) = &overran {
                            let _ = stopped_by.set(over.cause());
                        }
                        cancelled.cancel();
                        publishing.await
                    }
                }
            };
            // The closeout in the job's record too (`paddock show`, the API).
            if let Err(e) = em.store.set_closeout(&record.id, &published.closeout).await {
                em.error(
                    "paddock",
                    format!("the closeout was not stored: {e}"),
                    false,
                )
                .await?;
            }
            if published.in_source {
                in_source.clone_from(&spec.repository.path);
            }
            for warning in published.warnings {
                em.error("paddock", warning, false).await?;
            }
            if let Some(failure) = published.failure {
                em.error("paddock", failure.clone(), true).await?;
                let reason = match &overran {
                    Some(over) => {
                        em.emit(over.event()).await?;
                        over.reason(&failure)
                    }
                    None => failure,
                };
                status_reason = (JobStatus::Failed, Some(reason));
            }
            if let Some(removal) = removal {
                let removed = removal.await.unwrap_or_else(|e| {
                    Err(crate::workspace::WorkspaceError::Remove {
                        path: ws.root.clone(),
                        source: std::io::Error::other(e),
                    })
                });
                if let Err(e) = removed {
                    em.error("paddock", e.to_string(), false).await?;
                }
            }
        }
    }
    let kept = keep.then(|| prov.ws().root.clone());
    if keep {
        // A kept overlay made a plain directory off the runtime (a copy
        // of the tree); the guard below then finds nothing left to do.
        let ws = prov.ws().clone();
        let settled = tokio::task::spawn_blocking(move || ws.settle_kept())
            .await
            .unwrap_or_else(|e| {
                Err(crate::workspace::WorkspaceError::Keep {
                    path: prov.ws().root.clone(),
                    step: "copy work/",
                    source: std::io::Error::other(e),
                })
            });
        match settled {
            Ok(Some(s)) => {
                em.emit(EventBody::Status {
                    phase: Phase::Concluding,
                    detail: Some(s.note()),
                })
                .await?
            }
            Ok(None) => {}
            Err(e) => em.error("paddock", e.to_string(), false).await?,
        }
    }
    if let Err(e) = prov.guard.remove_unless_kept() {
        em.error("paddock", e.to_string(), false).await?;
    }
    let (status, reason) = status_reason;
    let mut result = finish(em, record, started, status, reason, false).await?;
    result.kept_workspace = kept;
    result.in_source = in_source;
    Ok(result)
}

/// Writes the job's patch artifact, its result branch made beside the
/// patch (`results::patch_and_branch`) and its fetch into a local source
/// started as soon as it is kept (unless the job, ending `status`, was
/// cancelled: `results::into_source_at_end`); the patch, the branch and that fetch,
/// or the job's failure when the patch cannot be made or saved.
async fn save_patch(
    em: &mut Emitter,
    record: &mut JobRecord,
    prov: &Provisioned,
    (spec, status): (&JobSpec, JobStatus),
) -> Result<
    Result<(Patch, KeptOrNot, Option<SourceFetching>), (JobStatus, Option<String>)>,
    StoreError,
> {
    // The patch made beside the engine's exit, if nothing changed since;
    // else made now.
    let made = match prov.early_patch.take(prov.ws()).await {
        Some(made) => made,
        None => crate::results::patch_and_branch(prov.ws(), spec, &prov.artifacts).await,
    };
    let (patch, kept) = match made {
        Ok(made) => made,
        // A diff past the job's disk limit (or the most Paddock holds
        // in memory), stopped while it was read: past a limit, as a
        // patch found too long once read is.
        Err(crate::workspace::WorkspaceError::GitOutputPastLimit { limit, .. }) => {
            let msg = format!(
                "the job's result is larger than limits.max_disk_bytes or the {} bytes \
                     Paddock reads of a patch, whichever is less ({limit} bytes): its diff was \
                     stopped past them; neither the patch nor the branch's bundle is kept",
                crate::workspace::MAX_PATCH_BYTES
            );
            em.emit(EventBody::Policy {
                rule: "limits".into(),
                message: msg.clone(),
            })
            .await?;
            return Ok(Err((JobStatus::Failed, Some(msg))));
        }
        Err(e) => {
            let msg = format!("cannot compute the patch: {e}");
            em.error("paddock", msg.clone(), true).await?;
            return Ok(Err((JobStatus::Failed, Some(msg))));
        }
    };
    for warning in &patch.warnings {
        em.error("paddock", warning.clone(), false).await?;
    }
    if let Some(msg) = result_past_limit(&patch, &kept, spec.limits.max_disk_bytes).await {
        em.emit(EventBody::Policy {
            rule: "limits".into(),
            message: msg.clone(),
        })
        .await?;
        return Ok(Err((JobStatus::Failed, Some(msg))));
    }
    let path = prov.artifacts.join("patch.diff");
    // Written as Paddock's own file (no link a `process`-rung job planted
    // in its artifacts followed, no FIFO waited on).
    let written = async {
        let file = crate::own_file::open_to_write(&path)?;
        let mut file = tokio::fs::File::from_std(file);
        tokio::io::AsyncWriteExt::write_all(&mut file, patch.diff.as_bytes()).await?;
        tokio::io::AsyncWriteExt::flush(&mut file).await
    };
    match written.await {
        Ok(()) => {
            // Once the patch is saved (a job whose patch is lost fails
            // here, publishing nothing), beside its event.
            let into_source = crate::results::fetch_into_source_soon(
                (&record.id, status),
                spec,
                &patch,
                &kept,
                prov.ws(),
            );
            record.patch_path = Some(path.display().to_string());
            record.changed_files = patch.changed_files.clone();
            em.emit(EventBody::ArtifactSummary {
                patch_path: path.display().to_string(),
                changed_files: patch.changed_files.clone(),
                patch_bytes: patch.diff.len() as u64,
                interrupted: false,
            })
            .await?;
            Ok(Ok((patch, kept, into_source)))
        }
        Err(e) => {
            let msg = format!("cannot save the patch to {}: {e}", path.display());
            em.error("paddock", msg.clone(), true).await?;
            Ok(Err((JobStatus::Failed, Some(msg))))
        }
    }
}

/// Why the job's result is not kept: its patch or its branch's bundle
/// larger than `limits.max_disk_bytes` (a job within its disk can still
/// make a larger patch: a deleted base file, a file of empty lines); the
/// bundle is then removed (the patch was never written). `None`: both fit.
async fn result_past_limit(patch: &Patch, kept: &KeptOrNot, limit: u64) -> Option<String> {
    let bundle = match kept {
        Ok(Some(k)) => Some(&k.bundle),
        _ => None,
    };
    let bundle_bytes = match bundle {
        Some(b) => tokio::fs::metadata(b).await.map(|m| m.len()).unwrap_or(0),
        None => 0,
    };
    let patch_bytes = patch.diff.len() as u64;
    if patch_bytes <= limit && bundle_bytes <= limit {
        return None;
    }
    let mut msg = format!(
        "the job's result is larger than limits.max_disk_bytes ({limit} bytes): its patch \
         {patch_bytes} bytes, its branch's bundle {bundle_bytes} bytes; neither is kept"
    );
    if let Some(b) = bundle {
        if let Err(e) = tokio::fs::remove_file(b).await {
            if e.kind() != std::io::ErrorKind::NotFound {
                msg.push_str(&format!(
                    " (but the bundle {} could not be removed: {e})",
                    b.display()
                ));
            }
        }
    }
    Some(msg)
}

/// Records the final status event and job row.
pub(super) async fn finish(
    em: &mut Emitter,
    mut record: JobRecord,
    started: Instant,
    status: JobStatus,
    reason: Option<String>,
    bad_input: bool,
) -> Result<RunResult, StoreError> {
    // A cancel asked through the store names who asked (its request).
    let reason = if status == JobStatus::Cancelled {
        match em.store.cancel_requested(&record.id).await {
            Ok(asked) => crate::cancel::with_asker(reason, asked.as_ref()),
            Err(e) => {
                tracing::warn!("job {}: cannot read who asked to cancel it: {e}", record.id);
                reason
            }
        }
    } else {
        reason
    };
    let reason = reason.map(|r| output::keep_end(&em.redactor.text(&r), REASON_MAX));
    record.status = status;
    record.reason = reason.clone();
    record.finished_at = Some(OffsetDateTime::now_utc());
    record.duration_ms = Some(started.elapsed().as_millis() as u64);
    let phase = match status {
        JobStatus::Queued | JobStatus::Running | JobStatus::Bounced | JobStatus::Failed => {
            Phase::Failed
        }
        JobStatus::Done => Phase::Done,
        JobStatus::Held => Phase::Held,
        JobStatus::TimedOut => Phase::TimedOut,
        JobStatus::Cancelled => Phase::Cancelled,
    };
    em.emit(EventBody::Status {
        phase,
        detail: reason,
    })
    .await?;
    em.store.finish_job(&record, JobStatus::Running).await?;
    crate::telemetry::job_finished(&record);
    Ok(RunResult {
        record,
        bad_input,
        kept_workspace: None,
        in_source: None,
    })
}

/// A signal's name (`SIGKILL`), or its number.
fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| sig.to_string())
}

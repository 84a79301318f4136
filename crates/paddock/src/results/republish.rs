//! `paddock publish JOB`: the results of a finished job published again
//! from what it kept (the spec and events in the store, `branch.bundle`
//! and the artifacts), without its workspace: after a forge outage or a
//! rejected push, once the cause is fixed. A job that failed only because
//! publishing failed becomes `done` when publishing succeeds; a failure
//! again records the new message as its reason, and is a non-fatal
//! `error` event of source [`PUBLISH_AGAIN`], each failed publish its
//! own (the same failure twice changes no record). A `done` job whose publish again fails
//! (the forge down, a cancel) stays `done`, its closeout as it was: the
//! failure is a non-fatal `error` event of source [`PUBLISH_AGAIN`], which
//! `paddock show` names until a later publish succeeds (its `publishing`
//! status event, [`PUBLISHED_AGAIN`]), and `paddock publish` exits
//! non-zero. The record changes by compare-and-set
//! from its stored status, so a concurrent change is not overwritten.
//! One publish of a job at a time: it holds the job's lease
//! (`workspace/lease.rs`, marked kept) while it publishes, so a publish
//! killed mid-way is cleaned up after by the next reaper pass (`paddock
//! gc`, the start of `paddock run` and `paddock serve`) as a dead job's
//! publish is. Holding it, a publish first finishes what a killed one left
//! (`kill -9` mid-push): the push's scratch directories, what still runs
//! in them killed, removed without following a link, and its GitLab
//! project access tokens revoked.
//!
//! A job with a change whose `branch.bundle` is gone (removed by hand) or
//! unreadable is refused the same way ([`RepublishError::BundleGone`],
//! naming the bundle and the patch that is kept): before, a job that had
//! failed at publishing was recorded `done` with nothing pushed.
//!
//! A job that ended before it was concluded (its workspace never
//! provisioned, its engine never started: no patch, branch or closeout
//! was made) has nothing to publish: refused naming the job and why it
//! ended ([`RepublishError::NothingToPublish`]), and nothing is written
//! (into the outbox, onto a forge) but the refusal's event.
//!
//! Cancellable (`paddock publish`'s Ctrl-C, SIGTERM, SIGHUP): a cancel
//! before publishing begins changes nothing ([`RepublishError::Cancelled`]);
//! one while it publishes cuts it short as a run's cancel does
//! (`conclude.rs`'s `PublishInput::cancel`: the push's git killed with its
//! process group, its scratch removed, a minted token revoked within 10 s
//! or its record and the lease file left for the reaper), and the job is
//! recorded as a failed publish of it would be.
//!
//! Nothing lost: each refusal of an ended job (disposed of, its spec
//! not loading, nothing to publish, its bundle gone, cancelled before it
//! began) is a non-fatal `error` event of the job of source
//! [`PUBLISH_AGAIN`], as a failed publish is (held to its
//! `max_event_bytes`; `paddock show` names it until a later publish
//! succeeds), written under the job's lease, which is taken before any of
//! them is decided. Three refusals write none, for a reason: a job not
//! found has no events; a job not ended (`NotEnded`) and a lease held by
//! another process (`Busy`: a publish, a reaper pass, the run's end) have
//! a writer of their events, which numbers each as it writes it, so an
//! event written beside it could take the number it is about to use and
//! fail its write (and a publish retried while another runs would add one
//! each time); the refusal is said to the caller, and the job is as it was.

use std::path::Path;

use paddock_protocol::{EventBody, JobRecord, JobSpec, JobStatus, Phase};

use super::conclude::{publish, PublishInput, Published, BUNDLE};
use tokio_util::sync::CancellationToken;

use crate::store::{Store, StoreError};
use crate::workspace::host_git::{HostGit, GIT_TIMEOUT};
use crate::workspace::lease::Lease;

#[derive(Debug, thiserror::Error)]
pub enum RepublishError {
    #[error("job {job_id}: not found")]
    NoJob { job_id: String },
    #[error("job {job_id}: it is still {status}; publish it when it has ended")]
    NotEnded { job_id: String, status: String },
    #[error("job {job_id}: its stored spec does not load: {message}")]
    Spec { job_id: String, message: String },
    #[error("job {job_id}: {source}")]
    Store { job_id: String, source: StoreError },
    #[error("job {job_id}: another process is publishing it (its lease in {jobs_dir} is held)")]
    Busy {
        job_id: String,
        jobs_dir: std::path::PathBuf,
    },
    #[error(
        "job {job_id}: publishing was cancelled before it began (Ctrl-C, SIGTERM or SIGHUP); \
         the job is unchanged"
    )]
    Cancelled { job_id: String },
    #[error(
        "job {job_id}: nothing to publish: it ended {status} before its work was concluded \
         ({reason}), and kept no patch, branch or closeout; run its spec again once that is fixed"
    )]
    NothingToPublish {
        job_id: String,
        status: String,
        reason: String,
    },
    #[error(
        "job {job_id}: its branch's bundle {bundle} {state}, so its change cannot be fetched, \
         pushed or proposed again; the job is unchanged. {patch}"
    )]
    BundleGone {
        job_id: String,
        bundle: std::path::PathBuf,
        /// `is gone`, or `is not a bundle git can read`.
        state: &'static str,
        /// What is left of its patch: `Its patch P is kept: …`, or that
        /// it is gone too.
        patch: String,
    },
    #[error(
        "job {job_id}: nothing to publish: it was disposed of at {at} (DELETE \
         /v1/jobs/{job_id}): its artifacts, its branch's bundle and patch among them, were \
         removed; the job is unchanged (run its spec again)"
    )]
    Disposed { job_id: String, at: String },
    /// A refusal above that could not be written as an event of the job.
    #[error("{refusal} (and it could not be recorded as an event of the job: {source})")]
    Unrecorded {
        refusal: Box<RepublishError>,
        source: StoreError,
    },
    #[error("job {job_id}: cannot take its lease in {jobs_dir}: {source}")]
    Lease {
        job_id: String,
        jobs_dir: std::path::PathBuf,
        source: std::io::Error,
    },
}

/// The commit `branch.bundle` in `artifacts` holds, if there is one.
async fn bundled_commit(artifacts: &Path) -> Option<String> {
    let bundle = artifacts.join(BUNDLE);
    if !bundle.is_file() {
        return None;
    }
    let git = HostGit {
        git_dir: None,
        work_tree: None,
        index: None,
        excludes: None,
        root: artifacts.to_path_buf(),
        timeout: GIT_TIMEOUT,
        cpu_limit: Some(crate::workspace::host_git::JOB_GIT_CPU),
    };
    let bundle = bundle.to_string_lossy().into_owned();
    let heads = git
        .run(["bundle", "list-heads", &bundle], None)
        .await
        .ok()?;
    String::from_utf8_lossy(&heads)
        .split_whitespace()
        .next()
        .map(str::to_string)
}

/// Publishes the job `job_id` again from `artifacts_root/<job_id>`, under
/// its lease in `jobs_root`, unless `cancel` comes first (module text);
/// its record as stored afterwards and what publishing did.
pub async fn republish(
    store: &dyn Store,
    job_id: &str,
    (artifacts_root, jobs_root): (&Path, &Path),
    cancel: &CancellationToken,
) -> Result<(JobRecord, Published), RepublishError> {
    let store_err = |source| RepublishError::Store {
        job_id: job_id.to_string(),
        source,
    };
    let record =
        store
            .job(job_id)
            .await
            .map_err(store_err)?
            .ok_or_else(|| RepublishError::NoJob {
                job_id: job_id.to_string(),
            })?;
    if matches!(record.status, JobStatus::Queued | JobStatus::Running) {
        return Err(RepublishError::NotEnded {
            job_id: job_id.to_string(),
            status: record.status.as_str().to_string(),
        });
    }
    let artifacts = artifacts_root.join(job_id);
    // Another process holding the lease (a publish, the reaper, a run's
    // end) numbers the job's events as it writes them: a refusal here
    // writes none, which could take the number it is about to use.
    let lease = Lease::take_to_publish(jobs_root, job_id)
        .map_err(|source| RepublishError::Lease {
            job_id: job_id.to_string(),
            jobs_dir: jobs_root.to_path_buf(),
            source,
        })?
        .ok_or_else(|| RepublishError::Busy {
            job_id: job_id.to_string(),
            jobs_dir: jobs_root.to_path_buf(),
        })?;
    // From here on every refusal is an event of the job, written under
    // its lease (`refuse`).
    let default_max =
        usize::try_from(paddock_protocol::spec::DEFAULT_MAX_EVENT_BYTES).unwrap_or(usize::MAX);
    // Its artifacts removed by a dispose: said so, not as a bundle gone
    // with its patch "kept".
    if let Some(at) = record.disposed_at {
        let refusal = RepublishError::Disposed {
            job_id: job_id.to_string(),
            at: crate::time_text::rfc3339(at),
        };
        return Err(refuse(store, job_id, lease, &artifacts, default_max, refusal).await);
    }
    let spec_text = store
        .job_spec(job_id)
        .await
        .map_err(store_err)?
        .unwrap_or_default();
    let spec = match JobSpec::from_stored(&spec_text, Path::new("the store")) {
        Ok(spec) => spec,
        Err(e) => {
            let refusal = RepublishError::Spec {
                job_id: job_id.to_string(),
                message: e.to_string(),
            };
            return Err(refuse(store, job_id, lease, &artifacts, default_max, refusal).await);
        }
    };
    let max_event = usize::try_from(spec.limits.max_event_bytes).unwrap_or(usize::MAX);
    // A job that ended before it was concluded (its source not a
    // repository, its engine not found, a setup that failed before the
    // engine ran...) made nothing to publish: no patch, no branch, no
    // closeout of its run. Nothing is written for it, into the outbox or
    // onto a forge. A job the reaper ended (its process died) has its
    // patch's `artifact_summary`, and is published. Its events read a
    // page at a time: a history may be millions of events.
    let mut events = super::closeout::EventFacts::default();
    let mut concluded = false;
    crate::store::event_pages::each_event(store, job_id, 0, |e| {
        concluded |= matches!(
            e.body,
            EventBody::Status {
                phase: Phase::Concluding | Phase::Publishing,
                ..
            } | EventBody::ArtifactSummary { .. }
        );
        events.add(e);
    })
    .await
    .map_err(store_err)?;
    if !concluded {
        let refusal = RepublishError::NothingToPublish {
            job_id: job_id.to_string(),
            status: record.status.as_str().to_string(),
            reason: record.reason.clone().unwrap_or_default(),
        };
        return Err(refuse(store, job_id, lease, &artifacts, max_event, refusal).await);
    }
    // What a killed publish of this job left.
    let (_, mut leftovers) = super::push::remove_leftover_pushes(&artifacts);
    leftovers.extend(
        super::revoke_leftover_tokens(store, job_id, &artifacts)
            .await
            .errors,
    );
    let commit = bundled_commit(&artifacts).await;
    if cancel.is_cancelled() {
        // Nothing of this publish began: the lease goes as it came, unless
        // a token a killed publish left is still unrevoked.
        let refusal = RepublishError::Cancelled {
            job_id: job_id.to_string(),
        };
        return Err(refuse(store, job_id, lease, &artifacts, max_event, refusal).await);
    }
    // A job that failed only at publishing is published as what it was.
    let publishing_failed = super::conclude::failed_at_publishing(&record);
    // A change whose bundle is gone (removed by hand) or unreadable: its
    // branch cannot be published, and publishing without it would record
    // a job that failed at publishing as done with nothing pushed.
    if commit.is_none()
        && !record.changed_files.is_empty()
        && (publishing_failed || record.status == JobStatus::Done)
    {
        let bundle = artifacts.join(BUNDLE);
        let refusal = RepublishError::BundleGone {
            job_id: job_id.to_string(),
            state: match bundle.exists() {
                true => "is not a bundle git can read",
                false => "is gone",
            },
            bundle,
            patch: {
                let patch = record
                    .patch_path
                    .clone()
                    .map(std::path::PathBuf::from)
                    .unwrap_or_else(|| artifacts.join("patch.diff"));
                if patch.is_file() {
                    format!(
                        "Its patch {} is kept: `paddock apply {job_id}` applies it, or run its \
                         spec again",
                        patch.display()
                    )
                } else {
                    format!(
                        "Its patch {} is gone too: run its spec again",
                        patch.display()
                    )
                }
            },
        };
        return Err(refuse(store, job_id, lease, &artifacts, max_event, refusal).await);
    }
    let mut ending = record.clone();
    if publishing_failed {
        ending.status = JobStatus::Done;
        ending.reason = None;
    }
    // The earlier attempts' bundles, for a source that has lost the
    // branch this one's was made on (its bundle holding only its own
    // objects); a store that cannot say is none.
    let artifacts_root = artifacts.parent().unwrap_or(&artifacts);
    let earlier_bundles = crate::session::branch_chain(store, job_id, artifacts_root)
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|(name, maker)| (name, artifacts_root.join(maker).join(BUNDLE)))
        .collect();
    // The job's host profile as it reads now: its `git_cpu_secs` holds
    // the push's gits, as it held the job's own publish.
    let profile = match &spec.policy.profile {
        Some(name) => match crate::policy::resolve(name, store).await {
            Ok((profile, _)) => Some(profile),
            Err(e) => {
                leftovers.push(format!(
                    "host profile {name} does not resolve now ({e}): the push's gits get the \
                     default {} s of CPU",
                    crate::workspace::host_git::JOB_GIT_CPU.as_secs()
                ));
                None
            }
        },
        None => None,
    };
    let mut published = publish(&PublishInput {
        spec: &spec,
        record: &ending,
        events: &events,
        artifacts: &artifacts,
        commit: commit.as_deref(),
        left_out: &[],
        jobs_root,
        source_dirty: super::conclude::SourceDirty::Kept,
        earlier_bundles,
        base_held: false,
        into_source: None,
        asked: true,
        cancel,
        stopped_by: None,
        git_cpu: crate::workspace::host_git::job_git_cpu(profile.as_ref()),
    })
    .await;
    leftovers.append(&mut published.warnings);
    published.warnings = leftovers;
    // A `done` job stays `done` when publishing it again fails: its work
    // succeeded and was published; what the forge has of it (the branch,
    // the pull request, the closeout) is as that publish left it, and so
    // is its stored closeout. The failure is an event of the job, which
    // `paddock show` names, and `paddock publish` exits non-zero.
    let stays_done = record.status == JobStatus::Done && published.failure.is_some();
    let failure_noted;
    if stays_done {
        let failure = published.failure.clone().unwrap_or_default();
        let note = format!(
            "{failure}; the job stays done: it was published before, and what that publish left \
             (its branch, pull request and closeout) stands as it was (`paddock publish \
             {job_id}` tries again)"
        );
        keep_closeout(store, job_id, &artifacts, &mut published).await?;
        append(
            store,
            job_id,
            EventBody::Error {
                message: note.clone(),
                source: Some(PUBLISH_AGAIN.to_string()),
                fatal: false,
            },
            max_event,
        )
        .await
        .map_err(store_err)?;
        failure_noted = Some(note.clone());
        published.warnings.push(note);
    } else {
        store
            .set_closeout(job_id, &published.closeout)
            .await
            .map_err(store_err)?;
        let (body, noted) = match &published.failure {
            None => (
                EventBody::Status {
                    phase: Phase::Publishing,
                    detail: Some(PUBLISHED_AGAIN.to_string()),
                },
                None,
            ),
            // Every failed publish is an event of the job, the second as
            // the first: its reason says only the last, and the same
            // failure twice changes no record.
            Some(failure) => {
                let note = format!(
                    "{failure}; the job is failed with this reason (`paddock publish {job_id}` \
                     tries again)"
                );
                (
                    EventBody::Error {
                        message: note.clone(),
                        source: Some(PUBLISH_AGAIN.to_string()),
                        fatal: false,
                    },
                    Some(note),
                )
            }
        };
        append(store, job_id, body, max_event)
            .await
            .map_err(store_err)?;
        failure_noted = noted;
    }
    let mut stored = record.clone();
    match (&published.failure, publishing_failed) {
        (None, true) => {
            stored.status = JobStatus::Done;
            stored.reason = None;
        }
        (Some(_), _) if stays_done => {}
        (Some(failure), _) => {
            stored.status = JobStatus::Failed;
            // Kept as the run's conclusion keeps a reason (its end: git's
            // and a forge's last words), however long the failure's text.
            stored.reason = Some(crate::output::keep_end(failure, crate::output::REASON_MAX));
        }
        (None, false) => {}
    }
    if stored != record {
        store
            .finish_job(&stored, record.status)
            .await
            .map_err(store_err)?;
    }
    // What this publish warned of is the job's record too, as the first
    // publish's warnings are (non-fatal errors of `paddock`), not only
    // `paddock publish`'s stderr; the failure noted above is an event
    // already.
    for warning in &published.warnings {
        if failure_noted.as_ref() == Some(warning) {
            continue;
        }
        append(
            store,
            job_id,
            EventBody::Error {
                message: warning.clone(),
                source: Some(REPUBLISH_WARNING.to_string()),
                fatal: false,
            },
            max_event,
        )
        .await
        .map_err(store_err)?;
    }
    // The record is final: the lease goes (while still held), unless a
    // minted token's revocation failed: then it stays, with the token's
    // record, for the reaper's next pass (`super::tokens_left`).
    if super::tokens_left(&artifacts) {
        drop(lease);
    } else if let Err(e) = lease.release() {
        published
            .warnings
            .push(format!("cannot delete the job's lease file: {e}"));
    }
    Ok((stored, published))
}

/// `refusal` of the publish of job `job_id`, which holds `lease`, made an
/// event of the job (a non-fatal `error` of source [`PUBLISH_AGAIN`], as a
/// failed publish is, held to `max` bytes: `paddock show` names it until
/// a later publish succeeds); then the lease goes, unless a token a
/// killed publish left in `artifacts` is still unrevoked (the reaper's).
/// The refusal, or [`RepublishError::Unrecorded`] when the event could
/// not be written.
async fn refuse(
    store: &dyn Store,
    job_id: &str,
    lease: Lease,
    artifacts: &Path,
    max: usize,
    refusal: RepublishError,
) -> RepublishError {
    let noted = append(
        store,
        job_id,
        EventBody::Error {
            message: refusal.to_string(),
            source: Some(PUBLISH_AGAIN.to_string()),
            fatal: false,
        },
        max,
    )
    .await;
    if !super::tokens_left(artifacts) {
        let _ = lease.release();
    }
    match noted {
        Ok(()) => refusal,
        Err(source) => RepublishError::Unrecorded {
            refusal: Box::new(refusal),
            source,
        },
    }
}

/// The source of the event a failed `paddock publish` of a `done` job
/// leaves (its job stays `done`; `paddock show` names the failure).
pub const PUBLISH_AGAIN: &str = "paddock publish";

/// The source of a warning of `paddock publish` in the job's events (not
/// [`PUBLISH_AGAIN`]: a warning is no failure of the publish).
pub const REPUBLISH_WARNING: &str = "paddock";

/// The detail of the `publishing` status event a `paddock publish` that
/// succeeded leaves: a failure before it is no longer the last word.
pub const PUBLISHED_AGAIN: &str = "published again by paddock publish";

/// Appends `body` to the events of the ended job `job_id`, after its last,
/// each text field cut to `max` bytes (the job's `limits.max_event_bytes`,
/// as its run's events are: a forge's or a remote's words in a note are
/// bounded at their source, but not to the job's own limit).
async fn append(
    store: &dyn Store,
    job_id: &str,
    body: EventBody,
    max: usize,
) -> Result<(), StoreError> {
    let seq = store.last_event_seq(job_id).await?.saturating_add(1);
    store
        .append_event(&paddock_protocol::AgentEvent {
            job_id: job_id.to_string(),
            seq,
            at: time::OffsetDateTime::now_utc(),
            body: crate::output::cap_event(body, max),
        })
        .await
}

/// Leaves the job's closeout as the publish before this one made it: the
/// stored text (what the forge holds) back in `artifacts/closeout.md`,
/// which the failed publish overwrote, and in `published`.
async fn keep_closeout(
    store: &dyn Store,
    job_id: &str,
    artifacts: &Path,
    published: &mut Published,
) -> Result<(), RepublishError> {
    let kept = store
        .closeout(job_id)
        .await
        .map_err(|source| RepublishError::Store {
            job_id: job_id.to_string(),
            source,
        })?;
    if let Some(kept) = kept {
        let path = artifacts.join(super::conclude::CLOSEOUT);
        // Never through a link planted there (`own_file.rs`).
        if let Err(e) = crate::own_file::write(&path, kept.as_bytes()) {
            published.warnings.push(format!(
                "cannot put the job's closeout back in {}: {e}",
                path.display()
            ));
        }
        published.closeout = kept;
    }
    Ok(())
}

/// The failure of the last `paddock publish` of the job, when its events
/// end with one (a `done` job stays `done`; `paddock show` names it): a
/// later publish that succeeded clears it.
/// Read a page at a time (`store::event_pages`): a job's history may be
/// millions of events.
pub async fn last_publish_failure(
    store: &dyn Store,
    job_id: &str,
) -> Result<Option<(time::OffsetDateTime, String)>, StoreError> {
    Ok(
        crate::store::event_pages::last_of(store, job_id, |e| match &e.body {
            EventBody::Error {
                message, source, ..
            } if source.as_deref() == Some(PUBLISH_AGAIN) => Some(Some((e.at, message.clone()))),
            EventBody::Status {
                phase: Phase::Publishing,
                detail,
            } if detail.as_deref() == Some(PUBLISHED_AGAIN) => Some(None),
            _ => None,
        })
        .await?
        .flatten(),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::store::event_pages::{most_read, PAGE};
    use crate::store::fixtures::{event, job};

    /// A note `paddock publish` adds is held to the job's
    /// `limits.max_event_bytes`, as its run's events are (before: stored
    /// whole, past that limit).
    #[tokio::test]
    async fn a_publishs_note_is_held_to_the_jobs_event_limit() {
        let store = crate::store::SqliteStore::open_in_memory().await.unwrap();
        store.insert_job(&job("j1", 0), "{}").await.unwrap();
        let long = "é".repeat(3000);
        let note = |message: String| EventBody::Error {
            message,
            source: Some(REPUBLISH_WARNING.into()),
            fatal: false,
        };
        append(&store, "j1", note(long.clone()), 1001)
            .await
            .unwrap();
        let stored = store.events("j1", 0).await.unwrap();
        assert_eq!(
            stored.into_iter().map(|e| e.body).collect::<Vec<_>>(),
            vec![note(format!(
                "{}{}",
                "é".repeat(500),
                crate::output::truncated_marker(long.len())
            ))]
        );
    }

    /// The failure of the last `paddock publish` (what `paddock show`
    /// names) found in a long history a page at a time, never more: the
    /// failure early, thousands of lines after it; then a publish that
    /// succeeded clears it, and a later failure is the one named.
    #[tokio::test]
    async fn the_last_publish_failure_is_found_a_page_at_a_time() {
        let store = crate::store::SqliteStore::open_in_memory().await.unwrap();
        store.insert_job(&job("j1", 0), "{}").await.unwrap();
        let failed = |message: &str| EventBody::Error {
            message: message.into(),
            source: Some(PUBLISH_AGAIN.into()),
            fatal: true,
        };
        let lines = 3 * PAGE as u64;
        let bodies = std::iter::once(failed("first"))
            .chain((0..lines).map(|i| EventBody::Text {
                text: format!("line {i}"),
            }))
            .enumerate();
        for (seq, body) in bodies {
            store
                .append_event(&event("j1", seq as u64 + 1, body))
                .await
                .unwrap();
        }
        let message = |store| async move {
            last_publish_failure(store, "j1")
                .await
                .unwrap()
                .map(|(_, message)| message)
        };
        most_read::take();
        let first = message(&store).await;
        let most = most_read::take();
        append(
            &store,
            "j1",
            EventBody::Status {
                phase: Phase::Publishing,
                detail: Some(PUBLISHED_AGAIN.into()),
            },
            usize::MAX,
        )
        .await
        .unwrap();
        let cleared = message(&store).await;
        append(&store, "j1", failed("second"), usize::MAX)
            .await
            .unwrap();
        let second = message(&store).await;
        assert_eq!(
            (
                most,
                first,
                cleared,
                second,
                store.last_event_seq("j1").await.unwrap()
            ),
            (
                PAGE as usize,
                Some("first".to_string()),
                None,
                Some("second".to_string()),
                lines + 3
            )
        );
    }

    /// Each refusal of an ended job's publish is an event of the job
    /// (source `paddock publish`, as a failed publish's; `paddock show`
    /// names it): cancelled before it began, nothing to publish. One of a
    /// job still running, or while another process holds the job's lease,
    /// writes none (that process numbers the job's events); the lease a
    /// refusal took is gone after it.
    #[tokio::test]
    async fn a_refused_publish_is_an_event_of_the_job_but_beside_another_writer() {
        let store = crate::store::SqliteStore::open_in_memory().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (artifacts, jobs) = (dir.path().join("artifacts"), dir.path().join("jobs"));
        let spec = JobSpec::from_toml(
            "[ticket]\nid = \"T-1\"\ntitle = \"t\"\n[repository]\npath = \"/r\"\n\
             [engine]\nkind = \"codex\"\nmodel = \"gpt-5.5\"\n\
             [upstream]\nprovider = \"scripted\"\nscenario = \"s.toml\"\n\
             [limits]\nmax_event_bytes = 1024\n",
            Path::new("job.toml"),
        )
        .unwrap();
        let text = serde_json::to_string(&spec).unwrap();
        let mut running = job("j0", 0);
        running.status = JobStatus::Running;
        let mut concluded = job("j1", 1);
        concluded.status = JobStatus::Done;
        let mut nothing = job("j2", 2);
        nothing.status = JobStatus::Failed;
        nothing.reason = Some("its source is no repository".into());
        for j in [&running, &concluded, &nothing] {
            store.insert_job(j, &text).await.unwrap();
        }
        let concluding = EventBody::Status {
            phase: Phase::Concluding,
            detail: None,
        };
        for id in ["j0", "j1"] {
            store
                .append_event(&event(id, 1, concluding.clone()))
                .await
                .unwrap();
        }
        let cancelled = CancellationToken::new();
        cancelled.cancel();
        let publish = |id: &'static str, cancel: CancellationToken| {
            let (store, artifacts, jobs) = (&store, &artifacts, &jobs);
            async move {
                republish(store, id, (artifacts, jobs), &cancel)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
        };
        let not_ended = publish("j0", cancelled.clone()).await;
        let held = Lease::take_to_publish(&jobs, "j1").unwrap().unwrap();
        let busy = publish("j1", cancelled.clone()).await;
        held.release().unwrap();
        drop(held);
        let cancel = publish("j1", cancelled.clone()).await;
        let made_nothing = publish("j2", CancellationToken::new()).await;
        let mut events = Vec::new();
        for id in ["j0", "j1", "j2"] {
            events.push(
                store
                    .events(id, 0)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|e| e.body)
                    .collect::<Vec<_>>(),
            );
        }
        let refused = |message: &str| EventBody::Error {
            message: message.into(),
            source: Some(PUBLISH_AGAIN.into()),
            fatal: false,
        };
        let cancel_said = "job j1: publishing was cancelled before it began (Ctrl-C, SIGTERM or \
                           SIGHUP); the job is unchanged";
        let nothing_said = "job j2: nothing to publish: it ended failed before its work was \
                            concluded (its source is no repository), and kept no patch, branch \
                            or closeout; run its spec again once that is fixed";
        assert_eq!(
            (
                not_ended,
                busy,
                cancel,
                made_nothing,
                events,
                std::fs::read_dir(jobs.join(".leases")).unwrap().count(),
            ),
            (
                Err("job j0: it is still running; publish it when it has ended".to_string()),
                Err(format!(
                    "job j1: another process is publishing it (its lease in {} is held)",
                    jobs.display()
                )),
                Err(cancel_said.to_string()),
                Err(nothing_said.to_string()),
                vec![
                    vec![concluding.clone()],
                    vec![concluding, refused(cancel_said)],
                    vec![refused(nothing_said)],
                ],
                0,
            )
        );
    }
}

//! Resume: the engine's session carried from one attempt to the next.
//! Before the engine starts, a job that resumes its prior attempt's
//! session gets that session's files in its home (else it forks, saying
//! why, as a `session_forked` status); once the engine has exited, the
//! session id its stream announced is kept in the job's record and its
//! session files in the job's artifacts (`session::files`), for the next
//! attempt.

use paddock_protocol::{EventBody, Phase};

use super::emit::Emitter;
use super::provision::Provisioned;
use super::Job;
use crate::engines::EngineAdapter;
use crate::redact::{JOB_DIR, WORKSPACE};
use crate::session::{files, Continuation};
use crate::store::StoreError;

/// The checkout as the engine sees its own working directory (Claude
/// Code names its session directory after the real path).
fn engine_cwd(prov: &Provisioned) -> std::path::PathBuf {
    let work = &prov.ws().work;
    work.canonicalize().unwrap_or_else(|_| work.clone())
}

/// A kept session file made the new job's: the placeholders its
/// redaction left become the new checkout and job directory.
fn into_job(bytes: Vec<u8>, prov: &Provisioned) -> Vec<u8> {
    let ws = prov.ws();
    String::from_utf8_lossy(&bytes)
        .replace(WORKSPACE, &engine_cwd(prov).display().to_string())
        .replace(JOB_DIR, &ws.root.display().to_string())
        .into_bytes()
}

/// The session the engine resumes (its files now in the job's home), or
/// `None`; the `session_resumed` or `session_forked` status either way
/// for a job that follows a prior attempt.
pub(super) async fn restore(
    job: &Job,
    em: &mut Emitter,
    prov: &Provisioned,
    adapter: &dyn EngineAdapter,
) -> Result<Option<String>, StoreError> {
    let Some(continuation) = &job.continuation else {
        return Ok(None);
    };
    let continuation = match continuation {
        Continuation::Resume { prior, session } => {
            let restored = adapter
                .session_place(&engine_cwd(prov), session)
                .ok_or_else(|| format!("{} cannot resume a session", adapter.kind()))
                .and_then(|place| {
                    files::restore(&prior.saved, &prov.ws().home, &place, &|bytes| {
                        into_job(bytes, prov)
                    })
                    .map_err(|e| e.to_string())
                });
            match restored {
                Ok(n) if n > 0 => continuation.clone(),
                Ok(_) => Continuation::Fork {
                    prior: prior.clone(),
                    reason: format!("the session files of attempt {} are gone", prior.attempt),
                },
                Err(reason) => Continuation::Fork {
                    prior: prior.clone(),
                    reason,
                },
            }
        }
        fork @ Continuation::Fork { .. } => fork.clone(),
    };
    let (phase, session) = match &continuation {
        Continuation::Resume { session, .. } => (Phase::SessionResumed, Some(session.clone())),
        Continuation::Fork { .. } => (Phase::SessionForked, None),
    };
    em.emit(EventBody::Status {
        phase,
        detail: Some(continuation.describe()),
    })
    .await?;
    Ok(session)
}

/// Keeps the session `session` the engine announced: its id in the job's
/// record now, its files in the job's artifacts by a [`SessionSave`] that
/// runs beside the patch (reading and redacting them was most of Paddock's
/// own part of the engine's exit); `None` when there is nothing to copy.
pub(super) async fn keep(
    em: &mut Emitter,
    prov: &Provisioned,
    adapter: &dyn EngineAdapter,
    session: Option<String>,
) -> Result<Option<SessionSave>, StoreError> {
    let Some(session) = session else {
        return Ok(None);
    };
    // Written as the stream announced it; again only if it is not the
    // one written last (one store write less on the job's exit path).
    if em.session_stored.as_ref() != Some(&session) {
        let job_id = em.job_id.clone();
        em.store.set_engine_session(&job_id, &session).await?;
        em.session_stored = Some(session.clone());
    }
    let Some(place) = adapter.session_place(&engine_cwd(prov), &session) else {
        return Ok(None);
    };
    let dest = prov.artifacts.join(files::SAVED_DIR);
    let home = prov.ws().home.clone();
    let redactor = em.redactor.clone();
    let copy = tokio::task::spawn_blocking(move || {
        let redact = move |bytes: Vec<u8>| {
            redactor
                .text(&String::from_utf8_lossy(&bytes))
                .into_owned()
                .into_bytes()
        };
        files::save(&home, &place, &dest, &redact).map_err(|e| e.to_string())
    });
    Ok(Some(SessionSave(copy)))
}

/// The copy of the engine's session files into the job's artifacts, on a
/// blocking thread of its own; finished before the job publishes and
/// before its workspace goes.
pub(super) struct SessionSave(tokio::task::JoinHandle<Result<usize, String>>);

impl SessionSave {
    /// Waits for the copy; one that failed is a warning, not the job's
    /// failure.
    pub async fn finish(self, em: &mut Emitter) -> Result<(), StoreError> {
        let failed = match self.0.await {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(e)) => e,
            Err(e) => e.to_string(),
        };
        em.error(
            "paddock",
            format!("the engine's session was not kept for a next attempt: {failed}"),
            false,
        )
        .await
    }
}

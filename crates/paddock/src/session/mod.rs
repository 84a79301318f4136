//! Follow-up turns continue the engine's own session (`paddock run
//! --attempt-after JOB`): the prior job's session id (from its engine's
//! stream, kept in its record) and its session files (kept in its
//! artifacts by [`files`]) let the next attempt resume that session with
//! its history, on the prior attempt's branch, when the engine, the model
//! and the rung are the same and the engine can resume; otherwise the
//! next attempt forks a new session and says why. The adapter knows how
//! its engine resumes and where its files lie (`engines::SessionPlace`);
//! this module decides, and carries the files.

pub mod files;
pub(crate) mod repository;

use std::path::PathBuf;

use paddock_protocol::JobRecord;

use crate::store::{Store, StoreError};

/// The prior attempt a job follows, as its next attempt needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prior {
    pub job_id: String,
    pub attempt: u32,
    pub engine: String,
    pub model: String,
    pub rung: String,
    /// The branch its work is on: its result branch when it kept one (a
    /// change, and done); when it changed nothing, the earlier attempt's
    /// branch it started on (its session's history is of that tree), if
    /// it started on one.
    pub branch: Option<String>,
    /// The job whose bundle (`branch.bundle`) keeps `branch`: this one, or
    /// the earlier attempt whose branch it started on.
    pub branch_job: Option<String>,
    /// Its engine's session id, when the engine announced one.
    pub session: Option<String>,
    /// Where its session files were saved.
    pub saved: PathBuf,
    /// `its pull request URL was merged on the forge`: the next attempt
    /// forks, on the spec's base (`bounce::After`); one closed without a
    /// merge is not this (the next attempt builds on it).
    pub ended: Option<String>,
    /// `its pull request URL was closed on the forge without being
    /// merged`: the next attempt builds on its branch in a pull request
    /// of its own, which [`Continuation::describe`] says.
    pub closed: Option<String>,
}

impl Prior {
    /// The prior attempt `job_id` from the store (`None`: no such job).
    pub async fn load(
        store: &dyn Store,
        job_id: &str,
        artifacts_root: &std::path::Path,
    ) -> Result<Option<Prior>, StoreError> {
        let Some(record) = store.job(job_id).await? else {
            return Ok(None);
        };
        let session = store.engine_session(job_id).await?;
        let mut prior = Prior::of(&record, session, artifacts_root);
        if prior.branch.is_none() && record.changed_files.is_empty() {
            if let Some(maker) = branch_maker(store, &record, artifacts_root).await? {
                prior.branch = Some(record.base_ref.clone());
                prior.branch_job = Some(maker);
            }
        }
        Ok(Some(prior))
    }

    fn of(record: &JobRecord, session: Option<String>, artifacts_root: &std::path::Path) -> Prior {
        let kept = keeps_branch(record, artifacts_root);
        Prior {
            job_id: record.id.clone(),
            attempt: record.attempt,
            engine: record.engine.clone(),
            model: record.model.clone(),
            rung: record.isolation.clone(),
            branch: kept.then(|| record.branch.clone()),
            branch_job: kept.then(|| record.id.clone()),
            session: session.as_deref().and_then(crate::engines::session_id),
            saved: artifacts_root.join(&record.id).join(files::SAVED_DIR),
            ended: None,
            closed: None,
        }
    }
}

/// Whether `record`'s job kept a result branch: it made a change and
/// either ended done (a bundle it lost since is the next attempt's clear
/// failure, not a silent start on the spec's base) or, however else it
/// ended, its branch's bundle is in its artifacts (a job that failed at
/// publishing, timed out or was cancelled after its work has its branch
/// too, and its session's history is of that tree; a job the reaper
/// ended has its patch but no branch).
fn keeps_branch(record: &JobRecord, artifacts_root: &std::path::Path) -> bool {
    !record.changed_files.is_empty()
        && (record.status == paddock_protocol::JobStatus::Done
            || artifacts_root
                .join(&record.id)
                .join(crate::workspace::BUNDLE)
                .is_file())
}

/// The earlier job of `record`'s ticket (its project and ticket id) and
/// repository that kept `record`'s base as its result branch (ended, with
/// a change, recorded before it), when its base is one: the newest such
/// job, which made the branch `record` started on. `paddock apply` names
/// it too, for a patch made on that branch. A branch name is
/// `paddock/<ticket>/<attempt>` in every repository: a job of another
/// project or repository whose ticket has the same id (issue numbers
/// collide; a server's submitter names any) made a branch of the same
/// name there, never this one, and its bundle is never taken for it.
pub async fn branch_maker(
    store: &dyn Store,
    record: &JobRecord,
    artifacts_root: &std::path::Path,
) -> Result<Option<String>, StoreError> {
    let query = crate::store::JobQuery {
        status: None,
        branch: Some(record.base_ref.clone()),
        engine: None,
        isolation: None,
        after: None,
        limit: 100,
    };
    let mut makers: Vec<JobRecord> = store
        .list_jobs(&query)
        .await?
        .into_iter()
        .filter(|j| {
            j.id != record.id
                && (j.project.as_str(), j.ticket_id.as_str())
                    == (record.project.as_str(), record.ticket_id.as_str())
                && !matches!(
                    j.status,
                    paddock_protocol::JobStatus::Queued | paddock_protocol::JobStatus::Running
                )
                && keeps_branch(j, artifacts_root)
                && j.created_at <= record.created_at
        })
        .collect();
    if makers.is_empty() {
        return Ok(None);
    }
    // A job whose spec cannot be read has no repository to match: none
    // is taken for it.
    let Some(own) = stored_repository(store, &record.id).await? else {
        return Ok(None);
    };
    makers.sort_by_key(|j| j.created_at);
    while let Some(maker) = makers.pop() {
        if stored_repository(store, &maker.id).await?.as_ref() == Some(&own) {
            return Ok(Some(maker.id));
        }
    }
    Ok(None)
}

/// The repository of job `job_id`'s stored spec, as next attempts
/// compare them (`repository::repository`); `None` when the store has no
/// spec of it, or one that no longer reads (a rule added since refuses
/// it), which is logged as a warning naming the job and why: its branch
/// is then not taken as the one a job started on, and before, nothing
/// said so.
async fn stored_repository(
    store: &dyn Store,
    job_id: &str,
) -> Result<Option<repository::Repository>, StoreError> {
    let Some(text) = store.job_spec(job_id).await? else {
        return Ok(None);
    };
    match paddock_protocol::JobSpec::from_stored(&text, std::path::Path::new("the store")) {
        Ok(spec) => Ok(Some(repository::repository(&spec))),
        Err(e) => {
            tracing::warn!(
                "job {job_id}: its stored spec does not read, so its repository is not known \
                 and it is matched with no other attempt of its ticket: {e}"
            );
            Ok(None)
        }
    }
}

/// The earlier attempts whose result branches the branch of `job_id` is
/// built on, nearest first: (branch, job id) of the job that made
/// `job_id`'s base, then of the one that made that job's base, and so
/// on (at most 64; a loop ends it). A job's bundle holds only its new
/// objects when the source kept its base, so a source that later lost
/// those branches (deleted and pruned) needs the earlier bundles first.
pub async fn branch_chain(
    store: &dyn Store,
    job_id: &str,
    artifacts_root: &std::path::Path,
) -> Result<Vec<(String, String)>, StoreError> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut current = store.job(job_id).await?;
    while let Some(record) = current {
        if out.len() >= 64 {
            break;
        }
        let Some(maker) = branch_maker(store, &record, artifacts_root).await? else {
            break;
        };
        if maker == job_id || out.iter().any(|(_, job)| *job == maker) {
            break;
        }
        current = store.job(&maker).await?;
        if let Some(made) = &current {
            out.push((made.branch.clone(), maker));
        }
    }
    Ok(out)
}

/// How the next attempt's engine starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Continuation {
    /// It resumes `session` of the prior attempt.
    Resume { prior: Prior, session: String },
    /// It starts a new session, for `reason`.
    Fork { prior: Prior, reason: String },
}

impl Continuation {
    /// Resume when the engine can and the engine, the model and the rung
    /// are the prior attempt's and its session was kept; else fork.
    pub fn decide(
        prior: Prior,
        (engine, model, rung): (&str, &str, &str),
        can_resume: bool,
    ) -> Continuation {
        let changed = |what: &str, was: &str, now: &str| {
            (was != now).then(|| format!("the {what} changed ({was} → {now})"))
        };
        // A branch a reviewer merged is not built on: the next attempt
        // starts on the spec's base (which has that work), and its engine
        // in a new session (the old one's history is of a tree it no
        // longer has).
        let ended = prior.ended.as_ref().map(|ended| {
            format!(
                "attempt {}: {ended}; this attempt starts on the spec's base, not on its branch",
                prior.attempt
            )
        });
        let why = ended
            .or_else(|| changed("engine", &prior.engine, engine))
            .or_else(|| changed("model", &prior.model, model))
            .or_else(|| changed("rung", &prior.rung, rung))
            .or_else(|| (!can_resume).then(|| format!("{engine} cannot resume a session")));
        let why = why.or_else(|| match &prior.session {
            None => Some(format!(
                "attempt {} recorded no engine session",
                prior.attempt
            )),
            Some(_) if !files::any_saved(&prior.saved) => Some(format!(
                "the session files of attempt {} are gone",
                prior.attempt
            )),
            Some(_) => None,
        });
        match (why, prior.session.clone()) {
            (None, Some(session)) => Continuation::Resume { prior, session },
            (Some(reason), _) => Continuation::Fork { prior, reason },
            (None, None) => Continuation::Fork {
                reason: format!("attempt {} recorded no engine session", prior.attempt),
                prior,
            },
        }
    }

    /// The prior attempt it continues.
    pub fn prior(&self) -> &Prior {
        match self {
            Continuation::Resume { prior, .. } | Continuation::Fork { prior, .. } => prior,
        }
    }

    /// The status event's text (and the closeout's line): a prior pull
    /// request closed without a merge is said there too, so a server's
    /// job tells its API users what `paddock run` prints.
    pub fn describe(&self) -> String {
        let (text, prior) = match self {
            Continuation::Resume { prior, session } => (
                format!(
                    "resumed session {session} of attempt {} (job {})",
                    prior.attempt, prior.job_id
                ),
                prior,
            ),
            Continuation::Fork { prior, reason } => (
                format!(
                    "a new session, not attempt {}'s (job {}): {reason}",
                    prior.attempt, prior.job_id
                ),
                prior,
            ),
        };
        match &prior.closed {
            None => text,
            Some(closed) => format!(
                "{text}; attempt {}: {closed}, so this attempt builds on its branch and opens a \
                 pull request of its own (the closed one is left as it is)",
                prior.attempt
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn prior(saved: PathBuf) -> Prior {
        Prior {
            job_id: "job-1".into(),
            attempt: 1,
            engine: "codex".into(),
            model: "gpt-5.5".into(),
            rung: "process".into(),
            branch: Some("paddock/T-1/1".into()),
            branch_job: Some("job-1".into()),
            session: Some("0199-abc".into()),
            saved,
            ended: None,
            closed: None,
        }
    }

    /// A prior pull request closed without a merge is said in the status
    /// event's text, resumed or forked: what `paddock run` prints, so a
    /// server's job carries it in its events and closeout. Before, only
    /// the CLI said it.
    #[test]
    fn a_closed_prior_pull_request_is_said_in_the_session_status() {
        let closed = Prior {
            closed: Some(
                "its pull request https://github.com/acme/widgets/pull/1 was closed on the \
                 forge without being merged"
                    .into(),
            ),
            ..prior(PathBuf::from("/nonexistent"))
        };
        let note = "; attempt 1: its pull request https://github.com/acme/widgets/pull/1 was \
                    closed on the forge without being merged, so this attempt builds on its \
                    branch and opens a pull request of its own (the closed one is left as it is)";
        let resumed = Continuation::Resume {
            prior: closed.clone(),
            session: "0199-abc".into(),
        };
        let forked = Continuation::Fork {
            prior: closed,
            reason: "the model changed".into(),
        };
        assert_eq!(
            (resumed.describe(), forked.describe()),
            (
                format!("resumed session 0199-abc of attempt 1 (job job-1){note}"),
                format!("a new session, not attempt 1's (job job-1): the model changed{note}")
            )
        );
    }

    #[test]
    fn resumes_only_the_same_engine_model_and_rung_with_its_files() {
        let tmp = tempfile::tempdir().unwrap();
        let saved = tmp.path().join("saved");
        std::fs::create_dir_all(saved.join("2026/01/01")).unwrap();
        std::fs::write(saved.join("2026/01/01/rollout-0199-abc.jsonl"), "{}\n").unwrap();
        let kept = prior(saved.clone());
        // Its directories kept, its file gone (before, taken as kept: the
        // next attempt said it resumed, then forked); a link to the file
        // is not followed.
        let emptied = tmp.path().join("emptied");
        std::fs::create_dir_all(emptied.join("2026/01/01")).unwrap();
        std::os::unix::fs::symlink(
            saved.join("2026/01/01/rollout-0199-abc.jsonl"),
            emptied.join("2026/01/01/rollout-0199-abc.jsonl"),
        )
        .unwrap();
        let now = ("codex", "gpt-5.5", "process");
        let cases = [
            (kept.clone(), now, true, None),
            (
                kept.clone(),
                ("claude", "gpt-5.5", "process"),
                true,
                Some("the engine changed (codex → claude)"),
            ),
            (
                kept.clone(),
                ("codex", "gpt-5.4", "process"),
                true,
                Some("the model changed (gpt-5.5 → gpt-5.4)"),
            ),
            (
                kept.clone(),
                ("codex", "gpt-5.5", "sandbox"),
                true,
                Some("the rung changed (process → sandbox)"),
            ),
            (
                kept.clone(),
                now,
                false,
                Some("codex cannot resume a session"),
            ),
            (
                Prior {
                    session: None,
                    ..kept.clone()
                },
                now,
                true,
                Some("attempt 1 recorded no engine session"),
            ),
            (
                Prior {
                    ended: Some(
                        "its pull request https://github.com/acme/widgets/pull/1 was merged on \
                         the forge"
                            .into(),
                    ),
                    ..kept.clone()
                },
                now,
                true,
                Some(
                    "attempt 1: its pull request https://github.com/acme/widgets/pull/1 was \
                     merged on the forge; this attempt starts on the spec's base, not on its branch",
                ),
            ),
            (
                prior(tmp.path().join("gone")),
                now,
                true,
                Some("the session files of attempt 1 are gone"),
            ),
            (
                prior(emptied),
                now,
                true,
                Some("the session files of attempt 1 are gone"),
            ),
        ];
        for (p, now, can, want) in cases {
            let got = Continuation::decide(p.clone(), now, can);
            let want = match want {
                None => Continuation::Resume {
                    session: "0199-abc".into(),
                    prior: p,
                },
                Some(reason) => Continuation::Fork {
                    prior: p,
                    reason: reason.into(),
                },
            };
            assert_eq!(got, want);
        }
    }

    /// A job whose stored spec no longer reads is matched with no earlier
    /// attempt's branch, and a warning says which job and why, where
    /// before the spec's error was dropped (`.ok()`) without a word.
    #[tokio::test]
    async fn a_stored_spec_that_does_not_read_is_warned_about() {
        use std::sync::{Arc, Mutex};
        #[derive(Clone, Default)]
        struct Buf(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buf {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let store = crate::store::SqliteStore::open_in_memory().await.unwrap();
        let job = |id: &str, branch: &str, base_ref: &str, at| JobRecord {
            id: id.to_owned(),
            ticket_id: "T-1".to_owned(),
            project: "acme/widgets".to_owned(),
            attempt: 1,
            engine: "codex".to_owned(),
            model: "gpt-5-codex".to_owned(),
            isolation: "process".to_owned(),
            status: paddock_protocol::JobStatus::Done,
            reason: None,
            branch: branch.to_owned(),
            base_ref: base_ref.to_owned(),
            patch_path: None,
            changed_files: vec!["a.txt".to_owned()],
            tokens: paddock_protocol::event::TokenUsage::default(),
            model_calls: 0,
            cost_micros: 0,
            engine_exit_code: None,
            created_at: at,
            finished_at: None,
            duration_ms: None,
            disposed_at: None,
        };
        let maker = job(
            "job-1",
            "paddock/T-1/1",
            "main",
            time::macros::datetime!(2026-01-01 10:00 UTC),
        );
        let next = job(
            "job-2",
            "paddock/T-1/2",
            "paddock/T-1/1",
            time::macros::datetime!(2026-01-01 11:00 UTC),
        );
        let unreadable = r#"{"ticket": 7}"#;
        store.insert_job(&maker, unreadable).await.unwrap();
        store.insert_job(&next, unreadable).await.unwrap();
        let buf = Buf::default();
        let sink = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || sink.clone())
            .without_time()
            .with_ansi(false)
            .with_target(false)
            .finish();
        let found = {
            let _guard = tracing::subscriber::set_default(subscriber);
            branch_maker(&store, &next, std::path::Path::new("/nowhere")).await
        };
        let e =
            paddock_protocol::JobSpec::from_stored(unreadable, std::path::Path::new("the store"))
                .err()
                .unwrap();
        assert_eq!(
            (
                found.unwrap(),
                String::from_utf8(buf.0.lock().unwrap().clone()).unwrap()
            ),
            (
                None,
                format!(
                    " WARN job job-2: its stored spec does not read, so its repository is not \
                     known and it is matched with no other attempt of its ticket: {e}\n"
                )
            )
        );
    }
}

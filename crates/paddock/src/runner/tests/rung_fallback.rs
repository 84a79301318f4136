//! The runner's move of an `auto` job off a sandbox that could not be set
//! up at its first launch (`runner/rung_fallback.rs`), on fake rungs: it
//! moves only when a fresh probe says no sandbox starts on this host, and
//! only a job that asked for `auto`. On a real kernel (a sandbox kept as
//! starting that no longer does): `tests/it/sandbox_jobs.rs`'s
//! `an_auto_job_moves_to_process_when_its_kept_sandbox_no_longer_starts`.

use std::sync::Arc;

use paddock_protocol::{EventBody, Isolation, JobStatus};

use super::{run_from, Host, DONE};
use crate::rung::fake::{FakeEngine, FakeRung};
use crate::rung::Rungs;

const SETUP: &str = "landlock: restrict the view: not supported by this kernel";
const AFRESH: &str = "unshare the user and UTS namespaces: EPERM";

/// Runs `isolation`'s job, read from `job.toml` (as `paddock run` says
/// where its spec came from), under the host profile `profile` if any (the
/// `process` rung cannot enforce its `cpu_limit`), where the sandbox
/// rung's launches fail in its set-up and a fresh probe answers `afresh`:
/// the record's (status, reason, rung), the stored record's rung, the
/// job's `policy` events, and the `.paddock/environment.json` each rung's
/// launch found.
async fn fails_in_set_up(
    isolation: Isolation,
    afresh: Option<&str>,
    profile: Option<&str>,
) -> Outcome {
    fails_in_set_up_as(isolation, afresh, profile, false).await
}

/// What [`fails_in_set_up`] returns.
type Outcome = (
    (JobStatus, Option<String>, String),
    String,
    Vec<EventBody>,
    (Vec<String>, Vec<String>),
);

/// [`fails_in_set_up`], the set-up's failure one for want of a resource
/// of the host when `short` (`RungError::SandboxShort`).
async fn fails_in_set_up_as(
    isolation: Isolation,
    afresh: Option<&str>,
    profile: Option<&str>,
    short: bool,
) -> (
    (JobStatus, Option<String>, String),
    String,
    Vec<EventBody>,
    (Vec<String>, Vec<String>),
) {
    let host = Host::new().await;
    let sandbox = Arc::new(FakeRung {
        sandbox: true,
        setup_fails: Some(SETUP.into()),
        setup_short: short,
        afresh: afresh.map(str::to_string),
        ..FakeRung::new(FakeEngine::default())
    });
    let process = Arc::new(FakeRung {
        gaps: vec![("cpu_limit", "is a cgroup cap".to_string())],
        ..FakeRung::new(FakeEngine {
            stdout: DONE.iter().map(|s| s.to_string()).collect(),
            ..FakeEngine::default()
        })
    });
    if let Some(id) = profile {
        let profile: paddock_protocol::HostProfile = serde_json::from_value(serde_json::json!({
            "id": id,
            "build_policy": "ci-only",
            "verification": "dev-probe",
            "cpu_limit": "100%"
        }))
        .unwrap();
        host.store.put_profile(&profile).await.unwrap();
    }
    let runner = host.runner_on(
        host.store.clone(),
        Rungs {
            process: process.clone(),
            sandbox: sandbox.clone(),
        },
        host.liveness(),
    );
    let mut spec = host.spec();
    spec.isolation = isolation;
    spec.policy.profile = profile.map(str::to_string);
    let (result, _) = run_from(&runner, &spec, Some("job.toml")).await;
    let record = result.unwrap().record;
    let stored = host.store.job(&record.id).await.unwrap().unwrap();
    let policy = host
        .store
        .events(&record.id, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.body)
        .filter(|b| matches!(b, EventBody::Policy { .. }))
        .collect();
    let isolation_of = |rung: &FakeRung| {
        rung.environments
            .lock()
            .unwrap()
            .iter()
            .map(|text| {
                let v: serde_json::Value = serde_json::from_str(text).unwrap();
                v["isolation"].as_str().unwrap().to_string()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(host.left(), Vec::<String>::new());
    (
        (record.status, record.reason, record.isolation),
        stored.isolation,
        policy,
        (isolation_of(&sandbox), isolation_of(&process)),
    )
}

/// Nothing of the job ran and no sandbox starts on this host: the job
/// moves to the `process` rung (its record, its context) and says why.
#[tokio::test]
async fn an_auto_job_moves_to_process_when_no_sandbox_starts() {
    let moved = format!(
        "isolation auto: the sandbox could not be set up, so nothing ran: {SETUP}, although this \
         host's kept sandbox probe said one starts; running on the `process` rung (unconfined) \
         because this host cannot start Paddock's sandbox: {AFRESH}"
    );
    assert_eq!(
        fails_in_set_up(Isolation::Auto, Some(AFRESH), None).await,
        (
            (JobStatus::Done, None, "process".to_string()),
            "process".to_string(),
            vec![EventBody::Policy {
                rule: "isolation".into(),
                message: moved,
            }],
            (vec!["sandbox".to_string()], vec!["process".to_string()]),
        )
    );
}

/// The fresh probe failing with the launch's own error (the helper's
/// words, as the probe reports them) is said once, not twice.
#[tokio::test]
async fn the_move_says_the_same_error_once() {
    let afresh = format!("paddock sandbox: {SETUP}");
    let (_, _, policy, _) = fails_in_set_up(Isolation::Auto, Some(&afresh), None).await;
    assert_eq!(
        policy,
        vec![EventBody::Policy {
            rule: "isolation".into(),
            message: format!(
                "isolation auto: the sandbox could not be set up, so nothing ran: {SETUP}, \
                 although this host's kept sandbox probe said one starts; running on the \
                 `process` rung (unconfined) because this host cannot start Paddock's sandbox: \
                 a fresh probe fails the same way"
            ),
        }]
    );
}

/// A sandbox starts on this host: the failure is the job's own (a cap it
/// asks for, say), and it fails rather than run unconfined; an explicit
/// `sandbox` job is never moved.
#[tokio::test]
async fn a_job_is_not_moved_where_a_sandbox_starts_nor_when_it_asked_for_one() {
    let failed = |isolation: &str| {
        (
            (
                JobStatus::Failed,
                Some(format!(
                    "the sandbox could not be set up, so nothing ran: {SETUP}"
                )),
                isolation.to_string(),
            ),
            isolation.to_string(),
            Vec::<EventBody>::new(),
            (vec!["sandbox".to_string()], Vec::<String>::new()),
        )
    };
    assert_eq!(
        [
            fails_in_set_up(Isolation::Auto, None, None).await,
            fails_in_set_up(Isolation::Sandbox, Some(AFRESH), None).await,
        ],
        [failed("sandbox"), failed("sandbox")]
    );
}

/// A job whose host profile the `process` rung cannot enforce is not
/// moved there: it fails with the profile's refusal, naming the spec's
/// file as admission's refusals do and saying why it was to move. Before,
/// the refusal named no spec.
#[tokio::test]
async fn a_job_whose_profile_the_process_rung_cannot_enforce_is_refused_not_moved() {
    let (record, stored, policy, (on_sandbox, on_process)) =
        fails_in_set_up(Isolation::Auto, Some(AFRESH), Some("capped")).await;
    assert_eq!(
        (record, stored, policy, on_sandbox.len(), on_process),
        (
            (
                JobStatus::Failed,
                Some(format!(
                    "job refused before start: job spec job.toml: host profile `capped`: rule \
                     `cpu_limit` is a \
                     cgroup cap; run the job on a rung that enforces it, or list `cpu_limit` in \
                     `policy.accept_degraded` (isolation auto: the sandbox could not be set up, so nothing ran: \
                     {SETUP}, although this host's kept sandbox probe said one starts; running on \
                     the `process` rung (unconfined) because this host cannot start Paddock's \
                     sandbox: {AFRESH})"
                )),
                "sandbox".to_string(),
            ),
            "sandbox".to_string(),
            Vec::new(),
            1,
            Vec::<String>::new(),
        )
    );
}

/// A first launch that failed for want of a resource of the host (the
/// helper's exit `SETUP_SHORT`: another job or user holding the host's
/// processes, memory or descriptors) is never a reason to
/// move: the job fails on its sandbox, even where a fresh probe says no
/// sandbox starts (the same shortage can fail the probe). Before the
/// helper told a shortage apart, it was a set-up failure like any, and
/// the job moved to the unconfined rung.
#[tokio::test]
async fn a_job_short_of_a_resource_is_never_moved() {
    assert_eq!(
        fails_in_set_up_as(Isolation::Auto, Some(AFRESH), None, true).await,
        (
            (
                JobStatus::Failed,
                Some(format!(
                    "the sandbox could not be set up for want of a resource of this host \
                     (processes, memory or descriptors, which another job or user may be \
                     holding), so nothing ran: {SETUP}"
                )),
                "sandbox".to_string(),
            ),
            "sandbox".to_string(),
            Vec::new(),
            (vec!["sandbox".to_string()], Vec::<String>::new()),
        )
    );
}

//! The next attempt through a server (`POST /v1/jobs?attempt_after=JOB`),
//! as `paddock run --attempt-after JOB` runs it: the prior attempts in its
//! stored spec, the prior engine session resumed (the stand-in engine
//! records the arguments it was resumed with) on the prior attempt's
//! branch, by the server that admitted it or, after a restart, by one that
//! only finds it queued in the store; and a prior job that cannot be
//! followed (none, another ticket's, another repository's: on a server it
//! may be another submitter's, whose session is not this job's to read)
//! refused with a problem naming it, nothing queued.

use std::path::Path;
use std::time::Duration;

use paddock_protocol::event::{EventBody, Phase};
use paddock_protocol::{JobRecord, JobSpec, JobStatus};
use serde_json::Value;

use crate::serve::{add_net_profile, body, gated, is_final, spec, stored_events, Server, TURN};
use paddock_test_support::prelude::*;

/// The engine session the stand-in announces.
const SESSION: &str = "0199-serve-abc";

/// A stand-in Codex that, when started new, writes `one.md` and its
/// session's rollout file where Codex keeps it; when resumed, writes the
/// first two and the last two of its arguments into `resumed-args.txt`.
fn engine() -> String {
    finishing_session(
        &format!(
            r#"case " $* " in
  *" resume "*) for a; do p=$l; l=$a; done; printf '%s %s %s %s\n' "$1" "$2" "$p" "$l" > resumed-args.txt ;;
  *) d="${{CODEX_HOME:-$HOME/.codex}}/sessions/2026/12/03"; mkdir -p "$d"
     echo '{{}}' > "$d/rollout-2026-12-03T00-00-00-{SESSION}.jsonl"; echo one > one.md ;;
esac"#
        ),
        SESSION,
    )
}

/// `POST /v1/jobs?priority=N&attempt_after=AFTER` of `spec`.
async fn submit_after(
    server: &Server,
    spec: &Value,
    after: &str,
    priority: i64,
) -> reqwest::Response {
    server
        .client
        .clone()
        .post(server.url("/v1/jobs"))
        .query(&[
            ("priority", priority.to_string()),
            ("attempt_after", after.to_owned()),
        ])
        .header("content-type", "application/json")
        .body(spec.to_string())
        .send()
        .await
        .unwrap()
}

/// The details of job `id`'s stored status events of `phase`.
async fn details(home: &Home, id: &str, phase: Phase) -> Vec<Option<String>> {
    stored_events(home, id)
        .await
        .into_iter()
        .filter_map(|e| match e.body {
            EventBody::Status { phase: p, detail } if p == phase => Some(detail),
            _ => None,
        })
        .collect()
}

/// Attempt `second` ran after `first` as `paddock run --attempt-after`
/// runs it: resumed on its branch, with attempt 1 in its stored spec.
async fn assert_resumed(home: &Home, second: &JobRecord, first: &str) {
    assert_eq!(
        (
            second.status,
            second.attempt,
            second.base_ref.as_str(),
            second.changed_files.clone(),
            details(home, &second.id, Phase::SessionResumed).await,
            details(home, &second.id, Phase::SessionForked).await,
        ),
        (
            JobStatus::Done,
            2,
            "paddock/T-1/1",
            vec!["resumed-args.txt".to_string()],
            vec![Some(format!(
                "resumed session {SESSION} of attempt 1 (job {first})"
            ))],
            vec![],
        ),
        "reason: {:?}",
        second.reason
    );
    let repo = home.path().join("T-1").join("repo");
    assert_eq!(
        git(&repo, &["show", "paddock/T-1/2:resumed-args.txt"]),
        format!("exec resume {SESSION} -\n")
    );
    let stored = home
        .store()
        .await
        .job_spec(&second.id)
        .await
        .unwrap()
        .unwrap();
    let stored = JobSpec::from_json(&stored, Path::new("the store")).unwrap();
    let priors: Vec<(u32, String, Option<String>)> = stored
        .ticket
        .prior_attempts
        .iter()
        .map(|a| (a.attempt, a.outcome.clone(), a.branch.clone()))
        .collect();
    assert_eq!(
        priors,
        vec![(1, "done".into(), Some("paddock/T-1/1".into()))]
    );
}

#[tokio::test]
async fn a_next_attempt_submitted_to_a_server_resumes_the_prior_session_on_its_branch() {
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let job = spec(&home, "T-1", &engine());
    let first = server.submit_ok(&job, 0).await;
    let ran = server.wait_for(&first, is_final).await;
    assert_eq!(
        (ran.status, ran.changed_files),
        (JobStatus::Done, vec!["one.md".to_string()]),
        "{}",
        server.stderr()
    );

    let resp = submit_after(&server, &job, &first, 0).await;
    assert_eq!(resp.status(), 202, "{}", server.stderr());
    let queued: JobRecord = body(resp).await;
    assert_eq!(queued.attempt, 2);
    let second = server.wait_for(&queued.id, is_final).await;
    assert_resumed(&home, &second, &first).await;
    assert_eq!(
        home.store().await.job_follows(&queued.id).await.unwrap(),
        Some(paddock::store::Follows {
            job: first.clone(),
            ended: None,
            closed: None
        })
    );
}

/// Queued behind a job that holds the only slot, then the server killed:
/// the next server finds the attempt only in the store (no admission of its
/// own in memory) and still resumes the prior session on its branch.
#[tokio::test]
async fn a_queued_next_attempt_follows_its_prior_job_after_a_restart() {
    let home = Home::new();
    let gate = home.path().join("gate");
    let server = Server::start(&home, &["--max-concurrent-jobs", "1"]).await;
    let job = spec(&home, "T-1", &engine());
    let first = server.submit_ok(&job, 0).await;
    assert_eq!(
        server.wait_for(&first, is_final).await.status,
        JobStatus::Done,
        "{}",
        server.stderr()
    );
    let blocker = server
        .submit_ok(&spec(&home, "T-9", &gated(&gate)), 0)
        .await;
    server.wait_for(&blocker, |s| s == JobStatus::Running).await;
    let resp = submit_after(&server, &job, &first, 5).await;
    assert_eq!(resp.status(), 202, "{}", server.stderr());
    let queued: JobRecord = body(resp).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.job(&queued.id).await.status, JobStatus::Queued);
    nix::sys::signal::kill(server.pid(), nix::sys::signal::Signal::SIGKILL).unwrap();
    let mut killed = server;
    killed.child.wait().await.unwrap();
    std::fs::write(&gate, "").unwrap();

    let server = Server::start(&home, &["--max-concurrent-jobs", "1"]).await;
    let second = server.wait_for(&queued.id, is_final).await;
    assert_resumed(&home, &second, &first).await;
}

/// A next attempt whose spec the host profile refuses is refused as a
/// first attempt's is: a 422 `policy_refused` naming the rule, the detail
/// naming what named the profile, nothing queued. Before, it was a plain
/// `bad_input` without the rule a client branches on.
#[tokio::test]
async fn a_next_attempt_the_host_profile_refuses_is_a_422_naming_the_rule() {
    let home = Home::new();
    add_net_profile(&home).await;
    let server = Server::start(&home, &["--allow-profile", "net"]).await;
    let job = spec(&home, "T-1", TURN);
    let first = server.submit_ok(&job, 0).await;
    assert_eq!(
        server.wait_for(&first, is_final).await.status,
        JobStatus::Done,
        "{}",
        server.stderr()
    );
    let mut refused = job.clone();
    refused["policy"] = serde_json::json!({"profile": "net"});
    let first_attempt = server.submit(&refused, 0).await;
    let first_problem: Value = body(first_attempt).await;
    let resp = submit_after(&server, &refused, &first, 0).await;
    let status = resp.status().as_u16();
    let problem: Value = body(resp).await;
    assert_eq!(
        (
            status,
            &problem["code"],
            &problem["rule"],
            &problem["detail"],
            problem == first_problem,
            home.store().await.jobs(10).await.unwrap().len(),
        ),
        (
            422,
            &Value::from("policy_refused"),
            &Value::from("network"),
            &Value::from(
                "job refused before start: policy.profile: host profile `net`: rule `network` \
                 (its [network] maximum and the deny list) cannot be enforced on the `process` \
                 rung: the job's processes can connect directly, past its egress proxy; the \
                 `sandbox` rung enforces it (docs/egress.md); run the job on a rung that \
                 enforces it, or list `network` in `policy.accept_degraded`"
            ),
            true,
            1
        ),
        "{problem}"
    );
}

#[tokio::test]
async fn a_prior_job_that_cannot_be_followed_is_refused_naming_it_and_nothing_is_queued() {
    let home = Home::new();
    let gate = home.path().join("gate");
    let server = Server::start(&home, &[]).await;
    let job = spec(&home, "T-1", TURN);
    let first = server.submit_ok(&job, 0).await;
    assert_eq!(
        server.wait_for(&first, is_final).await.status,
        JobStatus::Done
    );
    let running = server
        .submit_ok(&spec(&home, "T-9", &gated(&gate)), 0)
        .await;
    server.wait_for(&running, |s| s == JobStatus::Running).await;
    let other = spec(&home, "T-2", TURN);
    let mut other_repository = spec(&home, "T-1x", TURN);
    other_repository["ticket"]["id"] = Value::from("T-1");
    let repo_of = |dir: &str| {
        std::fs::canonicalize(home.path().join(dir).join("repo"))
            .unwrap()
            .display()
            .to_string()
    };
    let mut other_project = job.clone();
    other_project["ticket"]["project"] = Value::from("elsewhere");
    let mut of_t9 = spec(&home, "T-9b", TURN);
    of_t9["ticket"]["id"] = Value::from("T-9");
    let long = "j".repeat(129);
    let cases = [
        (&job, "job-nope", 422, "bad_input", "the next attempt after job job-nope: no such job".to_string()),
        (
            &other,
            first.as_str(),
            422,
            "bad_input",
            format!(
                "the next attempt after job {first}: that job is for ticket tests/T-1, this spec \
                 for tests/T-2 (a ticket is its project and its id)"
            ),
        ),
        (
            &other_repository,
            first.as_str(),
            422,
            "bad_input",
            format!(
                "the next attempt after job {first}: that job worked on repository {}, this spec \
                 on repository {}; the next attempt of a ticket works on the same repository",
                repo_of("T-1"),
                repo_of("T-1x")
            ),
        ),
        (
            &other_project,
            first.as_str(),
            422,
            "bad_input",
            format!(
                "the next attempt after job {first}: that job is for ticket tests/T-1, this spec \
                 for elsewhere/T-1 (a ticket is its project and its id)"
            ),
        ),
        (
            &of_t9,
            running.as_str(),
            422,
            "bad_input",
            format!(
                "the next attempt after job {running}: that job has not ended (it is running); the next \
                 attempt follows one that has (`paddock events {running} --follow` shows it to its end)"
            ),
        ),
        (&job, "", 400, "bad_request", "attempt_after: empty; name the job by its id".to_string()),
        (
            &job,
            long.as_str(),
            400,
            "bad_request",
            "attempt_after: an id of 129 characters is no job's (at most 128)".to_string(),
        ),
    ];
    let before = home.store().await.jobs(100).await.unwrap();
    for (spec, after, status, code, detail) in cases {
        let resp = submit_after(&server, spec, after, 0).await;
        assert_eq!(resp.status().as_u16(), status, "attempt_after={after}");
        let problem: Value = body(resp).await;
        assert_eq!(
            (problem["code"].clone(), problem["detail"].clone()),
            (Value::from(code), Value::from(detail)),
            "attempt_after={after}"
        );
    }
    assert_eq!(home.store().await.jobs(100).await.unwrap(), before);
    std::fs::write(&gate, "").unwrap();
    assert_eq!(
        server.wait_for(&running, is_final).await.status,
        JobStatus::Done
    );
}

/// The forge down (503 to every request) when the next attempt reads the
/// prior job's review: not the caller's input to fix, so neither a 422
/// `bad_input` nor `paddock run`'s exit 2 (which say "fix the spec", and
/// a client does not submit it again), but a 502 `forge_unavailable` and
/// exit 70, naming the forge's answer and that nothing was queued. Before,
/// both were bad input.
#[tokio::test(flavor = "multi_thread")]
async fn a_forge_down_at_the_reviews_read_is_a_502_not_bad_input() {
    use crate::results::{stand_in_job, with_github, TOKEN};
    let home = Home::new();
    let repo = repo(home.path());
    let bare = bare_remote(&home.path().join("remotes"), &repo);
    let mock = paddock_test_support::github::MockGitHub::start("acme", "widgets", TOKEN).await;
    let file = stand_in_job(&home, &repo, &finishing("printf 'fixed\\n' > fix.txt"));
    with_github(&file, &mock.url, &format!("file://{}", bare.display()));
    let env = [("PADDOCK_TEST_GH_TOKEN", TOKEN)];
    let first = record(
        &home
            .paddock(&["run", "--json", file.to_str().unwrap()], &env)
            .await,
    );
    mock.set_down(true);
    let run = home
        .run_after(file.to_str().unwrap(), &first.id, &env)
        .await;
    let server = Server::start_env(
        &home,
        &[
            "--allow-host",
            "127.0.0.1",
            "--allow-ref",
            "env:PADDOCK_TEST_GH_TOKEN",
        ],
        &env,
    )
    .await;
    let mut spec = serde_json::to_value(JobSpec::load(&file).unwrap()).unwrap();
    // A server checks a push URL's host; this one is never pushed to.
    spec["results"]["github"]["push_url"] = Value::from("http://127.0.0.1:9/widgets.git");
    let before = home.store().await.jobs(100).await.unwrap();
    let resp = submit_after(&server, &spec, &first.id, 0).await;
    let status = resp.status().as_u16();
    let problem: Value = body(resp).await;
    let detail = format!(
        "the next attempt after job {}: the forge did not answer the review's read: github: \
         find the pull request: HTTP 503: Service Unavailable (nothing was queued; \
         submit it again once the forge answers)",
        first.id
    );
    assert_eq!(
        (
            first.status,
            run.status.code(),
            String::from_utf8_lossy(&run.stderr).into_owned(),
            status,
            problem["code"].clone(),
            problem["detail"].clone(),
            home.store().await.jobs(100).await.unwrap() == before,
        ),
        (
            JobStatus::Done,
            Some(70),
            format!("paddock: {detail}\n"),
            502,
            Value::from("forge_unavailable"),
            Value::from(detail.clone()),
            true
        )
    );
}

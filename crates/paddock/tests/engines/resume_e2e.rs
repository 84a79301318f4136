//! Follow-up turns with the real engines (`paddock run --attempt-after
//! JOB`): attempt 2 resumes attempt 1's own session (Codex `exec resume`,
//! Claude Code `--resume`), on attempt 1's branch, and the upstream sees
//! attempt 1's turn in its request; attempt 3, on another model, forks a
//! new session, and its event and closeout say why.

use paddock_protocol::{EventBody, JobStatus, Phase};
use paddock_test_support::prelude::*;

/// Attempt 1 answers twice (a shell command writing `one.md`, then a
/// closing message); a resumed attempt 2 is answered from turn 3 on,
/// because its request carries attempt 1's two answers; a new session
/// starts at turn 1 again.
const SCENARIO: &str = r#"
[[turn]]
text = "Writing one."
usage = { input = 100, output = 10 }
[[turn.action]]
type = "shell"
command = "echo one > one.md"

[[turn]]
text = "Done with one."
usage = { input = 120, output = 10 }

[[turn]]
text = "Writing two."
usage = { input = 140, output = 10 }
[[turn.action]]
type = "shell"
command = "echo two > two.md"

[[turn]]
text = "Done with two."
usage = { input = 160, output = 10 }
"#;

/// Another model the price table knows, for the fork.
fn other_model(engine: &str) -> &'static str {
    match engine {
        "codex" => "gpt-5.4",
        _ => "claude-opus-4-8",
    }
}

/// The job's events with the given phase: their details.
async fn details(home: &Home, job: &str, phase: Phase) -> Vec<Option<String>> {
    home.store()
        .await
        .events(job, 0)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.body {
            EventBody::Status { phase: p, detail } if p == phase => Some(detail),
            _ => None,
        })
        .collect()
}

/// The model requests the upstream answered (not Claude Code's warm-up).
fn model_requests(provider: &KeyedProvider) -> Vec<serde_json::Value> {
    provider
        .server
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/responses") || r.path.ends_with("/messages"))
        .map(|r| r.body)
        .collect()
}

async fn resumes_then_forks(engine: &str, rung: &str) {
    if paddock_test_support::skip::engine(engine).is_none()
        || (rung == "sandbox" && !sandbox_available())
    {
        return;
    }
    let home = Home::new();
    let repo = repo(home.path());
    let key = format!("sk-paddock-e2e-{}", std::process::id());
    let provider = KeyedProvider::start(&home, engine, SCENARIO, &key).await;
    let upstream = format!("[upstream]\n{}\n", provider.spec_lines());
    let spec = job(home.path(), engine, &repo, &upstream, None);
    on_rung(&spec, rung);
    let env = [("PADDOCK_E2E_KEY", key.as_str())];
    let run = |extra: Vec<String>| {
        let mut args = vec!["run".to_string(), "--json".to_string()];
        args.push(spec.to_str().unwrap().to_string());
        args.extend(extra);
        let home = &home;
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = home.paddock(&args, &env).await;
            let rec = record(&out);
            assert_eq!(
                rec.status,
                JobStatus::Done,
                "reason: {:?}\nstderr: {}",
                rec.reason,
                String::from_utf8_lossy(&out.stderr)
            );
            rec
        }
    };

    // Attempt 1: a new session, kept.
    let first = run(vec![]).await;
    assert_eq!(first.changed_files, vec!["one.md".to_string()]);
    let store = home.store().await;
    let session = store.engine_session(&first.id).await.unwrap().unwrap();
    let asked = model_requests(&provider).len();

    // Attempt 2: the same engine, model and rung resume it.
    let second = run(vec!["--attempt-after".into(), first.id.clone()]).await;
    assert_eq!(
        details(&home, &second.id, Phase::SessionResumed).await,
        vec![Some(format!(
            "resumed session {session} of attempt 1 (job {})",
            first.id
        ))]
    );
    // On attempt 1's branch: only its own change.
    assert_eq!(
        (
            second.attempt,
            second.base_ref.as_str(),
            second.changed_files.clone()
        ),
        (2, "paddock/T-1/1", vec!["two.md".to_string()])
    );
    // The upstream saw attempt 1's turn in attempt 2's first request.
    let requests = model_requests(&provider);
    let resumed = requests[asked].to_string();
    assert!(
        resumed.contains("Done with one.") && resumed.contains("echo one > one.md"),
        "{resumed}"
    );
    let asked = requests.len();

    // Attempt 3 on another model: a new session, and it says why.
    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(
        &spec,
        text.replace(
            &format!("model = \"{}\"", model(engine)),
            &format!("model = \"{}\"", other_model(engine)),
        ),
    )
    .unwrap();
    let third = run(vec!["--attempt-after".into(), second.id.clone()]).await;
    let reason = format!(
        "the model changed ({} → {})",
        model(engine),
        other_model(engine)
    );
    assert_eq!(
        details(&home, &third.id, Phase::SessionForked).await,
        vec![Some(format!(
            "a new session, not attempt 2's (job {}): {reason}",
            second.id
        ))]
    );
    assert_eq!(
        (
            third.attempt,
            third.base_ref.as_str(),
            third.changed_files.clone()
        ),
        (3, "main", vec!["one.md".to_string()])
    );
    let forked = model_requests(&provider)[asked].to_string();
    assert!(!forked.contains("Done with one."), "{forked}");
    let closeout = store.closeout(&third.id).await.unwrap().unwrap();
    assert!(
        closeout.contains(&format!(
            "Engine session forked: a new session, not attempt 2's (job {}): {reason}.",
            second.id
        )),
        "{closeout}"
    );
    assert_ne!(
        store.engine_session(&third.id).await.unwrap(),
        Some(session)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_resumes_its_session_and_forks_on_another_model() {
    resumes_then_forks("codex", "process").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_resumes_its_session_in_the_sandbox() {
    resumes_then_forks("codex", "sandbox").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_resumes_its_session_in_the_sandbox() {
    resumes_then_forks("claude", "sandbox").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_resumes_its_session_and_forks_on_another_model() {
    resumes_then_forks("claude", "process").await;
}

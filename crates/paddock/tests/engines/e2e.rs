//! End to end with the real engines: `paddock run` drives the pinned Codex
//! CLI and Claude Code against the scripted upstream (or a stand-in provider
//! behind the broker), with real git repositories and a real SQLite store.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use paddock_protocol::{CallStatus, EventBody, JobStatus, TokenUsage};
use paddock_test_support::prelude::*;

/// A shell command, a file write and an edit, then a closing message.
const WORK_SCENARIO: &str = r#"
[[turn]]
reasoning = "Look around first."
text = "Looking at the repository."
usage = { input = 1000, cached = 0, cache_write = 0, output = 20, reasoning = 8 }
[[turn.action]]
type = "shell"
command = "echo probe-output && ls"

[[turn]]
text = "Writing the notes."
usage = { input = 200, cached = 1000, output = 30 }
[[turn.action]]
type = "write"
path = "notes.md"
content = "first line\nsecond line\n"

[[turn]]
usage = { input = 150, cached = 1200, output = 25 }
[[turn.action]]
type = "edit"
path = "notes.md"
old = "second line"
new = "second line, edited"

[[turn]]
text = "Done: notes.md written and edited."
usage = { input = 100, cached = 1350, output = 15 }
"#;

/// The usage each turn of WORK_SCENARIO reports, as the ledger must record it.
fn work_usage(engine: &str) -> Vec<TokenUsage> {
    // Anthropic does not report reasoning tokens separately.
    let reasoning = if engine == "codex" { 8 } else { 0 };
    vec![
        TokenUsage {
            input_tokens: 1000,
            cached_input_tokens: 0,
            cache_write_tokens: 0,
            output_tokens: 20,
            reasoning_tokens: reasoning,
        },
        TokenUsage {
            input_tokens: 200,
            cached_input_tokens: 1000,
            cache_write_tokens: 0,
            output_tokens: 30,
            reasoning_tokens: 0,
        },
        TokenUsage {
            input_tokens: 150,
            cached_input_tokens: 1200,
            cache_write_tokens: 0,
            output_tokens: 25,
            reasoning_tokens: 0,
        },
        TokenUsage {
            input_tokens: 100,
            cached_input_tokens: 1350,
            cache_write_tokens: 0,
            output_tokens: 15,
            reasoning_tokens: 0,
        },
    ]
}

/// With `PADDOCK_RECORD_FIXTURES=1`, saves the engine's raw stdout as a
/// parser fixture (tests/fixtures/streams/<engine>-<version>/<name>.jsonl),
/// with the job's directory replaced by `/paddock/job`.
fn record_fixture(home: &Home, engine: &str, job_id: &str, name: &str) {
    if std::env::var("PADDOCK_RECORD_FIXTURES").as_deref() != Ok("1") {
        return;
    }
    let raw = std::fs::read_to_string(
        home.data()
            .join("artifacts")
            .join(job_id)
            .join("engine.jsonl"),
    )
    .unwrap();
    // The artifact is redacted: the checkout is `<workspace>`, the job's
    // directory `<job-dir>`; fixtures use the fixed paths the parsers expect.
    let job_dir = home.jobs().join(job_id).display().to_string();
    let normalized = raw
        .replace(&job_dir, "/paddock/job")
        .replace("<workspace>", "/paddock/job/work")
        .replace("<job-dir>", "/paddock/job");
    let version = match engine {
        "codex" => "codex-0.171.0",
        _ => "claude-2.1.197",
    };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/streams")
        .join(version);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.jsonl")), normalized).unwrap();
}

fn blob_id(content: &str) -> String {
    let out = std::process::Command::new("git")
        .args(["hash-object", "--stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write as _;
            c.stdin.take().unwrap().write_all(content.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim()[..7].to_string()
}

async fn runs_a_ticket_end_to_end(engine: &str, sandbox: bool) {
    let Some(bin) = paddock_test_support::prelude::engine(engine) else {
        return;
    };
    let _ = bin;
    if sandbox && !paddock_test_support::prelude::sandbox_available() {
        return;
    }
    let home = Home::new();
    let repo = repo(home.path());
    let spec = job(home.path(), engine, &repo, SCRIPTED, Some(WORK_SCENARIO));
    // The sandbox variants run on the default rung (`auto`: the sandbox
    // wherever one starts); the others ask for `process`.
    if !sandbox {
        paddock_test_support::prelude::on_rung(&spec, "process");
    }
    fast_retries(&spec);
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    assert_eq!(
        rec.status,
        JobStatus::Done,
        "reason: {:?}\nstderr: {}",
        rec.reason,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(rec.changed_files, vec!["notes.md".to_string()]);

    // The patch is exactly the scenario's change.
    let patch = std::fs::read_to_string(rec.patch_path.as_ref().unwrap()).unwrap();
    let expected = format!(
        "diff --git a/notes.md b/notes.md\nnew file mode 100644\nindex 0000000..{}\n--- /dev/null\n+++ b/notes.md\n@@ -0,0 +1,2 @@\n+first line\n+second line, edited\n",
        blob_id("first line\nsecond line, edited\n")
    );
    assert_eq!(patch, expected);

    // Events: text, tool_call, tool_result, file_change and usage, in order.
    let store = home.store().await;
    let events = store.events(&rec.id, 0).await.unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (1..=events.len() as u64).collect::<Vec<_>>(),
        "dense seq"
    );
    let kinds: Vec<&str> = events.iter().map(|e| e.body.kind()).collect();
    let mut want = ["text", "tool_call", "tool_result", "file_change", "usage"]
        .into_iter()
        .peekable();
    for k in &kinds {
        if want.peek() == Some(k) {
            want.next();
        }
    }
    assert_eq!(want.next(), None, "kinds in order not found in {kinds:?}");
    assert!(events.iter().any(|e| matches!(&e.body, EventBody::ToolResult { output, .. } if output.contains("probe-output"))));
    assert!(events
        .iter()
        .any(|e| matches!(&e.body, EventBody::FileChange { path, .. } if path == "notes.md")));
    assert!(!events
        .iter()
        .any(|e| matches!(&e.body, EventBody::Error { fatal: true, .. })));

    // The ledger equals the scenario's usage exactly, call by call.
    let calls = store.model_calls(&rec.id).await.unwrap();
    let tokens: Vec<TokenUsage> = calls.iter().map(|c| c.tokens).collect();
    assert_eq!(tokens, work_usage(engine));
    assert!(calls
        .iter()
        .all(|c| c.status == CallStatus::Ok && !c.estimated && c.provider == "scripted"));
    let mut sum = TokenUsage::default();
    for t in &tokens {
        sum.add(t);
    }
    assert_eq!(rec.tokens, sum);
    assert_eq!(
        rec.cost_micros,
        calls.iter().map(|c| c.cost_micros).sum::<i64>()
    );
    assert!(rec.cost_micros > 0);

    if !sandbox {
        record_fixture(&home, engine, &rec.id, "ticket");
    }
    assert_eq!(rec.isolation, if sandbox { "sandbox" } else { "process" });

    // The workspace is gone; the job is listed.
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
    let listed = home.paddock(&["jobs", "--json"], &[]).await;
    assert!(String::from_utf8_lossy(&listed.stdout).contains(&rec.id));
    let ev = home.paddock(&["events", &rec.id, "--json"], &[]).await;
    assert_eq!(
        String::from_utf8_lossy(&ev.stdout).lines().count(),
        events.len()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_runs_a_ticket_end_to_end() {
    runs_a_ticket_end_to_end("codex", false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_runs_a_ticket_end_to_end() {
    runs_a_ticket_end_to_end("claude", false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_runs_a_ticket_end_to_end_in_the_sandbox() {
    runs_a_ticket_end_to_end("codex", true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_runs_a_ticket_end_to_end_in_the_sandbox() {
    runs_a_ticket_end_to_end("claude", true).await;
}

/// The first turn writes a file, the second fails as given.
fn failing_scenario(failure: &str) -> String {
    format!(
        r#"
[[turn]]
text = "Writing first."
usage = {{ input = 100, output = 10 }}
[[turn.action]]
type = "write"
path = "partial.txt"
content = "partial work\n"

[[turn]]
{failure}
"#
    )
}

async fn upstream_failure_fails_the_job(engine: &str, failure: &str, message: &str) {
    upstream_failure_fails_the_job_on(engine, failure, message, false).await;
}

async fn upstream_failure_fails_the_job_on(
    engine: &str,
    failure: &str,
    message: &str,
    sandbox: bool,
) {
    let Some(_) = paddock_test_support::prelude::engine(engine) else {
        return;
    };
    if sandbox && !paddock_test_support::prelude::sandbox_available() {
        return;
    }
    let home = Home::new();
    let repo = repo(home.path());
    let spec = job(
        home.path(),
        engine,
        &repo,
        SCRIPTED,
        Some(&failing_scenario(failure)),
    );
    // The sandbox variants run on the default rung (`auto`: the sandbox
    // wherever one starts); the others ask for `process`.
    if !sandbox {
        paddock_test_support::prelude::on_rung(&spec, "process");
    }
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    assert_eq!(
        rec.status,
        JobStatus::Failed,
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1));
    let store = home.store().await;
    let events = store.events(&rec.id, 0).await.unwrap();
    let errors: Vec<&String> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::Error { message, .. } => Some(message),
            _ => None,
        })
        .collect();
    assert!(
        errors.iter().any(|m| m.contains(message)),
        "no error event carries {message:?}: {errors:?}"
    );
    let name = message.split(':').next().unwrap_or("failure").to_string();
    if !sandbox {
        record_fixture(&home, engine, &rec.id, &name);
    }
    // The workspace is gone; the patch artifact and the events are kept.
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
    let patch = std::fs::read_to_string(rec.patch_path.as_ref().unwrap()).unwrap();
    assert!(patch.contains("+partial work"), "patch: {patch}");
    assert_eq!(rec.changed_files, vec!["partial.txt".to_string()]);
    assert!(events.iter().any(|e| e.body.kind() == "artifact_summary"));
    // The failed call has its ledger row, with the upstream's message; a
    // 500 is retried by the broker (4 attempts, 4 rows). (After a broken
    // stream Claude Code retries once without streaming, which the scenario
    // answers with the same failure as an HTTP 500: 4 more rows.)
    let calls = store.model_calls(&rec.id).await.unwrap();
    let failed_rows = match (engine, failure) {
        (_, E500) | ("claude", MID) => 4,
        _ => 1,
    } + usize::from(engine == "claude" && failure == MID);
    assert_eq!(calls.len(), 1 + failed_rows, "{calls:?}");
    assert_eq!(calls[0].status, CallStatus::Ok);
    for c in &calls[1..] {
        assert_ne!(c.status, CallStatus::Ok, "{c:?}");
        assert!(c.error.as_deref().unwrap_or("").contains(message), "{c:?}");
    }
}

/// `[broker.retry]` with 1 ms backoff, so that retried failures fail fast.
fn fast_retries(spec: &std::path::Path) {
    let mut text = std::fs::read_to_string(spec).unwrap();
    text.push_str("\n[broker.retry]\nbase_delay_ms = 1\nmax_delay_ms = 50\n");
    std::fs::write(spec, text).unwrap();
}

/// A job whose second call is rate limited once (429, `Retry-After: 1`)
/// ends `done`: the broker waits and retries, the engine never sees the
/// 429, and the ledger has a row for every attempt.
async fn a_rate_limit_is_retried_by_the_broker(engine: &str) {
    let Some(_) = paddock_test_support::prelude::engine(engine) else {
        return;
    };
    let home = Home::new();
    let repo = repo(home.path());
    let scenario = r#"
[[turn]]
text = "Writing."
usage = { input = 100, output = 10 }
[[turn.action]]
type = "write"
path = "retried.txt"
content = "after a 429\n"

[[turn]]
text = "Done after a rate limit."
usage = { input = 120, output = 5 }
transient = { status = 429, message = "scripted-429: rate limited", retry_after = "1" }
"#;
    let spec = job(home.path(), engine, &repo, SCRIPTED, Some(scenario));
    paddock_test_support::prelude::on_rung(&spec, "process");
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    assert_eq!(
        rec.status,
        JobStatus::Done,
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(rec.changed_files, vec!["retried.txt".to_string()]);
    let calls = home.store().await.model_calls(&rec.id).await.unwrap();
    let rows: Vec<_> = calls
        .iter()
        .map(|c| (c.seq, c.status, c.http_status, c.error.clone()))
        .collect();
    assert_eq!(
        rows,
        vec![
            (1, CallStatus::Ok, Some(200), None),
            (
                2,
                CallStatus::HttpError,
                Some(429),
                Some(
                    "scripted-429: rate limited (attempt 1 of 4; the broker retries in 1000 ms)"
                        .into()
                )
            ),
            (3, CallStatus::Ok, Some(200), None),
        ]
    );
    assert_eq!(calls[1].cost_micros, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_job_survives_a_rate_limit() {
    a_rate_limit_is_retried_by_the_broker("codex").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_job_survives_a_rate_limit() {
    a_rate_limit_is_retried_by_the_broker("claude").await;
}

const E400: &str = "error = { status = 400, message = \"scripted-400: the request is invalid\" }";
const E500: &str = "error = { status = 500, message = \"scripted-500: upstream exploded\" }";
const MID: &str = "text = \"half an answer\"\nstream_error = { message = \"scripted-mid: stream failed midway\" }";

#[tokio::test(flavor = "multi_thread")]
async fn codex_fails_on_http_400() {
    upstream_failure_fails_the_job("codex", E400, "scripted-400: the request is invalid").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_fails_on_http_500() {
    upstream_failure_fails_the_job("codex", E500, "scripted-500: upstream exploded").await;
}

/// Codex words any 5xx as "We’re currently experiencing high demand…":
/// the job's reason adds what the upstream answered its last model call,
/// so that the cause (here the scenario's 500; a provider's own message,
/// or a scenario run out of turns) is read where the reason is (before,
/// only in the warning events).
#[tokio::test(flavor = "multi_thread")]
async fn codex_http_500_reason_carries_the_upstreams_answer() {
    if paddock_test_support::prelude::engine("codex").is_none() {
        return;
    }
    let home = Home::new();
    let repo = repo(home.path());
    let spec = job(
        home.path(),
        "codex",
        &repo,
        SCRIPTED,
        Some(&failing_scenario(E500)),
    );
    paddock_test_support::prelude::on_rung(&spec, "process");
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    let last = home
        .store()
        .await
        .model_calls(&rec.id)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.seq)
        .max()
        .unwrap();
    assert_eq!(
        (rec.status, rec.reason),
        (
            JobStatus::Failed,
            Some(format!(
                "We’re currently experiencing high demand, which may cause temporary errors. (the \
                 upstream's answer to model call {last} to scripted (HTTP 500): scripted-500: \
                 upstream exploded)"
            ))
        )
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_fails_on_mid_stream_failure() {
    upstream_failure_fails_the_job("codex", MID, "scripted-mid: stream failed midway").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_fails_on_mid_stream_failure_in_the_sandbox() {
    upstream_failure_fails_the_job_on("codex", MID, "scripted-mid: stream failed midway", true)
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_fails_on_http_500_in_the_sandbox() {
    upstream_failure_fails_the_job_on("claude", E500, "scripted-500: upstream exploded", true)
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_fails_on_http_400() {
    upstream_failure_fails_the_job("claude", E400, "scripted-400: the request is invalid").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_fails_on_http_500() {
    upstream_failure_fails_the_job("claude", E500, "scripted-500: upstream exploded").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_fails_on_mid_stream_failure() {
    upstream_failure_fails_the_job("claude", MID, "scripted-mid: stream failed midway").await;
}

/// The engine's environment (its parent's, from the shell it runs) and the
/// shell's own environment, written into the checkout.
const ENV_PROBE: &str = r#"
[[turn]]
usage = { input = 10, output = 5 }
[[turn.action]]
type = "shell"
command = "tr '\\0' '\\n' < /proc/$PPID/environ > engine-env.txt; env > shell-env.txt; echo probed"

[[turn]]
text = "Probed."
usage = { input = 12, output = 3 }
"#;

async fn provider_key_never_reaches_the_engine(engine: &str, sandbox: bool) {
    key_never_reaches_the_engine(engine, sandbox, "").await;
}

/// `upstream_extra` adds lines to the `[upstream]` table (e.g. the key
/// header of an OpenAI-compatible upstream).
async fn key_never_reaches_the_engine(engine: &str, sandbox: bool, upstream_extra: &str) {
    let Some(_) = paddock_test_support::prelude::engine(engine) else {
        return;
    };
    if sandbox && !paddock_test_support::prelude::sandbox_available() {
        return;
    }
    let home = Home::new();
    let repo = repo(home.path());
    let key = format!("sk-paddock-e2e-{}", std::process::id());
    // A stand-in provider that answers only when the real key arrives.
    let provider = KeyedProvider::start(&home, engine, ENV_PROBE, &key).await;
    let upstream = format!(
        "[upstream]
{}
{upstream_extra}",
        provider.spec_lines()
    );
    let spec = job(home.path(), engine, &repo, &upstream, None);
    // The sandbox variants run on the default rung (`auto`: the sandbox
    // wherever one starts); the others ask for `process`.
    if !sandbox {
        paddock_test_support::prelude::on_rung(&spec, "process");
    }
    let out = home
        .paddock(
            &["run", "--json", "--keep", spec.to_str().unwrap()],
            &[("PADDOCK_E2E_KEY", &key)],
        )
        .await;
    let rec = record(&out);
    assert_eq!(rec.status, JobStatus::Done, "reason: {:?}", rec.reason);
    // The key reached the provider (it refuses calls without it).
    let requests = provider.server.requests();
    assert_eq!(requests.len(), 2);
    if upstream_extra.contains("api-key") {
        for r in &requests {
            assert_eq!(r.headers["api-key"], key.as_str());
            assert!(!r.headers.contains_key("authorization"));
        }
    }

    // The probe ran and captured the engine's own environment: it holds the
    // worthless job token, never the key.
    let work = home.jobs().join(&rec.id).join("work");
    let engine_env = std::fs::read_to_string(work.join("engine-env.txt")).unwrap();
    let token_var = if engine == "codex" {
        "PADDOCK_JOB_TOKEN=pdk-job-"
    } else {
        "ANTHROPIC_API_KEY=pdk-job-"
    };
    assert!(engine_env.contains(token_var), "engine env: {engine_env}");
    assert!(!engine_env.contains(&key));
    let shell_env = std::fs::read_to_string(work.join("shell-env.txt")).unwrap();
    assert!(shell_env.contains("HOME="));

    // Nowhere under the job directory, the artifacts, the database, or
    // paddock's own output.
    for dir in [home.jobs(), home.data()] {
        assert_eq!(
            files_containing(&dir, key.as_bytes()),
            Vec::<std::path::PathBuf>::new()
        );
    }
    assert!(!String::from_utf8_lossy(&out.stdout).contains(&key));
    assert!(!String::from_utf8_lossy(&out.stderr).contains(&key));
    let store = home.store().await;
    let spec_json = store.job_spec(&rec.id).await.unwrap().unwrap();
    assert!(spec_json.contains("env:PADDOCK_E2E_KEY"));
    assert!(!spec_json.contains(&key));
    // Not in any event or ledger row either (the files scan above covers the
    // database file; this reads the rows back through the store).
    for e in store.events(&rec.id, 0).await.unwrap() {
        assert!(!serde_json::to_string(&e).unwrap().contains(&key));
    }
    for c in store.model_calls(&rec.id).await.unwrap() {
        assert!(!format!("{c:?}").contains(&key));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_never_sees_an_azure_style_api_key() {
    key_never_reaches_the_engine("codex", false, "key_header = \"api-key\"\n").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_never_sees_the_provider_key() {
    provider_key_never_reaches_the_engine("codex", false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_never_sees_the_provider_key() {
    provider_key_never_reaches_the_engine("claude", false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_never_sees_the_provider_key_in_the_sandbox() {
    provider_key_never_reaches_the_engine("codex", true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_never_sees_the_provider_key_in_the_sandbox() {
    provider_key_never_reaches_the_engine("claude", true).await;
}

/// An engine of another version than the pinned one runs, with a warning
/// event naming the pin and the install command (and its line in the
/// progress); the pinned engine gets none.
#[tokio::test(flavor = "multi_thread")]
async fn another_engine_version_is_a_warning_not_a_failure() {
    let Some(codex) = paddock_test_support::prelude::engine("codex") else {
        return;
    };
    let home = Home::new();
    let repo = repo(home.path());
    let dir = home.path().join("other-codex");
    std::fs::create_dir_all(&dir).unwrap();
    let wrapper = dir.join("codex");
    paddock_test_support::script::write_script(&wrapper, &format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'codex-cli 0.1.0'; exit 0; fi\nexec '{}' \"$@\"\n",
            codex.display()
        ));
    let warnings = |events: &[paddock_protocol::AgentEvent]| -> Vec<String> {
        events
            .iter()
            .filter_map(|e| match &e.body {
                EventBody::Error {
                    message,
                    fatal: false,
                    ..
                } if message.starts_with("engine codex:") => Some(message.clone()),
                _ => None,
            })
            .collect()
    };
    for (binary, pinned) in [(wrapper.clone(), false), (codex.clone(), true)] {
        let spec = job(
            home.path(),
            "codex",
            &repo,
            SCRIPTED,
            Some("[[turn]]\ntext = \"Done.\"\n"),
        );
        on_rung(&spec, "process");
        let text = std::fs::read_to_string(&spec).unwrap().replace(
            "[engine]\n",
            &format!("[engine]\nbinary = \"{}\"\n", binary.display()),
        );
        std::fs::write(&spec, text).unwrap();
        let out = home
            .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
            .await;
        let rec = record(&out);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(rec.status, JobStatus::Done, "{stderr}");
        let events = home.store().await.events(&rec.id, 0).await.unwrap();
        if pinned {
            assert_eq!(warnings(&events), Vec::<String>::new());
            continue;
        }
        let hint = paddock::engines::codex::PIN.install_hint();
        let warning = format!(
            "engine codex: {} is `codex-cli 0.1.0`; Paddock is tested with @openai/codex 0.171.0: {hint}",
            wrapper.display()
        );
        assert_eq!(warnings(&events), vec![warning]);
        assert!(
            stderr.contains(&format!(
                "⚠ warning paddock: engine codex: {} is `codex-cli 0.1.0`",
                wrapper.display()
            )),
            "{stderr}"
        );
    }
}

//! Budgets end to end: the real `paddock` binary runs the real Codex CLI and
//! Claude Code against the scripted upstream until a ceiling is spent; the
//! job ends `held` (exit code 3) with a `policy` event and a clear message,
//! and a ticket whose budget earlier attempts spent is held before its
//! engine starts.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use paddock_protocol::{CallStatus, EventBody, JobStatus, TokenUsage};
use paddock_test_support::prelude::*;

/// A first answer that costs more than the job's $0.20 budget (100 000 input
/// tokens), then a second turn the broker must refuse.
const EXPENSIVE: &str = r#"
[[turn]]
text = "Listing first."
usage = { input = 100000, output = 20 }
[[turn.action]]
type = "shell"
command = "ls"

[[turn]]
text = "This answer is never paid for."
"#;

/// These tests hold jobs by what their calls cost, not by their worst case:
/// the scripted usage (100 000 input tokens) is far above what the broker
/// estimates from the request (its bytes / 4), the overshoot docs/broker.md
/// names. A price table merged over the shipped one caps the test models'
/// output at 100 tokens, so a call's worst case (input estimate + 100
/// output tokens) fits the budgets and the first call is admitted; without
/// it, Codex's uncapped calls (128 000 output tokens of gpt-5.5, $3.84)
/// would be refused before they run (tests/it/broker.rs checks that).
/// The table goes in the home's config file (`prices = …`), so it holds
/// for this home's `paddock` only, not for other tests of the binary.
fn small_outputs(home: &Home) {
    let dir = home.path().join("config").join("paddock");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), "prices = \"small-outputs.toml\"\n").unwrap();
    let file = dir.join("small-outputs.toml");
    std::fs::write(
        &file,
        r#"version = "small-outputs"
[models."gpt-5.5"]
input = "5"
cached_input = "0.50"
output = "30"
max_output = 100
[models."claude-sonnet-4-5"]
input = "3"
cached_input = "0.30"
cache_write = "3.75"
output = "15"
max_output = 100
"#,
    )
    .unwrap();
}

fn with_budget(home: &Home, spec: &std::path::Path, budget: &str) {
    small_outputs(home);
    let mut text = std::fs::read_to_string(spec).unwrap();
    text.push_str(&format!("\n[budget]\n{budget}\n"));
    std::fs::write(spec, text).unwrap();
}

fn policies(events: &[paddock_protocol::AgentEvent]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::Policy { rule, message } => Some((rule.clone(), message.clone())),
            _ => None,
        })
        .collect()
}

/// The first call: Codex's (Responses) usage arrives only with
/// `response.completed`, so its call completes and the next is refused;
/// Claude Code's (Messages) `message_start` already reports the 100 000
/// input tokens, so the broker cuts that stream at once (an estimated row
/// with what was seen) and refuses the retries.
struct FirstCall {
    status: CallStatus,
    estimated: bool,
    output_tokens: u64,
}

async fn held_at_its_budget(engine: &str, first_cost: i64, first: FirstCall) {
    let Some(_) = paddock_test_support::prelude::engine(engine) else {
        return;
    };
    let home = Home::new();
    let repo = repo(home.path());
    let spec = job(home.path(), engine, &repo, SCRIPTED, Some(EXPENSIVE));
    with_budget(&home, &spec, "max_usd = 0.20");
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    let message = format!(
        "paddock broker: job budget spent (${}.{:06} of $0.200000); the job is held",
        first_cost / 1_000_000,
        first_cost % 1_000_000
    );
    assert_eq!(
        (rec.status, rec.reason.as_deref(), out.status.code()),
        (JobStatus::Held, Some(message.as_str()), Some(3)),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let store = home.store().await;
    let events = store.events(&rec.id, 0).await.unwrap();
    // Every refusal is a policy event with the message.
    let refusals = policies(&events)
        .into_iter()
        .filter(|(_, m)| m.contains("spent"))
        .collect::<Vec<_>>();
    assert!(!refusals.is_empty());
    assert!(
        refusals
            .iter()
            .all(|p| p == &("budget".to_string(), message.clone())),
        "{refusals:?}"
    );
    // The engine itself was told why: its own output carries the message.
    let raw = std::fs::read_to_string(
        home.data()
            .join("artifacts")
            .join(&rec.id)
            .join("engine.jsonl"),
    )
    .unwrap();
    assert!(raw.contains("job budget spent"), "engine output: {raw}");
    // The ledger: the first call exactly as the scenario reported it, then
    // only refusals.
    let calls = store.model_calls(&rec.id).await.unwrap();
    assert_eq!(
        (
            calls[0].status,
            calls[0].estimated,
            calls[0].tokens,
            calls[0].cost_micros
        ),
        (
            first.status,
            first.estimated,
            TokenUsage {
                input_tokens: 100_000,
                output_tokens: first.output_tokens,
                ..TokenUsage::default()
            },
            first_cost
        )
    );
    if first.status == CallStatus::StreamError {
        let cut = format!(
            "paddock broker: job budget reached (${}.{:06} of $0.200000 with the calls under way): the response was cut; the job is held",
            first_cost / 1_000_000,
            first_cost % 1_000_000
        );
        assert_eq!(calls[0].error.as_deref(), Some(cut.as_str()));
        assert_eq!(policies(&events)[0], ("budget".to_string(), cut));
    }
    assert!(calls.len() >= 2);
    for c in &calls[1..] {
        assert_eq!(
            (c.status, c.http_status, c.error.as_deref(), c.cost_micros),
            (CallStatus::Refused, Some(402), Some(message.as_str()), 0)
        );
    }
    assert_eq!(rec.cost_micros, first_cost);
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_job_is_held_at_its_budget() {
    // gpt-5.5: 100 000 × $5/M + 20 × $30/M.
    held_at_its_budget(
        "codex",
        500_600,
        FirstCall {
            status: CallStatus::Ok,
            estimated: false,
            output_tokens: 20,
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_job_is_held_at_its_budget() {
    // claude-sonnet-4-5: 100 000 × $3/M + 1 output token (message_start) × $15/M.
    held_at_its_budget(
        "claude",
        300_015,
        FirstCall {
            status: CallStatus::StreamError,
            estimated: true,
            output_tokens: 1,
        },
    )
    .await;
}

/// The ticket's budget spans attempts: once attempt 1 spent it, attempt 2
/// is held at admission, without starting its engine.
#[tokio::test(flavor = "multi_thread")]
async fn a_ticket_budget_spent_by_earlier_attempts_holds_the_next() {
    let Some(_) = paddock_test_support::prelude::engine("codex") else {
        return;
    };
    let home = Home::new();
    let repo = repo(home.path());
    let scenario = "[[turn]]\ntext = \"Done.\"\nusage = { input = 20000, output = 100 }\n";
    let spec = job(home.path(), "codex", &repo, SCRIPTED, Some(scenario));
    with_budget(
        &home,
        &spec,
        "ticket_max_usd = 0.10\nproject_daily_max_usd = 1.0",
    );
    let first = record(
        &home
            .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
            .await,
    );
    // 20 000 × $5/M + 100 × $30/M.
    assert_eq!(
        (first.status, first.cost_micros),
        (JobStatus::Done, 103_000)
    );
    let third_out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let third = record(&third_out);
    let message =
        "paddock broker: ticket budget (across attempts) spent ($0.103000 of $0.100000); the job is held";
    assert_eq!(
        (
            third.status,
            third.reason.as_deref(),
            third.model_calls,
            third_out.status.code()
        ),
        (JobStatus::Held, Some(message), 0, Some(3))
    );
    let store = home.store().await;
    let events = store.events(&third.id, 0).await.unwrap();
    assert_eq!(
        policies(&events),
        vec![("budget".to_string(), message.to_string())]
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(&e.body, EventBody::Status { phase, .. } if *phase == paddock_protocol::Phase::Launching)),
        "the engine must not start"
    );
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
}

/// `paddock usage --json` over real jobs: a ticket bounced once then done,
/// and a held job, rolled up with the ledger's exact figures.
#[tokio::test(flavor = "multi_thread")]
async fn usage_rolls_up_real_jobs() {
    let Some(_) = paddock_test_support::prelude::engine("codex") else {
        return;
    };
    let home = Home::new();
    let repo = repo(home.path());
    let scenario = "[[turn]]\ntext = \"Done.\"\nusage = { input = 1000, cached = 200, output = 100, reasoning = 7 }\n";
    let spec = job(home.path(), "codex", &repo, SCRIPTED, Some(scenario));
    let first = record(
        &home
            .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
            .await,
    );
    // A second attempt of the same ticket, then a rerun of that attempt
    // held by its budget: two attempts (a rerun is not a bounce).
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        "description = \"A test.\"\n",
        "description = \"A test.\"\ntype = \"bug\"\n[[ticket.prior_attempts]]\nattempt = 1\noutcome = \"bounced\"\nsummary = \"Wrong file.\"\n",
    );
    std::fs::write(&spec, &text).unwrap();
    let second = record(
        &home
            .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
            .await,
    );
    with_budget(&home, &spec, "max_usd = 0.0");
    let third = record(
        &home
            .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
            .await,
    );
    assert_eq!(
        (first.status, second.status, third.status),
        (JobStatus::Done, JobStatus::Done, JobStatus::Held)
    );
    let out = home.paddock(&["usage", "--json"], &[]).await;
    assert_eq!(out.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Per call: 1000 × $5/M + 200 × $0.5/M + 100 × $30/M = 8100 µ$.
    assert_eq!(
        report["total"],
        serde_json::json!({
            "key": "all", "calls": 2,
            "tokens": {"input_tokens": 2000, "cached_input_tokens": 400, "cache_write_tokens": 0,
                       "output_tokens": 200, "reasoning_tokens": 14},
            "cost_micros": 16_200, "jobs": 3, "tickets": 1, "done_tickets": 1,
            "cost_per_ticket_micros": 16_200, "bounce_rate": 2.0,
            "time_to_done_ms": report["total"]["time_to_done_ms"],
        })
    );
    assert!(report["total"]["time_to_done_ms"].as_u64().unwrap() > 0);
    let keys = |dim: &str| -> Vec<(String, i64)> {
        report[dim]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["key"].as_str().unwrap().to_string(),
                    r["cost_micros"].as_i64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(
        keys("by_task_type"),
        vec![("bug".into(), 8_100), ("chore".into(), 8_100)]
    );
    assert_eq!(keys("by_engine"), vec![("codex".into(), 16_200)]);
    assert_eq!(keys("by_model"), vec![("gpt-5.5".into(), 16_200)]);
    assert_eq!(keys("by_project"), vec![("tests".into(), 16_200)]);
    // The text form has a table per dimension.
    let text = home.paddock(&["usage"], &[]).await;
    let text = String::from_utf8_lossy(&text.stdout);
    for title in ["total", "day", "project", "task type", "engine", "model"] {
        assert!(text.lines().any(|l| l.starts_with(title)), "{text}");
    }
}

/// The project's daily budget spans tickets: once one ticket's job spent
/// it, a job of another ticket in the same project is held at admission.
#[tokio::test(flavor = "multi_thread")]
async fn a_project_daily_budget_spans_tickets() {
    let Some(_) = paddock_test_support::prelude::engine("codex") else {
        return;
    };
    let home = Home::new();
    let repo = repo(home.path());
    let scenario = "[[turn]]\ntext = \"Done.\"\nusage = { input = 20000, output = 100 }\n";
    let spec = job(home.path(), "codex", &repo, SCRIPTED, Some(scenario));
    with_budget(&home, &spec, "project_daily_max_usd = 0.10");
    let first = record(
        &home
            .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
            .await,
    );
    assert_eq!(
        (first.status, first.cost_micros),
        (JobStatus::Done, 103_000)
    );
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("id = \"T-1\"", "id = \"T-2\"");
    std::fs::write(&spec, text).unwrap();
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let second = record(&out);
    let message =
        "paddock broker: project daily budget spent ($0.103000 of $0.100000); the job is held";
    assert_eq!(
        (
            second.ticket_id.as_str(),
            second.status,
            second.reason.as_deref(),
            out.status.code()
        ),
        ("T-2", JobStatus::Held, Some(message), Some(3))
    );
    let events = home.store().await.events(&second.id, 0).await.unwrap();
    assert_eq!(
        policies(&events),
        vec![("budget".to_string(), message.to_string())]
    );
}

/// Two jobs of one ticket at the same time (two `paddock run` processes,
/// the real Codex CLI): while job A's agent waits in a command, job B
/// spends the ticket's budget; A's next call is refused and A is held,
/// because a running job re-reads what the others spent.
#[tokio::test(flavor = "multi_thread")]
async fn jobs_running_side_by_side_share_the_ticket_budget() {
    let Some(_) = paddock_test_support::prelude::engine("codex") else {
        return;
    };
    let home = Home::new();
    let repo = repo(home.path());
    let spec_in = |name: &str, scenario: &str| {
        let dir = home.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let spec = job(&dir, "codex", &repo, SCRIPTED, Some(scenario));
        with_budget(&home, &spec, "ticket_max_usd = 0.10");
        spec
    };
    // A (on the `process` rung, so that its agent sees the test's marker):
    // a cheap first call, then a command that waits until B is done (at
    // most 60 s) and one re-read period more, then a second call.
    let marker = home.path().join("b-done");
    let a = spec_in(
        "a",
        &format!(
            r#"
[[turn]]
text = "Waiting first."
usage = {{ input = 1000, output = 10 }}
[[turn.action]]
type = "shell"
command = "i=0; while [ ! -e {marker} ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; sleep 1"

[[turn]]
text = "This answer is never paid for."
"#,
            marker = marker.display()
        ),
    );
    on_rung(&a, "process");
    // B: one call that spends the ticket's $0.10 (20 000 × $5/M + 100 × $30/M).
    let b = spec_in(
        "b",
        "[[turn]]\ntext = \"Done.\"\nusage = { input = 20000, output = 100 }\n",
    );
    let run_a = home
        .command(&["run", "--json", a.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // B runs once A has made its first call (A is then waiting in its
    // command).
    let store = home.store().await;
    let mut a_called = false;
    for _ in 0..600 {
        if let Some(a_job) = store.jobs(10).await.unwrap().first() {
            if !store.model_calls(&a_job.id).await.unwrap().is_empty() {
                a_called = true;
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(a_called, "job A made no call");
    let b_out = home
        .paddock(&["run", "--json", b.to_str().unwrap()], &[])
        .await;
    std::fs::write(&marker, "").unwrap();
    let b_rec = record(&b_out);
    assert_eq!(
        (b_rec.status, b_rec.cost_micros),
        (JobStatus::Done, 103_000),
        "{}",
        String::from_utf8_lossy(&b_out.stderr)
    );
    let a_out = run_a.wait_with_output().await.unwrap();
    let a_rec = record(&a_out);
    // A's own first call: 1 000 × $5/M + 10 × $30/M.
    let message = "paddock broker: ticket budget (across attempts) spent ($0.108300 of $0.100000); the job is held";
    assert_eq!(
        (
            a_rec.status,
            a_rec.reason.as_deref(),
            a_rec.cost_micros,
            a_out.status.code()
        ),
        (JobStatus::Held, Some(message), 5_300, Some(3)),
        "{}",
        String::from_utf8_lossy(&a_out.stderr)
    );
}

/// The issue's case: `max_usd = 0.006` once ended held at $0.0509 because
/// the first call was always admitted. Now a call is admitted only if its
/// worst case fits: Codex sends no output cap, so its worst case is gpt-5.5's
/// 128 000 output tokens ($3.84), the call is refused before it runs, and
/// the job is held having spent nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_tiny_budget_refuses_a_call_whose_worst_case_does_not_fit() {
    let Some(_) = paddock_test_support::prelude::engine("codex") else {
        return;
    };
    let home = Home::new();
    let repo = repo(home.path());
    let spec = job(home.path(), "codex", &repo, SCRIPTED, Some(EXPENSIVE));
    with_budget(&home, &spec, "max_usd = 0.006");
    // The shipped table, whatever PADDOCK_PRICES the other tests set.
    let shipped = home.path().join("shipped.toml");
    std::fs::write(&shipped, "version = \"2026-11-30\"\n").unwrap();
    let out = home
        .paddock(
            &[
                "run",
                "--json",
                "--prices",
                shipped.to_str().unwrap(),
                spec.to_str().unwrap(),
            ],
            &[],
        )
        .await;
    let rec = record(&out);
    assert_eq!(
        (rec.status, rec.cost_micros, out.status.code()),
        (JobStatus::Held, 0, Some(3)),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reason = rec.reason.unwrap();
    assert!(
        reason.starts_with("paddock broker: job budget: this call could cost up to $3.8")
            && reason.ends_with(
                "more than the $0.006000 left ($0.000000 of $0.006000 spent); the job is held"
            ),
        "{reason}"
    );
    let calls = home.store().await.model_calls(&rec.id).await.unwrap();
    assert!(calls
        .iter()
        .all(|c| c.status == CallStatus::Refused && c.cost_micros == 0));
}

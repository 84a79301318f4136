//! A job through the runner, its engine making a model call through its
//! broker to the scripted upstream, shows in `/metrics`: the job's end and
//! duration, the call's tokens, cost and latency, the engine's start. The
//! recorder is global to the test binary, so the job has a project and a
//! model of its own and only its series are compared whole.

use std::sync::Arc;

use super::*;

const MODEL: &str = "metrics-probe-model";
const PROJECT: &str = "metrics-probe";

/// The lines of `text` whose series name starts with `name` and whose
/// labels mention `marker`, sorted (series come in no set order).
fn series<'a>(text: &'a str, name: &str, marker: &str) -> Vec<&'a str> {
    let mut lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(name) && l.contains(marker))
        .collect();
    lines.sort();
    lines
}

#[tokio::test]
async fn a_job_and_its_model_call_are_in_the_rendered_metrics() {
    let metrics = crate::server::metrics::install().unwrap();
    let host = Host::new().await;
    std::fs::write(
        host.root().join("scenario.toml"),
        "[[turn]]\ntext = \"hi\"\nusage = { input = 1000, output = 200 }\n",
    )
    .unwrap();
    let mut spec = host.spec();
    spec.ticket.project = PROJECT.into();
    spec.engine.model = MODEL.into();
    let rung = Arc::new(FakeRung::new(FakeEngine {
        stdout: DONE.iter().map(|s| s.to_string()).collect(),
        calls: vec![format!(
            r#"{{"model":"{MODEL}","input":"hi","stream":true}}"#
        )],
        ..FakeEngine::default()
    }));
    // $2 per million input tokens, $10 per million output: 1000 in and
    // 200 out cost 2000 + 2000 micro-dollars.
    let prices = host.root().join("prices.toml");
    std::fs::write(
        &prices,
        format!("version = \"metrics-probe\"\n[models.\"{MODEL}\"]\ninput = \"2\"\noutput = \"10\"\nmax_output = 1000\n"),
    )
    .unwrap();
    let mut runner = host.runner(rung);
    Arc::make_mut(&mut runner.config).prices =
        Arc::new(PriceTable::effective(Some(&prices)).unwrap());
    let (result, _) = run(&runner, &spec).await;
    let record = result.unwrap().record;
    assert_eq!(
        (record.status, record.model_calls, record.cost_micros),
        (JobStatus::Done, 1, 4000)
    );
    let text = metrics.render();
    let job = format!(r#"engine="codex",project="{PROJECT}",status="done""#);
    let call = format!(r#"provider="scripted",model="{MODEL}""#);
    assert_eq!(
        (
            series(&text, "paddock_jobs_finished_total", PROJECT),
            series(&text, "paddock_job_duration_seconds_count", PROJECT),
            series(&text, "paddock_model_calls_total", MODEL),
            series(&text, "paddock_tokens_total", MODEL),
            series(&text, "paddock_cost_microdollars_total", MODEL),
        ),
        (
            vec![format!("paddock_jobs_finished_total{{{job}}} 1").as_str()],
            vec![format!("paddock_job_duration_seconds_count{{{job}}} 1").as_str()],
            vec![format!(r#"paddock_model_calls_total{{{call},status="ok"}} 1"#).as_str()],
            vec![
                format!(r#"paddock_tokens_total{{{call},kind="input"}} 1000"#).as_str(),
                format!(r#"paddock_tokens_total{{{call},kind="output"}} 200"#).as_str(),
            ],
            vec![format!("paddock_cost_microdollars_total{{{call}}} 4000").as_str()],
        )
    );
    // Shared with other tests' jobs: present, with a count.
    for name in [
        r#"paddock_broker_call_duration_seconds_count{provider="scripted",status="ok"}"#,
        r#"paddock_sandbox_start_seconds_count{rung="process"}"#,
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(name)),
            "{name} missing from:\n{text}"
        );
    }
}

/// A model's name in a metric's labels is one the price table prices, or
/// `unpriced`: the names a job's calls ask for are the job's text (here
/// run, the host allowing unpriced models), and each distinct one was a
/// series of its own in the server's metrics for as long as it runs
/// (every job's, up to each job's record limit).
#[tokio::test]
async fn a_jobs_unpriced_model_names_are_no_series_of_their_own() {
    let metrics = crate::server::metrics::install().unwrap();
    let host = Host::new().await;
    std::fs::write(
        host.root().join("scenario.toml"),
        "[[turn]]\ntext = \"hi\"\nusage = { input = 10, output = 2 }\n",
    )
    .unwrap();
    let spec = host.spec();
    let rung = Arc::new(FakeRung::new(FakeEngine {
        stdout: DONE.iter().map(|s| s.to_string()).collect(),
        calls: ["a", "b", "c"]
            .iter()
            .map(|m| format!(r#"{{"model":"metrics-hostile-{m}","input":"hi","stream":true}}"#))
            .collect(),
        ..FakeEngine::default()
    }));
    let runner = host.runner(rung);
    let (result, _) = run(&runner, &spec).await;
    let record = result.unwrap().record;
    assert_eq!(record.model_calls, 3);
    let text = metrics.render();
    let hostile: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("metrics-hostile"))
        .collect();
    assert_eq!(hostile, Vec::<&str>::new());
    assert!(
        text.lines()
            .any(|l| l
                .starts_with(r#"paddock_model_calls_total{provider="scripted",model="unpriced","#)),
        "{text}"
    );
}

//! The broker driven directly over loopback HTTP, against the scripted
//! upstream: budgets under concurrency (reserve, settle, wait, refuse), a
//! stream cut at its ceiling, the model allowlist and `/v1/models`, and the
//! ledger equal to the scenario's usage.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;

use paddock::broker::ledger::{Ledger, LedgerFuture, MemoryLedger};
use paddock::broker::{
    self, AzureAuth, BrokerConfig, BrokerHandle, Ceiling, ModelAllowlist, PolicyNotice, PriceTable,
    Provider, RetryPolicy, Scope, Secret, Upstream,
};
use paddock::scripted::{RenderContext, Scenario};
use paddock_protocol::{CallStatus, ModelCall, TokenUsage};
use paddock_test_support::MockUpstream;
use tokio::net::TcpListener;

/// One answer: 1000 input tokens and 100 output tokens on gpt-5.5, that is
/// 1000 × $5/M + 100 × $30/M = 8000 micro-dollars per call.
const ONE_TURN: &str = r#"
[[turn]]
text = "Budgets are enforced by the broker."
usage = { input = 1000, output = 100 }
"#;
const CALL_MICROS: i64 = 8_000;

struct Rig {
    broker: BrokerHandle,
    upstream: MockUpstream,
    _dir: tempfile::TempDir,
}

async fn rig(scenario: &str, ceilings: Vec<Ceiling>) -> Rig {
    rig_with(scenario, ceilings, ModelAllowlist::any(), false).await
}

async fn rig_with(
    scenario: &str,
    ceilings: Vec<Ceiling>,
    allowlist: ModelAllowlist,
    allow_unpriced: bool,
) -> Rig {
    rig_full(
        scenario,
        ceilings,
        allowlist,
        allow_unpriced,
        None,
        RetryPolicy::default(),
    )
    .await
}

/// With `azure_key`, the upstream demands it, sent as Azure's `api-key`.
async fn rig_full(
    scenario: &str,
    ceilings: Vec<Ceiling>,
    allowlist: ModelAllowlist,
    allow_unpriced: bool,
    azure_key: Option<&str>,
    retry: RetryPolicy,
) -> Rig {
    let ledger = Arc::new(paddock::broker::ledger::MemoryLedger::default());
    rig_on(
        scenario,
        ceilings,
        allowlist,
        allow_unpriced,
        azure_key,
        retry,
        ledger,
        false,
    )
    .await
}

/// [`rig_full`] with the broker writing its rows to `ledger`, the job's
/// `[network] web_search` as given.
#[allow(clippy::too_many_arguments)]
async fn rig_on(
    scenario: &str,
    ceilings: Vec<Ceiling>,
    allowlist: ModelAllowlist,
    allow_unpriced: bool,
    azure_key: Option<&str>,
    retry: RetryPolicy,
    ledger: Arc<dyn Ledger>,
    web_search: bool,
) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let scenario =
        Scenario::from_toml(scenario, Path::new("budget-test.toml")).expect("scenario parses");
    let upstream = MockUpstream::start(
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
        Arc::new(scenario),
        RenderContext {
            workdir: dir.path().to_path_buf(),
        },
        azure_key.map(|k| Secret::new(k.to_string())),
    )
    .unwrap();
    let broker = broker::start(
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
        BrokerConfig {
            job_id: "job-budget".into(),
            attempt: 1,
            upstream: Upstream {
                base: upstream.base.clone(),
                provider: match azure_key {
                    Some(k) => Provider::Azure(AzureAuth::ApiKey(Secret::new(k.to_string()))),
                    None => Provider::Scripted,
                },
            },
            prices: Arc::new(PriceTable::vendored().unwrap()),
            ceilings,
            allowlist,
            allow_unpriced,
            web_search,
            retry,
            max_upstream_event_bytes: 16 << 20,
            ledger,
        },
    )
    .unwrap();
    Rig {
        broker,
        upstream,
        _dir: dir,
    }
}

fn job_ceiling(micros: i64) -> Vec<Ceiling> {
    vec![Ceiling {
        scope: Scope::Job,
        limit_micros: micros,
        prior_micros: 0,
    }]
}

/// A Responses request whose size matches its 1000 input tokens (about
/// four bytes a token) and which caps its output, as Codex does.
fn responses_body(max_output_tokens: Option<u64>) -> serde_json::Value {
    let mut body = serde_json::json!({
        "model": "gpt-5.5",
        "stream": true,
        "input": [{"type": "message", "role": "user",
                   "content": [{"type": "input_text", "text": "x".repeat(3_900)}]}],
    });
    if let Some(n) = max_output_tokens {
        body["max_output_tokens"] = n.into();
    }
    // Exactly 4000 bytes: the broker's input estimate is 1000 tokens.
    let pad = (4_000 + 3_900) - body.to_string().len();
    body["input"][0]["content"][0]["text"] = "x".repeat(pad).into();
    body
}

async fn post(
    client: &reqwest::Client,
    rig: &Rig,
    path: &str,
    body: &serde_json::Value,
) -> (u16, String) {
    let resp = client
        .post(format!("{}{path}", rig.broker.url))
        .bearer_auth(rig.broker.token.expose())
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.text().await.unwrap_or_default())
}

async fn ledger(rig: &mut Rig, n: usize) -> Vec<ModelCall> {
    let mut calls = Vec::new();
    while calls.len() < n {
        calls.push(rig.broker.calls.recv().await.unwrap().row);
    }
    calls.sort_by_key(|c| c.seq);
    calls
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// Fires `n` calls at once and returns their HTTP statuses.
async fn concurrent(rig: &Rig, n: usize, body: serde_json::Value) -> Vec<u16> {
    let client = client();
    let url = format!("{}/v1/responses", rig.broker.url);
    let token = rig.broker.token.expose().to_string();
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (client, url, token, body) =
                (client.clone(), url.clone(), token.clone(), body.clone());
            tokio::spawn(async move {
                let resp = client
                    .post(url)
                    .bearer_auth(token)
                    .header("content-type", "application/json")
                    .body(body.to_string())
                    .send()
                    .await
                    .unwrap();
                let status = resp.status().as_u16();
                let _ = resp.bytes().await;
                status
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap());
    }
    statuses
}

fn expected_usage() -> TokenUsage {
    TokenUsage {
        input_tokens: 1_000,
        output_tokens: 100,
        ..TokenUsage::default()
    }
}

/// 50 calls at once against a budget of ten calls: exactly ten run, each
/// metered exactly, the rest are refused with 402 only once the settled
/// spend reached the ceiling, and the spend ends exactly at the ceiling.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_calls_stay_within_one_budget() {
    let budget = 10 * CALL_MICROS;
    let mut rig = rig(ONE_TURN, job_ceiling(budget)).await;
    let statuses = concurrent(&rig, 50, responses_body(Some(100))).await;
    let calls = ledger(&mut rig, 50).await;

    let ok: Vec<&ModelCall> = calls
        .iter()
        .filter(|c| c.status == CallStatus::Ok)
        .collect();
    let refused: Vec<&ModelCall> = calls
        .iter()
        .filter(|c| c.status == CallStatus::Refused)
        .collect();
    assert_eq!((ok.len(), refused.len()), (10, 40));
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 10);
    assert_eq!(statuses.iter().filter(|s| **s == 402).count(), 40);
    for c in &ok {
        assert_eq!(
            (c.tokens, c.cost_micros, c.estimated),
            (expected_usage(), CALL_MICROS, false)
        );
    }
    for c in &refused {
        assert_eq!(
            (c.http_status, c.error.as_deref(), c.cost_micros),
            (
                Some(402),
                Some("paddock broker: job budget spent ($0.080000 of $0.080000); the job is held"),
                0
            )
        );
    }
    let spent: i64 = calls.iter().map(|c| c.cost_micros).sum();
    assert_eq!(spent, budget);
    assert_eq!(rig.broker.spent_micros(), budget);
    assert!(rig.broker.held());
    // Every refusal came with a policy notice.
    let mut notices = 0;
    while rig.broker.policy.try_recv().is_ok() {
        notices += 1;
    }
    assert_eq!(notices, 40);
}

/// Without an output cap a call's worst case is the model's most output
/// (gpt-5.5: 128 000 tokens, $3.84) plus its input: more than a $0.02
/// budget, so every call is refused before it reaches the upstream, with the
/// worst case in the message, and nothing is spent. (Before, the first call
/// was always admitted and a job could end far past its budget.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn calls_whose_worst_case_does_not_fit_are_refused_before_they_run() {
    let budget = 2 * CALL_MICROS + CALL_MICROS / 2;
    let mut rig = rig(ONE_TURN, job_ceiling(budget)).await;
    let statuses = concurrent(&rig, 50, responses_body(None)).await;
    let calls = ledger(&mut rig, 50).await;
    assert_eq!(statuses, vec![402; 50]);
    for c in &calls {
        assert_eq!(
            (c.status, c.cost_micros, c.error.as_deref()),
            (
                CallStatus::Refused,
                0,
                Some("paddock broker: job budget: this call could cost up to $3.845000 (its input and the most output it may produce), more than the $0.020000 left ($0.000000 of $0.020000 spent); the job is held")
            )
        );
    }
    assert!(rig.upstream.requests().is_empty());
    assert_eq!(rig.broker.spent_micros(), 0);
    assert!(rig.broker.held());
}

/// An uncapped call whose worst case does not fit, but whose input and at
/// least 1024 output tokens do, is capped: the broker sets the request's
/// `max_output_tokens` to what fits (after 1016 input tokens at $5/M, 94 919
/// µ$ of a $0.10 budget buy 3163 output tokens at $30/M) and the call runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncapped_call_is_capped_to_what_the_budget_leaves() {
    let mut rig = rig(ONE_TURN, job_ceiling(100_000)).await;
    let (status, text) = post(&client(), &rig, "/v1/responses", &responses_body(None)).await;
    assert_eq!(status, 200, "{text}");
    let sent = &rig.upstream.requests()[0].body;
    assert_eq!(sent["max_output_tokens"], 3163);
    let call = ledger(&mut rig, 1).await.remove(0);
    assert_eq!(
        (call.status, call.cost_micros),
        (CallStatus::Ok, CALL_MICROS)
    );
}

/// A Chat Completions call asking for `n` choices produces up to `n` times
/// its output cap, all billed: its worst case is each choice's output, so
/// 64 choices of 1,000 tokens ($1.92 on gpt-5.5) do not fit a $0.10 budget
/// and are refused before the upstream (before, the broker reserved one
/// choice's $0.03 and sent them); two uncapped choices are capped so that
/// both fit. A field the worst case is read from in a form the broker does
/// not read (`n` as a string, `stream` as a number, a cap as a float) is
/// refused, as is a cap below another cap field of the same request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_asking_for_several_choices_reserves_the_output_of_each() {
    let refusing = rig(ONE_TURN, job_ceiling(100_000)).await;
    let chat = |extra: serde_json::Value| {
        let mut body = serde_json::json!({"model": "gpt-5.5",
            "messages": [{"role": "user", "content": "hi"}]});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let many = chat(serde_json::json!({"n": 64, "max_completion_tokens": 1000}));
    let (status, text) = post(&client(), &refusing, "/v1/chat/completions", &many).await;
    assert_eq!(status, 402, "{text}");
    assert!(refusing.upstream.requests().is_empty());
    assert!(text.contains("could cost up to $1.92"), "{text}");
    let mut rig = rig(ONE_TURN, job_ceiling(100_000)).await;
    let (status, text) = post(
        &client(),
        &rig,
        "/v1/chat/completions",
        &chat(serde_json::json!({"n": 2})),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let sent = &rig.upstream.requests()[0].body;
    let cap = sent["max_completion_tokens"].as_u64().unwrap();
    assert_eq!(sent["n"], 2);
    // Both choices' output at $30/M within $0.10 (with the input's
    // 125 micro-dollars).
    assert!(cap >= 1_024 && 2 * cap * 30 + 125 <= 100_000, "{sent}");
    let _ = ledger(&mut rig, 1).await;
    for odd in [
        serde_json::json!({"n": "64", "max_completion_tokens": 1000}),
        serde_json::json!({"n": 64.0, "max_completion_tokens": 1000}),
        serde_json::json!({"n": 0}),
        serde_json::json!({"stream": 1, "max_completion_tokens": 1000}),
        serde_json::json!({"stream": "true", "max_completion_tokens": 1000}),
        serde_json::json!({"max_completion_tokens": 1000.0}),
        serde_json::json!({"max_completion_tokens": "100000"}),
        serde_json::json!({"max_completion_tokens": 1000, "max_tokens": 100_000}),
    ] {
        let before = rig.upstream.requests().len();
        let (status, text) =
            post(&client(), &rig, "/v1/chat/completions", &chat(odd.clone())).await;
        if status == 400 {
            continue;
        }
        // Sent: its worst case, read as a lenient upstream reads it, fits.
        let sent = rig.upstream.requests()[before].body.clone();
        let lenient = |v: &serde_json::Value| {
            v.as_f64()
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                .map(|f| f as u64)
        };
        let choices = lenient(&sent["n"]).unwrap_or(1);
        let cap = ["max_completion_tokens", "max_tokens"]
            .iter()
            .filter_map(|k| lenient(&sent[*k]))
            .max()
            .unwrap_or(128_000);
        assert!(
            choices * cap * 30 + 125 <= 100_000,
            "{odd}: {status} {text}: sent {sent}"
        );
        let streams = !matches!(
            sent["stream"],
            serde_json::Value::Null | serde_json::Value::Bool(false)
        );
        assert!(
            !streams || sent["stream_options"]["include_usage"] == true,
            "{odd}: {status} {text}: sent {sent}"
        );
        let _ = ledger(&mut rig, 1).await;
    }
}

/// A call the provider bills beyond the tokens the price table prices (an
/// image generated by its tool, a code interpreter's container, a code
/// execution container's hours, audio in or out, at rates the table has
/// none of) is refused before the upstream, with a `refused` row: its
/// spend would pass every budget unmetered. Before, each was forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_billed_beyond_its_tokens_is_refused_before_the_upstream() {
    let mut rig = rig(ONE_TURN, job_ceiling(1_000_000)).await;
    let responses = |extra: serde_json::Value| {
        let mut body = responses_body(Some(100));
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        ("/v1/responses", body)
    };
    let chat = |extra: serde_json::Value| {
        let mut body = serde_json::json!({"model": "gpt-4o-audio-preview", "max_tokens": 100,
            "messages": [{"role": "user", "content": "hi"}]});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        ("/v1/chat/completions", body)
    };
    let messages = |extra: serde_json::Value| {
        let mut body = serde_json::json!({"model": "claude-sonnet-4-5", "max_tokens": 100,
            "messages": [{"role": "user", "content": "hi"}]});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        ("/v1/messages", body)
    };
    let cases = [
        responses(serde_json::json!({"tools": [{"type": "image_generation", "quality": "high"}]})),
        responses(
            serde_json::json!({"tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]}),
        ),
        responses(serde_json::json!({"modalities": ["text", "audio"]})),
        chat(serde_json::json!({"modalities": ["text", "audio"],
            "audio": {"voice": "alloy", "format": "wav"}})),
        chat(serde_json::json!({"audio": {"voice": "alloy", "format": "wav"}})),
        chat(
            serde_json::json!({"messages": [{"role": "user", "content": [
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}]}]}),
        ),
        messages(
            serde_json::json!({"tools": [{"type": "code_execution_20250825", "name": "code_execution"}]}),
        ),
    ];
    for (path, body) in &cases {
        let (status, text) = post(&client(), &rig, path, body).await;
        let asked = (
            &body["tools"],
            &body["modalities"],
            &body["audio"],
            &body["messages"],
        );
        assert_eq!(status, 400, "{path} {asked:?}: {text}");
        assert!(text.contains("billed"), "{text}");
    }
    assert!(rig.upstream.requests().is_empty());
    let calls = ledger(&mut rig, cases.len()).await;
    assert!(calls
        .iter()
        .all(|c| c.status == CallStatus::Refused && c.cost_micros == 0));
    // The engines' own tools pass.
    let (status, text) = post(
        &client(),
        &rig,
        "/v1/responses",
        &responses(
            serde_json::json!({"tools": [{"type": "function", "name": "shell"},
            {"type": "custom", "name": "apply_patch"}, {"type": "tool_search"}],
            "modalities": ["text"]}),
        )
        .1,
    )
    .await;
    assert_eq!(status, 200, "{text}");
}

/// A model name is the job's text: a megabyte of it is named in the
/// ledger row, the refusal and the `policy` event cut short (its first
/// 256 characters and its length), never whole. Before, each refused
/// request of a megabyte's name stored it twice (the row's model and its
/// error) and once more in the event: up to 32 MiB a record, for each of
/// a job's 100,000 records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_model_name_is_stored_cut_short() {
    let long = "m".repeat(1_000_000);
    let short_enough = |text: &str| text.len() <= 1_024;
    for (allowlist, allow_unpriced, model) in [
        (ModelAllowlist::any(), false, long.clone()),
        (allow(&["gpt-5.5"]), false, long.clone()),
        (ModelAllowlist::any(), false, format!("{long}-search")),
        (ModelAllowlist::any(), true, long.clone()),
    ] {
        let mut rig = rig_with(ONE_TURN, vec![], allowlist, allow_unpriced).await;
        let mut body = responses_body(Some(100));
        body["model"] = model.clone().into();
        let (status, _) = post(&client(), &rig, "/v1/responses", &body).await;
        let call = ledger(&mut rig, 1).await.remove(0);
        let case = format!("{status} {:?}", call.status);
        assert!(short_enough(&call.requested_model), "{case}");
        assert!(
            call.requested_model.ends_with("… (1000000 characters)")
                || call.requested_model.ends_with("… (1000007 characters)"),
            "{case}"
        );
        assert!(call.error.as_deref().is_none_or(short_enough), "{case}");
        while let Ok(notice) = rig.broker.policy.try_recv() {
            assert!(short_enough(&notice.message), "{case}");
        }
        if allow_unpriced {
            // The upstream still gets the name the job sent.
            assert_eq!(rig.upstream.requests()[0].body["model"], model.as_str());
        }
    }
}

/// The upstream's text in a row is kept cut short too: an error message
/// (an answer's or a stream's error event, read up to 16 MiB) that may
/// echo what the job sent, and the model name an answer says it served.
/// Before, a megabyte of each was stored whole in the call's row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstreams_long_texts_are_stored_cut_short() {
    let long = "e".repeat(1_000_000);
    let mut kept = Vec::new();
    for scenario in [
        format!("[[turn]]\nerror = {{ status = 400, message = \"{long}\" }}\n"),
        format!("[[turn]]\ntext = \"half\"\nstream_error = {{ message = \"{long}\", type = \"overloaded_error\" }}\n"),
        format!("served_model = \"{long}\"\n[[turn]]\ntext = \"Answered.\"\nusage = {{ input = 1000, output = 100 }}\n"),
    ] {
        let mut rig = rig(&scenario, job_ceiling(10 * CALL_MICROS)).await;
        post(&client(), &rig, "/v1/responses", &responses_body(Some(100))).await;
        let call = ledger(&mut rig, 1).await.remove(0);
        let tail = |t: &str| t.chars().skip(4_090).collect::<String>();
        kept.push((
            call.status,
            call.error.as_deref().map(tail),
            call.served_model.as_deref().map(|m| m.chars().count()),
        ));
    }
    let error = Some("eeeeee… (1000000 characters)".to_string());
    let served = Some(256 + "… (1000000 characters)".chars().count());
    assert_eq!(
        kept,
        vec![
            (CallStatus::HttpError, error.clone(), None),
            (CallStatus::StreamError, error, Some("gpt-5.5".len())),
            (CallStatus::Ok, None, served),
        ]
    );
}

/// A call asking for a dearer way of serving it than the price table has
/// rates for (OpenAI's priority tier on a model the table gives no
/// priority prices, Anthropic's fast mode, inference kept in one
/// geography) is refused before the upstream: it would be billed above
/// the rates it is metered at (twice, six times, 1.1 times). Before, each
/// was forwarded and metered at the standard rates. A tier the table
/// prices passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_asking_for_a_dearer_service_than_the_table_prices_is_refused() {
    let mut rig = rig(ONE_TURN, job_ceiling(1_000_000)).await;
    let with = |model: &str, extra: serde_json::Value| {
        let mut body = responses_body(Some(100));
        body["model"] = model.into();
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let messages = |extra: serde_json::Value| {
        let mut body = serde_json::json!({"model": "claude-opus-4-6", "max_tokens": 100,
            "messages": [{"role": "user", "content": "hi"}]});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let refused = [
        (
            "/v1/responses",
            with("gpt-5.5", serde_json::json!({"service_tier": "priority"})),
        ),
        (
            "/v1/messages",
            messages(serde_json::json!({"speed": "fast"})),
        ),
        (
            "/v1/messages",
            messages(serde_json::json!({"inference_geo": "us"})),
        ),
    ];
    for (path, body) in &refused {
        let (status, text) = post(&client(), &rig, path, body).await;
        assert_eq!(status, 400, "{path}: {text}");
        assert!(text.contains("billed"), "{text}");
    }
    assert!(rig.upstream.requests().is_empty());
    let _ = ledger(&mut rig, refused.len()).await;
    for (path, body) in [
        (
            "/v1/responses",
            with("gpt-5.1", serde_json::json!({"service_tier": "priority"})),
        ),
        (
            "/v1/responses",
            with("gpt-5.5", serde_json::json!({"service_tier": "flex"})),
        ),
        (
            "/v1/responses",
            with("gpt-5.5", serde_json::json!({"service_tier": "auto"})),
        ),
        (
            "/v1/messages",
            messages(serde_json::json!({"speed": "standard", "inference_geo": "global"})),
        ),
    ] {
        let (status, text) = post(&client(), &rig, path, &body).await;
        assert_eq!(status, 200, "{path}: {text}");
    }
}

/// A long answer whose running cost crosses the ceiling is cut: the engine
/// gets the broker's error event in its own wire format, the row is
/// estimated from what was seen, and the next call is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_crossing_the_ceiling_is_cut() {
    // 40 deltas of ~20 characters: ~200 output tokens estimated at the end.
    let text = "a budget test line. ".repeat(40);
    let scenario = format!(
        "[[turn]]\ntext = \"{text}\"\nusage = {{ input = 10, output = 200 }}\n[[turn]]\ntext = \"never\"\n"
    );
    // claude-haiku-4-5: $1/M input, $5/M output. The request (~40 bytes →
    // 10 tokens) costs 10 µ$; the ceiling allows about 100 output tokens.
    let budget = 10 + 500;
    let mut rig = rig(&scenario, job_ceiling(budget)).await;
    let client = client();
    let body = serde_json::json!({
        "model": "claude-haiku-4-5", "stream": true, "max_tokens": 1,
        "messages": [{"role": "user", "content": "hi"}],
    });
    let (status, text_out) = post(&client, &rig, "/v1/messages", &body).await;
    assert_eq!(status, 200);
    // Cut after the 21st delta: 10 input + 21 × 5 output tokens = 535 µ$.
    let message = "paddock broker: job budget reached ($0.000535 of $0.000510 with the calls under way): the response was cut; the job is held";
    let expected_tail = format!(
        "event: error\ndata: {}\n\n",
        serde_json::json!({"type": "error", "error": {"type": "budget_exceeded", "message": message}})
    );
    assert!(
        text_out.ends_with(&expected_tail),
        "the stream ends with the broker's error event: {text_out}"
    );
    assert!(!text_out.contains("message_stop"));

    let call = ledger(&mut rig, 1).await.remove(0);
    assert_eq!(
        (call.status, call.estimated, call.error.as_deref()),
        (CallStatus::StreamError, true, Some(message))
    );
    // Cut at the first event past the ceiling: at most one delta (~5 output
    // tokens, 25 µ$) over.
    assert!(call.cost_micros > budget, "{call:?}");
    assert!(call.cost_micros <= budget + 25, "{call:?}");
    assert_eq!(
        rig.broker.policy.try_recv().unwrap().message,
        message.to_string()
    );

    let (status, refusal) = post(&client, &rig, "/v1/messages", &body).await;
    assert_eq!(status, 402);
    let refusal: serde_json::Value = serde_json::from_str(&refusal).unwrap();
    assert_eq!(refusal["error"]["type"], "budget_exceeded");
    assert!(rig.broker.held());
}

fn allow(patterns: &[&str]) -> ModelAllowlist {
    let patterns: Vec<String> = patterns.iter().map(|p| p.to_string()).collect();
    ModelAllowlist::any().with("job", &patterns)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_lists_the_allowed_models_in_both_formats() {
    let rig = rig_with(
        ONE_TURN,
        vec![],
        allow(&["gpt-5.5", "claude-opus-4-8*"]),
        false,
    )
    .await;
    let client = client();
    let url = format!("{}/v1/models", rig.broker.url);
    let openai: serde_json::Value = client
        .get(&url)
        .bearer_auth(rig.broker.token.expose())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap();
    assert_eq!(
        openai,
        serde_json::json!({"object": "list", "data": [
            {"id": "claude-opus-4-8", "object": "model", "created": 0, "owned_by": "paddock"},
            {"id": "gpt-5.5", "object": "model", "created": 0, "owned_by": "paddock"},
        ]})
    );
    let anthropic: serde_json::Value = client
        .get(&url)
        .header("x-api-key", rig.broker.token.expose())
        .header("anthropic-version", "2023-06-01")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap();
    assert_eq!(
        anthropic,
        serde_json::json!({"data": [
            {"type": "model", "id": "claude-opus-4-8", "display_name": "claude-opus-4-8", "created_at": "1970-01-01T00:00:00Z"},
            {"type": "model", "id": "gpt-5.5", "display_name": "gpt-5.5", "created_at": "1970-01-01T00:00:00Z"},
        ], "has_more": false, "first_id": "claude-opus-4-8", "last_id": "gpt-5.5"})
    );
    let status = client.get(&url).send().await.unwrap().status().as_u16();
    assert_eq!(status, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requested_model_outside_the_allowlist_is_refused() {
    let mut rig = rig_with(ONE_TURN, vec![], allow(&["gpt-5.5"]), false).await;
    let mut body = responses_body(Some(100));
    body["model"] = "gpt-5.4".into();
    let (status, text) = post(&client(), &rig, "/v1/responses", &body).await;
    let message = "paddock broker: model `gpt-5.4` is not allowed by the job model allowlist";
    assert_eq!(status, 403);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"error": {"message": message, "type": "permission_error", "code": "permission_error"}})
    );
    let call = ledger(&mut rig, 1).await.remove(0);
    assert_eq!(
        (call.status, call.http_status, call.error.as_deref()),
        (CallStatus::Refused, Some(403), Some(message))
    );
    assert_eq!(
        rig.broker.policy.try_recv().unwrap(),
        PolicyNotice {
            rule: "model".into(),
            message: message.into()
        }
    );
}

/// A Responses call asking for a background response (answered at once,
/// `queued` and without usage, then run upstream and billed in full where
/// the broker never sees it: spend past any budget) is refused before it
/// reaches the upstream, in the API's error format, its row `refused`;
/// `background: false` runs. (Before, it was forwarded.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_response_is_refused_before_the_upstream() {
    let mut rig = rig(ONE_TURN, job_ceiling(1_000_000)).await;
    let mut body = responses_body(Some(100));
    body["store"] = true.into();
    body["background"] = true.into();
    let (status, text) = post(&client(), &rig, "/v1/responses", &body).await;
    let refused = ledger(&mut rig, 1).await.remove(0);
    let message = "paddock broker: a background response (`background`) runs after its answer, \
                   where the broker cannot meter it; refused";
    assert_eq!(
        (
            status,
            serde_json::from_str::<serde_json::Value>(&text).ok(),
            refused.status,
            refused.http_status,
            refused.error.as_deref(),
            rig.upstream.requests().len()
        ),
        (
            400,
            Some(
                serde_json::json!({"error": {"message": message, "type": "invalid_request_error", "code": "invalid_request_error"}})
            ),
            CallStatus::Refused,
            Some(400),
            Some(message),
            0
        )
    );
    body["background"] = false.into();
    let (status, _) = post(&client(), &rig, "/v1/responses", &body).await;
    let ran = ledger(&mut rig, 1).await.remove(0);
    assert_eq!(
        (
            status,
            ran.status,
            ran.tokens,
            rig.upstream.requests().len()
        ),
        (200, CallStatus::Ok, expected_usage(), 1)
    );
}

/// Posts `body` to `path` and checks it was refused for the job's network
/// policy with `message`: a 400 in the API's format, a `refused` row, a
/// `policy` event with rule `network`, and nothing sent upstream (by this
/// rig, so far).
async fn refused_for_the_network(
    rig: &mut Rig,
    path: &str,
    body: &serde_json::Value,
    message: &str,
) {
    let (status, text) = post(&client(), rig, path, body).await;
    let refused = ledger(rig, 1).await.remove(0);
    assert_eq!(
        (
            status,
            serde_json::from_str::<serde_json::Value>(&text).ok(),
            refused.status,
            refused.error.as_deref(),
            rig.broker.policy.try_recv().ok(),
            rig.upstream.requests().len()
        ),
        (
            400,
            Some(
                serde_json::json!({"error": {"message": message, "type": "invalid_request_error", "code": "invalid_request_error"}})
            ),
            CallStatus::Refused,
            Some(message),
            Some(PolicyNotice {
                rule: "network".into(),
                message: message.into()
            }),
            0
        )
    );
}

/// A call that would have the provider itself connect to a server the job
/// names (a Responses remote MCP tool at `https://evil.example/`, an image
/// given by URL), which no egress policy sees, is refused before it
/// reaches the upstream: a 400 in
/// the API's format, a `refused` row, a `policy` event with rule
/// `network`. The same call without them runs. (Before, it was
/// forwarded: the job's prompt could go to any host.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_naming_a_server_for_the_provider_is_refused() {
    let mut rig = rig(ONE_TURN, job_ceiling(1_000_000)).await;
    let mut body = responses_body(Some(100));
    body["tools"] = serde_json::json!([
        {"type": "web_search"},
        {"type": "mcp", "server_label": "x", "server_url": "https://evil.example/", "require_approval": "never"}
    ]);
    let message = "paddock broker: a remote MCP tool (`tools[].type` `mcp`) would have the \
                   provider connect to a server the job names, past the job's network policy; \
                   refused";
    refused_for_the_network(&mut rig, "/v1/responses", &body, message).await;
    // An image the provider would fetch from the job's URL: refused too.
    let mut image = responses_body(Some(100));
    image["input"][0]["content"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"type": "input_image", "image_url": "https://evil.example/?leak=secret"}));
    let (status, text) = post(&client(), &rig, "/v1/responses", &image).await;
    let refused = ledger(&mut rig, 1).await.remove(0);
    let message = "paddock broker: an image or file given by URL (`image_url`, `file_url`, a \
                   `url` source) would have the provider connect to a server the job names, past \
                   the job's network policy; refused";
    assert_eq!(
        (
            status,
            serde_json::from_str::<serde_json::Value>(&text).ok(),
            refused.status,
            rig.upstream.requests().len()
        ),
        (
            400,
            Some(
                serde_json::json!({"error": {"message": message, "type": "invalid_request_error", "code": "invalid_request_error"}})
            ),
            CallStatus::Refused,
            0
        )
    );
    body["tools"] = serde_json::json!([{"type": "function", "name": "shell", "parameters": {}}]);
    let (status, _) = post(&client(), &rig, "/v1/responses", &body).await;
    let ran = ledger(&mut rig, 1).await.remove(0);
    assert_eq!(
        (status, ran.status, rig.upstream.requests().len()),
        (200, CallStatus::Ok, 1)
    );
}

/// Every job of a host shares one provider account: a call naming state
/// the provider keeps for it (a stored response by `previous_response_id`,
/// an uploaded file by `file_id` through Anthropic's Files API beta) could
/// read another job's or the operator's. Refused before it reaches the
/// upstream: a 400 in the API's format, a `refused` row, a `policy` event
/// with rule `provider_state`. The provider's other endpoints (Files,
/// Batches, retrieving a response, conversations, vector stores,
/// containers) have no route: 404, nothing upstream, and a `refused` row
/// and a `policy` event (rule `broker_route`) naming the method and path;
/// a call choosing another organization or project of the key is refused
/// too. The same call without the reference runs. (Before, every call
/// was forwarded; then the unrouted ones left no row nor event.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_naming_the_providers_stored_state_is_refused() {
    let mut rig = rig(ONE_TURN, job_ceiling(1_000_000)).await;
    let mut body = responses_body(Some(100));
    body["previous_response_id"] = "resp_of_another_job".into();
    let messages = serde_json::json!({"model": "claude-sonnet-4-5", "max_tokens": 100,
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "repeat this document"},
            {"type": "document", "source": {"type": "file", "file_id": "file_011operator"}}]}]});
    let mut got = Vec::new();
    for (path, request) in [("/v1/responses", &body), ("/v1/messages", &messages)] {
        let (status, text) = post(&client(), &rig, path, request).await;
        let refused = ledger(&mut rig, 1).await.remove(0);
        got.push((
            status,
            serde_json::from_str::<serde_json::Value>(&text).ok(),
            refused.status,
            refused.error,
            rig.broker.policy.try_recv().ok(),
        ));
    }
    let message = |what: &str| {
        format!(
            "paddock broker: {what} names state the model provider keeps for the account every \
             job of this host shares, not the job's own; refused"
        )
    };
    let (response, file) = (
        message("a stored response (`previous_response_id`)"),
        message("an uploaded file (`file_id`)"),
    );
    assert_eq!(
        got,
        [
            (
                400,
                Some(
                    serde_json::json!({"error": {"message": response, "type": "invalid_request_error", "code": "invalid_request_error"}})
                ),
                CallStatus::Refused,
                Some(response.clone()),
                Some(PolicyNotice {
                    rule: "provider_state".into(),
                    message: response.clone()
                }),
            ),
            (
                400,
                Some(
                    serde_json::json!({"type": "error", "error": {"type": "invalid_request_error", "message": file}})
                ),
                CallStatus::Refused,
                Some(file.clone()),
                Some(PolicyNotice {
                    rule: "provider_state".into(),
                    message: file.clone()
                }),
            ),
        ]
    );
    // The provider's stored objects have no route at all: nothing goes
    // upstream, and each request leaves a `refused` row naming its method
    // and path (not its body) and a `policy` event.
    let client = client();
    let mut routes = Vec::new();
    let mut unrouted = Vec::new();
    let long_path = format!("/v1/files/{}", "f".repeat(600));
    for (method, path) in [
        (reqwest::Method::GET, "/v1/responses/resp_of_another_job"),
        (reqwest::Method::GET, "/v1/responses/resp_x/input_items"),
        (reqwest::Method::POST, "/v1/conversations"),
        (reqwest::Method::GET, "/v1/files/file_011operator/content"),
        (reqwest::Method::POST, "/v1/files"),
        (reqwest::Method::POST, "/v1/batches"),
        (reqwest::Method::POST, "/v1/messages/batches"),
        (reqwest::Method::GET, "/v1/vector_stores"),
        (reqwest::Method::GET, "/v1/containers"),
        (reqwest::Method::POST, "/v1/responses/../files"),
        (reqwest::Method::POST, "/v1//responses"),
        (reqwest::Method::GET, long_path.as_str()),
    ] {
        let url = reqwest::Url::parse(&format!("{}{path}", rig.broker.url)).unwrap();
        // As sent (`..` resolved by the client), a long one cut.
        let shown = match url.path() {
            p if p.len() > 512 => format!("{}… ({} bytes)", &p[..512], p.len()),
            p => p.to_string(),
        };
        let resp = client
            .request(method.clone(), url)
            .bearer_auth(rig.broker.token.expose())
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let answer = serde_json::from_str::<serde_json::Value>(&resp.text().await.unwrap()).ok();
        // Bounded, so a request that leaves no row fails the test (a
        // row comes within milliseconds; 120 s is for a loaded host, the
        // suites side by side on two cores).
        let row =
            tokio::time::timeout(std::time::Duration::from_secs(120), rig.broker.calls.recv())
                .await
                .ok()
                .flatten()
                .map(|settled| settled.row)
                .map(|row| (row.status, row.http_status, row.error, row.requested_model));
        let message = format!("paddock broker: no route for {method} {shown}");
        routes.push((status, answer, row, rig.broker.policy.try_recv().ok()));
        unrouted.push((
            404,
            Some(
                serde_json::json!({"error": {"message": message, "type": "not_found_error", "code": "not_found_error"}}),
            ),
            Some((
                CallStatus::Refused,
                Some(404),
                Some(message.clone()),
                String::new(),
            )),
            Some(PolicyNotice {
                rule: "broker_route".into(),
                message,
            }),
        ));
    }
    assert_eq!(routes, unrouted);
    // Another organization or project of the key than its default: the
    // operator's others, their stored state and their spend.
    body.as_object_mut().unwrap().remove("previous_response_id");
    let mut headers = Vec::new();
    for header in ["OpenAI-Organization", "OpenAI-Project"] {
        let resp = client
            .post(format!("{}/v1/responses", rig.broker.url))
            .bearer_auth(rig.broker.token.expose())
            .header(header, "org-or-proj-of-the-operator")
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let refused = ledger(&mut rig, 1).await.remove(0);
        headers.push((status, refused.status, refused.error));
    }
    let (org, project) = (
        "paddock broker: an OpenAI organization (the `OpenAI-Organization` header) would choose \
         another account than the key's own, whose state and spend are not the job's; refused",
        "paddock broker: an OpenAI project (the `OpenAI-Project` header) would choose another \
         account than the key's own, whose state and spend are not the job's; refused",
    );
    assert_eq!(
        headers,
        [
            (400, CallStatus::Refused, Some(org.to_string())),
            (400, CallStatus::Refused, Some(project.to_string())),
        ]
    );
    assert_eq!(rig.upstream.requests().len(), 0);
    let (status, _) = post(&client, &rig, "/v1/responses", &body).await;
    let ran = ledger(&mut rig, 1).await.remove(0);
    assert_eq!(
        (status, ran.status, rig.upstream.requests().len()),
        (200, CallStatus::Ok, 1)
    );
}

/// Sends `GET /v1/models` on `stream` (kept alive) and reads the whole
/// answer: its status.
async fn models_on(stream: &mut tokio::net::TcpStream, token: &str) -> u16 {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let request =
        format!("GET /v1/models HTTP/1.1\r\nhost: broker\r\nauthorization: Bearer {token}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf).await.unwrap();
        assert_ne!(n, 0, "the broker closed the connection");
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let length: usize = text
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .map(|v| v.trim().parse().unwrap())
                .unwrap_or(0);
            if got.len() >= end + 4 + length {
                return text[9..12].parse().unwrap();
            }
        }
    }
}

/// A job opening connection after connection to its broker (which runs in
/// Paddock's own process, with every other job of a server) holds at most
/// `MAX_CONNECTIONS` of them: the next waits in the listen backlog,
/// unanswered, until one of the job's closes. (Before, every connection
/// was accepted: descriptors and memory of the whole server for one job
/// to take.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_holds_at_most_its_brokers_connections() {
    let rig = rig(ONE_TURN, job_ceiling(1_000_000)).await;
    let addr = rig.broker.url.trim_start_matches("http://").to_string();
    let token = rig.broker.token.expose().to_string();
    let mut held = Vec::new();
    for _ in 0..broker::connections::MAX_CONNECTIONS {
        let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
        assert_eq!(models_on(&mut stream, &token).await, 200);
        held.push(stream);
    }
    let mut next = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let waiting = {
        let token = token.clone();
        tokio::spawn(async move { models_on(&mut next, &token).await })
    };
    // Not answered while the job's connections are all open (a bound only
    // for how long the test waits to see nothing: no answer is the fix).
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert!(
        !waiting.is_finished(),
        "a connection past the limit was answered"
    );
    drop(held.pop());
    assert_eq!(waiting.await.unwrap(), 200);
}

/// What the job's end leaves of a connection to its broker: nothing. A
/// connection kept alive past it (a process of the job that outlived its
/// teardown, or a body trickled in and never finished) is closed when the
/// broker stops: a model call sent on it afterwards is never forwarded,
/// and a body half sent is not waited for. (Before, stopping the broker
/// stopped only its accept loop: each connection's task went on serving,
/// spending after the job's ledger was closed, and held its descriptor
/// in Paddock's process for as long as the job's side kept it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_connections_end_with_its_broker() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let Rig {
        broker,
        upstream,
        _dir,
    } = rig(ONE_TURN, job_ceiling(1_000_000)).await;
    let addr = broker.url.trim_start_matches("http://").to_string();
    let token = broker.token.expose().to_string();
    let mut idle = tokio::net::TcpStream::connect(&addr).await.unwrap();
    assert_eq!(models_on(&mut idle, &token).await, 200);
    let body = responses_body(Some(100)).to_string();
    let head = format!(
        "POST /v1/responses HTTP/1.1\r\nhost: broker\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let mut trickling = tokio::net::TcpStream::connect(&addr).await.unwrap();
    trickling.write_all(head.as_bytes()).await.unwrap();
    trickling.write_all(&body.as_bytes()[..10]).await.unwrap();
    // The broker is reading the trickled body when it stops.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    drop(broker);
    let _ = idle.write_all(format!("{head}{body}").as_bytes()).await;
    let _ = trickling.write_all(&body.as_bytes()[10..]).await;
    // A bound only for a broken broker: a closed connection ends at once
    // (120 s for a loaded host, the suites side by side on two cores; a
    // connection still served would forward its call and answer it).
    let mut answers = Vec::new();
    for mut stream in [idle, trickling] {
        let mut got = Vec::new();
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(120),
            stream.read_to_end(&mut got),
        )
        .await;
        answers.push((read.is_ok(), String::from_utf8_lossy(&got).into_owned()));
    }
    assert_eq!(
        (answers, upstream.requests().len()),
        (vec![(true, String::new()), (true, String::new())], 0)
    );
}

/// A job's requests are read and judged at most `READ_AT_ONCE` at a
/// time: with that many bodies held open (their last byte not sent), the
/// next request's body is not read at all, so its sender cannot finish
/// writing it, until one of them completes. (Before the limit, every
/// request's body was read at once: as many bodies in Paddock's memory,
/// the process every job of a server shares, as the job opened
/// connections.) A body of 24 MiB is more than the sockets' buffers hold,
/// so the writer finishing is the sign its body is being read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_has_at_most_two_requests_read_at_once() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    assert_eq!(broker::READ_AT_ONCE, 2);
    let mut rig = rig(ONE_TURN, job_ceiling(1_000_000)).await;
    let addr = rig.broker.url.trim_start_matches("http://").to_string();
    let token = rig.broker.token.expose().to_string();
    // Refused in admission (a background response), never sent upstream.
    let head = br#"{"model":"gpt-5.5","background":true,"pad":""#;
    let pad = 24 << 20;
    let length = head.len() + pad + 2;
    let mut all_but_last = head.to_vec();
    all_but_last.resize(head.len() + pad, b'x');
    all_but_last.push(b'"');
    let all_but_last = Arc::new(all_but_last);
    let start = |addr: String, token: String, body: Arc<Vec<u8>>| async move {
        let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let request = format!(
            "POST /v1/responses HTTP/1.1\r\nhost: broker\r\nauthorization: Bearer {token}\r\n\
             content-type: application/json\r\ncontent-length: {length}\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        stream.write_all(&body).await.unwrap();
        stream
    };
    let finish = |mut stream: tokio::net::TcpStream| async move {
        stream.write_all(b"}").await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&got).contains("\r\n\r\n") {
            let n = stream.read(&mut buf).await.unwrap();
            assert_ne!(n, 0, "the broker closed the connection");
            got.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&got[9..12]).parse::<u16>().unwrap()
    };
    // Two bodies being read (all but their last byte written).
    let first = start(addr.clone(), token.clone(), all_but_last.clone()).await;
    let second = start(addr.clone(), token.clone(), all_but_last.clone()).await;
    let third = tokio::spawn(start(addr.clone(), token.clone(), all_but_last.clone()));
    // Not read while two are (a bound only for how long the test waits to
    // see nothing: no progress is the fix).
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert!(
        !third.is_finished(),
        "a third request's body was read while two were"
    );
    assert_eq!(finish(first).await, 400);
    let third = third.await.unwrap();
    assert_eq!((finish(second).await, finish(third).await), (400, 400));
    let refused = ledger(&mut rig, 3).await;
    assert_eq!(
        (
            refused.iter().map(|c| c.status).collect::<Vec<_>>(),
            rig.upstream.requests().len()
        ),
        (vec![CallStatus::Refused; 3], 0)
    );
}

/// A request body of a million tiny JSON values (`[0,0,…]`, two bytes
/// each, tens of bytes each once parsed: a gigabyte of Paddock's memory
/// for a 32 MiB body) is refused before it is parsed: a 400 naming the
/// limit, a `refused` row, nothing upstream. (Before, it was parsed and
/// forwarded.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_of_too_many_json_values_is_refused_unparsed() {
    let mut rig = rig(ONE_TURN, job_ceiling(100_000_000)).await;
    let mut body = responses_body(Some(100));
    body["metadata_pad"] = serde_json::Value::Array(vec![0.into(); 1_000_000]);
    let (status, text) = post(&client(), &rig, "/v1/responses", &body).await;
    let refused = ledger(&mut rig, 1).await.remove(0);
    let message = format!(
        "paddock broker: the request body holds more than {} JSON values, past the broker's \
         limit; refused",
        1_000_000
    );
    assert_eq!(
        (
            status,
            serde_json::from_str::<serde_json::Value>(&text).ok(),
            refused.status,
            refused.error,
            rig.upstream.requests().len()
        ),
        (
            400,
            Some(
                serde_json::json!({"error": {"message": message, "type": "invalid_request_error", "code": "invalid_request_error"}})
            ),
            CallStatus::Refused,
            Some(message.clone()),
            0
        )
    );
    // Strings holding the same characters are one value each: it runs.
    body["metadata_pad"] = serde_json::Value::String("[0,{".repeat(500_000));
    let (status, _) = post(&client(), &rig, "/v1/responses", &body).await;
    assert_eq!(status, 200);
}

/// A broker of a Bedrock job (`job_id`) with a Bedrock API key, before
/// a recording Bedrock upstream. The temporary directory lives as long as
/// they are used.
async fn bedrock_rig(job_id: &str) -> (tempfile::TempDir, MockUpstream, broker::BrokerHandle) {
    let dir = tempfile::tempdir().unwrap();
    let scenario = Scenario::from_toml(ONE_TURN, Path::new("bedrock.toml")).unwrap();
    let key = Secret::new("ABSKQmVkcm9ja0FQSUtleS1xdWVyeQ".to_string());
    let upstream = MockUpstream::start_bedrock_api_key(
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
        Arc::new(scenario),
        RenderContext {
            workdir: dir.path().to_path_buf(),
        },
        key.clone(),
    )
    .unwrap();
    let broker = broker::start(
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
        BrokerConfig {
            job_id: job_id.into(),
            attempt: 1,
            upstream: Upstream {
                base: upstream.base.trim_end_matches("/v1").to_string(),
                provider: Provider::Bedrock(Arc::new(broker::bedrock::Bedrock::with_api_key(
                    key,
                    "us-west-2",
                ))),
            },
            prices: Arc::new(PriceTable::vendored().unwrap()),
            ceilings: job_ceiling(1_000_000),
            allowlist: ModelAllowlist::any(),
            allow_unpriced: false,
            web_search: false,
            retry: RetryPolicy::default(),
            max_upstream_event_bytes: 16 << 20,
            ledger: Arc::new(MemoryLedger::default()),
        },
    )
    .unwrap();
    (dir, upstream, broker)
}

/// A Bedrock (or Vertex AI) job's call reaches the path the broker
/// rebuilds from the spec, without the job's query string: there a
/// provider's system parameter (Google's `userProject`, `quotaUser`)
/// would bill another project the server's identity may use. (Before,
/// the job's query went upstream with the call.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cloud_jobs_query_string_stays_with_the_broker() {
    let (_dir, upstream, mut broker) = bedrock_rig("job-query").await;
    let resp = client()
        .post(format!(
            "{}/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke?userProject=operators-other&quotaUser=x",
            broker.url
        ))
        .bearer_auth(broker.token.expose())
        .header("content-type", "application/json")
        .body(
            serde_json::json!({"anthropic_version": "bedrock-2023-05-31", "max_tokens": 100,
                "messages": [{"role": "user", "content": "hi"}]})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let _ = broker.calls.recv().await.unwrap();
    let seen: Vec<(String, Option<String>)> = upstream
        .requests()
        .into_iter()
        .map(|r| (r.path, r.query))
        .collect();
    assert_eq!(
        (status, seen),
        (
            200,
            vec![(
                "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke".to_string(),
                None
            )]
        )
    );
}

/// A cloud provider's option asked in a header rather than the body
/// (Bedrock's `X-Amzn-Bedrock-…`: its priority service tier,
/// latency-optimized inference, an account's guardrail billed per text
/// unit) is refused: a 400, a `refused` row, a `provider_state` policy
/// event, nothing upstream. Before, the headers were forwarded with the
/// signed call, and a priority call was metered at standard rates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bedrock_option_in_a_header_is_refused() {
    let (_dir, upstream, mut broker) = bedrock_rig("job-bedrock-option").await;
    let body = serde_json::json!({"anthropic_version": "bedrock-2023-05-31", "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}]})
    .to_string();
    let url = format!(
        "{}/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke",
        broker.url
    );
    let mut got = Vec::new();
    for (header, value) in [
        ("X-Amzn-Bedrock-Service-Tier", "priority"),
        ("X-Amzn-Bedrock-PerformanceConfig-Latency", "optimized"),
        (
            "X-Amzn-Bedrock-GuardrailIdentifier",
            "the-operators-guardrail",
        ),
    ] {
        let resp = client()
            .post(&url)
            .bearer_auth(broker.token.expose())
            .header("content-type", "application/json")
            .header(header, value)
            .body(body.clone())
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let row = broker.calls.recv().await.unwrap().row;
        got.push((
            status,
            row.status,
            row.error,
            broker.policy.try_recv().ok().map(|p| p.rule),
        ));
    }
    let refused = |header: &str| {
        (
            400,
            CallStatus::Refused,
            Some(format!(
                "paddock broker: the `{header}` header asks a Bedrock option (a service tier, \
                 latency-optimized inference, a guardrail of the account, a trace), billed or \
                 run beyond the tokens the broker meters, which no budget would see; refused"
            )),
            Some("provider_state".to_string()),
        )
    };
    assert_eq!(
        (got, upstream.requests().len()),
        (
            vec![
                refused("x-amzn-bedrock-service-tier"),
                refused("x-amzn-bedrock-performanceconfig-latency"),
                refused("x-amzn-bedrock-guardrailidentifier"),
            ],
            0
        )
    );
    // The same call without them runs.
    let resp = client()
        .post(&url)
        .bearer_auth(broker.token.expose())
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let row = broker.calls.recv().await.unwrap().row;
    assert_eq!(
        (status, row.status, upstream.requests().len()),
        (200, CallStatus::Ok, 1)
    );
}

/// The model provider's web search (Codex's `web_search` tool, the
/// Messages server tool Claude Code's WebSearch sends) searches and opens
/// pages past the job's egress proxy: refused unless the job's `[network]
/// web_search` turns it on (a 400 in the API's format, a `refused` row, a
/// `policy` event with rule `network`, nothing upstream); turned on, the
/// same call runs. (Before, it ran for every job.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_providers_web_search_runs_only_when_the_job_turns_it_on() {
    let searching = |rig_web_search| {
        rig_on(
            ONE_TURN,
            job_ceiling(1_000_000),
            ModelAllowlist::any(),
            false,
            None,
            RetryPolicy::default(),
            Arc::new(paddock::broker::ledger::MemoryLedger::default()),
            rig_web_search,
        )
    };
    let mut body = responses_body(Some(100));
    body["tools"] = serde_json::json!([
        {"type": "function", "name": "exec_command", "parameters": {}},
        {"type": "web_search"}
    ]);
    let mut off = searching(false).await;
    let message = "paddock broker: the provider's web search tool (`tools[].type` \
                   `web_search…`) would have the provider search and open pages on the web for \
                   the job, past its network policy; the job's `[network] web_search` is off (a \
                   host profile's `network.web_search` permits turning it on); refused";
    refused_for_the_network(&mut off, "/v1/responses", &body, message).await;
    // A model that searches by itself (Chat Completions' search models):
    // refused the same way, whatever the request asks.
    let chat = serde_json::json!({"model": "gpt-4o-search-preview",
        "messages": [{"role": "user", "content": "hi"}]});
    let (status, _) = post(&client(), &off, "/v1/chat/completions", &chat).await;
    let refused = ledger(&mut off, 1).await.remove(0);
    assert_eq!(
        (
            status,
            refused.status,
            refused.error.as_deref(),
            off.upstream.requests().len()
        ),
        (
            400,
            CallStatus::Refused,
            Some(
                "paddock broker: model `gpt-4o-search-preview` searches the web by itself, past \
                 the job's network policy; the job's `[network] web_search` is off (a host \
                 profile's `network.web_search` permits turning it on); refused"
            ),
            0
        )
    );
    let mut on = searching(true).await;
    let (status, _) = post(&client(), &on, "/v1/responses", &body).await;
    let ran = ledger(&mut on, 1).await.remove(0);
    assert_eq!(
        (status, ran.status, on.upstream.requests().len()),
        (200, CallStatus::Ok, 1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_model_outside_the_allowlist_is_cut() {
    let scenario = format!("served_model = \"gpt-5.4\"\n{ONE_TURN}");
    let mut rig = rig_with(&scenario, vec![], allow(&["gpt-5.5"]), false).await;
    let (status, text) = post(&client(), &rig, "/v1/responses", &responses_body(Some(100))).await;
    assert_eq!(status, 200);
    let message = "paddock broker: the upstream served model `gpt-5.4`, which the job model allowlist does not allow: the response was cut";
    assert!(text.contains(message), "{text}");
    assert!(!text.contains("response.completed"), "{text}");
    let call = ledger(&mut rig, 1).await.remove(0);
    assert_eq!(
        (
            call.status,
            call.served_model.as_deref(),
            call.error.as_deref()
        ),
        (CallStatus::StreamError, Some("gpt-5.4"), Some(message))
    );
    assert_eq!(rig.broker.policy.try_recv().unwrap().rule, "model");
}

/// A whole (non-streaming) answer names its served model only once
/// complete; the broker holds it and, for a model outside the allowlist,
/// answers 403 in the API's error format instead, on every wire API. The
/// ledger still prices what the upstream answered. Twin: an allowed served
/// model passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_answer_served_by_a_model_outside_the_allowlist_is_withheld() {
    let cases = [
        (
            "/v1/responses",
            serde_json::json!({"model": "gpt-5.5", "input": "hi"}),
            "gpt-5.4",
            "gpt-5.5",
        ),
        (
            "/v1/messages",
            serde_json::json!({"model": "claude-sonnet-4-5", "max_tokens": 100,
                "messages": [{"role": "user", "content": "hi"}]}),
            "claude-opus-4-5",
            "claude-sonnet-4-5",
        ),
        (
            "/v1/chat/completions",
            serde_json::json!({"model": "gpt-5.5", "messages": [{"role": "user", "content": "hi"}]}),
            "gpt-5.4",
            "gpt-5.5",
        ),
    ];
    for (path, body, outside, allowed) in cases {
        let requested = body["model"].as_str().unwrap().to_string();
        let scenario = format!("served_model = \"{outside}\"\n{ONE_TURN}");
        let mut rig = rig_with(&scenario, vec![], allow(&[&requested]), false).await;
        let (status, text) = post(&client(), &rig, path, &body).await;
        let message = format!("paddock broker: the upstream served model `{outside}`, which the job model allowlist does not allow: the response was withheld");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let want = if path == "/v1/messages" {
            serde_json::json!({"type": "error", "error": {"type": "permission_error", "message": message}})
        } else {
            serde_json::json!({"error": {"message": message, "type": "permission_error", "code": "permission_error"}})
        };
        assert_eq!((status, v), (403, want), "{path}");
        let call = ledger(&mut rig, 1).await.remove(0);
        assert_eq!(
            (
                call.status,
                call.http_status,
                call.served_model.as_deref(),
                call.error.as_deref(),
                call.tokens,
            ),
            (
                CallStatus::StreamError,
                Some(200),
                Some(outside),
                Some(message.as_str()),
                expected_usage(),
            ),
            "{path}"
        );
        assert_eq!(
            rig.broker.policy.try_recv().unwrap(),
            PolicyNotice {
                rule: "model".into(),
                message: message.clone()
            }
        );
        assert_eq!(rig.broker.served_refused(), Some(message));

        // Twin: served by an allowed model, the answer passes.
        let scenario = format!("served_model = \"{allowed}\"\n{ONE_TURN}");
        let mut rig = rig_with(&scenario, vec![], allow(&[&requested]), false).await;
        let (status, text) = post(&client(), &rig, path, &body).await;
        assert_eq!(status, 200, "{path}: {text}");
        let call = ledger(&mut rig, 1).await.remove(0);
        assert_eq!((call.status, call.error), (CallStatus::Ok, None), "{path}");
        assert_eq!(rig.broker.served_refused(), None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unpriced_model_is_refused_unless_allowed() {
    let mut body = responses_body(Some(100));
    body["model"] = "local-model".into();
    let mut refusing = rig(ONE_TURN, vec![]).await;
    let (status, _) = post(&client(), &refusing, "/v1/responses", &body).await;
    assert_eq!(status, 400);
    let call = ledger(&mut refusing, 1).await.remove(0);
    assert_eq!(
        (call.status, call.error.as_deref()),
        (
            CallStatus::Refused,
            Some("paddock broker: model `local-model` has no price in price table 2026-11-30; Paddock refuses calls it cannot meter (set upstream.allow_unpriced to run it unpriced)")
        )
    );
    let mut allowing = rig_with(ONE_TURN, vec![], ModelAllowlist::any(), true).await;
    let (status, _) = post(&client(), &allowing, "/v1/responses", &body).await;
    assert_eq!(status, 200);
    let call = ledger(&mut allowing, 1).await.remove(0);
    assert_eq!(
        (call.status, call.tokens, call.cost_micros),
        (CallStatus::Ok, expected_usage(), 0)
    );
}

/// Chat Completions: the broker asks for usage (`include_usage`), the
/// answer passes through byte for byte, and the ledger has the exact usage.
/// The key goes upstream in Azure's `api-key` header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_completions_get_include_usage_and_an_api_key_header() {
    let scenario = r#"
[[turn]]
text = "Chat answers are metered too."
usage = { input = 900, cached = 100, output = 40, reasoning = 10 }
"#;
    let mut rig = rig_full(
        scenario,
        vec![],
        ModelAllowlist::any(),
        false,
        Some("azure-real-key"),
        RetryPolicy::default(),
    )
    .await;
    let body = serde_json::json!({"model": "gpt-5.5", "stream": true,
        "messages": [{"role": "user", "content": "hi"}]});
    let (status, text) = post(&client(), &rig, "/v1/chat/completions", &body).await;
    assert_eq!(status, 200, "{text}");
    let requests = rig.upstream.requests();
    assert_eq!(
        requests[0].body["stream_options"],
        serde_json::json!({"include_usage": true})
    );
    assert_eq!(requests[0].headers["api-key"], "azure-real-key");
    assert!(!requests[0].headers.contains_key("authorization"));
    assert!(text.contains("\"usage\":{"), "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let call = ledger(&mut rig, 1).await.remove(0);
    assert_eq!(
        (call.status, call.estimated, call.tokens, call.cost_micros),
        (
            CallStatus::Ok,
            false,
            TokenUsage {
                input_tokens: 900,
                cached_input_tokens: 100,
                cache_write_tokens: 0,
                output_tokens: 40,
                reasoning_tokens: 10,
            },
            // 900 × 5 + 100 × 0.5 + 40 × 30 = 4500 + 50 + 1200.
            5_750
        )
    );
    // A client's own stream_options are kept, include_usage added.
    let body = serde_json::json!({"model": "gpt-5.5", "stream": true,
        "stream_options": {"include_obfuscation": false},
        "messages": [{"role": "user", "content": "hi"}]});
    let (status, _) = post(&client(), &rig, "/v1/chat/completions", &body).await;
    assert_eq!(status, 200);
    assert_eq!(
        rig.upstream.requests()[1].body["stream_options"],
        serde_json::json!({"include_obfuscation": false, "include_usage": true})
    );
    // Non-streaming: the body passes unchanged; usage from the JSON.
    let body = serde_json::json!({"model": "gpt-5.5",
        "messages": [{"role": "user", "content": "hi"}]});
    let (status, _) = post(&client(), &rig, "/v1/chat/completions", &body).await;
    assert_eq!(status, 200);
    assert_eq!(rig.upstream.requests()[2].body, body);
    let calls = ledger(&mut rig, 2).await;
    assert!(calls
        .iter()
        .all(|c| c.tokens == call.tokens && !c.estimated));
}

/// Anthropic Messages without `stream`: one JSON message, metered exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_streaming_messages_are_metered() {
    let scenario = r#"
[[turn]]
text = "Whole."
usage = { input = 10, cached = 100, cache_write = 1000, output = 7 }
"#;
    let mut rig = rig(scenario, vec![]).await;
    let body = serde_json::json!({"model": "claude-sonnet-4-5", "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}]});
    let (status, text) = post(&client(), &rig, "/v1/messages", &body).await;
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["type"], "message");
    let call = ledger(&mut rig, 1).await.remove(0);
    assert_eq!(
        (call.status, call.estimated, call.tokens, call.cost_micros),
        (
            CallStatus::Ok,
            false,
            TokenUsage {
                input_tokens: 10,
                cached_input_tokens: 100,
                cache_write_tokens: 1_000,
                output_tokens: 7,
                reasoning_tokens: 0,
            },
            // 10 × 3 + 100 × 0.3 + 1000 × 3.75 + 7 × 15.
            3_915
        )
    );
}

/// A stream the upstream cuts before its usage gets an `estimated` row on
/// every API: input = request bytes / 4 (Messages: the `message_start`
/// count, 0 in this scenario), output = generated characters / 4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_cut_before_their_usage_get_estimated_rows() {
    // 32 characters of text: 8 output tokens.
    let scenario = r#"
[[turn]]
text = "thirty-two characters of text.."
disconnect = true
"#;
    for (path, body, input_tokens) in [
        (
            "/v1/responses",
            serde_json::json!({"model": "gpt-5.5", "stream": true, "input": "x".repeat(400)}),
            None,
        ),
        (
            "/v1/chat/completions",
            serde_json::json!({"model": "gpt-5.5", "stream": true,
                "messages": [{"role": "user", "content": "x".repeat(400)}]}),
            None,
        ),
        (
            "/v1/messages",
            serde_json::json!({"model": "claude-sonnet-4-5", "stream": true, "max_tokens": 10,
                "messages": [{"role": "user", "content": "x".repeat(400)}]}),
            Some(0),
        ),
    ] {
        let mut rig = rig(scenario, vec![]).await;
        // The cut may reach the client before or after the response head,
        // so the send itself may fail: the ledger row is what is checked.
        if let Ok(resp) = client()
            .post(format!("{}{path}", rig.broker.url))
            .bearer_auth(rig.broker.token.expose())
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
        {
            let _ = resp.bytes().await;
        }
        let call = ledger(&mut rig, 1).await.remove(0);
        let request_bytes = if path == "/v1/chat/completions" {
            // The broker added stream_options before sending.
            serde_json::to_vec(&rig.upstream.requests()[0].body)
                .unwrap()
                .len() as u64
        } else {
            body.to_string().len() as u64
        };
        assert_eq!(
            (call.status, call.estimated, call.tokens),
            (
                CallStatus::StreamError,
                true,
                TokenUsage {
                    input_tokens: input_tokens.unwrap_or(request_bytes / 4),
                    output_tokens: 8,
                    ..TokenUsage::default()
                }
            ),
            "{path}: {call:?}"
        );
        assert!(call.cost_micros > 0, "{path}: {call:?}");
    }
}

/// A job's token is worthless at another job's broker, and no token at all
/// is refused: attribution is by endpoint and token together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_only_works_at_its_own_broker() {
    let mut a = rig(ONE_TURN, vec![]).await;
    let b = rig(ONE_TURN, vec![]).await;
    let client = client();
    let body = responses_body(Some(100)).to_string();
    let status = |url: String, token: Option<String>| {
        let (client, body) = (client.clone(), body.clone());
        async move {
            let mut rb = client
                .post(format!("{url}/v1/responses"))
                .header("content-type", "application/json")
                .body(body);
            if let Some(t) = token {
                rb = rb.bearer_auth(t);
            }
            let resp = rb.send().await.unwrap();
            let status = resp.status().as_u16();
            let _ = resp.bytes().await;
            status
        }
    };
    let token_a = a.broker.token.expose().to_string();
    assert_eq!(
        status(b.broker.url.clone(), Some(token_a.clone())).await,
        401
    );
    assert_eq!(status(b.broker.url.clone(), None).await, 401);
    assert_eq!(status(a.broker.url.clone(), Some(token_a)).await, 200);
    // Only the authorized call reached the ledger (and the upstream).
    assert_eq!(ledger(&mut a, 1).await[0].status, CallStatus::Ok);
    assert_eq!(b.upstream.requests().len(), 0);
}

/// Retries with a 1 ms backoff base, so that tests wait only where the
/// upstream asks them to.
fn fast_retry(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        spec: paddock_protocol::RetrySpec {
            max_attempts,
            base_delay_ms: 1,
            max_delay_ms: 2_000,
        },
        deadline: None,
    }
}

type RowSummary = (u64, CallStatus, Option<u16>, i64, Option<String>);

fn summary(calls: &[ModelCall]) -> Vec<RowSummary> {
    calls
        .iter()
        .map(|c| {
            (
                c.seq,
                c.status,
                c.http_status,
                c.cost_micros,
                c.error.clone(),
            )
        })
        .collect()
}

/// A call rate limited twice (429 with `retry-after-ms: 150`) is retried by
/// the broker after the upstream's wait: the engine sees only the answer;
/// every attempt is a ledger row, the failed ones with their status and no
/// cost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_call_is_retried_after_the_upstreams_wait() {
    let scenario = r#"
[[turn]]
text = "Answered on the third attempt."
usage = { input = 1000, output = 100 }
transient = { status = 429, times = 2, message = "Rate limit reached for gpt-5.5", retry_after_ms = 150 }
"#;
    let mut rig = rig_full(
        scenario,
        job_ceiling(10 * CALL_MICROS),
        ModelAllowlist::any(),
        false,
        None,
        fast_retry(4),
    )
    .await;
    let started = std::time::Instant::now();
    let (status, text) = post(&client(), &rig, "/v1/responses", &responses_body(Some(100))).await;
    let elapsed = started.elapsed();
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("response.completed"), "{text}");
    assert!(
        elapsed >= std::time::Duration::from_millis(300),
        "{elapsed:?}"
    );
    let calls = ledger(&mut rig, 3).await;
    let retried = |n: u32| {
        Some(format!(
            "Rate limit reached for gpt-5.5 (attempt {n} of 4; the broker retries in 150 ms)"
        ))
    };
    assert_eq!(
        summary(&calls),
        vec![
            (1, CallStatus::HttpError, Some(429), 0, retried(1)),
            (2, CallStatus::HttpError, Some(429), 0, retried(2)),
            (3, CallStatus::Ok, Some(200), CALL_MICROS, None),
        ]
    );
    assert_eq!(calls[2].tokens, expected_usage());
    assert_eq!(rig.upstream.requests().len(), 3);
    assert_eq!(rig.broker.spent_micros(), CALL_MICROS);
}

/// `Retry-After` in seconds on a Messages 529 (overloaded), then backoff
/// without a header on a 503: both retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overloaded_and_unavailable_are_retried_on_messages() {
    let scenario = r#"
[[turn]]
text = "Fine now."
usage = { input = 10, output = 5 }
transient = { status = 529, message = "Overloaded", retry_after = "0" }

[[turn]]
text = "Again fine."
usage = { input = 10, output = 5 }
transient = { status = 503, times = 2, message = "Service unavailable" }
"#;
    let mut rig = rig_full(
        scenario,
        vec![],
        ModelAllowlist::any(),
        false,
        None,
        fast_retry(3),
    )
    .await;
    let body = serde_json::json!({"model": "claude-sonnet-4-5", "stream": true, "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}]});
    let (status, text) = post(&client(), &rig, "/v1/messages", &body).await;
    assert_eq!(status, 200, "{text}");
    let calls = ledger(&mut rig, 2).await;
    assert_eq!(
        summary(&calls),
        vec![
            (
                1,
                CallStatus::HttpError,
                Some(529),
                0,
                Some("Overloaded (attempt 1 of 3; the broker retries in 0 ms)".into())
            ),
            (2, CallStatus::Ok, Some(200), 105, None),
        ]
    );
    // The second turn: two 503s, each retried after a jittered wait of at
    // most 1 ms, then 2 ms.
    let body = serde_json::json!({"model": "claude-sonnet-4-5", "stream": true, "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"},
                     {"role": "assistant", "content": "Fine now."},
                     {"role": "user", "content": "more"}]});
    let (status, text) = post(&client(), &rig, "/v1/messages", &body).await;
    assert_eq!(status, 200, "{text}");
    let calls = ledger(&mut rig, 3).await;
    let statuses: Vec<_> = calls.iter().map(|c| (c.seq, c.http_status)).collect();
    assert_eq!(
        statuses,
        vec![(3, Some(503)), (4, Some(503)), (5, Some(200))]
    );
    for c in &calls[..2] {
        let e = c.error.as_deref().unwrap();
        assert!(e.starts_with("Service unavailable (attempt "), "{e}");
    }
}

/// No retry past `max_attempts`, nor when the upstream asks for a longer
/// wait than `max_delay_ms`: the engine gets the upstream's own error, and
/// the last attempt's row carries it unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_stop_at_max_attempts_and_at_a_wait_too_long() {
    let scenario = r#"
[[turn]]
text = "Never reached."
transient = { status = 429, times = 10, message = "slow down", retry_after_ms = 5 }
"#;
    let mut rig = rig_full(
        scenario,
        vec![],
        ModelAllowlist::any(),
        false,
        None,
        fast_retry(2),
    )
    .await;
    let (status, text) = post(&client(), &rig, "/v1/responses", &responses_body(Some(100))).await;
    assert_eq!(status, 429, "{text}");
    assert!(text.contains("slow down"), "{text}");
    let calls = ledger(&mut rig, 2).await;
    assert_eq!(
        summary(&calls),
        vec![
            (
                1,
                CallStatus::HttpError,
                Some(429),
                0,
                Some("slow down (attempt 1 of 2; the broker retries in 5 ms)".into())
            ),
            (
                2,
                CallStatus::HttpError,
                Some(429),
                0,
                Some("slow down".into())
            ),
        ]
    );

    // Retry-After: 60 s, a year, or more than a Duration holds (once a
    // panic of the broker's handler: the call never answered) is past
    // max_delay_ms (2 s): not retried, the 429 answered and on the ledger.
    for after in ["60", "31536000", "1e300"] {
        let scenario = format!(
            r#"
[[turn]]
text = "Never reached."
transient = {{ status = 429, message = "come back in a minute", retry_after = "{after}" }}
"#
        );
        let mut rig = rig_full(
            &scenario,
            vec![],
            ModelAllowlist::any(),
            false,
            None,
            fast_retry(4),
        )
        .await;
        let (status, _) = post(&client(), &rig, "/v1/responses", &responses_body(Some(100))).await;
        assert_eq!(status, 429, "{after}");
        let calls = ledger(&mut rig, 1).await;
        assert_eq!(
            summary(&calls),
            vec![(
                1,
                CallStatus::HttpError,
                Some(429),
                0,
                Some("come back in a minute".into())
            )],
            "{after}"
        );
        assert_eq!(rig.upstream.requests().len(), 1, "{after}");
    }
}

/// Errors that are not transient (400) are never retried, and a stream the
/// upstream cuts after its first byte is not replayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_errors_and_cut_streams_are_not_retried() {
    for scenario in [
        "[[turn]]\nerror = { status = 400, message = \"bad request\" }\n",
        "[[turn]]\ntext = \"half\"\ndisconnect = true\n",
        "[[turn]]\ntext = \"half\"\nstream_error = { message = \"overloaded\", type = \"overloaded_error\" }\n",
    ] {
        let mut rig = rig_full(
            scenario,
            vec![],
            ModelAllowlist::any(),
            false,
            None,
            fast_retry(4),
        )
        .await;
        if let Ok(resp) = client()
            .post(format!("{}/v1/responses", rig.broker.url))
            .bearer_auth(rig.broker.token.expose())
            .body(responses_body(Some(100)).to_string())
            .send()
            .await
        {
            let _ = resp.bytes().await;
        }
        let calls = ledger(&mut rig, 1).await;
        assert_ne!(calls[0].status, CallStatus::Ok, "{scenario}");
        // Give a (wrong) retry the time to arrive.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert_eq!(rig.upstream.requests().len(), 1, "{scenario}");
        assert!(rig.broker.calls.try_recv().is_err(), "{scenario}");
    }
}

/// A connection the upstream closes before sending a byte is retried: a
/// stand-in in front of the scripted upstream drops the first connection
/// after reading the request, then forwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_reset_before_the_first_byte_is_retried() {
    let mut rig = rig(ONE_TURN, vec![]).await;
    let target = rig
        .upstream
        .base
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .to_string();
    let front = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let front_addr = front.local_addr().unwrap();
    tokio::spawn(async move {
        let mut first = true;
        loop {
            let (mut conn, _) = front.accept().await.unwrap();
            if first {
                first = false;
                let mut buf = [0u8; 1024];
                let _ = tokio::io::AsyncReadExt::read(&mut conn, &mut buf).await;
                drop(conn);
                continue;
            }
            let target = target.clone();
            tokio::spawn(async move {
                let mut up = tokio::net::TcpStream::connect(target).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut conn, &mut up).await;
            });
        }
    });
    let broker = broker::start(
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
        BrokerConfig {
            job_id: "job-reset".into(),
            attempt: 1,
            upstream: Upstream {
                base: format!("http://{front_addr}/v1"),
                provider: Provider::Scripted,
            },
            prices: Arc::new(PriceTable::vendored().unwrap()),
            ceilings: vec![],
            allowlist: ModelAllowlist::any(),
            allow_unpriced: false,
            web_search: false,
            retry: fast_retry(3),
            max_upstream_event_bytes: 16 << 20,
            ledger: std::sync::Arc::new(paddock::broker::ledger::MemoryLedger::default()),
        },
    )
    .unwrap();
    rig.broker = broker;
    let (status, text) = post(&client(), &rig, "/v1/responses", &responses_body(Some(100))).await;
    assert_eq!(status, 200, "{text}");
    let calls = ledger(&mut rig, 2).await;
    assert_eq!(
        (calls[0].status, calls[0].http_status, calls[0].cost_micros),
        (CallStatus::HttpError, None, 0)
    );
    let e = calls[0].error.as_deref().unwrap();
    assert!(
        e.starts_with("paddock broker: upstream scripted unreachable: ")
            && e.contains("(attempt 1 of 3; the broker retries in "),
        "{e}"
    );
    assert_eq!(
        (calls[1].seq, calls[1].status, calls[1].cost_micros),
        (2, CallStatus::Ok, CALL_MICROS)
    );
}

/// A broker in front of a stand-in upstream that answers every call with
/// `answer` (a JSON body).
async fn json_upstream_broker(answer: serde_json::Value) -> BrokerHandle {
    let app = axum::Router::new().fallback(move || {
        let answer = answer.clone();
        async move { axum::Json(answer) }
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    broker::start(
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
        BrokerConfig {
            job_id: "job-tier".into(),
            attempt: 1,
            upstream: Upstream {
                base,
                provider: Provider::OpenAi {
                    key: Secret::new("sk-test".into()),
                },
            },
            prices: Arc::new(PriceTable::vendored().unwrap()),
            ceilings: vec![],
            allowlist: ModelAllowlist::any(),
            allow_unpriced: false,
            web_search: false,
            retry: RetryPolicy::default(),
            max_upstream_event_bytes: 16 << 20,
            ledger: Arc::new(MemoryLedger::default()),
        },
    )
    .unwrap()
}

/// The ledger prices a call at the service tier its answer reports:
/// OpenAI's `service_tier` (`priority` costs twice gpt-5's standard rates,
/// `flex` half), Anthropic's `usage.service_tier` (`standard`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_are_priced_at_the_service_tier_the_answer_reports() {
    let openai = |tier: &str| {
        serde_json::json!({"id": "r", "object": "response", "status": "completed",
            "model": "gpt-5", "service_tier": tier, "output": [],
            "usage": {"input_tokens": 1000, "output_tokens": 100, "total_tokens": 1100}})
    };
    let request = serde_json::json!({"model": "gpt-5", "input": "hi", "max_output_tokens": 100});
    let mut costs = Vec::new();
    for tier in ["default", "priority", "flex"] {
        let mut broker = json_upstream_broker(openai(tier)).await;
        let resp = client()
            .post(format!("{}/v1/responses", broker.url))
            .bearer_auth(broker.token.expose())
            .header("content-type", "application/json")
            .body(request.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200, "{tier}");
        let call = broker.calls.recv().await.unwrap().row;
        costs.push((tier, call.status, call.cost_micros));
    }
    let anthropic = serde_json::json!({"id": "m", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5", "content": [], "stop_reason": "end_turn",
        "usage": {"input_tokens": 1000, "output_tokens": 100, "service_tier": "standard"}});
    let mut broker = json_upstream_broker(anthropic).await;
    let resp = client()
        .post(format!("{}/v1/messages", broker.url))
        .bearer_auth(broker.token.expose())
        .header("content-type", "application/json")
        .body(
            serde_json::json!({"model": "claude-sonnet-4-5", "max_tokens": 100,
                "messages": [{"role": "user", "content": "hi"}]})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let call = broker.calls.recv().await.unwrap().row;
    costs.push(("standard", call.status, call.cost_micros));
    assert_eq!(
        costs,
        vec![
            // 1000 × $1.25/M + 100 × $10/M.
            ("default", CallStatus::Ok, 2_250),
            // 1000 × $2.50/M + 100 × $20/M.
            ("priority", CallStatus::Ok, 4_500),
            // 1000 × $0.625/M + 100 × $5/M.
            ("flex", CallStatus::Ok, 1_125),
            // 1000 × $3/M + 100 × $15/M.
            ("standard", CallStatus::Ok, 4_500),
        ]
    );
}

/// Anthropic bills a cache write kept an hour (`cache_control.ttl` `1h`)
/// at twice the input price, not the five-minute write price the table
/// holds (`cache_write`): the ledger prices the hour's part of the writes
/// (`usage.cache_creation.ephemeral_1h_input_tokens`) so. Before, 100,000
/// such tokens on claude-sonnet-4-5 were priced $0.375, of the $0.60 billed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_writes_kept_an_hour_are_priced_at_their_own_rate() {
    let anthropic = serde_json::json!({"id": "m", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5", "content": [], "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "cache_creation_input_tokens": 100_000,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 100_000},
            "cache_read_input_tokens": 0, "output_tokens": 10}});
    let mut broker = json_upstream_broker(anthropic).await;
    let resp = client()
        .post(format!("{}/v1/messages", broker.url))
        .bearer_auth(broker.token.expose())
        .header("content-type", "application/json")
        .body(
            serde_json::json!({"model": "claude-sonnet-4-5", "max_tokens": 100,
                "system": [{"type": "text", "text": "long", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
                "messages": [{"role": "user", "content": "hi"}]})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let call = broker.calls.recv().await.unwrap().row;
    // 10 × $3/M + 100 000 × $6/M + 10 × $15/M.
    assert_eq!((call.status, call.cost_micros), (CallStatus::Ok, 600_180));
    assert_eq!(broker.spent_micros(), 600_180);
}

/// An upstream that answers every request with `content_type`, `head`, then
/// `x` without end: the broker must not hold it whole.
async fn endless_upstream(content_type: &'static str, head: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().fallback(move || async move {
        let tail = futures::stream::repeat_with(|| {
            Ok::<_, std::io::Error>(bytes::Bytes::from_static(&[b'x'; 4096]))
        });
        let body = futures::StreamExt::chain(
            futures::stream::once(async move { Ok(bytes::Bytes::from_static(head.as_bytes())) }),
            tail,
        );
        axum::response::Response::builder()
            .header("content-type", content_type)
            .body(axum::body::Body::from_stream(body))
            .unwrap()
    });
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/v1")
}

/// A broker in front of `base` holding at most 64 KiB of one upstream
/// event or answer.
async fn broker_at(base: String) -> BrokerHandle {
    broker::start(
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
        BrokerConfig {
            job_id: "job-limit".into(),
            attempt: 1,
            upstream: Upstream {
                base,
                provider: Provider::Scripted,
            },
            prices: Arc::new(PriceTable::vendored().unwrap()),
            ceilings: vec![],
            allowlist: ModelAllowlist::any(),
            allow_unpriced: false,
            web_search: false,
            retry: fast_retry(1),
            max_upstream_event_bytes: 64 << 10,
            ledger: Arc::new(MemoryLedger::default()),
        },
    )
    .unwrap()
}

/// An SSE event that never ends is cut at the limit: the engine gets the
/// broker's error event naming the limit, the ledger a `stream_error` row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_event_past_the_limit_is_cut() {
    let base = endless_upstream(
        "text/event-stream",
        "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"",
    )
    .await;
    let mut broker = broker_at(base).await;
    let resp = client()
        .post(format!("{}/v1/responses", broker.url))
        .bearer_auth(broker.token.expose())
        .body(responses_body(Some(100)).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let text = tokio::time::timeout(std::time::Duration::from_secs(20), resp.text())
        .await
        .expect("the broker ends the stream")
        .unwrap();
    let cut = "paddock broker: the upstream sent an SSE event of more than 65536 bytes, past broker.max_upstream_event_bytes (65536 bytes)";
    let tail = format!(
        "\n\nevent: response.failed\ndata: {}\n\n",
        serde_json::json!({"type": "response.failed", "response": {
            "id": "resp_paddock_cut_1", "object": "response", "status": "failed",
            "model": "gpt-5.5", "error": {"code": "api_error",
            "message": format!("{cut}: the response was cut")}}})
    );
    assert!(text.ends_with(&tail), "{}", &text[text.len() - 600..]);
    assert!(
        text.len() < 1 << 20,
        "{} bytes reached the engine",
        text.len()
    );
    let call = broker.calls.recv().await.unwrap().row;
    assert_eq!(
        (call.status, call.error.as_deref(), call.estimated),
        (CallStatus::StreamError, Some(cut), true)
    );
    assert_eq!(
        broker.policy.recv().await.unwrap(),
        PolicyNotice {
            rule: "limits".into(),
            message: format!("{cut}: the response was cut"),
        }
    );
}

/// A whole (JSON) answer longer than the limit is withheld unread: a 502
/// naming the limit, and an estimated row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_answer_past_the_limit_is_withheld() {
    let base = endless_upstream("application/json", "{\"model\":\"").await;
    let mut broker = broker_at(base).await;
    let resp = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        client()
            .post(format!("{}/v1/responses", broker.url))
            .bearer_auth(broker.token.expose())
            .body(responses_body(Some(100)).to_string())
            .send(),
    )
    .await
    .expect("the broker answers")
    .unwrap();
    let message = "paddock broker: the upstream answered with a body of more than 65536 bytes, past broker.max_upstream_event_bytes: the response was withheld";
    assert_eq!(resp.status(), 502);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&resp.text().await.unwrap()).unwrap(),
        serde_json::json!({"error": {"message": message, "type": "api_error", "code": "api_error"}})
    );
    let call = broker.calls.recv().await.unwrap().row;
    assert_eq!(
        (call.status, call.error.as_deref(), call.estimated),
        (CallStatus::StreamError, Some(message), true)
    );
}

/// A ledger whose writes wait for the test to let them through.
#[derive(Debug)]
struct GatedLedger {
    rows: MemoryLedger,
    ahead: tokio::sync::Semaphore,
    settle: tokio::sync::Semaphore,
}

impl Ledger for GatedLedger {
    fn write_ahead<'a>(&'a self, call: &'a ModelCall) -> LedgerFuture<'a> {
        Box::pin(async move {
            self.ahead.acquire().await.unwrap().forget();
            self.rows.write_ahead(call).await
        })
    }

    fn settle<'a>(&'a self, call: &'a ModelCall) -> LedgerFuture<'a> {
        Box::pin(async move {
            self.settle.acquire().await.unwrap().forget();
            self.rows.settle(call).await
        })
    }
}

/// Issue #9: money spent upstream is always on the ledger. A call reaches
/// the upstream only once its row is written ahead (`in_flight`), and its
/// answer's final chunk reaches the engine only once the row is settled.
#[tokio::test]
async fn a_call_is_on_the_ledger_before_it_leaves_and_settled_before_its_answer_ends() {
    let gated = Arc::new(GatedLedger {
        rows: MemoryLedger::default(),
        ahead: tokio::sync::Semaphore::new(0),
        settle: tokio::sync::Semaphore::new(0),
    });
    let mut rig = rig_on(
        ONE_TURN,
        vec![],
        ModelAllowlist::any(),
        false,
        None,
        RetryPolicy::default(),
        gated.clone(),
        false,
    )
    .await;
    let call = {
        let (client, url, token) = (
            client(),
            format!("{}/v1/responses", rig.broker.url),
            rig.broker.token.expose().to_string(),
        );
        tokio::spawn(async move {
            let resp = client
                .post(url)
                .bearer_auth(token)
                .header("content-type", "application/json")
                .body(responses_body(Some(100)).to_string())
                .send()
                .await
                .unwrap();
            (resp.status().as_u16(), resp.text().await.unwrap())
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        (rig.upstream.requests().len(), gated.rows.rows().len()),
        (0, 0),
        "forwarded before its row was written"
    );
    gated.ahead.add_permits(1);
    // Forwarded once written: a guard of 120 s, far above what a loaded
    // host takes (a fixed 2 s was not).
    let started = std::time::Instant::now();
    while rig.upstream.requests().is_empty()
        && started.elapsed() < std::time::Duration::from_secs(120)
    {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let rows = gated.rows.rows();
    assert_eq!(
        (
            rig.upstream.requests().len(),
            call.is_finished(),
            rows.iter()
                .map(|r| (r.seq, r.status, r.estimated, r.tokens))
                .collect::<Vec<_>>()
        ),
        (
            1,
            false,
            vec![(
                1,
                CallStatus::InFlight,
                true,
                // Its worst case: the input estimate and its cap.
                TokenUsage {
                    input_tokens: 1000,
                    output_tokens: 100,
                    ..TokenUsage::default()
                }
            )]
        ),
        "the answer ended before its row was settled"
    );
    gated.settle.add_permits(1);
    let (status, text) = call.await.unwrap();
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("response.completed"), "{text}");
    let settled = gated.rows.rows();
    assert_eq!(
        settled
            .iter()
            .map(|r| (r.seq, r.status, r.cost_micros))
            .collect::<Vec<_>>(),
        vec![(1, CallStatus::Ok, CALL_MICROS)]
    );
    assert_eq!(ledger(&mut rig, 1).await, settled);
    assert!(rig.broker.settled(std::time::Duration::from_secs(1)).await);
}

/// A call the ledger cannot write ahead is not forwarded: nothing is
/// spent that the ledger does not show.
#[tokio::test]
async fn a_call_the_ledger_cannot_take_is_not_forwarded() {
    #[derive(Debug)]
    struct Full;
    impl Ledger for Full {
        fn write_ahead<'a>(&'a self, call: &'a ModelCall) -> LedgerFuture<'a> {
            Box::pin(async move {
                Err(paddock::broker::ledger::LedgerError::Duplicate {
                    job_id: call.job_id.clone(),
                    seq: call.seq,
                })
            })
        }
        fn settle<'a>(&'a self, _: &'a ModelCall) -> LedgerFuture<'a> {
            Box::pin(async { Ok(()) })
        }
    }
    let rig = rig_on(
        ONE_TURN,
        vec![],
        ModelAllowlist::any(),
        false,
        None,
        RetryPolicy::default(),
        Arc::new(Full),
        false,
    )
    .await;
    let (status, text) = post(&client(), &rig, "/v1/responses", &responses_body(Some(100))).await;
    assert_eq!(status, 503, "{text}");
    assert!(
        text.contains("paddock broker: the call was not forwarded: write model call 1 of job job-budget ahead: the ledger already has it"),
        "{text}"
    );
    assert_eq!(rig.upstream.requests().len(), 0);
    assert!(rig.broker.settled(std::time::Duration::from_secs(1)).await);
}

/// What the slow upstream bills every call: 1,000 input tokens and 20,000
/// output tokens, 19,000 of them reasoning the stream never shows.
fn billed() -> TokenUsage {
    TokenUsage {
        input_tokens: 1_000,
        output_tokens: 20_000,
        reasoning_tokens: 19_000,
        ..TokenUsage::default()
    }
}

/// When [`thinking_upstream`] has a request, and when it may answer.
#[derive(Debug)]
struct Thinking {
    /// A permit for each request it has (its row was written ahead).
    asked: tokio::sync::Semaphore,
    /// A permit for each answer it may finish.
    answer: tokio::sync::Semaphore,
}

/// An upstream that thinks before it answers, as a reasoning model does,
/// until the test lets it answer (so the test hangs up, or stops the
/// broker, before the answer, whatever a loaded host's timing: a fixed
/// pause once raced a wait of 150 ms): a stream's `response.created` at
/// once and its `response.completed` (with [`billed`]'s usage) when let;
/// a whole answer when let. Its base URL and its [`Thinking`].
async fn thinking_upstream() -> (String, Arc<Thinking>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let thinking = Arc::new(Thinking {
        asked: tokio::sync::Semaphore::new(0),
        answer: tokio::sync::Semaphore::new(0),
    });
    let gate = thinking.clone();
    let app = axum::Router::new().fallback(move |body: bytes::Bytes| async move {
        gate.asked.add_permits(1);
        let request: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let usage = serde_json::json!({"input_tokens": 1000, "output_tokens": 20000,
            "output_tokens_details": {"reasoning_tokens": 19000}, "total_tokens": 21000});
        let response = serde_json::json!({"id": "resp_1", "object": "response",
            "status": "completed", "model": "gpt-5.5", "output": [], "usage": usage});
        let pause = async move { gate.answer.acquire().await.unwrap().forget() };
        if request["stream"] != true {
            pause.await;
            return axum::response::Response::builder()
                .header("content-type", "application/json")
                .body(axum::body::Body::from(response.to_string()))
                .unwrap();
        }
        let created = format!(
            "event: response.created\ndata: {}\n\n",
            serde_json::json!({"type": "response.created", "response": {"id": "resp_1",
                "object": "response", "status": "in_progress", "model": "gpt-5.5"}})
        );
        let completed = format!(
            "event: response.completed\ndata: {}\n\n",
            serde_json::json!({"type": "response.completed", "response": response})
        );
        let body = futures::StreamExt::chain(
            futures::stream::once(async move { Ok::<_, std::io::Error>(created) }),
            futures::stream::once(async move {
                pause.await;
                Ok(completed)
            }),
        );
        axum::response::Response::builder()
            .header("content-type", "text/event-stream")
            .body(axum::body::Body::from_stream(body))
            .unwrap()
    });
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/v1"), thinking)
}

/// A job that hangs up on its call before the usage arrives (mid-stream,
/// or before a whole answer's head) still has the call on its ledger and
/// its budget as the upstream billed it: the broker reads the answer to
/// its end without the engine. Before, the stream's row was estimated from
/// the characters seen (no output at all: the reasoning never shows) and
/// the whole answer's row was `interrupted` with its input estimate, and
/// neither counted in the budget, so a job could spend any amount in calls
/// it hung up on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_engine_hangs_up_on_is_metered_as_the_upstream_billed_it() {
    let (base, thinking) = thinking_upstream().await;
    // 1000 × $5/M + 20 000 × $30/M.
    let cost = 605_000;
    for stream in [false, true] {
        let ledger = Arc::new(MemoryLedger::default());
        let mut broker = broker::start(
            TcpListener::bind("127.0.0.1:0").await.unwrap(),
            BrokerConfig {
                job_id: "job-hang-up".into(),
                attempt: 1,
                upstream: Upstream {
                    base: base.clone(),
                    provider: Provider::Scripted,
                },
                prices: Arc::new(PriceTable::vendored().unwrap()),
                ceilings: job_ceiling(10_000_000),
                allowlist: ModelAllowlist::any(),
                allow_unpriced: false,
                web_search: false,
                retry: fast_retry(1),
                max_upstream_event_bytes: 16 << 20,
                ledger: ledger.clone(),
            },
        )
        .unwrap();
        let mut body = responses_body(Some(20_000));
        body["stream"] = stream.into();
        let send = client()
            .post(format!("{}/v1/responses", broker.url))
            .bearer_auth(broker.token.expose())
            .body(body.to_string())
            .send();
        if stream {
            // The stream's first event, then the engine hangs up.
            let mut resp = send.await.unwrap();
            assert!(resp.chunk().await.unwrap().is_some());
            drop(resp);
        } else {
            // The engine hangs up before any answer, once the upstream
            // has the call.
            tokio::select! {
                answer = send => panic!("answered before the hang-up: {answer:?}"),
                asked = thinking.asked.acquire() => asked.unwrap().forget(),
            }
        }
        thinking.answer.add_permits(1);
        // A guard against a call never settled, far above what a loaded
        // host (the suites side by side on two cores) takes.
        let call = tokio::time::timeout(std::time::Duration::from_secs(120), broker.calls.recv())
            .await
            .expect("the call is settled")
            .unwrap()
            .row;
        assert_eq!(
            (call.tokens, call.cost_micros, call.estimated),
            (billed(), cost, false),
            "stream {stream}: {call:?}"
        );
        assert_eq!(broker.spent_micros(), cost, "stream {stream}");
        assert_eq!(ledger.rows()[0].cost_micros, cost, "stream {stream}");
    }
}

/// A call whose end is never seen (its job's broker stopped while the
/// upstream still answered it: the job ended, or its `paddock` was killed
/// and the reaper settles what was written ahead) keeps its worst case on
/// the ledger: its input estimate and the most output it may produce, as
/// its budget reservation priced them, so a ticket's or a project's later
/// jobs count it at no less than it may have cost. Before, the row written
/// ahead held the input estimate only: a job could end on calls still
/// running and leave its ticket a fraction of what they cost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_end_is_never_seen_keeps_its_worst_case() {
    let (base, thinking) = thinking_upstream().await;
    let ledger = Arc::new(MemoryLedger::default());
    let broker = broker::start(
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
        BrokerConfig {
            job_id: "job-ended".into(),
            attempt: 1,
            upstream: Upstream {
                base,
                provider: Provider::Scripted,
            },
            prices: Arc::new(PriceTable::vendored().unwrap()),
            ceilings: job_ceiling(10_000_000),
            allowlist: ModelAllowlist::any(),
            allow_unpriced: false,
            web_search: false,
            retry: fast_retry(1),
            max_upstream_event_bytes: 16 << 20,
            ledger: ledger.clone(),
        },
    )
    .unwrap();
    let mut body = responses_body(Some(20_000));
    body["stream"] = false.into();
    let send = client()
        .post(format!("{}/v1/responses", broker.url))
        .bearer_auth(broker.token.expose())
        .body(body.to_string())
        .send();
    // The job ends once the upstream has the call (never answered).
    tokio::select! {
        answer = send => panic!("answered before the job ended: {answer:?}"),
        asked = thinking.asked.acquire() => asked.unwrap().forget(),
    }
    let ahead = ledger.rows();
    drop(broker);
    // 1000 × $5/M + 20 000 × $30/M.
    let worst = (
        TokenUsage {
            input_tokens: 1_000,
            output_tokens: 20_000,
            ..TokenUsage::default()
        },
        605_000,
    );
    assert_eq!(
        ahead
            .iter()
            .map(|r| (r.status, r.tokens, r.cost_micros))
            .collect::<Vec<_>>(),
        vec![(CallStatus::InFlight, worst.0, worst.1)]
    );
    // Settled in the background: a guard of 120 s against a row never
    // settled, far above what a loaded host takes (a fixed 2 s was not).
    let started = std::time::Instant::now();
    let mut settled = ledger.rows();
    while settled.iter().any(|r| r.status == CallStatus::InFlight)
        && started.elapsed() < std::time::Duration::from_secs(120)
    {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        settled = ledger.rows();
    }
    assert_eq!(
        settled
            .iter()
            .map(|r| (r.status, r.tokens, r.cost_micros))
            .collect::<Vec<_>>(),
        vec![(CallStatus::Interrupted, worst.0, worst.1)]
    );
}

/// A model the price table gives no `max_output` (a user's table may
/// not) is reserved [`broker::budget::DEFAULT_OUTPUT_RESERVE`] output
/// tokens a choice when its call sets no cap: the broker sets that cap in
/// the request, so the upstream cannot produce more than was reserved.
/// Before, the call went uncapped and could produce what the model allows
/// (128,000 tokens and more) on a 32,000-token reservation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_without_a_max_output_is_capped_at_its_reserve() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = Scenario::from_toml(ONE_TURN, Path::new("reserve.toml")).unwrap();
    let upstream = MockUpstream::start(
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
        Arc::new(scenario),
        RenderContext {
            workdir: dir.path().to_path_buf(),
        },
        None,
    )
    .unwrap();
    let mut prices = PriceTable::vendored().unwrap();
    prices.merge(
        PriceTable::parse(
            "version = \"in-house-1\"\n[models.in-house]\ninput = \"1\"\noutput = \"2\"\n",
            "in-house prices",
        )
        .unwrap(),
    );
    let broker = broker::start(
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
        BrokerConfig {
            job_id: "job-reserve".into(),
            attempt: 1,
            upstream: Upstream {
                base: upstream.base.clone(),
                provider: Provider::Scripted,
            },
            prices: Arc::new(prices),
            ceilings: job_ceiling(10_000_000),
            allowlist: ModelAllowlist::any(),
            allow_unpriced: false,
            web_search: false,
            retry: RetryPolicy::default(),
            max_upstream_event_bytes: 16 << 20,
            ledger: Arc::new(MemoryLedger::default()),
        },
    )
    .unwrap();
    let reserve = broker::budget::DEFAULT_OUTPUT_RESERVE;
    for (path, body, field) in [
        (
            "/v1/responses",
            serde_json::json!({"model": "in-house", "stream": true, "input": "hi"}),
            "max_output_tokens",
        ),
        (
            "/v1/chat/completions",
            serde_json::json!({"model": "in-house", "n": 2,
                "messages": [{"role": "user", "content": "hi"}]}),
            "max_completion_tokens",
        ),
    ] {
        let resp = client()
            .post(format!("{}{path}", broker.url))
            .bearer_auth(broker.token.expose())
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200, "{path}");
        let _ = resp.bytes().await;
        let sent = upstream.requests().last().unwrap().body.clone();
        assert_eq!(sent[field], reserve, "{path}: {sent}");
    }
}

/// An upstream that answers each call (a whole Responses answer) after
/// 300 ms, billing one input token for each byte of its request (what a
/// byte-level tokenizer makes of text at its densest) and 100 output
/// tokens.
async fn densely_billing_upstream() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().fallback(|body: bytes::Bytes| async move {
        let usage = serde_json::json!({"input_tokens": body.len(), "output_tokens": 100,
            "total_tokens": body.len() + 100});
        let response = serde_json::json!({"id": "resp_1", "object": "response",
            "status": "completed", "model": "gpt-5.5", "output": [], "usage": usage});
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        axum::response::Response::builder()
            .header("content-type", "application/json")
            .body(axum::body::Body::from(response.to_string()))
            .unwrap()
    });
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/v1")
}

/// Calls a job runs side by side cannot each pass their input estimate:
/// ten at once against a budget of ten calls' bytes / 4, each billed one
/// input token a byte (about 4,000 bytes: 4,000 × $5/M + 100 × $30/M =
/// $0.023 where $0.008 was reserved). The first runs reserved at bytes / 4, the
/// ones beside it at one token a byte ($0.023: three fit), the rest wait
/// and are refused once the spend reaches the ceiling: the job ends at
/// its ceiling plus at most the one call's excess (four calls, $0.092 of
/// $0.080). Before, all ten ran on reservations of $0.008 each and the
/// job spent $0.230, nearly three times its budget, and 64 calls could
/// each add their excess.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_side_by_side_cannot_each_pass_their_input_estimate() {
    let base = densely_billing_upstream().await;
    let budget = 10 * CALL_MICROS;
    let ledger = Arc::new(MemoryLedger::default());
    let mut broker = broker::start(
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
        BrokerConfig {
            job_id: "job-dense".into(),
            attempt: 1,
            upstream: Upstream {
                base,
                provider: Provider::Scripted,
            },
            prices: Arc::new(PriceTable::vendored().unwrap()),
            ceilings: job_ceiling(budget),
            allowlist: ModelAllowlist::any(),
            allow_unpriced: false,
            web_search: false,
            retry: fast_retry(1),
            max_upstream_event_bytes: 16 << 20,
            ledger,
        },
    )
    .unwrap();
    let mut body = responses_body(Some(100));
    body["stream"] = false.into();
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let send = client()
                .post(format!("{}/v1/responses", broker.url))
                .bearer_auth(broker.token.expose())
                .header("content-type", "application/json")
                .body(body.to_string())
                .send();
            tokio::spawn(async move { send.await.unwrap().status().as_u16() })
        })
        .collect();
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap());
    }
    statuses.sort_unstable();
    let mut rows = Vec::new();
    for _ in 0..10 {
        let call = broker.calls.recv().await.unwrap().row;
        rows.push((call.status, call.cost_micros));
    }
    rows.sort_unstable_by_key(|(s, c)| (format!("{s:?}"), *c));
    // Its bytes at $5/M a token, 100 output tokens at $30/M.
    let per_call = body.to_string().len() as i64 * 5 + 100 * 30;
    assert_eq!(
        (statuses, rows, broker.spent_micros()),
        (
            [vec![200; 4], vec![402; 6]].concat(),
            [
                vec![(CallStatus::Ok, per_call); 4],
                vec![(CallStatus::Refused, 0); 6]
            ]
            .concat(),
            4 * per_call
        )
    );
}

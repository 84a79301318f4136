//! The broker benchmark (run it with `scripts/bench`): the same requests
//! direct to a loopback mock upstream, through Paddock's broker, and through
//! LiteLLM proxy (when `--litellm BIN` is given), side by side in one run.
//!
//! The mock upstream (`MockUpstream`, a mock because no real provider can
//! run here) speaks the OpenAI Chat Completions wire format: a JSON
//! completion, a short SSE stream with its usage chunk and `[DONE]`, and for
//! the model `bulk` an SSE stream of `--bulk-mib` MiB of content deltas.
//!
//! Measured: added latency p50/p99 (sequential non-streaming calls),
//! requests per second with 1 and 32 concurrent clients, time to first
//! byte of a streaming answer, in `--runs` interleaved rounds (each round
//! measures every target once), printed as the median of the rounds with
//! their min–max; the throughput ratios broker / LiteLLM per round, the
//! same way; then once, the resident memory of the proxy before and after
//! streaming the bulk answer through it. The load average before and after
//! is printed (the machine may be shared). Prints Markdown tables.
//! The broker runs as a job's does: retries on (the default
//! `[broker.retry]`), every ledger row written to a SQLite store.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use axum::Router;
use bytes::Bytes;
use futures::StreamExt as _;
use paddock::broker::{self, BrokerConfig, ModelAllowlist, PriceTable, Upstream};
use paddock::store::Store as _;
use paddock_test_support::bench::loadavg;
use tokio::net::TcpListener;

const CHUNK: usize = 64 << 10;

#[derive(Clone)]
struct Args {
    litellm: Option<String>,
    requests: usize,
    litellm_requests: usize,
    secs: u64,
    bulk_mib: usize,
    runs: usize,
}

fn args() -> Args {
    let mut a = Args {
        litellm: None,
        requests: 2000,
        litellm_requests: 300,
        secs: 5,
        bulk_mib: 1024,
        runs: 5,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--litellm" => a.litellm = Some(value()),
            "--requests" => a.requests = value().parse().expect("--requests N"),
            "--litellm-requests" => a.litellm_requests = value().parse().expect("N"),
            "--secs" => a.secs = value().parse().expect("--secs N"),
            "--bulk-mib" => a.bulk_mib = value().parse().expect("--bulk-mib N"),
            "--runs" => a.runs = value().parse::<usize>().expect("--runs N").max(1),
            "--help" | "-h" => {
                println!("broker_bench [--litellm BIN] [--requests N] [--litellm-requests N] [--secs N] [--bulk-mib N] [--runs N]");
                std::process::exit(0);
            }
            other => panic!("unknown option {other}"),
        }
    }
    a
}

// ---------------------------------------------------------------- the mock

const USAGE: &str = r#"{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}"#;

async fn mock(req: Request, bulk_mib: usize) -> Response {
    let body = axum::body::to_bytes(req.into_body(), 1 << 20)
        .await
        .unwrap_or_default();
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let model = v["model"].as_str().unwrap_or("gpt-5.5").to_string();
    let stream = v["stream"].as_bool().unwrap_or(false);
    if !stream {
        let json = format!(
            r#"{{"id":"chatcmpl-mock","object":"chat.completion","created":0,"model":"{model}","choices":[{{"index":0,"message":{{"role":"assistant","content":"Hello from the mock."}},"finish_reason":"stop"}}],"usage":{USAGE}}}"#
        );
        return Response::builder()
            .header("content-type", "application/json")
            .body(Body::from(json))
            .unwrap();
    }
    let chunk = |content: &str| {
        Bytes::from(format!(
            "data: {{\"id\":\"chatcmpl-mock\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"{model}\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{content}\"}},\"finish_reason\":null}}]}}\n\n"
        ))
    };
    let tail = Bytes::from(format!(
        "data: {{\"id\":\"chatcmpl-mock\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"{model}\",\"choices\":[],\"usage\":{USAGE}}}\n\ndata: [DONE]\n\n"
    ));
    let mut chunks: Vec<Bytes> = Vec::new();
    if model == "bulk" {
        let big = chunk(&"a".repeat(CHUNK - 200));
        let n = (bulk_mib << 20).div_ceil(big.len());
        let s = futures::stream::iter((0..n).map(move |_| Ok::<_, std::io::Error>(big.clone())))
            .chain(futures::stream::iter([Ok(tail)]));
        return Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from_stream(s))
            .unwrap();
    }
    for word in ["Hello ", "from ", "the ", "mock", "."] {
        chunks.push(chunk(word));
    }
    chunks.push(tail);
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(futures::stream::iter(
            chunks.into_iter().map(Ok::<_, std::io::Error>),
        )))
        .unwrap()
}

// ---------------------------------------------------------------- targets

struct Target {
    name: &'static str,
    url: String,
    token: Option<String>,
    pid: Option<u32>,
}

fn body(model: &str, stream: bool) -> String {
    format!(
        r#"{{"model":"{model}","stream":{stream},"messages":[{{"role":"user","content":"Say hello."}}]}}"#
    )
}

async fn call(
    client: &reqwest::Client,
    t: &Target,
    model: &str,
    stream: bool,
) -> reqwest::Response {
    let mut rb = client
        .post(format!("{}/v1/chat/completions", t.url))
        .header("content-type", "application/json")
        .body(body(model, stream));
    if let Some(tok) = &t.token {
        rb = rb.bearer_auth(tok);
    }
    let resp = rb.send().await.expect("request");
    assert!(
        resp.status().is_success(),
        "{}: HTTP {}",
        t.name,
        resp.status()
    );
    resp
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn latencies(client: &reqwest::Client, t: &Target, n: usize) -> (Duration, Duration) {
    for _ in 0..(n / 10).max(5) {
        let _ = call(client, t, "gpt-5.5", false).await.bytes().await;
    }
    let mut d = Vec::with_capacity(n);
    for _ in 0..n {
        let s = Instant::now();
        let _ = call(client, t, "gpt-5.5", false).await.bytes().await;
        d.push(s.elapsed());
    }
    d.sort();
    (percentile(&d, 0.5), percentile(&d, 0.99))
}

async fn throughput(client: &reqwest::Client, t: &Arc<Target>, clients: usize, secs: u64) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + Duration::from_secs(secs);
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let (client, t, done) = (client.clone(), t.clone(), done.clone());
            tokio::spawn(async move {
                while Instant::now() < until {
                    let _ = call(&client, &t, "gpt-5.5", false).await.bytes().await;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let start = Instant::now();
    for task in tasks {
        task.await.unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

async fn ttfb(client: &reqwest::Client, t: &Target, n: usize) -> Duration {
    let mut d = Vec::with_capacity(n);
    for _ in 0..n {
        let s = Instant::now();
        let mut stream = call(client, t, "gpt-5.5", true).await.bytes_stream();
        let _ = stream.next().await;
        d.push(s.elapsed());
        while stream.next().await.is_some() {}
    }
    d.sort();
    percentile(&d, 0.5)
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Streams the bulk answer through `t`; returns (RSS before, after, MiB
/// received, MiB/s). A proxy that ends or breaks the stream early shows in
/// the MiB received.
async fn bulk(client: &reqwest::Client, t: &Target) -> (u64, u64, f64, f64) {
    let pid = t.pid.unwrap_or_else(std::process::id);
    let before = rss_kib(pid);
    let s = Instant::now();
    let mut stream = call(client, t, "bulk", true).await.bytes_stream();
    let mut n = 0usize;
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(c) => n += c.len(),
            Err(e) => {
                eprintln!("{}: the bulk stream broke after {n} bytes: {e}", t.name);
                break;
            }
        }
    }
    let secs = s.elapsed().as_secs_f64();
    let mib = n as f64 / (1 << 20) as f64;
    (before, rss_kib(pid), mib, mib / secs)
}

// ---------------------------------------------------------------- LiteLLM

async fn start_litellm(
    bin: &str,
    upstream: SocketAddr,
    dir: &std::path::Path,
) -> (tokio::process::Child, Target) {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let config = dir.join("litellm.yaml");
    let mut yaml = String::from("model_list:\n");
    for m in ["gpt-5.5", "bulk"] {
        yaml.push_str(&format!(
            "  - model_name: {m}\n    litellm_params:\n      model: openai/{m}\n      api_base: http://{upstream}/v1\n      api_key: sk-mock\n"
        ));
    }
    yaml.push_str("litellm_settings:\n  telemetry: false\n  drop_params: true\n");
    std::fs::write(&config, yaml).unwrap();
    let child = tokio::process::Command::new(bin)
        .args([
            "--config",
            config.to_str().unwrap(),
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--num_workers",
            "1",
        ])
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .env("LITELLM_TELEMETRY", "False")
        .env("NO_PROXY", "*")
        .env_remove("DATABASE_URL")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.join("litellm.log")).unwrap())
        .kill_on_drop(true)
        .spawn()
        .expect("start litellm");
    let pid = child.id();
    let url = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        if let Ok(r) = client.get(format!("{url}/health/liveliness")).send().await {
            if r.status().is_success() {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "LiteLLM did not start; see {}",
            dir.join("litellm.log").display()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    (
        child,
        Target {
            name: "LiteLLM proxy",
            url,
            token: None,
            pid,
        },
    )
}

// ---------------------------------------------------------------- main

fn ms_f(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// One target's figures in one round.
#[derive(Clone, Copy)]
struct Round {
    p50: f64,
    p99: f64,
    added_p50: f64,
    added_p99: f64,
    rps1: f64,
    rps32: f64,
    ttfb: f64,
}

/// `median [min–max]` of `values`, with `digits` fraction digits.
fn spread(values: &[f64], digits: usize) -> String {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let median = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    format!(
        "{median:.digits$} [{:.digits$}–{:.digits$}]",
        v[0],
        v[v.len() - 1]
    )
}

/// A job's broker in front of the mock `upstream`, its ledger written to
/// SQLite as a real job's is (a job row, then each call's row written ahead
/// and settled by the broker, ledger.rs), in a store of its own under
/// `dir`; and the count of rows the broker reported.
async fn start_broker(
    upstream: SocketAddr,
    dir: &std::path::Path,
) -> (
    broker::BrokerHandle,
    paddock::store::SqliteStore,
    Arc<AtomicU64>,
) {
    let store = paddock::store::SqliteStore::open(&dir.join("paddock.db"))
        .await
        .unwrap();
    let job = paddock_protocol::JobRecord {
        id: "job-bench".into(),
        ticket_id: "BENCH-1".into(),
        project: "bench".into(),
        attempt: 1,
        engine: "codex".into(),
        model: "gpt-5.5".into(),
        isolation: "process".into(),
        status: paddock_protocol::JobStatus::Running,
        reason: None,
        branch: "paddock/BENCH-1/1".into(),
        base_ref: "main".into(),
        patch_path: None,
        changed_files: Vec::new(),
        tokens: Default::default(),
        model_calls: 0,
        cost_micros: 0,
        engine_exit_code: None,
        created_at: time::OffsetDateTime::now_utc(),
        finished_at: None,
        duration_ms: None,
        disposed_at: None,
    };
    store.insert_job(&job, "{}").await.unwrap();
    let mut handle = broker::start(
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
        BrokerConfig {
            job_id: "job-bench".into(),
            attempt: 1,
            upstream: Upstream {
                base: format!("http://{upstream}/v1"),
                provider: paddock::broker::Provider::OpenAi {
                    key: paddock::broker::Secret::new("sk-mock".into()),
                },
            },
            prices: Arc::new(PriceTable::vendored().unwrap()),
            ceilings: vec![],
            allowlist: ModelAllowlist::any(),
            allow_unpriced: true,
            web_search: false,
            retry: paddock::broker::RetryPolicy::default(),
            max_upstream_event_bytes: 16 << 20,
            ledger: Arc::new(paddock::broker::ledger::StoreLedger {
                store: Arc::new(store.clone()),
                redactor: paddock::redact::Redactor::new(),
                records: None,
            }),
        },
    )
    .unwrap();
    let (_tx, placeholder) = tokio::sync::mpsc::unbounded_channel();
    let mut calls = std::mem::replace(&mut handle.calls, placeholder);
    let ledger_rows = Arc::new(AtomicU64::new(0));
    let rows = ledger_rows.clone();
    tokio::spawn(async move {
        while calls.recv().await.is_some() {
            rows.fetch_add(1, Ordering::Relaxed);
        }
    });
    (handle, store, ledger_rows)
}

/// Interleaved rounds: every target once per round, so a change in the
/// machine's load hits all of them alike. Each target's rounds.
async fn measure(client: &reqwest::Client, targets: &[Arc<Target>], a: &Args) -> Vec<Vec<Round>> {
    let mut results: Vec<Vec<Round>> = vec![Vec::new(); targets.len()];
    for round in 0..a.runs {
        let mut direct = (Duration::ZERO, Duration::ZERO);
        for (i, t) in targets.iter().enumerate() {
            let n = if t.name == "LiteLLM proxy" {
                a.litellm_requests
            } else {
                a.requests
            };
            let (p50, p99) = latencies(client, t, n).await;
            if t.name == "direct" {
                direct = (p50, p99);
            }
            results[i].push(Round {
                p50: ms_f(p50),
                p99: ms_f(p99),
                added_p50: ms_f(p50.saturating_sub(direct.0)),
                added_p99: ms_f(p99.saturating_sub(direct.1)),
                rps1: throughput(client, t, 1, a.secs).await,
                rps32: throughput(client, t, 32, a.secs).await,
                ttfb: ms_f(ttfb(client, t, n / 4).await),
            });
        }
        eprintln!("round {}/{} done (load {})", round + 1, a.runs, loadavg());
    }
    results
}

/// The latency and throughput table, and the broker / LiteLLM throughput
/// ratio round by round when both ran.
fn print_rounds(targets: &[Arc<Target>], results: &[Vec<Round>]) {
    println!("| target | p50 ms | p99 ms | added p50 ms | added p99 ms | req/s, 1 client | req/s, 32 clients | TTFB stream ms |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for (t, rounds) in targets.iter().zip(results) {
        let col = |f: fn(&Round) -> f64, digits: usize| {
            spread(&rounds.iter().map(f).collect::<Vec<_>>(), digits)
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            t.name,
            col(|r| r.p50, 3),
            col(|r| r.p99, 3),
            col(|r| r.added_p50, 3),
            col(|r| r.added_p99, 3),
            col(|r| r.rps1, 0),
            col(|r| r.rps32, 0),
            col(|r| r.ttfb, 3),
        );
    }
    let by_name = |name: &str| targets.iter().position(|t| t.name == name);
    if let (Some(b), Some(l)) = (by_name("Paddock broker"), by_name("LiteLLM proxy")) {
        let ratio = |f: fn(&Round) -> f64| {
            let r: Vec<f64> = results[b]
                .iter()
                .zip(&results[l])
                .map(|(b, l)| f(b) / f(l).max(f64::MIN_POSITIVE))
                .collect();
            spread(&r, 0)
        };
        println!(
            "\nBroker / LiteLLM throughput, per round: {}× with 1 client, {}× with 32 clients.",
            ratio(|r| r.rps1),
            ratio(|r| r.rps32)
        );
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let a = args();
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = listener.local_addr().unwrap();
    let bulk_mib = a.bulk_mib;
    let app = Router::new().fallback(move |req: Request| mock(req, bulk_mib));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let (handle, store, ledger_rows) = start_broker(upstream, dir.path()).await;

    let mut targets = vec![
        Arc::new(Target {
            name: "direct",
            url: format!("http://{upstream}"),
            token: None,
            pid: None,
        }),
        Arc::new(Target {
            name: "Paddock broker",
            url: handle.url.clone(),
            token: Some(handle.token.expose().to_string()),
            pid: None,
        }),
    ];
    let mut _litellm = None;
    if let Some(bin) = &a.litellm {
        let (child, t) = start_litellm(bin, upstream, dir.path()).await;
        _litellm = Some(child);
        targets.push(Arc::new(t));
    }

    let client = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(64)
        .build()
        .unwrap();
    let load_before = loadavg();
    let results = measure(&client, &targets, &a).await;
    let load_after = loadavg();
    println!(
        "{} interleaved rounds; each cell: the median of the rounds [min–max]. Load average (1, 5, 15 min) before: {load_before}; after: {load_after}.\n",
        a.runs
    );
    print_rounds(&targets, &results);
    println!(
        "\n| target | RSS before KiB | RSS after the {} MiB stream KiB | MiB received | stream MiB/s |",
        a.bulk_mib
    );
    println!("| --- | --- | --- | --- | --- |");
    for t in targets.iter().filter(|t| t.name != "direct") {
        let (before, after, got, rate) = bulk(&client, t).await;
        println!("| {} | {before} | {after} | {got:.0} | {rate:.0} |", t.name);
    }
    // Let the last rows land, then count them in the database.
    tokio::time::sleep(Duration::from_millis(200)).await;
    eprintln!(
        "ledger rows written to SQLite: {} (in the database: {})",
        ledger_rows.load(Ordering::Relaxed),
        store.model_calls("job-bench").await.unwrap().len()
    );
}

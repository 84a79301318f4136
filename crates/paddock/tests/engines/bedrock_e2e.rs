//! Claude Code through Amazon Bedrock: the real `paddock` binary runs the
//! real Claude Code in Bedrock mode (its own AWS auth skipped) against the
//! broker, which SigV4-signs every call with the job's AWS credentials and
//! forwards it to a mock Bedrock runtime (the scripted upstream serving
//! Bedrock's paths and AWS event stream), which re-signs each request with
//! the test's credentials and rejects a signature that does not match. A
//! mock, because AWS cannot be reached here; it speaks the real wire format.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use paddock::broker::Secret;
use paddock::scripted::{RenderContext, Scenario};
use paddock_protocol::{CallStatus, JobStatus, TokenUsage};
use paddock_test_support::bedrock::{AwsCredentials, INVALID_SIGNATURE};
use paddock_test_support::prelude::*;
use paddock_test_support::MockUpstream;

const MODEL: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
const ACCESS_KEY_ID: &str = "AKIAPADDOCKTEST00001";

/// The AWS credentials file the spec references, and its secret parts.
fn credentials(dir: &std::path::Path) -> (std::path::PathBuf, String, String) {
    let secret = format!("paddock/Test+Secret{}KEYwJalrXUtnFEMI", std::process::id());
    let token = format!("IQoJb3JpZ2luX2VjEPaddockSessionToken{}", std::process::id());
    let path = dir.join("aws.json");
    std::fs::write(
        &path,
        serde_json::json!({"Version": 1, "AccessKeyId": ACCESS_KEY_ID,
            "SecretAccessKey": secret, "SessionToken": token})
        .to_string(),
    )
    .unwrap();
    (path, secret, token)
}

async fn mock_bedrock(home: &Home, secret: &str) -> MockUpstream {
    let scenario = Scenario::from_toml(PROVIDER_PROBE, std::path::Path::new("probe.toml")).unwrap();
    MockUpstream::start_bedrock(
        tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        Arc::new(scenario),
        RenderContext {
            workdir: home.path().to_path_buf(),
        },
        AwsCredentials {
            access_key_id: ACCESS_KEY_ID.into(),
            secret_access_key: Secret::new(secret.to_string()),
            region: "us-west-2".into(),
        },
    )
    .unwrap()
}

fn bedrock_job(home: &Home, creds: &std::path::Path, base: &str) -> std::path::PathBuf {
    let repo = repo(home.path());
    let upstream = format!(
        "[upstream]\nprovider = \"bedrock\"\nkey = \"file:{}\"\nbase_url = \"{}\"\nbedrock_region = \"us-west-2\"\n",
        creds.display(),
        base.trim_end_matches("/v1"),
    );
    let spec = job(home.path(), "claude", &repo, &upstream, None);
    let text = std::fs::read_to_string(&spec).unwrap();
    let text = text.replace(
        &format!("model = \"{}\"", model("claude")),
        &format!("model = \"{MODEL}\""),
    );
    assert!(text.contains(MODEL));
    std::fs::write(&spec, text).unwrap();
    spec
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_runs_through_bedrock_with_requests_signed_by_the_broker() {
    let Some(_) = paddock_test_support::prelude::engine("claude") else {
        return;
    };
    let home = Home::new();
    let (creds, secret, token) = credentials(home.path());
    let bedrock = mock_bedrock(&home, &secret).await;
    let spec = bedrock_job(&home, &creds, &bedrock.base);
    let out = home
        .paddock(&["run", "--json", "--keep", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    assert_eq!(
        rec.status,
        JobStatus::Done,
        "reason: {:?}; stderr: {}",
        rec.reason,
        String::from_utf8_lossy(&out.stderr)
    );

    // Every call reached the streaming invoke path, signed (the mock
    // verified each signature) with the session token, without the job token.
    let requests = bedrock.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!(
            r.path,
            "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke-with-response-stream"
        );
        assert!(r.headers["authorization"]
            .to_str()
            .unwrap()
            .starts_with(&format!("AWS4-HMAC-SHA256 Credential={ACCESS_KEY_ID}/")));
        assert_eq!(r.headers["x-amz-security-token"], token.as_str());
        assert!(!r.headers.contains_key("x-api-key"));
        assert!(r.body.get("anthropic_version").is_some(), "{}", r.body);
    }

    // The ledger: provider bedrock, the scenario's usage exactly, priced as
    // claude-sonnet-4-5.
    let store = home.store().await;
    let calls = store.model_calls(&rec.id).await.unwrap();
    let rows: Vec<(String, String, CallStatus, TokenUsage, bool)> = calls
        .iter()
        .map(|c| {
            (
                c.provider.clone(),
                c.requested_model.clone(),
                c.status,
                c.tokens,
                c.cost_micros > 0,
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            (
                "bedrock".to_string(),
                MODEL.to_string(),
                CallStatus::Ok,
                TokenUsage {
                    input_tokens: 10,
                    cached_input_tokens: 20,
                    cache_write_tokens: 30,
                    output_tokens: 5,
                    reasoning_tokens: 0
                },
                true
            ),
            (
                "bedrock".to_string(),
                MODEL.to_string(),
                CallStatus::Ok,
                TokenUsage {
                    input_tokens: 12,
                    output_tokens: 3,
                    ..TokenUsage::default()
                },
                true
            ),
        ]
    );
    let prices = paddock::broker::PriceTable::vendored().unwrap();
    for c in &calls {
        assert_eq!(
            Some(c.cost_micros),
            prices.cost_micros("claude-sonnet-4-5", &c.tokens)
        );
    }

    // The engine ran in Bedrock mode with only its job token.
    let work = home.jobs().join(&rec.id).join("work");
    let engine_env = std::fs::read_to_string(work.join("engine-env.txt")).unwrap();
    assert!(
        engine_env.contains("CLAUDE_CODE_USE_BEDROCK=1"),
        "{engine_env}"
    );
    assert!(engine_env.contains("CLAUDE_CODE_SKIP_BEDROCK_AUTH=1"));
    assert!(engine_env.contains("ANTHROPIC_CUSTOM_HEADERS=x-api-key: pdk-job-"));
    assert!(!engine_env.contains("AWS_ACCESS_KEY_ID"));
    // Neither the secret key nor the session token is anywhere the job or
    // Paddock writes: environment, files, events, logs, the database.
    for secret in [secret.as_str(), token.as_str()] {
        assert!(!engine_env.contains(secret));
        for dir in [home.jobs(), home.data()] {
            assert_eq!(
                files_containing(&dir, secret.as_bytes()),
                Vec::<std::path::PathBuf>::new()
            );
        }
        assert!(!String::from_utf8_lossy(&out.stdout).contains(secret));
        assert!(!String::from_utf8_lossy(&out.stderr).contains(secret));
        for e in store.events(&rec.id, 0).await.unwrap() {
            assert!(!serde_json::to_string(&e).unwrap().contains(secret));
        }
        for c in &calls {
            assert!(!serde_json::to_string(c).unwrap().contains(secret));
        }
    }
    let spec_json = store.job_spec(&rec.id).await.unwrap().unwrap();
    assert!(spec_json.contains("file:"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_signature_bedrock_rejects_fails_the_job_with_its_message() {
    let Some(_) = paddock_test_support::prelude::engine("claude") else {
        return;
    };
    let home = Home::new();
    let (creds, _secret, _token) = credentials(home.path());
    // The mock knows another secret for the same access key.
    let bedrock = mock_bedrock(&home, "not-the-secret-in-the-file").await;
    let spec = bedrock_job(&home, &creds, &bedrock.base);
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    assert_eq!(rec.status, JobStatus::Failed, "{:?}", rec.reason);
    // Claude Code shows the upstream's own message; the job's reason is it.
    assert_eq!(
        rec.reason,
        Some(format!(
            "Failed to authenticate. API Error: 403 {INVALID_SIGNATURE}"
        ))
    );
    let calls = home.store().await.model_calls(&rec.id).await.unwrap();
    let rows: Vec<_> = calls
        .iter()
        .map(|c| (c.status, c.http_status, c.error.as_deref(), c.cost_micros))
        .collect();
    assert_eq!(
        rows,
        vec![(CallStatus::HttpError, Some(403), Some(INVALID_SIGNATURE), 0)]
    );
}

#[tokio::test]
async fn bad_aws_credentials_are_bad_input() {
    let home = Home::new();
    let creds = home.path().join("aws.json");
    std::fs::write(&creds, r#"{"AccessKeyId":"AKIAONLY"}"#).unwrap();
    let spec = bedrock_job(&home, &creds, "http://127.0.0.1:9");
    let out = home.paddock(&["run", spec.to_str().unwrap()], &[]).await;
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "upstream.key: AWS credentials: not a JSON object with AccessKeyId and SecretAccessKey: missing field `SecretAccessKey`"
        ),
        "{err}"
    );
    assert_eq!(home.store().await.jobs(10).await.unwrap(), vec![]);
}

/// A Bedrock job's broker serves the invoke paths only (the signature goes
/// nowhere else) and answers Claude Code's inference-profile listing 501.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bedrock_broker_refuses_other_routes() {
    let creds = Secret::new(r#"{"AccessKeyId":"AKIA1","SecretAccessKey":"s"}"#.to_string());
    let bedrock = paddock::broker::bedrock::Bedrock::new(&creds, "us-east-1").unwrap();
    let broker = credential_broker(
        "http://127.0.0.1:9".into(),
        paddock::broker::Provider::Bedrock(Arc::new(bedrock)),
    )
    .await;
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut got = Vec::new();
    for (method, path) in [
        ("POST", "/v1/messages"),
        ("POST", "/v1/responses"),
        ("POST", "/model/m/converse"),
        ("GET", "/v1/models"),
        ("GET", "/inference-profiles?type=SYSTEM_DEFINED"),
    ] {
        let resp = client
            .request(method.parse().unwrap(), format!("{}{path}", broker.url))
            .header("x-api-key", broker.token.expose())
            .body(r#"{"anthropic_version":"bedrock-2023-05-31","messages":[]}"#)
            .send()
            .await
            .unwrap();
        got.push((path, resp.status().as_u16()));
    }
    assert_eq!(
        got,
        vec![
            ("/v1/messages", 404),
            ("/v1/responses", 404),
            ("/model/m/converse", 404),
            ("/v1/models", 404),
            ("/inference-profiles?type=SYSTEM_DEFINED", 501),
        ]
    );
}

/// The spec's Bedrock fields: the region is required with `bedrock` and
/// refused elsewhere; Codex cannot use Bedrock.
#[tokio::test]
async fn bedrock_spec_fields_are_checked() {
    let home = Home::new();
    let creds = home.path().join("aws.json");
    std::fs::write(&creds, r#"{"AccessKeyId":"A","SecretAccessKey":"s"}"#).unwrap();
    let repo = repo(home.path());
    let cases = [
        (
            "claude",
            format!("[upstream]\nprovider = \"bedrock\"\nkey = \"file:{}\"\n", creds.display()),
            "field `upstream.bedrock_region`: the bedrock upstream needs it",
        ),
        (
            "claude",
            format!("[upstream]\nprovider = \"bedrock\"\nkey = \"file:{}\"\nbedrock_region = \"US East\"\n", creds.display()),
            "field `upstream.bedrock_region`: `US East` must be an AWS region such as `us-east-1`",
        ),
        (
            "claude",
            format!("[upstream]\nprovider = \"anthropic\"\nkey = \"file:{}\"\nbedrock_region = \"us-east-1\"\n", creds.display()),
            "field `upstream.bedrock_region`: only the bedrock upstream takes it",
        ),
        (
            "codex",
            format!("[upstream]\nprovider = \"bedrock\"\nkey = \"file:{}\"\nbedrock_region = \"us-east-1\"\n", creds.display()),
            "field `upstream.provider`: Codex speaks the OpenAI Responses API",
        ),
    ];
    for (engine, upstream, want) in cases {
        let spec = job(home.path(), engine, &repo, &upstream, None);
        let out = home.paddock(&["run", spec.to_str().unwrap()], &[]).await;
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(want), "{want}\n{err}");
    }
}

/// A mock Bedrock runtime serving `scenario` and a Bedrock broker in front
/// of it, both with the same credentials.
async fn bedrock_rig(
    scenario: &str,
    ceilings: Vec<paddock::broker::Ceiling>,
) -> (
    MockUpstream,
    paddock::broker::BrokerHandle,
    tempfile::TempDir,
) {
    bedrock_rig_allowing(scenario, ceilings, paddock::broker::ModelAllowlist::any()).await
}

async fn bedrock_rig_allowing(
    scenario: &str,
    ceilings: Vec<paddock::broker::Ceiling>,
    allowlist: paddock::broker::ModelAllowlist,
) -> (
    MockUpstream,
    paddock::broker::BrokerHandle,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().unwrap();
    let upstream = MockUpstream::start_bedrock(
        tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        Arc::new(Scenario::from_toml(scenario, std::path::Path::new("rig.toml")).unwrap()),
        RenderContext {
            workdir: dir.path().to_path_buf(),
        },
        AwsCredentials {
            access_key_id: ACCESS_KEY_ID.into(),
            secret_access_key: Secret::new("rig-secret".into()),
            region: "us-east-1".into(),
        },
    )
    .unwrap();
    let creds = Secret::new(
        serde_json::json!({"AccessKeyId": ACCESS_KEY_ID, "SecretAccessKey": "rig-secret"})
            .to_string(),
    );
    let bedrock = paddock::broker::bedrock::Bedrock::new(&creds, "us-east-1").unwrap();
    let broker = paddock::broker::start(
        tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        paddock::broker::BrokerConfig {
            job_id: "job-bedrock-rig".into(),
            attempt: 1,
            upstream: paddock::broker::Upstream {
                base: upstream.base.trim_end_matches("/v1").to_string(),
                provider: paddock::broker::Provider::Bedrock(Arc::new(bedrock)),
            },
            prices: Arc::new(paddock::broker::PriceTable::vendored().unwrap()),
            ceilings,
            allowlist,
            allow_unpriced: false,
            web_search: false,

            retry: paddock::broker::RetryPolicy::default(),
            max_upstream_event_bytes: 16 << 20,
            ledger: std::sync::Arc::new(paddock::broker::ledger::MemoryLedger::default()),
        },
    )
    .unwrap();
    (upstream, broker, dir)
}

/// A small non-streaming `invoke` of Claude Haiku through `broker`.
async fn invoke_haiku(broker: &paddock::broker::BrokerHandle) -> reqwest::Response {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!(
            "{}/model/global.anthropic.claude-haiku-4-5-20251001-v1%3A0/invoke",
            broker.url
        ))
        .header("x-api-key", broker.token.expose())
        .header("content-type", "application/json")
        .body(r#"{"anthropic_version":"bedrock-2023-05-31","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}"#)
        .send()
        .await
        .unwrap()
}

/// A non-streaming `invoke` is forwarded signed and metered from its JSON body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_streaming_bedrock_invoke_is_metered() {
    let (upstream, mut broker, _dir) = bedrock_rig(
        "[[turn]]\ntext = \"Hello.\"\nusage = { input = 40, cached = 7, output = 9 }\n",
        vec![],
    )
    .await;
    let resp = invoke_haiku(&broker).await;
    assert_eq!(resp.status().as_u16(), 200);
    let body: serde_json::Value = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap();
    assert_eq!(body["content"][0]["text"], "Hello.");
    assert_eq!(
        upstream.requests()[0].path,
        "/model/global.anthropic.claude-haiku-4-5-20251001-v1%3A0/invoke"
    );
    let call = broker.calls.recv().await.unwrap().row;
    let usage = TokenUsage {
        input_tokens: 40,
        cached_input_tokens: 7,
        output_tokens: 9,
        ..TokenUsage::default()
    };
    let prices = paddock::broker::PriceTable::vendored().unwrap();
    assert_eq!(
        (
            call.status,
            call.tokens,
            call.estimated,
            Some(call.cost_micros)
        ),
        (
            CallStatus::Ok,
            usage,
            false,
            prices.cost_micros("claude-haiku-4-5", &usage)
        )
    );
    assert_eq!(
        call.requested_model,
        "global.anthropic.claude-haiku-4-5-20251001-v1:0"
    );
}

/// A whole `invoke` answer served by a model outside the allowlist is
/// withheld (403 in the Messages error format); twin: the allowed one
/// passes (above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bedrock_invoke_served_by_a_model_outside_the_allowlist_is_withheld() {
    let (_upstream, mut broker, _dir) = bedrock_rig_allowing(
        "served_model = \"claude-opus-4-5\"\n[[turn]]\ntext = \"Hello.\"\nusage = { input = 40, output = 9 }\n",
        vec![],
        paddock::broker::ModelAllowlist::any().with("job", &["claude-haiku-4-5*".to_string()]),
    )
    .await;
    let resp = invoke_haiku(&broker).await;
    let message = "paddock broker: the upstream served model `claude-opus-4-5`, which the job model allowlist does not allow: the response was withheld";
    assert_eq!(resp.status().as_u16(), 403);
    let body: serde_json::Value = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"type": "error", "error": {"type": "permission_error", "message": message}})
    );
    let call = broker.calls.recv().await.unwrap().row;
    assert_eq!(
        (
            call.status,
            call.served_model.as_deref(),
            call.error.as_deref()
        ),
        (
            CallStatus::StreamError,
            Some("claude-opus-4-5"),
            Some(message)
        )
    );
    assert_eq!(broker.served_refused().as_deref(), Some(message));
}

/// A Bedrock stream crossing the job's ceiling is cut like a Messages
/// stream, ending with an event-stream `exception` frame the engine's AWS
/// decoder understands; its row is estimated and priced as the Anthropic
/// model the Bedrock id names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bedrock_stream_crossing_the_ceiling_is_cut_with_an_exception_frame() {
    use paddock::broker::eventstream::{Decoder, Event};
    let text = "a budget test line. ".repeat(40);
    let scenario = format!(
        "[[turn]]\ntext = \"{text}\"\nusage = {{ input = 10, output = 200 }}\n[[turn]]\ntext = \"never\"\n"
    );
    // claude-haiku-4-5: $1/M input, $5/M output; about 100 output tokens fit.
    let budget = 10 + 500;
    let (_upstream, mut broker, _dir) = bedrock_rig(
        &scenario,
        vec![paddock::broker::Ceiling {
            scope: paddock::broker::Scope::Job,
            limit_micros: budget,
            prior_micros: 0,
        }],
    )
    .await;
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let resp = client
        .post(format!(
            "{}/model/anthropic.claude-haiku-4-5-20251001-v1:0/invoke-with-response-stream",
            broker.url
        ))
        .header("x-api-key", broker.token.expose())
        .header("content-type", "application/json")
        .body(r#"{"anthropic_version":"bedrock-2023-05-31","max_tokens":1,"messages":[]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(
        resp.headers()["content-type"],
        "application/vnd.amazon.eventstream"
    );
    let body = resp.bytes().await.unwrap();
    let mut decoder = Decoder::new(16 << 20);
    let events = decoder.feed(&body);
    assert!(!decoder.mid_frame());
    let kinds: Vec<String> = events
        .iter()
        .map(|e| match e {
            Event::Chunk(v) => v["type"].as_str().unwrap().to_string(),
            Event::Exception { kind, .. } => format!("exception {kind}"),
            Event::Other | Event::TooLarge { .. } => "other".into(),
        })
        .collect();
    assert_eq!(kinds.first().map(String::as_str), Some("message_start"));
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("exception budget_exceeded")
    );
    assert!(!kinds.iter().any(|k| k == "message_stop"), "{kinds:?}");
    let Some(Event::Exception { message, .. }) = events.last() else {
        panic!("no exception frame");
    };
    assert!(
        message.starts_with("paddock broker: job budget reached"),
        "{message}"
    );

    let call = broker.calls.recv().await.unwrap().row;
    assert_eq!(
        (
            call.provider.as_str(),
            call.requested_model.as_str(),
            call.status,
            call.estimated,
            call.error.as_deref()
        ),
        (
            "bedrock",
            "anthropic.claude-haiku-4-5-20251001-v1:0",
            CallStatus::StreamError,
            true,
            Some(message.as_str())
        )
    );
    // Cut at the first event past the ceiling: at most one delta over.
    assert!(call.cost_micros > budget, "{call:?}");
    assert!(call.cost_micros <= budget + 25, "{call:?}");
    assert_eq!(broker.policy.try_recv().unwrap().message, *message);
    assert!(broker.held());
}

/// A broker signing with `bedrock` in front of a mock Bedrock runtime that
/// verifies SigV4 with `ACCESS_KEY_ID` / `rig-secret`.
async fn signed_rig(
    bedrock: paddock::broker::bedrock::Bedrock,
) -> (
    MockUpstream,
    paddock::broker::BrokerHandle,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().unwrap();
    let upstream = MockUpstream::start_bedrock(
        tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        Arc::new(
            Scenario::from_toml(
                "[[turn]]\ntext = \"Hello.\"\nusage = { input = 4, output = 2 }\n",
                std::path::Path::new("rig.toml"),
            )
            .unwrap(),
        ),
        RenderContext {
            workdir: dir.path().to_path_buf(),
        },
        AwsCredentials {
            access_key_id: ACCESS_KEY_ID.into(),
            secret_access_key: Secret::new("rig-secret".into()),
            region: "us-east-1".into(),
        },
    )
    .unwrap();
    let broker = credential_broker(
        upstream.base.trim_end_matches("/v1").to_string(),
        paddock::broker::Provider::Bedrock(std::sync::Arc::new(bedrock)),
    )
    .await;
    (upstream, broker, dir)
}

/// A mock ECS/EKS container credentials endpoint (the protocol of
/// `AWS_CONTAINER_CREDENTIALS_FULL_URI`): a GET with the authorization token
/// gets `ACCESS_KEY_ID` / `rig-secret` with the session token
/// `ecs-session-N` (its `N`th) expiring `life` seconds from now.
async fn mock_container_credentials(
    auth: &'static str,
    life: i64,
) -> (String, Arc<std::sync::atomic::AtomicU64>) {
    use std::sync::atomic::{AtomicU64, Ordering};
    let hits = Arc::new(AtomicU64::new(0));
    let counter = hits.clone();
    let app = axum::Router::new().route(
        "/v2/credentials/paddock-test",
        axum::routing::get(move |headers: http::HeaderMap| {
            let counter = counter.clone();
            async move {
                if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(auth) {
                    return (http::StatusCode::UNAUTHORIZED, "{}".to_string());
                }
                let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
                let expiry = (time::OffsetDateTime::now_utc() + time::Duration::seconds(life))
                    .replace_nanosecond(0)
                    .unwrap()
                    .format(&time::format_description::well_known::Rfc3339)
                    .unwrap();
                (
                    http::StatusCode::OK,
                    serde_json::json!({"AccessKeyId": ACCESS_KEY_ID, "SecretAccessKey": "rig-secret",
                        "Token": format!("ecs-session-{n}"), "Expiration": expiry,
                        "RoleArn": "arn:aws:iam::123456789012:role/paddock-test"})
                    .to_string(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://{}/v2/credentials/paddock-test",
        listener.local_addr().unwrap()
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, hits)
}

/// The AWS credential chain (`aws-config`), in one test because it reads
/// this process's environment: a named profile of the shared credentials
/// file, then container credentials from a mock endpoint on loopback,
/// refreshed before they expire (the endpoint sees a second request, the
/// upstream, which verifies every signature, the new session token).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_aws_credential_chain_signs_and_refreshes_before_expiry() {
    let _env = paddock_test_support::PROCESS_ENV.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let credentials = dir.path().join("credentials");
    std::fs::write(
        &credentials,
        format!("[default]\naws_access_key_id = AKIADEFAULTNOTUSED01\naws_secret_access_key = wrong\n\n[dev]\naws_access_key_id = {ACCESS_KEY_ID}\naws_secret_access_key = rig-secret\n"),
    )
    .unwrap();
    for var in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    ] {
        std::env::remove_var(var);
    }
    std::env::set_var("AWS_SHARED_CREDENTIALS_FILE", &credentials);
    std::env::set_var("AWS_CONFIG_FILE", dir.path().join("no-config"));
    std::env::set_var("AWS_EC2_METADATA_DISABLED", "true");
    let client = || reqwest::Client::builder().no_proxy().build().unwrap();

    // A named profile of the shared credentials file.
    let bedrock = paddock::broker::bedrock::Bedrock::from_chain("us-east-1", Some("dev"), client())
        .await
        .unwrap();
    let (upstream, broker, _dir) = signed_rig(bedrock).await;
    assert_eq!(invoke_haiku(&broker).await.status().as_u16(), 200);
    assert!(upstream.requests()[0].headers["authorization"]
        .to_str()
        .unwrap()
        .starts_with(&format!("AWS4-HMAC-SHA256 Credential={ACCESS_KEY_ID}/")));

    // Container credentials (no profile file entry applies), 4 s to live:
    // used for 2 s, then replaced.
    std::fs::write(&credentials, "").unwrap();
    let (uri, hits) = mock_container_credentials("paddock-container-token", 4).await;
    std::env::set_var("AWS_CONTAINER_CREDENTIALS_FULL_URI", &uri);
    std::env::set_var(
        "AWS_CONTAINER_AUTHORIZATION_TOKEN",
        "paddock-container-token",
    );
    let bedrock = paddock::broker::bedrock::Bedrock::from_chain("us-east-1", None, client())
        .await
        .unwrap();
    // The chain reads its sources again at each refresh.
    let (upstream, broker, _dir) = signed_rig(bedrock).await;
    let mut statuses = Vec::new();
    for wait in [0u64, 0, 2500] {
        tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
        statuses.push(invoke_haiku(&broker).await.status().as_u16());
    }
    std::env::remove_var("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    std::env::remove_var("AWS_CONTAINER_AUTHORIZATION_TOKEN");
    let tokens: Vec<String> = upstream
        .requests()
        .iter()
        .map(|r| {
            r.headers["x-amz-security-token"]
                .to_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        (
            statuses,
            hits.load(std::sync::atomic::Ordering::SeqCst),
            tokens
        ),
        (
            vec![200, 200, 200],
            2,
            vec![
                "ecs-session-1".to_string(),
                "ecs-session-1".to_string(),
                "ecs-session-2".to_string()
            ]
        )
    );
}

/// A Bedrock API key in `AWS_BEARER_TOKEN_BEDROCK` (the spec has no key):
/// the real Claude Code through the broker, which sends the key as
/// `Authorization: Bearer` instead of signing; the mock Bedrock runtime
/// accepts only that key. The key is nowhere the job or Paddock writes.
#[tokio::test(flavor = "multi_thread")]
async fn claude_runs_through_bedrock_with_an_api_key_from_the_environment() {
    let Some(_) = paddock_test_support::prelude::engine("claude") else {
        return;
    };
    let home = Home::new();
    let api_key = format!("ABSKQmVkcm9ja0FQSUtleS1wYWRkb2Nr{}", std::process::id());
    let scenario = Scenario::from_toml(PROVIDER_PROBE, std::path::Path::new("probe.toml")).unwrap();
    let bedrock = MockUpstream::start_bedrock_api_key(
        tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        Arc::new(scenario),
        RenderContext {
            workdir: home.path().to_path_buf(),
        },
        Secret::new(api_key.clone()),
    )
    .unwrap();
    let repo = repo(home.path());
    let upstream = format!(
        "[upstream]\nprovider = \"bedrock\"\nbase_url = \"{}\"\nbedrock_region = \"us-west-2\"\n",
        bedrock.base.trim_end_matches("/v1"),
    );
    let spec = job(home.path(), "claude", &repo, &upstream, None);
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        "model = \"claude-sonnet-4-5\"",
        &format!("model = \"{MODEL}\""),
    );
    std::fs::write(&spec, text).unwrap();
    let out = home
        .paddock(
            &["run", "--json", "--keep", spec.to_str().unwrap()],
            &[("AWS_BEARER_TOKEN_BEDROCK", &api_key)],
        )
        .await;
    let rec = record(&out);
    assert_eq!(
        rec.status,
        JobStatus::Done,
        "reason: {:?}; stderr: {}",
        rec.reason,
        String::from_utf8_lossy(&out.stderr)
    );
    let auths: Vec<String> = bedrock
        .requests()
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r.headers["authorization"].to_str().unwrap(),
                r.headers.contains_key("x-amz-date")
            )
        })
        .collect();
    assert_eq!(auths, vec![format!("Bearer {api_key} false"); 2]);
    let work = home.jobs().join(&rec.id).join("work");
    let engine_env = std::fs::read_to_string(work.join("engine-env.txt")).unwrap();
    assert!(!engine_env.contains(&api_key), "{engine_env}");
    assert!(!engine_env.contains("AWS_BEARER_TOKEN_BEDROCK"));
    for dir in [home.jobs(), home.data()] {
        assert_eq!(
            files_containing(&dir, api_key.as_bytes()),
            Vec::<std::path::PathBuf>::new()
        );
    }
    assert!(!String::from_utf8_lossy(&out.stdout).contains(&api_key));
    assert!(!String::from_utf8_lossy(&out.stderr).contains(&api_key));
}

/// A Bedrock spec without a key whose AWS chain finds nothing (no variables,
/// no profile files, instance metadata off) is bad input before the job
/// exists, naming the chain.
#[tokio::test]
async fn a_keyless_bedrock_spec_without_aws_credentials_is_bad_input() {
    let home = Home::new();
    let repo = repo(home.path());
    let upstream = "[upstream]\nprovider = \"bedrock\"\nbase_url = \"http://127.0.0.1:9\"\nbedrock_region = \"us-east-1\"\n";
    let spec = job(home.path(), "claude", &repo, upstream, None);
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        "model = \"claude-sonnet-4-5\"",
        &format!("model = \"{MODEL}\""),
    );
    std::fs::write(&spec, text).unwrap();
    let mut cmd = home.command(&["run", spec.to_str().unwrap()]);
    for var in [
        "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    ] {
        cmd.env_remove(var);
    }
    let out = cmd
        .env("AWS_CONFIG_FILE", home.path().join("no-config"))
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            home.path().join("no-credentials"),
        )
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("upstream.key: AWS credential chain: no credentials: the credential provider was not enabled: no providers in chain provided credentials (it reads AWS_* variables, ~/.aws/config and ~/.aws/credentials with SSO and assume-role, web identity, container and instance metadata; docs/broker.md#amazon-bedrock)"),
        "{err}"
    );
    assert_eq!(home.store().await.jobs(10).await.unwrap(), vec![]);
}

//! Opt-in LIVE smoke tests: one small model call per cloud provider through
//! the broker with the credentials found the way Paddock finds them, against
//! the real provider. They are opt-in, also in CI: each runs only when its
//! switch is set and its credentials are present, and otherwise prints why
//! it skipped and passes. Nothing here runs in an ordinary `cargo test`.
//!
//! - Bedrock: `PADDOCK_LIVE_BEDROCK=1` and AWS credentials
//!   (`AWS_BEARER_TOKEN_BEDROCK`, or what the AWS chain finds: environment,
//!   `AWS_PROFILE` / `~/.aws`, SSO, container or instance credentials);
//!   region `PADDOCK_LIVE_BEDROCK_REGION` (default `us-east-1`), model
//!   `PADDOCK_LIVE_BEDROCK_MODEL` (default
//!   `us.anthropic.claude-haiku-4-5-20251001-v1:0`).
//! - Vertex: `PADDOCK_LIVE_VERTEX=1`, `PADDOCK_LIVE_VERTEX_PROJECT` and
//!   Application Default Credentials; region `PADDOCK_LIVE_VERTEX_REGION`
//!   (default `us-east5`), model `PADDOCK_LIVE_VERTEX_MODEL` (default
//!   `claude-haiku-4-5@20251001`).
//! - Azure OpenAI: `PADDOCK_LIVE_AZURE=1`, `PADDOCK_LIVE_AZURE_BASE` (e.g.
//!   `https://RESOURCE.openai.azure.com/openai/v1`),
//!   `PADDOCK_LIVE_AZURE_MODEL` (the deployment), and either Entra ID client
//!   credentials (`AZURE_TENANT_ID`, `AZURE_CLIENT_ID`,
//!   `AZURE_CLIENT_SECRET`), or `AZURE_OPENAI_AD_TOKEN`, or
//!   `AZURE_OPENAI_API_KEY`.
//!
//! Run with `cargo test -p paddock --features engine-e2e --test engines live_providers -- --nocapture`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use paddock::broker::{AzureAuth, BrokerConfig, BrokerHandle, Provider, Secret, Upstream};
use paddock_protocol::CallStatus;

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// `Some(reason)` when the live test behind `switch` is not to run.
fn skip(switch: &str, missing: &[&str]) -> Option<String> {
    if var(switch).as_deref() != Some("1") {
        return Some(format!("{switch} is not 1 (live tests are opt-in)"));
    }
    if !missing.is_empty() {
        return Some(format!("{switch}=1 but {} not set", missing.join(", ")));
    }
    None
}

async fn broker(upstream: Upstream) -> BrokerHandle {
    paddock::broker::start(
        tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        BrokerConfig {
            job_id: "job-live".into(),
            attempt: 1,
            upstream,
            prices: Arc::new(paddock::broker::PriceTable::vendored().unwrap()),
            ceilings: vec![],
            allowlist: paddock::broker::ModelAllowlist::any(),
            allow_unpriced: true,
            web_search: false,
            retry: paddock::broker::RetryPolicy::default(),
            max_upstream_event_bytes: 16 << 20,
            ledger: std::sync::Arc::new(paddock::broker::ledger::MemoryLedger::default()),
        },
    )
    .unwrap()
}

/// Posts `body` to the broker's `path` with the job token, and checks the
/// answer and its ledger row.
async fn call_and_check(mut broker: BrokerHandle, path: &str, body: serde_json::Value) {
    let resp = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("{}{path}", broker.url))
        .header("x-api-key", broker.token.expose())
        .bearer_auth(broker.token.expose())
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    assert_eq!(status, 200, "{text}");
    let call = broker.calls.recv().await.unwrap().row;
    eprintln!(
        "live {}: {} tokens in, {} out, {:?} ms",
        call.provider, call.tokens.input_tokens, call.tokens.output_tokens, call.duration_ms
    );
    assert_eq!(call.status, CallStatus::Ok, "{:?}", call.error);
    assert!(call.tokens.output_tokens > 0, "{text}");
}

fn messages_body(version: &str) -> serde_json::Value {
    serde_json::json!({"anthropic_version": version, "max_tokens": 16,
        "messages": [{"role": "user", "content": "Say OK."}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_bedrock() {
    let aws_files = std::env::var_os("HOME")
        .map(|h| std::path::Path::new(&h).join(".aws"))
        .is_some_and(|d| d.exists());
    let have = [
        "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_ACCESS_KEY_ID",
        "AWS_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    ]
    .iter()
    .any(|v| var(v).is_some())
        || aws_files;
    let missing: &[&str] = if have {
        &[]
    } else {
        &["AWS credentials (AWS_BEARER_TOKEN_BEDROCK, AWS_ACCESS_KEY_ID, AWS_PROFILE, ~/.aws, …)"]
    };
    if let Some(why) = skip("PADDOCK_LIVE_BEDROCK", missing) {
        eprintln!("skipping live_bedrock: {why}");
        return;
    }
    let region = var("PADDOCK_LIVE_BEDROCK_REGION").unwrap_or_else(|| "us-east-1".into());
    let model = var("PADDOCK_LIVE_BEDROCK_MODEL")
        .unwrap_or_else(|| "us.anthropic.claude-haiku-4-5-20251001-v1:0".into());
    let bedrock = match var("AWS_BEARER_TOKEN_BEDROCK") {
        Some(key) => paddock::broker::bedrock::Bedrock::with_api_key(Secret::new(key), &region),
        None => paddock::broker::bedrock::Bedrock::from_chain(
            &region,
            None,
            reqwest::Client::builder().no_proxy().build().unwrap(),
        )
        .await
        .unwrap(),
    };
    let broker = broker(Upstream {
        base: format!("https://bedrock-runtime.{region}.amazonaws.com"),
        provider: Provider::Bedrock(Arc::new(bedrock)),
    })
    .await;
    let path = format!(
        "/model/{}/invoke",
        paddock::broker::bedrock::encode_model(&model)
    );
    call_and_check(broker, &path, messages_body("bedrock-2023-05-31")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_vertex() {
    let project = var("PADDOCK_LIVE_VERTEX_PROJECT");
    let missing: &[&str] = if project.is_some() {
        &[]
    } else {
        &["PADDOCK_LIVE_VERTEX_PROJECT"]
    };
    if let Some(why) = skip("PADDOCK_LIVE_VERTEX", missing) {
        eprintln!("skipping live_vertex: {why}");
        return;
    }
    let project = project.unwrap_or_default();
    let region = var("PADDOCK_LIVE_VERTEX_REGION").unwrap_or_else(|| "us-east5".into());
    let model =
        var("PADDOCK_LIVE_VERTEX_MODEL").unwrap_or_else(|| "claude-haiku-4-5@20251001".into());
    let vertex = paddock::broker::vertex::Vertex::from_default_credentials(&project, &region)
        .await
        .unwrap();
    let broker = broker(Upstream {
        base: format!("https://{region}-aiplatform.googleapis.com/v1"),
        provider: Provider::Vertex(Arc::new(vertex)),
    })
    .await;
    let path = format!(
        "/v1/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:rawPredict"
    );
    call_and_check(broker, &path, messages_body("vertex-2023-10-16")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_azure_openai() {
    let base = var("PADDOCK_LIVE_AZURE_BASE");
    let model = var("PADDOCK_LIVE_AZURE_MODEL");
    let entra = match (
        var("AZURE_TENANT_ID"),
        var("AZURE_CLIENT_ID"),
        var("AZURE_CLIENT_SECRET"),
    ) {
        (Some(t), Some(c), Some(s)) => Some((t, c, s)),
        _ => None,
    };
    let token = var("AZURE_OPENAI_AD_TOKEN");
    let api_key = var("AZURE_OPENAI_API_KEY");
    let mut missing = Vec::new();
    if base.is_none() {
        missing.push("PADDOCK_LIVE_AZURE_BASE");
    }
    if model.is_none() {
        missing.push("PADDOCK_LIVE_AZURE_MODEL");
    }
    if entra.is_none() && token.is_none() && api_key.is_none() {
        missing.push("AZURE_TENANT_ID+AZURE_CLIENT_ID+AZURE_CLIENT_SECRET, AZURE_OPENAI_AD_TOKEN or AZURE_OPENAI_API_KEY");
    }
    if let Some(why) = skip("PADDOCK_LIVE_AZURE", &missing) {
        eprintln!("skipping live_azure_openai: {why}");
        return;
    }
    let provider = match (entra, token, api_key) {
        (Some((t, c, s)), _, _) => Provider::Azure(AzureAuth::Entra(Arc::new(
            paddock::broker::entra::Entra::new(&t, &c, Secret::new(s), None, None).unwrap(),
        ))),
        (None, Some(token), _) => Provider::OpenAi {
            key: Secret::new(token),
        },
        (None, None, key) => {
            Provider::Azure(AzureAuth::ApiKey(Secret::new(key.unwrap_or_default())))
        }
    };
    let broker = broker(Upstream {
        base: base.unwrap_or_default(),
        provider,
    })
    .await;
    let body = serde_json::json!({"model": model.unwrap_or_default(), "max_completion_tokens": 16,
        "messages": [{"role": "user", "content": "Say OK."}]});
    call_and_check(broker, "/v1/chat/completions", body).await;
}

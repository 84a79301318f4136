//! Claude Code through Google Vertex AI: the real `paddock` binary runs the
//! real Claude Code in Vertex mode (its own Google auth skipped) against
//! the broker, which mints the service account's token at a mock Google
//! token endpoint (it verifies the RS256 JWT with the account's public key)
//! and forwards to a mock Vertex endpoint (the scripted upstream serving
//! the Vertex paths, which accepts only that token). Mocks, because Google
//! cannot be reached here; both speak the real wire formats.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::Ordering;
use std::sync::Arc;

use paddock::broker::Secret;
use paddock::scripted::{RenderContext, Scenario};
use paddock_protocol::{CallStatus, JobStatus, TokenUsage};
use paddock_test_support::google::token_endpoint;
use paddock_test_support::prelude::*;
use paddock_test_support::MockUpstream;

#[tokio::test(flavor = "multi_thread")]
async fn claude_runs_through_vertex_with_the_token_minted_by_the_broker() {
    let Some(_) = paddock_test_support::prelude::engine("claude") else {
        return;
    };
    let home = Home::new();
    let keys = home.path().join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let Some((private_pem, public_pem)) = key_pair(&keys) else {
        return;
    };
    let access = format!("ya29.mock-access-{}", std::process::id());
    let email = "paddock-test@proj.iam.gserviceaccount.com".to_string();
    let (token_uri, token_hits) =
        token_endpoint(public_pem, access.clone(), email.clone(), 3599).await;
    let access = format!("{access}-1");
    let sa_json = serde_json::json!({
        "type": "service_account", "project_id": "proj", "client_email": email,
        "private_key": private_pem, "token_uri": token_uri,
    });
    let sa_path = keys.join("sa.json");
    std::fs::write(&sa_path, sa_json.to_string()).unwrap();

    // The mock Vertex endpoint answers only with the minted token.
    let scenario = Scenario::from_toml(PROVIDER_PROBE, std::path::Path::new("probe.toml")).unwrap();
    let vertex = MockUpstream::start(
        tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        Arc::new(scenario),
        RenderContext {
            workdir: home.path().to_path_buf(),
        },
        Some(Secret::new(access.clone())),
    )
    .unwrap();
    let repo = repo(home.path());
    let upstream = format!(
        "[upstream]\nprovider = \"vertex\"\nkey = \"file:{}\"\nbase_url = \"{}\"\nvertex_project = \"proj\"\nvertex_region = \"us-east5\"\n",
        sa_path.display(),
        vertex.base
    );
    let spec = job(home.path(), "claude", &repo, &upstream, None);
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

    // Every call went to the project's Vertex path with the minted token;
    // the token was minted once and cached.
    let requests = vertex.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!(
            r.path,
            "/v1/projects/proj/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5:streamRawPredict"
        );
        assert_eq!(
            r.headers["authorization"],
            format!("Bearer {access}").as_str()
        );
        assert!(!r.headers.contains_key("x-api-key"));
    }
    assert_eq!(token_hits.load(Ordering::SeqCst), 1);

    // The ledger: provider vertex, the scenario's usage exactly.
    let store = home.store().await;
    let calls = store.model_calls(&rec.id).await.unwrap();
    let tokens: Vec<(String, CallStatus, TokenUsage)> = calls
        .iter()
        .map(|c| (c.provider.clone(), c.status, c.tokens))
        .collect();
    assert_eq!(
        tokens,
        vec![
            (
                "vertex".to_string(),
                CallStatus::Ok,
                TokenUsage {
                    input_tokens: 10,
                    cached_input_tokens: 20,
                    cache_write_tokens: 30,
                    output_tokens: 5,
                    reasoning_tokens: 0
                }
            ),
            (
                "vertex".to_string(),
                CallStatus::Ok,
                TokenUsage {
                    input_tokens: 12,
                    output_tokens: 3,
                    ..TokenUsage::default()
                }
            ),
        ]
    );

    // The engine ran in Vertex mode with only its job token.
    let work = home.jobs().join(&rec.id).join("work");
    let engine_env = std::fs::read_to_string(work.join("engine-env.txt")).unwrap();
    assert!(
        engine_env.contains("CLAUDE_CODE_USE_VERTEX=1"),
        "{engine_env}"
    );
    assert!(engine_env.contains("ANTHROPIC_CUSTOM_HEADERS=x-api-key: pdk-job-"));
    // Neither the access token nor the private key is anywhere the job or
    // Paddock writes: environment, files, events, logs, the database.
    let key_line = private_pem.lines().nth(1).unwrap().to_string();
    for secret in [access.as_str(), key_line.as_str()] {
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
    }
    let spec_json = store.job_spec(&rec.id).await.unwrap().unwrap();
    assert!(spec_json.contains("file:"));
}

#[tokio::test]
async fn a_bad_service_account_key_is_bad_input() {
    let home = Home::new();
    let repo = repo(home.path());
    let sa = home.path().join("sa.json");
    std::fs::write(
        &sa,
        r#"{"client_email":"x@y","private_key":"not a key","token_uri":"http://127.0.0.1:9/token"}"#,
    )
    .unwrap();
    let upstream = format!(
        "[upstream]\nprovider = \"vertex\"\nkey = \"file:{}\"\nvertex_project = \"proj\"\nvertex_region = \"us-east5\"\n",
        sa.display()
    );
    let spec = job(home.path(), "claude", &repo, &upstream, None);
    let out = home.paddock(&["run", spec.to_str().unwrap()], &[]).await;
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "upstream.key: Vertex service account x@y: private_key is not an RSA private key in PEM: InvalidKeyFormat"
        ),
        "{err}"
    );
    assert_eq!(home.store().await.jobs(10).await.unwrap(), vec![]);
}

/// A Vertex job's broker serves Vertex's paths only: the minted token never
/// goes to another route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vertex_broker_refuses_other_routes() {
    let dir = tempfile::tempdir().unwrap();
    let Some((private_pem, _)) = key_pair(dir.path()) else {
        return;
    };
    let sa = serde_json::json!({"client_email": "a@b", "token_uri": "http://127.0.0.1:9/token",
        "private_key": private_pem});
    let vertex =
        paddock::broker::vertex::Vertex::new(&Secret::new(sa.to_string()), "proj", "us-east5")
            .unwrap();
    let broker = credential_broker(
        "http://127.0.0.1:9/v1".into(),
        paddock::broker::Provider::Vertex(Arc::new(vertex)),
    )
    .await;
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    for path in ["/v1/messages", "/v1/responses", "/v1/chat/completions"] {
        let resp = client
            .post(format!("{}{path}", broker.url))
            .header("x-api-key", broker.token.expose())
            .body(r#"{"model":"claude-sonnet-4-5","messages":[]}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 404, "{path}");
    }
}

/// A 2048-bit RSA key pair made by openssl (PEM private key, PEM public
/// key); `None` (skipped locally, a failure in CI) without openssl.
fn key_pair(dir: &std::path::Path) -> Option<(String, String)> {
    let made = paddock_test_support::google::key_pair(dir);
    if made.is_none() {
        assert!(
            !in_ci(),
            "openssl is needed to make a test service-account key"
        );
        eprintln!("skipping: openssl cannot make a test key");
    }
    made
}

/// Three calls through a Vertex job's broker, the third once the first
/// token (valid for 8 s) is past half its life: the broker reuses a token
/// until five minutes, or half its life for a short-lived one, before it
/// expires, and then fetches a new one. Returns the `authorization`
/// headers the upstream saw.
async fn three_calls(vertex: paddock::broker::vertex::Vertex) -> Vec<String> {
    let (mock, seen) = mock_upstream().await;
    let broker = credential_broker(
        format!("{mock}/v1"),
        paddock::broker::Provider::Vertex(std::sync::Arc::new(vertex)),
    )
    .await;
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let url = format!(
        "{}/v1/projects/proj/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5:rawPredict",
        broker.url
    );
    let mut statuses = Vec::new();
    for wait in [0u64, 0, 4500] {
        tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
        let resp = client
            .post(&url)
            .header("x-api-key", broker.token.expose())
            .header("content-type", "application/json")
            .body(r#"{"anthropic_version":"vertex-2023-10-16","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}"#)
            .send()
            .await
            .unwrap();
        statuses.push(resp.status().as_u16());
        let _ = resp.bytes().await.unwrap();
    }
    assert_eq!(statuses, vec![200, 200, 200]);
    let seen = seen.lock().unwrap().clone();
    seen
}

/// A service-account token about to expire is replaced before it does: the
/// mock token endpoint (RFC 7523 JWT bearer, signature verified) sees a
/// second request and the upstream the new token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_token_is_refreshed_before_it_expires() {
    let dir = tempfile::tempdir().unwrap();
    let Some((private_pem, public_pem)) = key_pair(dir.path()) else {
        return;
    };
    let email = "refresh@proj.iam.gserviceaccount.com".to_string();
    // Valid for 8 s: used for 4 s (half its life), then replaced.
    let (token_uri, hits) = token_endpoint(public_pem, "ya29.r".into(), email.clone(), 8).await;
    let sa = serde_json::json!({"type": "service_account", "client_email": email,
        "private_key": private_pem, "token_uri": token_uri});
    let vertex =
        paddock::broker::vertex::Vertex::new(&Secret::new(sa.to_string()), "proj", "us-east5")
            .unwrap();
    let seen = three_calls(vertex).await;
    assert_eq!(
        (hits.load(Ordering::SeqCst), seen),
        (
            2,
            vec![
                "Bearer ya29.r-1".to_string(),
                "Bearer ya29.r-1".to_string(),
                "Bearer ya29.r-2".to_string()
            ]
        )
    );
}

/// Without a key in the spec, the broker finds Google's Application Default
/// Credentials: here the service-account file `GOOGLE_APPLICATION_CREDENTIALS`
/// names (the first source tried), refreshed like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn application_default_credentials_come_from_google_application_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let Some((private_pem, public_pem)) = key_pair(dir.path()) else {
        return;
    };
    let email = "adc@proj.iam.gserviceaccount.com".to_string();
    let (token_uri, hits) = token_endpoint(public_pem, "ya29.adc".into(), email.clone(), 8).await;
    let sa_path = dir.path().join("adc.json");
    std::fs::write(
        &sa_path,
        serde_json::json!({"type": "service_account", "client_email": email,
            "private_key": private_pem, "token_uri": token_uri})
        .to_string(),
    )
    .unwrap();
    let env = paddock::broker::google_adc::AdcEnv {
        credentials_file: Some(sa_path),
        ..Default::default()
    };
    let vertex =
        paddock::broker::vertex::Vertex::from_default_credentials_in(&env, "proj", "us-east5")
            .await
            .unwrap();
    assert_eq!(
        format!("{vertex:?}"),
        "Vertex { project: \"proj\", region: \"us-east5\", credentials: \"Application Default Credentials\", .. }"
    );
    let seen = three_calls(vertex).await;
    assert_eq!(
        (hits.load(Ordering::SeqCst), seen),
        (
            2,
            vec![
                "Bearer ya29.adc-1".to_string(),
                "Bearer ya29.adc-1".to_string(),
                "Bearer ya29.adc-2".to_string()
            ]
        )
    );
}

//! Azure OpenAI with Microsoft Entra ID: the broker holds the app's client
//! secret, gets access tokens at a mock Entra token endpoint (the OAuth 2.0
//! client-credentials grant of `login.microsoftonline.com`, checking the
//! secret and the scope), refreshes them before they expire, and sends them
//! upstream as `Authorization: Bearer`; the client secret goes to the token
//! endpoint only. Mocks, because Azure cannot be reached here; they speak
//! the real wire formats.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use paddock::broker::entra::Entra;
use paddock::broker::Secret;
use paddock_protocol::JobStatus;
use paddock_test_support::prelude::*;

const TENANT: &str = "72f988bf-86f1-41af-91ab-2d7cd011db47";
const CLIENT: &str = "0f1e2d3c-aaaa-bbbb-cccc-1234567890ab";

/// The stand-in Entra token endpoint of `TENANT`'s app `CLIENT` with
/// `secret` (crates/test-support).
async fn mock_entra(secret: String, token: String, expires_in: u64) -> (String, Arc<AtomicU64>) {
    let app = paddock_test_support::entra::App {
        tenant: TENANT.into(),
        client_id: CLIENT.into(),
        secret,
    };
    paddock_test_support::entra::token_endpoint(app, token, expires_in).await
}

/// A token about to expire is replaced before it does: the mock token
/// endpoint sees a second request and the upstream the new token; the
/// client secret never goes upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entra_token_is_refreshed_before_it_expires() {
    let secret = "entra~client~secret~refresh".to_string();
    // Valid for 4 s: used for 2 s (half its life), then replaced.
    let (authority, hits) = mock_entra(secret.clone(), "eyJ0.entra".into(), 4).await;
    let entra = Entra::new(
        TENANT,
        CLIENT,
        Secret::new(secret.clone()),
        Some(&authority),
        None,
    )
    .unwrap();
    let (mock, seen) = mock_upstream().await;
    let broker = credential_broker(
        format!("{mock}/openai/v1?api-version=preview"),
        paddock::broker::Provider::Azure(paddock::broker::AzureAuth::Entra(std::sync::Arc::new(
            entra,
        ))),
    )
    .await;
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut statuses = Vec::new();
    for wait in [0u64, 0, 2500] {
        tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
        let resp = client
            .post(format!("{}/v1/chat/completions", broker.url))
            .bearer_auth(broker.token.expose())
            .header("content-type", "application/json")
            .body(r#"{"model":"gpt-5.5","messages":[{"role":"user","content":"hi"}]}"#)
            .send()
            .await
            .unwrap();
        statuses.push(resp.status().as_u16());
        let _ = resp.bytes().await.unwrap();
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        (statuses, hits.load(Ordering::SeqCst), seen),
        (
            vec![200, 200, 200],
            2,
            vec![
                "Bearer eyJ0.entra-1".to_string(),
                "Bearer eyJ0.entra-1".to_string(),
                "Bearer eyJ0.entra-2".to_string()
            ]
        )
    );
}

/// A secret Entra refuses fails the call with Entra's own message (502 to
/// the engine), and nothing reaches the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_client_secret_is_a_bad_gateway_with_entras_message() {
    let (authority, hits) = mock_entra("the-right-secret".into(), "t".into(), 3600).await;
    let entra = Entra::new(
        TENANT,
        CLIENT,
        Secret::new("a-wrong-secret".into()),
        Some(&authority),
        None,
    )
    .unwrap();
    let (mock, seen) = mock_upstream().await;
    let broker = credential_broker(
        format!("{mock}/openai/v1"),
        paddock::broker::Provider::Azure(paddock::broker::AzureAuth::Entra(std::sync::Arc::new(
            entra,
        ))),
    )
    .await;
    let resp = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("{}/v1/chat/completions", broker.url))
        .bearer_auth(broker.token.expose())
        .body(r#"{"model":"gpt-5.5","messages":[{"role":"user","content":"hi"}]}"#)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let body = resp.text().await.unwrap();
    assert_eq!(status, 502, "{body}");
    assert!(
        body.contains(&format!("Entra ID app {CLIENT}: token endpoint {authority}/{TENANT}/oauth2/v2.0/token answered HTTP 401: {{\\\"error\\\":\\\"invalid_client\\\"")),
        "{body}"
    );
    assert!(!body.contains("a-wrong-secret"));
    assert_eq!(
        (hits.load(Ordering::SeqCst), seen.lock().unwrap().len()),
        (1, 0)
    );
}

/// The real `paddock` binary and the real Codex CLI against an Azure-style
/// upstream with Entra ID: the spec's `[upstream.entra]` and the client
/// secret from the environment; the upstream answers only the minted token.
#[tokio::test(flavor = "multi_thread")]
async fn codex_runs_against_azure_openai_with_an_entra_token() {
    let Some(_) = paddock_test_support::prelude::engine("codex") else {
        return;
    };
    let home = Home::new();
    let repo = repo(home.path());
    let secret = format!("entra~secret~{}", std::process::id());
    let (authority, hits) = mock_entra(secret.clone(), "eyJ0.e2e".into(), 3600).await;
    let provider = KeyedProvider::start(&home, "codex", PROVIDER_PROBE, "eyJ0.e2e-1").await;
    let upstream = format!(
        "[upstream]\nprovider = \"openai\"\nkey = \"env:PADDOCK_E2E_ENTRA_SECRET\"\nbase_url = \"{}\"\n[upstream.entra]\ntenant_id = \"{TENANT}\"\nclient_id = \"{CLIENT}\"\nauthority = \"{authority}\"\n",
        provider.base
    );
    let spec = job(home.path(), "codex", &repo, &upstream, None);
    paddock_test_support::prelude::on_rung(&spec, "process");
    let out = home
        .paddock(
            &["run", "--json", "--keep", spec.to_str().unwrap()],
            &[("PADDOCK_E2E_ENTRA_SECRET", &secret)],
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
    // Both calls carried the minted token (the provider refuses others),
    // minted once.
    let auths: Vec<String> = provider
        .server
        .requests()
        .iter()
        .map(|r| r.headers["authorization"].to_str().unwrap().to_string())
        .collect();
    assert_eq!(
        (auths, hits.load(Ordering::SeqCst)),
        (
            vec![
                "Bearer eyJ0.e2e-1".to_string(),
                "Bearer eyJ0.e2e-1".to_string()
            ],
            1
        )
    );
    // The secret is nowhere the job or Paddock writes.
    let work = home.jobs().join(&rec.id).join("work");
    let engine_env = std::fs::read_to_string(work.join("engine-env.txt")).unwrap();
    assert!(!engine_env.contains(&secret));
    assert!(!engine_env.contains("eyJ0.e2e"));
    for dir in [home.jobs(), home.data()] {
        assert_eq!(
            files_containing(&dir, secret.as_bytes()),
            Vec::<std::path::PathBuf>::new()
        );
    }
    assert!(!String::from_utf8_lossy(&out.stdout).contains(&secret));
    assert!(!String::from_utf8_lossy(&out.stderr).contains(&secret));
}

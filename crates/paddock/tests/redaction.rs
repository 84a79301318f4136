//! Redaction by attack: a provider that echoes the job's provider key in its
//! error message (as OpenAI does for a wrong key), with the real engines.
//! The key is a known secret value that matches no token pattern, so only
//! value redaction can catch it; it must not appear in any event, ledger
//! row, job record, artifact or output of Paddock.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::PathBuf;

use common::*;
use paddock_protocol::{EventBody, JobStatus};

async fn an_echoed_provider_key_is_redacted(engine: &str) {
    let Some(_) = common::engine(engine) else {
        return;
    };
    let home = Home::new();
    let repo = repo(home.path());
    let key = format!("paddock-known-secret-{}-value", std::process::id());
    let scenario = format!(
        r#"
[[turn]]
error = {{ status = 400, message = "Incorrect API key provided: {key}." }}
"#
    );
    let provider = KeyedProvider::start(&home, engine, &scenario, &key).await;
    let upstream = format!(
        "[upstream]
{}
",
        provider.spec_lines()
    );
    let spec = job(home.path(), engine, &repo, &upstream, None);
    let out = home
        .paddock(
            &["run", "--json", spec.to_str().unwrap()],
            &[("PADDOCK_E2E_KEY", &key), ("PADDOCK_LOG", "debug")],
        )
        .await;
    let rec = record(&out);
    assert_eq!(rec.status, JobStatus::Failed);
    // The provider did answer with the key in its message.
    assert!(!provider.server.requests().is_empty());

    let store = home.store().await;
    let calls = store.model_calls(&rec.id).await.unwrap();
    let errors: Vec<String> = calls.iter().filter_map(|c| c.error.clone()).collect();
    assert!(!errors.is_empty(), "{calls:?}");
    for e in &errors {
        assert!(e.contains("Incorrect API key provided: [REDACTED]."), "{e}");
    }
    let events = store.events(&rec.id, 0).await.unwrap();
    assert!(
        events.iter().any(|e| matches!(&e.body, EventBody::Error { message, .. } if message.contains("[REDACTED]"))),
        "{events:#?}"
    );
    for e in &events {
        let json = serde_json::to_string(e).unwrap();
        assert!(!json.contains(&key), "{json}");
    }
    assert!(!rec.reason.clone().unwrap_or_default().contains(&key));
    for dir in [home.data(), home.jobs()] {
        assert_eq!(
            files_containing(&dir, key.as_bytes()),
            Vec::<PathBuf>::new()
        );
    }
    assert!(!String::from_utf8_lossy(&out.stdout).contains(&key));
    assert!(!String::from_utf8_lossy(&out.stderr).contains(&key));
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_an_echoed_provider_key_is_redacted() {
    an_echoed_provider_key_is_redacted("codex").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_an_echoed_provider_key_is_redacted() {
    an_echoed_provider_key_is_redacted("claude").await;
}

/// `--keep`: the event that reports the kept workspace is redacted like any
/// other; the real path is printed on stderr for the user.
#[tokio::test(flavor = "multi_thread")]
async fn a_kept_workspace_is_named_on_stderr_not_in_events() {
    let Some(_) = common::engine("codex") else {
        return;
    };
    let home = Home::new();
    let repo = repo(home.path());
    let spec = job(
        home.path(),
        "codex",
        &repo,
        SCRIPTED,
        Some("[[turn]]\ntext = \"Done.\"\n"),
    );
    let out = home
        .paddock(&["run", "--json", "--keep", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    assert_eq!(rec.status, JobStatus::Done, "reason: {:?}", rec.reason);
    let root = home.jobs().join(&rec.id);
    assert!(root.join("work").is_dir());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("paddock: workspace kept at {}\n", root.display())),
        "{stderr}"
    );
    let events = home.store().await.events(&rec.id, 0).await.unwrap();
    assert!(events.iter().any(|e| e.body
        == EventBody::Status {
            phase: paddock_protocol::Phase::Concluding,
            detail: Some("workspace kept at <job-dir>".into()),
        }));
}

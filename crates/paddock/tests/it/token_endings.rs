//! Every way a job ends revokes the forge tokens minted for it (issue #14):
//! a job disposed of through the API (`DELETE /v1/jobs/{id}`) with a token
//! its killed publish left, and a `paddock run --attempt-after` killed
//! while it reads the prior job's review (the read holds that job's lease,
//! so the reaper visits it; the GitHub App token's intent, written before
//! the mint, is named). Against the GitHub mock (the one part that cannot
//! be real here), the real binary, git and SQLite.

use std::path::PathBuf;
use std::time::Duration;

use paddock::results::github_app_record::{leftover_records, ORPHAN};
use paddock_test_support::github::MockGitHub;
use paddock_test_support::prelude::*;
use serde_json::json;

use super::github_token_attacks::{alive, minted_and_left};
use super::results::app_setup;
use super::serve::{body, spec, Server, TURN};

/// A served job whose spec publishes through a GitHub App (at `mock`).
fn app_spec(home: &Home, mock: &MockGitHub, name: &str) -> serde_json::Value {
    let mut spec = spec(home, name, TURN);
    spec["results"] = json!({"github": {
        "repository": "acme/widgets",
        "api_url": mock.url,
        "push_url": format!("{}/widgets.git", mock.url),
        "app": {
            "id": 42,
            "installation_id": 7,
            "private_key": format!("file:{}", home.path().join("keys/app.pem").display()),
        },
    }});
    spec
}

/// `DELETE /v1/jobs/{id}` of an ended job whose killed publish left a live
/// installation token: the token is revoked before its record goes, then
/// the artifacts. While a `paddock publish` of the job holds its lease the
/// dispose is refused (409 `job_publishing`), and when a token cannot be
/// revoked (GitHub down) it is refused too (409 `tokens_not_revoked`), the
/// artifacts and the record kept for the reaper and a later dispose.
#[tokio::test(flavor = "multi_thread")]
async fn dispose_revokes_the_tokens_a_killed_publish_left() {
    let home = Home::new();
    let keys = home.path().join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let Some((_, public)) = paddock_test_support::github::app_key(&keys) else {
        assert!(!in_ci(), "openssl is needed to make a test App key");
        eprintln!("skipping: openssl cannot make a test App key");
        return;
    };
    let mock = MockGitHub::start("acme", "widgets", "ghs_served").await;
    mock.enable_app(42, 7, &public);
    let server = Server::start(&home, &[]).await;
    let id = server.submit_ok(&app_spec(&home, &mock, "T-1"), 0).await;
    let ended = server.wait_for(&id, super::serve::is_final).await;
    let artifacts = home.data().join("artifacts").join(&id);
    let (token, record) = minted_and_left(&mock, &home, &artifacts).await;
    let delete = || async {
        server
            .client
            .delete(server.url(&format!("/v1/jobs/{id}")))
            .send()
            .await
            .unwrap()
    };

    // A publish of the job holds its lease: refused, nothing touched.
    let publishing = paddock::reaper::Lease::take_to_publish(&home.jobs(), &id)
        .unwrap()
        .unwrap();
    let busy = delete().await;
    let busy = (
        busy.status().as_u16(),
        body::<serde_json::Value>(busy).await["code"].clone(),
    );
    publishing.release().unwrap();
    drop(publishing);

    // GitHub down: the token cannot be revoked, so nothing is removed.
    mock.set_down(true);
    let down = delete().await;
    let down = (
        down.status().as_u16(),
        body::<serde_json::Value>(down).await,
    );
    mock.set_down(false);
    let kept = (record.exists(), alive(&mock, &token).await);

    let gone = delete().await;
    let status = gone.status().as_u16();
    let disposed: paddock_protocol::JobRecord = body(gone).await;
    assert_eq!(
        (
            busy,
            down.0,
            down.1["code"].clone(),
            down.1["detail"]
                .as_str()
                .unwrap()
                .contains(&record.file_name().unwrap().to_string_lossy().into_owned()),
            down.1.to_string().contains(&token),
            kept,
            status,
            disposed,
            artifacts.exists(),
            mock.revoked().last().cloned(),
            alive(&mock, &token).await,
        ),
        (
            (409, json!("job_publishing")),
            409,
            json!("tokens_not_revoked"),
            true,
            false,
            (true, true),
            200,
            ended,
            false,
            Some(token.clone()),
            false,
        ),
        "{}",
        down.1
    );
}

/// `paddock run --attempt-after JOB` killed while it mints the token to
/// read JOB's review (GitHub never answers): the read held JOB's lease, so
/// `paddock gc` visits JOB, finds the intent written before the mint and
/// names it (a token GitHub may have made and Paddock cannot revoke), and
/// removes it; the next pass has nothing left to do for JOB (its lease
/// released), and JOB stays `done`.
#[tokio::test(flavor = "multi_thread")]
async fn a_review_read_killed_mid_mint_is_named_by_the_reaper() {
    let home = Home::new();
    let Some((_repo, _bare, mock, _server, spec)) = app_setup(&home).await else {
        return;
    };
    let prior = record(
        &home
            .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
            .await,
    );
    assert_eq!(prior.status, paddock_protocol::JobStatus::Done);
    let artifacts = home.data().join("artifacts").join(&prior.id);
    mock.set_stall(true);
    let mut child = home
        .command(&[
            "run",
            "--json",
            spec.to_str().unwrap(),
            "--attempt-after",
            &prior.id,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while leftover_records(&artifacts).is_empty() || mock.requests().len() < 7 {
        assert!(
            std::time::Instant::now() < deadline,
            "the mint was never asked"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let intent = leftover_records(&artifacts);
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    mock.set_stall(false);
    let name = intent[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();

    let first = home.paddock(&["gc", "--json"], &[]).await;
    let first: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    let second = home.paddock(&["gc", "--json"], &[]).await;
    let second: serde_json::Value = serde_json::from_slice(&second.stdout).unwrap();
    let visited = |report: &serde_json::Value| -> Vec<serde_json::Value> {
        report["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|j| j["name"] == prior.id.as_str())
            .map(|j| j["errors"].clone())
            .collect()
    };
    assert_eq!(
        (
            intent.len(),
            visited(&first),
            visited(&second),
            leftover_records(&artifacts),
            home.jobs()
                .join(".leases")
                .join(format!("{}.lock", prior.id))
                .exists(),
            home.store()
                .await
                .job(&prior.id)
                .await
                .unwrap()
                .unwrap()
                .status,
        ),
        (
            1,
            vec![json!([format!(
                "github installation token {name}: {ORPHAN}"
            )])],
            Vec::<serde_json::Value>::new(),
            Vec::<PathBuf>::new(),
            false,
            paddock_protocol::JobStatus::Done,
        ),
        "{first:#} {second:#}"
    );
}

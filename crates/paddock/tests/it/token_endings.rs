//! Every way a job ends revokes the forge tokens minted for it (issue #14):
//! a job disposed of through the API (`DELETE /v1/jobs/{id}`) with a token
//! its killed publish left, and a `paddock run --attempt-after` killed
//! while it reads the prior job's review (the read holds that job's lease,
//! so the reaper visits it; the GitHub App token's intent, written before
//! the mint, is named), and `paddock serve` stopped (SIGTERM) while it
//! publishes (the next start's reaper revokes the token, `paddock publish`
//! finishes the job). Against the GitHub mock (the one part that cannot
//! be real here), the real binary, git and SQLite.

use std::path::PathBuf;
use std::time::Duration;

use paddock::results::github_app_record::{leftover_records, ORPHAN};
use paddock_test_support::github::MockGitHub;
use paddock_test_support::prelude::*;
use serde_json::json;

use super::github_token_attacks::{alive, minted_and_left};
use super::results::{app_setup, TOKEN};
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

/// `paddock serve` stopped (SIGTERM) while a served job publishes through
/// a GitHub App, its push hanging on the remote: the drain waits out the
/// grace and its wait for cancelled jobs (a publish does not stop on a
/// cancel) and serve exits 0, the job left `running`; nothing of it is
/// lost (its events, its ledger row, its patch) and its token, minted and
/// recorded, stays alive until the next start's reaper revokes it and
/// fails the job at publishing, its record pointing at the patch; then
/// `paddock publish JOB` finishes what was cut short (a new token, the
/// branch pushed, the pull request opened, both tokens revoked, the job
/// `done`).
#[tokio::test(flavor = "multi_thread")]
async fn serve_stopped_mid_publish_loses_nothing_and_publish_finishes_it() {
    use paddock_protocol::event::{EventBody, Phase};
    use paddock_protocol::{JobRecord, JobStatus};
    let home = Home::new();
    let Some((_repo, bare, mock, remote, spec_path)) = app_setup(&home).await else {
        return;
    };
    // The stand-in makes one model call first, so the job has a ledger.
    let engine = home.path().join("fakebin").join("codex");
    let script = std::fs::read_to_string(&engine).unwrap().replacen(
        "exit 0; }\n",
        "exit 0; }\nurl=$(sed -n 's/^base_url = \"\\(.*\\)\"$/\\1/p' \"$CODEX_HOME/config.toml\")\n\
         curl -sS -o \"$TMPDIR/answer\" -H \"Authorization: Bearer $PADDOCK_JOB_TOKEN\" -H 'content-type: application/json' -d '{\"model\":\"gpt-5.5\",\"input\":\"hi\",\"stream\":true}' \"$url/responses\"\n",
        1,
    );
    std::fs::write(&engine, script).unwrap();
    let spec = serde_json::to_value(paddock_protocol::JobSpec::load(&spec_path).unwrap()).unwrap();

    remote.set_stall(true);
    let server = Server::start(&home, &["--drain-grace-secs", "1"]).await;
    let id = server.submit_ok(&spec, 0).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while remote.authorizations().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the push never started: {}",
            server.stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let store = home.store().await;
    let events = store.events(&id, 0).await.unwrap();
    let calls = store.model_calls(&id).await.unwrap();
    nix::sys::signal::kill(server.pid(), nix::sys::signal::Signal::SIGTERM).unwrap();
    let mut server = server;
    // The drain's grace (1 s), then up to a minute for the cancelled job.
    let status = tokio::time::timeout(Duration::from_secs(120), server.child.wait())
        .await
        .expect("serve did not stop")
        .unwrap();
    let (patch, changed) = events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::ArtifactSummary {
                patch_path,
                changed_files,
                ..
            } => Some((patch_path.clone(), changed_files.clone())),
            _ => None,
        })
        .expect("the patch was saved before publishing");
    let records = super::results::github_token_records(&home, &id);
    assert_eq!(
        (
            status.code(),
            store.job(&id).await.unwrap().unwrap().status,
            events.last().map(|e| e.body.clone()),
            store.events(&id, 0).await.unwrap() == events,
            calls.len(),
            store.model_calls(&id).await.unwrap() == calls,
            std::path::Path::new(&patch).is_file(),
            records.len(),
            mock.revoked(),
            alive(&mock, TOKEN).await,
        ),
        (
            Some(0),
            JobStatus::Running,
            Some(EventBody::Status {
                phase: Phase::Publishing,
                detail: Some("done".into())
            }),
            true,
            1,
            true,
            true,
            1,
            Vec::<String>::new(),
            true,
        ),
        "{}",
        server.stderr()
    );
    remote.set_stall(false);

    // The next start's reaper: the token revoked, the job failed at
    // publishing with its totals and its patch.
    let restarted = Server::start(&home, &[]).await;
    let reaped = restarted.job(&id).await;
    let reason = format!(
        "{}the paddock process running this job ended while publishing its result \
         (killed or crashed); `paddock publish {id}` finishes it",
        paddock::results::conclude::PUBLISH_FAILED
    );
    assert_eq!(
        (
            reaped.status,
            reaped.reason.clone(),
            reaped.patch_path.clone(),
            reaped.changed_files.clone(),
            reaped.model_calls,
            reaped.cost_micros,
            mock.revoked(),
            alive(&mock, TOKEN).await,
            super::results::github_token_records(&home, &id),
            store
                .events(&id, 0)
                .await
                .unwrap()
                .last()
                .map(|e| e.body.clone()),
        ),
        (
            JobStatus::Failed,
            Some(reason.clone()),
            Some(patch.clone()),
            changed,
            1,
            calls[0].cost_micros,
            vec![TOKEN.to_string()],
            false,
            Vec::<PathBuf>::new(),
            Some(EventBody::Status {
                phase: Phase::Failed,
                detail: Some(reason)
            }),
        ),
        "{}",
        restarted.stderr()
    );
    let mut restarted = restarted;
    nix::sys::signal::kill(restarted.pid(), nix::sys::signal::Signal::SIGTERM).unwrap();
    restarted.child.wait().await.unwrap();

    // `paddock publish` finishes it with a token of its own.
    let out = home.paddock(&["publish", &id, "--json"], &[]).await;
    let published: JobRecord = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let second = format!("{TOKEN}_1");
    assert_eq!(
        (
            out.status.code(),
            published,
            mock.pulls().len(),
            git(&bare, &["branch", "--list", "paddock/T-1/1"])
                .trim()
                .to_owned(),
            mock.minted(),
            mock.revoked(),
            super::results::github_token_records(&home, &id),
            home.leftover_workspaces(),
        ),
        (
            Some(0),
            JobRecord {
                status: JobStatus::Done,
                reason: None,
                ..reaped
            },
            1,
            "paddock/T-1/1".to_owned(),
            vec![TOKEN.to_string(), second.clone()],
            vec![TOKEN.to_string(), second],
            Vec::<PathBuf>::new(),
            Vec::<String>::new(),
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

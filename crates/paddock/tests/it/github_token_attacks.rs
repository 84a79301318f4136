//! Hostile GitHub App token records (`results/github_app_record.rs`): the
//! file the reaper and `paddock publish` read to revoke an installation
//! token a killed publish left. Unlike GitLab's record it holds the token
//! itself, so besides GitLab's attacks (`gitlab_token_attacks.rs`) no
//! token may leak into an error, an event or a line of output. The records
//! lie in `<artifacts>/<job>/`, outside a sandboxed job's view; these tests
//! write what a `process`-rung job (the user's uid) or a corrupted disk
//! could leave there, then run the real `paddock gc` and `paddock publish`
//! against the GitHub mock (the one part that cannot be real here) and a
//! second mock standing for a place no token may go.

use std::path::{Path, PathBuf};
use std::time::Duration;

use paddock::results::github_app;
use paddock::secret::Secret;
use paddock_test_support::github::MockGitHub;
use paddock_test_support::prelude::*;

use super::results::{app_setup, on_disk};

const OTHER_JOB: &str = "job-0192a0b0c0d0e0f00000000000000002";

fn write_record(dir: &Path, nonce: &str, text: &[u8]) -> PathBuf {
    let path = dir.join(format!(".github-token-{nonce}.json"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Mints an installation token of the App (42, installation 7) at `mock`
/// for a job whose artifacts are `artifacts`, as a publish does, and
/// "kills" the publish: the token stays alive, its record in place.
pub(super) async fn minted_and_left(
    mock: &MockGitHub,
    home: &Home,
    artifacts: &Path,
) -> (String, PathBuf) {
    let key = std::fs::read_to_string(home.path().join("keys/app.pem")).unwrap();
    let app = paddock_protocol::GitHubAppSpec {
        id: 42,
        installation_id: 7,
        private_key: paddock_protocol::KeyRef::Env("UNUSED".into()),
    };
    let (_, token, recorded) = github_app::mint(
        &mock.url,
        "acme",
        "widgets",
        &app,
        &Secret::new(key),
        time::OffsetDateTime::now_utc(),
        artifacts,
    )
    .await
    .unwrap();
    (token.expose().to_string(), recorded.path)
}

/// Whether `token` still opens the mock's repository.
pub(super) async fn alive(mock: &MockGitHub, token: &str) -> bool {
    reqwest::Client::new()
        .get(format!("{}/repos/acme/widgets/pulls", mock.url))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
        .is_success()
}

/// A job's killed publish left its token's record next to everything a
/// job could plant there: another job's record (copied, its token live),
/// a record naming an API root of its own, one that is not JSON, one of
/// 10 MB, one not UTF-8, one whose token would inject a header, a FIFO, a
/// link to a host file holding a record, and a directory by a record's
/// name. `paddock gc` (its lease left dead) and then `paddock publish`
/// each return promptly (no FIFO waited on, no huge read); the job's own
/// token is revoked at the spec's API root and its record removed; the
/// other job's token stays alive; nothing reaches the other place; every
/// bad record is named in an error and left for a person to look at; and
/// no token or secret a record held is in any output, event or record of
/// the job.
#[tokio::test(flavor = "multi_thread")]
async fn a_github_token_record_cannot_redirect_leak_or_revoke_another_jobs_token() {
    let home = Home::new();
    let Some((_repo, _bare, mock, _server, spec)) = app_setup(&home).await else {
        return;
    };
    let elsewhere = MockGitHub::start("acme", "widgets", "ghs_elsewhere").await;
    let job = record(
        &home
            .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
            .await,
    );
    assert_eq!(job.status, paddock_protocol::JobStatus::Done);
    let first = mock.minted()[0].clone();
    let ours = home.data().join("artifacts").join(&job.id);
    // The job's own token, minted and left by a "killed" publish.
    let (own_token, own_record) = minted_and_left(&mock, &home, &ours).await;
    // Another job's, minted into its own place, its record copied here.
    let theirs = home.path().join(OTHER_JOB);
    let (other_token, other_record) = minted_and_left(&mock, &home, &theirs).await;
    let copied = ours.join(".github-token-b1.json");
    std::fs::copy(&other_record, &copied).unwrap();
    let id = &job.id;
    let planted = "ghs_planted_secret_value";
    let redirect = write_record(
        &ours,
        "b2",
        format!(
            r#"{{"job":"{id}","token":"{planted}","api_url":"{}"}}"#,
            elsewhere.url
        )
        .as_bytes(),
    );
    let garbage = write_record(&ours, "b3", format!("token {planted}\n").as_bytes());
    let mut big = vec![b' '; 10 << 20];
    big.extend(format!(r#"{{"job":"{id}","token":"{planted}"}}"#).as_bytes());
    let huge = write_record(&ours, "b4", &big);
    let binary = write_record(
        &ours,
        "b5",
        &[
            b"\xff\xfe".as_slice(),
            format!(r#"{{"job":"{id}","token":"{planted}"}}"#).as_bytes(),
        ]
        .concat(),
    );
    let injecting = write_record(
        &ours,
        "b6",
        format!(r#"{{"job":"{id}","token":"{planted}\r\nX-Injected: 1"}}"#).as_bytes(),
    );
    nix::unistd::mkfifo(
        &ours.join(".github-token-b7.json"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let host_file = home.path().join("host-record.json");
    let host_text = format!(r#"{{"job":"{id}","token":"{other_token}"}}"#);
    std::fs::write(&host_file, &host_text).unwrap();
    std::os::unix::fs::symlink(&host_file, ours.join(".github-token-b8.json")).unwrap();
    std::fs::create_dir(ours.join(".github-token-b9.json")).unwrap();
    // The job's lease, left by a dead process: the reaper visits it.
    drop(paddock::reaper::Lease::take(&home.jobs(), id).unwrap());

    let gc = tokio::time::timeout(
        Duration::from_secs(60),
        home.paddock(&["gc", "--json"], &[]),
    )
    .await
    .expect("paddock gc returned");
    let report: serde_json::Value = serde_json::from_slice(&gc.stdout).unwrap();
    let reaped = report["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["name"] == job.id.as_str())
        .cloned()
        .unwrap_or_default();
    let errors: Vec<String> = serde_json::from_value(reaped["errors"].clone()).unwrap();
    let bad = [&copied, &redirect, &garbage, &huge, &binary, &injecting];
    let named = |errors: &[String]| -> Vec<bool> {
        bad.iter()
            .map(|p| errors.iter().any(|e| e.contains(&p.display().to_string())))
            .collect()
    };
    let own_name = own_record
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let left = |dir: &Path| {
        let mut left: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".github-token-"))
            .collect();
        left.sort();
        left
    };
    let bad_names: Vec<String> = (1..=9)
        .map(|n| format!(".github-token-b{n}.json"))
        .collect();
    assert_eq!(
        (
            reaped["revoked_tokens"].clone(),
            errors.len(),
            named(&errors),
            left(&ours),
            mock.revoked(),
            alive(&mock, &other_token).await,
            elsewhere.requests().len(),
            std::fs::read_to_string(&host_file).unwrap(),
        ),
        (
            serde_json::json!([format!("github installation token {own_name}")]),
            6,
            vec![true; 6],
            bad_names.clone(),
            vec![first.clone(), own_token.clone()],
            true,
            0,
            host_text.clone(),
        ),
        "{report:#}"
    );

    // `paddock publish` reads the same records first: the same errors as
    // warnings, and it publishes with a token of its own, revoked after.
    let publish =
        tokio::time::timeout(Duration::from_secs(60), home.paddock(&["publish", id], &[]))
            .await
            .expect("paddock publish returned");
    let stderr = String::from_utf8_lossy(&publish.stderr).into_owned();
    let warned: Vec<String> = stderr.lines().map(str::to_string).collect();
    let minted = mock.minted();
    assert_eq!(
        (
            publish.status.code(),
            named(&warned),
            left(&ours),
            mock.revoked().len(),
            minted.len(),
            alive(&mock, &other_token).await,
            elsewhere.requests().len(),
        ),
        (Some(0), vec![true; 6], bad_names, 3, 4, true, 0),
        "{stderr}{}",
        String::from_utf8_lossy(&publish.stdout)
    );

    // No token or secret a record held, in anything Paddock said or kept.
    let events = serde_json::to_string(&home.store().await.events(id, 0).await.unwrap()).unwrap();
    let shown = home.paddock(&["show", id], &[]).await;
    let said = [
        gc.stdout,
        gc.stderr,
        publish.stdout,
        publish.stderr,
        shown.stdout,
        shown.stderr,
        events.into_bytes(),
    ]
    .concat();
    let said = String::from_utf8_lossy(&said).into_owned();
    for secret in minted.iter().map(String::as_str).chain([planted]) {
        assert!(!said.contains(secret), "{secret} in {said}");
    }
    // The only copies of the live token on disk are the records this test
    // planted (the job's own is gone).
    let mut holding = on_disk(&home, &other_token);
    holding.sort();
    assert_eq!(holding, vec![copied.clone()]);
    assert_eq!(on_disk(&home, &own_token), Vec::<PathBuf>::new());
}

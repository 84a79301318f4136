//! Every way a job ends revokes the forge tokens minted for it (issue #14):
//! a job disposed of through the API (`DELETE /v1/jobs/{id}`) with a token
//! its killed publish left, and a `paddock run --attempt-after` killed
//! while it reads the prior job's review (the read holds that job's lease,
//! so the reaper visits it; the GitHub App token's intent, written before
//! the mint, is named), and `paddock serve` stopped (SIGTERM) or
//! `paddock run` interrupted while it publishes (the publish is cancelled,
//! the token revoked, `paddock publish` finishes the job). Against the GitHub mock (the one part that cannot
//! be real here), the real binary, git and SQLite.

use std::path::PathBuf;
use std::time::Duration;

use paddock::results::github_app_record::{leftover_records, orphan};
use paddock_test_support::github::MockGitHub;
use paddock_test_support::prelude::*;
use serde_json::json;

use super::github_token_attacks::{alive, minted_and_left};
use super::results::{app_setup, TOKEN};
use super::serve::{body, spec, Server, TURN};

/// The flags that let a server's submitted specs publish through the App
/// of `app_spec`: its key, and the mock's host.
fn app_allowed(home: &Home) -> Vec<String> {
    vec![
        "--allow-ref".into(),
        format!("file:{}", home.path().join("keys/app.pem").display()),
        "--allow-host".into(),
        "127.0.0.1".into(),
    ]
}

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
    let allowed = app_allowed(&home);
    let allowed: Vec<&str> = allowed.iter().map(String::as_str).collect();
    let server = Server::start(&home, &allowed).await;
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
    assert!(disposed.disposed_at.is_some(), "{disposed:?}");
    let disposed_at = disposed.disposed_at;
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
            // The record as disposed: saying so, naming no patch.
            paddock_protocol::JobRecord {
                patch_path: None,
                disposed_at,
                ..ended
            },
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
/// names it (a token GitHub may have made and Paddock cannot revoke, and
/// the time it expires by: an hour after the mint was asked), and
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
    // A guard: a loaded host (the suites side by side on two cores) may
    // take long to get there.
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    while leftover_records(&artifacts).is_empty() || mock.requests().len() < 7 {
        assert!(
            std::time::Instant::now() < deadline,
            "the mint was never asked"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let intent = leftover_records(&artifacts);
    // The intent says when the mint was asked for.
    let asked: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&intent[0]).unwrap()).unwrap();
    let asked = time::OffsetDateTime::parse(
        asked["asked_at"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
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
                "github installation token {name}: {}",
                orphan(Some(asked), asked)
            )])],
            Vec::<serde_json::Value>::new(),
            Vec::<PathBuf>::new(),
            false,
            paddock_protocol::JobStatus::Done,
        ),
        "{first:#} {second:#}"
    );
}

/// The processes whose command line names `url` (a push's git and its
/// `git-remote-http`), as `pid: command line`.
fn processes_naming(url: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(line) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let line = String::from_utf8_lossy(&line).replace('\0', " ");
        if line.contains(url) {
            found.push(format!("{name}: {line}"));
        }
    }
    found
}

/// Waits (up to 300 s, a guard for a loaded host) until the push to
/// `remote` has begun.
async fn push_started(remote: &paddock_test_support::git_http::GitHttpServer, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    while remote.authorizations().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the push never started: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The reason of a job whose publishing a cancel cut short.
fn cancelled_reason(id: &str) -> String {
    format!(
        "{}it was cancelled (paddock was stopped, or the job cancelled) before the branch was \
         pushed and proposed; the patch and the branch's bundle are kept, and `paddock publish \
         {id}` finishes it",
        paddock::results::conclude::PUBLISH_FAILED
    )
}

/// `paddock publish JOB` of a job a cancel stopped mid-publish: a token
/// of its own, the branch pushed, the pull request opened, both tokens
/// revoked, the job `done`, nothing left behind.
async fn publish_finishes(
    home: &Home,
    bare: &std::path::Path,
    mock: &MockGitHub,
    id: &str,
    failed: paddock_protocol::JobRecord,
) {
    use paddock_protocol::{JobRecord, JobStatus};
    let out = home.paddock(&["publish", id, "--json"], &[]).await;
    let published: JobRecord = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let second = format!("{TOKEN}_1");
    assert_eq!(
        (
            out.status.code(),
            published,
            mock.pulls().len(),
            git(bare, &["branch", "--list", "paddock/T-1/1"])
                .trim()
                .to_owned(),
            mock.minted(),
            mock.revoked(),
            super::results::github_token_records(home, id),
            home.leftover_workspaces(),
        ),
        (
            Some(0),
            JobRecord {
                status: JobStatus::Done,
                reason: None,
                ..failed
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

/// `paddock serve` stopped (SIGTERM) while a served job publishes through
/// a GitHub App, its push hanging on the remote (which holds it for as
/// long as the test says): the drain waits out its grace (1 s) and then
/// cancels the job, which cuts the publish short. Serve exits 0 well
/// before its minute of waiting for cancelled jobs would end; the push's
/// git and `git-remote-http` are gone (killed as a process group) with
/// its scratch directory; the job is `failed` at publishing saying it was
/// cancelled and how to finish it, its earlier events, ledger row and
/// patch kept; the installation token is revoked and its record gone.
/// `paddock publish JOB` then finishes it (a new token, the branch
/// pushed, the pull request opened, the job `done`).
#[tokio::test(flavor = "multi_thread")]
async fn serve_stopped_mid_publish_cancels_it_and_publish_finishes_it() {
    use paddock_protocol::event::{EventBody, Phase};
    use paddock_protocol::JobStatus;
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
    let mut flags = app_allowed(&home);
    flags.extend(["--drain-grace-secs".to_owned(), "1".to_owned()]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let server = Server::start(&home, &flags).await;
    let id = server.submit_ok(&spec, 0).await;
    push_started(&remote, &server.stderr()).await;
    let store = home.store().await;
    let events = store.events(&id, 0).await.unwrap();
    let calls = store.model_calls(&id).await.unwrap();
    nix::sys::signal::kill(server.pid(), nix::sys::signal::Signal::SIGTERM).unwrap();
    let mut server = server;
    // The grace (1 s), then the cancel. A publish that ignored it would be
    // waited out for the drain's minute for cancelled jobs (the remote
    // holds the push until the end of this test) and left as it was, still
    // publishing, its token not revoked: what the record and the mock's
    // revocations below rule out, whatever the time. This bound is a guard
    // against a serve that never stops, far above what a loaded host (the
    // suites side by side on two cores) takes.
    let status = tokio::time::timeout(Duration::from_secs(300), server.child.wait())
        .await
        .unwrap_or_else(|_| panic!("serve did not stop: {}", server.stderr()))
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
    let failed = store.job(&id).await.unwrap().unwrap();
    let after = store.events(&id, 0).await.unwrap();
    let artifacts = home.data().join("artifacts").join(&id);
    let reason = cancelled_reason(&id);
    assert_eq!(
        (
            (
                status.code(),
                failed.status,
                failed.reason.clone(),
                failed.patch_path.clone(),
                failed.changed_files.clone(),
                after.last().map(|e| e.body.clone()),
                after.get(..events.len()) == Some(&events[..]),
                store.model_calls(&id).await.unwrap() == calls,
                calls.len(),
            ),
            (
                std::path::Path::new(&patch).is_file(),
                artifacts.join("branch.bundle").is_file(),
                super::results::github_token_records(&home, &id),
                mock.revoked(),
                alive(&mock, TOKEN).await,
                paddock::results::push::leftover_pushes(&artifacts),
                processes_naming(&remote.url),
                mock.pulls().len(),
            )
        ),
        (
            (
                Some(0),
                JobStatus::Failed,
                Some(reason.clone()),
                Some(patch.clone()),
                changed,
                Some(EventBody::Status {
                    phase: Phase::Failed,
                    detail: Some(reason)
                }),
                true,
                true,
                1,
            ),
            (
                true,
                true,
                Vec::<PathBuf>::new(),
                vec![TOKEN.to_string()],
                false,
                Vec::<PathBuf>::new(),
                Vec::<String>::new(),
                0,
            )
        ),
        "{}",
        server.stderr()
    );
    remote.set_stall(false);
    publish_finishes(&home, &bare, &mock, &id, failed).await;
}

/// `paddock run` interrupted (SIGINT, as Ctrl-C sends; SIGTERM and SIGHUP
/// are the same cancel) while its push hangs on the remote: the publish
/// is cut short at once, the push's processes killed and its scratch
/// directory gone, the token revoked, and the job ends `failed` at
/// publishing (exit 1) saying how to finish it; `paddock publish JOB`
/// does.
#[tokio::test(flavor = "multi_thread")]
async fn run_interrupted_mid_publish_cancels_it_and_publish_finishes_it() {
    use paddock_protocol::JobStatus;
    let home = Home::new();
    let Some((_repo, bare, mock, remote, spec)) = app_setup(&home).await else {
        return;
    };
    remote.set_stall(true);
    let run = home.spawn(&["run", "--json", spec.to_str().unwrap()]);
    push_started(&remote, "paddock run").await;
    let pid = nix::unistd::Pid::from_raw(run.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    // Stopped by the cancel, not by the 600 s bound of Paddock's own git
    // on the push the remote holds: well below that, far above what a
    // loaded host takes.
    let out = tokio::time::timeout(Duration::from_secs(300), run.wait_with_output())
        .await
        .expect("paddock run did not stop")
        .unwrap();
    let id = home.store().await.jobs(1).await.unwrap()[0].id.clone();
    let failed = home.store().await.job(&id).await.unwrap().unwrap();
    let artifacts = home.data().join("artifacts").join(&id);
    let printed: Option<paddock_protocol::JobRecord> = serde_json::from_slice(&out.stdout).ok();
    assert_eq!(
        (
            out.status.code(),
            printed.as_ref(),
            failed.status,
            failed.reason.clone(),
            artifacts.join("patch.diff").is_file(),
            artifacts.join("branch.bundle").is_file(),
            super::results::github_token_records(&home, &id),
            mock.revoked(),
            paddock::results::push::leftover_pushes(&artifacts),
            processes_naming(&remote.url),
            home.leftover_workspaces(),
        ),
        (
            Some(1),
            Some(&failed),
            JobStatus::Failed,
            Some(cancelled_reason(&id)),
            true,
            true,
            Vec::<PathBuf>::new(),
            vec![TOKEN.to_string()],
            Vec::<PathBuf>::new(),
            Vec::<String>::new(),
            Vec::<String>::new(),
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    remote.set_stall(false);
    publish_finishes(&home, &bare, &mock, &id, failed).await;
}

/// `paddock gc --json`'s exit status and report.
async fn gc(home: &Home) -> (Option<i32>, serde_json::Value) {
    let out = home.paddock(&["gc", "--json"], &[]).await;
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), report)
}

/// `paddock run` interrupted mid-push while GitHub hangs on the token's
/// revocation too: past the cancel's 10 s the run gives up on it (exit 1,
/// the job failed at publishing) and keeps the token's record, and the
/// job's lease file stays. So `paddock gc`, once GitHub answers again,
/// visits the ended job: it revokes the token with itself (the mock
/// records that DELETE, the only one that got through), reports it,
/// removes the record and the lease file, and leaves the job as it was;
/// the next pass has nothing left to do for it.
#[tokio::test(flavor = "multi_thread")]
async fn a_revocation_a_cancel_cut_short_is_finished_by_gc() {
    let home = Home::new();
    let Some((_repo, _bare, mock, remote, spec)) = app_setup(&home).await else {
        return;
    };
    remote.set_stall(true);
    let run = home.spawn(&["run", "--json", spec.to_str().unwrap()]);
    push_started(&remote, "paddock run").await;
    mock.hang_revocations(true);
    let pid = nix::unistd::Pid::from_raw(run.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    // Stopped by the cancel and its 10 s for the revocation, not by the
    // 600 s bound of Paddock's own git on the push the remote holds nor by
    // a revocation GitHub never answers: well below that, far above what
    // a loaded host takes.
    let out = tokio::time::timeout(Duration::from_secs(300), run.wait_with_output())
        .await
        .expect("paddock run did not stop")
        .unwrap();
    let store = home.store().await;
    let id = store.jobs(1).await.unwrap()[0].id.clone();
    let failed = store.job(&id).await.unwrap().unwrap();
    let records = super::results::github_token_records(&home, &id);
    let lease = home.jobs().join(".leases").join(format!("{id}.lock"));
    let asked = |mock: &MockGitHub| {
        mock.requests()
            .iter()
            .filter(|r| r.method == "DELETE" && r.path == "/installation/token")
            .count()
    };
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let after_run = (
        out.status.code(),
        failed.status,
        failed.reason.clone(),
        records.len(),
        lease.exists(),
        asked(&mock),
        mock.revoked(),
        alive(&mock, TOKEN).await,
        store
            .events(&id, 0)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|e| match e.body {
                paddock_protocol::event::EventBody::Error { message, fatal, .. }
                    if message.starts_with("the token minted") =>
                {
                    Some((message, fatal))
                }
                _ => None,
            })
            .collect::<Vec<_>>(),
    );
    mock.hang_revocations(false);
    let name = records
        .first()
        .and_then(|r| r.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();

    let visited = |report: &serde_json::Value| -> Vec<serde_json::Value> {
        report["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|j| j["name"] == id.as_str())
            .map(|j| json!([j["revoked_tokens"], j["errors"], j["marked_failed"]]))
            .collect()
    };
    let (first_code, first) = gc(&home).await;
    let (second_code, second) = gc(&home).await;
    assert_eq!(
        (
            after_run,
            first_code,
            visited(&first),
            second_code,
            visited(&second),
            mock.revoked(),
            asked(&mock),
            alive(&mock, TOKEN).await,
            super::results::github_token_records(&home, &id),
            lease.exists(),
            home.store().await.job(&id).await.unwrap().unwrap(),
            first.to_string().contains(TOKEN),
        ),
        (
            (
                Some(1),
                paddock_protocol::JobStatus::Failed,
                Some(cancelled_reason(&id)),
                1,
                true,
                1,
                Vec::<String>::new(),
                true,
                vec![(
                    format!(
                        "the token minted for the job was not revoked within 10 s of the cancel \
                         (its record in {} is kept: `paddock gc`, the next start of `paddock \
                         run` or `paddock serve`, and `paddock publish` revoke it, and the forge \
                         expires it)",
                        home.data().join("artifacts").join(&id).display()
                    ),
                    false
                )],
            ),
            Some(0),
            vec![json!([
                [format!("github installation token {name}")],
                [],
                false
            ])],
            Some(0),
            Vec::<serde_json::Value>::new(),
            vec![TOKEN.to_string()],
            2,
            false,
            Vec::<PathBuf>::new(),
            false,
            failed,
            false,
        ),
        "{stderr}\n{first:#}"
    );
}

/// `paddock publish JOB` stopped (SIGTERM; SIGINT and SIGHUP are the same
/// cancel) while its push hangs on the remote, for a job whose first
/// publish failed (GitHub down): the publish is cut short as a run's is.
/// It exits 5 within the cancel's bounds saying the publish was cancelled
/// and what the job now is; the push's git and `git-remote-http` are gone
/// with its scratch directory, the token it minted is revoked and its
/// record gone, the lease released; the job is failed at publishing saying
/// it was cancelled, its patch and bundle kept. The next `paddock publish`
/// finishes it.
#[tokio::test(flavor = "multi_thread")]
async fn publish_interrupted_mid_push_is_cancelled() {
    use paddock_protocol::{JobRecord, JobStatus};
    let home = Home::new();
    let Some((_repo, bare, mock, remote, spec)) = app_setup(&home).await else {
        return;
    };
    mock.set_down(true);
    let first = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    mock.set_down(false);
    let first = record(&first);
    assert_eq!(first.status, JobStatus::Failed, "{first:?}");
    let id = first.id.clone();
    let artifacts = home.data().join("artifacts").join(&id);

    remote.set_stall(true);
    let publish = home.spawn(&["publish", &id, "--json"]);
    push_started(&remote, "paddock publish").await;
    let pid = nix::unistd::Pid::from_raw(publish.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    // Stopped by the cancel, not by the 600 s bound of Paddock's own git
    // on the push the remote holds: well below that, far above what a
    // loaded host takes.
    let out = tokio::time::timeout(Duration::from_secs(300), publish.wait_with_output())
        .await
        .expect("paddock publish did not stop")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let failed = home.store().await.job(&id).await.unwrap().unwrap();
    let printed: Option<JobRecord> = serde_json::from_slice(&out.stdout).ok();
    assert_eq!(
        (
            out.status.code(),
            stderr.lines().last(),
            printed.as_ref(),
            (failed.status, failed.reason.clone()),
            artifacts.join("patch.diff").is_file(),
            artifacts.join("branch.bundle").is_file(),
            super::results::github_token_records(&home, &id),
            (mock.minted(), mock.revoked()),
            paddock::results::push::leftover_pushes(&artifacts),
            processes_naming(&remote.url),
            home.jobs()
                .join(".leases")
                .join(format!("{id}.lock"))
                .exists(),
            mock.pulls().len(),
        ),
        (
            Some(5),
            Some(
                format!(
                    "paddock: publishing job {id} was cancelled (Ctrl-C, SIGTERM or SIGHUP); the \
                     job is failed: `paddock publish {id}` publishes it again"
                )
                .as_str()
            ),
            Some(&failed),
            (JobStatus::Failed, Some(cancelled_reason(&id))),
            true,
            true,
            Vec::<PathBuf>::new(),
            (vec![TOKEN.to_string()], vec![TOKEN.to_string()]),
            Vec::<PathBuf>::new(),
            Vec::<String>::new(),
            false,
            0,
        ),
        "{stderr}"
    );
    remote.set_stall(false);
    // Its own token this time (the second minted): `publish_finishes`
    // expects two minted and two revoked.
    publish_finishes(&home, &bare, &mock, &id, failed).await;
}

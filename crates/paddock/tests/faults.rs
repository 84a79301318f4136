//! The runner under faults, with stand-in engines (scripts set as
//! `engine.binary`): signals, closed terminals, hostile output, crashes,
//! a full disk, long prompts. Every job reaches a final state and leaves
//! no workspace, lease or process behind.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::*;
use paddock_protocol::JobStatus;

const ONE_TURN: &str = "[[turn]]\ntext = \"hi\"\nusage = { input = 1, output = 1 }\n";

/// A job spec on `rung` whose engine is the shell script `body` (run as
/// Codex), with `timeout_secs`.
fn fake_job(home: &Home, rung: &str, body: &str, timeout_secs: u64) -> PathBuf {
    let repo = repo(home.path());
    let bin = home.path().join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let engine = bin.join("codex");
    std::fs::write(&engine, format!("#!/bin/sh\n{body}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&engine, std::fs::Permissions::from_mode(0o755)).unwrap();
    let spec = job(home.path(), "codex", &repo, SCRIPTED, Some(ONE_TURN));
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace(
            "[engine]\n",
            &format!("[engine]\nbinary = \"{}\"\n", engine.display()),
        )
        .replace(
            "timeout_secs = 120",
            &format!("timeout_secs = {timeout_secs}"),
        );
    std::fs::write(&spec, text).unwrap();
    on_rung(&spec, rung);
    spec
}

/// Waits until a job's engine has created `name` in its checkout.
async fn wait_for_file_in_work(home: &Home, name: &str) {
    for _ in 0..300 {
        if let Ok(rd) = std::fs::read_dir(home.jobs()) {
            for e in rd.flatten() {
                if e.path().join("work").join(name).exists() {
                    return;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the engine never created {name}");
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// What is left of a job: its status in the store, workspaces and leases.
async fn ended(home: &Home, id: &str) -> (JobStatus, Vec<String>) {
    let rec = home.store().await.job(id).await.unwrap().unwrap();
    (rec.status, home.leftover_workspaces())
}

#[tokio::test]
async fn sigterm_and_sighup_cancel_like_ctrl_c() {
    for signal in [
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGHUP,
        nix::sys::signal::Signal::SIGINT,
    ] {
        let home = Home::new();
        let spec = fake_job(
            &home,
            "process",
            "echo changed >> README.md; touch started; sleep 60",
            120,
        );
        let child = home
            .command(&["run", "--json", spec.to_str().unwrap()])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_file_in_work(&home, "started").await;
        let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
        nix::sys::signal::kill(pid, signal).unwrap();
        let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(out.status.code(), Some(5), "{signal}: {}", stderr(&out));
        let rec = record(&out);
        assert_eq!(
            (rec.status, rec.reason.as_deref(), rec.changed_files.clone()),
            (
                JobStatus::Cancelled,
                Some("cancelled"),
                vec!["README.md".to_string(), "started".to_string()]
            ),
            "{signal}"
        );
        assert_eq!(
            ended(&home, &rec.id).await,
            (JobStatus::Cancelled, vec![]),
            "{signal}"
        );
    }
}

/// `paddock run job.toml | head -3`, and the same for stderr: the
/// terminal goes away under a running job, which still ends properly.
#[tokio::test]
async fn a_closed_stdout_and_stderr_never_stop_the_job() {
    let home = Home::new();
    let spec = fake_job(&home, "process", "echo changed >> README.md; exit 0", 120);
    let mut child = home
        .command(&["run", spec.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    drop(child.stderr.take());
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .unwrap()
        .unwrap();
    // Exit 1: the stand-in exits without finishing a turn.
    assert_eq!(status.code(), Some(1));
    let jobs = home.store().await.jobs(10).await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(
        (jobs[0].status, jobs[0].changed_files.clone()),
        (JobStatus::Failed, vec!["README.md".to_string()])
    );
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
}

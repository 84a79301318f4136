//! Teardown after a crash: a `paddock run` killed mid-job leaves its
//! workspace, a `running` record and (on the `process` rung) its engine
//! running; the next `paddock run` kills that engine, removes the
//! workspace, fails the job with the reason and a final status event, and
//! says so. A job that is still running is left alone.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use paddock_protocol::event::{EventBody, Phase};
use paddock_protocol::JobStatus;

/// A job on the `process` rung whose `codex` is `script`.
fn stand_in_job(home: &Home, name: &str, script: &str) -> PathBuf {
    let dir = home.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let repo = repo(&dir);
    let codex = dir.join("codex");
    std::fs::write(&codex, format!("#!/bin/sh\n{script}\n")).unwrap();
    std::fs::set_permissions(&codex, std::fs::Permissions::from_mode(0o755)).unwrap();
    let spec = job(
        &dir,
        "codex",
        &repo,
        SCRIPTED,
        Some("[[turn]]\ntext = \"hi\"\n"),
    );
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        "[engine]\n",
        &format!("[engine]\nbinary = \"{}\"\n", codex.display()),
    );
    std::fs::write(&spec, text).unwrap();
    on_rung(&spec, "process");
    spec
}

/// Waits until a job directory under `jobs` has `tmp/started`; its name.
async fn started(jobs: &Path) -> String {
    for _ in 0..300 {
        if let Ok(rd) = std::fs::read_dir(jobs) {
            for e in rd.flatten() {
                if e.path().join("tmp/started").exists() {
                    return e.file_name().to_string_lossy().into_owned();
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no job started under {}", jobs.display());
}

/// The processes whose environment has `HOME=home` (this user's).
fn with_home(home: &Path) -> Vec<i32> {
    let wanted = format!("HOME={}", home.display());
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|p| {
            let pid: i32 = p.file_name().to_str()?.parse().ok()?;
            let env = std::fs::read(p.path().join("environ")).ok()?;
            env.split(|b| *b == 0)
                .any(|v| v == wanted.as_bytes())
                .then_some(pid)
        })
        .collect()
}

fn paddock_cmd(home: &Home, spec: &Path) -> tokio::process::Command {
    let mut cmd = home.command(&["run", "--json", spec.to_str().unwrap()]);
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    cmd
}

#[tokio::test(flavor = "multi_thread")]
async fn the_next_run_reaps_what_a_killed_run_left_behind() {
    let home = Home::new();
    // The stand-in engine waits for a file that never comes (and gives up
    // on its own after 20 s, so that the orphan it becomes ends too).
    let slow = stand_in_job(
        &home,
        "slow",
        "touch \"$TMPDIR/started\"; i=0; while [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done",
    );
    let mut killed = paddock_cmd(&home, &slow).spawn().unwrap();
    let crashed = started(&home.jobs()).await;

    // A second run while the first one is alive leaves its job alone.
    let mut alive = paddock_cmd(&home, &slow).spawn().unwrap();
    let running = loop {
        let names = home.leftover_workspaces();
        if let Some(n) = names.iter().find(|n| **n != crashed && !n.starts_with('.')) {
            if home.jobs().join(n).join("tmp/started").exists() {
                break n.clone();
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(home.jobs().join(&crashed).is_dir());

    killed.kill().await.unwrap();
    killed.wait().await.unwrap();
    // On the `process` rung its engine lives on (the positive twin of the
    // reaper's kill below).
    let crashed_home = home.jobs().join(&crashed).join("home");
    assert!(!with_home(&crashed_home).is_empty());
    let store = home.store().await;
    assert_eq!(
        store.job(&crashed).await.unwrap().unwrap().status,
        JobStatus::Running
    );

    let quick = stand_in_job(&home, "quick", "true");
    let out = home
        .paddock(&["run", "--json", quick.to_str().unwrap()], &[])
        .await;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let line = stderr
        .lines()
        .find(|l| l.contains(&crashed))
        .unwrap_or_else(|| panic!("{stderr}"));
    let prefix = format!(
        "paddock: removed the workspace of {crashed}, whose process ended mid-job (killed "
    );
    let suffix = " process(es) it left running); the job is now failed";
    assert!(
        line.starts_with(&prefix) && line.ends_with(suffix),
        "{line}"
    );
    let killed_count: usize = line[prefix.len()..line.len() - suffix.len()]
        .parse()
        .unwrap();
    assert!(killed_count >= 1, "{line}");
    assert_eq!(with_home(&crashed_home), Vec::<i32>::new());
    assert!(!stderr.contains(&running), "{stderr}");
    assert!(!home.jobs().join(&crashed).exists());
    assert!(home.jobs().join(&running).is_dir());

    let rec = store.job(&crashed).await.unwrap().unwrap();
    assert_eq!(
        (rec.status, rec.reason.as_deref()),
        (JobStatus::Failed, Some(paddock::reaper::REASON))
    );
    assert!(rec.finished_at.is_some());
    let last = store.events(&crashed, 0).await.unwrap().pop().unwrap();
    assert_eq!(
        last.body,
        EventBody::Status {
            phase: Phase::Failed,
            detail: Some(paddock::reaper::REASON.to_string()),
        }
    );

    alive.kill().await.unwrap();
    alive.wait().await.unwrap();
}

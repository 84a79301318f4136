//! Host paths that must not break a job: a state directory far longer
//! than a Unix socket address holds (the broker socket lives under it),
//! and state and data directories reached through a symbolic link (the
//! sandbox binds, and an engine sees, only the real path). Paddock is run
//! here the way users run it: with the XDG variables, no directory flags.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use paddock_protocol::JobStatus;
use paddock_test_support::prelude::*;

/// A stand-in Codex: one model call through the broker (as configured in
/// its `config.toml`), a file written into the checkout, a finished turn.
const CALLS_AND_WRITES: &str = r#"url=$(sed -n 's/^base_url = "\(.*\)"$/\1/p' "$CODEX_HOME/config.toml")
curl -sS -o "$TMPDIR/answer" -H "Authorization: Bearer $PADDOCK_JOB_TOKEN" -H 'content-type: application/json' -d '{"model":"gpt-5.5","input":"hi","stream":true}' "$url/responses" || exit 3
echo written > notes.md
echo '{"type":"thread.started","thread_id":"t"}'
echo '{"type":"turn.started"}'
echo '{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}'"#;

/// `paddock run --json SPEC` with only `HOME` and the XDG variables set.
async fn run_with_xdg(dir: &Path, state: &Path, data: &Path, spec: &Path) -> std::process::Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_paddock"))
        .args(["run", "--json"])
        .arg(spec)
        .env("HOME", dir)
        .env("XDG_STATE_HOME", state)
        .env("XDG_DATA_HOME", data)
        .env_remove("PADDOCK_DB")
        .env_remove("PADDOCK_DATA_DIR")
        .env_remove("PADDOCK_JOBS_DIR")
        .env_remove("PADDOCK_HOST_DIR")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap()
}

/// A sandboxed job whose `codex` is [`CALLS_AND_WRITES`], in `dir`.
fn stand_in_sandbox_job(dir: &Path) -> PathBuf {
    let repo = repo(dir);
    let bin = dir.join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let codex = bin.join("codex");
    paddock_test_support::script::write_script(&codex, &format!("#!/bin/sh\n{CALLS_AND_WRITES}\n"));
    let spec = job(
        dir,
        "codex",
        &repo,
        SCRIPTED,
        Some("[[turn]]\ntext = \"hi\"\nusage = { input = 100, output = 10 }\n"),
    );
    use_engine_binary(&spec, &codex);
    sandboxed(&spec);
    spec
}

/// The job ran to `done`, made its one model call and its patch has the
/// file it wrote.
async fn ran_and_wrote(out: &std::process::Output, data: &Path) {
    let rec = record(out);
    assert_eq!(
        (
            out.status.code(),
            rec.status,
            rec.reason,
            rec.model_calls,
            rec.changed_files
        ),
        (
            Some(0),
            JobStatus::Done,
            None,
            1,
            vec!["notes.md".to_string()]
        ),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let store = paddock::store::SqliteStore::open(&data.join("paddock/paddock.db"))
        .await
        .unwrap();
    assert_eq!(store.model_calls(&rec.id).await.unwrap().len(), 1);
}

/// A state directory of 150 bytes puts the broker socket at ~220 bytes,
/// twice what a socket address holds; the job still reaches its broker.
#[tokio::test(flavor = "multi_thread")]
async fn a_sandbox_job_works_under_a_very_long_state_directory() {
    if !sandbox_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let mut state = base.join("state");
    while state.as_os_str().len() < 150 {
        state.push("s".repeat(30));
    }
    let spec = stand_in_sandbox_job(&base);
    let data = base.join("data");
    let out = run_with_xdg(&base, &state, &data, &spec).await;
    ran_and_wrote(&out, &data).await;
    let socket = state.join("paddock/jobs/job-").as_os_str().len() + 32 + "/meta/broker.sock".len();
    assert!(socket > 200, "{socket}");
}

/// `XDG_STATE_HOME` and `XDG_DATA_HOME` behind a symbolic link (`/home` →
/// `/data/home`): the job works in, and its record names, the real
/// directories.
#[tokio::test(flavor = "multi_thread")]
async fn a_sandbox_job_works_under_a_symlinked_state_directory() {
    if !sandbox_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let real = base.join("data-disk/home");
    std::fs::create_dir_all(&real).unwrap();
    std::os::unix::fs::symlink(&real, base.join("home")).unwrap();
    let spec = stand_in_sandbox_job(&base);
    let (state, data) = (base.join("home/state"), base.join("home/data"));
    let out = run_with_xdg(&base, &state, &data, &spec).await;
    ran_and_wrote(&out, &data).await;
    let rec = record(&out);
    assert_eq!(
        rec.patch_path,
        Some(
            real.join("data/paddock/artifacts")
                .join(&rec.id)
                .join("patch.diff")
                .display()
                .to_string()
        )
    );
}

/// The real Claude Code behind a symlinked state directory writes the file
/// the scenario names by its absolute path: the path Paddock gives it is
/// inside the working directory Claude sees (the real one), so Claude does
/// not refuse it.
#[tokio::test(flavor = "multi_thread")]
async fn claude_writes_its_files_under_a_symlinked_state_directory() {
    if engine("claude").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let real = base.join("data-disk/home");
    std::fs::create_dir_all(&real).unwrap();
    std::os::unix::fs::symlink(&real, base.join("home")).unwrap();
    let repo = repo(&base);
    let spec = job(
        &base,
        "claude",
        &repo,
        SCRIPTED,
        Some(
            r#"
[[turn]]
text = "Writing the notes."
usage = { input = 100, output = 10 }
[[turn.action]]
type = "write"
path = "notes.md"
content = "written\n"

[[turn]]
text = "Done."
usage = { input = 100, output = 10 }
"#,
        ),
    );
    let (state, data) = (base.join("home/state"), base.join("home/data"));
    let out = run_with_xdg(&base, &state, &data, &spec).await;
    let rec = record(&out);
    assert_eq!(
        (out.status.code(), rec.status, rec.changed_files),
        (Some(0), JobStatus::Done, vec!["notes.md".to_string()]),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let patch = std::fs::read_to_string(rec.patch_path.unwrap()).unwrap();
    assert!(patch.contains("+written"), "{patch}");
}

/// `paddock doctor --json` with only `HOME` and the XDG variables set.
async fn doctor_with_xdg(
    dir: &Path,
    state: &Path,
    data: &Path,
) -> (Option<i32>, serde_json::Value) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_paddock"))
        .args(["doctor", "--json"])
        .env("HOME", dir)
        .env("XDG_STATE_HOME", state)
        .env("XDG_DATA_HOME", data)
        .env_remove("PADDOCK_DB")
        .env_remove("PADDOCK_DATA_DIR")
        .env_remove("PADDOCK_JOBS_DIR")
        .output()
        .await
        .unwrap();
    (
        out.status.code(),
        serde_json::from_slice(&out.stdout).unwrap(),
    )
}

/// The names and outcomes of a doctor report's checks, and whether it
/// calls the sandbox rung supported.
fn checks(report: &serde_json::Value) -> (Vec<(String, bool)>, bool) {
    let checks = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap().to_string(), c["ok"] == true))
        .collect();
    let sandbox = report["rungs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["name"] == "sandbox" && r["supported"] == true);
    (checks, sandbox)
}

/// `paddock doctor` does what a job does where jobs live: under a state
/// directory that cannot hold a job it says no, names the step and how to
/// fix it (it used to say yes: it only probed the kernel); under a long,
/// symlinked one it starts a sandbox there that reaches its broker socket,
/// and leaves nothing behind.
#[tokio::test(flavor = "multi_thread")]
async fn doctor_tries_a_job_under_the_real_state_directory() {
    // `doctor` exits 0 only where the engines are on PATH too.
    if !sandbox_available() || engine("codex").is_none() || engine("claude").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let file = base.join("not-a-dir");
    std::fs::write(&file, "").unwrap();
    let (code, report) = doctor_with_xdg(&base, &file.join("state"), &base.join("data")).await;
    let failed = report["checks"][1].clone();
    assert_eq!(
        (code, checks(&report), failed["fix"].as_str().is_some()),
        (
            Some(1),
            (
                vec![
                    ("data directory".to_string(), true),
                    ("state directory".to_string(), false)
                ],
                false
            ),
            true
        ),
        "{report}"
    );

    let real = base.join("data-disk/home");
    std::fs::create_dir_all(&real).unwrap();
    std::os::unix::fs::symlink(&real, base.join("home")).unwrap();
    let mut state = base.join("home/state");
    while state.as_os_str().len() < 150 {
        state.push("s".repeat(30));
    }
    let (code, report) = doctor_with_xdg(&base, &state, &base.join("home/data")).await;
    let ok = |n: &str| (n.to_string(), true);
    assert_eq!(
        (code, checks(&report)),
        (
            Some(0),
            (
                vec![
                    ok("data directory"),
                    ok("state directory"),
                    ok("broker socket"),
                    ok("sandbox job")
                ],
                true
            )
        ),
        "{report}"
    );
    let jobs = std::fs::canonicalize(&state).unwrap().join("paddock/jobs");
    assert_eq!(std::fs::read_dir(&jobs).unwrap().count(), 0);
}

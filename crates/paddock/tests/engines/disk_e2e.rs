//! A job's disk limit with the real engines: Codex CLI and Claude Code,
//! against the scripted upstream, run a command (their own shell tool)
//! that writes 8 MiB past a 4 MiB `limits.max_disk_bytes`, on the
//! `process` and the `sandbox` rung. The job is stopped while the command
//! still runs and fails naming the limit; the call it made keeps its
//! ledger row, and its workspace is removed like any failed job's. The
//! other ways around the limit are probed with stand-in engines
//! (tests/it/disk_attacks.rs).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use paddock_protocol::{CallStatus, EventBody, JobStatus};
use paddock_test_support::prelude::*;

const WRITER: &str = r#"
[[turn]]
text = "Writing."
usage = { input = 10, output = 2 }
[[turn.action]]
type = "shell"
command = "head -c 8388608 /dev/zero > big; sleep 30"

[[turn]]
text = "Never reached."
"#;

async fn a_command_past_the_disk_limit_fails_the_job(engine: &str) {
    let Some(_) = paddock_test_support::prelude::engine(engine) else {
        return;
    };
    let mut rungs = vec!["process"];
    if sandbox_available() {
        rungs.push("sandbox");
    }
    for rung in rungs {
        let home = Home::new();
        let repo = repo(home.path());
        let spec = job(home.path(), engine, &repo, SCRIPTED, Some(WRITER));
        on_rung(&spec, rung);
        let text = std::fs::read_to_string(&spec).unwrap().replace(
            "timeout_secs = 120",
            "timeout_secs = 120\nmax_disk_bytes = 4194304",
        );
        std::fs::write(&spec, text).unwrap();
        let out = home
            .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
            .await;
        let rec = record(&out);
        let store = home.store().await;
        let events: Vec<EventBody> = store
            .events(&rec.id, 0)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.body)
            .collect();
        let reason = rec.reason.clone().unwrap_or_default();
        let calls = store.model_calls(&rec.id).await.unwrap();
        assert_eq!(
            (
                rec.status,
                reason.starts_with(
                    "the job wrote more than limits.max_disk_bytes (4194304 bytes) to its directory ("
                ) && reason.ends_with("; it was stopped"),
                events.contains(&EventBody::Policy {
                    rule: "limits".into(),
                    message: reason.clone(),
                }),
                calls.first().map(|c| c.status),
                home.leftover_workspaces(),
            ),
            (
                JobStatus::Failed,
                true,
                true,
                Some(CallStatus::Ok),
                Vec::<String>::new()
            ),
            "{engine} on {rung}: {reason}; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_past_the_disk_limit_fails_the_job() {
    a_command_past_the_disk_limit_fails_the_job("codex").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_past_the_disk_limit_fails_the_job() {
    a_command_past_the_disk_limit_fails_the_job("claude").await;
}

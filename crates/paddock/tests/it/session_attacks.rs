//! A hostile job against the copy of its engine's session files, kept
//! for its next attempt (`session/files.rs`): within the count and the
//! per-file bound, three files of 63 MiB (sparse: the job's disk holds
//! nothing) whose copy Paddock would hold whole in its memory before
//! writing any, then copy again through the redaction, per job ending.
//! Through the real `paddock` binary: the copy stops at the total bound,
//! keeps nothing and says so; the job itself is done.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use paddock_test_support::prelude::*;

const SESSION: &str = "0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee";

#[tokio::test(flavor = "multi_thread")]
async fn session_files_past_the_total_bound_are_not_kept() {
    let home = Home::new();
    let dir = home.path().join("job");
    std::fs::create_dir_all(&dir).unwrap();
    let body = format!(
        r#"day="$HOME/.codex/sessions/2026/12/02"
mkdir -p "$day"
for n in 1 2 3; do truncate -s 63M "$day/rollout-$n-{SESSION}.jsonl"; done
echo '{{"type":"thread.started","thread_id":"{SESSION}"}}'
echo '{{"type":"turn.started"}}'
echo '{{"type":"turn.completed","usage":{{"input_tokens":1,"output_tokens":1}}}}'"#
    );
    let spec = stand_in_job(&dir, "process", &body, 120);
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let record = record(&out);
    let warnings: Vec<String> = home
        .store()
        .await
        .events(&record.id, 0)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.body {
            paddock_protocol::EventBody::Error {
                message,
                fatal: false,
                ..
            } => Some(message),
            _ => None,
        })
        .collect();
    let saved = home
        .data()
        .join("artifacts")
        .join(&record.id)
        .join("engine-session");
    assert_eq!(
        (record.status, warnings, saved.exists()),
        (
            paddock_protocol::JobStatus::Done,
            vec![
                "the engine's session was not kept for a next attempt: the engine's session \
                  files under <job-dir>/home/.codex/sessions hold more than 134217728 bytes"
                    .to_string()
            ],
            false
        )
    );
}

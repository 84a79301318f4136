//! A hostile job against the copy of its engine's session files, kept
//! for its next attempt (`session/files.rs`): within the count and the
//! per-file bound, three files of 63 MiB (sparse: the job's disk holds
//! nothing) whose copy Paddock would hold whole in its memory before
//! writing any, then copy again through the redaction, per job ending;
//! and a session directory filled with empty files beside the session's
//! own, every name of which the copy listed into Paddock's memory before
//! picking the session's (millions, as many as the job's disk limit
//! lets it make). Through the real `paddock` binary: the copy stops at
//! its bound, keeps nothing and says so; the job itself is done.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use paddock_test_support::prelude::*;

const SESSION: &str = "0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee";

/// Runs the stand-in job whose engine first runs `script` (in the job's
/// home) and then announces [`SESSION`] and one turn; the job's status,
/// its non-fatal error events, and whether its session was kept.
async fn session_job(script: &str) -> (paddock_protocol::JobStatus, Vec<String>, bool) {
    let home = Home::new();
    let dir = home.path().join("job");
    std::fs::create_dir_all(&dir).unwrap();
    let body = format!(
        r#"{script}
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
    (record.status, warnings, saved.exists())
}

/// 10,001 empty files in the session's directory beside the session's
/// own file: the copy looks at 10,000 entries at most, keeps nothing and
/// says so. Before, it listed every name (a job's disk limit lets it
/// make millions) into Paddock's memory, then kept the session.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_directory_filled_with_names_is_not_listed_whole() {
    let got = session_job(&format!(
        r#"day="$HOME/.codex/sessions/2026/12/02"
mkdir -p "$day"
echo '{{}}' > "$day/rollout-1-{SESSION}.jsonl"
(cd "$HOME/.codex/sessions" && seq 1 10001 | xargs touch)"#
    ))
    .await;
    assert_eq!(
        got,
        (
            paddock_protocol::JobStatus::Done,
            vec![
                "the engine's session was not kept for a next attempt: the engine's session \
                 directory <job-dir>/home/.codex/sessions holds more than 10000 entries"
                    .to_string()
            ],
            false
        )
    );
}

/// Three files of 63 MiB, each within the per-file bound: the copy stops
/// at the total bound.
#[tokio::test(flavor = "multi_thread")]
async fn session_files_past_the_total_bound_are_not_kept() {
    let got = session_job(&format!(
        r#"day="$HOME/.codex/sessions/2026/12/02"
mkdir -p "$day"
for n in 1 2 3; do truncate -s 63M "$day/rollout-$n-{SESSION}.jsonl"; done"#
    ))
    .await;
    assert_eq!(
        got,
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

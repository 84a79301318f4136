//! A hostile job against Paddock's reading of the refusals it leaves
//! behind: Codex's rollout files (`$CODEX_HOME/sessions/**/rollout-*.jsonl`),
//! which Paddock reads once the engine has exited for the calls Codex
//! refused (`engines/codex/rollout.rs`). The job (a stand-in engine run
//! as Codex) writes one rollout of 1.8 MB: a shell call whose command is
//! 1 MiB long, then 8,000 refusals of that one call. Before, Paddock
//! took every refusal with its own copy of the command, 8 GiB held at
//! once in the host process (64 files of 64 MiB each were read, so a
//! job could ask terabytes), and stored an event for each. Through the
//! real `paddock` binary, under an address-space limit of 4 GiB (so the
//! probe cannot exhaust the machine): the job is done, at most
//! `MAX_REFUSALS` refusals become events, each command cut, and a
//! warning says how many more were left unread.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use paddock_protocol::{EventBody, JobStatus};
use paddock_test_support::prelude::*;

/// What Paddock takes of a job's refusals read after its run.
const MAX_REFUSALS: usize = 256;

/// The refusals the job's rollout holds.
const REFUSALS: usize = 8_000;

/// The address space `paddock run` gets: far above what a job needs,
/// far below the copies the refusals made before.
const ADDRESS_SPACE: &str = "4294967296";

/// The stand-in's work: the rollout of one long call refused
/// [`REFUSALS`] times.
fn rollout_script() -> String {
    format!(
        r#"day="$CODEX_HOME/sessions/2026/12/06"
mkdir -p "$day"
f="$day/rollout-2026-12-06T00-00-00-t.jsonl"
long=$(head -c 1048576 /dev/zero | tr '\0' a)
printf '{{"type":"response_item","payload":{{"type":"function_call","name":"exec_command","arguments":"{{\\"cmd\\":\\"%s\\"}}","call_id":"c"}}}}\n' "$long" > "$f"
awk 'BEGIN {{ for (i = 1; i <= {REFUSALS}; i++) printf "{{\"type\":\"response_item\",\"payload\":{{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":\"exec_command failed: CreateProcess {{ message: Rejected(%d rejected: no) }}\"}}}}\n", i }}' >> "$f""#
    )
}

fn rungs() -> Vec<&'static str> {
    if sandbox_available() {
        vec!["process", "sandbox"]
    } else {
        vec!["process"]
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rollout_of_one_long_call_refused_thousands_of_times_is_read_in_part() {
    for rung in rungs() {
        let home = Home::new();
        let dir = home.path().join("job");
        std::fs::create_dir_all(&dir).unwrap();
        let spec = stand_in_job(&dir, rung, &finishing(&rollout_script()), 120);
        let mut cmd = tokio::process::Command::new("prlimit");
        cmd.arg(format!("--as={ADDRESS_SPACE}"))
            .arg("--")
            .arg(paddock_bin())
            .arg("--data-dir")
            .arg(home.data())
            .arg("--jobs-dir")
            .arg(home.jobs())
            .args(["run", "--json", spec.to_str().unwrap()])
            .env_remove("PADDOCK_DB")
            .env("XDG_CONFIG_HOME", home.path().join("config"))
            .stdin(std::process::Stdio::null());
        let out = cmd.output().await.unwrap();
        assert!(
            out.status.success(),
            "{rung}: paddock run ended {:?}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
                .chars()
                .rev()
                .take(2000)
                .collect::<String>()
                .chars()
                .rev()
                .collect::<String>()
        );
        let rec = record(&out);
        let mut refusals = 0;
        let mut longest = 0;
        let mut warned = Vec::new();
        for body in home.event_bodies(&rec.id).await {
            match body {
                EventBody::Policy { rule, message } if rule == "codex" => {
                    refusals += 1;
                    longest = longest.max(message.len());
                }
                EventBody::Error {
                    message,
                    fatal: false,
                    ..
                } if message.contains("refused calls") => warned.push(message),
                _ => {}
            }
        }
        assert_eq!(
            (rec.status, refusals, longest < 8_192, warned),
            (
                JobStatus::Done,
                MAX_REFUSALS,
                true,
                vec![format!(
                    "the engine's files record {} more refused calls than the {MAX_REFUSALS} \
                     read one by one: they are not events of the job",
                    REFUSALS - MAX_REFUSALS
                )]
            ),
            "{rung}"
        );
    }
}

//! A hostile engine stream against the hook's backstop
//! (`policy::backstop`), which judges every shell command the engine
//! reports as run against the host profile: a stand-in engine run as
//! Codex prints shell calls the backstop cannot follow from call to
//! result (a call without an id, an id named twice, a call past its table
//! of 4,096 calls waiting for results, a call whose result never comes)
//! around a denied command it really runs. Before, each of those let the
//! denied command pass (the job `done`); now the job fails naming the
//! command, and nothing is published; the same streams around a command
//! the profile allows end `done` and publish. And many shell calls
//! printed at once, each slow to judge (a child process judges each):
//! before, judging them one by one held the runner's loop, and the job's
//! timeout acted only once all were judged; now the job is stopped at its
//! timeout. And a judge that cannot start (the runner's binary deleted)
//! judges a command denied: the job fails.

use paddock_protocol::{EventBody, JobStatus};
use paddock_test_support::prelude::*;

fn rungs() -> Vec<&'static str> {
    if sandbox_available() {
        vec!["process", "sandbox"]
    } else {
        vec!["process"]
    }
}

/// Codex's report of a shell call `id` of `command` starting.
fn started(id: Option<&str>, command: &str) -> String {
    let mut item = serde_json::json!({"type": "command_execution", "command": command,
        "aggregated_output": "", "exit_code": null, "status": "in_progress"});
    if let Some(id) = id {
        item["id"] = id.into();
    }
    serde_json::json!({"type": "item.started", "item": item}).to_string()
}

/// Codex's report of a shell call `id` of `command` ending with exit 0.
fn completed(id: Option<&str>, command: &str) -> String {
    let mut item = serde_json::json!({"type": "command_execution", "command": command,
        "aggregated_output": "", "exit_code": 0, "status": "completed"});
    if let Some(id) = id {
        item["id"] = id.into();
    }
    serde_json::json!({"type": "item.completed", "item": item}).to_string()
}

/// A shell script printing `lines` (each a line of JSON), one a `printf`.
fn printing(lines: &[String]) -> String {
    lines
        .iter()
        .map(|l| format!("printf '%s\\n' '{}'\n", l.replace('\'', "'\\''")))
        .collect()
}

/// A shell loop printing `line` for each of 4,096 calls, its `WAITING`
/// the call's id (`w0` to `w4095`).
fn for_each_waiting(line: &str) -> String {
    let quoted = line
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('$', "\\$")
        .replace('`', "\\`")
        .replace("WAITING", "w$i");
    format!("i=0; while [ $i -lt 4096 ]; do printf '%s\\n' \"{quoted}\"; i=$((i+1)); done\n")
}

const END: &str = r#"printf '%s\n' '{"type":"turn.completed","usage":{"input_tokens":1,"cached_input_tokens":0,"output_tokens":1}}'"#;

/// Each way of hiding `command` from the backstop: the engine's script
/// (it changes a file and runs `command`, then prints the stream).
fn hiding(command: &str) -> Vec<(&'static str, String)> {
    let run = format!(
        "echo change > changed.txt\n{command}\necho '{{\"type\":\"thread.started\",\"thread_id\":\"t\"}}'\necho '{{\"type\":\"turn.started\"}}'\n"
    );
    vec![
        (
            "a call without an id",
            run.clone() + &printing(&[started(None, command), completed(None, command)]) + END,
        ),
        (
            "an id named twice",
            run.clone()
                + &printing(&[
                    started(Some("item_1"), command),
                    started(Some("item_1"), "true"),
                    completed(Some("item_1"), "true"),
                ])
                + END,
        ),
        (
            "a call past 4,096 calls waiting for results",
            run.clone()
                + &for_each_waiting(&started(Some("WAITING"), "true"))
                + &printing(&[
                    started(Some("item_1"), command),
                    completed(Some("item_1"), command),
                ])
                // Then the waiting calls end refused (none ran).
                + &for_each_waiting(
                    &serde_json::json!({"type": "item.completed", "item": {"id": "WAITING",
                        "type": "command_execution", "command": "true", "aggregated_output": "",
                        "exit_code": null, "status": "declined"}})
                    .to_string(),
                )
                + END,
        ),
        (
            "a call whose result never comes",
            run + &printing(&[started(Some("item_1"), command)]) + END,
        ),
    ]
}

/// A denied command the engine ran fails the job, however the stream
/// hides it from the backstop; an allowed one does not.
#[tokio::test(flavor = "multi_thread")]
async fn a_denied_command_hidden_in_the_stream_still_fails_the_job() {
    for rung in rungs() {
        let home = Home::new();
        let mark = home.path().join("mark");
        let denied = format!("touch {}", mark.display());
        for (command, denies) in [(denied.as_str(), true), ("echo allowed", false)] {
            for (how, body) in hiding(command) {
                let dir = home.path().join(format!("job-{}", how.replace(' ', "-")));
                let dir = dir.join(if denies { "denied" } else { "allowed" });
                std::fs::create_dir_all(&dir).unwrap();
                let spec = stand_in_job(&dir, rung, &body, 120);
                under_profile(
                    &spec,
                    &format!(
                        "id = \"deny-t\"\ndeny_commands = [{}]\n",
                        toml::Value::String(denied.clone())
                    ),
                );
                let out = home
                    .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
                    .await;
                let rec = record(&out);
                let branches = git(
                    &dir.join("repo"),
                    &["for-each-ref", "--format=%(refname)", "refs/heads/paddock"],
                );
                let policy: Vec<EventBody> = home
                    .event_bodies(&rec.id)
                    .await
                    .into_iter()
                    .filter(|b| matches!(b, EventBody::Policy { .. }))
                    .collect();
                let ran = format!(
                    "the job was stopped: the engine's output, which the job could write, reports: \
                     the engine ran `{denied}`, which host profile `deny-t` denies (`{denied}`, \
                     deny_commands), without the hook judging it (the hook failed open)"
                );
                let want = if denies {
                    (
                        JobStatus::Failed,
                        Some(ran.clone()),
                        vec![EventBody::Policy {
                            rule: denied.clone(),
                            message: ran,
                        }],
                        String::new(),
                    )
                } else {
                    (
                        JobStatus::Done,
                        None,
                        vec![],
                        "refs/heads/paddock/T-1/1".to_string(),
                    )
                };
                assert_eq!(
                    (
                        rec.status,
                        rec.reason.clone(),
                        policy,
                        branches.trim().to_string()
                    ),
                    want,
                    "{rung}, {how}, {command}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}

/// Shell calls in the flood: each a command of nested `case` that the
/// judge's shell parser takes a second or more to pass (16 levels, about
/// 1.7 s in a debug build), all printed in one write.
const FLOOD: usize = 40;

/// A job whose engine reports many shell calls at once, each slow to
/// judge, is still stopped at its timeout (3 s), not once they are all
/// judged (before, they were judged one by one in the runner's loop, which
/// acted on the timeout a minute late), and nothing of it is published
/// (not all it ran was judged).
#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_shell_calls_does_not_hold_the_jobs_timeout() {
    let home = Home::new();
    let nested = format!(
        "{}true;; {}",
        "case a in a) ".repeat(16),
        "esac; ".repeat(16)
    );
    let lines: Vec<String> = (0..FLOOD)
        .map(|i| completed(Some(&format!("c{i}")), &nested))
        .collect();
    let stream = home.path().join("flood.jsonl");
    std::fs::write(&stream, lines.join("\n") + "\n").unwrap();
    let body = format!(
        "echo change > changed.txt\n\
         echo '{{\"type\":\"thread.started\",\"thread_id\":\"t\"}}'\necho '{{\"type\":\"turn.started\"}}'\n\
         cat '{}'\nsleep 300\n",
        stream.display()
    );
    let spec = stand_in_job(home.path(), "process", &body, 3);
    under_profile(&spec, "id = \"deny-t\"\ndeny_commands = [\"make all\"]\n");
    let started = std::time::Instant::now();
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let took = started.elapsed();
    let rec = record(&out);
    let branches = git(
        &home.path().join("repo"),
        &["for-each-ref", "--format=%(refname)", "refs/heads/paddock"],
    );
    assert_eq!(
        (rec.status, branches.trim().to_string()),
        (JobStatus::TimedOut, String::new()),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The 3 s and the job's own teardown, not the judging of every call.
    assert!(took.as_secs() < 20, "the job took {took:?}");
}

/// A judge that cannot start judges the command denied (fail closed): the
/// job's engine deletes the `paddock` binary the runner runs from (a copy,
/// on the `process` rung), so the judging child, that binary, cannot
/// start, and reports a shell call of a command the profile allows; the
/// job fails naming it, with `deny_commands` as its rule, and nothing is
/// published.
#[tokio::test(flavor = "multi_thread")]
async fn a_judge_that_cannot_start_fails_the_job() {
    let home = Home::new();
    let bin = home.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let copy = bin.join("paddock");
    std::fs::copy(paddock_bin(), &copy).unwrap();
    let body = format!(
        "echo change > changed.txt\nrm -f '{}'\n\
         echo '{{\"type\":\"thread.started\",\"thread_id\":\"t\"}}'\necho '{{\"type\":\"turn.started\"}}'\n{}{END}\n",
        copy.display(),
        printing(&[completed(Some("item_1"), "echo allowed")])
    );
    let spec = stand_in_job(home.path(), "process", &body, 120);
    under_profile(&spec, "id = \"deny-t\"\ndeny_commands = [\"make all\"]\n");
    let cmd = home.command(&["run", "--json", spec.to_str().unwrap()]);
    let cmd = cmd.as_std();
    let mut run = tokio::process::Command::new(&copy);
    run.args(cmd.get_args()).stdin(std::process::Stdio::null());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => run.env(k, v),
            None => run.env_remove(k),
        };
    }
    let out = run.output().await.unwrap();
    let rec = record(&out);
    let branches = git(
        &home.path().join("repo"),
        &["for-each-ref", "--format=%(refname)", "refs/heads/paddock"],
    );
    let ran = "the job was stopped: the engine's output, which the job could write, reports: \
               the engine ran `echo allowed`, which host profile `deny-t` denies \
               (`deny_commands`, deny_commands), without the hook judging it (the hook failed open)";
    assert_eq!(
        (rec.status, rec.reason.clone(), branches.trim().to_string()),
        (JobStatus::Failed, Some(ran.to_string()), String::new()),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

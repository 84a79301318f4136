//! The runner under faults, with stand-in engines (scripts set as
//! `engine.binary`): signals, closed terminals, hostile output, crashes,
//! a full disk, long prompts. Every job reaches a final state and leaves
//! no workspace, lease or process behind.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use paddock_protocol::{EventBody, JobStatus};
use paddock_test_support::prelude::*;

const ONE_TURN: &str = "[[turn]]\ntext = \"hi\"\nusage = { input = 1, output = 1 }\n";

/// `paddock run --json SPEC`, sent `signal` once the engine created
/// `started` in its checkout; its output. Its end is bounded at 300 s: a
/// guard against a run the signal never ends (the engines here sleep for
/// 600 s after `started`, and a job's record tells a cancel from a
/// timeout), far above what a loaded host (the suites side by side on two
/// cores) takes to tear a job down.
async fn signalled_run(
    home: &Home,
    spec: &std::path::Path,
    signal: nix::sys::signal::Signal,
) -> std::process::Output {
    let child = home.spawn(&["run", "--json", spec.to_str().unwrap()]);
    assert!(created_in_work(home, "started").await);
    let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
    nix::sys::signal::kill(pid, signal).unwrap();
    tokio::time::timeout(Duration::from_secs(300), child.wait_with_output())
        .await
        .expect("paddock did not end")
        .unwrap()
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
        let spec = fake_codex_job(
            &home,
            "process",
            "echo changed >> README.md; touch started; sleep 600",
            120,
        );
        let out = signalled_run(&home, &spec, signal).await;
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

/// `paddock cancel JOB` from another terminal stops a `paddock run` as
/// Ctrl-C does (exit 5, `cancelled`, nothing left), says so, and prints
/// the final record; a second one says the job had already ended (exit
/// 1); and a job whose `paddock` was killed, which reads no request, is
/// ended `cancelled` by the reaper's pass it makes, its reason naming who
/// asked. Before, there was no `paddock cancel`: only a signal to the
/// job's own `paddock`, or the API.
#[tokio::test]
async fn paddock_cancel_stops_a_run_from_another_terminal() {
    let home = Home::new();
    let spec = fake_codex_job(
        &home,
        "process",
        "echo changed >> README.md; touch started; sleep 600",
        120,
    );
    let child = home.spawn(&["run", "--json", spec.to_str().unwrap()]);
    assert!(created_in_work(&home, "started").await);
    let cancel = home.paddock(&["cancel", "--json", "latest"], &[]).await;
    let run = tokio::time::timeout(Duration::from_secs(300), child.wait_with_output())
        .await
        .expect("paddock did not end")
        .unwrap();
    let (asked, ran) = (record(&cancel), record(&run));
    let host = home
        .store()
        .await
        .job_owner(&ran.id)
        .await
        .unwrap()
        .unwrap()
        .name;
    // Who asked: this user at the jobs directory's host, and when (before:
    // plain `cancelled`).
    let request = home
        .store()
        .await
        .cancel_requested(&ran.id)
        .await
        .unwrap()
        .unwrap();
    let user = nix::unistd::User::from_uid(nix::unistd::Uid::current())
        .unwrap()
        .unwrap()
        .name;
    let by = format!("{user}@{host} (paddock cancel)");
    let reason = format!(
        "cancelled, asked by {by} at {}",
        request
            .at
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    );
    assert_eq!(request.by, by);
    assert_eq!(
        (
            cancel.status.code(),
            stderr(&cancel),
            run.status.code(),
            asked.id.clone(),
            (asked.status, asked.reason.as_deref()),
            (ran.status, ran.reason.as_deref()),
        ),
        (
            Some(0),
            format!(
                "paddock: asked job {} to cancel (it runs on {host}); waiting for it to stop\n",
                ran.id
            ),
            Some(5),
            ran.id.clone(),
            (JobStatus::Cancelled, Some(reason.as_str())),
            (JobStatus::Cancelled, Some(reason.as_str())),
        )
    );
    let again = home.paddock(&["cancel", &ran.id], &[]).await;
    assert_eq!(
        (again.status.code(), stderr(&again)),
        (
            Some(1),
            format!(
                "paddock: job {} had already ended (cancelled): nothing to cancel\n",
                ran.id
            )
        )
    );
    assert_eq!(ended(&home, &ran.id).await, (JobStatus::Cancelled, vec![]));

    // Its `paddock` killed: the cancel's reaper pass ends it.
    let mut child = home.spawn(&["run", "--json", spec.to_str().unwrap()]);
    assert!(created_in_work(&home, "started").await);
    child.kill().await.unwrap();
    let cancel = home.paddock(&["cancel", "--json", "latest"], &[]).await;
    let asked = record(&cancel);
    let reason = asked.reason.clone().unwrap_or_default();
    let head = format!("cancelled, asked by {by} at ");
    assert_eq!(
        (
            cancel.status.code(),
            asked.status,
            reason.starts_with(&head),
            reason.contains("and it was found dead before it stopped"),
        ),
        (Some(0), JobStatus::Cancelled, true, true),
        "{reason}: {}",
        stderr(&cancel)
    );
    assert_eq!(
        ended(&home, &asked.id).await,
        (JobStatus::Cancelled, vec![])
    );
}

/// A job whose `paddock` was killed stays `running` in the store until a
/// reaper pass; `paddock jobs` and `paddock show` say on stderr that its
/// heartbeat stopped and what to do, and say nothing of a live job whose
/// heartbeat is renewed. Before, both showed it `running` without a word.
#[tokio::test]
async fn jobs_and_show_say_when_a_running_jobs_heartbeat_stopped() {
    let home = Home::new();
    home.write_config("[hosts]\nheartbeat_secs = 1\nheartbeat_ttl_secs = 4\n");
    let spec = fake_codex_job(&home, "process", "touch started; sleep 600", 120);
    let mut child = home.spawn(&["run", "--json", spec.to_str().unwrap()]);
    assert!(created_in_work(&home, "started").await);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let live = home.paddock(&["jobs"], &[]).await;
    child.kill().await.unwrap();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let jobs = home.paddock(&["jobs"], &[]).await;
    let show = home.paddock(&["show", "latest"], &[]).await;
    let id = home.store().await.jobs(1).await.unwrap()[0].id.clone();
    let said = stderr(&jobs);
    let age: i64 = said
        .split("heartbeat is ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_default();
    let host = home
        .store()
        .await
        .job_owner(&id)
        .await
        .unwrap()
        .unwrap()
        .name;
    let line = format!(
        "paddock: job {id} is recorded running, but its heartbeat is {age} s old (more than \
         [hosts] heartbeat_ttl_secs, 4 s): the paddock process running it on host {host} most \
         likely died; `paddock gc` there (or its next `paddock run` or `paddock serve`) cleans \
         up after it and marks it failed\n"
    );
    assert_eq!(
        (stderr(&live), said, stderr(&show), age >= 5),
        (String::new(), line.clone(), line, true)
    );
    let gc = home.paddock(&["gc"], &[]).await;
    assert_eq!(gc.status.code(), Some(0), "{}", stderr(&gc));
    assert_eq!(ended(&home, &id).await, (JobStatus::Failed, vec![]));
}

/// `paddock run job.toml | head -3`, and the same for stderr: the
/// terminal goes away under a running job, which still ends properly.
#[tokio::test]
async fn a_closed_stdout_and_stderr_never_stop_the_job() {
    let home = Home::new();
    let spec = fake_codex_job(&home, "process", "echo changed >> README.md; exit 0", 120);
    let mut child = home.spawn(&["run", spec.to_str().unwrap()]);
    drop(child.stdout.take());
    drop(child.stderr.take());
    // A guard against a job a closed pipe hangs, not a measure.
    let status = tokio::time::timeout(Duration::from_secs(300), child.wait())
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

/// Runs `paddock run --json SPEC` and samples the peak resident memory of
/// the `paddock` process itself (VmHWM, not its children) while it runs:
/// its output and that peak in bytes.
async fn run_measured(home: &Home, spec: &std::path::Path) -> (std::process::Output, u64) {
    let child = home.spawn(&["run", "--json", spec.to_str().unwrap()]);
    let status = format!("/proc/{}/status", child.id().unwrap());
    let sampler = tokio::spawn(async move {
        let mut peak = 0;
        while let Ok(text) = std::fs::read_to_string(&status) {
            if let Some(kb) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            {
                peak = kb * 1024;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        peak
    });
    // A guard against a run that never ends, not a measure.
    let out = tokio::time::timeout(Duration::from_secs(300), child.wait_with_output())
        .await
        .expect("paddock did not end")
        .unwrap();
    (out, sampler.await.unwrap())
}

/// What `paddock events` would print for a job.
async fn events(home: &Home, id: &str) -> Vec<EventBody> {
    home.event_bodies(id).await
}

fn errors(events: &[EventBody]) -> Vec<(String, Option<String>, bool)> {
    events
        .iter()
        .filter_map(|e| match e {
            EventBody::Error {
                message,
                source,
                fatal,
            } => Some((message.clone(), source.clone(), *fatal)),
            _ => None,
        })
        .collect()
}

/// One invalid byte, then more output than a pipe holds, then a hang: the
/// timeout still holds, and the byte is an `error` event. The job's 3 s,
/// not the hang's 600 s, ends it: a bound of 300 s, far above what a
/// loaded host takes (exit 4 alone would not tell the timeout from a
/// timeout read only once the engine ended).
#[tokio::test]
async fn invalid_utf8_then_a_flood_cannot_outlast_the_timeout() {
    let home = Home::new();
    let spec = fake_codex_job(
        &home,
        "process",
        "printf 'bad \\377 byte\\n'; head -c 200000 /dev/zero | tr '\\0' a; echo; sleep 600",
        3,
    );
    let out = tokio::time::timeout(
        Duration::from_secs(300),
        home.command(&["run", "--json", spec.to_str().unwrap()])
            .output(),
    )
    .await
    .expect("paddock ignored the timeout")
    .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let rec = record(&out);
    let events = events(&home, &rec.id).await;
    let errors = errors(&events);
    assert_eq!(
        errors[0],
        (
            "the engine printed a line that is not UTF-8 (invalid bytes shown as U+FFFD): bad \u{FFFD} byte".to_string(),
            Some("codex".to_string()),
            false
        )
    );
    assert_eq!(ended(&home, &rec.id).await, (JobStatus::TimedOut, vec![]));
}

const MB: usize = 1_000_000;

/// A huge JSON line, a huge line Paddock cannot hold and a huge stderr:
/// the events are cut, the raw artifacts are whole, the reason is a short
/// tail, and Paddock's memory stays flat.
#[tokio::test]
async fn huge_output_is_kept_on_disk_and_capped_in_memory_and_events() {
    let home = Home::new();
    let script = format!(
        "printf '{{\"type\":\"item.completed\",\"item\":{{\"id\":\"i1\",\"type\":\"agent_message\",\"text\":\"'
head -c {text} /dev/zero | tr '\\0' a
printf '\"}}}}\\n'
head -c {line} /dev/zero | tr '\\0' b
echo
(head -c {err} /dev/zero | tr '\\0' c; echo; echo 'last words') >&2
exit 3",
        text = 600_000,
        line = 3 * MB,
        err = 3 * MB,
    );
    let spec = fake_codex_job(&home, "process", &script, 120);
    // The line cap is configurable: 1 MiB here, to keep the test short
    // (BENCHMARKS.md runs 100 MB with the defaults).
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        "timeout_secs = 120",
        "timeout_secs = 120\nmax_line_bytes = 1048576",
    );
    std::fs::write(&spec, text).unwrap();
    let (out, peak) = run_measured(&home, &spec).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let rec = record(&out);
    let reason = format!(
        "the engine exited with status 3: …{} | last words",
        "c".repeat(987)
    );
    assert_eq!(rec.reason.as_deref(), Some(reason.as_str()));
    let events = events(&home, &rec.id).await;
    let marker = |n: usize| format!("…[truncated by paddock: {n} bytes]");
    assert!(events.contains(&EventBody::Text {
        text: format!("{}{}", "a".repeat(64 << 10), marker(600_000)),
    }));
    assert_eq!(
        errors(&events),
        vec![
            (
                format!(
                    "the engine printed a line of {} bytes, more than limits.max_line_bytes (1048576); it is kept in engine.jsonl but not parsed; it began: {}",
                    3 * MB,
                    "b".repeat(1000)
                ),
                Some("codex".to_string()),
                false
            ),
            (reason.clone(), Some("codex".to_string()), true),
        ]
    );
    let biggest = events
        .iter()
        .map(|e| serde_json::to_string(e).unwrap().len())
        .max()
        .unwrap();
    assert!(biggest < 70_000, "an event of {biggest} bytes was stored");
    let artifacts = home.data().join("artifacts").join(&rec.id);
    let size = |name: &str| std::fs::metadata(artifacts.join(name)).unwrap().len() as usize;
    let prefix = r#"{"type":"item.completed","item":{"id":"i1","type":"agent_message","text":""#;
    assert_eq!(
        (size("engine.jsonl"), size("engine.stderr")),
        (prefix.len() + 600_000 + 4 + 3 * MB + 1, 3 * MB + 1 + 11)
    );
    assert!(
        peak > 0 && peak < 64 << 20,
        "paddock peaked at {peak} bytes"
    );
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
}

/// An engine (or a job's command writing to the engine's output) that
/// prints without end fills the host's disk through `engine.jsonl` and the
/// store through its events: past `limits.max_output_bytes` (1 MiB here)
/// the engine is stopped and the job fails naming the limit (a `policy`
/// event, rule `limits`), `engine.jsonl` keeps exactly the limit, and its
/// stderr past the limit is dropped, said at its end. (Before, all of it
/// was kept and parsed, and the job ended `done`.)
#[tokio::test]
async fn output_past_its_limit_stops_the_engine_and_fails_the_job() {
    let home = Home::new();
    let script = "head -c 2000000 /dev/zero | tr '\\0' e >&2
yes '{\"type\":\"turn.started\"}' | head -n 200000
echo '{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":1,\"cached_input_tokens\":0,\"output_tokens\":1}}'";
    let spec = fake_codex_job(&home, "process", script, 120);
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        "timeout_secs = 120",
        "timeout_secs = 120\nmax_output_bytes = 1048576",
    );
    std::fs::write(&spec, text).unwrap();
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    let message = "the engine printed more than limits.max_output_bytes (1048576 bytes) on its \
                   output; it was stopped, and what it printed past the limit is not kept";
    let events = events(&home, &rec.id).await;
    let artifacts = home.data().join("artifacts").join(&rec.id);
    let stderr_kept = std::fs::read_to_string(artifacts.join("engine.stderr")).unwrap();
    assert_eq!(
        (
            rec.status,
            rec.reason.as_deref(),
            events.contains(&EventBody::Policy {
                rule: "limits".into(),
                message: message.into()
            }),
            std::fs::metadata(artifacts.join("engine.jsonl"))
                .unwrap()
                .len(),
            stderr_kept.ends_with(
                "\n[paddock: the rest of the engine's stderr is not kept: past \
                 limits.max_output_bytes (1048576 bytes)]\n"
            ),
            stderr_kept.len() < (1 << 20) + (64 << 10) + 200,
        ),
        (JobStatus::Failed, Some(message), true, 1 << 20, true, true),
        "{}",
        stderr(&out)
    );
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
}

/// An engine killed by a signal: a fatal `error` event names the signal
/// and what it last wrote on stderr.
#[tokio::test]
async fn a_crashed_engine_is_an_error_event_naming_the_signal() {
    let home = Home::new();
    let spec = fake_codex_job(
        &home,
        "process",
        "echo 'about to crash' >&2; kill -SEGV $$",
        60,
    );
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let rec = record(&out);
    let reason = "the engine was killed by signal SIGSEGV: about to crash";
    assert_eq!(
        (rec.reason.as_deref(), rec.engine_exit_code),
        (Some(reason), None)
    );
    assert_eq!(
        errors(&events(&home, &rec.id).await),
        vec![(reason.to_string(), Some("codex".to_string()), true)]
    );
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
}

/// An engine script that starts three daemons in their own sessions (one
/// directly, one through a double fork, one that then leaves the job's
/// directory and environment behind and only holds a file of it open),
/// writing their pids into `dir`.
fn daemons(dir: &std::path::Path, then: &str) -> String {
    format!(
        "setsid sh -c 'echo $$ > {d}/d1.pid; exec sleep 300' &
(setsid sh -c 'echo $$ > {d}/d2.pid; exec sleep 300' &)
(cd / && exec setsid env -i /bin/sh -c 'exec 9<\"$0\"; echo $$ > {d}/d3.pid; exec sleep 300' \"$OLDPWD/README.md\" &)
while [ ! -s {d}/d1.pid ] || [ ! -s {d}/d2.pid ] || [ ! -s {d}/d3.pid ]; do sleep 0.05; done
echo changed >> README.md
{then}",
        d = dir.display()
    )
}

/// The daemons' pids still alive (killed here, so that a failing test
/// leaves nothing behind).
fn live_daemons(dir: &std::path::Path) -> Vec<String> {
    let mut alive = Vec::new();
    for name in ["d1.pid", "d2.pid", "d3.pid"] {
        let pid: i32 = std::fs::read_to_string(dir.join(name))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let cmd = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if cmd.starts_with("sleep\u{0}300") {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            alive.push(name.to_string());
        }
    }
    alive
}

/// On the process rung, what the engine started in its own session dies
/// with the job: when the engine ends, and when the job is cancelled.
#[tokio::test]
async fn detached_descendants_die_with_the_job_on_the_process_rung() {
    // The engine ends by itself.
    let home = Home::new();
    let spec = fake_codex_job(&home, "process", &daemons(home.path(), "exit 0"), 60);
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    assert_eq!(
        (rec.status, live_daemons(home.path())),
        (JobStatus::Failed, vec![])
    );
    // The job is cancelled while the engine runs.
    let home = Home::new();
    let spec = fake_codex_job(
        &home,
        "process",
        &daemons(home.path(), "touch started; sleep 600"),
        60,
    );
    let out = signalled_run(&home, &spec, nix::sys::signal::Signal::SIGTERM).await;
    let rec = record(&out);
    assert_eq!(
        (
            rec.status,
            live_daemons(home.path()),
            home.leftover_workspaces()
        ),
        (JobStatus::Cancelled, vec![], vec![])
    );
}

/// The data directory fills up mid-job: the real error is reported with
/// the path, the engine is stopped, the workspace removed, and the next
/// `paddock gc` finishes the record.
#[tokio::test]
async fn a_full_data_directory_fails_the_job_and_removes_its_workspace() {
    let home = Home::new();
    let Some(disk) = Tmpfs::mount(&home.data(), "1m") else {
        return;
    };
    drop(home.store().await);
    let line = format!(
        r#"{{"type":"item.completed","item":{{"id":"i","type":"agent_message","text":"{}"}}}}"#,
        "x".repeat(1000)
    );
    let spec = fake_codex_job(
        &home,
        "process",
        &format!("i=0; while [ $i -lt 4000 ]; do echo '{line}'; i=$((i+1)); done; sleep 900"),
        600,
    );
    // Stopped when the store could not be written, not by the job's 600 s
    // timeout nor the engine's 900 s: a bound well below both, far above
    // what a loaded host (the suites side by side) takes.
    let out = tokio::time::timeout(
        Duration::from_secs(300),
        home.command(&["run", spec.to_str().unwrap()]).output(),
    )
    .await
    .expect("the job did not stop")
    .unwrap();
    let err = stderr(&out);
    let db = home.db();
    assert_eq!(out.status.code(), Some(70), "{err}");
    let last = err.lines().last().unwrap_or_default().to_string();
    assert!(
        last.starts_with(&format!(
            "paddock: write the job to the store: {}: ",
            db.display()
        )) && last.ends_with(&format!(
            "; the file system of {} is full (ENOSPC: no space left on device)",
            home.data().display()
        )),
        "{err}"
    );
    // The workspace is gone; the lease stays for the reaper.
    let left = home.leftover_workspaces();
    assert!(
        left.len() == 1 && left[0].starts_with(".leases/job-"),
        "{left:?}"
    );
    disk.grow();
    let gc = home.paddock(&["gc"], &[]).await;
    assert_eq!(gc.status.code(), Some(0), "{}", stderr(&gc));
    let jobs = home.store().await.jobs(10).await.unwrap();
    assert_eq!(
        (jobs.len(), jobs[0].status, home.leftover_workspaces()),
        (1, JobStatus::Failed, vec![])
    );
}

/// A prompt larger than one command-line argument may be (128 KiB): the
/// real engines read it from stdin, on both rungs.
#[tokio::test]
async fn a_prompt_over_128_kib_reaches_both_real_engines() {
    for engine_name in ["codex", "claude"] {
        if engine(engine_name).is_none() {
            return;
        }
        for rung in ["process", "sandbox"] {
            if rung == "sandbox" && !sandbox_available() {
                continue;
            }
            let home = Home::new();
            let repo = repo(home.path());
            let spec = job(home.path(), engine_name, &repo, SCRIPTED, Some(ONE_TURN));
            // The ticket's text is capped (64 KiB a field), a project's
            // prompt template is not: one that quotes the description
            // three times makes a prompt of about 180 KiB.
            let templates = home.path().join("templates");
            std::fs::create_dir_all(&templates).unwrap();
            std::fs::write(
                templates.join("prompt.md.j2"),
                "{{ ticket.description }}\n{{ ticket.description }}\n{{ ticket.description }}\n",
            )
            .unwrap();
            let text = std::fs::read_to_string(&spec).unwrap().replace(
                "description = \"A test.\"",
                &format!("description = \"{}\"", "word ".repeat(60 * 1024 / 5)),
            );
            std::fs::write(
                &spec,
                format!(
                    "{text}\n[context]\ntemplates_dir = \"{}\"\n",
                    templates.display()
                ),
            )
            .unwrap();
            on_rung(&spec, rung);
            // The prompt is over the 128 KiB of one argument.
            let ctx = home.path().join("ctx");
            let report = home
                .paddock(
                    &[
                        "context",
                        "--json",
                        "--out",
                        ctx.to_str().unwrap(),
                        spec.to_str().unwrap(),
                    ],
                    &[],
                )
                .await;
            let report: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
            let prompt = report["report"]["files"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["path"] == "PROMPT.md")
                .and_then(|f| f["bytes"].as_u64())
                .unwrap();
            assert!(prompt > 128 * 1024, "a prompt of {prompt} bytes");
            let out = home
                .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
                .await;
            let rec = record(&out);
            assert_eq!(
                (rec.status, rec.reason.clone()),
                (JobStatus::Done, None),
                "{engine_name} on {rung}: {}",
                stderr(&out)
            );
        }
    }
}

/// The process rung's supervisor stops when told to: SIGTERM kills the
/// engine's tree, and the supervisor ends as the engine did (killed)
/// instead of waiting for a signal that never comes (the runner's
/// SIGKILL after its grace was what ended it before).
#[test]
fn the_supervisor_ends_when_stopped() {
    use std::os::unix::process::ExitStatusExt as _;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_paddock"))
        .args([
            "__supervise",
            "/",
            "--",
            "sh",
            "-c",
            "sleep 600 & sleep 600",
        ])
        .spawn()
        .unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    // The engine's tree started, so the supervisor has blocked the signals
    // it waits for (before it starts the engine): a SIGTERM sent earlier
    // kills it by its default (a fixed 300 ms wait, which a loaded host
    // can outlast, did).
    let started = std::time::Instant::now();
    while paddock::supervise::descendants(pid).len() < 2 {
        assert!(started.elapsed() < Duration::from_secs(300), "no engine");
        std::thread::sleep(Duration::from_millis(20));
    }
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    // Ended by the signal, not by the engine's 600 s: a bound well below
    // that, far above what a loaded host takes.
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the supervisor did not end within 300 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        status.signal(),
        Some(nix::sys::signal::Signal::SIGKILL as i32)
    );
}

/// An upstream that answers each request with its headers and the
/// stream's first event, then holds the connection open in silence for
/// 600 s; its URL and how many requests it answered.
async fn stalling_upstream() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = answered.clone();
    tokio::spawn(async move {
        loop {
            let (mut conn, _) = listener.accept().await.unwrap();
            let count = count.clone();
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let event = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"model\":\"gpt-5.5\"}}\n\n";
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{event}\r\n",
                    event.len()
                );
                let _ = conn.write_all(head.as_bytes()).await;
                tokio::time::sleep(Duration::from_secs(600)).await;
            });
        }
    });
    (url, answered)
}

/// Issue #10: a call still in flight when the job ends (made here, on
/// the job's broker, and held open; the upstream never finishes it) is
/// waited for, bounded, and kept on the ledger as `interrupted`, never
/// dropped: the upstream answered it. The waits on the job's start are
/// guards, bounded at 300 s for a loaded host (the suites side by side on
/// two cores); its end after `go` is bounded at 300 s, well below the
/// upstream's 600 s a teardown that waited for the call unbounded would
/// take.
#[tokio::test]
async fn a_call_still_in_flight_at_teardown_is_kept_on_the_ledger() {
    let home = Home::new();
    let (url, answered) = stalling_upstream().await;
    // The stand-in hands its broker and token out, then ends its turn
    // when told to.
    let hands_out = r#"url=$(sed -n 's/^base_url = "\(.*\)"$/\1/p' "$CODEX_HOME/config.toml")
echo "$url $PADDOCK_JOB_TOKEN" > "$TMPDIR/broker.tmp" && mv "$TMPDIR/broker.tmp" "$TMPDIR/broker"
i=0; while [ ! -e "$TMPDIR/go" ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i+1)); done
echo '{"type":"thread.started","thread_id":"t"}'
echo '{"type":"turn.started"}'
echo '{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}'"#;
    let spec = fake_codex_job(&home, "process", hands_out, 600);
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        SCRIPTED,
        &format!(
            "[upstream]\nprovider = \"openai\"\nkey = \"env:PADDOCK_E2E_KEY\"\nbase_url = \"{url}\"\n"
        ),
    );
    std::fs::write(&spec, text).unwrap();
    let run = home
        .command(&["run", "--json", spec.to_str().unwrap()])
        .env("PADDOCK_E2E_KEY", "sk-teardown-key-0123456789")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let tmp = {
        let mut found = None;
        for _ in 0..6000 {
            found = std::fs::read_dir(home.jobs())
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path().join("tmp"))
                .find(|t| t.join("broker").exists());
            if found.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        found.expect("the stand-in never handed its broker out")
    };
    let handed = std::fs::read_to_string(tmp.join("broker")).unwrap();
    let (broker, token) = handed.trim().split_once(' ').unwrap();
    let call = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("{broker}/responses"))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(r#"{"model":"gpt-5.5","input":"hi","stream":true}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(call.status().as_u16(), 200);
    std::fs::write(tmp.join("go"), "").unwrap();
    let out = tokio::time::timeout(Duration::from_secs(300), run.wait_with_output())
        .await
        .expect("the job's end waited for the call")
        .unwrap();
    drop(call);
    let rec = record(&out);
    let calls = home.store().await.model_calls(&rec.id).await.unwrap();
    assert_eq!(
        (
            rec.status,
            rec.model_calls,
            answered.load(std::sync::atomic::Ordering::SeqCst),
            calls
                .iter()
                .map(|c| (c.seq, c.status, c.error.as_deref()))
                .collect::<Vec<_>>()
        ),
        (
            JobStatus::Done,
            1,
            1,
            vec![(
                1,
                paddock_protocol::CallStatus::Interrupted,
                Some("the job ended before the call's answer did; its cost is estimated from what was metered")
            )]
        ),
        "{}",
        stderr(&out)
    );
}

/// The `process` rung's supervisor starts the engine with every signal at
/// its default and none blocked: what glibc's `posix_spawn` (which started
/// the supervisor, as it starts every program here) or a shell left
/// ignored does not reach it. Codex's musl binary with signals 32 and 33
/// ignored never sees its commands end (paddock_sandbox::signals).
#[test]
fn the_supervised_engine_starts_with_default_signal_dispositions() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_paddock"))
        .args([
            "__supervise",
            "/",
            "--",
            "/bin/sh",
            "-c",
            "grep -E '^Sig(Ign|Blk)' /proc/self/status",
        ])
        .output()
        .unwrap();
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned()
        ),
        (
            Some(0),
            "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n".to_string()
        )
    );
}

/// The `process` rung's supervisor changes to the directory it is given
/// before it starts the engine (it is started without one of its own, so
/// that the static build spawns it instead of forking Paddock); a
/// directory it cannot change to fails the supervisor, naming it, and
/// nothing is started.
#[test]
fn the_supervised_engine_runs_in_the_directory_given() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    let missing = dir.join("missing");
    let supervise = |dir: &std::path::Path| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_paddock"))
            .arg("__supervise")
            .arg(dir)
            .args(["--", "/bin/sh", "-c", "pwd -P"])
            .current_dir("/")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(
        (supervise(&dir), supervise(&missing)),
        (
            (Some(0), format!("{}\n", dir.display()), String::new()),
            (
                Some(70),
                String::new(),
                format!(
                    "paddock supervisor: change to the engine's directory {}: No such file or directory (os error 2)\n",
                    missing.display()
                )
            )
        )
    );
}

//! `POST /v1/turns` end to end: the real `paddock serve` on 127.0.0.1:0,
//! the real Codex and Claude Code against the scripted upstream (a turn
//! with inline files, instructions and a skill, streamed as SSE and as
//! JSON lines to `done`, nothing left behind), a client that goes away
//! mid-turn (a stand-in Codex that made its model call and then stalls:
//! cancelled, its processes gone, its ledger row kept; over SSE and over
//! JSON lines), a turn on the `sandbox` rung, a turn whose budget is spent
//! (held, never run, its stream ending at `held`), the slot limit (429
//! `no_slot`), and every bad field of a turn refused with its name.

use std::path::Path;
use std::time::Duration;

use futures::StreamExt as _;
use paddock_protocol::event::{EventBody, Phase};
use paddock_protocol::{AgentEvent, JobRecord, JobStatus};
use serde_json::{json, Value};

use crate::serve::{body, is_final, read_sse, stored_events, Server, Sse};
use paddock_test_support::prelude::*;

/// The scripted turns of the happy path: read the client's file and the
/// instructions file, then answer.
fn scenario(dir: &Path, instructions_file: &str) -> String {
    let text = format!(
        r#"[[turn]]
text = "Reading."
usage = {{ input = 100, output = 10 }}
[[turn.action]]
type = "shell"
command = "cat notes/hello.txt {instructions_file}"

[[turn]]
text = "hello"
usage = {{ input = 120, output = 2 }}
"#
    );
    let path = dir.join("scenario.toml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A turn request for `engine` replaying `scenario` on the `process` rung.
fn request(engine: &str, scenario: &str) -> Value {
    json!({
        "engine": {"kind": engine, "model": model(engine)},
        "upstream": {"provider": "scripted", "scenario": scenario},
        "instructions": "Answer in one word.",
        "input": "Read notes/hello.txt and greet me.",
        "skills": [{"name": "greet", "description": "Greets the user.", "body": "Say hello."}],
        "files": {"notes/hello.txt": "hello from the client\n"},
        "project": "chat",
        "isolation": "process",
        "limits": {"timeout_secs": 120},
    })
}

async fn post_turn(server: &Server, body: &Value, jsonl: bool) -> reqwest::Response {
    let mut req = server
        .client
        .clone()
        .post(server.url("/v1/turns"))
        .header("content-type", "application/json")
        .body(body.to_string());
    if jsonl {
        req = req.header("accept", "application/x-ndjson");
    }
    req.send().await.unwrap()
}

/// The turn's events from its response: SSE or JSON lines.
async fn read_events(resp: reqwest::Response, jsonl: bool) -> Vec<AgentEvent> {
    if !jsonl {
        return read_sse(resp, None)
            .await
            .into_iter()
            .map(|Sse { id, kind, event }| {
                assert_eq!((id, kind.as_str()), (event.seq, event.body.kind()));
                event
            })
            .collect();
    }
    assert_eq!(resp.headers()["content-type"], "application/x-ndjson");
    let text = tokio::time::timeout(Duration::from_secs(180), resp.text())
        .await
        .expect("the turn's stream did not end")
        .unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A turn on the real `engine`: its events stream back to `done`, exactly
/// the stored ones; the client's files, the instructions and the skill
/// reached the engine; the ledger has both calls; nothing is left.
async fn a_turn_streams_to_done(engine: &str, jsonl: bool, isolation: &str) {
    if paddock_test_support::prelude::engine(engine).is_none() {
        return;
    }
    if isolation == "sandbox" && !sandbox_available() {
        return;
    }
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let instructions_file = if engine == "codex" {
        "AGENTS.md"
    } else {
        "CLAUDE.md"
    };
    let scenario = scenario(home.path(), instructions_file);
    let mut turn = request(engine, &scenario);
    turn["isolation"] = json!(isolation);
    let resp = post_turn(&server, &turn, jsonl).await;
    assert_eq!(resp.status(), 200, "{}", server.stderr());
    let id = resp.headers()["paddock-job-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        resp.headers()["location"].to_str().unwrap(),
        format!("/v1/jobs/{id}")
    );
    let streamed = read_events(resp, jsonl).await;
    // When the stream has ended, the turn is over and nothing is left.
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
    let record = server.job(&id).await;
    assert_eq!(
        (
            record.status,
            record.project.as_str(),
            record.ticket_id.starts_with("turn-"),
            record.isolation.as_str()
        ),
        (JobStatus::Done, "chat", true, isolation),
        "{:?} {}",
        record.reason,
        server.stderr()
    );
    assert_eq!(streamed, stored_events(&home, &id).await);
    assert_eq!(
        streamed.last().map(|e| &e.body),
        Some(&EventBody::Status {
            phase: Phase::Done,
            detail: None
        })
    );
    let output: String = streamed
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::ToolResult { output, .. } => Some(output.as_str()),
            _ => None,
        })
        .collect();
    for want in [
        "hello from the client",
        "## Instructions\n\nAnswer in one word.",
        "`greet`: Greets the user.",
    ] {
        assert!(output.contains(want), "{want:?} not in {output:?}");
    }
    let store = home.store().await;
    assert_eq!(store.model_calls(&id).await.unwrap().len(), 2);
    assert_eq!(
        running_jobs(&server).await,
        Vec::<String>::new(),
        "nothing is left running"
    );
}

/// The ids of the jobs the server lists as `running`.
async fn running_jobs(server: &Server) -> Vec<String> {
    let page: Value = body(server.get("/v1/jobs?status=running").await).await;
    page["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_codex_turn_streams_sse_to_done_and_leaves_nothing() {
    a_turn_streams_to_done("codex", false, "process").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claude_turn_streams_jsonl_to_done_and_leaves_nothing() {
    a_turn_streams_to_done("claude", true, "process").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_codex_turn_on_the_sandbox_rung_streams_to_done_and_leaves_nothing() {
    a_turn_streams_to_done("codex", true, "sandbox").await;
}

/// A turn whose budget is already spent is held at admission, as a
/// submitted job is: the stream is its `policy` and `held` events and ends;
/// nothing ran (no ledger row, no engine), no inline source was written,
/// and the held record says why.
#[tokio::test(flavor = "multi_thread")]
async fn a_turn_whose_budget_is_spent_is_held_and_its_stream_ends() {
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let turn = json!({
        "engine": {"kind": "codex", "model": "gpt-5.5"},
        "upstream": {"provider": "scripted", "scenario": one_answer(&home)},
        "input": "Hi.",
        "files": {"a.txt": "a\n"},
        "budget": {"max_usd": 0.0},
        "isolation": "process",
    });
    let resp = post_turn(&server, &turn, true).await;
    assert_eq!(resp.status(), 200, "{}", server.stderr());
    let id = resp.headers()["paddock-job-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let streamed = read_events(resp, true).await;
    let record = server.job(&id).await;
    let reason = record.reason.clone().expect("a held turn says why");
    assert_eq!(
        (
            record.status,
            streamed.iter().map(|e| e.body.clone()).collect::<Vec<_>>()
        ),
        (
            JobStatus::Held,
            vec![
                EventBody::Policy {
                    rule: "budget".into(),
                    message: reason.clone()
                },
                EventBody::Status {
                    phase: Phase::Held,
                    detail: Some(reason)
                },
            ]
        )
    );
    assert_eq!(streamed, stored_events(&home, &id).await);
    assert_eq!(
        home.store().await.model_calls(&id).await.unwrap(),
        Vec::new()
    );
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
    assert_eq!(running_jobs(&server).await, Vec::<String>::new());
}

/// A turn runs on the server that takes it: one whose `engine.binary`
/// names no executable is refused at once, 422 `bad_input` naming the
/// field and what to do, nothing recorded or left. Before, it was
/// recorded `running` and failed at provisioning. The same spec submitted
/// to the queue is accepted (any server of a fleet may claim it, with
/// its own engines) and passed over by the server that claims it, which
/// cannot run it: it stays `queued` with the same words after the host
/// that could not run it. Before, that server failed it at provisioning.
#[tokio::test(flavor = "multi_thread")]
async fn a_turn_whose_engine_is_not_there_is_refused_a_queued_job_is_not() {
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let gone = home.path().join("bin/no-codex");
    let turn = json!({
        "engine": {"kind": "codex", "model": "gpt-5.5", "binary": gone},
        "upstream": {"provider": "scripted", "scenario": one_answer(&home)},
        "input": "Hi.",
        "files": {"a.txt": "a\n"},
        "isolation": "process",
    });
    let said = format!(
        "engine codex: engine.binary {} does not exist or is not executable (set engine.binary \
         to the engine's executable, or remove it to run `codex` from PATH)",
        gone.display()
    );
    let resp = post_turn(&server, &turn, true).await;
    let refused = (resp.status().as_u16(), body::<Value>(resp).await);
    let nothing = (
        home.store().await.jobs(10).await.unwrap(),
        home.leftover_workspaces(),
    );
    let mut job = crate::serve::spec(&home, "T-1", crate::serve::TURN);
    job["engine"]["binary"] = json!(gone);
    let queued = server.submit_ok(&job, 0).await;
    let mut passed = server.job(&queued).await;
    for _ in 0..600 {
        if passed.reason.is_some() || crate::serve::is_final(passed.status) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        passed = server.job(&queued).await;
    }
    let (host, name) = crate::hosts::host_of(&home);
    assert_eq!(
        (refused, nothing, passed.status, passed.reason),
        (
            (
                422,
                json!({
                    "type": "urn:paddock:problem:bad_input",
                    "title": "the job spec cannot run",
                    "status": 422,
                    "detail": format!("job refused before start: {said}"),
                    "code": "bad_input",
                })
            ),
            (vec![], Vec::<String>::new()),
            JobStatus::Queued,
            Some(format!(
                "not run by host {name} (jobs directory {host}), which cannot run job \
                 {queued}: {said}; it stays queued until a server that can run it claims it (this one looks again every 60 s) and fails once passed over for 86400 s (`[serve] max_passed_over_secs`) unless such a server, all its slots taken, has said so lately; a cancel ends it"
            )),
        ),
        "{}",
        server.stderr()
    );
}

/// A stand-in Codex that makes one model call through its broker, writes
/// its pid to `pid_file`, and then stalls for five minutes.
fn stalling_codex(home: &Home, pid_file: &Path) -> String {
    let body = format!(
        r#"url=$(sed -n 's/^base_url = "\(.*\)"$/\1/p' "$CODEX_HOME/config.toml")
curl -sS -o "$TMPDIR/answer" -H "Authorization: Bearer $PADDOCK_JOB_TOKEN" -H 'content-type: application/json' -d '{{"model":"gpt-5.5","input":"hi","stream":true}}' "$url/responses"
echo $$ > '{pid}.tmp' && mv '{pid}.tmp' '{pid}'
sleep 300"#,
        pid = pid_file.display()
    );
    stand_in_codex(&home.path().join("bin"), &body)
        .display()
        .to_string()
}

/// One scripted answer for the stand-in's call.
fn one_answer(home: &Home) -> String {
    let path = home.path().join("answer.toml");
    std::fs::write(
        &path,
        "[[turn]]\ntext = \"hi\"\nusage = { input = 10, output = 1 }\n",
    )
    .unwrap();
    path.display().to_string()
}

/// Waits up to 60 s for `path` to exist.
async fn wait_for_file(path: &Path, server: &Server) {
    for _ in 0..600 {
        if path.exists() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{} never appeared; {}", path.display(), server.stderr());
}

fn alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

/// With one slot, a running turn takes it (a second turn is 429
/// `no_slot` with `Retry-After`); its client going away cancels it: the
/// engine's processes are gone, the job ends `cancelled` with its final
/// `status` event, its ledger row is kept, and its workspace and inline
/// source are removed.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_goes_away_cancels_its_turn_and_turns_take_slots() {
    a_client_goes_away(false).await;
}

/// The same over JSON lines: the client's hang-up is seen on that stream
/// too.
#[tokio::test(flavor = "multi_thread")]
async fn a_jsonl_client_that_goes_away_cancels_its_turn() {
    a_client_goes_away(true).await;
}

async fn a_client_goes_away(jsonl: bool) {
    let home = Home::new();
    let server = Server::start(&home, &["--max-concurrent-jobs", "1"]).await;
    let pid_file = home.path().join("engine.pid");
    let turn = json!({
        "engine": {"kind": "codex", "model": "gpt-5.5", "binary": stalling_codex(&home, &pid_file)},
        "upstream": {"provider": "scripted", "scenario": one_answer(&home)},
        "input": "Wait.",
        "files": {"a.txt": "a\n"},
        "isolation": "process",
    });
    let resp = post_turn(&server, &turn, jsonl).await;
    assert_eq!(resp.status(), 200, "{}", server.stderr());
    let id = resp.headers()["paddock-job-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let mut stream = resp.bytes_stream();
    let first = tokio::time::timeout(Duration::from_secs(60), stream.next())
        .await
        .expect("no event")
        .unwrap()
        .unwrap();
    let first = String::from_utf8_lossy(&first).into_owned();
    if jsonl {
        let event: AgentEvent = serde_json::from_str(first.lines().next().unwrap()).unwrap();
        assert_eq!((event.seq, event.body.kind()), (1, "status"), "{first:?}");
    } else {
        assert!(first.contains("event: status"), "{first:?}");
    }
    wait_for_file(&pid_file, &server).await;
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(pid));

    // The slot is taken: a second turn is refused, not queued.
    let second = post_turn(&server, &turn, false).await;
    let retry = second.headers().get("retry-after").cloned();
    let problem: Value = body(second).await;
    assert_eq!(
        (
            retry,
            problem["status"].clone(),
            problem["code"].clone(),
            problem["detail"].clone()
        ),
        (
            Some(reqwest::header::HeaderValue::from_static("1")),
            json!(429),
            json!("no_slot"),
            json!("every slot is taken: 1 of 1 jobs run here; try again shortly"),
        )
    );

    drop(stream);
    let record: JobRecord = server.wait_for(&id, is_final).await;
    assert_eq!(
        (record.status, record.reason.as_deref()),
        (JobStatus::Cancelled, Some("cancelled")),
        "{}",
        server.stderr()
    );
    for _ in 0..100 {
        if !alive(pid) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!alive(pid), "the engine {pid} outlived its cancelled turn");
    let events = stored_events(&home, &id).await;
    assert_eq!(
        events.last().map(|e| &e.body),
        Some(&EventBody::Status {
            phase: Phase::Cancelled,
            detail: record.reason.clone()
        })
    );
    let calls = home.store().await.model_calls(&id).await.unwrap();
    assert_eq!(
        calls.iter().map(|c| c.status).collect::<Vec<_>>(),
        vec![paddock_protocol::CallStatus::Ok]
    );
    for _ in 0..100 {
        if home.leftover_workspaces().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
    assert_eq!(running_jobs(&server).await, Vec::<String>::new());
}

/// A server killed (`kill -9`) mid-turn leaves the turn to its next
/// start: the reaper fails the job and removes its workspace, and the
/// turn's inline source is swept; the engine is gone.
#[tokio::test(flavor = "multi_thread")]
async fn a_turn_whose_server_was_killed_leaves_nothing_after_a_restart() {
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let pid_file = home.path().join("engine.pid");
    let turn = json!({
        "engine": {"kind": "codex", "model": "gpt-5.5", "binary": stalling_codex(&home, &pid_file)},
        "upstream": {"provider": "scripted", "scenario": one_answer(&home)},
        "input": "Wait.",
        "files": {"a.txt": "a\n"},
        "isolation": "process",
    });
    let resp = post_turn(&server, &turn, true).await;
    assert_eq!(resp.status(), 200, "{}", server.stderr());
    let id = resp.headers()["paddock-job-id"]
        .to_str()
        .unwrap()
        .to_owned();
    wait_for_file(&pid_file, &server).await;
    let leftovers = home.leftover_workspaces();
    assert!(
        leftovers.iter().any(|n| n.starts_with(".turn-")),
        "{leftovers:?}"
    );
    nix::sys::signal::kill(server.pid(), nix::sys::signal::Signal::SIGKILL).unwrap();
    let mut killed = server;
    killed.child.wait().await.unwrap();
    drop(resp);

    let server = Server::start(&home, &[]).await;
    let dead = server.job(&id).await;
    assert_eq!(
        (dead.status, dead.reason.as_deref()),
        (JobStatus::Failed, Some(paddock::reaper::REASON))
    );
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!alive(pid), "the engine {pid} outlived its server");
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
}

/// Every bad field of a turn is a 422 `bad_input` problem naming it, and
/// nothing is recorded or written for it.
#[tokio::test]
async fn a_bad_turn_is_refused_naming_its_field() {
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let scenario = one_answer(&home);
    let good = json!({
        "engine": {"kind": "codex", "model": "gpt-5.5"},
        "upstream": {"provider": "scripted", "scenario": scenario},
        "input": "Hi.",
    });
    let with = |path: &[&str], value: Value| {
        let mut body = good.clone();
        let (last, parents) = path.split_last().unwrap();
        let mut at = &mut body;
        for p in parents {
            at = &mut at[*p];
        }
        match value {
            Value::Null => {
                at.as_object_mut().unwrap().remove(*last);
            }
            v => at[*last] = v,
        }
        body.to_string()
    };
    let cases: Vec<(&str, String)> = vec![
        ("not json", "hello".into()),
        ("unknown field", with(&["inputs"], json!("x"))),
        ("no input", with(&["input"], Value::Null)),
        ("blank input", with(&["input"], json!(" \n"))),
        ("no engine", with(&["engine"], Value::Null)),
        (
            "reasoning effort",
            with(&["engine", "reasoning_effort"], json!("extreme")),
        ),
        (
            "engine model",
            with(&["engine", "model"], json!("no-such-model")),
        ),
        ("upstream", with(&["upstream", "scenario"], Value::Null)),
        ("instructions", with(&["instructions"], json!(7))),
        (
            "absolute file",
            with(&["files"], json!({"/etc/passwd": "x"})),
        ),
        ("dot-dot file", with(&["files"], json!({"a/../../b": "x"}))),
        ("git file", with(&["files"], json!({".git/config": "x"}))),
        (
            "big file",
            with(&["files"], json!({"a": "x".repeat(524_289)})),
        ),
        (
            "files and repository",
            with(&["repository"], json!({"path": "."})),
        ),
        (
            "skill name",
            with(
                &["skills"],
                json!([{"name": "../x", "description": "d", "body": "b"}]),
            ),
        ),
        ("project", with(&["project"], json!(""))),
        ("limits", with(&["limits"], json!({"timeout_secs": 0}))),
        ("isolation", with(&["isolation"], json!("vm"))),
    ];
    let mut answers = Vec::new();
    for (name, text) in &cases {
        let text = if *name == "files and repository" {
            let mut v: Value = serde_json::from_str(text).unwrap();
            v["files"] = json!({"a": "x"});
            v.to_string()
        } else {
            text.clone()
        };
        let resp = server
            .client
            .clone()
            .post(server.url("/v1/turns"))
            .header("content-type", "application/json")
            .body(text)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let problem: Value = body(resp).await;
        answers.push((
            name.to_string(),
            status,
            problem["code"].as_str().unwrap_or("?").to_owned(),
            problem["detail"].as_str().unwrap_or("?").to_owned(),
        ));
    }
    insta::assert_debug_snapshot!(answers);
    let jobs: Value = body(server.get("/v1/jobs").await).await;
    assert_eq!(jobs["jobs"], json!([]));
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
}

/// A turn's inline files are the client's, and so are their attribute
/// rules: two `.gitattributes` of 29,000 `a/**/b<n>` patterns each
/// (the top's and `a/`'s) beside 98 files 60 directories deep (all
/// within a turn's 100 files of 512 KiB, 1 MiB in all)
/// makes each git that commits them compute for seconds (with deeper
/// paths, minutes: 1,000 deep took `git add` 108 s of CPU), on the
/// server's CPU before the job exists. Under a host profile's
/// `git_cpu_secs = 1` the turn is refused as bad input naming its files
/// and the limit, nothing recorded or left. Before, those gits had no
/// CPU limit: the turn was taken (200) after seconds of the server's CPU.
#[tokio::test]
async fn a_turns_files_cannot_make_their_commit_compute_unbounded() {
    let home = Home::new();
    let profile = home.path().join("tight-git.toml");
    std::fs::write(&profile, "id = \"tight-git\"\ngit_cpu_secs = 1\n").unwrap();
    let added = home
        .paddock(&["profile", "add", profile.to_str().unwrap()], &[])
        .await;
    assert!(added.status.success(), "{added:?}");
    let server = Server::start(&home, &["--allow-profile", "tight-git"]).await;
    let deep = std::iter::once("a")
        .chain(std::iter::repeat_n("x", 60))
        .collect::<Vec<_>>()
        .join("/");
    let mut files: serde_json::Map<String, Value> = (0..98)
        .map(|i| (format!("{deep}/f{i}"), json!("f\n")))
        .collect();
    let rules = |top: &str| -> String {
        (0..29_000)
            .map(|i| format!("{top}/**/b{i} text\n"))
            .collect()
    };
    files.insert(".gitattributes".into(), json!(rules("a")));
    files.insert("a/.gitattributes".into(), json!(rules("x")));
    let turn = json!({
        "engine": {"kind": "codex", "model": "gpt-5.5"},
        "upstream": {"provider": "scripted", "scenario": one_answer(&home)},
        "input": "Hi.",
        "files": files,
        "isolation": "process",
        "policy": {"profile": "tight-git"},
    });
    let resp = post_turn(&server, &turn, true).await;
    let status = resp.status().as_u16();
    // A problem, or (taken) the turn's events till its end.
    let text = resp.text().await.unwrap();
    let problem: Value = serde_json::from_str(&text).unwrap_or_default();
    let detail = problem["detail"].as_str().unwrap_or(&text);
    let jobs: Value = body(server.get("/v1/jobs").await).await;
    assert_eq!(
        (
            status,
            problem["code"].as_str(),
            detail.starts_with("files: make the turn's files: workspace ")
                && detail
                    .contains(" used more than 1s of CPU on the job's content or its repository's"),
            &jobs["jobs"],
            home.leftover_workspaces(),
        ),
        (
            422,
            Some("bad_input"),
            true,
            &json!([]),
            Vec::<String>::new()
        ),
        "{detail}"
    );
}

/// A turn whose provider key names a variable the server allows but does
/// not have is refused naming the field (`upstream.key`) as `paddock run`
/// names it, nothing recorded. Before, the detail began with the key's
/// reference alone, and a client could not tell which field it was.
#[tokio::test]
async fn a_turn_whose_key_is_not_there_is_refused_naming_upstream_key() {
    let home = Home::new();
    let key = "env:PADDOCK_TEST_UNSET_TURN_KEY";
    let server = Server::start(&home, &["--allow-ref", key]).await;
    let turn = json!({
        "engine": {"kind": "codex", "model": "gpt-5.5"},
        "upstream": {"provider": "openai", "key": key},
        "input": "Hi.",
        "isolation": "process",
    });
    let resp = post_turn(&server, &turn, false).await;
    let status = resp.status().as_u16();
    let problem: Value = body(resp).await;
    assert_eq!(
        (status, problem),
        (
            422,
            json!({
                "type": "urn:paddock:problem:bad_input",
                "title": "the job spec cannot run",
                "status": 422,
                "detail": "upstream.key: provider key env:PADDOCK_TEST_UNSET_TURN_KEY: \
                           environment variable is not set",
                "code": "bad_input",
            })
        )
    );
    let jobs: Value = body(server.get("/v1/jobs").await).await;
    assert_eq!(jobs["jobs"], json!([]));
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
}

/// A file of the server's own secrets (an `allow_refs` `file:` reference,
/// which any job may name, or its webhook secret) is a place no sandboxed
/// job's read-only path may show, whichever job names it: a turn whose
/// view would bind the directory holding one (the config file's `[jobs]
/// read_only`) is refused naming it. Before, only the job's own
/// credentials were looked at, and another job's key was in its view.
#[tokio::test]
async fn a_turn_whose_view_would_show_a_servers_secret_is_refused() {
    if !sandbox_available() || engine("codex").is_none() {
        return;
    }
    let home = Home::new();
    let keys = home.path().join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let key = keys.join("other.key");
    std::fs::write(&key, "sk-not-this-jobs").unwrap();
    home.write_config(&format!("[jobs]\nread_only = [\"{}\"]\n", keys.display()));
    let reference = format!("file:{}", key.display());
    let server = Server::start(&home, &["--allow-ref", &reference]).await;
    let mut turn = request("codex", &one_answer(&home));
    turn["isolation"] = json!("sandbox");
    let resp = post_turn(&server, &turn, false).await;
    let status = resp.status().as_u16();
    let problem: Value = body(resp).await;
    let keys = keys.canonicalize().unwrap();
    assert_eq!(
        (status, problem["code"].clone(), problem["detail"].clone()),
        (
            422,
            json!("bad_input"),
            json!(format!(
                "job refused before start: the sandbox cannot bind the host's tools \
                 (jobs.read_only in the config file, read-only): {} would show the job, \
                 read-only, what is not its own: it holds {} (the file the server's allow_refs \
                 is read from) (name the tools' own directories)",
                keys.display(),
                keys.join("other.key").display()
            ))
        )
    );
    let jobs: Value = body(server.get("/v1/jobs").await).await;
    assert_eq!(jobs["jobs"], json!([]));
}

/// A turn whose `repository` names a local path that is not there is
/// refused with code `repository_not_found` naming the field, nothing
/// recorded, as a submitted job is; a turn's inline `files` (the
/// server's own source, made after admission) are not looked at so.
/// Before, the turn was admitted and its job failed at its clone.
#[tokio::test]
async fn a_turn_whose_repository_is_not_there_is_refused_with_its_code() {
    let home = Home::new();
    let server = Server::start(&home, &["--allow-ref", "env:OPENAI_API_KEY"]).await;
    let gone = home.path().join("gone");
    let turn = json!({
        "engine": {"kind": "codex", "model": "gpt-5.5"},
        "upstream": {"provider": "openai", "key": "env:OPENAI_API_KEY"},
        "input": "Hi.",
        "repository": {"path": gone.display().to_string(), "base_ref": "main"},
        "isolation": "process",
    });
    let resp = post_turn(&server, &turn, false).await;
    let status = resp.status().as_u16();
    let problem: Value = body(resp).await;
    let jobs: Value = body(server.get("/v1/jobs").await).await;
    assert_eq!(
        (status, problem, jobs["jobs"].clone()),
        (
            422,
            json!({
                "type": "urn:paddock:problem:repository_not_found",
                "title": "the job's repository is not there",
                "status": 422,
                "detail": format!("repository.path {}: no such directory", gone.display()),
                "code": "repository_not_found",
            }),
            json!([]),
        ),
        "{}",
        server.stderr()
    );
}

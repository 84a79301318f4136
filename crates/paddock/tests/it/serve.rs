//! `paddock serve` end to end: the real binary on 127.0.0.1:0 in a temp
//! home, a reqwest client, the real SQLite store, jobs on the `process`
//! rung with stand-in engines (scripts as `engine.binary`) and the
//! scripted upstream. Submit → 202 → SSE to the final state, resume with
//! `Last-Event-ID` exactly once, problem+json errors with the CLI's
//! messages, cancel, the queue's limit and priority, a restart after
//! `kill -9` (and a live server on the same jobs directory reaping the job
//! of one killed), and the SIGTERM drain.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use paddock_protocol::event::{EventBody, Phase};
use paddock_protocol::{AgentEvent, JobRecord, JobSpec, JobStatus};
use serde_json::Value;
use tokio::io::AsyncBufReadExt as _;

use paddock_test_support::prelude::*;

/// The three lines of a finished Codex turn.
pub(crate) const TURN: &str = r#"echo '{"type":"thread.started","thread_id":"t"}'
echo '{"type":"turn.started"}'
echo '{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}'"#;

/// A running `paddock serve`.
pub(crate) struct Server {
    pub(crate) child: tokio::process::Child,
    base: String,
    stderr: Arc<Mutex<String>>,
    /// Sends an admin token with every request.
    pub(crate) client: reqwest::Client,
    /// That token's public id.
    pub(crate) token_id: String,
}

/// The public id of API token `token` (`pdk-api-<id>-<secret>`).
pub(crate) fn token_id(token: &str) -> String {
    let rest = token.strip_prefix("pdk-api-").unwrap();
    rest.split_once('-').unwrap().0.to_owned()
}

/// A new API token of `scope` in `home`'s store (`paddock token create`).
pub(crate) async fn token(home: &Home, scope: &str) -> String {
    token_env(home, scope, &[]).await
}

/// [`token`] with extra environment (`PADDOCK_DB`: another store).
pub(crate) async fn token_env(home: &Home, scope: &str, env: &[(&str, &str)]) -> String {
    let out = home
        .paddock(&["token", "create", "--scope", scope], env)
        .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A client sending `token` as its bearer.
pub(crate) fn client_with(token: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {token}").parse().unwrap(),
    );
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap()
}

impl Server {
    pub(crate) async fn start(home: &Home, args: &[&str]) -> Server {
        Server::start_env(home, args, &[]).await
    }

    pub(crate) async fn start_env(home: &Home, args: &[&str], env: &[(&str, &str)]) -> Server {
        Server::start_allowing(home, &["--allow-process"], args, env).await
    }

    /// A server with `allowances` besides the test's home: the tests'
    /// specs name files of their home (repositories, scenarios, stand-in
    /// engines), which every server lets them, and most run on the
    /// `process` rung (`--allow-process`, which `start_env` gives).
    pub(crate) async fn start_allowing(
        home: &Home,
        allowances: &[&str],
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let admin = token_env(home, "admin", env).await;
        let (client, token_id) = (client_with(&admin), token_id(&admin));
        let allowed = home.path().display().to_string();
        let mut all = vec!["serve", "--listen", "127.0.0.1:0", "--allow-path", &allowed];
        all.extend_from_slice(allowances);
        all.extend_from_slice(args);
        let mut command = home.command(&all);
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let stderr = Arc::new(Mutex::new(String::new()));
        let base = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let line = lines.next_line().await.unwrap().expect("serve ended");
                stderr.lock().unwrap().push_str(&format!("{line}\n"));
                if let Some(addr) = line.strip_prefix("paddock: serving on ") {
                    return addr.to_owned();
                }
            }
        })
        .await
        .expect("serve did not start");
        let rest = stderr.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                rest.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        Server {
            child,
            base,
            stderr,
            client,
            token_id,
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `GET path` with the server's client (its token).
    pub(crate) async fn get(&self, path: &str) -> reqwest::Response {
        self.client.get(self.url(path)).send().await.unwrap()
    }

    pub(crate) async fn submit(&self, spec: &Value, priority: i64) -> reqwest::Response {
        self.client
            .clone()
            .post(self.url(&format!("/v1/jobs?priority={priority}")))
            .header("content-type", "application/json")
            .body(spec.to_string())
            .send()
            .await
            .unwrap()
    }

    /// Submits `spec`; its id (202 asserted).
    pub(crate) async fn submit_ok(&self, spec: &Value, priority: i64) -> String {
        let resp = self.submit(spec, priority).await;
        assert_eq!(resp.status(), 202, "{}", self.stderr());
        let record: JobRecord = body(resp).await;
        record.id
    }

    pub(crate) async fn job(&self, id: &str) -> JobRecord {
        body(self.get(&format!("/v1/jobs/{id}")).await).await
    }

    /// Waits (up to 60 s) until job `id` is `status`; its record.
    pub(crate) async fn wait_for(&self, id: &str, done: impl Fn(JobStatus) -> bool) -> JobRecord {
        for _ in 0..600 {
            let job = self.job(id).await;
            if done(job.status) {
                return job;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("job {id} never reached the state; {}", self.stderr());
    }

    pub(crate) async fn cancel(&self, id: &str) -> reqwest::Response {
        self.client
            .clone()
            .post(self.url(&format!("/v1/jobs/{id}/cancel")))
            .send()
            .await
            .unwrap()
    }

    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub(crate) fn pid(&self) -> nix::unistd::Pid {
        nix::unistd::Pid::from_raw(self.child.id().unwrap() as i32)
    }
}

/// A job spec (as JSON) in `home/<name>` whose stand-in engine runs
/// `body`, on ticket `name`.
pub(crate) fn spec(home: &Home, name: &str, body: &str) -> Value {
    spec_on(home, name, name, body)
}

/// `spec` in `home/<dir>` on ticket `name`.
fn spec_on(home: &Home, dir: &str, name: &str, body: &str) -> Value {
    let dir = home.path().join(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = stand_in_job(&dir, "process", body, 120);
    let mut spec = serde_json::to_value(JobSpec::load(&path).unwrap()).unwrap();
    spec["ticket"]["id"] = Value::from(name);
    spec
}

/// A stand-in that waits for the file `gate` before it finishes its turn.
pub(crate) fn gated(gate: &Path) -> String {
    format!(
        "i=0; while [ ! -e '{}' ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n{TURN}",
        gate.display()
    )
}

/// A response's JSON body.
pub(crate) async fn body<T: serde::de::DeserializeOwned>(resp: reqwest::Response) -> T {
    let bytes = resp.bytes().await.unwrap();
    serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&bytes)))
}

/// One SSE event: its `id:`, `event:` and `data:` (parsed).
#[derive(Debug, PartialEq)]
pub(crate) struct Sse {
    pub(crate) id: u64,
    pub(crate) kind: String,
    pub(crate) event: AgentEvent,
}

/// Reads SSE events from `resp` until the stream ends or `stop_after`
/// events arrived.
pub(crate) async fn read_sse(resp: reqwest::Response, stop_after: Option<usize>) -> Vec<Sse> {
    assert_eq!(
        resp.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let mut body = resp.bytes_stream();
    let mut text = String::new();
    let mut out = Vec::new();
    loop {
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            let (mut id, mut kind, mut data) = (None, None, None);
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id: ") {
                    id = Some(v.parse().unwrap());
                } else if let Some(v) = line.strip_prefix("event: ") {
                    kind = Some(v.to_owned());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data = Some(serde_json::from_str(v).unwrap());
                }
            }
            if let (Some(id), Some(kind), Some(event)) = (id, kind, data) {
                out.push(Sse { id, kind, event });
                if stop_after == Some(out.len()) {
                    return out;
                }
            }
        }
        let next = tokio::time::timeout(Duration::from_secs(60), body.next())
            .await
            .expect("no SSE data for 60 s");
        match next {
            Some(chunk) => text.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap()),
            None => return out,
        }
    }
}

async fn events_sse(server: &Server, id: &str, last: Option<u64>) -> reqwest::Response {
    let mut req = server
        .client
        .clone()
        .get(server.url(&format!("/v1/jobs/{id}/events")));
    if let Some(last) = last {
        req = req.header("last-event-id", last.to_string());
    }
    req.send().await.unwrap()
}

pub(crate) async fn stored_events(home: &Home, id: &str) -> Vec<AgentEvent> {
    home.store().await.events(id, 0).await.unwrap()
}

pub(crate) fn is_final(s: JobStatus) -> bool {
    !matches!(s, JobStatus::Queued | JobStatus::Running)
}

#[tokio::test]
async fn a_submitted_job_streams_its_events_over_sse_to_its_final_state() {
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let resp = server.submit(&spec(&home, "T-1", TURN), 0).await;
    assert_eq!(resp.status(), 202, "{}", server.stderr());
    let location = resp.headers()["location"].to_str().unwrap().to_owned();
    let submitted: JobRecord = body(resp).await;
    assert_eq!(
        (submitted.status, location),
        (JobStatus::Queued, format!("/v1/jobs/{}", submitted.id))
    );
    let id = submitted.id;

    let streamed = read_sse(events_sse(&server, &id, None).await, None).await;
    let record = server.job(&id).await;
    assert_eq!(
        (record.status, record.reason.as_deref()),
        (JobStatus::Done, None),
        "{}",
        server.stderr()
    );
    let stored = stored_events(&home, &id).await;
    let expected: Vec<Sse> = stored
        .iter()
        .map(|e| Sse {
            id: e.seq,
            kind: e.body.kind().to_owned(),
            event: e.clone(),
        })
        .collect();
    assert_eq!(streamed, expected);
    assert_eq!(
        stored.last().map(|e| &e.body),
        Some(&EventBody::Status {
            phase: Phase::Done,
            detail: None
        })
    );

    // The same events as JSONL, by query and by Accept.
    for req in [
        server
            .client
            .clone()
            .get(server.url(&format!("/v1/jobs/{id}/events?format=jsonl"))),
        server
            .client
            .clone()
            .get(server.url(&format!("/v1/jobs/{id}/events")))
            .header("accept", "application/x-ndjson"),
    ] {
        let resp = req.send().await.unwrap();
        assert_eq!(resp.headers()["content-type"], "application/x-ndjson");
        let lines: Vec<AgentEvent> = resp
            .text()
            .await
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines, stored);
    }
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
}

#[tokio::test]
async fn last_event_id_resumes_without_gaps_or_doubles() {
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let gate = home.path().join("gate");
    let id = server
        .submit_ok(&spec(&home, "T-1", &gated(&gate)), 0)
        .await;

    // The first two events, then the connection drops mid-job.
    let first = read_sse(events_sse(&server, &id, None).await, Some(2)).await;
    let last = first.last().unwrap().id;
    // Resumed while the job runs; it finishes once the client is back.
    let resumed = events_sse(&server, &id, Some(last)).await;
    std::fs::write(&gate, "").unwrap();
    let rest = read_sse(resumed, None).await;

    let stored = stored_events(&home, &id).await;
    let seqs: Vec<u64> = first.iter().chain(&rest).map(|e| e.id).collect();
    assert_eq!(seqs, (1..=stored.len() as u64).collect::<Vec<_>>());
    let events: Vec<AgentEvent> = first.into_iter().chain(rest).map(|e| e.event).collect();
    assert_eq!(events, stored);
    assert_eq!(server.job(&id).await.status, JobStatus::Done);

    // A resume after the end gives exactly what follows, then ends.
    let tail = read_sse(events_sse(&server, &id, Some(last + 1)).await, None).await;
    assert_eq!(
        tail.into_iter().map(|e| e.event).collect::<Vec<_>>(),
        stored[(last as usize + 1)..].to_vec()
    );
}

/// A job with more stored events than a follower reads at once (the
/// store is read a page at a time, never a job's whole history per
/// reader): streamed whole, in order, once each, by SSE from the start and
/// from inside the second page, and as JSONL.
#[tokio::test]
async fn events_past_a_page_stream_whole_and_resume_inside_a_page() {
    let home = Home::new();
    let mut rec = paddock_test_support::jobs::stored_record(
        "0193paged",
        "gpt-5.5",
        "process",
        JobStatus::Running,
        0,
    );
    let store = home.store().await;
    store.insert_job(&rec, "{}").await.unwrap();
    let stored: Vec<AgentEvent> = (1..=600)
        .map(|seq| AgentEvent {
            job_id: rec.id.clone(),
            seq,
            at: time::macros::datetime!(2025-06-01 12:00 UTC),
            body: EventBody::Text {
                text: format!("line {seq}"),
            },
        })
        .collect();
    for e in &stored {
        store.append_event(e).await.unwrap();
    }
    rec.status = JobStatus::Done;
    store.finish_job(&rec, JobStatus::Running).await.unwrap();
    let server = Server::start(&home, &[]).await;

    let events = |sse: Vec<Sse>| sse.into_iter().map(|e| e.event).collect::<Vec<_>>();
    let whole = read_sse(events_sse(&server, &rec.id, None).await, None).await;
    let resumed = read_sse(events_sse(&server, &rec.id, Some(300)).await, None).await;
    let jsonl: Vec<AgentEvent> = server
        .get(&format!("/v1/jobs/{}/events?format=jsonl", rec.id))
        .await
        .text()
        .await
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        (events(whole), events(resumed), jsonl),
        (stored.clone(), stored[300..].to_vec(), stored.clone())
    );
}

#[tokio::test]
async fn a_body_that_is_not_json_or_cut_short_is_refused_naming_what_is_wrong_and_nothing_is_queued(
) {
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let post = |path: &str, content_type: &str, body: String| {
        server
            .client
            .post(server.url(path))
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    let whole = spec(&home, "T-1", TURN).to_string();
    let as_text = post("/v1/jobs", "text/plain", whole).await.unwrap();
    let as_form = post(
        "/v1/turns",
        "application/x-www-form-urlencoded",
        "input=hi".into(),
    )
    .await
    .unwrap();
    let cut = post(
        "/v1/jobs",
        "application/json",
        r#"{"ticket": {"id": "T-1""#.into(),
    )
    .await
    .unwrap();
    let mut answers = Vec::new();
    for resp in [as_text, as_form, cut] {
        let status = resp.status().as_u16();
        let problem = body::<Value>(resp).await;
        answers.push((status, problem["code"].clone(), problem["detail"].clone()));
    }
    assert_eq!(
        answers,
        [
            (
                415,
                Value::from("unsupported_media_type"),
                Value::from("the request body is `text/plain`; this route reads JSON: send `Content-Type: application/json`"),
            ),
            (
                415,
                Value::from("unsupported_media_type"),
                Value::from("the request body is `application/x-www-form-urlencoded`; this route reads JSON: send `Content-Type: application/json`"),
            ),
            (
                422,
                Value::from("bad_input"),
                Value::from(
                    "job spec <request body>: not valid JSON: EOF while parsing an object at line 1 column 23"
                ),
            ),
        ]
    );
    let listed = server.get("/v1/jobs").await;
    assert_eq!(body::<Value>(listed).await["jobs"], serde_json::json!([]));

    // An unknown id is named back, one too long to be any job's cut.
    let long = "j".repeat(5000);
    let missing = server.get(&format!("/v1/jobs/{long}")).await;
    assert_eq!(
        (
            missing.status().as_u16(),
            body::<Value>(missing).await["detail"].clone()
        ),
        (
            404,
            Value::from(format!(
                "no job {}… (an id of 5000 characters; a job's has at most 128)",
                "j".repeat(64)
            ))
        )
    );
}

/// Stores host profile `net` (a `[network]` maximum of `api.github.com`)
/// in `home` with `paddock profile add`.
pub(crate) async fn add_net_profile(home: &Home) {
    let profile = home.path().join("net.toml");
    std::fs::write(
        &profile,
        "id = \"net\"\n[network]\nallow = [\"api.github.com\"]\n",
    )
    .unwrap();
    let added = home
        .paddock(&["profile", "add", profile.to_str().unwrap()], &[])
        .await;
    assert!(added.status.success(), "{added:?}");
}

/// A job the host profile refuses (here its `[network]` maximum, which
/// the `process` rung cannot enforce, not accepted as degraded) is a 422
/// with code `policy_refused` and the rule, the detail the CLI's message
/// with the spec's file, which only the CLI knows (a stored profile has
/// none), given as what named the profile (`policy.profile`); nothing is
/// recorded. Accepted as degraded, it is queued.
/// Before, it was accepted and ran with nothing enforcing the maximum.
#[tokio::test]
async fn a_job_the_host_profile_refuses_is_a_422_naming_the_rule() {
    let home = Home::new();
    add_net_profile(&home).await;
    let server = Server::start(&home, &["--allow-profile", "net"]).await;
    let mut job = spec(&home, "T-1", TURN);
    job["policy"] = serde_json::json!({"profile": "net"});
    let file = home.path().join("refused.json");
    std::fs::write(&file, job.to_string()).unwrap();
    let cli = home.paddock(&["run", file.to_str().unwrap()], &[]).await;
    let cli_message = String::from_utf8_lossy(&cli.stderr)
        .trim_end()
        .strip_prefix("paddock: ")
        .unwrap()
        .to_owned();
    let spec_named = format!("job spec {}: ", file.display());
    let resp = server.submit(&job, 0).await;
    assert_eq!(
        (
            cli.status.code(),
            resp.status().as_u16(),
            body::<Value>(resp).await,
            cli_message.starts_with(&format!(
                "job refused before start: {spec_named}host profile `net`: rule `network` "
            )),
        ),
        (
            Some(2),
            422,
            serde_json::json!({
                "type": "urn:paddock:problem:policy_refused",
                "title": "the host profile refuses the job",
                "status": 422,
                "detail": cli_message.replacen(&spec_named, "policy.profile: ", 1),
                "code": "policy_refused",
                "rule": "network",
            }),
            true,
        )
    );
    job["policy"]["accept_degraded"] = serde_json::json!(["network"]);
    let accepted = server.submit(&job, 0).await;
    assert_eq!(accepted.status().as_u16(), 202, "{}", server.stderr());
}

/// A server's 422 for a host profile it cannot use, or that refuses the
/// job, names what named the profile: the server's default
/// (`host_profile` in its config file) for a spec naming none, which the
/// submitter cannot see; the spec's `policy.profile` for one naming it.
/// Here a default profile whose `[network]` maximum the `process` rung
/// cannot enforce (`policy_refused`, its rule), a default profile that is
/// nowhere, and a stored profile the spec names whose stored body does
/// not validate (`bad_input`, both), the codes as they were. Before,
/// each detail began with the profile alone (`host profile `net`: …`), and
/// a submitter whose spec named no profile looked for it there.
#[tokio::test]
async fn a_host_profile_refusal_names_what_named_the_profile() {
    use sqlx::Connection as _;
    let home = Home::new();
    add_net_profile(&home).await;
    let mut db = sqlx::SqliteConnection::connect(&format!("sqlite://{}", home.db().display()))
        .await
        .unwrap();
    sqlx::query("INSERT INTO host_profiles (id, body, updated_at) VALUES ($1, $2, $3)")
        .bind("bad")
        .bind(r#"{"id":"bad","max_concurrent_jobs":"many"}"#)
        .bind("2026-01-01T00:00:00Z")
        .execute(&mut db)
        .await
        .unwrap();
    db.close().await.unwrap();
    let job = spec(&home, "T-1", TURN);
    let mut answers = Vec::new();
    // A default profile that is nowhere: stored when the server starts
    // (which refuses one that resolves to nothing), removed while it runs.
    let gone = home.path().join("gone.toml");
    std::fs::write(&gone, "id = \"gone\"\n").unwrap();
    let added = home
        .paddock(&["profile", "add", gone.to_str().unwrap()], &[])
        .await;
    assert!(added.status.success(), "{added:?}");
    for (config, args, profile) in [
        ("host_profile = \"net\"\n", &[][..], None),
        ("host_profile = \"gone\"\n", &[][..], None),
        ("", &["--allow-profile", "bad"][..], Some("bad")),
    ] {
        home.write_config(config);
        let server = Server::start(&home, args).await;
        if config.contains("gone") {
            let removed = home.paddock(&["profile", "rm", "gone"], &[]).await;
            assert!(removed.status.success(), "{removed:?}");
        }
        let mut job = job.clone();
        if let Some(profile) = profile {
            job["policy"] = serde_json::json!({ "profile": profile });
        }
        let resp = server.submit(&job, 0).await;
        answers.push((resp.status().as_u16(), body::<Value>(resp).await));
        if profile.is_none() {
            // A turn is given the default as a job is.
            let turn = serde_json::json!({
                "engine": job["engine"],
                "upstream": job["upstream"],
                "input": "Hi.",
                "files": {"a.txt": "a\n"},
                "isolation": "process",
            });
            let resp = server
                .client
                .clone()
                .post(server.url("/v1/turns"))
                .header("content-type", "application/json")
                .body(turn.to_string())
                .send()
                .await
                .unwrap();
            answers.push((resp.status().as_u16(), body::<Value>(resp).await));
        }
    }
    let default = "this server's default host profile (host_profile in its config file, for a \
                   spec naming none)";
    let problem = |code: &str, title: &str, detail: String| {
        let mut problem = serde_json::json!({
            "type": format!("urn:paddock:problem:{code}"),
            "title": title,
            "status": 422,
            "detail": detail,
            "code": code,
        });
        if code == "policy_refused" {
            problem["rule"] = Value::from("network");
        }
        (422, problem)
    };
    let refused = problem(
        "policy_refused",
        "the host profile refuses the job",
        format!(
            "job refused before start: {default}: host profile `net`: rule `network` (its \
             [network] maximum and the deny list) cannot be enforced on the `process` rung: the \
             job's processes can connect directly, past its egress proxy; the `sandbox` rung \
             enforces it (docs/egress.md); run the job on a rung that enforces it, or list \
             `network` in `policy.accept_degraded`"
        ),
    );
    let gone = problem(
        "bad_input",
        "the job spec cannot run",
        format!(
            "{default}: host profile `gone` is neither in the store nor a preset \
             (constrained-local, remote-full); save it with `paddock profile add FILE` or name a \
             profile file"
        ),
    );
    assert_eq!(
        answers,
        vec![
            refused.clone(),
            refused,
            gone.clone(),
            gone,
            problem(
                "bad_input",
                "the job spec cannot run",
                "policy.profile: host profile `bad`: cannot decode host_profiles.body of bad: \
                 host profile host_profiles.bad: field `max_concurrent_jobs`: invalid type: \
                 string \"many\", expected a whole number, 0 or more at line 1 column 40"
                    .to_owned()
            ),
        ]
    );
}

/// A job whose engine the sandbox could not bind on this server (its
/// binary directly in /tmp, so its directory is the view's own /tmp) is
/// accepted at submission (202: any server of a fleet may claim it, with
/// its own engines and jobs directory, as for an engine not found:
/// `Runner::view_here` is not asked there), and the server that claims it
/// passes it over before anything of it starts (`Runner::runs_here`):
/// it stays `queued`, no owner, its reason naming this host and the CLI's
/// words (but for the spec's file, which only the CLI knows), shown by
/// `GET /v1/jobs/{id}` and `paddock show`, no event, nothing of its
/// workspace made, and a cancel ends it `cancelled`; a turn, which runs
/// on the server that takes it, is refused 422 `bad_input` with the CLI's
/// message, nothing recorded. Before, the claiming server failed the job
/// at provisioning, though a server of the fleet that could bind it would
/// have run it.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_whose_engine_the_sandbox_cannot_bind_here_stays_queued_for_a_server_that_can() {
    if !paddock_test_support::prelude::sandbox_available() {
        return;
    }
    let home = Home::new();
    // A submitted spec may name the engine there.
    let server = Server::start(&home, &["--allow-path", "/tmp"]).await;
    let engine = tempfile::Builder::new()
        .prefix("paddock-codex-")
        .tempfile_in("/tmp")
        .unwrap()
        .into_temp_path();
    let mut job = spec(&home, "T-1", TURN);
    std::fs::copy(job["engine"]["binary"].as_str().unwrap(), &engine).unwrap();
    job["engine"]["binary"] = Value::from(engine.to_str().unwrap());
    job["isolation"] = Value::from("sandbox");
    let file = home.path().join("engine-in-tmp.json");
    std::fs::write(&file, job.to_string()).unwrap();
    let cli = home.paddock(&["run", file.to_str().unwrap()], &[]).await;
    let cli_message = String::from_utf8_lossy(&cli.stderr)
        .trim_end()
        .strip_prefix("paddock: ")
        .unwrap()
        .to_owned();
    let said = cli_message
        .strip_prefix("job refused before start: ")
        .unwrap()
        .replacen(&format!(" in job spec {}", file.display()), "", 1);
    let turn = serde_json::json!({
        "engine": job["engine"],
        "upstream": job["upstream"],
        "input": "Hi.",
        "files": {"a.txt": "a\n"},
        "isolation": "sandbox",
    });
    let turned = server
        .client
        .clone()
        .post(server.url("/v1/turns"))
        .header("content-type", "application/json")
        .body(turn.to_string())
        .send()
        .await
        .unwrap();
    let turned = (turned.status().as_u16(), body::<Value>(turned).await);
    let recorded_by_turn = home.store().await.jobs(10).await.unwrap();
    let queued = server.submit_ok(&job, 0).await;
    let mut passed = server.job(&queued).await;
    for _ in 0..600 {
        if passed.reason.is_some() || is_final(passed.status) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        passed = server.job(&queued).await;
    }
    let events = stored_events(&home, &queued).await;
    let owner = home.store().await.job_owner(&queued).await.unwrap();
    let shown = home.paddock(&["show", "--json", &queued], &[]).await;
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    let shown = (
        shown["record"]["status"].clone(),
        shown["record"]["reason"].clone(),
    );
    let cancelled = server.cancel(&queued).await;
    let cancelled = (
        cancelled.status().as_u16(),
        body::<JobRecord>(cancelled).await.status,
    );
    let (host, name) = crate::hosts::host_of(&home);
    let reason = format!(
        "not run by host {name} (jobs directory {host}), which cannot run job {queued}: {said}; \
         it stays queued until a server that can run it claims it (this one looks again every 60 s) and fails once passed over for 86400 s (`[serve] max_passed_over_secs`) unless such a server, all its slots taken, has said so lately; a cancel ends it"
    );
    assert_eq!(
        (
            cli.status.code(),
            turned,
            recorded_by_turn,
            (passed.status, passed.reason),
            owner,
            events,
            shown,
            home.leftover_workspaces(),
            cancelled,
        ),
        (
            Some(2),
            (
                422,
                serde_json::json!({
                    "type": "urn:paddock:problem:bad_input",
                    "title": "the job spec cannot run",
                    "status": 422,
                    "detail": format!("job refused before start: {said}"),
                    "code": "bad_input",
                })
            ),
            vec![],
            (JobStatus::Queued, Some(reason.clone())),
            None,
            vec![],
            (Value::from("queued"), Value::from(reason)),
            Vec::<String>::new(),
            (202, JobStatus::Cancelled),
        ),
        "{}",
        server.stderr()
    );
    assert_eq!(
        cli_message,
        format!(
            "job refused before start: the sandbox cannot bind engine codex's directories (its \
             package tree, its own directory and node's, read-only; engine.binary {} in job spec \
             {}): /tmp cannot be bound into the sandbox: it is /tmp, which the sandbox makes its \
             own (the job's private, size-capped tmpfs); give a directory under /tmp or \
             elsewhere (install the engine in a directory of its own and set engine.binary or \
             PATH to it)",
            engine.display(),
            file.display()
        )
    );
}

/// A job an earlier version queued, its stored spec naming a destination
/// twice (`network.allow`, before 009c378 refused repeats), is claimed
/// and admitted again from its stored spec by a server started on the
/// store (`JobSpec::from_stored`: the repeat read once) and runs to
/// `done`. Before, its re-admission failed reading the spec and the job
/// failed unrun.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_queued_with_a_repeated_destination_by_an_earlier_version_runs() {
    use paddock::store::Store as _;
    let home = Home::new();
    let job = spec(&home, "T-Q", TURN);
    let parsed: JobSpec = serde_json::from_value(job.clone()).unwrap();
    let mut stored = job;
    stored["network"] = serde_json::json!({"allow": ["127.0.0.1:9", "127.0.0.1:9"]});
    let mut queued = JobRecord::new("job-T-Q", &parsed, time::OffsetDateTime::now_utc());
    queued.status = JobStatus::Queued;
    home.store()
        .await
        .enqueue_job(&queued, &stored.to_string(), 0, None)
        .await
        .unwrap();
    let server = Server::start(&home, &[]).await;
    let ran = server.wait_for(&queued.id, is_final).await;
    assert_eq!(
        (ran.status, ran.reason),
        (JobStatus::Done, None),
        "{}",
        server.stderr()
    );
}

/// A queued job whose stored spec names a host path relative
/// (`repository.path`, as an earlier version that resolved stored paths
/// against the server's directory may have stored it, or as one written
/// into the store directly) fails when a server claims it, its reason
/// naming the field, the path and what to do, nothing of it run; a
/// spec's relative path read against whichever directory the claiming
/// server runs in names another file on each server. Before, the check of
/// what a submitted spec may name refused the relative path as outside
/// the server's allowed directories (which it may be or not), and every
/// server passed the job over: it stayed queued for ever, its reason
/// naming `allow_paths`, which no setting could satisfy.
#[tokio::test(flavor = "multi_thread")]
async fn a_queued_job_whose_stored_spec_names_a_relative_path_fails_naming_it() {
    use paddock::store::Store as _;
    let home = Home::new();
    let job = spec(&home, "T-R", TURN);
    let parsed: JobSpec = serde_json::from_value(job.clone()).unwrap();
    let mut stored = job;
    stored["repository"]["path"] = Value::from("T-R");
    let mut queued = JobRecord::new("job-T-R", &parsed, time::OffsetDateTime::now_utc());
    queued.status = JobStatus::Queued;
    home.store()
        .await
        .enqueue_job(&queued, &stored.to_string(), 0, None)
        .await
        .unwrap();
    let server = Server::start(&home, &[]).await;
    let mut ended = server.job(&queued.id).await;
    for _ in 0..600 {
        if ended.reason.is_some() || is_final(ended.status) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        ended = server.job(&queued.id).await;
    }
    let events = stored_events(&home, &queued.id).await;
    let (host, name) = crate::hosts::host_of(&home);
    assert_eq!(
        (
            ended.status,
            ended.reason,
            events,
            home.leftover_workspaces()
        ),
        (
            JobStatus::Failed,
            Some(format!(
                "claimed by host {name} (jobs directory {host}), job job-T-R could not be \
                 admitted again from its stored spec: its stored spec names repository.path \
                 T-R, a relative path, which no server can resolve: admission stores every \
                 path absolute, and nothing says which directory this one is relative to (a \
                 spec stored by an earlier version, or written into the store directly); \
                 submit the job again with the path absolute"
            )),
            vec![],
            Vec::<String>::new(),
        ),
        "{}",
        server.stderr()
    );
}

#[tokio::test]
async fn a_bad_spec_is_a_problem_with_the_cli_s_message_and_a_stable_code() {
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let mut unpriced = spec(&home, "T-1", TURN);
    unpriced["engine"]["model"] = Value::from("gpt-unpriced-9");
    let file = home.path().join("unpriced.json");
    std::fs::write(&file, unpriced.to_string()).unwrap();
    let cli = home.paddock(&["run", file.to_str().unwrap()], &[]).await;
    assert_eq!(cli.status.code(), Some(2));
    let cli_message = String::from_utf8_lossy(&cli.stderr)
        .trim_end()
        .strip_prefix("paddock: ")
        .unwrap()
        .to_owned();

    let resp = server.submit(&unpriced, 0).await;
    assert_eq!(
        (
            resp.status().as_u16(),
            resp.headers()["content-type"].to_str().unwrap().to_owned()
        ),
        (422, "application/problem+json".to_owned())
    );
    assert_eq!(
        body::<Value>(resp).await,
        serde_json::json!({
            "type": "urn:paddock:problem:bad_input",
            "title": "the job spec cannot run",
            "status": 422,
            "detail": cli_message,
            "code": "bad_input",
        })
    );

    let not_json = server
        .client
        .clone()
        .post(server.url("/v1/jobs"))
        .body("[ticket]\n")
        .send()
        .await
        .unwrap();
    assert_eq!(not_json.status(), 422);
    assert_eq!(
        body::<Value>(not_json).await["code"],
        Value::from("bad_input")
    );
    let missing = server.get("/v1/jobs/job-none").await;
    assert_eq!(
        (missing.status().as_u16(), body::<Value>(missing).await),
        (
            404,
            serde_json::json!({
                "type": "urn:paddock:problem:not_found",
                "title": "no such resource",
                "status": 404,
                "detail": "no job job-none",
                "code": "not_found",
            })
        )
    );
    let bad_filter = server.get("/v1/jobs?status=sleeping").await;
    assert_eq!(
        (
            bad_filter.status().as_u16(),
            body::<Value>(bad_filter).await["code"].clone()
        ),
        (400, Value::from("bad_request"))
    );
    // Nothing was recorded for the refused specs.
    assert_eq!(home.store().await.jobs(10).await.unwrap(), vec![]);
}

/// A cancel through the API of a queued job and of one this server runs
/// ends each `cancelled`, its reason and status event naming who asked
/// (the server's host and the API token), the running one's with when.
/// Before, the reasons were plain `cancelled while queued` and
/// `cancelled`, whoever asked.
#[tokio::test]
async fn cancel_a_queued_and_a_running_job() {
    let home = Home::new();
    let server = Server::start(&home, &["--max-concurrent-jobs", "1"]).await;
    let gate = home.path().join("never");
    let running = server
        .submit_ok(&spec(&home, "T-1", &gated(&gate)), 0)
        .await;
    let queued = server.submit_ok(&spec(&home, "T-2", TURN), 0).await;
    server.wait_for(&running, |s| s == JobStatus::Running).await;

    let by = format!(
        "{} (API token {}, scope admin)",
        super::hosts::host_of(&home).1,
        server.token_id
    );
    let queued_reason = format!("cancelled while queued, asked by {by}");
    let resp = server.cancel(&queued).await;
    assert_eq!(resp.status(), 202);
    let record: JobRecord = body(resp).await;
    assert_eq!(
        (record.status, record.reason.as_deref()),
        (JobStatus::Cancelled, Some(queued_reason.as_str()))
    );
    assert_eq!(server.job(&queued).await, record);

    assert_eq!(server.cancel(&running).await.status(), 202);
    let ended = server.wait_for(&running, is_final).await;
    let asked = home
        .store()
        .await
        .cancel_requested(&running)
        .await
        .unwrap()
        .unwrap();
    let at = asked
        .at
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    assert_eq!(
        (ended.status, ended.reason.as_deref(), asked.by.as_str()),
        (
            JobStatus::Cancelled,
            Some(format!("cancelled, asked by {by} at {at}").as_str()),
            by.as_str()
        )
    );
    let again = server.cancel(&running).await;
    assert_eq!(
        (
            again.status().as_u16(),
            body::<Value>(again).await["code"].clone()
        ),
        (409, Value::from("job_final"))
    );
    assert_eq!(server.cancel("job-none").await.status(), 404);
    // The queued job never ran: only its cancellation is on its stream.
    let events = stored_events(&home, &queued).await;
    assert_eq!(
        events.iter().map(|e| e.body.clone()).collect::<Vec<_>>(),
        vec![EventBody::Status {
            phase: Phase::Cancelled,
            detail: Some(queued_reason)
        }]
    );
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
}

/// A cancel through the API of a job a `paddock run` on the server's own
/// jobs directory runs is a 202 `requested`, the record the run left:
/// the server waits about a second for a claim in flight, in which the
/// run reads the request and ends `cancelled`, and the answer was a 409
/// `job_final` ("job … is cancelled") for the cancel that ended it.
#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_of_a_paddock_run_on_the_servers_own_host_is_accepted() {
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let spec = crate::hosts::waiting_job(&home, &home.path().join("never"));
    let run = home.spawn(&["run", "--json", spec.to_str().unwrap()]);
    let id = crate::hosts::started(&home).await;
    let resp = server.cancel(&id).await;
    let status = resp.status().as_u16();
    let answer: Value = body(resp).await;
    let out = run.wait_with_output().await.unwrap();
    let (host, name) = crate::hosts::host_of(&home);
    assert_eq!(
        (
            status,
            answer["cancel"].clone(),
            out.status.code(),
            record(&out).status
        ),
        (
            202,
            serde_json::json!({"state": "requested", "host": name, "host_id": host}),
            Some(5),
            JobStatus::Cancelled
        ),
        "{answer}"
    );
}

/// An allowed path that is not a directory is named as `paddock serve`
/// starts: every spec naming files there would be refused.
#[tokio::test]
async fn an_allowed_path_that_is_no_directory_is_named_at_start() {
    let home = Home::new();
    let missing = home.path().join("mistyped");
    let server = Server::start_allowing(
        &home,
        &["--allow-path", missing.to_str().unwrap()],
        &[],
        &[],
    )
    .await;
    let warnings: Vec<String> = server
        .stderr()
        .lines()
        .filter(|l| l.starts_with("paddock: warning:"))
        .map(str::to_owned)
        .collect();
    assert_eq!(
        warnings,
        vec![format!(
            "paddock: warning: allowed path {} (--allow-path, [serve] allow_paths) does not \
             exist: a submitted spec may name nothing under it until it is one",
            missing.display()
        )]
    );
}

/// An address `paddock serve` cannot listen on is said with where it came
/// from and what to do: a port in use names another process and
/// `--listen`, a host name the address to write (before, `listen on
/// 127.0.0.1:PORT: Address already in use (os error 98)` alone, and
/// `localhost:PORT` "invalid socket address syntax").
#[tokio::test]
async fn an_address_it_cannot_listen_on_is_said_with_its_fix() {
    let home = Home::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let port = addr.port();
    let in_use = home
        .paddock(&["serve", "--listen", &addr.to_string()], &[])
        .await;
    let by_name = home
        .paddock(&["serve", "--listen", &format!("localhost:{port}")], &[])
        .await;
    assert_eq!(
        (
            in_use.status.code(),
            stderr_of(&in_use)
                .lines()
                .last()
                .unwrap_or_default()
                .to_owned(),
            by_name.status.code(),
            stderr_of(&by_name)
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned(),
        ),
        (
            Some(2),
            format!(
                "paddock: listen on {addr} (--listen): Address already in use (os error 98): \
                 another process (another `paddock serve`?) listens on port {port} already: \
                 stop it, or give another address with --listen ADDR or [serve] listen in the \
                 config file (port 0 picks a free one)"
            ),
            Some(2),
            format!(
                "error: invalid value 'localhost:{port}' for '--listen <LISTEN>': \
                 `localhost:{port}`: host names are not looked up: write 127.0.0.1:{port} (or \
                 [::1]:{port})"
            ),
        )
    );
}

#[tokio::test]
async fn the_queue_runs_by_priority_within_its_concurrency_limit() {
    let home = Home::new();
    let server = Server::start(&home, &["--max-concurrent-jobs", "1"]).await;
    let gate = home.path().join("gate");
    let first = server
        .submit_ok(&spec(&home, "T-A", &gated(&gate)), 0)
        .await;
    server.wait_for(&first, |s| s == JobStatus::Running).await;
    let low = server.submit_ok(&spec(&home, "T-B", TURN), 0).await;
    let high = server.submit_ok(&spec(&home, "T-C", TURN), 5).await;
    let mid = server.submit_ok(&spec(&home, "T-D", TURN), 1).await;
    // Same ticket as `high`: never beside it.
    let high_again = server
        .submit_ok(&spec_on(&home, "T-C2", "T-C", TURN), 5)
        .await;
    std::fs::write(&gate, "").unwrap();
    let mut spans = Vec::new();
    for id in [&first, &low, &high, &mid, &high_again] {
        let record = server.wait_for(id, is_final).await;
        assert_eq!(record.status, JobStatus::Done, "{id}: {}", server.stderr());
        let started = stored_events(&home, id).await[0].at;
        spans.push((started, record.finished_at.unwrap(), id.clone()));
    }
    spans.sort();
    let order: Vec<&String> = spans.iter().map(|s| &s.2).collect();
    assert_eq!(order, vec![&first, &high, &high_again, &mid, &low]);
    let overlaps: Vec<(&String, &String)> = spans
        .windows(2)
        .filter(|w| w[1].0 < w[0].1)
        .map(|w| (&w[0].2, &w[1].2))
        .collect();
    assert_eq!(overlaps, Vec::<(&String, &String)>::new());

    let page: Value = body(server.get("/v1/jobs?status=done&limit=2").await).await;
    let newest = home.store().await.jobs(10).await.unwrap();
    assert_eq!(
        page,
        serde_json::json!({
            "jobs": [newest[0], newest[1]],
            "next_cursor": newest[1].id,
        })
    );
}

#[tokio::test]
async fn a_restart_marks_what_died_and_runs_what_was_queued() {
    let home = Home::new();
    let mark = home.path().join("engine-started");
    let server = Server::start(&home, &["--max-concurrent-jobs", "1"]).await;
    let body = format!("touch '{}'; sleep 60\n{TURN}", mark.display());
    let died = server.submit_ok(&spec(&home, "T-1", &body), 0).await;
    let waiting = server.submit_ok(&spec(&home, "T-2", TURN), 0).await;
    for _ in 0..600 {
        if mark.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(mark.exists(), "{}", server.stderr());
    nix::sys::signal::kill(server.pid(), nix::sys::signal::Signal::SIGKILL).unwrap();
    let mut killed = server;
    killed.child.wait().await.unwrap();
    assert_eq!(
        home.store()
            .await
            .job(&waiting)
            .await
            .unwrap()
            .unwrap()
            .status,
        JobStatus::Queued
    );

    let server = Server::start(&home, &["--max-concurrent-jobs", "1"]).await;
    // Queued again once, as another host's reclaim of it would have it.
    let next = failed_and_queued_again(&home, &server.job(&died).await, &server.stderr()).await;
    let ran = server.wait_for(&waiting, is_final).await;
    assert_eq!(ran.status, JobStatus::Done, "{}", server.stderr());
    // The next attempt runs the same 60 s script: cancelled here.
    let again = &next[0].id;
    server.cancel(again).await;
    let cancelled = server.wait_for(again, is_final).await;
    assert_eq!(cancelled.status, JobStatus::Cancelled);
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
}

/// Asserts that `dead`, attempt 1 of ticket T-1, was failed as a dead job
/// and queued again once, as attempt 2 (`stderr`: the server's, shown on
/// failure); that attempt's record.
async fn failed_and_queued_again(home: &Home, dead: &JobRecord, stderr: &str) -> Vec<JobRecord> {
    let next: Vec<JobRecord> = home
        .store()
        .await
        .jobs(10)
        .await
        .unwrap()
        .into_iter()
        .filter(|j| j.ticket_id == "T-1" && j.id != dead.id)
        .collect();
    assert_eq!(
        (
            dead.status,
            dead.reason.clone(),
            next.iter().map(|j| j.attempt).collect::<Vec<_>>()
        ),
        (
            JobStatus::Failed,
            Some(format!(
                "{}; queued again as job {} (attempt 2)",
                paddock::reaper::REASON,
                next.first().map(|j| j.id.as_str()).unwrap_or("?")
            )),
            vec![2]
        ),
        "{stderr}"
    );
    next
}

/// A 400 `bad_request` problem with `detail`, as the answer's status and
/// body.
fn bad_request(detail: &str) -> (u16, Value) {
    (
        400,
        serde_json::json!({
            "type": "urn:paddock:problem:bad_request",
            "title": "the request is malformed",
            "status": 400,
            "detail": detail,
            "code": "bad_request",
        }),
    )
}

/// Whether `server` runs a job now (`GET /v1/discover`'s capacity).
async fn runs_one(server: &Server) -> bool {
    let found: Value = body(server.get("/v1/discover").await).await;
    found["capacity"]["running"] == 1
}

#[tokio::test]
async fn a_server_killed_mid_job_has_its_job_reaped_by_a_live_server_on_the_same_jobs_directory() {
    // Two servers on one home: one SQLite file, one jobs directory, so one
    // host to the store. The one running the job is killed with SIGKILL;
    // the other finds the job's lease abandoned at its next pass and
    // reaps it as a restart would, without waiting for one.
    let home = Home::new();
    super::hosts::hosts_config(&home, "heartbeat_secs = 1\nheartbeat_ttl_secs = 3");
    let args = ["--max-concurrent-jobs", "1"];
    let (one, two) = (
        Server::start(&home, &args).await,
        Server::start(&home, &args).await,
    );
    let mark = home.path().join("engine-started");
    let gate = home.path().join("gate");
    let body = format!(
        "touch '{}'\ni=0; while [ ! -e '{}' ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n{TURN}",
        mark.display(),
        gate.display()
    );
    let died = one.submit_ok(&spec(&home, "T-1", &body), 0).await;
    for _ in 0..600 {
        if mark.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(mark.exists(), "{}{}", one.stderr(), two.stderr());
    let (mut dead, alive) = if runs_one(&one).await {
        (one, two)
    } else {
        (two, one)
    };
    nix::sys::signal::kill(dead.pid(), nix::sys::signal::Signal::SIGKILL).unwrap();
    dead.child.wait().await.unwrap();
    let ended = alive.wait_for(&died, is_final).await;
    let next = failed_and_queued_again(&home, &ended, &alive.stderr()).await;
    // Its next attempt runs on the live server.
    std::fs::write(&gate, "").unwrap();
    let ran = alive.wait_for(&next[0].id, is_final).await;
    assert_eq!(ran.status, JobStatus::Done, "{}", alive.stderr());
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
}

#[tokio::test]
async fn sigterm_drains_cancelling_what_outlives_the_grace() {
    let home = Home::new();
    let server = Server::start(
        &home,
        &["--max-concurrent-jobs", "1", "--drain-grace-secs", "1"],
    )
    .await;
    let gate = home.path().join("never");
    let running = server
        .submit_ok(&spec(&home, "T-1", &gated(&gate)), 0)
        .await;
    let queued = server.submit_ok(&spec(&home, "T-2", TURN), 0).await;
    server.wait_for(&running, |s| s == JobStatus::Running).await;
    nix::sys::signal::kill(server.pid(), nix::sys::signal::Signal::SIGTERM).unwrap();
    let mut server = server;
    let status = tokio::time::timeout(Duration::from_secs(60), server.child.wait())
        .await
        .expect("serve did not stop")
        .unwrap();
    assert_eq!(status.code(), Some(0), "{}", server.stderr());
    let store = home.store().await;
    let ended = store.job(&running).await.unwrap().unwrap();
    assert_eq!(
        (
            ended.status,
            ended.reason.as_deref(),
            store.job(&queued).await.unwrap().unwrap().status
        ),
        (JobStatus::Cancelled, Some("cancelled"), JobStatus::Queued)
    );
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
}

/// The config file's `host_profile` that resolves to nothing (every
/// submission would be refused) stops `paddock serve` at start naming the
/// key and the file, as `paddock run` names it, and so does its `profile`;
/// an allowed profile that resolves to nothing is a warning at start,
/// once however many times the flags and the file name it. Before, the
/// server started with the host profile unresolved and said
/// nothing of the allowed one, and the `profile` error named no file.
#[tokio::test]
async fn the_config_files_profiles_and_the_allowed_ones_are_checked_at_start() {
    let home = Home::new();
    let file = home.path().join("config/paddock/config.toml");
    let mut said = Vec::new();
    for key in ["host_profile", "profile"] {
        home.write_config(&format!("{key} = \"ci-box\"\n"));
        let out = home
            .paddock(&["serve", "--listen", "127.0.0.1:0"], &[])
            .await;
        said.push((out.status.code(), stderr_of(&out)));
    }
    let unknown = "host profile `ci-box` is neither in the store nor a preset (constrained-local, \
                   remote-full); save it with `paddock profile add FILE` or name a profile file";
    assert_eq!(
        said,
        ["host_profile", "profile"].map(|key| (
            Some(2),
            format!(
                "paddock: {key} in the config file {}: {unknown}\n",
                file.display()
            )
        ))
    );
    home.write_config("");
    let warned = format!(
        "paddock: warning: allowed profile (--allow-profile, [serve] allow_profiles): \
         {unknown}: a submitted spec naming it is refused until it resolves"
    );
    let server = Server::start(&home, &["--allow-profile", "ci-box"]).await;
    assert_eq!(
        server
            .stderr()
            .lines()
            .filter(|l| !l.starts_with("paddock: serving on "))
            .collect::<Vec<_>>(),
        vec![warned.as_str()]
    );
    drop(server);
    // Named by the file and twice by flags: warned about once (before,
    // once for each time it was named).
    home.write_config("[serve]\nallow_profiles = [\"ci-box\"]\n");
    let server = Server::start(
        &home,
        &["--allow-profile", "ci-box", "--allow-profile", "ci-box"],
    )
    .await;
    assert_eq!(
        server
            .stderr()
            .lines()
            .filter(|l| !l.starts_with("paddock: serving on "))
            .collect::<Vec<_>>(),
        vec![warned.as_str()]
    );
}

/// Ctrl-C says the server is stopping and for how long running jobs may
/// go on; a second Ctrl-C cancels them at once, and the server stops with
/// the job concluded `cancelled`, nothing left behind. Before, the drain
/// said nothing, and a second Ctrl-C was swallowed: the server waited out
/// the whole grace (here 600 s).
#[tokio::test]
async fn a_second_ctrl_c_cancels_the_running_jobs_at_once() {
    let home = Home::new();
    let server = Server::start(&home, &["--drain-grace-secs", "600"]).await;
    let gate = home.path().join("never");
    let running = server
        .submit_ok(&spec(&home, "T-1", &gated(&gate)), 0)
        .await;
    server.wait_for(&running, |s| s == JobStatus::Running).await;
    let interrupt =
        || nix::sys::signal::kill(server.pid(), nix::sys::signal::Signal::SIGINT).unwrap();
    interrupt();
    let said = |line: &str| server.stderr().lines().any(|l| l == line);
    let stopping =
        "paddock: stopping: no job is claimed any more; running jobs get up to 600 s to \
                    finish (drain_grace_secs), then are cancelled; Ctrl-C again (or SIGTERM) \
                    cancels them now";
    for _ in 0..200 {
        if said(stopping) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    interrupt();
    let mut server = server;
    let status = tokio::time::timeout(Duration::from_secs(30), server.child.wait())
        .await
        .expect("serve did not stop on the second Ctrl-C")
        .unwrap();
    let said: Vec<String> = server
        .stderr()
        .lines()
        .filter(|l| !l.starts_with("paddock: serving on "))
        .map(str::to_owned)
        .collect();
    let ended = home.store().await.job(&running).await.unwrap().unwrap();
    assert_eq!(
        (status.code(), said, ended.status, ended.reason.as_deref()),
        (
            Some(0),
            vec![
                stopping.to_owned(),
                "paddock: stopping now: cancelling the running jobs".to_owned(),
                "paddock: stopped".to_owned(),
            ],
            JobStatus::Cancelled,
            Some("cancelled")
        )
    );
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
}

#[tokio::test]
async fn a_job_whose_budget_is_spent_is_held_at_submission_as_the_cli_holds_it() {
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let mut spent = spec(&home, "T-1", TURN);
    spent["budget"]["max_usd"] = Value::from(0.0);
    let file = home.path().join("spent.json");
    std::fs::write(&file, spent.to_string()).unwrap();
    let cli = home
        .paddock(&["run", "--json", file.to_str().unwrap()], &[])
        .await;
    assert_eq!(cli.status.code(), Some(3), "{}", stderr_of(&cli));
    let cli_reason = record(&cli).reason;

    let resp = server.submit(&spent, 0).await;
    assert_eq!(resp.status(), 202);
    let held: JobRecord = body(resp).await;
    assert_eq!(
        (held.status, held.reason.clone()),
        (JobStatus::Held, cli_reason.clone())
    );
    // It never runs: its record stays, its events say why.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(server.job(&held.id).await, held);
    let reason = cli_reason.unwrap();
    assert_eq!(
        stored_events(&home, &held.id)
            .await
            .into_iter()
            .map(|e| e.body)
            .collect::<Vec<_>>(),
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
    );
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test]
async fn discover_healthz_and_readyz_describe_this_host() {
    use paddock::server::{Discovery, Readiness};
    let home = Home::new();
    let server = Server::start(&home, &["--max-concurrent-jobs", "3"]).await;
    let sandbox = paddock::rung::probe_sandbox(Path::new(env!("CARGO_BIN_EXE_paddock")));
    let sandbox_detail = sandbox
        .clone()
        .unwrap_or_else(|| "a sandbox starts on this host".into());
    let engines: Vec<Value> = paddock::engines::KINDS
        .iter()
        .map(|&kind| {
            let pin = paddock::engines::pins::pin(kind);
            serde_json::json!({
                "kind": kind.as_str(),
                "binary": pin.binary,
                "package": pin.package,
                "pinned_version": pin.version,
                "path": which::which(pin.binary).ok().map(|p| p.display().to_string()),
            })
        })
        .collect();
    let prices = paddock::broker::PriceTable::effective(None).unwrap();
    let presets: Vec<Value> = paddock::policy::profile::PRESETS
        .iter()
        .map(|(id, _)| serde_json::json!({"id": id, "source": "preset"}))
        .collect();
    let discovered: Discovery = body(server.get("/v1/discover").await).await;
    assert_eq!(
        serde_json::to_value(discovered).unwrap(),
        serde_json::json!({
            "version": env!("CARGO_PKG_VERSION"),
            "engines": engines,
            "rungs": [
                {"name": "process", "supported": true, "detail": "always available (no isolation)"},
                {"name": "sandbox", "supported": sandbox.is_none(), "detail": sandbox_detail},
            ],
            "profiles": presets,
            "prices": {"version": prices.version, "sources": prices.sources},
            "capacity": {"max_concurrent_jobs": 3, "running": 0, "queued": 0, "draining": false},
            "lanes": [],
        })
    );

    let health = server.get("/healthz").await;
    assert_eq!(
        (health.status().as_u16(), body::<Value>(health).await),
        (200, serde_json::json!({"status": "ok"}))
    );
    let ready = server.get("/readyz").await;
    let status = ready.status().as_u16();
    let ready: Readiness = body(ready).await;
    let db = std::fs::canonicalize(home.db()).unwrap();
    let mut checks = vec![serde_json::json!({
        "name": "store", "ok": true, "required": true,
        "detail": format!("{} answers", db.display()),
    })];
    for e in &engines {
        let path = e["path"].as_str();
        checks.push(serde_json::json!({
            "name": format!("engine {}", e["kind"].as_str().unwrap()),
            "ok": path.is_some(),
            "required": false,
            "detail": match path {
                Some(p) => format!("{p} (pinned {})", e["pinned_version"].as_str().unwrap()),
                None => unreachable!("the test's PATH has the engines"),
            },
        }));
    }
    checks.push(serde_json::json!({
        "name": "sandbox", "ok": sandbox.is_none(), "required": false, "detail": sandbox_detail,
    }));
    assert_eq!(
        (status, serde_json::to_value(ready).unwrap()),
        (200, serde_json::json!({"ready": true, "checks": checks}))
    );
}

#[tokio::test]
async fn dispose_cancels_waits_and_removes_the_artifacts() {
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let finished = server.submit_ok(&spec(&home, "T-1", TURN), 0).await;
    let gate = home.path().join("never");
    let running = server
        .submit_ok(&spec(&home, "T-2", &gated(&gate)), 0)
        .await;
    server.wait_for(&finished, is_final).await;
    server.wait_for(&running, |s| s == JobStatus::Running).await;
    let artifacts = |id: &str| home.data().join("artifacts").join(id);
    assert!(artifacts(&finished).exists());

    let delete = |id: String| {
        let url = server.url(&format!("/v1/jobs/{id}"));
        let client = server.client.clone();
        async move { client.delete(url).send().await.unwrap() }
    };
    let resp = delete(running.clone()).await;
    assert_eq!(resp.status(), 200);
    let disposed: JobRecord = body(resp).await;
    let asked = home
        .store()
        .await
        .cancel_requested(&running)
        .await
        .unwrap()
        .unwrap();
    let by = format!(
        "{} (API token {}, scope admin)",
        super::hosts::host_of(&home).1,
        server.token_id
    );
    let at = asked
        .at
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    assert_eq!(
        (disposed.status, disposed.reason, asked.by.clone()),
        (
            JobStatus::Cancelled,
            Some(format!("cancelled, asked by {by} at {at}")),
            by
        )
    );
    let before = server.job(&finished).await;
    let resp = delete(finished.clone()).await;
    assert_eq!(resp.status(), 200);
    let done: JobRecord = body(resp).await;
    // The record says it was disposed of, and names no patch (its file is
    // gone); before, it still named the removed `patch.diff`.
    let at = done.disposed_at.expect("disposed_at");
    assert_eq!(
        done,
        JobRecord {
            patch_path: None,
            disposed_at: Some(at),
            ..before.clone()
        }
    );
    assert_eq!(
        (
            before.status,
            before.patch_path.is_some(),
            artifacts(&running).exists(),
            artifacts(&finished).exists(),
            delete("job-none".into()).await.status().as_u16()
        ),
        (JobStatus::Done, true, false, false, 404)
    );
    // The records stay for accounting.
    assert_eq!(server.job(&finished).await, done);
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
    // `paddock diff` and `paddock apply` of a disposed job say it was
    // disposed of (bad input, 2); before, they said its patch file was
    // gone, "or removed by hand".
    let at = at
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let said = format!(
        "paddock: job {finished} was disposed of at {at} (DELETE /v1/jobs/{finished}): its \
         artifacts, its patch among them, were removed; its record, events and ledger rows stay"
    );
    let diff = home.paddock(&["diff", &finished], &[]).await;
    let apply = home.paddock(&["apply", &finished], &[]).await;
    let show = home.paddock(&["show", &finished], &[]).await;
    // `paddock publish` too (it said the bundle was gone and the patch
    // "kept", which the dispose had removed), and writes nothing.
    let publish = home.paddock(&["publish", &finished], &[]).await;
    assert_eq!(
        (
            publish.status.code(),
            stderr_of(&publish),
            home.data().join("artifacts").join(&finished).exists()
        ),
        (
            Some(2),
            format!(
                "paddock: job {finished}: nothing to publish: it was disposed of at {at} \
                 (DELETE /v1/jobs/{finished}): its artifacts, its branch's bundle and patch \
                 among them, were removed; the job is unchanged (run its spec again)\n"
            ),
            false
        )
    );
    assert_eq!(server.job(&finished).await, done);
    assert_eq!(
        (
            diff.status.code(),
            stderr_of(&diff).trim_end().to_owned(),
            apply.status.code(),
            stderr_of(&apply).trim_end().to_owned(),
            String::from_utf8_lossy(&show.stdout)
                .lines()
                .filter(|l| l.contains("patch:") || l.contains("disposed:"))
                .map(str::to_owned)
                .collect::<Vec<_>>(),
        ),
        (
            Some(2),
            said.clone(),
            Some(2),
            said,
            vec![format!(
                "  disposed: {at} (its artifacts, the patch among them, removed)"
            )],
        )
    );
}

#[tokio::test]
async fn the_openapi_document_is_served_and_names_every_route() {
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let served: Value = body(server.get("/openapi.json").await).await;
    assert_eq!(
        served,
        serde_json::to_value(paddock::server::openapi_document()).unwrap()
    );
    let routes: Vec<(String, Vec<String>)> = served["paths"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(path, ops)| {
            (
                path.clone(),
                ops.as_object().unwrap().keys().cloned().collect(),
            )
        })
        .collect();
    let expected: Vec<(String, Vec<String>)> = [
        ("/healthz", &["get"][..]),
        ("/metrics", &["get"]),
        ("/openapi.json", &["get"]),
        ("/readyz", &["get"]),
        ("/v1/discover", &["get"]),
        ("/v1/jobs", &["get", "post"]),
        ("/v1/jobs/{id}", &["delete", "get"]),
        ("/v1/jobs/{id}/cancel", &["post"]),
        ("/v1/jobs/{id}/events", &["get"]),
        ("/v1/ledger", &["get"]),
        ("/v1/turns", &["post"]),
        ("/v1/usage", &["get"]),
    ]
    .iter()
    .map(|(p, m)| (p.to_string(), m.iter().map(|m| m.to_string()).collect()))
    .collect();
    assert_eq!(
        (served["openapi"].clone(), routes),
        (Value::from("3.1.0"), expected.clone())
    );
    // Every documented route is routed: none answers the fallback's
    // "no route" problem.
    let client = server.client.clone();
    let mut unrouted = Vec::new();
    for (path, methods) in &expected {
        for method in methods {
            let url = server.url(&path.replace("{id}", "job-none"));
            let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let resp = client
                .request(method.clone(), url)
                .body("{}")
                .send()
                .await
                .unwrap();
            let text = resp.text().await.unwrap();
            if text.contains("no route") {
                unrouted.push(format!("{method} {path}"));
            }
        }
    }
    assert_eq!(unrouted, Vec::<String>::new());

    // Every route but health: 401 without a token (or with a revoked or
    // made-up one), 403 for a read token on what needs submit.
    let anonymous = reqwest::Client::new();
    let reader = client_with(&token(&home, "read").await);
    let forged = client_with("pdk-api-nothing-here");
    let mut answers = Vec::new();
    for (path, methods) in &expected {
        for method in methods {
            let url = server.url(&path.replace("{id}", "job-none"));
            let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let mut codes = Vec::new();
            for client in [&anonymous, &forged, &reader] {
                let resp = client
                    .request(method.clone(), &url)
                    .body("{}")
                    .send()
                    .await
                    .unwrap();
                codes.push(resp.status().as_u16());
            }
            answers.push((format!("{method} {path}"), codes));
        }
    }
    let want = |route: &str| -> Vec<u16> {
        match route {
            "GET /healthz" | "GET /readyz" => vec![200, 200, 200],
            "POST /v1/jobs"
            | "DELETE /v1/jobs/{id}"
            | "POST /v1/jobs/{id}/cancel"
            | "POST /v1/turns" => vec![401, 401, 403],
            "GET /v1/jobs/{id}" | "GET /v1/jobs/{id}/events" => vec![401, 401, 404],
            // `by` is required.
            "GET /v1/usage" => vec![401, 401, 400],
            _ => vec![401, 401, 200],
        }
    };
    let expected_answers: Vec<(String, Vec<u16>)> = answers
        .iter()
        .map(|(route, _)| (route.clone(), want(route)))
        .collect();
    assert_eq!(answers, expected_answers);
    // The document says what the walk saw: each guarded operation names
    // the scope it needs and lists its 401, 403 and 503 problems; each
    // with input lists 400.
    let documented: Vec<(String, Value, Vec<String>)> = expected
        .iter()
        .flat_map(|(path, methods)| {
            let served = &served;
            methods.iter().map(move |method| {
                let op = &served["paths"][path][method];
                let problems = op["responses"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .filter(|(_, r)| r["content"].get("application/problem+json").is_some())
                    .map(|(status, _)| status.clone())
                    .filter(|s| ["400", "401", "403", "503"].contains(&s.as_str()))
                    .collect();
                (
                    format!("{} {path}", method.to_uppercase()),
                    op["security"][0]["bearer"][0].clone(),
                    problems,
                )
            })
        })
        .collect();
    let with = |codes: &[&str]| codes.iter().map(|c| c.to_string()).collect::<Vec<_>>();
    let expected_documented: Vec<(String, Value, Vec<String>)> = answers
        .iter()
        .map(|(route, codes)| {
            let scope = match codes[2] {
                403 => Value::from("submit"),
                _ if codes[0] == 401 => Value::from("read"),
                _ => Value::Null,
            };
            let problems = match route.as_str() {
                "GET /healthz" | "GET /readyz" => with(&[]),
                "GET /metrics" | "GET /openapi.json" | "GET /v1/discover" => {
                    with(&["401", "403", "503"])
                }
                _ => with(&["400", "401", "403", "503"]),
            };
            (route.clone(), scope, problems)
        })
        .collect();
    assert_eq!(documented, expected_documented);
    let metrics = server.get("/metrics").await.text().await.unwrap();
    let gauges: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("paddock_queue_depth ") || l.starts_with("paddock_jobs{"))
        .collect();
    let mut want = vec!["paddock_queue_depth 0".to_owned()];
    want.extend(
        JobStatus::ALL
            .iter()
            .map(|s| format!("paddock_jobs{{state=\"{}\"}} 0", s.as_str())),
    );
    let mut gauges: Vec<String> = gauges.into_iter().map(str::to_owned).collect();
    gauges.sort();
    want.sort();
    assert_eq!(gauges, want, "{metrics}");
}

#[tokio::test]
async fn every_final_record_is_posted_to_the_webhook_signed() {
    let home = Home::new();
    let (hook, received) = hook_receiver().await;
    let secret = "whsec-test-0123456789";
    let server = Server::start_env(
        &home,
        &[
            "--webhook-url",
            &hook,
            "--webhook-secret",
            "env:PADDOCK_TEST_HOOK_SECRET",
        ],
        &[("PADDOCK_TEST_HOOK_SECRET", secret)],
    )
    .await;
    let id = server.submit_ok(&spec(&home, "T-1", TURN), 0).await;
    let record = server.wait_for(&id, is_final).await;
    assert_one_signed_delivery(&server, &received, secret, record).await;
}

/// A ledger row of job `job` (as the broker records one).
fn call(job: &str, seq: u64, model: &str, cost_micros: i64) -> paddock_protocol::ledger::ModelCall {
    paddock_protocol::ledger::ModelCall {
        job_id: job.to_owned(),
        attempt: 1,
        seq,
        provider: "openai".into(),
        requested_model: model.into(),
        served_model: Some(model.into()),
        tokens: paddock_protocol::TokenUsage {
            input_tokens: 100 * seq,
            output_tokens: 10,
            ..Default::default()
        },
        ttft_ms: Some(5),
        duration_ms: 20,
        status: paddock_protocol::ledger::CallStatus::Ok,
        http_status: Some(200),
        error: None,
        estimated: false,
        price_version: "test".into(),
        cost_micros,
        started_at: time::OffsetDateTime::now_utc(),
    }
}

#[tokio::test]
async fn usage_and_the_ledger_are_served_as_the_cli_reports_them() {
    use paddock::store::Store as _;
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let a = server.submit_ok(&spec(&home, "T-1", TURN), 0).await;
    let b = server.submit_ok(&spec(&home, "T-2", TURN), 0).await;
    server.wait_for(&a, is_final).await;
    server.wait_for(&b, is_final).await;
    let store = home.store().await;
    let recorded = vec![
        call(&a, 1, "gpt-5.5", 1_000),
        call(&b, 1, "gpt-5.5-mini", 200),
        call(&a, 2, "gpt-5.5", 3_000),
    ];
    for c in &recorded {
        store.insert_model_call(c).await.unwrap();
    }
    let get = |path: String| {
        let client = server.client.clone();
        let url = server.url(&path);
        async move { client.get(url).send().await.unwrap() }
    };
    let cli = |args: &'static [&'static str]| {
        let home = &home;
        async move {
            let out = home.paddock(args, &[]).await;
            assert!(out.status.success(), "{}", stderr_of(&out));
            serde_json::from_slice::<Value>(&out.stdout).unwrap()
        }
    };
    // The server's answer is the CLI's, and it adds up.
    let by_model: Value = body(get("/v1/usage?by=model".into()).await).await;
    assert_eq!(by_model, cli(&["usage", "--by", "model", "--json"]).await);
    let rollups: Vec<(String, u64, i64)> = by_model["rollups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_owned(),
                r["calls"].as_u64().unwrap(),
                r["cost_micros"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        (rollups, by_model["total"]["cost_micros"].clone()),
        (
            vec![
                ("gpt-5.5".to_owned(), 2, 4_000),
                ("gpt-5.5-mini".to_owned(), 1, 200)
            ],
            Value::from(4_200)
        )
    );
    // Two pages of the ledger, in the order recorded, then an empty one
    // that gives the same cursor back.
    let first: paddock::ledger::LedgerPage = body(get("/v1/ledger?limit=2".into()).await).await;
    let second: paddock::ledger::LedgerPage =
        body(get(format!("/v1/ledger?limit=2&cursor={}", first.next_cursor)).await).await;
    let last: paddock::ledger::LedgerPage =
        body(get(format!("/v1/ledger?cursor={}", second.next_cursor)).await).await;
    let mut served = first.calls.clone();
    served.extend(second.calls.clone());
    assert_eq!(
        (
            served,
            first.more,
            second.more,
            last.calls.len(),
            &last.next_cursor
        ),
        (recorded, true, false, 0, &second.next_cursor)
    );
    assert_eq!(
        serde_json::to_value(&first).unwrap(),
        cli(&["usage", "--ledger", "--limit", "2"]).await
    );
    // Bad input is a problem, as the CLI's is an error.
    let mut bad = Vec::new();
    for path in [
        "/v1/usage?by=week",
        "/v1/ledger?cursor=nope",
        "/v1/ledger?limit=0",
    ] {
        let resp = get(path.to_owned()).await;
        let status = resp.status().as_u16();
        let problem: Value = body(resp).await;
        bad.push((status, problem["code"].as_str().unwrap().to_owned()));
    }
    assert_eq!(
        bad,
        vec![
            (400, "bad_request".to_owned()),
            (400, "bad_request".to_owned()),
            (400, "bad_request".to_owned())
        ]
    );
}

#[tokio::test]
async fn log_format_json_writes_one_json_object_per_log_event() {
    let home = Home::new();
    let server = Server::start_env(
        &home,
        &["--log-format", "json"],
        &[("PADDOCK_LOG", "paddock=info")],
    )
    .await;
    // A refused request is logged at info with its path.
    let refused = reqwest::Client::new()
        .get(server.url("/v1/jobs"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let mut seen = None;
    for _ in 0..50 {
        seen = server
            .stderr()
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|v| v["fields"]["message"] == "refused a request");
        if seen.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let seen = seen.unwrap_or_else(|| panic!("no JSON log line: {}", server.stderr()));
    assert_eq!(
        (
            seen["level"].clone(),
            seen["fields"]["path"].clone(),
            seen["target"].clone()
        ),
        (
            Value::from("INFO"),
            Value::from("/v1/jobs"),
            Value::from("paddock::server::auth")
        )
    );
}

#[tokio::test]
async fn a_server_takes_only_the_jobs_of_its_lanes() {
    let home = Home::new();
    home.write_config("[[serve.lanes]]\ntask_types = [\"bug\"]\n");
    let server = Server::start(&home, &[]).await;
    let mut chore = spec(&home, "T-1", TURN);
    chore["ticket"]["type"] = Value::from("chore");
    let mut bug = spec(&home, "T-2", TURN);
    bug["ticket"]["type"] = Value::from("bug");
    let chore = server.submit_ok(&chore, 9).await;
    let bug = server.submit_ok(&bug, 0).await;
    let ran = server.wait_for(&bug, is_final).await;
    let discovered: Value = body(server.get("/v1/discover").await).await;
    assert_eq!(
        (
            ran.status,
            server.job(&chore).await.status,
            discovered["lanes"].clone(),
            discovered["capacity"]["queued"].clone()
        ),
        (
            JobStatus::Done,
            JobStatus::Queued,
            serde_json::json!([{"task_types": ["bug"], "projects": []}]),
            Value::from(1)
        ),
        "{}",
        server.stderr()
    );
}

#[tokio::test]
async fn the_default_profile_s_slots_are_the_queue_s_cap() {
    let home = Home::new();
    home.write_config("profile = \"remote-full\"\n");
    let server = Server::start(&home, &[]).await;
    let discovered: Value = body(server.get("/v1/discover").await).await;
    // remote-full's max_concurrent_jobs, not the default 2.
    assert_eq!(
        discovered["capacity"]["max_concurrent_jobs"],
        Value::from(8),
        "{}",
        server.stderr()
    );
}

#[tokio::test]
async fn a_job_s_own_webhook_gets_its_final_record_signed() {
    let home = Home::new();
    let (hook, received) = hook_receiver().await;
    let mut with_hook = spec(&home, "T-1", TURN);
    with_hook["results"]["webhook_url"] = Value::from(hook.clone());
    let mut bad_hook = spec(&home, "T-2", TURN);
    bad_hook["results"]["webhook_url"] = Value::from("ftp://hooks.example/");

    // Without a webhook secret the server cannot sign: refused. (The
    // receiver's host is one submitted specs may name.)
    let unsigned = Server::start(&home, &["--allow-host", "127.0.0.1"]).await;
    let refused = unsigned.submit(&with_hook, 0).await;
    let status = refused.status().as_u16();
    let problem: Value = body(refused).await;
    assert_eq!(
        (status, problem["code"].clone(), problem["detail"].clone()),
        (
            422,
            Value::from("bad_input"),
            Value::from("results.webhook_url: this server has no webhook secret to sign deliveries with (start it with --webhook-secret or [serve] webhook_secret)")
        )
    );
    drop(unsigned);

    let secret = "whsec-job-0123456789";
    let server = Server::start_env(
        &home,
        &[
            "--webhook-secret",
            "env:PADDOCK_TEST_HOOK_SECRET",
            "--allow-host",
            "127.0.0.1",
        ],
        &[("PADDOCK_TEST_HOOK_SECRET", secret)],
    )
    .await;
    let bad = server.submit(&bad_hook, 0).await;
    let status = bad.status().as_u16();
    let problem: Value = body(bad).await;
    let detail = problem["detail"].as_str().unwrap().to_owned();
    assert_eq!(
        (
            status,
            problem["code"].clone(),
            detail.contains("results.webhook_url")
                && detail.contains("`ftp://hooks.example/` must start with http:// or https://")
        ),
        (422, Value::from("bad_input"), true),
        "{detail}"
    );
    let id = server.submit_ok(&with_hook, 0).await;
    let record = server.wait_for(&id, is_final).await;
    assert_one_signed_delivery(&server, &received, secret, record).await;
}

/// The deliveries a webhook receiver got: each one's signature and body.
pub(crate) type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// A webhook receiver on 127.0.0.1: its URL (`/hook`) and what it got.
pub(crate) async fn hook_receiver() -> (String, Received) {
    let received: Received = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    let sink = received.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let sink = sink.clone();
                async move {
                    let signature = headers["paddock-signature"].to_str().unwrap().to_owned();
                    sink.lock().unwrap().push((signature, body.to_vec()));
                    axum::http::StatusCode::NO_CONTENT
                }
            },
        ),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (hook, received)
}

/// Waits (up to 10 s) for a delivery; asserts exactly one came, signed
/// with `secret`, carrying `record`.
pub(crate) async fn assert_one_signed_delivery(
    server: &Server,
    received: &Received,
    secret: &str,
    record: JobRecord,
) {
    for _ in 0..100 {
        if !received.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let got = received.lock().unwrap().clone();
    assert_eq!(got.len(), 1, "{}", server.stderr());
    let (signature, body) = &got[0];
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let key = paddock::secret::Secret::new(secret.to_owned());
    assert_eq!(
        (
            paddock::server::webhooks::verify(&key, signature, body, now, 300).is_ok(),
            serde_json::from_slice::<JobRecord>(body).unwrap(),
        ),
        (true, record)
    );
}

/// What a `submit` token may make the server read or send. The attack:
/// a submitted spec names one of the server's files as its upstream key
/// and its own listener as the upstream's `base_url`, so the broker reads
/// the file and sends it there as a bearer token. Refused (422
/// `bad_input`, naming the field and the setting that would allow it),
/// nothing recorded, nothing sent; so are a path outside the allowed
/// directories, an allowed key sent to an unlisted host, and the same
/// through `POST /v1/turns`. With the reference and the host allowed the
/// spec is accepted. Before, the listener received the file's text.
#[tokio::test]
async fn a_submitted_spec_names_only_what_the_server_allows_on_its_host() {
    let home = Home::new();
    let secret = home.path().join("server-secret");
    std::fs::write(&secret, "TOPSECRET-of-the-server\n").unwrap();
    // The submitter's own listener, in the attack.
    let base = "http://127.0.0.1:9";
    let outside = tempfile::tempdir().unwrap();
    let server = Server::start_env(
        &home,
        &[
            "--allow-ref",
            "env:OPENAI_API_KEY",
            "--allow-host",
            "api.openai.com",
        ],
        &[("OPENAI_API_KEY", "sk-test-of-the-server")],
    )
    .await;
    let job = spec(&home, "T-1", TURN);
    let with = |key: &str, base_url: Option<&str>| {
        let mut s = job.clone();
        s["upstream"] = serde_json::json!({"provider": "openai", "key": key});
        if let Some(url) = base_url {
            s["upstream"]["base_url"] = Value::from(url);
        }
        s
    };
    let refused = |detail: String| {
        serde_json::json!({
            "type": "urn:paddock:problem:bad_input",
            "title": "the job spec cannot run",
            "status": 422,
            "detail": detail,
            "code": "bad_input",
        })
    };
    let key = format!("file:{}", secret.display());
    let v1 = format!("{base}/v1");
    let mut out_of_bounds = spec(&home, "T-2", TURN);
    out_of_bounds["repository"]["path"] = Value::from(outside.path().display().to_string());
    let cases = [
        (
            with(&key, Some(&v1)),
            format!(
                "upstream.key: `{key}` names a secret of this server, which a submitted spec may \
                 name only when the server allows it (`[serve] allow_refs` or `paddock serve \
                 --allow-ref {key}`)"
            ),
        ),
        (
            with("env:OPENAI_API_KEY", Some(&v1)),
            format!(
                "upstream.base_url: `{v1}` is a place this server would connect to (with its \
                 credentials, where the spec names one), and 127.0.0.1 is not a host a submitted \
                 spec may have it connect to; the server allows a host with `[serve] allow_hosts` \
                 or `paddock serve --allow-host 127.0.0.1`"
            ),
        ),
        (
            out_of_bounds,
            format!(
                "repository.path: {} is a path on this server outside the directories a \
                 submitted spec may name ({}); the server allows a directory with `[serve] \
                 allow_paths` or `paddock serve --allow-path DIR`",
                outside.path().display(),
                home.path().display()
            ),
        ),
    ];
    for (spec, detail) in cases {
        let resp = server.submit(&spec, 0).await;
        assert_eq!(resp.status(), 422, "{}", server.stderr());
        assert_eq!(body::<Value>(resp).await, refused(detail));
    }
    // The same through a turn.
    let turn = server
        .client
        .clone()
        .post(server.url("/v1/turns"))
        .header("content-type", "application/json")
        .body(
            serde_json::json!({
                "engine": {"kind": "codex", "model": "gpt-5.5"},
                "upstream": {"provider": "openai", "key": key, "base_url": v1},
                "input": "hello",
            })
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(turn.status(), 422);
    assert_eq!(
        body::<Value>(turn).await["detail"]
            .as_str()
            .unwrap()
            .split(':')
            .next(),
        Some("upstream.key")
    );
    // Allowed: the listed reference to the provider's own endpoint.
    let fine = server.submit(&with("env:OPENAI_API_KEY", None), 0).await;
    let status = fine.status();
    assert_eq!(status, 202, "{}", body::<Value>(fine).await);
    let jobs: Value = body(server.get("/v1/jobs").await).await;
    // Only the accepted one was recorded.
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 1);
}

/// The secrets a server's settings name by `env:` (`--allow-ref`, the
/// webhook secret) stay references in the server: the programs it starts
/// for a job (the user's git that snapshots and clones its source, and
/// every other) do not get them in their environment. A `git` on the
/// server's PATH records the environment of each git the server runs; the
/// job runs (so git ran, the record is not empty), and no record holds
/// either value. Before, the user's git had the server's whole
/// environment, both values in it.
#[tokio::test(flavor = "multi_thread")]
async fn the_secrets_a_servers_settings_name_reach_no_child() {
    let home = Home::new();
    let wrapper = tempfile::tempdir().unwrap();
    let log = wrapper.path().join("git-env");
    let real = which::which("git").unwrap();
    let git = wrapper.path().join("git");
    paddock_test_support::script::write_script(
        &git,
        &format!(
            "#!/bin/sh\n{{ echo '--- git'; env; }} >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            real.display()
        ),
    );
    let path = format!(
        "{}:{}",
        wrapper.path().display(),
        std::env::var("PATH").unwrap()
    );
    let (key, hook) = ("sk-serve-held-0123456789", "whsec-serve-held-0123456789");
    let srv = Server::start_env(
        &home,
        &[
            "--allow-ref",
            "env:PADDOCK_TEST_SERVE_KEY",
            "--webhook-secret",
            "env:PADDOCK_TEST_SERVE_HOOK",
        ],
        &[
            ("PATH", path.as_str()),
            ("PADDOCK_TEST_SERVE_KEY", key),
            ("PADDOCK_TEST_SERVE_HOOK", hook),
        ],
    )
    .await;
    let id = srv.submit_ok(&spec(&home, "T-ENV", TURN), 0).await;
    let rec = srv.wait_for(&id, is_final).await;
    assert_eq!(rec.status, JobStatus::Done, "{}", srv.stderr());
    let seen = std::fs::read_to_string(&log).unwrap();
    let held: Vec<&str> = seen
        .lines()
        .filter(|l| l.contains(key) || l.contains(hook))
        .collect();
    assert!(seen.contains("--- git"), "{seen}");
    assert_eq!(held, Vec::<&str>::new());
    drop(srv);

    // A stored profile the server's jobs may run under (here allowed by
    // `--allow-profile`) whose credential is an `env:` variable: the
    // server executes itself again without it, so not even its
    // `/proc/<pid>/environ` has it (read as root: `paddock` is not
    // dumpable).
    let cred = "npm-serve-held-0123456789";
    let profile = home.path().join("corp.toml");
    std::fs::write(
        &profile,
        "id = \"corp\"\n[network]\nsetup_allow = [\"npm.corp.example\"]\n\
         [[network.credentials]]\nname = \"registry\"\nhost = \"npm.corp.example:443\"\n\
         header = \"authorization\"\nvalue = \"Bearer {secret}\"\n\
         secret = \"env:PADDOCK_TEST_SERVE_CRED\"\nenv = \"NPM_TOKEN\"\nphases = [\"setup\"]\n",
    )
    .unwrap();
    let added = home
        .paddock(&["profile", "add", profile.to_str().unwrap()], &[])
        .await;
    assert!(added.status.success(), "{added:?}");
    let srv = Server::start_env(
        &home,
        &["--allow-profile", "corp"],
        &[("PADDOCK_TEST_SERVE_CRED", cred)],
    )
    .await;
    if nix::unistd::Uid::effective().is_root() {
        let environ = std::fs::read(format!("/proc/{}/environ", srv.pid())).unwrap();
        let environ = String::from_utf8_lossy(&environ);
        let names: Vec<&str> = environ
            .split('\0')
            .filter(|v| v.starts_with("PADDOCK_TEST_SERVE_CRED=") || v.contains(cred))
            .collect();
        assert_eq!(names, Vec::<&str>::new(), "{}", srv.stderr());
    } else {
        assert!(!in_ci(), "reading paddock's /proc/<pid>/environ needs root");
        eprintln!("skipping the stored profile's half: reading /proc/<pid>/environ needs root");
    }
}

/// A request body over the server's limit (2 MiB) is refused with 413
/// `too_large`, the problem saying the limit; one at the limit is read
/// (and refused for what it says); the server answers on. Before, the
/// detail was axum's `Failed to buffer the request body: length limit
/// exceeded`, naming neither.
#[tokio::test(flavor = "multi_thread")]
async fn a_body_over_the_limit_is_refused_naming_the_limit() {
    let home = Home::new();
    let srv = Server::start(&home, &[]).await;
    let post = |text: Vec<u8>| {
        let req = srv
            .client
            .post(srv.url("/v1/jobs"))
            .header("content-type", "application/json")
            .body(text);
        async move {
            let resp = req.send().await.unwrap();
            (resp.status().as_u16(), body::<Value>(resp).await)
        }
    };
    let limit = 2 << 20;
    let padded = |len: usize| {
        let mut body = b"{}".to_vec();
        body.resize(len, b' ');
        body
    };
    assert_eq!(
        post(padded(limit + 1)).await,
        (
            413,
            serde_json::json!({
                "type": "urn:paddock:problem:too_large",
                "title": "the request body is too large",
                "status": 413,
                "detail": "the request body is longer than this server reads (2097152 bytes, 2 MiB)",
                "code": "too_large",
            })
        )
    );
    let (status, at_limit) = post(padded(limit)).await;
    assert_eq!(
        (status, at_limit["code"].clone()),
        (422, Value::from("bad_input"))
    );
    let health = srv.get("/healthz").await;
    assert_eq!(health.status(), 200);
}

/// A method a route does not take (`PUT /v1/jobs`, `DELETE
/// /v1/jobs/{id}/cancel`) is 405 `method_not_allowed` as problem+json,
/// naming the method and the path, with the route's `Allow` header; a
/// `read` token is refused (403) before, as on any route of a larger
/// scope. Before, the answer was an empty body with no content type.
#[tokio::test(flavor = "multi_thread")]
async fn a_method_a_route_does_not_take_is_a_problem_naming_what_it_takes() {
    let home = Home::new();
    let srv = Server::start(&home, &[]).await;
    let ask = |method: reqwest::Method, path: &str| {
        let req = srv.client.request(method, srv.url(path));
        async move {
            let resp = req.send().await.unwrap();
            let head = (
                resp.status().as_u16(),
                resp.headers()
                    .get("content-type")
                    .map(|v| v.to_str().unwrap().to_owned()),
                resp.headers()
                    .get("allow")
                    .map(|v| v.to_str().unwrap().to_owned()),
            );
            (head, body::<Value>(resp).await)
        }
    };
    let refused = |method: &str, path: &str, allow: &str| {
        (
            (
                405,
                Some("application/problem+json".to_owned()),
                Some(allow.to_owned()),
            ),
            serde_json::json!({
                "type": "urn:paddock:problem:method_not_allowed",
                "title": "the route does not take this method",
                "status": 405,
                "detail": format!("{method} {path}: this route does not take {method} (the Allow header lists what it takes)"),
                "code": "method_not_allowed",
            }),
        )
    };
    assert_eq!(
        [
            ask(reqwest::Method::PUT, "/v1/jobs").await,
            ask(reqwest::Method::DELETE, "/v1/jobs/job-x/cancel").await,
            ask(reqwest::Method::POST, "/v1/usage?by=day").await,
        ],
        [
            refused("PUT", "/v1/jobs", "GET,HEAD,POST"),
            refused("DELETE", "/v1/jobs/job-x/cancel", "POST"),
            refused("POST", "/v1/usage", "GET,HEAD"),
        ]
    );
}

/// `GET /v1/jobs?cursor=` with a cursor no job has (mistyped, cut, or
/// from another store) is 400 `bad_request` naming the cursor, as the
/// ledger's is; so is `engine=` naming no engine. Before, it answered an empty last page (`{"jobs": []}`,
/// no `next_cursor`): a client paging through took it for the end.
#[tokio::test(flavor = "multi_thread")]
async fn a_jobs_cursor_or_engine_no_job_has_is_a_bad_request_not_an_empty_page() {
    let home = Home::new();
    let srv = Server::start(&home, &[]).await;
    let id = srv.submit_ok(&spec(&home, "T-1", TURN), 0).await;
    let list = |query: &str| {
        let req = srv.client.get(srv.url(&format!("/v1/jobs?{query}")));
        async move {
            let resp = req.send().await.unwrap();
            (resp.status().as_u16(), body::<Value>(resp).await)
        }
    };
    let bad = |cursor: &str| {
        bad_request(&format!(
            "cursor `{cursor}` is not a job of this store (pass a page's `next_cursor` back as it is)"
        ))
    };
    let (status, page) = list(&format!("cursor={id}")).await;
    assert_eq!((status, page), (200, serde_json::json!({"jobs": []})));
    // So is an engine no job can have: not an empty page.
    assert_eq!(
        list("engine=codx").await,
        bad_request("engine `codx` is not an engine (`codex`, `claude`)")
    );
    let (status, page) = list("engine=claude").await;
    assert_eq!((status, page), (200, serde_json::json!({"jobs": []})));
    // And a rung or status no job can have; the job's own rung lists it,
    // the other none.
    assert_eq!(
        [list("rung=box").await, list("status=finished").await],
        [
            bad_request("rung `box` is not an isolation rung (`process`, `sandbox`)"),
            bad_request(
                "status `finished` is not a job status (`queued`, `running`, `done`, `failed`, \
                 `held`, `timed_out`, `cancelled`, `bounced`)"
            ),
        ]
    );
    let rung = srv.job(&id).await.isolation;
    let other = if rung == "process" {
        "sandbox"
    } else {
        "process"
    };
    let ids = |page: (u16, Value)| -> (u16, Vec<Value>) {
        (
            page.0,
            page.1["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|j| j["id"].clone())
                .collect(),
        )
    };
    assert_eq!(
        [
            ids(list(&format!("rung={rung}")).await),
            ids(list(&format!("rung={other}")).await)
        ],
        [(200, vec![Value::from(id.as_str())]), (200, Vec::new())]
    );
    assert_eq!(
        [
            list("cursor=job-nope").await,
            list("cursor=").await,
            list(&format!("cursor={}", &id[..10])).await,
        ],
        [
            bad("job-nope"),
            bad_request("cursor: empty; name the job by its id"),
            bad(&id[..10])
        ]
    );
}

/// `paddock show` of a job the server has not finished says the closeout
/// is to come; before, it said of a running or queued job that it "ended
/// before Paddock wrote one".
#[tokio::test(flavor = "multi_thread")]
async fn paddock_show_of_a_running_or_queued_job_says_its_closeout_is_to_come() {
    let home = Home::new();
    let srv = Server::start(&home, &["--max-concurrent-jobs", "1"]).await;
    let gate = home.path().join("gate");
    let running = srv.submit_ok(&spec(&home, "T-1", &gated(&gate)), 0).await;
    let queued = srv.submit_ok(&spec(&home, "T-2", TURN), 0).await;
    srv.wait_for(&running, |s| s == JobStatus::Running).await;
    let last_line = |id: String| {
        let home = &home;
        async move {
            let out = home.paddock(&["show", &id], &[]).await;
            assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
            let text = String::from_utf8(out.stdout).unwrap();
            text.lines().last().unwrap_or_default().to_owned()
        }
    };
    assert_eq!(
        [
            last_line(running.clone()).await,
            last_line(queued.clone()).await
        ],
        [
            "(no closeout yet: the job is running)",
            "(no closeout yet: the job is queued)"
        ]
    );
    std::fs::write(&gate, "").unwrap();
    for id in [&running, &queued] {
        assert_eq!(srv.wait_for(id, is_final).await.status, JobStatus::Done);
    }
}

/// A query parameter a route does not take (a misspelt filter: `GET
/// /v1/jobs?stauts=queued`) is 400 `bad_request` naming it and those the
/// route takes, on every route that takes a query. Before, it was
/// ignored: the misspelt filter answered every job.
#[tokio::test(flavor = "multi_thread")]
async fn a_query_parameter_a_route_does_not_take_is_a_bad_request_naming_it() {
    let home = Home::new();
    let srv = Server::start(&home, &[]).await;
    let id = srv.submit_ok(&spec(&home, "T-1", TURN), 0).await;
    let ask = |method: reqwest::Method, path: String| {
        let req = srv
            .client
            .request(method, srv.url(&path))
            .header("content-type", "application/json")
            .body("{}");
        async move {
            let resp = req.send().await.unwrap();
            (resp.status().as_u16(), body::<Value>(resp).await)
        }
    };
    let bad = |detail: &str| bad_request(&format!("the query string: {detail}"));
    use reqwest::Method;
    assert_eq!(
        [
            ask(Method::GET, "/v1/jobs?stauts=queued".into()).await,
            ask(Method::POST, "/v1/jobs?prio=5".into()).await,
            ask(Method::GET, format!("/v1/jobs/{id}/events?since=3")).await,
            ask(Method::GET, "/v1/usage?by=day&project=x".into()).await,
            ask(Method::GET, "/v1/ledger?after=3".into()).await,
        ],
        [
            bad("stauts: unknown field `stauts`, expected one of `status`, `engine`, `rung`, `cursor`, `limit`"),
            bad("prio: unknown field `prio`, expected `priority` or `attempt_after`"),
            bad("since: unknown field `since`, expected `format` or `after`"),
            bad("project: unknown field `project`, expected `by`"),
            bad("after: unknown field `after`, expected `cursor` or `limit`"),
        ]
    );
}

/// Probe: every answer, the API's, the health routes', the refusals of the
/// auth layer, the fallbacks' and the dashboard's, carries the security
/// headers (a JSON body never sniffed into markup, nothing framed, cached
/// or embedded by another site); a dashboard page keeps its own CSP.
#[tokio::test]
async fn every_answer_carries_the_security_headers() {
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let bare = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let api_csp = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";
    let mut seen = Vec::new();
    let mut want = Vec::new();
    for (method, path, authorized, csp) in [
        ("GET", "/v1/jobs", true, api_csp),
        ("GET", "/v1/jobs", false, api_csp),
        ("GET", "/v1/jobs/..%2F..%2Fetc", true, api_csp),
        ("GET", "/openapi.json", true, api_csp),
        ("GET", "/metrics", true, api_csp),
        ("GET", "/healthz", false, api_csp),
        ("GET", "/readyz", false, api_csp),
        ("GET", "/nowhere", false, api_csp),
        ("PUT", "/v1/jobs", true, api_csp),
        ("POST", "/v1/jobs", true, api_csp),
        ("GET", "/login", false, paddock::server::dashboard::CSP),
    ] {
        let client = if authorized { &server.client } else { &bare };
        let resp = client
            .request(method.parse().unwrap(), server.url(path))
            .send()
            .await
            .unwrap();
        let h = resp.headers();
        let got: Vec<Option<String>> = [
            "x-content-type-options",
            "content-security-policy",
            "x-frame-options",
            "cache-control",
            "cross-origin-resource-policy",
        ]
        .iter()
        .map(|n| h.get(*n).map(|v| v.to_str().unwrap().to_owned()))
        .collect();
        seen.push((method, path, resp.status().as_u16(), got));
        want.push((
            method,
            path,
            resp.status().as_u16(),
            ["nosniff", csp, "DENY", "no-store", "same-origin"]
                .map(|v| Some(v.to_owned()))
                .to_vec(),
        ));
    }
    assert_eq!(seen, want);
}

/// A submitted spec whose local source is surely no repository on the
/// server (a `repository.path` that is not there, a `file://` URL naming
/// a directory that is no git repository) is refused at submission with
/// code `repository_not_found` (422), naming the field and what was
/// tried, and nothing is recorded. Before, the server answered 422
/// `bad_input` for a path it could not read, and took a directory that is
/// no repository, made the job and failed it at its clone.
#[tokio::test(flavor = "multi_thread")]
async fn a_submitted_local_repository_that_is_not_there_is_refused_with_its_code() {
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let (gone, plain) = (home.path().join("gone"), home.path().join("plain"));
    std::fs::create_dir_all(&plain).unwrap();
    let mut by_path = spec(&home, "T-1", TURN);
    by_path["repository"]["path"] = Value::from(gone.display().to_string());
    let mut by_url = spec(&home, "T-2", TURN);
    by_url["repository"] = serde_json::json!({
        "url": format!("file://{}", plain.display()),
        "base_ref": "main",
    });
    let mut seen = Vec::new();
    for job in [by_path, by_url] {
        let resp = server.submit(&job, 0).await;
        seen.push((resp.status().as_u16(), body::<Value>(resp).await));
    }
    let jobs: Value = body(server.get("/v1/jobs").await).await;
    let not_found = |detail: String| {
        (
            422,
            serde_json::json!({
                "type": "urn:paddock:problem:repository_not_found",
                "title": "the job's repository is not there",
                "status": 422,
                "detail": detail,
                "code": "repository_not_found",
            }),
        )
    };
    let on_this_host = "on this host; the server that runs the job clones it there: put the \
                        repository at that path on this host for this server to run the job";
    assert_eq!(
        (seen, jobs["jobs"].clone()),
        (
            vec![
                not_found(format!(
                    "repository.path {}: no such directory, {on_this_host}",
                    gone.display()
                )),
                // Something there that is no repository: the advice is to
                // name one, not to put one there.
                not_found(format!(
                    "repository.url `file://{p}`: {p} is a directory but no git repository (no \
                     `.git` in it, and no bare repository's `HEAD`), on this host; the server \
                     that runs the job clones the repository whose top level the spec names: \
                     name one that is there on this host for this server to run the job",
                    p = plain.display()
                )),
            ],
            serde_json::json!([]),
        ),
        "{}",
        server.stderr()
    );
}

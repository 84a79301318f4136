//! Probes of the real `paddock serve` with requests no client should send:
//! a request target or headers over the server's limits
//! (`server/head_limits.rs`) are refused with the API's problem+json and
//! a stable code before any token is checked, where hyper answered an
//! empty 414 or 431 or let them through; what hyper still refuses itself
//! is pinned here as docs/serve.md says it. And a client that asks for a
//! large answer and reads none of it: its connection is closed once the
//! write has waited 30 s (`server/write_deadline.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use paddock_test_support::prelude::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::serve::Server;

/// An answer as it came: its status, its `Content-Type` (empty when it
/// has none) and its body.
#[derive(Debug, PartialEq)]
struct Raw {
    status: u16,
    media: String,
    body: String,
}

/// Sends `head` (then nothing) to `server` over a new connection and
/// reads the answer until the server closes (every request here asks it
/// to, or is one it closes on).
async fn raw(server: &Server, head: &[u8]) -> Raw {
    let addr = server
        .url("")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(head).await.unwrap();
    let mut got = Vec::new();
    // A guard against a test that never ends, not a measure (a connection
    // left open would be closed by the server's 30 s for a request's head
    // anyway): far above what a loaded host (the suites side by side on
    // two cores) takes to answer.
    tokio::time::timeout(Duration::from_secs(120), stream.read_to_end(&mut got))
        .await
        .expect("the server did not close within 120 s")
        .unwrap();
    let text = String::from_utf8_lossy(&got).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let media = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_owned())
        })
        .unwrap_or_default();
    Raw {
        status,
        media,
        body: body.to_owned(),
    }
}

/// `GET target` with `headers` (each `Name: value`), asking the server to
/// close after.
fn get(target: &str, headers: &[String]) -> Vec<u8> {
    let mut req = format!("GET {target} HTTP/1.1\r\nHost: paddock\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    req.into_bytes()
}

/// The problem's `code`, `status` and `detail`, when the body is one.
fn problem(raw: &Raw) -> (u16, String, String, String) {
    let v: serde_json::Value = serde_json::from_str(&raw.body).unwrap_or_default();
    (
        raw.status,
        raw.media.clone(),
        v["code"].as_str().unwrap_or_default().to_owned(),
        v["detail"].as_str().unwrap_or_default().to_owned(),
    )
}

/// Probe: over-limit request targets and headers are the API's problems
/// with stable codes, sent before any token is asked for (without the
/// layer: a 9 KiB target and 101 headers were taken, 401, and a 70 KiB
/// header too); at the limits a request goes on to the token check; a
/// browser gets the refusal as a page. Past hyper's own limits and on a
/// head it cannot parse, hyper's empty answers remain.
#[tokio::test]
async fn an_oversized_head_is_a_problem_with_a_stable_code() {
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let target = |len: usize| format!("/v1/jobs?x={}", "a".repeat(len - "/v1/jobs?x=".len()));
    let fields = |n: usize| (0..n).map(|i| format!("X-F{i}: v")).collect::<Vec<_>>();
    // Host and Connection are two of the fields.
    let (at_count, over_count) = (fields(98), fields(99));
    let bytes = |len: usize| vec![format!("X-Big: {}", "b".repeat(len))];

    let mut answers = Vec::new();
    for head in [
        get(&target(8 * 1024), &[]),
        get(&target(8 * 1024 + 1), &[]),
        get("/v1/jobs", &at_count),
        get("/v1/jobs", &over_count),
        get("/v1/jobs", &bytes(60 * 1024)),
        get("/v1/jobs", &bytes(70 * 1024)),
    ] {
        answers.push(problem(&raw(&server, &head).await));
    }
    let json = "application/problem+json".to_owned();
    let unauthorized = (
        401,
        json.clone(),
        "unauthorized".to_owned(),
        "no bearer token: send `Authorization: Bearer <token>` (`paddock token create`)".to_owned(),
    );
    assert_eq!(
        answers,
        vec![
            unauthorized.clone(),
            (
                414,
                json.clone(),
                "uri_too_long".into(),
                "the request target is 8193 bytes; at most 8192 are read".into()
            ),
            unauthorized.clone(),
            (
                431,
                json.clone(),
                "headers_too_large".into(),
                "the request sent 101 header fields of 1014 bytes; at most 100 fields of 65536 \
                 bytes together are read"
                    .into()
            ),
            unauthorized,
            (
                431,
                json.clone(),
                "headers_too_large".into(),
                "the request sent 3 header fields of 71723 bytes; at most 100 fields of 65536 \
                 bytes together are read"
                    .into()
            ),
        ],
        "{}",
        server.stderr()
    );

    // A browser is shown the refusal as a page.
    let page = raw(
        &server,
        &get(
            &format!("/?cursor={}", "a".repeat(9000)),
            &["Accept: text/html".to_owned()],
        ),
    )
    .await;
    assert_eq!(
        (
            page.status,
            page.media.as_str(),
            page.body
                .contains("the request target is 9009 bytes; at most 8192 are read")
        ),
        (414, "text/html; charset=utf-8", true)
    );

    // What hyper refuses itself, with nothing in the body: a request
    // target it cannot parse. (A head past its 256 KiB buffer is its
    // empty 431 too; not sent here: it closes on what it has not read,
    // and the reset may take its answer with it.)
    let hypers = raw(&server, b"GET /<script> HTTP/1.1\r\nHost: p\r\n\r\n").await;
    assert_eq!((hypers.status, hypers.body), (400, String::new()));
}

/// Probe: an authenticated client that asks for a large answer (a job
/// record of 8 MiB of file names) and reads none of it has its connection
/// closed once the write has waited 30 s, having got far less than the
/// answer (without `server/write_deadline.rs`: never closed, and a read
/// then gets all of it); the server answers others while its write
/// waits. The server's end is watched in `/proc/net/tcp` (its send queue
/// full, then let go by the server), not guessed from a fixed wait,
/// which a loaded host (the suites side by side on two cores) outlasted
/// in starting the answer: a read after it drained what the server had
/// not yet let go.
#[tokio::test]
async fn a_large_answer_nobody_reads_ends_its_connection() {
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let mut job = paddock_test_support::jobs::stored_record(
        "job-large",
        "gpt-5.5",
        "process",
        paddock_protocol::JobStatus::Done,
        0,
    );
    job.changed_files = (0..32 * 1024)
        .map(|i| format!("src/{i:08}/{}", "f".repeat(240)))
        .collect();
    use paddock::store::Store as _;
    home.store().await.insert_job(&job, "{}").await.unwrap();
    let read = crate::serve::token(&home, "read").await;

    let addr = server.url("").trim_start_matches("http://").to_owned();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut idle = socket.connect(addr.parse().unwrap()).await.unwrap();
    idle.write_all(
        format!(
            "GET /v1/jobs/job-large HTTP/1.1\r\nHost: p\r\nAuthorization: Bearer {read}\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let ports = (
        addr.rsplit_once(':')
            .unwrap()
            .1
            .trim_end_matches('/')
            .parse()
            .unwrap(),
        idle.local_addr().unwrap().port(),
    );
    let start = std::time::Instant::now();
    // Guards, far above the write's 30 s and what a loaded host takes.
    let within = |what: &str| {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "{what} within 300 s (ports {ports:?})"
        )
    };
    // The server's write waits on this client.
    while !matches!(server_end(ports), Some((queued, true)) if queued > 0) {
        within("the server's write waited");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Others are served meanwhile.
    let other = crate::serve::client_with(&read)
        .get(server.url("/v1/jobs/job-large"))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .len();
    // The server lets its end go (closed: the kernel sends what it holds,
    // then ends the connection).
    while matches!(server_end(ports), Some((_, true))) {
        within("the server closed the connection");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut got = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(120), idle.read_to_end(&mut got)).await;
    let closed = matches!(ended, Ok(Ok(_)) | Ok(Err(_)));
    assert_eq!(
        (closed, got.len() < other, other > 8 * 1024 * 1024),
        (true, true, true),
        "{} of {other} bytes after {:?}",
        got.len(),
        start.elapsed()
    );
}

/// The server's end of the connection from local port `ports.1` to the
/// server's port `ports.0`, as `/proc/net/tcp` shows it: the bytes in its
/// send queue, and whether a process still holds it (its inode is 0 once
/// the server closed it and only the kernel finishes it); `None` when it
/// is gone.
fn server_end(ports: (u16, u16)) -> Option<(u64, bool)> {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let port = |field: &str| u16::from_str_radix(field.rsplit_once(':')?.1, 16).ok();
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if (port(fields[1])?, port(fields[2])?) != ports {
            return None;
        }
        let queued = u64::from_str_radix(fields[4].split_once(':')?.0, 16).ok()?;
        Some((queued, fields[9] != "0"))
    })
}

/// `POST /v1/jobs` with JSON no client should send: 10,000 nested arrays
/// in a spec field, a lone surrogate (`\ud800`), overlong UTF-8 (`C0 AF`
/// for `/`), a ticket id with a right-to-left override, and a title with
/// an escape or one. Each is refused as `bad_input` (422) with the API's
/// problem+json, nothing is recorded, and the server answers after them:
/// no 500, no stack overflow, no control character stored. Before, the
/// two titles were accepted and stored as sent.
#[tokio::test(flavor = "multi_thread")]
async fn odd_json_and_unicode_in_a_submission_are_refused_and_the_server_lives() {
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let mut spec = crate::serve::spec(&home, "odd", crate::serve::TURN);
    spec["ticket"]["title"] = serde_json::Value::from("MARK");
    let text = spec.to_string();
    let deep = text.replace(
        "\"MARK\"",
        &format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)),
    );
    let surrogate = text.replace("\"MARK\"", "\"a\\ud800b\"");
    let mut overlong = text.replace("\"MARK\"", "\"a\u{1}b\"").into_bytes();
    let at = overlong.iter().position(|b| *b == 1).unwrap();
    overlong.splice(at..=at, [0xC0, 0xAF]);
    let mut bidi = spec.clone();
    bidi["ticket"]["id"] = serde_json::Value::from("T-\u{202e}1");
    let mut escape = spec.clone();
    escape["ticket"]["title"] = serde_json::Value::from("fix \u{1b}[2J it");
    let mut rtl = spec.clone();
    rtl["ticket"]["title"] = serde_json::Value::from("fix \u{202e}ti xif");
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("deep", deep.into_bytes()),
        ("surrogate", surrogate.into_bytes()),
        ("overlong", overlong),
        ("bidi", bidi.to_string().into_bytes()),
        ("escape", escape.to_string().into_bytes()),
        ("rtl", rtl.to_string().into_bytes()),
    ];
    let mut seen = Vec::new();
    for (name, body) in cases {
        let resp = server
            .client
            .clone()
            .post(server.url("/v1/jobs"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let problem: serde_json::Value =
            serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap_or_default();
        seen.push((name, status, problem["code"].as_str().map(str::to_string)));
    }
    let health = server.get("/healthz").await.status().as_u16();
    let jobs: serde_json::Value = crate::serve::body(server.get("/v1/jobs").await).await;
    assert_eq!(
        (seen, health, jobs.to_string().contains("\"odd\"")),
        (
            vec![
                ("deep", 422, Some("bad_input".to_string())),
                ("surrogate", 422, Some("bad_input".to_string())),
                ("overlong", 422, Some("bad_input".to_string())),
                ("bidi", 422, Some("bad_input".to_string())),
                ("escape", 422, Some("bad_input".to_string())),
                ("rtl", 422, Some("bad_input".to_string())),
            ],
            200,
            false
        ),
        "{}",
        server.stderr()
    );
}

/// `POST /v1/jobs` with a name the closeout, the pull request's labels,
/// `paddock jobs` and the dashboard show holding a terminal escape, a line
/// break or a right-to-left override (the ticket's type and project, the
/// model, a label, a ticket comment's author): each is refused as
/// `bad_input` (422) naming its field and the code point, as a title is,
/// nothing is recorded, and the server answers after them. Before, each
/// was stored as sent.
#[tokio::test(flavor = "multi_thread")]
async fn a_name_with_a_control_or_bidi_character_in_a_submission_is_refused() {
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let spec = crate::serve::spec(&home, "odd", crate::serve::TURN);
    let with = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut s = spec.clone();
        edit(&mut s);
        s
    };
    let cases = [
        (
            "ticket.type",
            with(&|s| s["ticket"]["type"] = "bug\u{1b}[2J".into()),
        ),
        (
            "ticket.project",
            with(&|s| s["ticket"]["project"] = "acme\nforged".into()),
        ),
        (
            "engine.model",
            with(&|s| s["engine"]["model"] = "gpt\u{202e}x".into()),
        ),
        (
            "results.labels[0]",
            with(&|s| {
                if !s["results"].is_object() {
                    s["results"] = serde_json::json!({});
                }
                s["results"]["labels"] = serde_json::json!(["a\u{2066}b"]);
            }),
        ),
        (
            "ticket.comments[0].author",
            with(&|s| {
                s["ticket"]["comments"] = serde_json::json!([{"author": "ana\u{7}", "body": "b"}])
            }),
        ),
    ];
    let mut seen = Vec::new();
    for (field, body) in cases {
        let resp = server
            .client
            .clone()
            .post(server.url("/v1/jobs"))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let problem: serde_json::Value =
            serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap_or_default();
        let detail = problem["detail"].as_str().unwrap_or_default().to_string();
        seen.push((
            field,
            status,
            problem["code"].as_str().map(str::to_string),
            detail.contains(&format!(
                "field `{field}`: must be one line of plain text: U+"
            )),
        ));
    }
    let health = server.get("/healthz").await.status().as_u16();
    let jobs: serde_json::Value = crate::serve::body(server.get("/v1/jobs").await).await;
    let refused = |field| (field, 422, Some("bad_input".to_string()), true);
    assert_eq!(
        (seen, health, jobs.to_string().contains("\"odd\"")),
        (
            vec![
                refused("ticket.type"),
                refused("ticket.project"),
                refused("engine.model"),
                refused("results.labels[0]"),
                refused("ticket.comments[0].author"),
            ],
            200,
            false
        ),
        "{}",
        server.stderr()
    );
}

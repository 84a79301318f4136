//! Jobs with a `[network]` list, with a stand-in engine that runs the real
//! `curl`: its requests go through the job's egress proxy (the proxy
//! variables point at it) to a stand-in server on loopback, which the
//! test's host profile opens explicitly; a destination not on the list
//! gets a readable 403 (plain HTTP and CONNECT alike); every attempt is a
//! store row and a `network` event. On the `sandbox` rung a direct
//! connection (the proxy bypassed) reaches nothing; on the `process` rung
//! it does: the proxy is advice there (docs/egress.md).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use crate::common::*;
use paddock_protocol::{EgressMethod, EgressPhase, EgressRecord, EventBody, JobStatus};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const HELLO: &str = "hello from the stand-in\n";

/// A plain HTTP server on loopback answering every request with [`HELLO`].
async fn stand_in() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{HELLO}",
                    HELLO.len()
                );
                let _ = conn.write_all(answer.as_bytes()).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    port
}

/// `curl` through the job's proxy (`--noproxy ''`: loopback is on
/// NO_PROXY, for the broker), writing the body to `$HOME/<name>` and
/// `<code> <exit>` (for a tunnel, the CONNECT's code) to `$HOME/seen`.
fn curl(name: &str, url: &str, proxy: bool) -> String {
    let noproxy = if proxy { "''" } else { "'*'" };
    let code = if url.starts_with("https") {
        "%{http_connect}"
    } else {
        "%{http_code}"
    };
    format!(
        "printf '{name} ' >> \"$HOME/seen\"; curl -s --max-time 5 --noproxy {noproxy} -o \"$HOME/{name}\" -w '{code}' {url} >> \"$HOME/seen\"; echo \" $?\" >> \"$HOME/seen\""
    )
}

/// A job on `rung` whose `codex` runs `script`, with `[network] allow` and
/// a host profile opening `127.0.0.1:port`.
fn network_job(home: &Home, rung: &str, script: &str, port: u16) -> PathBuf {
    std::fs::write(
        home.path().join("profile.toml"),
        format!(
            "id = \"egress-test\"\n[network]\nallow = [\"127.0.0.1:{port}\"]\nopen_addresses = [\"127.0.0.1:{port}\"]\n"
        ),
    )
    .unwrap();
    let spec = fake_codex_job(home, rung, script, 60);
    let text = std::fs::read_to_string(&spec).unwrap();
    let text = format!(
        "{text}\n[network]\nallow = [\"127.0.0.1:{port}\"]\n\n[policy]\nprofile = \"profile.toml\"\n"
    );
    std::fs::write(&spec, text).unwrap();
    spec
}

/// One attempt as the tests compare it: (host, port, method, phase,
/// allowed, rule); what varies (bytes, durations, addresses) left out.
type Attempt = (
    String,
    u16,
    Option<EgressMethod>,
    EgressPhase,
    bool,
    Option<String>,
);

/// The attempts of a job, sorted (each connection's record is sent when it
/// ends, not when it starts).
fn attempts(records: &[EgressRecord]) -> Vec<Attempt> {
    let mut out: Vec<Attempt> = records
        .iter()
        .map(|r| {
            (
                r.host.clone(),
                r.port,
                r.method,
                r.phase,
                r.allowed,
                r.rule.clone(),
            )
        })
        .collect();
    out.sort_by_key(|a| format!("{a:?}"));
    out
}

/// What the curl job left.
struct Ran {
    /// The stand-in's port.
    port: u16,
    /// `<name> <code> <exit>` per curl.
    seen: String,
    /// The engine's `*_proxy` variables, sorted.
    env: String,
    /// The bodies curl received through the proxy: the stand-in's, then
    /// the refusal's.
    bodies: String,
    rows: Vec<EgressRecord>,
    events: Vec<EgressRecord>,
}

/// Runs the curl job on `rung`.
async fn run_curls(rung: &str) -> Ran {
    let port = stand_in().await;
    let home = Home::new();
    let script = [
        "env | grep -i '_proxy=' | sort > \"$HOME/env\"".to_string(),
        curl("through", &format!("http://127.0.0.1:{port}/x"), true),
        curl("direct", &format!("http://127.0.0.1:{port}/x"), false),
        curl("denied", "http://denied.example/x", true),
        curl("tunnel", "https://denied.example/x", true),
    ]
    .join("\n");
    let spec = network_job(&home, rung, &script, port);
    let out = home
        .paddock(&["run", "--json", "--keep", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    // The stand-in prints no turn: the job fails after the script ran.
    assert_eq!(
        (rec.status, rec.reason.as_deref()),
        (
            JobStatus::Failed,
            Some("the engine exited without finishing its turn")
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let job_home = home.jobs().join(&rec.id).join("home");
    let read = |name: &str| std::fs::read_to_string(job_home.join(name)).unwrap_or_default();
    let store = home.store().await;
    let ran = Ran {
        port,
        seen: read("seen"),
        env: read("env"),
        bodies: format!("{}{}", read("through"), read("denied")),
        rows: store.egress(&rec.id).await.unwrap(),
        events: store
            .events(&rec.id, 0)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|e| match e.body {
                EventBody::Network(r) => Some(r),
                _ => None,
            })
            .collect(),
    };
    std::fs::remove_dir_all(home.jobs().join(&rec.id)).unwrap();
    ran
}

/// The proxy variables, as `env | sort` prints them.
fn proxy_env(url: &str) -> String {
    let no = paddock::egress::env::NO_PROXY;
    format!(
        "ALL_PROXY={url}\nHTTPS_PROXY={url}\nHTTP_PROXY={url}\nNO_PROXY={no}\nall_proxy={url}\nhttp_proxy={url}\nhttps_proxy={url}\nno_proxy={no}\n"
    )
}

const DENIED_BODY: &str = "paddock egress proxy: denied.example:80 refused in the agent phase: denied.example:80 is not on the agent phase's list\nrule: allowlist\nTo reach it, the job's spec must list `denied.example:80` in `network.allow`, within the host profile's `network.allow` (docs/egress.md); ask whoever runs this job.\n";

/// What went through the proxy (the direct attempt never reaches it).
fn through_the_proxy(port: u16) -> Vec<Attempt> {
    let denied = |port, method| {
        (
            "denied.example".to_string(),
            port,
            Some(method),
            EgressPhase::Agent,
            false,
            Some("allowlist".to_string()),
        )
    };
    vec![
        (
            "127.0.0.1".to_string(),
            port,
            Some(EgressMethod::Http),
            EgressPhase::Agent,
            true,
            None,
        ),
        denied(443, EgressMethod::Connect),
        denied(80, EgressMethod::Http),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn on_the_sandbox_rung_curl_goes_through_the_proxy_and_nowhere_else() {
    if !sandbox_available() {
        return;
    }
    let ran = run_curls("sandbox").await;
    // Direct: nothing listens on that port in the job's network namespace.
    assert_eq!(
        ran.seen,
        "through 200 0\ndirect 000 7\ndenied 403 0\ntunnel 403 56\n"
    );
    let url = format!(
        "http://127.0.0.1:{}",
        paddock::launcher::SANDBOX_EGRESS_PORT
    );
    assert_eq!(ran.env, proxy_env(&url));
    assert_eq!(ran.bodies, format!("{HELLO}{DENIED_BODY}"));
    assert_eq!(attempts(&ran.rows), through_the_proxy(ran.port));
    assert_eq!(ran.events, ran.rows);
}

#[tokio::test(flavor = "multi_thread")]
async fn on_the_process_rung_the_proxy_is_advice_a_direct_connection_works() {
    let ran = run_curls("process").await;
    assert_eq!(
        ran.seen,
        "through 200 0\ndirect 200 0\ndenied 403 0\ntunnel 403 56\n"
    );
    let url = ran
        .env
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("ALL_PROXY="))
        .unwrap_or_default()
        .to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{}", ran.env);
    assert_eq!(ran.env, proxy_env(&url));
    assert_eq!(ran.bodies, format!("{HELLO}{DENIED_BODY}"));
    assert_eq!(attempts(&ran.rows), through_the_proxy(ran.port));
    assert_eq!(ran.events, ran.rows);
}

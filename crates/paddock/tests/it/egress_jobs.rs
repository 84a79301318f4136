//! Jobs with a `[network]` list, with a stand-in engine that runs the real
//! `curl`: its requests go through the job's egress proxy (the proxy
//! variables point at it) to a stand-in server on loopback, which the
//! test's host profile opens explicitly; a destination not on the list
//! gets a readable 403 (plain HTTP and CONNECT alike); every attempt is a
//! store row and a `network` event. On the `sandbox` rung a direct
//! connection (the proxy bypassed) reaches nothing; on the `process` rung
//! it does: the proxy is advice there, and a host profile's `[network]`
//! maximum refuses the job unless its spec accepts it as degraded
//! (docs/egress.md).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use paddock_protocol::{EgressMethod, EgressPhase, EgressRecord, EventBody, JobStatus};
use paddock_test_support::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const HELLO: &str = "hello from the stand-in\n";

/// A plain HTTP server on loopback answering every request with [`HELLO`],
/// but `GET /drip` with a body that never ends (1 KiB every 20 ms).
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
                if head.starts_with(b"GET /drip ") {
                    let _ = conn.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await;
                    while conn.write_all(&[b'.'; 1024]).await.is_ok() {
                        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    }
                    return;
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

/// A job on `rung` whose `codex` runs `script`, with `sections` (TOML)
/// and a host profile opening `127.0.0.1:port` and allowing it in its
/// `[network]` list `limit` (`allow` or `setup_allow`). On the `process`
/// rung, which cannot enforce that maximum, the spec accepts it as
/// degraded (`accept_degraded = ["network"]`): without, the job is
/// refused.
fn egress_job(
    home: &Home,
    rung: &str,
    script: &str,
    port: u16,
    limit: &str,
    sections: &str,
) -> PathBuf {
    let spec = unaccepted_egress_job(home, rung, script, port, limit, sections);
    if rung == "process" {
        let text = std::fs::read_to_string(&spec).unwrap();
        std::fs::write(&spec, format!("{text}accept_degraded = [\"network\"]\n")).unwrap();
    }
    spec
}

/// [`egress_job`] without `accept_degraded`: its `[policy]` section last.
fn unaccepted_egress_job(
    home: &Home,
    rung: &str,
    script: &str,
    port: u16,
    limit: &str,
    sections: &str,
) -> PathBuf {
    let spec = fake_codex_job(home, rung, script, 60);
    append_to_spec(&spec, &format!("{sections}\n"));
    under_profile(
        &spec,
        &format!(
            "id = \"egress-test\"\n[network]\n{limit} = [\"127.0.0.1:{port}\"]\nopen_addresses = [\"127.0.0.1:{port}\"]\n"
        ),
    );
    spec
}

/// The `policy` event of a `process`-rung job that accepted the host
/// profile `profile`'s `[network]` maximum as degraded.
pub(crate) fn network_degraded(profile: &str) -> (String, String) {
    (
        "network".to_string(),
        format!(
            "host profile `{profile}`: `network` (its [network] maximum and the deny list) \
             cannot be enforced on the `process` rung: the job's processes can connect \
             directly, past its egress proxy; the `sandbox` rung enforces it \
             (docs/egress.md); accepted as degraded by the spec"
        ),
    )
}

/// A host profile's `[network]` maximum cannot be enforced on the
/// `process` rung: a job there that does not accept it as degraded is
/// refused before anything of it exists, naming the spec's file, the
/// profile with its file, the rule and how to run it (exit 2, no job
/// recorded).
#[tokio::test]
async fn a_network_maximum_refuses_a_process_job_that_does_not_accept_it() {
    let home = Home::new();
    let sections = "[network]\nallow = [\"127.0.0.1:9\"]";
    let spec = unaccepted_egress_job(&home, "process", "true", 9, "allow", sections);
    let out = home.paddock(&["run", spec.to_str().unwrap()], &[]).await;
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
            home.store().await.jobs(10).await.unwrap().len(),
        ),
        (
            Some(2),
            format!(
                "paddock: job refused before start: job spec {}: host profile `egress-test` \
                 (file {}): rule `network` (its [network] maximum and the deny list) cannot be \
                 enforced on the `process` rung: the job's processes can connect directly, past \
                 its egress proxy; the `sandbox` rung enforces it (docs/egress.md); run the job \
                 on a rung that enforces it, or list `network` in `policy.accept_degraded`\n",
                spec.display(),
                spec.with_file_name("profile.toml").display(),
            ),
            0,
        )
    );
}

/// The same refusal of the spec read from stdin (`paddock run -`) names
/// it `<stdin>`, as its parse errors do (`cli::run::STDIN_ORIGIN`).
/// Before, it named no spec at all: the profile's file was the only one
/// the user saw, and it was not the one to change.
#[tokio::test]
async fn a_refusal_of_the_spec_read_from_stdin_names_stdin() {
    use tokio::io::AsyncWriteExt as _;
    let home = Home::new();
    let sections = "[network]\nallow = [\"127.0.0.1:9\"]";
    let spec = unaccepted_egress_job(&home, "process", "true", 9, "allow", sections);
    let mut child = home
        .command(&["run", "-"])
        .current_dir(spec.parent().unwrap())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(&std::fs::read(&spec).unwrap())
            .await
            .unwrap();
    }
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        ),
        (
            Some(2),
            format!(
                "paddock: job refused before start: job spec <stdin>: host profile \
                 `egress-test` (file {}): rule `network` (its [network] maximum and the deny \
                 list) cannot be enforced on the `process` rung: the job's processes can \
                 connect directly, past its egress proxy; the `sandbox` rung enforces it \
                 (docs/egress.md); run the job on a rung that enforces it, or list `network` \
                 in `policy.accept_degraded`\n",
                spec.with_file_name("profile.toml").display(),
            ),
        )
    );
}

/// A job whose agent may reach the stand-in at `port`.
fn network_job(home: &Home, rung: &str, script: &str, port: u16) -> PathBuf {
    let sections = format!("[network]\nallow = [\"127.0.0.1:{port}\"]");
    egress_job(home, rung, script, port, "allow", &sections)
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
    /// The closeout's "Network refused" section.
    refused: String,
    /// Every event of the job, as JSON lines.
    all: String,
    /// Paddock's warnings (its non-fatal errors) on the job's stream.
    warnings: Vec<String>,
    /// The job's `policy` events: (rule, message).
    policies: Vec<(String, String)>,
}

/// Runs the curl job on `rung`.
async fn run_curls(rung: &str) -> Ran {
    let port = stand_in().await;
    let home = Home::new();
    let script = [
        "env | grep -i '_proxy=' | sort > \"$HOME/env\"".to_string(),
        "echo \"proxy at $HTTPS_PROXY\"".to_string(),
        curl("through", &format!("http://127.0.0.1:{port}/x"), true),
        curl("direct", &format!("http://127.0.0.1:{port}/x"), false),
        curl("denied", "http://denied.example/x", true),
        curl("tunnel", "https://denied.example/x", true),
    ]
    .join("\n");
    let spec = network_job(&home, rung, &script, port);
    let (rec, job_home) = run_kept_script_job(&home, &spec).await;
    let read = |name: &str| std::fs::read_to_string(job_home.join(name)).unwrap_or_default();
    let store = home.store().await;
    let closeout = home.closeout(&rec.id);
    let refused = closeout
        .split("### ")
        .find(|s| s.starts_with("Network refused"))
        .unwrap_or_default()
        .to_string();
    let all = store
        .events(&rec.id, 0)
        .await
        .unwrap()
        .iter()
        .map(|e| serde_json::to_string(e).unwrap() + "\n")
        .collect();
    let warnings = store
        .events(&rec.id, 0)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.body {
            EventBody::Error {
                message,
                source: Some(source),
                fatal: false,
            } if source == "paddock" => Some(message),
            _ => None,
        })
        .collect();
    let policies = store
        .events(&rec.id, 0)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.body {
            EventBody::Policy { rule, message } => Some((rule, message)),
            _ => None,
        })
        .collect();
    let ran = Ran {
        all,
        warnings,
        policies,
        refused,
        port,
        seen: read("seen"),
        env: read("env"),
        bodies: format!("{}{}", read("through"), read("denied")),
        rows: store.egress(&rec.id).await.unwrap(),
        events: home.network_events(&rec.id).await,
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

const DENIED_BODY: &str = "paddock egress proxy: denied.example:80 refused in the agent phase: denied.example:80 is not on the agent phase's list\nrule: allowlist\nTo reach it, the job's spec must list `denied.example:80` in `network.allow`, within host profile `egress-test`'s `network.allow` (docs/egress.md); ask whoever runs this job.\n";

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
    if !sandbox_available() || !curl_available() {
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
    assert_eq!(ran.refused, REFUSED);
    assert_eq!(
        (ran.warnings, ran.policies),
        (Vec::<String>::new(), Vec::new())
    );
}

/// The closeout's section listing what the curl job was refused.
const REFUSED: &str = "Network refused\nDestinations the job was refused, by its egress proxy or tried directly past it (rules `direct:…`; a spec asks for one in `network.allow` or `setup.network`, within its host profile's maximum where one sets it; an address refused by rule `deny_list:…` only a host profile opens, one `address:port` at a time in `network.open_addresses`; docs/egress.md):\n- `denied.example:80` (agent phase, allowlist)\n- `denied.example:443` (agent phase, allowlist)\n\n";

#[tokio::test(flavor = "multi_thread")]
async fn on_the_process_rung_the_proxy_is_advice_a_direct_connection_works() {
    if !curl_available() {
        return;
    }
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
    // The loopback proxy's URL holds the job's proxy credentials: a user
    // and a random token (egress::auth).
    let token = url
        .strip_prefix("http://paddock:")
        .and_then(|rest| rest.split_once("@127.0.0.1:"))
        .map(|(token, _)| (token.len(), token.chars().all(|c| c.is_ascii_hexdigit())));
    assert_eq!(token, Some((32, true)), "{}", ran.env);
    // The token is redacted in the job's events, where the job printed it.
    let secret = url
        .strip_prefix("http://paddock:")
        .and_then(|rest| rest.split_once('@'))
        .map(|(t, _)| t.to_string())
        .unwrap_or_default();
    assert_eq!(
        (
            ran.all.contains("proxy at http://paddock:"),
            ran.all.contains(&secret)
        ),
        (true, false),
        "{}",
        ran.all
    );
    assert_eq!(ran.env, proxy_env(&url));
    assert_eq!(ran.bodies, format!("{HELLO}{DENIED_BODY}"));
    assert_eq!(attempts(&ran.rows), through_the_proxy(ran.port));
    assert_eq!(ran.events, ran.rows);
    assert_eq!(ran.refused, REFUSED);
    // Said on the job's stream: the profile's maximum, accepted as
    // degraded by the spec, is advice here (once, as its `policy` event).
    assert_eq!(
        (ran.warnings, ran.policies),
        (Vec::<String>::new(), vec![network_degraded("egress-test")])
    );
}

/// A job on `rung` with `[setup]` (`setup`, TOML lines) that may reach
/// the stand-in at `port` in the setup phase only.
fn setup_job(home: &Home, rung: &str, setup: &str, script: &str, port: u16) -> PathBuf {
    egress_job(
        home,
        rung,
        script,
        port,
        "setup_allow",
        &format!("[setup]\n{setup}"),
    )
}

/// The `setup` tool calls and results of a job: (command, exit code,
/// is_error, output) per command.
fn setup_events(
    events: &[paddock_protocol::AgentEvent],
) -> Vec<(String, Option<i64>, bool, String)> {
    let mut calls = Vec::new();
    let mut out = Vec::new();
    for e in events {
        match &e.body {
            EventBody::ToolCall {
                tool,
                command: Some(c),
                call_id: Some(id),
                ..
            } if tool == "setup" => calls.push((id.clone(), c.clone())),
            EventBody::ToolResult {
                call_id: Some(id),
                exit_code,
                is_error,
                output,
            } if id.starts_with("setup-") => {
                let command = calls
                    .iter()
                    .find(|(c, _)| c == id)
                    .map(|(_, c)| c.clone())
                    .unwrap_or_default();
                out.push((command, *exit_code, *is_error, output.clone()));
            }
            _ => {}
        }
    }
    out
}

/// Setup runs in the sandbox, in the work tree, before the engine, with
/// the setup list (the stand-in reached, its answer left in the work tree
/// for the engine); the agent's list (empty) is in force once the engine
/// starts (the same destination refused); a setup process holding a
/// connection into the agent phase is cut (the drip stops); every attempt
/// is on the record with its phase.
#[tokio::test(flavor = "multi_thread")]
async fn setup_reaches_its_list_in_the_sandbox_and_the_agent_does_not() {
    if !sandbox_available() || !curl_available() {
        return;
    }
    let port = stand_in().await;
    let home = Home::new();
    let fetch =
        format!("curl -s --noproxy '' -o fetched.txt http://127.0.0.1:{port}/deps && echo fetched");
    let drip = format!("(curl -s --noproxy '' -o \"$HOME/drip\" http://127.0.0.1:{port}/drip &) ; sleep 1; echo dripping");
    let toml = |s: &str| s.replace('"', "\\\"");
    let setup = format!(
        "commands = [\"{fetch}\", \"{}\"]\nnetwork = [\"127.0.0.1:{port}\"]",
        toml(&drip)
    );
    let script = [
        "cp fetched.txt \"$HOME/fetched\"".to_string(),
        "a=$(wc -c < \"$HOME/drip\"); sleep 1; b=$(wc -c < \"$HOME/drip\")".to_string(),
        "[ \"$a\" -gt 0 ] && [ \"$a\" = \"$b\" ] && echo cut > \"$HOME/drip-state\" || echo \"flowing $a $b\" > \"$HOME/drip-state\"".to_string(),
        curl("agent", &format!("http://127.0.0.1:{port}/x"), true),
    ]
    .join("\n");
    let spec = setup_job(&home, "sandbox", &setup, &script, port);
    let out = home
        .paddock(&["run", "--json", "--keep", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    let job_home = home.jobs().join(&rec.id).join("home");
    let read = |name: &str| std::fs::read_to_string(job_home.join(name)).unwrap_or_default();
    assert_eq!(
        (read("fetched"), read("drip-state"), read("seen")),
        (
            HELLO.to_string(),
            "cut\n".to_string(),
            "agent 403 0\n".to_string()
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let store = home.store().await;
    let events = store.events(&rec.id, 0).await.unwrap();
    assert_eq!(
        setup_events(&events),
        vec![
            (fetch, Some(0), false, "fetched\n".to_string()),
            (drip, Some(0), false, "dripping\n".to_string()),
        ]
    );
    let rows = store.egress(&rec.id).await.unwrap();
    let phases: Vec<(String, EgressPhase, bool, Option<String>)> = rows
        .iter()
        .map(|r| {
            (
                r.host.clone() + ":" + &r.port.to_string(),
                r.phase,
                r.allowed,
                r.rule.clone(),
            )
        })
        .collect();
    let at = format!("127.0.0.1:{port}");
    assert_eq!(phases.len(), 3, "{phases:?}");
    assert!(
        phases.contains(&(at.clone(), EgressPhase::Setup, true, None)),
        "{phases:?}"
    );
    assert!(
        phases.contains(&(
            at.clone(),
            EgressPhase::Agent,
            false,
            Some("ip_literal".into())
        )),
        "{phases:?}"
    );
    std::fs::remove_dir_all(home.jobs().join(&rec.id)).unwrap();
}

/// A failing setup command ends the job naming it and its exit code: the
/// next command and the engine never run, what the command left running
/// is gone, its output is its `tool_result`.
#[tokio::test(flavor = "multi_thread")]
async fn a_failing_setup_command_fails_the_job_and_leaves_nothing() {
    let port = stand_in().await;
    let home = Home::new();
    let setup = "commands = [\"(setsid sh -c 'sleep 2; touch survivor' &); echo before; exit 3\", \"touch never\"]";
    let spec = setup_job(&home, "process", setup, "touch \"$HOME/engine-ran\"", port);
    let out = home
        .paddock(&["run", "--json", "--keep", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    let reason = "setup command 1 of 2 (`(setsid sh -c 'sleep 2; touch survivor' &); echo before; exit 3`) exited with code 3; the engine was not started";
    assert_eq!(
        (out.status.code(), rec.status, rec.reason.as_deref()),
        (Some(1), JobStatus::Failed, Some(reason)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = home.store().await.events(&rec.id, 0).await.unwrap();
    assert_eq!(
        setup_events(&events),
        vec![(
            "(setsid sh -c 'sleep 2; touch survivor' &); echo before; exit 3".to_string(),
            Some(3),
            true,
            "before\n".to_string()
        )]
    );
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let dir = home.jobs().join(&rec.id);
    assert_eq!(
        (
            dir.join("work/survivor").exists(),
            dir.join("work/never").exists(),
            dir.join("home/engine-ran").exists()
        ),
        (false, false, false)
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// A setup command failing because the proxy refused what it fetched
/// (the registry forgotten in `setup.network`): the job's reason names
/// the refused destinations, each once, and where to ask for them.
#[tokio::test(flavor = "multi_thread")]
async fn a_setup_failing_on_a_refused_destination_names_it_in_the_reason() {
    if !curl_available() {
        return;
    }
    let port = stand_in().await;
    let home = Home::new();
    let command = "curl -sf --max-time 5 -o /dev/null http://registry.example/a || curl -sf --max-time 5 -o /dev/null http://registry.example/b || curl -s --max-time 5 -o /dev/null https://files.example/c";
    let setup = format!("commands = [\"{command}\"]\nnetwork = [\"127.0.0.1:{port}\"]");
    let spec = setup_job(&home, "process", &setup, "touch \"$HOME/engine-ran\"", port);
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    let reason = format!(
        "setup command 1 of 1 (`{command}`) exited with code 56; the engine was not started. \
         The egress proxy refused during setup: `registry.example:80` (allowlist), `files.example:443` (allowlist); \
         a spec asks for a destination in `setup.network`, within host profile `egress-test`'s `network.setup_allow` (docs/egress.md)"
    );
    assert_eq!(
        (rec.status, rec.reason.as_deref()),
        (JobStatus::Failed, Some(reason.as_str())),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A setup past its `timeout_secs` is killed and fails the job, saying so.
#[tokio::test(flavor = "multi_thread")]
async fn a_setup_past_its_timeout_is_killed_and_fails_the_job() {
    let port = stand_in().await;
    let home = Home::new();
    let setup = "commands = [\"sleep 600\"]\ntimeout_secs = 1";
    let spec = setup_job(&home, "process", setup, "touch \"$HOME/engine-ran\"", port);
    let started = std::time::Instant::now();
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    assert_eq!(
        (rec.status, rec.reason.as_deref()),
        (
            JobStatus::Failed,
            Some("setup command 1 of 1 (`sleep 600`) was still running when the setup's 1 s (setup.timeout_secs) ran out; it was killed and the engine was not started")
        )
    );
    // Killed at its 1 s, not left to its 600 s: a bound well below that
    // and far above the few seconds a job takes, which a loaded host (the
    // suites side by side) stretches.
    assert!(started.elapsed() < std::time::Duration::from_secs(300));
}

/// A setup command that double-forks a `setsid` daemon (its own session,
/// working directory `/`, every descriptor closed, nothing of the job's
/// directory open) holding a download through the proxy: on the
/// `process` rung (no PID namespace) the daemon does not outlive its
/// command (the supervisor, a subreaper, kills the command's whole tree
/// when the command ends: the daemon is killed mid-download, never seeing
/// it end), so nothing reaches it in the agent phase: one record, allowed
/// in setup. Its rule is `phase_switch` when the switch reaches the
/// proxy's relay before the daemon's end does (the relay sees a dead
/// reader only on its next write, up to a drip later: an idle machine)
/// and none when the end comes first (a loaded one: 3 of 6 runs at load
/// 14, which this test once required `phase_switch` of).
#[tokio::test(flavor = "multi_thread")]
async fn a_double_forked_setup_daemon_loses_its_download_at_the_switch() {
    let port = stand_in().await;
    let home = Home::new();
    let out_dir = tempfile::tempdir().unwrap();
    let pidfile = out_dir.path().join("pid");
    let countfile = out_dir.path().join("count");
    let daemon = format!(
        r#"import os, sys, urllib.request
if os.fork(): os._exit(0)
os.setsid()
if os.fork(): os._exit(0)
os.chdir("/")
fd = os.open("/dev/null", os.O_RDWR)
for i in (0, 1, 2): os.dup2(fd, i)
os.closerange(3, 4096)
open("{pid}", "w").write(str(os.getpid()))
for k in ("no_proxy", "NO_PROXY"): os.environ.pop(k, None)
opener = urllib.request.build_opener(urllib.request.ProxyHandler({{"http": os.environ["HTTP_PROXY"]}}))
n = 0
try:
    r = opener.open("http://127.0.0.1:{port}/drip", timeout=60)
    while True:
        b = r.read(1024)
        if not b: break
        n += len(b)
        open("{count}.new", "w").write(str(n))
        os.replace("{count}.new", "{count}")
    end = "end of file"
except Exception as e:
    end = type(e).__name__
open("{count}", "a").write(" " + end)
"#,
        pid = pidfile.display(),
        count = countfile.display(),
    );
    std::fs::write(out_dir.path().join("daemon.py"), &daemon).unwrap();
    // Setup ends only once the daemon's download has bytes (not after a
    // fixed sleep, which a loaded machine outran: the connection then
    // opened in the agent phase and was refused instead of cut), so the
    // switch always finds it open.
    let line = format!(
        "python3 {} && for i in $(seq 600); do [ -s {} ] && break; sleep 0.05; done && echo started",
        out_dir.path().join("daemon.py").display(),
        countfile.display()
    );
    let setup = format!(
        "commands = [{}]\nnetwork = [\"127.0.0.1:{port}\"]",
        serde_json::to_string(&line).unwrap()
    );
    let spec = setup_job(&home, "process", &setup, "sleep 1", port);
    let (rec, _) = run_kept_script_job(&home, &spec).await;
    let rows = home.store().await.egress(&rec.id).await.unwrap();
    let setup_rows: Vec<(EgressPhase, bool, Option<String>)> = rows
        .iter()
        .filter(|r| r.port == port)
        .map(|r| (r.phase, r.allowed, r.rule.clone()))
        .collect();
    // The job's own end is part of the value (a script that ends
    // without a turn: failed, so saying): the engine did start.
    let ended_by = |rule: Option<String>| match rule.as_deref() {
        None | Some("phase_switch") => "its command's end or the switch".to_string(),
        Some(other) => other.to_string(),
    };
    let seen: Vec<(EgressPhase, bool, String)> = setup_rows
        .into_iter()
        .map(|(phase, allowed, rule)| (phase, allowed, ended_by(rule)))
        .collect();
    assert_eq!(
        (rec.status, rec.reason.clone(), seen),
        (
            JobStatus::Failed,
            Some("the engine exited without finishing its turn".into()),
            vec![(
                EgressPhase::Setup,
                true,
                "its command's end or the switch".to_string()
            )]
        ),
        "{rows:?}"
    );
    // The daemon is gone.
    let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().parse().unwrap();
    let mut gone = false;
    for _ in 0..100 {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let count = std::fs::read_to_string(&countfile).unwrap_or_default();
    assert!(
        gone,
        "the daemon {pid} outlived the job; its download: {count}"
    );
    // It had the download going, and was killed with it (a daemon that
    // saw its download end would have written how).
    let got: u64 = count.parse().unwrap_or(0);
    assert!(got > 0, "{count}");
    std::fs::remove_dir_all(home.jobs().join(&rec.id)).unwrap();
}

/// A setup whose commands all exit 0 though the proxy refused one fetch
/// and could not reach another (`curl ... || true`: what they made is
/// partial) is not stored in the setup cache, the event naming both
/// destinations, and the next job runs the setup again, where it was
/// stored and every later job of the same key restored the partial output
/// without fetching again.
async fn a_setup_that_ignored_a_refused_fetch_is_not_stored_on(rung: &str) {
    let port = stand_in().await;
    // Allowed, opened, but nothing listens there: `connect`.
    let closed = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let home = Home::new();
    let commands = [
        format!("curl -sf --noproxy '' --max-time 5 -o got.txt http://127.0.0.1:{port}/deps"),
        "curl -sf --max-time 5 -o extra.txt http://registry.example/extra || true".to_string(),
        format!(
            "curl -sf --noproxy '' --max-time 5 -o more.txt http://127.0.0.1:{closed}/more || true"
        ),
    ];
    let list = commands
        .iter()
        .map(|c| format!("'''{c}'''"))
        .collect::<Vec<_>>()
        .join(", ");
    let spec = fake_codex_job(&home, rung, "true", 60);
    append_to_spec(
        &spec,
        &format!(
            "[setup]\ncommands = [{list}]\nnetwork = [\"127.0.0.1:{port}\", \"127.0.0.1:{closed}\"]\n"
        ),
    );
    under_profile(
        &spec,
        &format!(
            "id = \"egress-test\"\n[network]\nsetup_allow = [\"127.0.0.1:{port}\", \"127.0.0.1:{closed}\"]\nopen_addresses = [\"127.0.0.1:{port}\", \"127.0.0.1:{closed}\"]\n"
        ),
    );
    if rung == "process" {
        let text = std::fs::read_to_string(&spec).unwrap();
        std::fs::write(&spec, format!("{text}accept_degraded = [\"network\"]\n")).unwrap();
    }
    let mut runs = Vec::new();
    for _ in 0..2 {
        let out = home
            .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
            .await;
        let rec = record(&out);
        let events = home.store().await.events(&rec.id, 0).await.unwrap();
        let cache = setup_cache_statuses(&events);
        let ran: Vec<Option<i64>> = setup_events(&events).into_iter().map(|c| c.1).collect();
        runs.push((cache, ran));
    }
    let key = setup_cache_key(runs[0].0.first().map_or("", String::as_str));
    let once = (
        vec![
            format!("not in the setup cache (key {key}); the setup commands run"),
            format!(
                "not stored in the setup cache (key {key}): its commands exited 0, but during \
                 setup the egress proxy refused `registry.example:80` (allowlist) and did not \
                 reach `127.0.0.1:{closed}` (connect), on the setup phase's list: what they made \
                 may lack what those would have fetched (a command that ignores a failure, \
                 `cmd || true`, exits 0 without it); the next job runs the setup again (the \
                 `network` events say why each was refused or not reached)"
            ),
        ],
        vec![Some(0), Some(0), Some(0)],
    );
    assert_eq!(runs, vec![once.clone(), once], "{rung}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_setup_that_ignored_a_refused_fetch_is_not_stored() {
    if !curl_available() {
        return;
    }
    a_setup_that_ignored_a_refused_fetch_is_not_stored_on("process").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn on_the_sandbox_rung_a_setup_that_ignored_a_refused_fetch_is_not_stored() {
    if !sandbox_available() || !curl_available() {
        return;
    }
    a_setup_that_ignored_a_refused_fetch_is_not_stored_on("sandbox").await;
}

/// A setup refused by the address its listed destination resolved to
/// (`localhost`, loopback, which the host profile does not open) fails
/// naming that address and the host profile's `network.open_addresses`,
/// where its reason told the user to list in `setup.network` what the
/// spec listed already (as for an npm registry that a host's DNS answers
/// with a private mirror's address).
#[tokio::test(flavor = "multi_thread")]
async fn a_setup_refused_by_its_destinations_address_names_it_and_the_profiles_advice() {
    if !curl_available() {
        return;
    }
    let port = stand_in().await;
    let home = Home::new();
    let command =
        format!("curl -sf --noproxy '' --max-time 5 -o got.txt http://localhost:{port}/deps");
    let spec = fake_codex_job(&home, "process", "true", 60);
    append_to_spec(
        &spec,
        &format!("[setup]\ncommands = [\"{command}\"]\nnetwork = [\"localhost:{port}\"]\n"),
    );
    under_profile(
        &spec,
        &format!("id = \"egress-test\"\n[network]\nsetup_allow = [\"localhost:{port}\"]\n"),
    );
    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(&spec, format!("{text}accept_degraded = [\"network\"]\n")).unwrap();
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    let reason = format!(
        "setup command 1 of 1 (`{command}`) exited with code 22; the engine was not started. \
         Refused during setup by the address it resolved to: `localhost:{port}` at \
         127.0.0.1:{port} (deny_list:loopback); loopback, private, link-local, metadata and \
         other special-purpose addresses and this host's own are closed to jobs; only the \
         job's host profile (`egress-test`) can open one, one `address:port` at a time \
         (`network.open_addresses`, docs/egress.md)"
    );
    assert_eq!(
        (rec.status, rec.reason.as_deref()),
        (JobStatus::Failed, Some(reason.as_str())),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

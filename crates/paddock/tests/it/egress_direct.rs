//! Direct connection attempts on the `sandbox` rung (docs/egress.md,
//! "Direct connections"): a client that ignores the proxy and connects
//! by itself (TCP to an IP literal, UDP to a DNS server, IPv6) fails at
//! once inside the job, and each destination is on the record once, as
//! a refused `network` event and row of rule `direct:<transport>` in the
//! phase it was tried in, and in the closeout's refused list; a DNS query
//! is the name it asks for (`direct:dns`), through the sandbox's own
//! resolver too. A flood to
//! ever new destinations costs the store a fixed number of rows.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use paddock_protocol::{EgressPhase, EgressRecord, EventBody};
use paddock_test_support::prelude::*;

/// A sandbox job whose setup runs `setup` and whose stand-in engine runs
/// `script`; its records (rows, `network` events) and closeout's refused
/// section, and what `script` left in `$HOME/seen`.
struct Ran {
    rows: Vec<EgressRecord>,
    events: Vec<EgressRecord>,
    refused: String,
    seen: String,
    setup_output: String,
}

async fn run(setup: Option<&str>, script: &str) -> Ran {
    let home = Home::new();
    let spec = fake_codex_job(&home, "sandbox", script, 120);
    if let Some(setup) = setup {
        append_to_spec(
            &spec,
            &format!(
                "[setup]\ncommands = [{}]\n",
                serde_json::to_string(setup).unwrap()
            ),
        );
    }
    let (rec, job_home) = run_kept_script_job(&home, &spec).await;
    let store = home.store().await;
    let events = store.events(&rec.id, 0).await.unwrap();
    let closeout = home.closeout(&rec.id);
    let ran = Ran {
        rows: store.egress(&rec.id).await.unwrap(),
        events: events
            .iter()
            .filter_map(|e| match &e.body {
                EventBody::Network(r) => Some(r.clone()),
                _ => None,
            })
            .collect(),
        refused: closeout
            .split("### ")
            .find(|s| s.starts_with("Network refused"))
            .unwrap_or_default()
            .to_string(),
        seen: std::fs::read_to_string(job_home.join("seen")).unwrap_or_default(),
        setup_output: events
            .iter()
            .find_map(|e| match &e.body {
                EventBody::ToolResult { output, .. } => Some(output.clone()),
                _ => None,
            })
            .unwrap_or_default(),
    };
    std::fs::remove_dir_all(home.jobs().join(&rec.id)).unwrap();
    ran
}

/// `host:port`, an IPv6 address in brackets.
fn at(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The refused record of a direct attempt.
fn direct(phase: EgressPhase, transport: &str, host: &str, port: u16) -> EgressRecord {
    let at = at(host, port);
    let answer = if transport == "tcp" {
        "answered with a TCP reset"
    } else {
        "answered with ICMP port unreachable"
    };
    EgressRecord {
        host: host.into(),
        port,
        method: None,
        address: Some(at.clone()),
        bytes_up: 0,
        bytes_down: 0,
        duration_ms: 0,
        phase,
        allowed: false,
        rule: Some(format!("direct:{transport}")),
        reason: Some(format!("a direct {transport} connection to {at}, not through the egress proxy: nothing leads out of the sandbox but the proxy; {answer}")),
        credential: None,
        substituted: None,
    }
}

/// The refused record of a DNS lookup of `name` sent to `server`:53.
fn lookup(phase: EgressPhase, name: &str, qtype: &str, server: &str) -> EgressRecord {
    let at = at(server, 53);
    EgressRecord {
        host: name.into(),
        port: 53,
        method: None,
        address: Some(at.clone()),
        bytes_up: 0,
        bytes_down: 0,
        duration_ms: 0,
        phase,
        allowed: false,
        rule: Some("direct:dns".into()),
        reason: Some(format!("a direct DNS lookup of {name} ({qtype}) sent to {at}, not through the egress proxy: the proxy resolves the names it is asked to reach, and nothing leads out of the sandbox but the proxy; answered with ICMP port unreachable")),
        credential: None,
        substituted: None,
    }
}

fn sorted(mut v: Vec<EgressRecord>) -> Vec<EgressRecord> {
    v.sort_by_key(|r| format!("{r:?}"));
    v
}

/// The engine's attempts: TCP to an IPv4 literal (twice: one record),
/// a DNS query for example.com to 8.8.8.8:53 and the same query to
/// 1.1.1.1:53 (one record: the name), TCP over IPv6, a datagram that is
/// no DNS query to an IPv6 address's port 53 (the UDP flow it is), and a
/// lookup of pypi.org through the sandbox's own resolver (its
/// `/etc/resolv.conf`); each one's error as Python names it.
const ATTEMPTS: &str = r#"cat > "$HOME/direct.py" <<'EOF'
import errno, socket
QUERY = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01"
def attempt(family, kind, addr, payload=QUERY):
    s = socket.socket(family, kind)
    s.settimeout(10)
    try:
        s.connect(addr)
        if kind == socket.SOCK_DGRAM:
            s.send(payload)
            s.recv(512)
        return "answered"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e))
    finally:
        s.close()
def resolve(name):
    try:
        socket.gethostbyname(name)
        return "resolved"
    except socket.gaierror:
        return "gaierror"
print(" ".join([
    attempt(socket.AF_INET, socket.SOCK_STREAM, ("192.0.2.10", 80)),
    attempt(socket.AF_INET, socket.SOCK_STREAM, ("192.0.2.10", 80)),
    attempt(socket.AF_INET, socket.SOCK_DGRAM, ("8.8.8.8", 53)),
    attempt(socket.AF_INET, socket.SOCK_DGRAM, ("1.1.1.1", 53)),
    attempt(socket.AF_INET6, socket.SOCK_STREAM, ("2001:db8::7", 443)),
    attempt(socket.AF_INET6, socket.SOCK_DGRAM, ("2001:4860:4860::8888", 53), b"not dns"),
    resolve("PyPI.org"),
]))
EOF
python3 "$HOME/direct.py" > "$HOME/seen" 2>&1
"#;

/// A setup command's and the engine's direct attempts fail at once
/// ("connection refused", not a timeout and not "network unreachable")
/// and each destination is one refused row and event of its phase, and
/// one line of the closeout. Before the watcher the attempts failed with
/// ENETUNREACH and nothing was on the record.
#[tokio::test(flavor = "multi_thread")]
async fn direct_attempts_fail_fast_and_each_destination_is_on_the_record_once() {
    if !sandbox_available() {
        return;
    }
    let ran = run(
        Some("python3 -c 'import socket; socket.create_connection((\"203.0.113.7\", 443), 10)' 2>&1 | tail -n 1; true"),
        ATTEMPTS,
    )
    .await;
    assert_eq!(
        ran.seen,
        "ECONNREFUSED ECONNREFUSED ECONNREFUSED ECONNREFUSED ECONNREFUSED ECONNREFUSED gaierror\n"
    );
    assert_eq!(
        ran.setup_output,
        "ConnectionRefusedError: [Errno 111] Connection refused\n"
    );
    let want = sorted(vec![
        direct(EgressPhase::Setup, "tcp", "203.0.113.7", 443),
        direct(EgressPhase::Agent, "tcp", "192.0.2.10", 80),
        lookup(EgressPhase::Agent, "example.com", "A", "8.8.8.8"),
        direct(EgressPhase::Agent, "tcp", "2001:db8::7", 443),
        direct(EgressPhase::Agent, "udp", "2001:4860:4860::8888", 53),
        lookup(EgressPhase::Agent, "pypi.org", "A", "198.18.0.53"),
    ]);
    assert_eq!(sorted(ran.rows.clone()), want);
    assert_eq!(ran.events, ran.rows);
    let mut lines: Vec<&str> = ran
        .refused
        .lines()
        .skip(2)
        .filter(|l| !l.is_empty())
        .collect();
    lines.sort();
    assert_eq!(
        lines,
        vec![
            "- `192.0.2.10:80` (agent phase, direct:tcp)",
            "- `203.0.113.7:443` (setup phase, direct:tcp)",
            "- `[2001:4860:4860::8888]:53` (agent phase, direct:udp)",
            "- `[2001:db8::7]:443` (agent phase, direct:tcp)",
            "- `example.com` (agent phase, direct:dns)",
            "- `pypi.org` (agent phase, direct:dns)",
        ]
    );
}

/// 100,000 SYNs, each to a new destination: the first 64 destinations
/// are recorded one by one, the rest are one record counting them; the
/// store holds 65 rows for the flood, whatever its size.
#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_syns_to_new_destinations_costs_a_fixed_number_of_rows() {
    if !sandbox_available() {
        return;
    }
    let script = r#"python3 -c '
import socket
for i in range(100000):
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex(("10.%d.%d.%d" % (i >> 16, (i >> 8) & 255, i & 255), 80))
    s.close()
print("sent")
' > "$HOME/seen" 2>&1
"#;
    let ran = run(None, script).await;
    assert_eq!(ran.seen, "sent\n");
    assert_eq!(ran.events, ran.rows);
    let (counted, one_by_one): (Vec<EgressRecord>, Vec<EgressRecord>) = ran
        .rows
        .into_iter()
        .partition(|r| r.rule.as_deref() == Some("direct:unrecorded"));
    let want: Vec<EgressRecord> = (0..64)
        .map(|i| direct(EgressPhase::Agent, "tcp", &format!("10.0.0.{i}"), 80))
        .collect();
    assert_eq!(sorted(one_by_one), sorted(want));
    // The count: what the watcher read past its cap (the kernel drops
    // what the device's queue cannot hold while the job outruns it).
    assert_eq!(counted.len(), 1, "{counted:?}");
    let reason = counted[0].reason.clone().unwrap();
    let n: u64 = reason.split(' ').next().unwrap().parse().unwrap();
    assert!(n > 0 && n <= 100_000 - 64, "{reason}");
    assert_eq!(
        EgressRecord {
            reason: None,
            ..counted[0].clone()
        },
        EgressRecord {
            host: String::new(),
            port: 0,
            method: None,
            address: None,
            bytes_up: 0,
            bytes_down: 0,
            duration_ms: 0,
            phase: EgressPhase::Agent,
            allowed: false,
            rule: Some("direct:unrecorded".into()),
            reason: None,
            credential: None,
            substituted: None,
        }
    );
    assert_eq!(reason, format!("{n} more direct connection attempts to destinations past the first 64 of the command were not recorded one by one"));
    assert!(
        ran.refused.contains(&format!("- {n} more direct connection attempts (agent phase) to further destinations, not recorded one by one\n")),
        "{}",
        ran.refused
    );
}

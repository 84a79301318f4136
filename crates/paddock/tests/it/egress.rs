//! The egress proxy driven over loopback: probes that try every way around
//! it (IP literals, denied ports, SNI/authority mismatch, names resolving
//! to loopback, link-local and metadata addresses, IPv6 and mapped forms,
//! DNS rebinding, garbage and oversized requests, a setup-phase connection
//! kept open into the agent phase) must fail, each with its positive twin
//! (the allowed destination works, bytes flow both ways, counted). The
//! stand-in destinations listen on loopback, which the deny list refuses
//! unless the test's "host profile" opens their exact address and port.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use paddock::egress::{
    Allowlist, DenyList, EgressConfig, EgressProxy, PhaseLists, ProxyLimits, Resolver,
};
use paddock_protocol::{EgressMethod, EgressPhase, EgressRecord};
use paddock_test_support::dns::MockResolver;
use paddock_test_support::egress_record::{egress_record, next_record};
use paddock_test_support::tls::client_hello;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(5);

/// How a stand-in answers a connection.
#[derive(Clone, Copy)]
enum Mode {
    /// Reads to the end, then answers `reply` and closes.
    ReadAllThenReply(&'static [u8]),
    /// Echoes every chunk until the end.
    Echo,
    /// Reads one HTTP head, answers `200 hello`, closes.
    Http,
}

/// A destination on loopback recording what each connection sent.
struct StandIn {
    addr: SocketAddr,
    received: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl StandIn {
    async fn start(bind: &str, mode: Mode) -> StandIn {
        let listener = TcpListener::bind(bind).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = received.clone();
        tokio::spawn(async move {
            loop {
                let (mut conn, _) = listener.accept().await.unwrap();
                let log = log.clone();
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    let mut buf = [0u8; 65536];
                    loop {
                        let n = conn.read(&mut buf).await.unwrap_or(0);
                        if n == 0 {
                            break;
                        }
                        got.extend_from_slice(&buf[..n]);
                        match mode {
                            Mode::Echo => conn.write_all(&buf[..n]).await.unwrap(),
                            Mode::Http if got.windows(4).any(|w| w == b"\r\n\r\n") => break,
                            _ => {}
                        }
                    }
                    match mode {
                        Mode::ReadAllThenReply(reply) => {
                            let _ = conn.write_all(reply).await;
                        }
                        Mode::Http => {
                            let _ = conn
                                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello")
                                .await;
                        }
                        Mode::Echo => {}
                    }
                    let _ = conn.shutdown().await;
                    log.lock().unwrap().push(got);
                });
            }
        });
        StandIn { addr, received }
    }

    fn port(&self) -> u16 {
        self.addr.port()
    }

    /// What every finished connection sent, waiting for `n` of them.
    async fn connections(&self, n: usize) -> Vec<Vec<u8>> {
        tokio::time::timeout(WAIT, async {
            loop {
                let got = self.received.lock().unwrap().clone();
                if got.len() >= n {
                    return got;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("the stand-in's connections")
    }

    /// What finished connections sent so far.
    fn so_far(&self) -> Vec<Vec<u8>> {
        self.received.lock().unwrap().clone()
    }
}

struct Proxy {
    proxy: EgressProxy,
    records: mpsc::Receiver<EgressRecord>,
}

impl Proxy {
    async fn start(
        setup: &[String],
        agent: &[String],
        opened: &[SocketAddr],
        resolver: Arc<dyn Resolver>,
        phase: EgressPhase,
    ) -> Proxy {
        Proxy::with_limits(
            setup,
            agent,
            opened,
            resolver,
            phase,
            ProxyLimits::default(),
        )
        .await
    }

    async fn with_limits(
        setup: &[String],
        agent: &[String],
        opened: &[SocketAddr],
        resolver: Arc<dyn Resolver>,
        phase: EgressPhase,
        limits: ProxyLimits,
    ) -> Proxy {
        let config = EgressConfig {
            lists: PhaseLists {
                setup: Allowlist::parse(setup).unwrap(),
                agent: Allowlist::parse(agent).unwrap(),
            },
            deny: DenyList::of_this_host(opened.iter().copied()).unwrap(),
            resolver,
            limits,
            phase,
            credentials: None,
            in_force: Default::default(),
        };
        let (tx, records) = mpsc::channel(64);
        let proxy = EgressProxy::bind("127.0.0.1:0".parse().unwrap(), config, tx)
            .await
            .unwrap();
        Proxy { proxy, records }
    }

    /// The agent-phase proxy allowing `agent`, opening `opened`.
    async fn agent(agent: &[String], opened: &[SocketAddr], resolver: MockResolver) -> Proxy {
        Proxy::start(&[], agent, opened, Arc::new(resolver), EgressPhase::Agent).await
    }

    async fn record(&mut self) -> EgressRecord {
        next_record(&mut self.records, WAIT).await
    }

    async fn connect(&self) -> TcpStream {
        TcpStream::connect(self.proxy.local_addr().unwrap())
            .await
            .unwrap()
    }

    /// Sends `CONNECT authority`; the proxy's answer head (and body if
    /// refused) and the stream.
    async fn tunnel(&self, authority: &str) -> (String, TcpStream) {
        let mut s = self.connect().await;
        s.write_all(
            format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if s.read(&mut byte).await.unwrap() == 0 {
                break;
            }
            head.push(byte[0]);
        }
        let mut text = String::from_utf8(head).unwrap();
        if !text.starts_with("HTTP/1.1 200") {
            let mut rest = String::new();
            s.read_to_string(&mut rest).await.unwrap();
            text.push_str(&rest);
        }
        (text, s)
    }
}

fn list(entries: &[&str]) -> Vec<String> {
    entries.iter().map(|e| e.to_string()).collect()
}

fn allowed(host: &str, port: u16, address: SocketAddr, up: u64, down: u64) -> EgressRecord {
    EgressRecord {
        method: Some(EgressMethod::Connect),
        address: Some(address.to_string()),
        bytes_up: up,
        bytes_down: down,
        ..egress_record(host, port)
    }
}

fn refused(host: &str, port: u16, address: Option<&str>, rule: &str, reason: &str) -> EgressRecord {
    EgressRecord {
        method: Some(EgressMethod::Connect),
        address: address.map(str::to_string),
        allowed: false,
        rule: Some(rule.into()),
        reason: Some(reason.into()),
        ..egress_record(host, port)
    }
}

/// The refusal's status line up to its reason (the code and the status's
/// own text) and rule header, from a whole answer.
fn status_and_rule(answer: &str) -> (String, String) {
    let status = status(answer);
    let rule = answer
        .lines()
        .find_map(|l| l.strip_prefix("x-paddock-egress-rule: "))
        .unwrap_or_default()
        .to_string();
    (status, rule)
}

/// An answer's status line without the reason the proxy adds to it
/// (`refusal.rs` checks that whole).
fn status(answer: &str) -> String {
    let line = answer.lines().next().unwrap_or_default();
    line.split(" (paddock egress proxy: ")
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Through a tunnel: a ClientHello naming `sni`, then `data`; the half
/// close; everything the destination answered.
async fn through(mut s: TcpStream, sni: Option<&str>, data: &[u8]) -> Vec<u8> {
    let mut out = client_hello(sni, &[], 16384);
    out.extend_from_slice(data);
    s.write_all(&out).await.unwrap();
    s.shutdown().await.unwrap();
    let mut back = Vec::new();
    let _ = tokio::time::timeout(WAIT, s.read_to_end(&mut back)).await;
    back
}

/// The positive twin of most probes: an allowed name, through a tunnel,
/// bytes both ways, counted, the destination receiving exactly what was
/// sent.
#[tokio::test]
async fn an_allowed_tunnel_carries_bytes_both_ways_and_counts_them() {
    let dest = StandIn::start("127.0.0.1:0", Mode::ReadAllThenReply(b"pong-pong")).await;
    let port = dest.port();
    let resolver = MockResolver::new().with("registry.test", &["127.0.0.1"]);
    let mut p = Proxy::agent(
        &list(&[&format!("registry.test:{port}")]),
        &[dest.addr],
        resolver,
    )
    .await;
    let (head, s) = p.tunnel(&format!("registry.test:{port}")).await;
    assert_eq!(head, "HTTP/1.1 200 Connection established\r\n\r\n");
    let back = through(s, Some("registry.test"), b"ping").await;
    assert_eq!(back, b"pong-pong");
    let hello = client_hello(Some("registry.test"), &[], 16384);
    let mut sent = hello.clone();
    sent.extend_from_slice(b"ping");
    assert_eq!(dest.connections(1).await, vec![sent]);
    assert_eq!(
        p.record().await,
        allowed("registry.test", port, dest.addr, hello.len() as u64 + 4, 9)
    );
}

/// An IP literal is refused even where its address is opened, unless the
/// list names that literal; then it works (without SNI, as clients send
/// to an IP).
#[tokio::test]
async fn an_ip_literal_is_refused_unless_listed_exactly() {
    let dest = StandIn::start("127.0.0.1:0", Mode::ReadAllThenReply(b"ok")).await;
    let port = dest.port();
    let authority = format!("127.0.0.1:{port}");
    let mut p = Proxy::agent(&list(&["registry.test"]), &[dest.addr], MockResolver::new()).await;
    let (answer, _) = p.tunnel(&authority).await;
    assert_eq!(
        status_and_rule(&answer),
        ("HTTP/1.1 403 Forbidden".into(), "ip_literal".into())
    );
    assert!(answer.ends_with(&format!("paddock egress proxy: 127.0.0.1:{port} refused in the agent phase: 127.0.0.1:{port} is an IP address that is not on the agent phase's list\nrule: ip_literal\nTo reach it, the job's spec must list `127.0.0.1:{port}` in `network.allow` (docs/egress.md; the job runs under no host profile); ask whoever runs this job.\n")), "{answer}");
    assert_eq!(
        p.record().await,
        refused(
            "127.0.0.1",
            port,
            None,
            "ip_literal",
            &format!("127.0.0.1:{port} is an IP address that is not on the agent phase's list")
        )
    );
    assert_eq!(dest.so_far(), Vec::<Vec<u8>>::new());

    let mut twin = Proxy::agent(&list(&[&authority]), &[dest.addr], MockResolver::new()).await;
    let (head, s) = twin.tunnel(&authority).await;
    assert_eq!(head, "HTTP/1.1 200 Connection established\r\n\r\n");
    assert_eq!(through(s, None, b"x").await, b"ok");
    let up = client_hello(None, &[], 16384).len() as u64 + 1;
    assert_eq!(
        twin.record().await,
        allowed("127.0.0.1", port, dest.addr, up, 2)
    );
}

/// A port the list does not name is refused before any lookup.
#[tokio::test]
async fn a_denied_port_is_refused_before_any_lookup() {
    let dest = StandIn::start("127.0.0.1:0", Mode::ReadAllThenReply(b"ok")).await;
    let port = dest.port();
    let resolver = Arc::new(MockResolver::new().with("registry.test", &["127.0.0.1"]));
    let mut p = Proxy::start(
        &[],
        &list(&["registry.test"]),
        &[dest.addr],
        resolver.clone(),
        EgressPhase::Agent,
    )
    .await;
    let (answer, _) = p.tunnel(&format!("registry.test:{port}")).await;
    assert_eq!(
        status_and_rule(&answer),
        ("HTTP/1.1 403 Forbidden".into(), "allowlist".into())
    );
    assert_eq!(
        p.record().await,
        refused(
            "registry.test",
            port,
            None,
            "allowlist",
            &format!("registry.test:{port} is not on the agent phase's list")
        )
    );
    assert_eq!(
        (resolver.lookups("registry.test"), dest.so_far()),
        (0, vec![])
    );
}

/// A tunnel whose ClientHello names another server, none, hides it (ECH)
/// or is not TLS is closed after the `200` without a byte sent upstream.
#[tokio::test]
async fn a_tunnel_must_speak_tls_to_the_host_it_named() {
    let dest = StandIn::start("127.0.0.1:0", Mode::ReadAllThenReply(b"secret")).await;
    let port = dest.port();
    let resolver = MockResolver::new().with("registry.test", &["127.0.0.1"]);
    let mut p = Proxy::agent(
        &list(&[&format!("registry.test:{port}")]),
        &[dest.addr],
        resolver,
    )
    .await;
    let authority = format!("registry.test:{port}");
    let ech = client_hello(Some("registry.test"), &[(0xfe0d, vec![0; 8])], 16384);
    let cases: Vec<(Vec<u8>, &str, String)> = vec![
        (
            client_hello(Some("evil.test"), &[], 16384),
            "sni_mismatch",
            "the TLS server name `evil.test` is not the CONNECT host `registry.test`".into(),
        ),
        (
            client_hello(None, &[], 16384),
            "sni_mismatch",
            "the ClientHello names no server; a tunnel to `registry.test` must".into(),
        ),
        (
            ech,
            "encrypted_client_hello",
            "the ClientHello uses Encrypted Client Hello, which hides the server name".into(),
        ),
        (
            b"SSH-2.0-OpenSSH_9.6\r\n".to_vec(),
            "not_tls",
            "the tunnel does not start with a TLS handshake".into(),
        ),
    ];
    let n = cases.len();
    for (bytes, rule, reason) in cases {
        let (head, mut s) = p.tunnel(&authority).await;
        assert_eq!(head, "HTTP/1.1 200 Connection established\r\n\r\n");
        s.write_all(&bytes).await.unwrap();
        let mut back = Vec::new();
        tokio::time::timeout(WAIT, s.read_to_end(&mut back))
            .await
            .unwrap()
            .unwrap_or(0);
        assert_eq!(back, b"", "{rule}");
        assert_eq!(
            p.record().await,
            refused(
                "registry.test",
                port,
                Some(&dest.addr.to_string()),
                rule,
                &reason
            )
        );
    }
    // The destination was connected to (before the 200) but got nothing.
    assert_eq!(dest.connections(n).await, vec![Vec::<u8>::new(); n]);
}

/// A ClientHello whose plain server name is the CONNECT host but that
/// also carries an encrypted server name in a code point other than the
/// published ECH's: the older Encrypted SNI (`0xffce`), the ECH drafts'
/// (`0xff02`, `0xfe08`-`0xfe0c`) and `ech_outer_extensions` (`0xfd00`).
/// A front reading one of them routes by the hidden name, so each is
/// refused like ECH, before a byte goes upstream. Before, only `0xfe0d`
/// was, and each of these reached the destination (`sni_mismatch` guarded
/// nothing: the plain name matched). The twin: GREASE (`0x0a0a`) and
/// `renegotiation_info` (`0xff01`), ordinary extensions beside them in
/// number, pass.
#[tokio::test]
async fn an_encrypted_server_name_of_any_draft_is_refused() {
    let dest = StandIn::start("127.0.0.1:0", Mode::ReadAllThenReply(b"ok")).await;
    let port = dest.port();
    let resolver = MockResolver::new().with("front.test", &["127.0.0.1"]);
    let mut p = Proxy::agent(
        &list(&[&format!("front.test:{port}")]),
        &[dest.addr],
        resolver,
    )
    .await;
    let authority = format!("front.test:{port}");
    let hidden: [u16; 10] = [
        0xffce, 0xff02, 0xff03, 0xff0c, 0xfe08, 0xfe09, 0xfe0a, 0xfe0b, 0xfe0c, 0xfd00,
    ];
    let mut got = Vec::new();
    let mut want = Vec::new();
    for kind in hidden {
        let (head, mut s) = p.tunnel(&authority).await;
        let hello = client_hello(Some("front.test"), &[(kind, vec![0, 1, 2, 3])], 16384);
        s.write_all(&hello).await.unwrap();
        let _ = s.shutdown().await;
        let mut back = Vec::new();
        let _ = tokio::time::timeout(WAIT, s.read_to_end(&mut back)).await;
        got.push((head, back, p.record().await));
        want.push((
            "HTTP/1.1 200 Connection established\r\n\r\n".to_string(),
            Vec::new(),
            refused(
                "front.test",
                port,
                Some(&dest.addr.to_string()),
                "encrypted_client_hello",
                &format!(
                    "the ClientHello has extension {kind:#06x}, an encrypted server name (Encrypted SNI or an Encrypted Client Hello draft), which hides the server name"
                ),
            ),
        ));
    }
    assert_eq!(got, want);
    // Connected to (before the 200), sent nothing.
    assert_eq!(
        dest.connections(hidden.len()).await,
        vec![Vec::<u8>::new(); hidden.len()]
    );
    for kind in [0x0a0a_u16, 0xff01] {
        let (head, mut s) = p.tunnel(&authority).await;
        assert_eq!(head, "HTTP/1.1 200 Connection established\r\n\r\n");
        let hello = client_hello(Some("front.test"), &[(kind, vec![0])], 16384);
        s.write_all(&hello).await.unwrap();
        s.shutdown().await.unwrap();
        let mut back = Vec::new();
        let _ = tokio::time::timeout(WAIT, s.read_to_end(&mut back)).await;
        assert_eq!(
            (back, p.record().await),
            (
                b"ok".to_vec(),
                allowed("front.test", port, dest.addr, hello.len() as u64, 2)
            ),
            "{kind:#06x}"
        );
    }
}

/// A server name is compared without regard to case (RFC 6066), as the
/// CONNECT host is: Node's `tls` and Python's `ssl` send it as the program
/// wrote it (`https://Registry.TEST/`), curl lowercases it. Each
/// spelling reaches the destination; the record names the host lowercase.
#[tokio::test]
async fn a_server_name_in_another_case_is_the_same_name() {
    let dest = StandIn::start("127.0.0.1:0", Mode::ReadAllThenReply(b"ok")).await;
    let port = dest.port();
    let resolver = MockResolver::new().with("registry.test", &["127.0.0.1"]);
    let mut p = Proxy::agent(
        &list(&[&format!("registry.test:{port}")]),
        &[dest.addr],
        resolver,
    )
    .await;
    let mut got = Vec::new();
    let mut want = Vec::new();
    for (authority, sni) in [
        ("Registry.TEST", "Registry.TEST"),
        ("registry.test", "REGISTRY.test."),
        ("REGISTRY.TEST.", "registry.test"),
    ] {
        let (head, s) = p.tunnel(&format!("{authority}:{port}")).await;
        let back = through(s, Some(sni), b"x").await;
        let record = p.record().await;
        got.push((head, back, record.host, record.allowed, record.rule));
        want.push((
            "HTTP/1.1 200 Connection established\r\n\r\n".to_string(),
            b"ok".to_vec(),
            "registry.test".to_string(),
            true,
            None,
        ));
    }
    assert_eq!(got, want);
}

/// Names resolving to loopback (v4, v6, mapped), link-local, the metadata
/// addresses, private ranges, or to a permitted address and a private one
/// together, are refused without a connection; so are IPv6 literals of
/// loopback, even listed.
#[tokio::test]
async fn names_and_literals_of_denied_addresses_are_refused() {
    let open = StandIn::start("127.0.0.1:0", Mode::ReadAllThenReply(b"ok")).await;
    let closed = StandIn::start("127.0.0.1:0", Mode::ReadAllThenReply(b"leak")).await;
    let port = closed.port();
    let names: &[(&str, &[&str], &str, &str)] = &[
        ("loop.test", &["127.0.0.1"], "127.0.0.1", "loopback"),
        ("loop6.test", &["::1"], "[::1]", "loopback"),
        (
            "mapped.test",
            &["::ffff:127.0.0.1"],
            "127.0.0.1",
            "loopback",
        ),
        (
            "meta.test",
            &["169.254.169.254"],
            "169.254.169.254",
            "metadata",
        ),
        (
            "meta6.test",
            &["fd00:ec2::254"],
            "[fd00:ec2::254]",
            "metadata",
        ),
        ("link.test", &["169.254.10.1"], "169.254.10.1", "link_local"),
        ("lan.test", &["192.168.1.10"], "192.168.1.10", "private"),
        ("cgnat.test", &["100.64.1.1"], "100.64.1.1", "cgnat"),
        ("zero.test", &["0.0.0.0"], "0.0.0.0", "unspecified"),
    ];
    let mut resolver = MockResolver::new();
    for (name, answer, _, _) in names {
        resolver = resolver.with(name, answer);
    }
    let mut allow: Vec<String> = names.iter().map(|(n, ..)| format!("{n}:{port}")).collect();
    allow.push(format!("[::1]:{port}"));
    allow.push(format!("[::ffff:127.0.0.1]:{port}"));
    let mut p = Proxy::agent(&allow, &[open.addr], resolver).await;
    for (name, _, address, range) in names {
        let (answer, _) = p.tunnel(&format!("{name}:{port}")).await;
        assert_eq!(
            status_and_rule(&answer),
            (
                "HTTP/1.1 403 Forbidden".into(),
                format!("deny_list:{range}")
            ),
            "{name}"
        );
        assert!(answer.contains("only a host profile can open one, one `address:port` at a time (`network.open_addresses`, docs/egress.md), and the job runs under none."), "{answer}");
        let at = format!("{address}:{port}");
        assert_eq!(
            p.record().await,
            refused(
                name,
                port,
                Some(&at),
                &format!("deny_list:{range}"),
                &format!("{name}:{port} is at {at}, a {range} address")
            )
        );
    }
    // A record's host is the address without brackets, as a direct
    // attempt's is (the closeout, the progress line and a failed setup's
    // reason bracket it beside its port); the answer names `[addr]:port`.
    for (literal, host) in [("[::1]", "::1"), ("[::ffff:127.0.0.1]", "::ffff:127.0.0.1")] {
        let (answer, _) = p.tunnel(&format!("{literal}:{port}")).await;
        assert_eq!(
            (
                status_and_rule(&answer),
                answer.contains(&format!("{literal}:{port} refused in the agent phase")),
                p.record().await.host,
            ),
            (
                ("HTTP/1.1 403 Forbidden".into(), "deny_list:loopback".into()),
                true,
                host.to_string()
            ),
            "{literal}: {answer}"
        );
    }
    assert_eq!(closed.so_far(), Vec::<Vec<u8>>::new());
    // A permitted address and a private one together: every address is
    // checked before any connection, so the permitted one gets none.
    let mut mixed = Proxy::agent(
        &list(&[&format!("mixed.test:{}", open.port())]),
        &[open.addr],
        MockResolver::new().with("mixed.test", &["127.0.0.1", "10.0.0.1"]),
    )
    .await;
    let (answer, _) = mixed.tunnel(&format!("mixed.test:{}", open.port())).await;
    assert_eq!(
        status_and_rule(&answer),
        ("HTTP/1.1 403 Forbidden".into(), "deny_list:private".into())
    );
    assert_eq!(
        mixed.record().await.address,
        Some(format!("10.0.0.1:{}", open.port()))
    );
    assert_eq!(open.so_far(), Vec::<Vec<u8>>::new());
    // The twin: the same loopback, opened at its exact address and port.
    let mut twin = Proxy::agent(
        &list(&[&format!("loop.test:{}", open.port())]),
        &[open.addr],
        MockResolver::new().with("loop.test", &["127.0.0.1"]),
    )
    .await;
    let (head, s) = twin.tunnel(&format!("loop.test:{}", open.port())).await;
    assert_eq!(head, "HTTP/1.1 200 Connection established\r\n\r\n");
    assert_eq!(through(s, Some("loop.test"), b"").await, b"ok");
    assert!(twin.record().await.allowed);
}

/// DNS rebinding: the name first answers a permitted address, then a
/// denied one. Each request resolves once and connects to what it checked:
/// the first reaches the permitted stand-in, the second is refused and the
/// denied stand-in (same port, another loopback address) sees nothing.
#[tokio::test]
async fn dns_rebinding_reaches_only_checked_addresses() {
    let permitted = StandIn::start("127.0.0.1:0", Mode::ReadAllThenReply(b"ok")).await;
    let port = permitted.port();
    let Ok(rebound) = TcpListener::bind(("127.0.0.2", port)).await else {
        panic!("cannot listen on 127.0.0.2:{port}");
    };
    drop(rebound);
    let denied = StandIn::start(
        &format!("127.0.0.2:{port}"),
        Mode::ReadAllThenReply(b"leak"),
    )
    .await;
    let resolver = Arc::new(
        MockResolver::new().with_answers("rebind.test", &[&["127.0.0.1"], &["127.0.0.2"]]),
    );
    let mut p = Proxy::start(
        &[],
        &list(&[&format!("rebind.test:{port}")]),
        &[permitted.addr],
        resolver.clone(),
        EgressPhase::Agent,
    )
    .await;
    let (head, s) = p.tunnel(&format!("rebind.test:{port}")).await;
    assert_eq!(head, "HTTP/1.1 200 Connection established\r\n\r\n");
    assert_eq!(through(s, Some("rebind.test"), b"").await, b"ok");
    let first = p.record().await;
    assert_eq!(
        (
            first.allowed,
            first.address,
            resolver.lookups("rebind.test")
        ),
        (true, Some(permitted.addr.to_string()), 1)
    );
    let (answer, _) = p.tunnel(&format!("rebind.test:{port}")).await;
    assert_eq!(
        status_and_rule(&answer),
        ("HTTP/1.1 403 Forbidden".into(), "deny_list:loopback".into())
    );
    assert_eq!(p.record().await.address, Some(format!("127.0.0.2:{port}")));
    assert_eq!(resolver.lookups("rebind.test"), 2);
    assert_eq!(denied.so_far(), Vec::<Vec<u8>>::new());
}

/// Garbage, an oversized head, too many headers and a silent client each
/// get a readable error and a record naming no destination (a malformed
/// request: the closeout counts them); a plain HTTP request through a real
/// client is the twin (forwarded in origin form, proxy headers dropped).
#[tokio::test]
async fn bad_requests_are_bounded_and_answered_plain_http_works() {
    let web = StandIn::start("127.0.0.1:0", Mode::Http).await;
    let port = web.port();
    let resolver = MockResolver::new().with("web.test", &["127.0.0.1"]);
    let limits = ProxyLimits {
        head: Duration::from_millis(300),
        ..ProxyLimits::default()
    };
    let mut p = Proxy::with_limits(
        &[],
        &list(&[&format!("web.test:{port}")]),
        &[web.addr],
        Arc::new(resolver),
        EgressPhase::Agent,
        limits,
    )
    .await;
    let huge = format!(
        "GET http://web.test:{port}/{} HTTP/1.1\r\n\r\n",
        "a".repeat(64 * 1024)
    );
    let many: String = (0..100).map(|i| format!("X-{i}: v\r\n")).collect();
    let many = format!("GET http://web.test:{port}/ HTTP/1.1\r\n{many}\r\n");
    let absolute = format!("`http://web.test:{port}/` is not a host:port");
    let cases: Vec<(Vec<u8>, &str, &str)> = vec![
        (
            client_hello(Some("web.test"), &[], 16384),
            "HTTP/1.1 400 Bad Request",
            "the request is not HTTP: invalid token",
        ),
        (
            huge.into_bytes(),
            "HTTP/1.1 431 Request Header Fields Too Large",
            "the request head is over 16384 bytes or 64 headers",
        ),
        (
            many.into_bytes(),
            "HTTP/1.1 431 Request Header Fields Too Large",
            "the request head is over 16384 bytes or 64 headers",
        ),
        (
            b"GET /local HTTP/1.1\r\n\r\n".to_vec(),
            "HTTP/1.1 400 Bad Request",
            "`/local` is not an absolute http:// URL (this is a proxy)",
        ),
        (
            b"GET http://web.test".to_vec(),
            "HTTP/1.1 408 Request Timeout",
            "no whole request head within 300ms",
        ),
        // CONNECT in absolute form, and a line break smuggled into its
        // authority: neither is a host:port.
        (
            format!("CONNECT http://web.test:{port}/ HTTP/1.1\r\n\r\n").into_bytes(),
            "HTTP/1.1 400 Bad Request",
            &absolute,
        ),
        (
            format!("CONNECT web.test:{port}\r\nHost: evil.test HTTP/1.1\r\n\r\n").into_bytes(),
            "HTTP/1.1 400 Bad Request",
            "the request is not HTTP: invalid token",
        ),
    ];
    for (bytes, status, reason) in cases {
        let mut s = p.connect().await;
        let _ = s.write_all(&bytes).await;
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(WAIT, s.read_to_end(&mut answer)).await;
        let answer = String::from_utf8_lossy(&answer).to_string();
        assert_eq!(self::status(&answer), status, "{reason}");
        assert!(answer.contains(reason), "{answer}");
        // No destination: the host stays empty (not the request's
        // escaped target), the reason says what was wrong.
        assert_eq!(
            p.record().await,
            EgressRecord {
                method: None,
                ..refused("", 0, None, "bad_request", reason)
            }
        );
    }
    // A Host header naming another host than the URL.
    let mut s = p.connect().await;
    s.write_all(
        format!("GET http://web.test:{port}/ HTTP/1.1\r\nHost: evil.test\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).await.unwrap();
    assert_eq!(
        status_and_rule(&answer),
        ("HTTP/1.1 403 Forbidden".into(), "host_mismatch".into())
    );
    let _ = p.record().await;
    // Two Host headers, the URL's host first: the second is never checked,
    // and an origin (a shared front end) may route by it.
    let mut s = p.connect().await;
    s.write_all(
        format!(
            "GET http://web.test:{port}/ HTTP/1.1\r\nHost: web.test:{port}\r\nHost: evil.test\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let _ = s.shutdown().await;
    let mut answer = String::new();
    s.read_to_string(&mut answer).await.unwrap();
    let why = format!(
        "the request has 2 Host headers; it may have one, naming the URL's host `web.test:{port}`"
    );
    assert_eq!(
        (status_and_rule(&answer), p.record().await),
        (
            ("HTTP/1.1 400 Bad Request".into(), "bad_request".into()),
            EgressRecord {
                method: Some(EgressMethod::Http),
                ..refused("web.test", port, None, "bad_request", &why)
            }
        )
    );
    assert_eq!(web.so_far(), Vec::<Vec<u8>>::new());

    // The twin: reqwest through the proxy.
    let client = reqwest::Client::builder()
        .proxy(reqwest::Proxy::http(format!("http://{}", p.proxy.local_addr().unwrap())).unwrap())
        .build()
        .unwrap();
    let body = client
        .get(format!("http://web.test:{port}/x?y=1"))
        .header("proxy-authorization", "Basic c2VjcmV0")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(body, "hello");
    let sent = String::from_utf8(web.connections(1).await.remove(0)).unwrap();
    assert!(sent.starts_with("GET /x?y=1 HTTP/1.1\r\n"), "{sent}");
    assert!(
        sent.contains(&format!("host: web.test:{port}\r\n")),
        "{sent}"
    );
    assert!(sent.ends_with("connection: close\r\n\r\n"), "{sent}");
    assert!(!sent.to_ascii_lowercase().contains("proxy-"), "{sent}");
    let r = p.record().await;
    assert_eq!(
        r,
        EgressRecord {
            method: Some(EgressMethod::Http),
            address: Some(web.addr.to_string()),
            bytes_up: sent.len() as u64,
            bytes_down: 43,
            ..egress_record("web.test", port)
        }
    );
}

/// A refused HTTPS request as a real client reports it: Python's urllib
/// (as pip) prints the status line of the answer to its CONNECT, never
/// the body, so the reason and the field to ask for are in that line.
#[tokio::test]
async fn a_client_that_prints_only_the_status_line_reads_why() {
    const PYTHON: &str = "/usr/bin/python3";
    if !paddock_test_support::prelude::program_available(PYTHON, &["--version"], PYTHON) {
        return;
    }
    let mut p = Proxy::agent(&[], &[], MockResolver::new()).await;
    let proxy = format!("http://{}", p.proxy.local_addr().unwrap());
    let out = tokio::process::Command::new(PYTHON)
        .args([
            "-c",
            "import urllib.request\n\
             try:\n    urllib.request.urlopen('https://pypi.example/simple/six/', timeout=10)\n\
             except Exception as e:\n    print(e.reason)",
        ])
        .env_clear()
        .env("HTTPS_PROXY", &proxy)
        .output()
        .await
        .unwrap();
    assert_eq!(
        (
            String::from_utf8_lossy(&out.stdout).to_string(),
            p.record().await
        ),
        (
            "Tunnel connection failed: 403 Forbidden (paddock egress proxy: pypi.example:443 is not on the agent phase's list; rule allowlist; the spec's `network.allow` must list it)\n".to_string(),
            refused(
                "pypi.example",
                443,
                None,
                "allowlist",
                "pypi.example:443 is not on the agent phase's list"
            )
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A proxy on a loopback TCP port (the `process` rung's) serves only
/// requests with the job's proxy credentials, which its URL holds: any
/// other process of the host (any user) gets a `407` asking for them,
/// and its request goes nowhere and is not on the job's record (it is not
/// the job's); the job's own client (reqwest given the
/// URL, as the job's tools are) reaches the destination.
#[tokio::test]
async fn a_loopback_proxy_serves_only_its_jobs_credentials() {
    let web = StandIn::start("127.0.0.1:0", Mode::Http).await;
    let port = web.port();
    let resolver = MockResolver::new().with("web.test", &["127.0.0.1"]);
    let config = EgressConfig {
        lists: PhaseLists {
            setup: Allowlist::default(),
            agent: Allowlist::parse(&list(&[&format!("web.test:{port}")])).unwrap(),
        },
        deny: DenyList::of_this_host([web.addr]).unwrap(),
        resolver: Arc::new(resolver),
        limits: ProxyLimits::default(),
        phase: EgressPhase::Agent,
        credentials: None,
        in_force: Default::default(),
    };
    let (tx, mut records) = mpsc::channel(64);
    let token = paddock::secret::Secret::new("0123456789abcdef".into());
    let proxy =
        EgressProxy::bind_authenticated("127.0.0.1:0".parse().unwrap(), config, tx, token.clone())
            .await
            .unwrap();
    let addr = proxy.local_addr().unwrap();
    let url = proxy.url(Some(&token)).unwrap();
    assert_eq!(url, format!("http://paddock:0123456789abcdef@{addr}"));
    let body = "paddock egress proxy: web.test:PORT refused in the agent phase: WHY\nrule: proxy_auth\nThis proxy serves one job: use the proxy URL of the job's HTTPS_PROXY/HTTP_PROXY as it is (it holds the job's proxy credentials).\n";
    let cases = [
        (
            format!("CONNECT web.test:{port} HTTP/1.1\r\n\r\n"),
            "the request has no Proxy-Authorization: Basic header",
        ),
        (
            format!("GET http://web.test:{port}/ HTTP/1.1\r\nProxy-Authorization: Basic cGFkZG9jazp3cm9uZw==\r\n\r\n"),
            "the request's Proxy-Authorization is not this job's",
        ),
    ];
    for (request, why) in cases {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).await.unwrap();
        let body = body.replace("PORT", &port.to_string()).replace("WHY", why);
        assert_eq!(
            answer,
            format!(
                "HTTP/1.1 407 Proxy Authentication Required (paddock egress proxy: {why}; rule proxy_auth)\r\n\
                 content-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\
                 x-paddock-egress-rule: proxy_auth\r\nproxy-authenticate: Basic realm=\"paddock egress proxy\"\r\n\r\n{body}",
                body.len()
            )
        );
    }
    assert_eq!(web.so_far(), Vec::<Vec<u8>>::new());
    // The job's client, given the URL with its credentials.
    let client = reqwest::Client::builder()
        .proxy(reqwest::Proxy::http(&url).unwrap())
        .build()
        .unwrap();
    let got = client
        .get(format!("http://web.test:{port}/x"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let sent = String::from_utf8(web.connections(1).await.remove(0)).unwrap();
    drop(client);
    // The first record is the job's request: the refused ones are not.
    let r = next_record(&mut records, WAIT).await;
    assert_eq!(
        (
            got.as_str(),
            (r.method, r.allowed, r.rule),
            sent.to_ascii_lowercase().contains("proxy-authorization")
        ),
        ("hello", (Some(EgressMethod::Http), true, None), false),
        "{sent}"
    );
}

/// A connection opened in the setup phase is closed when the agent phase
/// starts, and the setup list no longer applies; until the switch it
/// works, and a switch to the phase already in force closes nothing.
#[tokio::test]
async fn a_setup_connection_does_not_live_into_the_agent_phase() {
    let dest = StandIn::start("127.0.0.1:0", Mode::Echo).await;
    let port = dest.port();
    let authority = format!("registry.test:{port}");
    let resolver = MockResolver::new().with("registry.test", &["127.0.0.1"]);
    let mut p = Proxy::start(
        &list(&[&authority]),
        &[],
        &[dest.addr],
        Arc::new(resolver),
        EgressPhase::Setup,
    )
    .await;
    let (head, mut s) = p.tunnel(&authority).await;
    assert_eq!(head, "HTTP/1.1 200 Connection established\r\n\r\n");
    let hello = client_hello(Some("registry.test"), &[], 16384);
    s.write_all(&hello).await.unwrap();
    let mut echoed = vec![0u8; hello.len()];
    s.read_exact(&mut echoed).await.unwrap();
    assert_eq!(echoed, hello);
    assert!(!p.proxy.switch(EgressPhase::Setup));
    s.write_all(b"still").await.unwrap();
    let mut five = [0u8; 5];
    s.read_exact(&mut five).await.unwrap();
    assert_eq!(&five, b"still");

    assert!(p.proxy.switch(EgressPhase::Agent));
    let mut rest = Vec::new();
    let end = tokio::time::timeout(WAIT, s.read_to_end(&mut rest)).await;
    assert!(end.is_ok(), "the connection stayed open past the switch");
    assert_eq!(rest, b"");
    let n = hello.len() as u64 + 5;
    assert_eq!(
        p.record().await,
        EgressRecord {
            phase: EgressPhase::Setup,
            rule: Some("phase_switch".into()),
            reason: Some("opened in the setup phase, closed when it ended".into()),
            credential: None,
            substituted: None,
            ..allowed("registry.test", port, dest.addr, n, n)
        }
    );
    let (answer, _) = p.tunnel(&authority).await;
    assert_eq!(
        status_and_rule(&answer),
        ("HTTP/1.1 403 Forbidden".into(), "allowlist".into())
    );
    assert_eq!(p.record().await.phase, EgressPhase::Agent);
}

/// What one connection to a [`Recorder`] received so far, and whether it
/// ended.
type Received = (Vec<u8>, bool);

/// A destination recording what each connection (in the order accepted)
/// has received so far and whether it ended, for probes that must see a
/// connection while it is open.
struct Recorder {
    addr: SocketAddr,
    conns: Arc<Mutex<Vec<Received>>>,
}

impl Recorder {
    async fn start() -> Recorder {
        Recorder::answering(None).await
    }

    /// With `answer`: once what a connection received ends with its
    /// first text, the second is written back and the sending side shut.
    async fn answering(answer: Option<(&'static str, &'static str)>) -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let conns = Arc::new(Mutex::new(Vec::new()));
        let log = conns.clone();
        tokio::spawn(async move {
            loop {
                let (mut conn, _) = listener.accept().await.unwrap();
                let at = {
                    let mut log = log.lock().unwrap();
                    log.push((Vec::new(), false));
                    log.len() - 1
                };
                let log = log.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 65536];
                    loop {
                        let n = conn.read(&mut buf).await.unwrap_or(0);
                        let ends = {
                            let mut log = log.lock().unwrap();
                            if n == 0 {
                                log[at].1 = true;
                                break;
                            }
                            log[at].0.extend_from_slice(&buf[..n]);
                            answer.filter(|(after, _)| log[at].0.ends_with(after.as_bytes()))
                        };
                        if let Some((_, text)) = ends {
                            let _ = conn.write_all(text.as_bytes()).await;
                            let _ = conn.shutdown().await;
                        }
                    }
                });
            }
        });
        Recorder { addr, conns }
    }

    /// Connection `i` once `done` holds of it (what it received, ended).
    async fn when(&self, i: usize, done: impl Fn(&Received) -> bool) -> Received {
        tokio::time::timeout(WAIT, async {
            loop {
                if let Some(c) = self.conns.lock().unwrap().get(i).filter(|c| done(c)) {
                    return c.clone();
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("connection {i}: {:?}", self.conns.lock().unwrap()))
    }

    fn count(&self) -> usize {
        self.conns.lock().unwrap().len()
    }
}

/// A resolver that answers `127.0.0.1` for every name, each lookup only
/// once the test releases it (and says when one is waiting).
struct Gated {
    waiting: tokio::sync::Notify,
    release: tokio::sync::Notify,
}

#[async_trait::async_trait]
impl Resolver for Gated {
    async fn resolve(&self, _host: &str) -> std::io::Result<Vec<std::net::IpAddr>> {
        self.waiting.notify_one();
        self.release.notified().await;
        Ok(vec!["127.0.0.1".parse().unwrap()])
    }
}

/// Nothing of a setup connection reaches its host once the setup phase
/// ended, wherever in its life the switch finds it: a plain request's body
/// still arriving (its rest is not sent on), a tunnel left half-open
/// (the `200` taken, its ClientHello sent after the switch: not sent
/// on), and a request whose name was still resolving (checked against
/// the setup list, but not sent). Before, only a relay that had started
/// was cut: the body went on to its end in the agent phase, the late
/// ClientHello and the late request reached the setup phase's host
/// before the relay noticed the switch, and a live process of the setup
/// could carry the agent phase's data to a host only setup may reach.
/// Each is recorded as opened in the setup phase and cut by the switch.
#[tokio::test]
async fn nothing_of_a_setup_connection_goes_upstream_after_the_switch() {
    let web = Recorder::start().await;
    let tls = Recorder::start().await;
    let late = Recorder::start().await;
    let (wp, tp, lp) = (web.addr.port(), tls.addr.port(), late.addr.port());
    let gate = Arc::new(Gated {
        waiting: tokio::sync::Notify::new(),
        release: tokio::sync::Notify::new(),
    });
    let mut p = Proxy::start(
        &list(&[
            &format!("web.test:{wp}"),
            &format!("tls.test:{tp}"),
            &format!("late.test:{lp}"),
        ]),
        &[],
        &[web.addr, tls.addr, late.addr],
        gate.clone(),
        EgressPhase::Setup,
    )
    .await;
    let cut = |host: &str, port: u16, method, address: Option<SocketAddr>, up: u64| EgressRecord {
        method: Some(method),
        address: address.map(|a| a.to_string()),
        bytes_up: up,
        phase: EgressPhase::Setup,
        allowed: address.is_some(),
        rule: Some("phase_switch".into()),
        reason: Some("opened in the setup phase, closed when it ended".into()),
        ..egress_record(host, port)
    };

    // A plain request's body: half sent in setup, the rest after.
    let mut s = p.connect().await;
    let head = format!(
        "POST http://web.test:{wp}/up HTTP/1.1\r\nHost: web.test:{wp}\r\nContent-Length: 26\r\n\r\n"
    );
    s.write_all(format!("{head}sent in setup|").as_bytes())
        .await
        .unwrap();
    gate.waiting.notified().await;
    gate.release.notify_one();
    let forwarded = format!(
        "POST /up HTTP/1.1\r\nHost: web.test:{wp}\r\nContent-Length: 26\r\nconnection: close\r\n\r\nsent in setup|"
    );
    web.when(0, |c| c.0.len() >= forwarded.len()).await;
    assert!(p.proxy.switch(EgressPhase::Agent));
    let _ = s.write_all(b"agent phase!").await;
    let mut back = Vec::new();
    let _ = tokio::time::timeout(WAIT, s.read_to_end(&mut back)).await;
    let body = (back, web.when(0, |c| c.1).await, p.record().await);
    assert_eq!(
        body,
        (
            Vec::new(),
            (forwarded.clone().into_bytes(), true),
            cut(
                "web.test",
                wp,
                EgressMethod::Http,
                Some(web.addr),
                forwarded.len() as u64
            )
        )
    );

    // A tunnel whose ClientHello comes after the switch.
    assert!(p.proxy.switch(EgressPhase::Setup));
    let tunnel = async {
        let (head, s) = p.tunnel(&format!("tls.test:{tp}")).await;
        (head, s)
    };
    let ((head, mut s), ()) = tokio::join!(tunnel, async {
        gate.waiting.notified().await;
        gate.release.notify_one();
    });
    assert_eq!(head, "HTTP/1.1 200 Connection established\r\n\r\n");
    assert!(p.proxy.switch(EgressPhase::Agent));
    let _ = s
        .write_all(&client_hello(Some("tls.test"), &[], 16384))
        .await;
    let mut back = Vec::new();
    let _ = tokio::time::timeout(WAIT, s.read_to_end(&mut back)).await;
    assert_eq!(
        (back, tls.when(0, |c| c.1).await, p.record().await),
        (
            Vec::new(),
            (Vec::new(), true),
            cut("tls.test", tp, EgressMethod::Connect, Some(tls.addr), 0)
        )
    );

    // A request whose name resolves after the switch: no connection.
    assert!(p.proxy.switch(EgressPhase::Setup));
    let mut s = p.connect().await;
    s.write_all(
        format!("GET http://late.test:{lp}/late HTTP/1.1\r\nHost: late.test:{lp}\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    gate.waiting.notified().await;
    assert!(p.proxy.switch(EgressPhase::Agent));
    gate.release.notify_one();
    let mut back = Vec::new();
    let _ = tokio::time::timeout(WAIT, s.read_to_end(&mut back)).await;
    assert_eq!(
        (back, p.record().await, late.count()),
        (
            Vec::new(),
            cut("late.test", lp, EgressMethod::Http, None, 0),
            0
        )
    );
}

/// A plain request's chunked body is passed on only as strictly framed:
/// a chunk extension holding a bare LF (`0;a\n\nGET /smuggled ...`: a
/// host ending lines at a bare LF, as Go's did before CVE-2025-22871 was
/// fixed, reads the body's end there and the rest as a second request,
/// `Host: denied.test`, that no list checked) is not sent on; the
/// request stops at that line and its record says why. Before, the whole
/// of it reached the host. The twin: the same body strictly framed, with
/// an extension and a trailer, reaches the host whole and its answer
/// comes back.
#[tokio::test]
async fn a_chunked_body_a_lenient_host_would_end_early_is_not_passed_on() {
    let answer = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
    let web = Recorder::answering(Some(("x-sum: 1\r\n\r\n", answer))).await;
    let port = web.addr.port();
    let resolver = MockResolver::new().with("web.test", &["127.0.0.1"]);
    let mut p = Proxy::agent(&list(&[&format!("web.test:{port}")]), &[web.addr], resolver).await;
    let head = format!(
        "POST http://web.test:{port}/up HTTP/1.1\r\nHost: web.test:{port}\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    let sent = format!(
        "POST /up HTTP/1.1\r\nHost: web.test:{port}\r\nTransfer-Encoding: chunked\r\nconnection: close\r\n\r\n"
    );
    let smuggling = "0;a\n\nGET /smuggled HTTP/1.1\nHost: denied.test\n\n\r\n\r\n";
    let mut s = p.connect().await;
    s.write_all(format!("{head}{smuggling}").as_bytes())
        .await
        .unwrap();
    let mut back = Vec::new();
    let _ = tokio::time::timeout(WAIT, s.read_to_end(&mut back)).await;
    assert_eq!(
        (back, web.when(0, |c| c.1).await, p.record().await),
        (
            Vec::new(),
            (sent.clone().into_bytes(), true),
            EgressRecord {
                method: Some(EgressMethod::Http),
                address: Some(web.addr.to_string()),
                bytes_up: sent.len() as u64,
                reason: Some(
                    "a chunk-size line holds a control character (a bare LF or CR ends it early for some hosts): `0;a\\n\\nGET /smuggled HTTP/1.1\\nHost: denied.test\\n\\n`"
                        .into()
                ),
                ..egress_record("web.test", port)
            }
        )
    );

    let strict = "5;a=b\r\nhello\r\n0\r\nx-sum: 1\r\n\r\n";
    let mut s = p.connect().await;
    s.write_all(format!("{head}{strict}").as_bytes())
        .await
        .unwrap();
    let whole = format!("{sent}{strict}");
    let mut back = Vec::new();
    let _ = tokio::time::timeout(WAIT, s.read_to_end(&mut back)).await;
    assert_eq!(
        (
            String::from_utf8(back).unwrap(),
            web.when(1, |c| c.1).await,
            p.record().await
        ),
        (
            answer.to_string(),
            (whole.clone().into_bytes(), true),
            EgressRecord {
                method: Some(EgressMethod::Http),
                address: Some(web.addr.to_string()),
                bytes_up: whole.len() as u64,
                bytes_down: answer.len() as u64,
                ..egress_record("web.test", port)
            }
        )
    );

    // HTTP/1.0 has no chunked coding: a host may read such a request as
    // bodiless and its body as a next request. Refused before any
    // connection (before, it was sent on).
    let mut s = p.connect().await;
    s.write_all(
        format!(
            "POST http://web.test:{port}/up HTTP/1.0\r\nHost: web.test:{port}\r\nTransfer-Encoding: chunked\r\n\r\n{strict}"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut back = Vec::new();
    let _ = tokio::time::timeout(WAIT, s.read_to_end(&mut back)).await;
    let r = p.record().await;
    assert_eq!(
        (
            status_and_rule(&String::from_utf8_lossy(&back)),
            r.allowed,
            r.reason,
            web.count()
        ),
        (
            ("HTTP/1.1 400 Bad Request".into(), "bad_request".into()),
            false,
            Some("an HTTP/1.0 request framed by transfer-encoding, which HTTP/1.0 has not".into()),
            2
        )
    );
}

/// On a Unix socket (to which the sandbox's forwarder hands the job's
/// connections), the same checks hold: the allowed tunnel carries bytes
/// both ways, a name resolving to a denied address is refused.
#[tokio::test]
async fn the_proxy_serves_a_unix_socket_too() {
    let dest = StandIn::start("127.0.0.1:0", Mode::ReadAllThenReply(b"pong")).await;
    let port = dest.port();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("egress.sock");
    let config = EgressConfig {
        lists: PhaseLists {
            setup: Allowlist::default(),
            agent: Allowlist::parse(&list(&[
                &format!("registry.test:{port}"),
                &format!("inside.test:{port}"),
            ]))
            .unwrap(),
        },
        deny: DenyList::of_this_host([dest.addr]).unwrap(),
        resolver: Arc::new(
            MockResolver::new()
                .with("registry.test", &["127.0.0.1"])
                .with("inside.test", &["10.1.2.3"]),
        ),
        limits: ProxyLimits::default(),
        phase: EgressPhase::Agent,
        credentials: None,
        in_force: Default::default(),
    };
    let (tx, mut records) = mpsc::channel(8);
    let proxy = EgressProxy::bind_unix(&path, config, tx).unwrap();
    assert_eq!(proxy.local_addr(), None);
    // The sandbox's forwarder hands each connection to the socket.
    let forwarder = paddock_sandbox::net::bind_forwarder(0, &path).unwrap();
    let forwarded = forwarder.local_addr().unwrap();
    paddock_sandbox::net::serve_handoff(forwarder, path.clone());

    let mut s = TcpStream::connect(forwarded).await.unwrap();
    let mut out = format!("CONNECT registry.test:{port} HTTP/1.1\r\n\r\n").into_bytes();
    let hello = client_hello(Some("registry.test"), &[], 16384);
    out.extend_from_slice(&hello);
    s.write_all(&out).await.unwrap();
    s.shutdown().await.unwrap();
    let mut back = Vec::new();
    tokio::time::timeout(WAIT, s.read_to_end(&mut back))
        .await
        .unwrap()
        .unwrap();
    let mut want = b"HTTP/1.1 200 Connection established\r\n\r\n".to_vec();
    want.extend_from_slice(b"pong");
    assert_eq!(back, want);
    let r = tokio::time::timeout(WAIT, records.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        EgressRecord {
            duration_ms: 0,
            ..r
        },
        allowed("registry.test", port, dest.addr, hello.len() as u64, 4)
    );

    let mut s = TcpStream::connect(forwarded).await.unwrap();
    s.write_all(format!("CONNECT inside.test:{port} HTTP/1.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut answer = String::new();
    tokio::time::timeout(WAIT, s.read_to_string(&mut answer))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        status_and_rule(&answer),
        ("HTTP/1.1 403 Forbidden".into(), "deny_list:private".into())
    );
}

/// Pseudo-random bytes, so a lost, repeated or reordered chunk shows.
fn pattern(len: usize) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect()
}

/// Sends `hello` then `data` through `s` (the job's side of a tunnel) and
/// half-closes, reading everything the destination echoes meanwhile.
async fn echo_through<S>(s: S, hello: Vec<u8>, data: Vec<u8>) -> Vec<u8>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    let (mut r, mut w) = tokio::io::split(s);
    let writer = tokio::spawn(async move {
        w.write_all(&hello).await.unwrap();
        w.write_all(&data).await.unwrap();
        w.shutdown().await.unwrap();
    });
    let mut back = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), r.read_to_end(&mut back))
        .await
        .expect("the echo within 60 s")
        .unwrap();
    writer.await.unwrap();
    back
}

/// 16 MiB each way through a tunnel (the relay splices socket to socket):
/// what the destination received and what came back are exactly what was
/// sent, and the record counts every byte both ways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_transfer_arrives_byte_exact_both_ways_and_counted() {
    let dest = StandIn::start("127.0.0.1:0", Mode::Echo).await;
    let port = dest.port();
    let resolver = MockResolver::new().with("registry.test", &["127.0.0.1"]);
    let mut p = Proxy::agent(
        &list(&[&format!("registry.test:{port}")]),
        &[dest.addr],
        resolver,
    )
    .await;
    let (head, s) = p.tunnel(&format!("registry.test:{port}")).await;
    assert_eq!(head, "HTTP/1.1 200 Connection established\r\n\r\n");
    let hello = client_hello(Some("registry.test"), &[], 16384);
    let data = pattern(16 << 20);
    let mut sent = hello.clone();
    sent.extend_from_slice(&data);
    let back = echo_through(s, hello, data).await;
    assert_eq!(back.len(), sent.len());
    assert!(back == sent, "the echo differs from what was sent");
    let received = dest.connections(1).await;
    assert!(
        received == vec![sent.clone()],
        "the destination got other bytes"
    );
    let n = sent.len() as u64;
    assert_eq!(
        p.record().await,
        allowed("registry.test", port, dest.addr, n, n)
    );
}

/// The sandbox rung's path: the job's TCP connection handed by the
/// sandbox's forwarder (`paddock_sandbox::net::serve_handoff`) to the
/// proxy's Unix socket, served by the proxy and spliced on to the
/// destination; 16 MiB each way arrive byte exact, counted in the record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_transfer_through_the_forwarder_and_the_unix_socket_is_byte_exact() {
    let dest = StandIn::start("127.0.0.1:0", Mode::Echo).await;
    let port = dest.port();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("egress.sock");
    let config = EgressConfig {
        lists: PhaseLists {
            setup: Allowlist::default(),
            agent: Allowlist::parse(&list(&[&format!("registry.test:{port}")])).unwrap(),
        },
        deny: DenyList::of_this_host([dest.addr]).unwrap(),
        resolver: Arc::new(MockResolver::new().with("registry.test", &["127.0.0.1"])),
        limits: ProxyLimits::default(),
        phase: EgressPhase::Agent,
        credentials: None,
        in_force: Default::default(),
    };
    let (tx, mut records) = mpsc::channel(8);
    let _proxy = EgressProxy::bind_unix(&path, config, tx).unwrap();
    let forwarder = paddock_sandbox::net::bind_forwarder(0, &path).unwrap();
    let forwarded = forwarder.local_addr().unwrap();
    paddock_sandbox::net::serve_handoff(forwarder, path.clone());

    let mut s = TcpStream::connect(forwarded).await.unwrap();
    s.write_all(format!("CONNECT registry.test:{port} HTTP/1.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut byte).await.unwrap(), 1, "the proxy hung up");
        head.push(byte[0]);
    }
    assert_eq!(head, b"HTTP/1.1 200 Connection established\r\n\r\n");
    let hello = client_hello(Some("registry.test"), &[], 16384);
    let data = pattern(16 << 20);
    let mut sent = hello.clone();
    sent.extend_from_slice(&data);
    let back = echo_through(s, hello, data).await;
    assert_eq!(back.len(), sent.len());
    assert!(back == sent, "the echo differs from what was sent");
    let received = dest.connections(1).await;
    assert!(
        received == vec![sent.clone()],
        "the destination got other bytes"
    );
    let r = tokio::time::timeout(WAIT, records.recv())
        .await
        .unwrap()
        .unwrap();
    let n = sent.len() as u64;
    assert_eq!(
        EgressRecord {
            duration_ms: 0,
            ..r
        },
        allowed("registry.test", port, dest.addr, n, n)
    );
}

/// A plain HTTP request is one request to its host: what the job sends
/// after it on the same connection never reaches the host. Before, the
/// rest of the connection was relayed raw, so a second request
/// (`Proxy-Connection: keep-alive`, then `GET http://denied.test/` with
/// `Host: denied.test`) reached the allowed host unchecked and unrecorded
/// (a shared front end routes by that Host), and an h2c upgrade's frames
/// followed the request. HTTP/2 with prior knowledge is not a request the
/// proxy reads (400, a malformed request naming no destination), and a
/// CONNECT inside a tunnel is not TLS (closed, `not_tls`): the host gets
/// nothing of either.
#[tokio::test]
async fn a_plain_request_carries_nothing_after_it_to_its_host() {
    let web = StandIn::start("127.0.0.1:0", Mode::Http).await;
    let port = web.port();
    let resolver = MockResolver::new().with("web.test", &["127.0.0.1"]);
    let mut p = Proxy::start(
        &[],
        &list(&[&format!("web.test:{port}")]),
        &[web.addr],
        Arc::new(resolver),
        EgressPhase::Agent,
    )
    .await;
    let first = format!(
        "GET http://web.test:{port}/first HTTP/1.1\r\nHost: web.test:{port}\r\nProxy-Connection: keep-alive\r\n\r\n"
    );
    let second = "GET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n";
    let h2c = format!(
        "GET http://web.test:{port}/up HTTP/1.1\r\nHost: web.test:{port}\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\nPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    );
    // A POST whose body is followed by a second request in the same write.
    let post = format!(
        "POST http://web.test:{port}/post HTTP/1.1\r\nHost: web.test:{port}\r\nContent-Length: 4\r\n\r\nbodyGET /smuggled HTTP/1.1\r\nHost: denied.test\r\n\r\n"
    );
    let answer = "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello";
    let mut got = Vec::new();
    for request in [format!("{first}{second}"), h2c, post] {
        let mut s = p.connect().await;
        s.write_all(request.as_bytes()).await.unwrap();
        let mut back = Vec::new();
        let _ = tokio::time::timeout(WAIT, s.read_to_end(&mut back)).await;
        got.push(String::from_utf8_lossy(&back).to_string());
    }
    assert_eq!(got, vec![answer.to_string(); 3]);
    let heads = [
        format!("GET /first HTTP/1.1\r\nHost: web.test:{port}\r\nconnection: close\r\n\r\n"),
        format!("GET /up HTTP/1.1\r\nHost: web.test:{port}\r\nconnection: close\r\n\r\n"),
        format!(
            "POST /post HTTP/1.1\r\nHost: web.test:{port}\r\nContent-Length: 4\r\nconnection: close\r\n\r\n"
        ),
    ];
    let mut sent: Vec<String> = web
        .connections(3)
        .await
        .iter()
        .map(|c| String::from_utf8_lossy(c).to_string())
        .collect();
    sent.sort();
    let mut want: Vec<String> = heads.to_vec();
    // The POST's body arrives after its head (the stand-in stops at the
    // head; what it read with it is its own business): only the head is
    // compared when the body came in a later read.
    want.sort();
    assert_eq!(
        sent.iter()
            .map(|s| s.trim_end_matches("body").to_string())
            .collect::<Vec<_>>(),
        want
    );
    let mut records = Vec::new();
    for _ in 0..3 {
        records.push(p.record().await);
    }
    records.sort_by_key(|r| r.bytes_up);
    let http = |up: u64| EgressRecord {
        method: Some(EgressMethod::Http),
        address: Some(web.addr.to_string()),
        bytes_up: up,
        bytes_down: answer.len() as u64,
        ..egress_record("web.test", port)
    };
    let mut want: Vec<EgressRecord> = vec![
        http(heads[0].len() as u64),
        http(heads[1].len() as u64),
        http(heads[2].len() as u64 + 4),
    ];
    want.sort_by_key(|r| r.bytes_up);
    assert_eq!(records, want);

    // HTTP/2 with prior knowledge: no request the proxy reads.
    let mut s = p.connect().await;
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();
    let mut back = Vec::new();
    let _ = tokio::time::timeout(WAIT, s.read_to_end(&mut back)).await;
    assert_eq!(
        status_and_rule(&String::from_utf8_lossy(&back)),
        ("HTTP/1.1 400 Bad Request".into(), "bad_request".into())
    );
    let r = p.record().await;
    assert_eq!(
        (r.host.as_str(), r.port, r.allowed, r.rule.as_deref()),
        ("", 0, false, Some("bad_request"))
    );
    // A CONNECT inside a tunnel to an allowed host: not TLS, closed, and
    // the host gets nothing.
    let mut s = p.connect().await;
    s.write_all(format!("CONNECT web.test:{port} HTTP/1.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    s.write_all(b"CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n")
        .await
        .unwrap();
    let mut back = Vec::new();
    let _ = tokio::time::timeout(WAIT, s.read_to_end(&mut back)).await;
    assert_eq!(
        String::from_utf8_lossy(&back),
        "HTTP/1.1 200 Connection established\r\n\r\n"
    );
    let r = p.record().await;
    assert_eq!(
        (r.host.as_str(), r.allowed, r.rule.as_deref()),
        ("web.test", false, Some("not_tls"))
    );
    // It was connected to (before the ClientHello was read) and got
    // nothing.
    assert_eq!(web.connections(4).await[3], Vec::<u8>::new());
}

/// `settled` resolves only once no connection the proxy accepted is being
/// served, each one's record sent by then: a refusal whose answer the
/// client read and closed is on the channel, not on its way (the proxy
/// sends a record once its connection ends, after the answer), and a
/// connection still open holds it back until it closes. What a setup's
/// commands were refused is thus known before their output is stored
/// (`runner/setup.rs`).
#[tokio::test]
async fn settled_waits_for_every_connection_and_its_record() {
    let mut p = Proxy::agent(&[], &[], MockResolver::new()).await;
    // Accepted before the tunnel below (one listener, in order), then
    // silent: the proxy waits for its head.
    let mut held = p.connect().await;
    held.write_all(b"CONNECT held.test:443 HTTP/1.1\r\n")
        .await
        .unwrap();
    let (answer, s) = p.tunnel("denied.test:443").await;
    drop(s);
    let settled = p.proxy.settled();
    tokio::pin!(settled);
    let early = tokio::time::timeout(Duration::from_millis(300), &mut settled).await;
    drop(held);
    tokio::time::timeout(WAIT, &mut settled)
        .await
        .expect("settled once the held connection closed");
    let mut taken = Vec::new();
    while let Ok(rec) = p.records.try_recv() {
        taken.push((rec.host, rec.port, rec.allowed, rec.rule));
    }
    assert_eq!(
        (status(&answer), early.is_err(), taken),
        (
            "HTTP/1.1 403 Forbidden".to_string(),
            true,
            vec![
                (
                    "denied.test".to_string(),
                    443,
                    false,
                    Some("allowlist".to_string())
                ),
                (String::new(), 0, false, Some("bad_request".to_string())),
            ]
        )
    );
}

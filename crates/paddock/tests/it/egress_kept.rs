//! Kept upstream connections of terminated tunnels (docs/egress.md,
//! "Kept upstream connections"): a job's next tunnel to a credential host
//! reuses the proxy's verified TLS connection to it, never another job's,
//! never one from an earlier phase; a connection the host closed is not
//! used, and a request the host never answered because it closed the kept
//! connection is sent again on a new one only when it is safe to repeat.
//! Against the loopback HTTPS stand-in (`GitHttpServer`, which records the
//! client's address of every request, so requests on one connection are
//! seen as such) with real reqwest clients, one new client connection per
//! request; and the job side's TLS session resumption with a real rustls
//! client.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use paddock::egress::credential::roots_of;
use paddock::egress::{
    Allowlist, Credentials, DenyList, EgressConfig, EgressProxy, PhaseLists, ProxyLimits,
};
use paddock_protocol::{CredentialSpec, EgressMethod, EgressPhase, EgressRecord, KeyRef};
use paddock_test_support::dns::MockResolver;
use paddock_test_support::egress_record::{egress_record, next_record};
use paddock_test_support::git_http::{GitHttpServer, HttpsWrites};
use paddock_test_support::tls;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(20);
const REAL: &str = "kept-real-token-4c1d9e7a2b";

/// The stand-in demanding `Bearer REAL`, and the PEM of its CA.
struct Host {
    server: GitHttpServer,
    ca: String,
    dir: tempfile::TempDir,
}

impl Host {
    async fn start() -> Host {
        Host::writing(HttpsWrites::default()).await
    }

    /// The stand-in writing to its sockets as `writes` says.
    async fn writing(writes: HttpsWrites) -> Host {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repos");
        std::fs::create_dir_all(&root).unwrap();
        let (server, ca) =
            GitHttpServer::start_https_writing(&root, &format!("Bearer {REAL}"), writes).await;
        Host { server, ca, dir }
    }

    fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.server.port())
    }
}

/// One job's proxy, starting in `phase`, with the host on both phases'
/// lists and a credential for it in both phases.
struct Job {
    proxy: EgressProxy,
    records: mpsc::Receiver<EgressRecord>,
    creds: Arc<Credentials>,
}

impl Job {
    async fn start(host: &Host, id: &str, phase: EgressPhase) -> Job {
        Job::with_limits(host, id, phase, ProxyLimits::default()).await
    }

    async fn with_limits(host: &Host, id: &str, phase: EgressPhase, limits: ProxyLimits) -> Job {
        let port = host.server.port();
        let file = host.dir.path().join(format!("token-{id}"));
        std::fs::write(&file, REAL).unwrap();
        let spec = CredentialSpec {
            name: "kept".into(),
            host: format!("localhost:{port}"),
            header: "authorization".into(),
            value: "Bearer {secret}".into(),
            secret: KeyRef::File(file),
            env: "KEPT_TOKEN".into(),
            phases: vec![EgressPhase::Setup, EgressPhase::Agent],
            upstream_ca: None,
            methods: Vec::new(),
            paths: Vec::new(),
        };
        let creds = Arc::new(
            Credentials::build(id, &[spec], &roots_of(&host.ca), Duration::from_secs(3600))
                .unwrap(),
        );
        let list = Allowlist::parse(&[format!("localhost:{port}")]).unwrap();
        let (tx, records) = mpsc::channel(64);
        let config = EgressConfig {
            lists: PhaseLists {
                setup: list.clone(),
                agent: list,
            },
            deny: DenyList::of_this_host(vec![SocketAddr::from(([127, 0, 0, 1], port))]).unwrap(),
            resolver: Arc::new(MockResolver::new().with("localhost", &["127.0.0.1"])),
            limits,
            phase,
            credentials: Some(creds.clone()),
            in_force: Default::default(),
        };
        let proxy = EgressProxy::bind("127.0.0.1:0".parse().unwrap(), config, tx)
            .await
            .unwrap();
        Job {
            proxy,
            records,
            creds,
        }
    }

    /// A client as the job has one: through its proxy, trusting its
    /// bundle, no connection kept (each request a new tunnel).
    fn client(&self) -> reqwest::Client {
        tls::job_client(self.proxy.local_addr().unwrap(), &self.creds.bundle, WAIT)
    }

    /// `method url` with the job's placeholder, then the tunnel's record
    /// (so the tunnel has ended, its connection kept or not): the status
    /// and the record.
    async fn request(&mut self, method: reqwest::Method, url: &str) -> (u16, EgressRecord) {
        let (status, _, record) = self.answer(method, url).await;
        (status, record)
    }

    /// [`Job::request`] with the answer's body.
    async fn answer(&mut self, method: reqwest::Method, url: &str) -> (u16, String, EgressRecord) {
        let placeholder = &self.creds.list[0].placeholder;
        let resp = self
            .client()
            .request(method.clone(), url)
            .header("authorization", format!("Bearer {placeholder}"))
            .body(if method == reqwest::Method::POST {
                "posted"
            } else {
                ""
            })
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let body = resp.text().await.unwrap();
        assert!(!body.contains(REAL), "{body}");
        let record = next_record(&mut self.records, WAIT).await;
        (
            status,
            body,
            EgressRecord {
                bytes_up: 0,
                bytes_down: 0,
                ..record
            },
        )
    }

    async fn get(&mut self, url: &str) -> (u16, EgressRecord) {
        self.request(reqwest::Method::GET, url).await
    }
}

/// The record of an allowed tunnel to the stand-in in `phase`, the
/// credential's value substituted once (sizes and times zeroed, as
/// [`Job::request`] zeroes them).
fn kept_ok(host: &Host, phase: EgressPhase) -> EgressRecord {
    let port = host.server.port();
    EgressRecord {
        method: Some(EgressMethod::Connect),
        address: Some(format!("127.0.0.1:{port}")),
        phase,
        credential: Some("kept".into()),
        substituted: Some(1),
        ..egress_record("localhost", port)
    }
}

/// Job A's second tunnel goes on A's first tunnel's connection (the pool
/// works at all); job B, to the same host, gets a connection of its own,
/// and A's next tunnel is back on A's: no request of one job ever goes on
/// a connection that carried the other's.
#[tokio::test(flavor = "multi_thread")]
async fn a_kept_connection_carries_only_its_own_jobs_requests() {
    let host = Host::start().await;
    let url = host.url("/echo-headers");
    let mut a = Job::start(&host, "job-a", EgressPhase::Agent).await;
    let mut b = Job::start(&host, "job-b", EgressPhase::Agent).await;
    let mut rows = Vec::new();
    for which in ['a', 'a', 'b', 'a', 'b'] {
        let job = if which == 'a' { &mut a } else { &mut b };
        let (status, record) = job.get(&url).await;
        rows.push((status, record));
    }
    assert_eq!(rows, vec![(200, kept_ok(&host, EgressPhase::Agent)); 5]);
    let peers = host.server.peers();
    let (a1, b1) = (peers[0], peers[2]);
    assert_eq!(peers, vec![a1, a1, b1, a1, b1]);
    assert_ne!(a1, b1);
    assert_eq!(
        (
            host.server.server_names().len(),
            a.proxy.kept_connections(),
            b.proxy.kept_connections()
        ),
        (2, 1, 1)
    );
    assert_eq!(
        host.server.authorizations(),
        vec![Some(format!("Bearer {REAL}")); 5]
    );
}

/// A connection kept in the setup phase is closed at the switch: the
/// agent phase's first tunnel makes a new one.
#[tokio::test(flavor = "multi_thread")]
async fn a_phase_switch_closes_the_kept_connections() {
    let host = Host::start().await;
    let url = host.url("/echo-headers");
    let mut job = Job::start(&host, "job-p", EgressPhase::Setup).await;
    let (s1, r1) = job.get(&url).await;
    let (s2, r2) = job.get(&url).await;
    let kept_in_setup = job.proxy.kept_connections();
    assert!(job.proxy.switch(EgressPhase::Agent));
    let kept_after_switch = job.proxy.kept_connections();
    let (s3, r3) = job.get(&url).await;
    assert_eq!(
        (
            [s1, s2, s3],
            [r1, r2, r3],
            kept_in_setup,
            kept_after_switch,
            job.proxy.kept_connections()
        ),
        (
            [200; 3],
            [
                kept_ok(&host, EgressPhase::Setup),
                kept_ok(&host, EgressPhase::Setup),
                kept_ok(&host, EgressPhase::Agent)
            ],
            1,
            0,
            1
        )
    );
    let peers = host.server.peers();
    assert_eq!(peers[0], peers[1]);
    assert_ne!(peers[2], peers[0]);
    assert_eq!(host.server.server_names().len(), 2);
}

/// The host ends its kept connection (a keep-alive timeout): the next
/// tunnel still gets its answer, on a new connection. The host ends the
/// connection just as a GET arrives on it, unanswered: the GET (safe to
/// repeat) is sent again on a new connection and answered, once to the
/// job. A POST never goes on a kept connection: it gets a new one.
#[tokio::test(flavor = "multi_thread")]
async fn a_request_after_the_host_closed_its_kept_connection_still_works() {
    let host = Host::start().await;
    let url = host.url("/echo-headers");
    let mut job = Job::start(&host, "job-c", EgressPhase::Agent).await;
    let (s1, r1) = job.get(&url).await;
    host.server.close_connections();
    // The host's end reaches the proxy; what it does with a kept
    // connection it finds closed is the same either way.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (s2, r2) = job.get(&url).await;
    host.server.drop_next_request();
    let (s3, r3) = job.get(&url).await;
    let (s4, r4) = job.request(reqwest::Method::POST, &url).await;
    assert_eq!(
        ([s1, s2, s3, s4], [r1, r2, r3, r4]),
        (
            [200; 4],
            [
                kept_ok(&host, EgressPhase::Agent),
                kept_ok(&host, EgressPhase::Agent),
                kept_ok(&host, EgressPhase::Agent),
                kept_ok(&host, EgressPhase::Agent)
            ]
        )
    );
    // 1: first; 2: after the close, a new connection; 3: the GET the host
    // dropped on the kept connection 2, then again on a new one; 4: the
    // POST on a new one though connection 3' was kept. So two are kept
    // now: 3', which the POST left alone, and the POST's own (each
    // request answered, nothing asked to close).
    assert_eq!(job.proxy.kept_connections(), 2);
    let peers = host.server.peers();
    assert_eq!(peers.len(), 5, "{peers:?}");
    let distinct = |ps: &[Option<SocketAddr>]| {
        let mut v = ps.to_vec();
        v.sort();
        v.dedup();
        v.len()
    };
    assert_eq!(
        (
            peers[1] == peers[2],
            distinct(&[peers[0], peers[1], peers[3], peers[4]])
        ),
        (true, 4)
    );
}

/// A host that takes a request on the connection the proxy kept and
/// never answers: after the proxy's limit the job gets a readable `504`
/// (rule `upstream_timeout`), the record says so, the silent connection
/// is not kept, and the next request gets a new one and its answer.
#[tokio::test(flavor = "multi_thread")]
async fn a_host_silent_on_a_kept_connection_gets_the_job_a_504() {
    let host = Host::start().await;
    let url = host.url("/echo-headers");
    let limits = ProxyLimits {
        kept_answer: Duration::from_millis(300),
        ..ProxyLimits::default()
    };
    let mut job = Job::with_limits(&host, "job-s", EgressPhase::Agent, limits).await;
    let (s1, r1) = job.get(&url).await;
    host.server.set_stall(true);
    let (s2, body, r2) = job.answer(reqwest::Method::GET, &url).await;
    let kept_after_silence = job.proxy.kept_connections();
    host.server.set_stall(false);
    let (s3, r3) = job.get(&url).await;
    let dest = format!("localhost:{}", host.server.port());
    let why = "the host sent no answer within 300ms to the request sent on the connection the proxy kept to it";
    assert_eq!(
        ([s1, s2, s3], body, [r1, r2, r3], kept_after_silence),
        (
            [200, 504, 200],
            format!(
                "paddock egress proxy: {dest} timed out in the agent phase: {why}\nrule: upstream_timeout\n\
                 The destination is allowed and took the request but did not start its answer in time; the proxy closed that connection. Send the request again (docs/egress.md).\n"
            ),
            [
                kept_ok(&host, EgressPhase::Agent),
                EgressRecord {
                    allowed: false,
                    rule: Some("upstream_timeout".into()),
                    reason: Some(why.into()),
                    ..kept_ok(&host, EgressPhase::Agent)
                },
                kept_ok(&host, EgressPhase::Agent),
            ],
            0
        )
    );
    // The silent host's request came on the first connection, the next
    // on a new one.
    let peers = host.server.peers();
    assert_eq!(
        (peers.len(), peers[0] == peers[1], peers[1] == peers[2]),
        (3, true, false)
    );
}

/// A host that leaves Nagle on and writes everything (its handshake, its
/// session tickets, its answers) in pieces of 7 bytes: the job's answers
/// through a terminated tunnel arrive whole, the credential's value
/// masked, on a new upstream connection and on the kept one.
#[tokio::test(flavor = "multi_thread")]
async fn a_host_writing_in_small_pieces_without_nodelay_is_answered_whole() {
    let host = Host::writing(HttpsWrites {
        nodelay: false,
        max_write: Some(7),
    })
    .await;
    let url = host.url("/echo-headers");
    let mut job = Job::start(&host, "job-n", EgressPhase::Agent).await;
    let mask = format!(
        "authorization: Bearer {}",
        &job.creds.list[0].placeholder[..REAL.len()]
    );
    let mut seen = Vec::new();
    for _ in 0..2 {
        let (status, body, record) = job.answer(reqwest::Method::GET, &url).await;
        let line = body.lines().find(|l| l.starts_with("authorization:"));
        seen.push((status, line.map(str::to_string), record));
    }
    assert_eq!(
        seen,
        vec![(200, Some(mask), kept_ok(&host, EgressPhase::Agent)); 2]
    );
    let peers = host.server.peers();
    assert_eq!((peers.len(), peers[0] == peers[1]), (2, true));
}

/// The job's client resumes its TLS session with the proxy (a rustls
/// client keeping its session cache across connections): the second
/// handshake is a resumed one.
#[tokio::test(flavor = "multi_thread")]
async fn the_jobs_tls_session_with_the_proxy_is_resumed() {
    let host = Host::start().await;
    let job = Job::start(&host, "job-r", EgressPhase::Agent).await;
    let config =
        paddock_test_support::tls::client_config(roots_of(&job.creds.bundle).certs, &[b"http/1.1"]);
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let port = host.server.port();
    let mut kinds = Vec::new();
    for _ in 0..2 {
        let mut s = tokio::net::TcpStream::connect(job.proxy.local_addr().unwrap())
            .await
            .unwrap();
        s.write_all(
            format!("CONNECT localhost:{port} HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
        let mut head = [0u8; 39];
        s.read_exact(&mut head).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost".to_string()).unwrap();
        let mut tls = connector.connect(name, s).await.unwrap();
        // A request and its whole answer: TLS 1.3 sends the session
        // tickets after the handshake, read with the answer.
        tls.write_all(
            format!(
                "GET /echo-headers HTTP/1.1\r\nhost: localhost:{port}\r\nconnection: close\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
        let mut answer = Vec::new();
        let _ = tls.read_to_end(&mut answer).await;
        kinds.push(tls.get_ref().1.handshake_kind());
    }
    assert_eq!(
        kinds,
        vec![
            Some(rustls::HandshakeKind::Full),
            Some(rustls::HandshakeKind::Resumed)
        ]
    );
}

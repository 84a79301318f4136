//! The egress proxy's Unix socket against a hostile peer. On the sandbox
//! rung the forwarder hands each of the job's TCP connections to the
//! proxy's socket itself (`SCM_RIGHTS`, `paddock_sandbox::handoff`); the
//! proxy must serve only a connected TCP socket sent with paddock's
//! header, one per message, and refuse (record, rule `handoff`) and close
//! everything else: a FIFO or a regular file holding a request, a
//! listening, unconnected, datagram or Unix socket, several descriptors,
//! more than its control buffer takes, none, a wrong header, nothing at
//! all. A version that trusted the descriptor records another rule for
//! the FIFO (it reads it as a socket and fails) and waits on the
//! listening socket: those tests fail on it. Each refusal is checked as the whole record; where the
//! test kept the other end of what it sent, that end must see the proxy's
//! copy closed. The positive twin hands over a real connection, as the
//! forwarder does.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt as _;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use paddock::egress::{Allowlist, DenyList, EgressConfig, EgressProxy, PhaseLists, ProxyLimits};
use paddock_protocol::{EgressMethod, EgressPhase, EgressRecord};
use paddock_sandbox::handoff::{send, HEADER};
use paddock_test_support::dns::MockResolver;
use paddock_test_support::egress_record::{egress_record, next_record};
use paddock_test_support::tls::client_hello;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(5);

/// A destination on loopback that counts its connections and answers
/// `pong` once the job's side ends.
struct Dest {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
}

impl Dest {
    async fn start() -> Dest {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let count = connections.clone();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut sink = Vec::new();
                    let _ = conn.read_to_end(&mut sink).await;
                    let _ = conn.write_all(b"pong").await;
                    let _ = conn.shutdown().await;
                });
            }
        });
        Dest { addr, connections }
    }
}

/// The proxy on a Unix socket, allowing `registry.test` at the
/// destination's port (resolved to it, opened in the deny list).
struct UnixProxy {
    _dir: tempfile::TempDir,
    path: PathBuf,
    _proxy: EgressProxy,
    records: mpsc::Receiver<EgressRecord>,
    dest: Dest,
}

impl UnixProxy {
    async fn start(head: Duration) -> UnixProxy {
        let dest = Dest::start().await;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("egress.sock");
        let config = EgressConfig {
            lists: PhaseLists {
                setup: Allowlist::default(),
                agent: Allowlist::parse(&[format!("registry.test:{}", dest.addr.port())]).unwrap(),
            },
            deny: DenyList::of_this_host([dest.addr]).unwrap(),
            resolver: Arc::new(MockResolver::new().with("registry.test", &["127.0.0.1"])),
            limits: ProxyLimits {
                head,
                ..ProxyLimits::default()
            },
            phase: EgressPhase::Agent,
            credentials: None,
            in_force: Default::default(),
        };
        let (tx, records) = mpsc::channel(64);
        let proxy = EgressProxy::bind_unix(&path, config, tx).unwrap();
        UnixProxy {
            _dir: dir,
            path,
            _proxy: proxy,
            records,
            dest,
        }
    }

    async fn record(&mut self) -> EgressRecord {
        next_record(&mut self.records, WAIT).await
    }

    /// What the job would ask first: a tunnel to the allowed destination.
    fn request(&self) -> Vec<u8> {
        let mut out = format!(
            "CONNECT registry.test:{} HTTP/1.1\r\n\r\n",
            self.dest.addr.port()
        )
        .into_bytes();
        out.extend_from_slice(&client_hello(Some("registry.test"), &[], 16384));
        out
    }
}

/// Connects to `path` and sends `header` with `fds` as one message; the
/// Unix connection, kept open.
fn hand(path: &Path, header: &[u8], fds: &[BorrowedFd<'_>]) -> UnixStream {
    let unix = UnixStream::connect(path).unwrap();
    send(unix.as_fd(), header, fds).unwrap();
    unix
}

/// The record of a refused hand-over.
fn refused(reason: &str) -> EgressRecord {
    EgressRecord {
        allowed: false,
        rule: Some("handoff".into()),
        reason: Some(format!(
            "refused a hand-over on the proxy's socket: {reason}"
        )),
        ..egress_record("", 0)
    }
}

/// Whether the peer of `end` has closed its side: end of file now
/// (`false`: it is still open, the read would wait).
fn closed_by_peer(end: &mut UnixStream) -> bool {
    end.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 16];
    match end.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
        Err(e) => panic!("reading the kept end: {e}"),
    }
}

/// The positive twin: a connected TCP socket handed over with the header
/// is served as the job's connection (tunnel, bytes both ways, counted).
#[tokio::test]
async fn a_handed_over_tcp_connection_is_served() {
    let mut p = UnixProxy::start(WAIT).await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut job = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (accepted, _) = listener.accept().unwrap();
    let _unix = hand(&p.path, HEADER, &[accepted.as_fd()]);
    drop(accepted);
    let request = p.request();
    let hello_len = client_hello(Some("registry.test"), &[], 16384).len() as u64;
    let job = tokio::task::spawn_blocking(move || {
        job.write_all(&request).unwrap();
        job.shutdown(std::net::Shutdown::Write).unwrap();
        let mut back = Vec::new();
        job.read_to_end(&mut back).unwrap();
        back
    });
    let back = tokio::time::timeout(WAIT, job).await.unwrap().unwrap();
    let mut want = b"HTTP/1.1 200 Connection established\r\n\r\n".to_vec();
    want.extend_from_slice(b"pong");
    assert_eq!(back, want);
    assert_eq!(
        p.record().await,
        EgressRecord {
            method: Some(EgressMethod::Connect),
            address: Some(p.dest.addr.to_string()),
            bytes_up: hello_len,
            bytes_down: 4,
            ..egress_record("registry.test", p.dest.addr.port())
        }
    );
}

/// A FIFO and a regular file, each holding a whole allowed request:
/// refused by name before anything reads them, and the destination never
/// connected to.
#[tokio::test]
async fn a_fifo_or_a_file_holding_a_request_is_refused() {
    let mut p = UnixProxy::start(WAIT).await;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    // Read and write: opening a FIFO so never waits for a peer.
    let mut fifo = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(&fifo)
        .unwrap();
    fifo.write_all(&p.request()).unwrap();
    let _u1 = hand(&p.path, HEADER, &[fifo.as_fd()]);
    assert_eq!(
        p.record().await,
        refused("the descriptor is a FIFO (pipe), not a socket")
    );
    let file = dir.path().join("request");
    std::fs::write(&file, p.request()).unwrap();
    let file = std::fs::File::open(&file).unwrap();
    let _u2 = hand(&p.path, HEADER, &[file.as_fd()]);
    assert_eq!(
        p.record().await,
        refused("the descriptor is a regular file, not a socket")
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(p.dest.connections.load(Ordering::SeqCst), 0);
}

/// Sockets that are not a connected TCP stream: a listening TCP socket, an
/// unconnected one, a connected UDP socket, a Unix socket (whose other
/// end sees the proxy's copy closed).
#[tokio::test]
async fn sockets_other_than_a_tcp_connection_are_refused() {
    let mut p = UnixProxy::start(WAIT).await;
    let listening = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let _u1 = hand(&p.path, HEADER, &[listening.as_fd()]);
    assert_eq!(
        p.record().await,
        refused("the descriptor is a listening socket, not a connection")
    );
    let unconnected = tokio::net::TcpSocket::new_v4().unwrap();
    let _u2 = hand(&p.path, HEADER, &[unconnected.as_fd()]);
    assert_eq!(
        p.record().await,
        refused("the descriptor is a socket with no peer (not connected)")
    );
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.connect(p.dest.addr).unwrap();
    let _u3 = hand(&p.path, HEADER, &[udp.as_fd()]);
    assert_eq!(
        p.record().await,
        refused("the descriptor is a socket of type 2 (SOCK_DGRAM), not a stream socket")
    );
    let (sent, mut kept) = UnixStream::pair().unwrap();
    let _u4 = hand(&p.path, HEADER, &[sent.as_fd()]);
    drop(sent);
    assert_eq!(
        p.record().await,
        refused("the descriptor is a socket of family 1, not IPv4 or IPv6")
    );
    assert!(closed_by_peer(&mut kept), "the proxy kept the Unix socket");
}

/// Several descriptors in one message, and more than the proxy's control
/// buffer takes: refused, every one closed (each kept end sees its end of
/// file), even a real TCP connection among them.
#[tokio::test]
async fn several_descriptors_are_refused_and_all_closed() {
    let mut p = UnixProxy::start(WAIT).await;
    let pairs: Vec<_> = (0..3).map(|_| UnixStream::pair().unwrap()).collect();
    let fds: Vec<_> = pairs.iter().map(|(s, _)| s.as_fd()).collect();
    let _u1 = hand(&p.path, HEADER, &fds);
    let (sent, mut kept): (Vec<_>, Vec<_>) = pairs.into_iter().unzip();
    drop(sent);
    assert_eq!(
        p.record().await,
        refused("the message carried 3 descriptors, not one (all closed)")
    );
    assert!(kept.iter_mut().all(closed_by_peer), "a descriptor was kept");

    let pairs: Vec<_> = (0..60).map(|_| UnixStream::pair().unwrap()).collect();
    let fds: Vec<_> = pairs.iter().map(|(s, _)| s.as_fd()).collect();
    let _u2 = hand(&p.path, HEADER, &fds);
    let (sent, mut kept): (Vec<_>, Vec<_>) = pairs.into_iter().unzip();
    drop(sent);
    assert_eq!(
        p.record().await,
        refused("the message carried more descriptors or control data than the receiver reads (truncated, all closed)")
    );
    assert!(kept.iter_mut().all(closed_by_peer), "a descriptor was kept");
}

/// A real TCP connection with another header, and the header with no
/// descriptor (what a plain Unix client sends): refused; the connection
/// is closed (the job's side reads its end).
#[tokio::test]
async fn a_wrong_header_or_no_descriptor_is_refused() {
    let mut p = UnixProxy::start(WAIT).await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut job = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (accepted, _) = listener.accept().unwrap();
    let _u1 = hand(&p.path, b"hello", &[accepted.as_fd()]);
    drop(accepted);
    assert_eq!(
        p.record().await,
        refused("the message's data is not paddock's header (5 bytes)")
    );
    job.set_read_timeout(Some(WAIT)).unwrap();
    let mut back = Vec::new();
    assert_eq!(job.read_to_end(&mut back).unwrap(), 0);

    let _u2 = hand(&p.path, HEADER, &[]);
    assert_eq!(
        p.record().await,
        refused("the message carried no descriptor")
    );
    let mut plain = UnixStream::connect(&p.path).unwrap();
    plain.write_all(&p.request()).unwrap();
    assert_eq!(
        p.record().await,
        refused("the message's data is not paddock's header (64 bytes)")
    );
    assert_eq!(p.dest.connections.load(Ordering::SeqCst), 0);
}

/// A peer that connects and sends nothing is given up on after the head's
/// bound, without holding up a hand-over on another connection meanwhile;
/// one that hangs up at once is recorded as such.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_peer_blocks_nothing_and_is_dropped() {
    let mut p = UnixProxy::start(Duration::from_millis(500)).await;
    let silent = UnixStream::connect(&p.path).unwrap();
    // Meanwhile a real hand-over is served.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut job = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (accepted, _) = listener.accept().unwrap();
    let _u = hand(&p.path, HEADER, &[accepted.as_fd()]);
    drop(accepted);
    job.write_all(b"CONNECT elsewhere.test:443 HTTP/1.1\r\n\r\n")
        .unwrap();
    job.set_read_timeout(Some(WAIT)).unwrap();
    let mut answer = Vec::new();
    job.read_to_end(&mut answer).unwrap();
    assert!(
        answer.starts_with(b"HTTP/1.1 403"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    assert_eq!(p.record().await.rule.as_deref(), Some("allowlist"));
    let mut silent_record = p.record().await;
    silent_record.reason = silent_record.reason.map(|r| r.replace("500ms", "BOUND"));
    assert_eq!(
        silent_record,
        EgressRecord {
            reason: Some("no connection handed over on the proxy's socket within BOUND".into()),
            ..refused("")
        }
    );
    drop(silent);
    drop(UnixStream::connect(&p.path).unwrap());
    assert_eq!(
        p.record().await,
        refused("the peer hung up without handing over a connection")
    );
}

//! The kept upstream connections of one job's terminated tunnels
//! (docs/egress.md, "Kept upstream connections"): when a job's tunnel to
//! a credential host ends with every request answered and the connection
//! still usable, the proxy keeps its verified TLS connection to the host
//! here, and the job's next tunnel to the same host in the same phase
//! takes it instead of making a TCP connection and a TLS handshake of its
//! own. The pool belongs to one job's proxy (nothing is ever shared
//! between jobs) and holds connections of the phase in force only: a
//! phase switch and the proxy's end empty it, closing them. Bounded: at
//! most [`MAX_KEPT`] connections per credential, each at most
//! [`IDLE_LIMIT`] idle (the proxy's `ProxyLimits::kept_idle`), closed at
//! that moment by the pool's reaper ([`UpstreamPool::reap`]) whether or
//! not anything looks at the pool; one the host closed (or sent anything
//! on while idle) is dropped when found, never handed out.

use std::net::SocketAddr;
use std::os::fd::AsRawFd as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::socket::{recv, MsgFlags};
use paddock_protocol::EgressPhase;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_rustls::client::TlsStream;

use super::quickack::QuickAck;

/// Kept connections per credential host, at most.
pub const MAX_KEPT: usize = 4;
/// How long a kept connection may wait for its next tunnel.
pub const IDLE_LIMIT: Duration = Duration::from_secs(30);
/// How long a request sent on a kept connection waits for the first byte
/// of its answer.
pub const ANSWER_LIMIT: Duration = Duration::from_secs(60);

/// A kept connection: its TLS stream and the checked address it goes to.
pub struct Kept {
    pub tls: TlsStream<QuickAck>,
    pub address: SocketAddr,
}

struct Idle {
    credential: String,
    phase: EgressPhase,
    kept: Kept,
    since: Instant,
}

/// One job's kept upstream connections.
pub struct UpstreamPool {
    idle: Mutex<Vec<Idle>>,
    limit: Duration,
    /// Told when a connection is kept, so the reaper waits for its expiry.
    kept: Notify,
}

impl Default for UpstreamPool {
    fn default() -> Self {
        UpstreamPool::new(IDLE_LIMIT)
    }
}

impl UpstreamPool {
    /// An empty pool whose connections are kept at most `limit` idle.
    pub fn new(limit: Duration) -> UpstreamPool {
        UpstreamPool {
            idle: Mutex::new(Vec::new()),
            limit,
            kept: Notify::new(),
        }
    }

    /// Closes each kept connection when it has been idle for the pool's
    /// limit (or earlier, when found closed by its host), whether or not
    /// the pool is used meanwhile; runs until aborted (the proxy aborts it
    /// when dropped).
    pub async fn reap(self: Arc<Self>) {
        loop {
            let Some(next) = self.expire() else {
                // Nothing kept: wait for the next one.
                self.kept.notified().await;
                continue;
            };
            tokio::select! {
                () = tokio::time::sleep_until(next) => {}
                () = self.kept.notified() => {}
            }
        }
    }

    /// Drops the expired and closed connections (closing them, outside
    /// the lock); when the next of the others expires.
    fn expire(&self) -> Option<Instant> {
        let Ok(mut idle) = self.idle.lock() else {
            return None;
        };
        let gone = self.prune(&mut idle);
        let next = idle.iter().map(|i| i.since + self.limit).min();
        drop(idle);
        drop(gone);
        next
    }

    /// Whether a connection for `credential` in `phase` is kept (expired
    /// and closed ones are dropped first).
    pub fn has(&self, credential: &str, phase: EgressPhase) -> bool {
        let Ok(mut idle) = self.idle.lock() else {
            return false;
        };
        self.prune(&mut idle);
        idle.iter()
            .any(|i| i.credential == credential && i.phase == phase)
    }

    /// The connection for `credential` in `phase` kept last, if one is
    /// kept and still open.
    pub fn take(&self, credential: &str, phase: EgressPhase) -> Option<Kept> {
        let mut idle = self.idle.lock().ok()?;
        self.prune(&mut idle);
        let at = idle
            .iter()
            .rposition(|i| i.credential == credential && i.phase == phase)?;
        Some(idle.remove(at).kept)
    }

    /// Keeps `kept` for `credential`'s next tunnel in `phase`, unless
    /// `phase` is no longer `current` (the connection is then closed);
    /// the oldest of the credential's is closed beyond [`MAX_KEPT`].
    pub fn put(&self, credential: &str, phase: EgressPhase, current: EgressPhase, kept: Kept) {
        let Ok(mut idle) = self.idle.lock() else {
            return;
        };
        if phase != current {
            return;
        }
        idle.push(Idle {
            credential: credential.to_string(),
            phase,
            kept,
            since: Instant::now(),
        });
        let mine: Vec<usize> = idle
            .iter()
            .enumerate()
            .filter(|(_, i)| i.credential == credential)
            .map(|(n, _)| n)
            .collect();
        if mine.len() > MAX_KEPT {
            idle.remove(mine[0]);
        }
        drop(idle);
        self.kept.notify_one();
    }

    /// Closes every kept connection (a phase switch, the proxy's end).
    pub fn clear(&self) {
        if let Ok(mut idle) = self.idle.lock() {
            idle.clear();
        }
    }

    /// How many connections are kept (for tests).
    pub fn len(&self) -> usize {
        self.idle.lock().map(|i| i.len()).unwrap_or(0)
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes out the connections idle for the limit or no longer open;
    /// what was taken out (closed when dropped).
    fn prune(&self, idle: &mut Vec<Idle>) -> Vec<Idle> {
        let mut gone = Vec::new();
        let mut at = 0;
        while at < idle.len() {
            let i = &mut idle[at];
            if i.since.elapsed() < self.limit && open(&mut i.kept.tls) {
                at += 1;
            } else {
                gone.push(idle.remove(at));
            }
        }
        gone
    }
}

/// Whether an idle kept connection is still open and quiet: whatever
/// arrived on its socket while idle is read into its TLS state without
/// waiting; TLS's own messages (session tickets) are fine, while the
/// socket's end, an error, an alert (the host's `close_notify`) or
/// application bytes nobody asked for mean it is not.
fn open(tls: &mut TlsStream<QuickAck>) -> bool {
    let (tcp, conn) = tls.get_mut();
    loop {
        match conn.read_tls(&mut NoWait(tcp.tcp())) {
            Ok(0) => return false,
            Ok(_) => match conn.process_new_packets() {
                Ok(s) if !s.peer_has_closed() && s.plaintext_bytes_to_read() == 0 => {}
                _ => return false,
            },
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
            Err(_) => return false,
        }
    }
}

/// A socket read that never waits (`MSG_DONTWAIT`, whatever the
/// runtime last saw of the socket's readiness).
struct NoWait<'a>(&'a tokio::net::TcpStream);

impl std::io::Read for NoWait<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        recv(self.0.as_raw_fd(), buf, MsgFlags::MSG_DONTWAIT).map_err(std::io::Error::from)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::egress::ca::JobCa;
    use std::sync::Arc;

    /// `n` verified TLS connections to a loopback server with a leaf of
    /// a fresh job CA (the server side is held open by the returned
    /// tasks).
    async fn connections(n: usize) -> Vec<Kept> {
        let (conns, mut hosts) = connections_and_hosts(n).await;
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Some(host) = hosts.recv().await {
                held.push(host);
            }
        });
        conns
    }

    /// [`connections`], and the host's end of each.
    async fn connections_and_hosts(
        n: usize,
    ) -> (
        Vec<Kept>,
        tokio::sync::mpsc::UnboundedReceiver<
            tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
        >,
    ) {
        let ca = JobCa::new("j1", &["pool.test".into()], Duration::from_secs(60)).unwrap();
        let (chain, key) = ca.leaf("pool.test").unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain.clone(), key)
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(chain[1].clone()).unwrap();
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
        let (hosts, ends) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let _ = hosts.send(acceptor.accept(tcp).await.unwrap());
            }
        });
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
        let mut out = Vec::new();
        for _ in 0..n {
            let tcp = tokio::net::TcpStream::connect(address).await.unwrap();
            let name = rustls::pki_types::ServerName::try_from("pool.test").unwrap();
            let tls = connector.connect(name, QuickAck::new(tcp)).await.unwrap();
            out.push(Kept { tls, address });
        }
        (out, ends)
    }

    /// At most MAX_KEPT per credential; nothing kept for a phase no
    /// longer in force; only the credential and phase asked for is
    /// handed out; past the idle limit nothing is.
    #[tokio::test]
    async fn the_pool_is_bounded_and_keyed_by_credential_and_phase() {
        let pool = UpstreamPool::default();
        let (setup, agent) = (EgressPhase::Setup, EgressPhase::Agent);
        let mut conns = connections(MAX_KEPT + 4).await;
        pool.put("a", setup, agent, conns.pop().unwrap());
        for _ in 0..MAX_KEPT + 1 {
            pool.put("a", agent, agent, conns.pop().unwrap());
        }
        pool.put("b", agent, agent, conns.pop().unwrap());
        assert_eq!(
            (
                pool.len(),
                pool.has("a", setup),
                pool.has("a", agent),
                pool.has("c", agent)
            ),
            (MAX_KEPT + 1, false, true, false)
        );
        assert!(pool.take("b", agent).is_some());
        assert!(pool.take("b", agent).is_none());
        pool.clear();
        assert!(pool.is_empty());
        let expired = UpstreamPool::new(Duration::ZERO);
        expired.put("a", agent, agent, conns.pop().unwrap());
        assert_eq!((expired.has("a", agent), expired.len()), (false, 0));
    }

    /// The reaper closes a kept connection when its idle time is up, with
    /// nothing looking at the pool meanwhile (a pool whose limit is 300
    /// ms): kept at first, then the host reads the connection's end (the
    /// socket closed without TLS's close_notify, as dropping does) and
    /// the pool is empty.
    #[tokio::test]
    async fn an_idle_connection_is_closed_at_its_expiry_with_no_request() {
        let agent = EgressPhase::Agent;
        let pool = Arc::new(UpstreamPool::new(Duration::from_millis(300)));
        let reaper = tokio::spawn(pool.clone().reap());
        let (mut conns, mut hosts) = connections_and_hosts(1).await;
        let mut host = hosts.recv().await.unwrap();
        pool.put("a", agent, agent, conns.pop().unwrap());
        let kept = pool.len();
        let mut buf = [0u8; 16];
        let end = tokio::time::timeout(
            Duration::from_secs(20),
            tokio::io::AsyncReadExt::read(&mut host, &mut buf),
        )
        .await
        .map(|read| read.map_err(|e| e.kind()));
        let after = pool.len();
        reaper.abort();
        assert_eq!(
            (kept, end, after),
            (1, Ok(Err(std::io::ErrorKind::UnexpectedEof)), 0)
        );
    }
}

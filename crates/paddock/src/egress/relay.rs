//! Bytes both ways between the job and its destination, counted as they
//! pass, until both sides are done, or until the phase the connection was
//! opened in ends (a setup-phase connection does not live into the agent
//! phase) or the proxy stops: then both sides are closed.
//!
//! Everything the proxy checks is read before the relay starts (the
//! request head, a tunnel's ClientHello); from then on the bytes are
//! opaque, and each direction is moved socket to socket by the kernel
//! (`splice(2)` through a pipe, `paddock_sandbox::splice`, whose pipe
//! grows from 64 to 256 KiB once the direction carries bulk), driven by
//! tokio's readiness of the two sockets: no copy through the proxy's
//! memory. A direction whose pipe cannot be made (out of descriptors)
//! copies through a buffer instead. A byte is counted once the destination
//! took it. What the host sends is acknowledged at once until the
//! direction carries bulk (`TCP_QUICKACK`), so a host that leaves Nagle on
//! does not wait the proxy's delayed ACK at a connection's start.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use paddock_protocol::EgressPhase;
use paddock_sandbox::splice::{shut_write, SplicePipe};
use tokio::io::Interest;
use tokio::net::TcpStream;
use tokio::sync::watch;

/// The fallback copy's buffer per direction.
const BUFFER: usize = 64 * 1024;

/// What a relay carried and how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Relayed {
    pub up: u64,
    pub down: u64,
    /// Closed because the phase changed (or the proxy stopped).
    pub cut: bool,
}

/// One end of a relay: a TCP socket (the job's, served directly whether
/// it connected over loopback or was handed over by the sandbox's
/// forwarder; or the destination).
#[derive(Clone, Copy)]
struct Socket<'a>(&'a TcpStream);

impl Socket<'_> {
    /// Runs `op` on the socket; a `WouldBlock` clears its readiness.
    fn try_io<R>(self, interest: Interest, op: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        self.0.try_io(interest, op)
    }

    fn try_read(self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }

    fn try_write(self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }

    /// Retries `op` until the socket is ready for it.
    async fn when_ready<R>(
        self,
        interest: Interest,
        mut op: impl FnMut() -> io::Result<R>,
    ) -> io::Result<R> {
        loop {
            self.0.ready(interest).await?;
            match self.try_io(interest, &mut op) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                done => return done,
            }
        }
    }
}

/// Relays between `client` and `upstream` until both directions end or
/// `phase` changes from what it was when the connection was checked.
pub async fn relay(
    client: &TcpStream,
    upstream: &TcpStream,
    phase: &mut watch::Receiver<EgressPhase>,
) -> Relayed {
    let client = Socket(client);
    let upstream = Socket(upstream);
    let up = AtomicU64::new(0);
    let down = AtomicU64::new(0);
    let cut = {
        let both = async {
            tokio::join!(
                direction(client, upstream, &up, Acks::Kernel),
                direction(upstream, client, &down, Acks::QuickUntilBulk)
            )
        };
        // The phase first: one that ended before the relay started (while
        // the connection was being checked) cuts it before a byte moves.
        tokio::select! {
            biased;
            _ = phase.changed() => true,
            _ = both => false,
        }
    };
    Relayed {
        up: up.load(Ordering::Relaxed),
        down: down.load(Ordering::Relaxed),
        cut,
    }
}

/// Relays what `upstream` sends to `client` (nothing the other way) until
/// it ends or `phase` changes: the answer to a plain HTTP request, whose
/// request (head and body) was already passed on and after which nothing
/// more of the job's goes to that host (`server.rs`).
pub async fn relay_down(
    client: &TcpStream,
    upstream: &TcpStream,
    phase: &mut watch::Receiver<EgressPhase>,
) -> Relayed {
    let down = AtomicU64::new(0);
    let cut = tokio::select! {
        biased;
        _ = phase.changed() => true,
        _ = direction(Socket(upstream), Socket(client), &down, Acks::QuickUntilBulk) => false,
    };
    Relayed {
        up: 0,
        down: down.load(Ordering::Relaxed),
        cut,
    }
}

/// How a direction acknowledges what it reads from its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Acks {
    /// The kernel's own timing (the job's socket: a job's Nagle is its
    /// own, as it would be without the proxy).
    Kernel,
    /// At once after a small read (`TCP_QUICKACK`), until the direction
    /// carries bulk: the destination host's socket, so a host that leaves
    /// Nagle on never waits the proxy's delayed ACK (docs/egress.md, "A
    /// host without TCP_NODELAY").
    QuickUntilBulk,
}

/// Moves `from` to `to` until `from` ends or either fails, then shuts
/// `to`'s writing side.
async fn direction(from: Socket<'_>, to: Socket<'_>, count: &AtomicU64, acks: Acks) {
    let _ = match SplicePipe::new() {
        Ok(pipe) => spliced(from, to, pipe, count, acks).await,
        Err(_) => copied(from, to, count, acks).await,
    };
    shut_write(to.fd());
}

/// Acknowledges at once what `socket` has received (a failure leaves the
/// kernel's own timing).
fn quick_ack(socket: Socket<'_>) {
    let _ = socket2::SockRef::from(socket.0).set_tcp_quickack(true);
}

/// Socket to pipe to socket: the pipe is filled only when empty. With
/// [`Acks::QuickUntilBulk`], each fill before the pipe first takes bulk
/// (64 KiB in one fill: `SplicePipe::carried_bulk`) is acknowledged at
/// once; a fill cannot tell whether it emptied the socket, so bulk ends
/// it, and a download's throughput path has no extra system call.
async fn spliced(
    from: Socket<'_>,
    to: Socket<'_>,
    mut pipe: SplicePipe,
    count: &AtomicU64,
    acks: Acks,
) -> io::Result<()> {
    loop {
        if from
            .when_ready(Interest::READABLE, || pipe.fill(from.fd()))
            .await?
            == 0
        {
            return Ok(());
        }
        if acks == Acks::QuickUntilBulk && !pipe.carried_bulk() {
            quick_ack(from);
        }
        while pipe.held() > 0 {
            let n = to
                .when_ready(Interest::WRITABLE, || pipe.drain(to.fd()))
                .await?;
            count.fetch_add(n as u64, Ordering::Relaxed);
        }
    }
}

/// Socket to buffer to socket. With [`Acks::QuickUntilBulk`], a read
/// that emptied the socket (fewer bytes than the buffer takes) is
/// acknowledged at once, as `quickack.rs` does for terminated tunnels.
async fn copied(from: Socket<'_>, to: Socket<'_>, count: &AtomicU64, acks: Acks) -> io::Result<()> {
    let mut buf = vec![0u8; BUFFER];
    loop {
        let n = from
            .when_ready(Interest::READABLE, || from.try_read(&mut buf))
            .await?;
        if n == 0 {
            return Ok(());
        }
        if acks == Acks::QuickUntilBulk && n < buf.len() {
            quick_ack(from);
        }
        let mut sent = 0;
        while sent < n {
            let k = to
                .when_ready(Interest::WRITABLE, || match to.try_write(&buf[sent..n]) {
                    Ok(0) => Err(io::ErrorKind::WriteZero.into()),
                    other => other,
                })
                .await?;
            sent += k;
            count.fetch_add(k as u64, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use socket2::SockRef;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Two ends of a new loopback connection.
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (near, far) = tokio::join!(TcpStream::connect(addr), listener.accept());
        (near.unwrap(), far.unwrap().0)
    }

    /// A small write of the host through a spliced tunnel (its TLS 1.3
    /// session tickets, say) leaves the proxy's socket to the host out of
    /// delayed-ACK ("ping-pong") mode, which getsockopt(TCP_QUICKACK)
    /// reports as 1: the ACK a Nagle-bound host waits for leaves at once.
    /// The job's socket is left to the kernel's timing (printed only: the
    /// kernel's own 40 ms delayed-ACK timer also ends ping-pong, so a
    /// test thread held that long could see 1 there; no timer can make
    /// the host side's 1 a 0, so that one decides). Then a bulk download
    /// through the same tunnel arrives whole.
    #[tokio::test]
    async fn a_small_read_from_the_host_is_acknowledged_at_once() {
        let (mut job, client) = pair().await;
        let (upstream, mut host) = pair().await;
        let quick = |s: &TcpStream| SockRef::from(s).tcp_quickack().unwrap();
        SockRef::from(&upstream).set_tcp_quickack(false).unwrap();
        SockRef::from(&client).set_tcp_quickack(false).unwrap();
        let (_phase, mut rx) = watch::channel(EgressPhase::Agent);
        let bulk = vec![5u8; 4 << 20];
        let exchange = async {
            host.write_all(b"tickets").await.unwrap();
            let mut got = [0u8; 7];
            job.read_exact(&mut got).await.unwrap();
            let host_side = quick(&upstream);
            job.write_all(b"request").await.unwrap();
            host.read_exact(&mut got).await.unwrap();
            let job_side = quick(&client);
            let (mut job_read, _) = job.split();
            let (downloaded, _) = tokio::join!(
                async {
                    let mut all = Vec::new();
                    job_read.read_to_end(&mut all).await.unwrap();
                    all
                },
                async {
                    host.write_all(&bulk).await.unwrap();
                    host.shutdown().await.unwrap();
                }
            );
            job.shutdown().await.unwrap();
            (host_side, job_side, downloaded)
        };
        let (relayed, (host_side, job_side, downloaded)) =
            tokio::join!(relay(&client, &upstream, &mut rx), exchange);
        eprintln!("quick ACKs after the reads: host side {host_side}, job side {job_side}");
        assert_eq!(
            (host_side, relayed, downloaded.len()),
            (
                true,
                Relayed {
                    up: 7,
                    down: 7 + bulk.len() as u64,
                    cut: false
                },
                bulk.len()
            )
        );
        assert!(downloaded == bulk, "the download arrived changed");
    }
}

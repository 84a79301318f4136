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
//! took it.

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
                direction(client, upstream, &up),
                direction(upstream, client, &down)
            )
        };
        tokio::select! {
            _ = both => false,
            _ = phase.changed() => true,
        }
    };
    Relayed {
        up: up.load(Ordering::Relaxed),
        down: down.load(Ordering::Relaxed),
        cut,
    }
}

/// Moves `from` to `to` until `from` ends or either fails, then shuts
/// `to`'s writing side.
async fn direction(from: Socket<'_>, to: Socket<'_>, count: &AtomicU64) {
    let _ = match SplicePipe::new() {
        Ok(pipe) => spliced(from, to, pipe, count).await,
        Err(_) => copied(from, to, count).await,
    };
    shut_write(to.fd());
}

/// Socket to pipe to socket: the pipe is filled only when empty.
async fn spliced(
    from: Socket<'_>,
    to: Socket<'_>,
    mut pipe: SplicePipe,
    count: &AtomicU64,
) -> io::Result<()> {
    loop {
        if from
            .when_ready(Interest::READABLE, || pipe.fill(from.fd()))
            .await?
            == 0
        {
            return Ok(());
        }
        while pipe.held() > 0 {
            let n = to
                .when_ready(Interest::WRITABLE, || pipe.drain(to.fd()))
                .await?;
            count.fetch_add(n as u64, Ordering::Relaxed);
        }
    }
}

/// Socket to buffer to socket.
async fn copied(from: Socket<'_>, to: Socket<'_>, count: &AtomicU64) -> io::Result<()> {
    let mut buf = vec![0u8; BUFFER];
    loop {
        let n = from
            .when_ready(Interest::READABLE, || from.try_read(&mut buf))
            .await?;
        if n == 0 {
            return Ok(());
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

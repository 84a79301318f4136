//! The most connections one job's broker holds at once. The broker runs in
//! Paddock's own process (with every other job of a `paddock serve`), and
//! each connection the job opens to it is a descriptor of that process: a
//! job opening thousands would use up the process's descriptors (its
//! store, the other jobs' brokers and proxies) and its memory. The
//! listener accepts a connection only while fewer than
//! [`MAX_CONNECTIONS`] of the job's are open; more wait in the listen
//! backlog, as the egress proxy's do (`egress::server`). The engines hold
//! a few (a keep-alive pool, a handful of parallel subagents).
//!
//! Every connection ends with its broker: once the broker is stopped
//! ([`Limited::closed`] cancelled, when its handle is dropped at the job's
//! teardown), each accepted connection fails its next read or write. A
//! stopped `axum::serve` only lets its connections finish what they are
//! reading gracefully, which a job trickling a body, or a process of the
//! job that outlived it, would stretch for ever, and a request finished
//! then would still be forwarded upstream.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::serve::Listener;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// Connections one job's broker holds open at once.
pub const MAX_CONNECTIONS: usize = 64;

/// A listener that accepts only while fewer than its limit of the
/// connections it accepted are open.
/// Its connections are closed when `closed` is cancelled.
pub(super) struct Limited<L> {
    inner: L,
    permits: Arc<Semaphore>,
    closed: CancellationToken,
}

impl<L> Limited<L> {
    pub(super) fn new(inner: L, max: usize, closed: CancellationToken) -> Limited<L> {
        Limited {
            inner,
            permits: Arc::new(Semaphore::new(max)),
            closed,
        }
    }
}

impl<L: Listener> Listener for Limited<L> {
    type Io = Held<L::Io>;
    type Addr = L::Addr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        // The semaphore is never closed: a permit always comes.
        let permit = self.permits.clone().acquire_owned().await.ok();
        let (io, addr) = self.inner.accept().await;
        (
            Held {
                io,
                _permit: permit,
                closed: Box::pin(self.closed.clone().cancelled_owned()),
            },
            addr,
        )
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// An accepted connection, which gives its place back when it closes,
/// and fails once its broker is stopped.
pub(super) struct Held<T> {
    io: T,
    _permit: Option<OwnedSemaphorePermit>,
    closed: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl<T> Held<T> {
    /// An error once the broker is stopped; else the connection's task is
    /// woken when it is.
    fn stopped(&mut self, cx: &mut Context<'_>) -> Result<(), std::io::Error> {
        match self.closed.as_mut().poll(cx) {
            Poll::Ready(()) => Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionAborted,
                "paddock broker: the job's broker is stopped",
            )),
            Poll::Pending => Ok(()),
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Held<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        this.stopped(cx)?;
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Held<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        this.stopped(cx)?;
        Pin::new(&mut this.io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        this.stopped(cx)?;
        Pin::new(&mut this.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

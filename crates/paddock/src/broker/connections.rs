//! The most connections one job's broker holds at once. The broker runs in
//! Paddock's own process (with every other job of a `paddock serve`), and
//! each connection the job opens to it is a descriptor of that process: a
//! job opening thousands would use up the process's descriptors (its
//! store, the other jobs' brokers and proxies) and its memory. The
//! listener accepts a connection only while fewer than
//! [`MAX_CONNECTIONS`] of the job's are open; more wait in the listen
//! backlog, as the egress proxy's do (`egress::server`). The engines hold
//! a few (a keep-alive pool, a handful of parallel subagents).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::serve::Listener;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Connections one job's broker holds open at once.
pub const MAX_CONNECTIONS: usize = 64;

/// A listener that accepts only while fewer than its limit of the
/// connections it accepted are open.
pub(super) struct Limited<L> {
    inner: L,
    permits: Arc<Semaphore>,
}

impl<L> Limited<L> {
    pub(super) fn new(inner: L, max: usize) -> Limited<L> {
        Limited {
            inner,
            permits: Arc::new(Semaphore::new(max)),
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
            },
            addr,
        )
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// An accepted connection, which gives its place back when it closes.
pub(super) struct Held<T> {
    io: T,
    _permit: Option<OwnedSemaphorePermit>,
}

impl<T: AsyncRead + Unpin> AsyncRead for Held<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Held<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
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
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

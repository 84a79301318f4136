//! How long an answer's write may wait for its client. hyper writes an
//! answer as fast as the client reads it and has no timer of its own for
//! that: a client that asked for a large page (a job's events, the
//! ledger) and then read nothing held its connection, and the answer
//! still to be written in the server's memory, for ever; a thousand such
//! held every connection the server serves. [`Stalled`] wraps each
//! connection's socket (`connections.rs`): a write that can make no
//! progress (the client's window and the socket's buffer full) for
//! [`ConnectionLimits::write_stall`](super::ConnectionLimits) fails with
//! `TimedOut`, and hyper closes the connection and drops the rest of the
//! answer. A write that moves any bytes starts the wait again, so a slow
//! reader is served; a connection with nothing to write (an idle
//! keep-alive, an event stream between events) is not timed here.

use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// A socket whose writes fail once one has waited `stall` with no progress.
pub struct Stalled<S> {
    inner: S,
    stall: Duration,
    /// Armed while a write waits; cleared by any progress.
    waiting: Option<Pin<Box<Sleep>>>,
}

impl<S> Stalled<S> {
    pub fn new(inner: S, stall: Duration) -> Stalled<S> {
        Stalled {
            inner,
            stall,
            waiting: None,
        }
    }

    /// `polled`, a write step's outcome: progress clears the wait; a step
    /// still pending arms it, and fails once it has run out.
    fn timed<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.waiting = None;
            return polled;
        }
        let stall = self.stall;
        let waiting = self
            .waiting
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(stall)));
        match waiting.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.waiting = None;
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the client read nothing of the answer for {} s",
                        stall.as_secs_f64()
                    ),
                )))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Stalled<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Stalled<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.timed(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.timed(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_flush(cx);
        this.timed(cx, polled)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.timed(cx, polled)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Instant;

    use axum::routing::get;
    use axum::Router;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::{TcpListener, TcpSocket};

    use crate::server::connections::{serve, ConnectionLimits};

    use super::*;

    const STALL: Duration = Duration::from_secs(1);
    /// A page far larger than both sockets' buffers.
    const PAGE: usize = 32 * 1024 * 1024;

    /// Probe: a client that asks for a large answer and reads nothing has
    /// its connection closed once the write has waited the stall, and the
    /// rest of the answer is never sent; one that reads slowly but keeps
    /// reading gets all of it. Without the wrapper the unread connection
    /// stays open and a later read gets the whole page.
    #[tokio::test]
    async fn an_answer_its_client_does_not_read_ends_its_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new().route("/page", get(|| async { vec![b'x'; PAGE] }));
        let (_stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let limits = ConnectionLimits {
            write_stall: STALL,
            ..ConnectionLimits::default()
        };
        tokio::spawn(serve(listener, app, limits, async move {
            let _ = stopped.await;
        }));
        let connect = |recv_buffer: Option<u32>| async move {
            let socket = TcpSocket::new_v4().unwrap();
            if let Some(size) = recv_buffer {
                socket.set_recv_buffer_size(size).unwrap();
            }
            let mut stream = socket.connect(addr).await.unwrap();
            stream
                .write_all(b"GET /page HTTP/1.1\r\nHost: t\r\n\r\n")
                .await
                .unwrap();
            stream
        };

        // A reader that keeps reading, more slowly than the page could be
        // sent and for longer than the stall, gets the page whole.
        let mut slow = connect(None).await;
        let mut got = 0usize;
        let mut buf = vec![0u8; 64 * 1024];
        let start = Instant::now();
        while got <= PAGE {
            match tokio::time::timeout(Duration::from_secs(10), slow.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
                Ok(Ok(n)) => got += n,
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let took = start.elapsed();
        assert_eq!(
            (got > PAGE, took > STALL),
            (true, true),
            "{got} bytes in {took:?}"
        );

        // A reader that stops reading: closed past the stall.
        let mut idle = connect(Some(4096)).await;
        tokio::time::sleep(3 * STALL).await;
        let mut rest = Vec::new();
        let ended =
            tokio::time::timeout(Duration::from_secs(10), idle.read_to_end(&mut rest)).await;
        let closed = match ended {
            Ok(Ok(_)) | Ok(Err(_)) => true,
            Err(_) => false,
        };
        assert_eq!(
            (closed, rest.len() < PAGE),
            (true, true),
            "{} bytes",
            rest.len()
        );
    }
}

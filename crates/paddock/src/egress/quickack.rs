//! The proxy's TCP connection to a credential host acknowledges at once
//! what it has read when that emptied the socket (`TCP_QUICKACK`), so a
//! host that leaves Nagle on (no `TCP_NODELAY`) never waits for the
//! proxy's delayed ACK before its next small write (docs/egress.md, "A
//! host without TCP_NODELAY").
//!
//! The exchange it fixes, seen with tcpdump on loopback against such a
//! host: the proxy's TLS handshake with the host runs beside the job's,
//! so once both finish the job's first request is already waiting and
//! the proxy sends its `Finished` and the request within a millisecond.
//! The host takes both, writes its TLS 1.3 session tickets (a small
//! segment, unacknowledged), then its answer: Nagle holds the answer until
//! the tickets are acknowledged. The proxy has nothing more to send, and
//! Linux, which saw the proxy answer the host's segments quickly during
//! the handshake ("ping-pong" mode), delays that ACK by its 40 ms timer:
//! the first request on the connection took 40 ms more. A direct client
//! usually escapes it because its request leaves after the tickets
//! arrived and carries the ACK. A host writing an answer in several
//! small writes meets the same delay at every one of them.
//!
//! `TCP_QUICKACK` is not permanent (the kernel goes back to delaying
//! ACKs on its own rules), so it is set again after every read that
//! emptied the socket (fewer bytes than asked for): then nothing more is
//! queued, the proxy is about to wait, and any ACK the kernel holds back
//! is sent now. A read that filled the buffer (bulk) costs nothing more.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A TCP connection that sets `TCP_QUICKACK` after each read that
/// emptied it.
pub struct QuickAck {
    tcp: TcpStream,
}

impl QuickAck {
    pub fn new(tcp: TcpStream) -> QuickAck {
        QuickAck { tcp }
    }

    /// The connection itself.
    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }
}

impl AsyncRead for QuickAck {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let (asked, before) = (buf.remaining(), buf.filled().len());
        let read = Pin::new(&mut self.tcp).poll_read(cx, buf);
        let got = buf.filled().len() - before;
        if matches!(read, Poll::Ready(Ok(()))) && got > 0 && got < asked {
            // A failure leaves the kernel's own ACK timing.
            let _ = socket2::SockRef::from(&self.tcp).set_tcp_quickack(true);
        }
        read
    }
}

impl AsyncWrite for QuickAck {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// After a read that emptied the socket, the socket is out of
    /// delayed-ACK ("ping-pong") mode, which getsockopt(TCP_QUICKACK)
    /// reports as 1, whatever it was before; a read that filled the
    /// buffer leaves it as it was. (The kernel's own delayed-ACK timer,
    /// 40 ms after data arrives, also ends ping-pong: a test thread held
    /// that long between the arrival and the checks would see 1 early,
    /// so only the value after the emptying read, which no timer can make
    /// 0, decides; the others are printed.)
    #[tokio::test]
    async fn a_read_that_empties_the_socket_turns_quick_acks_on() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tcp, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let mut host = accepted.unwrap().0;
        let mut proxy = QuickAck::new(tcp.unwrap());
        let quick = |s: &QuickAck| socket2::SockRef::from(s.tcp()).tcp_quickack().unwrap();
        let delayed = |s: &QuickAck| socket2::SockRef::from(s.tcp()).set_tcp_quickack(false);
        let mut seen = Vec::new();
        for (sent, asked) in [(8usize, 4usize), (4, 16)] {
            host.write_all(&vec![7u8; sent]).await.unwrap();
            // Arrived (and acknowledged: a new connection starts in quick
            // mode, so no delayed-ACK timer can end ping-pong meanwhile).
            proxy.tcp().readable().await.unwrap();
            delayed(&proxy).unwrap();
            seen.push(quick(&proxy));
            let mut buf = vec![0u8; asked];
            let n = proxy.read(&mut buf).await.unwrap();
            seen.push(quick(&proxy));
            // What the full read left.
            if n < sent {
                proxy.read_exact(&mut vec![0u8; sent - n]).await.unwrap();
            }
        }
        eprintln!(
            "quick ACKs before/after each read: {seen:?} (expected [false, false, false, true])"
        );
        assert!(seen[3], "{seen:?}");
    }
}

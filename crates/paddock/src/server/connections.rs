//! The server's connections, accepted and served here rather than by
//! `axum::serve`, which offers neither of the two bounds a server reachable
//! by anyone needs before any token is checked: at most
//! [`ConnectionLimits::max`] connections are open at once (more wait in the
//! listen backlog, as the broker's and the egress proxy's do), and a
//! request's head must arrive whole within
//! [`ConnectionLimits::header_read_timeout`] (hyper's own timer: an idle
//! keep-alive connection is closed after it, and one trickling its head a
//! byte at a time, the slowloris attack, too); an answer's write that
//! waits [`ConnectionLimits::write_stall`] for a client reading nothing
//! closes the connection (`write_deadline.rs`). Before, each held a
//! descriptor of the server for ever, and enough of them took every
//! descriptor its store, jobs and brokers need. HTTP/1.1 is served as
//! `axum::serve` serves it (this crate's axum has no HTTP/2); a stop ends the accept
//! loop, asks every connection to finish what it is answering, and waits
//! for them (event streams end first: the server's `closing`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::write_deadline::Stalled;

/// The bounds on a server's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections open at once, at most.
    pub max: usize,
    /// How long a request's head may take to arrive (and an idle
    /// keep-alive connection may wait for its next request).
    pub header_read_timeout: Duration,
    /// How long a request's body may take to arrive once its head has
    /// (`body_deadline.rs`).
    pub body_read_timeout: Duration,
    /// How long a write of an answer may wait for its client to read
    /// before the connection is closed (`write_deadline.rs`).
    pub write_stall: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> ConnectionLimits {
        ConnectionLimits {
            max: 1024,
            header_read_timeout: Duration::from_secs(30),
            body_read_timeout: Duration::from_secs(30),
            write_stall: Duration::from_secs(30),
        }
    }
}

/// How long an accept that failed (descriptors used up, a connection
/// aborted before it was taken) waits before the next.
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// Serves `app` on `listener` within `limits` until `stopped` resolves,
/// then lets the open connections finish (module text).
pub(super) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    stopped: impl Future<Output = ()>,
) {
    let permits = Arc::new(Semaphore::new(limits.max.max(1)));
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_headers(super::head_limits::HYPER_MAX_HEADERS)
        .max_buf_size(super::head_limits::HYPER_HEAD_BUFFER);
    tokio::pin!(stopped);
    loop {
        let permit = tokio::select! {
            () = &mut stopped => break,
            // Never closed: a permit always comes.
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            () = &mut stopped => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!("serve: accept: {e}");
                tokio::time::sleep(ACCEPT_PAUSE).await;
                continue;
            }
        };
        let service = TowerToHyperService::new(app.clone());
        let io = TokioIo::new(Stalled::new(stream, limits.write_stall));
        let connection = graceful.watch(builder.serve_connection(io, service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("serve: connection: {e}");
            }
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use axum::routing::get;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::TcpStream;

    use super::*;

    const REQUEST: &[u8] = b"GET /ok HTTP/1.1\r\nHost: t\r\n\r\n";

    /// A server of one route on `127.0.0.1:0` within `limits`, stopped
    /// when the returned sender is dropped.
    async fn started(
        limits: ConnectionLimits,
    ) -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new().route("/ok", get(|| async { "ok" }));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(serve(listener, app, limits, async move {
            let _ = stopped.await;
        }));
        (addr, stop)
    }

    /// Reads until the peer closes (`Ok(bytes)`) or `within` passes.
    async fn read_to_close(stream: &mut TcpStream, within: Duration) -> Option<Vec<u8>> {
        let mut got = Vec::new();
        tokio::time::timeout(within, async {
            let mut buf = [0u8; 1024];
            loop {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
        })
        .await
        .ok()
        .map(|()| got)
    }

    /// A client trickling its request's head a byte at a time (slowloris)
    /// is cut off once the head has taken the timeout, and so is one that
    /// sends nothing; a whole request is answered.
    #[tokio::test]
    async fn a_head_that_does_not_arrive_in_time_closes_the_connection() {
        let limits = ConnectionLimits {
            max: 8,
            header_read_timeout: Duration::from_secs(1),
            ..ConnectionLimits::default()
        };
        let (addr, _stop) = started(limits).await;
        let mut whole = TcpStream::connect(addr).await.unwrap();
        whole.write_all(REQUEST).await.unwrap();
        let mut buf = [0u8; 64];
        let n = whole.read(&mut buf).await.unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200 OK"), "{:?}", &buf[..n]);

        let mut idle = TcpStream::connect(addr).await.unwrap();
        let mut slow = TcpStream::connect(addr).await.unwrap();
        let start = Instant::now();
        let trickle = async {
            for byte in
                b"GET /ok HTTP/1.1\r\nHost: t\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
            {
                if slow.write_all(&[*byte]).await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            read_to_close(&mut slow, Duration::from_secs(10)).await
        };
        let (slow_end, idle_end) =
            tokio::join!(trickle, read_to_close(&mut idle, Duration::from_secs(10)));
        let took = start.elapsed();
        // Closed with nothing answered (hyper may answer 408 first).
        for end in [slow_end, idle_end] {
            let end = end.expect("the connection was not closed within 10 s");
            assert!(
                end.is_empty() || end.starts_with(b"HTTP/1.1 408"),
                "{end:?}"
            );
        }
        assert!(took >= Duration::from_millis(900), "{took:?}");
    }

    /// No more than `max` connections are served at once: one more waits
    /// (in the listen backlog) until one of them closes, then is answered.
    #[tokio::test]
    async fn connections_past_the_cap_wait_for_one_to_close() {
        let limits = ConnectionLimits {
            max: 2,
            header_read_timeout: Duration::from_secs(60),
            ..ConnectionLimits::default()
        };
        let (addr, _stop) = started(limits).await;
        let first = TcpStream::connect(addr).await.unwrap();
        let _second = TcpStream::connect(addr).await.unwrap();
        let mut third = TcpStream::connect(addr).await.unwrap();
        third.write_all(REQUEST).await.unwrap();
        let mut buf = [0u8; 64];
        let early = tokio::time::timeout(Duration::from_millis(500), third.read(&mut buf)).await;
        assert!(early.is_err(), "answered past the cap: {early:?}");
        drop(first);
        let n = tokio::time::timeout(Duration::from_secs(10), third.read(&mut buf))
            .await
            .expect("not answered after a connection closed")
            .unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200 OK"), "{:?}", &buf[..n]);
    }
}

//! How long a request's body may take to arrive. The connections' header
//! timer (`connections.rs`) ends with the request's head: a client that
//! sent a head announcing a body and then trickled it, or sent nothing
//! more, held its connection for ever (the slowloris attack on the body),
//! and `POST /login` reads its form before any token is checked, so 1,024
//! such clients took every connection the server serves. [`bounded`], a
//! layer over the whole router, gives every body
//! [`ConnectionLimits::body_read_timeout`](super::ConnectionLimits) from
//! the moment its head was read: a body still arriving then fails its
//! read, and the answer is 408 `request_timeout` with `Connection: close`
//! (whatever the handler made of the failed read). A route that reads no
//! body is not held to it (an event stream's lasts as long as its job).

use std::future::Future as _;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::time::Sleep;

use super::problem::Problem;

/// The body read failed because its time was up.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {}", shown(*.0))]
struct Elapsed(Duration);

/// `limit` as a person reads it: `30 s`, or `500 ms` below a second or
/// between whole seconds.
fn shown(limit: Duration) -> String {
    if limit.subsec_millis() == 0 && limit.as_secs() > 0 {
        format!("{} s", limit.as_secs())
    } else {
        format!("{} ms", limit.as_millis())
    }
}

/// A request body that fails once its deadline passes.
struct Deadline {
    inner: Body,
    sleep: Pin<Box<Sleep>>,
    limit: Duration,
    /// Set when the deadline failed the read.
    fired: Arc<AtomicBool>,
}

impl HttpBody for Deadline {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if this.inner.is_end_stream() {
            return Poll::Ready(None);
        }
        if this.sleep.as_mut().poll(cx).is_ready() {
            this.fired.store(true, Ordering::SeqCst);
            return Poll::Ready(Some(Err(axum::Error::new(Elapsed(this.limit)))));
        }
        Pin::new(&mut this.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Middleware (`from_fn_with_state(limit, bounded)`): the request's body
/// must arrive within `limit`; 408 `request_timeout` otherwise.
pub async fn bounded(State(limit): State<Duration>, request: Request, next: Next) -> Response {
    let fired = Arc::new(AtomicBool::new(false));
    let (parts, body) = request.into_parts();
    let body = Body::new(Deadline {
        inner: body,
        sleep: Box::pin(tokio::time::sleep(limit)),
        limit,
        fired: Arc::clone(&fired),
    });
    let response = next.run(Request::from_parts(parts, body)).await;
    if !fired.load(Ordering::SeqCst) {
        return response;
    }
    let mut refused = Problem::new(
        408,
        "request_timeout",
        "the request body did not arrive in time",
        format!(
            "the request body did not arrive within {} of the request's head; send it whole",
            shown(limit)
        ),
    )
    .into_response();
    refused
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    refused
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use axum::routing::{get, post};
    use axum::Router;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;
    use crate::server::connections::{serve, ConnectionLimits};

    const LIMIT: Duration = Duration::from_millis(500);

    /// A server on `127.0.0.1:0` of a route reading a body as the API's
    /// do and one reading none that answers after twice the limit, with
    /// the layer; stopped when the returned sender is dropped.
    async fn started() -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new()
            .route(
                "/read",
                post(|body: Bytes| async move { format!("{} bytes", body.len()) }),
            )
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(LIMIT * 2).await;
                    "no body read"
                }),
            )
            .layer(axum::middleware::from_fn_with_state(LIMIT, bounded));
        let limits = ConnectionLimits {
            max: 8,
            header_read_timeout: Duration::from_secs(60),
            ..ConnectionLimits::default()
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(serve(listener, app, limits, async move {
            let _ = stopped.await;
        }));
        (addr, stop)
    }

    /// What the server sends on a connection that sent `request` (and
    /// nothing more) until it closes it; `None` when it has not within
    /// 10 s.
    async fn exchange(addr: std::net::SocketAddr, request: &[u8]) -> Option<String> {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(request).await.unwrap();
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut got))
            .await
            .ok()?
            .ok()?;
        Some(String::from_utf8_lossy(&got).into_owned())
    }

    /// Probe: a client that sends a head announcing 1,000 bytes of body
    /// and then only 7 is answered 408 `request_timeout` at the limit and
    /// its connection closed (without the layer the server waits for the
    /// rest for ever); a whole body is read, and a route that reads none
    /// answers after the limit has passed.
    #[tokio::test]
    async fn a_body_that_does_not_arrive_in_time_is_a_408_and_the_connection_closed() {
        let (addr, _stop) = started().await;
        let asked = std::time::Instant::now();
        let stalled = exchange(
            addr,
            b"POST /read HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\nticket=",
        )
        .await
        .expect("the connection of a stalled body was not closed within 10 s");
        let took = asked.elapsed();
        let (head, body) = stalled.split_once("\r\n\r\n").unwrap();
        let mut head: Vec<&str> = head.lines().filter(|l| !l.starts_with("date:")).collect();
        head.sort_unstable();
        assert_eq!(
            (head, body),
            (
                vec![
                    "HTTP/1.1 408 Request Timeout",
                    "connection: close",
                    "content-length: 228",
                    "content-type: application/problem+json",
                ],
                "{\"type\":\"urn:paddock:problem:request_timeout\",\"title\":\"the request body \
                 did not arrive in time\",\"status\":408,\"detail\":\"the request body did not \
                 arrive within 500 ms of the request's head; send it whole\",\"code\":\
                 \"request_timeout\"}"
            )
        );
        assert!(took >= LIMIT && took < LIMIT * 4, "{took:?}");

        let whole = exchange(
            addr,
            b"POST /read HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: 10\r\n\r\nticket=T-1",
        )
        .await
        .unwrap();
        assert!(
            whole.starts_with("HTTP/1.1 200 OK") && whole.ends_with("10 bytes"),
            "{whole}"
        );
        let slow = exchange(
            addr,
            b"GET /slow HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        )
        .await
        .unwrap();
        assert!(
            slow.starts_with("HTTP/1.1 200 OK") && slow.ends_with("no body read"),
            "{slow}"
        );
    }
}

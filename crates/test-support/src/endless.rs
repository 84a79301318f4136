//! A mock HTTP server on loopback that never stops answering: every
//! request gets `200 OK` and a body of spaces that streams forever, for
//! the tests that check a client reads an answer up to a bound only
//! (token endpoints, credential endpoints, upstreams).

use std::net::SocketAddr;

/// Starts the server; its address.
pub async fn serve() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().fallback(|| async {
        let body = futures::stream::repeat_with(|| {
            Ok::<_, std::io::Error>(bytes::Bytes::from_static(&[b' '; 4096]))
        });
        axum::body::Body::from_stream(body)
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

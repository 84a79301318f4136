//! A git smart-HTTP server for tests: `git http-backend` (from the git
//! package) run as a CGI program behind a small loopback server, serving
//! the bare repositories under a directory, fetch and push both. Every
//! request must carry the expected `Authorization` header (401 with a
//! Basic challenge otherwise, as a forge answers); each one's header is
//! recorded, so a test sees which credentials reached the remote. Or over
//! HTTPS ([`GitHttpServer::start_https`]): behind rustls with a
//! certificate for `localhost` signed by a self-signed CA made by rcgen for
//! the server alone (its PEM given to the test, for the client to trust),
//! no authorization asked ([`GitHttpServer::start_https_requiring`]: one
//! demanded), the server name each TLS client announced recorded. A
//! request for `/echo-headers` is answered with the request's headers, as
//! an httpbin-like endpoint that reflects them (`/echo-slowly`: in two
//! chunks 200 ms apart, cut in the middle of the `authorization` value;
//! `/echo-gzip`: labelled `content-encoding: gzip` whatever was asked;
//! `/echo-upgrade`: `101 Switching Protocols` to `websocket`, as a
//! WebSocket server accepts a handshake). The credential check can
//! be a forge mock's (the tokens it minted), and `set_stall` leaves
//! requests hanging (a push killed mid-way). Over HTTPS it also records
//! which connection (the client's address) each request came on, and can
//! end its kept connections as a keep-alive timeout would
//! ([`GitHttpServer::close_connections`]), or end the connection of the
//! next request without answering it, as a host whose idle timeout fired
//! just as the request came ([`GitHttpServer::drop_next_request`]).
//! Its writes are a well-behaved server's by default (`TCP_NODELAY`, each
//! TLS flight in one write); [`HttpsWrites`] makes them a less careful
//! one's: Nagle left on, and every write to the socket cut into small
//! pieces (the handshake's flight, the session tickets and each answer
//! in several segments), as real servers may write.

use std::future::Future as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use futures::StreamExt as _;
use http::{Request, StatusCode};
use tokio::io::AsyncWriteExt as _;
use tokio_util::sync::CancellationToken;

/// How the HTTPS stand-in writes to its sockets
/// ([`GitHttpServer::start_https_writing`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpsWrites {
    /// Whether `TCP_NODELAY` is set on each connection (most servers set
    /// it). Without it, Nagle holds a write smaller than a segment while
    /// an earlier one is unacknowledged.
    pub nodelay: bool,
    /// Each write to the socket at most this many bytes (`None`: as
    /// rustls hands them over, a flight at a time).
    pub max_write: Option<usize>,
}

impl Default for HttpsWrites {
    fn default() -> Self {
        HttpsWrites {
            nodelay: true,
            max_write: None,
        }
    }
}

/// A check of a request's `Authorization` header.
type Check = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// The running server.
#[derive(Clone)]
pub struct GitHttpServer {
    /// `http://127.0.0.1:PORT`: a repository `NAME.git` under the root is
    /// `{url}/NAME.git`.
    pub url: String,
    root: PathBuf,
    /// Whether a request's `Authorization` is taken; `None`: none asked.
    authorization: Option<Check>,
    seen: Arc<Mutex<Vec<Option<String>>>>,
    /// The server name (SNI) of each TLS connection (HTTPS only).
    server_names: Arc<Mutex<Vec<Option<String>>>>,
    /// While set, requests are recorded and left unanswered (a remote
    /// that hangs mid-push).
    stall: Arc<std::sync::atomic::AtomicBool>,
    /// The client's address of each request, in order (HTTPS only).
    peers: Arc<Mutex<Vec<Option<SocketAddr>>>>,
    /// The TLS connections' sockets by the client's address (HTTPS only).
    sockets: Sockets,
    /// While set, the next request's connection is ended unanswered.
    drop_next: Arc<std::sync::atomic::AtomicBool>,
}

/// Each accepted connection's ending, by the client's address.
type Sockets = Arc<Mutex<std::collections::HashMap<SocketAddr, CancellationToken>>>;

/// The client's address of an HTTPS connection, for the handler.
#[derive(Clone, Copy)]
struct Peer(SocketAddr);

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, TlsListener>> for Peer {
    fn connect_info(stream: axum::serve::IncomingStream<'_, TlsListener>) -> Self {
        Peer(*stream.remote_addr())
    }
}

impl GitHttpServer {
    /// Serves the repositories under `root`, accepting only requests whose
    /// `Authorization` header is `authorization`.
    pub async fn start(root: &Path, authorization: &str) -> GitHttpServer {
        let expected = authorization.to_string();
        GitHttpServer::start_checked(root, move |a| a == expected).await
    }

    /// Serves the repositories under `root`, accepting only requests whose
    /// `Authorization` header `check` takes (a forge mock's check of the
    /// tokens it minted).
    pub async fn start_checked(
        root: &Path,
        check: impl Fn(&str) -> bool + Send + Sync + 'static,
    ) -> GitHttpServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = GitHttpServer {
            url: format!("http://{}", listener.local_addr().unwrap()),
            root: root.to_path_buf(),
            authorization: Some(Arc::new(check)),
            seen: Arc::default(),
            server_names: Arc::default(),
            stall: Arc::default(),
            peers: Arc::default(),
            sockets: Arc::default(),
            drop_next: Arc::default(),
        };
        let router = server.router();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        server
    }

    /// Serves the repositories under `root` over HTTPS on loopback, as
    /// `https://localhost:PORT`, with no authorization asked; the PEM of
    /// the CA that signed its certificate.
    pub async fn start_https(root: &Path) -> (GitHttpServer, String) {
        GitHttpServer::https(root, None, HttpsWrites::default()).await
    }

    /// [`GitHttpServer::start_https`] demanding `authorization` on every
    /// request (401 otherwise).
    pub async fn start_https_requiring(
        root: &Path,
        authorization: &str,
    ) -> (GitHttpServer, String) {
        let expected = authorization.to_string();
        let check: Check = Arc::new(move |a| a == expected);
        GitHttpServer::https(root, Some(check), HttpsWrites::default()).await
    }

    /// [`GitHttpServer::start_https_requiring`] writing to its sockets as
    /// `writes` says (Nagle on, small writes).
    pub async fn start_https_writing(
        root: &Path,
        authorization: &str,
        writes: HttpsWrites,
    ) -> (GitHttpServer, String) {
        let expected = authorization.to_string();
        let check: Check = Arc::new(move |a| a == expected);
        GitHttpServer::https(root, Some(check), writes).await
    }

    async fn https(
        root: &Path,
        authorization: Option<Check>,
        writes: HttpsWrites,
    ) -> (GitHttpServer, String) {
        let (config, ca_pem) = tls_config();
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = tcp.local_addr().unwrap().port();
        let server = GitHttpServer {
            url: format!("https://localhost:{port}"),
            root: root.to_path_buf(),
            authorization,
            seen: Arc::default(),
            server_names: Arc::default(),
            stall: Arc::default(),
            peers: Arc::default(),
            sockets: Arc::default(),
            drop_next: Arc::default(),
        };
        let listener = TlsListener {
            tcp,
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
            server_names: server.server_names.clone(),
            sockets: server.sockets.clone(),
            writes,
        };
        let router = server.router();
        tokio::spawn(async move {
            let _ = axum::serve(
                listener,
                router.into_make_service_with_connect_info::<Peer>(),
            )
            .await;
        });
        (server, ca_pem)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap()
    }

    /// The server name each TLS client announced, in order (HTTPS only).
    pub fn server_names(&self) -> Vec<Option<String>> {
        self.server_names.lock().unwrap().clone()
    }

    fn router(&self) -> axum::Router {
        let served = self.clone();
        axum::Router::new().fallback(move |req: Request<Body>| {
            let server = served.clone();
            async move { server.answer(req).await }
        })
    }

    /// Leaves every request from now on unanswered while `stall`.
    pub fn set_stall(&self, stall: bool) {
        self.stall.store(stall, std::sync::atomic::Ordering::SeqCst);
    }

    /// The client's address of every request, in order: requests with
    /// the same one came on the same connection (HTTPS only; `None` over
    /// plain HTTP).
    pub fn peers(&self) -> Vec<Option<SocketAddr>> {
        self.peers.lock().unwrap().clone()
    }

    /// Ends every connection the server holds (both directions shut, as a
    /// keep-alive timeout ends an idle one; HTTPS only).
    pub fn close_connections(&self) {
        for (_, end) in self.sockets.lock().unwrap().drain() {
            end.cancel();
        }
    }

    /// The next request is recorded, then its connection is ended without
    /// an answer (HTTPS only).
    pub fn drop_next_request(&self) {
        self.drop_next
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// The `Authorization` header of every request, in order.
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.seen.lock().unwrap().clone()
    }

    async fn answer(&self, req: Request<Body>) -> http::Response<Body> {
        let auth = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        self.seen.lock().unwrap().push(auth.clone());
        let peer = req
            .extensions()
            .get::<axum::extract::ConnectInfo<Peer>>()
            .map(|c| c.0 .0);
        self.peers.lock().unwrap().push(peer);
        if let Some(peer) = peer {
            if self
                .drop_next
                .swap(false, std::sync::atomic::Ordering::SeqCst)
            {
                if let Some(end) = self.sockets.lock().unwrap().remove(&peer) {
                    end.cancel();
                }
                // The answer has no connection left to go on.
                return http::Response::new(Body::empty());
            }
        }
        while self.stall.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        if self
            .authorization
            .as_ref()
            .is_some_and(|check| !auth.as_deref().is_some_and(|a| check(a)))
        {
            return http::Response::builder()
                .status(StatusCode::UNAUTHORIZED)
                .header("WWW-Authenticate", "Basic realm=\"git\"")
                .body(Body::from("Unauthorized\n"))
                .unwrap();
        }
        let path = req.uri().path().to_string();
        let path = path.as_str();
        if [
            "/echo-headers",
            "/echo-slowly",
            "/echo-gzip",
            "/echo-upgrade",
        ]
        .contains(&path)
        {
            let mut echo = String::new();
            for (name, value) in req.headers() {
                echo.push_str(&format!(
                    "{name}: {}\n",
                    String::from_utf8_lossy(value.as_bytes())
                ));
            }
            // The request's body is read before the answer, as a server
            // that keeps its connections does: hyper closes a connection
            // whose request body was left unread when its answer ends, if
            // the body had not arrived yet (a race a test would see).
            let _ = axum::body::to_bytes(req.into_body(), 1 << 20).await;
            return match path {
                // In two chunks 200 ms apart, cut in the middle of the
                // `authorization` value: a host pausing mid-value.
                "/echo-slowly" => {
                    let at = echo.find("authorization: ").map_or(0, |i| i + 15);
                    let end = at + echo[at..].find('\n').unwrap_or(0);
                    let cut = (at + end) / 2;
                    let (a, b) = (echo[..cut].to_string(), echo[cut..].to_string());
                    let parts = futures::stream::iter([(a, false), (b, true)]).then(
                        |(part, late)| async move {
                            if late {
                                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                            }
                            Ok::<_, std::io::Error>(bytes::Bytes::from(part))
                        },
                    );
                    http::Response::new(Body::from_stream(parts))
                }
                // Labelled gzip whatever the request asked for (the bytes
                // are the echo itself: a client must not get to decode it).
                "/echo-gzip" => http::Response::builder()
                    .header("content-encoding", "gzip")
                    .body(Body::from(echo))
                    .unwrap(),
                // A WebSocket server's answer to a handshake: the `101`
                // head (no accept key: what a proxy that relays it would
                // let through is the switch itself).
                "/echo-upgrade" => http::Response::builder()
                    .status(StatusCode::SWITCHING_PROTOCOLS)
                    .header("upgrade", "websocket")
                    .header("connection", "upgrade")
                    .body(Body::empty())
                    .unwrap(),
                _ => http::Response::new(Body::from(echo)),
            };
        }
        let method = req.method().to_string();
        let path = req.uri().path().to_string();
        let query = req.uri().query().unwrap_or("").to_string();
        let (content_type, encoding) = {
            let header = |name: &str| -> String {
                req.headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string()
            };
            (header("content-type"), header("content-encoding"))
        };
        let body = axum::body::to_bytes(req.into_body(), 256 << 20)
            .await
            .unwrap();
        let mut child = tokio::process::Command::new("git")
            .arg("http-backend")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_PROJECT_ROOT", &self.root)
            .env("GIT_HTTP_EXPORT_ALL", "1")
            .env("REMOTE_USER", "tester")
            .env("REMOTE_ADDR", "127.0.0.1")
            .env("REQUEST_METHOD", method)
            .env("PATH_INFO", path)
            .env("QUERY_STRING", query)
            .env("CONTENT_TYPE", content_type)
            .env("CONTENT_LENGTH", body.len().to_string())
            .env("HTTP_CONTENT_ENCODING", encoding)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let write = async move {
            let _ = stdin.write_all(&body).await;
            drop(stdin);
        };
        let (_, out) = tokio::join!(write, child.wait_with_output());
        let out = out.unwrap();
        // CGI: headers, a blank line, the body.
        let split = out
            .stdout
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map(|i| (i, 4))
            .or_else(|| {
                out.stdout
                    .windows(2)
                    .position(|w| w == b"\n\n")
                    .map(|i| (i, 2))
            });
        let Some((end, sep)) = split else {
            return http::Response::builder()
                .status(StatusCode::INTERNAL_SERVER_ERROR)
                .body(Body::from(out.stderr))
                .unwrap();
        };
        let mut resp = http::Response::builder();
        let mut status = StatusCode::OK;
        for line in String::from_utf8_lossy(&out.stdout[..end]).lines() {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("status") {
                let code = value.split(' ').next().unwrap_or("200");
                status = StatusCode::from_bytes(code.as_bytes()).unwrap_or(StatusCode::OK);
            } else {
                resp = resp.header(name, value);
            }
        }
        resp.status(status)
            .body(Body::from(out.stdout[end + sep..].to_vec()))
            .unwrap()
    }
}

/// A rustls server configuration for `localhost` (a leaf certificate
/// signed by a fresh self-signed CA, both made by rcgen) and the CA's PEM.
fn tls_config() -> (rustls::ServerConfig, String) {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "Paddock test CA");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let mut leaf = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    leaf.distinguished_name
        .push(DnType::CommonName, "localhost");
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let leaf_key = KeyPair::generate().unwrap();
    let leaf_cert = leaf.signed_by(&leaf_key, &ca_cert, &ca_key).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(
        leaf_key.serialize_der(),
    ));
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![leaf_cert.der().clone(), ca_cert.der().clone()], key)
    .unwrap();
    (config, ca_cert.pem())
}

/// Loopback TCP with a TLS handshake per connection, for `axum::serve`;
/// a connection whose handshake fails (or takes over 10 s) is dropped.
struct TlsListener {
    tcp: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    server_names: Arc<Mutex<Vec<Option<String>>>>,
    sockets: Sockets,
    writes: HttpsWrites,
}

/// A TCP connection whose writes are at most `max` bytes each (the rest
/// is written by the next call, as any short write).
struct Pieces {
    tcp: tokio::net::TcpStream,
    max: usize,
}

impl tokio::io::AsyncRead for Pieces {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Pieces {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let n = buf.len().min(self.max);
        std::pin::Pin::new(&mut self.tcp).poll_write(cx, &buf[..n])
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// A server connection that can be ended from outside: once its token is
/// cancelled, reads see the end and writes fail, so the server closes it.
struct Endable {
    tls: tokio_rustls::server::TlsStream<Pieces>,
    ended: std::pin::Pin<Box<tokio_util::sync::WaitForCancellationFutureOwned>>,
}

impl Endable {
    fn is_ended(&mut self, cx: &mut std::task::Context<'_>) -> bool {
        self.ended.as_mut().poll(cx).is_ready()
    }
}

impl tokio::io::AsyncRead for Endable {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if self.is_ended(cx) {
            return std::task::Poll::Ready(Ok(()));
        }
        std::pin::Pin::new(&mut self.tls).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Endable {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if self.is_ended(cx) {
            return std::task::Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()));
        }
        std::pin::Pin::new(&mut self.tls).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.tls).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if self.is_ended(cx) {
            // No close_notify: the socket just closes, as on a timeout.
            return std::task::Poll::Ready(Ok(()));
        }
        std::pin::Pin::new(&mut self.tls).poll_shutdown(cx)
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = Endable;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                continue;
            };
            let _ = tcp.set_nodelay(self.writes.nodelay);
            let max = self.writes.max_write.unwrap_or(usize::MAX).max(1);
            let handshake = self.acceptor.accept(Pieces { tcp, max });
            if let Ok(Ok(tls)) =
                tokio::time::timeout(std::time::Duration::from_secs(10), handshake).await
            {
                let name = tls.get_ref().1.server_name().map(str::to_string);
                self.server_names.lock().unwrap().push(name);
                let end = CancellationToken::new();
                self.sockets.lock().unwrap().insert(addr, end.clone());
                let ended = Box::pin(end.cancelled_owned());
                return (Endable { tls, ended }, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

/// The `Authorization` header a forge's git takes for `token` (HTTP
/// basic, user `x-access-token`): what [`GitHttpServer::start`] is given
/// to demand.
pub fn basic(token: &str) -> String {
    use base64::Engine as _;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{token}"))
    )
}

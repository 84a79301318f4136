//! A git smart-HTTP server for tests: `git http-backend` (from the git
//! package) run as a CGI program behind a small loopback server, serving
//! the bare repositories under a directory, fetch and push both. Every
//! request must carry the expected `Authorization` header (401 with a
//! Basic challenge otherwise, as a forge answers); each one's header is
//! recorded, so a test sees which credentials reached the remote.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use http::{Request, StatusCode};
use tokio::io::AsyncWriteExt as _;

/// The running server.
#[derive(Clone)]
pub struct GitHttpServer {
    /// `http://127.0.0.1:PORT`: a repository `NAME.git` under the root is
    /// `{url}/NAME.git`.
    pub url: String,
    root: PathBuf,
    authorization: String,
    seen: Arc<Mutex<Vec<Option<String>>>>,
}

impl GitHttpServer {
    /// Serves the repositories under `root`, accepting only requests whose
    /// `Authorization` header is `authorization`.
    pub async fn start(root: &Path, authorization: &str) -> GitHttpServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = GitHttpServer {
            url: format!("http://{}", listener.local_addr().unwrap()),
            root: root.to_path_buf(),
            authorization: authorization.to_string(),
            seen: Arc::default(),
        };
        let served = server.clone();
        let router = axum::Router::new().fallback(move |req: Request<Body>| {
            let server = served.clone();
            async move { server.answer(req).await }
        });
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        server
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
        if auth.as_deref() != Some(self.authorization.as_str()) {
            return http::Response::builder()
                .status(StatusCode::UNAUTHORIZED)
                .header("WWW-Authenticate", "Basic realm=\"git\"")
                .body(Body::from("Unauthorized\n"))
                .unwrap();
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

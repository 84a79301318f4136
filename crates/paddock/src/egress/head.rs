//! The proxy request's head, read with a bound (a job may send anything):
//! at most [`MAX_HEAD_BYTES`] and [`MAX_HEADERS`] headers, parsed by
//! `httparse`; then its target: a `CONNECT host:port` authority or a plain
//! `http://` absolute URI.

use paddock_protocol::{EgressMethod, Host};
use tokio::io::{AsyncRead, AsyncReadExt};

/// The most bytes a request head may take, request line included.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// The most header lines a request head may have.
pub const MAX_HEADERS: usize = 64;

/// Why no request could be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    #[error("the request head is over {MAX_HEAD_BYTES} bytes or {MAX_HEADERS} headers")]
    TooLarge,
    #[error("the request is not HTTP: {0}")]
    Malformed(String),
    #[error("the connection closed before a whole request head")]
    Closed,
    #[error("reading the request: {0}")]
    Io(String),
}

/// A request head as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub method: String,
    pub target: String,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub version: u8,
    pub headers: Vec<(String, Vec<u8>)>,
}

impl Head {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }
}

/// Reads one request head from `stream` into `buf`; the head and where it
/// ends in `buf` (what follows is the request's body or the tunnel's first
/// bytes).
pub async fn read_head<R: AsyncRead + Unpin>(
    stream: &mut R,
    buf: &mut Vec<u8>,
) -> Result<(Head, usize), HeadError> {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(done) = parse(buf)? {
            return Ok(done);
        }
        if buf.len() >= MAX_HEAD_BYTES {
            return Err(HeadError::TooLarge);
        }
        let room = (MAX_HEAD_BYTES - buf.len()).min(chunk.len());
        let n = stream
            .read(&mut chunk[..room])
            .await
            .map_err(|e| HeadError::Io(e.to_string()))?;
        if n == 0 {
            return Err(HeadError::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn parse(buf: &[u8]) -> Result<Option<(Head, usize)>, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(buf) {
        Ok(httparse::Status::Partial) => Ok(None),
        Ok(httparse::Status::Complete(end)) => {
            let head = Head {
                method: req.method.unwrap_or_default().to_string(),
                target: req.path.unwrap_or_default().to_string(),
                version: req.version.unwrap_or(1),
                headers: req
                    .headers
                    .iter()
                    .map(|h| (h.name.to_string(), h.value.to_vec()))
                    .collect(),
            };
            Ok(Some((head, end)))
        }
        Err(httparse::Error::TooManyHeaders) => Err(HeadError::TooLarge),
        Err(e) => Err(HeadError::Malformed(e.to_string())),
    }
}

/// Where a request wants to go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub method: EgressMethod,
    pub host: Host,
    pub port: u16,
    /// For a plain HTTP request: the origin-form target (`/path?query`).
    pub path: String,
}

/// Why a request's target is refused before any lookup: (rule, reason).
pub type TargetError = (&'static str, String);

/// The target of `head`.
pub fn target(head: &Head) -> Result<Target, TargetError> {
    if head.method.eq_ignore_ascii_case("CONNECT") {
        let authority: http::uri::Authority = head
            .target
            .parse()
            .map_err(|_| bad(format!("`{}` is not a host:port", escape(&head.target))))?;
        if head.target.contains('@') {
            return Err(bad("a CONNECT authority has no user part".into()));
        }
        let port = authority
            .port_u16()
            .filter(|p| *p > 0)
            .ok_or_else(|| bad("CONNECT needs host:port".into()))?;
        let host = Host::parse(authority.host()).map_err(bad)?;
        return Ok(Target {
            method: EgressMethod::Connect,
            host,
            port,
            path: String::new(),
        });
    }
    let uri: http::Uri = head
        .target
        .parse()
        .map_err(|_| bad(format!("`{}` is not a URI", escape(&head.target))))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => {
            return Err(bad(
                "an https:// URL goes through CONNECT (set HTTPS_PROXY)".into(),
            ))
        }
        _ => {
            return Err(bad(format!(
                "`{}` is not an absolute http:// URL (this is a proxy)",
                escape(&head.target)
            )))
        }
    }
    let authority = uri
        .authority()
        .ok_or_else(|| bad("the URL has no host".into()))?;
    if authority.as_str().contains('@') {
        return Err(bad("a URL with a user part is not forwarded".into()));
    }
    let host = Host::parse(authority.host()).map_err(bad)?;
    let port = authority.port_u16().unwrap_or(80);
    if port == 0 {
        return Err(bad("port 0".into()));
    }
    let path = uri
        .path_and_query()
        .map_or_else(|| "/".to_string(), |p| p.as_str().to_string());
    Ok(Target {
        method: EgressMethod::Http,
        host,
        port,
        path,
    })
}

fn bad(reason: String) -> TargetError {
    ("bad_request", reason)
}

/// Hostile text made printable and short, for the record and the answer.
pub fn escape(text: &str) -> String {
    let escaped: String = text.escape_debug().collect();
    match escaped.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &escaped[..cut]),
        None => escaped,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    async fn read(bytes: &[u8]) -> Result<(Head, usize), HeadError> {
        let mut src = bytes;
        read_head(&mut src, &mut Vec::new()).await
    }

    #[tokio::test]
    async fn heads_are_bounded_and_garbage_is_named() {
        let ok = read(b"CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\nrest").await;
        assert_eq!(
            ok,
            Ok((
                Head {
                    method: "CONNECT".into(),
                    target: "a.example:443".into(),
                    version: 1,
                    headers: vec![("Host".into(), b"a.example:443".to_vec())],
                },
                55
            ))
        );
        let long = format!(
            "GET http://a.example/{} HTTP/1.1\r\n\r\n",
            "x".repeat(MAX_HEAD_BYTES)
        );
        assert_eq!(read(long.as_bytes()).await, Err(HeadError::TooLarge));
        let endless = vec![b'A'; MAX_HEAD_BYTES * 4];
        assert_eq!(read(&endless).await, Err(HeadError::TooLarge));
        let many: String = (0..=MAX_HEADERS).map(|i| format!("X-{i}: v\r\n")).collect();
        let many = format!("GET http://a.example/ HTTP/1.1\r\n{many}\r\n");
        assert_eq!(read(many.as_bytes()).await, Err(HeadError::TooLarge));
        assert_eq!(
            read(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03").await,
            Err(HeadError::Malformed("invalid token".into()))
        );
        assert_eq!(
            read(b"GET http://a.example/ HT").await,
            Err(HeadError::Closed)
        );
    }

    fn head(method: &str, target: &str) -> Head {
        Head {
            method: method.into(),
            target: target.into(),
            version: 1,
            headers: vec![],
        }
    }

    #[test]
    fn targets() {
        let name = |n: &str| Host::Name(n.into());
        assert_eq!(
            target(&head("CONNECT", "API.GitHub.com:443")),
            Ok(Target {
                method: EgressMethod::Connect,
                host: name("api.github.com"),
                port: 443,
                path: String::new()
            })
        );
        assert_eq!(
            target(&head("CONNECT", "[::1]:8443")).map(|t| t.host),
            Ok(Host::Address("::1".parse().unwrap()))
        );
        assert_eq!(
            target(&head("GET", "http://a.example:8080/x?y=1")),
            Ok(Target {
                method: EgressMethod::Http,
                host: name("a.example"),
                port: 8080,
                path: "/x?y=1".into()
            })
        );
        let refused = [
            ("CONNECT", "a.example"),
            ("CONNECT", "a.example:0"),
            ("CONNECT", "u@a.example:443"),
            ("CONNECT", "2130706433:443"),
            ("GET", "/relative"),
            ("GET", "https://a.example/"),
            ("GET", "http://u:p@a.example/"),
            ("GET", "ftp://a.example/"),
        ];
        for (m, t) in refused {
            assert_eq!(
                target(&head(m, t)).map_err(|e| e.0),
                Err("bad_request"),
                "{m} {t}"
            );
        }
    }
}

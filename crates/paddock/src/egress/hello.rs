//! The TLS ClientHello a tunnel starts with, read (bounded) before any
//! byte goes upstream, for its server name: a CONNECT tunnel carries TLS
//! only, its SNI must name the CONNECT authority's host, and a hello with
//! Encrypted Client Hello is refused (its real server name is hidden, so
//! it could reach any name the same front serves), whichever code point
//! carries it: the RFC's, or one of the drafts' that servers and clients
//! shipped before it (ESNI, the ECH drafts: [`hides_the_server_name`]).
//! The bytes read are kept, to be sent on unchanged.

use tokio::io::{AsyncRead, AsyncReadExt};

/// The most bytes of handshake a ClientHello may take.
pub const MAX_HELLO_BYTES: usize = 64 * 1024;

const RECORD_HANDSHAKE: u8 = 22;
const HANDSHAKE_CLIENT_HELLO: u8 = 1;
const EXT_SERVER_NAME: u16 = 0;
const EXT_ENCRYPTED_CLIENT_HELLO: u16 = 0xfe0d;

/// Whether an extension of type `kind` carries an encrypted server name
/// (or a part of an encrypted ClientHello): Encrypted Client Hello as
/// published (`0xfe0d`) and the code points its drafts used before
/// (`0xfe08`-`0xfe0c`, drafts 8 to 12; `0xff02`-`0xff0c`, draft 7 and
/// what implementations of the next drafts sent), its
/// `ech_outer_extensions` (`0xfd00`, which only an inner hello may hold)
/// and the older Encrypted SNI (`encrypted_server_name`, `0xffce`,
/// Cloudflare's and Firefox's in 2018-2020). A front that still reads any
/// of them routes by a name the proxy cannot see, whatever the plain
/// server name says. `0xff01` (`renegotiation_info`) is not among them.
fn hides_the_server_name(kind: u16) -> bool {
    matches!(
        kind,
        EXT_ENCRYPTED_CLIENT_HELLO | 0xfe08..=0xfe0c | 0xff02..=0xff0c | 0xfd00 | 0xffce
    )
}

/// Why the tunnel's first bytes are not an acceptable ClientHello.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HelloError {
    #[error("the tunnel does not start with a TLS handshake")]
    NotTls,
    #[error("the ClientHello is malformed: {0}")]
    Malformed(&'static str),
    #[error("the ClientHello is over {MAX_HELLO_BYTES} bytes")]
    TooLarge,
    #[error("the ClientHello uses Encrypted Client Hello, which hides the server name")]
    Encrypted,
    /// An extension of an ECH draft or the older Encrypted SNI (its type).
    #[error(
        "the ClientHello has extension {0:#06x}, an encrypted server name (Encrypted SNI or an Encrypted Client Hello draft), which hides the server name"
    )]
    EncryptedDraft(u16),
    #[error("the connection closed inside the ClientHello")]
    Closed,
    #[error("reading the ClientHello: {0}")]
    Io(String),
}

/// Reads TLS records from `stream` (after what `buf` already holds) until
/// the whole ClientHello is in `buf`; its server name, `None` without one.
pub async fn read_client_hello<R: AsyncRead + Unpin>(
    stream: &mut R,
    buf: &mut Vec<u8>,
) -> Result<Option<String>, HelloError> {
    let mut handshake = Vec::new();
    let mut at = 0usize;
    loop {
        fill(stream, buf, at + 5).await?;
        let header = &buf[at..at + 5];
        if header[0] != RECORD_HANDSHAKE || header[1] != 3 {
            return Err(HelloError::NotTls);
        }
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        if len == 0 || len > 16 * 1024 + 256 {
            return Err(HelloError::Malformed("record length"));
        }
        fill(stream, buf, at + 5 + len).await?;
        handshake.extend_from_slice(&buf[at + 5..at + 5 + len]);
        at += 5 + len;
        if handshake.len() >= 4 {
            if handshake[0] != HANDSHAKE_CLIENT_HELLO {
                return Err(HelloError::NotTls);
            }
            let body = (usize::from(handshake[1]) << 16)
                | (usize::from(handshake[2]) << 8)
                | usize::from(handshake[3]);
            if body + 4 > MAX_HELLO_BYTES {
                return Err(HelloError::TooLarge);
            }
            if handshake.len() >= body + 4 {
                return server_name(&handshake[4..body + 4]);
            }
        }
        if at > MAX_HELLO_BYTES {
            return Err(HelloError::TooLarge);
        }
    }
}

async fn fill<R: AsyncRead + Unpin>(
    stream: &mut R,
    buf: &mut Vec<u8>,
    want: usize,
) -> Result<(), HelloError> {
    let mut chunk = [0u8; 4096];
    while buf.len() < want {
        let room = (want - buf.len()).min(chunk.len());
        let n = stream
            .read(&mut chunk[..room])
            .await
            .map_err(|e| HelloError::Io(e.to_string()))?;
        if n == 0 {
            return Err(HelloError::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(())
}

/// A cursor over a ClientHello body.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], HelloError> {
        if self.0.len() < n {
            return Err(HelloError::Malformed(what));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self, what: &'static str) -> Result<usize, HelloError> {
        Ok(usize::from(self.take(1, what)?[0]))
    }

    fn u16(&mut self, what: &'static str) -> Result<usize, HelloError> {
        let b = self.take(2, what)?;
        Ok(usize::from(u16::from_be_bytes([b[0], b[1]])))
    }

    fn vec8(&mut self, what: &'static str) -> Result<&'a [u8], HelloError> {
        let n = self.u8(what)?;
        self.take(n, what)
    }

    fn vec16(&mut self, what: &'static str) -> Result<&'a [u8], HelloError> {
        let n = self.u16(what)?;
        self.take(n, what)
    }
}

/// The server name of a ClientHello body (after the handshake header).
fn server_name(body: &[u8]) -> Result<Option<String>, HelloError> {
    let mut r = Reader(body);
    r.take(2 + 32, "version and random")?;
    r.vec8("session id")?;
    r.vec16("cipher suites")?;
    r.vec8("compression methods")?;
    if r.0.is_empty() {
        return Ok(None);
    }
    let mut exts = Reader(r.vec16("extensions")?);
    let mut name = None;
    let mut seen = Vec::new();
    while !exts.0.is_empty() {
        let kind = exts.u16("extension type")?;
        let data = exts.vec16("extension")?;
        let kind = u16::try_from(kind).map_err(|_| HelloError::Malformed("extension type"))?;
        if seen.contains(&kind) {
            return Err(HelloError::Malformed("an extension given twice"));
        }
        seen.push(kind);
        match kind {
            EXT_ENCRYPTED_CLIENT_HELLO => return Err(HelloError::Encrypted),
            other if hides_the_server_name(other) => return Err(HelloError::EncryptedDraft(other)),
            EXT_SERVER_NAME => name = Some(sni(data)?),
            _ => {}
        }
    }
    Ok(name)
}

fn sni(data: &[u8]) -> Result<String, HelloError> {
    let mut outer = Reader(data);
    let mut list = Reader(outer.vec16("server name list")?);
    let mut name = None;
    while !list.0.is_empty() {
        let kind = list.u8("server name type")?;
        let value = list.vec16("server name")?;
        if kind == 0 {
            if name.is_some() {
                return Err(HelloError::Malformed("two host names"));
            }
            let text = std::str::from_utf8(value)
                .map_err(|_| HelloError::Malformed("server name is not text"))?;
            name = Some(text.to_ascii_lowercase());
        }
    }
    name.ok_or(HelloError::Malformed(
        "server name extension without a host name",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use paddock_test_support::tls::client_hello;

    async fn read(bytes: &[u8]) -> (Result<Option<String>, HelloError>, usize) {
        let mut src = bytes;
        let mut buf = Vec::new();
        let got = read_client_hello(&mut src, &mut buf).await;
        (got, buf.len())
    }

    #[tokio::test]
    async fn the_server_name_is_read_whole_and_bounded() {
        let hello = client_hello(Some("Pypi.org"), &[(10, vec![0, 2, 0, 29])], 16 * 1024);
        let mut with_data = hello.clone();
        with_data.extend_from_slice(b"\x17\x03\x03\x00\x01x");
        assert_eq!(
            read(&with_data).await,
            (Ok(Some("pypi.org".into())), hello.len())
        );
        // A hello split over records of 40 bytes.
        let split = client_hello(Some("pypi.org"), &[], 40);
        assert_eq!(
            read(&split).await,
            (Ok(Some("pypi.org".into())), split.len())
        );
        assert_eq!(read(&client_hello(None, &[], 16384)).await.0, Ok(None));
        assert_eq!(
            read(&client_hello(
                Some("pypi.org"),
                &[(0xfe0d, vec![0; 8])],
                16384
            ))
            .await
            .0,
            Err(HelloError::Encrypted)
        );
        // The older Encrypted SNI and an ECH draft's code point too.
        for kind in [0xffce, 0xfe0a] {
            assert_eq!(
                read(&client_hello(
                    Some("pypi.org"),
                    &[(kind, vec![0; 8])],
                    16384
                ))
                .await
                .0,
                Err(HelloError::EncryptedDraft(kind))
            );
        }
        assert_eq!(
            read(b"SSH-2.0-OpenSSH_9.6\r\n").await.0,
            Err(HelloError::NotTls)
        );
        assert_eq!(
            read(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").await.0,
            Err(HelloError::NotTls)
        );
        let huge = client_hello(
            Some("a.example"),
            &[(21, vec![0; 40_000]), (22, vec![0; 40_000])],
            16384,
        );
        assert_eq!(read(&huge).await.0, Err(HelloError::TooLarge));
        let cut = &client_hello(Some("a.example"), &[], 16384)[..30];
        assert_eq!(read(cut).await.0, Err(HelloError::Closed));
        let mut garbage = client_hello(Some("a.example"), &[], 16384);
        let last = garbage.len() - 1;
        garbage[last - 10] = 0xff; // the server name's length
        assert!(matches!(
            read(&garbage).await.0,
            Err(HelloError::Malformed(_))
        ));
    }
}

//! The response side of a terminated tunnel (docs/egress.md, "Credentials
//! for allowed hosts"): the host's responses are read one by one, by
//! their framing (a bounded head parsed by `httparse`; a body by
//! `content-length`, chunked coding, or the connection's end; none after
//! a `HEAD` request or for `1xx`, `204` and `304`), and each message is
//! scanned for the credential's value ([`super::scan`]) on its own: what
//! could start a value is held back until the message's next bytes
//! decide it, and whatever is held is passed on when the message ends,
//! so no timer decides what the scan sees, and a client waiting for the
//! end of a response never waits on the scan. A chunked body is scanned
//! as its decoded bytes and passed on in chunks of the proxy's own
//! making, so a value the host split across two chunks is found too.
//! Refused, with a readable `502` in place of the response, and the
//! tunnel then ends: a response with a `content-encoding` other than
//! `identity` (it was asked for `identity`; compressed bytes hide the
//! value from the scan), and a `101 Switching Protocols` (what follows
//! is no longer HTTP/1.1 the proxy can read).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use super::framing::{self, LineError};
use super::refusal::Refusal;
use super::scan::Scan;

/// The most bytes a response head may take, status line included.
pub const MAX_RESPONSE_HEAD: usize = 64 * 1024;
/// The most header lines a response head may have.
pub const MAX_RESPONSE_HEADERS: usize = 128;

/// The methods of the requests sent upstream, oldest first: the request
/// side pushes one before sending a request, the response side takes one
/// for each final response (a `HEAD` has no body).
#[derive(Debug, Default)]
pub struct Pending(Mutex<VecDeque<bool>>);

impl Pending {
    /// A request was sent; `head`: it was a `HEAD`.
    pub fn sent(&self, head: bool) {
        if let Ok(mut q) = self.0.lock() {
            q.push_back(head);
        }
    }

    /// Whether every request sent was answered.
    pub fn is_empty(&self) -> bool {
        self.0.lock().map(|q| q.is_empty()).unwrap_or(true)
    }

    /// Whether the oldest request answered was a `HEAD`.
    fn answered(&self) -> bool {
        self.0
            .lock()
            .ok()
            .and_then(|mut q| q.pop_front())
            .unwrap_or(false)
    }
}

/// Why the responses stopped before the host was done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// A response the proxy does not relay (the job got a readable `502`):
    /// the refusal's rule and reason.
    Refused(Refusal),
    /// A response that could not be read or written.
    Broken(String),
}

/// How the responses ended when nothing went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The host closed the connection.
    Closed,
    /// The job was done sending and every request was answered: the
    /// connection is between messages (it may be kept when `reusable`
    /// still holds).
    Idle,
}

/// A response head as read.
struct ResponseHead {
    status: u16,
    /// `1` for HTTP/1.1, `0` for HTTP/1.0.
    version: u8,
    headers: Vec<(String, Vec<u8>)>,
    /// The head's bytes as the host sent them.
    raw: Vec<u8>,
}

impl ResponseHead {
    fn all(&self, name: &str) -> Vec<&[u8]> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
            .collect()
    }
}

/// How a response's body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    None,
    Length(u64),
    Chunked,
    /// Until the host closes the connection.
    Close,
}

/// What the response side needs besides its two streams.
pub struct Scanning<'a> {
    pub needles: &'a [crate::secret::Secret],
    pub mask: &'a (dyn Fn(usize) -> Vec<u8> + Sync),
    /// The readable answer a refused response is replaced by.
    pub answer: &'a (dyn Fn(&Refusal) -> Option<Vec<u8>> + Sync),
    pub pending: &'a Pending,
    /// Bytes passed on to the job.
    pub down: &'a AtomicU64,
    /// Cancelled when the job is done sending (its side ended between
    /// requests): the responses end once every request is answered.
    pub job_done: &'a tokio_util::sync::CancellationToken,
    /// Cleared when a response says the connection is not kept
    /// (`connection: close`, HTTP/1.0, a body ending with the connection).
    pub reusable: &'a AtomicBool,
}

/// The host's responses to the job, message by message, scanned, until
/// the host is done (`Closed`), the job is done and every request was
/// answered (`Idle`), or a response is refused or broken. `buf`: what
/// was already read from the host.
pub async fn responses<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    host: &mut R,
    job: &mut W,
    s: &Scanning<'_>,
    mut buf: Vec<u8>,
) -> Result<Ended, Stop> {
    loop {
        let head = loop {
            if s.job_done.is_cancelled() {
                if s.pending.is_empty() && buf.is_empty() {
                    return Ok(Ended::Idle);
                }
                break read_head(host, &mut buf).await?;
            }
            // Reading is cancel-safe: what was read stays in `buf`.
            let read = tokio::select! {
                head = read_head(host, &mut buf) => Some(head),
                () = s.job_done.cancelled() => None,
            };
            if let Some(head) = read {
                break head?;
            }
        };
        let Some(head) = head else {
            return Ok(Ended::Closed);
        };
        if let Some(refusal) = refused(&head) {
            if let Some(answer) = (s.answer)(&refusal) {
                let _ = job.write_all(&answer).await;
            }
            return Err(Stop::Refused(refusal));
        }
        let informational = (100..200).contains(&head.status);
        let head_request = !informational && s.pending.answered();
        let body = framing(&head, head_request).map_err(Stop::Broken)?;
        if !informational && !keeps_alive(&head) {
            s.reusable.store(false, Ordering::Relaxed);
        }
        let mut scan = Scan::new(s.needles, s.mask);
        let mut out = scan.push(&head.raw);
        out.extend(scan.flush());
        send(job, &out, s.down).await?;
        match body {
            Body::None => {}
            Body::Length(len) => length(host, job, &mut buf, len, &mut scan, s.down).await?,
            Body::Chunked => chunked(host, job, &mut buf, &mut scan, s.down).await?,
            Body::Close => {
                loop {
                    let out = scan.push(&buf);
                    buf.clear();
                    send(job, &out, s.down).await?;
                    if !more(host, &mut buf).await? {
                        break;
                    }
                }
                let out = scan.flush();
                send(job, &out, s.down).await?;
                s.reusable.store(false, Ordering::Relaxed);
                return Ok(Ended::Closed);
            }
        }
    }
}

/// Whether the host means to keep the connection after this response:
/// HTTP/1.1 without a `close` in its `connection` header.
fn keeps_alive(head: &ResponseHead) -> bool {
    head.version == 1
        && !head.all("connection").iter().any(|v| {
            v.split(|b| *b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"))
        })
}

/// Why a response is not relayed: a coding other than `identity`, or a
/// switch of protocols.
fn refused(head: &ResponseHead) -> Option<Refusal> {
    if head.status == 101 {
        return Some(Refusal::new(
            502,
            "upgrade",
            "the credential host switched protocols (101, an upgrade such as WebSocket): only HTTP/1.1 requests and responses are relayed on a tunnel to a credential host",
        ));
    }
    let coded: Vec<String> = head
        .all("content-encoding")
        .iter()
        .flat_map(|v| v.split(|b| *b == b','))
        .map(|c| String::from_utf8_lossy(c.trim_ascii()).to_ascii_lowercase())
        .filter(|c| !c.is_empty() && c != "identity")
        .collect();
    if !coded.is_empty() {
        return Some(Refusal::new(
            502,
            "content_encoding",
            format!(
                "the credential host answered with content-encoding `{}` though asked for `identity`: a coded answer could hide the credential from the proxy's scan, so it is not relayed",
                coded.join(", ")
            ),
        ));
    }
    None
}

/// The body's framing (RFC 9112, 6.3).
fn framing(head: &ResponseHead, head_request: bool) -> Result<Body, String> {
    if head_request || head.status < 200 || head.status == 204 || head.status == 304 {
        return Ok(Body::None);
    }
    let te = head.all("transfer-encoding");
    if let Some(last) = te.last() {
        let last_coding = last.rsplit(|b| *b == b',').next().unwrap_or_default();
        return if last_coding.trim_ascii().eq_ignore_ascii_case(b"chunked") {
            if te.len() == 1 && last.trim_ascii().eq_ignore_ascii_case(b"chunked") {
                Ok(Body::Chunked)
            } else {
                Err("a response with a transfer coding besides chunked".into())
            }
        } else {
            Ok(Body::Close)
        };
    }
    match head.all("content-length").as_slice() {
        [] => Ok(Body::Close),
        [first, rest @ ..] if rest.iter().all(|v| v == first) => framing::content_length(first)
            .map(Body::Length)
            .ok_or_else(|| "a response's content-length is not a number".to_string()),
        _ => Err("a response with two different content-lengths".into()),
    }
}

/// Reads one response head into `buf` (what follows stays in `buf`);
/// `None` when the host closed between responses.
async fn read_head<R: AsyncRead + Unpin>(
    host: &mut R,
    buf: &mut Vec<u8>,
) -> Result<Option<ResponseHead>, Stop> {
    let broken = |why: String| Err(Stop::Broken(why));
    loop {
        let mut headers = [httparse::EMPTY_HEADER; MAX_RESPONSE_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        match resp.parse(buf) {
            Ok(httparse::Status::Complete(end)) => {
                let head = ResponseHead {
                    status: resp.code.unwrap_or(0),
                    version: resp.version.unwrap_or(0),
                    headers: resp
                        .headers
                        .iter()
                        .map(|h| (h.name.to_string(), h.value.to_vec()))
                        .collect(),
                    raw: buf[..end].to_vec(),
                };
                buf.drain(..end);
                return Ok(Some(head));
            }
            Ok(httparse::Status::Partial) => {}
            Err(e) => return broken(format!("a response from the credential host: {e}")),
        }
        if buf.len() >= MAX_RESPONSE_HEAD {
            return broken(format!(
                "a response head from the credential host is over {MAX_RESPONSE_HEAD} bytes or {MAX_RESPONSE_HEADERS} headers"
            ));
        }
        if !more(host, buf).await? {
            return if buf.is_empty() {
                Ok(None)
            } else {
                broken("the credential host closed in the middle of a response head".into())
            };
        }
    }
}

/// Reads more from the host into `buf`; false at its end.
async fn more<R: AsyncRead + Unpin>(host: &mut R, buf: &mut Vec<u8>) -> Result<bool, Stop> {
    framing::more(host, buf)
        .await
        .map_err(|e| Stop::Broken(format!("reading the credential host's response: {e}")))
}

async fn send<W: AsyncWrite + Unpin>(
    job: &mut W,
    bytes: &[u8],
    down: &AtomicU64,
) -> Result<(), Stop> {
    if bytes.is_empty() {
        return Ok(());
    }
    job.write_all(bytes)
        .await
        .map_err(|e| Stop::Broken(format!("writing to the job: {e}")))?;
    down.fetch_add(bytes.len() as u64, Ordering::Relaxed);
    Ok(())
}

/// Passes on a body of `len` bytes (what `buf` holds first), scanned.
async fn length<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    host: &mut R,
    job: &mut W,
    buf: &mut Vec<u8>,
    len: u64,
    scan: &mut Scan,
    down: &AtomicU64,
) -> Result<(), Stop> {
    let mut left = len;
    while left > 0 {
        if buf.is_empty() && !more(host, buf).await? {
            return Err(Stop::Broken(
                "the credential host's response body ended early".into(),
            ));
        }
        let take = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
        let out = scan.push(&buf[..take]);
        buf.drain(..take);
        left -= take as u64;
        send(job, &out, down).await?;
    }
    let out = scan.flush();
    send(job, &out, down).await
}

/// One CRLF-terminated line (without it), bounded.
async fn line<R: AsyncRead + Unpin>(host: &mut R, buf: &mut Vec<u8>) -> Result<Vec<u8>, Stop> {
    framing::line(host, buf).await.map_err(|e| {
        Stop::Broken(match e {
            LineError::TooLong => "a chunked response's line is too long".into(),
            LineError::Ended => "the credential host's chunked response ended early".into(),
            LineError::Read(e) => format!("reading the credential host's response: {e}"),
        })
    })
}

/// Writes `data` as one chunk of the proxy's own (nothing when empty).
async fn chunk_out<W: AsyncWrite + Unpin>(
    job: &mut W,
    data: &[u8],
    down: &AtomicU64,
) -> Result<(), Stop> {
    if data.is_empty() {
        return Ok(());
    }
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    send(job, &out, down).await
}

/// Passes on a chunked body: its decoded bytes scanned as one stream and
/// sent as chunks of the proxy's own, then the last chunk and the
/// trailer (scanned as the head is).
async fn chunked<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    host: &mut R,
    job: &mut W,
    buf: &mut Vec<u8>,
    scan: &mut Scan,
    down: &AtomicU64,
) -> Result<(), Stop> {
    loop {
        let size_line = line(host, buf).await?;
        let size = framing::chunk_size(&size_line)
            .ok_or_else(|| Stop::Broken("a response's chunk size is not hexadecimal".into()))?;
        if size == 0 {
            let held = scan.flush();
            chunk_out(job, &held, down).await?;
            let mut trailer = b"0\r\n".to_vec();
            loop {
                let l = line(host, buf).await?;
                trailer.extend_from_slice(&l);
                trailer.extend_from_slice(b"\r\n");
                if l.is_empty() {
                    break;
                }
                if trailer.len() > MAX_RESPONSE_HEAD {
                    return Err(Stop::Broken(
                        "a chunked response's trailer is too long".into(),
                    ));
                }
            }
            let mut out = scan.push(&trailer);
            out.extend(scan.flush());
            return send(job, &out, down).await;
        }
        let mut left = size;
        while left > 0 {
            if buf.is_empty() && !more(host, buf).await? {
                return Err(Stop::Broken(
                    "the credential host's chunked response ended early".into(),
                ));
            }
            let take = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
            let out = scan.push(&buf[..take]);
            buf.drain(..take);
            left -= take as u64;
            chunk_out(job, &out, down).await?;
        }
        if line(host, buf).await? != b"" {
            return Err(Stop::Broken(
                "a response's chunk is longer than its size".into(),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::secret::Secret;
    use std::time::Duration;

    const VALUE: &str = "real-token-0123456789";

    /// Runs the host's `parts` (one write each, `pause` apart) through the
    /// response side after `requests` (true: a HEAD); what the job got and
    /// how it ended.
    async fn through(
        parts: &[&[u8]],
        requests: &[bool],
        pause: Duration,
    ) -> (String, Result<(), Stop>) {
        let (mut w, mut r) = tokio::io::duplex(1 << 16);
        let parts: Vec<Vec<u8>> = parts.iter().map(|p| p.to_vec()).collect();
        tokio::spawn(async move {
            for p in parts {
                w.write_all(&p).await.unwrap();
                tokio::time::sleep(pause).await;
            }
        });
        let needles = [Secret::new(VALUE.into())];
        let mask = |len: usize| vec![b'#'; len];
        let answer = |r: &Refusal| Some(format!("refused: {}\n", r.rule).into_bytes());
        let pending = Pending::default();
        for h in requests {
            pending.sent(*h);
        }
        let down = AtomicU64::new(0);
        let mut job = Vec::new();
        let (job_done, reusable) = (Default::default(), AtomicBool::new(true));
        let end = responses(
            &mut r,
            &mut job,
            &Scanning {
                needles: &needles,
                mask: &mask,
                answer: &answer,
                pending: &pending,
                down: &down,
                job_done: &job_done,
                reusable: &reusable,
            },
            Vec::new(),
        )
        .await
        .map(|_| ());
        // Everything the job got was the host's, but a refusal's answer.
        if end.is_ok() {
            assert_eq!(down.load(Ordering::Relaxed), job.len() as u64);
        }
        (String::from_utf8(job).unwrap(), end)
    }

    /// A value the host pauses in the middle of (longer than any timer
    /// the scan once had) is masked whole, in a content-length body, in a
    /// chunked body split across chunks (re-chunked), and in a body that
    /// ends with the connection; the response after a HEAD has no body.
    #[tokio::test]
    async fn a_value_split_by_a_pause_is_masked_whatever_the_timing() {
        let mask = "#".repeat(VALUE.len());
        let (a, b) = VALUE.split_at(7);
        let body = format!("echo {a}{b}!");
        let length_head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
        let (job, end) = through(
            &[
                length_head.as_bytes(),
                format!("echo {a}").as_bytes(),
                format!("{b}!").as_bytes(),
                b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n",
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
                format!("{:x}\r\necho {a}\r\n", 5 + a.len()).as_bytes(),
                format!(
                    "{:x};ext=1\r\n{b}!\r\n0\r\nx-t: {VALUE}\r\n\r\n",
                    b.len() + 1
                )
                .as_bytes(),
                b"HTTP/1.0 200 OK\r\n\r\nlast ",
                a.as_bytes(),
                b.as_bytes(),
            ],
            &[false, true, false, false],
            Duration::from_millis(120),
        )
        .await;
        assert_eq!(
            (job, end),
            (
                format!(
                    "{length_head}echo {mask}!\
                     HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n\
                     HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n\
                     5\r\necho \r\n{:x}\r\n{mask}!\r\n0\r\nx-t: {mask}\r\n\r\n\
                     HTTP/1.0 200 OK\r\n\r\nlast {mask}",
                    VALUE.len() + 1
                ),
                Ok(())
            )
        );
    }

    /// A coded response and an upgrade are replaced by the readable answer
    /// and end the tunnel; `identity` is not a coding; a 100 Continue
    /// passes before its final response.
    #[tokio::test]
    async fn a_coded_response_and_an_upgrade_are_refused_readably() {
        let (job, end) = through(
            &[b"HTTP/1.1 200 OK\r\ncontent-encoding: identity\r\ncontent-length: 2\r\n\r\nok\
                HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-encoding: br, gzip\r\ncontent-length: 3\r\n\r\nxyz"],
            &[false, false],
            Duration::ZERO,
        )
        .await;
        let Err(Stop::Refused(r)) = &end else {
            panic!("{end:?}")
        };
        assert_eq!(
            (job.as_str(), r.rule.as_str(), r.reason.as_str()),
            (
                "HTTP/1.1 200 OK\r\ncontent-encoding: identity\r\ncontent-length: 2\r\n\r\nok\
                 HTTP/1.1 100 Continue\r\n\r\nrefused: content_encoding\n",
                "content_encoding",
                "the credential host answered with content-encoding `br, gzip` though asked for `identity`: a coded answer could hide the credential from the proxy's scan, so it is not relayed",
            )
        );
        let (job, end) = through(
            &[b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n\x81\x05hello"],
            &[false],
            Duration::ZERO,
        )
        .await;
        assert_eq!(
            (
                job.as_str(),
                matches!(end, Err(Stop::Refused(ref r)) if r.rule == "upgrade")
            ),
            ("refused: upgrade\n", true)
        );
    }
}

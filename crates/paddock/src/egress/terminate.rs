//! A tunnel to a credential host, terminated (docs/egress.md,
//! "Credentials for allowed hosts"): after every check of an ordinary
//! tunnel (the list, the deny list, the ClientHello's server name), the
//! proxy finishes the job's TLS handshake itself with a leaf of the job's
//! CA (ALPN `http/1.1` only: anything else fails the handshake) and opens
//! its own TLS connection to the checked address, verifying the host's
//! certificate for the same name against the trust roots. Requests are
//! then read one by one (bounded heads, bodies passed on by their
//! `content-length` or chunked framing): in the credential's header only,
//! a value that is exactly the job's placeholder form becomes the real
//! value; `accept-encoding` becomes `identity` so the response scan sees
//! plain bytes; nothing else is touched. Responses are read by their
//! framing and scanned for the real value before the job reads them
//! ([`super::response`]).

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};

use paddock_protocol::{EgressPhase, EgressRecord};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;

use super::credential::Credential;
use super::framing::{self, LineError};
use super::head::{self, read_head, Head, HeadError};
use super::pool::Kept;
use super::quickack::QuickAck;
use super::refusal::Refusal;
use super::response::{Ended, Pending, Scanning, Stop};
use super::server::{ProxyLimits, Shared};

/// The job's side of the tunnel with the bytes the proxy already read
/// from it (the ClientHello) given back first.
pub struct Replay<S> {
    prefix: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S> Replay<S> {
    pub fn new(prefix: Vec<u8>, inner: S) -> Replay<S> {
        Replay {
            prefix,
            at: 0,
            inner,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Replay<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.at < self.prefix.len() {
            let n = (self.prefix.len() - self.at).min(buf.remaining());
            let at = self.at;
            buf.put_slice(&self.prefix[at..at + n]);
            self.at += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Replay<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The host side of a terminated tunnel as it starts.
pub enum Upstream {
    /// A TCP connection made for this tunnel (to `record.address`): its
    /// TLS handshake runs while the job's does.
    Fresh(TcpStream),
    /// None yet: the job's pool kept a connection to the host when the
    /// tunnel was checked. The first request decides: one safe to repeat
    /// (`GET`, `HEAD`, `OPTIONS` without a body) takes the kept
    /// connection, and is repeated on a new one if the host had closed it;
    /// any other gets a new connection to one of these checked addresses.
    Kept(Vec<SocketAddr>),
}

/// Terminates the job's tunnel (`hello`: what was read of it) to the
/// credential's host and relays requests and responses over `upstream`
/// until both ends are done or the phase changes. A handshake that fails
/// on either side is a refusal; one upstream gets the job a readable
/// `502` inside its TLS. A connection that ends between messages, every
/// request answered and neither side asking to close, is kept in the
/// job's pool for its next tunnel to the host in this phase.
pub(crate) async fn terminate<S: AsyncRead + AsyncWrite + Unpin>(
    client: S,
    hello: Vec<u8>,
    upstream: Upstream,
    cred: &Credential,
    shared: &Shared,
    phase_rx: &mut watch::Receiver<EgressPhase>,
    record: &mut EgressRecord,
) -> Result<(), Refusal> {
    let limits = &shared.limits;
    record.credential = Some(cred.name.clone());
    record.substituted = Some(0);
    let acceptor = tokio_rustls::TlsAcceptor::from(cred.server.clone());
    let accept = timeout(limits.hello, acceptor.accept(Replay::new(hello, client)));
    let (accepted, fresh, checked) = match upstream {
        Upstream::Fresh(tcp) => {
            let (job, host) = tokio::join!(accept, handshake(cred, tcp, limits));
            (job, Some(host), Vec::new())
        }
        Upstream::Kept(checked) => (accept.await, None, checked),
    };
    let mut job = match accepted {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            return Err(Refusal::silent(
                "tls_handshake",
                format!("the job's TLS handshake with the proxy failed: {e}"),
            ))
        }
        Err(_) => {
            return Err(Refusal::silent(
                "tls_handshake",
                format!("no TLS handshake within {:?}", limits.hello),
            ))
        }
    };
    let up = AtomicU64::new(0);
    let substituted = AtomicU64::new(0);
    let pending = Pending::default();
    let others = Others::default();
    let phase = record.phase;
    let destination = format!("{}:{}", cred.host, cred.port);
    // The first request, when the kept connection is to be chosen by it.
    let mut job_buf = Vec::new();
    let mut host_buf = Vec::new();
    let reusable = AtomicBool::new(true);
    let chosen = match fresh {
        Some(host) => host,
        None => {
            let choose = choose(
                &mut job,
                &mut job_buf,
                &mut host_buf,
                cred,
                shared,
                &checked,
                record,
                (&up, &substituted, &pending, &others),
                &reusable,
            );
            tokio::select! {
                biased;
                _ = phase_rx.changed() => {
                    record.allowed = true;
                    cut(record);
                    return Ok(());
                }
                chosen = choose => match chosen {
                    Some(chosen) => chosen,
                    // The job left before its first request.
                    None => {
                        record.allowed = true;
                        return Ok(());
                    }
                },
            }
        }
    };
    let (host, address) = match chosen {
        Ok(host) => host,
        Err(refusal) => {
            // The job's request first (unless read already), then the
            // answer it can read.
            if job_buf.is_empty() {
                let _ = timeout(limits.head, read_head(&mut job, &mut job_buf)).await;
            }
            if let Some(answer) = refusal.answer(&destination, phase, &shared.in_force) {
                let _ = timeout(limits.head, job.write_all(&answer)).await;
            }
            let _ = job.shutdown().await;
            record.bytes_up = up.load(Ordering::Relaxed);
            record.substituted = Some(substituted.load(Ordering::Relaxed));
            return Err(Refusal {
                status: None,
                ..refusal
            });
        }
    };
    record.address = Some(address.to_string());
    record.allowed = true;
    let down = AtomicU64::new(0);
    let mask = |len: usize| cred.mask(len);
    let answer = |r: &Refusal| r.answer(&destination, phase, &shared.in_force);
    let job_done = CancellationToken::new();
    let scanning = Scanning {
        needles: cred.needles(),
        mask: &mask,
        answer: &answer,
        pending: &pending,
        down: &down,
        job_done: &job_done,
        reusable: &reusable,
    };
    let (mut job_r, mut job_w) = tokio::io::split(job);
    let (mut host_r, mut host_w) = tokio::io::split(host);
    let (cut_off, ended) = {
        let requests = async {
            let end = requests(
                &mut job_r,
                &mut host_w,
                cred,
                (&up, &substituted, &pending, &others),
                job_buf,
                &reusable,
            )
            .await;
            if end.is_err() {
                reusable.store(false, Ordering::Relaxed);
                let _ = host_w.shutdown().await;
            }
            job_done.cancel();
            end
        };
        let responses = async {
            let end =
                super::response::responses(&mut host_r, &mut job_w, &scanning, host_buf).await;
            let _ = job_w.shutdown().await;
            end
        };
        // The phase first: a tunnel whose phase ended during its
        // handshakes sends no request of the next phase to the host.
        tokio::select! {
            biased;
            _ = phase_rx.changed() => (true, None),
            (req, resp) = both(requests, responses) => (false, Some((req, resp))),
        }
    };
    let mut keep = false;
    if let Some((req, resp)) = ended {
        match (req, resp) {
            (_, Some(Err(Stop::Refused(r)))) => {
                record.rule = Some(r.rule);
                record.reason = Some(r.reason);
            }
            (Some(Err(why)), _) | (_, Some(Err(Stop::Broken(why)))) => {
                record.reason = Some(why);
            }
            (Some(Ok(())), Some(Ok(Ended::Idle))) => keep = reusable.load(Ordering::Relaxed),
            _ => {}
        }
    }
    record.bytes_up = up.load(Ordering::Relaxed);
    record.bytes_down = down.load(Ordering::Relaxed);
    record.substituted = Some(substituted.load(Ordering::Relaxed));
    let carried = others.names();
    if !carried.is_empty() && record.reason.is_none() {
        record.reason = Some(format!(
            "the tunnel's requests carried the placeholder of credential `{}`, which belongs to another host, sent as it is (not substituted)",
            carried.join("`, `")
        ));
    }
    if cut_off {
        cut(record);
        return Ok(());
    }
    let mut host = host_r.unsplit(host_w);
    if keep {
        let current = *phase_rx.borrow();
        shared
            .pool
            .put(&cred.name, phase, current, Kept { tls: host, address });
    } else {
        let _ = timeout(limits.head, host.shutdown()).await;
    }
    Ok(())
}

/// The record of a connection the phase switch closed.
fn cut(record: &mut EgressRecord) {
    record.rule = Some("phase_switch".into());
    record.reason = Some(format!(
        "opened in the {} phase, closed when it ended",
        record.phase.as_str()
    ));
}

/// What a tunnel counts: bytes sent up, values substituted, requests
/// awaiting their answer, and the job's other credentials whose
/// placeholder a request carried (their names).
type Counters<'a> = (&'a AtomicU64, &'a AtomicU64, &'a Pending, &'a Others);

/// The names of the job's other credentials whose placeholder went to
/// this host (as sent, never substituted).
#[derive(Debug, Default)]
pub(super) struct Others(std::sync::Mutex<Vec<String>>);

impl Others {
    fn add(&self, names: Vec<&str>) {
        if let Ok(mut seen) = self.0.lock() {
            for n in names {
                if !seen.iter().any(|s| s == n) {
                    seen.push(n.to_string());
                }
            }
        }
    }

    fn names(&self) -> Vec<String> {
        self.0.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

/// The other credentials' placeholders in `head`'s header values.
fn others_in<'c>(head: &Head, cred: &'c Credential) -> Vec<&'c str> {
    let mut out: Vec<&str> = Vec::new();
    for (_, v) in &head.headers {
        for n in cred.others_in(v) {
            if !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out
}

/// The job's TLS stream toward the proxy.
type JobTls<S> = tokio_rustls::server::TlsStream<Replay<S>>;
/// The proxy's TLS stream toward the host.
type HostTls = tokio_rustls::client::TlsStream<QuickAck>;

/// The proxy's TLS handshake with the host over `tcp`, verified for the
/// credential's host name.
async fn handshake(
    cred: &Credential,
    tcp: TcpStream,
    limits: &ProxyLimits,
) -> Result<(HostTls, SocketAddr), Refusal> {
    let failed = |why: String| Refusal::new(502, "upstream_tls", why);
    let address = tcp
        .peer_addr()
        .map_err(|e| failed(format!("the connection to the host: {e}")))?;
    let name = ServerName::try_from(cred.host.clone())
        .map_err(|e| failed(format!("`{}`: {e}", cred.host)))?;
    let connector = tokio_rustls::TlsConnector::from(cred.client.clone());
    match timeout(limits.connect, connector.connect(name, QuickAck::new(tcp))).await {
        Ok(Ok(tls)) => Ok((tls, address)),
        Ok(Err(e)) => Err(failed(format!("the host's TLS handshake failed: {e}"))),
        Err(_) => Err(failed(format!(
            "no TLS handshake with the host within {:?}",
            limits.connect
        ))),
    }
}

/// Whether a request may be sent again on another connection when the
/// kept one it went on turns out closed: a safe method (RFC 9110, 9.2.1)
/// without a body.
fn repeatable(head: &Head) -> bool {
    ["GET", "HEAD", "OPTIONS"]
        .iter()
        .any(|m| head.method.eq_ignore_ascii_case(m))
        && framing(head) == Ok(Body::None)
}

/// The host connection of a tunnel that started with a kept one in the
/// pool: the job's first request is read (into `job_buf`); one
/// [`repeatable`] goes out on the kept connection and is sent again on a
/// new one if the host had closed it (no byte of an answer came); any
/// other request, or no kept connection left, gets a new connection,
/// made to the first of `checked` that takes it. What the host answered
/// already is in `host_buf`; a request sent here is counted and is no
/// longer in `job_buf`. `None`: the job left before a whole request.
#[allow(clippy::too_many_arguments)]
async fn choose<S: AsyncRead + AsyncWrite + Unpin>(
    job: &mut JobTls<S>,
    job_buf: &mut Vec<u8>,
    host_buf: &mut Vec<u8>,
    cred: &Credential,
    shared: &Shared,
    checked: &[SocketAddr],
    record: &mut EgressRecord,
    (up, substituted, pending, others): Counters<'_>,
    reusable: &AtomicBool,
) -> Option<Result<(HostTls, SocketAddr), Refusal>> {
    let (head, end) = match read_head(job, job_buf).await {
        Ok(done) => done,
        Err(HeadError::Closed) if job_buf.is_empty() => return None,
        Err(e) => {
            record.reason = Some(format!("a request to the credential host: {e}"));
            return None;
        }
    };
    if asks_close(&head) {
        reusable.store(false, Ordering::Relaxed);
    }
    if repeatable(&head) {
        if let Some(mut kept) = shared.pool.take(&cred.name, record.phase) {
            record.address = Some(kept.address.to_string());
            // A safe method without a body: no server reads a method
            // parameter on it.
            let (out, n) = rewrite(&head, cred, false);
            others.add(others_in(&head, cred));
            let answered = async {
                kept.tls.write_all(&out).await?;
                kept.tls.flush().await?;
                framing::more(&mut kept.tls, host_buf).await
            };
            let limit = shared.limits.kept_answer;
            match timeout(limit, answered).await {
                Ok(Ok(true)) => {
                    substituted.fetch_add(n, Ordering::Relaxed);
                    up.fetch_add(out.len() as u64, Ordering::Relaxed);
                    pending.sent(head.method.eq_ignore_ascii_case("HEAD"));
                    job_buf.drain(..end);
                    return Some(Ok((kept.tls, kept.address)));
                }
                // The host had closed it: the request goes on a new one.
                Ok(_) => host_buf.clear(),
                // The host took it and stays silent: the job is told (the
                // connection is closed; the request is not sent again,
                // the host may be at work on it).
                Err(_) => {
                    substituted.fetch_add(n, Ordering::Relaxed);
                    up.fetch_add(out.len() as u64, Ordering::Relaxed);
                    return Some(Err(Refusal::new(
                        504,
                        "upstream_timeout",
                        format!(
                            "the host sent no answer within {limit:?} to the request sent on the connection the proxy kept to it"
                        ),
                    )));
                }
            }
        }
    }
    let tcp = match super::server::connect(shared, checked, record).await {
        Ok(tcp) => tcp,
        Err(refusal) => return Some(Err(refusal)),
    };
    Some(handshake(cred, tcp, &shared.limits).await)
}

/// Runs both directions until both are done, or until the responses
/// stop on a refused or broken response (the tunnel ends: a job that
/// keeps its side open after the answer is not waited for). `None`: that
/// direction had not ended.
async fn both<A, B, E>(
    requests: impl std::future::Future<Output = Result<(), A>>,
    responses: impl std::future::Future<Output = Result<E, B>>,
) -> (Option<Result<(), A>>, Option<Result<E, B>>) {
    tokio::pin!(requests, responses);
    let (mut req, mut resp) = (None, None);
    loop {
        tokio::select! {
            r = &mut requests, if req.is_none() => req = Some(r),
            r = &mut responses, if resp.is_none() => {
                let stop = r.is_err();
                resp = Some(r);
                if stop {
                    return (req, resp);
                }
            }
        }
        if req.is_some() && resp.is_some() {
            return (req, resp);
        }
    }
}

/// How a request's body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Body {
    None,
    Length(u64),
    Chunked,
}

/// Requests from the job to the host, one by one, until the job is done;
/// why it stopped early, if it did.
async fn requests<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    job: &mut R,
    host: &mut W,
    cred: &Credential,
    (up, substituted, pending, others): Counters<'_>,
    mut buf: Vec<u8>,
    reusable: &AtomicBool,
) -> Result<(), String> {
    loop {
        let (head, end) = match read_head(job, &mut buf).await {
            Ok(done) => done,
            // The job's side ended between requests (with or without its
            // TLS close_notify): it is done.
            Err(HeadError::Closed | HeadError::Io(_)) if buf.is_empty() => return Ok(()),
            Err(e) => return Err(format!("a request to the credential host: {e}")),
        };
        if asks_close(&head) {
            reusable.store(false, Ordering::Relaxed);
        }
        let body = framing(&head)?;
        let overridden = overrides_method(job, &mut buf, end, &head, body, cred).await?;
        let (out, n) = rewrite(&head, cred, overridden);
        substituted.fetch_add(n, Ordering::Relaxed);
        others.add(others_in(&head, cred));
        pending.sent(head.method.eq_ignore_ascii_case("HEAD"));
        write(host, &out, up).await?;
        buf.drain(..end);
        match body {
            Body::None => {}
            Body::Length(len) => copy_exact(job, host, &mut buf, len, up).await?,
            Body::Chunked => chunked(job, host, &mut buf, up).await?,
        }
    }
}

/// Whether the request may be taken for another method than its request
/// line's by a method parameter (`credential::METHOD_PARAMETER`), where
/// that matters: a `POST` under a credential scoped by `methods` whose
/// query names it, or whose body does (read into `buf` after its head,
/// which ends at `end`, when at most `MAX_SCANNED_BODY` bytes long), or
/// whose body is not read (longer, chunked, compressed by a
/// `content-encoding`, or awaited by an `expect` header: the client sends
/// it only once the head went on) and is one such a server reads as a
/// form. The body stays in `buf`, to be sent as
/// it came.
async fn overrides_method<R: AsyncRead + Unpin>(
    job: &mut R,
    buf: &mut Vec<u8>,
    end: usize,
    head: &Head,
    body: Body,
    cred: &Credential,
) -> Result<bool, String> {
    use super::credential::{names_method_parameter, read_as_form, MAX_SCANNED_BODY};
    if !cred.scoped_by_method() || !head.method.eq_ignore_ascii_case("POST") {
        return Ok(false);
    }
    if head
        .target
        .split_once('?')
        .is_some_and(|(_, query)| names_method_parameter(query.as_bytes()))
    {
        return Ok(true);
    }
    let named = |name: &'static str| {
        head.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    };
    let types: Vec<&[u8]> = named("content-type").collect();
    let form = match types.as_slice() {
        [] => read_as_form(None),
        [one] => read_as_form(Some(one)),
        _ => true,
    };
    let awaited = named("expect").next().is_some();
    // A compressed body (Express's body-parser inflates gzip and deflate
    // bodies before its form is read) does not show its text to the scan.
    let encoded =
        named("content-encoding").any(|v| !v.trim_ascii().eq_ignore_ascii_case(b"identity"));
    match body {
        Body::None => Ok(false),
        Body::Length(len) if len <= MAX_SCANNED_BODY && !awaited && !encoded => {
            let want = end.saturating_add(usize::try_from(len).unwrap_or(usize::MAX));
            while buf.len() < want {
                if !more(job, buf).await? {
                    return Err("the job's request body ended early".into());
                }
            }
            Ok(names_method_parameter(&buf[end..want]))
        }
        Body::Length(_) | Body::Chunked => Ok(form),
    }
}

/// Whether the job's request means the connection to end after its
/// answer: HTTP/1.0, or `close` in its `connection` header.
fn asks_close(head: &Head) -> bool {
    head.version == 0
        || head
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
            .any(|(_, v)| {
                v.split(|b| *b == b',')
                    .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"))
            })
}

/// The body's framing; a request framed two ways, or in a way the proxy
/// does not read, is refused (it could smuggle a second request past the
/// substitution's view).
pub(super) fn framing(head: &Head) -> Result<Body, String> {
    let te: Vec<&[u8]> = head
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("transfer-encoding"))
        .map(|(_, v)| v.as_slice())
        .collect();
    let cl: Vec<&[u8]> = head
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .map(|(_, v)| v.as_slice())
        .collect();
    // HTTP/1.0 has no transfer codings: RFC 9112 (6.1) has a server take
    // such a message's framing as faulty, and one that reads no body
    // instead would take the chunked body for a next request.
    if head.version == 0 && !te.is_empty() {
        return Err(
            "an HTTP/1.0 request framed by transfer-encoding, which HTTP/1.0 has not".into(),
        );
    }
    match (te.as_slice(), cl.as_slice()) {
        ([], []) => Ok(Body::None),
        ([te], []) if te.trim_ascii().eq_ignore_ascii_case(b"chunked") => Ok(Body::Chunked),
        ([], [first, rest @ ..]) if rest.iter().all(|v| v == first) => {
            framing::content_length(first)
                .map(Body::Length)
                .ok_or_else(|| "a request's content-length is not a number".to_string())
        }
        _ => Err("a request framed by transfer-encoding other than chunked, or two ways".into()),
    }
}

/// The request head as sent upstream and how many values were
/// substituted: the credential's header, when exactly the placeholder
/// form and the request within the credential's methods and paths (and
/// not `overridden` to another method by a parameter: [`overrides_method`]),
/// holds the real value; `accept-encoding` is `identity`.
fn rewrite(head: &Head, cred: &Credential, overridden: bool) -> (Vec<u8>, u64) {
    let mut out = format!(
        "{} {} HTTP/1.{}\r\n",
        head.method, head.target, head.version
    )
    .into_bytes();
    let mut n = 0;
    let names = head.headers.iter().map(|(name, _)| name.as_str());
    let in_scope =
        !overridden && cred.in_scope(&head.method, &head.target, names) && aimed_at(head, cred);
    for (name, value) in &head.headers {
        if name.eq_ignore_ascii_case("accept-encoding") {
            continue;
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        match cred.substitute(value) {
            Some(real) if in_scope && name.eq_ignore_ascii_case(&cred.header) => {
                out.extend_from_slice(real.expose().as_bytes());
                n += 1;
            }
            _ => out.extend_from_slice(value),
        }
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"accept-encoding: identity\r\n\r\n");
    (out, n)
}

/// Whether `head` asks for the credential's own host: its target in
/// origin form (`/path`, or `*`), and every `Host` header (at most one)
/// naming the credential's host and port. A front end serving several
/// hosts (a CDN, a server with other virtual hosts) routes a request by
/// its `Host`, or by an absolute-form target's authority (RFC 9112
/// 3.2.2): the value must not go with a request routed to another host
/// behind the same address.
fn aimed_at(head: &Head, cred: &Credential) -> bool {
    if !(head.target.starts_with('/') || head.target == "*") {
        return false;
    }
    let hosts: Vec<&[u8]> = head
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("host"))
        .map(|(_, v)| v.as_slice())
        .collect();
    match hosts.as_slice() {
        [] => true,
        [one] => std::str::from_utf8(one)
            .ok()
            .and_then(|v| v.trim().parse::<http::uri::Authority>().ok())
            .is_some_and(|a| {
                a.host()
                    .trim_end_matches('.')
                    .eq_ignore_ascii_case(&cred.host)
                    && a.port_u16().unwrap_or(443) == cred.port
            }),
        _ => false,
    }
}

async fn write<W: AsyncWrite + Unpin>(
    to: &mut W,
    bytes: &[u8],
    count: &AtomicU64,
) -> Result<(), String> {
    to.write_all(bytes)
        .await
        .map_err(|e| format!("writing to the credential host: {e}"))?;
    count.fetch_add(bytes.len() as u64, Ordering::Relaxed);
    Ok(())
}

/// Reads more of the job's request into `buf`; false at its end.
async fn more<R: AsyncRead + Unpin>(job: &mut R, buf: &mut Vec<u8>) -> Result<bool, String> {
    framing::more(job, buf)
        .await
        .map_err(|e| format!("reading the job's request: {e}"))
}

/// Passes on `len` bytes of body (what `buf` holds first).
pub(super) async fn copy_exact<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    job: &mut R,
    host: &mut W,
    buf: &mut Vec<u8>,
    len: u64,
    up: &AtomicU64,
) -> Result<(), String> {
    let mut left = len;
    while left > 0 {
        if buf.is_empty() && !more(job, buf).await? {
            return Err("the job's request body ended early".into());
        }
        let take = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
        write(host, &buf[..take], up).await?;
        buf.drain(..take);
        left -= take as u64;
    }
    Ok(())
}

/// One CRLF-terminated line (without it), bounded.
async fn line<R: AsyncRead + Unpin>(job: &mut R, buf: &mut Vec<u8>) -> Result<Vec<u8>, String> {
    framing::line(job, buf).await.map_err(|e| match e {
        LineError::TooLong => "a chunked body's line is too long".into(),
        LineError::Ended => "the job's chunked body ended early".into(),
        LineError::Read(e) => format!("reading the job's request: {e}"),
    })
}

/// Passes on a chunked body: each chunk by its size, its data and the
/// CRLF after it, then the trailer, every line read strictly (no bare LF
/// or CR in a size line, the data ended by CRLF, trailer lines header
/// fields: `framing::plain_line`, `framing::trailer_field`), so that
/// the host ends the body where the proxy does. A line that is not is
/// not sent on, and the request stops there.
pub(super) async fn chunked<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    job: &mut R,
    host: &mut W,
    buf: &mut Vec<u8>,
    up: &AtomicU64,
) -> Result<(), String> {
    loop {
        let size_line = line(job, buf).await?;
        let size = framing::chunk_size(&size_line)
            .ok_or_else(|| "a chunk size is not hexadecimal".to_string())?;
        if !framing::plain_line(&size_line) {
            return Err(format!(
                "a chunk-size line holds a control character (a bare LF or CR ends it early for some hosts): `{}`",
                head::escape(&String::from_utf8_lossy(&size_line))
            ));
        }
        write(host, &[&size_line[..], b"\r\n"].concat(), up).await?;
        if size == 0 {
            loop {
                let trailer = line(job, buf).await?;
                if !trailer.is_empty() && !framing::trailer_field(&trailer) {
                    return Err(format!(
                        "a chunked body's trailer line is not a header field: `{}`",
                        head::escape(&String::from_utf8_lossy(&trailer))
                    ));
                }
                write(host, &[&trailer[..], b"\r\n"].concat(), up).await?;
                if trailer.is_empty() {
                    return Ok(());
                }
            }
        }
        copy_exact(job, host, buf, size, up).await?;
        let end = line(job, buf).await?;
        if !end.is_empty() {
            return Err(format!(
                "a chunk's data of {size} bytes is not followed by CRLF (then `{}`)",
                head::escape(&String::from_utf8_lossy(&end))
            ));
        }
        write(host, b"\r\n", up).await?;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::egress::credential::{roots_of, Credentials};
    use paddock_protocol::{CredentialSpec, KeyRef};
    use std::time::Duration;

    fn credentials(dir: &std::path::Path) -> Credentials {
        scoped(dir, Vec::new(), Vec::new())
    }

    /// The credential with `methods` and `paths`.
    fn scoped(dir: &std::path::Path, methods: Vec<String>, paths: Vec<String>) -> Credentials {
        let file = dir.join("token");
        std::fs::write(&file, "real-token-0123456789").unwrap();
        Credentials::build(
            "j1",
            &[CredentialSpec {
                name: "git".into(),
                host: "git.corp.example".into(),
                header: "Authorization".into(),
                value: "Bearer {secret}".into(),
                secret: KeyRef::File(file),
                env: "GIT_TOKEN".into(),
                phases: vec![EgressPhase::Setup],
                upstream_ca: None,
                methods,
                paths,
            }],
            &roots_of(""),
            Duration::from_secs(60),
        )
        .unwrap()
    }

    /// Runs `input` (what the job sends) through the request side; what
    /// the host got, the substitutions, and why it stopped.
    async fn through(cred: &Credential, input: &[u8]) -> (String, u64, Result<(), String>) {
        let (up, subs) = (AtomicU64::new(0), AtomicU64::new(0));
        let mut job = input;
        let mut host = Vec::new();
        let end = requests(
            &mut job,
            &mut host,
            cred,
            (&up, &subs, &Pending::default(), &Others::default()),
            Vec::new(),
            &AtomicBool::new(true),
        )
        .await;
        (
            String::from_utf8(host).unwrap(),
            subs.load(Ordering::Relaxed),
            end,
        )
    }

    #[tokio::test]
    async fn only_the_credentials_header_with_the_exact_placeholder_form_gets_the_value() {
        let dir = tempfile::tempdir().unwrap();
        let creds = credentials(dir.path());
        let c = &creds.list[0];
        let p = c.placeholder.clone();
        let input = format!(
            "GET /a?t={p} HTTP/1.1\r\nHost: git.corp.example\r\nAuthorization: Bearer {p}\r\n\
             X-Other: Bearer {p}\r\nAccept-Encoding: gzip\r\n\r\n\
             POST /b HTTP/1.1\r\nauthorization: Bearer {p}x\r\ncontent-length: 5\r\n\r\nhello\
             PUT /c HTTP/1.1\r\nAUTHORIZATION: Bearer {p}\r\ntransfer-encoding: chunked\r\n\r\n\
             3\r\nabc\r\n0\r\nx-t: 1\r\n\r\n"
        );
        let (host, subs, end) = through(c, input.as_bytes()).await;
        assert_eq!(
            (host, subs, end),
            (
                format!(
                    "GET /a?t={p} HTTP/1.1\r\nHost: git.corp.example\r\nAuthorization: Bearer real-token-0123456789\r\n\
                     X-Other: Bearer {p}\r\naccept-encoding: identity\r\n\r\n\
                     POST /b HTTP/1.1\r\nauthorization: Bearer {p}x\r\ncontent-length: 5\r\naccept-encoding: identity\r\n\r\nhello\
                     PUT /c HTTP/1.1\r\nAUTHORIZATION: Bearer real-token-0123456789\r\ntransfer-encoding: chunked\r\naccept-encoding: identity\r\n\r\n\
                     3\r\nabc\r\n0\r\nx-t: 1\r\n\r\n"
                ),
                2,
                Ok(())
            )
        );
    }

    /// A request routed to another host behind the credential host's
    /// address (its `Host`, two `Host`s, an absolute-form or CONNECT
    /// target) carries the placeholder on; the credential's own host, in
    /// any case, with its port or a trailing dot, gets the value. Before,
    /// every one got it: a front end serving other hosts (a CDN) would
    /// have routed the value to another of its hosts.
    #[tokio::test]
    async fn a_request_for_another_host_behind_the_same_address_gets_no_value() {
        let dir = tempfile::tempdir().unwrap();
        let creds = credentials(dir.path());
        let c = &creds.list[0];
        let p = c.placeholder.clone();
        let auth = format!("authorization: Bearer {p}\r\n");
        let cases = [
            ("GET /a HTTP/1.1\r\nHost: other.example\r\n", 0),
            ("GET /a HTTP/1.1\r\nHost: git.corp.example:8443\r\n", 0),
            (
                "GET /a HTTP/1.1\r\nHost: git.corp.example\r\nHost: other.example\r\n",
                0,
            ),
            (
                "GET https://other.example/a HTTP/1.1\r\nHost: git.corp.example\r\n",
                0,
            ),
            (
                "CONNECT other.example:443 HTTP/1.1\r\nHost: git.corp.example\r\n",
                0,
            ),
            ("GET /a HTTP/1.1\r\nHost: GIT.corp.example.:443\r\n", 1),
            ("OPTIONS * HTTP/1.1\r\nHost: git.corp.example\r\n", 1),
        ];
        let got: Vec<(String, u64)> = {
            let mut got = Vec::new();
            for (head, _) in cases {
                let (sent, subs, end) = through(c, format!("{head}{auth}\r\n").as_bytes()).await;
                assert_eq!(end, Ok(()));
                got.push((sent, subs));
            }
            got
        };
        let want: Vec<(String, u64)> = cases
            .iter()
            .map(|(head, n)| {
                let value = if *n == 1 {
                    "Bearer real-token-0123456789".to_string()
                } else {
                    format!("Bearer {p}")
                };
                (
                    format!("{head}authorization: {value}\r\naccept-encoding: identity\r\n\r\n"),
                    *n,
                )
            })
            .collect();
        assert_eq!(got, want);
    }

    /// With `methods = ["GET"]` and `paths = ["/v2/"]` only a GET under
    /// `/v2/` with a plain path gets the value; the others carry the
    /// placeholder on, as sent.
    #[tokio::test]
    async fn a_scoped_credential_is_put_only_into_requests_in_its_scope() {
        let dir = tempfile::tempdir().unwrap();
        let creds = scoped(dir.path(), vec!["GET".into()], vec!["/v2/".into()]);
        let c = &creds.list[0];
        let p = c.placeholder.clone();
        let req =
            |m: &str, t: &str| format!("{m} {t} HTTP/1.1\r\nauthorization: Bearer {p}\r\n\r\n");
        let sent = |m: &str, t: &str, v: &str| {
            format!("{m} {t} HTTP/1.1\r\nauthorization: Bearer {v}\r\naccept-encoding: identity\r\n\r\n")
        };
        let real = "real-token-0123456789";
        // A GET a server takes for a DELETE, or for another path, by a
        // header (Google's APIs, Express, IIS's URL Rewrite, Symfony).
        let overridden = |header: &str| {
            format!("GET /v2/lib HTTP/1.1\r\n{header}\r\nauthorization: Bearer {p}\r\n\r\n")
        };
        let overridden_sent = |header: &str| {
            format!("GET /v2/lib HTTP/1.1\r\n{header}\r\nauthorization: Bearer {p}\r\naccept-encoding: identity\r\n\r\n")
        };
        let overrides = [
            "X-HTTP-Method-Override: DELETE",
            "x-http-method: DELETE",
            "X-Method-Override: DELETE",
            "X-Original-URL: /admin",
            "x-rewrite-url: /admin",
        ];
        let input = [
            req("GET", "/v2/lib/manifests/1"),
            req("DELETE", "/v2/lib/manifests/1"),
            req("GET", "/v3/x"),
            req("GET", "/v2/../admin"),
            req("GET", "/v2/%2e%2e/admin"),
            // Tomcat and Spring read `..;` (a dot segment with path
            // parameters) as `..`: `/admin` there.
            req("GET", "/v2/..;/admin"),
            req("GET", "/v2/..%3B/admin"),
            overrides.map(overridden).concat(),
        ]
        .concat();
        let (host, subs, end) = through(c, input.as_bytes()).await;
        assert_eq!(
            (host, subs, end),
            (
                [
                    sent("GET", "/v2/lib/manifests/1", real),
                    sent("DELETE", "/v2/lib/manifests/1", &p),
                    sent("GET", "/v3/x", &p),
                    sent("GET", "/v2/../admin", &p),
                    sent("GET", "/v2/%2e%2e/admin", &p),
                    sent("GET", "/v2/..;/admin", &p),
                    sent("GET", "/v2/..%3B/admin", &p),
                    overrides.map(overridden_sent).concat(),
                ]
                .concat(),
                1,
                Ok(())
            )
        );
    }

    /// A `POST` a server takes for another method by a `_method`
    /// parameter (Rails and Rack, Laravel and Symfony, Spring, ASP.NET
    /// Core) in its form body or query gets only the placeholder under a
    /// credential scoped by `methods`; so does a form body the proxy does
    /// not read first (chunked, or awaited by `expect`). Before, each got
    /// the real value: `POST` was within the scope, the body unread.
    #[tokio::test]
    async fn a_method_named_in_a_posts_body_or_query_is_out_of_the_methods_scope() {
        let dir = tempfile::tempdir().unwrap();
        let creds = scoped(dir.path(), vec!["GET".into(), "POST".into()], Vec::new());
        let c = &creds.list[0];
        let p = c.placeholder.clone();
        let real = "real-token-0123456789";
        let post = |v: &str, target: &str, headers: &str, body: &str| {
            format!("POST {target} HTTP/1.1\r\n{headers}authorization: Bearer {v}\r\n\r\n{body}")
        };
        let sent = |v: &str, target: &str, headers: &str, body: &str| {
            format!(
                "POST {target} HTTP/1.1\r\n{headers}authorization: Bearer {v}\r\n\
                 accept-encoding: identity\r\n\r\n{body}"
            )
        };
        let form = |body: &str| {
            format!(
                "content-type: application/x-www-form-urlencoded\r\ncontent-length: {}\r\n",
                body.len()
            )
        };
        let multipart =
            "--b\r\ncontent-disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--b--\r\n";
        let multipart_type = format!(
            "content-type: multipart/form-data; boundary=b\r\ncontent-length: {}\r\n",
            multipart.len()
        );
        let json = "{\"name\":\"x\"}";
        let json_type = format!(
            "content-type: application/json\r\ncontent-length: {}\r\n",
            json.len()
        );
        let chunked_form =
            "content-type: application/x-www-form-urlencoded\r\ntransfer-encoding: chunked\r\n";
        let chunked_json = "content-type: application/json\r\ntransfer-encoding: chunked\r\n";
        let chunks = "6\r\nname=x\r\n0\r\n\r\n";
        let awaited = format!("{}expect: 100-continue\r\n", form("name=x"));
        let gzipped = format!("{}content-encoding: gzip\r\n", form("name=x"));
        let gzipped_json = format!("{json_type}content-encoding: gzip\r\n");
        // (target, headers, body, whether the real value goes)
        let cases: Vec<(&str, String, &str, bool)> = vec![
            ("/items", form("name=x"), "name=x", true),
            ("/items", json_type.clone(), json, true),
            ("/items", String::new(), "", true),
            ("/items", chunked_json.to_string(), chunks, true),
            (
                "/items",
                form("name=x&_method=DELETE"),
                "name=x&_method=DELETE",
                false,
            ),
            (
                "/items",
                form("%5Fmethod=DELETE"),
                "%5Fmethod=DELETE",
                false,
            ),
            ("/items", form("_METHOD=delete"), "_METHOD=delete", false),
            ("/items", multipart_type.clone(), multipart, false),
            (
                "/items",
                "content-length: 16\r\n".to_string(),
                "_method=DELETE&x",
                false,
            ),
            ("/items?_method=DELETE", String::new(), "", false),
            ("/items?%5fmethod=DELETE", String::new(), "", false),
            ("/items", chunked_form.to_string(), chunks, false),
            ("/items", awaited.clone(), "name=x", false),
            // Not gzip in fact: the proxy does not look.
            ("/items", gzipped.clone(), "name=x", false),
            ("/items", gzipped_json.clone(), json, true),
        ];
        let input: String = cases.iter().map(|(t, h, b, _)| post(&p, t, h, b)).collect();
        let (host, subs, end) = through(c, input.as_bytes()).await;
        let want: String = cases
            .iter()
            .map(|(t, h, b, real_goes)| sent(if *real_goes { real } else { &p }, t, h, b))
            .collect();
        // A GET naming `_method` is not overridden by any of those servers.
        let get =
            format!("GET /items?_method=DELETE HTTP/1.1\r\nauthorization: Bearer {p}\r\n\r\n");
        let (get_host, get_subs, _) = through(c, get.as_bytes()).await;
        assert_eq!(
            (host, subs, end, get_subs),
            (want, 5, Ok(()), 1),
            "{get_host}"
        );
    }

    /// A chunked body whose lines a lenient host ends elsewhere than the
    /// proxy: a bare LF in a chunk extension (`3;x\nabc`: such a host
    /// reads size 3, data `abc`, then a size `fff` from what the proxy
    /// passed on as data, and takes the next request, with the real value
    /// in it, for 4,095 bytes of this one's body, which it may store where
    /// the job reads it), a chunk's data not followed by CRLF, a trailer
    /// line that is no header field. Each stops the tunnel before the line
    /// goes on, and the next request is never read. Before, all of it was
    /// passed on and the next request got the value.
    #[tokio::test]
    async fn a_chunked_body_a_lenient_host_would_end_elsewhere_stops_the_tunnel() {
        let dir = tempfile::tempdir().unwrap();
        let creds = credentials(dir.path());
        let c = &creds.list[0];
        let p = c.placeholder.clone();
        let head =
            "POST /a HTTP/1.1\r\nHost: git.corp.example\r\ntransfer-encoding: chunked\r\n\r\n";
        let sent = "POST /a HTTP/1.1\r\nHost: git.corp.example\r\ntransfer-encoding: chunked\r\naccept-encoding: identity\r\n\r\n";
        let next = format!(
            "GET /v2/x HTTP/1.1\r\nHost: git.corp.example\r\nAuthorization: Bearer {p}\r\n\r\n"
        );
        let cases = [
            (
                "3;x\nabc\r\nfff\r\n0\r\n\r\n",
                "",
                "a chunk-size line holds a control character (a bare LF or CR ends it early for some hosts): `3;x\\nabc`",
            ),
            (
                "3\r\nabcXY\r\n0\r\n\r\n",
                "3\r\nabc",
                "a chunk's data of 3 bytes is not followed by CRLF (then `XY`)",
            ),
            (
                "0\r\nx-t: 1\nGET /s HTTP/1.1\r\n\r\n",
                "0\r\n",
                "a chunked body's trailer line is not a header field: `x-t: 1\\nGET /s HTTP/1.1`",
            ),
            (
                "0\r\nGET /s HTTP/1.1\r\n\r\n",
                "0\r\n",
                "a chunked body's trailer line is not a header field: `GET /s HTTP/1.1`",
            ),
        ];
        let mut got = Vec::new();
        let mut want = Vec::new();
        for (body, passed, why) in cases {
            let input = format!("{head}{body}{next}");
            got.push(through(c, input.as_bytes()).await);
            want.push((format!("{sent}{passed}"), 0, Err(why.to_string())));
        }
        assert_eq!(got, want);
        // The twin: the same requests framed strictly; the second gets
        // the value.
        let input = format!("{head}3;x\r\nabc\r\n0\r\nx-t: 1\r\n\r\n{next}");
        let (host, subs, end) = through(c, input.as_bytes()).await;
        assert_eq!(
            (host, subs, end),
            (
                format!(
                    "{sent}3;x\r\nabc\r\n0\r\nx-t: 1\r\n\r\nGET /v2/x HTTP/1.1\r\nHost: git.corp.example\r\nAuthorization: Bearer real-token-0123456789\r\naccept-encoding: identity\r\n\r\n"
                ),
                1,
                Ok(())
            )
        );
    }

    /// An HTTP/1.0 request with `transfer-encoding` (which a host may read
    /// as bodiless, its chunked body then a next request) ends the
    /// tunnel before its head goes on; HTTP/1.1's is read chunked.
    #[tokio::test]
    async fn an_http10_request_with_a_transfer_encoding_stops_the_tunnel() {
        let dir = tempfile::tempdir().unwrap();
        let creds = credentials(dir.path());
        let body = "transfer-encoding: chunked\r\n\r\n0\r\n\r\n";
        let old = through(
            &creds.list[0],
            format!("POST / HTTP/1.0\r\n{body}").as_bytes(),
        )
        .await;
        let new = through(
            &creds.list[0],
            format!("POST / HTTP/1.1\r\n{body}").as_bytes(),
        )
        .await;
        assert_eq!(
            (old, new),
            (
                (
                    String::new(),
                    0,
                    Err(
                        "an HTTP/1.0 request framed by transfer-encoding, which HTTP/1.0 has not"
                            .into()
                    )
                ),
                (
                    format!(
                        "POST / HTTP/1.1\r\n{}",
                        body.replacen("\r\n\r\n", "\r\naccept-encoding: identity\r\n\r\n", 1)
                    ),
                    0,
                    Ok(())
                )
            )
        );
    }

    #[tokio::test]
    async fn a_request_framed_two_ways_stops_the_tunnel() {
        let dir = tempfile::tempdir().unwrap();
        let creds = credentials(dir.path());
        let (host, subs, end) = through(
            &creds.list[0],
            b"POST / HTTP/1.1\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
        )
        .await;
        assert_eq!(
            (host, subs, end),
            (
                String::new(),
                0,
                Err("a request framed by transfer-encoding other than chunked, or two ways".into())
            )
        );
    }
}

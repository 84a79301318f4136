//! One proxy connection from request to record: read the head (bounded,
//! timed), take its target, check the phase's list, resolve the name here
//! (once), check every address against the deny list, connect to a checked
//! address, and for a tunnel check the ClientHello's server name before
//! any byte goes upstream; then relay (or, to a credential's host,
//! terminate: `super::terminate`). Nothing of the job's goes upstream once
//! the phase the connection was opened in has ended ([`phase_ended`]):
//! not a request whose head or tunnel's ClientHello was still arriving at
//! the switch, nor the rest of a request's body. Whatever happens ends as
//! one `EgressRecord`.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd as _;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use paddock_protocol::{EgressMethod, EgressPhase, EgressRecord, Host};
use paddock_sandbox::handoff;
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::time::timeout;

use super::allowlist::PhaseLists;
use super::credential::Credentials;
use super::deny::DenyList;
use super::head::{self, read_head, Head, HeadError, Target};
use super::hello::{read_client_hello, HelloError};
use super::pool::UpstreamPool;
use super::refusal::Refusal;
use super::relay::{relay, relay_down};
use super::resolve::Resolver;
use super::terminate::{self as body, terminate, Body, Upstream};

/// The proxy's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyLimits {
    /// For the whole request head to arrive.
    pub head: Duration,
    /// For a name to resolve.
    pub resolve: Duration,
    /// For each connection attempt upstream.
    pub connect: Duration,
    /// For a tunnel's ClientHello to arrive.
    pub hello: Duration,
    /// Connections handled at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// `SO_RCVBUF` and `SO_SNDBUF` of both sockets of every connection
    /// (`None`: the kernel's own sizing, which grows them as needed).
    pub socket_buffer: Option<usize>,
    /// Whether the proxy's socket to a job on a loopback address (every
    /// job on the `process` and `sandbox` rungs) sends with congestion
    /// control `reno`, unpaced, whatever the host's default: a default
    /// that paces (BBR) arms a timer for nearly every segment sent, which
    /// on a leg with no latency and no loss buys nothing and cost a
    /// download about half the relay's CPU (BENCHMARKS.md, "Session 32").
    /// The leg to the destination keeps the host's default.
    pub unpaced_loopback: bool,
    /// How long a kept connection to a credential host waits for the
    /// job's next tunnel before it is closed (`pool::IDLE_LIMIT`).
    pub kept_idle: Duration,
    /// For the first byte of the answer to a request sent on a kept
    /// connection (else the job gets a `504`, rule `upstream_timeout`).
    pub kept_answer: Duration,
}

impl Default for ProxyLimits {
    fn default() -> Self {
        ProxyLimits {
            head: Duration::from_secs(10),
            resolve: Duration::from_secs(10),
            connect: Duration::from_secs(10),
            hello: Duration::from_secs(10),
            max_connections: 256,
            socket_buffer: None,
            unpaced_loopback: true,
            kept_idle: super::pool::IDLE_LIMIT,
            kept_answer: super::pool::ANSWER_LIMIT,
        }
    }
}

/// What every connection of one proxy shares.
pub(crate) struct Shared {
    pub lists: PhaseLists,
    pub deny: DenyList,
    pub resolver: Arc<dyn Resolver>,
    pub limits: ProxyLimits,
    pub credentials: Option<Arc<Credentials>>,
    /// What a refusal's advice names as bounding the job's lists.
    pub in_force: super::refusal::InForce,
    pub records: mpsc::Sender<EgressRecord>,
    /// The job's kept connections to its credential hosts.
    pub pool: Arc<UpstreamPool>,
    /// The `Proxy-Authorization` every request must carry (a loopback TCP
    /// listener: `super::auth`); `None`: none is asked for.
    pub auth: Option<super::auth::ProxyAuth>,
    /// How many accepted connections are being served, their records not
    /// yet sent ([`Serving`]): what `EgressProxy::settled` waits on.
    pub serving: watch::Sender<usize>,
}

/// One accepted connection counted in [`Shared::serving`] until it is
/// dropped: after its record was sent, or when its task ends otherwise.
struct Serving(Arc<Shared>);

impl Serving {
    fn new(shared: Arc<Shared>) -> Serving {
        shared.serving.send_modify(|n| *n += 1);
        Serving(shared)
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.serving.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Where the proxy accepts: loopback TCP (the engine on the `process`
/// rung, tests, the bench) or a Unix socket, to which the sandbox's
/// forwarder hands each of the job's TCP connections itself
/// (`paddock_sandbox::handoff`): the proxy then serves the job's socket
/// directly, and the bytes cross one relay.
pub enum ProxyListener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

/// What a listener took: a job's connection, or a Unix connection that
/// should carry one.
enum Accepted {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl ProxyListener {
    async fn accept(&self) -> std::io::Result<Accepted> {
        Ok(match self {
            ProxyListener::Tcp(l) => Accepted::Tcp(l.accept().await?.0),
            ProxyListener::Unix(l) => Accepted::Unix(l.accept().await?.0),
        })
    }
}

/// Accepts connections until the task is aborted.
pub(crate) async fn serve(
    listener: ProxyListener,
    shared: Arc<Shared>,
    phase: watch::Receiver<EgressPhase>,
) {
    let permits = Arc::new(Semaphore::new(shared.limits.max_connections));
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let conn = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                tracing::warn!("egress proxy: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let shared = shared.clone();
        let phase = phase.clone();
        let serving = Serving::new(shared.clone());
        tokio::spawn(async move {
            let record = match conn {
                Accepted::Tcp(tcp) => handle(tcp, &shared, phase).await,
                Accepted::Unix(unix) => match take_handoff(&unix, shared.limits.head).await {
                    Ok(tcp) => {
                        drop(unix);
                        handle(tcp, &shared, phase).await
                    }
                    Err(record) => record,
                },
            };
            // A request without the job's proxy credentials is not the
            // job's (another process of the host, or a client's first try
            // before it answers the 407's challenge): logged, never on the
            // job's record.
            if record.rule.as_deref() == Some(super::auth::RULE) {
                tracing::info!(
                    "egress proxy: a request for {}:{} without the job's proxy credentials: {}",
                    record.host,
                    record.port,
                    record.reason.as_deref().unwrap_or_default()
                );
            } else {
                let _ = shared.records.send(record).await;
            }
            drop(serving);
            drop(permit);
        });
    }
}

/// The job's TCP connection handed over `unix` (`paddock_sandbox::handoff`:
/// one message, read without blocking once it arrives, within `wait`), or
/// the record of what was refused instead (every descriptor that came
/// with it closed; logged as well, since a refusal here means something
/// other than the forwarder is at the socket or the forwarder is broken).
async fn take_handoff(unix: &UnixStream, wait: Duration) -> Result<TcpStream, EgressRecord> {
    let fd = unix.as_fd();
    let received = timeout(wait, async {
        loop {
            unix.readable().await?;
            match unix.try_io(Interest::READABLE, || handoff::receive(fd)) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                other => return other,
            }
        }
    })
    .await;
    let why = match received {
        Ok(Ok(Ok(tcp))) => match tcp
            .set_nonblocking(true)
            .and_then(|()| TcpStream::from_std(tcp))
        {
            Ok(tcp) => {
                let _ = tcp.set_nodelay(true);
                return Ok(tcp);
            }
            Err(e) => format!("the handed-over connection cannot be served: {e}"),
        },
        Ok(Ok(Err(refused))) => format!("refused a hand-over on the proxy's socket: {refused}"),
        Ok(Err(e)) => format!("cannot read a hand-over from the proxy's socket: {e}"),
        Err(_) => format!("no connection handed over on the proxy's socket within {wait:?}"),
    };
    tracing::warn!("egress proxy: {why}");
    let mut record = empty_record(EgressPhase::Agent);
    record.rule = Some("handoff".into());
    record.reason = Some(why);
    Err(record)
}

/// A record with nothing known yet.
fn empty_record(phase: EgressPhase) -> EgressRecord {
    EgressRecord {
        host: String::new(),
        port: 0,
        method: None,
        address: None,
        bytes_up: 0,
        bytes_down: 0,
        duration_ms: 0,
        phase,
        allowed: false,
        rule: None,
        reason: None,
        credential: None,
        substituted: None,
    }
}

async fn handle(
    mut client: TcpStream,
    shared: &Shared,
    mut phase_rx: watch::Receiver<EgressPhase>,
) -> EgressRecord {
    job_socket(&client, &shared.limits);
    let started = Instant::now();
    let phase = *phase_rx.borrow_and_update();
    let mut record = empty_record(phase);
    if let Err(refusal) = attempt(&mut client, shared, &mut phase_rx, &mut record).await {
        record.allowed = false;
        let destination = destination(&record.host, record.port);
        if let Some(answer) = refusal.answer(&destination, phase, &shared.in_force) {
            let _ = timeout(shared.limits.head, client.write_all(&answer)).await;
        }
        let _ = client.shutdown().await;
        record.rule = Some(refusal.rule);
        record.reason = Some(refusal.reason);
    }
    record.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    record
}

async fn attempt(
    client: &mut TcpStream,
    shared: &Shared,
    phase_rx: &mut watch::Receiver<EgressPhase>,
    record: &mut EgressRecord,
) -> Result<(), Refusal> {
    let limits = &shared.limits;
    let mut buf = Vec::new();
    let (head, end) = match timeout(limits.head, read_head(client, &mut buf)).await {
        Err(_) => {
            return Err(Refusal::new(
                408,
                "bad_request",
                format!("no whole request head within {:?}", limits.head),
            ))
        }
        Ok(Err(e @ HeadError::TooLarge)) => {
            return Err(Refusal::new(431, "bad_request", e.to_string()))
        }
        Ok(Err(e @ HeadError::Malformed(_))) => {
            return Err(Refusal::new(400, "bad_request", e.to_string()))
        }
        Ok(Err(e)) => return Err(Refusal::silent("bad_request", e.to_string())),
        Ok(Ok(done)) => done,
    };
    // A target that is no destination leaves the record's host empty (the
    // reason quotes it): a malformed request, not a destination.
    let target = head::target(&head).map_err(|(rule, why)| Refusal::new(400, rule, why))?;
    // The host as a direct attempt's record has it: an IPv6 address
    // without brackets (whoever shows it brackets it beside its port).
    record.host = match &target.host {
        Host::Address(ip) => ip.to_string(),
        Host::Name(name) => name.clone(),
    };
    record.port = target.port;
    record.method = Some(target.method);
    if let Some(auth) = &shared.auth {
        auth.check(&head)?;
    }
    let destination = destination(&record.host, record.port);
    if !shared
        .lists
        .of(record.phase)
        .allows(&target.host, target.port)
    {
        let (rule, what) = match target.host {
            Host::Address(_) => ("ip_literal", "an IP address that is not"),
            Host::Name(_) => ("allowlist", "not"),
        };
        return Err(Refusal::new(
            403,
            rule,
            format!(
                "{destination} is {what} on the {} phase's list",
                record.phase.as_str()
            ),
        ));
    }
    // What goes upstream first: the rewritten head of a plain request
    // (its body follows by its framing, and nothing after it), or the
    // tunnel's ClientHello and whatever followed the CONNECT's head.
    let (mut first, framing) = match target.method {
        EgressMethod::Http => (
            origin_request(&head, &target)?,
            Some(body::framing(&head).map_err(|why| Refusal::new(400, "bad_request", why))?),
        ),
        EgressMethod::Connect => (Vec::new(), None),
    };
    let mut rest = buf[end..].to_vec();
    if framing.is_none() {
        first.append(&mut rest);
    }
    // A credential's placeholder in a plain request goes as it is (a value
    // goes only into requests to its host over HTTPS, `terminate`); the
    // record says it was sent elsewhere.
    if let (EgressMethod::Http, Some(creds)) = (target.method, &shared.credentials) {
        let named = creds.placeholders_in(head.headers.iter().map(|(_, v)| v.as_slice()));
        if !named.is_empty() {
            record.reason = Some(format!(
                "the request carried the placeholder of credential `{}` to {destination} over plain HTTP, sent as it is: a credential's value goes only into HTTPS requests to its own host",
                named.join("`, `")
            ));
        }
    }
    let addresses = resolve(shared, &target).await?;
    // Every address is checked before any connection, and only checked
    // addresses are connected to: nothing is resolved twice.
    let mut checked = Vec::with_capacity(addresses.len());
    for ip in addresses {
        let addr = SocketAddr::new(ip.to_canonical(), target.port);
        if let Some(range) = shared.deny.check(addr) {
            record.address = Some(addr.to_string());
            return Err(Refusal::new(
                403,
                format!("deny_list:{}", range.0),
                format!("{destination} is at {addr}, a {} address", range.0),
            ));
        }
        checked.push(addr);
    }
    // A credential's host is terminated, never spliced; when the job's
    // pool keeps a connection to it, none is made now (the tunnel's first
    // request decides, `super::terminate`).
    let credential = match target.method {
        EgressMethod::Connect => shared
            .credentials
            .as_ref()
            .and_then(|c| c.find(&target.host, target.port, record.phase))
            .cloned(),
        EgressMethod::Http => None,
    };
    let kept = credential
        .as_ref()
        .is_some_and(|c| shared.pool.has(&c.name, record.phase));
    // A head that was still arriving when the phase ended was checked
    // against the list of a phase no longer in force.
    if phase_ended(phase_rx) {
        cut(record);
        return Ok(());
    }
    let mut upstream = if kept {
        None
    } else {
        Some(connect(shared, &checked, record).await?)
    };
    if target.method == EgressMethod::Connect {
        client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
            .map_err(|e| Refusal::silent("bad_request", format!("the job hung up: {e}")))?;
        let sni = match timeout(limits.hello, read_client_hello(client, &mut first)).await {
            Err(_) => {
                return Err(Refusal::silent(
                    "not_tls",
                    format!("no ClientHello within {:?}", limits.hello),
                ))
            }
            Ok(Err(e @ (HelloError::Encrypted | HelloError::EncryptedDraft(_)))) => {
                return Err(Refusal::silent("encrypted_client_hello", e.to_string()))
            }
            Ok(Err(e)) => return Err(Refusal::silent("not_tls", e.to_string())),
            Ok(Ok(sni)) => sni,
        };
        check_sni(&target.host, sni.as_deref())?;
        // A tunnel left half-open at the switch (its ClientHello sent
        // after it) carries nothing of the next phase.
        if phase_ended(phase_rx) {
            record.allowed = true;
            cut(record);
            return Ok(());
        }
        if let Some(cred) = credential {
            let upstream = match upstream.take() {
                Some(tcp) => Upstream::Fresh(tcp),
                None => Upstream::Kept(checked),
            };
            return terminate(client, first, upstream, &cred, shared, phase_rx, record).await;
        }
    }
    let Some(mut upstream) = upstream else {
        return Err(Refusal::new(502, "connect", "no connection was made"));
    };
    record.allowed = true;
    if phase_ended(phase_rx) {
        cut(record);
        return Ok(());
    }
    if let Err(e) = upstream.write_all(&first).await {
        record.reason = Some(format!("the destination hung up: {e}"));
        return Ok(());
    }
    let relayed = match framing {
        // A plain request: its body by its framing, then only the answer.
        // Whatever the job sends after the body (a second request on a
        // kept connection, h2c's frames after an upgrade) never reaches
        // the host: its next request comes on a new connection, checked.
        // The body goes on only while the phase lasts: a setup request
        // still sending at the switch is cut there, as a tunnel is.
        Some(framing) => {
            let sent = AtomicU64::new(0);
            let body = async {
                match framing {
                    Body::None => Ok(()),
                    Body::Length(n) => {
                        body::copy_exact(client, &mut upstream, &mut rest, n, &sent).await
                    }
                    Body::Chunked => body::chunked(client, &mut upstream, &mut rest, &sent).await,
                }
            };
            let passed = tokio::select! {
                biased;
                _ = phase_rx.changed() => None,
                passed = body => Some(passed),
            };
            let Some(passed) = passed else {
                record.bytes_up = (first.len() as u64).saturating_add(sent.into_inner());
                cut(record);
                return Ok(());
            };
            if let Err(why) = passed {
                record.bytes_up = (first.len() as u64).saturating_add(sent.into_inner());
                record.reason = Some(why);
                return Ok(());
            }
            let mut relayed = relay_down(client, &upstream, phase_rx).await;
            relayed.up = sent.into_inner();
            relayed
        }
        None => relay(client, &upstream, phase_rx).await,
    };
    record.bytes_up = (first.len() as u64).saturating_add(relayed.up);
    record.bytes_down = relayed.down;
    if relayed.cut {
        cut(record);
    }
    Ok(())
}

/// Whether the phase the connection was opened in has ended (or the proxy
/// stopped) since its record's phase was read: then nothing more of the
/// job's goes upstream on it.
fn phase_ended(phase_rx: &watch::Receiver<EgressPhase>) -> bool {
    phase_rx.has_changed().unwrap_or(true)
}

/// The record of a connection closed because its phase ended.
fn cut(record: &mut EgressRecord) {
    record.rule = Some("phase_switch".into());
    record.reason = Some(format!(
        "opened in the {} phase, closed when it ended",
        record.phase.as_str()
    ));
}

/// `host:port` as a refusal names it, an IPv6 address in brackets.
fn destination(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The tunnel's server name against the CONNECT host: a name needs the
/// same name, an (explicitly allowed) IP literal no name at all.
fn check_sni(host: &Host, sni: Option<&str>) -> Result<(), Refusal> {
    let sni = sni.map(|s| s.strip_suffix('.').unwrap_or(s));
    match (host, sni) {
        (Host::Name(h), Some(s)) if h == s => Ok(()),
        (Host::Address(_), None) => Ok(()),
        (_, Some(s)) => Err(Refusal::silent(
            "sni_mismatch",
            format!(
                "the TLS server name `{}` is not the CONNECT host `{host}`",
                head::escape(s)
            ),
        )),
        (_, None) => Err(Refusal::silent(
            "sni_mismatch",
            format!("the ClientHello names no server; a tunnel to `{host}` must"),
        )),
    }
}

/// The addresses of the target's host: the literal, or the resolver's
/// answer (once, bounded in time).
async fn resolve(shared: &Shared, target: &Target) -> Result<Vec<IpAddr>, Refusal> {
    let name = match &target.host {
        Host::Address(ip) => return Ok(vec![*ip]),
        Host::Name(name) => name,
    };
    match timeout(shared.limits.resolve, shared.resolver.resolve(name)).await {
        Ok(Ok(list)) if !list.is_empty() => Ok(list),
        Ok(Ok(_)) => Err(Refusal::new(
            502,
            "resolve",
            format!("{name} has no address"),
        )),
        Ok(Err(e)) => Err(Refusal::new(
            502,
            "resolve",
            format!("cannot resolve {name}: {e}"),
        )),
        Err(_) => Err(Refusal::new(
            502,
            "resolve",
            format!("no answer for {name} within {:?}", shared.limits.resolve),
        )),
    }
}

/// The first checked address that takes a connection.
pub(crate) async fn connect(
    shared: &Shared,
    checked: &[SocketAddr],
    record: &mut EgressRecord,
) -> Result<TcpStream, Refusal> {
    let mut last = String::from("no address");
    for addr in checked {
        record.address = Some(addr.to_string());
        match timeout(shared.limits.connect, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                buffers(&stream, shared.limits.socket_buffer);
                return Ok(stream);
            }
            Ok(Err(e)) => last = format!("{addr}: {e}"),
            Err(_) => last = format!("{addr}: no connection within {:?}", shared.limits.connect),
        }
    }
    Err(Refusal::new(
        502,
        "connect",
        format!("cannot connect: {last}"),
    ))
}

/// Sets a socket's buffer sizes, when the limits fix them (the kernel
/// caps them at its `rmem_max`/`wmem_max`; a failure leaves its own).
/// The congestion control a loopback job's socket sends with: always
/// built into Linux and open to unprivileged sockets, and it never paces
/// on its own.
const UNPACED: &[u8] = b"reno";

/// Sets up the proxy's socket to the job: no Nagle, the buffers of
/// `ProxyLimits::socket_buffer`, and [`UNPACED`] when the job is on a
/// loopback address and `ProxyLimits::unpaced_loopback` says so (a
/// failure leaves the host's default: it costs CPU, never correctness).
fn job_socket(socket: &TcpStream, limits: &ProxyLimits) {
    let _ = socket.set_nodelay(true);
    buffers(socket, limits.socket_buffer);
    if limits.unpaced_loopback
        && socket
            .peer_addr()
            .is_ok_and(|a| a.ip().to_canonical().is_loopback())
    {
        let _ = socket2::SockRef::from(socket).set_tcp_congestion(UNPACED);
    }
}

fn buffers(socket: &TcpStream, size: Option<usize>) {
    use nix::sys::socket::{setsockopt, sockopt};
    if let Some(size) = size {
        let _ = setsockopt(socket, sockopt::RcvBuf, &size);
        let _ = setsockopt(socket, sockopt::SndBuf, &size);
    }
}

/// Hop-by-hop and proxy headers a forwarded request loses (`upgrade` and
/// `http2-settings` too: a plain request is one request, never a switch
/// to another protocol such as h2c on the same connection).
const DROPPED_HEADERS: &[&str] = &[
    "proxy-authorization",
    "proxy-connection",
    "connection",
    "keep-alive",
    "upgrade",
    "http2-settings",
];

/// A plain HTTP request rewritten for its origin: the path as target, the
/// proxy's headers dropped, `connection: close`. Its `Host` header, when
/// it has one, must name the URL's host and port.
fn origin_request(head: &Head, target: &Target) -> Result<Vec<u8>, Refusal> {
    let authority = match target.port {
        80 => target.host.to_string(),
        port => format!("{}:{port}", target.host),
    };
    // One Host header: a second one (which an origin may read instead)
    // would name a host nobody checked.
    let hosts = head
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("host"))
        .count();
    if hosts > 1 {
        return Err(Refusal::new(
            400,
            "bad_request",
            format!("the request has {hosts} Host headers; it may have one, naming the URL's host `{authority}`"),
        ));
    }
    if let Some(value) = head.header("host") {
        let same = std::str::from_utf8(value)
            .ok()
            .and_then(|v| v.parse::<http::uri::Authority>().ok())
            .is_some_and(|a| {
                Host::parse(a.host()).ok().as_ref() == Some(&target.host)
                    && a.port_u16().unwrap_or(80) == target.port
            });
        if !same {
            return Err(Refusal::new(
                403,
                "host_mismatch",
                format!(
                    "the Host header `{}` is not the URL's host `{authority}`",
                    head::escape(&String::from_utf8_lossy(value))
                ),
            ));
        }
    }
    let mut out = format!(
        "{} {} HTTP/1.{}\r\n",
        head.method, target.path, head.version
    )
    .into_bytes();
    if head.header("host").is_none() {
        out.extend_from_slice(format!("host: {authority}\r\n").as_bytes());
    }
    for (name, value) in &head.headers {
        if DROPPED_HEADERS.iter().any(|d| name.eq_ignore_ascii_case(d)) {
            continue;
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"connection: close\r\n\r\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// The proxy's socket to a job on loopback has no Nagle and sends
    /// with `reno` (the host here defaults to BBR, which paces; so does
    /// any host whose default is not reno); with the option off it keeps
    /// the host's default.
    #[tokio::test]
    async fn a_loopback_jobs_socket_sends_unpaced() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let congestion = |s: &TcpStream| {
            String::from_utf8_lossy(&socket2::SockRef::from(s).tcp_congestion().unwrap())
                .trim_end_matches('\0')
                .to_string()
        };
        let mut got = Vec::new();
        for unpaced_loopback in [true, false] {
            let (_job, proxy_side) = tokio::join!(TcpStream::connect(addr), listener.accept());
            let proxy_side = proxy_side.unwrap().0;
            let default = congestion(&proxy_side);
            let limits = ProxyLimits {
                unpaced_loopback,
                ..ProxyLimits::default()
            };
            job_socket(&proxy_side, &limits);
            got.push((
                proxy_side.nodelay().unwrap(),
                congestion(&proxy_side),
                default,
            ));
        }
        let default = got[1].2.clone();
        eprintln!("the host's default congestion control: {default}");
        assert_eq!(
            got,
            vec![
                (true, "reno".to_string(), default.clone()),
                (true, default.clone(), default),
            ]
        );
    }
}

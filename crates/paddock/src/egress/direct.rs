//! Direct connection attempts: what a job on the `sandbox` rung sent past
//! its egress proxy, as the sandbox helper's watcher reported it
//! (`paddock_sandbox::direct`), turned into refused `EgressRecord`s of
//! rule `direct:<transport>` (`direct:tcp`, `direct:udp`, `direct:icmp`,
//! `direct:ip-proto-N`). The host binds the job's report socket (a Unix
//! datagram socket in the job's `meta/`, outside the sandbox's view)
//! before any command starts; each report is one datagram
//! `paddock-direct/1 <phase> flow <transport> <address> <port>`, `...
//! lookup <name> <type> <server>` (a DNS query, rule `direct:dns`, the
//! name as its host), `... unrecorded <n>` (new destinations past the helper's cap) or `... off
//! <why>` (the watcher could not start). Anything else is ignored, and at
//! most [`MAX_RECORDS`] records are made per job whatever arrives (the
//! socket is the user's: a process of the host's user could write to it).

use std::net::IpAddr;
use std::path::Path;

use paddock_protocol::{EgressPhase, EgressRecord};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::EgressError;

/// The rule of a direct attempt's record, before its transport.
pub const RULE: &str = "direct";
/// Records made per job at most.
pub const MAX_RECORDS: usize = 1024;
/// The longest report read (longer ones are cut, and refused).
const MAX_REPORT: usize = 512;

/// The job's report socket, read until [`DirectReports::finish`].
pub struct DirectReports {
    stop: Option<oneshot::Sender<()>>,
    /// Asks the reader to take in what is queued and say so
    /// ([`DirectReports::taken_in`]).
    ask: mpsc::Sender<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl DirectReports {
    /// Binds the report socket at `path` (any length; one left by an
    /// earlier attempt is replaced) and turns what arrives into records
    /// on `records`.
    pub fn bind(
        path: &Path,
        records: mpsc::Sender<EgressRecord>,
    ) -> Result<DirectReports, EgressError> {
        let failed = |source| EgressError::BindUnix {
            path: path.to_path_buf(),
            source,
        };
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(failed(e)),
            _ => {}
        }
        let std_sock = paddock_sandbox::unix_path::with_short_name(path, |p| {
            std::os::unix::net::UnixDatagram::bind(p)
        })
        .map_err(failed)?;
        std_sock.set_nonblocking(true).map_err(failed)?;
        let sock = tokio::net::UnixDatagram::from_std(std_sock).map_err(failed)?;
        let (stop, stopped) = oneshot::channel();
        let (ask, asked) = mpsc::channel(1);
        let task = tokio::spawn(read(sock, records, stopped, asked));
        Ok(DirectReports {
            stop: Some(stop),
            ask,
            task,
        })
    }

    /// Resolves once what is already queued on the socket is taken in
    /// (its records sent), the socket still read after: when the
    /// commands that could report have ended, everything they reported
    /// is then on its way to the records (a setup's, before its output
    /// is stored: `runner/setup.rs`).
    pub async fn taken_in(&self) {
        let (done, taken) = oneshot::channel();
        if self.ask.send(done).await.is_ok() {
            // An error: the reader ended, having sent what it read.
            let _ = taken.await;
        }
    }

    /// Takes in what is already queued (every command has ended: what
    /// they reported is there), then stops.
    pub async fn finish(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }
}

impl Drop for DirectReports {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn read(
    sock: tokio::net::UnixDatagram,
    records: mpsc::Sender<EgressRecord>,
    mut stopped: oneshot::Receiver<()>,
    mut asked: mpsc::Receiver<oneshot::Sender<()>>,
) {
    let mut buf = vec![0u8; MAX_REPORT];
    let mut made = 0usize;
    loop {
        tokio::select! {
            got = sock.recv(&mut buf) => {
                let Ok(n) = got else { return };
                if let Some(rec) = take(n, &buf, &mut made) {
                    if records.send(rec).await.is_err() {
                        return;
                    }
                }
            }
            Some(done) = asked.recv() => {
                if !queued(&sock, &mut buf, &records, &mut made).await {
                    return;
                }
                let _ = done.send(());
            }
            _ = &mut stopped => break,
        }
    }
    queued(&sock, &mut buf, &records, &mut made).await;
}

/// Sends the records of the reports queued on `sock`; false when the
/// records' receiver is gone. Read with `MSG_DONTWAIT`, not `try_recv`:
/// that answers "would block" without reading while the runtime has not
/// yet seen the socket readable, and what was queued then (the last
/// reports of commands that just ended) was left unread.
async fn queued(
    sock: &tokio::net::UnixDatagram,
    buf: &mut [u8],
    records: &mpsc::Sender<EgressRecord>,
    made: &mut usize,
) -> bool {
    use std::os::fd::AsRawFd as _;
    let no_wait = nix::sys::socket::MsgFlags::MSG_DONTWAIT;
    while let Ok(n) = nix::sys::socket::recv(sock.as_raw_fd(), buf, no_wait) {
        if let Some(rec) = take(n, buf, made) {
            if records.send(rec).await.is_err() {
                return false;
            }
        }
    }
    true
}

/// The record of the report in `buf[..n]`, within the job's bound.
fn take(n: usize, buf: &[u8], made: &mut usize) -> Option<EgressRecord> {
    let rec = parse(buf.get(..n)?)?;
    if *made >= MAX_RECORDS {
        return None;
    }
    *made += 1;
    Some(rec)
}

/// The record one report makes, `None` for what is not a report.
pub fn parse(datagram: &[u8]) -> Option<EgressRecord> {
    let text = std::str::from_utf8(datagram).ok()?;
    let mut words = text.splitn(4, ' ');
    if words.next()? != paddock_sandbox::direct::HEADER {
        return None;
    }
    let phase = match words.next()? {
        "setup" => EgressPhase::Setup,
        "agent" => EgressPhase::Agent,
        _ => return None,
    };
    let kind = words.next()?;
    let rest = words.next()?;
    let refused = |host: String, port: u16, rule: String, reason: String| EgressRecord {
        host,
        port,
        method: None,
        address: None,
        bytes_up: 0,
        bytes_down: 0,
        duration_ms: 0,
        phase,
        allowed: false,
        rule: Some(rule),
        reason: Some(reason),
        credential: None,
        substituted: None,
    };
    match kind {
        "flow" => {
            let mut w = rest.split(' ');
            let transport = w.next()?;
            let addr: IpAddr = w.next()?.parse().ok()?;
            let port: u16 = w.next()?.parse().ok()?;
            if w.next().is_some() || !transport_name(transport) {
                return None;
            }
            let at = match addr {
                IpAddr::V4(a) => format!("{a}:{port}"),
                IpAddr::V6(a) => format!("[{a}]:{port}"),
            };
            let answer = match transport {
                "tcp" => "answered with a TCP reset",
                "udp" => "answered with ICMP port unreachable",
                _ => "dropped",
            };
            let mut rec = refused(
                addr.to_string(),
                port,
                format!("{RULE}:{transport}"),
                format!(
                    "a direct {transport} connection to {at}, not through the egress proxy: nothing leads out of the sandbox but the proxy; {answer}"
                ),
            );
            rec.address = Some(at);
            Some(rec)
        }
        "lookup" => {
            let mut w = rest.split(' ');
            let name = w.next()?;
            let qtype: u16 = w.next()?.parse().ok()?;
            let server: IpAddr = w.next()?.parse().ok()?;
            if w.next().is_some() || !host_name(name) {
                return None;
            }
            let at = match server {
                IpAddr::V4(a) => format!("{a}:53"),
                IpAddr::V6(a) => format!("[{a}]:53"),
            };
            let mut rec = refused(
                name.to_string(),
                53,
                format!("{RULE}:dns"),
                format!(
                    "a direct DNS lookup of {name} ({}) sent to {at}, not through the egress proxy: the proxy resolves the names it is asked to reach, and nothing leads out of the sandbox but the proxy; answered with ICMP port unreachable",
                    record_type(qtype)
                ),
            );
            rec.address = Some(at);
            Some(rec)
        }
        "unrecorded" => {
            let n: u64 = rest.parse().ok()?;
            Some(refused(
                String::new(),
                0,
                format!("{RULE}:unrecorded"),
                format!(
                    "{n} more direct connection attempts to destinations past the first {} of the command were not recorded one by one",
                    paddock_sandbox::direct::MAX_REPORTED
                ),
            ))
        }
        "off" => Some(refused(
            String::new(),
            0,
            format!("{RULE}:off"),
            format!(
                "direct connection attempts are not recorded for this command: the sandbox's watcher could not start ({}); nothing leads out of the sandbox but the proxy either way",
                rest.chars().filter(|c| !c.is_control()).take(300).collect::<String>()
            ),
        )),
        _ => None,
    }
}

/// Whether `name` is a host name as the watcher reports one
/// (`paddock_sandbox::packet::lookup`): lowercase labels of letters,
/// digits, `-` and `_`, 1 to 63 bytes each, at most 253 in all.
fn host_name(name: &str) -> bool {
    name.len() <= paddock_sandbox::packet::MAX_NAME
        && name.split('.').all(|l| {
            (1..=63).contains(&l.len())
                && l.bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'_')
        })
}

/// A DNS record type's name (RFC 3597's `TYPEn` for the rest).
fn record_type(qtype: u16) -> String {
    match qtype {
        1 => "A".into(),
        2 => "NS".into(),
        5 => "CNAME".into(),
        6 => "SOA".into(),
        12 => "PTR".into(),
        15 => "MX".into(),
        16 => "TXT".into(),
        28 => "AAAA".into(),
        33 => "SRV".into(),
        64 => "SVCB".into(),
        65 => "HTTPS".into(),
        255 => "ANY".into(),
        n => format!("TYPE{n}"),
    }
}

/// Whether `t` is a transport the watcher names.
fn transport_name(t: &str) -> bool {
    matches!(t, "tcp" | "udp" | "icmp")
        || t.strip_prefix("ip-proto-")
            .is_some_and(|n| n.parse::<u8>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `taken_in` resolves once the reports already on the socket are
    /// records on the channel, the socket still read after (a report
    /// then is taken in too); on a one-thread runtime nothing reads the
    /// socket unless something waits, so without it the channel would be
    /// empty here.
    #[tokio::test(flavor = "current_thread")]
    async fn reports_queued_are_taken_in_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("direct.sock");
        let (tx, mut rx) = mpsc::channel(16);
        let reports = DirectReports::bind(&path, tx).unwrap();
        let client = std::os::unix::net::UnixDatagram::unbound().unwrap();
        let send = |text: &str| client.send_to(text.as_bytes(), &path).unwrap();
        send("paddock-direct/1 setup flow tcp 10.0.0.1 443");
        send("not a report");
        send("paddock-direct/1 setup flow udp 10.0.0.2 53");
        reports.taken_in().await;
        let mut taken = Vec::new();
        while let Ok(rec) = rx.try_recv() {
            taken.push((rec.host, rec.port, rec.rule));
        }
        send("paddock-direct/1 agent flow tcp 10.0.0.3 80");
        reports.finish().await;
        let after: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|rec| (rec.host, rec.port, rec.rule))
            .collect();
        let rec = |host: &str, port, rule: &str| (host.to_string(), port, Some(rule.to_string()));
        assert_eq!(
            (taken, after),
            (
                vec![
                    rec("10.0.0.1", 443, "direct:tcp"),
                    rec("10.0.0.2", 53, "direct:udp")
                ],
                vec![rec("10.0.0.3", 80, "direct:tcp")]
            )
        );
    }

    #[test]
    fn reports_become_refused_records() {
        let rec = parse(b"paddock-direct/1 agent flow udp 2001:4860:4860::8888 53").unwrap();
        assert_eq!(
            rec,
            EgressRecord {
                host: "2001:4860:4860::8888".into(),
                port: 53,
                method: None,
                address: Some("[2001:4860:4860::8888]:53".into()),
                bytes_up: 0,
                bytes_down: 0,
                duration_ms: 0,
                phase: EgressPhase::Agent,
                allowed: false,
                rule: Some("direct:udp".into()),
                reason: Some("a direct udp connection to [2001:4860:4860::8888]:53, not through the egress proxy: nothing leads out of the sandbox but the proxy; answered with ICMP port unreachable".into()),
                credential: None,
                substituted: None,
            }
        );
        let rec = parse(b"paddock-direct/1 setup lookup pypi.org 28 198.18.0.53").unwrap();
        assert_eq!(
            rec,
            EgressRecord {
                host: "pypi.org".into(),
                port: 53,
                method: None,
                address: Some("198.18.0.53:53".into()),
                bytes_up: 0,
                bytes_down: 0,
                duration_ms: 0,
                phase: EgressPhase::Setup,
                allowed: false,
                rule: Some("direct:dns".into()),
                reason: Some("a direct DNS lookup of pypi.org (AAAA) sent to 198.18.0.53:53, not through the egress proxy: the proxy resolves the names it is asked to reach, and nothing leads out of the sandbox but the proxy; answered with ICMP port unreachable".into()),
                credential: None,
                substituted: None,
            }
        );
        assert_eq!(
            parse(b"paddock-direct/1 agent lookup _x.io 4242 2001:db8::53")
                .and_then(|r| r.reason),
            Some("a direct DNS lookup of _x.io (TYPE4242) sent to [2001:db8::53]:53, not through the egress proxy: the proxy resolves the names it is asked to reach, and nothing leads out of the sandbox but the proxy; answered with ICMP port unreachable".into())
        );
        let rec = parse(b"paddock-direct/1 setup unrecorded 99936").unwrap();
        assert_eq!(
            (rec.host.as_str(), rec.port, rec.phase, rec.rule.as_deref()),
            ("", 0, EgressPhase::Setup, Some("direct:unrecorded"))
        );
    }

    #[test]
    fn a_watcher_that_could_not_start_is_one_record_its_reason_cut_and_without_controls() {
        let why = format!(
            "open /dev/net/tun: \x1b]0;owned\x07No such device\n{}",
            "x".repeat(400)
        );
        let rec = parse(format!("paddock-direct/1 setup off {why}").as_bytes()).unwrap();
        let kept: String = format!(
            "open /dev/net/tun: ]0;ownedNo such device{}",
            "x".repeat(400)
        )
        .chars()
        .take(300)
        .collect();
        assert_eq!(
            rec,
            EgressRecord {
                host: String::new(),
                port: 0,
                method: None,
                address: None,
                bytes_up: 0,
                bytes_down: 0,
                duration_ms: 0,
                phase: EgressPhase::Setup,
                allowed: false,
                rule: Some("direct:off".into()),
                reason: Some(format!("direct connection attempts are not recorded for this command: the sandbox's watcher could not start ({kept}); nothing leads out of the sandbox but the proxy either way")),
                credential: None,
                substituted: None,
            }
        );
    }

    #[test]
    fn anything_else_is_no_record() {
        for junk in [
            &b""[..],
            b"paddock-direct/1",
            b"paddock-direct/2 agent flow tcp 1.2.3.4 80",
            b"paddock-direct/1 other flow tcp 1.2.3.4 80",
            b"paddock-direct/1 agent flow tcp 1.2.3.4 80 extra",
            b"paddock-direct/1 agent flow tcp 1.2.3.4 65536",
            b"paddock-direct/1 agent flow tcp evil.example 80",
            b"paddock-direct/1 agent flow sctp 1.2.3.4 80",
            b"paddock-direct/1 agent flow ip-proto-300 1.2.3.4 0",
            b"paddock-direct/1 agent unrecorded -1",
            b"paddock-direct/1 agent flow tcp 1.2.3.4 \xff",
            b"paddock-direct/1 agent lookup pypi.org 1",
            b"paddock-direct/1 agent lookup pypi.org 1 1.2.3.4 extra",
            b"paddock-direct/1 agent lookup PyPI.org 1 1.2.3.4",
            b"paddock-direct/1 agent lookup pypi..org 1 1.2.3.4",
            b"paddock-direct/1 agent lookup `x`.org 1 1.2.3.4",
            b"paddock-direct/1 agent lookup pypi.org 70000 1.2.3.4",
            b"paddock-direct/1 agent lookup pypi.org 1 resolver",
        ] {
            assert_eq!(parse(junk), None, "{}", String::from_utf8_lossy(junk));
        }
    }
}

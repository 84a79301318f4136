//! The direct-connection watcher: what a job sends past its egress proxy
//! (a client that ignores `HTTPS_PROXY` and connects to an IP literal, a
//! UDP datagram, a DNS query to 8.8.8.8, IPv6) arrives on the helper's TUN
//! device (`tun.rs`, the namespace's default routes) and is put on the
//! record here, never forwarded. One thread of the helper reads the
//! device; for each packet it writes the answer that makes the client
//! fail at once (`packet.rs`: a TCP reset, ICMP port unreachable) and,
//! for a packet that starts a flow to a destination not yet reported,
//! sends the host one report: `paddock-direct/1 <tag> flow <transport>
//! <address> <port>` (a datagram on the job's report socket, `tag` the
//! runner's name for the command: its phase), or for a DNS query to port
//! 53 the name it asks for, once per name: `... lookup <name> <type>
//! <server>` (`packet::lookup`). At most [`MAX_REPORTED`]
//! destinations are reported per sandboxed command; further new ones are
//! counted and the count is reported once when the command ended
//! (`unrecorded <n>`), so a flood of packets to ever new destinations
//! costs the store a fixed number of rows. A device that cannot be made
//! is reported too (`off <why>`), and the job runs without it (as before
//! the watcher: nothing leads out, nothing is recorded).
//!
//! The packets are the job's, hostile: `packet.rs` parses them within
//! their bytes. The device's queue (500 packets) bounds what waits for
//! this thread; what the kernel drops when the job sends faster is
//! neither answered nor counted. The thread runs outside the job's cgroup
//! and costs one read and at most one write per packet; the memory it
//! keeps is the reported destinations (at most [`MAX_REPORTED`]) and one
//! 64 KiB buffer.

use std::collections::HashSet;
use std::net::IpAddr;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::packet::{self, Transport};

/// The first word of every report.
pub const HEADER: &str = "paddock-direct/1";
/// Destinations reported per sandboxed command at most.
pub const MAX_REPORTED: usize = 64;
/// How long a report may wait for room in the host's socket (the host
/// reads as they come; a host that stopped reading loses them).
const SEND_WAIT: Duration = Duration::from_secs(2);

/// What was reported once: a flow's destination, or a DNS query's name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Seen {
    Flow(Transport, IpAddr, u16),
    Name(String),
}

/// The helper's end of the job's report socket.
pub struct Reporter {
    sock: UnixDatagram,
    tag: String,
}

impl Reporter {
    /// Connects to the host's report socket at `path` (any length); `tag`
    /// names the command's phase in every report.
    pub fn connect(path: &Path, tag: &str) -> std::io::Result<Reporter> {
        let sock = UnixDatagram::unbound()?;
        crate::unix_path::with_short_name(path, |p| sock.connect(p))?;
        sock.set_write_timeout(Some(SEND_WAIT))?;
        Ok(Reporter {
            sock,
            tag: tag
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                .take(32)
                .collect(),
        })
    }

    fn send(&self, what: &str) {
        let line = format!("{HEADER} {} {what}", self.tag);
        // A lost report is lost; the watcher goes on.
        let _ = self.sock.send(line.as_bytes());
    }

    /// Says the watcher could not start, and why (one line, cut).
    pub fn off(&self, why: &str) {
        let why: String = why
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(300)
            .collect();
        self.send(&format!("off {why}"));
    }
}

/// What the watcher counted without reporting, read when the command ended.
#[derive(Default)]
pub struct Unreported {
    attempts: AtomicU64,
}

impl Unreported {
    /// Reports the count once (nothing when it is 0).
    pub fn finish(&self, reporter: &Reporter) {
        let n = self.attempts.load(Ordering::SeqCst);
        if n > 0 {
            reporter.send(&format!("unrecorded {n}"));
        }
    }
}

/// Reads the device `tun` on a thread of its own until the process exits
/// (module text).
pub fn serve(tun: OwnedFd, reporter: Option<Arc<Reporter>>, unreported: Arc<Unreported>) {
    std::thread::spawn(move || {
        let mut tun = std::fs::File::from(tun);
        let mut buf = vec![0u8; 65536];
        let mut seen: HashSet<Seen> = HashSet::new();
        loop {
            let n = match std::io::Read::read(&mut tun, &mut buf) {
                Ok(0) => return,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            let Some(pkt) = buf.get(..n) else { continue };
            if let Some(answer) = packet::answer(pkt) {
                let _ = std::io::Write::write(&mut tun, &answer);
            }
            let Some(p) = packet::classify(pkt).filter(|p| p.starts_flow) else {
                continue;
            };
            // A DNS query is the name it asks for (whatever server it
            // was sent to), else the flow's destination.
            let (key, report) = match packet::lookup(pkt) {
                Some(l) => (
                    Seen::Name(l.name.clone()),
                    format!("lookup {} {} {}", l.name, l.qtype, l.server),
                ),
                None => (
                    Seen::Flow(p.transport, p.dst, p.port),
                    format!("flow {} {} {}", p.transport.name(), p.dst, p.port),
                ),
            };
            if seen.contains(&key) {
                continue;
            }
            if seen.len() >= MAX_REPORTED {
                unreported.attempts.fetch_add(1, Ordering::SeqCst);
                continue;
            }
            seen.insert(key);
            if let Some(r) = &reporter {
                r.send(&report);
            }
        }
    });
}

//! The egress proxy's records as its tests expect them, built in one
//! place: [`egress_record`] is an allowed connection of the agent phase
//! with nothing else known (no method, address, bytes, rule, reason or
//! credential), which a test completes with struct update syntax to the
//! whole value it expects; [`next_record`] takes the proxy's next record
//! off its channel, its duration (which no test can predict) zeroed.

use std::time::Duration;

use paddock_protocol::{EgressPhase, EgressRecord};
use tokio::sync::mpsc;

/// An allowed connection to `host:port` in the agent phase, every other
/// field empty or zero.
pub fn egress_record(host: &str, port: u16) -> EgressRecord {
    EgressRecord {
        host: host.into(),
        port,
        method: None,
        address: None,
        bytes_up: 0,
        bytes_down: 0,
        duration_ms: 0,
        phase: EgressPhase::Agent,
        allowed: true,
        rule: None,
        reason: None,
        credential: None,
        substituted: None,
    }
}

/// The next record the proxy sends on `records` (panics after `wait`),
/// with `duration_ms` zeroed.
pub async fn next_record(
    records: &mut mpsc::Receiver<EgressRecord>,
    wait: Duration,
) -> EgressRecord {
    let record = tokio::time::timeout(wait, records.recv())
        .await
        .expect("a record")
        .expect("the channel");
    EgressRecord {
        duration_ms: 0,
        ..record
    }
}

/// Whether `r` is a job's own DNS query, on the record as a direct
/// attempt (`direct:dns`, or `direct:udp` to port 53 for one that is no
/// plain query; docs/egress.md "Direct connections"). Real clients make
/// them or not depending on the host's `/etc/hosts` and `nsswitch.conf`
/// (git looks up `localhost`'s IPv6 address, which a hosts file without
/// a `::1` line sends to the nameserver, and the sandbox's host name for
/// its default e-mail domain), so tests of what went through the proxy
/// leave them out; `tests/it/egress_direct.rs` tests them.
pub fn is_own_dns(r: &EgressRecord) -> bool {
    matches!(r.rule.as_deref(), Some("direct:udp" | "direct:dns")) && r.port == 53
}

//! The IP packets a job sends to its network namespace's default route
//! (the direct-connection watcher's TUN device, `direct.rs`): what each
//! one asks for, and the answer that makes its client fail at once. Every
//! byte comes from the job and is hostile: nothing here trusts a length
//! field beyond the bytes read, indexes without a bound, or allocates
//! more than one answer of at most [`MAX_ANSWER`] bytes.
//!
//! A packet starts a *flow* when it is a TCP segment with SYN and without
//! ACK, a UDP datagram, or an ICMP/ICMPv6 echo request (ping); a packet
//! of another IP protocol (SCTP, GRE, ...) is one too, named by its
//! number. What the kernel sends by itself on the device (IPv6 neighbour
//! discovery, MLD, IGMP), TCP segments that start nothing, fragments after
//! the first (no transport header) and anything that does not parse are
//! no flow. The answer: a TCP reset to a segment that is not one (the
//! client's `connect` fails with "connection refused"), an ICMP or ICMPv6
//! "port unreachable" to a UDP datagram (a connected socket's next call
//! fails the same way), nothing to the rest.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The transport a flow used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    Tcp,
    Udp,
    /// An ICMP or ICMPv6 echo request.
    Icmp,
    /// Another IP protocol, by its number.
    Other(u8),
}

impl Transport {
    /// Its name in a report (`tcp`, `udp`, `icmp`, `ip-proto-N`).
    pub fn name(&self) -> String {
        match self {
            Transport::Tcp => "tcp".into(),
            Transport::Udp => "udp".into(),
            Transport::Icmp => "icmp".into(),
            Transport::Other(n) => format!("ip-proto-{n}"),
        }
    }
}

/// What one packet asked for: its transport, destination address and
/// port (0 without ports), and whether it starts a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    pub transport: Transport,
    pub dst: IpAddr,
    pub port: u16,
    /// A flow's first packet (a SYN, a datagram, an echo request, another
    /// protocol's packet), as opposed to a later TCP segment.
    pub starts_flow: bool,
}

/// The longest answer built (an ICMP error quotes at most this much of
/// the packet it answers, within IPv6's minimum MTU).
pub const MAX_ANSWER: usize = 1280;

const TCP: u8 = 6;
const UDP: u8 = 17;
const ICMP: u8 = 1;
const IGMP: u8 = 2;
const ICMPV6: u8 = 58;
/// IPv6 extension headers walked to find the transport.
const HOP_BY_HOP: u8 = 0;
const ROUTING: u8 = 43;
const FRAGMENT: u8 = 44;
const DEST_OPTS: u8 = 60;
const NO_NEXT: u8 = 59;
/// Extension headers walked at most (more is no flow).
const MAX_EXTENSIONS: usize = 8;

const TCP_FIN: u8 = 0x01;
const TCP_SYN: u8 = 0x02;
const TCP_RST: u8 = 0x04;
const TCP_ACK: u8 = 0x10;

/// A parsed IP packet: its addresses, protocol and transport bytes.
struct Ip<'a> {
    src: IpAddr,
    dst: IpAddr,
    proto: u8,
    /// The whole packet as the header's length says (the bytes after it
    /// ignored).
    whole: &'a [u8],
    /// The transport header and payload.
    transport: &'a [u8],
    /// A later fragment (no transport header in it).
    later_fragment: bool,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes([
        *b.get(at)?,
        *b.get(at + 1)?,
        *b.get(at + 2)?,
        *b.get(at + 3)?,
    ]))
}

fn v4(b: &[u8], at: usize) -> Option<Ipv4Addr> {
    let o: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
    Some(Ipv4Addr::from(o))
}

fn v6(b: &[u8], at: usize) -> Option<Ipv6Addr> {
    let o: [u8; 16] = b.get(at..at + 16)?.try_into().ok()?;
    Some(Ipv6Addr::from(o))
}

fn parse(b: &[u8]) -> Option<Ip<'_>> {
    match b.first()? >> 4 {
        4 => parse_v4(b),
        6 => parse_v6(b),
        _ => None,
    }
}

fn parse_v4(b: &[u8]) -> Option<Ip<'_>> {
    let ihl = usize::from(b.first()? & 0x0f) * 4;
    let total = usize::from(be16(b, 2)?);
    if ihl < 20 || total < ihl || total > b.len() {
        return None;
    }
    let whole = b.get(..total)?;
    let offset = be16(b, 6)? & 0x1fff;
    Some(Ip {
        src: IpAddr::V4(v4(b, 12)?),
        dst: IpAddr::V4(v4(b, 16)?),
        proto: *b.get(9)?,
        whole,
        transport: whole.get(ihl..)?,
        later_fragment: offset != 0,
    })
}

fn parse_v6(b: &[u8]) -> Option<Ip<'_>> {
    let payload = usize::from(be16(b, 4)?);
    let total = 40usize.checked_add(payload)?;
    if total > b.len() {
        return None;
    }
    let whole = b.get(..total)?;
    let mut next = *b.get(6)?;
    let mut at = 40usize;
    let mut later_fragment = false;
    for _ in 0..MAX_EXTENSIONS {
        match next {
            HOP_BY_HOP | ROUTING | DEST_OPTS => {
                let len = (usize::from(*whole.get(at + 1)?) + 1) * 8;
                next = *whole.get(at)?;
                at = at.checked_add(len)?;
            }
            FRAGMENT => {
                let offset = be16(whole, at + 2)? >> 3;
                later_fragment |= offset != 0;
                next = *whole.get(at)?;
                at = at.checked_add(8)?;
            }
            NO_NEXT => return None,
            _ => {
                return Some(Ip {
                    src: IpAddr::V6(v6(b, 8)?),
                    dst: IpAddr::V6(v6(b, 24)?),
                    proto: next,
                    whole,
                    transport: whole.get(at..)?,
                    later_fragment,
                })
            }
        }
    }
    None
}

/// What `b` asks for; `None` for what is no flow's packet (module text).
pub fn classify(b: &[u8]) -> Option<Packet> {
    let ip = parse(b)?;
    if ip.later_fragment {
        return None;
    }
    let t = ip.transport;
    let (transport, port, starts_flow) = match ip.proto {
        TCP => {
            let flags = *t.get(13)?;
            let syn = flags & TCP_SYN != 0 && flags & TCP_ACK == 0;
            (Transport::Tcp, be16(t, 2)?, syn)
        }
        UDP => (Transport::Udp, be16(t, 2)?, true),
        // Echo requests only: the rest is the kernel's own (errors,
        // neighbour discovery, MLD).
        ICMP if *t.first()? == 8 => (Transport::Icmp, 0, true),
        ICMPV6 if *t.first()? == 128 => (Transport::Icmp, 0, true),
        ICMP | ICMPV6 | IGMP => return None,
        other => (Transport::Other(other), 0, true),
    };
    Some(Packet {
        transport,
        dst: ip.dst,
        port,
        starts_flow,
    })
}

/// A DNS query the job sent past its proxy: the name asked for and the
/// record type, as the packet's first question says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    /// Lowercased, dot-separated, without the root's final dot.
    pub name: String,
    /// The question's type (1 = A, 28 = AAAA, 65 = HTTPS, ...).
    pub qtype: u16,
    /// The server it was sent to.
    pub server: IpAddr,
}

/// The DNS port.
pub const DNS: u16 = 53;
/// A name's longest text form (RFC 1035: 255 octets on the wire).
pub const MAX_NAME: usize = 253;

/// The lookup a UDP datagram to port 53 asks for: a standard query (QR
/// clear, opcode 0) with at least one question whose name is plain
/// labels of letters, digits, `-` and `_` (no compression pointer, no
/// other byte: what is not a host name is no lookup, and the datagram is
/// then reported as the UDP flow it is). Read within the datagram's bytes
/// like the rest of this module; one question's name is all that is read
/// of a message (a DNS library would parse answers and compression this
/// never needs, from a hostile sender).
pub fn lookup(b: &[u8]) -> Option<Lookup> {
    let ip = parse(b)?;
    if ip.later_fragment || ip.proto != UDP || be16(ip.transport, 2)? != DNS {
        return None;
    }
    let len = usize::from(be16(ip.transport, 4)?);
    let dns = ip.transport.get(8..len.min(ip.transport.len()))?;
    let flags = be16(dns, 2)?;
    if flags & 0x8000 != 0 || (flags >> 11) & 0x0f != 0 || be16(dns, 4)? == 0 {
        return None;
    }
    let mut at = 12usize;
    let mut name = String::new();
    loop {
        let label = usize::from(*dns.get(at)?);
        at += 1;
        if label == 0 {
            break;
        }
        if label > 63 {
            return None;
        }
        let bytes = dns.get(at..at + label)?;
        if !bytes
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_')
        {
            return None;
        }
        if !name.is_empty() {
            name.push('.');
        }
        name.extend(bytes.iter().map(|c| char::from(c.to_ascii_lowercase())));
        if name.len() > MAX_NAME {
            return None;
        }
        at += label;
    }
    if name.is_empty() {
        return None;
    }
    Some(Lookup {
        name,
        qtype: be16(dns, at)?,
        server: ip.dst,
    })
}

/// The answer to `b` that makes its client fail now, or `None` (module
/// text).
pub fn answer(b: &[u8]) -> Option<Vec<u8>> {
    let ip = parse(b)?;
    if ip.later_fragment {
        return None;
    }
    match ip.proto {
        TCP => reset(&ip),
        UDP => unreachable(&ip),
        _ => None,
    }
}

/// A TCP reset from the segment's destination (RFC 9293 3.10.7.1: to a
/// segment with ACK, `seq` is its ack number; else `ack` is its sequence
/// number plus its length, SYN and FIN counted).
fn reset(ip: &Ip<'_>) -> Option<Vec<u8>> {
    let t = ip.transport;
    let flags = *t.get(13)?;
    if flags & TCP_RST != 0 {
        return None;
    }
    let data_offset = usize::from(t.get(12)? >> 4) * 4;
    if data_offset < 20 || data_offset > t.len() {
        return None;
    }
    let (sport, dport) = (be16(t, 0)?, be16(t, 2)?);
    let seq = be32(t, 4)?;
    let ack_in = be32(t, 8)?;
    let len = u32::try_from(t.len() - data_offset).ok()?
        + u32::from(flags & TCP_SYN != 0)
        + u32::from(flags & TCP_FIN != 0);
    let (seq_out, ack_out, flags_out) = if flags & TCP_ACK != 0 {
        (ack_in, 0, TCP_RST)
    } else {
        (0, seq.wrapping_add(len), TCP_RST | TCP_ACK)
    };
    let mut tcp = vec![0u8; 20];
    tcp[0..2].copy_from_slice(&dport.to_be_bytes());
    tcp[2..4].copy_from_slice(&sport.to_be_bytes());
    tcp[4..8].copy_from_slice(&seq_out.to_be_bytes());
    tcp[8..12].copy_from_slice(&ack_out.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = flags_out;
    let sum = checksum(&pseudo(ip.dst, ip.src, TCP, tcp.len())?, &tcp);
    tcp[16..18].copy_from_slice(&sum.to_be_bytes());
    wrap(ip.dst, ip.src, TCP, &tcp)
}

/// An ICMP (or ICMPv6) "port unreachable" from the datagram's destination,
/// quoting as much of it as fits [`MAX_ANSWER`].
fn unreachable(ip: &Ip<'_>) -> Option<Vec<u8>> {
    let (header, proto, kind, code) = match ip.dst {
        IpAddr::V4(_) => (20, ICMP, 3u8, 3u8),
        IpAddr::V6(_) => (40, ICMPV6, 1u8, 4u8),
    };
    let quoted = ip.whole.len().min(MAX_ANSWER - header - 8);
    let mut icmp = vec![0u8; 8];
    icmp[0] = kind;
    icmp[1] = code;
    icmp.extend_from_slice(ip.whole.get(..quoted)?);
    let sum = match ip.dst {
        IpAddr::V4(_) => checksum(&[], &icmp),
        IpAddr::V6(_) => checksum(&pseudo(ip.dst, ip.src, ICMPV6, icmp.len())?, &icmp),
    };
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    wrap(ip.dst, ip.src, proto, &icmp)
}

/// The pseudo-header of a TCP, UDP or ICMPv6 checksum.
fn pseudo(src: IpAddr, dst: IpAddr, proto: u8, len: usize) -> Option<Vec<u8>> {
    let mut p = Vec::with_capacity(40);
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            p.extend_from_slice(&s.octets());
            p.extend_from_slice(&d.octets());
            p.extend_from_slice(&[0, proto]);
            p.extend_from_slice(&u16::try_from(len).ok()?.to_be_bytes());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            p.extend_from_slice(&s.octets());
            p.extend_from_slice(&d.octets());
            p.extend_from_slice(&u32::try_from(len).ok()?.to_be_bytes());
            p.extend_from_slice(&[0, 0, 0, proto]);
        }
        _ => return None,
    }
    Some(p)
}

/// An IP packet from `src` to `dst` carrying `body`.
fn wrap(src: IpAddr, dst: IpAddr, proto: u8, body: &[u8]) -> Option<Vec<u8>> {
    let mut out = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut h = vec![0u8; 20];
            h[0] = 0x45;
            h[2..4].copy_from_slice(&u16::try_from(20 + body.len()).ok()?.to_be_bytes());
            h[8] = 64;
            h[9] = proto;
            h[12..16].copy_from_slice(&s.octets());
            h[16..20].copy_from_slice(&d.octets());
            let sum = checksum(&[], &h);
            h[10..12].copy_from_slice(&sum.to_be_bytes());
            h
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let mut h = vec![0u8; 40];
            h[0] = 0x60;
            h[4..6].copy_from_slice(&u16::try_from(body.len()).ok()?.to_be_bytes());
            h[6] = proto;
            h[7] = 64;
            h[8..24].copy_from_slice(&s.octets());
            h[24..40].copy_from_slice(&d.octets());
            h
        }
        _ => return None,
    };
    out.extend_from_slice(body);
    Some(out)
}

/// The Internet checksum (RFC 1071) of `a` then `b` (`a` of even length).
fn checksum(a: &[u8], b: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for part in [a, b] {
        let mut chunks = part.chunks_exact(2);
        for c in &mut chunks {
            sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
        }
        if let [last] = chunks.remainder() {
            sum += u32::from(u16::from_be_bytes([*last, 0]));
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn syn_v4(dst: [u8; 4], dport: u16) -> Vec<u8> {
        let mut tcp = vec![0u8; 20];
        tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
        tcp[2..4].copy_from_slice(&dport.to_be_bytes());
        tcp[4..8].copy_from_slice(&1000u32.to_be_bytes());
        tcp[12] = 5 << 4;
        tcp[13] = TCP_SYN;
        wrap(
            IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
            IpAddr::V4(Ipv4Addr::from(dst)),
            TCP,
            &tcp,
        )
        .unwrap()
    }

    fn udp_v6(dst: Ipv6Addr, dport: u16) -> Vec<u8> {
        let mut udp = vec![0u8; 8];
        udp[0..2].copy_from_slice(&5353u16.to_be_bytes());
        udp[2..4].copy_from_slice(&dport.to_be_bytes());
        udp[4..6].copy_from_slice(&12u16.to_be_bytes());
        udp.extend_from_slice(b"dnsq");
        wrap(
            IpAddr::V6("fd00:7061:6464::1".parse().unwrap()),
            IpAddr::V6(dst),
            UDP,
            &udp,
        )
        .unwrap()
    }

    /// A DNS query for `name` (labels as given) of type `qtype` over
    /// IPv4 to `dst`:53, `flags` in its header.
    fn query_v4(dst: [u8; 4], labels: &[&[u8]], qtype: u16, flags: u16) -> Vec<u8> {
        let mut dns = vec![0u8; 12];
        dns[0..2].copy_from_slice(&0x1234u16.to_be_bytes());
        dns[2..4].copy_from_slice(&flags.to_be_bytes());
        dns[4..6].copy_from_slice(&1u16.to_be_bytes());
        for l in labels {
            dns.push(l.len() as u8);
            dns.extend_from_slice(l);
        }
        dns.push(0);
        dns.extend_from_slice(&qtype.to_be_bytes());
        dns.extend_from_slice(&1u16.to_be_bytes());
        let mut udp = vec![0u8; 8];
        udp[0..2].copy_from_slice(&40001u16.to_be_bytes());
        udp[2..4].copy_from_slice(&DNS.to_be_bytes());
        udp[4..6].copy_from_slice(&((8 + dns.len()) as u16).to_be_bytes());
        udp.extend_from_slice(&dns);
        wrap(
            IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
            IpAddr::V4(Ipv4Addr::from(dst)),
            UDP,
            &udp,
        )
        .unwrap()
    }

    /// A query's first question is read as a lowercased name, its type
    /// and server; what is not a standard query for a host name (an
    /// answer, another opcode, a compression pointer, a byte outside
    /// letters, digits, `-` and `_`, the root, an overlong name, a cut
    /// datagram, another port) is no lookup.
    #[test]
    fn a_dns_query_names_what_it_looks_up() {
        assert_eq!(
            lookup(&query_v4([10, 0, 0, 2], &[b"PyPI", b"org"], 28, 0x0100)),
            Some(Lookup {
                name: "pypi.org".into(),
                qtype: 28,
                server: "10.0.0.2".parse().unwrap(),
            })
        );
        assert_eq!(
            lookup(&query_v4([10, 0, 0, 2], &[b"_https", b"x-y", b"io"], 65, 0)).map(|l| l.name),
            Some("_https.x-y.io".into())
        );
        let long: &[u8] = &[b'a'; 63];
        let no = [
            query_v4([10, 0, 0, 2], &[b"pypi", b"org"], 1, 0x8180),
            query_v4([10, 0, 0, 2], &[b"pypi", b"org"], 1, 0x2800),
            query_v4([10, 0, 0, 2], &[b"a b", b"org"], 1, 0),
            query_v4([10, 0, 0, 2], &[b"`x`", b"org"], 1, 0),
            query_v4([10, 0, 0, 2], &[b"\x1b[31m"], 1, 0),
            query_v4([10, 0, 0, 2], &[], 1, 0),
            query_v4([10, 0, 0, 2], &[long; 5], 1, 0),
            udp_v6("2001:db8::1".parse().unwrap(), 53),
        ];
        for (i, q) in no.iter().enumerate() {
            assert_eq!(lookup(q), None, "case {i}");
        }
        let mut pointer = query_v4([10, 0, 0, 2], &[b"pypi", b"org"], 1, 0);
        pointer[20 + 8 + 12] = 0xc0;
        assert_eq!(lookup(&pointer), None);
        let whole = query_v4([10, 0, 0, 2], &[b"pypi", b"org"], 1, 0);
        for cut in 0..whole.len() {
            let _ = lookup(&whole[..cut]);
        }
        // Not to port 53: the UDP flow it is, no lookup.
        let mut elsewhere = whole.clone();
        elsewhere[22..24].copy_from_slice(&5353u16.to_be_bytes());
        assert_eq!(lookup(&elsewhere), None);
    }

    #[test]
    fn a_syn_is_a_tcp_flow_answered_by_a_reset() {
        let syn = syn_v4([8, 8, 8, 8], 443);
        assert_eq!(
            classify(&syn),
            Some(Packet {
                transport: Transport::Tcp,
                dst: "8.8.8.8".parse().unwrap(),
                port: 443,
                starts_flow: true,
            })
        );
        let rst = answer(&syn).unwrap();
        // From 8.8.8.8:443 to the job's 40000, RST|ACK, ack = seq + 1,
        // both checksums valid (a valid sum sums to zero).
        assert_eq!(&rst[12..20], &[8, 8, 8, 8, 198, 18, 0, 1]);
        assert_eq!(checksum(&[], &rst[..20]), 0);
        let tcp = &rst[20..];
        assert_eq!(be16(tcp, 0), Some(443));
        assert_eq!(be16(tcp, 2), Some(40000));
        assert_eq!(be32(tcp, 8), Some(1001));
        assert_eq!(tcp[13], TCP_RST | TCP_ACK);
        let p = pseudo(
            "8.8.8.8".parse().unwrap(),
            "198.18.0.1".parse().unwrap(),
            TCP,
            20,
        )
        .unwrap();
        assert_eq!(checksum(&p, tcp), 0);
        // A reset starts nothing and gets no answer.
        assert_eq!(classify(&rst).map(|p| p.starts_flow), Some(false));
        assert_eq!(answer(&rst), None);
    }

    #[test]
    fn a_udp_datagram_over_ipv6_gets_port_unreachable() {
        let dst: Ipv6Addr = "2001:4860:4860::8888".parse().unwrap();
        let q = udp_v6(dst, 53);
        assert_eq!(
            classify(&q),
            Some(Packet {
                transport: Transport::Udp,
                dst: IpAddr::V6(dst),
                port: 53,
                starts_flow: true,
            })
        );
        let a = answer(&q).unwrap();
        assert_eq!(a[6], ICMPV6);
        assert_eq!(&a[40..42], &[1, 4]);
        // The whole datagram quoted after the 8 bytes of ICMPv6 header.
        assert_eq!(&a[48..], &q[..]);
        let p = pseudo(
            IpAddr::V6(dst),
            "fd00:7061:6464::1".parse().unwrap(),
            ICMPV6,
            a.len() - 40,
        )
        .unwrap();
        assert_eq!(checksum(&p, &a[40..]), 0);
        // The answer, an ICMPv6 error, is no flow and gets no answer.
        assert_eq!(classify(&a), None);
        assert_eq!(answer(&a), None);
    }

    /// Every truncation, every single-byte corruption of the length and
    /// header fields, and random bytes: nothing panics or reads outside
    /// the packet, and an answer never exceeds its bound.
    #[test]
    fn hostile_packets_never_panic() {
        let packets = [
            syn_v4([1, 2, 3, 4], 80),
            udp_v6("2001:db8::1".parse().unwrap(), 53),
        ];
        for p in &packets {
            for n in 0..=p.len() {
                let _ = classify(&p[..n]);
                let _ = answer(&p[..n]);
            }
            for i in 0..p.len().min(60) {
                for v in [0u8, 1, 0x0f, 0x40, 0x4f, 0x60, 0x80, 0xff] {
                    let mut q = p.clone();
                    q[i] = v;
                    let _ = classify(&q);
                    if let Some(a) = answer(&q) {
                        assert!(a.len() <= MAX_ANSWER, "{}", a.len());
                    }
                }
            }
        }
        let mut x: u32 = 0x1234_5678;
        for _ in 0..20_000 {
            let mut q = Vec::new();
            let len = (x % 200) as usize;
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                q.push(x as u8);
            }
            if let Some(b) = q.first_mut() {
                *b = (*b & 0x0f) | if x & 1 == 0 { 0x40 } else { 0x60 };
            }
            let _ = classify(&q);
            let _ = answer(&q);
        }
    }

    /// A later fragment is no flow; an IPv6 chain of extension headers
    /// longer than the bound is none either.
    #[test]
    fn later_fragments_and_long_extension_chains_are_no_flow() {
        let mut frag = syn_v4([8, 8, 8, 8], 443);
        frag[6..8].copy_from_slice(&100u16.to_be_bytes());
        assert_eq!(classify(&frag), None);
        assert_eq!(answer(&frag), None);
        let mut body = Vec::new();
        for _ in 0..9 {
            body.extend_from_slice(&[DEST_OPTS, 0, 0, 0, 0, 0, 0, 0]);
        }
        body.extend_from_slice(&[0u8; 8]);
        let pkt = wrap(
            IpAddr::V6("fd00::1".parse().unwrap()),
            IpAddr::V6("2001:db8::1".parse().unwrap()),
            DEST_OPTS,
            &body,
        )
        .unwrap();
        assert_eq!(classify(&pkt), None);
    }
}

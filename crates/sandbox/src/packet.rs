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
//! fails the same way), nothing to the rest. The IP, TCP, UDP and ICMP
//! headers are read and written with etherparse; the one DNS question
//! [`lookup`] reads is read here (see there why).

use std::net::IpAddr;

use etherparse::{
    icmpv4, icmpv6, Icmpv4Slice, Icmpv4Type, Icmpv6Slice, Icmpv6Type, IpHeaders, IpNumber, IpSlice,
    Ipv6ExtensionSlice, Ipv6Header, PacketBuilder, PacketBuilderStep, TcpHeaderSlice,
    UdpHeaderSlice, UdpSlice,
};

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

/// IPv6 extension headers walked to find the transport, at most (more is
/// no flow).
const MAX_EXTENSIONS: usize = 8;

/// The hop limit (TTL) of the answers.
const HOPS: u8 = 64;

/// A parsed IP packet: its addresses, protocol and transport bytes.
struct Ip<'a> {
    src: IpAddr,
    dst: IpAddr,
    proto: IpNumber,
    /// The whole packet as the header's length says (the bytes after it
    /// ignored).
    whole: &'a [u8],
    /// The transport header and payload.
    transport: &'a [u8],
    /// A later fragment (no transport header in it).
    later_fragment: bool,
}

/// `b` read as an IPv4 or IPv6 packet by etherparse, which checks every
/// length against the bytes there are and walks IPv6's extension headers
/// (at most [`MAX_EXTENSIONS`] of them are taken here).
fn parse(b: &[u8]) -> Option<Ip<'_>> {
    let ip = IpSlice::from_slice(b).ok()?;
    let payload = ip.payload();
    let (whole, later_fragment) = match &ip {
        IpSlice::Ipv4(v4) => {
            let header = v4.header();
            (
                b.get(..usize::from(header.total_len()))?,
                header.fragments_offset().value() != 0,
            )
        }
        IpSlice::Ipv6(v6) => {
            let mut later = false;
            for (n, ext) in v6.extensions().clone().into_iter().enumerate() {
                if n >= MAX_EXTENSIONS {
                    return None;
                }
                if let Ipv6ExtensionSlice::Fragment(f) = ext {
                    later |= f.fragment_offset().value() != 0;
                }
            }
            let len = Ipv6Header::LEN
                .checked_add(v6.extensions().slice().len())?
                .checked_add(payload.payload.len())?;
            (b.get(..len)?, later)
        }
    };
    if payload.ip_number == IpNumber::IPV6_NO_NEXT_HEADER {
        return None;
    }
    Some(Ip {
        src: ip.source_addr(),
        dst: ip.destination_addr(),
        proto: payload.ip_number,
        whole,
        transport: payload.payload,
        later_fragment,
    })
}

/// What `b` asks for; `None` for what is no flow's packet (module text).
pub fn classify(b: &[u8]) -> Option<Packet> {
    let ip = parse(b)?;
    if ip.later_fragment {
        return None;
    }
    let t = ip.transport;
    let (transport, port, starts_flow) = match ip.proto {
        IpNumber::TCP => {
            let tcp = TcpHeaderSlice::from_slice(t).ok()?;
            (
                Transport::Tcp,
                tcp.destination_port(),
                tcp.syn() && !tcp.ack(),
            )
        }
        IpNumber::UDP => {
            let udp = UdpHeaderSlice::from_slice(t).ok()?;
            (Transport::Udp, udp.destination_port(), true)
        }
        // Echo requests only: the rest is the kernel's own (errors,
        // neighbour discovery, MLD).
        IpNumber::ICMP => match Icmpv4Slice::from_slice(t).ok()?.icmp_type() {
            Icmpv4Type::EchoRequest(_) => (Transport::Icmp, 0, true),
            _ => return None,
        },
        IpNumber::IPV6_ICMP => match Icmpv6Slice::from_slice(t).ok()?.icmp_type() {
            Icmpv6Type::EchoRequest(_) => (Transport::Icmp, 0, true),
            _ => return None,
        },
        IpNumber::IGMP => return None,
        other => (Transport::Other(other.0), 0, true),
    };
    Some(Packet {
        transport,
        dst: ip.dst,
        port,
        starts_flow,
    })
}

/// The big-endian `u16` at `at` in `b`, if there.
fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([
        *b.get(at)?,
        *b.get(at.checked_add(1)?)?,
    ]))
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
    if ip.later_fragment || ip.proto != IpNumber::UDP {
        return None;
    }
    let udp = UdpSlice::from_slice_lax(ip.transport).ok()?;
    if udp.destination_port() != DNS {
        return None;
    }
    let dns = udp.payload();
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
        IpNumber::TCP => reset(&ip),
        IpNumber::UDP => unreachable(&ip),
        _ => None,
    }
}

/// A packet builder from `src` to `dst` (both of one IP version).
fn from_to(src: IpAddr, dst: IpAddr) -> Option<PacketBuilderStep<IpHeaders>> {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => Some(PacketBuilder::ipv4(s.octets(), d.octets(), HOPS)),
        (IpAddr::V6(s), IpAddr::V6(d)) => Some(PacketBuilder::ipv6(s.octets(), d.octets(), HOPS)),
        _ => None,
    }
}

/// A TCP reset from the segment's destination (RFC 9293 3.10.7.1: to a
/// segment with ACK, `seq` is its ack number; else `ack` is its sequence
/// number plus its length, SYN and FIN counted).
fn reset(ip: &Ip<'_>) -> Option<Vec<u8>> {
    let tcp = TcpHeaderSlice::from_slice(ip.transport).ok()?;
    if tcp.rst() {
        return None;
    }
    let data = ip.transport.len().checked_sub(tcp.slice().len())?;
    let len = u32::try_from(data).ok()? + u32::from(tcp.syn()) + u32::from(tcp.fin());
    let back = from_to(ip.dst, ip.src)?;
    let (sport, dport) = (tcp.destination_port(), tcp.source_port());
    let segment = if tcp.ack() {
        back.tcp(sport, dport, tcp.acknowledgment_number(), 0).rst()
    } else {
        back.tcp(sport, dport, 0, 0)
            .rst()
            .ack(tcp.sequence_number().wrapping_add(len))
    };
    let mut out = Vec::with_capacity(segment.size(0));
    segment.write(&mut out, &[]).ok()?;
    Some(out)
}

/// An ICMP (or ICMPv6) "port unreachable" from the datagram's destination,
/// quoting as much of it as fits [`MAX_ANSWER`].
fn unreachable(ip: &Ip<'_>) -> Option<Vec<u8>> {
    let back = from_to(ip.dst, ip.src)?;
    let mut out = Vec::with_capacity(MAX_ANSWER);
    match ip.dst {
        IpAddr::V4(_) => {
            let error = back.icmpv4(Icmpv4Type::DestinationUnreachable(
                icmpv4::DestUnreachableHeader::Port,
            ));
            let quoted = quote(ip.whole, error.size(0))?;
            error.write(&mut out, quoted).ok()?;
        }
        IpAddr::V6(_) => {
            let error = back.icmpv6(Icmpv6Type::DestinationUnreachable(
                icmpv6::DestUnreachableCode::Port,
            ));
            let quoted = quote(ip.whole, error.size(0))?;
            error.write(&mut out, quoted).ok()?;
        }
    }
    Some(out)
}

/// As much of `whole` as fits [`MAX_ANSWER`] after `headers` bytes.
fn quote(whole: &[u8], headers: usize) -> Option<&[u8]> {
    let room = MAX_ANSWER.checked_sub(headers)?;
    whole.get(..whole.len().min(room))
}

#[cfg(test)]
mod tests {
    use std::net::Ipv6Addr;

    use super::*;

    const JOB_V4: [u8; 4] = [198, 18, 0, 1];
    const JOB_V6: &str = "fd00:7061:6464::1";

    /// The Internet checksum (RFC 1071) of `parts` in a row, written here
    /// apart from etherparse's so that the answers' sums are checked by
    /// something other than what made them (a valid sum sums to zero).
    fn sum(parts: &[&[u8]]) -> u16 {
        let bytes: Vec<u8> = parts.concat();
        let mut acc: u32 = 0;
        for c in bytes.chunks(2) {
            acc += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        }
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        !(acc as u16)
    }

    fn syn_v4(dst: [u8; 4], dport: u16) -> Vec<u8> {
        let step = PacketBuilder::ipv4(JOB_V4, dst, 64)
            .tcp(40000, dport, 1000, 64240)
            .syn();
        let mut out = Vec::new();
        step.write(&mut out, &[]).unwrap();
        out
    }

    fn udp_v6(dst: Ipv6Addr, dport: u16) -> Vec<u8> {
        let src: Ipv6Addr = JOB_V6.parse().unwrap();
        let step = PacketBuilder::ipv6(src.octets(), dst.octets(), 64).udp(5353, dport);
        let mut out = Vec::new();
        step.write(&mut out, b"dnsq").unwrap();
        out
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
        let step = PacketBuilder::ipv4(JOB_V4, dst, 64).udp(40001, DNS);
        let mut out = Vec::new();
        step.write(&mut out, &dns).unwrap();
        out
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
        // From 8.8.8.8:443 to the job's 40000, RST|ACK, seq 0, ack = its
        // seq + 1 (the SYN counted), window 0, no options, no data.
        let mut want = Vec::new();
        PacketBuilder::ipv4([8, 8, 8, 8], JOB_V4, HOPS)
            .tcp(443, 40000, 0, 0)
            .rst()
            .ack(1001)
            .write(&mut want, &[])
            .unwrap();
        assert_eq!(rst, want);
        assert_eq!(rst.len(), 40);
        assert_eq!(&rst[12..20], &[8, 8, 8, 8, 198, 18, 0, 1]);
        assert_eq!(rst[33], 0x04 | 0x10, "RST|ACK");
        // Both checksums valid by a sum written apart from etherparse.
        assert_eq!(sum(&[&rst[..20]]), 0);
        let pseudo = [&rst[12..20], &[0, 6, 0, 20][..]].concat();
        assert_eq!(sum(&[&pseudo, &rst[20..]]), 0);
        // A reset starts nothing and gets no answer.
        assert_eq!(classify(&rst).map(|p| p.starts_flow), Some(false));
        assert_eq!(answer(&rst), None);
        // To a segment with ACK, the reset's seq is its ack, no ACK flag.
        let mut data = Vec::new();
        PacketBuilder::ipv4(JOB_V4, [8, 8, 8, 8], 64)
            .tcp(40000, 443, 1001, 64240)
            .ack(77)
            .write(&mut data, b"GET /")
            .unwrap();
        assert_eq!(classify(&data).map(|p| p.starts_flow), Some(false));
        let mut want = Vec::new();
        PacketBuilder::ipv4([8, 8, 8, 8], JOB_V4, HOPS)
            .tcp(443, 40000, 77, 0)
            .rst()
            .write(&mut want, &[])
            .unwrap();
        assert_eq!(answer(&data), Some(want));
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
        assert_eq!(a.len(), 40 + 8 + q.len());
        assert_eq!(a[6], 58, "ICMPv6");
        assert_eq!(&a[8..24], &dst.octets());
        assert_eq!(&a[40..42], &[1, 4], "destination unreachable, port");
        // The whole datagram quoted after the 8 bytes of ICMPv6 header.
        assert_eq!(&a[48..], &q[..]);
        let job: Ipv6Addr = JOB_V6.parse().unwrap();
        let len = u32::try_from(a.len() - 40).unwrap().to_be_bytes();
        let pseudo = [&dst.octets()[..], &job.octets(), &len, &[0, 0, 0, 58]].concat();
        assert_eq!(sum(&[&pseudo, &a[40..]]), 0);
        // The answer, an ICMPv6 error, is no flow and gets no answer.
        assert_eq!(classify(&a), None);
        assert_eq!(answer(&a), None);
    }

    /// Over IPv4 the ICMP error quotes the datagram too, cut to keep the
    /// answer within [`MAX_ANSWER`]; a ping is a flow with no answer.
    #[test]
    fn a_long_udp_datagram_is_quoted_within_the_bound_and_a_ping_is_a_flow() {
        let mut q = Vec::new();
        PacketBuilder::ipv4(JOB_V4, [9, 9, 9, 9], 64)
            .udp(40002, 443)
            .write(&mut q, &[7u8; 3000])
            .unwrap();
        let a = answer(&q).unwrap();
        assert_eq!(a.len(), MAX_ANSWER);
        assert_eq!((a[9], a[20], a[21]), (1, 3, 3), "ICMP port unreachable");
        assert_eq!(&a[28..], &q[..MAX_ANSWER - 28]);
        assert_eq!(sum(&[&a[..20]]), 0);
        assert_eq!(sum(&[&a[20..]]), 0);
        let mut ping = Vec::new();
        PacketBuilder::ipv4(JOB_V4, [9, 9, 9, 9], 64)
            .icmpv4_echo_request(1, 1)
            .write(&mut ping, b"hi")
            .unwrap();
        assert_eq!(
            classify(&ping),
            Some(Packet {
                transport: Transport::Icmp,
                dst: "9.9.9.9".parse().unwrap(),
                port: 0,
                starts_flow: true,
            })
        );
        assert_eq!(answer(&ping), None);
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

    /// A later fragment is no flow (IPv4 and IPv6); an IPv6 chain of
    /// extension headers longer than the bound is none either, one at the
    /// bound is read through.
    #[test]
    fn later_fragments_and_long_extension_chains_are_no_flow() {
        let mut frag = syn_v4([8, 8, 8, 8], 443);
        frag[6..8].copy_from_slice(&100u16.to_be_bytes());
        assert_eq!(classify(&frag), None);
        assert_eq!(answer(&frag), None);
        // IPv6 with `n` destination-options headers, then a fragment
        // header at `offset` (in 8-byte units), then a UDP datagram.
        let chain = |n: usize, offset: u16| {
            let mut body = Vec::new();
            for _ in 0..n {
                body.extend_from_slice(&[60, 0, 0, 0, 0, 0, 0, 0]);
            }
            let last = body.len().saturating_sub(8);
            if n > 0 {
                body[last] = 44;
            }
            body.extend_from_slice(&[17, 0]);
            body.extend_from_slice(&(offset << 3).to_be_bytes());
            body.extend_from_slice(&[0, 0, 0, 1]);
            body.extend_from_slice(&[0x9c, 0x41, 0, 53, 0, 8, 0, 0]);
            let src: Ipv6Addr = "fd00::1".parse().unwrap();
            let dst: Ipv6Addr = "2001:db8::1".parse().unwrap();
            let mut p = vec![0x60, 0, 0, 0];
            p.extend_from_slice(&u16::try_from(body.len()).unwrap().to_be_bytes());
            p.extend_from_slice(&[if n > 0 { 60 } else { 44 }, 64]);
            p.extend_from_slice(&src.octets());
            p.extend_from_slice(&dst.octets());
            p.extend_from_slice(&body);
            p
        };
        let udp = Some(Packet {
            transport: Transport::Udp,
            dst: "2001:db8::1".parse().unwrap(),
            port: 53,
            starts_flow: true,
        });
        // 7 options + the fragment header = 8 extensions: read through.
        assert_eq!(classify(&chain(7, 0)), udp);
        assert_eq!(classify(&chain(8, 0)), None);
        assert_eq!(classify(&chain(0, 0)), udp);
        assert_eq!(classify(&chain(0, 3)), None);
        assert_eq!(answer(&chain(0, 3)), None);
        // No next header: nothing in it.
        let mut none = chain(0, 0);
        none[6] = 59;
        assert_eq!(classify(&none), None);
    }
}

//! The addresses no job reaches whatever its lists say: loopback,
//! link-local (the cloud metadata addresses `169.254.169.254` and
//! `fd00:ec2::254` among them), private and unique-local ranges, CGNAT,
//! multicast, unspecified, documentation, benchmarking and reserved ranges
//! (IPv6's too), IPv6 forms that embed an IPv4 address (mapped,
//! compatible, translated, NAT64, 6to4, Teredo)
//! judged by what they embed or refused, and the host's own addresses. Only
//! the host profile opens one, one exact `address:port` at a time.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Which range an address fell in (`deny_list:<range>` on the record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeniedRange(pub &'static str);

/// The deny list of one proxy.
#[derive(Debug, Clone, Default)]
pub struct DenyList {
    host_addresses: HashSet<IpAddr>,
    opened: HashSet<SocketAddr>,
}

impl DenyList {
    /// The ranges, the given host addresses, and the opened `address:port`s.
    pub fn new(
        host_addresses: impl IntoIterator<Item = IpAddr>,
        opened: impl IntoIterator<Item = SocketAddr>,
    ) -> DenyList {
        DenyList {
            host_addresses: host_addresses
                .into_iter()
                .map(|a| a.to_canonical())
                .collect(),
            opened: opened
                .into_iter()
                .map(|a| SocketAddr::new(a.ip().to_canonical(), a.port()))
                .collect(),
        }
    }

    /// The ranges and this host's interface addresses (`getifaddrs`), with
    /// `opened` open.
    pub fn of_this_host(
        opened: impl IntoIterator<Item = SocketAddr>,
    ) -> Result<DenyList, nix::Error> {
        let addresses = nix::ifaddrs::getifaddrs()?
            .filter_map(|i| i.address)
            .filter_map(|a| {
                a.as_sockaddr_in()
                    .map(|v4| IpAddr::V4(v4.ip()))
                    .or_else(|| a.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))
            })
            .collect::<Vec<_>>();
        Ok(DenyList::new(addresses, opened))
    }

    /// `None` when the proxy may connect to `addr`, else the range that
    /// refuses it.
    pub fn check(&self, addr: SocketAddr) -> Option<DeniedRange> {
        let ip = addr.ip().to_canonical();
        if self.opened.contains(&SocketAddr::new(ip, addr.port())) {
            return None;
        }
        if let Some(range) = special_range(ip) {
            return Some(DeniedRange(range));
        }
        self.host_addresses
            .contains(&ip)
            .then_some(DeniedRange("host_address"))
    }
}

/// The special-purpose range `ip` is in, if any.
pub fn special_range(ip: IpAddr) -> Option<&'static str> {
    match ip.to_canonical() {
        IpAddr::V4(v4) => v4_range(v4),
        IpAddr::V6(v6) => v6_range(v6),
    }
}

fn v4_range(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    let in_net = |net: [u8; 4], bits: u32| {
        let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
        u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
    };
    Some(match () {
        _ if o == [169, 254, 169, 254] => "metadata",
        _ if in_net([0, 0, 0, 0], 8) => "unspecified",
        _ if in_net([127, 0, 0, 0], 8) => "loopback",
        _ if in_net([10, 0, 0, 0], 8)
            || in_net([172, 16, 0, 0], 12)
            || in_net([192, 168, 0, 0], 16) =>
        {
            "private"
        }
        _ if in_net([100, 64, 0, 0], 10) => "cgnat",
        _ if in_net([169, 254, 0, 0], 16) => "link_local",
        _ if in_net([192, 0, 0, 0], 24) => "reserved",
        _ if in_net([192, 0, 2, 0], 24)
            || in_net([198, 51, 100, 0], 24)
            || in_net([203, 0, 113, 0], 24) =>
        {
            "documentation"
        }
        _ if in_net([198, 18, 0, 0], 15) => "benchmarking",
        _ if in_net([224, 0, 0, 0], 4) => "multicast",
        _ if in_net([240, 0, 0, 0], 4) => "reserved",
        _ => return None,
    })
}

fn v6_range(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    let in_net = |net: Ipv6Addr, bits: u32| {
        let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
        u128::from(ip) & mask == u128::from(net) & mask
    };
    let embedded = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    if ip == Ipv6Addr::UNSPECIFIED {
        return Some("unspecified");
    }
    if ip == Ipv6Addr::LOCALHOST {
        return Some("loopback");
    }
    if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        return Some("metadata");
    }
    Some(match () {
        // ::a.b.c.d (IPv4-compatible, deprecated): no route should carry it.
        _ if in_net(Ipv6Addr::UNSPECIFIED, 96) => "ipv4_compatible",
        // NAT64's well-known prefix: judged by the IPv4 address it embeds.
        _ if in_net(Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96) => {
            return v4_range(embedded(s[6], s[7]))
        }
        _ if in_net(Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0), 48) => "nat64_local",
        // ::ffff:0:a.b.c.d (IPv4-translated, SIIT): refused, named by the
        // IPv4 address it embeds when that is special.
        _ if in_net(Ipv6Addr::new(0, 0, 0, 0, 0xffff, 0, 0, 0), 96) => {
            v4_range(embedded(s[6], s[7])).unwrap_or("ipv4_translated")
        }
        // 6to4 (deprecated, relays anywhere): refused, named by the IPv4
        // address in bits 16..48 when that is special.
        _ if in_net(Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16) => {
            v4_range(embedded(s[1], s[2])).unwrap_or("6to4")
        }
        _ if in_net(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32)
            || in_net(Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0), 20) =>
        {
            "documentation"
        }
        _ if in_net(Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 0), 48) => "benchmarking",
        // SRv6 segment identifiers: never a host's address.
        _ if in_net(Ipv6Addr::new(0x5f00, 0, 0, 0, 0, 0, 0, 0), 16) => "reserved",
        // Teredo hides an IPv4 address (obfuscated): refused outright.
        _ if in_net(Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 32) => "teredo",
        _ if in_net(Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0), 64) => "discard",
        _ if in_net(Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7) => "unique_local",
        _ if in_net(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10) => "link_local",
        _ if in_net(Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0), 10) => "site_local",
        _ if in_net(Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8) => "multicast",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn range(text: &str) -> Option<&'static str> {
        special_range(text.parse().unwrap())
    }

    #[test]
    fn special_ranges_and_embedded_forms() {
        let cases = [
            ("127.0.0.1", Some("loopback")),
            ("127.255.255.254", Some("loopback")),
            ("0.0.0.0", Some("unspecified")),
            ("10.1.2.3", Some("private")),
            ("172.31.255.255", Some("private")),
            ("172.32.0.1", None),
            ("192.168.1.1", Some("private")),
            ("100.64.0.1", Some("cgnat")),
            ("100.128.0.1", None),
            ("169.254.169.254", Some("metadata")),
            ("169.254.1.1", Some("link_local")),
            ("224.0.0.1", Some("multicast")),
            ("255.255.255.255", Some("reserved")),
            ("8.8.8.8", None),
            ("::", Some("unspecified")),
            ("::1", Some("loopback")),
            ("::ffff:127.0.0.1", Some("loopback")),
            ("::ffff:169.254.169.254", Some("metadata")),
            ("::ffff:8.8.8.8", None),
            ("::127.0.0.1", Some("ipv4_compatible")),
            ("64:ff9b::7f00:1", Some("loopback")),
            ("64:ff9b::808:808", None),
            ("2002:7f00:1::1", Some("loopback")),
            ("2002:808:808::1", Some("6to4")),
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", Some("teredo")),
            ("fd00:ec2::254", Some("metadata")),
            ("fd12::1", Some("unique_local")),
            ("fe80::1", Some("link_local")),
            ("ff02::1", Some("multicast")),
            ("2606:4700::1111", None),
            // IPv6 benchmarking (RFC 5180) and the second documentation
            // range (RFC 9637), as their IPv4 twins.
            ("2001:2::1", Some("benchmarking")),
            ("2001:2:0:ffff::1", Some("benchmarking")),
            ("2001:3::1", None),
            ("3fff::1", Some("documentation")),
            ("3fff:fff:ffff::1", Some("documentation")),
            ("3fff:1000::1", None),
            // IPv4-translated (SIIT, RFC 2765): judged by what it embeds.
            ("::ffff:0:7f00:1", Some("loopback")),
            ("::ffff:0:a9fe:a9fe", Some("metadata")),
            ("::ffff:0:808:808", Some("ipv4_translated")),
            // SRv6 segment identifiers (RFC 9602): never a host.
            ("5f00::1", Some("reserved")),
        ];
        let got: Vec<_> = cases.iter().map(|(a, _)| (*a, range(a))).collect();
        let want: Vec<_> = cases.to_vec();
        assert_eq!(got, want);
    }

    #[test]
    fn only_the_exact_opened_address_and_port_pass() {
        let deny = DenyList::new(
            ["203.0.114.7".parse().unwrap()],
            ["127.0.0.1:8443".parse().unwrap()],
        );
        let check = |a: &str| deny.check(a.parse().unwrap());
        assert_eq!(
            [
                check("127.0.0.1:8443"),
                check("[::ffff:127.0.0.1]:8443"),
                check("127.0.0.1:8444"),
                check("127.0.0.2:8443"),
                check("203.0.114.7:443"),
                check("203.0.114.8:443"),
            ],
            [
                None,
                None,
                Some(DeniedRange("loopback")),
                Some(DeniedRange("loopback")),
                Some(DeniedRange("host_address")),
                None,
            ]
        );
    }

    #[test]
    fn this_hosts_loopback_is_among_its_addresses() {
        let deny = DenyList::of_this_host([]).unwrap();
        assert!(deny
            .host_addresses
            .contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)));
    }
}

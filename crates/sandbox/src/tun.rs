//! The direct-connection watcher's device: a TUN interface in the job's
//! network namespace, made by the helper (root of the job's user
//! namespace, which owns the network namespace) before PID 1 exists. It
//! holds the job's only addresses besides loopback, [`V4`] and [`V6`]
//! (from the benchmarking and a unique-local range: no real host's), and
//! both default routes, IPv4 and IPv6. What the job sends anywhere but
//! loopback therefore arrives as an IP packet on the descriptor returned
//! here, held by the helper alone, and goes nowhere else: the device has
//! no other end, the namespace no other interface. Set up through
//! `rtnetlink` (the helper's own socket; the job's seccomp filter denies
//! it netlink).

use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd as _, OwnedFd};

use nix::errno::Errno;
use nix::sys::socket::{socket, AddressFamily, SockFlag, SockProtocol, SockType};

/// The device's name inside the job's namespace.
pub const NAME: &str = "direct0";
/// The job's IPv4 address (198.18/15: benchmarking, never routed).
pub const V4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The resolver the job's `/etc/resolv.conf` names when the watcher runs:
/// an address of the same never-routed range, reached through the device
/// (its queries are answered "port unreachable" and reported by name).
pub const RESOLVER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 53);
/// That `/etc/resolv.conf`.
pub const RESOLV_CONF: &str = "# Paddock's sandbox: names are resolved by the egress proxy (HTTPS_PROXY),\n# not here. A lookup sent here fails at once and is put on the job's record.\nnameserver 198.18.0.53\noptions attempts:1\n";
/// That `/etc/hosts`: loopback, and the sandbox's host name (`init.rs`).
pub const HOSTS: &str =
    "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\tpaddock\n";
/// The job's IPv6 address (unique-local).
pub const V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x7061, 0x6464, 0, 0, 0, 0, 1);

nix::ioctl_write_ptr_bad!(tun_set_iff, libc::TUNSETIFF, libc::ifreq);
nix::ioctl_write_int_bad!(tun_set_persist, libc::TUNSETPERSIST);

/// Why the device could not be made (the job then runs without the
/// watcher; the helper reports this instead of its records).
#[derive(Debug, thiserror::Error)]
pub enum TunError {
    #[error("open /dev/net/tun: {0}")]
    Open(std::io::Error),
    #[error("make the TUN device {NAME}: {0}")]
    SetIff(Errno),
    #[error("bring {NAME} up: {0}")]
    Up(Errno),
    #[error("find {NAME}'s index: {0}")]
    Index(Errno),
    #[error("{what} on {NAME} (rtnetlink): {source}")]
    Netlink { what: &'static str, source: Errno },
}

/// Makes the device, gives it both addresses and both default routes; its
/// descriptor (blocking, close-on-exec). Run in the job's network
/// namespace, before any thread.
pub fn open() -> Result<OwnedFd, TunError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open("/dev/net/tun")
        .map_err(TunError::Open)?;
    // SAFETY: ifreq is a plain C struct for which all-zero bytes are valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(NAME.as_bytes()) {
        *dst = *src as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: `req` is a valid ifreq naming the device with its flags set;
    // the kernel reads it (and writes the name back) during the call.
    unsafe { tun_set_iff(file.as_raw_fd(), &req) }.map_err(TunError::SetIff)?;
    // Persistent: closing the descriptor (the helper's exit) does not
    // unregister the device then and there, which waits for RCU grace
    // periods (tens of milliseconds on the run's path); it goes with the
    // namespace, whose teardown the kernel does in the background.
    // SAFETY: TUNSETPERSIST takes an integer argument, passed by value.
    unsafe { tun_set_persist(file.as_raw_fd(), 1) }.map_err(TunError::SetIff)?;
    crate::net::link_up(NAME).map_err(TunError::Up)?;
    let index = nix::net::if_::if_nametoindex(NAME).map_err(TunError::Index)?;
    let nl = Netlink::open()?;
    nl.address(index, &V4.octets(), 32, "add its IPv4 address")?;
    nl.default_route(index, libc::AF_INET as u8, "add the IPv4 default route")?;
    // A kernel without IPv6 (`ipv6.disable=1`) refuses both; the job
    // cannot send IPv6 there at all, so there is nothing to watch.
    match nl
        .address(index, &V6.octets(), 128, "add its IPv6 address")
        .and_then(|()| nl.default_route(index, libc::AF_INET6 as u8, "add the IPv6 default route"))
    {
        Err(TunError::Netlink {
            source: Errno::EAFNOSUPPORT,
            ..
        }) => {}
        other => other?,
    }
    Ok(OwnedFd::from(file))
}

/// An rtnetlink socket that sends one request at a time and reads its
/// acknowledgement.
struct Netlink {
    fd: OwnedFd,
}

const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLM_F_EXCL: u16 = 0x200;
const NLM_F_CREATE: u16 = 0x400;

impl Netlink {
    fn open() -> Result<Netlink, TunError> {
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC,
            SockProtocol::NetlinkRoute,
        )
        .map_err(|source| TunError::Netlink {
            what: "open a socket",
            source,
        })?;
        Ok(Netlink { fd })
    }

    /// `addr/prefix` on the device, without duplicate address detection
    /// (an IPv6 address is usable at once).
    fn address(
        &self,
        index: u32,
        addr: &[u8],
        prefix: u8,
        what: &'static str,
    ) -> Result<(), TunError> {
        let family = if addr.len() == 4 {
            libc::AF_INET
        } else {
            libc::AF_INET6
        } as u8;
        // struct ifaddrmsg: family, prefixlen, flags, scope, index.
        let mut body = vec![family, prefix, 0, 0];
        body.extend_from_slice(&index.to_ne_bytes());
        attr(&mut body, libc::IFA_LOCAL, addr);
        attr(&mut body, libc::IFA_ADDRESS, addr);
        attr(&mut body, libc::IFA_FLAGS, &libc::IFA_F_NODAD.to_ne_bytes());
        self.request(libc::RTM_NEWADDR, &body, what)
    }

    /// The default route of `family` through the device (no gateway: the
    /// device is point-to-point).
    fn default_route(&self, index: u32, family: u8, what: &'static str) -> Result<(), TunError> {
        // struct rtmsg: family, dst_len, src_len, tos, table, protocol,
        // scope, type, flags (u32).
        let mut body = vec![
            family,
            0,
            0,
            0,
            libc::RT_TABLE_MAIN,
            libc::RTPROT_BOOT,
            libc::RT_SCOPE_LINK,
            libc::RTN_UNICAST,
        ];
        body.extend_from_slice(&0u32.to_ne_bytes());
        attr(&mut body, libc::RTA_OIF, &index.to_ne_bytes());
        self.request(libc::RTM_NEWROUTE, &body, what)
    }

    fn request(&self, kind: u16, body: &[u8], what: &'static str) -> Result<(), TunError> {
        let err = |source| TunError::Netlink { what, source };
        let len = u32::try_from(16 + body.len()).map_err(|_| err(Errno::EMSGSIZE))?;
        let mut msg = Vec::with_capacity(16 + body.len());
        msg.extend_from_slice(&len.to_ne_bytes());
        msg.extend_from_slice(&kind.to_ne_bytes());
        let flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
        msg.extend_from_slice(&flags.to_ne_bytes());
        msg.extend_from_slice(&1u32.to_ne_bytes()); // seq
        msg.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel's
        msg.extend_from_slice(body);
        nix::sys::socket::send(
            self.fd.as_raw_fd(),
            &msg,
            nix::sys::socket::MsgFlags::empty(),
        )
        .map_err(err)?;
        let mut buf = [0u8; 1024];
        let n = nix::sys::socket::recv(
            self.fd.as_raw_fd(),
            &mut buf,
            nix::sys::socket::MsgFlags::empty(),
        )
        .map_err(err)?;
        // The acknowledgement: an NLMSG_ERROR whose error is 0.
        let reply = buf.get(..n).unwrap_or_default();
        let kind = reply
            .get(4..6)
            .map(|b| u16::from_ne_bytes([b[0], b[1]]))
            .unwrap_or_default();
        let code = reply
            .get(16..20)
            .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .unwrap_or(-libc::EPROTO);
        match (kind, code) {
            (NLMSG_ERROR, 0) => Ok(()),
            (NLMSG_ERROR, code) => Err(err(Errno::from_raw(-code))),
            _ => Err(err(Errno::EPROTO)),
        }
    }
}

/// Appends an rtattr (length, type, value, padded to 4 bytes).
fn attr(out: &mut Vec<u8>, kind: u16, value: &[u8]) {
    let len = (4 + value.len()) as u16;
    out.extend_from_slice(&len.to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(value);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

#[cfg(test)]
mod files_tests {
    use super::*;

    /// The watcher's resolver file names its resolver, and its hosts
    /// file the sandbox's host name.
    #[test]
    fn the_watchers_files_name_its_resolver_and_host() {
        assert!(RESOLV_CONF.contains(&format!("\nnameserver {RESOLVER}\n")));
        assert!(HOSTS.contains(&format!("\t{}\n", crate::init::HOSTNAME)));
    }
}

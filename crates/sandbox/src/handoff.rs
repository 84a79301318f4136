//! A job's TCP connection handed to the host over a Unix socket, so that
//! its bytes are relayed once (by the broker's egress proxy) rather than
//! twice. The sandbox's forwarder (`net.rs`, in the job's network
//! namespace) accepts the job's connection, connects to the proxy's Unix
//! socket and sends the accepted socket itself with `SCM_RIGHTS`: one
//! descriptor per Unix connection, with the fixed [`HEADER`] as its only
//! data (the Unix socket it arrives on names the service), then closes its
//! own copies. The receiver ([`receive`]) takes what arrived as hostile:
//! whoever can connect to the Unix socket can send any descriptor, any
//! number of them, or none. It reads one message without blocking, into
//! a bounded control buffer, with `MSG_CMSG_CLOEXEC` (a received
//! descriptor is never inherited by a child the host starts meanwhile),
//! closes every descriptor it received unless the message was exactly the
//! header with exactly one descriptor that is a connected TCP socket
//! (`fstat` says socket; `SO_TYPE` stream, `SO_DOMAIN` IPv4 or IPv6,
//! `SO_PROTOCOL` TCP, `SO_ACCEPTCONN` 0, a peer address), and says what
//! it refused ([`Refused`]). It never reads from, writes to or waits on a
//! descriptor it refuses.
//!
//! The receive side calls `recvmsg` itself rather than through nix
//! (which this module uses to send): nix 0.29's `RecvMsg::cmsgs` answers
//! `ENOBUFS` for a message the kernel truncated (`MSG_CTRUNC`) and gives
//! no way to walk the control data that did arrive, yet the kernel has
//! installed every descriptor that fitted, so a hostile peer sending 13
//! descriptors would leave 12 open in the broker per connection. The
//! hand-written walk owns (and so closes) each one whatever the flags say.

use std::io::{self, IoSlice};
use std::net::TcpStream;
use std::os::fd::{AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd, RawFd};

use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags, SockaddrStorage};
use nix::sys::stat::{fstat, SFlag};

/// The data sent with the descriptor: the format's name and version.
pub const HEADER: &[u8] = b"paddock-tcp/1\n";

/// The control buffer's size in 8-byte words: 64 bytes, room for the
/// header of one `SCM_RIGHTS` message and 12 descriptors. Whatever more
/// a peer sends is cut by the kernel (`MSG_CTRUNC`), which closes what it
/// could not pass.
const CONTROL_WORDS: usize = 8;

/// What [`receive`] refused, and why; every descriptor that came with it
/// is closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("the peer hung up without handing over a connection")]
    Closed,
    #[error("the message carried no descriptor")]
    NoDescriptor,
    #[error("the message's data is not paddock's header ({len} bytes)")]
    Header { len: usize },
    #[error("the message carried more descriptors or control data than the receiver reads (truncated, all closed)")]
    Truncated,
    #[error("the message carried control data other than descriptors")]
    OtherControl,
    #[error("the message carried {count} descriptors, not one (all closed)")]
    Many { count: usize },
    #[error("the descriptor is {kind}, not a socket")]
    NotSocket { kind: &'static str },
    #[error("the descriptor is a socket of type {kind} ({}), not a stream socket", socket_type(*kind))]
    NotStream { kind: i32 },
    #[error("the descriptor is a socket of family {family}, not IPv4 or IPv6")]
    NotInet { family: i32 },
    #[error("the descriptor is a socket of protocol {protocol}, not TCP")]
    NotTcp { protocol: i32 },
    #[error("the descriptor is a listening socket, not a connection")]
    Listening,
    #[error("the descriptor is a socket with no peer (not connected)")]
    NotConnected,
    #[error("the descriptor could not be inspected: {source}")]
    Inspect { source: nix::errno::Errno },
}

/// Sends `fds` with `header` as one message on the Unix socket `unix`,
/// without blocking (the forwarder sends [`HEADER`] and one descriptor;
/// tests send what a hostile peer would).
pub fn send(unix: BorrowedFd<'_>, header: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let raw: Vec<RawFd> = fds.iter().map(|fd| fd.as_raw_fd()).collect();
    let control = [ControlMessage::ScmRights(&raw)];
    let cmsgs: &[ControlMessage<'_>] = if raw.is_empty() { &[] } else { &control };
    let sent = sendmsg::<()>(
        unix.as_raw_fd(),
        &[IoSlice::new(header)],
        cmsgs,
        MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
        None,
    )?;
    if sent != header.len() {
        return Err(io::ErrorKind::WriteZero.into());
    }
    Ok(())
}

/// Reads one hand-over from the Unix socket `unix` without blocking:
/// `WouldBlock` when nothing has arrived yet; `Ok(Err(_))` a refusal (every
/// descriptor received is closed by then); `Ok(Ok(_))` the connection, a
/// blocking `TcpStream` (the caller makes it non-blocking).
pub fn receive(unix: BorrowedFd<'_>) -> io::Result<Result<TcpStream, Refused>> {
    let mut data = [0u8; 64];
    let mut control = [0u64; CONTROL_WORDS];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    // SAFETY: msghdr is a plain C struct for which all-zero bytes are
    // valid (no name, no iovec, no control buffer yet).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `msg` points at one iovec over `data` and at `control`, with
    // their true lengths; all three live across the call, and the kernel
    // writes only within them (and into `msg`'s lengths and flags).
    let n = unsafe {
        libc::recvmsg(
            unix.as_raw_fd(),
            &mut msg,
            libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let (fds, other) = received_fds(&msg);
    let truncated = msg.msg_flags & libc::MSG_CTRUNC != 0;
    let len = usize::try_from(n).unwrap_or(0);
    Ok(judge(&data[..len], fds, truncated, other))
}

/// The descriptors in `msg`'s control data, each owned (closed when
/// dropped), and whether there was control data of another kind.
fn received_fds(msg: &libc::msghdr) -> (Vec<OwnedFd>, bool) {
    let mut fds = Vec::new();
    let mut other = false;
    // SAFETY: `msg` is the header recvmsg filled in; its control pointer
    // and length (as the kernel set it) describe the buffer it wrote.
    let mut c = unsafe { libc::CMSG_FIRSTHDR(msg) };
    while !c.is_null() {
        // SAFETY: CMSG_FIRSTHDR/CMSG_NXTHDR return either null or a
        // pointer to a whole cmsghdr inside the control buffer; the buffer
        // is 8-byte aligned (u64 words), as cmsghdr needs.
        let hdr = unsafe { std::ptr::read(c) };
        if hdr.cmsg_level == libc::SOL_SOCKET && hdr.cmsg_type == libc::SCM_RIGHTS {
            // SAFETY: `c` is a cmsghdr within the buffer; CMSG_DATA only
            // computes the address of its data.
            let data = unsafe { libc::CMSG_DATA(c) };
            let offset = data as usize - c as usize;
            let bytes = (hdr.cmsg_len as usize).saturating_sub(offset);
            for i in 0..bytes / std::mem::size_of::<libc::c_int>() {
                // SAFETY: the kernel wrote `bytes` bytes of descriptors at
                // `data`, within the buffer (cmsg_len counts only what it
                // wrote); they may be unaligned, hence read_unaligned.
                let raw = unsafe { std::ptr::read_unaligned(data.cast::<libc::c_int>().add(i)) };
                // SAFETY: each is a descriptor the kernel just installed
                // in this process for this message; nothing else owns it.
                fds.push(unsafe { OwnedFd::from_raw_fd(raw) });
            }
        } else {
            other = true;
        }
        // SAFETY: `msg` and `c` are as above; CMSG_NXTHDR checks the next
        // header against the control length and returns null past it.
        c = unsafe { libc::CMSG_NXTHDR(msg, c) };
    }
    (fds, other)
}

/// The verdict on one message: its data, its descriptors, whether the
/// kernel cut its control data, whether it had other control data.
fn judge(
    data: &[u8],
    mut fds: Vec<OwnedFd>,
    truncated: bool,
    other: bool,
) -> Result<TcpStream, Refused> {
    if truncated {
        return Err(Refused::Truncated);
    }
    if other {
        return Err(Refused::OtherControl);
    }
    if data.is_empty() && fds.is_empty() {
        return Err(Refused::Closed);
    }
    if data != HEADER {
        return Err(Refused::Header { len: data.len() });
    }
    let fd = match fds.len() {
        0 => return Err(Refused::NoDescriptor),
        1 => fds.remove(0),
        count => return Err(Refused::Many { count }),
    };
    check_tcp(&fd)?;
    Ok(TcpStream::from(fd))
}

/// Whether `fd` is a connected TCP socket; inspects it only (never reads,
/// writes or waits on it).
fn check_tcp(fd: &OwnedFd) -> Result<(), Refused> {
    let inspect = |source| Refused::Inspect { source };
    let stat = fstat(fd.as_raw_fd()).map_err(inspect)?;
    let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
    if kind != SFlag::S_IFSOCK {
        return Err(Refused::NotSocket {
            kind: file_kind(kind),
        });
    }
    let kind = int_option(fd, libc::SO_TYPE).map_err(inspect)?;
    if kind != libc::SOCK_STREAM {
        return Err(Refused::NotStream { kind });
    }
    let family = int_option(fd, libc::SO_DOMAIN).map_err(inspect)?;
    if family != libc::AF_INET && family != libc::AF_INET6 {
        return Err(Refused::NotInet { family });
    }
    let protocol = int_option(fd, libc::SO_PROTOCOL).map_err(inspect)?;
    if protocol != libc::IPPROTO_TCP {
        return Err(Refused::NotTcp { protocol });
    }
    if int_option(fd, libc::SO_ACCEPTCONN).map_err(inspect)? != 0 {
        return Err(Refused::Listening);
    }
    match nix::sys::socket::getpeername::<SockaddrStorage>(fd.as_raw_fd()) {
        Ok(_) => Ok(()),
        Err(nix::errno::Errno::ENOTCONN) => Err(Refused::NotConnected),
        Err(source) => Err(Refused::Inspect { source }),
    }
}

/// A socket type's name, for a refusal.
fn socket_type(kind: i32) -> &'static str {
    match kind {
        libc::SOCK_DGRAM => "SOCK_DGRAM",
        libc::SOCK_SEQPACKET => "SOCK_SEQPACKET",
        libc::SOCK_RAW => "SOCK_RAW",
        libc::SOCK_RDM => "SOCK_RDM",
        _ => "unknown",
    }
}

/// What a file type is called in a refusal.
fn file_kind(kind: SFlag) -> &'static str {
    match kind {
        SFlag::S_IFREG => "a regular file",
        SFlag::S_IFDIR => "a directory",
        SFlag::S_IFIFO => "a FIFO (pipe)",
        SFlag::S_IFCHR => "a character device",
        SFlag::S_IFBLK => "a block device",
        SFlag::S_IFLNK => "a symbolic link",
        _ => "an unknown kind of file",
    }
}

/// An integer `SOL_SOCKET` option of the socket `fd`.
fn int_option(fd: &OwnedFd, name: libc::c_int) -> nix::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes (one c_int) into
    // `value`, which lives across the call, and updates `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    nix::errno::Errno::result(rc).map(|_| value)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    /// A connected TCP socket sent with the header arrives as the same
    /// connection: bytes written to it reach the peer.
    #[test]
    fn a_connected_tcp_socket_is_handed_over() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        let (a, b) = UnixStream::pair().unwrap();
        send(a.as_fd(), HEADER, &[accepted.as_fd()]).unwrap();
        drop(accepted);
        let mut got = receive(b.as_fd()).unwrap().unwrap();
        got.write_all(b"hello").unwrap();
        drop(got);
        let mut back = Vec::new();
        client.read_to_end(&mut back).unwrap();
        assert_eq!(back, b"hello");
    }

    /// Sixty descriptors in one message: refused as truncated, and every
    /// one of them closed (each pipe's reader sees its end of file).
    #[test]
    fn too_many_descriptors_are_all_closed() {
        let pipes: Vec<_> = (0..60).map(|_| std::io::pipe().unwrap()).collect();
        let (a, b) = UnixStream::pair().unwrap();
        let fds: Vec<BorrowedFd<'_>> = pipes.iter().map(|(_, w)| w.as_fd()).collect();
        send(a.as_fd(), HEADER, &fds).unwrap();
        let (readers, writers): (Vec<_>, Vec<_>) = pipes.into_iter().unzip();
        drop(writers);
        assert_eq!(receive(b.as_fd()).unwrap().unwrap_err(), Refused::Truncated);
        for mut r in readers {
            let mut buf = Vec::new();
            assert_eq!(r.read_to_end(&mut buf).unwrap(), 0);
        }
    }

    /// Nothing sent yet: `WouldBlock`, never a wait.
    #[test]
    fn nothing_yet_would_block() {
        let (_a, b) = UnixStream::pair().unwrap();
        assert_eq!(
            receive(b.as_fd()).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
    }
}

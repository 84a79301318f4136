//! The network side: loopback brought up in the job's empty network
//! namespace, and the egress forwarder. The forwarder runs in the helper
//! process, which lives in the job's network namespace but outside its
//! PID namespace and filesystem view: it accepts TCP connections on
//! `127.0.0.1:PORT` inside the namespace and relays each to the job's
//! broker Unix socket on the host. The job can reach nothing else, and the
//! broker attributes traffic by the socket it arrives on. The socket
//! itself is not visible inside the sandbox.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use nix::sys::socket::{socket, AddressFamily, SockFlag, SockType};

use crate::error::SetupError;

nix::ioctl_read_bad!(get_flags, libc::SIOCGIFFLAGS, libc::ifreq);
nix::ioctl_write_ptr_bad!(set_flags, libc::SIOCSIFFLAGS, libc::ifreq);

/// Brings `lo` up (the new namespace starts with it down).
pub fn loopback_up() -> Result<(), SetupError> {
    let err = |source| SetupError::Loopback { source };
    let sock = socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(err)?;
    // SAFETY: ifreq is a plain C struct for which all-zero bytes are valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    use std::os::fd::AsRawFd as _;
    // SAFETY: `req` is a valid ifreq naming "lo" and outlives the call; the
    // kernel writes the flags into its union.
    unsafe { get_flags(sock.as_raw_fd(), &mut req) }.map_err(err)?;
    // SAFETY: SIOCGIFFLAGS initialised the `ifru_flags` member read here.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    req.ifr_ifru.ifru_flags = flags | (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    // SAFETY: `req` is a valid ifreq naming "lo" with its flags set.
    unsafe { set_flags(sock.as_raw_fd(), &req) }.map_err(err)?;
    Ok(())
}

/// Binds the forwarder's listening socket (before the command exists, so
/// its first connection cannot race it).
pub fn bind_forwarder(port: u16, socket: &Path) -> Result<TcpListener, SetupError> {
    TcpListener::bind(("127.0.0.1", port)).map_err(|source| SetupError::Forwarder {
        port,
        socket: socket.to_path_buf(),
        source,
    })
}

/// Relays every accepted connection to `socket`, one thread pair per
/// connection, until the process exits.
pub fn serve_forwarder(listener: TcpListener, socket: PathBuf) {
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(tcp) = conn else { continue };
            let socket = socket.clone();
            std::thread::spawn(move || relay(tcp, &socket));
        }
    });
}

fn relay(tcp: TcpStream, socket: &Path) {
    let Ok(unix) = UnixStream::connect(socket) else {
        let _ = tcp.shutdown(Shutdown::Both);
        return;
    };
    let (Ok(tcp2), Ok(unix2)) = (tcp.try_clone(), unix.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || pipe(tcp2, unix2));
    pipe_back(unix, tcp);
    let _ = up.join();
}

fn pipe(mut from: TcpStream, mut to: UnixStream) {
    let _ = copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Write);
}

fn pipe_back(mut from: UnixStream, mut to: TcpStream) {
    let _ = copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Write);
}

fn copy(from: &mut impl Read, to: &mut impl Write) -> std::io::Result<()> {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                to.write_all(&buf[..n])?;
                to.flush()?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

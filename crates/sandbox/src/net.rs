//! The network side: loopback brought up in the job's empty network
//! namespace, and the egress forwarder. The forwarder runs in the helper
//! process, which lives in the job's network namespace but outside its
//! PID namespace and filesystem view: it accepts TCP connections on
//! `127.0.0.1:PORT` inside the namespace and takes each to a Unix socket
//! on the host: the job's broker socket, and for a job with an egress
//! proxy, a second port to the proxy's socket (one thread per forwarded
//! port, a fixed number). The job can reach nothing else, and the
//! broker attributes traffic by the socket it arrives on. The socket
//! itself is not visible inside the sandbox.
//!
//! Two ways to take a connection there. The broker's port is *relayed*
//! ([`serve_forwarder`]): bytes both ways between the job's socket and a
//! Unix connection, one `poll(2)` loop over non-blocking sockets with a
//! cap on connections (the helper is outside the job's cgroup, so what
//! the job asks for never grows its threads). The egress proxy's port is
//! *handed off* ([`serve_handoff`]): the accepted socket itself is sent
//! to the proxy over a Unix connection (`handoff.rs`, `SCM_RIGHTS`) and
//! the helper keeps no copy, so a download's bytes cross one relay (the
//! proxy's) instead of two.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd as _, RawFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use nix::sys::socket::{socket, AddressFamily, SockFlag, SockType, UnixAddr};

use crate::error::SetupError;
use crate::splice::SplicePipe;

nix::ioctl_read_bad!(get_flags, libc::SIOCGIFFLAGS, libc::ifreq);
nix::ioctl_write_ptr_bad!(set_flags, libc::SIOCSIFFLAGS, libc::ifreq);

/// Brings `lo` up (the new namespace starts with it down).
pub fn loopback_up() -> Result<(), SetupError> {
    link_up("lo").map_err(|source| SetupError::Loopback { source })
}

/// Brings the interface `name` up.
pub(crate) fn link_up(name: &str) -> Result<(), nix::Error> {
    let sock = socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    // SAFETY: ifreq is a plain C struct for which all-zero bytes are valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    // The name and its NUL fit (the array is zeroed; names are short
    // constants of this crate).
    for (dst, src) in req.ifr_name.iter_mut().zip(name.as_bytes()) {
        *dst = *src as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq naming the interface and outlives the
    // call; the kernel writes the flags into its union.
    unsafe { get_flags(sock.as_raw_fd(), &mut req) }?;
    // SAFETY: SIOCGIFFLAGS initialised the `ifru_flags` member read here.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    req.ifr_ifru.ifru_flags = flags | (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    // SAFETY: `req` is a valid ifreq naming the interface with its flags set.
    unsafe { set_flags(sock.as_raw_fd(), &req) }?;
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

/// Hands every accepted connection to the egress proxy at `socket`, from
/// one thread, until the process exits: for each, a Unix connection to
/// the socket (a blocking connect: while the proxy takes no more, the
/// job's further connections wait in the listener's backlog), the
/// accepted socket sent on it with [`crate::handoff::HEADER`], then both
/// closed here. A connection that cannot be handed over is closed.
pub fn serve_handoff(listener: TcpListener, socket: PathBuf) {
    std::thread::spawn(move || loop {
        let tcp = match listener.accept() {
            Ok((tcp, _)) => tcp,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => {
                // Out of descriptors or an aborted connection: not a
                // reason to stop; not a reason to spin either.
                std::thread::sleep(std::time::Duration::from_millis(10));
                continue;
            }
        };
        let handed = crate::unix_path::connect(&socket).and_then(|unix| {
            crate::handoff::send(unix.as_fd(), crate::handoff::HEADER, &[tcp.as_fd()])
        });
        if handed.is_err() {
            let _ = tcp.shutdown(Shutdown::Both);
        }
    });
}

/// At most this many connections are relayed at once; further ones wait in
/// the listener's backlog until one ends (the job throttles itself, the
/// helper's memory and descriptors stay bounded: two sockets and two pipes
/// per connection).
pub const MAX_CONNECTIONS: usize = 256;

/// Bytes buffered per direction of a connection that could get no pipe.
const BUF: usize = 16 * 1024;

/// Relays every accepted connection to `socket` from one thread, an event
/// loop over non-blocking sockets (`poll(2)`), until the process exits.
/// The helper runs outside the job's cgroup, so nothing it does may grow
/// with what the job asks for: one thread whatever the number of
/// connections, at most [`MAX_CONNECTIONS`] of them.
pub fn serve_forwarder(listener: TcpListener, socket: PathBuf) {
    std::thread::spawn(move || {
        if listener.set_nonblocking(true).is_ok() {
            Forwarder {
                listener,
                socket,
                conns: Vec::new(),
            }
            .run();
        }
    });
}

/// Where one direction's bytes wait between the sockets: a kernel pipe
/// they are spliced through (`splice.rs`: no copy through the helper), or,
/// when no pipe can be made (out of descriptors), a buffer.
enum Held {
    Spliced(SplicePipe),
    Copied {
        buf: Vec<u8>,
        /// Unwritten bytes are `buf[start..end]`.
        start: usize,
        end: usize,
    },
}

impl Held {
    fn new() -> Held {
        match SplicePipe::new() {
            Ok(pipe) => Held::Spliced(pipe),
            Err(_) => Held::Copied {
                buf: vec![0; BUF],
                start: 0,
                end: 0,
            },
        }
    }

    fn pending(&self) -> bool {
        match self {
            Held::Spliced(pipe) => pipe.held() > 0,
            Held::Copied { start, end, .. } => start < end,
        }
    }

    /// Reads what `from` has (only when nothing is pending); `Ok(0)` is its
    /// end of file.
    fn fill(&mut self, from: &mut (impl Read + AsFd)) -> std::io::Result<usize> {
        match self {
            Held::Spliced(pipe) => pipe.fill(from.as_fd()),
            Held::Copied { buf, start, end } => {
                let n = from.read(buf)?;
                (*start, *end) = (0, n);
                Ok(n)
            }
        }
    }

    /// Writes what is pending to `to`, as much as it takes.
    fn drain(&mut self, to: &mut (impl Write + AsFd)) -> std::io::Result<usize> {
        match self {
            Held::Spliced(pipe) => pipe.drain(to.as_fd()),
            Held::Copied { buf, start, end } => {
                let n = to.write(&buf[*start..*end])?;
                *start += n;
                Ok(n)
            }
        }
    }
}

/// One direction of a connection: bytes read from one socket, not yet
/// written to the other.
struct Pipe {
    held: Held,
    /// The source said end of file.
    eof: bool,
    /// The destination's write side was shut after `eof`.
    shut: bool,
}

impl Pipe {
    fn new() -> Pipe {
        Pipe {
            held: Held::new(),
            eof: false,
            shut: false,
        }
    }

    fn pending(&self) -> bool {
        self.held.pending()
    }

    fn wants_read(&self) -> bool {
        !self.eof && !self.pending()
    }

    /// Moves what it can from `from` to `to` without blocking; false when
    /// the connection is broken.
    fn pump(&mut self, from: &mut (impl Read + AsFd), to: &mut (impl Write + AsFd + Shut)) -> bool {
        loop {
            if self.wants_read() {
                match self.held.fill(from) {
                    Ok(0) => self.eof = true,
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(_) => return false,
                }
            }
            if !self.pending() {
                break;
            }
            match self.held.drain(to) {
                Ok(0) => return false,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        if self.eof && !self.pending() && !self.shut {
            to.shut_write();
            self.shut = true;
        }
        true
    }
}

/// Shutting the write side of a socket.
trait Shut {
    fn shut_write(&self);
}

impl Shut for TcpStream {
    fn shut_write(&self) {
        let _ = self.shutdown(Shutdown::Write);
    }
}

impl Shut for UnixStream {
    fn shut_write(&self) {
        let _ = self.shutdown(Shutdown::Write);
    }
}

struct Conn {
    tcp: TcpStream,
    unix: UnixStream,
    /// TCP (the job) to the broker.
    up: Pipe,
    /// The broker to TCP.
    down: Pipe,
}

impl Conn {
    fn done(&self) -> bool {
        self.up.shut && self.down.shut
    }

    /// The poll events each socket waits for (0: none).
    fn events(&self) -> (libc::c_short, libc::c_short) {
        let mut tcp = 0;
        let mut unix = 0;
        if self.up.wants_read() {
            tcp |= libc::POLLIN;
        }
        if self.up.pending() {
            unix |= libc::POLLOUT;
        }
        if self.down.wants_read() {
            unix |= libc::POLLIN;
        }
        if self.down.pending() {
            tcp |= libc::POLLOUT;
        }
        (tcp, unix)
    }

    /// Moves what it can both ways; false when the connection is broken.
    fn pump(&mut self) -> bool {
        self.up.pump(&mut self.tcp, &mut self.unix) && self.down.pump(&mut self.unix, &mut self.tcp)
    }
}

struct Forwarder {
    listener: TcpListener,
    socket: PathBuf,
    conns: Vec<Conn>,
}

impl Forwarder {
    fn run(mut self) {
        let mut fds: Vec<libc::pollfd> = Vec::new();
        loop {
            fds.clear();
            let accepting = self.conns.len() < MAX_CONNECTIONS;
            fds.push(pollfd(
                self.listener.as_raw_fd(),
                if accepting { libc::POLLIN } else { 0 },
            ));
            for c in &self.conns {
                let (tcp, unix) = c.events();
                fds.push(pollfd(c.tcp.as_raw_fd(), tcp));
                fds.push(pollfd(c.unix.as_raw_fd(), unix));
            }
            let Ok(len) = libc::nfds_t::try_from(fds.len()) else {
                return;
            };
            // SAFETY: poll reads and writes `len` pollfd structs, exactly
            // the vector's length; the vector lives across the call and
            // every descriptor in it is open (or -1, which poll ignores).
            let rc = unsafe { libc::poll(fds.as_mut_ptr(), len, -1) };
            if rc < 0 {
                if std::io::Error::last_os_error().kind() == ErrorKind::Interrupted {
                    continue;
                }
                return;
            }
            // Pump every connection a socket of which is ready (readiness
            // without a requested event is a hang-up or an error, which
            // the pump finds too).
            let ready: Vec<bool> = self
                .conns
                .iter()
                .enumerate()
                .map(|(i, _)| fds[1 + 2 * i].revents != 0 || fds[2 + 2 * i].revents != 0)
                .collect();
            let mut i = 0;
            self.conns.retain_mut(|c| {
                let keep = !ready[i] || (c.pump() && !c.done());
                i += 1;
                keep
            });
            if accepting && fds[0].revents != 0 {
                self.accept();
            }
        }
    }

    /// Accepts what is waiting, up to the cap, each with its connection
    /// to the broker (made without blocking: a broker that cannot take it
    /// now closes the job's connection).
    fn accept(&mut self) {
        while self.conns.len() < MAX_CONNECTIONS {
            let tcp = match self.listener.accept() {
                Ok((tcp, _)) => tcp,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            let Ok(unix) = connect_nonblocking(&self.socket) else {
                let _ = tcp.shutdown(Shutdown::Both);
                continue;
            };
            if tcp.set_nonblocking(true).is_err() {
                continue;
            }
            let mut conn = Conn {
                tcp,
                unix,
                up: Pipe::new(),
                down: Pipe::new(),
            };
            if conn.pump() {
                self.conns.push(conn);
            }
        }
    }
}

fn pollfd(fd: RawFd, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd: if events == 0 { -1 } else { fd },
        events,
        revents: 0,
    }
}

/// A non-blocking connection to the Unix socket at `path`, whatever the
/// path's length (the broker socket may be deep under a long state path).
fn connect_nonblocking(path: &Path) -> std::io::Result<UnixStream> {
    crate::unix_path::with_short_name(path, |path| {
        let fd = socket(
            AddressFamily::Unix,
            SockType::Stream,
            SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
            None,
        )?;
        let addr = UnixAddr::new(path)?;
        nix::sys::socket::connect(fd.as_raw_fd(), &addr)?;
        Ok(UnixStream::from(fd))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Many connections at once, each echoed through a stand-in broker,
    /// from one forwarder thread.
    #[test]
    fn relays_many_connections_both_ways() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("broker.sock");
        let broker = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        std::thread::spawn(move || {
            for c in broker.incoming() {
                let mut c = c.unwrap();
                std::thread::spawn(move || {
                    let mut back = c.try_clone().unwrap();
                    let _ = std::io::copy(&mut c, &mut back);
                });
            }
        });
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        serve_forwarder(listener, sock);
        let big: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        let mut conns: Vec<TcpStream> = (0..40)
            .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
            .collect();
        let mut got = Vec::new();
        for (i, c) in conns.iter_mut().enumerate() {
            let msg = if i == 0 {
                big.clone()
            } else {
                format!("conn {i}").into_bytes()
            };
            let mut writer = c.try_clone().unwrap();
            let sender = std::thread::spawn(move || {
                writer.write_all(&msg).unwrap();
                writer.shutdown(Shutdown::Write).unwrap();
            });
            let mut back = Vec::new();
            c.read_to_end(&mut back).unwrap();
            sender.join().unwrap();
            got.push(back);
        }
        let want: Vec<Vec<u8>> = (0..40)
            .map(|i| {
                if i == 0 {
                    big.clone()
                } else {
                    format!("conn {i}").into_bytes()
                }
            })
            .collect();
        assert!(got == want, "the echoes differ");
    }
}

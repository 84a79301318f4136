//! One direction of a relayed connection moved by the kernel: bytes go
//! from a socket into a pipe and from the pipe into another socket with
//! `splice(2)`, never through user space (no copy in and out of a buffer,
//! which is what a relay over loopback spends its time on). The sandbox's
//! forwarder (`net.rs`) and the broker's egress proxy both relay through
//! it. The sockets are non-blocking and so is the pipe: a call that cannot
//! progress returns `WouldBlock`. The pipe is filled only when it is empty,
//! so `WouldBlock` from [`SplicePipe::fill`] always means the source has
//! nothing to read now, never that the pipe is full: a readiness-driven
//! caller (`poll(2)`, tokio) may clear the source's readiness on it.
//!
//! A pipe starts at the kernel's default size (64 KiB) and grows once, to
//! [`GROWN`], the first time one fill takes 64 KiB or more (a bulk
//! transfer): each round of fill, drain and readiness then moves four
//! times as much, which is where a relay's time per byte went. Only the
//! directions that carry bulk grow, so the pipe pages a user may hold
//! (`/proc/sys/fs/pipe-user-pages-soft`, shared with all the user's
//! pipes) are not spent on idle connections; a pipe the kernel will not
//! grow stays as it is.

use std::io;
use std::os::fd::{AsRawFd as _, BorrowedFd, OwnedFd};

use nix::errno::Errno;
use nix::fcntl::{fcntl, splice, FcntlArg, OFlag, SpliceFFlags};
use nix::sys::socket::{shutdown, Shutdown};
use nix::unistd::pipe2;

/// The most one [`SplicePipe::fill`] asks for; the kernel moves what the
/// source has and the pipe's slots take (64 KiB with the default size).
const MAX_FILL: usize = 1 << 20;

/// What a fill of this much or more tells: the transfer is bulk.
const BULK: usize = 64 * 1024;

/// The size a bulk direction's pipe grows to (bounded: a connection holds
/// at most this much per direction).
pub const GROWN: usize = 256 * 1024;

/// A pipe between two sockets and what it holds.
#[derive(Debug)]
pub struct SplicePipe {
    read: OwnedFd,
    write: OwnedFd,
    held: usize,
    /// Whether growing it was tried.
    grown: bool,
}

impl SplicePipe {
    /// A new empty pipe (non-blocking, close-on-exec, the kernel's default
    /// size: a connection costs two descriptors and 16 pages at most per
    /// direction, counted against the user's pipe pages like any pipe).
    pub fn new() -> io::Result<SplicePipe> {
        let (read, write) = pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
        Ok(SplicePipe {
            read,
            write,
            held: 0,
            grown: false,
        })
    }

    /// Bytes in the pipe, not yet moved to the destination.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Whether one fill took bulk (64 KiB or more) yet: the direction is a
    /// transfer, no longer a small exchange.
    pub fn carried_bulk(&self) -> bool {
        self.grown
    }

    /// Moves what `from` has into the pipe: `Ok(0)` is `from`'s end of
    /// file, `WouldBlock` that it has nothing now. Call it only when
    /// [`held`](Self::held) is 0: on a pipe that holds bytes, `WouldBlock`
    /// could also mean the pipe is full.
    pub fn fill(&mut self, from: BorrowedFd<'_>) -> io::Result<usize> {
        let n = retry(|| {
            splice(
                from,
                None,
                &self.write,
                None,
                MAX_FILL,
                SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK,
            )
        })?;
        self.held += n;
        if n >= BULK && !self.grown {
            self.grown = true;
            // Larger than what it holds, so the kernel keeps the bytes; a
            // refusal (the user's pipe pages spent) leaves it as it is.
            let _ = fcntl(
                self.write.as_raw_fd(),
                FcntlArg::F_SETPIPE_SZ(GROWN as libc::c_int),
            );
        }
        Ok(n)
    }

    /// Moves what the pipe holds into `to`, as much as it takes now;
    /// `WouldBlock` when it takes nothing.
    pub fn drain(&mut self, to: BorrowedFd<'_>) -> io::Result<usize> {
        if self.held == 0 {
            return Ok(0);
        }
        let n = retry(|| {
            splice(
                &self.read,
                None,
                to,
                None,
                self.held,
                SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK,
            )
        })?;
        if n == 0 {
            // A socket that takes nothing from a non-empty pipe is gone.
            return Err(io::ErrorKind::WriteZero.into());
        }
        self.held -= n.min(self.held);
        Ok(n)
    }
}

/// Shuts the writing side of the socket `fd` (the relay's end of file
/// passed on); errors (a peer already gone) are of no use to a relay.
pub fn shut_write(fd: BorrowedFd<'_>) {
    let _ = shutdown(fd.as_raw_fd(), Shutdown::Write);
}

/// Retries a call interrupted by a signal.
fn retry(mut call: impl FnMut() -> nix::Result<usize>) -> io::Result<usize> {
    loop {
        match call() {
            Err(Errno::EINTR) => continue,
            other => return other.map_err(io::Error::from),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    /// 3 MiB from a TCP socket to a Unix socket through the pipe, byte for
    /// byte, then the source's end of file; the pipe grew on the way.
    #[test]
    fn moves_a_stream_from_tcp_to_unix_byte_exact() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let data: Vec<u8> = (0..3u32 << 20).map(|i| (i % 251) as u8).collect();
        let sent = data.clone();
        let sender = std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(&sent).unwrap();
        });
        let (src, _) = listener.accept().unwrap();
        src.set_nonblocking(true).unwrap();
        let (dst, mut sink) = UnixStream::pair().unwrap();
        dst.set_nonblocking(true).unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            sink.read_to_end(&mut got).unwrap();
            got
        });
        let mut pipe = SplicePipe::new().unwrap();
        let mut moved = 0usize;
        loop {
            if pipe.held() == 0 {
                match pipe.fill(src.as_fd()) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                        continue;
                    }
                    Err(e) => panic!("fill: {e}"),
                }
            }
            match pipe.drain(dst.as_fd()) {
                Ok(n) => moved += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                Err(e) => panic!("drain: {e}"),
            }
        }
        shut_write(dst.as_fd());
        sender.join().unwrap();
        // 3 MiB is bulk: the pipe grew.
        let size = fcntl(pipe.write.as_raw_fd(), FcntlArg::F_GETPIPE_SZ).unwrap();
        assert_eq!((moved, size as usize), (data.len(), GROWN));
        assert!(reader.join().unwrap() == data, "the bytes differ");
    }
}

//! PID 1 waits, at the end of its set-up, until the helper has moved it
//! into the run's cgroup (only runs with caps have one): PID 1 makes its
//! cgroup namespace from the cgroup it is in, and the command must start
//! inside it. The helper writes one byte to a pipe once PID 1 is in; a
//! helper that fails closes the pipe without the byte, and PID 1 stops
//! (fail closed). Until then PID 1 runs only Paddock's set-up code.
//!
//! The gate also carries one byte the other way: before it waits, PID 1
//! reports whether its PID namespace's `pid_max` holds the run's pids cap
//! (`pid_cap.rs`). The helper reads it only where the run has no cgroup,
//! to hold the cap another way and say which holds.
//!
//! The network and IPC namespaces need no such step: the helper creates
//! them before it clones PID 1, which inherits them. (They used to be made
//! after the clone, overlapping PID 1's set-up on another CPU, and handed
//! over through a pidfd: that saved wall time on an idle two-CPU host but
//! cost CPU time on every start, and a busy or one-CPU host gains nothing
//! from the overlap; BENCHMARKS.md.)

use std::os::fd::{AsRawFd as _, OwnedFd};

use nix::errno::Errno;
use nix::sys::socket::{send, socketpair, AddressFamily, MsgFlags, SockFlag, SockType};

use crate::error::SetupError;

fn err(step: &'static str) -> impl FnOnce(Errno) -> SetupError {
    move |source| SetupError::Gate { step, source }
}

/// The helper's half: opens the gate once PID 1 is in the cgroup.
pub struct Open {
    fd: OwnedFd,
}

/// PID 1's half: waits for the gate.
pub struct Wait {
    fd: OwnedFd,
}

/// A gate; made before PID 1 is cloned, each side drops the other half.
/// A connected pair of Unix stream sockets (one byte each way).
pub fn pair() -> Result<(Open, Wait), SetupError> {
    let (helper, pid1) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(err("socket pair"))?;
    Ok((Open { fd: helper }, Wait { fd: pid1 }))
}

/// Reads one byte, retrying when interrupted; None at the other end's
/// close (or an error).
fn read_byte(fd: &OwnedFd) -> Result<Option<u8>, Errno> {
    let mut byte = [0u8; 1];
    loop {
        match nix::unistd::read(fd.as_raw_fd(), &mut byte) {
            Ok(1) => return Ok(Some(byte[0])),
            Ok(_) => return Ok(None),
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Writes one byte; no SIGPIPE when the other end is gone (an error).
fn send_byte(fd: &OwnedFd, byte: u8) -> Result<(), Errno> {
    send(fd.as_raw_fd(), &[byte], MsgFlags::MSG_NOSIGNAL).map(|_| ())
}

impl Open {
    /// PID 1's report: whether its namespace's `pid_max` holds the cap.
    /// Blocks until PID 1 reaches the gate; None when PID 1 ended first
    /// (its set-up failed, and so does the run).
    pub fn pid_max_held(&self) -> Option<bool> {
        match read_byte(&self.fd) {
            Ok(Some(byte)) => Some(byte == b'1'),
            Ok(None) | Err(_) => None,
        }
    }

    /// Lets PID 1 go on.
    pub fn open(self) {
        let _ = send_byte(&self.fd, b'1');
    }
}

impl Wait {
    /// Reports whether `pid_max` holds, then blocks until the helper
    /// opened the gate; an error when it gave up.
    pub fn wait(self, pid_max_held: bool) -> Result<(), SetupError> {
        // A helper that has opened the gate already (the run has its
        // cgroup) may have closed its end: its byte, not the report,
        // decides.
        let _ = send_byte(&self.fd, if pid_max_held { b'1' } else { b'0' });
        match read_byte(&self.fd) {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(err("wait for the helper")(Errno::EPIPE)),
            Err(e) => Err(err("wait for the helper")(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid1_stops_when_the_helper_gives_up() {
        let (open, wait) = pair().unwrap();
        drop(open);
        assert_eq!(
            wait.wait(false).map_err(|e| e.to_string()),
            Err(
                "wait until PID 1 is in the run's cgroup (wait for the helper): EPIPE: Broken pipe"
                    .to_string()
            )
        );
    }

    /// The helper opened and closed its end before PID 1's report.
    #[test]
    fn an_opened_gate_lets_pid1_go_on() {
        let (open, wait) = pair().unwrap();
        open.open();
        assert_eq!(wait.wait(true).map_err(|e| e.to_string()), Ok(()));
    }

    #[test]
    fn the_helper_reads_pid1s_report_before_it_opens() {
        for held in [true, false] {
            let (open, wait) = pair().unwrap();
            let pid1 = std::thread::spawn(move || wait.wait(held).map_err(|e| e.to_string()));
            assert_eq!(open.pid_max_held(), Some(held));
            open.open();
            assert_eq!(pid1.join().unwrap(), Ok(()));
        }
        // PID 1 gone before its report: no answer.
        let (open, wait) = pair().unwrap();
        drop(wait);
        assert_eq!(open.pid_max_held(), None);
    }
}

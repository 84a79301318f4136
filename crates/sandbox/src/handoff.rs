//! The hand-off of the network and IPC namespaces from the helper to the
//! sandbox's PID 1. Creating a network namespace is the most expensive
//! step of a start (the kernel registers a loopback device, its sysctl
//! tables and protocol state), so it overlaps with PID 1 building the
//! filesystem view: the helper clones PID 1 first, then unshares the
//! network and IPC namespaces, brings up loopback, binds the forwarder and
//! (with caps) creates the run's cgroup and moves PID 1 into it, and writes
//! one byte to a pipe; PID 1, its view built, reads that byte
//! and joins both namespaces through a pidfd of the helper (opened before
//! the clone, so it names the helper whatever PID namespace PID 1 is in),
//! before it drops its capabilities. Until then PID 1 runs only Paddock's
//! set-up code, never the command. A helper that fails closes the pipe
//! without the byte, and PID 1 stops (fail closed).
//!
//! The scheduler tends to queue a freshly cloned child on its parent's CPU,
//! which would serialize the two again, so the helper moves PID 1 to
//! another CPU of its affinity mask, and PID 1 restores the whole mask once
//! it has joined (before the command exists, which inherits it).

use std::os::fd::{AsFd as _, FromRawFd as _, OwnedFd};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sched::{CloneFlags, CpuSet};
use nix::unistd::Pid;

use crate::error::SetupError;

/// The namespaces handed over.
const SHARED: CloneFlags = CloneFlags::CLONE_NEWNET.union(CloneFlags::CLONE_NEWIPC);

fn err(step: &'static str) -> impl FnOnce(Errno) -> SetupError {
    move |source| SetupError::Handoff { step, source }
}

/// The helper's half: steers PID 1 and says when the namespaces are ready.
pub struct Ready {
    write: OwnedFd,
    /// The CPUs this run may use, when the kernel told.
    cpus: Option<CpuSet>,
}

/// PID 1's half: waits for the namespaces and joins them.
pub struct Join {
    pidfd: OwnedFd,
    read: OwnedFd,
    cpus: Option<CpuSet>,
}

/// Made before PID 1 is cloned: a pidfd of this process (the helper) and
/// the pipe. After the clone the helper drops the [`Join`] half and PID 1
/// the [`Ready`] half.
pub fn pair() -> Result<(Ready, Join), SetupError> {
    // SAFETY: pidfd_open(getpid(), 0) takes integer arguments only and
    // returns a new close-on-exec file descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
    if fd < 0 {
        return Err(err("open a pidfd of the helper")(Errno::last()));
    }
    let fd = libc::c_int::try_from(fd).map_err(|_| err("pidfd")(Errno::EBADF))?;
    // SAFETY: `fd` was just returned by the kernel, is open and owned by
    // nothing else; the OwnedFd closes it exactly once.
    let pidfd = unsafe { OwnedFd::from_raw_fd(fd) };
    let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(err("pipe"))?;
    let cpus = nix::sched::sched_getaffinity(Pid::from_raw(0)).ok();
    Ok((Ready { write, cpus }, Join { pidfd, read, cpus }))
}

impl Ready {
    /// Moves PID 1 (`child`) to a CPU other than this one when there is
    /// one. A move that fails only costs the overlap.
    pub fn steer(&self, child: Pid) {
        if let (Some(cpus), Ok(here)) = (&self.cpus, nix::sched::sched_getcpu()) {
            let mut others = *cpus;
            let any = |set: &CpuSet| (0..CpuSet::count()).any(|c| set.is_set(c).unwrap_or(false));
            if others.unset(here).is_ok() && any(&others) {
                let _ = nix::sched::sched_setaffinity(child, &others);
            }
        }
    }

    /// The namespaces are set up: PID 1 may join. A PID 1 that already
    /// ended (its own set-up failed) makes this a no-op; its status says why.
    pub fn send(self) {
        let _ = nix::unistd::write(self.write.as_fd(), b"1");
    }
}

impl Join {
    /// Waits until the helper's namespaces are ready, joins them and
    /// restores this process's CPU affinity.
    pub fn join(self) -> Result<(), SetupError> {
        let mut byte = [0u8; 1];
        loop {
            match nix::unistd::read(std::os::fd::AsRawFd::as_raw_fd(&self.read), &mut byte) {
                Ok(1) => break,
                // The helper closed the pipe without the byte: its set-up
                // failed (it reports why).
                Ok(_) => return Err(err("wait for the helper")(Errno::EPIPE)),
                Err(Errno::EINTR) => {}
                Err(e) => return Err(err("wait for the helper")(e)),
            }
        }
        nix::sched::setns(self.pidfd.as_fd(), SHARED).map_err(err("setns"))?;
        if let Some(cpus) = &self.cpus {
            // Only fails if the host's CPUs changed meanwhile; the command
            // then runs on fewer CPUs, which is said, not fatal.
            if let Err(e) = nix::sched::sched_setaffinity(Pid::from_raw(0), cpus) {
                eprintln!("paddock sandbox: restore the CPU affinity: {e}");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid1_stops_when_the_helper_gives_up() {
        let (ready, join) = pair().unwrap();
        drop(ready);
        assert_eq!(
            join.join().map_err(|e| e.to_string()),
            Err(
                "hand the network and IPC namespaces to PID 1 (wait for the helper): EPIPE: Broken pipe"
                    .to_string()
            )
        );
    }
}

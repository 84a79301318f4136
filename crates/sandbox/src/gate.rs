//! PID 1 waits, at the end of its set-up, until the helper has moved it
//! into the run's cgroup (only runs with caps have one): PID 1 makes its
//! cgroup namespace from the cgroup it is in, and the command must start
//! inside it. The helper writes one byte to a pipe once PID 1 is in; a
//! helper that fails closes the pipe without the byte, and PID 1 stops
//! (fail closed). Until then PID 1 runs only Paddock's set-up code.
//!
//! The network and IPC namespaces need no such step: the helper creates
//! them before it clones PID 1, which inherits them. (They used to be made
//! after the clone, overlapping PID 1's set-up on another CPU, and handed
//! over through a pidfd: that saved wall time on an idle two-CPU host but
//! cost CPU time on every start, and a busy or one-CPU host gains nothing
//! from the overlap; BENCHMARKS.md.)

use std::os::fd::{AsRawFd as _, OwnedFd};

use nix::errno::Errno;
use nix::fcntl::OFlag;

use crate::error::SetupError;

fn err(step: &'static str) -> impl FnOnce(Errno) -> SetupError {
    move |source| SetupError::Gate { step, source }
}

/// The helper's half: opens the gate once PID 1 is in the cgroup.
pub struct Open {
    write: OwnedFd,
}

/// PID 1's half: waits for the gate.
pub struct Wait {
    read: OwnedFd,
}

/// A gate; made before PID 1 is cloned, each side drops the other half.
pub fn pair() -> Result<(Open, Wait), SetupError> {
    let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(err("pipe"))?;
    Ok((Open { write }, Wait { read }))
}

impl Open {
    /// Lets PID 1 go on.
    pub fn open(self) {
        let _ = nix::unistd::write(&self.write, b"1");
    }
}

impl Wait {
    /// Blocks until the helper opened the gate; an error when it gave up.
    pub fn wait(self) -> Result<(), SetupError> {
        let mut byte = [0u8; 1];
        loop {
            match nix::unistd::read(self.read.as_raw_fd(), &mut byte) {
                Ok(1) => return Ok(()),
                Ok(_) => return Err(err("wait for the helper")(Errno::EPIPE)),
                Err(Errno::EINTR) => {}
                Err(e) => return Err(err("wait for the helper")(e)),
            }
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
            wait.wait().map_err(|e| e.to_string()),
            Err(
                "wait until PID 1 is in the run's cgroup (wait for the helper): EPIPE: Broken pipe"
                    .to_string()
            )
        );
    }

    #[test]
    fn an_opened_gate_lets_pid1_go_on() {
        let (open, wait) = pair().unwrap();
        open.open();
        assert_eq!(wait.wait().map_err(|e| e.to_string()), Ok(()));
    }
}

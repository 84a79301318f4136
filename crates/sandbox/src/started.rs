//! The run's "the command runs" signal, for a caller that must tell a
//! set-up failure from the command's own exit: both can end the helper
//! with [`exit::SETUP_FAILED`](crate::exit::SETUP_FAILED) (125), and the
//! command's stderr can say anything. The caller passes the write end of
//! a pipe ([`Policy::started`](crate::Policy::started), `pass_fd`); PID 1
//! writes [`STARTED`](crate::policy::STARTED) on it once the command's
//! `execve` succeeded, and every other holder closes it unwritten: the
//! helper right after PID 1 is cloned, the command at its `execve`
//! (close-on-exec). End of file without the byte means nothing of the
//! command ran. The command cannot write it (it never holds it; PID 1 is
//! not dumpable, so its descriptors cannot be opened through `/proc`), and
//! cannot keep it from being written (it is written before the command's
//! first instruction). Once the command ended, PID 1 writes on it how
//! many processes the command left running (`left.rs`), then closes it.

use std::os::fd::OwnedFd;

use crate::policy::STARTED;

/// The write end of the caller's pipe, owned by the helper.
#[derive(Debug)]
pub(crate) struct Started(OwnedFd);

impl Started {
    /// Takes the descriptor `fd` the policy names (the caller passed it to
    /// this freshly exec'd helper for this purpose alone:
    /// `Policy::started`); none when it names none or the number is not
    /// an open descriptor above stderr.
    pub(crate) fn take(fd: Option<i32>) -> Option<Started> {
        crate::pass_fd::take(fd?).map(Started)
    }

    /// Says the command runs. A caller that went away is no error of the
    /// run's.
    pub(crate) fn tell(&self) {
        let _ = nix::unistd::write(&self.0, &[STARTED]);
    }

    /// Says how many processes the command left running when it exited
    /// (`left.rs`), and closes this end.
    pub(crate) fn left(self, count: u64) {
        let _ = nix::unistd::write(&self.0, &crate::left::report(count));
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd as _;

    use super::*;

    /// Only an open descriptor above stderr is taken; the bytes written
    /// are [`STARTED`], then the count of processes left, and the write
    /// end is closed after it.
    #[test]
    fn only_an_open_descriptor_is_taken_and_it_says_started_once() {
        let (mut reader, writer) = std::io::pipe().unwrap();
        let fd = writer.as_raw_fd();
        std::mem::forget(writer);
        // No descriptor has this number (a closed one's number could be
        // reused meanwhile by another test's thread).
        let closed = i32::MAX;
        assert_eq!(
            [
                Started::take(None).is_none(),
                Started::take(Some(2)).is_none(),
                Started::take(Some(closed)).is_none()
            ],
            [true, true, true]
        );
        let started = Started::take(Some(fd)).unwrap();
        started.tell();
        started.left(2);
        let mut got = Vec::new();
        std::io::Read::read_to_end(&mut reader, &mut got).unwrap();
        assert_eq!(
            (got.first().copied(), crate::left::read(&got[1..])),
            (Some(STARTED), Some(2))
        );
    }
}

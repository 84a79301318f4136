//! One descriptor handed to one child, and to no other. Paddock keeps
//! every descriptor close-on-exec (`caps.rs`), because a descriptor that
//! is inheritable even for a moment is inherited by whatever another
//! thread starts in that moment (another job's engine, under `paddock
//! serve`). [`pass_fd`] clears close-on-exec on the descriptor in the
//! forked child only, between `fork` and `exec`, so the parent's stays
//! close-on-exec throughout. Used for the SSH deploy key of a push
//! (`paddock`'s `results/push.rs`): a sealed memory file the child git
//! holds and ssh opens as `/proc/<git>/fd/N`, never a file on disk.

use std::os::fd::{AsRawFd as _, BorrowedFd};
use std::os::unix::process::CommandExt as _;
use std::process::Command;

/// Makes `cmd`'s child inherit `fd` (same number); the caller's copy stays
/// close-on-exec. `fd` must stay open until the child has been spawned.
pub fn pass_fd<'a>(cmd: &'a mut Command, fd: BorrowedFd<'_>) -> &'a mut Command {
    let raw = fd.as_raw_fd();
    // SAFETY: the closure runs in the forked child before exec and makes
    // one async-signal-safe system call (fcntl F_SETFD) on a plain integer;
    // it allocates nothing and takes no lock. The descriptor number is the
    // caller's, open at the fork (the borrow outlives the spawn), so the
    // call changes only the child's copy of that descriptor.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(raw, libc::F_SETFD, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The child reads the descriptor; the parent's copy is still
    /// close-on-exec.
    #[test]
    fn the_child_inherits_the_descriptor_the_parent_keeps_it_private() {
        use std::io::Write as _;
        let (reader, mut writer) = std::io::pipe().unwrap();
        writer.write_all(b"passed\n").unwrap();
        drop(writer);
        let fd = std::os::fd::AsFd::as_fd(&reader);
        let n = fd.as_raw_fd();
        let mut cmd = Command::new("/bin/sh");
        // `/proc/self/fd/N` is cat's own descriptor N (as ssh opens the key):
        // dash reads no `<&N` above 9, and a test process has many open.
        cmd.arg("-c").arg(format!("cat /proc/self/fd/{n}"));
        let out = pass_fd(&mut cmd, fd).output().unwrap();
        let flags = unsafe_free_flags(n);
        assert_eq!(
            (String::from_utf8_lossy(&out.stdout).into_owned(), flags),
            ("passed\n".to_string(), libc::FD_CLOEXEC)
        );
    }

    fn unsafe_free_flags(fd: i32) -> i32 {
        // SAFETY: fcntl F_GETFD on a descriptor this test holds open.
        unsafe { libc::fcntl(fd, libc::F_GETFD) }
    }
}

//! One descriptor handed to one child, and to no other. Paddock keeps
//! every descriptor close-on-exec (`caps.rs`), because a descriptor that
//! is inheritable even for a moment is inherited by whatever another
//! thread starts in that moment (another job's engine, under `paddock
//! serve`). [`pass_fd`] clears close-on-exec on the descriptor in the
//! forked child only, between `fork` and `exec`, so the parent's stays
//! close-on-exec throughout. Used for the SSH deploy key of a push
//! (`paddock`'s `results/push.rs`): a sealed memory file the child git
//! holds and ssh opens as `/proc/<git>/fd/N`, never a file on disk.
//! [`take`] is the child's side: the descriptor it was handed, owned and
//! made close-on-exec again, so nothing the child starts inherits it (the
//! sandbox helper's "the command runs" pipe, `started.rs`).

use std::os::fd::{AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd};
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

/// Takes the descriptor `fd` this process was handed ([`pass_fd`]),
/// close-on-exec from now on; none when the number is not an open
/// descriptor above stderr. Call it once per descriptor, before anything
/// else of the process owns it.
pub fn take(fd: i32) -> Option<OwnedFd> {
    if fd <= 2 {
        return None;
    }
    // SAFETY: fcntl F_GETFD and F_SETFD on a plain integer; they change a
    // flag of the descriptor, if it is open, and nothing else.
    let set = unsafe {
        libc::fcntl(fd, libc::F_GETFD) != -1
            && libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) != -1
    };
    if !set {
        return None;
    }
    // SAFETY: `fd` is open (F_GETFD succeeded) and is the descriptor this
    // process's parent handed it for the caller's purpose alone; the
    // caller takes it once, before anything else owns or closes it, so
    // this is its only owner from here on.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
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

    /// Only an open descriptor above stderr is taken, and it is
    /// close-on-exec once taken.
    #[test]
    fn only_an_open_descriptor_is_taken_close_on_exec() {
        let (reader, writer) = std::io::pipe().unwrap();
        let n = writer.as_raw_fd();
        // Inheritable, as a handed descriptor is.
        // SAFETY: fcntl F_SETFD on a descriptor this test holds open.
        assert_ne!(unsafe { libc::fcntl(n, libc::F_SETFD, 0) }, -1);
        std::mem::forget(writer);
        let taken = take(n).unwrap();
        let flags = unsafe_free_flags(taken.as_raw_fd());
        drop(reader);
        assert_eq!(
            (take(2).is_none(), take(i32::MAX).is_none(), flags),
            (true, true, libc::FD_CLOEXEC)
        );
    }
}

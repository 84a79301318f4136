//! Default signal dispositions for a program Paddock starts (the `process`
//! rung's engine). `std::process::Command` starts programs through glibc's
//! `posix_spawn`, whose child sets glibc's two internal signals (32 and 33,
//! `SIGCANCEL` and `SIGSETXID` to glibc) to "ignored"; an ignored signal
//! stays ignored across `execve`, as does anything the caller ignored
//! (`SIGINT` and `SIGQUIT` of a shell's background job). A glibc program
//! reinstalls its own handlers for 32 and 33 and never notices. A musl
//! program uses them itself: Codex's native binary (musl, static) started
//! with them ignored never learns that its commands ended, and each shell
//! call hangs until Codex's own 10 s timeout with no result. Codex's npm
//! launcher hid this: Node resets every disposition when it starts.
//! [`start_with_defaults`] makes the child start as a fresh login would:
//! every signal at its default disposition, none blocked.

use std::os::unix::process::CommandExt as _;
use std::process::Command;

/// The highest signal number the kernel knows on Linux (`_NSIG - 1`).
const LAST_SIGNAL: libc::c_int = 64;

/// `struct sigaction` as the `rt_sigaction` system call takes it (the
/// kernel's layout on x86-64 and aarch64: handler, flags, restorer, mask).
#[repr(C)]
struct KernelSigaction {
    handler: libc::sighandler_t,
    flags: libc::c_ulong,
    restorer: usize,
    mask: u64,
}

/// Makes `cmd`'s child reset every signal to its default disposition
/// (`SIG_DFL`, 1 to 64 but `SIGKILL` and `SIGSTOP`) and unblock them all
/// just before it execs. It then starts through `fork` rather than
/// `posix_spawn` (a copy of the caller's page tables: meant for small,
/// single-threaded callers such as the `process` rung's supervisor).
pub fn start_with_defaults(cmd: &mut Command) -> &mut Command {
    // SAFETY: the closure runs in the forked child before exec and makes
    // only async-signal-safe system calls (rt_sigaction, rt_sigprocmask)
    // on stack values; it allocates nothing and takes no lock. The raw
    // rt_sigaction is used because glibc's sigaction refuses its internal
    // signals 32 and 33, which are exactly the ones to reset; the
    // structure passed matches the kernel's (`KernelSigaction`).
    unsafe {
        cmd.pre_exec(|| {
            let action = KernelSigaction {
                handler: libc::SIG_DFL,
                flags: 0,
                restorer: 0,
                mask: 0,
            };
            for sig in 1..=LAST_SIGNAL {
                if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                    continue;
                }
                // A signal the kernel refuses (none on Linux) keeps its
                // disposition: nothing to do about it here.
                let _ = libc::syscall(
                    libc::SYS_rt_sigaction,
                    sig,
                    &action as *const KernelSigaction,
                    std::ptr::null_mut::<KernelSigaction>(),
                    std::mem::size_of::<u64>(),
                );
            }
            let empty: u64 = 0;
            let _ = libc::syscall(
                libc::SYS_rt_sigprocmask,
                libc::SIG_SETMASK,
                &empty as *const u64,
                std::ptr::null_mut::<u64>(),
                std::mem::size_of::<u64>(),
            );
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn ignored_and_blocked(cmd: &mut Command) -> (String, String) {
        let out = cmd
            .args(["-c", "grep -E '^Sig(Ign|Blk)' /proc/self/status"])
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .unwrap()
                .trim()
                .to_string()
        };
        (field("SigIgn:"), field("SigBlk:"))
    }

    /// A child of `posix_spawn` starts with glibc's internal signals
    /// ignored (what this module exists for); with the defaults, nothing is
    /// ignored or blocked.
    #[test]
    fn a_child_starts_with_every_signal_at_its_default() {
        let (spawned, _) = ignored_and_blocked(&mut Command::new("/bin/sh"));
        assert_ne!(
            spawned, "0000000000000000",
            "posix_spawn ignored nothing here"
        );
        assert_eq!(
            ignored_and_blocked(start_with_defaults(&mut Command::new("/bin/sh"))),
            (
                "0000000000000000".to_string(),
                "0000000000000000".to_string()
            )
        );
    }
}

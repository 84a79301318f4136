//! The scheduling policy a sandboxed run gets: an ordinary time-shared
//! one, whatever its caller had. A caller under a real-time policy
//! (`chrt -r`: `SCHED_RR`, `SCHED_FIFO`, `SCHED_DEADLINE`) would otherwise
//! hand it to the helper, PID 1 and every process of the command, where
//! it defeats the run's caps: a CPU cap (v2's `cpu.max`, v1's CFS quota)
//! does not apply to a real-time task, and a v1 `cpu` hierarchy with
//! real-time group scheduling refuses one outright (`EINVAL` on
//! `cgroup.procs`: a new group has no real-time budget), which made every
//! sandboxed command under `chrt` fail or run uncapped, about a second
//! late (the half-joined cgroup's removal retried), its cgroups left
//! behind (BENCHMARKS.md, session 42). The helper, still single-threaded,
//! drops to `SCHED_OTHER` before it makes anything, so its threads, PID 1
//! and the command inherit that; its nice value is kept. Lowering a
//! policy needs no privilege.

use nix::errno::Errno;

use crate::error::SetupError;

/// Puts the calling thread (the helper, before it starts any other) on
/// `SCHED_OTHER` when it runs under any other policy than the time-shared
/// ones (`SCHED_OTHER`, `SCHED_BATCH`, `SCHED_IDLE`); returns whether it
/// changed anything.
pub fn time_shared() -> Result<bool, SetupError> {
    // SAFETY: sched_getscheduler(0) takes an integer (this thread) and
    // touches no memory of this process.
    let policy = unsafe { libc::sched_getscheduler(0) };
    if policy < 0 {
        return Err(SetupError::Scheduling {
            step: "read",
            source: Errno::last(),
        });
    }
    let policy = policy & !libc::SCHED_RESET_ON_FORK;
    if [libc::SCHED_OTHER, libc::SCHED_BATCH, libc::SCHED_IDLE].contains(&policy) {
        return Ok(false);
    }
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid `sched_param` that outlives the call,
    // which only reads it.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
    if rc != 0 {
        return Err(SetupError::Scheduling {
            step: "set SCHED_OTHER",
            source: Errno::last(),
        });
    }
    Ok(true)
}

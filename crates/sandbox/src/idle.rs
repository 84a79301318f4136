//! The lowest priority a process can give itself, for work that should
//! only use what nothing else wants: nice 19, the `SCHED_IDLE` policy and
//! the idle I/O class. Paddock's detached remover (`paddock __empty-trash`:
//! the trash's unmounts and deletions, the caches' cap) takes it, so that
//! the job started right after the one it cleans up after does not pay for
//! that work (issue #14). Lowering any of the three needs no privilege;
//! each applies to the calling thread, and to the threads and processes it
//! starts afterwards.

use nix::errno::Errno;

use crate::error::SetupError;

/// The kernel's `IOPRIO_WHO_PROCESS` (`linux/ioprio.h`; libc has no
/// constant for it).
const IOPRIO_WHO_PROCESS: libc::c_int = 1;
/// Where an I/O priority's class starts in its value.
const IOPRIO_CLASS_SHIFT: u32 = 13;
/// The idle I/O class: the disk only when no other class wants it (on a
/// scheduler that knows classes, BFQ; `none` and `mq-deadline` ignore it).
pub const IOPRIO_CLASS_IDLE: u32 = 3;

/// The `SCHED_IDLE` policy's number, as `/proc/PID/stat` and
/// `sched_getscheduler` give it.
pub const SCHED_IDLE: i32 = libc::SCHED_IDLE;

/// Gives the calling thread nice 19, `SCHED_IDLE` and the idle I/O class.
/// Every step is tried; the first that failed is returned (the thread
/// keeps what the others set).
pub fn lowest() -> Result<(), SetupError> {
    let nice = set_nice(19).map_err(|source| SetupError::Scheduling {
        step: "set nice 19",
        source,
    });
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid `sched_param` that outlives the call,
    // which only reads it.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    let policy = if rc == 0 {
        Ok(())
    } else {
        Err(SetupError::Scheduling {
            step: "set SCHED_IDLE",
            source: Errno::last(),
        })
    };
    // SAFETY: ioprio_set takes three integers and touches no memory of
    // this process; 0 is the calling thread.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_ioprio_set,
            IOPRIO_WHO_PROCESS,
            0,
            (IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT) as libc::c_int,
        )
    };
    let io = if rc == 0 {
        Ok(())
    } else {
        Err(SetupError::Scheduling {
            step: "set the idle I/O class",
            source: Errno::last(),
        })
    };
    nice.and(policy).and(io)
}

/// `setpriority(PRIO_PROCESS, 0, value)`: the calling thread's nice value.
fn set_nice(value: libc::c_int) -> Result<(), Errno> {
    // SAFETY: setpriority takes integers and touches no memory of this
    // process; 0 is the calling thread.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, value) };
    if rc == 0 {
        Ok(())
    } else {
        Err(Errno::last())
    }
}

/// The I/O class of the thread `tid` (its main thread for a process's id):
/// 0 (none set: it follows its nice value), 1 real-time, 2 best-effort,
/// [`IOPRIO_CLASS_IDLE`].
pub fn io_class(tid: i32) -> Result<u32, SetupError> {
    // SAFETY: ioprio_get takes integers and touches no memory of this
    // process.
    let rc = unsafe { libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, tid) };
    if rc < 0 {
        return Err(SetupError::Scheduling {
            step: "read the I/O class",
            source: Errno::last(),
        });
    }
    u32::try_from(rc >> IOPRIO_CLASS_SHIFT).map_err(|_| SetupError::Scheduling {
        step: "read the I/O class",
        source: Errno::ERANGE,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A thread that lowers itself has nice 19, `SCHED_IDLE` and the idle
    /// I/O class afterwards (read back from the kernel), and the thread
    /// that started it keeps its own.
    #[test]
    fn a_thread_lowered_reads_back_lowest_and_its_starter_is_untouched() {
        let before = (
            // SAFETY: as in `lowest`: integers only.
            unsafe { libc::sched_getscheduler(0) },
            io_class(0).unwrap(),
        );
        let lowered = std::thread::spawn(|| {
            let result = lowest().map_err(|e| e.to_string());
            // SAFETY: integers only.
            let policy = unsafe { libc::sched_getscheduler(0) };
            // SAFETY: integers only; errno is not read (19 is no error value).
            let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
            (result, policy, nice, io_class(0).unwrap())
        })
        .join()
        .unwrap();
        let after = (
            // SAFETY: integers only.
            unsafe { libc::sched_getscheduler(0) },
            io_class(0).unwrap(),
        );
        assert_eq!(
            (lowered, after),
            ((Ok(()), libc::SCHED_IDLE, 19, IOPRIO_CLASS_IDLE), before)
        );
    }
}

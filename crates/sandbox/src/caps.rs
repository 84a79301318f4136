//! Process-level restrictions applied by the sandbox's PID 1 after the
//! filesystem view is in place: rlimits (no core dumps), a new session (no
//! controlling terminal to inject input into), every capability dropped
//! (bounding, ambient, effective, permitted, inheritable) so that the
//! command has none even inside its own namespaces, and `no_new_privs`.
//! Also the one step every rung shares: no file descriptor of the caller
//! but stdio survives an `exec` ([`cloexec_inherited`]).

use nix::errno::Errno;
use nix::sys::resource::{setrlimit, Resource};

use crate::error::SetupError;

/// No core dumps: a crashing engine must not write its memory (tokens,
/// prompts) to disk.
pub fn rlimits() -> Result<(), SetupError> {
    setrlimit(Resource::RLIMIT_CORE, 0, 0).map_err(|source| SetupError::Rlimit {
        name: "RLIMIT_CORE",
        source,
    })
}

/// A new session without a controlling terminal (TIOCSTI injection into the
/// caller's terminal is impossible).
pub fn new_session() -> Result<(), SetupError> {
    nix::unistd::setsid()
        .map(|_| ())
        .map_err(|source| SetupError::Session { source })
}

/// Drops every capability of this process and of whatever it execs.
pub fn drop_all() -> Result<(), SetupError> {
    let err = |source| SetupError::Capabilities { source };
    // Bounding set: until the kernel says the capability does not exist.
    for cap in 0..64 {
        // SAFETY: prctl(PR_CAPBSET_DROP, cap) takes integer arguments only
        // and touches no memory of this process.
        let rc = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
        if rc != 0 {
            match Errno::last() {
                Errno::EINVAL => break,
                e => return Err(err(e)),
            }
        }
    }
    // SAFETY: PR_CAP_AMBIENT_CLEAR_ALL takes integer arguments only.
    let rc = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    if rc != 0 {
        return Err(err(Errno::last()));
    }
    capset_empty().map_err(err)
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

fn capset_empty() -> Result<(), Errno> {
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [CapData::default(); 2];
    // SAFETY: capset reads one header and two data structs (version 3);
    // both pointers are valid, properly laid out (repr(C)) and live for the
    // duration of the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_capset,
            &mut header as *mut CapHeader,
            data.as_ptr(),
        )
    };
    if rc != 0 {
        return Err(Errno::last());
    }
    Ok(())
}

/// Sets `no_new_privs`: no setuid bit or file capability can raise the
/// privileges of anything exec'd from here on.
pub fn no_new_privs() -> Result<(), SetupError> {
    // SAFETY: prctl(PR_SET_NO_NEW_PRIVS, 1) takes integer arguments only.
    let rc = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    if rc != 0 {
        return Err(SetupError::NoNewPrivs {
            source: Errno::last(),
        });
    }
    Ok(())
}

/// Kills this process with SIGKILL when its parent dies.
pub fn die_with_parent() -> Result<(), Errno> {
    // SAFETY: prctl(PR_SET_PDEATHSIG, SIGKILL) takes integer arguments only.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    if rc != 0 {
        return Err(Errno::last());
    }
    Ok(())
}

/// Makes this process non-dumpable: its /proc entries (environment, memory)
/// belong to root and cannot be read or ptraced by the command.
pub fn not_dumpable() -> Result<(), SetupError> {
    // SAFETY: prctl(PR_SET_DUMPABLE, 0) takes integer arguments only.
    let rc = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    if rc != 0 {
        return Err(SetupError::Capabilities {
            source: Errno::last(),
        });
    }
    Ok(())
}

/// Marks every file descriptor above stderr close-on-exec, so that nothing
/// the caller left open (`paddock sandbox -- cmd 7</secret`, a descriptor a
/// parent leaked into `paddock run`) reaches a program this process or its
/// children exec: the helper, the sandboxed command, an engine on the
/// `process` rung. One `close_range(2)` call (Linux 5.11); older kernels
/// get the same through `/proc/self/fd`. Descriptors this process still
/// uses stay open; Rust opens its own close-on-exec anyway.
pub fn cloexec_inherited() -> Result<(), Errno> {
    // SAFETY: close_range(3, ~0, CLOSE_RANGE_CLOEXEC) takes integer
    // arguments only; it sets a flag on descriptors and closes none.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    match Errno::last() {
        Errno::ENOSYS | Errno::EINVAL => cloexec_by_listing(),
        e => Err(e),
    }
}

/// [`cloexec_inherited`] without `close_range`: every descriptor listed in
/// `/proc/self/fd`.
fn cloexec_by_listing() -> Result<(), Errno> {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag};
    let dir = std::fs::read_dir("/proc/self/fd")
        .map_err(|e| e.raw_os_error().map_or(Errno::EBADF, Errno::from_raw))?;
    let fds: Vec<i32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    for fd in fds {
        // The directory's own descriptor is gone by now: EBADF is fine.
        match fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)) {
            Ok(_) | Err(Errno::EBADF) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

//! seccomp: the system calls the command may never make, applied last by
//! the sandbox's PID 1 (after the mounts it needs itself). Denied with
//! EPERM: `ptrace`, `process_vm_readv/writev` and `pidfd_getfd` (what
//! that does and does not cover is below), every mount and
//! namespace operation, kexec, modules, bpf, perf, keyrings, raw, packet,
//! netlink and vsock sockets, terminal input injection, and any file mode
//! with the setuid or setgid bit (`chmod` and its kin, `mknod`, `creat`,
//! `open`/`openat` that create a file): no file the job leaves behind
//! raises the privileges of whoever runs it later, even where the job's
//! uid is the host's root. Denied with ENOSYS (so libraries fall back):
//! io_uring, clone3 (whose flags a filter cannot read, so glibc falls back
//! to clone, whose flags it can) and openat2 (whose mode sits in a struct
//! a filter cannot read; callers fall back to openat).
//!
//! What "ptrace" covers: `ptrace`, `process_vm_readv/writev` and
//! `pidfd_getfd` are denied to every process of the job. `/proc/PID/mem`
//! is no system call: it is the kernel's ptrace access check, which lets a
//! process of the job open a sibling's memory (same uid, dumpable: one
//! trust domain), never PID 1's (non-dumpable) and never a process outside
//! the job (not in its PID namespace). docs/sandbox.md says the same.
//!
//! It is one classic-BPF program of about 70 instructions, assembled by
//! `bpf.rs` from the tables below (the only list of the calls), so
//! the kernel checks, converts and JITs one short program, and its
//! per-call action cache costs (calls × length) stay small. The layout:
//!
//! 1. load `arch`; any audit architecture but this build's (a 32-bit
//!    compat call) kills the process, as seccompiler's programs did;
//! 2. load `nr`; on x86_64 a number with the x32 bit (`__X32_SYSCALL_BIT`)
//!    or above returns ENOSYS. This hardening is new with this program: the x32 ABI
//!    numbers its calls from that bit, so the number comparisons of the
//!    two seccompiler programs it replaces let every x32 call through (on
//!    kernels built with x32 support);
//! 3. a balanced binary search over the sorted numbers, grouped in runs of
//!    consecutive numbers with the same outcome: one JGE per inner node,
//!    one JEQ (or one or two JGE/JGT bound checks for a longer run) per
//!    leaf, to the run's outcome; the numbers in no run are allowed;
//! 4. the outcomes that read an argument (its low 32 bits, all the kernel
//!    reads of these arguments): `socket` and `socketpair` (any family
//!    but those in `FAMILIES`, or type `SOCK_RAW` or `SOCK_PACKET`
//!    whatever the flags: the kernel makes an `AF_INET` `SOCK_PACKET`
//!    socket an `AF_PACKET` one, loading its module), `clone` (one
//!    JSET with every `CLONE_NS` flag), `ioctl` (`TIOCSTI`, `TIOCLINUX`),
//!    the open calls (flags with `O_CREAT` or `O_TMPFILE`, then the mode)
//!    and the mode calls (one JSET with `S_ISUID | S_ISGID`);
//!    EPERM when they match, else allowed;
//! 5. the four returns every jump ends at: ALLOW, ERRNO(EPERM),
//!    ERRNO(ENOSYS), KILL_PROCESS.

use std::mem::offset_of;

use crate::bpf::{Asm, Label, Target::Next};
use crate::error::SetupError;

/// System calls denied outright.
const DENIED: &[(&str, i64)] = &[
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("move_mount", libc::SYS_move_mount),
    ("open_tree", libc::SYS_open_tree),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("reboot", libc::SYS_reboot),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("acct", libc::SYS_acct),
    ("syslog", libc::SYS_syslog),
    ("quotactl", libc::SYS_quotactl),
    ("pidfd_getfd", libc::SYS_pidfd_getfd),
];

/// System calls that fail as if the kernel lacked them.
const ABSENT: &[(&str, i64)] = &[
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("clone3", libc::SYS_clone3),
    ("openat2", libc::SYS_openat2),
];

/// The mode bits no file may get: setuid and setgid.
const SET_ID: u32 = libc::S_ISUID | libc::S_ISGID;

/// `open` flags that create a file (`O_TMPFILE` without its
/// `O_DIRECTORY` part).
const CREATING: i32 = libc::O_CREAT | (libc::O_TMPFILE & !libc::O_DIRECTORY);

/// Calls whose argument `.2` is a file mode.
const MODES: &[(&str, i64, u32)] = &[
    ("fchmod", libc::SYS_fchmod, 1),
    ("fchmodat", libc::SYS_fchmodat, 2),
    ("fchmodat2", libc::SYS_fchmodat2, 2),
    ("mknodat", libc::SYS_mknodat, 2),
];

/// The same, for calls only the older ABIs have.
#[cfg(target_arch = "x86_64")]
const LEGACY_MODES: &[(&str, i64, u32)] = &[
    ("chmod", libc::SYS_chmod, 1),
    ("creat", libc::SYS_creat, 1),
    ("mknod", libc::SYS_mknod, 1),
];
#[cfg(not(target_arch = "x86_64"))]
const LEGACY_MODES: &[(&str, i64, u32)] = &[];

/// Calls with open flags at argument `.2` and the mode right after.
#[cfg(target_arch = "x86_64")]
const OPENS: &[(&str, i64, u32)] = &[("open", libc::SYS_open, 1), ("openat", libc::SYS_openat, 2)];
#[cfg(not(target_arch = "x86_64"))]
const OPENS: &[(&str, i64, u32)] = &[("openat", libc::SYS_openat, 2)];

/// The socket families a job may open (socket and socketpair's first
/// argument); every other is denied. Before, the list named the denied
/// ones (netlink, packet, vsock), and a job could open any other family
/// its kernel has: on a distribution kernel, asking for one (AF_ALG,
/// AF_TIPC, AF_RDS, AF_CAN, Bluetooth, ...) loads its module, the code
/// behind a run of privilege-escalation bugs.
const FAMILIES: &[(&str, i32)] = &[
    ("AF_UNIX", libc::AF_UNIX),
    ("AF_INET", libc::AF_INET),
    ("AF_INET6", libc::AF_INET6),
];

/// Namespace flags `clone` may not carry.
const CLONE_NS: &[i32] = &[
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

/// This build's ELF machine (linux/elf-em.h), where Paddock has a filter.
const MACHINE: Option<u32> = if cfg!(target_arch = "x86_64") {
    Some(62)
} else if cfg!(target_arch = "aarch64") {
    Some(183)
} else if cfg!(target_arch = "riscv64") {
    Some(243)
} else {
    None
};

/// This build's audit architecture (linux/audit.h): the machine,
/// `__AUDIT_ARCH_64BIT` and, little-endian, `__AUDIT_ARCH_LE`.
const AUDIT_ARCH: Option<u32> = match MACHINE {
    Some(machine) if cfg!(target_endian = "little") => Some(machine | 0x8000_0000 | 0x4000_0000),
    Some(machine) => Some(machine | 0x8000_0000),
    None => None,
};

/// The x32 ABI's bit in system call numbers (`__X32_SYSCALL_BIT`), on
/// x86_64 only.
const X32_SYSCALL_BIT: Option<u32> = if cfg!(target_arch = "x86_64") {
    Some(0x4000_0000)
} else {
    None
};

/// The obsolete socket type `SOCK_PACKET` (10), which the kernel turns
/// into an `AF_PACKET` socket whatever family it is asked with (libc marks
/// it deprecated: what it does is what is denied).
const SOCK_PACKET: i32 = 10;

/// The kernel's `SOCK_TYPE_MASK`: a socket type without its flags.
const SOCK_TYPE_MASK: u32 = 0xf;

// Offsets in `struct seccomp_data` (all fit in a u32).
const NR: u32 = offset_of!(libc::seccomp_data, nr) as u32;
const ARCH: u32 = offset_of!(libc::seccomp_data, arch) as u32;

/// The offset of the low 32 bits of argument `i` (each a u64 in native
/// byte order).
const fn arg_low(i: u32) -> u32 {
    let arg = offset_of!(libc::seccomp_data, args) as u32 + 8 * i;
    if cfg!(target_endian = "big") {
        arg + 4
    } else {
        arg
    }
}

const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const KILL_PROCESS: u32 = libc::SECCOMP_RET_KILL_PROCESS;

const fn errno(errno: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (errno as u32 & libc::SECCOMP_RET_DATA)
}

/// Where the program's jumps end.
#[derive(Clone, Copy)]
struct Leaves {
    allow: Label,
    eperm: Label,
    enosys: Label,
    kill: Label,
    socket: Label,
    clone: Label,
    ioctl: Label,
    /// Open flags at argument 1 or 2 (index 0 unused).
    creating: [Label; 3],
    /// A mode at argument 1, 2 or 3 (index 0 unused).
    mode: [Label; 4],
}

/// Consecutive system call numbers with the same outcome.
#[derive(Clone, Copy, Debug)]
struct Run {
    first: u32,
    last: u32,
    leaf: Label,
}

/// The one program (see the module documentation for its layout).
pub fn program() -> Result<Vec<libc::sock_filter>, SetupError> {
    let audit_arch = AUDIT_ARCH.ok_or_else(|| {
        error(format!(
            "unsupported architecture {}",
            std::env::consts::ARCH
        ))
    })?;
    let mut a = Asm::new();
    let leaves = Leaves {
        allow: a.label(),
        eperm: a.label(),
        enosys: a.label(),
        kill: a.label(),
        socket: a.label(),
        clone: a.label(),
        ioctl: a.label(),
        creating: [a.label(), a.label(), a.label()],
        mode: [a.label(), a.label(), a.label(), a.label()],
    };
    let runs = runs(leaves)?;

    a.load(ARCH);
    a.jeq(audit_arch, Next, leaves.kill);
    a.load(NR);
    let mut max = u32::MAX;
    if let Some(x32) = X32_SYSCALL_BIT {
        a.jge(x32, leaves.enosys, Next);
        max = x32 - 1;
    }
    if let Some(run) = runs.iter().find(|r| r.last > max) {
        return Err(error(format!("system call number {} too high", run.last)));
    }
    search(&mut a, &runs, 0, max, leaves.allow);

    a.bind(leaves.socket);
    a.load(arg_low(0));
    let kind = a.label();
    for (_, family) in FAMILIES {
        a.jeq(word(*family)?, kind, Next);
    }
    a.ja(leaves.eperm);
    a.bind(kind);
    a.load(arg_low(1));
    a.and(SOCK_TYPE_MASK);
    a.jeq(word(libc::SOCK_RAW)?, leaves.eperm, Next);
    a.jeq(word(SOCK_PACKET)?, leaves.eperm, leaves.allow);

    a.bind(leaves.clone);
    a.load(arg_low(0));
    let mut namespaces = 0;
    for flag in CLONE_NS {
        // One JSET with them all is "any of them" only for single bits.
        let bit = word(*flag)?;
        if !bit.is_power_of_two() {
            return Err(error(format!("clone flag {bit:#x} is not one bit")));
        }
        namespaces |= bit;
    }
    a.jset(namespaces, leaves.eperm, leaves.allow);

    a.bind(leaves.ioctl);
    a.load(arg_low(1));
    a.jeq(word(libc::TIOCSTI)?, leaves.eperm, Next);
    a.jeq(word(libc::TIOCLINUX)?, leaves.eperm, leaves.allow);

    // Open flags that create a file, then the mode right after; modes.
    for i in 1..=2 {
        a.bind(leaves.creating[i]);
        a.load(arg_low(i as u32));
        a.jset(word(CREATING)?, leaves.mode[i + 1], leaves.allow);
    }
    for i in 1..=3 {
        a.bind(leaves.mode[i]);
        a.load(arg_low(i as u32));
        a.jset(SET_ID, leaves.eperm, leaves.allow);
    }

    for (leaf, action) in [
        (leaves.allow, ALLOW),
        (leaves.eperm, errno(libc::EPERM)),
        (leaves.enosys, errno(libc::ENOSYS)),
        (leaves.kill, KILL_PROCESS),
    ] {
        a.bind(leaf);
        a.ret(action);
    }
    a.finish()
}

/// Every filtered call's number and leaf, sorted and grouped in runs.
fn runs(leaves: Leaves) -> Result<Vec<Run>, SetupError> {
    let with_arguments = [
        ("socket", libc::SYS_socket, leaves.socket),
        ("socketpair", libc::SYS_socketpair, leaves.socket),
        ("clone", libc::SYS_clone, leaves.clone),
        ("ioctl", libc::SYS_ioctl, leaves.ioctl),
    ];
    let arg = |labels: &[Label], (name, nr, i): (&'static str, i64, u32)| {
        labels
            .get(i as usize)
            .map(|leaf| (name, nr, *leaf))
            .ok_or_else(|| error(format!("{name}: no leaf for argument {i}")))
    };
    let mut calls: Vec<(&str, i64, Label)> = DENIED
        .iter()
        .map(|(name, nr)| (*name, *nr, leaves.eperm))
        .chain(ABSENT.iter().map(|(name, nr)| (*name, *nr, leaves.enosys)))
        .chain(with_arguments)
        .collect();
    for call in MODES.iter().chain(LEGACY_MODES) {
        calls.push(arg(&leaves.mode, *call)?);
    }
    for call in OPENS {
        calls.push(arg(&leaves.creating, *call)?);
    }
    let mut numbered = Vec::with_capacity(calls.len());
    for (name, nr, leaf) in calls {
        let nr = u32::try_from(nr).map_err(|_| error(format!("{name} has number {nr}")))?;
        numbered.push((nr, name, leaf));
    }
    numbered.sort_unstable_by_key(|(nr, _, _)| *nr);
    let mut runs: Vec<Run> = Vec::with_capacity(numbered.len());
    for (nr, name, leaf) in numbered {
        match runs.last_mut() {
            Some(run) if run.last == nr => {
                return Err(error(format!("{name} ({nr}) is listed twice")));
            }
            // Sorted: nr > run.last.
            Some(run) if nr - run.last == 1 && run.leaf == leaf => run.last = nr,
            _ => runs.push(Run {
                first: nr,
                last: nr,
                leaf,
            }),
        }
    }
    Ok(runs)
}

/// Emits the search for the run holding `nr`, known to lie in `min..=max`
/// (as do `runs`, sorted); a number in none of them goes to `allow`.
fn search(a: &mut Asm, runs: &[Run], min: u32, max: u32, allow: Label) {
    match runs {
        [] => a.ja(allow),
        [run] => match (run.first > min, run.last < max) {
            (false, false) => a.ja(run.leaf),
            (true, false) => a.jge(run.first, run.leaf, allow),
            (false, true) => a.jgt(run.last, allow, run.leaf),
            (true, true) if run.first == run.last => a.jeq(run.first, run.leaf, allow),
            (true, true) => {
                a.jge(run.first, Next, allow);
                a.jgt(run.last, allow, run.leaf);
            }
        },
        _ => {
            let (low, high) = runs.split_at(runs.len() / 2);
            let split = high[0].first;
            let upper = a.label();
            a.jge(split, upper, Next);
            // `split` > `low`'s numbers >= 0: no wrap.
            search(a, low, min, split.saturating_sub(1), allow);
            a.bind(upper);
            search(a, high, split, max, allow);
        }
    }
}

/// A table's value as the 32-bit word a BPF comparison reads.
fn word<T: Copy + TryInto<u32> + std::fmt::Display>(value: T) -> Result<u32, SetupError> {
    value
        .try_into()
        .map_err(|_| error(format!("{value} does not fit in 32 bits")))
}

fn error(detail: impl Into<String>) -> SetupError {
    SetupError::Seccomp {
        detail: detail.into(),
    }
}

/// Installs the program on the calling thread (and what it forks and
/// execs). `no_new_privs` must already be set.
pub fn apply() -> Result<(), SetupError> {
    let mut program = program()?;
    let fprog = libc::sock_fprog {
        len: u16::try_from(program.len())
            .map_err(|_| error(format!("{} instructions", program.len())))?,
        filter: program.as_mut_ptr(),
    };
    // SAFETY: seccomp(SECCOMP_SET_MODE_FILTER, 0, &fprog) only reads
    // `fprog` and the `fprog.len` instructions it points to (the kernel
    // copies them before it returns; `filter` is `*mut` only in the C
    // type); `fprog` and `program` outlive the call. It changes no memory
    // of this process, only which system calls it may make from now on.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0 as libc::c_uint,
            &fprog as *const libc::sock_fprog,
        )
    };
    if rc != 0 {
        return Err(error(format!(
            "install the filter: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };

    use super::{
        errno, ABSENT, ALLOW, AUDIT_ARCH, CLONE_NS, CREATING, DENIED, FAMILIES, KILL_PROCESS,
        LEGACY_MODES, MODES, OPENS, SET_ID, SOCK_PACKET,
    };
    use crate::error::SetupError;

    fn arch() -> Result<TargetArch, SetupError> {
        std::env::consts::ARCH
            .try_into()
            .map_err(|e: seccompiler::BackendError| SetupError::Seccomp {
                detail: format!("unsupported architecture {}: {e}", std::env::consts::ARCH),
            })
    }

    fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SetupError> {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(|e| {
            SetupError::Seccomp {
                detail: e.to_string(),
            }
        })
    }

    fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule, SetupError> {
        SeccompRule::new(conds).map_err(|e| SetupError::Seccomp {
            detail: e.to_string(),
        })
    }

    /// The reference: the two seccompiler programs this module used to
    /// install, denied (EPERM) and absent (ENOSYS), in that order.
    fn reference() -> Result<[BpfProgram; 2], SetupError> {
        let mut deny: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        for (_, nr) in DENIED {
            deny.insert(*nr, vec![]);
        }
        // Any family but the allowed ones: one rule, its conditions all
        // holding.
        let mut other_family = Vec::new();
        for (_, family) in FAMILIES {
            other_family.push(cond(0, SeccompCmpOp::Ne, *family as u64)?);
        }
        let mut socket_rules = vec![rule(other_family)?];
        // SOCK_RAW and SOCK_PACKET, whatever the SOCK_NONBLOCK/SOCK_CLOEXEC
        // bits.
        for kind in [libc::SOCK_RAW, SOCK_PACKET] {
            socket_rules.push(rule(vec![cond(
                1,
                SeccompCmpOp::MaskedEq(0xf),
                kind as u64,
            )?])?);
        }
        deny.insert(libc::SYS_socket, socket_rules.clone());
        deny.insert(libc::SYS_socketpair, socket_rules);
        let mut clone_rules = Vec::new();
        for flag in CLONE_NS {
            clone_rules.push(rule(vec![cond(
                0,
                SeccompCmpOp::MaskedEq(*flag as u64),
                *flag as u64,
            )?])?);
        }
        deny.insert(libc::SYS_clone, clone_rules);
        deny.insert(
            libc::SYS_ioctl,
            vec![
                rule(vec![cond(1, SeccompCmpOp::Eq, libc::TIOCSTI)?])?,
                rule(vec![cond(1, SeccompCmpOp::Eq, libc::TIOCLINUX)?])?,
            ],
        );
        let bits = |mask: u32| [mask & libc::S_ISUID, mask & libc::S_ISGID];
        for (_, nr, i) in MODES.iter().chain(LEGACY_MODES) {
            let mut rules = Vec::new();
            for bit in bits(SET_ID) {
                let arg = u8::try_from(*i).unwrap();
                rules.push(rule(vec![cond(
                    arg,
                    SeccompCmpOp::MaskedEq(bit.into()),
                    bit.into(),
                )?])?);
            }
            deny.insert(*nr, rules);
        }
        for (_, nr, i) in OPENS {
            let mut rules = Vec::new();
            let flags = u8::try_from(*i).unwrap();
            for create in [libc::O_CREAT, CREATING & !libc::O_CREAT] {
                let create = create as u64;
                for bit in bits(SET_ID) {
                    rules.push(rule(vec![
                        cond(flags, SeccompCmpOp::MaskedEq(create), create)?,
                        cond(flags + 1, SeccompCmpOp::MaskedEq(bit.into()), bit.into())?,
                    ])?);
                }
            }
            deny.insert(*nr, rules);
        }
        let mut absent: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        for (_, nr) in ABSENT {
            absent.insert(*nr, vec![]);
        }
        let arch = arch()?;
        let compile = |rules, errno: i32| -> Result<BpfProgram, SetupError> {
            let filter = SeccompFilter::new(
                rules,
                SeccompAction::Allow,
                SeccompAction::Errno(errno as u32),
                arch,
            )
            .map_err(|e| SetupError::Seccomp {
                detail: e.to_string(),
            })?;
            filter
                .try_into()
                .map_err(|e: seccompiler::BackendError| SetupError::Seccomp {
                    detail: e.to_string(),
                })
        };
        Ok([compile(deny, libc::EPERM)?, compile(absent, libc::ENOSYS)?])
    }

    /// An instruction: code, jt, jf, k.
    type Insn = (u16, u8, u8, u32);

    /// The filters as the kernel gets them, in the order they are installed.
    struct Filters {
        new: Vec<Vec<Insn>>,
        reference: Vec<Vec<Insn>>,
    }

    fn filters() -> Filters {
        Filters {
            new: vec![super::program()
                .unwrap()
                .iter()
                .map(|i| (i.code, i.jt, i.jf, i.k))
                .collect()],
            reference: reference()
                .unwrap()
                .iter()
                .map(|p| p.iter().map(|i| (i.code, i.jt, i.jf, i.k)).collect())
                .collect(),
        }
    }

    /// `struct seccomp_data` in native byte order.
    fn data(arch: u32, nr: u32, args: [u64; 6]) -> [u8; 64] {
        let mut d = [0; 64];
        d[0..4].copy_from_slice(&nr.to_ne_bytes());
        d[4..8].copy_from_slice(&arch.to_ne_bytes());
        d[8..16].copy_from_slice(&0x7fff_1234_5678_u64.to_ne_bytes());
        for (i, arg) in args.iter().enumerate() {
            d[16 + 8 * i..24 + 8 * i].copy_from_slice(&arg.to_ne_bytes());
        }
        d
    }

    /// Runs a classic-BPF seccomp program on `data`, as the kernel does.
    fn run(program: &[Insn], data: &[u8; 64]) -> u32 {
        let (mut pc, mut a) = (0, 0u32);
        loop {
            let Some(&(code, jt, jf, k)) = program.get(pc) else {
                panic!("ran off the end ({pc})");
            };
            let jump = |taken: bool| usize::from(if taken { jt } else { jf });
            pc += 1;
            match code {
                // LD W ABS
                0x20 => {
                    let k = k as usize;
                    assert!(k & 3 == 0 && k + 4 <= data.len(), "load at {k}");
                    a = u32::from_ne_bytes(data[k..k + 4].try_into().unwrap());
                }
                // ALU AND K
                0x54 => a &= k,
                // JMP JA, JEQ K, JGT K, JGE K, JSET K
                0x05 => pc += k as usize,
                0x15 => pc += jump(a == k),
                0x25 => pc += jump(a > k),
                0x35 => pc += jump(a >= k),
                0x45 => pc += jump(a & k != 0),
                // RET K
                0x06 => return k,
                _ => panic!("unknown opcode {code:#x} at {}", pc - 1),
            }
        }
    }

    /// What the kernel answers with `filters` installed in that order: it
    /// runs the newest first and keeps a later result only when its action
    /// is strictly more restrictive, that is lower as an `s32` after
    /// masking with `SECCOMP_RET_ACTION_FULL` (KILL_PROCESS is lowest).
    fn kernel(filters: &[Vec<Insn>], data: &[u8; 64]) -> u32 {
        let rank = |ret: u32| (ret & libc::SECCOMP_RET_ACTION_FULL) as i32;
        let mut ret = libc::SECCOMP_RET_ALLOW;
        for filter in filters.iter().rev() {
            let current = run(filter, data);
            if rank(current) < rank(ret) {
                ret = current;
            }
        }
        ret
    }

    fn native() -> u32 {
        AUDIT_ARCH.unwrap()
    }

    /// An ioctl command as an argument (`c_ulong` on glibc, `c_int` on musl).
    fn cmd(value: impl Copy + TryInto<u32> + std::fmt::Display) -> u64 {
        u64::from(super::word(value).unwrap())
    }

    fn nr(call: i64) -> u32 {
        u32::try_from(call).unwrap()
    }

    impl Filters {
        /// (new, reference) for one call.
        fn both(&self, arch: u32, nr: u32, args: [u64; 6]) -> (u32, u32) {
            let d = data(arch, nr, args);
            (kernel(&self.new, &d), kernel(&self.reference, &d))
        }

        fn same(&self, nr: u32, args: [u64; 6]) {
            let (new, reference) = self.both(native(), nr, args);
            assert_eq!(
                new, reference,
                "nr {nr}, args {args:#x?}: new {new:#x}, reference {reference:#x}"
            );
        }
    }

    #[test]
    fn the_reference_compiles_for_this_architecture() {
        assert!(reference().unwrap().iter().all(|p| !p.is_empty()));
    }

    #[test]
    fn every_number_up_to_600_gives_the_reference_action() {
        let f = filters();
        let netlink_tiocsti = [libc::AF_NETLINK as u64, cmd(libc::TIOCSTI), 0, 0, 0, 0];
        for nr in 0..=600 {
            f.same(nr, [0; 6]);
            f.same(nr, [u64::MAX; 6]);
            f.same(nr, netlink_tiocsti);
        }
        // The outcomes are all there.
        let action = |call: i64| f.both(native(), nr(call), [0; 6]).0;
        assert_eq!(action(libc::SYS_ptrace), errno(libc::EPERM));
        assert_eq!(action(libc::SYS_clone3), errno(libc::ENOSYS));
        assert_eq!(action(libc::SYS_read), ALLOW);
    }

    #[test]
    fn sockets_give_the_reference_action() {
        let f = filters();
        let types = [
            libc::SOCK_STREAM,
            libc::SOCK_DGRAM,
            libc::SOCK_RAW,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            libc::SOCK_SEQPACKET,
            // Caught only with the whole SOCK_TYPE_MASK (0xf).
            libc::SOCK_RAW | 8,
            // The kernel makes an AF_INET one an AF_PACKET socket (and
            // loads that family's module) before it looks at the family.
            SOCK_PACKET,
            SOCK_PACKET | libc::SOCK_CLOEXEC,
        ];
        let mut denied = 0;
        for call in [libc::SYS_socket, libc::SYS_socketpair] {
            for domain in 0..=64u64 {
                for kind in types {
                    let args = [domain, kind as u64, 0, 0, 0, 0];
                    f.same(nr(call), args);
                    denied += usize::from(f.both(native(), nr(call), args).0 != ALLOW);
                }
            }
        }
        // Per call: the 62 other domains × 8 types, and SOCK_RAW and
        // SOCK_PACKET twice each (with and without flags) for the 3
        // allowed families.
        assert_eq!(denied, 2 * (62 * 8 + 3 * 4));
        // The families a distribution kernel loads a module for on
        // demand are among them, whatever the type.
        for domain in [
            libc::AF_ALG,
            libc::AF_TIPC,
            libc::AF_RDS,
            libc::AF_CAN,
            libc::AF_BLUETOOTH,
            libc::AF_XDP,
            libc::AF_KEY,
            libc::AF_NETLINK,
            libc::AF_PACKET,
            libc::AF_VSOCK,
        ] {
            for kind in [libc::SOCK_STREAM, libc::SOCK_DGRAM, libc::SOCK_SEQPACKET] {
                let args = [domain as u64, kind as u64, 0, 0, 0, 0];
                assert_eq!(
                    f.both(native(), nr(libc::SYS_socket), args).0,
                    errno(libc::EPERM),
                    "family {domain}"
                );
            }
        }
    }

    #[test]
    fn clone_flags_give_the_reference_action() {
        let f = filters();
        let all_namespaces = CLONE_NS.iter().fold(0, |m, flag| m | *flag as u32);
        let thread = libc::CLONE_VM
            | libc::CLONE_FS
            | libc::CLONE_FILES
            | libc::CLONE_SIGHAND
            | libc::CLONE_THREAD
            | libc::CLONE_SYSVSEM
            | libc::CLONE_SETTLS
            | libc::CLONE_PARENT_SETTID
            | libc::CLONE_CHILD_CLEARTID;
        let mut flags: Vec<u64> = (0..32).map(|bit| 1 << bit).collect();
        flags.extend([
            0,
            libc::SIGCHLD as u64,
            thread as u64,
            (libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD) as u64,
            (libc::CLONE_NEWUSER | libc::CLONE_NEWNS) as u64,
            u64::from(all_namespaces),
            u64::from(!all_namespaces),
            u64::from(u32::MAX),
        ]);
        let mut denied = 0;
        for flags in flags {
            for high in [0, 1 << 32, 0xffff_ffff_0000_0000] {
                let args = [flags | high, 0, 0, 0, 0, 0];
                f.same(nr(libc::SYS_clone), args);
                denied += usize::from(f.both(native(), nr(libc::SYS_clone), args).0 != ALLOW);
            }
        }
        // Each namespace bit alone, both pairs and all, and u32::MAX,
        // whatever the high bits.
        assert_eq!(denied, 3 * (CLONE_NS.len() + 3));
    }

    #[test]
    fn ioctl_commands_give_the_reference_action() {
        let f = filters();
        let tiocsti = cmd(libc::TIOCSTI);
        let tioclinux = cmd(libc::TIOCLINUX);
        let commands = [
            tiocsti,
            tioclinux,
            cmd(libc::TCGETS),
            cmd(libc::TCSETS),
            cmd(libc::FIONREAD),
            cmd(libc::TIOCGWINSZ),
            cmd(libc::TIOCSCTTY),
            0,
            u64::from(u32::MAX),
            tiocsti | 1 << 32,
            tiocsti | 0xffff_ffff_0000_0000,
            tioclinux | 0x8000_0000_0000_0000,
            tiocsti + 1,
        ];
        let mut denied = 0;
        for cmd in commands {
            for fd in [0, 3] {
                let args = [fd, cmd, 0, 0, 0, 0];
                f.same(nr(libc::SYS_ioctl), args);
                denied += usize::from(f.both(native(), nr(libc::SYS_ioctl), args).0 != ALLOW);
            }
        }
        // TIOCSTI and TIOCLINUX, with and without high bits, for 2 fds.
        assert_eq!(denied, 2 * 5);
    }

    #[test]
    fn set_id_modes_give_the_reference_action() {
        let f = filters();
        let modes: [u64; 8] = [
            0o644,
            0o755,
            0o1777,
            0o4755,
            0o2755,
            0o6755,
            (libc::S_IFREG | 0o4755).into(),
            0o4755 | 1 << 32,
        ];
        let flags = [
            libc::O_RDONLY,
            libc::O_WRONLY | libc::O_CREAT,
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL,
            libc::O_TMPFILE | libc::O_WRONLY,
            libc::O_WRONLY | libc::O_TRUNC,
        ];
        let mut denied = Vec::new();
        for (name, call, i) in MODES.iter().chain(LEGACY_MODES) {
            for mode in modes {
                let mut args = [3, 0, 0, 0, 0, 0];
                args[*i as usize] = mode;
                f.same(nr(*call), args);
                if f.both(native(), nr(*call), args).0 != ALLOW {
                    denied.push((*name, mode));
                }
            }
        }
        let mut created = 0;
        for (_, call, i) in OPENS {
            for flag in flags {
                for mode in modes {
                    let mut args = [3, 0, 0, 0, 0, 0];
                    args[*i as usize] = flag as u64;
                    args[*i as usize + 1] = mode;
                    f.same(nr(*call), args);
                    created += usize::from(f.both(native(), nr(*call), args).0 != ALLOW);
                }
            }
        }
        let set_id: Vec<u64> = modes
            .iter()
            .copied()
            .filter(|m| m & u64::from(SET_ID) != 0)
            .collect();
        assert_eq!(set_id.len(), 5);
        let want: Vec<(&str, u64)> = MODES
            .iter()
            .chain(LEGACY_MODES)
            .flat_map(|(name, _, _)| set_id.iter().map(move |m| (*name, *m)))
            .collect();
        assert_eq!(denied, want);
        // The three creating flag sets, for each setuid/setgid mode.
        assert_eq!(created, OPENS.len() * 3 * set_id.len());
        // openat2 carries its mode in a struct: absent.
        assert_eq!(
            f.both(native(), nr(libc::SYS_openat2), [0; 6]).0,
            errno(libc::ENOSYS)
        );
    }

    #[test]
    fn x32_numbers_are_enosys_where_the_reference_let_them_through() {
        let f = filters();
        let x32 =
            (0..=600u32)
                .map(|nr| nr | 0x4000_0000)
                .chain([0x7fff_ffff, 0x8000_0000, u32::MAX]);
        for nr in x32 {
            for args in [[0; 6], [u64::MAX; 6]] {
                let (new, reference) = f.both(native(), nr, args);
                assert_eq!(reference, ALLOW, "reference, nr {nr:#x}");
                if cfg!(target_arch = "x86_64") {
                    assert_eq!(new, errno(libc::ENOSYS), "new, nr {nr:#x}");
                } else {
                    assert_eq!(new, reference, "new, nr {nr:#x}");
                }
            }
        }
    }

    #[test]
    fn another_architecture_is_killed_like_the_reference_does() {
        let f = filters();
        let others = [
            0,
            u32::MAX,
            0x4000_0003, // AUDIT_ARCH_I386
            0x4000_0028, // AUDIT_ARCH_ARM
            0xc000_003e, // AUDIT_ARCH_X86_64
            0xc000_00b7, // AUDIT_ARCH_AARCH64
            native() & !0x4000_0000,
        ];
        for other in others.into_iter().filter(|a| *a != native()) {
            for call in [libc::SYS_read, libc::SYS_ptrace, libc::SYS_clone3] {
                let (new, reference) = f.both(other, nr(call), [0; 6]);
                assert_eq!(
                    (new, reference),
                    (KILL_PROCESS, KILL_PROCESS),
                    "arch {other:#x}"
                );
            }
        }
    }

    #[test]
    fn the_program_is_at_most_40_percent_of_the_reference() {
        let new = super::program().unwrap().len();
        let reference: usize = reference().unwrap().iter().map(Vec::len).sum();
        println!("one program of {new} instructions; the reference: {reference}");
        assert!(
            new * 10 <= reference * 4,
            "new {new} instructions, reference {reference}"
        );
    }
}

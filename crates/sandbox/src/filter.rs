//! seccomp: the system calls the command may never make, applied last by
//! the sandbox's PID 1 (after the mounts it needs itself). Denied with
//! EPERM: ptrace and cross-process memory access, every mount and
//! namespace operation, kexec, modules, bpf, perf, keyrings, raw, packet,
//! netlink and vsock sockets, terminal input injection. Denied with ENOSYS
//! (so libraries fall back): io_uring and clone3 (whose flags a filter
//! cannot read, so glibc falls back to clone, whose flags it can).

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

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
];

/// Socket families denied (socket and socketpair's first argument).
const FAMILIES: &[(&str, i32)] = &[
    ("AF_NETLINK", libc::AF_NETLINK),
    ("AF_PACKET", libc::AF_PACKET),
    ("AF_VSOCK", libc::AF_VSOCK),
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

/// The two programs: denied (EPERM) and absent (ENOSYS).
pub fn programs() -> Result<[BpfProgram; 2], SetupError> {
    let mut deny: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for (_, nr) in DENIED {
        deny.insert(*nr, vec![]);
    }
    let mut socket_rules = Vec::new();
    for (_, family) in FAMILIES {
        socket_rules.push(rule(vec![cond(0, SeccompCmpOp::Eq, *family as u64)?])?);
    }
    // SOCK_RAW, whatever the SOCK_NONBLOCK/SOCK_CLOEXEC bits.
    socket_rules.push(rule(vec![cond(
        1,
        SeccompCmpOp::MaskedEq(0xf),
        libc::SOCK_RAW as u64,
    )?])?);
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

/// Installs both programs on the calling thread (and what it execs).
/// `no_new_privs` must already be set.
pub fn apply() -> Result<(), SetupError> {
    for program in programs()? {
        seccompiler::apply_filter(&program).map_err(|e| SetupError::Seccomp {
            detail: e.to_string(),
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn both_programs_compile_for_this_architecture() {
        let programs = super::programs().unwrap();
        assert!(programs.iter().all(|p| !p.is_empty()));
    }
}

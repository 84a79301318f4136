//! The helper process (`paddock __sandbox-init`), freshly exec'd for each
//! sandboxed command and single-threaded until it forks. It reads the
//! policy, joins the run's cgroup, unshares the user, mount, PID, network,
//! IPC, UTS and cgroup namespaces (mapping only the caller's own uid and
//! gid), brings up loopback and binds the forwarder, then forks the PID
//! namespace's init. The helper stays outside the PID namespace and the
//! filesystem view, serves the forwarder, enforces the timeout (killing
//! PID 1 kills every process of the namespace) and exits with the
//! command's status. PID 1 builds the view, drops privileges, applies
//! Landlock and seccomp, forks and execs the command and reaps orphans.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nix::sched::{unshare, CloneFlags};
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{fork, ForkResult, Pid};

use crate::cgroup::Cgroup;
use crate::error::SetupError;
use crate::policy::{exit, NetMode, Policy, DEFAULT_PATH};
use crate::{caps, filter, fs, lock, net};

/// The environment variable carrying the policy (JSON) to the helper.
pub const POLICY_VAR: &str = "PADDOCK_SANDBOX_POLICY";

/// The hidden subcommand that runs [`main`].
pub const INIT_ARG: &str = "__sandbox-init";

/// The helper's entry point; returns the exit code.
pub fn main() -> i32 {
    report(read_policy().and_then(run))
}

/// Runs `policy` in this process, which must be single-threaded and
/// dedicated to the run (a freshly exec'd `paddock sandbox`); returns the
/// exit code.
pub fn run_policy(policy: Policy) -> i32 {
    if policy.argv.is_empty() {
        return report(Err(SetupError::EmptyCommand));
    }
    report(run(policy))
}

fn report(result: Result<i32, SetupError>) -> i32 {
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("paddock sandbox: {e}");
            exit::SETUP_FAILED
        }
    }
}

fn read_policy() -> Result<Policy, SetupError> {
    let json = std::env::var(POLICY_VAR).map_err(|e| SetupError::ReadPolicy {
        var: POLICY_VAR,
        detail: e.to_string(),
    })?;
    let policy: Policy = serde_json::from_str(&json).map_err(|e| SetupError::ReadPolicy {
        var: POLICY_VAR,
        detail: e.to_string(),
    })?;
    if policy.argv.is_empty() {
        return Err(SetupError::EmptyCommand);
    }
    Ok(policy)
}

fn run(policy: Policy) -> Result<i32, SetupError> {
    // The run ends with its caller, whatever kills the caller.
    caps::die_with_parent().map_err(|source| SetupError::Capabilities { source })?;
    let view = fs::plan(&policy)?;
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();

    let limits = &policy.limits;
    let wants_caps =
        limits.memory_mb.is_some() || limits.pids.is_some() || limits.cpu_percent.is_some();
    let cgroup = if wants_caps {
        let root = policy
            .cgroup_root
            .clone()
            .unwrap_or_else(|| PathBuf::from("/sys/fs/cgroup"));
        match Cgroup::create(&root, &policy.name, limits).and_then(|cg| cg.join().map(|()| cg)) {
            Ok(cg) => Some(cg),
            Err(e) if policy.allow_without_cgroups => {
                eprintln!("paddock sandbox: running without cgroup caps (accepted): {e}");
                None
            }
            Err(e) => return Err(e),
        }
    } else {
        None
    };
    let result = confine_and_run(&policy, &view, uid, gid, cgroup.as_ref());
    if let Some(cg) = &cgroup {
        cg.remove();
    }
    result
}

fn id_map(path: &str, text: &str) -> Result<(), SetupError> {
    std::fs::write(path, text).map_err(|source| SetupError::IdMap {
        path: PathBuf::from(path),
        source,
    })
}

fn confine_and_run(
    policy: &Policy,
    view: &fs::View,
    uid: u32,
    gid: u32,
    cgroup: Option<&Cgroup>,
) -> Result<i32, SetupError> {
    unshare(
        CloneFlags::CLONE_NEWUSER
            | CloneFlags::CLONE_NEWNS
            | CloneFlags::CLONE_NEWNET
            | CloneFlags::CLONE_NEWIPC
            | CloneFlags::CLONE_NEWUTS
            | CloneFlags::CLONE_NEWCGROUP,
    )
    .map_err(|source| SetupError::Unshare {
        what: "user, mount, network, IPC, UTS and cgroup",
        source,
    })?;
    id_map("/proc/self/setgroups", "deny")?;
    id_map("/proc/self/uid_map", &format!("{uid} {uid} 1"))?;
    id_map("/proc/self/gid_map", &format!("{gid} {gid} 1"))?;
    net::loopback_up()?;
    let forwarder = match &policy.net {
        NetMode::None => None,
        NetMode::Broker { socket, port } => {
            Some((net::bind_forwarder(*port, socket)?, socket.clone()))
        }
    };

    // A process that unshared its PID namespace cannot start threads, and
    // the helper needs them (forwarder, timeout): a child unshares it and
    // forks PID 1.
    // SAFETY: the helper is single-threaded here (no thread has been
    // started yet), so the child may run arbitrary code after fork.
    let child = match unsafe { fork() }.map_err(|source| SetupError::Fork { source })? {
        ForkResult::Child => {
            drop(forwarder);
            std::process::exit(pid_parent(policy, view, uid, gid));
        }
        ForkResult::Parent { child } => child,
    };
    if let Some((listener, socket)) = forwarder {
        net::serve_forwarder(listener, socket);
    }
    let timed_out = Arc::new(AtomicBool::new(false));
    if let Some(secs) = policy.timeout_secs {
        let flag = timed_out.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(secs));
            flag.store(true, Ordering::SeqCst);
            let _ = kill(child, Signal::SIGKILL);
        });
    }
    let code = wait_code(child);
    if timed_out.load(Ordering::SeqCst) {
        eprintln!(
            "paddock sandbox: timed out after {} s; the whole tree was killed",
            policy.timeout_secs.unwrap_or_default()
        );
        return Ok(exit::TIMED_OUT);
    }
    if code == 128 + libc::SIGKILL && cgroup.is_some_and(Cgroup::oom_killed) {
        eprintln!("paddock sandbox: killed at the memory cap");
        return Ok(exit::MEMORY_LIMIT);
    }
    Ok(code)
}

/// Waits for `pid` and turns its end into a shell-style exit code.
fn wait_code(pid: Pid) -> i32 {
    loop {
        match waitpid(pid, None) {
            Ok(WaitStatus::Exited(_, code)) => return code,
            Ok(WaitStatus::Signaled(_, sig, _)) => return 128 + sig as i32,
            Ok(_) | Err(nix::Error::EINTR) => {}
            Err(_) => return exit::SETUP_FAILED,
        }
    }
}

/// Unshares the PID (and a second mount) namespace and forks its PID 1; returns PID 1's status.
fn pid_parent(policy: &Policy, view: &fs::View, uid: u32, gid: u32) -> i32 {
    let started = caps::die_with_parent()
        .map_err(|source| SetupError::Capabilities { source })
        .and_then(|()| {
            // A mount namespace of its own too: pivot_root moves every
            // process of a mount namespace, and the helper must keep the
            // host's view (the broker socket, the cgroup files).
            unshare(CloneFlags::CLONE_NEWPID | CloneFlags::CLONE_NEWNS).map_err(|source| {
                SetupError::Unshare {
                    what: "PID and mount",
                    source,
                }
            })
        });
    if let Err(e) = started {
        eprintln!("paddock sandbox: {e}");
        return exit::SETUP_FAILED;
    }
    // SAFETY: this process is single-threaded (a fresh fork child).
    match unsafe { fork() } {
        Err(source) => {
            eprintln!("paddock sandbox: {}", SetupError::Fork { source });
            exit::SETUP_FAILED
        }
        Ok(ForkResult::Child) => std::process::exit(pid1(policy, view, uid, gid)),
        Ok(ForkResult::Parent { child }) => wait_code(child),
    }
}

/// PID 1 of the new PID namespace.
fn pid1(policy: &Policy, view: &fs::View, uid: u32, gid: u32) -> i32 {
    if let Err(e) = setup(policy, view, uid, gid) {
        eprintln!("paddock sandbox: {e}");
        return exit::SETUP_FAILED;
    }
    // SAFETY: PID 1 is single-threaded; the child only execs or exits.
    match unsafe { fork() } {
        Err(e) => {
            eprintln!("paddock sandbox: fork the command: {e}");
            exit::SETUP_FAILED
        }
        Ok(ForkResult::Child) => std::process::exit(exec(policy)),
        Ok(ForkResult::Parent { child }) => reap(child),
    }
}

/// Reaps every process re-parented to PID 1 until the command ends; its
/// status is the namespace's. Returning ends PID 1, which kills whatever
/// the command left behind.
fn reap(command: Pid) -> i32 {
    loop {
        match waitpid(None, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == command => return code,
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid == command => return 128 + sig as i32,
            Ok(_) | Err(nix::Error::EINTR) => {}
            Err(_) => return exit::SETUP_FAILED,
        }
    }
}

fn env_value<'a>(policy: &'a Policy, name: &str) -> Option<&'a str> {
    policy
        .env
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn setup(policy: &Policy, view: &fs::View, uid: u32, gid: u32) -> Result<(), SetupError> {
    caps::die_with_parent().map_err(|source| SetupError::Capabilities { source })?;
    fs::enter(view, uid, gid, env_value(policy, "HOME"))?;
    nix::unistd::sethostname("paddock").map_err(|source| SetupError::Hostname { source })?;
    caps::rlimits()?;
    caps::new_session()?;
    nix::unistd::chdir(&policy.cwd).map_err(|source| SetupError::Chdir {
        path: policy.cwd.clone(),
        source,
    })?;
    caps::drop_all()?;
    caps::not_dumpable()?;
    caps::no_new_privs()?;
    lock::restrict(&view.ro, &view.rw)?;
    filter::apply()
}

/// Finds `program` on the sandbox's PATH (never the helper's).
fn resolve(program: &str, path: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    path.split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(program))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

fn cstring(bytes: &[u8]) -> Option<CString> {
    CString::new(bytes).ok()
}

/// Execs the command with exactly the policy's environment.
fn exec(policy: &Policy) -> i32 {
    let program = &policy.argv[0];
    let path = env_value(policy, "PATH").unwrap_or(DEFAULT_PATH);
    let Some(file) = resolve(program, path) else {
        eprintln!("paddock sandbox: {program}: command not found");
        return exit::NOT_FOUND;
    };
    let argv: Option<Vec<CString>> = policy.argv.iter().map(|a| cstring(a.as_bytes())).collect();
    let env: Option<Vec<CString>> = policy
        .env
        .iter()
        .map(|(k, v)| cstring(format!("{k}={v}").as_bytes()))
        .collect();
    let (Some(argv), Some(env), Some(file_c)) = (argv, env, cstring(file.as_os_str().as_bytes()))
    else {
        eprintln!("paddock sandbox: the command or its environment contains a NUL byte");
        return exit::CANNOT_EXECUTE;
    };
    let err = match nix::unistd::execve(&file_c, &argv, &env) {
        Err(e) => e,
        Ok(never) => match never {},
    };
    eprintln!("paddock sandbox: cannot execute {}: {err}", file.display());
    match err {
        nix::Error::ENOENT => exit::NOT_FOUND,
        _ => exit::CANNOT_EXECUTE,
    }
}

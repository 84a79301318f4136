//! The helper process (`paddock __sandbox-init`), freshly exec'd for each
//! sandboxed command and single-threaded until it forks. It reads the
//! policy, unshares the user, UTS, network and IPC namespaces (mapping
//! only the caller's own uid and gid), brings up loopback and binds the
//! forwarder, then clones the PID namespace's init straight into new PID
//! and mount namespaces, and (with caps) moves it into the run's cgroup. The helper stays outside the PID namespace and the
//! filesystem view, serves the forwarder, enforces the timeout (killing
//! PID 1 kills every process of the namespace) and exits with the
//! command's status. PID 1 builds the view, drops privileges, applies
//! Landlock and seccomp, spawns the command and reaps orphans.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nix::sched::{unshare, CloneFlags};
use nix::sys::signal::{kill, sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::Pid;

use crate::cgroup::Cgroup;
use crate::error::SetupError;
use crate::gate::{self, Wait};
use crate::policy::{exit, NetMode, Policy, DEFAULT_PATH};
use crate::started::Started;
use crate::{absent, caps, filter, fs, lock, net, sched, trace};

/// The sandbox's host name (`tun::HOSTS` names it too).
pub const HOSTNAME: &str = "paddock";

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
            e.exit_code()
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
    // The caller's "the command runs" pipe, if it passed one: PID 1's to
    // write, closed unwritten by whatever ends the run before.
    let started = Started::take(policy.started);
    // The run ends with its caller, whatever kills the caller.
    caps::die_with_parent().map_err(|source| SetupError::Capabilities { source })?;
    // Nothing the caller left open reaches PID 1 or the command.
    caps::cloexec_inherited().map_err(|source| SetupError::Descriptors { source })?;
    // An ordinary time-shared policy whatever the caller's (so that the
    // caps apply), while this is the only thread: its threads, PID 1 and
    // the command inherit it (`sched.rs`).
    if sched::time_shared()? {
        trace::step("time-shared");
    }
    // SIGINT, SIGTERM and SIGHUP wait until PID 1 exists (then they stop
    // the run, see `on_stop`), so that whatever ends the run the helper
    // removes what it made on the host.
    stop_signals()
        .thread_block()
        .map_err(|source| SetupError::Signals { source })?;
    // Missing protected names get placeholders, removed when this returns
    // (after PID 1 is reaped).
    let _placeholders = absent::Placeholders::make(&policy);
    let mut view = fs::plan(&policy)?;
    trace::step("planned");
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    if uid == 0 {
        view.idmap()?;
        trace::step("idmapped");
    }

    // The caller's per-user maxima, read before the run's user namespace
    // hides them (PID 1 writes the run's shares of them).
    let shares = crate::user_counts::shares(Path::new("/proc/sys"));
    let host = Host {
        root: crate::pid_cap::host_root(),
        shares: &shares,
    };

    confine_and_run(&policy, &view, (uid, gid), &host, started)
}

/// What the helper learns of the caller's host before it makes the run's
/// user namespace (which hides it).
struct Host<'a> {
    /// The caller is the host's root (`pid_cap::host_root`).
    root: bool,
    /// The run's shares of the caller's per-user counts (`user_counts.rs`).
    shares: &'a [(&'static str, u64)],
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
    (uid, gid): (u32, u32),
    host: &Host<'_>,
    started: Option<Started>,
) -> Result<i32, SetupError> {
    // No mount namespace here: the helper keeps the host's view (the
    // broker socket, the cgroup files); PID 1 gets the only new one, owned
    // by the new user namespace. One mount namespace fewer to copy and to
    // tear down per run. The network and IPC namespaces are made here,
    // before the clone, and PID 1 inherits them (`gate.rs` says why not
    // in parallel with PID 1's set-up); PID 1 makes its cgroup namespace
    // once it is in the cgroup.
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWUTS).map_err(|source| {
        SetupError::Unshare {
            what: "user and UTS",
            source,
        }
    })?;
    trace::step("namespaces");
    id_map("/proc/self/setgroups", "deny")?;
    id_map("/proc/self/uid_map", &format!("{uid} {uid} 1"))?;
    id_map("/proc/self/gid_map", &format!("{gid} {gid} 1"))?;
    trace::step("id maps");
    let forwarder = network(policy)?;
    let direct = direct(policy);
    let gate = if capped(policy) {
        Some(gate::pair()?)
    } else {
        None
    };
    let (open, wait) = match gate {
        Some((open, wait)) => (Some(open), Some(wait)),
        None => (None, None),
    };

    // A process that unshared its PID namespace cannot start threads, and
    // the helper needs them (forwarder, timeout): PID 1 is cloned straight
    // into a new PID namespace and the run's mount namespace.
    let child = match clone_pid1()? {
        None => {
            // The listeners and the device are the helper's; PID 1 keeps
            // no copy.
            drop(forwarder);
            drop(direct);
            drop(open);
            std::process::exit(pid1(policy, view, (uid, gid), host, wait, started));
        }
        Some(child) => child,
    };
    // PID 1 holds the only copy that may say the command runs.
    drop(started);
    trace::step("pid1 cloned");
    stop_run_on_signals(child)?;
    drop(wait);
    // The wall-clock limit runs from here: whatever the set-up below waits
    // on (the cgroup, PID 1's report where there is none) is inside it.
    let timed_out = Arc::new(AtomicBool::new(false));
    if let Some(secs) = policy.timeout_secs {
        let flag = timed_out.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(secs));
            flag.store(true, Ordering::SeqCst);
            let _ = kill(child, Signal::SIGKILL);
        });
    }
    let cgroup = match cgroup(policy, child) {
        Ok(Joined::Cgroup(cg)) => Some(cg),
        Ok(Joined::NoCaps) => None,
        Ok(Joined::Without(e)) => {
            // The pids cap another way (`pid_cap.rs`), before PID 1 goes on;
            // nothing to hold when PID 1 ended before its report (its
            // set-up failed: the run ends with that error).
            let held = match (policy.limits.pids, &open) {
                (Some(cap), Some(open)) => open
                    .pid_max_held()
                    .map(|held| crate::pid_cap::hold(child, cap, host.root, held)),
                _ => None,
            };
            let line = match held {
                Some(held) => format!("running without cgroup caps (accepted): {e}; {held}"),
                None => format!("running without cgroup caps (accepted): {e}"),
            };
            notice(policy.notices.as_deref(), &line);
            None
        }
        Err(e) => return abandon(child, e),
    };
    if let Some(open) = open {
        open.open();
    }
    trace::step("pid1 let go");
    for (listener, socket, hand_off) in forwarder {
        if hand_off {
            net::serve_handoff(listener, socket);
        } else {
            net::serve_forwarder(listener, socket);
        }
    }
    let reporter = direct.map(|(tun, reporter)| {
        let unreported = Arc::new(crate::direct::Unreported::default());
        if let Some(tun) = tun {
            crate::direct::serve(tun, reporter.clone(), unreported.clone());
        }
        (reporter, unreported)
    });
    let code = wait_code(child);
    trace::step("pid1 reaped");
    // Every process of the job is gone: what the watcher did not report
    // is counted for good.
    if let Some((Some(reporter), unreported)) = &reporter {
        unreported.finish(reporter);
    }
    let oom = code == 128 + libc::SIGKILL && cgroup.as_ref().is_some_and(Cgroup::oom_killed);
    if let Some(cg) = &cgroup {
        cg.remove();
        trace::step("cgroup removed");
    }
    let stopped = STOP_SIGNAL.load(Ordering::SeqCst);
    if stopped != 0 {
        return Ok(128 + stopped);
    }
    if timed_out.load(Ordering::SeqCst) {
        eprintln!(
            "paddock sandbox: timed out after {} s; the whole tree was killed",
            policy.timeout_secs.unwrap_or_default()
        );
        return Ok(exit::TIMED_OUT);
    }
    if oom {
        eprintln!("paddock sandbox: killed at the memory cap");
        return Ok(exit::MEMORY_LIMIT);
    }
    Ok(code)
}

/// The signal that stopped the run (0: none), and PID 1 for the handler.
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);
static PID1: AtomicI32 = AtomicI32::new(0);

/// The signals that stop a run: Ctrl-C, `kill`, a closed terminal, and the
/// runner stopping a job (`launcher::stop`).
fn stop_signals() -> SigSet {
    let mut set = SigSet::empty();
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(sig);
    }
    set
}

extern "C" fn on_stop(sig: libc::c_int) {
    STOP_SIGNAL.store(sig, Ordering::SeqCst);
    let pid = PID1.load(Ordering::SeqCst);
    if pid > 0 {
        // kill(2) is async-signal-safe; PID 1's end takes the whole tree.
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

/// From now on (PID 1 is `pid1`) a stop signal kills PID 1, so the helper
/// reaps it, cleans up and exits with 128 + the signal; the signals
/// blocked until now are delivered here. PID 1 unblocks them for itself
/// (as a namespace's init it ignores them anyway) and its command.
fn stop_run_on_signals(pid1: Pid) -> Result<(), SetupError> {
    PID1.store(pid1.as_raw(), Ordering::SeqCst);
    let action = SigAction::new(
        SigHandler::Handler(on_stop),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in stop_signals().iter() {
        // SAFETY: `on_stop` only stores to atomics and calls kill(2), all
        // async-signal-safe; it is installed in the helper only (PID 1,
        // already cloned, keeps the default dispositions).
        unsafe { sigaction(sig, &action) }.map_err(|source| SetupError::Signals { source })?;
    }
    stop_signals()
        .thread_unblock()
        .map_err(|source| SetupError::Signals { source })
}

/// Ends a run whose helper-side set-up failed: PID 1 has run nothing of
/// the command's yet and is killed. When PID 1 had already stopped on a
/// failure of its own (and said why), that is the run's outcome.
fn abandon(pid1: Pid, error: SetupError) -> Result<i32, SetupError> {
    let _ = kill(pid1, Signal::SIGKILL);
    match wait_code(pid1) {
        code @ (exit::SETUP_FAILED | exit::SETUP_SHORT) => Ok(code),
        _ => Err(error),
    }
}

/// Where a run's caps stand once PID 1 exists.
enum Joined {
    /// PID 1 is in the run's cgroup (so every process of the command is).
    Cgroup(Cgroup),
    /// The policy asks for no caps.
    NoCaps,
    /// This host cannot make the cgroup (why), and the policy accepts it.
    Without(SetupError),
}

/// The run's cgroup with PID 1 moved in, when the policy caps resources;
/// none when it does not, or when this host cannot and the policy
/// accepts that.
fn cgroup(policy: &Policy, pid1: Pid) -> Result<Joined, SetupError> {
    let limits = &policy.limits;
    if !capped(policy) {
        return Ok(Joined::NoCaps);
    }
    let root = policy
        .cgroup_root
        .clone()
        .unwrap_or_else(|| PathBuf::from("/sys/fs/cgroup"));
    let joined = Cgroup::create(&root, &policy.name, limits).and_then(|cg| match cg.add(pid1) {
        Ok(()) => Ok(cg),
        Err(e) => {
            cg.remove();
            Err(e)
        }
    });
    trace::step("cgroup");
    match joined {
        Ok(cg) => Ok(Joined::Cgroup(cg)),
        Err(e) if policy.allow_without_cgroups => Ok(Joined::Without(e)),
        Err(e) => Err(e),
    }
}

/// Tells the caller what the run goes without: a line appended to
/// `notices` (`notices.rs`: created private, never through a link nor
/// into a FIFO), else on stderr.
fn notice(notices: Option<&Path>, line: &str) {
    let written = notices.is_some_and(|path| crate::notices::append(path, line).is_ok());
    if !written {
        eprintln!("paddock sandbox: {line}");
    }
}

/// Whether the policy caps resources, hence has a cgroup.
fn capped(policy: &Policy) -> bool {
    let limits = &policy.limits;
    limits.memory_mb.is_some() || limits.pids.is_some() || limits.cpu_percent.is_some()
}

/// The network and IPC namespaces: loopback up, and the forwarders'
/// listeners bound inside when the policy has them (the broker's, then
/// each further one: a fixed number, one thread each).
/// Each listener comes with its socket and whether its connections are
/// handed off rather than relayed.
fn network(policy: &Policy) -> Result<Vec<(std::net::TcpListener, PathBuf, bool)>, SetupError> {
    unshare(CloneFlags::CLONE_NEWNET | CloneFlags::CLONE_NEWIPC).map_err(|source| {
        SetupError::Unshare {
            what: "network and IPC",
            source,
        }
    })?;
    net::loopback_up()?;
    trace::step("loopback");
    match &policy.net {
        NetMode::None => Ok(Vec::new()),
        NetMode::Broker { socket, port, more } => {
            let mut out = vec![(net::bind_forwarder(*port, socket)?, socket.clone(), false)];
            for f in more {
                out.push((
                    net::bind_forwarder(f.port, &f.socket)?,
                    f.socket.clone(),
                    f.hand_off,
                ));
            }
            Ok(out)
        }
    }
}

/// The direct-connection watcher's device and report socket, when the
/// policy asks for it (`direct.rs`), made in the job's network namespace
/// before any thread. A device that cannot be made is reported (`off`)
/// and the run goes on without it: the namespace then has no route out,
/// as without the watcher. A report socket that cannot be reached leaves
/// the device answering, unreported.
#[allow(clippy::type_complexity)]
fn direct(
    policy: &Policy,
) -> Option<(
    Option<std::os::fd::OwnedFd>,
    Option<Arc<crate::direct::Reporter>>,
)> {
    let watch = policy.direct.as_ref()?;
    let reporter = crate::direct::Reporter::connect(&watch.report, &watch.tag)
        .ok()
        .map(Arc::new);
    let tun = match crate::tun::open() {
        Ok(tun) => Some(tun),
        Err(e) => {
            if let Some(r) = &reporter {
                r.off(&e.to_string());
            }
            None
        }
    };
    trace::step("direct watcher");
    Some((tun, reporter))
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

/// Forks like `fork(2)` but into new PID and mount namespaces, so the
/// child is PID 1 of its namespace (one process fewer than unsharing in an
/// intermediate child). Returns `None` in the child, the child's pid in the
/// parent.
fn clone_pid1() -> Result<Option<Pid>, SetupError> {
    let flags = libc::CLONE_NEWPID | libc::CLONE_NEWNS | libc::SIGCHLD;
    // SAFETY: a raw clone without CLONE_VM and with a null stack behaves
    // like fork(2): the child gets a copy of the address space and resumes
    // here on its copy of the stack. The helper is single-threaded at this
    // point (no thread has been started yet), so no lock is held by a
    // thread that would not exist in the child; the child only runs
    // PID 1's set-up and exits. The remaining arguments (parent and child
    // tid pointers, tls) are null and unused without the flags naming them.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_clone,
            flags as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    match rc {
        0 => Ok(None),
        pid if pid > 0 => Ok(Some(Pid::from_raw(pid as libc::pid_t))),
        _ => Err(SetupError::Unshare {
            what: "PID and mount",
            source: nix::errno::Errno::last(),
        }),
    }
}

/// PID 1 of the new PID namespace.
fn pid1(
    policy: &Policy,
    view: &fs::View,
    (uid, gid): (u32, u32),
    host: &Host<'_>,
    gate: Option<Wait>,
    started: Option<Started>,
) -> i32 {
    // The helper blocked them for itself; as the namespace's init PID 1
    // ignores them anyway, and the command starts with this mask.
    if let Err(source) = stop_signals().thread_unblock() {
        eprintln!("paddock sandbox: {}", SetupError::Signals { source });
        return exit::SETUP_FAILED;
    }
    if let Err(e) = setup(policy, view, (uid, gid), host, gate) {
        eprintln!("paddock sandbox: {e}");
        return e.exit_code();
    }
    match spawn(policy) {
        Ok(command) => {
            if let Some(started) = &started {
                started.tell();
            }
            trace::step("command spawned");
            let code = reap(command);
            trace::step("command exited");
            let left = kill_left();
            if let Some(started) = started {
                started.left(left);
            }
            code
        }
        Err(code) => code,
    }
}

/// Reaps every process re-parented to PID 1 until the command ends; its
/// status is the namespace's.
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

/// Kills what the command left running once it exited (every process of
/// the namespace but PID 1: the command's tree, however it detached, each
/// an orphan of PID 1 or a descendant of one) and reaps it; how many of
/// them the kill ended (`left.rs`). What ended by itself before (a zombie
/// the command did not reap) is reaped first and not counted.
fn kill_left() -> u64 {
    use nix::sys::wait::WaitPidFlag;
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(nix::Error::ECHILD) => break,
            Ok(_) | Err(nix::Error::EINTR) => {}
            Err(_) => break,
        }
    }
    let mut killed = 0;
    loop {
        // Again before each wait: what was forked meanwhile goes too.
        let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
        match waitpid(None, None) {
            Ok(WaitStatus::Signaled(_, Signal::SIGKILL, _)) => killed += 1,
            Ok(_) | Err(nix::Error::EINTR) => {}
            // None left (ECHILD); returning ends PID 1, which takes
            // whatever else there is.
            Err(_) => return killed,
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

fn setup(
    policy: &Policy,
    view: &fs::View,
    (uid, gid): (u32, u32),
    host: &Host<'_>,
    gate: Option<Wait>,
) -> Result<(), SetupError> {
    trace::step("pid1 running");
    caps::die_with_parent().map_err(|source| SetupError::Capabilities { source })?;
    let knobs = fs::Knobs {
        pids: policy.limits.pids,
        host_root: host.root,
        shares: host.shares,
    };
    let pid_max_held = fs::enter(view, uid, gid, env_value(policy, "HOME"), &knobs)?;
    trace::step("view entered");
    nix::unistd::sethostname(HOSTNAME).map_err(|source| SetupError::Hostname { source })?;
    caps::rlimits()?;
    crate::user_counts::limit_rlimits()?;
    caps::new_session()?;
    nix::unistd::chdir(&policy.cwd).map_err(|source| SetupError::Chdir {
        path: policy.cwd.clone(),
        source,
    })?;
    trace::step("hostname, rlimits, session, cwd");
    if let Some(gate) = gate {
        gate.wait(pid_max_held)?;
    }
    // The cgroup namespace's root is the run's cgroup (the helper moved
    // PID 1 in before it opened the gate).
    unshare(CloneFlags::CLONE_NEWCGROUP).map_err(|source| SetupError::Unshare {
        what: "cgroup",
        source,
    })?;
    trace::step("cgroup joined");
    caps::drop_all()?;
    caps::not_dumpable()?;
    caps::no_new_privs()?;
    trace::step("privileges dropped");
    lock::restrict(&view.ro, &view.rw)?;
    trace::step("landlock");
    filter::apply()?;
    trace::step("seccomp");
    // Again, for what PID 1 itself opened: only stdio reaches the command.
    caps::cloexec_inherited().map_err(|source| SetupError::Descriptors { source })
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

/// Starts the command with exactly the policy's environment, through
/// `posix_spawn` (a `vfork`-style clone: PID 1's memory is not copied),
/// which also restores the default SIGPIPE disposition. Returns its pid, or
/// the exit code to end with when it cannot start.
fn spawn(policy: &Policy) -> Result<Pid, i32> {
    let program = &policy.argv[0];
    let path = env_value(policy, "PATH").unwrap_or(DEFAULT_PATH);
    let Some(file) = resolve(program, path) else {
        eprintln!("paddock sandbox: {program}: command not found");
        return Err(exit::NOT_FOUND);
    };
    let mut cmd = std::process::Command::new(&file);
    cmd.arg0(program)
        .args(&policy.argv[1..])
        .env_clear()
        .envs(policy.env.iter().map(|(k, v)| (k, v)));
    match cmd.spawn() {
        Ok(child) => Ok(Pid::from_raw(child.id() as libc::pid_t)),
        Err(e) => {
            eprintln!("paddock sandbox: cannot execute {}: {e}", file.display());
            Err(match e.raw_os_error() {
                Some(libc::ENOENT) => exit::NOT_FOUND,
                _ => exit::CANNOT_EXECUTE,
            })
        }
    }
}

//! The `process` rung's supervisor: `paddock __supervise DIR -- ENGINE
//! ARGS…`, dispatched in `main` before the runtime starts. It is the engine's
//! parent and a child subreaper (`PR_SET_CHILD_SUBREAPER`), so every
//! process the engine starts stays in its subtree however it detached (its
//! own session, a double fork, a `setsid` daemon): an orphan is reparented
//! to the supervisor, not to init. When the engine exits, or on SIGTERM,
//! SIGINT or SIGHUP (the runner's timeout and cancel, or the death of its
//! `paddock`, through the parent-death signal), it kills its whole subtree
//! with SIGKILL, round after round until none is left, reaps everything,
//! and exits as the engine did (the same code, or the same signal). Told
//! `--report-stdin`, its stdin is the write end of the runner's report
//! pipe (stdin, so that the supervisor is still spawned, not forked: a
//! descriptor of any other number needs a `pre_exec` hook, which makes
//! the standard library fork Paddock): it takes it (close-on-exec) and
//! gives the engine `/dev/null` instead, and writes there, as it ends,
//! how many processes its kills ended (`paddock_sandbox::left`): of an
//! engine that exited by itself, the processes of its tree still running
//! (its own exit is not counted, a process it left, in its own session,
//! double-forked or `nohup`, is); of a stopped one, the engine too (the
//! runner reads the count only of a command that exited by itself). The
//! engine never holds it, and the supervisor is not dumpable, so the
//! engine cannot open it through `/proc` unless it runs as root; it is
//! written however the engine ended (a SIGTERM the job sent included), so
//! a report such a job wrote there is never the only one, and two read as
//! none. It
//! changes to the engine's directory `DIR` itself: a child given a
//! directory of its own is forked by the standard library in the static
//! build (its glibc's `posix_spawn_file_actions_addchdir_np` is not found),
//! a copy of Paddock's whole memory map per job; without one it is spawned.
//!
//! It is single-threaded and runs only this code: the signals it waits for
//! are blocked and read from a signalfd, so no handler runs between a fork
//! and an exec, and the engine starts with every signal at its default
//! disposition and none blocked (`paddock_sandbox::signals`: what glibc's
//! `posix_spawn` or a shell left ignored is not inherited).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use nix::errno::Errno;
use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

/// The first argument that makes `paddock` the supervisor.
pub const SUPERVISE_ARG: &str = "__supervise";

/// Exit code when the supervisor itself cannot run the engine.
const FAILED: i32 = 70;

/// Rounds of killing: a process may fork while its tree is being killed.
const KILL_ROUNDS: usize = 50;

/// The option before `DIR` saying stdin is the report pipe.
pub const REPORT_ARG: &str = "--report-stdin";

#[derive(Debug, thiserror::Error)]
pub enum SuperviseError {
    #[error("usage: paddock {SUPERVISE_ARG} [{REPORT_ARG}] DIR -- PROGRAM [ARGS...]")]
    Usage,
    #[error("take the report pipe from stdin: {0}")]
    Report(std::io::Error),
    #[error("change to the engine's directory {}: {source}", dir.display())]
    Chdir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("become non-dumpable: {0}")]
    Dumpable(Errno),
    #[error("become a child subreaper: {0}")]
    Subreaper(Errno),
    #[error("set the parent-death signal: {0}")]
    DeathSignal(Errno),
    #[error("block the signals it waits for: {0}")]
    Signals(Errno),
    #[error("start {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
}

/// Runs the supervisor on the arguments after [`SUPERVISE_ARG`]; the
/// process's exit code.
pub fn main(args: impl Iterator<Item = OsString>) -> i32 {
    match supervise(args.collect()) {
        Ok(code) => code,
        Err(e) => {
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "paddock supervisor: {e}");
            FAILED
        }
    }
}

fn supervise(args: Vec<OsString>) -> Result<i32, SuperviseError> {
    let (report, args) = match args.as_slice() {
        [flag, rest @ ..] if flag == REPORT_ARG => (Some(take_report()?), rest),
        all => (None, all),
    };
    let (dir, argv) = match args {
        [dir, dashes, rest @ ..] if dashes == "--" => (PathBuf::from(dir), rest),
        _ => return Err(SuperviseError::Usage),
    };
    let Some((program, rest)) = argv.split_first() else {
        return Err(SuperviseError::Usage);
    };
    // Like `paddock` itself: the engine (same user) may not read this
    // process's memory or environment through /proc, nor trace it.
    nix::sys::prctl::set_dumpable(false).map_err(SuperviseError::Dumpable)?;
    nix::sys::prctl::set_child_subreaper(true).map_err(SuperviseError::Subreaper)?;
    let parent = nix::unistd::getppid();
    nix::sys::prctl::set_pdeathsig(Signal::SIGTERM).map_err(SuperviseError::DeathSignal)?;
    let mut waited = SigSet::empty();
    for s in [
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGCHLD,
    ] {
        waited.add(s);
    }
    waited.thread_block().map_err(SuperviseError::Signals)?;
    let signals =
        SignalFd::with_flags(&waited, SfdFlags::SFD_CLOEXEC).map_err(SuperviseError::Signals)?;
    // The parent died before the death signal was armed.
    if nix::unistd::getppid() != parent {
        return Ok(128 + Signal::SIGTERM as i32);
    }
    std::env::set_current_dir(&dir).map_err(|source| SuperviseError::Chdir { dir, source })?;
    // Every signal at its default: nothing this process (or glibc's
    // posix_spawn that started it) ignores reaches the engine.
    let mut engine = Command::new(program);
    engine.args(rest);
    let engine = paddock_sandbox::signals::start_with_defaults(&mut engine)
        .spawn()
        .map_err(|source| SuperviseError::Spawn {
            program: program.to_string_lossy().into_owned(),
            source,
        })?;
    let engine = Pid::from_raw(i32::try_from(engine.id()).unwrap_or(i32::MAX));
    // The processes the kills ended.
    let mut left = 0;
    let ended = loop {
        if let Some(status) = reap(engine) {
            break status;
        }
        let stop = match signals.read_signal() {
            Ok(Some(info)) => info.ssi_signo != Signal::SIGCHLD as u32,
            Ok(None) | Err(Errno::EINTR) => false,
            // Cannot wait for signals any more: end the job rather than
            // spin.
            Err(_) => true,
        };
        // Killing the tree may reap the engine too: its end is kept, so
        // the loop does not wait for a signal that never comes.
        if stop {
            let (status, killed) = kill_tree(engine);
            left += killed;
            if let Some(status) = status {
                break status;
            }
        }
    };
    // What the engine left: every descendant still running now.
    left += kill_tree(engine).1;
    // Everything left was killed: wait for the last of it.
    while !matches!(waitpid(None, None), Err(Errno::ECHILD)) {}
    if let Some(report) = report {
        let count = u64::try_from(left).unwrap_or(u64::MAX);
        let _ = nix::unistd::write(&report, &paddock_sandbox::left::report(count));
    }
    Ok(exit_like(ended))
}

/// The report pipe on stdin, taken first: a copy above stderr,
/// close-on-exec, and `/dev/null` as stdin in its place, so the engine
/// never inherits it.
fn take_report() -> Result<std::os::fd::OwnedFd, SuperviseError> {
    use std::os::fd::{AsFd as _, AsRawFd as _};
    let report = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map_err(SuperviseError::Report)?;
    let null = std::fs::File::open("/dev/null").map_err(SuperviseError::Report)?;
    nix::unistd::dup2(null.as_raw_fd(), 0)
        .map_err(|e| SuperviseError::Report(std::io::Error::from(e)))?;
    Ok(report)
}

/// Reaps every child that ended; the engine's end when it was among them.
fn reap(engine: Pid) -> Option<WaitStatus> {
    let mut ended = None;
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => return ended,
            Ok(status @ (WaitStatus::Exited(pid, _) | WaitStatus::Signaled(pid, _, _)))
                if pid == engine =>
            {
                ended = Some(status);
            }
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return ended,
        }
    }
}

/// Kills every descendant (SIGKILL) until none is left; the engine's end
/// when it was reaped meanwhile, and how many processes were killed (each
/// once, however many rounds it took).
fn kill_tree(engine: Pid) -> (Option<WaitStatus>, usize) {
    let mut ended = None;
    let mut killed: std::collections::HashSet<Pid> = std::collections::HashSet::new();
    for _ in 0..KILL_ROUNDS {
        let live = descendants(Pid::this());
        if live.is_empty() {
            break;
        }
        for pid in live {
            let _ = kill(pid, Signal::SIGKILL);
            killed.insert(pid);
        }
        // Reparented grandchildren show up as children once their parent
        // is reaped.
        if let Some(status) = reap(engine) {
            ended = Some(status);
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    // The engine may have ended (and become a zombie) before the first
    // round.
    (ended.or_else(|| reap(engine)), killed.len())
}

/// The live (not zombie) descendants of `root`, from `/proc`'s children
/// lists.
pub fn descendants(root: Pid) -> Vec<Pid> {
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        for child in children(pid) {
            if !zombie(child) {
                out.push(child);
            }
            stack.push(child);
        }
    }
    out
}

fn children(pid: Pid) -> Vec<Pid> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .map(Pid::from_raw),
            );
        }
    }
    out
}

fn zombie(pid: Pid) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

/// Ends this process the way the engine ended: its exit code, or its
/// signal (without a core dump); 128 + the signal when that signal does not
/// end a process.
fn exit_like(status: WaitStatus) -> i32 {
    match status {
        WaitStatus::Exited(_, code) => code,
        WaitStatus::Signaled(_, sig, _) => {
            let _ = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 0, 0);
            let mut all = SigSet::empty();
            all.add(sig);
            let _ = all.thread_unblock();
            // Twice: the standard library's SIGSEGV and SIGBUS handler
            // (stack overflow detection) resets the default action and
            // returns on a fault it does not own.
            let _ = nix::sys::signal::raise(sig);
            let _ = nix::sys::signal::raise(sig);
            128 + sig as i32
        }
        _ => FAILED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree four levels deep (each shell starts the next level and a
    /// `sleep`): every descendant is found, the great-grandchild included.
    #[test]
    fn descendants_are_found_through_every_level() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("nest.sh");
        let pids = dir.path().join("pids");
        std::fs::write(
            &script,
            "echo \"$$\" >> \"$2\"\n\
             if [ \"$1\" -lt 3 ]; then sh \"$0\" $(( $1 + 1 )) \"$2\" & fi\n\
             sleep 30 &\n\
             wait\n",
        )
        .unwrap();
        let mut child = Command::new("sh")
            .arg(&script)
            .arg("0")
            .arg(&pids)
            .spawn()
            .unwrap();
        let root = Pid::from_raw(child.id() as i32);
        // Levels 1 to 3 are shells, each level (the root too) has a sleep.
        let mut found = Vec::new();
        let mut shells = Vec::new();
        for _ in 0..500 {
            shells = std::fs::read_to_string(&pids)
                .unwrap_or_default()
                .split_whitespace()
                .map(|p| Pid::from_raw(p.parse().unwrap()))
                .filter(|p| *p != root)
                .collect::<Vec<_>>();
            found = descendants(root);
            if shells.len() == 3 && found.len() == 7 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        for p in &found {
            let _ = kill(*p, Signal::SIGKILL);
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(
            (
                found.len(),
                shells.len(),
                shells.iter().all(|s| found.contains(s))
            ),
            (7, 3, true),
            "found {found:?}, shells {shells:?}"
        );
    }
}

//! The count of a job's directory that Paddock, running as the user and
//! not root, makes in a user namespace of its own when the plain walk met
//! a directory it cannot read (a job's `mkdir d; chmod 000 d`, as
//! permission-error tests do). Root reads every directory
//! (`CAP_DAC_READ_SEARCH`); the user does not, and a directory left
//! uncounted could hide any amount of disk, so the job was stopped. An
//! unprivileged process may unshare a user namespace, map its own uid and
//! gid to 0 there, and then holds `CAP_DAC_READ_SEARCH` in it, which the
//! kernel honours on inodes whose uid and gid are both mapped: the user's
//! own files, nobody else's. `unshare(CLONE_NEWUSER)` needs a
//! single-threaded process, so the count runs in a freshly exec'd helper,
//! `paddock __disk-walk ROOT STOP_ABOVE`, dispatched in `main` before any
//! runtime starts ([`main`]): it unshares, maps, becomes non-dumpable
//! (the job's processes, of the same uid, may not trace it or read its
//! memory from then on; not before, or the maps could not be written, so
//! for those few calls after its exec a `process`-rung job could trace it
//! where Yama allows: that rung bounds nothing its user writes outside the
//! job's directory anyway, and the sandbox's job traces nothing of the
//! host) and runs the same walk
//! (`disk_usage::charged`, every property kept: no link followed, no
//! mount entered, hard links once, 4 KiB an entry at least, the depth and
//! entry bounds, stopped past `STOP_ABOVE`), and prints one line on its
//! standard output: `charged BYTES ENTRIES STATE` (STATE `whole`, `over`,
//! `entries`, `depth` or `unreadable`) or `failed WHY` (the step that
//! failed: an unshare refused where unprivileged user namespaces are off,
//! by sysctl or AppArmor; a map not written), which [`parse`] reads
//! strictly. [`charged_in_namespace`] starts it as Paddock's own child
//! (`own_children.rs`: the job's leftovers scan never takes it for the
//! job's), with no environment, standard input and error closed, a
//! process group of its own, its output bounded ([`MAX_OUTPUT`] bytes)
//! and its time too ([`TIMEOUT`]; then, or when the caller stops
//! waiting, its group is killed and it is reaped: it is never left
//! running), and the parent-death signal `SIGKILL`. A directory that is
//! not the user's (another uid or gid, which the user cannot map) stays
//! unreadable there too: the walk says `unreadable` and the job is still
//! stopped.

use std::ffi::OsString;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sched::CloneFlags;

use super::disk_usage::{self, Charged, Incomplete};

/// The first argument that makes `paddock` the walk in a user namespace.
pub const WALK_ARG: &str = "__disk-walk";

/// The most of the helper's output read: its one line is far shorter.
pub const MAX_OUTPUT: u64 = 4096;

/// How long the helper may walk before it is killed: the walk is bounded
/// by its entries (4,000,000 at most), this by the disk's slowest pace.
pub const TIMEOUT: Duration = Duration::from_secs(300);

/// Exit code of a helper that could not write its line.
const FAILED: i32 = 70;

/// Why a count in the user namespace was not had.
#[derive(Debug, thiserror::Error)]
pub enum WalkError {
    #[error("start {} {WALK_ARG}: {source}", exe.display())]
    Spawn {
        exe: PathBuf,
        source: std::io::Error,
    },
    #[error("wait for {WALK_ARG} (pid {pid}): {source}")]
    Wait { pid: u32, source: std::io::Error },
    #[error("{WALK_ARG} (pid {pid}) did not finish within {} s and was killed", TIMEOUT.as_secs())]
    Timeout { pid: u32 },
    #[error("{WALK_ARG} (pid {pid}) was stopped: the job's disk watch ended")]
    Stopped { pid: u32 },
    #[error("read the output of {WALK_ARG} (pid {pid}): {source}")]
    Read { pid: u32, source: std::io::Error },
    #[error("{WALK_ARG} (pid {pid}) exited with {status}, output {output:?}")]
    Exited {
        pid: u32,
        status: std::process::ExitStatus,
        output: String,
    },
    #[error("{WALK_ARG} (pid {pid}) could not count there: {why}")]
    Failed { pid: u32, why: String },
    #[error("{WALK_ARG} (pid {pid}): {source}")]
    Output { pid: u32, source: OutputError },
}

/// The helper's output was not one line of the fixed format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad output {output:?}: {why}")]
pub struct OutputError {
    /// What was read (at most [`MAX_OUTPUT`] bytes, lossily decoded).
    pub output: String,
    /// What is wrong with it.
    pub why: &'static str,
}

/// What the helper itself could not do.
#[derive(Debug, thiserror::Error)]
enum HelperError {
    #[error("usage: paddock {WALK_ARG} ABSOLUTE_ROOT STOP_ABOVE_BYTES")]
    Usage,
    #[error("{step}: {source}")]
    Step { step: &'static str, source: Errno },
    #[error("write {path}: {source}")]
    Map {
        path: &'static str,
        source: std::io::Error,
    },
}

/// The helper: runs on the arguments after [`WALK_ARG`], prints its one
/// line; the process's exit code (0 once the line is written, whatever
/// it says).
pub fn main(args: impl Iterator<Item = OsString>) -> i32 {
    let line = match walk(args.collect()) {
        Ok(charged) => format(&charged),
        Err(e) => format!("failed {}\n", e.to_string().replace('\n', " ")),
    };
    let mut out = std::io::stdout().lock();
    match out.write_all(line.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(_) => FAILED,
    }
}

/// The helper's work: into the namespace, then the walk.
fn walk(args: Vec<OsString>) -> Result<Charged, HelperError> {
    let [root, stop_above] = args.as_slice() else {
        return Err(HelperError::Usage);
    };
    let root = PathBuf::from(root);
    let stop_above: u64 = stop_above
        .to_str()
        .and_then(|s| s.parse().ok())
        .ok_or(HelperError::Usage)?;
    if !root.is_absolute() {
        return Err(HelperError::Usage);
    }
    // Gone with Paddock (the thread that started it waits for it).
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL).map_err(|source| {
        HelperError::Step {
            step: "set the parent-death signal",
            source,
        }
    })?;
    enter_own_namespace()?;
    // From here on a process of the same uid (the job's) may not trace
    // this one nor write its memory: the count it prints is its own. Not
    // before: a non-dumpable process's /proc/self files are root's, and
    // the maps could not be written.
    nix::sys::prctl::set_dumpable(false).map_err(|source| HelperError::Step {
        step: "become non-dumpable",
        source,
    })?;
    Ok(disk_usage::charged(&root, stop_above))
}

/// Unshares a user namespace and maps this process's uid and gid to 0
/// in it (groups denied, as an unprivileged map requires): this process
/// then holds every capability there, `CAP_DAC_READ_SEARCH` on its
/// user's own files among them.
fn enter_own_namespace() -> Result<(), HelperError> {
    let uid = nix::unistd::geteuid().as_raw();
    let gid = nix::unistd::getegid().as_raw();
    nix::sched::unshare(CloneFlags::CLONE_NEWUSER).map_err(|source| HelperError::Step {
        step: "unshare(CLONE_NEWUSER), a user namespace of its own",
        source,
    })?;
    for (path, text) in [
        ("/proc/self/setgroups", "deny".to_string()),
        ("/proc/self/uid_map", format!("0 {uid} 1")),
        ("/proc/self/gid_map", format!("0 {gid} 1")),
    ] {
        std::fs::write(path, text).map_err(|source| HelperError::Map { path, source })?;
    }
    Ok(())
}

/// The helper's line for a count.
pub fn format(charged: &Charged) -> String {
    let state = match charged.incomplete {
        None => "whole",
        Some(Incomplete::Over) => "over",
        Some(Incomplete::Entries) => "entries",
        Some(Incomplete::Depth) => "depth",
        Some(Incomplete::Unreadable) => "unreadable",
    };
    format!("charged {} {} {state}\n", charged.bytes, charged.entries)
}

/// What the helper said: its count, or why it could not count (`Err(Ok(why))`
/// for its `failed` line); an output that is not exactly one line of the
/// format is an [`OutputError`] naming it.
pub fn parse(output: &[u8]) -> Result<Result<Charged, String>, OutputError> {
    let bad = |why| OutputError {
        output: String::from_utf8_lossy(output).into_owned(),
        why,
    };
    let text = std::str::from_utf8(output).map_err(|_| bad("not UTF-8"))?;
    let line = text
        .strip_suffix('\n')
        .ok_or_else(|| bad("not ended by a newline"))?;
    if line.contains('\n') {
        return Err(bad("more than one line"));
    }
    if let Some(why) = line.strip_prefix("failed ") {
        if why.is_empty() {
            return Err(bad("a failure without its reason"));
        }
        return Ok(Err(why.to_string()));
    }
    let fields: Vec<&str> = line.split(' ').collect();
    let ["charged", bytes, entries, state] = fields.as_slice() else {
        return Err(bad(
            "neither `charged BYTES ENTRIES STATE` nor `failed WHY`",
        ));
    };
    let number = |s: &str| {
        // Digits only: no sign, no space, no leading `+`.
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse::<u64>().ok()
    };
    let bytes = number(bytes).ok_or_else(|| bad("BYTES is not a number"))?;
    let entries = number(entries).ok_or_else(|| bad("ENTRIES is not a number"))?;
    let incomplete = match *state {
        "whole" => None,
        "over" => Some(Incomplete::Over),
        "entries" => Some(Incomplete::Entries),
        "depth" => Some(Incomplete::Depth),
        "unreadable" => Some(Incomplete::Unreadable),
        _ => {
            return Err(bad(
                "STATE is not one of whole, over, entries, depth, unreadable",
            ))
        }
    };
    Ok(Ok(Charged {
        bytes,
        entries,
        incomplete,
    }))
}

/// What the job directory `root` is charged, counted by `exe` (the
/// `paddock` binary) as [`WALK_ARG`] in a user namespace of its own, the
/// walk stopped past `stop_above`; `stop`, once set, kills it (the
/// job's watch ended).
pub fn charged_in_namespace(
    exe: &Path,
    root: &Path,
    stop_above: u64,
    stop: Option<&AtomicBool>,
) -> Result<Charged, WalkError> {
    use std::os::unix::process::CommandExt as _;
    // The helper takes an absolute root only.
    let root = std::path::absolute(root).map_err(|source| WalkError::Spawn {
        exe: exe.to_path_buf(),
        source,
    })?;
    let mut cmd = Command::new(exe);
    cmd.arg(WALK_ARG)
        .arg(&root)
        .arg(stop_above.to_string())
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    let (mut child, _own) =
        crate::own_children::spawn(|| cmd.spawn(), |c| Some(c.id())).map_err(|source| {
            WalkError::Spawn {
                exe: exe.to_path_buf(),
                source,
            }
        })?;
    let pid = child.id();
    let deadline = Instant::now() + TIMEOUT;
    let mut pause = Duration::from_millis(2);
    let status = loop {
        let ended = match child.try_wait() {
            Ok(ended) => ended,
            Err(source) => {
                kill(&mut child);
                return Err(WalkError::Wait { pid, source });
            }
        };
        if let Some(status) = ended {
            break status;
        }
        if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            kill(&mut child);
            return Err(WalkError::Stopped { pid });
        }
        if Instant::now() >= deadline {
            kill(&mut child);
            return Err(WalkError::Timeout { pid });
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    };
    let mut output = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        stdout
            .take(MAX_OUTPUT)
            .read_to_end(&mut output)
            .map_err(|source| WalkError::Read { pid, source })?;
    }
    if !status.success() {
        return Err(WalkError::Exited {
            pid,
            status,
            output: String::from_utf8_lossy(&output).into_owned(),
        });
    }
    match parse(&output) {
        Ok(Ok(charged)) => Ok(charged),
        Ok(Err(why)) => Err(WalkError::Failed { pid, why }),
        Err(source) => Err(WalkError::Output { pid, source }),
    }
}

/// Kills the helper's process group (its own: it is not reaped yet, so
/// its pid names no one else's) and reaps it.
fn kill(child: &mut std::process::Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Every count the helper can print reads back as itself.
    #[test]
    fn a_count_reads_back_as_itself() {
        for incomplete in [
            None,
            Some(Incomplete::Over),
            Some(Incomplete::Entries),
            Some(Incomplete::Depth),
            Some(Incomplete::Unreadable),
        ] {
            let charged = Charged {
                bytes: u64::MAX,
                entries: 7,
                incomplete,
            };
            assert_eq!(parse(format(&charged).as_bytes()), Ok(Ok(charged)));
        }
        assert_eq!(
            parse(b"failed unshare(CLONE_NEWUSER): EPERM\n"),
            Ok(Err("unshare(CLONE_NEWUSER): EPERM".to_string()))
        );
    }

    /// Anything but exactly one line of the format is an error naming
    /// what was read and what is wrong with it.
    #[test]
    fn bad_output_is_an_error_naming_it() {
        let cases: [(&[u8], &str); 14] = [
            (b"", "not ended by a newline"),
            (b"charged 1 2 whole", "not ended by a newline"),
            (
                b"charged 1 2 whole\ncharged 1 2 whole\n",
                "more than one line",
            ),
            (b"charged 1 2 whole\n\n", "more than one line"),
            (b"charged \xff 2 whole\n", "not UTF-8"),
            (b"failed \n", "a failure without its reason"),
            (
                b"charged 1 2\n",
                "neither `charged BYTES ENTRIES STATE` nor `failed WHY`",
            ),
            (
                b"charged 1 2 whole extra\n",
                "neither `charged BYTES ENTRIES STATE` nor `failed WHY`",
            ),
            (
                b"charged  1 2 whole\n",
                "neither `charged BYTES ENTRIES STATE` nor `failed WHY`",
            ),
            (b"charged -1 2 whole\n", "BYTES is not a number"),
            (b"charged +1 2 whole\n", "BYTES is not a number"),
            (
                b"charged 18446744073709551616 2 whole\n",
                "BYTES is not a number",
            ),
            (b"charged 1 x whole\n", "ENTRIES is not a number"),
            (
                b"charged 1 2 partial\n",
                "STATE is not one of whole, over, entries, depth, unreadable",
            ),
        ];
        for (output, why) in cases {
            assert_eq!(
                parse(output),
                Err(OutputError {
                    output: String::from_utf8_lossy(output).into_owned(),
                    why,
                })
            );
        }
        assert_eq!(
            parse(b"charged 1 2 whole\r\n").unwrap_err().to_string(),
            "bad output \"charged 1 2 whole\\r\\n\": STATE is not one of whole, over, entries, \
             depth, unreadable"
        );
    }
}

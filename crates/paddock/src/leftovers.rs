//! What a job whose `paddock` process died may have left running on the
//! host, found and ended by the reaper (`reaper.rs`). Two kinds:
//!
//! - processes of this user that still point into the job's directory:
//!   their working or root directory, an open file, a command-line
//!   argument or an environment value is inside it. That is the engine and
//!   its tools on the `process` rung (their `HOME` is `<job>/home`, however
//!   they detached), and an orphaned `git` of the checkout (its argument is
//!   `<job>/work`), which would otherwise race the directory's removal.
//! - the job's cgroups, `<root>/<controller>/paddock/<name>` on v1 and
//!   `<root>/paddock/<name>` on v2 (`paddock_sandbox::cgroup` names a job's
//!   after its id, a `paddock sandbox` run's `sbx-<pid>-<uuid>`), with
//!   whatever is still in them: the sandbox helper removes them when a run
//!   ends, but not when it is killed with its `paddock`.
//!
//! Processes of other users cannot be read and are never touched.
//!
//! At a job's own end the scan is scoped by time ([`Since`]): only
//! processes created after the job began are read, and only those are the
//! job's. Every process the job made (the engine, its tools, anything that
//! left the engine's process group or session, double-forked, or was
//! started by a daemon at the job's request) was created by a fork after
//! the job began, and a process's start time (`/proc/PID/stat`) is set when
//! it is created and never changes, so none of them is skipped, however it
//! escaped the tree, its cgroup or its PID namespace. What is skipped are
//! the processes older than the job (a host has hundreds, each with its
//! open files to read: most of the scan's time): they can point into the
//! job's directory only by their own doing (a user's shell `cd`ed there)
//! or, on the unconfined `process` rung, by a job that attaches to them
//! with `ptrace` (which the sandbox rung's PID namespace rules out); such a
//! process is not the job's and is left. The reaper, which does not know
//! when a dead job began, scans every process.

use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// The cgroup hierarchies of this host.
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// How often the process scan is repeated when it found something (a
/// process may fork while it is being killed).
const SCAN_ROUNDS: usize = 20;

/// How long a cgroup may stay busy after its processes were killed (the
/// kernel releases a dying cgroup a moment later).
const CGROUP_BUSY: Duration = Duration::from_secs(5);

/// The cgroups of a `paddock sandbox` run start with this, then its pid.
const SANDBOX_RUN_PREFIX: &str = "sbx-";

/// True when `value` names `dir` or a path under it: `dir` followed by
/// nothing, `/`, `:` (a list such as PATH) or `=`.
fn mentions(value: &[u8], dir: &[u8]) -> bool {
    if dir.is_empty() {
        return false;
    }
    let mut from = 0;
    while let Some(i) = value[from..].windows(dir.len()).position(|w| w == dir) {
        let end = from + i + dir.len();
        if matches!(value.get(end), None | Some(b'/' | b':' | b'=')) {
            return true;
        }
        from += i + 1;
    }
    false
}

/// True when process `proc_dir` (`/proc/<pid>`) points into `dir`.
fn points_into(proc_dir: &Path, dir: &[u8]) -> bool {
    let link = |name: &Path| {
        std::fs::read_link(name)
            .map(|t| mentions(t.as_os_str().as_bytes(), dir))
            .unwrap_or(false)
    };
    if link(&proc_dir.join("cwd")) || link(&proc_dir.join("root")) {
        return true;
    }
    for file in ["cmdline", "environ"] {
        if let Ok(bytes) = std::fs::read(proc_dir.join(file)) {
            if bytes.split(|b| *b == 0).any(|v| mentions(v, dir)) {
                return true;
            }
        }
    }
    match std::fs::read_dir(proc_dir.join("fd")) {
        Ok(fds) => fds.flatten().any(|fd| link(&fd.path())),
        Err(_) => false,
    }
}

/// A moment on the clock of the processes' start times (clock ticks
/// since boot, `/proc/PID/stat`'s 22nd field), a tick early.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Since(u64);

impl Since {
    /// Now, from `/proc/uptime` (the same boot clock, to a hundredth of a
    /// second, rounded down); `None` when it cannot be read.
    pub fn now() -> Option<Since> {
        let uptime = std::fs::read_to_string("/proc/uptime").ok()?;
        let (secs, hundredths) = uptime.split_whitespace().next()?.split_once('.')?;
        let centis = secs.parse::<u64>().ok()? * 100 + hundredths.get(..2)?.parse::<u64>().ok()?;
        let ticks = centis.checked_mul(clock_ticks()?)? / 100;
        Some(Since(ticks.saturating_sub(1)))
    }

    /// When process `proc_dir` (`/proc/<pid>`) was created.
    pub(crate) fn of(proc_dir: &Path) -> Option<Since> {
        crate::own_children::stat_field(proc_dir, 22).map(Since)
    }
}

/// The kernel's clock ticks per second (`USER_HZ`).
fn clock_ticks() -> Option<u64> {
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok()??;
    u64::try_from(ticks).ok().filter(|t| *t > 0)
}

/// Kills (SIGKILL) every process of this user that points into `dir`
/// (see the module's text), but this one; how many. The scan repeats
/// until it finds none, so children forked meanwhile go too. With `since`,
/// only processes created at or after it are read (the module's text).
pub fn kill_processes(dir: &Path, since: Option<Since>) -> usize {
    let wanted = dir.as_os_str().as_bytes();
    kill_until_none(|pid, path| {
        // Older than the job: not the job's. A start time that cannot be
        // read (the process is gone, or not this user's) is read in full
        // as before.
        if let (Some(since), Some(started)) = (since, Since::of(path)) {
            if started < since {
                return false;
            }
        }
        // Paddock's own helpers at work in the job's directory (the
        // patch's early reads) and their subprocesses are not the job's
        // (asked last: it climbs the process's ancestors).
        points_into(path, wanted) && !crate::own_children::is_own(pid, path)
    })
    .len()
}

/// Kills (SIGKILL) every process of this user whose environment names a
/// `paddock` owner that is gone (`own_children::OWNER_ENV`: a host git,
/// or what it started, outliving its killed `paddock`); their pids. The
/// scan repeats until it finds none: a git's children, orphaned by its
/// kill, carry the same owner. Only those of the jobs directory `jobs`
/// (or of none named) are killed (`own_children::JOBS_ENV`).
pub fn kill_orphaned_host_gits(jobs: &Path) -> Vec<u32> {
    kill_until_none(|_, path| crate::own_children::orphaned_owner(path, jobs).is_some())
}

/// Kills (SIGKILL) every process but this one that `doomed` (given its
/// pid and `/proc/<pid>`) picks, scanning `/proc` again until a scan
/// kills none (at most [`SCAN_ROUNDS`] scans: what the killed ones forked
/// meanwhile, or left orphaned, goes too); the pids killed, in order.
fn kill_until_none(doomed: impl Fn(u32, &Path) -> bool) -> Vec<u32> {
    let me = std::process::id();
    let mut killed = std::collections::BTreeSet::new();
    for _ in 0..SCAN_ROUNDS {
        let Ok(procs) = std::fs::read_dir("/proc") else {
            break;
        };
        let mut found = false;
        for p in procs.flatten() {
            let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(raw) = i32::try_from(pid) else {
                continue;
            };
            if pid == me || !doomed(pid, &p.path()) {
                continue;
            }
            if kill(Pid::from_raw(raw), Signal::SIGKILL).is_ok() {
                found = true;
                killed.insert(pid);
            }
        }
        if !found {
            break;
        }
        // Give the kernel a moment to tear the killed ones down.
        std::thread::sleep(Duration::from_millis(20));
    }
    killed.into_iter().collect()
}

/// The hierarchies under `root` that may hold Paddock's cgroups: `root`
/// itself (v2) and each of its directories (the v1 controllers).
fn hierarchies(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.to_path_buf()];
    if let Ok(rd) = std::fs::read_dir(root) {
        let mut dirs: Vec<PathBuf> = rd
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect();
        dirs.sort();
        out.extend(dirs);
    }
    out
}

/// The cgroup directories named `name` under `root` (one per v1
/// controller, or the one v2 directory).
pub fn cgroups(root: &Path, name: &str) -> Vec<PathBuf> {
    hierarchies(root)
        .into_iter()
        .map(|h| h.join("paddock").join(name))
        .filter(|d| d.is_dir())
        .collect()
}

/// The cgroups under `root` left by `paddock sandbox` runs whose process
/// is gone (`sbx-<pid>-…` with no process `<pid>`). A run whose pid was
/// reused since is left for a later pass.
pub fn dead_sandbox_runs(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for h in hierarchies(root) {
        let Ok(rd) = std::fs::read_dir(h.join("paddock")) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = name
                .strip_prefix(SANDBOX_RUN_PREFIX)
                .and_then(|rest| rest.split('-').next())
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            if e.path().is_dir() && !Path::new("/proc").join(pid.to_string()).exists() {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// Kills what is in cgroup `dir` (and in cgroups under it) and removes
/// it; how many processes it killed.
pub fn remove_cgroup(dir: &Path) -> std::io::Result<usize> {
    let mut killed = 0;
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                killed += remove_cgroup(&e.path())?;
            }
        }
    }
    let deadline = std::time::Instant::now() + CGROUP_BUSY;
    loop {
        // v2 kills everything in one write where the kernel offers it.
        let _ = std::fs::write(dir.join("cgroup.kill"), "1");
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            if kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok() {
                killed += 1;
            }
        }
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(killed),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(killed),
            Err(e)
                if e.raw_os_error() == Some(nix::errno::Errno::EBUSY as i32)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_mentions_a_directory_only_as_a_whole_path() {
        let dir = b"/s/jobs/job-1";
        let yes: [&[u8]; 6] = [
            b"/s/jobs/job-1",
            b"/s/jobs/job-1/home",
            b"HOME=/s/jobs/job-1/home",
            b"/usr/bin:/s/jobs/job-1:/bin",
            b"--git-dir=/s/jobs/job-1/work/.git",
            b"x/s/jobs/job-1=y",
        ];
        let no: [&[u8]; 4] = [b"/s/jobs/job-10", b"/s/jobs/job-1x/home", b"/s/jobs", b""];
        assert_eq!(
            (
                yes.iter().map(|v| mentions(v, dir)).collect::<Vec<_>>(),
                no.iter().map(|v| mentions(v, dir)).collect::<Vec<_>>(),
            ),
            (vec![true; 6], vec![false; 4])
        );
        assert!(!mentions(b"/anything", b""));
    }

    /// A process is found by its working directory, an argument, an
    /// environment value or an open file in the directory, and only then.
    #[test]
    fn processes_pointing_into_a_directory_are_killed_and_no_other() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().canonicalize().unwrap().join("job-1");
        let other = root.path().canonicalize().unwrap().join("job-10");
        for d in [&dir, &other] {
            std::fs::create_dir_all(d.join("home")).unwrap();
        }
        std::fs::write(dir.join("file"), "x").unwrap();
        let spawn = |cmd: &mut std::process::Command| {
            cmd.stdin(std::process::Stdio::null()).spawn().unwrap()
        };
        let sleep = || {
            let mut c = std::process::Command::new("sleep");
            c.arg("30").current_dir("/");
            c
        };
        let mut children = [
            spawn(sleep().current_dir(&dir)),
            spawn(
                std::process::Command::new("sh")
                    .args(["-c", "while :; do sleep 0.05; done"])
                    .arg(dir.join("work"))
                    .current_dir("/"),
            ),
            spawn(sleep().env("HOME", dir.join("home"))),
            spawn(
                std::process::Command::new("sh")
                    .args(["-c", "exec 3<\"$0\"; exec sleep 30"])
                    .arg(dir.join("file"))
                    .current_dir("/"),
            ),
        ];
        let mut bystanders = vec![
            spawn(sleep().current_dir(&other)),
            spawn(sleep().env("HOME", other.join("home"))),
        ];
        // Let the shell open its file and exec.
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(kill_processes(&dir, None), 4);
        let statuses: Vec<Option<i32>> = children
            .iter_mut()
            .map(|c| {
                use std::os::unix::process::ExitStatusExt as _;
                c.wait().unwrap().signal()
            })
            .collect();
        assert_eq!(
            statuses,
            vec![Some(nix::sys::signal::Signal::SIGKILL as i32); 4]
        );
        for b in &mut bystanders {
            assert_eq!(b.try_wait().unwrap(), None);
            b.kill().unwrap();
            b.wait().unwrap();
        }
        assert_eq!(kill_processes(&dir, None), 0);
    }

    /// Paddock's own helper at work in the job's directory (registered,
    /// its child: `own_children.rs`) is left by the scan, and so are the
    /// subprocesses it started (a wrapper script's real git and that one's
    /// child); the same command unregistered is killed with its children.
    /// Before, the helper's children were killed (a `git` on `PATH` that
    /// is a wrapper lost its real git at the job's end).
    #[test]
    fn paddocks_own_registered_helper_and_its_children_are_left_and_no_other() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().canonicalize().unwrap().join("job-1");
        std::fs::create_dir_all(&dir).unwrap();
        // A shell whose child and grandchild run in `dir` (each shell
        // forks: `sh -c` of a compound command does not exec its last).
        let tree = || {
            let mut c = std::process::Command::new("sh");
            c.args(["-c", "sh -c 'sleep 30; true'; true"])
                .current_dir(&dir);
            c
        };
        let (mut helper, registered) =
            crate::own_children::spawn(|| tree().spawn(), |c| Some(c.id())).unwrap();
        let mut stranger = tree().spawn().unwrap();
        // Both trees whole (shell, shell, sleep) before the scan.
        let below = |pid: u32| {
            let mut found = vec![pid];
            for _ in 0..500 {
                found = vec![pid];
                let mut i = 0;
                while i < found.len() {
                    let children =
                        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", found[i]))
                            .unwrap_or_default();
                    found.extend(
                        children
                            .split_whitespace()
                            .map(|c| c.parse::<u32>().unwrap()),
                    );
                    i += 1;
                }
                if found.len() == 3 {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            found
        };
        let (ours, theirs) = (below(helper.id()), below(stranger.id()));
        assert_eq!((ours.len(), theirs.len()), (3, 3));
        let killed = kill_processes(&dir, None);
        let stranger_ended = {
            use std::os::unix::process::ExitStatusExt as _;
            stranger.wait().unwrap().signal()
        };
        let alive = |pid: &u32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
        };
        let ours_alive: Vec<bool> = ours.iter().map(alive).collect();
        let theirs_alive: Vec<bool> = theirs.iter().map(alive).collect();
        drop(registered);
        assert_eq!(kill_processes(&dir, None), 3);
        helper.wait().unwrap();
        assert_eq!(
            (killed, stranger_ended, ours_alive, theirs_alive),
            (
                3,
                Some(nix::sys::signal::Signal::SIGKILL as i32),
                vec![true; 3],
                vec![false; 3]
            )
        );
    }

    /// Processes naming a host git's owner (`own_children::OWNER_ENV`):
    /// those whose owner is gone (a pid no process has; this process's
    /// pid with another start time, a reused pid) are killed, with the
    /// child one of them started; one naming this live process is left,
    /// and so are an orphan of another jobs directory and the user's
    /// daemons a git started (a session leader, git's credential cache). (Other processes on
    /// the host may be killed by the same scan: only these are looked at.)
    /// Before, nothing killed a host git whose `paddock` was killed unless
    /// it named a job's directory, and a pass killed every home's.
    ///
    /// The one orphan that names no jobs directory (as an older binary's
    /// gits do) is one that any scan kills, and the other lib tests run
    /// reaper passes beside this one: it is judged by its end (killed),
    /// not by which scan killed it. The others name this test's jobs
    /// directory, which no other test's pass scans for, and the daemons
    /// show their owner's mark only once they are daemons.
    #[test]
    fn host_gits_whose_paddock_is_gone_are_killed_and_no_other() {
        use std::os::unix::process::ExitStatusExt as _;
        let owner = crate::own_children::OWNER_ENV;
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let gone_pid = gone.id();
        gone.wait().unwrap();
        let jobs = Path::new("/srv/paddock/jobs");
        let scoped = |mark: &str, jobs: Option<&Path>, script: &str| {
            let mut cmd = std::process::Command::new("sh");
            cmd.args(["-c", script]).env(owner, mark);
            if let Some(jobs) = jobs {
                cmd.env(crate::own_children::JOBS_ENV, jobs);
            }
            cmd.spawn().unwrap()
        };
        let sleeper = |mark: &str, script: &str| scoped(mark, None, script);
        let mine = crate::own_children::owner_mark().unwrap().to_string();
        let (pid, started) = mine.split_once('.').unwrap();
        let reused = format!("{pid}.{}", started.parse::<u64>().unwrap() + 1);
        let mut orphans = [
            sleeper(&format!("{gone_pid}.1"), "exec sleep 30"),
            scoped(&reused, Some(jobs), "exec sleep 30"),
        ];
        let mut elsewhere = scoped(
            &format!("{gone_pid}.1"),
            Some(Path::new("/srv/other/jobs")),
            "exec sleep 30",
        );
        // Daemons of the user's that a git started: a session leader (an
        // ssh ControlPersist master) and git's credential cache, in both
        // its forms (`git credential-cache--daemon`, the older
        // `git-credential-cache--daemon`).
        // (The script waits on its stdin, a pipe nobody writes: no child
        // of its own, so its command line stays as it is.)
        let scripts = tempfile::tempdir().unwrap();
        std::fs::write(
            scripts.path().join("credential-cache--daemon"),
            "read -t 30 x\n",
        )
        .unwrap();
        // The owner's mark is exported by a shell that then execs the
        // daemon, so no process shows it before it has its daemon's form
        // (a session leader, git's command line): a scan (this one, or a
        // reaper pass of another test beside it) that caught a shell
        // still on its way there would rightly take it for an orphan.
        let daemon = |session_leader: bool, then: &str| {
            let script = format!("export {owner}={gone_pid}.1; exec {then}");
            let mut cmd =
                std::process::Command::new(if session_leader { "setsid" } else { "bash" });
            if session_leader {
                cmd.arg("bash");
            }
            cmd.args(["-c", &script])
                .stdin(std::process::Stdio::piped())
                .current_dir(scripts.path())
                .spawn()
                .unwrap()
        };
        let mut daemons = [
            daemon(true, "sleep 30"),
            daemon(false, "-a git bash credential-cache--daemon"),
            daemon(false, "-a git-credential-cache--daemon sleep 30"),
        ];
        // A git and what it started: its child outlives it by a moment.
        let mut parent = scoped(&format!("{gone_pid}.1"), Some(jobs), "sleep 30 & wait");
        let mut live = sleeper(&mine, "exec sleep 30");
        // The child is there once the shell has forked it (waited for, not
        // slept on: a loaded machine may take its time).
        let children = format!("/proc/{}/task/{}/children", parent.id(), parent.id());
        let mut grandchild: Vec<u32> = Vec::new();
        for _ in 0..500 {
            grandchild = std::fs::read_to_string(&children)
                .unwrap()
                .split_whitespace()
                .map(|p| p.parse().unwrap())
                .collect();
            if !grandchild.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let killed = kill_orphaned_host_gits(jobs);
        let ours: Vec<u32> = [orphans[1].id(), parent.id()]
            .into_iter()
            .chain(grandchild.iter().copied())
            .filter(|p| !killed.contains(p))
            .collect();
        let ended: Vec<Option<i32>> = orphans
            .iter_mut()
            .chain([&mut parent])
            .map(|c| c.wait().unwrap().signal())
            .collect();
        let [d0, d1, d2] = &mut daemons;
        let mut left = [&mut live, &mut elsewhere, d0, d1, d2];
        let left_running = left.each_mut().map(|c| c.try_wait().unwrap().is_none());
        for c in left {
            c.kill().unwrap();
            c.wait().unwrap();
        }
        let nine = Some(nix::sys::signal::Signal::SIGKILL as i32);
        assert_eq!(
            (grandchild.len(), ours, ended, left_running),
            (1, Vec::<u32>::new(), vec![nine; 3], [true; 5])
        );
    }

    /// Scoped by time, the scan kills what was created since (here in its
    /// own session, its working directory `/`, its environment empty: only
    /// an open file points into the directory) and leaves a process older
    /// than that, though it points into the directory too.
    #[test]
    fn a_scan_since_a_moment_finds_what_was_created_since_and_only_that() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().canonicalize().unwrap().join("job-1");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("file"), "x").unwrap();
        let mut older = std::process::Command::new("sleep")
            .arg("30")
            .current_dir(&dir)
            .spawn()
            .unwrap();
        // Past the clock's resolution (a tick of 10 ms, and one more).
        std::thread::sleep(Duration::from_millis(100));
        let since = Since::now().unwrap();
        assert!(Since::of(Path::new(&format!("/proc/{}", older.id()))).unwrap() < since);
        let mut newer = std::process::Command::new("setsid")
            .args(["env", "-i", "/bin/sh", "-c", "exec 3<\"$0\"; exec sleep 30"])
            .arg(dir.join("file"))
            .current_dir("/")
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(kill_processes(&dir, Some(since)), 1);
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(
            (
                newer.wait().unwrap().signal(),
                older.try_wait().unwrap().is_none()
            ),
            (Some(nix::sys::signal::Signal::SIGKILL as i32), true)
        );
        // Unscoped (the reaper's scan), the older one is found too.
        assert_eq!(kill_processes(&dir, None), 1);
        assert_eq!(
            older.wait().unwrap().signal(),
            Some(nix::sys::signal::Signal::SIGKILL as i32)
        );
    }

    #[test]
    fn cgroups_are_found_by_name_in_every_hierarchy() {
        let root = tempfile::tempdir().unwrap();
        for d in [
            "memory/paddock/job-1",
            "pids/paddock/job-1",
            "pids/paddock/job-2",
            "cpu/paddock",
            "paddock/job-1",
            "blkio",
        ] {
            std::fs::create_dir_all(root.path().join(d)).unwrap();
        }
        assert_eq!(
            cgroups(root.path(), "job-1"),
            vec![
                root.path().join("paddock/job-1"),
                root.path().join("memory/paddock/job-1"),
                root.path().join("pids/paddock/job-1"),
            ]
        );
        assert_eq!(cgroups(root.path(), "job-3"), Vec::<PathBuf>::new());
    }

    #[test]
    fn only_sandbox_runs_whose_process_is_gone_are_dead() {
        let root = tempfile::tempdir().unwrap();
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let gone_pid = gone.id();
        gone.wait().unwrap();
        let dead = format!("memory/paddock/sbx-{gone_pid}-0192");
        let alive = format!("memory/paddock/sbx-{}-0193", std::process::id());
        for d in [&dead, &alive, &"memory/paddock/job-1".to_string()] {
            std::fs::create_dir_all(root.path().join(d)).unwrap();
        }
        assert_eq!(dead_sandbox_runs(root.path()), vec![root.path().join(dead)]);
    }
}

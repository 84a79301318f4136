//! Paddock's own git on the host, hardened against everything a job writes.
//! Every command names its git directory (`GIT_DIR`) and work tree
//! (`GIT_WORK_TREE`) explicitly, so git never discovers a repository from
//! a `.git` directory, gitfile, `commondir` or worktree link; it starts
//! from an empty environment and reads no system, global or `$HOME`
//! configuration; and the `-c` settings below, which outrank any
//! repository config, turn off every program git could start (fsmonitor,
//! hooks, pagers, external diff, textconv, remote transports) and every
//! path git would read besides the two it is given (attributes and
//! excludes files, replace refs). The only repository config read is that
//! of the git directory named, which Paddock wrote. Every command is
//! bounded in time (a hostile repository can make git slow: a FIFO swapped
//! in for a file it reads, a huge tree) and killed past its bound, or when
//! its caller stops waiting for it, with every process it started (a
//! process group of its own). See
//! ARCHITECTURE.md, "Paddock's git and the job's git".

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Output, Stdio};
use std::time::Duration;

use tokio::io::AsyncWriteExt as _;
use tokio::process::Command;
use tokio::sync::OnceCell;

use super::WorkspaceError;

/// How long one of Paddock's git commands on a job's repository may run.
pub(crate) const GIT_TIMEOUT: Duration = Duration::from_secs(600);

/// How much CPU one of Paddock's gits on a job's content (its work tree,
/// the objects made of it) may use, user and system time together. Its
/// wall-clock limit ([`GIT_TIMEOUT`]) bounds a git that waits; this bounds
/// one that computes: a job's ignore or attribute rules can make git spend
/// minutes of the host's CPU on a few paths (5 MB of `a/**/b<n>` patterns
/// took 94 s for 200 paths), CPU no job limit covers, since the job's
/// processes are gone or not its. A repository's committed rules do the
/// same to the checkout that provisions its job, before any limit of
/// the job holds, so that checkout is held to it too. Honest work is far
/// below it: the patch of a 10,000-file tree takes git a few
/// milliseconds, hashing a gigabyte of new files (the most a patch may
/// hold) about 20 s.
pub(crate) const JOB_GIT_CPU: Duration = Duration::from_secs(60);

/// The CPU each of Paddock's gits on a job's content may use under
/// `profile`: its `git_cpu_secs`, else [`JOB_GIT_CPU`].
pub(crate) fn job_git_cpu(profile: Option<&paddock_protocol::HostProfile>) -> Duration {
    profile
        .and_then(|p| p.git_cpu_secs)
        .map_or(JOB_GIT_CPU, Duration::from_secs)
}

/// How long the first clone of the user's source (possibly remote and
/// large) may run.
pub(super) const CLONE_TIMEOUT: Duration = Duration::from_secs(3600);

/// How long reading the user's own git configuration may take.
pub(super) const CONFIG_TIMEOUT: Duration = Duration::from_secs(10);

/// Settings given as `-c` to every command. They outrank the repository's
/// own config, so even a config file git reads cannot turn any of these on.
const SETTINGS: &[&str] = &[
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.attributesFile=/dev/null",
    "core.untrackedCache=false",
    "core.splitIndex=false",
    "core.sparseCheckout=false",
    "core.pager=cat",
    "core.quotePath=false",
    "color.ui=never",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.relative=false",
    "core.askPass=",
    "core.autocrlf=false",
    "core.symlinks=true",
    "core.ignoreCase=false",
    "core.precomposeUnicode=false",
    "core.trustctime=true",
    "core.checkStat=default",
    // A path git would take for its own directory on some file system
    // (`.g\u{200c}it` on HFS+, `git~1` or `.git.` on NTFS) is never staged,
    // whatever the host: a tree holding one would write the `.git` of
    // whoever checks the branch out there.
    "core.protectHFS=true",
    "core.protectNTFS=true",
    "diff.external=",
    "diff.submodule=short",
    "submodule.recurse=false",
    "protocol.allow=never",
    "protocol.file.allow=always",
    "credential.helper=",
    "gc.auto=0",
    "maintenance.auto=false",
    "advice.detachedHead=false",
    "init.templateDir=",
];

/// One repository as Paddock's git sees it: a git directory, optionally a
/// work tree and an index file.
#[derive(Debug, Clone)]
pub(crate) struct HostGit {
    /// `None` only for `clone`, which makes its own.
    pub git_dir: Option<PathBuf>,
    pub work_tree: Option<PathBuf>,
    pub index: Option<PathBuf>,
    /// The user's own excludes file (`core.excludesFile`), read like the
    /// repository's `info/exclude`; `/dev/null` when there is none.
    pub excludes: Option<PathBuf>,
    /// The job directory, for errors.
    pub root: PathBuf,
    /// How long each command may run before it is killed.
    pub timeout: Duration,
    /// How much CPU each command may use ([`job_git_cpu`] for a job's
    /// content): past it the kernel ends git (`SIGXCPU`, `RLIMIT_CPU` set
    /// as it starts, no core dumped) and the command fails with
    /// `GitCpuLimit`. `None` for the user's own repository (a clone of a
    /// large source may honestly take longer).
    pub cpu_limit: Option<Duration>,
}

impl HostGit {
    /// The command for `git ARGS`, not started.
    pub fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new(git_program());
        cmd.env_clear();
        if let Some(path) = std::env::var_os("PATH") {
            cmd.env("PATH", path);
        }
        cmd.env("HOME", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_SYSTEM", "/dev/null")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_ATTR_NOSYSTEM", "1")
            .env("GIT_NO_REPLACE_OBJECTS", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_PAGER", "cat")
            .env("PAGER", "cat")
            .env("GIT_ALLOW_PROTOCOL", "file")
            .env("LC_ALL", "C");
        if let Some(dir) = &self.git_dir {
            cmd.env("GIT_DIR", dir);
        }
        // The directory git runs in is given as `-C` (git changes into it
        // before anything else, as it would have started there), not as
        // the child's own: a command with no directory of its own, naming
        // its program by path, is started with `posix_spawn` (a vfork)
        // instead of a fork of Paddock's whole process, whose copied
        // memory cost each git a few milliseconds (see `git_program`).
        let dir = match (&self.work_tree, &self.git_dir) {
            (Some(work), _) => {
                cmd.env("GIT_WORK_TREE", work);
                work
            }
            (None, Some(dir)) => dir,
            (None, None) => &self.root,
        };
        cmd.arg("-C").arg(dir);
        if let Some(index) = &self.index {
            cmd.env("GIT_INDEX_FILE", index);
            // An index file named apart from the git directory's own is
            // Paddock's scratch (the patch's copy, the base's listing),
            // read by Paddock's git only: written without its trailing
            // checksum (git 2.40+; older gits ignore the setting), which
            // at 10,000 files is a megabyte hashed by each of the patch's
            // `update-index` and `write-tree` (issue #14).
            cmd.arg("-c").arg("index.skipHash=true");
        }
        for setting in SETTINGS {
            cmd.arg("-c").arg(setting);
        }
        let mut excludes = std::ffi::OsString::from("core.excludesFile=");
        excludes.push(self.excludes.as_deref().unwrap_or(Path::new("/dev/null")));
        cmd.arg("-c").arg(excludes);
        cmd.args(args).stdin(Stdio::null());
        cmd
    }

    /// Runs `git ARGS` with `input` on stdin; its stdout on success.
    pub async fn run<I, S>(&self, args: I, input: Option<&[u8]>) -> Result<Vec<u8>, WorkspaceError>
    where
        I: IntoIterator<Item = S> + Clone,
        S: AsRef<OsStr>,
    {
        let (status, stdout, stderr) = self.status(args.clone(), input).await?;
        if status.success() {
            Ok(stdout)
        } else {
            Err(self.failed(args, &stderr))
        }
    }

    /// Runs `git ARGS` with `input` on stdin (written while stdout is
    /// read); its exit status, stdout and stderr.
    pub async fn status<I, S>(
        &self,
        args: I,
        input: Option<&[u8]>,
    ) -> Result<(ExitStatus, Vec<u8>, Vec<u8>), WorkspaceError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.status_to(args, input, None).await
    }

    /// [`HostGit::status`] with stdout written to `out` when given (then
    /// none is returned).
    /// Starts `git ARGS` now, reading its stdin, which
    /// [`Started::finish`] writes later: the process starts (a few
    /// milliseconds of exec and set-up) beside whatever the caller does
    /// meanwhile. Nothing it reads of the work tree is read before its
    /// input names it. Killed with its group if dropped unfinished.
    pub fn start<I, S>(&self, args: I) -> Result<Started, WorkspaceError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.start_to(args, None)
    }

    /// [`HostGit::start`] with its stdout written to `out` (not held in
    /// memory: a pack).
    pub fn start_into<I, S>(&self, args: I, out: std::fs::File) -> Result<Started, WorkspaceError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.start_to(args, Some(out))
    }

    fn start_to<I, S>(&self, args: I, out: Option<std::fs::File>) -> Result<Started, WorkspaceError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<std::ffi::OsString> =
            args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        let spawned =
            spawn_group(self.command(&args), true, out, self.cpu_limit).map_err(|source| {
                WorkspaceError::Spawn {
                    path: self.root.clone(),
                    source,
                }
            })?;
        Ok(Started {
            spawned,
            args,
            root: self.root.clone(),
            timeout: self.timeout,
            cpu_limit: self.cpu_limit,
            max_stdout: None,
        })
    }

    async fn status_to<I, S>(
        &self,
        args: I,
        input: Option<&[u8]>,
        out: Option<std::fs::File>,
    ) -> Result<(ExitStatus, Vec<u8>, Vec<u8>), WorkspaceError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<std::ffi::OsString> =
            args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        let cmd = self.command(&args);
        let out = spawn_group(cmd, input.is_some(), out, self.cpu_limit)
            .map_err(|source| WorkspaceError::Spawn {
                path: self.root.clone(),
                source,
            })?
            .collect(input, self.timeout)
            .await
            .map_err(|source| WorkspaceError::Spawn {
                path: self.root.clone(),
                source,
            })?
            .ok_or_else(|| WorkspaceError::GitTimeout {
                path: self.root.clone(),
                args: joined(&args),
                after: self.timeout,
            })?;
        check_cpu(&out.status, self.cpu_limit, &self.root, &args)?;
        Ok((out.status, out.stdout, out.stderr))
    }

    /// Runs `git ARGS` and hands each NUL-terminated record of its
    /// stdout to `each` as it is read: nothing of the output is held but
    /// the record being read, at most `max_record` bytes (a longer one
    /// stops git and is `GitOutputPastLimit` with that bound). An error of
    /// `each` stops git (its pipe closed, its group killed) and is the
    /// result; so is a failed git's, its timeout's and its CPU limit's, as
    /// for [`HostGit::run`]. What a listing of a repository's paths may
    /// print (a million paths of 4 KB, a tree whose subtrees repeat
    /// without end) is then never read whole into memory.
    pub async fn each_record<I, S>(
        &self,
        args: I,
        max_record: usize,
        mut each: impl FnMut(&[u8]) -> Result<(), WorkspaceError>,
    ) -> Result<(), WorkspaceError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _};
        let args: Vec<std::ffi::OsString> =
            args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        let spawn_err = |source| WorkspaceError::Spawn {
            path: self.root.clone(),
            source,
        };
        let mut spawned =
            spawn_group(self.command(&args), false, None, self.cpu_limit).map_err(spawn_err)?;
        let (stdout, stderr) = (spawned.stdout.take(), spawned.stderr.take());
        let too_long = || WorkspaceError::GitOutputPastLimit {
            path: self.root.clone(),
            args: joined(&args),
            limit: max_record as u64,
        };
        let read = async {
            let Some(stdout) = stdout else {
                return Ok(());
            };
            let mut reader = tokio::io::BufReader::new(stdout);
            let mut record = Vec::new();
            loop {
                record.clear();
                let limit = max_record as u64 + 1;
                let n = (&mut reader)
                    .take(limit)
                    .read_until(0, &mut record)
                    .await
                    .map_err(spawn_err)?;
                if n == 0 {
                    return Ok(());
                }
                if record.last() == Some(&0) {
                    record.pop();
                } else if record.len() > max_record {
                    return Err(too_long());
                }
                if !record.is_empty() {
                    each(&record)?;
                }
            }
        };
        let group = &mut spawned.group;
        let run = async {
            // The reader ends first when it stops: its pipe then closes
            // and git ends on it.
            let (read, status, stderr) =
                tokio::join!(read, group.child.wait(), read_ends(stderr, STDERR_KEPT));
            (read, status, stderr)
        };
        let (read, status, stderr) = match tokio::time::timeout(self.timeout, run).await {
            Ok(done) => done,
            Err(_) => {
                return Err(WorkspaceError::GitTimeout {
                    path: self.root.clone(),
                    args: joined(&args),
                    after: self.timeout,
                })
            }
        };
        spawned.group.ended = true;
        let status = status.map_err(spawn_err)?;
        read?;
        check_cpu(&status, self.cpu_limit, &self.root, &args)?;
        if !status.success() {
            return Err(self.failed(&args, &stderr.unwrap_or_default()));
        }
        Ok(())
    }

    /// The error for a failed `git ARGS`.
    pub fn failed<I, S>(&self, args: I, stderr: &[u8]) -> WorkspaceError
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        WorkspaceError::Git {
            path: self.root.clone(),
            args: joined(args),
            stderr: String::from_utf8_lossy(stderr).trim().to_string(),
        }
    }
}

/// `args` as one line, for errors.
pub(super) fn joined<I, S>(args: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    args.into_iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The git Paddock starts: the first `git` on this process's `PATH`, by
/// its absolute path, looked up in the absolute directories of `PATH` only
/// (a relative entry would name a directory relative to wherever git is
/// started, which may be a job's work tree); plain `git` (looked up by
/// the child as before) when none holds one. Named by path, a command is
/// started with `posix_spawn` rather than a fork of Paddock's process:
/// the standard library forks whenever the child's `PATH` is set and the
/// program is a bare name, or (in the static build) when the child gets a
/// directory of its own.
pub(crate) fn git_program() -> PathBuf {
    git_program_in(std::env::var_os("PATH").as_deref())
}

/// [`git_program`] for the search path `path`.
pub(crate) fn git_program_in(path: Option<&OsStr>) -> PathBuf {
    let absolute = path.and_then(|p| {
        std::env::join_paths(std::env::split_paths(p).filter(|d| d.is_absolute())).ok()
    });
    absolute
        .and_then(|p| which::which_in("git", Some(p), "/").ok())
        .unwrap_or_else(|| PathBuf::from("git"))
}

/// Whether the host's git follows a link in the work tree named
/// `.gitignore` or `.gitattributes` when it reads rules: gits before 2.32
/// did; 2.32 and later open those files without following (a link is
/// then no rules, with a warning). Asked of `git version` once per
/// process, and only when the walk meets such a link; a git whose
/// version cannot be read counts as following.
pub(super) async fn git_follows_rule_links() -> bool {
    static FOLLOWS: OnceCell<bool> = OnceCell::const_new();
    *FOLLOWS
        .get_or_init(|| async {
            let mut cmd = Command::new(git_program());
            cmd.env_clear().env("LC_ALL", "C").arg("version");
            if let Some(path) = std::env::var_os("PATH") {
                cmd.env("PATH", path);
            }
            match output_within(cmd, None, CONFIG_TIMEOUT).await {
                Ok(Some(out)) if out.status.success() => {
                    !reads_rules_without_following(&String::from_utf8_lossy(&out.stdout))
                }
                _ => true,
            }
        })
        .await
}

/// Whether `git version`'s line names 2.32 or later.
fn reads_rules_without_following(version: &str) -> bool {
    let numbers: Vec<u64> = version
        .trim()
        .trim_start_matches("git version ")
        .split(['.', ' '])
        .take(2)
        .map_while(|n| n.parse().ok())
        .collect();
    matches!(numbers.as_slice(), [major, minor] if (*major, *minor) >= (2, 32))
}

/// Runs `cmd` with `input` on stdin (written while its output is read) and
/// its stdout and stderr captured; `None` when it ran past `limit`. The
/// command runs in a process group of its own, killed whole (`SIGKILL`)
/// when it runs past `limit` or when the caller stops waiting for it (this
/// future dropped: a cancelled publish), so what git started goes with it
/// (`git-remote-http`, `ssh`), not only git; the runtime reaps git.
pub(crate) async fn output_within(
    cmd: Command,
    input: Option<&[u8]>,
    limit: Duration,
) -> std::io::Result<Option<Output>> {
    output_to_within(cmd, input, None, limit, None).await
}

/// [`output_within`] for a git that reads a job's content (its bundle,
/// the objects made of it: a push, a fetch or an `index-pack` of them
/// into the user's source), held to `cpu` as well ([`limit_cpu`];
/// [`check_cpu`] tells its end at it).
pub(crate) async fn output_within_cpu(
    cmd: Command,
    input: Option<&[u8]>,
    limit: Duration,
    cpu: Duration,
) -> std::io::Result<Option<Output>> {
    output_to_within(cmd, input, None, limit, Some(cpu)).await
}

/// [`output_within`] with no input, its failures as the workspace's
/// errors: a `Spawn` error naming `path` when `cmd` cannot be started, a
/// `GitTimeout` naming `path` and `args` (what git was asked) when it ran
/// past `limit`.
pub(crate) async fn finished_within(
    cmd: Command,
    path: &Path,
    args: &str,
    limit: Duration,
) -> Result<Output, WorkspaceError> {
    output_within(cmd, None, limit)
        .await
        .map_err(|source| WorkspaceError::Spawn {
            path: path.to_path_buf(),
            source,
        })?
        .ok_or_else(|| WorkspaceError::GitTimeout {
            path: path.to_path_buf(),
            args: args.to_string(),
            after: limit,
        })
}

/// [`output_within`] with stdout written to `out` when given (the
/// output's stdout is empty then).
async fn output_to_within(
    cmd: Command,
    input: Option<&[u8]>,
    out: Option<std::fs::File>,
    limit: Duration,
    cpu: Option<Duration>,
) -> std::io::Result<Option<Output>> {
    spawn_group(cmd, input.is_some(), out, cpu)?
        .collect(input, limit)
        .await
}

/// Holds the started process `pid` to `cpu` of CPU (`RLIMIT_CPU`: at it
/// the kernel sends `SIGXCPU`, whose default action ends git; a second
/// later `SIGKILL`) and to no core file (`RLIMIT_CORE` 0: a core of git
/// would be written where it runs, a job's work tree). Set right after
/// the start: the limit counts the CPU git used from its start, so none
/// escapes it. What git itself starts inherits the limits only once they
/// are set; the commands that get one start no process of their own
/// before reading their input or the work tree.
pub(super) fn limit_cpu(pid: u32, cpu: Duration) -> std::io::Result<()> {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| std::io::Error::other(format!("pid {pid} out of range")))?;
    let secs = cpu.as_secs().max(1);
    rustix::process::prlimit(
        Some(pid),
        rustix::process::Resource::Core,
        rustix::process::Rlimit {
            current: Some(0),
            maximum: Some(0),
        },
    )?;
    rustix::process::prlimit(
        Some(pid),
        rustix::process::Resource::Cpu,
        rustix::process::Rlimit {
            current: Some(secs),
            maximum: Some(secs + 1),
        },
    )?;
    Ok(())
}

/// `GitCpuLimit` for a git the kernel ended at its CPU limit
/// ([`limit_cpu`]): `SIGXCPU`, which git does not handle. (A git that did
/// would get `SIGKILL` a second later, reported as any failure.)
pub(crate) fn check_cpu<S: AsRef<OsStr>>(
    status: &ExitStatus,
    cpu_limit: Option<Duration>,
    root: &Path,
    args: &[S],
) -> Result<(), WorkspaceError> {
    use std::os::unix::process::ExitStatusExt as _;
    let sigxcpu = Some(nix::sys::signal::Signal::SIGXCPU as i32);
    match cpu_limit {
        Some(limit) if status.signal() == sigxcpu => Err(WorkspaceError::GitCpuLimit {
            path: root.to_path_buf(),
            args: joined(args),
            limit,
        }),
        _ => Ok(()),
    }
}

/// Puts this process as the owner of the host git `cmd` in its
/// environment, which what it starts inherits: should this process be
/// killed first, the next reaper pass kills them (`own_children::OWNER_ENV`,
/// and the jobs directory, `own_children::JOBS_ENV`).
pub(super) fn mark_owner(cmd: &mut Command) {
    if let Some(mark) = crate::own_children::owner_mark() {
        cmd.env(crate::own_children::OWNER_ENV, mark);
    }
    if let Some(jobs) = crate::own_children::jobs_dir() {
        cmd.env(crate::own_children::JOBS_ENV, jobs);
    }
}

/// Starts `cmd` in a process group of its own (killed whole when the
/// result is dropped before it ended), its owner in its environment
/// (`own_children::OWNER_ENV`), its stdout to `out` or a pipe, stderr to
/// a pipe, stdin a pipe when `with_input`.
fn spawn_group(
    mut cmd: Command,
    with_input: bool,
    out: Option<std::fs::File>,
    cpu_limit: Option<Duration>,
) -> std::io::Result<Spawned> {
    cmd.stdout(out.map_or_else(Stdio::piped, Stdio::from))
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    mark_owner(&mut cmd);
    if with_input {
        cmd.stdin(Stdio::piped());
    }
    // Registered as Paddock's own while it runs, so that a job's leftovers
    // scan never kills it for pointing into the job's directory.
    let (mut child, own) = crate::own_children::spawn(|| cmd.spawn(), tokio::process::Child::id)?;
    let stdin = child.stdin.take();
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let pid = child.id();
    let spawned = Spawned {
        group: Group {
            pgid: pid
                .and_then(|id| i32::try_from(id).ok())
                .map(nix::unistd::Pid::from_raw),
            child,
            ended: false,
            _own: own,
        },
        stdin,
        stdout,
        stderr,
    };
    if let (Some(cpu), Some(pid)) = (cpu_limit, pid) {
        // A git not held to its limit is not run: dropping `spawned`
        // kills its group.
        limit_cpu(pid, cpu)?;
    }
    Ok(spawned)
}

/// A started command and its pipes.
struct Spawned {
    group: Group,
    stdin: Option<tokio::process::ChildStdin>,
    stdout: Option<tokio::process::ChildStdout>,
    stderr: Option<tokio::process::ChildStderr>,
}

impl Spawned {
    /// Writes `input` (then closes stdin) while reading stdout and stderr,
    /// until the command ends; `None` when it did not within `limit` (it
    /// is killed with its group then).
    async fn collect(
        self,
        input: Option<&[u8]>,
        limit: Duration,
    ) -> std::io::Result<Option<Output>> {
        self.collect_at_most(input, limit, None).await
    }

    /// [`Spawned::collect`], its stdout read up to `max_stdout` bytes:
    /// past it the pipe is closed (git then ends on `EPIPE`, its group
    /// killed) and the error is of kind `FileTooLarge`.
    async fn collect_at_most(
        mut self,
        input: Option<&[u8]>,
        limit: Duration,
        max_stdout: Option<u64>,
    ) -> std::io::Result<Option<Output>> {
        let stdin = self.stdin.take();
        let write = async move {
            if let Some(mut pipe) = stdin {
                if let Some(data) = input {
                    let _ = pipe.write_all(data).await;
                }
                let _ = pipe.shutdown().await;
            }
        };
        let (stdout, stderr) = (self.stdout.take(), self.stderr.take());
        let group = &mut self.group;
        let run = async {
            let (_, status, stdout, stderr) = tokio::join!(
                write,
                group.child.wait(),
                read_at_most(stdout, max_stdout),
                read_ends(stderr, STDERR_KEPT)
            );
            Ok::<_, std::io::Error>(Output {
                status: status?,
                stdout: stdout?,
                stderr: stderr?,
            })
        };
        let out = tokio::time::timeout(limit, run).await;
        match out {
            Ok(Ok(out)) => {
                self.group.ended = true;
                Ok(Some(out))
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Ok(None),
        }
    }
}

/// A git command of [`HostGit::start`]: running, waiting for its input.
pub(crate) struct Started {
    spawned: Spawned,
    args: Vec<std::ffi::OsString>,
    root: PathBuf,
    timeout: Duration,
    cpu_limit: Option<Duration>,
    /// The most of its stdout held ([`Started::at_most`]).
    max_stdout: Option<u64>,
}

impl Started {
    /// Holds at most `max` bytes of its stdout: past them [`Started::finish`]
    /// ends it and fails with `GitOutputPastLimit` (what a job's files make
    /// git print, its diff, is never read whole into memory past the
    /// caller's bound).
    pub fn at_most(mut self, max: u64) -> Started {
        self.max_stdout = Some(max);
        self
    }

    /// Gives the command `input` and waits for its end (bounded by its
    /// git's time limit, counted from now); its exit status, stdout and
    /// stderr, as [`HostGit::status`] returns them.
    pub async fn finish(
        self,
        input: &[u8],
    ) -> Result<(ExitStatus, Vec<u8>, Vec<u8>), WorkspaceError> {
        let Started {
            spawned,
            args,
            root,
            timeout,
            cpu_limit,
            max_stdout,
        } = self;
        let out = spawned
            .collect_at_most(Some(input), timeout, max_stdout)
            .await
            .map_err(|source| match (source.kind(), max_stdout) {
                (std::io::ErrorKind::FileTooLarge, Some(limit)) => {
                    WorkspaceError::GitOutputPastLimit {
                        path: root.clone(),
                        args: joined(&args),
                        limit,
                    }
                }
                _ => WorkspaceError::Spawn {
                    path: root.clone(),
                    source,
                },
            })?
            .ok_or_else(|| WorkspaceError::GitTimeout {
                path: root.clone(),
                args: joined(&args),
                after: timeout,
            })?;
        check_cpu(&out.status, cpu_limit, &root, &args)?;
        Ok((out.status, out.stdout, out.stderr))
    }
}

struct Group {
    child: tokio::process::Child,
    pgid: Option<nix::unistd::Pid>,
    /// The run ended: its output read to the end, the child reaped.
    ended: bool,
    /// Its registration as Paddock's own (`own_children.rs`), dropped
    /// after the group is killed.
    _own: crate::own_children::Registered,
}

impl Drop for Group {
    fn drop(&mut self) {
        if let (false, Some(pgid)) = (self.ended, self.pgid) {
            // A group outlives its leader while any member lives, so its
            // id is no other's; one gone already (ESRCH) is fine.
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// [`read_all`] up to `max` bytes (any when `None`): one byte more is a
/// `FileTooLarge` error, the pipe closed.
async fn read_at_most(
    pipe: Option<impl tokio::io::AsyncRead + Unpin>,
    max: Option<u64>,
) -> std::io::Result<Vec<u8>> {
    let Some(max) = max else {
        return read_all(pipe).await;
    };
    let mut buf = Vec::new();
    if let Some(pipe) = pipe {
        let mut held = tokio::io::AsyncReadExt::take(pipe, max.saturating_add(1));
        tokio::io::AsyncReadExt::read_to_end(&mut held, &mut buf).await?;
    }
    if buf.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!("its output is past {max} bytes"),
        ));
    }
    Ok(buf)
}

/// All of a child's pipe (nothing when it has none).
async fn read_all(pipe: Option<impl tokio::io::AsyncRead + Unpin>) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    if let Some(mut pipe) = pipe {
        tokio::io::AsyncReadExt::read_to_end(&mut pipe, &mut buf).await?;
    }
    Ok(buf)
}

/// The most of the start and of the end of a git's stderr held, each
/// (bytes). What git prints there is not all git's own: a remote's
/// `remote: …` lines (a hook's output, any server's), the objects a
/// job's content makes it complain of. Read whole, a push to a remote
/// whose hook prints without end for the push's ten minutes would hold
/// gigabytes in Paddock's memory, then in the job's reason.
pub(crate) const STDERR_KEPT: usize = 32 * 1024;

/// All of a child's pipe read (so the child never blocks on it), its
/// first and last `kept` bytes held, and what was between them said:
/// `…[N bytes of its stderr left out by paddock]…` on a line of its own.
pub(super) async fn read_ends(
    pipe: Option<impl tokio::io::AsyncRead + Unpin>,
    kept: usize,
) -> std::io::Result<Vec<u8>> {
    use tokio::io::AsyncReadExt as _;
    let mut head = Vec::new();
    let mut tail = Vec::new();
    let mut left_out = 0u64;
    let Some(mut pipe) = pipe else {
        return Ok(head);
    };
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = pipe.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        let mut got = &chunk[..n];
        let room = kept.saturating_sub(head.len());
        let (to_head, rest) = got.split_at(room.min(got.len()));
        head.extend_from_slice(to_head);
        got = rest;
        tail.extend_from_slice(got);
        if tail.len() > 2 * kept {
            let drop = tail.len() - kept;
            tail.drain(..drop);
            left_out += drop as u64;
        }
    }
    if tail.len() > kept {
        let drop = tail.len() - kept;
        tail.drain(..drop);
        left_out += drop as u64;
    }
    if left_out > 0 {
        head.extend_from_slice(
            format!("\n…[{left_out} bytes of its stderr left out by paddock]…\n").as_bytes(),
        );
    }
    head.extend_from_slice(&tail);
    Ok(head)
}

/// The user's own excludes file, as their git would read it: the global
/// `core.excludesFile`, else `$XDG_CONFIG_HOME/git/ignore` or
/// `~/.config/git/ignore` when it exists. Read from the user's
/// configuration (never the job's), by Paddock's own process, once per
/// process and without blocking the runtime (it was one blocking `git`
/// per workspace, on the async runtime's thread).
pub(super) async fn user_excludes_file() -> Option<PathBuf> {
    static EXCLUDES: OnceCell<Option<PathBuf>> = OnceCell::const_new();
    EXCLUDES
        .get_or_init(|| {
            #[cfg(test)]
            LOOKUPS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            look_up_user_excludes(std::env::var_os("PATH"))
        })
        .await
        .clone()
}

/// How many times the user's configuration was read (once per process).
#[cfg(test)]
static LOOKUPS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The lookup of [`user_excludes_file`] with the search path `path`: the
/// git it starts is [`git_program_in`]'s, never one a relative entry of
/// the search path names (which the bare name `git` was looked up in,
/// relative to Paddock's own directory: a repository's `git` file run on
/// the host when `paddock run` starts in it with `.` on the `PATH`).
async fn look_up_user_excludes(path: Option<OsString>) -> Option<PathBuf> {
    let mut cmd = Command::new(git_program_in(path.as_deref()));
    if let Some(path) = &path {
        cmd.env("PATH", path);
    }
    cmd.args(["config", "--global", "--path", "--get", "core.excludesFile"])
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null());
    let out = output_within(cmd, None, CONFIG_TIMEOUT).await.ok()??;
    let configured = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let path = if out.status.success() && !configured.is_empty() {
        PathBuf::from(configured)
    } else {
        let config = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
        config.join("git/ignore")
    };
    tokio::fs::metadata(&path)
        .await
        .is_ok_and(|m| m.is_file())
        .then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A git's stderr is read to its end, its first and last bytes held
    /// and the bytes between them counted; a short one is held whole.
    #[tokio::test]
    async fn a_long_stderr_is_held_by_its_ends() {
        let long: Vec<u8> = (b'a'..=b'z').cycle().take(200_000).collect();
        let ends = |data: &'static [u8], kept| read_ends(Some(data), kept);
        let long: &'static [u8] = long.leak();
        assert_eq!(
            (
                String::from_utf8(ends(b"abcdefghijklmnop", 4).await.unwrap()).unwrap(),
                String::from_utf8(ends(b"abcdefgh", 4).await.unwrap()).unwrap(),
                String::from_utf8(ends(b"", 4).await.unwrap()).unwrap(),
                ends(long, 1000).await.unwrap(),
            ),
            (
                "abcd\n…[8 bytes of its stderr left out by paddock]…\nmnop".to_string(),
                "abcdefgh".to_string(),
                String::new(),
                [
                    &long[..1000],
                    "\n…[198000 bytes of its stderr left out by paddock]…\n".as_bytes(),
                    &long[199_000..]
                ]
                .concat(),
            )
        );
    }

    /// A scratch index (one named apart from the git directory's own) is
    /// written without its trailing checksum, all zeros where git 2.40+
    /// would have hashed the whole file; the git directory's own index
    /// keeps its checksum.
    #[tokio::test]
    async fn a_scratch_index_is_written_without_its_checksum() {
        let dir = tempfile::tempdir().unwrap();
        paddock_test_support::git::git(dir.path(), &["init", "-q", "repo"]);
        let repo = dir.path().join("repo");
        std::fs::write(repo.join("a.txt"), "a\n").unwrap();
        let version = String::from_utf8(
            std::process::Command::new("git")
                .arg("--version")
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap();
        let minor: u32 = version
            .trim()
            .trim_start_matches("git version 2.")
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or(0);
        if minor < 40 {
            let why = format!("{} has no index.skipHash", version.trim());
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
            eprintln!("skipping: {why}");
            return;
        }
        let trailer = |index: &Path| {
            let bytes = std::fs::read(index).unwrap();
            bytes[bytes.len() - 20..] == [0u8; 20]
        };
        let git = |index: Option<PathBuf>| HostGit {
            git_dir: Some(repo.join(".git")),
            work_tree: Some(repo.clone()),
            index,
            excludes: None,
            root: dir.path().to_path_buf(),
            timeout: GIT_TIMEOUT,
            cpu_limit: None,
        };
        let scratch = dir.path().join("scratch.index");
        git(Some(scratch.clone()))
            .run(["update-index", "--add", "a.txt"], None)
            .await
            .unwrap();
        git(None)
            .run(["update-index", "--add", "a.txt"], None)
            .await
            .unwrap();
        assert_eq!(
            (trailer(&scratch), trailer(&repo.join(".git/index"))),
            (true, false)
        );
    }

    /// What `limit_cpu` leaves a started process: its CPU limit (soft at
    /// the limit, hard a second later) and no core file, read back from
    /// the kernel (`/proc/PID/limits`).
    #[test]
    fn a_started_process_is_held_to_its_cpu_and_no_core() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        limit_cpu(child.id(), Duration::from_secs(7)).unwrap();
        let limits = std::fs::read_to_string(format!("/proc/{}/limits", child.id())).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        let line = |name: &str| {
            limits
                .lines()
                .find(|l| l.starts_with(name))
                .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        };
        assert_eq!(
            (line("Max cpu time"), line("Max core file size")),
            (
                Some("Max cpu time 7 8 seconds".to_string()),
                Some("Max core file size 0 0 bytes".to_string())
            )
        );
    }

    /// Which gits read a `.gitignore` link's target: before 2.32, and
    /// any version line not understood.
    #[test]
    fn gits_from_2_32_read_no_rule_links() {
        let seen: Vec<bool> = [
            "git version 2.31.8",
            "git version 2.32.0",
            "git version 2.47.3",
            "git version 2.39.5 (Apple Git-154)",
            "git version 3.0.0",
            "git version 1.9.5",
            "not a version",
        ]
        .iter()
        .map(|v| reads_rules_without_following(v))
        .collect();
        assert_eq!(seen, [false, true, true, true, true, false, false]);
    }

    /// A git that computes past its CPU limit (costly ignore rules asked
    /// about deep paths, a job's to write) is ended by the kernel, and
    /// the command fails with `GitCpuLimit` naming it and the limit, well
    /// before its wall-clock bound; a git with no CPU limit (the user's
    /// repository) would have run on.
    #[tokio::test]
    async fn a_git_that_computes_past_its_cpu_limit_is_ended() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        paddock_test_support::git::git(dir.path(), &["init", "-q", "repo"]);
        let rules: String = (0..80_000).map(|n| format!("a/**/b{n}\n")).collect();
        std::fs::write(repo.join(".gitignore"), rules).unwrap();
        let deep = format!("a/{}", "x/".repeat(60));
        let input: String = (0..200).map(|i| format!("{deep}f{i}\n")).collect();
        let git = HostGit {
            git_dir: Some(repo.join(".git")),
            work_tree: Some(repo.clone()),
            index: None,
            excludes: None,
            root: dir.path().to_path_buf(),
            timeout: Duration::from_secs(120),
            cpu_limit: Some(Duration::from_secs(1)),
        };
        let args = ["check-ignore", "--no-index", "--stdin"];
        let started = std::time::Instant::now();
        let ended = git
            .run(args, Some(input.as_bytes()))
            .await
            .map_err(|e| e.to_string());
        assert_eq!(
            ended,
            Err(format!(
                "workspace {}: `git check-ignore --no-index --stdin` used more than 1s of CPU on \
                 the job's content or its repository's (their ignore or attribute rules, or their \
                 files, made git compute that long); it was ended",
                dir.path().display()
            ))
        );
        assert!(started.elapsed() < Duration::from_secs(60));
    }

    /// A git that blocks (here reading a FIFO, as one swapped in for a
    /// file of the work tree would make it) is killed at its bound, and
    /// the error names the command and the bound (it waited forever).
    #[tokio::test]
    async fn a_git_that_blocks_is_killed_at_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let git = HostGit {
            git_dir: None,
            work_tree: None,
            index: None,
            excludes: None,
            root: dir.path().to_path_buf(),
            timeout: Duration::from_millis(500),
            cpu_limit: None,
        };
        let started = std::time::Instant::now();
        let result = tokio::time::timeout(
            Duration::from_secs(30),
            git.run(["hash-object", "--no-filters", "fifo"], None),
        )
        .await
        .expect("bounded");
        assert_eq!(
            result.map(|_| ()).map_err(|e| e.to_string()),
            Err(format!(
                "workspace {}: `git hash-object --no-filters fifo` did not finish within 500ms; it was killed",
                dir.path().display()
            ))
        );
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    /// Paddock's git is named by its absolute path and given no directory
    /// of its own (so the standard library starts it with `posix_spawn`,
    /// not a fork of Paddock), and still runs in the directory it names:
    /// here `root`, a repository git finds from there.
    #[tokio::test]
    async fn git_is_named_by_path_and_runs_in_its_directory_without_one_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let init = std::process::Command::new("git")
            .args(["init", "--quiet"])
            .arg(&root)
            .status()
            .unwrap();
        assert!(init.success());
        let git = HostGit {
            git_dir: None,
            work_tree: None,
            index: None,
            excludes: None,
            root: root.clone(),
            timeout: Duration::from_secs(60),
            cpu_limit: None,
        };
        let cmd = git.command(["rev-parse", "--show-toplevel"]);
        let std = cmd.as_std();
        let top = git
            .run(["rev-parse", "--show-toplevel"], None)
            .await
            .unwrap();
        assert_eq!(
            (
                std.get_program() == git_program().as_os_str(),
                git_program().is_absolute(),
                std.get_current_dir(),
                String::from_utf8_lossy(&top).trim_end().to_string(),
            ),
            (true, true, None, root.display().to_string())
        );
    }

    /// The git looked up is the first on the search path's absolute
    /// directories: a relative entry (which would be read relative to
    /// wherever git starts, a job's work tree among them) is skipped, and
    /// with none holding git the bare name is left to the child.
    #[test]
    fn git_is_looked_up_in_absolute_directories_only() {
        let dir = tempfile::tempdir().unwrap();
        let fake = |sub: &str| {
            let bin = dir.path().join(sub);
            std::fs::create_dir_all(&bin).unwrap();
            let git = bin.join("git");
            paddock_test_support::script::write_script(&git, "#!/bin/sh\n");
            bin
        };
        let (first, second) = (fake("first"), fake("second"));
        // Relative, yet it holds a git from `/` (where the lookup starts)
        // and from wherever the tests run: skipped all the same.
        let relative = fake("relative")
            .strip_prefix("/")
            .unwrap()
            .as_os_str()
            .to_owned();
        let path = |dirs: &[&std::ffi::OsStr]| std::env::join_paths(dirs).unwrap();
        assert_eq!(
            (
                git_program_in(Some(&path(&[
                    &relative,
                    OsStr::new("."),
                    first.as_os_str(),
                    second.as_os_str()
                ]))),
                git_program_in(Some(&path(&[&relative, second.as_os_str()]))),
                git_program_in(Some(&path(&[&relative, OsStr::new(".")]))),
                git_program_in(None),
            ),
            (
                first.join("git"),
                second.join("git"),
                PathBuf::from("git"),
                PathBuf::from("git"),
            )
        );
    }

    /// The user's excludes are read by the git of the search path's
    /// absolute directories, never by a `git` a relative entry names
    /// (relative to Paddock's own directory, which may be a repository
    /// holding such a file): with `PATH` starting with a relative entry to
    /// a directory whose `git` leaves a mark, the mark is never made.
    #[tokio::test]
    async fn the_users_excludes_are_never_read_by_a_git_a_relative_path_names() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let mark = dir.path().join("ran");
        let evil = dir.path().join("evil-excludes");
        std::fs::write(&evil, "*\n").unwrap();
        paddock_test_support::script::write_script(
            &bin.join("git"),
            &format!(
                "#!/bin/sh\ntouch '{}'\necho '{}'\n",
                mark.display(),
                evil.display()
            ),
        );
        // The same directory, named relative to this process's own.
        let cwd = std::env::current_dir().unwrap();
        let up: PathBuf = cwd.components().skip(1).map(|_| "..").collect();
        let relative = up.join(bin.strip_prefix("/").unwrap());
        let real = std::env::var_os("PATH").unwrap_or_default();
        let path = std::env::join_paths(
            std::iter::once(relative.clone()).chain(std::env::split_paths(&real)),
        )
        .unwrap();
        let found = look_up_user_excludes(Some(path)).await;
        assert_eq!(
            (
                relative.is_relative() && cwd.join(&relative).join("git").exists(),
                mark.exists(),
                found == Some(evil)
            ),
            (true, false, false)
        );
    }

    /// The user's configuration is read once per process, however many
    /// workspaces ask, and the same answer is given to all.
    #[tokio::test]
    async fn the_users_excludes_file_is_looked_up_once() {
        let answers = futures::future::join_all((0..5).map(|_| user_excludes_file())).await;
        let again = user_excludes_file().await;
        assert_eq!(
            (
                LOOKUPS.load(std::sync::atomic::Ordering::SeqCst),
                answers.iter().all(|a| *a == again)
            ),
            (1, true)
        );
    }
}

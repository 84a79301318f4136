//! One `git check-ignore` for a whole walk of the work tree. The walk
//! (`final_tree.rs`) asks which entries ignore rules exclude one depth at a
//! time, so that ignored directories are not walked; it used to start one
//! `check-ignore` per depth. Here a single one runs beside the walk:
//! `--stdin -z -v -n` answers every path it is given with one record
//! (`SOURCE\0LINE\0PATTERN\0PATH\0`, the three first empty when no rule
//! matches), in order, and git flushes each answer when its output is a
//! pipe, so a depth's paths are written and their answers read before the
//! next depth is asked. A path is ignored when its last matching rule is
//! not a negation (`!pattern`, which `-v` reports too): exactly the paths
//! `check-ignore` without `-v` prints. It is Paddock's git (`host_git.rs`):
//! it reads `.gitignore` files as data and runs nothing. Writing and
//! reading go on together, so a depth of any size cannot fill both pipes.
//! The git's time limit bounds the whole query from its start (every
//! exchange and its end share one deadline), as it bounds any other of
//! Paddock's gits: each exchange once had a limit of its own, and a job
//! whose ignore rules make git slow (a large `.gitignore` of costly
//! patterns: 5 MB of `a/**/b<n>` took git 94 s of CPU for 200 deep paths)
//! with its paths spread over many depths held the patch for that limit
//! once per depth, up to 256 of them. The process is killed when the
//! query is dropped.

use std::collections::HashSet;
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::host_git::{check_cpu, HostGit};
use super::WorkspaceError;

/// The command's arguments (after Paddock's `-c` settings).
const ARGS: [&str; 6] = ["check-ignore", "--no-index", "-z", "--stdin", "-v", "-n"];

/// A running `git check-ignore`, asked one batch of paths at a time.
pub(super) struct IgnoreQuery<'a> {
    git: &'a HostGit,
    child: Option<Running>,
}

struct Running {
    /// When the whole query's time is up (the git's limit from its start).
    deadline: tokio::time::Instant,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr: tokio::task::JoinHandle<Vec<u8>>,
    /// Its registration as Paddock's own (`own_children.rs`): the job's
    /// end-of-run scan spares it when it runs beside the engine's exit
    /// (`runner/early_patch.rs`). Held until it was waited for.
    _own: crate::own_children::Registered,
}

impl<'a> IgnoreQuery<'a> {
    /// A query on `git`'s work tree; git is started at the first batch.
    pub fn new(git: &'a HostGit) -> IgnoreQuery<'a> {
        IgnoreQuery { git, child: None }
    }

    /// The `paths` (relative to the work tree) that ignore rules exclude.
    pub async fn ignored(&mut self, paths: &[&[u8]]) -> Result<HashSet<Vec<u8>>, WorkspaceError> {
        if paths.is_empty() {
            return Ok(HashSet::new());
        }
        let git = self.git;
        let running = match &mut self.child {
            Some(r) => r,
            None => self.child.insert(start(git)?),
        };
        // `./` first: a name starting with `:` is then a path, not pathspec magic.
        let mut input = Vec::new();
        for p in paths {
            input.extend_from_slice(b"./");
            input.extend_from_slice(p);
            input.push(0);
        }
        let deadline = running.deadline;
        let exchange = async {
            let write = async {
                // A git that died closes the pipe: reading says so.
                let _ = running.stdin.write_all(&input).await;
                let _ = running.stdin.flush().await;
            };
            let read = read_answers(&mut running.stdout, paths);
            tokio::join!(write, read).1
        };
        match tokio::time::timeout_at(deadline, exchange).await {
            Ok(Ok(Some(ignored))) => Ok(ignored),
            Ok(Ok(None)) => Err(self.died().await),
            Ok(Err(source)) => Err(WorkspaceError::Spawn {
                path: git.root.clone(),
                source,
            }),
            Err(_) => Err(WorkspaceError::GitTimeout {
                path: git.root.clone(),
                args: ARGS.join(" "),
                after: git.timeout,
            }),
        }
    }

    /// Ends the query: git's input closed, its exit checked.
    pub async fn finish(mut self) -> Result<(), WorkspaceError> {
        let Some(running) = self.child.take() else {
            return Ok(());
        };
        let Running {
            deadline,
            mut child,
            stdin,
            stdout,
            stderr,
            _own,
        } = running;
        drop(stdin);
        drop(stdout);
        let git = self.git;
        let waited = tokio::time::timeout_at(deadline, async {
            let status = child.wait().await;
            (status, stderr.await.unwrap_or_default())
        })
        .await;
        match waited {
            // 0: some were ignored, 1: none was.
            Ok((Ok(status), _)) if matches!(status.code(), Some(0 | 1)) => Ok(()),
            Ok((Ok(status), err)) => {
                check_cpu(&status, git.cpu_limit, &git.root, &ARGS)?;
                Err(git.failed(ARGS, &err))
            }
            Ok((Err(source), _)) => Err(WorkspaceError::Spawn {
                path: git.root.clone(),
                source,
            }),
            Err(_) => Err(WorkspaceError::GitTimeout {
                path: git.root.clone(),
                args: ARGS.join(" "),
                after: git.timeout,
            }),
        }
    }

    /// The error of a git that stopped answering: what it said.
    async fn died(&mut self) -> WorkspaceError {
        let Some(mut running) = self.child.take() else {
            return self.git.failed(ARGS, b"");
        };
        // A git the kernel ended at its CPU limit had its exit status
        // set before its output closed: this kill does not change it.
        let _ = running.child.start_kill();
        let status = running.child.wait().await;
        let err = running.stderr.await.unwrap_or_default();
        let git = self.git;
        match status.map(|s| check_cpu(&s, git.cpu_limit, &git.root, &ARGS)) {
            Ok(Err(out_of_cpu)) => out_of_cpu,
            _ => git.failed(ARGS, &err),
        }
    }
}

fn start(git: &HostGit) -> Result<Running, WorkspaceError> {
    let deadline = tokio::time::Instant::now() + git.timeout;
    let mut cmd = git.command(ARGS);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    // Marked as the other host gits are: a reaper pass after this process
    // was killed finds it by its owner.
    super::host_git::mark_owner(&mut cmd);
    let spawned = |source| WorkspaceError::Spawn {
        path: git.root.clone(),
        source,
    };
    let (mut child, own) =
        crate::own_children::spawn(|| cmd.spawn(), tokio::process::Child::id).map_err(spawned)?;
    // Held to its CPU limit, as every host git on a job's content: costly
    // ignore rules are exactly what a job can write (dropping `child` on
    // an error kills it).
    if let (Some(cpu), Some(pid)) = (git.cpu_limit, child.id()) {
        super::host_git::limit_cpu(pid, cpu).map_err(spawned)?;
    }
    let pipe = || std::io::Error::other("git check-ignore: no pipe");
    let stdin = child.stdin.take().ok_or_else(|| spawned(pipe()))?;
    let stdout = child.stdout.take().ok_or_else(|| spawned(pipe()))?;
    let stderr = child.stderr.take().ok_or_else(|| spawned(pipe()))?;
    // Held by its ends, as every host git's (`host_git::read_ends`).
    let stderr = tokio::spawn(async move {
        super::host_git::read_ends(Some(stderr), super::host_git::STDERR_KEPT)
            .await
            .unwrap_or_default()
    });
    Ok(Running {
        deadline,
        child,
        stdin,
        stdout: BufReader::new(stdout),
        stderr,
        _own: own,
    })
}

/// Reads one record per path of `paths`; the ignored ones, or `None` when
/// git's output ended first.
async fn read_answers(
    stdout: &mut BufReader<ChildStdout>,
    paths: &[&[u8]],
) -> std::io::Result<Option<HashSet<Vec<u8>>>> {
    let mut ignored = HashSet::new();
    let mut field = Vec::new();
    for path in paths {
        let mut fields: [Vec<u8>; 4] = Default::default();
        for slot in &mut fields {
            field.clear();
            let n = stdout.read_until(0, &mut field).await?;
            if n == 0 || field.last() != Some(&0) {
                return Ok(None);
            }
            field.pop();
            *slot = std::mem::take(&mut field);
        }
        let [_, _, pattern, answered] = fields;
        if answered.strip_prefix(b"./") != Some(path) {
            return Err(std::io::Error::other(format!(
                "git check-ignore answered for {} when asked for {}",
                String::from_utf8_lossy(&answered),
                String::from_utf8_lossy(path)
            )));
        }
        if !pattern.is_empty() && !pattern.starts_with(b"!") {
            ignored.insert(path.to_vec());
        }
    }
    Ok(Some(ignored))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::OpenOptionsExt as _;
    use std::path::Path;
    use std::time::Duration;

    /// Writes `rule` into the FIFO `fifo` once `after` has passed and a
    /// reader has it open (tried without blocking for up to 20 s: a reader
    /// killed meanwhile leaves no writer waiting forever).
    fn feed_after(fifo: &Path, after: Duration, rule: &str) {
        std::thread::sleep(after);
        let until = std::time::Instant::now() + Duration::from_secs(20);
        while std::time::Instant::now() < until {
            let opened = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
                .open(fifo);
            if let Ok(mut file) = opened {
                let _ = std::io::Write::write_all(&mut file, rule.as_bytes());
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The query's time limit is its whole run's, not each depth's: a
    /// job's tree whose ignore rules make each depth's answer slow (here
    /// a `.gitignore` at each depth that is a FIFO fed only after 60% of
    /// the limit; a large enough file of costly patterns does the same,
    /// and a job can spread its paths over hundreds of depths) has its
    /// `check-ignore` killed at the limit from its start. With the limit
    /// applied per exchange, the second depth's answer came at 120% of
    /// it, and 256 depths held the patch for 256 limits.
    #[tokio::test(flavor = "multi_thread")]
    async fn the_time_limit_is_the_whole_querys_not_each_depths() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        paddock_test_support::git::git(dir.path(), &["init", "-q", "repo"]);
        std::fs::create_dir_all(repo.join("d1/d2")).unwrap();
        let fifos = [repo.join("d1/.gitignore"), repo.join("d1/d2/.gitignore")];
        for fifo in &fifos {
            nix::unistd::mkfifo(fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        }
        let limit = Duration::from_secs(3);
        let git = HostGit {
            git_dir: Some(repo.join(".git")),
            work_tree: Some(repo.clone()),
            index: None,
            excludes: None,
            root: dir.path().to_path_buf(),
            timeout: limit,
            cpu_limit: None,
        };
        let feeder = {
            let fifos = fifos.clone();
            std::thread::spawn(move || {
                for fifo in &fifos {
                    feed_after(fifo, limit.mul_f64(0.6), "y\n");
                }
            })
        };
        let mut query = IgnoreQuery::new(&git);
        let first = query.ignored(&[b"d1/x"]).await.map_err(|e| e.to_string());
        let second = query
            .ignored(&[b"d1/d2/y"])
            .await
            .map_err(|e| e.to_string());
        drop(query);
        feeder.join().unwrap();
        assert_eq!(
            (first, second),
            (
                Ok(HashSet::new()),
                Err(format!(
                    "workspace {}: `git {}` did not finish within 3s; it was killed",
                    dir.path().display(),
                    ARGS.join(" ")
                ))
            )
        );
    }
}

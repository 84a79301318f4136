//! The start-up reaper (DESIGN's teardown step "also after a crash"): a
//! `paddock` process that dies mid-job (killed, out of memory, the host
//! rebooted) leaves its job directory behind and the job `running` in the
//! store. Each job therefore has a lease, `<jobs>/.leases/<job id>.lock`,
//! on which the process running it holds an exclusive `flock` from before
//! the job is recorded until it ends; the kernel drops it when that process
//! ends, however it ends. At start, `paddock run` takes every lease it can:
//! those are the jobs whose process is gone (also jobs that died waiting
//! for a host slot, before their directory existed). Their directories are
//! removed, and a job still `running` in the store is marked `failed` with
//! the reason and a final status event. A lease held by a live process
//! (another `paddock run` next to this one) is left alone, a directory
//! without a lease (kept with `--keep`, or older) is never touched, and a
//! lease file left over by a job that ended normally is simply deleted.
//!
//! The lease file appears only once it is locked (locked under a temporary
//! name, then renamed), so the reaper never wins a race against a job that
//! is starting. The lock's descriptor is close-on-exec: the engine and the
//! sandbox never hold it.
//!
//! On the `sandbox` rung the engine dies with its `paddock` process (the
//! helper and the sandbox's PID 1 have a parent-death signal, and the PID
//! namespace takes everything with it). On the `process` rung it does not,
//! so before removing a directory the reaper kills the processes left from
//! it: those of this user whose environment has the job's `HOME`
//! (`<job>/home`, which the engine adapters always set and no other
//! process has), found in `/proc`.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::fcntl::{Flock, FlockArg};
use paddock_protocol::event::{EventBody, Phase};
use paddock_protocol::{AgentEvent, JobStatus};
use time::OffsetDateTime;

use crate::store::{Store, StoreError};

/// The directory of the leases, under the jobs directory.
const LEASES: &str = ".leases";

/// Why a reaped job failed (its `reason`).
pub const REASON: &str = "the paddock process running this job ended before the job did \
                          (killed or crashed); the start-up reaper removed its workspace";

/// A job's lease, held while the job runs. Cheap to clone; the lock is
/// released when the last clone is dropped (the kernel releases it when the
/// process ends). The lease file is deleted only by [`Lease::release`],
/// once the job's record is final: a job whose `paddock` unwound or gave
/// up on its store leaves the file, unlocked, for the next reaper.
#[derive(Debug, Clone)]
pub struct Lease(Arc<Held>);

#[derive(Debug)]
struct Held {
    _lock: Flock<File>,
    path: PathBuf,
}

impl Lease {
    /// Takes the lease of job (or scratch directory) `name` under
    /// `jobs_root`.
    pub fn take(jobs_root: &Path, name: &str) -> std::io::Result<Lease> {
        let dir = jobs_root.join(LEASES);
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(format!("{name}.lock"));
        let pending = dir.join(format!("{name}.lock.new"));
        let file = File::create(&pending)?;
        let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock)
            .map_err(|(_, e)| std::io::Error::from(e))?;
        std::fs::rename(&pending, &path)?;
        Ok(Lease(Arc::new(Held { _lock: lock, path })))
    }

    /// Deletes the lease file: the job ended and its record is final.
    /// While the lock is still held, so a reaper never finds the file free.
    pub fn release(&self) -> std::io::Result<()> {
        match std::fs::remove_file(&self.0.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Gives the job directory up for keeping (`--keep`): without its
    /// lease file the reaper never removes it.
    pub fn keep(&self) -> std::io::Result<()> {
        std::fs::remove_file(&self.0.path)
    }
}

/// What the reaper did with one abandoned job directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reaped {
    /// The directory's name: the job id (or a `paddock context` scratch).
    pub name: String,
    /// Processes of the job that were still running, killed.
    pub killed: usize,
    /// The job was `running` in the store and is now `failed`.
    pub marked_failed: bool,
    /// Why the directory or the record could not be cleaned up, if so.
    pub error: Option<String>,
}

/// Finds the jobs under `jobs_root` whose process is gone, kills what they
/// left running, removes their directories and fails them in `store`. A
/// missing `jobs_root` is an empty one.
pub async fn reap(jobs_root: &Path, store: &Store) -> Vec<Reaped> {
    let Ok(entries) = std::fs::read_dir(jobs_root.join(LEASES)) else {
        return Vec::new();
    };
    let mut reaped = Vec::new();
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let Some(name) = file_name.strip_suffix(".lock") else {
            continue;
        };
        let Some(lock) = abandoned(&entry.path()) else {
            continue;
        };
        let dir = jobs_root.join(name);
        let existed = dir.exists();
        // Only a job whose directory exists can have started an engine.
        let killed = if existed {
            kill_leftovers(&dir.join("home"))
        } else {
            0
        };
        let mut error = match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Some(format!("remove {}: {e}", dir.display()))
            }
            _ => None,
        };
        let marked_failed = match fail_job(store, name).await {
            Ok(marked) => marked,
            Err(e) => {
                error.get_or_insert_with(|| format!("job {name}: {e}"));
                false
            }
        };
        if error.is_none() {
            let _ = std::fs::remove_file(entry.path());
        }
        drop(lock);
        // A lease left by a job that ended normally: nothing to report.
        if killed == 0 && !marked_failed && error.is_none() && !existed {
            continue;
        }
        reaped.push(Reaped {
            name: name.to_string(),
            killed,
            marked_failed,
            error,
        });
    }
    reaped.sort_by(|a, b| a.name.cmp(&b.name));
    reaped
}

/// Kills (SIGKILL) the processes whose environment has `HOME=home`; how
/// many. Processes of other users cannot be read and are not touched.
fn kill_leftovers(home: &Path) -> usize {
    let mut wanted = b"HOME=".to_vec();
    wanted.extend_from_slice(home.as_os_str().as_encoded_bytes());
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let me = std::process::id();
    let mut killed = 0;
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if u32::try_from(pid).ok() == Some(me) {
            continue;
        }
        let Ok(environ) = std::fs::read(p.path().join("environ")) else {
            continue;
        };
        if environ
            .split(|b| *b == 0)
            .any(|var| var == wanted.as_slice())
            && nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            )
            .is_ok()
        {
            killed += 1;
        }
    }
    killed
}

/// The lease at `path` when nobody holds it (its process is gone).
fn abandoned(path: &Path) -> Option<Flock<File>> {
    let file = File::options().read(true).open(path).ok()?;
    // Held (EWOULDBLOCK) means alive; any other failure means this
    // process cannot tell, and the directory is left alone.
    Flock::lock(file, FlockArg::LockExclusiveNonblock).ok()
}

/// Marks job `id` failed when the store has it `running`; true if it did.
async fn fail_job(store: &Store, id: &str) -> Result<bool, StoreError> {
    let Some(mut record) = store.job(id).await? else {
        return Ok(false);
    };
    if record.status != JobStatus::Running {
        return Ok(false);
    }
    let now = OffsetDateTime::now_utc();
    let seq = store
        .events(id, 0)
        .await?
        .last()
        .map(|e| e.seq + 1)
        .unwrap_or(1);
    store
        .append_event(&AgentEvent {
            job_id: id.to_string(),
            seq,
            at: now,
            body: EventBody::Status {
                phase: Phase::Failed,
                detail: Some(REASON.to_string()),
            },
        })
        .await?;
    record.status = JobStatus::Failed;
    record.reason = Some(REASON.to_string());
    record.finished_at = Some(now);
    record.duration_ms = u64::try_from((now - record.created_at).whole_milliseconds()).ok();
    store.update_job(&record).await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fixtures;

    #[test]
    fn a_lease_is_held_while_any_clone_lives_and_deleted_only_when_released() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join(".leases/job-1.lock");
        let lease = Lease::take(root.path(), "job-1").unwrap();
        assert!(!root.path().join(".leases/job-1.lock.new").exists());
        assert!(abandoned(&path).is_none());
        let clone = lease.clone();
        drop(lease);
        assert!(abandoned(&path).is_none());
        // Dropped (an unwinding `paddock`, a lost store): the file stays,
        // free, for the reaper.
        drop(clone);
        assert!(abandoned(&path).is_some());
        let lease = Lease::take(root.path(), "job-2").unwrap();
        lease.release().unwrap();
        drop(lease);
        assert!(!root.path().join(".leases/job-2.lock").exists());
    }

    #[tokio::test]
    async fn reaps_only_the_jobs_whose_process_is_gone() {
        let root = tempfile::tempdir().unwrap();
        let store = Store::open_in_memory().await.unwrap();
        let dir =
            |name: &str| std::fs::create_dir_all(root.path().join(name).join("meta")).unwrap();
        // What a process that died leaves: the lease file, nobody's lock.
        let crashed = |name: &str| {
            std::fs::create_dir_all(root.path().join(LEASES)).unwrap();
            std::fs::write(root.path().join(LEASES).join(format!("{name}.lock")), "").unwrap();
        };
        // Alive: its lease is held.
        dir("alive");
        let _alive = Lease::take(root.path(), "alive").unwrap();
        // Died mid-job: its directory and its lease are left.
        dir("dead");
        crashed("dead");
        // Died before its directory existed (waiting for a host slot), its
        // record `running`.
        crashed("waiting");
        store
            .insert_job(&fixtures::job("waiting", 0), "{}")
            .await
            .unwrap();
        // Ended normally but its lease file stayed: deleted, not reported.
        crashed("ended");
        let mut ended = fixtures::job("ended", 1);
        ended.status = JobStatus::Done;
        store.insert_job(&ended, "{}").await.unwrap();
        // Kept: no lease.
        dir("kept");
        let kept = Lease::take(root.path(), "kept").unwrap();
        kept.keep().unwrap();
        drop(kept);

        let reaped = reap(root.path(), &store).await;
        assert_eq!(
            reaped,
            vec![
                Reaped {
                    name: "dead".into(),
                    killed: 0,
                    marked_failed: false,
                    error: None
                },
                Reaped {
                    name: "waiting".into(),
                    killed: 0,
                    marked_failed: true,
                    error: None
                },
            ]
        );
        let names = |dir: &Path| {
            let mut v: Vec<String> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        assert_eq!(names(root.path()), [".leases", "alive", "kept"]);
        assert_eq!(names(&root.path().join(LEASES)), ["alive.lock"]);
        let waiting = store.job("waiting").await.unwrap().unwrap();
        assert_eq!(
            (waiting.status, waiting.reason.as_deref()),
            (JobStatus::Failed, Some(REASON))
        );
        assert_eq!(
            store.job("ended").await.unwrap().unwrap().status,
            JobStatus::Done
        );
        assert_eq!(reap(&root.path().join("missing"), &store).await, vec![]);
    }
}

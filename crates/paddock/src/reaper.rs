//! The start-up reaper (DESIGN's teardown step "also after a crash"): a
//! `paddock` process that dies mid-job (killed, out of memory, the host
//! rebooted) leaves its job directory behind and the job `running` in the
//! store. Each job directory therefore carries a lease, `meta/lease`, on
//! which the owning process holds an exclusive `flock` for the job's whole
//! life; the kernel drops it when that process ends, however it ends. At
//! start, `paddock run` takes every lease it can: those are the jobs whose
//! process is gone. Their directories are removed, and a job still
//! `running` in the store is marked `failed` with the reason and a final
//! status event. A lease held by a live process (another `paddock run`
//! next to this one) is left alone, and a directory without a lease
//! (being created this instant, or kept with `--keep`) is never touched.
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

/// The lease file inside a job's `meta/` directory.
const LEASE: &str = "lease";

/// Why a reaped job failed (its `reason`).
pub const REASON: &str = "the paddock process running this job ended before the job did \
                          (killed or crashed); the start-up reaper removed its workspace";

/// A job directory's lease, held while the job runs. Cheap to clone; the
/// lock is released when the last clone is dropped (or the process ends).
#[derive(Debug, Clone)]
pub struct Lease {
    _lock: Arc<Flock<File>>,
    path: PathBuf,
}

impl Lease {
    /// Takes the lease of the job directory whose `meta/` is `meta`.
    pub fn take(meta: &Path) -> std::io::Result<Lease> {
        let path = meta.join(LEASE);
        let pending = meta.join(format!("{LEASE}.new"));
        let file = File::create(&pending)?;
        let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock)
            .map_err(|(_, e)| std::io::Error::from(e))?;
        std::fs::rename(&pending, &path)?;
        Ok(Lease {
            _lock: Arc::new(lock),
            path,
        })
    }

    /// Gives the directory up for keeping (`--keep`): without its lease
    /// file the reaper never removes it.
    pub fn keep(&self) -> std::io::Result<()> {
        std::fs::remove_file(&self.path)
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

/// Finds the job directories under `jobs_root` whose process is gone,
/// removes them and fails their jobs in `store`. A missing `jobs_root` is
/// an empty one.
pub async fn reap(jobs_root: &Path, store: &Store) -> Vec<Reaped> {
    let Ok(entries) = std::fs::read_dir(jobs_root) else {
        return Vec::new();
    };
    let mut reaped = Vec::new();
    for entry in entries.flatten() {
        let dir = entry.path();
        let Some(lock) = abandoned(&dir) else {
            continue;
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        let killed = kill_leftovers(&dir.join("home"));
        let mut error = std::fs::remove_dir_all(&dir)
            .err()
            .map(|e| format!("remove {}: {e}", dir.display()));
        drop(lock);
        let marked_failed = match fail_job(store, &name).await {
            Ok(marked) => marked,
            Err(e) => {
                error.get_or_insert_with(|| format!("job {name}: {e}"));
                false
            }
        };
        reaped.push(Reaped {
            name,
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

/// The lease of `dir` when nobody holds it (its process is gone).
fn abandoned(dir: &Path) -> Option<Flock<File>> {
    let file = File::options()
        .read(true)
        .open(dir.join("meta").join(LEASE))
        .ok()?;
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

    #[test]
    fn a_held_lease_is_not_taken_and_a_released_one_is() {
        let root = tempfile::tempdir().unwrap();
        let meta = root.path().join("job-1/meta");
        std::fs::create_dir_all(&meta).unwrap();
        let lease = Lease::take(&meta).unwrap();
        assert!(!meta.join("lease.new").exists());
        assert!(abandoned(&root.path().join("job-1")).is_none());
        let clone = lease.clone();
        drop(lease);
        assert!(abandoned(&root.path().join("job-1")).is_none());
        drop(clone);
        assert!(abandoned(&root.path().join("job-1")).is_some());
    }

    #[tokio::test]
    async fn reaps_only_abandoned_directories() {
        let root = tempfile::tempdir().unwrap();
        let store = Store::open_in_memory().await.unwrap();
        let mk = |name: &str| {
            let meta = root.path().join(name).join("meta");
            std::fs::create_dir_all(&meta).unwrap();
            meta
        };
        // Alive: its lease is held.
        let _alive = Lease::take(&mk("alive")).unwrap();
        // Abandoned: its lease was released (the process ended).
        drop(Lease::take(&mk("dead")).unwrap());
        // Kept: no lease file.
        let kept = Lease::take(&mk("kept")).unwrap();
        kept.keep().unwrap();
        drop(kept);
        // Being created: no meta/lease yet.
        mk("new");

        let reaped = reap(root.path(), &store).await;
        assert_eq!(
            reaped,
            vec![Reaped {
                name: "dead".into(),
                killed: 0,
                marked_failed: false,
                error: None
            }]
        );
        let mut left: Vec<String> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["alive", "kept", "new"]);
        assert_eq!(reap(&root.path().join("missing"), &store).await, vec![]);
    }
}

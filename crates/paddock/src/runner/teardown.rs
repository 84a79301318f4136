//! Teardown: the engine stopped (or reaped) and nothing of the job left
//! running (its process group, anything pointing into its directory, its
//! cgroups), its egress proxy stopped and its last records taken in, its
//! artifacts flushed, its broker's policy notices and ledger
//! rows taken in, calls still in flight waited for (bounded) and the rest
//! settled `interrupted`: never dropped. [`WorkspaceGuard`] removes the
//! job's directory however the job ends (an error, a panic, a dropped
//! future), so a job is either released clean or leaves its lease for the
//! reaper.

use std::path::{Path, PathBuf};
use std::time::Duration;

use paddock_protocol::{EventBody, ModelCall};

use super::calls::record_call;
use super::disk_watch::DiskWatch;
use super::emit::Emitter;
use super::launch::{step, Running};
use super::network;
use super::stream::{Streamed, DRAIN_GRACE};
use super::LaunchFailure;
use crate::broker;
use crate::engines::StreamParser;
use crate::policy::denials::RecordTail;
use crate::rung::{Reap, Rung};
use crate::workspace::keep::Settled;
use crate::workspace::{Workspace, WorkspaceError};
use tokio::task::JoinHandle;

/// How long a stopped engine's supervisor may take to kill its tree.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// Why a call still in flight at the job's end is settled `interrupted`.
pub(super) const INTERRUPTED_AT_END: &str =
    "the job ended before the call's answer did; its cost is estimated from what was metered";

/// What the engine and its broker left, once both are gone.
pub(super) struct TornDown {
    pub exit: std::process::ExitStatus,
    /// The end of the engine's stderr.
    pub stderr_tail: String,
    /// The budget held the job.
    pub held: bool,
    /// Why an answer was refused for its served model, if one was.
    pub served_refused: Option<String>,
    /// Every ledger row of the job.
    pub calls: Vec<ModelCall>,
    /// The engine's stream parser, with what it saw.
    pub parser: Box<dyn StreamParser>,
    /// The host profile's denial record, as far as it was read.
    pub denials: Option<RecordTail>,
}

/// Stops what is left of the job and takes in what its broker recorded;
/// `disk`'s last measurement of the job's directory starts as soon as
/// nothing of the job is left running, beside the rest.
pub(super) async fn tear_down(
    em: &mut Emitter,
    run: Running,
    streamed: &mut Streamed,
    (rung, disk): (&dyn Rung, &DiskWatch),
    root: &Path,
) -> Result<TornDown, LaunchFailure> {
    let Running {
        mut process,
        mut raw,
        stderr_task,
        stderr_stop,
        broker,
        egress,
        parser,
        denials,
        ..
    } = run;
    let exit = match streamed.exited {
        Some(s) => s,
        None => {
            // Stopped: the supervisor kills the tree and exits; one that
            // does not in time is killed with its group.
            let status = match tokio::time::timeout(STOP_GRACE, process.wait()).await {
                Ok(status) => status,
                Err(_) => {
                    process.kill();
                    process.wait().await
                }
            };
            status.map_err(|e| step("wait for the engine", e))?
        }
    };
    // No process of the job outlives it: its group, then anything still
    // pointing into the job's directory (the check that nothing is left).
    // The engine's output artifacts are finished beside the scan (they
    // are Paddock's own files; its stderr's copy ends once the last
    // holder of the pipe, killed by the scan at the latest, is gone).
    process.kill();
    let artifacts = async {
        let raw_error = raw.finish().await;
        (raw_error, drain_stderr(stderr_task, stderr_stop).await)
    };
    let (gone, (raw_error, (stderr_tail, stderr_error))) = tokio::join!(
        leftovers_gone(em, rung, root, "its engine ended"),
        artifacts
    );
    gone?;
    // Nothing of the job writes to its directory any more: its last
    // measurement runs beside what follows (none of which writes there).
    disk.begin_last();
    // Nothing of the job is left to use its proxy: stopped, its last
    // records taken in.
    if let Some(egress) = egress {
        network::stop(em, egress).await?;
    }
    if let Some(e) = raw_error {
        em.error("paddock", e, false).await?;
    }
    if let Some(e) = stderr_error {
        em.error("paddock", e, false).await?;
    }
    let mut broker = broker;
    while let Ok(notice) = broker.policy.try_recv() {
        streamed.held_reason = Some(notice.message.clone());
        em.emit_job(EventBody::Policy {
            rule: notice.rule,
            message: notice.message,
        })
        .await?;
    }
    // Calls still in flight are waited for (bounded), never dropped: what
    // is not settled by then is settled `interrupted` on the ledger.
    let settled = broker.settled(broker::ledger::LEDGER_WAIT).await;
    while let Ok(call) = broker.calls.try_recv() {
        streamed.unwritten_rows |= record_call(em, call, broker.spent_micros()).await?;
    }
    let held = broker.held();
    let served_refused = broker.served_refused();
    // Settled `interrupted` while the broker still holds them: dropping
    // the broker ends their streams, whose own settling ("the engine
    // closed the connection") would otherwise race this one and win or
    // lose by timing. The store keeps the first settling only. So are the
    // rows whose settling neither the broker nor the runner could write
    // (`calls.rs`), which would otherwise stay `in_flight` after the job.
    if !settled || streamed.unwritten_rows {
        interrupt_calls(em).await?;
    }
    drop(broker);
    let calls = em.store.model_calls(&em.job_id).await?;
    Ok(TornDown {
        exit,
        stderr_tail,
        held,
        served_refused,
        calls,
        parser,
        denials,
    })
}

/// What the rung found still running of the job (killed) once `after`
/// ("its engine ended"), what of it it could not remove, and what the
/// command ran without (the sandbox's caps where this host cannot make
/// the job's cgroup: an event once per job, not a line in each command's
/// output); how many processes it killed.
pub(super) async fn leftovers_gone(
    em: &mut Emitter,
    rung: &dyn Rung,
    root: &Path,
    after: &str,
) -> Result<usize, LaunchFailure> {
    let left = rung
        .reap(&Reap {
            job_id: &em.job_id,
            root,
            kill_passes: 1,
            cgroup_roots: &[PathBuf::from(crate::leftovers::CGROUP_ROOT)],
            since: em.since,
        })
        .await;
    // What the job's command ran without (its caps), told once per job.
    for notice in left.notices {
        if !em.notices.contains(&notice) {
            em.error("sandbox", notice.clone(), false).await?;
            em.notices.push(notice);
        }
    }
    for (dir, e) in left.stuck {
        em.error(
            "paddock",
            format!("cannot remove the job's cgroup {}: {e}", dir.display()),
            false,
        )
        .await?;
    }
    if left.killed > 0 {
        em.error(
            "paddock",
            format!(
                "{} process(es) of the job were still running after {after}; killed",
                left.killed
            ),
            false,
        )
        .await?;
    }
    Ok(left.killed)
}

/// The stderr copy's end: it finishes once the engine's stderr closes, or
/// is stopped after the drain grace (something the engine left holds it
/// open) and then finishes its artifact; never left running past the job.
async fn drain_stderr(
    mut task: tokio::task::JoinHandle<(String, Option<String>)>,
    stop: tokio::sync::oneshot::Sender<()>,
) -> (String, Option<String>) {
    if let Ok(done) = tokio::time::timeout(DRAIN_GRACE, &mut task).await {
        return done.unwrap_or_default();
    }
    let _ = stop.send(());
    match tokio::time::timeout(DRAIN_GRACE, &mut task).await {
        Ok(done) => done.unwrap_or_default(),
        Err(_) => {
            task.abort();
            let _ = task.await;
            (String::new(), None)
        }
    }
}

/// Settles the job's calls still in flight `interrupted`, saying so.
async fn interrupt_calls(em: &mut Emitter) -> Result<(), LaunchFailure> {
    let n = em
        .store
        .interrupt_model_calls(&em.job_id, INTERRUPTED_AT_END)
        .await?;
    if n > 0 {
        em.error(
            "broker",
            format!(
                "{n} model call(s) were still in flight when the job ended: {INTERRUPTED_AT_END}"
            ),
            false,
        )
        .await?;
    }
    Ok(())
}

/// The job's workspace, removed when the guard is dropped however the job
/// ends (an error, a panic, a dropped future: deleted in place then),
/// unless it is kept (`--keep`) or was removed already (into the trash,
/// at the job's normal end).
pub(super) struct WorkspaceGuard {
    ws: Workspace,
    keep: bool,
    armed: bool,
}

impl WorkspaceGuard {
    pub fn new(ws: Workspace, keep: bool) -> WorkspaceGuard {
        WorkspaceGuard {
            ws,
            keep,
            armed: true,
        }
    }

    pub fn ws(&self) -> &Workspace {
        &self.ws
    }

    /// Starts removing a workspace that is not kept (the directory
    /// renamed into the trash, an overlay's mount with it) on a blocking
    /// thread, beside what follows it: publishing reads only the branch's
    /// bundle, never the workspace. The guard is disarmed, and the removal
    /// runs to its end even if the job's future is dropped. `None` when
    /// the workspace is kept (made a plain directory at the end, by
    /// [`WorkspaceGuard::remove_unless_kept`]) or already removed.
    pub fn remove_beside(&mut self) -> Option<JoinHandle<Result<(), WorkspaceError>>> {
        if self.keep || !std::mem::replace(&mut self.armed, false) {
            return None;
        }
        let ws = self.ws.clone();
        Some(tokio::task::spawn_blocking(move || ws.remove()))
    }

    /// Removes the workspace now unless it is kept, when a kept overlay
    /// is made a plain directory instead (`workspace/keep.rs`: nothing
    /// stays mounted); dropping the guard does nothing more.
    pub fn remove_unless_kept(&mut self) -> Result<Option<Settled>, WorkspaceError> {
        if !std::mem::replace(&mut self.armed, false) {
            return Ok(None);
        }
        if self.keep {
            return self.ws.settle_kept();
        }
        self.ws.remove().map(|()| None)
    }
}

impl Drop for WorkspaceGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let ended = match self.keep {
            true => self.ws.settle_kept().map(|_| ()),
            false => self.ws.remove_now(),
        };
        if let Err(e) = ended {
            tracing::warn!("job workspace: {e}");
        }
    }
}

//! The reaper (DESIGN's teardown step "also after a crash"): a `paddock`
//! process that dies mid-job (killed, out of memory, the host rebooted)
//! leaves its job directory, its processes and cgroups, and the job
//! `running` in the store. Each job therefore has a lease,
//! `<jobs>/.leases/<job id>.lock`, on which the process running it holds
//! an exclusive `flock` from before the job is recorded until it ends; the
//! kernel drops it when that process ends, however it ends. [`reap`] (run
//! by `paddock gc`, and by `paddock run` before its own job) takes every
//! lease it can: those are the jobs whose process is gone (also jobs that
//! died waiting for a host slot, before their directory existed). A job
//! still `running` whose lease file is missing altogether is dead too.
//! For each dead job it
//!
//! 1. kills what the job left running (`leftovers.rs`: processes pointing
//!    into its directory, its cgroups and what is in them);
//! 2. saves the patch of the work done so far, with the same
//!    [`Workspace::patch`] a job's own conclusion uses, as the job's
//!    `patch.diff` artifact and an `artifact_summary` event marked
//!    `interrupted`;
//! 3. removes the job's directory, kills and removes what a publish it
//!    was making left (a push's scratch directory, `results/push.rs`) and
//!    revokes a GitLab project access token or GitHub App installation
//!    token it minted (`results/gitlab_token.rs`,
//!    `results/github_app_record.rs`);
//! 4. settles the job's ledger rows still `in_flight` (calls its process
//!    never saw end) as `interrupted`, keeping their estimate, and marks
//!    the job `failed` with [`REASON`] (or, without a workspace or with a
//!    kept one, what [`Aftermath`] says) and a final status event, its
//!    totals (model calls, tokens, cost) summed from the ledger; a job a
//!    cancel was asked of through the store (`Store::request_cancel`,
//!    which its process never read) ends `cancelled` instead, with
//!    [`cancelled_reason`]; a job with an owner is ended in one
//!    transaction holding on its owner, heartbeat and cancel request
//!    (`Store::reclaim_job`, as another host's below);
//! 5. deletes the lease file (left when a step failed, so a later pass
//!    retries).
//!
//! Each pass also deletes what is in the jobs directory's trash (job
//! directories teardown moved there, `workspace/trash.rs`) unless another
//! remover is at it.
//!
//! A lease held by a live process (another `paddock run` next to this
//! one) is left alone, a kept directory (`--keep` marks its lease) is never
//! removed (a kept overlay workspace is made a plain directory,
//! `workspace/keep.rs`), and a lease file left over by a job that ended normally is
//! simply deleted. A job a server's queue claimed is `running` a moment
//! before its process takes its lease: one without a lease file is left
//! alone while its heartbeat (the claim's time) is younger than the TTL.
//! Cgroups of `paddock sandbox` runs whose process is gone are removed too.
//!
//! Several hosts (jobs directories, each with its id, `host_id.rs`) may
//! share one store. Every job records its owner and a heartbeat its
//! process renews (`heartbeat.rs`). The rules above are for this host's
//! jobs, and for jobs recorded before owners were (they have none: as
//! before, a `running` job without a lease here is taken for dead, so such
//! rows must not be shared). A `running` job owned by another host is
//! left alone while its heartbeat is younger than the TTL
//! ([`Liveness::ttl`]); once older it is reclaimed, the store's part only
//! (nothing of another host can be killed or removed from here): the job
//! failed by a compare-and-set on its owner and that very heartbeat
//! (`Store::reclaim_job`: of two reapers one wins; an owner that renewed
//! meanwhile keeps its job), with [`reclaimed_reason`] naming the host and
//! its last heartbeat, a final status event appended in the same
//! transaction (after whatever its owner appended until then), its calls in flight settled as interrupted ([`RECLAIMED_CALL`])
//! and its totals from the ledger. The owner, if it was alive after all,
//! finds the job no longer its own at its next renewal and stops it; its
//! own end cannot overwrite the failed record (a compare-and-set on
//! `running`), and its later events are appended after the reaper's.
//! A heartbeat's age is read on the wall clock (another host wrote it),
//! which may jump or differ between hosts; `paddock serve`'s periodic pass
//! ([`Sightings`]) also waits the TTL on its own monotonic clock, from
//! when it first saw that very heartbeat: a wall clock jumped forward past
//! the TTL (or a host's clock far behind) never has live jobs reclaimed.
//! `paddock gc` has no such history: it looks at a heartbeat dated older
//! than the TTL again after [`MISSED_RENEWALS`] intervals
//! ([`Watch::Twice`]) and reclaims its job only if that very heartbeat is
//! still there, so a live host whose clock runs behind keeps its jobs.
//! The passes on a command's way (`paddock run`'s start, a server's start,
//! `paddock cancel`'s: [`reap_here`]) leave other hosts' jobs alone, as
//! they must not wait.
//! A cancel a server records for another host's job whose heartbeat is
//! already older than the TTL by its date ([`reclaim_cancelled`]) waits
//! less: once the server has seen that heartbeat unchanged for
//! [`MISSED_RENEWALS`] intervals on its monotonic clock (its owner missed
//! renewals it makes every interval), the job is reclaimed at the cancel;
//! the date alone never does it (a clock jumped forward here, or behind
//! on the owner's host), and the reclaim's compare-and-set still leaves
//! an owner that renewed meanwhile its job.
//!
//! The lease file appears only once it is locked (locked under a temporary
//! name, then renamed), so the reaper never wins a race against a job that
//! is starting. The lock's descriptor is close-on-exec: the engine and the
//! sandbox never hold it.

use std::fs::File;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::fcntl::{Flock, FlockArg};
use paddock_protocol::event::{EventBody, Phase};
use paddock_protocol::{AgentEvent, JobRecord, JobStatus, TokenUsage};
use serde::Serialize;
use time::OffsetDateTime;

use crate::heartbeat::Liveness;
use crate::leftovers;
use crate::paths::Paths;
use crate::rung::{self, Reap, Rung};
use crate::store::{CancelRequest, NextAttempt, Owner, Reclaim, RunningJob, Store, StoreError};
use crate::time_text::rfc3339;
pub use crate::workspace::lease::Lease;
use crate::workspace::lease::{KEPT, LEASES};
use crate::workspace::Workspace;

/// How often removing a dead job's directory is retried when something
/// still writes into it (a process the scan has just killed).
const REMOVE_ATTEMPTS: usize = 5;

/// Why a dead job's call still in flight is settled `interrupted`.
pub const INTERRUPTED_CALL: &str = "the paddock process running this job ended before the \
                                    call's answer did; its cost is the estimate written ahead";

/// How every reaped job's reason begins: its process died mid-job.
macro_rules! died {
    () => {
        "the paddock process running this job ended before the job did (killed or crashed)"
    };
}

/// Why a reaped job failed (its `reason`) when it had a workspace, which
/// the reaper saved the patch of and removed: the common case. The
/// others end as [`Aftermath`] says.
pub const REASON: &str = concat!(
    died!(),
    "; the reaper saved its patch so far and removed its workspace"
);

/// What the reaper did with a dead job's workspace, as its reason ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aftermath {
    /// Its patch saved, its directory removed ([`REASON`]).
    Removed,
    /// Its patch saved; its directory could not be removed (the pass's
    /// errors say why; a later pass retries).
    NotRemoved,
    /// Kept as asked (`--keep`): left as it was, nothing saved from it.
    Kept,
    /// None left: the process died before it made one (right after its
    /// claim), or after its own unwinding removed it.
    NoWorkspace,
}

impl Aftermath {
    /// The reason of a job that died with this aftermath.
    pub fn reason(self) -> &'static str {
        match self {
            Aftermath::Removed => REASON,
            Aftermath::NotRemoved => concat!(
                died!(),
                "; the reaper saved its patch so far but could not remove its workspace \
                 (a later `paddock gc` retries)"
            ),
            Aftermath::Kept => concat!(
                died!(),
                "; its workspace was kept as asked (`--keep`), nothing saved from it"
            ),
            Aftermath::NoWorkspace => concat!(
                died!(),
                "; it left no workspace (none made yet, or one already removed), so the reaper saved \
                 and removed nothing"
            ),
        }
    }
}

/// Why another host's call still in flight is settled `interrupted` when
/// its job is reclaimed.
pub const RECLAIMED_CALL: &str = "the paddock process running this job, on another host, \
                                  stopped renewing its heartbeat before the call's answer was \
                                  recorded; its cost is the estimate written ahead";

pub use crate::leftovers::CGROUP_ROOT;

/// The patch a reaper saved for a dead job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SavedPatch {
    pub path: PathBuf,
    pub changed_files: Vec<String>,
    pub bytes: u64,
}

/// What the reaper did for one dead job.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Reaped {
    /// The job id (or a `paddock context` scratch directory's name).
    pub name: String,
    /// Processes of the job that were still running, killed (also those
    /// found in its cgroups).
    pub killed: usize,
    /// Its cgroups, removed.
    pub cgroups: Vec<PathBuf>,
    /// The patch of its work so far, saved.
    pub patch: Option<SavedPatch>,
    /// Its directory was removed.
    pub workspace_removed: bool,
    /// GitLab project access tokens and GitHub App installation tokens
    /// its killed publish left, revoked.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub revoked_tokens: Vec<String>,
    /// Its directory was kept (`--keep`) and left alone.
    pub kept: bool,
    /// The job was `running` in the store and is now `failed`.
    pub marked_failed: bool,
    /// The job was `running` in the store, a cancel had been asked of it,
    /// and it is now `cancelled` (never queued again).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub marked_cancelled: bool,
    /// The job was another host's, whose heartbeat was older than the
    /// TTL: that host (its name and jobs directory id), from which only
    /// the store's part was reclaimed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reclaimed_from: Option<String>,
    /// Reclaimed and from a server's queue: the job its next attempt was
    /// queued as (`crate::requeue`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requeued_as: Option<String>,
    /// What could not be cleaned up, and why (the lease stays for a later
    /// pass).
    pub errors: Vec<String>,
}

/// Everything one pass of the reaper did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The dead jobs, by name.
    pub jobs: Vec<Reaped>,
    /// Cgroups of `paddock sandbox` runs whose process is gone, removed.
    pub sandbox_cgroups: Vec<PathBuf>,
    /// Cache entries (URL mirrors, overlay snapshots) unused for
    /// `workspace::prune::UNUSED_FOR`, removed; `paddock gc` adds those its
    /// size cap's pass removed (`crate::cache_cap`), each with its reason.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pruned: Vec<crate::workspace::prune::PrunedEntry>,
    /// Lease files a killed writer left half-placed (`<id>.lock.new…`),
    /// removed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stale_leases: Vec<PathBuf>,
    /// Paddock's host gits (and what they started) whose `paddock` was
    /// killed before them, killed (`leftovers::kill_orphaned_host_gits`):
    /// their pids.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub orphaned_gits: Vec<u32>,
    /// What could not be done outside any one job.
    pub errors: Vec<String>,
}

/// One pass over `paths.jobs` and the store (module text), with cgroups
/// under [`CGROUP_ROOT`] and under `PADDOCK_CGROUP_ROOT` when it is set
/// (`paddock sandbox` runs there).
pub async fn reap(paths: &Paths, store: &dyn Store, liveness: &Liveness) -> Report {
    reap_with(paths, store, liveness, &cgroup_roots()).await
}

/// Which other hosts' jobs a one-shot pass judges ([`reap`], [`reap_here`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Others {
    /// Every one whose heartbeat is stale, looked at twice
    /// ([`Watch::Twice`]): the pass may wait two heartbeat intervals
    /// (`paddock gc`).
    LookTwice,
    /// None: the pass is on a command's way (`paddock run`'s start, a
    /// server's start, `paddock cancel`'s) and must not wait; another
    /// host's jobs are left to `paddock gc` and to every live server's
    /// periodic pass. Before, those passes judged them by the date alone.
    Leave,
}

/// [`reap`] on a command's way ([`Others::Leave`]): this host's dead
/// jobs and leftovers only, never a wait for another host's heartbeat.
pub async fn reap_here(paths: &Paths, store: &dyn Store, liveness: &Liveness) -> Report {
    let rungs = rung::host_reapers();
    reap_judging(
        paths,
        store,
        liveness,
        (&rungs, &cgroup_roots()),
        Others::Leave,
    )
    .await
}

/// [`CGROUP_ROOT`], and `PADDOCK_CGROUP_ROOT` when it is set.
fn cgroup_roots() -> Vec<PathBuf> {
    let mut roots = vec![PathBuf::from(CGROUP_ROOT)];
    if let Some(r) = std::env::var_os("PADDOCK_CGROUP_ROOT").filter(|r| !r.is_empty()) {
        roots.push(PathBuf::from(r));
    }
    roots.dedup();
    roots
}

/// The part of [`reap`] that a live `paddock serve` runs every heartbeat
/// interval: this host's jobs whose lease nobody holds any more (another
/// process on the same jobs directory, such as a second server on the
/// same store, killed mid-job), reaped as [`reap`] reaps them, and this
/// host's `running` jobs with no lease file at all ([`reap_unleased`]:
/// a server killed between claiming a queued job and taking its lease,
/// once the claim is older than the TTL; before, only a `paddock gc` or a
/// restart later than the TTL ended it, and a server restarted sooner
/// left it `running` for good). A lease is held from before a job is
/// `running` here (right after a claim) until it ends, and its file
/// appears only once it is locked, so no live job is taken. Jobs recorded
/// before owners were are left to the full pass. What was reaped; what
/// could not be listed is logged.
pub async fn reap_abandoned(paths: &Paths, store: &dyn Store, liveness: &Liveness) -> Vec<Reaped> {
    let roots = cgroup_roots();
    let rungs = rung::host_reapers();
    let mut reaped = reap_leases(paths, store, liveness, &rungs, &roots).await;
    let (unleased, errors) =
        reap_unleased(paths, store, liveness, (&rungs, &roots), Ownerless::Leave).await;
    for e in errors {
        tracing::warn!("reaper: {e}");
    }
    reaped.extend(unleased);
    reaped
}

/// Every job of `paths.jobs` whose lease file nobody holds, reaped.
async fn reap_leases(
    paths: &Paths,
    store: &dyn Store,
    liveness: &Liveness,
    rungs: &[Arc<dyn Rung>],
    cgroup_roots: &[PathBuf],
) -> Vec<Reaped> {
    let mut reaped = Vec::new();
    let leases = paths.jobs.join(LEASES);
    let Ok(entries) = std::fs::read_dir(&leases) else {
        return reaped;
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_suffix(".lock").map(str::to_string)
        })
        .collect();
    names.sort();
    for name in names {
        let path = leases.join(format!("{name}.lock"));
        let Some((lock, kept)) = abandoned(&path) else {
            continue;
        };
        let lease = Lease::held(lock, path);
        if let Some(r) = reap_job(
            paths,
            store,
            (rungs, cgroup_roots),
            (&name, liveness.requeues),
            lease,
            kept,
        )
        .await
        {
            reaped.push(r);
        }
    }
    reaped
}

/// [`reap`] with the cgroup hierarchies under `cgroup_roots`.
pub async fn reap_with(
    paths: &Paths,
    store: &dyn Store,
    liveness: &Liveness,
    cgroup_roots: &[PathBuf],
) -> Report {
    reap_on(paths, store, liveness, &rung::host_reapers(), cgroup_roots).await
}

/// [`reap_with`], each dead job's leftovers reaped by `rungs`.
pub async fn reap_on(
    paths: &Paths,
    store: &dyn Store,
    liveness: &Liveness,
    rungs: &[Arc<dyn Rung>],
    cgroup_roots: &[PathBuf],
) -> Report {
    reap_judging(
        paths,
        store,
        liveness,
        (rungs, cgroup_roots),
        Others::LookTwice,
    )
    .await
}

/// [`reap_on`], another host's jobs judged as `others` says.
async fn reap_judging(
    paths: &Paths,
    store: &dyn Store,
    liveness: &Liveness,
    (rungs, cgroup_roots): (&[Arc<dyn Rung>], &[PathBuf]),
    others: Others,
) -> Report {
    let mut report = Report::default();
    let leases = paths.jobs.join(LEASES);
    // Dead jobs with a lease file that nobody holds.
    report.jobs = reap_leases(paths, store, liveness, rungs, cgroup_roots).await;
    // Lease files a writer killed while placing one left under their
    // temporary name (where the file system has no `O_TMPFILE`).
    let (stale, errors) = crate::workspace::lease::remove_stale_pending(&leases);
    report.stale_leases = stale;
    report.errors.extend(errors);
    // Another host's jobs: judged by their heartbeat, looked at twice,
    // unless the pass is on a command's way.
    match others {
        Others::LookTwice => {
            let (reclaimed, errors) = reclaim_others(store, liveness, Watch::Twice).await;
            report.jobs.extend(reclaimed);
            report.errors.extend(errors);
        }
        Others::Leave => {}
    }
    // Dead jobs whose lease file is gone altogether.
    let (unleased, errors) = reap_unleased(
        paths,
        store,
        liveness,
        (rungs, cgroup_roots),
        Ownerless::Reap,
    )
    .await;
    report.jobs.extend(unleased);
    report.errors.extend(errors);
    // Host gits a killed `paddock` left (a mirror's fetch, a snapshot's
    // clone: nothing of a job's directory names them) with this jobs
    // directory (another home's are left to its own pass): a scan of every
    // process's environment, on a blocking thread (not on an async
    // worker), after the dead jobs' own passes, which kill what names
    // their directories and count it as theirs.
    let jobs = paths.jobs.clone();
    match tokio::task::spawn_blocking(move || leftovers::kill_orphaned_host_gits(&jobs)).await {
        Ok(killed) => report.orphaned_gits = killed,
        Err(e) => report
            .errors
            .push(format!("scan for orphaned host gits: {e}")),
    }
    for dir in cgroup_roots
        .iter()
        .flat_map(|root| leftovers::dead_sandbox_runs(root))
    {
        match leftovers::remove_cgroup(&dir) {
            Ok(_) => report.sandbox_cgroups.push(dir),
            Err(e) => report
                .errors
                .push(format!("remove cgroup {}: {e}", dir.display())),
        }
    }
    // Job directories teardown moved into the trash and no remover
    // finished (killed, or still at it: then it is left to finish), for
    // at most `START_BUDGET`: this pass is on a job's start-up path, and
    // the rest is left to the remover that job's run starts, or to
    // `paddock gc`, which empties the trash after its pass.
    // The caches last: a dead job reaped above names no snapshot any more.
    // Both walk and delete trees: on a blocking thread, not on an async
    // worker (a server's other tasks, the start-up's own).
    let jobs = paths.jobs.clone();
    let emptied = tokio::task::spawn_blocking(move || {
        let deadline = std::time::Instant::now() + crate::workspace::trash::START_BUDGET;
        let errors = crate::workspace::trash::empty_until(&jobs, false, Some(deadline));
        let pruned = crate::workspace::prune::prune(&jobs, crate::workspace::prune::UNUSED_FOR);
        (errors, pruned)
    })
    .await;
    match emptied {
        Ok((errors, pruned)) => {
            report.errors.extend(errors);
            report.pruned = pruned.removed;
            report.errors.extend(pruned.errors);
        }
        Err(e) => report
            .errors
            .push(format!("empty the trash and prune the caches: {e}")),
    }
    report.jobs.sort_by(|a, b| a.name.cmp(&b.name));
    report
}

/// Whether a pass over jobs without a lease file takes those recorded
/// before jobs had owners for this host's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ownerless {
    /// The full pass (`paddock gc`, a start's): as before owners were.
    Reap,
    /// A live server's periodic pass: left to the full pass.
    Leave,
}

/// This host's `running` jobs whose lease file is missing altogether,
/// reaped: a running job always has one, from before its record is
/// `running` here (a `paddock run`'s, a turn's) or right after its claim
/// (a queued job's) until after it is final. A claim younger than the
/// TTL ([`claimed_lately`]) is left alone: its server may be about to
/// take the lease. Each is taken under its lease first (it exists from
/// then on, and goes when the pass succeeds), so no other reaper works on
/// it at once and a process that takes it meanwhile keeps its job; and
/// looked at again under it: one whose claim changed since the list was
/// read (renewed by a server passing it over, ended, claimed anew) is
/// left, its lease given back. What was reaped, and what could not be
/// listed.
async fn reap_unleased(
    paths: &Paths,
    store: &dyn Store,
    liveness: &Liveness,
    (rungs, cgroup_roots): (&[Arc<dyn Rung>], &[PathBuf]),
    ownerless: Ownerless,
) -> (Vec<Reaped>, Vec<String>) {
    let running = match store.running_jobs().await {
        Ok(running) => running,
        Err(e) => return (Vec::new(), vec![format!("list running jobs: {e}")]),
    };
    let leases = paths.jobs.join(LEASES);
    let (mut reaped, mut errors) = (Vec::new(), Vec::new());
    for job in running {
        if is_another_hosts(&job, liveness)
            || claimed_lately(&job, liveness)
            || (job.owner.is_none() && ownerless == Ownerless::Leave)
        {
            continue;
        }
        let id = job.id.clone();
        if leases.join(format!("{id}.lock")).exists() {
            continue;
        }
        let Ok(lease) = Lease::take(&paths.jobs, &id) else {
            continue;
        };
        // Looked at again under the lease: a claim renewed since the list
        // was read (a server that passes a claimed job over renews it
        // before it gives its lease up and queues the job again), or
        // ended, or claimed anew, is alive; its lease is given back at
        // once, for its server to take.
        let now = match store.running_jobs().await {
            Ok(running) => running.into_iter().find(|j| j.id == id),
            Err(e) => {
                errors.push(format!("job {id}: read it again: {e}"));
                release_taken(&lease, &id, &mut errors);
                continue;
            }
        };
        if !now.is_some_and(|now| now.owner == job.owner && !claimed_lately(&now, liveness)) {
            release_taken(&lease, &id, &mut errors);
            continue;
        }
        if let Some(r) = reap_job(
            paths,
            store,
            (rungs, cgroup_roots),
            (&id, liveness.requeues),
            lease,
            false,
        )
        .await
        {
            reaped.push(r);
        }
    }
    (reaped, errors)
}

/// Gives back the lease of job `id` a reaper pass took and left alone
/// (its file deleted, so the job's process can take it).
fn release_taken(lease: &Lease, id: &str, errors: &mut Vec<String>) {
    if let Err(e) = lease.release() {
        errors.push(format!("job {id}: delete the lease file it took: {e}"));
    }
}

/// Reaps job `name`, whose `lease` this process now holds; None when there
/// was nothing to do (the lease of a job that ended normally). A job a
/// server's queue had claimed is queued again as another host's reclaim
/// would (`requeues`, `[hosts] requeue_reclaimed`).
async fn reap_job(
    paths: &Paths,
    store: &dyn Store,
    (rungs, cgroup_roots): (&[Arc<dyn Rung>], &[PathBuf]),
    (name, requeues): (&str, u32),
    lease: Lease,
    kept: bool,
) -> Option<Reaped> {
    let mut r = Reaped {
        name: name.to_string(),
        kept,
        ..Reaped::default()
    };
    let record = match store.job(name).await {
        Ok(rec) => rec.filter(|rec| rec.status == JobStatus::Running),
        Err(e) => {
            r.errors.push(format!("read job {name}: {e}"));
            None
        }
    };
    let dir = paths.jobs.join(name);
    let existed = dir.is_dir();
    // Only a job whose directory exists can have started anything.
    // Until none is found (bounded): the patch below walks the work tree,
    // which nothing of the job may still be changing, and a process can
    // fork during a scan.
    for rung in rungs {
        let left = rung
            .reap(&Reap {
                job_id: name,
                root: &dir,
                kill_passes: if existed && !kept { REMOVE_ATTEMPTS } else { 0 },
                cgroup_roots,
                since: None,
            })
            .await;
        r.killed += left.killed;
        for (cg, n) in left.cgroups {
            r.killed += n;
            r.cgroups.push(cg);
        }
        r.errors.extend(
            left.stuck
                .into_iter()
                .map(|(cg, e)| format!("remove cgroup {}: {e}", cg.display())),
        );
    }
    // A push the dead process was making: what still runs in its scratch
    // directory (git, ssh: the deploy key is in their memory only) is
    // killed, the directory removed.
    let artifacts = paths.artifacts.join(name);
    let (killed, errors) = crate::results::push::remove_leftover_pushes(&artifacts);
    r.killed += killed;
    r.errors.extend(errors);
    // A GitLab or GitHub App token the dead process minted and never
    // revoked (its record names or holds it).
    let pass = crate::results::revoke_leftover_tokens(store, name, &artifacts).await;
    r.revoked_tokens = pass.revoked;
    r.errors.extend(pass.errors);
    if let (Some(rec), true, false) = (&record, existed, kept) {
        match save_patch(paths, store, rec, lease.clone()).await {
            Ok(p) => r.patch = p,
            Err(e) => r.errors.push(e),
        }
    }
    // A kept overlay workspace: made a plain directory, so nothing stays
    // mounted and no snapshot stays named (the lease stays on failure,
    // and a later pass takes the step again).
    if existed && kept {
        if let Err(e) = crate::workspace::keep::settle(&dir) {
            r.errors.push(e.to_string());
        }
    }
    if existed && !kept {
        match remove_dir(&dir) {
            Ok(()) => r.workspace_removed = true,
            Err(e) => r.errors.push(format!("remove {}: {e}", dir.display())),
        }
    }
    if let Some(rec) = record {
        let aftermath = match (existed, kept, r.workspace_removed) {
            (false, _, _) => Aftermath::NoWorkspace,
            (true, true, _) => Aftermath::Kept,
            (true, false, true) => Aftermath::Removed,
            (true, false, false) => Aftermath::NotRemoved,
        };
        match fail_job(store, rec, (r.patch.as_ref(), aftermath), requeues).await {
            Ok((JobStatus::Cancelled, _)) => r.marked_cancelled = true,
            Ok((_, next)) => {
                r.marked_failed = true;
                r.requeued_as = next;
            }
            Err(e) => r.errors.push(format!("job {name}: {e}")),
        }
    }
    if r.errors.is_empty() {
        if let Err(e) = lease.release() {
            r.errors.push(format!("delete its lease file: {e}"));
        }
    }
    drop(lease);
    let did_nothing = r.killed == 0
        && r.cgroups.is_empty()
        && r.revoked_tokens.is_empty()
        && !r.marked_failed
        && !r.marked_cancelled
        && !existed
        && r.errors.is_empty();
    (!did_nothing).then_some(r)
}

/// Whether `job` is a claim from a server's queue whose heartbeat (the
/// claim's time, until its process renews it) is younger than the TTL:
/// such a job is `running` from the claim's statement on, a moment before
/// its server takes its lease (right after the claim, before re-admitting
/// its stored spec), so no lease file does not mean dead yet. One whose
/// server died before taking the lease is reaped once its heartbeat is
/// older, by the next full pass or a live server's periodic one. (A turn
/// and a `paddock run` take their lease before their record is written:
/// none of them is ever `running` without one while alive.)
fn claimed_lately(job: &RunningJob, liveness: &Liveness) -> bool {
    let Some((_, beat)) = &job.owner else {
        return false;
    };
    // The claim is this host's, on its own clock: one dated ahead by more
    // than the TTL is the clock gone back since, not a claim made lately.
    job.queued.is_some() && (OffsetDateTime::now_utc() - *beat).abs() < liveness.ttl
}

/// Whether `job` runs on another host (a job without an owner is this
/// host's to judge).
fn is_another_hosts(job: &RunningJob, liveness: &Liveness) -> bool {
    job.owner
        .as_ref()
        .is_some_and(|(owner, _)| owner.host != liveness.owner.host)
}

/// How a pass judges another host's heartbeat besides its date
/// ([`reclaim_others`]).
#[derive(Debug, Clone, Copy)]
pub enum Watch<'a> {
    /// A server's periodic pass: a heartbeat is stale once seen unchanged
    /// for the TTL on this process's monotonic clock, across passes
    /// ([`Sightings`]), whatever its date.
    Periodic(&'a Sightings),
    /// `paddock gc`'s one-shot pass ([`Others::LookTwice`]): a heartbeat dated more than
    /// the TTL before this host's wall clock is looked at again after
    /// [`missed_renewals`] on the monotonic clock, and its job reclaimed
    /// only if that very heartbeat is still there (its owner missed the
    /// renewals it makes every interval). Before, the date alone reclaimed
    /// it, so a live host whose clock ran more than the TTL behind (or
    /// this host's ahead) lost its jobs to any one-shot pass.
    Twice,
}

/// Every running job of another host whose heartbeat is stale, reclaimed
/// in the store (module text): the reaper's pass over other hosts' jobs,
/// which `paddock serve` also runs every heartbeat interval. A heartbeat
/// is stale by its date and, as `watch` says, by this process's own
/// monotonic clock: seen unchanged across a server's passes for the TTL
/// (one dated ahead included), or, in a one-shot pass, dated older than
/// the TTL and still the same after [`missed_renewals`]. The date alone
/// never reclaims a job. What was reclaimed, and what could not be
/// listed.
pub async fn reclaim_others(
    store: &dyn Store,
    liveness: &Liveness,
    watch: Watch<'_>,
) -> (Vec<Reaped>, Vec<String>) {
    let running = match store.running_jobs().await {
        Ok(running) => running,
        Err(e) => return (Vec::new(), vec![format!("list running jobs: {e}")]),
    };
    let running = match watch {
        Watch::Periodic(w) => {
            w.keep_only(&running);
            running
        }
        Watch::Twice => match looked_at_twice(store, liveness, running).await {
            Ok(unchanged) => unchanged,
            Err(e) => return (Vec::new(), vec![format!("list running jobs again: {e}")]),
        },
    };
    let mut reclaimed = Vec::new();
    for job in running.iter().filter(|j| is_another_hosts(j, liveness)) {
        if let Some((owner, beat)) = &job.owner {
            // Seen unchanged for the TTL on this process's clock, it is
            // stale whatever its date says (one dated ahead included);
            // otherwise its date is judged, after the second look of a
            // one-shot pass.
            let seen_stale = match watch {
                Watch::Periodic(w) => {
                    if w.seen_for(&job.id, *beat, tokio::time::Instant::now()) <= liveness.ttl {
                        continue;
                    }
                    true
                }
                Watch::Twice => false,
            };
            if let Some(r) = reclaim(store, liveness, job, (owner, *beat), seen_stale).await {
                reclaimed.push(r);
            }
        }
    }
    (reclaimed, Vec::new())
}

/// A one-shot pass's second look ([`Watch::Twice`]): the other hosts'
/// jobs in `running` whose heartbeat is dated more than the TTL before
/// this host's clock are the candidates; the running jobs are listed
/// again after [`missed_renewals`], and the candidates whose owner and
/// heartbeat are the very same then are what the pass judges. No
/// candidate: nothing, at once (no wait).
async fn looked_at_twice(
    store: &dyn Store,
    liveness: &Liveness,
    running: Vec<RunningJob>,
) -> Result<Vec<RunningJob>, StoreError> {
    let ttl = time::Duration::try_from(liveness.ttl).unwrap_or(time::Duration::MAX);
    let now = OffsetDateTime::now_utc();
    let first: Vec<RunningJob> = running
        .into_iter()
        .filter(|j| is_another_hosts(j, liveness))
        .filter(|j| j.owner.as_ref().is_some_and(|(_, beat)| now - *beat > ttl))
        .collect();
    if first.is_empty() {
        return Ok(Vec::new());
    }
    tokio::time::sleep(missed_renewals(liveness)).await;
    let again = store.running_jobs().await?;
    Ok(again
        .into_iter()
        .filter(|j| {
            first
                .iter()
                .any(|f| f.id == j.id && f.owner.is_some() && f.owner == j.owner)
        })
        .collect())
}

/// Another host's running job `id` that a cancel was just asked of
/// (`Store::request_cancel`, recorded first), reclaimed now when its owner
/// is dead by a rule no single clock's jump satisfies: the server asking
/// (`watched`, its periodic pass's [`Sightings`], the same beat judged on
/// its monotonic clock `mono`) has seen that very heartbeat unchanged for
/// more than the TTL, or for more than [`MISSED_RENEWALS`] heartbeat
/// intervals (a live owner renews every interval) while its date is also
/// more than the TTL before this host's wall clock `wall`. Before, the
/// date alone settled it: this host's clock jumped forward, or the
/// owner's behind, had a live owner's job reclaimed at the cancel. A
/// server that has not yet watched the heartbeat that long leaves the job
/// to its pass (the request recorded: it ends `cancelled` there). It ends
/// `cancelled` as a reclaim ends it ([`cancelled_reason`]: who asked,
/// when, and that its host was found dead; never queued again), by the
/// same compare-and-set on its owner, that very heartbeat and the request
/// (`Store::reclaim_job`), so an owner that renewed meanwhile keeps the
/// job and stops it itself. The owner it was reclaimed from and the rule
/// that found it dead; `None` when it is not another host's running job
/// or its owner is not found dead.
pub async fn reclaim_cancelled(
    store: &dyn Store,
    liveness: &Liveness,
    id: &str,
    watched: &Sightings,
    (wall, mono): (OffsetDateTime, tokio::time::Instant),
) -> Result<Option<(Owner, DeadBy)>, StoreError> {
    let running = store.running_jobs().await?;
    let Some(job) = running
        .iter()
        .find(|j| j.id == id && is_another_hosts(j, liveness))
    else {
        return Ok(None);
    };
    let Some((owner, beat)) = &job.owner else {
        return Ok(None);
    };
    let seen = watched.seen_for(id, *beat, mono);
    let ttl = time::Duration::try_from(liveness.ttl).unwrap_or(time::Duration::MAX);
    let dated = wall - *beat > ttl;
    let by = if seen > liveness.ttl {
        DeadBy::SeenUnchanged
    } else if dated && seen > missed_renewals(liveness) {
        DeadBy::MissedRenewals
    } else {
        return Ok(None);
    };
    let reclaimed = reclaim_job(store, liveness, (id, job.queued), (owner, *beat), wall).await?;
    Ok(reclaimed.map(|_| (owner.clone(), by)))
}

/// The rule by which a cancel found another host's job's owner dead
/// ([`reclaim_cancelled`]): what the server's log line says of it.
/// Before, that line said the heartbeat was older than the TTL whichever
/// rule fired, also of one dated ahead of this host's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadBy {
    /// Its heartbeat was seen unchanged for more than the TTL on this
    /// server's monotonic clock, whatever its date.
    SeenUnchanged,
    /// Its heartbeat was dated more than the TTL before this host's wall
    /// clock, and seen unchanged for more than [`MISSED_RENEWALS`]
    /// heartbeat intervals ([`missed_renewals`]).
    MissedRenewals,
}

impl DeadBy {
    /// The rule, in words, with `liveness`'s TTL and intervals.
    pub fn describe(self, liveness: &Liveness) -> String {
        let ttl = liveness.ttl.as_secs_f64();
        match self {
            Self::SeenUnchanged => {
                format!("its heartbeat seen unchanged by this server for more than {ttl} s")
            }
            Self::MissedRenewals => format!(
                "its heartbeat dated more than {ttl} s ago and seen unchanged by this server for \
                 more than {} s ({MISSED_RENEWALS} renewals missed)",
                missed_renewals(liveness).as_secs_f64()
            ),
        }
    }
}

/// How many of its owner's renewals a heartbeat dated older than the TTL
/// must be seen to have missed before a cancel settles its job
/// ([`reclaim_cancelled`]); the fleet's hosts renew at the same
/// `[hosts] heartbeat_secs`, as they judge by the same TTL.
pub const MISSED_RENEWALS: u32 = 2;

/// How long a heartbeat dated older than the TTL must be seen unchanged
/// before a cancel settles its job: [`MISSED_RENEWALS`] intervals, at most
/// the TTL.
pub fn missed_renewals(liveness: &Liveness) -> std::time::Duration {
    (liveness.interval * MISSED_RENEWALS).min(liveness.ttl)
}

/// The other hosts' heartbeats a server has watched: each job's last one
/// seen, and when (on the monotonic clock) it was first seen unchanged.
/// A heartbeat is stale to the server only once it has stayed the same
/// for the TTL on that clock, whatever the wall clock says (module text).
/// Shared by the server's periodic pass and its cancels
/// ([`reclaim_cancelled`]) through `&self`: its lock is taken inside each
/// method, which awaits nothing, so it is never held across the store's
/// work. Before, the server kept it behind an async lock held for the
/// whole pass, and a cancel of another host's job waited for every
/// reclaim of that pass.
#[derive(Debug, Default)]
pub struct Sightings(
    std::sync::Mutex<std::collections::HashMap<String, (OffsetDateTime, tokio::time::Instant)>>,
);

impl Sightings {
    /// How long heartbeat `beat` of job `id` has been seen unchanged, as
    /// of `now` (zero the first time it is seen).
    pub fn seen_for(
        &self,
        id: &str,
        beat: OffsetDateTime,
        now: tokio::time::Instant,
    ) -> std::time::Duration {
        let mut seen = self.locked();
        let entry = seen.entry(id.to_owned()).or_insert((beat, now));
        if entry.0 != beat {
            *entry = (beat, now);
        }
        now.saturating_duration_since(entry.1)
    }

    /// Forgets the jobs no longer running.
    fn keep_only(&self, running: &[RunningJob]) {
        let ids: std::collections::HashSet<&str> = running.iter().map(|j| j.id.as_str()).collect();
        self.locked().retain(|id, _| ids.contains(id.as_str()));
    }

    /// The map, also after a panic while it was held (each method leaves
    /// it whole at every step).
    fn locked(
        &self,
    ) -> std::sync::MutexGuard<
        '_,
        std::collections::HashMap<String, (OffsetDateTime, tokio::time::Instant)>,
    > {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Reclaims another host's running job `id` when its heartbeat `beat`
/// is older than the TTL (module text), or was seen unchanged for it on
/// this process's monotonic clock (`seen_stale`: then a beat dated ahead
/// of this host's clock is stale too; a pass without that clock leaves
/// one alone, as another host's clock may run ahead): `None` when it is
/// fresh, or when another reaper or its renewing owner came first.
async fn reclaim(
    store: &dyn Store,
    liveness: &Liveness,
    job: &RunningJob,
    (owner, beat): (&Owner, OffsetDateTime),
    seen_stale: bool,
) -> Option<Reaped> {
    let id = job.id.as_str();
    let now = OffsetDateTime::now_utc();
    let ttl = time::Duration::try_from(liveness.ttl).unwrap_or(time::Duration::MAX);
    if !seen_stale && now - beat <= ttl {
        return None;
    }
    let mut r = Reaped {
        name: id.to_string(),
        reclaimed_from: Some(format!("{} ({})", owner.name, owner.host)),
        ..Reaped::default()
    };
    match reclaim_job(store, liveness, (id, job.queued), (owner, beat), now).await {
        Ok(Some((status, next))) => {
            r.marked_failed = status == JobStatus::Failed;
            r.marked_cancelled = status == JobStatus::Cancelled;
            r.requeued_as = next;
        }
        Ok(None) => return None,
        Err(e) => r.errors.push(format!("reclaim job {id}: {e}")),
    }
    Some(r)
}

/// How another host's heartbeat was found stale: what a reclaimed job's
/// reason says of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stale {
    /// Its date is more than the TTL before the reaper's wall clock.
    Dated,
    /// Its date is not (it is within the TTL of that clock, or ahead of
    /// it), but a server's periodic pass saw it unchanged for more than
    /// the TTL on its own monotonic clock ([`Sightings`]).
    SeenUnchanged,
}

impl Stale {
    /// How heartbeat `beat` of a job reclaimed at `now` (the wall clock)
    /// was stale: [`Stale::Dated`] when its date says so, otherwise it can
    /// only have been seen unchanged.
    pub fn of(beat: OffsetDateTime, now: OffsetDateTime, ttl: std::time::Duration) -> Self {
        let ttl = time::Duration::try_from(ttl).unwrap_or(time::Duration::MAX);
        if now - beat > ttl {
            Self::Dated
        } else {
            Self::SeenUnchanged
        }
    }
}

/// Why a reclaimed job failed: the host, its last heartbeat, and how that
/// heartbeat was found stale (`stale`) against the TTL.
pub fn reclaimed_reason(
    owner: &Owner,
    beat: OffsetDateTime,
    stale: Stale,
    liveness: &Liveness,
) -> String {
    let ttl = liveness.ttl.as_secs_f64();
    let how = match stale {
        Stale::Dated => format!(
            "more than {ttl} s before host {}'s reaper looked",
            liveness.owner.name
        ),
        Stale::SeenUnchanged => format!(
            "a date not older than {ttl} s on host {}'s clock (the hosts' clocks may differ), \
             but its reaper saw that heartbeat unchanged for more than {ttl} s",
            liveness.owner.name
        ),
    };
    format!(
        "the paddock process running this job on host {} (jobs directory {}) last renewed its \
         heartbeat at {}, {how}: reclaimed as dead; its workspace and processes on that host \
         were not touched",
        owner.name,
        owner.host,
        rfc3339(beat),
    )
}

/// Why a dead job that a cancel was asked of is `cancelled`: who asked
/// and when, in the words of a job its owner stopped on the request
/// (`cancel::asked_at`: `cancelled, asked by … at …`), then why it was
/// found dead (`dead`, [`reclaimed_reason`] or [`REASON`]). Before, it
/// said `cancelled: … asked to cancel it at …`, the asker worded two
/// ways for one cancel.
pub fn cancelled_reason(asked: &CancelRequest, dead: &str) -> String {
    format!(
        "cancelled, {}, and it was found dead before it stopped: {dead}",
        crate::cancel::asked_at(asked)
    )
}

/// What a reclaimed job's reason adds when it came from a server's queue
/// and a cancel was asked: why no next attempt was queued.
pub const NOT_REQUEUED_CANCELLED: &str = "; not queued again: it was cancelled";

/// A dead job's next attempt, made to be queued in the reclaim's
/// transaction.
struct Queued {
    job: JobRecord,
    spec_json: String,
    priority: i64,
    follows: Option<crate::store::Follows>,
}

impl Queued {
    fn as_next(&self) -> NextAttempt<'_> {
        NextAttempt {
            job: &self.job,
            spec_json: &self.spec_json,
            priority: self.priority,
            follows: self.follows.as_ref(),
        }
    }
}

/// The next attempt of dead job `record` when a server's queue had
/// claimed it (`queued`, its priority), made but not stored (the reclaim
/// stores it in its own transaction; `crate::requeue`), and what `reason`
/// adds: where that attempt is, or why there is none. Nothing for a job
/// not from the queue.
async fn next_attempt_of(
    store: &dyn Store,
    record: &JobRecord,
    reason: &str,
    queued: Option<i64>,
    bound: u32,
) -> (Option<Queued>, String) {
    let Some(priority) = queued else {
        return (None, String::new());
    };
    match crate::requeue::next_attempt(store, record, reason, bound).await {
        Ok(attempt) => {
            let note = attempt.requeued().note(bound);
            match attempt {
                crate::requeue::Next::Attempt {
                    record,
                    spec_json,
                    follows,
                } => (
                    Some(Queued {
                        job: *record,
                        spec_json,
                        priority,
                        follows,
                    }),
                    note,
                ),
                crate::requeue::Next::Spent(_) => (None, note),
            }
        }
        Err(e) => (None, format!("; not queued again: {e}")),
    }
}

/// How often a reclaim is tried again when a cancel was recorded between
/// the reaper's read and its compare-and-set (the request is kept once
/// recorded, so a second try sees it).
const RECLAIM_TRIES: usize = 3;

/// The store's part of reclaiming job `id` from `owner`, all in one
/// transaction (`Store::reclaim_job`, a compare-and-set on that owner,
/// heartbeat and whether a cancel was asked; `None` when it no longer
/// holds): the job `failed`, or `cancelled` when a cancel was asked of it
/// (then never queued again), with its final status event, its calls in
/// flight settled as interrupted, its totals from the ledger, and its
/// next attempt queued when a server's queue had claimed it (with
/// priority `queued`; `crate::requeue`). Its final status, and the job
/// its next attempt was queued as.
async fn reclaim_job(
    store: &dyn Store,
    liveness: &Liveness,
    (id, queued): (&str, Option<i64>),
    (owner, beat): (&Owner, OffsetDateTime),
    now: OffsetDateTime,
) -> Result<Option<(JobStatus, Option<String>)>, StoreError> {
    for _ in 0..RECLAIM_TRIES {
        let Some(mut record) = store
            .job(id)
            .await?
            .filter(|rec| rec.status == JobStatus::Running)
        else {
            return Ok(None);
        };
        let asked = store.cancel_requested(id).await?;
        let dead = reclaimed_reason(owner, beat, Stale::of(beat, now, liveness.ttl), liveness);
        let (status, phase, reason) = match &asked {
            Some(request) => (
                JobStatus::Cancelled,
                Phase::Cancelled,
                cancelled_reason(request, &dead),
            ),
            None => (JobStatus::Failed, Phase::Failed, dead),
        };
        record.status = status;
        (record.finished_at, record.duration_ms) = finished(record.created_at, now);
        if let Some((path, files)) = told(store, id).await?.patch {
            record.patch_path = Some(path);
            record.changed_files = files;
        }
        // Its next attempt, said in its reason; one that cannot be queued
        // is said there too, the job reclaimed all the same.
        let (next, note) = match (queued, &asked) {
            (Some(_), Some(_)) => (None, NOT_REQUEUED_CANCELLED.to_string()),
            _ => next_attempt_of(store, &record, &reason, queued, liveness.requeues).await,
        };
        record.reason = Some(format!("{reason}{note}"));
        // The final status event goes in with the compare-and-set, after
        // whatever the owner appended until then (it stops at its next
        // renewal): whoever sees the record final finds the event stored.
        let last = EventBody::Status {
            phase,
            detail: Some(reason),
        };
        let reclaim = Reclaim {
            job: &record,
            host: &owner.host,
            heartbeat: beat,
            cancel_asked: asked.is_some(),
            last: &last,
            interrupted: RECLAIMED_CALL,
            next: next.as_ref().map(Queued::as_next),
        };
        if store.reclaim_job(&reclaim).await? {
            return Ok(Some((status, next.map(|q| q.job.id))));
        }
        // Refused: another reaper came first, the owner renewed, or a
        // cancel was recorded since it was read (then once more with it).
        if asked.is_some() || store.cancel_requested(id).await?.is_none() {
            return Ok(None);
        }
    }
    Ok(None)
}

/// When a job created at `created` and ended by a reaper at `now` (the
/// wall clock) finished, and its duration: never before it was created,
/// so a clock that went back since (or a record dated ahead by another
/// host's) gives it a zero duration, not none.
fn finished(created: OffsetDateTime, now: OffsetDateTime) -> (Option<OffsetDateTime>, Option<u64>) {
    let at = now.max(created);
    let ms = u64::try_from((at - created).whole_milliseconds()).unwrap_or(u64::MAX);
    (Some(at), Some(ms))
}

/// Removes a dead job's directory, killing again what may still write
/// into it between attempts (so a process that forked during the first
/// scan cannot make the removal fail with "Directory not empty"); an
/// overlay workspace's mount first, never walked through.
fn remove_dir(dir: &Path) -> std::io::Result<()> {
    let mut attempt = 0;
    loop {
        let removed = crate::workspace::overlay::unmount_work(dir)
            .and_then(|()| crate::workspace::remove::remove_tree(dir));
        match removed {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) if attempt + 1 >= REMOVE_ATTEMPTS => return Err(e),
            Err(_) => {
                attempt += 1;
                leftovers::kill_processes(dir, None);
            }
        }
    }
}

/// Saves the patch of dead job `rec`'s work so far as its `patch.diff`
/// artifact; None when it never got as far as a checkout. Bounded as a
/// concluded job's is (`runner/conclude.rs`): a diff longer than the
/// stored spec's `limits.max_disk_bytes` (or the most Paddock reads of a
/// patch) is stopped once past it and nothing is written; a job within
/// its disk can make a far larger patch (a file of empty lines doubles),
/// which the reaper wrote to the data directory whole, up to a GiB.
async fn save_patch(
    paths: &Paths,
    store: &dyn Store,
    rec: &JobRecord,
    lease: Lease,
) -> Result<Option<SavedPatch>, String> {
    let ws = match Workspace::reopen(&paths.jobs, &rec.id, lease, &rec.branch) {
        Ok(Some(ws)) => ws,
        Ok(None) => return Ok(None),
        Err(e) => return Err(format!("save the patch of {}: {e}", rec.id)),
    };
    let failed = |e: crate::workspace::WorkspaceError| format!("save the patch of {}: {e}", rec.id);
    let max = patch_bound(store, &rec.id).await;
    let staged = ws.stage().await.map_err(failed)?;
    let patch = match ws.diff_staged_with(staged, None, max).await {
        Ok(patch) if patch.diff.len() as u64 <= max => patch,
        Ok(patch) => {
            return Err(past_bound(&rec.id, max, patch.diff.len() as u64));
        }
        Err(crate::workspace::WorkspaceError::GitOutputPastLimit { .. }) => {
            return Err(past_bound(&rec.id, max, max + 1));
        }
        Err(e) => return Err(failed(e)),
    };
    let dir = paths.artifacts.join(&rec.id);
    let path = dir.join("patch.diff");
    std::fs::create_dir_all(&dir)
        .and_then(|()| crate::own_file::write(&path, patch.diff.as_bytes()))
        .map_err(|e| format!("save the patch to {}: {e}", path.display()))?;
    Ok(Some(SavedPatch {
        path,
        changed_files: patch.changed_files,
        bytes: u64::try_from(patch.diff.len()).unwrap_or(u64::MAX),
    }))
}

/// The most of a dead job's patch saved: its stored spec's
/// `limits.max_disk_bytes`, at most [`crate::workspace::MAX_PATCH_BYTES`]
/// (that alone when the spec cannot be read).
async fn patch_bound(store: &dyn Store, job_id: &str) -> u64 {
    let limit = match store.job_spec(job_id).await {
        Ok(Some(text)) => paddock_protocol::JobSpec::from_stored(&text, Path::new("the store"))
            .map(|spec| spec.limits.max_disk_bytes)
            .ok(),
        _ => None,
    };
    limit.map_or(crate::workspace::MAX_PATCH_BYTES, |l| {
        l.min(crate::workspace::MAX_PATCH_BYTES)
    })
}

/// Why a dead job's patch was not saved: longer than `max` bytes.
fn past_bound(job_id: &str, max: u64, seen: u64) -> String {
    let seen = if seen > max {
        format!("more than {max}")
    } else {
        seen.to_string()
    };
    format!(
        "save the patch of {job_id}: its diff is {seen} bytes, past limits.max_disk_bytes or the \
         {} bytes Paddock reads of a patch, whichever is less ({max} bytes); it was stopped and \
         no patch is kept",
        crate::workspace::MAX_PATCH_BYTES
    )
}

/// The lease at `path` when nobody holds it (its process is gone), and
/// whether it marks a kept directory.
fn abandoned(path: &Path) -> Option<(Flock<File>, bool)> {
    let file = File::options().read(true).open(path).ok()?;
    // Held (EWOULDBLOCK) means alive; any other failure means this
    // process cannot tell, and the directory is left alone.
    let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock).ok()?;
    // Released (deleted) by its holder while this pass opened it: gone,
    // not abandoned.
    if !crate::workspace::lease::still_at(&lock, path) {
        return None;
    }
    let mut content = Vec::new();
    let _ = (&*lock).read_to_end(&mut content);
    Some((lock, content == KEPT))
}

/// Why the dead job `id` failed, from its events: a job that died while
/// publishing a `done` result failed at publishing (the prefix
/// `paddock publish` recognizes, so that it finishes the job as done);
/// any other as `aftermath` says ([`REASON`] and the like); whether it
/// died mid-job (not publishing).
fn reason_for(id: &str, told: &Told, aftermath: Aftermath) -> (String, bool) {
    let last_status = told
        .last_status
        .as_ref()
        .map(|(phase, detail)| (*phase, detail.as_deref()));
    match last_status {
        Some((Phase::Publishing, Some("done"))) => (
            format!(
                "{}the paddock process running this job ended while publishing its result \
                 (killed or crashed); `paddock publish {id}` finishes it",
                crate::results::conclude::PUBLISH_FAILED
            ),
            false,
        ),
        _ => (aftermath.reason().to_string(), true),
    }
}

/// What a dead job's events tell the reaper, read a page at a time (a
/// job's history may be millions of events): its last status (phase and
/// detail), and the patch its own process saved when it concluded (its
/// last `artifact_summary` event, Paddock's, never the job's). A job that
/// died while publishing has no workspace left for the reaper to save
/// from, and its record is written whole only when the job ends, so
/// without that patch the record would lose the one the artifacts keep.
#[derive(Debug, Default, PartialEq, Eq)]
struct Told {
    last_status: Option<(Phase, Option<String>)>,
    patch: Option<(String, Vec<String>)>,
}

async fn told(store: &dyn Store, id: &str) -> Result<Told, StoreError> {
    let mut told = Told::default();
    crate::store::event_pages::each_event(store, id, 0, |e| match &e.body {
        EventBody::Status { phase, detail } => {
            told.last_status = Some((*phase, detail.clone()));
        }
        EventBody::ArtifactSummary {
            patch_path,
            changed_files,
            ..
        } => told.patch = Some((patch_path.clone(), changed_files.clone())),
        _ => {}
    })
    .await?;
    Ok(told)
}

/// Marks running job `record` failed (`cancelled` when a cancel was asked
/// of it), with its totals from the ledger and the patch the reaper saved
/// (or, when it saved none, the one the job's process saved before it
/// died); the status it got. A job with an owner (every job recorded
/// since jobs had owners) is ended as another host's is reclaimed, in one
/// transaction holding on its owner, heartbeat and cancel request
/// (`Store::reclaim_job`), so a cancel recorded while this runs is never
/// lost; one without is ended step by step, as before owners were.
async fn fail_job(
    store: &dyn Store,
    mut record: JobRecord,
    (patch, aftermath): (Option<&SavedPatch>, Aftermath),
    requeues: u32,
) -> Result<(JobStatus, Option<String>), StoreError> {
    let id = record.id.clone();
    let now = OffsetDateTime::now_utc();
    let first_seq = store.last_event_seq(&id).await?.saturating_add(1);
    let stored = told(store, &id).await?;
    let (dead, mid_job) = reason_for(&id, &stored, aftermath);
    if let Some(p) = patch {
        let saved = EventBody::ArtifactSummary {
            patch_path: p.path.display().to_string(),
            changed_files: p.changed_files.clone(),
            patch_bytes: p.bytes,
            interrupted: true,
        };
        store
            .append_event(&AgentEvent {
                job_id: id.clone(),
                seq: first_seq,
                at: now,
                body: saved,
            })
            .await?;
        record.patch_path = Some(p.path.display().to_string());
        record.changed_files = p.changed_files.clone();
    } else if let Some((path, files)) = stored.patch {
        record.patch_path = Some(path);
        record.changed_files = files;
    }
    (record.finished_at, record.duration_ms) = finished(record.created_at, now);
    let (owned, queued) = store
        .running_jobs()
        .await?
        .into_iter()
        .find(|j| j.id == id)
        .map_or((None, None), |j| (j.owner, j.queued));
    for _ in 0..RECLAIM_TRIES {
        // A cancel asked of it through the store (its process died before
        // it read it) ends it `cancelled`, unless it died publishing a
        // result that `paddock publish` can still finish.
        let asked = store.cancel_requested(&id).await?;
        let (status, phase, reason) = match &asked {
            Some(asked) if mid_job => (
                JobStatus::Cancelled,
                Phase::Cancelled,
                cancelled_reason(asked, &dead),
            ),
            _ => (JobStatus::Failed, Phase::Failed, dead.clone()),
        };
        record.status = status;
        // A job from a server's queue that died before publishing runs
        // again, as another host's reclaim of it would have it (the
        // bound counted in its spec; `crate::requeue`); never one a cancel
        // was asked of, or one that died publishing (`paddock publish`
        // finishes that).
        let queued = queued.filter(|_| status == JobStatus::Failed && mid_job && owned.is_some());
        let (next, note) = next_attempt_of(store, &record, &reason, queued, requeues).await;
        record.reason = Some(format!("{reason}{note}"));
        let last = EventBody::Status {
            phase,
            detail: Some(reason),
        };
        let Some((owner, beat)) = &owned else {
            finish_ownerless(store, record, last, now).await?;
            return Ok((status, None));
        };
        let reclaim = Reclaim {
            job: &record,
            host: &owner.host,
            heartbeat: *beat,
            cancel_asked: asked.is_some(),
            last: &last,
            interrupted: INTERRUPTED_CALL,
            next: next.as_ref().map(Queued::as_next),
        };
        if store.reclaim_job(&reclaim).await? {
            return Ok((status, next.map(|q| q.job.id)));
        }
        // Refused: a cancel was recorded since it was read (then once
        // more with it), or another process ended the job.
        if asked.is_some() || store.cancel_requested(&id).await?.is_none() {
            break;
        }
    }
    let found = store
        .job(&id)
        .await?
        .map_or_else(|| "gone".to_owned(), |r| r.status.as_str().to_owned());
    Err(StoreError::StatusChanged {
        job_id: id,
        expected: "running",
        found,
    })
}

/// Ends `record` (a job recorded before jobs had owners) with its final
/// event `last`: the event appended, its calls in flight settled as
/// interrupted, its totals summed from the ledger, the record finished
/// from `running`.
async fn finish_ownerless(
    store: &dyn Store,
    mut record: JobRecord,
    last: EventBody,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    let id = record.id.clone();
    let seq = store.last_event_seq(&id).await?.saturating_add(1);
    store
        .append_event(&AgentEvent {
            job_id: id.clone(),
            seq,
            at: now,
            body: last,
        })
        .await?;
    // Calls its process never saw end are kept, settled as interrupted.
    store.interrupt_model_calls(&id, INTERRUPTED_CALL).await?;
    let calls = store.model_calls(&id).await?;
    let mut tokens = TokenUsage::default();
    let mut cost: i64 = 0;
    for c in &calls {
        tokens.add(&c.tokens);
        cost = cost.saturating_add(c.cost_micros);
    }
    record.tokens = tokens;
    record.cost_micros = cost;
    record.model_calls = u64::try_from(calls.len()).unwrap_or(u64::MAX);
    store.finish_job(&record, JobStatus::Running).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fixtures;
    use paddock_protocol::{CallStatus, ModelCall};

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// This host, as the tests' reaper.
    fn here() -> Liveness {
        Liveness {
            owner: Owner {
                host: "0".repeat(32),
                name: "here".into(),
            },
            interval: std::time::Duration::from_secs(10),
            ttl: std::time::Duration::from_secs(60),
            requeues: 1,
            cancel_poll: std::time::Duration::from_secs(1),
        }
    }

    /// What a process that died leaves: the lease file, nobody's lock.
    fn crashed(jobs: &Path, name: &str) {
        std::fs::create_dir_all(jobs.join(LEASES)).unwrap();
        std::fs::write(jobs.join(LEASES).join(format!("{name}.lock")), "").unwrap();
    }

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

    /// A kept overlay workspace whose `paddock` died (kill -9 after the
    /// lease was marked kept): the reaper leaves the directory but makes
    /// it plain, nothing mounted, the snapshot no longer named, the work
    /// kept; the job failed and the lease released.
    #[tokio::test]
    async fn a_dead_kept_overlay_workspace_is_made_plain() {
        use crate::workspace::{overlay, Layout};
        if !overlay::testable_here() {
            return;
        }
        let root = tempfile::tempdir().unwrap();
        let paths = Paths::under(root.path());
        let jobs = &paths.jobs;
        let repo = root.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        std::fs::write(repo.join("README.md"), "hello\n").unwrap();
        for args in [
            &["init", "-q", "-b", "main"][..],
            &["add", "."],
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                "init",
            ],
        ] {
            let ok = std::process::Command::new("git")
                .arg("-C")
                .arg(&repo)
                .args(args)
                .status()
                .unwrap();
            assert!(ok.success());
        }
        let spec = paddock_protocol::RepositorySpec {
            path: Some(repo),
            url: None,
            base_ref: "main".into(),
            token: None,
        };
        let lease = Lease::take(jobs, "kept-dead").unwrap();
        let ws = Workspace::provision_as(
            jobs,
            "kept-dead",
            lease.clone(),
            &spec,
            "paddock/T/1",
            Layout::Overlay,
        )
        .await
        .unwrap();
        std::fs::write(ws.work.join("new.txt"), "work\n").unwrap();
        lease.keep().unwrap();
        drop((lease, ws));
        let store = crate::store::SqliteStore::open_in_memory().await.unwrap();
        store
            .insert_job(&fixtures::job("kept-dead", 0), "{}")
            .await
            .unwrap();
        let report = reap_with(&paths, &store, &here(), &[root.path().join("cgroup")]).await;
        let work = jobs.join("kept-dead/work");
        assert_eq!(
            (
                report.jobs,
                report.errors,
                overlay::is_mounted(&work),
                std::fs::read_to_string(work.join("new.txt")).unwrap(),
                std::fs::read_to_string(work.join("README.md")).unwrap(),
                jobs.join("kept-dead/meta/overlay").exists(),
                names(&jobs.join(LEASES)),
            ),
            (
                vec![Reaped {
                    name: "kept-dead".into(),
                    kept: true,
                    marked_failed: true,
                    ..Reaped::default()
                }],
                vec![],
                false,
                "work\n".to_string(),
                "hello\n".to_string(),
                false,
                Vec::<String>::new(),
            )
        );
    }

    /// A lease file a writer killed mid-placing left under its temporary
    /// name (`<id>.lock.new…`, where there is no `O_TMPFILE`) is removed
    /// once a minute old and unlocked; one a live writer holds, a recent
    /// one, and a link (never followed) stay. A lease placed here (ext4 or
    /// tmpfs: `O_TMPFILE`) never has such a name.
    #[test]
    fn a_killed_writers_pending_lease_files_go_live_recent_and_links_stay() {
        use nix::sys::stat::{utimensat, UtimensatFlags};
        use nix::sys::time::TimeSpec;
        let root = tempfile::tempdir().unwrap();
        let leases = root.path().join(LEASES);
        // A lease placed unnamed leaves no pending name at any point.
        let lease = Lease::take(root.path(), "job-1").unwrap();
        assert_eq!(names(&leases), ["job-1.lock"]);
        drop(lease);
        let outside = root.path().join("outside");
        std::fs::write(&outside, "keep me").unwrap();
        let old = |p: &Path| {
            let t = TimeSpec::from_duration(
                (std::time::SystemTime::now() - std::time::Duration::from_secs(120))
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap(),
            );
            utimensat(None, p, &t, &t, UtimensatFlags::NoFollowSymlink).unwrap();
        };
        for name in [
            "job-2.lock.newAbC123",
            "job-3.lock.newDeF456",
            "job-4.lock.newGhI789",
        ] {
            std::fs::write(leases.join(name), "").unwrap();
        }
        old(&leases.join("job-2.lock.newAbC123"));
        old(&leases.join("job-3.lock.newDeF456"));
        // job-3's writer is alive (holds it); job-4's is recent.
        let held = File::open(leases.join("job-3.lock.newDeF456")).unwrap();
        let _held = Flock::lock(held, FlockArg::LockExclusive).unwrap();
        std::os::unix::fs::symlink(&outside, leases.join("job-5.lock.newJkL012")).unwrap();
        old(&leases.join("job-5.lock.newJkL012"));
        let (removed, errors) = crate::workspace::lease::remove_stale_pending(&leases);
        assert_eq!(
            (removed, errors),
            (
                vec![leases.join("job-2.lock.newAbC123")],
                Vec::<String>::new()
            )
        );
        assert_eq!(
            names(&leases),
            [
                "job-1.lock",
                "job-3.lock.newDeF456",
                "job-4.lock.newGhI789",
                "job-5.lock.newJkL012"
            ]
        );
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me");
    }

    /// A publish's lease: refused while a live process holds the job's
    /// lease, kept from the start, and an abandoned one taken over.
    #[test]
    fn a_publishs_lease_is_kept_and_never_taken_from_a_live_holder() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join(".leases/job-1.lock");
        let running = Lease::take(root.path(), "job-1").unwrap();
        assert!(Lease::take_to_publish(root.path(), "job-1")
            .unwrap()
            .is_none());
        drop(running);
        let publishing = Lease::take_to_publish(root.path(), "job-1")
            .unwrap()
            .unwrap();
        assert!(abandoned(&path).is_none());
        drop(publishing);
        assert_eq!(abandoned(&path).map(|(_, kept)| kept), Some(true));
        let fresh = Lease::take_to_publish(root.path(), "job-2")
            .unwrap()
            .unwrap();
        drop(fresh);
        assert_eq!(
            abandoned(&root.path().join(".leases/job-2.lock")).map(|(_, kept)| kept),
            Some(true)
        );
    }

    #[test]
    fn a_kept_lease_says_so_once_abandoned() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join(".leases/job-1.lock");
        let lease = Lease::take(root.path(), "job-1").unwrap();
        lease.keep().unwrap();
        // Still held, its file still there: no reaper can take it.
        assert!(abandoned(&path).is_none());
        drop(lease);
        assert_eq!(abandoned(&path).map(|(_, kept)| kept), Some(true));
    }

    #[tokio::test]
    async fn reaps_only_the_jobs_whose_process_is_gone() {
        let root = tempfile::tempdir().unwrap();
        let paths = Paths::under(root.path());
        let jobs = &paths.jobs;
        let cgroups = [root.path().join("cgroup")];
        let store = crate::store::SqliteStore::open_in_memory().await.unwrap();
        let dir = |name: &str| std::fs::create_dir_all(jobs.join(name).join("meta")).unwrap();
        // Alive: its lease is held.
        dir("alive");
        let _alive = Lease::take(jobs, "alive").unwrap();
        store
            .insert_job(&fixtures::job("alive", 0), "{}")
            .await
            .unwrap();
        // Died mid-job: its directory and its lease are left.
        dir("dead");
        crashed(jobs, "dead");
        // Died before its directory existed (waiting for a host slot), its
        // record `running`.
        crashed(jobs, "waiting");
        store
            .insert_job(&fixtures::job("waiting", 0), "{}")
            .await
            .unwrap();
        // Ended normally but its lease file stayed: deleted, not reported.
        crashed(jobs, "ended");
        let mut ended = fixtures::job("ended", 1);
        ended.status = JobStatus::Done;
        store.insert_job(&ended, "{}").await.unwrap();
        // Kept, then its job ended: released, with its file.
        dir("kept");
        let kept = Lease::take(jobs, "kept").unwrap();
        kept.keep().unwrap();
        kept.release().unwrap();
        drop(kept);
        // Kept, and its process died before the job's end.
        dir("kept-dead");
        let kept_dead = Lease::take(jobs, "kept-dead").unwrap();
        kept_dead.keep().unwrap();
        drop(kept_dead);
        store
            .insert_job(&fixtures::job("kept-dead", 2), "{}")
            .await
            .unwrap();
        // Running, but its lease file is gone (deleted by hand, or by an
        // older paddock whose unwinding deleted it).
        dir("unleased");
        store
            .insert_job(&fixtures::job("unleased", 3), "{}")
            .await
            .unwrap();

        let report = reap_with(&paths, &store, &here(), &cgroups).await;
        let reaped = |name: &str, marked_failed: bool, removed: bool| Reaped {
            name: name.into(),
            workspace_removed: removed,
            marked_failed,
            ..Reaped::default()
        };
        assert_eq!(
            report,
            Report {
                jobs: vec![
                    reaped("dead", false, true),
                    Reaped {
                        kept: true,
                        ..reaped("kept-dead", true, false)
                    },
                    reaped("unleased", true, true),
                    reaped("waiting", true, false),
                ],
                sandbox_cgroups: vec![],
                pruned: vec![],
                stale_leases: vec![],
                // Other processes' on this host (none of this test's).
                orphaned_gits: report.orphaned_gits.clone(),
                errors: vec![],
            }
        );
        assert_eq!(names(jobs), [".leases", "alive", "kept", "kept-dead"]);
        assert_eq!(names(&jobs.join(LEASES)), ["alive.lock"]);
        let mut ended = Vec::new();
        for id in ["waiting", "kept-dead", "unleased"] {
            let rec = store.job(id).await.unwrap().unwrap();
            ended.push((id, rec.status, rec.reason));
        }
        let failed = |id, aftermath: Aftermath| {
            (id, JobStatus::Failed, Some(aftermath.reason().to_string()))
        };
        assert_eq!(
            ended,
            [
                failed("waiting", Aftermath::NoWorkspace),
                failed("kept-dead", Aftermath::Kept),
                failed("unleased", Aftermath::Removed),
            ]
        );
        assert_eq!(
            [Aftermath::NoWorkspace.reason(), Aftermath::Kept.reason()],
            [
                "the paddock process running this job ended before the job did (killed or crashed); it left no workspace (none made yet, or one already removed), so the reaper saved and removed nothing",
                "the paddock process running this job ended before the job did (killed or crashed); its workspace was kept as asked (`--keep`), nothing saved from it",
            ]
        );
        assert_eq!(
            store.job("alive").await.unwrap().unwrap().status,
            JobStatus::Running
        );
        assert_eq!(
            store.job("ended").await.unwrap().unwrap().status,
            JobStatus::Done
        );
        let empty = Paths::under(&root.path().join("missing"));
        let fresh = crate::store::SqliteStore::open_in_memory().await.unwrap();
        assert_eq!(
            reap_with(&empty, &fresh, &here(), &cgroups).await,
            Report::default()
        );
    }

    /// A reaped job's record has the totals of its ledger rows, not the
    /// zeros it was created with.
    /// The reaper reaches what a dead job left on its rung through
    /// `Rung::reap` (processes, cgroups), and reports what the rung found.
    #[tokio::test]
    async fn a_dead_jobs_leftovers_are_reaped_through_its_rung() {
        let root = tempfile::tempdir().unwrap();
        let paths = Paths::under(root.path());
        let store = crate::store::SqliteStore::open_in_memory().await.unwrap();
        crashed(&paths.jobs, "job-1");
        std::fs::create_dir_all(paths.jobs.join("job-1")).unwrap();
        let cg = root.path().join("cgroup/pids/paddock/job-1");
        let rung = Arc::new(crate::rung::fake::FakeRung {
            leftovers: crate::rung::Leftovers {
                killed: 2,
                cgroups: vec![(cg.clone(), 1)],
                stuck: vec![(root.path().join("stuck"), "busy".into())],
                notices: Vec::new(),
            },
            ..Default::default()
        });
        let roots = [root.path().join("cgroup")];
        let report = reap_on(
            &paths,
            &store,
            &here(),
            &[rung.clone() as Arc<dyn Rung>],
            &roots,
        )
        .await;
        assert_eq!(
            rung.reaped.lock().unwrap().clone(),
            vec![(
                "job-1".to_owned(),
                paths.jobs.join("job-1"),
                REMOVE_ATTEMPTS,
                roots.to_vec()
            )]
        );
        let r = &report.jobs[0];
        assert_eq!(
            (r.killed, r.cgroups.clone(), r.errors.clone()),
            (
                3,
                vec![cg],
                vec![format!(
                    "remove cgroup {}: busy",
                    root.path().join("stuck").display()
                )]
            )
        );
    }

    #[tokio::test]
    async fn a_reaped_job_has_the_totals_of_its_ledger() {
        let root = tempfile::tempdir().unwrap();
        let paths = Paths::under(root.path());
        let store = crate::store::SqliteStore::open_in_memory().await.unwrap();
        store
            .insert_job(&fixtures::job("job-1", 0), "{}")
            .await
            .unwrap();
        let mut big = fixtures::model_call("job-1", 2);
        big.tokens.input_tokens = u64::MAX / 2 + 1;
        big.cost_micros = i64::MAX;
        for call in [fixtures::model_call("job-1", 1), big] {
            store.insert_model_call(&call).await.unwrap_or_else(|e| {
                // The store refuses counts it cannot hold; keep the first.
                assert_eq!(call.seq, 2, "{e}");
            });
        }
        let mut third = fixtures::model_call("job-1", 3);
        third.cost_micros = i64::MAX;
        store.insert_model_call(&third).await.unwrap();
        crashed(&paths.jobs, "job-1");
        reap_with(&paths, &store, &here(), &[root.path().join("cgroup")]).await;
        let calls = store.model_calls("job-1").await.unwrap();
        let rec = store.job("job-1").await.unwrap().unwrap();
        let mut tokens = TokenUsage::default();
        for c in &calls {
            tokens.add(&c.tokens);
        }
        assert_eq!(
            (rec.model_calls, rec.tokens, rec.cost_micros),
            (calls.len() as u64, tokens, i64::MAX)
        );
        assert!(rec.model_calls >= 2 && rec.tokens.input_tokens >= 2400);
    }

    /// A job whose process died while publishing (its workspace gone, its
    /// patch saved and announced): failed at publishing, so `paddock
    /// publish` finishes it, its record pointing at that patch.
    #[tokio::test]
    async fn a_job_dead_while_publishing_keeps_the_patch_it_saved() {
        let root = tempfile::tempdir().unwrap();
        let paths = Paths::under(root.path());
        let store = crate::store::SqliteStore::open_in_memory().await.unwrap();
        store
            .insert_job(&fixtures::job("job-1", 0), "{}")
            .await
            .unwrap();
        let patch = paths
            .artifacts
            .join("job-1/patch.diff")
            .display()
            .to_string();
        let files = vec!["fix.txt".to_string()];
        for (seq, body) in [
            EventBody::ArtifactSummary {
                patch_path: patch.clone(),
                changed_files: files.clone(),
                patch_bytes: 10,
                interrupted: false,
            },
            EventBody::Status {
                phase: Phase::Publishing,
                detail: Some("done".into()),
            },
        ]
        .into_iter()
        .enumerate()
        {
            store
                .append_event(&AgentEvent {
                    job_id: "job-1".into(),
                    seq: seq as u64 + 1,
                    at: OffsetDateTime::now_utc(),
                    body,
                })
                .await
                .unwrap();
        }
        crashed(&paths.jobs, "job-1");
        reap_with(&paths, &store, &here(), &[root.path().join("cgroup")]).await;
        let rec = store.job("job-1").await.unwrap().unwrap();
        assert_eq!(
            (rec.status, rec.reason, rec.patch_path, rec.changed_files),
            (
                JobStatus::Failed,
                Some(format!(
                    "{}the paddock process running this job ended while publishing its result \
                     (killed or crashed); `paddock publish job-1` finishes it",
                    crate::results::conclude::PUBLISH_FAILED
                )),
                Some(patch),
                files
            )
        );
    }

    /// A dead job with a long history (its patch announced first, then
    /// thousands of output lines, then its publishing): the reaper finds
    /// the patch and the last status across pages, appends its final
    /// event after the last, and never reads more than a page at once
    /// (before, it read the whole history three times over).
    #[tokio::test]
    async fn a_dead_job_with_a_long_history_is_reaped_a_page_at_a_time() {
        use crate::store::event_pages::{most_read, PAGE};
        let root = tempfile::tempdir().unwrap();
        let paths = Paths::under(root.path());
        let store = crate::store::SqliteStore::open_in_memory().await.unwrap();
        store
            .insert_job(&fixtures::job("job-1", 0), "{}")
            .await
            .unwrap();
        let patch = "/artifacts/job-1/patch.diff".to_string();
        let files = vec!["fix.txt".to_string()];
        let lines = 3 * PAGE as usize;
        let bodies = std::iter::once(EventBody::ArtifactSummary {
            patch_path: patch.clone(),
            changed_files: files.clone(),
            patch_bytes: 10,
            interrupted: false,
        })
        .chain((0..lines).map(|i| EventBody::Text {
            text: format!("line {i}"),
        }))
        .chain(std::iter::once(EventBody::Status {
            phase: Phase::Publishing,
            detail: Some("done".into()),
        }));
        for (seq, body) in bodies.enumerate() {
            store
                .append_event(&AgentEvent {
                    job_id: "job-1".into(),
                    seq: seq as u64 + 1,
                    at: OffsetDateTime::now_utc(),
                    body,
                })
                .await
                .unwrap();
        }
        crashed(&paths.jobs, "job-1");
        most_read::take();
        reap_with(&paths, &store, &here(), &[root.path().join("cgroup")]).await;
        let most = most_read::take();
        let rec = store.job("job-1").await.unwrap().unwrap();
        let last = store
            .events_page("job-1", lines as u64 + 2, 10)
            .await
            .unwrap();
        assert_eq!(
            (
                most,
                rec.status,
                rec.patch_path,
                rec.changed_files,
                last.iter()
                    .map(|e| (e.seq, e.body.kind()))
                    .collect::<Vec<_>>()
            ),
            (
                PAGE as usize,
                JobStatus::Failed,
                Some(patch),
                files,
                vec![(lines as u64 + 3, "status")]
            )
        );
        assert!(
            rec.reason
                .unwrap()
                .contains("`paddock publish job-1` finishes it"),
            "reaped as dead while publishing"
        );
    }

    /// This host's job whose process died after another process asked to
    /// cancel it (through the store) and before it read the request ends
    /// `cancelled`, its reason saying who asked, when, and that it was
    /// found dead; its final event says the same.
    #[tokio::test]
    async fn a_dead_job_a_cancel_was_asked_of_ends_cancelled() {
        let root = tempfile::tempdir().unwrap();
        let paths = Paths::under(root.path());
        let store = crate::store::SqliteStore::open_in_memory().await.unwrap();
        let at = OffsetDateTime::now_utc();
        store
            .insert_owned_job(&fixtures::job("job-1", 0), "{}", &here().owner, at)
            .await
            .unwrap();
        assert_eq!(
            store.request_cancel("job-1", "there", at).await.unwrap(),
            Some(here().owner)
        );
        crashed(&paths.jobs, "job-1");
        let report = reap_with(&paths, &store, &here(), &[root.path().join("cgroup")]).await;
        let reason = cancelled_reason(
            &CancelRequest {
                at,
                by: "there".into(),
            },
            Aftermath::NoWorkspace.reason(),
        );
        let rec = store.job("job-1").await.unwrap().unwrap();
        let events = store.events("job-1", 0).await.unwrap();
        assert_eq!(
            (
                report
                    .jobs
                    .iter()
                    .map(|r| (r.name.as_str(), r.marked_failed, r.marked_cancelled))
                    .collect::<Vec<_>>(),
                rec.status,
                rec.reason.clone(),
                events
                    .into_iter()
                    .map(|e| (e.seq, e.body))
                    .collect::<Vec<_>>()
            ),
            (
                vec![("job-1", false, true)],
                JobStatus::Cancelled,
                Some(reason.clone()),
                vec![(
                    1,
                    EventBody::Status {
                        phase: Phase::Cancelled,
                        detail: Some(reason)
                    }
                )]
            )
        );
    }

    /// A call written ahead that its dead process never saw end stays on
    /// the ledger, settled `interrupted` with its estimate, and counts in
    /// the job's totals.
    #[tokio::test]
    async fn a_dead_jobs_calls_in_flight_are_kept_as_interrupted() {
        let root = tempfile::tempdir().unwrap();
        let paths = Paths::under(root.path());
        let store = crate::store::SqliteStore::open_in_memory().await.unwrap();
        store
            .insert_job(&fixtures::job("job-1", 0), "{}")
            .await
            .unwrap();
        let ahead = ModelCall {
            status: CallStatus::InFlight,
            http_status: None,
            error: None,
            estimated: true,
            cost_micros: 40,
            ..fixtures::model_call("job-1", 1)
        };
        store.insert_model_call(&ahead).await.unwrap();
        crashed(&paths.jobs, "job-1");
        reap_with(&paths, &store, &here(), &[root.path().join("cgroup")]).await;
        let interrupted = ModelCall {
            status: CallStatus::Interrupted,
            error: Some(INTERRUPTED_CALL.to_string()),
            ..ahead.clone()
        };
        assert_eq!(store.model_calls("job-1").await.unwrap(), vec![interrupted]);
        let rec = store.job("job-1").await.unwrap().unwrap();
        assert_eq!(
            (rec.status, rec.model_calls, rec.tokens, rec.cost_micros),
            (JobStatus::Failed, 1, ahead.tokens, 40)
        );
    }

    /// The work of a job whose process died is saved as its patch, marked
    /// interrupted, before its directory goes.
    #[tokio::test]
    async fn a_dead_jobs_work_is_saved_before_its_workspace_goes() {
        let root = tempfile::tempdir().unwrap();
        let paths = Paths::under(root.path());
        let repo = root.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .arg("-C")
                .arg(&repo)
                .args(args)
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@t")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@t")
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}");
        };
        git(&["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("README.md"), "hello\n").unwrap();
        git(&["add", "."]);
        git(&["commit", "-q", "-m", "init"]);
        let spec = paddock_protocol::RepositorySpec {
            path: Some(repo.clone()),
            url: None,
            base_ref: "main".into(),
            token: None,
        };
        let store = crate::store::SqliteStore::open_in_memory().await.unwrap();
        store
            .insert_job(&fixtures::job("job-1", 0), "{}")
            .await
            .unwrap();
        let ws = Workspace::provision(&paths.jobs, "job-1", &spec, "paddock/T-1/1")
            .await
            .unwrap();
        std::fs::write(ws.work.join("README.md"), "hello, world\n").unwrap();
        std::fs::write(ws.work.join("new.txt"), "new\n").unwrap();
        // The process dies: its lease file stays, nobody holds it.
        drop(ws);

        let report = reap_with(&paths, &store, &here(), &[root.path().join("cgroup")]).await;
        let artifact = paths.artifacts.join("job-1/patch.diff");
        let diff = std::fs::read_to_string(&artifact).unwrap();
        let changed = vec!["README.md".to_string(), "new.txt".to_string()];
        assert_eq!(
            report.jobs,
            vec![Reaped {
                name: "job-1".into(),
                patch: Some(SavedPatch {
                    path: artifact.clone(),
                    changed_files: changed.clone(),
                    bytes: diff.len() as u64,
                }),
                workspace_removed: true,
                marked_failed: true,
                ..Reaped::default()
            }]
        );
        assert!(
            diff.contains("+hello, world") && diff.contains("+new"),
            "{diff}"
        );
        assert!(!paths.jobs.join("job-1").exists());
        let rec = store.job("job-1").await.unwrap().unwrap();
        assert_eq!(
            (rec.patch_path, rec.changed_files),
            (Some(artifact.display().to_string()), changed.clone())
        );
        let bodies: Vec<EventBody> = store
            .events("job-1", 0)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.body)
            .collect();
        assert_eq!(
            bodies,
            vec![
                EventBody::ArtifactSummary {
                    patch_path: artifact.display().to_string(),
                    changed_files: changed,
                    patch_bytes: diff.len() as u64,
                    interrupted: true,
                },
                EventBody::Status {
                    phase: Phase::Failed,
                    detail: Some(REASON.to_string()),
                },
            ]
        );
    }

    /// A link a `process`-rung job (Paddock's own user) planted where its
    /// patch goes is not followed when the reaper saves a dead job's
    /// patch: the file it names keeps its text (was: overwritten by the
    /// job's diff), no patch is recorded, and the error says why.
    #[tokio::test]
    async fn a_dead_jobs_patch_is_not_written_through_a_planted_link() {
        let root = tempfile::tempdir().unwrap();
        let paths = Paths::under(root.path());
        let repo = root.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        for args in [
            &["init", "-q", "-b", "main"][..],
            &["add", "."],
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-q",
                "-m",
                "init",
            ],
        ] {
            std::fs::write(repo.join("README.md"), "hello\n").unwrap();
            let out = std::process::Command::new("git")
                .arg("-C")
                .arg(&repo)
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}");
        }
        let spec = paddock_protocol::RepositorySpec {
            path: Some(repo.clone()),
            url: None,
            base_ref: "main".into(),
            token: None,
        };
        let store = crate::store::SqliteStore::open_in_memory().await.unwrap();
        store
            .insert_job(&fixtures::job("job-1", 0), "{}")
            .await
            .unwrap();
        let ws = Workspace::provision(&paths.jobs, "job-1", &spec, "paddock/T-1/1")
            .await
            .unwrap();
        std::fs::write(ws.work.join("README.md"), "planted\n").unwrap();
        let host = root.path().join("host-file");
        std::fs::write(&host, "the host's file\n").unwrap();
        let artifact = paths.artifacts.join("job-1/patch.diff");
        std::fs::create_dir_all(artifact.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&host, &artifact).unwrap();
        drop(ws);

        let report = reap_with(&paths, &store, &here(), &[root.path().join("cgroup")]).await;
        let eloop = std::io::Error::from_raw_os_error(nix::libc::ELOOP);
        assert_eq!(
            (
                report
                    .jobs
                    .iter()
                    .map(|r| (r.patch.clone(), r.errors.clone()))
                    .collect::<Vec<_>>(),
                std::fs::read_to_string(&host).unwrap(),
                std::fs::symlink_metadata(&artifact).unwrap().is_symlink(),
            ),
            (
                vec![(
                    None,
                    vec![format!("save the patch to {}: {eloop}", artifact.display())]
                )],
                "the host's file\n".to_string(),
                true,
            )
        );
    }

    /// An orphan still writing into a dead job's directory (the clone of a
    /// job killed while provisioning: `git clone … <job>/work`) is killed
    /// before the directory goes, so the removal neither races it nor
    /// leaves it recreating the directory afterwards.
    #[tokio::test]
    async fn an_orphan_writing_into_a_dead_jobs_directory_is_killed_first() {
        let root = tempfile::tempdir().unwrap();
        let paths = Paths::under(&root.path().canonicalize().unwrap());
        let store = crate::store::SqliteStore::open_in_memory().await.unwrap();
        let dir = paths.jobs.join("job-1");
        std::fs::create_dir_all(dir.join("work")).unwrap();
        crashed(&paths.jobs, "job-1");
        let mut writer = std::process::Command::new("sh")
            .args([
                "-c",
                "i=0; while :; do i=$((i+1)); mkdir -p \"$0/d$i\"; done",
            ])
            .arg(dir.join("work"))
            .current_dir("/")
            .spawn()
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let report = reap_with(&paths, &store, &here(), &[root.path().join("cgroup")]).await;
        use std::os::unix::process::ExitStatusExt as _;
        let signal = writer.wait().unwrap().signal();
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        // The shell, and the `mkdir` it may have been running.
        let killed = report.jobs.first().map_or(0, |r| r.killed);
        assert!((1..=2).contains(&killed), "{report:?}");
        assert_eq!(
            (report.jobs, signal, dir.exists()),
            (
                vec![Reaped {
                    name: "job-1".into(),
                    killed,
                    workspace_removed: true,
                    ..Reaped::default()
                }],
                Some(nix::sys::signal::Signal::SIGKILL as i32),
                false
            )
        );
    }

    /// A cancel of another host's job settles it at once only when its
    /// owner is dead by a rule no single clock's jump satisfies. This
    /// host's wall clock jumped an hour ahead (or the owner's an hour
    /// behind: the same stored beat) with the heartbeat renewed just
    /// before: not settled, nor when it was seen unchanged for less than
    /// `MISSED_RENEWALS` intervals; seen unchanged for longer while its
    /// date is older than the TTL: reclaimed `cancelled`; seen unchanged
    /// for the TTL, whatever its date (one dated ahead): reclaimed too.
    /// Each settled one says by which rule (`DeadBy`). Before, the date
    /// alone settled it, the live owner's job first.
    #[tokio::test]
    async fn a_cancel_settles_a_job_only_when_no_single_clock_says_its_owner_is_dead() {
        let there = Owner {
            host: "1".repeat(32),
            name: "there".into(),
        };
        let liveness = here();
        let real = OffsetDateTime::now_utc().replace_nanosecond(0).unwrap();
        let mono = tokio::time::Instant::now();
        let ago = |d: std::time::Duration| mono.checked_sub(d).unwrap();
        let missed = missed_renewals(&liveness);
        assert_eq!(missed, std::time::Duration::from_secs(20));
        let second = std::time::Duration::from_secs(1);
        // (the beat's date, this host's wall clock, how long ago this
        // server first saw that beat): whether the cancel settles it.
        let cases = [
            // The wall clock jumped an hour ahead; the beat is new to it.
            (real, real + time::Duration::hours(1), None, None),
            // Seen unchanged, but for less than two renewals.
            (
                real,
                real + time::Duration::hours(1),
                Some(missed - second),
                None,
            ),
            // Dated an hour ago, seen missing two renewals: dead.
            (
                real,
                real + time::Duration::hours(1),
                Some(missed + second),
                Some(DeadBy::MissedRenewals),
            ),
            // Dated ahead of this clock, seen unchanged for the TTL: dead.
            (
                real + time::Duration::hours(1),
                real,
                Some(liveness.ttl + second),
                Some(DeadBy::SeenUnchanged),
            ),
            // Dated ahead, seen unchanged for less than the TTL.
            (
                real + time::Duration::hours(1),
                real,
                Some(liveness.ttl - second),
                None,
            ),
        ];
        let mut got = Vec::new();
        for (n, (beat, wall, seen)) in cases.iter().map(|c| (c.0, c.1, c.2)).enumerate() {
            let store = crate::store::SqliteStore::open_in_memory().await.unwrap();
            let id = format!("job-{n}");
            store
                .insert_owned_job(&fixtures::job(&id, 0), "{}", &there, beat)
                .await
                .unwrap();
            store.request_cancel(&id, "asker", real).await.unwrap();
            let watched = Sightings::default();
            if let Some(seen) = seen {
                watched.seen_for(&id, beat, ago(seen));
            }
            let settled = reclaim_cancelled(&store, &liveness, &id, &watched, (wall, mono))
                .await
                .unwrap();
            let status = store.job(&id).await.unwrap().unwrap().status;
            got.push((settled.map(|(o, by)| (o.name, by)), status));
        }
        let want: Vec<_> = cases
            .iter()
            .map(|c| match c.3 {
                Some(by) => (Some(("there".to_owned(), by)), JobStatus::Cancelled),
                None => (None, JobStatus::Running),
            })
            .collect();
        assert_eq!(got, want);
    }

    /// A cancel of another host's job is judged while the same server's
    /// reclaim pass is held up in the store (its listing of running jobs
    /// waits until released): the cancel's judgement returns (its owner
    /// not found dead: a beat it sees for the first time), and the pass
    /// ends once released, reclaiming nothing. Before, the server held
    /// its sightings behind an async lock for the whole pass, and the
    /// cancel waited for every reclaim of it (here, for ever: the guard
    /// below fails it).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancel_is_judged_while_the_reclaim_pass_is_held_in_the_store() {
        let inner: crate::store::SharedStore =
            Arc::new(crate::store::SqliteStore::open_in_memory().await.unwrap());
        let there = Owner {
            host: "1".repeat(32),
            name: "there".into(),
        };
        let now = OffsetDateTime::now_utc();
        inner
            .insert_owned_job(&fixtures::job("job-1", 0), "{}", &there, now)
            .await
            .unwrap();
        inner.request_cancel("job-1", "asker", now).await.unwrap();
        let hold = Arc::new(crate::runner::tests::Hold::default());
        let store = Arc::new(crate::runner::tests::FailingStore {
            inner,
            fails: |_| false,
            linger: std::time::Duration::ZERO,
            reaps: None,
            settle_fails: std::sync::atomic::AtomicUsize::new(0),
            hold: Some(Arc::clone(&hold)),
        });
        let watched = Arc::new(Sightings::default());
        let pass = tokio::spawn({
            let (store, watched) = (Arc::clone(&store), Arc::clone(&watched));
            async move { reclaim_others(&*store, &here(), Watch::Periodic(&watched)).await }
        });
        hold.entered.notified().await;
        let liveness = here();
        let judged = reclaim_cancelled(
            &*store,
            &liveness,
            "job-1",
            &watched,
            (now, tokio::time::Instant::now()),
        );
        // A guard, not a measure: the judgement waits for nothing.
        let judged = tokio::time::timeout(std::time::Duration::from_secs(60), judged)
            .await
            .map(|r| r.map_err(|e| e.to_string()));
        assert_eq!(judged, Ok(Ok(None)));
        hold.release.notify_one();
        let (reclaimed, errors) = pass.await.unwrap();
        assert_eq!((reclaimed, errors), (Vec::new(), Vec::<String>::new()));
        let status = store.job("job-1").await.unwrap().unwrap().status;
        assert_eq!(status, JobStatus::Running);
    }

    /// A server's periodic pass whose wall clock jumped two hours ahead
    /// (or another host's clock two hours behind: the same stored beat)
    /// leaves another host's job alone until that very heartbeat stayed
    /// unchanged for the TTL on its monotonic clock; a beat renewed
    /// meanwhile starts the wait again. Before, the first pass reclaimed
    /// the live job as dead.
    #[tokio::test]
    async fn a_wall_clock_jump_does_not_reclaim_another_hosts_live_job() {
        let store = crate::store::SqliteStore::open_in_memory().await.unwrap();
        let there = Owner {
            host: "1".repeat(32),
            name: "there".into(),
        };
        // Whole seconds: the store keeps what it is given.
        let beat = (OffsetDateTime::now_utc() - time::Duration::hours(2))
            .replace_nanosecond(0)
            .unwrap();
        store
            .insert_owned_job(&fixtures::job("job-1", 0), "{}", &there, beat)
            .await
            .unwrap();
        let status = |store: crate::store::SqliteStore| async move {
            store.job("job-1").await.unwrap().unwrap().status
        };
        let liveness = here();
        let watched = Sightings::default();
        let (reclaimed, errors) =
            reclaim_others(&store, &liveness, Watch::Periodic(&watched)).await;
        assert_eq!((reclaimed, errors), (Vec::new(), Vec::<String>::new()));
        assert_eq!(status(store.clone()).await, JobStatus::Running);

        // Renewed (to a time still two hours behind): watched anew.
        let renewed = beat + time::Duration::seconds(10);
        assert!(store
            .heartbeat("job-1", &there.host, renewed)
            .await
            .unwrap());
        let long_ago = tokio::time::Instant::now()
            .checked_sub(liveness.ttl + std::time::Duration::from_secs(1))
            .unwrap();
        assert_eq!(
            watched.seen_for("job-1", beat, long_ago),
            std::time::Duration::ZERO
        );
        let (reclaimed, _) = reclaim_others(&store, &liveness, Watch::Periodic(&watched)).await;
        assert_eq!(reclaimed, Vec::new());
        assert_eq!(status(store.clone()).await, JobStatus::Running);

        // That beat, unchanged for longer than the TTL: reclaimed.
        let watched = Sightings::default();
        watched.seen_for("job-1", renewed, long_ago);
        let (reclaimed, _) = reclaim_others(&store, &liveness, Watch::Periodic(&watched)).await;
        assert_eq!(
            reclaimed.into_iter().map(|r| r.name).collect::<Vec<_>>(),
            vec!["job-1".to_string()]
        );
        assert_eq!(status(store.clone()).await, JobStatus::Failed);
    }

    /// A job reclaimed by a reaper whose wall clock went back since the
    /// job was created (or whose record another host dated ahead) ends
    /// with a zero duration, finished when it was created; before, its
    /// duration was left empty and it finished before it began. One
    /// reclaimed later ends with its whole duration.
    #[tokio::test]
    async fn a_reclaim_on_a_clock_that_went_back_records_a_zero_duration() {
        let there = Owner {
            host: "1".repeat(32),
            name: "there".into(),
        };
        let mut ended = Vec::new();
        for (id, after) in [
            ("job-1", -time::Duration::hours(1)),
            ("job-2", time::Duration::milliseconds(1500)),
        ] {
            let store = crate::store::SqliteStore::open_in_memory().await.unwrap();
            let job = fixtures::job(id, 0);
            let beat = job.created_at;
            store
                .insert_owned_job(&job, "{}", &there, beat)
                .await
                .unwrap();
            let now = job.created_at + after;
            let got = reclaim_job(&store, &here(), (id, None), (&there, beat), now)
                .await
                .unwrap();
            assert_eq!(got, Some((JobStatus::Failed, None)));
            let rec = store.job(id).await.unwrap().unwrap();
            ended.push((rec.duration_ms, rec.finished_at == Some(rec.created_at)));
        }
        assert_eq!(ended, vec![(Some(0), true), (Some(1500), false)]);
    }

    /// A dead job of this host created "in the future" (the clock went
    /// back since) is reaped with a zero duration, not an empty one.
    #[tokio::test]
    async fn a_dead_job_dated_ahead_is_reaped_with_a_zero_duration() {
        let root = tempfile::tempdir().unwrap();
        let paths = Paths::under(root.path());
        let store = crate::store::SqliteStore::open_in_memory().await.unwrap();
        let mut job = fixtures::job("job-1", 0);
        job.created_at = (OffsetDateTime::now_utc() + time::Duration::hours(1))
            .replace_nanosecond(0)
            .unwrap();
        store.insert_job(&job, "{}").await.unwrap();
        crashed(&paths.jobs, "job-1");
        reap_with(&paths, &store, &here(), &[root.path().join("cgroup")]).await;
        let rec = store.job("job-1").await.unwrap().unwrap();
        assert_eq!(
            (rec.status, rec.duration_ms, rec.finished_at),
            (JobStatus::Failed, Some(0), Some(job.created_at))
        );
    }

    /// A server's periodic pass reclaims another host's job whose
    /// heartbeat, dated a year ahead of this host's clock, stayed
    /// unchanged for the TTL on its monotonic clock; before, the date
    /// kept it "fresh" for a year. A pass without that clock (`paddock
    /// gc`) leaves it: another host's clock may run ahead.
    #[tokio::test]
    async fn a_heartbeat_dated_ahead_is_reclaimed_once_seen_unchanged() {
        let store = crate::store::SqliteStore::open_in_memory().await.unwrap();
        let there = Owner {
            host: "1".repeat(32),
            name: "there".into(),
        };
        let beat = (OffsetDateTime::now_utc() + time::Duration::days(365))
            .replace_nanosecond(0)
            .unwrap();
        store
            .insert_owned_job(&fixtures::job("job-1", 0), "{}", &there, beat)
            .await
            .unwrap();
        let liveness = here();
        let (reclaimed, errors) = reclaim_others(&store, &liveness, Watch::Twice).await;
        assert_eq!((reclaimed, errors), (Vec::new(), Vec::<String>::new()));
        let long_ago = tokio::time::Instant::now()
            .checked_sub(liveness.ttl + std::time::Duration::from_secs(1))
            .unwrap();
        let watched = Sightings::default();
        watched.seen_for("job-1", beat, long_ago);
        let (reclaimed, _) = reclaim_others(&store, &liveness, Watch::Periodic(&watched)).await;
        assert_eq!(
            reclaimed.into_iter().map(|r| r.name).collect::<Vec<_>>(),
            vec!["job-1".to_string()]
        );
        // Its reason says how it was found stale: not by its date (ahead
        // of this host's clock), by the pass's own clock. Before, it said
        // the heartbeat was more than the TTL before now.
        let rec = store.job("job-1").await.unwrap().unwrap();
        let reason = format!(
            "the paddock process running this job on host there (jobs directory {}) last \
             renewed its heartbeat at {}, a date not older than 60 s on host here's clock (the \
             hosts' clocks may differ), but its reaper saw that heartbeat unchanged for more \
             than 60 s: reclaimed as dead; its workspace and processes on that host were not \
             touched",
            "1".repeat(32),
            rfc3339(beat)
        );
        assert_eq!((rec.status, rec.reason), (JobStatus::Failed, Some(reason)));
    }

    /// The reason of a job reclaimed for a heartbeat older than the TTL
    /// on the reaper's wall clock says so, whole.
    #[tokio::test]
    async fn a_heartbeat_dated_before_the_ttl_is_reclaimed_saying_so() {
        let store = crate::store::SqliteStore::open_in_memory().await.unwrap();
        let there = Owner {
            host: "1".repeat(32),
            name: "there".into(),
        };
        let beat = (OffsetDateTime::now_utc() - time::Duration::minutes(5))
            .replace_nanosecond(0)
            .unwrap();
        store
            .insert_owned_job(&fixtures::job("job-1", 0), "{}", &there, beat)
            .await
            .unwrap();
        // A one-shot pass looks again after two renewals (here 200 ms).
        let liveness = Liveness {
            interval: std::time::Duration::from_millis(100),
            ..here()
        };
        let (reclaimed, errors) = reclaim_others(&store, &liveness, Watch::Twice).await;
        assert_eq!(
            (
                reclaimed.into_iter().map(|r| r.name).collect::<Vec<_>>(),
                errors
            ),
            (vec!["job-1".to_string()], Vec::<String>::new())
        );
        let rec = store.job("job-1").await.unwrap().unwrap();
        let reason = format!(
            "the paddock process running this job on host there (jobs directory {}) last \
             renewed its heartbeat at {}, more than 60 s before host here's reaper looked: \
             reclaimed as dead; its workspace and processes on that host were not touched",
            "1".repeat(32),
            rfc3339(beat)
        );
        assert_eq!((rec.status, rec.reason), (JobStatus::Failed, Some(reason)));
    }

    /// A one-shot pass (`paddock gc`, a run's, a server's at its start)
    /// leaves alone a live host's job whose heartbeat is dated an hour
    /// back (its clock an hour behind this host's) while that host renews
    /// it every interval: the pass looks again after two renewals and
    /// finds the heartbeat changed. Before, the date alone reclaimed it at
    /// once. Once the host stops renewing, the same pass reclaims it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_one_shot_pass_leaves_a_live_host_whose_clock_runs_behind() {
        let store: crate::store::SharedStore =
            Arc::new(crate::store::SqliteStore::open_in_memory().await.unwrap());
        let there = Owner {
            host: "1".repeat(32),
            name: "there".into(),
        };
        let behind = || OffsetDateTime::now_utc() - time::Duration::hours(1);
        store
            .insert_owned_job(&fixtures::job("job-1", 0), "{}", &there, behind())
            .await
            .unwrap();
        // The live host: a renewal every 200 ms, dated by its clock (the
        // pass's first look falls between two of them).
        let alive = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let renewals = tokio::spawn({
            let (store, host, alive) = (Arc::clone(&store), there.host.clone(), alive.clone());
            async move {
                while alive.load(std::sync::atomic::Ordering::SeqCst) {
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                    assert!(store.heartbeat("job-1", &host, behind()).await.unwrap());
                }
            }
        });
        // Two renewals are 1 s here: the pass looks again after 1 s.
        let liveness = Liveness {
            interval: std::time::Duration::from_millis(500),
            ..here()
        };
        let (reclaimed, errors) = reclaim_others(&*store, &liveness, Watch::Twice).await;
        assert_eq!((reclaimed, errors), (Vec::new(), Vec::<String>::new()));
        let status = store.job("job-1").await.unwrap().unwrap().status;
        assert_eq!(status, JobStatus::Running);

        alive.store(false, std::sync::atomic::Ordering::SeqCst);
        renewals.await.unwrap();
        let (reclaimed, errors) = reclaim_others(&*store, &liveness, Watch::Twice).await;
        assert_eq!(
            (
                reclaimed.into_iter().map(|r| r.name).collect::<Vec<_>>(),
                errors
            ),
            (vec!["job-1".to_string()], Vec::<String>::new())
        );
        let status = store.job("job-1").await.unwrap().unwrap().status;
        assert_eq!(status, JobStatus::Failed);
    }

    /// A claim of this host's queue is "made lately" only within the TTL
    /// of now either way: one dated a year ahead (the clock went back
    /// since) is not, so a claim whose server died before taking its
    /// lease is reaped, not left running for a year.
    #[test]
    fn a_claim_dated_far_ahead_is_not_made_lately() {
        let liveness = here();
        let now = OffsetDateTime::now_utc();
        let judged: Vec<bool> = [
            time::Duration::seconds(-5),
            time::Duration::seconds(5),
            time::Duration::seconds(-600),
            time::Duration::seconds(600),
            time::Duration::days(365),
        ]
        .into_iter()
        .map(|d| {
            claimed_lately(
                &RunningJob {
                    id: "job-1".into(),
                    owner: Some((liveness.owner.clone(), now + d)),
                    queued: Some(0),
                },
                &liveness,
            )
        })
        .collect();
        assert_eq!(judged, vec![true, true, false, false, false]);
    }

    /// A killed writer's pending lease file dated a year ahead (the clock
    /// went back since) is as stale as one a year old: removed, not kept
    /// until the clock catches up; one just written stays.
    #[test]
    fn a_pending_lease_file_dated_ahead_is_stale() {
        let root = tempfile::tempdir().unwrap();
        let leases = root.path().join(LEASES);
        std::fs::create_dir_all(&leases).unwrap();
        let ahead = leases.join("job-2.lock.newAbC123");
        for name in ["job-2.lock.newAbC123", "job-3.lock.newDeF456"] {
            std::fs::write(leases.join(name), "").unwrap();
        }
        File::options()
            .write(true)
            .open(&ahead)
            .unwrap()
            .set_modified(
                std::time::SystemTime::now() + std::time::Duration::from_secs(365 * 86_400),
            )
            .unwrap();
        let (removed, errors) = crate::workspace::lease::remove_stale_pending(&leases);
        assert_eq!((removed, errors), (vec![ahead], Vec::<String>::new()));
        assert_eq!(names(&leases), ["job-3.lock.newDeF456"]);
    }
}

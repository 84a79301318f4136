//! Provision: the job's first events (its status, the rung's fallback,
//! admission warnings, the host profile's accepted gaps), a host slot for
//! the profile's `max_concurrent_jobs` (waited for, cancellably), the
//! artifacts directory, the engine binary and the workspace checked out on
//! the job's lease: a [`Provisioned`] job, whose workspace goes however
//! the job ends ([`WorkspaceGuard`]).

use std::future::Future;
use std::path::PathBuf;

use paddock_protocol::{EventBody, JobStatus, Phase};

use super::emit::Emitter;
use super::engine_bin::resolve_engine;
use super::teardown::WorkspaceGuard;
use super::{warnings, Ended, Job, Stop};
use crate::engines::{self, EngineAdapter};
use crate::policy::{self, HostSemaphore, JobPolicy};
use crate::reaper::Lease;
use crate::secret::{Secret, SecretKind};
use crate::workspace::{PriorBranch, Workspace};

/// A job with its workspace, ready to assemble.
pub(super) struct Provisioned {
    pub adapter: Box<dyn EngineAdapter>,
    pub binary: PathBuf,
    /// `<artifacts>/<job id>`.
    pub artifacts: PathBuf,
    pub guard: WorkspaceGuard,
    /// The host slot, held to the job's end.
    pub _slot: Option<policy::Slot>,
    /// A local source's uncommitted changes, read while the job runs
    /// (`results::source::uncommitted`: a `git status` of the user's whole
    /// tree, which grows with it) and reported when it is published.
    pub source_changes: Option<SourceChanges>,
    /// When the host profile's `timeout_min` (a cap on the whole job,
    /// `clock.rs`) runs out, counted from once the host slot was held:
    /// the setup and the engine end by then. `None`: no profile sets it.
    pub cap_ends: Option<tokio::time::Instant>,
    /// The patch started at the engine's turn's end, taken at the job's
    /// conclusion if nothing changed since (`early_patch.rs`).
    pub early_patch: super::early_patch::EarlyPatch,
}

/// The background read of a local source's uncommitted changes; aborted
/// if the job ends before it is asked for.
#[derive(Debug)]
pub(super) struct SourceChanges(
    tokio::task::JoinHandle<Result<Vec<String>, crate::workspace::WorkspaceError>>,
);

impl SourceChanges {
    /// The changes, or `None` when they could not be read.
    pub async fn read(mut self) -> Option<Vec<String>> {
        (&mut self.0).await.ok().and_then(Result::ok)
    }
}

impl Drop for SourceChanges {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Provisioned {
    pub fn ws(&self) -> &Workspace {
        self.guard.ws()
    }
}

/// The job's first events: provisioning, why `auto` fell back, warnings.
pub(super) async fn begin(
    job: &Job,
    em: &mut Emitter,
    fallback: Option<String>,
) -> Result<(), Stop> {
    let spec = &job.spec;
    em.emit(EventBody::Status {
        phase: Phase::Provisioning,
        detail: Some(format!(
            "ticket {} attempt {}",
            spec.ticket.id, job.record.attempt
        )),
    })
    .await?;
    if let Some(message) = fallback {
        em.emit(EventBody::Policy {
            rule: "isolation".into(),
            message,
        })
        .await?;
    }
    for warning in warnings::admission_warnings(spec, job.policy.as_ref()) {
        em.error("paddock", warning, false).await?;
    }
    Ok(())
}

/// Provisions the job on `lease`: slot, artifacts, engine, workspace.
pub(super) async fn provision(
    job: &Job,
    em: &mut Emitter,
    lease: Lease,
    cancel: &mut (impl Future<Output = ()> + Unpin),
) -> Result<Provisioned, Stop> {
    let spec = &job.spec;
    let git_cpu = crate::workspace::host_git::job_git_cpu(job.policy.as_ref().map(|p| &p.profile));
    // Layer 3: degraded rules are reported; the host slot is held to the end.
    let slot = match &job.policy {
        Some(p) => hold_host_slot(job, p, em, cancel).await?,
        None => None,
    };
    // The whole job's clock (the host profile's `timeout_min`) starts once
    // it may run: provisioning is under it too.
    let began = tokio::time::Instant::now();
    let cap = job
        .policy
        .as_ref()
        .and_then(|p| Some((p.profile.id.clone(), p.profile.timeout_min?)));
    let cap_ends = cap
        .as_ref()
        .map(|(_, min)| began + std::time::Duration::from_secs(min.saturating_mul(60)));
    let artifacts = job.config.paths.artifacts.join(&em.job_id);
    if let Err(e) = tokio::fs::create_dir_all(&artifacts).await {
        let msg = format!(
            "cannot create the artifacts directory {}: {e}",
            artifacts.display()
        );
        return Err(Stop::End(Ended::failed(msg, false)));
    }
    // A rerun of an attempt whose pull request was merged or closed on
    // the forge would push nothing: refused before the workspace, the
    // engine or any model call (`results/ended_pull.rs`).
    let ended = crate::results::ended_pull::check(
        &*em.store,
        spec,
        &em.job_id,
        &artifacts,
        &job.config.paths.jobs,
    );
    match ended.await {
        crate::results::ended_pull::Check::Go => {}
        crate::results::ended_pull::Check::Unknown(warning) => {
            em.error("paddock", warning, false).await?;
        }
        crate::results::ended_pull::Check::Refused(why) => {
            em.error("paddock", why.clone(), true).await?;
            return Err(Stop::End(Ended::failed(why, true)));
        }
    }
    let adapter = engines::adapter(spec.engine.kind);
    // What of the job depends on the host that runs it: its engine's
    // binary, and on the `sandbox` rung the paths its view binds. Checked
    // at admission where the job runs on the host that admitted it, and
    // by a server when it claims a queued job (`Runner::runs_here`: one
    // that fails is passed over to the fleet's other servers, never
    // started). Here again only for what changed since (the binary
    // removed between the check and now): the job has begun here (its
    // provisioning events are written, its host slot held), and a job
    // handed back to the queue from here would carry a half-written
    // record, so it fails. The failure names this host, where a user
    // reading the record from anywhere looks for what to fix.
    let here = |e: &dyn std::fmt::Display| {
        let me = &job.config.liveness.owner;
        format!(
            "host {} (jobs directory {}) cannot run the job: {e}",
            me.name, me.host
        )
    };
    let binary = match resolve_engine(spec, job.config.host_path.as_deref(), &job.config.cwd) {
        Ok(b) => b,
        Err(e) => {
            let msg = here(&e);
            em.error("paddock", msg.clone(), true).await?;
            return Err(Stop::End(Ended::failed(msg, true)));
        }
    };
    if spec.isolation == paddock_protocol::Isolation::Sandbox {
        if let Err(e) =
            super::sandbox_view::check(spec, &em.job_id, job.policy.as_ref(), &job.config)
        {
            let msg = here(&e);
            em.error("paddock", msg.clone(), true).await?;
            return Err(Stop::End(Ended::failed(msg, true)));
        }
    }
    // The source's token (a URL source's `repository.token`) is redacted
    // wherever the job's text goes; the workspace reads it again and
    // reports a reference that does not resolve.
    if let Some(Ok(token)) = spec
        .repository
        .token
        .as_ref()
        .map(|r| Secret::resolve(SecretKind::RepositoryToken, r))
    {
        em.redactor.add_secret(&token);
    }
    // On the prior attempt's branch (resumed or forked): its bundle gives
    // the branch when the source lacks it (a URL source it was never
    // pushed to).
    let prior = match job
        .continuation
        .as_ref()
        .map(crate::session::Continuation::prior)
    {
        Some(crate::session::Prior {
            branch: Some(branch),
            branch_job: Some(job_id),
            ..
        }) if *branch == spec.repository.base_ref => {
            let bundle = |job_id: &str| {
                job.config
                    .paths
                    .artifacts
                    .join(job_id)
                    .join(crate::results::conclude::BUNDLE)
            };
            // The branches it is built on, whose bundles give what its
            // own (holding only its new objects) needs when the source
            // lost them too; a store that cannot say is no chain.
            let earlier =
                crate::session::branch_chain(&*em.store, job_id, &job.config.paths.artifacts)
                    .await
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(name, maker)| PriorBranch {
                        name,
                        bundle: bundle(&maker),
                        earlier: Vec::new(),
                        git_cpu,
                    })
                    .collect();
            Some(PriorBranch {
                name: branch.clone(),
                bundle: bundle(job_id),
                earlier,
                git_cpu,
            })
        }
        _ => None,
    };
    let branch = spec.branch();
    // Held while a provisioning stopped at the cap is cleaned up, so no
    // reaper takes the job for a dead one meanwhile.
    let held = lease.clone();
    let provisioning = Workspace::provision_leased(
        &job.config.paths.jobs,
        &em.job_id,
        lease,
        &spec.repository,
        &branch,
        crate::workspace::ProvisionAfter {
            prior: prior.as_ref(),
            git_cpu,
            // The base's checkout counts against the job's disk limit and
            // keeps the host's reserve free (`checkout_size.rs`).
            disk: crate::workspace::CheckoutBound {
                max_bytes: spec.limits.max_disk_bytes,
                reserve: job.config.disk_reserve,
            },
        },
    );
    // Past the cap, the provisioning is dropped: its host gits are killed
    // with their process groups, its locks and the lease let go.
    let provisioned = match cap_ends {
        Some(at) => tokio::time::timeout_at(at, provisioning).await.ok(),
        None => Some(provisioning.await),
    };
    let ws = match provisioned {
        Some(Ok(ws)) => ws.with_git_cpu(git_cpu),
        None => {
            // (Only a cap stops it: `cap` is set.)
            let (id, min) = cap.unwrap_or_default();
            let over = super::clock::ProvisioningOver {
                id,
                min,
                secs: super::clock::rounded(began.elapsed()),
            };
            em.emit(over.event()).await?;
            // What it made of the job's directory (this job's own: the
            // lease was taken for it), its overlay unmounted first (else
            // left whole to the reaper), removed without following a link.
            let root = job.config.paths.jobs.join(&em.job_id);
            let removed = tokio::task::spawn_blocking({
                let root = root.clone();
                move || {
                    crate::workspace::overlay::unmount_work(&root)?;
                    crate::workspace::remove::remove_tree(&root)
                }
            })
            .await
            .map_err(std::io::Error::other)
            .and_then(|r| r);
            match removed {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    let msg = format!("remove {}: {e}", root.display());
                    em.error("paddock", msg, false).await?;
                }
                _ => {}
            }
            drop(held);
            return Err(Stop::End(Ended::failed(over.reason(), false)));
        }
        Some(Err(e)) => {
            let msg = e.to_string();
            em.error("paddock", msg.clone(), true).await?;
            return Err(Stop::End(Ended::failed(msg, true)));
        }
    };
    em.redactor.add_job_dirs(&ws.work, &ws.root);
    // Which layout the job got and why (the overlay, or the clone and
    // what ruled the overlay out).
    em.emit(EventBody::Status {
        phase: Phase::Provisioning,
        detail: Some(ws.layout.to_string()),
    })
    .await?;
    for note in &ws.notes {
        em.error("paddock", note.clone(), false).await?;
    }
    // A pull request's base is read where the job's base is kept, now
    // that the source (a URL's mirror) is fetched: a base_ref that is no
    // branch there (a tag's short name, a detached HEAD) ends the job
    // before its engine starts, not at publishing once the work is done.
    // The base read now is kept for every later look at the pull
    // request (`results/pinned_base.rs`): a `HEAD` read again at the
    // publish names whatever branch the source is on by then.
    if crate::results::conclude::proposes(spec) {
        let jobs_root = ws.root.parent().unwrap_or(&ws.root).to_path_buf();
        match crate::results::conclude::pull_request_base(spec, &jobs_root).await {
            Ok(base) => {
                let kept = crate::results::pinned_base::write(&artifacts, &base);
                if let Err(why) = kept {
                    em.error("paddock", why, false).await?;
                }
            }
            Err(why) => {
                let mut guard = WorkspaceGuard::new(ws, job.keep);
                if let Err(e) = guard.remove_unless_kept() {
                    em.error("paddock", e.to_string(), false).await?;
                }
                em.error("paddock", why.clone(), true).await?;
                return Err(Stop::End(Ended::failed(why, true)));
            }
        }
    }
    // The branch a `HEAD`-based job starts from, for its closeout
    // (`results/start_branch.rs`): read now, as the base was; a detached
    // `HEAD` keeps none.
    if spec.repository.base_ref == "HEAD" {
        let jobs_root = ws.root.parent().unwrap_or(&ws.root).to_path_buf();
        if let Ok(branch) = crate::results::base_objects::head_branch(spec, &jobs_root).await {
            if let Err(why) = crate::results::start_branch::write(&artifacts, &branch) {
                em.error("paddock", why, false).await?;
            }
        }
    }
    // The job runs on the committed base: whether the source's tree has
    // changes beside it is read now, beside the engine, not after it.
    let source_changes = spec.repository.path.clone().map(|path| {
        SourceChanges(tokio::spawn(async move {
            crate::results::source::uncommitted(&path).await
        }))
    });
    Ok(Provisioned {
        adapter,
        binary,
        artifacts,
        guard: WorkspaceGuard::new(ws, job.keep),
        _slot: slot,
        source_changes,
        cap_ends,
        early_patch: Default::default(),
    })
}

/// Reports the profile's accepted gaps, then takes a host slot for
/// `max_concurrent_jobs`, waiting (cancellably) while none is free.
async fn hold_host_slot(
    job: &Job,
    p: &JobPolicy,
    em: &mut Emitter,
    cancel: &mut (impl Future<Output = ()> + Unpin),
) -> Result<Option<policy::Slot>, Stop> {
    for body in p.degraded_events() {
        em.emit(body).await?;
    }
    let Some(max) = p.profile.max_concurrent_jobs else {
        return Ok(None);
    };
    let id = &p.profile.id;
    let sem = HostSemaphore::new(&job.config.host_dir);
    let job_id = em.job_id.clone();
    let slot = match sem.try_acquire(id, max, &job_id) {
        Ok(None) => {
            em.emit(EventBody::Status {
                phase: Phase::Provisioning,
                detail: Some(format!(
                    "waiting for a host slot: profile `{id}` allows {max} concurrent job(s)"
                )),
            })
            .await?;
            tokio::select! {
                slot = sem.acquire(id, max, &job_id) => slot,
                () = cancel => {
                    return Err(Stop::End(Ended {
                        status: JobStatus::Cancelled,
                        reason: Some("cancelled".into()),
                        bad_input: false,
                    }));
                }
            }
        }
        Ok(Some(slot)) => Ok(slot),
        Err(e) => Err(e),
    };
    match slot {
        Ok(slot) => {
            em.emit(EventBody::Status {
                phase: Phase::Provisioning,
                detail: Some(format!(
                    "host slot {} of {max} (profile `{id}`)",
                    slot.index + 1
                )),
            })
            .await?;
            Ok(Some(slot))
        }
        Err(e) => {
            let msg = e.to_string();
            em.error("paddock", msg.clone(), true).await?;
            Err(Stop::End(Ended::failed(msg, false)))
        }
    }
}

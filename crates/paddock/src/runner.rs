//! The job lifecycle: admit (resolve the key, load the scenario, resolve
//! the isolation rung in rung.rs), provision the workspace, assemble the
//! context, start the job's broker, launch the engine with its adapter's
//! command and environment (launcher.rs: a plain child or the sandbox),
//! stream its JSONL into stored events while the broker's
//! ledger rows arrive, enforce the timeout and cancellation, conclude (the
//! patch artifact) and tear down. Every step's failure is recorded as an
//! `error` event on the job; nothing is left behind.

use std::ffi::OsString;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use paddock_protocol::{
    AgentEvent, CallStatus, EventBody, Isolation, JobRecord, JobSpec, JobStatus, KeyHeaderKind,
    ModelCall, Phase, ProviderKind, TokenUsage,
};
use std::os::unix::process::ExitStatusExt as _;
use time::OffsetDateTime;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::broker::upstream::{KeyHeader, ANTHROPIC_BASE, OPENAI_BASE};
use crate::broker::{self, BrokerConfig, PriceTable, Secret, Upstream};
use crate::context::{self, Prepared};
use crate::engines::EngineAdapter;
use crate::engines::{self, LaunchContext, Outcome};
use crate::launcher;
use crate::leftovers;
use crate::output::{self, ArtifactWriter, Line, LineSplitter, Tail, Utf8Decoder};
use crate::paths::Paths;
use crate::policy::{self, HostSemaphore, JobPolicy};
use crate::reaper::Lease;
use crate::redact::Redactor;
#[cfg(feature = "scripted")]
use crate::scripted::{RenderContext, Scenario, ScriptedServer};
use crate::store::{SharedStore, StoreError};
use crate::workspace::Workspace;
#[cfg(not(feature = "scripted"))]
use std::convert::Infallible as Scenario;

pub mod warnings;

/// How much of the engine's output is read at once.
const READ_CHUNK: usize = 64 << 10;
/// Free space below which a store failure is reported as a full disk.
const FULL_BELOW: u64 = 1 << 20;
/// How long a stopped engine's supervisor may take to kill its tree.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How long the rest of the engine's output is drained once it exited.
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// A timer that never fires in a job's lifetime (100 years).
const NEVER_SECS: u64 = 100 * 365 * 24 * 3600;
/// The end of the engine's stderr kept for the job's reason, in bytes.
const STDERR_TAIL: usize = 1000;
/// How much of a line that cannot be parsed its `error` event shows.
const LINE_HEAD: usize = 1000;
/// The longest reason a job record keeps (its end), in bytes.
const REASON_MAX: usize = 2000;
/// Why a call still in flight at the job's end is settled `interrupted`.
const INTERRUPTED_AT_END: &str =
    "the job ended before the call's answer did; its cost is estimated from what was metered";

/// Errors that stop a job before it exists (bad input) or that lose the
/// store under it.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{0}")]
    BadInput(String),
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("{step}: {message}")]
    Host { step: &'static str, message: String },
}

/// How `run` behaves on this host.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub paths: Paths,
    /// Keep the workspace after the job (for debugging).
    pub keep: bool,
    pub prices: Arc<PriceTable>,
    /// The host PATH used to look up engines and `node`.
    pub host_path: Option<OsString>,
    /// This host's shared state (the `max_concurrent_jobs` slots), common to
    /// every `paddock` process on the host.
    pub host_dir: PathBuf,
    /// The `paddock` executable, for engine hooks that call back into it.
    pub paddock_exe: Option<PathBuf>,
}

/// Receives the job's events and ledger rows as they happen.
pub trait Observer: Send {
    fn event(&mut self, event: &AgentEvent);
    fn model_call(&mut self, call: &ModelCall, spent_micros: i64);
}

/// The end of a run.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub record: JobRecord,
    /// The job failed because of its input (repository, engine binary).
    pub bad_input: bool,
    /// The workspace, when it was kept (`--keep`).
    pub kept_workspace: Option<PathBuf>,
}

/// Assigns dense sequence numbers, redacts, stores and fans out each event.
struct Emitter<'a> {
    job_id: String,
    seq: u64,
    store: &'a SharedStore,
    observer: &'a mut dyn Observer,
    /// Learns the job's directories and secrets as the job gets them.
    redactor: Redactor,
    /// The longest text an event field keeps (`limits.max_event_bytes`).
    max_event: usize,
    /// The first failure to store an event: the store is lost for the job.
    lost: Option<String>,
}

impl Emitter<'_> {
    /// Stores and shows an event. The first store failure is returned (so
    /// the job stops) and kept: later events are only shown, so the job
    /// can still conclude and tear down (a full disk).
    async fn emit(&mut self, body: EventBody) -> Result<(), StoreError> {
        let event = AgentEvent {
            job_id: self.job_id.clone(),
            seq: self.seq + 1,
            at: OffsetDateTime::now_utc(),
            body: output::cap_event(self.redactor.event(body), self.max_event),
        };
        if self.lost.is_none() {
            if let Err(e) = self.store.append_event(&event).await {
                self.lost = Some(chain(&e));
                self.observer.event(&event);
                return Err(e);
            }
            self.seq += 1;
        }
        self.observer.event(&event);
        Ok(())
    }

    async fn error(
        &mut self,
        source: &str,
        message: String,
        fatal: bool,
    ) -> Result<(), StoreError> {
        self.emit(EventBody::Error {
            message,
            source: Some(source.to_string()),
            fatal,
        })
        .await
    }
}

/// Runs one job to its end. `cancel` resolving cancels the job.
pub async fn run(
    spec: &JobSpec,
    store: &SharedStore,
    opts: &RunOptions,
    observer: &mut dyn Observer,
    cancel: impl Future<Output = ()>,
) -> Result<RunResult, RunError> {
    // Admission: everything that can be checked before the job exists.
    let key = match (spec.upstream.provider, &spec.upstream.key) {
        (ProviderKind::Scripted, _) | (_, None) => None,
        (_, Some(reference)) => {
            Some(Secret::resolve(reference).map_err(|e| RunError::BadInput(e.to_string()))?)
        }
    };
    // The cloud providers' credentials: found (and, without a key, a first
    // token fetched) before the job exists.
    let cloud = CloudAuth {
        vertex: match spec.upstream.provider {
            ProviderKind::Vertex => {
                Some(Arc::new(vertex_of(spec, key.as_ref()).await.map_err(
                    |e| RunError::BadInput(format!("upstream.key: {e}")),
                )?))
            }
            _ => None,
        },
        bedrock: match spec.upstream.provider {
            ProviderKind::Bedrock => {
                Some(Arc::new(bedrock_of(spec, key.as_ref()).await.map_err(
                    |e| RunError::BadInput(format!("upstream.key: {e}")),
                )?))
            }
            _ => None,
        },
        // The key is the app's client secret: it goes to the token endpoint
        // only, never upstream.
        entra: match (&spec.upstream.entra, &key) {
            (Some(e), Some(secret)) => Some(Arc::new(
                broker::entra::Entra::new(
                    &e.tenant_id,
                    &e.client_id,
                    secret.clone(),
                    e.authority.as_deref(),
                    e.scope.as_deref(),
                )
                .map_err(|e| RunError::BadInput(format!("upstream.entra: {e}")))?,
            )),
            _ => None,
        },
    };
    if opts.prices.price(&spec.engine.model).is_none() && !spec.upstream.allow_unpriced {
        return Err(RunError::BadInput(format!(
            "engine.model `{}` has no price in price table {}; Paddock refuses models it cannot meter (set upstream.allow_unpriced = true to run it unpriced)",
            spec.engine.model, opts.prices.version
        )));
    }
    let allowlist = broker::ModelAllowlist::any().with("job", &spec.engine.allowed_models);
    if let Err(list) = allowlist.check(&spec.engine.model) {
        return Err(RunError::BadInput(format!(
            "engine.model `{}` is not allowed by the {list} model allowlist (engine.allowed_models)",
            spec.engine.model
        )));
    }
    #[cfg(feature = "scripted")]
    let scenario = match (&spec.upstream.provider, &spec.upstream.scenario) {
        (ProviderKind::Scripted, Some(path)) => Some(Arc::new(
            Scenario::load(path).map_err(|e| RunError::BadInput(e.to_string()))?,
        )),
        _ => None,
    };
    #[cfg(not(feature = "scripted"))]
    let scenario: Option<Arc<Scenario>> = match spec.upstream.provider {
        ProviderKind::Scripted => return Err(RunError::BadInput(
            "upstream.provider `scripted`: this paddock was built without the `scripted` feature"
                .into(),
        )),
        _ => None,
    };
    let prepared = Prepared::load(spec).map_err(|e| RunError::BadInput(e.to_string()))?;
    let spec_json = serde_json::to_string(spec).map_err(|e| RunError::Host {
        step: "serialize job spec",
        message: e.to_string(),
    })?;
    // The rung: `auto` becomes `sandbox` where one starts, else `process`;
    // an explicit `sandbox` that cannot start refuses the job.
    let rung = crate::rung::for_host(spec.isolation)
        .await
        .map_err(|e| RunError::BadInput(e.to_string()))?;
    let on_rung;
    let spec = if rung.isolation == spec.isolation {
        spec
    } else {
        let mut s = spec.clone();
        s.isolation = rung.isolation;
        on_rung = s;
        &on_rung
    };
    // The host profile: resolved and admitted before the job exists (fail closed).
    let job_policy = match &spec.policy.profile {
        Some(name) => Some(
            JobPolicy::admit(name, spec, &**store)
                .await
                .map_err(|e| RunError::BadInput(e.to_string()))?,
        ),
        None => None,
    };
    let capped;
    let spec = match &job_policy {
        Some(p) if p.admission.timeout_secs != spec.limits.timeout_secs => {
            let mut s = spec.clone();
            s.limits.timeout_secs = p.admission.timeout_secs;
            capped = s;
            &capped
        }
        _ => spec,
    };
    tokio::pin!(cancel);

    let job_id = format!("job-{}", uuid::Uuid::now_v7().simple());
    let created = OffsetDateTime::now_utc();
    let started = Instant::now();
    let mut record = JobRecord {
        id: job_id.clone(),
        ticket_id: spec.ticket.id.clone(),
        project: spec.ticket.project.clone(),
        attempt: spec.attempt(),
        engine: spec.engine.kind.as_str().to_string(),
        model: spec.engine.model.clone(),
        isolation: spec.isolation.as_str().to_string(),
        status: JobStatus::Running,
        reason: None,
        branch: spec.branch(),
        base_ref: spec.repository.base_ref.clone(),
        patch_path: None,
        changed_files: Vec::new(),
        tokens: TokenUsage::default(),
        model_calls: 0,
        cost_micros: 0,
        engine_exit_code: None,
        created_at: created,
        finished_at: None,
        duration_ms: None,
    };
    // The job's lease before its record: a crash from here on (also while
    // waiting for a host slot) is found by the next start's reaper.
    let lease = Lease::take(&opts.paths.jobs, &job_id).map_err(|e| RunError::Host {
        step: "take the job's lease",
        message: format!("{}: {e}", opts.paths.jobs.join(".leases").display()),
    })?;
    let held = lease.clone();
    let result: Result<RunResult, RunError> = async {
        store.insert_job(&record, &spec_json).await?;
        let mut redactor = Redactor::new();
        if let Some(key) = &key {
            redactor.add_secret(key);
        }
        let mut em = Emitter {
            job_id: job_id.clone(),
            seq: 0,
            store,
            observer,
            redactor,
            max_event: usize::try_from(spec.limits.max_event_bytes).unwrap_or(usize::MAX),
            lost: None,
        };
        em.emit(EventBody::Status {
            phase: Phase::Provisioning,
            detail: Some(format!(
                "ticket {} attempt {}",
                spec.ticket.id, record.attempt
            )),
        })
        .await?;

        if let Some(message) = rung.fallback {
            em.emit(EventBody::Policy {
                rule: "isolation".into(),
                message,
            })
            .await?;
        }
        for warning in warnings::admission_warnings(spec, job_policy.as_ref()) {
            em.error("paddock", warning, false).await?;
        }

        // Layer 3: degraded rules are reported; the host slot is held to the end.
        let mut _slot = None;
        if let Some(p) = &job_policy {
            match hold_host_slot(p, &opts.host_dir, &mut em, &mut cancel).await? {
                SlotWait::Held(slot) => _slot = slot,
                SlotWait::Cancelled => {
                    let reason = Some("cancelled".to_string());
                    return finish(
                        &mut em,
                        record,
                        started,
                        JobStatus::Cancelled,
                        reason,
                        false,
                    )
                    .await;
                }
                SlotWait::Failed(msg) => {
                    return finish(
                        &mut em,
                        record,
                        started,
                        JobStatus::Failed,
                        Some(msg),
                        false,
                    )
                    .await;
                }
            }
        }

        let artifacts = opts.paths.artifacts.join(&job_id);
        if let Err(e) = tokio::fs::create_dir_all(&artifacts).await {
            let msg = format!(
                "cannot create the artifacts directory {}: {e}",
                artifacts.display()
            );
            return finish(
                &mut em,
                record,
                started,
                JobStatus::Failed,
                Some(msg),
                false,
            )
            .await;
        }

        let adapter = engines::adapter(spec.engine.kind);
        let binary = match resolve_engine(spec, opts.host_path.as_deref()) {
            Ok(b) => b,
            Err(msg) => {
                em.error("paddock", msg.clone(), true).await?;
                return finish(&mut em, record, started, JobStatus::Failed, Some(msg), true).await;
            }
        };

        let ws = match Workspace::provision_leased(
            &opts.paths.jobs,
            &job_id,
            lease,
            &spec.repository,
            &spec.branch(),
        )
        .await
        {
            Ok(ws) => ws,
            Err(e) => {
                let msg = e.to_string();
                em.error("paddock", msg.clone(), true).await?;
                return finish(&mut em, record, started, JobStatus::Failed, Some(msg), true).await;
            }
        };

        em.redactor.add_job_dirs(&ws.work, &ws.root);

        // Assemble: rendered and checked in full before any of it is written; a
        // collision with the repository's files is bad input. The policy part
        // hands its HostProfile in as plain data (layer 1, the advisory).
        let path_env = engine_path(&binary, opts.host_path.as_deref());
        // Another version than the pinned one may work: a warning, not a failure.
        if let Some(w) = engines::version::mismatch(&adapter.install(), &binary, &path_env).await {
            em.error(
                "paddock",
                format!("engine {}: {w}", spec.engine.kind),
                false,
            )
            .await?;
        }
        let policy = job_policy.as_ref().map(|p| p.context()).unwrap_or_default();
        let assembled = match context::assemble(&prepared, spec, &ws, policy, &path_env).await {
            Ok(a) => a,
            Err(e) => {
                let msg = e.to_string();
                em.error("paddock", msg.clone(), true).await?;
                if !opts.keep {
                    if let Err(e) = ws.remove() {
                        em.error("paddock", e.to_string(), false).await?;
                    }
                }
                return finish(&mut em, record, started, JobStatus::Failed, Some(msg), true).await;
            }
        };

        let outcome = launch_and_stream(
            spec,
            &ws,
            assembled.prompt,
            path_env,
            adapter.as_ref(),
            &binary,
            key,
            cloud,
            scenario,
            &artifacts,
            opts,
            job_policy.as_ref(),
            &mut em,
            cancel,
        )
        .await;

        // Conclude: the patch artifact, whatever happened.
        em.emit(EventBody::Status {
            phase: Phase::Concluding,
            detail: None,
        })
        .await?;
        let mut status_reason = match outcome {
            Ok(Launched {
                status,
                reason,
                exit_code,
                calls,
            }) => {
                record.engine_exit_code = exit_code;
                for c in &calls {
                    record.tokens.add(&c.tokens);
                    record.cost_micros += c.cost_micros;
                }
                record.model_calls = calls.len() as u64;
                (status, reason)
            }
            // The store failed under the job (a full disk): the job ends
            // here, concludes and tears down as far as the store allows.
            Err(LaunchFailure::Store(e)) => {
                let e = chain(&e);
                em.lost.get_or_insert_with(|| e.clone());
                (
                    JobStatus::Failed,
                    Some(format!("the store failed under the job: {e}")),
                )
            }
            Err(LaunchFailure::Step(msg)) => {
                em.error("paddock", msg.clone(), true).await?;
                (JobStatus::Failed, Some(msg))
            }
        };
        match ws.patch().await {
            Ok(patch) => {
                for warning in &patch.warnings {
                    em.error("paddock", warning.clone(), false).await?;
                }
                let path = artifacts.join("patch.diff");
                match tokio::fs::write(&path, patch.diff.as_bytes()).await {
                    Ok(()) => {
                        record.patch_path = Some(path.display().to_string());
                        record.changed_files = patch.changed_files.clone();
                        em.emit(EventBody::ArtifactSummary {
                            patch_path: path.display().to_string(),
                            changed_files: patch.changed_files,
                            patch_bytes: patch.diff.len() as u64,
                            interrupted: false,
                        })
                        .await?;
                    }
                    Err(e) => {
                        let msg = format!("cannot save the patch to {}: {e}", path.display());
                        em.error("paddock", msg.clone(), true).await?;
                        status_reason = (JobStatus::Failed, Some(msg));
                    }
                }
            }
            Err(e) => {
                let msg = format!("cannot compute the patch: {e}");
                em.error("paddock", msg.clone(), true).await?;
                status_reason = (JobStatus::Failed, Some(msg));
            }
        }
        if opts.keep {
            // A reaper leaves a kept directory alone (should this process
            // die before the record is final); then the lease goes.
            if let Err(e) = ws.lease.keep() {
                em.error(
                    "paddock",
                    format!(
                        "workspace {}: cannot mark its lease kept: {e}",
                        ws.root.display()
                    ),
                    false,
                )
                .await?;
            }
            em.emit(EventBody::Status {
                phase: Phase::Concluding,
                detail: Some(format!("workspace kept at {}", ws.root.display())),
            })
            .await?;
        } else if let Err(e) = ws.remove() {
            em.error("paddock", e.to_string(), false).await?;
        }
        let (status, reason) = status_reason;
        let mut result = finish(&mut em, record, started, status, reason, false).await?;
        result.kept_workspace = opts.keep.then(|| ws.root.clone());
        // Events were lost: the record is not whole, the reaper finishes it.
        if let Some(lost) = em.lost.take() {
            return Err(RunError::Host {
                step: "write the job to the store",
                message: format!(
                    "{}: {lost}{}",
                    opts.paths.db.display(),
                    full_disk_note(&opts.paths.db)
                ),
            });
        }
        Ok(result)
    }
    .await;
    let result = result.map_err(|e| match e {
        RunError::Store(e) => RunError::Host {
            step: "write the job to the store",
            message: format!(
                "{}: {}{}",
                opts.paths.db.display(),
                chain(&e),
                full_disk_note(&opts.paths.db)
            ),
        },
        other => other,
    });
    // Only a job whose record is final gives its lease up; any other end
    // (the store lost, an unwinding process) leaves it for the reaper.
    if result.is_ok() {
        if let Err(e) = held.release() {
            tracing::warn!("job {job_id}: cannot delete its lease file: {e}");
        }
    }
    result
}

/// `; the file system of DIR is full (ENOSPC)` when the directory of `path`
/// has (almost) no space left, else nothing: SQLite says only "database or
/// disk is full".
fn full_disk_note(path: &Path) -> String {
    let dir = path.parent().unwrap_or(path);
    match nix::sys::statvfs::statvfs(dir) {
        Ok(fs) if fs.blocks_available().saturating_mul(fs.fragment_size()) < FULL_BELOW => {
            format!(
                "; the file system of {} is full (ENOSPC: no space left on device)",
                dir.display()
            )
        }
        _ => String::new(),
    }
}

/// An error with its sources, `a: b: c`.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

enum SlotWait {
    /// The slot (none when the profile sets no `max_concurrent_jobs`).
    Held(Option<policy::Slot>),
    Cancelled,
    Failed(String),
}

/// Reports the profile's accepted gaps, then takes a host slot for
/// `max_concurrent_jobs`, waiting (cancellably) while none is free.
async fn hold_host_slot(
    p: &JobPolicy,
    host_dir: &Path,
    em: &mut Emitter<'_>,
    cancel: &mut (impl Future<Output = ()> + Unpin),
) -> Result<SlotWait, StoreError> {
    for body in p.degraded_events() {
        em.emit(body).await?;
    }
    let Some(max) = p.profile.max_concurrent_jobs else {
        return Ok(SlotWait::Held(None));
    };
    let id = &p.profile.id;
    let sem = HostSemaphore::new(host_dir);
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
                () = cancel => return Ok(SlotWait::Cancelled),
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
            Ok(SlotWait::Held(Some(slot)))
        }
        Err(e) => {
            let msg = e.to_string();
            em.error("paddock", msg.clone(), true).await?;
            Ok(SlotWait::Failed(msg))
        }
    }
}

/// Records the final status event and job row.
async fn finish(
    em: &mut Emitter<'_>,
    mut record: JobRecord,
    started: Instant,
    status: JobStatus,
    reason: Option<String>,
    bad_input: bool,
) -> Result<RunResult, RunError> {
    let reason = reason.map(|r| output::keep_end(&em.redactor.text(&r), REASON_MAX));
    record.status = status;
    record.reason = reason.clone();
    record.finished_at = Some(OffsetDateTime::now_utc());
    record.duration_ms = Some(started.elapsed().as_millis() as u64);
    let phase = match status {
        JobStatus::Queued | JobStatus::Running | JobStatus::Bounced | JobStatus::Failed => {
            Phase::Failed
        }
        JobStatus::Done => Phase::Done,
        JobStatus::Held => Phase::Held,
        JobStatus::TimedOut => Phase::TimedOut,
        JobStatus::Cancelled => Phase::Cancelled,
    };
    em.emit(EventBody::Status {
        phase,
        detail: reason,
    })
    .await?;
    em.store.finish_job(&record, JobStatus::Running).await?;
    Ok(RunResult {
        record,
        bad_input,
        kept_workspace: None,
    })
}

struct Launched {
    status: JobStatus,
    reason: Option<String>,
    exit_code: Option<i32>,
    calls: Vec<ModelCall>,
}

enum LaunchFailure {
    Store(StoreError),
    Step(String),
}

impl From<StoreError> for LaunchFailure {
    fn from(e: StoreError) -> Self {
        LaunchFailure::Store(e)
    }
}

fn step(what: &str, e: impl std::fmt::Display) -> LaunchFailure {
    LaunchFailure::Step(format!("{what}: {e}"))
}

#[allow(clippy::too_many_arguments)]
async fn launch_and_stream(
    spec: &JobSpec,
    ws: &Workspace,
    prompt: String,
    path_env: String,
    adapter: &dyn EngineAdapter,
    binary: &Path,
    key: Option<Secret>,
    cloud: CloudAuth,
    scenario: Option<Arc<Scenario>>,
    artifacts: &Path,
    opts: &RunOptions,
    job_policy: Option<&JobPolicy>,
    em: &mut Emitter<'_>,
    cancel: impl Future<Output = ()>,
) -> Result<Launched, LaunchFailure> {
    // The upstream: a real provider, or the scenario served on loopback.
    #[cfg(feature = "scripted")]
    let mut _scripted = None;
    let CloudAuth {
        vertex,
        bedrock,
        entra,
    } = cloud;
    let upstream = match spec.upstream.provider {
        // The broker signs each call with SigV4; the base has no `/v1`.
        ProviderKind::Bedrock => Upstream {
            provider: "bedrock".into(),
            base: spec.upstream.base_url.clone().unwrap_or_else(|| {
                format!(
                    "https://bedrock-runtime.{}.amazonaws.com",
                    spec.upstream
                        .bedrock_region
                        .as_deref()
                        .unwrap_or("us-east-1")
                )
            }),
            key: None,
            key_header: KeyHeader::ByApi,
        },
        // The broker mints the token per call; the base keeps `/v1`.
        ProviderKind::Vertex => Upstream {
            provider: "vertex".into(),
            base: spec.upstream.base_url.clone().unwrap_or_else(|| {
                format!(
                    "https://{}-aiplatform.googleapis.com/v1",
                    spec.upstream.vertex_region.as_deref().unwrap_or("us-east5")
                )
            }),
            key: None,
            key_header: KeyHeader::ByApi,
        },
        #[cfg(not(feature = "scripted"))]
        ProviderKind::Scripted => {
            let _ = scenario;
            return Err(LaunchFailure::Step(
                "the scripted upstream is not built in (cargo feature `scripted`)".into(),
            ));
        }
        #[cfg(feature = "scripted")]
        ProviderKind::Scripted => {
            let Some(scenario) = scenario else {
                return Err(LaunchFailure::Step(
                    "the scripted upstream has no scenario".into(),
                ));
            };
            let listener = TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| step("bind the scripted upstream", e))?;
            let server = ScriptedServer::start(
                listener,
                scenario,
                RenderContext {
                    workdir: ws.work.clone(),
                },
            )
            .map_err(|e| step("start the scripted upstream", e))?;
            let up = Upstream {
                provider: "scripted".into(),
                base: server.base.clone(),
                key: None,
                key_header: KeyHeader::ByApi,
            };
            _scripted = Some(server);
            up
        }
        ProviderKind::Openai => Upstream {
            provider: "openai".into(),
            base: spec
                .upstream
                .base_url
                .clone()
                .unwrap_or_else(|| OPENAI_BASE.into()),
            key: if entra.is_some() { None } else { key },
            key_header: match spec.upstream.key_header {
                Some(KeyHeaderKind::ApiKey) => KeyHeader::ApiKey,
                Some(KeyHeaderKind::Bearer) | None => KeyHeader::ByApi,
            },
        },
        ProviderKind::Anthropic => Upstream {
            provider: "anthropic".into(),
            base: match &spec.upstream.base_url {
                // ANTHROPIC_BASE_URL convention: without `/v1`.
                Some(b) if !b.trim_end_matches('/').ends_with("/v1") => {
                    format!("{}/v1", b.trim_end_matches('/'))
                }
                Some(b) => b.clone(),
                None => ANTHROPIC_BASE.into(),
            },
            key,
            key_header: KeyHeader::ByApi,
        },
    };
    // Admission: a job whose ceiling is already spent is held, not run.
    let ceilings =
        broker::budget::ceilings(spec, &em.job_id, &**em.store, OffsetDateTime::now_utc()).await?;
    if let Some(c) = broker::budget::exhausted_before_start(&ceilings) {
        let message = c.exhausted_message(0);
        em.emit(EventBody::Policy {
            rule: "budget".into(),
            message: message.clone(),
        })
        .await?;
        return Ok(Launched {
            status: JobStatus::Held,
            reason: Some(message),
            exit_code: None,
            calls: Vec::new(),
        });
    }
    let broker_config = BrokerConfig {
        job_id: em.job_id.clone(),
        attempt: spec.attempt(),
        upstream,
        prices: opts.prices.clone(),
        ceilings,
        allowlist: match job_policy {
            Some(p) => broker::ModelAllowlist::any()
                .with("job", &spec.engine.allowed_models)
                .with(
                    &format!("host profile {}", p.profile.id),
                    &p.profile.allowed_models,
                ),
            None => broker::ModelAllowlist::any().with("job", &spec.engine.allowed_models),
        },
        allow_unpriced: spec.upstream.allow_unpriced,
        vertex: vertex.clone(),
        bedrock: bedrock.clone(),
        entra,
        retry: broker::RetryPolicy {
            spec: spec.broker.retry,
            deadline: Some(
                std::time::Instant::now()
                    + std::time::Duration::from_secs(spec.limits.timeout_secs),
            ),
        },
        max_upstream_event_bytes: usize::try_from(spec.broker.max_upstream_event_bytes)
            .unwrap_or(usize::MAX),
        ledger: Arc::new(broker::ledger::StoreLedger {
            store: em.store.clone(),
            redactor: em.redactor.clone(),
        }),
    };
    let (mut broker, sandbox) = match spec.isolation {
        // `auto` was resolved when the job was admitted.
        Isolation::Process | Isolation::Auto => {
            let listener = TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| step("bind the broker", e))?;
            let broker =
                broker::start(listener, broker_config).map_err(|e| step("start the broker", e))?;
            (broker, None)
        }
        Isolation::Sandbox => {
            // The job's own socket: only its sandbox's forwarder reaches it.
            let socket = ws.meta.join("broker.sock");
            let listener = broker::bind_unix(&socket)
                .map_err(|e| step(&format!("bind the broker socket {}", socket.display()), e))?;
            let url = format!("http://127.0.0.1:{}", launcher::SANDBOX_BROKER_PORT);
            let broker = broker::start_unix(listener, url, broker_config)
                .map_err(|e| step("start the broker", e))?;
            let paths = launcher::SandboxPaths {
                job_id: em.job_id.clone(),
                work: ws.work.clone(),
                home: ws.home.clone(),
                tmp: ws.tmp.clone(),
                broker_socket: socket,
                timeout_secs: spec.limits.timeout_secs,
                extra_ro: Vec::new(),
                extra_rw: Vec::new(),
                limits: launcher::default_limits(),
                allow_without_cgroups: true,
                hidden: Vec::new(),
            };
            (broker, Some(paths))
        }
    };
    em.redactor.add_secret(&broker.token);
    // Other jobs of the same ticket or project, settling calls while this
    // one runs; followed until this function returns.
    let _shared_spend = broker::shared_spend::follow(
        broker.budget(),
        em.store.clone(),
        broker::shared_spend::Shared {
            job_id: em.job_id.clone(),
            project: spec.ticket.project.clone(),
            ticket_id: spec.ticket.id.clone(),
        },
        broker::shared_spend::EVERY,
    );

    let ctx = LaunchContext {
        binary: binary.to_path_buf(),
        model: spec.engine.model.clone(),
        reasoning_effort: spec.engine.reasoning_effort.map(|e| e.as_str().to_string()),
        workdir: ws.work.clone(),
        home: ws.home.clone(),
        tmp: ws.tmp.clone(),
        broker_url: broker.url.clone(),
        job_token: broker.token.expose().to_string(),
        prompt,
        path_env,
        policy: match job_policy {
            Some(p) => p
                .engine_policy(adapter.kind(), opts.paddock_exe.as_deref(), &ws.meta)
                .map_err(|e| step("prepare the host profile's engine rules", e))?,
            None => None,
        },
        vertex: vertex
            .as_ref()
            .map(|v| (v.project.clone(), v.region.clone())),
        bedrock: bedrock.as_ref().map(|b| b.region.clone()),
    };
    for file in adapter.prepare(&ctx) {
        if let Some(parent) = file.path.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| step(&format!("create {}", parent.display()), e))?;
        }
        tokio::fs::write(&file.path, file.contents.as_bytes())
            .await
            .map_err(|e| step(&format!("write {}", file.path.display()), e))?;
    }
    let cmd = adapter.command(&ctx);
    em.emit(EventBody::Status {
        phase: Phase::Launching,
        detail: Some(format!("{} {}", adapter.kind(), cmd.program.display())),
    })
    .await?;
    let mut sandbox = sandbox;
    if let (Some(paths), Some(p)) = (sandbox.as_mut(), job_policy) {
        launcher::apply_profile(
            paths,
            p,
            &spec.policy.accept_degraded,
            opts.paddock_exe.as_deref(),
            &ws.meta,
            cmd.env
                .iter()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| v.as_str()),
        )
        .map_err(|e| step("prepare the sandbox for the host profile", e))?;
    }
    let mut child = launcher::command(spec.isolation, &cmd, sandbox.as_ref())
        .map_err(|e| step("prepare the launch", e))?
        .spawn()
        .map_err(|e| step(&format!("start {}", cmd.program.display()), e))?;
    let pgid = child.id().map(|pid| nix::unistd::Pid::from_raw(pid as i32));
    // Whatever ends this function early stops the engine and its tree.
    let mut stop_on_drop = launcher::StopOnDrop {
        isolation: spec.isolation,
        pid: child.id(),
    };
    // The prompt on stdin, then end of file; an engine that exits before
    // reading it all only makes this write fail.
    if let (Some(mut stdin), Some(text)) = (child.stdin.take(), cmd.stdin.clone()) {
        tokio::spawn(async move {
            let _ = stdin.write_all(text.as_bytes()).await;
            let _ = stdin.shutdown().await;
        });
    }
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(LaunchFailure::Step(
            "the engine's stdout/stderr were not captured".into(),
        ));
    };
    let stderr_artifact =
        ArtifactWriter::create(artifacts.join("engine.stderr"), em.redactor.clone()).await;
    let stderr_task = tokio::spawn(save_stderr(stderr, stderr_artifact));
    let mut raw = ArtifactWriter::create(artifacts.join("engine.jsonl"), em.redactor.clone()).await;

    let kind = adapter.kind().as_str();
    let max_line = usize::try_from(spec.limits.max_line_bytes).unwrap_or(usize::MAX);
    let mut parser = adapter.parser(&ws.work);
    let mut denials = job_policy.map(|p| p.tail(&ws.meta));
    let mut stdout = stdout;
    let mut buf = vec![0u8; READ_CHUNK];
    let mut lines = LineSplitter::new(max_line);
    let deadline = tokio::time::sleep(Duration::from_secs(spec.limits.timeout_secs));
    tokio::pin!(deadline);
    tokio::pin!(cancel);
    // Armed when the engine exits: what is left of its output is drained
    // for this long at most.
    let grace = tokio::time::sleep(Duration::from_secs(NEVER_SECS));
    tokio::pin!(grace);
    let mut ended: Option<JobStatus> = None;
    let mut exited: Option<std::process::ExitStatus> = None;
    let mut stdout_open = true;
    let mut held_reason: Option<String> = None;
    // Until the engine has exited and its stdout is drained. Only the
    // engine's exit ends the timeout and cancellation: whatever it prints
    // (or stops printing), neither stops holding.
    while stdout_open || exited.is_none() {
        tokio::select! {
            n = stdout.read(&mut buf), if stdout_open => match n {
                Ok(0) => stdout_open = false,
                Ok(n) => {
                    raw.write(&buf[..n]).await;
                    for line in lines.push(&buf[..n]) {
                        let Some(line) = emit_line(em, parser.as_mut(), line, max_line, kind).await? else {
                            continue;
                        };
                        if let (Some(p), Some(tail)) = (job_policy, denials.as_mut()) {
                            for denial in p.new_denials(tail, adapter.stream_denials(&line)) {
                                em.emit(p.denial_event(&denial)).await?;
                            }
                        }
                    }
                }
                Err(e) => {
                    em.error(kind, format!("cannot read the engine's output: {e}"), false).await?;
                    stdout_open = false;
                }
            },
            status = child.wait(), if exited.is_none() => {
                let status = status.map_err(|e| step("wait for the engine", e))?;
                exited = Some(status);
                stop_on_drop.pid = None;
                // What the engine left running goes with it.
                kill_group(pgid);
                grace.as_mut().reset(tokio::time::Instant::now() + DRAIN_GRACE);
            }
            () = &mut grace, if exited.is_some() => break,
            Some(call) = broker.calls.recv() => {
                record_call(em, call, broker.spent_micros()).await?;
            }
            Some(notice) = broker.policy.recv() => {
                held_reason = Some(notice.message.clone());
                em.emit(EventBody::Policy { rule: notice.rule, message: notice.message }).await?;
            }
            () = &mut deadline, if exited.is_none() => {
                launcher::stop(spec.isolation, child.id());
                ended = Some(JobStatus::TimedOut);
                em.emit(match job_policy.and_then(|p| p.timeout_event(spec.limits.timeout_secs)) {
                    Some(event) => event,
                    None => EventBody::Policy {
                        rule: "timeout".into(),
                        message: format!("the job ran past its {} s limit and was killed", spec.limits.timeout_secs),
                    },
                }).await?;
                break;
            }
            () = &mut cancel, if exited.is_none() => {
                launcher::stop(spec.isolation, child.id());
                ended = Some(JobStatus::Cancelled);
                break;
            }
        }
    }
    if !stdout_open {
        if let Some(line) = lines.finish() {
            let line = emit_line(em, parser.as_mut(), line, max_line, kind).await?;
            if let (Some(p), Some(tail), Some(line)) = (job_policy, denials.as_mut(), line) {
                for denial in p.new_denials(tail, adapter.stream_denials(&line)) {
                    em.emit(p.denial_event(&denial)).await?;
                }
            }
        }
    }
    let exit = match exited {
        Some(s) => s,
        None => {
            // Stopped: the supervisor kills the tree and exits; one that
            // does not in time is killed with its group.
            let status = match tokio::time::timeout(STOP_GRACE, child.wait()).await {
                Ok(status) => status,
                Err(_) => {
                    kill_group(pgid);
                    let _ = child.start_kill();
                    child.wait().await
                }
            };
            status.map_err(|e| step("wait for the engine", e))?
        }
    };
    stop_on_drop.pid = None;
    // No process of the job outlives it: its group, then anything still
    // pointing into the job's directory (the check that nothing is left).
    kill_group(pgid);
    // A stopped sandbox helper (killed with its group) could not remove
    // the job's cgroups: they go here.
    let (left, cgroup_errors) = tokio::task::spawn_blocking({
        let root = ws.root.clone();
        let job_id = em.job_id.clone();
        move || {
            let left = leftovers::kill_processes(&root);
            let mut errors = Vec::new();
            for dir in leftovers::cgroups(Path::new(crate::reaper::CGROUP_ROOT), &job_id) {
                if let Err(e) = leftovers::remove_cgroup(&dir) {
                    errors.push(format!(
                        "cannot remove the job's cgroup {}: {e}",
                        dir.display()
                    ));
                }
            }
            (left, errors)
        }
    })
    .await
    .unwrap_or_default();
    for e in cgroup_errors {
        em.error("paddock", e, false).await?;
    }
    if left > 0 {
        em.error(
            "paddock",
            format!(
                "{left} process(es) of the job were still running after its engine ended; killed"
            ),
            false,
        )
        .await?;
    }
    if let Some(e) = raw.finish().await {
        em.error("paddock", e, false).await?;
    }
    let (stderr_tail, stderr_error) = tokio::time::timeout(DRAIN_GRACE, stderr_task)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    if let Some(e) = stderr_error {
        em.error("paddock", e, false).await?;
    }
    while let Ok(notice) = broker.policy.try_recv() {
        held_reason = Some(notice.message.clone());
        em.emit(EventBody::Policy {
            rule: notice.rule,
            message: notice.message,
        })
        .await?;
    }
    // Calls still in flight are waited for (bounded), never dropped: what
    // is not settled by then is settled `interrupted` on the ledger.
    let settled = broker.settled(broker::ledger::LEDGER_WAIT).await;
    while let Ok(call) = broker.calls.try_recv() {
        record_call(em, call, broker.spent_micros()).await?;
    }
    let held = broker.held();
    let served_refused = broker.served_refused();
    drop(broker);
    if !settled {
        let n = em
            .store
            .interrupt_model_calls(&em.job_id, INTERRUPTED_AT_END)
            .await?;
        if n > 0 {
            em.error(
                "broker",
                format!("{n} model call(s) were still in flight when the job ended: {INTERRUPTED_AT_END}"),
                false,
            )
            .await?;
        }
    }
    let calls = em.store.model_calls(&em.job_id).await?;
    // What the engine refused, read from what it left: its own refusals
    // are events with or without a profile; the profile's go through it.
    let found = adapter.denials_after(&ws.home);
    for event in found.iter().filter_map(|d| d.refusal_event(adapter.kind())) {
        em.emit(event).await?;
    }
    if let (Some(p), Some(tail)) = (job_policy, denials.as_mut()) {
        for denial in p.new_denials(tail, found) {
            em.emit(p.denial_event(&denial)).await?;
        }
    }
    let exit_code = exit.code();
    let (status, reason) = match ended {
        Some(JobStatus::TimedOut) => (
            JobStatus::TimedOut,
            Some(format!("timed out after {} s", spec.limits.timeout_secs)),
        ),
        Some(other) => (other, Some("cancelled".to_string())),
        None if held => (
            JobStatus::Held,
            Some(held_reason.unwrap_or_else(|| "the job's budget is spent".to_string())),
        ),
        None => {
            let summary = parser.summary();
            match adapter.finish(exit_code, &summary) {
                // Whatever the engine made of it, an answer from a model
                // outside the allowlist reached the broker: not done.
                Outcome::Completed if served_refused.is_some() => {
                    (JobStatus::Failed, served_refused)
                }
                Outcome::Completed => (JobStatus::Done, None),
                // The engine said why: its own error event is stored.
                Outcome::Failed { reason } if summary.failure.is_some() => {
                    (JobStatus::Failed, Some(reason))
                }
                // A crash, or an exit without a result: an error event
                // says how it ended and what it last wrote on stderr.
                Outcome::Failed { reason } => {
                    let reason = match exit.signal() {
                        Some(sig) => {
                            format!("the engine was killed by signal {}", signal_name(sig))
                        }
                        None => reason,
                    };
                    let reason = if stderr_tail.is_empty() {
                        reason
                    } else {
                        format!("{reason}: {stderr_tail}")
                    };
                    em.error(kind, reason.clone(), true).await?;
                    (JobStatus::Failed, Some(reason))
                }
            }
        }
    };
    Ok(Launched {
        status,
        reason,
        exit_code,
        calls,
    })
}

/// The variable a Bedrock API key is read from when the spec has no key,
/// as the AWS SDKs and Claude Code do.
pub const BEDROCK_API_KEY_VAR: &str = "AWS_BEARER_TOKEN_BEDROCK";

/// The Bedrock upstream of a `bedrock` spec, first match wins: the key as a
/// Bedrock API key (`key_header = "bearer"`) or as AWS credentials; without
/// a key `AWS_BEARER_TOKEN_BEDROCK`, else the AWS credential chain.
async fn bedrock_of(
    spec: &JobSpec,
    key: Option<&Secret>,
) -> Result<broker::bedrock::Bedrock, broker::bedrock::BedrockError> {
    let region = spec.upstream.bedrock_region.as_deref().unwrap_or("");
    let env_key = paddock_protocol::KeyRef::Env(BEDROCK_API_KEY_VAR.into());
    match (key, spec.upstream.key_header) {
        (Some(k), Some(KeyHeaderKind::Bearer)) => {
            Ok(broker::bedrock::Bedrock::with_api_key(k.clone(), region))
        }
        (Some(k), _) => broker::bedrock::Bedrock::new(k, region),
        (None, _) => match Secret::resolve(&env_key) {
            Ok(k) => Ok(broker::bedrock::Bedrock::with_api_key(k, region)),
            Err(_) => {
                let client = reqwest::Client::builder()
                    .no_proxy()
                    .connect_timeout(Duration::from_secs(5))
                    .build()
                    .map_err(|e| broker::bedrock::BedrockError::Chain {
                        profile: String::new(),
                        message: e.to_string(),
                    })?;
                broker::bedrock::Bedrock::from_chain(
                    region,
                    spec.upstream.aws_profile.as_deref(),
                    client,
                )
                .await
            }
        },
    }
}

/// The Vertex AI upstream of a `vertex` spec: its service-account key, or
/// without one Google's Application Default Credentials.
async fn vertex_of(
    spec: &JobSpec,
    key: Option<&Secret>,
) -> Result<broker::vertex::Vertex, broker::vertex::VertexError> {
    let project = spec.upstream.vertex_project.as_deref().unwrap_or("");
    let region = spec.upstream.vertex_region.as_deref().unwrap_or("");
    match key {
        Some(key) => broker::vertex::Vertex::new(key, project, region),
        None => broker::vertex::Vertex::from_default_credentials(project, region).await,
    }
}

/// The credentials of a cloud upstream (Vertex, Bedrock, Azure OpenAI with
/// Entra ID), made at admission.
struct CloudAuth {
    vertex: Option<Arc<broker::vertex::Vertex>>,
    bedrock: Option<Arc<broker::bedrock::Bedrock>>,
    entra: Option<Arc<broker::entra::Entra>>,
}

/// Shows a ledger row the broker stored and surfaces failed and refused
/// calls as events.
async fn record_call(
    em: &mut Emitter<'_>,
    mut call: ModelCall,
    spent: i64,
) -> Result<(), StoreError> {
    if let Some(error) = call.error.as_mut() {
        em.redactor.string(error);
    }
    em.observer.model_call(&call, spent);
    let msg = call.error.clone().unwrap_or_default();
    match call.status {
        CallStatus::Ok => {}
        // Budget and allowlist refusals: the broker's policy notice already
        // became a `policy` event.
        CallStatus::Refused if matches!(call.http_status, Some(402 | 403)) => {}
        CallStatus::Refused => {
            em.error("broker", msg, false).await?;
        }
        // Cut by the broker itself (budget, allowlist): the policy event
        // already says why; the row keeps the message.
        CallStatus::StreamError if msg.starts_with("paddock broker:") => {}
        // Written ahead only: the broker reports a call once it is settled.
        CallStatus::InFlight => {}
        CallStatus::HttpError | CallStatus::StreamError | CallStatus::Interrupted => {
            let status = call
                .http_status
                .map(|s| format!(" (HTTP {s})"))
                .unwrap_or_default();
            em.error(
                "upstream",
                format!(
                    "model call {} to {}{status}: {msg}",
                    call.seq, call.provider
                ),
                false,
            )
            .await?;
        }
    }
    Ok(())
}

/// Copies the engine's stderr to its artifact as it arrives; its last
/// lines (a short tail), and the artifact's write error if any.
async fn save_stderr(
    mut stderr: tokio::process::ChildStderr,
    mut artifact: ArtifactWriter,
) -> (String, Option<String>) {
    let mut buf = vec![0u8; READ_CHUNK];
    let mut tail = Tail::new(STDERR_TAIL);
    let mut text = Utf8Decoder::default();
    while let Ok(n) = stderr.read(&mut buf).await {
        if n == 0 {
            break;
        }
        artifact.write(&buf[..n]).await;
        tail.push(&text.decode(&buf[..n]));
    }
    tail.push(&text.finish());
    let error = artifact.finish().await;
    (tail.summary(), error)
}

/// One line of the engine's stdout into events: parsed when held whole and
/// UTF-8 (the line is returned), else an `error` event showing it
/// (lossily, cut).
async fn emit_line(
    em: &mut Emitter<'_>,
    parser: &mut dyn engines::StreamParser,
    line: Line,
    max_line: usize,
    kind: &str,
) -> Result<Option<String>, StoreError> {
    if !line.complete() {
        let head = &line.bytes[..line.bytes.len().min(LINE_HEAD)];
        let message = format!(
            "the engine printed a line of {} bytes, more than limits.max_line_bytes ({max_line}); it is kept in engine.jsonl but not parsed; it began: {}",
            line.len,
            String::from_utf8_lossy(head)
        );
        em.error(kind, message, false).await?;
        return Ok(None);
    }
    match String::from_utf8(line.bytes) {
        Ok(text) => {
            for body in parser.parse_line(&text) {
                em.emit(body).await?;
            }
            Ok(Some(text))
        }
        Err(e) => {
            let message = format!(
                "the engine printed a line that is not UTF-8 (invalid bytes shown as U+FFFD): {}",
                String::from_utf8_lossy(e.as_bytes())
            );
            em.error(kind, message, false).await?;
            Ok(None)
        }
    }
}

/// A signal's name (`SIGKILL`), or its number.
fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| sig.to_string())
}

fn kill_group(pgid: Option<nix::unistd::Pid>) {
    if let Some(pgid) = pgid {
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
    }
}

/// The engine binary: the spec's pinned path, or the engine's name on PATH.
/// Never a fallback to another engine.
pub fn resolve_engine(
    spec: &JobSpec,
    host_path: Option<&std::ffi::OsStr>,
) -> Result<PathBuf, String> {
    let pin = engines::adapter(spec.engine.kind).install();
    let default = pin.binary;
    match &spec.engine.binary {
        Some(p) if p.components().count() > 1 => {
            if is_executable(p) {
                Ok(p.clone())
            } else {
                Err(format!(
                    "engine {}: binary {} does not exist or is not executable",
                    spec.engine.kind,
                    p.display()
                ))
            }
        }
        other => {
            let name = other
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| default.to_string());
            let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
            which::which_in(&name, host_path, cwd).map_err(|_| {
                format!(
                    "engine {}: `{name}` was not found on PATH; Paddock is tested with {} {}: {}; or set engine.binary",
                    spec.engine.kind,
                    pin.package,
                    pin.version,
                    pin.install_hint()
                )
            })
        }
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// PATH for the engine: its own directory (and its real directory when it
/// is a symlink), the directory of `node` when found, and the system dirs.
pub fn engine_path(binary: &Path, host_path: Option<&std::ffi::OsStr>) -> String {
    let mut dirs: Vec<String> = Vec::new();
    let mut push = |p: Option<&Path>| {
        if let Some(d) = p {
            let d = d.display().to_string();
            if !d.is_empty() && !dirs.contains(&d) {
                dirs.push(d);
            }
        }
    };
    push(binary.parent());
    if let Ok(real) = std::fs::canonicalize(binary) {
        push(real.parent());
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    if let Ok(node) = which::which_in("node", host_path, cwd) {
        push(node.parent());
    }
    for d in [
        "/usr/local/sbin",
        "/usr/local/bin",
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
    ] {
        push(Some(Path::new(d)));
    }
    dirs.join(":")
}

//! Launch: the job's upstream (a provider, or the scenario served on
//! loopback), the budget checked before anything starts, the job's broker
//! bound for its rung (and its egress proxy, when its spec lists
//! destinations), the engine's files prepared by its adapter, and the
//! engine started on the rung with its stdout, stderr and the raw
//! artifact wired up: a [`Running`] job for the stream.

use std::sync::Arc;
use std::time::Duration;

use paddock_protocol::{EgressPhase, EventBody, Isolation, Phase};
use time::OffsetDateTime;
use tokio::io::AsyncWriteExt;

use super::clock::Deadline;
use super::early_patch::{self, EarlyPatch};
use super::emit::Emitter;
use super::network::{self, Egress};
use super::provision::Provisioned;
use super::setup::SetupStop;
use super::stream::save_stderr;
use super::{Job, LaunchFailure};
use crate::broker::{self, BrokerConfig, BrokerHandle, Provider, Upstream};
use crate::engines::{LaunchContext, StreamParser};
use crate::output::ArtifactWriter;
use crate::policy::denials::RecordTail;
use crate::rung::{self, EngineProcess, RungError, RungJob};
#[cfg(feature = "scripted")]
use crate::scripted::{RenderContext, Scenario, ScriptedServer};
#[cfg(not(feature = "scripted"))]
use std::convert::Infallible as Scenario;

/// What the job's upstream needs besides the spec, from admission.
#[derive(Clone)]
pub(super) struct Credentials {
    pub provider: Provider,
    pub scenario: Option<Arc<Scenario>>,
}

/// A started engine and what follows it. Fields drop in order: the engine
/// is stopped before its broker and upstream go.
pub(super) struct Running {
    /// The engine on its rung; dropped before it exited, it is stopped
    /// with its tree.
    pub process: Box<dyn EngineProcess>,
    /// When the engine is stopped for time, and which limit says so.
    pub deadline: Deadline,
    pub stdout: rung::Output,
    pub stderr_task: tokio::task::JoinHandle<(String, Option<String>)>,
    /// Stops the stderr copy (when the drain grace is over).
    pub stderr_stop: tokio::sync::oneshot::Sender<()>,
    /// The engine's stdout as it came (`engine.jsonl`).
    pub raw: ArtifactWriter,
    pub parser: Box<dyn StreamParser>,
    /// The host profile's denial record, read as it grows.
    pub denials: Option<RecordTail>,
    pub _shared_spend: Option<broker::shared_spend::Follower>,
    pub broker: BrokerHandle,
    /// The job's egress proxy, when its spec lists destinations.
    pub egress: Option<Egress>,
    /// What starts the job's patch at the engine's turn's end
    /// (`early_patch.rs`), until it has.
    pub early_patch: Option<(EarlyPatch, early_patch::Inputs)>,
    #[cfg(feature = "scripted")]
    pub _scripted: Option<ScriptedServer>,
}

/// How the launch ended: the engine runs, the budget held the job, or it
/// was cancelled during its setup.
pub(super) enum Start {
    Running(Box<Running>),
    Held(String),
    Cancelled(String),
}

/// The job's budget ceilings, and why it is held when one is already
/// spent (the gate before a job runs; a queue runs it at submission too).
pub(super) async fn budget_gate(
    spec: &paddock_protocol::JobSpec,
    job_id: &str,
    store: &crate::store::SharedStore,
) -> Result<(Vec<broker::budget::Ceiling>, Option<String>), crate::store::StoreError> {
    let ceilings = broker::budget::ceilings(spec, job_id, store, OffsetDateTime::now_utc()).await?;
    let held = broker::budget::exhausted_before_start(&ceilings).map(|c| c.exhausted_message(0));
    Ok((ceilings, held))
}

/// Starts the job's broker and its engine.
pub(super) async fn launch(
    job: &Job,
    em: &mut Emitter,
    (prov, disk): (&Provisioned, &super::disk_watch::DiskWatch),
    prompt: String,
    path_env: String,
    creds: Credentials,
    cancel: &mut (impl std::future::Future<Output = ()> + Unpin),
) -> Result<Start, LaunchFailure> {
    let spec = &job.spec;
    let ws = prov.ws();
    // What the engine is told about a cloud upstream (the broker holds
    // the credentials).
    let cloud = CloudPlace::of(&creds.provider);
    let (upstream, scripted) = upstream(job, ws, creds).await?;
    #[cfg(not(feature = "scripted"))]
    let () = scripted;
    // Admission: a job whose ceiling is already spent is held, not run.
    let (ceilings, held) = budget_gate(spec, &em.job_id, &em.store).await?;
    if let Some(message) = held {
        em.emit(EventBody::Policy {
            rule: "budget".into(),
            message: message.clone(),
        })
        .await?;
        return Ok(Start::Held(message));
    }
    let config = broker_config(job, em, upstream, ceilings);
    let job_id = em.job_id.clone();
    let on_rung = RungJob {
        job_id: &job_id,
        ws,
        timeout_secs: spec.limits.timeout_secs,
        policy: job.policy.as_ref(),
        accept_degraded: &spec.policy.accept_degraded,
        helper_exe: &job.config.helper_exe,
        egress: network::wanted(spec),
        phase: EgressPhase::Agent,
        read_only: &job.config.tools.read_only,
    };
    let broker = job
        .rung
        .bind_broker(&on_rung, config)
        .await
        .map_err(rung_failed)?;
    em.redactor.add_secret(&broker.token);
    let mut egress = network::start(job, &on_rung).await?;
    let egress_url = egress
        .as_ref()
        .and_then(|e| e.handle.as_ref())
        .map(|h| h.url.clone());
    let mut ctx = launch_context(job, prov, &broker, (prompt, path_env, egress_url), cloud)?;
    if let Some(e) = &egress {
        // The credentials' real values never reach the job; should one be
        // echoed into the job's output anyway, the records redact it.
        for secret in e.secrets.iter() {
            em.redactor.add_secret(secret);
        }
        // The proxy's own credentials, in the URL the job is given: the
        // job's to use, not its events' to show (anyone reading them could
        // use the job's proxy while it runs).
        if let Some(token) = e.handle.as_ref().and_then(|h| h.token.as_ref()) {
            em.redactor.add_secret(token);
        }
        ctx.egress_env = e.env.clone();
    }
    // On the `sandbox` rung the placeholders of the work tree's protected
    // names are Paddock's, made before its runs and held until the early
    // patch is taken (`early_patch.rs`): each run's helper would remove
    // the ones it made as it ends, a change of the tree after the patch's
    // first print.
    if job.rung.isolation() == Isolation::Sandbox {
        prov.early_patch
            .hold_placeholders(paddock_sandbox::absent::Placeholders::make_in(&ws.work));
    }
    // The spec's setup commands, on the rung, before the engine, with the
    // engine's environment (no broker, no token: those are its command's).
    let setup_env = crate::engines::base_env(&ctx);
    // The host profile's `timeout_min` holds for the whole job: its clock
    // started before provisioning (`Provisioned::cap_ends`). Whether one
    // ran decides whether the engine's launch is the job's first.
    let setup_ran = match super::setup::run(
        job,
        em,
        &on_rung,
        setup_env,
        (&mut egress, prov.cap_ends),
        disk,
        cancel,
    )
    .await
    {
        Ok(ran) => ran,
        Err(SetupStop::Failed(e)) => return Err(e),
        Err(SetupStop::Cancelled(why)) => return Ok(Start::Cancelled(why)),
    };
    // A cancel that came before the engine starts none (a job cancelled
    // through another server just as this one claimed it, say).
    if futures::FutureExt::now_or_never(&mut *cancel).is_some() {
        return Ok(Start::Cancelled("cancelled".into()));
    }
    // Other jobs of the same ticket or project, settling calls while this
    // one runs; followed until the job's end.
    let shared_spend = broker::shared_spend::follow(
        broker.budget(),
        Arc::new(em.store.clone()),
        broker::shared_spend::Shared {
            job_id: em.job_id.clone(),
            project: spec.ticket.project.clone(),
            ticket_id: spec.ticket.id.clone(),
        },
        broker::shared_spend::EVERY,
    );
    // The agent's list from here on: whatever the setup phase opened is
    // closed before the engine starts (its records come in while the
    // engine streams).
    if let Some(h) = egress.as_ref().and_then(|e| e.handle.as_ref()) {
        h.proxy.switch(EgressPhase::Agent);
    }
    let adapter = prov.adapter.as_ref();
    write_prepared(&ctx.home, adapter.prepare(&ctx)).await?;
    ctx.resume = super::resume::restore(job, em, prov, adapter).await?;
    let cmd = adapter.command(&ctx);
    em.emit(EventBody::Status {
        phase: Phase::Launching,
        detail: Some(format!("{} {}", adapter.kind(), cmd.program.display())),
    })
    .await?;
    // Whatever ends the job early stops the engine and its tree (the
    // process handle's drop).
    let launching = std::time::Instant::now();
    let deadline = Deadline::for_engine(
        tokio::time::Instant::now(),
        spec.limits.timeout_secs,
        job.policy
            .as_ref()
            .and_then(|p| Some((p.profile.id.as_str(), p.profile.timeout_min?))),
        job.policy
            .as_ref()
            .and_then(|p| p.profile.timeout_min)
            .zip(prov.cap_ends)
            .map(|(min, ends)| ends - Duration::from_secs(min.saturating_mul(60))),
    );
    let failed = |e| command_failed(e, !setup_ran, None);
    let mut process = job.rung.launch(&on_rung, &cmd).await.map_err(failed)?;
    // Until the engine runs, a failure of the rung's set-up is the
    // rung's, not an exit of the engine's.
    tokio::select! {
        started = process.started() => started.map_err(failed)?,
        () = &mut *cancel => return Ok(Start::Cancelled("cancelled".into())),
    }
    crate::telemetry::engine_started(job.rung.isolation().as_str(), launching.elapsed());
    // The patch's early reads (the base's paths and tree, the user's
    // excludes file), beside the engine's turn now that it runs.
    ws.list_base_soon();
    // The prompt on stdin, then end of file; an engine that exits before
    // reading it all only makes this write fail.
    if let (Some(mut stdin), Some(text)) = (process.take_stdin(), cmd.stdin.clone()) {
        tokio::spawn(async move {
            let _ = stdin.write_all(text.as_bytes()).await;
            let _ = stdin.shutdown().await;
        });
    }
    let (Some(stdout), Some(stderr)) = (process.take_stdout(), process.take_stderr()) else {
        return Err(LaunchFailure::Step(
            "the engine's stdout/stderr were not captured".into(),
        ));
    };
    let stderr_artifact =
        ArtifactWriter::create(prov.artifacts.join("engine.stderr"), em.redactor.clone()).await;
    let (stderr_stop, stop) = tokio::sync::oneshot::channel();
    let stderr_task = tokio::spawn(save_stderr(
        stderr,
        stderr_artifact,
        stop,
        job.spec.limits.max_output_bytes,
    ));
    let raw =
        ArtifactWriter::create(prov.artifacts.join("engine.jsonl"), em.redactor.clone()).await;
    Ok(Start::Running(Box::new(Running {
        process,
        deadline,
        stdout,
        stderr_task,
        stderr_stop,
        raw,
        parser: adapter.parser(&ws.work),
        denials: job.policy.as_ref().map(|p| p.tail(&ws.meta)),
        _shared_spend: shared_spend,
        broker,
        egress,
        // The job is still alive while it reads (`early_patch.rs`): on
        // every rung it reads no file of the tree by path.
        early_patch: Some((
            prov.early_patch.clone(),
            early_patch::Inputs {
                ws: ws.sealed(),
                spec: job.spec.clone(),
                artifacts: prov.artifacts.clone(),
            },
        )),
        #[cfg(feature = "scripted")]
        _scripted: scripted,
    })))
}

/// The job's broker: its upstream, prices, ceilings, allowlists (the job's
/// and its host profile's), retries and ledger.
fn broker_config(
    job: &Job,
    em: &Emitter,
    upstream: Upstream,
    ceilings: Vec<broker::budget::Ceiling>,
) -> BrokerConfig {
    let spec = &job.spec;
    BrokerConfig {
        job_id: em.job_id.clone(),
        attempt: spec.attempt(),
        upstream,
        prices: job.config.prices.clone(),
        ceilings,
        allowlist: match &job.policy {
            Some(p) => broker::ModelAllowlist::any()
                .with("job", &spec.engine.allowed_models)
                .with(
                    &format!("host profile {}", p.profile.id),
                    &p.profile.allowed_models,
                ),
            None => broker::ModelAllowlist::any().with("job", &spec.engine.allowed_models),
        },
        allow_unpriced: spec.upstream.allow_unpriced,
        web_search: spec.network.web_search,
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
            records: Some(em.records.clone()),
        }),
    }
}

/// What the engine's adapter builds its files and command from.
fn launch_context(
    job: &Job,
    prov: &Provisioned,
    broker: &BrokerHandle,
    (prompt, path_env, egress_url): (String, String, Option<String>),
    cloud: CloudPlace,
) -> Result<LaunchContext, LaunchFailure> {
    let spec = &job.spec;
    let ws = prov.ws();
    Ok(LaunchContext {
        binary: prov.binary.clone(),
        model: spec.engine.model.clone(),
        reasoning_effort: spec.engine.reasoning_effort.map(|e| e.as_str().to_string()),
        workdir: ws.work.clone(),
        home: ws.home.clone(),
        tmp: ws.tmp.clone(),
        broker_url: broker.url.clone(),
        job_token: broker.token.expose().to_string(),
        egress_url,
        egress_env: Vec::new(),
        tools_env: job.config.tools.env.clone(),
        prompt,
        path_env,
        policy: match &job.policy {
            Some(p) => p
                .engine_policy(prov.adapter.kind(), Some(&job.config.helper_exe), &ws.meta)
                .map_err(|e| step("prepare the host profile's engine rules", e))?,
            None => None,
        },
        vertex: cloud.vertex,
        bedrock: cloud.bedrock,
        resume: None,
        web_search: spec.network.web_search,
    })
}

/// Where a cloud upstream is, as the engine is told (the broker holds the
/// credentials).
struct CloudPlace {
    /// Vertex AI's project and region.
    vertex: Option<(String, String)>,
    /// Bedrock's region.
    bedrock: Option<String>,
}

impl CloudPlace {
    fn of(provider: &Provider) -> CloudPlace {
        CloudPlace {
            vertex: provider
                .vertex()
                .map(|v| (v.project.clone(), v.region.clone())),
            bedrock: provider.bedrock().map(|b| b.region.clone()),
        }
    }
}

/// Writes the files the engine's adapter prepared (its config, its rules)
/// into the job's `home`, once its setup commands have run there: a
/// setup command (the repository's code, on the job's rung) may have left
/// `~/.codex` or `~/.codex/config.toml` as a link to a host file, which
/// Paddock, on the host, must not write through, or a FIFO a write would
/// block on. Each file is written beneath `home` through no link, what is
/// in its way replaced (`workspace::beneath::write_replacing`).
async fn write_prepared(
    home: &std::path::Path,
    files: Vec<crate::engines::PreparedFile>,
) -> Result<(), LaunchFailure> {
    for file in files {
        let Ok(rel) = file.path.strip_prefix(home) else {
            return Err(step(
                &format!("write {}", file.path.display()),
                format!("it is not in the job's home {}", home.display()),
            ));
        };
        let (home, rel) = (home.to_path_buf(), rel.to_path_buf());
        tokio::task::spawn_blocking(move || {
            crate::workspace::beneath::write_replacing(&home, &rel, file.contents.as_bytes())
        })
        .await
        .map_err(|e| step(&format!("write {}", file.path.display()), e))?
        .map_err(|e| step(&format!("write {}", file.path.display()), e))?;
    }
    Ok(())
}

#[cfg(feature = "scripted")]
type ScriptedUpstream = Option<ScriptedServer>;
#[cfg(not(feature = "scripted"))]
type ScriptedUpstream = ();

/// The upstream: a real provider, or the scenario served on loopback.
async fn upstream(
    job: &Job,
    ws: &crate::workspace::Workspace,
    creds: Credentials,
) -> Result<(Upstream, ScriptedUpstream), LaunchFailure> {
    let spec = &job.spec;
    #[cfg(feature = "scripted")]
    let mut scripted = None;
    let upstream = match creds.provider {
        #[cfg(not(feature = "scripted"))]
        Provider::Scripted => {
            let _ = creds.scenario;
            return Err(LaunchFailure::Step(
                "the scripted upstream is not built in (cargo feature `scripted`)".into(),
            ));
        }
        #[cfg(feature = "scripted")]
        Provider::Scripted => {
            let Some(scenario) = creds.scenario else {
                return Err(LaunchFailure::Step(
                    "the scripted upstream has no scenario".into(),
                ));
            };
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
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
                base: server.base.clone(),
                provider: Provider::Scripted,
            };
            scripted = Some(server);
            up
        }
        provider => Upstream {
            base: Provider::base_url(&spec.upstream).unwrap_or_default(),
            provider,
        },
    };
    #[cfg(not(feature = "scripted"))]
    let (scripted, _) = ((), ws);
    Ok((upstream, scripted))
}

/// A rung's failure as the launch's.
fn rung_failed(e: RungError) -> LaunchFailure {
    LaunchFailure::Step(e.to_string())
}

/// A rung's failure to start a command (`what`, when named: a setup
/// command) as the launch's: `Unstarted` when it is the job's `first`
/// and the rung could not set it up (nothing of the job ran:
/// `rung_fallback.rs`), a step's failure otherwise.
pub(super) fn command_failed(e: RungError, first: bool, what: Option<&str>) -> LaunchFailure {
    let message = match what {
        Some(what) => format!("{what}: {e}"),
        None => e.to_string(),
    };
    match e {
        RungError::SandboxSetup { .. } if first => LaunchFailure::Unstarted(message),
        _ => LaunchFailure::Step(message),
    }
}

/// A failed launch step, `what: error`.
pub(super) fn step(what: &str, e: impl std::fmt::Display) -> LaunchFailure {
    LaunchFailure::Step(format!("{what}: {e}"))
}

//! The jobs API: submit a spec (`POST /v1/jobs`, 202 with the queued or
//! held record), list jobs by status and engine a page at a time (`GET
//! /v1/jobs`), get one (`GET /v1/jobs/{id}`), cancel one (`POST
//! /v1/jobs/{id}/cancel`) and dispose of one (`DELETE /v1/jobs/{id}`:
//! cancelled if it has not ended, waited for, its artifacts removed; its
//! record, events and ledger rows stay for accounting; refused for a job
//! another host ran, whose artifacts are there). A spec is checked as `paddock run`
//! checks it (the user's config defaults applied, then `Runner::admit`),
//! with the same errors, as problem bodies, but for what is this host's
//! and not the spec's (a secret or file not here, this host's sandbox or
//! credentials): such a job is refused naming what is missing here, or,
//! on a server that accepts jobs for its fleet (`[serve]
//! accept_for_fleet`), queued for a server of the fleet that can run it,
//! the answer's reason saying why this one will not (`Queue::submit`); `?attempt_after=JOB` admits it
//! as the next attempt after that job, as `paddock run --attempt-after`
//! does (`Runner::admit_after`).

use std::path::Path as FsPath;

use super::json::Json;
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use paddock_protocol::{EngineKind, Isolation, JobRecord, JobSpec, JobStatus};
use serde::Deserialize;

use super::auth::Caller;
use super::extract::{json_object_text, Checked, JsonBody};
use super::job_id::{check_query, JobId};
use super::problem::Problem;
use super::queue::{Cancel, SubmitError};
use super::state::AppState;
use crate::cut_text::{cut, Cut, Length};
use crate::results::bounce::BounceError;
use crate::runner::{AdmitError, AfterError, ErrorCode, NotHere};
use crate::store::{JobQuery, Owner};

/// The longest page of `GET /v1/jobs`.
pub const MAX_PAGE: u32 = 500;
/// The page of `GET /v1/jobs` without `limit`.
pub const DEFAULT_PAGE: u32 = 50;

/// `POST /v1/jobs` query.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct SubmitQuery {
    /// Higher runs first (default 0).
    pub priority: Option<i64>,
    /// Run the next attempt after this job (its id) of the same ticket:
    /// its outcome, closeout and review comments join the spec's prior
    /// attempts, and its engine session is resumed on its branch (or a
    /// new one forked, and why): `paddock run --attempt-after JOB`
    /// (docs/results.md).
    pub attempt_after: Option<String>,
}

/// `GET /v1/jobs` query.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only jobs with this status (`queued`, `running`, `done`, ...).
    pub status: Option<String>,
    /// Only jobs of this engine (`codex`, `claude`).
    pub engine: Option<String>,
    /// Only jobs on this isolation rung (`process`, `sandbox`).
    pub rung: Option<String>,
    /// The previous page's `next_cursor`.
    pub cursor: Option<String>,
    /// At most this many jobs (1 to 500, default 50).
    pub limit: Option<u32>,
}

/// A page of jobs (a protocol type).
pub use paddock_protocol::api::JobPage;

/// A job spec as JSON (docs/job-spec.md): what `paddock run` reads.
#[derive(utoipa::ToSchema)]
#[schema(value_type = Object)]
#[expect(
    dead_code,
    reason = "the request body's schema only: the body is read as text"
)]
pub struct JobSpecBody(serde_json::Value);

/// Submits the JSON job spec in the body.
#[utoipa::path(post, path = "/v1/jobs", tag = "jobs", security(("bearer" = ["submit"])), params(SubmitQuery),
    request_body(content = JobSpecBody, content_type = "application/json"),
    responses(
        (status = 202, description = "Queued (or held by its budget); one whose secret or files this server has not, or whose admission here is refused for this host's own sandbox, credentials or host profile, is, on a server accepting jobs for its fleet (`--accept-for-fleet`), queued for a server of the fleet that can run it, its `reason` saying why this one will not", body = JobRecord,
            headers(("location" = String, description = "The job's URL"))),
        (status = 400, description = "A malformed query (`priority` not an integer, `attempt_after` empty or over 128 characters)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The spec cannot run (the CLI's errors; what this server lacks of it, on a server not accepting jobs for its fleet: `repository_not_found` for a local repository, a path or `file://` URL, that is not there or no git repository), or `attempt_after` names a job it cannot follow", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "The forge did not answer the read of the prior job's review (`forge_unavailable`): submit it again once it answers", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The store failed", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn submit(
    State(state): State<AppState>,
    Checked(Query(query)): Checked<Query<SubmitQuery>>,
    JsonBody(body): JsonBody,
) -> Result<Response, Problem> {
    let body = json_object_text(&body, "a JSON job spec (docs/job-spec.md)")?;
    let spec = JobSpec::from_text(
        body,
        FsPath::new("<request body>"),
        &state.runner.config().cwd,
    )?;
    state
        .config
        .submissions
        .check(&spec, None)
        .map_err(|e| Problem::runner(ErrorCode::BadInput, e.to_string()))?;
    let by = profile_named_by(&state.defaults, &spec);
    let named = |e: AdmitError| match &by {
        Some(by) => e.profile_named_by(by),
        None => e,
    };
    let spec = state.defaults.apply(spec);
    if spec.results.webhook_url.is_some() && !state.queue.has_webhooks() {
        return Err(Problem::runner(
            ErrorCode::BadInput,
            "results.webhook_url: this server has no webhook secret to sign deliveries with (start it with --webhook-secret or [serve] webhook_secret)".into(),
        ));
    }
    if let Some(after) = &query.attempt_after {
        check_query("attempt_after", after)?;
    }
    let record = state
        .queue
        .submit(
            &spec,
            query.priority.unwrap_or(0),
            query.attempt_after.as_deref(),
        )
        .await
        .map_err(|e| match e {
            // A next attempt's spec refused is refused as any spec is:
            // `policy_refused` with its rule when the host profile refuses.
            SubmitError::Admit(e) | SubmitError::After(AfterError::Admit(e)) => {
                Problem::from(named(e))
            }
            // The forge down is not the caller's input to fix (not 422):
            // asking again later may succeed.
            SubmitError::After(e @ AfterError::Prior(BounceError::ForgeUnavailable { .. })) => {
                Problem::new(
                    502,
                    "forge_unavailable",
                    "the forge did not answer",
                    super::problem::chain(&e),
                )
            }
            SubmitError::After(e) => Problem::runner(e.code(), super::problem::chain(&e)),
            SubmitError::Store(e) => Problem::from(e),
            // What this host lacks, said as `paddock run` says it: the
            // caller's to fix (the server's to provide, or the spec's).
            SubmitError::NotHere(e @ NotHere::Source(_)) => {
                Problem::repository_not_found(super::problem::chain(&e))
            }
            SubmitError::NotHere(e) => {
                Problem::runner(ErrorCode::BadInput, super::problem::chain(&e))
            }
        })?;
    let location = format!("/v1/jobs/{}", record.id);
    Ok((
        StatusCode::ACCEPTED,
        [(header::LOCATION, location)],
        Json(record),
    )
        .into_response())
}

/// What names the host profile of submitted `spec` (before `defaults`
/// apply), for an admission error about that profile
/// (`AdmitError::profile_named_by`): the spec's `policy.profile`, or the
/// server's default for a spec naming none (`Config::profile_key`), which
/// the submitter would otherwise look for in the spec; `None` when no
/// profile applies.
pub fn profile_named_by(defaults: &crate::config::Config, spec: &JobSpec) -> Option<String> {
    match defaults.profile_key(spec) {
        Some(key) => Some(format!(
            "this server's default host profile ({key} in its config file, for a spec naming \
             none)"
        )),
        None => spec
            .policy
            .profile
            .as_ref()
            .map(|_| "policy.profile".to_owned()),
    }
}

/// A status filter's job status; one that is none is refused, naming those
/// there are.
pub fn parse_status(status: &str) -> Result<JobStatus, Problem> {
    JobStatus::parse(status).ok_or_else(|| {
        Problem::bad_request(format!(
            "status `{}` is not a job status ({})",
            shown(status),
            JobStatus::ALL
                .iter()
                .map(|s| format!("`{}`", s.as_str()))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })
}

/// The rungs a job runs on, as its record names them.
pub const RUNGS: [Isolation; 2] = [Isolation::Process, Isolation::Sandbox];

/// Refuses a rung filter no job can match: it would answer an empty page,
/// which reads as "no jobs on it".
pub fn check_rung(rung: &str) -> Result<(), Problem> {
    if RUNGS.iter().any(|r| r.as_str() == rung) {
        return Ok(());
    }
    Err(Problem::bad_request(format!(
        "rung `{}` is not an isolation rung (`process`, `sandbox`)",
        shown(rung)
    )))
}

/// Refuses an engine filter no job can match (as `check_rung`).
pub fn check_engine(engine: &str) -> Result<(), Problem> {
    if serde_json::from_value::<EngineKind>(serde_json::Value::from(engine)).is_ok() {
        return Ok(());
    }
    Err(Problem::bad_request(format!(
        "engine `{}` is not an engine (`codex`, `claude`)",
        shown(engine)
    )))
}

/// A page of jobs, newest first.
#[utoipa::path(get, path = "/v1/jobs", tag = "jobs", security(("bearer" = ["read"])), params(ListQuery),
    responses(
        (status = 200, description = "A page of jobs", body = JobPage),
        (status = 400, description = "A bad filter, cursor or limit", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list(
    State(state): State<AppState>,
    Checked(Query(query)): Checked<Query<ListQuery>>,
) -> Result<Json<JobPage>, Problem> {
    let status = query.status.as_deref().map(parse_status).transpose()?;
    // An engine or rung no job can have would answer an empty page, which
    // reads as "no jobs of it".
    if let Some(engine) = &query.engine {
        check_engine(engine)?;
    }
    if let Some(rung) = &query.rung {
        check_rung(rung)?;
    }
    let limit = query.limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(Problem::bad_request(format!(
            "limit must be 1 to {MAX_PAGE}, not {limit}"
        )));
    }
    // A cursor no job has would answer an empty last page, which a
    // client paging through takes for the end.
    if let Some(cursor) = &query.cursor {
        check_query("cursor", cursor)?;
        if state.store.job(cursor).await?.is_none() {
            return Err(Problem::bad_request(format!(
                "cursor `{}` is not a job of this store (pass a page's `next_cursor` back as it is)",
                shown(cursor)
            )));
        }
    }
    let jobs = state
        .store
        .list_jobs(&JobQuery {
            status,
            engine: query.engine,
            isolation: query.rung,
            after: query.cursor,
            limit,
            branch: None,
        })
        .await?;
    let next_cursor = match jobs.last() {
        Some(last) if jobs.len() == limit as usize => Some(last.id.clone()),
        _ => None,
    };
    Ok(Json(JobPage { jobs, next_cursor }))
}

/// The caller's text `given` (a cursor) as named back: up to 64
/// characters, a longer one cut with its length said.
fn shown(given: &str) -> String {
    cut(given, Cut::chars(64).saying(Length::Characters))
}

/// One job's record.
#[utoipa::path(get, path = "/v1/jobs/{id}", tag = "jobs", security(("bearer" = ["read"])),
    params(("id" = String, Path, description = "The job's id")),
    responses(
        (status = 200, description = "The job's record", body = JobRecord),
        (status = 404, description = "No such job", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn get(
    State(state): State<AppState>,
    JobId(id): JobId,
) -> Result<Json<JobRecord>, Problem> {
    match state.store.job(&id).await? {
        Some(job) => Ok(Json(job)),
        None => Err(Problem::no_job(&id)),
    }
}

/// What a cancel did: the job's record with a `cancel` member.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct CancelAnswer {
    #[serde(flatten)]
    pub job: JobRecord,
    pub cancel: CancelOutcome,
}

/// How a cancel reached the job.
#[derive(Debug, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct CancelOutcome {
    pub state: CancelState,
    /// For `requested`: the name of the host whose process runs the job;
    /// for `cancelled`, the host it ran on when that host was found dead
    /// (null for a job cancelled while queued).
    pub host: Option<String>,
    /// With `host`: that host's jobs directory id (`<jobs>/.host-id`).
    pub host_id: Option<String>,
}

/// `cancelled`: the job was queued, or ran on another host whose heartbeat
/// was already older than the TTL (that host dead: the job reclaimed), and
/// is cancelled now; `stopping`: this
/// server runs it and told it to stop (it concludes `cancelled`
/// shortly); `requested`: another process runs it (another server on the
/// store, or a `paddock run`): the request is recorded in the store and
/// that process stops the job within about a second, as it stops a local
/// cancel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CancelState {
    Cancelled,
    Stopping,
    Requested,
}

/// Cancels a job: 202 with its record and how the cancel reached it (a
/// queued job is `cancelled` at once, a running one concludes `cancelled`
/// shortly, whichever process on the store runs it).
#[utoipa::path(post, path = "/v1/jobs/{id}/cancel", tag = "jobs", security(("bearer" = ["submit"])),
    params(("id" = String, Path, description = "The job's id")),
    responses(
        (status = 202, description = "Cancelled, told to stop, or the stop requested of the process running it", body = CancelAnswer),
        (status = 404, description = "No such job", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The job has ended (`job_final`) or runs in a process that cannot be asked to stop (`job_elsewhere`)", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn cancel(
    State(state): State<AppState>,
    axum::Extension(caller): axum::Extension<Caller>,
    JobId(id): JobId,
) -> Result<Response, Problem> {
    let outcome = |state| CancelOutcome {
        state,
        host: None,
        host_id: None,
    };
    let (job, cancel) = match state.queue.cancel(&id, &caller.asker()).await? {
        Cancel::Dequeued(record) => (record, outcome(CancelState::Cancelled)),
        // Its host found dead: reclaimed and cancelled now, `host` the
        // host it ran on.
        Cancel::Settled { record, owner } => (
            record,
            CancelOutcome {
                state: CancelState::Cancelled,
                host: Some(owner.name),
                host_id: Some(owner.host),
            },
        ),
        Cancel::Signalled => (
            record_of(&state, &id).await?,
            outcome(CancelState::Stopping),
        ),
        Cancel::Requested(owner) => (
            record_of(&state, &id).await?,
            CancelOutcome {
                state: CancelState::Requested,
                host: Some(owner.name),
                host_id: Some(owner.host),
            },
        ),
        Cancel::Final(record) => {
            return Err(Problem::new(
                409,
                "job_final",
                "the job has already ended",
                format!("job {id} is {}", record.status.as_str()),
            ))
        }
        Cancel::Elsewhere => return Err(elsewhere(&id)),
        Cancel::NotFound => return Err(Problem::no_job(&id)),
    };
    Ok((StatusCode::ACCEPTED, Json(CancelAnswer { job, cancel })).into_response())
}

/// The stored record of job `id`; 404 when there is none.
async fn record_of(state: &AppState, id: &str) -> Result<JobRecord, Problem> {
    state
        .store
        .job(id)
        .await?
        .ok_or_else(|| Problem::no_job(id))
}

/// 409 `job_elsewhere`: job `id` runs in a process that cannot be asked to
/// stop through the store (recorded before jobs had owners).
fn elsewhere(id: &str) -> Problem {
    Problem::new(
        409,
        "job_elsewhere",
        "the job runs in another process that cannot be asked to stop",
        format!(
            "job {id} is running in another process that recorded no owner (a Paddock from \
             before several hosts shared a store): stop it there"
        ),
    )
}

/// 409 `job_on_another_host`: job `id` ran (or runs: `status`) on
/// `owner`, another host, whose artifacts directory this server cannot
/// reach; `cancelled` when this dispose ended it first (it was claimed
/// there meanwhile).
fn on_another_host(id: &str, owner: &Owner, status: JobStatus, cancelled: bool) -> Problem {
    let host = format!("host {} (jobs directory {})", owner.name, owner.host);
    let detail = match (status, cancelled) {
        (JobStatus::Running | JobStatus::Queued, _) => format!(
            "job {id} runs on {host}: its artifacts are there and this server cannot remove \
             them, so nothing was done; dispose of it through a server on that host (POST \
             /v1/jobs/{id}/cancel here stops it)"
        ),
        (status, false) => format!(
            "job {id} ran on {host} and has ended ({}): its artifacts are there and this server \
             cannot remove them, so nothing was done; dispose of it through a server on that host",
            status.as_str()
        ),
        (status, true) => format!(
            "job {id} was cancelled and has ended ({}), but it ran on {host}: its artifacts are \
             there and this server cannot remove them, so none were removed; dispose of it \
             through a server on that host",
            status.as_str()
        ),
    };
    Problem::new(
        409,
        "job_on_another_host",
        "the job ran on another host, where its artifacts are",
        detail,
    )
}

/// How long a dispose waits for a cancelled job to conclude.
const DISPOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Disposes of a job: cancels it unless it ended, waits for its end,
/// revokes the forge tokens a killed or failed publish of it left (their
/// records are in the artifacts), removes its artifacts directory and
/// marks its record so (`disposed_at` set, `patch_path` cleared). 200
/// with that record. A job another host ran (or runs) is refused
/// before anything is done (409 `job_on_another_host`): its artifacts are
/// on that host; one claimed by another host while this dispose cancelled
/// it is refused so once it has ended.
#[utoipa::path(delete, path = "/v1/jobs/{id}", tag = "jobs", security(("bearer" = ["submit"])),
    params(("id" = String, Path, description = "The job's id")),
    responses(
        (status = 200, description = "Ended and its artifacts removed", body = JobRecord),
        (status = 404, description = "No such job", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The job ran on another host, where its artifacts are (`job_on_another_host`: nothing done, dispose of it there), runs in a process that cannot be asked to stop, did not end in time, is being published, or a token its publish left could not be revoked", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn dispose(
    State(state): State<AppState>,
    axum::Extension(caller): axum::Extension<Caller>,
    JobId(id): JobId,
) -> Result<Json<JobRecord>, Problem> {
    let me = &state.runner.config().liveness.owner;
    let elsewhere_owner = |owner: Option<Owner>| owner.filter(|o| o.host != me.host);
    if let Some(owner) = elsewhere_owner(state.store.job_owner(&id).await?) {
        let status = record_of(&state, &id).await?.status;
        return Err(on_another_host(&id, &owner, status, false));
    }
    match state.queue.cancel(&id, &caller.asker()).await? {
        Cancel::NotFound => return Err(Problem::no_job(&id)),
        Cancel::Elsewhere => return Err(elsewhere(&id)),
        Cancel::Signalled
        | Cancel::Requested(_)
        | Cancel::Settled { .. }
        | Cancel::Dequeued(_)
        | Cancel::Final(_) => {}
    }
    let deadline = tokio::time::Instant::now() + DISPOSE_WAIT;
    let record = loop {
        let record = record_of(&state, &id).await?;
        if !matches!(record.status, JobStatus::Queued | JobStatus::Running) {
            break record;
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Problem::new(
                409,
                "job_not_ended",
                "the job did not end in time",
                format!("job {id} was cancelled but is still running; try again"),
            ));
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    // Claimed by another host between the check above and the cancel.
    if let Some(owner) = elsewhere_owner(state.store.job_owner(&id).await?) {
        return Err(on_another_host(&id, &owner, record.status, true));
    }
    let paths = &state.runner.config().paths;
    let dir = paths.artifacts.join(&record.id);
    // Under the job's lease: no `paddock publish` of it runs meanwhile.
    let lease = match crate::workspace::lease::Lease::take_to_publish(&paths.jobs, &record.id) {
        Ok(Some(lease)) => lease,
        Ok(None) => {
            return Err(Problem::new(
                409,
                "job_publishing",
                "the job is being published",
                format!("job {id} is being published by another process; try again"),
            ))
        }
        Err(e) => {
            return Err(Problem::runner(
                ErrorCode::Internal,
                format!(
                    "take the lease of job {id} in {}: {e}",
                    paths.jobs.display()
                ),
            ))
        }
    };
    // The tokens a killed or failed publish left (their records are in the
    // artifacts) are revoked before the records go; when one cannot be,
    // nothing is removed and the lease stays for the reaper's next pass.
    let (_, mut left) = crate::results::push::remove_leftover_pushes(&dir);
    left.extend(
        crate::results::revoke_leftover_tokens(&*state.store, &record.id, &dir)
            .await
            .errors,
    );
    if !left.is_empty() {
        drop(lease);
        return Err(Problem::new(
            409,
            "tokens_not_revoked",
            "what the job's publish left could not all be cleaned up",
            format!(
                "job {id}: its artifacts are kept (the reaper and the next dispose try again): {}",
                left.join("; ")
            ),
        ));
    }
    let removed = match crate::workspace::remove::remove_tree(&dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Problem::runner(
            ErrorCode::Internal,
            format!("remove the artifacts of job {id} at {}: {e}", dir.display()),
        )),
    };
    // The record says so, still under the lease: no patch any more (its
    // path would name a file that is gone), and when it went.
    let disposed = match removed {
        Ok(()) => {
            let disposed = JobRecord {
                patch_path: None,
                disposed_at: Some(time::OffsetDateTime::now_utc()),
                ..record.clone()
            };
            state
                .store
                .finish_job(&disposed, record.status)
                .await
                .map(|()| disposed)
                .map_err(Problem::from)
        }
        Err(e) => Err(e),
    };
    if let Err(e) = lease.release() {
        tracing::warn!("dispose {id}: cannot delete the job's lease file: {e}");
    }
    Ok(Json(disposed?))
}

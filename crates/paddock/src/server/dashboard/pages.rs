//! The dashboard's handlers: each checks the session (`session.rs`), reads
//! what it shows from the store, the queue or `/v1/discover`'s handler, and
//! renders a template. A missing or dead session is a redirect to the login
//! form; a POST without the session's CSRF token is 403.

use std::convert::Infallible;

use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use minijinja::{context, Environment, Value};
use paddock_protocol::{Isolation, JobRecord, JobStatus};
use serde::Deserialize;

use super::charts;
use super::session::{self, SessionError, Sessions, Viewer};
use crate::api_token::Scope;
use crate::broker::prices::format_usd;
use crate::event_line::Lines;
use crate::server::job_id::{check_query, JobId};
use crate::server::jobs as jobs_api;
use crate::server::outbox::{outbox, STALL};
use crate::server::problem::Problem;
use crate::server::state::AppState;
use crate::store::JobQuery;

/// Jobs on one page of the list.
const PAGE: u32 = 100;

/// The dashboard's templates, parsed once. Every value a template shows
/// goes through [`shown`]: HTML-escaped (the `.html` templates
/// auto-escape) after its controls, bidirectional overrides and invisible
/// characters are shown as escapes, as the CLI prints them.
static TEMPLATES: std::sync::LazyLock<Environment<'static>> = std::sync::LazyLock::new(|| {
    let mut env = Environment::new();
    env.set_formatter(shown);
    for (name, text) in [
        ("base.html", include_str!("templates/base.html")),
        ("login.html", include_str!("templates/login.html")),
        ("jobs.html", include_str!("templates/jobs.html")),
        ("job.html", include_str!("templates/job.html")),
        ("spend.html", include_str!("templates/spend.html")),
        ("host.html", include_str!("templates/host.html")),
        ("error.html", include_str!("templates/error.html")),
    ] {
        if let Err(e) = env.add_template(name, text) {
            tracing::error!("dashboard: template {name}: {e}");
        }
    }
    env
});

/// How a template shows `value`: a string is made safe as a terminal
/// would show it (`terminal_text::text`: a job's ticket, branch, reason,
/// file names and model carry no control, bidirectional override or
/// zero-width character into the page, so a name cannot read as another
/// or reorder the text around it), then escaped as markup.
fn shown(
    out: &mut minijinja::Output,
    state: &minijinja::State,
    value: &Value,
) -> Result<(), minijinja::Error> {
    match value.as_str().map(crate::terminal_text::text) {
        Some(std::borrow::Cow::Owned(neutral)) => {
            let neutral = if value.is_safe() {
                Value::from_safe_string(neutral)
            } else {
                Value::from(neutral)
            };
            minijinja::escape_formatter(out, state, &neutral)
        }
        Some(std::borrow::Cow::Borrowed(_)) | None => {
            minijinja::escape_formatter(out, state, value)
        }
    }
}

/// `name` rendered with `ctx` (the `.html` templates auto-escape).
pub(super) fn render(name: &str, ctx: Value) -> Response {
    match TEMPLATES.get_template(name).and_then(|t| t.render(ctx)) {
        Ok(html) => Html(html).into_response(),
        Err(e) => {
            tracing::error!("dashboard: render {name}: {e:#}");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "the page failed to render",
            )
                .into_response()
        }
    }
}

/// What the handlers share: the sessions.
#[derive(Clone)]
pub struct Dash {
    sessions: Sessions,
}

impl Dash {
    pub fn new(sessions: Sessions) -> Dash {
        Dash { sessions }
    }

    /// `name` rendered with `ctx`.
    fn render(&self, name: &str, ctx: Value) -> Response {
        render(name, ctx)
    }

    async fn viewer(&self, headers: &HeaderMap) -> Result<Viewer, Refused> {
        Ok(self.sessions.viewer(headers).await?)
    }
}

/// Why a dashboard request was refused.
#[derive(Debug)]
pub enum Refused {
    Session(SessionError),
    Problem(Problem),
}

impl From<SessionError> for Refused {
    fn from(e: SessionError) -> Refused {
        Refused::Session(e)
    }
}

impl<E: Into<Problem>> From<E> for Refused {
    fn from(e: E) -> Refused {
        Refused::Problem(e.into())
    }
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        match self {
            Refused::Session(SessionError::NoSession | SessionError::TokenGone { .. }) => {
                Redirect::to("/login").into_response()
            }
            Refused::Session(e @ (SessionError::Csrf | SessionError::Forbidden { .. })) => {
                tracing::info!(reason = %e, "dashboard: refused a form");
                (StatusCode::FORBIDDEN, e.to_string()).into_response()
            }
            Refused::Session(SessionError::Login(e)) => e.into_response(),
            Refused::Session(e @ SessionError::Lookup { .. }) => {
                tracing::error!(error = ?e, "dashboard: cannot check a session");
                (StatusCode::SERVICE_UNAVAILABLE, "the store failed").into_response()
            }
            Refused::Problem(p) => p.into_response(),
        }
    }
}

fn viewer_value(v: &Viewer) -> Value {
    context! { token_id => v.token_id, scope => v.scope.as_str(), csrf => v.csrf }
}

/// `GET /login`: the form, with a fresh login form token also set as the
/// `paddock_login` cookie (`session::login_form_ok`).
pub async fn login_form(Extension(dash): Extension<Dash>) -> Response {
    login_page(&dash, None)
}

/// The login form (saying `error`, when given), with a fresh form token.
fn login_page(dash: &Dash, error: Option<&str>) -> Response {
    let (csrf, cookie) = match session::login_form_token() {
        Ok(pair) => pair,
        Err(e) => return Refused::Session(e).into_response(),
    };
    let mut page = dash.render("login.html", context! { csrf => csrf, error => error });
    page.headers_mut().append(header::SET_COOKIE, cookie);
    page
}

#[derive(Deserialize)]
pub struct LoginForm {
    token: String,
    /// The login form's token (`GET /login` set it as a cookie too).
    #[serde(default)]
    csrf: String,
}

/// `POST /login`: a session for a valid token, else the form again. A
/// post that is not this browser's login form from this origin is 403.
pub async fn login(
    Extension(dash): Extension<Dash>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    if let Err(e) = session::login_form_ok(&headers, &form.csrf) {
        return Refused::Session(e).into_response();
    }
    match dash.sessions.login(&form.token).await {
        Ok(cookie) => {
            let mut done = Redirect::to("/").into_response();
            done.headers_mut().append(header::SET_COOKIE, cookie);
            done.headers_mut()
                .append(header::SET_COOKIE, session::login_form_cleared());
            done
        }
        Err(e) => {
            tracing::info!(reason = %e, "dashboard: refused a login");
            let mut page = login_page(&dash, Some("That token is unknown, revoked or malformed."));
            *page.status_mut() = StatusCode::UNAUTHORIZED;
            page
        }
    }
}

#[derive(Deserialize)]
pub struct CsrfForm {
    csrf: String,
}

/// `POST /logout`.
pub async fn logout(
    Extension(dash): Extension<Dash>,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Result<Response, Refused> {
    let viewer = dash.viewer(&headers).await?;
    viewer.may_post(&headers, &form.csrf, Scope::Read)?;
    let cleared = dash.sessions.logout(&headers);
    Ok(([(header::SET_COOKIE, cleared)], Redirect::to("/login")).into_response())
}

/// The jobs list's filters (an empty value is no filter).
#[derive(Debug, Default, Deserialize)]
pub struct JobsFilter {
    status: Option<String>,
    engine: Option<String>,
    rung: Option<String>,
    cursor: Option<String>,
}

fn given(v: &Option<String>) -> Option<&str> {
    v.as_deref().filter(|s| !s.is_empty())
}

fn duration(ms: Option<u64>) -> String {
    ms.map(|ms| format!("{:.1} s", ms as f64 / 1000.0))
        .unwrap_or_else(|| "-".into())
}

fn row(j: &JobRecord) -> Value {
    let at = j.created_at;
    context! {
        id => j.id, url => format!("/jobs/{}", percent(&j.id)), status => j.status.as_str(), ticket => j.ticket_id, project => j.project,
        engine => j.engine, model => j.model, rung => j.isolation,
        cost => format_usd(j.cost_micros), duration => duration(j.duration_ms),
        created => format!("{} {:02}:{:02}:{:02}", at.date(), at.hour(), at.minute(), at.second()),
    }
}

/// `GET /`: the newest jobs, filtered.
pub async fn jobs(
    State(state): State<AppState>,
    Extension(dash): Extension<Dash>,
    headers: HeaderMap,
    Query(filter): Query<JobsFilter>,
) -> Result<Response, Refused> {
    let viewer = dash.viewer(&headers).await?;
    // A value the form does not offer (an edited or stale URL) is a page
    // saying so, not a list that is empty for no reason it tells.
    let status = given(&filter.status)
        .map(jobs_api::parse_status)
        .transpose()?;
    let engine = given(&filter.engine);
    if let Some(engine) = engine {
        jobs_api::check_engine(engine)?;
    }
    let rung = given(&filter.rung);
    if let Some(rung) = rung {
        jobs_api::check_rung(rung)?;
    }
    let cursor = given(&filter.cursor);
    if let Some(cursor) = cursor {
        check_query("cursor", cursor)?;
        if state.store.job(cursor).await?.is_none() {
            return Err(Refused::Problem(Problem::bad_request(format!(
                "cursor `{}` is not a job of this store (follow the page's \"Older jobs\" link)",
                cursor.chars().take(64).collect::<String>()
            ))));
        }
    }
    // Every filter is the store's: a page holds PAGE matching jobs when
    // there are that many.
    let page = state
        .store
        .list_jobs(&JobQuery {
            status,
            engine: engine.map(str::to_owned),
            isolation: rung.map(str::to_owned),
            after: cursor.map(str::to_owned),
            limit: PAGE,
            branch: None,
        })
        .await?;
    let shown: Vec<Value> = page.iter().map(row).collect();
    let next = match page.last() {
        Some(last) if page.len() == PAGE as usize => {
            let mut q = form_urlencoded(&[
                ("status", given(&filter.status)),
                ("engine", engine),
                ("rung", rung),
            ]);
            q.push_str(&format!("cursor={}", percent(&last.id)));
            Some(q)
        }
        _ => None,
    };
    Ok(dash.render(
        "jobs.html",
        context! {
            viewer => viewer_value(&viewer),
            jobs => shown,
            next => next,
            filtered => status.is_some() || engine.is_some() || rung.is_some(),
            older => cursor.is_some(),
            filter => context! {
                status => given(&filter.status), engine => engine, rung => rung,
            },
            statuses => JobStatus::ALL.iter().map(JobStatus::as_str).collect::<Vec<_>>(),
            engines => crate::engines::KINDS.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
            rungs => jobs_api::RUNGS.iter().map(Isolation::as_str).collect::<Vec<_>>(),
        },
    ))
}

/// `k=v&` for each given pair, URL-encoded.
fn form_urlencoded(pairs: &[(&str, Option<&str>)]) -> String {
    pairs
        .iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k}={}&", percent(v))))
        .collect()
}

fn percent(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn record(state: &AppState, id: &str) -> Result<JobRecord, Refused> {
    state
        .store
        .job(id)
        .await?
        .ok_or_else(|| Refused::Problem(Problem::no_job(id)))
}

fn running(s: JobStatus) -> bool {
    matches!(s, JobStatus::Queued | JobStatus::Running)
}

/// `GET /jobs/{id}`: the record and the live event view.
pub async fn job(
    State(state): State<AppState>,
    Extension(dash): Extension<Dash>,
    headers: HeaderMap,
    JobId(id): JobId,
) -> Result<Response, Refused> {
    let viewer = dash.viewer(&headers).await?;
    let job = record(&state, &id).await?;
    Ok(dash.render(
        "job.html",
        context! {
            viewer => viewer_value(&viewer),
            can_cancel => running(job.status) && viewer.scope.allows(Scope::Submit),
            cost => format_usd(job.cost_micros),
            duration => duration(job.duration_ms),
            url => format!("/jobs/{}", percent(&job.id)),
            job => Value::from_serialize(&job),
        },
    ))
}

/// `POST /jobs/{id}/cancel`: as `POST /v1/jobs/{id}/cancel`, back to the page.
pub async fn cancel(
    State(state): State<AppState>,
    Extension(dash): Extension<Dash>,
    headers: HeaderMap,
    JobId(id): JobId,
    Form(form): Form<CsrfForm>,
) -> Result<Response, Refused> {
    let viewer = dash.viewer(&headers).await?;
    viewer.may_post(&headers, &form.csrf, Scope::Submit)?;
    let asker = crate::server::asker::Asker {
        token_id: viewer.token_id.clone(),
        scope: viewer.scope,
        token_name: viewer.token_name.clone(),
        dashboard: true,
    };
    let outcome = state.queue.cancel(&id, &asker).await?;
    tracing::info!(job = %id, token = %viewer.token_id, ?outcome, "dashboard: cancel");
    Ok(Redirect::to(&format!("/jobs/{}", percent(&id))).into_response())
}

/// `GET /jobs/{id}/lines`: the job's events as the lines `paddock run`
/// prints, as SSE (`event: line`, `id:` the seq, `data: {"seq", "kind",
/// "line"}`), resuming after `Last-Event-ID`; once the job is final and
/// every line was sent, one `event: end` with its status and reason.
pub async fn lines(
    State(state): State<AppState>,
    Extension(dash): Extension<Dash>,
    headers: HeaderMap,
    JobId(id): JobId,
) -> Result<Response, Refused> {
    let viewer = dash.viewer(&headers).await?;
    record(&state, &id).await?;
    let slot = match state.streams.take(&viewer.token_id) {
        Ok(slot) => slot,
        Err(refused) => return Ok(refused.into_response()),
    };
    let after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0);
    let (events_tx, events) = outbox(Some(STALL));
    crate::server::events::spawn_follow(state.clone(), id.clone(), after, events_tx, "dashboard");
    // Rendered as the body asks for them: nothing but the outbox's
    // budget waits for a slow browser.
    let view = (events, Lines::default(), state, id, slot);
    let stream = futures::stream::unfold(Some(view), |open| async move {
        let (mut events, mut view, state, id, slot) = open?;
        loop {
            let Some(e) = events.recv().await else { break };
            let Some(line) = view.line(&e) else { continue };
            let data = serde_json::json!({ "seq": e.seq, "kind": e.body.kind(), "line": line });
            let event = Event::default()
                .id(e.seq.to_string())
                .event("line")
                .data(crate::server::json::to_string(&data).unwrap_or_default());
            return Some((
                Ok::<Event, Infallible>(event),
                Some((events, view, state, id, slot)),
            ));
        }
        if let Some(why) = events.ending() {
            return Some((Ok(Event::default().comment(why)), None));
        }
        match state.store.job(&id).await {
            Ok(Some(job)) if !running(job.status) => {
                let data =
                    serde_json::json!({ "status": job.status.as_str(), "reason": job.reason });
                let end = Event::default()
                    .event("end")
                    .data(crate::server::json::to_string(&data).unwrap_or_default());
                Some((Ok(end), None))
            }
            _ => None,
        }
    });
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// `GET /spend`: the usage report as charts.
pub async fn spend(
    State(state): State<AppState>,
    Extension(dash): Extension<Dash>,
    headers: HeaderMap,
) -> Result<Response, Refused> {
    let viewer = dash.viewer(&headers).await?;
    let (jobs, calls) = state.store.usage().await?;
    let report = crate::usage::report(&jobs, &calls);
    Ok(dash.render(
        "spend.html",
        context! {
            viewer => viewer_value(&viewer),
            total => format_usd(report.total.cost_micros),
            calls => report.total.calls,
            jobs => report.total.jobs,
            charts => Value::from_serialize(charts::charts(&report)),
            bar_width => charts::BAR_WIDTH,
            row => charts::ROW,
        },
    ))
}

/// `GET /host`: what `/v1/discover` answers, as a page.
pub async fn host(
    State(state): State<AppState>,
    Extension(dash): Extension<Dash>,
    headers: HeaderMap,
) -> Result<Response, Refused> {
    let viewer = dash.viewer(&headers).await?;
    let crate::server::json::Json(d) = crate::server::discover::discover(State(state)).await?;
    Ok(dash.render(
        "host.html",
        context! { viewer => viewer_value(&viewer), d => Value::from_serialize(&d) },
    ))
}

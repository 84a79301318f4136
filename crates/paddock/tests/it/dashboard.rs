//! The dashboard at `/` of the real `paddock serve` binary: the browser
//! login (a session cookie that is HttpOnly and SameSite=Strict, refused by
//! the API, ended by a revoked token, CSRF-checked on POSTs) over plain
//! HTTP, then the pages in a real headless Chromium (Debian's `chromium`,
//! driven over the DevTools protocol, `paddock_test_support::chromium`):
//! they load without a console error or CSP violation, a running job's
//! lines appear before it ends, hostile job output stays text, the spend
//! charts carry the ledger's values. Screenshots go to
//! `$CARGO_TARGET_DIR/ci-artifacts/dashboard/` (printed by `.ci/run`).
//! Without Chromium the browser test is skipped with a reason, and fails
//! when `CI=true`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::time::Duration;

use paddock::store::Store as _;
use paddock_protocol::{CallStatus, EventBody, JobStatus, ModelCall, TokenUsage};
use paddock_test_support::chromium;
use serde_json::Value;

use crate::serve::{is_final, spec, token, Server, TURN};
use paddock_test_support::prelude::*;

/// The CSP every dashboard answer carries.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// An agent message that would run script if it were ever markup.
const HOSTILE: &str =
    r#"first: <script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\">"#;

/// A stand-in that says `HOSTILE`, waits for `gate`, says `second`, ends.
fn slow_turn(gate: &std::path::Path) -> String {
    format!(
        r#"echo '{{"type":"thread.started","thread_id":"t"}}'
echo '{{"type":"turn.started"}}'
echo '{{"type":"item.completed","item":{{"id":"m1","type":"agent_message","text":"{HOSTILE}"}}}}'
i=0; while [ ! -e '{gate}' ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
echo '{{"type":"item.completed","item":{{"id":"m2","type":"agent_message","text":"second"}}}}'
echo '{{"type":"turn.completed","usage":{{"input_tokens":1,"output_tokens":1}}}}'"#,
        gate = gate.display()
    )
}

/// A client that follows no redirect and sends no token.
fn browserish() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// The login form's token and its `paddock_login` cookie (`name=value`),
/// as `GET /login` hands them to a browser.
async fn login_form(server: &Server) -> (String, String) {
    let resp = get(server, "/login", None).await;
    let set = resp.headers()["set-cookie"].to_str().unwrap().to_owned();
    let (pair, attributes) = set.split_once("; ").unwrap();
    assert_eq!(
        (pair.split_once('=').unwrap().0, attributes),
        (
            "paddock_login",
            "HttpOnly; SameSite=Strict; Path=/login; Max-Age=3600"
        )
    );
    let html = resp.text().await.unwrap();
    (csrf_of(&html), pair.to_owned())
}

/// Posts the login form with `token` as a browser would (the form's
/// token, its cookie); the answer.
async fn post_login(server: &Server, token: &str) -> reqwest::Response {
    let (csrf, cookie) = login_form(server).await;
    browserish()
        .post(server.url("/login"))
        .header("cookie", cookie)
        .header("origin", server.url("").trim_end_matches('/'))
        .header("sec-fetch-site", "same-origin")
        .form(&[("token", token), ("csrf", &csrf)])
        .send()
        .await
        .unwrap()
}

/// Logs in with `token`; the session cookie (`name=value`).
pub(crate) async fn login(server: &Server, token: &str) -> String {
    let resp = post_login(server, token).await;
    assert_eq!(resp.status(), 303, "{}", server.stderr());
    let set: Vec<&str> = resp
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    let (pair, attributes) = set[0].split_once("; ").unwrap();
    assert_eq!(
        (pair.split_once('=').unwrap().0, attributes, &set[1..]),
        (
            "paddock_session",
            "HttpOnly; SameSite=Strict; Path=/; Max-Age=43200",
            &["paddock_login=; HttpOnly; SameSite=Strict; Path=/login; Max-Age=0"][..]
        )
    );
    pair.to_owned()
}

pub(crate) async fn get(server: &Server, path: &str, cookie: Option<&str>) -> reqwest::Response {
    let mut req = browserish().get(server.url(path));
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    req.send().await.unwrap()
}

/// The CSRF token in a page's logout form.
fn csrf_of(html: &str) -> String {
    let at = html.find(r#"name="csrf" value=""#).unwrap() + 19;
    html[at..at + 64].to_owned()
}

#[tokio::test]
async fn the_browser_logs_in_once_and_holds_a_strict_cookie_the_api_refuses() {
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let id = server.submit_ok(&spec(&home, "T-1", TURN), 0).await;
    server.wait_for(&id, is_final).await;

    // No session: every page sends the browser to the login form.
    let resp = get(&server, "/", None).await;
    assert_eq!(
        (
            resp.status().as_u16(),
            resp.headers()["location"].to_str().unwrap(),
            resp.headers()["content-security-policy"].to_str().unwrap(),
        ),
        (303, "/login", CSP)
    );
    // A wrong token is the form again, 401, and no session cookie (only a
    // fresh login form token).
    let resp = post_login(&server, "pdk-api-000000000000-00").await;
    let set: Vec<String> = resp
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().split('=').next().unwrap().to_owned())
        .collect();
    assert_eq!(
        (resp.status().as_u16(), set),
        (401, vec!["paddock_login".to_owned()])
    );

    let read = token(&home, "read").await;
    // Login CSRF: another site's page posting the login form (with the
    // attacker's own valid token) signs no browser in: without the login
    // form's token and its cookie, with a token that is not the cookie's,
    // or from another origin with both, it is 403 and sets no session.
    let (csrf, form_cookie) = login_form(&server).await;
    let forged = |form: Vec<(&'static str, String)>, extra: Vec<(&'static str, String)>| {
        let mut req = browserish().post(server.url("/login")).form(&form);
        for (k, v) in extra {
            req = req.header(k, v);
        }
        req.send()
    };
    let mut refusals = Vec::new();
    for (form, extra) in [
        (vec![("token", read.clone())], vec![]),
        (
            vec![("token", read.clone()), ("csrf", csrf.clone())],
            vec![],
        ),
        (
            vec![("token", read.clone()), ("csrf", "0".repeat(64))],
            vec![("cookie", form_cookie.clone())],
        ),
        (
            vec![("token", read.clone()), ("csrf", csrf.clone())],
            vec![
                ("cookie", form_cookie.clone()),
                ("origin", "http://evil.example".to_owned()),
            ],
        ),
        (
            vec![("token", read.clone()), ("csrf", csrf.clone())],
            vec![
                ("cookie", form_cookie.clone()),
                ("sec-fetch-site", "cross-site".to_owned()),
            ],
        ),
    ] {
        let resp = forged(form, extra).await.unwrap();
        refusals.push((
            resp.status().as_u16(),
            resp.headers().get("set-cookie").is_some(),
        ));
    }
    assert_eq!(refusals, vec![(403, false); 5]);

    let cookie = login(&server, &read).await;
    let page = get(&server, "/", Some(&cookie)).await;
    assert_eq!(page.status(), 200, "{}", server.stderr());
    let html = page.text().await.unwrap();
    assert!(html.contains(&id), "{html}");
    // The cookie opens the dashboard only: the API wants a bearer token.
    let api = get(&server, "/v1/jobs", Some(&cookie)).await;
    assert_eq!(api.status(), 401);

    // A POST without the session's CSRF token, or from another origin, is
    // refused; and a read token may not cancel even with it.
    let csrf = csrf_of(&html);
    let post = |form: Vec<(&'static str, String)>, origin: Option<&'static str>| {
        let mut req = browserish()
            .post(server.url(&format!("/jobs/{id}/cancel")))
            .header("cookie", cookie.clone())
            .form(&form);
        if let Some(o) = origin {
            req = match o.strip_prefix("fetch:") {
                Some(site) => req.header("sec-fetch-site", site),
                None => req.header("origin", o),
            };
        }
        req.send()
    };
    // (A read token is refused the cancel anyway: each answer must say
    // which check refused it.)
    let mut statuses = Vec::new();
    for (form, origin) in [
        (vec![("csrf", "0".repeat(64))], None),
        (vec![("csrf", csrf.clone())], Some("http://evil.example")),
        (vec![("csrf", csrf.clone())], Some("fetch:cross-site")),
        (vec![("csrf", csrf.clone())], Some("fetch:same-site")),
        (vec![("csrf", csrf.clone())], None),
    ] {
        let resp = post(form, origin).await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        statuses.push((status, text.contains("CSRF token, or from another origin")));
    }
    assert_eq!(
        statuses,
        [
            (403, true),
            (403, true),
            (403, true),
            (403, true),
            (403, false)
        ]
    );

    // Revoking the token ends its session at once.
    let token_id = read.strip_prefix("pdk-api-").unwrap()[..12].to_owned();
    let out = home.paddock(&["token", "revoke", &token_id], &[]).await;
    assert!(out.status.success());
    let resp = get(&server, "/spend", Some(&cookie)).await;
    assert_eq!(
        (
            resp.status().as_u16(),
            resp.headers()["location"].to_str().unwrap()
        ),
        (303, "/login")
    );
}

/// A finished job `id` on `rung`, created `offset_s` seconds after a base time.
/// A cancel from the dashboard names who asked: the server's host, that
/// it came from the dashboard, and the signed-in token's id, scope and
/// name, in the job's reason and its status event, which the job page
/// shows. Before, the reason was plain `cancelled while queued`, and the
/// request the dashboard made named the token's id and scope only.
#[tokio::test]
async fn a_cancel_from_the_dashboard_names_the_signed_in_token() {
    let home = Home::new();
    let server = Server::start(&home, &["--max-concurrent-jobs", "1"]).await;
    let gate = home.path().join("never");
    let running = server
        .submit_ok(&spec(&home, "T-1", &crate::serve::gated(&gate)), 0)
        .await;
    let queued = server.submit_ok(&spec(&home, "T-2", TURN), 0).await;
    server.wait_for(&running, |s| s == JobStatus::Running).await;
    let out = home
        .paddock(
            &["token", "create", "--scope", "submit", "--name", "ops desk"],
            &[],
        )
        .await;
    assert!(out.status.success());
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let cookie = login(&server, &token).await;
    let page = get(&server, &format!("/jobs/{queued}"), Some(&cookie)).await;
    let csrf = csrf_of(&page.text().await.unwrap());
    let resp = browserish()
        .post(server.url(&format!("/jobs/{queued}/cancel")))
        .header("cookie", cookie.clone())
        .form(&[("csrf", csrf)])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 303, "{}", server.stderr());
    let by = format!(
        "{} (dashboard, API token {}, scope submit, name \"ops desk\")",
        crate::hosts::host_of(&home).1,
        crate::serve::token_id(&token)
    );
    let reason = format!("cancelled while queued, asked by {by}");
    let record = server.job(&queued).await;
    let events: Vec<EventBody> = home
        .store()
        .await
        .events(&queued, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.body)
        .collect();
    let html = get(&server, &format!("/jobs/{queued}"), Some(&cookie))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(
        (record.status, record.reason.as_deref(), events),
        (
            JobStatus::Cancelled,
            Some(reason.as_str()),
            vec![EventBody::Status {
                phase: paddock_protocol::event::Phase::Cancelled,
                detail: Some(reason.clone()),
            }]
        )
    );
    // The job page shows the reason (its quotes escaped as HTML).
    assert!(
        html.contains("cancelled while queued, asked by")
            && html.contains(&format!(
                "dashboard, API token {}, scope submit",
                crate::serve::token_id(&token)
            )),
        "{html}"
    );
    std::fs::write(&gate, "").unwrap();
}

fn done_job(id: &str, rung: &str, offset_s: i64) -> paddock_protocol::JobRecord {
    paddock_test_support::jobs::stored_record(id, "gpt-5.5", rung, JobStatus::Done, offset_s)
}

/// The job ids of a jobs page's rows, and its `Older jobs` link.
fn listed(html: &str) -> (Vec<String>, Option<String>) {
    let ids = html
        .split("<tr data-id=\"")
        .skip(1)
        .map(|rest| rest[..rest.find('"').unwrap()].to_owned())
        .collect();
    let next = html.split_once("id=\"next\" href=\"").map(|(_, rest)| {
        rest[..rest.find('"').unwrap()]
            .replace("&amp;", "&")
            .replace("&#x2f;", "/")
    });
    (ids, next)
}

/// An error page's status, media type, CSP, and what it says.
async fn error_page(resp: reqwest::Response) -> (u16, String, String, String) {
    let status = resp.status().as_u16();
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    let (media, csp) = (header("content-type"), header("content-security-policy"));
    let html = resp.text().await.unwrap();
    let detail = html
        .split_once("id=\"error-detail\">")
        .and_then(|(_, rest)| rest.split_once("</p>"))
        .map(|(d, _)| {
            d.replace("&#x2f;", "/")
                .replace("&#x27;", "'")
                .replace("&quot;", "\"")
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&")
        })
        .unwrap_or_else(|| format!("no error detail in: {html}"));
    (status, media, csp, detail)
}

/// A filter value the form does not offer, a job id no job has, a cursor
/// no job is, a form without its CSRF token and a browser's request for a
/// path no route takes are each a page (HTML, the CSP, the problem's
/// detail), never a bare problem+json body; and the
/// rung filter is the store's: one sandbox job older than a full page of
/// process jobs is listed on `?rung=sandbox` (before, the rung was
/// filtered out of the newest 100 jobs, which left that page empty).
#[tokio::test]
async fn refusals_are_pages_and_the_rung_filter_fills_its_page() {
    let home = Home::new();
    let store = home.store().await;
    store
        .insert_job(&done_job("job-000", "sandbox", 0), "{}")
        .await
        .unwrap();
    for i in 1..=100 {
        store
            .insert_job(&done_job(&format!("job-{i:03}"), "process", i), "{}")
            .await
            .unwrap();
    }
    let server = Server::start(&home, &[]).await;
    let read = token(&home, "read").await;
    let cookie = login(&server, &read).await;
    let (server, cookie) = (&server, &cookie);
    let page = |path: String| async move {
        let resp = get(server, &path, Some(cookie)).await;
        assert_eq!(resp.status(), 200, "{path}");
        listed(&resp.text().await.unwrap())
    };
    let newest_first = |from: usize, to: usize| -> Vec<String> {
        (from..=to).rev().map(|i| format!("job-{i:03}")).collect()
    };
    assert_eq!(
        page("/?rung=sandbox".into()).await,
        (vec!["job-000".to_owned()], None)
    );
    let (process, next) = page("/?rung=process&status=done".into()).await;
    assert_eq!(
        (process, next.as_deref()),
        (
            newest_first(1, 100),
            Some("/?status=done&rung=process&cursor=job-001")
        )
    );
    assert_eq!(page(next.unwrap()).await, (Vec::new(), None));
    assert_eq!(
        page("/?cursor=job-001".into()).await,
        (vec!["job-000".to_owned()], None)
    );
    // An empty list says why: the filters, or the end of the pages.
    let empty = |path: &'static str| async move {
        let html = get(server, path, Some(cookie)).await.text().await.unwrap();
        html.split_once("id=\"no-jobs\">")
            .and_then(|(_, rest)| rest.split_once("</td>"))
            .map(|(said, _)| said.to_owned())
    };
    assert_eq!(
        [
            empty("/?rung=sandbox&status=failed").await,
            empty("/?rung=process&cursor=job-001").await,
            empty("/?cursor=job-000").await,
            empty("/").await,
        ],
        [
            Some("No jobs match these filters.".to_owned()),
            Some("No older jobs match these filters.".to_owned()),
            Some("No older jobs.".to_owned()),
            None,
        ]
    );

    let html = "text/html; charset=utf-8".to_owned();
    let mut seen = Vec::new();
    for path in [
        "/?rung=box",
        "/?engine=codx",
        "/?status=finished",
        "/?cursor=job-nope",
        "/jobs/job-nope",
    ] {
        seen.push(error_page(get(server, path, Some(cookie)).await).await);
    }
    let refused = browserish()
        .post(server.url("/jobs/job-001/cancel"))
        .header("cookie", cookie.clone())
        .form(&[("csrf", "0".repeat(64))])
        .send()
        .await
        .unwrap();
    seen.push(error_page(refused).await);
    // A path no route takes: a page for a browser's navigation (it
    // accepts HTML), problem+json for an API client and under /v1/.
    let nowhere = |path: &'static str, accept: &'static str| {
        browserish()
            .get(server.url(path))
            .header("accept", accept)
            .send()
    };
    seen.push(
        error_page(
            nowhere("/jobs", "text/html,application/xhtml+xml,*/*;q=0.8")
                .await
                .unwrap(),
        )
        .await,
    );
    let media = |resp: reqwest::Response| {
        (
            resp.status().as_u16(),
            resp.headers()["content-type"].to_str().unwrap().to_owned(),
        )
    };
    assert_eq!(
        [
            media(nowhere("/jobs", "*/*").await.unwrap()),
            media(nowhere("/v1/nope", "text/html").await.unwrap()),
        ],
        [
            (404, "application/problem+json".to_owned()),
            (404, "application/problem+json".to_owned())
        ]
    );
    let page_of =
        |status: u16, detail: &str| (status, html.clone(), CSP.to_owned(), detail.to_owned());
    assert_eq!(
        seen,
        vec![
            page_of(400, "rung `box` is not an isolation rung (`process`, `sandbox`)"),
            page_of(400, "engine `codx` is not an engine (`codex`, `claude`)"),
            page_of(
                400,
                "status `finished` is not a job status (`queued`, `running`, `done`, `failed`, \
                 `held`, `timed_out`, `cancelled`, `bounced`)"
            ),
            page_of(
                400,
                "cursor `job-nope` is not a job of this store (follow the page's \"Older jobs\" link)"
            ),
            page_of(404, "no job job-nope"),
            page_of(
                403,
                "a form without this session's CSRF token, or from another origin"
            ),
            page_of(404, "no route /jobs"),
        ]
    );
}

/// Where screenshots go: `$CARGO_TARGET_DIR/ci-artifacts/dashboard`.
fn artifacts() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("ci-artifacts").join("dashboard")
}

/// A settled ledger row of `cost` on `model`, started on `day`.
fn call(job: &str, seq: u64, model: &str, cost: i64, day: &str) -> ModelCall {
    ModelCall {
        job_id: job.into(),
        attempt: 1,
        seq,
        provider: "scripted".into(),
        requested_model: model.into(),
        served_model: Some(model.into()),
        tokens: TokenUsage::default(),
        ttft_ms: Some(5),
        duration_ms: 10,
        status: CallStatus::Ok,
        http_status: Some(200),
        error: None,
        estimated: false,
        price_version: "test".into(),
        cost_micros: cost,
        started_at: time::OffsetDateTime::parse(
            &format!("{day}T12:00:00Z"),
            &time::format_description::well_known::Rfc3339,
        )
        .unwrap(),
    }
}

#[tokio::test]
async fn in_headless_chromium_pages_load_clean_events_stream_live_output_stays_text_charts_draw() {
    let Some(binary) = chromium::find() else {
        assert!(
            !in_ci(),
            "chromium is not installed (apt-get install chromium)"
        );
        eprintln!("skipped: no chromium on PATH (Debian: apt-get install chromium)");
        return;
    };
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let gate = home.path().join("gate");
    let id = server
        .submit_ok(&spec(&home, "T-1", &slow_turn(&gate)), 0)
        .await;
    let submit = token(&home, "submit").await;
    let browser = chromium::Browser::launch(&binary, &home.path().join("chromium")).await;
    let page = browser.page().await;
    let shots = artifacts();

    // The login form, filled and sent as a person would.
    page.goto(&server.url("/login")).await;
    let loads = 1;
    page.eval(&format!(
        "document.querySelector('input[name=token]').value = {}; \
         document.getElementById('login').submit(); true",
        Value::from(submit.as_str())
    ))
    .await;
    page.wait_loads(loads).await;
    page.wait_for(
        "location.pathname === '/' && !!document.getElementById('jobs')",
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(
        page.eval("document.cookie").await,
        Value::from(""),
        "the session cookie is HttpOnly"
    );

    // The job's page: the first line arrives while the job still runs.
    page.goto(&server.url(&format!("/jobs/{id}"))).await;
    page.wait_for(
        "[...document.querySelectorAll('#events li')].some(li => li.textContent.includes('first:'))",
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(server.job(&id).await.status, JobStatus::Running);
    assert_eq!(
        page.eval("document.querySelectorAll('#events li').length > 0 && document.getElementById('live').textContent").await,
        Value::from("live")
    );
    page.screenshot(&shots.join("job-live.png")).await;
    // Hostile output is text: no element made of it, nothing ran.
    assert_eq!(
        page.eval("[typeof window.__pwned, document.querySelectorAll('#events *:not(li)').length, document.images.length]").await,
        serde_json::json!(["undefined", 0, 0])
    );

    std::fs::write(&gate, "").unwrap();
    page.wait_for(
        "document.getElementById('live').textContent === 'ended'",
        Duration::from_secs(60),
    )
    .await;
    let record = server.job(&id).await;
    assert_eq!(record.status, JobStatus::Done, "{}", server.stderr());
    let stored = home.store().await.events(&id, 0).await.unwrap();
    let mut view = paddock::event_line::Lines::default();
    let expected: Vec<String> = stored.iter().filter_map(|e| view.line(e)).collect();
    assert!(
        expected.iter().any(|l| l.contains("<img src=x onerror=")),
        "{expected:?}"
    );
    let shown: Vec<String> = serde_json::from_value(
        page.eval("[...document.querySelectorAll('#events li')].map(li => li.textContent)")
            .await,
    )
    .unwrap();
    assert_eq!(shown, expected);
    assert_eq!(
        page.eval("[document.getElementById('job-status').textContent, typeof window.__pwned, document.images.length, !!document.getElementById('cancel')]").await,
        serde_json::json!(["done", "undefined", 0, false])
    );
    page.screenshot(&shots.join("job-done.png")).await;

    // Spend: ledger rows on two models and two days become bars.
    let store = home.store().await;
    for c in [
        call(&id, 1, "m-big", 3_000_000, "2020-01-02"),
        call(&id, 2, "m-small", 1_000_000, "2020-01-01"),
    ] {
        store.insert_model_call(&c).await.unwrap();
    }
    page.goto(&server.url("/spend")).await;
    let bars = |chart: &str| {
        format!(
            "[...document.querySelectorAll('svg#spend-{chart} g.bar')].map(g => \
             [g.dataset.key, Number(g.dataset.costMicros), Number(g.querySelector('rect').getAttribute('width'))])"
        )
    };
    let mut charts = Vec::new();
    for chart in ["day", "model", "project", "task_type"] {
        charts.push(page.eval(&bars(chart)).await);
    }
    assert_eq!(
        charts,
        vec![
            // The job's own day (no calls) after the calls' days.
            serde_json::json!([
                ["2020-01-01", 1_000_000, 160],
                ["2020-01-02", 3_000_000, 480],
                [record.created_at.date().to_string(), 0, 0]
            ]),
            serde_json::json!([["m-big", 3_000_000, 480], ["m-small", 1_000_000, 160]]),
            serde_json::json!([["tests", 4_000_000, 480]]),
            serde_json::json!([["chore", 4_000_000, 480]]),
        ]
    );
    assert_eq!(
        page.eval("document.getElementById('spend-total').textContent")
            .await,
        Value::from("$4.000000")
    );
    page.screenshot(&shots.join("spend.png")).await;

    // The jobs list, filtered, and the host page.
    page.goto(&server.url("/?status=done&rung=process")).await;
    assert_eq!(
        page.eval("[...document.querySelectorAll('#jobs tbody tr')].map(tr => tr.dataset.id)")
            .await,
        serde_json::json!([id])
    );
    page.screenshot(&shots.join("jobs.png")).await;
    page.goto(&server.url("/?rung=sandbox")).await;
    assert_eq!(
        page.eval("document.querySelectorAll('#jobs tbody tr[data-id]').length")
            .await,
        Value::from(0)
    );
    page.goto(&server.url("/host")).await;
    assert_eq!(
        page.eval("[document.getElementById('cap-slots').textContent, document.querySelector('#rungs tr[data-rung=process]').dataset.supported]").await,
        serde_json::json!(["2", "true"])
    );
    page.screenshot(&shots.join("host.png")).await;

    assert_eq!(page.errors(), Vec::<String>::new());
    eprintln!("screenshots in {}", shots.display());
    browser.close().await;
}

/// Probe: one token opening event streams without end (the API's and the
/// dashboard's together) is held at 16 open at once; the 17th is 429
/// `too_many_streams`, another token is not held back, and a closed
/// stream frees its place.
#[tokio::test]
async fn a_token_holds_at_most_sixteen_event_streams_api_and_dashboard_together() {
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let gate = home.path().join("gate");
    let id = server
        .submit_ok(&spec(&home, "T-1", &slow_turn(&gate)), 0)
        .await;
    server.wait_for(&id, |s| s == JobStatus::Running).await;
    let read = token(&home, "read").await;
    let api = crate::serve::client_with(&read);
    let events = server.url(&format!("/v1/jobs/{id}/events"));
    let lines = format!("/jobs/{id}/lines");
    let mut open = Vec::new();
    for _ in 0..15 {
        open.push(api.get(&events).send().await.unwrap());
    }
    let cookie = login(&server, &read).await;
    open.push(get(&server, &lines, Some(&cookie)).await);
    let opened: Vec<u16> = open.iter().map(|r| r.status().as_u16()).collect();
    assert_eq!(opened, vec![200; 16], "{}", server.stderr());

    let refused = api.get(&events).send().await.unwrap();
    let status = refused.status().as_u16();
    let retry = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .to_owned();
    let body: Value = serde_json::from_str(&refused.text().await.unwrap()).unwrap();
    let dash_refused = get(&server, &lines, Some(&cookie)).await.status().as_u16();
    let other = crate::serve::client_with(&token(&home, "read").await)
        .get(&events)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16();
    assert_eq!(
        (
            status,
            retry.as_str(),
            body["code"].as_str(),
            dash_refused,
            other
        ),
        (429, "1", Some("too_many_streams"), 429, 200)
    );

    // A stream its client closed gives its place back (the server sees the
    // close at the latest at the stream's next keep-alive, 15 s).
    drop(open.pop());
    let mut again = 0;
    for _ in 0..60 {
        again = api.get(&events).send().await.unwrap().status().as_u16();
        if again == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(again, 200);
    std::fs::write(&gate, "").unwrap();
    server.wait_for(&id, is_final).await;
}

/// Text a job controls that would be markup, script, a link, style or a
/// request if a page ever took it as anything but text; `{port}` is a
/// loopback listener that must never be asked for anything.
const INERT: &str = r#"<script>window.__pwned=1</script>"><img src=x onerror="window.__pwned=2"><img src="http://127.0.0.1:{port}/img"><script src="http://127.0.0.1:{port}/js"></script><a id=evil href="javascript:window.__pwned=3">j</a><a href="data:text/html,<script>parent.__pwned=4</script>">d</a><svg onload="window.__pwned=5"></svg><style>@import url(http://127.0.0.1:{port}/css); body{display:none}</style><link rel=stylesheet href="http://127.0.0.1:{port}/link"><iframe src="http://127.0.0.1:{port}/frame"></iframe>' onmouseover='window.__pwned=6' x='"#;

/// Characters that show nothing, reorder what is around them or are
/// commands to a terminal: a page must show them as their escapes.
const HIDDEN: &str = "ok\u{202e}fdp.exe \u{2066}x\u{2069} a\u{200b}b\u{feff}c \x1b]8;;http://evil\x07link\x1b]8;;\x07 \x1b[2Kgone";

/// Probe: a job whose every text is hostile (ticket, project, model,
/// branch, base, reason, changed files, each kind of event line, a ledger
/// row's model) is put in the store and every page showing it is loaded in
/// real Chromium, which proves from the browser that no script ran (no
/// `window.__pwned`), nothing was fetched from elsewhere (a loopback
/// listener hears nothing, no image, only the dashboard's own script and
/// stylesheet), no link leads off this server, no element carries a style
/// or an event handler, and no control, bidirectional override or
/// zero-width character reaches a page's text or attributes (each shown as
/// its escape, as the CLI prints it). Then the CSP itself: an inline
/// script and an inline handler put into the page do not run, and Chromium
/// reports them as violations.
#[tokio::test]
async fn in_headless_chromium_hostile_job_text_stays_inert_on_every_page() {
    let Some(binary) = chromium::find() else {
        assert!(
            !in_ci(),
            "chromium is not installed (apt-get install chromium)"
        );
        eprintln!("skipped: no chromium on PATH (Debian: apt-get install chromium)");
        return;
    };
    // Whatever asks the loopback listener for anything is counted.
    let trap = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = trap.local_addr().unwrap().port();
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = hits.clone();
    let listening = tokio::spawn(async move {
        while let Ok((_conn, _)) = trap.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let evil = format!("{}{HIDDEN}", INERT.replace("{port}", &port.to_string()));

    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let store = home.store().await;
    let id = "job-hostile";
    let mut job = paddock_test_support::jobs::stored_record(
        id,
        &format!("m{evil}"),
        "process",
        JobStatus::Failed,
        0,
    );
    job.ticket_id = format!("T{evil}");
    job.project = format!("p{evil}");
    job.branch = format!("b{evil}");
    job.base_ref = format!("r{evil}");
    job.reason = Some(format!("reason{evil}\nsecond line"));
    job.changed_files = vec![format!("f{evil}"), "src/\u{202e}txt.exe".to_owned()];
    store.insert_job(&job, "{}").await.unwrap();
    let at = job.created_at;
    let bodies = [
        EventBody::Text {
            text: format!("says{evil}"),
        },
        EventBody::ToolCall {
            call_id: Some("c1".into()),
            tool: format!("tool{evil}"),
            command: Some(format!("echo '{evil}'")),
            input: Value::Null,
        },
        EventBody::ToolResult {
            call_id: Some("c1".into()),
            exit_code: Some(1),
            is_error: true,
            output: format!("out{evil}"),
        },
        EventBody::FileChange {
            path: format!("file{evil}"),
            change: paddock_protocol::ChangeKind::Add,
        },
        EventBody::Policy {
            rule: format!("rule{evil}"),
            message: format!("policy{evil}"),
        },
        EventBody::Error {
            message: format!("error{evil}"),
            source: Some(format!("src{evil}")),
            fatal: true,
        },
    ];
    for (seq, body) in (1..).zip(bodies) {
        store
            .append_event(&paddock_protocol::AgentEvent {
                job_id: id.into(),
                seq,
                at,
                body,
            })
            .await
            .unwrap();
    }
    store
        .insert_model_call(&call(id, 1, &format!("m{evil}"), 1_000_000, "2020-01-01"))
        .await
        .unwrap();

    let read = token(&home, "read").await;
    let browser = chromium::Browser::launch(&binary, &home.path().join("chromium")).await;
    let page = browser.page().await;
    page.goto(&server.url("/login")).await;
    page.eval(&format!(
        "document.querySelector('input[name=token]').value = {}; \
         document.getElementById('login').submit(); true",
        Value::from(read.as_str())
    ))
    .await;
    page.wait_loads(1).await;
    page.wait_for(
        "location.pathname === '/' && !!document.getElementById('jobs')",
        Duration::from_secs(30),
    )
    .await;

    // What each page must be, read in the browser: nothing ran, the only
    // script and stylesheet are the dashboard's, no image, every link and
    // form stays on this server, no style or handler attribute, and no
    // dangerous character in any text or attribute.
    let origin = server.url("").trim_end_matches('/').to_owned();
    let check = format!(
        r#"(() => {{
          const origin = {origin};
          const bad = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u180e\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/;
          const attrs = [...document.querySelectorAll('*')].flatMap(e => [...e.attributes]);
          return {{
            pwned: typeof window.__pwned,
            scripts: [...document.scripts].map(s => s.src),
            sheets: [...document.styleSheets].map(s => s.href),
            images: document.images.length + document.querySelectorAll('iframe, object, embed, link:not([rel=stylesheet])').length,
            offsite: [...document.querySelectorAll('a[href], area[href]')].map(a => a.href)
              .concat([...document.forms].map(f => f.action))
              .filter(u => !u.startsWith(origin + '/')),
            handlers: attrs.filter(a => a.name === 'style' || a.name.startsWith('on')).map(a => a.name),
            hidden: [document.title, document.documentElement.textContent].concat(attrs.map(a => a.value))
              .filter(t => bad.test(t)).length,
            escaped: document.documentElement.textContent.includes('ok\\u{{202e}}fdp.exe \\u{{2066}}x\\u{{2069}} a\\u{{200b}}b\\u{{feff}}c \\u{{1b}}]8;;http://evil\\u{{7}}link'),
          }};
        }})()"#,
        origin = Value::from(origin.as_str())
    );
    let clean = serde_json::json!({
        "pwned": "undefined",
        "scripts": [format!("{origin}/assets/dash.js")],
        "sheets": [format!("{origin}/assets/dash.css")],
        "images": 0,
        "offsite": [],
        "handlers": [],
        "hidden": 0,
        "escaped": true,
    });
    let mut seen = Vec::new();
    for path in [
        "/".to_owned(),
        "/?status=failed".to_owned(),
        format!("/jobs/{id}"),
        "/spend".to_owned(),
    ] {
        page.goto(&server.url(&path)).await;
        if path.starts_with("/jobs/") {
            page.wait_for(
                "document.getElementById('live').textContent === 'ended'",
                Duration::from_secs(30),
            )
            .await;
            assert_eq!(
                page.eval("document.querySelectorAll('#events li').length")
                    .await,
                Value::from(6)
            );
        }
        seen.push((path.clone(), page.eval(&check).await));
        page.screenshot(&artifacts().join(format!(
            "hostile-{}.png",
            path.trim_start_matches('/')
                .replace(['/', '?', '='], "-")
                .trim_end_matches('-')
        )))
        .await;
    }
    let expected: Vec<(String, Value)> = seen
        .iter()
        .map(|(path, _)| (path.clone(), clean.clone()))
        .collect();
    assert_eq!(seen, expected);

    // The job page shows each text whole, as the CLI prints it.
    page.goto(&server.url(&format!("/jobs/{id}"))).await;
    let shown = |selector: &str| {
        format!(
            "document.querySelector({}).textContent",
            Value::from(selector)
        )
    };
    assert_eq!(
        (
            page.eval(&shown("#job-reason")).await,
            page.eval(&shown("code")).await
        ),
        (
            Value::from(paddock::terminal_text::text(job.reason.as_deref().unwrap()).into_owned()),
            Value::from(id)
        )
    );
    assert_eq!(page.errors(), Vec::<String>::new());
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0);

    // The CSP, in Chromium: an inline script and an inline handler put into
    // the page (as a markup bug would) do not run, and are reported.
    let csp = page
        .eval(
            r#"new Promise(done => {
              const seen = [];
              document.addEventListener('securitypolicyviolation', e => {
                seen.push(e.effectiveDirective);
                if (seen.length === 2) setTimeout(() => done([seen.sort(), typeof window.__inline, typeof window.__handler]), 200);
              });
              const s = document.createElement('script');
              s.textContent = 'window.__inline = 1';
              document.body.appendChild(s);
              const d = document.createElement('div');
              d.innerHTML = '<img src="/assets/none.png" onerror="window.__handler = 1">';
              document.body.appendChild(d);
            })"#,
        )
        .await;
    assert_eq!(
        csp,
        serde_json::json!([
            ["script-src-attr", "script-src-elem"],
            "undefined",
            "undefined"
        ])
    );
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0);
    listening.abort();
    browser.close().await;
}

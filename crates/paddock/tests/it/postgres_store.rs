//! The CLI on a PostgreSQL store (`--db postgres://…`, `PADDOCK_DB`), end
//! to end against test-support's throwaway cluster: a read-only command
//! creates nothing and says the schema is missing; the hello job (real
//! Codex, scripted upstream, process rung) runs with its record, events
//! and ledger in PostgreSQL and none in a SQLite file; `paddock jobs` and
//! `paddock events` read them back; the password shows nowhere and never
//! reaches a job's environment; a job whose store connections are
//! terminated under it again and again keeps every event, every ledger
//! row and its final record, each once; an API read while the store does
//! not answer fails promptly (503 `store_unavailable`).

use std::path::{Path, PathBuf};

use paddock::store::{PgStore, PgUrl, Store};
use paddock_protocol::event::AgentEvent;
use paddock_protocol::{JobRecord, JobStatus};
use paddock_test_support::postgres::{self, PASSWORD};
use paddock_test_support::prelude::*;

/// The hello example (spec, scenario, bundle) copied under `home`, on the
/// process rung.
fn hello(home: &Home) -> PathBuf {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hello");
    let dir = home.path().join("hello");
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["job.toml", "scenario.toml", "repo.bundle"] {
        std::fs::copy(example.join(f), dir.join(f)).unwrap();
    }
    let spec = dir.join("job.toml");
    on_rung(&spec, "process");
    spec
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_hello_job_runs_on_a_postgres_store_and_reads_back() {
    let Some(_) = engine("codex") else {
        return;
    };
    let Some(db) = postgres::database().await else {
        return;
    };
    let url = db.url.as_str();
    let label = PgUrl::parse(url).unwrap().label().to_owned();
    let home = Home::new();
    let spec = hello(&home);

    // Read-only before anything ran: refused, nothing created.
    let out = home.paddock(&["--db", url, "jobs", "--json"], &[]).await;
    assert_eq!(
        (out.status.code(), text(&out.stderr).trim().to_owned()),
        (
            Some(2),
            format!(
                "paddock: the store at {label} has no Paddock schema: nothing has run with \
                 this database; a command that writes (paddock run, paddock gc) creates or \
                 upgrades it"
            )
        )
    );

    // The job, the store named by PADDOCK_DB this time.
    let run = home
        .paddock(
            &["run", "--json", spec.to_str().unwrap()],
            &[("PADDOCK_DB", url)],
        )
        .await;
    let record = paddock_test_support::jobs::record(&run);
    assert_eq!(
        (record.status, run.status.code()),
        (JobStatus::Done, Some(0)),
        "{}",
        text(&run.stderr)
    );

    // Read back through the CLI, compared with the store's own rows.
    let store = PgStore::open_existing(&PgUrl::parse(url).unwrap())
        .await
        .unwrap();
    let stored = store.job(&record.id).await.unwrap().unwrap();
    assert_eq!(stored, record);
    let jobs = home.paddock(&["--db", url, "jobs", "--json"], &[]).await;
    assert_eq!(jobs.status.code(), Some(0), "{}", text(&jobs.stderr));
    let listed: Vec<JobRecord> = text(&jobs.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(listed, vec![record.clone()]);

    let events = home
        .paddock(&["--db", url, "events", &record.id, "--json"], &[])
        .await;
    assert_eq!(events.status.code(), Some(0), "{}", text(&events.stderr));
    let shown: Vec<AgentEvent> = text(&events.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let rows = store.events(&record.id, 0).await.unwrap();
    assert_eq!(shown, rows);
    let seqs: Vec<u64> = rows.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=rows.len() as u64).collect::<Vec<_>>());
    assert!(rows.len() > 3, "{rows:?}");
    let calls = store.model_calls(&record.id).await.unwrap();
    assert_eq!(calls.len() as u64, record.model_calls);
    assert!(!calls.is_empty());

    // Nothing went to a SQLite file, nothing was left behind, and the
    // password was never printed.
    assert!(!home.db().exists());
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
    for out in [&run, &jobs, &events] {
        assert!(!text(&out.stdout).contains(PASSWORD));
        assert!(!text(&out.stderr).contains(PASSWORD));
    }
}

/// The hello job while every connection to its database is terminated
/// (`pg_terminate_backend`: as a server restart or a dropped network
/// does) every 100 ms: its writes are retried (`store/retry.rs`), so it
/// ends `done` as it would have, its events dense from 1 and ending with
/// its final status, every ledger row there once and settled, its final
/// record stored as printed.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_whose_store_connections_are_terminated_keeps_its_whole_record() {
    use sqlx::Connection;
    let Some(_) = engine("codex") else {
        return;
    };
    let Some(db) = postgres::database().await else {
        return;
    };
    let url = PgUrl::parse(&db.url).unwrap();
    // Migrated before the kills start: a migration is not retried.
    let store = PgStore::open(&url).await.unwrap();
    let home = Home::new();
    let spec = hello(&home);

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let killer = {
        let (stop, admin_url) = (stop.clone(), db.url.clone());
        tokio::spawn(async move {
            let mut admin = sqlx::PgConnection::connect(&admin_url).await.unwrap();
            let mut killed = 0i64;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                killed += sqlx::query_scalar::<_, i64>(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                     WHERE datname = current_database() AND pid <> pg_backend_pid()",
                )
                .fetch_one(&mut admin)
                .await
                .unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            killed
        })
    };
    let run = home
        .paddock(
            &["run", "--json", spec.to_str().unwrap()],
            &[("PADDOCK_DB", db.url.as_str())],
        )
        .await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let killed = killer.await.unwrap();
    let record = paddock_test_support::jobs::record(&run);
    assert_eq!(
        (record.status, run.status.code()),
        (JobStatus::Done, Some(0)),
        "{}",
        text(&run.stderr)
    );
    assert!(killed >= 3, "only {killed} connections terminated");

    assert_eq!(store.job(&record.id).await.unwrap(), Some(record.clone()));
    let events = store.events(&record.id, 0).await.unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    let statuses: Vec<paddock_protocol::Phase> = events
        .iter()
        .filter_map(|e| match &e.body {
            paddock_protocol::EventBody::Status { phase, .. } => Some(*phase),
            _ => None,
        })
        .collect();
    assert_eq!(statuses.last(), Some(&paddock_protocol::Phase::Done));
    // None stored twice by a retry: each (time, body) once.
    let mut once: Vec<String> = events
        .iter()
        .map(|e| serde_json::to_string(&(e.at, &e.body)).unwrap())
        .collect();
    once.sort();
    once.dedup();
    assert_eq!(once.len(), events.len());
    let calls = store.model_calls(&record.id).await.unwrap();
    let call_seqs: Vec<u64> = calls.iter().map(|c| c.seq).collect();
    assert_eq!(call_seqs, (1..=record.model_calls).collect::<Vec<_>>());
    assert!(calls
        .iter()
        .all(|c| c.status == paddock_protocol::CallStatus::Ok));
    assert!(!calls.is_empty());
    eprintln!(
        "connections terminated under the job: {killed}; {} events, {} calls",
        events.len(),
        calls.len()
    );
}

/// A job's engine sees neither the store's URL nor its password, whether
/// the password came in `PADDOCK_DB`'s URL or in `PGPASSWORD`; and a wrong
/// password fails naming the store, not the password.
#[tokio::test(flavor = "multi_thread")]
async fn the_store_password_never_reaches_a_job() {
    let Some(db) = postgres::database().await else {
        return;
    };
    let without = db.url_without_password();
    for (args, env) in [
        (vec![], vec![("PADDOCK_DB", db.url.as_str())]),
        (
            vec!["--db", without.as_str()],
            vec![("PGPASSWORD", PASSWORD)],
        ),
    ] {
        let home = Home::new();
        let spec = fake_codex_job(&home, "process", "env > \"$HOME/env.txt\"", 60);
        let mut all = args.clone();
        all.extend(["run", "--json", "--keep", spec.to_str().unwrap()]);
        let out = home.paddock(&all, &env).await;
        let rec = paddock_test_support::jobs::record(&out);
        assert_eq!(
            (rec.status, rec.reason.as_deref()),
            (
                JobStatus::Failed,
                Some("the engine exited without finishing its turn")
            ),
            "{}",
            text(&out.stderr)
        );
        let seen = std::fs::read_to_string(home.jobs().join(&rec.id).join("home/env.txt")).unwrap();
        assert!(!seen.is_empty());
        for needle in [PASSWORD, "PGPASSWORD", "PADDOCK_DB", db.name.as_str()] {
            assert!(!seen.contains(needle), "{needle} in the job's environment");
        }
        assert!(!home.db().exists());
        let store = PgStore::open_existing(&PgUrl::parse(&db.url).unwrap())
            .await
            .unwrap();
        assert_eq!(store.job(&rec.id).await.unwrap(), Some(rec));
    }

    let home = Home::new();
    let wrong = db.url_with_password("wrong-pw-77f0");
    let out = home.paddock(&["--db", &wrong, "gc"], &[]).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(70), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "paddock: open the store at {}: cannot connect to the store at {}: ",
            PgUrl::parse(&wrong).unwrap(),
            PgUrl::parse(&wrong).unwrap()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("password authentication failed"),
        "{stderr}"
    );
    assert!(!stderr.contains("wrong-pw-77f0"), "{stderr}");
    let bad = home
        .paddock(&["--db", "postgres://u:pw-x@host:notaport/db", "jobs"], &[])
        .await;
    assert_eq!(
        (bad.status.code(), text(&bad.stderr).trim().to_owned()),
        (
            Some(2),
            "paddock: --db (or PADDOCK_DB) names a PostgreSQL store: the store URL is not a \
             valid PostgreSQL URL: invalid port number"
                .to_owned()
        )
    );
}

/// A read of the API while the store does not answer (its jobs table
/// locked by another session, as a stalled or restarting server is) is
/// answered 503 `store_unavailable` once the read wait (5 s) has passed,
/// not after the 30 s the store retries a running job's writes; once the
/// store answers again, so does the read. The dashboard's pages that
/// read the store answer the same way, as a 503 page.
#[tokio::test(flavor = "multi_thread")]
async fn an_api_read_fails_fast_while_the_store_does_not_answer() {
    use sqlx::Connection;
    let Some(db) = postgres::database().await else {
        return;
    };
    let home = Home::new();
    let srv = super::serve::Server::start_env(&home, &[], &[("PADDOCK_DB", db.url.as_str())]).await;
    let read = super::serve::token_env(&home, "read", &[("PADDOCK_DB", db.url.as_str())]).await;
    let cookie = super::dashboard::login(&srv, &read).await;
    let mut admin = sqlx::PgConnection::connect(&db.url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut admin).await.unwrap();
    sqlx::query("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE")
        .execute(&mut admin)
        .await
        .unwrap();
    for path in ["/v1/jobs", "/v1/jobs/job-0123"] {
        let asked = std::time::Instant::now();
        let resp = srv.get(path).await;
        let waited = asked.elapsed();
        let status = resp.status().as_u16();
        let problem: serde_json::Value = super::serve::body(resp).await;
        assert_eq!(
            (status, problem["code"].as_str(), problem["detail"].as_str()),
            (
                503,
                Some("store_unavailable"),
                Some(
                    format!(
                        "GET {path}: the store did not answer within 5 s (it may be \
                         restarting or unreachable); ask again later"
                    )
                    .as_str()
                )
            )
        );
        assert!(
            waited >= std::time::Duration::from_secs(5)
                && waited < std::time::Duration::from_secs(10),
            "{path} answered after {waited:?}"
        );
    }
    // The dashboard's pages that read the store, the same way: a 503
    // page saying so (before, the browser waited out the store's 30 s of
    // retries).
    for path in ["/", "/jobs/job-0123", "/spend"] {
        let asked = std::time::Instant::now();
        let resp = super::dashboard::get(&srv, path, Some(&cookie)).await;
        let waited = asked.elapsed();
        let status = resp.status().as_u16();
        let page = resp.text().await.unwrap();
        // As the page escapes it (a `/` too).
        let said = format!(
            "GET {path}: the store did not answer within 5 s (it may be restarting or \
             unreachable); ask again later"
        )
        .replace('/', "&#x2f;");
        assert_eq!(
            (
                status,
                page.contains(&said),
                page.contains("store_unavailable")
            ),
            (503, true, true),
            "{page}"
        );
        assert!(
            waited >= std::time::Duration::from_secs(5)
                && waited < std::time::Duration::from_secs(10),
            "{path} answered after {waited:?}"
        );
    }
    sqlx::query("COMMIT").execute(&mut admin).await.unwrap();
    let resp = srv.get("/v1/jobs/job-0123").await;
    assert_eq!(resp.status(), 404, "{}", srv.stderr());
}

/// Probe: a job id no job can have reaches no store query. A NUL in a
/// path or query id (`%00`) cannot be bound as PostgreSQL text: the read
/// failed and every route holding one answered 503 `store_lost` with the
/// raw id and the database's words. Now each is refused before the store
/// is asked: 404 `not_found` for a path's id, 400 `bad_request` for a
/// query's, the id named back escaped; the dashboard's pages likewise.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_id_with_a_nul_is_refused_before_the_store_is_asked() {
    let Some(db) = postgres::database().await else {
        return;
    };
    let env = [("PADDOCK_DB", db.url.as_str())];
    let home = Home::new();
    let srv = super::serve::Server::start_env(&home, &[], &env).await;
    let read = super::serve::token_env(&home, "read", &env).await;
    let cookie = super::dashboard::login(&srv, &read).await;
    let not_found = "no job job-\\u{0}x (an id has no control characters)";
    let bad = |name: &str| {
        format!("{name}: `job-\\u{{0}}x` is no job's id (an id has no control characters)")
    };
    let spec = super::serve::spec(&home, "T-1", "exit 0");
    let body = serde_json::to_vec(&spec).unwrap();
    let asked = [
        (reqwest::Method::GET, "/v1/jobs/job-%00x"),
        (reqwest::Method::GET, "/v1/jobs/job-%00x/events"),
        (reqwest::Method::POST, "/v1/jobs/job-%00x/cancel"),
        (reqwest::Method::DELETE, "/v1/jobs/job-%00x"),
        (reqwest::Method::GET, "/v1/jobs?cursor=job-%00x"),
        (reqwest::Method::POST, "/v1/jobs?attempt_after=job-%00x"),
    ];
    let mut answers = Vec::new();
    for (method, path) in asked {
        let resp = srv
            .client
            .request(method.clone(), srv.url(path))
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let problem: serde_json::Value = super::serve::body(resp).await;
        answers.push((
            format!("{method} {path}"),
            status,
            problem["code"].as_str().unwrap_or_default().to_owned(),
            problem["detail"].as_str().unwrap_or_default().to_owned(),
        ));
    }
    let want = |path: &str, status: u16, code: &str, detail: &str| {
        (path.to_owned(), status, code.to_owned(), detail.to_owned())
    };
    assert_eq!(
        answers,
        [
            want("GET /v1/jobs/job-%00x", 404, "not_found", not_found),
            want("GET /v1/jobs/job-%00x/events", 404, "not_found", not_found),
            want("POST /v1/jobs/job-%00x/cancel", 404, "not_found", not_found),
            want("DELETE /v1/jobs/job-%00x", 404, "not_found", not_found),
            want(
                "GET /v1/jobs?cursor=job-%00x",
                400,
                "bad_request",
                &bad("cursor")
            ),
            want(
                "POST /v1/jobs?attempt_after=job-%00x",
                400,
                "bad_request",
                &bad("attempt_after")
            ),
        ],
        "{}",
        srv.stderr()
    );
    // The dashboard's pages, as pages saying the same (as they escape it).
    let mut pages = Vec::new();
    for (path, said) in [
        ("/jobs/job-%00x", not_found.to_owned()),
        ("/jobs/job-%00x/lines", not_found.to_owned()),
        ("/?cursor=job-%00x", bad("cursor")),
    ] {
        let resp = super::dashboard::get(&srv, path, Some(&cookie)).await;
        let status = resp.status().as_u16();
        let page = resp.text().await.unwrap();
        let escaped = said.replace('\'', "&#x27;");
        pages.push((path, status, page.contains(&escaped)));
    }
    assert_eq!(
        pages,
        [
            ("/jobs/job-%00x", 404, true),
            ("/jobs/job-%00x/lines", 404, true),
            ("/?cursor=job-%00x", 400, true),
        ]
    );
    // Nothing was queued by the refused submission.
    let listed = srv.get("/v1/jobs").await;
    let page: serde_json::Value = super::serve::body(listed).await;
    assert_eq!(page["jobs"], serde_json::json!([]));
}

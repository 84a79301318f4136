//! What only the PostgreSQL backend has to get right: appenders in
//! separate pools (as separate processes are) keeping events dense,
//! migrations applied once by concurrent openers, a read-only open that
//! creates nothing, connection failures named without the password, and
//! a job's writes surviving its connections being terminated under it.

use paddock_protocol::event::{AgentEvent, EventBody, Phase};
use paddock_test_support::postgres::{self, Database, PASSWORD};

use super::*;
use crate::store::fixtures::{event, job, model_call};
use crate::store::StoreAt;

async fn fresh() -> Option<(Database, PgUrl)> {
    let db = postgres::database().await?;
    let url = PgUrl::parse(&db.url).unwrap();
    Some((db, url))
}

fn text(event: u64) -> EventBody {
    EventBody::Status {
        phase: Phase::Provisioning,
        detail: Some(format!("event {event}")),
    }
}

/// Every connection of the job's pool is terminated
/// (`pg_terminate_backend`, as a server restart or a dropped network
/// does) again and again while the job appends its events, writes its
/// ledger rows ahead and settles them, records egress attempts, renews its
/// heartbeat and finishes: the writes are retried, and every event, every
/// ledger row, every egress attempt and the final record arrive, each
/// once, as written. A connection is terminated once it is 100 ms old (a
/// pooled one, which serves many writes): one younger is spared, else on
/// a loaded machine a reconnect slower than the killer's 15 ms round
/// never gets its write through and the retries' budget runs out (seen
/// in CI at load 8), which no restart or network drop does.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_jobs_writes_survive_its_connections_being_terminated() {
    use sqlx::Connection;
    let Some((db, url)) = fresh().await else {
        return;
    };
    let store = PgStore::open(&url).await.unwrap();
    let owner = Owner {
        host: "h1".into(),
        name: "host one".into(),
    };
    let started = job("j1", 0);
    let at = started.created_at;
    let spec = "{}";
    Store::insert_owned_job(&store, &started, spec, &owner, at)
        .await
        .unwrap();

    // The killer: its own connection, outside the store's pool.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let killer = {
        let stop = stop.clone();
        let db = db.clone();
        tokio::spawn(async move {
            let mut admin = sqlx::PgConnection::connect(&db.url).await.unwrap();
            let mut killed = 0u64;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let n: i64 = sqlx::query_scalar(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                     WHERE datname = current_database() AND pid <> pg_backend_pid() \
                     AND backend_start < clock_timestamp() - interval '100 milliseconds'",
                )
                .fetch_one(&mut admin)
                .await
                .unwrap();
                killed += u64::try_from(n).unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(15)).await;
            }
            killed
        })
    };

    let mut events = Vec::new();
    let mut calls = Vec::new();
    let mut attempts = Vec::new();
    for seq in 1..=150u64 {
        let ev = event("j1", seq, text(seq));
        Store::append_event(&store, &ev).await.unwrap();
        events.push(ev);
        if seq % 3 == 0 {
            let attempt = crate::store::fixtures::egress_attempt(&format!("h{seq}.example"));
            Store::record_egress(&store, "j1", seq / 3, &attempt)
                .await
                .unwrap();
            attempts.push(attempt);
        }
        if seq % 5 == 0 {
            let mut call = model_call("j1", seq / 5);
            call.status = paddock_protocol::CallStatus::InFlight;
            Store::insert_model_call(&store, &call).await.unwrap();
            call.status = paddock_protocol::CallStatus::Ok;
            Store::settle_model_call(&store, &call).await.unwrap();
            calls.push(call);
            assert!(Store::heartbeat(&store, "j1", "h1", at).await.unwrap());
        }
    }
    let mut ended = started.clone();
    ended.status = JobStatus::Done;
    ended.finished_at = Some(at);
    ended.model_calls = calls.len() as u64;
    Store::finish_job(&store, &ended, JobStatus::Running)
        .await
        .unwrap();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let killed = killer.await.unwrap();

    assert_eq!(Store::events(&store, "j1", 0).await.unwrap(), events);
    assert_eq!(Store::model_calls(&store, "j1").await.unwrap(), calls);
    assert_eq!(Store::egress(&store, "j1").await.unwrap(), attempts);
    assert_eq!(Store::job(&store, "j1").await.unwrap(), Some(ended));
    assert!(killed > 10, "only {killed} connections terminated");
    eprintln!("connections terminated under the job: {killed}");
}

/// A store opened on a new database while every connection to it is
/// terminated every 20 ms for its first second (a server restarting as
/// `paddock` starts): its schema's check and migrations are retried, so
/// the open ends with the whole schema, never a migration error. The
/// terminations stop after that second: under them for good, a loaded
/// machine may never finish one migration within the retries' 30 s (CI
/// did not). The first connection is not retried by the store (a wrong
/// address fails at once): this test tries the open again only when
/// that connection failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_opened_while_its_connections_are_terminated_is_migrated() {
    let Some((db, url)) = fresh().await else {
        return;
    };
    let (stop, killer) = terminator(&db, std::time::Duration::from_millis(20));
    tokio::spawn({
        let stop = stop.clone();
        async move {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let mut opened = None;
    let mut connect_failures = 0;
    for _ in 0..50 {
        match PgStore::open(&url).await {
            Ok(store) => {
                opened = Some(store);
                break;
            }
            Err(StoreError::PgConnect { .. }) => connect_failures += 1,
            Err(e) => panic!("{}", crate::error_chain::chain(&e)),
        }
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let killed = killer.await.unwrap();
    let store = opened.unwrap_or_else(|| panic!("{connect_failures} connects failed"));
    assert!(killed > 0);
    assert!(schema_current(&store.pool).await);
}

/// A read-only command's open (`open_existing`) of a migrated database
/// while every connection to it is terminated every 20 ms for a second:
/// its schema check is retried as `open`'s is, so every open ends with
/// the store, never a `PgSchema` "cannot be read" (before, one terminated
/// check failed the command). Only the first connection's failure is
/// tried again by the test, as for `open`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_open_while_connections_are_terminated_is_retried() {
    let Some((db, url)) = fresh().await else {
        return;
    };
    PgStore::open(&url).await.unwrap().close().await;
    let (stop, killer) = terminator(&db, std::time::Duration::from_millis(20));
    let until = std::time::Instant::now() + std::time::Duration::from_secs(1);
    let (mut opened, mut connect_failures) = (0, 0);
    while std::time::Instant::now() < until {
        match PgStore::open_existing(&url).await {
            Ok(store) => {
                opened += 1;
                store.close().await;
            }
            Err(StoreError::PgConnect { .. }) => connect_failures += 1,
            Err(e) => panic!("{}", crate::error_chain::chain(&e)),
        }
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let killed = killer.await.unwrap();
    assert!(
        killed > 0 && opened > 0,
        "{killed} killed, {opened} opened, {connect_failures} connects failed"
    );
}

/// A terminator of every other connection to `db`, every `period` until
/// told to stop: how many it terminated.
fn terminator(
    db: &Database,
    period: std::time::Duration,
) -> (
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    tokio::task::JoinHandle<u64>,
) {
    use sqlx::Connection;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let handle = {
        let stop = stop.clone();
        let db = db.clone();
        tokio::spawn(async move {
            let mut admin = sqlx::PgConnection::connect(&db.url).await.unwrap();
            let mut killed = 0u64;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let n: i64 = sqlx::query_scalar(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                     WHERE datname = current_database() AND pid <> pg_backend_pid()",
                )
                .fetch_one(&mut admin)
                .await
                .unwrap();
                killed += u64::try_from(n).unwrap();
                tokio::time::sleep(period).await;
            }
            killed
        })
    };
    (stop, handle)
}

/// The cancel listener's connection terminated (`pg_terminate_backend`,
/// as a server restart or a dropped network does) comes back `LISTEN`ing
/// on a connection of its own and then announces `*` (every subscriber
/// reads its job's request again: a `NOTIFY` sent while it was away was
/// lost; before, such a cancel waited for the job's next poll); a notice
/// sent afterwards reaches the subscriber at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cancel_listener_comes_back_after_its_connection_is_terminated() {
    use sqlx::Connection;
    let Some((db, url)) = fresh().await else {
        return;
    };
    let store = PgStore::open(&url).await.unwrap();
    let mut notices = Store::cancel_notices(&store).await;
    let mut admin = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let listening = "SELECT pid FROM pg_stat_activity WHERE datname = current_database() \
                     AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()";
    let first: Vec<i32> = sqlx::query_scalar(listening)
        .fetch_all(&mut admin)
        .await
        .unwrap();
    assert_eq!(first.len(), 1, "{first:?}");
    let killed: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(first[0])
        .fetch_one(&mut admin)
        .await
        .unwrap();
    assert!(killed);
    // Told once it is back, with no NOTIFY sent.
    let told = tokio::time::timeout(std::time::Duration::from_secs(10), notices.recv())
        .await
        .unwrap_or_else(|_| panic!("no notice within 10 s of the listener's end"))
        .unwrap();
    let again: Vec<i32> = sqlx::query_scalar(listening)
        .fetch_all(&mut admin)
        .await
        .unwrap();
    assert_eq!(
        (told.as_str(), again.len(), again != first),
        (crate::store::ANY_JOB, 1, true),
        "{first:?} then {again:?}"
    );
    sqlx::query("SELECT pg_notify($1, 'j1')")
        .bind(crate::store::cancel_notices::CHANNEL)
        .execute(&mut admin)
        .await
        .unwrap();
    let got = tokio::time::timeout(std::time::Duration::from_secs(5), notices.recv())
        .await
        .unwrap_or_else(|_| panic!("no notice within 5 s (listener {again:?})"))
        .unwrap();
    assert_eq!(got, "j1");
}

/// A queued job `id` (its own ticket).
fn queued(id: &str) -> JobRecord {
    let mut j = job(id, 0);
    j.status = JobStatus::Queued;
    j
}

/// A claim whose commit landed but whose answer was lost, retried, finds
/// the job it claimed by its key (host and claim time) instead of
/// claiming another: before, the retry (or the server's next claim) took
/// the next job and the first stayed `running` without its server until
/// the reaper failed it. Another host's key, or another time, finds none.
#[tokio::test]
async fn a_claim_retried_after_its_commit_finds_its_own_job() {
    let Some((_db, url)) = fresh().await else {
        return;
    };
    let store = PgStore::open(&url).await.unwrap();
    for id in ["q1", "q2"] {
        Store::enqueue_job(&store, &queued(id), "{}", 0, None)
            .await
            .unwrap();
    }
    let me = Owner {
        host: "h1".into(),
        name: "one".into(),
    };
    let other = Owner {
        host: "h2".into(),
        name: "two".into(),
    };
    let at = time::OffsetDateTime::now_utc();
    // The first try: committed, its answer lost.
    let first = store.claim_job(&[], &me, at, &[]).await.unwrap().unwrap();
    let found = |owner: Owner, at| {
        let store = &store;
        async move { store.claimed_by(&owner, at).await.unwrap() }
    };
    assert_eq!(
        (
            found(me.clone(), at).await,
            found(other, at).await,
            found(me.clone(), at + time::Duration::nanoseconds(1000)).await,
        ),
        (Some(first.clone()), None, None)
    );
    assert_eq!(
        (first.id.as_str(), Store::queue_depth(&store).await.unwrap()),
        ("q1", 1)
    );
}

/// The queue's writes (claims, unclaims) survive their connections being
/// terminated again and again (every 100 ms: a claim is four round trips,
/// which on a loaded machine every 15 ms could cut for longer than the
/// retries' 30 s): every queued job is claimed exactly once,
/// each claim's job given to its claimer (none left `running` unknown to
/// it), and each unclaimed job is queued again with its reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claims_survive_their_connections_being_terminated() {
    let Some((db, url)) = fresh().await else {
        return;
    };
    let store = PgStore::open(&url).await.unwrap();
    let ids: Vec<String> = (0..40).map(|n| format!("q{n:02}")).collect();
    for id in &ids {
        Store::enqueue_job(&store, &queued(id), "{}", 0, None)
            .await
            .unwrap();
    }
    let me = Owner {
        host: "h1".into(),
        name: "one".into(),
    };
    let (stop, killer) = terminator(&db, std::time::Duration::from_millis(100));
    let mut claimed = Vec::new();
    let mut skip = Vec::new();
    for n in 0.. {
        let at = time::OffsetDateTime::now_utc();
        let Some(j) = Store::claim_job(&store, &[], &me, at, &skip).await.unwrap() else {
            break;
        };
        // Every fourth one given back (this host may not run it).
        if n % 4 == 0 {
            assert!(Store::unclaim_job(&store, &j.id, &me.host, "not here")
                .await
                .unwrap());
            let back = Store::job(&store, &j.id).await.unwrap().unwrap();
            assert_eq!(
                (back.status, back.reason.as_deref()),
                (JobStatus::Queued, Some("not here"))
            );
            skip.push(j.id);
            continue;
        }
        claimed.push(j.id);
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let killed = killer.await.unwrap();
    // The skipped ones are still queued; the rest claimed once each, and
    // exactly those are running on this host.
    let mut running: Vec<String> = Store::running_jobs(&store)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    running.sort();
    let mut once = claimed.clone();
    once.sort();
    once.dedup();
    let mut all = [claimed.clone(), skip.clone()].concat();
    all.sort();
    assert_eq!(
        (
            once.len(),
            running,
            all,
            Store::queue_depth(&store).await.unwrap()
        ),
        (claimed.len(), once, ids, skip.len() as u64)
    );
    assert!(killed >= 3, "only {killed} connections terminated");
}

/// A database with egress attempts stored before they had a seq
/// (migration 0009) migrates: each job's rows numbered 1, 2, 3... in the
/// order they were inserted, the next one appended after them and a
/// taken seq refused.
#[tokio::test]
async fn egress_attempts_stored_before_seqs_are_numbered_per_job() {
    use crate::store::fixtures::egress_attempt;
    let Some((_db, url)) = fresh().await else {
        return;
    };
    let store = PgStore::open(&url).await.unwrap();
    for id in ["j1", "j2"] {
        store
            .insert_job_with_priority(&job(id, 0), "{}", 0, None)
            .await
            .unwrap();
    }
    for (n, (id, host)) in [("j1", "a"), ("j2", "x"), ("j1", "b"), ("j1", "c")]
        .into_iter()
        .enumerate()
    {
        Store::record_egress(&store, id, 100 + n as u64, &egress_attempt(host))
            .await
            .unwrap();
    }
    // Back to the schema before migration 0009.
    for statement in [
        "DROP INDEX egress_attempts_seq",
        "ALTER TABLE egress_attempts DROP COLUMN seq",
        "DELETE FROM _sqlx_migrations WHERE version = 9",
    ] {
        sqlx::query(statement).execute(&store.pool).await.unwrap();
    }
    store.pool.close().await;
    drop(store);
    let store = PgStore::open(&url).await.unwrap();
    let rows: Vec<(String, i64, String)> =
        sqlx::query_as("SELECT job_id, seq, host FROM egress_attempts ORDER BY id")
            .fetch_all(&store.pool)
            .await
            .unwrap();
    crate::store::fixtures::pre_seq_egress_numbered(&store, rows).await;
}

/// Two pools (two processes' worth of connections) append to one job at
/// once, each trying the next seq it sees until it has appended 50 events:
/// every attempt either lands at the next seq or is refused as not dense,
/// and the stream ends dense, 1..=100, every event once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_appends_from_two_pools_stay_dense() {
    let Some((_db, url)) = fresh().await else {
        return;
    };
    let a = PgStore::open(&url).await.unwrap();
    let b = PgStore::open(&url).await.unwrap();
    a.insert_job_with_priority(&job("j1", 0), "{}", 0, None)
        .await
        .unwrap();
    let appender = |store: PgStore, who: u64| {
        tokio::spawn(async move {
            let mut mine = 0;
            let mut refused = 0;
            while mine < 50 {
                let last = store.events("j1", 0).await.unwrap().len() as u64;
                let ev = event("j1", last + 1, text(who * 1000 + mine));
                match store.append_event(&ev).await {
                    Ok(()) => mine += 1,
                    Err(StoreError::EventSeq { .. } | StoreError::EventConflict { .. }) => {
                        refused += 1
                    }
                    Err(e) => panic!("{e:?}"),
                }
            }
            refused
        })
    };
    let (ra, rb) = tokio::join!(appender(a.clone(), 1), appender(b.clone(), 2));
    let refused = ra.unwrap() + rb.unwrap();
    let stored = a.events("j1", 0).await.unwrap();
    let seqs: Vec<u64> = stored.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=100).collect::<Vec<u64>>());
    let mut details: Vec<String> = stored
        .iter()
        .map(|e| match &e.body {
            EventBody::Status { detail, .. } => detail.clone().unwrap(),
            other => panic!("{other:?}"),
        })
        .collect();
    details.sort();
    let mut expected: Vec<String> = (0..50)
        .flat_map(|i| [format!("event {}", 1000 + i), format!("event {}", 2000 + i)])
        .collect();
    expected.sort();
    assert_eq!(details, expected);
    eprintln!("refused as not dense: {refused}");
}

/// The same seq appended by many tasks on two pools at once: exactly one
/// wins, the others are told the seq holds another event (not a database
/// error).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_appends_of_one_seq_have_one_winner() {
    let Some((_db, url)) = fresh().await else {
        return;
    };
    let a = PgStore::open(&url).await.unwrap();
    let b = PgStore::open(&url).await.unwrap();
    a.insert_job_with_priority(&job("j1", 0), "{}", 0, None)
        .await
        .unwrap();
    for seq in 1..=5u64 {
        let tasks: Vec<_> = (0..8u64)
            .map(|i| {
                let store = if i % 2 == 0 { a.clone() } else { b.clone() };
                tokio::spawn(async move {
                    store
                        .append_event(&event("j1", seq, text(seq * 100 + i)))
                        .await
                })
            })
            .collect();
        let mut won = 0;
        for t in tasks {
            match t.await.unwrap() {
                Ok(()) => won += 1,
                Err(StoreError::EventConflict { last, .. }) => assert_eq!(last, seq),
                Err(e) => panic!("{e:?}"),
            }
        }
        assert_eq!(won, 1, "seq {seq}");
    }
    assert_eq!(a.events("j1", 0).await.unwrap().len(), 5);
}

/// Openers of a new database at once: the migrator's lock lets each
/// migration run once, and every opener gets the schema.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_opens_migrate_once() {
    let Some((_db, url)) = fresh().await else {
        return;
    };
    let opens: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { PgStore::open(&url).await.map(|_| ()) })
        })
        .collect();
    for o in opens {
        o.await.unwrap().unwrap();
    }
    let store = PgStore::open(&url).await.unwrap();
    let applied: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations")
        .fetch_one(&store.pool)
        .await
        .unwrap();
    assert_eq!(applied as usize, MIGRATOR.iter().count());
}

/// A read-only open of an empty database creates nothing and says so; once
/// a writer has migrated it, it opens; a changed schema is named.
#[tokio::test]
async fn a_read_only_open_never_migrates() {
    let Some((db, url)) = fresh().await else {
        return;
    };
    let err = PgStore::open_existing(&url).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "the store at {} has no Paddock schema: nothing has run with this database; a \
             command that writes (paddock run, paddock gc) creates or upgrades it",
            url.label()
        )
    );
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&db.url)
        .await
        .unwrap();
    let tables: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert_eq!(tables, 0, "nothing created");

    let writer = PgStore::open(&url).await.unwrap();
    writer
        .insert_job_with_priority(&job("j1", 0), "{}", 0, None)
        .await
        .unwrap();
    let reader = PgStore::open_existing(&url).await.unwrap();
    assert_eq!(reader.job("j1").await.unwrap(), Some(job("j1", 0)));

    sqlx::query(
        "UPDATE _sqlx_migrations SET version = 99999 \
         WHERE version = (SELECT MAX(version) FROM _sqlx_migrations)",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let err = PgStore::open_existing(&url).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("has a newer schema (migration 99999)"),
        "{err}"
    );
}

/// The whole error chain of `err`, as a user sees it.
fn chain(err: &StoreError) -> String {
    let mut text = err.to_string();
    let mut cause = std::error::Error::source(err);
    while let Some(c) = cause {
        text = format!("{text}: {c}");
        cause = c.source();
    }
    text
}

/// A wrong password, a database that does not exist, a server that is not
/// there and a malformed URL each fail naming what was tried, never the
/// password.
#[tokio::test]
async fn connection_failures_name_the_store_never_the_password() {
    let Some((db, _)) = fresh().await else {
        return;
    };
    let wrong = PgUrl::parse(&db.url_with_password("not-the-pw-4e2a")).unwrap();
    let err = PgStore::open(&wrong).await.unwrap_err();
    let text = chain(&err);
    assert!(matches!(err, StoreError::PgConnect { .. }), "{err:?}");
    assert!(
        text.starts_with(&format!(
            "cannot connect to the store at postgres://paddock@localhost:5432/{}?host={}: ",
            db.name,
            db.socket_dir.display()
        )),
        "{text}"
    );
    assert!(text.contains("password authentication failed"), "{text}");
    assert!(!text.contains("not-the-pw-4e2a"), "{text}");

    let missing = db.url.replace(&format!("/{}?", db.name), "/no_such_db?");
    let err = PgStore::open(&PgUrl::parse(&missing).unwrap())
        .await
        .unwrap_err();
    let text = chain(&err);
    assert!(text.contains("/no_such_db?host="), "{text}");
    assert!(text.contains("does not exist"), "{text}");
    assert!(!text.contains(PASSWORD), "{text}");

    let gone = tempfile::tempdir().unwrap();
    let down = format!(
        "postgres://paddock:{PASSWORD}@localhost:5432/x?host={}",
        gone.path().display()
    );
    let err = PgStore::open(&PgUrl::parse(&down).unwrap())
        .await
        .unwrap_err();
    let text = chain(&err);
    assert!(
        text.starts_with(&format!(
            "cannot connect to the store at postgres://paddock@localhost:5432/x?host={}: ",
            gone.path().display()
        )),
        "{text}"
    );
    assert!(!text.contains(PASSWORD), "{text}");

    let err = PgUrl::parse(&format!("postgres://paddock:{PASSWORD}@localhost:99999/x"))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("the store URL is not a valid PostgreSQL URL: "),
        "{err}"
    );
    assert!(!err.contains(PASSWORD), "{err}");
}

/// The store's Debug (a `SharedStore` is `Debug`) shows no password.
#[tokio::test]
async fn debug_shows_no_password() {
    let Some((_db, url)) = fresh().await else {
        return;
    };
    let store = PgStore::open(&url).await.unwrap();
    let shown = format!(
        "{store:?} {url:?} {url} {:?}",
        StoreAt::Postgres(url.clone())
    );
    assert!(!shown.contains(PASSWORD), "{shown}");
    assert!(shown.contains(url.label()), "{shown}");
}

/// The dyn seam: `store::open` picks PostgreSQL for a URL.
#[tokio::test]
async fn open_by_location_picks_postgres() {
    let Some((_db, url)) = fresh().await else {
        return;
    };
    let store = crate::store::open(&StoreAt::Postgres(url.clone()))
        .await
        .unwrap();
    store.insert_job(&job("j9", 0), "{}").await.unwrap();
    let ev: AgentEvent = event("j9", 1, text(1));
    store.append_event(&ev).await.unwrap();
    let reader = crate::store::open_existing(&StoreAt::Postgres(url))
        .await
        .unwrap();
    assert_eq!(reader.events("j9", 0).await.unwrap(), vec![ev]);
}

/// PostgreSQL's text cannot hold NUL: a job's reason (its engine's
/// stderr), a call's model and error (what the job and its upstream sent
/// the broker), an egress attempt's host and a reclaim's record with one
/// are stored with U+FFFD in its place. Before, each write failed: the job
/// stayed `running`, the call was missing from the ledger.
#[tokio::test]
async fn text_with_nul_is_stored_with_the_replacement_character() {
    let Some((_db, url)) = fresh().await else {
        return;
    };
    let pg = PgStore::open(&url).await.unwrap();
    // Through the trait, as the runner and the broker write.
    let store: &dyn Store = &pg;
    store.insert_job(&job("j1", 0), "{}").await.unwrap();
    let mut call = crate::store::fixtures::model_call("j1", 1);
    call.requested_model = "gpt\0x".into();
    call.error = Some("reset\0".into());
    store.insert_model_call(&call).await.unwrap();
    let mut attempt = paddock_protocol::EgressRecord {
        host: "\0garbage".into(),
        port: 0,
        method: None,
        address: None,
        bytes_up: 0,
        bytes_down: 0,
        duration_ms: 0,
        phase: paddock_protocol::EgressPhase::Agent,
        allowed: false,
        rule: Some("bad_request".into()),
        reason: Some("not HTTP".into()),
        credential: None,
        substituted: None,
    };
    store.record_egress("j1", 1, &attempt).await.unwrap();
    store.set_engine_session("j1", "s\0").await.unwrap();
    let mut failed = job("j1", 0);
    failed.status = JobStatus::Failed;
    failed.reason = Some("engine exited 1: a\0b".into());
    store.finish_job(&failed, JobStatus::Running).await.unwrap();

    call.requested_model = "gpt\u{fffd}x".into();
    call.error = Some("reset\u{fffd}".into());
    attempt.host = "\u{fffd}garbage".into();
    failed.reason = Some("engine exited 1: a\u{fffd}b".into());
    assert_eq!(
        (
            store.model_calls("j1").await.unwrap(),
            store.egress("j1").await.unwrap(),
            store.engine_session("j1").await.unwrap(),
            store.job("j1").await.unwrap(),
        ),
        (
            vec![call],
            vec![attempt],
            Some("s\u{fffd}".to_owned()),
            Some(failed)
        )
    );
}

//! Attack probes of a job's records in the store (`limits.max_records`):
//! a hostile job (a stand-in engine) loops, on the `process` and the
//! `sandbox` rung, on what leaves a record each time without spending
//! anything: tiny output lines (an `error` event each), connections its
//! egress proxy denies (a row and a `network` event each), requests its
//! broker has no route for (a `refused` ledger row, a `policy` event and
//! an `error` event each, nothing upstream) and commands its host
//! profile's hook denies (a `policy` event each); the denied connections
//! from a setup command too. Each loop would run
//! until the job's timeout; each job must instead be stopped, fail naming
//! the limit (a `policy` event of rule `limits`), and leave at most the
//! limit's records in the store (events, egress rows and ledger rows
//! together) plus the few of its stop, its workspace removed. A model
//! call made before the loop keeps its ledger row.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use paddock::store::{PgStore, PgUrl, Store};
use paddock_protocol::{CallStatus, EventBody, JobRecord, JobStatus};
use paddock_test_support::postgres;
use paddock_test_support::prelude::*;

/// The limit every probe sets (the lowest a spec may ask).
const LIMIT: usize = 100;

/// The records Paddock's own stop and conclusion may add past the limit
/// (the `policy` event saying why, teardown's and conclusion's events).
const STOP_RECORDS: usize = 20;

/// Each probe's timeout: the loops run until it without the limit.
const TIMEOUT_SECS: u64 = 60;

/// The base URL of the job's broker, read by the stand-in from its
/// Codex configuration.
const BROKER_URL: &str =
    "url=$(sed -n 's/^base_url = \"\\(.*\\)\"$/\\1/p' \"$CODEX_HOME/config.toml\")";

/// The rungs a probe runs on here: `process`, and `sandbox` where one
/// starts (else said: CI fails instead, `sandbox_available`).
fn rungs() -> Vec<&'static str> {
    if sandbox_available() {
        vec!["process", "sandbox"]
    } else {
        vec!["process"]
    }
}

/// What a probe left: the job's record, its events, and how many records
/// it has in the store (events, egress rows, ledger rows), and its ledger
/// rows' statuses.
struct Probed {
    rec: JobRecord,
    events: Vec<EventBody>,
    records: usize,
    /// Its egress rows of denied attempts.
    denied: usize,
    calls: Vec<CallStatus>,
    left: Vec<String>,
}

/// Runs a job on `rung` whose engine is `script`, with the spec's lines
/// `sections` (TOML, after the rest) and the record limit.
async fn probe(home: &Home, rung: &str, script: &str, sections: &str) -> Probed {
    probe_asking(home, rung, script, sections, LIMIT, None).await
}

/// [`probe`] with the spec asking for `asked` records, its store the
/// PostgreSQL database `db` when given (else the home's SQLite file).
async fn probe_asking(
    home: &Home,
    rung: &str,
    script: &str,
    sections: &str,
    asked: usize,
    db: Option<&str>,
) -> Probed {
    let spec = fake_codex_job(home, rung, script, TIMEOUT_SECS);
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        &format!("timeout_secs = {TIMEOUT_SECS}"),
        &format!("timeout_secs = {TIMEOUT_SECS}\nmax_records = {asked}"),
    );
    std::fs::write(&spec, format!("{text}\n{sections}\n")).unwrap();
    let env: Vec<(&str, &str)> = db.map(|url| ("PADDOCK_DB", url)).into_iter().collect();
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &env)
        .await;
    let rec = record(&out);
    let store: Box<dyn Store> = match db {
        Some(url) => Box::new(
            PgStore::open_existing(&PgUrl::parse(url).unwrap())
                .await
                .unwrap(),
        ),
        None => Box::new(home.store().await),
    };
    let events: Vec<EventBody> = store
        .events(&rec.id, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.body)
        .collect();
    let egress = store.egress(&rec.id).await.unwrap();
    let calls: Vec<CallStatus> = store
        .model_calls(&rec.id)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.status)
        .collect();
    Probed {
        records: events.len() + egress.len() + calls.len(),
        denied: egress.iter().filter(|r| !r.allowed).count(),
        rec,
        events,
        calls,
        left: home.leftover_workspaces(),
    }
}

/// How many records a limit's reason says were not kept, when it is one.
fn not_kept(reason: &str) -> Option<u64> {
    let rest = reason.strip_prefix(&format!(
        "the job made more than limits.max_records ({LIMIT}) records in the store (its events, \
         egress attempts and ledger rows); it was stopped, and what it made past the limit \
         is not kept ("
    ))?;
    rest.strip_suffix(" records)")?.parse().ok()
}

/// What a probe must end with: `failed` past the limit (said by a
/// `policy` event), at most the limit's records and those of its stop,
/// most of them the loop's (its events, `looped` by their kind, its
/// denied egress rows and refused ledger rows), its
/// workspace gone.
fn stopped(rung: &str, p: &Probed, looped: fn(&EventBody) -> bool) {
    let reason = p.rec.reason.clone().unwrap_or_default();
    assert_eq!(
        (
            p.rec.status,
            not_kept(&reason).is_some_and(|n| n > 0),
            p.events.contains(&EventBody::Policy {
                rule: "limits".into(),
                message: reason.clone(),
            }),
            p.records <= LIMIT + STOP_RECORDS,
            p.events.iter().filter(|e| looped(e)).count()
                + p.denied
                + p.calls
                    .iter()
                    .filter(|s| **s == CallStatus::Refused)
                    .count()
                > LIMIT / 2,
            p.left.clone(),
        ),
        (
            JobStatus::Failed,
            true,
            true,
            true,
            true,
            Vec::<String>::new()
        ),
        "{rung}: {reason}; {} records; events {:?}",
        p.records,
        p.events.iter().rev().take(30).collect::<Vec<_>>()
    );
}

/// Tiny lines on the engine's output, each an `error` event (not JSON):
/// far within `limits.max_output_bytes`, but a record each.
#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_tiny_output_lines_is_stopped_at_the_limit() {
    for rung in rungs() {
        let home = Home::new();
        let p = probe(&home, rung, "yes 1", "").await;
        stopped(rung, &p, |e| matches!(e, EventBody::Error { .. }));
    }
}

/// Connections the job's egress proxy denies, in a loop: a row and a
/// `network` event each.
#[tokio::test(flavor = "multi_thread")]
async fn a_denied_egress_loop_is_stopped_at_the_limit() {
    if !curl_available() {
        return;
    }
    for rung in rungs() {
        let home = Home::new();
        let p = probe(
            &home,
            rung,
            "while :; do curl -s -o /dev/null --max-time 5 http://denied.example/x; done",
            "[network]\nallow = [\"example.com:443\"]",
        )
        .await;
        stopped(
            rung,
            &p,
            |e| matches!(e, EventBody::Network(r) if !r.allowed),
        );
    }
}

/// The same loop as a setup command (its proxy in the setup phase): the
/// setup is stopped and the engine never starts.
#[tokio::test(flavor = "multi_thread")]
async fn a_denied_egress_loop_in_setup_is_stopped_at_the_limit() {
    if !curl_available() {
        return;
    }
    for rung in rungs() {
        let home = Home::new();
        let p = probe(
            &home,
            rung,
            "touch \"$HOME/engine-ran\"",
            "[setup]\ncommands = [\"while :; do curl -s -o /dev/null --max-time 5 http://denied.example/x; done\"]\ncache = false\nnetwork = [\"example.com:443\"]",
        )
        .await;
        stopped(
            rung,
            &p,
            |e| matches!(e, EventBody::Network(r) if !r.allowed),
        );
        assert!(
            !p.events.iter().any(|e| matches!(
                e,
                EventBody::Status {
                    phase: paddock_protocol::Phase::Launching,
                    ..
                }
            )),
            "{rung}: the engine was launched"
        );
    }
}

/// Requests the job's broker has no route for, in a loop after one model
/// call: nothing goes upstream, a `refused` row and events each. The
/// call's ledger row is kept whatever follows.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_broker_route_loop_is_stopped_and_the_call_made_is_kept() {
    if !curl_available() {
        return;
    }
    for rung in rungs() {
        let home = Home::new();
        let p = probe(&home, rung, &route_loop(), "").await;
        call_kept_and_stopped(rung, &p);
    }
}

/// The same on a PostgreSQL store (the limit is the runner's and the
/// broker's, whatever the backend), on the `process` rung.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_broker_route_loop_is_stopped_on_a_postgres_store() {
    if !curl_available() {
        return;
    }
    let Some(db) = postgres::database().await else {
        return;
    };
    let home = Home::new();
    let p = probe_asking(
        &home,
        "process",
        &route_loop(),
        "",
        LIMIT,
        Some(db.url.as_str()),
    )
    .await;
    call_kept_and_stopped("process on PostgreSQL", &p);
    assert!(!home.db().exists(), "a SQLite store was written");
}

/// A stand-in's script: one model call, then requests on a path the
/// broker has no route for, forever.
fn route_loop() -> String {
    format!(
        "{BROKER_URL}\n\
         curl -sS -o \"$TMPDIR/answer\" -H \"Authorization: Bearer $PADDOCK_JOB_TOKEN\" -H 'content-type: application/json' -d '{{\"model\":\"gpt-5.5\",\"input\":\"hi\",\"stream\":true}}' \"$url/responses\"\n\
         while :; do curl -s -o /dev/null -H \"Authorization: Bearer $PADDOCK_JOB_TOKEN\" \"$url/files\"; done"
    )
}

/// What [`route_loop`]'s job must end with: stopped past the limit, its
/// model call's row kept (the first, `ok`), every other row `refused`.
fn call_kept_and_stopped(rung: &str, p: &Probed) {
    stopped(rung, p, |e| {
        matches!(e, EventBody::Policy { rule, .. } if rule == "broker_route")
            || matches!(e, EventBody::Error { source: Some(s), .. } if s == "broker")
    });
    assert_eq!(
        (
            p.calls.first(),
            p.calls.iter().filter(|s| **s == CallStatus::Ok).count(),
            p.calls.iter().skip(1).all(|s| *s == CallStatus::Refused)
        ),
        (Some(&CallStatus::Ok), 1, true),
        "{rung}: {:?}",
        p.calls
    );
}

/// Commands the host profile denies, through its hook (`paddock hook
/// pre-tool-use`, as the engine runs it), in a loop: a `policy` event
/// each, read as the engine prints.
#[tokio::test(flavor = "multi_thread")]
async fn a_hook_denial_loop_is_stopped_at_the_limit() {
    for rung in rungs() {
        let home = Home::new();
        std::fs::write(
            home.path().join("profile.toml"),
            "id = \"deny-loop\"\ndeny_commands = [\"touch denied\"]\n",
        )
        .unwrap();
        let script = "hook=$(sed -n 's/^command = \"\\(.*\\)\"$/\\1/p' \"$CODEX_HOME/config.toml\")\n\
             while :; do echo '{\"tool_name\":\"Bash\",\"tool_input\":{\"command\":\"touch denied\"}}' | eval \"$hook\" > /dev/null 2>&1; echo; done";
        let p = probe(&home, rung, script, "[policy]\nprofile = \"profile.toml\"").await;
        stopped(
            rung,
            &p,
            |e| matches!(e, EventBody::Policy { rule, .. } if rule == "touch denied"),
        );
    }
}

/// A host profile's `max_records` caps what a spec asks for: a job asking
/// for ten million records under a profile of 100 is stopped past 100.
#[tokio::test(flavor = "multi_thread")]
async fn a_host_profiles_cap_holds_a_spec_asking_more() {
    for rung in rungs() {
        let home = Home::new();
        home.add_profile(&format!(
            r#"{{"id":"records-capped","max_records":{LIMIT}}}"#
        ))
        .await;
        let p = probe_asking(
            &home,
            rung,
            "yes 1",
            "[policy]\nprofile = \"records-capped\"",
            10_000_000,
            None,
        )
        .await;
        stopped(rung, &p, |e| matches!(e, EventBody::Error { .. }));
    }
}

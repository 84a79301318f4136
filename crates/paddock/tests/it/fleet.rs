//! A fleet: two `paddock serve` processes (the real binary, two homes, so
//! two jobs directories and host ids) on one store, a SQLite file and a
//! real PostgreSQL database. Jobs submitted to both through the API run
//! exactly once each and both servers list them all; a server killed with
//! SIGKILL while running a job has it reclaimed by the other's reaper
//! after the TTL, its events dense and its ledger settled, and its next
//! attempt (it came from the queue) queued and run by the other; a cancel
//! through one server's API stops a job another server, or a `paddock
//! run` of another home, runs, exactly as a local cancel stops it; a
//! cancel asked of a job whose host then dies ends it `cancelled` when it
//! is reclaimed, never queued again, and one asked of a job whose host is
//! already dead ends it `cancelled` at once, naming who asked; a final
//! record owed to the webhooks
//! is sent by a server whoever ended the job; a server that drains claims
//! nothing more, and its peer runs what it left queued; a claim whose
//! server died on another host before the job started is run once by the
//! live server (PostgreSQL); a job the accepting server's sandbox could
//! not bind runs on the server whose sandbox can; a job whose engine a
//! claiming server does not have is passed over by it and run by the
//! server that has it; a job whose source token only a worker server's
//! environment holds is accepted by a front server without it (202, the
//! answer saying why the front server will not run it) and run by the
//! worker, and so is its next attempt; a job no server can run fails
//! once it has waited passed over for `--max-passed-over-secs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::{Duration, Instant};

use paddock::heartbeat::Liveness;
use paddock::reaper::{
    cancelled_reason, reclaimed_reason, Stale, NOT_REQUEUED_CANCELLED, RECLAIMED_CALL,
};
use paddock::store::{CancelRequest, Owner, PgUrl, SharedStore, StoreAt};
use paddock_protocol::event::{EventBody, Phase};
use paddock_protocol::ledger::CallStatus;
use paddock_protocol::{JobRecord, JobSpec, JobStatus, PriorAttempt};
use serde_json::Value;

use super::hosts::{
    backends, gc, host_of, hosts_config, reaped, run_cmd, started, waiting_job, Shared,
};
use super::serve::{assert_one_signed_delivery, body, hook_receiver, is_final, spec, Server, TURN};
use paddock::server::submissions::SubmissionError;
use paddock::server::{passed_over_reason, PassOver};
use paddock_test_support::prelude::*;

/// Both homes renew every second and take 3 s without a renewal for dead.
const HOSTS: &str = "heartbeat_secs = 1\nheartbeat_ttl_secs = 3";

/// `paddock serve` on `home` with the shared store `db`, allowing
/// submitted specs to name the files of `peer` too (a fleet whose hosts
/// share a directory): each server claims the other's jobs.
async fn server(home: &Home, db: &str, peer: &Home) -> Server {
    let peer = peer.path().display().to_string();
    Server::start_env(
        home,
        &["--max-concurrent-jobs", "2", "--allow-path", &peer],
        &[("PADDOCK_DB", db)],
    )
    .await
}

/// A stand-in that touches `marker`, waits for `gate` (at most 60 s), then
/// finishes its turn.
fn gated(marker: &Path, gate: &Path) -> String {
    format!(
        "touch '{}'\ni=0; while [ ! -e '{}' ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n{TURN}",
        marker.display(),
        gate.display()
    )
}

/// Waits (up to 60 s) until `path` exists.
async fn appears(path: &Path) {
    for _ in 0..600 {
        if path.exists() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{} never appeared", path.display());
}

/// Who runs job `id` and its last heartbeat, from the store.
async fn owner_of(store: &SharedStore, id: &str) -> (Owner, time::OffsetDateTime) {
    let running = store.running_jobs().await.unwrap();
    let job = running.iter().find(|j| j.id == id).unwrap();
    job.owner.clone().unwrap()
}

/// The job's events are dense from 1; its ledger has nothing in flight
/// and its totals are the ledger's.
async fn nothing_lost(store: &SharedStore, record: &JobRecord) {
    let events = store.events(&record.id, 0).await.unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    let calls = store.model_calls(&record.id).await.unwrap();
    let in_flight: Vec<_> = calls
        .iter()
        .filter(|c| c.status == CallStatus::InFlight)
        .collect();
    assert_eq!(in_flight.len(), 0, "{calls:?}");
    let cost: i64 = calls.iter().map(|c| c.cost_micros).sum();
    assert_eq!(
        (record.model_calls, record.cost_micros),
        (calls.len() as u64, cost)
    );
}

/// The reason of job `id`, stopped by its owner on a cancel `through` a
/// server's API (its admin token): `cancelled, asked by <that server's
/// host> (API token <id>, scope admin) at <the request's time>`, the
/// request's `by` as the store keeps it checked first.
async fn asked_through(store: &SharedStore, id: &str, through: &Server) -> String {
    let asked = store.cancel_requested(id).await.unwrap().unwrap();
    let by = format!(
        "{} (API token {}, scope admin)",
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .unwrap()
            .trim(),
        through.token_id
    );
    assert_eq!(asked.by, by);
    let at = asked
        .at
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    format!("cancelled, asked by {by} at {at}")
}

/// The `status` events' phases and details of job `id`.
async fn statuses(store: &SharedStore, id: &str) -> Vec<(Phase, Option<String>)> {
    store
        .events(id, 0)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.body {
            EventBody::Status { phase, detail } => Some((phase, detail)),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn two_servers_run_each_job_once_and_reclaim_a_killed_ones() {
    let dir = tempfile::tempdir().unwrap();
    for db in backends(dir.path()).await {
        let (a, b) = (Home::new(), Home::new());
        hosts_config(&a, HOSTS);
        hosts_config(&b, HOSTS);
        let (srv_a, srv_b) = (
            server(&a, &db.db(), &b).await,
            server(&b, &db.db(), &a).await,
        );
        let store = db.open().await;
        let scratch = tempfile::tempdir().unwrap();
        // Six jobs, three through each server: each runs exactly once.
        let log = scratch.path().join("runs");
        let mut ids = Vec::new();
        let mut tickets = Vec::new();
        for n in 0..6 {
            let ticket = format!("T-{n}");
            let body = format!("echo {ticket} >> '{}'\n{TURN}", log.display());
            let (home, srv) = if n % 2 == 0 {
                (&a, &srv_a)
            } else {
                (&b, &srv_b)
            };
            ids.push(srv.submit_ok(&spec(home, &ticket, &body), 0).await);
            tickets.push(ticket);
        }
        for id in &ids {
            let rec = srv_a.wait_for(id, is_final).await;
            assert_eq!(
                rec.status,
                JobStatus::Done,
                "{id}: {}\n{}",
                srv_a.stderr(),
                srv_b.stderr()
            );
            nothing_lost(&store, &rec).await;
        }
        let mut ran: Vec<String> = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        ran.sort();
        assert_eq!(ran, tickets);
        // Both list every job, the same.
        let list = |srv: &Server| {
            let req = srv.client.get(srv.url("/v1/jobs?limit=50"));
            async move { body::<Value>(req.send().await.unwrap()).await }
        };
        let (page_a, page_b) = (list(&srv_a).await, list(&srv_b).await);
        assert_eq!(page_a, page_b);
        let mut listed: Vec<String> = page_a["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_str().unwrap().to_owned())
            .collect();
        listed.sort();
        let mut want = ids.clone();
        want.sort();
        assert_eq!(listed, want);

        // A job, then the server running it killed with SIGKILL.
        let (marker, gate) = (scratch.path().join("started"), scratch.path().join("gate"));
        let id = srv_a
            .submit_ok(&spec(&a, "T-K", &gated(&marker, &gate)), 0)
            .await;
        appears(&marker).await;
        let (owner, _) = owner_of(&store, &id).await;
        let a_runs = owner.host == host_of(&a).0;
        let (mut dead, alive, dead_home, alive_home) = if a_runs {
            (srv_a, srv_b, &a, &b)
        } else {
            (srv_b, srv_a, &b, &a)
        };
        nix::sys::signal::kill(dead.pid(), nix::sys::signal::Signal::SIGKILL).unwrap();
        dead.child.wait().await.unwrap();
        let killed = Instant::now();
        let (owner, beat) = owner_of(&store, &id).await;
        let rec = alive.wait_for(&id, is_final).await;
        let waited = killed.elapsed();
        // Its last renewal was at most 1 s before the kill.
        assert!(
            waited >= Duration::from_secs(2),
            "reclaimed after {waited:?}"
        );
        let (alive_id, alive_name) = host_of(alive_home);
        let reason = paddock::reaper::reclaimed_reason(
            &owner,
            beat,
            Stale::Dated,
            &Liveness {
                owner: Owner {
                    host: alive_id,
                    name: alive_name,
                },
                interval: Duration::from_secs(1),
                ttl: Duration::from_secs(3),
                requeues: 1,
                cancel_poll: std::time::Duration::from_secs(1),
            },
        );
        assert_eq!(rec.status, JobStatus::Failed, "{}", alive.stderr());
        // After the reclaim's compare-and-set come its final event, the
        // next attempt queued (it came from the queue), then its totals
        // and its reason naming that attempt.
        let again =
            |next: &JobRecord| format!("{reason}; queued again as job {} (attempt 2)", next.id);
        let mut next = None;
        for _ in 0..100 {
            next = store
                .jobs(50)
                .await
                .unwrap()
                .into_iter()
                .find(|j| j.ticket_id == "T-K" && j.id != id);
            let rec = store.job(&id).await.unwrap().unwrap();
            if next.as_ref().map(again) == rec.reason {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let next = next.expect("no next attempt queued");
        let rec = store.job(&id).await.unwrap().unwrap();
        assert_eq!(
            (rec.status, rec.reason.clone()),
            (JobStatus::Failed, Some(again(&next)))
        );
        assert_eq!(
            statuses(&store, &id).await.last(),
            Some(&(Phase::Failed, Some(reason.clone())))
        );
        nothing_lost(&store, &rec).await;
        // The next attempt runs on the live server, the reclaim in its
        // brief as a prior attempt.
        std::fs::write(&gate, "").unwrap();
        let ran = alive.wait_for(&next.id, is_final).await;
        assert_eq!(
            (ran.status, ran.attempt, ran.branch.as_str()),
            (JobStatus::Done, 2, "paddock/T-K/2"),
            "{}",
            alive.stderr()
        );
        let spec = JobSpec::from_json(
            &store.job_spec(&next.id).await.unwrap().unwrap(),
            Path::new("the store"),
        )
        .unwrap();
        assert_eq!(
            spec.ticket.prior_attempts,
            vec![PriorAttempt {
                attempt: 1,
                outcome: "reclaimed".into(),
                summary: String::new(),
                branch: None,
                tried: Vec::new(),
                failed: vec![reason.clone()],
                bounce_comment: None,
            }]
        );
        nothing_lost(&store, &ran).await;
        // The dead host's own reaper cleans up its side and leaves the
        // record as the other wrote it.
        let report = gc(dead_home, &db).await;
        assert_eq!(reaped(&report), vec![id.clone()], "{report}");
        assert_eq!(store.job(&id).await.unwrap(), Some(rec));
        drop(alive);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_through_another_servers_api_stops_the_job_where_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    for db in backends(dir.path()).await {
        let (a, b, c) = (Home::new(), Home::new(), Home::new());
        for home in [&a, &b, &c] {
            hosts_config(home, "heartbeat_secs = 10\nheartbeat_ttl_secs = 60");
        }
        let (srv_a, srv_b) = (
            server(&a, &db.db(), &b).await,
            server(&b, &db.db(), &a).await,
        );
        let store = db.open().await;
        let scratch = tempfile::tempdir().unwrap();
        let gate = scratch.path().join("never");
        // One job cancelled where it runs, one through the other server.
        let mut ended = Vec::new();
        for (n, remote) in [(0, false), (1, true)] {
            let marker = scratch.path().join(format!("started-{n}"));
            let id = srv_a
                .submit_ok(&spec(&a, &format!("T-C{n}"), &gated(&marker, &gate)), 0)
                .await;
            appears(&marker).await;
            let (owner, _) = owner_of(&store, &id).await;
            let a_runs = owner.host == host_of(&a).0;
            let (here, other) = if a_runs {
                (&srv_a, &srv_b)
            } else {
                (&srv_b, &srv_a)
            };
            let through = if remote { other } else { here };
            let asked = Instant::now();
            let resp = through.cancel(&id).await;
            assert_eq!(resp.status(), 202);
            let answer: Value = body(resp).await;
            let want = if remote {
                serde_json::json!({"state": "requested", "host": owner.name, "host_id": owner.host})
            } else {
                serde_json::json!({"state": "stopping", "host": null, "host_id": null})
            };
            assert_eq!(
                (answer["id"].as_str(), &answer["cancel"]),
                (Some(id.as_str()), &want)
            );
            let rec = through.wait_for(&id, is_final).await;
            eprintln!(
                "cancel of a job on {} through {} server: final after {:?}",
                if a_runs { "A" } else { "B" },
                if remote { "the other" } else { "its own" },
                asked.elapsed()
            );
            // Who asked, and when (before: plain `cancelled`).
            let reason = asked_through(&store, &id, through).await;
            assert_eq!(
                (rec.status, rec.reason.clone()),
                (JobStatus::Cancelled, Some(reason.clone()))
            );
            nothing_lost(&store, &rec).await;
            ended.push((statuses(&store, &id).await, reason));
        }
        // The remote cancel ends the job exactly as the local one: the
        // same phases, the same details from the cancel on, but for who
        // asked.
        let phases = |s: &[(Phase, Option<String>)]| s.iter().map(|(p, _)| *p).collect::<Vec<_>>();
        assert_eq!(phases(&ended[1].0), phases(&ended[0].0));
        for (statuses, reason) in &ended {
            assert_eq!(
                statuses.last(),
                Some(&(Phase::Cancelled, Some(reason.clone())))
            );
        }
        assert_eq!(
            ended[1].0[ended[1].0.len() - 2],
            ended[0].0[ended[0].0.len() - 2]
        );

        // A `paddock run` of a third home, cancelled through a server.
        let go = c.path().join("go");
        let spec = waiting_job(&c, &go);
        let run = run_cmd(&c, &db, &spec).spawn().unwrap();
        let id = started(&c).await;
        let resp = srv_b.cancel(&id).await;
        assert_eq!(resp.status(), 202);
        let answer: Value = body(resp).await;
        let (host, name) = host_of(&c);
        assert_eq!(
            answer["cancel"],
            serde_json::json!({"state": "requested", "host": name, "host_id": host})
        );
        let out = run.wait_with_output().await.unwrap();
        let rec = record(&out);
        let reason = asked_through(&store, &id, &srv_b).await;
        assert_eq!(
            (rec.status, rec.reason.as_deref(), out.status.code()),
            (JobStatus::Cancelled, Some(reason.as_str()), Some(5)),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(store.job(&id).await.unwrap(), Some(rec));
        assert_eq!(c.leftover_workspaces(), Vec::<String>::new());
        // `paddock jobs` on any home names the host that ran it.
        let listed = a
            .paddock(&["jobs", "--json", "-n", "1"], &[("PADDOCK_DB", &db.db())])
            .await;
        let line: Value = serde_json::from_slice(&listed.stdout).unwrap();
        assert_eq!(
            (line["id"].as_str(), &line["host"]),
            (
                Some(id.as_str()),
                &serde_json::json!({"name": name, "id": host})
            )
        );
        // Ended: a second cancel is refused with the stable code.
        let again = srv_a.cancel(&id).await;
        assert_eq!(
            (
                again.status().as_u16(),
                body::<Value>(again).await["code"].clone()
            ),
            (409, Value::from("job_final"))
        );
    }
}

/// The store (created or migrated) of `db`, as a server opens it.
async fn created(db: &Shared) -> SharedStore {
    let at = match db {
        Shared::Sqlite(p) => StoreAt::File(p.clone()),
        Shared::Postgres(url) => StoreAt::Postgres(PgUrl::parse(url).unwrap()),
    };
    paddock::store::open(&at).await.unwrap()
}

/// A job of ticket `ticket` from the queue (priority 4), claimed by the
/// host `owner` with its heartbeat `at`, that appended its first event and
/// wrote a call ahead (in flight): what a server on `owner` leaves when it
/// dies mid-job. Its record.
async fn claimed_by(
    store: &SharedStore,
    home: &Home,
    ticket: &str,
    owner: &Owner,
    at: time::OffsetDateTime,
) -> JobRecord {
    let spec: JobSpec = serde_json::from_value(spec(home, ticket, TURN)).unwrap();
    let mut queued = JobRecord::new(&format!("job-{ticket}"), &spec, at);
    queued.status = JobStatus::Queued;
    store
        .enqueue_job(&queued, &serde_json::to_string(&spec).unwrap(), 4, None)
        .await
        .unwrap();
    let claimed = store.claim_job(&[], owner, at, &[]).await.unwrap().unwrap();
    assert_eq!(claimed.id, queued.id);
    store
        .append_event(&paddock_protocol::AgentEvent {
            job_id: claimed.id.clone(),
            seq: 1,
            at,
            body: EventBody::Status {
                phase: Phase::Launching,
                detail: None,
            },
        })
        .await
        .unwrap();
    store
        .insert_model_call(&in_flight(&claimed.id))
        .await
        .unwrap();
    claimed
}

/// Call 1 of job `id`, written ahead and never settled.
fn in_flight(id: &str) -> paddock_protocol::ModelCall {
    paddock_protocol::ModelCall {
        job_id: id.to_owned(),
        attempt: 1,
        seq: 1,
        provider: "scripted".into(),
        requested_model: "gpt-5.5".into(),
        served_model: None,
        tokens: paddock_protocol::TokenUsage {
            input_tokens: 100,
            ..Default::default()
        },
        ttft_ms: None,
        duration_ms: 0,
        status: CallStatus::InFlight,
        http_status: None,
        error: None,
        estimated: true,
        price_version: "test".into(),
        cost_micros: 250,
        started_at: time::OffsetDateTime::now_utc(),
    }
}

/// What job `id` ends with once reclaimed `cancelled`: its record's
/// status and reason, its status events, its ledger's calls (status and
/// error), and the other jobs of its ticket (none: never queued again).
async fn ended(
    store: &SharedStore,
    rec: &JobRecord,
) -> (
    JobStatus,
    Option<String>,
    Vec<(Phase, Option<String>)>,
    Vec<(CallStatus, Option<String>)>,
    Vec<String>,
) {
    let calls = store.model_calls(&rec.id).await.unwrap();
    let others = store
        .jobs(100)
        .await
        .unwrap()
        .into_iter()
        .filter(|j| j.ticket_id == rec.ticket_id && j.id != rec.id)
        .map(|j| j.id)
        .collect();
    (
        rec.status,
        rec.reason.clone(),
        statuses(store, &rec.id).await,
        calls.into_iter().map(|c| (c.status, c.error)).collect(),
        others,
    )
}

/// A cancel asked through the API of a job that another host's server
/// claimed from the queue, and that host then dies before it reads the
/// request: the reclaim (serve's periodic pass, and `paddock gc`) ends the
/// job `cancelled`, saying who asked and when and that its host was found
/// dead, its call in flight settled and its events dense, and never queues
/// its next attempt; the server that reclaimed it sends its final record
/// to the webhook. Before, it was failed and run again, and no webhook
/// was sent.
#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_asked_of_a_job_whose_host_then_dies_ends_it_cancelled_never_run_again() {
    let dir = tempfile::tempdir().unwrap();
    for db in backends(dir.path()).await {
        let a = Home::new();
        hosts_config(&a, HOSTS);
        let store = created(&db).await;
        let dead = Owner {
            host: "d".repeat(32),
            name: "dead-host".into(),
        };
        let liveness = |home: &Home| {
            let (host, name) = host_of(home);
            Liveness {
                owner: Owner { host, name },
                interval: Duration::from_secs(1),
                ttl: Duration::from_secs(3),
                requeues: 1,
                cancel_poll: std::time::Duration::from_secs(1),
            }
        };
        let want = |asked: &CancelRequest, dead_reason: &str| {
            let reason = cancelled_reason(asked, dead_reason);
            (
                JobStatus::Cancelled,
                Some(format!("{reason}{NOT_REQUEUED_CANCELLED}")),
                vec![(Phase::Launching, None), (Phase::Cancelled, Some(reason))],
                vec![(CallStatus::Interrupted, Some(RECLAIMED_CALL.to_owned()))],
                Vec::<String>::new(),
            )
        };

        // `paddock gc`: its heartbeat an hour old, the cancel recorded.
        let old = time::OffsetDateTime::now_utc() - time::Duration::hours(1);
        let job = claimed_by(&store, &a, "T-G", &dead, old).await;
        let asked_at = time::OffsetDateTime::now_utc();
        assert_eq!(
            store
                .request_cancel(&job.id, "asking-host", asked_at)
                .await
                .unwrap(),
            Some(dead.clone())
        );
        let report = gc(&a, &db).await;
        assert_eq!(
            report["jobs"],
            serde_json::json!([{
                "name": job.id,
                "killed": 0,
                "cgroups": [],
                "patch": null,
                "workspace_removed": false,
                "kept": false,
                "marked_failed": false,
                "marked_cancelled": true,
                "reclaimed_from": format!("dead-host ({})", dead.host),
                "errors": [],
            }])
        );
        let rec = store.job(&job.id).await.unwrap().unwrap();
        let asked = CancelRequest {
            at: store.cancel_requested(&job.id).await.unwrap().unwrap().at,
            by: "asking-host".into(),
        };
        let dead_reason = reclaimed_reason(&dead, old, Stale::Dated, &liveness(&a));
        assert_eq!(ended(&store, &rec).await, want(&asked, &dead_reason));
        nothing_lost(&store, &rec).await;

        // A server: its owner alive (renewing) when the cancel is asked
        // through the API, dead from then on.
        let job = claimed_by(&store, &a, "T-S", &dead, time::OffsetDateTime::now_utc()).await;
        let renewing = {
            let (store, id, host) = (store.clone(), job.id.clone(), dead.host.clone());
            tokio::spawn(async move {
                loop {
                    let now = time::OffsetDateTime::now_utc();
                    assert!(store.heartbeat(&id, &host, now).await.unwrap());
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
            })
        };
        let (hook, received) = hook_receiver().await;
        let secret = "whsec-fleet-0123456789";
        let srv = Server::start_env(
            &a,
            &[
                "--webhook-url",
                &hook,
                "--webhook-secret",
                "env:PADDOCK_TEST_HOOK_SECRET",
            ],
            &[
                ("PADDOCK_DB", &db.db()),
                ("PADDOCK_TEST_HOOK_SECRET", secret),
            ],
        )
        .await;
        let resp = srv.cancel(&job.id).await;
        assert_eq!(resp.status(), 202, "{}", srv.stderr());
        let answer: Value = body(resp).await;
        assert_eq!(
            answer["cancel"],
            serde_json::json!({"state": "requested", "host": "dead-host", "host_id": dead.host})
        );
        renewing.abort();
        let _ = renewing.await;
        let (_, beat) = owner_of(&store, &job.id).await;
        let rec = srv.wait_for(&job.id, is_final).await;
        let asked = CancelRequest {
            at: store.cancel_requested(&job.id).await.unwrap().unwrap().at,
            by: format!(
                "{} (API token {}, scope admin)",
                host_of(&a).1,
                srv.token_id
            ),
        };
        let dead_reason = reclaimed_reason(&dead, beat, Stale::Dated, &liveness(&a));
        assert_eq!(
            ended(&store, &rec).await,
            want(&asked, &dead_reason),
            "{}",
            srv.stderr()
        );
        nothing_lost(&store, &rec).await;
        // Nothing queued, nothing more run; its final record sent to the
        // webhook by the server that reclaimed it.
        assert_eq!(store.queue_depth().await.unwrap(), 0);
        assert_one_signed_delivery(&srv, &received, secret, rec).await;
        drop(srv);
    }
}

/// A cancel through the API of a job whose host is already dead (its
/// heartbeat older than the TTL when asked, and seen by the server's pass
/// to have missed two renewals) settles it at once: the answer
/// is `cancelled`, naming the host it ran on, with the final record,
/// whose reason says who asked (the server's host and the API token: its
/// id, scope and name) and that its host was found dead; its call in
/// flight settled, its events dense, never queued again, its final record
/// sent to the webhook. Before, the answer was `requested` and the job
/// stayed `running` until the server's reaper pass had seen that
/// heartbeat unchanged for the TTL (a minute here). Probe: a job whose
/// owner renews its heartbeat is not settled by a cancel (`requested`,
/// still `running`, the request recorded for its owner), though that
/// owner's clock runs an hour behind, so that each heartbeat it writes is
/// dated an hour old (before, the date alone settled it: a live job).
#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_of_a_job_whose_host_is_already_dead_settles_it_at_once() {
    let dir = tempfile::tempdir().unwrap();
    for db in backends(dir.path()).await {
        let a = Home::new();
        hosts_config(&a, "heartbeat_secs = 1\nheartbeat_ttl_secs = 60");
        let store = created(&db).await;
        let dead = Owner {
            host: "d".repeat(32),
            name: "dead-host".into(),
        };
        // Claimed by both before the server starts (its start-up reap
        // would reclaim one an hour old first, and its scheduler could
        // claim a job queued meanwhile), their heartbeats fresh.
        let now = time::OffsetDateTime::now_utc();
        let job = claimed_by(&store, &a, "T-D", &dead, now).await;
        let alive = Owner {
            host: "e".repeat(32),
            name: "live-host".into(),
        };
        let live_job = claimed_by(&store, &a, "T-L", &alive, now).await;
        let (hook, received) = hook_receiver().await;
        let secret = "whsec-fleet-0123456789";
        let srv = Server::start_env(
            &a,
            &[
                "--webhook-url",
                &hook,
                "--webhook-secret",
                "env:PADDOCK_TEST_HOOK_SECRET",
            ],
            &[
                ("PADDOCK_DB", &db.db()),
                ("PADDOCK_TEST_HOOK_SECRET", secret),
            ],
        )
        .await;
        // The live owner, its clock an hour behind from the server's
        // start on (its start-up reap judges by dates alone).
        let renewing = {
            let (store, id, host) = (store.clone(), live_job.id.clone(), alive.host.clone());
            tokio::spawn(async move {
                loop {
                    let behind = time::OffsetDateTime::now_utc() - time::Duration::hours(1);
                    assert!(store.heartbeat(&id, &host, behind).await.unwrap());
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
            })
        };
        let (host, name) = host_of(&a);
        let liveness = Liveness {
            owner: Owner {
                host,
                name: name.clone(),
            },
            interval: Duration::from_secs(1),
            ttl: Duration::from_secs(60),
            requeues: 1,
            cancel_poll: Duration::from_secs(1),
        };
        let env = [("PADDOCK_DB", db.db())];
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let out = a
            .paddock(
                &["token", "create", "--scope", "submit", "--name", "ci bot"],
                &env,
            )
            .await;
        assert!(out.status.success());
        let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        let ci = super::serve::client_with(&token);
        let cancel = |id: &str| ci.post(srv.url(&format!("/v1/jobs/{id}/cancel"))).send();

        // Its host dead an hour since, and seen so by the server's pass
        // (every second) for more than two renewals.
        let old = now - time::Duration::hours(1);
        assert!(store.heartbeat(&job.id, &dead.host, old).await.unwrap());
        tokio::time::sleep(Duration::from_secs(4)).await;
        let resp = cancel(&job.id).await.unwrap();
        assert_eq!(resp.status(), 202, "{}", srv.stderr());
        let answer: Value = body(resp).await;
        let asked = CancelRequest {
            at: store.cancel_requested(&job.id).await.unwrap().unwrap().at,
            by: format!(
                "{name} (API token {}, scope submit, name \"ci bot\")",
                super::serve::token_id(&token)
            ),
        };
        let dead_reason = reclaimed_reason(&dead, old, Stale::Dated, &liveness);
        let reason = cancelled_reason(&asked, &dead_reason);
        let rec = store.job(&job.id).await.unwrap().unwrap();
        assert_eq!(
            (
                answer["status"].as_str(),
                answer["reason"].as_str(),
                &answer["cancel"]
            ),
            (
                Some("cancelled"),
                Some(format!("{reason}{NOT_REQUEUED_CANCELLED}").as_str()),
                &serde_json::json!({"state": "cancelled", "host": "dead-host", "host_id": dead.host})
            ),
            "{}",
            srv.stderr()
        );
        assert_eq!(
            ended(&store, &rec).await,
            (
                JobStatus::Cancelled,
                Some(format!("{reason}{NOT_REQUEUED_CANCELLED}")),
                vec![(Phase::Launching, None), (Phase::Cancelled, Some(reason))],
                vec![(CallStatus::Interrupted, Some(RECLAIMED_CALL.to_owned()))],
                Vec::<String>::new(),
            )
        );
        nothing_lost(&store, &rec).await;
        assert_eq!(store.queue_depth().await.unwrap(), 0);
        assert_one_signed_delivery(&srv, &received, secret, rec).await;

        // Its owner alive (renewing): the request is recorded for it, and
        // nothing is settled here.
        let job = live_job;
        let resp = cancel(&job.id).await.unwrap();
        assert_eq!(resp.status(), 202, "{}", srv.stderr());
        let answer: Value = body(resp).await;
        assert_eq!(
            (answer["status"].as_str(), &answer["cancel"]),
            (
                Some("running"),
                &serde_json::json!({"state": "requested", "host": "live-host", "host_id": alive.host})
            )
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        let rec = store.job(&job.id).await.unwrap().unwrap();
        assert_eq!(
            (
                rec.status,
                store.cancel_requested(&job.id).await.unwrap().map(|c| c.by)
            ),
            (JobStatus::Running, Some(asked.by.clone()))
        );
        renewing.abort();
        let _ = renewing.await;
        drop(srv);
    }
}

/// A final record owed to the webhooks is sent whoever ends the job: a
/// job a server with webhooks claimed (so owed), whose host then died,
/// reclaimed by `paddock gc` (a process with no webhooks), has its final
/// record sent by the next server with webhooks on the store, once, signed
/// with its secret; a second server started after it sends nothing more.
/// Before, nothing ever sent it (only a server's own periodic reclaim
/// did).
#[tokio::test(flavor = "multi_thread")]
async fn a_final_record_owed_to_the_webhooks_is_sent_whoever_ended_the_job() {
    let dir = tempfile::tempdir().unwrap();
    for db in backends(dir.path()).await {
        let a = Home::new();
        // Reclaimed, not queued again: the one record to send is its own.
        hosts_config(&a, &format!("{HOSTS}\nrequeue_reclaimed = 0"));
        let store = created(&db).await;
        let dead = Owner {
            host: "e".repeat(32),
            name: "dead-server".into(),
        };
        let old = time::OffsetDateTime::now_utc() - time::Duration::hours(1);
        let job = claimed_by(&store, &a, "T-W", &dead, old).await;
        store.owe_webhook(&job.id, old).await.unwrap();
        let report = gc(&a, &db).await;
        assert_eq!(
            (reaped(&report), report["jobs"][0]["marked_failed"].clone()),
            (vec![job.id.clone()], Value::Bool(true))
        );
        let rec = store.job(&job.id).await.unwrap().unwrap();
        assert_eq!(rec.status, JobStatus::Failed);

        let (hook, received) = hook_receiver().await;
        let secret = "whsec-owed-0123456789";
        let env = [
            ("PADDOCK_DB", db.db()),
            ("PADDOCK_TEST_HOOK_SECRET", secret.to_owned()),
        ];
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let flags = [
            "--webhook-url",
            hook.as_str(),
            "--webhook-secret",
            "env:PADDOCK_TEST_HOOK_SECRET",
        ];
        let srv = Server::start_env(&a, &flags, &env).await;
        assert_one_signed_delivery(&srv, &received, secret, rec.clone()).await;
        // The server records the attempt once the receiver has answered,
        // which may be after the test has read the delivery.
        let mut attempts = Vec::new();
        for _ in 0..200 {
            attempts = store.webhook_attempts(&job.id).await.unwrap();
            if !attempts.is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert_eq!(
            attempts
                .iter()
                .map(|a| (a.url.as_str(), a.attempt, a.delivered))
                .collect::<Vec<_>>(),
            vec![(hook.as_str(), 1, true)]
        );
        drop(srv);
        // Another server on the store later: the record is sent already.
        let b = Home::new();
        hosts_config(&b, HOSTS);
        let srv = Server::start_env(&b, &flags, &env).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(received.lock().unwrap().len(), 1, "{}", srv.stderr());
        drop(srv);
    }
}

/// `DELETE /v1/jobs/{id}` through a server on another host than the one
/// that ran the job cannot remove that host's artifacts: it is refused
/// (409 `job_on_another_host`, naming the host), before anything is done
/// (a running job keeps running), and nothing is removed; through a
/// server on the host that ran it, the job is disposed of. Before, the
/// other server answered 200 and left the artifacts where they were.
#[tokio::test(flavor = "multi_thread")]
async fn a_dispose_through_another_hosts_server_says_the_artifacts_are_there() {
    let dir = tempfile::tempdir().unwrap();
    for db in backends(dir.path()).await {
        let (a, b) = (Home::new(), Home::new());
        hosts_config(&a, HOSTS);
        hosts_config(&b, HOSTS);
        let (srv_a, srv_b) = (
            server(&a, &db.db(), &b).await,
            server(&b, &db.db(), &a).await,
        );
        let store = db.open().await;
        let scratch = tempfile::tempdir().unwrap();
        let (marker, gate) = (scratch.path().join("started"), scratch.path().join("gate"));
        let id = srv_a
            .submit_ok(&spec(&a, "T-D", &gated(&marker, &gate)), 0)
            .await;
        appears(&marker).await;
        let (owner, _) = owner_of(&store, &id).await;
        let (here, other, home) = if owner.host == host_of(&a).0 {
            (&srv_a, &srv_b, &a)
        } else {
            (&srv_b, &srv_a, &b)
        };
        let artifacts = home.data().join("artifacts").join(&id);
        let delete = |srv: &Server| {
            let req = srv.client.delete(srv.url(&format!("/v1/jobs/{id}")));
            async move { req.send().await.unwrap() }
        };
        let host = format!("host {} (jobs directory {})", owner.name, owner.host);
        let refused = |detail: String| serde_json::json!({"code": "job_on_another_host", "status": 409, "detail": detail});
        let answer = |v: Value| serde_json::json!({"code": v["code"], "status": v["status"], "detail": v["detail"]});
        // Running: refused, and it runs on.
        let resp = delete(other).await;
        assert_eq!(resp.status(), 409);
        assert_eq!(
            answer(body(resp).await),
            refused(format!(
                "job {id} runs on {host}: its artifacts are there and this server cannot remove \
                 them, so nothing was done; dispose of it through a server on that host (POST \
                 /v1/jobs/{id}/cancel here stops it)"
            ))
        );
        assert_eq!(
            store.job(&id).await.unwrap().unwrap().status,
            JobStatus::Running
        );
        // Ended: refused, its artifacts kept.
        std::fs::write(&gate, "").unwrap();
        let rec = here.wait_for(&id, is_final).await;
        assert_eq!(rec.status, JobStatus::Done, "{}", here.stderr());
        assert!(artifacts.join("patch.diff").exists());
        let resp = delete(other).await;
        assert_eq!(resp.status(), 409);
        assert_eq!(
            answer(body(resp).await),
            refused(format!(
                "job {id} ran on {host} and has ended (done): its artifacts are there and this \
                 server cannot remove them, so nothing was done; dispose of it through a server \
                 on that host"
            ))
        );
        assert!(artifacts.join("patch.diff").exists());
        // Through its own host's server: disposed of, its record saying
        // so and naming no patch.
        let resp = delete(here).await;
        assert_eq!(resp.status(), 200, "{}", here.stderr());
        let disposed = body::<JobRecord>(resp).await;
        assert!(disposed.disposed_at.is_some(), "{disposed:?}");
        assert_eq!(
            disposed,
            JobRecord {
                patch_path: None,
                disposed_at: disposed.disposed_at,
                ..rec
            }
        );
        assert!(!artifacts.exists());
    }
}

/// Servers of a fleet may allow different things (`[serve] allow_*`), and
/// a path names a file of the host that reads it: a job one server
/// accepted is checked again by the server that claims it, against its
/// own settings. Server A takes no queued job (its lane is another
/// project's); B may name only its own home's files, so it claims A's
/// job, may not run it, and puts it back in the queue, the reason on its
/// record (the API's, `paddock show`'s) naming B, the job and the field;
/// B passes it over from then on, and C, which may name A's files, runs
/// it. Before, B ran it, reading A's host's paths on its own.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_its_claimer_may_not_run_stays_queued_for_a_server_that_may() {
    let dir = tempfile::tempdir().unwrap();
    for db in backends(dir.path()).await {
        let (a, b, c) = (Home::new(), Home::new(), Home::new());
        hosts_config(
            &a,
            &format!("{HOSTS}\n[[serve.lanes]]\nprojects = [\"none-such\"]"),
        );
        hosts_config(&b, HOSTS);
        hosts_config(&c, HOSTS);
        let env = [("PADDOCK_DB", db.db())];
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let srv_a = Server::start_env(&a, &[], &env).await;
        let srv_b = Server::start_env(&b, &[], &env).await;
        let store = db.open().await;
        let job = spec(&a, "T-R", TURN);
        let id = srv_a.submit_ok(&job, 0).await;
        // B claims it and puts it back (A never claims it).
        let mut rec = srv_b.job(&id).await;
        for _ in 0..600 {
            if rec.reason.is_some() || is_final(rec.status) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            rec = srv_b.job(&id).await;
        }
        let (b_host, b_name) = host_of(&b);
        let refused = SubmissionError::Path {
            field: "repository.path".into(),
            path: job["repository"]["path"].as_str().unwrap().into(),
            allowed: b.path().display().to_string(),
        };
        let want = format!(
            "not run by host {b_name} (jobs directory {b_host}), which may not run job {id}: \
             repository.path: {} is a path on this server outside the directories a submitted \
             spec may name ({}); the server allows a directory with `[serve] allow_paths` or \
             `paddock serve --allow-path DIR`; it stays queued until a server that may run it claims it (this one looks again every 60 s) and fails once passed over for 86400 s (`[serve] max_passed_over_secs`) unless such a server, all its slots taken, has said so lately; a cancel ends it",
            job["repository"]["path"].as_str().unwrap(),
            b.path().display()
        );
        let owner = Owner {
            host: b_host.clone(),
            name: b_name.clone(),
        };
        assert_eq!(
            passed_over_reason(
                &id,
                &owner,
                Duration::from_secs(86_400),
                &PassOver::from(refused)
            ),
            want
        );
        assert_eq!(
            (rec.status, rec.reason.clone()),
            (JobStatus::Queued, Some(want.clone())),
            "{}",
            srv_b.stderr()
        );
        assert_eq!(store.job_owner(&id).await.unwrap(), None);
        // `paddock show` on any home says why it waits.
        let shown = a
            .paddock(&["show", "--json", &id], &[("PADDOCK_DB", &db.db())])
            .await;
        let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
        assert_eq!(
            (&shown["record"]["status"], &shown["record"]["reason"]),
            (&Value::from("queued"), &Value::from(want.as_str()))
        );
        // A server that may run it does, once; the reason is gone.
        let srv_c =
            Server::start_env(&c, &["--allow-path", &a.path().display().to_string()], &env).await;
        let ran = srv_c.wait_for(&id, is_final).await;
        assert_eq!(
            (ran.status, ran.reason.clone()),
            (JobStatus::Done, None),
            "{}\n{}",
            srv_b.stderr(),
            srv_c.stderr()
        );
        assert_eq!(
            store.job_owner(&id).await.unwrap().map(|o| o.host),
            Some(host_of(&c).0)
        );
        nothing_lost(&store, &ran).await;
        drop((srv_a, srv_b, srv_c));
    }
}

/// What the sandbox would bind is judged by the server that runs the job,
/// not the one that accepts it. Server A takes no queued job (its lane is
/// another project's) and its PATH finds the job's engine, a bare
/// `engine.binary`, directly in /dev/shm, a directory its sandbox makes
/// its own; B's PATH finds it in a directory of its own. A job on the
/// `sandbox` rung submitted to A is accepted and B runs it to `done`.
/// Before, A refused it at submission (422) for what its own view would
/// refuse, though B, which runs it, could (`Runner::view_here` is not
/// asked at submission; provisioning asks on the claiming server).
#[tokio::test(flavor = "multi_thread")]
async fn a_job_the_accepting_servers_sandbox_cannot_bind_runs_on_the_server_that_can() {
    if !sandbox_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for db in backends(dir.path()).await {
        let (a, b) = (Home::new(), Home::new());
        hosts_config(
            &a,
            &format!("{HOSTS}\n[[serve.lanes]]\nprojects = [\"none-such\"]"),
        );
        hosts_config(&b, HOSTS);
        let mut job = spec(&a, "T-V", TURN);
        let stand_in = std::path::PathBuf::from(job["engine"]["binary"].as_str().unwrap());
        // The engine by one bare name: directly in /dev/shm on A's PATH,
        // in a directory of its own on B's.
        let in_shm = tempfile::Builder::new()
            .prefix("paddock-codex-")
            .tempfile_in("/dev/shm")
            .unwrap()
            .into_temp_path();
        std::fs::copy(&stand_in, &in_shm).unwrap();
        let name = in_shm.file_name().unwrap().to_str().unwrap().to_owned();
        let b_bin = b.path().join("bin");
        std::fs::create_dir_all(&b_bin).unwrap();
        std::fs::copy(&stand_in, b_bin.join(&name)).unwrap();
        job["engine"]["binary"] = Value::from(name.as_str());
        job["isolation"] = Value::from("sandbox");
        let path = std::env::var("PATH").unwrap();
        let (a_path, b_path) = (
            format!("/dev/shm:{path}"),
            format!("{}:{path}", b_bin.display()),
        );
        let srv_a = Server::start_env(
            &a,
            &[],
            &[("PADDOCK_DB", &db.db()), ("PATH", a_path.as_str())],
        )
        .await;
        let srv_b = Server::start_env(
            &b,
            &["--allow-path", &a.path().display().to_string()],
            &[("PADDOCK_DB", &db.db()), ("PATH", b_path.as_str())],
        )
        .await;
        let accepted = srv_a.submit(&job, 0).await;
        let status = accepted.status().as_u16();
        let id = body::<JobRecord>(accepted).await.id;
        let ran = srv_b.wait_for(&id, is_final).await;
        let store = db.open().await;
        assert_eq!(
            (
                status,
                ran.status,
                ran.reason.clone(),
                ran.isolation.clone(),
                store.job_owner(&id).await.unwrap().map(|o| o.host),
            ),
            (
                202,
                JobStatus::Done,
                None,
                "sandbox".to_string(),
                Some(host_of(&b).0),
            ),
            "{}\n{}",
            srv_a.stderr(),
            srv_b.stderr()
        );
        drop((srv_a, srv_b));
    }
}

/// A job whose engine one server of the fleet has and another has not
/// (`engine.binary` a bare name, found on B's PATH, not on A's) runs on
/// the server that has it. A claims it first (B not yet started) and
/// passes it over before anything of it starts: `queued`, no owner, no
/// event, its reason naming A and the engine not found, which `paddock
/// show` gives; B, started then, claims it and runs it to `done`, its
/// reason gone. Before, A failed it at provisioning ("host A … cannot run
/// the job: …"), though B would have run it.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_whose_engine_its_claimer_has_not_runs_on_the_server_that_has_it() {
    let dir = tempfile::tempdir().unwrap();
    for db in backends(dir.path()).await {
        let (a, b) = (Home::new(), Home::new());
        hosts_config(&a, HOSTS);
        hosts_config(&b, HOSTS);
        let mut job = spec(&a, "T-E", TURN);
        let stand_in = std::path::PathBuf::from(job["engine"]["binary"].as_str().unwrap());
        let b_bin = b.path().join("bin");
        std::fs::create_dir_all(&b_bin).unwrap();
        let name = format!("paddock-codex-{}", std::process::id());
        std::fs::copy(&stand_in, b_bin.join(&name)).unwrap();
        job["engine"]["binary"] = Value::from(name.as_str());
        let path = std::env::var("PATH").unwrap();
        let b_path = format!("{}:{path}", b_bin.display());
        let srv_a = Server::start_env(&a, &[], &[("PADDOCK_DB", &db.db())]).await;
        let id = srv_a.submit_ok(&job, 0).await;
        let mut passed = srv_a.job(&id).await;
        for _ in 0..600 {
            if passed.reason.is_some() || is_final(passed.status) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            passed = srv_a.job(&id).await;
        }
        let store = db.open().await;
        let owner = store.job_owner(&id).await.unwrap();
        let events = store.events(&id, 0).await.unwrap();
        let shown = a
            .paddock(&["show", "--json", &id], &[("PADDOCK_DB", &db.db())])
            .await;
        let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
        let (a_host, a_name) = host_of(&a);
        let want = format!(
            "not run by host {a_name} (jobs directory {a_host}), which cannot run job {id}: \
             engine codex: engine.binary `{name}` was not found on PATH (add its directory to \
             PATH, or set engine.binary to the executable's path); it stays queued until a server that can run it \
             claims it (this one looks again every 60 s) and fails once passed over for 86400 s (`[serve] max_passed_over_secs`) unless such a server, all its slots taken, has said so lately; a cancel ends it"
        );
        assert_eq!(
            (
                (passed.status, passed.reason.clone()),
                owner,
                events,
                (
                    shown["record"]["status"].clone(),
                    shown["record"]["reason"].clone()
                ),
            ),
            (
                (JobStatus::Queued, Some(want.clone())),
                None,
                Vec::new(),
                (Value::from("queued"), Value::from(want.as_str())),
            ),
            "{}",
            srv_a.stderr()
        );
        let srv_b = Server::start_env(
            &b,
            &["--allow-path", &a.path().display().to_string()],
            &[("PADDOCK_DB", &db.db()), ("PATH", b_path.as_str())],
        )
        .await;
        let ran = srv_b.wait_for(&id, is_final).await;
        assert_eq!(
            (
                ran.status,
                ran.reason.clone(),
                store.job_owner(&id).await.unwrap().map(|o| o.host),
            ),
            (JobStatus::Done, None, Some(host_of(&b).0)),
            "{}\n{}",
            srv_a.stderr(),
            srv_b.stderr()
        );
        nothing_lost(&store, &ran).await;
        drop((srv_a, srv_b));
    }
}

/// A cancel through one server of a job another server runs reaches the
/// job at once on PostgreSQL (`NOTIFY` from the asking server, `LISTEN`
/// in the running one), not at the running job's next poll: with the
/// poll and the heartbeat an hour apart, the job still ends `cancelled`
/// (within the wait's minute, in practice well under a second). Before,
/// the cancel waited for the poll (an hour here, 1 s by default). SQLite
/// has no notification between processes: there the poll stays.
#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_through_another_server_wakes_the_job_at_once_on_postgres() {
    let Some(pg) = paddock_test_support::postgres::database().await else {
        return;
    };
    let slow = "heartbeat_secs = 3600\nheartbeat_ttl_secs = 7200\ncancel_poll_secs = 3600";
    let (a, b) = (Home::new(), Home::new());
    hosts_config(&a, slow);
    hosts_config(&b, slow);
    let (srv_a, srv_b) = (server(&a, &pg.url, &b).await, server(&b, &pg.url, &a).await);
    let store = Shared::Postgres(pg.url.clone()).open().await;
    let scratch = tempfile::tempdir().unwrap();
    let (marker, gate) = (scratch.path().join("started"), scratch.path().join("never"));
    let id = srv_a
        .submit_ok(&spec(&a, "T-N", &gated(&marker, &gate)), 0)
        .await;
    appears(&marker).await;
    let (owner, _) = owner_of(&store, &id).await;
    let other = if owner.host == host_of(&a).0 {
        &srv_b
    } else {
        &srv_a
    };
    let asked = Instant::now();
    let resp = other.cancel(&id).await;
    assert_eq!(resp.status(), 202);
    let answer: Value = body(resp).await;
    assert_eq!(
        answer["cancel"],
        serde_json::json!({"state": "requested", "host": owner.name, "host_id": owner.host})
    );
    let rec = other.wait_for(&id, is_final).await;
    eprintln!(
        "a cancel through the other server: final after {:?}",
        asked.elapsed()
    );
    let reason = asked_through(&store, &id, other).await;
    assert_eq!(
        (rec.status, rec.reason.as_deref()),
        (JobStatus::Cancelled, Some(reason.as_str())),
        "{}\n{}",
        srv_a.stderr(),
        srv_b.stderr()
    );
    nothing_lost(&store, &rec).await;
}

/// The servers' cancel listeners' connections terminated
/// (`pg_terminate_backend`, as a PostgreSQL restart or a dropped network
/// does), each listener comes back `LISTEN`ing, and a cancel through the
/// other server still reaches the running job at once: with the poll and
/// the heartbeat an hour apart, nothing else could stop it within the
/// wait.
#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_reaches_the_job_after_the_listeners_connections_were_terminated() {
    use sqlx::Connection;
    let Some(pg) = paddock_test_support::postgres::database().await else {
        return;
    };
    let slow = "heartbeat_secs = 3600\nheartbeat_ttl_secs = 7200\ncancel_poll_secs = 3600";
    let (a, b) = (Home::new(), Home::new());
    hosts_config(&a, slow);
    hosts_config(&b, slow);
    let (srv_a, srv_b) = (server(&a, &pg.url, &b).await, server(&b, &pg.url, &a).await);
    let store = Shared::Postgres(pg.url.clone()).open().await;
    let scratch = tempfile::tempdir().unwrap();
    let (marker, gate) = (scratch.path().join("started"), scratch.path().join("never"));
    let id = srv_a
        .submit_ok(&spec(&a, "T-L", &gated(&marker, &gate)), 0)
        .await;
    appears(&marker).await;

    let mut admin = sqlx::PgConnection::connect(&pg.url).await.unwrap();
    let listening = "SELECT pid FROM pg_stat_activity WHERE datname = current_database() \
                     AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid() ORDER BY pid";
    let before: Vec<i32> = sqlx::query_scalar(listening)
        .fetch_all(&mut admin)
        .await
        .unwrap();
    assert!(!before.is_empty(), "nobody listens");
    for pid in &before {
        let killed: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
            .bind(pid)
            .fetch_one(&mut admin)
            .await
            .unwrap();
        assert!(killed);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now: Vec<i32> = sqlx::query_scalar(listening)
            .fetch_all(&mut admin)
            .await
            .unwrap();
        if now.len() == before.len() && now.iter().all(|p| !before.contains(p)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the listeners did not come back: {before:?} then {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let (owner, _) = owner_of(&store, &id).await;
    let other = if owner.host == host_of(&a).0 {
        &srv_b
    } else {
        &srv_a
    };
    let resp = other.cancel(&id).await;
    assert_eq!(resp.status(), 202);
    let rec = other.wait_for(&id, is_final).await;
    let reason = asked_through(&store, &id, other).await;
    assert_eq!(
        (rec.status, rec.reason.as_deref()),
        (JobStatus::Cancelled, Some(reason.as_str())),
        "{}\n{}",
        srv_a.stderr(),
        srv_b.stderr()
    );
    nothing_lost(&store, &rec).await;
}

/// A fleet server that drains (SIGTERM) claims nothing more while its peer
/// goes on: its running job is cancelled at the grace, the job queued
/// meanwhile stays queued (the drained server's slot, freed by the cancel,
/// takes nothing) and is run by the peer once it has room; nothing of
/// either job is lost.
#[tokio::test(flavor = "multi_thread")]
async fn a_draining_server_claims_nothing_more_and_its_peer_runs_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    for db in backends(dir.path()).await {
        let (a, b) = (Home::new(), Home::new());
        for home in [&a, &b] {
            hosts_config(home, "heartbeat_secs = 10\nheartbeat_ttl_secs = 60");
        }
        let scratch = tempfile::tempdir().unwrap();
        let (marker_a, marker_b) = (scratch.path().join("a"), scratch.path().join("b"));
        let (never, go_b) = (scratch.path().join("never"), scratch.path().join("go-b"));
        // A alone takes the first job; then B, started, the second: both
        // full, the third stays queued.
        let srv_a = draining_server(&a, &db.db(), &b).await;
        let store = db.open().await;
        let on_a = srv_a
            .submit_ok(&spec(&a, "T-D1", &gated(&marker_a, &never)), 0)
            .await;
        appears(&marker_a).await;
        let srv_b = draining_server(&b, &db.db(), &a).await;
        let on_b = srv_b
            .submit_ok(&spec(&b, "T-D2", &gated(&marker_b, &go_b)), 0)
            .await;
        appears(&marker_b).await;
        let waiting = srv_b.submit_ok(&spec(&b, "T-D3", TURN), 0).await;

        nix::sys::signal::kill(srv_a.pid(), nix::sys::signal::Signal::SIGTERM).unwrap();
        let mut srv_a = srv_a;
        let code = tokio::time::timeout(Duration::from_secs(60), srv_a.child.wait())
            .await
            .expect("the draining server did not stop")
            .unwrap()
            .code();
        assert_eq!(code, Some(0), "{}", srv_a.stderr());
        let drained = store.job(&on_a).await.unwrap().unwrap();
        let queued = store.job(&waiting).await.unwrap().unwrap();
        assert_eq!(
            (
                drained.status,
                drained.reason.as_deref(),
                queued.status,
                store.job_owner(&waiting).await.unwrap()
            ),
            (
                JobStatus::Cancelled,
                Some("cancelled"),
                JobStatus::Queued,
                None
            )
        );
        nothing_lost(&store, &drained).await;

        // B, given room, runs both of its own and the one A left.
        std::fs::write(&go_b, "").unwrap();
        let mut ran = Vec::new();
        for id in [&on_b, &waiting] {
            let rec = srv_b.wait_for(id, is_final).await;
            nothing_lost(&store, &rec).await;
            let owner = store.job_owner(id).await.unwrap();
            ran.push((rec.status, owner.map(|o| o.host)));
        }
        let b_host = Some(host_of(&b).0);
        assert_eq!(
            ran,
            [(JobStatus::Done, b_host.clone()), (JobStatus::Done, b_host)]
        );
        assert_eq!(a.leftover_workspaces(), Vec::<String>::new());
    }
}

/// `paddock serve` on `home` with the shared store `db`, one slot and a
/// drain grace of 1 s, allowing the files of `peer` too.
async fn draining_server(home: &Home, db: &str, peer: &Home) -> Server {
    let peer = peer.path().display().to_string();
    Server::start_env(
        home,
        &[
            "--max-concurrent-jobs",
            "1",
            "--drain-grace-secs",
            "1",
            "--allow-path",
            &peer,
        ],
        &[("PADDOCK_DB", db)],
    )
    .await
}

/// A job a server on this jobs directory has just claimed is `running` in
/// the store before its process takes the job's lease (re-admitting a
/// stored spec takes a while). A `paddock gc` at that moment (a cron job,
/// the start of a `paddock run` or of another server on the same jobs
/// directory) took it for a dead job without a lease and failed it,
/// queueing its next attempt, while its server went on starting it. Now
/// such a claim is left alone while its heartbeat (the claim's time) is
/// younger than the TTL, and reaped once it is older (its server died
/// before it took the lease).
#[tokio::test(flavor = "multi_thread")]
async fn a_job_just_claimed_here_is_not_reaped_before_it_takes_its_lease() {
    let home = Home::new();
    hosts_config(&home, "heartbeat_secs = 1\nheartbeat_ttl_secs = 3");
    let db = Shared::Sqlite(home.db());
    // The jobs directory's host id and the store, as a server makes them.
    assert_eq!(reaped(&gc(&home, &db).await), Vec::<String>::new());
    let store = db.open().await;
    let (host, name) = host_of(&home);
    let me = Owner { host, name };
    let now = time::OffsetDateTime::now_utc();
    let fresh = claimed_by(&store, &home, "T-FRESH", &me, now).await;
    let report = gc(&home, &db).await;
    assert_eq!(
        (
            reaped(&report),
            store.job(&fresh.id).await.unwrap().unwrap().status
        ),
        (Vec::<String>::new(), JobStatus::Running),
        "{report}"
    );
    // One claimed longer ago than the TTL, never leased: its server died.
    let stale = claimed_by(
        &store,
        &home,
        "T-STALE",
        &me,
        now - time::Duration::seconds(10),
    )
    .await;
    let report = gc(&home, &db).await;
    assert_eq!(
        (
            reaped(&report),
            store.job(&stale.id).await.unwrap().unwrap().status,
            store.job(&fresh.id).await.unwrap().unwrap().status
        ),
        (
            vec![stale.id.clone()],
            JobStatus::Failed,
            JobStatus::Running
        ),
        "{report}"
    );
}

/// A server killed (SIGKILL) between claiming a queued job (`running`,
/// owned by its host) and taking the job's lease leaves the job with no
/// lease file. Another server live on the same jobs directory (or this
/// one restarted within the TTL) looked only at lease files in its
/// periodic pass, and its start-up pass left the claim alone as too
/// young: the job stayed `running` for good, until someone ran `paddock
/// gc`. Now the periodic pass also reaps this host's `running` jobs with
/// no lease file once their claim is older than the TTL.
#[tokio::test(flavor = "multi_thread")]
async fn a_claim_whose_server_died_before_its_lease_is_reaped_by_a_live_servers_pass() {
    let home = Home::new();
    hosts_config(
        &home,
        "heartbeat_secs = 1\nheartbeat_ttl_secs = 5\nrequeue_reclaimed = 0",
    );
    let db = Shared::Sqlite(home.db());
    assert_eq!(reaped(&gc(&home, &db).await), Vec::<String>::new());
    let store = db.open().await;
    let (host, name) = host_of(&home);
    let me = Owner { host, name };
    // The dead server's claim, younger than the TTL when the live server
    // starts: its start-up pass leaves it alone.
    let dead = claimed_by(
        &store,
        &home,
        "T-DEAD",
        &me,
        time::OffsetDateTime::now_utc(),
    )
    .await;
    let server = Server::start(&home, &[]).await;
    assert_eq!(
        store.job(&dead.id).await.unwrap().unwrap().status,
        JobStatus::Running
    );
    let rec = server.wait_for(&dead.id, is_final).await;
    let calls: Vec<_> = store
        .model_calls(&dead.id)
        .await
        .unwrap()
        .into_iter()
        .map(|c| (c.status, c.error))
        .collect();
    assert_eq!(
        (rec.status, rec.reason.clone(), calls),
        (
            JobStatus::Failed,
            Some(format!(
                "{}; not queued again: 0 earlier attempt(s) of it were reclaimed already ([hosts] \
                 requeue_reclaimed = 0)",
                paddock::reaper::Aftermath::NoWorkspace.reason()
            )),
            vec![(
                CallStatus::Interrupted,
                Some(paddock::reaper::INTERRUPTED_CALL.to_owned())
            )]
        )
    );
    nothing_lost(&store, &rec).await;
    assert_eq!(
        home.jobs().join(".leases").read_dir().unwrap().count(),
        0,
        "the reaper's lease is gone"
    );
}

/// Two servers on one PostgreSQL database, one killed (SIGKILL) on its
/// host just after its claim of a queued job committed, before the job
/// started (no event, no lease, no renewal after the claim's): the live
/// server on the other host reclaims the claim once its heartbeat is
/// older than the TTL (the claimed attempt `failed`, its reason naming
/// the next), and runs the next attempt exactly once; nothing stays
/// claimed. (The claim itself is one statement: killed before it
/// commits, the job is still queued.)
#[tokio::test(flavor = "multi_thread")]
async fn a_claim_whose_server_died_on_another_host_is_run_once_by_the_live_one_on_postgres() {
    let Some(pg) = paddock_test_support::postgres::database().await else {
        return;
    };
    let db = Shared::Postgres(pg.url.clone());
    let (a, b) = (Home::new(), Home::new());
    hosts_config(&a, HOSTS);
    hosts_config(&b, HOSTS);
    // Host a's jobs directory and id, and the schema.
    assert_eq!(reaped(&gc(&a, &db).await), Vec::<String>::new());
    let store = created(&db).await;
    let (host, name) = host_of(&a);
    let dead = Owner { host, name };
    let scratch = tempfile::tempdir().unwrap();
    let log = scratch.path().join("runs");
    let body = format!("echo ran >> '{}'\n{TURN}", log.display());
    let spec: JobSpec = serde_json::from_value(spec(&b, "T-CLAIM", &body)).unwrap();
    let now = time::OffsetDateTime::now_utc();
    let mut queued = JobRecord::new("job-T-CLAIM", &spec, now);
    queued.status = JobStatus::Queued;
    store
        .enqueue_job(&queued, &serde_json::to_string(&spec).unwrap(), 0, None)
        .await
        .unwrap();
    let claimed = store
        .claim_job(&[], &dead, now, &[])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (claimed.id.as_str(), claimed.status),
        ("job-T-CLAIM", JobStatus::Running)
    );

    let alive = server(&b, &db.db(), &a).await;
    let rec = alive.wait_for(&claimed.id, is_final).await;
    assert_eq!(rec.status, JobStatus::Failed, "{}", alive.stderr());
    let mut next = None;
    for _ in 0..100 {
        next = store
            .jobs(50)
            .await
            .unwrap()
            .into_iter()
            .find(|j| j.ticket_id == "T-CLAIM" && j.id != claimed.id);
        if next.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let next = next.expect("no next attempt queued");
    let ran = alive.wait_for(&next.id, is_final).await;
    assert_eq!(
        (ran.status, ran.attempt),
        (JobStatus::Done, 2),
        "{}",
        alive.stderr()
    );
    let rec = store.job(&claimed.id).await.unwrap().unwrap();
    assert!(
        rec.reason
            .as_deref()
            .is_some_and(|r| r.ends_with(&format!("queued again as job {} (attempt 2)", next.id))),
        "{:?}",
        rec.reason
    );
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "ran\n");
    assert_eq!(store.running_jobs().await.unwrap(), Vec::new());
    nothing_lost(&store, &rec).await;
    nothing_lost(&store, &ran).await;
}

/// The private source's token in the worker's environment only.
const SOURCE_TOKEN_VAR: &str = "PADDOCK_FLEET_SOURCE_TOKEN";
const SOURCE_TOKEN: &str = "pdk_fleetSourceToken_0123456789";

/// A fleet as a platform team runs it: front server A takes the API's
/// submissions and holds no provider key or source token; worker B holds
/// them. A job whose source is private (`repository.url` over smart HTTP
/// with `repository.token = "env:…"`, the variable in B's environment
/// only) submitted to A is accepted (202): the answer, as the store and
/// A's API keep it until a server claims it, is `queued` with A's reason
/// for not running it (the variable not set on this host, what to fix),
/// no owner, no event; B, started then, claims it and runs it to `done`,
/// fetching the source with its token, the reason gone, nothing lost. Its
/// next attempt (`?attempt_after=`) submitted to A is accepted the same
/// way, the prior it follows stored with it, and B runs it as attempt 2.
/// On SQLite and PostgreSQL. Before, A refused both (422) for the
/// variable it did not have, though B would have run them.
#[tokio::test(flavor = "multi_thread")]
async fn a_front_server_without_the_source_token_accepts_a_job_its_worker_runs() {
    let dir = tempfile::tempdir().unwrap();
    for db in backends(dir.path()).await {
        let (a, b) = (Home::new(), Home::new());
        hosts_config(&a, HOSTS);
        hosts_config(&b, HOSTS);
        let mut job = spec(&a, "T-S", TURN);
        let repo = std::path::PathBuf::from(job["repository"]["path"].as_str().unwrap());
        let remotes = a.path().join("remotes");
        paddock_test_support::git::bare_remote(&remotes, &repo);
        let git = paddock_test_support::git_http::GitHttpServer::start(
            &remotes,
            &paddock_test_support::git_http::basic(SOURCE_TOKEN),
        )
        .await;
        let reference = format!("env:{SOURCE_TOKEN_VAR}");
        job["repository"] = serde_json::json!({
            "url": format!("{}/widgets.git", git.url),
            "token": reference,
            "base_ref": job["repository"]["base_ref"].clone(),
        });
        let allow = [
            "--allow-ref",
            &reference,
            "--allow-host",
            "127.0.0.1",
            "--accept-for-fleet",
        ];
        let srv_a = Server::start_env(&a, &allow, &[("PADDOCK_DB", &db.db())]).await;
        let accepted = srv_a.submit(&job, 0).await;
        let status = accepted.status().as_u16();
        let answered = body::<JobRecord>(accepted).await;
        let id = answered.id.clone();
        let store = db.open().await;
        let (a_host, a_name) = host_of(&a);
        let want = format!(
            "not run by host {a_name} (jobs directory {a_host}), which cannot run job {id}: \
             repository.token: repository token {reference}: environment variable is not set, \
             on this host; the server that runs the job reads the variable from its own \
             environment: start this server with it set for this server to run the job; it stays queued until a server that can run it \
             claims it (this one looks again every 60 s) and fails once passed over for 86400 s (`[serve] max_passed_over_secs`) unless such a server, all its slots taken, has said so lately; a cancel ends it"
        );
        assert_eq!(
            (
                status,
                (answered.status, answered.reason.clone()),
                srv_a.job(&id).await == answered,
                store.job_owner(&id).await.unwrap(),
                store.events(&id, 0).await.unwrap(),
            ),
            (202, (JobStatus::Queued, Some(want)), true, None, Vec::new()),
            "{}",
            srv_a.stderr()
        );
        let a_path = a.path().display().to_string();
        let mut allow_b = allow.to_vec();
        allow_b.extend(["--allow-path", &a_path]);
        let srv_b = Server::start_env(
            &b,
            &allow_b,
            &[("PADDOCK_DB", &db.db()), (SOURCE_TOKEN_VAR, SOURCE_TOKEN)],
        )
        .await;
        let ran = srv_b.wait_for(&id, is_final).await;
        let auths = git.authorizations();
        assert_eq!(
            (
                ran.status,
                ran.reason.clone(),
                store.job_owner(&id).await.unwrap().map(|o| o.host),
                !auths.is_empty()
                    && auths.iter().all(|h| {
                        h.as_deref()
                            == Some(paddock_test_support::git_http::basic(SOURCE_TOKEN).as_str())
                    }),
            ),
            (JobStatus::Done, None, Some(host_of(&b).0), true),
            "{}\n{}",
            srv_a.stderr(),
            srv_b.stderr()
        );
        nothing_lost(&store, &ran).await;
        // Its next attempt, submitted to A too: accepted for B with the
        // prior it follows stored, and run by B as attempt 2.
        let next = srv_a
            .client
            .clone()
            .post(srv_a.url("/v1/jobs"))
            .query(&[("attempt_after", id.as_str())])
            .header("content-type", "application/json")
            .body(job.to_string())
            .send()
            .await
            .unwrap();
        let next_status = next.status().as_u16();
        let next = body::<JobRecord>(next).await;
        let follows = store.job_follows(&next.id).await.unwrap();
        let ran_next = srv_b.wait_for(&next.id, is_final).await;
        assert_eq!(
            (
                next_status,
                next.status,
                next.reason.as_deref().map(|r| r.starts_with(&format!(
                    "not run by host {a_name} (jobs directory {a_host}), which cannot run job {}: \
                     repository.token: ",
                    next.id
                ))),
                follows,
                (ran_next.status, ran_next.reason.clone(), ran_next.attempt),
            ),
            (
                202,
                JobStatus::Queued,
                Some(true),
                Some(paddock::store::Follows {
                    job: id.clone(),
                    ended: None,
                    closed: None,
                }),
                (JobStatus::Done, None, 2),
            ),
            "{}\n{}",
            srv_a.stderr(),
            srv_b.stderr()
        );
        nothing_lost(&store, &ran_next).await;
        drop((srv_a, srv_b));
    }
}

/// `paddock serve --max-passed-over-secs S` bounds how long a job no
/// server can run waits: A takes no queued job (its lane is another
/// project's) and accepts a job whose scenario file is nowhere (202, its
/// reason saying A will not run it); B, allowing the least wait (1 s;
/// 0 is refused), started after it, claims it and fails it at its first
/// pass, its reason naming the wait, the setting and
/// B's own why, no owner but B, no event. Before, the job waited queued
/// for ever, looked at again every minute by every server.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_no_server_can_run_fails_after_the_most_it_may_wait_passed_over() {
    // No wait at all is refused, naming the flag (it failed a job at its
    // first pass, before any other server looked at it).
    let out = Home::new()
        .paddock(&["serve", "--max-passed-over-secs", "0"], &[])
        .await;
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        (
            out.status.code(),
            said.contains(
                "invalid value '0' for '--max-passed-over-secs <MAX_PASSED_OVER_SECS>': give at \
                 least 1: 0 would fail a job at its first pass, before any other server looked \
                 at it"
            )
        ),
        (Some(2), true),
        "{said}"
    );
    let dir = tempfile::tempdir().unwrap();
    for db in backends(dir.path()).await {
        let (a, b) = (Home::new(), Home::new());
        hosts_config(
            &a,
            &format!("{HOSTS}\n[[serve.lanes]]\nprojects = [\"none-such\"]"),
        );
        hosts_config(&b, HOSTS);
        let mut job = spec(&a, "T-W", TURN);
        let gone = a.path().join("gone.toml");
        job["upstream"]["scenario"] = Value::from(gone.display().to_string());
        // Without --accept-for-fleet the server refuses what it cannot
        // run, as `paddock run` does, and stores nothing.
        let lone = Server::start_env(&a, &[], &[("PADDOCK_DB", &db.db())]).await;
        let refused = lone.submit(&job, 0).await;
        let refused = (refused.status().as_u16(), body::<Value>(refused).await);
        let cannot = format!(
            "upstream.scenario {}: cannot be read on this host (No such file or directory (os \
             error 2)); the server that runs the job reads it there: put it at that path on \
             this host for this server to run the job",
            gone.display()
        );
        assert_eq!(
            (
                refused.0,
                refused.1["code"].clone(),
                refused.1["detail"].clone(),
                db.open().await.jobs(10).await.unwrap().len()
            ),
            (
                422,
                Value::from("bad_input"),
                Value::from(cannot.clone()),
                0
            )
        );
        drop(lone);
        let srv_a =
            Server::start_env(&a, &["--accept-for-fleet"], &[("PADDOCK_DB", &db.db())]).await;
        let accepted = srv_a.submit(&job, 0).await;
        let status = accepted.status().as_u16();
        let id = body::<JobRecord>(accepted).await.id;
        let a_path = a.path().display().to_string();
        // Its wait counts from A's acceptance.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let srv_b = Server::start_env(
            &b,
            &["--allow-path", &a_path, "--max-passed-over-secs", "1"],
            &[("PADDOCK_DB", &db.db())],
        )
        .await;
        let ended = srv_b.wait_for(&id, is_final).await;
        let store = db.open().await;
        let (b_host, b_name) = host_of(&b);
        assert_eq!(
            (
                status,
                (ended.status, ended.reason.clone()),
                store.job_owner(&id).await.unwrap().map(|o| o.host),
                store.events(&id, 0).await.unwrap(),
            ),
            (
                202,
                (
                    JobStatus::Failed,
                    Some(format!(
                        "job {id} waited passed over for 1 s, the most a job waits for a server \
                         able to run it (`[serve] max_passed_over_secs`), and no server that \
                         claimed it ran it; last, host {b_name} (jobs directory {b_host}) cannot \
                         run it: {cannot}"
                    ))
                ),
                Some(b_host.clone()),
                Vec::new(),
            ),
            "{}\n{}",
            srv_a.stderr(),
            srv_b.stderr()
        );
        drop((srv_a, srv_b));
    }
}

/// Polls job `id` through `srv` for up to `secs` seconds until `done`;
/// the record then, or the last one read.
async fn within(srv: &Server, id: &str, secs: u64, done: impl Fn(&JobRecord) -> bool) -> JobRecord {
    let mut record = srv.job(id).await;
    for _ in 0..secs * 10 {
        if done(&record) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        record = srv.job(id).await;
    }
    record
}

/// How long a job waited passed over is the fleet's, kept in the store,
/// and a server that can run a job but has no free slot says so. Worker
/// W has job J's engine (a bare name on its PATH only) and one slot,
/// taken by a gated job; front server A has neither J's engine nor J2's
/// (found nowhere) and passes both over (`queued`, its reason). A
/// restarted with `--max-passed-over-secs 2` some seconds later fails J2
/// at its first pass, its wait counted from the first server's first
/// pass (before, a restart counted afresh and J2 waited on), and leaves J
/// queued; restarted with 1 (the least), it still leaves J queued: W
/// marked it as one
/// it can run while busy (before, A failed J at its first pass though W
/// could run it). Once W's slot is free, W runs J to `done`. A passing a
/// job over tries no cancel's finish on it. On SQLite and PostgreSQL.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_only_a_busy_server_can_run_waits_for_it_and_a_restart_keeps_the_wait() {
    let dir = tempfile::tempdir().unwrap();
    for db in backends(dir.path()).await {
        let (a, w) = (Home::new(), Home::new());
        hosts_config(&a, HOSTS);
        hosts_config(&w, HOSTS);
        let mut job = spec(&a, "T-J", TURN);
        let stand_in = std::path::PathBuf::from(job["engine"]["binary"].as_str().unwrap());
        let w_bin = w.path().join("bin");
        std::fs::create_dir_all(&w_bin).unwrap();
        let name = format!("paddock-codex-busy-{}", std::process::id());
        std::fs::copy(&stand_in, w_bin.join(&name)).unwrap();
        job["engine"]["binary"] = Value::from(name.as_str());
        let mut nowhere = spec(&a, "T-N", TURN);
        let none = format!("paddock-codex-nowhere-{}", std::process::id());
        nowhere["engine"]["binary"] = Value::from(none.as_str());
        let w_path = format!("{}:{}", w_bin.display(), std::env::var("PATH").unwrap());
        let a_path = a.path().display().to_string();
        let srv_w = Server::start_env(
            &w,
            &["--max-concurrent-jobs", "1", "--allow-path", &a_path],
            &[("PADDOCK_DB", &db.db()), ("PATH", w_path.as_str())],
        )
        .await;
        // W's one slot taken until the gate opens.
        let scratch = tempfile::tempdir().unwrap();
        let (marker, gate) = (scratch.path().join("busy"), scratch.path().join("gate"));
        let busy = srv_w
            .submit_ok(&spec(&w, "T-G", &gated(&marker, &gate)), 0)
            .await;
        appears(&marker).await;
        let db_env = [("PADDOCK_DB", db.db())];
        let db_env: Vec<(&str, &str)> = db_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let srv_a = Server::start_env(&a, &[], &db_env).await;
        let (j, j2) = (
            srv_a.submit_ok(&job, 0).await,
            srv_a.submit_ok(&nowhere, 0).await,
        );
        for id in [&j, &j2] {
            let passed = within(&srv_a, id, 30, |r| r.reason.is_some()).await;
            assert_eq!(
                (passed.status, passed.reason.is_some()),
                (JobStatus::Queued, true),
                "{}",
                srv_a.stderr()
            );
        }
        drop(srv_a);
        // W marks J within a heartbeat interval (1 s); J2's first pass is
        // over 2 s old.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let srv_a = Server::start_env(&a, &["--max-passed-over-secs", "2"], &db_env).await;
        let failed = within(&srv_a, &j2, 10, |r| is_final(r.status)).await;
        let (a_host, a_name) = host_of(&a);
        assert_eq!(
            (failed.status, failed.reason.clone()),
            (
                JobStatus::Failed,
                Some(format!(
                    "job {j2} waited passed over for 2 s, the most a job waits for a server \
                     able to run it (`[serve] max_passed_over_secs`), and no server that \
                     claimed it ran it; last, host {a_name} (jobs directory {a_host}) cannot \
                     run it: engine codex: engine.binary `{none}` was not found on PATH (add its \
                     directory to PATH, or set engine.binary to the executable's path)"
                ))
            ),
            "{}",
            srv_a.stderr()
        );
        drop(srv_a);
        let srv_a = Server::start_env(&a, &["--max-passed-over-secs", "1"], &db_env).await;
        // Claimed and passed over at its start; looked at again for 3 s.
        let waited = within(&srv_a, &j, 3, |r| is_final(r.status)).await;
        assert_eq!(
            (waited.status, waited.reason.is_some()),
            (JobStatus::Queued, true),
            "{}\n{}",
            srv_a.stderr(),
            srv_w.stderr()
        );
        // Put back in the queue, the job is no longer A's: no cancel's
        // finish is tried on it (before, every pass-over went on to one,
        // which failed on the queued job, or, had another server claimed
        // it in between, overwrote its running job `cancelled`).
        assert!(
            !srv_a.stderr().contains("cannot mark it cancelled"),
            "{}",
            srv_a.stderr()
        );
        std::fs::write(&gate, "").unwrap();
        let ran = srv_w.wait_for(&j, is_final).await;
        let store = db.open().await;
        assert_eq!(
            (
                srv_w.job(&busy).await.status,
                ran.status,
                ran.reason.clone(),
                store.job_owner(&j).await.unwrap().map(|o| o.host),
            ),
            (JobStatus::Done, JobStatus::Done, None, Some(host_of(&w).0)),
            "{}\n{}",
            srv_a.stderr(),
            srv_w.stderr()
        );
        drop((srv_a, srv_w));
    }
}

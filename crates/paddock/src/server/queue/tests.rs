//! The queue driven as a library on the runner's test host (the fake
//! rung, a temp SQLite store): a reaper pass (`paddock gc`'s, another
//! server's start) that falls between two steps of a starting job leaves
//! it alone, as the job holds its lease from before its record is
//! `running` here (a turn) or from right after its claim (a queued job).

#![allow(clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use paddock_protocol::JobStatus;

use super::*;
use crate::rung::fake::{FakeEngine, FakeRung};
use crate::runner::tests::{FailingStore, Host, ReapAt, ReapStep, DONE};

/// What a queue passing jobs over waits at most by default
/// (`[serve] max_passed_over_secs`), which its reasons name.
const DEFAULT_MOST: Duration =
    Duration::from_secs(super::super::config::DEFAULT_MAX_PASSED_OVER_SECS);

/// A queue of one slot on `host`, whose store runs a full reaper pass
/// after `step` with the heartbeat TTL `ttl`; that store.
fn queue(host: &Host, step: ReapStep, ttl: Duration) -> (Arc<Queue>, Arc<FailingStore>) {
    queue_with(host, step, ttl, true, Duration::ZERO)
}

/// [`queue`], submissions of `process`-rung jobs allowed or not, reading
/// a stored spec taking `slow_spec`.
fn queue_with(
    host: &Host,
    step: ReapStep,
    ttl: Duration,
    process: bool,
    slow_spec: Duration,
) -> (Arc<Queue>, Arc<FailingStore>) {
    let mut liveness = host.liveness();
    liveness.ttl = ttl;
    let store = Arc::new(FailingStore::reaping(
        host.store.clone(),
        ReapAt {
            step,
            paths: host.paths.clone(),
            liveness,
            reports: Mutex::default(),
            slow_spec,
        },
    ));
    let shared: SharedStore = store.clone();
    let rung = Arc::new(FakeRung::new(FakeEngine {
        stdout: DONE.iter().map(|s| s.to_string()).collect(),
        ..FakeEngine::default()
    }));
    let runner = host.runner_with(shared.clone(), rung);
    let submissions = Submissions {
        paths: vec![host.root()],
        process,
        ..Submissions::default()
    };
    let queue = Queue::new(
        shared,
        runner,
        Hub::default(),
        1,
        Vec::new(),
        submissions,
        None,
    );
    (Arc::new(queue), store)
}

/// How many passes the store ran, and the jobs they reaped.
fn reaped(store: &FailingStore) -> (usize, Vec<String>) {
    let reports = store.reaps.as_ref().unwrap().reports.lock().unwrap();
    let names = reports
        .iter()
        .flat_map(|r| r.jobs.iter().map(|j| j.name.clone()))
        .collect();
    (reports.len(), names)
}

/// A pass right after a turn's record is written (`running`, owned by
/// this host, not from the queue). Before, the turn took its lease only
/// once its runner started, after the record: the pass took it for a
/// job whose process had died without a lease, failed it and removed its
/// lease, and the turn could not record its own run.
#[tokio::test]
async fn a_reaper_pass_right_after_a_turn_is_recorded_leaves_it_alone() {
    let host = Host::new().await;
    let (queue, store) = queue(&host, ReapStep::InsertOwned, host.liveness().ttl);
    let Turn::Started { id, ended } = queue.turn("job-turn-1", &host.spec(), None).await.unwrap()
    else {
        panic!("the turn was held");
    };
    ended.await.unwrap();
    let record = host.store.job(&id).await.unwrap().unwrap();
    assert_eq!(
        (reaped(&store), record.status, record.reason),
        ((1, Vec::new()), JobStatus::Done, None)
    );
    assert_eq!(host.left(), Vec::<String>::new());
}

/// A pass while a claimed queued job is admitted again from its stored
/// spec (after a restart, or another server's submission), which took
/// longer than the heartbeat TTL (here the pass's TTL is zero). Before,
/// the job took its lease only once its runner started, after the
/// re-admission: the pass took the claim, older than the TTL and with no
/// lease file, for a dead server's and failed it.
#[tokio::test]
async fn a_reaper_pass_while_a_claimed_job_is_admitted_again_leaves_it_alone() {
    let host = Host::new().await;
    let (queue, store) = queue(&host, ReapStep::ReadSpec, Duration::ZERO);
    let id = host.enqueue(&queue.runner, &host.spec()).await.id;
    let scheduler = tokio::spawn(Arc::clone(&queue).run());
    let mut record = None;
    for _ in 0..600 {
        let now = host.store.job(&id).await.unwrap().unwrap();
        if !matches!(now.status, JobStatus::Queued | JobStatus::Running) {
            record = Some(now);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    queue.drain(Duration::from_secs(10)).await;
    scheduler.await.unwrap();
    let record = record.unwrap();
    let (passes, names) = reaped(&store);
    assert_eq!(
        (passes > 0, names, record.status, record.reason),
        (true, Vec::<String>::new(), JobStatus::Done, None)
    );
    assert_eq!(host.left(), Vec::<String>::new());
}

/// A pass right after a server that may not run a claimed job gave its
/// lease up, before the job is queued again (`pass_over`), the claim
/// older than the TTL (re-admitting took 800 ms, the pass's TTL is
/// 500 ms). Before, the pass took the claim, with no lease file and
/// older than the TTL, for a dead server's and failed it (and queued a
/// next attempt); now the claim is renewed before the lease is given up,
/// and the job stays queued, passed over, the only job.
#[tokio::test]
async fn a_reaper_pass_while_a_claimed_job_is_passed_over_leaves_it_queued() {
    let host = Host::new().await;
    let (queue, store) = queue_with(
        &host,
        ReapStep::Unclaim,
        Duration::from_millis(500),
        false,
        Duration::from_millis(800),
    );
    let spec = host.spec();
    let refused = PassOver::from(queue.submissions.check(&spec, None).unwrap_err());
    let id = host.enqueue(&queue.runner, &spec).await.id;
    let scheduler = tokio::spawn(Arc::clone(&queue).run());
    let mut record = None;
    for _ in 0..600 {
        let now = host.store.job(&id).await.unwrap().unwrap();
        if now.status != JobStatus::Running && (now.reason.is_some() || now.finished_at.is_some()) {
            record = Some(now);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    queue.drain(Duration::from_secs(10)).await;
    scheduler.await.unwrap();
    let record = record.unwrap();
    let jobs = host.store.jobs(10).await.unwrap().len();
    let owner = host.liveness().owner;
    assert_eq!(
        (reaped(&store), record.status, record.reason, jobs),
        (
            (1, Vec::<String>::new()),
            JobStatus::Queued,
            Some(passed_over_reason(&id, &owner, DEFAULT_MOST, &refused)),
            1
        )
    );
    assert_eq!(host.left(), Vec::<String>::new());
}

/// A server that drains while it holds a job it passes over (claimed,
/// its stored spec read again for 800 ms, then refused: this server may
/// not run `process`-rung jobs) puts it back in the queue, passed over,
/// and another server on the store then runs it. Before, the drain's
/// cancel reached the job's slot and `give_back` recorded it as a cancel
/// "(its server's drain)": the job ended `cancelled while queued`, one
/// another server could run.
#[tokio::test]
async fn a_drain_puts_a_job_it_passes_over_back_for_another_server() {
    let host = Host::new().await;
    let ttl = host.liveness().ttl;
    let (a, _) = queue_with(
        &host,
        ReapStep::InsertOwned,
        ttl,
        false,
        Duration::from_millis(800),
    );
    let spec = host.spec();
    let refused = PassOver::from(a.submissions.check(&spec, None).unwrap_err());
    let id = host.enqueue(&a.runner, &spec).await.id;
    let scheduler = tokio::spawn(Arc::clone(&a).run());
    // Claimed by A: its stored spec is being read again.
    let mut claimed = false;
    for _ in 0..600 {
        if host.store.job(&id).await.unwrap().unwrap().status == JobStatus::Running {
            claimed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(claimed, "server A never claimed job {id}");
    a.drain(Duration::ZERO).await;
    scheduler.await.unwrap();
    let mut record = None;
    for _ in 0..600 {
        let now = host.store.job(&id).await.unwrap().unwrap();
        if now.status != JobStatus::Running {
            record = Some(now);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let record = record.unwrap();
    let owner = host.liveness().owner;
    let asked = host.store.cancel_requested(&id).await.unwrap();
    assert_eq!(
        (record.status, record.reason, asked),
        (
            JobStatus::Queued,
            Some(passed_over_reason(&id, &owner, DEFAULT_MOST, &refused)),
            None
        )
    );

    // Server B, on the same store, may run it: it does.
    let (b, _) = queue_with(&host, ReapStep::InsertOwned, ttl, true, Duration::ZERO);
    let scheduler = tokio::spawn(Arc::clone(&b).run());
    let mut record = None;
    for _ in 0..600 {
        let now = host.store.job(&id).await.unwrap().unwrap();
        if !matches!(now.status, JobStatus::Queued | JobStatus::Running) {
            record = Some(now);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    b.drain(Duration::from_secs(10)).await;
    scheduler.await.unwrap();
    let record = record.unwrap();
    assert_eq!((record.status, record.reason), (JobStatus::Done, None));
    assert_eq!(host.left(), Vec::<String>::new());
}

/// A claim that meets its job's lease held by another process for a
/// moment (a reaper pass that listed the job before the claim, with an
/// old claim and no lease file, takes its lease to look at it again and
/// gives it back at once, `reaper::reap_unleased`): held here by the test
/// for 300 ms from before the claim. The claim waits for it and the job
/// runs; before, the claim failed the job at once ("it could not take
/// its lease"), a job nobody had anything against.
#[tokio::test]
async fn a_claim_waits_for_a_lease_a_reaper_holds_for_a_moment() {
    let host = Host::new().await;
    // (No pass of the store's own: the test holds the lease as one would.)
    let (queue, store) = queue(&host, ReapStep::InsertOwned, host.liveness().ttl);
    let id = host.enqueue(&queue.runner, &host.spec()).await.id;
    let looking = Lease::take(&host.paths.jobs, &id).unwrap();
    let gives_back = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        looking.release().unwrap();
    });
    let scheduler = tokio::spawn(Arc::clone(&queue).run());
    let mut record = None;
    for _ in 0..600 {
        let now = host.store.job(&id).await.unwrap().unwrap();
        if !matches!(now.status, JobStatus::Queued | JobStatus::Running) {
            record = Some(now);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    gives_back.await.unwrap();
    queue.drain(Duration::from_secs(10)).await;
    scheduler.await.unwrap();
    let record = record.unwrap();
    assert_eq!(
        (reaped(&store), record.status, record.reason),
        ((0, Vec::new()), JobStatus::Done, None)
    );
    assert_eq!(host.left(), Vec::<String>::new());
}

/// A claimed job this server may not run whose unclaim does not hold
/// (`pass_over`): one still `running` here with a cancel asked of it
/// ends `cancelled`, as before; one no longer this server's (running on
/// another host after a reclaim's next claim, or ended) is left as it
/// is, no event appended. Before, every unclaim that did not hold was
/// taken for a cancel: the other host's running job was overwritten
/// `cancelled` (`finish_job`'s compare-and-set is on `running` only).
#[tokio::test]
async fn a_passed_over_job_that_is_no_longer_ours_is_left_as_it_is() {
    let host = Host::new().await;
    let (queue, _) = queue_with(
        &host,
        ReapStep::InsertOwned,
        host.liveness().ttl,
        false,
        Duration::ZERO,
    );
    let refused = PassOver::from(queue.submissions.check(&host.spec(), None).unwrap_err());
    let me = host.liveness().owner;
    let other = Owner {
        host: "another-jobs-directory".into(),
        name: "other".into(),
    };
    let now = OffsetDateTime::now_utc();
    let store = &host.store;
    for (id, owner) in [("job-a", &other), ("job-b", &me), ("job-c", &me)] {
        let record = crate::store::fixtures::job(id, 0);
        store
            .insert_owned_job(&record, "{}", owner, now)
            .await
            .unwrap();
    }
    let mut done = store.job("job-b").await.unwrap().unwrap();
    done.status = JobStatus::Done;
    done.finished_at = Some(now);
    store.finish_job(&done, JobStatus::Running).await.unwrap();
    store.request_cancel("job-c", "asker", now).await.unwrap();
    for id in ["job-a", "job-b", "job-c"] {
        // The record as the claim returned it: `running`, here.
        let mut claimed = crate::store::fixtures::job(id, 0);
        claimed.status = JobStatus::Running;
        queue.pass_over(claimed, &refused).await;
    }
    let mut after = Vec::new();
    for id in ["job-a", "job-b", "job-c"] {
        let record = store.job(id).await.unwrap().unwrap();
        let events: Vec<_> = store
            .events(id, 0)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.body)
            .collect();
        let owner = store.job_owner(id).await.unwrap().map(|o| o.host);
        after.push((record.status, record.reason, owner, events));
    }
    assert_eq!(
        after,
        vec![
            (
                JobStatus::Running,
                None,
                Some(other.host.clone()),
                Vec::new()
            ),
            (JobStatus::Done, None, Some(me.host.clone()), Vec::new()),
            (
                JobStatus::Cancelled,
                Some(crate::cancel::cancelled_queued("asker")),
                Some(me.host.clone()),
                vec![EventBody::Status {
                    phase: Phase::Cancelled,
                    detail: Some(crate::cancel::cancelled_queued("asker")),
                }]
            ),
        ]
    );
}

/// A claimed job whose engine's binary this host cannot find
/// (`engine.binary` naming no file here) is passed over before anything
/// of it starts, whether this server admitted it (a submission, whose
/// admission does not ask: another server may claim it) or not (found
/// queued, admitted again): both stay `queued`, no owner, their reason
/// naming this host and the cause, no event and nothing of their
/// workspace made, and a cancel ends each `cancelled`. Before, each was
/// claimed, started and failed at provisioning, though a server with the
/// engine would have run it.
#[tokio::test]
async fn a_claimed_job_whose_engine_is_not_here_is_passed_over_not_failed() {
    let host = Host::new().await;
    let (queue, _) = queue(&host, ReapStep::InsertOwned, host.liveness().ttl);
    let mut spec = host.spec();
    let gone = host.root().join("bin/gone");
    spec.engine.binary = Some(gone.clone());
    let submitted = queue.submit(&spec, 0, None).await.unwrap().id;
    let found = host.enqueue(&queue.runner, &spec).await.id;
    let scheduler = tokio::spawn(Arc::clone(&queue).run());
    let mut passed = Vec::new();
    for id in [&submitted, &found] {
        for _ in 0..600 {
            let now = host.store.job(id).await.unwrap().unwrap();
            if now.status != JobStatus::Running && now.reason.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let record = host.store.job(id).await.unwrap().unwrap();
        let owner = host.store.job_owner(id).await.unwrap();
        let events = host.store.events(id, 0).await.unwrap().len();
        passed.push((record.status, record.reason, owner, events));
    }
    let left = host.left();
    let mut cancelled = Vec::new();
    for id in [&submitted, &found] {
        let asker = crate::server::asker::Asker {
            token_id: "t".into(),
            scope: crate::api_token::Scope::Submit,
            token_name: Some("ci".into()),
            dashboard: false,
        };
        let Cancel::Dequeued(record) = queue.cancel(id, &asker).await.unwrap() else {
            panic!("job {id} was not dequeued");
        };
        cancelled.push((record.status, record.reason));
    }
    queue.drain(Duration::from_secs(10)).await;
    scheduler.await.unwrap();
    let me = host.liveness().owner;
    let asked = crate::cancel::cancelled_queued(&format!(
        "{} (API token t, scope submit, name \"ci\")",
        me.name
    ));
    let reason = |id: &str| {
        format!(
            "not run by host {} (jobs directory {}), which cannot run job {id}: engine codex: \
             engine.binary {} does not exist or is not executable (set engine.binary to the \
             engine's executable, or remove it to run `codex` from PATH); it stays queued until a server that can run it \
             claims it (this one looks again every 60 s) and fails once passed over for 86400 s (`[serve] max_passed_over_secs`) unless such a server, all its slots taken, has said so lately; a cancel ends it",
            me.name,
            me.host,
            gone.display()
        )
    };
    assert_eq!(
        (passed, left, cancelled),
        (
            vec![
                (JobStatus::Queued, Some(reason(&submitted)), None, 0),
                (JobStatus::Queued, Some(reason(&found)), None, 0),
            ],
            Vec::<String>::new(),
            vec![
                (JobStatus::Cancelled, Some(asked.clone())),
                (JobStatus::Cancelled, Some(asked)),
            ],
        )
    );
}

/// A job found queued that asks for the `sandbox` rung, claimed by a
/// server on whose host no sandbox starts (its admission again here
/// refuses the rung), is passed over for a server whose sandbox starts,
/// as a job whose engine is not here is: `queued`, no owner, no event,
/// its reason naming this host and why no sandbox starts. Before, it
/// failed ("admitted again after a restart, it failed: isolation =
/// \"sandbox\": this host cannot start Paddock's sandbox: …"), though
/// another server of the fleet would have run it.
#[tokio::test]
async fn a_claimed_sandbox_job_where_no_sandbox_starts_is_passed_over() {
    let host = Host::new().await;
    let fake = || {
        Arc::new(FakeRung::new(FakeEngine {
            stdout: DONE.iter().map(|s| s.to_string()).collect(),
            ..FakeEngine::default()
        }))
    };
    let sandbox = |probe: Option<&str>| {
        Arc::new(FakeRung {
            sandbox: true,
            probe: probe.map(str::to_owned),
            ..FakeRung::new(FakeEngine::default())
        })
    };
    let rungs = |probe: Option<&str>| crate::rung::Rungs {
        process: fake(),
        sandbox: sandbox(probe),
    };
    // Admitted where a sandbox starts (another server's submission).
    let elsewhere = host.runner_on(host.store.clone(), rungs(None), host.liveness());
    let mut spec = host.spec();
    spec.isolation = paddock_protocol::Isolation::Sandbox;
    let id = host.enqueue(&elsewhere, &spec).await.id;
    let runner = host.runner_on(
        host.store.clone(),
        rungs(Some("no user namespaces")),
        host.liveness(),
    );
    let queue = Arc::new(Queue::new(
        host.store.clone(),
        runner,
        Hub::default(),
        1,
        Vec::new(),
        Submissions {
            paths: vec![host.root()],
            ..Submissions::default()
        },
        None,
    ));
    let scheduler = tokio::spawn(Arc::clone(&queue).run());
    for _ in 0..600 {
        let now = host.store.job(&id).await.unwrap().unwrap();
        if now.status != JobStatus::Running && now.reason.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    queue.drain(Duration::from_secs(10)).await;
    scheduler.await.unwrap();
    let record = host.store.job(&id).await.unwrap().unwrap();
    let owner = host.store.job_owner(&id).await.unwrap();
    let events = host.store.events(&id, 0).await.unwrap().len();
    let me = host.liveness().owner;
    assert_eq!(
        (record.status, record.reason, owner, events, host.left()),
        (
            JobStatus::Queued,
            Some(format!(
                "not run by host {} (jobs directory {}), which cannot run job {id}: isolation = \
                 \"sandbox\": this host cannot start Paddock's sandbox: no user namespaces \
                 (`paddock doctor` shows what is missing; `isolation = \"process\"` runs \
                 unconfined); it stays queued until a server that can run it claims it (this one looks again every 60 s) and fails once passed over for 86400 s (`[serve] max_passed_over_secs`) unless such a server, all its slots taken, has said so lately; a cancel ends it",
                me.name, me.host
            )),
            None,
            0,
            Vec::<String>::new(),
        )
    );
}

/// Why a server passes a job over is kept to its last [`WHY_MAX`] bytes
/// in the job's reason (what to do), the server and the job named whole:
/// a submitted spec's path of 100,000 characters made a reason that long
/// on the record every list of jobs carries.
#[test]
fn a_passed_over_reason_keeps_the_end_of_a_long_why() {
    let owner = Owner {
        host: "3f9c".into(),
        name: "b-1".into(),
    };
    let refused = PassOver::MayNot(crate::server::submissions::SubmissionError::Path {
        field: "repository.path".into(),
        path: std::path::PathBuf::from(format!("/srv/{}", "x".repeat(100_000))),
        allowed: "/srv/ok".into(),
    });
    let end = " is a path on this server outside the directories a submitted spec may name \
               (/srv/ok); the server allows a directory with `[serve] allow_paths` or `paddock \
               serve --allow-path DIR`";
    let tail = "x".repeat(WHY_MAX - end.len());
    assert_eq!(
        passed_over_reason("job-1", &owner, DEFAULT_MOST, &refused),
        format!(
            "not run by host b-1 (jobs directory 3f9c), which may not run job job-1: \
             …{tail}{end}; it stays queued until a server that may run it claims it (this one looks again every 60 s) and fails once passed over for 86400 s (`[serve] max_passed_over_secs`) unless such a server, all its slots taken, has said so lately; a cancel ends it"
        )
    );
}

/// `spec` queued in `host`'s store as it is, not admitted (as a server
/// whose host has what it names stored it, or an earlier version): its
/// id.
async fn enqueue_as_is(host: &Host, spec: &paddock_protocol::JobSpec) -> String {
    let mut record = JobRecord::new(&crate::job_ref::new_id(), spec, OffsetDateTime::now_utc());
    record.status = JobStatus::Queued;
    host.store
        .enqueue_job(&record, &serde_json::to_string(spec).unwrap(), 0, None)
        .await
        .unwrap();
    record.id
}

/// A queue of one slot on `host`'s store, on the fake rung that runs
/// [`DONE`], allowing submitted specs the host's paths, the `process`
/// rung and `refs`; passed-over jobs claimed again after `recheck`.
fn fleet_queue(host: &Host, refs: &[&str], recheck: Duration) -> Arc<Queue> {
    Arc::new(fleet_queue_of(host, refs).rechecking_after(recheck))
}

/// [`fleet_queue`] before its recheck is set.
fn fleet_queue_of(host: &Host, refs: &[&str]) -> Queue {
    let rung = Arc::new(FakeRung::new(FakeEngine {
        stdout: DONE.iter().map(|s| s.to_string()).collect(),
        ..FakeEngine::default()
    }));
    let runner = host.runner_with(host.store.clone(), rung);
    let submissions = Submissions {
        paths: vec![host.root()],
        refs: refs.iter().map(|r| r.to_string()).collect(),
        process: true,
        ..Submissions::default()
    };
    Queue::new(
        host.store.clone(),
        runner,
        Hub::default(),
        1,
        Vec::new(),
        submissions,
        None,
    )
    .accepting_for_fleet(true)
}

/// Whether a job in `status` has ended.
fn is_final(status: JobStatus) -> bool {
    !matches!(status, JobStatus::Queued | JobStatus::Running)
}

/// Job `id`'s record once it is no longer `running` and has a reason,
/// or is final (within 30 s).
async fn settled(host: &Host, id: &str) -> JobRecord {
    for _ in 0..600 {
        let now = host.store.job(id).await.unwrap().unwrap();
        if (now.status != JobStatus::Running && now.reason.is_some()) || is_final(now.status) {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    host.store.job(id).await.unwrap().unwrap()
}

/// A claimed job whose spec names what the claiming host has not (a
/// provider key's variable not in its environment, a provider key's file,
/// the scripted upstream's scenario, a local repository, a templates
/// directory not there) is passed over for a server that has it, as one
/// whose engine is not here is: `queued`, no owner, no event, its reason
/// naming this host, the field, what it names and what to fix here. A
/// spec wrong wherever it runs (a model outside its own allowlist) still
/// fails, its reason saying which host claimed it and that its
/// admission failed. Before, the key and the scenario failed the job at
/// its admission again ("admitted again after a restart, it failed: …"),
/// and the repository at provisioning, though another server of the
/// fleet would have run it.
#[tokio::test]
async fn a_claimed_job_naming_what_this_host_has_not_is_passed_over_not_failed() {
    let host = Host::new().await;
    let unset = "env:PADDOCK_QUEUE_TEST_NEVER_SET";
    let key_file = host.root().join("gone.key");
    let key_ref = format!("file:{}", key_file.display());
    let queue = fleet_queue(&host, &[unset, &key_ref], RECHECK_PASSED_OVER);
    let root = host.root();
    let openai = |key: &str| {
        let mut spec = host.spec();
        spec.upstream.provider = paddock_protocol::ProviderKind::Openai;
        spec.upstream.scenario = None;
        spec.upstream.key = Some(paddock_protocol::KeyRef::parse(key).unwrap());
        spec
    };
    let mut scenario = host.spec();
    scenario.upstream.scenario = Some(root.join("gone.toml"));
    let mut repository = host.spec();
    repository.repository.path = Some(root.join("gone-repo"));
    let mut templates = host.spec();
    templates.context.templates_dir = Some(root.join("gone-templates"));
    let mut unlisted = host.spec();
    unlisted.engine.allowed_models = vec!["claude-*".to_owned()];
    let specs = [
        openai(unset),
        openai(&key_ref),
        scenario,
        repository,
        templates,
        unlisted,
    ];
    let mut ids = Vec::new();
    for spec in &specs {
        ids.push(enqueue_as_is(&host, spec).await);
    }
    let scheduler = tokio::spawn(Arc::clone(&queue).run());
    let mut got = Vec::new();
    for id in &ids {
        let record = settled(&host, id).await;
        let owner = host.store.job_owner(id).await.unwrap();
        let events = host.store.events(id, 0).await.unwrap().len();
        got.push((record.status, record.reason, owner, events));
    }
    queue.drain(Duration::from_secs(10)).await;
    scheduler.await.unwrap();
    let me = host.liveness().owner;
    let not_here = |id: &str, why: String| {
        (
            JobStatus::Queued,
            Some(format!(
                "not run by host {} (jobs directory {}), which cannot run job {id}: {why}; it stays queued until a server that can run it \
                 claims it (this one looks again every 60 s) and fails once passed over for 86400 s (`[serve] max_passed_over_secs`) unless such a server, all its slots taken, has said so lately; a cancel ends it",
                me.name, me.host
            )),
            None,
            0,
        )
    };
    let path = |field: &str, path: &str| {
        format!(
            "{field} {}/{path}: cannot be read on this host (No such file or directory (os \
             error 2)); the server that runs the job reads it there: put it at that path on \
             this host for this server to run the job",
            root.display()
        )
    };
    assert_eq!(
        (got, host.left()),
        (
            vec![
                not_here(
                    &ids[0],
                    format!(
                        "upstream.key: provider key {unset}: environment variable is not set, on \
                         this host; the server that runs the job reads the variable from its own \
                         environment: start this server with it set for this server to run the \
                         job"
                    )
                ),
                not_here(
                    &ids[1],
                    format!(
                        "upstream.key: provider key {key_ref}: cannot read the file: No such \
                         file or directory (os error 2), on this host; the server that runs the \
                         job reads the file there: put it at that path on this host, readable by \
                         this server's user, for this server to run the job"
                    )
                ),
                not_here(&ids[2], path("upstream.scenario", "gone.toml")),
                not_here(
                    &ids[3],
                    format!(
                        "repository.path {}/gone-repo: no such directory, on this host; the \
                         server that runs the job clones it there: put the repository at that \
                         path on this host for this server to run the job",
                        root.display()
                    )
                ),
                not_here(&ids[4], path("context.templates_dir", "gone-templates")),
                (
                    JobStatus::Failed,
                    Some(format!(
                        "claimed by host {} (jobs directory {}), job {} could not be admitted \
                         again from its stored spec: engine.model `gpt-5.5` is not allowed by the \
                         job model allowlist (engine.allowed_models)",
                        me.name, me.host, ids[5]
                    )),
                    Some(me.clone()),
                    0,
                ),
            ],
            Vec::<String>::new(),
        )
    );
}

/// A job passed over for what this host lacked is claimed again once its
/// recheck is past and runs here when what it names has come meanwhile
/// (the scenario file put in place), with no restart. Before, a server
/// passed it over until it restarted.
#[tokio::test]
async fn a_passed_over_job_is_claimed_again_and_runs_once_this_host_has_what_it_names() {
    let host = Host::new().await;
    let queue = fleet_queue(&host, &[], Duration::from_millis(300));
    let mut spec = host.spec();
    let later = host.root().join("later.toml");
    spec.upstream.scenario = Some(later.clone());
    let id = enqueue_as_is(&host, &spec).await;
    let scheduler = tokio::spawn(Arc::clone(&queue).run());
    let passed = settled(&host, &id).await;
    std::fs::copy(host.root().join("scenario.toml"), &later).unwrap();
    let mut ran = host.store.job(&id).await.unwrap().unwrap();
    for _ in 0..600 {
        if is_final(ran.status) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        ran = host.store.job(&id).await.unwrap().unwrap();
    }
    queue.drain(Duration::from_secs(10)).await;
    scheduler.await.unwrap();
    let me = host.liveness().owner;
    assert_eq!(
        (passed.status, passed.reason, ran.status, ran.reason),
        (
            JobStatus::Queued,
            Some(format!(
                "not run by host {} (jobs directory {}), which cannot run job {id}: \
                 upstream.scenario {}: cannot be read on this host (No such file or directory \
                 (os error 2)); the server that runs the job reads it there: put it at that \
                 path on this host for this server to run the job; it stays queued until a server that can run it \
                 claims it (this one looks again every 60 s) and fails once passed over for 86400 s (`[serve] max_passed_over_secs`) unless such a server, all its slots taken, has said so lately; a cancel ends it",
                me.name,
                me.host,
                later.display()
            )),
            JobStatus::Done,
            None,
        )
    );
}

/// Why a claimed job's admission failed is kept to its last [`WHY_MAX`]
/// bytes in its reason, the server and the job named whole, as a passed
/// over job's is: before, the whole chain was kept ("admitted again after
/// a restart, it failed: …"), as long as a stored spec's path.
#[test]
fn a_failed_readmission_reason_names_the_server_and_keeps_the_end_of_a_long_why() {
    let owner = Owner {
        host: "3f9c".into(),
        name: "b-1".into(),
    };
    let end = ": upstream.key: provider openai needs a key";
    let why = format!("{}{end}", "x".repeat(100_000));
    let tail = "x".repeat(WHY_MAX - end.len());
    assert_eq!(
        readmit_failed_reason("job-1", &owner, &why),
        format!(
            "claimed by host b-1 (jobs directory 3f9c), job job-1 could not be admitted again \
             from its stored spec: …{tail}{end}"
        )
    );
}

/// A job left `auto` under a host profile whose rule the `process` rung
/// cannot enforce, claimed by a server on whose host no sandbox starts
/// (`auto` falls back to `process` there, and the profile refuses it), is
/// passed over for a server whose sandbox starts and enforces the rule:
/// `queued`, no owner, no event, its reason naming this host, the rule
/// and what to fix here. The same job asking for the `process` rung
/// itself is refused wherever it runs and fails. Before, both failed.
#[tokio::test]
async fn a_claimed_auto_job_a_profile_refuses_on_the_fallback_rung_is_passed_over() {
    let host = Host::new().await;
    let gap = "(50%) cannot be enforced on the fake rung";
    let rungs = crate::rung::Rungs {
        process: Arc::new(FakeRung {
            gaps: vec![("cpu_limit", gap.to_owned())],
            ..FakeRung::new(FakeEngine::default())
        }),
        sandbox: Arc::new(FakeRung {
            sandbox: true,
            probe: Some("no user namespaces".to_owned()),
            ..FakeRung::new(FakeEngine::default())
        }),
    };
    let runner = host.runner_on(host.store.clone(), rungs, host.liveness());
    let queue = Arc::new(Queue::new(
        host.store.clone(),
        runner,
        Hub::default(),
        1,
        Vec::new(),
        Submissions {
            paths: vec![host.root()],
            profiles: vec!["constrained-local".to_owned()],
            process: true,
            ..Submissions::default()
        },
        None,
    ));
    let mut auto = host.spec();
    auto.isolation = paddock_protocol::Isolation::Auto;
    auto.policy.profile = Some("constrained-local".to_owned());
    let mut process = auto.clone();
    process.isolation = paddock_protocol::Isolation::Process;
    let ids = [
        enqueue_as_is(&host, &auto).await,
        enqueue_as_is(&host, &process).await,
    ];
    let scheduler = tokio::spawn(Arc::clone(&queue).run());
    let mut got = Vec::new();
    for id in &ids {
        let record = settled(&host, id).await;
        let owner = host.store.job_owner(id).await.unwrap();
        let events = host.store.events(id, 0).await.unwrap().len();
        got.push((record.status, record.reason, owner, events));
    }
    queue.drain(Duration::from_secs(10)).await;
    scheduler.await.unwrap();
    let me = host.liveness().owner;
    let rule = format!(
        "job refused before start: host profile `constrained-local`: rule `cpu_limit` {gap}; \
         run the job on a rung that enforces it, or list `cpu_limit` in \
         `policy.accept_degraded`"
    );
    assert_eq!(
        (got, host.left()),
        (
            vec![
                (
                    JobStatus::Queued,
                    Some(format!(
                        "not run by host {} (jobs directory {}), which cannot run job {}: \
                         {rule} (isolation auto: running on the `process` rung (unconfined) \
                         because this host cannot start Paddock's sandbox: no user namespaces); \
                         a server whose sandbox starts runs the job there, where the rule is \
                         enforced: make Paddock's sandbox start on this host (`paddock doctor` \
                         shows what is missing) for this server to run the job; it stays queued until a server that can run it \
                         claims it (this one looks again every 60 s) and fails once passed over for 86400 s (`[serve] max_passed_over_secs`) unless such a server, all its slots taken, has said so lately; a cancel ends it",
                        me.name, me.host, ids[0]
                    )),
                    None,
                    0,
                ),
                (
                    JobStatus::Failed,
                    Some(format!(
                        "claimed by host {} (jobs directory {}), job {} could not be admitted \
                         again from its stored spec: {rule}",
                        me.name, me.host, ids[1]
                    )),
                    Some(me.clone()),
                    0,
                ),
            ],
            Vec::<String>::new(),
        )
    );
}

/// A submitted spec naming what this host has not (a provider key's
/// variable not in its environment, a scenario file not here) is
/// accepted and stored `queued` for a server of the fleet that has it,
/// the record as answered and as stored carrying why this server will
/// not run it, no owner, no event; a spec wrong wherever it runs (a
/// provider needing a key named with none, a model the price table
/// cannot meter, a model outside its own allowlist) is refused at once,
/// even where what it names is not here either. Before, every one was
/// refused (422) for what this host lacked, so a front server without
/// the workers' keys or files could not accept their jobs.
#[tokio::test]
async fn a_submission_this_host_cannot_run_is_queued_for_another_and_a_wrong_one_refused() {
    let host = Host::new().await;
    let unset = "env:PADDOCK_QUEUE_TEST_NEVER_SET";
    let queue = fleet_queue(&host, &[unset], RECHECK_PASSED_OVER);
    let root = host.root();
    let openai = |key: Option<&str>| {
        let mut spec = host.spec();
        spec.upstream.provider = paddock_protocol::ProviderKind::Openai;
        spec.upstream.scenario = None;
        spec.upstream.key = key.map(|k| paddock_protocol::KeyRef::parse(k).unwrap());
        spec
    };
    let mut scenario = host.spec();
    scenario.upstream.scenario = Some(root.join("gone.toml"));
    let mut typo = openai(Some(unset));
    typo.engine.model = "gpt-5.5-typo".to_owned();
    typo.upstream.allow_unpriced = false;
    let mut unlisted = host.spec();
    unlisted.upstream.scenario = Some(root.join("gone.toml"));
    unlisted.engine.allowed_models = vec!["claude-*".to_owned()];
    let specs = [openai(Some(unset)), scenario, openai(None), typo, unlisted];
    let mut got = Vec::new();
    for spec in &specs {
        got.push(match queue.submit(spec, 0, None).await {
            Ok(record) => {
                let stored = host.store.job(&record.id).await.unwrap().unwrap();
                let owner = host.store.job_owner(&record.id).await.unwrap();
                let events = host.store.events(&record.id, 0).await.unwrap().len();
                Ok((
                    record.id.clone(),
                    record == stored,
                    stored.status,
                    stored.reason,
                    owner,
                    events,
                ))
            }
            Err(e) => Err(e.to_string()),
        });
    }
    let me = host.liveness().owner;
    let id = |n: usize| got[n].as_ref().map(|r| r.0.clone()).unwrap_or_default();
    let not_here = |n: usize, why: String| {
        Ok((
            id(n),
            true,
            JobStatus::Queued,
            Some(format!(
                "not run by host {} (jobs directory {}), which cannot run job {}: {why}; it stays queued until a server that can run it \
                 claims it (this one looks again every 60 s) and fails once passed over for 86400 s (`[serve] max_passed_over_secs`) unless such a server, all its slots taken, has said so lately; a cancel ends it",
                me.name,
                me.host,
                id(n)
            )),
            None,
            0,
        ))
    };
    let table = queue.runner.config().prices.version.to_string();
    assert_eq!(
        got,
        vec![
            not_here(
                0,
                format!(
                    "upstream.key: provider key {unset}: environment variable is not set, on \
                     this host; the server that runs the job reads the variable from its own \
                     environment: start this server with it set for this server to run the job"
                )
            ),
            not_here(
                1,
                format!(
                    "upstream.scenario {}/gone.toml: cannot be read on this host (No such file \
                     or directory (os error 2)); the server that runs the job reads it there: \
                     put it at that path on this host for this server to run the job",
                    root.display()
                )
            ),
            Err("upstream.key: provider openai needs a key".to_owned()),
            Err(format!(
                "engine.model `gpt-5.5-typo` has no price in price table {table}; Paddock \
                 refuses models it cannot meter (set upstream.allow_unpriced = true to run it \
                 unpriced)"
            )),
            Err(
                "engine.model `gpt-5.5` is not allowed by the job model allowlist \
                 (engine.allowed_models)"
                    .to_owned()
            ),
        ]
    );

    // A server that accepts nothing for the fleet (the default) refuses
    // what it cannot run, naming what is missing here, and stores nothing.
    let lone = fleet_queue_of(&host, &[unset]).accepting_for_fleet(false);
    let stored = host.store.jobs(100).await.unwrap().len();
    let mut refused = Vec::new();
    for spec in &specs[..2] {
        refused.push(match lone.submit(spec, 0, None).await {
            Ok(record) => Ok(record.id),
            Err(e @ SubmitError::NotHere(_)) => Err(e.to_string()),
            Err(e) => Ok(format!("another error: {e}")),
        });
    }
    let reason = |n: usize| {
        let full = got[n].as_ref().unwrap().3.clone().unwrap();
        let (_, why) = full.split_once(": ").unwrap();
        why.trim_end_matches("; it stays queued until a server that can run it claims it (this one looks again every 60 s) and fails once passed over for 86400 s (`[serve] max_passed_over_secs`) unless such a server, all its slots taken, has said so lately; a cancel ends it")
            .to_owned()
    };
    assert_eq!(
        (refused, host.store.jobs(100).await.unwrap().len()),
        (vec![Err(reason(0)), Err(reason(1))], stored)
    );
}

/// A job every server that claims it passes over waits queued for
/// `[serve] max_passed_over_secs`, then the server passing it over fails
/// it, naming the wait and its own last reason (the queue's clock moved
/// on by a test's, an hour past the limit): one claimed from the queue
/// and one this server accepted at submission for a server that never
/// came. A model the price table cannot meter, stored by an earlier
/// version, fails when claimed, its admission refused wherever it runs.
/// Before, a job no server could run was passed over and looked at again
/// every minute for ever, and an unpriced model was passed over as if
/// another server's price table could have it.
#[tokio::test]
async fn a_job_passed_over_past_the_limit_fails_with_why_and_an_unpriced_one_at_once() {
    let host = Host::new().await;
    let skew = Arc::new(Mutex::new(Duration::ZERO));
    let clock = {
        let skew = Arc::clone(&skew);
        Clock::ahead_by(move || *skew.lock().unwrap())
    };
    let limit = Duration::from_secs(3600);
    let queue = Arc::new(
        fleet_queue_of(&host, &[])
            .rechecking_after(Duration::from_millis(200))
            .passing_over_at_most(limit)
            .timed_by(clock),
    );
    let gone = host.root().join("gone.toml");
    let mut spec = host.spec();
    spec.upstream.scenario = Some(gone.clone());
    let claimed = enqueue_as_is(&host, &spec).await;
    let accepted = queue.submit(&spec, 0, None).await.unwrap().id;
    let mut unpriced = host.spec();
    unpriced.engine.model = "gpt-5.5-typo".to_owned();
    unpriced.upstream.allow_unpriced = false;
    let typo = enqueue_as_is(&host, &unpriced).await;
    let scheduler = tokio::spawn(Arc::clone(&queue).run());
    let passed = settled(&host, &claimed).await;
    // Passed over again and again within the limit: still queued.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let still = host.store.job(&claimed).await.unwrap().unwrap().status;
    *skew.lock().unwrap() = limit + Duration::from_secs(3600);
    let mut got = Vec::new();
    for id in [&claimed, &accepted, &typo] {
        let mut record = host.store.job(id).await.unwrap().unwrap();
        for _ in 0..600 {
            if is_final(record.status) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            record = host.store.job(id).await.unwrap().unwrap();
        }
        let owner = host.store.job_owner(id).await.unwrap();
        let events = host.store.events(id, 0).await.unwrap().len();
        got.push((record.status, record.reason, owner, events));
    }
    queue.drain(Duration::from_secs(10)).await;
    scheduler.await.unwrap();
    let me = host.liveness().owner;
    let why = format!(
        "upstream.scenario {}: cannot be read on this host (No such file or directory (os error \
         2)); the server that runs the job reads it there: put it at that path on this host \
         for this server to run the job",
        gone.display()
    );
    let too_long = |id: &str| {
        (
            JobStatus::Failed,
            Some(format!(
                "job {id} waited passed over for 3600 s, the most a job waits for a server able \
                 to run it (`[serve] max_passed_over_secs`), and no server that claimed it ran \
                 it; last, host {} (jobs directory {}) cannot run it: {why}",
                me.name, me.host
            )),
            Some(me.clone()),
            0,
        )
    };
    let table = queue.runner.config().prices.version.to_string();
    assert_eq!(
        (
            (passed.status, passed.reason.is_some(), still),
            got,
            host.left()
        ),
        (
            (JobStatus::Queued, true, JobStatus::Queued),
            vec![
                too_long(&claimed),
                too_long(&accepted),
                (
                    JobStatus::Failed,
                    Some(format!(
                        "claimed by host {} (jobs directory {}), job {typo} could not be \
                         admitted again from its stored spec: engine.model `gpt-5.5-typo` has no \
                         price in price table {table}; Paddock refuses models it cannot meter \
                         (set upstream.allow_unpriced = true to run it unpriced)",
                        me.name, me.host
                    )),
                    Some(me.clone()),
                    0,
                ),
            ],
            Vec::<String>::new(),
        )
    );
}

/// A busy server (every slot taken) checks a passed-over job it can run
/// once and then marks it every heartbeat interval without checking it
/// again until its recheck (one re-admission per job per recheck, counted,
/// not timed), and one it cannot run once (then left to its recheck's
/// claim); the job it can run is marked as this server's. Before, each
/// pass re-admitted every job it could run: five passes, five checks of
/// it.
#[tokio::test]
async fn a_busy_server_checks_a_passed_over_job_once_per_recheck_not_every_interval() {
    let host = Host::new().await;
    let skew = Arc::new(Mutex::new(Duration::ZERO));
    let clock = {
        let skew = Arc::clone(&skew);
        Clock::ahead_by(move || *skew.lock().unwrap())
    };
    let recheck = Duration::from_secs(60);
    let queue = fleet_queue_of(&host, &[])
        .rechecking_after(recheck)
        .timed_by(clock);
    // Every slot taken.
    assert!(queue.slots.begin_claim());
    let (busy, _stop) = oneshot::channel();
    queue.slots.end_claim(Some(("job-busy".into(), busy)));
    // Passed over by another server: one job this host can run, one whose
    // scenario it has not.
    let can = enqueue_as_is(&host, &host.spec()).await;
    let mut elsewhere = host.spec();
    elsewhere.upstream.scenario = Some(host.root().join("not-here.toml"));
    let cannot = enqueue_as_is(&host, &elsewhere).await;
    let then = OffsetDateTime::now_utc();
    for id in [&can, &cannot] {
        host.store.pass_over(id, then).await.unwrap();
    }
    let mut checks = Vec::new();
    for _ in 0..5 {
        queue.mark_able().await;
        checks.push(queue.able_checks());
    }
    // Past its recheck: the job it can run is checked again.
    *skew.lock().unwrap() = recheck + Duration::from_secs(1);
    queue.mark_able().await;
    checks.push(queue.able_checks());
    let able = |id: String| {
        let store = host.store.clone();
        async move {
            store
                .pass_over(&id, then)
                .await
                .unwrap()
                .unwrap()
                .able
                .map(|(owner, _)| owner)
        }
    };
    assert_eq!(
        (checks, able(can).await, able(cannot).await),
        (vec![2, 2, 2, 2, 2, 3], Some(host.liveness().owner), None)
    );
}

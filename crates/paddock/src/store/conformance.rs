//! The conformance suite of the [`Store`] trait: what every backend must
//! do, as checks over a `&dyn Store` that starts empty. A backend runs all
//! of them with `conformance_suite!(expression making a fresh store)`, one
//! test each; SQLite runs them in memory and on a file
//! (`sqlite/mod.rs`), PostgreSQL against a fresh database of a throwaway cluster.
//! What only one backend has to get right (SQLite's file handling, its text
//! encoding of timestamps) stays in that backend's own tests.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use paddock_protocol::event::TokenUsage;
use paddock_protocol::event::{AgentEvent, EventBody, Phase};
use paddock_protocol::job::JobStatus;
use paddock_protocol::ledger::{CallStatus, ModelCall};
use paddock_protocol::{
    BuildPolicy, EgressMethod, EgressPhase, EgressRecord, HostProfile, Verification,
};
use time::macros::datetime;
use time::OffsetDateTime;

use super::fixtures::{event, job, model_call};
use super::{
    CancelRequest, ClaimStanding, JobQuery, NextAttempt, Owner, Reclaim, RunningJob, SpendScope,
    Store, StoreError,
};
use crate::api_token::{Scope, StoredToken};
use crate::store::{WebhookAttempt, WebhookLease};

/// One `#[tokio::test]` per check, each on a fresh store from `$make`
/// (an async expression giving a `SharedStore`, or an
/// `Option<SharedStore>` that is `None` where the backend's server is
/// missing: the check then skips, the reason printed by whoever made it).
macro_rules! conformance_suite {
    ($make:expr) => {
        $crate::store::conformance::conformance_suite!(@tests $make;
            events_after_seq,
            a_page_of_events_stops_at_its_byte_budget,
            non_dense_seq_is_rejected,
            events_of_an_unknown_job_are_refused,
            missing_jobs,
            duplicate_insert_is_refused,
            jobs_are_listed_newest_first,
            finishing_is_a_compare_and_set_on_the_status,
            exactly_one_of_concurrent_finishers_wins,
            running_jobs_and_id_prefixes,
            model_calls_round_trip_in_seq_order,
            bad_model_calls_are_refused,
            in_flight_rows_are_settled_once_or_interrupted,
            sums_per_ticket_across_attempts_and_per_project_day,
            profiles_are_saved_replaced_listed_and_removed,
            usage_rows_per_job_and_per_model_and_day,
            egress_attempts_round_trip_in_order_per_job,
            closeouts_are_kept_replaced_and_refused_for_unknown_jobs,
            engine_sessions_are_kept_replaced_and_refused_for_unknown_jobs,
            a_queued_job_keeps_the_prior_job_it_follows,
            the_queue_claims_by_priority_then_age_one_attempt_per_ticket,
            concurrent_claims_never_share_a_job,
            the_queue_claims_only_what_its_lanes_take,
            a_deep_queue_claims_its_oldest_runnable_job_first,
            jobs_are_listed_by_filter_in_pages,
            api_tokens_are_saved_listed_and_revoked_once,
            webhook_attempts_round_trip_in_order_per_job,
            owed_webhooks_are_leased_once_until_the_lease_runs_out,
            of_concurrent_servers_one_leases_each_owed_webhook,
            sums_saturate_instead_of_overflowing,
            owned_jobs_renew_their_heartbeat_only_while_theirs,
            a_claim_records_its_owner_and_heartbeat,
            a_claimer_puts_back_what_it_may_not_run_and_passes_it_over,
            a_claim_passes_over_more_jobs_than_a_statement_has_parameters,
            which_of_more_jobs_than_a_statement_has_parameters_are_still_queued,
            a_passed_over_job_keeps_its_first_pass_and_the_last_able_mark,
            a_cancel_asked_is_announced_to_the_subscribers,
            reclaiming_is_a_compare_and_set_on_owner_and_heartbeat,
            retried_reclaims_and_unclaims_know_their_own_commit,
            of_concurrent_reclaimers_exactly_one_wins,
            a_reclaim_holds_only_on_the_cancel_request_it_saw,
            a_reclaim_is_all_or_nothing_with_its_next_attempt,
            of_concurrent_reclaimers_one_queues_the_next_attempt,
            a_cancel_is_requested_only_of_a_running_job_with_an_owner,
            the_newest_jobs_owners_are_listed,
            a_claim_standing_is_status_owner_and_cancel_request,
        );
    };
    (@tests $make:expr; $($check:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $check() {
                let Some(store) = $crate::store::conformance::Fresh::fresh($make.await) else {
                    return;
                };
                $crate::store::conformance::$check(&*store).await;
            }
        )*
    };
}
pub(crate) use conformance_suite;

/// What a suite's `$make` may give: a store, or none (skipped).
pub(crate) trait Fresh {
    fn fresh(self) -> Option<super::SharedStore>;
}

impl Fresh for super::SharedStore {
    fn fresh(self) -> Option<super::SharedStore> {
        Some(self)
    }
}

impl Fresh for Option<super::SharedStore> {
    fn fresh(self) -> Option<super::SharedStore> {
        self
    }
}

async fn ticket_spent(store: &dyn Store, project: &str, ticket_id: &str, except: &str) -> i64 {
    let scope = SpendScope::Ticket {
        project: project.into(),
        ticket_id: ticket_id.into(),
    };
    store.spent_micros(&scope, except).await.unwrap()
}

async fn day_spent(store: &dyn Store, project: &str, at: OffsetDateTime, except: &str) -> i64 {
    let scope = SpendScope::ProjectDay {
        project: project.into(),
        at,
    };
    store.spent_micros(&scope, except).await.unwrap()
}

pub(crate) async fn events_after_seq(store: &dyn Store) {
    store.insert_job(&job("j1", 0), "{}").await.unwrap();
    let other = job("j2", 1);
    store.insert_job(&other, "{}").await.unwrap();
    let written: Vec<AgentEvent> = (1..=5)
        .map(|seq| {
            event(
                "j1",
                seq,
                EventBody::Text {
                    text: format!("line {seq}"),
                },
            )
        })
        .collect();
    for ev in &written {
        store.append_event(ev).await.unwrap();
    }
    let j2 = event(
        "j2",
        1,
        EventBody::Text {
            text: "other".to_owned(),
        },
    );
    store.append_event(&j2).await.unwrap();

    assert_eq!(store.events("j1", 0).await.unwrap(), written);
    assert_eq!(store.events("j1", 3).await.unwrap(), written[3..].to_vec());
    assert!(store.events("j1", 5).await.unwrap().is_empty());
    assert!(store.events("j1", u64::MAX).await.unwrap().is_empty());
    assert_eq!(store.events("j2", 0).await.unwrap(), vec![j2.clone()]);
    assert!(store.events("unknown", 0).await.unwrap().is_empty());
    let pages = [
        store.events_page("j1", 0, 2).await.unwrap(),
        store.events_page("j1", 2, 2).await.unwrap(),
        store.events_page("j1", 4, 2).await.unwrap(),
        store.events_page("j1", 5, 2).await.unwrap(),
        store.events_page("j1", u64::MAX, 2).await.unwrap(),
        store.events_page("j2", 0, 1000).await.unwrap(),
    ];
    assert_eq!(
        pages,
        [
            written[..2].to_vec(),
            written[2..4].to_vec(),
            written[4..].to_vec(),
            vec![],
            vec![],
            vec![j2],
        ]
    );
    // The last seq, one row whatever the history: 0 for a job without
    // events, or no job.
    store.insert_job(&job("j3", 2), "{}").await.unwrap();
    let lasts = [
        store.last_event_seq("j1").await.unwrap(),
        store.last_event_seq("j2").await.unwrap(),
        store.last_event_seq("j3").await.unwrap(),
        store.last_event_seq("unknown").await.unwrap(),
    ];
    assert_eq!(lasts, [5, 1, 0, 0]);
}

/// A page of events holds no more than `PAGE_BYTES` of their bodies past
/// its first (a larger one comes alone), whatever its row limit: a job's
/// events may be up to 16 MiB each, and 256 of them were read at once.
/// Read to the end with `Pages`, every event comes once, whole, in order.
pub(crate) async fn a_page_of_events_stops_at_its_byte_budget(store: &dyn Store) {
    use crate::store::event_pages::{Pages, PAGE, PAGE_BYTES};
    store.insert_job(&job("j1", 0), "{}").await.unwrap();
    let text = |seq: u64, len: u64| {
        event(
            "j1",
            seq,
            EventBody::Text {
                text: "x".repeat(usize::try_from(len).unwrap()),
            },
        )
    };
    // Five of 3/8 of the budget (two fit in a page, not three), one past
    // the budget alone, two small ones.
    let mut written: Vec<AgentEvent> = (1..=5).map(|seq| text(seq, PAGE_BYTES * 3 / 8)).collect();
    written.push(text(6, PAGE_BYTES + (1 << 20)));
    written.extend((7..=8).map(|seq| text(seq, 10)));
    for ev in &written {
        store.append_event(ev).await.unwrap();
    }
    let mut pages = Pages::new(store, "j1", 0);
    let mut read = Vec::new();
    while let Some(page) = pages.next().await.unwrap() {
        read.push(page);
    }
    let seqs: Vec<Vec<u64>> = read
        .iter()
        .map(|page| page.iter().map(|e| e.seq).collect())
        .collect();
    assert_eq!(
        (seqs, read.concat() == written),
        (
            vec![vec![1, 2], vec![3, 4], vec![5], vec![6], vec![7, 8]],
            true
        )
    );
    // The row limit still binds, and a page after the big one starts
    // right after it.
    let firsts = [
        store.events_page("j1", 0, 1).await.unwrap(),
        store.events_page("j1", 5, PAGE).await.unwrap(),
        store.events_page("j1", 6, PAGE).await.unwrap(),
    ];
    assert_eq!(
        firsts,
        [
            written[..1].to_vec(),
            written[5..6].to_vec(),
            written[6..].to_vec()
        ]
    );
    assert_eq!(store.events("j1", 0).await.unwrap(), written);
}

pub(crate) async fn non_dense_seq_is_rejected(store: &dyn Store) {
    store.insert_job(&job("j1", 0), "{}").await.unwrap();
    let text = |seq| {
        event(
            "j1",
            seq,
            EventBody::Text {
                text: format!("{seq}"),
            },
        )
    };

    // The first event must be 1.
    let err = store.append_event(&text(2)).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::EventSeq { job_id, seq: 2, last: 0 } if job_id == "j1"),
        "{err:?}"
    );
    store.append_event(&text(1)).await.unwrap();
    store.append_event(&text(2)).await.unwrap();

    // The very events stored again (a retry whose first commit landed)
    // count as stored, once; another event at a taken seq is refused,
    // naming both.
    store.append_event(&text(2)).await.unwrap();
    store.append_event(&text(1)).await.unwrap();
    let mut other = text(2);
    other.body = EventBody::Thought { text: "2".into() };
    let err = store.append_event(&other).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::EventConflict { job_id, seq: 2, last: 2, .. } if job_id == "j1"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "event seq 2 of job j1 is already stored as a different event (stored: text at {}; \
             given: thought at {}); the last stored seq is 2",
            crate::store::sqlite::codec::RowRef::new("events", String::new())
                .time("at", text(2).at)
                .unwrap(),
            crate::store::sqlite::codec::RowRef::new("events", String::new())
                .time("at", other.at)
                .unwrap(),
        )
    );

    // A gap and a step back are refused.
    for bad in [4, 0] {
        let err = store.append_event(&text(bad)).await.unwrap_err();
        assert!(
            matches!(&err, StoreError::EventSeq { job_id, seq, last: 2 } if job_id == "j1" && *seq == bad),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "event seq {bad} of job j1 is not dense: the last stored seq is 2, so the next must be 3"
            )
        );
    }
    store.append_event(&text(3)).await.unwrap();
    assert_eq!(
        store.events("j1", 0).await.unwrap(),
        vec![text(1), text(2), text(3)]
    );
}

pub(crate) async fn events_of_an_unknown_job_are_refused(store: &dyn Store) {
    for seq in [1, 2] {
        let err = store
            .append_event(&event(
                "ghost",
                seq,
                EventBody::Text {
                    text: "boo".to_owned(),
                },
            ))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, StoreError::NoSuchJob { job_id } if job_id == "ghost"),
            "{err:?}"
        );
    }
}

pub(crate) async fn missing_jobs(store: &dyn Store) {
    assert_eq!(store.job("nope").await.unwrap(), None);
    assert_eq!(store.job_spec("nope").await.unwrap(), None);
    let err = store
        .finish_job(&job("nope", 0), JobStatus::Running)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::NoSuchJob { job_id } if job_id == "nope"),
        "{err:?}"
    );
}

pub(crate) async fn duplicate_insert_is_refused(store: &dyn Store) {
    store.insert_job(&job("j1", 0), "{}").await.unwrap();
    let err = store.insert_job(&job("j1", 5), "{}").await.unwrap_err();
    assert!(
        matches!(&err, StoreError::JobExists { job_id } if job_id == "j1"),
        "{err:?}"
    );
    assert_eq!(store.job("j1").await.unwrap(), Some(job("j1", 0)));
}

pub(crate) async fn jobs_are_listed_newest_first(store: &dyn Store) {
    // Inserted out of order; offsets straddle whole seconds so the
    // fractional digits matter, and "b"/"c" share an instant.
    let a = job("a", 0);
    let b = job("b", 877);
    let c = job("c", 877);
    let mut d = job("d", 1_000);
    // Same kind of instant written in another offset still sorts by time.
    d.created_at = d
        .created_at
        .to_offset(time::UtcOffset::from_hms(-7, 0, 0).unwrap());
    for j in [&c, &a, &d, &b] {
        store.insert_job(j, "{}").await.unwrap();
    }
    assert_eq!(
        store.jobs(10).await.unwrap(),
        vec![d.clone(), c.clone(), b.clone(), a.clone()]
    );
    assert_eq!(store.jobs(2).await.unwrap(), vec![d, c]);
    assert!(store.jobs(0).await.unwrap().is_empty());
}

pub(crate) async fn sums_per_ticket_across_attempts_and_per_project_day(store: &dyn Store) {
    let mut a1 = job("job-a1", 0);
    a1.project = "p".into();
    a1.ticket_id = "T-1".into();
    let mut a2 = a1.clone();
    a2.id = "job-a2".into();
    a2.attempt = 2;
    let mut other = a1.clone();
    other.id = "job-b".into();
    other.ticket_id = "T-2".into();
    let mut elsewhere = a1.clone();
    elsewhere.id = "job-c".into();
    elsewhere.project = "q".into();
    for j in [&a1, &a2, &other, &elsewhere] {
        store.insert_job(j, "{}").await.unwrap();
    }
    let call = |job: &str, seq: u64, cost: i64, at: OffsetDateTime| ModelCall {
        job_id: job.into(),
        seq,
        cost_micros: cost,
        started_at: at,
        ..model_call(job, seq)
    };
    let day = datetime!(2026-11-30 12:00 UTC);
    let yesterday = datetime!(2026-11-29 23:59:59.999999999 UTC);
    for c in [
        call("job-a1", 1, 100, yesterday),
        call("job-a1", 2, 20, day),
        call("job-a2", 1, 3, day),
        call("job-b", 1, 4000, datetime!(2026-11-30 00:00 UTC)),
        call("job-c", 1, 50_000, day),
    ] {
        store.insert_model_call(&c).await.unwrap();
    }
    // Every job, then every job but the one asking.
    assert_eq!(
        (
            ticket_spent(store, "p", "T-1", "").await,
            ticket_spent(store, "p", "T-1", "job-a2").await,
            ticket_spent(store, "p", "T-9", "").await,
        ),
        (123, 120, 0)
    );
    assert_eq!(
        (
            day_spent(store, "p", day, "").await,
            day_spent(store, "p", day, "job-b").await,
        ),
        (4023, 23)
    );
    assert_eq!(
        day_spent(store, "p", datetime!(2026-11-30 01:00 +02:00), "").await,
        100
    );
}

pub(crate) async fn model_calls_round_trip_in_seq_order(store: &dyn Store) {
    store.insert_job(&job("j1", 0), "{}").await.unwrap();
    store.insert_job(&job("j2", 0), "{}").await.unwrap();

    let full = model_call("j1", 1);
    // Every optional field empty, tokens estimated, a failed call.
    let sparse = ModelCall {
        served_model: None,
        ttft_ms: None,
        http_status: None,
        error: Some("stream ended before usage".to_owned()),
        estimated: true,
        status: CallStatus::StreamError,
        cost_micros: 0,
        ..model_call("j1", 2)
    };
    let refused = ModelCall {
        status: CallStatus::Refused,
        http_status: Some(402),
        error: Some("budget exhausted".to_owned()),
        tokens: TokenUsage::default(),
        ..model_call("j1", 5)
    };
    let http_error = ModelCall {
        status: CallStatus::HttpError,
        http_status: Some(529),
        ..model_call("j1", 3)
    };
    // Inserted out of seq order.
    for call in [&refused, &full, &http_error, &sparse] {
        store.insert_model_call(call).await.unwrap();
    }
    let other = model_call("j2", 1);
    store.insert_model_call(&other).await.unwrap();

    assert_eq!(
        store.model_calls("j1").await.unwrap(),
        vec![full, sparse, http_error, refused]
    );
    assert_eq!(store.model_calls("j2").await.unwrap(), vec![other]);
    assert!(store.model_calls("unknown").await.unwrap().is_empty());
}

pub(crate) async fn bad_model_calls_are_refused(store: &dyn Store) {
    let err = store
        .insert_model_call(&model_call("ghost", 1))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::NoSuchJob { job_id } if job_id == "ghost"),
        "{err:?}"
    );

    store.insert_job(&job("j1", 0), "{}").await.unwrap();
    store.insert_model_call(&model_call("j1", 1)).await.unwrap();
    // The same row again (a retry whose first commit landed) is written;
    // another row at its seq is refused, naming both.
    store.insert_model_call(&model_call("j1", 1)).await.unwrap();
    let mut other = model_call("j1", 1);
    other.cost_micros += 1;
    let err = store.insert_model_call(&other).await.unwrap_err();
    let stored = model_call("j1", 1);
    assert!(
        matches!(&err, StoreError::ModelCallConflict { job_id, seq: 1, .. } if job_id == "j1"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "model call 1 of job j1 is already on the ledger as a different row (stored: {}; given: {})",
            crate::store::sql::ledger::describe(&stored),
            crate::store::sql::ledger::describe(&other)
        )
    );
    assert_eq!(store.model_calls("j1").await.unwrap(), vec![stored]);
}

pub(crate) async fn saves_replaces_and_lists(store: &dyn Store) {
    assert_eq!(store.profile("box").await.unwrap(), None);
    store.put_profile(&profile("box", 1)).await.unwrap();
    store.put_profile(&profile("a", 3)).await.unwrap();
    store.put_profile(&profile("box", 2)).await.unwrap();
    assert_eq!(store.profile("box").await.unwrap(), Some(profile("box", 2)));
    assert_eq!(
        store.profiles().await.unwrap(),
        vec![profile("a", 3), profile("box", 2)]
    );
}

fn profile(id: &str, max: u32) -> HostProfile {
    HostProfile {
        id: id.into(),
        build_policy: BuildPolicy::CiOnly,
        verification: Verification::DevProbe,
        deny_commands: vec!["make all".into()],
        max_concurrent_jobs: Some(max),
        cpu_limit: None,
        mem_limit_mb: Some(512),
        timeout_min: None,
        max_disk_mb: None,
        max_records: None,
        allowed_models: vec!["gpt-5.5".into()],
        network: None,
        setup_cache: None,
        git_cpu_secs: None,
    }
}

/// Saved, replaced, listed by id, removed once.
pub(crate) async fn profiles_are_saved_replaced_listed_and_removed(store: &dyn Store) {
    saves_replaces_and_lists(store).await;
    assert_eq!(
        (
            store.remove_profile("box").await.unwrap(),
            store.remove_profile("box").await.unwrap(),
            store.profiles().await.unwrap(),
        ),
        (true, false, vec![profile("a", 3)])
    );
}

/// A job finished from `running`; finishing it again from `running` (the
/// reaper after the runner) is refused naming what is stored, and leaves
/// the first finisher's record and the spec as they were.
pub(crate) async fn finishing_is_a_compare_and_set_on_the_status(store: &dyn Store) {
    let started = job("j1", 0);
    store.insert_job(&started, "{\"spec\":1}").await.unwrap();
    let mut done = started.clone();
    done.status = JobStatus::Done;
    done.reason = Some("engine exited 0".into());
    done.changed_files = vec!["src/lib.rs".into()];
    done.finished_at = Some(done.created_at + time::Duration::milliseconds(61_234));
    done.duration_ms = Some(61_234);
    store.finish_job(&done, JobStatus::Running).await.unwrap();
    let mut reaped = started.clone();
    reaped.status = JobStatus::Failed;
    reaped.reason = Some("its process died".into());
    let err = store
        .finish_job(&reaped, JobStatus::Running)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "job j1 is done in the store, not running: another process finished it"
    );
    assert_eq!(
        (
            store.job("j1").await.unwrap(),
            store.job_spec("j1").await.unwrap()
        ),
        (Some(done.clone()), Some("{\"spec\":1}".to_owned()))
    );
    // From the status that is stored, it goes through.
    store.finish_job(&reaped, JobStatus::Done).await.unwrap();
    assert_eq!(store.job("j1").await.unwrap(), Some(reaped.clone()));
    // A dispose writes the final record back from its own status: no
    // patch, and when (`disposed_at`, read back as written).
    let disposed = paddock_protocol::JobRecord {
        patch_path: None,
        disposed_at: Some(reaped.created_at + time::Duration::seconds(90)),
        ..reaped.clone()
    };
    store
        .finish_job(&disposed, JobStatus::Failed)
        .await
        .unwrap();
    assert_eq!(store.job("j1").await.unwrap(), Some(disposed));
}

/// Many finishers at once, all from `running`: exactly one wins, and the
/// stored record is the winner's.
pub(crate) async fn exactly_one_of_concurrent_finishers_wins(store: &dyn Store) {
    store.insert_job(&job("j1", 0), "{}").await.unwrap();
    let finishers = (0..8).map(|i| {
        let mut record = job("j1", 0);
        record.status = JobStatus::Failed;
        record.reason = Some(format!("finisher {i}"));
        async move { (store.finish_job(&record, JobStatus::Running).await, record) }
    });
    let results = futures::future::join_all(finishers).await;
    let winners: Vec<_> = results
        .iter()
        .filter(|(r, _)| r.is_ok())
        .map(|(_, record)| record.clone())
        .collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    assert!(results
        .iter()
        .all(|(r, _)| matches!(r, Ok(()) | Err(StoreError::StatusChanged { .. }))));
    assert_eq!(store.job("j1").await.unwrap(), winners.into_iter().next());
}

/// `running_jobs` lists only running jobs, oldest first; an id prefix is
/// taken literally (`%` and `_` are characters), newest first, limited.
pub(crate) async fn running_jobs_and_id_prefixes(store: &dyn Store) {
    let mut finished = job("a_1", 0);
    for j in [
        job("a%2", 30),
        job("ab3", 20),
        job("b4", 10),
        finished.clone(),
    ] {
        store.insert_job(&j, "{}").await.unwrap();
    }
    finished.status = JobStatus::Cancelled;
    store
        .finish_job(&finished, JobStatus::Running)
        .await
        .unwrap();
    assert_eq!(
        (
            running_ids(store).await,
            store.job_ids_with_prefix("a", 10).await.unwrap(),
            store.job_ids_with_prefix("a", 2).await.unwrap(),
            store.job_ids_with_prefix("a_", 10).await.unwrap(),
            store.job_ids_with_prefix("a%", 10).await.unwrap(),
            store.job_ids_with_prefix("z", 10).await.unwrap(),
        ),
        (
            vec!["b4".to_owned(), "ab3".to_owned(), "a%2".to_owned()],
            vec!["a%2".to_owned(), "ab3".to_owned(), "a_1".to_owned()],
            vec!["a%2".to_owned(), "ab3".to_owned()],
            vec!["a_1".to_owned()],
            vec!["a%2".to_owned()],
            Vec::<String>::new(),
        )
    );
}

/// Usage: every job with its task type from the spec (`chore` without
/// one), and its calls summed per model (served, else requested) and UTC day.
pub(crate) async fn usage_rows_per_job_and_per_model_and_day(store: &dyn Store) {
    let a = job("a", 0);
    store
        .insert_job(&a, r#"{"ticket":{"type":"bug"}}"#)
        .await
        .unwrap();
    store.insert_job(&job("b", 1), "{}").await.unwrap();
    let at = datetime!(2026-11-30 23:00 UTC);
    let call = |seq: u64, served: Option<&str>, at: OffsetDateTime| ModelCall {
        served_model: served.map(str::to_owned),
        started_at: at,
        cost_micros: 10,
        ..model_call("a", seq)
    };
    for c in [
        call(1, Some("m1"), at),
        call(2, Some("m1"), at),
        call(3, None, at),
        call(4, Some("m1"), at + time::Duration::hours(2)),
    ] {
        store.insert_model_call(&c).await.unwrap();
    }
    let (jobs, calls) = store.usage().await.unwrap();
    let jobs: Vec<_> = jobs
        .into_iter()
        .map(|j| (j.id, j.task_type, j.status, j.created_at))
        .collect();
    assert_eq!(
        jobs,
        vec![
            ("a".into(), "bug".into(), "running".into(), a.created_at),
            (
                "b".into(),
                "chore".into(),
                "running".into(),
                job("b", 1).created_at
            ),
        ]
    );
    let calls: Vec<_> = calls
        .into_iter()
        .map(|c| (c.job_id, c.model, c.day, c.calls, c.cost_micros))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("a".into(), "gpt-5-codex".into(), "2026-11-30".into(), 1, 10),
            ("a".into(), "m1".into(), "2026-11-30".into(), 2, 20),
            ("a".into(), "m1".into(), "2026-12-01".into(), 1, 10),
        ]
    );
}

/// The suite on SQLite, in memory and on a file.
mod sqlite {
    use std::sync::Arc;

    use crate::store::{SharedStore, SqliteStore};

    mod in_memory {
        super::super::conformance_suite!(async {
            let store: crate::store::SharedStore =
                std::sync::Arc::new(crate::store::SqliteStore::open_in_memory().await.unwrap());
            store
        });
    }

    mod on_a_file {
        super::super::conformance_suite!(super::file_store());
    }

    /// A store on a file in a directory that lives as long as the process.
    async fn file_store() -> SharedStore {
        let dir = tempfile::tempdir().unwrap().keep();
        Arc::new(SqliteStore::open(&dir.join("paddock.db")).await.unwrap())
    }
}

/// The suite on PostgreSQL, each check on a fresh database of the test
/// process's throwaway cluster (test-support's `postgres`); skipped with a
/// printed reason where PostgreSQL is not installed (a failure in CI).
mod postgres {
    use std::sync::Arc;

    use crate::store::{PgStore, PgUrl, SharedStore};

    super::conformance_suite!(pg_store());

    /// A store on a fresh database, migrated.
    async fn pg_store() -> Option<SharedStore> {
        let db = paddock_test_support::postgres::database().await?;
        let url = PgUrl::parse(&db.url).unwrap();
        Some(Arc::new(PgStore::open(&url).await.unwrap()))
    }
}

/// A row written ahead is completed once; a refused call (never
/// written ahead) is inserted; a settled row is never overwritten; what
/// is still in flight is settled `interrupted`, keeping its estimate.
pub(crate) async fn in_flight_rows_are_settled_once_or_interrupted(store: &dyn Store) {
    store.insert_job(&job("j1", 0), "{}").await.unwrap();
    let ahead = |seq| ModelCall {
        status: CallStatus::InFlight,
        served_model: None,
        http_status: None,
        ttft_ms: None,
        estimated: true,
        cost_micros: 7,
        ..model_call("j1", seq)
    };
    store.insert_model_call(&ahead(1)).await.unwrap();
    store.insert_model_call(&ahead(2)).await.unwrap();
    let done = model_call("j1", 1);
    assert!(store.settle_model_call(&done).await.unwrap());
    let late = ModelCall {
        cost_micros: 999,
        ..model_call("j1", 1)
    };
    assert!(!store.settle_model_call(&late).await.unwrap());
    let refused = ModelCall {
        status: CallStatus::Refused,
        ..model_call("j1", 3)
    };
    assert!(store.settle_model_call(&refused).await.unwrap());
    assert_eq!(
        store
            .interrupt_model_calls("j1", "the job ended")
            .await
            .unwrap(),
        1
    );
    assert_eq!(store.interrupt_model_calls("j1", "again").await.unwrap(), 0);
    let interrupted = ModelCall {
        status: CallStatus::Interrupted,
        error: Some("the job ended".into()),
        ..ahead(2)
    };
    assert_eq!(
        store.model_calls("j1").await.unwrap(),
        vec![done, interrupted, refused]
    );
}

/// Egress attempts come back whole, per job, in the order recorded; an
/// unknown job's are refused.
pub(crate) async fn egress_attempts_round_trip_in_order_per_job(store: &dyn Store) {
    store.insert_job(&job("j1", 0), "{}").await.unwrap();
    store.insert_job(&job("j2", 0), "{}").await.unwrap();
    let allowed = EgressRecord {
        host: "registry.npmjs.org".to_owned(),
        port: 443,
        method: Some(EgressMethod::Connect),
        address: Some("[2606:4700::6810:1]:443".to_owned()),
        bytes_up: 1843,
        bytes_down: u64::MAX,
        duration_ms: 412,
        phase: EgressPhase::Setup,
        allowed: true,
        rule: Some("phase_switch".to_owned()),
        reason: Some("opened in the setup phase, closed when it ended".to_owned()),
        credential: None,
        substituted: None,
    };
    let refused = EgressRecord {
        host: "\\u{0}garbage".to_owned(),
        port: 0,
        method: None,
        address: None,
        bytes_up: 0,
        bytes_down: 0,
        duration_ms: 0,
        phase: EgressPhase::Agent,
        allowed: false,
        rule: Some("bad_request".to_owned()),
        reason: Some("the request is not HTTP: invalid token".to_owned()),
        credential: None,
        substituted: None,
    };
    store.record_egress("j1", 1, &refused).await.unwrap();
    store.record_egress("j2", 1, &allowed).await.unwrap();
    store.record_egress("j1", 2, &allowed).await.unwrap();
    // Written again as stored (a retry whose first commit landed): once.
    store.record_egress("j1", 2, &allowed).await.unwrap();
    // Another attempt at a taken seq is refused, naming the last one.
    let err = store.record_egress("j1", 1, &allowed).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "egress attempt 1 of job j1 is already stored as a different attempt; \
         the last stored seq is 2"
    );
    assert!(
        matches!(&err, StoreError::EgressConflict { job_id, seq: 1, last: 2 } if job_id == "j1"),
        "{err:?}"
    );
    assert_eq!(
        (
            store.egress("j1").await.unwrap(),
            store.egress("j2").await.unwrap(),
            store.egress("nope").await.unwrap(),
        ),
        (
            vec![refused, allowed.clone()],
            vec![allowed.clone()],
            vec![]
        )
    );
    let err = store.record_egress("ghost", 1, &allowed).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::NoSuchJob { job_id } if job_id == "ghost"),
        "{err:?}"
    );
}

pub(crate) async fn closeouts_are_kept_replaced_and_refused_for_unknown_jobs(store: &dyn Store) {
    store.insert_job(&job("j1", 0), "{}").await.unwrap();
    store.insert_job(&job("j2", 0), "{}").await.unwrap();
    assert_eq!(store.closeout("j1").await.unwrap(), None);
    store.set_closeout("j1", "first\n").await.unwrap();
    store
        .set_closeout("j1", "## Closeout\n\ncafé ✓\n")
        .await
        .unwrap();
    assert_eq!(
        (
            store.closeout("j1").await.unwrap(),
            store.closeout("j2").await.unwrap(),
            store.closeout("nope").await.unwrap(),
        ),
        (Some("## Closeout\n\ncafé ✓\n".to_string()), None, None)
    );
    let err = store.set_closeout("nope", "x").await.unwrap_err();
    assert!(
        matches!(&err, StoreError::NoSuchJob { job_id } if job_id == "nope"),
        "{err:?}"
    );
    // Finishing a job keeps its closeout.
    store
        .finish_job(&job("j1", 0), JobStatus::Running)
        .await
        .unwrap();
    assert_eq!(
        store.closeout("j1").await.unwrap(),
        Some("## Closeout\n\ncafé ✓\n".to_string())
    );
}

pub(crate) async fn engine_sessions_are_kept_replaced_and_refused_for_unknown_jobs(
    store: &dyn Store,
) {
    store.insert_job(&job("j1", 0), "{}").await.unwrap();
    store.insert_job(&job("j2", 0), "{}").await.unwrap();
    assert_eq!(store.engine_session("j1").await.unwrap(), None);
    store.set_engine_session("j1", "first").await.unwrap();
    store
        .set_engine_session("j1", "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b")
        .await
        .unwrap();
    assert_eq!(
        (
            store.engine_session("j1").await.unwrap(),
            store.engine_session("j2").await.unwrap(),
            store.engine_session("nope").await.unwrap(),
        ),
        (
            Some("0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b".to_string()),
            None,
            None
        )
    );
    let err = store.set_engine_session("nope", "x").await.unwrap_err();
    assert!(
        matches!(&err, StoreError::NoSuchJob { job_id } if job_id == "nope"),
        "{err:?}"
    );
    // Finishing a job keeps its session id.
    store
        .finish_job(&job("j1", 0), JobStatus::Running)
        .await
        .unwrap();
    assert_eq!(
        store.engine_session("j1").await.unwrap(),
        Some("0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b".to_string())
    );
}

pub(crate) async fn a_queued_job_keeps_the_prior_job_it_follows(store: &dyn Store) {
    let merged = crate::store::Follows {
        job: "j0".into(),
        ended: Some("its pull request https://forge/pr/1 was merged on the forge".into()),
        closed: None,
    };
    // Closed without a merge: kept too, for the server that runs it to say.
    let open = crate::store::Follows {
        job: "j1".into(),
        ended: None,
        closed: Some(
            "its pull request https://forge/pr/2 was closed on the forge without being merged"
                .into(),
        ),
    };
    store
        .enqueue_job(&queued("q1", "T-1", 0), "{}", 0, Some(&merged))
        .await
        .unwrap();
    store
        .enqueue_job(&queued("q2", "T-2", 1), "{}", 0, Some(&open))
        .await
        .unwrap();
    store
        .enqueue_job(&queued("q3", "T-3", 2), "{}", 0, None)
        .await
        .unwrap();
    store.insert_job(&job("j9", 0), "{}").await.unwrap();
    // Claimed and finished, it keeps them.
    let claimed = store
        .claim_job(&[], &host("alpha"), datetime!(2026-12-02 05:00:00 UTC), &[])
        .await
        .unwrap()
        .unwrap();
    let mut done = claimed.clone();
    done.status = JobStatus::Done;
    store.finish_job(&done, JobStatus::Running).await.unwrap();
    assert_eq!(
        (
            claimed.id.as_str(),
            store.job_follows("q1").await.unwrap(),
            store.job_follows("q2").await.unwrap(),
            store.job_follows("q3").await.unwrap(),
            store.job_follows("j9").await.unwrap(),
            store.job_follows("nope").await.unwrap(),
        ),
        ("q1", Some(merged), Some(open), None, None, None)
    );
}

/// A queued job `id` of ticket `ticket`, `offset_ms` after the base time.
fn queued(id: &str, ticket: &str, offset_ms: i64) -> paddock_protocol::JobRecord {
    let mut j = job(id, offset_ms);
    j.ticket_id = ticket.to_owned();
    j.status = JobStatus::Queued;
    j
}

/// Claims until the queue gives nothing; the ids in claim order.
async fn claim_all(store: &dyn Store) -> Vec<String> {
    claim_in(store, &[]).await
}

/// Claims what `lanes` take until the queue gives nothing; the ids in
/// claim order.
async fn claim_in(store: &dyn Store, lanes: &[crate::store::Lane]) -> Vec<String> {
    let mut out = Vec::new();
    let (owner, at) = (host("claimer"), datetime!(2026-12-02 05:00:00 UTC));
    while let Some(j) = store.claim_job(lanes, &owner, at, &[]).await.unwrap() {
        assert_eq!(j.status, JobStatus::Running, "{}", j.id);
        out.push(j.id);
    }
    out
}

pub(crate) async fn the_queue_claims_by_priority_then_age_one_attempt_per_ticket(
    store: &dyn Store,
) {
    let mut held = queued("held", "T-H", 0);
    held.status = JobStatus::Held;
    let jobs = [
        (queued("old-low", "T-A", 0), 0),
        (queued("new-high", "T-B", 20), 5),
        (queued("newer-high-same-ticket", "T-B", 30), 5),
        (queued("mid-low", "T-C", 10), 0),
        (queued("older-high", "T-D", 15), 5),
        (held.clone(), 9),
    ];
    for (j, priority) in &jobs {
        store.enqueue_job(j, "{}", *priority, None).await.unwrap();
    }
    // A ticket with a running attempt elsewhere waits too.
    let mut busy = job("busy", 0);
    busy.ticket_id = "T-E".into();
    store.insert_job(&busy, "{}").await.unwrap();
    store
        .enqueue_job(&queued("behind-busy", "T-E", 1), "{}", 7, None)
        .await
        .unwrap();

    let mut claimed = store.job("older-high").await.unwrap().unwrap();
    assert_eq!(claimed.status, JobStatus::Queued);
    claimed.status = JobStatus::Running;
    assert_eq!(store.queue_depth().await.unwrap(), 6);
    assert_eq!(
        claim_all(store).await,
        vec!["older-high", "new-high", "old-low", "mid-low"]
    );
    assert_eq!(store.queue_depth().await.unwrap(), 2);
    assert_eq!(
        store.job_counts().await.unwrap(),
        vec![
            (JobStatus::Queued, 2),
            (JobStatus::Running, 5),
            (JobStatus::Done, 0),
            (JobStatus::Failed, 0),
            (JobStatus::Held, 1),
            (JobStatus::TimedOut, 0),
            (JobStatus::Cancelled, 0),
            (JobStatus::Bounced, 0),
        ]
    );
    assert_eq!(store.job("older-high").await.unwrap(), Some(claimed));
    assert_eq!(store.job("held").await.unwrap(), Some(held));

    // Once the ticket's running attempts end, its next attempt runs.
    for id in ["new-high", "busy"] {
        let mut done = store.job(id).await.unwrap().unwrap();
        done.status = JobStatus::Done;
        store.finish_job(&done, JobStatus::Running).await.unwrap();
    }
    assert_eq!(
        claim_all(store).await,
        vec!["behind-busy", "newer-high-same-ticket"]
    );
}

pub(crate) async fn the_queue_claims_only_what_its_lanes_take(store: &dyn Store) {
    use crate::store::Lane;
    for (i, (id, project, spec)) in [
        ("bug-p1", "p1", r#"{"ticket":{"type":"bug"}}"#),
        ("chore-p1", "p1", r#"{"ticket":{}}"#),
        ("bug-p2", "p2", r#"{"ticket":{"type":"bug"}}"#),
        ("feature-p2", "p2", r#"{"ticket":{"type":"feature"}}"#),
        ("chore-p2", "p2", r#"{"ticket":{"type":"chore"}}"#),
    ]
    .into_iter()
    .enumerate()
    {
        let mut j = queued(id, &format!("T-{id}"), i as i64);
        j.project = project.to_owned();
        store.enqueue_job(&j, spec, 0, None).await.unwrap();
    }
    let lanes = [
        Lane {
            task_types: vec!["bug".into()],
            projects: vec![],
        },
        Lane {
            task_types: vec!["chore".into()],
            projects: vec!["p1".into()],
        },
    ];
    assert_eq!(
        (
            claim_in(store, &lanes).await,
            store.queue_depth().await.unwrap(),
            claim_all(store).await
        ),
        (
            vec!["bug-p1".to_owned(), "chore-p1".into(), "bug-p2".into()],
            2,
            vec!["feature-p2".to_owned(), "chore-p2".into()]
        )
    );
}

/// Under a deep queue (400 jobs, half of them in this server's lane, the
/// oldest 300 passed over by the fleet and the oldest 250 by this server
/// itself, its skip list), the claim still takes the oldest job its lane
/// takes and it has not passed over, then the next; the jobs a busy
/// server looks at to mark (`passed_over_queued`) are the oldest 16
/// passed over in its lane.
pub(crate) async fn a_deep_queue_claims_its_oldest_runnable_job_first(store: &dyn Store) {
    use crate::store::Lane;
    let at = datetime!(2026-12-07 12:00:00 UTC);
    let mut ids = Vec::new();
    for i in 0..400_i64 {
        let id = format!("q{i:03}");
        let spec = if i % 2 == 0 {
            r#"{"ticket":{"type":"bug"}}"#
        } else {
            r#"{"ticket":{"type":"feature"}}"#
        };
        store
            .enqueue_job(&queued(&id, &format!("T-{id}"), i), spec, 0, None)
            .await
            .unwrap();
        ids.push(id);
    }
    for id in &ids[..300] {
        store.pass_over(id, at).await.unwrap();
    }
    let skip = ids[..250].to_vec();
    let lanes = [Lane {
        task_types: vec!["bug".into()],
        projects: vec![],
    }];
    let marked = store.passed_over_queued(&lanes, 16).await.unwrap();
    let mut claimed = Vec::new();
    for _ in 0..3 {
        let job = store
            .claim_job(&lanes, &host("alpha"), at, &skip)
            .await
            .unwrap();
        claimed.push(job.map(|j| j.id));
    }
    assert_eq!(
        (marked, claimed),
        (
            (0..16)
                .map(|i| format!("q{:03}", i * 2))
                .collect::<Vec<_>>(),
            vec![
                Some("q250".to_owned()),
                Some("q252".to_owned()),
                Some("q254".to_owned())
            ]
        )
    );
}

pub(crate) async fn concurrent_claims_never_share_a_job(store: &dyn Store) {
    let mut ids: Vec<String> = (0..24).map(|i| format!("q{i:02}")).collect();
    for (i, id) in ids.iter().enumerate() {
        let j = queued(id, &format!("T-{id}"), i as i64);
        store.enqueue_job(&j, "{}", 0, None).await.unwrap();
    }
    let claimers = (0..4).map(|_| claim_all(store));
    let mut claimed: Vec<String> = futures::future::join_all(claimers)
        .await
        .into_iter()
        .flatten()
        .collect();
    claimed.sort();
    ids.sort();
    assert_eq!(claimed, ids);
}

pub(crate) async fn jobs_are_listed_by_filter_in_pages(store: &dyn Store) {
    let mut all = Vec::new();
    for i in 0..5_i64 {
        let mut j = job(&format!("j{i}"), i * 100);
        if i % 2 == 1 {
            j.engine = "claude".into();
        }
        if i >= 3 {
            j.status = JobStatus::Queued;
        }
        if i % 2 == 0 {
            j.branch = "paddock/T-1/1".into();
        }
        if i % 3 == 1 {
            j.isolation = "process".into();
        }
        store.enqueue_job(&j, "{}", 0, None).await.unwrap();
        all.push(j);
    }
    let page = |status, engine: Option<&str>, after: Option<&str>, limit| JobQuery {
        status,
        engine: engine.map(str::to_owned),
        isolation: None,
        after: after.map(str::to_owned),
        limit,
        branch: None,
    };
    let on_branch = |branch: &str, after: Option<&str>| JobQuery {
        branch: Some(branch.to_owned()),
        ..page(None, None, after, 10)
    };
    let ids = |jobs: Vec<paddock_protocol::JobRecord>| -> Vec<String> {
        jobs.into_iter().map(|j| j.id).collect()
    };
    assert_eq!(
        store.list_jobs(&page(None, None, None, 10)).await.unwrap(),
        all.iter().rev().cloned().collect::<Vec<_>>()
    );
    assert_eq!(
        (
            ids(store.list_jobs(&page(None, None, None, 2)).await.unwrap()),
            ids(store
                .list_jobs(&page(None, None, Some("j3"), 2))
                .await
                .unwrap()),
            ids(store
                .list_jobs(&page(None, None, Some("j1"), 2))
                .await
                .unwrap()),
            ids(store
                .list_jobs(&page(Some(JobStatus::Queued), None, None, 10))
                .await
                .unwrap()),
            ids(store
                .list_jobs(&page(Some(JobStatus::Running), Some("claude"), None, 10))
                .await
                .unwrap()),
            ids(store
                .list_jobs(&page(None, Some("codex"), Some("j4"), 10))
                .await
                .unwrap()),
            ids(store
                .list_jobs(&page(None, None, Some("nope"), 10))
                .await
                .unwrap()),
            ids(store
                .list_jobs(&on_branch("paddock/T-1/1", None))
                .await
                .unwrap()),
            ids(store
                .list_jobs(&on_branch("paddock/T-1/1", Some("j4")))
                .await
                .unwrap()),
            ids(store
                .list_jobs(&on_branch("paddock/T-1/2", None))
                .await
                .unwrap()),
        ),
        (
            vec!["j4".to_owned(), "j3".to_owned()],
            vec!["j2".to_owned(), "j1".to_owned()],
            vec!["j0".to_owned()],
            vec!["j4".to_owned(), "j3".to_owned()],
            vec!["j1".to_owned()],
            vec!["j2".to_owned(), "j0".to_owned()],
            Vec::<String>::new(),
            vec!["j4".to_owned(), "j2".to_owned(), "j0".to_owned()],
            vec!["j2".to_owned(), "j0".to_owned()],
            Vec::<String>::new(),
        )
    );
    // The rung is filtered before the page is cut: a page of one holds
    // the newest job on the rung, and its cursor leads to the next.
    let on_rung = |rung: &str, engine: Option<&str>, after: Option<&str>, limit| JobQuery {
        isolation: Some(rung.to_owned()),
        ..page(None, engine, after, limit)
    };
    assert_eq!(
        (
            ids(store
                .list_jobs(&on_rung("process", None, None, 10))
                .await
                .unwrap()),
            ids(store
                .list_jobs(&on_rung("process", None, None, 1))
                .await
                .unwrap()),
            ids(store
                .list_jobs(&on_rung("process", None, Some("j4"), 1))
                .await
                .unwrap()),
            ids(store
                .list_jobs(&on_rung("sandbox", Some("codex"), None, 10))
                .await
                .unwrap()),
        ),
        (
            vec!["j4".to_owned(), "j1".to_owned()],
            vec!["j4".to_owned()],
            vec!["j1".to_owned()],
            vec!["j2".to_owned(), "j0".to_owned()],
        )
    );
}

fn api_token(id: &str, scope: Scope, name: Option<&str>, at: OffsetDateTime) -> StoredToken {
    StoredToken {
        id: id.into(),
        name: name.map(Into::into),
        scope,
        salt: format!("{id}00"),
        hash: format!("{id}ff"),
        created_at: at,
        revoked_at: None,
    }
}

/// Tokens round-trip whole, are listed oldest first, refuse a taken id,
/// and are revoked once: revoking again keeps the first time.
pub(crate) async fn api_tokens_are_saved_listed_and_revoked_once(store: &dyn Store) {
    let t0 = datetime!(2026-12-01 02:00:00.123456789 +01:00);
    let later = api_token("bbbb", Scope::Admin, None, t0 + time::Duration::seconds(5));
    let first = api_token("cccc", Scope::Read, Some("ci reader"), t0);
    store.insert_api_token(&later).await.unwrap();
    store.insert_api_token(&first).await.unwrap();
    let err = store.insert_api_token(&first).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::TokenExists { id } if id == "cccc"),
        "{err:?}"
    );
    assert_eq!(store.api_token("cccc").await.unwrap(), Some(first.clone()));
    assert_eq!(store.api_token("nope").await.unwrap(), None);
    assert_eq!(
        store.api_tokens().await.unwrap(),
        vec![first.clone(), later.clone()]
    );
    let revoked_at = t0 + time::Duration::minutes(1);
    let revoked = StoredToken {
        revoked_at: Some(revoked_at),
        ..later.clone()
    };
    assert_eq!(
        (
            store.revoke_api_token("bbbb", revoked_at).await.unwrap(),
            store
                .revoke_api_token("bbbb", revoked_at + time::Duration::hours(1))
                .await
                .unwrap(),
            store.revoke_api_token("nope", revoked_at).await.unwrap(),
            store.api_tokens().await.unwrap(),
        ),
        (
            Some(revoked.clone()),
            Some(revoked.clone()),
            None,
            vec![first, revoked]
        )
    );
}

/// Attempts come back whole, in the order recorded, per job; an unknown
/// job is refused.
pub(crate) async fn webhook_attempts_round_trip_in_order_per_job(store: &dyn Store) {
    store.insert_job(&job("j1", 0), "{}").await.unwrap();
    store.insert_job(&job("j2", 1), "{}").await.unwrap();
    let at = datetime!(2026-12-01 03:00:00.5 +01:00);
    let failed = WebhookAttempt {
        job_id: "j1".into(),
        url: "https://hooks.example/paddock".into(),
        attempt: 1,
        at,
        delivered: false,
        http_status: Some(503),
        error: Some("the receiver answered 503 Service Unavailable".into()),
    };
    let delivered = WebhookAttempt {
        attempt: 2,
        at: at + time::Duration::seconds(1),
        delivered: true,
        http_status: Some(204),
        error: None,
        ..failed.clone()
    };
    let other = WebhookAttempt {
        job_id: "j2".into(),
        http_status: None,
        error: Some("timed out after 10 s".into()),
        ..failed.clone()
    };
    for a in [&failed, &other, &delivered] {
        store.record_webhook_attempt(a).await.unwrap();
    }
    let err = store
        .record_webhook_attempt(&WebhookAttempt {
            job_id: "nope".into(),
            ..failed.clone()
        })
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::NoSuchJob { job_id } if job_id == "nope"),
        "{err:?}"
    );
    assert_eq!(
        (
            store.webhook_attempts("j1").await.unwrap(),
            store.webhook_attempts("j2").await.unwrap(),
            store.webhook_attempts("nope").await.unwrap(),
        ),
        (vec![failed, delivered], vec![other], vec![])
    );
}

/// A final record owed to the webhooks is leased only once its job has
/// ended, by one server at a time, oldest owed first; a lease that ran out
/// is taken over (and its old holder can neither renew nor settle it);
/// owing twice keeps the first row; a settled row is never leased again,
/// owed again or not; an unknown job is refused.
pub(crate) async fn owed_webhooks_are_leased_once_until_the_lease_runs_out(store: &dyn Store) {
    let t0 = datetime!(2026-12-02 17:00:00 UTC);
    let s = time::Duration::seconds;
    for (id, offset) in [("old", 0), ("new", 1), ("live", 2)] {
        store.insert_job(&job(id, offset), "{}").await.unwrap();
    }
    for (id, at) in [
        ("new", t0 + s(1)),
        ("old", t0),
        ("live", t0),
        ("old", t0 + s(9)),
    ] {
        store.owe_webhook(id, at).await.unwrap();
    }
    let err = store.owe_webhook("nope", t0).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::NoSuchJob { job_id } if job_id == "nope"),
        "{err:?}"
    );
    let lease = |by: &'static str, now: OffsetDateTime, job: Option<&'static str>| WebhookLease {
        by,
        now,
        until: now + s(30),
        job,
        limit: 10,
    };
    // Nothing has ended yet.
    assert_eq!(
        store
            .lease_owed_webhooks(&lease("a", t0, None))
            .await
            .unwrap(),
        Vec::<String>::new()
    );
    for id in ["old", "new"] {
        let mut done = job(id, 0);
        done.status = JobStatus::Done;
        store.finish_job(&done, JobStatus::Running).await.unwrap();
    }
    // One job only; then the rest, at most `limit`, oldest owed first.
    assert_eq!(
        store
            .lease_owed_webhooks(&lease("a", t0, Some("new")))
            .await
            .unwrap(),
        vec!["new".to_owned()]
    );
    assert_eq!(
        store
            .lease_owed_webhooks(&WebhookLease {
                limit: 1,
                ..lease("b", t0, None)
            })
            .await
            .unwrap(),
        vec!["old".to_owned()]
    );
    // Leased: nobody else gets them, the running one neither.
    assert_eq!(
        (
            store
                .lease_owed_webhooks(&lease("c", t0 + s(29), None))
                .await
                .unwrap(),
            store
                .lease_owed_webhooks(&lease("c", t0 + s(29), Some("old")))
                .await
                .unwrap(),
        ),
        (vec![], vec![])
    );
    // The holder renews; another server's renewal and settling fail.
    assert!(store
        .renew_webhook_lease("new", "a", t0 + s(60))
        .await
        .unwrap());
    assert!(!store
        .renew_webhook_lease("new", "b", t0 + s(90))
        .await
        .unwrap());
    assert!(!store.settle_owed_webhook("new", "b", t0).await.unwrap());
    // "old"'s lease (to b, until t0 + 30 s) runs out: c takes it over, and
    // b can no longer settle it; "new" is still a's until t0 + 60 s.
    assert_eq!(
        store
            .lease_owed_webhooks(&lease("c", t0 + s(31), None))
            .await
            .unwrap(),
        vec!["old".to_owned()]
    );
    assert!(!store.settle_owed_webhook("old", "b", t0).await.unwrap());
    assert!(store.settle_owed_webhook("old", "c", t0).await.unwrap());
    assert!(store.settle_owed_webhook("new", "a", t0).await.unwrap());
    assert!(!store.settle_owed_webhook("new", "a", t0).await.unwrap());
    // Settled rows are never leased again, owed again or not; nor renewed.
    store.owe_webhook("old", t0 + s(1000)).await.unwrap();
    assert_eq!(
        (
            store
                .lease_owed_webhooks(&lease("d", t0 + s(1000), None))
                .await
                .unwrap(),
            store
                .lease_owed_webhooks(&lease("d", t0 + s(1000), Some("old")))
                .await
                .unwrap(),
            store
                .renew_webhook_lease("old", "c", t0 + s(2000))
                .await
                .unwrap(),
        ),
        (vec![], vec![], false)
    );
}

/// Eight servers leasing at once never lease the same owed record twice,
/// and between them lease every one.
pub(crate) async fn of_concurrent_servers_one_leases_each_owed_webhook(store: &dyn Store) {
    let t0 = datetime!(2026-12-02 17:00:00 UTC);
    let mut ids = Vec::new();
    for i in 0..20 {
        let id = format!("j{i:02}");
        let mut done = job(&id, i);
        done.status = JobStatus::Failed;
        store.insert_job(&done, "{}").await.unwrap();
        store.owe_webhook(&id, t0).await.unwrap();
        ids.push(id);
    }
    let names: Vec<String> = (0..8).map(|i| format!("server-{i}")).collect();
    let leased = futures::future::join_all(names.iter().map(|by| async move {
        let mut got = Vec::new();
        loop {
            let batch = store
                .lease_owed_webhooks(&WebhookLease {
                    by,
                    now: t0,
                    until: t0 + time::Duration::seconds(30),
                    job: None,
                    limit: 3,
                })
                .await
                .unwrap();
            if batch.is_empty() {
                return got;
            }
            got.extend(batch);
        }
    }))
    .await;
    let mut all: Vec<String> = leased.into_iter().flatten().collect();
    all.sort();
    assert_eq!(all, ids);
}

/// Sums past `i64::MAX` saturate instead of failing (the budget check and
/// `paddock usage` would be lost).
pub(crate) async fn sums_saturate_instead_of_overflowing(store: &dyn Store) {
    let mut j = job("job-a", 0);
    j.project = "p".into();
    j.ticket_id = "T-1".into();
    store.insert_job(&j, "{}").await.unwrap();
    let day = datetime!(2026-11-30 12:00 UTC);
    for seq in [1, 2] {
        let mut call = model_call("job-a", seq);
        call.cost_micros = i64::MAX;
        call.tokens.input_tokens = i64::MAX as u64;
        call.started_at = day;
        store.insert_model_call(&call).await.unwrap();
    }
    let (_, calls) = store.usage().await.unwrap();
    assert_eq!(
        (
            ticket_spent(store, "p", "T-1", "").await,
            day_spent(store, "p", day, "").await,
            calls
                .iter()
                .map(|c| (c.calls, c.tokens.input_tokens, c.cost_micros))
                .collect::<Vec<_>>(),
        ),
        (i64::MAX, i64::MAX, vec![(2, i64::MAX as u64, i64::MAX)])
    );
}

/// The ids of the running jobs, oldest first.
async fn running_ids(store: &dyn Store) -> Vec<String> {
    store
        .running_jobs()
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect()
}

/// A host named `name`, its id made of the name's first letter.
fn host(name: &str) -> Owner {
    Owner {
        host: name[..1].repeat(32),
        name: name.to_owned(),
    }
}

/// A reclaim of `job` from `host` with the heartbeat `heartbeat`, no
/// cancel seen, final event `last`, nothing queued.
fn reclaim<'a>(
    job: &'a paddock_protocol::JobRecord,
    host: &'a str,
    heartbeat: OffsetDateTime,
    last: &'a EventBody,
) -> Reclaim<'a> {
    Reclaim {
        job,
        host,
        heartbeat,
        cancel_asked: false,
        last,
        interrupted: "its host died",
        next: None,
    }
}

fn running(id: &str, owner: Option<(&Owner, OffsetDateTime)>) -> RunningJob {
    RunningJob {
        id: id.to_owned(),
        owner: owner.map(|(o, at)| (o.clone(), at)),
        queued: None,
    }
}

/// A job inserted by its owner carries it and its heartbeat (to the
/// nanosecond); the owner renews it, nobody else can, and not once the
/// job ended; a job recorded without an owner lists none.
pub(crate) async fn owned_jobs_renew_their_heartbeat_only_while_theirs(store: &dyn Store) {
    let (a, b) = (host("alpha"), host("beta"));
    let t0 = datetime!(2026-12-02 05:00:00.123456789 UTC);
    let t1 = t0 + time::Duration::seconds(10);
    store.insert_job(&job("old", 0), "{}").await.unwrap();
    let j1 = job("j1", 10);
    store.insert_owned_job(&j1, "{}", &a, t0).await.unwrap();
    assert_eq!(
        store.running_jobs().await.unwrap(),
        vec![running("old", None), running("j1", Some((&a, t0)))]
    );
    assert!(store.heartbeat("j1", &a.host, t1).await.unwrap());
    assert!(!store.heartbeat("j1", &b.host, t1).await.unwrap());
    assert!(!store.heartbeat("old", &a.host, t1).await.unwrap());
    assert_eq!(
        store.running_jobs().await.unwrap(),
        vec![running("old", None), running("j1", Some((&a, t1)))]
    );
    let err = store.heartbeat("nope", &a.host, t1).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        StoreError::NoSuchJob {
            job_id: "nope".into()
        }
        .to_string()
    );
    let mut done = j1.clone();
    done.status = JobStatus::Done;
    store.finish_job(&done, JobStatus::Running).await.unwrap();
    assert!(!store.heartbeat("j1", &a.host, t1).await.unwrap());
    assert_eq!(
        (store.job("j1").await.unwrap(), running_ids(store).await),
        (Some(done), vec!["old".to_owned()])
    );
    assert!(matches!(
        store.insert_owned_job(&j1, "{}", &a, t0).await,
        Err(StoreError::JobExists { .. })
    ));
}

/// The claim makes its claimer the job's owner with its heartbeat, in the
/// same statement, and marks the job as from the queue (its priority
/// listed with it).
pub(crate) async fn a_claim_records_its_owner_and_heartbeat(store: &dyn Store) {
    let owner = host("gamma");
    let at = datetime!(2026-12-02 05:00:01 UTC);
    store
        .enqueue_job(&queued("q1", "T-1", 0), "{}", 7, None)
        .await
        .unwrap();
    let claimed = store
        .claim_job(&[], &owner, at, &[])
        .await
        .unwrap()
        .unwrap();
    let from_queue = RunningJob {
        queued: Some(7),
        ..running("q1", Some((&owner, at)))
    };
    assert_eq!(
        (claimed.id.as_str(), store.running_jobs().await.unwrap()),
        ("q1", vec![from_queue])
    );
    assert!(store.heartbeat("q1", &owner.host, at).await.unwrap());
}

/// A claimer passes over as many jobs as it was given back (a server
/// passes over every job its host cannot run, as many as are submitted):
/// 70,000 ids, past SQLite's most parameters of a statement (32766) and
/// PostgreSQL's (65535), and the claim takes the next job. Before, each id
/// was a parameter of its own and every claim failed past them: the
/// server claimed nothing more.
pub(crate) async fn a_claim_passes_over_more_jobs_than_a_statement_has_parameters(
    store: &dyn Store,
) {
    let a = host("alpha");
    let at = datetime!(2026-12-02 05:00:01 UTC);
    for (id, ticket, offset) in [("q1", "T-1", 0), ("q2", "T-2", 1)] {
        store
            .enqueue_job(&queued(id, ticket, offset), "{}", 0, None)
            .await
            .unwrap();
    }
    let mut skip: Vec<String> = (0..70_000).map(|i| format!("job-gone-{i}")).collect();
    skip.push("q1".to_owned());
    let claimed = store
        .claim_job(&[], &a, at, &skip)
        .await
        .map(|j| j.map(|j| j.id));
    assert_eq!(
        (
            claimed.map_err(|e| e.to_string()),
            store
                .claim_job(&[], &a, at, &skip)
                .await
                .map_err(|e| e.to_string())
        ),
        (Ok(Some("q2".to_owned())), Ok(None))
    );
}

/// Of the ids a server passed over, which are still queued jobs', read
/// at once: a running, a cancelled and an unknown job's are not, and
/// 70,000 ids (past either backend's most parameters of a statement: they
/// are one JSON array parameter) are read as one. Before, a server read
/// each passed-over job on its own every heartbeat interval.
pub(crate) async fn which_of_more_jobs_than_a_statement_has_parameters_are_still_queued(
    store: &dyn Store,
) {
    let at = datetime!(2026-12-02 05:00:01 UTC);
    for (id, ticket, offset) in [("q1", "T-1", 0), ("q2", "T-2", 1), ("q3", "T-3", 2)] {
        store
            .enqueue_job(&queued(id, ticket, offset), "{}", 0, None)
            .await
            .unwrap();
    }
    let claimed = store.claim_job(&[], &host("alpha"), at, &[]).await.unwrap();
    assert_eq!(claimed.map(|j| j.id), Some("q1".to_owned()));
    let mut cancelled = queued("q3", "T-3", 2);
    cancelled.status = JobStatus::Cancelled;
    store
        .finish_job(&cancelled, JobStatus::Queued)
        .await
        .unwrap();
    let mut ids: Vec<String> = (0..70_000).map(|i| format!("job-gone-{i}")).collect();
    ids.extend(["q1", "q2", "q3"].map(String::from));
    assert_eq!(
        (
            store.still_queued(&ids).await.map_err(|e| e.to_string()),
            store.still_queued(&[]).await.map_err(|e| e.to_string()),
        ),
        (Ok(vec!["q2".to_owned()]), Ok(vec![]))
    );
}

/// A job's first pass-over is kept whichever server passes it over
/// after (`pass_over` returns it), the last mark of a server able to run
/// it is the one kept, a job no longer queued takes no mark, and the
/// queued passed-over jobs are listed oldest first, as a lane takes them.
pub(crate) async fn a_passed_over_job_keeps_its_first_pass_and_the_last_able_mark(
    store: &dyn Store,
) {
    let (a, b) = (host("alpha"), host("beta"));
    let t0 = datetime!(2026-12-02 05:00:00 UTC);
    for (id, ticket, offset) in [("q1", "T-1", 0), ("q2", "T-2", 1), ("q3", "T-3", 2)] {
        store
            .enqueue_job(&queued(id, ticket, offset), "{}", 0, None)
            .await
            .unwrap();
    }
    let first = store.pass_over("q2", t0).await.unwrap();
    let again = store
        .pass_over("q2", t0 + time::Duration::minutes(5))
        .await
        .unwrap();
    store.pass_over("q1", t0).await.unwrap();
    assert!(store.mark_able("q2", &a, t0).await.unwrap());
    assert!(store
        .mark_able("q2", &b, t0 + time::Duration::minutes(1))
        .await
        .unwrap());
    let marked = store
        .pass_over("q2", t0 + time::Duration::minutes(9))
        .await
        .unwrap();
    let lane = |project: &str| crate::store::Lane {
        task_types: vec![],
        projects: vec![project.to_owned()],
    };
    let listed = (
        store.passed_over_queued(&[], 10).await.unwrap(),
        store.passed_over_queued(&[], 1).await.unwrap(),
        store
            .passed_over_queued(&[lane("acme/widgets")], 10)
            .await
            .unwrap(),
        store
            .passed_over_queued(&[lane("other")], 10)
            .await
            .unwrap(),
    );
    // Claimed: no longer queued, no mark, not listed.
    let claimed = store.claim_job(&[], &a, t0, &[]).await.unwrap();
    assert_eq!(claimed.map(|j| j.id), Some("q1".to_owned()));
    let after_claim = (
        store.mark_able("q1", &b, t0).await.unwrap(),
        store.passed_over_queued(&[], 10).await.unwrap(),
        store.pass_over("nope", t0).await.unwrap(),
    );
    let q2 =
        |able: Option<(Owner, OffsetDateTime)>| Some(crate::store::PassedOver { first: t0, able });
    assert_eq!(
        (first, again, marked, listed, after_claim),
        (
            q2(None),
            q2(None),
            q2(Some((b.clone(), t0 + time::Duration::minutes(1)))),
            (
                vec!["q1".to_owned(), "q2".to_owned()],
                vec!["q1".to_owned()],
                vec!["q1".to_owned(), "q2".to_owned()],
                vec![],
            ),
            (false, vec!["q2".to_owned()], None),
        )
    );
}

/// A claimer that may not run the job it claimed puts it back in the
/// queue with its reason (owner and heartbeat cleared), only while it is
/// running on that claimer and no cancel was asked of it; its claims pass
/// over the ids it skips, and the next claim (another server's) clears the
/// reason.
pub(crate) async fn a_claimer_puts_back_what_it_may_not_run_and_passes_it_over(store: &dyn Store) {
    let (a, b) = (host("alpha"), host("beta"));
    let at = datetime!(2026-12-02 05:00:01 UTC);
    for (id, ticket, offset) in [("q1", "T-1", 0), ("q2", "T-2", 1), ("q3", "T-3", 2)] {
        store
            .enqueue_job(&queued(id, ticket, offset), "{}", 0, None)
            .await
            .unwrap();
    }
    let first = store.claim_job(&[], &a, at, &[]).await.unwrap().unwrap();
    assert_eq!(first.id, "q1");
    // Not another host's, not an unknown job's.
    assert_eq!(
        (
            store.unclaim_job("q1", &b.host, "r").await.unwrap(),
            store.unclaim_job("nope", &a.host, "r").await.unwrap(),
        ),
        (false, false)
    );
    assert!(store
        .unclaim_job("q1", &a.host, "alpha may not")
        .await
        .unwrap());
    let mut put_back = queued("q1", "T-1", 0);
    put_back.reason = Some("alpha may not".into());
    assert_eq!(
        (
            store.job("q1").await.unwrap(),
            store.job_owner("q1").await.unwrap(),
            store.running_jobs().await.unwrap(),
            store.unclaim_job("q1", &a.host, "again").await.unwrap(),
        ),
        (Some(put_back), None, vec![], false)
    );
    // Passed over by the claimer that skips it, q2 next; then q3.
    let skip = vec!["q1".to_owned()];
    let next = store.claim_job(&[], &a, at, &skip).await.unwrap().unwrap();
    let after = store.claim_job(&[], &a, at, &skip).await.unwrap().unwrap();
    assert_eq!(
        (
            next.id.as_str(),
            after.id.as_str(),
            store.claim_job(&[], &a, at, &skip).await.unwrap()
        ),
        ("q2", "q3", None)
    );
    // Another claimer takes it, the reason cleared.
    let other = store.claim_job(&[], &b, at, &[]).await.unwrap().unwrap();
    assert_eq!((other.id.as_str(), other.reason), ("q1", None));
    // A cancel asked meanwhile: not put back.
    assert_eq!(
        store.request_cancel("q1", "gamma", at).await.unwrap(),
        Some(b.clone())
    );
    assert!(!store
        .unclaim_job("q1", &b.host, "beta may not")
        .await
        .unwrap());
    assert_eq!(
        store.job("q1").await.unwrap().map(|j| j.status),
        Some(JobStatus::Running)
    );
}

/// What a reclaim or an unclaim retried after its commit landed (its
/// answer lost) finds refused, and must take for its own
/// (`store/retry.rs`): the very record it wrote (its ledger totals summed
/// in the store), the job queued again with its very reason. Not before
/// it wrote, not another reaper's record, not another reason.
pub(crate) async fn retried_reclaims_and_unclaims_know_their_own_commit(store: &dyn Store) {
    use crate::store::retry::{reclaimed_already, unclaimed_already};
    let a = host("alpha");
    let t0 = datetime!(2026-12-02 05:00:00 UTC);
    let started = job("j1", 0);
    store
        .insert_owned_job(&started, "{}", &a, t0)
        .await
        .unwrap();
    store.insert_model_call(&model_call("j1", 1)).await.unwrap();
    let last = EventBody::Status {
        phase: Phase::Failed,
        detail: Some("reclaimed".into()),
    };
    let mut failed = started.clone();
    failed.status = JobStatus::Failed;
    failed.reason = Some("host alpha stopped renewing".into());
    failed.finished_at = Some(t0 + time::Duration::seconds(90));
    let mut others = failed.clone();
    others.finished_at = Some(t0 + time::Duration::seconds(91));
    let before = reclaimed_already(store, &failed).await;
    assert!(store
        .reclaim_job(&reclaim(&failed, &a.host, t0, &last))
        .await
        .unwrap());
    assert_eq!(
        (
            before,
            reclaimed_already(store, &failed).await,
            reclaimed_already(store, &others).await,
            store.job("j1").await.unwrap().unwrap().model_calls,
        ),
        (false, true, false, 1)
    );

    store
        .enqueue_job(&queued("q1", "T-1", 0), "{}", 0, None)
        .await
        .unwrap();
    let claimed = store.claim_job(&[], &a, t0, &[]).await.unwrap().unwrap();
    let before = unclaimed_already(store, "q1", "not here").await;
    assert!(store
        .unclaim_job(&claimed.id, &a.host, "not here")
        .await
        .unwrap());
    assert_eq!(
        (
            before,
            unclaimed_already(store, "q1", "not here").await,
            unclaimed_already(store, "q1", "elsewhere").await,
        ),
        (false, true, false)
    );
}

/// Reclaiming overwrites a running job only while its owner and heartbeat
/// are what the reaper saw: not with another heartbeat (the owner
/// renewed), not another host's, not twice; afterwards the owner's renewal
/// and finish are refused and the reclaimed record stays. The final event
/// goes in with the reclaim that succeeds, after the owner's events, and
/// with no refused one.
pub(crate) async fn reclaiming_is_a_compare_and_set_on_owner_and_heartbeat(store: &dyn Store) {
    let (a, b) = (host("alpha"), host("beta"));
    let t0 = datetime!(2026-12-02 05:00:00 UTC);
    let t1 = t0 + time::Duration::seconds(10);
    let started = job("j1", 0);
    store
        .insert_owned_job(&started, "{}", &a, t0)
        .await
        .unwrap();
    let owners = event(
        "j1",
        1,
        EventBody::Status {
            phase: Phase::Launching,
            detail: None,
        },
    );
    store.append_event(&owners).await.unwrap();
    let last = EventBody::Status {
        phase: Phase::Failed,
        detail: Some("reclaimed".into()),
    };
    let mut failed = started.clone();
    failed.status = JobStatus::Failed;
    failed.reason = Some("host alpha stopped renewing".into());
    failed.finished_at = Some(t1);
    assert!(!store
        .reclaim_job(&reclaim(&failed, &b.host, t0, &last))
        .await
        .unwrap());
    assert!(!store
        .reclaim_job(&reclaim(&failed, &a.host, t1, &last))
        .await
        .unwrap());
    assert!(store.heartbeat("j1", &a.host, t1).await.unwrap());
    assert!(!store
        .reclaim_job(&reclaim(&failed, &a.host, t0, &last))
        .await
        .unwrap());
    assert_eq!(store.job("j1").await.unwrap(), Some(started.clone()));
    assert_eq!(store.events("j1", 0).await.unwrap(), vec![owners.clone()]);
    assert!(store
        .reclaim_job(&reclaim(&failed, &a.host, t1, &last))
        .await
        .unwrap());
    assert!(!store
        .reclaim_job(&reclaim(&failed, &a.host, t1, &last))
        .await
        .unwrap());
    assert!(!store.heartbeat("j1", &a.host, t1).await.unwrap());
    let mut done = started.clone();
    done.status = JobStatus::Done;
    let late = store
        .finish_job(&done, JobStatus::Running)
        .await
        .unwrap_err();
    assert_eq!(
        (
            late.to_string(),
            store.job("j1").await.unwrap(),
            running_ids(store).await
        ),
        (
            "job j1 is failed in the store, not running: another process finished it".to_owned(),
            Some(failed),
            Vec::<String>::new()
        )
    );
    assert_eq!(
        store.events("j1", 0).await.unwrap(),
        vec![
            owners,
            AgentEvent {
                job_id: "j1".into(),
                seq: 2,
                at: t1,
                body: last,
            }
        ]
    );
}

/// Reapers racing to reclaim one stale job: exactly one wins.
pub(crate) async fn of_concurrent_reclaimers_exactly_one_wins(store: &dyn Store) {
    let a = host("alpha");
    let t0 = datetime!(2026-12-02 05:00:00 UTC);
    store
        .insert_owned_job(&job("j1", 0), "{}", &a, t0)
        .await
        .unwrap();
    let reclaimers = (0..8).map(|i| {
        let host = a.host.clone();
        let mut failed = job("j1", 0);
        failed.status = JobStatus::Failed;
        failed.reason = Some(format!("reclaimed by reaper {i}"));
        let last = EventBody::Status {
            phase: Phase::Failed,
            detail: failed.reason.clone(),
        };
        async move {
            store
                .reclaim_job(&reclaim(&failed, &host, t0, &last))
                .await
                .unwrap()
                .then_some(i)
        }
    });
    let won: Vec<usize> = futures::future::join_all(reclaimers)
        .await
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(won.len(), 1, "{won:?}");
    let reason = format!("reclaimed by reaper {}", won[0]);
    assert_eq!(
        store.job("j1").await.unwrap().unwrap().reason,
        Some(reason.clone())
    );
    // One final event, the winner's.
    let events = store.events("j1", 0).await.unwrap();
    assert_eq!(
        events.iter().map(|e| (e.seq, &e.body)).collect::<Vec<_>>(),
        vec![(
            1,
            &EventBody::Status {
                phase: Phase::Failed,
                detail: Some(reason)
            }
        )]
    );
}

/// A reclaim that saw no cancel request is refused once one is recorded
/// (the request a dead owner never read is not lost), and nothing is
/// written; one that saw it holds, and the request stays as recorded.
pub(crate) async fn a_reclaim_holds_only_on_the_cancel_request_it_saw(store: &dyn Store) {
    let a = host("alpha");
    let t0 = datetime!(2026-12-02 05:00:00 UTC);
    let t1 = t0 + time::Duration::seconds(30);
    let started = job("j1", 0);
    store
        .insert_owned_job(&started, "{}", &a, t0)
        .await
        .unwrap();
    assert_eq!(
        store.request_cancel("j1", "beta", t1).await.unwrap(),
        Some(a.clone())
    );
    let mut failed = started.clone();
    failed.status = JobStatus::Failed;
    failed.finished_at = Some(t1);
    let last = EventBody::Status {
        phase: Phase::Failed,
        detail: None,
    };
    assert!(!store
        .reclaim_job(&reclaim(&failed, &a.host, t0, &last))
        .await
        .unwrap());
    assert_eq!(
        (
            store.job("j1").await.unwrap(),
            store.events("j1", 0).await.unwrap()
        ),
        (Some(started.clone()), Vec::new())
    );
    let mut cancelled = started.clone();
    cancelled.status = JobStatus::Cancelled;
    cancelled.reason = Some("cancelled: asked by beta".into());
    cancelled.finished_at = Some(t1);
    let last = EventBody::Status {
        phase: Phase::Cancelled,
        detail: cancelled.reason.clone(),
    };
    assert!(store
        .reclaim_job(&Reclaim {
            cancel_asked: true,
            ..reclaim(&cancelled, &a.host, t0, &last)
        })
        .await
        .unwrap());
    assert_eq!(
        (
            store.job("j1").await.unwrap(),
            store.events("j1", 0).await.unwrap(),
            store.cancel_requested("j1").await.unwrap()
        ),
        (
            Some(cancelled),
            vec![AgentEvent {
                job_id: "j1".into(),
                seq: 1,
                at: t1,
                body: last,
            }],
            Some(CancelRequest {
                at: t1,
                by: "beta".into()
            })
        )
    );
}

/// A reclaim is one transaction: when a step fails after the
/// compare-and-set (here its next attempt's insert: the id is taken; a
/// reaper killed there is the same), nothing of it is stored, the job
/// runs on for the next reaper; the reclaim that succeeds stores the
/// final record with its totals from the ledger, its final event, its
/// calls in flight interrupted and its next attempt queued with its
/// priority.
pub(crate) async fn a_reclaim_is_all_or_nothing_with_its_next_attempt(store: &dyn Store) {
    let a = host("alpha");
    let t0 = datetime!(2026-12-02 05:00:00 UTC);
    let t1 = t0 + time::Duration::seconds(30);
    store
        .enqueue_job(&queued("q1", "T-1", 0), "{\"spec\":1}", 7, None)
        .await
        .unwrap();
    let claimed = store.claim_job(&[], &a, t0, &[]).await.unwrap().unwrap();
    let ended = paddock_protocol::JobRecord {
        status: JobStatus::Done,
        ..job("taken", 10)
    };
    store.insert_job(&ended, "{}").await.unwrap();
    let done = model_call("q1", 1);
    let mut open = model_call("q1", 2);
    open.status = CallStatus::InFlight;
    open.cost_micros = 500;
    store.insert_model_call(&done).await.unwrap();
    store.insert_model_call(&open).await.unwrap();
    let mut failed = claimed.clone();
    failed.status = JobStatus::Failed;
    failed.reason = Some("its host died; queued again".into());
    failed.finished_at = Some(t1);
    let last = EventBody::Status {
        phase: Phase::Failed,
        detail: Some("its host died".into()),
    };
    let mut taken = queued("taken", "T-1", 20);
    taken.attempt = 2;
    let next = paddock_protocol::JobRecord {
        id: "q2".into(),
        ..taken.clone()
    };
    let follows = crate::store::Follows {
        job: "q0".into(),
        ended: None,
        closed: Some(
            "its pull request https://forge/pr/1 was closed on the forge without being merged"
                .into(),
        ),
    };
    let with_next = |next| Reclaim {
        next: Some(NextAttempt {
            job: next,
            spec_json: "{\"spec\":2}",
            priority: 7,
            follows: Some(&follows),
        }),
        ..reclaim(&failed, &a.host, t0, &last)
    };
    let err = store.reclaim_job(&with_next(&taken)).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::JobExists { job_id } if job_id == "taken"),
        "{err}"
    );
    let from_queue = RunningJob {
        queued: Some(7),
        ..running("q1", Some((&a, t0)))
    };
    assert_eq!(
        (
            store.job("q1").await.unwrap(),
            store.events("q1", 0).await.unwrap(),
            store.model_calls("q1").await.unwrap(),
            store.running_jobs().await.unwrap(),
            store.queue_depth().await.unwrap()
        ),
        (
            Some(claimed.clone()),
            Vec::new(),
            vec![done.clone(), open.clone()],
            vec![from_queue],
            0
        )
    );
    assert!(store.reclaim_job(&with_next(&next)).await.unwrap());
    let mut interrupted = open.clone();
    interrupted.status = CallStatus::Interrupted;
    interrupted.error = Some("its host died".into());
    let mut whole = failed.clone();
    whole.model_calls = 2;
    whole.cost_micros = done.cost_micros + open.cost_micros;
    whole.tokens = done.tokens;
    whole.tokens.add(&open.tokens);
    assert_eq!(
        (
            store.job("q1").await.unwrap(),
            store.events("q1", 0).await.unwrap(),
            store.model_calls("q1").await.unwrap(),
        ),
        (
            Some(whole),
            vec![AgentEvent {
                job_id: "q1".into(),
                seq: 1,
                at: t1,
                body: last.clone(),
            }],
            vec![done, interrupted],
        )
    );
    assert_eq!(
        (
            store.job("q2").await.unwrap(),
            store.job_spec("q2").await.unwrap().as_deref(),
            store.job_follows("q2").await.unwrap(),
        ),
        (
            Some(next.clone()),
            Some("{\"spec\":2}"),
            Some(follows.clone())
        )
    );
    let b = host("beta");
    let again = store.claim_job(&[], &b, t1, &[]).await.unwrap().unwrap();
    assert_eq!(
        (again.id.as_str(), store.running_jobs().await.unwrap()),
        (
            "q2",
            vec![RunningJob {
                queued: Some(7),
                ..running("q2", Some((&b, t1)))
            }]
        )
    );
}

/// A cancel recorded of a running job is announced to the store's
/// subscribers (`cancel_notices`), the job's id, at once; a request that
/// records nothing (the job queued) announces nothing.
pub(crate) async fn a_cancel_asked_is_announced_to_the_subscribers(store: &dyn Store) {
    let a = host("alpha");
    let at = datetime!(2026-12-02 05:00:01 UTC);
    for (id, ticket) in [("q1", "T-1"), ("q2", "T-2")] {
        store
            .enqueue_job(&queued(id, ticket, 0), "{}", 0, None)
            .await
            .unwrap();
    }
    let claimed = store.claim_job(&[], &a, at, &[]).await.unwrap().unwrap();
    let queued_id = if claimed.id == "q1" { "q2" } else { "q1" };
    let mut notices = store.cancel_notices().await;
    assert_eq!(
        store.request_cancel(queued_id, "beta", at).await.unwrap(),
        None
    );
    assert_eq!(
        store.request_cancel(&claimed.id, "beta", at).await.unwrap(),
        Some(a.clone())
    );
    let first = tokio::time::timeout(std::time::Duration::from_secs(60), notices.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first, claimed.id);
}

/// Reapers racing to reclaim one stale job from the queue, each with a
/// next attempt of its own: exactly one next attempt is queued, the
/// winner's.
pub(crate) async fn of_concurrent_reclaimers_one_queues_the_next_attempt(store: &dyn Store) {
    let a = host("alpha");
    let t0 = datetime!(2026-12-02 05:00:00 UTC);
    store
        .enqueue_job(&queued("q1", "T-1", 0), "{}", 3, None)
        .await
        .unwrap();
    let claimed = store.claim_job(&[], &a, t0, &[]).await.unwrap().unwrap();
    let reclaimers = (0..8).map(|i| {
        let host = a.host.clone();
        let mut failed = claimed.clone();
        failed.status = JobStatus::Failed;
        failed.reason = Some(format!("queued again as next-{i}"));
        let mut next = queued(&format!("next-{i}"), "T-1", 100);
        next.attempt = 2;
        let last = EventBody::Status {
            phase: Phase::Failed,
            detail: failed.reason.clone(),
        };
        async move {
            let reclaim = Reclaim {
                next: Some(NextAttempt {
                    job: &next,
                    spec_json: "{}",
                    priority: 3,
                    follows: None,
                }),
                ..reclaim(&failed, &host, t0, &last)
            };
            store.reclaim_job(&reclaim).await.unwrap().then_some(i)
        }
    });
    let won: Vec<usize> = futures::future::join_all(reclaimers)
        .await
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(won.len(), 1, "{won:?}");
    let queue: Vec<String> = claim_all(store).await;
    assert_eq!(
        (
            queue,
            store.job("q1").await.unwrap().unwrap().reason,
            store.events("q1", 0).await.unwrap().len()
        ),
        (
            vec![format!("next-{}", won[0])],
            Some(format!("queued again as next-{}", won[0])),
            1
        )
    );
}

/// A cancel asked from another process is recorded only on a running job
/// with an owner, which it names; the first request's time is kept; a
/// queued, ended, ownerless or unknown job takes none.
pub(crate) async fn a_cancel_is_requested_only_of_a_running_job_with_an_owner(store: &dyn Store) {
    let a = host("alpha");
    let t0 = datetime!(2026-12-02 05:00:00 UTC);
    ownerless_owned_and_queued(store, &a, t0).await;
    assert_eq!(store.cancel_requested("j1").await.unwrap(), None);
    let asked = [
        store.request_cancel("j1", "beta", t0).await.unwrap(),
        store.request_cancel("j1", "gamma", t0).await.unwrap(),
        store.request_cancel("q1", "beta", t0).await.unwrap(),
        store.request_cancel("old", "beta", t0).await.unwrap(),
        store.request_cancel("nope", "beta", t0).await.unwrap(),
    ];
    assert_eq!(asked, [Some(a.clone()), Some(a.clone()), None, None, None]);
    let flags = [
        store.cancel_requested("j1").await.unwrap(),
        store.cancel_requested("q1").await.unwrap(),
        store.cancel_requested("old").await.unwrap(),
    ];
    let first = CancelRequest {
        at: t0,
        by: "beta".into(),
    };
    assert_eq!(flags, [Some(first), None, None]);
    let err = store.cancel_requested("nope").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        StoreError::NoSuchJob {
            job_id: "nope".into()
        }
        .to_string()
    );
    // Renewals go on while the job stops; once ended, no request takes.
    assert!(store.heartbeat("j1", &a.host, t0).await.unwrap());
    let mut done = job("j1", 10);
    done.status = JobStatus::Cancelled;
    store.finish_job(&done, JobStatus::Running).await.unwrap();
    assert_eq!(store.request_cancel("j1", "beta", t0).await.unwrap(), None);
}

/// Records `old` (running, recorded before jobs had owners), `j1`
/// (running on `a`, its heartbeat `t0`) and the queued `q1`.
async fn ownerless_owned_and_queued(store: &dyn Store, a: &Owner, t0: OffsetDateTime) {
    store.insert_job(&job("old", 0), "{}").await.unwrap();
    store
        .insert_owned_job(&job("j1", 10), "{}", a, t0)
        .await
        .unwrap();
    store
        .enqueue_job(&queued("q1", "T-1", 20), "{}", 0, None)
        .await
        .unwrap();
}

/// A job's standing (status, owner, cancel request) is read as one row,
/// each part as `job`, `job_owner` and `cancel_requested` give it; no job,
/// no standing.
pub(crate) async fn a_claim_standing_is_status_owner_and_cancel_request(store: &dyn Store) {
    let a = host("alpha");
    let t0 = datetime!(2026-12-02 05:00:00 UTC);
    ownerless_owned_and_queued(store, &a, t0).await;
    store
        .insert_owned_job(&job("j2", 30), "{}", &a, t0)
        .await
        .unwrap();
    store.request_cancel("j2", "beta", t0).await.unwrap();
    let mut standings = Vec::new();
    for id in ["old", "j1", "j2", "q1", "nope"] {
        standings.push(store.claim_standing(id).await.unwrap());
    }
    assert_eq!(
        standings,
        [
            Some(ClaimStanding {
                // Recorded running by an old process, before owners.
                status: JobStatus::Running,
                owner: None,
                cancel: None,
            }),
            Some(ClaimStanding {
                status: JobStatus::Running,
                owner: Some(a.clone()),
                cancel: None,
            }),
            Some(ClaimStanding {
                status: JobStatus::Running,
                owner: Some(a),
                cancel: Some(CancelRequest {
                    at: t0,
                    by: "beta".into(),
                }),
            }),
            Some(ClaimStanding {
                status: JobStatus::Queued,
                owner: None,
                cancel: None,
            }),
            None,
        ]
    );
}

/// The owners of the newest jobs, as `jobs` lists them: those that have
/// one (run by their own process, or claimed), not a queued or ownerless
/// job, not a job past the limit; and one job's owner the same way.
pub(crate) async fn the_newest_jobs_owners_are_listed(store: &dyn Store) {
    let (a, b) = (host("alpha"), host("beta"));
    let at = datetime!(2026-12-02 05:00:00 UTC);
    store
        .insert_owned_job(&job("j0", 0), "{}", &a, at)
        .await
        .unwrap();
    store.insert_job(&job("old", 10), "{}").await.unwrap();
    store
        .enqueue_job(&queued("q1", "T-1", 20), "{}", 0, None)
        .await
        .unwrap();
    store
        .enqueue_job(&queued("q2", "T-2", 30), "{}", 0, None)
        .await
        .unwrap();
    store
        .insert_owned_job(&job("j1", 40), "{}", &a, at)
        .await
        .unwrap();
    let claimed = store.claim_job(&[], &b, at, &[]).await.unwrap().unwrap();
    assert_eq!(claimed.id, "q1");
    assert_eq!(
        store.job_owners(4).await.unwrap(),
        vec![("j1".to_owned(), a.clone()), ("q1".to_owned(), b.clone())]
    );
    // One job's owner, the same way.
    let mut owners = Vec::new();
    for id in ["j0", "old", "q1", "q2", "nope"] {
        owners.push(store.job_owner(id).await.unwrap());
    }
    assert_eq!(owners, [Some(a), None, Some(b), None, None]);
}

//! Test values for the store's tests: a fully populated job, events and model
//! calls, each with non-trivial timestamps (sub-second, non-UTC offsets) so
//! round trips exercise the timestamp encoding.

use paddock_protocol::event::{AgentEvent, EventBody, TokenUsage};
use paddock_protocol::job::{JobRecord, JobStatus};
use paddock_protocol::ledger::{CallStatus, ModelCall};
use time::macros::datetime;
use time::{Duration, OffsetDateTime};

/// A base instant in a non-UTC offset, with nanoseconds.
pub(crate) fn base_time() -> OffsetDateTime {
    datetime!(2025-06-01 12:30:45.123456789 +02:00)
}

/// A running job created `offset_ms` milliseconds after `base_time()`.
pub(crate) fn job(id: &str, offset_ms: i64) -> JobRecord {
    JobRecord {
        id: id.to_owned(),
        ticket_id: format!("T-{id}"),
        project: "acme/widgets".to_owned(),
        attempt: 1,
        engine: "codex".to_owned(),
        model: "gpt-5-codex".to_owned(),
        isolation: "sandbox".to_owned(),
        status: JobStatus::Running,
        reason: None,
        branch: format!("paddock/{id}"),
        base_ref: "main".to_owned(),
        patch_path: None,
        changed_files: Vec::new(),
        tokens: TokenUsage::default(),
        model_calls: 0,
        cost_micros: 0,
        engine_exit_code: None,
        created_at: base_time() + Duration::milliseconds(offset_ms),
        finished_at: None,
        duration_ms: None,
        disposed_at: None,
    }
}

pub(crate) fn event(job_id: &str, seq: u64, body: EventBody) -> AgentEvent {
    AgentEvent {
        job_id: job_id.to_owned(),
        seq,
        at: base_time() + Duration::milliseconds(i64::try_from(seq).unwrap_or(0)),
        body,
    }
}

pub(crate) fn model_call(job_id: &str, seq: u64) -> ModelCall {
    ModelCall {
        job_id: job_id.to_owned(),
        attempt: 2,
        seq,
        provider: "openai".to_owned(),
        requested_model: "gpt-5-codex".to_owned(),
        served_model: Some("gpt-5-codex-2025-09-15".to_owned()),
        tokens: TokenUsage {
            input_tokens: 1200,
            cached_input_tokens: 3400,
            cache_write_tokens: 56,
            output_tokens: 789,
            reasoning_tokens: 321,
        },
        ttft_ms: Some(412),
        duration_ms: 5_310,
        status: CallStatus::Ok,
        http_status: Some(200),
        error: None,
        estimated: false,
        price_version: "2025-09".to_owned(),
        cost_micros: 12_345,
        started_at: base_time() + Duration::seconds(i64::try_from(seq).unwrap_or(0)),
    }
}

/// A refused egress attempt to `host` in the agent phase.
pub(crate) fn egress_attempt(host: &str) -> paddock_protocol::EgressRecord {
    paddock_protocol::EgressRecord {
        host: host.to_owned(),
        port: 443,
        method: None,
        address: None,
        bytes_up: 0,
        bytes_down: 0,
        duration_ms: 1,
        phase: paddock_protocol::EgressPhase::Agent,
        allowed: false,
        rule: Some("allowlist".to_owned()),
        reason: Some("not on the allowlist".to_owned()),
        credential: None,
        substituted: None,
    }
}

/// What a store migrated past egress attempts without seqs holds: the
/// attempts `j1`: a, b, c and `j2`: x (stored in the order a, x, b, c)
/// numbered per job in insertion order (`rows`: job, seq, host by id), the
/// next attempt at the next seq, a taken seq refused as `EgressConflict`
/// naming the last. Each backend's migration test (SQLite 0030,
/// PostgreSQL 0009) ends with it.
pub(crate) async fn pre_seq_egress_numbered(
    store: &dyn crate::store::Store,
    rows: Vec<(String, i64, String)>,
) {
    let want = [
        ("j1", 1, "a"),
        ("j2", 1, "x"),
        ("j1", 2, "b"),
        ("j1", 3, "c"),
    ];
    assert_eq!(
        rows,
        want.map(|(j, s, h)| (j.to_owned(), s, h.to_owned()))
            .to_vec()
    );
    store
        .record_egress("j1", 4, &egress_attempt("d"))
        .await
        .unwrap();
    let err = store
        .record_egress("j2", 1, &egress_attempt("y"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, crate::store::StoreError::EgressConflict { job_id, seq: 1, last: 1 } if job_id == "j2"),
        "{err:?}"
    );
    let hosts = |rs: Vec<paddock_protocol::EgressRecord>| {
        rs.into_iter().map(|r| r.host).collect::<Vec<_>>()
    };
    assert_eq!(
        (
            hosts(store.egress("j1").await.unwrap()),
            hosts(store.egress("j2").await.unwrap())
        ),
        (
            vec![
                "a".to_owned(),
                "b".to_owned(),
                "c".to_owned(),
                "d".to_owned()
            ],
            vec!["x".to_owned()]
        )
    );
}

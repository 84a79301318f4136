//! A call's settled row the broker could not write (the store failed at
//! that moment) is written by the runner, so the ledger keeps the call's
//! own figures, not the estimate its row was written ahead with; when that
//! write fails too, an `error` event names the call and both failures.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use paddock_protocol::{CallStatus, EventBody};

use super::*;

/// The hello scenario's one call (1000 tokens in, 200 out) through a store
/// whose next `fails` settlings fail; the job's record, its one ledger
/// row's status, tokens and error, and its `ledger` error events.
async fn one_call(
    fails: usize,
) -> (
    JobStatus,
    (CallStatus, u64, u64, Option<String>),
    Vec<String>,
) {
    let host = Host::new().await;
    std::fs::write(
        host.root().join("scenario.toml"),
        "[[turn]]\ntext = \"hi\"\nusage = { input = 1000, output = 200 }\n",
    )
    .unwrap();
    let rung = Arc::new(FakeRung::new(FakeEngine {
        stdout: DONE.iter().map(|s| s.to_string()).collect(),
        calls: vec![r#"{"model":"gpt-5.5","input":"hi","stream":true}"#.to_string()],
        ..FakeEngine::default()
    }));
    let store: SharedStore = Arc::new(FailingStore {
        inner: host.store.clone(),
        fails: |_| false,
        linger: std::time::Duration::ZERO,
        reaps: None,
        settle_fails: AtomicUsize::new(fails),
        hold: None,
    });
    let runner = host.runner_with(store, rung);
    let (result, _) = run(&runner, &host.spec()).await;
    let record = result.unwrap().record;
    let rows = host.store.model_calls(&record.id).await.unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    let events = host.store.events(&record.id, 0).await.unwrap();
    let ledger_errors = events
        .into_iter()
        .filter_map(|e| match e.body {
            EventBody::Error {
                message,
                source: Some(source),
                ..
            } if source == "ledger" => Some(message.replace(&record.id, "JOB")),
            _ => None,
        })
        .collect();
    (
        record.status,
        (
            row.status,
            row.tokens.input_tokens,
            row.tokens.output_tokens,
            row.error.clone(),
        ),
        ledger_errors,
    )
}

#[tokio::test]
async fn a_settled_row_the_broker_could_not_write_is_written_by_the_runner() {
    assert_eq!(
        one_call(1).await,
        (JobStatus::Done, (CallStatus::Ok, 1000, 200, None), vec![])
    );
}

#[tokio::test]
async fn a_settled_row_written_by_neither_is_an_error_event_naming_the_call() {
    let (status, (call_status, _, _, error), events) = one_call(2).await;
    let full = std::io::Error::from(std::io::ErrorKind::StorageFull);
    assert_eq!(
        (status, call_status, error.as_deref(), events),
        (
            JobStatus::Done,
            CallStatus::Interrupted,
            Some(crate::runner::teardown::INTERRUPTED_AT_END),
            vec![format!(
                "model call 1: its settled row is not on the ledger (write model call 1 of job \
                 JOB to the ledger: cannot insert model call 1 of job JOB: error communicating \
                 with database: {full}; written again: cannot insert model call 1 of job JOB: \
                 error communicating with database: {full}); it keeps the estimate it was \
                 written ahead with and is settled `interrupted` at the job's end"
            )]
        )
    );
}

//! Webhooks against real loopback receivers (axum): one that fails N
//! times then accepts and checks every signature, one that hangs, one
//! that redirects; the waits between attempts on a test clock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use axum::Router;
use paddock_protocol::JobStatus;
use time::macros::datetime;

use super::*;
use crate::store::fixtures::job;
use crate::store::SqliteStore;

const NOW: OffsetDateTime = datetime!(2026-12-01 03:30:00 UTC);

/// A clock that stands still at `NOW` and records the waits asked of it.
#[derive(Debug, Default)]
struct TestClock {
    waits: Mutex<Vec<Duration>>,
}

#[async_trait::async_trait]
impl Clock for TestClock {
    fn now(&self) -> OffsetDateTime {
        NOW
    }
    async fn sleep(&self, wait: Duration) {
        self.waits.lock().unwrap().push(wait);
    }
}

/// One request a receiver saw: its signature check and body.
type Check = (Result<(), VerifyError>, Vec<u8>);

/// What a receiver saw.
#[derive(Debug, Default)]
struct Receiver {
    fail_first: usize,
    seen: AtomicUsize,
    checks: Mutex<Vec<Check>>,
}

fn secret() -> Secret {
    Secret::new("whsec-test-shared".into())
}

async fn receive(State(rx): State<Arc<Receiver>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let header = headers
        .get(SIGNATURE_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let check = verify(&secret(), header, &body, NOW.unix_timestamp(), 300);
    rx.checks.lock().unwrap().push((check, body.to_vec()));
    if rx.seen.fetch_add(1, Ordering::SeqCst) < rx.fail_first {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::NO_CONTENT
    }
}

async fn hang() -> StatusCode {
    std::future::pending::<()>().await;
    StatusCode::OK
}

async fn redirect(State(rx): State<Arc<Receiver>>) -> impl IntoResponse {
    rx.seen.fetch_add(1, Ordering::SeqCst);
    (StatusCode::FOUND, [("location", "/accept")])
}

/// A redirect whose `Location` is 100,001 bytes.
async fn redirect_far() -> impl IntoResponse {
    (
        StatusCode::FOUND,
        [("location", format!("/{}", "a".repeat(100_000)))],
    )
}

/// A receiver on loopback: `/hook` fails `fail_first` times, then
/// accepts; `/hang` never answers; `/redirect` redirects to `/accept`
/// (which counts in `seen` too).
async fn receiver(fail_first: usize) -> (String, Arc<Receiver>) {
    let rx = Arc::new(Receiver {
        fail_first,
        ..Receiver::default()
    });
    let app = Router::new()
        .route("/hook", post(receive))
        .route("/accept", post(receive))
        .route("/hang", post(hang))
        .route("/redirect", post(redirect))
        .route("/redirect-far", post(redirect_far))
        .with_state(rx.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), rx)
}

/// Webhooks to `url` over a fresh store holding job `j1`.
async fn webhooks(
    url: &str,
    config: impl FnOnce(&mut WebhookConfig),
) -> (Webhooks, Arc<TestClock>, SharedStore, JobRecord) {
    let store: SharedStore = Arc::new(SqliteStore::open_in_memory().await.unwrap());
    let record = job("j1", 0);
    store.insert_job(&record, "{}").await.unwrap();
    let mut c = WebhookConfig::new(Some(url.to_owned()), secret());
    config(&mut c);
    let clock = Arc::new(TestClock::default());
    let hooks = Webhooks::with_clock(c, store.clone(), clock.clone()).unwrap();
    (hooks, clock, store, record)
}

/// Waits for every delivery `send_owed` started.
async fn sent(tasks: Vec<tokio::task::JoinHandle<()>>) -> usize {
    let n = tasks.len();
    for t in tasks {
        t.await.unwrap();
    }
    n
}

fn attempt(url: &str, n: u32, status: Option<u16>, error: Option<&str>) -> WebhookAttempt {
    WebhookAttempt {
        job_id: "j1".into(),
        url: url.to_owned(),
        attempt: n,
        at: NOW,
        delivered: error.is_none(),
        http_status: status,
        error: error.map(String::from),
    }
}

#[tokio::test]
async fn a_receiver_failing_twice_gets_the_signed_record_on_the_third_attempt() {
    let (base, rx) = receiver(2).await;
    let url = format!("{base}/hook");
    let (hooks, clock, store, record) = webhooks(&url, |_| {}).await;
    assert!(hooks.deliver(&url, &record).await.unwrap());
    let failed = Some("the receiver answered 500 Internal Server Error");
    assert_eq!(
        store.webhook_attempts("j1").await.unwrap(),
        vec![
            attempt(&url, 1, Some(500), failed),
            attempt(&url, 2, Some(500), failed),
            attempt(&url, 3, Some(204), None),
        ]
    );
    assert_eq!(
        *clock.waits.lock().unwrap(),
        vec![Duration::from_secs(1), Duration::from_secs(2)]
    );
    let body = serde_json::to_vec(&record).unwrap();
    assert_eq!(
        *rx.checks.lock().unwrap(),
        vec![
            (Ok(()), body.clone()),
            (Ok(()), body.clone()),
            (Ok(()), body)
        ]
    );
}

#[tokio::test]
async fn attempts_stop_at_the_limit_with_capped_backoff() {
    let (base, rx) = receiver(usize::MAX).await;
    let url = format!("{base}/hook");
    let (hooks, clock, store, record) = webhooks(&url, |c| {
        c.max_attempts = 4;
        c.max_backoff = Duration::from_secs(3);
    })
    .await;
    assert!(!hooks.deliver(&url, &record).await.unwrap());
    assert_eq!(
        (
            store.webhook_attempts("j1").await.unwrap().len(),
            rx.seen.load(Ordering::SeqCst),
            clock.waits.lock().unwrap().clone(),
        ),
        (
            4,
            4,
            vec![
                Duration::from_secs(1),
                Duration::from_secs(2),
                Duration::from_secs(3)
            ]
        )
    );
}

#[tokio::test]
async fn a_hanging_receiver_is_cut_by_the_timeout() {
    let (base, _rx) = receiver(0).await;
    let url = format!("{base}/hang");
    let (hooks, _clock, store, record) = webhooks(&url, |c| {
        c.max_attempts = 1;
        c.timeout = Duration::from_millis(300);
    })
    .await;
    let started = std::time::Instant::now();
    assert!(!hooks.deliver(&url, &record).await.unwrap());
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        store.webhook_attempts("j1").await.unwrap(),
        vec![attempt(&url, 1, None, Some("no answer within 300ms"))]
    );
}

#[tokio::test]
async fn a_redirect_is_not_followed() {
    let (base, rx) = receiver(0).await;
    let url = format!("{base}/redirect");
    let (hooks, _clock, store, record) = webhooks(&url, |c| c.max_attempts = 1).await;
    assert!(!hooks.deliver(&url, &record).await.unwrap());
    assert_eq!(
        (
            store.webhook_attempts("j1").await.unwrap(),
            rx.seen.load(Ordering::SeqCst),
            rx.checks.lock().unwrap().len(),
        ),
        (
            vec![attempt(
                &url,
                1,
                Some(302),
                Some("the receiver answered 302 Found, a redirect to /accept (not followed)")
            )],
            1,
            0
        )
    );
}

/// A receiver's `Location` is its text: the attempt's error (a store row
/// per attempt) names its first 1,000 bytes, not all 100 KB of it.
#[tokio::test]
async fn a_redirects_long_location_is_named_to_its_bound() {
    let (base, _rx) = receiver(0).await;
    let url = format!("{base}/redirect-far");
    let (hooks, _clock, store, record) = webhooks(&url, |c| c.max_attempts = 1).await;
    assert!(!hooks.deliver(&url, &record).await.unwrap());
    let error = format!(
        "the receiver answered 302 Found, a redirect to /{}…[truncated by paddock: 100001 bytes] \
         (not followed)",
        "a".repeat(999)
    );
    assert_eq!(
        store.webhook_attempts("j1").await.unwrap(),
        vec![attempt(&url, 1, Some(302), Some(&error))]
    );
}

#[test]
fn signatures_verify_only_with_the_secret_body_and_a_fresh_time() {
    let body = br#"{"id":"j1"}"#;
    let t = NOW.unix_timestamp();
    let header = sign(&secret(), t, body);
    let other = Secret::new("another-secret".into());
    assert_eq!(
        (
            verify(&secret(), &header, body, t + 10, 300),
            verify(&other, &header, body, t, 300),
            verify(&secret(), &header, br#"{"id":"j2"}"#, t, 300),
            verify(&secret(), &header, body, t + 301, 300),
            verify(&secret(), "v1=00", body, t, 300),
            verify(&secret(), &format!("t={t},v1=zz"), body, t, 300),
        ),
        (
            Ok(()),
            Err(VerifyError::Mismatch),
            Err(VerifyError::Mismatch),
            Err(VerifyError::Stale {
                age_secs: 301,
                tolerance_secs: 300
            }),
            Err(VerifyError::Malformed),
            Err(VerifyError::Malformed),
        )
    );
    // The header is HMAC-SHA256 of "t.body", as a receiver computes it.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(b"whsec-test-shared").unwrap();
    mac.update(format!("{t}.").as_bytes());
    mac.update(body);
    assert_eq!(
        header,
        format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
    );
}

#[test]
fn webhook_urls_are_http_or_https_with_a_host() {
    assert_eq!(
        [
            "https://hooks.example/paddock",
            "http://127.0.0.1:9000/h",
            "ftp://hooks.example/x",
            "file:///etc/passwd",
            "hooks.example/paddock",
        ]
        .map(|u| validate_url(u).map_err(|e| e.to_string())),
        [
            Ok(()),
            Ok(()),
            Err(
                "webhook URL `ftp://hooks.example/x` must be http:// or https://, not ftp://"
                    .into()
            ),
            Err("webhook URL `file:///etc/passwd` must be http:// or https://, not file://".into()),
            Err(
                "webhook URL `hooks.example/paddock` is not a URL: relative URL without a base"
                    .into()
            ),
        ]
    );
}

/// A final record owed by a server that died delivering it (its first
/// attempt failed, its lease ran out) is taken over by another server's
/// sweep, which goes on from attempt 2 after the wait attempt 2 has, to
/// the server's URL and the job's own, and then owes it no more; one
/// leased by a live server, or whose job still runs, is not touched.
#[tokio::test]
async fn an_owed_record_whose_server_died_is_sent_on_from_its_last_attempt() {
    let (base, rx) = receiver(0).await;
    let url = format!("{base}/hook");
    let own = format!("{base}/accept");
    let (hooks, clock, store, _) = webhooks(&url, |_| {}).await;
    let mut record = job("j2", 1);
    record.status = JobStatus::Failed;
    let spec = serde_json::json!({"results": {"webhook_url": own}}).to_string();
    store.insert_job(&record, &spec).await.unwrap();
    let failed = Some("the receiver answered 503 Service Unavailable");
    store.owe_webhook("j2", NOW).await.unwrap();
    let dead = WebhookLease {
        by: "dead-server #1",
        now: NOW - time::Duration::minutes(5),
        until: NOW - time::Duration::seconds(1),
        job: None,
        limit: 10,
    };
    assert_eq!(
        store.lease_owed_webhooks(&dead).await.unwrap(),
        vec!["j2".to_owned()]
    );
    let mut first = attempt(&url, 1, Some(503), failed);
    first.job_id = "j2".into();
    store.record_webhook_attempt(&first).await.unwrap();
    // j1 runs: owed, not sent yet. j3 ended, leased by a live server.
    store.owe_webhook("j1", NOW).await.unwrap();
    let mut other = job("j3", 2);
    other.status = JobStatus::Done;
    store.insert_job(&other, "{}").await.unwrap();
    store.owe_webhook("j3", NOW).await.unwrap();
    let live = WebhookLease {
        by: "live-server #2",
        now: NOW,
        until: NOW + time::Duration::minutes(1),
        job: Some("j3"),
        limit: 10,
    };
    assert_eq!(
        store.lease_owed_webhooks(&live).await.unwrap(),
        vec!["j3".to_owned()]
    );

    assert_eq!(sent(hooks.send_owed(None).await).await, 1);
    let with = |a: WebhookAttempt| WebhookAttempt {
        job_id: "j2".into(),
        ..a
    };
    let mut got = store.webhook_attempts("j2").await.unwrap();
    got[1..].sort_by(|a, b| a.url.cmp(&b.url));
    assert_eq!(
        got,
        vec![
            first,
            with(attempt(&own, 1, Some(204), None)),
            with(attempt(&url, 2, Some(204), None)),
        ]
    );
    assert_eq!(*clock.waits.lock().unwrap(), vec![Duration::from_secs(1)]);
    // The record as the store gives it (its times in UTC).
    let body = serde_json::to_vec(&store.job("j2").await.unwrap().unwrap()).unwrap();
    assert_eq!(
        *rx.checks.lock().unwrap(),
        vec![(Ok(()), body.clone()), (Ok(()), body)]
    );
    // Owed no more; nothing else to send now.
    assert_eq!(sent(hooks.send_owed(None).await).await, 0);
    assert_eq!(sent(hooks.send_owed(Some("j2")).await).await, 0);
    assert_eq!(store.webhook_attempts("j1").await.unwrap(), vec![]);
    assert_eq!(store.webhook_attempts("j3").await.unwrap(), vec![]);
}

/// A job that ends is sent once, whoever asks and when: `owe_and_send`
/// while it is being sent, or after, makes no second delivery.
#[tokio::test]
async fn a_record_owed_twice_is_sent_once() {
    let (base, rx) = receiver(0).await;
    let url = format!("{base}/hook");
    let (hooks, _, store, mut record) = webhooks(&url, |_| {}).await;
    record.status = JobStatus::Done;
    store.finish_job(&record, JobStatus::Running).await.unwrap();
    // The second asks while the first delivers: its lease is held.
    let first = hooks.owe_and_send("j1").await.unwrap();
    assert!(hooks.owe_and_send("j1").await.is_none());
    first.await.unwrap();
    // Sent: asked again (a reclaim of a job that had ended, say), nothing.
    assert!(hooks.owe_and_send("j1").await.is_none());
    assert_eq!(sent(hooks.send_owed(None).await).await, 0);
    assert_eq!(
        store.webhook_attempts("j1").await.unwrap(),
        vec![attempt(&url, 1, Some(204), None)]
    );
    assert_eq!(rx.seen.load(Ordering::SeqCst), 1);
}

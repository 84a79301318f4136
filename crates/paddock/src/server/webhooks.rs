//! Completion webhooks: when a job reaches its final status, its final
//! record (the JSON of `GET /v1/jobs/{id}`) is POSTed to the server's
//! webhook URL, signed with the server's secret: `Paddock-Signature:
//! t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">` (the receiver
//! recomputes it, compares in constant time and refuses an old `t`:
//! [`verify`]). A 2xx answer delivers it; anything else (another status, a
//! redirect, which is never followed, a timeout, a refused connection) is
//! retried after 1 s, 2 s, 4 s… up to the attempt limit. Every attempt is
//! a store row (`webhook_deliveries`). The clock and the sleep between
//! attempts are a [`Clock`], so tests run without waiting.
//!
//! A final record is first made *owed* in the store (`webhooks_owed`),
//! whichever process ended the job: this server, another one's reaper, a
//! `paddock gc`, or this server's own start-up pass after it died. A
//! server delivers what is owed by leasing it (`Webhooks::send_owed`): the
//! job that just ended here at once, and every heartbeat interval any
//! owed record whose job has ended and whose lease ran out, so a record
//! owed by a server that died, or a delivery cut short by a restart, is
//! sent by any server with webhooks, its attempts continuing from the
//! last one recorded. The lease covers the next wait and attempt and is
//! renewed before each, so it runs out soon after its holder dies.
//!
//! A job's own `results.webhook_url` was checked against the `[serve]
//! allow_hosts` of the server that accepted it; the server sending it
//! may be another (any server's pass sends what is owed) that allows
//! less, or the spec may have been stored before the check existed. So
//! the sender checks it against its own settings too (`checked_by`), and
//! one it does not allow gets a failed attempt saying so, no request.

use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use paddock_protocol::job::JobRecord;
use sha2::Sha256;
use time::OffsetDateTime;

use super::submissions::Submissions;
use crate::secret::Secret;
use crate::store::{SharedStore, WebhookAttempt, WebhookLease};

/// What a lease holds beyond the next wait and one attempt's timeout.
const LEASE_SLACK: Duration = Duration::from_secs(5);
/// How many owed records one sweep leases.
const SWEEP_LIMIT: u32 = 32;

/// The most of a receiver's `Location` an attempt's error names (bytes):
/// it is the receiver's text, up to the HTTP client's header bound
/// (hundreds of KB), and each attempt is a store row.
const LOCATION_SHOWN: usize = 1000;

/// The signature header.
pub const SIGNATURE_HEADER: &str = "Paddock-Signature";

/// How webhooks are delivered.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// Where every job's final record goes (`None`: nowhere).
    pub url: Option<String>,
    /// The HMAC key the receiver shares.
    pub secret: Secret,
    /// Attempts per delivery, the first included.
    pub max_attempts: u32,
    /// The wait before the second attempt; doubled after each failure.
    pub first_backoff: Duration,
    /// The longest wait between two attempts.
    pub max_backoff: Duration,
    /// One attempt's limit, connecting to the end of the answer.
    pub timeout: Duration,
}

impl WebhookConfig {
    /// The defaults for `url` and `secret`: 6 attempts, 1 s doubling to
    /// at most 60 s between them, 10 s per attempt.
    pub fn new(url: Option<String>, secret: Secret) -> WebhookConfig {
        WebhookConfig {
            url,
            secret,
            max_attempts: 6,
            first_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            timeout: Duration::from_secs(10),
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WebhookUrlError {
    #[error("webhook URL `{url}` is not a URL: {message}")]
    Parse { url: String, message: String },
    #[error("webhook URL `{url}` must be http:// or https://, not {scheme}://")]
    Scheme { url: String, scheme: String },
    #[error("webhook URL `{url}` has no host")]
    NoHost { url: String },
}

/// Checks a webhook URL: absolute, `http` or `https`, with a host.
pub fn validate_url(url: &str) -> Result<(), WebhookUrlError> {
    let parsed = reqwest::Url::parse(url).map_err(|e| WebhookUrlError::Parse {
        url: url.to_owned(),
        message: e.to_string(),
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(WebhookUrlError::Scheme {
            url: url.to_owned(),
            scheme: parsed.scheme().to_owned(),
        });
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(WebhookUrlError::NoHost {
            url: url.to_owned(),
        });
    }
    Ok(())
}

/// The time and the waits of deliveries.
#[async_trait::async_trait]
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> OffsetDateTime;
    async fn sleep(&self, wait: Duration);
}

/// The system clock and tokio's sleep.
#[derive(Debug)]
pub struct SystemClock;

#[async_trait::async_trait]
impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
    async fn sleep(&self, wait: Duration) {
        tokio::time::sleep(wait).await
    }
}

/// The `Paddock-Signature` value of `body` sent at unix time `t`.
pub fn sign(secret: &Secret, t: i64, body: &[u8]) -> String {
    let digest = mac(secret, t, body).map(|m| hex::encode(m.finalize().into_bytes()));
    format!("t={t},v1={}", digest.unwrap_or_default())
}

/// The HMAC of `"<t>.<body>"`; `None` never happens (HMAC takes a key of
/// any length), but the crate's constructor is fallible.
fn mac(secret: &Secret, t: i64, body: &[u8]) -> Option<Hmac<Sha256>> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.expose().as_bytes()).ok()?;
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Some(mac)
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VerifyError {
    #[error("the signature header is not `t=<unix>,v1=<hex>`")]
    Malformed,
    #[error(
        "the signature is {age_secs} s away from now, more than the {tolerance_secs} s allowed"
    )]
    Stale { age_secs: i64, tolerance_secs: i64 },
    #[error("the signature does not match the body")]
    Mismatch,
}

/// What a receiver does: checks `header` against `body` with the shared
/// `secret` (in constant time) and that its `t` is within
/// `tolerance_secs` of `now` (a replayed old delivery is refused).
pub fn verify(
    secret: &Secret,
    header: &str,
    body: &[u8],
    now: i64,
    tolerance_secs: i64,
) -> Result<(), VerifyError> {
    let mut t = None;
    let mut v1 = None;
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", value)) => t = value.parse::<i64>().ok(),
            Some(("v1", value)) => v1 = hex::decode(value).ok(),
            _ => {}
        }
    }
    let (Some(t), Some(v1)) = (t, v1) else {
        return Err(VerifyError::Malformed);
    };
    let age_secs = now.saturating_sub(t).saturating_abs();
    if age_secs > tolerance_secs {
        return Err(VerifyError::Stale {
            age_secs,
            tolerance_secs,
        });
    }
    mac(secret, t, body)
        .ok_or(VerifyError::Mismatch)?
        .verify_slice(&v1)
        .map_err(|_| VerifyError::Mismatch)
}

/// Delivers completion webhooks and records every attempt.
#[derive(Debug, Clone)]
pub struct Webhooks {
    config: Arc<WebhookConfig>,
    store: SharedStore,
    client: reqwest::Client,
    clock: Arc<dyn Clock>,
    /// Who holds this server's leases of owed records: a name for people
    /// and a random part unique to this process.
    holder: Arc<str>,
    /// What a job's own webhook URL is checked against (this server's
    /// `[serve]` allowances); `None`: not checked.
    allowed: Option<Arc<Submissions>>,
}

/// How a delivery to one URL ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    /// An attempt was answered 2xx.
    Delivered,
    /// Every attempt was made and none was.
    GaveUp,
    /// The lease ran out and another server took the record over.
    LeaseLost,
}

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("cannot build the webhook HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    #[error("job {job_id}: cannot serialize its record for the webhook: {source}")]
    Encode {
        job_id: String,
        #[source]
        source: serde_json::Error,
    },
    #[error(transparent)]
    Url(#[from] WebhookUrlError),
}

impl Webhooks {
    /// Webhooks per `config`, on the system clock.
    pub fn new(config: WebhookConfig, store: SharedStore) -> Result<Webhooks, WebhookError> {
        Webhooks::with_clock(config, store, Arc::new(SystemClock))
    }

    pub fn with_clock(
        config: WebhookConfig,
        store: SharedStore,
        clock: Arc<dyn Clock>,
    ) -> Result<Webhooks, WebhookError> {
        if let Some(url) = &config.url {
            validate_url(url)?;
        }
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(config.timeout)
            .no_proxy()
            .build()
            .map_err(WebhookError::Client)?;
        Ok(Webhooks {
            config: Arc::new(config),
            store,
            client,
            clock,
            holder: format!("webhooks #{:016x}", rand::random::<u64>()).into(),
            allowed: None,
        })
    }

    /// The same, a job's own webhook URL sent only where `allowed` lets
    /// a submitted spec have this server connect.
    pub fn checked_by(mut self, allowed: Submissions) -> Webhooks {
        self.allowed = Some(Arc::new(allowed));
        self
    }

    /// The same, its leases held in the name of `name` (the host's).
    pub fn held_by(mut self, name: &str) -> Webhooks {
        self.holder = format!("{name} #{:016x}", rand::random::<u64>()).into();
        self
    }

    /// Who holds this server's leases.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// How long a lease taken before a wait of `wait` holds: the wait,
    /// one attempt and some slack.
    fn lease_for(&self, wait: Duration) -> time::Duration {
        let span = wait + self.config.timeout + LEASE_SLACK;
        time::Duration::try_from(span).unwrap_or(time::Duration::MAX)
    }

    /// Makes job `id`'s final record owed (idempotent: whoever ended it
    /// may have already), then sends it if nobody else holds it: the
    /// delivery's task, if this server took it.
    pub async fn owe_and_send(&self, id: &str) -> Option<tokio::task::JoinHandle<()>> {
        if let Err(e) = self.store.owe_webhook(id, self.clock.now()).await {
            tracing::error!(job_id = %id, error = %e, "webhook: cannot record the final record as owed");
            return None;
        }
        self.send_owed(Some(id)).await.pop()
    }

    /// Makes job `id`'s final record owed when it ends (recorded now, while
    /// it is queued or running: whoever ends it, the record is sent).
    pub async fn owe(&self, id: &str) {
        if let Err(e) = self.store.owe_webhook(id, self.clock.now()).await {
            tracing::error!(job_id = %id, error = %e, "webhook: cannot record the final record as owed");
        }
    }

    /// Leases what is owed (`only` that job's, else up to a sweep's worth
    /// of any ended job's whose lease ran out) and sends each in the
    /// background: a task per job leased.
    pub async fn send_owed(&self, only: Option<&str>) -> Vec<tokio::task::JoinHandle<()>> {
        let now = self.clock.now();
        let lease = WebhookLease {
            by: &self.holder,
            now,
            until: now + self.lease_for(Duration::ZERO),
            job: only,
            limit: SWEEP_LIMIT,
        };
        let ids = match self.store.lease_owed_webhooks(&lease).await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::error!(error = %e, "webhook: cannot lease the owed final records");
                return Vec::new();
            }
        };
        ids.into_iter()
            .map(|id| {
                let this = self.clone();
                tokio::spawn(async move { this.send_leased(&id).await })
            })
            .collect()
    }

    /// Sends the leased record of job `id` to the server's URL and the
    /// job's own, each from its last recorded attempt on; settles the row
    /// unless the lease was lost.
    async fn send_leased(&self, id: &str) {
        let record = match self.store.job(id).await {
            Ok(Some(record)) => record,
            Ok(None) => return,
            Err(e) => {
                tracing::error!(job_id = %id, error = %e, "webhook: cannot read the record");
                return;
            }
        };
        let own = match self.store.job_spec(id).await {
            Ok(Some(spec)) => serde_json::from_str::<serde_json::Value>(&spec)
                .ok()
                .and_then(|s| {
                    s.pointer("/results/webhook_url")
                        .and_then(serde_json::Value::as_str)
                        .map(str::to_owned)
                }),
            _ => None,
        };
        let made = match self.store.webhook_attempts(id).await {
            Ok(made) => made,
            Err(e) => {
                tracing::error!(job_id = %id, error = %e, "webhook: cannot read the attempts made");
                return;
            }
        };
        // The job's own URL, unless this server does not allow its host.
        let refused = own.as_deref().and_then(|url| {
            let allowed = self.allowed.as_ref()?;
            allowed.check_url("results.webhook_url", url).err()
        });
        let urls = own
            .into_iter()
            .map(|u| (u, refused.clone()))
            .chain(self.config.url.clone().map(|u| (u, None)));
        let sends = urls.map(|(url, refused)| {
            let before: Vec<&WebhookAttempt> = made.iter().filter(|a| a.url == url).collect();
            let done = before.iter().any(|a| a.delivered);
            let next = before.iter().map(|a| a.attempt).max().unwrap_or(0) + 1;
            let record = &record;
            async move {
                if done {
                    return Ok(Sent::Delivered);
                }
                if next > self.config.max_attempts.max(1) {
                    return Ok(Sent::GaveUp);
                }
                if let Some(refused) = refused {
                    // The attempt not made, on the record; the owed row
                    // is settled, so it is not tried again.
                    let row = WebhookAttempt {
                        job_id: record.id.clone(),
                        url: url.clone(),
                        attempt: next,
                        at: self.clock.now(),
                        delivered: false,
                        http_status: None,
                        error: Some(format!("not sent by this server: {refused}")),
                    };
                    if let Err(e) = self.store.record_webhook_attempt(&row).await {
                        tracing::error!(job_id = %record.id, error = %e, "webhook: the refusal was not recorded");
                    }
                    tracing::warn!(job_id = %record.id, "webhook: {url} not sent: {refused}");
                    return Ok(Sent::GaveUp);
                }
                self.deliver_from(&url, record, next, true).await
            }
        });
        let sent = futures::future::join_all(sends).await;
        let mut lost = false;
        for s in sent {
            match s {
                Ok(Sent::Delivered | Sent::GaveUp) => {}
                Ok(Sent::LeaseLost) => lost = true,
                Err(e) => tracing::error!(job_id = %id, error = %e, "webhook"),
            }
        }
        if !lost {
            if let Err(e) = self
                .store
                .settle_owed_webhook(id, &self.holder, self.clock.now())
                .await
            {
                tracing::error!(job_id = %id, error = %e, "webhook: cannot settle the owed record");
            }
        }
    }

    /// Delivers `record` to `url`, retrying with backoff; whether one
    /// attempt was answered 2xx. Each attempt is recorded in the store (a
    /// failure to record it is logged, not retried).
    pub async fn deliver(&self, url: &str, record: &JobRecord) -> Result<bool, WebhookError> {
        Ok(self.deliver_from(url, record, 1, false).await? == Sent::Delivered)
    }

    /// The wait before attempt `attempt` (none before the first).
    fn wait_before(&self, attempt: u32) -> Duration {
        if attempt <= 1 {
            return Duration::ZERO;
        }
        let doublings = (attempt - 2).min(31);
        self.config
            .first_backoff
            .saturating_mul(1 << doublings)
            .min(self.config.max_backoff)
    }

    /// Delivers `record` to `url` from attempt `first` on, renewing this
    /// server's lease of the job's owed record before each when `leased`.
    async fn deliver_from(
        &self,
        url: &str,
        record: &JobRecord,
        first: u32,
        leased: bool,
    ) -> Result<Sent, WebhookError> {
        let body = serde_json::to_vec(record).map_err(|source| WebhookError::Encode {
            job_id: record.id.clone(),
            source,
        })?;
        for attempt in first.max(1)..=self.config.max_attempts.max(1) {
            let wait = self.wait_before(attempt);
            if leased {
                let until = self.clock.now() + self.lease_for(wait);
                match self
                    .store
                    .renew_webhook_lease(&record.id, &self.holder, until)
                    .await
                {
                    Ok(true) => {}
                    Ok(false) => return Ok(Sent::LeaseLost),
                    Err(e) => {
                        tracing::error!(job_id = %record.id, error = %e, "webhook: cannot renew the lease");
                    }
                }
            }
            if !wait.is_zero() {
                self.clock.sleep(wait).await;
            }
            let (http_status, error) = self.attempt(url, &body).await;
            let delivered = error.is_none();
            let row = WebhookAttempt {
                job_id: record.id.clone(),
                url: url.to_owned(),
                attempt,
                at: self.clock.now(),
                delivered,
                http_status,
                error,
            };
            if let Err(e) = self.store.record_webhook_attempt(&row).await {
                tracing::error!(job_id = %record.id, attempt, error = %e, "webhook: the attempt was not recorded");
            }
            if delivered {
                return Ok(Sent::Delivered);
            }
        }
        Ok(Sent::GaveUp)
    }

    /// One POST: the receiver's status, and why it failed (`None`: 2xx).
    async fn attempt(&self, url: &str, body: &[u8]) -> (Option<u16>, Option<String>) {
        let t = self.clock.now().unix_timestamp();
        let sent = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(SIGNATURE_HEADER, sign(&self.config.secret, t, body))
            .body(body.to_vec())
            .send()
            .await;
        let response = match sent {
            Ok(r) => r,
            Err(e) if e.is_timeout() => {
                return (
                    None,
                    Some(format!("no answer within {:?}", self.config.timeout)),
                )
            }
            Err(e) => return (None, Some(crate::server::problem::chain(&e))),
        };
        let status = response.status();
        let error = if status.is_success() {
            None
        } else if status.is_redirection() {
            let mut to = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("?")
                .to_string();
            crate::output::cap_string(&mut to, LOCATION_SHOWN);
            Some(format!(
                "the receiver answered {status}, a redirect to {to} (not followed)"
            ))
        } else {
            Some(format!("the receiver answered {status}"))
        };
        // The answer's body is not read past its status: a receiver that
        // answers and then stalls the body does not hold the delivery.
        (Some(status.as_u16()), error)
    }
}

#[cfg(test)]
mod tests;

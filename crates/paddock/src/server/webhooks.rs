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

use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use paddock_protocol::job::JobRecord;
use sha2::Sha256;
use time::OffsetDateTime;

use crate::secret::Secret;
use crate::store::{SharedStore, WebhookAttempt};

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
        })
    }

    /// Delivers `record` to the server's URL, if it has one, in the
    /// background.
    pub fn spawn(&self, record: JobRecord) -> Option<tokio::task::JoinHandle<bool>> {
        let url = self.config.url.clone()?;
        Some(self.spawn_to(url, record))
    }

    /// Delivers `record` to `url` (the server's, or a job's own
    /// `results.webhook_url`) in the background.
    pub fn spawn_to(&self, url: String, record: JobRecord) -> tokio::task::JoinHandle<bool> {
        let this = self.clone();
        tokio::spawn(async move {
            match this.deliver(&url, &record).await {
                Ok(delivered) => delivered,
                Err(e) => {
                    tracing::error!(job_id = %record.id, error = %e, "webhook");
                    false
                }
            }
        })
    }

    /// Delivers `record` to `url`, retrying with backoff; whether one
    /// attempt was answered 2xx. Each attempt is recorded in the store (a
    /// failure to record it is logged, not retried).
    pub async fn deliver(&self, url: &str, record: &JobRecord) -> Result<bool, WebhookError> {
        let body = serde_json::to_vec(record).map_err(|source| WebhookError::Encode {
            job_id: record.id.clone(),
            source,
        })?;
        let mut wait = self.config.first_backoff;
        for attempt in 1..=self.config.max_attempts.max(1) {
            if attempt > 1 {
                self.clock.sleep(wait).await;
                wait = (wait * 2).min(self.config.max_backoff);
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
                return Ok(true);
            }
        }
        Ok(false)
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
            let to = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("?");
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

//! One delivery attempt of a completion webhook (`server::webhooks`), as
//! the store keeps it (`webhook_deliveries`, docs/store.md).

use time::OffsetDateTime;

/// One attempt to deliver job `job_id`'s final record to `url`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookAttempt {
    pub job_id: String,
    pub url: String,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// When the attempt ended.
    pub at: OffsetDateTime,
    /// The receiver answered 2xx.
    pub delivered: bool,
    /// The receiver's HTTP status, when it answered.
    pub http_status: Option<u16>,
    /// Why the attempt failed (a non-2xx status, a timeout, a refused
    /// connection, a redirect not followed).
    pub error: Option<String>,
}

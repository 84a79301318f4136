//! Completion webhooks as the store keeps them (docs/store.md): each
//! delivery attempt (`webhook_deliveries`), and the final records still
//! owed (`webhooks_owed`), leased to the server delivering them so that a
//! server that dies delivering leaves them to another.

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

/// A lease of owed final records (`Store::lease_owed_webhooks`): the rows
/// whose job has ended and whose lease, if any, ran out before `now` are
/// leased to `by` until `until`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebhookLease<'a> {
    /// The server taking them (unique per server process).
    pub by: &'a str,
    pub now: OffsetDateTime,
    pub until: OffsetDateTime,
    /// Only this job's (the server's own job that just ended), else any.
    pub job: Option<&'a str>,
    /// At most this many rows.
    pub limit: u32,
}

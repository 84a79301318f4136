//! One model call before any upstream answer, and the ledger rows of the
//! calls and attempts that get none: refused by the broker, the upstream
//! unreachable, or an attempt answered with a retryable error.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::response::Response;
use http::StatusCode;
use paddock_protocol::{CallStatus, ModelCall, TokenUsage};
use time::OffsetDateTime;

use super::budget::Reservation;
use super::ledger::{InFlight, LedgerError};
use super::meter::{Api, Meter};
use super::server::error_response;
use super::Shared;

/// The most characters of a requested model's name the ledger row and the
/// broker's messages keep: the name is the job's text, as long as its
/// request (a priced model's name is far shorter).
pub(super) const SHOWN_MODEL_CHARS: usize = 256;

/// A requested model's name as the ledger and the broker's messages name
/// it: cut at [`SHOWN_MODEL_CHARS`] characters, its length said.
pub(super) fn shown_model(model: &str) -> String {
    crate::cut_text::cut(
        model,
        crate::cut_text::Cut::chars(SHOWN_MODEL_CHARS).saying(crate::cut_text::Length::Characters),
    )
}

/// The most characters of an error a ledger row keeps: an upstream's
/// message (read up to `broker.max_upstream_event_bytes`, 16 MiB by
/// default) may echo what the job sent (its model name, its input), and a
/// row is kept for each of a job's calls.
pub(super) const SHOWN_ERROR_CHARS: usize = 4_096;

/// A row's error as the ledger keeps it: cut at [`SHOWN_ERROR_CHARS`]
/// characters, its length said.
pub(super) fn shown_error(error: &str) -> String {
    crate::cut_text::cut(
        error,
        crate::cut_text::Cut::chars(SHOWN_ERROR_CHARS).saying(crate::cut_text::Length::Characters),
    )
}

/// One model call before any upstream answer, on its job's broker
/// state: what the ledger row of a call that gets no answer needs.
pub(super) struct Call<'a> {
    pub(super) shared: &'a Shared,
    /// The call itself.
    pub(super) own: Detached,
}

/// A [`Call`] apart from its job's broker state, so that it can move to
/// a task of its own (which holds the state itself).
pub(super) struct Detached {
    pub(super) api: Api,
    pub(super) seq: u64,
    /// Empty until the request body has been read; then as
    /// [`shown_model`] names it.
    pub(super) model: String,
    pub(super) started: Instant,
    pub(super) started_at: OffsetDateTime,
    /// The current attempt's row, written ahead and not yet settled.
    pub(super) in_flight: Option<InFlight>,
}

impl Detached {
    /// The call again, on `shared`.
    pub(super) fn attach(self, shared: &Shared) -> Call<'_> {
        Call { shared, own: self }
    }
}

impl<'a> Call<'a> {
    /// The call without its borrow of the broker's state.
    pub(super) fn detach(self) -> Detached {
        self.own
    }

    /// A new call of `api`: its own `seq` and clock.
    pub(super) fn start(shared: &'a Shared, api: Api) -> Call<'a> {
        Call {
            shared,
            own: Detached {
                api,
                seq: shared.next_seq.fetch_add(1, Ordering::SeqCst),
                model: String::new(),
                started: Instant::now(),
                started_at: OffsetDateTime::now_utc(),
                in_flight: None,
            },
        }
    }

    /// The broker refuses the call: a `refused` row and an error in the
    /// API's wire format.
    pub(super) fn refuse(&mut self, status: StatusCode, kind: &str, message: String) -> Response {
        self.settle(self.unanswered(CallStatus::Refused, status, &message));
        error_response(self.own.api, status, kind, &message)
    }

    /// Writes the attempt's row ahead of forwarding it: `in_flight`, its
    /// worst case (`tokens`: the input estimated from the request's size,
    /// about four bytes a token, and the most output it may produce;
    /// `cost`, as its budget reservation prices them), which a row whose
    /// end is never seen keeps: the call is counted at no less than it may
    /// have cost, in this job's ledger and in the budgets other jobs share.
    pub(super) async fn write_ahead(
        &mut self,
        tokens: TokenUsage,
        cost: i64,
    ) -> Result<(), LedgerError> {
        let row = ModelCall {
            status: CallStatus::InFlight,
            http_status: None,
            error: None,
            estimated: true,
            cost_micros: cost,
            tokens,
            ..self.unanswered(CallStatus::InFlight, StatusCode::OK, "")
        };
        self.own.in_flight = Some(self.shared.recorder.write_ahead(row).await?);
        Ok(())
    }

    /// Settles the attempt's row (its in-flight row, if written ahead), in
    /// the background.
    fn settle(&mut self, row: ModelCall) {
        drop(match self.own.in_flight.take() {
            Some(in_flight) => in_flight.settle(row),
            None => self.shared.recorder.settle(row),
        });
    }

    /// The upstream could not be asked (unreachable, credentials not
    /// minted): a 502 to the engine, an `http_error` row, the reservation
    /// released.
    pub(super) fn bad_gateway(&mut self, reservation: Reservation, message: String) -> Response {
        self.settle(self.unanswered(CallStatus::HttpError, StatusCode::BAD_GATEWAY, &message));
        reservation.settle(0);
        error_response(self.own.api, StatusCode::BAD_GATEWAY, "api_error", &message)
    }

    /// The next attempt of a retried call: its own ledger row (a new `seq`)
    /// and its own clock.
    pub(super) fn next_attempt(&mut self) {
        self.own.seq = self.shared.next_seq.fetch_add(1, Ordering::SeqCst);
        self.own.started = Instant::now();
        self.own.started_at = OffsetDateTime::now_utc();
    }

    /// The row of an attempt the upstream answered with a retryable error
    /// (429, 5xx): the upstream's status and message, no cost. The error
    /// body (at most 64 KiB of it) is read and dropped; the engine never
    /// sees it.
    pub(super) async fn record_retried(
        &mut self,
        resp: reqwest::Response,
        failed: u32,
        delay: Duration,
    ) {
        let ttft_ms = Some(self.own.started.elapsed().as_millis() as u64);
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let mut meter = Meter::new(
            self.own.api,
            &content_type,
            self.shared.config.max_upstream_event_bytes,
        );
        let mut resp = resp;
        let mut read = 0usize;
        while let Ok(Some(chunk)) = resp.chunk().await {
            read += chunk.len();
            meter.feed(&chunk);
            if read >= 64 << 10 {
                break;
            }
        }
        let reading = meter.finish(status);
        let upstream_error = reading
            .error
            .unwrap_or_else(|| format!("HTTP {status} from the upstream"));
        let mut row = self.unanswered(
            CallStatus::HttpError,
            StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY),
            &self.retrying(&upstream_error, failed, delay),
        );
        row.ttft_ms = ttft_ms;
        row.served_model = reading.served_model;
        self.settle(row);
    }

    /// The row of an attempt whose connection failed before any answer: no
    /// HTTP status, no cost.
    pub(super) fn record_unreachable(&mut self, message: &str, failed: u32, delay: Duration) {
        let mut row = self.unanswered(
            CallStatus::HttpError,
            StatusCode::BAD_GATEWAY,
            &self.retrying(message, failed, delay),
        );
        row.http_status = None;
        self.settle(row);
    }

    fn retrying(&self, error: &str, failed: u32, delay: Duration) -> String {
        format!(
            "{error} (attempt {failed} of {}; the broker retries in {} ms)",
            self.shared.config.retry.max_attempts(),
            delay.as_millis()
        )
    }

    /// The ledger row of a call without an upstream answer: no tokens, no
    /// cost, the broker's own status and message.
    fn unanswered(&self, status: CallStatus, http_status: StatusCode, message: &str) -> ModelCall {
        let config = &self.shared.config;
        ModelCall {
            job_id: config.job_id.clone(),
            attempt: config.attempt,
            seq: self.own.seq,
            provider: config.upstream.provider.label().to_string(),
            requested_model: self.own.model.clone(),
            served_model: None,
            tokens: TokenUsage::default(),
            ttft_ms: None,
            duration_ms: self.own.started.elapsed().as_millis() as u64,
            status,
            http_status: Some(http_status.as_u16()),
            error: Some(message.to_string()),
            estimated: false,
            price_version: config.prices.version.clone(),
            cost_micros: 0,
            started_at: self.own.started_at,
        }
    }
}

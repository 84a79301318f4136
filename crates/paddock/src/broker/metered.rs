//! The upstream body on its way to the engine: [`MeteredBody`] passes each
//! chunk through unchanged while a copy feeds the meter, keeps the call's
//! running cost, cuts the stream (budget ceiling, model allowlist, the
//! upstream event limit) with an error event in the API's format, and
//! writes the call's ledger row exactly once. An answer the engine hangs
//! up on before its end is read to its end without it (the upstream has
//! billed, or goes on billing, what it generates: a reasoning model's
//! hidden tokens above all), still metered and cut at the budget, until
//! the job's broker stops.

use std::future::Future as _;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use futures::Stream;
use paddock_protocol::{CallStatus, ModelCall, TokenUsage};
use time::OffsetDateTime;

use super::budget::Reservation;
use super::ledger::InFlight;
use super::meter::Meter;
use super::server::without_url;
use super::{PolicyNotice, Shared};

pub(super) type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, reqwest::Error>> + Send>>;

/// The upstream body on its way to the engine, metered as it passes. The
/// ledger row is settled exactly once: when the answer completes (its
/// final chunk, or its end, held until the row is written), when the
/// upstream breaks it, or when the engine drops it.
pub(super) struct MeteredBody {
    /// The call's row, written ahead.
    pub(super) in_flight: Option<InFlight>,
    /// The settled row being written, and the chunk held until it is
    /// (none: the body's end).
    pub(super) closing: Option<(tokio::task::JoinHandle<()>, Option<Bytes>)>,
    /// A whole (JSON) answer: its one chunk is its final one.
    pub(super) whole: bool,
    pub(super) inner: ByteStream,
    pub(super) meter: Option<Meter>,
    pub(super) shared: Arc<Shared>,
    pub(super) seq: u64,
    pub(super) model: String,
    pub(super) http_status: u16,
    pub(super) request_bytes: u64,
    pub(super) started: Instant,
    pub(super) started_at: OffsetDateTime,
    pub(super) ttft_ms: Option<u64>,
    pub(super) broke: Option<String>,
    pub(super) reservation: Option<Reservation>,
    pub(super) cut: Cut,
    /// A whole answer replaced by the broker's error (the ledger still
    /// prices what the upstream answered).
    pub(super) withheld: bool,
    /// Read on after the engine hung up: dropped now, it settles.
    pub(super) draining: bool,
    /// The call's place among the job's calls upstream
    /// (`Shared::upstream_calls`), held until its row is settled.
    pub(super) _upstream: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// Whether the broker cut the stream (budget ceiling, model allowlist).
pub(super) enum Cut {
    No,
    /// Cut: the error event still to send to the engine.
    Pending(Bytes),
    /// Cut and the error event sent.
    Sent,
}

impl MeteredBody {
    /// Checks the served model against the allowlist and updates the
    /// call's running cost; past either, drops the upstream
    /// stream (closing its connection) and queues an error event for the
    /// engine.
    fn check_policy(&mut self) {
        let (Some(meter), Some(reservation)) = (self.meter.as_ref(), self.reservation.as_ref())
        else {
            return;
        };
        // A JSON body is priced whole at its end; a completed stream has
        // nothing left to cut.
        if !meter.is_sse() || meter.completed() {
            return;
        }
        // Past the limit the meter stopped reading: what it cannot meter
        // does not reach the engine.
        if let Some(message) = meter.over_limit() {
            let message = format!("{message}: the response was cut");
            self.cut_with("limits", "api_error", message);
            return;
        }
        let tokens = meter.running_usage(self.request_bytes);
        let prices = &self.shared.config.prices;
        let tier = meter.service_tier();
        let hour = meter.hour_writes();
        let running = meter
            .served_model()
            .and_then(|m| prices.cost_micros_kept(m, &tokens, hour, tier))
            .or_else(|| prices.cost_micros_kept(&self.model, &tokens, hour, tier))
            .unwrap_or(0);
        if let Some(served) = meter.served_model() {
            if let Err(list) = self.shared.config.allowlist.check(served) {
                let message = format!(
                    "paddock broker: the upstream served model `{served}`, which the {list} model allowlist does not allow: the response was cut"
                );
                self.shared.note_served_refused(&message);
                self.cut_with("model", "permission_error", message);
                return;
            }
        }
        let Some(message) = reservation.observe(running) else {
            return;
        };
        self.cut_with("budget", "budget_exceeded", message);
    }

    /// Drops the upstream stream (closing its connection) and queues an
    /// error event of `kind` with `message` for the engine.
    fn cut_with(&mut self, rule: &str, kind: &str, message: String) {
        let Some(meter) = self.meter.as_ref() else {
            return;
        };
        if meter.is_eventstream() {
            let event = super::eventstream::exception(kind, &message);
            let _ = self.shared.policy.send(PolicyNotice {
                rule: rule.into(),
                message: message.clone(),
            });
            self.broke = Some(message);
            self.inner = Box::pin(futures::stream::empty());
            self.cut = Cut::Pending(event);
            return;
        }
        let mut event = if meter.mid_event() {
            b"\n\n".to_vec()
        } else {
            Vec::new()
        };
        let (name, data) = meter.api().cut_event(kind, &message, self.seq, &self.model);
        let frame = if name.is_empty() {
            format!("data: {data}\n\n")
        } else {
            format!("event: {name}\ndata: {data}\n\n")
        };
        event.extend_from_slice(frame.as_bytes());
        let _ = self.shared.policy.send(PolicyNotice {
            rule: rule.into(),
            message: message.clone(),
        });
        self.broke = Some(message);
        self.inner = Box::pin(futures::stream::empty());
        self.cut = Cut::Pending(Bytes::from(event));
    }

    /// Settles the call's row (once; later calls do nothing): the
    /// handle of its write.
    fn settle(&mut self) -> Option<tokio::task::JoinHandle<()>> {
        let meter = self.meter.take()?;
        let reading = meter.finish(self.http_status);
        let mut error = reading.error.clone();
        // A response whose terminal event arrived is complete even when the
        // engine hangs up before the body's last byte.
        if let (Some(broke), false) = (&self.broke, reading.completed && !self.withheld) {
            error.get_or_insert_with(|| broke.clone());
        }
        // A usage with a malformed count (negative, a fraction, a string,
        // past what a row holds) is no count: the call is estimated, and
        // its row says why.
        if let Some(bad) = &reading.bad_usage {
            tracing::warn!(job_id = %self.shared.config.job_id, seq = self.seq, "{bad}");
        }
        let (tokens, estimated) = match reading.usage {
            Some(u) if reading.usage_final && reading.bad_usage.is_none() => (u, false),
            None if self.http_status >= 400 => (TokenUsage::default(), false),
            Some(u) if self.http_status >= 400 => (u, false),
            // No final usage arrived (cut by the upstream, the engine or the
            // broker): what was seen, with about four characters a token.
            _ => (reading.running_usage(self.request_bytes), true),
        };
        let status = if self.http_status >= 400 {
            CallStatus::HttpError
        } else if error.is_some() || !reading.completed {
            if error.is_none() {
                error = Some("the stream ended before the response completed".to_string());
            }
            CallStatus::StreamError
        } else {
            CallStatus::Ok
        };
        if let Some(bad) = reading.bad_usage {
            error = Some(match error {
                Some(e) => format!("{e}; {bad}"),
                None => bad,
            });
        }
        let prices = &self.shared.config.prices;
        let priced_model = reading.served_model.as_deref().unwrap_or(&self.model);
        // At the service tier the answer reports (priority, flex...).
        let tier = reading.service_tier.as_deref();
        let hour = reading.hour_writes;
        let cost = prices
            .cost_micros_kept(priced_model, &tokens, hour, tier)
            .or_else(|| prices.cost_micros_kept(&self.model, &tokens, hour, tier))
            .unwrap_or(0);
        if let Some(r) = self.reservation.take() {
            r.settle(cost);
        }
        let call = ModelCall {
            job_id: self.shared.config.job_id.clone(),
            attempt: self.shared.config.attempt,
            seq: self.seq,
            provider: self.shared.config.upstream.provider.label().to_string(),
            requested_model: super::call::shown_model(&self.model),
            served_model: reading.served_model,
            tokens,
            ttft_ms: self.ttft_ms,
            duration_ms: self.started.elapsed().as_millis() as u64,
            status,
            http_status: Some(self.http_status),
            error,
            estimated,
            price_version: prices.version.clone(),
            cost_micros: cost,
            started_at: self.started_at,
        };
        Some(match self.in_flight.take() {
            Some(in_flight) => in_flight.settle(call),
            None => self.shared.recorder.settle(call),
        })
    }

    /// True when `chunk`, just metered, completes the answer.
    fn completes(&self) -> bool {
        matches!(self.cut, Cut::No)
            && (self.whole || self.meter.as_ref().is_some_and(|m| m.completed()))
    }
}

impl Stream for MeteredBody {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            // The answer's final chunk (or its end) waits for its settled
            // row, which the write bounds.
            if let Some((write, _)) = self.closing.as_mut() {
                let _ = futures::ready!(Pin::new(write).poll(cx));
                let held = self.closing.take().and_then(|(_, chunk)| chunk);
                return Poll::Ready(held.map(Ok));
            }
            match std::mem::replace(&mut self.cut, Cut::Sent) {
                Cut::Pending(event) => return Poll::Ready(Some(Ok(event))),
                Cut::Sent => match self.settle() {
                    Some(write) => {
                        self.closing = Some((write, None));
                        continue;
                    }
                    None => return Poll::Ready(None),
                },
                Cut::No => self.cut = Cut::No,
            }
            return match self.inner.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(chunk))) => {
                    if self.ttft_ms.is_none() {
                        self.ttft_ms = Some(self.started.elapsed().as_millis() as u64);
                    }
                    if let Some(m) = self.meter.as_mut() {
                        m.feed(&chunk);
                    }
                    self.check_policy();
                    if self.completes() {
                        if let Some(write) = self.settle() {
                            self.closing = Some((write, Some(chunk)));
                            continue;
                        }
                    }
                    Poll::Ready(Some(Ok(chunk)))
                }
                Poll::Ready(Some(Err(e))) => {
                    self.broke = Some(format!("the upstream stream broke: {}", without_url(&e)));
                    drop(self.settle());
                    Poll::Ready(Some(Err(std::io::Error::other(e))))
                }
                Poll::Ready(None) => match self.settle() {
                    Some(write) => {
                        self.closing = Some((write, None));
                        continue;
                    }
                    None => Poll::Ready(None),
                },
                Poll::Pending => Poll::Pending,
            };
        }
    }
}

impl MeteredBody {
    /// Reads the rest of the answer without the engine, in a task of its
    /// own that ends with the answer (its row settled as it would have
    /// been for the engine) or with the job's broker (its row as far as
    /// read); false when there is nothing left to read or no runtime to
    /// read it on.
    fn drain(&mut self) -> bool {
        let unread = matches!(self.cut, Cut::No)
            && self.closing.is_none()
            && self.meter.as_ref().is_some_and(|m| !m.completed());
        if self.draining || !unread {
            return false;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return false;
        };
        let mut rest = MeteredBody {
            in_flight: self.in_flight.take(),
            closing: None,
            whole: self.whole,
            inner: std::mem::replace(&mut self.inner, Box::pin(futures::stream::empty())),
            meter: self.meter.take(),
            shared: self.shared.clone(),
            seq: self.seq,
            model: std::mem::take(&mut self.model),
            http_status: self.http_status,
            request_bytes: self.request_bytes,
            started: self.started,
            started_at: self.started_at,
            ttft_ms: self.ttft_ms,
            broke: self.broke.take(),
            reservation: self.reservation.take(),
            cut: Cut::No,
            withheld: self.withheld,
            draining: true,
            _upstream: self._upstream.take(),
        };
        let closed = self.shared.closed.clone();
        runtime.spawn(async move {
            let read = async { while futures::StreamExt::next(&mut rest).await.is_some() {} };
            tokio::select! {
                () = read => {}
                () = closed.cancelled() => rest.broker_stopped(),
            }
        });
        true
    }
}

impl MeteredBody {
    /// The job's broker stopped while the answer was read without the
    /// engine: its row settles as far as read.
    fn broker_stopped(&mut self) {
        self.broke = Some(
            "the engine closed the connection mid-stream, and the job's broker stopped before \
             the answer ended"
                .to_string(),
        );
        drop(self.settle());
    }
}

impl Drop for MeteredBody {
    fn drop(&mut self) {
        if self.meter.is_some() {
            self.broke
                .get_or_insert_with(|| "the engine closed the connection mid-stream".to_string());
            if self.drain() {
                return;
            }
            drop(self.settle());
        }
    }
}

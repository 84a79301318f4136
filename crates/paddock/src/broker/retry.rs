//! When the broker retries a call, and how long it waits. Retried are the
//! failures that say nothing was produced and that a later attempt may
//! succeed: HTTP 429 and 500/502/503/504/529, and a connection that failed
//! before the first response byte (refused, reset, closed). The wait is the
//! upstream's own `retry-after-ms` or `Retry-After` (seconds or an HTTP
//! date) when it gives one, else exponential backoff with full jitter
//! (uniform in `[0, min(max_delay, base × 2^(n-1))]`). There is no retry when
//! the attempts are used up, when the upstream asks for a wait longer than
//! `max_delay_ms`, or when the wait would end past the job's deadline. A
//! response whose body has started is never replayed (its bytes already
//! reached the engine).

use std::time::{Duration, Instant, SystemTime};

use http::HeaderMap;
use paddock_protocol::RetrySpec;
use rand::Rng;

/// One job's retry policy: the spec's `[broker.retry]` and the instant the
/// job's timeout ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetryPolicy {
    pub spec: RetrySpec,
    /// No wait may end after this instant (the job is killed then).
    pub deadline: Option<Instant>,
}

/// Why an attempt is not retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoRetry {
    /// The last allowed attempt failed.
    Exhausted,
    /// The upstream asked for a longer wait than `max_delay_ms`.
    WaitTooLong(Duration),
    /// The wait would end after the job's deadline.
    PastDeadline,
    /// A budget of the job is spent: the job is held.
    Held,
}

impl RetryPolicy {
    /// Attempts per call, the first included.
    pub fn max_attempts(&self) -> u32 {
        self.spec.max_attempts
    }

    /// The wait before attempt `failed + 1`, after attempt `failed` (1-based)
    /// failed in a retryable way; `retry_after` is the upstream's own ask.
    pub fn delay(
        &self,
        failed: u32,
        retry_after: Option<Duration>,
        now: Instant,
    ) -> Result<Duration, NoRetry> {
        if failed >= self.spec.max_attempts {
            return Err(NoRetry::Exhausted);
        }
        let max = Duration::from_millis(self.spec.max_delay_ms);
        let delay = match retry_after {
            Some(wait) if wait > max => return Err(NoRetry::WaitTooLong(wait)),
            Some(wait) => wait,
            None => {
                let ceiling = self.backoff_ceiling(failed);
                let ms = rand::thread_rng().gen_range(0..=ceiling.as_millis() as u64);
                Duration::from_millis(ms)
            }
        };
        match self.deadline {
            Some(deadline) if now + delay >= deadline => Err(NoRetry::PastDeadline),
            _ => Ok(delay),
        }
    }

    /// The upper bound of the jittered wait after attempt `failed`:
    /// `min(max_delay, base × 2^(failed-1))`.
    pub fn backoff_ceiling(&self, failed: u32) -> Duration {
        let exp = failed.saturating_sub(1).min(32);
        let ms = self
            .spec
            .base_delay_ms
            .saturating_mul(1u64 << exp)
            .min(self.spec.max_delay_ms);
        Duration::from_millis(ms)
    }
}

/// Statuses that mean "try again": rate limited, overloaded, or a server
/// or gateway error that produced nothing.
pub fn retryable_status(status: u16) -> bool {
    matches!(status, 429 | 500 | 502 | 503 | 504 | 529)
}

/// The wait the upstream asks for: `retry-after-ms` (milliseconds, OpenAI
/// and Anthropic), else `Retry-After` as seconds or as an HTTP date
/// (relative to `now`; a date in the past is no wait).
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(seconds(ms / 1000.0));
        }
    }
    let value = text("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| seconds(secs));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

/// `secs` (finite, not negative) as a wait: one too long for a
/// `Duration` (`1e300`) is the longest there is, not a panic of the
/// broker's handler.
fn seconds(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
}

/// A request error that means the upstream never answered: the connection
/// was refused, reset or closed before a response arrived. (A request that
/// could not even be built, or a redirect loop, is not retried.)
pub fn retryable_error(e: &reqwest::Error) -> bool {
    !(e.is_builder() || e.is_redirect() || e.is_status() || e.is_decode())
        && (e.is_connect() || e.is_request() || e.is_timeout())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn policy(max_attempts: u32, base: u64, max: u64) -> RetryPolicy {
        RetryPolicy {
            spec: RetrySpec {
                max_attempts,
                base_delay_ms: base,
                max_delay_ms: max,
            },
            deadline: None,
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.insert(*n, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn retry_after_in_every_form() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(
            retry_after(&headers(&[("retry-after", "2")]), now),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "0.5")]), now),
            Some(Duration::from_millis(500))
        );
        // retry-after-ms wins over retry-after.
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "20"), ("retry-after-ms", "150")]),
                now
            ),
            Some(Duration::from_millis(150))
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "Sun, 06 Nov 1994 08:49:40 GMT")]),
                now
            ),
            Some(Duration::from_secs(3))
        );
        // A date already past: no wait.
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "Sun, 06 Nov 1994 08:49:00 GMT")]),
                now
            ),
            Some(Duration::ZERO)
        );
        // Asks too long for a Duration: the longest wait (refused as
        // longer than max_delay_ms), never a panic.
        assert_eq!(
            retry_after(&headers(&[("retry-after", "1e300")]), now),
            Some(Duration::MAX)
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after-ms", "1e300")]), now),
            Some(Duration::MAX)
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")]), now), None);
        assert_eq!(retry_after(&headers(&[("retry-after", "-1")]), now), None);
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn statuses() {
        let retried: Vec<u16> = (100..600).filter(|s| retryable_status(*s)).collect();
        assert_eq!(retried, vec![429, 500, 502, 503, 504, 529]);
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = policy(10, 100, 1_000);
        let ceilings: Vec<u64> = (1..=6)
            .map(|n| p.backoff_ceiling(n).as_millis() as u64)
            .collect();
        assert_eq!(ceilings, vec![100, 200, 400, 800, 1_000, 1_000]);
        let now = Instant::now();
        for failed in 1..=9 {
            let d = p.delay(failed, None, now).unwrap();
            assert!(d <= p.backoff_ceiling(failed), "{d:?} after {failed}");
        }
    }

    #[test]
    fn no_retry_past_attempts_wait_or_deadline() {
        let now = Instant::now();
        let p = policy(3, 100, 1_000);
        assert_eq!(
            p.delay(2, Some(Duration::from_millis(700)), now),
            Ok(Duration::from_millis(700))
        );
        assert_eq!(p.delay(3, None, now), Err(NoRetry::Exhausted));
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(5)), now),
            Err(NoRetry::WaitTooLong(Duration::from_secs(5)))
        );
        let p = RetryPolicy {
            deadline: Some(now + Duration::from_millis(500)),
            ..p
        };
        assert_eq!(
            p.delay(1, Some(Duration::from_millis(600)), now),
            Err(NoRetry::PastDeadline)
        );
        assert_eq!(
            p.delay(1, Some(Duration::from_millis(400)), now),
            Ok(Duration::from_millis(400))
        );
    }
}

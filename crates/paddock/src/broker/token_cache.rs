//! The cache of a provider credential that expires (an Entra ID access
//! token, the AWS chain's temporary keys): one value reused until shortly
//! before it expires ([`fresh_until`]), then fetched again. Fetching is
//! single-flight: callers that find the value stale while a fetch is under
//! way wait for that fetch instead of starting their own.

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;

/// Until when a credential valid for `expires_in` from `now` is used: up to
/// five minutes before its expiry, or after half its life for a short-lived
/// one.
pub fn fresh_until(now: Instant, expires_in: Duration) -> Instant {
    let margin = (expires_in / 2).min(Duration::from_secs(300));
    now + (expires_in - margin)
}

/// A fetched credential and how long it is valid from the moment it was
/// asked for (`None`: it does not expire).
#[derive(Debug, Clone)]
pub struct Fetched<T> {
    pub value: T,
    pub expires_in: Option<Duration>,
}

/// One expiring credential, shared by the calls of a job.
#[derive(Debug)]
pub struct TokenCache<T> {
    /// The value and until when it is fresh (`None`: for ever).
    slot: Mutex<Option<(T, Option<Instant>)>>,
}

impl<T> Default for TokenCache<T> {
    fn default() -> Self {
        TokenCache {
            slot: Mutex::new(None),
        }
    }
}

impl<T: Clone> TokenCache<T> {
    /// The cached value while fresh, else the one `fetch` gets (cached for
    /// the next callers). A failed fetch caches nothing.
    pub async fn get<F, Fut, E>(&self, fetch: F) -> Result<T, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Fetched<T>, E>>,
    {
        // Held across the fetch: the single flight.
        let mut slot = self.slot.lock().await;
        if let Some((value, until)) = slot.as_ref() {
            if until.is_none_or(|u| Instant::now() < u) {
                return Ok(value.clone());
            }
        }
        let asked = Instant::now();
        let fetched = fetch().await?;
        let until = fetched.expires_in.map(|e| fresh_until(asked, e));
        *slot = Some((fetched.value.clone(), until));
        Ok(fetched.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    #[test]
    fn credentials_are_used_until_five_minutes_or_half_their_life_before_expiry() {
        let now = Instant::now();
        let cases = [(3600, 3300), (600, 300), (4, 2), (0, 0)];
        let got: Vec<Duration> = cases
            .iter()
            .map(|(life, _)| fresh_until(now, Duration::from_secs(*life)) - now)
            .collect();
        let want: Vec<Duration> = cases
            .iter()
            .map(|(_, fresh)| Duration::from_secs(*fresh))
            .collect();
        assert_eq!(got, want);
    }

    async fn fetch(
        count: &AtomicU32,
        expires_in: Option<Duration>,
    ) -> Result<Fetched<u32>, String> {
        let n = count.fetch_add(1, Ordering::SeqCst) + 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
        Ok(Fetched {
            value: n,
            expires_in,
        })
    }

    #[tokio::test]
    async fn concurrent_callers_share_one_fetch() {
        let cache = Arc::new(TokenCache::default());
        let count = Arc::new(AtomicU32::new(0));
        let tasks: Vec<_> = (0..10)
            .map(|_| {
                let (cache, count) = (cache.clone(), count.clone());
                tokio::spawn(async move {
                    cache
                        .get(|| fetch(&count, Some(Duration::from_secs(3600))))
                        .await
                })
            })
            .collect();
        let mut got = Vec::new();
        for t in tasks {
            got.push(t.await.unwrap().unwrap());
        }
        assert_eq!((got, count.load(Ordering::SeqCst)), (vec![1; 10], 1));
    }

    #[tokio::test]
    async fn a_stale_value_is_fetched_again_and_a_failure_is_not_cached() {
        let count = AtomicU32::new(0);
        let expiring = TokenCache::default();
        let mut got = Vec::new();
        for _ in 0..2 {
            got.push(expiring.get(|| fetch(&count, Some(Duration::ZERO))).await);
        }
        let lasting = TokenCache::default();
        for _ in 0..2 {
            got.push(lasting.get(|| fetch(&count, None)).await);
        }
        let failing: TokenCache<u32> = TokenCache::default();
        got.push(failing.get(|| async { Err("refused".to_string()) }).await);
        got.push(failing.get(|| fetch(&count, None)).await);
        assert_eq!(
            got,
            vec![
                Ok(1),
                Ok(2),
                Ok(3),
                Ok(3),
                Err("refused".to_string()),
                Ok(4)
            ]
        );
    }
}

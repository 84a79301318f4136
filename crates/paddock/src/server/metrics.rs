//! `GET /metrics`: the Prometheus exposition of what `crate::telemetry`
//! records. [`install`] makes the `metrics-exporter-prometheus` recorder
//! the process's global one (once: a second call returns the same
//! handle), with buckets for every `_seconds` histogram and a help line for
//! every metric; [`Metrics::render`] is the response body. Nothing is
//! sampled on a timer: histograms are drained into their buckets when the
//! text is rendered (and by [`Metrics::upkeep`], which a server runs so
//! that an unscraped server does not accumulate samples).

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::telemetry;

/// The media type of the exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Seconds: from a fast sandbox start (milliseconds) to a long job (hours).
const BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0,
    1800.0, 3600.0, 7200.0,
];

#[derive(Debug, Clone, thiserror::Error)]
pub enum MetricsError {
    #[error("cannot set the Prometheus histogram buckets: {0}")]
    Buckets(String),
    #[error("another metrics recorder is installed in this process")]
    Taken,
}

/// The installed recorder's handle.
#[derive(Debug, Clone)]
pub struct Metrics {
    handle: PrometheusHandle,
}

/// Installs the Prometheus recorder as the global one, or returns the one
/// this function installed before (concurrent first callers wait for one
/// installation).
pub fn install() -> Result<Metrics, MetricsError> {
    static INSTALLED: OnceLock<Result<PrometheusHandle, MetricsError>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), BUCKETS)
                .map_err(|e| MetricsError::Buckets(e.to_string()))?
                .build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).map_err(|_| MetricsError::Taken)?;
            describe();
            Ok(handle)
        })
        .clone()
        .map(|handle| Metrics { handle })
}

/// The `# HELP` line of every metric.
fn describe() {
    use metrics::Unit;
    metrics::describe_gauge!(telemetry::JOBS, "Jobs in the store by status.");
    metrics::describe_gauge!(telemetry::QUEUE_DEPTH, "Jobs waiting in the queue.");
    metrics::describe_counter!(
        telemetry::JOBS_FINISHED,
        "Jobs that reached a final status, by engine, project and status."
    );
    metrics::describe_histogram!(
        telemetry::JOB_DURATION,
        Unit::Seconds,
        "Wall time of finished jobs."
    );
    metrics::describe_counter!(
        telemetry::MODEL_CALLS,
        "Model calls through the broker, by provider, model and ledger status."
    );
    metrics::describe_counter!(
        telemetry::TOKENS,
        "Tokens of model calls, by provider, model and kind."
    );
    metrics::describe_counter!(
        telemetry::COST,
        "Cost of model calls in micro-dollars (USD / 1e6), by provider and model."
    );
    metrics::describe_histogram!(
        telemetry::BROKER_CALL_DURATION,
        Unit::Seconds,
        "Model calls through the broker, request to the answer's end."
    );
    metrics::describe_histogram!(
        telemetry::BROKER_TTFT,
        Unit::Seconds,
        "Model calls through the broker, request to the answer's first byte."
    );
    metrics::describe_histogram!(
        telemetry::SANDBOX_START,
        Unit::Seconds,
        "Starting an engine on its rung, the sandbox's set-up included."
    );
}

impl Metrics {
    /// The exposition text (the body of `GET /metrics`).
    pub fn render(&self) -> String {
        self.handle.render()
    }

    /// Drains histogram samples into their buckets every `every`, for as
    /// long as the returned task runs.
    pub fn upkeep(&self, every: Duration) -> tokio::task::JoinHandle<()> {
        let handle = self.handle.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                handle.run_upkeep();
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use paddock_protocol::job::JobStatus;

    /// The lines of `text` that start with `prefix`, sorted (series come
    /// in no set order).
    fn series<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
        let mut lines: Vec<&str> = text.lines().filter(|l| l.starts_with(prefix)).collect();
        lines.sort();
        lines
    }

    #[test]
    fn install_twice_is_one_recorder_and_gauges_render() {
        let first = install().unwrap();
        let second = install().unwrap();
        telemetry::queue_depth(7);
        telemetry::jobs_by_state(&[(JobStatus::Queued, 7), (JobStatus::Held, 0)]);
        let text = second.render();
        assert_eq!(
            (
                series(&first.render(), "paddock_queue_depth"),
                series(&text, "paddock_queue_depth"),
                series(&text, "paddock_jobs{"),
                series(&text, "# HELP paddock_queue_depth"),
            ),
            (
                vec!["paddock_queue_depth 7"],
                vec!["paddock_queue_depth 7"],
                vec![
                    "paddock_jobs{state=\"held\"} 0",
                    "paddock_jobs{state=\"queued\"} 7"
                ],
                vec!["# HELP paddock_queue_depth Jobs waiting in the queue."],
            )
        );
    }
}

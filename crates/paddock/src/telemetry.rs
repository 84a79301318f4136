//! Operational metrics, recorded where their values are known: a job's end
//! (the runner's `finish`), a model call's settled ledger row (the broker's
//! `Recorder`), an engine's start on its rung (the runner's `launch`), and
//! the queue and job counts (`paddock serve`'s scheduler). Through the
//! `metrics` facade: a global, cheap call that does nothing until a
//! recorder is installed, so the lower layers depend on no server; `paddock
//! serve` installs the Prometheus one (`server::metrics`) and renders
//! `/metrics`. Every metric's name and labels are here, once; docs/serve.md
//! lists them. Labels are bounded sets (engines, projects, providers,
//! models, statuses, rungs), never ids.

use std::time::Duration;

use paddock_protocol::job::{JobRecord, JobStatus};
use paddock_protocol::ledger::ModelCall;

/// Jobs in the store by status (gauge, `state`), set by the server.
pub const JOBS: &str = "paddock_jobs";
/// Jobs waiting in the queue (gauge), set by the server.
pub const QUEUE_DEPTH: &str = "paddock_queue_depth";
/// Jobs that reached a final status (counter: `engine`, `project`, `status`).
pub const JOBS_FINISHED: &str = "paddock_jobs_finished_total";
/// Wall time of finished jobs (histogram: `engine`, `project`, `status`).
pub const JOB_DURATION: &str = "paddock_job_duration_seconds";
/// Settled model calls (counter: `provider`, `model`, `status`).
pub const MODEL_CALLS: &str = "paddock_model_calls_total";
/// Tokens of settled model calls (counter: `provider`, `model`, `kind`).
pub const TOKENS: &str = "paddock_tokens_total";
/// Cost of settled model calls in micro-dollars (counter: `provider`, `model`).
pub const COST: &str = "paddock_cost_microdollars_total";
/// A model call through the broker, request to its answer's end
/// (histogram: `provider`, `status`).
pub const BROKER_CALL_DURATION: &str = "paddock_broker_call_duration_seconds";
/// A model call through the broker, request to the first byte of the
/// answer (histogram: `provider`).
pub const BROKER_TTFT: &str = "paddock_broker_ttft_seconds";
/// Starting the engine on its rung, the sandbox's set-up included
/// (histogram: `rung`).
pub const SANDBOX_START: &str = "paddock_sandbox_start_seconds";

/// Records a job that reached its final status.
pub fn job_finished(record: &JobRecord) {
    let labels = [
        ("engine", record.engine.clone()),
        ("project", record.project.clone()),
        ("status", record.status.as_str().to_owned()),
    ];
    metrics::counter!(JOBS_FINISHED, &labels).increment(1);
    if let Some(ms) = record.duration_ms {
        metrics::histogram!(JOB_DURATION, &labels).record(Duration::from_millis(ms));
    }
}

/// Records a settled model call: its tokens, cost and latency, labelled
/// with `model` (the broker's choice of a bounded set of names: a job's
/// requested name is its own text).
pub fn model_call(call: &ModelCall, model: &str) {
    let provider = call.provider.clone();
    let model = model.to_owned();
    let status = call.status.as_str().to_owned();
    metrics::counter!(
        MODEL_CALLS,
        "provider" => provider.clone(),
        "model" => model.clone(),
        "status" => status.clone()
    )
    .increment(1);
    let t = &call.tokens;
    for (kind, n) in [
        ("input", t.input_tokens),
        ("cached_input", t.cached_input_tokens),
        ("cache_write", t.cache_write_tokens),
        ("output", t.output_tokens),
        ("reasoning", t.reasoning_tokens),
    ] {
        if n > 0 {
            metrics::counter!(
                TOKENS,
                "provider" => provider.clone(),
                "model" => model.clone(),
                "kind" => kind
            )
            .increment(n);
        }
    }
    if let Ok(micros) = u64::try_from(call.cost_micros) {
        metrics::counter!(COST, "provider" => provider.clone(), "model" => model).increment(micros);
    }
    metrics::histogram!(BROKER_CALL_DURATION, "provider" => provider.clone(), "status" => status)
        .record(Duration::from_millis(call.duration_ms));
    if let Some(ms) = call.ttft_ms {
        metrics::histogram!(BROKER_TTFT, "provider" => provider).record(Duration::from_millis(ms));
    }
}

/// Records how long starting the engine on `rung` took.
pub fn engine_started(rung: &'static str, took: Duration) {
    metrics::histogram!(SANDBOX_START, "rung" => rung).record(took);
}

/// Sets the jobs-by-status gauge from `counts` (every status the caller
/// knows of, zeros included, so a status that emptied drops to 0).
pub fn jobs_by_state(counts: &[(JobStatus, u64)]) {
    for (status, n) in counts {
        metrics::gauge!(JOBS, "state" => status.as_str()).set(*n as f64);
    }
}

/// Sets the queue depth gauge.
pub fn queue_depth(n: u64) {
    metrics::gauge!(QUEUE_DEPTH).set(n as f64);
}

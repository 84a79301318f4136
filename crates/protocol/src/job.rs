//! The job record: what `paddock run --json` prints and what the store keeps
//! for every job.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::event::TokenUsage;

/// Final and intermediate states of a job. Each final state has its own
/// process exit code (see `docs/cli.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// Accepted and waiting for a runner to claim it (the queue's state).
    Queued,
    Running,
    Done,
    Failed,
    Held,
    TimedOut,
    Cancelled,
    /// Ended, then sent back for another attempt by a review (the results
    /// loop's state; the next attempt is a new job).
    Bounced,
}

impl JobStatus {
    /// Every status, in declaration order.
    pub const ALL: [JobStatus; 8] = [
        JobStatus::Queued,
        JobStatus::Running,
        JobStatus::Done,
        JobStatus::Failed,
        JobStatus::Held,
        JobStatus::TimedOut,
        JobStatus::Cancelled,
        JobStatus::Bounced,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::Running => "running",
            JobStatus::Done => "done",
            JobStatus::Failed => "failed",
            JobStatus::Held => "held",
            JobStatus::TimedOut => "timed_out",
            JobStatus::Cancelled => "cancelled",
            JobStatus::Bounced => "bounced",
        }
    }

    pub fn parse(s: &str) -> Option<JobStatus> {
        match s {
            "queued" => Some(JobStatus::Queued),
            "running" => Some(JobStatus::Running),
            "done" => Some(JobStatus::Done),
            "failed" => Some(JobStatus::Failed),
            "held" => Some(JobStatus::Held),
            "timed_out" => Some(JobStatus::TimedOut),
            "cancelled" => Some(JobStatus::Cancelled),
            "bounced" => Some(JobStatus::Bounced),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobRecord {
    pub id: String,
    pub ticket_id: String,
    pub project: String,
    pub attempt: u32,
    pub engine: String,
    pub model: String,
    pub isolation: String,
    pub status: JobStatus,
    /// Why the job ended as it did (the first fatal error, the limit hit...;
    /// a cancel names who asked: `cancelled while queued, asked by …`,
    /// `cancelled, asked by … at …`, docs/api.md); on a `queued` job, why a
    /// server that claimed it put it back (it may not run it:
    /// docs/serve.md).
    pub reason: Option<String>,
    pub branch: String,
    pub base_ref: String,
    /// Where the job's patch artifact is stored.
    pub patch_path: Option<String>,
    pub changed_files: Vec<String>,
    #[serde(flatten)]
    pub tokens: TokenUsage,
    pub model_calls: u64,
    pub cost_micros: i64,
    pub engine_exit_code: Option<i32>,
    #[serde(with = "time::serde::rfc3339")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub finished_at: Option<OffsetDateTime>,
    pub duration_ms: Option<u64>,
    /// When the job was disposed of (`DELETE /v1/jobs/{id}`): its
    /// artifacts, the patch among them, were removed (`patch_path` is
    /// then empty); its record, events and ledger rows stay. Absent for a
    /// job that was not.
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub disposed_at: Option<OffsetDateTime>,
}

impl JobRecord {
    /// The first record of job `id` run from `spec`, created at
    /// `created`: `running`, nothing spent, no outcome yet.
    pub fn new(id: &str, spec: &crate::JobSpec, created: OffsetDateTime) -> JobRecord {
        JobRecord {
            id: id.to_string(),
            ticket_id: spec.ticket.id.clone(),
            project: spec.ticket.project.clone(),
            attempt: spec.attempt(),
            engine: spec.engine.kind.as_str().to_string(),
            model: spec.engine.model.clone(),
            isolation: spec.isolation.as_str().to_string(),
            status: JobStatus::Running,
            reason: None,
            branch: spec.branch(),
            base_ref: spec.repository.base_ref.clone(),
            patch_path: None,
            changed_files: Vec::new(),
            tokens: TokenUsage::default(),
            model_calls: 0,
            cost_micros: 0,
            engine_exit_code: None,
            created_at: created,
            finished_at: None,
            duration_ms: None,
            disposed_at: None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::JobStatus;

    /// Every state's stored name is its JSON name and parses back; the
    /// queue's `queued` and the results loop's `bounced` are among them.
    #[test]
    fn every_status_round_trips_by_name() {
        let all = [
            JobStatus::Queued,
            JobStatus::Running,
            JobStatus::Done,
            JobStatus::Failed,
            JobStatus::Held,
            JobStatus::TimedOut,
            JobStatus::Cancelled,
            JobStatus::Bounced,
        ];
        let names: Vec<(&str, String, Option<JobStatus>)> = all
            .iter()
            .map(|s| {
                (
                    s.as_str(),
                    serde_json::to_string(s).unwrap(),
                    JobStatus::parse(s.as_str()),
                )
            })
            .collect();
        let want: Vec<(&str, String, Option<JobStatus>)> = [
            "queued",
            "running",
            "done",
            "failed",
            "held",
            "timed_out",
            "cancelled",
            "bounced",
        ]
        .iter()
        .zip(all)
        .map(|(n, s)| (*n, format!("\"{n}\""), Some(s)))
        .collect();
        assert_eq!(names, want);
    }
}

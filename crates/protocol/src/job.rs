//! The job record: what `paddock run --json` prints and what the store keeps
//! for every job.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::event::TokenUsage;

/// Final and intermediate states of a job. Each final state has its own
/// process exit code (see `docs/cli.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Running,
    Done,
    Failed,
    Held,
    TimedOut,
    Cancelled,
}

impl JobStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            JobStatus::Running => "running",
            JobStatus::Done => "done",
            JobStatus::Failed => "failed",
            JobStatus::Held => "held",
            JobStatus::TimedOut => "timed_out",
            JobStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<JobStatus> {
        match s {
            "running" => Some(JobStatus::Running),
            "done" => Some(JobStatus::Done),
            "failed" => Some(JobStatus::Failed),
            "held" => Some(JobStatus::Held),
            "timed_out" => Some(JobStatus::TimedOut),
            "cancelled" => Some(JobStatus::Cancelled),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub id: String,
    pub ticket_id: String,
    pub project: String,
    pub attempt: u32,
    pub engine: String,
    pub model: String,
    pub isolation: String,
    pub status: JobStatus,
    /// Why the job ended as it did (the first fatal error, the limit hit...).
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
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub finished_at: Option<OffsetDateTime>,
    pub duration_ms: Option<u64>,
}

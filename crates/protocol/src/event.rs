//! The normalized agent event: what every engine's JSONL becomes, what the
//! store keeps (dense `seq` per job) and what consumers stream. The schema is
//! documented in `docs/events.md`; changing a field here is a wire change.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::egress::EgressRecord;

/// One stored, normalized event of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentEvent {
    pub job_id: String,
    /// Dense per job, starting at 1.
    pub seq: u64,
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    #[serde(flatten)]
    pub body: EventBody,
}

/// What happened. Serialized with a `kind` tag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventBody {
    /// A lifecycle step of the job or of the engine's session.
    Status {
        phase: Phase,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// Text the agent says to the user.
    Text { text: String },
    /// Reasoning or thinking the engine exposes.
    Thought { text: String },
    /// The agent invokes a tool (a shell command, a file edit, an MCP tool...).
    ToolCall {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        tool: String,
        /// For shell tools: the command line as the engine reports it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command: Option<String>,
        #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
        input: serde_json::Value,
    },
    /// The result of a tool call.
    ToolResult {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i64>,
        is_error: bool,
        output: String,
    },
    /// A file in the workspace was added, updated or deleted.
    FileChange { path: String, change: ChangeKind },
    /// Token usage as the engine reports it (the ledger, not this, is the
    /// source of truth for metering).
    Usage {
        #[serde(flatten)]
        tokens: TokenUsage,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
    },
    /// What the job produced: the patch and the files it touches.
    ArtifactSummary {
        patch_path: String,
        changed_files: Vec<String>,
        patch_bytes: u64,
        /// The job's process died before the job ended: the reaper saved
        /// the work done until then (the patch may be partial).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        interrupted: bool,
    },
    /// A policy decision: a denial or a limit hit.
    Policy { rule: String, message: String },
    /// Something went wrong. `fatal` errors end the job.
    Error {
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<String>,
        fatal: bool,
    },
    /// A connection the job tried through its egress proxy, allowed or
    /// refused, once it ended (docs/egress.md).
    Network(EgressRecord),
    /// An engine event Paddock does not (yet) normalize, kept verbatim.
    Raw {
        engine: String,
        #[serde(rename = "type")]
        event_type: String,
        data: serde_json::Value,
    },
}

impl EventBody {
    /// The `kind` tag as it appears on the wire.
    pub fn kind(&self) -> &'static str {
        match self {
            EventBody::Status { .. } => "status",
            EventBody::Text { .. } => "text",
            EventBody::Thought { .. } => "thought",
            EventBody::ToolCall { .. } => "tool_call",
            EventBody::ToolResult { .. } => "tool_result",
            EventBody::FileChange { .. } => "file_change",
            EventBody::Usage { .. } => "usage",
            EventBody::ArtifactSummary { .. } => "artifact_summary",
            EventBody::Policy { .. } => "policy",
            EventBody::Error { .. } => "error",
            EventBody::Network(_) => "network",
            EventBody::Raw { .. } => "raw",
        }
    }
}

/// Lifecycle phases carried by `status` events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Provisioning,
    Launching,
    /// The engine opened its session (Codex `thread.started`, Claude `system/init`).
    SessionStarted,
    /// The job resumes its prior attempt's engine session
    /// (`--attempt-after`); `detail` names the session and the attempt.
    SessionResumed,
    /// The job starts a new session instead of resuming its prior
    /// attempt's; `detail` says why (the model changed...).
    SessionForked,
    /// The setup cache (docs/egress.md#the-setup-cache): `detail` says
    /// whether setup's output was restored from it (the setup commands did
    /// not run), stored in it, or why not.
    SetupCache,
    /// The engine started a turn (Codex `turn.started`).
    TurnStarted,
    /// The engine finished a turn.
    TurnCompleted,
    Concluding,
    /// The result is being kept and published (branch, pull request,
    /// closeout); `detail` is the outcome it is published as (`done`…). A
    /// job whose last status is this one died while publishing: the reaper
    /// leaves it for `paddock publish` to finish.
    Publishing,
    Done,
    Failed,
    Held,
    TimedOut,
    Cancelled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Add,
    Update,
    Delete,
}

/// Token counts by kind. `input_tokens` excludes cached and cache-write
/// tokens; `reasoning_tokens` is a part of `output_tokens`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub cache_write_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_tokens: u64,
}

impl TokenUsage {
    /// Every token of the call(s); saturates at `u64::MAX`.
    pub fn total(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.cached_input_tokens)
            .saturating_add(self.cache_write_tokens)
            .saturating_add(self.output_tokens)
    }

    /// Adds `other`, each kind saturating at `u64::MAX` (counts come from
    /// providers and scenarios: an absurd one must not wrap).
    pub fn add(&mut self, other: &TokenUsage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(other.cached_input_tokens);
        self.cache_write_tokens = self
            .cache_write_tokens
            .saturating_add(other.cache_write_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(other.reasoning_tokens);
    }
}

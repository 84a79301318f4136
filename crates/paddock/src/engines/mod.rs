//! Engine adapters: one file per engine, each implementing the five
//! operations of DESIGN.md (`prepare`, `command`, `parse`, `finish`,
//! `capabilities`). Adapters know nothing of isolation or storage: they turn a
//! [`LaunchContext`] into files, a command line and an environment, and the
//! engine's JSONL into normalized [`EventBody`]s.

use std::path::{Path, PathBuf};

use paddock_protocol::{EngineKind, EventBody};

pub mod claude;
pub mod codex;
pub mod jsonl;
pub mod pins;

/// Everything an adapter needs to know about one job's launch.
#[derive(Debug, Clone)]
pub struct LaunchContext {
    /// The engine binary to run (already resolved to a path).
    pub binary: PathBuf,
    pub model: String,
    pub reasoning_effort: Option<String>,
    /// The checkout the engine works in.
    pub workdir: PathBuf,
    /// The job's HOME (also holds CODEX_HOME and Claude's config dir).
    pub home: PathBuf,
    /// The job's TMPDIR.
    pub tmp: PathBuf,
    /// The broker's base URL for this job, e.g. `http://127.0.0.1:41234`.
    pub broker_url: String,
    /// The worthless per-job token the engine presents to the broker.
    pub job_token: String,
    /// The prompt handed to the engine.
    pub prompt: String,
    /// The PATH the engine runs with (its own directory and system dirs).
    pub path_env: String,
    /// The host profile's denied commands, for the engine's own enforcement.
    pub policy: Option<EnginePolicy>,
    /// Claude Code through Google Vertex AI: `(project, region)`; the
    /// broker serves the Vertex paths and holds the service account.
    pub vertex: Option<(String, String)>,
    /// Claude Code through Amazon Bedrock: the region; the broker serves
    /// the Bedrock runtime paths and holds the AWS credentials.
    pub bedrock: Option<String>,
}

/// Layer 2 of the host profile as an adapter needs it (see `policy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnginePolicy {
    pub profile_id: String,
    pub deny_commands: Vec<String>,
    /// The shell command line of `paddock hook pre-tool-use` for this job.
    pub hook_command: String,
}

/// Variables every engine gets: its own HOME, XDG dirs and TMPDIR under the
/// job's directories, a fixed locale, no colour. Nothing is inherited.
pub fn base_env(ctx: &LaunchContext) -> Vec<(String, String)> {
    let home = ctx.home.display().to_string();
    let tmp = ctx.tmp.display().to_string();
    vec![
        ("PATH".into(), ctx.path_env.clone()),
        ("HOME".into(), home.clone()),
        ("USER".into(), "paddock".into()),
        ("LOGNAME".into(), "paddock".into()),
        ("SHELL".into(), "/bin/bash".into()),
        ("LANG".into(), "C.UTF-8".into()),
        ("TERM".into(), "dumb".into()),
        ("NO_COLOR".into(), "1".into()),
        ("TMPDIR".into(), tmp),
        ("XDG_CONFIG_HOME".into(), format!("{home}/.config")),
        ("XDG_DATA_HOME".into(), format!("{home}/.local/share")),
        ("XDG_STATE_HOME".into(), format!("{home}/.local/state")),
        ("XDG_CACHE_HOME".into(), format!("{home}/.cache")),
    ]
}

/// A file an adapter wants written before launch (absolute path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedFile {
    pub path: PathBuf,
    pub contents: String,
}

/// The process to start: argv and a complete environment (never inherited).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// Written to the engine's stdin, which is then closed: the prompt, so
    /// that its size is not bound by the kernel's limit on one argument
    /// (128 KiB, E2BIG). `None`: stdin is `/dev/null`.
    pub stdin: Option<String>,
}

/// What an engine can do beyond running a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// The engine runs hooks Paddock can use to deny a tool call.
    pub hooks: bool,
}

/// How the engine's run ended, as the adapter judges it from the exit status
/// and what the stream said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Completed,
    Failed { reason: String },
}

/// What a parser saw that decides the outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamSummary {
    /// The engine reported a completed turn / a result.
    pub completed: bool,
    /// The first fatal error the engine reported.
    pub failure: Option<String>,
}

/// Turns an engine's stdout, one line at a time, into normalized events.
/// Parsers are stateful (they pair tool calls with their results).
pub trait StreamParser: Send {
    /// One line of the engine's stdout (without the newline). A malformed
    /// line yields an `error` event; an unknown event type a `raw` event.
    fn parse_line(&mut self, line: &str) -> Vec<EventBody>;
    fn summary(&self) -> StreamSummary;
}

pub trait EngineAdapter: Send + Sync {
    fn kind(&self) -> EngineKind;
    /// Config files to write before launch.
    fn prepare(&self, ctx: &LaunchContext) -> Vec<PreparedFile>;
    /// The command line and environment.
    fn command(&self, ctx: &LaunchContext) -> CommandSpec;
    /// A fresh parser for one run; `workdir` lets it report paths relative to the checkout.
    fn parser(&self, workdir: &Path) -> Box<dyn StreamParser>;
    /// The outcome from the exit code (`None`: killed by a signal) and the stream.
    fn finish(&self, exit_code: Option<i32>, summary: &StreamSummary) -> Outcome;
    fn capabilities(&self) -> Capabilities;
}

/// The adapter for an engine kind.
pub fn adapter(kind: EngineKind) -> Box<dyn EngineAdapter> {
    match kind {
        EngineKind::Codex => Box::new(codex::Codex),
        EngineKind::Claude => Box::new(claude::Claude),
    }
}

/// Makes `path` relative to `workdir` when it lies inside it.
pub fn relative_to(workdir: &Path, path: &str) -> String {
    let p = Path::new(path);
    match p.strip_prefix(workdir) {
        Ok(rel) => rel.display().to_string(),
        Err(_) => path.to_string(),
    }
}

/// Common outcome rule: a clean exit with a completed stream is done;
/// anything else fails with the most specific reason known.
pub fn judge(exit_code: Option<i32>, summary: &StreamSummary) -> Outcome {
    if let Some(reason) = &summary.failure {
        return Outcome::Failed {
            reason: reason.clone(),
        };
    }
    match exit_code {
        Some(0) if summary.completed => Outcome::Completed,
        Some(0) => Outcome::Failed {
            reason: "the engine exited without finishing its turn".to_string(),
        },
        Some(code) => Outcome::Failed {
            reason: format!("the engine exited with status {code}"),
        },
        None => Outcome::Failed {
            reason: "the engine was killed by a signal".to_string(),
        },
    }
}

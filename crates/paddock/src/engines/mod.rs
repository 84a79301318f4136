//! Engine adapters: one directory per engine, each implementing
//! [`EngineAdapter`], everything Paddock knows of that engine: how it is
//! installed and which version is pinned, the model API it speaks, the
//! instructions file it reads, the files it needs before launch (its
//! config and its copy of the host profile's deny rules), its command line
//! and environment, the parser of its JSONL into normalized
//! [`EventBody`]s, its outcome, the paths of its home the job must not
//! change, the refusals it reports (on its stream or in files it leaves),
//! and its capabilities. Adapters know nothing of isolation, storage or
//! the profile's matcher: `engines` sits below `policy`, `runner` and the
//! launcher, which ask the adapter rather than naming an engine.

use std::path::{Path, PathBuf};

use paddock_protocol::{EngineKind, EventBody};

pub mod claude;
pub mod codex;
pub mod denial;
pub mod jsonl;
pub mod pins;
#[cfg(feature = "stand-in-engine")]
pub mod stand_in;
pub mod version;

pub use denial::{DeniedBy, EngineDenial, FoundAfter};
pub use pins::Pin;

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
    /// The job's egress proxy, when its spec lists destinations: the
    /// engine and its tools get the proxy variables pointing at it.
    pub egress_url: Option<String>,
    /// What the job's credentials add to its environment: the CA-bundle
    /// variables and each placeholder (never a real value).
    pub egress_env: Vec<(String, String)>,
    /// The host's variables every job gets (the config file's `[jobs]
    /// env`, `RunnerConfig::tools`): none Paddock sets itself.
    pub tools_env: Vec<(String, String)>,
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
    /// The engine's own session to continue (`--attempt-after` with the
    /// same engine, model and rung): its files are already in `home`.
    pub resume: Option<String>,
    /// Whether the engine is offered the model provider's web search
    /// (`[network] web_search`); off, its web search tool is left out
    /// (and the broker refuses a call that carries it).
    pub web_search: bool,
}

/// Layer 2 of the host profile as an adapter needs it (see `policy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnginePolicy {
    pub profile_id: String,
    /// The profile's denied command prefixes, as written (none empty).
    pub deny_commands: Vec<String>,
    /// The shell command line of `paddock hook pre-tool-use` for this job.
    pub hook_command: String,
    /// How long the engine waits for the hook, in seconds
    /// ([`hook_timeout_secs`] of the job's limit).
    pub hook_timeout_secs: u64,
}

/// The longest hook timeout both pinned engines keep: Claude Code arms a
/// JavaScript timer with the hook's `timeout` in milliseconds, and a timer
/// past 2^31-1 ms fires at once (as a timed-out hook, which goes on).
pub const MAX_HOOK_TIMEOUT_SECS: u64 = 2_147_483;

/// What the hook's timeout adds to the engine's limit.
const HOOK_TIMEOUT_MARGIN_SECS: u64 = 60;

/// The hook's timeout for an engine limited to `engine_limit_secs`: longer
/// than the engine may run, so that no hook is stopped by its timeout (both
/// engines read a hook that has not answered by then as "go on", and the
/// command runs) before the job's own clock stops the engine. At most
/// [`MAX_HOOK_TIMEOUT_SECS`] (admission refuses `deny_commands` for a
/// job whose limit it would not cover).
pub fn hook_timeout_secs(engine_limit_secs: u64) -> u64 {
    engine_limit_secs
        .saturating_add(HOOK_TIMEOUT_MARGIN_SECS)
        .min(MAX_HOOK_TIMEOUT_SECS)
}

/// The longest engine limit [`hook_timeout_secs`] covers.
pub const MAX_HOOKED_LIMIT_SECS: u64 = MAX_HOOK_TIMEOUT_SECS - HOOK_TIMEOUT_MARGIN_SECS;

/// Variables every engine gets: its own HOME, XDG dirs and TMPDIR under the
/// job's directories, a fixed locale, no colour, and the proxy variables
/// when the job has an egress proxy. Nothing is inherited.
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
    .into_iter()
    // A host tool's variable that a credential's placeholder also names
    // gives way to the placeholder (the proxy substitutes it): one name
    // is never set twice.
    .chain(
        ctx.tools_env
            .iter()
            .filter(|(name, _)| !ctx.egress_env.iter().any(|(n, _)| n == name))
            .cloned(),
    )
    .chain(
        ctx.egress_url
            .iter()
            .flat_map(|url| crate::egress::proxy_env(url)),
    )
    .chain(ctx.egress_env.iter().cloned())
    .collect()
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
    /// Paths in the engine's home that stay read-only inside the writable
    /// ones on the sandbox rung (its copy of the host profile's rules),
    /// whether or not they exist: [`EngineAdapter::protected_paths`].
    pub protect: Vec<PathBuf>,
}

/// The model API an engine speaks to the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireApi {
    /// OpenAI Responses (`POST /v1/responses`).
    Responses,
    /// Anthropic Messages (`POST /v1/messages`).
    Messages,
    /// OpenAI Chat Completions (`POST /v1/chat/completions`).
    Chat,
}

/// What an engine can do beyond running a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// The engine runs hooks Paddock can use to deny a tool call.
    pub hooks: bool,
    /// The engine continues a session of an earlier run
    /// ([`EngineAdapter::session_place`], [`LaunchContext::resume`]).
    pub resume: bool,
}

/// Where an engine keeps the files of one session under the job's home:
/// what Paddock copies out after a run and back in before a resumed one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionPlace {
    /// The directory, relative to the job's home.
    pub dir: PathBuf,
    /// How many directory levels below `dir` the files lie (Codex's
    /// `YYYY/MM/DD`: 3).
    pub depth: usize,
    /// The session's files are the regular files whose name ends with this.
    pub suffix: String,
}

/// The longest session id Paddock keeps.
const SESSION_ID_MAX: usize = 128;

/// The most tool calls a stream parser remembers while they wait for their
/// result (Claude Code's `tool_use` until its `tool_result`, Codex's items
/// started until completed). The stream is the job's output: calls that
/// never end, each with an id and a path as long as a line may be, were
/// all held in Paddock's memory, up to the job's whole stdout. A call past
/// the bound, or one whose id is longer than [`CALL_ID_MAX`] bytes, is not
/// remembered: its result then stands without its call (no file change
/// read from it on Claude Code; on Codex its `tool_call` event comes again
/// at its completion). No engine has thousands of calls open at once.
pub const OPEN_CALLS_MAX: usize = 4096;

/// The longest call id a stream parser remembers (the engines' ids are
/// a few dozen bytes).
pub const CALL_ID_MAX: usize = 256;

/// The longest file path a stream parser remembers of a call (Linux's
/// `PATH_MAX`): a longer one names no file the job could have written.
pub const CALL_PATH_MAX: usize = 4096;

/// Whether a parser that remembers `open` calls may remember one more,
/// whose id is `id`.
pub fn may_remember(open: usize, id: &str) -> bool {
    open < OPEN_CALLS_MAX && id.len() <= CALL_ID_MAX
}

/// `raw` as a session id when it looks like one (1 to 128 ASCII letters,
/// digits, `-` and `_`: the UUIDs both engines use); what the job printed
/// is hostile, and the id becomes a file name and an argument.
pub fn session_id(raw: &str) -> Option<String> {
    let ok = !raw.is_empty()
        && raw.len() <= SESSION_ID_MAX
        && !raw.starts_with('-')
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    ok.then(|| raw.to_string())
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
    /// The engine's session id, as its stream announced it (checked by
    /// [`session_id`]).
    pub session: Option<String>,
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
    /// How the engine is installed (binary, npm package) and the version
    /// Paddock is tested with.
    fn install(&self) -> Pin;
    /// The model API it speaks to the broker.
    fn wire_api(&self) -> WireApi;
    /// The instructions file it reads at the checkout's root.
    fn instructions_file(&self) -> &'static str;
    /// Files to write before launch: its config and, with a host profile,
    /// its copy of the deny rules.
    fn prepare(&self, ctx: &LaunchContext) -> Vec<PreparedFile>;
    /// The command line and environment.
    fn command(&self, ctx: &LaunchContext) -> CommandSpec;
    /// The program that really starts for the resolved install `binary`,
    /// with the variables its launcher would have set: the native
    /// executable behind a launcher script when the engine's package ships
    /// one (no interpreter started at every run or version check). By
    /// default `binary` itself.
    fn native_program(&self, binary: &Path) -> (PathBuf, Vec<(String, String)>) {
        (binary.to_path_buf(), Vec::new())
    }
    /// Paths under the job's `home` the job must not change (the deny
    /// files of `prepare`), present or not.
    fn protected_paths(&self, home: &Path) -> Vec<PathBuf>;
    /// A fresh parser for one run; `workdir` lets it report paths relative to the checkout.
    fn parser(&self, workdir: &Path) -> Box<dyn StreamParser>;
    /// The refusals one line of its stdout reports.
    fn stream_denials(&self, line: &str) -> Vec<EngineDenial>;
    /// The refusals found in what it left under the job's `home` once it
    /// has exited (what its stream does not show): files the job can
    /// write, so at most [`denial::MAX_FOUND_AFTER`] of them, each command
    /// at most [`denial::MAX_COMMAND_CHARS`] characters.
    fn denials_after(&self, home: &Path) -> FoundAfter;
    /// The outcome from the exit code (`None`: killed by a signal) and the stream.
    fn finish(&self, exit_code: Option<i32>, summary: &StreamSummary) -> Outcome;
    fn capabilities(&self) -> Capabilities;
    /// Where the files of `session` lie in the home of a run in `workdir`
    /// (`None`: the engine cannot resume; see [`Capabilities::resume`]).
    fn session_place(&self, _workdir: &Path, _session: &str) -> Option<SessionPlace> {
        None
    }
}

/// The adapter for an engine kind: the registry, one line per engine (the
/// only place outside its directory that names an engine, with its
/// `EngineKind` variant on the wire and its `KINDS` entry for doctor).
pub fn adapter(kind: EngineKind) -> Box<dyn EngineAdapter> {
    match kind {
        EngineKind::Codex => Box::new(codex::Codex),
        EngineKind::Claude => Box::new(claude::Claude),
        #[cfg(feature = "stand-in-engine")]
        EngineKind::StandIn => Box::new(stand_in::StandIn),
    }
}

/// Every shipped engine kind, in the order `paddock doctor` lists them.
pub const KINDS: [EngineKind; 2] = [EngineKind::Codex, EngineKind::Claude];

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

/// A launch context for the adapters' tests.
#[cfg(test)]
pub(crate) fn test_context() -> LaunchContext {
    LaunchContext {
        binary: PathBuf::from("/opt/engine/bin/engine"),
        model: "m-1".into(),
        reasoning_effort: None,
        workdir: PathBuf::from("/data/jobs/job-1/work"),
        home: PathBuf::from("/data/jobs/job-1/home"),
        tmp: PathBuf::from("/data/jobs/job-1/tmp"),
        broker_url: "http://127.0.0.1:9".into(),
        job_token: "job-token".into(),
        egress_url: None,
        egress_env: Vec::new(),
        tools_env: Vec::new(),
        prompt: "Do it.".into(),
        path_env: "/usr/bin:/bin".into(),
        policy: None,
        vertex: None,
        bedrock: None,
        resume: None,
        web_search: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host's tool variables come after Paddock's own, and one a
    /// credential's placeholder also names gives way to it: no name is
    /// set twice.
    #[test]
    fn a_tool_variable_gives_way_to_a_credentials_placeholder() {
        let ctx = LaunchContext {
            tools_env: vec![
                ("RUSTUP_HOME".into(), "/opt/rustup".into()),
                ("NPM_TOKEN".into(), "host-value".into()),
            ],
            egress_env: vec![("NPM_TOKEN".into(), "paddock-placeholder-1".into())],
            ..test_context()
        };
        let env = base_env(&ctx);
        let named = |name: &str| {
            env.iter()
                .filter(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            (
                named("RUSTUP_HOME"),
                named("NPM_TOKEN"),
                named("HOME").len()
            ),
            (vec!["/opt/rustup"], vec!["paddock-placeholder-1"], 1)
        );
    }

    /// Only what looks like a session id is kept: it becomes a file name
    /// and an argument.
    #[test]
    fn session_ids_are_plain() {
        let got: Vec<Option<String>> = [
            "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
            "ca5a5f52_x",
            "",
            "-rf",
            "../etc",
            "a b",
            &"a".repeat(129),
        ]
        .iter()
        .map(|s| session_id(s))
        .collect();
        assert_eq!(
            got,
            vec![
                Some("0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b".to_string()),
                Some("ca5a5f52_x".to_string()),
                None,
                None,
                None,
                None,
                None,
            ]
        );
    }
}

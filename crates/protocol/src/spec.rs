//! The job spec: the ticket, the repository, the engine, the upstream, the
//! budget and the limits of one job, read from TOML or JSON. Unknown fields
//! are errors; every error names the file, the field and the reason. The
//! format is documented in `docs/job-spec.md`.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::context::ContextSpec;
use crate::local_source::{url_is, LocalSource, SourceForm, UrlIs};
use crate::network::{NetworkSpec, SetupSpec};
use crate::results::ResultsSpec;

#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("cannot read job spec {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("job spec {path}: unsupported extension (expected .toml or .json)")]
    Extension { path: PathBuf },
    /// The path named a directory: `specs` lists the spec files in it
    /// (`job.toml, job-claude.toml`), or says there are none.
    #[error("job spec {path} is a directory; name a spec file in it ({specs})")]
    Directory { path: PathBuf, specs: String },
    /// Nothing but white space (an empty file, nothing piped to `-`):
    /// said so, where it read as the first field missing (`missing field
    /// `ticket` (line 1, column 1)`).
    #[error(
        "job spec {path} is empty: a spec has at least [ticket], [repository], [engine] and \
         [upstream] (docs/job-spec.md)"
    )]
    Empty { path: PathBuf },
    /// `field` empty: the document itself, or a syntax error.
    #[error("job spec {path}: {}{message}", crate::parse_error::field_prefix(.field))]
    Parse {
        path: PathBuf,
        field: String,
        message: String,
    },
    #[error("job spec {path}: field `{field}`: {reason}")]
    Invalid {
        path: PathBuf,
        field: String,
        reason: String,
    },
}

/// One thing a spec names on the host it runs on
/// ([`JobSpec::host_references`]), with the spec field that names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostReference<'a> {
    /// A file or directory read on the host (absolute once loaded).
    Path { field: &'static str, path: &'a Path },
    /// The local repository the job is cloned from
    /// ([`JobSpec::local_source`]): a path, and the paths git may open
    /// for it ([`LocalSource::tried`]).
    Source(LocalSource<'a>),
    /// A secret the host resolves (`env:NAME`, `file:PATH`).
    Secret {
        field: &'static str,
        key: &'a KeyRef,
    },
    /// A URL the host connects to for the spec (its credentials, where
    /// the spec names one, with it).
    Destination { field: &'static str, url: &'a str },
    /// Credentials the host finds by itself when the spec names no key
    /// (a keyless `vertex` or `bedrock` upstream): the host's own cloud
    /// identity, used for the spec.
    Ambient {
        field: &'static str,
        source: AmbientCredentials<'a>,
    },
}

/// The host's own cloud credentials a keyless upstream uses
/// ([`HostReference::Ambient`]), named as a server's `allow_refs` lists
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmbientCredentials<'a> {
    /// Google's Application Default Credentials (`vertex`):
    /// `google:application-default`.
    GoogleDefault,
    /// `AWS_BEARER_TOKEN_BEDROCK`, else the AWS credential chain
    /// (`bedrock`): `aws:credential-chain`.
    AwsChain,
    /// The same with `upstream.aws_profile`: `aws:profile:NAME`.
    AwsProfile(&'a str),
    /// The host user's own git credentials (credential helpers,
    /// `~/.netrc`, SSH keys and agent), which fetch a source URL without
    /// `repository.token` and anything over SSH without a key of the
    /// spec's: `git:credentials`.
    Git,
}

impl fmt::Display for AmbientCredentials<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AmbientCredentials::GoogleDefault => f.write_str("google:application-default"),
            AmbientCredentials::AwsChain => f.write_str("aws:credential-chain"),
            AmbientCredentials::AwsProfile(p) => write!(f, "aws:profile:{p}"),
            AmbientCredentials::Git => f.write_str("git:credentials"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    pub ticket: Ticket,
    pub repository: RepositorySpec,
    pub engine: EngineSpec,
    pub upstream: UpstreamSpec,
    #[serde(default)]
    pub budget: BudgetSpec,
    #[serde(default)]
    pub limits: LimitsSpec,
    /// How the broker treats the upstream (retries).
    #[serde(default, skip_serializing_if = "BrokerSpec::is_default")]
    pub broker: BrokerSpec,
    #[serde(default)]
    pub isolation: Isolation,
    /// Templates and skills for the generated context (docs/context.md).
    #[serde(default)]
    pub context: ContextSpec,
    /// The host profile the job runs under, and the weaker guarantees it accepts.
    #[serde(default, skip_serializing_if = "PolicySpec::is_empty")]
    pub policy: PolicySpec,
    /// What the agent may reach through the broker's egress proxy
    /// (docs/egress.md); default: nothing but the model.
    #[serde(default, skip_serializing_if = "NetworkSpec::is_empty")]
    pub network: NetworkSpec,
    /// Commands run before the engine, with their own destinations.
    #[serde(default, skip_serializing_if = "SetupSpec::is_default")]
    pub setup: SetupSpec,
    /// Where the result goes: the forge, the pull request's draft state
    /// and labels, the ticket's link (docs/results.md).
    #[serde(default, skip_serializing_if = "ResultsSpec::is_default")]
    pub results: ResultsSpec,
}

/// `[policy]`: which HostProfile applies (docs/host-profile.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySpec {
    /// A profile id (the store, then the shipped presets) or a profile file
    /// (`.json`/`.toml`, relative to the spec file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Profile rules the job's rung or engine cannot enforce, accepted as
    /// advisory only (by their field names, e.g. `mem_limit_mb`; the former
    /// camelCase names are still read, and deprecated).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accept_degraded: Vec<String>,
}

/// The profile rules a job may list in `policy.accept_degraded`.
pub const DEGRADABLE_RULES: &[&str] = &[
    "deny_commands",
    "max_concurrent_jobs",
    "cpu_limit",
    "mem_limit_mb",
    "timeout_min",
    "network",
];

/// The snake_case name of a rule `accept_degraded` may list, given in
/// either spelling (`memLimitMb` is `mem_limit_mb`; `network` has one);
/// `None` for a name that is none of [`DEGRADABLE_RULES`].
pub fn degradable_rule(name: &str) -> Option<&'static str> {
    crate::host_profile::profile_key(name)
        .or_else(|| DEGRADABLE_RULES.iter().copied().find(|r| *r == name))
        .filter(|r| DEGRADABLE_RULES.contains(r))
}

impl PolicySpec {
    pub fn is_empty(&self) -> bool {
        self.profile.is_none() && self.accept_degraded.is_empty()
    }

    /// Whether `accept_degraded` lists `rule` (a snake_case rule name), in
    /// either spelling.
    pub fn accepts(&self, rule: &str) -> bool {
        self.accept_degraded
            .iter()
            .any(|a| degradable_rule(a) == Some(rule))
    }

    /// The entries of `accept_degraded` in the deprecated camelCase
    /// spelling, each with its snake_case name.
    pub fn deprecated_rules(&self) -> Vec<(&str, &'static str)> {
        self.accept_degraded
            .iter()
            .filter_map(|a| {
                crate::host_profile::profile_key(a)
                    .filter(|snake| snake != a)
                    .map(|snake| (a.as_str(), snake))
            })
            .collect()
    }

    /// True when `profile` names a file rather than an id.
    pub fn profile_is_file(name: &str) -> bool {
        name.contains('/') || name.ends_with(".json") || name.ends_with(".toml")
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ticket {
    /// Ticket key, used in the branch name: letters, digits, `.`, `_`, `-`.
    pub id: String,
    pub title: String,
    /// Task type (bug, chore, feature...): free text used for routing and rollups.
    #[serde(rename = "type", default = "default_ticket_type")]
    pub kind: String,
    #[serde(default = "default_project")]
    pub project: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub done_when: Vec<String>,
    #[serde(default)]
    pub constraints: Vec<String>,
    /// The paths the change may touch (globs from the repository's top:
    /// `*`, `?`, a whole-segment `**`); a patch that changes any other
    /// file is flagged in the closeout. Empty: no constraint.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub touch_only: Vec<String>,
    #[serde(default)]
    pub comments: Vec<TicketComment>,
    #[serde(default)]
    pub prior_attempts: Vec<PriorAttempt>,
}

fn default_ticket_type() -> String {
    "chore".to_string()
}

fn default_project() -> String {
    "default".to_string()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TicketComment {
    pub author: String,
    pub body: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriorAttempt {
    pub attempt: u32,
    pub outcome: String,
    #[serde(default)]
    pub summary: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// What the attempt tried.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tried: Vec<String>,
    /// What failed in it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
    /// The reviewer's comment that bounced it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounce_comment: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepositorySpec {
    /// A local git repository (relative paths are relative to the spec file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// Any URL `git clone` accepts (including a bundle file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The commit-ish the job starts from.
    #[serde(default = "default_base_ref")]
    pub base_ref: String,
    /// The credential Paddock fetches an `https://` (or loopback
    /// `http://`) `url` with, sent as HTTP basic `x-access-token:TOKEN`:
    /// `env:NAME` or `file:PATH`, held on the host, never in the job. A
    /// URL never carries a credential itself (`url_credentials.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<KeyRef>,
}

fn default_base_ref() -> String {
    "HEAD".to_string()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineSpec {
    pub kind: EngineKind,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// A pinned engine binary; when absent the engine is looked up on PATH.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary: Option<PathBuf>,
    /// Models the job may call (names, or prefixes ending in `*`); empty:
    /// any model. The broker checks the requested and the served model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_models: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    Codex,
    Claude,
    /// A test-only engine (`paddock`'s `engines/stand_in/`), never shipped.
    #[cfg(feature = "stand-in-engine")]
    #[doc(hidden)]
    StandIn,
}

impl EngineKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            EngineKind::Codex => "codex",
            EngineKind::Claude => "claude",
            #[cfg(feature = "stand-in-engine")]
            EngineKind::StandIn => "stand_in",
        }
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningEffort {
    Minimal,
    Low,
    Medium,
    High,
}

impl ReasoningEffort {
    pub fn as_str(&self) -> &'static str {
        match self {
            ReasoningEffort::Minimal => "minimal",
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamSpec {
    pub provider: ProviderKind,
    /// Where the broker reads the provider key: `env:NAME` or `file:PATH`
    /// (optional for `vertex`: without it, Application Default Credentials;
    /// and for `bedrock`: without it, the AWS credential chain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<KeyRef>,
    /// Override of the provider's API base URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The scenario file the `scripted` upstream replays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<PathBuf>,
    /// How the key is sent: `bearer` (OpenAI's `Authorization: Bearer`, the
    /// default for `openai`) or `api-key` (Azure OpenAI / Foundry style).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_header: Option<KeyHeaderKind>,
    /// Vertex only: the Google Cloud project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vertex_project: Option<String>,
    /// Vertex only: the region, e.g. `us-east5`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vertex_region: Option<String>,
    /// Bedrock only: the AWS region, e.g. `us-east-1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bedrock_region: Option<String>,
    /// Bedrock without a key only: the profile of the AWS shared config and
    /// credentials files the AWS credential chain uses (else `AWS_PROFILE`,
    /// else `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws_profile: Option<String>,
    /// Let calls to models without a price through (metered, priced at 0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_unpriced: bool,
    /// `openai` (Azure OpenAI) only: get Microsoft Entra ID tokens with the
    /// client-credentials grant; `key` is then the app's client secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entra: Option<EntraSpec>,
}

/// A Microsoft Entra ID app registration whose tokens the broker sends to
/// Azure OpenAI (`[upstream.entra]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntraSpec {
    /// The directory (tenant) id.
    pub tenant_id: String,
    /// The application (client) id.
    pub client_id: String,
    /// The authority, `https://login.microsoftonline.com` unless set
    /// (sovereign clouds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authority: Option<String>,
    /// The scope, `https://cognitiveservices.azure.com/.default` unless set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    Openai,
    Anthropic,
    Scripted,
    /// Claude on Google Vertex AI; the key is the service account's JSON
    /// key, or without a key Google's Application Default Credentials.
    Vertex,
    /// Claude on Amazon Bedrock; the key is the AWS credentials JSON (or a
    /// Bedrock API key with `key_header = "bearer"`), or without a key
    /// `AWS_BEARER_TOKEN_BEDROCK` or the AWS credential chain.
    Bedrock,
}

impl ProviderKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            ProviderKind::Openai => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Scripted => "scripted",
            ProviderKind::Vertex => "vertex",
            ProviderKind::Bedrock => "bedrock",
        }
    }
}

/// How an OpenAI-compatible upstream takes its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyHeaderKind {
    /// `Authorization: Bearer KEY`.
    Bearer,
    /// `api-key: KEY`.
    ApiKey,
}

/// A reference to a secret, never the secret itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyRef {
    Env(String),
    File(PathBuf),
}

impl KeyRef {
    pub fn parse(s: &str) -> Result<KeyRef, String> {
        if let Some(name) = s.strip_prefix("env:") {
            let valid = !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit());
            if valid {
                Ok(KeyRef::Env(name.to_string()))
            } else {
                Err(format!(
                    "`{s}`: an environment variable name must be letters, digits and `_`"
                ))
            }
        } else if let Some(path) = s.strip_prefix("file:") {
            if path.is_empty() {
                Err("`file:` needs a path".to_string())
            } else {
                Ok(KeyRef::File(PathBuf::from(path)))
            }
        } else {
            Err(
                "a key is referenced as `env:NAME` or `file:PATH`, never given as a value"
                    .to_string(),
            )
        }
    }
}

impl fmt::Display for KeyRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyRef::Env(name) => write!(f, "env:{name}"),
            KeyRef::File(path) => write!(f, "file:{}", path.display()),
        }
    }
}

impl Serialize for KeyRef {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for KeyRef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        KeyRef::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetSpec {
    /// The most this job may spend, in US dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_usd: Option<f64>,
    /// The most the ticket may spend across all its attempts (this one
    /// included), in US dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket_max_usd: Option<f64>,
    /// The most the ticket's project may spend per UTC day, in US dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_daily_max_usd: Option<f64>,
}

impl BudgetSpec {
    /// The job's ceiling in integer micro-dollars.
    pub fn max_micros(&self) -> Option<i64> {
        self.max_usd.map(usd_to_micros)
    }

    /// The ticket's ceiling across attempts in integer micro-dollars.
    pub fn ticket_max_micros(&self) -> Option<i64> {
        self.ticket_max_usd.map(usd_to_micros)
    }

    /// The project's daily ceiling in integer micro-dollars.
    pub fn project_daily_max_micros(&self) -> Option<i64> {
        self.project_daily_max_usd.map(usd_to_micros)
    }
}

fn usd_to_micros(usd: f64) -> i64 {
    (usd * 1_000_000.0).round() as i64
}

/// `[broker]`: how the broker treats the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrokerSpec {
    /// Retries of transient upstream failures (docs/broker.md#retries).
    #[serde(default)]
    pub retry: RetrySpec,
    /// The largest upstream answer the broker holds to meter it: one SSE
    /// event, one event-stream frame, or a whole (non-streaming) JSON body.
    /// A longer one is cut with an error naming this limit
    /// (docs/broker.md#limits). 65 536 to 268 435 456.
    #[serde(default = "BrokerSpec::default_max_upstream_event_bytes")]
    pub max_upstream_event_bytes: u64,
}

impl BrokerSpec {
    pub const DEFAULT_MAX_UPSTREAM_EVENT_BYTES: u64 = 16 << 20;
    const MAX_UPSTREAM_EVENT_BYTES_RANGE: std::ops::RangeInclusive<u64> = (64 << 10)..=(256 << 20);

    fn default_max_upstream_event_bytes() -> u64 {
        Self::DEFAULT_MAX_UPSTREAM_EVENT_BYTES
    }

    fn is_default(&self) -> bool {
        *self == BrokerSpec::default()
    }

    /// Why the settings are out of range: (field, reason).
    fn check(&self) -> Result<(), (&'static str, String)> {
        self.retry.check()?;
        if !Self::MAX_UPSTREAM_EVENT_BYTES_RANGE.contains(&self.max_upstream_event_bytes) {
            return Err((
                "broker.max_upstream_event_bytes",
                format!(
                    "must be 65536 to 268435456, got {}",
                    self.max_upstream_event_bytes
                ),
            ));
        }
        Ok(())
    }
}

impl Default for BrokerSpec {
    fn default() -> Self {
        BrokerSpec {
            retry: RetrySpec::default(),
            max_upstream_event_bytes: Self::DEFAULT_MAX_UPSTREAM_EVENT_BYTES,
        }
    }
}

/// `[broker.retry]`: the broker retries a call the upstream answered with
/// 429 or 500/502/503/504/529, or whose connection failed before the first
/// response byte, with exponential backoff and full jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrySpec {
    /// Attempts per call, the first included (1 = no retries). 1 to 10.
    #[serde(default = "RetrySpec::default_max_attempts")]
    pub max_attempts: u32,
    /// The backoff's base: attempt n waits up to `base × 2^(n-1)`. 1 to 60 000.
    #[serde(default = "RetrySpec::default_base_delay_ms")]
    pub base_delay_ms: u64,
    /// The longest wait between attempts, `Retry-After` included: an upstream
    /// asking for a longer wait gets no retry. `base_delay_ms` to 600 000.
    #[serde(default = "RetrySpec::default_max_delay_ms")]
    pub max_delay_ms: u64,
}

impl RetrySpec {
    pub const DEFAULT_MAX_ATTEMPTS: u32 = 4;
    pub const DEFAULT_BASE_DELAY_MS: u64 = 500;
    pub const DEFAULT_MAX_DELAY_MS: u64 = 30_000;

    fn default_max_attempts() -> u32 {
        Self::DEFAULT_MAX_ATTEMPTS
    }
    fn default_base_delay_ms() -> u64 {
        Self::DEFAULT_BASE_DELAY_MS
    }
    fn default_max_delay_ms() -> u64 {
        Self::DEFAULT_MAX_DELAY_MS
    }

    /// Why the policy is out of range: (field, reason).
    fn check(&self) -> Result<(), (&'static str, String)> {
        if !(1..=10).contains(&self.max_attempts) {
            return Err((
                "broker.retry.max_attempts",
                format!("must be 1 to 10, got {}", self.max_attempts),
            ));
        }
        if !(1..=60_000).contains(&self.base_delay_ms) {
            return Err((
                "broker.retry.base_delay_ms",
                format!("must be 1 to 60000, got {}", self.base_delay_ms),
            ));
        }
        if !(self.base_delay_ms..=600_000).contains(&self.max_delay_ms) {
            return Err((
                "broker.retry.max_delay_ms",
                format!(
                    "must be from base_delay_ms ({}) to 600000, got {}",
                    self.base_delay_ms, self.max_delay_ms
                ),
            ));
        }
        Ok(())
    }
}

impl Default for RetrySpec {
    fn default() -> Self {
        RetrySpec {
            max_attempts: Self::DEFAULT_MAX_ATTEMPTS,
            base_delay_ms: Self::DEFAULT_BASE_DELAY_MS,
            max_delay_ms: Self::DEFAULT_MAX_DELAY_MS,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsSpec {
    /// Wall-clock limit for the engine, in seconds.
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// The longest line of the engine's output Paddock holds and parses,
    /// in bytes; a longer line is kept whole in `engine.jsonl` but becomes
    /// an `error` event instead of being parsed.
    #[serde(default = "default_max_line_bytes")]
    pub max_line_bytes: u64,
    /// The longest text an event stores in one field, in bytes; longer
    /// text is cut, with a marker giving the original size.
    #[serde(default = "default_max_event_bytes")]
    pub max_event_bytes: u64,
    /// The most the engine may print on its stdout in all, in bytes (each
    /// line becomes events in the store and `engine.jsonl` keeps it all):
    /// past it the engine is stopped and the job fails naming the limit;
    /// its stderr artifact keeps as much, the rest dropped.
    #[serde(default = "default_max_output_bytes")]
    pub max_output_bytes: u64,
    /// The most disk the job's own directory (its work tree or overlay
    /// layer, home, tmp, session files) may grow by while it runs, in
    /// bytes, counted as allocated blocks with every file or directory at
    /// least one 4 KiB block: past it the job (engine, setup commands and
    /// every process they started) is stopped and it fails naming the
    /// limit. A host profile's `max_disk_mb` caps it.
    #[serde(default = "default_max_disk_bytes")]
    pub max_disk_bytes: u64,
    /// The most records the job may leave in the store: its events, its
    /// egress attempts and its ledger rows, counted together. The first
    /// record the job causes past it (an output line's event, a refused
    /// request, a denied connection, a denial) is not kept and stops the
    /// job (engine, setup commands and every process they started), which
    /// fails naming the limit and how many records were not kept. Paddock's
    /// own events and the ledger row of every call that reached the model
    /// provider are always kept. A host profile's `max_records` caps it.
    #[serde(default = "default_max_records")]
    pub max_records: u64,
}

fn default_timeout() -> u64 {
    1800
}

/// Default of `limits.max_line_bytes`: 4 MiB.
pub const DEFAULT_MAX_LINE_BYTES: u64 = 4 << 20;
/// Upper bound of `limits.max_line_bytes`: 16 MiB, so Paddock's memory
/// stays flat whatever the engine prints.
pub const MAX_LINE_BYTES: u64 = 16 << 20;
/// Default of `limits.max_event_bytes`: 64 KiB.
pub const DEFAULT_MAX_EVENT_BYTES: u64 = 64 << 10;

fn default_max_line_bytes() -> u64 {
    DEFAULT_MAX_LINE_BYTES
}

fn default_max_event_bytes() -> u64 {
    DEFAULT_MAX_EVENT_BYTES
}

/// Default of `limits.max_output_bytes`: 1 GiB.
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 1 << 30;
/// Lower bound of `limits.max_output_bytes`: 1 MiB.
pub const MIN_MAX_OUTPUT_BYTES: u64 = 1 << 20;

fn default_max_output_bytes() -> u64 {
    DEFAULT_MAX_OUTPUT_BYTES
}

/// Default of `limits.max_disk_bytes`: 10 GiB.
pub const DEFAULT_MAX_DISK_BYTES: u64 = 10 << 30;
/// Lower bound of `limits.max_disk_bytes`: 1 MiB.
pub const MIN_MAX_DISK_BYTES: u64 = 1 << 20;

fn default_max_disk_bytes() -> u64 {
    DEFAULT_MAX_DISK_BYTES
}

/// Default of `limits.max_records`: 100,000 (a long job of a real engine
/// leaves a few thousand).
pub const DEFAULT_MAX_RECORDS: u64 = 100_000;
/// Lower bound of `limits.max_records`: 100 (room for Paddock's own
/// events of a job's phases).
pub const MIN_MAX_RECORDS: u64 = 100;

fn default_max_records() -> u64 {
    DEFAULT_MAX_RECORDS
}

impl Default for LimitsSpec {
    fn default() -> Self {
        LimitsSpec {
            timeout_secs: default_timeout(),
            max_line_bytes: default_max_line_bytes(),
            max_event_bytes: default_max_event_bytes(),
            max_output_bytes: default_max_output_bytes(),
            max_disk_bytes: default_max_disk_bytes(),
            max_records: default_max_records(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// The default: `sandbox` where this host can start one (the check
    /// `paddock doctor` makes), else `process`, with a `status` event
    /// saying why. The runner resolves it before the job starts.
    #[default]
    Auto,
    /// A plain child process, trusted like a local agent.
    Process,
    /// Paddock's own Linux sandbox (namespaces, Landlock, seccomp, cgroups),
    /// reaching nothing but the job's broker (docs/sandbox.md). A host that
    /// cannot start one refuses the job.
    Sandbox,
}

impl Isolation {
    pub fn as_str(&self) -> &'static str {
        match self {
            Isolation::Auto => "auto",
            Isolation::Process => "process",
            Isolation::Sandbox => "sandbox",
        }
    }
}

/// How a spec's relative paths are made plain once joined to its
/// directory (`JobSpec::resolve_paths`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plain {
    /// `.` and `..` taken away where that names what the path as written
    /// names (`lexical_path::plain_if_same`: the file system is asked):
    /// a spec file the user gave.
    IfSame,
    /// `.` taken away, `..` kept as written (nothing asked): a spec given
    /// as text, which a server takes from a submitter.
    Dots,
}

/// The spec's text fields that are one line of plain text, by field name,
/// each borrowed (`one_line_names!(spec)`) or borrowed to change
/// (`one_line_names!(spec, mut)`): the ticket's title, type and project,
/// the model, the pull request's labels and the ticket's comments'
/// authors. One list for the check of a new spec
/// (`JobSpec::one_line_names`) and the mending of a stored one
/// (`JobSpec::mend_one_line_names`), so that a field added to one is in
/// the other.
macro_rules! one_line_names {
    ($spec:expr $(, $m:ident)?) => {{
        let spec = & $($m)? *$spec;
        let mut names: Vec<(String, & $($m)? String)> = vec![
            ("ticket.title".to_string(), & $($m)? spec.ticket.title),
            ("ticket.type".to_string(), & $($m)? spec.ticket.kind),
            ("ticket.project".to_string(), & $($m)? spec.ticket.project),
            ("engine.model".to_string(), & $($m)? spec.engine.model),
        ];
        for (i, label) in (& $($m)? spec.results.labels).into_iter().enumerate() {
            names.push((format!("results.labels[{i}]"), label));
        }
        for (i, c) in (& $($m)? spec.ticket.comments).into_iter().enumerate() {
            names.push((format!("ticket.comments[{i}].author"), & $($m)? c.author));
        }
        names
    }};
}

impl JobSpec {
    /// Reads, parses and validates a spec file; relative paths in it are
    /// resolved against the file's directory.
    pub fn load(path: &Path) -> Result<JobSpec, SpecError> {
        if path.is_dir() {
            return Err(SpecError::Directory {
                path: path.to_path_buf(),
                specs: spec_files_in(path),
            });
        }
        let text = std::fs::read_to_string(path).map_err(|source| SpecError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        if text.trim().is_empty() {
            return Err(SpecError::Empty {
                path: path.to_path_buf(),
            });
        }
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        let mut spec = match ext {
            "toml" => JobSpec::from_toml(&text, path)?,
            "json" => JobSpec::from_json(&text, path)?,
            _ => {
                return Err(SpecError::Extension {
                    path: path.to_path_buf(),
                })
            }
        };
        let base = path.parent().unwrap_or(Path::new("."));
        spec.resolve_paths(base, Plain::IfSame);
        Ok(spec)
    }

    /// Parses and validates a spec given as text (`paddock run -`, a
    /// server's submitted and stored specs): JSON if it starts with `{`,
    /// TOML otherwise; relative paths in it are resolved against `base`;
    /// `origin` names the source in errors. Their `..` are kept as written
    /// ([`Plain::Dots`]): making them plain asks the file system about the
    /// path (`lexical_path::plain_if_same`), and a server would then look
    /// up paths a submitter chose before its `allow_paths` judged them
    /// (telling back, in the path it echoes, whether one exists or is a
    /// link, and triggering whatever an automounter does on a lookup).
    pub fn from_text(text: &str, origin: &Path, base: &Path) -> Result<JobSpec, SpecError> {
        if text.trim().is_empty() {
            return Err(SpecError::Empty {
                path: origin.to_path_buf(),
            });
        }
        let mut spec = if text.trim_start().starts_with('{') {
            JobSpec::from_json(text, origin)?
        } else {
            JobSpec::from_toml(text, origin)?
        };
        spec.resolve_paths(base, Plain::Dots);
        Ok(spec)
    }

    /// Parses TOML; `origin` names the source in errors.
    pub fn from_toml(text: &str, origin: &Path) -> Result<JobSpec, SpecError> {
        let de = toml::Deserializer::new(text);
        let mut spec: JobSpec = serde_path_to_error::deserialize(de).map_err(|e| {
            let (field, message) = crate::parse_error::toml(e, text);
            SpecError::Parse {
                path: origin.to_path_buf(),
                field: crate::plain_text::escaped(&field).into_owned(),
                message: crate::plain_text::escaped(&message).into_owned(),
            }
        })?;
        spec.local_file_urls();
        spec.validate(origin)?;
        Ok(spec)
    }

    /// Parses JSON; `origin` names the source in errors.
    pub fn from_json(text: &str, origin: &Path) -> Result<JobSpec, SpecError> {
        let spec = JobSpec::json_only(text, origin)?;
        spec.validate(origin)?;
        Ok(spec)
    }

    /// Parses a spec the store kept (the JSON admission wrote, its paths
    /// already absolute; one that is not, [`JobSpec::relative_host_paths`]
    /// names), read again after it was admitted: by a requeue,
    /// `paddock publish`, a next attempt (`--attempt-after`, a turn), the
    /// reaper, a server taking a queued job. It is validated as a new spec
    /// is, but a rule that only refuses a slip in new input, and was
    /// added after the spec may have been admitted, is applied by
    /// mending instead: the same destination twice in one list
    /// (`network::check_list`) is read as once. Every rule the host relies
    /// on at run time still refuses it.
    pub fn from_stored(text: &str, origin: &Path) -> Result<JobSpec, SpecError> {
        let mut spec = JobSpec::json_only(text, origin)?;
        crate::network::drop_repeats(&mut spec.network.allow);
        spec.setup.drop_repeats();
        // A spec stored before its title and names had to be one line of
        // plain text (a turn's title kept its input's tabs) still loads:
        // their control and bidirectional characters are left out as it
        // is read.
        spec.mend_one_line_names();
        spec.validate(origin)?;
        Ok(spec)
    }

    /// A stored spec read to clean up after its job only (revoking the
    /// forge tokens a killed publish left): as [`JobSpec::from_stored`],
    /// and when a rule added since refuses it (a `base_branch` of `HEAD`,
    /// a `%` in a `file://` URL, a character plain text now refuses in a
    /// ref), as it was stored, the spec having passed the rules of its
    /// day. Never to run, publish or show a job: those read
    /// [`JobSpec::from_stored`], which names the field. Before, such a
    /// job's leftover tokens could not be revoked ("revoke the job's
    /// forge tokens: job spec …").
    pub fn from_stored_for_cleanup(text: &str, origin: &Path) -> Result<JobSpec, SpecError> {
        JobSpec::from_stored(text, origin).or_else(|refused| match refused {
            SpecError::Invalid { .. } => {
                let mut spec = JobSpec::json_only(text, origin)?;
                spec.mend_one_line_names();
                Ok(spec)
            }
            other => Err(other),
        })
    }

    fn json_only(text: &str, origin: &Path) -> Result<JobSpec, SpecError> {
        let mut de = serde_json::Deserializer::from_str(text);
        let mut spec: JobSpec = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let (field, message) = crate::parse_error::json(e);
            SpecError::Parse {
                path: origin.to_path_buf(),
                field: crate::plain_text::escaped(&field).into_owned(),
                message: crate::plain_text::escaped(&message).into_owned(),
            }
        })?;
        spec.local_file_urls();
        Ok(spec)
    }

    /// `file://localhost/PATH` (RFC 8089's name of a file on this host)
    /// read as `file:///PATH`, as it is parsed: git reads it so, and the
    /// host's checks of what a spec names (`host_references`, a push's
    /// repository) then read the same `/PATH`, where any other host is
    /// refused (`check_file_urls`).
    fn local_file_urls(&mut self) {
        let push = self.results.push.as_mut().map(|p| &mut p.url);
        for url in [self.repository.url.as_mut(), push].into_iter().flatten() {
            let local = url.strip_prefix("file://").and_then(|rest| {
                let (host, path) = rest.split_at_checked("localhost".len())?;
                (host.eq_ignore_ascii_case("localhost") && path.starts_with('/'))
                    .then(|| format!("file://{path}"))
            });
            if let Some(local) = local {
                *url = local;
            }
        }
    }

    fn resolve_paths(&mut self, base: &Path, plain: Plain) {
        // Absolute, whatever the caller gave: the spec is stored and read
        // again later from another working directory (`paddock publish`
        // fetching into the local source, `--attempt-after` comparing
        // sources), where `localrepo` of `paddock run job.toml` names
        // nothing, or another repository.
        let base = if base.as_os_str().is_empty() {
            Path::new(".")
        } else {
            base
        };
        // Joined and made plain by their text (`lexical_path`): shown and
        // used as `/home/u/My Repos/app`, not `…/specs/../My Repos/app`,
        // where that names what the path as written names (through a
        // linked directory `..` is its target's parent).
        let base = &std::path::absolute(base).unwrap_or_else(|_| base.to_path_buf());
        let joined = |p: &Path| match plain {
            Plain::IfSame => crate::lexical_path::plain_if_same(&base.join(p)),
            Plain::Dots => crate::lexical_path::without_dots(&base.join(p)),
        };
        let join = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = joined(p);
            }
        };
        if let Some(p) = self.repository.path.as_mut() {
            join(p);
        }
        if let Some(url) = self.repository.url.as_mut() {
            // A URL git reads as a local path (`local_source::url_is`) is
            // made absolute: it is cloned (and mirrored, keyed by the URL)
            // from another working directory than the caller's.
            let relative = match url_is(url) {
                UrlIs::Local(path, SourceForm::PathUrl) => path.is_relative(),
                UrlIs::Local(..) | UrlIs::Remote => false,
            };
            if relative {
                *url = joined(Path::new(url.as_str())).display().to_string();
            }
        }
        if let Some(p) = self.upstream.scenario.as_mut() {
            join(p);
        }
        if let Some(p) = self.engine.binary.as_mut() {
            if p.components().count() > 1 {
                join(p);
            }
        }
        if let Some(gh) = self.results.github.as_mut() {
            if let Some(KeyRef::File(p)) = gh.token.as_mut() {
                join(p);
            }
            if let Some(KeyRef::File(p)) = gh.app.as_mut().map(|a| &mut a.private_key) {
                join(p);
            }
        }
        if let Some(KeyRef::File(p)) = self.results.gitlab.as_mut().map(|g| &mut g.token) {
            join(p);
        }
        if let Some(KeyRef::File(p)) = self.upstream.key.as_mut() {
            join(p);
        }
        if let Some(KeyRef::File(p)) = self.repository.token.as_mut() {
            join(p);
        }
        if let Some(p) = self.context.templates_dir.as_mut() {
            join(p);
        }
        if let Some(p) = self.context.skills_dir.as_mut() {
            join(p);
        }
        if let Some(name) = self.policy.profile.as_mut() {
            if PolicySpec::profile_is_file(name) && Path::new(name.as_str()).is_relative() {
                *name = joined(Path::new(name.as_str())).display().to_string();
            }
        }
    }

    /// The host paths this spec writes relative, each with its field (a
    /// `file:` secret's path too). None in a spec read from a file or as
    /// text ([`JobSpec::resolve_paths`] made them absolute), nor so in a
    /// spec admission stored; a stored spec holding one was stored by an
    /// earlier version or written into the store directly, and nothing
    /// says which directory it was relative to.
    pub fn relative_host_paths(&self) -> Vec<(&'static str, &Path)> {
        self.host_references()
            .into_iter()
            .filter_map(|r| match r {
                HostReference::Path { field, path }
                | HostReference::Source(LocalSource { field, path, .. })
                    if path.is_relative() =>
                {
                    Some((field, path))
                }
                HostReference::Secret {
                    field,
                    key: KeyRef::File(path),
                } if path.is_relative() => Some((field, path.as_path())),
                _ => None,
            })
            .collect()
    }

    /// What this spec names on the host it runs on, beyond its own text:
    /// files and directories read (or, a `file://` push's, written)
    /// there, secret references resolved there (and the host's own cloud
    /// credentials a keyless upstream uses), and the URLs a host secret
    /// is sent to. A spec from the user
    /// running Paddock names what is theirs; one submitted to a server
    /// names the server's, which the server checks
    /// (`paddock::server::submissions`). Kept beside `resolve_paths`: a
    /// field that names a host path or secret belongs in both.
    pub fn host_references(&self) -> Vec<HostReference<'_>> {
        let mut refs = Vec::new();
        refs.extend(self.local_source().map(HostReference::Source));
        let mut paths: Vec<(&'static str, &Path)> = Vec::new();
        if let Some(p) = &self.upstream.scenario {
            paths.push(("upstream.scenario", p));
        }
        if let Some(p) = &self.engine.binary {
            if p.components().count() > 1 {
                paths.push(("engine.binary", p));
            }
        }
        if let Some(p) = &self.context.templates_dir {
            paths.push(("context.templates_dir", p));
        }
        if let Some(p) = &self.context.skills_dir {
            paths.push(("context.skills_dir", p));
        }
        if let Some(name) = &self.policy.profile {
            if PolicySpec::profile_is_file(name) {
                paths.push(("policy.profile", Path::new(name.as_str())));
            }
        }
        if let Some(push) = &self.results.push {
            // A `file://` remote is a repository on the host the branch is
            // pushed into: a path written, not a place connected to.
            if let (true, UrlIs::Local(local, _)) =
                (push.url.starts_with("file://"), url_is(&push.url))
            {
                paths.push(("results.push.url", local));
            }
            if let Some(p) = push.known_hosts.as_deref() {
                paths.push(("results.push.known_hosts", p));
            }
        }
        refs.extend(
            paths
                .into_iter()
                .map(|(field, path)| HostReference::Path { field, path }),
        );
        let mut keys: Vec<(&'static str, &KeyRef)> = Vec::new();
        if let Some(k) = &self.upstream.key {
            keys.push(("upstream.key", k));
        }
        if let Some(k) = &self.repository.token {
            keys.push(("repository.token", k));
        }
        if let Some(gh) = &self.results.github {
            if let Some(k) = &gh.token {
                keys.push(("results.github.token", k));
            }
            if let Some(app) = &gh.app {
                keys.push(("results.github.app.private_key", &app.private_key));
            }
        }
        if let Some(gl) = &self.results.gitlab {
            keys.push(("results.gitlab.token", &gl.token));
        }
        if let Some(push) = &self.results.push {
            if let Some(k) = &push.token {
                keys.push(("results.push.token", k));
            }
            if let Some(k) = &push.ssh_key {
                keys.push(("results.push.ssh_key", k));
            }
        }
        refs.extend(
            keys.into_iter()
                .map(|(field, key)| HostReference::Secret { field, key }),
        );
        // A keyless cloud upstream: the host's own identity.
        let ambient = match (self.upstream.provider, &self.upstream.key) {
            (ProviderKind::Vertex, None) => Some(AmbientCredentials::GoogleDefault),
            (ProviderKind::Bedrock, None) => Some(match self.upstream.aws_profile.as_deref() {
                Some(p) => AmbientCredentials::AwsProfile(p),
                None => AmbientCredentials::AwsChain,
            }),
            _ => None,
        };
        if let Some(source) = ambient {
            refs.push(HostReference::Ambient {
                field: "upstream.key",
                source,
            });
        }
        // Where the host connects for the spec, its credentials with it:
        // the upstream (a key, or the host's own cloud credentials), a
        // source, a forge, a push, the job's own webhook.
        let mut urls: Vec<(&'static str, &str)> = Vec::new();
        if let Some(u) = &self.upstream.base_url {
            urls.push(("upstream.base_url", u));
        }
        if let Some(a) = self
            .upstream
            .entra
            .as_ref()
            .and_then(|e| e.authority.as_deref())
        {
            urls.push(("upstream.entra.authority", a));
        }
        // A source the host fetches from where it stands (its network,
        // its internal hosts), with the spec's token if it names one.
        if let Some(u) = &self.repository.url {
            if url_is(u) == UrlIs::Remote {
                urls.push(("repository.url", u));
            }
        }
        if let Some(gh) = &self.results.github {
            urls.push(("results.github.api_url", &gh.api_url));
            if let Some(u) = &gh.push_url {
                urls.push(("results.github.push_url", u));
            }
        }
        if let Some(gl) = &self.results.gitlab {
            urls.push(("results.gitlab.api_url", &gl.api_url));
            if let Some(u) = &gl.push_url {
                urls.push(("results.gitlab.push_url", u));
            }
        }
        if let Some(push) = &self.results.push {
            if !push.url.starts_with("file://") {
                urls.push(("results.push.url", &push.url));
            }
        }
        if let Some(u) = &self.results.webhook_url {
            urls.push(("results.webhook_url", u));
        }
        refs.extend(
            urls.into_iter()
                .map(|(field, url)| HostReference::Destination { field, url }),
        );
        // After the places connected to (a host not allowed is the first
        // refusal), the host user's git credentials: a source fetched without the
        // spec's token (the user's git, its helpers, `~/.netrc`, SSH keys
        // and agent), and a push over SSH without the spec's key (ssh
        // finds the user's keys whatever Paddock's git configuration).
        let ssh = |u: &str| u.starts_with("ssh://") || (!u.contains("://") && u.contains(':'));
        let fetched_as_host = self.repository.url.as_deref().is_some_and(|u| {
            url_is(u) == UrlIs::Remote && (self.repository.token.is_none() || ssh(u))
        });
        if fetched_as_host {
            refs.push(HostReference::Ambient {
                field: "repository.url",
                source: AmbientCredentials::Git,
            });
        }
        let mut pushes: Vec<(&'static str, &str, bool)> = Vec::new();
        if let Some(push) = &self.results.push {
            pushes.push(("results.push.url", &push.url, push.ssh_key.is_some()));
        }
        if let Some(u) = self
            .results
            .github
            .as_ref()
            .and_then(|g| g.push_url.as_deref())
        {
            pushes.push(("results.github.push_url", u, false));
        }
        if let Some(u) = self
            .results
            .gitlab
            .as_ref()
            .and_then(|g| g.push_url.as_deref())
        {
            pushes.push(("results.gitlab.push_url", u, false));
        }
        for (field, url, keyed) in pushes {
            if ssh(url) && !keyed {
                refs.push(HostReference::Ambient {
                    field,
                    source: AmbientCredentials::Git,
                });
            }
        }
        refs
    }

    /// The local repository this spec's source names on the host, as git
    /// takes it (`local_source.rs`): `repository.path`, or a
    /// `repository.url` git reads as a path (`file://`, or no URL at
    /// all); `None` for a remote URL. The one reading of it:
    /// [`JobSpec::host_references`] (a server's `allow_paths` and
    /// own-places checks) and the runner's look at the source read it.
    pub fn local_source(&self) -> Option<LocalSource<'_>> {
        if let Some(path) = &self.repository.path {
            return Some(LocalSource {
                field: "repository.path",
                path,
                form: SourceForm::Directory,
            });
        }
        match url_is(self.repository.url.as_deref()?) {
            UrlIs::Local(path, form) => Some(LocalSource {
                field: "repository.url",
                path,
                form,
            }),
            UrlIs::Remote => None,
        }
    }

    /// The attempt number of this job: one more than the prior attempts.
    pub fn attempt(&self) -> u32 {
        self.ticket
            .prior_attempts
            .iter()
            .map(|a| a.attempt)
            .max()
            .unwrap_or(0)
            + 1
    }

    /// The branch the job works on: `paddock/<ticket>/<attempt>`.
    pub fn branch(&self) -> String {
        format!("paddock/{}/{}", self.ticket.id, self.attempt())
    }

    fn validate(&self, origin: &Path) -> Result<(), SpecError> {
        let checks: [Check; 10] = [
            check_sizes,
            JobSpec::check_url_credentials,
            JobSpec::check_ticket,
            JobSpec::check_home_relative,
            JobSpec::check_repository,
            JobSpec::check_refs,
            JobSpec::check_provider,
            JobSpec::check_engine_pair,
            JobSpec::check_budget_and_credentials,
            JobSpec::check_limits_and_policy,
        ];
        for check in checks {
            // A reason may quote what the spec holds (a URL, a pattern,
            // an id): each character plain text refuses in it is shown
            // as its escape, whichever check quoted it.
            check(self).map_err(|(field, reason)| SpecError::Invalid {
                path: origin.to_path_buf(),
                field: crate::plain_text::escaped(&field).into_owned(),
                reason: crate::plain_text::escaped(&reason).into_owned(),
            })?;
        }
        Ok(())
    }

    /// No host path starts with `~`: a spec's relative path is read from
    /// the spec's directory, and nothing expands `~` as a shell does, so
    /// `path = "~/src/app"` named `<spec's directory>/~/src/app` and the
    /// job failed later saying "no such directory" of a path the user
    /// never wrote (a `file:~/…` key: "cannot read" it).
    fn check_home_relative(&self) -> Result<(), (String, String)> {
        let home_relative = |path: &Path| {
            path.components().next().is_some_and(|first| {
                matches!(first, std::path::Component::Normal(name)
                    if name.as_encoded_bytes().starts_with(b"~"))
            })
        };
        for reference in self.host_references() {
            let (field, path) = match reference {
                HostReference::Path { field, path }
                | HostReference::Source(LocalSource { field, path, .. }) => (field, path),
                HostReference::Secret {
                    field,
                    key: KeyRef::File(path),
                } => (field, path.as_path()),
                _ => continue,
            };
            if home_relative(path) {
                return Err(bad(
                    field,
                    format!(
                        "`{}`: `~` is not expanded here (a relative path is read from the \
                         spec's directory): write the path in full",
                        path.display()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The ticket (its id names a git branch) and where its results go.
    fn check_ticket(&self) -> Result<(), (String, String)> {
        let id = &self.ticket.id;
        if id.is_empty() || id.len() > 100 {
            return Err(bad("ticket.id", "must be 1 to 100 characters".into()));
        }
        if !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
            || id.starts_with(['.', '-'])
            || id.ends_with(".lock")
            || id.contains("..")
        {
            return Err(bad(
                "ticket.id",
                format!(
                    "`{id}` must be ASCII letters, digits, `.`, `_` and `-`, begin with neither \
                     `.` nor `-`, hold no `..` and not end in `.lock` (it names a git branch)"
                ),
            ));
        }
        if let Some(github) = &self.results.github {
            if let Err(reason) = github.owner_and_name() {
                return Err(bad("results.github.repository", reason));
            }
            if let Err(reason) = github.credential() {
                return Err(bad("results.github", reason));
            }
        }
        if let Some(gitlab) = &self.results.gitlab {
            if self.results.github.is_some() {
                return Err(bad(
                    "results.gitlab",
                    "set `[results.github]` or `[results.gitlab]`, not both".into(),
                ));
            }
            if let Err(reason) = gitlab.check_project() {
                return Err(bad("results.gitlab.project", reason));
            }
            if self.results.push.is_none() {
                if let Err(reason) = gitlab.push_url() {
                    return Err(bad("results.gitlab.push_url", reason));
                }
            }
        }
        if let Some(push) = &self.results.push {
            if let Err(reason) = push.credential() {
                return Err(bad("results.push", reason));
            }
        }
        if let Some(url) = &self.results.webhook_url {
            crate::results::check_webhook_url(url)
                .map_err(|reason| bad("results.webhook_url", reason))?;
        }
        if let Some(url) = &self.results.ticket_url {
            crate::results::check_ticket_url(url)
                .map_err(|reason| bad("results.ticket_url", reason))?;
        }
        if self.ticket.title.trim().is_empty() {
            return Err(bad("ticket.title", "must not be empty".into()));
        }
        // One line a pull request's title, a terminal and the dashboard
        // show (the title, and the names a closeout, a pull request's
        // labels, `paddock jobs` and `usage` show: `one_line_names`): a
        // control character (an escape, a line break), a bidirectional
        // control (which shows the text reordered) or an invisible
        // character is refused, named by its code point, never echoed.
        for (field, value) in self.one_line_names() {
            if let Some(why) = crate::plain_text::first_not_plain(value) {
                return Err(bad(field, format!("must be one line of plain text: {why}")));
            }
        }
        if self.ticket.project.trim().is_empty() {
            return Err(bad("ticket.project", "must not be empty".into()));
        }
        if self.ticket.touch_only.len() > MAX_TOUCH_ONLY {
            return Err(bad(
                "ticket.touch_only",
                format!("at most {MAX_TOUCH_ONLY} patterns"),
            ));
        }
        for (i, pattern) in self.ticket.touch_only.iter().enumerate() {
            if let Err(reason) = check_touch_only(pattern) {
                return Err(bad(format!("ticket.touch_only[{i}]"), reason));
            }
        }
        for (i, a) in self.ticket.prior_attempts.iter().enumerate() {
            if a.attempt == 0 {
                return Err(bad(
                    format!("ticket.prior_attempts[{i}].attempt"),
                    "attempts are numbered from 1".into(),
                ));
            }
        }
        Ok(())
    }

    /// The spec's text fields that are one line of plain text (no control
    /// or bidirectional character, `crate::plain_text`), by field name
    /// ([`one_line_names!`], the one list).
    fn one_line_names(&self) -> Vec<(String, &str)> {
        one_line_names!(self)
            .into_iter()
            .map(|(field, value)| (field, value.as_str()))
            .collect()
    }

    /// [`JobSpec::one_line_names`] made plain, each with the characters
    /// plain text refuses left out (a stored spec admitted before they
    /// had to be).
    fn mend_one_line_names(&mut self) {
        for (_, value) in one_line_names!(self, mut) {
            if let std::borrow::Cow::Owned(p) = crate::plain_text::line(value) {
                *value = p;
            }
        }
    }

    /// No URL of the spec carries a credential: it would be stored with
    /// the record, shown in events and written by git into the job's
    /// repository. The reason names the field, never the URL.
    fn check_url_credentials(&self) -> Result<(), (String, String)> {
        let gh = self.results.github.as_ref();
        let gl = self.results.gitlab.as_ref();
        let urls = [
            ("repository.url", self.repository.url.as_deref()),
            ("upstream.base_url", self.upstream.base_url.as_deref()),
            (
                "upstream.entra.authority",
                self.upstream
                    .entra
                    .as_ref()
                    .and_then(|e| e.authority.as_deref()),
            ),
            ("results.ticket_url", self.results.ticket_url.as_deref()),
            ("results.webhook_url", self.results.webhook_url.as_deref()),
            ("results.github.api_url", gh.map(|g| g.api_url.as_str())),
            (
                "results.github.push_url",
                gh.and_then(|g| g.push_url.as_deref()),
            ),
            ("results.gitlab.api_url", gl.map(|g| g.api_url.as_str())),
            (
                "results.gitlab.push_url",
                gl.and_then(|g| g.push_url.as_deref()),
            ),
            (
                "results.push.url",
                self.results.push.as_ref().map(|p| p.url.as_str()),
            ),
        ];
        for (field, url) in urls {
            if let Some(why) = url.and_then(crate::url_credentials::credentials_in_url) {
                return Err(bad(
                    field,
                    format!("{why}; name a credential by reference instead (`token = \"env:NAME\"` or `file:PATH`), held by Paddock on the host"),
                ));
            }
        }
        if self.repository.token.is_some() {
            let url = self.repository.url.as_deref().unwrap_or("");
            let loopback_http = url.strip_prefix("http://").is_some_and(|rest| {
                let host = rest.split(['/', '@']).next().unwrap_or("");
                let host = host.rsplit_once(':').map_or(host, |(h, _)| h);
                matches!(host, "127.0.0.1" | "localhost" | "[::1]")
            });
            if !(url.starts_with("https://") || loopback_http) {
                return Err(bad(
                    "repository.token",
                    "needs an `https://` (or loopback `http://`) `url`".into(),
                ));
            }
        }
        Ok(())
    }

    /// The repository, its base revision, and the engine's model.
    fn check_repository(&self) -> Result<(), (String, String)> {
        match (&self.repository.path, &self.repository.url) {
            (Some(_), Some(_)) => {
                return Err(bad(
                    "repository",
                    "give either `path` or `url`, not both".into(),
                ))
            }
            (None, None) => {
                return Err(bad(
                    "repository",
                    "give `path` (a local git repository) or `url`".into(),
                ))
            }
            _ => {}
        }
        if self.engine.model.trim().is_empty() {
            return Err(bad("engine.model", "must not be empty".into()));
        }
        self.check_file_urls()
    }

    /// `repository.base_ref` and `results.base_branch` by git's rules,
    /// each refused with the message `ref_name` words (a character plain
    /// text refuses named by its code point, the name not echoed); then,
    /// with a forge and no `results.base_branch`, a `base_ref` that is
    /// plainly no branch a pull request could merge into.
    fn check_refs(&self) -> Result<(), (String, String)> {
        let base = &self.repository.base_ref;
        if let Some(why) = crate::ref_name::revision_refusal(base) {
            return Err(bad("repository.base_ref", why));
        }
        if let Some(branch) = &self.results.base_branch {
            if let Some(why) = crate::ref_name::branch_refusal(branch) {
                return Err(bad("results.base_branch", why));
            }
        }
        let forge = self.results.github.is_some() || self.results.gitlab.is_some();
        if let (true, None) = (forge, &self.results.base_branch) {
            if let Some(what) = not_a_branch(base) {
                return Err(bad(
                    "results.base_branch",
                    format!(
                        "`repository.base_ref` `{base}` is {what}, which a pull request cannot \
                         merge into: set `results.base_branch` to the branch it should"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A `file://` URL is `file://` then an absolute path. Git reads
    /// `file://repo` as a host `repo` without a path (the job was made and
    /// failed at its clone: "no path specified"), and `file://HOST/PATH`
    /// as `/PATH`, its host ignored, where the host's checks of what a
    /// spec names read the path `HOST/PATH` (`host_references`).
    fn check_file_urls(&self) -> Result<(), (String, String)> {
        let urls = [
            ("repository.url", self.repository.url.as_deref(), true),
            (
                "results.push.url",
                self.results.push.as_ref().map(|p| p.url.as_str()),
                false,
            ),
        ];
        for (field, url, may_be_a_path) in urls {
            let Some(rest) = url.and_then(|u| u.strip_prefix("file://")) else {
                continue;
            };
            if rest.contains('%') {
                return Err(bad(
                    field,
                    format!(
                        "`file://{rest}` holds `%`, which git decodes (`%2e%2e` is `..`) while \
                         the host's checks of the path (allow_paths, its own places) read it as \
                         written: write the path without percent-encoding"
                    ),
                ));
            }
            if rest.starts_with('/') {
                continue;
            }
            let why = match rest.split_once('/') {
                Some((host, path)) => format!(
                    "`file://{rest}` names a host, `{host}`, which git ignores, reading \
                     `/{path}`: write `file:///{path}` (`file://` and an absolute path)"
                ),
                None => format!(
                    "`file://{rest}` has no path (git reads `{rest}` as a host): write \
                     `file://` and an absolute path (`file:///full/path/to/{rest}`){}",
                    if may_be_a_path {
                        "; a path relative to the spec is written without `file://` \
                         (`url = \"repo\"`, or `path = \"repo\"` for a working tree)"
                    } else {
                        ""
                    }
                ),
            };
            return Err(bad(field, why));
        }
        Ok(())
    }

    /// The upstream's provider and the fields only some providers take.
    fn check_provider(&self) -> Result<(), (String, String)> {
        let up = &self.upstream;
        match up.provider {
            ProviderKind::Scripted => {
                if up.scenario.is_none() {
                    return Err(bad(
                        "upstream.scenario",
                        "the scripted upstream needs a scenario file".into(),
                    ));
                }
                if up.key.is_some() {
                    return Err(bad(
                        "upstream.key",
                        "the scripted upstream takes no key".into(),
                    ));
                }
            }
            ProviderKind::Openai
            | ProviderKind::Anthropic
            | ProviderKind::Vertex
            | ProviderKind::Bedrock => {
                // Vertex without a key uses Google's Application Default
                // Credentials, Bedrock `AWS_BEARER_TOKEN_BEDROCK` or the AWS
                // credential chain.
                if up.key.is_none()
                    && !matches!(up.provider, ProviderKind::Vertex | ProviderKind::Bedrock)
                {
                    return Err(bad(
                        "upstream.key",
                        format!(
                            "the {} upstream needs a key reference (`env:NAME` or `file:PATH`)",
                            up.provider.as_str()
                        ),
                    ));
                }
                if up.scenario.is_some() {
                    return Err(bad(
                        "upstream.scenario",
                        "only the scripted upstream replays a scenario".into(),
                    ));
                }
            }
        }
        let vertex_fields = [
            ("upstream.vertex_project", &up.vertex_project),
            ("upstream.vertex_region", &up.vertex_region),
        ];
        for (field, value) in vertex_fields {
            let ok_word = |v: &str| {
                !v.is_empty()
                    && v.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            };
            match (up.provider, value) {
                (ProviderKind::Vertex, None) => {
                    return Err(bad(field, "the vertex upstream needs it".into()))
                }
                (ProviderKind::Vertex, Some(v)) if !ok_word(v) => {
                    return Err(bad(
                        field,
                        format!("`{v}` must be letters, digits, `-` and `_`"),
                    ))
                }
                (ProviderKind::Vertex, Some(_)) | (_, None) => {}
                (_, Some(_)) => return Err(bad(field, "only the vertex upstream takes it".into())),
            }
        }
        match (up.provider, &up.bedrock_region) {
            (ProviderKind::Bedrock, None) => {
                return Err(bad(
                    "upstream.bedrock_region",
                    "the bedrock upstream needs it".into(),
                ))
            }
            (ProviderKind::Bedrock, Some(v))
                if v.is_empty()
                    || !v
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') =>
            {
                return Err(bad(
                    "upstream.bedrock_region",
                    format!("`{v}` must be an AWS region such as `us-east-1`"),
                ))
            }
            (ProviderKind::Bedrock, Some(_)) | (_, None) => {}
            (_, Some(_)) => {
                return Err(bad(
                    "upstream.bedrock_region",
                    "only the bedrock upstream takes it".into(),
                ))
            }
        }
        Ok(())
    }

    /// An engine and a provider that speak the same API, and the base URL.
    fn check_engine_pair(&self) -> Result<(), (String, String)> {
        let up = &self.upstream;
        if self.engine.kind == EngineKind::Codex
            && matches!(up.provider, ProviderKind::Vertex | ProviderKind::Bedrock)
        {
            return Err(bad(
                "upstream.provider",
                "Codex speaks the OpenAI Responses API: use `openai` or `scripted`".into(),
            ));
        }
        match (self.engine.kind, up.provider) {
            (EngineKind::Codex, ProviderKind::Anthropic) => {
                return Err(bad(
                    "upstream.provider",
                    "Codex speaks the OpenAI Responses API: use `openai` or `scripted`".into(),
                ))
            }
            (EngineKind::Claude, ProviderKind::Openai) => {
                return Err(bad(
                    "upstream.provider",
                    "Claude Code speaks the Anthropic Messages API: use `anthropic` or `scripted`"
                        .into(),
                ))
            }
            _ => {}
        }
        if let Some(url) = &up.base_url {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(bad(
                    "upstream.base_url",
                    format!("`{url}` must be an http:// or https:// URL"),
                ));
            }
        }
        Ok(())
    }

    /// The budget ceilings and the upstream's credentials.
    fn check_budget_and_credentials(&self) -> Result<(), (String, String)> {
        let up = &self.upstream;
        for (field, value) in [
            ("budget.max_usd", self.budget.max_usd),
            ("budget.ticket_max_usd", self.budget.ticket_max_usd),
            (
                "budget.project_daily_max_usd",
                self.budget.project_daily_max_usd,
            ),
        ] {
            if let Some(max) = value {
                if !(max.is_finite() && (0.0..=1e9).contains(&max)) {
                    return Err(bad(
                        field,
                        "must be a number between 0 and 1000000000".into(),
                    ));
                }
            }
        }
        if let Some(entra) = &up.entra {
            if up.provider != ProviderKind::Openai {
                return Err(bad(
                    "upstream.entra",
                    "only the openai (Azure OpenAI) upstream takes Entra ID credentials".into(),
                ));
            }
            if up.key_header == Some(KeyHeaderKind::ApiKey) {
                return Err(bad(
                    "upstream.key_header",
                    "Entra ID tokens go in `Authorization: Bearer`: drop `api-key`".into(),
                ));
            }
            for (field, value) in [
                ("upstream.entra.tenant_id", &entra.tenant_id),
                ("upstream.entra.client_id", &entra.client_id),
            ] {
                if value.is_empty()
                    || !value
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
                {
                    return Err(bad(
                        field,
                        format!("`{value}` must be an id (letters, digits, `-`, `.`)"),
                    ));
                }
            }
            if let Some(url) = &entra.authority {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(bad(
                        "upstream.entra.authority",
                        format!("`{url}` must be an http:// or https:// URL"),
                    ));
                }
            }
        }
        match (up.provider, up.key_header) {
            (_, None) | (ProviderKind::Openai, Some(_)) => {}
            (ProviderKind::Bedrock, Some(KeyHeaderKind::Bearer)) if up.key.is_some() => {}
            (ProviderKind::Bedrock, Some(_)) => {
                return Err(bad(
                    "upstream.key_header",
                    "bedrock takes `bearer` (the key is then a Bedrock API key), with a key".into(),
                ))
            }
            (_, Some(_)) => {
                return Err(bad(
                    "upstream.key_header",
                    "only the openai (OpenAI-compatible) upstream takes `bearer` or `api-key`"
                        .into(),
                ))
            }
        }
        if let Some(profile) = &up.aws_profile {
            if up.provider != ProviderKind::Bedrock || up.key.is_some() {
                return Err(bad(
                    "upstream.aws_profile",
                    "only a bedrock upstream without a key (the AWS credential chain) takes it"
                        .into(),
                ));
            }
            if profile.is_empty()
                || !profile
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.@+".contains(c))
            {
                return Err(bad(
                    "upstream.aws_profile",
                    format!("`{profile}` must be a profile name (letters, digits, `-_.@+`)"),
                ));
            }
        }
        Ok(())
    }

    /// Allowed models, limits, the broker, context, policy, network and setup.
    fn check_limits_and_policy(&self) -> Result<(), (String, String)> {
        for (i, m) in self.engine.allowed_models.iter().enumerate() {
            if m.trim().is_empty() || m.trim_end_matches('*').contains('*') {
                return Err(bad(
                    format!("engine.allowed_models[{i}]"),
                    format!("`{m}` must be a model name, or a prefix ending in `*`"),
                ));
            }
        }
        if self.limits.timeout_secs == 0 {
            return Err(bad("limits.timeout_secs", "must be at least 1".into()));
        }
        if !(1024..=MAX_LINE_BYTES).contains(&self.limits.max_line_bytes) {
            return Err(bad(
                "limits.max_line_bytes",
                format!("must be from 1024 to {MAX_LINE_BYTES}"),
            ));
        }
        if !(1024..=self.limits.max_line_bytes).contains(&self.limits.max_event_bytes) {
            return Err(bad(
                "limits.max_event_bytes",
                "must be from 1024 to limits.max_line_bytes".into(),
            ));
        }
        if self.limits.max_output_bytes < MIN_MAX_OUTPUT_BYTES {
            return Err(bad(
                "limits.max_output_bytes",
                format!("must be at least {MIN_MAX_OUTPUT_BYTES}"),
            ));
        }
        if self.limits.max_disk_bytes < MIN_MAX_DISK_BYTES {
            return Err(bad(
                "limits.max_disk_bytes",
                format!("must be at least {MIN_MAX_DISK_BYTES}"),
            ));
        }
        if self.limits.max_records < MIN_MAX_RECORDS {
            return Err(bad(
                "limits.max_records",
                format!("must be at least {MIN_MAX_RECORDS}"),
            ));
        }
        if let Err((field, reason)) = self.broker.check() {
            return Err(bad(field, reason));
        }
        if self.context.skills.is_some() && self.context.skills_dir.is_none() {
            return Err(bad(
                "context.skills",
                "names skills of a library: set `context.skills_dir` too".into(),
            ));
        }
        if let Some(name) = &self.policy.profile {
            if name.trim().is_empty() {
                return Err(bad("policy.profile", "must not be empty".into()));
            }
        }
        for (i, rule) in self.policy.accept_degraded.iter().enumerate() {
            if degradable_rule(rule).is_none() {
                return Err(bad(
                    format!("policy.accept_degraded[{i}]"),
                    format!(
                        "`{rule}` is not a profile rule; expected one of {}",
                        DEGRADABLE_RULES.join(", ")
                    ),
                ));
            }
        }
        crate::network::check_list("network.allow", &self.network.allow)?;
        if let Err((field, reason)) = self.setup.check() {
            return Err(bad(&field, reason));
        }
        Ok(())
    }
}

/// The `.toml` and `.json` files in `dir` by name, sorted, at most five
/// (then `…`), as a directory given for a spec names them; "it has no
/// .toml or .json file" when there are none.
fn spec_files_in(dir: &Path) -> String {
    const SHOWN: usize = 5;
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".toml") || n.ends_with(".json"))
        .collect();
    if names.is_empty() {
        return "it has no .toml or .json file".to_owned();
    }
    names.sort();
    let more = names.len() > SHOWN;
    names.truncate(SHOWN);
    let mut listed = names.join(", ");
    if more {
        listed.push_str(", …");
    }
    listed
}

/// The longest a spec's text field may be, in bytes, unless
/// [`TEXT_LIMITS`] says otherwise (names, models, paths, URLs, list items).
pub const DEFAULT_TEXT_LIMIT: usize = 4_096;

/// Fields allowed more text than [`DEFAULT_TEXT_LIMIT`] (or less), by
/// their path in the spec (`[]` for any list item); a path ending in `.`
/// covers every key under it.
pub const TEXT_LIMITS: &[(&str, usize)] = &[
    ("ticket.title", 1_000),
    ("ticket.type", 100),
    ("ticket.project", 100),
    ("ticket.description", 65_536),
    ("ticket.comments[].body", 16_384),
    ("ticket.prior_attempts[].summary", 16_384),
    ("ticket.prior_attempts[].bounce_comment", 16_384),
    ("engine.model", 200),
    ("engine.allowed_models[]", 200),
    ("context.skill[].body", 32_768),
    ("context.skill[].files.", 524_288),
    ("context.instructions", 65_536),
];

/// The most items a list of the spec may have.
pub const LIST_LIMIT: usize = 100;

/// The most text the ticket may hold in all (it becomes the prompt, which
/// must fit one command-line argument where an engine takes it there).
pub const TICKET_TEXT_LIMIT: usize = 98_304;

/// The size limit of the text at `path` (list indexes written `[]`).
fn text_limit(path: &str) -> usize {
    TEXT_LIMITS
        .iter()
        .find(|(p, _)| *p == path || (p.ends_with('.') && path.starts_with(p)))
        .map_or(DEFAULT_TEXT_LIMIT, |(_, n)| *n)
}

/// Checks every text field and list of `spec` against its limit; the
/// first one over it, as (field, reason).
/// One check of a spec: `(field, reason)` when it fails.
type Check = fn(&JobSpec) -> Result<(), (String, String)>;

/// What `base_ref` is when it is plainly no branch (a tag's full name, a
/// full commit name, a revision expression): the pull request's base
/// defaults to `base_ref` (less `origin/` or `refs/heads/`), so such a
/// spec with a forge needs `results.base_branch`. Not caught here, where
/// no repository is read: a tag's short name (it looks like a branch's)
/// and `HEAD`, the default; the runner reads both where the base is kept,
/// before the engine starts (`results::conclude::pull_request_base`).
fn not_a_branch(base_ref: &str) -> Option<&'static str> {
    let hex = |n: usize| base_ref.len() == n && base_ref.bytes().all(|b| b.is_ascii_hexdigit());
    if base_ref.starts_with("refs/tags/") {
        Some("a tag")
    } else if hex(40) || hex(64) {
        Some("a commit")
    } else if base_ref.contains(['~', '^', ':', '@', '{']) {
        Some("a revision expression, not a branch")
    } else {
        None
    }
}

/// A refusal of `field` for `reason`.
fn bad(field: impl Into<String>, reason: String) -> (String, String) {
    (field.into(), reason)
}

fn check_sizes(spec: &JobSpec) -> Result<(), (String, String)> {
    let Ok(value) = serde_json::to_value(spec) else {
        return Ok(());
    };
    let mut ticket_text = 0usize;
    walk(&value, "", "", &mut ticket_text)?;
    if ticket_text > TICKET_TEXT_LIMIT {
        return Err((
            "ticket".into(),
            format!(
                "{ticket_text} bytes of text in all, over the limit of {TICKET_TEXT_LIMIT} bytes"
            ),
        ));
    }
    Ok(())
}

/// [`check_sizes`] of `value` at `path` (as written in errors, with
/// indexes) and `pattern` (indexes as `[]`).
fn walk(
    value: &serde_json::Value,
    path: &str,
    pattern: &str,
    ticket_text: &mut usize,
) -> Result<(), (String, String)> {
    let join = |base: &str, key: &str| {
        if base.is_empty() {
            key.to_string()
        } else {
            format!("{base}.{key}")
        }
    };
    match value {
        serde_json::Value::String(text) => {
            let limit = text_limit(pattern);
            if text.len() > limit {
                return Err((
                    path.to_string(),
                    format!("{} bytes, over the limit of {limit} bytes", text.len()),
                ));
            }
            if pattern.starts_with("ticket.") {
                *ticket_text = ticket_text.saturating_add(text.len());
            }
        }
        serde_json::Value::Array(items) => {
            if items.len() > LIST_LIMIT {
                return Err((
                    path.to_string(),
                    format!("{} items, over the limit of {LIST_LIMIT}", items.len()),
                ));
            }
            for (i, item) in items.iter().enumerate() {
                walk(
                    item,
                    &format!("{path}[{i}]"),
                    &format!("{pattern}[]"),
                    ticket_text,
                )?;
            }
        }
        serde_json::Value::Object(fields) => {
            if fields.len() > LIST_LIMIT {
                return Err((
                    path.to_string(),
                    format!("{} entries, over the limit of {LIST_LIMIT}", fields.len()),
                ));
            }
            for (key, field) in fields {
                walk(field, &join(path, key), &join(pattern, key), ticket_text)?;
            }
        }
        serde_json::Value::Null | serde_json::Value::Bool(_) | serde_json::Value::Number(_) => {}
    }
    Ok(())
}

/// The most patterns `ticket.touch_only` may hold.
const MAX_TOUCH_ONLY: usize = 100;

/// A `ticket.touch_only` pattern: a path from the repository's top,
/// `/`-separated, with `*`, `?` and whole-segment `**` wildcards only.
fn check_touch_only(pattern: &str) -> Result<(), String> {
    if pattern.is_empty() {
        return Err("must not be empty".into());
    }
    if pattern.starts_with('/') {
        return Err(format!(
            "`{pattern}` must be relative to the repository's top (no leading `/`)"
        ));
    }
    if let Some(c) = pattern
        .chars()
        .find(|c| matches!(c, '[' | ']' | '{' | '}' | '!' | '\\') || c.is_control())
    {
        return Err(format!(
            "`{}`: {c:?} is not supported (only `*`, `?` and `**` are)",
            pattern.escape_debug()
        ));
    }
    for segment in pattern.split('/') {
        match segment {
            "" => return Err(format!("`{pattern}` has an empty path segment")),
            "." | ".." => return Err(format!("`{pattern}` must not have `.` or `..` segments")),
            s if s.contains("**") && s != "**" => {
                return Err(format!("`{pattern}`: `**` must be a whole path segment"))
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]

    use super::*;

    const BASE: &str = r#"
[ticket]
id = "T-1"
title = "t"
project = "p"
[repository]
path = "."
[engine]
kind = "codex"
model = "gpt-5.5"
[upstream]
provider = "scripted"
scenario = "s.toml"
"#;

    fn parse(extra: &str) -> Result<JobSpec, String> {
        JobSpec::from_toml(&format!("{BASE}{extra}"), Path::new("spec.toml"))
            .map_err(|e| e.to_string())
    }

    /// A title is one line of plain text: an escape, a line break, a tab,
    /// a bidirectional control or an invisible character (a zero-width
    /// space, a tag character) is refused by its code point, never
    /// echoed; other unicode (an accent composed or not) is kept.
    #[test]
    fn a_title_with_a_control_or_bidi_character_is_refused_by_its_code_point() {
        let check = |title: &str| {
            let quoted = serde_json::to_string(title).unwrap();
            JobSpec::from_toml(
                &BASE.replace("title = \"t\"", &format!("title = {quoted}")),
                Path::new("spec.toml"),
            )
            .map(|_| ())
            .map_err(|e| e.to_string())
        };
        let refused = |cp: &str, at: usize, what: &str| {
            Err(format!(
                "job spec spec.toml: field `ticket.title`: must be one line of plain text: {cp} at \
                 byte {at} is {what}"
            ))
        };
        let (control, bidi, invisible) = (
            "a control character",
            "a bidirectional control",
            "an invisible character",
        );
        assert_eq!(
            [
                check("fix \u{1b}[2J it"),
                check("fix\nit"),
                check("fix\tit"),
                check("fix\u{2028}it"),
                check("fix\u{2029}it"),
                check("fix \u{202e}ti"),
                check("fix \u{2066}it"),
                check("fix\u{200b}it"),
                check("fix \u{e0069}it"),
                check("fi\u{ad}x"),
                check("fi\u{fe00}x"),
                check("fi\u{e0100}x"),
                check("fix\u{3164}"),
                check("caf\u{e9} and cafe\u{301}"),
                check("fix \u{2764}\u{fe0f} \u{1f469}\u{200d}\u{1f4bb} \u{270c}\u{fe0e}"),
            ],
            [
                refused("U+001B", 4, control),
                refused("U+000A", 3, control),
                refused("U+0009", 3, control),
                refused("U+2028", 3, "a line or paragraph separator"),
                refused("U+2029", 3, "a line or paragraph separator"),
                refused("U+202E", 4, bidi),
                refused("U+2066", 4, bidi),
                refused("U+200B", 3, invisible),
                refused("U+E0069", 4, invisible),
                refused("U+00AD", 2, invisible),
                refused("U+FE00", 2, invisible),
                refused("U+E0100", 2, invisible),
                refused("U+3164", 3, invisible),
                Ok(()),
                Ok(()),
            ]
        );
    }

    /// A spec stored before the rule, its title with a tab and an
    /// override, still loads from the store, those left out.
    #[test]
    fn a_stored_spec_with_a_control_in_its_title_loads_without_it() {
        let mut spec = parse("").unwrap();
        spec.ticket.title = "fix\tit \u{202e}now".to_string();
        let stored = serde_json::to_string(&spec).unwrap();
        let loaded = JobSpec::from_stored(&stored, Path::new("the store")).unwrap();
        assert_eq!(loaded.ticket.title, "fixit now");
    }

    /// A stored spec a rule added since refuses (`base_branch = "HEAD"`)
    /// no longer loads to run or publish, naming the field, but loads to
    /// clean up after its job (its forge tokens revoked); one that is no
    /// spec at all loads for neither.
    #[test]
    fn a_stored_spec_refused_by_a_later_rule_loads_for_cleanup_only() {
        let mut spec = parse("").unwrap();
        spec.results.base_branch = Some("HEAD".to_string());
        let stored = serde_json::to_string(&spec).unwrap();
        let origin = Path::new("the store");
        assert!(matches!(
            JobSpec::from_stored(&stored, origin),
            Err(SpecError::Invalid { ref field, .. }) if field == "results.base_branch"
        ));
        let cleanup = JobSpec::from_stored_for_cleanup(&stored, origin).unwrap();
        assert_eq!(cleanup, spec);
        assert!(matches!(
            JobSpec::from_stored_for_cleanup("{}", origin),
            Err(SpecError::Parse { .. })
        ));
    }

    /// `results.ticket_url` is written into the pull request's body and
    /// the closeout on the forge as an autolink: a URL that could end it
    /// or its line (a line break before `/merge`, a GitLab quick action
    /// run with the bot's token; a space, `>`, a backtick), that is not
    /// http(s) or has no host is refused naming the field; parentheses,
    /// a query and percent-encoding are kept. A stored spec holding one
    /// loads to clean up after its job only. Before, any text was taken.
    #[test]
    fn a_ticket_url_that_could_leave_its_link_is_refused() {
        let said = [
            "https://t.example/1\\n/merge",
            "https://t.example/1 /approve",
            "https://t.example/1>x",
            "https://t.example/`x",
            "javascript:alert(1)",
            "https://",
            "https://t.example/caf\u{e9}",
        ]
        .map(|url| {
            parse(&format!("[results]\nticket_url = \"{url}\"\n"))
                .map(|_| ())
                .map_err(|e| e.replace("job spec spec.toml: field `results.ticket_url`: ", ""))
        });
        let refused = "a ticket URL holds none of `\"`, `<`, `>`, `\\`, `^`, `` ` ``, `{`, `|` \
                       and `}` (percent-encode them)";
        assert_eq!(
            said,
            [
                Err(
                    "`https://t.example/1\\u{a}/merge` holds U+000A: a ticket URL is printable \
                     ASCII without spaces (percent-encode the rest)"
                        .to_string()
                ),
                Err(
                    "`https://t.example/1 /approve` holds U+0020: a ticket URL is printable \
                     ASCII without spaces (percent-encode the rest)"
                        .to_string()
                ),
                Err(format!("`https://t.example/1>x` holds '>': {refused}")),
                Err(format!("`https://t.example/`x` holds '`': {refused}")),
                Err("`javascript:alert(1)` must start with http:// or https://".to_string()),
                Err("`https://` has no host".to_string()),
                Err(
                    "`https://t.example/caf\u{e9}` holds U+00E9: a ticket URL is printable \
                     ASCII without spaces (percent-encode the rest)"
                        .to_string()
                ),
            ]
        );
        let kept = "https://tracker.example/browse/T-1?q=(a)&r=%20x#c";
        assert_eq!(
            parse(&format!("[results]\nticket_url = \"{kept}\"\n"))
                .map(|s| s.results.ticket_url)
                .map_err(|e| e.to_string()),
            Ok(Some(kept.to_string()))
        );
        let mut spec = parse("").unwrap();
        spec.results.ticket_url = Some("https://t.example/1\n/merge".to_string());
        let stored = serde_json::to_string(&spec).unwrap();
        let origin = Path::new("the store");
        assert!(matches!(
            JobSpec::from_stored(&stored, origin),
            Err(SpecError::Invalid { ref field, .. }) if field == "results.ticket_url"
        ));
        assert_eq!(
            JobSpec::from_stored_for_cleanup(&stored, origin).unwrap(),
            spec
        );
    }

    /// The names a closeout, a pull request and the job tables show (the
    /// ticket's type and project, the model, a label, a comment's author)
    /// are one line of plain text as the title is: each with an escape, a
    /// line break or a bidirectional override is refused by its field and
    /// the code point; a stored spec holding them loads without them.
    #[test]
    fn a_name_with_a_control_or_bidi_character_is_refused_by_its_code_point() {
        let with = |edit: &dyn Fn(&mut JobSpec)| {
            let mut spec = parse("").unwrap();
            edit(&mut spec);
            spec
        };
        type Edit = Box<dyn Fn(&mut JobSpec)>;
        let hostile: [(&str, Edit); 5] = [
            (
                "ticket.type",
                Box::new(|s| s.ticket.kind = "bug\u{1b}[2J".into()),
            ),
            (
                "ticket.project",
                Box::new(|s| s.ticket.project = "acme\nforged".into()),
            ),
            (
                "engine.model",
                Box::new(|s| s.engine.model = "gpt\u{202e}x".into()),
            ),
            (
                "results.labels[1]",
                Box::new(|s| s.results.labels = vec!["ok".into(), "a\u{2066}b".into()]),
            ),
            (
                "ticket.comments[0].author",
                Box::new(|s| {
                    s.ticket.comments = vec![TicketComment {
                        author: "ana\u{7}".into(),
                        body: "b".into(),
                        at: None,
                    }]
                }),
            ),
        ];
        let mut refused = Vec::new();
        let mut stored = Vec::new();
        for (_, edit) in &hostile {
            let spec = with(edit.as_ref());
            let text = serde_json::to_string(&spec).unwrap();
            refused.push(
                JobSpec::from_json(&text, Path::new("spec.json"))
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
            );
            let loaded = JobSpec::from_stored(&text, Path::new("the store")).unwrap();
            stored.push(
                loaded
                    .one_line_names()
                    .into_iter()
                    .map(|(_, v)| v.to_string())
                    .collect::<Vec<_>>()
                    .join("|"),
            );
        }
        let said = |field: &str, cp: &str, at: usize| {
            let what = match cp {
                "U+202E" | "U+2066" => "a bidirectional control",
                _ => "a control character",
            };
            Err(format!(
                "job spec spec.json: field `{field}`: must be one line of plain text: {cp} at \
                 byte {at} is {what}"
            ))
        };
        let base = parse("").unwrap();
        let names = |kind: &str, project: &str, model: &str, rest: &str| {
            format!("{}|{kind}|{project}|{model}{rest}", base.ticket.title)
        };
        let (kind, project, model) = (
            base.ticket.kind.as_str(),
            base.ticket.project.as_str(),
            base.engine.model.as_str(),
        );
        assert_eq!(
            (refused, stored),
            (
                vec![
                    said("ticket.type", "U+001B", 3),
                    said("ticket.project", "U+000A", 4),
                    said("engine.model", "U+202E", 3),
                    said("results.labels[1]", "U+2066", 1),
                    said("ticket.comments[0].author", "U+0007", 3),
                ],
                vec![
                    names("bug[2J", project, model, ""),
                    names(kind, "acmeforged", model, ""),
                    names(kind, project, "gptx", ""),
                    names(kind, project, model, "|ok|ab"),
                    names(kind, project, model, "|ana"),
                ]
            )
        );
    }

    /// A ticket id refused for its shape says every rule, so that `-rf`
    /// or `a..b` (only letters, digits, `.`, `_` and `-`) is not told to
    /// be letters, digits, `.`, `_` and `-`, which it is; and that the
    /// letters are ASCII, so that `ÄÖ-1`, all letters, is not told to be
    /// letters (before, "must be letters, digits, …").
    #[test]
    fn a_ticket_id_refused_for_its_shape_is_told_every_rule() {
        let refused = |id: &str| {
            JobSpec::from_toml(
                &BASE.replace("id = \"T-1\"", &format!("id = \"{id}\"")),
                Path::new("spec.toml"),
            )
            .map_err(|e| e.to_string())
            .err()
        };
        let said = |id: &str| {
            Some(format!(
                "job spec spec.toml: field `ticket.id`: `{id}` must be ASCII letters, digits, \
                 `.`, `_` and `-`, begin with neither `.` nor `-`, hold no `..` and not end in \
                 `.lock` (it names a git branch)"
            ))
        };
        assert_eq!(
            ["-rf", ".x", "a..b", "x.lock", "a b", "ÄÖ-1"].map(refused),
            ["-rf", ".x", "a..b", "x.lock", "a b", "ÄÖ-1"].map(said)
        );
    }

    /// A spec parsed from TOML alone (no file, no base: what a stored
    /// spec written relative would be) names its relative host paths,
    /// field by field, a `file:` secret's among them; a bare engine name
    /// (looked up on PATH) and a stored profile's id are none. Read from
    /// a file, it names none (joined to the file's directory).
    #[test]
    fn a_spec_names_its_relative_host_paths() {
        let mut spec = parse(
            "[context]\ntemplates_dir = \"/abs/t\"\nskills_dir = \"skills\"\n[policy]\n\
             profile = \"ci\"\n",
        )
        .unwrap();
        // (A scripted upstream takes no key: set past validation, as a
        // stored spec's may be.)
        spec.upstream.key = Some(KeyRef::File("keys/k".into()));
        assert_eq!(
            spec.relative_host_paths(),
            vec![
                ("repository.path", Path::new(".")),
                ("upstream.scenario", Path::new("s.toml")),
                ("context.skills_dir", Path::new("skills")),
                ("upstream.key", Path::new("keys/k")),
            ]
        );
        let dir = std::env::temp_dir().join(format!("paddock-rel-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("spec.toml");
        std::fs::write(&file, BASE).unwrap();
        let loaded = JobSpec::load(&file).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(loaded.relative_host_paths(), Vec::new());
    }

    /// Everything a spec names on its host, field by field: the paths
    /// (made absolute; a `file://` push's repository, written), the secret
    /// references, and the URLs the host connects to (a forge's, a push's,
    /// the webhook; a source's when it is remote). What a server checks a submitted spec against.
    #[test]
    fn a_spec_names_its_host_references_field_by_field() {
        let text = BASE
            .replace(
                "path = \".\"",
                "url = \"https://git.example/r.git\"\ntoken = \"env:SRC\"",
            )
            .replace(
                "model = \"gpt-5.5\"",
                "model = \"gpt-5.5\"\nbinary = \"bin/codex\"",
            );
        let extra = "[context]\ntemplates_dir = \"tpl\"\nskills_dir = \"skills\"\n\
                     [policy]\nprofile = \"profiles/p.toml\"\n\
                     [results]\nwebhook_url = \"https://hooks.example/h\"\n\
                     [results.gitlab]\nproject = \"a/w\"\ntoken = \"file:gl.txt\"\n\
                     api_url = \"https://gl.example/api/v4\"\npush_url = \"https://gl.example/a/w.git\"\n\
                     [results.push]\nurl = \"file:///srv/pushed.git\"\n";
        let spec = JobSpec::from_text(
            &format!("{text}{extra}"),
            Path::new("spec.toml"),
            Path::new("/srv"),
        )
        .unwrap();
        let got: Vec<String> = spec
            .host_references()
            .iter()
            .map(|r| match r {
                HostReference::Path { field, path } => format!("path {field} {}", path.display()),
                HostReference::Source(s) => format!("source {} {}", s.field, s.path.display()),
                HostReference::Secret { field, key } => format!("secret {field} {key}"),
                HostReference::Destination { field, url } => format!("url {field} {url}"),
                HostReference::Ambient { field, source } => format!("ambient {field} {source}"),
            })
            .collect();
        assert_eq!(
            got,
            vec![
                "path upstream.scenario /srv/s.toml",
                "path engine.binary /srv/bin/codex",
                "path context.templates_dir /srv/tpl",
                "path context.skills_dir /srv/skills",
                "path policy.profile /srv/profiles/p.toml",
                "path results.push.url /srv/pushed.git",
                "secret repository.token env:SRC",
                "secret results.gitlab.token file:/srv/gl.txt",
                "url repository.url https://git.example/r.git",
                "url results.gitlab.api_url https://gl.example/api/v4",
                "url results.gitlab.push_url https://gl.example/a/w.git",
                "url results.webhook_url https://hooks.example/h",
            ]
        );
    }

    /// A keyless cloud upstream names the host's own credentials (as a
    /// server's `allow_refs` lists them); one with a key names the key.
    #[test]
    fn a_keyless_cloud_upstream_names_the_host_s_own_credentials() {
        let ambient = |upstream: &str| {
            let text = BASE
                .replace("kind = \"codex\"", "kind = \"claude\"")
                .replace("provider = \"scripted\"\nscenario = \"s.toml\"\n", upstream);
            let spec =
                JobSpec::from_text(&text, Path::new("spec.toml"), Path::new("/srv")).unwrap();
            spec.host_references()
                .iter()
                .filter_map(|r| match r {
                    HostReference::Ambient { field, source } => Some(format!("{field} {source}")),
                    HostReference::Secret { field, key } => Some(format!("{field} {key}")),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            [
                ambient("provider = \"vertex\"\nvertex_project = \"p\"\nvertex_region = \"r\"\n"),
                ambient("provider = \"bedrock\"\nbedrock_region = \"us-east-1\"\n"),
                ambient("provider = \"bedrock\"\nbedrock_region = \"us-east-1\"\naws_profile = \"prod\"\n"),
                ambient("provider = \"bedrock\"\nbedrock_region = \"us-east-1\"\nkey = \"env:AWS\"\n"),
            ],
            [
                vec!["upstream.key google:application-default".to_owned()],
                vec!["upstream.key aws:credential-chain".to_owned()],
                vec!["upstream.key aws:profile:prod".to_owned()],
                vec!["upstream.key env:AWS".to_owned()],
            ]
        );
    }

    /// The host user's git credentials (`git:credentials`): a remote
    /// source without a token (an SSH one has none); not a local source,
    /// an HTTPS source with a token, an HTTPS push (Paddock's git asks no
    /// helper) or an SSH push with the spec's key (one without is
    /// refused by the spec itself).
    #[test]
    fn git_credentials_of_the_host_are_named_where_a_spec_would_use_them() {
        let refs = |repository: &str, results: &str| {
            let text = BASE.replace("path = \".\"", repository);
            let text = format!("{text}{results}");
            let spec =
                JobSpec::from_text(&text, Path::new("spec.toml"), Path::new("/srv")).unwrap();
            spec.host_references()
                .iter()
                .filter_map(|r| match r {
                    HostReference::Ambient { field, source } => Some(format!("{field} {source}")),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        let https = "url = \"https://git.example/o/r.git\"";
        let push = |url: &str, key: &str| format!("[results.push]\nurl = \"{url}\"\n{key}");
        assert_eq!(
            [
                refs(https, ""),
                refs(&format!("{https}\ntoken = \"env:T\""), ""),
                refs("url = \"git@git.example:o/r.git\"", ""),
                refs("url = \"ssh://git.example/o/r.git\"", ""),
                refs("url = \"file:///srv/r.git\"", ""),
                refs(
                    "path = \".\"",
                    &push(
                        "ssh://git.example/o/r.git",
                        "ssh_key = \"env:K\"\nknown_hosts = \"/srv/kh\"\n"
                    )
                ),
                refs("path = \".\"", &push("https://git.example/o/r.git", "")),
            ],
            [
                vec!["repository.url git:credentials".to_owned()],
                vec![],
                vec!["repository.url git:credentials".to_owned()],
                vec!["repository.url git:credentials".to_owned()],
                vec![],
                vec![],
                vec![],
            ]
        );
    }

    /// An empty spec (a file, or nothing on stdin) is said to be empty,
    /// where it read as `missing field `ticket` (line 1, column 1)`.
    #[test]
    fn an_empty_spec_is_said_to_be_empty() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("job.toml");
        std::fs::write(&file, "\n  \n").unwrap();
        let said = [
            JobSpec::load(&file).map(|_| ()).map_err(|e| e.to_string()),
            JobSpec::from_text("", Path::new("<stdin>"), Path::new("."))
                .map(|_| ())
                .map_err(|e| e.to_string()),
        ];
        let empty = |origin: &str| {
            Err(format!(
                "job spec {origin} is empty: a spec has at least [ticket], [repository], \
                 [engine] and [upstream] (docs/job-spec.md)"
            ))
        };
        assert_eq!(said, [empty(&file.display().to_string()), empty("<stdin>")]);
    }

    /// A `file://` URL not followed by an absolute path is refused with
    /// what to write (before, `file://repo` made a job that failed at its
    /// clone, "no path specified", and `file://host/srv/r` was cloned from
    /// `/srv/r` while the host's checks read `host/srv/r`); but
    /// `file://localhost/PATH` (RFC 8089) is `file:///PATH`, where it was
    /// refused.
    #[test]
    fn a_file_url_without_an_absolute_path_is_refused_with_what_to_write() {
        let said = [
            ("url = \"file://repo\"\n", ""),
            ("url = \"file://localhost/srv/r\"\n", ""),
            ("url = \"file://LocalHost/srv/r\"\n", ""),
            ("url = \"file://localhost.x/srv/r\"\n", ""),
            ("url = \"file:///srv/r\"\n", ""),
            (
                "url = \"file:///srv/r\"\n",
                "[results.push]\nurl = \"file://srv/pushed.git\"\n",
            ),
        ]
        .map(|(url, push)| {
            let text = format!("{}{push}", BASE.replace("path = \".\"\n", url));
            JobSpec::from_toml(&text, Path::new("spec.toml"))
                .map(|_| ())
                .map_err(|e| e.to_string())
        });
        assert_eq!(
            said,
            [
                Err(
                    "job spec spec.toml: field `repository.url`: `file://repo` has no path (git \
                     reads `repo` as a host): write `file://` and an absolute path \
                     (`file:///full/path/to/repo`); a path relative to the spec is written \
                     without `file://` (`url = \"repo\"`, or `path = \"repo\"` for a working tree)"
                        .to_owned()
                ),
                Ok(()),
                Ok(()),
                Err(
                    "job spec spec.toml: field `repository.url`: `file://localhost.x/srv/r` names \
                     a host, `localhost.x`, which git ignores, reading `/srv/r`: write \
                     `file:///srv/r` (`file://` and an absolute path)"
                        .to_owned()
                ),
                Ok(()),
                Err(
                    "job spec spec.toml: field `results.push.url`: `file://srv/pushed.git` names \
                     a host, `srv`, which git ignores, reading `/pushed.git`: write \
                     `file:///pushed.git` (`file://` and an absolute path)"
                        .to_owned()
                ),
            ]
        );
        // `file://localhost/PATH` is `/PATH`, as git reads it, and the
        // host's checks read the same path.
        let local = |url: &str| {
            let text = BASE.replace("path = \".\"\n", &format!("url = \"{url}\"\n"));
            let spec = JobSpec::from_toml(&text, Path::new("spec.toml")).unwrap();
            let json = serde_json::to_string(&spec).unwrap();
            let stored = JobSpec::from_json(
                &json.replace("file:///", "file://localhost/"),
                Path::new("s"),
            )
            .unwrap()
            .repository
            .url;
            (spec.repository.url, stored)
        };
        assert_eq!(
            local("file://localhost/srv/r"),
            (Some("file:///srv/r".into()), Some("file:///srv/r".into()))
        );
    }

    /// A `%` in a `file://` URL is refused: git decodes it, so
    /// `file:///srv/allowed/%2e%2e/private` cloned `/srv/private` while
    /// allow_paths and the server's own-places check read a path under
    /// `/srv/allowed` (a submitted spec reached a repository outside the
    /// directories it may name, and a push URL wrote there).
    #[test]
    fn a_percent_in_a_file_url_is_refused() {
        let said = [
            "url = \"file:///srv/allowed/%2e%2e/private\"\n".to_owned(),
            "url = \"file://localhost/srv/allowed/%2E%2E/private\"\n".to_owned(),
            "url = \"file:///srv/r\"\n[results.push]\nurl = \"file:///srv/a/%2e%2e/p.git\"\n"
                .to_owned(),
        ]
        .map(|url| {
            JobSpec::from_toml(
                &BASE.replace("path = \".\"\n", &url),
                Path::new("spec.toml"),
            )
            .map(|_| ())
            .map_err(|e| e.to_string())
        });
        let why = |field: &str, rest: &str| {
            Err(format!(
                "job spec spec.toml: field `{field}`: `file://{rest}` holds `%`, which git decodes \
                 (`%2e%2e` is `..`) while the host's checks of the path (allow_paths, its own \
                 places) read it as written: write the path without percent-encoding"
            ))
        };
        assert_eq!(
            said,
            [
                why("repository.url", "/srv/allowed/%2e%2e/private"),
                why("repository.url", "/srv/allowed/%2E%2E/private"),
                why("results.push.url", "/srv/a/%2e%2e/p.git"),
            ]
        );
    }

    /// A value a spec error quotes (a ticket id, a `file://` URL, a
    /// `touch_only` pattern, a key) has each character plain text refuses
    /// shown as its escape, whichever check quoted it; where before an
    /// escape sequence in it reached the terminal or the API's answer as
    /// sent.
    #[test]
    fn a_hostile_value_a_spec_error_quotes_is_escaped() {
        let said = [
            BASE.replace("id = \"T-1\"", "id = \"T\\u001b]0;x\\u0007\""),
            BASE.replace("path = \".\"\n", "url = \"file://h\\u001b[2J\\u202e/r\"\n"),
            format!("{BASE}[results.github]\nrepository = \"a/w\"\ntoken = \"env:G\\u2028H\"\n"),
        ]
        .map(|text| {
            JobSpec::from_toml(&text, Path::new("spec.toml"))
                .map(|_| ())
                .unwrap_err()
                .to_string()
        });
        assert_eq!(
            said,
            [
                "job spec spec.toml: field `ticket.id`: `T\\u{1b}]0;x\\u{7}` must be ASCII letters, \
                 digits, `.`, `_` and `-`, begin with neither `.` nor `-`, hold no `..` and not end \
                 in `.lock` (it names a git branch)",
                "job spec spec.toml: field `repository.url`: `file://h\\u{1b}[2J\\u{202e}/r` names a \
                 host, `h\\u{1b}[2J\\u{202e}`, which git ignores, reading `/r`: write `file:///r` \
                 (`file://` and an absolute path)",
                "job spec spec.toml: field `results.github.token`: `env:G\\u{2028}H`: an environment \
                 variable name must be letters, digits and `_` (line 16, column 9)",
            ]
        );
    }

    /// A base ref refused says why: empty, or a white space or a leading
    /// `-` (it read "`` is not a valid git revision" for an empty one).
    #[test]
    fn a_refused_base_ref_says_why() {
        let said = ["", "main branch", "-x"].map(|base| {
            let text = BASE.replace(
                "path = \".\"\n",
                &format!("path = \".\"\nbase_ref = \"{base}\"\n"),
            );
            JobSpec::from_toml(&text, Path::new("spec.toml"))
                .map(|_| ())
                .unwrap_err()
                .to_string()
        });
        assert_eq!(
            said,
            [
                "job spec spec.toml: field `repository.base_ref`: must not be empty (a branch, tag \
                 or commit; leave it out for HEAD)"
                    .to_owned(),
                "job spec spec.toml: field `repository.base_ref`: `main branch` is not a valid git \
                 revision: it holds white space (U+0020)"
                    .to_owned(),
                "job spec spec.toml: field `repository.base_ref`: `-x` is not a valid git revision: \
                 it starts with `-`"
                    .to_owned(),
            ]
        );
    }

    /// `repository.base_ref` and `results.base_branch` are held to git's
    /// rules for a ref's name where the spec is read, a control or
    /// bidirectional character named by its code point and the name not
    /// echoed; a revision keeps `~`, `^` and `@{`. Before, an escape, a
    /// line break or an override in either was stored and shown as sent.
    #[test]
    fn a_base_ref_or_branch_git_would_refuse_is_refused_naming_the_field() {
        let with = |field: &str, value: &str| {
            let quoted = serde_json::to_string(value).unwrap();
            let text = match field {
                "base_ref" => BASE.replace(
                    "path = \".\"\n",
                    &format!("path = \".\"\nbase_ref = {quoted}\n"),
                ),
                _ => format!("{BASE}[results]\nbase_branch = {quoted}\n"),
            };
            JobSpec::from_toml(&text, Path::new("spec.toml"))
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        let refused = |field: &str, why: &str| {
            Err::<(), String>(format!("job spec spec.toml: field `{field}`: {why}"))
        };
        assert_eq!(
            [
                with("base_ref", "ma\u{1b}]0;x\u{7}in"),
                with("base_ref", "main\u{202e}"),
                with("base_ref", "a..b"),
                with("base_ref", "refs/heads/.x"),
                with("base_ref", "HEAD~1"),
                with("base_ref", "main@{1}"),
                with("base_branch", "ma\nin"),
                with("base_branch", "x\u{2066}"),
                with("base_branch", "a~1"),
                with("base_branch", "x.lock"),
                with("base_branch", "release/1.x"),
                with("base_branch", "HEAD"),
                with("base_ref", "HEAD^{/fix.* bug}"),
                with("base_ref", "main^{/a..b [x]}~1"),
                with("base_ref", "HEAD^{/fix}."),
            ],
            [
                refused(
                    "repository.base_ref",
                    "is not a valid git revision: U+001B at byte 2 is a control character"
                ),
                refused(
                    "repository.base_ref",
                    "is not a valid git revision: U+202E at byte 4 is a bidirectional control"
                ),
                refused(
                    "repository.base_ref",
                    "`a..b` is not a valid git revision: it holds `..`"
                ),
                refused(
                    "repository.base_ref",
                    "`refs/heads/.x` is not a valid git revision: a component of it starts with `.`"
                ),
                Ok(()),
                Ok(()),
                refused(
                    "results.base_branch",
                    "is not a valid git branch name: U+000A at byte 2 is a control character"
                ),
                refused(
                    "results.base_branch",
                    "is not a valid git branch name: U+2066 at byte 1 is a bidirectional control"
                ),
                refused(
                    "results.base_branch",
                    "`a~1` is not a valid git branch name: it holds `~`"
                ),
                refused(
                    "results.base_branch",
                    "`x.lock` is not a valid git branch name: a component of it ends with `.lock`"
                ),
                Ok(()),
                refused(
                    "results.base_branch",
                    "`HEAD` is not a valid git branch name: it is `HEAD`, which git reads as the \
                     current commit"
                ),
                Ok(()),
                Ok(()),
                refused(
                    "repository.base_ref",
                    "`HEAD^{/fix}.` is not a valid git revision: it ends with `.`"
                ),
            ]
        );
    }

    /// A TOML syntax error is one line, its place at the end (toml's
    /// message spans two: `invalid table header` then `expected …`,
    /// and the place was printed after the second).
    #[test]
    fn a_toml_syntax_error_is_one_line() {
        assert_eq!(
            JobSpec::from_toml("[ticket\nid = \"T-1\"\n", Path::new("job.toml"))
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Err(
                "job spec job.toml: invalid table header; expected `.`, `]` (line 1, column 8)"
                    .to_owned()
            )
        );
    }

    /// The paths of a spec read from a relative directory (`paddock run
    /// job.toml`, whose directory is ``, or stdin's `.`) are made
    /// absolute: the stored spec is read again from other working
    /// directories (`paddock publish` fetching into the source), where
    /// `./localrepo` named nothing (or another repository).
    #[test]
    fn paths_of_a_spec_in_a_relative_directory_are_made_absolute() {
        let cwd = std::env::current_dir().unwrap();
        let read = |base: &str| {
            let spec = JobSpec::from_text(BASE, Path::new("spec.toml"), Path::new(base)).unwrap();
            (spec.repository.path, spec.upstream.scenario)
        };
        assert_eq!(
            [read(""), read("."), read("jobs/a"), read("/srv")],
            [
                (Some(cwd.clone()), Some(cwd.join("s.toml"))),
                (Some(cwd.clone()), Some(cwd.join("s.toml"))),
                (Some(cwd.join("jobs/a")), Some(cwd.join("jobs/a/s.toml"))),
                (
                    Some(PathBuf::from("/srv")),
                    Some(PathBuf::from("/srv/s.toml"))
                ),
            ]
        );
    }

    /// A spec file's relative path is made plain (nothing linked here, so
    /// the plain form names the same directory); a spec given as text, as
    /// a server takes one from a submitter, keeps its `..` as written (the
    /// file system is not asked about a submitter's paths) and loses only
    /// its `.`.
    #[test]
    fn only_a_spec_files_dots_are_made_plain() {
        let dir = tempfile::tempdir().unwrap();
        let specs = dir.path().join("specs");
        std::fs::create_dir_all(&specs).unwrap();
        std::fs::create_dir_all(dir.path().join("repo")).unwrap();
        let text = BASE.replace("path = \".\"", "path = \"../repo/./x\"");
        std::fs::write(specs.join("job.toml"), &text).unwrap();
        let from_file = JobSpec::load(&specs.join("job.toml")).unwrap();
        let from_text = JobSpec::from_text(&text, Path::new("<request body>"), &specs).unwrap();
        assert_eq!(
            [
                from_file.repository.path.unwrap().into_os_string(),
                from_text.repository.path.unwrap().into_os_string(),
            ],
            [
                dir.path().join("repo/x").into_os_string(),
                specs.join("../repo/x").into_os_string(),
            ]
        );
    }

    /// A local repository URL relative to the spec is made absolute (the
    /// mirror is made from another working directory); real URLs and
    /// scp-like ones are kept as written.
    #[test]
    fn a_relative_local_url_is_made_absolute() {
        let url = |u: &str| {
            let text = BASE.replace("path = \".\"", &format!("url = \"{u}\""));
            JobSpec::from_text(&text, Path::new("spec.toml"), Path::new("examples/hello"))
                .unwrap()
                .repository
                .url
                .unwrap()
        };
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            [
                url("repo.bundle"),
                url("https://example.com/r.git"),
                url("git@example.com:r.git")
            ],
            [
                cwd.join("examples/hello/repo.bundle").display().to_string(),
                "https://example.com/r.git".to_string(),
                "git@example.com:r.git".to_string()
            ]
        );
    }

    /// A URL with a credential in it is refused, naming the field and
    /// never the secret; a source's credential is a reference, for an
    /// `https://` (or loopback `http://`) URL only.
    #[test]
    fn urls_carry_no_credentials_a_source_token_is_a_reference() {
        let with = |repo: &str, extra: &str| {
            JobSpec::from_toml(
                &format!("{}{extra}", BASE.replace("path = \".\"", repo)),
                Path::new("spec.toml"),
            )
            .map(|s| s.repository.token)
            .map_err(|e| e.to_string())
        };
        let refused = |field: &str, why: &str| {
            Err(format!("job spec spec.toml: field `{field}`: {why}; name a credential by reference instead (`token = \"env:NAME\"` or `file:PATH`), held by Paddock on the host"))
        };
        assert_eq!(
            [
                with("url = \"https://u:s3cret@git.example/r.git\"", ""),
                with("url = \"https://ghp_s3cret@git.example/r.git\"", ""),
                with(
                    "url = \"https://git.example/r.git\"",
                    "[results.push]\nurl = \"https://x:s3cret@git.example/r.git\"\n"
                ),
                with(
                    "url = \"https://git.example/r.git\"\ntoken = \"env:SOURCE_TOKEN\"",
                    ""
                ),
                with("url = \"ssh://git@git.example/r.git\"\ntoken = \"env:T\"", ""),
                with("url = \"ssh://git@git.example/r.git\"", ""),
            ],
            [
                refused(
                    "repository.url",
                    "the https:// URL carries a password (`user:…@`)"
                ),
                refused(
                    "repository.url",
                    "the https:// URL carries a user name (`…@`), which is often a token"
                ),
                refused(
                    "results.push.url",
                    "the https:// URL carries a password (`user:…@`)"
                ),
                Ok(Some(KeyRef::Env("SOURCE_TOKEN".into()))),
                Err("job spec spec.toml: field `repository.token`: needs an `https://` (or loopback `http://`) `url`".into()),
                Ok(None),
            ]
        );
    }

    #[test]
    fn touch_only_patterns_are_validated() {
        let with = |list: &str| {
            JobSpec::from_toml(
                &BASE.replace(
                    "project = \"p\"\n",
                    &format!("project = \"p\"\ntouch_only = {list}\n"),
                ),
                Path::new("spec.toml"),
            )
            .map(|s| s.ticket.touch_only)
            .map_err(|e| e.to_string())
        };
        let got = [
            r#"["src/parser/**", "**/*.md", "docs/?.txt"]"#,
            r#"["/etc/passwd"]"#,
            r#"["src/../secret"]"#,
            r#"["src/**.rs"]"#,
            r#"["src/[ab].rs"]"#,
            r#"["src//x"]"#,
            r#"[""]"#,
        ]
        .map(with);
        let field = |i: usize, reason: &str| {
            Err(format!(
                "job spec spec.toml: field `ticket.touch_only[{i}]`: {reason}"
            ))
        };
        assert_eq!(
            got,
            [
                Ok(vec![
                    "src/parser/**".to_string(),
                    "**/*.md".to_string(),
                    "docs/?.txt".to_string()
                ]),
                field(
                    0,
                    "`/etc/passwd` must be relative to the repository's top (no leading `/`)"
                ),
                field(0, "`src/../secret` must not have `.` or `..` segments"),
                field(0, "`src/**.rs`: `**` must be a whole path segment"),
                field(
                    0,
                    "`src/[ab].rs`: '[' is not supported (only `*`, `?` and `**` are)"
                ),
                field(0, "`src//x` has an empty path segment"),
                field(0, "must not be empty"),
            ]
        );
    }

    #[test]
    fn retry_policy_defaults_and_overrides() {
        assert_eq!(parse("").unwrap().broker.retry, RetrySpec::default());
        assert_eq!(
            RetrySpec::default(),
            RetrySpec {
                max_attempts: 4,
                base_delay_ms: 500,
                max_delay_ms: 30_000
            }
        );
        let spec = parse("[broker.retry]\nmax_attempts = 1\nbase_delay_ms = 10\n").unwrap();
        assert_eq!(
            spec.broker.retry,
            RetrySpec {
                max_attempts: 1,
                base_delay_ms: 10,
                max_delay_ms: 30_000
            }
        );
    }

    /// `[results.gitlab]` is checked with errors naming the field: its
    /// project, its push URL's default, no credential in its URLs, not
    /// beside `[results.github]`.
    #[test]
    fn a_gitlab_section_is_checked_field_by_field() {
        let gl = |rest: &str| parse(&format!("[results.gitlab]\ntoken = \"env:GL\"\n{rest}"));
        let got: Vec<Result<(), String>> = [
            gl("project = \"acme/widgets\"\n"),
            gl("project = \"widgets\"\n"),
            gl("project = \"42\"\n"),
            gl("project = \"42\"\npush_url = \"https://git.example/w.git\"\n"),
            gl("project = \"a/w\"\napi_url = \"https://git.example/gitlab\"\n"),
            gl("project = \"a/w\"\npush_url = \"https://oauth2:glpat-x@gitlab.com/a/w.git\"\n"),
            parse("[results.github]\nrepository = \"a/w\"\ntoken = \"env:GH\"\n[results.gitlab]\nproject = \"a/w\"\ntoken = \"env:GL\"\n"),
        ]
        .into_iter()
        .map(|r| r.map(|_| ()))
        .collect();
        let field =
            |f: &str, reason: &str| Err(format!("job spec spec.toml: field `{f}`: {reason}"));
        assert_eq!(got[..5].to_vec(), vec![
            Ok(()),
            field("results.gitlab.project", "`widgets` must be a project id (digits) or a path `group/name` (letters, digits, `-`, `_`, `.`)"),
            field("results.gitlab.push_url", "a numeric `project` id needs `push_url`"),
            Ok(()),
            field("results.gitlab.push_url", "`api_url` `https://git.example/gitlab` does not end in `/api/v4`: set `push_url`"),
        ]);
        assert!(
            got[5]
                .as_ref()
                .unwrap_err()
                .starts_with("job spec spec.toml: field `results.gitlab.push_url`: ")
                && !got[5].as_ref().unwrap_err().contains("glpat-x"),
            "{:?}",
            got[5]
        );
        assert_eq!(
            got[6],
            field(
                "results.gitlab",
                "set `[results.github]` or `[results.gitlab]`, not both"
            )
        );
    }

    /// With a forge, a `base_ref` that is plainly no branch needs
    /// `results.base_branch` (the pull request's base defaulted to it: a
    /// forge refuses a tag or a commit as a base only once the job has
    /// run, and `paddock publish`, reading the stored spec, fails again);
    /// without a forge, or with `base_branch`, it is taken.
    #[test]
    fn a_forge_needs_a_branch_to_merge_into() {
        let spec = |base: &str, results: &str| {
            let text = BASE.replace(
                "[repository]\n",
                &format!("[repository]\nbase_ref = \"{base}\"\n"),
            );
            JobSpec::from_toml(&format!("{text}{results}"), Path::new("spec.toml"))
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        let gh = "[results.github]\nrepository = \"a/w\"\ntoken = \"env:GH\"\n";
        let gl = "[results.gitlab]\nproject = \"a/w\"\ntoken = \"env:GL\"\n";
        let sha = "0123456789abcdef0123456789abcdef01234567";
        let field = |reason: &str| {
            Err(format!(
                "job spec spec.toml: field `results.base_branch`: {reason}, which a pull request \
                 cannot merge into: set `results.base_branch` to the branch it should"
            ))
        };
        assert_eq!(
            vec![
                spec("HEAD~1", gh),
                spec("refs/tags/v1.0", gl),
                spec(sha, gh),
                spec("main~2", gh),
                spec("origin/main", gh),
                spec("refs/heads/dev", gl),
                spec("v1.0", gh),
                spec("HEAD", gh),
                spec("HEAD~1", ""),
                spec(sha, &format!("[results]\nbase_branch = \"main\"\n{gh}")),
                spec("refs/tags/v\\u001b]0;x\\u0007", gh),
            ],
            vec![
                field("`repository.base_ref` `HEAD~1` is a revision expression, not a branch"),
                field("`repository.base_ref` `refs/tags/v1.0` is a tag"),
                field(&format!("`repository.base_ref` `{sha}` is a commit")),
                field("`repository.base_ref` `main~2` is a revision expression, not a branch"),
                Ok(()),
                Ok(()),
                Ok(()),
                Ok(()),
                Ok(()),
                Ok(()),
                // Refused by its code point as a revision, before it could
                // be echoed as no branch.
                Err(
                    "job spec spec.toml: field `repository.base_ref`: is not a valid git \
                     revision: U+001B at byte 11 is a control character"
                        .into()
                ),
            ]
        );
    }

    #[test]
    fn retry_policy_is_validated() {
        assert_eq!(
            parse("[broker.retry]\nmax_attempts = 0\n").unwrap_err(),
            "job spec spec.toml: field `broker.retry.max_attempts`: must be 1 to 10, got 0"
        );
        assert_eq!(
            parse("[broker.retry]\nbase_delay_ms = 100\nmax_delay_ms = 50\n").unwrap_err(),
            "job spec spec.toml: field `broker.retry.max_delay_ms`: must be from base_delay_ms (100) to 600000, got 50"
        );
        assert!(parse("[broker.retry]\nattempts = 3\n")
            .unwrap_err()
            .contains("unknown field `attempts`"));
    }

    #[test]
    fn the_upstream_event_limit_defaults_and_is_validated() {
        assert_eq!(parse("").unwrap().broker.max_upstream_event_bytes, 16 << 20);
        assert_eq!(
            parse("[broker]\nmax_upstream_event_bytes = 65536\n")
                .unwrap()
                .broker
                .max_upstream_event_bytes,
            65536
        );
        assert_eq!(
            parse("[broker]\nmax_upstream_event_bytes = 1000\n").unwrap_err(),
            "job spec spec.toml: field `broker.max_upstream_event_bytes`: must be 65536 to 268435456, got 1000"
        );
    }

    #[test]
    fn the_disk_limit_defaults_and_is_validated() {
        assert_eq!(
            (
                parse("").unwrap().limits.max_disk_bytes,
                parse("[limits]\nmax_disk_bytes = 1048576\n")
                    .unwrap()
                    .limits
                    .max_disk_bytes,
                parse("[limits]\nmax_disk_bytes = 1048575\n").unwrap_err()
            ),
            (
                10 << 30,
                1 << 20,
                "job spec spec.toml: field `limits.max_disk_bytes`: must be at least 1048576"
                    .to_string()
            )
        );
    }

    #[test]
    fn the_record_limit_defaults_and_is_validated() {
        assert_eq!(
            (
                parse("").unwrap().limits.max_records,
                parse("[limits]\nmax_records = 100\n")
                    .unwrap()
                    .limits
                    .max_records,
                parse("[limits]\nmax_records = 99\n").unwrap_err()
            ),
            (
                100_000,
                100,
                "job spec spec.toml: field `limits.max_records`: must be at least 100".to_string()
            )
        );
    }

    /// A spec of `engine` with the `[upstream]` lines given.
    fn upstream(engine: &str, lines: &str) -> Result<JobSpec, String> {
        let model = if engine == "codex" {
            "gpt-5.5"
        } else {
            "claude-sonnet-4-5"
        };
        let text = format!(
            "[ticket]\nid = \"T-1\"\ntitle = \"t\"\nproject = \"p\"\n[repository]\npath = \".\"\n[engine]\nkind = \"{engine}\"\nmodel = \"{model}\"\n[upstream]\n{lines}"
        );
        JobSpec::from_toml(&text, Path::new("spec.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn provider_credentials_are_validated() {
        let vertex =
            "provider = \"vertex\"\nvertex_project = \"p\"\nvertex_region = \"us-east5\"\n";
        let entra = "provider = \"openai\"\nkey = \"env:AZURE_CLIENT_SECRET\"\nbase_url = \"https://r.openai.azure.com/openai/v1\"\n[upstream.entra]\ntenant_id = \"72f988bf-86f1-41af-91ab-2d7cd011db47\"\nclient_id = \"0f1e2d3c-aaaa-bbbb-cccc-1234567890ab\"\n";
        let results = [
            // Vertex without a key: Application Default Credentials.
            upstream("claude", vertex).map(|s| s.upstream.key),
            upstream("claude", "provider = \"anthropic\"\n").map(|s| s.upstream.key),
            upstream("codex", entra).map(|s| s.upstream.key),
            upstream("claude", &entra.replace("\"openai\"", "\"anthropic\""))
                .map(|s| s.upstream.key),
            upstream(
                "codex",
                &entra.replace(
                    "[upstream.entra]",
                    "key_header = \"api-key\"\n[upstream.entra]",
                ),
            )
            .map(|s| s.upstream.key),
            upstream(
                "codex",
                &entra.replace("tenant_id = \"72f988bf", "tenant_id = \"../x"),
            )
            .map(|s| s.upstream.key),
            upstream("codex", &format!("{entra}authority = \"login.example\"\n"))
                .map(|s| s.upstream.key),
        ];
        assert_eq!(
            results,
            [
                Ok(None),
                Err("job spec spec.toml: field `upstream.key`: the anthropic upstream needs a key reference (`env:NAME` or `file:PATH`)".into()),
                Ok(Some(KeyRef::Env("AZURE_CLIENT_SECRET".into()))),
                Err("job spec spec.toml: field `upstream.entra`: only the openai (Azure OpenAI) upstream takes Entra ID credentials".into()),
                Err("job spec spec.toml: field `upstream.key_header`: Entra ID tokens go in `Authorization: Bearer`: drop `api-key`".into()),
                Err("job spec spec.toml: field `upstream.entra.tenant_id`: `../x-86f1-41af-91ab-2d7cd011db47` must be an id (letters, digits, `-`, `.`)".into()),
                Err("job spec spec.toml: field `upstream.entra.authority`: `login.example` must be an http:// or https:// URL".into()),
            ]
        );
        let bedrock = "provider = \"bedrock\"\nbedrock_region = \"us-east-1\"\n";
        let results = [
            // No key: AWS_BEARER_TOKEN_BEDROCK or the AWS credential chain.
            upstream("claude", bedrock).map(|s| (s.upstream.key, s.upstream.aws_profile)),
            upstream("claude", &format!("{bedrock}aws_profile = \"sso-dev\"\n"))
                .map(|s| (s.upstream.key, s.upstream.aws_profile)),
            upstream(
                "claude",
                &format!("{bedrock}key = \"env:BEDROCK_KEY\"\nkey_header = \"bearer\"\n"),
            )
            .map(|s| (s.upstream.key, s.upstream.aws_profile)),
            upstream("claude", &format!("{bedrock}key_header = \"bearer\"\n"))
                .map(|s| (s.upstream.key, s.upstream.aws_profile)),
            upstream(
                "claude",
                &format!("{bedrock}key = \"env:K\"\nkey_header = \"api-key\"\n"),
            )
            .map(|s| (s.upstream.key, s.upstream.aws_profile)),
            upstream(
                "claude",
                &format!("{bedrock}key = \"env:K\"\naws_profile = \"p\"\n"),
            )
            .map(|s| (s.upstream.key, s.upstream.aws_profile)),
            upstream("claude", &format!("{bedrock}aws_profile = \"a b\"\n"))
                .map(|s| (s.upstream.key, s.upstream.aws_profile)),
        ];
        let bearer_err = "job spec spec.toml: field `upstream.key_header`: bedrock takes `bearer` (the key is then a Bedrock API key), with a key";
        let profile_err = "job spec spec.toml: field `upstream.aws_profile`: only a bedrock upstream without a key (the AWS credential chain) takes it";
        assert_eq!(
            results,
            [
                Ok((None, None)),
                Ok((None, Some("sso-dev".to_string()))),
                Ok((Some(KeyRef::Env("BEDROCK_KEY".into())), None)),
                Err(bearer_err.to_string()),
                Err(bearer_err.to_string()),
                Err(profile_err.to_string()),
                Err("job spec spec.toml: field `upstream.aws_profile`: `a b` must be a profile name (letters, digits, `-_.@+`)".to_string()),
            ]
        );
        assert_eq!(
            upstream("codex", entra).unwrap().upstream.entra,
            Some(EntraSpec {
                tenant_id: "72f988bf-86f1-41af-91ab-2d7cd011db47".into(),
                client_id: "0f1e2d3c-aaaa-bbbb-cccc-1234567890ab".into(),
                authority: None,
                scope: None,
            })
        );
    }

    /// A 127 KB title used to pass and fail at `exec` (E2BIG); every text
    /// field and list has a limit, checked up front, naming the field.
    #[test]
    fn oversized_fields_are_refused_naming_the_field_and_the_limit() {
        let title = "x".repeat(127_000);
        let with_title = BASE.replace("title = \"t\"", &format!("title = \"{title}\""));
        let spec = |text: &str| {
            JobSpec::from_toml(text, Path::new("spec.toml"))
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        let at_limit = BASE.replace(
            "title = \"t\"",
            &format!("title = \"{}\"", "x".repeat(1_000)),
        );
        let many: Vec<String> = (0..101).map(|i| format!("\"c{i}\"")).collect();
        let long_item = format!("\"{}\"", "y".repeat(4_097));
        let big_comments: Vec<String> = (0..7)
            .map(|i| format!("{{ author = \"a{i}\", body = \"{}\" }}", "z".repeat(16_000)))
            .collect();
        assert_eq!(
            (spec(&with_title), spec(&at_limit)),
            (
                Err("job spec spec.toml: field `ticket.title`: 127000 bytes, over the limit of 1000 bytes".to_string()),
                Ok(()),
            )
        );
        let ticket = |extra: &str| {
            spec(&BASE.replace("project = \"p\"", &format!("project = \"p\"\n{extra}")))
        };
        assert_eq!(
            (
                ticket(&format!("done_when = [{}]", many.join(", "))),
                ticket(&format!("constraints = [\"ok\", {long_item}]")),
                ticket(&format!("comments = [{}]", big_comments.join(", "))),
            ),
            (
                Err("job spec spec.toml: field `ticket.done_when`: 101 items, over the limit of 100".to_string()),
                Err("job spec spec.toml: field `ticket.constraints[1]`: 4097 bytes, over the limit of 4096 bytes".to_string()),
                Err("job spec spec.toml: field `ticket`: 112024 bytes of text in all, over the limit of 98304 bytes".to_string()),
            )
        );
    }

    /// Inline skills (`[[context.skill]]`) and `context.instructions` have
    /// their own, larger limits: the patterns name the fields as the spec
    /// spells them.
    #[test]
    fn context_text_has_its_own_limits() {
        let spec = |extra: &str| {
            JobSpec::from_toml(&format!("{BASE}\n{extra}"), Path::new("spec.toml"))
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        let skill = |body: usize| {
            format!(
                "[[context.skill]]\nname = \"s\"\ndescription = \"d\"\nbody = \"{}\"\n",
                "b".repeat(body)
            )
        };
        let instructions = |n: usize| format!("[context]\ninstructions = \"{}\"\n", "i".repeat(n));
        assert_eq!(
            (
                spec(&skill(32_768)),
                spec(&skill(32_769)),
                spec(&instructions(65_536)),
                spec(&instructions(65_537)),
            ),
            (
                Ok(()),
                Err("job spec spec.toml: field `context.skill[0].body`: 32769 bytes, over the limit of 32768 bytes".to_string()),
                Ok(()),
                Err("job spec spec.toml: field `context.instructions`: 65537 bytes, over the limit of 65536 bytes".to_string()),
            )
        );
    }

    /// `accept_degraded` names rules in snake_case; the former camelCase
    /// names are read too, and listed as deprecated. `network` (a profile's
    /// `[network]` maximum, which the `process` rung cannot enforce) is a
    /// rule too.
    #[test]
    fn accepted_rules_in_either_spelling() {
        let text = format!(
            "{BASE}\n[policy]\nprofile = \"constrained-local\"\naccept_degraded = [\"cpu_limit\", \"memLimitMb\", \"network\"]\n"
        );
        let spec = JobSpec::from_toml(&text, Path::new("spec.toml")).unwrap();
        assert_eq!(
            (
                spec.policy.accepts("cpu_limit"),
                spec.policy.accepts("mem_limit_mb"),
                spec.policy.accepts("network"),
                spec.policy.accepts("timeout_min"),
                spec.policy.deprecated_rules(),
            ),
            (
                true,
                true,
                true,
                false,
                vec![("memLimitMb", "mem_limit_mb")]
            )
        );
        let bad = text.replace("\"memLimitMb\"", "\"allowedModels\"");
        assert_eq!(
            JobSpec::from_toml(&bad, Path::new("spec.toml")).map_err(|e| e.to_string()).err(),
            Some("job spec spec.toml: field `policy.accept_degraded[1]`: `allowedModels` is not a profile rule; expected one of deny_commands, max_concurrent_jobs, cpu_limit, mem_limit_mb, timeout_min, network".to_string())
        );
    }

    #[test]
    fn network_and_setup_parse_and_errors_name_file_and_field() {
        let spec = parse(
            "[network]\nallow = [\"api.github.com:443\", \"*.pythonhosted.org\"]\n\
             [setup]\ncommands = [\"npm ci\", \"cargo fetch\"]\nnetwork = \"registries\"\ntimeout_secs = 300\n",
        )
        .unwrap();
        assert_eq!(
            (spec.network, spec.setup),
            (
                NetworkSpec {
                    allow: vec!["api.github.com:443".into(), "*.pythonhosted.org".into()],
                    web_search: false,
                },
                SetupSpec {
                    commands: vec!["npm ci".into(), "cargo fetch".into()],
                    network: crate::network::SetupNetwork::Preset("registries".into()),
                    timeout_secs: 300,
                    cache: true,
                }
            )
        );
        assert_eq!(
            parse("[network]\nallow = [\"ok.example\", \"10.0.0.1:99999\"]\n").unwrap_err(),
            "job spec spec.toml: field `network.allow[1]`: `10.0.0.1:99999`: the port must be 1 to 65535"
        );
        // A wildcard over a public suffix, named with its field.
        assert_eq!(
            parse("[network]\nallow = [\"*.co.uk\"]\n").unwrap_err(),
            "job spec spec.toml: field `network.allow[0]`: `*.co.uk`: `co.uk` is a public suffix \
             (the Public Suffix List's ICANN section): the names below it belong to unrelated \
             owners, any of whom the wildcard would allow; list the hosts you need, or a \
             wildcard below a domain one owner holds (`*.example.co.uk`)"
        );
        // The same destination twice, however written: both positions.
        assert_eq!(
            parse(
                "[network]\nallow = [\"example.com\", \"a.example\", \"b.example\", \
                 \"Example.COM:443\"]\n"
            )
            .unwrap_err(),
            "job spec spec.toml: field `network.allow[3]`: `network.allow[0]` and \
             `network.allow[3]` are both `example.com:443`; remove one"
        );
        assert_eq!(
            parse("[setup]\ncommands = [\"true\"]\ntimeout_secs = 99999\n").unwrap_err(),
            "job spec spec.toml: field `setup.timeout_secs`: must be 1 to 7200, got 99999"
        );
        assert!(parse("[setup]\ncommand = [\"x\"]\n")
            .unwrap_err()
            .starts_with("job spec spec.toml: field `setup.command`: unknown field"));
        // Unset, neither section is written back.
        let plain = serde_json::to_value(parse("").unwrap()).unwrap();
        assert_eq!((plain.get("network"), plain.get("setup")), (None, None));
    }

    /// A spec the store kept from before repeats were refused (009c378)
    /// reads again with each repeat once, where a new spec with them is
    /// refused; a stored spec breaking a rule the host relies on (a
    /// destination over a public suffix) is still refused. Before, a
    /// stored repeat failed its requeue, `paddock publish`, a next attempt
    /// and the reaper's reads.
    #[test]
    fn a_stored_spec_with_repeats_reads_them_once() {
        let spec = parse(
            "[network]\nallow = [\"example.com\"]\n[setup]\ncommands = [\"true\"]\n\
             network = [\"registries\"]\n",
        )
        .unwrap();
        let mut stored = serde_json::to_value(&spec).unwrap();
        stored["network"]["allow"] =
            serde_json::json!(["example.com", "a.example", "EXAMPLE.com:443", "a.example"]);
        stored["setup"]["network"] = serde_json::json!(["registries", "pypi.org", "REGISTRIES"]);
        let text = stored.to_string();
        let read = JobSpec::from_stored(&text, Path::new("the store")).unwrap();
        assert_eq!(
            (
                read.network.allow.clone(),
                read.setup.network.clone(),
                JobSpec::from_json(&text, Path::new("new.json")).map_err(|e| e.to_string()),
            ),
            (
                vec!["example.com".to_string(), "a.example".to_string()],
                crate::network::SetupNetwork::List(vec!["registries".into(), "pypi.org".into()]),
                Err(
                    "job spec new.json: field `network.allow[2]`: `network.allow[0]` and \
                     `network.allow[2]` are both `example.com:443`; remove one"
                        .to_string()
                ),
            )
        );
        stored["network"]["allow"] = serde_json::json!(["*.co.uk", "*.co.uk"]);
        assert_eq!(
            JobSpec::from_stored(&stored.to_string(), Path::new("the store"))
                .map_err(|e| e.to_string())
                .err()
                .map(|e| e.starts_with("job spec the store: field `network.allow[0]`: ")),
            Some(true)
        );
    }
}

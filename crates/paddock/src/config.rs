//! The user's config file, `$XDG_CONFIG_HOME/paddock/config.toml` (else
//! `~/.config/paddock/config.toml`): defaults for what a spec leaves
//! unset — the budget, the price table merged over the shipped one, the
//! isolation rung, the host profile (a table's or profile's relative path
//! read beside the file) — and `paddock serve`'s settings (the
//! `[serve]` table), the caches' cap (`[caches]`), the heartbeat's
//! timing on a store several hosts share (`[hosts]`) and the host's
//! tools every job gets (`[jobs]`: directories put on its PATH, paths
//! bound read-only into its sandbox, variables set). A spec's own values always win; a
//! key the file does not know is an error naming the file and line
//! (docs/cli.md#config-file). Each part (the top-level keys, each table:
//! `Section`) is read on its own, and a command reads only the parts it
//! uses (`load_only`): a mistake in `[serve]` fails `paddock serve`, not
//! `paddock gc`; `paddock doctor` reports every part's (`load_sections`).

use std::path::{Path, PathBuf};

use paddock_protocol::{Isolation, JobSpec, PolicySpec};
use serde::Deserialize;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    /// `budget.max_usd` of a spec without one.
    pub max_usd: Option<f64>,
    /// A price table merged over the shipped one (relative to the config
    /// file), unless `--prices`/`PADDOCK_PRICES` names one.
    pub prices: Option<PathBuf>,
    /// The rung of a spec whose `isolation` is `auto` (or unset).
    pub isolation: Option<Isolation>,
    /// `policy.profile` of a spec without one.
    pub profile: Option<String>,
    /// The profile every job on this host runs under (docs/host-profile.md,
    /// "The host's profile"): a spec without one gets it, a spec naming
    /// another is refused at admission. Its limits (the network maximum,
    /// timeouts, slots) then bind every job, which cannot pick a wider
    /// profile or none.
    pub host_profile: Option<String>,
    /// `paddock serve`'s settings; its flags win.
    pub serve: ServeFile,
    /// The caches under the jobs directory (`[caches]`).
    pub caches: CachesFile,
    /// Jobs' heartbeats in a store shared by several hosts (`[hosts]`).
    pub hosts: HostsFile,
    /// The host's tools every job gets (`[jobs]`).
    pub jobs: JobsFile,
}

/// The `[jobs]` table: the host's tools installed outside the system
/// directories (a rustup toolchain under `~/.cargo` and `~/.rustup`, Go
/// under `/usr/local/go`, `~/.local/bin`), which a job's environment,
/// built from scratch, does not otherwise have: its PATH holds the
/// engine's directories, node's and the system directories alone.
/// Written by whoever runs the host, never by a job's spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobsFile {
    /// Directories put on every job's PATH, in this order, after the
    /// engine's and node's and before the system directories; on the
    /// `sandbox` rung bound read-only, as the engine's PATH directories
    /// are.
    #[serde(default)]
    pub path: Vec<HostPath>,
    /// Paths bound read-only into every job's sandbox (what the PATH's
    /// programs read: a rustup toolchain's `~/.rustup`); nothing on the
    /// `process` rung, which sees the host's files anyway.
    #[serde(default)]
    pub read_only: Vec<HostPath>,
    /// Variables set in every job's environment (`RUSTUP_HOME`): the job
    /// reads them, so never a secret. A name the job's environment sets
    /// itself (PATH, HOME, the proxy variables, the engines') is refused.
    #[serde(default)]
    pub env: std::collections::BTreeMap<JobEnvName, JobEnvValue>,
}

impl JobsFile {
    /// The first path of `path` or `read_only` that does not exist on
    /// this host, named with its key (`jobs.path: /usr/local/go/bin`).
    pub fn missing(&self) -> Option<String> {
        let named = |key: &str, dirs: &[HostPath]| {
            dirs.iter()
                .find(|d| !d.0.exists())
                .map(|d| format!("jobs.{key}: {}", d.0.display()))
        };
        named("path", &self.path).or_else(|| named("read_only", &self.read_only))
    }

    /// The variables, in name order.
    pub fn env_pairs(&self) -> Vec<(String, String)> {
        self.env
            .iter()
            .map(|(k, v)| (k.0.clone(), v.0.clone()))
            .collect()
    }
}

/// An absolute path of the host, without a `:` (PATH's separator) or a
/// control character; whether it exists is asked where jobs are run
/// ([`JobsFile::missing`]), not where the file is read.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct HostPath(pub PathBuf);

impl TryFrom<String> for HostPath {
    type Error = String;

    fn try_from(v: String) -> Result<Self, Self::Error> {
        let p = PathBuf::from(&v);
        if !p.is_absolute() {
            return Err(format!("{v:?} is not an absolute path"));
        }
        if v.contains(':') || v.chars().any(char::is_control) {
            return Err(format!(
                "{v:?} holds a `:` or a control character, which a PATH cannot carry"
            ));
        }
        Ok(HostPath(p))
    }
}

/// A variable's name in `[jobs] env`: letters, digits and `_`, not
/// starting with a digit, and none the job's environment sets itself.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub struct JobEnvName(pub String);

/// Names, and prefixes ending in `_`, that a job's environment sets
/// itself or that change how every program starts: refused in `[jobs]
/// env` (case-insensitive).
const RESERVED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "TERM",
    "NO_COLOR",
    "TMPDIR",
    "XDG_",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "SSL_CERT_",
    "NODE_",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "GIT_",
    "PIP_CERT",
    "CARGO_HTTP_CAINFO",
    "OPENAI_",
    "ANTHROPIC_",
    "CODEX_",
    "CLAUDE_",
    "AWS_",
    "GOOGLE_",
    "CLOUDSDK_",
    "CLOUD_ML_",
    "DISABLE_",
    "STAND_IN_",
    "PADDOCK_",
    "LD_",
    "BASH_ENV",
    "ENV",
];

impl TryFrom<String> for JobEnvName {
    type Error = String;

    fn try_from(v: String) -> Result<Self, Self::Error> {
        let well_formed = v
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !well_formed {
            return Err(format!(
                "{v:?} is not a variable name (letters, digits and `_`, not starting with a digit)"
            ));
        }
        let upper = v.to_ascii_uppercase();
        if paddock_protocol::credential::is_reserved_env(&v) {
            return Err(format!(
                "{v} is set by Paddock for every job (its home, PATH, proxy or CA bundle); it cannot be set here"
            ));
        }
        if let Some(r) = RESERVED_ENV.iter().find(|r| {
            if r.ends_with('_') {
                upper.starts_with(*r)
            } else {
                upper == **r
            }
        }) {
            return Err(format!(
                "{v} is set by Paddock for every job, or changes how every program starts ({r}{}); it cannot be set here",
                if r.ends_with('_') { "…" } else { "" }
            ));
        }
        Ok(JobEnvName(v))
    }
}

/// A variable's value in `[jobs] env`: no NUL.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct JobEnvValue(pub String);

impl TryFrom<String> for JobEnvValue {
    type Error = String;

    fn try_from(v: String) -> Result<Self, Self::Error> {
        if v.contains('\0') {
            return Err("a value holds a NUL, which no environment can carry".into());
        }
        Ok(JobEnvValue(v))
    }
}

/// How often a running job's heartbeat is renewed, unless configured.
pub const DEFAULT_HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(10);
/// How old another host's job's heartbeat must be before a reaper
/// reclaims it, unless configured.
pub const DEFAULT_HEARTBEAT_TTL: std::time::Duration = std::time::Duration::from_secs(60);

/// The `[hosts]` table: how often this host renews its running jobs'
/// heartbeats and how stale another host's must be before this host's
/// reaper reclaims its job (the heartbeat module, docs/store.md).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostsFile {
    /// Seconds between renewals (default 10).
    pub heartbeat_secs: Option<u64>,
    /// Seconds after which another host's heartbeat is stale (default 60).
    pub heartbeat_ttl_secs: Option<u64>,
    /// How many times a job from a server's queue that was reclaimed from
    /// a dead host is queued again automatically (default 1; 0: never).
    pub requeue_reclaimed: Option<u32>,
    /// Seconds between a running job's reads of whether another process
    /// asked to cancel it, the fallback of the cancel's wake-up (default
    /// 1; never longer than `heartbeat_secs`).
    pub cancel_poll_secs: Option<u64>,
}

/// How many times a reclaimed queued job is queued again, unless
/// configured.
pub const DEFAULT_REQUEUE_RECLAIMED: u32 = 1;

impl HostsFile {
    /// The renewal interval and the TTL, defaults filled in; why not when
    /// the interval is 0 or the TTL not longer than the interval.
    pub fn timing(&self) -> Result<(std::time::Duration, std::time::Duration), String> {
        let interval = self
            .heartbeat_secs
            .map_or(DEFAULT_HEARTBEAT, std::time::Duration::from_secs);
        let ttl = self
            .heartbeat_ttl_secs
            .map_or(DEFAULT_HEARTBEAT_TTL, std::time::Duration::from_secs);
        if interval.is_zero() {
            return Err("[hosts] heartbeat_secs must be at least 1".to_owned());
        }
        if ttl <= interval {
            return Err(format!(
                "[hosts] heartbeat_ttl_secs ({}) must be longer than heartbeat_secs ({}): \
                 another host would reclaim jobs between their renewals",
                ttl.as_secs(),
                interval.as_secs()
            ));
        }
        Ok((interval, ttl))
    }
}

/// The caches' size cap when the config file sets none: 10 GiB.
pub const DEFAULT_CACHE_MAX_BYTES: u64 = 10 << 30;

/// The `[caches]` table: the size cap on the URL mirrors, overlay
/// snapshots and setup cache entries under the jobs directory
/// (`crate::cache_cap`, docs/cli.md).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CachesFile {
    /// `"10GiB"`, `"500MiB"`, `"64KiB"`, a number of bytes, or
    /// `"unlimited"`.
    pub max_size: Option<CacheSize>,
}

impl CachesFile {
    /// The cap in bytes (`None`: unlimited), the default when unset.
    pub fn max_bytes(&self) -> Option<u64> {
        match self.max_size {
            None => Some(DEFAULT_CACHE_MAX_BYTES),
            Some(CacheSize::Bytes(n)) => Some(n),
            Some(CacheSize::Unlimited) => None,
        }
    }
}

/// A size cap: bytes, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheSize {
    Bytes(u64),
    Unlimited,
}

impl<'de> Deserialize<'de> for CacheSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Number(n) => Ok(CacheSize::Bytes(n)),
            Raw::Text(t) => parse_size(&t).map_err(serde::de::Error::custom),
        }
    }
}

/// `"10GiB"` (also `KiB`, `MiB`, `TiB`, `B`, or no unit: bytes; `K`,
/// `M`, `G`, `T` as their binary units) or `"unlimited"`.
fn parse_size(text: &str) -> Result<CacheSize, String> {
    let t = text.trim();
    if t == "unlimited" {
        return Ok(CacheSize::Unlimited);
    }
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let shift = match unit.trim() {
        "" | "B" => 0,
        "K" | "KiB" => 10,
        "M" | "MiB" => 20,
        "G" | "GiB" => 30,
        "T" | "TiB" => 40,
        _ => {
            return Err(format!(
                "`{text}` is not a size (e.g. \"10GiB\", \"500MiB\", \"unlimited\")"
            ))
        }
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1u64 << shift))
        .map(CacheSize::Bytes)
        .ok_or_else(|| {
            format!("`{text}` is not a size (e.g. \"10GiB\", \"500MiB\", \"unlimited\")")
        })
}

/// A number of seconds that must be at least 1 (`max_passed_over_secs`).
fn some_secs_at_least_one<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match u64::deserialize(d)? {
        0 => Err(serde::de::Error::custom(
            "must be at least 1: 0 would fail a job at its first pass, before any other \
             server looked at it",
        )),
        n => Ok(Some(n)),
    }
}

/// A count that must be at least 1 (`max_concurrent_jobs`).
fn some_at_least_one<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    match u32::deserialize(d)? {
        0 => Err(serde::de::Error::custom("must be at least 1")),
        n => Ok(Some(n)),
    }
}

/// The `[serve]` table: what `paddock serve` runs with unless a flag says
/// otherwise (docs/serve.md).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeFile {
    /// The address to listen on (an IP address and a port: a mistake is
    /// said with the address to write, `listen_addr::parse`).
    #[serde(default, deserialize_with = "crate::listen_addr::deserialize_some")]
    pub listen: Option<std::net::SocketAddr>,
    /// How many queued jobs run at once (at least 1: 0 was raised to 1
    /// without a word).
    #[serde(default, deserialize_with = "some_at_least_one")]
    pub max_concurrent_jobs: Option<u32>,
    /// How long SIGTERM waits for running jobs before cancelling them.
    pub drain_grace_secs: Option<u64>,
    /// How long a job may wait queued, passed over by every server that
    /// claimed it, before the server passing it over fails it (at least 1:
    /// 0 failed a job at its first pass, before any other server looked).
    #[serde(default, deserialize_with = "some_secs_at_least_one")]
    pub max_passed_over_secs: Option<u64>,
    /// Where every job's final record is POSTed (completion webhooks).
    pub webhook_url: Option<String>,
    /// The webhooks' HMAC key, as a reference (`env:NAME`, `file:PATH`).
    pub webhook_secret: Option<String>,
    /// The log's format on stderr (`--log-format` wins).
    pub log_format: Option<LogFormat>,
    /// The jobs this server takes (`[[serve.lanes]]`); none: every job.
    pub lanes: Option<Vec<crate::store::Lane>>,
    /// Secret references a submitted spec may name (docs/serve.md,
    /// "What a submitted spec may name").
    pub allow_refs: Option<Vec<String>>,
    /// Directories under which a submitted spec may name files.
    pub allow_paths: Option<Vec<PathBuf>>,
    /// Hosts a submitted spec may send the server's credentials to.
    pub allow_hosts: Option<Vec<String>>,
    /// Host profiles (stored ids, presets) a submitted spec may choose
    /// besides the default one.
    pub allow_profiles: Option<Vec<String>>,
    /// Whether a submitted spec may ask for the `process` rung.
    pub allow_process: Option<bool>,
    /// Whether a submitted spec may set `results.allow_ci_changes` (its
    /// result pushed though it changes a CI definition).
    pub allow_ci_changes: Option<bool>,
    /// Whether a submission this server cannot run (a secret, a file or
    /// its host's admission only another server of the fleet has) is
    /// stored queued for another server, where by default it is refused.
    pub accept_for_fleet: Option<bool>,
}

/// How the log is written on stderr: lines for people, or one JSON object
/// per event (`timestamp`, `level`, `target`, `fields`) for a collector.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {path}: cannot read")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is no config: a syntax error, an unknown key, a wrong
    /// type. `field` is the key's whole path (`serve.listen`), empty where
    /// none was reached.
    #[error(
        "config file {path}, line {line}: {}{message}",
        paddock_protocol::parse_error::field_prefix(field)
    )]
    Parse {
        path: PathBuf,
        line: usize,
        field: String,
        message: String,
    },
}

/// Where the config file is: `$XDG_CONFIG_HOME/paddock/config.toml`, else
/// under `$HOME/.config`; `None` without either variable.
pub fn location(
    xdg_config_home: Option<&std::ffi::OsStr>,
    home: Option<&std::ffi::OsStr>,
) -> Option<PathBuf> {
    let base = match xdg_config_home.filter(|v| !v.is_empty()) {
        Some(x) => PathBuf::from(x),
        None => PathBuf::from(home.filter(|v| !v.is_empty())?).join(".config"),
    };
    Some(base.join("paddock").join("config.toml"))
}

/// A part of the config file that a command reads on its own: its
/// top-level keys (the defaults a spec leaves unset, `prices`, the
/// profiles), or one of its tables. A mistake in one part fails only the
/// commands that read it (`load_only`): a typo in `[serve]` stopped
/// `paddock gc` and `paddock run` too, which never read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Section {
    /// The keys outside any table (`max_usd`, `prices`, `isolation`,
    /// `profile`, `host_profile`). A key or table the file does not know
    /// is no part's mistake: it fails the whole file (`load_sections`).
    Top,
    Serve,
    Caches,
    Hosts,
    Jobs,
}

impl Section {
    /// Every part, in the file's documented order.
    pub const ALL: [Section; 5] = [
        Section::Top,
        Section::Serve,
        Section::Caches,
        Section::Hosts,
        Section::Jobs,
    ];

    /// How a user finds it in the file: `[serve]`, or `top-level keys`.
    pub fn name(self) -> &'static str {
        match self {
            Section::Top => "top-level keys",
            Section::Serve => "[serve]",
            Section::Caches => "[caches]",
            Section::Hosts => "[hosts]",
            Section::Jobs => "[jobs]",
        }
    }
}

/// The top-level keys, the tables left unread (each is read on its own;
/// a name the file does not know was refused by [`KnownNames`] first).
#[derive(Deserialize)]
struct TopKeys {
    max_usd: Option<f64>,
    prices: Option<PathBuf>,
    isolation: Option<Isolation>,
    profile: Option<String>,
    host_profile: Option<String>,
}

/// One table read, the others (`IgnoredAny`) and the top-level keys left
/// to their own reads: the whole text is read each time, so an error's
/// line is the file's.
#[derive(Deserialize)]
struct Tables<S, C, H, J> {
    serve: Option<S>,
    caches: Option<C>,
    hosts: Option<H>,
    jobs: Option<J>,
}

type Ignored = serde::de::IgnoredAny;

/// Every name the file may hold at its top, none read: a name it does not
/// know is refused here, for every command (`load_sections`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct KnownNames {
    max_usd: Option<Ignored>,
    prices: Option<Ignored>,
    isolation: Option<Ignored>,
    profile: Option<Ignored>,
    host_profile: Option<Ignored>,
    serve: Option<Ignored>,
    caches: Option<Ignored>,
    hosts: Option<Ignored>,
    jobs: Option<Ignored>,
}

/// The config file read part by part: each part's value or its mistake.
#[derive(Debug)]
pub struct Sections {
    top: Result<Config, ConfigError>,
    serve: Result<ServeFile, ConfigError>,
    caches: Result<CachesFile, ConfigError>,
    hosts: Result<HostsFile, ConfigError>,
    jobs: Result<JobsFile, ConfigError>,
}

impl Sections {
    /// Each part that does not read, with its error, in the file's order
    /// (what `paddock doctor` reports: every one, not the first).
    pub fn errors(&self) -> Vec<(Section, &ConfigError)> {
        Section::ALL
            .into_iter()
            .filter_map(|s| self.error(s).map(|e| (s, e)))
            .collect()
    }

    /// The `[jobs]` table, when it reads.
    pub fn jobs(&self) -> Option<&JobsFile> {
        self.jobs.as_ref().ok()
    }

    fn error(&self, section: Section) -> Option<&ConfigError> {
        match section {
            Section::Top => self.top.as_ref().err(),
            Section::Serve => self.serve.as_ref().err(),
            Section::Caches => self.caches.as_ref().err(),
            Section::Hosts => self.hosts.as_ref().err(),
            Section::Jobs => self.jobs.as_ref().err(),
        }
    }

    /// The config with the parts in `reads`; every other part at its
    /// defaults, unread; the first of `reads` (in the file's order) that
    /// does not read is the error.
    pub fn only(self, reads: &[Section]) -> Result<Config, ConfigError> {
        let wants = |s: Section| reads.contains(&s);
        let mut config = match (wants(Section::Top), self.top) {
            (true, top) => top?,
            (false, _) => Config::default(),
        };
        if wants(Section::Serve) {
            config.serve = self.serve?;
        }
        if wants(Section::Caches) {
            config.caches = self.caches?;
        }
        if wants(Section::Hosts) {
            config.hosts = self.hosts?;
        }
        if wants(Section::Jobs) {
            config.jobs = self.jobs?;
        }
        Ok(config)
    }
}

/// The config at `path`, every part of it; the defaults if there is no
/// such file.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    load_only(path, &Section::ALL)
}

/// The config at `path` with the parts a command reads (`reads`), the
/// others at their defaults whatever they hold; the defaults if there is
/// no such file. A file that cannot be read, is no TOML or holds a name
/// at its top that it does not know fails whatever is read.
pub fn load_only(path: &Path, reads: &[Section]) -> Result<Config, ConfigError> {
    load_sections(path)?.only(reads)
}

/// The config at `path` read part by part (`Sections`); `Err` only when
/// the file cannot be read, is no TOML or holds a name at its top that it
/// does not know ([`KnownNames`]). No file: every part its defaults.
pub fn load_sections(path: &Path) -> Result<Sections, ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Sections {
                top: Ok(Config::default()),
                serve: Ok(ServeFile::default()),
                caches: Ok(CachesFile::default()),
                hosts: Ok(HostsFile::default()),
                jobs: Ok(JobsFile::default()),
            })
        }
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    // The syntax and the names first (one read: a file that is no TOML
    // fails it too, with its line): a key or table the file does not know (`[cache]`
    // for `[caches]`, a key above every table meant for one) belongs to
    // no part, so it stops every command, as a syntax error does. Read
    // as a part of its own, `paddock gc` ran on with the default cap a
    // `[cache] max_size` was meant to change.
    read::<KnownNames>(path, &text)?;
    let top = read::<TopKeys>(path, &text).map(|t| top_config(path, t));
    let serve = read::<Tables<ServeFile, Ignored, Ignored, Ignored>>(path, &text)
        .map(|t| t.serve.unwrap_or_default());
    let caches = read::<Tables<Ignored, CachesFile, Ignored, Ignored>>(path, &text)
        .map(|t| t.caches.unwrap_or_default());
    let hosts = read::<Tables<Ignored, Ignored, HostsFile, Ignored>>(path, &text)
        .map(|t| t.hosts.unwrap_or_default());
    let jobs = read::<Tables<Ignored, Ignored, Ignored, JobsFile>>(path, &text)
        .map(|t| t.jobs.unwrap_or_default());
    Ok(Sections {
        top,
        serve,
        caches,
        hosts,
        jobs,
    })
}

/// `text` (the file at `path`) read as `T`; as a job spec says where it
/// failed: the key's whole path, the message in a user's words, its line.
fn read<T: serde::de::DeserializeOwned>(path: &Path, text: &str) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(toml::Deserializer::new(text)).map_err(|e| {
        let e = paddock_protocol::parse_error::toml_parts(e, text);
        ConfigError::Parse {
            path: path.to_path_buf(),
            line: e.at.map_or(1, |(line, _)| line),
            field: e.field,
            message: e.message,
        }
    })
}

/// The top-level keys as a `Config` (its tables at their defaults), a
/// relative path in them made the file's neighbour.
fn top_config(path: &Path, top: TopKeys) -> Config {
    let mut config = Config {
        max_usd: top.max_usd,
        prices: top.prices,
        isolation: top.isolation,
        profile: top.profile,
        host_profile: top.host_profile,
        ..Config::default()
    };
    if let (Some(p), Some(dir)) = (config.prices.as_mut(), path.parent()) {
        if p.is_relative() {
            *p = dir.join(&*p);
        }
    }
    // A profile file named by a relative path is the config file's
    // neighbour, as `prices` is; before, it was read from whatever
    // directory `paddock` ran in.
    for name in [&mut config.profile, &mut config.host_profile]
        .into_iter()
        .flatten()
    {
        if let (true, Some(dir)) = (
            PolicySpec::profile_is_file(name) && Path::new(name.as_str()).is_relative(),
            path.parent(),
        ) {
            if let Ok(joined) = dir.join(name.as_str()).into_os_string().into_string() {
                *name = joined;
            }
        }
    }
    config
}

impl Config {
    /// The key of this config that gives `spec` its host profile in
    /// [`apply`](Config::apply) (`host_profile`, else `profile`), when
    /// `spec` names none: what an error about that profile names, since
    /// the spec's reader looks for it in the spec.
    pub fn profile_key(&self, spec: &JobSpec) -> Option<&'static str> {
        match (&spec.policy.profile, &self.host_profile, &self.profile) {
            (Some(_), _, _) | (None, None, None) => None,
            (None, Some(_), _) => Some("host_profile"),
            (None, None, Some(_)) => Some("profile"),
        }
    }

    /// `spec` with this config's defaults where it leaves a value unset.
    pub fn apply(&self, mut spec: JobSpec) -> JobSpec {
        if spec.budget.max_usd.is_none() {
            spec.budget.max_usd = self.max_usd;
        }
        if spec.policy.profile.is_none() {
            spec.policy.profile = self.host_profile.clone().or_else(|| self.profile.clone());
        }
        if let (Isolation::Auto, Some(i)) = (spec.isolation, self.isolation) {
            spec.isolation = i;
        }
        spec
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("config.toml");
        std::fs::write(&p, text).unwrap();
        (dir, p)
    }

    /// `[jobs]` reads the host's tool directories, read-only paths and
    /// variables; a path not absolute, missing or holding a `:`, a name
    /// not a variable's or one Paddock sets for every job, is refused
    /// naming the file, the line and the key.
    #[test]
    fn the_jobs_table_reads_the_hosts_tools_and_refuses_what_it_cannot_carry() {
        let tools = tempfile::tempdir().unwrap();
        let dir = tools.path().display().to_string();
        let (_d, p) = write(&format!(
            "[jobs]\npath = [\"{dir}\"]\nread_only = [\"{dir}\"]\nenv = {{ RUSTUP_HOME = \"{dir}\", GOFLAGS = \"-mod=mod\" }}\n"
        ));
        let jobs = load(&p).unwrap().jobs;
        assert_eq!(
            (
                jobs.path.iter().map(|d| d.0.clone()).collect::<Vec<_>>(),
                jobs.read_only
                    .iter()
                    .map(|d| d.0.clone())
                    .collect::<Vec<_>>(),
                jobs.env_pairs()
            ),
            (
                vec![tools.path().to_path_buf()],
                vec![tools.path().to_path_buf()],
                vec![
                    ("GOFLAGS".to_string(), "-mod=mod".to_string()),
                    ("RUSTUP_HOME".to_string(), dir.clone())
                ]
            )
        );
        // Read, but missing on this host: named where jobs run.
        let (_m, p) = write("[jobs]\npath = [\"/bin\"]\nread_only = [\"/no/such/paddock-dir\"]\n");
        assert_eq!(
            load(&p).unwrap().jobs.missing().as_deref(),
            Some("jobs.read_only: /no/such/paddock-dir")
        );
        let refused = |text: &str| {
            let (_d, p) = write(text);
            load(&p)
                .unwrap_err()
                .to_string()
                .replace(&p.display().to_string(), "FILE")
        };
        assert_eq!(
            [
                refused("[jobs]\npath = [\"bin\"]\n"),

                refused(&format!("[jobs]\npath = [\"{dir}:/bin\"]\n")),
                refused("[jobs]\nenv = { PATH = \"/x\" }\n"),
                refused("[jobs]\nenv = { https_proxy = \"http://x\" }\n"),
                refused("[jobs]\nenv = { LD_PRELOAD = \"/x.so\" }\n"),
                refused("[jobs]\nenv = { \"1X\" = \"y\" }\n"),
            ],
            [
                "config file FILE, line 2: field `jobs.path[0]`: \"bin\" is not an absolute path".to_string(),

                format!("config file FILE, line 2: field `jobs.path[0]`: \"{dir}:/bin\" holds a `:` or a control character, which a PATH cannot carry"),
                "config file FILE, line 2: field `jobs.env.PATH`: PATH is set by Paddock for every job (its home, PATH, proxy or CA bundle); it cannot be set here".to_string(),
                "config file FILE, line 2: field `jobs.env.https_proxy`: https_proxy is set by Paddock for every job (its home, PATH, proxy or CA bundle); it cannot be set here".to_string(),
                "config file FILE, line 2: field `jobs.env.LD_PRELOAD`: LD_PRELOAD is set by Paddock for every job, or changes how every program starts (LD_…); it cannot be set here".to_string(),
                "config file FILE, line 2: field `jobs.env.1X`: \"1X\" is not a variable name (letters, digits and `_`, not starting with a digit)".to_string(),
            ]
        );
    }

    /// A profile named by a relative path is read beside the config file,
    /// as `prices` is; an id and an absolute path stay as written. Before,
    /// `profile = "ci.toml"` was read from the directory `paddock` ran in.
    #[test]
    fn a_relative_profile_file_is_read_beside_the_config_file() {
        let (dir, p) = write("profile = \"ci.toml\"\nhost_profile = \"profiles/host.json\"\n");
        let config = load(&p).unwrap();
        let beside = |name: &str| Some(dir.path().join(name).display().to_string());
        assert_eq!(
            (config.profile, config.host_profile),
            (beside("ci.toml"), beside("profiles/host.json"))
        );
        let (_dir, p) = write("profile = \"constrained-local\"\nhost_profile = \"/etc/ci.toml\"\n");
        let config = load(&p).unwrap();
        assert_eq!(
            (config.profile.as_deref(), config.host_profile.as_deref()),
            (Some("constrained-local"), Some("/etc/ci.toml"))
        );
    }

    /// A `listen` that is no IP address and port is refused naming file,
    /// line and the address to write (it said "invalid socket address
    /// syntax").
    #[test]
    fn a_serve_address_by_host_name_is_refused_with_the_one_to_write() {
        let (_dir, p) = write("[serve]\nlisten = \"localhost:9000\"\n");
        assert_eq!(
            load(&p).unwrap_err().to_string(),
            format!(
                "config file {}, line 2: field `serve.listen`: `localhost:9000`: host names are not looked up: write \
                 127.0.0.1:9000 (or [::1]:9000)",
                p.display()
            )
        );
    }

    /// `max_concurrent_jobs = 0` is refused naming file and line (it was
    /// raised to 1 without a word).
    #[test]
    fn a_serve_concurrency_of_zero_is_refused_with_its_line() {
        let (_dir, p) = write("[serve]\nlisten = \"127.0.0.1:9000\"\nmax_concurrent_jobs = 0\n");
        assert_eq!(
            load(&p).unwrap_err().to_string(),
            format!(
                "config file {}, line 3: field `serve.max_concurrent_jobs`: must be at least 1",
                p.display()
            )
        );
    }

    /// `max_passed_over_secs = 0` is refused naming file, line and key
    /// (it failed every job passed over at its first pass).
    #[test]
    fn a_passed_over_wait_of_zero_is_refused_with_its_line() {
        let (_dir, p) = write("[serve]\nmax_passed_over_secs = 0\n");
        assert_eq!(
            load(&p).unwrap_err().to_string(),
            format!(
                "config file {}, line 2: field `serve.max_passed_over_secs`: must be at least 1: \
                 0 would fail a job at its first pass, before any other server looked at it",
                p.display()
            )
        );
    }

    #[test]
    fn reads_every_key_and_resolves_prices_against_the_file() {
        let (dir, p) = write(
            "max_usd = 2.5\nprices = \"prices.toml\"\nisolation = \"process\"\nprofile = \"constrained-local\"\n\
             [serve]\nlisten = \"0.0.0.0:9000\"\nmax_concurrent_jobs = 3\ndrain_grace_secs = 7\n\
             max_passed_over_secs = 600\nlog_format = \"json\"\n[[serve.lanes]]\ntask_types = [\"bug\"]\n\
             [caches]\nmax_size = \"3GiB\"\n[hosts]\nheartbeat_secs = 5\nheartbeat_ttl_secs = 30\nrequeue_reclaimed = 2\n",
        );
        assert_eq!(
            load(&p).unwrap(),
            Config {
                max_usd: Some(2.5),
                prices: Some(dir.path().join("prices.toml")),
                isolation: Some(Isolation::Process),
                profile: Some("constrained-local".to_owned()),
                host_profile: None,
                serve: ServeFile {
                    listen: Some(std::net::SocketAddr::from(([0, 0, 0, 0], 9000))),
                    max_concurrent_jobs: Some(3),
                    drain_grace_secs: Some(7),
                    max_passed_over_secs: Some(600),
                    webhook_url: None,
                    webhook_secret: None,
                    log_format: Some(LogFormat::Json),
                    lanes: Some(vec![crate::store::Lane {
                        task_types: vec!["bug".into()],
                        projects: vec![],
                    }]),
                    allow_refs: None,
                    allow_paths: None,
                    allow_hosts: None,
                    allow_profiles: None,
                    allow_process: None,
                    allow_ci_changes: None,
                    accept_for_fleet: None,
                },
                caches: CachesFile {
                    max_size: Some(CacheSize::Bytes(3 << 30)),
                },
                hosts: HostsFile {
                    heartbeat_secs: Some(5),
                    heartbeat_ttl_secs: Some(30),
                    requeue_reclaimed: Some(2),
                    cancel_poll_secs: None,
                },
                jobs: JobsFile::default(),
            }
        );
    }

    /// Sizes with and without units, `unlimited`, the default; a bad one
    /// names the file and line.
    #[test]
    fn the_caches_size_cap_reads_units() {
        let cap = |text: &str| {
            let (_dir, p) = write(&format!("[caches]\nmax_size = {text}\n"));
            load(&p).map(|c| c.caches.max_bytes())
        };
        assert_eq!(cap("\"500MiB\"").unwrap(), Some(500 << 20));
        assert_eq!(cap("\"64K\"").unwrap(), Some(64 << 10));
        assert_eq!(cap("4096").unwrap(), Some(4096));
        assert_eq!(cap("\"unlimited\"").unwrap(), None);
        assert_eq!(
            Config::default().caches.max_bytes(),
            Some(DEFAULT_CACHE_MAX_BYTES)
        );
        let e = cap("\"ten gigs\"").unwrap_err().to_string();
        assert!(
            e.ends_with(
                ", line 2: field `caches.max_size`: `ten gigs` is not a size (e.g. \"10GiB\", \"500MiB\", \"unlimited\")"
            ),
            "{e}"
        );
    }

    /// Each part is read on its own: a mistake in `[serve]` or an unknown
    /// table fails only a load that reads the part it is in, the other
    /// parts read as written; `load_sections` names every part's mistake.
    /// Before, a typo in `[serve]` failed every load.
    #[test]
    fn a_mistake_in_one_part_fails_only_the_loads_reading_it() {
        let (_dir, p) = write(
            "max_usd = 1.5\n[serve]\nlisten_adress = \"127.0.0.1:9000\"\n[caches]\nmax_size = \"1KiB\"\n\
             [hosts]\nheartbeat_secs = \"ten\"\n",
        );
        let said = |e: &ConfigError| e.to_string().replace(&p.display().to_string(), "FILE");
        let caches = load_only(&p, &[Section::Top, Section::Caches]).unwrap();
        assert_eq!(
            (caches.max_usd, caches.caches.max_bytes(), caches.serve),
            (Some(1.5), Some(1024), ServeFile::default())
        );
        assert_eq!(
            [
                load_only(&p, &[Section::Caches, Section::Serve]).map_err(|e| said(&e)),
                load_only(&p, &[Section::Hosts]).map_err(|e| said(&e)),
                load(&p).map_err(|e| said(&e)),
            ],
            [
                Err("config file FILE, line 3: field `serve.listen_adress`: unknown field `listen_adress`, expected one of `listen`, `max_concurrent_jobs`, `drain_grace_secs`, `max_passed_over_secs`, `webhook_url`, `webhook_secret`, `log_format`, `lanes`, `allow_refs`, `allow_paths`, `allow_hosts`, `allow_profiles`, `allow_process`, `allow_ci_changes`, `accept_for_fleet`".to_owned()),
                Err("config file FILE, line 7: field `hosts.heartbeat_secs`: invalid type: string \"ten\", expected a whole number, 0 or more".to_owned()),
                Err("config file FILE, line 3: field `serve.listen_adress`: unknown field `listen_adress`, expected one of `listen`, `max_concurrent_jobs`, `drain_grace_secs`, `max_passed_over_secs`, `webhook_url`, `webhook_secret`, `log_format`, `lanes`, `allow_refs`, `allow_paths`, `allow_hosts`, `allow_profiles`, `allow_process`, `allow_ci_changes`, `accept_for_fleet`".to_owned()),
            ]
        );
        let sections = load_sections(&p).unwrap();
        assert_eq!(
            sections
                .errors()
                .into_iter()
                .map(|(s, e)| (s, said(e)))
                .collect::<Vec<_>>(),
            vec![
                (Section::Serve, "config file FILE, line 3: field `serve.listen_adress`: unknown field `listen_adress`, expected one of `listen`, `max_concurrent_jobs`, `drain_grace_secs`, `max_passed_over_secs`, `webhook_url`, `webhook_secret`, `log_format`, `lanes`, `allow_refs`, `allow_paths`, `allow_hosts`, `allow_profiles`, `allow_process`, `allow_ci_changes`, `accept_for_fleet`".to_owned()),
                (Section::Hosts, "config file FILE, line 7: field `hosts.heartbeat_secs`: invalid type: string \"ten\", expected a whole number, 0 or more".to_owned()),
            ]
        );
        // A table or key the file does not know belongs to no part: it
        // fails every part, as a syntax error does (a `[cache]` meant for
        // `[caches]` must not leave `paddock gc` on the default cap).
        let (_dir, p) = write("[cache]\nmax_size = 10\n[serve]\nlisten = \"127.0.0.1:9000\"\n");
        let said = |e: &ConfigError| e.to_string().replace(&p.display().to_string(), "FILE");
        let unknown = "config file FILE, line 1: field `cache`: unknown field `cache`, expected one of `max_usd`, `prices`, `isolation`, `profile`, `host_profile`, `serve`, `caches`, `hosts`, `jobs`".to_owned();
        assert_eq!(
            (
                load_only(&p, &[Section::Caches, Section::Hosts])
                    .map(|c| c.caches.max_bytes())
                    .map_err(|e| said(&e)),
                load_only(&p, &[Section::Serve])
                    .map(|_| ())
                    .map_err(|e| said(&e)),
                load_sections(&p).map(|_| ()).map_err(|e| said(&e)),
            ),
            (Err(unknown.clone()), Err(unknown.clone()), Err(unknown)),
        );
        let (_dir, p) = write("[serve\n");
        assert!(matches!(
            load_sections(&p),
            Err(ConfigError::Parse { line: 1, .. })
        ));
    }

    #[test]
    fn an_unknown_key_names_the_file_and_line() {
        let (_dir, p) = write("max_usd = 1.0\n\nbudget_usd = 3\n");
        let e = load(&p).unwrap_err();
        assert!(
            matches!(&e, ConfigError::Parse { path, line: 3, field, message }
                if path == &p && field == "budget_usd" && message.contains("unknown field `budget_usd`")),
            "{e}"
        );
    }

    /// A value of the wrong type names the key's whole path and the type
    /// in a user's words, as a job spec's error does (before: the line
    /// and `expected usize`).
    #[test]
    fn a_wrong_type_names_the_keys_path_in_a_users_words() {
        let (_dir, p) = write("max_usd = 1.0\n[serve]\n\nmax_concurrent_jobs = \"two\"\n");
        assert_eq!(
            load(&p).unwrap_err().to_string(),
            format!(
                "config file {}, line 4: field `serve.max_concurrent_jobs`: invalid type: \
                 string \"two\", expected a whole number, 0 or more",
                p.display()
            )
        );
    }

    /// A syntax error is one line (toml's message spans two: `invalid
    /// table header` then `expected …`).
    #[test]
    fn a_syntax_error_is_one_line() {
        let (_dir, p) = write("max_usd = 1.0\n[serve\n");
        assert_eq!(
            load(&p).unwrap_err().to_string(),
            format!(
                "config file {}, line 2: invalid table header; expected `.`, `]`",
                p.display()
            )
        );
    }

    #[test]
    fn no_file_is_the_defaults_and_the_location_follows_xdg() {
        assert_eq!(
            load(Path::new("/nonexistent/paddock/config.toml")).unwrap(),
            Config::default()
        );
        assert_eq!(
            location(Some("/x".as_ref()), Some("/h".as_ref())),
            Some(PathBuf::from("/x/paddock/config.toml"))
        );
        assert_eq!(
            location(None, Some("/h".as_ref())),
            Some(PathBuf::from("/h/.config/paddock/config.toml"))
        );
        assert_eq!(location(Some("".as_ref()), None), None);
    }

    /// The heartbeat's timing: defaults, and what would reclaim live jobs
    /// (a TTL not longer than the interval) or spin (0) refused.
    #[test]
    fn heartbeat_timing_is_checked() {
        use std::time::Duration;
        let timing = |every, ttl| {
            HostsFile {
                heartbeat_secs: every,
                heartbeat_ttl_secs: ttl,
                requeue_reclaimed: None,
                cancel_poll_secs: None,
            }
            .timing()
        };
        assert_eq!(
            (
                timing(None, None),
                timing(Some(1), Some(2)),
                timing(Some(0), None),
                timing(Some(30), Some(30)),
            ),
            (
                Ok((Duration::from_secs(10), Duration::from_secs(60))),
                Ok((Duration::from_secs(1), Duration::from_secs(2))),
                Err("[hosts] heartbeat_secs must be at least 1".to_owned()),
                Err(
                    "[hosts] heartbeat_ttl_secs (30) must be longer than heartbeat_secs (30): \
                     another host would reclaim jobs between their renewals"
                        .to_owned()
                ),
            )
        );
    }

    #[test]
    fn spec_values_override_the_config() {
        let spec_text =
            "[ticket]\nid = \"T-1\"\ntitle = \"t\"\nproject = \"p\"\ndescription = \"d\"\n\
            [repository]\npath = \"/r\"\nbase_ref = \"main\"\n\
            [engine]\nkind = \"codex\"\nmodel = \"gpt-5\"\n\
            [upstream]\nprovider = \"scripted\"\nscenario = \"s.toml\"\n";
        let config = Config {
            max_usd: Some(2.0),
            prices: None,
            isolation: Some(Isolation::Process),
            profile: Some("constrained-local".to_owned()),
            host_profile: None,
            serve: ServeFile::default(),
            caches: CachesFile::default(),
            hosts: HostsFile::default(),
            jobs: JobsFile::default(),
        };
        let bare = JobSpec::from_toml(spec_text, Path::new("job.toml")).unwrap();
        let filled = config.apply(bare);
        assert_eq!(
            (
                filled.budget.max_usd,
                filled.isolation,
                filled.policy.profile.as_deref()
            ),
            (Some(2.0), Isolation::Process, Some("constrained-local"))
        );
        let own = format!(
            "isolation = \"sandbox\"\n{spec_text}[budget]\nmax_usd = 0.5\n[policy]\nprofile = \"remote-full\"\n"
        );
        let own = JobSpec::from_toml(&own, Path::new("job.toml")).unwrap();
        let kept = config.apply(own);
        assert_eq!(
            (
                kept.budget.max_usd,
                kept.isolation,
                kept.policy.profile.as_deref()
            ),
            (Some(0.5), Isolation::Sandbox, Some("remote-full"))
        );
    }
}

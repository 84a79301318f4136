//! The HostProfile: a host's rules for the jobs it runs (what may be built
//! here, how to verify, which commands are forbidden, how many jobs at once,
//! CPU, memory and time caps, which models). snake_case keys as in job specs;
//! the former camelCase spellings (`denyCommands`) are still read, each
//! reported as a `DeprecatedKey`. Unknown fields are errors and every error
//! names the source, the field and the reason. The format is documented in
//! `docs/host-profile.md`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::network::NetworkLimits;

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("cannot read host profile {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// `field` empty: the document itself, or a syntax error.
    #[error("host profile {origin}: {}{message}", crate::parse_error::field_prefix(.field))]
    Parse {
        origin: String,
        field: String,
        message: String,
    },
    #[error("host profile {origin}: field `{field}`: {reason}")]
    Invalid {
        origin: String,
        field: String,
        reason: String,
    },
}

/// A host's rules. See `docs/host-profile.md`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostProfile {
    /// Letters, digits, `.`, `_`, `-`.
    pub id: String,
    #[serde(default, alias = "buildPolicy")]
    pub build_policy: BuildPolicy,
    #[serde(default)]
    pub verification: Verification,
    /// Command prefixes that must not run (shell words, e.g. `cargo build --release`).
    #[serde(default, alias = "denyCommands")]
    pub deny_commands: Vec<String>,
    /// Jobs of this profile running at once on this host (held across processes).
    #[serde(
        default,
        alias = "maxConcurrentJobs",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_concurrent_jobs: Option<u32>,
    /// CPU cap: `"50%"` of one CPU, or a number of CPUs such as `"1.5"`.
    #[serde(default, alias = "cpuLimit", skip_serializing_if = "Option::is_none")]
    pub cpu_limit: Option<String>,
    #[serde(default, alias = "memLimitMb", skip_serializing_if = "Option::is_none")]
    pub mem_limit_mb: Option<u64>,
    /// Wall-clock cap of a job in minutes (the spec's own timeout may be shorter).
    #[serde(default, alias = "timeoutMin", skip_serializing_if = "Option::is_none")]
    pub timeout_min: Option<u64>,
    /// Cap of a job's `limits.max_disk_bytes`, in MiB (the spec's own may
    /// be lower).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_disk_mb: Option<u64>,
    /// Cap of a job's `limits.max_records` (the spec's own may be lower).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_records: Option<u64>,
    /// Models jobs may use; empty: any model.
    #[serde(
        default,
        alias = "allowedModels",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub allowed_models: Vec<String>,
    /// The most any job's egress lists may allow, and the denied addresses
    /// opened (docs/egress.md); absent: no maximum beyond the deny list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkLimits>,
    /// `false` turns the setup cache off for this profile's jobs
    /// (docs/egress.md#the-setup-cache); absent: on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_cache: Option<bool>,
    /// The CPU seconds each of Paddock's own gits on a job's content (its
    /// patch, branch and bundle, the push, the prior attempt's branch),
    /// and on its repository's (the checkout that provisions it), may use
    /// before the kernel ends it; absent: 60.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_cpu_secs: Option<u64>,
}

/// The most `git_cpu_secs` may be: a day of one CPU.
pub const MAX_GIT_CPU_SECS: u64 = 86_400;

/// The former camelCase keys (still read, deprecated) and their snake_case
/// spelling; the serde aliases above are these.
pub const CAMEL_CASE_KEYS: &[(&str, &str)] = &[
    ("buildPolicy", "build_policy"),
    ("denyCommands", "deny_commands"),
    ("maxConcurrentJobs", "max_concurrent_jobs"),
    ("cpuLimit", "cpu_limit"),
    ("memLimitMb", "mem_limit_mb"),
    ("timeoutMin", "timeout_min"),
    ("allowedModels", "allowed_models"),
];

/// The snake_case name of a profile key or rule given in either spelling
/// (`denyCommands` and `deny_commands` are both `deny_commands`); `None`
/// for a name that is neither.
pub fn profile_key(name: &str) -> Option<&'static str> {
    CAMEL_CASE_KEYS
        .iter()
        .find(|(camel, snake)| *camel == name || *snake == name)
        .map(|(_, snake)| *snake)
}

/// A key written in its deprecated camelCase spelling.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("host profile {origin}: key `{key}` is deprecated, spell it `{new_key}`")]
pub struct DeprecatedKey {
    pub origin: String,
    pub key: String,
    pub new_key: String,
}

/// A profile as read, with the deprecated spellings it used.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub profile: HostProfile,
    pub deprecated: Vec<DeprecatedKey>,
}

/// The deprecated keys a profile uses, in the order of `CAMEL_CASE_KEYS`;
/// `has` says whether its top level has a key.
/// A key given in both spellings is an error naming the deprecated one.
fn deprecated_keys(
    has: impl Fn(&str) -> bool,
    origin: &str,
) -> Result<Vec<DeprecatedKey>, ProfileError> {
    if let Some((camel, snake)) = CAMEL_CASE_KEYS
        .iter()
        .find(|(camel, snake)| has(camel) && has(snake))
    {
        return Err(ProfileError::Invalid {
            origin: origin.to_string(),
            field: (*camel).to_string(),
            reason: format!("also given as `{snake}`: give it once, as `{snake}`"),
        });
    }
    Ok(CAMEL_CASE_KEYS
        .iter()
        .filter(|(camel, _)| has(camel))
        .map(|(camel, snake)| DeprecatedKey {
            origin: origin.to_string(),
            key: (*camel).to_string(),
            new_key: (*snake).to_string(),
        })
        .collect())
}

/// A parse error's `message` with the deprecated camelCase spellings left
/// out of the keys it lists (serde's "unknown field `x`, expected one of
/// …" names every alias): a profile is written with the snake_case keys.
fn without_deprecated(message: &str) -> String {
    CAMEL_CASE_KEYS
        .iter()
        .fold(message.to_owned(), |m, (camel, _)| {
            m.replace(&format!("`{camel}`, "), "")
                .replace(&format!(", `{camel}`"), "")
        })
}

/// What the agent may build on this host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BuildPolicy {
    /// Full builds run in CI only; the job verifies with targeted checks and pushes.
    CiOnly,
    /// Builds of any size may run here.
    #[default]
    Local,
}

/// How the agent is told to verify its change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verification {
    /// The cheapest probe that shows the change works (one targeted test, a type check).
    DevProbe,
    /// The tests that cover the change.
    TargetedTests,
    /// The whole test suite.
    #[default]
    FullSuite,
}

impl BuildPolicy {
    pub fn as_str(&self) -> &'static str {
        match self {
            BuildPolicy::CiOnly => "ci-only",
            BuildPolicy::Local => "local",
        }
    }
}

impl Verification {
    pub fn as_str(&self) -> &'static str {
        match self {
            Verification::DevProbe => "dev-probe",
            Verification::TargetedTests => "targeted-tests",
            Verification::FullSuite => "full-suite",
        }
    }
}

/// A CPU cap in hundredths of one CPU (`"50%"` is 50, `"1.5"` is 150).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuLimit {
    pub centi_cpus: u32,
}

impl CpuLimit {
    pub fn parse(s: &str) -> Result<CpuLimit, String> {
        let t = s.trim();
        let centi = if let Some(pct) = t.strip_suffix('%') {
            pct.trim()
                .parse::<u32>()
                .map_err(|_| format!("`{s}`: a percentage of one CPU must be a whole number"))?
        } else {
            let cpus: f64 = t
                .parse()
                .map_err(|_| format!("`{s}`: give `N%` of one CPU or a number of CPUs"))?;
            if !cpus.is_finite() || cpus <= 0.0 || cpus > 10_000.0 {
                return Err(format!("`{s}`: the number of CPUs is out of range"));
            }
            (cpus * 100.0).round() as u32
        };
        if centi == 0 {
            return Err(format!("`{s}`: must be more than zero"));
        }
        Ok(CpuLimit { centi_cpus: centi })
    }
}

impl HostProfile {
    /// Reads a profile file (`.json` or `.toml`), with the deprecated keys
    /// it uses.
    pub fn load(path: &Path) -> Result<Loaded, ProfileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let origin = path.display().to_string();
        match path.extension().and_then(|e| e.to_str()) {
            Some("toml") => HostProfile::parse_toml(&text, &origin),
            _ => HostProfile::parse_json(&text, &origin),
        }
    }

    /// Parses JSON; `origin` names the source in errors. Deprecated keys
    /// are read without a word (the store's rows of earlier versions).
    pub fn from_json(text: &str, origin: &str) -> Result<HostProfile, ProfileError> {
        HostProfile::parse_json(text, origin).map(|l| l.profile)
    }

    /// Parses JSON, with the deprecated keys it uses.
    pub fn parse_json(text: &str, origin: &str) -> Result<Loaded, ProfileError> {
        let keys: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(text).unwrap_or_default();
        let deprecated = deprecated_keys(|k| keys.contains_key(k), origin)?;
        Ok(Loaded {
            profile: HostProfile::json_only(text, origin)?,
            deprecated,
        })
    }

    /// Parses TOML, with the deprecated keys it uses.
    pub fn parse_toml(text: &str, origin: &str) -> Result<Loaded, ProfileError> {
        let keys: toml::Table = toml::from_str(text).unwrap_or_default();
        let deprecated = deprecated_keys(|k| keys.contains_key(k), origin)?;
        Ok(Loaded {
            profile: HostProfile::toml_only(text, origin)?,
            deprecated,
        })
    }

    /// Parses a profile the store kept (`paddock profile save`'s JSON),
    /// read again after it was saved. It is validated as a new profile
    /// is, but a rule that only refuses a slip in new input, and was
    /// added after the profile may have been saved, is applied by mending
    /// instead: the same destination twice in one list
    /// (`network::check_list`) is read as once. Every rule the host relies
    /// on still refuses it.
    pub fn from_stored_json(text: &str, origin: &str) -> Result<HostProfile, ProfileError> {
        let keys: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(text).unwrap_or_default();
        deprecated_keys(|k| keys.contains_key(k), origin)?;
        let mut profile = HostProfile::json_unchecked(text, origin)?;
        if let Some(network) = &mut profile.network {
            network.drop_repeats();
        }
        profile.validate(origin)?;
        Ok(profile)
    }

    fn json_only(text: &str, origin: &str) -> Result<HostProfile, ProfileError> {
        let profile = HostProfile::json_unchecked(text, origin)?;
        profile.validate(origin)?;
        Ok(profile)
    }

    fn json_unchecked(text: &str, origin: &str) -> Result<HostProfile, ProfileError> {
        let mut de = serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let (field, message) = crate::parse_error::json(e);
            ProfileError::Parse {
                origin: origin.to_string(),
                field,
                message: without_deprecated(&message),
            }
        })
    }

    /// Parses TOML (the same keys); `origin` names the source in errors.
    /// Deprecated keys are read without a word.
    pub fn from_toml(text: &str, origin: &str) -> Result<HostProfile, ProfileError> {
        HostProfile::parse_toml(text, origin).map(|l| l.profile)
    }

    fn toml_only(text: &str, origin: &str) -> Result<HostProfile, ProfileError> {
        let de = toml::Deserializer::new(text);
        let profile: HostProfile = serde_path_to_error::deserialize(de).map_err(|e| {
            let (field, message) = crate::parse_error::toml(e, text);
            ProfileError::Parse {
                origin: origin.to_string(),
                field,
                message: without_deprecated(&message),
            }
        })?;
        profile.validate(origin)?;
        Ok(profile)
    }

    /// The CPU cap, already validated.
    pub fn cpu(&self) -> Option<CpuLimit> {
        self.cpu_limit
            .as_deref()
            .and_then(|s| CpuLimit::parse(s).ok())
    }

    fn validate(&self, origin: &str) -> Result<(), ProfileError> {
        let invalid = |field: &str, reason: String| ProfileError::Invalid {
            origin: origin.to_string(),
            field: field.to_string(),
            reason,
        };
        let id = &self.id;
        if id.is_empty()
            || id.len() > 64
            || id.starts_with(['.', '-'])
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        {
            return Err(invalid(
                "id",
                format!("`{id}` must be 1 to 64 letters, digits, `.`, `_` and `-`"),
            ));
        }
        for (i, c) in self.deny_commands.iter().enumerate() {
            if c.trim().is_empty() {
                return Err(invalid(
                    &format!("deny_commands[{i}]"),
                    "must not be empty".into(),
                ));
            }
        }
        if self.max_concurrent_jobs == Some(0) {
            return Err(invalid("max_concurrent_jobs", "must be at least 1".into()));
        }
        if let Some(cpu) = &self.cpu_limit {
            CpuLimit::parse(cpu).map_err(|r| invalid("cpu_limit", r))?;
        }
        if self.mem_limit_mb == Some(0) {
            return Err(invalid("mem_limit_mb", "must be at least 1".into()));
        }
        if self.max_disk_mb == Some(0) {
            return Err(invalid("max_disk_mb", "must be at least 1".into()));
        }
        if self
            .max_records
            .is_some_and(|n| n < crate::spec::MIN_MAX_RECORDS)
        {
            return Err(invalid(
                "max_records",
                format!("must be at least {}", crate::spec::MIN_MAX_RECORDS),
            ));
        }
        if self.timeout_min == Some(0) {
            return Err(invalid("timeout_min", "must be at least 1".into()));
        }
        if let Some(secs) = self.git_cpu_secs {
            if !(1..=MAX_GIT_CPU_SECS).contains(&secs) {
                return Err(invalid(
                    "git_cpu_secs",
                    format!("must be 1 to {MAX_GIT_CPU_SECS} seconds"),
                ));
            }
        }
        for (i, m) in self.allowed_models.iter().enumerate() {
            if m.trim().is_empty() {
                return Err(invalid(
                    &format!("allowed_models[{i}]"),
                    "must not be empty".into(),
                ));
            }
        }
        if let Some(Err((field, reason))) = self.network.as_ref().map(NetworkLimits::check) {
            return Err(invalid(&field, reason));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn constrained() -> HostProfile {
        HostProfile {
            id: "constrained-local".into(),
            build_policy: BuildPolicy::CiOnly,
            verification: Verification::DevProbe,
            deny_commands: vec!["cargo build --release".into(), "npm run build".into()],
            max_concurrent_jobs: Some(1),
            cpu_limit: Some("50%".into()),
            mem_limit_mb: Some(4096),
            timeout_min: Some(30),
            max_disk_mb: None,
            max_records: None,
            allowed_models: vec!["gpt-5.5".into()],
            network: None,
            setup_cache: None,
            git_cpu_secs: None,
        }
    }

    #[test]
    fn design_example_parses() {
        let p = HostProfile::parse_json(
            r#"{ "id": "constrained-local", "build_policy": "ci-only", "verification": "dev-probe",
  "deny_commands": ["cargo build --release", "npm run build"],
  "max_concurrent_jobs": 1, "cpu_limit": "50%", "mem_limit_mb": 4096, "timeout_min": 30,
  "allowed_models": ["gpt-5.5"] }"#,
            "test",
        )
        .unwrap();
        assert_eq!(
            p,
            Loaded {
                profile: constrained(),
                deprecated: vec![]
            }
        );
        assert_eq!(p.profile.cpu(), Some(CpuLimit { centi_cpus: 50 }));
        // Written back in snake_case.
        assert_eq!(
            serde_json::to_value(&p.profile).unwrap(),
            serde_json::json!({ "id": "constrained-local", "build_policy": "ci-only",
                "verification": "dev-probe",
                "deny_commands": ["cargo build --release", "npm run build"],
                "max_concurrent_jobs": 1, "cpu_limit": "50%", "mem_limit_mb": 4096,
                "timeout_min": 30, "allowed_models": ["gpt-5.5"] })
        );
    }

    /// The former camelCase keys are read, each named as deprecated with
    /// its new spelling, in JSON and TOML alike.
    #[test]
    fn camel_case_keys_are_read_and_named_deprecated() {
        let json = HostProfile::parse_json(
            r#"{ "id": "constrained-local", "buildPolicy": "ci-only", "verification": "dev-probe",
  "denyCommands": ["cargo build --release", "npm run build"],
  "maxConcurrentJobs": 1, "cpuLimit": "50%", "memLimitMb": 4096, "timeoutMin": 30,
  "allowedModels": ["gpt-5.5"] }"#,
            "p.json",
        )
        .unwrap();
        let deprecated = |origin: &str| -> Vec<DeprecatedKey> {
            CAMEL_CASE_KEYS
                .iter()
                .map(|(camel, snake)| DeprecatedKey {
                    origin: origin.into(),
                    key: (*camel).into(),
                    new_key: (*snake).into(),
                })
                .collect()
        };
        assert_eq!(
            json,
            Loaded {
                profile: constrained(),
                deprecated: deprecated("p.json")
            }
        );
        let toml = HostProfile::parse_toml(
            "id = \"constrained-local\"\nbuildPolicy = \"ci-only\"\nverification = \"dev-probe\"\n\
             denyCommands = [\"cargo build --release\", \"npm run build\"]\nmaxConcurrentJobs = 1\n\
             cpuLimit = \"50%\"\nmemLimitMb = 4096\ntimeoutMin = 30\nallowedModels = [\"gpt-5.5\"]\n",
            "p.toml",
        )
        .unwrap();
        assert_eq!(
            toml,
            Loaded {
                profile: constrained(),
                deprecated: deprecated("p.toml")
            }
        );
        assert_eq!(
            json.deprecated[1].to_string(),
            "host profile p.json: key `denyCommands` is deprecated, spell it `deny_commands`"
        );
        let both = HostProfile::from_json(
            r#"{"id":"x","denyCommands":["a"],"deny_commands":["b"]}"#,
            "p.json",
        )
        .unwrap_err();
        assert_eq!(
            both.to_string(),
            "host profile p.json: field `denyCommands`: also given as `deny_commands`: give it once, as `deny_commands`"
        );
        assert_eq!(
            (
                profile_key("memLimitMb"),
                profile_key("mem_limit_mb"),
                profile_key("memLimit")
            ),
            (Some("mem_limit_mb"), Some("mem_limit_mb"), None)
        );
    }

    /// A TOML profile's parse error says where (line and column) as a
    /// job spec's does, and an unknown key's error lists the keys to
    /// write, not their deprecated camelCase spellings.
    #[test]
    fn parse_errors_say_where_and_list_only_snake_case_keys() {
        let keys = "`id`, `build_policy`, `verification`, `deny_commands`, \
                    `max_concurrent_jobs`, `cpu_limit`, `mem_limit_mb`, `timeout_min`, \
                    `max_disk_mb`, `max_records`, `allowed_models`, `network`, `setup_cache`, \
                    `git_cpu_secs`";
        assert_eq!(
            [
                HostProfile::from_toml("id = \"x\"\nmax_concurrent_jobs = -1\n", "p.toml")
                    .unwrap_err()
                    .to_string(),
                HostProfile::from_toml("id = \"x\"\nbogus = 1\n", "p.toml")
                    .unwrap_err()
                    .to_string(),
                HostProfile::from_json(r#"{"id": "x", "bogus": 1}"#, "p.json")
                    .unwrap_err()
                    .to_string(),
            ],
            [
                "host profile p.toml: field `max_concurrent_jobs`: invalid value: integer \
                 `-1`, expected a whole number, 0 or more (line 2, column 23)"
                    .to_owned(),
                format!(
                    "host profile p.toml: field `bogus`: unknown field `bogus`, expected one \
                     of {keys} (line 2, column 1)"
                ),
                format!(
                    "host profile p.json: field `bogus`: unknown field `bogus`, expected one \
                     of {keys} at line 1 column 19"
                ),
            ]
        );
    }

    #[test]
    fn errors_name_origin_and_field() {
        let e = HostProfile::from_json(r#"{"id":"x","deny_comands":[]}"#, "p.json").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("host profile p.json: field `deny_comands`: unknown field"),
            "{e}"
        );
        let e = HostProfile::from_json(r#"{"id":"x","cpu_limit":"lots"}"#, "p.json").unwrap_err();
        assert_eq!(
            e.to_string(),
            "host profile p.json: field `cpu_limit`: `lots`: give `N%` of one CPU or a number of CPUs"
        );
        let e = HostProfile::from_json(r#"{"id":"../x"}"#, "p.json").unwrap_err();
        assert_eq!(
            e.to_string(),
            "host profile p.json: field `id`: `../x` must be 1 to 64 letters, digits, `.`, `_` and `-`"
        );
        let e =
            HostProfile::from_json(r#"{"id":"x","maxConcurrentJobs":0}"#, "p.json").unwrap_err();
        assert_eq!(
            e.to_string(),
            "host profile p.json: field `max_concurrent_jobs`: must be at least 1"
        );
        let records = |n: u64| {
            HostProfile::from_json(&format!(r#"{{"id":"x","max_records":{n}}}"#), "p.json")
                .map(|p| p.max_records)
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            (records(99), records(100)),
            (
                Err("host profile p.json: field `max_records`: must be at least 100".to_string()),
                Ok(Some(100))
            )
        );
        let git_cpu = |n: &str| {
            HostProfile::from_toml(&format!("id = \"x\"\ngit_cpu_secs = {n}\n"), "p.toml")
                .map(|p| p.git_cpu_secs)
                .map_err(|e| e.to_string())
        };
        let out_of_range = || {
            Err("host profile p.toml: field `git_cpu_secs`: must be 1 to 86400 seconds".to_string())
        };
        assert_eq!(
            [
                git_cpu("0"),
                git_cpu("1"),
                git_cpu("86400"),
                git_cpu("86401")
            ],
            [out_of_range(), Ok(Some(1)), Ok(Some(86400)), out_of_range()]
        );
    }

    #[test]
    fn cpu_limits() {
        assert_eq!(CpuLimit::parse("1.5"), Ok(CpuLimit { centi_cpus: 150 }));
        assert_eq!(CpuLimit::parse("200%"), Ok(CpuLimit { centi_cpus: 200 }));
        assert!(CpuLimit::parse("0%").is_err());
        assert!(CpuLimit::parse("-1").is_err());
    }

    #[test]
    fn network_limits_parse_and_errors_name_the_field() {
        let p = HostProfile::from_toml(
            "id = \"n\"\n[network]\nallow = [\"api.github.com\"]\nopen_addresses = [\"127.0.0.1:8443\"]\n",
            "n.toml",
        )
        .unwrap();
        assert_eq!(
            p.network,
            Some(NetworkLimits {
                allow: vec!["api.github.com".into()],
                setup_allow: vec![],
                open_addresses: vec!["127.0.0.1:8443".into()],
                credentials: vec![],
                web_search: false,
            })
        );
        let e = HostProfile::from_json(r#"{"id":"n","network":{"setup_allow":["*.x"]}}"#, "n.json")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "host profile n.json: field `network.setup_allow[0]`: `*.x`: a wildcard needs a suffix of two labels at least (`*.example.com`)"
        );
        let e = HostProfile::from_toml(
            "id = \"n\"\n[network]\nallow = [\"api.github.com\", \"*.github.io\"]\n",
            "n.toml",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "host profile n.toml: field `network.allow[1]`: `*.github.io`: `github.io` is a \
             public suffix (the Public Suffix List's private section): the names below it belong \
             to unrelated owners, any of whom the wildcard would allow; list the hosts you need, \
             or a wildcard below a domain one owner holds (`*.example.github.io`)"
        );
        let e = HostProfile::from_toml(
            "id = \"n\"\n[network]\nsetup_allow = [\"registries\", \"pypi.org\", \"REGISTRIES\"]\n",
            "n.toml",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "host profile n.toml: field `network.setup_allow[2]`: `network.setup_allow[0]` and \
             `network.setup_allow[2]` are both `registries`; remove one"
        );
    }

    #[test]
    fn network_credentials_parse_and_errors_name_the_entry_and_field() {
        let text = "id = \"c\"\n[network]\nsetup_allow = [\"npm.corp.example\"]\n\
                    [[network.credentials]]\nname = \"registry\"\nhost = \"npm.corp.example:443\"\n\
                    header = \"authorization\"\nvalue = \"Bearer {secret}\"\nsecret = \"env:CORP_NPM_TOKEN\"\n\
                    env = \"NPM_TOKEN\"\nphases = [\"setup\"]\n";
        let p = HostProfile::from_toml(text, "c.toml").unwrap();
        assert_eq!(
            p.network.unwrap().credentials,
            vec![crate::CredentialSpec {
                name: "registry".into(),
                host: "npm.corp.example:443".into(),
                header: "authorization".into(),
                value: "Bearer {secret}".into(),
                secret: crate::KeyRef::Env("CORP_NPM_TOKEN".into()),
                env: "NPM_TOKEN".into(),
                phases: vec![crate::EgressPhase::Setup],
                upstream_ca: None,
                methods: Vec::new(),
                paths: Vec::new(),
            }]
        );
        // Both phases unless given: the agent's list does not hold it.
        let e = HostProfile::from_toml(&text.replace("phases = [\"setup\"]\n", ""), "c.toml")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "host profile c.toml: field `network.credentials[0].host`: `npm.corp.example:443` is used in the agent phase but is not within the profile's `network.allow`"
        );
        let e = HostProfile::from_toml(&text.replace("env:CORP", "CORP"), "c.toml").unwrap_err();
        assert!(
            e.to_string()
                .contains("a key is referenced as `env:NAME` or `file:PATH`"),
            "{e}"
        );
    }

    /// A profile the store kept from before repeats were refused
    /// (009c378) reads again with each repeat once, where a new one with
    /// them is refused; one breaking a rule the host relies on (an
    /// opened address without a port) is still refused.
    #[test]
    fn a_stored_profile_with_repeats_reads_them_once() {
        let body = r#"{"id":"old","network":{"allow":["a.example","A.example:443"],"setup_allow":["registries","pypi.org","Registries"],"open_addresses":["127.0.0.1:80","127.0.0.1:80"]}}"#;
        assert_eq!(
            (
                HostProfile::from_stored_json(body, "host_profiles.old")
                    .map(|p| p.network)
                    .map_err(|e| e.to_string()),
                HostProfile::from_json(body, "p.json").map_err(|e| e.to_string()),
                HostProfile::from_stored_json(
                    r#"{"id":"old","network":{"open_addresses":["127.0.0.1"]}}"#,
                    "host_profiles.old"
                )
                .map_err(|e| e.to_string()),
            ),
            (
                Ok(Some(NetworkLimits {
                    allow: vec!["a.example".into()],
                    setup_allow: vec!["registries".into(), "pypi.org".into()],
                    open_addresses: vec!["127.0.0.1:80".into()],
                    ..NetworkLimits::default()
                })),
                Err(
                    "host profile p.json: field `network.allow[1]`: `network.allow[0]` and \
                     `network.allow[1]` are both `a.example:443`; remove one"
                        .into()
                ),
                Err(
                    "host profile host_profiles.old: field `network.open_addresses[0]`: \
                     `127.0.0.1` must be an address and port (`127.0.0.1:8443`, `[::1]:443`)"
                        .into()
                ),
            )
        );
    }
}

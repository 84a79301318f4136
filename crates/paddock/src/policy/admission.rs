//! Fail closed: before a job starts, every rule of its HostProfile is
//! checked against what the job's isolation rung and engine can enforce. A
//! rule that cannot be enforced refuses the job, naming the rule, unless
//! the spec lists it in `policy.accept_degraded` (then it is kept as advice
//! and reported as a `policy` event). A model outside `allowed_models` is
//! always refused.

use paddock_protocol::network::SetupNetwork;
use paddock_protocol::{EngineKind, HostProfile, JobSpec};

use crate::broker::ModelAllowlist;
use crate::engines::{MAX_HOOKED_LIMIT_SECS, MAX_HOOK_TIMEOUT_SECS};

/// Why a job is refused: the profile by id and, where it was read from
/// one, its file; the rule and why; before them, where the caller knows
/// it, what named the job and its profile (`job spec FILE` for `paddock
/// run` and `paddock context`, which read it; a server given the spec as
/// JSON names the spec's `policy.profile`, or its own default).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{}host profile `{profile}`{}: rule `{rule}` {reason}",
    named.as_deref().map_or(String::new(), |n| format!("{n}: ")),
    profile_file.as_deref().map_or(String::new(), |f| format!(" (file {f})"))
)]
pub struct Refusal {
    pub profile: String,
    /// The file the profile was read from (`policy.profile` or the
    /// config's `host_profile` naming one); `None` for one from the store
    /// or a shipped preset. Boxed: the refusal is an error every
    /// admission returns, kept small.
    pub profile_file: Option<Box<str>>,
    pub rule: String,
    pub reason: String,
    /// What named the job and its profile, set by the caller that knows:
    /// the job spec's file (`AdmitError::in_spec_file`: `job spec FILE`),
    /// what named the profile (`AdmitError::profile_named_by`: a server's
    /// submitter reads the detail without the server's defaults before
    /// them), or both, in that order.
    pub named: Option<String>,
    /// Refused for a rule the rung cannot enforce that `isolation =
    /// "auto"` fell back to on this host, its sandbox not starting
    /// (`runner::admit::refused`): a host whose sandbox starts enforces
    /// it, and a server passes such a queued job over to it
    /// (`NotHere::Policy`).
    pub on_fallback: bool,
}

/// The profile as this job will run under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// The engine's wall-clock limit: the spec's, capped by `timeout_min`.
    /// (The runner holds `timeout_min` for setup and engine together too:
    /// the engine gets what the setup left of it, `runner/clock.rs`.)
    pub timeout_secs: u64,
    /// The setup's limit: the spec's `setup.timeout_secs`, capped by
    /// `timeout_min` too.
    pub setup_timeout_secs: u64,
    /// The most disk the job may grow its directory by: the spec's
    /// `limits.max_disk_bytes`, capped by `max_disk_mb`.
    pub max_disk_bytes: u64,
    /// The most records the job may leave in the store: the spec's
    /// `limits.max_records`, capped by `max_records`.
    pub max_records: u64,
    /// Rules accepted as advisory only: (rule, why it is not enforced).
    pub degraded: Vec<(String, String)>,
}

/// Whether the engine has a layer-2 mechanism for `deny_commands`: its
/// adapter says whether it runs hooks Paddock can deny a call with.
fn engine_denies(engine: EngineKind) -> bool {
    crate::engines::adapter(engine).capabilities().hooks
}

/// Checks `profile` against the job on a rung that cannot enforce
/// `rung_gaps` (rule, why: the rung's `gaps`); the timeout and the accepted
/// gaps, or the first rule that refuses the job.
pub fn admit(
    profile: &HostProfile,
    spec: &JobSpec,
    rung_gaps: Vec<(&'static str, String)>,
) -> Result<Admission, Refusal> {
    let refuse = |rule: &str, reason: String| Refusal {
        profile: profile.id.clone(),
        profile_file: None,
        rule: rule.to_string(),
        reason,
        named: None,
        on_fallback: false,
    };
    // The broker's matcher: a name (also with a date suffix) or a `prefix*`.
    let models = ModelAllowlist::any().with("host profile", &profile.allowed_models);
    if !models.allows(&spec.engine.model) {
        return Err(refuse(
            "allowed_models",
            format!(
                "does not allow model `{}` (allowed: {})",
                spec.engine.model,
                profile.allowed_models.join(", ")
            ),
        ));
    }
    if let Some(limits) = &profile.network {
        let setup = spec.setup.network.entries();
        // `setup.network = "registries"` is one name, not a list: its
        // field has no index.
        let setup_field: fn(usize) -> String = match &spec.setup.network {
            SetupNetwork::Preset(_) => |_: usize| "setup.network".to_string(),
            SetupNetwork::List(_) => |i: usize| format!("setup.network[{i}]"),
        };
        let allow_field = |i: usize| format!("network.allow[{i}]");
        if let Some(reason) = network_outside(&spec.network.allow, &limits.allow, &allow_field) {
            return Err(refuse("network.allow", reason));
        }
        if let Some(reason) = network_outside(&setup, &limits.setup_allow, &setup_field) {
            return Err(refuse("network.setup_allow", reason));
        }
        if spec.network.web_search && !limits.web_search {
            return Err(refuse(
                "network.web_search",
                "does not permit the model provider's web search (`network.web_search`), which \
                 reaches the web past the job's egress proxy; the spec's `[network] web_search` \
                 asks for it"
                    .to_string(),
            ));
        }
    }
    let mut gaps = rung_gaps;
    if !profile.deny_commands.is_empty() && !engine_denies(spec.engine.kind) {
        gaps.push((
            "deny_commands",
            format!(
                "cannot be enforced with engine `{}`: it has no hook or rule mechanism",
                spec.engine.kind
            ),
        ));
    }
    let timeout_secs = match profile.timeout_min {
        Some(min) => spec.limits.timeout_secs.min(min.saturating_mul(60)),
        None => spec.limits.timeout_secs,
    };
    // The engines wait for the hook only so long, then run the command
    // (`engines::hook_timeout_secs`): an engine that may run longer than
    // that has denials the hook may not make in time.
    if !profile.deny_commands.is_empty() && timeout_secs > MAX_HOOKED_LIMIT_SECS {
        return Err(refuse(
            "deny_commands",
            format!(
                "cannot be enforced for an engine limit of {timeout_secs} s \
                 (`limits.timeout_secs`): the engines wait at most {MAX_HOOK_TIMEOUT_SECS} s for \
                 the hook, then run the command; lower `limits.timeout_secs` to at most \
                 {MAX_HOOKED_LIMIT_SECS}"
            ),
        ));
    }
    let mut degraded = Vec::new();
    for (rule, reason) in gaps {
        if spec.policy.accepts(rule) {
            degraded.push((rule.to_string(), reason));
        } else {
            return Err(refuse(
                rule,
                format!("{reason}; run the job on a rung that enforces it, or list `{rule}` in `policy.accept_degraded`"),
            ));
        }
    }
    let setup_timeout_secs = match profile.timeout_min {
        Some(min) => spec.setup.timeout_secs.min(min.saturating_mul(60)),
        None => spec.setup.timeout_secs,
    };
    let max_disk_bytes = match profile.max_disk_mb {
        Some(mb) => spec.limits.max_disk_bytes.min(mb.saturating_mul(1 << 20)),
        None => spec.limits.max_disk_bytes,
    };
    let max_records = match profile.max_records {
        Some(n) => spec.limits.max_records.min(n),
        None => spec.limits.max_records,
    };
    Ok(Admission {
        timeout_secs,
        setup_timeout_secs,
        max_disk_bytes,
        max_records,
        degraded,
    })
}

/// Why the job's destination list (its entry `i` the spec's field
/// `field(i)`) is wider than the profile's maximum `max`; `None` when it
/// stays within.
fn network_outside(
    asked: &[String],
    max: &[String],
    field: &dyn Fn(usize) -> String,
) -> Option<String> {
    let Ok(widest) = paddock_protocol::network::parse_list(max) else {
        // Validated when the profile was read.
        return Some("cannot be read".into());
    };
    let allowed = if max.is_empty() {
        "nothing".to_string()
    } else {
        max.join(", ")
    };
    match paddock_protocol::network::first_outside(asked, &widest) {
        Ok(None) => None,
        Ok(Some((i, entry))) => Some(format!(
            "does not allow `{entry}` (job spec field `{}`); this host allows at most: {allowed}",
            field(i)
        )),
        Err((i, why)) => Some(format!("job spec field `{}`: {why}", field(i))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::path::Path;

    use super::*;

    fn spec(extra: &str) -> JobSpec {
        JobSpec::from_toml(
            &format!(
                "[ticket]\nid = \"T-1\"\ntitle = \"t\"\n[repository]\npath = \"/r\"\n\
                 [engine]\nkind = \"codex\"\nmodel = \"gpt-5.5\"\n\
                 [upstream]\nprovider = \"scripted\"\nscenario = \"s.toml\"\n\
                 [limits]\ntimeout_secs = 7200\n{extra}"
            ),
            Path::new("job.toml"),
        )
        .unwrap()
    }

    /// The gaps of the `process` rung.
    fn process_gaps(profile: &HostProfile) -> Vec<(&'static str, String)> {
        crate::rung::process_gaps(profile)
    }

    fn constrained() -> HostProfile {
        crate::policy::profile::preset("constrained-local")
            .unwrap()
            .unwrap()
    }

    #[test]
    fn process_rung_refuses_memory_and_cpu_caps() {
        assert_eq!(
            admit(&constrained(), &spec(""), process_gaps(&constrained())),
            Err(Refusal {
                profile: "constrained-local".into(),
                profile_file: None,
                rule: "cpu_limit".into(),
                reason: "(50%) cannot be enforced on the `process` rung: a plain child process has no CPU cap; run the job on a rung that enforces it, or list `cpu_limit` in `policy.accept_degraded`".into(),
                named: None,
                on_fallback: false,
            })
        );
        let e = admit(
            &constrained(),
            &spec("[policy]\naccept_degraded = [\"cpu_limit\"]\n"),
            process_gaps(&constrained()),
        )
        .unwrap_err();
        assert_eq!(e.rule, "mem_limit_mb");
    }

    /// A profile's `[network]` maximum on the `process` rung, where the
    /// job's processes can connect past its egress proxy, is a gap like
    /// the CPU cap: the job is refused naming rule `network`, unless its
    /// spec accepts it as degraded. On a rung without the gap (the
    /// sandbox), nothing is said.
    #[test]
    fn process_rung_refuses_a_network_maximum_unless_accepted() {
        let profile = HostProfile::from_toml(
            "id = \"net\"\n[network]\nallow = [\"api.github.com\"]\n",
            "net.toml",
        )
        .unwrap();
        let why = "(its [network] maximum and the deny list) cannot be enforced on the \
                   `process` rung: the job's processes can connect directly, past its egress \
                   proxy; the `sandbox` rung enforces it (docs/egress.md)";
        let accepting = spec("[policy]\naccept_degraded = [\"network\"]\n");
        assert_eq!(
            (
                admit(&profile, &spec(""), process_gaps(&profile)),
                admit(&profile, &accepting, process_gaps(&profile)).map(|a| a.degraded),
                admit(&profile, &spec(""), Vec::new()).map(|a| a.degraded),
            ),
            (
                Err(Refusal {
                    profile: "net".into(),
                    profile_file: None,
                    rule: "network".into(),
                    reason: format!(
                        "{why}; run the job on a rung that enforces it, or list `network` in \
                         `policy.accept_degraded`"
                    ),
                    named: None,
                    on_fallback: false,
                }),
                Ok(vec![("network".to_string(), why.to_string())]),
                Ok(vec![]),
            )
        );
    }

    /// A job under `deny_commands` whose engine may run longer than the
    /// engines wait for the hook is refused: the hook's timeout would end
    /// before the job's clock, and a hook stopped there lets the command
    /// run. At that longest limit it is admitted; without denied commands
    /// any limit is.
    #[test]
    fn deny_commands_refuse_a_limit_past_the_hooks_timeout() {
        let deny =
            HostProfile::from_json(r#"{"id":"d","deny_commands":["make all"]}"#, "t").unwrap();
        let open = HostProfile::from_json(r#"{"id":"o"}"#, "t").unwrap();
        let mut long = spec("");
        long.limits.timeout_secs = MAX_HOOKED_LIMIT_SECS + 1;
        let mut longest = spec("");
        longest.limits.timeout_secs = MAX_HOOKED_LIMIT_SECS;
        assert_eq!(
            (
                admit(&deny, &long, Vec::new()),
                admit(&deny, &longest, Vec::new()).map(|a| a.timeout_secs),
                admit(&open, &long, Vec::new()).map(|a| a.timeout_secs),
            ),
            (
                Err(Refusal {
                    profile: "d".into(),
                    profile_file: None,
                    rule: "deny_commands".into(),
                    reason: "cannot be enforced for an engine limit of 2147424 s \
                             (`limits.timeout_secs`): the engines wait at most 2147483 s for \
                             the hook, then run the command; lower `limits.timeout_secs` to \
                             at most 2147423"
                        .into(),
                    named: None,
                    on_fallback: false,
                }),
                Ok(MAX_HOOKED_LIMIT_SECS),
                Ok(MAX_HOOKED_LIMIT_SECS + 1),
            )
        );
    }

    #[test]
    fn accepted_gaps_and_timeout() {
        let a = admit(
            &constrained(),
            &spec("[policy]\naccept_degraded = [\"cpu_limit\", \"mem_limit_mb\"]\n"),
            process_gaps(&constrained()),
        )
        .unwrap();
        assert_eq!(a.timeout_secs, 30 * 60);
        assert_eq!(
            a.degraded
                .iter()
                .map(|(r, _)| r.as_str())
                .collect::<Vec<_>>(),
            vec!["cpu_limit", "mem_limit_mb"]
        );
        let full = crate::policy::profile::preset("remote-full")
            .unwrap()
            .unwrap();
        assert_eq!(
            admit(&full, &spec(""), Vec::new()),
            Ok(Admission {
                timeout_secs: 7200,
                setup_timeout_secs: 600,
                max_disk_bytes: paddock_protocol::spec::DEFAULT_MAX_DISK_BYTES,
                max_records: paddock_protocol::spec::DEFAULT_MAX_RECORDS,
                degraded: vec![]
            })
        );
    }

    /// A profile's `timeout_min` caps the setup's timeout as it caps the
    /// job's: a spec's `setup.timeout_secs = 7200` under a 30 min profile
    /// gets 30 min, not two hours before the engine's 30 min; a spec
    /// asking less keeps its own.
    #[test]
    fn the_profile_caps_the_setup_timeout() {
        let accept = "[policy]\naccept_degraded = [\"cpu_limit\", \"mem_limit_mb\"]\n";
        let long = format!("[setup]\ncommands = [\"npm ci\"]\ntimeout_secs = 7200\n{accept}");
        let short = format!("[setup]\ncommands = [\"npm ci\"]\ntimeout_secs = 60\n{accept}");
        let got = [&long, &short].map(|extra| {
            let a = admit(&constrained(), &spec(extra), process_gaps(&constrained())).unwrap();
            (a.timeout_secs, a.setup_timeout_secs)
        });
        assert_eq!(got, [(30 * 60, 30 * 60), (30 * 60, 60)]);
    }

    /// A profile's `max_disk_mb` caps the job's disk limit; a spec asking
    /// less keeps its own.
    #[test]
    fn the_profile_caps_the_disk_limit() {
        let mut p = crate::policy::profile::preset("remote-full")
            .unwrap()
            .unwrap();
        p.max_disk_mb = Some(2);
        let limit = |extra: &str| admit(&p, &spec(extra), Vec::new()).map(|a| a.max_disk_bytes);
        assert_eq!(
            (
                limit(""),
                limit("max_disk_bytes = 1048576"),
                limit("max_disk_bytes = 1099511627776")
            ),
            (Ok(2 << 20), Ok(1 << 20), Ok(2 << 20))
        );
    }

    /// A profile's `max_records` caps the job's record limit; a spec
    /// asking less keeps its own.
    #[test]
    fn the_profile_caps_the_record_limit() {
        let mut p = crate::policy::profile::preset("remote-full")
            .unwrap()
            .unwrap();
        p.max_records = Some(500);
        let limit = |extra: &str| admit(&p, &spec(extra), Vec::new()).map(|a| a.max_records);
        assert_eq!(
            (
                limit(""),
                limit("max_records = 200"),
                limit("max_records = 10000000")
            ),
            (Ok(500), Ok(200), Ok(500))
        );
    }

    #[test]
    fn models_outside_the_allowlist_are_refused() {
        let mut p = crate::policy::profile::preset("remote-full")
            .unwrap()
            .unwrap();
        p.allowed_models = vec!["gpt-5.4".into()];
        assert_eq!(
            admit(&p, &spec(""), Vec::new()).unwrap_err().to_string(),
            "host profile `remote-full`: rule `allowed_models` does not allow model `gpt-5.5` (allowed: gpt-5.4)"
        );
        // The same patterns as the broker's allowlist: a prefix ending in
        // `*`, a name with the provider's date suffix.
        p.allowed_models = vec!["gpt-5*".into()];
        assert!(admit(&p, &spec(""), Vec::new()).is_ok());
        p.allowed_models = vec!["gpt-4*".into(), "o3".into()];
        assert_eq!(
            admit(&p, &spec(""), Vec::new()).unwrap_err().to_string(),
            "host profile `remote-full`: rule `allowed_models` does not allow model `gpt-5.5` (allowed: gpt-4*, o3)"
        );
    }

    /// A job asks for destinations within the profile's `[network]`
    /// maximum, or is refused naming the entry, the field and the maximum.
    #[test]
    fn network_lists_stay_within_the_profile() {
        let profile = HostProfile::from_toml(
            "id = \"net\"\n[network]\nallow = [\"*.github.com\"]\nsetup_allow = [\"registries\"]\n",
            "net.toml",
        )
        .unwrap();
        let within = spec(
            "[network]\nallow = [\"api.github.com\"]\n\
             [setup]\ncommands = [\"npm ci\"]\nnetwork = [\"registry.npmjs.org\"]\n",
        );
        assert_eq!(
            admit(&profile, &within, Vec::new()).map(|a| a.degraded),
            Ok(vec![])
        );
        let wider = spec("[network]\nallow = [\"api.github.com\", \"*.com.evil.org\"]\n");
        assert_eq!(
            admit(&profile, &wider, Vec::new()),
            Err(Refusal {
                profile: "net".into(),
                profile_file: None,
                rule: "network.allow".into(),
                reason: "does not allow `*.com.evil.org` (job spec field `network.allow[1]`); this host allows at most: *.github.com".into(),
                named: None,
                on_fallback: false,
            })
        );
        let setup = spec("[setup]\ncommands = [\"pip download x\"]\nnetwork = \"registries\"\n");
        assert_eq!(
            admit(&profile, &setup, Vec::new()).map(|a| a.degraded),
            Ok(vec![])
        );
        let nothing = HostProfile::from_toml("id = \"net\"\n[network]\n", "net.toml").unwrap();
        assert_eq!(
            admit(&nothing, &setup, Vec::new()),
            Err(Refusal {
                profile: "net".into(),
                profile_file: None,
                rule: "network.setup_allow".into(),
                reason: "does not allow `registries` (job spec field `setup.network`); this host allows at most: nothing".into(),
                named: None,
                on_fallback: false,
            })
        );
        let listed = spec(
            "[setup]\ncommands = [\"pip download x\"]\nnetwork = [\"pypi.org\", \"registries\"]\n",
        );
        assert_eq!(
            admit(&nothing, &listed, Vec::new()),
            Err(Refusal {
                profile: "net".into(),
                profile_file: None,
                rule: "network.setup_allow".into(),
                reason: "does not allow `pypi.org` (job spec field `setup.network[0]`); this host allows at most: nothing".into(),
                named: None,
                on_fallback: false,
            })
        );
        // Without a `[network]` section the profile sets no maximum.
        assert_eq!(
            admit(
                &HostProfile::from_toml("id = \"x\"\n", "x.toml").unwrap(),
                &wider,
                Vec::new()
            )
            .map(|a| a.degraded),
            Ok(vec![])
        );
    }

    /// A job turns the provider's web search on only where the profile's
    /// `[network]` permits it (`web_search = true`); without a `[network]`
    /// section the profile sets no maximum.
    #[test]
    fn web_search_stays_within_the_profile() {
        let searching = spec("[network]\nweb_search = true\n");
        let closed = HostProfile::from_toml("id = \"net\"\n[network]\n", "net.toml").unwrap();
        let open =
            HostProfile::from_toml("id = \"net\"\n[network]\nweb_search = true\n", "net.toml")
                .unwrap();
        let unlimited = HostProfile::from_toml("id = \"x\"\n", "x.toml").unwrap();
        assert_eq!(
            (
                admit(&closed, &searching, Vec::new()).map(|a| a.degraded),
                admit(&open, &searching, Vec::new()).map(|a| a.degraded),
                admit(&unlimited, &searching, Vec::new()).map(|a| a.degraded),
                admit(&closed, &spec(""), Vec::new()).map(|a| a.degraded),
            ),
            (
                Err(Refusal {
                    profile: "net".into(),
                    profile_file: None,
                    rule: "network.web_search".into(),
                    reason: "does not permit the model provider's web search \
                             (`network.web_search`), which reaches the web past the job's egress \
                             proxy; the spec's `[network] web_search` asks for it"
                        .into(),
                    named: None,
                    on_fallback: false,
                }),
                Ok(vec![]),
                Ok(vec![]),
                Ok(vec![]),
            )
        );
    }
}

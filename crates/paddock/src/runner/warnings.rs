//! What an admitted job is warned about before it starts: a spec (after
//! the user's config file filled in its defaults) without any budget,
//! deprecated spellings in its host profile or `policy.accept_degraded`,
//! and a host profile's `[network]` maximum on the `process` rung, where
//! it is advice only (the job's processes can connect past the egress
//! proxy; nothing refuses such a job, as before, but it is said).
//! Each becomes a non-fatal `error` event from `paddock` on the job's
//! stream, so whoever follows the job sees it, not only the terminal that
//! started it.

use paddock_protocol::{BudgetSpec, Isolation, JobSpec};

use crate::policy::job::JobPolicy;

/// The warning of a job whose model spend nothing caps.
pub const NO_BUDGET: &str = "the spec sets no [budget] (max_usd, ticket_max_usd, project_daily_max_usd) and no max_usd default is configured (config.toml): this job's model spend is not capped";

/// The warnings of an admitted job (`spec` with its rung resolved), in
/// the order they are emitted.
pub fn admission_warnings(spec: &JobSpec, policy: Option<&JobPolicy>) -> Vec<String> {
    let budget = (spec.budget == BudgetSpec::default()).then(|| NO_BUDGET.to_string());
    let deprecated = policy.map(|p| p.deprecations(spec)).unwrap_or_default();
    let network = policy.and_then(|p| network_advice(spec, p));
    budget
        .into_iter()
        .chain(deprecated)
        .chain(network)
        .collect()
}

/// The warning of a job on the `process` rung under a host profile with a
/// `[network]` section: its maximum (and the deny list) hold only for what
/// goes through the job's egress proxy.
fn network_advice(spec: &JobSpec, policy: &JobPolicy) -> Option<String> {
    (spec.isolation == Isolation::Process && policy.profile.network.is_some()).then(|| {
        format!(
            "host profile `{}`: its [network] maximum is advice on the `process` rung: the \
             job's processes can connect directly, past its egress proxy and the deny list; \
             the `sandbox` rung enforces it (docs/egress.md)",
            policy.profile.id
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const SPEC: &str = "[ticket]\nid = \"T-1\"\ntitle = \"t\"\nproject = \"p\"\n\
        [repository]\npath = \"/r\"\nbase_ref = \"main\"\n\
        [engine]\nkind = \"codex\"\nmodel = \"gpt-5\"\n\
        [upstream]\nprovider = \"scripted\"\nscenario = \"s.toml\"\n";

    #[test]
    fn a_spec_without_a_budget_is_warned_about_and_one_with_a_budget_is_not() {
        let bare = JobSpec::from_toml(SPEC, Path::new("job.toml")).unwrap();
        assert_eq!(admission_warnings(&bare, None), vec![NO_BUDGET.to_string()]);
        for budget in [
            "max_usd = 1.0",
            "ticket_max_usd = 1.0",
            "project_daily_max_usd = 1.0",
        ] {
            let text = format!("{SPEC}[budget]\n{budget}\n");
            let capped = JobSpec::from_toml(&text, Path::new("job.toml")).unwrap();
            assert_eq!(
                admission_warnings(&capped, None),
                Vec::<String>::new(),
                "{budget}"
            );
        }
        // The config file's default fills the spec's budget in (`Config::apply`).
        let config = crate::config::Config {
            max_usd: Some(0.5),
            ..Default::default()
        };
        assert_eq!(
            admission_warnings(&config.apply(bare), None),
            Vec::<String>::new()
        );
    }

    /// A policy admitted under `profile` (JSON).
    fn policy(profile: &str) -> JobPolicy {
        let profile = paddock_protocol::HostProfile::from_json(profile, "box.json").unwrap();
        JobPolicy {
            matcher: crate::policy::matcher::Matcher::new(&profile.deny_commands),
            profile,
            source: crate::policy::profile::ProfileSource::Preset,
            admission: crate::policy::admission::Admission {
                timeout_secs: 60,
                setup_timeout_secs: 600,
                max_disk_bytes: 1 << 30,
                max_records: 100_000,
                degraded: vec![],
            },
        }
    }

    /// A `[network]` maximum on the `process` rung is said to be advice;
    /// on the sandbox, or without a `[network]` section, nothing is said.
    #[test]
    fn a_network_maximum_on_the_process_rung_is_warned_about_as_advice() {
        let text = format!("{SPEC}[budget]\nmax_usd = 1.0\n");
        let on = |rung: Isolation| {
            let mut spec = JobSpec::from_toml(&text, Path::new("job.toml")).unwrap();
            spec.isolation = rung;
            spec
        };
        let capped = policy(r#"{"id":"box","network":{"allow":["api.github.com"]}}"#);
        let open = policy(r#"{"id":"box"}"#);
        assert_eq!(
            (
                admission_warnings(&on(Isolation::Process), Some(&capped)),
                admission_warnings(&on(Isolation::Sandbox), Some(&capped)),
                admission_warnings(&on(Isolation::Process), Some(&open)),
            ),
            (
                vec![
                    "host profile `box`: its [network] maximum is advice on the `process` \
                      rung: the job's processes can connect directly, past its egress proxy \
                      and the deny list; the `sandbox` rung enforces it (docs/egress.md)"
                        .to_string()
                ],
                Vec::<String>::new(),
                Vec::<String>::new(),
            )
        );
    }

    #[test]
    fn setup_and_network_sections_are_applied_not_warned_about() {
        let text = format!(
            "{SPEC}[budget]\nmax_usd = 1.0\n[setup]\ncommands = [\"npm ci\"]\n[network]\nallow = [\"a.example\"]\n"
        );
        let spec = JobSpec::from_toml(&text, Path::new("job.toml")).unwrap();
        assert_eq!(admission_warnings(&spec, None), Vec::<String>::new());
    }
}

//! What an admitted job is warned about before it starts: a spec (after
//! the user's config file filled in its defaults) without any budget,
//! and deprecated spellings in its host profile or
//! `policy.accept_degraded`. Each becomes a non-fatal `error` event from
//! `paddock` on the job's stream, so whoever follows the job sees it, not
//! only the terminal that started it. (A host profile's `[network]`
//! maximum on the `process` rung is no warning: it refuses the job unless
//! the spec accepts it as degraded, and is then the job's `policy` event,
//! as `cpu_limit` is: `policy/admission.rs`.)

use paddock_protocol::{BudgetSpec, JobSpec};

use crate::policy::job::JobPolicy;

/// The warning of a job whose model spend nothing caps.
pub const NO_BUDGET: &str = "the spec sets no [budget] (max_usd, ticket_max_usd, project_daily_max_usd) and no max_usd default is configured (config.toml): this job's model spend is not capped";

/// The warnings of an admitted job (`spec` with its rung resolved), in
/// the order they are emitted.
pub fn admission_warnings(spec: &JobSpec, policy: Option<&JobPolicy>) -> Vec<String> {
    let budget = (spec.budget == BudgetSpec::default()).then(|| NO_BUDGET.to_string());
    let deprecated = policy.map(|p| p.deprecations(spec)).unwrap_or_default();
    budget.into_iter().chain(deprecated).collect()
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

    #[test]
    fn setup_and_network_sections_are_applied_not_warned_about() {
        let text = format!(
            "{SPEC}[budget]\nmax_usd = 1.0\n[setup]\ncommands = [\"npm ci\"]\n[network]\nallow = [\"a.example\"]\n"
        );
        let spec = JobSpec::from_toml(&text, Path::new("job.toml")).unwrap();
        assert_eq!(admission_warnings(&spec, None), Vec::<String>::new());
    }
}

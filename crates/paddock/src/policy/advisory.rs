//! Layer 1: the HostProfile as advice to the agent: a Markdown section, and
//! the plain data (`context`) the generated AGENTS.md/CLAUDE.md, prompt and
//! `.paddock/` files are rendered from. It tells the agent the rules the
//! other layers enforce, so that it does not waste turns on denied commands.

use std::fmt::Write as _;

use paddock_protocol::{BuildPolicy, HostProfile, Verification};

use crate::context::PolicyContext;

/// The advisory section for `profile`.
pub fn advisory(profile: &HostProfile) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "## Host rules (profile `{}`)\n", profile.id);
    let _ = writeln!(s, "- {}", build_line(profile));
    let _ = writeln!(s, "- {}", verify_line(profile));
    if !profile.deny_commands.is_empty() {
        let _ = writeln!(
            s,
            "- These commands are blocked here (also inside scripts, `bash -c`, `env` or chains) and will be refused:"
        );
        for c in &profile.deny_commands {
            let _ = writeln!(s, "  - `{c}`");
        }
    }
    if let Some(limits) = limits_line(profile) {
        let _ = writeln!(s, "- {limits}");
    }
    s
}

/// Layer 1 as the generated context takes it (plain data): the guidance
/// (build policy, verification, limits) without a heading or the denied
/// commands, which the context's templates render themselves.
pub fn context(profile: &HostProfile) -> PolicyContext {
    let mut guidance = format!("- {}\n- {}\n", build_line(profile), verify_line(profile));
    if let Some(limits) = limits_line(profile) {
        guidance.push_str(&format!("- {limits}\n"));
    }
    PolicyContext {
        profile: Some(profile.id.clone()),
        advisory: Some(guidance),
        denied_commands: profile.deny_commands.clone(),
        cpu_limit: profile.cpu_limit.clone(),
        memory_limit_mb: profile.mem_limit_mb,
        max_concurrent_jobs: profile.max_concurrent_jobs,
    }
}

fn build_line(profile: &HostProfile) -> &'static str {
    match profile.build_policy {
        BuildPolicy::CiOnly => {
            "Do not run full or release builds on this host: CI runs the full build."
        }
        BuildPolicy::Local => "Builds may run on this host.",
    }
}

fn verify_line(profile: &HostProfile) -> &'static str {
    match profile.verification {
        Verification::DevProbe => {
            "Verify with the cheapest targeted check (one test, a type check), then finish; CI runs the full suite."
        }
        Verification::TargetedTests => "Verify by running the tests that cover your change.",
        Verification::FullSuite => "Verify by running the whole test suite before you finish.",
    }
}

fn limits_line(profile: &HostProfile) -> Option<String> {
    let mut limits = Vec::new();
    if let Some(t) = profile.timeout_min {
        limits.push(format!("{t} min wall clock"));
    }
    if let Some(cpu) = &profile.cpu_limit {
        limits.push(format!("CPU {cpu}"));
    }
    if let Some(m) = profile.mem_limit_mb {
        limits.push(format!("{m} MB memory"));
    }
    if let Some(n) = profile.max_concurrent_jobs {
        limits.push(format!("{n} concurrent job(s) on this host"));
    }
    (!limits.is_empty()).then(|| format!("Limits: {}.", limits.join(", ")))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn constrained_local_advisory() {
        let p = crate::policy::profile::preset("constrained-local")
            .unwrap()
            .unwrap();
        insta::assert_snapshot!(advisory(&p));
    }

    #[test]
    fn remote_full_advisory() {
        let p = crate::policy::profile::preset("remote-full")
            .unwrap()
            .unwrap();
        insta::assert_snapshot!(advisory(&p));
    }

    #[test]
    fn the_context_gets_guidance_and_denied_commands_as_data() {
        let p = crate::policy::profile::preset("constrained-local")
            .unwrap()
            .unwrap();
        let mut guidance = format!("- {}\n- {}\n", build_line(&p), verify_line(&p));
        if let Some(limits) = limits_line(&p) {
            guidance.push_str(&format!("- {limits}\n"));
        }
        assert_eq!(
            context(&p),
            PolicyContext {
                profile: Some("constrained-local".into()),
                advisory: Some(guidance),
                denied_commands: p.deny_commands.clone(),
                cpu_limit: p.cpu_limit.clone(),
                memory_limit_mb: p.mem_limit_mb,
                max_concurrent_jobs: p.max_concurrent_jobs,
            }
        );
        // The section the engines read is the advisory's, minus its heading.
        let section = advisory(&p);
        for line in context(&p).advisory.unwrap().lines() {
            assert!(section.contains(line), "{line}");
        }
    }
}

//! Layer 1: the HostProfile as advice to the agent, a Markdown section for
//! the generated AGENTS.md/CLAUDE.md. It tells the agent the rules the
//! other layers enforce, so that it does not waste turns on denied commands.

use std::fmt::Write as _;

use paddock_protocol::{BuildPolicy, HostProfile, Verification};

/// The advisory section for `profile`.
pub fn advisory(profile: &HostProfile) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "## Host rules (profile `{}`)\n", profile.id);
    match profile.build_policy {
        BuildPolicy::CiOnly => {
            let _ = writeln!(
                s,
                "- Do not run full or release builds on this host: CI runs the full build."
            );
        }
        BuildPolicy::Local => {
            let _ = writeln!(s, "- Builds may run on this host.");
        }
    }
    let verify = match profile.verification {
        Verification::DevProbe => {
            "Verify with the cheapest targeted check (one test, a type check), then finish; CI runs the full suite."
        }
        Verification::TargetedTests => "Verify by running the tests that cover your change.",
        Verification::FullSuite => "Verify by running the whole test suite before you finish.",
    };
    let _ = writeln!(s, "- {verify}");
    if !profile.deny_commands.is_empty() {
        let _ = writeln!(
            s,
            "- These commands are blocked here (also inside scripts, `bash -c`, `env` or chains) and will be refused:"
        );
        for c in &profile.deny_commands {
            let _ = writeln!(s, "  - `{c}`");
        }
    }
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
    if !limits.is_empty() {
        let _ = writeln!(s, "- Limits: {}.", limits.join(", "));
    }
    s
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
}

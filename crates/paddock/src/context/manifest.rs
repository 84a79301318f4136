//! The machine-readable half of the context: `.paddock/environment.json`
//! (what the job may rely on: engine, model, isolation rung, limits, time
//! budget, host profile) and `.paddock/tools.json` (the commands available on
//! the engine's PATH and the ones the host forbids). Neither holds an
//! absolute path or a secret, and the spec's names in them (project,
//! model) are one plain line, as in the instructions. Their fields are documented in docs/context.md.

use std::path::PathBuf;

use paddock_protocol::{plain_text, JobSpec};
use serde_json::{json, Value};

use super::{ContextInputs, PolicyContext};

/// The commands Paddock looks for on the engine's PATH for tools.json.
pub const PROBED_TOOLS: [&str; 20] = [
    "bash", "sh", "git", "rg", "grep", "sed", "awk", "find", "jq", "diff", "patch", "make",
    "python3", "node", "npm", "cargo", "rustc", "go", "java", "curl",
];

/// Which of [`PROBED_TOOLS`] are on `path_env` (a PATH value), in that order.
pub fn probe_tools(path_env: &str) -> Vec<String> {
    PROBED_TOOLS
        .iter()
        .filter(|tool| {
            std::env::split_paths(path_env).any(|dir: PathBuf| {
                let p = dir.join(tool);
                std::fs::metadata(&p).is_ok_and(|m| {
                    use std::os::unix::fs::PermissionsExt as _;
                    m.is_file() && m.permissions().mode() & 0o111 != 0
                })
            })
        })
        .map(|t| t.to_string())
        .collect()
}

/// `.paddock/environment.json`.
pub fn environment(spec: &JobSpec, policy: &PolicyContext) -> Value {
    json!({
        "schema": "paddock.environment/1",
        "job": {
            "ticket": spec.ticket.id,
            "project": plain_text::line(&spec.ticket.project),
            "attempt": spec.attempt(),
            "branch": spec.branch(),
            "base_ref": spec.repository.base_ref,
        },
        "engine": {
            "kind": spec.engine.kind.as_str(),
            "model": plain_text::line(&spec.engine.model),
            "reasoning_effort": spec.engine.reasoning_effort.map(|e| e.as_str()),
        },
        "isolation": spec.isolation.as_str(),
        "limits": {
            "timeout_secs": spec.limits.timeout_secs,
            "budget_usd": spec.budget.max_usd,
            "cpu": policy.cpu_limit,
            "memory_mb": policy.memory_limit_mb,
            "max_concurrent_jobs": policy.max_concurrent_jobs,
        },
        "host_profile": policy.profile,
        "model_access": "every model call goes through Paddock's broker; the key in your environment is a per-job token, worthless outside this job",
        "git": {
            "commit": false,
            "push": false,
            "hooks": "disabled",
            "note": "Paddock collects the change from the working tree when you finish",
        },
    })
}

/// `.paddock/tools.json`.
pub fn tools(spec: &JobSpec, inputs: &ContextInputs) -> Value {
    json!({
        "schema": "paddock.tools/1",
        "engine": spec.engine.kind.as_str(),
        "commands": {
            "available": inputs.available_tools,
            "forbidden": inputs.policy.denied_commands,
        },
        "forbidden_by": inputs.policy.profile,
    })
}

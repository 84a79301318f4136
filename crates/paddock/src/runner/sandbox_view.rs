//! Admission's check of a sandboxed job's paths against the sandbox's
//! view: the engine's directories (its package tree, its own directory
//! and node's, read-only), the job's work, home and tmp under the jobs
//! directory, and what the host profile's hook needs. The helper's
//! planning refuses a path on or under a part the view makes itself (a
//! path under /proc, /tmp or /dev/shm themselves, `paddock_sandbox`'s
//! `own_parts.rs`); the same rules run here, on the paths the launch
//! would give it (`launcher::unbindable`), so such a job is refused before
//! it is recorded or provisioned instead of failing at its launch. The
//! helper still checks at launch (the paths may have changed since).

use std::path::Path;

use paddock_protocol::{EngineKind, JobSpec};

use super::engine_bin::{engine_path, resolve_engine};
use super::RunnerConfig;
use crate::engines::{self, CommandSpec};
use crate::launcher::{self, SandboxPaths, Source};

/// A path of a sandboxed job's view the sandbox would refuse, with where
/// it comes from and what to change.
#[derive(Debug, thiserror::Error)]
#[error("{from}: {refused}{advice}")]
pub struct Unbindable {
    /// Which of the job's paths, from which setting.
    from: String,
    refused: paddock_sandbox::own_parts::Replaced,
    /// What to change for that setting ("" when the refusal says it).
    advice: String,
}

/// How the job's engine binary was chosen, for a refusal to name.
fn engine_from(kind: EngineKind, spec: &JobSpec, binary: &Path) -> String {
    match &spec.engine.binary {
        Some(p) if p.components().count() > 1 => format!("engine.binary {}", p.display()),
        _ => format!("`{kind}` found on PATH at {}", binary.display()),
    }
}

/// Refuses `spec`, to run on the `sandbox` rung as job `id` (with a host
/// profile when `profiled`), when its sandbox would refuse one of its
/// paths. An engine binary that cannot be resolved is left to
/// provisioning, which fails the job naming it.
pub fn check(
    spec: &JobSpec,
    id: &str,
    profiled: bool,
    config: &RunnerConfig,
) -> Result<(), Box<Unbindable>> {
    let host_path = config.host_path.as_deref();
    let Ok(binary) = resolve_engine(spec, host_path, &config.cwd) else {
        return Ok(());
    };
    let kind = spec.engine.kind;
    let (program, _) = engines::adapter(kind).native_program(&binary);
    let root = config.paths.jobs.join(id);
    let meta = root.join("meta");
    let cmd = CommandSpec {
        program,
        args: Vec::new(),
        env: vec![(
            "PATH".to_string(),
            engine_path(&binary, host_path, &config.cwd),
        )],
        cwd: root.join("work"),
        stdin: None,
        protect: Vec::new(),
    };
    let (extra_ro, extra_rw) = match profiled {
        true => launcher::hook_paths(&meta, Some(&config.helper_exe)),
        false => (Vec::new(), Vec::new()),
    };
    let paths = SandboxPaths {
        job_id: id.to_string(),
        work: root.join("work"),
        home: root.join("home"),
        tmp: root.join("tmp"),
        broker_socket: meta.join("broker.sock"),
        egress_socket: None,
        // Every command of a sandboxed job is watched (`rung/sandbox.rs`).
        direct: Some(paddock_sandbox::DirectWatch {
            report: meta.join("direct.sock"),
            tag: String::new(),
        }),
        timeout_secs: 0,
        extra_ro,
        extra_rw,
        limits: launcher::default_limits(),
        allow_without_cgroups: true,
        cgroup_root: None,
        notices: None,
        hidden: Vec::new(),
    };
    let Some((source, refused)) = launcher::unbindable(&cmd, &paths) else {
        return Ok(());
    };
    let (from, advice) = match source {
        Source::Engine => (
            format!(
                "the sandbox cannot bind engine {kind}'s directories (its package tree, its own \
                 directory and node's, read-only; {})",
                engine_from(kind, spec, &binary)
            ),
            " (install the engine in a directory of its own and set engine.binary or PATH to it)"
                .to_string(),
        ),
        Source::Job => (
            format!(
                "the sandbox cannot bind the job's work, home and tmp (under the jobs directory \
                 {}: --jobs-dir or PADDOCK_JOBS_DIR)",
                config.paths.jobs.display()
            ),
            String::new(),
        ),
        Source::Hook => (
            format!(
                "the sandbox cannot bind what the host profile's hook needs (the paddock binary \
                 {}, the profile and record under the jobs directory {})",
                config.helper_exe.display(),
                config.paths.jobs.display()
            ),
            String::new(),
        ),
    };
    Err(Box::new(Unbindable {
        from,
        refused,
        advice,
    }))
}

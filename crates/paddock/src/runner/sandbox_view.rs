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

use std::path::{Path, PathBuf};

use paddock_protocol::{EngineKind, JobSpec};

use super::engine_bin::{engine_path, resolve_engine};
use super::RunnerConfig;
use crate::engines::{self, CommandSpec};
use crate::launcher::{self, SandboxPaths, Source};

/// A path of a sandboxed job's view the sandbox would refuse, with where
/// it comes from and what to change.
#[derive(Debug)]
pub struct Unbindable {
    whence: Whence,
    refused: paddock_sandbox::own_parts::Replaced,
    /// The job spec's file, when the path comes from one of its fields
    /// and the caller read it from a file ([`Unbindable::in_spec_file`]).
    spec_file: Option<String>,
}

/// Which of the job's paths, from which setting.
#[derive(Debug)]
enum Whence {
    /// The engine's directories; `pinned`: its binary is the spec's
    /// `engine.binary`, else found on PATH.
    Engine {
        kind: EngineKind,
        binary: PathBuf,
        pinned: bool,
    },
    /// The job's work, home and tmp, under the jobs directory.
    Job { jobs: PathBuf },
    /// What the host profile's hook needs.
    Hook { exe: PathBuf, jobs: PathBuf },
}

impl Unbindable {
    /// The refusal naming `file`, the job spec's, when the path comes
    /// from one of its fields (`engine.binary`).
    pub fn in_spec_file(mut self, file: &Path) -> Unbindable {
        if let Whence::Engine { pinned: true, .. } = self.whence {
            self.spec_file = Some(file.display().to_string());
        }
        self
    }
}

impl std::fmt::Display for Unbindable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let refused = &self.refused;
        match &self.whence {
            Whence::Engine {
                kind,
                binary,
                pinned,
            } => {
                let chosen = match (pinned, &self.spec_file) {
                    (true, Some(file)) => {
                        format!("engine.binary {} in job spec {file}", binary.display())
                    }
                    (true, None) => format!("engine.binary {}", binary.display()),
                    (false, _) => format!("`{kind}` found on PATH at {}", binary.display()),
                };
                write!(
                    f,
                    "the sandbox cannot bind engine {kind}'s directories (its package tree, its \
                     own directory and node's, read-only; {chosen}): {refused} (install the \
                     engine in a directory of its own and set engine.binary or PATH to it)"
                )
            }
            Whence::Job { jobs } => write!(
                f,
                "the sandbox cannot bind the job's work, home and tmp (under the jobs directory \
                 {}: --jobs-dir or PADDOCK_JOBS_DIR): {refused}",
                jobs.display()
            ),
            Whence::Hook { exe, jobs } => write!(
                f,
                "the sandbox cannot bind what the host profile's hook needs (the paddock binary \
                 {}, the profile and record under the jobs directory {}): {refused}",
                exe.display(),
                jobs.display()
            ),
        }
    }
}

impl std::error::Error for Unbindable {}

/// Refuses `spec`, to run on the `sandbox` rung as job `id` (with a host
/// profile when `profiled`), when its sandbox would refuse one of its
/// paths. An engine binary that cannot be resolved is left to
/// [`super::Runner::engine_here`] and provisioning, which name it.
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
            engine_path(&binary, host_path, &config.cwd, &config.tools.path),
        )],
        cwd: root.join("work"),
        stdin: None,
        protect: Vec::new(),
    };
    let (mut extra_ro, extra_rw) = match profiled {
        true => launcher::hook_paths(&meta, Some(&config.helper_exe)),
        false => (Vec::new(), Vec::new()),
    };
    extra_ro.extend(config.tools.read_only.iter().cloned());
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
    let whence = match source {
        Source::Engine => Whence::Engine {
            kind,
            pinned: spec
                .engine
                .binary
                .as_ref()
                .is_some_and(|p| p.components().count() > 1),
            binary,
        },
        Source::Job => Whence::Job {
            jobs: config.paths.jobs.clone(),
        },
        Source::Hook => Whence::Hook {
            exe: config.helper_exe.clone(),
            jobs: config.paths.jobs.clone(),
        },
    };
    Err(Box::new(Unbindable {
        whence,
        refused,
        spec_file: None,
    }))
}

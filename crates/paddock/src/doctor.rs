//! What `paddock doctor` reports: what this host supports for each
//! isolation rung. The kernel facts come from `paddock_sandbox::probe`;
//! whether the `sandbox` rung actually works is shown by starting one
//! (`true` with no network), and whether jobs will work here by doing what
//! a job does under the real state directory (`host_check`: a job
//! directory, its broker socket, a sandbox working in it that reaches the
//! socket), so the answer is never a guess. Each failed check says how to
//! fix it. The binary renders the report (`cli/doctor.rs`).

use std::path::{Path, PathBuf};

use crate::host_check::{self, Check};
use crate::paths::Paths;
use paddock_sandbox::probe::{self, HostSupport};
use serde::Serialize;

#[derive(Debug, Serialize)]
pub struct Rung {
    pub name: &'static str,
    pub supported: bool,
    pub detail: String,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub host: HostSupport,
    pub uid: u32,
    pub rungs: Vec<Rung>,
    /// What a job does, done under this host's real locations.
    pub checks: Vec<Check>,
    /// What the user installs: the engines at their pins, git, the database.
    pub setup: Vec<Check>,
}

/// The report for this host, under `paths`, with jobs' cgroups made under
/// `cgroup_root` (`PADDOCK_CGROUP_ROOT`; None: `/sys/fs/cgroup`).
pub fn report(paths: &Paths, cgroup_root: Option<&Path>) -> Report {
    let host = probe::host();
    let uid = nix::unistd::getuid().as_raw();
    let exe = std::env::current_exe();
    let kernel = match &exe {
        Ok(exe) => crate::rung::probe_sandbox(exe),
        Err(e) => Some(format!("locate the paddock binary: {e}")),
    };
    let checks = match exe {
        Ok(exe) => host_check::run(paths, &exe, kernel.is_none()),
        Err(e) => vec![Check {
            name: "sandbox job".into(),
            ok: false,
            detail: format!("locate the paddock binary: {e}"),
            fix: None,
        }],
    };
    // The kernel can start a sandbox; can a job, under these locations?
    let sandbox = kernel.or_else(|| {
        checks.iter().find(|c| !c.ok).map(|c| {
            format!(
                "the kernel supports it, but a job under {} cannot run: {}: {}",
                paths.jobs.display(),
                c.name,
                c.detail
            )
        })
    });
    let cgroups = cgroup_caps(cgroup_root);
    let rungs = vec![
        Rung {
            name: "process",
            supported: true,
            detail: "always available (no isolation)".into(),
        },
        Rung {
            name: "sandbox",
            supported: sandbox.is_none(),
            detail: match sandbox {
                None => format!(
                    "namespaces, Landlock ABI {}, seccomp; {cgroups}",
                    host.landlock_abi
                        .map(|a| a.to_string())
                        .unwrap_or_else(|| "none".into())
                ),
                Some(e) => e,
            },
        },
    ];
    Report {
        host,
        uid,
        rungs,
        checks,
        setup: crate::setup_check::run(paths, std::env::var_os("PATH").as_deref()),
    }
}

/// For each engine on PATH (as a spec naming no `engine.binary` runs
/// it), whether its directories bind into a sandboxed job's view
/// (`runner::engine_view`: none on a part the view makes itself, none
/// showing a private place of this host, the user's home or Paddock's
/// directories among them), on `host` (its PATH, `[jobs]` and places).
/// An engine installed loose in the home directory would have every
/// sandboxed job refused at admission; this says so before the first.
pub fn engine_views(host: &crate::runner::ViewHost<'_>) -> Vec<Check> {
    crate::engines::KINDS
        .into_iter()
        .filter_map(|kind| {
            let name = format!("view of {kind}");
            match crate::runner::engine_view(kind, host) {
                Ok(None) => None,
                Ok(Some(binary)) => Some(Check {
                    name: name.into(),
                    ok: true,
                    detail: format!(
                        "{}: its directories bind read-only into a job's sandbox and show it \
                         nothing of this host's own",
                        binary.display()
                    ),
                    fix: None,
                }),
                Err(refused) => Some(Check {
                    name: name.into(),
                    ok: false,
                    detail: format!("a sandboxed job running it would be refused: {refused}"),
                    fix: Some(
                        "install the engine in a directory of its own (npm install --prefix DIR) \
                         and put its bin directory on PATH (docs/sandbox.md, \"What a read-only \
                         path may not show\")"
                            .into(),
                    ),
                }),
            }
        })
        .collect()
}

/// Whether a job's cgroup (with the default pids cap) can be made under
/// `root` here: one is made (`doctor-<uuid>`) and removed again.
fn cgroup_caps(root: Option<&Path>) -> String {
    let root = root.map_or_else(
        || PathBuf::from(crate::leftovers::CGROUP_ROOT),
        Path::to_path_buf,
    );
    let name = format!("doctor-{}", uuid::Uuid::now_v7().simple());
    match paddock_sandbox::cgroup::Cgroup::create(&root, &name, &crate::launcher::default_limits())
    {
        Ok(cg) => {
            cg.remove();
            format!("jobs' cgroup caps are made under {}", root.display())
        }
        Err(e) => {
            let held = paddock_sandbox::pid_cap::expected(
                crate::launcher::SANDBOX_PIDS,
                paddock_sandbox::pid_cap::host_root(),
            );
            format!(
                "no cgroup caps for jobs ({e}): without its cgroup {held}, and a job whose host profile sets caps is refused unless its spec accepts them as degraded; PADDOCK_CGROUP_ROOT names a cgroup delegated to this user (docs/sandbox.md)"
            )
        }
    }
}

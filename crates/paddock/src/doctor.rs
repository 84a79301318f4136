//! What `paddock doctor` reports: what this host supports for each
//! isolation rung. The kernel facts come from `paddock_sandbox::probe`;
//! whether the `sandbox` rung actually works is shown by starting one
//! (`true` with no network), and whether jobs will work here by doing what
//! a job does under the real state directory (`host_check`: a job
//! directory, its broker socket, a sandbox working in it that reaches the
//! socket), so the answer is never a guess. Each failed check says how to
//! fix it. The binary renders the report (`cli/doctor.rs`).

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

/// The report for this host, under `paths`.
pub fn report(paths: &Paths) -> Report {
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
    let cgroups = match (&host.cgroup, uid) {
        (Some(v), 0) => format!("cgroup {v} caps available"),
        (Some(v), _) => format!("cgroup {v} present; caps need a delegated cgroup (PADDOCK_CGROUP_ROOT) or are refused unless accepted"),
        (None, _) => "no cgroup caps: jobs asking for caps are refused unless accepted".into(),
    };
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

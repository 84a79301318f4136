//! `paddock doctor [--json]`: what this host supports for each isolation
//! rung. The kernel facts come from `paddock_sandbox::probe`; whether the
//! `sandbox` rung actually works is shown by starting one (`true` with no
//! network), and whether jobs will work here by doing what a job does
//! under the real state directory (`paddock::host_check`: a job directory,
//! its broker socket, a sandbox working in it that reaches the socket), so
//! the answer is never a guess. Each failed check says how to fix it.

use paddock::host_check::{self, Check};
use paddock::paths::Paths;
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

pub fn report(paths: &Paths) -> Report {
    let host = probe::host();
    let uid = nix::unistd::getuid().as_raw();
    let kernel = paddock::rung::probe_sandbox();
    let checks = match std::env::current_exe() {
        Ok(exe) => host_check::run(paths, &exe, kernel.is_none()),
        Err(e) => vec![Check {
            name: "sandbox job",
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
        setup: paddock::setup_check::run(paths, std::env::var_os("PATH").as_deref()),
    }
}

pub fn render(r: &Report) -> String {
    let yes = |b: bool| if b { "yes" } else { "no" };
    let h = &r.host;
    let mut out = String::new();
    out.push_str(&format!(
        "user namespaces  {} ({})\n",
        yes(h.user_namespaces),
        h.user_namespaces_detail
    ));
    out.push_str(&format!(
        "landlock         {}\n",
        h.landlock_abi
            .map(|a| format!("ABI {a}"))
            .unwrap_or_else(|| "no".into())
    ));
    out.push_str(&format!("seccomp          {}\n", yes(h.seccomp)));
    out.push_str(&format!(
        "cgroups          {} ({})\n",
        h.cgroup.as_deref().unwrap_or("none"),
        h.cgroup_detail
    ));
    out.push_str(&format!("overlayfs        {}\n", yes(h.overlayfs)));
    out.push_str(&format!("uid              {}\n", r.uid));
    out.push_str("\nrungs:\n");
    for rung in &r.rungs {
        out.push_str(&format!(
            "  {:<9} {:<3}  {}\n",
            rung.name,
            yes(rung.supported),
            rung.detail
        ));
    }
    if !r.checks.is_empty() {
        out.push_str("\nthis host's jobs:\n");
    }
    render_checks(&mut out, &r.checks);
    if !r.setup.is_empty() {
        out.push_str("\ninstalled:\n");
    }
    render_checks(&mut out, &r.setup);
    out
}

fn render_checks(out: &mut String, checks: &[Check]) {
    for c in checks {
        out.push_str(&format!(
            "  {:<16} {:<3}  {}\n",
            c.name,
            if c.ok { "ok" } else { "no" },
            c.detail
        ));
        if let Some(fix) = &c.fix {
            out.push_str(&format!("  {:<16}       fix: {fix}\n", ""));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_host_and_the_rungs() {
        let report = Report {
            host: HostSupport {
                user_namespaces: true,
                user_namespaces_detail: "max_user_namespaces=96365".into(),
                landlock_abi: Some(7),
                seccomp: true,
                cgroup: Some("v1".into()),
                cgroup_detail: "/sys/fs/cgroup/{memory,pids,cpu}".into(),
                overlayfs: true,
            },
            uid: 1000,
            rungs: vec![
                Rung {
                    name: "process",
                    supported: true,
                    detail: "always available (no isolation)".into(),
                },
                Rung {
                    name: "sandbox",
                    supported: false,
                    detail: "unshare the user, mount, network, IPC, UTS and cgroup namespaces: EPERM: Operation not permitted".into(),
                },
            ],
            checks: vec![
                Check {
                    name: "data directory",
                    ok: true,
                    detail: "/home/u/.local/share/paddock is writable".into(),
                    fix: None,
                },
                Check {
                    name: "state directory",
                    ok: false,
                    detail: "create a job directory /home/u/.local/state/paddock/jobs/doctor-1: Permission denied (os error 13)".into(),
                    fix: Some("point XDG_STATE_HOME (or --jobs-dir / PADDOCK_JOBS_DIR) at a directory you can write".into()),
                },
            ],
            setup: vec![
                Check {
                    name: "engine codex",
                    ok: true,
                    detail: "/opt/engines/codex (codex-cli 0.171.0)".into(),
                    fix: None,
                },
                Check {
                    name: "engine claude",
                    ok: false,
                    detail: "`claude` is not on PATH".into(),
                    fix: Some(paddock::engines::pins::CLAUDE.install_hint()),
                },
            ],
        };
        insta::assert_snapshot!(render(&report));
    }
}

//! `paddock doctor [--json]`: what this host supports for each isolation
//! rung. The kernel facts come from `paddock_sandbox::probe`; whether the
//! `sandbox` rung actually works is shown by starting one (`true` with no
//! network), so the answer is never a guess.

use std::process::Stdio;

use paddock_sandbox::probe::{self, HostSupport};
use paddock_sandbox::{launch, Limits, NetMode, Policy};
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
}

/// Starts a minimal sandbox; None when it works, else the helper's error.
fn try_sandbox() -> Option<String> {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return Some(format!("locate the paddock binary: {e}")),
    };
    let policy = Policy {
        argv: vec!["true".into()],
        env: vec![],
        cwd: "/".into(),
        ro: vec![],
        rw: vec![],
        protect: vec![],
        tmp_mb: 1,
        net: NetMode::None,
        limits: Limits::default(),
        allow_without_cgroups: false,
        timeout_secs: Some(10),
        cgroup_root: None,
        name: "doctor".into(),
    };
    let mut cmd = match launch::command(&exe, &policy) {
        Ok(c) => c,
        Err(e) => return Some(e.to_string()),
    };
    match cmd.stdin(Stdio::null()).stdout(Stdio::null()).output() {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(String::from_utf8_lossy(&out.stderr).trim().to_string()),
        Err(e) => Some(format!("start the helper: {e}")),
    }
}

pub fn report() -> Report {
    let host = probe::host();
    let uid = nix::unistd::getuid().as_raw();
    let sandbox = try_sandbox();
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
    Report { host, uid, rungs }
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
    out
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
        };
        insta::assert_snapshot!(render(&report));
    }
}

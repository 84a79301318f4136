//! What this host supports, for `paddock doctor`: user namespaces, the
//! Landlock ABI, seccomp, cgroup v2 or v1 controllers, overlayfs. Each
//! answer is read from the kernel, not assumed; the definitive check (can
//! a sandbox actually start here) is made by the caller, which runs one.

use std::path::Path;

use serde::Serialize;

use crate::cgroup::{detect, Version};

/// The host's answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostSupport {
    /// `user.max_user_namespaces` > 0 (and not disabled for unprivileged users).
    pub user_namespaces: bool,
    pub user_namespaces_detail: String,
    /// The Landlock ABI version, or None when Landlock is unavailable.
    pub landlock_abi: Option<i64>,
    /// seccomp filter mode is available.
    pub seccomp: bool,
    /// "v2", "v1" or None.
    pub cgroup: Option<String>,
    pub cgroup_detail: String,
    pub overlayfs: bool,
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Probes the running kernel.
pub fn host() -> HostSupport {
    let max = read("/proc/sys/user/max_user_namespaces").and_then(|s| s.parse::<u64>().ok());
    let clone = read("/proc/sys/kernel/unprivileged_userns_clone");
    let apparmor = read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
    let user_namespaces = max.unwrap_or(0) > 0 && clone.as_deref() != Some("0");
    let user_namespaces_detail = format!(
        "max_user_namespaces={}{}{}",
        max.map(|m| m.to_string()).unwrap_or_else(|| "?".into()),
        clone
            .map(|c| format!(", unprivileged_userns_clone={c}"))
            .unwrap_or_default(),
        apparmor
            .map(|a| format!(", apparmor_restrict_unprivileged_userns={a}"))
            .unwrap_or_default(),
    );
    // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
    // reads no memory and returns the ABI version or an error.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    };
    // SAFETY: prctl(PR_GET_SECCOMP) takes integer arguments only.
    let seccomp_mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
    let seccomp = seccomp_mode >= 0
        && std::fs::read_to_string("/proc/self/status")
            .unwrap_or_default()
            .contains("Seccomp:");
    let root = Path::new("/sys/fs/cgroup");
    let version = detect(root);
    let cgroup = version.map(|v| match v {
        Version::V2 => "v2".to_string(),
        Version::V1 => "v1".to_string(),
    });
    let cgroup_detail = match version {
        Some(Version::V2) => format!("{}: memory, pids, cpu", root.display()),
        Some(Version::V1) => format!("{}/{{memory,pids,cpu}}", root.display()),
        None => "no cgroup with memory, pids and cpu controllers".into(),
    };
    let overlayfs = std::fs::read_to_string("/proc/filesystems")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split_whitespace().last() == Some("overlay"));
    HostSupport {
        user_namespaces,
        user_namespaces_detail,
        landlock_abi: (abi > 0).then_some(abi),
        seccomp,
        cgroup,
        cgroup_detail,
        overlayfs,
    }
}

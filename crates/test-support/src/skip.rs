//! Prerequisites a test checks first: an engine CLI on PATH, a tool it
//! drives (curl, pip, git), root, a
//! sandbox that can start, a user namespace the user can make, a tmpfs
//! this process can mount. Absent, a test skips
//! with a printed reason locally and fails in CI ([`in_ci`]); and the lock
//! a test holds while it changes the process's environment.

use std::path::{Path, PathBuf};

/// Held by a test while it changes the process's environment (the AWS and
/// Google credential chains read it): one such test at a time in a binary.
/// Children other tests spawn meanwhile inherit what it set, so only
/// variables no other test's job reads may be changed.
pub static PROCESS_ENV: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// True when running in CI, where a missing prerequisite is a failure.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The engine CLI on PATH, or `None` (with a printed reason) when absent
/// locally. In CI an absent engine fails the test.
pub fn engine(name: &str) -> Option<PathBuf> {
    match which::which(name) {
        Ok(p) => Some(p),
        Err(_) if in_ci() => {
            panic!("engine `{name}` is not on PATH in CI (run scripts/install-engines)")
        }
        Err(_) => {
            eprintln!("skipping: engine `{name}` is not on PATH (run scripts/test, which installs the pinned engines)");
            None
        }
    }
}

/// True when `program args` runs and succeeds here (`what`, a tool the
/// test drives: CI installs it); otherwise prints why the test is skipped
/// and returns false locally, and fails in CI.
pub fn program_available(program: &str, args: &[&str], what: &str) -> bool {
    let found = std::process::Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        if in_ci() {
            panic!("{what} is not installed in CI (.ci/run installs it)");
        }
        eprintln!("skipping: {what} is not installed");
    }
    found
}

/// True when `curl` is on PATH ([`program_available`]).
pub fn curl_available() -> bool {
    program_available("curl", &["--version"], "curl")
}

/// True when a job's workspace can be an overlay here (this process is
/// root, as mounting one takes, and the kernel has overlayfs); otherwise
/// prints why and returns false locally, and fails in CI.
pub fn overlay_available() -> bool {
    let why = if !is_root() {
        "mounting a job's overlay needs root"
    } else if !std::fs::read_to_string("/proc/filesystems")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split_whitespace().last() == Some("overlay"))
    {
        "the kernel has no overlayfs"
    } else {
        return true;
    };
    if in_ci() {
        panic!("no overlay workspace in CI: {why}");
    }
    eprintln!("skipping the overlay layout: {why}");
    false
}

/// Whether this process's effective user is root (`/proc/self` is its).
fn is_root() -> bool {
    std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap()) == 0
}

/// True when this process is root, as `needs` (what the test does that
/// takes it) does; otherwise prints why and returns false locally, and
/// fails in CI (which runs the suite as root).
pub fn root_available(needs: &str) -> bool {
    if is_root() {
        return true;
    }
    if in_ci() {
        panic!("not root in CI: {needs} needs root");
    }
    eprintln!("skipping: {needs} needs root");
    false
}

/// True when Paddock's sandbox can start on this host (`paddock doctor`
/// says so); otherwise prints why and returns false locally, and fails in
/// CI.
pub fn sandbox_available() -> bool {
    let out = std::process::Command::new(crate::home::paddock_bin())
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rung = report["rungs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "sandbox")
        .cloned()
        .unwrap();
    if rung["supported"] == true {
        return true;
    }
    let why = rung["detail"].as_str().unwrap_or("?").to_string();
    if in_ci() {
        panic!("the sandbox rung is not available in CI: {why}");
    }
    eprintln!("skipping: the sandbox rung is not available here: {why}");
    false
}

/// True when this process's user, or `as_uid` (by `setpriv`, this
/// process being root), can make a user namespace of its own and map
/// itself to 0 in it (`unshare -r`), as Paddock running as the user counts
/// a directory its job closed; otherwise prints why and returns false
/// locally, and fails in CI.
pub fn user_namespaces_available(as_uid: Option<u32>) -> bool {
    let mut cmd = std::process::Command::new("setpriv");
    if let Some(uid) = as_uid {
        cmd.arg(format!("--reuid={uid}"))
            .arg(format!("--regid={uid}"))
            .arg("--clear-groups");
    }
    cmd.args(["--", "unshare", "-r", "true"]);
    let out = cmd.output().unwrap();
    if out.status.success() {
        return true;
    }
    let why = format!(
        "{} cannot make a user namespace (`unshare -r true`: {}, {})",
        as_uid.map_or("this user".to_string(), |uid| format!("uid {uid}")),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    if in_ci() {
        panic!("unprivileged user namespaces are not available in CI: {why}");
    }
    eprintln!("skipping: {why}");
    false
}

/// A tmpfs of a given size mounted on a directory for a test (a data
/// directory that fills up), unmounted when dropped.
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts it; `None` (with a printed reason locally, a failure in CI)
    /// where this process cannot mount.
    pub fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "paddock-test"])
            .arg(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return Some(Tmpfs(dir.to_path_buf()));
        }
        if in_ci() {
            panic!("cannot mount a tmpfs on {} in CI", dir.display());
        }
        eprintln!("skipping: cannot mount a tmpfs here (needs root)");
        None
    }

    /// Gives it room again (64 MB).
    pub fn grow(&self) {
        let ok = std::process::Command::new("mount")
            .args(["-o", "remount,size=64m"])
            .arg(&self.0)
            .status()
            .unwrap();
        assert!(ok.success());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

//! Which isolation rung a job runs on. `isolation = "auto"` (the default)
//! becomes `sandbox` where this host can start Paddock's sandbox (the same
//! check `paddock doctor` makes: start one running `true`) and `process`
//! elsewhere, with the reason carried to a `policy` event. An explicit
//! `sandbox` on a host that cannot start one refuses the job, naming what
//! failed (fail closed); `process` needs no check.

use std::path::Path;
use std::process::Stdio;
use std::sync::OnceLock;

use paddock_protocol::Isolation;
use paddock_sandbox::{launch, Limits, NetMode, Policy};

/// The rung a job runs on, and why it is not the sandbox when `auto` fell
/// back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub isolation: Isolation,
    pub fallback: Option<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RungError {
    #[error(
        "isolation = \"sandbox\": this host cannot start Paddock's sandbox: {why} \
         (`paddock doctor` shows what is missing; `isolation = \"process\"` runs unconfined)"
    )]
    SandboxUnavailable { why: String },
}

/// Resolves `requested` with `probe` (None when a sandbox starts, else the
/// reason it does not); the probe runs only when the answer depends on it.
pub fn resolve(
    requested: Isolation,
    probe: impl FnOnce() -> Option<String>,
) -> Result<Resolved, RungError> {
    let isolation = |isolation, fallback| Resolved {
        isolation,
        fallback,
    };
    match requested {
        Isolation::Process => Ok(isolation(Isolation::Process, None)),
        Isolation::Sandbox => match probe() {
            None => Ok(isolation(Isolation::Sandbox, None)),
            Some(why) => Err(RungError::SandboxUnavailable { why }),
        },
        Isolation::Auto => match probe() {
            None => Ok(isolation(Isolation::Sandbox, None)),
            Some(why) => Ok(isolation(
                Isolation::Process,
                Some(format!(
                    "isolation auto: running on the `process` rung (unconfined) because this \
                     host cannot start Paddock's sandbox: {why}"
                )),
            )),
        },
    }
}

/// Starts a minimal sandbox with the helper `exe` (the `paddock` binary);
/// None when it works, else the helper's error.
pub fn probe_sandbox(exe: &Path) -> Option<String> {
    let policy = Policy {
        argv: vec!["true".into()],
        env: vec![],
        cwd: "/".into(),
        ro: vec![],
        rw: vec![],
        protect: vec![],
        hidden: Vec::new(),
        tmp_mb: 1,
        net: NetMode::None,
        limits: Limits::default(),
        allow_without_cgroups: false,
        timeout_secs: Some(10),
        cgroup_root: None,
        name: "doctor".into(),
    };
    let mut cmd = match launch::command(exe, &policy) {
        Ok(c) => c,
        Err(e) => return Some(e.to_string()),
    };
    match cmd.stdin(Stdio::null()).stdout(Stdio::null()).output() {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(String::from_utf8_lossy(&out.stderr).trim().to_string()),
        Err(e) => Some(format!("start the helper: {e}")),
    }
}

/// [`resolve`] against this host (`exe` the sandbox helper); the sandbox
/// is started once per process.
pub async fn for_host(requested: Isolation, exe: &Path) -> Result<Resolved, RungError> {
    static PROBE: OnceLock<Option<String>> = OnceLock::new();
    if requested == Isolation::Process {
        return resolve(requested, || None);
    }
    let answer = match PROBE.get() {
        Some(a) => a.clone(),
        None => {
            let exe = exe.to_path_buf();
            let a = tokio::task::spawn_blocking(move || probe_sandbox(&exe))
                .await
                .unwrap_or_else(|e| Some(format!("the sandbox probe did not finish: {e}")));
            PROBE.get_or_init(|| a).clone()
        }
    };
    resolve(requested, || answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_probe() -> Option<String> {
        unreachable!("process needs no probe")
    }

    #[test]
    fn process_is_never_probed() {
        assert_eq!(
            resolve(Isolation::Process, no_probe),
            Ok(Resolved {
                isolation: Isolation::Process,
                fallback: None
            })
        );
    }

    #[test]
    fn auto_is_the_sandbox_where_one_starts() {
        assert_eq!(
            resolve(Isolation::Auto, || None),
            Ok(Resolved {
                isolation: Isolation::Sandbox,
                fallback: None
            })
        );
    }

    #[test]
    fn auto_falls_back_to_process_and_says_why() {
        assert_eq!(
            resolve(Isolation::Auto, || Some("Landlock: not supported".into())),
            Ok(Resolved {
                isolation: Isolation::Process,
                fallback: Some(
                    "isolation auto: running on the `process` rung (unconfined) because this \
                     host cannot start Paddock's sandbox: Landlock: not supported"
                        .into()
                ),
            })
        );
    }

    #[test]
    fn an_explicit_sandbox_fails_closed_naming_what_is_missing() {
        let err = resolve(Isolation::Sandbox, || {
            Some("unshare the user namespaces: EPERM".into())
        })
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "isolation = \"sandbox\": this host cannot start Paddock's sandbox: unshare the user \
             namespaces: EPERM (`paddock doctor` shows what is missing; `isolation = \"process\"` \
             runs unconfined)"
        );
    }

    #[test]
    fn an_explicit_sandbox_where_one_starts() {
        assert_eq!(
            resolve(Isolation::Sandbox, || None),
            Ok(Resolved {
                isolation: Isolation::Sandbox,
                fallback: None
            })
        );
    }
}

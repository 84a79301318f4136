//! The caller's side: turns a [`Policy`] into the command that starts the
//! helper (the `paddock` binary re-executed with [`INIT_ARG`]) with an
//! empty environment but for the policy, and resolves `--env` allowlist
//! entries against the caller's environment.

use std::path::Path;
use std::process::Command;

pub use crate::init::{INIT_ARG, POLICY_VAR};
use crate::policy::Policy;

/// The helper's command line. `helper` is normally `/proc/self/exe` of a
/// `paddock` binary. Its stdio is the caller's to choose.
pub fn command(helper: &Path, policy: &Policy) -> Result<Command, serde_json::Error> {
    let json = serde_json::to_string(policy)?;
    let mut cmd = Command::new(helper);
    cmd.arg(INIT_ARG).env_clear().env(POLICY_VAR, json);
    Ok(cmd)
}

/// Resolves allowlist entries: `NAME=VALUE` sets a value, `NAME` copies the
/// caller's value when it has one.
pub fn resolve_env(
    entries: &[String],
    lookup: impl Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for e in entries {
        let (k, v) = match e.split_once('=') {
            Some((k, v)) => (k.to_string(), Some(v.to_string())),
            None => (e.clone(), lookup(e)),
        };
        if let Some(v) = v {
            out.retain(|(name, _)| *name != k);
            out.push((k, v));
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::policy::{Limits, NetMode};

    pub(crate) fn policy() -> Policy {
        Policy {
            argv: vec!["true".into()],
            env: vec![],
            cwd: PathBuf::from("/"),
            ro: vec![],
            rw: vec![],
            protect: vec![],
            hidden: Vec::new(),
            tmp_mb: 64,
            net: NetMode::None,
            direct: None,
            limits: Limits::default(),
            allow_without_cgroups: false,
            notices: None,
            timeout_secs: None,
            cgroup_root: None,
            name: "test".into(),
            started: None,
        }
    }

    #[test]
    fn env_entries_set_copy_and_override() {
        let env = resolve_env(
            &["A=1".into(), "HOME".into(), "MISSING".into(), "A=2".into()],
            |k| (k == "HOME").then(|| "/h".to_string()),
        );
        assert_eq!(
            env,
            vec![
                ("HOME".to_string(), "/h".to_string()),
                ("A".to_string(), "2".to_string())
            ]
        );
    }

    #[test]
    fn the_helper_gets_only_the_policy() {
        let cmd = command(Path::new("/bin/paddock"), &policy()).unwrap();
        let envs: Vec<_> = cmd.get_envs().map(|(k, _)| k.to_os_string()).collect();
        assert_eq!(envs, vec![std::ffi::OsString::from(POLICY_VAR)]);
        assert_eq!(cmd.get_args().collect::<Vec<_>>(), vec![INIT_ARG]);
    }
}

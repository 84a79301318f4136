//! Secrets Paddock learns the names of only after its threads exist (a
//! host profile stored with `paddock profile`, whose `network.credentials`
//! name `env:` variables, is read from the store, which needs the runtime)
//! leave its environment by a re-execution rather than `remove_var`, which
//! is unsound once other threads may read the environment. [`reexec_without`]
//! executes this same program again (same pid, arguments and working
//! directory) with an environment lacking those variables; their values,
//! and a spec read from stdin (which cannot be read twice), go along in a
//! sealed memory file (`memfd_create`, 0600) that only the new image
//! inherits, named by [`HANDOVER_FD`]. The new image, before it starts any
//! thread, [`take`]s them: the values go where [`crate::secret::withdraw_env`]
//! puts a withdrawn variable's (so `env:` resolution finds them), the
//! descriptor is closed, and [`HANDOVER_FD`] leaves the environment. So the
//! variables are in neither the process's environment nor what the kernel
//! shows in `/proc/<pid>/environ` (the new image's environment block never
//! held them), and nothing Paddock starts can inherit them.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::fd::AsFd as _;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The variable naming the handed-over descriptor in the new image.
pub const HANDOVER_FD: &str = "PADDOCK_HANDOVER_FD";

/// The memory file's name (`/proc/self/fd/N` reads `/memfd:NAME (deleted)`),
/// checked before the descriptor is read: a stray [`HANDOVER_FD`] naming
/// another descriptor is refused, not read or closed.
const MEMFD_NAME: &str = "paddock-handover";

/// At most this many bytes are read back.
const MAX_BYTES: u64 = 16 << 20;

/// What goes over: secret values, so its `Debug` shows only the names.
#[derive(Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Handover {
    /// The withdrawn variables' values, by name.
    env: BTreeMap<String, String>,
    /// The spec `paddock run -` read from stdin.
    stdin_spec: Option<String>,
}

impl std::fmt::Debug for Handover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handover")
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("stdin_spec", &self.stdin_spec.as_ref().map(|s| s.len()))
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HandoverError {
    #[error("hand secrets over to a fresh paddock: make its memory file: {source}")]
    Memfd { source: std::io::Error },
    #[error("hand secrets over to a fresh paddock: execute {exe}: {source}")]
    Exec {
        exe: PathBuf,
        source: std::io::Error,
    },
    #[error("{HANDOVER_FD}={value}: not a descriptor this paddock was handed ({why})")]
    NotHandedOver { value: String, why: String },
    #[error("read the secrets handed over in descriptor {fd}: {source}")]
    Read { fd: i32, source: std::io::Error },
    #[error("the secrets handed over in descriptor {fd} do not parse")]
    Parse { fd: i32 },
}

/// The variables of `names` present in this process's environment with a
/// UTF-8 value (what `env:` resolution reads), in order, without repeats.
pub fn present(names: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut found: Vec<String> = names
        .into_iter()
        .filter(|n| std::env::var(n).is_ok())
        .collect();
    found.sort();
    found.dedup();
    found
}

/// Executes this program again without the variables `names` in its
/// environment, handing their values (and `stdin_spec`) over (module
/// text). Returns only when that failed.
pub fn reexec_without(names: &[String], stdin_spec: Option<&str>) -> HandoverError {
    use std::os::unix::process::CommandExt as _;
    let handover = Handover {
        env: names
            .iter()
            .filter_map(|n| Some((n.clone(), std::env::var(n).ok()?)))
            .collect(),
        stdin_spec: stdin_spec.map(str::to_string),
    };
    let fd = match sealed(&handover) {
        Ok(fd) => fd,
        Err(source) => return HandoverError::Memfd { source },
    };
    let exe = PathBuf::from("/proc/self/exe");
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| OsString::from("paddock"));
    let mut cmd = std::process::Command::new(&exe);
    cmd.arg0(arg0).args(args).env_clear();
    for (k, v) in std::env::vars_os() {
        if k == HANDOVER_FD || k.to_str().is_some_and(|k| names.iter().any(|n| n == k)) {
            continue;
        }
        cmd.env(k, v);
    }
    cmd.env(
        HANDOVER_FD,
        std::os::fd::AsRawFd::as_raw_fd(&fd).to_string(),
    );
    // Close-on-exec is cleared on the descriptor only just before the
    // exec, so nothing else this process starts meanwhile inherits it.
    paddock_sandbox::pass_fd::pass_fd(&mut cmd, fd.as_fd());
    let source = cmd.exec();
    HandoverError::Exec { exe, source }
}

/// `handover` as JSON in a sealed memory file, close-on-exec.
fn sealed(handover: &Handover) -> std::io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::{MemfdFlags, SealFlags};
    let text = serde_json::to_vec(handover).map_err(std::io::Error::other)?;
    let fd = rustix::fs::memfd_create(MEMFD_NAME, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
    rustix::fs::fchmod(&fd, rustix::fs::Mode::from_raw_mode(0o600))?;
    let mut bytes = &text[..];
    while !bytes.is_empty() {
        let n = rustix::io::write(&fd, bytes)?;
        bytes = &bytes[n..];
    }
    rustix::fs::fcntl_add_seals(
        &fd,
        SealFlags::SEAL | SealFlags::SHRINK | SealFlags::GROW | SealFlags::WRITE,
    )?;
    Ok(fd)
}

/// In the new image, before any thread starts: takes what
/// [`reexec_without`] handed over (nothing when [`HANDOVER_FD`] is not
/// set): the values withdrawn as [`crate::secret::withdraw_env`] withdraws
/// a variable, the descriptor closed, [`HANDOVER_FD`] removed from the
/// environment. The spec read from stdin, if there was one.
pub fn take() -> Result<Option<String>, HandoverError> {
    use std::io::Read as _;
    let Some(value) = std::env::var_os(HANDOVER_FD) else {
        return Ok(None);
    };
    std::env::remove_var(HANDOVER_FD);
    let shown = value.to_string_lossy().into_owned();
    let refuse = |why: &str| HandoverError::NotHandedOver {
        value: shown.clone(),
        why: why.to_string(),
    };
    let fd: i32 = shown
        .parse()
        .ok()
        .filter(|fd| *fd > 2)
        .ok_or_else(|| refuse("not a number above 2"))?;
    let link = PathBuf::from(format!("/proc/self/fd/{fd}"));
    let target = std::fs::read_link(&link).map_err(|e| refuse(&e.to_string()))?;
    if target.to_string_lossy() != format!("/memfd:{MEMFD_NAME} (deleted)") {
        return Err(refuse("not paddock's memory file"));
    }
    let mut text = Vec::new();
    let read = std::fs::File::open(&link)
        .and_then(|f| f.take(MAX_BYTES).read_to_end(&mut text))
        .map_err(|source| HandoverError::Read { fd, source });
    // Closed whatever the read gave: no child inherits it (it is also
    // close-on-exec since `main`'s first step).
    let _ = nix::unistd::close(fd);
    read?;
    let handover: Handover =
        serde_json::from_slice(&text).map_err(|_| HandoverError::Parse { fd })?;
    for (name, value) in handover.env {
        crate::secret::deposit(&name, value);
    }
    Ok(handover.stdin_spec)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Only variables set (UTF-8) are named, once each, sorted.
    #[test]
    fn present_names_only_what_the_environment_holds() {
        let names = ["PATH", "PADDOCK_SURELY_UNSET_VAR_0192", "PATH"].map(str::to_string);
        assert_eq!(present(names), vec!["PATH".to_string()]);
    }

    /// What is handed over shows names, never values, when printed.
    #[test]
    fn debug_shows_names_not_values() {
        let mut env = BTreeMap::new();
        env.insert("NPM_TOKEN".to_string(), "s3cr3t-value".to_string());
        let shown = format!(
            "{:?}",
            Handover {
                env,
                stdin_spec: Some("spec with s3cr3t-value".into()),
            }
        );
        assert_eq!(
            shown,
            r#"Handover { env: ["NPM_TOKEN"], stdin_spec: Some(22) }"#
        );
    }

    /// The memory file holds the JSON and is sealed against writes.
    #[test]
    fn the_memory_file_is_sealed_json() {
        use std::io::Read as _;
        let mut env = BTreeMap::new();
        env.insert("A".to_string(), "secret".to_string());
        let fd = sealed(&Handover {
            env,
            stdin_spec: Some("spec".into()),
        })
        .unwrap();
        let link = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd));
        let mut text = String::new();
        std::fs::File::open(&link)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(
            (
                text,
                std::fs::read_link(&link).unwrap().display().to_string(),
                rustix::io::write(&fd, b"x").is_err()
            ),
            (
                r#"{"env":{"A":"secret"},"stdin_spec":"spec"}"#.to_string(),
                format!("/memfd:{MEMFD_NAME} (deleted)"),
                true
            )
        );
    }
}

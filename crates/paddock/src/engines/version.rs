//! The engine's version, checked when a job starts: `BINARY --version`
//! (bounded in time, with the engine's PATH and nothing else inherited)
//! against its adapter's [`Pin`]. A mismatch, or a version that cannot be
//! read, is a warning for the job's stream, not a failure: a newer or
//! older engine often works, but it is not what Paddock is tested with.

use std::path::Path;
use std::time::Duration;

use super::Pin;

/// How long `--version` may take (Codex's Node launcher: ~80 ms).
const VERSION_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of the engine's answer quoted in the warning.
const MAX_QUOTED_CHARS: usize = 200;
/// The most of the engine's answer read.
const MAX_ANSWER_BYTES: u64 = 4096;

/// The warning for `binary` when its version is not `pin`'s, or `None`.
pub async fn mismatch(pin: &Pin, binary: &Path, path_env: &str) -> Option<String> {
    let said = match ask(binary, path_env).await {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out);
            let first = text.lines().next().unwrap_or_default().trim();
            if pin.matches(first) {
                return None;
            }
            format!(
                "is `{}`",
                first.chars().take(MAX_QUOTED_CHARS).collect::<String>()
            )
        }
        Err(Asked::Start(e)) => format!("cannot tell its version ({e})"),
        Err(Asked::Late) => format!(
            "did not answer `--version` within {} s",
            VERSION_TIMEOUT.as_secs()
        ),
    };
    Some(format!(
        "{} {said}; Paddock is tested with {} {}: {}",
        binary.display(),
        pin.package,
        pin.version,
        pin.install_hint()
    ))
}

/// Why `--version` gave no answer.
enum Asked {
    Start(std::io::Error),
    Late,
}

/// `BINARY --version`'s standard output (at most [`MAX_ANSWER_BYTES`]),
/// run in a process group of its own that is killed whatever it did: an
/// engine (or a wrapper script) that leaves a process behind, or does not
/// answer in time, leaves nothing running once the check is over.
async fn ask(binary: &Path, path_env: &str) -> Result<Vec<u8>, Asked> {
    use tokio::io::AsyncReadExt as _;
    let mut child = tokio::process::Command::new(binary)
        .arg("--version")
        .env_clear()
        .env("PATH", path_env)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(Asked::Start)?;
    let group = child.id().and_then(|p| i32::try_from(p).ok());
    let read = async {
        let mut out = Vec::new();
        if let Some(stdout) = child.stdout.take() {
            // The first line is all that is read; a bounded read returns
            // at the engine's exit or at the cap, not when every
            // descendant holding the pipe has gone.
            let mut limited = stdout.take(MAX_ANSWER_BYTES);
            let mut buf = [0u8; 1024];
            loop {
                match limited.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        out.extend_from_slice(&buf[..n]);
                        if out.contains(&b'\n') {
                            break;
                        }
                    }
                }
            }
        }
        out
    };
    let answer = tokio::time::timeout(VERSION_TIMEOUT, read).await;
    if let Some(pgid) = group {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pgid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let _ = child.kill().await;
    answer.map_err(|_| Asked::Late)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const PIN: Pin = Pin {
        binary: "eng",
        package: "@x/eng",
        version: "1.2.3",
    };

    fn engine(dir: &Path, answer: &str) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt as _;
        let bin = dir.join("eng");
        std::fs::write(&bin, format!("#!/bin/sh\necho '{answer}'\n")).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        bin
    }

    #[tokio::test]
    async fn a_mismatch_is_a_warning_naming_the_pin() {
        let dir = tempfile::tempdir().unwrap();
        let bin = engine(dir.path(), "eng 1.2.3");
        assert_eq!(mismatch(&PIN, &bin, "/usr/bin:/bin").await, None);
        let bin = engine(dir.path(), "eng 1.2.4 (beta)");
        assert_eq!(
            mismatch(&PIN, &bin, "/usr/bin:/bin").await,
            Some(format!(
                "{} is `eng 1.2.4 (beta)`; Paddock is tested with @x/eng 1.2.3: {}",
                bin.display(),
                PIN.install_hint()
            ))
        );
    }

    /// A version check leaves nothing of the engine running, whether it
    /// answers (and leaves a child behind holding its output) or hangs.
    #[tokio::test]
    async fn the_check_leaves_no_process_behind() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("child.pid");
        let bin = dir.path().join("eng");
        for body in ["echo 'eng 1.2.3'", "sleep 30"] {
            std::fs::write(
                &bin,
                format!(
                    "#!/bin/sh\nsleep 60 &\necho $! > {}\n{body}\n",
                    pidfile.display()
                ),
            )
            .unwrap();
            std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
            let _ = tokio::time::timeout(
                Duration::from_secs(30),
                mismatch(&PIN, &bin, "/usr/bin:/bin"),
            )
            .await
            .unwrap();
            tokio::time::sleep(Duration::from_millis(300)).await;
            let pid = std::fs::read_to_string(&pidfile).unwrap();
            let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()));
            // Gone, or a zombie waiting for init: not running.
            let running = stat.is_ok_and(|s| !s.contains(") Z "));
            assert!(!running, "{body}: a child of the check outlived it");
        }
    }
}

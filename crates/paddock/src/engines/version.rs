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

/// The warning for `binary` when its version is not `pin`'s, or `None`.
pub async fn mismatch(pin: &Pin, binary: &Path, path_env: &str) -> Option<String> {
    let run = tokio::process::Command::new(binary)
        .arg("--version")
        .env_clear()
        .env("PATH", path_env)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let said = match tokio::time::timeout(VERSION_TIMEOUT, run).await {
        Ok(Ok(out)) => {
            let text = String::from_utf8_lossy(&out.stdout);
            let first = text.lines().next().unwrap_or_default().trim();
            if pin.matches(first) {
                return None;
            }
            format!(
                "is `{}`",
                first.chars().take(MAX_QUOTED_CHARS).collect::<String>()
            )
        }
        Ok(Err(e)) => format!("cannot tell its version ({e})"),
        Err(_) => format!(
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
}

//! The engine's version, checked when a job starts: `BINARY --version`
//! (bounded in time, with the engine's PATH and nothing else inherited)
//! against its adapter's [`Pin`]. A mismatch, or a version that cannot be
//! read, is a warning for the job's stream, not a failure: a newer or
//! older engine often works, but it is not what Paddock is tested with.
//!
//! The check runs on the host, outside any job's rung, so it runs the
//! host's engine binary only: in an empty directory of its own (removed
//! afterwards), never the caller's or a workspace, with nothing but the
//! engine's PATH in its environment. A binary's answer is remembered by the
//! binary's identity (path, device, inode, size, modification and change
//! times, the pin) for the life of the process, so a server running many
//! jobs asks once per installed engine, and a replaced binary is asked
//! again; and, when the caller names a file for it (Paddock's own, under
//! the jobs directory), across processes too, so `paddock run` does not
//! start the engine once more per job to ask (issue #14). The file holds
//! only answers keyed by identity: a changed binary misses it, a broken or
//! missing file is asked around, never trusted for anything else.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use super::Pin;

/// How long `--version` may take (Codex's Node launcher: ~80 ms).
const VERSION_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of the engine's answer quoted in the warning.
const MAX_QUOTED_CHARS: usize = 200;
/// The most of the engine's answer read.
const MAX_ANSWER_BYTES: u64 = 4096;

/// What identifies one installed binary: a replaced or rewritten file
/// differs in at least one of these.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Identity {
    path: PathBuf,
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: (i64, i64),
    ctime_ns: (i64, i64),
    pin: &'static str,
}

impl Identity {
    fn of(binary: &Path, pin: &Pin) -> Option<Self> {
        let meta = std::fs::metadata(binary).ok()?;
        Some(Self {
            path: binary.to_path_buf(),
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: (meta.mtime(), meta.mtime_nsec()),
            ctime_ns: (meta.ctime(), meta.ctime_nsec()),
            pin: pin.version,
        })
    }
}

/// Answers already read, by binary identity: `None` when the version is
/// the pin's, else the warning.
fn answers() -> &'static Mutex<HashMap<Identity, Option<String>>> {
    static ANSWERS: OnceLock<Mutex<HashMap<Identity, Option<String>>>> = OnceLock::new();
    ANSWERS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The answers file's name under the jobs directory (Paddock's state,
/// beside `.leases` and `.mirrors`; never in a job's view).
pub const REMEMBERED: &str = ".engine-versions.json";

/// The most answers the file of [`mismatch`] keeps (a host has a few
/// engines; past this it starts again).
const MAX_REMEMBERED: usize = 32;

impl Identity {
    /// The identity as the key of the answers file.
    fn key(&self) -> String {
        format!(
            "{}\0{}\0{}\0{}\0{}.{}\0{}.{}\0{}",
            self.path.display(),
            self.dev,
            self.ino,
            self.size,
            self.mtime_ns.0,
            self.mtime_ns.1,
            self.ctime_ns.0,
            self.ctime_ns.1,
            self.pin
        )
    }
}

/// The answers file's content: identity key → the warning (`None`: the pin).
type Remembered = HashMap<String, Option<String>>;

/// The most of the answers file read: [`MAX_REMEMBERED`] answers of a
/// short warning each fit many times over.
const MAX_REMEMBERED_BYTES: u64 = 1 << 20;

/// The answers in `file`, read as a file the job can write (no link
/// followed, no FIFO waited on, bounded: `own_file::read_from`): the file lies in
/// the jobs directory, which a `process`-rung job (Paddock's own user)
/// reaches, and a FIFO there held every later job's version check for
/// ever. None when it is anything but a regular file of JSON.
fn read_remembered(file: &Path) -> Remembered {
    let bytes = crate::own_file::read_from(file, 0, MAX_REMEMBERED_BYTES);
    serde_json::from_slice(&bytes).unwrap_or_default()
}

/// Adds one answer to `file` (written whole to a temporary name, then
/// renamed: a reader sees the old file or the new one). Best effort: a
/// file that cannot be written only means asking again next time.
fn remember(file: &Path, key: String, warning: Option<String>) {
    let mut known = read_remembered(file);
    if known.len() >= MAX_REMEMBERED {
        known.clear();
    }
    known.insert(key, warning);
    let Ok(text) = serde_json::to_vec(&known) else {
        return;
    };
    let Some(dir) = file.parent() else {
        return;
    };
    let _ = std::fs::create_dir_all(dir);
    let Ok(mut tmp) = tempfile::NamedTempFile::new_in(dir) else {
        return;
    };
    if std::io::Write::write_all(&mut tmp, &text).is_ok() {
        let _ = tmp.persist(file);
    }
}

/// The warning for `binary` when its version is not `pin`'s, or `None`.
/// A binary that answered before (same identity) is not run again: in
/// this process, and through `remembered` (a file of Paddock's) in any.
pub async fn mismatch(
    pin: &Pin,
    binary: &Path,
    path_env: &str,
    remembered: Option<&Path>,
) -> Option<String> {
    let identity = Identity::of(binary, pin);
    if let Some(id) = &identity {
        if let Some(known) = answers().lock().ok().and_then(|m| m.get(id).cloned()) {
            return known;
        }
        if let Some(known) = remembered.and_then(|f| read_remembered(f).remove(&id.key())) {
            if let Ok(mut m) = answers().lock() {
                m.insert(id.clone(), known.clone());
            }
            return known;
        }
    }
    let (warning, definite) = check(pin, binary, path_env).await;
    if let (Some(id), true) = (identity, definite) {
        if let Some(file) = remembered {
            remember(file, id.key(), warning.clone());
        }
        if let Ok(mut m) = answers().lock() {
            m.insert(id, warning.clone());
        }
    }
    warning
}

/// The warning, and whether the answer is the binary's own (worth
/// remembering) rather than a failure to ask (a start error, a timeout).
async fn check(pin: &Pin, binary: &Path, path_env: &str) -> (Option<String>, bool) {
    let said = match ask(binary, path_env).await {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out);
            let first = text.lines().next().unwrap_or_default().trim();
            if pin.matches(first) {
                return (None, true);
            }
            let said = format!(
                "is `{}`",
                first.chars().take(MAX_QUOTED_CHARS).collect::<String>()
            );
            return (Some(warning(pin, binary, &said)), true);
        }
        Err(Asked::Start(e)) => format!("cannot tell its version ({e})"),
        Err(Asked::Late) => format!(
            "did not answer `--version` within {} s",
            VERSION_TIMEOUT.as_secs()
        ),
    };
    (Some(warning(pin, binary, &said)), false)
}

fn warning(pin: &Pin, binary: &Path, said: &str) -> String {
    format!(
        "{} {said}; Paddock is tested with {} {}: {}",
        binary.display(),
        pin.package,
        pin.version,
        pin.install_hint()
    )
}

/// Why `--version` gave no answer.
enum Asked {
    Start(std::io::Error),
    Late,
}

impl From<std::io::Error> for Asked {
    fn from(e: std::io::Error) -> Self {
        Self::Start(e)
    }
}

/// `BINARY --version`'s standard output (at most [`MAX_ANSWER_BYTES`]),
/// run in a process group of its own that is killed whatever it did: an
/// engine (or a wrapper script) that leaves a process behind, or does not
/// answer in time, leaves nothing running once the check is over.
async fn ask(binary: &Path, path_env: &str) -> Result<Vec<u8>, Asked> {
    use tokio::io::AsyncReadExt as _;
    // An empty directory of its own, removed when the check is over:
    // whatever the binary reads or writes relative to it is nobody's.
    let cwd = tempfile::Builder::new()
        .prefix("paddock-version-")
        .tempdir()?;
    let mut child = tokio::process::Command::new(binary)
        .arg("--version")
        .current_dir(cwd.path())
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
    drop(cwd);
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
        let bin = dir.join("eng");
        paddock_test_support::script::write_script(&bin, &format!("#!/bin/sh\necho '{answer}'\n"));
        bin
    }

    #[tokio::test]
    async fn a_mismatch_is_a_warning_naming_the_pin() {
        let dir = tempfile::tempdir().unwrap();
        let bin = engine(dir.path(), "eng 1.2.3");
        assert_eq!(mismatch(&PIN, &bin, "/usr/bin:/bin", None).await, None);
        let bin = engine(dir.path(), "eng 1.2.4 (beta)");
        assert_eq!(
            mismatch(&PIN, &bin, "/usr/bin:/bin", None).await,
            Some(format!(
                "{} is `eng 1.2.4 (beta)`; Paddock is tested with @x/eng 1.2.3: {}",
                bin.display(),
                PIN.install_hint()
            ))
        );
    }

    /// The check runs the binary in an empty directory of its own, gone
    /// afterwards, not in the caller's working directory.
    #[tokio::test]
    async fn the_check_runs_in_an_empty_directory_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let seen = dir.path().join("seen");
        let bin = engine_script(
            dir.path(),
            &format!(
                "pwd > {0}\nls -A >> {0}\ntouch planted\necho 'eng 1.2.3'",
                seen.display()
            ),
        );
        assert_eq!(mismatch(&PIN, &bin, "/usr/bin:/bin", None).await, None);
        let seen = std::fs::read_to_string(&seen).unwrap();
        let cwd = seen.lines().next().unwrap();
        assert_eq!(seen, format!("{cwd}\n"), "the directory was not empty");
        assert_ne!(
            Path::new(cwd),
            std::env::current_dir().unwrap(),
            "ran in the caller's directory"
        );
        assert!(!Path::new(cwd).exists(), "its directory was left behind");
    }

    /// An unchanged binary is asked once; a replaced one again.
    #[tokio::test]
    async fn an_unchanged_binary_is_asked_once() {
        let dir = tempfile::tempdir().unwrap();
        let count = dir.path().join("count");
        let body = format!("echo x >> {}\necho 'eng 1.2.3'", count.display());
        let bin = engine_script(dir.path(), &body);
        let asked = || std::fs::read_to_string(&count).unwrap().lines().count();
        assert_eq!(mismatch(&PIN, &bin, "/usr/bin:/bin", None).await, None);
        assert_eq!(mismatch(&PIN, &bin, "/usr/bin:/bin", None).await, None);
        assert_eq!(asked(), 1);
        // Replaced (a new inode and change time): asked again, answer new.
        std::fs::remove_file(&bin).unwrap();
        let bin = engine_script(
            dir.path(),
            &format!("echo x >> {}\necho 'eng 9.9.9'", count.display()),
        );
        assert!(mismatch(&PIN, &bin, "/usr/bin:/bin", None).await.is_some());
        assert_eq!(asked(), 2);
    }

    fn engine_script(dir: &Path, body: &str) -> std::path::PathBuf {
        let bin = dir.join("eng");
        paddock_test_support::script::write_script(&bin, &format!("#!/bin/sh\n{body}\n"));
        bin
    }

    /// A version check leaves nothing of the engine running, whether it
    /// answers (and leaves a child behind holding its output) or hangs.
    #[tokio::test]
    async fn the_check_leaves_no_process_behind() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("child.pid");
        let bin = dir.path().join("eng");
        for body in ["echo 'eng 1.2.3'", "sleep 30"] {
            paddock_test_support::script::write_script(
                &bin,
                &format!(
                    "#!/bin/sh\nsleep 60 &\necho $! > {}\n{body}\n",
                    pidfile.display()
                ),
            );
            let _ = tokio::time::timeout(
                Duration::from_secs(30),
                mismatch(&PIN, &bin, "/usr/bin:/bin", None),
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

    /// Another process's answer, from the answers file: an unchanged
    /// binary is not asked again, a replaced one is, and a broken file is
    /// asked around.
    #[tokio::test]
    async fn the_answers_file_spares_the_question_across_processes() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("state/engine-versions.json");
        let count = dir.path().join("count");
        let body = format!("echo x >> {}\necho 'eng 1.2.3'", count.display());
        let bin = engine_script(dir.path(), &body);
        let asked = || std::fs::read_to_string(&count).unwrap().lines().count();
        // What another process would not have: this one's memory.
        let forget = |bin: &Path| {
            let id = Identity::of(bin, &PIN).unwrap();
            answers().lock().unwrap().remove(&id);
        };
        assert_eq!(
            mismatch(&PIN, &bin, "/usr/bin:/bin", Some(&file)).await,
            None
        );
        forget(&bin);
        assert_eq!(
            mismatch(&PIN, &bin, "/usr/bin:/bin", Some(&file)).await,
            None
        );
        assert_eq!(asked(), 1);
        // Replaced: asked again, the new answer remembered in the file.
        std::fs::remove_file(&bin).unwrap();
        let bin = engine_script(
            dir.path(),
            &format!("echo x >> {}\necho 'eng 9.9.9'", count.display()),
        );
        let warning = mismatch(&PIN, &bin, "/usr/bin:/bin", Some(&file)).await;
        assert!(warning.is_some());
        assert_eq!(asked(), 2);
        forget(&bin);
        assert_eq!(
            mismatch(&PIN, &bin, "/usr/bin:/bin", Some(&file)).await,
            warning
        );
        assert_eq!(asked(), 2);
        // A broken file: asked again, and the file made whole.
        std::fs::write(&file, b"{not json").unwrap();
        forget(&bin);
        assert_eq!(
            mismatch(&PIN, &bin, "/usr/bin:/bin", Some(&file)).await,
            warning
        );
        assert_eq!(asked(), 3);
        assert_eq!(read_remembered(&file).len(), 1);
    }

    /// The answers file is read only as a regular file: a link to a file
    /// of answers is not taken, a FIFO no one writes is refused at once
    /// (was: the version check, and every job's start, waited on it for
    /// ever).
    #[test]
    fn a_planted_answers_file_is_neither_followed_nor_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        std::fs::write(&real, br#"{"k":null}"#).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link.json")).unwrap();
        nix::unistd::mkfifo(&dir.path().join("fifo.json"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let d = dir.path().to_path_buf();
        std::thread::spawn(move || {
            tx.send(
                ["real.json", "link.json", "fifo.json"].map(|n| read_remembered(&d.join(n)).len()),
            )
        });
        assert_eq!(
            rx.recv_timeout(std::time::Duration::from_secs(10)).ok(),
            Some([1, 0, 0])
        );
    }
}

//! Executable files a test writes and then starts (a stand-in engine, a
//! git wrapper put first on PATH, a hook, a fake `gcloud`), written so
//! that starting them cannot fail with `ETXTBSY` ("Text file busy").
//!
//! Linux refuses to exec a file that any process holds open for writing.
//! A test binary is multi-threaded: while one test writes a script with
//! `std::fs::write`, another test's thread may fork (to start git, an
//! engine, the sandbox); the child gets a copy of the writing descriptor
//! and holds it until its own exec (close-on-exec closes it only then),
//! which can be after the writer closed its copy and started the script.
//! Writing a temporary file and renaming it does not help (the same inode,
//! the same inherited descriptor), nor does `O_CLOEXEC` (the standard
//! library sets it already). [`write_script`] writes through a separate
//! process instead: the writing descriptor exists only in that child
//! (`cat`, which forks nothing), and it has exited when the function
//! returns, so no process holds the file open for writing when the test
//! starts it. Every test that writes a file and then runs it uses this.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

/// Writes `text` to `path` as an executable (mode 0755) that can be
/// started at once, whatever other threads of the test process fork (the
/// module's reason).
pub fn write_script(path: &Path, text: &str) {
    write_executable(path, text.as_bytes(), 0o755);
}

/// [`write_script`] with `bytes` and `mode` (the permission bits, octal).
pub fn write_executable(path: &Path, bytes: &[u8], mode: u32) {
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg("cat > \"$1\" && chmod \"$2\" \"$1\"")
        .arg("sh")
        .arg(path)
        .arg(format!("{mode:o}"))
        .stdin(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start /bin/sh to write {}: {e}", path.display()));
    let mut stdin = child.stdin.take().unwrap();
    let written = stdin.write_all(bytes);
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(
        written.is_ok() && status.success(),
        "writing {} failed: {written:?}, {status}",
        path.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt as _;
    use std::os::unix::process::CommandExt as _;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// Scripts written and started one after another while four other
    /// threads fork without pause (through `fork`, not `posix_spawn`: a
    /// uid is set) all start. With `std::fs::write` in place of
    /// [`write_script`], one of them fails with "Text file busy".
    #[test]
    fn scripts_start_while_other_threads_fork() {
        let dir = tempfile::tempdir().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let uid = std::fs::metadata(dir.path()).unwrap().uid();
        let forkers: Vec<_> = (0..4)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let _ = Command::new("/bin/true").uid(uid).status();
                    }
                })
            })
            .collect();
        let mut failed = Vec::new();
        for i in 0..200 {
            let path = dir.path().join(format!("s{i}"));
            write_script(&path, "#!/bin/sh\nexit 0\n");
            match Command::new(&path).status() {
                Ok(s) if s.success() => {}
                other => failed.push(format!("{i}: {other:?}")),
            }
        }
        stop.store(true, Ordering::Relaxed);
        for f in forkers {
            f.join().unwrap();
        }
        assert_eq!(failed, Vec::<String>::new());
    }
}

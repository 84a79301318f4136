//! The helper's notice file (`Policy::notices`, the job's
//! `meta/sandbox-notices`): a line appended for each thing a run goes
//! without (its cgroup caps, accepted as degraded), which Paddock reads
//! back after the command. The file is opened as Paddock opens every file
//! in a place a job may have written (`paddock`'s `own_file.rs`): no link
//! followed (`O_NOFOLLOW`), no wait on a FIFO (`O_NONBLOCK`: one with no
//! reader refuses the open, `ENXIO`), and only a regular file written to
//! (a FIFO with a reader, a device, a socket are refused). Before, the
//! open followed no link but waited on a FIFO: one planted there held the
//! helper, and the job's command with it, at the open for ever.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// Appends `line` and a newline to the regular file `path`, made private
/// (mode 0600) when missing; a link, a FIFO or anything else but a
/// regular file is refused and left as it is.
pub fn append(path: &Path, line: &str) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if !file.metadata()?.file_type().is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    file.write_all(format!("{line}\n").as_bytes())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;
    use std::sync::mpsc;
    use std::time::Duration;

    /// `append(path, "caps")` run in a thread of its own: what it
    /// answered (its error's words), or `Err` when it did not return
    /// within 10 s (it waits on the file).
    fn appended(path: &Path) -> Result<Result<(), String>, &'static str> {
        let (tx, rx) = mpsc::channel();
        let path = path.to_owned();
        std::thread::spawn(move || tx.send(append(&path, "caps").map_err(|e| e.to_string())));
        rx.recv_timeout(Duration::from_secs(10))
            .map_err(|_| "held at the open")
    }

    #[test]
    fn lines_are_appended_to_a_private_file() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("sandbox-notices");
        append(&path, "one").unwrap();
        append(&path, "two").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            (std::fs::read_to_string(&path).unwrap(), mode),
            ("one\ntwo\n".to_string(), 0o600)
        );
    }

    /// A FIFO planted where the notices go, with no reader and with one:
    /// neither holds the helper, neither is written to; a link there is
    /// not followed (the file it names is left as it was).
    #[test]
    fn a_planted_fifo_or_link_is_neither_waited_on_nor_written_through() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("sandbox-notices");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let no_reader = appended(&fifo);
        // A reader that never reads: a blocking writer would fill the pipe
        // or wait; the open is refused as not a regular file.
        let mut reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        let with_reader = appended(&fifo);
        let written = std::io::Read::read(&mut reader, &mut [0u8; 16]).map_err(|e| e.to_string());

        let host = tmp.path().join("host-file");
        std::fs::write(&host, "the host's\n").unwrap();
        let link = tmp.path().join("linked-notices");
        std::os::unix::fs::symlink(&host, &link).unwrap();
        let through_link = appended(&link);
        assert_eq!(
            (
                no_reader,
                with_reader,
                written,
                through_link,
                std::fs::read_to_string(&host).unwrap()
            ),
            (
                Ok(Err("No such device or address (os error 6)".to_string())),
                Ok(Err("not a regular file".to_string())),
                // Nothing in the pipe, its writer gone: end of file.
                Ok(0),
                Ok(Err(
                    "Too many levels of symbolic links (os error 40)".to_string()
                )),
                "the host's\n".to_string()
            )
        );
    }
}

//! Paddock's own files beside a job's (the closeout and the patch in its
//! artifacts directory, the file outbox's pull request and closeout) written only as
//! regular files, opened without following a link or waiting on a FIFO
//! (`O_NOFOLLOW | O_NONBLOCK`): a link planted there (by anyone who can
//! write that directory; a `process`-rung job runs as Paddock's own user)
//! would otherwise have Paddock overwrite whatever file it names.

use std::fs::File;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// The flags of every open here: no link followed, no wait on a FIFO.
pub(super) const NO_LINK: i32 = nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK;

/// `path` opened to be written whole: made (mode 0644) when missing,
/// emptied when there; a link (`ELOOP`), a FIFO or anything else but a
/// regular file is refused and left as it is.
pub(crate) fn open_to_write(path: &Path) -> std::io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(NO_LINK)
        .mode(0o644)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    file.set_len(0)?;
    Ok(file)
}

/// `bytes` written as the whole of `path` ([`open_to_write`]).
pub(crate) fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    open_to_write(path)?.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link is not followed (the file it names keeps its text), a FIFO
    /// with no reader is refused at once instead of waited on, a directory
    /// is refused; a regular file is written whole, a longer one before
    /// cut to the new text.
    #[test]
    fn only_regular_files_are_written_and_no_link_is_followed() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "the host's file\n").unwrap();
        let link = dir.path().join("link.md");
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        let fifo = dir.path().join("fifo.md");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let plain = dir.path().join("closeout.md");
        std::fs::write(&plain, "a much longer text than the new one\n").unwrap();
        let said = |r: std::io::Result<()>| match r {
            Ok(()) => "written".to_string(),
            Err(e) => e.to_string(),
        };
        let eloop = std::io::Error::from_raw_os_error(nix::libc::ELOOP).to_string();
        let enxio = std::io::Error::from_raw_os_error(nix::libc::ENXIO).to_string();
        assert_eq!(
            (
                [
                    said(write(&link, b"x")),
                    said(write(&fifo, b"x")),
                    said(write(dir.path(), b"x")),
                    said(write(&plain, b"new\n")),
                    said(write(&dir.path().join("fresh.md"), b"made\n")),
                ],
                std::fs::read_to_string(&secret).unwrap(),
                std::fs::read_to_string(&plain).unwrap(),
                std::fs::read_to_string(dir.path().join("fresh.md")).unwrap(),
            ),
            (
                [
                    eloop,
                    enxio,
                    std::io::Error::from_raw_os_error(nix::libc::EISDIR).to_string(),
                    "written".to_string(),
                    "written".to_string(),
                ],
                "the host's file\n".to_string(),
                "new\n".to_string(),
                "made\n".to_string(),
            )
        );
    }
}

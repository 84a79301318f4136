//! Paddock's own records in a job's `meta/` directory (the base commit,
//! an overlay's lower layer, the files it extended) read back, by the
//! reaper, `paddock gc`, a server's start, `--keep` and the prune, only as
//! regular files of a bounded length, opened without following a link or
//! waiting on a FIFO (`O_NOFOLLOW | O_NONBLOCK`). A `process`-rung job runs
//! as Paddock's own user and can write there: a FIFO in a record's place
//! held every later reaper pass (and the start of the server that ran it)
//! at its read for ever, a link to `/dev/zero` filled Paddock's memory, a
//! link elsewhere had a host file taken for the record. An absent record
//! stays `NotFound`, which callers read as "none"; anything else in its
//! place is an error naming what was found.

use std::io::{Error, ErrorKind, Read as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// The most of a record naming a path or an object (`base_commit`,
/// `overlay`) read: a path is at most `PATH_MAX` (4096) bytes.
pub(super) const MAX_NAME_RECORD: u64 = 64 * 1024;

/// The text of the record `path`, at most `max` bytes: `NotFound` when
/// absent, `ELOOP` for a link, `InvalidData` for a FIFO, a device, a
/// directory, a record past `max` bytes (never read further) or one not
/// UTF-8.
pub(super) fn read(path: &Path, max: u64) -> std::io::Result<String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(Error::new(ErrorKind::InvalidData, "not a regular file"));
    }
    // Read past `max` by one byte at most: a record growing meanwhile is
    // refused as a long one is.
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(Error::new(
            ErrorKind::InvalidData,
            format!("longer than {max} bytes"),
        ));
    }
    String::from_utf8(bytes).map_err(|_| Error::new(ErrorKind::InvalidData, "not UTF-8"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Only a regular file within the bound is read: a link (to a host
    /// file, to `/dev/zero`), a FIFO no one writes (refused at once, not
    /// waited on), a directory and a longer file are errors; an absent
    /// record is `NotFound`.
    #[test]
    fn only_a_regular_file_within_the_bound_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let host = dir.path().join("host");
        std::fs::write(&host, "the host's file\n").unwrap();
        std::os::unix::fs::symlink(&host, dir.path().join("link")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero")).unwrap();
        nix::unistd::mkfifo(&dir.path().join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        std::fs::create_dir(dir.path().join("dir")).unwrap();
        std::fs::write(dir.path().join("long"), "0123456789").unwrap();
        std::fs::write(dir.path().join("plain"), "012345678\n").unwrap();
        let said = |name: &str| match read(&dir.path().join(name), 10) {
            Ok(text) => format!("read {text:?}"),
            Err(e) => format!("{:?}: {e}", e.kind()),
        };
        let eloop = Error::from_raw_os_error(nix::libc::ELOOP);
        let enoent = Error::from_raw_os_error(nix::libc::ENOENT);
        assert_eq!(
            ["link", "zero", "fifo", "dir", "long", "plain", "absent"].map(said),
            [
                format!("{:?}: {eloop}", eloop.kind()),
                format!("{:?}: {eloop}", eloop.kind()),
                "InvalidData: not a regular file".to_string(),
                "InvalidData: not a regular file".to_string(),
                "read \"0123456789\"".to_string(),
                "read \"012345678\\n\"".to_string(),
                format!("NotFound: {enoent}"),
            ]
        );
        let long = read(&dir.path().join("long"), 9).unwrap_err();
        assert_eq!(
            (long.kind(), long.to_string()),
            (ErrorKind::InvalidData, "longer than 9 bytes".to_string())
        );
    }
}

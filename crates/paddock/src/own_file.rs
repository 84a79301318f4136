//! Paddock's own files in places a job can write, and a job's files Paddock
//! reads: opened without following a link or waiting on a FIFO
//! (`O_NOFOLLOW | O_NONBLOCK`), only as regular files, and read only up to a
//! bound. A `process`-rung job runs as Paddock's own user and can write its
//! job's directory, its artifacts directory, the mirrors and the jobs
//! directory (a process it leaves behind, later too): a link planted where
//! Paddock writes (the closeout, the patch, the outbox's files, a mirror's
//! state) would have Paddock overwrite whatever file it names; a FIFO where
//! Paddock reads (a `meta/` record, a bundle's header, the engines' version
//! answers, a denial record) held every later reaper pass, publish or job at
//! the open for ever; a link to `/dev/zero` filled Paddock's memory; a link
//! elsewhere had a host file taken for Paddock's own record.
//!
//! Locking: [`open_lock`] (a lock file, made when missing, never
//! emptied). Writing: [`open_to_write`], [`write`], [`write_private`], [`replace`]
//! (a record made whole at once: a reader finds the old or the new, a
//! kill mid-way leaves the old). Reading: [`read`] (a record of
//! Paddock's: absent, refused or too long is an error naming what was
//! found) and [`read_from`] (a job's file read as it grows: anything but a
//! regular file reads as nothing).

use std::fs::File;
use std::io::{Error, ErrorKind, Read as _, Seek as _, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// The flags of every open here: no link followed, no wait on a FIFO.
pub(crate) const NO_LINK: i32 = nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK;

/// `path` opened to be written whole: made (mode 0644) when missing,
/// emptied when there; a link (`ELOOP`), a FIFO or anything else but a
/// regular file is refused and left as it is.
pub(crate) fn open_to_write(path: &Path) -> std::io::Result<File> {
    open_with_mode(path, 0o644)
}

/// [`open_to_write`] for a file only Paddock's user may read (a token
/// record): made with mode 0600.
fn open_with_mode(path: &Path, mode: u32) -> std::io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(NO_LINK)
        .mode(mode)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(Error::other("not a regular file"));
    }
    file.set_len(0)?;
    Ok(file)
}

/// `path` opened to be locked (`flock`) as Paddock's lock file: made
/// (mode 0644) when missing, never emptied; a link (`ELOOP`), a FIFO
/// (`ENXIO` with no reader, else refused once open) or anything else but a
/// regular file is refused and left as it is, never waited on nor made
/// through. The locks' directories (the mirrors', the snapshots', the
/// sources', the store's) are ones a `process`-rung job or another user of
/// a shared host directory may write.
pub(crate) fn open_lock(path: &Path) -> std::io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(NO_LINK | nix::libc::O_CLOEXEC)
        .mode(0o644)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(Error::other("not a regular file"));
    }
    Ok(file)
}

/// `bytes` written as the whole of `path` ([`open_to_write`]).
pub(crate) fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    open_to_write(path)?.write_all(bytes)
}

/// `bytes` written as the whole of `path` as [`write`] does, the file made
/// readable by Paddock's user alone (mode 0600) when it is made.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    open_with_mode(path, 0o600)?.write_all(bytes)
}

/// `bytes` made the whole of `path` at once: written to a new file beside
/// it (made with `O_EXCL`, never through a link, mode 0644) and renamed
/// over it, so a reader finds the old text or the new, never a part, and
/// a kill mid-way leaves the old. A link or anything else at `path` is
/// replaced, not followed; the new file is removed when the rename fails.
pub(crate) fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(Error::new(ErrorKind::InvalidInput, "not a file's path"));
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".{}.{nanos}.new", std::process::id()));
    let temp = dir.join(temp_name);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(NO_LINK)
        .mode(0o644)
        .open(&temp)
        .and_then(|mut file| {
            file.write_all(bytes)?;
            file.sync_data()
        })
        .and_then(|()| std::fs::rename(&temp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// Whether `path` is a regular file itself (not a link to one): where a
/// job can write, `Path::exists` would take its link for Paddock's record.
pub(crate) fn is_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file())
}

/// `path` opened to be read: a regular file only (a link is `ELOOP`; a
/// FIFO, a device or a directory `InvalidData`), never waited on.
fn open_to_read(path: &Path) -> std::io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(NO_LINK | nix::libc::O_CLOEXEC)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(Error::new(ErrorKind::InvalidData, "not a regular file"));
    }
    Ok(file)
}

/// The text of the record `path`, at most `max` bytes: `NotFound` when
/// absent, `ELOOP` for a link, `InvalidData` for a FIFO, a device, a
/// directory, a record past `max` bytes (never read further) or one not
/// UTF-8.
pub(crate) fn read(path: &Path, max: u64) -> std::io::Result<String> {
    read_whole(open_to_read(path)?, max)
}

/// [`read`] of a record only this process's user may have written: one
/// owned by another user (planted in a directory shared with them, as a
/// host directory given by `--host-dir` may be) is refused
/// (`PermissionDenied`), as is one that other users may write.
pub(crate) fn read_own(path: &Path, max: u64) -> std::io::Result<String> {
    use std::os::unix::fs::MetadataExt as _;
    let file = open_to_read(path)?;
    let meta = file.metadata()?;
    if meta.uid() != nix::unistd::geteuid().as_raw() || meta.mode() & 0o022 != 0 {
        return Err(Error::new(
            ErrorKind::PermissionDenied,
            format!(
                "owned by uid {} (mode {:o}), not only this user's",
                meta.uid(),
                meta.mode() & 0o7777
            ),
        ));
    }
    read_whole(file, max)
}

/// The text of `file`, at most `max` bytes ([`read`]).
fn read_whole(file: File, max: u64) -> std::io::Result<String> {
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

/// Up to `max` bytes of the file at `path` from `offset`; nothing when it
/// is absent, a link, not a regular file, or unreadable.
pub(crate) fn read_from(path: &Path, offset: u64, max: u64) -> Vec<u8> {
    let Ok(mut file) = open_to_read(path) else {
        return Vec::new();
    };
    match file.metadata() {
        Ok(m) if m.len() > offset => {}
        _ => return Vec::new(),
    }
    let mut out = Vec::new();
    if file.seek(std::io::SeekFrom::Start(offset)).is_err()
        || file.take(max).read_to_end(&mut out).is_err()
    {
        return Vec::new();
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
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

    #[test]
    fn links_fifos_and_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"0123456789").unwrap();
        assert_eq!(read_from(&file, 2, 3), b"234".to_vec());
        assert_eq!(read_from(&file, 20, 3), Vec::<u8>::new());
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_from(&link, 0, 100), Vec::<u8>::new());
        let fifo = dir.path().join("p");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(read_from(&fifo, 0, 100), Vec::<u8>::new());
        assert_eq!(
            read_from(&dir.path().join("absent"), 0, 100),
            Vec::<u8>::new()
        );
    }
}

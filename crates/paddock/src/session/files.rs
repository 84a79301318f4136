//! An engine's session files carried from one attempt to the next: copied
//! out of the job's home into its artifacts once the engine has exited,
//! and into the next attempt's home before its engine starts. The files
//! are the job's writing, hostile input: the home is walked without ever
//! following a link (`workspace::beneath`), only regular files whose names
//! are plain (ASCII letters, digits, `.`, `-`, `_`, not starting with a
//! dot) at the adapter's depth are taken, each at most [`MAX_FILE_BYTES`],
//! at most [`MAX_FILES`] of them and [`MAX_TOTAL_BYTES`] together (what
//! Paddock holds in memory for the copy, and keeps on disk), the walk
//! looking at [`MAX_ENTRIES`] directory entries at most (no directory
//! the job filled is listed whole into memory); they are
//! copied as bytes, never run or
//! interpreted by Paddock, through the caller's `transform` (the job's
//! redaction on the way out: the kept files name no job directory and no
//! secret; the placeholders made the new job's directories on the way
//! in). Writing into the next home creates every
//! directory and file beneath it with `O_NOFOLLOW`/`O_EXCL`, so a link a
//! setup command left there is refused, not written through.

use std::io::{Read as _, Write as _};
use std::os::fd::{AsFd as _, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

use crate::engines::SessionPlace;
use crate::workspace::beneath;

/// The largest session file carried over.
pub const MAX_FILE_BYTES: u64 = 64 << 20;
/// The most session files carried over.
pub const MAX_FILES: usize = 16;
/// The most bytes of session files carried over, all files together: a
/// job's [`MAX_FILES`] files of [`MAX_FILE_BYTES`] would be a GiB held
/// in Paddock's memory at once (then copied by the redaction), per job.
pub const MAX_TOTAL_BYTES: u64 = 128 << 20;
/// The most directory entries the copy looks at under the session's
/// directory, all levels together: a job that filled it with millions of
/// names would have had them all listed into Paddock's memory (a few
/// hundred bytes each) before any file was picked; an engine's session
/// is a few files.
pub const MAX_ENTRIES: usize = 10_000;
/// The directory in a job's artifacts holding its engine's session files.
pub const SAVED_DIR: &str = "engine-session";

#[derive(Debug, thiserror::Error)]
pub enum SessionFilesError {
    #[error("the engine's session directory {dir} under {home}: {source}")]
    OpenPlace {
        home: PathBuf,
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("session file {path} of the job's home: {source}")]
    ReadFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("session file {path} of the job's home is larger than {MAX_FILE_BYTES} bytes")]
    TooLarge { path: PathBuf },
    #[error("the engine's session has more than {MAX_FILES} files under {dir}")]
    TooMany { dir: PathBuf },
    #[error("the engine's session files under {dir} hold more than {MAX_TOTAL_BYTES} bytes")]
    TooMuch { dir: PathBuf },
    #[error("the engine's session directory {dir} holds more than {MAX_ENTRIES} entries")]
    TooManyEntries { dir: PathBuf },
    #[error("saving the session file {path}: {source}")]
    Save {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("reading the saved session files {dir}: {source}")]
    ReadSaved {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("writing the session file {path} into the job's home: {source}")]
    Restore {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A name Paddock carries over: plain ASCII, no dot first, no separator.
fn plain_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name[0] != b'.'
        && name
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

/// Copies the session's files from `home` (where `place` says) into
/// `dest`, keeping their paths below the place's directory; how many were
/// copied (none: the engine left none, or its directory is missing).
pub fn save(
    home: &Path,
    place: &SessionPlace,
    dest: &Path,
    transform: &dyn Fn(Vec<u8>) -> Vec<u8>,
) -> Result<usize, SessionFilesError> {
    let open_err = |source| SessionFilesError::OpenPlace {
        home: home.to_path_buf(),
        dir: place.dir.clone(),
        source,
    };
    let root = beneath::open_root(home).map_err(open_err)?;
    let rel = place.dir.as_os_str().as_encoded_bytes();
    let dir = match beneath::open_beneath(root.as_fd(), rel, OFlags::RDONLY | OFlags::DIRECTORY) {
        Ok(fd) => fd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(open_err(e)),
    };
    let mut found = Vec::new();
    let mut left = MAX_TOTAL_BYTES;
    let mut entries_left = MAX_ENTRIES;
    collect(
        &dir,
        &place.dir,
        PathBuf::new(),
        place,
        (&mut found, &mut left, &mut entries_left),
        home,
    )?;
    let count = found.len();
    if found.is_empty() {
        return Ok(0);
    }
    // Into the job's artifacts, which a `process`-rung job can write: no
    // link there (for `dest`, a directory on the way or the file) is
    // followed, a file there is replaced, never written through.
    let save_err = |path: &Path, source| SessionFilesError::Save {
        path: dest.join(path),
        source,
    };
    std::fs::create_dir_all(dest).map_err(|e| save_err(Path::new(""), e))?;
    let root = beneath::open_root(dest).map_err(|e| save_err(Path::new(""), e))?;
    for (rel, bytes) in found {
        write_beneath(&root, &rel, &transform(bytes), Existing::Replace)
            .map_err(|e| save_err(&rel, e))?;
    }
    Ok(count)
}

/// The session files below `dir` (`rel` below the place), `depth` levels
/// of directories down: at most `left` bytes, looking at at most
/// `entries_left` directory entries.
fn collect(
    dir: &OwnedFd,
    place_dir: &Path,
    rel: PathBuf,
    place: &SessionPlace,
    (found, left, entries_left): (&mut Vec<(PathBuf, Vec<u8>)>, &mut u64, &mut usize),
    home: &Path,
) -> Result<(), SessionFilesError> {
    let shown = home.join(place_dir).join(&rel);
    let read_err = |source| SessionFilesError::ReadFile {
        path: shown.clone(),
        source,
    };
    let level = rel.components().count();
    let Some(mut entries) = beneath::entries_at_most(dir, *entries_left).map_err(read_err)? else {
        return Err(SessionFilesError::TooManyEntries {
            dir: home.join(place_dir),
        });
    };
    *entries_left -= entries.len();
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    for entry in entries {
        if !plain_name(&entry.name) {
            continue;
        }
        let name = String::from_utf8_lossy(&entry.name).into_owned();
        let flags = OFlags::RDONLY | OFlags::NONBLOCK;
        if level < place.depth && entry.file_type == FileType::Directory {
            let sub = beneath::open_beneath(dir.as_fd(), &entry.name, flags | OFlags::DIRECTORY)
                .map_err(read_err)?;
            collect(
                &sub,
                place_dir,
                rel.join(&name),
                place,
                (&mut *found, &mut *left, &mut *entries_left),
                home,
            )?;
        } else if level == place.depth
            && entry.file_type == FileType::RegularFile
            && name.ends_with(&place.suffix)
        {
            if found.len() == MAX_FILES {
                return Err(SessionFilesError::TooMany {
                    dir: home.join(place_dir),
                });
            }
            let fd = beneath::open_beneath(dir.as_fd(), &entry.name, flags).map_err(read_err)?;
            let bytes = match read_regular(fd, &shown.join(&name), *left) {
                Err(SessionFilesError::TooLarge { .. }) if *left < MAX_FILE_BYTES => {
                    return Err(SessionFilesError::TooMuch {
                        dir: home.join(place_dir),
                    })
                }
                read => read?,
            };
            *left -= bytes.len() as u64;
            found.push((rel.join(&name), bytes));
        }
    }
    Ok(())
}

/// The whole regular file `fd` (`path` for messages), at most
/// [`MAX_FILE_BYTES`] and `left` bytes (more: `TooLarge`).
fn read_regular(fd: OwnedFd, path: &Path, left: u64) -> Result<Vec<u8>, SessionFilesError> {
    let limit = MAX_FILE_BYTES.min(left);
    let read_err = |source| SessionFilesError::ReadFile {
        path: path.to_path_buf(),
        source,
    };
    let stat = rustix::fs::fstat(&fd).map_err(|e| read_err(e.into()))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(read_err(std::io::Error::other("not a regular file")));
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > limit {
        return Err(SessionFilesError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    Ok(bytes)
}

/// Copies the files [`save`] kept in `saved` into `home`, where `place`
/// says (the place of the new run: Claude Code's follows the checkout);
/// how many were copied.
pub fn restore(
    saved: &Path,
    home: &Path,
    place: &SessionPlace,
    transform: &dyn Fn(Vec<u8>) -> Vec<u8>,
) -> Result<usize, SessionFilesError> {
    let mut files = Vec::new();
    saved_files(saved, PathBuf::new(), place, &mut files)?;
    let restore_err = |path: &Path, source| SessionFilesError::Restore {
        path: home.join(&place.dir).join(path),
        source,
    };
    let root = beneath::open_root(home).map_err(|e| restore_err(Path::new(""), e))?;
    for rel in &files {
        let target = place.dir.join(rel);
        let bytes = transform(read_saved(&saved.join(rel))?);
        write_beneath(&root, &target, &bytes, Existing::Refuse).map_err(|e| restore_err(rel, e))?;
    }
    Ok(files.len())
}

/// Whether `saved` holds a saved file: a regular file at any depth (at
/// most 8 directories down), no link followed. A directory whose files
/// are gone has nothing to resume from.
pub fn any_saved(saved: &Path) -> bool {
    fn walk(dir: &Path, depth: usize) -> bool {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return false;
        };
        entries.flatten().any(|e| match e.file_type() {
            Ok(t) if t.is_file() => true,
            Ok(t) if t.is_dir() && depth < 8 => walk(&e.path(), depth + 1),
            _ => false,
        })
    }
    std::fs::symlink_metadata(saved).is_ok_and(|m| m.is_dir()) && walk(saved, 0)
}

/// The saved files below `saved` (`rel` below it), as [`collect`] took
/// them: the same depth, names and suffix, no link.
fn saved_files(
    saved: &Path,
    rel: PathBuf,
    place: &SessionPlace,
    files: &mut Vec<PathBuf>,
) -> Result<(), SessionFilesError> {
    let dir = saved.join(&rel);
    let read_err = |source| SessionFilesError::ReadSaved {
        dir: dir.clone(),
        source,
    };
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(read_err)? {
        let entry = entry.map_err(read_err)?;
        names.push((entry.file_name(), entry.file_type().map_err(read_err)?));
    }
    names.sort_by(|a, b| a.0.cmp(&b.0));
    let level = rel.components().count();
    for (name, file_type) in names {
        let Some(text) = name.to_str().filter(|n| plain_name(n.as_bytes())) else {
            continue;
        };
        if level < place.depth && file_type.is_dir() {
            saved_files(saved, rel.join(text), place, files)?;
        } else if level == place.depth && file_type.is_file() && text.ends_with(&place.suffix) {
            if files.len() == MAX_FILES {
                return Err(SessionFilesError::TooMany { dir });
            }
            files.push(rel.join(text));
        }
    }
    Ok(())
}

/// A saved file's bytes, bounded, not through a link.
fn read_saved(path: &Path) -> Result<Vec<u8>, SessionFilesError> {
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| SessionFilesError::ReadSaved {
        dir: path.to_path_buf(),
        source: e.into(),
    })?;
    read_regular(fd, path, MAX_FILE_BYTES)
}

/// What [`write_beneath`] does with an entry already at the file's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Existing {
    /// Fail (`EEXIST`).
    Refuse,
    /// Remove it (a file or a link, never what a link names) first.
    Replace,
}

/// Writes `bytes` as the new file `rel` beneath `root`, creating its
/// directories (0700) and the file (0600) without following any link;
/// an entry at its name is refused or removed first, as `existing` says.
fn write_beneath(
    root: &OwnedFd,
    rel: &Path,
    bytes: &[u8],
    existing: Existing,
) -> std::io::Result<()> {
    let parts: Vec<&std::ffi::OsStr> = rel.iter().collect();
    let Some((file, dirs)) = parts.split_last() else {
        return Err(std::io::Error::other("an empty path"));
    };
    let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut current: Option<OwnedFd> = None;
    for part in dirs {
        let at = current.as_ref().map_or(root.as_fd(), |fd| fd.as_fd());
        match rustix::fs::mkdirat(at, *part, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        current = Some(rustix::fs::openat(at, *part, dir_flags, Mode::empty())?);
    }
    let at = current.as_ref().map_or(root.as_fd(), |fd| fd.as_fd());
    if existing == Existing::Replace {
        match rustix::fs::unlinkat(at, *file, rustix::fs::AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let fd = rustix::fs::openat(
        at,
        *file,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    std::fs::File::from(fd).write_all(bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn same(bytes: Vec<u8>) -> Vec<u8> {
        bytes
    }

    fn codex_place() -> SessionPlace {
        SessionPlace {
            dir: PathBuf::from(".codex/sessions"),
            depth: 3,
            suffix: "-abc.jsonl".into(),
        }
    }

    /// The session's files at the adapter's depth are carried over with
    /// their paths; other sessions, other depths, dotted names and links
    /// are not.
    #[test]
    fn the_sessions_files_go_out_and_back_in_and_nothing_else() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let day = home.join(".codex/sessions/2026/12/01");
        std::fs::create_dir_all(&day).unwrap();
        std::fs::write(day.join("rollout-1-abc.jsonl"), b"{\"a\":1}\n").unwrap();
        std::fs::write(day.join("rollout-1-other.jsonl"), b"other").unwrap();
        std::fs::write(day.join(".rollout-1-abc.jsonl"), b"dotted").unwrap();
        std::fs::write(home.join(".codex/sessions/2026/x-abc.jsonl"), b"shallow").unwrap();
        let secret = tmp.path().join("secret-abc.jsonl");
        std::fs::write(&secret, b"host secret").unwrap();
        std::os::unix::fs::symlink(&secret, day.join("rollout-2-abc.jsonl")).unwrap();
        let saved = tmp.path().join("saved");
        assert_eq!(save(&home, &codex_place(), &saved, &same).unwrap(), 1);
        let next = tmp.path().join("next");
        std::fs::create_dir_all(&next).unwrap();
        assert_eq!(restore(&saved, &next, &codex_place(), &same).unwrap(), 1);
        assert_eq!(
            std::fs::read(next.join(".codex/sessions/2026/12/01/rollout-1-abc.jsonl")).unwrap(),
            b"{\"a\":1}\n".to_vec()
        );
        let mut all = Vec::new();
        walk(&next, &mut all);
        assert_eq!(
            all,
            vec![next.join(".codex/sessions/2026/12/01/rollout-1-abc.jsonl")]
        );
    }

    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }

    /// Links the job put where the files are saved (its artifacts): the
    /// file's name a link to a host file, a directory on the way a link
    /// to a host directory, the saved directory itself a link. None is
    /// written through: the host's files keep their text, a link at the
    /// file's name is replaced by the file, the others refuse the save.
    #[test]
    fn the_save_is_never_written_through_a_link_in_the_artifacts() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let day = home.join(".codex/sessions/2026/12/01");
        std::fs::create_dir_all(&day).unwrap();
        std::fs::write(day.join("rollout-1-abc.jsonl"), b"job text\n").unwrap();
        let host = tmp.path().join("bashrc");
        std::fs::write(&host, b"the host's file\n").unwrap();
        let host_dir = tmp.path().join("host-dir");
        std::fs::create_dir_all(&host_dir).unwrap();
        let rel = "2026/12/01/rollout-1-abc.jsonl";

        let at_file = tmp.path().join("saved-1");
        std::fs::create_dir_all(at_file.join("2026/12/01")).unwrap();
        std::os::unix::fs::symlink(&host, at_file.join(rel)).unwrap();
        let on_the_way = tmp.path().join("saved-2");
        std::fs::create_dir_all(on_the_way.join("2026")).unwrap();
        std::os::unix::fs::symlink(&host_dir, on_the_way.join("2026/12")).unwrap();
        let itself = tmp.path().join("saved-3");
        std::os::unix::fs::symlink(&host_dir, &itself).unwrap();

        let said = |dest: &Path| match save(&home, &codex_place(), dest, &same) {
            Ok(n) => format!("saved {n}"),
            Err(SessionFilesError::Save { source, .. }) => source.to_string(),
            Err(e) => e.to_string(),
        };
        // O_DIRECTORY | O_NOFOLLOW on a link: ENOTDIR.
        let enotdir = std::io::Error::from_raw_os_error(nix::libc::ENOTDIR).to_string();
        let mut in_host_dir = Vec::new();
        let outcome = [said(&at_file), said(&on_the_way), said(&itself)];
        walk(&host_dir, &mut in_host_dir);
        assert_eq!(
            (
                outcome,
                std::fs::read(&host).unwrap(),
                std::fs::symlink_metadata(at_file.join(rel))
                    .unwrap()
                    .is_file(),
                std::fs::read(at_file.join(rel)).unwrap(),
                in_host_dir,
            ),
            (
                ["saved 1".to_string(), enotdir.clone(), enotdir],
                b"the host's file\n".to_vec(),
                true,
                b"job text\n".to_vec(),
                Vec::<PathBuf>::new(),
            )
        );
    }

    /// A directory on the way swapped for a link to the host is refused,
    /// not read through.
    #[test]
    fn a_linked_directory_is_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let outside = tmp.path().join("outside/2026/12/01");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("rollout-1-abc.jsonl"), b"host file").unwrap();
        std::fs::create_dir_all(home.join(".codex")).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("outside"), home.join(".codex/sessions"))
            .unwrap();
        let saved = tmp.path().join("saved");
        let err = save(&home, &codex_place(), &saved, &same).unwrap_err();
        assert!(
            matches!(&err, SessionFilesError::OpenPlace { .. }),
            "{err:?}"
        );
        assert!(!saved.exists());
        // One level further down.
        std::fs::remove_file(home.join(".codex/sessions")).unwrap();
        std::fs::create_dir_all(home.join(".codex/sessions/2026")).unwrap();
        std::os::unix::fs::symlink(
            tmp.path().join("outside/2026/12"),
            home.join(".codex/sessions/2026/12"),
        )
        .unwrap();
        assert_eq!(save(&home, &codex_place(), &saved, &same).unwrap(), 0);
        assert!(!saved.exists());
    }

    /// A home under `dir` whose session place `p/*abc.jsonl` exists.
    fn home_with_place(dir: &Path) -> (PathBuf, SessionPlace) {
        let home = dir.join("home");
        std::fs::create_dir_all(home.join("p")).unwrap();
        let place = SessionPlace {
            dir: PathBuf::from("p"),
            depth: 0,
            suffix: "abc.jsonl".into(),
        };
        (home, place)
    }

    /// A file over the bound is refused whole.
    #[test]
    fn an_oversized_file_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let (home, place) = home_with_place(tmp.path());
        let f = std::fs::File::create(home.join("p/abc.jsonl")).unwrap();
        f.set_len(MAX_FILE_BYTES + 1).unwrap();
        let err = save(&home, &place, &tmp.path().join("saved"), &same).unwrap_err();
        assert!(
            matches!(&err, SessionFilesError::TooLarge { path } if path == &home.join("p/abc.jsonl")),
            "{err:?}"
        );
    }

    /// Files each within the bound but over [`MAX_TOTAL_BYTES`] together
    /// are refused, none saved: a job's 16 files of 64 MiB were a GiB in
    /// Paddock's memory at once.
    #[test]
    fn session_files_over_the_total_bound_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let (home, place) = home_with_place(tmp.path());
        for name in ["1-abc.jsonl", "2-abc.jsonl", "3-abc.jsonl"] {
            let f = std::fs::File::create(home.join("p").join(name)).unwrap();
            f.set_len(MAX_FILE_BYTES - 1).unwrap();
        }
        let saved = tmp.path().join("saved");
        let got = save(&home, &place, &saved, &same).map_err(|e| e.to_string());
        assert_eq!(
            (got, saved.exists()),
            (
                Err(format!(
                    "the engine's session files under {} hold more than {MAX_TOTAL_BYTES} bytes",
                    home.join("p").display()
                )),
                false
            )
        );
    }

    /// Restoring writes through no link the next home holds (a setup
    /// command may have left one) and replaces nothing.
    #[test]
    fn restore_refuses_a_link_in_the_next_home() {
        let tmp = tempfile::tempdir().unwrap();
        let place = SessionPlace {
            dir: PathBuf::from(".claude/projects/slug"),
            depth: 0,
            suffix: "abc.jsonl".into(),
        };
        let saved = tmp.path().join("saved");
        std::fs::create_dir_all(&saved).unwrap();
        std::fs::write(saved.join("abc.jsonl"), b"transcript").unwrap();
        let next = tmp.path().join("next");
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir_all(next.join(".claude")).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, next.join(".claude/projects")).unwrap();
        let err = restore(&saved, &next, &place, &same).unwrap_err();
        assert!(matches!(&err, SessionFilesError::Restore { .. }), "{err:?}");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    }
}

//! The result branch's commit written by Paddock itself into its own git
//! directory (`meta/git`) as a loose object, where a `git commit-tree` was
//! one more process on every job's end, one after the tree's `write-tree`
//! and before the bundle's `pack-objects` (issue #14). The object is what
//! `git commit-tree TREE -p BASE` writes with Paddock's identity (no
//! signature: Paddock's git reads no user config, so no `commit.gpgSign`):
//! `tree`, `parent`, `author` and `committer` lines, a blank line and the
//! message as given, written as a loose object (`loose_object.rs`: named by
//! the hash of the repository's object format, SHA-1, or SHA-256 where the
//! base's name has 64 digits). A message holding a
//! NUL byte is refused, as git refuses it. Nothing here reads what the
//! job wrote: the tree was written by Paddock's git from its own index.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The author and committer of every result commit.
const IDENT: &str = "Paddock <paddock@localhost>";

/// Why a commit could not be written.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    #[error("a NUL byte in the commit message is not allowed")]
    NulInMessage,
    #[error("{what} {name:?} is not an object name")]
    NotAnObjectName { what: &'static str, name: String },
    #[error(transparent)]
    Write(#[from] super::loose_object::LooseObjectError),
}

/// Writes the commit of `tree` on `parent` with `message`, made at `when`
/// (seconds since the epoch, at `offset_secs` east of UTC), into the git
/// directory `git_dir`; its name.
pub(crate) fn write_commit(
    git_dir: &Path,
    tree: &str,
    parent: &str,
    message: &str,
    when: i64,
    offset_secs: i32,
) -> Result<String, CommitError> {
    for (what, name) in [("tree", tree), ("parent", parent)] {
        if !super::is_object_name(name) {
            return Err(CommitError::NotAnObjectName {
                what,
                name: name.to_string(),
            });
        }
    }
    if message.contains('\0') {
        return Err(CommitError::NulInMessage);
    }
    let body = commit_text(tree, parent, message, when, offset_secs);
    Ok(super::loose_object::write(
        git_dir,
        "commit",
        body.as_bytes(),
        parent.len() == 64,
    )?)
}

/// The commit's text, as `git commit-tree` writes it.
fn commit_text(tree: &str, parent: &str, message: &str, when: i64, offset_secs: i32) -> String {
    let date = format!("{when} {}", offset_text(offset_secs));
    format!("tree {tree}\nparent {parent}\nauthor {IDENT} {date}\ncommitter {IDENT} {date}\n\n{message}")
}

/// An offset from UTC as git writes it: `+HHMM` or `-HHMM`.
fn offset_text(offset_secs: i32) -> String {
    let sign = if offset_secs < 0 { '-' } else { '+' };
    let minutes = offset_secs.unsigned_abs() / 60;
    format!("{sign}{:02}{:02}", minutes / 60, minutes % 60)
}

/// The local time zone's offset from UTC now, in seconds (UTC when it
/// cannot be read), as git reads it for a commit's date.
pub(crate) fn local_offset_secs() -> i32 {
    system_zone()
        .unwrap_or(jiff::tz::TimeZone::UTC)
        .to_offset(jiff::Timestamp::now())
        .seconds()
}

/// The system's local time zone as the C library reads it ([`local_zone`]
/// of this process's `TZ` and `TZDIR`); `None` when it cannot be read.
/// Also what the CLI shows times in (`cli/local_time.rs`).
pub fn system_zone() -> Option<jiff::tz::TimeZone> {
    let tz = std::env::var_os("TZ");
    let zoneinfo = std::env::var_os("TZDIR").map_or_else(|| PathBuf::from(ZONEINFO), PathBuf::from);
    local_zone(tz.as_deref(), &zoneinfo, Path::new(LOCALTIME))
}

/// Where the C library finds the system's zone files and its local zone.
const ZONEINFO: &str = "/usr/share/zoneinfo";
const LOCALTIME: &str = "/etc/localtime";

/// The local time zone as the C library (and so git) reads it: `TZ` unset,
/// the zone file `localtime`; `TZ` empty, UTC; else `TZ` (a leading `:`
/// dropped) as a zone file named absolutely or under `zoneinfo`, or as a
/// POSIX rule (`EST5EDT,M3.2.0,M11.1.0`). `None` when none of those reads.
/// Read here, not through jiff's `TimeZone::try_system`, which first lists
/// the whole zone database (some 1,800 files: 3.6 M instructions on the
/// job's end, before its result commit; issue #14) to name the zone, a
/// name a commit's date does not hold.
fn local_zone(tz: Option<&OsStr>, zoneinfo: &Path, localtime: &Path) -> Option<jiff::tz::TimeZone> {
    let file = |path: &Path| {
        let data = std::fs::read(path).ok()?;
        jiff::tz::TimeZone::tzif("localtime", &data).ok()
    };
    let Some(tz) = tz else {
        return file(localtime);
    };
    let tz = tz.to_str()?;
    let tz = tz.strip_prefix(':').unwrap_or(tz);
    if tz.is_empty() {
        return Some(jiff::tz::TimeZone::UTC);
    }
    if tz.starts_with('/') {
        return file(Path::new(tz));
    }
    let named = if tz.split('/').any(|part| part == "..") {
        None
    } else {
        file(&zoneinfo.join(tz))
    };
    named.or_else(|| jiff::tz::TimeZone::posix(tz).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use paddock_test_support::git::git;
    use std::io::Write as _;

    /// A version 1 TZif file of one zone type, `offset` seconds east of
    /// UTC, no transitions: what a zone file under /usr/share/zoneinfo is,
    /// reduced to what a commit's date reads.
    fn tzif(offset: i32) -> Vec<u8> {
        let mut data = b"TZif".to_vec();
        data.extend_from_slice(&[0; 16]);
        // isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
        for count in [0u32, 0, 0, 0, 1, 4] {
            data.extend_from_slice(&count.to_be_bytes());
        }
        data.extend_from_slice(&offset.to_be_bytes());
        data.extend_from_slice(&[0, 0]);
        data.extend_from_slice(b"ZZZ\0");
        data
    }

    fn offset_of(zone: Option<jiff::tz::TimeZone>) -> Option<i32> {
        zone.map(|tz| tz.to_offset(jiff::Timestamp::UNIX_EPOCH).seconds())
    }

    #[test]
    fn the_local_zone_is_read_as_the_c_library_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let zoneinfo = dir.path().join("zoneinfo");
        std::fs::create_dir_all(zoneinfo.join("Asia")).unwrap();
        std::fs::write(zoneinfo.join("Asia/Kolkata"), tzif(19_800)).unwrap();
        let localtime = dir.path().join("localtime");
        std::fs::write(&localtime, tzif(-18_000)).unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, tzif(3_600)).unwrap();
        let abs = format!(":{}", elsewhere.display());
        let zone =
            |tz: Option<&str>| offset_of(local_zone(tz.map(OsStr::new), &zoneinfo, &localtime));
        let cases = [
            (None, Some(-18_000)),
            (Some(""), Some(0)),
            (Some(":"), Some(0)),
            (Some("Asia/Kolkata"), Some(19_800)),
            (Some(":Asia/Kolkata"), Some(19_800)),
            (Some(abs.as_str()), Some(3_600)),
            (Some("XYZ-3"), Some(10_800)),
            (Some("EST5EDT,M3.2.0,M11.1.0"), Some(-18_000)),
            (Some("../zoneinfo/Asia/Kolkata"), None),
            (Some("Nowhere/City"), None),
        ];
        let got: Vec<_> = cases.iter().map(|(tz, _)| (*tz, zone(*tz))).collect();
        let want: Vec<_> = cases.to_vec();
        assert_eq!(got, want);
        // No local zone file: UTC is what the commit then gets.
        let gone = dir.path().join("gone");
        assert_eq!(local_zone(None, &zoneinfo, &gone), None);
    }

    /// On this host, the zone read as the C library does is the one jiff's
    /// system lookup (the one used before, which lists the whole database
    /// first) finds.
    #[test]
    fn the_local_zone_is_the_one_jiffs_system_lookup_finds() {
        let tz = std::env::var_os("TZ");
        let zoneinfo =
            std::env::var_os("TZDIR").map_or_else(|| PathBuf::from(ZONEINFO), PathBuf::from);
        let ours = local_zone(tz.as_deref(), &zoneinfo, Path::new(LOCALTIME))
            .unwrap_or(jiff::tz::TimeZone::UTC);
        let jiffs = jiff::tz::TimeZone::try_system().unwrap_or(jiff::tz::TimeZone::UTC);
        let times = [0i64, 1_700_000_000, 1_720_000_000, 1_800_000_000];
        let offsets = |zone: &jiff::tz::TimeZone| -> Vec<i32> {
            times
                .iter()
                .map(|t| {
                    zone.to_offset(jiff::Timestamp::from_second(*t).unwrap())
                        .seconds()
                })
                .collect()
        };
        assert_eq!(offsets(&ours), offsets(&jiffs));
    }

    /// A repository of `format` with one commit; its git directory, the
    /// commit and its tree.
    fn repo(dir: &Path, format: &str) -> (std::path::PathBuf, String, String) {
        let repo = dir.join(format);
        git(
            dir,
            &[
                "init",
                "-q",
                &format!("--object-format={format}"),
                repo.to_str().unwrap(),
            ],
        );
        std::fs::write(repo.join("a.txt"), "a\n").unwrap();
        git(&repo, &["add", "a.txt"]);
        git(
            &repo,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-q",
                "-m",
                "base",
            ],
        );
        let out = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(args)
                .current_dir(&repo)
                .output()
                .unwrap();
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        };
        let base = out(&["rev-parse", "HEAD"]);
        let tree = out(&["rev-parse", "HEAD^{tree}"]);
        (repo.join(".git"), base, tree)
    }

    /// What `git commit-tree` writes for the same tree, parent, identity,
    /// date and message.
    fn by_git(git_dir: &Path, tree: &str, parent: &str, message: &str, date: &str) -> String {
        let mut child = std::process::Command::new("git")
            .args(["commit-tree", tree, "-p", parent, "-F", "-"])
            .env("GIT_DIR", git_dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "Paddock")
            .env("GIT_AUTHOR_EMAIL", "paddock@localhost")
            .env("GIT_COMMITTER_NAME", "Paddock")
            .env("GIT_COMMITTER_EMAIL", "paddock@localhost")
            .env("GIT_AUTHOR_DATE", date)
            .env("GIT_COMMITTER_DATE", date)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(message.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    #[test]
    fn the_commit_is_the_one_git_commit_tree_writes_in_either_object_format() {
        let dir = tempfile::tempdir().unwrap();
        let message = "T-1: Fix the typo\n\nPaddock job for ticket T-1, attempt 2.\n";
        for (format, offset, date) in [
            ("sha1", 3600 + 30 * 60, "1764720000 +0130"),
            ("sha256", -5 * 3600, "1764720000 -0500"),
        ] {
            let (git_dir, base, tree) = repo(dir.path(), format);
            let ours =
                write_commit(&git_dir, &tree, &base, message, 1_764_720_000, offset).unwrap();
            // Ours first (git's would be found in place otherwise).
            let theirs = by_git(&git_dir, &tree, &base, message, date);
            assert_eq!(ours, theirs, "{format}");
            let check = std::process::Command::new("git")
                .args(["fsck", "--strict", "--no-dangling"])
                .env("GIT_DIR", &git_dir)
                .output()
                .unwrap();
            assert!(check.status.success(), "{format}: {check:?}");
        }
    }

    #[test]
    fn a_large_object_is_one_git_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let (git_dir, base, tree) = repo(dir.path(), "sha1");
        let message = format!("big\n\n{}\n", "x".repeat(200_000));
        let ours = write_commit(&git_dir, &tree, &base, &message, 1_764_720_000, 0).unwrap();
        let shown = std::process::Command::new("git")
            .args(["cat-file", "commit", &ours])
            .env("GIT_DIR", &git_dir)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8(shown.stdout).unwrap(),
            commit_text(&tree, &base, &message, 1_764_720_000, 0)
        );
    }

    #[test]
    fn a_nul_in_the_message_or_a_bad_name_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (git_dir, base, tree) = repo(dir.path(), "sha1");
        let refused = |r: Result<String, CommitError>| r.map_err(|e| e.to_string());
        assert_eq!(
            (
                refused(write_commit(&git_dir, &tree, &base, "a\0b", 0, 0)),
                refused(write_commit(&git_dir, "HEAD", &base, "m", 0, 0)),
            ),
            (
                Err("a NUL byte in the commit message is not allowed".to_string()),
                Err("tree \"HEAD\" is not an object name".to_string()),
            )
        );
    }

    #[test]
    fn offsets_are_written_as_git_writes_them() {
        assert_eq!(
            [0, 3600, -3600, 5 * 3600 + 45 * 60, -(9 * 3600 + 30 * 60)].map(offset_text),
            ["+0000", "+0100", "-0100", "+0545", "-0930"].map(String::from)
        );
    }
}

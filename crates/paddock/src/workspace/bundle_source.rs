//! A URL source that is a git bundle on this host (an absolute path to a
//! regular file that starts with git's bundle signature, which git fetches
//! as a bundle), whose mirror's `git fetch --prune` is left out while
//! neither the bundle's refs nor the mirror changed since the last fetch
//! (issue #14: the fetch and its connectivity check, `rev-list
//! --objects`, were two git processes, about 4 ms, on every such job's
//! provisioning path; the hello job's source is one).
//!
//! What a fetch from a bundle writes into a mirror is decided by the
//! bundle's header (its prerequisites and refs, the lines up to the first
//! empty one) and by the mirror alone: git compares the refs the header
//! advertises with the mirror's and reads the bundle's pack only for
//! objects the mirror lacks. So after a fetch from a header, a second
//! fetch from the same header into the mirror as the first left it
//! writes nothing. After each fetch from a bundle whose mirror then
//! passed its check or was found as its last passing check saw it
//! (`mirror_state.rs`), `paddock-fetched` in the mirror's git directory
//! keeps a digest of the header and of that state; the next job whose
//! bundle's header has that digest, on a mirror still in that very state,
//! takes the fetch as done. The header's digest is SHA-256 of its bytes,
//! which no bundle with other refs can match; anything written to the
//! mirror since (a ref, a pack, a loose object) changes its state. The
//! header is read bounded (`MAX_HEADER`; a longer one, or a file that is
//! no bundle, only means the fetch runs), from a file opened with no FIFO
//! waited on, before and after the fetch: a bundle that changed while git
//! read it (its header, size, inode or change time then differ) is not
//! kept. A `process`-rung job runs as Paddock's user and may write the
//! bundle or the mirror; either change is seen as above (a rewrite of
//! the bundle in place with the same header changes nothing a fetch would
//! do), and the record is read and written as `own_file` reads and writes
//! one (no link followed, bounded). Only a bundle: no other source's refs
//! are known without asking it, which is the fetch itself. Only with
//! overlay workspaces (root): a workspace cloned from the mirror
//! hard-links its files, which (and whose removal) changes their link
//! counts and times, the mirror's state, so each such job fetches.

use std::io::Read as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::Path;

use sha2::{Digest as _, Sha256};

/// The record, in the mirror's git directory (a name git never uses, no
/// part of the mirror's state).
pub(super) const FETCHED: &str = "paddock-fetched";

/// The most of a bundle's header read (a longer header: the fetch runs).
const MAX_HEADER: usize = 1 << 20;

/// The most of the record read back.
const MAX_RECORD: u64 = 4 << 10;

/// A bundle source as read before its fetch: its header's digest and the
/// file's identity then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Bundle {
    digest: String,
    identity: (u64, u64, u64, i64, i64, i64, i64),
}

/// The bundle `url` names, when it is one (an absolute path to a regular
/// file starting with a bundle signature, its header within
/// `MAX_HEADER`); `None` for any other source or when it cannot be read.
pub(super) fn read(url: &str) -> Option<Bundle> {
    let path = Path::new(url);
    if !path.is_absolute() {
        return None;
    }
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    // Read until the header's end (an empty line), not the pack after it.
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 8192];
    let end = loop {
        let n = file.read(&mut chunk).ok()?;
        if n == 0 || bytes.len() + n > MAX_HEADER {
            return None;
        }
        let from = bytes.len().saturating_sub(1);
        bytes.extend_from_slice(&chunk[..n]);
        if let Some(at) = bytes[from..].windows(2).position(|w| w == b"\n\n") {
            break from + at + 2;
        }
    };
    if !(bytes.starts_with(b"# v2 git bundle\n") || bytes.starts_with(b"# v3 git bundle\n")) {
        return None;
    }
    let header = &bytes[..end];
    Some(Bundle {
        digest: hex::encode(Sha256::digest(header)),
        identity: (
            meta.dev(),
            meta.ino(),
            meta.len(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime(),
            meta.ctime_nsec(),
        ),
    })
}

/// Whether the mirror `dir`, in the state whose digest is `state` (the
/// state its last passing check kept), was fetched from `bundle`'s header
/// in that state: a fetch would write nothing.
pub(super) fn fetched_from(dir: &Path, bundle: &Bundle, state: &str) -> bool {
    crate::own_file::read(&dir.join(FETCHED), MAX_RECORD)
        .is_ok_and(|text| text == record(bundle, state))
}

/// Keeps that the mirror `dir`, whose state (as its last passing check
/// kept it) has the digest `state`, was just fetched from `before` (the
/// bundle as read before the fetch), when the bundle reads the same now;
/// otherwise, or when keeping fails, no record stands (the next job
/// fetches).
pub(super) fn keep(dir: &Path, url: &str, before: &Bundle, state: &str) {
    let path = dir.join(FETCHED);
    let kept = read(url).is_some_and(|after| {
        after == *before && crate::own_file::write(&path, record(before, state).as_bytes()).is_ok()
    });
    if !kept {
        forget(dir);
    }
}

/// Drops the record of the mirror `dir` (the fetch about to run, or a
/// fetch from anything but a bundle).
pub(super) fn forget(dir: &Path) {
    let _ = std::fs::remove_file(dir.join(FETCHED));
}

fn record(bundle: &Bundle, state: &str) -> String {
    format!("{}\n{state}\n", bundle.digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bundle is read by its header: the same header in a rewritten
    /// file gives the same digest, other refs another; a file that is no
    /// bundle, a relative path, a directory and a FIFO (not waited on)
    /// are no bundle.
    #[test]
    fn a_bundle_is_told_by_its_header() {
        let tmp = tempfile::tempdir().unwrap();
        let b = tmp.path().join("repo.bundle");
        let head = "# v2 git bundle\ne4821e538c1cf62e4a812391ab24ccb971de4cf5 refs/heads/main\n\n";
        std::fs::write(&b, format!("{head}PACK one")).unwrap();
        let url = b.display().to_string();
        let first = read(&url).unwrap();
        std::fs::write(&b, format!("{head}PACK two, longer")).unwrap();
        let again = read(&url).unwrap();
        assert_eq!(first.digest, again.digest);
        assert_ne!(first, again, "the file's identity changed with it");
        let other = head.replace("refs/heads/main", "refs/heads/next");
        std::fs::write(&b, format!("{other}PACK one")).unwrap();
        assert_ne!(read(&url).unwrap().digest, first.digest);
        std::fs::write(&b, "not a bundle\n\n").unwrap();
        assert_eq!(read(&url), None);
        assert_eq!(read("repo.bundle"), None);
        assert_eq!(read(&tmp.path().display().to_string()), None);
        let fifo = tmp.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(read(&fifo.display().to_string()), None);
    }

    /// The record answers for the header and state it was kept for, not
    /// for another state nor another header; a bundle changed since it
    /// was read before the fetch is not kept; a link planted as the record
    /// is not read through.
    #[test]
    fn the_record_answers_only_for_its_header_and_state() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("mirror.git");
        std::fs::create_dir(&dir).unwrap();
        let b = tmp.path().join("repo.bundle");
        std::fs::write(&b, "# v2 git bundle\n0123 refs/heads/main\n\nPACK").unwrap();
        let url = b.display().to_string();
        let bundle = read(&url).unwrap();
        keep(&dir, &url, &bundle, "s1");
        assert!(fetched_from(&dir, &bundle, "s1"));
        assert!(!fetched_from(&dir, &bundle, "s2"));
        std::fs::write(&b, "# v2 git bundle\n4567 refs/heads/main\n\nPACK").unwrap();
        let changed = read(&url).unwrap();
        assert!(!fetched_from(&dir, &changed, "s1"));
        // Changed between the read before the fetch and the keeping.
        keep(&dir, &url, &bundle, "s1");
        assert!(!dir.join(FETCHED).exists());
        assert!(!fetched_from(&dir, &bundle, "s1"));
        // A link to a matching record is not taken.
        let host = tmp.path().join("host-file");
        std::fs::write(&host, record(&changed, "s1")).unwrap();
        std::os::unix::fs::symlink(&host, dir.join(FETCHED)).unwrap();
        assert!(!fetched_from(&dir, &changed, "s1"));
    }
}

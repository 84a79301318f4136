//! What an overlay workspace's upper layer (`meta/upper`) says the job
//! touched, so that the patch reads only those paths of the merged
//! `work/` instead of every file of the base (`final_tree.rs`). Whatever
//! differs between the merged view and the base's snapshot has an entry in
//! the upper layer at its path or above it: a file or link the job wrote
//! (copied up), a whiteout (a character device 0/0) where it deleted one,
//! a directory holding either. Two kinds of upper directory change more
//! than their own entries: an opaque one (`trusted.overlay.opaque`: the
//! base's directory removed and made again, its old entries hidden) and a
//! renamed one (`trusted.overlay.redirect`: its content is another base
//! directory's); such a directory, or one with any other overlay attribute
//! but the two that only record where a copy came from (`origin`,
//! `impure`, and the layer's `uuid` at its root), is walked whole in the
//! merged view, as is one whose upper entry cannot be read. The upper
//! layer is written by the job (through the mount, or directly on the
//! `process` rung), so it is only ever a list of names to look at: nothing
//! in it is read as content or followed (directories opened beneath the
//! layer's root, no link on the way), names are bytes, and what the patch
//! records is read from the merged view as before; a name it lists that
//! is not there costs a lookup, never a wrong file.

use std::collections::HashSet;
use std::io;
use std::os::fd::{AsFd as _, OwnedFd};
use std::path::Path;

use rustix::fs::OFlags;

use super::beneath;

/// Overlay attributes that only record where a copy came from; any other
/// `trusted.overlay.*` attribute on a directory has it walked whole.
const BENIGN: &[&[u8]] = &[
    b"trusted.overlay.origin",
    b"trusted.overlay.impure",
    b"trusted.overlay.uuid",
];

/// The attribute namespace overlay reads from its layers.
const OVERLAY_XATTRS: &[u8] = b"trusted.overlay.";

/// An overlay workspace's upper layer, opened once.
#[derive(Debug)]
pub(super) struct Upper {
    root: OwnedFd,
}

/// What the upper layer holds for one directory of the merged view.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Listing {
    /// Walk the merged directory whole: it hides or replaces the base's
    /// (opaque, redirected, an unknown overlay attribute), or its upper
    /// entry could not be read.
    Whole,
    /// Only these names of the merged directory can differ from the base;
    /// every other entry is the base's own.
    Names(HashSet<Vec<u8>>),
}

impl Upper {
    /// The upper layer at `path` (itself not a link).
    pub fn open(path: &Path) -> io::Result<Upper> {
        Ok(Upper {
            root: beneath::open_root(path)?,
        })
    }

    /// What the upper layer says about the merged directory `rel` (`/`
    /// separated, empty for the root): an upper directory of more than
    /// `at_most` entries is not listed past them, and is walked whole
    /// (where the walk's own bound, `final_tree::Budget::max_paths`,
    /// stops it), never held by name.
    pub fn listing(&self, rel: &[u8], at_most: usize) -> Listing {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY;
        // Asked only for a directory the upper layer named: gone since
        // (or a link now) is walked whole, as is anything unreadable.
        let Ok(dir) = beneath::open_beneath(self.root.as_fd(), rel, flags) else {
            return Listing::Whole;
        };
        if !plain(&dir) {
            return Listing::Whole;
        }
        match beneath::entries_at_most(&dir, at_most) {
            Ok(Some(entries)) => Listing::Names(entries.into_iter().map(|e| e.name).collect()),
            Ok(None) | Err(_) => Listing::Whole,
        }
    }
}

/// Whether the upper directory `dir` merges with the base's directory of
/// its path as it is: no overlay attribute but the benign ones.
fn plain(dir: &OwnedFd) -> bool {
    let mut list = [0u8; 4096];
    let Ok(len) = rustix::fs::flistxattr(dir, &mut list[..]) else {
        return false;
    };
    list[..len]
        .split(|b| *b == 0)
        .filter(|name| !name.is_empty())
        .all(|name| !name.starts_with(OVERLAY_XATTRS) || BENIGN.contains(&name))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain directory lists its names; one with an overlay attribute
    /// beyond the benign ones (opaque, redirect, one the kernel does not
    /// know yet) is walked whole, as is a path through a link, a
    /// non-directory or a missing one, and one of more entries than the
    /// walk has left to hold.
    #[test]
    fn only_plain_directories_narrow_the_walk() {
        if !crate::workspace::overlay::may_mount() {
            eprintln!("skipping: trusted.* attributes need CAP_SYS_ADMIN");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let up = tmp.path().join("upper");
        for dir in ["plain/sub", "opaque", "redirect", "unknown", "benign"] {
            std::fs::create_dir_all(up.join(dir)).unwrap();
        }
        std::fs::write(up.join("plain/file"), "f").unwrap();
        std::fs::write(up.join("a-file"), "f").unwrap();
        std::os::unix::fs::symlink(tmp.path(), up.join("link")).unwrap();
        let set = |dir: &str, name: &str, value: &[u8]| {
            rustix::fs::setxattr(up.join(dir), name, value, rustix::fs::XattrFlags::empty())
                .unwrap();
        };
        set("opaque", "trusted.overlay.opaque", b"y");
        set("redirect", "trusted.overlay.redirect", b"/plain");
        set("unknown", "trusted.overlay.something-new", b"y");
        set("benign", "trusted.overlay.impure", b"y");
        set("benign", "trusted.overlay.origin", b"\0\x01");
        set("benign", "user.whatever", b"x");
        let upper = Upper::open(&up).unwrap();
        let names =
            |names: &[&str]| Listing::Names(names.iter().map(|n| n.as_bytes().to_vec()).collect());
        let mut got: Vec<(&str, Listing)> = [
            "plain", "opaque", "redirect", "unknown", "benign", "link", "link/x", "a-file",
            "missing",
        ]
        .into_iter()
        .map(|d| (d, upper.listing(d.as_bytes(), usize::MAX)))
        .collect();
        // More entries than asked for: walked whole, not listed past them.
        got.push(("plain, at most 1", upper.listing(b"plain", 1)));
        assert_eq!(
            got,
            vec![
                ("plain", names(&["sub", "file"])),
                ("opaque", Listing::Whole),
                ("redirect", Listing::Whole),
                ("unknown", Listing::Whole),
                ("benign", names(&[])),
                ("link", Listing::Whole),
                ("link/x", Listing::Whole),
                ("a-file", Listing::Whole),
                ("missing", Listing::Whole),
                ("plain, at most 1", Listing::Whole),
            ]
        );
    }
}

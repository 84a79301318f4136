//! The commits a mirror's names resolved to (a job's `base_ref`, read
//! by `git rev-parse` in the mirror), kept while the mirror stays as its
//! last passing check saw it (`mirror_state.rs`), so that the next job on
//! an unchanged mirror takes its base's commit from here instead of
//! starting a git (one process on every URL job's provisioning path, about
//! 4 ms: issue #14). The file (`paddock-names` in the mirror's git
//! directory, a name git never uses, no part of the mirror's state) holds
//! a digest of the state it was written under, then one `<commit> <name>`
//! line per name; it answers only while that digest is the kept state's
//! and the mirror's own state is still that one (anything written to the
//! mirror since, a ref moved by a fetch or by hand, changes the state, and
//! the name is read by git again). A `process`-rung job can write the
//! mirror (as it can write its refs, which git would read): the file is
//! read and written with no link followed, no FIFO waited on, bounded,
//! and only a full object name is taken from it. What a kept name skips is
//! the read of the commit's object: a mirror damaged under an unchanged
//! state is found by the next git that reads it (the snapshot's clone),
//! not by this read.

use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

/// The file, in the mirror's git directory.
pub(super) const NAMES: &str = "paddock-names";

/// The most of the file read back (a longer one answers nothing).
const MAX_BYTES: u64 = 64 << 10;

/// The most names kept (the oldest go first).
const MAX_NAMES: usize = 32;

/// The names of one mirror: answering only when the mirror is as the
/// state `state` (a digest) says, and the file was written under it.
#[derive(Debug, Clone)]
pub(crate) struct Names {
    dir: PathBuf,
    state: Option<String>,
}

impl Names {
    /// The names of the mirror `dir`, which is as its last passing check
    /// saw it, whose state (as kept) is `kept`.
    pub(super) fn unchanged(dir: &Path, kept: &str) -> Names {
        Names {
            dir: dir.to_path_buf(),
            state: Some(hex::encode(Sha256::digest(kept.as_bytes()))),
        }
    }

    /// Names that answer nothing and keep nothing (a mirror just fetched
    /// with changes, or made).
    pub(super) fn none(dir: &Path) -> Names {
        Names {
            dir: dir.to_path_buf(),
            state: None,
        }
    }

    /// The commit `name` resolved to under this state, when kept.
    pub(crate) fn resolved(&self, name: &str) -> Option<String> {
        let state = self.state.as_deref()?;
        let text = crate::own_file::read(&self.dir.join(NAMES), MAX_BYTES).ok()?;
        let (first, rest) = text.split_once('\n')?;
        if first != state {
            return None;
        }
        rest.lines()
            .filter_map(|line| line.split_once(' '))
            .find(|(_, n)| *n == name)
            .map(|(commit, _)| commit.to_string())
            .filter(|commit| super::is_object_name(commit))
    }

    /// Whether a name kept under this state resolved to `commit` (a full
    /// object name): the mirror, as it is, has that commit
    /// (`mirror::holds_unchanged`).
    pub(crate) fn holds(&self, commit: &str) -> bool {
        let Some(state) = self.state.as_deref() else {
            return false;
        };
        let Ok(text) = crate::own_file::read(&self.dir.join(NAMES), MAX_BYTES) else {
            return false;
        };
        let Some((first, rest)) = text.split_once('\n') else {
            return false;
        };
        first == state
            && super::is_object_name(commit)
            && rest
                .lines()
                .filter_map(|line| line.split_once(' '))
                .any(|(kept, _)| kept == commit)
    }

    /// Keeps `name` as resolving to `commit` under this state (with the
    /// names kept under it before); nothing when there is no state, the
    /// name cannot be one line, or the commit is no full object name. A
    /// failure to write only means the next job reads the name with git.
    pub(crate) fn remember(&self, name: &str, commit: &str) {
        let Some(state) = self.state.as_deref() else {
            return;
        };
        if name.is_empty() || name.contains(['\n', '\r', '\0']) || !super::is_object_name(commit) {
            return;
        }
        let path = self.dir.join(NAMES);
        let before = crate::own_file::read(&path, MAX_BYTES).unwrap_or_default();
        let mut kept: Vec<String> = match before.split_once('\n') {
            Some((first, rest)) if first == state => rest
                .lines()
                .filter(|line| line.split_once(' ').is_some_and(|(_, n)| n != name))
                .map(str::to_string)
                .collect(),
            _ => Vec::new(),
        };
        kept.push(format!("{commit} {name}"));
        let skip = kept.len().saturating_sub(MAX_NAMES);
        let mut text = format!("{state}\n");
        for line in &kept[skip..] {
            text.push_str(line);
            text.push('\n');
        }
        if crate::own_file::write(&path, text.as_bytes()).is_err() {
            let _ = std::fs::remove_file(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "e4821e538c1cf62e4a812391ab24ccb971de4cf5";
    const B: &str = "0123456789abcdef0123456789abcdef01234567";

    /// A name kept under a state answers under it, not under another
    /// state nor with no state; a name kept again replaces its commit;
    /// other names stay.
    #[test]
    fn a_name_answers_only_under_the_state_it_was_kept_under() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let one = Names::unchanged(dir, "state one\n");
        one.remember("main", A);
        one.remember("refs/heads/x y", B);
        let first = (one.resolved("main"), one.resolved("refs/heads/x y"));
        one.remember("main", B);
        let again = one.resolved("main");
        let other = Names::unchanged(dir, "state two\n");
        let seen = (
            first,
            again,
            one.resolved("refs/heads/x y"),
            one.resolved("other"),
            other.resolved("main"),
            Names::none(dir).resolved("main"),
        );
        assert_eq!(
            seen,
            (
                (Some(A.to_string()), Some(B.to_string())),
                Some(B.to_string()),
                Some(B.to_string()),
                None,
                None,
                None
            )
        );
        // Written under the other state, the first's names are gone.
        other.remember("dev", A);
        assert_eq!(
            (one.resolved("main"), other.resolved("dev")),
            (None, Some(A.to_string()))
        );
    }

    /// What a job may write there is not taken: a link to a file that
    /// would answer is not followed, a FIFO is not waited on, a line
    /// whose commit is no full object name answers nothing, nor does a
    /// name that spans lines get kept.
    #[test]
    fn a_planted_names_file_is_neither_followed_nor_waited_on_nor_trusted() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("mirror");
        std::fs::create_dir(&dir).unwrap();
        let names = Names::unchanged(&dir, "kept\n");
        names.remember("main", A);
        let good = std::fs::read_to_string(dir.join(NAMES)).unwrap();
        let host = tmp.path().join("host-file");
        std::fs::write(&host, &good).unwrap();
        std::fs::remove_file(dir.join(NAMES)).unwrap();
        std::os::unix::fs::symlink(&host, dir.join(NAMES)).unwrap();
        let through_link = names.resolved("main");
        names.remember("dev", B);
        let host_after = std::fs::read_to_string(&host).unwrap();
        let _ = std::fs::remove_file(dir.join(NAMES));
        nix::unistd::mkfifo(&dir.join(NAMES), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let fifo = names.clone();
        std::thread::spawn(move || tx.send(fifo.resolved("main")));
        let through_fifo = rx.recv_timeout(std::time::Duration::from_secs(10)).ok();
        std::fs::remove_file(dir.join(NAMES)).unwrap();
        let state = good.lines().next().unwrap().to_string();
        std::fs::write(
            dir.join(NAMES),
            format!("{state}\n--upload-pack=x main\nHEAD~1 dev\n"),
        )
        .unwrap();
        let not_names = (names.resolved("main"), names.resolved("dev"));
        names.remember("a\nb", A);
        assert_eq!(
            (
                through_link,
                host_after == good,
                through_fifo,
                not_names,
                names.resolved("a"),
                names.resolved("a\nb")
            ),
            (None, true, Some(None), (None, None), None, None)
        );
    }
}

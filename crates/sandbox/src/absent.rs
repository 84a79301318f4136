//! Protected names that do not exist when a run starts. A read-only bind
//! needs something to cover, so a protected name that is missing in a
//! writable directory (`.bash_login`, `.profile`, `.git/hooks`, ...)
//! would be free for the job to create, and the host would obey it
//! afterwards. Before PID 1 exists, the helper puts a placeholder there,
//! which the view then protects like any existing entry (its mount point
//! cannot be removed, renamed or replaced from inside), and removes it
//! when the run ends. The placeholders are chosen so that one left behind
//! (the helper killed with SIGKILL) is obeyed as absent: a directory for
//! `.git/hooks` (git makes it itself; an empty one holds no hook), and
//! for a file a symbolic link to [`TARGET`], a path that never exists and
//! cannot be created (procfs has no such entry), so a shell reading it
//! finds nothing, as when the name is missing, and writing through it
//! fails. Every directory on the way is opened without following links
//! (`beneath.rs`); the clean-up removes only what still is a placeholder.

use std::ffi::OsString;
use std::os::fd::{AsFd as _, AsRawFd as _, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::AtFlags;
use nix::sys::stat::{fstatat, Mode, SFlag};
use nix::unistd::UnlinkatFlags;

use crate::beneath;
use crate::policy::Policy;

/// Where a file placeholder points: never present, never creatable.
pub const TARGET: &str = "/proc/.paddock-absent";

/// Protected names (relative to their writable path) that are directories.
const DIRECTORIES: &[&str] = &[".git/hooks"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    Link,
}

/// The placeholders this run made; dropping it removes them (the helper
/// drops it once PID 1 is reaped; PID 1 never does, it exits).
#[derive(Debug, Default)]
pub struct Placeholders {
    made: Vec<(PathBuf, OsString, Kind)>,
}

impl Placeholders {
    /// Makes a placeholder for each protected path of `policy` that is
    /// inside one of its writable paths, missing, and whose parent is a
    /// directory reached without a link (a missing or linked parent gets
    /// none: `.git/hooks` where there is no `.git`).
    pub fn make(policy: &Policy) -> Placeholders {
        Placeholders::make_for(&policy.protect, &policy.rw)
    }

    /// The placeholders of the writable directory `dir` alone (its
    /// protected names, [`crate::protected_in`]), made by the host before
    /// the runs in it start and removed when the value is dropped: a run's
    /// helper finds the names there and protects them as they are, and
    /// leaves them. Paddock makes a sandboxed job's work tree's this way,
    /// so that what the job's tree holds does not change when its last
    /// run ends (the early patch's prints, `runner/early_patch.rs`).
    pub fn make_in(dir: &Path) -> Placeholders {
        Placeholders::make_for(&crate::protected_in(dir), &[dir.to_path_buf()])
    }

    fn make_for(protect: &[PathBuf], rw: &[PathBuf]) -> Placeholders {
        let mut out = Placeholders::default();
        for p in protect {
            let Some(w) = rw.iter().find(|w| p.starts_with(w) && p != *w) else {
                continue;
            };
            let (Some(parent), Some(name)) = (p.parent(), p.file_name()) else {
                continue;
            };
            let kind = match p.strip_prefix(w) {
                Ok(rel) if DIRECTORIES.iter().any(|d| rel == Path::new(d)) => Kind::Dir,
                _ => Kind::Link,
            };
            let Some(dir) = open_parent(parent) else {
                continue;
            };
            let made = match kind {
                Kind::Dir => nix::sys::stat::mkdirat(
                    Some(dir.as_raw_fd()),
                    name,
                    Mode::from_bits_truncate(0o755),
                ),
                Kind::Link => nix::unistd::symlinkat(TARGET, Some(dir.as_raw_fd()), name),
            };
            // EEXIST: the name is there (protected as it is); anything
            // else (a read-only directory): nothing to protect is made.
            if made.is_ok() {
                out.made
                    .push((parent.to_path_buf(), name.to_os_string(), kind));
            }
        }
        out
    }

    /// The placeholders made, as full paths.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.made.iter().map(|(d, n, _)| d.join(n)).collect()
    }
}

impl Drop for Placeholders {
    fn drop(&mut self) {
        // Deepest first is not needed: no placeholder is inside another.
        for (parent, name, kind) in &self.made {
            let _ = remove(parent, name, *kind);
        }
    }
}

/// `parent` (absolute, resolved by the caller) opened without following
/// any link, when it is a directory.
fn open_parent(parent: &Path) -> Option<OwnedFd> {
    let root = beneath::open_dir(Path::new("/")).ok()?;
    let rel = beneath::relative(parent)?;
    let dir = if rel.as_os_str().is_empty() {
        root
    } else {
        beneath::open(root.as_fd(), rel).ok()?
    };
    let st = nix::sys::stat::fstat(dir.as_raw_fd()).ok()?;
    (SFlag::from_bits_truncate(st.st_mode & libc::S_IFMT) == SFlag::S_IFDIR).then_some(dir)
}

/// Removes `parent/name` when it still is the placeholder of `kind`.
fn remove(parent: &Path, name: &OsString, kind: Kind) -> Result<(), Errno> {
    let dir = open_parent(parent).ok_or(Errno::ENOTDIR)?;
    let st = fstatat(
        Some(dir.as_raw_fd()),
        name.as_os_str(),
        AtFlags::AT_SYMLINK_NOFOLLOW,
    )?;
    let fmt = st.st_mode & libc::S_IFMT;
    match kind {
        Kind::Link if fmt == libc::S_IFLNK => {
            let target = nix::fcntl::readlinkat(Some(dir.as_raw_fd()), name.as_os_str())?;
            if target != TARGET {
                return Err(Errno::EEXIST);
            }
            nix::unistd::unlinkat(
                Some(dir.as_raw_fd()),
                name.as_os_str(),
                UnlinkatFlags::NoRemoveDir,
            )
        }
        // Fails when not empty: then it is not the placeholder any more.
        Kind::Dir if fmt == libc::S_IFDIR => nix::unistd::unlinkat(
            Some(dir.as_raw_fd()),
            name.as_os_str(),
            UnlinkatFlags::RemoveDir,
        ),
        _ => Err(Errno::EEXIST),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(root: &Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let e = e.unwrap();
                let p = e.path();
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                let t = e.file_type().unwrap();
                if t.is_symlink() {
                    out.push(format!(
                        "{rel} -> {}",
                        std::fs::read_link(&p).unwrap().display()
                    ));
                } else if t.is_dir() {
                    out.push(format!("{rel}/"));
                    stack.push(p);
                } else {
                    out.push(rel);
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn missing_names_get_placeholders_that_go_away() {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(w.join("repo/.git")).unwrap();
        std::fs::write(w.join("repo/.bashrc"), "# mine\n").unwrap();
        // A linked .git: nothing is made through it.
        std::fs::create_dir_all(w.join("elsewhere")).unwrap();
        std::fs::create_dir_all(w.join("linked")).unwrap();
        std::os::unix::fs::symlink(w.join("elsewhere"), w.join("linked/.git")).unwrap();
        let mut policy = crate::launch::tests::policy();
        policy.rw = vec![w.join("repo"), w.join("linked")];
        policy.protect = [w.join("repo"), w.join("linked"), w.join("none")]
            .iter()
            .flat_map(|d| crate::protected_in(d))
            .collect();
        let before = tree(&w);
        let made = Placeholders::make(&policy);
        let ph = |name: &str| format!("{name} -> {TARGET}");
        let rc = [
            ".bash_login",
            ".bash_profile",
            ".profile",
            ".zprofile",
            ".zshenv",
            ".zshrc",
        ];
        let mut want = vec![
            "elsewhere/".to_string(),
            "linked/".to_string(),
            ph("linked/.bashrc"),
            format!("linked/.git -> {}", w.join("elsewhere").display()),
            "repo/".to_string(),
            "repo/.bashrc".to_string(),
            "repo/.git/".to_string(),
            ph("repo/.git/config"),
            "repo/.git/hooks/".to_string(),
        ];
        for d in ["linked", "repo"] {
            want.extend(rc.iter().map(|n| ph(&format!("{d}/{n}"))));
        }
        want.sort();
        assert_eq!(tree(&w), want);
        assert_eq!(made.paths().len(), 15);
        drop(made);
        assert_eq!(tree(&w), before);
    }

    #[test]
    fn only_placeholders_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(w.join(".git")).unwrap();
        let mut policy = crate::launch::tests::policy();
        policy.rw = vec![w.clone()];
        policy.protect = vec![w.join(".profile"), w.join(".zshrc"), w.join(".git/hooks")];
        let made = Placeholders::make(&policy);
        // Replaced meanwhile (as by another process): left alone.
        std::fs::remove_file(w.join(".profile")).unwrap();
        std::os::unix::fs::symlink("/elsewhere", w.join(".profile")).unwrap();
        std::fs::write(w.join(".git/hooks/pre-commit"), "x").unwrap();
        drop(made);
        assert_eq!(
            tree(&w),
            [
                ".git/",
                ".git/hooks/",
                ".git/hooks/pre-commit",
                ".profile -> /elsewhere"
            ]
        );
    }
    /// The host's placeholders of one directory (`make_in`) are there
    /// before a run and after it: the run's helper finds the names taken
    /// and makes (and so removes) none of its own; dropped, the host's go.
    #[test]
    fn a_directorys_placeholders_made_before_its_runs_outlive_them() {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(w.join(".git")).unwrap();
        std::fs::write(w.join(".bashrc"), "# mine\n").unwrap();
        let before = tree(&w);
        let host = Placeholders::make_in(&w);
        let with_them = tree(&w);
        let mut policy = crate::launch::tests::policy();
        policy.rw = vec![w.clone()];
        policy.protect = crate::protected_in(&w);
        let run = Placeholders::make(&policy);
        let runs_own = run.paths();
        drop(run);
        let after_run = tree(&w);
        drop(host);
        let ph = |name: &str| format!("{name} -> {TARGET}");
        let mut want = vec![
            ".bashrc".to_string(),
            ".git/".to_string(),
            ph(".git/config"),
            ".git/hooks/".to_string(),
        ];
        want.extend(
            [
                ".bash_login",
                ".bash_profile",
                ".profile",
                ".zprofile",
                ".zshenv",
                ".zshrc",
            ]
            .map(ph),
        );
        want.sort();
        assert_eq!(
            (with_them, runs_own, after_run.clone(), tree(&w)),
            (want.clone(), Vec::<PathBuf>::new(), want, before)
        );
    }
}

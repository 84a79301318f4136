//! A path made plain by its text alone: `.` components dropped, each `..`
//! taking away the name before it (at the root, nothing), never asking the
//! file system, so no link is followed. A spec's relative paths are joined
//! to its directory and made plain so (`spec::JobSpec::load`): every
//! message and record shows `/home/u/My Repos/app`, not
//! `/home/u/specs/../My Repos/app`, and the path used is the one shown.
//!
//! The plain form is taken only where it means what the path as written
//! means ([`plain_if_same`]): the kernel resolves `specs/..` through
//! `specs` when it is a link (to `/srv/team/specs`, say, `specs/../repo`
//! is `/srv/team/repo`), and the text alone would make it `/home/u/repo`,
//! another repository or none. So the two are compared by what they name
//! (device and inode, links followed as the kernel follows them when it
//! opens the path: a spec's paths are the spec writer's, never a job's),
//! and where they differ, or only one of them exists, the path stays as
//! written.

use std::path::{Component, Path, PathBuf};

/// `path` with no `.` or `..` components, by its text alone.
pub fn plain(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                // Above the root is the root.
                Some(Component::RootDir | Component::Prefix(_)) => {}
                // A relative path's leading `..` stays.
                Some(Component::ParentDir | Component::CurDir) | None => {
                    out.push(Component::ParentDir)
                }
            },
            other => out.push(other),
        }
    }
    if out.as_os_str().is_empty() && !path.as_os_str().is_empty() {
        out.push(Component::CurDir);
    }
    out
}

/// `path` without its `.` components, its `..` kept: the same file
/// whatever links it passes, found without asking the file system.
pub fn without_dots(path: &Path) -> PathBuf {
    let out: PathBuf = path
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    if out.as_os_str().is_empty() && !path.as_os_str().is_empty() {
        return PathBuf::from(".");
    }
    out
}

/// [`plain`] of `path` where it names what `path` names (the same device
/// and inode, or neither exists), else `path` as it is (module text).
pub fn plain_if_same(path: &Path) -> PathBuf {
    let made = plain(path);
    if made == path {
        return made;
    }
    let id = |p: &Path| {
        std::fs::metadata(p).map(|m| {
            use std::os::unix::fs::MetadataExt as _;
            (m.dev(), m.ino())
        })
    };
    match (id(path), id(&made)) {
        (Ok(written), Ok(plain)) if written == plain => made,
        (Err(_), Err(_)) => made,
        _ => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn dots_are_taken_away_by_text() {
        let cases = [
            "/home/u/specs/../My Repos/app",
            "/home/u/./specs/./x/",
            "/a/b/../../../c",
            "/..",
            "a/../../b",
            "a/..",
            "../a/./b/..",
            "",
        ];
        assert_eq!(
            cases.map(|p| plain(Path::new(p))),
            [
                "/home/u/My Repos/app",
                "/home/u/specs/x",
                "/c",
                "/",
                "../b",
                ".",
                "../a",
                "",
            ]
            .map(PathBuf::from)
        );
    }

    /// A link is not followed: `link/..` is the directory holding the
    /// link, not the parent of where it points.
    #[test]
    fn a_link_is_not_followed() {
        let tmp = std::env::temp_dir().join(format!("paddock-plain-{}", std::process::id()));
        let elsewhere = tmp.join("elsewhere/deep");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, tmp.join("link")).unwrap();
        let got = plain(&tmp.join("link/../repo"));
        std::fs::remove_dir_all(&tmp).unwrap();
        assert_eq!(got, tmp.join("repo"));
    }

    /// Through a link to another directory, `..` is the link's target's
    /// parent, as the kernel resolves it: the path stays as written where
    /// its plain form names another directory or none, and is made plain
    /// where both name the same one.
    #[test]
    fn a_link_before_dots_keeps_the_path_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("team/specs")).unwrap();
        std::fs::create_dir_all(root.join("team/repo")).unwrap();
        std::fs::create_dir_all(root.join("home")).unwrap();
        std::os::unix::fs::symlink(root.join("team/specs"), root.join("home/specs")).unwrap();
        let through_link = root.join("home/specs/../repo");
        let without_link = root.join("team/specs/../repo");
        let missing = root.join("team/specs/../gone");
        let alone = plain_if_same(&through_link);
        std::fs::create_dir_all(root.join("home/repo")).unwrap();
        let beside_another = plain_if_same(&through_link);
        assert_eq!(
            [
                alone,
                beside_another,
                plain_if_same(&without_link),
                plain_if_same(&missing),
            ],
            [
                through_link.clone(),
                through_link,
                root.join("team/repo"),
                root.join("team/gone"),
            ]
        );
    }

    #[test]
    fn without_dots_keeps_every_dotdot() {
        assert_eq!(
            ["/a/./b/../c/.", "./a", ".", "a/../.."].map(|p| without_dots(Path::new(p))),
            ["/a/b/../c", "a", ".", "a/../.."].map(PathBuf::from)
        );
    }
}

//! A path made plain by its text alone: `.` components dropped, each `..`
//! taking away the name before it (at the root, nothing), never asking the
//! file system, so no link is followed. A spec's relative paths are joined
//! to its directory and made plain so (`spec::JobSpec::load`): every
//! message and record shows `/home/u/My Repos/app`, not
//! `/home/u/specs/../My Repos/app`, and the path used is the one shown.
//! The host never resolves a link to do it (a link in a repository or a
//! job's tree is the job's).

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
}

//! The parts of the sandbox's view that it makes itself instead of binding
//! them from the host, and what becomes of a caller's path (read-only,
//! writable or protected: the job's work, home and tmp, an engine's
//! install directories, a host profile's files) on or under one of them.
//!
//! The view is a tmpfs root. Its private /tmp and its curated /etc are
//! placed before the caller's paths (parents first, `fs.rs`), so a path
//! under them is bound on top of them and is seen ([`Place::Root`]). Its
//! /dev (a tmpfs of a few device nodes, a private /dev/shm, its own
//! devpts) and its /proc (a fresh procfs) are mounted after the view is
//! sealed read-only, so a path under them bound with the rest would be
//! hidden: a path under /dev (a jobs directory on /dev/shm, a RAM disk)
//! is bound once /dev is built, sealed as every bind is ([`Place::Dev`]);
//! a path under /proc is refused, since every host path there is the
//! host's processes or kernel, which the job's own procfs keeps out. A
//! caller's path that is one of those parts itself (/etc, /tmp, /dev,
//! /dev/shm, /proc, a device node or link of /dev, the generated
//! passwd and group, the watcher's resolv.conf and hosts) would replace
//! it with the host's (the host's shared memory, its whole /etc) and is
//! refused too. The staging root's names (/oldroot, /newroot, /hidden)
//! are no part of the view: a caller's path is opened beneath the host's
//! root and bound beneath the new one, so a host path of the same name is
//! an ordinary one.
//!
//! The place [`place`] gives a caller's path is the one decision: the
//! plan keeps it with the path's entry, and what is protected or hidden
//! inside that path is placed with it (`fs.rs`). /dev's device nodes and
//! links are listed once, here ([`DEVICES`], [`DEV_LINKS`]): `fs.rs`
//! builds /dev from them and `lock.rs` lets the job write the nodes.

use std::path::{Path, PathBuf};

/// Where a caller's path is placed in the view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// With the system binds, before the view is sealed read-only.
    Root,
    /// Once /dev is built, before it turns read-only.
    Dev,
}

/// What may be under a part the sandbox makes itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Under {
    /// A path under it is bound on top of it.
    Bound,
    /// A path under it is bound once /dev is built.
    Dev,
    /// Nothing of the host's is bound under it.
    Refused,
}

/// One part of the view the sandbox makes itself.
#[derive(Clone, Copy)]
struct Part {
    path: &'static str,
    under: Under,
    /// What the sandbox puts there.
    what: &'static str,
    /// Only with the direct-connection watcher.
    watched_only: bool,
}

const fn part(path: &'static str, under: Under, what: &'static str) -> Part {
    Part {
        path,
        under,
        what,
        watched_only: false,
    }
}

/// The device nodes of the view's /dev, bound from the host's (`fs.rs`),
/// the only files of /dev Landlock lets the job write (`lock.rs`).
pub const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// The links of the view's /dev (`fs.rs` makes them): path, target and
/// what it is.
pub const DEV_LINKS: &[(&str, &str, &str)] = &[
    ("/dev/fd", "/proc/self/fd", "a link into its /proc"),
    ("/dev/stdin", "/proc/self/fd/0", "a link into its /proc"),
    ("/dev/stdout", "/proc/self/fd/1", "a link into its /proc"),
    ("/dev/stderr", "/proc/self/fd/2", "a link into its /proc"),
    ("/dev/ptmx", "pts/ptmx", "a link to its own terminals"),
];

/// The parts, deepest first within a tree (the first that holds a path
/// judges it); the device nodes and links of /dev ([`DEVICES`],
/// [`DEV_LINKS`]) come before them all ([`parts`]).
const PARTS: &[Part] = &[
    part(
        "/proc",
        Under::Refused,
        "a procfs of the job's own processes; the host's is never bound",
    ),
    part("/dev/shm", Under::Dev, "the job's private shared memory"),
    part("/dev/pts", Under::Refused, "the job's own terminals"),
    part(
        "/dev",
        Under::Dev,
        "a few device nodes, private shared memory and terminals",
    ),
    part(
        "/etc/passwd",
        Under::Refused,
        "a file naming the job's user",
    ),
    part(
        "/etc/group",
        Under::Refused,
        "a file naming the job's group",
    ),
    Part {
        path: "/etc/resolv.conf",
        under: Under::Refused,
        what: "the direct-connection watcher's resolver",
        watched_only: true,
    },
    Part {
        path: "/etc/hosts",
        under: Under::Refused,
        what: "the direct-connection watcher's host names",
        watched_only: true,
    },
    part(
        "/etc",
        Under::Bound,
        "a short list of the host's entries everyone may read",
    ),
    part("/tmp", Under::Bound, "the job's private, size-capped tmpfs"),
];

/// A caller's path on or under a part of the view the sandbox makes
/// itself, where it cannot be bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{path} cannot be bound into the sandbox: it is {on}{part}, which the sandbox makes its own \
     ({what}); {advice}"
)]
pub struct Replaced {
    pub path: PathBuf,
    /// "" (the part itself) or "under ".
    on: &'static str,
    pub part: &'static str,
    what: &'static str,
    advice: String,
}

/// Where the caller's `path` (absolute, without `.` or `..`) goes in the
/// view, `watched` when the run has the direct-connection watcher; a path
/// that cannot be bound there is refused, naming the part.
pub fn place(path: &Path, watched: bool) -> Result<Place, Replaced> {
    for p in parts().filter(|p| watched || !p.watched_only) {
        let at = Path::new(p.path);
        if !path.starts_with(at) {
            continue;
        }
        let is_part = path == at;
        return match (is_part, p.under) {
            (false, Under::Bound) => Ok(Place::Root),
            (false, Under::Dev) => Ok(Place::Dev),
            (_, under) => Err(Replaced {
                path: path.to_path_buf(),
                on: if is_part { "" } else { "under " },
                part: p.path,
                what: p.what,
                advice: match under {
                    Under::Refused => format!(
                        "give a path outside {} (a job's own paths: move the jobs directory out \
                         of it)",
                        p.path
                    ),
                    Under::Bound | Under::Dev => {
                        format!("give a directory under {} or elsewhere", p.path)
                    }
                },
            }),
        };
    }
    Ok(Place::Root)
}

/// Every part: /dev's device nodes and links (none holds another part),
/// then [`PARTS`].
fn parts() -> impl Iterator<Item = Part> {
    let devices = DEVICES
        .iter()
        .map(|&d| part(d, Under::Refused, "a device node"));
    let links = DEV_LINKS
        .iter()
        .map(|&(l, _, what)| part(l, Under::Refused, what));
    devices.chain(links).chain(PARTS.iter().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_placed_by_the_part_they_are_under() {
        let placed: Vec<(&str, Result<Place, String>)> = [
            "/dev/shm/jobs/j/work",
            "/dev/hugepages/jobs",
            "/tmp/jobs/j/work",
            "/etc/paddock/profile.json",
            "/etc/hosts",
            "/home/u/jobs",
            "/devices/x",
            "/procedures",
            "/oldroot/x",
            "/proc/1/root",
            "/proc",
            "/dev/shm",
            "/dev",
            "/dev/pts/0",
            "/dev/null",
            "/etc",
            "/etc/passwd",
            "/tmp",
        ]
        .into_iter()
        .map(|p| (p, place(Path::new(p), false).map_err(|e| e.to_string())))
        .collect();
        let refused = |path: &'static str, on: &str, part: &str, what: &str, advice: &str| {
            (
                path,
                Err(format!(
                    "{path} cannot be bound into the sandbox: it is {on}{part}, which the \
                     sandbox makes its own ({what}); {advice}"
                )),
            )
        };
        let outside = |part: &str| {
            format!(
                "give a path outside {part} (a job's own paths: move the jobs directory out of it)"
            )
        };
        let under = |part: &str| format!("give a directory under {part} or elsewhere");
        let proc_what = "a procfs of the job's own processes; the host's is never bound";
        assert_eq!(
            placed,
            vec![
                ("/dev/shm/jobs/j/work", Ok(Place::Dev)),
                ("/dev/hugepages/jobs", Ok(Place::Dev)),
                ("/tmp/jobs/j/work", Ok(Place::Root)),
                ("/etc/paddock/profile.json", Ok(Place::Root)),
                ("/etc/hosts", Ok(Place::Root)),
                ("/home/u/jobs", Ok(Place::Root)),
                ("/devices/x", Ok(Place::Root)),
                ("/procedures", Ok(Place::Root)),
                ("/oldroot/x", Ok(Place::Root)),
                refused(
                    "/proc/1/root",
                    "under ",
                    "/proc",
                    proc_what,
                    &outside("/proc")
                ),
                refused("/proc", "", "/proc", proc_what, &outside("/proc")),
                refused(
                    "/dev/shm",
                    "",
                    "/dev/shm",
                    "the job's private shared memory",
                    &under("/dev/shm")
                ),
                refused(
                    "/dev",
                    "",
                    "/dev",
                    "a few device nodes, private shared memory and terminals",
                    &under("/dev")
                ),
                refused(
                    "/dev/pts/0",
                    "under ",
                    "/dev/pts",
                    "the job's own terminals",
                    &outside("/dev/pts")
                ),
                refused(
                    "/dev/null",
                    "",
                    "/dev/null",
                    "a device node",
                    &outside("/dev/null")
                ),
                refused(
                    "/etc",
                    "",
                    "/etc",
                    "a short list of the host's entries everyone may read",
                    &under("/etc")
                ),
                refused(
                    "/etc/passwd",
                    "",
                    "/etc/passwd",
                    "a file naming the job's user",
                    &outside("/etc/passwd")
                ),
                refused(
                    "/tmp",
                    "",
                    "/tmp",
                    "the job's private, size-capped tmpfs",
                    &under("/tmp")
                ),
            ]
        );
        // Every device node and link the view's /dev is made of
        // (`DEVICES`, `DEV_LINKS`, the tables fs.rs builds it from).
        let dev: Vec<(&str, Option<&str>)> = ["/dev/urandom", "/dev/ptmx", "/dev/stdin/x"]
            .into_iter()
            .map(|p| (p, place(Path::new(p), false).err().map(|e| e.what)))
            .collect();
        assert_eq!(
            dev,
            vec![
                ("/dev/urandom", Some("a device node")),
                ("/dev/ptmx", Some("a link to its own terminals")),
                ("/dev/stdin/x", Some("a link into its /proc")),
            ]
        );
        // With the watcher, its resolver and host names are its own too.
        assert_eq!(
            place(Path::new("/etc/hosts"), true).map_err(|e| e.part),
            Err("/etc/hosts")
        );
    }
}

//! The job's work tree as an overlay mount: the base commit's checkout, a
//! read-only snapshot shared by every job on that commit (`snapshot.rs`),
//! as the lower layer, and the job's own `meta/upper` as the upper layer,
//! mounted at `work/` by Paddock on the host. Provisioning is then a mount,
//! not a checkout, and teardown removes only what the job wrote. Writes go
//! to the upper layer (copied up on first write): the job never holds a
//! writable inode of the snapshot, and the snapshot none of the source
//! (its objects are copies). The mount is made with metacopy and the
//! inode index off, so nothing a job writes into its upper layer can make
//! the merged view show a file's data from another path, and with
//! directory redirects on, so a directory of the base can be renamed as in
//! a clone (a redirect names only a path inside the snapshot); and `volatile`,
//! so that unmounting does not sync the whole file system (overlay then
//! refuses to mount the layers again until its marker is dropped: the
//! reaper does so after a restart, and patches what reached the disk, as
//! it does a clone's files). Mounting needs
//! `CAP_SYS_ADMIN` on the host; where it cannot be had, the clone is used
//! and the job's provisioning event says why ([`Chosen`]; see
//! ARCHITECTURE.md, "Workspaces").

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use nix::mount::{mount, umount2, MntFlags, MsFlags};

/// Which layout `Workspace::provision` makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// The overlay where it can be had (a local source, a host that lets
    /// this process mount), else the clone: the default.
    Auto,
    /// A clone of the source checked out at the base (every file written).
    Clone,
    /// An overlay on a cached snapshot of the base, or an error saying why
    /// not: never a silent clone.
    Overlay,
}

/// The environment variable that picks the layout: `clone` or `overlay`;
/// unset (or empty) is [`Layout::Auto`].
pub const LAYOUT_ENV: &str = "PADDOCK_WORKSPACE_LAYOUT";

impl Layout {
    /// The layout [`LAYOUT_ENV`] asks for; the value when it names none.
    pub fn from_env() -> Result<Layout, String> {
        match std::env::var_os(LAYOUT_ENV) {
            None => Ok(Layout::Auto),
            Some(v) if v.is_empty() => Ok(Layout::Auto),
            Some(v) if v == "clone" => Ok(Layout::Clone),
            Some(v) if v == "overlay" => Ok(Layout::Overlay),
            Some(v) => Err(v.to_string_lossy().into_owned()),
        }
    }
}

/// The layout a job got, and why (its provisioning event says so).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    /// Whether `work/` is an overlay mount.
    pub overlay: bool,
    /// Why: the snapshot it is mounted on, or why the clone.
    pub why: String,
}

impl Chosen {
    pub(super) fn clone_because(why: impl Into<String>) -> Chosen {
        Chosen {
            overlay: false,
            why: why.into(),
        }
    }
}

impl std::fmt::Display for Chosen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let layout = if self.overlay { "overlay" } else { "clone" };
        write!(f, "workspace layout: {layout} ({})", self.why)
    }
}

/// Whether this process may mount (`CAP_SYS_ADMIN` in its effective set,
/// read from `/proc/self/status`), checked before a snapshot is made for a
/// mount that would be refused.
pub(super) fn may_mount() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_SYS_ADMIN) != 0)
}

/// Whether `path` can be named in overlay's mount options, which use `,`,
/// `:` and `\` as separators and escapes.
pub(super) fn nameable(path: &Path) -> bool {
    !path
        .as_os_str()
        .as_bytes()
        .iter()
        .any(|b| matches!(b, b',' | b':' | b'\\'))
}

/// Mounts the overlay of `lower` (read-only) and `upper` (with overlay's
/// `workdir`, on the same file system) at `target`.
pub(super) fn mount_at(
    lower: &Path,
    upper: &Path,
    workdir: &Path,
    target: &Path,
) -> io::Result<()> {
    if ![lower, upper, workdir].into_iter().all(nameable) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a layer's path holds `,`, `:` or `\\`",
        ));
    }
    let mut data = std::ffi::OsString::from("lowerdir=");
    data.push(lower);
    data.push(",upperdir=");
    data.push(upper);
    data.push(",workdir=");
    data.push(workdir);
    // `volatile`: no sync of the upper layer's file system, which at
    // unmount flushed every other process's dirty pages too (0.8 s on a
    // busy host); a job's work is scratch until its patch is taken.
    // `redirect_dir=on`: a directory of the base can be renamed (`git mv
    // src lib`), as in a clone; the redirect is an xattr in the upper
    // layer naming a path of the lower layer, looked up one component at
    // a time from the snapshot's root (the kernel refuses `.` and `..`
    // components), so one the job plants can only show it another part of
    // its own base, which it can read anyway. Metacopy stays off: no
    // file's data is ever taken from another path.
    data.push(",redirect_dir=on,metacopy=off,index=off,xino=off,volatile");
    mount(
        Some(OsStr::new("overlay")),
        target,
        Some(OsStr::new("overlay")),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(data.as_os_str()),
    )?;
    Ok(())
}

/// Drops the marker a `volatile` mount leaves in overlay's `workdir`
/// (`work/incompat/volatile`), without which the layers cannot be mounted
/// again once the mount is gone (a restarted host).
pub(super) fn forget_volatile(workdir: &Path) -> io::Result<()> {
    match std::fs::remove_dir_all(workdir.join("work/incompat/volatile")) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Whether something is mounted at `target` (it is on another device than
/// its parent).
pub fn is_mounted(target: &Path) -> bool {
    let (Ok(here), Some(Ok(parent))) = (
        std::fs::symlink_metadata(target),
        target.parent().map(std::fs::symlink_metadata),
    ) else {
        return false;
    };
    here.dev() != parent.dev()
}

/// Unmounts `target` without following a link there; lazily when it is
/// still busy. Nothing mounted is not an error.
pub(super) fn unmount(target: &Path) -> io::Result<()> {
    if !is_mounted(target) {
        return Ok(());
    }
    match umount2(target, MntFlags::UMOUNT_NOFOLLOW) {
        Ok(()) => Ok(()),
        Err(nix::errno::Errno::EBUSY) => {
            umount2(target, MntFlags::UMOUNT_NOFOLLOW | MntFlags::MNT_DETACH)?;
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// Unmounts the work tree of the job directory `root` when it is an
/// overlay (the reaper removes a dead job's directory by path); an error
/// when it stays mounted, so that nothing walks through it.
pub fn unmount_work(root: &Path) -> io::Result<()> {
    let work = root.join("work");
    unmount(&work)?;
    if is_mounted(&work) {
        return Err(io::Error::other(format!(
            "{} is still mounted",
            work.display()
        )));
    }
    Ok(())
}

/// Whether overlay workspaces can be tested here: root with overlayfs.
/// Skipped with a reason locally, a failure in CI.
#[cfg(test)]
pub(crate) fn testable_here() -> bool {
    let tmp = tempfile::tempdir().unwrap();
    let d = |n: &str| {
        let p = tmp.path().join(n);
        std::fs::create_dir(&p).unwrap();
        p
    };
    let (l, u, w, m) = (d("l"), d("u"), d("w"), d("m"));
    let ok = may_mount() && mount_at(&l, &u, &w, &m).is_ok();
    if ok {
        unmount(&m).unwrap();
    } else if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("overlay workspaces need root and overlayfs in CI");
    } else {
        eprintln!("skipping: overlay workspaces need CAP_SYS_ADMIN and overlayfs");
    }
    ok
}

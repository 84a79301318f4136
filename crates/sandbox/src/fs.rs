//! The filesystem view, built by the sandbox's PID 1 inside its private
//! mount namespace: a tmpfs root holding read-only bind mounts of the
//! system directories, a curated /etc (generated passwd and group), the
//! engine's install directories, writable binds of the job's paths with
//! `.git/hooks` and friends re-protected read-only, a size-capped /tmp, a
//! minimal /dev and a fresh /proc for the new PID namespace. The host root
//! is detached at the end (`pivot_root` then a lazy unmount), and the new
//! root itself is remounted read-only.

use std::ffi::OsStr;
use std::os::unix::fs::symlink;
use std::path::{Component, Path, PathBuf};

use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sys::statvfs::{statvfs, FsFlags};
use nix::unistd::{chdir, pivot_root};

use crate::error::SetupError;
use crate::policy::{Policy, ETC_RO, SYSTEM_RO};

const STAGE: &str = "/tmp";
const OLD: &str = "/oldroot";
const NEW: &str = "/newroot";

/// /etc files up to this size are copied rather than bound.
const COPY_MAX: u64 = 256 * 1024;

/// Device nodes bound from the host's /dev.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom"];

/// Parts of the fresh /proc that are bound read-only over themselves.
const PROC_RO: &[&str] = &["sys", "sysrq-trigger", "irq", "bus", "fs"];

#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    /// A bind mount of a host path (already canonical) at the same path.
    Bind { path: PathBuf, writable: bool },
    /// A symlink recreated as it is on the host.
    Link { path: PathBuf, target: PathBuf },
    /// A size-capped tmpfs.
    Tmpfs { path: PathBuf, size_mb: u64 },
    /// A small host file copied into the (then read-only) new root: cheaper
    /// than a bind and a remount.
    Copy { path: PathBuf },
}

impl Entry {
    fn path(&self) -> &Path {
        match self {
            Entry::Bind { path, .. }
            | Entry::Link { path, .. }
            | Entry::Tmpfs { path, .. }
            | Entry::Copy { path } => path,
        }
    }
}

/// The paths the view is made of, resolved on the host before any mount.
/// Read-only, writable and protected lists are what Landlock enforces too.
#[derive(Debug, Clone, Default)]
pub struct View {
    entries: Vec<Entry>,
    /// Read-only (read and execute) paths as seen inside the sandbox.
    pub ro: Vec<PathBuf>,
    /// Writable paths as seen inside the sandbox.
    pub rw: Vec<PathBuf>,
}

/// Resolves the policy's paths on the host. A requested path that does not
/// exist is an error; optional system paths that do not exist are skipped.
pub fn plan(policy: &Policy) -> Result<View, SetupError> {
    let mut v = View::default();
    for p in SYSTEM_RO {
        optional(&mut v, Path::new(p), false);
    }
    for name in ETC_RO {
        let p = Path::new("/etc").join(name);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_file() && m.len() <= COPY_MAX => v.entries.push(Entry::Copy { path: p }),
            _ => optional(&mut v, &p, false),
        }
    }
    v.entries.push(Entry::Tmpfs {
        path: PathBuf::from("/tmp"),
        size_mb: policy.tmp_mb,
    });
    v.rw.push(PathBuf::from("/tmp"));
    for p in &policy.ro {
        let path = canonical(p)?;
        v.ro.push(path.clone());
        v.entries.push(Entry::Bind {
            path,
            writable: false,
        });
    }
    for p in &policy.rw {
        let path = canonical(p)?;
        v.rw.push(path.clone());
        v.entries.push(Entry::Bind {
            path,
            writable: true,
        });
    }
    for p in &policy.protect {
        if let Ok(path) = p.canonicalize() {
            v.entries.push(Entry::Bind {
                path,
                writable: false,
            });
        }
    }
    // Parents before children; the order of equal depths is kept.
    v.entries.sort_by_key(|e| e.path().components().count());
    v.ro.push(PathBuf::from("/proc"));
    v.ro.push(PathBuf::from("/etc"));
    Ok(v)
}

fn optional(v: &mut View, p: &Path, writable: bool) {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.file_type().is_symlink() => {
            if let Ok(target) = std::fs::read_link(p) {
                v.entries.push(Entry::Link {
                    path: p.to_path_buf(),
                    target,
                });
            }
        }
        Ok(_) => {
            if writable {
                v.rw.push(p.to_path_buf());
            } else {
                v.ro.push(p.to_path_buf());
            }
            v.entries.push(Entry::Bind {
                path: p.to_path_buf(),
                writable,
            });
        }
        Err(_) => {}
    }
}

fn canonical(p: &Path) -> Result<PathBuf, SetupError> {
    p.canonicalize().map_err(|source| SetupError::Source {
        path: p.to_path_buf(),
        source,
    })
}

/// `root` joined with an absolute path.
fn under(root: &str, p: &Path) -> PathBuf {
    let mut out = PathBuf::from(root);
    for c in p.components() {
        if let Component::Normal(n) = c {
            out.push(n);
        }
    }
    out
}

fn mount_err(what: impl Into<String>, target: &Path) -> impl FnOnce(nix::Error) -> SetupError {
    let what = what.into();
    let target = target.to_path_buf();
    move |source| SetupError::Mount {
        what,
        target,
        source,
    }
}

fn point_err(path: &Path) -> impl FnOnce(std::io::Error) -> SetupError {
    let path = path.to_path_buf();
    move |source| SetupError::MountPoint { path, source }
}

fn tmpfs(target: &Path, data: &str, flags: MsFlags) -> Result<(), SetupError> {
    mount(
        Some(OsStr::new("tmpfs")),
        target,
        Some(OsStr::new("tmpfs")),
        flags,
        Some(OsStr::new(data)),
    )
    .map_err(mount_err(format!("tmpfs ({data})"), target))
}

/// The mount flags a bind remount must keep (the kernel refuses to clear
/// flags that are locked on mounts inherited from a more privileged
/// namespace).
fn locked_flags(src: &Path) -> MsFlags {
    let mut out = MsFlags::empty();
    if let Ok(st) = statvfs(src) {
        let f = st.flags();
        for (fs, ms) in [
            (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
            (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
            (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
            (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
            (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
            (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
            (FsFlags::ST_RDONLY, MsFlags::MS_RDONLY),
        ] {
            if f.contains(fs) {
                out |= ms;
            }
        }
    }
    out
}

/// Bind-mounts `src` (a path under the old root) at `dst` (under the new
/// root), then remounts it with `nosuid`, `nodev` unless `dev`, and
/// read-only unless `writable`.
fn bind(src: &Path, dst: &Path, writable: bool, dev: bool) -> Result<(), SetupError> {
    let meta = std::fs::metadata(src).map_err(|source| SetupError::Source {
        path: src.to_path_buf(),
        source,
    })?;
    if meta.is_dir() {
        std::fs::create_dir_all(dst).map_err(point_err(dst))?;
    } else {
        if let Some(parent) = dst.parent() {
            std::fs::create_dir_all(parent).map_err(point_err(parent))?;
        }
        if std::fs::symlink_metadata(dst).is_err() {
            std::fs::File::create(dst).map_err(point_err(dst))?;
        }
    }
    let what = format!("bind of {}", src.display());
    let none: Option<&OsStr> = None;
    match mount(Some(src), dst, none, MsFlags::MS_BIND, none) {
        // A mount with locked submounts can only be bound recursively.
        Err(nix::Error::EINVAL) => mount(
            Some(src),
            dst,
            none,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            none,
        )
        .map_err(mount_err(what.clone(), dst))?,
        other => other.map_err(mount_err(what.clone(), dst))?,
    }
    let mut flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_NOSUID | locked_flags(src);
    if !dev {
        flags |= MsFlags::MS_NODEV;
    }
    if !writable {
        flags |= MsFlags::MS_RDONLY;
    }
    mount(none, dst, none, flags, none).map_err(mount_err(format!("remount of {what}"), dst))
}

/// Builds the view and switches into it. Runs in the new mount namespace,
/// as PID 1 of the new PID namespace, before any capability is dropped.
pub fn enter(view: &View, uid: u32, gid: u32, home: Option<&str>) -> Result<(), SetupError> {
    let none: Option<&OsStr> = None;
    let root = Path::new("/");
    mount(
        none,
        root,
        none,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        none,
    )
    .map_err(mount_err("/ as private", root))?;

    // A staging root: the host's root stays reachable at /oldroot while the
    // new root is populated at /newroot.
    let stage = Path::new(STAGE);
    tmpfs(
        stage,
        "mode=0755,size=1m",
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
    )?;
    for d in ["oldroot", "newroot"] {
        let p = stage.join(d);
        std::fs::create_dir(&p).map_err(point_err(&p))?;
    }
    pivot_root(stage, &stage.join("oldroot")).map_err(|source| SetupError::PivotRoot { source })?;
    chdir(root).map_err(|source| SetupError::Chdir {
        path: root.to_path_buf(),
        source,
    })?;
    let new = Path::new(NEW);
    tmpfs(
        new,
        "mode=0755,size=4m",
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
    )?;

    // /etc: a directory in the new root, with generated passwd and group.
    let etc = new.join("etc");
    std::fs::create_dir_all(&etc).map_err(point_err(&etc))?;
    let home = home.unwrap_or("/");
    let passwd = if uid == 0 {
        format!("root:x:0:0:root:{home}:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
    } else {
        format!("root:x:0:0:root:/root:/bin/bash\npaddock:x:{uid}:{gid}:paddock:{home}:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
    };
    let group = if gid == 0 {
        "root:x:0:\nnogroup:x:65534:\n".to_string()
    } else {
        format!("root:x:0:\npaddock:x:{gid}:\nnogroup:x:65534:\n")
    };
    for (name, text) in [("passwd", passwd), ("group", group)] {
        let p = etc.join(name);
        std::fs::write(&p, text).map_err(point_err(&p))?;
    }

    for e in &view.entries {
        let dst = under(NEW, e.path());
        match e {
            Entry::Bind { path, writable } => bind(&under(OLD, path), &dst, *writable, false)?,
            Entry::Link { target, .. } => {
                if let Some(parent) = dst.parent() {
                    std::fs::create_dir_all(parent).map_err(point_err(parent))?;
                }
                symlink(target, &dst).map_err(point_err(&dst))?;
            }
            Entry::Copy { path } => {
                std::fs::copy(under(OLD, path), &dst).map_err(point_err(&dst))?;
            }
            Entry::Tmpfs { size_mb, .. } => {
                std::fs::create_dir_all(&dst).map_err(point_err(&dst))?;
                tmpfs(
                    &dst,
                    &format!("mode=1777,size={size_mb}m"),
                    MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                )?;
            }
        }
    }

    dev(new)?;
    proc(new)?;

    // Switch: the new root on top, the staging root (with the host's root
    // under it) detached.
    chdir(new).map_err(|source| SetupError::Chdir {
        path: new.to_path_buf(),
        source,
    })?;
    let dot = Path::new(".");
    pivot_root(dot, dot).map_err(|source| SetupError::PivotRoot { source })?;
    umount2(dot, MntFlags::MNT_DETACH).map_err(mount_err("detach of the host root", root))?;
    chdir(root).map_err(|source| SetupError::Chdir {
        path: root.to_path_buf(),
        source,
    })?;
    mount(
        none,
        root,
        none,
        MsFlags::MS_REMOUNT
            | MsFlags::MS_BIND
            | MsFlags::MS_RDONLY
            | MsFlags::MS_NOSUID
            | MsFlags::MS_NODEV,
        none,
    )
    .map_err(mount_err("remount of the new root read-only", root))
}

/// A minimal /dev: a few device nodes bound from the host, the standard
/// symlinks, a private /dev/shm and, when the kernel allows it, a private
/// devpts instance.
fn dev(new: &Path) -> Result<(), SetupError> {
    let dev = new.join("dev");
    std::fs::create_dir_all(&dev).map_err(point_err(&dev))?;
    tmpfs(
        &dev,
        "mode=0755,size=64k",
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
    )?;
    for d in DEVICES {
        bind(
            &Path::new(OLD).join("dev").join(d),
            &dev.join(d),
            true,
            true,
        )?;
    }
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("ptmx", "pts/ptmx"),
    ] {
        let p = dev.join(name);
        symlink(target, &p).map_err(point_err(&p))?;
    }
    let shm = dev.join("shm");
    std::fs::create_dir(&shm).map_err(point_err(&shm))?;
    tmpfs(
        &shm,
        "mode=1777,size=64m",
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
    )?;
    let pts = dev.join("pts");
    std::fs::create_dir(&pts).map_err(point_err(&pts))?;
    // Terminals are a convenience, not a protection: without devpts the
    // command just has no pseudo-terminals.
    let _ = mount(
        Some(OsStr::new("devpts")),
        &pts,
        Some(OsStr::new("devpts")),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some(OsStr::new("newinstance,ptmxmode=0666,mode=620")),
    );
    Ok(())
}

/// A fresh /proc for the new PID namespace, with its system-wide knobs
/// bound read-only over themselves.
fn proc(new: &Path) -> Result<(), SetupError> {
    let proc = new.join("proc");
    std::fs::create_dir_all(&proc).map_err(point_err(&proc))?;
    mount(
        Some(OsStr::new("proc")),
        &proc,
        Some(OsStr::new("proc")),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&OsStr>,
    )
    .map_err(mount_err("proc", &proc))?;
    for name in PROC_RO {
        let p = proc.join(name);
        if std::fs::symlink_metadata(&p).is_ok() {
            bind(&p, &p, false, false)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_joins_absolute_paths() {
        assert_eq!(
            under("/newroot", Path::new("/usr/lib")),
            PathBuf::from("/newroot/usr/lib")
        );
    }

    #[test]
    fn plan_orders_parents_first_and_fails_on_missing_paths() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().canonicalize().unwrap();
        let hooks = work.join(".git/hooks");
        std::fs::create_dir_all(&hooks).unwrap();
        let mut policy = crate::launch::tests::policy();
        policy.rw = vec![work.clone()];
        policy.protect = vec![hooks.clone()];
        let view = plan(&policy).unwrap();
        let paths: Vec<&Path> = view.entries.iter().map(Entry::path).collect();
        let w = paths.iter().position(|p| *p == work);
        let h = paths.iter().position(|p| *p == hooks);
        let t = paths.iter().position(|p| *p == Path::new("/tmp"));
        assert!(t < w && w < h, "{paths:?}");

        policy.ro = vec![work.join("missing")];
        let err = plan(&policy).err().map(|e| e.to_string());
        assert_eq!(
            err,
            Some(format!(
                "path {} to mount into the sandbox: No such file or directory (os error 2)",
                work.join("missing").display()
            ))
        );
    }
}

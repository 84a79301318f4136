//! The filesystem view, built by the sandbox's PID 1 inside its private
//! mount namespace: a tmpfs root holding bind mounts of the system
//! directories, a curated /etc (small files copied, generated passwd and
//! group), the engine's install directories, the job's writable paths with
//! `.git/hooks` and friends bound read-only over themselves, a size-capped
//! /tmp, a minimal /dev and a fresh /proc for the new PID namespace.
//!
//! Every bind is a plain bind; one recursive `mount_setattr(2)` then makes
//! the whole new tree read-only, `nosuid` and `nodev` at once (submounts of
//! recursive binds included), and only the writable paths get `rdonly`
//! cleared again, one call each. That replaces a `statfs` and a remount per
//! bind (the kernel never lets flags locked on the host's mounts be
//! cleared, and `mount_setattr` only adds them). /dev and /proc are mounted
//! after that step; the caller's paths under /dev are bound once /dev is
//! built and sealed one by one (its device nodes keep their flags), and
//! those under /proc, or on a part the view makes itself, are refused at
//! planning (`own_parts.rs`). The host root is detached at the end
//! (`pivot_root` then a lazy unmount).
//!
//! Nothing a job could have written is resolved through a symbolic link
//! (`beneath.rs`): the caller's read-only and writable paths must be free
//! of links (the caller resolves them once; the plan only `lstat`s), are
//! opened again from the old root with `RESOLVE_NO_SYMLINKS` and bound
//! descriptor to descriptor; mount points under a writable bind are made
//! with `mkdirat` in directories opened the same way; a protected path is
//! bound over itself only when it is reached without a link (a link in its
//! last component is bound as the link), and skipped otherwise.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, OwnedFd};
use std::os::unix::fs::{symlink, MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sys::stat::{mknod, Mode, SFlag};
use nix::unistd::{chdir, pivot_root};

use crate::beneath;
use crate::error::SetupError;
use crate::own_parts::{self, Place};
use crate::policy::{Policy, ETC_RO, SYSTEM_RO};
use crate::trace;

const STAGE: &str = "/tmp";
const OLD: &str = "/oldroot";
const NEW: &str = "/newroot";
/// In the staging root: the empty file bound over hidden programs.
const HIDDEN: &str = "/hidden";

/// /etc files up to this size are copied rather than bound.
const COPY_MAX: u64 = 256 * 1024;

/// Parts of the fresh /proc that are bound read-only over themselves.
const PROC_RO: &[&str] = &["sys", "sysrq-trigger", "irq", "bus", "fs"];

/// What a bound path is on the host, known from planning (no second stat).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    /// A read-only bind mount of a host system path at the same path.
    Bind { path: PathBuf, kind: Kind },
    /// A bind mount of one of the caller's paths (resolved by the caller,
    /// opened again without following links) at the same path, when its
    /// place in the view says (`own_parts::place`).
    Caller {
        path: PathBuf,
        kind: Kind,
        writable: bool,
        at: Place,
    },
    /// A path inside a writable one, bound read-only over itself when it
    /// is reached without a symbolic link, once that one is (`at`).
    Protect { path: PathBuf, at: Place },
    /// A symlink recreated as it is on the host.
    Link { path: PathBuf, target: PathBuf },
    /// A size-capped tmpfs.
    Tmpfs { path: PathBuf, size_mb: u64 },
    /// A small host file copied into the (then read-only) new root: cheaper
    /// than a bind mount.
    Copy { path: PathBuf, len: u64 },
    /// A file of the new root written with `text` (the watcher's
    /// `/etc/resolv.conf`).
    Text { path: PathBuf, text: &'static str },
    /// A file covered by an empty one without any permission (hidden),
    /// once the caller's path holding it is bound (`at`; the system
    /// binds' place when none does).
    Hide { path: PathBuf, at: Place },
}

impl Entry {
    fn path(&self) -> &Path {
        match self {
            Entry::Bind { path, .. }
            | Entry::Caller { path, .. }
            | Entry::Protect { path, .. }
            | Entry::Link { path, .. }
            | Entry::Tmpfs { path, .. }
            | Entry::Copy { path, .. }
            | Entry::Text { path, .. }
            | Entry::Hide { path, .. } => path,
        }
    }

    /// Where it is placed: a caller's path where `own_parts::place` put
    /// it, what is inside one with it, the system's with the root.
    fn at(&self) -> Place {
        match self {
            Entry::Caller { at, .. } | Entry::Protect { at, .. } | Entry::Hide { at, .. } => *at,
            Entry::Bind { .. }
            | Entry::Link { .. }
            | Entry::Tmpfs { .. }
            | Entry::Copy { .. }
            | Entry::Text { .. } => Place::Root,
        }
    }
}

/// The paths the view is made of, resolved on the host before any mount.
/// Read-only, writable and protected lists are what Landlock enforces too.
#[derive(Debug, Default)]
pub struct View {
    entries: Vec<Entry>,
    /// Root callers: the system binds as detached idmapped trees, made by
    /// the helper ([`View::idmap`]), attached by PID 1 instead of binds.
    trees: Vec<(PathBuf, OwnedFd)>,
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
        let path = Path::new(p);
        if let Some(Kind::Dir) = optional(&mut v, path) {
            v.ro.push(path.to_path_buf());
        }
    }
    // Landlock's rule for /etc covers everything bound under it. What
    // not everyone may read stays out (a root caller's job is the host's
    // uid 0 on files).
    for name in ETC_RO {
        let path = Path::new("/etc").join(name);
        // With the watcher, the job's resolver is an address its device
        // answers, so every lookup is on the record: the host's (a
        // loopback stub such as 127.0.0.53 the most common) would be
        // refused by the job's own loopback, unseen.
        // Its hosts file names loopback and the sandbox's own host name
        // (which git looks up for a default e-mail domain), so that
        // those are no lookup on the record; the host's other names lead
        // nowhere from inside.
        let text = match *name {
            "resolv.conf" => Some(crate::tun::RESOLV_CONF),
            "hosts" => Some(crate::tun::HOSTS),
            _ => None,
        };
        if let (Some(text), Some(_)) = (text, &policy.direct) {
            v.entries.push(Entry::Text { path, text });
            continue;
        }
        match std::fs::symlink_metadata(&path) {
            Ok(m) if !m.file_type().is_symlink() && m.mode() & 0o004 == 0 => {}
            Ok(m) if m.is_file() && m.len() <= COPY_MAX => {
                v.entries.push(Entry::Copy { path, len: m.len() })
            }
            _ => {
                optional(&mut v, &path);
            }
        }
    }
    v.entries.push(Entry::Tmpfs {
        path: PathBuf::from("/tmp"),
        size_mb: policy.tmp_mb,
    });
    v.rw.push(PathBuf::from("/tmp"));
    let watched = policy.direct.is_some();
    // The caller's paths with their places (`own_parts.rs`).
    let mut placed: Vec<(&Path, Place, bool)> = Vec::new();
    for (paths, writable) in [(&policy.ro, false), (&policy.rw, true)] {
        for p in paths {
            let kind = caller_kind(p)?;
            let at = own_parts::place(p, watched)?;
            if writable { &mut v.rw } else { &mut v.ro }.push(p.clone());
            v.entries.push(Entry::Caller {
                path: p.clone(),
                kind,
                writable,
                at,
            });
            placed.push((p, at, writable));
        }
    }
    // The place of the deepest of the caller's paths holding `p` (below
    // it, with `inside`; writable ones only, with `writable`).
    let holder = |p: &Path, writable: bool, inside: bool| {
        placed
            .iter()
            .filter(|(c, _, w)| (*w || !writable) && p.starts_with(c) && !(inside && p == *c))
            .max_by_key(|(c, ..)| c.components().count())
            .map(|(_, at, _)| *at)
    };
    // Only inside a writable path is there anything to protect; whether it
    // exists is seen in the view, without following links.
    for p in &policy.protect {
        if let Some(at) = holder(p, true, true) {
            v.entries.push(Entry::Protect {
                path: p.clone(),
                at,
            });
        }
    }
    for p in &policy.hidden {
        if std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file()) {
            let at = holder(p, false, false).unwrap_or(Place::Root);
            v.entries.push(Entry::Hide {
                path: p.clone(),
                at,
            });
        }
    }
    // Parents before children; the order of equal depths is kept.
    v.entries.sort_by_key(|e| e.path().components().count());
    v.ro.push(PathBuf::from("/proc"));
    v.ro.push(PathBuf::from("/etc"));
    Ok(v)
}

impl View {
    /// Root callers (`idmap.rs`): every system bind becomes a detached
    /// idmapped tree in which the host's uid and gid 0 are not the job's.
    /// Runs in the helper before it leaves the host's user namespace.
    pub fn idmap(&mut self) -> Result<(), SetupError> {
        let userns = crate::idmap::owner_namespace()?;
        for e in &self.entries {
            if let Entry::Bind { path, .. } = e {
                let tree = crate::idmap::tree(path, &userns)?;
                self.trees.push((path.clone(), tree));
            }
        }
        Ok(())
    }

    fn tree(&self, path: &Path) -> Option<BorrowedFd<'_>> {
        self.trees
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, t)| t.as_fd())
    }
}

/// Adds an optional read-only system path: a symlink is recreated, a
/// directory or file bound; returns what was bound.
fn optional(v: &mut View, p: &Path) -> Option<Kind> {
    let m = std::fs::symlink_metadata(p).ok()?;
    if m.file_type().is_symlink() {
        let target = std::fs::read_link(p).ok()?;
        v.entries.push(Entry::Link {
            path: p.to_path_buf(),
            target,
        });
        return None;
    }
    let kind = if m.is_dir() { Kind::Dir } else { Kind::File };
    v.entries.push(Entry::Bind {
        path: p.to_path_buf(),
        kind,
    });
    Some(kind)
}

/// What a caller's path is, read without following a link: it must be an
/// absolute path without `.` or `..` whose last component is no link
/// (links on the way are refused when it is opened).
fn caller_kind(p: &Path) -> Result<Kind, SetupError> {
    let link = |source| SetupError::Link {
        path: p.to_path_buf(),
        source,
    };
    match beneath::relative(p) {
        Some(rel) if !rel.as_os_str().is_empty() => {}
        _ => return Err(link(Errno::EINVAL)),
    }
    let m = std::fs::symlink_metadata(p).map_err(|source| SetupError::Source {
        path: p.to_path_buf(),
        source,
    })?;
    if m.file_type().is_symlink() {
        return Err(link(Errno::ELOOP));
    }
    Ok(if m.is_dir() { Kind::Dir } else { Kind::File })
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

/// `struct mount_attr` of `mount_setattr(2)` (linux/mount.h, size VER0).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_NOEXEC: u64 = 0x8;
const AT_RECURSIVE: libc::c_uint = 0x8000;

/// Sets and clears mount flags on the mount at `target` (and every mount
/// below it with `recursive`). Needs Linux 5.12; the sandbox needs
/// Landlock (5.13) anyway.
fn set_flags(
    target: &Path,
    set: u64,
    clear: u64,
    recursive: bool,
    what: &'static str,
) -> Result<(), SetupError> {
    set_flags_at(None, target, set, clear, recursive, what)
}

/// [`set_flags`] on the mount `at` is the root of (`target` only names it
/// in errors), or on `target` when `at` is None.
fn set_flags_at(
    at: Option<BorrowedFd<'_>>,
    target: &Path,
    set: u64,
    clear: u64,
    recursive: bool,
    what: &'static str,
) -> Result<(), SetupError> {
    let err = |source| SetupError::MountFlags {
        what,
        target: target.to_path_buf(),
        source,
    };
    let path = match at {
        Some(_) => std::ffi::CString::default(),
        None => std::ffi::CString::new(target.as_os_str().as_encoded_bytes())
            .map_err(|_| err(Errno::EINVAL))?,
    };
    let (dirfd, empty) = match at {
        Some(fd) => (fd.as_raw_fd(), libc::AT_EMPTY_PATH as libc::c_uint),
        None => (libc::AT_FDCWD, 0),
    };
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = libc::AT_SYMLINK_NOFOLLOW as libc::c_uint
        | empty
        | if recursive { AT_RECURSIVE } else { 0 };
    // SAFETY: mount_setattr reads the NUL-terminated path and exactly
    // `size_of::<MountAttr>()` bytes of `attr`; both live across the call
    // (as does the descriptor, when there is one) and `MountAttr` has the
    // kernel's `struct mount_attr` layout (repr(C), four u64). It changes
    // mount flags only, no memory of this process.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dirfd,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(err(Errno::last()))
    }
}

/// Directories created in the new root so far: a mount point's parents are
/// made once, without a failing `mkdir` and a `stat` for each entry. Under
/// a writable bind (whose content the job may have written) they are made
/// with `mkdirat` in a directory opened without following links.
struct Dirs {
    /// The new root, opened once.
    new: OwnedFd,
    made: BTreeSet<PathBuf>,
    /// Writable binds made so far, relative to the new root.
    writable: Vec<PathBuf>,
}

impl Dirs {
    fn new(new: OwnedFd) -> Dirs {
        Dirs {
            new,
            made: BTreeSet::new(),
            writable: Vec::new(),
        }
    }

    /// Makes `dir` (under [`NEW`]) and its parents.
    fn make(&mut self, dir: &Path) -> Result<(), SetupError> {
        if self.made.contains(dir) || dir == Path::new(NEW) || dir == Path::new("/") {
            return Ok(());
        }
        if let Some(parent) = dir.parent() {
            self.make(parent)?;
        }
        let rel = dir.strip_prefix(NEW).unwrap_or(dir);
        if self.writable.iter().any(|w| rel.starts_with(w)) {
            self.in_parent(rel, beneath::mkdir)
                .map_err(|e| point_err(dir)(e.into()))?;
        } else {
            match std::fs::create_dir(dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(point_err(dir)(e)),
            }
        }
        self.made.insert(dir.to_path_buf());
        Ok(())
    }

    fn parent_of(&mut self, path: &Path) -> Result<(), SetupError> {
        match path.parent() {
            Some(parent) => self.make(parent),
            None => Ok(()),
        }
    }

    /// Runs `f` with the directory holding `rel` (relative to the new root,
    /// opened without following links) and `rel`'s last component.
    fn in_parent(
        &self,
        rel: &Path,
        f: impl FnOnce(BorrowedFd<'_>, &Path) -> Result<(), Errno>,
    ) -> Result<(), Errno> {
        let name = Path::new(rel.file_name().ok_or(Errno::EINVAL)?);
        match rel.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => {
                let dir = beneath::open(self.new.as_fd(), parent)?;
                f(dir.as_fd(), name)
            }
            _ => f(self.new.as_fd(), name),
        }
    }

    /// The mount point for a caller's path `rel` of `kind`, made when
    /// missing and opened without following links.
    fn point(&mut self, rel: &Path, kind: Kind) -> Result<OwnedFd, Errno> {
        let dst = Path::new(NEW).join(rel);
        if let Some(parent) = dst.parent() {
            self.make(parent).map_err(|_| Errno::ENOTDIR)?;
        }
        match kind {
            Kind::Dir => self.in_parent(rel, beneath::mkdir)?,
            Kind::File => self.in_parent(rel, beneath::file_point)?,
        }
        beneath::open(self.new.as_fd(), rel)
    }
}

/// An empty regular file as the mount point of a file bind.
fn file_point(dst: &Path) -> Result<(), SetupError> {
    match mknod(dst, SFlag::S_IFREG, Mode::from_bits_truncate(0o644), 0) {
        Ok(()) | Err(Errno::EEXIST) => Ok(()),
        Err(e) => Err(point_err(dst)(e.into())),
    }
}

/// Bind-mounts `src` (a path under the old root) at `dst` (under the new
/// root), whose mount point exists. Flags come later (see the module doc).
fn bind(src: &Path, dst: &Path) -> Result<(), SetupError> {
    let none: Option<&OsStr> = None;
    let what = || format!("bind of {}", src.display());
    match mount(Some(src), dst, none, MsFlags::MS_BIND, none) {
        // A mount with locked submounts can only be bound recursively.
        Err(Errno::EINVAL) => mount(
            Some(src),
            dst,
            none,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            none,
        )
        .map_err(|e| mount_err(what(), dst)(e)),
        other => other.map_err(|e| mount_err(what(), dst)(e)),
    }
}

/// The empty file without permissions bound over hidden programs, in the
/// staging root (never visible inside), opened as `O_PATH`.
fn hidden_file() -> Result<OwnedFd, SetupError> {
    let empty = Path::new(HIDDEN);
    std::fs::File::create(empty)
        .and_then(|f| f.set_permissions(std::fs::Permissions::from_mode(0o000)))
        .map_err(point_err(empty))?;
    beneath::open(
        beneath::open_dir(Path::new("/"))
            .map_err(|e| point_err(empty)(e.into()))?
            .as_fd(),
        Path::new(HIDDEN.trim_start_matches('/')),
    )
    .map_err(|e| point_err(empty)(e.into()))
}

/// Attaches a detached tree (the helper's idmapped clone of a system
/// path) at `dst` in the new root, whose mount point exists.
fn attach(tree: BorrowedFd<'_>, dst: &Path) -> Result<(), SetupError> {
    let point = nix::fcntl::open(
        dst,
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| point_err(dst)(e.into()))?;
    // SAFETY: `point` was just returned by open(2), owned by nothing else.
    let point = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(point) };
    beneath::attach(tree, point.as_fd())
        .map_err(|e| mount_err(format!("idmapped bind of {}", dst.display()), dst)(e))
}

/// Copies a small host file into the new root (kernel-side, no buffer).
fn copy(src: &Path, dst: &Path, len: u64) -> Result<(), SetupError> {
    let err = |source| SetupError::Copy {
        path: src.to_path_buf(),
        source,
    };
    let from = std::fs::File::open(src).map_err(err)?;
    let to = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(dst)
        .map_err(err)?;
    let mut left = usize::try_from(len).map_err(|_| err(std::io::ErrorKind::InvalidData.into()))?;
    while left > 0 {
        match nix::sys::sendfile::sendfile(to.as_fd(), from.as_fd(), None, left) {
            Ok(0) => break,
            Ok(n) => left = left.saturating_sub(n),
            Err(Errno::EINTR) => {}
            Err(e) => return Err(err(e.into())),
        }
    }
    Ok(())
}

/// Writes `text` into the new file `dst` (readable by all, as copies are).
fn write_new(dst: &Path, text: &[u8]) -> Result<(), SetupError> {
    let err = |source| SetupError::Copy {
        path: dst.to_path_buf(),
        source,
    };
    let mut to = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(dst)
        .map_err(err)?;
    std::io::Write::write_all(&mut to, text).map_err(err)
}

/// What PID 1 writes through its fresh /proc before that /proc's `sys`
/// is read-only.
pub struct Knobs<'a> {
    /// The run's pids cap, as its PID namespace's `pid_max` (`pid_cap.rs`).
    pub pids: Option<u64>,
    /// Whether the caller is the host's root (`pid_cap::host_root`).
    pub host_root: bool,
    /// The run's shares of its caller's per-user counts, as its user
    /// namespace's maxima (`user_counts.rs`).
    pub shares: &'a [(&'static str, u64)],
}

/// Builds the view and switches into it. Runs in the new mount namespace,
/// as PID 1 of the new PID namespace, before any capability is dropped.
/// `knobs` are written through the fresh /proc; returns whether the PID
/// namespace's `pid_max` holds the pids cap.
pub fn enter(
    view: &View,
    uid: u32,
    gid: u32,
    home: Option<&str>,
    knobs: &Knobs<'_>,
) -> Result<bool, SetupError> {
    let (old, mut dirs) = stage()?;
    let new = Path::new(NEW);
    write_users(&mut dirs, uid, gid, home.unwrap_or("/"))?;
    trace::step("passwd, group");
    let binds = place(view, &old, &mut dirs, Place::Root)?;
    trace::step("binds, copies");
    let dev = new.join("dev");
    let proc = new.join("proc");
    dirs.make(&dev)?;
    dirs.make(&proc)?;
    seal(new, &binds)?;
    trace::step("read-only flags");
    dev_mounts(&dev)?;
    // The caller's paths under /dev (`own_parts.rs`), which the /dev just
    // mounted would have hidden, bound and sealed like the rest.
    let binds = place(view, &old, &mut dirs, Place::Dev)?;
    seal_each(&binds)?;
    set_flags(&dev, MOUNT_ATTR_RDONLY, 0, false, "read-only /dev")?;
    trace::step("/dev");
    let pid_max_held = proc_mounts(&proc, knobs)?;
    trace::step("/proc");
    switch(new)?;
    Ok(pid_max_held)
}

/// `/` made private, a staging root pivoted onto (the host's root stays
/// reachable at /oldroot while the new root is populated at /newroot):
/// the host's root and the new root, opened.
fn stage() -> Result<(OwnedFd, Dirs), SetupError> {
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
    let old = beneath::open_dir(Path::new(OLD)).map_err(|e| point_err(Path::new(OLD))(e.into()))?;
    let dirs = Dirs::new(beneath::open_dir(new).map_err(|e| point_err(new)(e.into()))?);
    trace::step("root staged");
    Ok((old, dirs))
}

/// /etc: a directory in the new root, with generated passwd and group.
fn write_users(dirs: &mut Dirs, uid: u32, gid: u32, home: &str) -> Result<(), SetupError> {
    let etc = Path::new(NEW).join("etc");
    dirs.make(&etc)?;
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
    Ok(())
}

/// A mount of the view whose flags are set once it is placed: its root,
/// opened, its path under [`NEW`], and whether it stays writable.
struct Placed {
    root: OwnedFd,
    path: PathBuf,
    writable: bool,
}

/// Places the entries of the view that go at `at` (`own_parts::Place`:
/// under /dev once /dev is built, the rest before) in the new root
/// (`old`: the host's root): mount points that must exist before the
/// tree turns read-only. Returns the caller's binds and the tmpfs mounts
/// (their roots, opened), in order.
fn place(
    view: &View,
    old: &OwnedFd,
    dirs: &mut Dirs,
    at: Place,
) -> Result<Vec<Placed>, SetupError> {
    let mut placed: Vec<Placed> = Vec::new();
    // The empty file bound over hidden programs, made on first use.
    let mut hidden: Option<OwnedFd> = None;
    for e in view.entries.iter().filter(|e| e.at() == at) {
        let dst = under(NEW, e.path());
        match e {
            Entry::Bind { path, kind } => {
                match kind {
                    Kind::Dir => dirs.make(&dst)?,
                    Kind::File => {
                        dirs.parent_of(&dst)?;
                        file_point(&dst)?;
                    }
                }
                match view.tree(path) {
                    Some(tree) => attach(tree, &dst)?,
                    None => bind(&under(OLD, path), &dst)?,
                }
            }
            Entry::Caller {
                path,
                kind,
                writable: w,
                ..
            } => {
                let root = place_caller(old, dirs, path, *kind, &dst)?;
                if *w {
                    if let Some(rel) = beneath::relative(path) {
                        dirs.writable.push(rel.to_path_buf());
                    }
                }
                placed.push(Placed {
                    root,
                    path: dst,
                    writable: *w,
                });
            }
            Entry::Protect { path, .. } => {
                let Some(rel) = beneath::relative(path) else {
                    continue;
                };
                // Missing, or behind a link: nothing is protected there, and
                // nothing is followed.
                let Ok(point) = beneath::open(dirs.new.as_fd(), rel) else {
                    continue;
                };
                beneath::bind(point.as_fd(), point.as_fd()).map_err(|e| {
                    mount_err(format!("read-only bind of {}", path.display()), &dst)(e)
                })?;
            }
            Entry::Link { target, .. } => {
                dirs.parent_of(&dst)?;
                symlink(target, &dst).map_err(point_err(&dst))?;
            }
            Entry::Copy { path, len } => {
                dirs.parent_of(&dst)?;
                copy(&under(OLD, path), &dst, *len)?;
            }
            Entry::Text { text, .. } => {
                dirs.parent_of(&dst)?;
                write_new(&dst, text.as_bytes())?;
            }
            Entry::Hide { path, .. } => {
                let empty = match &hidden {
                    Some(fd) => fd,
                    None => hidden.insert(hidden_file()?),
                };
                hide(dirs, path, empty, &dst)?;
            }
            Entry::Tmpfs { size_mb, .. } => {
                dirs.make(&dst)?;
                tmpfs(
                    &dst,
                    &format!("mode=1777,size={size_mb}m"),
                    MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                )?;
                let root = beneath::open_dir(&dst).map_err(|e| point_err(&dst)(e.into()))?;
                placed.push(Placed {
                    root,
                    path: dst,
                    writable: true,
                });
            }
        }
    }
    Ok(placed)
}

/// Binds the caller's `path` (opened beneath the host's root `old`, no
/// link followed) at `dst`; returns the mount's root, opened.
fn place_caller(
    old: &OwnedFd,
    dirs: &mut Dirs,
    path: &Path,
    kind: Kind,
    dst: &Path,
) -> Result<OwnedFd, SetupError> {
    let link = |source| SetupError::Link {
        path: path.to_path_buf(),
        source,
    };
    let rel = beneath::relative(path).ok_or(Errno::EINVAL).map_err(link)?;
    let src = beneath::open(old.as_fd(), rel).map_err(link)?;
    let point = dirs
        .point(rel, kind)
        .map_err(|e| point_err(dst)(e.into()))?;
    beneath::bind(src.as_fd(), point.as_fd())
        .map_err(|e| mount_err(format!("bind of {}", path.display()), dst)(e))
}

/// Covers the hidden program `path` with the empty file `empty`: opened
/// once, without following a link, and covered through that descriptor,
/// so no path is looked up again.
fn hide(dirs: &Dirs, path: &Path, empty: &OwnedFd, dst: &Path) -> Result<(), SetupError> {
    let hide = |source| SetupError::Link {
        path: path.to_path_buf(),
        source,
    };
    let rel = beneath::relative(path).ok_or(Errno::EINVAL).map_err(hide)?;
    let point = beneath::open(dirs.new.as_fd(), rel).map_err(hide)?;
    let st = nix::sys::stat::fstat(point.as_raw_fd()).map_err(hide)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(hide(Errno::EISDIR));
    }
    beneath::bind(empty.as_fd(), point.as_fd())
        .map_err(|e| mount_err(format!("cover of hidden {}", path.display()), dst)(e))?;
    Ok(())
}

/// The whole tree read-only, nosuid, nodev; then the writable paths.
fn seal(new: &Path, binds: &[Placed]) -> Result<(), SetupError> {
    set_flags(
        new,
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        0,
        true,
        "read-only, nosuid, nodev",
    )?;
    unseal_writable(binds)
}

/// [`seal`] for binds placed under /dev, whose device nodes keep their
/// flags: each bind (and every mount under it) read-only, nosuid, nodev;
/// then the writable ones.
fn seal_each(binds: &[Placed]) -> Result<(), SetupError> {
    for b in binds {
        set_flags_at(
            Some(b.root.as_fd()),
            &b.path,
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
            0,
            true,
            "read-only, nosuid, nodev",
        )?;
    }
    unseal_writable(binds)
}

/// `rdonly` cleared on the writable binds, in order: a protected path
/// inside a writable one is its own mount and keeps its read-only flag.
fn unseal_writable(binds: &[Placed]) -> Result<(), SetupError> {
    for b in binds.iter().filter(|b| b.writable) {
        set_flags_at(
            Some(b.root.as_fd()),
            &b.path,
            0,
            MOUNT_ATTR_RDONLY,
            false,
            "writable",
        )?;
    }
    Ok(())
}

/// Switch: the new root on top, the staging root (with the host's root
/// under it) detached.
fn switch(new: &Path) -> Result<(), SetupError> {
    let root = Path::new("/");
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
    })
}

/// A minimal /dev: a few device nodes bound from the host, the standard
/// symlinks, a private /dev/shm and, when the kernel allows it, a private
/// devpts instance. The /dev tmpfs itself ends read-only (once the
/// caller's paths under it are bound, by [`enter`]); the device binds,
/// /dev/shm and /dev/pts are their own mounts.
fn dev_mounts(dev: &Path) -> Result<(), SetupError> {
    tmpfs(
        dev,
        "mode=0755,size=64k",
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
    )?;
    // `dev` with a path of the view's /dev.
    let at = |p: &str| dev.join(Path::new(p).strip_prefix("/dev").unwrap_or(Path::new(p)));
    for d in own_parts::DEVICES {
        let dst = at(d);
        file_point(&dst)?;
        // A device node needs no remount: it cannot be executed, and its
        // mount keeps the host /dev's flags.
        bind(&under(OLD, Path::new(d)), &dst)?;
    }
    for (link, target, _) in own_parts::DEV_LINKS {
        let p = at(link);
        symlink(target, &p).map_err(point_err(&p))?;
    }
    let shm = dev.join("shm");
    std::fs::create_dir(&shm).map_err(point_err(&shm))?;
    let pts = dev.join("pts");
    std::fs::create_dir(&pts).map_err(point_err(&pts))?;
    tmpfs(
        &shm,
        "mode=1777,size=64m",
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
    )?;
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
/// bound read-only over themselves; before that, `knobs` written (whether
/// the PID namespace's `pid_max` holds the pids cap is returned).
fn proc_mounts(proc: &Path, knobs: &Knobs<'_>) -> Result<bool, SetupError> {
    mount(
        Some(OsStr::new("proc")),
        proc,
        Some(OsStr::new("proc")),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&OsStr>,
    )
    .map_err(mount_err("proc", proc))?;
    let pid_max_held = knobs
        .pids
        .is_some_and(|cap| crate::pid_cap::write_pid_max(proc, cap, knobs.host_root));
    // A maximum the kernel refused stays as it was (`user_counts.rs`).
    let _refused = crate::user_counts::write(proc, knobs.shares);
    for name in PROC_RO {
        let p = proc.join(name);
        match bind(&p, &p) {
            // Not every kernel has every knob.
            Err(SetupError::Mount {
                source: Errno::ENOENT,
                ..
            }) => continue,
            other => other?,
        }
        set_flags(
            &p,
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
            0,
            false,
            "read-only",
        )?;
    }
    Ok(pid_max_held)
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

    /// Each entry is placed where `own_parts::place` put the caller's
    /// path holding it: a caller's path under /dev, what is protected or
    /// hidden in it, once /dev is built; the system's, and the caller's
    /// elsewhere, with the root.
    #[test]
    fn plan_places_entries_where_their_callers_path_is_placed() {
        let shm = tempfile::tempdir_in("/dev/shm").unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let (s, e) = (
            shm.path().canonicalize().unwrap(),
            elsewhere.path().canonicalize().unwrap(),
        );
        let (work, bin, home) = (s.join("work"), s.join("bin"), e.join("home"));
        for d in [&work.join(".git/hooks"), &bin, &home.join("bin")] {
            std::fs::create_dir_all(d).unwrap();
        }
        for f in [bin.join("git"), home.join("bin/curl")] {
            std::fs::write(f, "").unwrap();
        }
        let mut policy = crate::launch::tests::policy();
        policy.ro = vec![bin.clone()];
        policy.rw = vec![work.clone(), home.clone()];
        policy.protect = vec![work.join(".git/hooks"), home.join(".bashrc")];
        policy.hidden = vec![bin.join("git"), home.join("bin/curl")];
        let view = plan(&policy).unwrap();
        let placed: Vec<(&Path, Place)> = view
            .entries
            .iter()
            .map(|entry| (entry.path(), entry.at()))
            .filter(|(p, at)| p.starts_with(&s) || p.starts_with(&e) || *at == Place::Dev)
            .collect();
        assert_eq!(
            placed,
            // Parents first (/tmp's tempdir is one shallower).
            vec![
                (home.as_path(), Place::Root),
                (bin.as_path(), Place::Dev),
                (work.as_path(), Place::Dev),
                (home.join(".bashrc").as_path(), Place::Root),
                (bin.join("git").as_path(), Place::Dev),
                (home.join("bin/curl").as_path(), Place::Root),
                (work.join(".git/hooks").as_path(), Place::Dev),
            ]
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

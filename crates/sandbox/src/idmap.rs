//! Root callers: the host's root-only system files stay closed to the job.
//! A root caller's job runs as uid 0 of a user namespace mapped to host
//! uid 0, so on every file of a plain bind it is the owner: a root-owned
//! file of `/usr` or `/opt` with mode 0600 (0700, 0640 with group root)
//! would be readable through its owner (or group) bits, capabilities or
//! not. So for a root caller the helper, while it still has the host's
//! privileges (before it unshares its user namespace), clones each system
//! bind as a detached mount (`open_tree(OPEN_TREE_CLONE)`) and makes it an
//! idmapped mount (`mount_setattr(MOUNT_ATTR_IDMAP)`) through a throwaway
//! user namespace that maps on-disk uid and gid 0 to [`OWNER`]: inside the
//! view the host's root files belong to an id the job never has, and only
//! their "other" bits apply. PID 1 attaches the detached trees in its
//! mount namespace (`move_mount`). A filesystem that cannot be idmapped
//! fails the set-up (fail closed): there is no other way to keep the
//! owner bits from applying.

use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;

use crate::error::SetupError;

/// The host uid and gid the system files' on-disk owner 0 becomes in an
/// idmapped bind (never the job's: its uid is 0 and it cannot change
/// groups). Inside the sandbox it shows as the overflow id (`nobody`).
pub const OWNER: u32 = 0xFFFF_FFFE;

const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;

/// `struct mount_attr` of `mount_setattr(2)` (linux/mount.h, size VER0).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// A user namespace mapping uid and gid 0 to [`OWNER`] (nothing else),
/// held by a descriptor: the idmapping of the system binds. Needs
/// `CAP_SETUID`/`CAP_SETGID` in the caller's user namespace.
pub fn owner_namespace() -> Result<OwnedFd, SetupError> {
    let err = |source| SetupError::Idmap {
        path: PathBuf::from("user namespace"),
        source,
    };
    // A child that only exists so that its user namespace can be mapped and
    // opened: it shares this process's memory (no copy) and exits at once;
    // CLONE_VFORK suspends this thread until it has. The zombie keeps its
    // credentials, hence the namespace, until it is reaped below.
    let mut stack = vec![0u8; 16 * 1024];
    let top = stack.as_mut_ptr().wrapping_add(stack.len() - 64);
    let top = top.wrapping_sub(top as usize % 16);
    extern "C" fn child(_: *mut libc::c_void) -> libc::c_int {
        0
    }
    // SAFETY: `top` points into `stack`, 16-byte aligned, with 16 KiB
    // below it, and `stack` lives until after the child has exited
    // (CLONE_VFORK: clone returns only then). The child runs `child` on
    // that stack, touching nothing of this process's memory, and exits.
    // No CLONE_FILES, CLONE_FS, CLONE_SIGHAND, CLONE_THREAD: the child
    // shares only the memory it does not use.
    let pid = unsafe {
        libc::clone(
            child,
            top.cast(),
            libc::CLONE_NEWUSER | libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            std::ptr::null_mut(),
        )
    };
    if pid < 0 {
        return Err(err(Errno::last()));
    }
    let pid = nix::unistd::Pid::from_raw(pid);
    let opened = map_and_open(pid);
    let _ = nix::sys::wait::waitpid(pid, None);
    drop(stack);
    opened
}

fn map_and_open(pid: nix::unistd::Pid) -> Result<OwnedFd, SetupError> {
    let map = format!("0 {OWNER} 1");
    for name in ["uid_map", "gid_map"] {
        let path = PathBuf::from(format!("/proc/{pid}/{name}"));
        std::fs::write(&path, &map).map_err(|source| SetupError::IdMap { path, source })?;
    }
    let path = PathBuf::from(format!("/proc/{pid}/ns/user"));
    std::fs::File::open(&path)
        .map(OwnedFd::from)
        .map_err(|e| SetupError::Idmap {
            path,
            source: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
        })
}

/// A detached, idmapped (through `userns`) clone of the mount at `path`,
/// with its submounts when the kernel requires them; PID 1 attaches it.
pub fn tree(path: &Path, userns: &OwnedFd) -> Result<OwnedFd, SetupError> {
    let err = |source| SetupError::Idmap {
        path: path.to_path_buf(),
        source,
    };
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| err(Errno::EINVAL))?;
    let clone = |extra: libc::c_uint| {
        // SAFETY: open_tree reads the NUL-terminated path `c`, alive for the
        // call, and returns a new close-on-exec descriptor or -1.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_open_tree,
                libc::AT_FDCWD,
                c.as_ptr(),
                OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | extra,
            )
        };
        match libc::c_int::try_from(fd) {
            Ok(fd) if fd >= 0 => {
                // SAFETY: the kernel just returned `fd`, open and owned by
                // nothing else.
                Ok(unsafe { OwnedFd::from_raw_fd(fd) })
            }
            _ => Err(Errno::last()),
        }
    };
    let tree = match clone(0) {
        Err(Errno::EINVAL) => clone(libc::AT_RECURSIVE as libc::c_uint),
        other => other,
    }
    .map_err(err)?;
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_IDMAP,
        attr_clr: 0,
        propagation: 0,
        userns_fd: u64::try_from(userns.as_raw_fd()).map_err(|_| err(Errno::EBADF))?,
    };
    let empty = c"";
    // SAFETY: mount_setattr reads the empty NUL-terminated path and
    // `size_of::<MountAttr>()` bytes of `attr` (the kernel's layout, four
    // u64), both alive across the call, as are both descriptors. It changes
    // the detached mount's idmapping only.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            empty.as_ptr(),
            (libc::AT_EMPTY_PATH | libc::AT_RECURSIVE) as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc != 0 {
        return Err(err(Errno::last()));
    }
    Ok(tree)
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd as _;

    use super::*;

    /// Through an idmapped tree, a file the host's root owns belongs to
    /// [`OWNER`] (uid and gid), and a file of another owner keeps its ids
    /// unmapped (the overflow id).
    #[test]
    fn root_owned_files_belong_to_the_owner_id() {
        if !nix::unistd::geteuid().is_root() {
            assert!(std::env::var("CI").is_err(), "this test needs root in CI");
            eprintln!("skipping: idmapped mounts need root");
            return;
        }
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        std::fs::write(dir.path().join("root-file"), "x").unwrap();
        std::fs::write(dir.path().join("other-file"), "x").unwrap();
        std::os::unix::fs::chown(dir.path().join("other-file"), Some(12_345), Some(12_345))
            .unwrap();
        let userns = owner_namespace().unwrap();
        let tree = tree(dir.path(), &userns).unwrap();
        let ids = |name: &str| {
            let st = nix::sys::stat::fstatat(
                Some(tree.as_raw_fd()),
                name,
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            )
            .unwrap();
            (st.st_uid, st.st_gid)
        };
        let overflow: u32 = std::fs::read_to_string("/proc/sys/fs/overflowuid")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(
            [ids("root-file"), ids("other-file")],
            [(OWNER, OWNER), (overflow, overflow)]
        );
    }
}

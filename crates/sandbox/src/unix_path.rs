//! Unix-socket paths of any length. A socket address holds at most 107
//! bytes of path (`sun_path`), so a job's broker socket,
//! `<state dir>/paddock/jobs/<job id>/meta/broker.sock`, cannot be bound or
//! reached by its own name once the state directory is longer than about
//! 40 bytes. Longer paths go through the socket's directory, opened
//! (`O_PATH`, the last component not followed) by the process that binds
//! or connects and named `/proc/self/fd/<fd>/<socket name>`: the kernel
//! resolves that to the same directory however long its real path is. The
//! socket stays where it is, so who can reach it does not change (the job
//! never sees it: the forwarder connects from outside the job's view).

use std::os::unix::fs::OpenOptionsExt as _;
use std::os::unix::io::AsRawFd as _;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// The longest path a socket address holds (`sun_path` less its NUL).
pub const MAX: usize = 107;

/// Binds a listening socket at `path`, whatever its length.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    with_short_name(path, |p| UnixListener::bind(p))
}

/// Connects to the socket at `path`, whatever its length.
pub fn connect(path: &Path) -> std::io::Result<UnixStream> {
    with_short_name(path, |p| UnixStream::connect(p))
}

/// Calls `f` with `path` itself when it fits a socket address, else with a
/// `/proc/self/fd` name of it that does (module text), for a caller that
/// binds or connects its own way (non-blocking, say).
pub fn with_short_name<T>(
    path: &Path,
    f: impl FnOnce(&Path) -> std::io::Result<T>,
) -> std::io::Result<T> {
    if path.as_os_str().len() <= MAX {
        return f(path);
    }
    let invalid = |what: &str| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("socket path {}: {what}", path.display()),
        )
    };
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(invalid("no directory and file name"));
    };
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(dir)?;
    let short = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd())).join(name);
    if short.as_os_str().len() > MAX {
        return Err(invalid("its file name alone is too long for a socket"));
    }
    // `dir` stays open until `f` has bound or connected.
    let out = f(&short);
    drop(dir);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A socket 200 bytes deep is bound and reached by its own path, which
    /// the plain calls refuse (the positive twin: a short one works both
    /// ways).
    #[test]
    fn a_socket_of_any_path_length_is_bound_and_reached() {
        let root = tempfile::tempdir().unwrap();
        let deep = root.path().join("d".repeat(100)).join("e".repeat(100));
        std::fs::create_dir_all(&deep).unwrap();
        let long = deep.join("broker.sock");
        assert!(long.as_os_str().len() > MAX);
        assert!(UnixListener::bind(&long).is_err());
        let listener = bind(&long).unwrap();
        assert!(long.exists());
        assert!(UnixStream::connect(&long).is_err());
        let mut client = connect(&long).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        use std::io::{Read as _, Write as _};
        client.write_all(b"ping").unwrap();
        let mut buf = [0u8; 4];
        server.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ping");

        let short = root.path().join("s.sock");
        let listener = bind(&short).unwrap();
        let _client = connect(&short).unwrap();
        assert!(listener.accept().is_ok());
    }

    #[test]
    fn a_missing_directory_is_the_open_error() {
        let long = Path::new("/nonexistent")
            .join("x".repeat(120))
            .join("s.sock");
        assert_eq!(
            connect(&long).map(|_| ()).map_err(|e| e.kind()),
            Err(std::io::ErrorKind::NotFound)
        );
    }
}

//! Small `/proc` files (a process's `stat`, read for every process of the
//! host by each scan: the leftovers scans at a job's start and end, the
//! disk watcher's, the own-children climb) read in as few system calls as
//! their size allows: one `open`, `read`s into the caller's stack buffer
//! until end of file, one `close`. `std::fs::read` asks the file's size
//! first (`statx`), which procfs reports as 0, and so starts with a 32-byte
//! probe read and grows its buffer: seven or more calls for one
//! `/proc/PID/stat` where this makes four, in scans that grow with the
//! host's process count (issue #14). A file longer than the buffer is not
//! read (`None`): the caller's bound, never a cut record.

use std::io::Read as _;
use std::path::Path;

/// The whole of the file at `path` in `buf`, or `None` when it cannot be
/// opened or read or does not fit (its length reaches the buffer's: the
/// read that finds its end needs room).
pub(crate) fn small<'a>(path: &Path, buf: &'a mut [u8]) -> Option<&'a [u8]> {
    let mut file = std::fs::File::open(path).ok()?;
    let mut len = 0;
    loop {
        let free = buf.get_mut(len..).filter(|rest| !rest.is_empty())?;
        match file.read(free) {
            Ok(0) => return buf.get(..len),
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

/// The buffer a process's `stat` line is read into: its fields are 52
/// numbers and a name of at most 64 bytes (`TASK_COMM_LEN` is 16; a
/// kernel thread's name is longer), well within it.
pub(crate) const STAT_BYTES: usize = 1024;

#[cfg(test)]
mod tests {
    use super::*;

    /// A file is read whole, across reads, when shorter than its buffer;
    /// one as long is not read at all; a missing file is none.
    #[test]
    fn a_file_is_read_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let fits = dir.path().join("fits");
        let over = dir.path().join("over");
        std::fs::write(&fits, b"012345678").unwrap();
        std::fs::write(&over, b"0123456789").unwrap();
        let mut buf = [0u8; 10];
        let read = small(&fits, &mut buf).map(<[u8]>::to_vec);
        let mut buf = [0u8; 10];
        let too_long = small(&over, &mut buf).map(<[u8]>::to_vec);
        let mut buf = [0u8; 10];
        let missing = small(&dir.path().join("gone"), &mut buf).map(<[u8]>::to_vec);
        assert_eq!(
            (read, too_long, missing),
            (Some(b"012345678".to_vec()), None, None)
        );
    }

    /// This process's own `stat` line, as the kernel writes it, fits and
    /// starts with its pid.
    #[test]
    fn a_processs_stat_line_fits() {
        let mut buf = [0u8; STAT_BYTES];
        let line = small(Path::new("/proc/self/stat"), &mut buf).unwrap();
        let pid = std::process::id().to_string();
        assert_eq!(line.split(|b| *b == b' ').next(), Some(pid.as_bytes()));
    }
}

//! Reading a file the job can write (a denial record, an engine's session
//! files in the job's home): never through a link, only a regular file
//! (a FIFO or device put in its place reads as nothing), and never more
//! than a bound per read.

use std::io::{Read as _, Seek as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// Up to `max` bytes of the file at `path` from `offset`; nothing when it
/// is absent, a link, not a regular file, or unreadable.
pub fn read_from(path: &Path, offset: u64, max: u64) -> Vec<u8> {
    let Ok(mut file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
    else {
        return Vec::new();
    };
    match file.metadata() {
        Ok(m) if m.is_file() && m.len() > offset => {}
        _ => return Vec::new(),
    }
    let mut out = Vec::new();
    if file.seek(std::io::SeekFrom::Start(offset)).is_err()
        || file.take(max).read_to_end(&mut out).is_err()
    {
        return Vec::new();
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn links_fifos_and_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"0123456789").unwrap();
        assert_eq!(read_from(&file, 2, 3), b"234".to_vec());
        assert_eq!(read_from(&file, 20, 3), Vec::<u8>::new());
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_from(&link, 0, 100), Vec::<u8>::new());
        let fifo = dir.path().join("p");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(read_from(&fifo, 0, 100), Vec::<u8>::new());
        assert_eq!(
            read_from(&dir.path().join("absent"), 0, 100),
            Vec::<u8>::new()
        );
    }
}

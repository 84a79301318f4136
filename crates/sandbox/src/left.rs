//! How many processes a command left running when it exited, as its
//! caller is told. The sandbox's PID 1 (on the run's "the command runs"
//! pipe, after [`STARTED`](crate::policy::STARTED): `started.rs`) and the
//! `process` rung's supervisor (`paddock`'s `supervise.rs`, on a pipe of
//! its own) count the processes of the command's tree still running once
//! the command itself was reaped (a double fork, a `setsid` or `nohup`
//! daemon, a background `&`), kill them, and write [`LEFT`] and the count
//! (8 bytes, little-endian) before they exit. The command never holds the
//! pipe (close-on-exec; its holder is not dumpable, so its descriptors
//! cannot be opened through `/proc`): nothing the command does or prints
//! writes a count or keeps one from being written. A run that ends
//! otherwise (stopped, timed out, its PID 1 or supervisor killed) writes
//! none.

/// What precedes the count.
pub const LEFT: u8 = b'L';

/// The bytes that say `count` processes were left running.
pub fn report(count: u64) -> [u8; 9] {
    let mut out = [0u8; 9];
    out[0] = LEFT;
    out[1..].copy_from_slice(&count.to_le_bytes());
    out
}

/// The count in what the caller read (after the
/// [`STARTED`](crate::policy::STARTED) byte, where the pipe is the run's):
/// none when no count was written, or the bytes are not one report.
pub fn read(bytes: &[u8]) -> Option<u64> {
    match bytes {
        [LEFT, count @ ..] => <[u8; 8]>::try_from(count).ok().map(u64::from_le_bytes),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report reads back as its count; nothing, a cut report, one with
    /// bytes past it, or another byte first reads as none.
    #[test]
    fn a_report_reads_back_and_nothing_else_does() {
        let three = report(3);
        let mut longer = three.to_vec();
        longer.push(0);
        assert_eq!(
            [
                read(&three),
                read(&report(0)),
                read(&[]),
                read(&three[..8]),
                read(&longer),
                read(&[b'S', 3, 0, 0, 0, 0, 0, 0, 0]),
            ],
            [Some(3), Some(0), None, None, None, None]
        );
    }
}

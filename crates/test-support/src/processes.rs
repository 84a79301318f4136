//! The processes a test started through Paddock, found on the host by what
//! they run and by the test's own home in their environment: another test
//! beside this one (or another checkout's test run on this host) runs the
//! same commands, never under this home.

use std::path::Path;

/// The pids of the processes running exactly `cmdline` (NUL-separated, as
/// `/proc/PID/cmdline` holds it) with `home` anywhere in their environment
/// (a PATH entry of the test's, a directory variable).
pub fn running_under(home: &Path, cmdline: &[u8]) -> Vec<u32> {
    let home = home.as_os_str().as_encoded_bytes();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter(|p| std::fs::read(p.path().join("cmdline")).is_ok_and(|c| c == cmdline))
        .filter(|p| {
            std::fs::read(p.path().join("environ"))
                .is_ok_and(|env| env.windows(home.len()).any(|w| w == home))
        })
        .filter_map(|p| p.file_name().to_str()?.parse().ok())
        .collect()
}

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

/// Waits for `child` (started with its stdout piped) and samples its peak
/// resident memory (`VmHWM` of `/proc/PID/status`) every 50 ms while it
/// runs: its output and the last peak read, in KiB.
pub async fn output_and_peak_kib(mut child: tokio::process::Child) -> (std::process::Output, u64) {
    let status = child.id().map(|pid| format!("/proc/{pid}/status"));
    let peak_kib = |text: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
    };
    let mut peak = 0;
    loop {
        if let Some(kib) = status
            .as_ref()
            .and_then(|s| std::fs::read_to_string(s).ok())
            .as_deref()
            .and_then(peak_kib)
        {
            peak = kib;
        }
        if let Ok(Some(_)) = child.try_wait() {
            return (child.wait_with_output().await.unwrap(), peak);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// This process's peak resident memory (`VmHWM` of `/proc/self/status`)
/// and its resident memory now (`VmRSS`), in KiB: for a test that
/// measures what a step it runs in-process holds (in a copy of the test
/// binary of its own, so no other test's memory is counted).
pub fn own_memory_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /proc/self/status"))
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// Runs the test named `test` (its whole path) alone in a new process of
/// this test binary, with `var` set to `value` (how that process knows it
/// is the probe), and returns its probe line: the text after `probe: `,
/// split at its last space into what the probe saw and the KiB it
/// measured ([`own_memory_kib`]), so that no other test's memory is
/// counted.
pub fn probe_alone(test: &str, var: &str, value: impl AsRef<std::ffi::OsStr>) -> (String, u64) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(var, value)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.split("probe: ").nth(1))
        .and_then(|l| l.rsplit_once(' '))
        .map(|(seen, kib)| (seen.to_string(), kib.parse().unwrap()))
        .unwrap_or_else(|| panic!("no probe line in {text}"))
}

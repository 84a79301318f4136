//! What the benchmarks (`crates/paddock/examples/*_bench.rs`) share: the
//! machine's load average, which every figure they print is read against.

/// The load average (1, 5 and 15 minutes) as `/proc/loadavg` gives it;
/// empty where there is none.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

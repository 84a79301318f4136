//! An opt-in timeline of a sandbox's set-up, for finding where a slow
//! start goes on a given host: with `PADDOCK_SANDBOX_TRACE=1` in the
//! environment of `paddock sandbox`, each step prints one line to stderr,
//! `paddock sandbox: trace +MICROS us pid PID STEP`, the time since the
//! process started its set-up. The helper and the sandbox's PID 1 (a clone
//! of it) share the starting instant, so their lines merge into one
//! timeline. Off, a step costs one relaxed atomic load.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// The environment variable that turns the timeline on.
pub const TRACE_VAR: &str = "PADDOCK_SANDBOX_TRACE";

static ON: AtomicBool = AtomicBool::new(false);
static START: OnceLock<Instant> = OnceLock::new();

/// Starts the timeline when [`TRACE_VAR`] is set (to anything but `0` or
/// the empty string); call first thing. Later calls do nothing.
pub fn init() {
    if START.get().is_some() {
        return;
    }
    let on = std::env::var_os(TRACE_VAR).is_some_and(|v| !v.is_empty() && v != "0");
    if on {
        START.get_or_init(Instant::now);
        ON.store(true, Ordering::Relaxed);
        step("start");
    }
}

/// Records that `name` is done.
pub fn step(name: &str) {
    if !ON.load(Ordering::Relaxed) {
        return;
    }
    let micros = START.get().map(|s| s.elapsed().as_micros()).unwrap_or(0);
    let line = format!(
        "paddock sandbox: trace +{micros} us pid {} {name}\n",
        std::process::id()
    );
    // One write per line, so lines of the helper and of PID 1 never mix.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

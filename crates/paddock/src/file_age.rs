//! How old a file is, by its modification time, for the passes that
//! remove what was left behind (a turn's inline source, a setup cache's
//! temporary directory, a cache memo's temporary file, a lease's pending
//! file, an unused snapshot or mirror). A time in the future (the clock
//! went back since the file was written, or its time was set ahead) is
//! as far from now as it is ahead: counted as no age at all, such a file
//! would never be judged stale, and would stay until the clock caught up,
//! a year later if it was dated a year ahead.

use std::path::Path;
use std::time::{Duration, SystemTime};

/// How far `modified` is from `now`, before or after it.
pub fn age(modified: SystemTime, now: SystemTime) -> Duration {
    now.duration_since(modified)
        .or_else(|_| modified.duration_since(now))
        .unwrap_or(Duration::ZERO)
}

/// The age of `path` (the link itself when it is one) as of `now`;
/// `None` when it cannot be read.
pub fn of(path: &Path, now: SystemTime) -> Option<Duration> {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .map(|t| age(t, now))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A time ahead of now is as old as it is ahead; one behind, as it is
    /// behind; a file's age is its modification time's.
    #[test]
    fn a_time_ahead_is_as_old_as_it_is_ahead() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let year = Duration::from_secs(365 * 86_400);
        let ages: Vec<Duration> = [now, now - year, now + year, now + Duration::from_secs(1)]
            .into_iter()
            .map(|t| age(t, now))
            .collect();
        assert_eq!(
            ages,
            vec![Duration::ZERO, year, year, Duration::from_secs(1)]
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "").unwrap();
        let ahead = SystemTime::now() + year;
        std::fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(ahead)
            .unwrap();
        assert_eq!(of(&file, ahead - year), Some(year));
        assert_eq!(of(&dir.path().join("missing"), now), None);
    }
}

//! A time as the RFC 3339 text that reasons and messages show
//! (`2026-12-07T19:12:54.5Z`): one writer for every reason that names a
//! time (a heartbeat's, a cancel request's), so they read alike. A time
//! RFC 3339 cannot write (a year past 9999) is shown as `time` prints it
//! rather than dropped.

use time::OffsetDateTime;

/// `at` as RFC 3339 text.
pub fn rfc3339(at: OffsetDateTime) -> String {
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| at.to_string())
}

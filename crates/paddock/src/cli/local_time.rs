//! Times as the user reads them: in the system's time zone (`TZ`, else
//! `/etc/localtime`, else UTC), read as the C library reads it
//! (`paddock::workspace::system_zone`, the zone a job's commit
//! dates are in: not jiff's `TimeZone::try_system`, which lists the whole
//! zone database first to name the zone, half of a `paddock jobs`'s
//! instructions, for a name no listing shows) and converted through jiff,
//! which is sound in a multi-threaded process (the `time` crate refuses
//! there).

use jiff::tz::TimeZone;
use time::OffsetDateTime;

/// The system's time zone, UTC if it cannot be determined.
pub fn system() -> TimeZone {
    paddock::workspace::system_zone().unwrap_or(TimeZone::UTC)
}

/// `t` in `tz`, formatted with strftime's `fmt` (empty if out of range).
pub fn format(t: OffsetDateTime, tz: &TimeZone, fmt: &str) -> String {
    jiff::Timestamp::from_nanosecond(t.unix_timestamp_nanos())
        .map(|ts| ts.to_zoned(tz.clone()).strftime(fmt).to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn formats_in_the_given_zone() {
        let t = datetime!(2025-06-01 12:30:45 +02:00);
        let tz = TimeZone::get("America/New_York").unwrap();
        assert_eq!(format(t, &tz, "%Y-%m-%d %H:%M:%S"), "2025-06-01 06:30:45");
        assert_eq!(format(t, &TimeZone::UTC, "%H:%M"), "10:30");
    }
}

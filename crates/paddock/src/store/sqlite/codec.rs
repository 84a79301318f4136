//! Conversions between wire values and column values, shared by every table:
//! unsigned counts to BIGINT (refusing what does not fit instead of wrapping),
//! timestamps to fixed-width UTC RFC 3339 text (so text order is time order),
//! and JSON text. Each failure becomes a `StoreError::Encode`/`Decode` naming
//! the table, column and row.

use std::fmt::Display;

use serde::de::DeserializeOwned;
use serde::Serialize;
use time::format_description::well_known::Rfc3339;
use time::format_description::BorrowedFormatItem;
use time::macros::format_description;
use time::{OffsetDateTime, UtcOffset};

use super::StoreError;

/// RFC 3339 in UTC with always nine fractional digits: every stored timestamp
/// has the same width, so comparing the text compares the instants.
const TIMESTAMP: &[BorrowedFormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:9]Z");

/// The row a value belongs to, for error messages: its table and a label such
/// as `job 0192…` or `event 3 of job 0192…`.
pub(crate) struct RowRef {
    table: &'static str,
    row: String,
}

impl RowRef {
    pub(crate) fn new(table: &'static str, row: String) -> RowRef {
        RowRef { table, row }
    }

    pub(crate) fn encode_error(&self, column: &'static str, message: impl Display) -> StoreError {
        StoreError::Encode {
            table: self.table,
            column,
            row: self.row.clone(),
            message: message.to_string(),
        }
    }

    pub(crate) fn decode_error(&self, column: &'static str, message: impl Display) -> StoreError {
        StoreError::Decode {
            table: self.table,
            column,
            row: self.row.clone(),
            message: message.to_string(),
        }
    }

    /// An unsigned count as a BIGINT.
    pub(crate) fn int(&self, column: &'static str, value: u64) -> Result<i64, StoreError> {
        i64::try_from(value)
            .map_err(|_| self.encode_error(column, format!("{value} does not fit in a BIGINT")))
    }

    pub(crate) fn opt_int(
        &self,
        column: &'static str,
        value: Option<u64>,
    ) -> Result<Option<i64>, StoreError> {
        value.map(|v| self.int(column, v)).transpose()
    }

    /// A BIGINT read back as the wire's narrower or unsigned integer type.
    pub(crate) fn narrow<T: TryFrom<i64>>(
        &self,
        column: &'static str,
        value: i64,
    ) -> Result<T, StoreError> {
        T::try_from(value).map_err(|_| {
            self.decode_error(
                column,
                format!("{value} is out of range for {}", std::any::type_name::<T>()),
            )
        })
    }

    pub(crate) fn opt_narrow<T: TryFrom<i64>>(
        &self,
        column: &'static str,
        value: Option<i64>,
    ) -> Result<Option<T>, StoreError> {
        value.map(|v| self.narrow(column, v)).transpose()
    }

    pub(crate) fn time(
        &self,
        column: &'static str,
        value: OffsetDateTime,
    ) -> Result<String, StoreError> {
        let utc = value
            .checked_to_offset(UtcOffset::UTC)
            .ok_or_else(|| self.encode_error(column, format!("{value} has no UTC equivalent")))?;
        if !(0..=9999).contains(&utc.year()) {
            return Err(self.encode_error(
                column,
                format!("{value} is outside RFC 3339's years 0000-9999"),
            ));
        }
        utc.format(TIMESTAMP)
            .map_err(|err| self.encode_error(column, err))
    }

    pub(crate) fn opt_time(
        &self,
        column: &'static str,
        value: Option<OffsetDateTime>,
    ) -> Result<Option<String>, StoreError> {
        value.map(|v| self.time(column, v)).transpose()
    }

    pub(crate) fn parse_time(
        &self,
        column: &'static str,
        text: &str,
    ) -> Result<OffsetDateTime, StoreError> {
        OffsetDateTime::parse(text, &Rfc3339)
            .map_err(|err| self.decode_error(column, format!("{text:?} is not RFC 3339: {err}")))
    }

    pub(crate) fn opt_parse_time(
        &self,
        column: &'static str,
        text: Option<&str>,
    ) -> Result<Option<OffsetDateTime>, StoreError> {
        text.map(|t| self.parse_time(column, t)).transpose()
    }

    pub(crate) fn json<T: Serialize + ?Sized>(
        &self,
        column: &'static str,
        value: &T,
    ) -> Result<String, StoreError> {
        serde_json::to_string(value).map_err(|err| self.encode_error(column, err))
    }

    pub(crate) fn parse_json<T: DeserializeOwned>(
        &self,
        column: &'static str,
        text: &str,
    ) -> Result<T, StoreError> {
        serde_json::from_str(text).map_err(|err| self.decode_error(column, err))
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    #[test]
    fn timestamps_are_fixed_width_utc_and_round_trip() {
        let row = RowRef::new("jobs", "job j".to_owned());
        let t = datetime!(2025-03-04 05:06:07.5 +02:00);
        let text = row.time("created_at", t).unwrap();
        assert_eq!(text, "2025-03-04T03:06:07.500000000Z");
        assert_eq!(row.parse_time("created_at", &text).unwrap(), t);
        let whole = row
            .time("created_at", datetime!(2025-03-04 03:06:07 UTC))
            .unwrap();
        assert!(whole < text, "{whole} should sort before {text}");
    }

    #[test]
    fn out_of_range_values_are_refused_not_wrapped() {
        let row = RowRef::new("jobs", "job j".to_owned());
        let err = row.int("model_calls", u64::MAX).unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::Encode {
                    table: "jobs",
                    column: "model_calls",
                    ..
                }
            ),
            "{err:?}"
        );
        let err = row.narrow::<u16>("http_status", 70_000).unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::Decode {
                    column: "http_status",
                    ..
                }
            ),
            "{err:?}"
        );
        let err = row
            .time("created_at", datetime!(-0001-01-01 0:00 UTC))
            .unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::Encode {
                    column: "created_at",
                    ..
                }
            ),
            "{err:?}"
        );
    }
}

//! PostgreSQL's text cannot hold NUL (U+0000): a statement binding one
//! fails, so a record carrying one (a reason ending with the engine's
//! stderr, a model name or error a job or its upstream sent through the
//! broker, an egress attempt's host) would never be stored, and the job
//! would stay `running` with calls missing from its ledger. What PgStore
//! writes goes through here first: every NUL in its text becomes U+FFFD,
//! as invalid UTF-8 does elsewhere. Records are walked through their
//! serde form, so a text field added later is covered too; one without
//! NUL is passed through as it is. (SQLite keeps NUL as it is.)

use std::borrow::Cow;

use serde::de::DeserializeOwned;
use serde::Serialize;

/// What a NUL becomes.
const REPLACEMENT: &str = "\u{fffd}";

/// `text` without NUL.
pub(super) fn text(text: &str) -> Cow<'_, str> {
    if text.contains('\0') {
        Cow::Owned(text.replace('\0', REPLACEMENT))
    } else {
        Cow::Borrowed(text)
    }
}

/// `record` with no NUL in any of its text (its serde form walked);
/// itself when it has none, or when its serde form does not round-trip.
pub(super) fn record<T>(record: &T) -> Cow<'_, T>
where
    T: Serialize + DeserializeOwned + Clone,
{
    let Ok(mut value) = serde_json::to_value(record) else {
        return Cow::Borrowed(record);
    };
    if !replace_in(&mut value) {
        return Cow::Borrowed(record);
    }
    serde_json::from_value(value).map_or(Cow::Borrowed(record), Cow::Owned)
}

/// Replaces NUL in every string of `value` (keys included): whether any
/// was found.
fn replace_in(value: &mut serde_json::Value) -> bool {
    match value {
        serde_json::Value::String(s) => match text(s) {
            Cow::Owned(clean) => {
                *s = clean;
                true
            }
            Cow::Borrowed(_) => false,
        },
        serde_json::Value::Array(items) => {
            let mut found = false;
            for item in items {
                found |= replace_in(item);
            }
            found
        }
        serde_json::Value::Object(map) => {
            let mut found = false;
            if map.keys().any(|k| k.contains('\0')) {
                let entries = std::mem::take(map);
                for (k, v) in entries {
                    map.insert(text(&k).into_owned(), v);
                }
                found = true;
            }
            for item in map.values_mut() {
                found |= replace_in(item);
            }
            found
        }
        serde_json::Value::Null | serde_json::Value::Bool(_) | serde_json::Value::Number(_) => {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fixtures::{job, model_call};

    /// Every text field of a record loses its NUL, nothing else changes;
    /// a record without one is borrowed as it is.
    #[test]
    fn nul_becomes_the_replacement_character_in_every_text() {
        let clean = job("j1", 0);
        assert!(matches!(record(&clean), Cow::Borrowed(_)));
        let mut dirty = clean.clone();
        dirty.reason = Some("a\0b".into());
        dirty.changed_files = vec!["x\0.rs".into()];
        let mut expected = clean.clone();
        expected.reason = Some("a\u{fffd}b".into());
        expected.changed_files = vec!["x\u{fffd}.rs".into()];
        assert_eq!(record(&dirty).into_owned(), expected);

        let mut call = model_call("j1", 1);
        call.requested_model = "gpt\0".into();
        call.error = Some("\0\0".into());
        let mut want = call.clone();
        want.requested_model = "gpt\u{fffd}".into();
        want.error = Some("\u{fffd}\u{fffd}".into());
        assert_eq!(record(&call).into_owned(), want);
        assert_eq!(text("a\0"), "a\u{fffd}");
    }
}

//! The one walk over a request's JSON that the broker's refusals share
//! (`provider_state.rs`'s stored objects, `provider_fetch.rs`'s content
//! given by URL): every object at any depth, each of its entries shown
//! with the object holding it, depth first on an explicit stack (a
//! request nested past any recursion limit cannot overflow the broker's;
//! its size is bounded when it is read, `server.rs`). The caller says of
//! each entry whether it is what it looks for, a value to walk into, or
//! one to leave alone.

use serde_json::{Map, Value};

/// What a walk does with one entry of an object.
pub(super) enum Entry<T> {
    /// It is what the walk looks for: the walk ends with this.
    Found(T),
    /// Its value is walked into.
    Enter,
    /// Its value is not walked into.
    Skip,
}

/// The first `T` that `entry` finds among the entries (the object, the
/// key, the value) of the objects in `root`, at any depth.
pub(super) fn find<T>(
    root: &Value,
    mut entry: impl FnMut(&Map<String, Value>, &str, &Value) -> Entry<T>,
) -> Option<T> {
    let mut stack = vec![root];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(map) => {
                for (key, value) in map {
                    match entry(map, key, value) {
                        Entry::Found(found) => return Some(found),
                        Entry::Enter => stack.push(value),
                        Entry::Skip => {}
                    }
                }
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every entry of every object, in arrays and objects at any depth, is
    /// shown once with its object; a skipped value's entries are not; the
    /// first found ends the walk.
    #[test]
    fn every_entry_is_shown_with_its_object_but_a_skipped_ones() {
        let request = json!({"a": [{"b": 1}, [{"c": {"d": 2}}]], "skip": {"e": 3}, "f": "x"});
        let mut seen = Vec::new();
        let none: Option<()> = find(&request, |map, key, _| {
            seen.push((key.to_string(), map.len()));
            if key == "skip" {
                Entry::Skip
            } else {
                Entry::Enter
            }
        });
        seen.sort();
        let found = find(&request, |_, key, value| match key {
            "d" => Entry::Found(value.clone()),
            _ => Entry::Enter,
        });
        assert_eq!(
            (none, seen, found),
            (
                None,
                [
                    ("a", 3),
                    ("b", 1),
                    ("c", 1),
                    ("d", 1),
                    ("f", 3),
                    ("skip", 3)
                ]
                .map(|(k, n)| (k.to_string(), n))
                .to_vec(),
                Some(json!(2))
            )
        );
    }
}

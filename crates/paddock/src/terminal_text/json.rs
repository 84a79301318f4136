//! JSON that Paddock prints, safe on a terminal. serde_json escapes the C0
//! controls in a string but writes DEL, the C1 controls (U+0080 to
//! U+009F: U+009B is a CSI as much as `ESC [` is) and Unicode's
//! bidirectional embeddings, overrides, isolates and marks as they are, so
//! `paddock jobs --json` on a terminal (or through `less -R`) would obey
//! what a job wrote in its branch name, its messages or its stderr. [`Safe`]
//! wraps serde_json's compact or pretty formatter and writes each character
//! [`super::dangerous`] names as a `\uXXXX` escape instead: the JSON parses
//! to exactly the same value. Every JSON document the `paddock` binary
//! prints (`--json` of `run`, `show`, `events`, `jobs`, `usage`, `gc`,
//! `publish`, `doctor`, `context`, `prices`; `profile show`) is written by
//! [`to_string`] or [`to_string_pretty`].

use std::io;

use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter, PrettyFormatter, Serializer};

/// `value` as one line of JSON, every terminal control in its strings
/// escaped.
pub fn to_string<T: ?Sized + Serialize>(value: &T) -> Result<String, serde_json::Error> {
    write(value, CompactFormatter)
}

/// `value` as indented JSON, every terminal control in its strings
/// escaped.
pub fn to_string_pretty<T: ?Sized + Serialize>(value: &T) -> Result<String, serde_json::Error> {
    write(value, PrettyFormatter::new())
}

fn write<T: ?Sized + Serialize, F: Formatter>(
    value: &T,
    formatter: F,
) -> Result<String, serde_json::Error> {
    let mut out = Vec::with_capacity(128);
    value.serialize(&mut Serializer::with_formatter(&mut out, Safe(formatter)))?;
    // serde_json writes only whole UTF-8 characters and ASCII escapes.
    String::from_utf8(out).map_err(<serde_json::Error as serde::ser::Error>::custom)
}

/// A serde_json formatter (compact or pretty) whose strings carry no
/// character a terminal obeys: those serde_json leaves raw are written as
/// `\uXXXX` (a pair of them past U+FFFF).
pub struct Safe<F>(pub F);

impl<F: Formatter> Formatter for Safe<F> {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        escaped(writer, fragment)
    }

    /// A raw fragment (`serde_json::value::RawValue`) is JSON already: a
    /// control in it can only be inside a string, where its escape means
    /// the same (JSON's own whitespace, C0, is left alone).
    fn write_raw_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        escaped(writer, fragment)
    }

    // The layout is the wrapped formatter's.

    fn begin_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.begin_array(writer)
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_array(writer)
    }

    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_array_value(writer, first)
    }

    fn end_array_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_array_value(writer)
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.begin_object(writer)
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_object(writer)
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_object_key(writer, first)
    }

    fn end_object_key<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_object_key(writer)
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.begin_object_value(writer)
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_object_value(writer)
    }
}

/// `text` written with each terminal control above C0 (serde_json escapes
/// C0 itself) as `\uXXXX`.
fn escaped<W: ?Sized + io::Write>(writer: &mut W, text: &str) -> io::Result<()> {
    let mut rest = text;
    while let Some((at, c)) = rest
        .char_indices()
        .find(|&(_, c)| c > '\u{1f}' && super::dangerous(c))
    {
        let (before, after) = rest.split_at(at);
        writer.write_all(before.as_bytes())?;
        for unit in c.encode_utf16(&mut [0; 2]) {
            write!(writer, "\\u{unit:04x}")?;
        }
        rest = after.get(c.len_utf8()..).unwrap_or_default();
    }
    writer.write_all(rest.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// A string of every character, as a value and as a key, parses back
    /// to itself, and nothing a terminal obeys is left raw.
    #[test]
    fn every_character_round_trips_and_none_is_left_raw() {
        let all: String = (0..=0x10ffff_u32).filter_map(char::from_u32).collect();
        let mut keyed = serde_json::Map::new();
        keyed.insert(all.clone(), json!([all, "k\u{9b}ey\u{202e}"]));
        for value in [json!(all), Value::Object(keyed)] {
            for text in [
                to_string(&value).unwrap(),
                to_string_pretty(&value).unwrap(),
            ] {
                assert_eq!(
                    text.chars()
                        .find(|&c| super::super::dangerous(c) && c != '\n'),
                    None
                );
                assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
            }
        }
    }

    #[test]
    fn controls_are_escaped_and_the_rest_is_serde_jsons() {
        let value = json!({
            "said": "ok\u{1b}[2K \u{9b}31m \u{7f} \u{85} \u{202e}fdp.exe\u{2066}x\u{2069} \u{200f}\u{61c}",
            "plain": "café — «ok» \u{1f600}",
            "n": [1, 2.5, null, true],
        });
        assert_eq!(
            to_string(&value).unwrap(),
            r#"{"n":[1,2.5,null,true],"plain":"café — «ok» 😀","said":"ok\u001b[2K \u009b31m \u007f \u0085 \u202efdp.exe\u2066x\u2069 \u200f\u061c"}"#
        );
        let plain = json!({"a": ["b", {"c": 1}], "d": "e"});
        assert_eq!(
            to_string(&plain).unwrap(),
            serde_json::to_string(&plain).unwrap()
        );
        assert_eq!(
            to_string_pretty(&plain).unwrap(),
            serde_json::to_string_pretty(&plain).unwrap()
        );
    }
}

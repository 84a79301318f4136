//! Where a document (a job spec, a turn request, a host profile) failed to
//! parse, as its error says it. `serde_path_to_error` names the field it
//! was in: `.` when it was the document itself (a missing top-level key),
//! `?` where the parser never reached a field (a syntax error, a body cut
//! short). Neither is a field a user can look for, so such an error names
//! no field and says what is wrong with the text instead ("not valid
//! JSON: EOF while parsing an object at line 1 column 30"). Every TOML
//! document Paddock reads (also a price table) says where in this one
//! form: "field `a.b`: message (line L, column C)" (the config file too;
//! a scenario with its own `path:line:column` before the field).

/// The field a parse error at `path` names; empty: none (the document
/// itself, or a place no field was reached).
pub(crate) fn field(path: &serde_path_to_error::Path) -> String {
    let field = path.to_string();
    if field == "." || field.split('.').any(|segment| segment == "?") {
        return String::new();
    }
    field
}

/// The field and the message of a JSON parse error: a syntax error or an
/// early end names no field.
pub(crate) fn json(e: serde_path_to_error::Error<serde_json::Error>) -> (String, String) {
    let field = field(e.path());
    let inner = e.into_inner();
    match inner.classify() {
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
            (String::new(), format!("not valid JSON: {inner}"))
        }
        serde_json::error::Category::Io | serde_json::error::Category::Data => {
            (field, plain_types(&inner.to_string()))
        }
    }
}

/// The field and the message of a TOML parse error in `text`, the message
/// on one line (toml's syntax messages span two) and ending with where it
/// is, `(line L, column C)`, when toml says.
pub fn toml(e: serde_path_to_error::Error<toml::de::Error>, text: &str) -> (String, String) {
    let TomlError { field, message, at } = toml_parts(e, text);
    let message = match at {
        Some((line, col)) => format!("{message} (line {line}, column {col})"),
        None => message,
    };
    (field, message)
}

/// A TOML parse error's parts, for a document that says where it failed
/// in a form of its own (a scenario's `path:line:column`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TomlError {
    /// The field it was in; empty: none (see [`field`]).
    pub field: String,
    /// What is wrong, on one line, in a user's words for types.
    pub message: String,
    /// The 1-based line and column, when toml says.
    pub at: Option<(usize, usize)>,
}

/// The parts of a TOML parse error in `text`.
pub fn toml_parts(e: serde_path_to_error::Error<toml::de::Error>, text: &str) -> TomlError {
    let field = field(e.path());
    let inner = e.into_inner();
    TomlError {
        field,
        message: plain_types(&inner.message().trim_end().replace('\n', "; ")),
        at: inner.span().map(|span| line_col(text, span.start)),
    }
}

/// The words for the Rust types serde's messages name (`expected f64`,
/// `expected u32`): what a user writes there, `expected a number`,
/// `expected a whole number, 0 or more`. Before, a spec's `max_usd =
/// "lots"` was said to expect an `f64`.
pub fn plain_types(message: &str) -> String {
    const TYPES: [(&str, &str); 12] = [
        ("f64", "a number"),
        ("f32", "a number"),
        ("u64", "a whole number, 0 or more"),
        ("u32", "a whole number, 0 or more"),
        ("u16", "a whole number, 0 or more"),
        ("u8", "a whole number, 0 or more"),
        ("usize", "a whole number, 0 or more"),
        ("i64", "a whole number"),
        ("i32", "a whole number"),
        ("i16", "a whole number"),
        ("i8", "a whole number"),
        ("isize", "a whole number"),
    ];
    let mut out = message.to_owned();
    for (ty, words) in TYPES {
        let said = format!("expected {ty}");
        let mut from = 0;
        while let Some(at) = out.get(from..).and_then(|rest| rest.find(&said)) {
            let start = from + at;
            let end = start + said.len();
            // `expected u8` is not the start of `expected u80…`.
            if out[end..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
                from = end;
                continue;
            }
            out.replace_range(start..end, &format!("expected {words}"));
            from = start + "expected ".len() + words.len();
        }
    }
    out
}

/// The 1-based line and column (in characters) of byte `offset` in `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, col)
}

/// How an error's message introduces its field: "field `x`: ", or nothing
/// where it names none.
pub fn field_prefix(field: &str) -> String {
    if field.is_empty() {
        String::new()
    } else {
        format!("field `{field}`: ")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Doc {
        ticket: Ticket,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Ticket {
        id: String,
    }

    fn parse(text: &str) -> (String, String) {
        let mut de = serde_json::Deserializer::from_str(text);
        json(serde_path_to_error::deserialize::<_, Doc>(&mut de).unwrap_err())
    }

    #[test]
    fn rust_type_names_are_said_in_a_users_words() {
        assert_eq!(
            [
                plain_types("invalid type: string \"lots\", expected f64"),
                plain_types("invalid value: integer `-1`, expected u32 (line 2, column 23)"),
                plain_types("invalid type: string \"x\", expected i64 at line 1 column 4"),
                plain_types("expected u8x, expected usize"),
            ],
            [
                "invalid type: string \"lots\", expected a number",
                "invalid value: integer `-1`, expected a whole number, 0 or more (line 2, column 23)",
                "invalid type: string \"x\", expected a whole number at line 1 column 4",
                "expected u8x, expected a whole number, 0 or more",
            ]
        );
    }

    #[test]
    fn a_json_error_names_a_field_only_where_it_was_in_one() {
        assert_eq!(
            [
                parse(r#"{"ticket": {"id": "x""#),
                parse(r#"{"ticket": {"id": 1}}"#),
                parse(r#"{}"#),
                parse(r#"{"ticket": {"id": "x"}"#),
                parse(r#"{"ticket": ]"#),
            ],
            [
                (
                    String::new(),
                    "not valid JSON: EOF while parsing an object at line 1 column 21".into()
                ),
                (
                    "ticket.id".into(),
                    "invalid type: integer `1`, expected a string at line 1 column 19".into()
                ),
                (
                    String::new(),
                    "missing field `ticket` at line 1 column 2".into()
                ),
                (
                    String::new(),
                    "not valid JSON: EOF while parsing an object at line 1 column 22".into()
                ),
                (
                    String::new(),
                    "not valid JSON: expected value at line 1 column 12".into()
                ),
            ]
        );
        assert_eq!(
            [field_prefix(""), field_prefix("ticket.id")],
            [String::new(), "field `ticket.id`: ".to_string()]
        );
    }
}

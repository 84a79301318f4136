//! The forms in which a credential's real value could come back from its
//! host, for the response scan (`scan.rs`) and the job's redactor. A host
//! that reflects a request (an httpbin-like echo, an error page, a debug
//! endpoint) may quote the header as sent, or encoded: base64 (inside a
//! larger base64 text, so at any of three byte offsets), hex, percent
//! encoding, a JSON string. Each base string (the value; for a Basic
//! credential also the decoded `user:password` pair and the password) is
//! taken in each of those encodings. A form that is only a part of the
//! encoded text (base64 at an offset: the characters that also depend on
//! the neighbouring bytes are left out) still identifies the value; what it
//! leaves unmasked is at most three characters at each end, a few bits of
//! the value. Forms shorter than [`MIN_DERIVED`] are not scanned for (they
//! would mask innocent bytes); the value itself always is.

use base64::Engine as _;

use crate::secret::Secret;

/// Derived forms shorter than this are not scanned for.
pub const MIN_DERIVED: usize = 8;

/// Every form of `secret` (the header value being `template` with the
/// secret in place of `{secret}`) the scan replaces, longest first, no
/// form twice.
pub fn forms(secret: &Secret, template: &str) -> Vec<Secret> {
    let value = secret.expose();
    let mut bases = vec![value.to_string()];
    let basic = template
        .get(..6)
        .is_some_and(|p| p.eq_ignore_ascii_case("basic "));
    if basic {
        if let Some(pair) = base64::engine::general_purpose::STANDARD
            .decode(value)
            .ok()
            .and_then(|d| String::from_utf8(d).ok())
        {
            bases.push(pair.clone());
            if let Some((_, password)) = pair.split_once(':') {
                bases.push(password.to_string());
            }
        }
    }
    let mut out: Vec<String> = vec![value.to_string()];
    for base in &bases {
        out.push(base.clone());
        out.extend(encodings(base.as_bytes()));
    }
    let mut kept: Vec<String> = Vec::new();
    for (i, form) in out.into_iter().enumerate() {
        if (i == 0 || form.len() >= MIN_DERIVED) && !kept.contains(&form) {
            kept.push(form);
        }
    }
    kept.sort_by_key(|f| std::cmp::Reverse(f.len()));
    kept.into_iter().map(Secret::new).collect()
}

/// `base`'s encoded forms: base64 (standard and URL-safe alphabets, whole
/// and at each byte offset), hex (both cases), percent encoding (both
/// cases of the hex digits) and JSON escaping, where they differ from it.
fn encodings(base: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let std = base64::engine::general_purpose::STANDARD_NO_PAD;
    // The whole value encoded alone, without padding.
    let whole = std.encode(base);
    for offset in 0..3 {
        let core = base64_core(base, offset);
        out.push(core.clone());
        out.push(url_safe(&core));
    }
    out.push(url_safe(&whole));
    out.push(whole);
    let hex = hex::encode(base);
    out.push(hex.to_ascii_uppercase());
    out.push(hex);
    out.push(base.iter().map(|b| percent_byte(*b, false)).collect());
    out.push(base.iter().map(|b| percent_byte(*b, true)).collect());
    if let Ok(text) = std::str::from_utf8(base) {
        if let Ok(json) = serde_json::to_string(text) {
            let inner = json.trim_matches('"').to_string();
            out.push(inner.replace('/', "\\/"));
            out.push(inner);
        }
    }
    out
}

/// The base64 characters of `base` placed `offset` bytes into a longer
/// text that depend on `base`'s bytes alone: the characters that also
/// carry bits of the bytes before or after it are left out.
fn base64_core(base: &[u8], offset: usize) -> String {
    let std = base64::engine::general_purpose::STANDARD_NO_PAD;
    let mut bytes = vec![0u8; offset];
    bytes.extend_from_slice(base);
    let encoded = std.encode(&bytes);
    // The characters the offset's bytes touch: 0, 2 or 3 (bits 0..8k).
    let skip = match offset {
        0 => 0,
        1 => 2,
        _ => 3,
    };
    // The last character carries bits of what follows unless the text's
    // length is a multiple of three bytes.
    let trim = usize::from(!bytes.len().is_multiple_of(3));
    encoded
        .get(skip..encoded.len().saturating_sub(trim))
        .unwrap_or("")
        .to_string()
}

fn url_safe(b64: &str) -> String {
    b64.replace('+', "-").replace('/', "_")
}

/// A byte as percent encoding leaves it: unreserved characters as they
/// are (RFC 3986), every other byte as `%XX` (`%xx` unless `upper`).
fn percent_byte(b: u8, upper: bool) -> String {
    if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
        char::from(b).to_string()
    } else if upper {
        format!("%{b:02X}")
    } else {
        format!("%{b:02x}")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn all(value: &str, template: &str) -> Vec<String> {
        forms(&Secret::new(value.into()), template)
            .iter()
            .map(|s| s.expose().to_string())
            .collect()
    }

    /// Whether some form of the value occurs in `text`.
    fn found(value: &str, text: &str) -> bool {
        all(value, "Bearer {secret}")
            .iter()
            .any(|f| text.contains(f.as_str()))
    }

    #[test]
    fn base64_of_a_larger_text_holds_the_value_at_every_offset() {
        let value = "tok/en+Value-42";
        let std = base64::engine::general_purpose::STANDARD;
        let url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        for before in ["", "a", "ab", "abc", "{\"authorization\":\"Bearer "] {
            for after in ["", "x", "xy", "\"}"] {
                let text = format!("{before}{value}{after}");
                assert!(found(value, &std.encode(&text)), "std {before:?} {after:?}");
                assert!(found(value, &url.encode(&text)), "url {before:?} {after:?}");
            }
        }
    }

    #[test]
    fn hex_percent_and_json_forms_are_found() {
        let value = "tok/en+Value 42\"";
        let json = serde_json::to_string(&serde_json::json!({ "auth": value })).unwrap();
        for text in [
            hex::encode(value),
            hex::encode(value).to_ascii_uppercase(),
            "tok%2Fen%2BValue%2042%22".to_string(),
            "tok%2fen%2bValue%2042%22".to_string(),
            json.clone(),
            json.replace('/', "\\/"),
        ] {
            assert!(found(value, &text), "{text}");
        }
        // Unrelated text matches no form.
        assert!(!found(
            value,
            "tok en Value 41 and 746f6b2f656e2b56616c7565"
        ));
    }

    #[test]
    fn forms_are_longest_first_unique_and_short_derived_ones_dropped() {
        // "abc": every derived form is under 8 bytes except hex/percent.
        assert_eq!(
            all("abc", "Bearer {secret}"),
            vec!["abc".to_string()],
            "hex of abc is 6 bytes"
        );
        let forms = all("abcdefgh", "Bearer {secret}");
        let mut sorted = forms.clone();
        sorted.sort_by_key(|f| std::cmp::Reverse(f.len()));
        let mut unique = forms.clone();
        unique.dedup();
        assert_eq!((forms.clone(), forms.len()), (sorted, unique.len()));
        assert_eq!(
            forms,
            vec![
                "6162636465666768".to_string(),
                "YWJjZGVmZ2g".into(),
                "YWJjZGVmZ2".into(),
                // At offset 1 and 2 (see base64_core).
                "FiY2RlZmdo".into(),
                "hYmNkZWZna".into(),
                "abcdefgh".into(),
            ]
        );
    }
}

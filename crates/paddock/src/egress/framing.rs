//! The two numbers HTTP/1.1 frames a body by, read strictly (RFC 9112):
//! a `content-length` is one or more ASCII digits, a chunk size one or
//! more hex digits (then only whitespace before a `;` extension). Rust's
//! own integer parsing also takes a leading `+` (and trimming takes
//! leading whitespace), which a strict server refuses: a proxy that reads
//! `content-length: +5` or a chunk size `+a` as a number while the host
//! reads the message as broken frames the bytes differently from it,
//! the ground of request smuggling across a terminated tunnel. Both are
//! bounded (18 decimal, 15 hex digits), so adding the chunk's CRLF can
//! never overflow. Both sides of a terminated tunnel (the job's requests,
//! the host's responses) also read their bytes and their chunked bodies'
//! lines here ([`more`], [`line`]).
//!
//! A chunked body the job sends is passed on as sent, so its lines must
//! end where every server ends them: a chunk-size line or a trailer line
//! holding a bare LF or CR (or another control character) is refused
//! ([`plain_line`]), as is a trailer line that is not a header field
//! ([`trailer_field`]). A server that ends a line at a bare LF (Go's
//! before 1.24.2, CVE-2025-22871, and other lenient parsers) would
//! otherwise start a chunk's data where the proxy still reads its size
//! line, and read a size of its own from what the proxy passes on as
//! data: the body ends elsewhere for it than for the proxy, and a request
//! the proxy reads next (on a credential's tunnel: given the real value)
//! is a body to the host, or the other way round.

use tokio::io::{AsyncRead, AsyncReadExt as _};

/// How much one read asks for.
const READ_BYTES: usize = 16 * 1024;
/// The longest chunk-size or trailer line.
pub const MAX_LINE: usize = 4096;

/// Why no line was read.
#[derive(Debug)]
pub enum LineError {
    /// Over [`MAX_LINE`] bytes without a CRLF.
    TooLong,
    /// The stream ended before the CRLF.
    Ended,
    Read(std::io::Error),
}

/// Reads what `from` has next onto the end of `buf` (up to 16 KiB);
/// `false` at the end of the stream.
pub async fn more<R: AsyncRead + Unpin>(from: &mut R, buf: &mut Vec<u8>) -> std::io::Result<bool> {
    buf.reserve(READ_BYTES);
    let n = from.read_buf(buf).await?;
    Ok(n > 0)
}

/// One CRLF-terminated line of `from` (without the CRLF), `buf` holding
/// what was read before it and keeping what follows, at most
/// [`MAX_LINE`] bytes.
pub async fn line<R: AsyncRead + Unpin>(
    from: &mut R,
    buf: &mut Vec<u8>,
) -> Result<Vec<u8>, LineError> {
    loop {
        if let Some(i) = buf.windows(2).position(|w| w == b"\r\n") {
            let line = buf[..i].to_vec();
            buf.drain(..i + 2);
            return Ok(line);
        }
        if buf.len() > MAX_LINE {
            return Err(LineError::TooLong);
        }
        if !more(from, buf).await.map_err(LineError::Read)? {
            return Err(LineError::Ended);
        }
    }
}

/// The most digits a `content-length` may have.
const MAX_DECIMAL_DIGITS: usize = 18;
/// The most hex digits a chunk size may have.
const MAX_HEX_DIGITS: usize = 15;

/// A `content-length` value: digits only, with optional surrounding
/// spaces or tabs (the field's own whitespace); `None` for anything else.
pub fn content_length(value: &[u8]) -> Option<u64> {
    let digits = trim_ows(value);
    if digits.is_empty()
        || digits.len() > MAX_DECIMAL_DIGITS
        || !digits.iter().all(u8::is_ascii_digit)
    {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// A chunk-size line's size: hex digits from the line's start, then only
/// spaces or tabs before an optional `;` extension; `None` otherwise.
pub fn chunk_size(line: &[u8]) -> Option<u64> {
    let size = line.split(|b| *b == b';').next().unwrap_or_default();
    let digits = size.trim_ascii_end();
    if digits.is_empty()
        || digits.len() > MAX_HEX_DIGITS
        || !digits.iter().all(u8::is_ascii_hexdigit)
        || size[digits.len()..]
            .iter()
            .any(|b| !matches!(b, b' ' | b'\t'))
    {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

/// Whether a chunk-size or trailer line (without its CRLF) has no control
/// character but a tab: no bare LF or CR, which a lenient server takes
/// for the line's end, and no NUL.
pub fn plain_line(line: &[u8]) -> bool {
    line.iter()
        .all(|b| *b == b'\t' || (*b >= 0x20 && *b != 0x7f))
}

/// Whether a trailer line (without its CRLF) is a header field: a token,
/// `:`, a value of [`plain_line`] bytes. Not a folded line (starting with
/// a space or tab), which RFC 9112 forbids, nor anything else a server
/// could read as the start of its next request.
pub fn trailer_field(line: &[u8]) -> bool {
    let Some(colon) = line.iter().position(|b| *b == b':') else {
        return false;
    };
    let name = &line[..colon];
    !name.is_empty()
        && name
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b))
        && plain_line(&line[colon + 1..])
}

fn trim_ows(value: &[u8]) -> &[u8] {
    let start = value
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t'))
        .unwrap_or(value.len());
    let end = value
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t'))
        .map_or(start, |i| i + 1);
    &value[start..end.max(start)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_content_length_is_digits_only() {
        let read = |v: &str| content_length(v.as_bytes());
        assert_eq!(
            [
                "5",
                " 42\t",
                "0",
                "007",
                "+5",
                "-5",
                "5 5",
                "0x5",
                "",
                " ",
                "5;",
                "١",
                "999999999999999999",
                "1000000000000000000"
            ]
            .map(read),
            [
                Some(5),
                Some(42),
                Some(0),
                Some(7),
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                Some(999_999_999_999_999_999),
                None
            ]
        );
    }

    #[test]
    fn chunked_lines_hold_no_control_and_trailers_are_fields() {
        let lines = [
            "a;name=v",
            "a;x=\"q\"\t",
            "0;a\n",
            "0;a\rb",
            "0\0",
            "0;\x7f",
        ];
        assert_eq!(
            lines.map(|l| plain_line(l.as_bytes())),
            [true, true, false, false, false, false]
        );
        let trailers = [
            "x-t: 1",
            "X-Sum:abc\t",
            "GET /x HTTP/1.1",
            " folded: x",
            ": v",
            "x t: 1",
            "x-t: a\nb",
            "x-t: a\rb",
        ];
        assert_eq!(
            trailers.map(|l| trailer_field(l.as_bytes())),
            [true, true, false, false, false, false, false, false]
        );
    }

    #[test]
    fn a_chunk_size_is_hex_digits_then_an_extension() {
        let read = |v: &str| chunk_size(v.as_bytes());
        assert_eq!(
            [
                "a",
                "1F",
                "0",
                "a;name=v",
                "a ;x",
                "a\t",
                "+a",
                " a",
                "0xa",
                "-1",
                "",
                ";x",
                "a b",
                "fffffffffffffff",
                "ffffffffffffffff"
            ]
            .map(read),
            [
                Some(10),
                Some(31),
                Some(0),
                Some(10),
                Some(10),
                Some(10),
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                Some(0x0fff_ffff_ffff_ffff),
                None
            ]
        );
    }
}

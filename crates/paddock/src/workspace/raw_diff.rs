//! The output of `git diff --patch --raw -z` taken apart: the raw records
//! (`:MODE MODE ID ID STATUS\0PATH\0`, a second path after a rename or
//! copy), one NUL, then the patch text. The patch is the same text a
//! `--patch` alone prints; the names are every path the records name,
//! both sides of a rename, in git's path order (bytewise), once each:
//! the list `--name-only -z --no-renames` gave when it was a second git.

/// The changed paths and the patch text of `out`; `None` when `out` is not
/// in that shape.
pub(super) fn split(out: &[u8]) -> Option<(Vec<&[u8]>, &[u8])> {
    let mut names: Vec<&[u8]> = Vec::new();
    let mut rest = out;
    while rest.first() == Some(&b':') {
        let (header, after) = field(rest)?;
        let status = header.rsplit(|b| *b == b' ').next()?;
        let paths = if matches!(status.first(), Some(b'R' | b'C')) {
            2
        } else {
            1
        };
        rest = after;
        for _ in 0..paths {
            let (path, after) = field(rest)?;
            names.push(path);
            rest = after;
        }
    }
    let patch = match rest.split_first() {
        // The separator between the records and the patch.
        Some((0, patch)) => patch,
        None if names.is_empty() => rest,
        _ => return None,
    };
    names.sort_unstable();
    names.dedup();
    Some((names, patch))
}

/// The bytes before the next NUL, and those after it.
fn field(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = bytes.iter().position(|b| *b == 0)?;
    Some((&bytes[..end], &bytes[end + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_then_the_patch_are_taken_apart() {
        let out = b":100644 100644 0fdf397 0fdf397 R100\0old.txt\0new.txt\0\
:000000 100644 0000000 4039724 A\0tab\tname\0\
:100644 120000 c1b0730 c052f8d T\0a\0\0diff --git a/a b/a\n";
        assert_eq!(
            split(out),
            Some((
                vec![&b"a"[..], b"new.txt", b"old.txt", b"tab\tname"],
                &b"diff --git a/a b/a\n"[..]
            ))
        );
    }

    #[test]
    fn no_change_is_no_output_and_a_torn_output_is_refused() {
        assert_eq!(split(b""), Some((vec![], &b""[..])));
        assert_eq!(split(b":100644 100644 0fd 0fd M\0a"), None);
        assert_eq!(split(b":100644 100644 0fd 0fd M\0a\0diff"), None);
    }
}

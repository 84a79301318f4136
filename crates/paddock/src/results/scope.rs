//! A ticket's `touch_only` constraint checked against the patch: which
//! changed files no pattern covers. Patterns are the spec's
//! (`ticket.touch_only`, validated by the protocol crate): paths from the
//! repository's top, `/`-separated; `*` matches within one path segment,
//! `?` one character of it, and a `**` segment any number of segments
//! (none included). A file outside every pattern is flagged in the
//! closeout and as a `policy` event; the job's outcome does not change.

/// The `changed` files that no pattern of `touch_only` covers, in order;
/// none when there are no patterns (no constraint).
pub fn outside(touch_only: &[String], changed: &[String]) -> Vec<String> {
    if touch_only.is_empty() {
        return Vec::new();
    }
    changed
        .iter()
        .filter(|file| !touch_only.iter().any(|p| matches(p, file)))
        .cloned()
        .collect()
}

/// The warning (a `paddock` `error` event, and a line of the closeout's
/// warnings) for the `changed` files outside `touch_only`; `None` when
/// every file is within. The files are named as the closeout's lists name
/// them (`terminal_text::path`: a tab as `\u{9}`, runs of spaces kept).
pub fn warning(touch_only: &[String], changed: &[String]) -> Option<String> {
    let outside = outside(touch_only, changed);
    if outside.is_empty() {
        return None;
    }
    Some(format!(
        "the patch changes {} file(s) outside the ticket's touch_only ({}): {}",
        outside.len(),
        touch_only.join(", "),
        outside
            .iter()
            .map(|f| crate::terminal_text::path(f))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// True when `path` matches the glob `pattern`.
pub fn matches(pattern: &str, path: &str) -> bool {
    let pattern: Vec<&str> = pattern.split('/').collect();
    let path: Vec<&str> = path.split('/').collect();
    segments(&pattern, &path)
}

/// Pattern segments against path segments (`**` any number of them).
fn segments(pattern: &[&str], path: &[&str]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((&"**", rest)) => (0..=path.len()).any(|skip| segments(rest, &path[skip..])),
        Some((first, rest)) => match path.split_first() {
            Some((segment, path_rest)) => {
                segment_matches(first, segment) && segments(rest, path_rest)
            }
            None => false,
        },
    }
}

/// One segment against one glob segment: `*` any run of characters, `?`
/// one character, any other character itself.
fn segment_matches(glob: &str, text: &str) -> bool {
    let chars: Vec<char> = text.chars().collect();
    let glob: Vec<char> = glob.chars().collect();
    // Classic wildcard matching with one backtrack point for `*`.
    let (mut g, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < chars.len() {
        if g < glob.len() && (glob[g] == '?' || glob[g] == chars[t]) {
            g += 1;
            t += 1;
        } else if g < glob.len() && glob[g] == '*' {
            star = Some((g, t));
            g += 1;
        } else if let Some((sg, st)) = star {
            g = sg + 1;
            t = st + 1;
            star = Some((sg, st + 1));
        } else {
            return false;
        }
    }
    glob[g..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_cover_paths_segment_by_segment() {
        let cases = [
            ("src/parser/**", "src/parser/lex.rs", true),
            ("src/parser/**", "src/parser/deep/er/x.rs", true),
            ("src/parser/**", "src/parser.rs", false),
            ("src/parser/**", "src/parserx/a.rs", false),
            ("src/*.rs", "src/lib.rs", true),
            ("src/*.rs", "src/a/lib.rs", false),
            ("**/*.md", "README.md", true),
            ("**/*.md", "docs/deep/café.md", true),
            ("docs/?.md", "docs/é.md", true),
            ("docs/?.md", "docs/ab.md", false),
            ("README.md", "README.md", true),
            ("README.md", "docs/README.md", false),
            ("a/**/b", "a/b", true),
            ("a/**/b", "a/x/y/b", true),
            ("*", "x/y", false),
        ];
        let got: Vec<(&str, &str, bool)> = cases
            .iter()
            .map(|(p, f, _)| (*p, *f, matches(p, f)))
            .collect();
        assert_eq!(got, cases.to_vec());
    }

    #[test]
    fn outside_lists_the_uncovered_files_and_no_patterns_is_no_constraint() {
        let changed = ["src/parser/lex.rs", "src/main.rs", "README.md"].map(String::from);
        let only = ["src/parser/**".to_string(), "*.md".to_string()];
        assert_eq!(
            (outside(&only, &changed), outside(&[], &changed)),
            (vec!["src/main.rs".to_string()], Vec::<String>::new())
        );
    }
}

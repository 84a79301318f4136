//! A git ref's name as a spec gives it: `results.base_branch` (the branch
//! a pull request merges into) and `repository.base_ref` (the revision a
//! job starts from). Both are shown (the closeout, the job tables, a
//! forge's page) and handed to git and to a forge, so a name git would
//! never take (a control character that starts a terminal's command or
//! forges a line, a bidirectional control that shows it reordered, `..`,
//! a component `.hidden` or `x.lock`) is refused where the spec is read,
//! naming the field and the rule, never echoing a control. The rules are
//! git's `check-ref-format` (a branch: `--branch`, one level allowed, and
//! not `HEAD`, which git refuses as a branch's name); a revision is read
//! from its end as `git rev-parse` reads it (counts `~N` and `^N`, peels
//! `^{commit}`, and searches `^{/REGEX}`, the youngest commit whose
//! message matches, their regex all between the last `^{/` and the final
//! `}`), the name left held to the same rules (with `@{…}` and `@`
//! alone); what names no commit (`REV:PATH`, a `:/REGEX` search of every
//! branch, `^{tree}`) is refused, as is a search the host would not run. [`branch_refusal`] and
//! [`revision_refusal`] give a spec's error whole: the one place its
//! wording is made.

/// Why `name` is no valid branch name, or `None`.
pub fn branch_fault(name: &str) -> Option<String> {
    fault(name, false)
}

/// Why `rev` is no valid revision as a spec may name its base (a branch,
/// a tag, a commit, a revision expression), or `None`.
pub fn revision_fault(rev: &str) -> Option<String> {
    if rev.is_empty() {
        return Some("it is empty".into());
    }
    // By its code point, first: the regex is not echoed with it either.
    if let Some(why) = crate::plain_text::first_not_plain(rev) {
        return Some(why);
    }
    suffix_fault(rev)
}

/// The peels `^{TYPE}` a base may end with: those git knows that leave a
/// commit to start from (`tree` and `blob` never do).
const PEELS: &[&str] = &["", "commit", "tag", "object"];

/// Git's largest count after `~` or `^` (`INT_MAX`).
const MAX_COUNT: u64 = 2_147_483_647;

/// [`revision_fault`] of a plain `rev`, read from its end as `git
/// rev-parse` reads it (`get_oid_1`, `peel_onion`): a count (`~N`, `^N`,
/// `~`, `^`), else, when it ends with `}`, the last `^{` opening a peel
/// (`^{commit}`) or a search (`^{/REGEX}`: the regex is all that is
/// between, `}` and `^{` included), each applied to what is before it,
/// read the same way; what is left is the name, held to the rules. Before,
/// the first `^{/` was taken as the search's start, so `HEAD^{/a^{b}` (git:
/// the peel `b` of `HEAD^{/a`) passed, and so did an unclosed `HEAD^{/fix`.
fn suffix_fault(rev: &str) -> Option<String> {
    let counted = rev.trim_end_matches(|c: char| c.is_ascii_digit());
    if let Some(before) = counted.strip_suffix(['~', '^']) {
        let digits = &rev[counted.len()..];
        if digits
            .parse::<u64>()
            .map_or(!digits.is_empty(), |n| n > MAX_COUNT)
        {
            return Some(format!(
                "its count `{digits}` is more than git takes ({MAX_COUNT})"
            ));
        }
        return suffix_fault(before);
    }
    if let (Some(inner_end), Some(at)) = (rev.strip_suffix('}'), rev.rfind("^{")) {
        let (before, inner) = (&rev[..at], &inner_end[at + 2..]);
        match inner.strip_prefix('/') {
            Some(regex) => {
                if let Some(why) = search_fault(regex) {
                    return Some(why);
                }
            }
            None if PEELS.contains(&inner) => {}
            None if ["tree", "blob"].contains(&inner) => {
                return Some(format!(
                    "it ends with `^{{{inner}}}`, which names a {inner}, never the commit a job \
                     starts from"
                ))
            }
            None => {
                return Some(format!(
                    "its `^{{{inner}}}` is no peel git knows (`^{{commit}}`, `^{{tag}}`, \
                     `^{{object}}`, `^{{}}`, or a search `^{{/REGEX}}`)"
                ))
            }
        }
        return if before.is_empty() {
            Some("it has nothing before its `^{…}`".into())
        } else {
            suffix_fault(before)
        };
    }
    name_fault(rev)
}

/// What is wrong with the name a revision's suffixes apply to (a branch,
/// a tag, a commit, `HEAD`, each perhaps with `@{…}`): git's rules as
/// [`fault`] holds a revision to, and no `:` (a `:/REGEX` searches every
/// branch's history, `REV:PATH` names a file, neither the commit a job
/// starts from: before, a spec took them and its provisioning failed), nor
/// `~`, `^` or `^{` git would read no count or peel from (`HEAD^{/fix`,
/// unclosed).
fn name_fault(name: &str) -> Option<String> {
    if name.starts_with(":/") {
        return Some(
            "it is a `:/…` search of every branch's history, which the host does not run: \
             search one branch's, `BRANCH^{/…}`"
                .into(),
        );
    }
    if let Some(why) = fault(name, true) {
        return Some(why);
    }
    if name.contains(':') {
        return Some(
            "it holds `:`, which names a file (`REV:PATH`) or the index, never the commit a job \
             starts from"
                .into(),
        );
    }
    if name.contains("^{") {
        return Some("it holds `^{` with no `}` closing it at its end".into());
    }
    if let Some(c) = name.chars().find(|c| ['~', '^'].contains(c)) {
        return Some(format!(
            "it holds `{c}` where git reads no count (`~N`, `^N`) or peel (`^{{…}}`)"
        ));
    }
    None
}

/// The most characters a `^{/…}` search may hold.
pub const MAX_SEARCH_CHARS: usize = 128;

/// What is wrong with the search of a `REV^{/REGEX}` revision: the host
/// runs it (`git rev-parse` against the source's commit messages), so a
/// backslash, which writes a back-reference (`\1`, a match that takes
/// time exponential in the message's length), is refused, and so is a
/// search longer than [`MAX_SEARCH_CHARS`]; `.`, `*`, `[x]` and the rest
/// are matched as git matches them.
fn search_fault(regex: &str) -> Option<String> {
    // `!-` negates the search and `!!` is a literal `!`; git refuses any
    // other `!` at the start.
    if regex.starts_with('!') && !(regex.starts_with("!-") || regex.starts_with("!!")) {
        return Some(
            "its `^{/…}` search starts with `!` followed by neither `-` (the youngest commit \
             not matching) nor `!` (a literal `!`), which git refuses"
                .into(),
        );
    }
    if regex.contains('\\') {
        return Some(
            "its `^{/…}` search holds a backslash, which the host does not run (a \
             back-reference can take a search exponential time): write the search without one"
                .into(),
        );
    }
    // A `{` writes a repeat count (the search ends at the last `^{`, so
    // none of its `{` opens a peel).
    if regex.contains('{') {
        return Some(
            "its `^{/…}` search holds `{`, which the host does not run (a repeat count, nested, \
             makes git's matcher build a pattern as large as their product): write the search \
             without one"
                .into(),
        );
    }
    let chars = regex.chars().count();
    (chars > MAX_SEARCH_CHARS).then(|| {
        format!(
            "its `^{{/…}}` search is {chars} characters long, more than the {MAX_SEARCH_CHARS} \
             the host runs"
        )
    })
}

/// The refusal of `name` as a branch, whole: "`x.lock` is not a valid git
/// branch name: a component of it ends with `.lock`"; a name holding a
/// character plain text refuses is not echoed ("is not a valid git branch
/// name: U+001B at byte 2 is a control character").
pub fn branch_refusal(name: &str) -> Option<String> {
    let why = branch_fault(name)?;
    Some(refusal(name, "a valid git branch name", &why))
}

/// The refusal of `rev` as a spec's base revision, whole, as
/// [`branch_refusal`] words it; an empty one is told to be left out.
pub fn revision_refusal(rev: &str) -> Option<String> {
    if rev.is_empty() {
        return Some("must not be empty (a branch, tag or commit; leave it out for HEAD)".into());
    }
    let why = revision_fault(rev)?;
    Some(refusal(rev, "a valid git revision", &why))
}

fn refusal(name: &str, what: &str, why: &str) -> String {
    match name.chars().all(crate::plain_text::is_plain) {
        true => format!("`{name}` is not {what}: {why}"),
        false => format!("is not {what}: {why}"),
    }
}

fn fault(name: &str, revision: bool) -> Option<String> {
    if name.is_empty() {
        return Some("it is empty".into());
    }
    // By its code point, first: the name is not echoed with it.
    if let Some(why) = crate::plain_text::first_not_plain(name) {
        return Some(why);
    }
    if let Some(c) = name.chars().find(|c| c.is_whitespace()) {
        return Some(format!("it holds white space (U+{:04X})", u32::from(c)));
    }
    if name.starts_with('-') {
        return Some("it starts with `-`".into());
    }
    if !revision && name == "HEAD" {
        return Some("it is `HEAD`, which git reads as the current commit".into());
    }
    let refused: &[char] = if revision {
        &['?', '*', '[', '\\']
    } else {
        &['~', '^', ':', '?', '*', '[', '\\']
    };
    if let Some(c) = name.chars().find(|c| refused.contains(c)) {
        return Some(format!("it holds `{c}`"));
    }
    if name.contains("..") {
        return Some("it holds `..`".into());
    }
    if !revision && name.contains("@{") {
        return Some("it holds `@{`".into());
    }
    if !revision && name == "@" {
        return Some("it is `@`".into());
    }
    if name.starts_with('/') || name.ends_with('/') || name.contains("//") {
        return Some("it starts or ends with `/` or holds `//`".into());
    }
    if name.ends_with('.') {
        return Some("it ends with `.`".into());
    }
    if name.split('/').any(|part| part.starts_with('.')) {
        return Some("a component of it starts with `.`".into());
    }
    if name.split('/').any(|part| part.ends_with(".lock")) {
        return Some("a component of it ends with `.lock`".into());
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Git's rules, each by an example a branch breaks, and what a
    /// revision may hold that a branch may not.
    #[test]
    fn names_git_would_refuse_are_refused_with_the_rule() {
        let cases = [
            "main",
            "feature/x-1",
            "",
            "ma\u{1b}[2Jin",
            "ma\nin",
            "main\u{202e}",
            "ma in",
            "-x",
            "a~1",
            "a^",
            "a:b",
            "a?",
            "a*",
            "a[b",
            "a\\b",
            "a..b",
            "a@{1}",
            "@",
            "/a",
            "a/",
            "a//b",
            "a.",
            "a/.b",
            "a.lock/b",
            "caf\u{e9}",
            "HEAD",
        ];
        let none = || None::<String>;
        let some = |s: &str| Some(s.to_string());
        assert_eq!(
            cases.map(branch_fault),
            [
                none(),
                none(),
                some("it is empty"),
                some("U+001B at byte 2 is a control character"),
                some("U+000A at byte 2 is a control character"),
                some("U+202E at byte 4 is a bidirectional control"),
                some("it holds white space (U+0020)"),
                some("it starts with `-`"),
                some("it holds `~`"),
                some("it holds `^`"),
                some("it holds `:`"),
                some("it holds `?`"),
                some("it holds `*`"),
                some("it holds `[`"),
                some("it holds `\\`"),
                some("it holds `..`"),
                some("it holds `@{`"),
                some("it is `@`"),
                some("it starts or ends with `/` or holds `//`"),
                some("it starts or ends with `/` or holds `//`"),
                some("it starts or ends with `/` or holds `//`"),
                some("it ends with `.`"),
                some("a component of it starts with `.`"),
                some("a component of it ends with `.lock`"),
                none(),
                some("it is `HEAD`, which git reads as the current commit"),
            ]
        );
        assert_eq!(
            ["HEAD~1", "v1.0^{commit}", "main@{1}", "@", "origin/main"].map(revision_fault),
            [none(), none(), none(), none(), none()]
        );
        assert_eq!(
            ["a..b", "a\u{7f}", "a\u{2066}b"].map(revision_fault),
            [
                some("it holds `..`"),
                some("U+007F at byte 1 is a control character"),
                some("U+2066 at byte 1 is a bidirectional control"),
            ]
        );
    }

    /// Each verdict is git's own: a branch name as `git check-ref-format
    /// --branch` takes it (it refuses `HEAD`, which a spec took as
    /// `results.base_branch`), a revision as `git rev-parse --verify`
    /// resolves it in a repository where each names a commit (a
    /// `^{/REGEX}` with `.`, `*`, `[`, `..` or a space in its regex,
    /// which a spec refused; `HEAD^{/a^{b}` and an unclosed
    /// `HEAD^{/fix`, which git refuses and a spec took). `@` as a
    /// branch is refused here though git takes it, reading it as the
    /// current branch's name; what git names but the host does not run
    /// or start a job from is refused with its reason.
    #[test]
    fn the_verdicts_are_gits() {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            std::process::Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@t", "-C"])
                .arg(dir.path())
                .args(args)
                .output()
                .unwrap()
        };
        assert!(git(&["init", "-q", "-b", "main"]).status.success());
        assert!(
            git(&["commit", "-q", "--allow-empty", "-m", "fix.* bug [x] a..b"])
                .status
                .success()
        );
        assert!(git(&["tag", "v1.0"]).status.success());
        let branches = [
            "main",
            "feature/x-1",
            "x/HEAD",
            "-x",
            "a..b",
            "a~1",
            "a@{1}",
            "x.lock",
            "ma in",
        ];
        assert_eq!(
            branches.map(|b| branch_fault(b).is_none()),
            branches.map(|b| git(&["check-ref-format", "--branch", b]).status.success()),
            "{branches:?}"
        );
        let revisions = [
            "main",
            "HEAD~0",
            "v1.0^{commit}",
            "HEAD^{/fix.*}",
            "HEAD^{/[x]}",
            "HEAD^{/a..b}",
            "main^{/fix.}~0",
            "HEAD^{/fix}^{commit}",
            "main..v1.0",
            "-x",
            "ma in",
            "HEAD^{/fix}.",
            "HEAD^{/a^{b}",
            "HEAD^{/fix}@{0}",
            "HEAD^{/fix",
            "HEAD^{/fix}^{/bug}~0^0",
            "HEAD^{/}",
            "HEAD^{/!-nothing like it}",
            "HEAD^{/!fix}",
            "HEAD^{/fix}^{}",
            "HEAD^{/fix}^{commit",
            "HEAD^{/fix}^{b}",
            "^{/fix}",
            "^{commit}",
            "~1",
            "main@{0}",
            "main@{0}~0",
            "main~0@{0}",
            "main^0^{commit}^0",
            "HEAD~2147483648",
            "HEAD^0^{}",
        ];
        assert_eq!(
            revisions.map(|r| revision_fault(r).is_none()),
            revisions.map(
                |r| git(&["rev-parse", "--verify", "-q", "--end-of-options", r])
                    .status
                    .success()
            ),
            "{revisions:?}"
        );
        // What git would run but the host does not: a back-reference, a
        // search longer than the most, a search of every branch, what
        // names no commit (a file, a tree).
        let long = format!("HEAD^{{/{}}}", "a".repeat(MAX_SEARCH_CHARS + 1));
        let refused = [
            "HEAD^{/\\* bug}",
            "HEAD^{/(a*)\\1x}",
            "HEAD^{/((a{1000}){1000})}",
            long.as_str(),
            ":/fix",
            "HEAD:",
            "HEAD^{tree}",
        ];
        let named = &refused[4..];
        assert!(
            named.iter().all(
                |r| git(&["rev-parse", "--verify", "-q", "--end-of-options", r])
                    .status
                    .success()
            ),
            "git names something by each of {named:?}"
        );
        let backslash = "its `^{/…}` search holds a backslash, which the host does not run (a \
                         back-reference can take a search exponential time): write the search \
                         without one";
        assert_eq!(
            refused.map(revision_fault),
            [
                Some(backslash.to_string()),
                Some(backslash.to_string()),
                Some(
                    "its `^{/…}` search holds `{`, which the host does not run (a repeat \
                     count, nested, makes git's matcher build a pattern as large as their \
                     product): write the search without one"
                        .to_string()
                ),
                Some(format!(
                    "its `^{{/…}}` search is {} characters long, more than the 128 the host runs",
                    MAX_SEARCH_CHARS + 1
                )),
                Some(
                    "it is a `:/…` search of every branch's history, which the host does not \
                     run: search one branch's, `BRANCH^{/…}`"
                        .to_string()
                ),
                Some(
                    "it holds `:`, which names a file (`REV:PATH`) or the index, never the \
                     commit a job starts from"
                        .to_string()
                ),
                Some(
                    "it ends with `^{tree}`, which names a tree, never the commit a job starts \
                     from"
                        .to_string()
                ),
            ]
        );
    }
}

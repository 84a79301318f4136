//! An error with its causes on one line, `a: b: c`, each cause said once:
//! the runner's messages (a failed job's reason), the server's problem
//! details, the store's retry logs, the broker's credential failures and
//! what the command line prints. Many error types name their cause in their
//! own message (`cannot read {path}: {source}`, a `#[error("{0}")]` around
//! a `#[from]` error, an SDK error repeating its cause) and also return it
//! as `source()`, so a plain walk of the sources (or anyhow's `{:#}`) says
//! it twice (`No such file or directory (os error 2): No such file or
//! directory (os error 2)`): a cause the line already says is skipped, and
//! so is an empty one (no `: ` for it). Already said means the line ends
//! with the cause's text, holds it as one of its `: ` parts, or holds it
//! anywhere when it is long enough ([`SAID_ANYWHERE`]) not to be a word the
//! line uses for something else: a short cause (`timed out`, `denied`)
//! inside a longer phrase is still said. The one place this is done. A leaf
//! module (it imports nothing of the crate), so that the store, below the
//! runner, can say its errors as the runner does.

/// The length from which a cause found anywhere in the line counts as
/// said: a whole OS error (`No such file or directory (os error 2)`) or an
/// inner error's message, never a word or two.
const SAID_ANYWHERE: usize = 24;

/// `e` and each of its causes, joined by `: `, each said once.
pub fn chain(e: &dyn std::error::Error) -> String {
    with_causes(e.to_string(), e.source())
}

/// `out` (an error's message, perhaps with more said of it) followed by
/// `cause` and each of its own causes, each said once, as [`chain`] does.
pub fn with_causes(
    mut out: String,
    mut cause: Option<&(dyn std::error::Error + 'static)>,
) -> String {
    while let Some(s) = cause {
        let text = s.to_string();
        if !text.is_empty() && !said(&out, &text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
        cause = s.source();
    }
    out
}

/// Whether `line` already says `cause` (see the module's paragraph).
fn said(line: &str, cause: &str) -> bool {
    line.ends_with(cause)
        || line.split(": ").any(|part| part == cause)
        || (cause.chars().count() >= SAID_ANYWHERE && line.contains(cause))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read {path}: {source}")]
    struct Read {
        path: String,
        source: std::io::Error,
    }

    /// The form of `SubmitError::Admit`: the inner error as the whole
    /// message and as the source.
    #[derive(Debug, thiserror::Error)]
    enum Outer {
        #[error("{0}")]
        Inner(#[from] Read),
        #[error("enqueue the job")]
        Quiet(#[source] Read),
    }

    /// A cause with an empty message.
    #[derive(Debug, thiserror::Error)]
    #[error("")]
    struct Empty(#[source] std::io::Error);

    fn not_found() -> std::io::Error {
        std::io::Error::from(std::io::ErrorKind::NotFound)
    }

    fn read() -> Read {
        Read {
            path: "/x".to_owned(),
            source: not_found(),
        }
    }

    #[test]
    fn a_cause_in_the_message_is_said_once() {
        let e = anyhow::Error::new(read()).context("load the spec");
        assert_eq!(
            chain(e.as_ref()),
            format!("load the spec: cannot read /x: {}", not_found())
        );
        // What anyhow alone prints: the cause twice.
        assert_eq!(
            format!("{e:#}"),
            format!("load the spec: cannot read /x: {0}: {0}", not_found())
        );
        // A wrapper saying its inner error whole, which says its own cause.
        assert_eq!(
            chain(&Outer::from(read())),
            format!("cannot read /x: {}", not_found())
        );
    }

    /// A wrapper whose message holds its cause in the middle.
    #[derive(Debug, thiserror::Error)]
    #[error("{source} (while reading {path})")]
    struct Amid {
        path: String,
        source: std::io::Error,
    }

    /// An error whose message uses its short cause's words for something
    /// else.
    #[derive(Debug, thiserror::Error)]
    #[error("the upstream timed out once and was asked again")]
    struct Retried(#[source] Short);

    #[derive(Debug, thiserror::Error)]
    #[error("timed out")]
    struct Short;

    #[test]
    fn a_long_cause_amid_the_message_is_said_once_and_a_short_one_again() {
        let amid = Amid {
            path: "/x".to_owned(),
            source: std::io::Error::from_raw_os_error(2),
        };
        assert_eq!(
            chain(&amid),
            "No such file or directory (os error 2) (while reading /x)"
        );
        // `timed out` is in the message as part of another phrase: the
        // cause is still said.
        assert_eq!(
            chain(&Retried(Short)),
            "the upstream timed out once and was asked again: timed out"
        );
        // A short cause that is one of the line's parts is said already.
        let e = anyhow::Error::new(Short)
            .context("timed out")
            .context("fetch");
        assert_eq!(chain(e.as_ref()), "fetch: timed out");
    }

    #[test]
    fn causes_not_in_the_message_are_all_said() {
        let e = anyhow::Error::new(not_found())
            .context("open the store")
            .context("list jobs");
        assert_eq!(
            chain(e.as_ref()),
            format!("list jobs: open the store: {}", not_found())
        );
        assert_eq!(
            chain(&Outer::Quiet(read())),
            format!("enqueue the job: cannot read /x: {}", not_found())
        );
        // An empty message adds no `: `; its cause still comes.
        assert_eq!(chain(&Empty(not_found())), not_found().to_string());
        let e = anyhow::Error::new(Empty(not_found())).context("open");
        assert_eq!(chain(e.as_ref()), format!("open: {}", not_found()));
    }
}

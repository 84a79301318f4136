//! An error with its causes on one line, `a: b: c`, each cause said once:
//! the runner's messages (a failed job's reason), the server's problem
//! details, the store's retry logs, the broker's credential failures and
//! what the command line prints. Many error types name their cause in their
//! own message (`cannot read {path}: {source}`, a `#[error("{0}")]` around
//! a `#[from]` error, an SDK error repeating its cause) and also return it
//! as `source()`, so a plain walk of the sources (or anyhow's `{:#}`) says
//! it twice (`No such file or directory (os error 2): No such file or
//! directory (os error 2)`): a cause whose text the line already holds is
//! skipped, and so is an empty one (no `: ` for it). The one place this is done. A leaf
//! module (it imports nothing of the crate), so that the store, below the
//! runner, can say its errors as the runner does.

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
        if !text.is_empty() && !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
        cause = s.source();
    }
    out
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

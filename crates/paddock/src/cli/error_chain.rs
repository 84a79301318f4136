//! An error as printed to the user: its message and each cause's, joined
//! by `: `, each said once. Many of Paddock's error types name their cause
//! in their own message (`cannot read {path}: {source}`) and also return
//! it as `source()`, so anyhow's `{:#}` would print it twice (`No such
//! file or directory (os error 2): No such file or directory (os error
//! 2)`): a cause whose text the message so far already ends with is
//! skipped.

/// `e` and its causes, each printed once.
pub fn render(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !text.is_empty() && !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
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

    fn not_found() -> std::io::Error {
        std::io::Error::from(std::io::ErrorKind::NotFound)
    }

    #[test]
    fn a_cause_in_the_message_is_printed_once() {
        let e = anyhow::Error::new(Read {
            path: "/x".to_owned(),
            source: not_found(),
        })
        .context("load the spec");
        assert_eq!(
            render(e.as_ref()),
            format!("load the spec: cannot read /x: {}", not_found())
        );
        // What anyhow alone prints: the cause twice.
        assert_eq!(
            format!("{e:#}"),
            format!("load the spec: cannot read /x: {0}: {0}", not_found())
        );
    }

    #[test]
    fn causes_not_in_the_message_are_all_printed() {
        let e = anyhow::Error::new(not_found())
            .context("open the store")
            .context("list jobs");
        assert_eq!(
            render(e.as_ref()),
            format!("list jobs: open the store: {}", not_found())
        );
    }
}

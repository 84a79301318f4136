//! A provider SDK's error on one line: its message and each cause's,
//! joined by `: `, a cause whose text is already in the line skipped
//! (`aws-config` and `gcp_auth` errors often repeat their cause in their
//! own message). Used where the broker reports a credential failure.

/// `e` and its causes on one line, each said once.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}

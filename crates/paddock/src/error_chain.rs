//! An error with its sources on one line, `a: b: c`: the runner's messages,
//! the server's problem details and the store's retry logs. A leaf module
//! (it imports nothing of the crate), so that the store, below the runner,
//! can say its errors as the runner does.

/// `e` and each of its sources, joined by `: `.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

//! Who asked this server to cancel a job, as the job's record keeps it:
//! the server's host and the API token the request came with (its public
//! id, its scope and, when the operator gave it one, its name, shown safe
//! for a terminal and cut to [`NAME_MAX`] characters: `--name` is any
//! text). A cancel recorded in the store for the process running the job
//! (`Store::request_cancel`) keeps it as the request's `by`, which the
//! reason of a job ended on that request after its owner died says
//! (`reaper::cancelled_reason`: `cancelled, asked by build-7 (API token
//! 3f…, scope submit, name "ci") at …, and it was found dead …`, worded
//! by `cancel::asked_at` as every cancel's end is). Before, that reason
//! named only the server's host, whoever of the API's callers asked.
//! The same words end a queued job cancelled (`cancelled while queued,
//! asked by …`, `cancel::cancelled_queued`) and a running one its owner
//! stopped on the request (`cancelled, asked by … at …`,
//! `cancel::with_asker`); a cancel from the dashboard says so
//! (`dashboard, API token …`), with the session's token name.

use crate::api_token::Scope;

/// The most characters of a token's name that [`Asker::described`] keeps.
pub const NAME_MAX: usize = 64;

/// The API token a cancel came with (the route's `Caller`, or the
/// dashboard's signed-in viewer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asker {
    pub token_id: String,
    pub scope: Scope,
    /// The operator's name for the token, if it has one.
    pub token_name: Option<String>,
    /// Asked from the dashboard (a signed-in browser), not the API.
    pub dashboard: bool,
}

impl Asker {
    /// The asker as a cancel request records it: the server's `host`
    /// name, then the token.
    pub fn described(&self, host: &str) -> String {
        let name = self
            .token_name
            .as_deref()
            .map(|n| {
                let shown: String = crate::terminal_text::line(n)
                    .chars()
                    .take(NAME_MAX)
                    .collect();
                format!(", name \"{shown}\"")
            })
            .unwrap_or_default();
        let through = if self.dashboard { "dashboard, " } else { "" };
        format!(
            "{host} ({through}API token {}, scope {}{name})",
            self.token_id, self.scope
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name with an escape and a right-to-left override is shown
    /// escaped and cut; none is left out.
    #[test]
    fn a_tokens_name_is_shown_safe_and_cut() {
        let asker = |name: Option<&str>| Asker {
            token_id: "3f9c".into(),
            scope: Scope::Submit,
            token_name: name.map(str::to_owned),
            dashboard: false,
        };
        assert_eq!(
            asker(None).described("build-7"),
            "build-7 (API token 3f9c, scope submit)"
        );
        assert_eq!(
            asker(Some("ci\u{1b}[2J\u{202e}")).described("build-7"),
            "build-7 (API token 3f9c, scope submit, name \"ci\\u{1b}[2J\\u{202e}\")"
        );
        let long = "n".repeat(200);
        assert_eq!(
            asker(Some(&long)).described("b"),
            format!(
                "b (API token 3f9c, scope submit, name \"{}\")",
                "n".repeat(NAME_MAX)
            )
        );
        let dashboard = Asker {
            dashboard: true,
            ..asker(Some("ops"))
        };
        assert_eq!(
            dashboard.described("build-7"),
            "build-7 (dashboard, API token 3f9c, scope submit, name \"ops\")"
        );
    }
}

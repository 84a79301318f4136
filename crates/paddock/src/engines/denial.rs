//! What an engine reports of the tool calls it refused, as the adapter
//! reads it from the engine's stream or, after the run, from the files the
//! engine left in the job's home. A refusal is either the host profile's
//! rule as the engine enforces it (the deny files and the hook Paddock
//! wrote, recognized by [`JUSTIFICATION_MARK`] or by the engine's own
//! denial text), which `policy` turns into a `deny_commands` event, or the
//! engine refusing on its own (its safety checks, its sandbox or approval
//! layer), which is a `policy` event of its own whether or not the job has
//! a profile. Everything here is read from what the job can write (its
//! engine's output, the files it left, the hook's record): it is hostile
//! input and only ever becomes an event that says whose report it is
//! ([`ReportedIn`]).

use paddock_protocol::{EngineKind, EventBody};

/// Starts the justification of every Paddock rule (and every hook reason),
/// so that a denial can be told from the engine's own refusals.
pub const JUSTIFICATION_MARK: &str = "paddock policy:";

/// The reason given to the engine (and the agent) for a denial.
pub fn reason(profile_id: &str, rule: &str) -> String {
    format!("{JUSTIFICATION_MARK} host profile `{profile_id}` denies `{rule}` on this host")
}

/// The rule named in a Paddock [`reason`]: "... denies `RULE` on this host".
pub fn rule_in(text: &str) -> Option<String> {
    let start = text.find("denies `")? + "denies `".len();
    let end = text[start..].find("` on this host")? + start;
    Some(text[start..end].to_string())
}

/// Where a refusal was read. Every place a denial is read from is one the
/// job can write: the engine runs inside the job, and the hook runs there
/// too, so a `policy` event of a denial is the job side's report, never
/// anything Paddock saw happen, and each says whose report it is
/// ([`ReportedIn::policy_event`]). Only what the host itself decides or observes (its
/// broker's refusals, its egress proxy's, its clock and limits, the
/// backstop stopping a job) is worded as the host's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportedIn {
    /// The files the engine left once it had exited (Codex's rollouts).
    Files,
    /// The engine's output stream (Claude Code's tool results and its
    /// `result` event's `permission_denials`).
    Output,
    /// The hook's record file (`meta/denials.jsonl`), which the hook
    /// appends to from inside the job.
    Record,
}

impl ReportedIn {
    /// What a `policy` event read here says before its message.
    pub fn words(self) -> &'static str {
        match self {
            ReportedIn::Files => REPORTED_IN_FILES,
            ReportedIn::Output => REPORTED_IN_OUTPUT,
            ReportedIn::Record => REPORTED_IN_RECORD,
        }
    }
}

/// What a `policy` event made from the files the engine left once it had
/// exited (Codex's rollouts) says of itself: the job could write those
/// files (a rollout of any text), so what they hold is the engine's
/// report, not anything Paddock saw happen.
pub const REPORTED_IN_FILES: &str =
    "the engine's session files, which the job could write, report:";

/// What a `policy` event read from the engine's output says of itself:
/// the engine is the job's program, and the job prints what it likes.
pub const REPORTED_IN_OUTPUT: &str = "the engine's output, which the job could write, reports:";

/// What a `policy` event read from the hook's record file says of itself:
/// the hook appends to it from inside the job, so the job can too.
pub const REPORTED_IN_RECORD: &str = "the hook's record file, which the job could write, reports:";

impl ReportedIn {
    /// The `policy` event of a refusal read here: `message`, the
    /// refusal as read, after whose report it is ([`ReportedIn::words`]),
    /// first, so that a list that cuts a long message (the closeout's, a
    /// terminal's line) still shows it, whatever length of command the
    /// job wrote. The one way a refusal becomes an event
    /// ([`EngineDenial::refusal_event`], `JobPolicy::denial_event`), so
    /// that none can be worded as the host's.
    pub fn policy_event(self, rule: String, message: &str) -> EventBody {
        EventBody::Policy {
            rule,
            message: format!("{} {message}", self.words()),
        }
    }
}

/// The most refused calls an adapter takes from the files its engine
/// left ([`FoundAfter`]): an engine's session records a handful, and the
/// job can write millions there, each of which Paddock held in its
/// memory and made an event.
pub const MAX_FOUND_AFTER: usize = 256;

/// The most characters of a refused call's command (or a rule named in a
/// refusal) an adapter keeps from the files its engine left; the rest is
/// cut (`cut_text`, its length said). A job could name one command of
/// megabytes and refuse it thousands of times.
pub const MAX_COMMAND_CHARS: usize = 4096;

/// `text` from the engine's files as a denial keeps it: at most
/// [`MAX_COMMAND_CHARS`] characters.
pub fn kept(text: &str) -> String {
    use crate::cut_text::{cut, Cut, Length};
    cut(
        text,
        Cut::chars(MAX_COMMAND_CHARS).saying(Length::Characters),
    )
}

/// The refusals an adapter found in what its engine left once it had
/// exited: the first [`MAX_FOUND_AFTER`], and how many more it saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FoundAfter {
    pub denials: Vec<EngineDenial>,
    /// Refusals seen past the first [`MAX_FOUND_AFTER`], not taken.
    pub more: u64,
}

/// One refused tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineDenial {
    /// The command line the agent tried (for another tool, its input).
    pub command: String,
    /// The engine's id of the call, when it has one.
    pub call_id: Option<String>,
    pub by: DeniedBy,
}

/// Which layer refused the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeniedBy {
    /// The host profile, through the files or hook Paddock gave the
    /// engine. `rule`: the rule the engine's message names, used when the
    /// profile's matcher does not recognize the command.
    Profile { rule: Option<String> },
    /// The engine on its own, with the reason it gave.
    Engine { reason: String },
}

impl EngineDenial {
    /// The `policy` event of a refusal the engine made on its own, read
    /// `from` where the job could write it (`None` for a profile denial:
    /// `policy` reports those).
    pub fn refusal_event(&self, engine: EngineKind, from: ReportedIn) -> Option<EventBody> {
        match &self.by {
            DeniedBy::Profile { .. } => None,
            DeniedBy::Engine { reason } => Some(from.policy_event(
                engine.as_str().to_string(),
                &format!("{engine} refused `{}` on its own: {reason}", self.command),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_from_justification() {
        assert_eq!(
            rule_in(&reason("x", "make all")),
            Some("make all".to_string())
        );
        assert_eq!(rule_in("no rule here"), None);
    }

    /// An engine's own refusal is an event, saying whose report it is
    /// and read from where (the engine's session files, which the job
    /// could write); a profile's denial is not one here.
    #[test]
    fn only_the_engines_own_refusals_are_events_here() {
        let own = EngineDenial {
            command: "rm -f a".into(),
            call_id: Some("c1".into()),
            by: DeniedBy::Engine {
                reason: "rm -f style commands are not permitted".into(),
            },
        };
        assert_eq!(
            own.refusal_event(EngineKind::Codex, ReportedIn::Files),
            Some(EventBody::Policy {
                rule: "codex".into(),
                message: "the engine's session files, which the job could write, report: codex \
                          refused `rm -f a` on its own: rm -f style commands are not permitted"
                    .into(),
            })
        );
        let profile = EngineDenial {
            by: DeniedBy::Profile { rule: None },
            ..own
        };
        assert_eq!(
            profile.refusal_event(EngineKind::Codex, ReportedIn::Output),
            None
        );
    }

    /// A refusal read from the engine's files, its output or the hook's
    /// record says whose report it is, from a place the job could write.
    #[test]
    fn a_refusal_says_whose_report_it_is() {
        assert_eq!(
            [ReportedIn::Files, ReportedIn::Output, ReportedIn::Record]
                .map(|from| from.policy_event("curl".into(), "denied `curl x`")),
            [
                EventBody::Policy {
                    rule: "curl".into(),
                    message: "the engine's session files, which the job could write, report: \
                              denied `curl x`"
                        .into(),
                },
                EventBody::Policy {
                    rule: "curl".into(),
                    message: "the engine's output, which the job could write, reports: denied \
                              `curl x`"
                        .into(),
                },
                EventBody::Policy {
                    rule: "curl".into(),
                    message: "the hook's record file, which the job could write, reports: denied \
                              `curl x`"
                        .into(),
                },
            ]
        );
    }
}

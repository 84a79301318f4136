//! The closeout: an honest account of one job, the same text on the pull
//! request, in the outbox, in `paddock show` and in the job's record. Its
//! facts are gathered from the job record, the patch and the event stream
//! (failing commands and errors, policy denials, the destinations its
//! egress proxy refused, the test commands the agent ran and how they
//! ended, the changed files outside the ticket's `touch_only`) and
//! rendered from one minijinja template
//! (`closeout.md.j2`). Everything the job wrote (commands, messages, file
//! names, the engine's errors, a failure's reason) is data: it is flattened
//! to one line and shown as a code span whose fence is longer than any run
//! of backticks in it ([`code`]), so on a forge it mentions nobody, links
//! or closes no issue, embeds no image or link, hides nothing in HTML and
//! starts no section of its own, and it reads as the job wrote it.

use std::collections::HashMap;

use minijinja::Environment;
use paddock_protocol::{AgentEvent, EventBody, JobRecord, Phase};
use serde::Serialize;

const TEMPLATE: &str = include_str!("closeout.md.j2");

/// The `source` of Paddock's own `error` events: its non-fatal ones are
/// warnings (as `paddock run`'s progress shows them), not failures.
const PADDOCK: &str = "paddock";

/// How long one quoted command or message may be in the closeout.
const ITEM_MAX: usize = 200;

/// How long one of Paddock's own warnings may be: they end with what to do
/// (the branch not fetched says where its bundle is and the command that
/// takes it), which a cut at [`ITEM_MAX`] lost.
const WARNING_MAX: usize = 1_000;

/// How many items of each list a closeout quotes.
#[derive(Debug, Clone, Copy)]
struct Caps {
    /// At most this many items of one list (the rest counted).
    list: usize,
    /// At most this many changed files listed (the rest counted: `paddock
    /// diff` has them all), so that a job changing 100,000 files still has
    /// a closeout a forge takes (GitHub refuses a body over 65,536
    /// characters).
    changed: usize,
}

/// The lists as a closeout quotes them.
const CAPS: Caps = Caps {
    list: 20,
    changed: 100,
};

/// The lists cut shorter, for a closeout that would not fit
/// [`FORGE_MAX`] otherwise: every item the job's text (a code span of up
/// to [`ITEM_MAX`] characters, its fences as long again on each side when
/// the text is backticks) comes to at most about 65 items of 610
/// characters, and Paddock's 5 warnings (up to [`WARNING_MAX`]) to at most
/// about 3,010 each.
const SHORT_CAPS: Caps = Caps {
    list: 5,
    changed: 20,
};

/// The most characters a closeout may have: GitHub refuses a pull
/// request's body or a comment over 65,536, and the body adds a few lines.
const FORGE_MAX: usize = 60_000;

#[derive(Debug, thiserror::Error)]
#[error("closeout of job {job_id}: cannot render: {message}")]
pub struct CloseoutError {
    pub job_id: String,
    pub message: String,
}

/// What the closeout tells beyond the job record.
#[derive(Debug, Clone, Default)]
pub struct CloseoutInput<'a> {
    pub ticket_title: &'a str,
    pub ticket_url: Option<&'a str>,
    /// The result commit, when there was a change.
    pub commit: Option<&'a str>,
    pub left_out: &'a [String],
    /// How many uncommitted changes the source had at the job's end.
    pub source_dirty: usize,
    /// The ticket's `touch_only` patterns (empty: no constraint).
    pub touch_only: &'a [String],
    /// Labelled links (the pull request, the branch...).
    pub links: Vec<(String, String)>,
    /// What this publish warned of before the closeout was rendered (the
    /// branch not fetched into a local source): shown with the job's own
    /// warnings. A publish's warnings are never read back from the events
    /// (see `from_events`): a later `paddock publish` renders its own.
    pub publish_warnings: &'a [String],
    /// The branch a `HEAD`-based job started from (`start_branch.rs`),
    /// named where the closeout says on which branch its commit is;
    /// `None`: the spec's `base_ref` as written.
    pub started_on: Option<&'a str>,
}

#[derive(Clone, Serialize)]
struct TestRun {
    command: String,
    result: String,
}

#[derive(Serialize)]
struct Tokens {
    input: u64,
    cached: u64,
    output: u64,
    reasoning: u64,
}

#[derive(Serialize)]
struct Link {
    label: String,
    url: String,
}

#[derive(Serialize)]
struct Facts<'a> {
    job_id: &'a str,
    ticket_id: &'a str,
    /// A code span (an issue tracker's title is anyone's text), or empty.
    ticket_title: String,
    /// An autolink ([`ticket_link`]).
    ticket_url: Option<String>,
    attempt: u32,
    status: &'a str,
    reason: Option<String>,
    engine: &'a str,
    /// What the spec or the record names (the model, the rung, the
    /// branch, the base revision, the commit): code spans ([`code`]),
    /// which a backtick in the value cannot close (a `^{/…}` search may
    /// hold one).
    model: String,
    rung: String,
    session: Option<String>,
    branch: String,
    base_ref: String,
    commit: Option<String>,
    /// The first `CHANGED_MAX` changed files, and a line counting the rest.
    changed_files: Vec<String>,
    /// How many files changed.
    changed_count: usize,
    left_out: Vec<String>,
    source_dirty: usize,
    touch_only: Vec<String>,
    /// Changed files no `touch_only` pattern covers (capped), and how many.
    outside_scope: Vec<String>,
    outside_count: usize,
    tests: Vec<TestRun>,
    failures: Vec<String>,
    warnings: Vec<String>,
    denials: Vec<String>,
    network_refused: Vec<String>,
    /// Destinations allowed but not reached (`UNREACHED_RULES`).
    network_unreached: Vec<String>,
    model_calls: u64,
    tokens: Tokens,
    cost: String,
    duration: String,
    links: Vec<Link>,
    /// The lists were cut to [`SHORT_CAPS`] to fit [`FORGE_MAX`].
    shortened: bool,
}

/// Commands that run a test suite.
const TEST_COMMANDS: &[&str] = &[
    "cargo test",
    "cargo nextest",
    "pytest",
    "python -m pytest",
    "python3 -m pytest",
    "python -m unittest",
    "npm test",
    "npm run test",
    "yarn test",
    "pnpm test",
    "go test",
    "make test",
    "make check",
    "jest",
    "vitest",
    "mvn test",
    "gradle test",
    "./gradlew test",
    "bundle exec rspec",
    "rspec",
    "ctest",
];

/// One line (any run of whitespace, line breaks included, one space), at
/// most `ITEM_MAX` characters.
fn one_line(text: &str) -> String {
    one_line_within(text, ITEM_MAX)
}

/// [`one_line`] of at most `max` characters.
fn one_line_within(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max {
        let cut: String = flat.chars().take(max).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

/// Text the job wrote as a Markdown code span: [`one_line`], fenced by one
/// backtick more than its longest run of them (padded with a space when it
/// starts or ends with one, which the span drops again), so nothing in it
/// closes the span early. GitHub and GitLab render a code span's content
/// as it is: no mention, issue reference or closing keyword, no link,
/// image, HTML or heading, and no line of its own (a line break became a
/// space).
pub(crate) fn code(text: &str) -> String {
    fenced(&one_line(text))
}

/// The ticket's URL as the closeout and the pull request's body link it:
/// an autolink (`<URL>`) when it is one a spec may give
/// (`paddock_protocol::results::check_ticket_url`: nothing in it ends the
/// autolink or the line), else a code span ([`code`]), whatever reached
/// here. Before, it was written as it came, and a line break in it
/// started a line on the forge (a GitLab quick action such as `/merge`, a
/// mention, a forged section).
pub fn ticket_link(url: &str) -> String {
    match paddock_protocol::results::check_ticket_url(url) {
        Ok(()) => format!("<{url}>"),
        Err(_) => code(url),
    }
}

/// A path the job made (a changed file, build output left out) as a
/// Markdown code span that names it as it is, as `paddock run`'s summary
/// does: every character a forge would show as another or as nothing (a
/// control, a tab or newline, a bidirectional override, an invisible
/// character: `terminal_text::dangerous`; any whitespace but a space,
/// which a code span shows as a space) as its escape (`\u{9}`), runs of
/// spaces kept; at most [`ITEM_MAX`] characters. [`code`] makes one line
/// of text by its words, which named `docs/a<TAB>b.md` `docs/a b.md`, a
/// file the job never made, and showed a name holding U+202E reversed.
fn path_code(path: &str) -> String {
    fenced(&cut(crate::terminal_text::path(path), ITEM_MAX))
}

/// `text` cut to `max` characters, with `…` where it was cut.
fn cut(text: String, max: usize) -> String {
    if text.chars().count() > max {
        text.chars().take(max).chain(['…']).collect()
    } else {
        text
    }
}

/// One of Paddock's own warnings as a code span of at most
/// [`WARNING_MAX`] characters: its line breaks (a git error's) one space
/// each, every other character as `terminal_text::path` shows it, runs
/// of spaces kept, so the file names it lists (named by that function)
/// read as they are. [`code`] made one line of it by its words, which named a
/// file `docs/a<TAB>b.md` or `a  b.md` `a b.md`.
fn warning_code(text: &str) -> String {
    let mut shown = String::with_capacity(text.len());
    for (i, line) in text.trim().lines().enumerate() {
        if i > 0 {
            shown.push(' ');
        }
        shown.push_str(&crate::terminal_text::path(line));
    }
    fenced(&cut(shown, WARNING_MAX))
}

/// `flat` (one line) as a code span: fenced by one backtick more than its
/// longest run of them, padded with a space (which the span drops again)
/// when it starts or ends with a backtick or a space.
fn fenced(flat: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in flat.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    if flat.is_empty() {
        return "` `".to_string();
    }
    let edge = flat.starts_with(['`', ' ']) || flat.ends_with(['`', ' ']);
    // A span of spaces alone keeps them all.
    let pad = if edge && !flat.trim_matches(' ').is_empty() {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{flat}{pad}{fence}")
}

/// [`one_line`] for prose Paddock writes that names what a spec chose (a
/// model, a prior job): an `@` is followed by a word joiner, so it
/// mentions nobody on a forge.
fn inert(text: &str) -> String {
    one_line(text).replace('@', "@\u{2060}")
}

/// The command a shell tool ran, without a `bash -lc` wrapper.
fn unwrapped(command: &str) -> &str {
    for prefix in [
        "bash -lc ",
        "bash -c ",
        "sh -c ",
        "/bin/bash -lc ",
        "/bin/sh -c ",
    ] {
        if let Some(rest) = command.strip_prefix(prefix) {
            return rest.trim_matches(|c| c == '\'' || c == '"');
        }
    }
    command
}

fn is_test(command: &str) -> bool {
    let c = unwrapped(command);
    c.split("&&")
        .chain(c.split(';'))
        .any(|part| TEST_COMMANDS.iter().any(|t| part.trim().starts_with(t)))
}

fn capped(mut list: Vec<String>, max: usize) -> Vec<String> {
    if list.len() > max {
        let more = list.len() - max;
        list.truncate(max);
        list.push(format!("… and {more} more"));
    }
    list
}

/// The most items of one list a closeout keeps from the events (the
/// longer of the caps: the rest are counted, not kept).
const KEPT: usize = CAPS.list;

/// The most tool calls whose command is kept until their result comes
/// (the oldest forgotten first: a result whose call was forgotten is not
/// quoted), and the longest call id kept: a job writes as many calls
/// without results as it likes.
const CALLS_KEPT: usize = 4096;
const CALL_ID_MAX: usize = 256;

/// The most refused destinations (and kinds of refusal naming none)
/// counted one by one; the attempts past them are counted together. The
/// longest host kept: a longer one is counted with them.
const DESTINATIONS_KEPT: usize = 1024;
const HOST_MAX: usize = 1024;

/// The first [`KEPT`] items of a list, and how many came after.
struct Kept<T> {
    items: Vec<T>,
    more: usize,
}

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Kept {
            items: Vec::new(),
            more: 0,
        }
    }
}

impl<T> Kept<T> {
    fn push(&mut self, item: T) {
        if self.items.len() < KEPT {
            self.items.push(item);
        } else {
            self.more = self.more.saturating_add(1);
        }
    }
}

/// (host, port, phase, rule) of a refusal.
type Refused = (String, u16, &'static str, String);

/// What a closeout tells of a job's events, gathered one event at a time
/// ([`EventFacts::add`]) so that a job's whole history (millions of
/// events a hostile job may write) is never held: every list keeps its
/// first items and counts the rest. The job's own events end where its
/// publishing begins: what follows is a publish's (the first one's
/// warnings, a `paddock publish`'s notes), which a closeout rendered by a
/// later publish must not repeat as if still true (a branch "not fetched"
/// that this publish fetched); each publish passes its own
/// (`publish_warnings`).
#[derive(Default)]
pub struct EventFacts {
    /// A `publishing` status was seen: the job's own events have ended.
    publishing: bool,
    /// What the job did with its prior attempt's engine session.
    session: Option<String>,
    /// The tool calls awaiting a result, by call id: whether the command
    /// runs tests, and the command quoted.
    calls: HashMap<String, (bool, String)>,
    /// The ids of `calls` in the order they came (and of some answered
    /// since): the oldest is forgotten first.
    call_order: std::collections::VecDeque<String>,
    tests: Kept<TestRun>,
    failures: Kept<String>,
    /// Paddock's own non-fatal messages (no budget, a branch kept in its
    /// bundle, files left out): said, but not what failed.
    warnings: Kept<String>,
    denials: Kept<String>,
    /// Refused destinations in the order first refused, with how many
    /// attempts; `refused_at` indexes them.
    refused: Vec<(Refused, usize)>,
    refused_at: HashMap<Refused, usize>,
    /// Refusals naming no destination, per phase and rule, summed.
    without: Vec<((&'static str, String), u64)>,
    /// Refused attempts past [`DESTINATIONS_KEPT`] destinations.
    unlisted: u64,
}

impl EventFacts {
    /// The facts of `events` (a history already in memory).
    pub fn of(events: &[AgentEvent]) -> EventFacts {
        let mut facts = EventFacts::default();
        for event in events {
            facts.add(event);
        }
        facts
    }

    /// The facts of job `job_id`'s events, read a page at a time.
    pub async fn read(
        store: &dyn crate::store::Store,
        job_id: &str,
    ) -> Result<EventFacts, crate::store::StoreError> {
        let mut facts = EventFacts::default();
        crate::store::event_pages::each_event(store, job_id, 0, |e| facts.add(e)).await?;
        Ok(facts)
    }

    /// Takes in the job's next event.
    pub fn add(&mut self, event: &AgentEvent) {
        // The last said: a job moved to another rung at its first launch
        // decides again there (`runner/rung_fallback.rs`).
        if let Some(said) = session(event) {
            self.session = Some(said);
        }
        if self.publishing {
            return;
        }
        match &event.body {
            EventBody::Status {
                phase: Phase::Publishing,
                ..
            } => self.publishing = true,
            EventBody::ToolCall {
                call_id: Some(id),
                command: Some(command),
                ..
            } if id.len() <= CALL_ID_MAX => {
                let command = unwrapped(command);
                self.call(id, (is_test(command), code(command)));
            }
            EventBody::ToolResult {
                call_id,
                exit_code,
                is_error,
                ..
            } => {
                // A call has one result: its command is kept no longer.
                let Some((test, command)) = call_id.as_deref().and_then(|id| self.calls.remove(id))
                else {
                    return;
                };
                let failed = *is_error || exit_code.is_some_and(|c| c != 0);
                let ended = match exit_code {
                    Some(0) => "passed (exit 0)".to_string(),
                    Some(c) => format!("failed (exit {c})"),
                    None if failed => "failed".to_string(),
                    None => "ended".to_string(),
                };
                if failed {
                    self.failures.push(format!("{command} {ended}"));
                }
                if test {
                    self.tests.push(TestRun {
                        command,
                        result: ended,
                    });
                }
            }
            EventBody::Error {
                message,
                source,
                fatal,
            } => {
                // A later `paddock publish` that failed is the publish's,
                // not the job's: `paddock show` names it, no closeout does.
                if source.as_deref() == Some(super::republish::PUBLISH_AGAIN) {
                    return;
                }
                if !fatal && source.as_deref() == Some(PADDOCK) {
                    self.warnings.push(warning_code(message));
                } else {
                    self.failures.push(code(message));
                }
            }
            EventBody::Policy { rule, message } => {
                self.denials
                    .push(format!("{}: {}", code(rule), code(message)));
            }
            EventBody::Network(r) if !r.allowed => self.refusal(r),
            _ => {}
        }
    }

    /// Keeps the command of call `id` until its result comes: when
    /// [`CALLS_KEPT`] calls await theirs, the oldest is forgotten (a job's
    /// calls that never end cannot hide the ones after them).
    fn call(&mut self, id: &str, command: (bool, String)) {
        if !self.calls.contains_key(id) {
            while self.calls.len() >= CALLS_KEPT {
                let Some(oldest) = self.call_order.pop_front() else {
                    break;
                };
                self.calls.remove(&oldest);
            }
            self.call_order.push_back(id.to_owned());
        }
        self.calls.insert(id.to_owned(), command);
        // The ids of calls answered since, dropped now and then.
        if self.call_order.len() > 2 * CALLS_KEPT {
            let calls = &self.calls;
            self.call_order.retain(|id| calls.contains_key(id));
        }
    }

    /// Counts a refusal of the job's egress proxy: with its destination,
    /// or (naming none) with its phase and rule.
    fn refusal(&mut self, r: &paddock_protocol::EgressRecord) {
        let rule = r.rule.clone().unwrap_or_default();
        if r.host.is_empty() {
            // The direct attempts the sandbox's watcher counted without
            // recording each: the count first in its reason.
            let n = if rule == "direct:unrecorded" {
                r.reason
                    .as_deref()
                    .and_then(|t| t.split(' ').next())
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0)
            } else {
                1
            };
            let key = (r.phase.as_str(), rule);
            let room = self.without.len() < DESTINATIONS_KEPT;
            match self.without.iter_mut().find(|(k, _)| *k == key) {
                Some((_, sum)) => *sum = sum.saturating_add(n),
                None if room => self.without.push((key, n)),
                None => self.unlisted = self.unlisted.saturating_add(n),
            }
            return;
        }
        let key = (r.host.clone(), r.port, r.phase.as_str(), rule);
        match self.refused_at.get(&key) {
            Some(&at) => {
                if let Some((_, n)) = self.refused.get_mut(at) {
                    *n = n.saturating_add(1);
                }
            }
            None if self.refused.len() < DESTINATIONS_KEPT && r.host.len() <= HOST_MAX => {
                self.refused_at.insert(key.clone(), self.refused.len());
                self.refused.push((key, 1));
            }
            None => self.unlisted = self.unlisted.saturating_add(1),
        }
    }

    /// The destinations the job's egress proxy refused, each once (in the
    /// order first refused) with its phase, rule and how many attempts:
    /// what the job could not reach, and what to ask for
    /// (docs/egress.md). What names no destination (malformed requests,
    /// what the sandbox's watcher did not record one by one) comes first,
    /// in words: the list is cut. With `unreached`, instead, the
    /// destinations that were allowed but not reached
    /// (`UNREACHED_RULES`: no spec field asks for them).
    fn refused_destinations(&self, unreached: bool) -> Vec<String> {
        let mut out = if unreached {
            Vec::new()
        } else {
            self.without_destination()
        };
        let (refused, not_reached) =
            crate::egress::refusal::split_unreached(&self.refused, |((_, _, _, rule), _)| {
                Some(rule.as_str())
            });
        let listed = if unreached { not_reached } else { refused };
        out.extend(listed.into_iter().map(|((host, port, phase, rule), n)| {
            let times = if *n == 1 {
                String::new()
            } else {
                format!(", {n} attempts")
            };
            // A name looked up past the proxy is the name (its
            // port is the resolver's); an IPv6 literal in
            // brackets, as in a URL.
            let at = if rule == "direct:dns" {
                host.clone()
            } else if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            };
            format!("{} ({phase} phase, {}){times}", code(&at), inert(rule))
        }));
        if self.unlisted > 0 && !unreached {
            let n = self.unlisted;
            let s = if n == 1 { "" } else { "s" };
            out.push(format!(
                "{n} more refused attempt{s} to destinations not listed one by one (see the job's events)"
            ));
        }
        out
    }

    /// The refusals that name no destination, in words (each phase and
    /// rule once): requests the proxy could not read (`bad_request` with
    /// no host: `N malformed requests`), the direct attempts the sandbox's
    /// watcher counted without recording each (`direct:unrecorded`;
    /// docs/egress.md, "Direct connections"), and the rest (a refused
    /// hand-over, a watcher that could not start) counted.
    fn without_destination(&self) -> Vec<String> {
        self.without
            .iter()
            .map(|((phase, rule), n)| {
                let n = *n;
                let s = if n == 1 { "" } else { "s" };
                match rule.as_str() {
                    "bad_request" => format!(
                        "{n} malformed request{s} ({phase} phase, bad_request): not a request for a destination the proxy could read"
                    ),
                    "direct:unrecorded" => format!(
                        "{n} more direct connection attempt{s} ({phase} phase) to further destinations, not recorded one by one"
                    ),
                    rule => format!("{n} refusal{s} naming no destination ({phase} phase, {})", inert(rule)),
                }
            })
            .collect()
    }
}

/// What the job did with its prior attempt's engine session, if `event`
/// says: the detail of its `session_resumed` or `session_forked` status.
fn session(event: &AgentEvent) -> Option<String> {
    match &event.body {
        EventBody::Status {
            phase: Phase::SessionResumed,
            detail,
        } => Some(format!(
            "Engine session: {}.",
            inert(detail.as_deref().unwrap_or("resumed"))
        )),
        EventBody::Status {
            phase: Phase::SessionForked,
            detail,
        } => Some(format!(
            "Engine session forked: {}.",
            inert(detail.as_deref().unwrap_or("a new session"))
        )),
        _ => None,
    }
}

/// The first `max` of `kept`'s items, and one counting the rest (those
/// kept past `max` and those only counted).
fn capped_kept<T>(kept: &Kept<T>, max: usize, more_item: impl FnOnce(usize) -> T) -> Vec<T>
where
    T: Clone,
{
    let mut list: Vec<T> = kept.items.iter().take(max).cloned().collect();
    let more = kept
        .items
        .len()
        .saturating_sub(max)
        .saturating_add(kept.more);
    if more > 0 {
        list.push(more_item(more));
    }
    list
}

/// `$1.2345` from micro-dollars.
fn usd(micros: i64) -> String {
    format!("${:.4}", micros as f64 / 1_000_000.0)
}

fn duration(ms: Option<u64>) -> String {
    match ms {
        None => "duration unknown".into(),
        Some(ms) if ms < 60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        Some(ms) => format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

/// How every closeout starts (`closeout.md.j2`): how a forge's review
/// reader knows an earlier job's closeout whoever posted it.
pub const HEADING: &str = "## Paddock closeout: ";

/// The closeout of `record` (final), with its `events` and `input`.
pub fn render(
    record: &JobRecord,
    events: &[AgentEvent],
    input: &CloseoutInput<'_>,
) -> Result<String, CloseoutError> {
    render_facts(record, &EventFacts::of(events), input)
}

/// The closeout of `record` (final), with what its events tell (`found`)
/// and `input`.
pub fn render_facts(
    record: &JobRecord,
    found: &EventFacts,
    input: &CloseoutInput<'_>,
) -> Result<String, CloseoutError> {
    let text = render_capped(record, found, input, CAPS)?;
    if text.chars().count() <= FORGE_MAX {
        return Ok(text);
    }
    render_capped(record, found, input, SHORT_CAPS)
}

/// [`render_facts`] with each list cut to `caps`.
fn render_capped(
    record: &JobRecord,
    found: &EventFacts,
    input: &CloseoutInput<'_>,
    caps: Caps,
) -> Result<String, CloseoutError> {
    let more = |n: usize| format!("… and {n} more");
    // The publish's first: a cap never cuts where the branch is.
    let mut warnings: Vec<String> = input
        .publish_warnings
        .iter()
        .map(|w| warning_code(w))
        .chain(found.warnings.items.iter().cloned())
        .collect();
    let all_warnings = warnings.len().saturating_add(found.warnings.more);
    warnings.truncate(caps.list);
    if all_warnings > caps.list {
        warnings.push(more(all_warnings - caps.list));
    }
    let outside = super::scope::outside(input.touch_only, &record.changed_files);
    let facts = Facts {
        job_id: &record.id,
        ticket_id: &record.ticket_id,
        ticket_title: if input.ticket_title.trim().is_empty() {
            String::new()
        } else {
            code(input.ticket_title)
        },
        ticket_url: input.ticket_url.map(ticket_link),
        attempt: record.attempt,
        status: record.status.as_str(),
        reason: record.reason.as_deref().map(code),
        engine: &record.engine,
        model: code(&record.model),
        rung: code(&record.isolation),
        session: found.session.clone(),
        branch: code(&record.branch),
        base_ref: code(input.started_on.unwrap_or(&record.base_ref)),
        commit: input.commit.map(code),
        changed_files: {
            let mut listed: Vec<String> = record
                .changed_files
                .iter()
                .take(caps.changed)
                .map(|f| path_code(f))
                .collect();
            let more = record.changed_files.len().saturating_sub(caps.changed);
            if more > 0 {
                listed.push(format!(
                    "… and {more} more (`paddock diff {}` has them all)",
                    record.id
                ));
            }
            listed
        },
        changed_count: record.changed_files.len(),
        left_out: capped(
            input.left_out.iter().map(|f| path_code(f)).collect(),
            caps.list,
        ),
        source_dirty: input.source_dirty,
        touch_only: input.touch_only.iter().map(|p| code(p)).collect(),
        outside_count: outside.len(),
        outside_scope: capped(outside.iter().map(|f| path_code(f)).collect(), caps.list),
        tests: capped_kept(&found.tests, caps.list, |n| TestRun {
            command: more(n),
            result: "see the job's events".into(),
        }),
        failures: capped_kept(&found.failures, caps.list, more),
        warnings,
        denials: capped_kept(&found.denials, caps.list, more),
        network_refused: capped(found.refused_destinations(false), caps.list),
        network_unreached: capped(found.refused_destinations(true), caps.list),
        model_calls: record.model_calls,
        tokens: Tokens {
            input: record.tokens.input_tokens,
            cached: record.tokens.cached_input_tokens,
            output: record.tokens.output_tokens,
            reasoning: record.tokens.reasoning_tokens,
        },
        cost: usd(record.cost_micros),
        duration: duration(record.duration_ms),
        links: input
            .links
            .iter()
            .map(|(label, url)| Link {
                label: label.clone(),
                url: url.clone(),
            })
            .collect(),
        shortened: caps.list < CAPS.list,
    };
    let err = |e: minijinja::Error| CloseoutError {
        job_id: record.id.clone(),
        message: e.to_string(),
    };
    let mut env = Environment::new();
    env.set_keep_trailing_newline(true);
    env.set_trim_blocks(false);
    env.add_template("closeout", TEMPLATE).map_err(err)?;
    env.get_template("closeout")
        .and_then(|t| t.render(&facts))
        .map_err(err)
}

/// The job a closeout is of: the id on its `Job `…`` line, when `body`
/// is a closeout (it starts with the template's heading). How a forge
/// finds the closeout a job already posted, to edit it rather than post
/// another; a comment quoting one starts otherwise. The id is read from
/// the template's own line (it starts `Job ` or, with a ticket link,
/// `Ticket: `: `Ticket: [` in a closeout posted before the link was an
/// autolink), never from the job's text (its reason, above, is a code
/// span that may hold "Job `job-…`": no line starts with the job's text).
pub fn job_of(body: &str) -> Option<&str> {
    if !body.starts_with(HEADING) {
        return None;
    }
    let line = body
        .lines()
        .find(|l| l.starts_with("Job `") || l.starts_with("Ticket: "))?;
    let start = line.find("Job `job-")? + "Job `".len();
    let rest = line.get(start..)?;
    let id = &rest[..rest.find('`')?];
    let hex = id.strip_prefix("job-")?;
    (!hex.is_empty() && hex.bytes().all(|b| b.is_ascii_alphanumeric())).then_some(id)
}

/// The pull request's body: the ticket's title and link, the closeout.
pub fn pull_request_body(closeout: &str, ticket_url: Option<&str>) -> String {
    let link = ticket_url
        .map(|u| format!("Ticket: {}\n\n", ticket_link(u)))
        .unwrap_or_default();
    format!("{link}Opened by Paddock; never merged by it.\n\n{closeout}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refused CONNECT to `host` in the agent phase, no reason given.
    fn refusal(host: String) -> paddock_protocol::EgressRecord {
        paddock_protocol::EgressRecord {
            method: Some(paddock_protocol::EgressMethod::Connect),
            reason: None,
            ..crate::store::fixtures::egress_attempt(&host)
        }
    }
    use paddock_protocol::{JobStatus, Phase, TokenUsage};
    use time::macros::datetime;

    /// A closeout names its job; a quote of one, another comment or a
    /// line that is not a job's id names none.
    #[test]
    fn the_job_a_closeout_is_of() {
        let cases = [
            "## Paddock closeout: T-1 attempt 1 · Fix\n\n**done**\n\nJob `job-01ab` · codex `m` on the `process` rung\n",
            "## Paddock closeout: T-1 attempt 1 · Fix\n\nTicket: [T-1](https://t/1) · Job `job-cd2` · codex\n",
            "## Paddock closeout: T-1 attempt 1 · Fix\n\nTicket: <https://t/1> · Job `job-ef3` · codex\n",
            "> ## Paddock closeout: T-1 attempt 1 · Fix\n>\n> Job `job-01ab` · codex\n",
            "Looks good. Job `job-01ab` · codex\n",
            "## Paddock closeout: T-1 attempt 1\n\nJob `job-` · codex\n",
            "## Paddock closeout: T-1 attempt 1\n\nJob `job-a b` · codex\n",
            "## Paddock closeout: T-1 attempt 1\n\nJob `job-01ab",
        ];
        assert_eq!(
            cases.map(job_of),
            [
                Some("job-01ab"),
                Some("job-cd2"),
                Some("job-ef3"),
                None,
                None,
                None,
                None,
                None
            ]
        );
    }

    fn event(seq: u64, body: EventBody) -> AgentEvent {
        AgentEvent {
            job_id: "job-1".into(),
            seq,
            at: datetime!(2026-01-01 00:00 UTC),
            body,
        }
    }

    fn call(seq: u64, id: &str, command: &str) -> AgentEvent {
        event(
            seq,
            EventBody::ToolCall {
                call_id: Some(id.into()),
                tool: "shell".into(),
                command: Some(command.into()),
                input: serde_json::Value::Null,
            },
        )
    }

    fn result(seq: u64, id: &str, exit: i64) -> AgentEvent {
        event(
            seq,
            EventBody::ToolResult {
                call_id: Some(id.into()),
                exit_code: Some(exit),
                is_error: exit != 0,
                output: String::new(),
            },
        )
    }

    fn record(status: JobStatus, changed: &[&str]) -> JobRecord {
        JobRecord {
            id: "job-1".into(),
            ticket_id: "T-7".into(),
            project: "widgets".into(),
            attempt: 2,
            engine: "codex".into(),
            model: "gpt-5.5".into(),
            isolation: "sandbox".into(),
            status,
            reason: None,
            branch: "paddock/T-7/2".into(),
            base_ref: "main".into(),
            patch_path: Some("/data/artifacts/job-1/patch.diff".into()),
            changed_files: changed.iter().map(|f| f.to_string()).collect(),
            tokens: TokenUsage {
                input_tokens: 12000,
                cached_input_tokens: 8000,
                cache_write_tokens: 0,
                output_tokens: 900,
                reasoning_tokens: 300,
            },
            model_calls: 4,
            cost_micros: 41_250,
            engine_exit_code: Some(0),
            created_at: datetime!(2026-01-01 00:00 UTC),
            finished_at: Some(datetime!(2026-01-01 00:02 UTC)),
            duration_ms: Some(125_400),
            disposed_at: None,
        }
    }

    /// A job that changed files, ran tests (one failing run, one passing),
    /// had a command fail, a denial and an error: every section filled.
    #[test]
    fn a_full_closeout() {
        let events = vec![
            event(
                1,
                EventBody::Status {
                    phase: Phase::Provisioning,
                    detail: None,
                },
            ),
            call(2, "c1", "bash -lc 'cargo test -p widgets'"),
            result(3, "c1", 101),
            call(4, "c2", "rm -rf target"),
            event(
                5,
                EventBody::Policy {
                    rule: "deny_commands".into(),
                    message: "`rm -rf target` is denied by host profile constrained-local".into(),
                },
            ),
            result(6, "c2", 1),
            call(7, "c3", "bash -lc 'cargo test -p widgets'"),
            result(8, "c3", 0),
            event(
                9,
                EventBody::Error {
                    message: "upstream answered 529 overloaded; retried (cc @acme/owners)".into(),
                    source: Some("broker".into()),
                    fatal: false,
                },
            ),
            // Paddock's own non-fatal message is a warning, not a failure.
            event(
                10,
                EventBody::Error {
                    message: "the spec sets no [budget]: this job's model spend is not capped"
                        .into(),
                    source: Some("paddock".into()),
                    fatal: false,
                },
            ),
        ];
        let text = render(
            &record(JobStatus::Done, &["src/lib.rs", "docs/café.md"]),
            &events,
            &CloseoutInput {
                ticket_title: "Fix the widget",
                ticket_url: Some("https://tracker.example/T-7"),
                commit: Some("0123456789abcdef0123456789abcdef01234567"),
                left_out: &["src/__pycache__/".to_string()],
                source_dirty: 1,
                touch_only: &[],
                links: vec![(
                    "pull request".into(),
                    "https://github.com/acme/widgets/pull/3".into(),
                )],
                publish_warnings: &[],
                started_on: None,
            },
        )
        .unwrap();
        insta::assert_snapshot!(text);
    }

    /// A patch that changes files outside the ticket's `touch_only`: they
    /// are flagged, the covered ones not.
    #[test]
    fn a_closeout_flags_the_files_outside_touch_only() {
        let touch_only = ["src/parser/**".to_string(), "*.md".to_string()];
        let text = render(
            &record(
                JobStatus::Done,
                &[
                    "src/parser/lex.rs",
                    "src/main.rs",
                    "README.md",
                    "build/out.txt",
                ],
            ),
            &[],
            &CloseoutInput {
                touch_only: &touch_only,
                ..CloseoutInput::default()
            },
        )
        .unwrap();
        insta::assert_snapshot!(text);
    }

    /// The files a job made are named as they are, as `paddock run`'s
    /// summary names them: a tab, a newline, a bidirectional override or
    /// a no-break space as its escape, runs of spaces and a name's edge
    /// spaces kept, in the changed files, the ones outside `touch_only`
    /// and the build output left out. Before, `docs/a<TAB>b.md` was
    /// listed as `docs/a b.md`, a file the job never made, and a name
    /// holding U+202E was shown reversed on the forge.
    #[test]
    fn a_closeout_names_the_jobs_files_as_they_are() {
        let names = [
            "docs/a\tb.md",
            "docs/new\nline.md",
            "x\u{202e}gnp.exe",
            "two  spaces\u{a0}.md",
            " edge ",
            "   ",
            "docs/café.md",
        ];
        let touch_only = ["docs/**".to_string()];
        let left_out = ["__pycache__\t/".to_string()];
        let text = render(
            &record(JobStatus::Done, &names),
            &[],
            &CloseoutInput {
                touch_only: &touch_only,
                left_out: &left_out,
                ..CloseoutInput::default()
            },
        )
        .unwrap();
        let listed: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("- `") || l.starts_with("Left out"))
            .collect();
        assert_eq!(
            listed,
            vec![
                "- `docs/a\\u{9}b.md`",
                "- `docs/new\\u{a}line.md`",
                "- `x\\u{202e}gnp.exe`",
                "- `two  spaces\\u{a0}.md`",
                "- `  edge  `",
                "- `   `",
                "- `docs/café.md`",
                "- `x\\u{202e}gnp.exe`",
                "- `two  spaces\\u{a0}.md`",
                "- `  edge  `",
                "- `   `",
                "Left out as build output: `__pycache__\\u{9}/`.",
            ]
        );
    }

    /// The `touch_only` warning (its event's text, and its line in the
    /// closeout's warnings) names the files as the lists do: a tab, a
    /// newline, a bidirectional override as its escape, runs of spaces
    /// kept; the warning's own line breaks (a git error's) one space each.
    /// Before, both made one line of the text by its words: `docs/a b.md`
    /// for `docs/a<TAB>b.md`, `two spaces.md` for `two  spaces.md`.
    #[test]
    fn a_warning_names_the_jobs_files_as_they_are() {
        let touch_only = ["README.md".to_string()];
        let changed = [
            "README.md".to_string(),
            "docs/a\tb.md".to_string(),
            "two  spaces.md".to_string(),
            "x\u{202e}gnp.exe".to_string(),
        ];
        let touch = crate::results::scope::warning(&touch_only, &changed).unwrap();
        let warnings = [
            touch.clone(),
            "the branch was not kept:\n  git said  no".into(),
        ];
        let text = render(
            &record(JobStatus::Done, &[]),
            &[],
            &CloseoutInput {
                publish_warnings: &warnings,
                ..CloseoutInput::default()
            },
        )
        .unwrap();
        let section: Vec<&str> = text
            .lines()
            .skip_while(|l| *l != "### Paddock's warnings")
            .skip(1)
            .take_while(|l| l.starts_with("- "))
            .collect();
        assert_eq!(
            (touch.as_str(), section),
            (
                "the patch changes 3 file(s) outside the ticket's touch_only (README.md): \
                 docs/a\\u{9}b.md, two  spaces.md, x\\u{202e}gnp.exe",
                vec![
                    "- `the patch changes 3 file(s) outside the ticket's touch_only (README.md): \
                     docs/a\\u{9}b.md, two  spaces.md, x\\u{202e}gnp.exe`",
                    "- `the branch was not kept:   git said  no`",
                ]
            )
        );
    }

    /// A publish's warnings (the branch not fetched into the source) are
    /// in its closeout, first; the warnings an earlier publish stored as
    /// events (after the job's `publishing` status) are not: a later
    /// `paddock publish` that fetched the branch must not say it was not.
    #[test]
    fn a_closeout_has_its_publishs_warnings_and_no_earlier_publishs() {
        let warning = |seq, message: &str| {
            event(
                seq,
                EventBody::Error {
                    message: message.into(),
                    source: Some("paddock".into()),
                    fatal: false,
                },
            )
        };
        let events = vec![
            warning(1, "the spec sets no [budget]"),
            event(
                2,
                EventBody::Status {
                    phase: Phase::Publishing,
                    detail: Some("done".into()),
                },
            ),
            warning(
                3,
                "the branch paddock/T-7/2 was not fetched into the source",
            ),
            warning(4, "the source repository has 1 uncommitted change(s)"),
        ];
        let done = record(JobStatus::Done, &["src/lib.rs"]);
        let section = |publish_warnings: &[String]| {
            let text = render(
                &done,
                &events,
                &CloseoutInput {
                    publish_warnings,
                    ..CloseoutInput::default()
                },
            )
            .unwrap();
            let at = text.find("### Paddock's warnings").unwrap();
            let end = text[at..].find("\n\n").unwrap();
            text[at..at + end].to_string()
        };
        assert_eq!(
            section(&[
                "the branch paddock/T-7/2 was not fetched into the source: `git` said no".into()
            ]),
            "### Paddock's warnings\n\
             - ``the branch paddock/T-7/2 was not fetched into the source: `git` said no``\n\
             - `the spec sets no [budget]`"
        );
        assert_eq!(
            section(&[]),
            "### Paddock's warnings\n- `the spec sets no [budget]`"
        );
    }

    /// Paddock's own warnings are quoted up to [`WARNING_MAX`] characters,
    /// not [`ITEM_MAX`]: the branch not fetched ends with the command that
    /// takes it, which the closeout cut off at 200. Longer ones are cut
    /// there, marked `…`; the job's own failures are still cut at 200.
    #[test]
    fn paddocks_warnings_are_quoted_to_their_end() {
        let fetch = format!(
            "the branch paddock/T-7/2 was not fetched into the source (it is kept in \
             /home/user/.local/share/paddock/artifacts/job-1/branch.bundle): {}; to take \
             this job's under another name: `git -C /home/user/src/widgets fetch \
             /home/user/.local/share/paddock/artifacts/job-1/branch.bundle paddock/T-7/2:NAME`",
            "x".repeat(300)
        );
        let long = "y".repeat(WARNING_MAX + 50);
        let events = vec![
            event(
                1,
                EventBody::Error {
                    message: long.clone(),
                    source: Some(PADDOCK.into()),
                    fatal: false,
                },
            ),
            event(
                2,
                EventBody::Error {
                    message: long.clone(),
                    source: Some("engine".into()),
                    fatal: true,
                },
            ),
        ];
        let text = render(
            &record(JobStatus::Failed, &[]),
            &events,
            &CloseoutInput {
                publish_warnings: std::slice::from_ref(&fetch),
                started_on: None,
                ..CloseoutInput::default()
            },
        )
        .unwrap();
        let listed = |heading: &str| {
            let at = text.find(heading).unwrap();
            let end = text[at..].find("\n\n").unwrap_or(text.len() - at);
            text[at..at + end]
                .lines()
                .skip(1)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            (listed("### Paddock's warnings"), listed("### What failed")),
            (
                vec![
                    format!("- `` {fetch} ``"),
                    format!("- `{}…`", &long[..WARNING_MAX]),
                ],
                vec![format!("- `{}…`", &long[..ITEM_MAX])],
            )
        );
    }

    /// A job that changed nothing and failed.
    #[test]
    fn a_closeout_without_a_change() {
        let mut failed = record(JobStatus::Failed, &[]);
        failed.reason = Some("the engine exited with status 1".into());
        let text = render(&failed, &[], &CloseoutInput::default()).unwrap();
        assert_eq!(text.split_at(HEADING.len()).0, HEADING);
        insta::assert_snapshot!(text);
    }

    /// A job that resumed its prior attempt's session, and one that forked
    /// a new session: the closeout says which, and why.
    #[test]
    fn a_closeout_says_whether_the_session_was_resumed_or_forked() {
        let status = |phase, detail: &str| {
            vec![event(
                1,
                EventBody::Status {
                    phase,
                    detail: Some(detail.into()),
                },
            )]
        };
        let done = record(JobStatus::Done, &[]);
        let resumed = render(
            &done,
            &status(
                Phase::SessionResumed,
                "resumed session 0199-abc of attempt 1 (job job-0)",
            ),
            &CloseoutInput::default(),
        )
        .unwrap();
        let forked = render(
            &done,
            &status(
                Phase::SessionForked,
                "a new session, not attempt 1's (job job-0): the model changed (gpt-5.4 → gpt-5.5)",
            ),
            &CloseoutInput::default(),
        )
        .unwrap();
        insta::assert_snapshot!(format!("{resumed}\n----\n{forked}"));
    }

    /// A hostile job's history, taken in one event at a time as a store's
    /// pages give it: 20,000 failing test commands, as many calls never
    /// answered, refused destinations, warnings and denials. What the
    /// closeout keeps of it stays bounded (each list's first items, the
    /// rest counted; the calls awaiting a result and the destinations
    /// counted one by one capped), and the closeout says how many more
    /// there were. Before, every event was held, and every command.
    #[test]
    fn a_huge_history_is_kept_bounded_and_the_rest_counted() {
        let n = 20_000;
        let mut facts = EventFacts::default();
        let mut seq = 0;
        let mut add = |facts: &mut EventFacts, body| {
            seq += 1;
            facts.add(&event(seq, body));
        };
        for i in 0..n {
            add(
                &mut facts,
                EventBody::ToolCall {
                    call_id: Some(format!("c{i}")),
                    tool: "shell".into(),
                    command: Some(format!("cargo test t{i}")),
                    input: serde_json::Value::Null,
                },
            );
            add(
                &mut facts,
                EventBody::ToolResult {
                    call_id: Some(format!("c{i}")),
                    exit_code: Some(1),
                    is_error: false,
                    output: String::new(),
                },
            );
            add(
                &mut facts,
                EventBody::ToolCall {
                    call_id: Some(format!("never-{i}")),
                    tool: "shell".into(),
                    command: Some("x".repeat(1000)),
                    input: serde_json::Value::Null,
                },
            );
            add(
                &mut facts,
                EventBody::Network(refusal(format!("h{i}.example"))),
            );
            add(
                &mut facts,
                EventBody::Error {
                    message: format!("warning {i}"),
                    source: Some(PADDOCK.into()),
                    fatal: false,
                },
            );
            add(
                &mut facts,
                EventBody::Policy {
                    rule: "r".into(),
                    message: format!("denied {i}"),
                },
            );
        }
        let kept = (
            facts.calls.len(),
            facts.refused.len(),
            facts.refused_at.len(),
            [&facts.failures, &facts.warnings, &facts.denials].map(|k| (k.items.len(), k.more)),
            (facts.tests.items.len(), facts.tests.more),
            facts.unlisted,
        );
        assert_eq!(
            kept,
            (
                CALLS_KEPT,
                DESTINATIONS_KEPT,
                DESTINATIONS_KEPT,
                [(KEPT, n - KEPT); 3],
                (KEPT, n - KEPT),
                (n - DESTINATIONS_KEPT) as u64,
            )
        );
        let text = render_facts(
            &record(JobStatus::Failed, &[]),
            &facts,
            &CloseoutInput::default(),
        )
        .unwrap();
        // Each list its first items and a line counting the rest (the
        // destinations: those counted one by one, and one line for the
        // attempts past them).
        let counted: Vec<&str> = text.lines().filter(|l| l.contains("more")).collect();
        let more = n - CAPS.list;
        assert_eq!(
            counted,
            [
                format!("- … and {more} more: see the job's events"),
                format!("- … and {more} more"),
                format!("- … and {more} more"),
                format!("- … and {more} more"),
                format!("- … and {} more", DESTINATIONS_KEPT + 1 - CAPS.list),
            ]
        );
    }

    /// A job whose egress proxy refused destinations: each listed once,
    /// with its phase, its rule and how many attempts; allowed ones not,
    /// and allowed ones it could not reach (`connect`, `resolve`) in a
    /// list of their own, not as refused ones to ask for.
    #[test]
    fn a_closeout_lists_the_refused_destinations() {
        let attempt =
            |host: &str, port, phase, rule: Option<&str>| paddock_protocol::EgressRecord {
                host: host.into(),
                port,
                method: Some(paddock_protocol::EgressMethod::Connect),
                address: None,
                bytes_up: 0,
                bytes_down: 0,
                duration_ms: 1,
                phase,
                allowed: rule.is_none(),
                rule: rule.map(str::to_string),
                reason: None,
                credential: None,
                substituted: None,
            };
        use paddock_protocol::EgressPhase::{Agent, Setup};
        let events: Vec<AgentEvent> = [
            attempt("registry.npmjs.org", 443, Setup, None),
            attempt("evil.example", 443, Agent, Some("allowlist")),
            attempt("metadata.internal", 80, Setup, Some("deny_list:link_local")),
            // Allowed but not reached: listed apart, not as refused.
            attempt("registry.example", 443, Setup, Some("connect")),
            attempt("nosuch.invalid", 443, Agent, Some("resolve")),
            attempt("registry.example", 443, Setup, Some("connect")),
            attempt("evil.example", 443, Agent, Some("allowlist")),
            attempt("api.github.com", 443, Agent, None),
            attempt("`@x`", 443, Agent, Some("bad_request")),
            // Requests the proxy could not read: no destination, counted.
            attempt("", 0, Agent, Some("bad_request")),
            attempt("", 0, Agent, Some("bad_request")),
            attempt("", 0, Setup, Some("bad_request")),
            attempt("", 0, Agent, Some("handoff")),
            attempt("2001:db8::7", 443, Agent, Some("direct:tcp")),
            // A name looked up past the proxy: the name, no port.
            attempt("pypi.org", 53, Setup, Some("direct:dns")),
        ]
        .into_iter()
        .enumerate()
        .map(|(i, r)| event(i as u64 + 1, EventBody::Network(r)))
        .collect();
        let text = render(
            &record(JobStatus::Done, &[]),
            &events,
            &CloseoutInput::default(),
        )
        .unwrap();
        insta::assert_snapshot!(text);
    }

    /// Text the job wrote becomes one code span that nothing in it can
    /// close: a fence longer than its longest run of backticks, padded
    /// when it starts or ends with one; line breaks are spaces.
    #[test]
    fn the_jobs_text_is_a_code_span_it_cannot_close() {
        let got = [
            "cargo test",
            "a `b` c",
            "``` fence\n### Policy denials\nNone.",
            "`x`",
            "",
            "x\u{2028}y\r\nz",
        ]
        .map(code);
        assert_eq!(
            got,
            [
                "`cargo test`",
                "``a `b` c``",
                "```` ``` fence ### Policy denials None. ````",
                "`` `x` ``",
                "` `",
                "`x y z`",
            ]
        );
    }

    /// A hostile job's text in every place a job's text reaches the
    /// closeout: its reason (naming another job, too), a failing command
    /// breaking out of its code span, the engine's error and a policy
    /// message with mentions, closing keywords, images, links, HTML and a
    /// forged section, changed and left-out file names with backticks and
    /// line breaks, a refused host. Each is one code span on its line;
    /// the closeout is still its job's.
    #[test]
    fn a_hostile_jobs_text_stays_inert_in_the_closeout() {
        const EVIL: &str = "` @acme/owners fixes #1 ![](https://evil.example/?leak) \
            <img src=https://evil.example/i> [x](https://evil.example) <!-- <details> \
            Job `job-other`\n\n### Policy denials\nNone.\n```";
        let mut failed = record(JobStatus::Failed, &[EVIL, "src/ok.rs"]);
        failed.reason = Some(format!("the engine exited with status 1: {EVIL}"));
        let events = vec![
            call(1, "c1", &format!("bash -lc 'cargo test {EVIL}'")),
            result(2, "c1", 1),
            event(
                3,
                EventBody::Error {
                    message: EVIL.into(),
                    source: Some("codex".into()),
                    fatal: true,
                },
            ),
            event(
                4,
                EventBody::Policy {
                    rule: "deny_commands".into(),
                    message: format!("`{EVIL}` is denied by host profile p"),
                },
            ),
        ];
        let left_out = [format!("{EVIL}/__pycache__/")];
        let text = render(
            &failed,
            &events,
            &CloseoutInput {
                left_out: &left_out,
                ticket_url: Some("https://tracker.example/T-7"),
                ..CloseoutInput::default()
            },
        )
        .unwrap();
        assert_eq!(job_of(&text), Some("job-1"));
        insta::assert_snapshot!(text);
    }

    /// A job that changed 100,000 files with long names still has a
    /// closeout a forge takes (GitHub refuses a body or comment over
    /// 65,536 characters, and the publish failed): the count is whole,
    /// the first 100 are listed, the rest counted.
    #[test]
    fn a_closeout_of_a_huge_change_fits_a_forge() {
        let names: Vec<String> = (0..100_000)
            .map(|i| format!("{}/{i}.txt", "d".repeat(300)))
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let text = render(
            &record(JobStatus::Done, &names),
            &[],
            &CloseoutInput::default(),
        )
        .unwrap();
        let body = pull_request_body(&text, Some("https://tracker.example/T-7"));
        let listed = text.lines().filter(|l| l.starts_with("- `")).count();
        assert_eq!(
            (
                body.chars().count() < 65_536,
                listed,
                text.lines()
                    .find(|l| l.contains("file(s) changed"))
                    .map(|l| l.split(" on ").next().unwrap_or("").to_owned()),
                text.lines().find(|l| l.starts_with("- … and")),
            ),
            (
                true,
                100,
                Some("100000 file(s) changed".to_owned()),
                Some("- … and 99900 more (`paddock diff job-1` has them all)"),
            )
        );
    }

    /// A hostile job fills every list the closeout quotes with the
    /// longest texts it can (backticks, whose code spans need the longest
    /// fences): 100,000 changed files outside `touch_only`, 5,000 build
    /// output directories, test runs, failures, warnings, denials and
    /// refused destinations. Its pull request's body still fits GitHub's
    /// 65,536 characters (past them the forge refuses the pull request and
    /// the publish fails): the lists are cut shorter and say so, the
    /// counts stay whole. (Before: test runs and build output were not
    /// cut at all, and the other lists' 20 and 100 items of 600
    /// characters each came to over 100,000.)
    #[test]
    fn a_hostile_jobs_closeout_still_fits_a_forge() {
        let ticks = |i: usize| format!("{}{i}", "`".repeat(200));
        let names: Vec<String> = (0..100_000).map(ticks).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut failed = record(JobStatus::Failed, &names);
        failed.reason = Some(ticks(0));
        let mut events = Vec::new();
        for i in 0..5_000u64 {
            let n = i as usize;
            let id = format!("c{i}");
            events.push(call(6 * i, &id, &format!("pytest {}", ticks(n))));
            events.push(result(6 * i + 1, &id, 1));
            events.push(event(
                6 * i + 2,
                EventBody::Error {
                    message: format!("{}{n}", "`".repeat(WARNING_MAX)),
                    source: Some(PADDOCK.into()),
                    fatal: false,
                },
            ));
            events.push(event(
                6 * i + 3,
                EventBody::Policy {
                    rule: ticks(n),
                    message: ticks(n),
                },
            ));
            events.push(event(6 * i + 4, EventBody::Network(refusal(ticks(n)))));
        }
        let left_out: Vec<String> = (0..5_000)
            .map(|i| format!("{}/__pycache__/", ticks(i)))
            .collect();
        let touch_only = ["docs/**".to_string()];
        let text = render(
            &failed,
            &events,
            &CloseoutInput {
                left_out: &left_out,
                touch_only: &touch_only,
                ..CloseoutInput::default()
            },
        )
        .unwrap();
        let body = pull_request_body(&text, Some("https://tracker.example/T-7"));
        let said = |prefix: &str| {
            text.lines()
                .find(|l| l.starts_with(prefix))
                .map(str::to_owned)
        };
        assert_eq!(
            (
                body.chars().count() < 65_536,
                said("100000 file(s) changed"),
                said("**Outside the ticket's scope**"),
                said("- … and"),
                said("Lists are cut"),
            ),
            (
                true,
                Some("100000 file(s) changed on `paddock/T-7/2`:".to_owned()),
                Some(
                    "**Outside the ticket's scope**: 100000 changed file(s) match none of \
                     `touch_only` (`docs/**`):"
                        .to_owned()
                ),
                Some("- … and 99980 more (`paddock diff job-1` has them all)".to_owned()),
                Some(
                    "Lists are cut to fit a forge's 65,536 characters: `paddock events job-1` \
                     and `paddock diff job-1` have them all."
                        .to_owned()
                ),
            )
        );
    }

    /// An issue tracker's title is anyone's text: in the heading it is one
    /// code span (no mention, closing keyword, link or line of its own),
    /// and a ticket URL with a parenthesis cannot end its link early.
    #[test]
    fn a_hostile_ticket_title_and_url_stay_inert() {
        let record = record(JobStatus::Done, &[]);
        let text = render(
            &record,
            &[],
            &CloseoutInput {
                ticket_title:
                    "fixes #2 @acme/owners ![x](https://evil.example/?q)\nJob `job-2` · x",
                ticket_url: Some("https://tracker.example/T-7)[y](https://evil.example"),
                ..CloseoutInput::default()
            },
        )
        .unwrap();
        let lines: Vec<&str> = text.lines().take(5).collect();
        assert_eq!(
            lines,
            vec![
                "## Paddock closeout: T-7 attempt 2 · ``fixes #2 @acme/owners ![x](https://evil.example/?q) Job `job-2` · x``",
                "",
                "**done**",
                "",
                "Ticket: <https://tracker.example/T-7)[y](https://evil.example> · Job `job-1` · codex `gpt-5.5` on the `sandbox` rung",
            ]
        );
        assert_eq!(job_of(&text), Some("job-1"));
    }

    /// What the spec names reaches the forge as text that starts no line
    /// and closes no code span: a ticket URL holding line breaks (a GitLab
    /// quick action `/merge`, a mention, an HTML comment hiding the rest)
    /// is one code span in the pull request's body and the closeout, a
    /// `^{/…}` base revision or a model holding a backtick stays in its
    /// span. Before, the URL was written raw (`Ticket: URL`, and in the
    /// closeout's link) and the base and model inside one backtick each.
    #[test]
    fn the_specs_text_starts_no_line_and_closes_no_span() {
        let mut record = record(JobStatus::Done, &["src/lib.rs"]);
        record.base_ref = "main^{/fix `@acme/owners` x}".into();
        record.model = "gpt`\n/merge".into();
        let url = "https://t.example/1\n/merge\n@acme/owners <!--";
        let text = render(
            &record,
            &[],
            &CloseoutInput {
                ticket_url: Some(url),
                commit: Some("abc123"),
                ..CloseoutInput::default()
            },
        )
        .unwrap();
        let body = pull_request_body(&text, Some(url));
        assert_eq!(
            body.lines().take(13).collect::<Vec<_>>(),
            vec![
                "Ticket: `https://t.example/1 /merge @acme/owners <!--`",
                "",
                "Opened by Paddock; never merged by it.",
                "",
                "## Paddock closeout: T-7 attempt 2",
                "",
                "**done**",
                "",
                "Ticket: `https://t.example/1 /merge @acme/owners <!--` · Job `job-1` · codex ``gpt` /merge`` on the `sandbox` rung",
                "",
                "### What was done",
                "1 file(s) changed on `paddock/T-7/2`, one commit `abc123` on ``main^{/fix `@acme/owners` x}``:",
                "- `src/lib.rs`",
            ]
        );
        assert_eq!(
            body.lines()
                .filter(|l| l.starts_with(['/', '@', '<']))
                .collect::<Vec<_>>(),
            Vec::<&str>::new()
        );
        assert_eq!(job_of(&text), Some("job-1"));
    }

    #[test]
    fn test_commands_are_recognised_through_shell_wrappers() {
        let got: Vec<bool> = [
            "bash -lc 'cargo test'",
            "cd crates && cargo test -p x",
            "pytest -q",
            "cargo build",
            "echo pytest",
        ]
        .iter()
        .map(|c| is_test(c))
        .collect();
        assert_eq!(got, vec![true, true, true, false, false]);
    }
}

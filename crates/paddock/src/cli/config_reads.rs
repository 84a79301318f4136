//! Which parts of the config file (`paddock::config::Section`) each
//! command reads, in one place: a command loads only these
//! (`run::user_config`), and refuses to start when one of them does not
//! read, while a mistake in another part is no concern of its own (a typo
//! in `[serve]` stopped `paddock gc` and `paddock run` too); `paddock
//! doctor` names, for each part that does not read, the commands it stops.

use paddock::config::Section;

/// `paddock run`: the spec's defaults and `prices`, the caches' cap, the
/// heartbeat's timing, the host's tools.
pub const RUN: &[Section] = &[Section::Top, Section::Caches, Section::Hosts, Section::Jobs];
/// `paddock context`: the spec's defaults, the host's tools.
pub const CONTEXT: &[Section] = &[Section::Top, Section::Jobs];
/// `paddock prices`: `prices`.
pub const PRICES: &[Section] = &[Section::Top];
/// `paddock gc`: the caches' cap and the heartbeat's timing.
pub const GC: &[Section] = &[Section::Caches, Section::Hosts];
/// `paddock cancel` (of a job of this host whose process died): the
/// heartbeat's timing.
pub const CANCEL: &[Section] = &[Section::Hosts];
/// `paddock serve`: every part.
pub const SERVE: &[Section] = &Section::ALL;

/// Each command that refuses to start on a part it reads, with its parts.
const COMMANDS: [(&str, &[Section]); 6] = [
    ("run", RUN),
    ("context", CONTEXT),
    ("prices", PRICES),
    ("gc", GC),
    ("cancel", CANCEL),
    ("serve", SERVE),
];

/// The commands a mistake in `section` stops: `paddock run, gc and serve`.
pub fn stopped_by(section: Section) -> String {
    let names: Vec<&str> = COMMANDS
        .iter()
        .filter(|(_, reads)| reads.contains(&section))
        .map(|(name, _)| *name)
        .collect();
    match names.split_last() {
        None => "no command".to_owned(),
        Some((last, [])) => format!("paddock {last}"),
        Some((last, rest)) => format!("paddock {} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each part names the commands reading it, in the table's order.
    #[test]
    fn each_part_names_the_commands_it_stops() {
        assert_eq!(
            Section::ALL.map(stopped_by),
            [
                "paddock run, context, prices and serve".to_owned(),
                "paddock serve".to_owned(),
                "paddock run, gc and serve".to_owned(),
                "paddock run, gc, cancel and serve".to_owned(),
                "paddock run, context and serve".to_owned(),
            ]
        );
    }
}

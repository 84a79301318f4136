//! Whether Paddock's output is colored: `--color always|never`, else
//! (`auto`) only when `NO_COLOR` is unset or empty (no-color.org) and the
//! stream is a terminal. `paint` styles a piece of text accordingly.

use std::io::IsTerminal as _;
use std::sync::atomic::{AtomicBool, Ordering};

use anstyle::Style;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum When {
    Auto,
    Always,
    Never,
}

static ENABLED: AtomicBool = AtomicBool::new(false);

/// The decision for `when`, given `NO_COLOR`'s value and whether stderr is
/// a terminal.
pub fn decide(when: When, no_color: Option<&std::ffi::OsStr>, terminal: bool) -> bool {
    match when {
        When::Always => true,
        When::Never => false,
        When::Auto => no_color.is_none_or(|v| v.is_empty()) && terminal,
    }
}

/// Decides once for this process (from the environment and stderr).
pub fn init(when: When) -> bool {
    let on = decide(
        when,
        std::env::var_os("NO_COLOR").as_deref(),
        std::io::stderr().is_terminal(),
    );
    ENABLED.store(on, Ordering::Relaxed);
    on
}

/// `text` in `style` if color is on.
pub fn paint(text: &str, style: Style) -> String {
    if ENABLED.load(Ordering::Relaxed) {
        format!("{style}{text}{style:#}")
    } else {
        text.to_owned()
    }
}

/// The style of an error's `error:` prefix.
pub const ERROR: Style = Style::new()
    .bold()
    .fg_color(Some(anstyle::Color::Ansi(anstyle::AnsiColor::Red)));

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn no_color_and_terminals_decide_auto_only() {
        let set = Some(OsStr::new("1"));
        let empty = Some(OsStr::new(""));
        assert_eq!(
            [
                decide(When::Auto, None, true),
                decide(When::Auto, empty, true),
                decide(When::Auto, set, true),
                decide(When::Auto, None, false),
                decide(When::Always, set, false),
                decide(When::Never, None, true),
            ],
            [true, true, false, false, true, false]
        );
    }
}

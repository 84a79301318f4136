//! Command matching for `denyCommands`: does a shell command line run one of
//! the denied command prefixes? The line is cut into simple commands at
//! unquoted `;`, `&&`, `||`, `|`, `&`, newlines, parentheses, backticks and
//! `$(`; command substitutions inside double quotes are examined too. Each
//! simple command is split into words by the `shlex` tokenizer (quotes and
//! backslashes resolved, so `car''go` is `cargo`), stripped of leading
//! `NAME=value` assignments, shell keywords (`if`, `then`, `do`, `!`, `{`...)
//! and wrappers (`env` with its options, `command`, `exec`, `nohup`, `time`,
//! `nice`, `sudo`, `timeout`), its program reduced to its base name, and
//! compared word by word with each rule. `bash -c`/`-lc`, `sh -c` and `eval`
//! with a literal script are matched recursively.
//!
//! What it cannot see (documented in docs/host-profile.md): commands built at
//! run time (`$CMD`, `c=cargo; $c build`, `eval "$x"`), aliases and shell
//! functions, scripts and Makefiles or package scripts that run a denied
//! command themselves, other interpreters (`python -c 'os.system(...)'`),
//! `xargs`/`find -exec`, and options written differently from the rule
//! (`cargo build -r` for `cargo build --release`, or reordered options).

/// One denied command prefix, as shell words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The rule as written in the profile.
    pub text: String,
    words: Vec<String>,
}

/// A command line that runs a denied command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The rule as written in the profile.
    pub rule: String,
    /// The simple command that matched, as words joined by spaces.
    pub matched: String,
}

/// The denied command prefixes of one profile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Matcher {
    rules: Vec<Rule>,
}

/// How deep `bash -c`, `eval` and substitutions are followed.
const MAX_DEPTH: usize = 8;

impl Matcher {
    pub fn new(deny_commands: &[String]) -> Matcher {
        let rules = deny_commands
            .iter()
            .map(|text| Rule {
                text: text.clone(),
                words: words_of(text),
            })
            .filter(|r| !r.words.is_empty())
            .collect();
        Matcher { rules }
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The first rule the command line breaks, if any.
    pub fn check(&self, command: &str) -> Option<Denial> {
        if self.rules.is_empty() {
            return None;
        }
        self.check_script(command, 0)
    }

    /// Like [`Matcher::check`] for a command given as argv (no shell).
    pub fn check_argv(&self, argv: &[String]) -> Option<Denial> {
        self.check_words(argv.to_vec(), 0)
    }

    fn check_script(&self, script: &str, depth: usize) -> Option<Denial> {
        if depth > MAX_DEPTH {
            return None;
        }
        let (segments, substitutions) = split_commands(script);
        for seg in segments {
            if let Some(d) = self.check_words(words_of(&seg), depth) {
                return Some(d);
            }
        }
        substitutions
            .iter()
            .find_map(|body| self.check_script(body, depth + 1))
    }

    fn check_words(&self, words: Vec<String>, depth: usize) -> Option<Denial> {
        let words = strip_prefixes(words);
        let first = words.first()?;
        // `bash -lc SCRIPT`, `sh -c SCRIPT`, `eval WORDS...`.
        if let Some(script) = inner_script(&words) {
            if let Some(d) = self.check_script(&script, depth + 1) {
                return Some(d);
            }
        }
        let program = base_name(first);
        self.rules.iter().find_map(|rule| {
            let matches = rule.words.len() <= words.len()
                && base_name(&rule.words[0]) == program
                && rule.words[1..].iter().zip(&words[1..]).all(|(r, w)| r == w);
            matches.then(|| Denial {
                rule: rule.text.clone(),
                matched: words.join(" "),
            })
        })
    }
}

/// Shell words of one simple command; an unbalanced quote falls back to
/// whitespace splitting (the engine's shell would refuse it anyway).
fn words_of(s: &str) -> Vec<String> {
    shlex::split(s).unwrap_or_else(|| s.split_whitespace().map(str::to_string).collect())
}

fn base_name(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// Drops what runs *before* the real program: assignments, keywords and
/// wrapper commands with their options.
fn strip_prefixes(mut words: Vec<String>) -> Vec<String> {
    loop {
        let Some(first) = words.first() else {
            return words;
        };
        let skip = match first.as_str() {
            w if is_assignment(w) => 1,
            "!" | "{" | "}" | "if" | "then" | "else" | "elif" | "do" | "while" | "until"
            | "command" | "exec" | "nohup" | "time" | "builtin" | "sudo" => {
                1 + count_options(&words[1..], &[], false)
            }
            "env" => {
                1 + count_options(&words[1..], &["-u", "--unset", "-C", "--chdir", "-S"], true)
            }
            "nice" => 1 + count_options(&words[1..], &["-n", "--adjustment"], false),
            "timeout" => {
                let opts = count_options(
                    &words[1..],
                    &["-s", "--signal", "-k", "--kill-after"],
                    false,
                );
                // The duration.
                1 + opts + usize::from(words.len() > 1 + opts)
            }
            _ => 0,
        };
        if skip == 0 {
            return words;
        }
        words.drain(..skip.min(words.len()));
    }
}

/// Leading options (and the values of `with_value` options) of a wrapper;
/// `env`'s assignments count as options.
fn count_options(words: &[String], with_value: &[&str], assignments: bool) -> usize {
    let mut n = 0;
    while let Some(w) = words.get(n) {
        if w == "--" {
            return n + 1;
        }
        if with_value.contains(&w.as_str()) {
            n += 2;
        } else if (w.starts_with('-') && w.len() > 1) || (assignments && is_assignment(w)) {
            n += 1;
        } else {
            return n;
        }
    }
    n.min(words.len())
}

/// The script a shell or `eval` runs, when it is given literally.
fn inner_script(words: &[String]) -> Option<String> {
    let program = base_name(&words[0]);
    if program == "eval" {
        return Some(words[1..].join(" "));
    }
    if !matches!(program, "bash" | "sh" | "dash" | "zsh" | "ksh" | "ash") {
        return None;
    }
    // The first non-option word after an option cluster containing `c`.
    let mut saw_c = false;
    for w in &words[1..] {
        if let Some(opts) = w.strip_prefix('-').filter(|o| !o.starts_with('-')) {
            saw_c |= opts.contains('c');
        } else if w.starts_with("--") {
            continue;
        } else {
            return saw_c.then(|| w.clone());
        }
    }
    None
}

/// Cuts a script into simple commands at unquoted control operators, and
/// collects the bodies of command substitutions found inside double quotes.
fn split_commands(script: &str) -> (Vec<String>, Vec<String>) {
    let chars: Vec<char> = script.chars().collect();
    let mut segments = Vec::new();
    let mut substitutions = Vec::new();
    let mut cur = String::new();
    let mut i = 0;
    let flush = |cur: &mut String, segments: &mut Vec<String>| {
        if !cur.trim().is_empty() {
            segments.push(std::mem::take(cur));
        } else {
            cur.clear();
        }
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                cur.push(c);
                if let Some(&n) = chars.get(i + 1) {
                    cur.push(n);
                }
                i += 2;
                continue;
            }
            '\'' => {
                // Single quotes: literal up to the closing quote.
                cur.push(c);
                i += 1;
                while i < chars.len() {
                    cur.push(chars[i]);
                    i += 1;
                    if chars[i - 1] == '\'' {
                        break;
                    }
                }
                continue;
            }
            '"' => {
                cur.push(c);
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    match chars[i] {
                        '\\' => {
                            cur.push('\\');
                            if let Some(&n) = chars.get(i + 1) {
                                cur.push(n);
                            }
                            i += 2;
                        }
                        '$' if chars.get(i + 1) == Some(&'(') => {
                            let (body, next) = until_close(&chars, i + 2);
                            substitutions.push(body);
                            cur.push('_');
                            i = next;
                        }
                        '`' => {
                            let end = chars[i + 1..]
                                .iter()
                                .position(|&x| x == '`')
                                .map_or(chars.len(), |p| i + 1 + p);
                            substitutions.push(chars[i + 1..end].iter().collect());
                            cur.push('_');
                            i = end + 1;
                        }
                        other => {
                            cur.push(other);
                            i += 1;
                        }
                    }
                }
                if i < chars.len() {
                    cur.push('"');
                }
                i += 1;
                continue;
            }
            '#' if cur.is_empty() || cur.ends_with(char::is_whitespace) => {
                // A comment, up to the end of the line.
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '&' if cur.ends_with(['>', '<']) || chars.get(i + 1) == Some(&'>') => {
                // Part of a redirection: `2>&1`, `&>file`.
                cur.push(c);
            }
            ';' | '\n' | '|' | '&' | '(' | ')' | '`' => flush(&mut cur, &mut segments),
            '$' if chars.get(i + 1) == Some(&'(') => flush(&mut cur, &mut segments),
            _ => cur.push(c),
        }
        i += 1;
    }
    flush(&mut cur, &mut segments);
    (segments, substitutions)
}

/// The text from `start` up to the parenthesis closing an opened one, and
/// the index after it.
fn until_close(chars: &[char], start: usize) -> (String, usize) {
    let mut depth = 1;
    let mut i = start;
    while i < chars.len() {
        match chars[i] {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return (chars[start..i].iter().collect(), i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    (chars[start..].iter().collect(), chars.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher() -> Matcher {
        Matcher::new(&[
            "cargo build --release".to_string(),
            "npm run build".to_string(),
            "rm -rf /".to_string(),
        ])
    }

    fn denied(cmd: &str) -> Option<String> {
        matcher().check(cmd).map(|d| d.rule)
    }

    #[test]
    fn sees_through_wrappers_chains_and_subshells() {
        let cargo = Some("cargo build --release".to_string());
        for cmd in [
            "cargo build --release",
            "cargo build --release --locked > log 2>&1",
            "/usr/bin/cargo build --release",
            "bash -lc 'cargo build --release'",
            "bash -lc \"cd x && cargo build --release\"",
            "sh -c 'bash -c \"cargo build --release\"'",
            "true && cargo build --release",
            "false || cargo build --release",
            "ls; cargo build --release",
            "echo hi | cargo build --release",
            "cargo fmt & cargo build --release",
            "env FOO=1 cargo build --release",
            "env -i PATH=/bin -u HOME -- cargo build --release",
            "FOO=1 BAR=2 cargo build --release",
            "(cd sub && cargo build --release)",
            "{ cargo build --release; }",
            "echo $(cargo build --release)",
            "echo \"$(cargo build --release)\"",
            "echo `cargo build --release`",
            "echo \"`cargo build --release`\"",
            "if true; then cargo build --release; fi",
            "for i in 1; do cargo build --release; done",
            "nohup nice -n 5 timeout 10 cargo build --release",
            "sudo -E cargo build --release",
            "command cargo build --release",
            "eval 'cargo build --release'",
            "car''go build \"--release\"",
            "c\\argo build --release",
            "ls\ncargo build --release",
            "time cargo build --release",
        ] {
            assert_eq!(denied(cmd), cargo, "{cmd}");
        }
        assert_eq!(
            denied("cd web && npm run build -- --prod"),
            Some("npm run build".to_string())
        );
    }

    #[test]
    fn allows_what_does_not_run_the_rule() {
        for cmd in [
            "cargo build",
            "cargo build --release-notes",
            "cargo test --release",
            "echo 'cargo build --release'",
            "echo \"cargo build --release\"",
            "grep -r 'npm run build' .",
            "git commit -m 'cargo build --release; npm run build'",
            "ls # cargo build --release",
            "npm run build-docs",
            "rm -rf /tmp/x",
            "bash -lc 'cargo test'",
        ] {
            assert_eq!(denied(cmd), None, "{cmd}");
        }
    }

    #[test]
    fn reports_the_rule_and_the_matched_command() {
        assert_eq!(
            matcher().check("cd x && env A=1 cargo build --release -p y"),
            Some(Denial {
                rule: "cargo build --release".into(),
                matched: "cargo build --release -p y".into(),
            })
        );
    }

    #[test]
    fn documented_blind_spots() {
        // Commands assembled at run time are not seen: layer 3 and review cover them.
        for cmd in [
            "c=cargo; $c build --release",
            "CMD='cargo build --release'; $CMD",
            "x='cargo build --release'; eval \"$x\"",
            "cargo build -r",
            "python3 -c 'import os; os.system(\"cargo build --release\")'",
        ] {
            assert_eq!(denied(cmd), None, "{cmd}");
        }
    }

    #[test]
    fn argv_without_shell() {
        let argv: Vec<String> = ["bash", "-lc", "true && cargo build --release"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            matcher().check_argv(&argv).map(|d| d.rule),
            Some("cargo build --release".to_string())
        );
    }
}

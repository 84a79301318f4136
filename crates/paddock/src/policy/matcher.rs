//! Command matching for `deny_commands`: does a shell command line run one of
//! the denied command prefixes? The line is parsed by a real shell parser,
//! `brush-parser` (the POSIX/bash parser of the brush shell), and every
//! simple command in the tree is checked: in pipelines, lists, `&&`/`||`,
//! `&`, subshells, groups, `if`/`while`/`for`/`case` bodies, function
//! bodies (whether or not they are called), coprocesses, command and
//! process substitutions, and here-documents fed to a shell. A word's value
//! is its unquoted text (`c''url`, `\curl`, `"curl"`, `$'\x63url'` are all
//! `curl`); the program is compared by base name (`/usr/bin/curl`), after
//! the wrappers that run another program are taken off with their options
//! (`env`, `command`, `builtin`, `exec -a NAME`, `nohup`, `time`, `nice`,
//! `timeout`, `sudo`/`doas`, `xargs`, `stdbuf`, `setsid`, `busybox`, ...).
//! Scripts given literally are matched recursively: `bash`/`sh`/`zsh`... `-c`
//! (past options such as `-o pipefail`), `eval`, `su -c`, `watch`, `env -S`,
//! `find -exec`, and a shell reading a here-document or here-string. A
//! here-document only *fed to a shell* is a script: `cat <<'EOF'` with a
//! denied word inside is allowed. A command line the parser refuses, one
//! nested deeper than [`MAX_DEPTH`], and a shell or interpreter that would
//! read its commands later from stdin or a terminal (`bash`, `echo … | sh`,
//! `python3`, Codex's `exec_command` + `write_stdin`) are denied: they
//! cannot be judged now.
//!
//! Why brush-parser: pure Rust (no C toolchain, unlike tree-sitter-bash), a
//! typed AST with simple commands, prefixes/suffixes, redirections and
//! here-documents already separated, and a word parser that yields quoting
//! and substitutions piece by piece; it follows bash, the shell both
//! engines run commands with.
//!
//! What it cannot see (documented in docs/host-profile.md): commands built at
//! run time (`$CMD`, `c=cargo; $c build`, `eval "$x"`), aliases, scripts and
//! Makefiles or package scripts that run a denied command themselves, other
//! interpreters (`python -c 'os.system(...)'`), and options written
//! differently from the rule (`cargo build -r` for `cargo build --release`,
//! or reordered options). The sandbox rung hides denied programs from the
//! job's view as well (docs/host-profile.md).

use brush_parser::ast;
use brush_parser::word::{self, WordPiece, WordPieceWithSource};
use brush_parser::ParserOptions;

/// One denied command prefix, as shell words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The rule as written in the profile.
    pub text: String,
    words: Vec<String>,
}

impl Rule {
    /// The words of the rule (`["cargo", "build", "--release"]`).
    pub fn words(&self) -> &[String] {
        &self.words
    }
}

/// A command line that runs a denied command, or one that cannot be judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The rule as written in the profile, or [`UNPARSEABLE`].
    pub rule: String,
    /// The simple command that matched, as words joined by spaces (for
    /// [`UNPARSEABLE`]: why the line cannot be judged).
    pub matched: String,
}

/// The `rule` of a denial for a command line that cannot be parsed.
pub const UNPARSEABLE: &str = "deny_commands";

/// The denied command prefixes of one profile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Matcher {
    rules: Vec<Rule>,
}

/// How deep scripts in scripts (`bash -c`, `eval`, substitutions) are
/// followed; deeper is denied.
pub const MAX_DEPTH: usize = 16;

/// `Err` carries the denial found: the walk stops at the first.
type Step = Result<(), Denial>;

impl Matcher {
    pub fn new(deny_commands: &[String]) -> Matcher {
        let rules = deny_commands
            .iter()
            .map(|text| Rule {
                text: text.clone(),
                words: shlex::split(text)
                    .unwrap_or_else(|| text.split_whitespace().map(str::to_string).collect()),
            })
            .filter(|r| !r.words.is_empty())
            .collect();
        Matcher { rules }
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The first rule the command line breaks, if any; a line that cannot
    /// be parsed is denied with rule [`UNPARSEABLE`].
    pub fn check(&self, command: &str) -> Option<Denial> {
        if self.rules.is_empty() {
            return None;
        }
        self.script(command, 0).err()
    }

    /// Like [`Matcher::check`] for a command given as argv (no shell).
    pub fn check_argv(&self, argv: &[String]) -> Option<Denial> {
        if self.rules.is_empty() {
            return None;
        }
        let args = argv.iter().cloned().map(Some).collect();
        self.words(args, Vec::new(), 0).err()
    }

    fn script(&self, text: &str, depth: usize) -> Step {
        if depth > MAX_DEPTH {
            return Err(unparseable(format!(
                "scripts nested more than {MAX_DEPTH} deep"
            )));
        }
        let mut parser = brush_parser::Parser::new(text.as_bytes(), &parser_options());
        let program = parser.parse_program().map_err(|e| {
            unparseable(format!("not a shell command line the parser accepts: {e}"))
        })?;
        for list in &program.complete_commands {
            self.list(list, depth)?;
        }
        Ok(())
    }

    fn list(&self, list: &ast::CompoundList, depth: usize) -> Step {
        for item in &list.0 {
            let and_or = &item.0;
            self.pipeline(&and_or.first, depth)?;
            for next in &and_or.additional {
                match next {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => self.pipeline(p, depth)?,
                }
            }
        }
        Ok(())
    }

    fn pipeline(&self, pipeline: &ast::Pipeline, depth: usize) -> Step {
        pipeline.seq.iter().try_for_each(|c| self.command(c, depth))
    }

    fn command(&self, command: &ast::Command, depth: usize) -> Step {
        let mut stdin = Vec::new();
        match command {
            ast::Command::Simple(simple) => self.simple(simple, depth),
            ast::Command::Compound(compound, redirects) => {
                self.compound(compound, depth)?;
                self.redirects(redirects.as_ref(), &mut stdin, depth)
            }
            ast::Command::Function(f) => {
                self.compound(&f.body.0, depth)?;
                self.redirects(f.body.1.as_ref(), &mut stdin, depth)
            }
            ast::Command::ExtendedTest(test, redirects) => {
                self.test_expr(&test.expr, depth)?;
                self.redirects(redirects.as_ref(), &mut stdin, depth)
            }
        }
    }

    fn compound(&self, compound: &ast::CompoundCommand, depth: usize) -> Step {
        use ast::CompoundCommand as C;
        match compound {
            C::Arithmetic(a) => self.text_with_substitutions(&a.expr.value, depth),
            C::ArithmeticForClause(f) => {
                for e in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.text_with_substitutions(&e.value, depth)?;
                }
                self.list(&f.body.list, depth)
            }
            C::BraceGroup(b) => self.list(&b.list, depth),
            C::Subshell(s) => self.list(&s.list, depth),
            C::ForClause(f) => {
                for w in f.values.iter().flatten() {
                    self.word(&w.value, depth)?;
                }
                self.list(&f.body.list, depth)
            }
            C::CaseClause(c) => {
                self.word(&c.value.value, depth)?;
                for case in &c.cases {
                    for p in &case.patterns {
                        self.word(&p.value, depth)?;
                    }
                    if let Some(cmd) = &case.cmd {
                        self.list(cmd, depth)?;
                    }
                }
                Ok(())
            }
            C::IfClause(i) => {
                self.list(&i.condition, depth)?;
                self.list(&i.then, depth)?;
                for e in i.elses.iter().flatten() {
                    if let Some(c) = &e.condition {
                        self.list(c, depth)?;
                    }
                    self.list(&e.body, depth)?;
                }
                Ok(())
            }
            C::WhileClause(w) | C::UntilClause(w) => {
                self.list(&w.0, depth)?;
                self.list(&w.1.list, depth)
            }
            C::Coprocess(c) => self.command(&c.body, depth),
        }
    }

    fn test_expr(&self, expr: &ast::ExtendedTestExpr, depth: usize) -> Step {
        use ast::ExtendedTestExpr as E;
        match expr {
            E::And(a, b) | E::Or(a, b) => {
                self.test_expr(a, depth)?;
                self.test_expr(b, depth)
            }
            E::Not(a) | E::Parenthesized(a) => self.test_expr(a, depth),
            E::UnaryTest(_, w) => self.word(&w.value, depth).map(drop),
            E::BinaryTest(_, a, b) => {
                self.word(&a.value, depth)?;
                self.word(&b.value, depth).map(drop)
            }
        }
    }

    /// Redirections: substitutions in targets, process substitutions, and
    /// what a here-document or here-string feeds to stdin.
    fn redirects(
        &self,
        redirects: Option<&ast::RedirectList>,
        stdin: &mut Vec<String>,
        depth: usize,
    ) -> Step {
        for r in redirects.map(|r| r.0.as_slice()).unwrap_or_default() {
            self.redirect(r, stdin, depth)?;
        }
        Ok(())
    }

    fn redirect(&self, r: &ast::IoRedirect, stdin: &mut Vec<String>, depth: usize) -> Step {
        match r {
            ast::IoRedirect::File(_, _, target) => match target {
                ast::IoFileRedirectTarget::Filename(w)
                | ast::IoFileRedirectTarget::Duplicate(w) => self.word(&w.value, depth).map(drop),
                ast::IoFileRedirectTarget::Fd(_) => Ok(()),
                ast::IoFileRedirectTarget::ProcessSubstitution(_, sub) => {
                    self.list(&sub.list, depth)
                }
            },
            ast::IoRedirect::OutputAndError(w, _) => self.word(&w.value, depth).map(drop),
            ast::IoRedirect::HereString(_, w) => {
                if let Some(text) = self.word(&w.value, depth)? {
                    stdin.push(text);
                }
                Ok(())
            }
            ast::IoRedirect::HereDocument(_, doc) => {
                let body = &doc.doc.value;
                if doc.requires_expansion {
                    let pieces = word::parse_heredoc(body, &parser_options())
                        .map_err(|e| unparseable(format!("cannot parse a here-document: {e}")))?;
                    self.pieces(&pieces, body, depth)?;
                }
                stdin.push(body.clone());
                Ok(())
            }
        }
    }

    fn simple(&self, simple: &ast::SimpleCommand, depth: usize) -> Step {
        use ast::CommandPrefixOrSuffixItem as Item;
        let mut args: Vec<Option<String>> = Vec::new();
        let mut stdin = Vec::new();
        let prefix = simple.prefix.iter().flat_map(|p| p.0.iter());
        let suffix = simple.suffix.iter().flat_map(|s| s.0.iter());
        let name = simple.word_or_name.iter().map(|w| (true, w));
        for (is_prefix, item) in prefix.map(|i| (true, i)).chain(suffix.map(|i| (false, i))) {
            match item {
                Item::IoRedirect(r) => self.redirect(r, &mut stdin, depth)?,
                Item::ProcessSubstitution(_, sub) => {
                    self.list(&sub.list, depth)?;
                    if !is_prefix {
                        args.push(None);
                    }
                }
                // `A=1 curl`: the assignment is not an argument; in a
                // suffix (`export A=$(curl x)`) it is.
                Item::AssignmentWord(_, w) => {
                    let value = self.word(&w.value, depth)?;
                    if !is_prefix {
                        args.push(value);
                    }
                }
                Item::Word(w) => args.push(self.word(&w.value, depth)?),
            }
        }
        // The program comes before the suffix.
        let mut words = Vec::new();
        for (_, w) in name {
            words.push(self.word(&w.value, depth)?);
        }
        words.extend(args);
        self.words(words, stdin, depth)
    }

    /// Checks the substitutions in a word and returns its literal value
    /// (`None` when part of it is only known at run time).
    fn word(&self, text: &str, depth: usize) -> Result<Option<String>, Denial> {
        let pieces = word::parse(text, &parser_options())
            .map_err(|e| unparseable(format!("cannot parse the word `{text}`: {e}")))?;
        self.pieces(&pieces, text, depth)
    }

    fn text_with_substitutions(&self, text: &str, depth: usize) -> Step {
        self.word(text, depth).map(drop)
    }

    /// The literal value of parsed pieces of `source` (see [`Matcher::word`]).
    fn pieces(
        &self,
        pieces: &[WordPieceWithSource],
        source: &str,
        depth: usize,
    ) -> Result<Option<String>, Denial> {
        let mut out = Some(String::new());
        for p in pieces {
            let literal = match &p.piece {
                WordPiece::Text(s) | WordPiece::SingleQuotedText(s) => Some(s.clone()),
                WordPiece::AnsiCQuotedText(s) => Some(ansi_c(s)),
                WordPiece::EscapeSequence(s) => Some(s.strip_prefix('\\').unwrap_or(s).to_string()),
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    self.pieces(inner, source, depth)?
                }
                WordPiece::TildeExpansion(_) => Some("~".to_string()),
                WordPiece::ParameterExpansion(_) => {
                    // `${x:-$(curl x)}`: the words inside may substitute.
                    let text = source.get(p.start_index..p.end_index).unwrap_or(source);
                    if text.contains("$(") || text.contains('`') {
                        let inner = text
                            .strip_prefix("${")
                            .and_then(|t| t.strip_suffix('}'))
                            .ok_or_else(|| {
                                unparseable(format!("cannot read the expansion `{text}`"))
                            })?;
                        self.word(inner, depth + 1)?;
                    }
                    None
                }
                WordPiece::CommandSubstitution(s) | WordPiece::BackquotedCommandSubstitution(s) => {
                    self.script(s, depth + 1)?;
                    None
                }
                WordPiece::ArithmeticExpression(e) => {
                    self.text_with_substitutions(&e.value, depth + 1)?;
                    None
                }
            };
            out = match (out, literal) {
                (Some(mut acc), Some(l)) => {
                    acc.push_str(&l);
                    Some(acc)
                }
                _ => None,
            };
        }
        Ok(out)
    }

    /// One simple command as words (`None`: known only at run time), with
    /// what its here-documents feed to stdin.
    fn words(&self, mut args: Vec<Option<String>>, stdin: Vec<String>, depth: usize) -> Step {
        loop {
            let Some(Some(first)) = args.first() else {
                // No program, or one known only at run time.
                return Ok(());
            };
            let program = base_name(first).to_string();
            let rest = &args[1..];
            let skip = match program.as_str() {
                "command" => {
                    if rest
                        .first()
                        .is_some_and(|w| matches!(w.as_deref(), Some("-v" | "-V")))
                    {
                        // `command -v curl` only looks it up.
                        return Ok(());
                    }
                    1 + options(rest, "")
                }
                "builtin" | "nohup" | "setsid" | "busybox" | "unbuffer" | "nocache" => {
                    1 + options(rest, "")
                }
                "time" => 1 + options(rest, "fo"),
                "exec" => 1 + options(rest, "a"),
                "nice" => 1 + options(rest, "n"),
                "ionice" => 1 + options(rest, "cnp"),
                "stdbuf" => 1 + options(rest, "ioe"),
                "sudo" | "doas" => 1 + options(rest, "ugCDhprtTUc"),
                "timeout" => 1 + positionals(rest, "sk", 1),
                "chroot" => 1 + positionals(rest, "", 1),
                "taskset" => 1 + positionals(rest, "", 1),
                "chrt" => 1 + positionals(rest, "", 1),
                "flock" => 1 + positionals(rest, "wEc", 1),
                "strace" | "ltrace" => 1 + options(rest, "oeEpPsSuaXbU"),
                "xargs" => 1 + options(rest, "adEeIiLlnPs"),
                "env" => {
                    let (skip, split) = env_options(rest);
                    if let Some(split) = split {
                        // `env -S 'curl x' y`: the string is words.
                        let mut words: Vec<Option<String>> = shlex::split(&split)
                            .unwrap_or_default()
                            .into_iter()
                            .map(Some)
                            .collect();
                        words.extend(args.drain(1 + skip..));
                        args = words;
                        continue;
                    }
                    1 + skip
                }
                _ => 0,
            };
            if skip == 0 {
                break;
            }
            args.drain(..skip.min(args.len()));
        }
        let Some(Some(first)) = args.first() else {
            return Ok(());
        };
        let program = base_name(first).to_string();
        self.rule_match(&args)?;
        let rest = &args[1..];
        match program.as_str() {
            "eval" => {
                let text: Vec<&str> = rest.iter().flatten().map(String::as_str).collect();
                self.script(&text.join(" "), depth + 1)
            }
            "watch" => {
                let n = options(rest, "nd");
                let text: Vec<&str> = rest[n..].iter().flatten().map(String::as_str).collect();
                self.script(&text.join(" "), depth + 1)
            }
            "su" | "runuser" => match option_value(rest, 'c', "--command") {
                Some(Some(script)) => self.script(&script, depth + 1),
                _ => Ok(()),
            },
            "find" => {
                let mut i = 0;
                while i < rest.len() {
                    if matches!(
                        rest[i].as_deref(),
                        Some("-exec" | "-execdir" | "-ok" | "-okdir")
                    ) {
                        let end = rest[i + 1..]
                            .iter()
                            .position(|w| matches!(w.as_deref(), Some(";" | "+")))
                            .map_or(rest.len(), |p| i + 1 + p);
                        self.words(rest[i + 1..end].to_vec(), Vec::new(), depth + 1)?;
                        i = end;
                    }
                    i += 1;
                }
                Ok(())
            }
            p if SHELLS.contains(&p) => match shell_script(rest) {
                ShellScript::Literal(script) => self.script(&script, depth + 1),
                // Commands typed in later (through a pipe, a terminal,
                // Codex's `write_stdin`) cannot be judged now.
                ShellScript::Stdin if stdin.is_empty() => Err(unparseable(format!(
                    "`{program}` would read its commands from stdin or a terminal, which cannot be judged; pass the script with -c"
                ))),
                ShellScript::Stdin => stdin.iter().try_for_each(|s| self.script(s, depth + 1)),
                ShellScript::Unseen => Ok(()),
            },
            // An interpreter's code is not judged (a blind spot), but one
            // started to be typed into later is refused like a shell.
            p if stdin.is_empty() && interpreter_reads_stdin(p, rest) => {
                Err(unparseable(format!(
                    "`{program}` would read its code from stdin or a terminal, which cannot be judged; pass a script file"
                )))
            }
            _ => Ok(()),
        }
    }

    fn rule_match(&self, args: &[Option<String>]) -> Step {
        let Some(Some(first)) = args.first() else {
            return Ok(());
        };
        let program = base_name(first);
        for rule in &self.rules {
            let matches = rule.words.len() <= args.len()
                && base_name(&rule.words[0]) == program
                && rule.words[1..]
                    .iter()
                    .zip(&args[1..])
                    .all(|(r, w)| w.as_deref() == Some(r.as_str()));
            if matches {
                let shown: Vec<&str> = args
                    .iter()
                    .map(|w| w.as_deref().unwrap_or("<dynamic>"))
                    .collect();
                return Err(Denial {
                    rule: rule.text.clone(),
                    matched: shown.join(" "),
                });
            }
        }
        Ok(())
    }
}

const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "yash", "rbash", "posh", "fish",
];

fn parser_options() -> ParserOptions {
    ParserOptions::default()
}

fn unparseable(why: String) -> Denial {
    Denial {
        rule: UNPARSEABLE.to_string(),
        matched: why,
    }
}

fn base_name(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// How many leading words are options of a wrapper (`with_value`: the short
/// options that take a value, inline or as the next word; a long option
/// `--x` takes the next word only as `--x=v`, except the wrappers' own
/// value options listed in [`LONG_WITH_VALUE`]). Assignments count as
/// options only for `env` (see [`env_options`]).
fn options(words: &[Option<String>], with_value: &str) -> usize {
    let mut n = 0;
    while let Some(w) = words.get(n) {
        let Some(w) = w.as_deref() else {
            return n;
        };
        if w == "--" {
            return n + 1;
        }
        if let Some(long) = w.strip_prefix("--") {
            n += 1 + usize::from(!long.contains('=') && LONG_WITH_VALUE.contains(&long));
            continue;
        }
        let Some(cluster) = w.strip_prefix('-').filter(|c| !c.is_empty()) else {
            return n;
        };
        n += 1;
        // `-n5` carries its value; `-n 5` takes the next word.
        if let Some(pos) = cluster.find(|c| with_value.contains(c)) {
            if pos + 1 == cluster.len() {
                n += 1;
            }
        }
    }
    n.min(words.len())
}

/// Options, then `count` positional words before the command
/// (`timeout 5 curl`, `chroot DIR curl`).
fn positionals(words: &[Option<String>], with_value: &str, count: usize) -> usize {
    (options(words, with_value) + count).min(words.len())
}

const LONG_WITH_VALUE: &[&str] = &[
    "user",
    "group",
    "signal",
    "kill-after",
    "adjustment",
    "chdir",
    "unset",
    "arg-file",
    "delimiter",
    "max-args",
    "max-procs",
    "max-lines",
    "max-chars",
    "replace",
    "eof",
    "output",
    "input",
    "error",
    "classdata",
    "class",
    "rcfile",
    "init-file",
    "command",
    "split-string",
    "interval",
    "prompt",
    "host",
    "role",
    "type",
];

/// `env`'s options and assignments; the `-S`/`--split-string` value.
fn env_options(words: &[Option<String>]) -> (usize, Option<String>) {
    let mut n = 0;
    let mut split = None;
    while let Some(Some(w)) = words.get(n) {
        if w == "--" {
            return (n + 1, split);
        }
        let value_next = || words.get(n + 1).cloned().flatten();
        if w == "-S" || w == "--split-string" {
            split = value_next();
            n += 2;
        } else if let Some(v) = w.strip_prefix("--split-string=") {
            split = Some(v.to_string());
            n += 1;
        } else if let Some(v) = w.strip_prefix("-S").filter(|v| !v.is_empty()) {
            split = Some(v.to_string());
            n += 1;
        } else if matches!(w.as_str(), "-u" | "-C" | "--unset" | "--chdir") {
            n += 2;
        } else if w.starts_with('-') && w.len() > 1 || is_assignment(w) {
            n += 1;
        } else {
            break;
        }
    }
    (n.min(words.len()), split)
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

/// The value of `-c X`/`-cX`/`--command X`/`--command=X` among `words`.
fn option_value(words: &[Option<String>], short: char, long: &str) -> Option<Option<String>> {
    let mut i = 0;
    while i < words.len() {
        let w = words[i].as_deref().unwrap_or("");
        if let Some(v) = w.strip_prefix(long).and_then(|v| v.strip_prefix('=')) {
            return Some(Some(v.to_string()));
        }
        if w == long || w == format!("-{short}") {
            return Some(words.get(i + 1).cloned().flatten());
        }
        if let Some(v) = w
            .strip_prefix('-')
            .filter(|v| !v.starts_with('-'))
            .and_then(|v| v.strip_prefix(short))
        {
            return Some(Some(v.to_string()));
        }
        i += 1;
    }
    None
}

/// Whether the interpreter `program` would read its code from stdin or a
/// terminal (a REPL): no code option (`-c`, `-m`, `-e`...), no script
/// operand, or `-` as the operand.
fn interpreter_reads_stdin(program: &str, words: &[Option<String>]) -> bool {
    // (code options, options taking a value, options that mean interactive)
    let (code, value, interactive): (&[&str], &[&str], &[&str]) =
        if program.starts_with("python") || program.starts_with("pypy") {
            (&["c", "m"], &["W", "X"], &[])
        } else {
            match program {
                "node" | "nodejs" => (
                    &["e", "p", "-eval", "-print", "-test"],
                    &[
                        "r",
                        "C",
                        "-require",
                        "-import",
                        "-loader",
                        "-input-type",
                        "-conditions",
                    ],
                    &["i", "-interactive"],
                ),
                "perl" => (&["e", "E"], &["I", "M", "m"], &[]),
                "ruby" => (&["e"], &["I", "r"], &[]),
                "lua" | "luajit" => (&["e"], &["l"], &["i"]),
                "php" => (&["r"], &["c", "d", "z"], &["a"]),
                "irb" => return true,
                _ => return false,
            }
        };
    let mut i = 0;
    while let Some(w) = words.get(i) {
        let Some(w) = w.as_deref() else {
            return false;
        };
        if w == "-" {
            return true;
        }
        if w == "--" {
            return words.get(i + 1).is_none();
        }
        let Some(opt) = w.strip_prefix('-') else {
            // A script file.
            return false;
        };
        let (name, inline) = match opt.split_once('=') {
            Some((n, _)) => (n, true),
            None => (opt, false),
        };
        if interactive.contains(&name) {
            return true;
        }
        if let Some(long) = name.strip_prefix('-') {
            let long = format!("-{long}");
            if code.contains(&long.as_str()) {
                return false;
            }
            i += 1 + usize::from(!inline && value.contains(&long.as_str()));
            continue;
        }
        // A short cluster: its first code or value option ends it.
        let mut skip_next = false;
        for (k, c) in name.char_indices() {
            let c = &name[k..k + c.len_utf8()];
            if code.contains(&c) {
                return false;
            }
            if interactive.contains(&c) {
                return true;
            }
            if value.contains(&c) {
                skip_next = k + c.len() == name.len();
                break;
            }
        }
        i += 1 + usize::from(skip_next);
    }
    true
}

enum ShellScript {
    /// `-c SCRIPT` with a literal script.
    Literal(String),
    /// The shell reads its script from stdin (no file argument).
    Stdin,
    /// A script file, or a script known only at run time.
    Unseen,
}

/// What a shell runs, from its arguments: past options (`-o NAME`, `+o
/// NAME`, `-O NAME`, `--rcfile FILE`...), `-c` makes the first operand the
/// script.
fn shell_script(words: &[Option<String>]) -> ShellScript {
    let mut saw_c = false;
    let mut i = 0;
    while i < words.len() {
        let Some(w) = words[i].as_deref() else {
            return ShellScript::Unseen;
        };
        if w == "--" || w == "-" {
            i += 1;
            break;
        }
        if let Some(long) = w.strip_prefix("--") {
            i += 1 + usize::from(matches!(long, "rcfile" | "init-file"));
            continue;
        }
        let Some(cluster) = w.strip_prefix('-').or_else(|| w.strip_prefix('+')) else {
            break;
        };
        saw_c |= w.starts_with('-') && cluster.contains('c');
        // `-o pipefail`, `+o posix`, `-O extglob`: the option name follows.
        i += 1 + cluster.chars().filter(|c| matches!(c, 'o' | 'O')).count();
    }
    match words.get(i) {
        Some(Some(script)) if saw_c => ShellScript::Literal(script.clone()),
        Some(None) => ShellScript::Unseen,
        None if !saw_c => ShellScript::Stdin,
        _ => ShellScript::Unseen,
    }
}

/// The value of `$'...'` text: bash's backslash escapes.
fn ansi_c(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(e) = chars.next() else {
            out.push('\\');
            break;
        };
        let mut number = |radix: u32, max: usize, first: Option<char>| {
            let mut digits: String = first.into_iter().collect();
            while digits.len() < max {
                match chars.peek() {
                    Some(d) if d.is_digit(radix) => {
                        digits.push(*d);
                        chars.next();
                    }
                    _ => break,
                }
            }
            u32::from_str_radix(&digits, radix)
                .ok()
                .and_then(char::from_u32)
        };
        let decoded = match e {
            'n' => Some('\n'),
            't' => Some('\t'),
            'r' => Some('\r'),
            'a' => Some('\x07'),
            'b' => Some('\x08'),
            'e' | 'E' => Some('\x1b'),
            'f' => Some('\x0c'),
            'v' => Some('\x0b'),
            '\\' | '\'' | '"' | '?' => Some(e),
            'x' => number(16, 2, None),
            'u' => number(16, 4, None),
            'U' => number(16, 8, None),
            '0'..='7' => number(8, 3, Some(e)),
            _ => None,
        };
        match decoded {
            Some(d) => out.push(d),
            None => {
                out.push('\\');
                out.push(e);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;

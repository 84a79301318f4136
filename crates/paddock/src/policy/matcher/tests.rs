//! The table of command forms, both directions: every denied form with the
//! rule it breaks, and look-alikes that must pass.

use super::*;

fn matcher() -> Matcher {
    Matcher::new(&[
        "curl".to_string(),
        "cargo build --release".to_string(),
        "npm run build".to_string(),
        "rm -rf /".to_string(),
    ])
}

fn denied(cmd: &str) -> Option<String> {
    matcher().check(cmd).map(|d| d.rule)
}

const CURL_FORMS: &[&str] = &[
    "curl x",
    "curl",
    ">/dev/null curl x",
    "2>&1 >/dev/null curl x",
    "</dev/null curl x",
    "curl x > out 2>&1",
    "/usr/bin/curl x",
    "./curl x",
    "/usr/bin/env curl x",
    "env curl x",
    "env -i PATH=/bin -u HOME -- curl x",
    "env -S 'curl x'",
    "env --split-string='curl x'",
    "A=1 curl x",
    "A=1 B=\"two words\" curl x",
    "bash -c 'curl x'",
    "bash -lc 'curl x'",
    "bash -o pipefail -c 'curl x | cat'",
    "bash +o posix -O extglob -c 'curl x'",
    "bash --norc -c 'curl x'",
    "sh -c \"cd / && curl x\"",
    "dash -ec 'curl x'",
    "zsh -c 'curl x'",
    "sh -c 'bash -c \"curl x\"'",
    "exec curl x",
    "exec -a name curl x",
    "exec -a name -c curl x",
    "coproc curl x",
    "coproc NAME { curl x; }",
    "command curl x",
    "command -p curl x",
    "builtin curl x",
    "nohup curl x &",
    "timeout 5 curl x",
    "timeout -s KILL -k 1 5 curl x",
    "timeout --signal=KILL 5 curl x",
    "nice -n 5 curl x",
    "nice curl x",
    "ionice -c 3 curl x",
    "stdbuf -o0 curl x",
    "setsid curl x",
    "chroot / curl x",
    "taskset 1 curl x",
    "flock /tmp/l curl x",
    "strace -f -o /dev/null curl x",
    "busybox curl x",
    "time curl x",
    "time -p curl x",
    "xargs curl < urls",
    "echo x | xargs curl",
    "echo x | xargs -n 1 -P4 curl",
    "echo x | xargs -I{} curl {}",
    "find . -name x -exec curl {} \\;",
    "find . -execdir curl {} +",
    "sudo curl x",
    "sudo -E -u root curl x",
    "sudo -Eu root curl x",
    "doas curl x",
    "su -c 'curl x' root",
    "watch -n 1 curl x",
    "echo $(curl x)",
    "echo \"$(curl x)\"",
    "echo `curl x`",
    "echo \"`curl x`\"",
    "x=$(curl x)",
    "export X=$(curl x)",
    "echo $( (curl x) )",
    "echo $(echo $(curl x))",
    "eval 'curl x'",
    "eval curl x",
    "eval \"curl x\"",
    "cat <(curl x)",
    "diff <(curl x) <(curl y)",
    "tee >(curl -d @- x) < f",
    "cat < <(curl x)",
    "f() { curl x; }; f",
    "function f { curl x; }",
    "true; curl x",
    "true && curl x",
    "false || curl x",
    "echo | curl x",
    "curl x & wait",
    "true\ncurl x",
    "true \\\n  && curl x",
    "(curl x)",
    "{ curl x; }",
    "! curl x",
    "if curl x; then :; fi",
    "if true; then curl x; fi",
    "if false; then :; elif true; then curl x; else :; fi",
    "while curl x; do :; done",
    "until false; do curl x; done",
    "for i in 1 2; do curl $i; done",
    "for i in $(curl x); do :; done",
    "case $(curl x) in *) ;; esac",
    "case x in x) curl x;; esac",
    "[[ $(curl x) == y ]]",
    "(( $(curl x) + 1 ))",
    "c''url x",
    "c\"\"url x",
    "\\curl x",
    "cu\\rl x",
    "\"curl\" x",
    "'curl' x",
    "$'\\x63url' x",
    "$'\\143url' x",
    "bash <<'EOF'\ncurl x\nEOF",
    "sh <<EOF\ncurl x\nEOF",
    "bash -s <<< 'curl x'",
    "bash <<< \"curl x\"",
    "cat <<EOF\n$(curl x)\nEOF",
    "echo ${x:-$(curl x)}",
    "ls > \"$(curl x)\"",
    "echo hi # comment\ncurl x",
];

#[test]
fn denied_forms() {
    for cmd in CURL_FORMS {
        assert_eq!(denied(cmd), Some("curl".to_string()), "{cmd:?}");
    }
}

#[test]
fn multi_word_rules_keep_their_prefix_semantics() {
    let cargo = Some("cargo build --release".to_string());
    for cmd in [
        "cargo build --release",
        "cargo build --release --locked > log 2>&1",
        "/usr/bin/cargo build --release",
        "bash -lc 'cargo build --release'",
        "cd x && cargo build --release -p y",
        "env A=1 cargo build --release",
        "car''go build \"--release\"",
        "nohup nice -n 5 timeout 10 cargo build --release",
        "sudo -E cargo build --release",
        "eval 'cargo build --release'",
    ] {
        assert_eq!(denied(cmd), cargo, "{cmd:?}");
    }
    assert_eq!(
        denied("cd web && npm run build -- --prod"),
        Some("npm run build".to_string())
    );
    assert_eq!(denied("rm -rf /"), Some("rm -rf /".to_string()));
}

#[test]
fn allowed_look_alikes() {
    for cmd in [
        "ls",
        "echo curl x",
        "echo 'curl x'",
        "echo \"curl x\"",
        "printf '%s\\n' \"\\$(curl x)\"",
        "echo '$(curl x)'",
        "echo '`curl x`'",
        "grep -r 'curl' .",
        "grep curl file",
        "git commit -m 'use curl; cargo build --release'",
        "ls # curl x",
        "curly x",
        "curl-config --version",
        "/opt/curl/bin/wget x",
        "man curl",
        "which curl",
        "command -v curl",
        "type curl",
        "cat <<'EOF' > notes.md\ncurl x\nEOF",
        "cat <<'EOF'\n$(curl x)\nEOF",
        "cat <<EOF\ncurl x is a tool\nEOF",
        "tee notes <<< 'curl x'",
        "bash script.sh",
        "bash -c 'echo curl'",
        "sh -c 'ls' curl",
        "cargo build",
        "cargo build --release-notes",
        "cargo test --release",
        "npm run build-docs",
        "rm -rf /tmp/x",
        "rm -rf ./",
        "x=curl",
        "echo $((1 + 2))",
        "timeout 5 ls",
        "env A=curl ls",
        "find . -name curl -print",
        "xargs -I curl echo curl",
        "sudo -u curl ls",
    ] {
        assert_eq!(matcher().check(cmd), None, "{cmd:?}");
    }
}

#[test]
fn unparseable_lines_are_denied_with_a_reason() {
    // `select` (an interactive menu) is valid bash brush-parser 0.4 does
    // not know: refused too (documented).
    for cmd in [
        "echo 'unterminated",
        "echo \"$(",
        "if true; then",
        "ls )",
        "echo $(",
        "select x in a b; do break; done",
    ] {
        let d = matcher().check(cmd);
        assert_eq!(
            d.as_ref().map(|d| d.rule.as_str()),
            Some(UNPARSEABLE),
            "{cmd:?}: {d:?}"
        );
        assert!(
            d.as_ref().is_some_and(|d| d
                .matched
                .starts_with("not a shell command line the parser accepts")
                || d.matched.starts_with("cannot parse")),
            "{cmd:?}: {d:?}"
        );
    }
    // A shell reading its commands later: from a terminal (Codex's
    // `exec_command {"cmd": "bash", "tty": true}` then `write_stdin`), a
    // pipe or a file.
    for (cmd, shell) in [
        ("bash", "bash"),
        ("bash -i", "bash"),
        ("sh -s", "sh"),
        ("exec bash", "bash"),
        ("echo 'curl x' | bash", "bash"),
        ("cat script | sh -", "sh"),
        ("bash < script.sh", "bash"),
        ("env -i bash --norc", "bash"),
        ("sudo -s zsh", "zsh"),
    ] {
        assert_eq!(
            matcher().check(cmd),
            Some(Denial {
                rule: UNPARSEABLE.into(),
                matched: format!(
                    "`{shell}` would read its commands from stdin or a terminal, which cannot be judged; pass the script with -c"
                ),
            }),
            "{cmd:?}"
        );
    }
    // An interpreter started to be typed into later.
    for (cmd, program) in [
        ("python3", "python3"),
        ("python3 -u -q", "python3"),
        ("python3 -W ignore", "python3"),
        ("echo 'import os' | python3 -", "python3"),
        ("node", "node"),
        ("node -i", "node"),
        ("node --require x", "node"),
        ("perl", "perl"),
        ("irb", "irb"),
        ("php -a", "php"),
        ("lua -i script.lua", "lua"),
    ] {
        assert_eq!(
            matcher().check(cmd),
            Some(Denial {
                rule: UNPARSEABLE.into(),
                matched: format!(
                    "`{program}` would read its code from stdin or a terminal, which cannot be judged; pass a script file"
                ),
            }),
            "{cmd:?}"
        );
    }
    // Code given otherwise is a blind spot, not a refusal.
    for cmd in [
        "python3 script.py",
        "python3 -m pytest -q",
        "python3 -c 'print(1)'",
        "python3 -uc 'print(1)'",
        "python3 - <<'EOF'\nprint(1)\nEOF",
        "node app.js",
        "node -e 'console.log(1)'",
        "node --eval=1",
        "perl -ne 'print' file",
        "perl -MFoo script.pl",
        "ruby -e 'p 1'",
        "php -r 'echo 1;'",
        "php script.php",
        "cat x | python3 script.py",
    ] {
        assert_eq!(matcher().check(cmd), None, "{cmd:?}");
    }
    // Deeper than MAX_DEPTH scripts in scripts.
    let mut cmd = "ls".to_string();
    for _ in 0..=MAX_DEPTH + 1 {
        cmd = format!("eval {}", shlex::try_quote(&cmd).unwrap_or_default());
    }
    assert_eq!(
        matcher().check(&cmd),
        Some(Denial {
            rule: UNPARSEABLE.into(),
            matched: format!("scripts nested more than {MAX_DEPTH} deep"),
        })
    );
    // No rules, nothing to judge.
    assert_eq!(Matcher::new(&[]).check("echo 'unterminated"), None);
}

#[test]
fn reports_the_rule_and_the_matched_command() {
    assert_eq!(
        matcher().check("cd x && env A=1 cargo build --release -p \"$Y\""),
        Some(Denial {
            rule: "cargo build --release".into(),
            matched: "cargo build --release -p <dynamic>".into(),
        })
    );
}

#[test]
fn documented_blind_spots() {
    // Commands assembled at run time are not seen: the sandbox rung's
    // hidden programs and review cover them.
    for cmd in [
        "c=curl; $c x",
        "CMD='curl x'; $CMD",
        "x='curl x'; eval \"$x\"",
        "bash -c \"$X\"",
        "cargo build -r",
        "python3 -c 'import os; os.system(\"curl x\")'",
    ] {
        assert_eq!(denied(cmd), None, "{cmd:?}");
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
    let argv: Vec<String> = ["/usr/bin/env", "curl", "x"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        matcher().check_argv(&argv).map(|d| d.rule),
        Some("curl".to_string())
    );
}

#[test]
fn ansi_c_escapes() {
    assert_eq!(ansi_c("\\x63u\\162l\\n\\q"), "curl\n\\q");
}

/// Ordinary bash an agent writes parses (no false "cannot judge").
#[test]
fn ordinary_bash_is_not_refused() {
    for cmd in [
        "[[ $x =~ ^a(b|c)$ ]] && echo yes",
        "echo ${var//pat/rep} ${#arr[@]} ${x:0:3} ${y^^}",
        "a=(1 2 3); for i in \"${a[@]}\"; do echo $i; done",
        "cat <<-EOF\n\tindented\n\tEOF",
        "case $x in a|b) echo ab ;& c) echo c ;; esac",
        "echo $((1 + 2 * 3)) $(( x++ ))",
        "git log --oneline | head -n 5 | awk '{print $1}'",
        "find . -name '*.rs' -print0 | xargs -0 grep -l 'fn main'",
        "cargo test -p paddock --lib 2>&1 | tail -20",
        "cd /tmp && { echo a; echo b; } > out.txt",
        "printf '%s\\n' \"$(date +%s)\" >> log",
        "python3 -c \"print('hi')\"",
        "sed -i 's/a/b/g' file.txt && git diff --stat",
        "if [ -f x ]; then echo y; elif [ -d x ]; then echo d; fi",
        "trap 'rm -f $tmp' EXIT; tmp=$(mktemp)",
        "declare -A m=([a]=1 [b]=2); echo ${m[a]}",
        "read -r line < file; echo \"$line\"",
        "while IFS= read -r l; do echo \"$l\"; done < file",
        "time (sleep 0)",
        "ls &>/dev/null || true",
        "exec 3>&1; echo hi >&3",
        "function f() { local x=1; echo $x; }; f",
    ] {
        assert_eq!(matcher().check(cmd), None, "{cmd:?}");
    }
}

//! A hostile spec against the engine it briefs: a submitted spec's texts
//! (`ticket.description`, `done_when`, `constraints`, the comment thread's
//! times and bodies, its own `prior_attempts`, `context.instructions`;
//! its names, the type, project, model and a comment's author, refuse
//! such characters where the spec is read) are rendered into the engine's
//! prompt and its instructions file. Each carries what a terminal or a
//! reader would take for something else: an escape sequence (a window
//! title, the clipboard), a bell, NUL, DEL, a C1 control, a carriage
//! return that overwrites its line with a forged one, a line or paragraph
//! separator (a line break to some readers), bidirectional overrides and
//! isolates that show the text after them reordered, and invisible
//! characters (a soft hyphen, a variation selector, a Hangul filler).
//! Through the real `paddock context`: the hostile spec's `PROMPT.md` and
//! `AGENTS.md` are, whole, those of the same spec with those characters
//! left out by hand (line breaks and tabs kept in a text of several
//! lines, none in a name), where before they reached both as sent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use paddock_test_support::prelude::*;

/// What the hostile texts hold that plain text leaves out, each as the
/// TOML escape that writes it, and a line of its own forged after a bare
/// carriage return.
const HOSTILE: &[&str] = &[
    "\\u001b]0;owned\\u0007",
    "\\u001b]52;c;ZXZpbA==\\u0007",
    "\\u0000",
    "\\u007f",
    "\\u009b2J",
    "\\r## Done when\\r",
    "\\u202e",
    "\\u2066",
    "\\u200f",
    "\\u061c",
    "\\u2028",
    "\\u2029",
    "\\u00ad",
    "\\u034f",
    "\\ufe00",
    "\\U000e0100",
    "\\u3164",
    "\\u180b",
    "\\ufff9",
];

/// The spec's texts, with `{}` where the hostile characters go.
fn spec(repo: &std::path::Path, x: &str) -> String {
    format!(
        r#"isolation = "process"

[ticket]
id = "T-9"
title = "Greet"
type = "feature"
project = "greeter"
description = """
Fix the{x} greeting.
	Indented{x} line.
"""
done_when = ["`greet` {x}prints", "tests{x}\npass"]
constraints = ["no{x} new dependencies"]

[[ticket.comments]]
author = "maria"
at = "2026-11-28{x}T09:12:00Z"
body = "Trim{x} it.\nThen{x} ship."

[[ticket.prior_attempts]]
attempt = 1
outcome = "boun{x}ced"
summary = "Broke{x} it.\nBadly."
branch = "paddock/T-9/1{x}"
tried = ["argv{x}[1]"]
failed = ["pan{x}icked"]
bounce_comment = "Handle{x} it.\nPlease."

[repository]
path = "{repo}"
base_ref = "main"

[engine]
kind = "codex"
model = "gpt-5.5"

[upstream]
provider = "scripted"
scenario = "scenario.toml"

[budget]
max_usd = 2.5

[context]
instructions = "Be{x} brief.\nBe{x} kind."
"#,
        repo = repo.display(),
    )
}

/// `paddock context` on `text` in `dir`: its `PROMPT.md` and `AGENTS.md`.
async fn rendered(home: &Home, dir: &str, text: &str) -> (String, String) {
    let dir = home.path().join(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let spec = dir.join("job.toml");
    std::fs::write(&spec, text).unwrap();
    std::fs::write(
        dir.join("scenario.toml"),
        "[[turn]]\ntext = \"hi\"\nusage = { input = 1, output = 1 }\n",
    )
    .unwrap();
    let out_dir = dir.join("out");
    let out = home
        .paddock(
            &[
                "context",
                spec.to_str().unwrap(),
                "--out",
                out_dir.to_str().unwrap(),
            ],
            &[],
        )
        .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |f: &str| std::fs::read_to_string(out_dir.join(f)).unwrap();
    (read("PROMPT.md"), read("AGENTS.md"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_specs_control_and_bidi_characters_do_not_reach_the_engines_brief() {
    let home = Home::new();
    let repo = repo(home.path());
    let plain = rendered(&home, "plain", &spec(&repo, "")).await;
    let hostile = rendered(&home, "hostile", &spec(&repo, &HOSTILE.concat())).await;
    // What is left of the hostile characters: the printable text of the
    // escapes, and no line of the forged heading's own.
    let left = "]0;owned]52;c;ZXZpbA==2J## Done when";
    let want = rendered(&home, "want", &spec(&repo, left)).await;
    assert_eq!(hostile, want);
    // The plain spec's brief, so the comparison above is of something: the
    // texts of several lines keep their breaks and tabs.
    assert!(
        plain.0.contains("Fix the greeting.\n\tIndented line.")
            && plain.0.contains("- tests\npass")
            && plain
                .1
                .contains("**maria** (2026-11-28T09:12:00Z):\nTrim it.\nThen ship."),
        "{}\n{}",
        plain.0,
        plain.1
    );
}

//! Every relative link in the README and the docs resolves: the file (or
//! directory) exists, and a `#fragment` names one of its headings (GitHub's
//! anchor rules: lower case, punctuation dropped, spaces to hyphens).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Markdown files users read: the top-level ones and docs/.
fn documents() -> Vec<PathBuf> {
    let root = root();
    let mut docs: Vec<PathBuf> = ["README.md", "ARCHITECTURE.md", "BENCHMARKS.md"]
        .iter()
        .map(|f| root.join(f))
        .collect();
    for e in std::fs::read_dir(root.join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            docs.push(p);
        }
    }
    docs.sort();
    docs
}

/// The text outside fenced code blocks.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The targets of the inline links `[text](target)`.
fn links(text: &str) -> Vec<String> {
    let re = regex::Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    re.captures_iter(&prose(text))
        .map(|c| c[1].to_owned())
        .collect()
}

/// GitHub's anchor for a heading.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> Vec<String> {
    prose(text)
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| anchor(l.trim_start_matches('#')))
        .collect()
}

#[test]
fn every_relative_link_resolves() {
    let mut broken = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        let name = doc
            .strip_prefix(root())
            .unwrap_or(&doc)
            .display()
            .to_string();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = match link.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (link.as_str(), None),
            };
            let target = if path.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap().join(path)
            };
            if !target.exists() {
                broken.push(format!("{name}: {link} (no such file)"));
                continue;
            }
            if let Some(f) = fragment {
                if target.extension().is_some_and(|x| x == "md") {
                    let t = std::fs::read_to_string(&target).unwrap();
                    if !anchors(&t).iter().any(|a| a == f) {
                        broken.push(format!("{name}: {link} (no such heading)"));
                    }
                }
            }
        }
    }
    assert_eq!(broken, Vec::<String>::new());
}

#[test]
fn the_checker_sees_links_anchors_and_skips_code() {
    let text = "See [a](docs/a.md#two-words) and [b](b.md).\n```\n[c](c.md)\n```\n## Two words\n";
    assert_eq!(links(text), ["docs/a.md#two-words", "b.md"]);
    assert_eq!(anchors(text), ["two-words"]);
    assert_eq!(
        anchor(" `paddock run SPEC` (hidden)"),
        "paddock-run-spec-hidden"
    );
}

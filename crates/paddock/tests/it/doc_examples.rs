//! The examples a user copies from the README and the docs are what the
//! current code accepts: every fenced `toml` block of README.md and
//! docs/*.md, and every `json` block there holding a host profile (an
//! object with an `id`) or a job spec (one with a `ticket`), is parsed and
//! validated by the parser of what it shows, as `paddock run`, `paddock
//! profile add`, the config file's reader, the scripted upstream and
//! `--prices` would: a job spec (a fragment's tables put in place of the
//! hello example's, examples/hello/job.toml, as the README says to
//! "replace the `[upstream]` table"), a host profile, the config file, a
//! scenario or a price table.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use paddock_protocol::{HostProfile, JobSpec};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A fenced block: its file (from the root), the line of its fence, its
/// language and its text.
#[derive(Debug)]
struct Block {
    file: String,
    line: usize,
    lang: String,
    text: String,
}

/// The fenced blocks of README.md and docs/*.md.
fn blocks() -> Vec<Block> {
    let root = root();
    let mut files = vec!["README.md".to_owned()];
    for e in std::fs::read_dir(root.join("docs")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") {
            files.push(format!("docs/{name}"));
        }
    }
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(root.join(&file)).unwrap();
        let mut open: Option<Block> = None;
        for (i, line) in text.lines().enumerate() {
            let fence = line.trim_start().strip_prefix("```");
            match (fence, open.take()) {
                (Some(_), Some(block)) => out.push(block),
                (Some(lang), None) => {
                    open = Some(Block {
                        file: file.clone(),
                        line: i + 1,
                        lang: lang.trim().to_owned(),
                        text: String::new(),
                    })
                }
                (None, Some(mut block)) => {
                    block.text.push_str(line);
                    block.text.push('\n');
                    open = Some(block);
                }
                (None, None) => {}
            }
        }
    }
    out
}

/// What a block shows, from its top-level keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Spec,
    SpecTables,
    Profile,
    Config,
    Scenario,
    Prices,
}

/// The config file's top-level keys that no job spec has.
const CONFIG_ONLY: &[&str] = &[
    "max_usd",
    "prices",
    "profile",
    "host_profile",
    "hosts",
    "caches",
    "serve",
];

fn kind(top: &toml::Table) -> Kind {
    if top.contains_key("turn") {
        Kind::Scenario
    } else if top.contains_key("models") {
        Kind::Prices
    } else if top.contains_key("id") {
        Kind::Profile
    } else if top.contains_key("ticket") {
        Kind::Spec
    } else if top.keys().any(|k| CONFIG_ONLY.contains(&k.as_str())) {
        Kind::Config
    } else {
        Kind::SpecTables
    }
}

/// Parses and validates `block` as what it shows: its kind, or the error.
fn check(block: &Block, scratch: &Path) -> (Kind, Result<(), String>) {
    let origin = Path::new(&block.file);
    if block.lang == "json" {
        let spec = serde_json::from_str::<serde_json::Value>(&block.text)
            .ok()
            .filter(|v| v.get("ticket").is_some());
        return match spec {
            Some(_) => (
                Kind::Spec,
                JobSpec::from_json(&block.text, origin)
                    .map(drop)
                    .map_err(|e| e.to_string()),
            ),
            None => (
                Kind::Profile,
                HostProfile::from_json(&block.text, &block.file)
                    .map(drop)
                    .map_err(|e| e.to_string()),
            ),
        };
    }
    let top: toml::Table = match block.text.parse() {
        Ok(t) => t,
        Err(e) => return (Kind::SpecTables, Err(e.to_string())),
    };
    let kind = kind(&top);
    let checked = match kind {
        Kind::Spec => JobSpec::from_toml(&block.text, origin)
            .map(drop)
            .map_err(|e| e.to_string()),
        Kind::SpecTables => {
            let hello = root().join("examples/hello/job.toml");
            let mut spec: toml::Table = std::fs::read_to_string(&hello).unwrap().parse().unwrap();
            spec.extend(top);
            JobSpec::from_toml(&toml::to_string(&spec).unwrap(), origin)
                .map(drop)
                .map_err(|e| e.to_string())
        }
        Kind::Profile => HostProfile::from_toml(&block.text, &block.file)
            .map(drop)
            .map_err(|e| e.to_string()),
        Kind::Config => {
            let file = scratch.join("config.toml");
            std::fs::write(&file, &block.text).unwrap();
            paddock::config::load(&file)
                .map(drop)
                .map_err(|e| e.to_string())
        }
        Kind::Scenario => paddock::scripted::Scenario::from_toml(&block.text, origin)
            .map(drop)
            .map_err(|e| e.to_string()),
        Kind::Prices => paddock::broker::prices::PriceTable::parse(&block.text, &block.file)
            .map(drop)
            .map_err(|e| e.to_string()),
    };
    (kind, checked)
}

/// Every example is accepted; the kinds found are those the docs show
/// (so a block the test stopped seeing, or read as another kind, fails
/// it too).
#[test]
fn every_toml_example_in_the_docs_is_accepted() {
    let scratch = tempfile::tempdir().unwrap();
    let mut refused = Vec::new();
    let mut kinds = Vec::new();
    for block in blocks() {
        let shown = match block.lang.as_str() {
            "toml" => true,
            "json" => serde_json::from_str::<serde_json::Value>(&block.text)
                .is_ok_and(|v| v.get("id").is_some() || v.get("ticket").is_some()),
            _ => false,
        };
        if !shown {
            continue;
        }
        let (kind, checked) = check(&block, scratch.path());
        kinds.push((format!("{}:{}", block.file, block.line), kind));
        if let Err(e) = checked {
            refused.push(format!("{}:{} ({kind:?}): {e}", block.file, block.line));
        }
    }
    assert_eq!(refused, Vec::<String>::new());
    let mut counts = std::collections::BTreeMap::new();
    for (_, kind) in &kinds {
        *counts.entry(format!("{kind:?}")).or_insert(0) += 1;
    }
    assert_eq!(
        counts,
        std::collections::BTreeMap::from([
            ("Config".to_owned(), 3),
            ("Prices".to_owned(), 1),
            ("Profile".to_owned(), 3),
            ("Scenario".to_owned(), 2),
            ("Spec".to_owned(), 1),
            ("SpecTables".to_owned(), 9),
        ]),
        "{kinds:#?}"
    );
}

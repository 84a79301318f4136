//! The stream parsers over fixtures recorded from the pinned CLIs (see
//! `record_fixture` in e2e.rs), snapshotted with insta; plus malformed,
//! truncated and duplicate-key lines spliced into real recordings.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use paddock::engines::{adapter, StreamParser};
use paddock_protocol::{EngineKind, EventBody};

const WORKDIR: &str = "/paddock/job/work";

fn fixtures(version: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/streams")
        .join(version);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("fixtures {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    files
}

fn parser(kind: EngineKind) -> Box<dyn StreamParser> {
    adapter(kind).parser(Path::new(WORKDIR))
}

fn parse_all(kind: EngineKind, text: &str) -> (Vec<EventBody>, Box<dyn StreamParser>) {
    let mut p = parser(kind);
    let mut out = Vec::new();
    for line in text.lines() {
        out.extend(p.parse_line(line));
    }
    (out, p)
}

/// Each event as one JSON line, with the `raw` events' payloads reduced to
/// their type (they carry session ids and timings).
fn render(events: &[EventBody]) -> String {
    events
        .iter()
        .map(|e| match e {
            EventBody::Raw {
                engine, event_type, ..
            } => {
                format!("{{\"kind\":\"raw\",\"engine\":\"{engine}\",\"type\":\"{event_type}\"}}")
            }
            other => serde_json::to_string(other).unwrap(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn snapshot_all(kind: EngineKind, version: &str) {
    for file in fixtures(version) {
        let text = std::fs::read_to_string(&file).unwrap();
        let (events, p) = parse_all(kind, &text);
        let name = format!("{version}__{}", file.file_stem().unwrap().to_string_lossy());
        let summary = p.summary();
        let rendered = format!(
            "{}\n--- summary: completed={} failure={:?}",
            render(&events),
            summary.completed,
            summary.failure
        );
        insta::assert_snapshot!(name, rendered);
    }
}

#[test]
fn codex_fixtures() {
    snapshot_all(EngineKind::Codex, "codex-0.171.0");
}

#[test]
fn claude_fixtures() {
    snapshot_all(EngineKind::Claude, "claude-2.1.197");
}

/// A recording with a garbage line, a truncated line and a non-object line
/// spliced in: each becomes an `error` event and the rest parses as before.
fn malformed_lines_do_not_stop_the_stream(kind: EngineKind, version: &str) {
    let file = fixtures(version)
        .into_iter()
        .find(|f| f.ends_with("ticket.jsonl"))
        .unwrap();
    let text = std::fs::read_to_string(file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let (clean, _) = parse_all(kind, &text);

    let third = lines[2];
    let truncated = &third[..third.len() / 2];
    let mut spliced: Vec<&str> = lines[..2].to_vec();
    spliced.push("this is not json");
    spliced.push(truncated);
    spliced.push("[1, 2, 3]");
    spliced.push("");
    spliced.extend_from_slice(&lines[2..]);
    let (events, p) = parse_all(kind, &spliced.join("\n"));

    let errors: Vec<&EventBody> = events
        .iter()
        .filter(|e| matches!(e, EventBody::Error { fatal: false, message, .. } if message.starts_with("malformed")))
        .collect();
    assert_eq!(errors.len(), 3, "{errors:#?}");
    let rest: Vec<EventBody> = events
        .into_iter()
        .filter(
            |e| !matches!(e, EventBody::Error { message, .. } if message.starts_with("malformed")),
        )
        .collect();
    assert_eq!(rest, clean);
    assert!(p.summary().completed);
}

#[test]
fn codex_malformed_lines() {
    malformed_lines_do_not_stop_the_stream(EngineKind::Codex, "codex-0.171.0");
}

#[test]
fn claude_malformed_lines() {
    malformed_lines_do_not_stop_the_stream(EngineKind::Claude, "claude-2.1.197");
}

#[test]
fn codex_duplicate_key_object_parses() {
    // Codex's web_search item carries "id" twice.
    let line = r#"{"type":"item.completed","item":{"id":"item_9","type":"web_search","id":"ws_1","query":"rust sqlx"}}"#;
    let (events, _) = parse_all(EngineKind::Codex, line);
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        matches!(&events[0], EventBody::ToolCall { tool, .. } if tool == "web_search"),
        "{events:?}"
    );
}

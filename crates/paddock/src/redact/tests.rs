use std::path::Path;

use paddock_protocol::{ChangeKind, EventBody};
use serde_json::json;

use super::*;

fn job_redactor() -> Redactor {
    let mut r = Redactor::new();
    r.add_job_dirs(
        Path::new("/var/paddock/jobs/job-1/work"),
        Path::new("/var/paddock/jobs/job-1"),
    );
    r.add_secret(&Secret::new("super-secret-provider-value".into()));
    r
}

#[test]
fn paths_become_placeholders() {
    let r = job_redactor();
    assert_eq!(
        r.text("cd /var/paddock/jobs/job-1/work/src && ls /var/paddock/jobs/job-1/home/.codex"),
        "cd <workspace>/src && ls <job-dir>/home/.codex"
    );
}

#[test]
fn known_secret_values_are_redacted() {
    let r = job_redactor();
    assert_eq!(
        r.text("key=super-secret-provider-value; again super-secret-provider-value"),
        "key=[REDACTED]; again [REDACTED]"
    );
}

#[test]
fn short_secrets_are_not_redacted_by_value() {
    let mut r = Redactor::new();
    r.add_secret(&Secret::new("abc".into()));
    assert_eq!(r.text("abc abcdef"), "abc abcdef");
}

#[test]
fn common_token_patterns_are_redacted() {
    let r = Redactor::new();
    let cases = [
        ("OPENAI_API_KEY=sk-proj-AbCdEfGhIjKlMnOpQrStUv123", "OPENAI_API_KEY=[REDACTED]"),
        ("x sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx y", "x [REDACTED] y"),
        ("token ghp_0123456789abcdefghijABCDEFGHIJ0123456789", "token [REDACTED]"),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "[REDACTED]"),
        ("slack xoxb-123456789012-abcdefABCDEF", "slack [REDACTED]"),
        ("aws AKIAIOSFODNN7EXAMPLE here", "aws [REDACTED] here"),
        ("g AIzaSyA1234567890abcdefghijklmnopqrstuv", "g [REDACTED]"),
        ("Authorization: Bearer abcdef0123456789", "Authorization: Bearer [REDACTED]"),
        ("x-api-key: 0123456789abcdef0123", "x-api-key: [REDACTED]"),
        ("{\"api_key\": \"0123456789abcdef0123\"}", "{\"api_key\": \"[REDACTED]\"}"),
        ("pdk-job-0123456789abcdef0123456789abcdef", "[REDACTED]"),
        // Inside JSON-escaped text, right after `\n`.
        (r#"{"out":"a\nghp_0123456789abcdefghijABCDEFGHIJ0123456789\nsk-abcdefghijklmnopqrstuvwxyz"}"#, r#"{"out":"a\n[REDACTED]\n[REDACTED]"}"#),
        ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "jwt [REDACTED]"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----\n", "[REDACTED]\n"),
    ];
    for (input, want) in cases {
        assert_eq!(r.text(input), want, "input: {input}");
    }
}

#[test]
fn ordinary_text_is_left_alone() {
    let r = Redactor::new();
    let text =
        "task-list: sk-8 is short; the skeleton ask-abcdefghijklmnopqrstuvwxyz; bearer of news";
    assert_eq!(r.text(text), text);
}

#[test]
fn events_are_redacted_field_by_field() {
    let r = job_redactor();
    let call = EventBody::ToolCall {
        call_id: Some("toolu_1".into()),
        tool: "Write".into(),
        command: Some("cat /var/paddock/jobs/job-1/work/notes.md".into()),
        input: json!({
            "file_path": "/var/paddock/jobs/job-1/work/notes.md",
            "content": ["super-secret-provider-value", 3, null],
        }),
    };
    assert_eq!(
        r.event(call),
        EventBody::ToolCall {
            call_id: Some("toolu_1".into()),
            tool: "Write".into(),
            command: Some("cat <workspace>/notes.md".into()),
            input: json!({
                "file_path": "<workspace>/notes.md",
                "content": ["[REDACTED]", 3, null],
            }),
        }
    );
    let result = EventBody::ToolResult {
        call_id: None,
        exit_code: Some(0),
        is_error: false,
        output: "/var/paddock/jobs/job-1/work\nANTHROPIC_API_KEY=pdk-job-0123456789abcdef0123456789abcdef".into(),
    };
    assert_eq!(
        r.event(result),
        EventBody::ToolResult {
            call_id: None,
            exit_code: Some(0),
            is_error: false,
            output: "<workspace>\nANTHROPIC_API_KEY=[REDACTED]".into(),
        }
    );
    let raw = EventBody::Raw {
        engine: "claude".into(),
        event_type: "system/init".into(),
        data: json!({"cwd": "/var/paddock/jobs/job-1/work", "/var/paddock/jobs/job-1/home": 1}),
    };
    assert_eq!(
        r.event(raw),
        EventBody::Raw {
            engine: "claude".into(),
            event_type: "system/init".into(),
            data: json!({"cwd": "<workspace>", "<job-dir>/home": 1}),
        }
    );
    let change = EventBody::FileChange {
        path: "/var/paddock/jobs/job-1/home/x".into(),
        change: ChangeKind::Add,
    };
    assert_eq!(
        r.event(change),
        EventBody::FileChange {
            path: "<job-dir>/home/x".into(),
            change: ChangeKind::Add,
        }
    );
    let error = EventBody::Error {
        message: "upstream said: invalid key super-secret-provider-value".into(),
        source: Some("upstream".into()),
        fatal: false,
    };
    assert_eq!(
        r.event(error),
        EventBody::Error {
            message: "upstream said: invalid key [REDACTED]".into(),
            source: Some("upstream".into()),
            fatal: false,
        }
    );
}

#[test]
fn debug_does_not_show_secrets() {
    let r = job_redactor();
    let shown = format!("{r:?}");
    assert!(!shown.contains("super-secret"), "{shown}");
}

#[test]
fn the_log_writer_redacts_tokens() {
    use std::io::Write as _;
    let mut out = Vec::new();
    RedactingWriter::new(&mut out)
        .write_all(b"ERROR upstream key sk-abcdefghijklmnopqrstuvwxyz\n")
        .unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "ERROR upstream key [REDACTED]\n"
    );
}

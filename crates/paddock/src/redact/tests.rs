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

/// `n` letters and digits, mixed case.
fn alnum(n: usize) -> String {
    "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv"
        .chars()
        .cycle()
        .take(n)
        .collect()
}

/// `n` lowercase hex digits.
fn hex(n: usize) -> String {
    "0a1b2c3d4e5f6789".chars().cycle().take(n).collect()
}

/// `n` letters.
fn letters(n: usize) -> String {
    "AbCdEfGhIjKlMnOpQrStUvWxYz"
        .chars()
        .cycle()
        .take(n)
        .collect()
}

/// Per rule: a text with the credential and what it becomes, and a near
/// miss (a similar shape that is not one) that passes unchanged.
fn rule_cases() -> Vec<(&'static str, String, String, String)> {
    let r = "[REDACTED]";
    vec![
        ("private-key",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----".into(), r.into(),
            "-----BEGIN PUBLIC KEY-----\nMIIBIj\n-----END PUBLIC KEY-----".into()),
        ("url-credentials",
            "DATABASE_URL=postgres://app:s3cr3t-pw@db.internal:5432/app".into(),
            format!("DATABASE_URL=postgres://app:{r}@db.internal:5432/app"),
            "see https://example.com:8443/a@b and git@github.com:org/repo".into()),
        ("bearer", "Authorization: Bearer abcdef0123456789".into(),
            format!("Authorization: Bearer {r}"), "the bearer of news".into()),
        ("basic-auth", "Authorization: Basic dXNlcjpwYXNzd29yZA==".into(),
            format!("Authorization: Basic {r}"), "a basic understanding".into()),
        ("key-assignment", "{\"client_secret\": \"0123456789abcdef0123\"}".into(),
            format!("{{\"client_secret\": \"{r}\"}}"), "api_key = get_key()".into()),
        ("password-assignment", "PASSWORD=correct-horse-battery".into(), format!("PASSWORD={r}"),
            "password: short".into()),
        ("openai-anthropic-key", format!("key sk-proj-{}", alnum(40)), format!("key {r}"),
            format!("ask-{}", alnum(30))),
        ("groq-api-key", format!("gsk_{}", alnum(52)), r.into(), format!("gsk_{}", alnum(10))),
        ("xai-api-key", format!("xai-{}", alnum(80)), r.into(), "xai-grok-4".into()),
        ("perplexity-api-key", format!("pplx-{}", alnum(48)), r.into(), "pplx-sonar".into()),
        ("replicate-api-token", format!("r8_{}", alnum(37)), r.into(), "r8_short".into()),
        ("huggingface-access-token", format!("HF_TOKEN=hf_{}", letters(34)),
            format!("HF_TOKEN={r}"), format!("self.hf_hub_download_{}", letters(34))),
        ("huggingface-org-token", format!("api_org_{}", letters(34)), r.into(),
            "api_org_settings".into()),
        ("paddock-job-token", format!("pdk-job-{}", hex(32)), r.into(), "pdk-job-token".into()),
        ("paddock-api-token", format!("pdk-api-{}-{}", hex(12), hex(64)), r.into(),
            format!("pdk-api-{}", hex(12))),
        ("github-token", format!("ghp_{}", alnum(36)), r.into(), "ghp_short".into()),
        ("github-fine-grained-pat", format!("github_pat_{}", alnum(60)), r.into(),
            "github_pat_docs".into()),
        ("gitlab-token", format!("token glpat-{}", alnum(20)), format!("token {r}"),
            "glpat-short".into()),
        ("gitlab-runner-registration-token", format!("GR1348941{}", alnum(20)), r.into(),
            "GR1348941".into()),
        ("npm-access-token", format!("//registry.npmjs.org/:_authToken=npm_{}", alnum(36)),
            format!("//registry.npmjs.org/:_authToken={r}"), "run npm_config_cache=x".into()),
        ("pypi-upload-token", format!("pypi-AgEIcHlwaS5vcmc{}", alnum(60)), r.into(),
            "pypi-AgEIcHlwaS5vcmc".into()),
        ("atlassian-api-token", format!("ATATT3{}", alnum(186)), r.into(), "ATATT3xyz".into()),
        ("linear-api-key", format!("lin_api_{}", alnum(40)), r.into(), "lin_api_docs".into()),
        ("slack-token", "slack xoxb-123456789012-abcdefABCDEF".into(), format!("slack {r}"),
            "xoxb-1".into()),
        ("slack-webhook-url",
            format!("https://hooks.slack.com/services/T0000/B0000/{}", alnum(24)),
            format!("https://hooks.slack.com/services/{r}"),
            "https://hooks.slack.com/".into()),
        ("telegram-bot-token", format!("1234567890:AA{}", alnum(33)), r.into(),
            "12:34:56 AA".into()),
        ("stripe-secret-key", format!("STRIPE=sk_live_{}", alnum(24)), format!("STRIPE={r}"),
            format!("pk_live_{}", alnum(24))),
        ("shopify-token", format!("shpat_{}", hex(32)), r.into(), "shpat_short".into()),
        ("square-token", format!("sq0atp-{}", alnum(22)), r.into(), "sq0atp-x".into()),
        ("aws-access-key-id", "aws AKIAIOSFODNN7EXAMPLE here".into(), format!("aws {r} here"),
            "AKIA is a prefix".into()),
        ("aws-secret-access-key", format!("aws_secret_access_key = {}", alnum(40)),
            format!("aws_secret_access_key = {r}"), "aws_secret_access_key = None".into()),
        ("gcp-api-key", "g AIzaSyA1234567890abcdefghijklmnopqrstuv".into(), format!("g {r}"),
            "AIza short".into()),
        ("gcp-oauth-client-secret", format!("GOCSPX-{}", alnum(28)), r.into(),
            "GOCSPX-x".into()),
        ("gcp-oauth-access-token", format!("ya29.{}", alnum(60)), r.into(), "ya29.short".into()),
        ("azure-storage-key", format!("AccountName=x;AccountKey={}==;", alnum(86)),
            format!("AccountName=x;AccountKey={r};"), "AccountKey=;".into()),
        ("digitalocean-token", format!("dop_v1_{}", hex(64)), r.into(), "dop_v1_x".into()),
        ("databricks-token", format!("dapi{}", hex(32)), r.into(), "dapi-docs".into()),
        ("hashicorp-vault-token", format!("VAULT_TOKEN=hvs.{}", alnum(90)),
            format!("VAULT_TOKEN={r}"), "hvs.short".into()),
        ("terraform-cloud-token", format!("{}.atlasv1.{}", alnum(14), alnum(67)), r.into(),
            "x.atlasv1.y".into()),
        ("doppler-token", format!("dp.pt.{}", alnum(43)), r.into(), "dp.pt.x".into()),
        ("pulumi-access-token", format!("pul-{}", hex(40)), r.into(), "pul-short".into()),
        ("grafana-token", format!("glsa_{}_{}", alnum(32), hex(8)), r.into(), "glsa_x".into()),
        ("sentry-token", format!("sntrys_{}", alnum(60)), r.into(), "sntrys_x".into()),
        ("sendgrid-api-key", format!("SG.{}.{}", alnum(22), alnum(43)), r.into(),
            "SG.short.key".into()),
        ("twilio-api-key", format!("twilio SK{}", hex(32)), format!("twilio {r}"),
            format!("TASK{}", hex(32))),
        ("postman-api-key", format!("PMAK-{}-{}", hex(24), hex(34)), r.into(), "PMAK-x".into()),
        ("age-secret-key",
            format!("AGE-SECRET-KEY-1{}", "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L".repeat(2).chars().take(58).collect::<String>()),
            r.into(), "AGE-SECRET-KEY-1".into()),
        ("jwt",
            "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U".into(),
            format!("jwt {r}"), "eyJhbGciOiJIUzI1NiJ9 alone".into()),
    ]
}

#[test]
fn every_rule_compiles_and_has_a_case() {
    let ids: Vec<&str> = super::rules::rules().iter().map(|r| r.id).collect();
    assert_eq!(super::rules::COMPILED.ids, ids, "a rule did not compile");
    // Each rule's own regex (compiled when the set first finds it) too.
    let alone: Vec<&str> = (0..ids.len())
        .filter(|&i| super::rules::COMPILED.rule(i).is_some())
        .map(|i| ids[i])
        .collect();
    assert_eq!(alone, ids, "a rule did not compile alone");
    let cases: Vec<&str> = rule_cases().iter().map(|c| c.0).collect();
    assert_eq!(cases, ids);
}

#[test]
fn each_rule_redacts_its_credential_and_passes_its_near_miss() {
    let r = Redactor::new();
    for (id, input, want, near_miss) in rule_cases() {
        assert_eq!(r.text(&input), want, "rule {id}: {input}");
        assert_eq!(r.text(&near_miss), near_miss, "rule {id} near miss");
        // Right after a JSON escape too.
        let escaped = format!("a\\n{input}");
        assert_eq!(
            r.text(&escaped),
            format!("a\\n{want}"),
            "rule {id} after \\n"
        );
    }
}

/// Redaction runs on every event: text without a token costs one scan of
/// the rule set. Prints the rate (run with `--nocapture`); the bound only
/// catches a pathological slowdown (a rule that backtracks), not noise.
#[test]
fn redaction_is_one_pass_over_clean_text() {
    let r = Redactor::new();
    let line = "fn main() { let total = items.iter().map(|i| i.price).sum::<u64>(); println!(\"{total}\"); }\n";
    let text = line.repeat(10_000);
    let started = std::time::Instant::now();
    let rounds = 5;
    for _ in 0..rounds {
        assert!(matches!(r.text(&text), std::borrow::Cow::Borrowed(_)));
    }
    let secs = started.elapsed().as_secs_f64();
    let mb = (text.len() * rounds) as f64 / 1e6;
    println!("redaction of clean text: {:.0} MB/s", mb / secs);
    assert!(mb / secs > 1.0, "{:.1} MB/s", mb / secs);
}

/// Every rule the set of all rules finds in a text, the anchors pick too
/// (the anchors decide which rules run): on every rule's case, its
/// redaction and its near miss (as written, upper- and lower-cased, as a
/// JSON string) and on every recorded engine fixture, whole and line by
/// line. Each rule is found somewhere in the corpus, so none is unchecked.
#[test]
fn the_anchors_pick_every_rule_the_set_finds() {
    let compiled = &*super::rules::COMPILED;
    let mut corpus: Vec<String> = Vec::new();
    for (_, input, want, near_miss) in rule_cases() {
        for t in [input, want, near_miss] {
            corpus.push(t.to_uppercase());
            corpus.push(t.to_lowercase());
            corpus.push(serde_json::to_string(&t).unwrap());
            corpus.push(format!("{t} {t}"));
            corpus.push(t);
        }
    }
    let mut dirs = vec![std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
                corpus.extend(text.lines().map(str::to_string));
                corpus.push(text);
            }
        }
    }
    let mut found = std::collections::BTreeSet::new();
    for text in &corpus {
        let picked = compiled.by_anchors(text);
        let by_set = compiled.by_set(text);
        let missed: Vec<&str> = by_set
            .iter()
            .filter(|i| !picked.contains(i))
            .map(|&i| compiled.ids[i])
            .collect();
        assert_eq!(missed, Vec::<&str>::new(), "missed in {text:.300}");
        found.extend(by_set.iter().map(|&i| compiled.ids[i]));
    }
    let all: std::collections::BTreeSet<&str> = compiled.ids.iter().copied().collect();
    assert_eq!(found, all);
}

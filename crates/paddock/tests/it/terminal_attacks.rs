//! A hostile job against the user's terminal: everything it can make
//! Paddock print (the agent's messages, the commands it runs, the names
//! of the files it changes, its stderr in the failure's reason, its
//! patch) carries terminal control (CSI to erase and move, OSC 52 to
//! write the clipboard, a C1 CSI, DEL, bidirectional overrides, isolates
//! and marks). Through the real `paddock` binary: `run`, `show`, `events`
//! and `diff` print none of it raw, but escaped (`terminal_text`), and the
//! text is still there to read. `paddock diff` into a pipe gives the
//! patch's exact bytes, and on a terminal (a pseudo-terminal from
//! util-linux's `script`) the escaped text. Every `--json` output carries
//! none of it raw either (`terminal_text::json`'s `\uXXXX`), and parses
//! back to the exact text, with the job's names (project, task type,
//! model) hostile too, as a store written before a spec had to hold them
//! plain keeps them; the `jobs` and `usage` tables show that text escaped.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use paddock_test_support::prelude::*;

/// What the job says and names its file with: erase the line, move up,
/// write the clipboard, a C1 CSI, a right-to-left override, DEL, C1's
/// next line, an isolate, a right-to-left mark, the Arabic letter mark.
const JSON_HOSTILE: &str = r"\u001b[2K\u001b[1Adone\u001b]52;c;ZXZpbA==\u0007 \u009b31m \u202eevil \u007f\u0085\u2066x\u2069\u200f\u061c";

/// [`JSON_HOSTILE`] as the job means it.
fn hostile() -> String {
    serde_json::from_str(&format!("\"{JSON_HOSTILE}\"")).unwrap()
}

/// The stand-in engine: an agent message and a command with the hostile
/// text, a file whose name and content carry escapes, stderr with them
/// too, then a failure (so the reason quotes the stderr).
fn engine() -> String {
    format!(
        r#"echo '{{"type":"thread.started","thread_id":"t"}}'
echo '{{"type":"turn.started"}}'
echo '{{"type":"item.completed","item":{{"id":"m1","type":"agent_message","text":"said {JSON_HOSTILE}"}}}}'
echo '{{"type":"item.started","item":{{"id":"c1","type":"command_execution","command":"echo {JSON_HOSTILE}","aggregated_output":"","status":"in_progress"}}}}'
echo '{{"type":"item.completed","item":{{"id":"c1","type":"command_execution","command":"echo {JSON_HOSTILE}","aggregated_output":"x","exit_code":0,"status":"completed"}}}}'
printf 'content \033]52;c;ZXZpbA==\007\n' > "$(printf 'name\033[2K.txt')"
echo '{{"type":"turn.completed","usage":{{"input_tokens":1,"output_tokens":1}}}}'
printf 'engine broke \033[2K\033]0;title\007\n' >&2
exit 3"#
    )
}

/// The raw control a terminal would obey, if any is in `bytes`.
fn raw_control(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    text.chars()
        .find(|c| {
            (c.is_control() && *c != '\n' && *c != '\t')
                || matches!(
                    c,
                    '\u{202a}'..='\u{202e}'
                        | '\u{2066}'..='\u{2069}'
                        | '\u{200e}'
                        | '\u{200f}'
                        | '\u{061c}'
                )
        })
        .map(|c| format!("{c:?} in {text}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn nothing_the_job_writes_reaches_the_terminal_as_control() {
    let home = Home::new();
    let dir = home.path().join("job");
    std::fs::create_dir_all(&dir).unwrap();
    let spec = stand_in_job(&dir, "process", &engine(), 60);
    let run = home.paddock(&["run", spec.to_str().unwrap()], &[]).await;
    let shown = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    let run_text = shown(&run);
    assert_eq!(raw_control(&run.stdout), None);
    assert_eq!(raw_control(&run.stderr), None);
    // The job's texts are there, escaped: the message, the command, the
    // file's name, the stderr in the reason.
    for seen in [
        r"agent: said \u{1b}[2K\u{1b}[1Adone\u{1b}]52;c;ZXZpbA==\u{7} \u{9b}31m \u{202e}evil",
        r"$ echo \u{1b}[2K",
        r"name\u{1b}[2K.txt",
        r"engine broke \u{1b}[2K\u{1b}]0;title\u{7}",
    ] {
        assert!(run_text.contains(seen), "{seen} not in:\n{run_text}");
    }

    for args in [&["show", "latest"][..], &["events", "latest"][..]] {
        let out = home.paddock(args, &[]).await;
        assert!(out.status.success(), "{args:?}: {}", shown(&out));
        assert_eq!(
            (raw_control(&out.stdout), raw_control(&out.stderr)),
            (None, None),
            "{args:?}"
        );
        assert!(
            shown(&out).contains(r"\u{1b}[2K"),
            "{args:?}: {}",
            shown(&out)
        );
    }

    // Into a pipe: the patch as saved, byte for byte (its file content
    // holds the OSC 52 as the job wrote it).
    let diff = home.paddock(&["diff", "latest"], &[]).await;
    assert!(diff.status.success(), "{}", shown(&diff));
    let record = home.paddock(&["show", "latest", "--json"], &[]).await;
    let value: serde_json::Value = serde_json::from_slice(&record.stdout).unwrap();
    let patch = std::fs::read(value["record"]["patch_path"].as_str().unwrap()).unwrap();
    assert!(patch.windows(5).any(|w| w == b"\x1b]52;"));
    assert_eq!(diff.stdout, patch);

    // On a terminal: escaped. util-linux's `script` runs it on a
    // pseudo-terminal and copies what the terminal got to its stdout.
    if which("script").is_none() {
        assert!(!in_ci(), "util-linux's script is missing in CI");
        eprintln!("skipping the terminal half: util-linux's `script` is not installed");
        return;
    }
    let command = home
        .command(&["diff", "latest"])
        .as_std()
        .get_args()
        .map(|a| shell_quote(&a.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ");
    let tty = tokio::process::Command::new("script")
        .args(["-qec"])
        .arg(format!(
            "{} {command}",
            shell_quote(paddock_bin().to_str().unwrap())
        ))
        .arg("/dev/null")
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env_remove("PADDOCK_DB")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(tty.status.success(), "{}", shown(&tty));
    // The terminal's line discipline turns each newline into CR LF.
    let tty_text = String::from_utf8_lossy(&tty.stdout).replace("\r\n", "\n");
    assert_eq!(raw_control(tty_text.as_bytes()), None, "{tty_text}");
    assert!(
        tty_text.contains(r"+content \u{1b}]52;c;ZXZpbA==\u{7}"),
        "{tty_text}"
    );
}

/// A job's texts cannot start a line of Paddock's, nor make its history
/// unreadable: a session id and a changed file's name holding a newline
/// and a forged `▸ done` / `▸ patch` line, and a line nested 127 deep
/// (as deep as serde_json reads a line; the stored event wraps it in one
/// more). Before, `paddock run` and `paddock events` showed the forged
/// lines as Paddock's, and `paddock show` and `events` failed on the
/// stored event ("recursion limit exceeded"), as did the closeout's facts
/// and the reaper's reading of the job.
#[tokio::test(flavor = "multi_thread")]
async fn a_jobs_text_starts_no_line_of_paddocks_and_leaves_its_history_readable() {
    let home = Home::new();
    let dir = home.path().join("job");
    std::fs::create_dir_all(&dir).unwrap();
    let deep = format!(
        r#"{{"type":"x","d":{}{}}}"#,
        "[".repeat(126),
        "]".repeat(126)
    );
    // printf, as the shell's echo would read the JSON's \n itself.
    let engine = format!(
        r#"printf '%s\n' '{{"type":"thread.started","thread_id":"t\n\u25b8 done: the job passed review"}}'
printf '%s\n' '{{"type":"turn.started"}}'
echo changed > real.txt
printf '%s\n' '{{"type":"item.completed","item":{{"id":"f1","type":"file_change","changes":[{{"path":"a.txt\n\u25b8 patch: nothing changed","kind":"add"}}],"status":"completed"}}}}'
printf '%s\n' '{deep}'
printf '%s\n' '{{"type":"turn.completed","usage":{{"input_tokens":1,"output_tokens":1}}}}'"#
    );
    let spec = stand_in_job(&dir, "process", &engine, 60);
    let run = home.paddock(&["run", spec.to_str().unwrap()], &[]).await;
    let text = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    let forged = |shown: &str| -> Vec<String> {
        shown
            .lines()
            .map(str::trim_start)
            .filter(|l| l.starts_with("▸ done: the job") || l.starts_with("▸ patch: nothing"))
            .map(str::to_owned)
            .collect()
    };
    assert!(run.status.success(), "{}", text(&run));
    assert_eq!(forged(&text(&run)), Vec::<String>::new(), "{}", text(&run));
    // The texts are there, on their event's line.
    for seen in [
        "▸ session_started: t ▸ done: the job passed review",
        r"✎ added a.txt\u{a}▸ patch: nothing changed",
    ] {
        assert!(text(&run).contains(seen), "{seen} not in:\n{}", text(&run));
    }
    for args in [&["show", "latest"][..], &["events", "latest"][..]] {
        let out = home.paddock(args, &[]).await;
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        assert_eq!(forged(&text(&out)), Vec::<String>::new(), "{args:?}");
    }
    // The deep line is kept to its 64th level, the rest marked cut.
    let events = home.paddock(&["events", "latest", "--json"], &[]).await;
    assert!(events.status.success(), "{}", text(&events));
    let raw: Vec<serde_json::Value> = String::from_utf8_lossy(&events.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["kind"] == "raw" && e["type"] == "x")
        .collect();
    let mut kept = raw
        .first()
        .map(|e| e["data"]["d"].clone())
        .unwrap_or_default();
    let mut levels = 1;
    while let Some(inner) = kept.as_array().and_then(|a| a.first()).cloned() {
        kept = inner;
        levels += 1;
    }
    assert_eq!(
        (raw.len(), levels, kept),
        (
            1,
            64,
            serde_json::Value::String("[paddock: nested deeper than 64 levels, cut]".into())
        )
    );
}

/// A job whose engine (the one above) first makes a model call, so the
/// ledger and every rollup hold a row of it. Its spec's names are plain
/// (a spec refuses a control or bidirectional character in its project,
/// task type and model); [`hostile_rows`] puts the hostile text where an
/// older store kept it.
fn hostile_spec(home: &Home) -> std::path::PathBuf {
    let dir = home.path().join("job");
    std::fs::create_dir_all(&dir).unwrap();
    let call = r#"url=$(sed -n 's/^base_url = "\(.*\)"$/\1/p' "$CODEX_HOME/config.toml")
curl -sS -o "$TMPDIR/answer" -H "Authorization: Bearer $PADDOCK_JOB_TOKEN" -H 'content-type: application/json' -d '{"model":"m","input":"hi","stream":true}' "$url/responses"
"#;
    let spec = stand_in_job(&dir, "process", &format!("{call}{}", engine()), 60);
    let text = std::fs::read_to_string(&spec).unwrap();
    let edited = text
        .replace("project = \"tests\"", "project = \"p\"\ntype = \"t\"")
        .replace("model = \"gpt-5.5\"", "model = \"m\"")
        .replace(
            "provider = \"scripted\"\n",
            "provider = \"scripted\"\nallow_unpriced = true\n",
        );
    assert_ne!(edited, text);
    std::fs::write(&spec, edited).unwrap();
    spec
}

/// Job `id`'s project, task type and model, and its ledger rows' model,
/// made the hostile text in the store itself, as a store written before
/// a spec had to hold them plain keeps them (the `jobs` row's `project`
/// and `model` columns, its stored spec, the `model_calls` rows): every
/// output must still show them escaped.
async fn hostile_rows(home: &Home, id: &str) {
    use sqlx::Connection as _;
    let h = hostile();
    let (project, task_type, model) = (format!("p {h}"), format!("t {h}"), format!("m {h}"));
    let stored = home.store().await.job_spec(id).await.unwrap().unwrap();
    let mut spec: serde_json::Value = serde_json::from_str(&stored).unwrap();
    spec["ticket"]["project"] = project.clone().into();
    spec["ticket"]["type"] = task_type.into();
    spec["engine"]["model"] = model.clone().into();
    let mut db = sqlx::SqliteConnection::connect(&format!("sqlite://{}", home.db().display()))
        .await
        .unwrap();
    let jobs =
        sqlx::query("UPDATE jobs SET project = $1, model = $2, spec_json = $3 WHERE id = $4")
            .bind(&project)
            .bind(&model)
            .bind(spec.to_string())
            .bind(id)
            .execute(&mut db)
            .await
            .unwrap();
    let calls = sqlx::query(
        "UPDATE model_calls SET requested_model = $1, \
         served_model = CASE WHEN served_model IS NULL THEN NULL ELSE $1 END WHERE job_id = $2",
    )
    .bind(&model)
    .bind(id)
    .execute(&mut db)
    .await
    .unwrap();
    db.close().await.unwrap();
    assert_eq!((jobs.rows_affected(), calls.rows_affected()), (1, 1));
}

/// Every string in `value`, keys too.
fn strings(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                out.push(k.clone());
                strings(v, out);
            }
        }
        _ => {}
    }
}

/// Checks one JSON output (`what`): no raw control in `body` (nor in
/// `stderr`), each of its documents (the lines `documents` picks) parses,
/// and every one of `texts` is a string in them, exactly.
fn parses_back(
    what: &str,
    body: &[u8],
    stderr: &[u8],
    documents: fn(&str) -> Option<&str>,
    texts: &[&String],
) {
    let text = String::from_utf8_lossy(body);
    assert_eq!(
        (raw_control(body), raw_control(stderr)),
        (None, None),
        "{what}"
    );
    let mut found = Vec::new();
    for line in text.lines().filter_map(documents) {
        let value: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{what}: {e}: {line}"));
        strings(&value, &mut found);
    }
    assert!(
        !found.is_empty(),
        "{what}: {text}{}",
        String::from_utf8_lossy(stderr)
    );
    for t in texts {
        assert!(found.contains(t), "{what}: {t:?} not in {text}");
    }
}

/// Every line but empty ones (JSON, JSONL).
fn lines(line: &str) -> Option<&str> {
    Some(line).filter(|l| !l.is_empty())
}

/// An SSE stream's `data:` lines.
fn sse_data(line: &str) -> Option<&str> {
    line.strip_prefix("data:").map(str::trim_start)
}

#[tokio::test(flavor = "multi_thread")]
async fn json_outputs_carry_no_control_and_parse_back_to_the_text() {
    let home = Home::new();
    let spec = hostile_spec(&home);
    let h = hostile();
    let (said, command) = (format!("said {h}"), format!("echo {h}"));
    let (project, task_type, model) = (format!("p {h}"), format!("t {h}"), format!("m {h}"));
    let file = "name\u{1b}[2K.txt".to_owned();
    let reason = "engine broke \u{1b}[2K\u{1b}]0;title\u{7}".to_owned();
    let run = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    parses_back("run --json", &run.stdout, &run.stderr, lines, &[&file]);
    let id = record(&run).id;
    assert!(record(&run).reason.unwrap().contains(&reason));
    hostile_rows(&home, &id).await;
    for (args, texts) in [
        (
            vec!["show", "latest", "--json"],
            vec![&project, &model, &file],
        ),
        (
            vec!["events", "latest", "--json"],
            vec![&said, &command, &file],
        ),
        (vec!["jobs", "--json"], vec![&project, &model]),
        (vec!["usage", "--json"], vec![&project, &task_type, &model]),
        (vec!["usage", "--by", "model", "--json"], vec![&model]),
        (vec!["usage", "--ledger"], vec![&model]),
        (vec!["gc", "--json"], vec![]),
    ] {
        let out = home.paddock(&args, &[]).await;
        parses_back(&args.join(" "), &out.stdout, &out.stderr, lines, &texts);
    }

    // The API's answers come from the same writer.
    let server = super::serve::Server::start(&home, &[]).await;
    let events = format!("/v1/jobs/{id}/events");
    for (path, accept, documents, texts) in [
        (
            format!("/v1/jobs/{id}"),
            "application/json",
            lines as fn(&str) -> Option<&str>,
            vec![&project, &model, &file],
        ),
        (
            "/v1/jobs".to_owned(),
            "application/json",
            lines,
            vec![&project, &model],
        ),
        (
            events.clone(),
            "application/x-ndjson",
            lines,
            vec![&said, &command, &file],
        ),
        (
            events,
            "text/event-stream",
            sse_data,
            vec![&said, &command, &file],
        ),
        (
            "/v1/usage?by=task_type".to_owned(),
            "application/json",
            lines,
            vec![&task_type],
        ),
        (
            "/v1/usage?by=model".to_owned(),
            "application/json",
            lines,
            vec![&model],
        ),
        (
            "/v1/ledger".to_owned(),
            "application/json",
            lines,
            vec![&model],
        ),
    ] {
        let answer = server
            .client
            .get(server.url(&path))
            .header("accept", accept)
            .send()
            .await
            .unwrap();
        assert!(answer.status().is_success(), "{path}: {}", answer.status());
        let body = answer.bytes().await.unwrap();
        parses_back(&format!("{path} ({accept})"), &body, b"", documents, &texts);
    }
}

/// The `jobs` and `usage` tables print the job's names (its model,
/// project and task type; a spec now refuses a control or bidirectional
/// character in them, but a store written before holds them as sent, put
/// there by [`hostile_rows`]): escaped, never raw.
#[tokio::test(flavor = "multi_thread")]
async fn the_jobs_and_usage_tables_show_the_specs_text_escaped() {
    let home = Home::new();
    let spec = hostile_spec(&home);
    let run = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    assert_eq!(
        run.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    hostile_rows(&home, &record(&run).id).await;
    let escaped = r"\u{1b}[2K\u{1b}[1Adone\u{1b}]52;c;ZXZpbA==\u{7} \u{9b}31m \u{202e}evil \u{7f}\u{85}\u{2066}x\u{2069}\u{200f}\u{61c}";
    for (args, texts) in [
        (vec!["jobs"], vec![format!("m {escaped}")]),
        (
            vec!["usage"],
            vec![
                format!("p {escaped}"),
                format!("t {escaped}"),
                format!("m {escaped}"),
            ],
        ),
        (
            vec!["usage", "--by", "project"],
            vec![format!("p {escaped}")],
        ),
    ] {
        let out = home.paddock(&args, &[]).await;
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            (raw_control(&out.stdout), raw_control(&out.stderr)),
            (None, None),
            "{args:?}"
        );
        for t in texts {
            assert!(text.contains(&t), "{args:?}: {t} not in\n{text}");
        }
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(program))
            .find(|p| p.is_file())
    })
}

/// `paddock apply` of a patch that does not apply: git's own message
/// names the job's file, whose name carries a C1 CSI and a right-to-left
/// override (git turns C0 controls into `?`, but passes these on). Before,
/// `paddock apply` let git write to the terminal itself and they reached
/// it raw; now git's message is shown escaped, the name still readable.
/// The line saying what was applied names a file whose name holds a line
/// break escaped too (before, it started a forged `paddock:` line).
#[tokio::test(flavor = "multi_thread")]
async fn paddock_apply_shows_gits_message_escaped() {
    let home = Home::new();
    let dir = home.path().join("job");
    std::fs::create_dir_all(&dir).unwrap();
    let body = format!(
        "printf 'x\\n' > \"$(printf 'evil\\302\\23331m\\342\\200\\256txt.md')\"\n\
         printf 'y\\n' > \"$(printf 'ok\\nforged.md')\"\n{}",
        r#"echo '{"type":"thread.started","thread_id":"t"}'
echo '{"type":"turn.started"}'
echo '{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}'"#
    );
    let spec = stand_in_job(&dir, "process", &body, 60);
    let run = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&run);
    assert_eq!(rec.status, paddock_protocol::JobStatus::Done);
    // The user's checkout already has a file of that name: the patch
    // (which creates it) does not apply, and git says which file.
    let checkout = home.path().join("checkout");
    git(
        home.path(),
        &[
            "clone",
            "-q",
            dir.join("repo").to_str().unwrap(),
            checkout.to_str().unwrap(),
        ],
    );
    std::fs::write(checkout.join("evil\u{9b}31m\u{202e}txt.md"), "mine\n").unwrap();
    let out = home
        .paddock(
            &["apply", &rec.id, "--repo", checkout.to_str().unwrap()],
            &[],
        )
        .await;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        (
            out.status.code(),
            raw_control(&out.stderr),
            raw_control(&out.stdout)
        ),
        (Some(1), None, None),
        "{stderr}"
    );
    assert!(
        stderr.contains(r"evil\u{9b}31m\u{202e}txt.md: already exists in working directory"),
        "{stderr}"
    );
    // Applied once the file is out of the way: the line saying what was
    // applied names the job's file escaped too.
    std::fs::remove_file(checkout.join("evil\u{9b}31m\u{202e}txt.md")).unwrap();
    let out = home
        .paddock(
            &["apply", &rec.id, "--repo", checkout.to_str().unwrap()],
            &[],
        )
        .await;
    assert_eq!(
        (out.status.code(), raw_control(&out.stderr), String::from_utf8_lossy(&out.stderr).into_owned()),
        (
            Some(0),
            None,
            format!(
                "paddock: applied job {}'s patch in {} (2 files: evil\\u{{9b}}31m\\u{{202e}}txt.md, \
                 ok\\u{{a}}forged.md)\n",
                rec.id,
                checkout.display()
            )
        ),
    );
}

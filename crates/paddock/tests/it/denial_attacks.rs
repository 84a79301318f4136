//! A hostile job against Paddock's reading of the refusals it leaves
//! behind: Codex's rollout files (`$CODEX_HOME/sessions/**/rollout-*.jsonl`),
//! which Paddock reads once the engine has exited for the calls Codex
//! refused (`engines/codex/rollout.rs`). The job (a stand-in engine run
//! as Codex) writes one rollout of 1.8 MB: a shell call whose command is
//! 1 MiB long, then 8,000 refusals of that one call. Before, Paddock
//! took every refusal with its own copy of the command, 8 GiB held at
//! once in the host process (64 files of 64 MiB each were read, so a
//! job could ask terabytes), and stored an event for each. Through the
//! real `paddock` binary, under an address-space limit of 4 GiB (so the
//! probe cannot exhaust the machine): the job is done, at most
//! `MAX_REFUSALS` refusals become events, each command cut, and a
//! warning says how many more were left unread. And Claude Code's
//! stream, whose `result` event lists the calls denied: one line of it
//! (within `limits.max_line_bytes`) listing 50,000 Bash denials under a
//! host profile, each compared, before, with every denial seen so far
//! (34 s of Paddock's CPU for the one line in a debug build, a blocked
//! worker of its runtime); now the job is over in seconds. And the
//! rule Paddock names for such a denial: a command of nested braces or
//! nested `case` that the profile's shell parser, run in Paddock's
//! process, could not take (a stack overflow that aborted `paddock run`,
//! an exponential backtrack); now no parser runs on it there.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use paddock_protocol::{EventBody, JobStatus};
use paddock_test_support::prelude::*;

/// What Paddock takes of a job's refusals read after its run.
const MAX_REFUSALS: usize = 256;

/// The refusals the job's rollout holds.
const REFUSALS: usize = 8_000;

/// The address space `paddock run` gets: far above what a job needs,
/// far below the copies the refusals made before.
const ADDRESS_SPACE: &str = "4294967296";

/// The stand-in's work: the rollout of one long call refused
/// [`REFUSALS`] times.
fn rollout_script() -> String {
    format!(
        r#"day="$CODEX_HOME/sessions/2026/12/06"
mkdir -p "$day"
f="$day/rollout-2026-12-06T00-00-00-t.jsonl"
long=$(head -c 1048576 /dev/zero | tr '\0' a)
printf '{{"type":"response_item","payload":{{"type":"function_call","name":"exec_command","arguments":"{{\\"cmd\\":\\"%s\\"}}","call_id":"c"}}}}\n' "$long" > "$f"
awk 'BEGIN {{ for (i = 1; i <= {REFUSALS}; i++) printf "{{\"type\":\"response_item\",\"payload\":{{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":\"exec_command failed: CreateProcess {{ message: Rejected(%d rejected: no) }}\"}}}}\n", i }}' >> "$f""#
    )
}

fn rungs() -> Vec<&'static str> {
    if sandbox_available() {
        vec!["process", "sandbox"]
    } else {
        vec!["process"]
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rollout_of_one_long_call_refused_thousands_of_times_is_read_in_part() {
    for rung in rungs() {
        let home = Home::new();
        let dir = home.path().join("job");
        std::fs::create_dir_all(&dir).unwrap();
        let spec = stand_in_job(&dir, rung, &finishing(&rollout_script()), 120);
        let mut cmd = tokio::process::Command::new("prlimit");
        cmd.arg(format!("--as={ADDRESS_SPACE}"))
            .arg("--")
            .arg(paddock_bin())
            .arg("--data-dir")
            .arg(home.data())
            .arg("--jobs-dir")
            .arg(home.jobs())
            .args(["run", "--json", spec.to_str().unwrap()])
            .env_remove("PADDOCK_DB")
            .env("XDG_CONFIG_HOME", home.path().join("config"))
            .stdin(std::process::Stdio::null());
        let out = cmd.output().await.unwrap();
        assert!(
            out.status.success(),
            "{rung}: paddock run ended {:?}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
                .chars()
                .rev()
                .take(2000)
                .collect::<String>()
                .chars()
                .rev()
                .collect::<String>()
        );
        let rec = record(&out);
        let mut refusals = 0;
        let mut longest = 0;
        let mut warned = Vec::new();
        for body in home.event_bodies(&rec.id).await {
            match body {
                EventBody::Policy { rule, message } if rule == "codex" => {
                    refusals += 1;
                    longest = longest.max(message.len());
                }
                EventBody::Error {
                    message,
                    fatal: false,
                    ..
                } if message.contains("refused calls") => warned.push(message),
                _ => {}
            }
        }
        assert_eq!(
            (rec.status, refusals, longest < 8_192, warned),
            (
                JobStatus::Done,
                MAX_REFUSALS,
                true,
                vec![format!(
                    "the engine's files record {} more refused calls than the {MAX_REFUSALS} \
                     read one by one: they are not events of the job",
                    REFUSALS - MAX_REFUSALS
                )]
            ),
            "{rung}"
        );
    }
}

/// The denials the Claude stand-in's one `result` line lists.
const LISTED: usize = 50_000;

/// Runs a job on `rung` whose engine is a Claude Code stand-in printing
/// one `result` line whose `permission_denials` the awk program `listed`
/// prints (its items, comma-separated), under a host profile denying
/// `c1` and `curl`, with `limits.max_records` 1,000; `paddock run`'s
/// output, the CPU it and what it waited for took, and the job's denial
/// events.
async fn claude_job(
    home: &Home,
    rung: &str,
    listed: &str,
) -> (std::process::Output, std::time::Duration, usize) {
    let dir = home.path().join(format!("job-{rung}"));
    std::fs::create_dir_all(&dir).unwrap();
    let repo = repo(&dir);
    let bin = dir.join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let claude = bin.join("claude");
    write_script(
        &claude,
        &format!(
            r#"#!/bin/sh
[ "$1" = --version ] && {{ echo '{} (Claude Code)'; exit 0; }}
awk 'BEGIN {{ printf "{{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"ok\",\"permission_denials\":["; {listed}; printf "]}}\n" }}'
"#,
            paddock::engines::claude::PIN.version
        ),
    );
    let spec = job(
        &dir,
        "claude",
        &repo,
        SCRIPTED,
        Some("[[turn]]\ntext = \"hi\"\nusage = { input = 1, output = 1 }\n"),
    );
    use_engine_binary(&spec, &claude);
    on_rung(&spec, rung);
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        "timeout_secs = 120",
        "timeout_secs = 120\nmax_records = 1000",
    );
    std::fs::write(&spec, text).unwrap();
    append_to_spec(&spec, "[budget]\nmax_usd = 1.0\n");
    under_profile(
        &spec,
        "id = \"deny-c\"\ndeny_commands = [\"c1\", \"curl\"]\n",
    );
    let (out, took) = cpu_of(home, &["run", "--json", spec.to_str().unwrap()]).await;
    let denials = match serde_json::from_slice::<paddock_protocol::JobRecord>(&out.stdout) {
        Ok(rec) => home
            .event_bodies(&rec.id)
            .await
            .into_iter()
            .filter(|e| matches!(e, EventBody::Policy { message, .. }
                if message.starts_with("the engine's output, which the job could write, reports: denied `")))
            .count(),
        Err(_) => 0,
    };
    (out, took, denials)
}

/// `paddock ARGS` on `home` and the CPU it took with the processes it
/// waited for (user and system, the shell's `times` for its children):
/// the time a job's work costs, which a loaded host (the suites side by
/// side on two cores) does not stretch as it stretches the wall clock.
async fn cpu_of(home: &Home, args: &[&str]) -> (std::process::Output, std::time::Duration) {
    let paddock = home.command(args);
    let paddock = paddock.as_std();
    let mut cmd = tokio::process::Command::new("/bin/sh");
    cmd.arg("-c")
        // Its end as its own: a signal that killed it kills the shell.
        .arg(
            "\"$0\" \"$@\"; s=$?; times >&2; \
             if [ $s -gt 128 ]; then trap - $((s - 128)); kill -$((s - 128)) $$; fi; exit $s",
        )
        .arg(paddock.get_program())
        .args(paddock.get_args())
        .stdin(std::process::Stdio::null());
    for (k, v) in paddock.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let mut out = cmd.output().await.unwrap();
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    let (rest, children) = text.trim_end().rsplit_once('\n').unwrap();
    // `0m1.234000s 0m0.056000s`: user and system.
    let secs = |t: &str| -> f64 {
        let (m, s) = t.trim_end_matches('s').split_once('m').unwrap();
        m.parse::<f64>().unwrap() * 60.0 + s.parse::<f64>().unwrap()
    };
    let cpu: f64 = children.split_whitespace().map(secs).sum();
    // The shell's own line above its children's.
    out.stderr = rest
        .rsplit_once('\n')
        .map_or("", |(before, _)| before)
        .as_bytes()
        .to_vec();
    (out, std::time::Duration::from_secs_f64(cpu))
}

/// Before, each denial was compared with every one seen: the 50,000 took
/// 36 s of Paddock's CPU; now a few. Bounded in CPU (below), not wall
/// time, which a loaded host stretches.
#[tokio::test(flavor = "multi_thread")]
async fn a_claude_result_listing_fifty_thousand_denials_is_taken_in_linear_time() {
    for rung in rungs() {
        let home = Home::new();
        let (out, took, denials) = claude_job(
            &home,
            rung,
            &format!(
                r#"for (i = 1; i <= {LISTED}; i++) printf "%s{{\"tool_name\":\"Bash\",\"tool_use_id\":\"t%d\",\"tool_input\":{{\"command\":\"c%d\"}}}}", (i > 1 ? "," : ""), i, i"#
            ),
        )
        .await;
        assert!(
            out.status.code().is_some()
                && took < std::time::Duration::from_secs(20)
                && denials > 100,
            "{rung}: paddock run ended {:?} after {took:?} of CPU, {denials} denial events: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// One denial whose command is 64 KiB of nested braces (`{ { … true; } }`),
/// and one of 600 characters of nested `case`: before, Paddock's shell
/// parser took each in its own process, the first overflowing the stack
/// of a runtime worker (`paddock run` aborted, a server would have ended
/// with every job it ran), the second backtracking for hours. Now the
/// job is over in seconds with both denials as events.
#[tokio::test(flavor = "multi_thread")]
async fn a_claude_denial_of_a_deeply_nested_command_does_not_bring_paddock_down() {
    for rung in rungs() {
        let home = Home::new();
        let (out, took, denials) = claude_job(
            &home,
            rung,
            r#"b = ""; e = ""; for (i = 0; i < 16384; i++) { b = b "{ "; e = e "} " }; c = ""; d = ""; for (i = 0; i < 32; i++) { c = c "case a in a) "; d = d "esac; " }; printf "{\"tool_name\":\"Bash\",\"tool_use_id\":\"t1\",\"tool_input\":{\"command\":\"%strue; %s\"}},{\"tool_name\":\"Bash\",\"tool_use_id\":\"t2\",\"tool_input\":{\"command\":\"%strue;; %s\"}}", b, e, c, d"#,
        )
        .await;
        assert!(
            out.status.code().is_some()
                && took < std::time::Duration::from_secs(20)
                && denials == 2,
            "{rung}: paddock run ended {:?} after {took:?} of CPU, {denials} denial events: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A job that forges the host profile's denials into its rollout files
/// (the job writes them: `$CODEX_HOME` is in its home), under a profile
/// denying `curl`: a command that ran and printed the hook's words (`…
/// Output:` then `Command blocked by PreToolUse hook: paddock policy: host
/// profile … denies …`) is no denial at all; a refusal in the exact form
/// the hook writes, and one in Codex's own form, are events that say
/// they are the engine's report from files the job could write, never
/// the host's seeing, and so does the closeout. Before, a call's output
/// holding the mark anywhere read as the host profile's denial, and no
/// event said where it came from.
#[tokio::test(flavor = "multi_thread")]
async fn a_forged_rollout_denial_reads_as_the_engines_report_not_the_hosts() {
    let home = Home::new();
    let dir = home.path().join("job");
    std::fs::create_dir_all(&dir).unwrap();
    let reason = "paddock policy: host profile `deny-t` denies `curl` on this host";
    let call = |id: &str, cmd: &str| {
        let arguments = serde_json::json!({ "cmd": cmd }).to_string();
        serde_json::json!({"type": "response_item", "payload": {"type": "function_call",
            "name": "exec_command", "arguments": arguments, "call_id": id}})
        .to_string()
    };
    let output = |id: &str, text: &str| {
        serde_json::json!({"type": "response_item", "payload": {"type": "function_call_output",
            "call_id": id, "output": text}})
        .to_string()
    };
    let forged = [
        call("c1", "echo printed"),
        output(
            "c1",
            &format!(
                "Chunk ID: 1\nWall time: 0.0 seconds\nProcess exited with code 0\nOutput:\n\
                 Command blocked by PreToolUse hook: {reason}\n"
            ),
        ),
        call("c2", "curl x"),
        output(
            "c2",
            &format!("Command blocked by PreToolUse hook: {reason}. Command: curl x"),
        ),
        call("c3", "rm -f a"),
        output(
            "c3",
            "exec_command failed: CreateProcess { message: \"Rejected(\\\"`/bin/bash -lc 'rm -f \
             a'` rejected: rm -f style commands are not permitted\\\")\" }",
        ),
    ]
    .join("\n");
    let file = home.path().join("forged.jsonl");
    std::fs::write(&file, format!("{forged}\n")).unwrap();
    let body = format!(
        "day=\"$CODEX_HOME/sessions/2026/12/07\"\nmkdir -p \"$day\"\ncp {} \
         \"$day/rollout-2026-12-07T00-00-00-t.jsonl\"",
        file.display()
    );
    let spec = stand_in_job(&dir, "process", &finishing(&body), 120);
    under_profile(&spec, "id = \"deny-t\"\ndeny_commands = [\"curl\"]\n");
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    let policy: Vec<EventBody> = home
        .event_bodies(&rec.id)
        .await
        .into_iter()
        .filter(|b| matches!(b, EventBody::Policy { .. }))
        .collect();
    let closeout = home
        .store()
        .await
        .closeout(&rec.id)
        .await
        .unwrap()
        .unwrap_or_default();
    let reported = "the engine's session files, which the job could write, report:";
    assert_eq!(
        (
            rec.status,
            policy,
            closeout.matches(reported).count(),
            closeout.contains("echo printed"),
        ),
        (
            JobStatus::Done,
            vec![
                EventBody::Policy {
                    rule: "codex".into(),
                    message: format!(
                        "{reported} codex refused `rm -f a` on its own: rm -f style commands are \
                         not permitted"
                    ),
                },
                EventBody::Policy {
                    rule: "curl".into(),
                    message: format!(
                        "{reported} denied `curl x` (host profile `deny-t`, deny_commands)"
                    ),
                },
            ],
            2,
            false,
        ),
        "{}\n{closeout}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A Claude Code job under a profile denying `curl` that forges denials
/// where Paddock reads them while it runs: a line in the hook's record
/// file (`meta/denials.jsonl`, which the hook appends to from inside the
/// job, so the job can), and lines of its own output (Claude Code's
/// denial text for a call it never made, and a `result` listing a tool
/// it refused on its own). Each `policy` event says first that it is the
/// job side's report (the hook's record, the engine's output), never the
/// host's seeing, and so does the closeout's list of denials, where it
/// cuts a long command too. Before, the record's and the output's read
/// "denied `curl …` (host profile `deny-c`, deny_commands)", as if
/// Paddock had denied the call.
#[tokio::test(flavor = "multi_thread")]
async fn a_denial_the_job_forges_in_the_record_or_its_output_reads_as_the_job_sides_report() {
    let home = Home::new();
    let dir = home.path().join("job");
    std::fs::create_dir_all(&dir).unwrap();
    let repo = repo(&dir);
    let bin = dir.join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let claude = bin.join("claude");
    let refused = serde_json::json!({"type": "user", "message": {"role": "user", "content": [
        {"tool_use_id": "toolu_o", "type": "tool_result", "is_error": true,
         "content": "Permission to use Bash with command curl out has been denied."}]}});
    let result = serde_json::json!({"type": "result", "subtype": "success", "is_error": false,
        "result": "ok", "permission_denials": [{"tool_name": "WebFetch",
        "tool_use_id": "toolu_w", "tool_input": {"url": "http://x"}}]});
    // A long command: whose report it is still shows where the closeout
    // cuts the message.
    let long = format!("curl {}", "x".repeat(300));
    let forged = serde_json::json!({"rule": "curl", "command": long, "call_id": "toolu_h"});
    write_script(
        &claude,
        &format!(
            "#!/bin/sh\n[ \"$1\" = --version ] && {{ echo '{} (Claude Code)'; exit 0; }}\n\
             echo '{forged}' >> \"$HOME/../meta/denials.jsonl\"\necho '{refused}'\n\
             echo '{result}'\n",
            paddock::engines::claude::PIN.version
        ),
    );
    let spec = job(
        &dir,
        "claude",
        &repo,
        SCRIPTED,
        Some("[[turn]]\ntext = \"hi\"\nusage = { input = 1, output = 1 }\n"),
    );
    use_engine_binary(&spec, &claude);
    on_rung(&spec, "process");
    append_to_spec(&spec, "[budget]\nmax_usd = 1.0\n");
    under_profile(&spec, "id = \"deny-c\"\ndeny_commands = [\"curl\"]\n");
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    let policy: Vec<EventBody> = home
        .event_bodies(&rec.id)
        .await
        .into_iter()
        .filter(|b| matches!(b, EventBody::Policy { .. }))
        .collect();
    let closeout = home
        .store()
        .await
        .closeout(&rec.id)
        .await
        .unwrap()
        .unwrap_or_default();
    // The closeout's list of denials, each item a line.
    let listed: Vec<String> = closeout
        .split_once("### Policy denials\n")
        .map(|(_, rest)| rest)
        .unwrap_or_default()
        .lines()
        .take_while(|l| l.starts_with("- "))
        .map(str::to_string)
        .collect();
    let record_says = "the hook's record file, which the job could write, reports:";
    let output_says = "the engine's output, which the job could write, reports:";
    assert_eq!(
        (rec.status, policy, listed),
        (
            JobStatus::Done,
            vec![
                EventBody::Policy {
                    rule: "curl".into(),
                    message: format!(
                        "{record_says} denied `{long}` (host profile `deny-c`, deny_commands)"
                    ),
                },
                EventBody::Policy {
                    rule: "curl".into(),
                    message: format!(
                        "{output_says} denied `curl out` (host profile `deny-c`, deny_commands)"
                    ),
                },
                EventBody::Policy {
                    rule: "claude".into(),
                    message: format!(
                        "{output_says} claude refused `WebFetch {{\"url\":\"http://x\"}}` on its \
                         own: its permission mode does not allow the WebFetch tool (Paddock allows \
                         edits and Bash)"
                    ),
                },
            ],
            // Whose report each is comes first: a list that cuts a long
            // message still shows it.
            vec![
                format!(
                    "- `curl`: ``{record_says} denied `curl {}…``",
                    "x".repeat(127)
                ),
                format!(
                    "- `curl`: ``{output_says} denied `curl out` (host profile `deny-c`, \
                     deny_commands)``"
                ),
                format!(
                    "- `claude`: ``{output_says} claude refused `WebFetch {{\"url\":\"http://x\"}}` \
                     on its own: its permission mode does not allow the WebFetch tool (Paddock \
                     allows edits and Bash)``"
                ),
            ],
        ),
        "{}\n{closeout}",
        String::from_utf8_lossy(&out.stderr)
    );
}

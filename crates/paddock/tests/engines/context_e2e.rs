//! The generated context with the real engines: Codex CLI and Claude Code run
//! the sample ticket (a repository with its own AGENTS.md, skills from a
//! library and inline) against the scripted upstream. The engine sees the
//! extended AGENTS.md, the `.paddock/` files and the skills; it edits the
//! repository's AGENTS.md and writes a file; the patch holds exactly that
//! change; every event and artifact is redacted (workspace paths, the job
//! token, token-shaped strings).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use paddock_protocol::{EventBody, JobStatus};
use paddock_test_support::prelude::*;

const REPO_AGENTS_MD: &str = "# Greeter conventions\n\n- Rust 2021, `cargo fmt` clean.\n- Unit tests live next to the code.\n";
const FAKE_GITHUB_TOKEN: &str = "ghp_0123456789abcdefghijABCDEFGHIJ0123456789";

fn scenario() -> String {
    format!(
        r#"
[[turn]]
text = "Reading the rules."
usage = {{ input = 500, output = 20 }}
[[turn.action]]
type = "shell"
command = "pwd; cat AGENTS.md .paddock/environment.json; ls .agents/skills .claude/skills; tr '\\0' '\\n' < /proc/$PPID/environ | grep -E '^(PADDOCK_JOB_TOKEN|ANTHROPIC_API_KEY)='; echo {FAKE_GITHUB_TOKEN}"
[[turn.action]]
type = "read"
path = "AGENTS.md"

[[turn]]
text = "Updating the conventions and writing notes."
usage = {{ input = 600, output = 30 }}
[[turn.action]]
type = "edit"
path = "AGENTS.md"
old = "- Unit tests live next to the code."
new = "- Unit tests live next to the code, in a `tests` module."
[[turn.action]]
type = "write"
path = "notes.md"
content = "greeting by name\n"

[[turn]]
text = "Done."
usage = {{ input = 700, output = 5 }}
"#
    )
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/context")
}

/// The patch a change to `repo` should give, computed by git the way the
/// workspace computes it.
fn expected_patch(home: &Home, repo: &Path) -> String {
    let scratch = home.path().join("expected");
    git(
        home.path(),
        &[
            "clone",
            "-q",
            repo.to_str().unwrap(),
            scratch.to_str().unwrap(),
        ],
    );
    std::fs::write(
        scratch.join("AGENTS.md"),
        REPO_AGENTS_MD.replace(
            "- Unit tests live next to the code.",
            "- Unit tests live next to the code, in a `tests` module.",
        ),
    )
    .unwrap();
    std::fs::write(scratch.join("notes.md"), "greeting by name\n").unwrap();
    git(&scratch, &["add", "--all"]);
    git(
        &scratch,
        &[
            "diff",
            "--cached",
            "--binary",
            "--no-color",
            "--no-ext-diff",
            "HEAD",
        ],
    )
}

async fn runs_with_the_generated_context(engine: &str) {
    let Some(_) = paddock_test_support::prelude::engine(engine) else {
        return;
    };
    let home = Home::new();
    let repo = repo(home.path());
    std::fs::write(repo.join("AGENTS.md"), REPO_AGENTS_MD).unwrap();
    git(&repo, &["add", "AGENTS.md"]);
    git(&repo, &["commit", "-q", "-m", "conventions"]);
    let text = std::fs::read_to_string(fixtures().join("job.toml"))
        .unwrap()
        .replace("path = \"REPO\"", &format!("path = \"{}\"", repo.display()))
        .replace(
            "skills_dir = \"skills\"",
            &format!("skills_dir = \"{}\"", fixtures().join("skills").display()),
        )
        .replace("kind = \"codex\"", &format!("kind = \"{engine}\""))
        .replace(
            "model = \"gpt-5.5\"",
            &format!("model = \"{}\"", model(engine)),
        );
    let spec = home.path().join("job.toml");
    std::fs::write(&spec, text).unwrap();
    std::fs::write(home.path().join("scenario.toml"), scenario()).unwrap();

    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    assert_eq!(
        rec.status,
        JobStatus::Done,
        "reason: {:?}\nstderr: {}",
        rec.reason,
        String::from_utf8_lossy(&out.stderr)
    );

    // Exactly the agent's change: its edit of the repository's AGENTS.md and
    // its new file; none of Paddock's files or its section of AGENTS.md.
    assert_eq!(
        rec.changed_files,
        vec!["AGENTS.md".to_string(), "notes.md".to_string()]
    );
    let patch = std::fs::read_to_string(rec.patch_path.as_ref().unwrap()).unwrap();
    assert_eq!(patch, expected_patch(&home, &repo));

    // The engine saw the extended AGENTS.md, environment.json and the skills.
    let store = home.store().await;
    let events = store.events(&rec.id, 0).await.unwrap();
    let probe = events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::ToolResult { output, .. }
                if output.contains("Greeter conventions")
                    && output.contains("paddock.environment/1") =>
            {
                Some(output.clone())
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("no probe output in {events:#?}"));
    for needle in [
        "<workspace>\n",
        "<!-- paddock:begin",
        "# GREET-7: Greet users by name",
        "release-notes",
        "unit-tests",
        "=[REDACTED]",
        "[REDACTED]",
    ] {
        assert!(probe.contains(needle), "{needle:?} not in {probe}");
    }

    // Claude Code registered both skills from .claude/skills.
    let artifacts = home.data().join("artifacts").join(&rec.id);
    let raw = std::fs::read_to_string(artifacts.join("engine.jsonl")).unwrap();
    if engine == "claude" {
        let init: serde_json::Value = raw
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|v| v["type"] == "system" && v["subtype"] == "init")
            .unwrap();
        let skills: Vec<&str> = init["skills"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| s.as_str())
            .collect();
        assert!(
            skills.contains(&"release-notes") && skills.contains(&"unit-tests"),
            "{skills:?}"
        );
        assert_eq!(init["cwd"], "<workspace>");
    }

    // Redaction: no event, artifact or output names the job's directory, the
    // job token or the token-shaped string.
    let jobs_dir = home.jobs().display().to_string();
    for needle in [jobs_dir.as_str(), "pdk-job-", FAKE_GITHUB_TOKEN] {
        for e in &events {
            let json = serde_json::to_string(e).unwrap();
            assert!(!json.contains(needle), "{needle} in event {json}");
        }
        assert_eq!(
            files_containing(&home.data(), needle.as_bytes()),
            Vec::<PathBuf>::new(),
            "{needle}"
        );
        assert!(!String::from_utf8_lossy(&out.stderr).contains(needle));
        assert!(!String::from_utf8_lossy(&out.stdout).contains(needle));
    }
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_runs_with_the_generated_context() {
    runs_with_the_generated_context("codex").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_runs_with_the_generated_context() {
    runs_with_the_generated_context("claude").await;
}

/// The engines send the generated context to the model: the requests that
/// reach the provider carry the repository's conventions, the comment thread
/// and the skills, as each engine loads them (Codex from AGENTS.md and
/// `.agents/skills`, Claude Code from CLAUDE.md and `.claude/skills`).
async fn the_model_sees_the_context(engine: &str) {
    let Some(_) = paddock_test_support::prelude::engine(engine) else {
        return;
    };
    let home = Home::new();
    let repo = repo(home.path());
    std::fs::write(repo.join("AGENTS.md"), REPO_AGENTS_MD).unwrap();
    git(&repo, &["add", "AGENTS.md"]);
    git(&repo, &["commit", "-q", "-m", "conventions"]);
    let key = format!("sk-paddock-ctx-{}-0123456789abcdef", std::process::id());
    let provider = KeyedProvider::start(
        &home,
        engine,
        "[[turn]]
text = \"Done.\"
",
        &key,
    )
    .await;
    let text = std::fs::read_to_string(fixtures().join("job.toml"))
        .unwrap()
        .replace("path = \"REPO\"", &format!("path = \"{}\"", repo.display()))
        .replace(
            "skills_dir = \"skills\"",
            &format!("skills_dir = \"{}\"", fixtures().join("skills").display()),
        )
        .replace("kind = \"codex\"", &format!("kind = \"{engine}\""))
        .replace(
            "model = \"gpt-5.5\"",
            &format!("model = \"{}\"", model(engine)),
        )
        .replace(
            "provider = \"scripted\"\nscenario = \"scenario.toml\"",
            &provider.spec_lines(),
        );
    let spec = home.path().join("job.toml");
    std::fs::write(&spec, text).unwrap();
    let out = home
        .paddock(
            &["run", "--json", spec.to_str().unwrap()],
            &[("PADDOCK_E2E_KEY", &key)],
        )
        .await;
    let rec = record(&out);
    assert_eq!(rec.status, JobStatus::Done, "reason: {:?}", rec.reason);
    let requests: String = provider
        .server
        .requests()
        .iter()
        .map(|r| serde_json::to_string(&r.body).unwrap())
        .collect();
    for needle in [
        // The repository's conventions and the ticket's comment thread.
        "# Greeter conventions",
        "Trim whitespace around the name, please.",
        // Each skill, as the engine itself lists the skills it found
        // (AGENTS.md/CLAUDE.md list them as "- `name`: …").
        "- release-notes: Write a release-notes entry for a user-visible change.",
        "- unit-tests: Run only the unit tests that cover the files you changed.",
    ] {
        assert!(
            requests.contains(needle),
            "{engine}: {needle:?} not sent to the model"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_sends_the_context_to_the_model() {
    the_model_sees_the_context("codex").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_sends_the_context_to_the_model() {
    the_model_sees_the_context("claude").await;
}

//! Context assembly: snapshots of everything Paddock generates for a sample
//! ticket (comments, prior attempts, a library skill and an inline one, a
//! repository with its own AGENTS.md, a host profile's advisory), the
//! `paddock context` command, and skills rejected before anything is written.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use paddock::context::{Assembled, ContextInputs, PolicyContext, Prepared};
use paddock_protocol::{EngineKind, JobSpec};
use paddock_test_support::prelude::*;

const REPO_AGENTS_MD: &str = "# Greeter conventions\n\n- Rust 2021, `cargo fmt` clean.\n- Unit tests live next to the code.\n";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/context")
}

/// A real repository with its own AGENTS.md, and the sample spec for it.
fn sample(home: &Home) -> (PathBuf, PathBuf) {
    let repo = repo(home.path());
    commit_file(&repo, "AGENTS.md", REPO_AGENTS_MD, "conventions");
    let text = std::fs::read_to_string(fixtures().join("job.toml"))
        .unwrap()
        .replace("path = \"REPO\"", &format!("path = \"{}\"", repo.display()))
        .replace(
            "skills_dir = \"skills\"",
            &format!("skills_dir = \"{}\"", fixtures().join("skills").display()),
        );
    let spec = home.path().join("job.toml");
    std::fs::write(&spec, text).unwrap();
    std::fs::copy(
        fixtures().join("scenario.toml"),
        home.path().join("scenario.toml"),
    )
    .unwrap();
    (repo, spec)
}

/// What the policy part hands the context for the `constrained-local` preset.
fn constrained_local() -> PolicyContext {
    PolicyContext {
        profile: Some("constrained-local".into()),
        // As the policy part words it: guidance bullets, no heading.
        advisory: Some(
            "- Do not run full or release builds on this host: CI runs the full build.\n- Verify with the cheapest targeted check (one test, a type check), then finish; CI runs the full suite.\n- Limits: CPU 50%, 4096 MB memory, 1 concurrent job(s) on this host.\n"
                .into(),
        ),
        denied_commands: vec!["cargo build --release".into(), "npm run build".into()],
        cpu_limit: Some("50%".into()),
        memory_limit_mb: Some(4096),
        max_concurrent_jobs: Some(1),
    }
}

fn render(spec: &JobSpec, checkout: &Path, policy: PolicyContext, tools: &[&str]) -> Assembled {
    let inputs = ContextInputs {
        policy,
        available_tools: tools.iter().map(|t| t.to_string()).collect(),
        ..ContextInputs::default()
    }
    .with_repository(checkout)
    .unwrap();
    Prepared::load(spec).unwrap().render(spec, &inputs).unwrap()
}

fn file<'a>(ctx: &'a Assembled, path: &str) -> &'a str {
    let f = ctx
        .files
        .iter()
        .find(|f| f.path == path)
        .unwrap_or_else(|| {
            panic!(
                "no {path} in {:?}",
                ctx.files.iter().map(|f| &f.path).collect::<Vec<_>>()
            )
        });
    std::str::from_utf8(&f.contents).unwrap()
}

#[test]
fn sample_ticket_snapshots() {
    let home = Home::new();
    let (repo, spec_path) = sample(&home);
    let spec = JobSpec::load(&spec_path).unwrap();
    let ctx = render(&spec, &repo, constrained_local(), &["bash", "git", "cargo"]);

    insta::assert_snapshot!("agents_md", file(&ctx, "AGENTS.md"));
    insta::assert_snapshot!("claude_md", file(&ctx, "CLAUDE.md"));
    insta::assert_snapshot!("environment_json", file(&ctx, ".paddock/environment.json"));
    insta::assert_snapshot!("tools_json", file(&ctx, ".paddock/tools.json"));
    insta::assert_snapshot!("prompt_codex", ctx.prompt);
    let skills: String = ctx
        .files
        .iter()
        .filter(|f| !f.counted)
        .map(|f| format!("=== {}\n{}", f.path, String::from_utf8_lossy(&f.contents)))
        .collect();
    insta::assert_snapshot!("skills", skills);

    // The repository's AGENTS.md is kept, byte for byte, and extended.
    let agents = ctx.files.iter().find(|f| f.path == "AGENTS.md").unwrap();
    let ext = agents.extends.as_ref().unwrap();
    assert_eq!(ext.original, REPO_AGENTS_MD);
    assert!(file(&ctx, "AGENTS.md").starts_with(REPO_AGENTS_MD));
    // CLAUDE.md is new (the repository has none) and points at AGENTS.md.
    assert!(ctx
        .files
        .iter()
        .any(|f| f.path == "CLAUDE.md" && f.extends.is_none()));

    // Claude Code is told about CLAUDE.md instead.
    let mut claude = spec.clone();
    claude.engine.kind = EngineKind::Claude;
    claude.engine.model = "claude-sonnet-4-5".into();
    let ctx = render(
        &claude,
        &repo,
        constrained_local(),
        &["bash", "git", "cargo"],
    );
    insta::assert_snapshot!("prompt_claude", ctx.prompt);

    // The size goal for a ticket like this: brief + generated files ≤ 3k tokens.
    let size = ctx.size();
    assert!(size.tokens <= 3000, "{size:?}");
    insta::assert_json_snapshot!("size", size);
}

#[test]
fn rendering_is_deterministic_and_pure() {
    let home = Home::new();
    let (repo, spec_path) = sample(&home);
    let spec = JobSpec::load(&spec_path).unwrap();
    let a = render(&spec, &repo, constrained_local(), &["bash"]);
    let b = render(&spec, &repo, constrained_local(), &["bash"]);
    assert_eq!(a, b);
    // Nothing was written into the repository.
    assert_eq!(git(&repo, &["status", "--porcelain", "--ignored"]), "");
}

#[test]
fn project_templates_override_the_defaults() {
    let home = Home::new();
    let (repo, spec_path) = sample(&home);
    let templates = home.path().join("templates");
    std::fs::create_dir(&templates).unwrap();
    std::fs::write(
        templates.join("prompt.md.j2"),
        "Do {{ ticket.id }} for {{ ticket.project }} within {{ limits.time }}.\n",
    )
    .unwrap();
    let text = std::fs::read_to_string(&spec_path)
        .unwrap()
        .replace("[context]\n", "[context]\ntemplates_dir = \"templates\"\n");
    std::fs::write(&spec_path, text).unwrap();
    let spec = JobSpec::load(&spec_path).unwrap();
    let ctx = render(&spec, &repo, PolicyContext::default(), &[]);
    assert_eq!(ctx.prompt, "Do GREET-7 for greeter within 20 min.\n");

    // A typo in an override is an error naming the template, before anything runs.
    std::fs::write(templates.join("prompt.md.j2"), "{{ ticket.titel }}\n").unwrap();
    let inputs = ContextInputs::default();
    let err = Prepared::load(&spec)
        .unwrap()
        .render(&spec, &inputs)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("context template prompt.md.j2: cannot render: "),
        "{err}"
    );
    std::fs::write(templates.join("prompt.md.j2"), "{% if %}\n").unwrap();
    let err = Prepared::load(&spec).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "context template {}: ",
            templates.join("prompt.md.j2").display()
        )),
        "{err}"
    );
    std::fs::write(templates.join("extra.j2"), "x").unwrap();
    std::fs::remove_file(templates.join("prompt.md.j2")).unwrap();
    assert_eq!(
        Prepared::load(&spec).unwrap_err().to_string(),
        format!("context.templates_dir {}: extra.j2 is not a known template (expected one of brief.md.j2, agents.md.j2, claude.md.j2, prompt.md.j2)", templates.display())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn paddock_context_writes_the_files_and_reports_their_size() {
    let home = Home::new();
    let (repo, spec_path) = sample(&home);
    let out_dir = home.path().join("out");
    let out = home
        .paddock(
            &[
                "context",
                spec_path.to_str().unwrap(),
                "--out",
                out_dir.to_str().unwrap(),
                "--json",
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
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    // Exactly what a run would assemble (no host profile), tools as probed.
    let tools: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.join(".paddock/tools.json")).unwrap(),
    )
    .unwrap();
    let probed: Vec<String> =
        serde_json::from_value(tools["commands"]["available"].clone()).unwrap();
    let probed: Vec<&str> = probed.iter().map(String::as_str).collect();
    let spec = JobSpec::load(&spec_path).unwrap();
    let want = render(&spec, &repo, PolicyContext::default(), &probed);
    let mut written = vec![("PROMPT.md".to_string(), want.prompt.clone().into_bytes())];
    written.extend(
        want.files
            .iter()
            .map(|f| (f.path.clone(), f.contents.clone())),
    );
    for (path, contents) in &written {
        assert_eq!(
            &std::fs::read(out_dir.join(path)).unwrap(),
            contents,
            "{path}"
        );
    }
    let mut on_disk: Vec<String> = files_under(&out_dir);
    on_disk.sort();
    let mut expected: Vec<String> = written.iter().map(|(p, _)| p.clone()).collect();
    expected.sort();
    assert_eq!(on_disk, expected);
    assert_eq!(
        json,
        serde_json::json!({"out": out_dir.display().to_string(), "report": want.size()})
    );
    // The scratch checkout is gone.
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());

    // The table names every file and the total.
    let out_dir2 = home.path().join("out2");
    let out = home
        .paddock(
            &[
                "context",
                spec_path.to_str().unwrap(),
                "--out",
                out_dir2.to_str().unwrap(),
            ],
            &[],
        )
        .await;
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("AGENTS.md") && table.contains("total") && table.contains("skills"),
        "{table}"
    );
    // A non-empty output directory is refused.
    let out = home
        .paddock(
            &[
                "context",
                spec_path.to_str().unwrap(),
                "--out",
                out_dir2.to_str().unwrap(),
            ],
            &[],
        )
        .await;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        format!(
            "paddock: context output {}: the directory is not empty; give a new or empty one",
            out_dir2.display()
        )
    );
    // So is a file (it said "cannot create it: File exists").
    let file = home.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let out = home
        .paddock(
            &[
                "context",
                spec_path.to_str().unwrap(),
                "--out",
                file.to_str().unwrap(),
            ],
            &[],
        )
        .await;
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).trim().to_owned()
        ),
        (
            Some(2),
            format!(
                "paddock: context output {}: not a directory; give a new or empty directory",
                file.display()
            )
        )
    );
}

fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path().strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_typical_ticket_stays_within_3k_tokens() {
    let home = Home::new();
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hello/job.toml");
    let out_dir = home.path().join("out");
    let out = home
        .paddock(
            &[
                "context",
                spec.to_str().unwrap(),
                "--out",
                out_dir.to_str().unwrap(),
                "--json",
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
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tokens = json["report"]["tokens"].as_u64().unwrap();
    assert!(tokens > 0 && tokens <= 3000, "{json}");
}

/// The spec with one more inline skill named `name`.
fn with_bad_skill(spec_path: &Path, name: &str) {
    let text = std::fs::read_to_string(spec_path).unwrap()
        + &format!(
            "\n[[context.skill]]\nname = \"{name}\"\ndescription = \"Bad.\"\nbody = \"x\"\n"
        );
    std::fs::write(spec_path, text).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_skill_names_stop_the_job_before_anything_is_written() {
    for (name, message) in [
        (
            "../escape",
            "the name contains `..`; a skill may not leave its directory",
        ),
        (
            "nested/name",
            "the name contains a path separator; a skill name is one directory name",
        ),
        (
            "/abs",
            "the name is an absolute path; a skill name is one directory name",
        ),
    ] {
        let home = Home::new();
        let (_repo, spec_path) = sample(&home);
        with_bad_skill(&spec_path, name);
        let out = home
            .paddock(&["run", spec_path.to_str().unwrap()], &[])
            .await;
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(
            String::from_utf8_lossy(&out.stderr).trim(),
            format!("paddock: skill `{name}` (inline context.skill[1]): {message}")
        );
        // No job, no workspace, nothing in the repository.
        assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
        let jobs = home.paddock(&["jobs", "--json"], &[]).await;
        assert_eq!(String::from_utf8_lossy(&jobs.stdout), "");
        // `paddock context` refuses it too, and creates no output.
        let out_dir = home.path().join("out");
        let out = home
            .paddock(
                &[
                    "context",
                    spec_path.to_str().unwrap(),
                    "--out",
                    out_dir.to_str().unwrap(),
                ],
                &[],
            )
            .await;
        assert_eq!(out.status.code(), Some(2));
        assert!(!out_dir.exists());
    }

    // A collision between the library and an inline skill.
    let home = Home::new();
    let (_repo, spec_path) = sample(&home);
    with_bad_skill(&spec_path, "release-notes");
    let out = home
        .paddock(&["run", spec_path.to_str().unwrap()], &[])
        .await;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        format!(
            "paddock: skill `release-notes` is given twice: library {} and inline context.skill[1]",
            fixtures().join("skills").display()
        )
    );
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_skill_colliding_with_the_repository_fails_before_writing() {
    // The engine is resolved before the workspace is provisioned.
    let Some(_) = paddock_test_support::prelude::engine("codex") else {
        return;
    };
    let home = Home::new();
    let (repo, spec_path) = sample(&home);
    // The repository has its own skill of the same name.
    let own = repo.join(".claude/skills/unit-tests");
    std::fs::create_dir_all(&own).unwrap();
    std::fs::write(
        own.join("SKILL.md"),
        "---\nname: unit-tests\ndescription: Ours.\n---\n",
    )
    .unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "own skill"]);
    let out = home
        .paddock(
            &["run", "--json", "--keep", spec_path.to_str().unwrap()],
            &[],
        )
        .await;
    assert_eq!(out.status.code(), Some(2));
    let rec = record(&out);
    assert_eq!(
        rec.reason.as_deref(),
        Some("context: .claude/skills/unit-tests/SKILL.md already exists in the repository; Paddock does not overwrite it (rename the skill or remove the file)")
    );
    // Kept for inspection: not one generated file was written.
    let work = home.jobs().join(&rec.id).join("work");
    assert_eq!(git(&work, &["status", "--porcelain", "--ignored"]), "");
    assert_eq!(
        std::fs::read_to_string(work.join("AGENTS.md")).unwrap(),
        REPO_AGENTS_MD
    );
    assert!(!work.join(".paddock").exists());
    assert_eq!(
        std::fs::read_to_string(own.join("SKILL.md")).unwrap(),
        std::fs::read_to_string(work.join(".claude/skills/unit-tests/SKILL.md")).unwrap()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn context_spec_errors_name_the_field() {
    let home = Home::new();
    let (_repo, spec_path) = sample(&home);
    let text = std::fs::read_to_string(&spec_path).unwrap();
    let start = text.find("skills_dir = ").unwrap();
    let end = start + text[start..].find('\n').unwrap() + 1;
    let text = format!(
        "{}skills = [\"release-notes\"]\n{}",
        &text[..start],
        &text[end..]
    );
    std::fs::write(&spec_path, text).unwrap();
    let out = home
        .paddock(&["context", spec_path.to_str().unwrap()], &[])
        .await;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        format!(
            "paddock: job spec {}: field `context.skills`: names skills of a library: set `context.skills_dir` too",
            spec_path.display()
        )
    );
}

/// Attack: a repository whose `.claude` is a symbolic link out of the
/// checkout, and whose CLAUDE.md links to a file outside. Paddock writes
/// nothing through either link and nothing outside the checkout.
#[tokio::test(flavor = "multi_thread")]
async fn repository_links_cannot_redirect_generated_files() {
    let home = Home::new();
    let (repo, spec_path) = sample(&home);
    let outside = home.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret.md"), "outside text\n").unwrap();
    std::os::unix::fs::symlink(&outside, repo.join(".claude")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.md"), repo.join("CLAUDE.md")).unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "links"]);

    let spec = JobSpec::load(&spec_path).unwrap();
    let ws = paddock::workspace::Workspace::provision(
        &home.jobs(),
        "job-links",
        &spec.repository,
        &spec.branch(),
    )
    .await
    .unwrap();
    let ctx = render(&spec, &ws.work, PolicyContext::default(), &[]);
    // The linked CLAUDE.md is left alone: no CLAUDE.md is generated.
    assert!(!ctx.files.iter().any(|f| f.path == "CLAUDE.md"));
    let err = paddock::context::install(&ctx, &ws).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "context: .claude/skills/release-notes/SKILL.md: .claude is a symbolic link in the repository; Paddock does not write through links"
    );
    // Nothing was written: not outside, not in the checkout.
    assert_eq!(files_under(&outside), vec!["secret.md".to_string()]);
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.md")).unwrap(),
        "outside text\n"
    );
    assert_eq!(git(&ws.work, &["status", "--porcelain", "--ignored"]), "");
    assert_eq!(
        std::fs::read_to_string(ws.work.join("AGENTS.md")).unwrap(),
        REPO_AGENTS_MD
    );
    ws.remove().unwrap();
}

/// `paddock context` admits the host profile as `paddock run` does: its
/// advisory and denied commands are rendered, its `timeout_min` caps the
/// time budget, and a profile the rung cannot enforce is refused.
#[tokio::test(flavor = "multi_thread")]
async fn paddock_context_renders_the_host_profile() {
    let home = Home::new();
    let (_repo, spec_path) = sample(&home);
    let text = std::fs::read_to_string(&spec_path)
        .unwrap()
        .replace("timeout_secs = 1200", "timeout_secs = 3600");
    std::fs::write(
        &spec_path,
        format!("{text}\n[policy]\nprofile = \"constrained-local\"\n"),
    )
    .unwrap();
    let out = home
        .paddock(
            &[
                "context",
                spec_path.to_str().unwrap(),
                "--out",
                home.path().join("refused").to_str().unwrap(),
            ],
            &[],
        )
        .await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with(&format!(
            "paddock: job refused before start: job spec {}: host profile `constrained-local`: \
             rule `cpu_limit`",
            spec_path.display()
        )),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    std::fs::write(
        &spec_path,
        format!("{text}\n[policy]\nprofile = \"constrained-local\"\naccept_degraded = [\"cpu_limit\", \"mem_limit_mb\"]\n"),
    )
    .unwrap();
    let out_dir = home.path().join("out");
    let out = home
        .paddock(
            &[
                "context",
                spec_path.to_str().unwrap(),
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
    let agents = std::fs::read_to_string(out_dir.join("AGENTS.md")).unwrap();
    assert!(
        agents.contains("## Host rules (profile `constrained-local`)\n\n- Do not run full or release builds on this host: CI runs the full build.\n"),
        "{agents}"
    );
    assert!(agents.contains("- Time: 30 min;"), "{agents}");
    let preset: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("data/profiles/constrained-local.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let tools: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.join(".paddock/tools.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(tools["commands"]["forbidden"], preset["deny_commands"]);
    assert_eq!(tools["forbidden_by"], "constrained-local");
    let env: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.join(".paddock/environment.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        env["limits"],
        serde_json::json!({"timeout_secs": 1800, "budget_usd": 2.5, "cpu": "50%", "memory_mb": 4096, "max_concurrent_jobs": 1})
    );
    let prompt = std::fs::read_to_string(out_dir.join("PROMPT.md")).unwrap();
    assert!(
        prompt.contains("forbidden here: `cargo build --release`, `cargo test --workspace`"),
        "{prompt}"
    );
}

/// A checkout whose AGENTS.md is longer than Paddock reads of a
/// repository's instructions file (16 MiB and a byte, sparse: as a next
/// attempt's branch or a submitted repository can hold one) is left as it
/// is, not read, with a warning; CLAUDE.md is generated without quoting
/// it; and a FIFO in CLAUDE.md's place is an error, at once. Before, the
/// whole file was read into Paddock's memory (and held again as the
/// extended file, the extension's record and CLAUDE.md's quotation of
/// it), and the FIFO held the job's assembly for ever.
#[test]
fn an_instructions_file_longer_than_paddock_reads_is_left_alone() {
    let home = Home::new();
    let (repo, spec_path) = sample(&home);
    let spec = JobSpec::load(&spec_path).unwrap();
    let len = paddock::context::MAX_INSTRUCTIONS_BYTES + 1;
    std::fs::OpenOptions::new()
        .write(true)
        .open(repo.join("AGENTS.md"))
        .unwrap()
        .set_len(len)
        .unwrap();
    let inputs = ContextInputs::default().with_repository(&repo).unwrap();
    let ctx = Prepared::load(&spec)
        .unwrap()
        .render(&spec, &inputs)
        .unwrap();
    let claude = file(&ctx, "CLAUDE.md");
    assert_eq!(
        (
            inputs.warnings(),
            ctx.files.iter().any(|f| f.path == "AGENTS.md"),
            claude.len() < 1 << 20,
        ),
        (
            vec![format!(
                "AGENTS.md: the checkout's is {len} bytes long, more than the {} Paddock reads \
                 of a repository's instructions file; it is left as it is, without Paddock's \
                 section",
                paddock::context::MAX_INSTRUCTIONS_BYTES
            )],
            false,
            true
        )
    );
    nix::unistd::mkfifo(&repo.join("CLAUDE.md"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let r = repo.clone();
    std::thread::spawn(move || {
        let _ = tx.send(
            ContextInputs::default()
                .with_repository(&r)
                .err()
                .map(|e| e.to_string()),
        );
    });
    let answered = rx.recv_timeout(std::time::Duration::from_secs(10));
    assert!(
        matches!(&answered, Ok(Some(e)) if e.contains("CLAUDE.md") && e.contains("not a regular file")),
        "{answered:?}"
    );
}

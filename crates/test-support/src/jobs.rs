//! Job specs for tests (a real engine with a model, or a shell-script
//! stand-in answering the pinned version), the record `paddock run --json`
//! prints, and what a job left behind.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::git::repo;
use crate::home::Home;

/// The model each engine is run with in tests.
pub fn model(engine: &str) -> &'static str {
    match engine {
        "codex" => "gpt-5.5",
        _ => "claude-sonnet-4-5",
    }
}

/// A job record to store directly (a listing's or a follow-up's
/// fixture): job `id` of ticket T-1 on Codex with `model`, on `rung`, in
/// `status`, created `offset_s` seconds after 2025-06-01 12:00 UTC, with
/// nothing done yet.
pub fn stored_record(
    id: &str,
    model: &str,
    rung: &str,
    status: paddock_protocol::JobStatus,
    offset_s: i64,
) -> paddock_protocol::JobRecord {
    paddock_protocol::JobRecord {
        id: id.to_owned(),
        ticket_id: "T-1".to_owned(),
        project: "tests".to_owned(),
        attempt: 1,
        engine: "codex".to_owned(),
        model: model.to_owned(),
        isolation: rung.to_owned(),
        status,
        reason: None,
        branch: "paddock/T-1/1".to_owned(),
        base_ref: "main".to_owned(),
        patch_path: None,
        changed_files: Vec::new(),
        tokens: paddock_protocol::TokenUsage::default(),
        model_calls: 0,
        cost_micros: 0,
        engine_exit_code: None,
        created_at: time::macros::datetime!(2025-06-01 12:00 UTC)
            + time::Duration::seconds(offset_s),
        finished_at: None,
        duration_ms: None,
        disposed_at: None,
    }
}

/// Writes `job.toml` (and `scenario.toml` when scripted) into `dir`.
pub fn job(
    dir: &Path,
    engine: &str,
    repo: &Path,
    upstream: &str,
    scenario: Option<&str>,
) -> PathBuf {
    if let Some(s) = scenario {
        std::fs::write(dir.join("scenario.toml"), s).unwrap();
    }
    let spec = format!(
        r#"[ticket]
id = "T-1"
title = "Test ticket"
project = "tests"
description = "A test."

[repository]
path = "{repo}"
base_ref = "main"

[engine]
kind = "{engine}"
model = "{model}"

{upstream}

[limits]
timeout_secs = 120
"#,
        repo = repo.display(),
        model = model(engine),
    );
    let p = dir.join("job.toml");
    std::fs::write(&p, spec).unwrap();
    p
}

/// A Codex job spec in `home` on a repository made at `home/repo`, its
/// upstream the scripted provider playing `scenario` (`scenario.toml`).
pub fn scripted_job(home: &Home, scenario: &str) -> PathBuf {
    let repo = repo(home.path());
    job(home.path(), "codex", &repo, SCRIPTED, Some(scenario))
}

/// A job spec on `rung` whose engine is the shell script `body` (run as
/// Codex), with `timeout_secs`.
pub fn fake_codex_job(home: &Home, rung: &str, body: &str, timeout_secs: u64) -> PathBuf {
    stand_in_job(home.path(), rung, body, timeout_secs)
}

pub const SCRIPTED: &str = "[upstream]\nprovider = \"scripted\"\nscenario = \"scenario.toml\"\n";

/// The final job record printed by `paddock run --json`.
pub fn record(out: &Output) -> paddock_protocol::JobRecord {
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "no job record on stdout ({e}); stdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Runs the kept job `spec` whose stand-in engine only runs its script and
/// prints no turn: the job must end `failed` for exactly that reason (it
/// gets there only when every setup command succeeded). Returns the record
/// and the job's kept home directory, where such scripts leave their
/// findings.
pub async fn run_kept_script_job(
    home: &Home,
    spec: &Path,
) -> (paddock_protocol::JobRecord, PathBuf) {
    let out = home
        .paddock(&["run", "--json", "--keep", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    assert_eq!(
        (rec.status, rec.reason.as_deref()),
        (
            paddock_protocol::JobStatus::Failed,
            Some("the engine exited without finishing its turn")
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let job_home = home.jobs().join(&rec.id).join("home");
    (rec, job_home)
}

/// Every file under `dir` whose bytes contain `needle`.
pub fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() {
                if let Ok(bytes) = std::fs::read(&p) {
                    if bytes.windows(needle.len()).any(|w| w == needle) {
                        hits.push(p);
                    }
                }
            }
        }
    }
    hits
}

/// Appends the TOML `sections` to the job spec at `spec`, after a blank
/// line.
pub fn append_to_spec(spec: &Path, sections: &str) {
    let text = std::fs::read_to_string(spec).unwrap();
    std::fs::write(spec, format!("{text}\n{sections}")).unwrap();
}

/// Puts the job spec at `spec` under the host profile file `profile`
/// (TOML), written as `profile.toml` beside it: `[policy] profile =
/// "profile.toml"` appended to the spec.
pub fn under_profile(spec: &Path, profile: &str) {
    let dir = spec.parent().unwrap();
    std::fs::write(dir.join("profile.toml"), profile).unwrap();
    append_to_spec(spec, "[policy]\nprofile = \"profile.toml\"\n");
}

/// Puts the job spec at `spec` on the `sandbox` rung.
pub fn sandboxed(spec: &Path) {
    on_rung(spec, "sandbox");
}

/// Puts the job spec at `spec` on `rung` explicitly (the default is `auto`).
pub fn on_rung(spec: &Path, rung: &str) {
    let text = std::fs::read_to_string(spec).unwrap();
    std::fs::write(spec, format!("isolation = \"{rung}\"\n{text}")).unwrap();
}

/// Waits (up to 60 s) until a job's engine has created `name` in its
/// checkout; false if it never did.
pub async fn created_in_work(home: &Home, name: &str) -> bool {
    for _ in 0..600 {
        if let Ok(rd) = std::fs::read_dir(home.jobs()) {
            for e in rd.flatten() {
                if e.path().join("work").join(name).exists() {
                    return true;
                }
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    false
}

/// Writes `bin/codex`, a stand-in Codex: it answers the start's version
/// check (run on the host, outside the rung) as the pinned Codex and runs
/// the shell script `body` as the engine. Its path.
pub fn stand_in_codex(bin: &Path, body: &str) -> PathBuf {
    std::fs::create_dir_all(bin).unwrap();
    let engine = bin.join("codex");
    crate::script::write_script(
        &engine,
        &format!(
            "#!/bin/sh\n[ \"$1\" = --version ] && {{ echo 'codex-cli {}'; exit 0; }}\n{body}\n",
            paddock::engines::codex::PIN.version
        ),
    );
    engine
}

/// A stand-in engine body that ends its turn the way `codex exec --json`
/// does, after `work` (shell) ran in the checkout.
pub fn finishing(work: &str) -> String {
    finishing_session(work, "t")
}

/// [`finishing`] in the engine's session `session`: the thread it
/// announces (what a next attempt resumes).
pub fn finishing_session(work: &str, session: &str) -> String {
    format!(
        "{work}\necho '{{\"type\":\"thread.started\",\"thread_id\":\"{session}\"}}'\necho '{{\"type\":\"turn.started\"}}'\necho '{{\"type\":\"turn.completed\",\"usage\":{{\"input_tokens\":1,\"cached_input_tokens\":0,\"output_tokens\":1}}}}'"
    )
}

/// Points the job spec at `spec` at the engine `binary` (`[engine]
/// binary`).
pub fn use_engine_binary(spec: &Path, binary: &Path) {
    let text = std::fs::read_to_string(spec).unwrap().replace(
        "[engine]\n",
        &format!("[engine]\nbinary = \"{}\"\n", binary.display()),
    );
    std::fs::write(spec, text).unwrap();
}

/// A scripted Codex job spec in `dir` for `repo` whose engine is the
/// stand-in `body` (`dir/fakebin/codex`), with a budget (so the job's only
/// `error` events are the test's own), on `rung`.
pub fn stand_in_spec(dir: &Path, repo: &Path, rung: &str, body: &str) -> PathBuf {
    const ONE_TURN: &str = "[[turn]]\ntext = \"hi\"\nusage = { input = 1, output = 1 }\n";
    let engine = stand_in_codex(&dir.join("fakebin"), body);
    let spec = job(dir, "codex", repo, SCRIPTED, Some(ONE_TURN));
    use_engine_binary(&spec, &engine);
    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(&spec, format!("{text}\n[budget]\nmax_usd = 1.0\n")).unwrap();
    on_rung(&spec, rung);
    spec
}

/// A job spec in `dir` (with its repository, `dir/repo`) on `rung` whose
/// engine is the shell script `body` (run as Codex, `dir/fakebin/codex`),
/// with `timeout_secs`.
pub fn stand_in_job(dir: &Path, rung: &str, body: &str, timeout_secs: u64) -> PathBuf {
    let repo = repo(dir);
    let spec = stand_in_spec(dir, &repo, rung, body);
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        "timeout_secs = 120",
        &format!("timeout_secs = {timeout_secs}"),
    );
    std::fs::write(&spec, text).unwrap();
    spec
}

/// The details of a job's `setup_cache` status events, in order.
pub fn setup_cache_statuses(events: &[paddock_protocol::AgentEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            paddock_protocol::EventBody::Status {
                phase: paddock_protocol::Phase::SetupCache,
                detail,
            } => detail.clone(),
            _ => None,
        })
        .collect()
}

/// The 12-digit setup cache key a `setup_cache` status names.
pub fn setup_cache_key(detail: &str) -> String {
    let at = detail.find("(key ").expect(detail) + 5;
    detail[at..at + 12].to_string()
}

//! Shared helpers for Paddock's integration tests: temp homes, real git
//! repositories, job specs, running the real `paddock` binary, and finding
//! the pinned engine CLIs (skipping locally, failing in CI, when absent).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Output;

pub use paddock::store::{SqliteStore, Store};

/// Held by a test while it changes the process's environment (the AWS and
/// Google credential chains read it): one such test at a time in a binary.
/// Children other tests spawn meanwhile inherit what it set, so only
/// variables no other test's job reads may be changed.
pub static PROCESS_ENV: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// True when running in CI, where a missing prerequisite is a failure.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The engine CLI on PATH, or `None` (with a printed reason) when absent
/// locally. In CI an absent engine fails the test.
pub fn engine(name: &str) -> Option<PathBuf> {
    match which::which(name) {
        Ok(p) => Some(p),
        Err(_) if in_ci() => {
            panic!("engine `{name}` is not on PATH in CI (run scripts/install-engines)")
        }
        Err(_) => {
            eprintln!("skipping: engine `{name}` is not on PATH (run scripts/test, which installs the pinned engines)");
            None
        }
    }
}

/// One test's private Paddock home: database, artifacts, workspaces.
pub struct Home {
    pub dir: tempfile::TempDir,
}

impl Home {
    pub fn new() -> Home {
        Home {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn data(&self) -> PathBuf {
        self.path().join("data")
    }

    pub fn jobs(&self) -> PathBuf {
        self.path().join("jobs")
    }

    pub fn db(&self) -> PathBuf {
        self.data().join("paddock.db")
    }

    /// Runs the real `paddock` binary with this home and extra environment.
    pub async fn paddock(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = self.command(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().await.unwrap()
    }

    /// `paddock ARGS` on this home, not started (for a test that runs it
    /// alongside others, or kills it).
    pub fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_paddock"));
        cmd.arg("--data-dir")
            .arg(self.data())
            .arg("--jobs-dir")
            .arg(self.jobs())
            .args(args)
            .env_remove("PADDOCK_DB")
            // The user's own config file (docs/cli.md) stays out of tests.
            .env("XDG_CONFIG_HOME", self.path().join("config"))
            .stdin(std::process::Stdio::null());
        cmd
    }

    pub async fn store(&self) -> SqliteStore {
        SqliteStore::open(&self.db()).await.unwrap()
    }

    /// Workspaces left under the jobs directory, and job leases left in
    /// its `.leases/` (as `.leases/NAME`).
    pub fn leftover_workspaces(&self) -> Vec<String> {
        let names = |dir: &Path| -> Vec<String> {
            match std::fs::read_dir(dir) {
                Ok(rd) => rd
                    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect(),
                Err(_) => Vec::new(),
            }
        };
        let mut out: Vec<String> = names(&self.jobs())
            .into_iter()
            .filter(|n| n != ".leases")
            .collect();
        out.extend(
            names(&self.jobs().join(".leases"))
                .into_iter()
                .map(|n| format!(".leases/{n}")),
        );
        out
    }
}

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@localhost")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@localhost")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A real git repository with one commit on `main`.
pub fn repo(dir: &Path) -> PathBuf {
    let r = dir.join("repo");
    std::fs::create_dir_all(&r).unwrap();
    git(&r, &["init", "-q", "-b", "main"]);
    std::fs::write(r.join("README.md"), "# sample\n\nA sample repository.\n").unwrap();
    git(&r, &["add", "."]);
    git(&r, &["commit", "-q", "-m", "init"]);
    r
}

/// The model each engine is run with in tests.
pub fn model(engine: &str) -> &'static str {
    match engine {
        "codex" => "gpt-5.5",
        _ => "claude-sonnet-4-5",
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

/// True when Paddock's sandbox can start on this host (`paddock doctor`
/// says so); otherwise prints why and returns false locally, and fails in
/// CI.
pub fn sandbox_available() -> bool {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_paddock"))
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rung = report["rungs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "sandbox")
        .cloned()
        .unwrap();
    if rung["supported"] == true {
        return true;
    }
    let why = rung["detail"].as_str().unwrap_or("?").to_string();
    if in_ci() {
        panic!("the sandbox rung is not available in CI: {why}");
    }
    eprintln!("skipping: the sandbox rung is not available here: {why}");
    false
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

/// A stand-in provider on loopback that replays `scenario` only to calls
/// carrying `key` (it answers 401 otherwise): OpenAI's wire for Codex,
/// Anthropic's for Claude Code.
pub struct KeyedProvider {
    pub server: paddock_test_support::MockUpstream,
    /// `openai` or `anthropic`.
    pub name: &'static str,
    /// The base URL in the convention of the provider's spec field.
    pub base: String,
}

impl KeyedProvider {
    pub async fn start(home: &Home, engine: &str, scenario: &str, key: &str) -> KeyedProvider {
        use paddock::scripted::{RenderContext, Scenario};
        let scenario = Scenario::from_toml(scenario, Path::new("provider.toml")).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = paddock_test_support::MockUpstream::start(
            listener,
            std::sync::Arc::new(scenario),
            RenderContext {
                workdir: home.path().to_path_buf(),
            },
            Some(paddock::broker::Secret::new(key.to_string())),
        )
        .unwrap();
        let (name, base) = match engine {
            "codex" => ("openai", server.base.clone()),
            // ANTHROPIC_BASE_URL convention: without `/v1`.
            _ => ("anthropic", server.base.trim_end_matches("/v1").to_string()),
        };
        KeyedProvider { server, name, base }
    }

    /// The spec's provider lines (without the `[upstream]` header); the key
    /// is read from `PADDOCK_E2E_KEY`.
    pub fn spec_lines(&self) -> String {
        format!(
            "provider = \"{}\"\nkey = \"env:PADDOCK_E2E_KEY\"\nbase_url = \"{}\"",
            self.name, self.base
        )
    }
}

/// Two turns for the cloud-provider tests: a shell command that saves the
/// engine's own environment into the checkout (the key scan reads it), all
/// four token kinds metered, then a closing message.
pub const PROVIDER_PROBE: &str = r#"
[[turn]]
usage = { input = 10, cached = 20, cache_write = 30, output = 5 }
[[turn.action]]
type = "shell"
command = "tr '\\0' '\\n' < /proc/$PPID/environ > engine-env.txt; echo probed"

[[turn]]
text = "Probed."
usage = { input = 12, output = 3 }
"#;

/// A mock model provider on loopback for the credential tests: answers every
/// POST with one whole (non-streamed) answer in the wire of the path
/// (Anthropic Messages for Vertex and Bedrock paths, Chat Completions
/// otherwise) and records each request's `authorization` header (`-` when
/// absent). Returns its base URL (without `/v1`) and the record.
pub async fn mock_upstream() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
        let record = record.clone();
        async move {
            let auth = req
                .headers()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("-")
                .to_string();
            record.lock().unwrap().push(auth);
            let body = if req.uri().path().contains("/chat/completions") {
                serde_json::json!({"id": "chatcmpl-1", "object": "chat.completion",
                    "model": "gpt-5.5", "choices": [{"index": 0, "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "ok"}}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}})
            } else {
                serde_json::json!({"id": "msg_1", "type": "message", "role": "assistant",
                    "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": "ok"}],
                    "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": 1}})
            };
            (
                [(http::header::CONTENT_TYPE, "application/json")],
                body.to_string(),
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, seen)
}

/// A broker for a credential test: `provider` at `base`, no budget, the
/// shipped prices.
pub async fn credential_broker(
    base: String,
    provider: paddock::broker::Provider,
) -> paddock::broker::BrokerHandle {
    paddock::broker::start(
        tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        paddock::broker::BrokerConfig {
            job_id: "job-credentials".into(),
            attempt: 1,
            upstream: paddock::broker::Upstream { base, provider },
            prices: std::sync::Arc::new(paddock::broker::PriceTable::vendored().unwrap()),
            ceilings: vec![],
            allowlist: paddock::broker::ModelAllowlist::any(),
            allow_unpriced: false,
            retry: paddock::broker::RetryPolicy::default(),
            max_upstream_event_bytes: 16 << 20,
            ledger: std::sync::Arc::new(paddock::broker::ledger::MemoryLedger::default()),
        },
    )
    .unwrap()
}

/// A tmpfs of a given size mounted on a directory for a test (a data
/// directory that fills up), unmounted when dropped.
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts it; `None` (with a printed reason locally, a failure in CI)
    /// where this process cannot mount.
    pub fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "paddock-test"])
            .arg(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return Some(Tmpfs(dir.to_path_buf()));
        }
        if in_ci() {
            panic!("cannot mount a tmpfs on {} in CI", dir.display());
        }
        eprintln!("skipping: cannot mount a tmpfs here (needs root)");
        None
    }

    /// Gives it room again (64 MB).
    pub fn grow(&self) {
        let ok = std::process::Command::new("mount")
            .args(["-o", "remount,size=64m"])
            .arg(&self.0)
            .status()
            .unwrap();
        assert!(ok.success());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
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

/// A job spec in `dir` (with its repository, `dir/repo`) on `rung` whose
/// engine is the shell script `body` (run as Codex, `dir/fakebin/codex`),
/// with `timeout_secs`.
pub fn stand_in_job(dir: &Path, rung: &str, body: &str, timeout_secs: u64) -> PathBuf {
    const ONE_TURN: &str = "[[turn]]\ntext = \"hi\"\nusage = { input = 1, output = 1 }\n";
    let repo = repo(dir);
    let bin = dir.join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let engine = bin.join("codex");
    // The stand-in answers the start's version check as the pinned Codex.
    std::fs::write(
        &engine,
        format!(
            "#!/bin/sh\n[ \"$1\" = --version ] && {{ echo 'codex-cli {}'; exit 0; }}\n{body}\n",
            paddock::engines::codex::PIN.version
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&engine, std::fs::Permissions::from_mode(0o755)).unwrap();
    let spec = job(dir, "codex", &repo, SCRIPTED, Some(ONE_TURN));
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace(
            "[engine]\n",
            &format!("[engine]\nbinary = \"{}\"\n", engine.display()),
        )
        .replace(
            "timeout_secs = 120",
            &format!("timeout_secs = {timeout_secs}"),
        );
    // A budget, so the job's only `error` events are the faults' own.
    std::fs::write(&spec, format!("{text}\n[budget]\nmax_usd = 1.0\n")).unwrap();
    on_rung(&spec, rung);
    spec
}

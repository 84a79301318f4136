//! Redaction by attack: a provider that echoes the job's provider key in its
//! error message (as OpenAI does for a wrong key), with the real engines.
//! The key is a known secret value that matches no token pattern, so only
//! value redaction can catch it; it must not appear in any event, ledger
//! row, job record, artifact or output of Paddock.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use paddock_protocol::{EventBody, JobStatus};
use paddock_test_support::prelude::*;

async fn an_echoed_provider_key_is_redacted(engine: &str) {
    let Some(_) = paddock_test_support::prelude::engine(engine) else {
        return;
    };
    let home = Home::new();
    let repo = repo(home.path());
    let key = format!("paddock-known-secret-{}-value", std::process::id());
    let scenario = format!(
        r#"
[[turn]]
error = {{ status = 400, message = "Incorrect API key provided: {key}." }}
"#
    );
    let provider = KeyedProvider::start(&home, engine, &scenario, &key).await;
    let upstream = format!(
        "[upstream]
{}
",
        provider.spec_lines()
    );
    let spec = job(home.path(), engine, &repo, &upstream, None);
    let out = home
        .paddock(
            &["run", "--json", spec.to_str().unwrap()],
            &[("PADDOCK_E2E_KEY", &key), ("PADDOCK_LOG", "debug")],
        )
        .await;
    let rec = record(&out);
    assert_eq!(rec.status, JobStatus::Failed);
    // The provider did answer with the key in its message.
    assert!(!provider.server.requests().is_empty());

    let store = home.store().await;
    let calls = store.model_calls(&rec.id).await.unwrap();
    let errors: Vec<String> = calls.iter().filter_map(|c| c.error.clone()).collect();
    assert!(!errors.is_empty(), "{calls:?}");
    for e in &errors {
        assert!(e.contains("Incorrect API key provided: [REDACTED]."), "{e}");
    }
    let events = store.events(&rec.id, 0).await.unwrap();
    assert!(
        events.iter().any(|e| matches!(&e.body, EventBody::Error { message, .. } if message.contains("[REDACTED]"))),
        "{events:#?}"
    );
    for e in &events {
        let json = serde_json::to_string(e).unwrap();
        assert!(!json.contains(&key), "{json}");
    }
    assert!(!rec.reason.clone().unwrap_or_default().contains(&key));
    // The job's own files (its home, where the engine stored the message
    // too) are deleted by the remover `paddock run` starts as it exits:
    // what is looked at is what is left once it is done.
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
    for dir in [home.data(), home.jobs()] {
        assert_eq!(
            files_containing(&dir, key.as_bytes()),
            Vec::<PathBuf>::new()
        );
    }
    assert!(!String::from_utf8_lossy(&out.stdout).contains(&key));
    assert!(!String::from_utf8_lossy(&out.stderr).contains(&key));
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_an_echoed_provider_key_is_redacted() {
    an_echoed_provider_key_is_redacted("codex").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_an_echoed_provider_key_is_redacted() {
    an_echoed_provider_key_is_redacted("claude").await;
}

/// `--keep`: the event that reports the kept workspace is redacted like any
/// other; the real path is printed on stderr for the user.
#[tokio::test(flavor = "multi_thread")]
async fn a_kept_workspace_is_named_on_stderr_not_in_events() {
    let Some(_) = paddock_test_support::prelude::engine("codex") else {
        return;
    };
    let home = Home::new();
    let spec = scripted_job(&home, "[[turn]]\ntext = \"Done.\"\n");
    let out = home
        .paddock(&["run", "--json", "--keep", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    assert_eq!(rec.status, JobStatus::Done, "reason: {:?}", rec.reason);
    let root = home.jobs().join(&rec.id);
    assert!(root.join("work").is_dir());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("paddock: workspace kept at {}\n", root.display())),
        "{stderr}"
    );
    let events = home.store().await.events(&rec.id, 0).await.unwrap();
    assert!(events.iter().any(|e| e.body
        == EventBody::Status {
            phase: paddock_protocol::Phase::Concluding,
            detail: Some("workspace kept at <job-dir>".into()),
        }));
}

/// What a stand-in engine on the `process` rung could read of its parent
/// (`paddock run`, which holds the provider key), run as `uid`.
async fn what_the_engine_reads_of_paddock(uid: u32) -> String {
    let home = Home::new();
    let repo = repo(home.path());
    let key = format!("paddock-known-secret-{}-value", std::process::id());
    let bin = home.path().join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let codex = bin.join("codex");
    // The positive twin is inside: a same-uid process that is not
    // non-dumpable (the engine's own child) is readable.
    paddock_test_support::script::write_script(&codex, "#!/bin/sh\n{\n\
         echo \"parent $(cat /proc/$PPID/comm)\"\n\
         (tr '\\0' '\\n' < /proc/$PPID/environ) >/dev/null 2>&1 && echo parent-environ-readable\n\
         grep -qa paddock-known-secret /proc/$PPID/environ 2>/dev/null && echo key-in-environ\n\
         (exec 3</proc/$PPID/mem) 2>/dev/null && echo parent-mem-openable\n\
         grep -qa paddock-known-secret /proc/$PPID/cmdline 2>/dev/null && echo key-in-cmdline\n\
         sleep 5 & tr '\\0' '\\n' < /proc/$!/environ >/dev/null 2>&1 && echo child-environ-readable\n\
         kill $!\n} > \"$HOME/seen\" 2>&1\n");
    let upstream = "[upstream]\nprovider = \"openai\"\nkey = \"env:PADDOCK_E2E_KEY\"\nbase_url = \"http://127.0.0.1:9/v1\"\n";
    let spec = job(home.path(), "codex", &repo, upstream, None);
    use_engine_binary(&spec, &codex);
    on_rung(&spec, "process");
    for entry in walk(home.path()) {
        nix::unistd::chown(
            &entry,
            Some(nix::unistd::Uid::from_raw(uid)),
            Some(nix::unistd::Gid::from_raw(uid)),
        )
        .unwrap();
    }
    let mut cmd = if uid == nix::unistd::geteuid().as_raw() {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_paddock"))
    } else {
        let mut c = tokio::process::Command::new("setpriv");
        c.arg(format!("--reuid={uid}"))
            .arg(format!("--regid={uid}"))
            .arg("--clear-groups")
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_paddock"));
        c
    };
    let out = cmd
        .arg("--data-dir")
        .arg(home.data())
        .arg("--jobs-dir")
        .arg(home.jobs())
        .args(["run", "--json", "--keep", spec.to_str().unwrap()])
        .env_remove("PADDOCK_DB")
        .env("HOME", home.path())
        .env("PADDOCK_E2E_KEY", &key)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    let rec = record(&out);
    std::fs::read_to_string(home.jobs().join(&rec.id).join("home/seen")).unwrap_or_else(|e| {
        panic!(
            "the stand-in engine left nothing ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() && !p.is_symlink() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// On the `process` rung the engine runs as the caller's uid, next to the
/// `paddock` process that holds the provider key: `paddock` is
/// non-dumpable, so the engine can read neither its environment (where the
/// kernel keeps the original `env:` variable) nor its memory. A root engine
/// keeps CAP_SYS_PTRACE and still can: the documented limit of that rung.
#[tokio::test(flavor = "multi_thread")]
async fn an_engine_on_the_process_rung_cannot_read_paddocks_environment_or_memory() {
    let me = nix::unistd::geteuid().as_raw();
    let unprivileged = if me == 0 { 64_125 } else { me };
    assert_eq!(
        what_the_engine_reads_of_paddock(unprivileged).await,
        "parent paddock\nchild-environ-readable\n"
    );
    if me == 0 && has_cap_sys_ptrace() {
        // The limit, as documented: root with CAP_SYS_PTRACE reads its
        // parent's environment and memory. That parent is the supervisor
        // (`paddock __supervise`), which never held the key; `paddock`
        // itself, one level up, is as readable to root.
        assert_eq!(
            what_the_engine_reads_of_paddock(0).await,
            "parent paddock\nparent-environ-readable\nparent-mem-openable\nchild-environ-readable\n"
        );
    } else {
        eprintln!("skipping the root half: not root with CAP_SYS_PTRACE");
    }
}

/// Whether this process has CAP_SYS_PTRACE (bit 19) in its effective set.
fn has_cap_sys_ptrace() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 19) != 0)
}

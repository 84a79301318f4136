//! Every job reaches a final state and leaves nothing behind (issue #9):
//! for each fault (kill -9 of `paddock`, SIGTERM, SIGINT, SIGHUP, a full
//! data directory, an engine crash, an engine hang past the timeout,
//! garbage output) on each rung (`process`, `sandbox`) with each engine
//! kind (Codex, Claude Code), after the run (and a `paddock gc` when
//! `paddock` was killed) there is no `running` row, no workspace, no lease,
//! no cgroup and no process of the job, and the job's ledger rows are the
//! calls its upstream answered. The real engines are used where the fault
//! can be induced on them (signals and the hang: a scripted shell command
//! that sleeps), a stand-in script otherwise. Cases run four at a time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use paddock_protocol::JobStatus;
use paddock_test_support::prelude::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Kill9,
    Term,
    Int,
    Hup,
    DiskFull,
    Crash,
    Hang,
    Garbage,
}

impl Fault {
    /// The fault is induced on the real engine (else a stand-in script).
    fn real_engine(self) -> bool {
        matches!(
            self,
            Fault::Kill9 | Fault::Term | Fault::Int | Fault::Hup | Fault::Hang
        )
    }

    fn signal(self) -> Option<Signal> {
        match self {
            Fault::Kill9 => Some(Signal::SIGKILL),
            Fault::Term => Some(Signal::SIGTERM),
            Fault::Int => Some(Signal::SIGINT),
            Fault::Hup => Some(Signal::SIGHUP),
            _ => None,
        }
    }

    /// `paddock run`'s exit code.
    fn exit(self) -> Option<i32> {
        match self {
            Fault::Kill9 => None,
            Fault::Term | Fault::Int | Fault::Hup => Some(5),
            Fault::DiskFull => Some(70),
            Fault::Crash | Fault::Garbage => Some(1),
            Fault::Hang => Some(4),
        }
    }

    /// The job's final status.
    fn status(self) -> JobStatus {
        match self {
            Fault::Term | Fault::Int | Fault::Hup => JobStatus::Cancelled,
            Fault::Hang => JobStatus::TimedOut,
            _ => JobStatus::Failed,
        }
    }
}

/// The scripted turn the real engines run: a shell command that marks its
/// start in the checkout and sleeps.
const SLEEPING: &str = r#"
[[turn]]
usage = { input = 10, output = 5 }
[[turn.action]]
type = "shell"
command = "touch started; sleep 120"

[[turn]]
text = "Done."
"#;

/// The stand-in engines of the other faults.
fn stand_in(fault: Fault) -> &'static str {
    match fault {
        Fault::Crash => "echo changed >> README.md; echo 'about to crash' >&2; kill -SEGV $$",
        Fault::Garbage => "head -c 300000 /dev/urandom; echo; exit 0",
        // Lines the store fills up with; then it waits to be stopped.
        _ => {
            "i=0; while [ $i -lt 4000 ]; do echo '{\"type\":\"item.completed\",\"item\":{\"id\":\"i\",\"type\":\"agent_message\",\"text\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}}'; i=$((i+1)); done; sleep 60"
        }
    }
}

/// Runs one case; what it found wrong (empty when the invariant holds).
async fn case(fault: Fault, rung: &'static str, engine: &'static str) -> Vec<String> {
    let name = format!("{fault:?} on {rung} with {engine}");
    let mut wrong = Vec::new();
    let home = Home::new();
    let repo = repo(home.path());
    let mut provider = None;
    let mut env: Vec<(&str, &str)> = Vec::new();
    let spec = if fault.real_engine() {
        let p = KeyedProvider::start(&home, engine, SLEEPING, "sk-invariant-key-0123456789").await;
        let upstream = format!("[upstream]\n{}\n", p.spec_lines());
        provider = Some(p);
        env.push(("PADDOCK_E2E_KEY", "sk-invariant-key-0123456789"));
        job(home.path(), engine, &repo, &upstream, None)
    } else {
        let spec = job(
            home.path(),
            engine,
            &repo,
            SCRIPTED,
            Some("[[turn]]\ntext = \"hi\"\n"),
        );
        // In a directory of its own: the sandbox refuses an engine whose
        // directory holds the jobs directory (docs/sandbox.md).
        let bin = home.path().join("fakebin");
        std::fs::create_dir_all(&bin).unwrap();
        let script = bin.join("engine.sh");
        paddock_test_support::script::write_script(
            &script,
            &format!("#!/bin/sh\n{}\n", stand_in(fault)),
        );
        use_engine_binary(&spec, &script);
        spec
    };
    if fault == Fault::Hang {
        let text = std::fs::read_to_string(&spec)
            .unwrap()
            .replace("timeout_secs = 120", "timeout_secs = 8");
        std::fs::write(&spec, text).unwrap();
    }
    on_rung(&spec, rung);
    let disk = if fault == Fault::DiskFull {
        let Some(disk) = Tmpfs::mount(&home.data(), "1m") else {
            return wrong;
        };
        drop(home.store().await);
        Some(disk)
    } else {
        None
    };
    let mut cmd = home.command(&["run", "--json", spec.to_str().unwrap()]);
    for (k, v) in &env {
        cmd.env(k, v);
    }
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(sig) = fault.signal() {
        if fault == Fault::Kill9 {
            // Killed right after the upstream answered the first call,
            // before the answer can have reached the engine: the call's
            // cost must be on the ledger all the same (its row is written
            // before the call leaves; `paddock gc` settles it).
            let answered = || provider.as_ref().map_or(0, |p| p.server.requests().len());
            for _ in 0..6000 {
                if answered() > 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            if answered() == 0 {
                wrong.push(format!("{name}: the engine never called its upstream"));
            }
        } else if !created_in_work(&home, "started").await {
            wrong.push(format!("{name}: the engine never ran its command"));
        }
        let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
        nix::sys::signal::kill(pid, sig).unwrap();
    }
    let out = match tokio::time::timeout(Duration::from_secs(90), child.wait_with_output()).await {
        Ok(out) => out.unwrap(),
        Err(_) => return vec![format!("{name}: paddock did not end")],
    };
    if out.status.code() != fault.exit() {
        wrong.push(format!(
            "{name}: exit {:?}, expected {:?}: {}",
            out.status.code(),
            fault.exit(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    if let Some(d) = &disk {
        d.grow();
    }
    if matches!(fault, Fault::Kill9 | Fault::DiskFull) {
        let gc = home.paddock(&["gc"], &[]).await;
        if gc.status.code() != Some(0) {
            wrong.push(format!(
                "{name}: gc: {}",
                String::from_utf8_lossy(&gc.stderr)
            ));
        }
    }
    let store = home.store().await;
    let jobs = store.jobs(10).await.unwrap();
    let [job] = jobs.as_slice() else {
        return vec![format!("{name}: {} jobs in the store", jobs.len())];
    };
    if job.status != fault.status() {
        wrong.push(format!(
            "{name}: job {:?} ({:?}), expected {:?}",
            job.status,
            job.reason,
            fault.status()
        ));
    }
    let left = home.leftover_workspaces();
    if !left.is_empty() {
        wrong.push(format!("{name}: left {left:?}"));
    }
    let cgroups = paddock::leftovers::cgroups(Path::new("/sys/fs/cgroup"), &job.id);
    if !cgroups.is_empty() {
        wrong.push(format!("{name}: left cgroups {cgroups:?}"));
    }
    let killed = paddock::leftovers::kill_processes(&home.jobs().join(&job.id), None);
    if killed > 0 {
        wrong.push(format!("{name}: {killed} process(es) of the job still ran"));
    }
    let calls = store.model_calls(&job.id).await.unwrap();
    let in_flight: Vec<u64> = calls
        .iter()
        .filter(|c| c.status == paddock_protocol::CallStatus::InFlight)
        .map(|c| c.seq)
        .collect();
    if !in_flight.is_empty() {
        wrong.push(format!(
            "{name}: ledger rows still in flight: {in_flight:?}"
        ));
    }
    let rows = calls.len();
    let answered = provider.map_or(0, |p| p.server.requests().len());
    if rows != answered {
        wrong.push(format!(
            "{name}: {rows} ledger row(s), the upstream answered {answered} call(s)"
        ));
    }
    wrong
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_job_ends_and_leaves_nothing_behind() {
    let mut engines = Vec::new();
    for e in ["codex", "claude"] {
        if engine(e).is_some() {
            engines.push(e);
        }
    }
    let mut rungs = vec!["process"];
    if sandbox_available() {
        rungs.push("sandbox");
    }
    let slots = Arc::new(tokio::sync::Semaphore::new(4));
    let mut cases = Vec::new();
    for fault in [
        Fault::Kill9,
        Fault::Term,
        Fault::Int,
        Fault::Hup,
        Fault::DiskFull,
        Fault::Crash,
        Fault::Hang,
        Fault::Garbage,
    ] {
        for rung in &rungs {
            for engine in &engines {
                let (rung, engine, slots) = (*rung, *engine, slots.clone());
                cases.push(tokio::spawn(async move {
                    let _slot = slots.acquire_owned().await.unwrap();
                    case(fault, rung, engine).await
                }));
            }
        }
    }
    let mut wrong = Vec::new();
    for c in cases {
        wrong.extend(c.await.unwrap());
    }
    assert_eq!(wrong, Vec::<String>::new());
}

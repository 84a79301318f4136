//! One store shared by two "hosts": two Paddock homes (data and jobs
//! directories, so two host ids) on one SQLite file and on one real
//! PostgreSQL database. Host B's `paddock gc` and `paddock run` leave a
//! job host A is running alone, past B's TTL, because A renews its
//! heartbeat, and A finishes it `done`; A killed with SIGKILL has its job
//! reclaimed by B's gc only once its heartbeat is older than B's TTL, the
//! store's part only, with a reason naming A and its last heartbeat; an A
//! whose job B reclaimed while it was alive (its renewals too rare for B's
//! TTL) stops the job at its next renewal, and neither its end nor its
//! events overwrite B's record.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use paddock::store::{PgUrl, SharedStore, StoreAt};
use paddock_protocol::event::{EventBody, Phase};
use paddock_protocol::JobStatus;
use paddock_test_support::postgres;
use paddock_test_support::prelude::*;

/// The store both hosts share.
pub(crate) enum Shared {
    Sqlite(PathBuf),
    Postgres(String),
}

impl Shared {
    /// `--db …` for a command.
    pub(crate) fn db(&self) -> String {
        match self {
            Shared::Sqlite(p) => p.display().to_string(),
            Shared::Postgres(url) => url.clone(),
        }
    }

    pub(crate) async fn open(&self) -> SharedStore {
        let at = match self {
            Shared::Sqlite(p) => StoreAt::File(p.clone()),
            Shared::Postgres(url) => StoreAt::Postgres(PgUrl::parse(url).unwrap()),
        };
        paddock::store::open_existing(&at).await.unwrap()
    }
}

/// A SQLite file under `dir`, then a fresh PostgreSQL database (none where
/// PostgreSQL is missing: skipped with the reason printed).
pub(crate) async fn backends(dir: &Path) -> Vec<Shared> {
    let mut out = vec![Shared::Sqlite(dir.join("shared.db"))];
    if let Some(db) = postgres::database().await {
        out.push(Shared::Postgres(db.url));
    }
    out
}

/// `home`'s config file with `[hosts]` `table`.
pub(crate) fn hosts_config(home: &Home, table: &str) {
    home.write_config(&format!("[hosts]\n{table}\n"));
}

/// A job whose stand-in Codex marks it started, waits for `go` (at most
/// 30 s), then finishes its turn.
pub(crate) fn waiting_job(home: &Home, go: &Path) -> PathBuf {
    let body = format!(
        "touch \"$TMPDIR/started\"\n\
         i=0; while [ ! -e '{go}' ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done\n\
         echo '{{\"type\":\"thread.started\",\"thread_id\":\"t\"}}'\n\
         echo '{{\"type\":\"turn.started\"}}'\n\
         echo '{{\"type\":\"turn.completed\",\"usage\":{{\"input_tokens\":1,\"cached_input_tokens\":0,\"output_tokens\":1}}}}'",
        go = go.display()
    );
    fake_codex_job(home, "process", &body, 120)
}

/// `paddock --db DB run --json SPEC` on `home`, not started.
pub(crate) fn run_cmd(home: &Home, db: &Shared, spec: &Path) -> tokio::process::Command {
    let mut cmd = home.command(&["--db", &db.db(), "run", "--json", spec.to_str().unwrap()]);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd
}

/// Waits until a job under `home`'s jobs directory has `tmp/started`; its id.
pub(crate) async fn started(home: &Home) -> String {
    for _ in 0..600 {
        if let Ok(rd) = std::fs::read_dir(home.jobs()) {
            for e in rd.flatten() {
                if e.path().join("tmp/started").exists() {
                    return e.file_name().to_string_lossy().into_owned();
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no job started under {}", home.jobs().display());
}

/// `paddock gc --json` on `home`: its report.
pub(crate) async fn gc(home: &Home, db: &Shared) -> serde_json::Value {
    let out = home.paddock(&["--db", &db.db(), "gc", "--json"], &[]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The job ids a gc report names.
pub(crate) fn reaped(report: &serde_json::Value) -> Vec<String> {
    report["jobs"]
        .as_array()
        .map(|jobs| {
            jobs.iter()
                .map(|j| j["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The jobs directory's host id and this machine's name.
pub(crate) fn host_of(home: &Home) -> (String, String) {
    let id = std::fs::read_to_string(home.jobs().join(".host-id")).unwrap();
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    (id.trim().to_owned(), name.trim().to_owned())
}

#[tokio::test(flavor = "multi_thread")]
async fn another_hosts_gc_and_run_leave_a_live_job_alone_and_it_finishes_done() {
    let dir = tempfile::tempdir().unwrap();
    for db in backends(dir.path()).await {
        let (a, b) = (Home::new(), Home::new());
        hosts_config(&a, "heartbeat_secs = 1\nheartbeat_ttl_secs = 2");
        hosts_config(&b, "heartbeat_secs = 1\nheartbeat_ttl_secs = 2");
        let go = a.path().join("go");
        let spec = waiting_job(&a, &go);
        let job_a = run_cmd(&a, &db, &spec).spawn().unwrap();
        let id = started(&a).await;
        // Past B's TTL: only A's renewals keep its job fresh.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let report = gc(&b, &db).await;
        assert_eq!(reaped(&report), Vec::<String>::new(), "{report}");
        let quick = fake_codex_job(&b, "process", "true", 60);
        let out = run_cmd(&b, &db, &quick).output().await.unwrap();
        let quick_rec = record(&out);
        assert_eq!(quick_rec.status, JobStatus::Failed, "B's own job ran");
        let store = db.open().await;
        assert_eq!(
            store.job(&id).await.unwrap().unwrap().status,
            JobStatus::Running
        );
        std::fs::write(&go, "").unwrap();
        let out = job_a.wait_with_output().await.unwrap();
        let rec = record(&out);
        assert_eq!(
            (rec.id.as_str(), rec.status, out.status.code()),
            (id.as_str(), JobStatus::Done, Some(0)),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(store.job(&id).await.unwrap(), Some(rec));
        assert_ne!(host_of(&a).0, host_of(&b).0);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_hosts_job_is_reclaimed_by_another_only_after_the_ttl() {
    let dir = tempfile::tempdir().unwrap();
    for db in backends(dir.path()).await {
        let (a, b) = (Home::new(), Home::new());
        hosts_config(&a, "heartbeat_secs = 1\nheartbeat_ttl_secs = 2");
        hosts_config(&b, "heartbeat_secs = 1\nheartbeat_ttl_secs = 4");
        let spec = waiting_job(&a, &a.path().join("never"));
        let mut job_a = run_cmd(&a, &db, &spec).spawn().unwrap();
        let id = started(&a).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        job_a.kill().await.unwrap();
        let killed = Instant::now();
        let store = db.open().await;
        // A's last heartbeat, no longer renewed.
        let running = store.running_jobs().await.unwrap();
        assert_eq!(running.len(), 1, "{running:?}");
        let (owner, beat) = running[0].owner.clone().unwrap();
        assert_eq!((owner.host.clone(), owner.name.clone()), host_of(&a));
        let reclaimed = loop {
            let report = gc(&b, &db).await;
            if !reaped(&report).is_empty() {
                break report;
            }
            assert_eq!(
                store.job(&id).await.unwrap().unwrap().status,
                JobStatus::Running
            );
            // A guard, not the test: each `paddock gc` may take seconds
            // on a loaded host.
            assert!(
                killed.elapsed() < Duration::from_secs(120),
                "never reclaimed"
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        };
        // Not before B's TTL (4 s, not A's 2 s) since A's last renewal,
        // as the store has it: measured from that renewal, not from the
        // kill, since a loaded host may renew later than every second.
        let waited = time::OffsetDateTime::now_utc() - beat;
        assert!(
            waited >= time::Duration::seconds(4),
            "reclaimed {waited:?} after A's last renewal"
        );
        let (host, name) = host_of(&a);
        let at = beat
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap();
        let reason = format!(
            "the paddock process running this job on host {name} (jobs directory {host}) last \
             renewed its heartbeat at {at}, more than 4 s before host {}'s reaper looked: \
             reclaimed as dead; its workspace and processes on that host were not touched",
            host_of(&b).1
        );
        assert_eq!(
            reclaimed["jobs"],
            serde_json::json!([{
                "name": id,
                "killed": 0,
                "cgroups": [],
                "patch": null,
                "workspace_removed": false,
                "kept": false,
                "marked_failed": true,
                "reclaimed_from": format!("{name} ({host})"),
                "errors": [],
            }])
        );
        let rec = store.job(&id).await.unwrap().unwrap();
        assert_eq!(
            (rec.status, rec.reason.as_deref()),
            (JobStatus::Failed, Some(reason.as_str()))
        );
        let events = store.events(&id, 0).await.unwrap();
        assert_eq!(
            events.last().map(|e| &e.body),
            Some(&EventBody::Status {
                phase: Phase::Failed,
                detail: Some(reason.clone()),
            })
        );
        // B touched nothing of A's; A's own gc cleans up and leaves the
        // record as B wrote it.
        assert!(a.jobs().join(&id).is_dir());
        let report = gc(&a, &db).await;
        assert_eq!(reaped(&report), vec![id.clone()], "{report}");
        assert_eq!(report["jobs"][0]["marked_failed"], false);
        assert_eq!(store.job(&id).await.unwrap(), Some(rec));
        assert!(!a.jobs().join(&id).exists());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reclaimed_owner_that_is_alive_stops_and_cannot_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    for db in backends(dir.path()).await {
        let (a, b) = (Home::new(), Home::new());
        // A renews every 6 s; B takes 2 s without one for dead.
        hosts_config(&a, "heartbeat_secs = 6\nheartbeat_ttl_secs = 60");
        hosts_config(&b, "heartbeat_secs = 1\nheartbeat_ttl_secs = 2");
        let go = a.path().join("go");
        let spec = waiting_job(&a, &go);
        let job_a = run_cmd(&a, &db, &spec).spawn().unwrap();
        let id = started(&a).await;
        let store = db.open().await;
        let report = loop {
            let report = gc(&b, &db).await;
            if !reaped(&report).is_empty() {
                break report;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert_eq!(reaped(&report), vec![id.clone()]);
        let reclaimed = store.job(&id).await.unwrap().unwrap();
        let seen = store.events(&id, 0).await.unwrap();
        assert_eq!(reclaimed.status, JobStatus::Failed);
        // A learns at its next renewal and stops the job: its engine
        // never finishes (`go` never comes), its process says why.
        let out = job_a.wait_with_output().await.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(70), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "job {id} was reclaimed by another host's reaper (its heartbeat in the store \
                 was older than that host's TTL): it was stopped here"
            )),
            "{stderr}"
        );
        assert!(!go.exists());
        // B's record stands; A's events after B's are kept, dense.
        assert_eq!(store.job(&id).await.unwrap(), Some(reclaimed));
        let events = store.events(&id, 0).await.unwrap();
        assert_eq!(&events[..seen.len()], &seen[..]);
        assert!(events.len() > seen.len(), "A's own end left no event");
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
        // A cleaned up after itself: no workspace, no lease.
        assert_eq!(a.leftover_workspaces(), Vec::<String>::new());
    }
}

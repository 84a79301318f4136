//! Teardown after a crash: a `paddock run` killed mid-job leaves its
//! workspace, a `running` record, its cgroups (`sandbox` rung) and
//! processes outside the engine's tree (an orphaned `git`); `paddock gc`,
//! and the next `paddock run`, kill those, remove the cgroups, save the work so far,
//! remove the workspace, fail the job with the reason, a final status
//! event and its ledger's totals, and say so. A job that is still running
//! is left alone.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use paddock_protocol::event::{EventBody, Phase};
use paddock_protocol::JobStatus;
use paddock_test_support::prelude::*;

/// A job on the `process` rung whose `codex` is `script`.
fn stand_in_job(home: &Home, name: &str, script: &str) -> PathBuf {
    stand_in_job_on(home, name, script, "process")
}

/// A job on `rung` whose `codex` is `script`.
fn stand_in_job_on(home: &Home, name: &str, script: &str, rung: &str) -> PathBuf {
    let dir = home.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let repo = repo(&dir);
    let codex = dir.join("codex");
    paddock_test_support::script::write_script(&codex, &format!("#!/bin/sh\n{script}\n"));
    let spec = job(
        &dir,
        "codex",
        &repo,
        SCRIPTED,
        Some("[[turn]]\ntext = \"hi\"\nusage = { input = 1000, output = 500 }\n"),
    );
    use_engine_binary(&spec, &codex);
    on_rung(&spec, rung);
    spec
}

/// Waits until a job directory under `jobs` has `tmp/started`; its name.
async fn started(jobs: &Path) -> String {
    for _ in 0..300 {
        if let Ok(rd) = std::fs::read_dir(jobs) {
            for e in rd.flatten() {
                if e.path().join("tmp/started").exists() {
                    return e.file_name().to_string_lossy().into_owned();
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no job started under {}", jobs.display());
}

/// The processes whose environment has `HOME=home` (this user's).
fn with_home(home: &Path) -> Vec<i32> {
    let wanted = format!("HOME={}", home.display());
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|p| {
            let pid: i32 = p.file_name().to_str()?.parse().ok()?;
            let env = std::fs::read(p.path().join("environ")).ok()?;
            env.split(|b| *b == 0)
                .any(|v| v == wanted.as_bytes())
                .then_some(pid)
        })
        .collect()
}

/// A process left in a dead job's checkout, as the `git` of a `paddock`
/// killed mid-clone would be: outside the engine's tree (which dies with
/// its `paddock`), so only the reaper can end it.
fn orphan_in(job_dir: &Path) -> std::process::Child {
    std::process::Command::new("sleep")
        .arg("60")
        .current_dir(job_dir.join("work"))
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// The signal that ended `child` (SIGKILL from the reaper).
fn killed_by(mut child: std::process::Child) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt as _;
    child.wait().unwrap().signal()
}

/// Runs `spec` and kills its `paddock run` (SIGKILL) once its job
/// started; the job's name.
async fn killed_once_started(home: &Home, spec: &Path) -> String {
    let mut run = paddock_cmd(home, spec).spawn().unwrap();
    let crashed = started(&home.jobs()).await;
    run.kill().await.unwrap();
    run.wait().await.unwrap();
    crashed
}

fn paddock_cmd(home: &Home, spec: &Path) -> tokio::process::Command {
    let mut cmd = home.command(&["run", "--json", spec.to_str().unwrap()]);
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    cmd
}

#[tokio::test(flavor = "multi_thread")]
async fn the_next_run_reaps_what_a_killed_run_left_behind() {
    let home = Home::new();
    // The stand-in engine waits for a file that never comes (and gives up
    // on its own after 20 s, so that the orphan it becomes ends too).
    let slow = stand_in_job(
        &home,
        "slow",
        "touch \"$TMPDIR/started\"; i=0; while [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done",
    );
    let mut killed = paddock_cmd(&home, &slow).spawn().unwrap();
    let crashed = started(&home.jobs()).await;

    // A second run while the first one is alive leaves its job alone.
    let mut alive = paddock_cmd(&home, &slow).spawn().unwrap();
    let running = loop {
        let names = home.leftover_workspaces();
        if let Some(n) = names.iter().find(|n| **n != crashed && !n.starts_with('.')) {
            if home.jobs().join(n).join("tmp/started").exists() {
                break n.clone();
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(home.jobs().join(&crashed).is_dir());

    killed.kill().await.unwrap();
    killed.wait().await.unwrap();
    let crashed_home = home.jobs().join(&crashed).join("home");
    let orphan = orphan_in(&home.jobs().join(&crashed));
    let store = home.store().await;
    assert_eq!(
        store.job(&crashed).await.unwrap().unwrap().status,
        JobStatus::Running
    );

    let quick = stand_in_job(&home, "quick", "true");
    let out = home
        .paddock(&["run", "--json", quick.to_str().unwrap()], &[])
        .await;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let line = stderr
        .lines()
        .find(|l| l.contains(&crashed))
        .unwrap_or_else(|| panic!("{stderr}"));
    let prefix = format!("paddock: {crashed}: its paddock process ended mid-job; killed ");
    let suffix = format!(
        " process(es) it left running, saved its patch so far (0 file(s)) to {}, removed its workspace, marked it failed",
        home.data().join("artifacts").join(&crashed).join("patch.diff").display()
    );
    assert!(
        line.starts_with(&prefix) && line.ends_with(&suffix),
        "{line}"
    );
    let killed_count: usize = line[prefix.len()..line.len() - suffix.len()]
        .parse()
        .unwrap();
    assert!(killed_count >= 1, "{line}");
    assert_eq!(killed_by(orphan), Some(9));
    assert_eq!(with_home(&crashed_home), Vec::<i32>::new());
    assert!(!stderr.contains(&running), "{stderr}");
    assert!(!home.jobs().join(&crashed).exists());
    assert!(home.jobs().join(&running).is_dir());

    let rec = store.job(&crashed).await.unwrap().unwrap();
    assert_eq!(
        (rec.status, rec.reason.as_deref()),
        (JobStatus::Failed, Some(paddock::reaper::REASON))
    );
    assert!(rec.finished_at.is_some());
    let last = store.events(&crashed, 0).await.unwrap().pop().unwrap();
    assert_eq!(
        last.body,
        EventBody::Status {
            phase: Phase::Failed,
            detail: Some(paddock::reaper::REASON.to_string()),
        }
    );

    alive.kill().await.unwrap();
    alive.wait().await.unwrap();
}

/// A `paddock serve` that cannot listen on its address says so and
/// nothing else: a killed run's job is left for the next pass, where before
/// the server reaped it (and said so) and only then found its port taken.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_cannot_bind_reaps_nothing() {
    let home = Home::new();
    let spec = stand_in_job(&home, "slow", CALLS_EDITS_AND_WAITS);
    let crashed = killed_once_started(&home, &spec).await;

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let out = home
        .paddock(&["serve", "--listen", &addr.to_string()], &[])
        .await;
    let port = addr.port();
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned()
        ),
        (
            Some(2),
            format!(
                "paddock: listen on {addr} (--listen): Address already in use (os error 98): \
                 another process (another `paddock serve`?) listens on port {port} already: \
                 stop it, or give another address with --listen ADDR or [serve] listen in the \
                 config file (port 0 picks a free one)\n"
            )
        )
    );
    let store = home.store().await;
    assert_eq!(
        store.job(&crashed).await.unwrap().unwrap().status,
        JobStatus::Running
    );
    assert!(home.jobs().join(&crashed).is_dir());

    // The next pass reaps it.
    let gc = home.paddock(&["gc"], &[]).await;
    assert_eq!(gc.status.code(), Some(0));
    assert_eq!(
        store.job(&crashed).await.unwrap().unwrap().status,
        JobStatus::Failed
    );
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
}

/// A stand-in Codex that makes one model call through its broker (as the
/// real one would, from its config), edits the checkout, says it started,
/// and then waits (giving up on its own after 20 s).
const CALLS_EDITS_AND_WAITS: &str = r#"url=$(sed -n 's/^base_url = "\(.*\)"$/\1/p' "$CODEX_HOME/config.toml")
curl -sS -o "$TMPDIR/answer" -H "Authorization: Bearer $PADDOCK_JOB_TOKEN" -H 'content-type: application/json' -d '{"model":"gpt-5.5","input":"hi","stream":true}' "$url/responses"
echo "changed by the job" > README.md
touch "$TMPDIR/started"
i=0; while [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done"#;

/// The cgroup directories of `name` under this host's hierarchies.
fn cgroups_of(name: &str) -> Vec<PathBuf> {
    paddock::leftovers::cgroups(Path::new(paddock::reaper::CGROUP_ROOT), name)
}

/// Kills a running `paddock run` (SIGKILL) once its job started, then runs
/// `paddock gc --json` and checks everything of the job is gone, its work
/// saved and its record failed with the ledger's totals.
async fn gc_after_kill(rung: &str) {
    let home = Home::new();
    let spec = stand_in_job_on(&home, "slow", CALLS_EDITS_AND_WAITS, rung);
    let mut run = paddock_cmd(&home, &spec).spawn().unwrap();
    let crashed = started(&home.jobs()).await;
    let cgroups = cgroups_of(&crashed);
    run.kill().await.unwrap();
    run.wait().await.unwrap();
    let crashed_home = home.jobs().join(&crashed).join("home");
    let orphan = orphan_in(&home.jobs().join(&crashed));

    let out = home.paddock(&["gc", "--json"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let mut report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Host gits other killed `paddock`s on this host left (this job's
    // patch reads may be among them): not what this test looks at.
    report.as_object_mut().unwrap().remove("orphaned_gits");
    let artifact = home
        .data()
        .join("artifacts")
        .join(&crashed)
        .join("patch.diff");
    let diff = std::fs::read_to_string(&artifact).unwrap();
    let job = &report["jobs"][0];
    // The orphan at least (the engine died with its paddock, or is found
    // still dying).
    assert!(job["killed"].as_u64().unwrap() >= 1, "{report}");
    let cgroup_paths: Vec<String> = cgroups.iter().map(|c| c.display().to_string()).collect();
    assert_eq!(
        report,
        serde_json::json!({
            "jobs": [{
                "name": crashed,
                "killed": job["killed"],
                "cgroups": cgroup_paths,
                "patch": {
                    "path": artifact.display().to_string(),
                    "changed_files": ["README.md"],
                    "bytes": diff.len(),
                },
                "workspace_removed": true,
                "kept": false,
                "marked_failed": true,
                "errors": [],
            }],
            // Other `paddock sandbox` runs of this host are not this test's.
            "sandbox_cgroups": report["sandbox_cgroups"],
            "errors": [],
        })
    );
    assert!(diff.contains("+changed by the job"), "{diff}");
    assert_eq!(killed_by(orphan), Some(9));
    assert_eq!(with_home(&crashed_home), Vec::<i32>::new());
    assert_eq!(cgroups_of(&crashed), Vec::<PathBuf>::new());
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());

    let store = home.store().await;
    let calls = store.model_calls(&crashed).await.unwrap();
    assert_eq!(calls.len(), 1);
    let rec = store.job(&crashed).await.unwrap().unwrap();
    assert_eq!(
        (
            rec.status,
            rec.reason.as_deref(),
            rec.model_calls,
            rec.tokens,
            rec.cost_micros,
            rec.patch_path,
            rec.changed_files,
        ),
        (
            JobStatus::Failed,
            Some(paddock::reaper::REASON),
            1,
            calls[0].tokens,
            calls[0].cost_micros,
            Some(artifact.display().to_string()),
            vec!["README.md".to_string()],
        )
    );
    assert!(rec.cost_micros > 0);
    let mut events = store.events(&crashed, 0).await.unwrap();
    let last = events.pop().unwrap().body;
    let summary = events.pop().unwrap().body;
    assert_eq!(
        (summary, last),
        (
            EventBody::ArtifactSummary {
                patch_path: artifact.display().to_string(),
                changed_files: vec!["README.md".into()],
                patch_bytes: diff.len() as u64,
                interrupted: true,
            },
            EventBody::Status {
                phase: Phase::Failed,
                detail: Some(paddock::reaper::REASON.to_string()),
            }
        )
    );

    // Nothing of this job is left for a second pass.
    let again = home.paddock(&["gc", "--json"], &[]).await;
    let report: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(
        (again.status.code(), &report["jobs"]),
        (Some(0), &serde_json::json!([]))
    );
}

/// A `paddock run` killed (SIGKILL) while its source is cloned, the
/// clone's git naming nothing of the job's directory (a host git on PATH
/// whose `clone` execs `sleep 614`, as a URL's mirror fetch or a
/// snapshot's clone names none): `paddock gc` kills that git, found by
/// the owner in its environment, says so, and fails the job. Before,
/// nothing ended it: the git outlived its `paddock` and every pass, its
/// time bound gone with the process that enforced it. Another home's
/// `paddock gc` on the same host leaves it to this home's pass (before,
/// any home's pass killed it, and this home's report missed it).
#[tokio::test(flavor = "multi_thread")]
async fn gc_kills_a_host_git_its_killed_run_left() {
    let home = Home::new();
    let spec = stand_in_job(&home, "cloning", "exit 0");
    let bin = home.path().join("slow-git");
    std::fs::create_dir_all(&bin).unwrap();
    let real = which::which("git").unwrap();
    paddock_test_support::script::write_script(
        &bin.join("git"),
        &format!(
            "#!/bin/sh
for a in \"$@\"; do\n  [ \"$a\" = clone ] && exec sleep 614\ndone\nexec '{}' \"$@\"\n",
            real.display()
        ),
    );
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mut run = paddock_cmd(&home, &spec);
    run.env("PATH", &path)
        .env("PADDOCK_WORKSPACE_LAYOUT", "clone");
    let mut run = run.spawn().unwrap();
    let mut cloning = Vec::new();
    for _ in 0..600 {
        cloning = paddock_test_support::processes::running_under(home.path(), b"sleep\x00614\x00");
        if !cloning.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(cloning.len(), 1, "the clone never began");
    run.kill().await.unwrap();
    run.wait().await.unwrap();
    let other = Home::new();
    let elsewhere = other.paddock(&["gc", "--json"], &[]).await;
    let elsewhere: serde_json::Value = serde_json::from_slice(&elsewhere.stdout).unwrap();
    assert_eq!(
        (
            elsewhere["orphaned_gits"]
                .as_array()
                .is_some_and(|a| a.iter().any(|p| p.as_u64() == Some(u64::from(cloning[0])))),
            paddock_test_support::processes::running_under(home.path(), b"sleep\x00614\x00"),
        ),
        (false, cloning.clone()),
        "{elsewhere}"
    );
    let out = home.paddock(&["gc", "--json"], &[]).await;
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let killed: Vec<u32> = report["orphaned_gits"]
        .as_array()
        .map(|a| a.iter().map(|p| p.as_u64().unwrap() as u32).collect())
        .unwrap_or_default();
    let job = home.store().await.jobs(10).await.unwrap().pop().unwrap();
    assert_eq!(
        (
            out.status.code(),
            killed.contains(&cloning[0]),
            paddock_test_support::processes::running_under(home.path(), b"sleep\x00614\x00"),
            job.status,
            home.leftover_workspaces(),
        ),
        (
            Some(0),
            true,
            Vec::<u32>::new(),
            JobStatus::Failed,
            Vec::<String>::new()
        ),
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn gc_cleans_up_after_a_killed_run_on_the_process_rung() {
    gc_after_kill("process").await;
}

/// On the `sandbox` rung the engine dies with its paddock, but its
/// cgroups stay (the helper that removes them was killed too).
#[tokio::test(flavor = "multi_thread")]
async fn gc_cleans_up_after_a_killed_run_on_the_sandbox_rung() {
    if !paddock_test_support::prelude::sandbox_available() {
        return;
    }
    gc_after_kill("sandbox").await;
}

/// A killed job whose work so far is within its disk but whose patch is
/// past `limits.max_disk_bytes` (three MiB of empty lines, a six MiB
/// diff, under a four MiB limit): the reaper saves no patch, says why,
/// and still removes the workspace and fails the job, as a concluded
/// job's too large result is not kept. Before, the reaper wrote the
/// whole diff (up to a GiB, whatever the job's limit) into the data
/// directory.
#[tokio::test(flavor = "multi_thread")]
async fn a_killed_jobs_patch_past_its_disk_limit_is_not_saved() {
    let home = Home::new();
    let script = "yes '' | head -c 3145728 > lines.txt\ntouch \"$TMPDIR/started\"\n\
                  i=0; while [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done";
    let spec = stand_in_job(&home, "big", script);
    let limit: u64 = 4 << 20;
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        "timeout_secs = 120",
        &format!("timeout_secs = 120\nmax_disk_bytes = {limit}"),
    );
    std::fs::write(&spec, text).unwrap();
    let crashed = killed_once_started(&home, &spec).await;

    let out = home.paddock(&["gc", "--json"], &[]).await;
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let job = &report["jobs"][0];
    let artifacts = home.data().join("artifacts").join(&crashed);
    let saved = artifacts.join("patch.diff").exists();
    assert_eq!(
        (
            &job["patch"],
            &job["errors"],
            &job["workspace_removed"],
            &job["marked_failed"],
            saved
        ),
        (
            &serde_json::Value::Null,
            &serde_json::json!([format!(
                "save the patch of {crashed}: its diff is more than {limit} bytes, past \
                 limits.max_disk_bytes or the {} bytes Paddock reads of a patch, whichever is \
                 less ({limit} bytes); it was stopped and no patch is kept",
                paddock::workspace::MAX_PATCH_BYTES
            )]),
            &serde_json::json!(true),
            &serde_json::json!(true),
            false
        ),
        "{report}"
    );
    let rec = home.store().await.job(&crashed).await.unwrap().unwrap();
    assert_eq!((rec.status, rec.patch_path), (JobStatus::Failed, None));
}

/// A job whose process died and whose lease file is gone too (a panic's
/// unwinding deleted it) is found by its `running` record.
#[tokio::test(flavor = "multi_thread")]
async fn gc_fails_a_running_job_that_has_no_lease_at_all() {
    let home = Home::new();
    let spec = stand_in_job(&home, "slow", CALLS_EDITS_AND_WAITS);
    let crashed = killed_once_started(&home, &spec).await;
    std::fs::remove_file(home.jobs().join(".leases").join(format!("{crashed}.lock"))).unwrap();
    let orphan = orphan_in(&home.jobs().join(&crashed));

    let out = home.paddock(&["gc"], &[]).await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.starts_with(&format!(
            "{crashed}: its paddock process ended mid-job; killed "
        )),
        "{stdout}"
    );
    assert!(
        stdout.ends_with(", removed its workspace, marked it failed\n"),
        "{stdout}"
    );
    assert_eq!(killed_by(orphan), Some(9));
    let store = home.store().await;
    let rec = store.job(&crashed).await.unwrap().unwrap();
    assert_eq!(
        (rec.status, rec.model_calls, rec.changed_files),
        (JobStatus::Failed, 1, vec!["README.md".to_string()])
    );
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
    assert_eq!(
        with_home(&home.jobs().join(&crashed).join("home")),
        Vec::<i32>::new()
    );
}

/// Teardown moves a job's directory into `<jobs>/.trash` and deletes it
/// off the job's path; a remover killed with SIGKILL half way (here: none
/// ever ran) leaves the trash to the next reaper pass, which deletes it
/// without following a link planted in it, and says nothing went wrong.
#[tokio::test]
async fn gc_deletes_the_trash_a_killed_remover_left_following_no_link() {
    let home = Home::new();
    let outside = home.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("keep.txt"), "keep").unwrap();
    let left = home.jobs().join(".trash/job-dead/work/src");
    std::fs::create_dir_all(&left).unwrap();
    for i in 0..50 {
        std::fs::write(left.join(format!("f{i}.rs")), "x").unwrap();
    }
    std::os::unix::fs::symlink(&outside, left.join("link")).unwrap();
    let out = home.paddock(&["gc", "--json"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["errors"], serde_json::json!([]), "{report}");
    assert_eq!(
        (
            home.leftover_workspaces(),
            std::fs::read_to_string(outside.join("keep.txt")).unwrap()
        ),
        (Vec::<String>::new(), "keep".to_string())
    );
}

/// The detached remover does its work at the lowest priority: nice 19,
/// `SCHED_IDLE`, the idle I/O class, so that the job started after the one
/// it cleans up after does not pay for its unmounts (issue #14). Read from
/// `/proc/PID/stat` (nice, policy) and `ioprio_get` of the real `paddock
/// __empty-trash` that `trash::start_waiting` starts, once released, while
/// it deletes a trash of 20,000 files; then the trash is empty. Before the
/// change it ran at nice 0 under `SCHED_OTHER` and no I/O class: the wait
/// for `SCHED_IDLE` timed out and the figures were (0, 0, 0).
///
/// And it holds the trash's lock from its release on, before its
/// checkpoint and at its normal priority: a reaper pass that does not wait
/// (the next `paddock run`'s start-up) leaves the trash to it rather than
/// deleting it on that job's path. Before, the lock was taken after the
/// checkpoint, and a start-up pass that came first did the deleting.
/// A job directory of 20,000 empty files in 100 directories in the trash
/// under `jobs`: long enough to delete that a remover is seen at it.
fn trash_of_20000_files(jobs: &Path) {
    let tree = jobs.join(".trash/job-x/work");
    for d in 0..100 {
        let dir = tree.join(format!("d{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..200 {
            std::fs::File::create(dir.join(format!("f{f}"))).unwrap();
        }
    }
}

/// (nice, policy) of a process's or thread's `stat`: fields 19 and 41,
/// counted after the command's name (which ends at the last `)`).
fn nice_and_policy(stat: &str) -> Option<(i32, i32)> {
    let rest: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some((rest.get(16)?.parse().ok()?, rest.get(38)?.parse().ok()?))
}

#[test]
fn the_detached_remover_works_at_the_lowest_priority_under_the_trash_lock() {
    use paddock::workspace::trash;
    let home = tempfile::tempdir().unwrap();
    let jobs = home.path().join("jobs");
    trash_of_20000_files(&jobs);
    let waiting =
        trash::start_waiting(Path::new(env!("CARGO_BIN_EXE_paddock")), &jobs, None, None).unwrap();
    let pid = waiting.id();
    waiting.release();
    // (nice, policy) of the main thread.
    let read =
        || nice_and_policy(&std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap()).unwrap();
    let io_class = || paddock_sandbox::idle::io_class(i32::try_from(pid).unwrap()).unwrap();
    // The remover lowers its policy, then its I/O class (`idle::lowest`):
    // both are waited for, since the class read as soon as the policy
    // changed was still the default under load.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while (read().1 != paddock_sandbox::idle::SCHED_IDLE
        || io_class() != paddock_sandbox::idle::IOPRIO_CLASS_IDLE)
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_micros(500));
    }
    let io = io_class();
    let (nice, policy) = read();
    // The remover holds the lock while it deletes: a pass that does not
    // wait leaves the trash alone.
    let left_to_it = trash::lock(&jobs, false).unwrap().is_none() && trash::has_entries(&jobs);
    // A hang guard, not a speed bound: at `SCHED_IDLE` the remover runs
    // only on a core nothing else wants, and beside a build on both cores
    // its 20,000 files took longer than a minute.
    let deadline = std::time::Instant::now() + Duration::from_secs(600);
    while trash::has_entries(&jobs) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        (nice, policy, io, left_to_it, trash::has_entries(&jobs)),
        (
            19,
            paddock_sandbox::idle::SCHED_IDLE,
            paddock_sandbox::idle::IOPRIO_CLASS_IDLE,
            true,
            false
        )
    );
}

/// The detached remover's cap pass keeps the normal priority while the
/// remover empties the trash at the lowest: it removes a cache entry
/// while holding the lock a job waits for to use it (a mirror's, a
/// snapshot's, the setup cache's), and a starved holder would hold that
/// job (a priority inversion). Seen in the real remover's threads while
/// it empties a trash of 20,000 files: one at nice 19 and `SCHED_IDLE`,
/// the cap's at its parent's nice and `SCHED_OTHER`; the cap then removes the mirror
/// over it. Before, the pass ran on the lowered thread: one thread only.
#[test]
fn the_detached_removers_cap_pass_keeps_the_normal_priority() {
    use paddock::workspace::trash;
    let home = tempfile::tempdir().unwrap();
    let jobs = home.path().join("jobs");
    trash_of_20000_files(&jobs);
    let mirror = jobs.join(".mirrors/k.git");
    std::fs::create_dir_all(mirror.join("objects")).unwrap();
    std::fs::write(mirror.join("objects/pack"), vec![b'x'; 64 * 1024]).unwrap();
    // Last used two days ago (its lock's time is its last use).
    let old = std::time::SystemTime::now() - Duration::from_secs(2 * 86_400);
    let lock = std::fs::File::create(jobs.join(".mirrors/k.lock")).unwrap();
    lock.set_modified(old).unwrap();
    std::fs::File::open(&mirror)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let waiting = trash::start_waiting(
        Path::new(env!("CARGO_BIN_EXE_paddock")),
        &jobs,
        Some(1),
        None,
    )
    .unwrap();
    let pid = waiting.id();
    waiting.release();
    // (nice, policy) of each of its threads, sorted.
    let threads = || -> Option<Vec<(i32, i32)>> {
        let mut out = Vec::new();
        for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
            out.push(nice_and_policy(
                &std::fs::read_to_string(task.ok()?.path().join("stat")).ok()?,
            )?);
        }
        out.sort();
        Some(out)
    };
    // This process's own nice (a test run under `nice`): the remover's
    // normal priority is its parent's.
    let own = nice_and_policy(&std::fs::read_to_string("/proc/self/stat").unwrap())
        .unwrap()
        .0;
    let both = vec![(own, 0), (19, paddock_sandbox::idle::SCHED_IDLE)];
    let mut saw_both = false;
    // A hang guard (the emptying thread runs at `SCHED_IDLE`, above).
    let deadline = std::time::Instant::now() + Duration::from_secs(600);
    while (trash::has_entries(&jobs) || mirror.exists()) && std::time::Instant::now() < deadline {
        saw_both |= threads().as_ref() == Some(&both);
        std::thread::sleep(Duration::from_micros(200));
    }
    assert_eq!(
        (saw_both, trash::has_entries(&jobs), mirror.exists()),
        (true, false, false)
    );
}

/// A finished `paddock run` leaves no job directory: moved into the trash
/// at teardown, deleted by the detached remover after the run exited.
#[tokio::test]
async fn a_finished_run_leaves_its_directory_to_the_detached_remover() {
    let home = Home::new();
    let spec = stand_in_job(&home, "quick", "exit 0");
    let out = paddock_cmd(&home, &spec).output().await.unwrap();
    assert_ne!(out.status.code(), Some(70), "{out:?}");
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
}

/// A finished `paddock run` leaves its store's write-ahead log folded in,
/// even while another process keeps the database open (as `paddock serve`
/// or a second job would, so that no close could fold the log in): the
/// detached pass after the run checkpoints it, then starts the next log,
/// which holds one page (its header synced by the pass, not by the next
/// job's first write). Before, the log kept every frame of the job (and, the
/// run's own close racing its exit, often did with nothing else open), and
/// the next `paddock` read them all back at start.
#[tokio::test]
async fn a_finished_run_leaves_the_stores_log_folded_in() {
    let home = Home::new();
    let spec = stand_in_job(&home, "quick", "exit 0");
    let db = home.db();
    let other = paddock::store::SqliteStore::open(&db).await.unwrap();
    let out = paddock_cmd(&home, &spec).output().await.unwrap();
    assert_ne!(out.status.code(), Some(70), "{out:?}");
    let (left, _) = next_log(&db).await;
    other.close().await;
    assert_eq!(left, STARTED_LOG);
}

/// A started log: its header and one frame of a 4 KiB page.
const STARTED_LOG: u64 = 32 + 24 + 4096;

/// Waits (up to 20 s) for the store `db`'s log to be a started one (the
/// detached pass after a run folds the old one in and starts it): its
/// length then, and its path.
async fn next_log(db: &Path) -> (u64, PathBuf) {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    let wal = PathBuf::from(wal);
    let wal_len = || std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    for _ in 0..400 {
        if wal_len() == STARTED_LOG {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (wal_len(), wal)
}

/// The log the pass after a run starts is still there after read-only
/// commands (`paddock jobs`, `show`, `events`, `usage`), which open the
/// store and leave their connections open at exit: had the last of them
/// closed, SQLite would have folded the log in and deleted it, and the
/// next job's first write would start a log again, syncing its header
/// and the directory on the job's path.
#[tokio::test]
async fn read_only_commands_leave_the_next_log_in_place() {
    let home = Home::new();
    let spec = stand_in_job(&home, "quick", "exit 0");
    let db = home.db();
    let out = paddock_cmd(&home, &spec).output().await.unwrap();
    assert_ne!(out.status.code(), Some(70), "{out:?}");
    let (left, wal) = next_log(&db).await;
    assert_eq!(left, STARTED_LOG);
    let wal_len = || std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    let started = STARTED_LOG;
    let mut after = Vec::new();
    for args in [
        &["jobs"][..],
        &["show", "latest"],
        &["events", "latest"],
        &["usage"],
    ] {
        let out = home.paddock(args, &[]).await;
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        after.push((args[0], wal_len()));
    }
    assert_eq!(
        after,
        vec![
            ("jobs", started),
            ("show", started),
            ("events", started),
            ("usage", started)
        ]
    );
}

/// A job killed with its `paddock` (SIGKILL) after its engine announced
/// its session: the session id is in its record from the announcement, so
/// `--attempt-after` it forks saying the session's files are gone (they
/// were never saved), not that it recorded no session (before: the id was
/// written only at the job's end, which a killed job never reaches).
#[tokio::test(flavor = "multi_thread")]
async fn a_killed_jobs_next_attempt_says_its_session_files_are_gone() {
    let home = Home::new();
    let session = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
    let marker = home.path().join("ran-once");
    let body = format!(
        "echo '{{\"type\":\"thread.started\",\"thread_id\":\"{session}\"}}'\n\
         if [ -e '{m}' ]; then exit 0; fi\n\
         touch '{m}' \"$TMPDIR/started\"\n\
         sleep 60",
        m = marker.display()
    );
    let spec = fake_codex_job(&home, "process", &body, 120);
    let mut run = paddock_cmd(&home, &spec).spawn().unwrap();
    let crashed = started(&home.jobs()).await;
    let store = home.store().await;
    let mut recorded = None;
    for _ in 0..600 {
        recorded = store.engine_session(&crashed).await.unwrap();
        if recorded.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    run.kill().await.unwrap();
    run.wait().await.unwrap();
    let gc = home.paddock(&["gc", "--json"], &[]).await;
    assert_eq!(gc.status.code(), Some(0), "{gc:?}");
    let next = home.run_after(spec.to_str().unwrap(), &crashed, &[]).await;
    let stderr = String::from_utf8_lossy(&next.stderr);
    let forked = stderr
        .lines()
        .find(|l| l.starts_with("▸ session_forked: a new session"))
        .map(str::to_string);
    assert_eq!(
        (recorded.as_deref(), forked),
        (
            Some(session),
            Some(format!(
                "▸ session_forked: a new session, not attempt 1's (job {crashed}): the session \
                 files of attempt 1 are gone"
            ))
        ),
        "{stderr}"
    );
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
}

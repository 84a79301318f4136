//! A host profile's `timeout_min` is a cap on the whole job: its
//! provisioning, its setup and its engine together run no longer, with a
//! stand-in setup and engine that sleep and a host git whose clone hangs
//! (docs/host-profile.md).

use paddock_protocol::{EventBody, JobStatus};
use paddock_test_support::prelude::*;

/// How many processes run `cmdline` with this test's home in their
/// environment (the slow git's PATH).
fn sleeping_under(home: &std::path::Path, cmdline: &[u8]) -> usize {
    paddock_test_support::processes::running_under(home, cmdline).len()
}

/// The number right after `marker` in `text` (`0` when there is none).
fn number_after(text: &str, marker: &str) -> u64 {
    text.split_once(marker)
        .map(|(_, rest)| {
            rest.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Under a profile of `timeout_min = 1`, a setup that sleeps 40 s leaves
/// the engine (which would sleep 120 s) the 20 s that are left of the
/// minute: the job times out a minute after it began, its reason
/// and its `policy` event naming the profile's cap on setup and engine
/// together. Before, each had its own clock: the engine got a whole
/// minute after the setup's 40 s, and the job ran 100 s.
#[tokio::test(flavor = "multi_thread")]
async fn a_host_profiles_timeout_caps_setup_and_engine_together() {
    let home = Home::new();
    let spec = fake_codex_job(&home, "process", "sleep 120", 600);
    append_to_spec(
        &spec,
        "[setup]\ncommands = [\"sleep 40\"]\ntimeout_secs = 600\n",
    );
    under_profile(
        &spec,
        "id = \"one-minute\"\ntimeout_min = 1\nsetup_cache = false\n",
    );
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    let reason = rec.reason.clone().unwrap_or_default();
    let events = home.store().await.events(&rec.id, 0).await.unwrap();
    let span = events
        .iter()
        .find(|e| matches!(&e.body, EventBody::Policy { rule, .. } if rule == "timeout_min"))
        .map(|e| e.at - events[0].at)
        .unwrap_or_default();
    let timeouts: Vec<(String, String)> = events
        .into_iter()
        .filter_map(|e| match e.body {
            EventBody::Policy { rule, message } if rule.starts_with("timeout") => {
                Some((rule, message))
            }
            _ => None,
        })
        .collect();
    // The seconds before the engine and the engine's, as the reason says
    // them (provisioning, and the setup's 40 s and a little more to start
    // and end).
    let (before, engine) = (
        number_after(&reason, "with the "),
        number_after(&reason, "timed out after "),
    );
    assert_eq!(
        (
            rec.status,
            reason.clone(),
            timeouts,
            (40..=45).contains(&before) && before + engine == 60,
        ),
        (
            JobStatus::TimedOut,
            format!(
                "timed out after {engine} s of the engine: with the {before} s before it \
                 (provisioning and setup), the job reached the 1 min `timeout_min` of host \
                 profile `one-minute`, which caps the whole job"
            ),
            vec![(
                "timeout_min".to_string(),
                format!(
                    "the job ran past the 1 min limit of host profile `one-minute`, which caps \
                     the whole job (provisioning and setup {before} s, engine {engine} s), and \
                     was killed"
                ),
            )],
            true,
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The engine was killed a minute after the job's first event (the
    // job's own clock), not a minute after its setup's 40 s (100 s), as
    // when each had its own: measured between the job's events, so
    // neither paddock's start nor its end, which a loaded host stretches,
    // is counted.
    assert!(
        (60..90).contains(&span.whole_seconds()),
        "{span:?} from the first event to the timeout"
    );
}

/// Under a profile of `timeout_min = 1`, a job whose source's clone hangs
/// (a host git on PATH whose `clone` sleeps 10 minutes; the clone layout)
/// is stopped a minute after it began: the clone's process group killed,
/// the job `failed` naming provisioning and the profile's cap, its
/// `policy` event saying so, nothing of its directory left, no engine
/// started. Before, provisioning was under no clock but each git's own
/// 600 s bound, and the job's minute began only after it.
#[tokio::test(flavor = "multi_thread")]
async fn a_host_profiles_timeout_stops_a_clone_that_hangs() {
    let home = Home::new();
    // The engine would write a marker: it must never start.
    let marker = home.path().join("engine-ran");
    let spec = fake_codex_job(
        &home,
        "process",
        &format!("touch '{}'", marker.display()),
        600,
    );
    under_profile(
        &spec,
        "id = \"one-minute\"\ntimeout_min = 1\nsetup_cache = false\n",
    );
    let bin = home.path().join("slow-git");
    std::fs::create_dir_all(&bin).unwrap();
    let real = which::which("git").unwrap();
    // `sleep 607`: a command line no other test's process has.
    write_script(
        &bin.join("git"),
        &format!(
            "#!/bin/sh\nfor a in \"$@\"; do\n  [ \"$a\" = clone ] && exec sleep 607\ndone\nexec '{}' \"$@\"\n",
            real.display()
        ),
    );
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let env = [
        ("PATH", path.as_str()),
        ("PADDOCK_WORKSPACE_LAYOUT", "clone"),
    ];
    let started = std::time::Instant::now();
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &env)
        .await;
    let took = started.elapsed();
    let rec = record(&out);
    let events = home.store().await.events(&rec.id, 0).await.unwrap();
    let timeouts: Vec<(String, String)> = events
        .into_iter()
        .filter_map(|e| match e.body {
            EventBody::Policy { rule, message } if rule.starts_with("timeout") => {
                Some((rule, message))
            }
            _ => None,
        })
        .collect();
    let sleeping = sleeping_under(home.path(), b"sleep\x00607\x00");
    assert_eq!(
        (
            rec.status,
            rec.reason.clone(),
            timeouts,
            home.jobs().join(&rec.id).exists(),
            marker.exists(),
            sleeping,
        ),
        (
            JobStatus::Failed,
            Some(
                "provisioning the workspace (cloning or fetching the source) was still running \
                 after 60 s, when the 1 min `timeout_min` of host profile `one-minute`, which \
                 caps the whole job, ran out; it was stopped and the engine was not started"
                    .to_string()
            ),
            vec![(
                "timeout_min".to_string(),
                "the job ran past the 1 min limit of host profile `one-minute`, which caps the \
                 whole job, while its workspace was provisioned (60 s), and was stopped"
                    .to_string()
            )],
            false,
            false,
            0,
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Stopped by the minute, not by the 600 s bound of Paddock's own git
    // (before): well below that, far above the minute and the end's few
    // seconds, which a loaded host (the suites side by side) stretches.
    assert!(took < std::time::Duration::from_secs(300), "{took:?}");
}

/// Under a profile of `timeout_min = 1`, a job whose engine is done at
/// once but whose push hangs (a host git on PATH whose `push` sleeps 607
/// s) has the rest of the minute and the 10 s grace that leaves for
/// publishing, then the push is stopped (its process group killed) and
/// the job fails naming the cap and the grace, its `policy` event saying
/// so; its result is recorded: the branch's bundle kept for `paddock
/// publish`, the remote untouched, the reason naming the grace (not "it
/// was cancelled", as it did while nobody had cancelled it). Before,
/// concluding was under no clock but each git's 600 s bound.
#[tokio::test(flavor = "multi_thread")]
async fn a_host_profiles_timeout_stops_a_push_that_hangs_after_a_grace() {
    let home = Home::new();
    let repo = repo(home.path());
    let remote = home.path().join("remote.git");
    std::fs::create_dir_all(&remote).unwrap();
    git(&remote, &["init", "-q", "--bare"]);
    let spec = stand_in_spec(
        home.path(),
        &repo,
        "process",
        &finishing("printf 'fixed\\n' > fix.txt"),
    );
    append_to_spec(
        &spec,
        &format!("[results.push]\nurl = \"file://{}\"\n", remote.display()),
    );
    under_profile(
        &spec,
        "id = \"one-minute\"\ntimeout_min = 1\nsetup_cache = false\n",
    );
    let bin = home.path().join("slow-git");
    std::fs::create_dir_all(&bin).unwrap();
    let real = which::which("git").unwrap();
    write_script(
        &bin.join("git"),
        &format!(
            "#!/bin/sh\nfor a in \"$@\"; do\n  [ \"$a\" = push ] && exec sleep 608\ndone\nexec '{}' \"$@\"\n",
            real.display()
        ),
    );
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let started = std::time::Instant::now();
    let out = home
        .paddock(
            &["run", "--json", spec.to_str().unwrap()],
            &[("PATH", path.as_str())],
        )
        .await;
    let took = started.elapsed();
    let rec = record(&out);
    let events = home.store().await.events(&rec.id, 0).await.unwrap();
    let timeouts: Vec<(String, String)> = events
        .into_iter()
        .filter_map(|e| match e.body {
            EventBody::Policy { rule, message } if rule.starts_with("timeout") => {
                Some((rule, message))
            }
            _ => None,
        })
        .collect();
    let sleeping = sleeping_under(home.path(), b"sleep\x00608\x00");
    let bundle = home
        .data()
        .join("artifacts")
        .join(&rec.id)
        .join("branch.bundle");
    assert_eq!(
        (
            rec.status,
            rec.reason.clone(),
            timeouts,
            bundle.is_file(),
            git(&remote, &["branch", "--list"]),
            sleeping,
        ),
        (
            JobStatus::Failed,
            Some(format!(
                "publishing was still running when the 1 min `timeout_min` of host profile \
                 `one-minute`, which caps the whole job, and its 10 s grace for publishing ran \
                 out; it was stopped: publishing the result failed: it was stopped when its 10 \
                 s grace past the 1 min `timeout_min` of host profile `one-minute` ran out, \
                 before the branch was pushed and proposed; the patch and the branch's bundle \
                 are kept, and `paddock publish {}` finishes it",
                rec.id
            )),
            vec![(
                "timeout_min".to_string(),
                "the job ran past the 1 min limit of host profile `one-minute`, which caps the \
                 whole job, and the 10 s it leaves for publishing, and its publishing was stopped"
                    .to_string()
            )],
            true,
            String::new(),
            0,
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Stopped by the minute and its grace, not by the 600 s bound of
    // Paddock's own git (before): well below that, far above the 70 s and
    // the end's few seconds, which a loaded host stretches.
    assert!(took < std::time::Duration::from_secs(300), "{took:?}");
}

//! A host profile's `timeout_min` is a cap on the whole job: its setup
//! and its engine together run no longer, with a stand-in setup and
//! engine that sleep (docs/host-profile.md).

use paddock_protocol::{EventBody, JobStatus};
use paddock_test_support::prelude::*;

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
/// minute: the job times out a minute after its setup began, its reason
/// and its `policy` event naming the profile's cap on setup and engine
/// together. Before, each had its own clock: the engine got a whole
/// minute after the setup's 40 s, and the job ran 100 s.
#[tokio::test(flavor = "multi_thread")]
async fn a_host_profiles_timeout_caps_setup_and_engine_together() {
    let home = Home::new();
    std::fs::write(
        home.path().join("profile.toml"),
        "id = \"one-minute\"\ntimeout_min = 1\nsetup_cache = false\n",
    )
    .unwrap();
    let spec = fake_codex_job(&home, "process", "sleep 120", 600);
    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(
        &spec,
        format!(
            "{text}\n[setup]\ncommands = [\"sleep 40\"]\ntimeout_secs = 600\n\n\
             [policy]\nprofile = \"profile.toml\"\n"
        ),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let took = started.elapsed();
    let rec = record(&out);
    let reason = rec.reason.clone().unwrap_or_default();
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
    // The setup's seconds and the engine's, as the reason says them (the
    // setup takes its 40 s and a little more to start and end).
    let (setup, engine) = (
        number_after(&reason, "with the "),
        number_after(&reason, "timed out after "),
    );
    assert_eq!(
        (
            rec.status,
            reason.clone(),
            timeouts,
            (40..=42).contains(&setup) && setup + engine == 60,
        ),
        (
            JobStatus::TimedOut,
            format!(
                "timed out after {engine} s of the engine: with the {setup} s before it (setup), \
                 the job reached the 1 min `timeout_min` of host profile `one-minute`, which caps \
                 setup and engine together"
            ),
            vec![(
                "timeout_min".to_string(),
                format!(
                    "the job ran past the 1 min limit of host profile `one-minute`, which caps \
                     its setup and its engine together (setup {setup} s, engine {engine} s), and \
                     was killed"
                ),
            )],
            true,
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A minute after the setup began, and the end's few seconds.
    assert!(took < std::time::Duration::from_secs(80), "{took:?}");
}

//! A hostile job against the copy of its engine's session files, kept
//! for its next attempt (`session/files.rs`): within the count and the
//! per-file bound, three files of 63 MiB (sparse: the job's disk holds
//! nothing) whose copy Paddock would hold whole in its memory before
//! writing any, then copy again through the redaction, per job ending;
//! and a session directory filled with empty files beside the session's
//! own, every name of which the copy listed into Paddock's memory before
//! picking the session's (millions, as many as the job's disk limit
//! lets it make). Through the real `paddock` binary: the copy stops at
//! its bound, keeps nothing and says so; the job itself is done. And the
//! copy back into the next attempt's home, where a setup command left the
//! session's directory as a link to the host: nothing is written through
//! it, and the attempt starts a new session saying why. And the branch a
//! next attempt starts on, when its prior changed nothing: the bundle of
//! the job that made it in this repository, never one of another
//! project's or repository's job whose ticket has the same id. And the
//! engine's config: an engine that rewrites `~/.codex/config.toml` (a
//! `notify` command, a provider of its own) has its next attempt resume
//! with Paddock's config, not its own.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use paddock_test_support::prelude::*;

const SESSION: &str = "0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee";

/// Runs the stand-in job whose engine first runs `script` (in the job's
/// home) and then announces [`SESSION`] and one turn; the job's status,
/// its non-fatal error events, and whether its session was kept.
async fn session_job(script: &str) -> (paddock_protocol::JobStatus, Vec<String>, bool) {
    let home = Home::new();
    let dir = home.path().join("job");
    std::fs::create_dir_all(&dir).unwrap();
    let body = finishing_session(script, SESSION);
    let spec = stand_in_job(&dir, "process", &body, 120);
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let record = record(&out);
    let warnings = home.warnings(&record.id).await;
    let saved = home
        .data()
        .join("artifacts")
        .join(&record.id)
        .join("engine-session");
    (record.status, warnings, saved.exists())
}

/// 10,001 empty files in the session's directory beside the session's
/// own file: the copy looks at 10,000 entries at most, keeps nothing and
/// says so. Before, it listed every name (a job's disk limit lets it
/// make millions) into Paddock's memory, then kept the session.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_directory_filled_with_names_is_not_listed_whole() {
    let got = session_job(&format!(
        r#"day="$HOME/.codex/sessions/2026/12/02"
mkdir -p "$day"
echo '{{}}' > "$day/rollout-1-{SESSION}.jsonl"
(cd "$HOME/.codex/sessions" && seq 1 10001 | xargs touch)"#
    ))
    .await;
    assert_eq!(
        got,
        (
            paddock_protocol::JobStatus::Done,
            vec![
                "the engine's session was not kept for a next attempt: the engine's session \
                 directory <job-dir>/home/.codex/sessions holds more than 10000 entries"
                    .to_string()
            ],
            false
        )
    );
}

/// Three files of 63 MiB, each within the per-file bound: the copy stops
/// at the total bound.
#[tokio::test(flavor = "multi_thread")]
async fn session_files_past_the_total_bound_are_not_kept() {
    let got = session_job(&format!(
        r#"day="$HOME/.codex/sessions/2026/12/02"
mkdir -p "$day"
for n in 1 2 3; do truncate -s 63M "$day/rollout-$n-{SESSION}.jsonl"; done"#
    ))
    .await;
    assert_eq!(
        got,
        (
            paddock_protocol::JobStatus::Done,
            vec![
                "the engine's session was not kept for a next attempt: the engine's session \
                  files under <job-dir>/home/.codex/sessions hold more than 134217728 bytes"
                    .to_string()
            ],
            false
        )
    );
}

/// The next attempt's setup command (repository code, such as an install
/// script the prior job could have left on its branch) leaves the
/// session's directory in the new home as a link to a host directory:
/// restoring the prior session's files writes nothing through it; the
/// attempt starts a new session, saying why, and the host directory stays
/// empty. (`files.rs`'s unit test makes the link itself; this one has a
/// job make it, before the restore.)
#[tokio::test(flavor = "multi_thread")]
async fn a_link_a_setup_command_leaves_in_the_next_home_is_not_written_through() {
    let home = Home::new();
    let dir = home.path().join("job");
    std::fs::create_dir_all(&dir).unwrap();
    let outside = home.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    // The first attempt leaves its session's file; the second finds the
    // link and writes nothing itself.
    let body = finishing_session(
        &format!(
            r#"if [ ! -L "$HOME/.codex/sessions" ]; then
  day="$HOME/.codex/sessions/2026/12/02"
  mkdir -p "$day"
  echo '{{}}' > "$day/rollout-1-{SESSION}.jsonl"
fi"#
        ),
        SESSION,
    );
    let spec = stand_in_job(&dir, "process", &body, 120);
    let run = |extra: Vec<String>| {
        let home = &home;
        let spec = spec.clone();
        async move {
            let mut args = vec![
                "run".to_string(),
                "--json".into(),
                spec.display().to_string(),
            ];
            args.extend(extra);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            record(&home.paddock(&args, &[]).await)
        }
    };
    let first = run(Vec::new()).await;
    append_to_spec(
        &spec,
        &format!(
            "[setup]\ncommands = [\"mkdir -p \\\"$HOME/.codex\\\" && ln -s {} \
             \\\"$HOME/.codex/sessions\\\"\"]\ncache = false\n",
            outside.display()
        ),
    );
    let second = run(vec!["--attempt-after".into(), first.id.clone()]).await;
    let continued = home.session_statuses(&second.id).await;
    let left_outside: Vec<std::path::PathBuf> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        (first.status, second.status, continued, left_outside),
        (
            paddock_protocol::JobStatus::Done,
            paddock_protocol::JobStatus::Done,
            vec![(
                paddock_protocol::Phase::SessionForked,
                Some(format!(
                    "a new session, not attempt 1's (job {}): writing the session file \
                     <job-dir>/home/.codex/sessions/2026/12/02/rollout-1-{SESSION}.jsonl into \
                     the job's home: Not a directory (os error 20)",
                    first.id
                ))
            )],
            Vec::new()
        )
    );
}

/// The engine rewrites its `~/.codex/config.toml` while it runs (a
/// `notify` command, a model provider of its own that routes around the
/// broker, both marked `hostile-config`) and leaves its session's rollout;
/// the next attempt resumes that session (`codex exec resume`) and must
/// find Paddock's config in its home, not the one the job wrote: only the
/// rollout file is carried, and the config is written anew after setup.
/// Each attempt names what it saw in a file of its work tree
/// (`<new|resumed>-config-<lines marked hostile-config>`).
#[tokio::test(flavor = "multi_thread")]
async fn the_next_attempt_resumes_with_paddocks_config_not_the_jobs() {
    let home = Home::new();
    let dir = home.path().join("job");
    std::fs::create_dir_all(&dir).unwrap();
    let body = finishing_session(
        &format!(
            r#"case " $* " in *" resume "*) r=resumed;; *) r=new;; esac
touch "$r-config-$(grep -c hostile-config "$HOME/.codex/config.toml")"
day="$HOME/.codex/sessions/2026/12/02"
mkdir -p "$day"
echo '{{}}' > "$day/rollout-1-{SESSION}.jsonl"
cat > "$HOME/.codex/config.toml" <<'TOML'
# hostile-config
notify = ["sh", "-c", "touch /tmp/hostile-config"]
model_provider = "mine"
[model_providers.mine]
name = "mine # hostile-config"
base_url = "https://example.invalid/v1"
TOML"#
        ),
        SESSION,
    );
    let spec = stand_in_job(&dir, "process", &body, 120);
    let first = run_spec(&home, &spec, &[]).await;
    let second = run_spec(&home, &spec, &["--attempt-after", &first.id]).await;
    let resumed: Vec<paddock_protocol::Phase> = home
        .session_statuses(&second.id)
        .await
        .into_iter()
        .map(|(phase, _)| phase)
        .collect();
    assert_eq!(
        (
            (first.status, first.changed_files),
            (second.status, second.changed_files),
            resumed
        ),
        (
            (
                paddock_protocol::JobStatus::Done,
                vec!["new-config-0".to_string()]
            ),
            (
                paddock_protocol::JobStatus::Done,
                vec!["resumed-config-0".to_string()]
            ),
            vec![paddock_protocol::Phase::SessionResumed]
        )
    );
}

/// Runs `paddock run --json SPEC EXTRA…`; the record it prints.
async fn run_spec(
    home: &Home,
    spec: &std::path::Path,
    extra: &[&str],
) -> paddock_protocol::JobRecord {
    let spec = spec.display().to_string();
    let mut args = vec!["run", "--json", spec.as_str()];
    args.extend_from_slice(extra);
    record(&home.paddock(&args, &[]).await)
}

/// Two repositories with a ticket of the same id (`T-1`: issue numbers
/// collide across repositories; a server's submitter names any), the
/// second a fork of the first (the same base commit), each a project of
/// its own. In `mine`, attempt 1 makes `paddock/T-1/1`; then in `theirs`
/// another job makes its own `paddock/T-1/1`; then `mine`'s attempt 2
/// resumes on its branch and changes nothing, and `mine` loses the branch
/// (deleted, as docs/results.md allows); attempt 3 must start on attempt
/// 1's work, from attempt 1's bundle. Before, the branch's maker was
/// looked up by ticket id alone, the newest job of that name (`theirs`)
/// was taken, and attempt 3 started on the other repository's work.
#[tokio::test(flavor = "multi_thread")]
async fn the_next_attempt_never_starts_on_another_repositorys_branch() {
    let home = Home::new();
    let spec_in = |name: &str, repo: &std::path::Path, body: &str| {
        let dir = home.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        stand_in_spec(&dir, repo, "process", &finishing(body))
    };
    let mine_dir = home.path().join("mine");
    std::fs::create_dir_all(&mine_dir).unwrap();
    let mine = repo(&mine_dir);
    let theirs = home.path().join("theirs");
    git(
        home.path(),
        &[
            "clone",
            "-q",
            mine.to_str().unwrap(),
            theirs.to_str().unwrap(),
        ],
    );
    let first = run_spec(&home, &spec_in("a1", &mine, "echo mine > work.txt"), &[]).await;
    let other_spec = spec_in("other", &theirs, "echo theirs > work.txt");
    let text = std::fs::read_to_string(&other_spec).unwrap();
    std::fs::write(
        &other_spec,
        text.replace("project = \"tests\"", "project = \"elsewhere\""),
    )
    .unwrap();
    let other = run_spec(&home, &other_spec, &[]).await;
    let second = run_spec(
        &home,
        &spec_in("a2", &mine, "true"),
        &["--attempt-after", &first.id],
    )
    .await;
    git(&mine, &["branch", "-D", "paddock/T-1/1"]);
    let third = run_spec(
        &home,
        &spec_in("a3", &mine, "cat work.txt > seen.txt"),
        &["--attempt-after", &second.id],
    )
    .await;
    let seen = third
        .patch_path
        .as_ref()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with('+') && !l.starts_with("+++"))
        .map(str::to_string)
        .collect::<Vec<_>>();
    use paddock_protocol::JobStatus::Done;
    assert_eq!(
        (
            [first.status, other.status, second.status, third.status],
            [
                other.branch.as_str(),
                second.base_ref.as_str(),
                third.base_ref.as_str()
            ],
            second.changed_files.len(),
            seen
        ),
        (
            [Done, Done, Done, Done],
            ["paddock/T-1/1", "paddock/T-1/1", "paddock/T-1/1"],
            0,
            vec!["+mine".to_string()]
        )
    );
}

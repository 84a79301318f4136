//! Follow-up turns with the real engines (`paddock run --attempt-after
//! JOB`): attempt 2 resumes attempt 1's own session (Codex `exec resume`,
//! Claude Code `--resume`), on attempt 1's branch, and the upstream sees
//! attempt 1's turn in its request; attempt 3, on another model, forks a
//! new session on attempt 2's branch, and its event and closeout say why.

use paddock_protocol::{EventBody, JobStatus, Phase};
use paddock_test_support::prelude::*;

/// Attempt 1 answers twice (a shell command writing `one.md`, then a
/// closing message); a resumed attempt 2 is answered from turn 3 on,
/// because its request carries attempt 1's two answers; a new session
/// starts at turn 1 again.
const SCENARIO: &str = r#"
[[turn]]
text = "Writing one."
usage = { input = 100, output = 10 }
[[turn.action]]
type = "shell"
command = "echo one > one.md"

[[turn]]
text = "Done with one."
usage = { input = 120, output = 10 }

[[turn]]
text = "Writing two."
usage = { input = 140, output = 10 }
[[turn.action]]
type = "shell"
command = "echo two > two.md"

[[turn]]
text = "Done with two."
usage = { input = 160, output = 10 }
"#;

/// Another model the price table knows, for the fork.
fn other_model(engine: &str) -> &'static str {
    match engine {
        "codex" => "gpt-5.4",
        _ => "claude-opus-4-8",
    }
}

/// The job's events with the given phase: their details.
async fn details(home: &Home, job: &str, phase: Phase) -> Vec<Option<String>> {
    home.store()
        .await
        .events(job, 0)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.body {
            EventBody::Status { phase: p, detail } if p == phase => Some(detail),
            _ => None,
        })
        .collect()
}

/// The model requests the upstream answered (not Claude Code's warm-up).
fn model_requests(provider: &KeyedProvider) -> Vec<serde_json::Value> {
    provider
        .server
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/responses") || r.path.ends_with("/messages"))
        .map(|r| r.body)
        .collect()
}

/// `paddock run --json SPEC EXTRA…` with `env`.
async fn run_spec(
    home: &Home,
    spec: &std::path::Path,
    env: &[(&str, &str)],
    extra: Vec<String>,
) -> std::process::Output {
    let mut args = vec!["run".to_string(), "--json".to_string()];
    args.push(spec.to_str().unwrap().to_string());
    args.extend(extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    home.paddock(&args, env).await
}

/// A job spec of `engine` on the `process` rung whose source is a bare
/// repository by `file://` URL (no forge, no push), answered by a keyed
/// scripted upstream playing `scenario`; the upstream, the spec and the
/// bare repository.
async fn url_job(
    home: &Home,
    engine: &str,
    scenario: &str,
    key: &str,
) -> (KeyedProvider, std::path::PathBuf, std::path::PathBuf) {
    let repo = repo(home.path());
    let remote = home.path().join("remote.git");
    git(
        home.path(),
        &[
            "clone",
            "-q",
            "--bare",
            repo.to_str().unwrap(),
            remote.to_str().unwrap(),
        ],
    );
    let provider = KeyedProvider::start(home, engine, scenario, key).await;
    let upstream = format!("[upstream]\n{}\n", provider.spec_lines());
    let spec = job(home.path(), engine, &repo, &upstream, None);
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        &format!("path = \"{}\"", repo.display()),
        &format!("url = \"file://{}\"", remote.display()),
    );
    std::fs::write(&spec, text).unwrap();
    on_rung(&spec, "process");
    (provider, spec, remote)
}

async fn resumes_then_forks(engine: &str, rung: &str) {
    if paddock_test_support::skip::engine(engine).is_none()
        || (rung == "sandbox" && !sandbox_available())
    {
        return;
    }
    let home = Home::new();
    let repo = repo(home.path());
    let key = format!("sk-paddock-e2e-{}", std::process::id());
    let provider = KeyedProvider::start(&home, engine, SCENARIO, &key).await;
    let upstream = format!("[upstream]\n{}\n", provider.spec_lines());
    let spec = job(home.path(), engine, &repo, &upstream, None);
    on_rung(&spec, rung);
    let env = [("PADDOCK_E2E_KEY", key.as_str())];
    let run = |extra: Vec<String>| {
        let (home, spec) = (&home, &spec);
        async move {
            let out = run_spec(home, spec, &env, extra).await;
            let rec = record(&out);
            assert_eq!(
                rec.status,
                JobStatus::Done,
                "reason: {:?}\nstderr: {}",
                rec.reason,
                String::from_utf8_lossy(&out.stderr)
            );
            rec
        }
    };

    // Attempt 1: a new session, kept.
    let first = run(vec![]).await;
    assert_eq!(first.changed_files, vec!["one.md".to_string()]);
    let store = home.store().await;
    let session = store.engine_session(&first.id).await.unwrap().unwrap();
    let asked = model_requests(&provider).len();

    // Attempt 2: the same engine, model and rung resume it.
    let second = run(vec!["--attempt-after".into(), first.id.clone()]).await;
    assert_eq!(
        details(&home, &second.id, Phase::SessionResumed).await,
        vec![Some(format!(
            "resumed session {session} of attempt 1 (job {})",
            first.id
        ))]
    );
    // On attempt 1's branch: only its own change.
    assert_eq!(
        (
            second.attempt,
            second.base_ref.as_str(),
            second.changed_files.clone()
        ),
        (2, "paddock/T-1/1", vec!["two.md".to_string()])
    );
    // The upstream saw attempt 1's turn in attempt 2's first request.
    let requests = model_requests(&provider);
    let resumed = requests[asked].to_string();
    assert!(
        resumed.contains("Done with one.") && resumed.contains("echo one > one.md"),
        "{resumed}"
    );
    let asked = requests.len();

    // Attempt 3 on another model: a new session, and it says why.
    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(
        &spec,
        text.replace(
            &format!("model = \"{}\"", model(engine)),
            &format!("model = \"{}\"", other_model(engine)),
        ),
    )
    .unwrap();
    let third = run(vec!["--attempt-after".into(), second.id.clone()]).await;
    let reason = format!(
        "the model changed ({} → {})",
        model(engine),
        other_model(engine)
    );
    assert_eq!(
        details(&home, &third.id, Phase::SessionForked).await,
        vec![Some(format!(
            "a new session, not attempt 2's (job {}): {reason}",
            second.id
        ))]
    );
    assert_eq!(
        (
            third.attempt,
            third.base_ref.as_str(),
            third.changed_files.clone()
        ),
        // On attempt 2's branch still, whose tree the review is about: the
        // new session's first turn writes `one.md` as it already is.
        (3, "paddock/T-1/2", Vec::<String>::new())
    );
    let forked = model_requests(&provider)[asked].to_string();
    assert!(!forked.contains("Done with one."), "{forked}");
    let closeout = store.closeout(&third.id).await.unwrap().unwrap();
    assert!(
        closeout.contains(&format!(
            "Engine session forked: a new session, not attempt 2's (job {}): {reason}.",
            second.id
        )),
        "{closeout}"
    );
    assert_ne!(
        store.engine_session(&third.id).await.unwrap(),
        Some(session)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_resumes_its_session_and_forks_on_another_model() {
    resumes_then_forks("codex", "process").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_resumes_its_session_in_the_sandbox() {
    resumes_then_forks("codex", "sandbox").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_resumes_its_session_in_the_sandbox() {
    resumes_then_forks("claude", "sandbox").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_resumes_its_session_and_forks_on_another_model() {
    resumes_then_forks("claude", "process").await;
}

/// A URL source its result is never pushed to (no forge, no push: the
/// README's hello example): attempt 2 resumes on attempt 1's branch, which
/// only attempt 1's bundle keeps. It is fetched from there into attempt
/// 2's own clone, never into the URL's mirror (which every job of the URL
/// shares); attempt 2's patch is its own change, and its bundle, holding
/// the whole history, gives a branch with both attempts' work. Without the
/// bundle, attempt 2 fails before its engine runs, naming it, and leaves
/// nothing behind.
#[tokio::test(flavor = "multi_thread")]
async fn a_url_sources_next_attempt_resumes_on_the_branch_its_bundle_keeps() {
    let engine = "codex";
    if paddock_test_support::skip::engine(engine).is_none() {
        return;
    }
    let home = Home::new();
    let key = format!("sk-paddock-e2e-{}", std::process::id());
    let (provider, spec, remote) = url_job(&home, engine, SCENARIO, &key).await;
    let env = [("PADDOCK_E2E_KEY", key.as_str())];
    let run = |extra: Vec<String>| run_spec(&home, &spec, &env, extra);
    let first = record(&run(vec![]).await);
    assert_eq!(
        (first.status, first.changed_files.clone()),
        (JobStatus::Done, vec!["one.md".to_string()])
    );
    let first_bundle = home
        .data()
        .join("artifacts")
        .join(&first.id)
        .join("branch.bundle");
    let first_commit = String::from_utf8(
        std::process::Command::new("git")
            .args(["bundle", "list-heads"])
            .arg(&first_bundle)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .split_whitespace()
    .next()
    .unwrap()
    .to_string();

    let out = run(vec!["--attempt-after".into(), first.id.clone()]).await;
    let second = record(&out);
    assert_eq!(
        (
            second.status,
            second.attempt,
            second.base_ref.as_str(),
            second.changed_files.clone()
        ),
        (
            JobStatus::Done,
            2,
            "paddock/T-1/1",
            vec!["two.md".to_string()]
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        details(&home, &second.id, Phase::Provisioning).await[1],
        Some(
            "workspace layout: clone (the prior attempt's branch paddock/T-1/1 is only in its \
             bundle, fetched into the job's own clone)"
                .to_string()
        )
    );
    // No mirror of the URL holds attempt 1's commit.
    let mirrors: Vec<_> = std::fs::read_dir(home.jobs().join(".mirrors"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    let in_mirrors: Vec<bool> = mirrors
        .iter()
        .map(|m| {
            std::process::Command::new("git")
                .arg("--git-dir")
                .arg(m)
                .args(["cat-file", "-e", &format!("{first_commit}^{{commit}}")])
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap()
                .success()
        })
        .collect();
    assert_eq!(in_mirrors, vec![false]);
    // Attempt 2's bundle alone gives both attempts' work.
    let check = home.path().join("check");
    git(
        home.path(),
        &[
            "clone",
            "-q",
            remote.to_str().unwrap(),
            check.to_str().unwrap(),
        ],
    );
    let second_bundle = home
        .data()
        .join("artifacts")
        .join(&second.id)
        .join("branch.bundle");
    git(
        &check,
        &[
            "fetch",
            "-q",
            second_bundle.to_str().unwrap(),
            "refs/heads/paddock/T-1/2:refs/heads/two",
        ],
    );
    git(&check, &["checkout", "-q", "two"]);
    assert_eq!(
        (
            std::fs::read_to_string(check.join("one.md")).unwrap(),
            std::fs::read_to_string(check.join("two.md")).unwrap()
        ),
        ("one\n".to_string(), "two\n".to_string())
    );

    // Without attempt 1's bundle: a clear failure before the engine.
    std::fs::remove_file(&first_bundle).unwrap();
    let asked = model_requests(&provider).len();
    let out = run(vec!["--attempt-after".into(), first.id.clone()]).await;
    let third = record(&out);
    let reason = third.reason.clone().unwrap_or_default();
    assert_eq!(
        (
            third.status,
            reason.starts_with(&format!(
            "the prior attempt's branch `paddock/T-1/1` is not in the source, and its bundle {} \
             cannot give it: ",
            first_bundle.display()
        ))
        ),
        (JobStatus::Failed, true),
        "{reason}"
    );
    assert_eq!(model_requests(&provider).len(), asked);
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
}

/// Attempt 1 writes `one.md`; attempt 2, resumed, changes nothing (no
/// branch of its own); attempt 3, resuming attempt 2's session (whose
/// history has `one.md` in it), starts on attempt 1's branch, the tree
/// that session worked on, not on the spec's base (before: on `main`,
/// without `one.md`). The source is a URL never pushed to, so the branch
/// comes from attempt 1's bundle.
#[tokio::test(flavor = "multi_thread")]
async fn a_next_attempt_after_one_that_changed_nothing_stays_on_the_earlier_branch() {
    const NOTHING: &str = r#"
[[turn]]
text = "Writing one."
[[turn.action]]
type = "shell"
command = "echo one > one.md"

[[turn]]
text = "Done with one."

[[turn]]
text = "Nothing to change."

[[turn]]
text = "Reading one."
[[turn.action]]
type = "shell"
command = "cat one.md > seen.md"

[[turn]]
text = "Done reading."
"#;
    let engine = "codex";
    if paddock_test_support::skip::engine(engine).is_none() {
        return;
    }
    let home = Home::new();
    let key = format!("sk-paddock-e2e-{}", std::process::id());
    let (_provider, spec, _remote) = url_job(&home, engine, NOTHING, &key).await;
    let env = [("PADDOCK_E2E_KEY", key.as_str())];
    let run = |extra: Vec<String>| run_spec(&home, &spec, &env, extra);
    let first = record(&run(vec![]).await);
    let second = record(&run(vec!["--attempt-after".into(), first.id.clone()]).await);
    let out = run(vec!["--attempt-after".into(), second.id.clone()]).await;
    let third = record(&out);
    let summary = |r: &paddock_protocol::JobRecord| {
        (
            r.status,
            r.attempt,
            r.base_ref.clone(),
            r.changed_files.clone(),
        )
    };
    assert_eq!(
        [summary(&first), summary(&second), summary(&third)],
        [
            (
                JobStatus::Done,
                1,
                "main".to_string(),
                vec!["one.md".to_string()]
            ),
            (JobStatus::Done, 2, "paddock/T-1/1".to_string(), vec![]),
            (
                JobStatus::Done,
                3,
                "paddock/T-1/1".to_string(),
                vec!["seen.md".to_string()]
            ),
        ],
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let patch = std::fs::read_to_string(third.patch_path.clone().unwrap()).unwrap();
    assert!(patch.contains("\n+one\n"), "{patch}");
}

/// `paddock apply` of attempt 2, resumed on attempt 1's branch in a local
/// source: its patch is attempt 2's own change, made on that branch. On a
/// checkout of that branch it applies, saying nothing more; on a checkout
/// of the spec's base it does not apply (it edits attempt 1's file), and
/// the error names the branch, its commit and attempt 1's job and says
/// how to get the whole work; applied after `paddock apply` of attempt 1
/// (HEAD still the base) it applies and says that attempt 1's change is
/// not part of it. Before, the base checkout got git's "No such file"
/// alone, and an apply beside it nothing at all.
#[tokio::test(flavor = "multi_thread")]
async fn applying_a_later_attempt_names_the_branch_its_patch_was_made_on() {
    const TWO: &str = r#"
[[turn]]
text = "Writing one."
[[turn.action]]
type = "shell"
command = "echo one > one.md"

[[turn]]
text = "Done with one."

[[turn]]
text = "Adding two to one."
[[turn.action]]
type = "shell"
command = "echo two >> one.md"

[[turn]]
text = "Done with two."
"#;
    if paddock_test_support::skip::engine("codex").is_none() {
        return;
    }
    let home = Home::new();
    let repo = repo(home.path());
    let spec = job(home.path(), "codex", &repo, SCRIPTED, Some(TWO));
    on_rung(&spec, "process");
    let first = record(&run_spec(&home, &spec, &[], vec![]).await);
    let out = run_spec(
        &home,
        &spec,
        &[],
        vec!["--attempt-after".into(), first.id.clone()],
    )
    .await;
    let second = record(&out);
    assert_eq!(
        (
            second.status,
            second.base_ref.as_str(),
            second.changed_files.clone()
        ),
        (JobStatus::Done, "paddock/T-1/1", vec!["one.md".to_string()]),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let commit = git(&repo, &["rev-parse", "paddock/T-1/1"])
        .trim()
        .to_string();
    let checkout = |name: &str, at: &str| {
        let dir = home.path().join(name);
        git(
            home.path(),
            &["clone", "-q", repo.to_str().unwrap(), dir.to_str().unwrap()],
        );
        git(&dir, &["checkout", "-q", at]);
        dir
    };
    let apply = |job: String, dir: std::path::PathBuf| {
        let home = &home;
        async move {
            let out = home
                .paddock(&["apply", &job, "--repo", dir.to_str().unwrap()], &[])
                .await;
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        }
    };
    let on_branch = checkout("on-branch", "paddock/T-1/1");
    let on_base = checkout("on-base", "main");
    let after_first = checkout("after-first", "main");
    let results = (
        apply(second.id.clone(), on_branch.clone()).await,
        apply(second.id.clone(), on_base.clone()).await,
        apply(first.id.clone(), after_first.clone()).await,
        apply(second.id.clone(), after_first.clone()).await,
    );
    let made_on = format!(
        "attempt 2's change alone, made on attempt 1's branch `paddock/T-1/1` (commit {}, job \
         {}), which HEAD there does not contain",
        &commit[..12],
        first.id
    );
    // What was applied is said (5212e25), then what it lacks.
    let applied = |job: &str, dir: &std::path::Path| {
        format!(
            "paddock: applied job {job}'s patch in {} (1 file: one.md)\n",
            dir.display()
        )
    };
    assert_eq!(
        results,
        (
            (Some(0), applied(&second.id, &on_branch)),
            (
                Some(1),
                format!(
                    "error: one.md: No such file or directory\npaddock: job {}'s patch does not \
                     apply in {} (git apply's message above): it is {}; apply it on a checkout \
                     of `paddock/T-1/1` (or after `paddock apply {}`), or take the branch \
                     `paddock/T-1/2`, which has both\n",
                    second.id,
                    on_base.display(),
                    made_on,
                    first.id
                )
            ),
            (Some(0), applied(&first.id, &after_first)),
            (
                Some(0),
                format!(
                    "{}paddock: job {}'s patch was applied in {}, but it is {}; attempt 1's \
                     change is not part of it: `paddock apply {}` applies that one, and the \
                     branch `paddock/T-1/2` has both\n",
                    applied(&second.id, &after_first),
                    second.id,
                    after_first.display(),
                    made_on,
                    first.id
                )
            ),
        )
    );
    assert_eq!(
        (
            std::fs::read_to_string(on_branch.join("one.md")).unwrap(),
            std::fs::read_to_string(after_first.join("one.md")).unwrap(),
            on_base.join("one.md").exists(),
        ),
        ("one\ntwo\n".to_string(), "one\ntwo\n".to_string(), false)
    );
}

/// Attempt 2, resumed on attempt 1's branch in a local source, has a
/// bundle of its new objects only (the source kept its base, attempt 1's
/// commit). The user then deletes both branches and the source is
/// pruned: attempt 3 after attempt 2 fetches attempt 1's bundle first
/// (objects only) so that attempt 2's gives its branch, and resumes on
/// it with both attempts' work; `paddock publish` of attempt 2 does the
/// same for the source. Before, the attempt failed at provisioning with
/// git's "Repository lacks these prerequisite commits", and the publish
/// left the branch out with that warning.
#[tokio::test(flavor = "multi_thread")]
async fn a_next_attempt_on_a_pruned_source_takes_the_earlier_bundles_first() {
    const THREE: &str = r#"
[[turn]]
text = "Writing one."
[[turn.action]]
type = "shell"
command = "echo one > one.md"

[[turn]]
text = "Done with one."

[[turn]]
text = "Writing two."
[[turn.action]]
type = "shell"
command = "echo two > two.md"

[[turn]]
text = "Done with two."

[[turn]]
text = "Writing three."
[[turn.action]]
type = "shell"
command = "cat one.md two.md > three.md"

[[turn]]
text = "Done with three."
"#;
    if paddock_test_support::skip::engine("codex").is_none() {
        return;
    }
    let home = Home::new();
    let repo = repo(home.path());
    let spec = job(home.path(), "codex", &repo, SCRIPTED, Some(THREE));
    on_rung(&spec, "process");
    let first = record(&run_spec(&home, &spec, &[], vec![]).await);
    let second = record(
        &run_spec(
            &home,
            &spec,
            &[],
            vec!["--attempt-after".into(), first.id.clone()],
        )
        .await,
    );
    let bundle = home
        .data()
        .join("artifacts")
        .join(&second.id)
        .join("branch.bundle");
    let first_commit = git(&repo, &["rev-parse", "paddock/T-1/1"])
        .trim()
        .to_string();
    assert_eq!(
        paddock::results::base_objects::prerequisites(&bundle).unwrap(),
        vec![first_commit.clone()]
    );
    let prune = |branches: &[&str]| {
        let mut args = vec!["branch", "-D"];
        args.extend(branches);
        git(&repo, &args);
        git(&repo, &["reflog", "expire", "--expire=now", "--all"]);
        git(&repo, &["gc", "-q", "--prune=now"]);
    };
    prune(&["paddock/T-1/1", "paddock/T-1/2"]);
    // `paddock publish` of attempt 2 gives the source its branch again,
    // its prerequisite from attempt 1's bundle (before: a warning, the
    // branch not fetched, git's "lacks these prerequisite commits").
    let published = home.paddock(&["publish", &second.id], &[]).await;
    assert_eq!(
        (
            published.status.code(),
            String::from_utf8_lossy(&published.stderr).into_owned(),
            git(&repo, &["log", "--format=%s", "paddock/T-1/2"]),
            git(&repo, &["branch", "--list", "paddock/T-1/1"]),
        ),
        (
            Some(0),
            String::new(),
            "T-1: Test ticket\nT-1: Test ticket\ninit\n".to_string(),
            String::new()
        )
    );
    prune(&["paddock/T-1/2"]);
    let out = run_spec(
        &home,
        &spec,
        &[],
        vec!["--attempt-after".into(), second.id.clone()],
    )
    .await;
    let third = record(&out);
    assert_eq!(
        (
            third.status,
            third.attempt,
            third.base_ref.as_str(),
            third.changed_files.clone(),
            third.reason.clone()
        ),
        (
            JobStatus::Done,
            3,
            "paddock/T-1/2",
            vec!["three.md".to_string()],
            None
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        (
            git(&repo, &["show", "paddock/T-1/3:three.md"]),
            git(&repo, &["log", "--format=%s", "paddock/T-1/3"]),
        ),
        (
            "one\ntwo\n".to_string(),
            "T-1: Test ticket\nT-1: Test ticket\nT-1: Test ticket\ninit\n".to_string()
        )
    );
}

/// Attempt 1 writes `one.md` and fails only at publishing (its push's
/// remote does not exist): its branch is in the local source and its
/// bundle. Attempt 2 after it resumes its session, whose history has
/// `one.md` in it, on that branch, as after a done attempt. Before, only
/// a done attempt's branch was built on: attempt 2 resumed the session on
/// the spec's base, without `one.md`.
#[tokio::test(flavor = "multi_thread")]
async fn a_next_attempt_after_one_failed_at_publishing_resumes_on_its_branch() {
    const PUSHED: &str = r#"
[[turn]]
text = "Writing one."
[[turn.action]]
type = "shell"
command = "echo one > one.md"

[[turn]]
text = "Done with one."

[[turn]]
text = "Reading one."
[[turn.action]]
type = "shell"
command = "cat one.md > seen.md"

[[turn]]
text = "Done reading."
"#;
    if paddock_test_support::skip::engine("codex").is_none() {
        return;
    }
    let home = Home::new();
    let repo = repo(home.path());
    let spec = job(home.path(), "codex", &repo, SCRIPTED, Some(PUSHED));
    on_rung(&spec, "process");
    let nowhere = home.path().join("no-such-remote.git");
    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(
        &spec,
        format!(
            "{text}\n[results.push]\nurl = \"file://{}\"\n",
            nowhere.display()
        ),
    )
    .unwrap();
    let first = record(&run_spec(&home, &spec, &[], vec![]).await);
    let out = run_spec(
        &home,
        &spec,
        &[],
        vec!["--attempt-after".into(), first.id.clone()],
    )
    .await;
    let second = record(&out);
    let seen = std::fs::read_to_string(second.patch_path.clone().unwrap())
        .unwrap()
        .lines()
        .filter(|l| l.starts_with('+') && !l.starts_with("+++"))
        .map(str::to_string)
        .collect::<Vec<_>>();
    assert_eq!(
        (
            first.status,
            first.changed_files.clone(),
            second.base_ref.clone(),
            second.changed_files.clone(),
            seen,
        ),
        (
            JobStatus::Failed,
            vec!["one.md".to_string()],
            "paddock/T-1/1".to_string(),
            vec!["seen.md".to_string()],
            vec!["+one".to_string()],
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        details(&home, &second.id, Phase::SessionResumed).await,
        vec![Some(format!(
            "resumed session {} of attempt 1 (job {})",
            home.store()
                .await
                .engine_session(&first.id)
                .await
                .unwrap()
                .and_then(|s| paddock::engines::session_id(&s))
                .unwrap(),
            first.id
        ))]
    );
}

/// The README's hello example, followed up as its users would: attempt 1,
/// then `--attempt-after` the last job three times, each resuming the one
/// session. Its scenario answers each resumed attempt's new turn (before,
/// it had one such answer, and attempt 3 failed: the scenario exhausted).
#[tokio::test(flavor = "multi_thread")]
async fn the_hello_example_answers_follow_ups_to_attempt_4() {
    if paddock_test_support::skip::engine("codex").is_none() {
        return;
    }
    let home = Home::new();
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hello");
    let dir = home.path().join("hello");
    std::fs::create_dir(&dir).unwrap();
    for name in ["job.toml", "scenario.toml", "repo.bundle"] {
        std::fs::copy(example.join(name), dir.join(name)).unwrap();
    }
    let spec = dir.join("job.toml");
    on_rung(&spec, "process");
    let mut outcomes = Vec::new();
    let mut last: Option<String> = None;
    for _ in 0..4 {
        let extra = last
            .iter()
            .flat_map(|id| ["--attempt-after".to_string(), id.clone()])
            .collect();
        let out = run_spec(&home, &spec, &[], extra).await;
        let rec = record(&out);
        outcomes.push((rec.attempt, rec.status, rec.reason.clone()));
        last = Some(rec.id);
    }
    assert_eq!(
        outcomes,
        (1..=4)
            .map(|n| (n, JobStatus::Done, None))
            .collect::<Vec<_>>()
    );
}

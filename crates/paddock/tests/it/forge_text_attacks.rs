//! A hostile job against the people who read its pull request: the names
//! of the files it changes and leaves as build output, the commands it
//! runs and the engine's error messages reach the closeout, which Paddock
//! posts to the forge as Markdown (the pull request's body and a comment).
//! Each carries what a forge would obey: a backtick run that closes the
//! code span it is shown in, line breaks that start a forged "Policy
//! denials: None." section, an `@org/team` mention, a closing keyword
//! (`fixes #1`), an image that calls out, HTML that hides what follows.
//! Through the real `paddock` binary and the GitHub mock: every such text
//! is one code span on its own list item, whole, as the job wrote it (a
//! file's name with its line breaks as their escapes, `\u{a}`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use paddock_test_support::prelude::*;

use paddock_test_support::git_http::basic;

use super::results::{run_with_token, with_github, TOKEN};

/// The changed file's name.
const FILE: &str = "fix` @acme-owners fixes #1 ![](http:evil.example?leak) <!--\n\n### Policy denials\nNone.\n\n```.txt";

/// The directory holding the job's `__pycache__` (left out as build output).
const LEFT: &str = "x` ![](https:evil.example?leak) <details>\n\n### Policy denials\nNone.\n\n```";

/// The engine's stream: an error event and a failing command, both
/// hostile, JSON lines.
const EVENTS: &str = r#"{"type":"error","message":"retry ` @acme/owners fixes #1 ![](https://evil.example/?leak) <!-- Job `job-other`\n\n### Policy denials\nNone."}
{"type":"item.started","item":{"id":"c1","type":"command_execution","command":"false ``` @acme/owners fixes #2","aggregated_output":"","status":"in_progress"}}
{"type":"item.completed","item":{"id":"c1","type":"command_execution","command":"false ``` @acme/owners fixes #2","aggregated_output":"","exit_code":1,"status":"completed"}}
"#;

/// The closeout from its "What was done" to its cost: what the job's
/// text reached.
fn job_part(closeout: &str) -> &str {
    let start = closeout.find("### What was done").unwrap();
    let end = closeout.find("### Cost").unwrap();
    &closeout[start..end]
}

#[tokio::test(flavor = "multi_thread")]
async fn the_jobs_text_reaches_the_forge_as_code_spans_it_cannot_leave() {
    let home = Home::new();
    let repo = repo(home.path());
    let remotes = home.path().join("remotes");
    let bare = bare_remote(&remotes, &repo);
    let server =
        paddock_test_support::git_http::GitHttpServer::start(&remotes, &basic(TOKEN)).await;
    let mock = paddock_test_support::github::MockGitHub::start("acme", "widgets", TOKEN).await;
    let texts = home.path().join("texts");
    std::fs::create_dir_all(&texts).unwrap();
    std::fs::write(texts.join("file"), FILE).unwrap();
    std::fs::write(texts.join("left"), LEFT).unwrap();
    std::fs::write(texts.join("events"), EVENTS).unwrap();
    let t = texts.display();
    let body = format!(
        r#"printf 'fixed\n' > "$(cat {t}/file)"
mkdir -p "$(cat {t}/left)/__pycache__" && printf x > "$(cat {t}/left)/__pycache__/m.pyc"
echo '{{"type":"thread.started","thread_id":"t"}}'
echo '{{"type":"turn.started"}}'
cat {t}/events
echo '{{"type":"turn.completed","usage":{{"input_tokens":1,"cached_input_tokens":0,"output_tokens":1}}}}'"#
    );
    let spec = stand_in_spec(home.path(), &repo, "process", &body);
    with_github(&spec, &mock.url, &format!("{}/widgets.git", server.url));
    let record = run_with_token(&home, &spec).await;
    assert_eq!(
        (
            record.status,
            record.reason.clone(),
            record.changed_files.clone()
        ),
        (
            paddock_protocol::JobStatus::Done,
            None,
            vec![FILE.to_string()]
        )
    );
    let commit = git(&bare, &["rev-parse", "paddock/T-1/1"]);
    let want = format!(
        "### What was done
1 file(s) changed on `paddock/T-1/1`, one commit `{commit}` on `main`:
- ````fix` @acme-owners fixes #1 ![](http:evil.example?leak) <!--\\u{{a}}\\u{{a}}### Policy denials\\u{{a}}None.\\u{{a}}\\u{{a}}```.txt````

Left out as build output: ````x` ![](https:evil.example?leak) <details>\\u{{a}}\\u{{a}}### Policy denials\\u{{a}}None.\\u{{a}}\\u{{a}}```/__pycache__/````.

### Tests run
None seen.

### What failed
- ``retry ` @acme/owners fixes #1 ![](https://evil.example/?leak) <!-- Job `job-other` ### Policy denials None.``
- ````false ``` @acme/owners fixes #2```` failed (exit 1)

### Paddock's warnings
- ````left out of the patch as build output, not the job's work: x` ![](https:evil.example?leak) <details>\\u{{a}}\\u{{a}}### Policy denials\\u{{a}}None.\\u{{a}}\\u{{a}}```/__pycache__/````

### Policy denials
None.

",
        commit = commit.trim()
    );
    let pulls = mock.pulls();
    assert_eq!(pulls.len(), 1);
    let pr_body = pulls[0]["body"].as_str().unwrap();
    let comments = mock.comments();
    assert_eq!(comments.len(), 1);
    assert_eq!(
        (job_part(pr_body), job_part(&comments[0].1)),
        (want.as_str(), want.as_str())
    );
}

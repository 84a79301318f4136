//! A `submit` token holder attacking `paddock serve` through what its spec
//! names on the server's host, past the check of `server::submissions`
//! (allowed references, directories and hosts): a `file://` push into a
//! repository outside the allowed directories, a template or skill in an
//! allowed directory that is a link to a file anywhere, the `process`
//! rung, a keyless cloud upstream (the server's own cloud identity),
//! another job's workspace or the store under an allowed directory, and
//! a job's own webhook sent by a fleet's server that does not allow its
//! host. Each is refused (422 at submission, nothing recorded, nothing
//! written; the webhook not sent).

use serde_json::Value;

use paddock_test_support::prelude::*;

use crate::serve::{body, is_final, spec, Server, TURN};

/// The problem body of a refused submission with `detail`.
fn refused(detail: String) -> Value {
    serde_json::json!({
        "type": "urn:paddock:problem:bad_input",
        "title": "the job spec cannot run",
        "status": 422,
        "detail": detail,
        "code": "bad_input",
    })
}

/// The branches of the bare repository at `bare`.
fn branches(bare: &std::path::Path) -> String {
    git(bare, &["for-each-ref", "--format=%(refname)", "refs/heads"])
}

/// The attack: a spec pushes its branch with `results.push.url =
/// "file://…"` into a repository outside the directories the server
/// allows (one of the operator's, writable by the server). Before, a
/// `file://` push was neither a path nor a place connected to, so it was
/// not checked at all: the job was accepted and its branch written into
/// that repository. Now it is a path, refused outside `allow_paths`; a
/// `file://` push inside them is accepted.
#[tokio::test]
async fn a_file_push_outside_the_allowed_directories_is_refused() {
    let home = Home::new();
    let outside = tempfile::tempdir().unwrap();
    let theirs = outside.path().join("operators.git");
    std::fs::create_dir(&theirs).unwrap();
    git(&theirs, &["init", "-q", "--bare"]);
    let server = Server::start(&home, &[]).await;
    let mut job = spec(&home, "T-1", &format!("echo hi > hello.txt\n{TURN}"));
    job["results"] = serde_json::json!({"push": {"url": format!("file://{}", theirs.display())}});
    let resp = server.submit(&job, 0).await;
    assert_eq!(
        (resp.status().as_u16(), body::<Value>(resp).await),
        (
            422,
            refused(format!(
                "results.push.url: {} is a path on this server outside the directories a \
                 submitted spec may name ({}); the server allows a directory with `[serve] \
                 allow_paths` or `paddock serve --allow-path DIR`",
                theirs.display(),
                home.path().display()
            ))
        ),
        "{}",
        server.stderr()
    );
    let jobs: Value = body(server.get("/v1/jobs").await).await;
    assert_eq!(
        (jobs["jobs"].clone(), branches(&theirs)),
        (Value::Array(vec![]), String::new())
    );
    // Inside the allowed directories a `file://` push is the submitter's
    // to name.
    let ours = home.path().join("ours.git");
    std::fs::create_dir(&ours).unwrap();
    git(&ours, &["init", "-q", "--bare"]);
    job["results"]["push"]["url"] = Value::from(format!("file://{}", ours.display()));
    let id = server.submit_ok(&job, 0).await;
    let record = server.wait_for(&id, is_final).await;
    assert_eq!(
        (record.status, branches(&ours).trim()),
        (
            paddock_protocol::JobStatus::Done,
            "refs/heads/paddock/T-1/1"
        ),
        "{}",
        server.stderr()
    );
}

/// The attack: the submitter's templates directory lies inside a
/// directory the server allows (a checkout it commits to, say), and one
/// of its templates is a link to a file of the server's (its key). The
/// check resolves the directory it names, not the files in it, and the
/// templates were read through links: the file's text became the job's
/// prompt, which the job (the submitter's) reads. Now a template that is
/// a link (or not a regular file) is refused by name, at submission as
/// templates are loaded at admission; so is a skill of a library that is
/// a link to a directory elsewhere.
#[tokio::test]
async fn a_template_or_skill_linking_out_of_an_allowed_directory_is_refused() {
    let home = Home::new();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("server-key");
    std::fs::write(&secret, "TOPSECRET-of-the-server\n").unwrap();
    let server = Server::start(&home, &[]).await;
    let tpl = home.path().join("checkout/tpl");
    std::fs::create_dir_all(&tpl).unwrap();
    std::os::unix::fs::symlink(&secret, tpl.join("prompt.md.j2")).unwrap();
    let mut job = spec(&home, "T-1", TURN);
    job["context"]["templates_dir"] = Value::from(tpl.display().to_string());
    let resp = server.submit(&job, 0).await;
    assert_eq!(
        (resp.status().as_u16(), body::<Value>(resp).await),
        (
            422,
            refused(format!(
                "context.templates_dir {}: prompt.md.j2 is a symbolic link or not a regular file; \
                 templates are regular files only",
                tpl.display()
            ))
        ),
        "{}",
        server.stderr()
    );
    // A skill of the library that is a link to a directory with a
    // SKILL.md elsewhere.
    let lib = home.path().join("checkout/skills");
    std::fs::create_dir_all(&lib).unwrap();
    let there = outside.path().join("keys");
    std::fs::create_dir(&there).unwrap();
    std::fs::write(
        there.join("SKILL.md"),
        "---\nname: keys\ndescription: x\n---\n",
    )
    .unwrap();
    std::fs::write(there.join("id_ed25519"), "PRIVATE-of-the-server\n").unwrap();
    std::os::unix::fs::symlink(&there, lib.join("keys")).unwrap();
    let mut job = spec(&home, "T-2", TURN);
    job["context"] = serde_json::json!({
        "skills_dir": lib.display().to_string(),
        "skills": ["keys"],
    });
    let resp = server.submit(&job, 0).await;
    assert_eq!(
        (resp.status().as_u16(), body::<Value>(resp).await),
        (
            422,
            refused(format!(
                "skill `keys` (library {}): is a symbolic link; a library's skills are \
                 directories",
                lib.display()
            ))
        ),
        "{}",
        server.stderr()
    );
}

/// The attack: a spec asks for the `process` rung, where the job runs as
/// the server's user: its command (here the stand-in engine, on a real
/// engine a command the ticket talks it into) reads a file of the
/// server's that no allowance names and puts it in the job's events,
/// which the submitter reads. Before, the spec was accepted and run
/// (the check looked at what the spec names, not at where the job may
/// reach). Now it is refused unless the server allows the rung
/// (`--allow-process`); on such a server it runs.
#[tokio::test]
async fn a_submitted_spec_asks_for_the_process_rung_only_where_allowed() {
    let home = Home::new();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("server-key");
    std::fs::write(&secret, "TOPSECRET-of-the-server\n").unwrap();
    let reads = format!("cat '{}' >&2\n{TURN}", secret.display());
    let job = spec(&home, "T-1", &reads);
    assert_eq!(job["isolation"], "process");
    let strict = Server::start_allowing(&home, &[], &[], &[]).await;
    let resp = strict.submit(&job, 0).await;
    assert_eq!(
        (resp.status().as_u16(), body::<Value>(resp).await),
        (
            422,
            refused(
                "isolation: a submitted spec may not ask for the `process` rung, which runs the \
                 job as this server's user with its files, keys and network, unless the server \
                 allows it (`[serve] allow_process = true` or `paddock serve --allow-process`); \
                 leave `isolation` out (or `auto`) or ask for `sandbox`"
                    .to_owned()
            )
        ),
        "{}",
        strict.stderr()
    );
    drop(strict);
    let allowing = Server::start(&home, &[]).await;
    let id = allowing.submit_ok(&job, 0).await;
    assert_eq!(
        allowing.wait_for(&id, is_final).await.status,
        paddock_protocol::JobStatus::Done,
        "{}",
        allowing.stderr()
    );
    drop(allowing);
    // A server whose config file gives `auto` specs the `process` rung
    // has chosen it: a spec may name it too (and a stored one, claimed
    // again after a restart, passes the same check).
    home.write_config("isolation = \"process\"\n");
    let configured = Server::start_allowing(&home, &[], &[], &[]).await;
    let mut auto = spec(&home, "T-2", TURN);
    auto.as_object_mut().unwrap().remove("isolation");
    let mut named = spec(&home, "T-3", TURN);
    named["isolation"] = Value::from("process");
    let auto = configured.submit_ok(&auto, 0).await;
    let named = configured.submit_ok(&named, 0).await;
    let mut rungs = Vec::new();
    for id in [auto, named] {
        let record = configured.wait_for(&id, is_final).await;
        rungs.push((record.status, record.isolation));
    }
    assert_eq!(
        rungs,
        vec![(paddock_protocol::JobStatus::Done, "process".to_owned()); 2],
        "{}",
        configured.stderr()
    );
}

/// The attack: a job's own `results.webhook_url` is checked by the server
/// that accepts it, but any server on the store sends what is owed. A
/// fleet's other server, which does not let a submitted spec name that
/// host, ended the job (a cancel) and POSTed its final record there all
/// the same. Now the sender checks the URL against its own `[serve]
/// allow_hosts` too: no request, and the attempt not made is on the
/// record with the reason.
#[tokio::test]
async fn a_job_s_own_webhook_goes_only_where_its_sender_allows() {
    let home = Home::new();
    let (hook, received) = crate::serve::hook_receiver().await;
    let secret = "whsec-fleet-0123456789";
    let env = [("PADDOCK_TEST_HOOK_SECRET", secret)];
    // The accepting server takes only bugs: the chore waits in the queue.
    let config = home.path().join("config").join("paddock");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        "[[serve.lanes]]\ntask_types = [\"bug\"]\n",
    )
    .unwrap();
    let accepting = Server::start_env(
        &home,
        &[
            "--webhook-secret",
            "env:PADDOCK_TEST_HOOK_SECRET",
            "--allow-host",
            "127.0.0.1",
        ],
        &env,
    )
    .await;
    let mut job = spec(&home, "T-1", TURN);
    job["ticket"]["type"] = Value::from("chore");
    job["results"]["webhook_url"] = Value::from(hook.clone());
    let id = accepting.submit_ok(&job, 0).await;
    drop(accepting);
    // Another server on the store, which lets no submitted spec have it
    // connect to 127.0.0.1, ends it.
    std::fs::write(config.join("config.toml"), "").unwrap();
    let other = Server::start_env(
        &home,
        &["--webhook-secret", "env:PADDOCK_TEST_HOOK_SECRET"],
        &env,
    )
    .await;
    // It passes the job over (its claim's check, a fleet's), then cancels
    // it while it waits in the queue. (A cancel in the instant between
    // the pass-over and its slot's release answers `stopping` and is
    // lost, which is another matter: asked again until the job ends.)
    let mut ended = None;
    for _ in 0..200 {
        let record = other.job(&id).await;
        if is_final(record.status) {
            ended = Some(record.status);
            break;
        }
        if record.reason.is_some() {
            let _ = other.cancel(&id).await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(
        ended,
        Some(paddock_protocol::JobStatus::Cancelled),
        "{}",
        other.stderr()
    );
    let store = home.store().await;
    let mut attempts = Vec::new();
    for _ in 0..200 {
        attempts = store.webhook_attempts(&id).await.unwrap();
        if !attempts.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let made: Vec<_> = attempts
        .into_iter()
        .map(|a| (a.url, a.attempt, a.delivered, a.http_status, a.error))
        .collect();
    assert_eq!(
        (made, received.lock().unwrap().len()),
        (
            vec![(
                hook.clone(),
                1,
                false,
                None,
                Some(format!(
                    "not sent by this server: results.webhook_url: `{hook}` is a place this \
                     server would connect to (with its credentials, where the spec names one), \
                     and 127.0.0.1 is not a host a submitted spec may have it connect to; the \
                     server allows a host with `[serve] allow_hosts` or `paddock serve \
                     --allow-host 127.0.0.1`"
                ))
            )],
            0
        ),
        "{}",
        other.stderr()
    );
}

/// The attack: a spec names no key for a cloud upstream (`bedrock`,
/// `vertex`), so the server uses its own cloud identity (the AWS
/// credential chain, here its environment's keys; Google's Application
/// Default Credentials), which no `allow_refs` entry lets a submitted spec
/// use: the check looked only at the references a spec writes. Now the
/// host's own credentials are a reference too (`aws:credential-chain`,
/// `aws:profile:NAME`, `google:application-default`), refused unless
/// listed; listed, the spec is accepted.
#[tokio::test]
async fn a_keyless_cloud_upstream_uses_the_server_s_identity_only_where_allowed() {
    let home = Home::new();
    let env = [
        ("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEOFTHESERVER"),
        ("AWS_SECRET_ACCESS_KEY", "secret-of-the-server"),
    ];
    let mut job = spec(&home, "T-1", TURN);
    job["engine"]["kind"] = Value::from("claude");
    // An allowed host that answers nothing: the call, if made, fails.
    job["upstream"] = serde_json::json!({
        "provider": "bedrock",
        "bedrock_region": "us-east-1",
        "base_url": "http://127.0.0.1:9",
        "allow_unpriced": true,
    });
    let strict = Server::start_env(&home, &["--allow-host", "127.0.0.1"], &env).await;
    let resp = strict.submit(&job, 0).await;
    assert_eq!(
        (resp.status().as_u16(), body::<Value>(resp).await),
        (
            422,
            refused(
                "upstream.key: none given, so this server would use its own cloud credentials \
                 (`aws:credential-chain`), which a submitted spec may use only when the server \
                 allows it (`[serve] allow_refs` or `paddock serve --allow-ref \
                 aws:credential-chain`)"
                    .to_owned()
            )
        ),
        "{}",
        strict.stderr()
    );
    drop(strict);
    let allowing = Server::start_env(
        &home,
        &[
            "--allow-host",
            "127.0.0.1",
            "--allow-ref",
            "aws:credential-chain",
        ],
        &env,
    )
    .await;
    let resp = allowing.submit(&job, 0).await;
    assert_eq!(resp.status(), 202, "{}", allowing.stderr());
}

/// The attack: the operator allows a directory that holds the server's
/// own (here the test's home: its jobs directory, artifacts and store are
/// in it, as `/var/lib/paddock` holds them in the container). A spec
/// names another job's workspace, still running, as its repository: its
/// job clones that other submitter's work (and whatever the hostile job
/// planted there). Before, accepted; now the server's own places (jobs
/// directory, artifacts, SQLite file) are refused whatever is allowed.
#[tokio::test]
async fn the_server_s_own_places_are_never_a_submitted_spec_s() {
    let home = Home::new();
    let server = Server::start(&home, &[]).await;
    let gate = home.path().join("gate");
    let waits = format!(
        "i=0; while [ ! -e '{}' ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n{TURN}",
        gate.display()
    );
    let theirs = server.submit_ok(&spec(&home, "T-1", &waits), 0).await;
    let work = home.jobs().join(&theirs).join("work");
    for _ in 0..600 {
        if work.join(".git").exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(work.join(".git").exists(), "{}", server.stderr());
    let mut job = spec(&home, "T-2", TURN);
    job["repository"]["path"] = Value::from(work.display().to_string());
    let mut db = spec(&home, "T-3", TURN);
    db["upstream"]["scenario"] = Value::from(home.db().display().to_string());
    let mut got = Vec::new();
    for s in [&job, &db] {
        let resp = server.submit(s, 0).await;
        got.push((resp.status().as_u16(), body::<Value>(resp).await));
    }
    std::fs::write(&gate, "").unwrap();
    let own = |path: &std::path::Path, own: &std::path::Path| {
        (
            422,
            refused(format!(
                "{}: {} is one of this server's own places ({}: every job's workspace, output \
                 and record is there), which a submitted spec may not name even under an \
                 allowed directory",
                if path == work {
                    "repository.path"
                } else {
                    "upstream.scenario"
                },
                path.display(),
                own.display()
            )),
        )
    };
    assert_eq!(
        got,
        vec![own(&work, &home.jobs()), own(&home.db(), &home.db())],
        "{}",
        server.stderr()
    );
    server.wait_for(&theirs, is_final).await;
}

/// The attack: a submitted source named so that git opens a repository
/// the server's check never judged. git looks for `file:///…/x` as
/// `x/.git`, `x`, `x.git/.git` and `x.git` (a `file://` URL's trailing
/// slashes dropped), and the check judged `x` alone: the allowed
/// directory itself (`file:///…/repos`) cloned its sibling `repos.git`,
/// outside every allowed directory, and `file:///…/x/` cloned through
/// `x.git`, a link in an allowed directory leading out; both jobs were
/// accepted and ran on the operator's repository (probe failed on the old
/// code: 202 each). And the look at a source that is no repository walked
/// every directory above it, naming the work tree it found outside the
/// allowed directories. Now every path git may open is judged, and the
/// look stays inside the allowed directories: 422, nothing recorded.
#[tokio::test]
async fn a_source_git_would_open_outside_the_allowed_directories_is_refused() {
    let home = Home::new();
    let outside = tempfile::tempdir().unwrap();
    let theirs = outside.path();
    git(theirs, &["init", "-q"]);
    let src = repo(theirs);
    let repos = theirs.join("repos");
    std::fs::create_dir_all(repos.join("sub")).unwrap();
    let sibling = theirs.join("repos.git");
    git(
        theirs,
        &[
            "clone",
            "-q",
            "--bare",
            &src.display().to_string(),
            &sibling.display().to_string(),
        ],
    );
    std::os::unix::fs::symlink(&sibling, home.path().join("x.git")).unwrap();
    let allowed = repos.display().to_string();
    let server = Server::start(&home, &["--allow-path", &allowed]).await;
    let x = home.path().join("x");
    let sources = [
        serde_json::json!({"url": format!("file://{}", repos.display()), "base_ref": "main"}),
        serde_json::json!({"url": format!("file://{}/", x.display()), "base_ref": "main"}),
        serde_json::json!({"path": repos.join("sub").display().to_string(), "base_ref": "main"}),
    ];
    let mut got = Vec::new();
    for (n, source) in sources.into_iter().enumerate() {
        let mut job = spec(&home, &format!("T-{n}"), TURN);
        job["repository"] = source;
        let resp = server.submit(&job, 0).await;
        got.push((resp.status().as_u16(), body::<Value>(resp).await));
    }
    let jobs: Value = body(server.get("/v1/jobs").await).await;
    let opens = |path: &std::path::Path, tried: &std::path::Path| {
        (
            422,
            refused(format!(
                "repository.url: git, given {}, also opens {} when it is there, a path on this \
                 server outside the directories a submitted spec may name ({}, {allowed}) or a \
                 link leading out of them; the server allows a directory with `[serve] \
                 allow_paths` or `paddock serve --allow-path DIR`",
                path.display(),
                tried.display(),
                home.path().display()
            )),
        )
    };
    assert_eq!(
        (got, jobs["jobs"].clone()),
        (
            vec![
                opens(&repos, &sibling),
                opens(&x, &home.path().join("x.git")),
                (
                    422,
                    serde_json::json!({
                        "type": "urn:paddock:problem:repository_not_found",
                        "title": "the job's repository is not there",
                        "status": 422,
                        "detail": format!(
                            "repository.path {}/sub: not a git repository (no `.git` in it, and \
                             no bare repository's `HEAD`), on this host; the server that runs \
                             the job clones the repository whose top level the spec names: name \
                             one that is there on this host for this server to run the job",
                            repos.display()
                        ),
                        "code": "repository_not_found",
                    })
                ),
            ],
            Value::Array(vec![]),
        ),
        "{}",
        server.stderr()
    );
}

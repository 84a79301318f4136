//! The result branch's bundle holds only the job's new objects, on the base
//! as its prerequisite, wherever the host keeps the base (the local source,
//! a URL's mirror): fetched into the source, pushed to a remote that has
//! nothing (the push borrows the base's objects), published again later;
//! and the whole history when the base is kept nowhere any more (a source
//! rewritten and pruned during the job), said in an event.

use std::path::{Path, PathBuf};

use paddock_test_support::prelude::*;

/// The header lines of a bundle (up to the blank line before its pack).
fn header(bundle: &Path) -> Vec<String> {
    let bytes = std::fs::read(bundle).unwrap();
    let end = bytes.windows(2).position(|w| w == b"\n\n").unwrap();
    String::from_utf8(bytes[..end].to_vec())
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// How many objects the pack of a bundle holds (`git bundle unbundle`
/// into a scratch repository would need the base: the pack's header says).
fn pack_objects(bundle: &Path) -> u32 {
    let bytes = std::fs::read(bundle).unwrap();
    let at = bytes.windows(6).position(|w| w == b"\n\nPACK").unwrap() + 2;
    u32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap())
}

fn finishing(work: &str) -> String {
    format!(
        "{work}\necho '{{\"type\":\"thread.started\",\"thread_id\":\"t\"}}'\necho '{{\"type\":\"turn.started\"}}'\necho '{{\"type\":\"turn.completed\",\"usage\":{{\"input_tokens\":1,\"cached_input_tokens\":0,\"output_tokens\":1}}}}'"
    )
}

/// An empty bare repository `name` under `dir`.
fn empty_remote(dir: &Path, name: &str) -> PathBuf {
    let bare = dir.join(name);
    std::fs::create_dir_all(&bare).unwrap();
    git(&bare, &["init", "-q", "--bare"]);
    bare
}

/// The spec pushes to `remote` (a `file://` URL, no credential).
fn pushing_to(spec: &Path, remote: &Path) {
    let text = std::fs::read_to_string(spec).unwrap();
    std::fs::write(
        spec,
        format!(
            "{text}\n[results.push]\nurl = \"file://{}\"\n",
            remote.display()
        ),
    )
    .unwrap();
}

/// The job's non-fatal error events (its warnings).
async fn warnings(home: &Home, id: &str) -> Vec<String> {
    home.store()
        .await
        .events(id, 0)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.body {
            paddock_protocol::EventBody::Error {
                message,
                fatal: false,
                ..
            } => Some(message),
            _ => None,
        })
        .collect()
}

const BRANCH: &str = "paddock/T-1/1";

/// A local source: the bundle names the base as its prerequisite and holds
/// the commit, its tree and the one new file (3 objects); the source gets
/// the branch; a remote that has nothing gets the whole branch (the push
/// borrowed the source's objects, and the remote's repository is whole:
/// `git fsck`); the scratch repository is gone and the source borrows
/// nothing; `paddock publish` pushes it again, borrowing again, to the
/// remote emptied.
#[tokio::test(flavor = "multi_thread")]
async fn a_local_jobs_bundle_holds_only_its_new_objects_and_pushes_whole() {
    let home = Home::new();
    let repo = repo(home.path());
    let base = git(&repo, &["rev-parse", "main"]).trim().to_string();
    let subject = git(&repo, &["log", "-1", "--format=%s", "main"])
        .trim()
        .to_string();
    let remote = empty_remote(home.path(), "remote.git");
    let spec = stand_in_spec(
        home.path(),
        &repo,
        "process",
        &finishing("printf 'fixed\\n' > fix.txt"),
    );
    pushing_to(&spec, &remote);
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    let artifacts = home.data().join("artifacts").join(&rec.id);
    let bundle = artifacts.join("branch.bundle");
    let commit = git(&repo, &["rev-parse", BRANCH]).trim().to_string();
    let leftovers: Vec<String> = std::fs::read_dir(&artifacts)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".push-"))
        .collect();
    assert_eq!(
        (
            rec.status,
            rec.reason.clone(),
            header(&bundle),
            pack_objects(&bundle),
            git(&repo, &["rev-parse", &format!("{BRANCH}^")])
                .trim()
                .to_string(),
            git(&remote, &["rev-parse", BRANCH]).trim().to_string(),
            git(&remote, &["fsck", "--no-dangling", "--no-progress"]),
            leftovers,
            repo.join(".git/objects/info/alternates").exists(),
            warnings(&home, &rec.id).await,
        ),
        (
            paddock_protocol::JobStatus::Done,
            None,
            vec![
                "# v2 git bundle".to_string(),
                format!("-{base} {subject}"),
                format!("{commit} refs/heads/{BRANCH}"),
            ],
            3,
            base.clone(),
            commit.clone(),
            String::new(),
            Vec::<String>::new(),
            false,
            Vec::<String>::new(),
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Again, later, to the remote emptied of it (no ref, no object).
    git(
        &remote,
        &["update-ref", "-d", &format!("refs/heads/{BRANCH}")],
    );
    git(&remote, &["gc", "-q", "--prune=now"]);
    assert_eq!(git(&remote, &["count-objects"]), "0 objects, 0 kilobytes\n");
    let again = home.paddock(&["publish", "--json", &rec.id], &[]).await;
    let republished = record(&again);
    assert_eq!(
        (
            again.status.code(),
            republished.status,
            git(&remote, &["rev-parse", BRANCH]).trim().to_string(),
            git(&remote, &["fsck", "--no-dangling", "--no-progress"]),
        ),
        (
            Some(0),
            paddock_protocol::JobStatus::Done,
            commit,
            String::new()
        ),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}

/// The base rewritten out of the source and pruned while the job runs:
/// the bundle has the branch's whole history (no prerequisite), an event
/// says why, and the source still gets the branch on the old base.
#[tokio::test(flavor = "multi_thread")]
async fn a_base_pruned_from_the_source_gets_the_whole_history_and_says_so() {
    let home = Home::new();
    let repo = repo(home.path());
    let base = git(&repo, &["rev-parse", "main"]).trim().to_string();
    let r = repo.display();
    let rewrite = format!(
        "git -C '{r}' -c user.name=u -c user.email=u@localhost commit -q --amend -m rewritten \
         && git -C '{r}' reflog expire --expire=now --all \
         && git -C '{r}' gc -q --prune=now \
         && printf 'fixed\\n' > fix.txt"
    );
    let spec = stand_in_spec(home.path(), &repo, "process", &finishing(&rewrite));
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    let bundle = home
        .data()
        .join("artifacts")
        .join(&rec.id)
        .join("branch.bundle");
    let commit = git(&repo, &["rev-parse", BRANCH]).trim().to_string();
    let events = warnings(&home, &rec.id).await;
    let wanted = format!(
        "the branch's bundle holds its whole history, not only the job's new objects: \
         the base commit {base} is kept nowhere on this host (the source does not have it any more)"
    );
    assert_eq!(
        (
            rec.status,
            header(&bundle),
            git(&repo, &["rev-parse", &format!("{BRANCH}^")])
                .trim()
                .to_string(),
            events.clone(),
        ),
        (
            paddock_protocol::JobStatus::Done,
            vec![
                "# v2 git bundle".to_string(),
                format!("{commit} refs/heads/{BRANCH}"),
            ],
            base,
            vec![wanted],
        ),
        "{events:?}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A URL source: the bundle holds only the job's new objects, and the push
/// to a remote that has nothing borrows the base from the URL's mirror;
/// with the mirror removed, `paddock publish` makes it again from the URL
/// (`results::paddock_publish_makes_a_removed_mirror_again`); here the URL
/// cannot be read any more (its credentials were the run's git config
/// only), so the publish fails naming the mirror and the URL, the bundle
/// kept.
#[tokio::test(flavor = "multi_thread")]
async fn a_url_jobs_push_borrows_the_base_from_its_mirror() {
    use base64::Engine as _;
    const SERVED: &str = "pdk_servedToken_0123456789";
    let home = Home::new();
    let repo = repo(home.path());
    let base = git(&repo, &["rev-parse", "main"]).trim().to_string();
    let served = home.path().join("served");
    std::fs::create_dir_all(&served).unwrap();
    let out = std::process::Command::new("git")
        .args(["clone", "-q", "--bare"])
        .arg(&repo)
        .arg(served.join("widgets.git"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let header_value = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{SERVED}"))
    );
    let server = paddock_test_support::git_http::GitHttpServer::start(&served, &header_value).await;
    let config = home.path().join("user.gitconfig");
    std::fs::write(
        &config,
        format!("[http]\n\textraHeader = Authorization: {header_value}\n"),
    )
    .unwrap();
    let spec = stand_in_spec(
        home.path(),
        &repo,
        "process",
        &finishing("printf 'fixed\\n' > fix.txt"),
    );
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        &format!("path = \"{}\"", repo.display()),
        &format!("url = \"{}/widgets.git\"", server.url),
    );
    std::fs::write(&spec, text).unwrap();
    let remote = empty_remote(home.path(), "remote.git");
    pushing_to(&spec, &remote);
    let config = config.to_str().unwrap().to_string();
    let out = home
        .paddock(
            &["run", "--json", spec.to_str().unwrap()],
            &[("GIT_CONFIG_GLOBAL", &config)],
        )
        .await;
    let rec = record(&out);
    let bundle = home
        .data()
        .join("artifacts")
        .join(&rec.id)
        .join("branch.bundle");
    let commit = git(&remote, &["rev-parse", BRANCH]).trim().to_string();
    assert_eq!(
        (
            rec.status,
            header(&bundle).len(),
            header(&bundle)[1].starts_with(&format!("-{base} ")),
            pack_objects(&bundle),
            git(&remote, &["rev-parse", &format!("{BRANCH}^")])
                .trim()
                .to_string(),
            git(&remote, &["fsck", "--no-dangling", "--no-progress"]),
            warnings(&home, &rec.id).await,
        ),
        (
            paddock_protocol::JobStatus::Done,
            3,
            true,
            3,
            base.clone(),
            String::new(),
            Vec::<String>::new(),
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The mirror gone, and the remote emptied: the push has no base.
    let mirrors = home.jobs().join(".mirrors");
    for e in std::fs::read_dir(&mirrors).unwrap() {
        let path = e.unwrap().path();
        if path.is_dir() {
            std::fs::remove_dir_all(&path).unwrap();
        }
    }
    git(
        &remote,
        &["update-ref", "-d", &format!("refs/heads/{BRANCH}")],
    );
    git(&remote, &["gc", "-q", "--prune=now"]);
    let again = home.paddock(&["publish", "--json", &rec.id], &[]).await;
    let failed = record(&again);
    let reason = failed.reason.clone().unwrap_or_default();
    let wanted = format!(
        "publishing the result failed: the base's mirror is gone and could not be made again: repository {}/widgets.git: git clone failed: ",
        server.url
    );
    assert_eq!(
        (
            failed.status,
            reason.starts_with(&wanted),
            bundle.exists(),
            commit.len()
        ),
        (paddock_protocol::JobStatus::Failed, true, true, 40),
        "{reason}"
    );
}

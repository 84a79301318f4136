//! The result branch's bundle holds only the job's new objects, on the base
//! as its prerequisite, wherever the host keeps the base (the local source,
//! a URL's mirror): fetched into the source, pushed to a remote that has
//! nothing (the push borrows the base's objects), published again later;
//! and the whole history when the base is kept nowhere any more (a source
//! rewritten and pruned during the job), said in an event.

use std::path::{Path, PathBuf};

use paddock_test_support::prelude::*;

/// A URL source served over smart HTTP: a bare clone of `repo` as
/// `served/widgets.git`, its server demanding [`SERVED`]'s header, the
/// user's git configuration sending it, and a stand-in job fetching it.
struct Served {
    server: paddock_test_support::git_http::GitHttpServer,
    /// The served repository.
    repo: PathBuf,
    url: String,
    /// The user's git configuration (`GIT_CONFIG_GLOBAL`).
    config: String,
    spec: PathBuf,
}

/// The token [`Served`]'s server demands.
const SERVED: &str = "pdk_servedToken_0123456789";

async fn served(home: &Home, repo: &Path) -> Served {
    let served = home.path().join("served");
    let served_repo = bare_remote(&served, repo);
    let header_value = paddock_test_support::git_http::basic(SERVED);
    let server = paddock_test_support::git_http::GitHttpServer::start(&served, &header_value).await;
    let url = format!("{}/widgets.git", server.url);
    let config = home.path().join("user.gitconfig");
    std::fs::write(
        &config,
        format!("[http]\n\textraHeader = Authorization: {header_value}\n"),
    )
    .unwrap();
    let spec = stand_in_spec(
        home.path(),
        repo,
        "process",
        &finishing("printf 'fixed\\n' > fix.txt"),
    );
    super::results::use_url_source(&spec, repo, &url, None);
    Served {
        server,
        repo: served_repo,
        url,
        config: config.to_str().unwrap().to_string(),
        spec,
    }
}

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
            home.warnings(&rec.id).await,
        ),
        (
            paddock_protocol::JobStatus::Done,
            None,
            vec![
                "# v2 git bundle".to_string(),
                format!("-{base}"),
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
    let events = home.warnings(&rec.id).await;
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
/// only), so the publish fails naming the mirror and the URL (exit 1),
/// the bundle kept and the job, published before, still `done`.
#[tokio::test(flavor = "multi_thread")]
async fn a_url_jobs_push_borrows_the_base_from_its_mirror() {
    let home = Home::new();
    let repo = repo(home.path());
    let base = git(&repo, &["rev-parse", "main"]).trim().to_string();
    let Served {
        server,
        config,
        spec,
        ..
    } = served(&home, &repo).await;
    let remote = empty_remote(home.path(), "remote.git");
    pushing_to(&spec, &remote);
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
            header(&bundle)[1] == format!("-{base}"),
            pack_objects(&bundle),
            git(&remote, &["rev-parse", &format!("{BRANCH}^")])
                .trim()
                .to_string(),
            git(&remote, &["fsck", "--no-dangling", "--no-progress"]),
            home.warnings(&rec.id).await,
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
    // The job was published before: it stays `done` (its first publish
    // stands), the publish exits 1 naming why it failed.
    let failed = record(&again);
    let said = String::from_utf8_lossy(&again.stderr).into_owned();
    let wanted = format!(
        "paddock: publishing the result failed: the base's mirror is gone and could not be made again: repository {}/widgets.git: git clone failed: ",
        server.url
    );
    assert_eq!(
        (
            failed.status,
            failed.reason.clone(),
            again.status.code(),
            said.starts_with(&wanted),
            bundle.exists(),
            commit.len()
        ),
        (
            paddock_protocol::JobStatus::Done,
            None,
            Some(1),
            true,
            true,
            40
        ),
        "{said}"
    );
}

/// A URL source rewritten after its job (main force-pushed to a new root:
/// the job's base is reachable from no ref) and its mirror pruned and made
/// again by a later job, so the mirror is there but lacks the base:
/// `paddock publish` fetches again and asks for the base by its name,
/// which a server that keeps the dropped commit gives back (GitHub does;
/// here `git http-backend` with `uploadpack.allowAnySHA1InWant`), and
/// pushes the bundle of the job's new objects onto it; no ref of the
/// mirror names the base. Once the server has dropped the commit too
/// (`gc --prune=now`) and the mirror is made again, the publish fails
/// naming the base, the mirror and the URL (exit 1), the bundle kept and
/// the job, published before, still `done`.
#[tokio::test(flavor = "multi_thread")]
async fn a_mirror_lacking_the_base_after_a_force_push_is_fetched_again() {
    let home = Home::new();
    let repo = repo(home.path());
    let base = git(&repo, &["rev-parse", "main"]).trim().to_string();
    // The server is held to the test's end.
    let Served {
        server: _server,
        repo: served_repo,
        url,
        config,
        spec,
    } = served(&home, &repo).await;
    // A later job on the URL that pushes nothing.
    let later = home.path().join("later.toml");
    std::fs::copy(&spec, &later).unwrap();
    let remote = empty_remote(home.path(), "remote.git");
    pushing_to(&spec, &remote);
    let run = |spec: PathBuf| {
        let (home, config) = (&home, &config);
        async move {
            let out = home
                .paddock(
                    &["run", "--json", spec.to_str().unwrap()],
                    &[("GIT_CONFIG_GLOBAL", config)],
                )
                .await;
            let rec = record(&out);
            assert_eq!(
                rec.status,
                paddock_protocol::JobStatus::Done,
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            rec
        }
    };
    let rec = run(spec.clone()).await;
    let bundle = home
        .data()
        .join("artifacts")
        .join(&rec.id)
        .join("branch.bundle");
    assert_eq!(header(&bundle)[1], format!("-{base}"));

    // main force-pushed to a new root commit: the base is on no ref.
    let tree = git(&served_repo, &["rev-parse", "main^{tree}"]);
    let rewritten = git(
        &served_repo,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit-tree",
            tree.trim(),
            "-m",
            "rewritten",
        ],
    );
    git(
        &served_repo,
        &["update-ref", "refs/heads/main", rewritten.trim()],
    );
    // The mirror pruned (as the cap or the age would) and made again by a
    // later job: there, without the base.
    let mirrors = home.jobs().join(".mirrors");
    let remake_mirror = || async {
        for e in std::fs::read_dir(&mirrors).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                std::fs::remove_dir_all(&path).unwrap();
            }
        }
        run(later.clone()).await;
        let mirror = std::fs::read_dir(&mirrors)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.is_dir())
            .unwrap();
        let lacks = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(&mirror)
            .args(["cat-file", "-e", &base])
            .status()
            .unwrap();
        assert!(!lacks.success(), "the remade mirror has the base");
        mirror
    };
    // The remote emptied: the push must borrow the base's objects.
    let empty = || {
        git(
            &remote,
            &["update-ref", "-d", &format!("refs/heads/{BRANCH}")],
        );
        git(&remote, &["gc", "-q", "--prune=now"]);
    };
    let mirror = remake_mirror().await;
    empty();
    git(
        &served_repo,
        &["config", "uploadpack.allowAnySHA1InWant", "true"],
    );
    let again = home
        .paddock(
            &["publish", "--json", &rec.id],
            &[("GIT_CONFIG_GLOBAL", &config)],
        )
        .await;
    let published = record(&again);
    assert_eq!(
        (
            published.status,
            published.reason.clone(),
            git(&remote, &["rev-parse", &format!("{BRANCH}^")])
                .trim()
                .to_string(),
            git(&remote, &["fsck", "--no-dangling", "--no-progress"]),
            git(&mirror, &["cat-file", "-t", &base]).trim().to_string(),
            git(&mirror, &["for-each-ref", "--contains", &base]),
        ),
        (
            paddock_protocol::JobStatus::Done,
            None,
            base.clone(),
            String::new(),
            "commit".to_string(),
            String::new(),
        ),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );

    // The server drops the commit too; the mirror is made again.
    git(&served_repo, &["reflog", "expire", "--expire=now", "--all"]);
    git(&served_repo, &["gc", "-q", "--prune=now"]);
    let mirror = remake_mirror().await;
    empty();
    let again = home
        .paddock(
            &["publish", "--json", &rec.id],
            &[("GIT_CONFIG_GLOBAL", &config)],
        )
        .await;
    // Published before: the job stays `done`, the publish exits 1 saying
    // why it failed and that what the first publish left stands.
    let failed = record(&again);
    assert_eq!(
        (
            failed.status,
            failed.reason.clone(),
            again.status.code(),
            String::from_utf8_lossy(&again.stderr).trim_end().to_owned(),
            bundle.exists()
        ),
        (
            paddock_protocol::JobStatus::Done,
            None,
            Some(1),
            format!(
                "paddock: publishing the result failed: the base's mirror lacks it: the base commit {base} \
                 is neither in the mirror {} nor to be had from {url} any more (fetched again, \
                 and asked for by name); the job stays done: it was published before, and what \
                 that publish left (its branch, pull request and closeout) stands as it was \
                 (`paddock publish {}` tries again)",
                mirror.display(),
                rec.id
            ),
            true
        ),
    );
}

/// A URL job whose `base_ref` is a commit no ref the URL advertises
/// reaches (made on the server and left unnamed, as a force-push leaves
/// the commit it dropped): its provisioning fetches the mirror's refs,
/// finds the commit missing and asks the URL for it by name. Served by
/// `git http-backend` without `uploadpack.allowAnySHA1InWant`, the job
/// fails at provisioning (bad input, exit 2) with an error naming the URL
/// and the commit and git's own message, no workspace left; with it, the
/// job runs on that commit in the default layout (the overlay on a
/// snapshot where this process may mount, else the clone) and in the
/// clone, each time from a mirror made afresh: the
/// branch's bundle has the commit as its prerequisite, and no ref of the
/// mirror names it.
#[tokio::test(flavor = "multi_thread")]
async fn a_url_jobs_base_that_no_ref_reaches_is_fetched_by_name() {
    let home = Home::new();
    let repo = repo(home.path());
    // The server is held to the test's end.
    let Served {
        server: _server,
        repo: served_repo,
        url,
        config,
        spec,
    } = served(&home, &repo).await;
    // A commit on main that no ref names.
    let tree = git(&served_repo, &["rev-parse", "main^{tree}"]);
    let unnamed = git(
        &served_repo,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit-tree",
            tree.trim(),
            "-p",
            "main",
            "-m",
            "on no ref",
        ],
    )
    .trim()
    .to_string();
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("base_ref = \"main\"", &format!("base_ref = \"{unnamed}\""));
    std::fs::write(&spec, text).unwrap();
    let mirrors = home.jobs().join(".mirrors");
    let run = |layout: &'static str| {
        let (home, config, spec, mirrors) = (&home, &config, &spec, &mirrors);
        async move {
            // Made afresh from the URL: only its refs' commits.
            if mirrors.exists() {
                std::fs::remove_dir_all(mirrors).unwrap();
            }
            let mut env = vec![("GIT_CONFIG_GLOBAL", config.as_str())];
            if layout != "default" {
                env.push(("PADDOCK_WORKSPACE_LAYOUT", layout));
            }
            home.paddock(&["run", "--json", spec.to_str().unwrap()], &env)
                .await
        }
    };

    let refused = run("clone").await;
    let rec = record(&refused);
    let prefix = format!(
        "repository {url}: the base commit {unnamed} is in no ref it advertises, and asked for by \
         name it was not given (the server may refuse a commit no ref reaches: \
         `uploadpack.allowAnySHA1InWant`, `allowReachableSHA1InWant`): "
    );
    let reason = rec.reason.clone().unwrap_or_default();
    assert_eq!(
        (
            refused.status.code(),
            rec.status,
            reason
                .strip_prefix(&prefix)
                .is_some_and(|git| !git.is_empty()),
            home.leftover_workspaces(),
        ),
        (
            Some(2),
            paddock_protocol::JobStatus::Failed,
            true,
            Vec::<String>::new()
        ),
        "{reason}"
    );

    git(
        &served_repo,
        &["config", "uploadpack.allowAnySHA1InWant", "true"],
    );
    let mut ran = Vec::new();
    let mut expected = Vec::new();
    for layout in ["default", "clone"] {
        let out = run(layout).await;
        let rec = record(&out);
        let bundle = home
            .data()
            .join("artifacts")
            .join(&rec.id)
            .join("branch.bundle");
        let mirror = std::fs::read_dir(&mirrors)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.is_dir())
            .unwrap();
        ran.push((
            layout,
            rec.status,
            header(&bundle)[1].split(' ').next().map(str::to_string),
            git(&mirror, &["cat-file", "-t", &unnamed])
                .trim()
                .to_string(),
            git(&mirror, &["for-each-ref", "--contains", &unnamed]),
        ));
        expected.push((
            layout,
            paddock_protocol::JobStatus::Done,
            Some(format!("-{unnamed}")),
            "commit".to_string(),
            String::new(),
        ));
    }
    assert_eq!(ran, expected);
}

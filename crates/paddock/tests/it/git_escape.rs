//! The job's git metadata is hostile input to the host (issue #12, items 2
//! and 3). A stand-in engine plants an attack in its checkout (a new `.git`
//! whose config starts a program, a gitfile or `commondir` to a git
//! directory it wrote, a linked worktree, attribute drivers, `include.path`,
//! a hooks path, a nested repository pointing outside, links to host files)
//! and makes an ordinary change; on both rungs the program never runs on
//! the host when Paddock concludes, nothing outside the work tree is read
//! into the patch, and the patch is exactly the change. Each probe's
//! positive twin runs the conclude step the way it was done before (git
//! discovering the repository in the checkout, `read-tree` + `add --all` +
//! `diff --cached` under a private index) on the same checkout, and the
//! attack fires. Item 3: rewriting every object file of the job's
//! repository leaves the source repository byte-identical; the twin is a
//! plain local clone (hard links), where the same rewrite reaches the
//! source. Everything runs as root and again as a throwaway unprivileged
//! user (`setpriv`, uid 64124).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use paddock_test_support::prelude::*;

/// What shows that an attack worked.
#[derive(Clone, Copy, Debug)]
enum Fired {
    /// The marker file exists (a planted program ran).
    Marker,
    /// The old patch holds the HEAD commit of the repository outside.
    OutsideCommit,
    /// Reading the path as the old conclude step did (following links)
    /// yields the host secret.
    FollowedLink(&'static str),
}

struct Variant {
    name: &'static str,
    /// Shell run by the stand-in engine in the checkout; `$M` is the
    /// marker, `$OUTSIDE` a repository outside the work tree, `$SECRET` a
    /// host file.
    plant: &'static str,
    /// Files the plant itself adds to the patch, besides the common change.
    extra: &'static [&'static str],
    fired: Fired,
}

fn variants() -> Vec<Variant> {
    vec![
        Variant {
            name: "renamed .git, new .git with core.fsmonitor",
            plant: "mv .git junk/orig && cp -r junk/orig .git && git config core.fsmonitor \"touch $M; true\"",
            extra: &[],
            fired: Fired::Marker,
        },
        Variant {
            name: "new .git with core.hooksPath (post-index-change)",
            plant: "mv .git junk/orig && cp -r junk/orig .git && mkdir junk/hooks && \
                    printf '#!/bin/sh\\ntouch %s\\n' \"$M\" > junk/hooks/post-index-change && \
                    chmod +x junk/hooks/post-index-change && git config core.hooksPath \"$PWD/junk/hooks\"",
            extra: &[],
            fired: Fired::Marker,
        },
        Variant {
            name: ".gitattributes clean filter defined in the job's config",
            plant: "mv .git junk/orig && cp -r junk/orig .git && echo '*.txt filter=evil' > .gitattributes && \
                    git config filter.evil.clean \"sh -c 'touch $M; cat'\"",
            extra: &[".gitattributes"],
            fired: Fired::Marker,
        },
        Variant {
            name: ".gitattributes textconv driver",
            plant: "mv .git junk/orig && cp -r junk/orig .git && echo '*.md diff=evil' > .gitattributes && \
                    git config diff.evil.textconv \"sh -c 'touch $M; cat \\\"\\$1\\\"' -\"",
            extra: &[".gitattributes"],
            fired: Fired::Marker,
        },
        Variant {
            name: "include.path to a config the job wrote",
            plant: "mv .git junk/orig && cp -r junk/orig .git && \
                    printf '[core]\\n\\tfsmonitor = touch %s; true\\n' \"$M\" > junk/inc && \
                    git config include.path \"$PWD/junk/inc\"",
            extra: &[],
            fired: Fired::Marker,
        },
        Variant {
            name: "gitfile to a git directory the job wrote",
            plant: "mv .git junk/orig && cp -r junk/orig junk/evil && \
                    git --git-dir=junk/evil config core.fsmonitor \"touch $M; true\" && \
                    echo \"gitdir: $PWD/junk/evil\" > .git",
            extra: &[],
            fired: Fired::Marker,
        },
        Variant {
            name: ".git/commondir to a git directory the job wrote",
            plant: "cp -r .git junk/evil && git --git-dir=junk/evil config core.fsmonitor \"touch $M; true\" && \
                    echo \"$PWD/junk/evil\" > .git/commondir",
            extra: &[],
            fired: Fired::Marker,
        },
        Variant {
            name: "the checkout made a linked worktree of a repository the job wrote",
            plant: "mv .git junk/orig && cp -r junk/orig junk/main && \
                    git --git-dir=junk/main worktree add -q --detach junk/wt HEAD && cp junk/wt/.git .git && \
                    git --git-dir=junk/main config core.fsmonitor \"touch $M; true\"",
            extra: &[],
            fired: Fired::Marker,
        },
        Variant {
            name: "nested repository whose gitfile points outside the work tree",
            plant: "mkdir nest && echo nested > nest/f && echo \"gitdir: $OUTSIDE/.git\" > nest/.git",
            extra: &["nest/f"],
            fired: Fired::OutsideCommit,
        },
        Variant {
            name: "links to host files",
            plant: "ln -s \"$SECRET\" leak.txt && ln -s / rootlink",
            extra: &["leak.txt", "rootlink"],
            fired: Fired::FollowedLink("leak.txt"),
        },
        Variant {
            name: "the extended AGENTS.md replaced by a link to a host file",
            plant: "rm AGENTS.md && ln -s \"$SECRET\" AGENTS.md",
            extra: &["AGENTS.md"],
            fired: Fired::FollowedLink("AGENTS.md"),
        },
    ]
}

/// The host secret: it carries Paddock's section markers, so that the old
/// conclude step, reading AGENTS.md through the link, kept its text.
const SECRET: &str = "host-secret-text\n<!-- paddock:begin: x -->\n<!-- paddock:end -->\n";

/// The ordinary change every job makes, and the junk directory's ignore.
const CHANGE: &str = "echo change >> README.md && echo new > added.txt && mkdir -p junk && echo '*' > junk/.gitignore";

const UNPRIVILEGED_UID: u32 = 64_124;

struct Setup {
    uid: u32,
    home: Home,
    repo: PathBuf,
    outside: PathBuf,
    secret: PathBuf,
    marker: PathBuf,
}

fn setup(uid: u32) -> Setup {
    let home = Home::new();
    let repo = repo(home.path());
    commit_file(&repo, "AGENTS.md", "# Rules\n", "agents");
    let outside = home.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    git(&outside, &["init", "-q", "-b", "main"]);
    git(
        &outside,
        &["commit", "-q", "--allow-empty", "-m", "outside"],
    );
    let secret = home.path().join("secret.txt");
    std::fs::write(&secret, SECRET).unwrap();
    let marker = home.path().join("marker");
    if uid != nix::unistd::geteuid().as_raw() {
        let ok = std::process::Command::new("chown")
            .args(["-R", &format!("{uid}:{uid}")])
            .arg(home.path())
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }
    Setup {
        uid,
        home,
        repo,
        outside,
        secret,
        marker,
    }
}

/// Runs a job whose stand-in `codex` runs `script` in its checkout, kept,
/// with `env` for Paddock (a workspace layout); the job's record.
async fn run_job_env(
    s: &Setup,
    script: &str,
    sandbox: bool,
    env: &[(&str, &str)],
) -> paddock_protocol::JobRecord {
    let bin = s.home.path().join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let codex = bin.join("codex");
    paddock_test_support::script::write_script(&codex, &format!(
            "#!/bin/sh\n[ \"$1\" = --version ] && {{ echo 'codex-cli {}'; exit 0; }}\nM='{}'\nOUTSIDE='{}'\nSECRET='{}'\n( set -e; {script} ) > \"$HOME/plant.log\" 2>&1\necho \"plant exit $?\" >> \"$HOME/plant.log\"\n",
            paddock::engines::codex::PIN.version,
            s.marker.display(),
            s.outside.display(),
            s.secret.display(),
        ));
    let spec = job(
        s.home.path(),
        "codex",
        &s.repo,
        SCRIPTED,
        Some("[[turn]]\ntext = \"hi\"\n"),
    );
    use_engine_binary(&spec, &codex);
    on_rung(&spec, if sandbox { "sandbox" } else { "process" });
    let out = if s.uid == nix::unistd::geteuid().as_raw() {
        s.home
            .paddock(&["run", "--json", "--keep", spec.to_str().unwrap()], env)
            .await
    } else {
        let home = &s.home;
        let mut cmd = tokio::process::Command::new("setpriv");
        cmd.arg(format!("--reuid={}", s.uid))
            .arg(format!("--regid={}", s.uid))
            .args(["--clear-groups", "--", env!("CARGO_BIN_EXE_paddock")])
            .arg("--data-dir")
            .arg(home.data())
            .arg("--jobs-dir")
            .arg(home.jobs())
            .args(["run", "--json", "--keep", spec.to_str().unwrap()])
            .env("HOME", home.path())
            .envs(env.iter().copied())
            .env_remove("PADDOCK_DB")
            .stdin(std::process::Stdio::null());
        cmd.output().await.unwrap()
    };
    record(&out)
}

/// `program` run as the setup's user (as it is, when that is the current
/// user: an unprivileged one cannot `setpriv`).
fn as_user(s: &Setup, program: &str) -> std::process::Command {
    if s.uid == nix::unistd::geteuid().as_raw() {
        return std::process::Command::new(program);
    }
    let mut c = std::process::Command::new("setpriv");
    c.arg(format!("--reuid={}", s.uid))
        .arg(format!("--regid={}", s.uid))
        .args(["--clear-groups", "--", program])
        .env("HOME", s.home.path());
    c
}

/// git run by the test (root) on the setup's repositories, whoever owns them.
fn git_any(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["-c", "safe.directory=*"];
    all.extend_from_slice(args);
    git(dir, &all)
}

fn old_git(s: &Setup, work: &Path, index: &Path, args: &[&str]) -> std::process::Output {
    as_user(s, "git")
        .arg("-C")
        .arg(work)
        .args(args)
        .env("GIT_INDEX_FILE", index)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .unwrap()
}

/// The conclude step as it was: git discovers the repository in the
/// checkout and obeys it. Returns the diff it produced.
fn old_conclude(s: &Setup, work: &Path, base: &str) -> String {
    let index = work.parent().unwrap().join("old.index");
    let _ = old_git(s, work, &index, &["read-tree", base]);
    let _ = old_git(s, work, &index, &["add", "--all", "--", "."]);
    let out = old_git(
        s,
        work,
        &index,
        &[
            "diff",
            "--cached",
            "--binary",
            "--no-color",
            "--no-ext-diff",
            base,
        ],
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn fired(s: &Setup, v: &Variant, work: &Path, old_diff: &str) -> bool {
    match v.fired {
        Fired::Marker => s.marker.exists(),
        Fired::OutsideCommit => {
            let head = git_any(&s.outside, &["rev-parse", "HEAD"]);
            old_diff.contains(&format!("+Subproject commit {}", head.trim()))
        }
        Fired::FollowedLink(rel) => {
            std::fs::read_to_string(work.join(rel)).is_ok_and(|t| t.contains("host-secret-text"))
        }
    }
}

/// One variant on one rung: (the marker or leak after Paddock concluded,
/// the changed files, the patch is right, the twin fired).
async fn attack(
    s: &Setup,
    v: &Variant,
    sandbox: bool,
    env: &[(&str, &str)],
) -> (bool, Vec<String>, bool, bool) {
    let _ = std::fs::remove_file(&s.marker);
    let rec = run_job_env(s, &format!("{CHANGE} && {}", v.plant), sandbox, env).await;
    let job_dir = s.home.jobs().join(&rec.id);
    let log = std::fs::read_to_string(job_dir.join("home/plant.log")).unwrap_or_default();
    assert!(
        log.ends_with("plant exit 0\n"),
        "{}: the plant failed: {log}",
        v.name
    );
    let patch = std::fs::read_to_string(rec.patch_path.as_ref().unwrap()).unwrap();
    let leaked = s.marker.exists()
        || patch.contains("host-secret-text")
        || patch.contains("Subproject commit");
    let right = patch.contains("+change\n")
        && patch.contains("+++ b/added.txt\n")
        && v.extra
            .iter()
            .all(|f| patch.contains(&format!("+++ b/{f}\n")))
        && (!v.extra.contains(&"leak.txt")
            || patch.contains(&format!(
                "new file mode 120000\nindex 0000000..{}",
                link_blob(&s.secret)
            )));
    let base = git_any(&s.repo, &["rev-parse", "main"]);
    let work = job_dir.join("work");
    let old_diff = old_conclude(s, &work, base.trim());
    let twin = fired(s, v, &work, &old_diff);
    std::fs::remove_dir_all(&job_dir).unwrap();
    (leaked, rec.changed_files, right, twin)
}

/// The abbreviated blob id of a link to `target`.
fn link_blob(target: &Path) -> String {
    let mut child = std::process::Command::new("git")
        .args(["hash-object", "--stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(target.display().to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout)[..7].to_string()
}

/// Every variant on one rung, as `uid`, with `env` for Paddock (a
/// workspace layout).
async fn no_git_attack_fires_on_the_host(sandbox: bool, uid: u32, env: &[(&str, &str)]) {
    let s = setup(uid);
    let mut got = Vec::new();
    let mut want = Vec::new();
    for v in variants() {
        let (leaked, changed, right, twin) = attack(&s, &v, sandbox, env).await;
        let mut expected: Vec<String> = ["README.md", "added.txt"]
            .iter()
            .chain(v.extra)
            .map(|f| f.to_string())
            .collect();
        expected.sort();
        got.push((v.name, leaked, changed, right, twin));
        want.push((v.name, false, expected, true, true));
    }
    assert_eq!(got, want, "uid {uid}");
}

/// The ids to run as: the current user, and the unprivileged one too when
/// that is root.
fn users() -> Vec<u32> {
    if nix::unistd::geteuid().is_root() {
        vec![0, UNPRIVILEGED_UID]
    } else {
        eprintln!("running as the current (unprivileged) user only");
        vec![nix::unistd::geteuid().as_raw()]
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn no_git_attack_fires_on_the_host_process_rung() {
    for uid in users() {
        // The default layout: the overlay as root, the clone unprivileged.
        no_git_attack_fires_on_the_host(false, uid, &[]).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn no_git_attack_fires_on_the_host_sandbox_rung() {
    if !paddock_test_support::prelude::sandbox_available() {
        return;
    }
    for uid in users() {
        // The clone: on the sandbox rung the job's `.git/config` and
        // `.git/hooks` are read-only mounts, and an overlay renames no
        // directory of its base (`EXDEV`), so `mv .git` falls back to a
        // copy and delete that the mounts refuse: the variants' plants
        // cannot happen on an overlay here (the overlay's own probe is
        // `rewriting_the_jobs_objects_through_an_overlay_...`).
        no_git_attack_fires_on_the_host(true, uid, &[("PADDOCK_WORKSPACE_LAYOUT", "clone")]).await;
    }
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.insert(e.path(), std::fs::read(e.path()).unwrap());
            }
        }
    }
    out
}

/// Makes every object file under `git_dir` writable and overwrites it.
const REWRITE: &str = "find \"$G/objects\" -type f | while read -r f; do chmod u+w \"$f\"; printf rewritten > \"$f\"; done";

async fn source_objects_survive(sandbox: bool, packed: bool, uid: u32) -> (bool, bool) {
    source_objects_survive_as(sandbox, packed, uid, &[]).await
}

/// [`source_objects_survive`] with `env` for Paddock.
async fn source_objects_survive_as(
    sandbox: bool,
    packed: bool,
    uid: u32,
    env: &[(&str, &str)],
) -> (bool, bool) {
    let s = setup(uid);
    if packed {
        let ok = as_user(&s, "git")
            .arg("-C")
            .arg(&s.repo)
            .args(["gc", "-q"])
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }
    let objects = s.repo.join(".git/objects");
    let before = snapshot(&objects);
    let rec = run_job_env(&s, &format!("G=.git; {REWRITE}"), sandbox, env).await;
    let job_dir = s.home.jobs().join(&rec.id);
    let log = std::fs::read_to_string(job_dir.join("home/plant.log")).unwrap();
    assert!(log.ends_with("plant exit 0\n"), "the rewrite failed: {log}");
    let rewritten = snapshot(&job_dir.join("work/.git/objects"))
        .values()
        .all(|b| b == b"rewritten");
    // A kept overlay workspace is a plain directory by the job's end.
    assert!(!paddock::workspace::overlay::is_mounted(
        &job_dir.join("work")
    ));
    std::fs::remove_dir_all(&job_dir).unwrap();
    // The base's snapshot an overlay workspace sits on kept its objects.
    let snapshots = s.home.jobs().join(".snapshots");
    // As root, unless the clone was asked for, the job ran on an overlay.
    let clone_asked = env.contains(&("PADDOCK_WORKSPACE_LAYOUT", "clone"));
    assert_eq!(
        snapshots.exists(),
        uid == 0 && !clone_asked,
        "{snapshots:?}"
    );
    let snapshot_kept = !snapshots.exists()
        || snapshot(&snapshots).iter().all(|(path, bytes)| {
            !path.to_string_lossy().contains("/objects/") || bytes != b"rewritten"
        });
    let kept = snapshot(&objects) == before && snapshot_kept;
    // Twin: a plain local clone shares the object files.
    let twin = s.home.path().join("twin");
    let out = as_user(&s, "git")
        .args(["clone", "-q", "--no-checkout"])
        .arg(&s.repo)
        .arg(&twin)
        .output()
        .unwrap();
    assert!(out.status.success());
    let ok = as_user(&s, "sh")
        .args(["-c", REWRITE])
        .env("G", twin.join(".git"))
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let twin_reached = snapshot(&objects) != before;
    assert!(rewritten, "the job could not rewrite its own objects");
    (kept, twin_reached)
}

#[tokio::test(flavor = "multi_thread")]
async fn rewriting_the_jobs_objects_leaves_the_source_intact_process_rung() {
    for uid in users() {
        assert_eq!(
            (
                source_objects_survive(false, false, uid).await,
                source_objects_survive(false, true, uid).await
            ),
            ((true, true), (true, true)),
            "uid {uid}"
        );
    }
}

/// The same through an overlay workspace (`PADDOCK_WORKSPACE_LAYOUT`
/// forcing it, as root): the job's writes land in its upper layer,
/// neither in the source nor in the snapshot. Unprivileged, where it
/// cannot be mounted, the job fails saying so: never a silent clone.
#[tokio::test(flavor = "multi_thread")]
async fn rewriting_the_jobs_objects_through_an_overlay_leaves_source_and_snapshot_intact() {
    let env = [("PADDOCK_WORKSPACE_LAYOUT", "overlay")];
    let sandbox = sandbox_available();
    for uid in users() {
        if uid != 0 {
            let s = setup(uid);
            let rec = run_job_env(&s, "true", false, &env).await;
            let reason = rec.reason.clone().unwrap_or_default();
            assert_eq!(
                (
                    rec.status,
                    reason.ends_with(
                        "PADDOCK_WORKSPACE_LAYOUT=overlay, but this process cannot mount (no CAP_SYS_ADMIN)"
                    ),
                    s.home.leftover_workspaces(),
                ),
                (paddock_protocol::JobStatus::Failed, true, Vec::<String>::new()),
                "{reason}"
            );
            continue;
        }
        assert_eq!(
            (
                source_objects_survive_as(false, true, uid, &env).await,
                source_objects_survive_as(sandbox, false, uid, &env).await
            ),
            ((true, true), (true, true)),
            "uid {uid}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn rewriting_the_jobs_objects_leaves_the_source_intact_sandbox_rung() {
    if !paddock_test_support::prelude::sandbox_available() {
        return;
    }
    for uid in users() {
        assert_eq!(
            (
                source_objects_survive(true, false, uid).await,
                source_objects_survive(true, true, uid).await
            ),
            ((true, true), (true, true)),
            "uid {uid}"
        );
    }
}

//! Local sources as users have them (issue #14's results loop): the job's
//! branch comes back into each, or the job is refused saying why; no hook
//! of the source runs when it does.

use std::path::{Path, PathBuf};

use paddock_test_support::prelude::*;

/// A job in its own directory `dir` under `home` on `source` (its
/// `base_ref = "main"` line replaced by `base`, when given), writing
/// `fix.txt`: its exit code and record.
async fn run_on(
    home: &Home,
    dir: &str,
    source: &Path,
    base: Option<&str>,
) -> (Option<i32>, paddock_protocol::JobRecord) {
    let d = home.path().join(dir);
    std::fs::create_dir_all(&d).unwrap();
    let spec = stand_in_spec(
        &d,
        source,
        "process",
        &finishing("printf 'fixed\\n' > fix.txt"),
    );
    if let Some(base) = base {
        let text = std::fs::read_to_string(&spec).unwrap();
        std::fs::write(&spec, text.replace("base_ref = \"main\"\n", base)).unwrap();
    }
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    (out.status.code(), record(&out))
}

/// `git show REV` in `source`: its text, or git's error.
fn show(source: &Path, rev: &str) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(source)
        .args(["show", rev])
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// An empty repository (`git init`, its branch unborn) as the source, on
/// the default `main` and on `HEAD`: refused at provisioning (exit 2)
/// saying it has no commit yet. Before: "base ref `main` is not a commit
/// in it", as if the name were wrong.
#[tokio::test(flavor = "multi_thread")]
async fn an_empty_source_is_refused_saying_it_has_no_commit() {
    let home = Home::new();
    let empty = home.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    git(&empty, &["init", "-q", "-b", "main"]);
    let mut seen = Vec::new();
    for (dir, base) in [("main", None), ("head", Some("base_ref = \"HEAD\"\n"))] {
        let (code, r) = run_on(&home, dir, &empty, base).await;
        seen.push((code, r.status, r.reason, r.engine_exit_code));
    }
    let refused = |base: &str| {
        (
            Some(2),
            paddock_protocol::JobStatus::Failed,
            Some(format!(
                "repository {}: it has no commit yet (an empty repository: its branch is unborn), \
                 so base ref `{base}` names nothing; the job runs on a committed base: commit one \
                 first",
                empty.display()
            )),
            None,
        )
    };
    assert_eq!(seen, vec![refused("main"), refused("HEAD")]);
}

/// A source whose hooks would run on a ref's update (`reference-transaction`,
/// in `.git/hooks` or under a `core.hooksPath`): the job's branch comes back
/// and no hook runs. Before, the fetch ran the hook (twice: prepared and
/// committed) with the job's branch as its input.
#[tokio::test(flavor = "multi_thread")]
async fn no_hook_of_the_source_runs_when_the_branch_comes_back() {
    let home = Home::new();
    let base = repo(home.path());
    let marker = home.path().join("hooks-ran");
    let hook = |dir: &Path| {
        std::fs::create_dir_all(dir).unwrap();
        for name in [
            "reference-transaction",
            "post-checkout",
            "post-index-change",
        ] {
            let path = dir.join(name);
            paddock_test_support::script::write_script(
                &path,
                &format!("#!/bin/sh\necho {name} >> {}\n", marker.display()),
            );
        }
    };
    let in_git_dir = home.path().join("in-git-dir");
    git(
        home.path(),
        &[
            "clone",
            "-q",
            base.to_str().unwrap(),
            in_git_dir.to_str().unwrap(),
        ],
    );
    hook(&in_git_dir.join(".git/hooks"));
    let hooks_path = home.path().join("hooks-path");
    git(
        home.path(),
        &[
            "clone",
            "-q",
            base.to_str().unwrap(),
            hooks_path.to_str().unwrap(),
        ],
    );
    hook(&home.path().join("hooks"));
    git(
        &hooks_path,
        &[
            "config",
            "core.hooksPath",
            home.path().join("hooks").to_str().unwrap(),
        ],
    );
    let mut seen = Vec::new();
    for (dir, source) in [("a", &in_git_dir), ("b", &hooks_path)] {
        let (code, r) = run_on(&home, dir, source, None).await;
        seen.push((
            code,
            r.status,
            show(source, &format!("{}:fix.txt", r.branch)),
        ));
    }
    assert_eq!(
        (seen, std::fs::read_to_string(&marker).ok()),
        (
            vec![
                (
                    Some(0),
                    paddock_protocol::JobStatus::Done,
                    "fixed\n".to_string()
                );
                2
            ],
            None
        )
    );
}

/// A directory inside a repository's work tree as the source (`path =
/// "../mono/services/api"`), in either layout: refused before the job
/// exists (exit 2, no job recorded) naming the repository's top level to
/// set instead, the source left without a branch. Before: "git clone
/// failed: fatal: repository '…/api' does not exist", of a directory that
/// does; then a job made and failed at provisioning with the top level.
#[tokio::test(flavor = "multi_thread")]
async fn a_directory_inside_a_repository_is_refused_naming_its_top_level() {
    let home = Home::new();
    let top = repo(home.path());
    let inside = top.join("services").join("api");
    std::fs::create_dir_all(&inside).unwrap();
    std::fs::write(inside.join("main.py"), "print(1)\n").unwrap();
    git(&top, &["add", "."]);
    git(&top, &["commit", "-q", "-m", "api"]);
    let mut seen = Vec::new();
    for layout in ["overlay", "clone"] {
        let d = home.path().join(layout);
        std::fs::create_dir_all(&d).unwrap();
        let spec = stand_in_spec(&d, &inside, "process", &finishing("true"));
        let out = home
            .paddock(
                &["run", "--json", spec.to_str().unwrap()],
                &[("PADDOCK_WORKSPACE_LAYOUT", layout)],
            )
            .await;
        seen.push((
            layout,
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ));
    }
    let refused = |layout| {
        (
            layout,
            Some(2),
            String::new(),
            format!(
                "paddock: repository.path {}: it is the directory `services/api/` inside the git \
                 repository {t}, not a repository's top level: set repository.path to {t} (a job \
                 works on the whole repository)\n",
                inside.display(),
                t = top.display()
            ),
        )
    };
    assert_eq!(
        (
            seen,
            git(&top, &["branch", "--list", "paddock/*"]),
            home.store().await.jobs(10).await.unwrap()
        ),
        (
            vec![refused("overlay"), refused("clone")],
            String::new(),
            vec![]
        )
    );
}

/// The branch comes back into sources as users have them: a shallow
/// clone, a sparse checkout (its sparse patterns and work tree left as
/// they were), a linked worktree (on its own branch, and on `HEAD`, which
/// names it there), a bare repository, a repository with a submodule, and
/// one with an LFS pointer and the user's `filter.lfs.*` configured (the
/// pointer comes back as it was).
#[tokio::test(flavor = "multi_thread")]
async fn the_branch_comes_back_into_sources_as_users_have_them() {
    let home = Home::new();
    let root = home.path().join("sources");
    std::fs::create_dir_all(&root).unwrap();
    let base = repo(&root);
    git(&base, &["commit", "-q", "--allow-empty", "-m", "two"]);
    let clone = |name: &str, extra: &[&str]| -> PathBuf {
        let to = root.join(name);
        let mut args = vec!["clone", "-q"];
        args.extend_from_slice(extra);
        let from = format!("file://{}", base.display());
        args.extend([from.as_str(), to.to_str().unwrap()]);
        git(&root, &args);
        to
    };
    let shallow = clone("shallow", &["--depth", "1"]);
    let sparse = clone("sparse", &[]);
    git(
        &sparse,
        &["sparse-checkout", "set", "--no-cone", "/nothing"],
    );
    let linked = root.join("linked");
    git(
        &base,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "feature",
            linked.to_str().unwrap(),
        ],
    );
    let bare = clone("bare.git", &["--bare"]);
    let with_sub = clone("with-sub", &[]);
    git(
        &with_sub,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            base.to_str().unwrap(),
            "vendor/lib",
        ],
    );
    git(&with_sub, &["commit", "-q", "-m", "submodule"]);
    let lfs = clone("lfs", &[]);
    let pointer = "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n";
    std::fs::write(
        lfs.join(".gitattributes"),
        "*.bin filter=lfs diff=lfs merge=lfs -text\n",
    )
    .unwrap();
    std::fs::write(lfs.join("big.bin"), pointer).unwrap();
    git(&lfs, &["add", "."]);
    git(&lfs, &["commit", "-q", "-m", "lfs"]);
    let marker = root.join("filter-ran");
    for (key, what) in [("smudge", "smudge"), ("clean", "clean")] {
        git(
            &lfs,
            &[
                "config",
                &format!("filter.lfs.{key}"),
                &format!("sh -c 'echo {what} >> {}; cat'", marker.display()),
            ],
        );
    }
    let mut seen = Vec::new();
    for (dir, source, base) in [
        ("shallow", &shallow, None),
        ("sparse", &sparse, None),
        ("linked", &linked, Some("base_ref = \"feature\"\n")),
        ("linked-head", &linked, Some("base_ref = \"HEAD\"\n")),
        ("bare", &bare, None),
        ("with-sub", &with_sub, None),
        ("lfs", &lfs, None),
    ] {
        let (code, r) = run_on(&home, dir, source, base).await;
        seen.push((
            dir,
            code,
            r.status,
            r.changed_files,
            show(source, &format!("{}:fix.txt", r.branch)),
        ));
    }
    let done = |dir| {
        (
            dir,
            Some(0),
            paddock_protocol::JobStatus::Done,
            vec!["fix.txt".to_string()],
            "fixed\n".to_string(),
        )
    };
    assert_eq!(
        (
            seen,
            git(&sparse, &["sparse-checkout", "list"]),
            std::fs::read_dir(&sparse)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect::<Vec<_>>(),
            show(&lfs, "paddock/T-1/1:big.bin"),
        ),
        (
            vec![
                done("shallow"),
                done("sparse"),
                done("linked"),
                done("linked-head"),
                done("bare"),
                done("with-sub"),
                done("lfs"),
            ],
            "/nothing\n".to_string(),
            vec![".git".to_string()],
            pointer.to_string(),
        )
    );
}

/// A source whose path has a space and letters outside ASCII (`My
/// Repos/grüße`): a rerun of the same ticket and attempt finds its branch
/// taken, and the command its warning gives to take the job's branch
/// under another name, pasted into a shell, takes it. Before, its paths
/// were left unquoted and the shell split the source's path in two.
#[tokio::test(flavor = "multi_thread")]
async fn the_command_a_rerun_is_told_takes_its_branch_from_a_path_with_a_space() {
    let home = Home::new();
    let dir = home.path().join("My Repos").join("grüße");
    std::fs::create_dir_all(&dir).unwrap();
    let source = repo(&dir);
    let mut codes = Vec::new();
    let mut stderr = String::new();
    for (run, text) in [("first", "one"), ("second", "two")] {
        let d = home.path().join(run);
        std::fs::create_dir_all(&d).unwrap();
        let work = finishing(&format!("printf '{text}\\n' > fix.txt"));
        let spec = stand_in_spec(&d, &source, "process", &work);
        let out = home
            .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
            .await;
        codes.push(out.status.code());
        stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    }
    let told = stderr
        .split("to take this job's under another name: `")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("no command in: {stderr}"))
        .replace(":NAME", ":taken");
    let taken = std::process::Command::new("sh")
        .arg("-c")
        .arg(&told)
        .output()
        .unwrap();
    assert_eq!(
        (
            codes,
            taken.status.code(),
            show(&source, "taken:fix.txt"),
            show(&source, "paddock/T-1/1:fix.txt"),
        ),
        (
            vec![Some(0), Some(0)],
            Some(0),
            "two\n".to_string(),
            "one\n".to_string(),
        ),
        "{told}: {}",
        String::from_utf8_lossy(&taken.stderr)
    );
}

/// A ticket id names a git branch (`paddock/<ticket>/<attempt>`): every
/// odd id a spec takes makes a branch git takes (`git check-ref-format`),
/// and the ids git would refuse (or that a shell or a forge would read
/// otherwise) are refused by the spec, before anything runs.
#[test]
fn every_ticket_id_a_spec_takes_is_a_branch_git_takes() {
    let home = Home::new();
    let base = repo(home.path());
    let spec = stand_in_spec(home.path(), &base, "process", "true");
    let text = std::fs::read_to_string(&spec).unwrap();
    let ids = [
        "T-1", "T-1.", "a.b", "_x", "x_", "1", "x.lock1", "A..B", "x.lock", ".x", "-x", "x/y",
        "x y", "x~1", "x^", "x:y", "x?", "x*", "x[", "x\\\\y", "x@{1}", "@", "é", "HEAD",
    ];
    let verdicts: Vec<(&str, bool, bool)> = ids
        .iter()
        .map(|&id| {
            let taken = paddock_protocol::JobSpec::from_toml(
                &text.replace("id = \"T-1\"", &format!("id = \"{id}\"")),
                &spec,
            )
            .is_ok();
            // The id as TOML reads it (`\\` is one backslash).
            let branch = format!("refs/heads/paddock/{}/1", id.replace("\\\\", "\\"));
            let git_takes = std::process::Command::new("git")
                .args(["check-ref-format", &branch])
                .status()
                .unwrap()
                .success();
            (id, taken, git_takes)
        })
        .collect();
    let taken: Vec<&str> = verdicts.iter().filter(|v| v.1).map(|v| v.0).collect();
    assert_eq!(
        (
            taken,
            verdicts
                .iter()
                .filter(|v| v.1 && !v.2)
                .map(|v| v.0)
                .collect::<Vec<_>>()
        ),
        (
            vec!["T-1", "T-1.", "a.b", "_x", "x_", "1", "x.lock1", "HEAD"],
            Vec::<&str>::new()
        )
    );
}

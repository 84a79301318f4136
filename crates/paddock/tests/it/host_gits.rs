//! The git processes Paddock starts on the host for one job (issue #14,
//! per-job overhead: each is a process start on the job's path), counted
//! by a `git` first on `PATH` that logs its subcommand and runs the real
//! one: a job on a local source with a change, on an overlay workspace
//! whose snapshot an earlier job made.

use std::path::{Path, PathBuf};

use paddock_test_support::prelude::*;

/// The real git: the first on this process's `PATH`.
fn real_git() -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("git"))
        .find(|g| g.is_file())
        .unwrap()
}

/// This process's `PATH` with `bin` first.
fn first_on_path(bin: &Path) -> String {
    let mut path = std::ffi::OsString::from(bin);
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap());
    path.to_str().unwrap().to_string()
}

/// A commit adding `more.txt` to `repo`.
fn commit_more(repo: &Path) {
    commit_file(repo, "more.txt", "more\n", "more");
}

/// A directory with a `git` that appends its subcommand (its first
/// argument that is no option, skipping `-C DIR`, `-c SETTING` and
/// `--git-dir DIR`) to
/// `log`, then runs the real git.
fn logging_git(dir: &Path, log: &Path) -> PathBuf {
    let bin = dir.join("logging-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\nskip=0\nsub=\nfor a in \"$@\"; do\n  if [ $skip = 1 ]; then skip=0; continue; fi\n  case \"$a\" in\n    -C|-c|--git-dir) skip=1 ;;\n    -*) ;;\n    *) [ -z \"$sub\" ] && sub=\"$a\" ;;\n  esac\ndone\necho \"$sub\" >> '{}'\nexec '{}' \"$@\"\n",
        log.display(),
        real_git().display()
    );
    let git = bin.join("git");
    paddock_test_support::script::write_script(&git, &script);
    bin
}

/// On an overlay (as root), a job that changes one file of a local source
/// starts these host gits and no others: `rev-parse` of the base in the
/// source (provisioning: the job's branch is written, not made by
/// `update-ref`), the user's excludes file looked up (`config`), the
/// source's uncommitted changes (`status`, after the source's filter
/// drivers are listed, `config`, so that none runs) and the base's listing
/// (`ls-files`) and the base's tree (`rev-parse`) beside the engine, the
/// patch, sealed beside the engine's exit (`check-ignore` on Paddock's
/// copy of the ignore files, the job's bytes written as blobs by Paddock,
/// no `fast-import` for fewer than 100 files, `update-index`,
/// `write-tree`, `diff-tree`, or `diff` when the engine ended before the
/// base's tree was read), and
/// the result branch: its commit (written by Paddock, no `commit-tree`)
/// and bundle (`pack-objects`, the header written
/// by Paddock: no `update-ref`, no `bundle create`), the base checked in
/// the source (`cat-file`) and the new branch put into it without `git
/// fetch` (`results/source_pack.rs`: the base, tip and branch asked of
/// the source, `cat-file`, its worktrees' `HEAD`s read by Paddock, no
/// `worktree list`, `results/worktree_heads.rs`, then the bundle's pack
/// indexed, `index-pack`, and the branch made, `update-ref`); with
/// nowhere to push, the source's object directory is not asked for.
#[tokio::test(flavor = "multi_thread")]
async fn an_overlay_job_on_a_local_source_starts_only_these_host_gits() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipping: the overlay workspace needs root");
        return;
    }
    let home = Home::new();
    let repo = repo(home.path());
    let log = home.path().join("gits.log");
    let bin = logging_git(home.path(), &log);
    let path = first_on_path(&bin);
    let spec = stand_in_spec(
        home.path(),
        &repo,
        "process",
        &finishing("printf 'fixed\\n' > fix.txt"),
    );
    let env = [
        ("PATH", path.as_str()),
        ("PADDOCK_WORKSPACE_LAYOUT", "overlay"),
    ];
    let args = ["run", "--json", spec.to_str().unwrap()];
    let run = || home.paddock(&args, &env);
    // The first job makes the base's snapshot; its branch goes again, and
    // its commit with it (else the second job's, the same commit when made
    // within the same second, would be one the source has: published by
    // `git fetch`, `results/source_pack.rs`).
    let first = run().await;
    assert_eq!(record(&first).status, paddock_protocol::JobStatus::Done);
    git(&repo, &["branch", "-D", "paddock/T-1/1"]);
    git(&repo, &["reflog", "expire", "--expire=now", "--all"]);
    git(&repo, &["gc", "--quiet", "--prune=now"]);
    std::fs::remove_file(&log).unwrap();
    let second = run().await;
    // The diff is `diff-tree` against the base's tree read beside the
    // engine, or `diff` against the base itself when the engine's turn
    // ended before that read did (a loaded machine): one process either
    // way.
    let mut gits: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|g| {
            if g == "diff" || g == "diff-tree" {
                "diff or diff-tree"
            } else {
                g
            }
        })
        .map(str::to_string)
        .collect();
    gits.sort();
    // The early patch is sealed (its one blob written by Paddock, no
    // `fast-import`) unless it stepped aside (the engine's file still
    // being written when read, its exit before the early patch began: a
    // loaded machine; seen once in CI), when the same staging is made by
    // path after the job (`update-index` reading the file): the same gits
    // either way, and no other.
    assert_eq!(
        (record(&second).status, gits),
        (
            paddock_protocol::JobStatus::Done,
            [
                "cat-file",
                "cat-file",
                "check-ignore",
                "config",
                "config",
                "diff or diff-tree",
                "index-pack",
                "ls-files",
                "pack-objects",
                "rev-parse",
                "rev-parse",
                "status",
                "update-index",
                "update-ref",
                "write-tree",
            ]
            .into_iter()
            .map(str::to_string)
            .collect::<Vec<_>>()
        ),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
}

/// The result branch is made and bundled beside the patch's diff, not
/// after it: its commit (written by Paddock) needs only the staged tree,
/// and the bundle's `pack-objects` only the commit, so it starts while
/// `git diff-tree` runs. Shown by a `git diff-tree` (or `git diff`, the
/// patch's one diff when the engine ended before the base's tree was read
/// beside it: a loaded machine) that waits (up to 20 s) for a
/// `pack-objects` to start before it runs, and says whether
/// one did: one after the other, the bundle starts only once the diff has
/// ended.
#[tokio::test(flavor = "multi_thread")]
async fn the_result_branch_is_committed_and_bundled_while_the_diff_runs() {
    let home = Home::new();
    let repo = repo(home.path());
    let log = home.path().join("gits.log");
    let seen = home.path().join("diff.log");
    let bin = home.path().join("waiting-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\nfor a in \"$@\"; do\n  case \"$a\" in\n    pack-objects) echo pack-objects >> '{log}' ;;\n    diff-tree|diff)\n      i=0\n      while [ $i -lt 400 ] && ! grep -q pack-objects '{log}' 2>/dev/null; do sleep 0.05; i=$((i+1)); done\n      if grep -q pack-objects '{log}' 2>/dev/null; then echo beside >> '{seen}'; else echo after >> '{seen}'; fi ;;\n  esac\ndone\nexec '{git}' \"$@\"\n",
        log = log.display(),
        seen = seen.display(),
        git = real_git().display()
    );
    let git_path = bin.join("git");
    paddock_test_support::script::write_script(&git_path, &script);
    let path = first_on_path(&bin);
    let spec = stand_in_spec(
        home.path(),
        &repo,
        "process",
        &finishing("printf 'fixed\\n' > fix.txt"),
    );
    let args = ["run", "--json", spec.to_str().unwrap()];
    let out = home.paddock(&args, &[("PATH", path.as_str())]).await;
    let rec = record(&out);
    assert_eq!(
        (
            rec.status,
            rec.changed_files,
            std::fs::read_to_string(&seen).unwrap(),
            git(
                &repo,
                &["rev-parse", "--verify", "--quiet", "paddock/T-1/1"]
            )
            .is_empty(),
        ),
        (
            paddock_protocol::JobStatus::Done,
            vec!["fix.txt".to_string()],
            "beside\n".to_string(),
            false,
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The subcommands the logging git wrote to `log` (sorted, `diff` and
/// `diff-tree` as one: see above), the log then removed.
fn logged(log: &Path) -> Vec<String> {
    let mut gits: Vec<String> = std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|g| match g {
            "diff" | "diff-tree" => "diff or diff-tree",
            g => g,
        })
        .map(str::to_string)
        .collect();
    std::fs::remove_file(log).unwrap();
    gits.sort();
    gits
}

/// On an overlay (as root), a job on a URL source whose mirror is as its
/// last passing check saw it takes its base's commit as an earlier job
/// read it there (`mirror_names.rs`): its provisioning starts only the
/// mirror's fetch (after the user's configuration, `config`), not the
/// `rev-parse` of the base the job before it (the first on the unchanged
/// mirror) still ran; the rest is the local job's list above, less what
/// only a local source has (its `status`, its filter drivers' `config`,
/// the branch fetched into it), and less the base's check in the mirror
/// at the job's end (`cat-file -e`): the mirror is still as it was when
/// the base's name resolved there, so it holds the base
/// (`mirror::holds_unchanged`). A commit added to the URL's repository
/// moves the mirror's ref: the next job reads the base with git again
/// (beside the mirror's check) and starts from the new commit, and, no
/// name kept under the mirror's new state yet, asks git whether the
/// mirror holds it at its end (`cat-file -e`), as the first job on the
/// unchanged mirror, which kept the name, does not.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_on_an_unchanged_mirror_reads_no_base_with_git() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipping: the overlay workspace needs root");
        return;
    }
    let home = Home::new();
    let repo = repo(home.path());
    let log = home.path().join("gits.log");
    let bin = logging_git(home.path(), &log);
    let path = first_on_path(&bin);
    // Each job's engine says whether its checkout has the added commit.
    let seen = home.path().join("seen.log");
    let work = format!(
        "printf 'fixed\\n' > fix.txt; if [ -f more.txt ]; then echo moved; else echo base; fi >> '{}'",
        seen.display()
    );
    let spec = stand_in_spec(home.path(), &repo, "process", &finishing(&work));
    super::results::use_url_source(&spec, &repo, &format!("file://{}", repo.display()), None);
    let env = [
        ("PATH", path.as_str()),
        ("PADDOCK_WORKSPACE_LAYOUT", "overlay"),
    ];
    let args = ["run", "--json", spec.to_str().unwrap()];
    let run = || home.paddock(&args, &env);
    // Made (cloned), then fetched and checked: the base read by git.
    for _ in 0..2 {
        let out = run().await;
        assert_eq!(record(&out).status, paddock_protocol::JobStatus::Done);
    }
    std::fs::remove_file(&log).unwrap();
    let first_unchanged = run().await;
    let first_gits = logged(&log);
    let second_unchanged = run().await;
    let second_gits = logged(&log);
    commit_more(&repo);
    let after_commit = run().await;
    let after_gits = logged(&log);
    let mirror_rev_parse = |gits: &[String]| gits.iter().filter(|g| *g == "rev-parse").count();
    let cat_file = |gits: &[String]| gits.iter().filter(|g| *g == "cat-file").count();
    let expected: Vec<String> = [
        "check-ignore",
        "config",
        "config",
        "diff or diff-tree",
        "fetch",
        "ls-files",
        "pack-objects",
        "rev-parse",
        "update-index",
        "write-tree",
    ]
    .map(str::to_string)
    .to_vec();
    assert_eq!(
        (
            second_gits,
            mirror_rev_parse(&first_gits),
            mirror_rev_parse(&after_gits),
            (cat_file(&first_gits), cat_file(&after_gits)),
            [&first_unchanged, &second_unchanged, &after_commit].map(|out| record(out).status),
            std::fs::read_to_string(&seen).unwrap(),
        ),
        (
            expected,
            2,
            2,
            (0, 1),
            [paddock_protocol::JobStatus::Done; 3],
            "base\nbase\nbase\nbase\nmoved\n".to_string()
        ),
        "{}",
        String::from_utf8_lossy(&second_unchanged.stderr)
    );
}

/// A stand-in engine body that does `before`, ends its turn, waits (up to
/// 20 s) for an early patch's staging to be over (`runner/early_patch.rs`:
/// the patch started at the turn's end, after the print of what the job
/// wrote; its branch's bundle is in the job's artifacts and its scratch
/// index, `meta/patch.index`, removed once the tree is written), writes
/// whether it was to `mark`, then does `after` and exits.
fn ending_then(home: &Home, before: &str, after: &str, mark: &Path) -> String {
    format!(
        "{}\ni=0\nstaged() {{ ls '{data}'/artifacts/*/branch.bundle >/dev/null 2>&1 && ! ls '{jobs}'/job-*/meta/patch.index >/dev/null 2>&1; }}\nwhile [ $i -lt 400 ] && ! staged; do sleep 0.05; i=$((i+1)); done\nif [ $i -lt 400 ]; then echo early > '{mark}'; else echo none > '{mark}'; fi\n{after}\n",
        finishing(before),
        data = home.data().display(),
        jobs = home.jobs().display(),
        mark = mark.display(),
    )
}

/// `paddock run --json SPEC` on an overlay workspace, with `path` as the
/// `PATH` Paddock's gits are found on.
async fn run_on_overlay(home: &Home, spec: &Path, path: &str) -> std::process::Output {
    let env = [("PATH", path), ("PADDOCK_WORKSPACE_LAYOUT", "overlay")];
    home.paddock(&["run", "--json", spec.to_str().unwrap()], &env)
        .await
}

/// An early-patch job on an overlay (process rung) whose engine does
/// `before`, ends its turn, waits for the early patch's staging
/// ([`ending_then`]) and does `after`: its record, how many `write-tree`s
/// Paddock's gits ran, whether the engine saw the early staging over, and
/// `paddock`'s stderr.
async fn early_patch_job(
    home: &Home,
    repo: &Path,
    before: &str,
    after: &str,
) -> (paddock_protocol::JobRecord, usize, String, String) {
    let log = home.path().join("gits.log");
    let bin = logging_git(home.path(), &log);
    let path = first_on_path(&bin);
    let mark = home.path().join("early.mark");
    let body = ending_then(home, before, after, &mark);
    let spec = stand_in_spec(home.path(), repo, "process", &body);
    let out = run_on_overlay(home, &spec, &path).await;
    let write_trees = logged(&log).iter().filter(|g| *g == "write-tree").count();
    (
        record(&out),
        write_trees,
        std::fs::read_to_string(&mark).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// On an overlay (as root), the patch is started at the engine's turn's
/// end, beside its exit, and stands when nothing changed after: one
/// staging (one `write-tree`), and the patch is the job's.
#[tokio::test(flavor = "multi_thread")]
async fn the_patch_is_made_beside_the_engines_exit_and_stands() {
    if !paddock_test_support::skip::overlay_available() {
        return;
    }
    let home = Home::new();
    let repo = repo(home.path());
    let (rec, write_trees, mark, stderr) =
        early_patch_job(&home, &repo, "printf 'fixed\\n' > fix.txt", "").await;
    assert_eq!(
        (
            rec.status,
            rec.changed_files,
            mark,
            write_trees,
            git(&repo, &["show", "paddock/T-1/1:fix.txt"]),
        ),
        (
            paddock_protocol::JobStatus::Done,
            vec!["fix.txt".to_string()],
            "early\n".to_string(),
            1,
            "fixed\n".to_string(),
        ),
        "{stderr}"
    );
}

/// A repository with attributes (`* text=auto`, `*.id ident`) has its
/// early patch too, when git would convert none of the job's files: the
/// sealed staging asks `check-attr` of a copy of the attribute files and
/// stages the bytes it read. It had refused every tree with a
/// `.gitattributes`, so such a job's patch was always made again after
/// its end (the engine's wait saw no early staging: `none`).
#[tokio::test(flavor = "multi_thread")]
async fn a_repository_with_attributes_has_its_early_patch() {
    if !paddock_test_support::skip::overlay_available() {
        return;
    }
    let home = Home::new();
    let repo = repo(home.path());
    commit_file(
        &repo,
        ".gitattributes",
        "* text=auto\n*.id ident\n",
        "attributes",
    );
    let (rec, write_trees, mark, stderr) = early_patch_job(
        &home,
        &repo,
        "printf 'fixed\\n' > fix.txt; printf 'no keyword\\n' > v.id",
        "",
    )
    .await;
    assert_eq!(
        (
            rec.status,
            rec.changed_files,
            mark,
            write_trees,
            git(&repo, &["show", "paddock/T-1/1:fix.txt"]),
        ),
        (
            paddock_protocol::JobStatus::Done,
            vec!["fix.txt".to_string(), "v.id".to_string()],
            "early\n".to_string(),
            1,
            "fixed\n".to_string(),
        ),
        "{stderr}"
    );
}

/// On an overlay (as root), what the job writes after its turn's end (an
/// engine still at work, a process it left) once the early patch was
/// made (a file changed, a file added, a file removed) is in the patch:
/// the second print differs from the first, and the patch is made again
/// from the final tree (a second staging: two `write-tree`). Without that
/// check the job's branch would hold the tree as it was at the turn's end.
#[tokio::test(flavor = "multi_thread")]
async fn what_the_job_writes_after_its_turns_end_is_in_the_patch() {
    if !paddock_test_support::skip::overlay_available() {
        return;
    }
    let home = Home::new();
    let repo = repo(home.path());
    let (rec, write_trees, mark, stderr) = early_patch_job(
        &home,
        &repo,
        "printf 'first\\n' > fix.txt; printf 'gone\\n' > gone.txt",
        "printf 'second\\n' > fix.txt; printf 'late\\n' > late.txt; rm gone.txt",
    )
    .await;
    assert_eq!(
        (
            rec.status,
            rec.changed_files,
            mark,
            write_trees,
            git(&repo, &["show", "paddock/T-1/1:fix.txt"]),
            git(&repo, &["show", "paddock/T-1/1:late.txt"]),
            git(&repo, &["ls-tree", "--name-only", "paddock/T-1/1"]).contains("gone.txt"),
        ),
        (
            paddock_protocol::JobStatus::Done,
            vec!["fix.txt".to_string(), "late.txt".to_string()],
            "early\n".to_string(),
            2,
            "second\n".to_string(),
            "late\n".to_string(),
            false,
        ),
        "{stderr}"
    );
}

/// What Paddock's gits did while the job was still running, for a job on
/// `rung` whose engine keeps a file `.alive` in its work tree from its
/// start until a second after its turn's end: a `git` first on `PATH`
/// logs, for each git run in the job's work tree (`-C .../work`, not the
/// snapshot's checkout) or in Paddock's git directory of it (`-C
/// .../meta/git`), where it ran, whether the job still held that file, and
/// its subcommand.
async fn staged_while_alive(rung: &str) -> (paddock_protocol::JobStatus, Vec<String>, String) {
    let body = format!(
        "touch .alive\n{}\nsleep 1\nrm -f .alive\n",
        finishing("printf 'fixed\\n' > fix.txt")
    );
    gits_while_alive(rung, "work", &body).await
}

/// [`staged_while_alive`] for a job whose engine runs `body`, which keeps
/// `.alive` in its directory `alive_in` (`work`, its work tree, or `home`,
/// its home, outside the patch) while it is alive.
async fn gits_while_alive(
    rung: &str,
    alive_in: &str,
    body: &str,
) -> (paddock_protocol::JobStatus, Vec<String>, String) {
    let home = Home::new();
    let repo = repo(home.path());
    let log = home.path().join("alive.log");
    let bin = home.path().join("alive-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\ndir=\nprev=\nsub=\nfor a in \"$@\"; do\n  case \"$prev\" in\n    -C) dir=\"$a\" ;;\n    -c) ;;\n    *) case \"$a\" in -*) ;; *) [ -z \"$sub\" ] && sub=\"$a\" ;; esac ;;\n  esac\n  prev=\"$a\"\ndone\ncase \"$dir\" in\n  */work) where=work; job=\"${{dir%/work}}\" ;;\n  */meta/git) where=git; job=\"${{dir%/meta/git}}\" ;;\n  *) exec '{git}' \"$@\" ;;\nesac\nif [ -e \"$job/{alive_in}/.alive\" ]; then state=alive; else state=ended; fi\necho \"$where $state $sub\" >> '{log}'\nexec '{git}' \"$@\"\n",
        log = log.display(),
        git = real_git().display()
    );
    paddock_test_support::script::write_script(&bin.join("git"), &script);
    let path = first_on_path(&bin);
    let spec = stand_in_spec(home.path(), &repo, rung, body);
    let out = run_on_overlay(&home, &spec, &path).await;
    let rec = record(&out);
    let logged = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    (
        rec.status,
        logged,
        git(&repo, &["show", "paddock/T-1/1:fix.txt"]),
    )
}

/// The `update-index`es of a log of [`staged_while_alive`] (where each ran
/// and whether the job was alive), and whether any git had the work tree
/// while the job was alive.
fn staging_of(logged: &[String]) -> (Vec<String>, bool) {
    let staged = logged
        .iter()
        .filter_map(|l| l.strip_suffix(" update-index"))
        .map(str::to_string)
        .collect();
    let in_tree_alive = logged.iter().any(|l| l.starts_with("work alive "));
    (staged, in_tree_alive)
}

/// On an overlay (as root), on both rungs, the patch is made while the
/// engine is still alive (its turn ended; it stays a second, changing
/// nothing: its mark of being alive is in its home, outside the patch)
/// and stands: one staging (one `write-tree`), made while it was alive,
/// and the patch is the job's. It is the sealed staging
/// (`workspace/sealed_stage.rs`) on both rungs: no git has the work tree,
/// so the `write-tree` runs in Paddock's git directory.
#[tokio::test(flavor = "multi_thread")]
async fn the_patch_made_beside_a_live_job_stands_on_both_rungs() {
    if !paddock_test_support::skip::overlay_available()
        || !paddock_test_support::skip::sandbox_available()
    {
        return;
    }
    let body = format!(
        "touch \"$HOME/.alive\"\n{}\nsleep 1\nrm -f \"$HOME/.alive\"\n",
        finishing("printf 'fixed\\n' > fix.txt")
    );
    let (process, sandbox) = tokio::join!(
        gits_while_alive("process", "home", &body),
        gits_while_alive("sandbox", "home", &body)
    );
    let trees = |(status, logged, fix): (paddock_protocol::JobStatus, Vec<String>, String)| {
        let trees: Vec<String> = logged
            .iter()
            .filter_map(|l| l.strip_suffix(" write-tree"))
            .map(str::to_string)
            .collect();
        (status, trees, fix)
    };
    let done = paddock_protocol::JobStatus::Done;
    assert_eq!(
        (trees(process), trees(sandbox)),
        (
            (done, vec!["git alive".to_string()], "fixed\n".to_string()),
            (done, vec!["git alive".to_string()], "fixed\n".to_string())
        )
    );
}

/// The patch is staged while the engine is still alive (its turn ended),
/// and again once it ended (it removed a file after its turn's end), on
/// both rungs, and no git has the work tree while the job is alive: a
/// live job could otherwise race Paddock's git into reading a host file
/// through a link it swaps in (the `sandbox` rung's danger) or into
/// blocking on a FIFO swapped in and back within one coarse clock tick
/// (the `process` rung's: `runner/early_patch.rs`), so Paddock reads the
/// files itself and git stages their bytes in its own directory
/// (`workspace/sealed_stage.rs`). Once the job has ended, git stages by
/// path. Before, the `process` rung's early staging ran by path in the
/// work tree ("work alive").
#[tokio::test(flavor = "multi_thread")]
async fn the_patch_is_staged_beside_a_live_job_never_by_path() {
    if !paddock_test_support::skip::overlay_available()
        || !paddock_test_support::skip::sandbox_available()
    {
        return;
    }
    let (process, sandbox) =
        tokio::join!(staged_while_alive("process"), staged_while_alive("sandbox"));
    let done = paddock_protocol::JobStatus::Done;
    let fixed = "fixed\n".to_string();
    let shown = |(status, logged, fix): (paddock_protocol::JobStatus, Vec<String>, String)| {
        (status, staging_of(&logged), fix)
    };
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        (shown(process), shown(sandbox)),
        (
            (
                done,
                (strings(&["git alive", "work ended"]), false),
                fixed.clone()
            ),
            (done, (strings(&["git alive", "work ended"]), false), fixed)
        )
    );
}

/// On an overlay (as root), a job that outlives its turn's end and swaps a
/// FIFO in for its `.gitignore` just as the early patch's `check-ignore`
/// is to read it (the race a live job can win: the walk found a regular
/// file there a moment before; a `git` first on `PATH` holds the real one
/// until the swap is made, so the race is won every time), then puts the
/// file back and exits, does not hold its conclusion for the git's time
/// limit (ten minutes, with no writer ever to open that FIFO): the tree
/// changed after the first print, so the early patch is dropped, its git
/// killed, and the patch made again from the final tree. Without the
/// second print taken before the early patch is waited for, `paddock run`
/// was still waiting after two minutes. (The early `check-ignore` now
/// reads Paddock's copy of the ignore files, `meta/ignore-shadow`, on
/// both rungs, so the FIFO no longer reaches it at all; the swap is made
/// all the same while it runs.)
#[tokio::test(flavor = "multi_thread")]
async fn a_fifo_swapped_in_under_the_early_patch_does_not_hold_the_job() {
    if !paddock_test_support::skip::overlay_available() {
        return;
    }
    let home = Home::new();
    let repo = repo(home.path());
    let started = home.path().join("check-ignore.started");
    let swapped = home.path().join("fifo.swapped");
    let bin = home.path().join("holding-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\ndir=\nprev=\nsub=\nfor a in \"$@\"; do\n  [ \"$prev\" = -C ] && dir=\"$a\"\n  [ \"$a\" = check-ignore ] && sub=1\n  prev=\"$a\"\ndone\ncase \"$dir\" in */work|*/ignore-shadow) ;; *) sub= ;; esac\nif [ -n \"$sub\" ] && [ ! -e '{started}' ]; then\n  touch '{started}'\n  i=0; while [ $i -lt 400 ] && [ ! -e '{swapped}' ]; do sleep 0.05; i=$((i+1)); done\nfi\nexec '{git}' \"$@\"\n",
        started = started.display(),
        swapped = swapped.display(),
        git = real_git().display()
    );
    paddock_test_support::script::write_script(&bin.join("git"), &script);
    let body = format!(
        "{}\ni=0; while [ $i -lt 400 ] && [ ! -e '{started}' ]; do sleep 0.05; i=$((i+1)); done\nmkfifo .p && mv .p .gitignore\ntouch '{swapped}'\nsleep 1\nprintf 'out/\\n' > .g && mv .g .gitignore\n",
        finishing("printf 'out/\\n' > .gitignore; printf 'fixed\\n' > fix.txt"),
        started = started.display(),
        swapped = swapped.display(),
    );
    let spec = stand_in_spec(home.path(), &repo, "process", &body);
    let mut cmd = home.command(&["run", "--json", spec.to_str().unwrap()]);
    cmd.env("PATH", first_on_path(&bin))
        .env("PADDOCK_WORKSPACE_LAYOUT", "overlay")
        .kill_on_drop(true);
    let ran = tokio::time::timeout(std::time::Duration::from_secs(120), cmd.output()).await;
    let Ok(out) = ran else {
        panic!("paddock run still waiting after 120 s");
    };
    let out = out.unwrap();
    let rec = record(&out);
    assert_eq!(
        (
            rec.status,
            rec.changed_files,
            swapped.exists(),
            git(&repo, &["show", "paddock/T-1/1:.gitignore"]),
            git(&repo, &["show", "paddock/T-1/1:fix.txt"]),
        ),
        (
            paddock_protocol::JobStatus::Done,
            vec![".gitignore".to_string(), "fix.txt".to_string()],
            true,
            "out/\n".to_string(),
            "fixed\n".to_string(),
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A directory with a `git` that runs the real one, then appends its
/// subcommand (as [`logging_git`] reads it) and the CPU limit it ran
/// under (`ulimit -t`: seconds, or `unlimited`) to `log`.
fn cpu_logging_git(dir: &Path, log: &Path) -> PathBuf {
    let bin = dir.join("cpu-logging-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\nskip=0\nsub=\nfor a in \"$@\"; do\n  if [ $skip = 1 ]; then skip=0; continue; fi\n  case \"$a\" in\n    -C|-c|--git-dir) skip=1 ;;\n    -*) ;;\n    *) [ -z \"$sub\" ] && sub=\"$a\" ;;\n  esac\ndone\n'{}' \"$@\"\nstatus=$?\necho \"$sub $(ulimit -t)\" >> '{}'\nexit $status\n",
        real_git().display(),
        log.display(),
    );
    let git = bin.join("git");
    paddock_test_support::script::write_script(&git, &script);
    bin
}

/// A job in `home` (its repository, a bare clone of it as the remote
/// `[results.push]` names, the stand-in engine writing `fix.txt`) under
/// the host profile `profile.toml` of `git_cpu_secs`: the repository,
/// the remote and the spec.
fn pushed_under_profile(home: &Home, git_cpu_secs: u64) -> (PathBuf, PathBuf, PathBuf) {
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
        &format!("id = \"git-cpu\"\ngit_cpu_secs = {git_cpu_secs}\n"),
    );
    (repo, remote, spec)
}

/// Every host git that reads the job's content (its tree, the objects
/// made of it, its bundle) is held to the host profile's `git_cpu_secs`
/// (here 7), else `host_git::JOB_GIT_CPU` (60 s), as a job pushed to a
/// remote and published into its local source shows,
/// from the patch's first git (`check-ignore`) on:
/// the patch's and the branch's gits, the bundle's objects indexed into
/// the source (`index-pack`, `results/source_pack.rs`), and the push's
/// scratch fetch and push, whose `pack-objects` deltifies the job's
/// objects; and, where the source has a detached worktree, the branch's
/// fetch into the source (`results/source.rs`). Before, that fetch and
/// the source's `index-pack` (users' gits) and the `push` ran with no CPU
/// limit: what the job's content made them compute was bounded by their
/// 600 s wall clock alone.
#[tokio::test(flavor = "multi_thread")]
async fn every_git_on_the_jobs_content_is_held_to_the_cpu_limit() {
    let home = Home::new();
    // Under a host profile that sets the limit (7 s); the second job
    // below runs under none (60 s).
    let (repo, _, spec) = pushed_under_profile(&home, 7);
    let log = home.path().join("gits.log");
    let bin = cpu_logging_git(home.path(), &log);
    let path = first_on_path(&bin);
    let out = home
        .paddock(
            &["run", "--json", spec.to_str().unwrap()],
            &[("PATH", path.as_str())],
        )
        .await;
    // From the patch's first git on: before it, the gits read the base
    // (the snapshot's `update-index` among them), no job's content.
    let logged: Vec<(String, String)> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(sub, limit)| (sub.to_string(), limit.to_string()))
        .skip_while(|(sub, _)| sub != "check-ignore")
        .collect();
    const CONTENT: [&str; 7] = [
        "check-ignore",
        "update-index",
        "write-tree",
        "pack-objects",
        "index-pack",
        "fetch",
        "push",
    ];
    let mut seen: Vec<&str> = logged
        .iter()
        .filter(|(sub, _)| CONTENT.contains(&sub.as_str()))
        .map(|(sub, _)| sub.as_str())
        .collect();
    seen.sort_unstable();
    seen.dedup();
    let unlimited: Vec<&(String, String)> = logged
        .iter()
        .filter(|(sub, limit)| CONTENT.contains(&sub.as_str()) && limit != "7")
        .collect();
    let mut all = CONTENT.to_vec();
    all.sort_unstable();
    // Where the source has a worktree with a detached `HEAD`, the branch
    // is fetched into it (`results/source.rs`): that fetch too.
    let branches = git(&repo, &["branch", "--list", "paddock/*"]);
    assert_eq!(
        branches.trim(),
        "paddock/T-1/1",
        "first job: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    git(&repo, &["branch", "-D", "paddock/T-1/1"]);
    let detached = home.path().join("detached");
    git(
        &repo,
        &[
            "worktree",
            "add",
            "-q",
            "--detach",
            detached.to_str().unwrap(),
        ],
    );
    std::fs::remove_file(&log).unwrap();
    let plain = stand_in_spec(
        home.path(),
        &repo,
        "process",
        &finishing("printf 'fixed again\n' > fix.txt"),
    );
    let again = home
        .paddock(
            &["run", "--json", plain.to_str().unwrap()],
            &[("PATH", path.as_str())],
        )
        .await;
    let second_log = std::fs::read_to_string(&log).unwrap();
    let fetched: Vec<String> = second_log
        .lines()
        .filter(|l| l.starts_with("fetch "))
        .map(str::to_string)
        .collect();
    // Paddock's gits are its own, the wrapper's real git too: none is
    // killed as the job's leftover at the engine's end (before, the real
    // git under the wrapper was, and with it at times the early patch's
    // `pack-objects`: the job's branch was not kept).
    let leftovers = [&out, &again].map(|o| {
        String::from_utf8_lossy(&o.stderr).contains("of the job were still running after")
    });
    assert_eq!(
        (
            record(&out).status,
            unlimited,
            seen,
            record(&again).status,
            fetched,
            leftovers
        ),
        (
            paddock_protocol::JobStatus::Done,
            vec![],
            all,
            paddock_protocol::JobStatus::Done,
            vec!["fetch 60".to_string()],
            [false, false]
        ),
        "first job: {}\nsecond job: {}\nthe second job's gits: {second_log}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&again.stderr),
    );
}

/// A host profile's `git_cpu_secs` holds Paddock's gits on the job's
/// content: a job whose ignore rules make git compute (80,000 `a/**/b<n>`
/// patterns against 200 files 60 directories deep, about 10 s of git's
/// CPU unbounded) under `git_cpu_secs = 1` fails at its patch, its
/// reason naming the command and the profile's limit (the kernel ended
/// the git for its CPU; no wall clock is asserted), and leaves no
/// workspace behind. Before, the limit was 60 s whatever the
/// host said.
#[tokio::test(flavor = "multi_thread")]
async fn a_host_profiles_git_cpu_limit_ends_a_git_the_jobs_rules_make_compute() {
    let home = Home::new();
    let deep = std::iter::once("a")
        .chain(std::iter::repeat_n("x", 60))
        .collect::<Vec<_>>()
        .join("/");
    let body = finishing(&format!(
        "seq 0 79999 | sed 's|^|a/**/b|' > .gitignore\nmkdir -p {deep}\n\
         for i in $(seq 0 199); do echo f > {deep}/f$i; done"
    ));
    let spec = fake_codex_job(&home, "process", &body, 600);
    under_profile(&spec, "id = \"tight-git\"\ngit_cpu_secs = 1\n");
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    let reason = rec.reason.clone().unwrap_or_default();
    let left: Vec<_> = std::fs::read_dir(home.jobs())
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("job-"))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        (
            rec.status,
            reason.contains(
                "`git check-ignore --no-index -z --stdin -v -n` used more than 1s of CPU on the \
                 job's content"
            ),
            left,
        ),
        (
            paddock_protocol::JobStatus::Failed,
            true,
            Vec::<String>::new(),
        ),
        "{reason}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `paddock publish` holds its push to the job's host profile's
/// `git_cpu_secs` as it reads now (the profile is resolved again): `push
/// 7` under a profile of 7; once the profile's file is gone, the default
/// (60) with a warning among the job's events saying so, and the branch
/// is pushed all the same.
#[tokio::test(flavor = "multi_thread")]
async fn paddock_publish_holds_its_push_to_the_jobs_profile() {
    let home = Home::new();
    let (_, remote, spec) = pushed_under_profile(&home, 7);
    let profile = home.path().join("profile.toml");
    let rec = record(
        &home
            .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
            .await,
    );
    let log = home.path().join("gits.log");
    let bin = cpu_logging_git(home.path(), &log);
    let path = first_on_path(&bin);
    // Published again, to the remote emptied of the branch: the push's
    // CPU limit, and the warnings about the profile.
    let mut seen = Vec::new();
    for gone in [false, true] {
        git(&remote, &["update-ref", "-d", "refs/heads/paddock/T-1/1"]);
        if gone {
            std::fs::remove_file(&profile).unwrap();
        }
        let _ = std::fs::remove_file(&log);
        let again = home
            .paddock(&["publish", "--json", &rec.id], &[("PATH", path.as_str())])
            .await;
        let pushes: Vec<String> = std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("push "))
            .map(str::to_string)
            .collect();
        let warned = home
            .store()
            .await
            .events(&rec.id, 0)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| {
                matches!(&e.body, paddock_protocol::EventBody::Error { message, fatal: false, .. }
                    if message.contains("does not resolve now")
                        && message.contains("the push's gits get the default 60 s of CPU"))
            })
            .count();
        seen.push((
            again.status.code(),
            pushes,
            warned,
            git(
                &remote,
                &["rev-parse", "--verify", "-q", "refs/heads/paddock/T-1/1"],
            )
            .is_empty(),
        ));
    }
    assert_eq!(
        (rec.status, seen),
        (
            paddock_protocol::JobStatus::Done,
            vec![
                (Some(0), vec!["push 7".to_string()], 0, false),
                (Some(0), vec!["push 60".to_string()], 1, false),
            ]
        )
    );
}

/// A job on a URL source that is a bundle on this host (as the hello
/// job's `repo.bundle`) whose refs and mirror are as they were at the
/// mirror's last fetch starts no fetch (`workspace/bundle_source.rs`):
/// made (cloned), then fetched and checked, then none; the bundle made
/// again with a new commit is fetched and the job starts from it; the
/// next job fetches again (the new base's snapshot, a hard-linked clone
/// of the mirror, changed the link counts and so the times of the
/// mirror's files: its state, which its check runs for as before), and
/// the job after that fetches nothing and starts from the new commit too.
/// That is the overlay layout (root). Where the workspace is a clone of
/// the mirror (not root: no overlay), each job's hard-linked clone, and
/// its removal, change the link counts and times of the mirror's files,
/// so every job after the first fetches, as before the cut.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_on_an_unchanged_bundle_fetches_nothing() {
    let home = Home::new();
    let repo = repo(home.path());
    let bundle = home.path().join("repo.bundle");
    let make_bundle = || {
        let _ = std::fs::remove_file(&bundle);
        git(
            &repo,
            &["bundle", "create", "-q", bundle.to_str().unwrap(), "--all"],
        );
    };
    make_bundle();
    let log = home.path().join("gits.log");
    let bin = logging_git(home.path(), &log);
    let path = first_on_path(&bin);
    let seen = home.path().join("seen.log");
    let work = format!(
        "printf 'fixed\\n' > fix.txt; if [ -f more.txt ]; then echo moved; else echo base; fi >> '{}'",
        seen.display()
    );
    let spec = stand_in_spec(home.path(), &repo, "process", &finishing(&work));
    super::results::use_url_source(&spec, &repo, &bundle.display().to_string(), None);
    let env = [("PATH", path.as_str())];
    let args = ["run", "--json", spec.to_str().unwrap()];
    let fetches = || async {
        let out = home.paddock(&args, &env).await;
        assert_eq!(
            record(&out).status,
            paddock_protocol::JobStatus::Done,
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        logged(&log).iter().filter(|g| *g == "fetch").count()
    };
    let mut counts = Vec::new();
    for _ in 0..3 {
        counts.push(fetches().await);
    }
    commit_more(&repo);
    make_bundle();
    for _ in 0..3 {
        counts.push(fetches().await);
    }
    let overlay = nix::unistd::geteuid().is_root();
    assert_eq!(
        (counts, std::fs::read_to_string(&seen).unwrap()),
        (
            if overlay {
                vec![0, 1, 0, 1, 1, 0]
            } else {
                vec![0, 1, 1, 1, 1, 1]
            },
            "base\nbase\nbase\nmoved\nmoved\nmoved\n".to_string()
        )
    );
}

/// The repository is as hostile as the job: a base commit whose
/// `.gitattributes` makes git compute (80,000 `a/**/b<n>` patterns, 200
/// files 60 directories deep: about 8 s of git's CPU per pass over them)
/// makes the checkout that provisions the job (a clone's, an overlay
/// snapshot's, and the snapshot's index settled after it) compute as
/// long, on the host, before any limit of the job holds. Under a host
/// profile's `git_cpu_secs = 1` the job fails at provisioning on either
/// layout, its reason naming the checkout and the limit (the kernel ended
/// the git for its CPU: what is measured, not the wall clock, which a
/// starved machine stretches), and no workspace or snapshot is left. Before, those gits had no
/// CPU limit: the job ran on after 16 s of the host's CPU (hours with
/// more files, up to each git's 600 s wall clock).
#[tokio::test(flavor = "multi_thread")]
async fn a_repositorys_attribute_rules_cannot_make_its_checkout_compute_unbounded() {
    let home = Home::new();
    let spec = fake_codex_job(&home, "process", &finishing("true"), 600);
    under_profile(&spec, "id = \"tight-git\"\ngit_cpu_secs = 1\n");
    let repo = home.path().join("repo");
    let deep = std::iter::once("a")
        .chain(std::iter::repeat_n("x", 60))
        .collect::<Vec<_>>()
        .join("/");
    std::fs::create_dir_all(repo.join(&deep)).unwrap();
    for i in 0..200 {
        std::fs::write(repo.join(&deep).join(format!("f{i}")), "f\n").unwrap();
    }
    // The files first, then the rules by plumbing through an index of
    // their own: the test's own gits never match the files against them
    // (a `git commit`, or any write of the work tree's index, would hash
    // again the files it holds as racily clean).
    git(&repo, &["add", "a"]);
    git(&repo, &["commit", "-qm", "files"]);
    let rules: String = (0..80_000).map(|i| format!("a/**/b{i} text\n")).collect();
    std::fs::write(repo.join(".gitattributes"), rules).unwrap();
    let blob = git(&repo, &["hash-object", "-w", ".gitattributes"]);
    let index = home.path().join("rules.index");
    let with_index = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(args)
            .env("GIT_INDEX_FILE", &index)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    with_index(&["read-tree", "HEAD"]);
    let info = format!("100644,{},.gitattributes", blob.trim());
    with_index(&["update-index", "--add", "--cacheinfo", &info]);
    let tree = with_index(&["write-tree"]);
    let made = git(
        &repo,
        &["commit-tree", tree.trim(), "-p", "HEAD", "-m", "rules"],
    );
    git(&repo, &["update-ref", "HEAD", made.trim()]);
    // The directories left (a snapshot's lock file stays, as it does
    // whenever one is made).
    let left = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| !n.starts_with('.'))
                    .collect()
            })
            .unwrap_or_default()
    };
    // The overlay layout where this process can mount one (root), the
    // clone everywhere.
    let layouts: &[&str] = match paddock_test_support::skip::overlay_available() {
        true => &["overlay", "clone"],
        false => &["clone"],
    };
    for &layout in layouts {
        // A hang guard only, far past what the job takes however starved
        // the machine: that the checkout's git was ended for its CPU is
        // what the job's reason says.
        let mut run = home.command(&["run", "--json", spec.to_str().unwrap()]);
        run.env("PADDOCK_WORKSPACE_LAYOUT", layout)
            .kill_on_drop(true);
        let out = tokio::time::timeout(std::time::Duration::from_secs(900), run.output())
            .await
            .unwrap_or_else(|_| panic!("{layout}: the job did not end within 900 s"))
            .unwrap();
        let rec = record(&out);
        let reason = rec.reason.clone().unwrap_or_default();
        assert_eq!(
            (
                rec.status,
                reason.contains("`git checkout --quiet ")
                    && reason.contains(
                        " used more than 1s of CPU on the job's content or its repository's"
                    ),
                left(&home.jobs()),
                left(&home.jobs().join(".snapshots")),
            ),
            (
                paddock_protocol::JobStatus::Failed,
                true,
                Vec::<String>::new(),
                Vec::<String>::new(),
            ),
            "{layout}: {reason}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

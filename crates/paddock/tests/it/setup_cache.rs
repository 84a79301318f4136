//! The setup cache (docs/egress.md#the-setup-cache) with the real binary
//! and a stand-in engine: a second job of the same source, commands and
//! lockfiles is restored (its setup commands do not run, the files and
//! links they made are there, the very bytes of the first run); a changed
//! lockfile misses; `setup.cache = false` turns it off; a planted link out
//! of the tree, a setuid file and a FIFO are not carried; two sources with
//! the same content and commands never share an entry; what a job on
//! another branch stored (its own scripts ran in setup) never reaches a
//! job on main, while main's entry reaches the branch.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use paddock_protocol::EventBody;
use paddock_test_support::prelude::*;
use paddock_test_support::pypi_index::{PypiIndexStandIn, PYPI_PROJECT, PYPI_VERSION};

/// The setup: a file whose bytes differ on every run (a second run would
/// show), a file, a link inside the tree, and a file in HOME.
const SETUP: &[&str] = &[
    "mkdir -p deps/bin && date +%s%N > deps/stamp && echo lib > deps/lib.js",
    "ln -s ../lib.js deps/bin/lib && mkdir -p \"$HOME/.pkg\" && echo cached > \"$HOME/.pkg/index\"",
];

/// The engine: what it sees of setup's output.
const AGENT: &str = "exec 2>/dev/null; cat deps/stamp deps/bin/lib \"$HOME/.pkg/index\" > \"$HOME/seen\"; readlink deps/bin/lib >> \"$HOME/seen\"; ls -A deps >> \"$HOME/seen\"";

/// A job spec in `home` on `rung` with `commands` as its setup (and
/// `extra` lines in `[setup]`).
fn spec_with(home: &Home, rung: &str, commands: &[&str], extra: &str) -> std::path::PathBuf {
    spec_running(home, rung, AGENT, commands, extra)
}

/// [`spec_with`] with `agent` as the engine's script.
fn spec_running(
    home: &Home,
    rung: &str,
    agent: &str,
    commands: &[&str],
    extra: &str,
) -> std::path::PathBuf {
    let spec = fake_codex_job(home, rung, agent, 60);
    let list = commands
        .iter()
        .map(|c| format!("'''{c}'''"))
        .collect::<Vec<_>>()
        .join(", ");
    append_to_spec(&spec, &format!("[setup]\ncommands = [{list}]\n{extra}"));
    spec
}

/// A job's run: the `setup_cache` statuses, how many setup
/// commands ran, what its engine saw.
struct Run {
    cache: Vec<String>,
    commands_run: usize,
    seen: String,
}

async fn run(home: &Home, spec: &Path) -> Run {
    let (rec, _) = run_kept_script_job(home, spec).await;
    let events = home.store().await.events(&rec.id, 0).await.unwrap();
    let cache = setup_cache_statuses(&events);
    let commands_run = events
        .iter()
        .filter(|e| matches!(&e.body, EventBody::ToolCall { tool, .. } if tool == "setup"))
        .count();
    let job = home.jobs().join(&rec.id);
    let seen = std::fs::read_to_string(job.join("home/seen")).unwrap_or_default();
    std::fs::remove_dir_all(&job).unwrap();
    Run {
        cache,
        commands_run,
        seen,
    }
}

fn commit(repo: &Path, file: &str, text: &str) {
    std::fs::write(repo.join(file), text).unwrap();
    git(repo, &["add", "."]);
    git(repo, &["commit", "-q", "-m", file]);
}

/// The first 12 digits of the commit `rev` names in `repo`.
fn short_commit(repo: &Path, rev: &str) -> String {
    git(repo, &["rev-parse", rev]).trim()[..12].to_string()
}

async fn restored_then_missed_on(rung: &str) {
    let home = Home::new();
    let spec = spec_with(&home, rung, SETUP, "");
    let repo = home.path().join("repo");
    commit(&repo, "package-lock.json", "{\"lockfileVersion\": 3}\n");
    // 5 entries in the work tree (2 directories, 2 files, a link), 2 in
    // HOME; the stamp's 20 bytes, `lib\n`, `cached\n`.
    let size = "7 entries, 31 bytes";
    let first = run(&home, &spec).await;
    let k = setup_cache_key(&first.cache[0]);
    let c = short_commit(&repo, "main");
    assert_eq!(
        (&first.cache, first.commands_run),
        (
            &vec![
                format!("not in the setup cache (key {k}); the setup commands run"),
                format!("stored in the setup cache (key {k}, commit {c}): {size}"),
            ],
            2
        ),
        "{rung}"
    );
    let stamp = first.seen.lines().next().unwrap().to_string();
    let expected_seen = format!("{stamp}\nlib\ncached\n../lib.js\nbin\nlib.js\nstamp\n");
    assert_eq!(first.seen, expected_seen);
    // The same source, lockfile and commands: restored, not run; the
    // first run's bytes.
    let second = run(&home, &spec).await;
    assert_eq!(
        (&second.cache, second.commands_run, &second.seen),
        (
            &vec![format!(
                "restored from the setup cache (key {k}, commit {c}): {size}; the setup commands did not run"
            )],
            0,
            &expected_seen
        ),
        "{rung}"
    );
    // Another commit that leaves the lockfile alone: still restored.
    commit(&repo, "src.txt", "code\n");
    let third = run(&home, &spec).await;
    assert_eq!((third.commands_run, &third.seen), (0, &expected_seen));
    // A changed lockfile: another key, a miss, the commands run.
    commit(
        &repo,
        "package-lock.json",
        "{\"lockfileVersion\": 3, \"x\": 1}\n",
    );
    let fourth = run(&home, &spec).await;
    let k2 = setup_cache_key(&fourth.cache[0]);
    let c2 = short_commit(&repo, "main");
    assert_ne!(k2, k);
    assert_eq!(
        (&fourth.cache, fourth.commands_run),
        (
            &vec![
                format!("not in the setup cache (key {k2}); the setup commands run"),
                format!("stored in the setup cache (key {k2}, commit {c2}): {size}"),
            ],
            2
        )
    );
    assert_ne!(fourth.seen, expected_seen);
    // Off in the spec: the commands run, nothing is restored or stored.
    let off = home.path().join("off.toml");
    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(&off, format!("{text}cache = false\n")).unwrap();
    let fifth = run(&home, &off).await;
    assert_eq!(
        (&fifth.cache, fifth.commands_run),
        (&vec!["off (setup.cache = false)".to_string()], 2)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_job_is_restored_and_a_changed_lockfile_misses_on_the_process_rung() {
    restored_then_missed_on("process").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_job_is_restored_and_a_changed_lockfile_misses_in_the_sandbox() {
    if !sandbox_available() {
        return;
    }
    restored_then_missed_on("sandbox").await;
}

/// A host profile with `setup_cache = false` turns it off.
#[tokio::test(flavor = "multi_thread")]
async fn a_host_profile_turns_the_cache_off() {
    let home = Home::new();
    std::fs::write(
        home.path().join("profile.toml"),
        "id = \"no-cache\"\nsetup_cache = false\n",
    )
    .unwrap();
    let spec = spec_with(
        &home,
        "process",
        SETUP,
        "\n[policy]\nprofile = \"profile.toml\"\n",
    );
    for _ in 0..2 {
        let r = run(&home, &spec).await;
        assert_eq!(
            (&r.cache, r.commands_run),
            (
                &vec!["off (host profile no-cache: setup_cache = false)".to_string()],
                2
            )
        );
    }
}

/// A relative link out of the tree, a setuid file and a FIFO made by
/// setup are left out of the entry (named in the event) and not in the
/// restored job; the cache holds none of them. A link to an absolute path
/// is carried as its text (the host never follows it).
#[tokio::test(flavor = "multi_thread")]
async fn planted_links_setuid_files_and_fifos_are_not_carried() {
    let home = Home::new();
    let planted = [
        "mkdir -p deps && echo ok > deps/ok && ln -s /etc/passwd deps/out && ln -s ../../../.. deps/up",
        "echo s > deps/suid && chmod 4755 deps/suid && test -u deps/suid && mkfifo deps/fifo",
    ];
    let spec = spec_with(&home, "process", &planted, "");
    let first = run(&home, &spec).await;
    let k = setup_cache_key(&first.cache[0]);
    let c = short_commit(&home.path().join("repo"), "main");
    assert_eq!(
        first.cache[1],
        format!(
            "stored in the setup cache (key {k}, commit {c}): 3 entries, 3 bytes; left out (3 in all): `deps/fifo` (not a file, directory or link), `deps/suid` (setuid or setgid), `deps/up` (a link out of the tree)"
        )
    );
    let second = run(&home, &spec).await;
    // `ls -A deps` of the restored job: the file and the absolute link.
    let listed: Vec<&str> = second.seen.lines().rev().take(2).collect();
    assert_eq!((second.commands_run, listed), (0, vec!["out", "ok"]));
    // Nothing in the cache is a relative link out, setuid or special:
    // the one link is `deps/out`, its text as it was.
    let cache = home.jobs().join(".setup-cache");
    let (mut odd, mut links) = (Vec::new(), Vec::new());
    let mut stack = vec![cache];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let m = std::fs::symlink_metadata(e.path()).unwrap();
            use std::os::unix::fs::PermissionsExt as _;
            if m.is_dir() {
                stack.push(e.path());
            } else if m.is_symlink() {
                links.push(std::fs::read_link(e.path()).unwrap());
            } else if !m.is_file() || m.permissions().mode() & 0o6000 != 0 {
                odd.push(e.path());
            }
        }
    }
    assert_eq!(
        (odd, links),
        (
            Vec::<std::path::PathBuf>::new(),
            vec![std::path::PathBuf::from("/etc/passwd")]
        )
    );
}

/// The system Python (CI installs `python3-venv` and `python3-pip`).
const PYTHON: &str = "/usr/bin/python3";

/// A virtualenv made by setup (`python3 -m venv .venv`, then its pip
/// installing a wheel with a console script from a loopback index
/// stand-in through the job's proxy) names the job's directory in its
/// scripts and `pyvenv.cfg`, and links `bin/python3` to the system's
/// Python by its absolute path. A second job restored from the cache
/// runs the venv's `bin/python` (its `sys.prefix` is the new job's
/// `.venv`) and the console script, whose first line names the new job's
/// Python; the index was asked once, by the first job.
async fn a_restored_virtualenv_runs_on(rung: &str) {
    if !program_available(PYTHON, &["-c", "import venv, ensurepip"], "python3-venv") {
        return;
    }
    let index = PypiIndexStandIn::start().await;
    let home = Home::new();
    let at = format!("127.0.0.1:{}", index.port);
    std::fs::write(
        home.path().join("profile.toml"),
        format!(
            "id = \"venv\"\n[network]\nsetup_allow = [\"{at}\"]\nopen_addresses = [\"{at}\"]\n"
        ),
    )
    .unwrap();
    let setup = [
        format!("{PYTHON} -m venv .venv"),
        format!(
            "NO_PROXY= no_proxy= .venv/bin/pip install --no-cache-dir --disable-pip-version-check --retries 0 --timeout 10 --index-url {} {PYPI_PROJECT}=={PYPI_VERSION}",
            index.index_url()
        ),
    ];
    let agent = [
        "exec > \"$HOME/seen\" 2>&1",
        ".venv/bin/python -c 'import os, sys, paddock_standin; print(paddock_standin.GREETING); print(sys.prefix == os.getcwd() + \"/.venv\")'",
        ".venv/bin/paddock-standin",
        "[ \"$(head -n 1 .venv/bin/paddock-standin)\" = \"#!$PWD/.venv/bin/python3\" ] && echo shebang names this job",
        "grep -c \"$PWD/.venv\" .venv/pyvenv.cfg .venv/bin/activate",
    ]
    .join("\n");
    let commands: Vec<&str> = setup.iter().map(String::as_str).collect();
    let spec = spec_running(
        &home,
        rung,
        &agent,
        &commands,
        &format!(
            "network = [\"{at}\"]\ntimeout_secs = 100\n\n[policy]\nprofile = \"profile.toml\"\naccept_degraded = [\"network\"]\n"
        ),
    );
    let expected_seen = "hello from the stand-in index\nTrue\nhello from the stand-in index\nshebang names this job\n.venv/pyvenv.cfg:1\n.venv/bin/activate:1\n";
    let first = run(&home, &spec).await;
    assert_eq!(
        (first.commands_run, first.seen.as_str(), first.cache.len()),
        (2, expected_seen, 2),
        "{rung}: {:?}",
        first.cache
    );
    let second = run(&home, &spec).await;
    let restored = second.cache.first().cloned().unwrap_or_default();
    assert_eq!(
        (second.commands_run, second.seen.as_str()),
        (0, expected_seen),
        "{rung}: {:?}",
        second.cache
    );
    assert!(
        restored.starts_with("restored from the setup cache")
            && restored.contains("; the first job's directory rewritten to this job's in "),
        "{restored}"
    );
    assert_eq!(
        index.requests().len(),
        2,
        "the index page and the wheel, once"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restored_virtualenv_runs_on_the_process_rung() {
    a_restored_virtualenv_runs_on("process").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restored_virtualenv_runs_in_the_sandbox() {
    if !sandbox_available() {
        return;
    }
    a_restored_virtualenv_runs_on("sandbox").await;
}

/// Two sources with the same content, lockfile and commands: each gets
/// its own entry, neither restores the other's.
#[tokio::test(flavor = "multi_thread")]
async fn two_sources_never_share_an_entry() {
    let home = Home::new();
    let spec = spec_with(&home, "process", SETUP, "");
    let repo = home.path().join("repo");
    let twin = home.path().join("twin");
    git(
        home.path(),
        &[
            "clone",
            "-q",
            repo.to_str().unwrap(),
            twin.to_str().unwrap(),
        ],
    );
    let twin_spec = home.path().join("twin.toml");
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        &format!("path = \"{}\"", repo.display()),
        &format!("path = \"{}\"", twin.display()),
    );
    std::fs::write(&twin_spec, text).unwrap();
    let first = run(&home, &spec).await;
    let other = run(&home, &twin_spec).await;
    let (k, k2) = (
        setup_cache_key(&first.cache[0]),
        setup_cache_key(&other.cache[0]),
    );
    assert_ne!(k, k2);
    assert_eq!(
        (&other.cache[0], other.commands_run),
        (
            &format!("not in the setup cache (key {k2}); the setup commands run"),
            2
        )
    );
    assert_ne!(first.seen, other.seen);
    // And each source's second job restores its own.
    let again = run(&home, &twin_spec).await;
    assert_eq!((again.commands_run, &again.seen), (0, &other.seen));
}

/// The setup runs the checkout's own script (as `npm ci` runs a
/// package's `postinstall`); the script is no lockfile, so it is not in
/// the key. A job on a branch whose script plants something stores it;
/// a later job on main (whose base does not descend from the branch) must
/// not restore it: it runs its own setup and stores its own entry, which
/// the next job on main restores. A job on the branch may restore main's
/// (the branch descends from main); once main merges the branch, main's
/// jobs trust what the branch produced.
async fn a_branch_cannot_poison_main_on(rung: &str) {
    let home = Home::new();
    let spec = spec_with(&home, rung, &["sh setup.sh"], "");
    let repo = home.path().join("repo");
    let script = "mkdir -p deps/bin && echo lib > deps/lib.js && ln -s ../lib.js deps/bin/lib && date +%s%N > deps/stamp && mkdir -p \"$HOME/.pkg\" && echo cached > \"$HOME/.pkg/index\"\n";
    commit(&repo, "package-lock.json", "{\"lockfileVersion\": 3}\n");
    commit(&repo, "setup.sh", script);
    let main = short_commit(&repo, "main");
    // The hostile branch: the same lockfile, a script that poisons.
    git(&repo, &["checkout", "-q", "-b", "hostile"]);
    commit(
        &repo,
        "setup.sh",
        &script.replace("echo lib >", "echo pwned >"),
    );
    git(&repo, &["checkout", "-q", "main"]);
    let hostile = short_commit(&repo, "hostile");
    let on_hostile = home.path().join("hostile.toml");
    let text = std::fs::read_to_string(&spec).unwrap();
    assert!(text.contains("base_ref = \"main\""));
    std::fs::write(
        &on_hostile,
        text.replace("base_ref = \"main\"", "base_ref = \"hostile\""),
    )
    .unwrap();
    let size = "7 entries, 31 bytes";
    let lib = |r: &Run| r.seen.lines().nth(1).unwrap_or_default().to_string();

    let poisoner = run(&home, &on_hostile).await;
    let k = setup_cache_key(&poisoner.cache[0]);
    assert_eq!(
        (&poisoner.cache, poisoner.commands_run, lib(&poisoner)),
        (
            &vec![
                format!("not in the setup cache (key {k}); the setup commands run"),
                // `pwned\n` is two bytes longer than `lib\n`.
                format!(
                    "stored in the setup cache (key {k}, commit {hostile}): 7 entries, 33 bytes"
                ),
            ],
            1,
            "pwned".to_string()
        ),
        "{rung}"
    );
    // Main: the same key, the branch's entry refused, its own setup.
    let victim = run(&home, &spec).await;
    assert_eq!(
        (&victim.cache, victim.commands_run, lib(&victim)),
        (
            &vec![
                format!("not restored from the setup cache (key {k}): its entry was made from commit {hostile} that base commit {main} does not descend from (another branch's setup ran code this job does not trust); the setup commands run"),
                format!("stored in the setup cache (key {k}, commit {main}): {size}"),
            ],
            1,
            "lib".to_string()
        ),
        "{rung}"
    );
    // Main again: its own entry, the very bytes of its own setup.
    let again = run(&home, &spec).await;
    assert_eq!(
        (&again.cache, again.commands_run, &again.seen),
        (
            &vec![format!(
                "restored from the setup cache (key {k}, commit {main}): {size}; the setup commands did not run"
            )],
            0,
            &victim.seen
        ),
        "{rung}"
    );
    // Main merges the branch: its base now descends from both commits,
    // and the entry used last of those it trusts (main's) is restored.
    git(&repo, &["merge", "-q", "--no-ff", "-m", "merge", "hostile"]);
    let merged = run(&home, &spec).await;
    assert_eq!(
        (&merged.cache, merged.commands_run),
        (
            &vec![format!(
                "restored from the setup cache (key {k}, commit {main}): {size}; the setup commands did not run"
            )],
            0
        ),
        "{rung}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_branch_cannot_poison_main_on_the_process_rung() {
    a_branch_cannot_poison_main_on("process").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_branch_cannot_poison_main_in_the_sandbox() {
    if !sandbox_available() {
        return;
    }
    a_branch_cannot_poison_main_on("sandbox").await;
}

/// What a setup may fetch is its host profile's to say (`setup_allow`,
/// `open_addresses`, its credentials, the programs it hides), so an entry
/// is only as good as the rules it was made under. A profile narrowed
/// under the same id (`paddock profile add` again, or another file with
/// that id) must not restore what setup fetched under the wider one: the
/// narrow job misses and runs its own setup, which the proxy refuses.
/// Before, the key held the profile's id alone and the narrow job got
/// the page the wide one had fetched, its commands never run.
#[tokio::test(flavor = "multi_thread")]
async fn a_profile_narrowed_under_the_same_id_does_not_restore_what_the_wider_one_fetched() {
    let index = PypiIndexStandIn::start().await;
    let home = Home::new();
    let at = format!("127.0.0.1:{}", index.port);
    let url = format!("{}{PYPI_PROJECT}/", index.index_url());
    let profile = home.path().join("profile.toml");
    let wide =
        format!("id = \"box\"\n[network]\nsetup_allow = [\"{at}\"]\nopen_addresses = [\"{at}\"]\n");
    let narrow = format!("id = \"box\"\n[network]\nsetup_allow = [\"{at}\"]\n");
    let fetch = format!(
        "mkdir -p deps && {{ NO_PROXY= no_proxy= curl -sf --max-time 10 -o deps/page {url} || echo refused > deps/page; }}"
    );
    let spec = spec_running(
        &home,
        "process",
        "cat deps/page > \"$HOME/seen\"",
        &[fetch.as_str()],
        &format!(
            "network = [\"{at}\"]\n\n[policy]\nprofile = \"profile.toml\"\naccept_degraded = [\"network\"]\n"
        ),
    );
    std::fs::write(&profile, &wide).unwrap();
    let first = run(&home, &spec).await;
    let asked = index.requests();
    // The page as the index serves it.
    let page = std::process::Command::new("curl")
        .args(["-sf", "--noproxy", "*", &url])
        .output()
        .unwrap();
    let page = String::from_utf8(page.stdout).unwrap();
    let k = setup_cache_key(&first.cache[0]);
    assert_eq!(
        (first.commands_run, first.seen.as_str(), asked.len()),
        (1, page.as_str(), 1),
        "{:?}",
        first.cache
    );
    std::fs::write(&profile, &narrow).unwrap();
    let second = run(&home, &spec).await;
    let k2 = setup_cache_key(&second.cache[0]);
    assert_eq!(
        (
            second.cache[0].as_str(),
            second.commands_run,
            second.seen.as_str(),
            index.requests().len()
        ),
        (
            format!("not in the setup cache (key {k2}); the setup commands run").as_str(),
            1,
            "refused\n",
            2
        ),
        "{:?}",
        second.cache
    );
    assert_ne!(k2, k);
    // Each profile's next job restores what was made under its own rules.
    std::fs::write(&profile, &wide).unwrap();
    let third = run(&home, &spec).await;
    assert_eq!(
        (third.commands_run, third.seen.as_str()),
        (0, page.as_str())
    );
}

/// A setup that ignores its errors (`cmd || true`) exits 0 on a full
/// disk, its output partial: a setup whose last command takes the job
/// past `limits.max_disk_bytes` and exits 0 at once (before the disk
/// watcher's next walk) stores nothing, the event naming the limit, and
/// the job fails past it, where its output was stored and restored to the
/// next job (the store ran before any walk saw it).
#[tokio::test(flavor = "multi_thread")]
async fn a_setup_past_the_jobs_disk_limit_is_not_stored() {
    let home = Home::new();
    let limit = 1 << 20;
    let spec = spec_with(
        &home,
        "process",
        &["mkdir deps && (head -c 4194304 /dev/urandom > deps/part || true)"],
        "",
    );
    let text = std::fs::read_to_string(&spec).unwrap();
    let text = text.replacen(
        "[limits]\n",
        &format!("[limits]\nmax_disk_bytes = {limit}\n"),
        1,
    );
    std::fs::write(&spec, text).unwrap();
    let out = home
        .paddock(&["run", "--json", "--keep", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    let events = home.store().await.events(&rec.id, 0).await.unwrap();
    let cache: Vec<String> = setup_cache_statuses(&events)
        .into_iter()
        .map(|d| match d.split_once(" to its directory (") {
            // The bytes seen vary with the file system.
            Some((head, _)) => format!("{head} to its directory (…"),
            None => d,
        })
        .collect();
    let key = cache
        .first()
        .map(|d| setup_cache_key(d))
        .unwrap_or_default();
    let stored: Vec<String> = std::fs::read_dir(home.jobs().join(".setup-cache"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n != ".lock")
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        (
            rec.status,
            rec.reason
                .as_deref()
                .is_some_and(|r| r.starts_with(&format!(
                    "the job wrote more than limits.max_disk_bytes ({limit} bytes)"
                ))),
            cache,
            stored
        ),
        (
            paddock_protocol::JobStatus::Failed,
            true,
            vec![
                format!("not in the setup cache (key {key}); the setup commands run"),
                format!(
                    "not stored in the setup cache (key {key}): the job wrote more than \
                     limits.max_disk_bytes ({limit} bytes) to its directory (…"
                ),
            ],
            Vec::<String>::new()
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The length and allocated bytes of the file at `path`.
fn length_and_held(path: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt as _;
    let m = std::fs::symlink_metadata(path).unwrap();
    (m.len(), m.blocks() * 512)
}

/// A setup's sparse file (`truncate -s 256M`, a few bytes of data in it:
/// no disk held, so nothing against `limits.max_disk_bytes`) is stored
/// and restored sparse, its data where it was: the cache's copy and the
/// next job's hold its data's blocks, not its length, where the store
/// wrote the file's zeros into the cache (256 MB of the host's disk from
/// a job allowed 16 MB) and the restore into the next job.
#[tokio::test(flavor = "multi_thread")]
async fn a_sparse_file_from_setup_is_stored_and_restored_sparse() {
    let home = Home::new();
    let len: u64 = 256 << 20;
    let limit: u64 = 16 << 20;
    let spec = spec_running(
        &home,
        "process",
        "exec 2>/dev/null; stat -c '%s %b %B' deps/sparse > \"$HOME/seen\"; tail -c 5 deps/sparse >> \"$HOME/seen\"",
        &[&format!(
            "mkdir deps && truncate -s {} deps/sparse && printf tail >> deps/sparse",
            len - 4
        )],
        "",
    );
    let text = std::fs::read_to_string(&spec).unwrap();
    let text = text.replacen(
        "[limits]\n",
        &format!("[limits]\nmax_disk_bytes = {limit}\n"),
        1,
    );
    std::fs::write(&spec, text).unwrap();
    let first = run(&home, &spec).await;
    let cache = home.jobs().join(".setup-cache");
    let entry = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("work/deps/sparse").exists())
        .unwrap();
    let (stored_len, stored_held) = length_and_held(&entry.join("work/deps/sparse"));
    let second = run(&home, &spec).await;
    // `stat`'s length, blocks and block size as the engine saw them.
    let seen = |r: &Run| -> (u64, bool, String) {
        let (line, tail) = r.seen.split_once('\n').unwrap_or((&r.seen, ""));
        let parts: Vec<u64> = line
            .split(' ')
            .map(|n| n.trim().parse().unwrap_or(u64::MAX))
            .collect();
        match parts.as_slice() {
            [len, blocks, size] => (*len, blocks * size < 1 << 20, tail.to_string()),
            _ => (0, false, r.seen.clone()),
        }
    };
    assert_eq!(
        (
            seen(&first),
            second.commands_run,
            seen(&second),
            stored_len,
            stored_held < 1 << 20
        ),
        (
            (len, true, "\0tail".to_string()),
            0,
            (len, true, "\0tail".to_string()),
            len,
            true
        ),
        "the cache's copy holds {stored_held} bytes; {:?}",
        second.cache
    );
}

/// The host's tools outside the system directories (the config file's
/// `[jobs]`: a directory on every job's PATH, a path bound read-only
/// into its sandbox, a variable naming it) reach a job's setup commands
/// and its engine on both rungs, where the job's PATH held the engine's,
/// node's and the system directories alone and a rustup `cargo` or a
/// `/usr/local/go/bin/go` was `not found` (exit 127).
async fn the_hosts_tools_reach_setup_and_the_engine_on(rung: &str) {
    let home = Home::new();
    let bin = home.path().join("tools/bin");
    let share = home.path().join("tools/share");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&share).unwrap();
    std::fs::write(share.join("data"), "toolchain data\n").unwrap();
    let tool = bin.join("mytool");
    std::fs::write(&tool, "#!/bin/sh\necho \"mytool ran from $0\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    home.write_config(&format!(
        "[jobs]\npath = [\"{}\"]\nread_only = [\"{}\"]\nenv = {{ MYTOOL_HOME = \"{}\" }}\n",
        bin.display(),
        share.display(),
        share.display()
    ));
    let spec = spec_running(
        &home,
        rung,
        "exec 2>/dev/null; mytool > \"$HOME/seen\"; cat \"$MYTOOL_HOME/data\" deps/setup-saw >> \"$HOME/seen\"",
        &["mkdir deps && mytool > deps/setup-saw && cat \"$MYTOOL_HOME/data\" >> deps/setup-saw"],
        "",
    );
    let first = run(&home, &spec).await;
    let ran = format!("mytool ran from {}\n", tool.display());
    assert_eq!(
        (first.commands_run, first.seen),
        (1, format!("{ran}toolchain data\n{ran}toolchain data\n")),
        "{rung}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_hosts_tools_reach_setup_and_the_engine() {
    the_hosts_tools_reach_setup_and_the_engine_on("process").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn on_the_sandbox_rung_the_hosts_tools_reach_setup_and_the_engine() {
    if !sandbox_available() {
        return;
    }
    the_hosts_tools_reach_setup_and_the_engine_on("sandbox").await;
}

/// A `[jobs]` path missing on this host stops `paddock run` before any
/// job, exit 2, naming the file, the key and the path.
#[tokio::test(flavor = "multi_thread")]
async fn a_hosts_tool_directory_that_is_not_there_stops_the_run_naming_it() {
    let home = Home::new();
    home.write_config("[jobs]\npath = [\"/no/such/paddock-tools/bin\"]\n");
    let spec = spec_with(&home, "process", SETUP, "");
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    // No job's directory made.
    let jobs_made = std::fs::read_dir(home.jobs()).map_or(0, |d| {
        d.flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("job-"))
            .count()
    });
    let said = stderr.lines().find(|l| l.contains("jobs.path")).map(|l| {
        let at = l.find("config file ").unwrap_or(0);
        let end = l.find(": jobs.path").unwrap_or(at);
        format!("{}config file FILE{}", &l[..at], &l[end..])
    });
    assert_eq!(
        (out.status.code(), said.as_deref(), jobs_made),
        (
            Some(2),
            Some("paddock: config file FILE: jobs.path: /no/such/paddock-tools/bin does not exist on this host (docs/cli.md#the-hosts-tools-jobs)"),
            0
        ),
        "{stderr}"
    );
}

/// A setup command whose background work (a download, an install: here
/// a subshell that wrote `partial` and sleeps) was still running when it
/// exited 0 is warned about, naming it and how many processes its rung
/// killed then, and what the setup made is not stored (the declining
/// reason says why), so the next job runs the commands again, where the
/// partial output was stored and restored forever after. The count
/// comes from the rung's supervisor or the sandbox's PID 1 on a pipe the
/// command never holds: a command that writes a report of none to every
/// descriptor it can reach (its own, its parent's through `/proc`),
/// prints one, and closes the descriptors it inherited is counted all the
/// same; run as root on the `process` rung, where it can open its
/// supervisor's descriptors, what it wrote beside the supervisor's count
/// makes that count unreadable, which declines the store as well.
async fn background_work_cut_off_is_not_stored_on(rung: &str) {
    let home = Home::new();
    let cut_off = "mkdir -p deps; (echo partial > deps/out; exec sleep 30) & sleep 0.5";
    let forger = "none='L\\000\\000\\000\\000\\000\\000\\000\\000'; \
         for f in /proc/$PPID/fd/* /proc/self/fd/*; do printf \"$none\" 2>/dev/null > \"$f\"; done; \
         printf \"$none\"; echo 'left 0 process(es)'; \
         exec 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-; (exec sleep 30) & sleep 0.2";
    let spec = spec_running(&home, rung, "true", &[cut_off, forger], "");
    let left = |i: usize, line: &str| {
        format!("setup command {i} of 2 (`{line}`) left 1 process(es) running when it exited")
    };
    let warned = |i: usize, line: &str| {
        format!(
            "{}; they were killed (a setup command's background work ends with it: `wait` for \
             it before the command ends)",
            left(i, line)
        )
    };
    // The forger's: counted, or (root on the `process` rung) unreadable.
    let forged = if rung == "process" && nix::unistd::geteuid().is_root() {
        (
            format!(
                "what its rung said of the processes setup command 2 of 2 (`{forger}`) left \
                 running is no single count"
            ),
            format!(
                "setup command 2 of 2 (`{forger}`) exited, but what its rung said of the \
                 processes it left running is no single count (something else wrote there); \
                 whatever it left was killed"
            ),
        )
    } else {
        (left(2, forger), warned(2, forger))
    };
    for attempt in ["first", "second"] {
        let (rec, _) = run_kept_script_job(&home, &spec).await;
        let events = home.store().await.events(&rec.id, 0).await.unwrap();
        let cache = setup_cache_statuses(&events);
        let key = cache
            .first()
            .map(|d| setup_cache_key(d))
            .unwrap_or_default();
        let warnings: Vec<String> = events
            .iter()
            .filter_map(|e| match &e.body {
                EventBody::Error {
                    message,
                    source,
                    fatal: false,
                } if message.starts_with("setup command") => {
                    Some(format!("{}: {message}", source.as_deref().unwrap_or("")))
                }
                _ => None,
            })
            .collect();
        let commands_run = events
            .iter()
            .filter(|e| matches!(&e.body, EventBody::ToolCall { tool, .. } if tool == "setup"))
            .count();
        assert_eq!(
            (cache, warnings, commands_run),
            (
                vec![
                    format!("not in the setup cache (key {key}); the setup commands run"),
                    format!(
                        "not stored in the setup cache (key {key}): its commands exited 0, but \
                         {} and {}: what was left running was killed then, and what it was \
                         making in the background (a download, an install) may be partial; the \
                         next job runs the setup again",
                        left(1, cut_off),
                        forged.0
                    ),
                ],
                vec![
                    format!("paddock: {}", warned(1, cut_off)),
                    format!("paddock: {}", forged.1),
                ],
                2
            ),
            "{rung}, {attempt} job"
        );
        std::fs::remove_dir_all(home.jobs().join(&rec.id)).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn background_work_cut_off_is_not_stored_on_the_process_rung() {
    background_work_cut_off_is_not_stored_on("process").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn background_work_cut_off_is_not_stored_in_the_sandbox() {
    if !sandbox_available() {
        return;
    }
    background_work_cut_off_is_not_stored_on("sandbox").await;
}

/// A setup command run as root on the `process` rung, which can open its
/// supervisor's descriptors, writes a report of none on each, stops its
/// supervisor, asks it to end (SIGTERM) and exits 0, a process it left
/// letting the supervisor go on once it exited: the supervisor, told to
/// stop, still writes its own count, so what the runner reads is two
/// reports, no single count, and the setup is not stored, where a
/// supervisor that wrote only when its command exited by itself left the
/// forged report alone, read as none left, and the setup stored.
#[tokio::test(flavor = "multi_thread")]
async fn a_forged_report_and_a_stopped_supervisor_do_not_get_a_setup_stored() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipping: only root can open its supervisor's descriptors");
        return;
    }
    let home = Home::new();
    let line = "none='L\\000\\000\\000\\000\\000\\000\\000\\000'; sup=$PPID; \
         for f in /proc/$sup/fd/*; do printf \"$none\" 2>/dev/null > \"$f\"; done; \
         mkdir -p deps; echo partial > deps/out; \
         (sleep 0.5; kill -CONT $sup; exec sleep 30) & kill -STOP $sup; kill -TERM $sup; exit 0";
    let spec = spec_running(&home, "process", "true", &[line], "");
    for attempt in ["first", "second"] {
        let (rec, _) = run_kept_script_job(&home, &spec).await;
        let events = home.store().await.events(&rec.id, 0).await.unwrap();
        let cache = setup_cache_statuses(&events);
        let key = cache
            .first()
            .map(|d| setup_cache_key(d))
            .unwrap_or_default();
        assert_eq!(
            cache,
            vec![
                format!("not in the setup cache (key {key}); the setup commands run"),
                format!(
                    "not stored in the setup cache (key {key}): its commands exited 0, but what \
                     its rung said of the processes setup command 1 of 1 (`{line}`) left running \
                     is no single count: what was left running was killed then, and what it was \
                     making in the background (a download, an install) may be partial; the next \
                     job runs the setup again"
                ),
            ],
            "{attempt} job"
        );
        std::fs::remove_dir_all(home.jobs().join(&rec.id)).unwrap();
    }
}

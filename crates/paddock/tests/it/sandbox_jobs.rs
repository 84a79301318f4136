//! Jobs on the `sandbox` rung with a stand-in engine: the timeout kills
//! everything the engine started, even a daemon that left the process
//! group (on both rungs: the `process` rung's supervisor kills it too), and
//! the engine sees the sandbox, not the host; the default pids cap holds;
//! where no sandbox can start (inside one), `auto` falls back to `process`
//! and says why, and an explicit `sandbox` is refused (a failed probe is
//! never kept); a successful probe is kept in the host directory, taken
//! by the next job while fresh and under the same key, and cleared by a
//! helper that ended in its set-up (not by the engine's own exit 125,
//! which fails the job as the engine's; the set-up failure fails it with
//! the helper's words); on a real kernel, an `auto` job whose kept success
//! no longer holds (its parent user namespace's limit on namespaces set to
//! 0, which the key cannot read) moves to `process` at its first launch.
//! A setup command
//! that leaves the engine's config (or its directory) as a link to the
//! host, or as a FIFO, does not have Paddock write through it or hang on
//! it when it writes the engine's config after setup; an engine that
//! leaves its rollout directory as a link to the host does not have
//! Paddock read the host's rollouts into its denial events. A jobs
//! directory on /dev/shm (a RAM disk) runs its jobs in the sandbox.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use paddock_protocol::JobStatus;
use paddock_test_support::prelude::*;

/// A job whose `codex` is `script`, with a 1 s timeout.
fn stand_in_job(home: &Home, script: &str, sandbox: bool) -> std::path::PathBuf {
    let rung = if sandbox { "sandbox" } else { "process" };
    paddock_test_support::jobs::stand_in_job(home.path(), rung, script, 1)
}

/// A stand-in job spec's `text` with its engine binary (`engine.binary`)
/// pinned to `binary` instead.
fn with_binary(text: &str, binary: &std::path::Path) -> String {
    let pinned = text.lines().find(|l| l.starts_with("binary = ")).unwrap();
    text.replace(pinned, &format!("binary = \"{}\"", binary.display()))
}

/// `paddock run --json SPEC` with `env` in `home`, for a job admission
/// refuses: its exit code, its stderr, the jobs in the store and the job
/// directories made (the jobs directory's own files aside).
async fn run_refused(
    home: &Home,
    spec: &std::path::Path,
    env: &[(&str, &str)],
) -> (Option<i32>, String, usize, usize) {
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], env)
        .await;
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).to_string(),
        home.store().await.jobs(10).await.unwrap().len(),
        std::fs::read_dir(home.jobs())
            .map(|d| {
                d.map(|e| e.unwrap())
                    .filter(|e| e.file_type().unwrap().is_dir())
                    .count()
            })
            .unwrap_or(0),
    )
}

async fn daemon_survives(sandbox: bool) -> bool {
    let home = Home::new();
    let spec = stand_in_job(
        &home,
        "(setsid sh -c 'sleep 3; touch \"$TMPDIR/survivor\"' &)\nsleep 30",
        sandbox,
    );
    let out = home
        .paddock(&["run", "--json", "--keep", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    assert_eq!(
        (out.status.code(), rec.status),
        (Some(4), JobStatus::TimedOut)
    );
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    let survived = home.jobs().join(&rec.id).join("tmp/survivor").exists();
    std::fs::remove_dir_all(home.jobs().join(&rec.id)).unwrap();
    survived
}

#[tokio::test(flavor = "multi_thread")]
async fn the_timeout_kills_a_daemon_that_left_the_process_group() {
    if !paddock_test_support::prelude::sandbox_available() {
        return;
    }
    // On the process rung too: the supervisor kills it (supervise.rs).
    assert_eq!(
        (daemon_survives(false).await, daemon_survives(true).await),
        (false, false)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_engine_sees_the_sandbox_not_the_host() {
    if !paddock_test_support::prelude::sandbox_available() {
        return;
    }
    let home = Home::new();
    let spec = stand_in_job(
        &home,
        "{ hostname; id -u; ls /; test -e /etc/machine-id && echo machine-id; \
         cat /proc/1/environ >/dev/null 2>&1 && echo pid1-environ-readable; \
         ( echo x > /usr/x ) 2>/dev/null && echo usr-writable; \
         echo ok > \"$TMPDIR/w\" && echo tmp-writable; } > \"$HOME/seen\" 2>&1",
        true,
    );
    let out = home
        .paddock(&["run", "--json", "--keep", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    let seen = std::fs::read_to_string(home.jobs().join(&rec.id).join("home/seen")).unwrap();
    let uid = nix::unistd::getuid().as_raw();
    assert_eq!(
        seen,
        format!(
            "paddock\n{uid}\nbin\ndev\netc\nlib\nlib64\nopt\nproc\nsbin\ntmp\nusr\ntmp-writable\n"
        )
    );
    std::fs::remove_dir_all(home.jobs().join(&rec.id)).unwrap();
}

/// A jobs directory and data directory on /dev/shm (a RAM disk): the
/// job's work, home and tmp are under the view's own /dev, which the
/// sandbox builds itself (a private /dev/shm among it) and which hid them
/// (the job failed at launch, `change directory to <workspace>: ENOENT`);
/// they are bound once it is built, and nothing else of the host's
/// /dev/shm is seen (not the data directory, not a file beside them).
/// The stand-in engine runs its script and prints no turn: the job ends
/// for that, its work kept.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_whose_jobs_directory_is_on_dev_shm_runs_in_the_sandbox() {
    if !paddock_test_support::prelude::sandbox_available() {
        return;
    }
    let home = Home::new();
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    let s = shm.path().canonicalize().unwrap();
    let (data, jobs) = (s.join("data"), s.join("jobs"));
    std::fs::write(s.join("host-secret"), "secret\n").unwrap();
    let spec = paddock_test_support::jobs::stand_in_job(
        home.path(),
        "sandbox",
        &format!(
            "echo hello > hello.txt; {{ ls -A {s}; ls -A /dev/shm; }} > \"$HOME/seen\"",
            s = s.display()
        ),
        30,
    );
    let out = tokio::process::Command::new(paddock_test_support::home::paddock_bin())
        .arg("--data-dir")
        .arg(&data)
        .arg("--jobs-dir")
        .arg(&jobs)
        .args(["run", "--json", "--keep", spec.to_str().unwrap()])
        .env_remove("PADDOCK_DB")
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    let rec = record(&out);
    let root = jobs.join(&rec.id);
    let seen = std::fs::read_to_string(root.join("home/seen")).unwrap_or_default();
    paddock::workspace::overlay::unmount_work(&root).unwrap();
    assert_eq!(
        (rec.status, rec.reason, rec.changed_files, seen),
        (
            JobStatus::Failed,
            Some("the engine exited without finishing its turn".to_string()),
            vec!["hello.txt".to_string()],
            format!("jobs\n{}\n", s.file_name().unwrap().to_str().unwrap())
        )
    );
}

/// An engine installed directly in /tmp or /dev/shm (its binary there,
/// so its directory is that part of the view itself, which the sandbox
/// makes its own and refuses to bind): the job is refused at admission,
/// naming the path, the spec field it came from and what to do, before
/// any record or workspace exists; it was admitted, recorded and
/// provisioned, and failed at its launch (`plan the view: /tmp cannot be
/// bound into the sandbox`).
#[tokio::test(flavor = "multi_thread")]
async fn an_engine_the_sandbox_cannot_bind_is_refused_before_the_job_exists() {
    if !paddock_test_support::prelude::sandbox_available() {
        return;
    }
    let home = Home::new();
    let spec = stand_in_job(&home, &paddock_test_support::jobs::finishing("true"), true);
    let script = std::fs::read(home.path().join("fakebin/codex")).unwrap();
    let mut got = Vec::new();
    let mut want = Vec::new();
    for (dir, what) in [
        ("/tmp", "the job's private, size-capped tmpfs"),
        ("/dev/shm", "the job's private shared memory"),
    ] {
        let engine = tempfile::Builder::new()
            .prefix("paddock-codex-")
            .tempfile_in(dir)
            .unwrap()
            // No descriptor of the test's left open on it (ETXTBSY).
            .into_temp_path();
        std::fs::write(&engine, &script).unwrap();
        std::fs::set_permissions(&engine, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let placed = home.path().join("placed.toml");
        std::fs::write(
            &placed,
            with_binary(&std::fs::read_to_string(&spec).unwrap(), &engine),
        )
        .unwrap();
        got.push(run_refused(&home, &placed, &[]).await);
        want.push((
            Some(2),
            format!(
                "paddock: job refused before start: the sandbox cannot bind engine codex's \
                 directories (its package tree, its own directory and node's, read-only; \
                 engine.binary {engine} in job spec {placed}): {dir} cannot be bound into the \
                 sandbox: it is {dir}, \
                 which the sandbox makes its own ({what}); give a directory under {dir} or \
                 elsewhere (install the engine in a directory of its own and set engine.binary \
                 or PATH to it)\n",
                engine = engine.display(),
                placed = placed.display()
            ),
            0,
            0,
        ));
    }
    assert_eq!(got, want);
}

/// A read-only path of a sandboxed job's view that would show the job
/// what is not its own is refused at admission, naming it, what it would
/// show and the setting it comes from, before any record or workspace
/// exists: an engine binary directly in a directory holding Paddock's
/// jobs directory (read-only, that bind showed every job's workspace and
/// its sockets, and a Unix socket is connected to through a read-only
/// mount: the job reached its own broker's socket so, by hand), or in the
/// home directory of the user Paddock runs as (its keys), or beside the
/// file the job's push token is read from; and a `[jobs] read_only` path
/// holding Paddock's data (the store, the artifacts). Before, each was
/// bound and the job ran.
#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_path_that_would_show_the_job_what_is_not_its_own_is_refused() {
    if !paddock_test_support::prelude::sandbox_available() {
        return;
    }
    let home = Home::new();
    let spec = stand_in_job(&home, &paddock_test_support::jobs::finishing("true"), true);
    let text = std::fs::read_to_string(&spec).unwrap();
    let fakebin = home.path().join("fakebin");
    let script = std::fs::read(fakebin.join("codex")).unwrap();
    // The engine directly in the test's home, which holds the jobs directory.
    let loose = home.path().join("codex");
    std::fs::write(&loose, &script).unwrap();
    std::fs::set_permissions(&loose, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let key = fakebin.join("push.token");
    std::fs::write(&key, "sk-test-not-real").unwrap();
    let write = |name: &str, text: String| {
        let path = home.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let in_home = write("in-home.toml", with_binary(&text, &loose));
    let keyed = write(
        "keyed.toml",
        format!(
            "{text}\n[results.push]\nurl = \"https://git.example/acme/widgets.git\"\ntoken = \
             \"file:{}\"\n",
            key.display()
        ),
    );
    let data = home.data().canonicalize().unwrap_or(home.data());
    let cases = vec![
        (in_home.as_path(), vec![], ""),
        (
            spec.as_path(),
            vec![("HOME", fakebin.display().to_string())],
            "",
        ),
        (keyed.as_path(), vec![], ""),
        (spec.as_path(), vec![], "[jobs]\nread_only = [\"DATA\"]\n"),
    ];
    let mut got = Vec::new();
    for (spec, env, config) in &cases {
        std::fs::create_dir_all(&data).unwrap();
        home.write_config(&config.replace("DATA", &data.display().to_string()));
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        got.push(run_refused(&home, spec, &env).await);
    }
    let root = home.path().canonicalize().unwrap();
    let fakebin = fakebin.canonicalize().unwrap();
    let engine = |binary: &std::path::Path, file: &std::path::Path| {
        format!(
            "paddock: job refused before start: the sandbox cannot bind engine codex's \
             directories (its package tree, its own directory and node's, read-only; \
             engine.binary {} in job spec {})",
            binary.display(),
            file.display()
        )
    };
    let advice =
        "(install the engine in a directory of its own and set engine.binary or PATH to it)";
    let refused = |text: String| (Some(2), format!("{text}\n"), 0, 0);
    assert_eq!(
        got,
        vec![
            refused(format!(
                "{}: {} would show the job, read-only, what is not its own: it holds {} \
                 (Paddock's jobs directory: every job's workspace, and its broker and egress \
                 sockets) {advice}",
                engine(&loose, &in_home),
                root.display(),
                root.join("jobs").display()
            )),
            refused(format!(
                "{}: {} would show the job, read-only, what is not its own: it is {} (the home \
                 directory of the user Paddock runs as, with its keys and credentials) {advice}",
                engine(&home.path().join("fakebin/codex"), &spec),
                fakebin.display(),
                fakebin.display()
            )),
            refused(format!(
                "{}: {} would show the job, read-only, what is not its own: it holds {} (the \
                 file results.push.token is read from) {advice}",
                engine(&home.path().join("fakebin/codex"), &keyed),
                fakebin.display(),
                fakebin.join("push.token").display()
            )),
            refused(format!(
                "paddock: job refused before start: the sandbox cannot bind the host's tools \
                 (jobs.read_only in the config file, read-only): {} would show the job, \
                 read-only, what is not its own: it holds {} (Paddock's artifacts: every job's \
                 patch, closeout and output) (name the tools' own directories)",
                data.display(),
                data.join("artifacts").display()
            )),
        ]
    );
}

/// The system directories every sandbox binds read-only (`/usr`, `/opt`,
/// /etc's shared files) are read-only paths of every job's view: a place
/// no such path may show that lies in one of them is refused at
/// admission as the job's own paths are, naming the system bind, before
/// any record or workspace exists. Here the home directory of the user
/// Paddock runs as is under `/usr` (a service user's, as Fedora's apache
/// has `/usr/share/httpd`; a jobs directory under `/opt`, a key under
/// `/usr/local/etc`: the same). Before, the check looked at the engine's,
/// the tools' and the hook's paths alone, and the job ran with that home
/// in its view.
#[tokio::test(flavor = "multi_thread")]
async fn a_private_place_inside_the_system_directories_is_refused() {
    let inside = std::path::Path::new("/usr/share");
    if !paddock_test_support::prelude::sandbox_available()
        || !std::fs::symlink_metadata(inside).is_ok_and(|m| m.is_dir())
    {
        return;
    }
    let home = Home::new();
    let spec = stand_in_job(&home, &paddock_test_support::jobs::finishing("true"), true);
    let got = run_refused(&home, &spec, &[("HOME", "/usr/share")]).await;
    assert_eq!(
        got,
        (
            Some(2),
            "paddock: job refused before start: the sandbox binds the system directories into \
             every job, read-only (/usr, /bin, /sbin, /lib…, /opt and /etc's shared files): /usr \
             would show the job, read-only, what is not its own: it holds /usr/share (the home \
             directory of the user Paddock runs as, with its keys and credentials) (keep \
             Paddock's directories, its user's home and credentials' files out of them)\n"
                .to_string(),
            0,
            0
        )
    );
}

/// The home directory of the user Paddock runs as is its passwd entry's
/// as well as `HOME`'s: with `HOME` set elsewhere, a `[jobs] read_only`
/// path that is the passwd entry's home (root's `/root` in CI) is refused
/// at admission all the same, naming it. Before, only `HOME` was looked
/// at, and the real home, its keys with it, was bound.
#[tokio::test(flavor = "multi_thread")]
async fn the_real_home_is_refused_whatever_home_says() {
    if !paddock_test_support::prelude::sandbox_available() {
        return;
    }
    let user = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap();
    let real = user.dir.canonicalize().ok().filter(|d| d.is_dir());
    let Some(real) = real else {
        // Not a prerequisite of the host: a user without a home (nobody's
        // /nonexistent) has none to protect.
        eprintln!(
            "skipped: the user's passwd home {} is not a directory here",
            user.dir.display()
        );
        return;
    };
    let home = Home::new();
    let spec = stand_in_job(&home, &paddock_test_support::jobs::finishing("true"), true);
    let elsewhere = home.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    home.write_config(&format!("[jobs]\nread_only = [\"{}\"]\n", real.display()));
    let got = run_refused(&home, &spec, &[("HOME", elsewhere.to_str().unwrap())]).await;
    assert_eq!(
        got,
        (
            Some(2),
            format!(
                "paddock: job refused before start: the sandbox cannot bind the host's tools \
                 (jobs.read_only in the config file, read-only): {real} would show the job, \
                 read-only, what is not its own: it is {real} (the home directory of the user \
                 Paddock runs as, with its keys and credentials) (name the tools' own \
                 directories)\n",
                real = real.display()
            ),
            0,
            0
        )
    );
}

/// The stores of keys and tokens inside the user's home are private too
/// (`runner/user_home.rs`), where the home was private only as a whole: a
/// `[jobs] read_only` path holding `~/.config/gcloud`, or inside `~/.ssh`,
/// is refused at admission naming the store, nothing recorded or made; a
/// path elsewhere in the home, beside them, is bound and the job runs.
/// Before, both refused paths were bound and the job read the keys.
#[tokio::test(flavor = "multi_thread")]
async fn the_key_stores_inside_the_home_are_refused() {
    if !paddock_test_support::prelude::sandbox_available() {
        return;
    }
    let home = Home::new();
    let user = home.path().join("user");
    for dir in [".config/gcloud", ".ssh/config.d", ".config/tool"] {
        std::fs::create_dir_all(user.join(dir)).unwrap();
    }
    std::fs::write(user.join(".ssh/id_ed25519"), "key").unwrap();
    let user = user.canonicalize().unwrap();
    let spec = stand_in_job(&home, &paddock_test_support::jobs::finishing("true"), true);
    let env = [("HOME", user.to_str().unwrap())];
    let refused = |bind: &str, how: &str, place: &str, what: &str| {
        (
            Some(2),
            format!(
                "paddock: job refused before start: the sandbox cannot bind the host's tools \
                 (jobs.read_only in the config file, read-only): {bind} would show the job, \
                 read-only, what is not its own: {how} {place} ({what}, ~/{rel} of the user \
                 Paddock runs as) (name the tools' own directories)\n",
                bind = user.join(bind).display(),
                place = user.join(place).display(),
                rel = place,
            ),
            0,
            0,
        )
    };
    let mut got = Vec::new();
    for bind in [".config", ".ssh/config.d"] {
        home.write_config(&format!(
            "[jobs]\nread_only = [\"{}\"]\n",
            user.join(bind).display()
        ));
        got.push(run_refused(&home, &spec, &env).await);
    }
    assert_eq!(
        got,
        vec![
            refused(
                ".config",
                "it holds",
                ".config/gcloud",
                "Google Cloud credentials"
            ),
            refused(".ssh/config.d", "it is inside", ".ssh", "SSH keys"),
        ]
    );
    home.write_config(&format!(
        "[jobs]\nread_only = [\"{}\"]\n",
        user.join(".config/tool").display()
    ));
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &env)
        .await;
    assert_eq!(
        (out.status.code(), record(&out).status),
        (Some(0), JobStatus::Done),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `paddock doctor` says, before any job, that the engine on PATH is
/// loose in the home directory and that a sandboxed job running it would
/// be refused (the same words as the refusal), with the fix, and exits 1;
/// an engine in a directory of its own passes. Before, the first job
/// said so.
#[tokio::test(flavor = "multi_thread")]
async fn doctor_names_an_engine_whose_view_would_be_refused() {
    let home = Home::new();
    let user = home.path().join("user");
    let own = home.path().join("engines/bin");
    for dir in [&user, &own] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let user = user.canonicalize().unwrap();
    let own = own.canonicalize().unwrap();
    for (dir, name) in [(&user, "codex"), (&own, "claude")] {
        paddock_test_support::script::write_script(&dir.join(name), "#!/bin/sh\necho 0.0.0\n");
    }
    let path = format!(
        "{}:{}:/usr/local/bin:/usr/bin:/bin",
        user.display(),
        own.display()
    );
    let out = home
        .paddock(
            &["doctor", "--json"],
            &[("HOME", user.to_str().unwrap()), ("PATH", &path)],
        )
        .await;
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let views: Vec<&serde_json::Value> = report["setup"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"].as_str().unwrap().starts_with("view of "))
        .collect();
    let codex = user.join("codex");
    assert_eq!(
        (out.status.code(), views),
        (
            Some(1),
            vec![
                &serde_json::json!({
                    "name": "view of codex",
                    "ok": false,
                    "detail": format!(
                        "a sandboxed job running it would be refused: the sandbox cannot bind \
                         engine codex's directories (its package tree, its own directory and \
                         node's, read-only; `codex` found on PATH at {codex}): {user} would show \
                         the job, read-only, what is not its own: it is {user} (the home \
                         directory of the user Paddock runs as, with its keys and credentials) \
                         (install the engine in a directory of its own and set engine.binary or \
                         PATH to it)",
                        codex = codex.display(),
                        user = user.display()
                    ),
                    "fix": "install the engine in a directory of its own (npm install --prefix \
                            DIR) and put its bin directory on PATH (docs/sandbox.md, \"What a \
                            read-only path may not show\")",
                }),
                &serde_json::json!({
                    "name": "view of claude",
                    "ok": true,
                    "detail": format!(
                        "{}: its directories bind read-only into a job's sandbox and show it \
                         nothing of this host's own",
                        own.join("claude").display()
                    ),
                    "fix": null,
                }),
            ]
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every sandboxed job has a pids cap (`launcher::SANDBOX_PIDS`, 1024) even
/// without a host profile: a stand-in engine forking sleepers is stopped
/// short of it (the helper's threads, PID 1 and the shell count too). The
/// cap itself is attacked with its unconfined twin in escape.rs.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_cannot_fork_past_the_default_pids_cap() {
    if !paddock_test_support::prelude::sandbox_available() {
        return;
    }
    if !root_available("applying a job's cgroup caps in this test") {
        return;
    }
    let home = Home::new();
    let spec = stand_in_job(
        &home,
        "i=0; while [ $i -lt 1100 ]; do sleep 60 & i=$((i+1)); echo $i > \"$HOME/forked\"; done",
        false,
    );
    // The default rung, with time to fork.
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("isolation = \"process\"\n", "")
        .replace("timeout_secs = 1\n", "timeout_secs = 60\n");
    std::fs::write(&spec, text).unwrap();
    let out = home
        .paddock(&["run", "--json", "--keep", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    assert_eq!(rec.isolation, "sandbox");
    let forked: u64 = std::fs::read_to_string(home.jobs().join(&rec.id).join("home/forked"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!((1000..1024).contains(&forked), "forked {forked}");
    std::fs::remove_dir_all(home.jobs().join(&rec.id)).unwrap();
}

/// A host profile on the sandbox rung: `mem_limit_mb` and `cpu_limit` are
/// enforced (cgroups), so nothing is degraded, and the engine's deny hook
/// (`paddock hook`, run inside the sandbox) still refuses denied commands.
async fn profile_is_enforced_in_the_sandbox(engine: &str) {
    if paddock_test_support::prelude::engine(engine).is_none()
        || !paddock_test_support::prelude::sandbox_available()
    {
        return;
    }
    if !root_available("applying a job's cgroup caps in this test") {
        return;
    }
    let home = Home::new();
    let repo = repo(home.path());
    let scenario = "[[turn]]\ntext = \"lifting the rules\"\n[[turn.action]]\ntype = \"shell\"\ncommand = \"echo {} > $HOME/.claude/paddock-policy.json; echo > $HOME/.codex/rules/default.rules; true\"\n\n\
        [[turn]]\ntext = \"trying\"\n[[turn.action]]\ntype = \"shell\"\ncommand = \"touch denied.txt\"\n\n\
        [[turn]]\ntext = \"allowed\"\n[[turn.action]]\ntype = \"shell\"\ncommand = \"touch allowed.txt\"\n\n\
        [[turn]]\ntext = \"Done.\"\n";
    std::fs::write(
        home.path().join("profile.json"),
        serde_json::json!({
            "id": "sandbox-caps",
            "build_policy": "ci-only",
            "verification": "dev-probe",
            "deny_commands": ["touch denied.txt"],
            "mem_limit_mb": 2048,
            "cpu_limit": "100%"
        })
        .to_string(),
    )
    .unwrap();
    let spec = job(home.path(), engine, &repo, SCRIPTED, Some(scenario));
    let mut text = std::fs::read_to_string(&spec).unwrap();
    text.push_str("\n[policy]\nprofile = \"profile.json\"\n");
    std::fs::write(&spec, text).unwrap();
    sandboxed(&spec);
    let out = home
        .paddock(&["run", "--json", "--keep", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    // The engine's copy of the rules could not be lifted from inside.
    let job_home = home.jobs().join(&rec.id).join("home");
    let rules = match engine {
        "codex" => std::fs::read_to_string(job_home.join(".codex/rules/default.rules")).unwrap(),
        _ => std::fs::read_to_string(job_home.join(".claude/paddock-policy.json")).unwrap(),
    };
    assert!(rules.contains("touch"), "rules were lifted: {rules}");
    std::fs::remove_dir_all(home.jobs().join(&rec.id)).unwrap();
    assert_eq!(
        (rec.status, rec.changed_files.clone()),
        (JobStatus::Done, vec!["allowed.txt".to_string()]),
        "reason: {:?}\nstderr: {}",
        rec.reason,
        String::from_utf8_lossy(&out.stderr)
    );
    let events = home.store().await.events(&rec.id, 0).await.unwrap();
    let policy: Vec<paddock_protocol::EventBody> = events
        .into_iter()
        .map(|e| e.body)
        .filter(|b| matches!(b, paddock_protocol::EventBody::Policy { .. }))
        .collect();
    assert_eq!(
        policy,
        vec![paddock_protocol::EventBody::Policy {
            rule: "touch denied.txt".into(),
            message: "the hook's record file, which the job could write, reports: denied `touch \
                      denied.txt` (host profile `sandbox-caps`, deny_commands)"
                .into(),
        }]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_profile_is_enforced_in_the_sandbox() {
    profile_is_enforced_in_the_sandbox("codex").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_profile_is_enforced_in_the_sandbox() {
    profile_is_enforced_in_the_sandbox("claude").await;
}

/// Runs `paddock run --json SPEC` inside Paddock's own sandbox, whose
/// seccomp filter denies new user namespaces: a host where no sandbox can
/// start, for real.
async fn run_where_no_sandbox_starts(home: &Home, spec: &std::path::Path) -> std::process::Output {
    let paddock = std::path::Path::new(env!("CARGO_BIN_EXE_paddock"));
    let home_dir = home.path().to_str().unwrap();
    tokio::process::Command::new(paddock)
        .args(["sandbox", "--rw", home_dir, "--ro"])
        .arg(paddock.parent().unwrap())
        .args(["--env", &format!("HOME={home_dir}"), "--"])
        .arg(paddock)
        .arg("--data-dir")
        .arg(home.data())
        .arg("--jobs-dir")
        .arg(home.jobs())
        .args(["run", "--json", spec.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap()
}

/// The default rung where no sandbox can start: `auto` runs the job on the
/// `process` rung and a `policy` event says why; an explicit `sandbox` is
/// refused before the job exists, naming the failed step.
#[tokio::test(flavor = "multi_thread")]
async fn auto_falls_back_and_sandbox_is_refused_where_none_starts() {
    if !paddock_test_support::prelude::sandbox_available() {
        return;
    }
    let home = Home::new();
    let spec = stand_in_job(&home, "true", false);
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("isolation = \"process\"\n", "");
    std::fs::write(&spec, &text).unwrap();
    // A root caller's first step that needs a new user namespace is the
    // idmapping of the system binds (idmap.rs), everyone else's the unshare.
    let why = if nix::unistd::geteuid().is_root() {
        "paddock sandbox: idmap user namespace (for a root caller, so that the host's \
         root-only system files stay closed to the job): EPERM: Operation not permitted"
    } else {
        "paddock sandbox: unshare the user and UTS namespaces: \
         EPERM: Operation not permitted"
    };

    let out = run_where_no_sandbox_starts(&home, &spec).await;
    let rec = record(&out);
    assert_eq!(rec.isolation, "process");
    let policy: Vec<paddock_protocol::EventBody> = home
        .store()
        .await
        .events(&rec.id, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.body)
        .filter(|b| matches!(b, paddock_protocol::EventBody::Policy { .. }))
        .collect();
    assert_eq!(
        policy,
        vec![paddock_protocol::EventBody::Policy {
            rule: "isolation".into(),
            message: format!(
                "isolation auto: running on the `process` rung (unconfined) because this host \
                 cannot start Paddock's sandbox: {why}"
            ),
        }]
    );

    // A failed probe is never kept: each run says why again.
    assert_eq!(probe_record(&home), None);

    std::fs::write(&spec, format!("isolation = \"sandbox\"\n{text}")).unwrap();
    let out = run_where_no_sandbox_starts(&home, &spec).await;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        format!(
            "paddock: isolation = \"sandbox\": this host cannot start Paddock's sandbox: {why} \
             (`paddock doctor` shows what is missing; `isolation = \"process\"` runs unconfined)"
        )
    );
}

/// The host's record of the sandbox probe's last success
/// (`rung/probe_cache.rs`) in `home`: its key and time, if there is one.
fn probe_record(home: &Home) -> Option<(String, u64)> {
    let path = home
        .path()
        .join("host")
        .join(paddock::rung::probe_cache::FILE);
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    Some((
        v["key"].as_str().unwrap().to_string(),
        v["at"].as_u64().unwrap(),
    ))
}

fn set_probe_record(home: &Home, key: &str, at: u64) {
    let path = home
        .path()
        .join("host")
        .join(paddock::rung::probe_cache::FILE);
    std::fs::write(
        path,
        serde_json::json!({ "key": key, "at": at }).to_string(),
    )
    .unwrap();
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// `paddock run` keeps the sandbox probe's success in the host directory
/// under the key of this host and binary, and the next job takes it while
/// it is fresh (the record is not written again); a stale record or one
/// under another key is probed again and replaced; a helper that ended in
/// its set-up clears it, the job's own engine exiting 125 does not.
#[tokio::test(flavor = "multi_thread")]
async fn the_sandbox_probes_success_is_kept_taken_while_fresh_and_cleared() {
    if !paddock_test_support::prelude::sandbox_available() {
        return;
    }
    let home = Home::new();
    let spec = stand_in_job(&home, "true", true);
    let run = |spec: std::path::PathBuf| {
        let home = &home;
        async move {
            let out = home
                .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
                .await;
            let rec = record(&out);
            (rec.isolation, rec.reason)
        }
    };
    let key = paddock::rung::probe_cache::key(&paddock_test_support::home::paddock_bin()).unwrap();

    assert_eq!(probe_record(&home), None);
    let before = unix_now();
    // A stand-in that prints no turn ends failed, its reason this.
    let stand_in_end = run(spec.clone()).await.1;
    assert_eq!(
        stand_in_end.as_deref(),
        Some("the engine exited without finishing its turn")
    );
    assert_eq!(
        run(spec.clone()).await,
        ("sandbox".into(), stand_in_end.clone())
    );
    let (kept, at) = probe_record(&home).unwrap();
    assert_eq!(kept, key);
    assert!((before..=unix_now()).contains(&at), "{at}");

    // Fresh: taken, not probed (a probe would write the record again).
    let earlier = unix_now() - 600;
    set_probe_record(&home, &key, earlier);
    assert_eq!(
        run(spec.clone()).await,
        ("sandbox".into(), stand_in_end.clone())
    );
    assert_eq!(probe_record(&home), Some((key.clone(), earlier)));

    // Stale, or another host's or binary's: probed again, replaced.
    for (planted, at) in [
        (key.clone(), unix_now() - 2 * 3600),
        ("another host".to_string(), unix_now()),
    ] {
        set_probe_record(&home, &planted, at);
        let before = unix_now();
        assert_eq!(
            run(spec.clone()).await,
            ("sandbox".into(), stand_in_end.clone())
        );
        let (kept, at) = probe_record(&home).unwrap();
        assert_eq!(kept, key, "after {planted:?}");
        assert!((before..=unix_now()).contains(&at), "{at}");
    }

    // The job's own engine exiting 125 (the helper's set-up failure
    // code) with the helper's words forged on stderr is the job's: the
    // sandbox started, the record stays.
    set_probe_record(&home, &key, earlier);
    paddock_test_support::jobs::stand_in_codex(
        &home.path().join("fakebin"),
        "echo 'paddock sandbox: landlock: forged' >&2; exit 125",
    );
    let (isolation, reason) = run(spec.clone()).await;
    assert_eq!(isolation, "sandbox");
    assert_eq!(
        reason.as_deref(),
        Some("the engine exited with status 125: paddock sandbox: landlock: forged")
    );
    assert_eq!(probe_record(&home), Some((key.clone(), earlier)));

    // A helper that ends in its set-up (here: a host profile's memory cap,
    // not accepted as degraded, where no cgroup can be made) fails the job
    // with its own words, not as an exit of the engine's, and clears the
    // record; the next job probes again and keeps its success.
    paddock_test_support::jobs::stand_in_codex(&home.path().join("fakebin"), "true");
    let no_cgroup = home.path().join("not-a-cgroup");
    std::fs::create_dir_all(&no_cgroup).unwrap();
    std::fs::write(
        home.path().join("capped.json"),
        serde_json::json!({
            "id": "capped",
            "build_policy": "ci-only",
            "verification": "dev-probe",
            "mem_limit_mb": 512
        })
        .to_string(),
    )
    .unwrap();
    // The stand-in's spec with the capped profile, on `isolation`.
    let run_capped = |isolation: &'static str| {
        let (home, spec, no_cgroup) = (&home, &spec, &no_cgroup);
        async move {
            let text = std::fs::read_to_string(spec).unwrap();
            assert!(text.contains("isolation = \"sandbox\""), "{text}");
            let capped = home.path().join(format!("capped-{isolation}.toml"));
            std::fs::write(
                &capped,
                format!(
                    "{}\n[policy]\nprofile = \"{}\"\n",
                    text.replace(
                        "isolation = \"sandbox\"",
                        &format!("isolation = \"{isolation}\"")
                    ),
                    home.path().join("capped.json").display()
                ),
            )
            .unwrap();
            let out = home
                .paddock(
                    &["run", "--json", capped.to_str().unwrap()],
                    &[("PADDOCK_CGROUP_ROOT", no_cgroup.to_str().unwrap())],
                )
                .await;
            let rec = record(&out);
            (rec.isolation, rec.status, rec.reason)
        }
    };
    let failed = (
        "sandbox".to_string(),
        JobStatus::Failed,
        Some(format!(
            "the sandbox could not be set up, so nothing ran: cgroup {}: neither cgroup v2 with \
             the memory, pids and cpu controllers nor the v1 memory, pids and cpu hierarchies",
            no_cgroup.display()
        )),
    );
    assert_eq!(run_capped("sandbox").await, failed);
    assert_eq!(probe_record(&home), None);

    // The same under `auto`, from a kept success: the rung is asked
    // afresh, a sandbox starts (and its success is kept again), so the
    // failure is the job's own and it fails on the `sandbox` rung, never
    // moved to the unconfined `process` rung.
    set_probe_record(&home, &key, earlier);
    assert_eq!(run_capped("auto").await, failed);
    let (kept, at) = probe_record(&home).unwrap();
    assert_eq!(kept, key);
    assert!(at > earlier, "{at}");
    assert_eq!(run(spec).await, ("sandbox".into(), stand_in_end.clone()));
    assert_eq!(probe_record(&home).map(|(k, _)| k), Some(key));
}

/// Two nested user namespaces made by this (root) process, each mapping
/// every id to itself: `outer` and `inner`, `inner`'s parent being
/// `outer`. A namespace's limits (`/proc/sys/user/max_*`) are its own and
/// bind every namespace below it, but one reads only its own: a limit
/// set in `outer` stops a sandbox from starting in `inner` while nothing
/// `inner` can read (the kept probe's key) changes.
struct NestedUserns {
    outer: tokio::process::Child,
    inner: tokio::process::Child,
}

impl NestedUserns {
    async fn new() -> NestedUserns {
        let outer = Self::sleeper(tokio::process::Command::new("unshare")).await;
        let outer_pid = outer.id().unwrap();
        Self::map_all(None, outer_pid).await;
        let mut enter = tokio::process::Command::new("nsenter");
        enter.args(["-t", &outer_pid.to_string(), "-U", "--", "unshare"]);
        let inner = Self::sleeper(enter).await;
        Self::map_all(Some(outer_pid), inner.id().unwrap()).await;
        NestedUserns { outer, inner }
    }

    /// `cmd` (`unshare`, maybe behind `nsenter`) `-U sleep 600`, once its
    /// user namespace is made.
    async fn sleeper(mut cmd: tokio::process::Command) -> tokio::process::Child {
        let child = cmd
            .args(["-U", "sleep", "600"])
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let pid = child.id().unwrap();
        let ours = std::fs::read_link("/proc/self/ns/user").unwrap();
        for _ in 0..500 {
            let ns = std::fs::read_link(format!("/proc/{pid}/ns/user")).unwrap();
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
            // Made, and `sleep` exec'd in it (nsenter, then unshare, run
            // first in the same process).
            if ns != ours && comm.trim() == "sleep" {
                return child;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("no user namespace made by pid {pid}");
    }

    /// Maps every id to itself in `pid`'s user namespace, written from
    /// its parent namespace (`parent`'s, or this process's).
    async fn map_all(parent: Option<u32>, pid: u32) {
        let script = format!(
            "echo '0 0 4294967295' > /proc/{pid}/uid_map && \
             echo '0 0 4294967295' > /proc/{pid}/gid_map"
        );
        let out = Self::in_ns(parent, &script).await;
        assert!(out.status.success(), "{out:?}");
    }

    /// The shell `script` as root of `pid`'s user namespace (or here).
    async fn in_ns(pid: Option<u32>, script: &str) -> std::process::Output {
        let mut cmd = tokio::process::Command::new("nsenter");
        if let Some(pid) = pid {
            cmd.args(["-t", &pid.to_string(), "-U"]);
        }
        cmd.args(["--", "sh", "-c", script])
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .unwrap()
    }

    /// Sets the outer namespace's `max_user_namespaces`.
    async fn limit_outer(&self, max: u32) {
        let script = format!("echo {max} > /proc/sys/user/max_user_namespaces");
        let out = Self::in_ns(self.outer.id(), &script).await;
        assert!(out.status.success(), "{out:?}");
    }

    /// `paddock ARGS` on `home` as uid and gid 65534 in the inner
    /// namespace (a root caller's sandbox needs the host's own privileges
    /// for its idmapped binds).
    async fn paddock(&self, home: &Home, args: &[&str]) -> std::process::Output {
        let cmd = home.command(args);
        let std = cmd.as_std();
        let mut inner = tokio::process::Command::new("nsenter");
        inner
            .args(["-t", &self.inner.id().unwrap().to_string(), "-U"])
            .args(["--setuid", "65534", "--setgid", "65534", "--"])
            .arg(std.get_program())
            .args(std.get_args())
            .stdin(std::process::Stdio::null());
        for (k, v) in std.get_envs() {
            match v {
                Some(v) => inner.env(k, v),
                None => inner.env_remove(k),
            };
        }
        inner.output().await.unwrap()
    }
}

/// On a real kernel: an `auto` job whose host kept a sandbox probe's
/// success, where a sandbox no longer starts for a reason the kept key
/// does not see (the parent user namespace's limit on user namespaces set
/// to 0 after the first job), moves to the `process` rung at its first
/// launch, says why in a `policy` event and finishes there, and the
/// record is cleared; an explicit `sandbox` job is refused; once the
/// limit is lifted, an `auto` job runs sandboxed again.
#[tokio::test(flavor = "multi_thread")]
async fn an_auto_job_moves_to_process_when_its_kept_sandbox_no_longer_starts() {
    if !paddock_test_support::prelude::sandbox_available()
        || !paddock_test_support::prelude::root_available(
            "making nested user namespaces that map every id",
        )
    {
        return;
    }
    let home = Home::new();
    let spec = paddock_test_support::jobs::stand_in_job(
        home.path(),
        "auto",
        &finishing("printf 'moved\\n' > moved.txt"),
        60,
    );
    let chown = std::process::Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(home.path())
        .status()
        .unwrap();
    assert!(chown.success());
    let ns = NestedUserns::new().await;
    let run_after = |spec: std::path::PathBuf, after: Option<String>| {
        let (home, ns) = (&home, &ns);
        async move {
            let mut args = vec!["run", "--json", spec.to_str().unwrap()];
            if let Some(after) = &after {
                args.extend(["--attempt-after", after.as_str()]);
            }
            let out = ns.paddock(home, &args).await;
            let rec = record(&out);
            let policy: Vec<paddock_protocol::EventBody> = home
                .event_bodies(&rec.id)
                .await
                .into_iter()
                .filter(|b| matches!(b, paddock_protocol::EventBody::Policy { .. }))
                .collect();
            (rec.id, (rec.isolation, rec.status, rec.reason, policy))
        }
    };
    let run = |spec: std::path::PathBuf| async { run_after(spec, None).await.1 };

    let (first, ran) = run_after(spec.clone(), None).await;
    assert_eq!(ran, ("sandbox".into(), JobStatus::Done, None, vec![]));
    let (key, at) = probe_record(&home).unwrap();

    // The next attempt after it, moved: its engine session is decided
    // for the rung it runs on (a session is resumed only on the rung it
    // was made on), and its closeout says the last word.
    ns.limit_outer(0).await;
    let unshare = "unshare the user and UTS namespaces: ENOSPC: No space left on device";
    let (moved, ran) = run_after(spec.clone(), Some(first.clone())).await;
    let closeout = home.store().await.closeout(&moved).await.unwrap().unwrap();
    let forked = format!(
        "a new session, not attempt 1's (job {first}): the rung changed (sandbox → process)"
    );
    assert_eq!(
        (
            home.session_statuses(&moved).await.last().cloned(),
            closeout.contains(&format!("Engine session forked: {forked}.")),
        ),
        (
            Some((paddock_protocol::Phase::SessionForked, Some(forked.clone()))),
            true
        ),
        "{closeout}"
    );
    assert_eq!(
        ran,
        (
            "process".into(),
            JobStatus::Done,
            None,
            vec![paddock_protocol::EventBody::Policy {
                rule: "isolation".into(),
                message: format!(
                    "isolation auto: the sandbox could not be set up, so nothing ran: {unshare}, \
                     although this host's kept sandbox probe said one starts; running on the \
                     `process` rung (unconfined) because this host cannot start Paddock's \
                     sandbox: a fresh probe fails the same way"
                ),
            }]
        )
    );
    assert_eq!(probe_record(&home), None);

    // Asked afresh at admission now: `auto` starts on `process`, an
    // explicit `sandbox` is refused.
    let text = std::fs::read_to_string(&spec).unwrap();
    let sandboxed = home.path().join("sandboxed.toml");
    std::fs::write(
        &sandboxed,
        text.replace("isolation = \"auto\"", "isolation = \"sandbox\""),
    )
    .unwrap();
    let out = ns
        .paddock(&home, &["run", "--json", sandboxed.to_str().unwrap()])
        .await;
    assert_eq!(
        (out.status.code(), String::from_utf8_lossy(&out.stderr).trim_end()),
        (
            Some(2),
            format!(
                "paddock: isolation = \"sandbox\": this host cannot start Paddock's sandbox: \
                 paddock sandbox: {unshare} (`paddock doctor` shows what is missing; `isolation = \"process\"` \
                 runs unconfined)"
            )
            .as_str()
        )
    );

    ns.limit_outer(1000).await;
    assert_eq!(
        run(spec).await,
        ("sandbox".into(), JobStatus::Done, None, vec![])
    );
    let (again, later) = probe_record(&home).unwrap();
    assert_eq!((again, later >= at), (key, true));
}

/// `paddock ARGS` on `home`, started by a shell that first opens `secret`
/// as descriptor 7 (a caller that leaked one).
async fn paddock_holding_fd7(
    home: &Home,
    secret: &std::path::Path,
    args: &[&str],
) -> std::process::Output {
    let std = home.command(args);
    let std = std.as_std();
    tokio::process::Command::new("sh")
        .arg("-c")
        .arg("exec 7<\"$0\"; exec \"$@\"")
        .arg(secret)
        .arg(std.get_program())
        .args(std.get_args())
        .env_remove("PADDOCK_DB")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap()
}

/// What a stand-in engine read from descriptor 7 on `rung`.
async fn engine_reads_fd7(sandbox: bool) -> String {
    let home = Home::new();
    let secret = home.path().join("secret");
    std::fs::write(&secret, "caller-secret\n").unwrap();
    let spec = stand_in_job(
        &home,
        "cat <&7 > \"$HOME/fd7\" 2>/dev/null || echo closed > \"$HOME/fd7\"",
        sandbox,
    );
    let out = paddock_holding_fd7(
        &home,
        &secret,
        &["run", "--json", "--keep", spec.to_str().unwrap()],
    )
    .await;
    let rec = record(&out);
    let seen = std::fs::read_to_string(home.jobs().join(&rec.id).join("home/fd7")).unwrap();
    std::fs::remove_dir_all(home.jobs().join(&rec.id)).unwrap();
    seen
}

/// A descriptor the caller of `paddock run` left open reaches the engine on
/// neither rung (nor the sandbox helper and PID 1 in between); the twin is
/// the same shell wrapper starting `sh` instead of `paddock`, which reads it.
#[tokio::test(flavor = "multi_thread")]
async fn an_inherited_descriptor_reaches_no_engine() {
    if !paddock_test_support::prelude::sandbox_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "caller-secret\n").unwrap();
    let twin = std::process::Command::new("sh")
        .arg("-c")
        .arg("exec 7<\"$0\"; exec \"$@\"")
        .arg(&secret)
        .args(["sh", "-c", "cat <&7"])
        .output()
        .unwrap();
    assert_eq!(
        (
            String::from_utf8_lossy(&twin.stdout).into_owned(),
            engine_reads_fd7(false).await,
            engine_reads_fd7(true).await
        ),
        (
            "caller-secret\n".to_string(),
            "closed\n".to_string(),
            "closed\n".to_string()
        )
    );
}

/// A repository that commits `.profile -> /tmp` does not get the host's
/// /tmp into the view (the protected path is not followed): the engine's
/// write lands in the sandbox's own /tmp. Twin: on the `process` rung the
/// same write reaches the host's /tmp.
async fn committed_link_write_reaches_host(sandbox: bool) -> bool {
    let home = Home::new();
    let target = format!(
        "/tmp/paddock-committed-link-{}-{}",
        std::process::id(),
        sandbox
    );
    let _ = std::fs::remove_file(&target);
    let spec = stand_in_job(&home, &format!("echo pwned > {target}"), sandbox);
    let repo = home.path().join("repo");
    std::os::unix::fs::symlink("/tmp", repo.join(".profile")).unwrap();
    paddock_test_support::prelude::git(&repo, &["add", ".profile"]);
    paddock_test_support::prelude::git(&repo, &["commit", "-q", "-m", "a link"]);
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let _ = record(&out);
    let reached = std::path::Path::new(&target).exists();
    let _ = std::fs::remove_file(&target);
    reached
}

#[tokio::test(flavor = "multi_thread")]
async fn a_committed_link_does_not_bring_host_paths_into_the_view() {
    if !paddock_test_support::prelude::sandbox_available() {
        return;
    }
    assert_eq!(
        (
            committed_link_write_reaches_host(false).await,
            committed_link_write_reaches_host(true).await
        ),
        (true, false)
    );
}

/// A setup command (the repository's code, run in the sandbox before the
/// engine) leaves what Paddock writes next, on the host, for the engine
/// (`~/.codex/config.toml`, and `~/.codex/rules/default.rules` under a
/// host profile) as a link to a host file, the directory `~/.codex` as a
/// link to a host directory, or the config as a FIFO. Paddock must write
/// through none of them (nor wait on the FIFO): the job runs with its
/// config in its own home, the host's file and directory as they were.
/// Before, the config was written with a plain `write` after setup: the
/// sandboxed job had any file Paddock's user may write (root's, on a
/// server) replaced by the engine's config.
#[tokio::test(flavor = "multi_thread")]
async fn a_link_a_setup_command_leaves_for_the_engines_config_is_not_written_through() {
    if !sandbox_available() {
        return;
    }
    let home = Home::new();
    let outside = home.path().join("outside");
    let victim = home.path().join("victim");
    let setups = [
        format!(
            "mkdir -p \"$HOME/.codex\" && ln -s {} \"$HOME/.codex/config.toml\"",
            victim.display()
        ),
        format!(
            "rm -rf \"$HOME/.codex\" && ln -s {} \"$HOME/.codex\"",
            outside.display()
        ),
        "mkdir -p \"$HOME/.codex\" && mkfifo \"$HOME/.codex/config.toml\"".to_string(),
    ];
    let mut got = Vec::new();
    for (i, setup) in setups.iter().enumerate() {
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(&victim, "precious\n").unwrap();
        let dir = home.path().join(format!("job{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let spec =
            paddock_test_support::jobs::stand_in_job(&dir, "sandbox", &finishing("true"), 60);
        let text = std::fs::read_to_string(&spec).unwrap();
        let quoted = setup.replace('\\', "\\\\").replace('"', "\\\"");
        std::fs::write(
            &spec,
            format!("{text}\n[setup]\ncommands = [\"{quoted}\"]\ncache = false\n"),
        )
        .unwrap();
        let out = tokio::time::timeout(
            std::time::Duration::from_secs(120),
            home.paddock(&["run", "--json", spec.to_str().unwrap()], &[]),
        )
        .await
        .expect("the job ends");
        let rec = record(&out);
        let in_outside: Vec<String> = std::fs::read_dir(&outside)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        got.push((
            rec.status,
            rec.reason,
            std::fs::read_to_string(&victim).unwrap(),
            in_outside,
        ));
    }
    let held = (
        JobStatus::Done,
        None,
        "precious\n".to_string(),
        Vec::<String>::new(),
    );
    assert_eq!(got, vec![held.clone(), held.clone(), held]);
}

/// The engine (on the sandbox rung) leaves `~/.codex/sessions` as a link
/// to a host directory holding Codex rollouts (another job's saved
/// session, here a real codex-cli rollout with two refused calls), and
/// `~/.codex` itself as one in a second job. Paddock, reading the job's
/// rollouts for refused calls after the engine exited, must read nothing
/// through either: the job has no event naming the other session's
/// commands. Before, the walk started by following both links, and the
/// other session's refused `rm -f junk.txt` became this job's event.
#[tokio::test(flavor = "multi_thread")]
async fn a_rollout_directory_linked_to_the_host_is_not_read() {
    if !sandbox_available() {
        return;
    }
    let home = Home::new();
    let outside = home.path().join("other-job");
    let day = outside.join("sessions/2026/11/30");
    std::fs::create_dir_all(&day).unwrap();
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/rollouts/codex-0.171.0-refused.jsonl"),
        day.join("rollout-1.jsonl"),
    )
    .unwrap();
    let links = [
        format!(
            "rm -rf \"$HOME/.codex/sessions\"; ln -s {} \"$HOME/.codex/sessions\"",
            outside.join("sessions").display()
        ),
        format!(
            "rm -rf \"$HOME/.codex\"; ln -s {} \"$HOME/.codex\"",
            outside.display()
        ),
    ];
    let mut got = Vec::new();
    for (i, link) in links.iter().enumerate() {
        let dir = home.path().join(format!("job{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let spec = paddock_test_support::jobs::stand_in_job(&dir, "sandbox", &finishing(link), 60);
        let rec = record(
            &home
                .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
                .await,
        );
        let named: Vec<String> = home
            .event_bodies(&rec.id)
            .await
            .into_iter()
            .map(|e| format!("{e:?}"))
            .filter(|e| e.contains("junk.txt") || e.contains("/paddock/marks/denied"))
            .collect();
        got.push((rec.status, named));
    }
    let clean = (JobStatus::Done, Vec::<String>::new());
    assert_eq!(got, vec![clean.clone(), clean]);
}

/// The job's setup outputs, its `sandbox` error events and its end, for
/// a sandboxed job with two setup commands and `engine` as its stand-in,
/// run with `PADDOCK_CGROUP_ROOT` set to `cgroup_root`.
async fn caps_told(
    home: &Home,
    name: &str,
    engine: &str,
    cgroup_root: &std::path::Path,
) -> (Vec<String>, Vec<String>, JobStatus, Option<String>) {
    let dir = home.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let spec = paddock_test_support::jobs::stand_in_job(&dir, "sandbox", engine, 60);
    append_to_spec(
        &spec,
        "[setup]\ncommands = [\"echo one\", \"echo two\"]\ncache = false\n",
    );
    let out = home
        .paddock(
            &["run", "--json", spec.to_str().unwrap()],
            &[("PADDOCK_CGROUP_ROOT", cgroup_root.to_str().unwrap())],
        )
        .await;
    let rec = record(&out);
    let events = home.store().await.events(&rec.id, 0).await.unwrap();
    let mut outputs = Vec::new();
    let mut told = Vec::new();
    for e in events {
        match e.body {
            paddock_protocol::EventBody::ToolResult {
                call_id: Some(id),
                output,
                ..
            } if id.starts_with("setup-") => outputs.push(output),
            paddock_protocol::EventBody::Error {
                message,
                source: Some(source),
                fatal: false,
            } if source == "sandbox" => told.push(message),
            _ => {}
        }
    }
    (outputs, told, rec.status, rec.reason)
}

/// What holds a job's default pids cap (1024) where its cgroup cannot be
/// made (`paddock_sandbox::pid_cap`), as the notice and `paddock doctor`
/// say it, for this test's user on this kernel.
fn held_without_cgroup() -> &'static str {
    let root = nix::unistd::geteuid().is_root();
    match (root, paddock_sandbox::pid_cap::per_namespace_pid_max()) {
        (true, true) => "the job's processes are held below 1324 by its PID namespace's pid_max",
        (true, false) => "the job's processes are not capped (a root caller's are not held by RLIMIT_NPROC, and this kernel has no per-namespace pid_max, Linux 6.14+)",
        (false, true) => "the job's processes are held to 1024 by RLIMIT_NPROC and below 1324 by its PID namespace's pid_max",
        (false, false) => "the job's processes are held to 1024 by RLIMIT_NPROC",
    }
}

/// Where the job's cgroup cannot be made (here `PADDOCK_CGROUP_ROOT`
/// names a directory that is no cgroup; for an ordinary user without a
/// delegated cgroup, `/sys/fs/cgroup` itself), the sandbox runs the job
/// without its default pids cap and says so once, as a `sandbox` event:
/// not as a line in every setup command's output and in the engine's
/// stderr, where it became the end of a failed job's reason. Before, each
/// of the three commands' helper printed it on the command's stderr.
#[tokio::test(flavor = "multi_thread")]
async fn caps_a_host_cannot_apply_are_told_once_not_in_each_commands_output() {
    if !sandbox_available() {
        return;
    }
    let home = Home::new();
    let no_cgroup = home.path().join("not-a-cgroup");
    std::fs::create_dir_all(&no_cgroup).unwrap();
    let notice = format!(
        "running without cgroup caps (accepted): cgroup {}: neither cgroup v2 with the memory, pids and cpu controllers nor the v1 memory, pids and cpu hierarchies; {}",
        no_cgroup.display(),
        held_without_cgroup()
    );
    let setup = vec!["one\n".to_string(), "two\n".to_string()];
    assert_eq!(
        (
            caps_told(&home, "done", &finishing("true"), &no_cgroup).await,
            caps_told(&home, "failed", "echo oops >&2; exit 3", &no_cgroup).await,
        ),
        (
            (setup.clone(), vec![notice.clone()], JobStatus::Done, None),
            (
                setup,
                vec![notice],
                JobStatus::Failed,
                Some("the engine exited with status 3: oops".to_string())
            ),
        )
    );
}

/// `PADDOCK_CGROUP_ROOT` (a delegated cgroup, as the systemd unit sets
/// for `paddock serve`) is where a sandboxed job's cgroup is made, with
/// its default pids cap: seen from the host while the job runs, and gone
/// after. Before, only `paddock sandbox` used it; a job's cgroup went to
/// `/sys/fs/cgroup`, which a delegated service may not write, so its caps
/// were never applied.
#[tokio::test(flavor = "multi_thread")]
async fn a_jobs_cgroup_is_made_under_paddock_cgroup_root() {
    if !sandbox_available() {
        return;
    }
    if !root_available("making a delegated cgroup") {
        return;
    }
    let home = Home::new();
    let Some(cgroups) = Delegated::v1(&home, "delegated") else {
        return;
    };
    let (root, delegated) = (&cgroups.root, &cgroups.dirs);
    let dir = home.path().join("job");
    std::fs::create_dir_all(&dir).unwrap();
    // The engine waits (at most 30 s) until the test has looked.
    let spec = paddock_test_support::jobs::stand_in_job(
        &dir,
        "sandbox",
        &finishing(
            "i=0; while [ ! -e \"$HOME/go\" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done",
        ),
        60,
    );
    let run = home
        .command(&["run", "--json", spec.to_str().unwrap()])
        .env("PADDOCK_CGROUP_ROOT", root)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pids = delegated[1].join("paddock");
    let mut seen = None;
    for _ in 0..600 {
        let job = std::fs::read_dir(&pids)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("job-"))
            });
        if let Some(job) = job {
            let home_dir = home.jobs().join(job.file_name().unwrap()).join("home");
            if std::fs::read_to_string(job.join("cgroup.procs")).is_ok_and(|p| !p.trim().is_empty())
            {
                seen = Some((
                    std::fs::read_to_string(job.join("pids.max")).unwrap(),
                    delegated
                        .iter()
                        .all(|d| d.join("paddock").join(job.file_name().unwrap()).is_dir()),
                ));
                std::fs::write(home_dir.join("go"), "").unwrap();
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let out = run.wait_with_output().await.unwrap();
    let rec = record(&out);
    let left = cgroups.made();
    assert_eq!(
        (seen, rec.status, left.len()),
        (Some(("1024\n".to_string(), true)), JobStatus::Done, 0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The sandbox rung's line of `paddock doctor --json` with
/// `PADDOCK_CGROUP_ROOT` set to `root`.
async fn doctor_caps(home: &Home, root: &std::path::Path) -> String {
    let out = home
        .paddock(
            &["doctor", "--json"],
            &[("PADDOCK_CGROUP_ROOT", root.to_str().unwrap())],
        )
        .await;
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    report["rungs"][1]["detail"]
        .as_str()
        .unwrap()
        .split_once("; ")
        .unwrap()
        .1
        .to_string()
}

/// `paddock doctor` says whether jobs' cgroup caps can be made here, by
/// making one where jobs' are made (`PADDOCK_CGROUP_ROOT`) and removing
/// it: before, it guessed from the uid (root: "available") and never
/// looked at the root jobs use.
#[tokio::test(flavor = "multi_thread")]
async fn doctor_makes_a_jobs_cgroup_where_jobs_make_theirs() {
    if !sandbox_available() {
        return;
    }
    let home = Home::new();
    let no_cgroup = home.path().join("not-a-cgroup");
    std::fs::create_dir_all(&no_cgroup).unwrap();
    assert_eq!(
        doctor_caps(&home, &no_cgroup).await,
        format!(
            "no cgroup caps for jobs (cgroup {}: neither cgroup v2 with the memory, pids and cpu controllers nor the v1 memory, pids and cpu hierarchies): without its cgroup {}, and a job whose host profile sets caps is refused unless its spec accepts them as degraded; PADDOCK_CGROUP_ROOT names a cgroup delegated to this user (docs/sandbox.md)",
            no_cgroup.display(),
            held_without_cgroup()
        )
    );
    if !root_available("the delegated half (making a delegated cgroup)") {
        return;
    }
    let Some(cgroups) = Delegated::v1(&home, "doctor") else {
        return;
    };
    assert_eq!(
        (doctor_caps(&home, &cgroups.root).await, cgroups.made()),
        (
            format!(
                "jobs' cgroup caps are made under {}",
                cgroups.root.display()
            ),
            Vec::new()
        )
    );
}

/// A cgroup v1 subtree per controller, presented as one root (symlinks)
/// for `PADDOCK_CGROUP_ROOT` (the caller is root), removed when dropped.
struct Delegated {
    root: std::path::PathBuf,
    /// memory, pids, cpu
    dirs: Vec<std::path::PathBuf>,
}

impl Delegated {
    /// None (saying why) where this host has no v1 memory, pids and cpu
    /// hierarchies.
    fn v1(home: &Home, tag: &str) -> Option<Delegated> {
        let controllers = ["memory", "pids", "cpu"];
        if let Some(c) = controllers
            .iter()
            .find(|c| !std::path::Path::new(&format!("/sys/fs/cgroup/{c}/cgroup.procs")).exists())
        {
            eprintln!("skipping: no cgroup v1 {c} hierarchy here");
            return None;
        }
        let root = home.path().join(format!("cgroot-{tag}"));
        std::fs::create_dir_all(&root).unwrap();
        let dirs = controllers
            .iter()
            .map(|c| {
                let d = std::path::PathBuf::from(format!(
                    "/sys/fs/cgroup/{c}/paddock-{tag}-{}",
                    std::process::id()
                ));
                std::fs::create_dir_all(&d).unwrap();
                std::os::unix::fs::symlink(&d, root.join(c)).unwrap();
                d
            })
            .collect();
        Some(Delegated { root, dirs })
    }

    /// The cgroups made under it (directories, their control files aside).
    fn made(&self) -> Vec<std::path::PathBuf> {
        self.dirs
            .iter()
            .flat_map(|d| {
                std::fs::read_dir(d.join("paddock"))
                    .into_iter()
                    .flatten()
                    .flatten()
            })
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect()
    }
}

impl Drop for Delegated {
    fn drop(&mut self) {
        for cgroup in self.made() {
            let _ = std::fs::remove_dir(cgroup);
        }
        for d in &self.dirs {
            let _ = std::fs::remove_dir(d.join("paddock"));
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// The `sandbox` rung probes once and keeps its answer (a server's every
/// admission asks it); a fresh probe, asked when a job's first launch
/// could not be set up, replaces it, so the jobs after it are admitted by
/// what the host is now, either way.
#[tokio::test(flavor = "multi_thread")]
async fn a_fresh_probe_replaces_the_rungs_kept_answer() {
    use paddock::rung::Rung as _;
    if !sandbox_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let helper = dir.path().join("paddock");
    std::os::unix::fs::symlink(dir.path().join("missing"), &helper).unwrap();
    let rung = paddock::rung::SandboxRung::new(helper.clone(), None);
    let missing = rung.probe().await;
    assert!(
        missing
            .as_deref()
            .is_some_and(|why| why.starts_with("start the helper: ")),
        "{missing:?}"
    );
    std::fs::remove_file(&helper).unwrap();
    std::os::unix::fs::symlink(paddock_test_support::home::paddock_bin(), &helper).unwrap();
    let answers = [
        rung.probe().await,
        rung.probe_afresh().await,
        rung.probe().await,
    ];
    assert_eq!(answers, [missing, None, None]);
    std::fs::remove_file(&helper).unwrap();
    std::os::unix::fs::symlink(dir.path().join("missing"), &helper).unwrap();
    assert_eq!(rung.probe().await, None);
    let gone = rung.probe_afresh().await;
    assert!(gone.is_some());
    assert_eq!(rung.probe().await, gone);
}

/// A sandbox short of processes is no host without a sandbox. The helper
/// runs as a user allowed one process (`prlimit --nproc=1`), so the clone
/// of its PID 1 fails with `EAGAIN`, as it does when a concurrent job or
/// another user holds the host's processes (or its memory or
/// descriptors): the helper exits `SETUP_SHORT`, the probe says `Short`,
/// and the rung answers neither `probe` (an `auto` job's admission) nor
/// `probe_afresh` (its move after a first launch that could not be set
/// up) with a reason to run the job unconfined; the same helper allowed
/// processes starts one. Before, both answered the helper's `EAGAIN` as
/// "this host cannot start a sandbox": the job moved to the `process`
/// rung, and the next admissions went there too.
#[tokio::test(flavor = "multi_thread")]
async fn a_sandbox_short_of_processes_is_no_host_without_a_sandbox() {
    use paddock::rung::{Rung as _, SandboxProbe};
    use std::os::unix::fs::PermissionsExt as _;
    if !sandbox_available() || !root_available("running the sandbox helper as another user") {
        return;
    }
    for tool in ["setpriv", "prlimit"] {
        if which::which(tool).is_err() {
            assert!(!in_ci(), "this test needs `{tool}`");
            eprintln!("skipping: this test needs `{tool}`");
            return;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let helper = |name: &str, nproc: &str| {
        let path = dir.path().join(name);
        paddock_test_support::script::write_script(
            &path,
            &format!(
                "#!/bin/sh\nexec setpriv --reuid=64127 --regid=64127 --clear-groups -- \
                 prlimit --nproc={nproc} -- {} \"$@\"\n",
                paddock_test_support::home::paddock_bin().display()
            ),
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    };
    let (short, allowed) = (helper("short", "1"), helper("allowed", "4096"));
    let now = paddock::rung::probe_sandbox_now(&short);
    let rung = paddock::rung::SandboxRung::new(short, None);
    let answers = (rung.probe().await, rung.probe_afresh().await);
    assert_eq!(
        (
            matches!(&now, SandboxProbe::Short(why) if why.contains("EAGAIN")),
            answers,
            paddock::rung::probe_sandbox_now(&allowed),
        ),
        (true, (None, None), SandboxProbe::Starts),
        "{now:?}"
    );
}

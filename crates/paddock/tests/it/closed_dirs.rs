//! A job that leaves directories its owner cannot list or change (`chmod
//! 000`, `chmod 500`, a link to a closed directory outside beside them),
//! with Paddock running as the user, not root (a laptop, a build box;
//! `setpriv` to uid 64124 when the tests run as root): its directory is
//! removed all the same, on both rungs, without following the link (the
//! directory outside keeps its mode and what it holds). Before, the
//! removal failed with `EACCES` and the job's directory stayed in the
//! trash for good, every reaper pass refused. Files it closed (`chmod 000`,
//! a `chmod 100` program) are in its patch as root's would have them;
//! before, Paddock's git could not open them and the job had no patch.
//! Closed directories do not stop the job (its disk watcher counts them
//! in a user namespace of Paddock's own), nor hide what they hold from
//! its `limits.max_disk_bytes`; where that namespace cannot be made, the
//! job is stopped naming why.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use paddock_protocol::JobStatus;
use paddock_test_support::prelude::*;

const UNPRIVILEGED_UID: u32 = 64_124;

/// The user Paddock runs as: this one when it is not root, else uid 64124.
fn user() -> u32 {
    let me = nix::unistd::geteuid();
    if me.is_root() {
        UNPRIVILEGED_UID
    } else {
        me.as_raw()
    }
}

/// `paddock ARGS` as `uid`, in `home`.
async fn paddock_as(uid: u32, home: &Home, args: &[&str]) -> std::process::Output {
    paddock_as_in(uid, &[], home, args).await
}

/// `paddock ARGS` as `uid`, in `home`, started through `wrapper` (a
/// command and its arguments, before `paddock`'s own).
async fn paddock_as_in(
    uid: u32,
    wrapper: &[&str],
    home: &Home,
    args: &[&str],
) -> std::process::Output {
    let mut cmd = tokio::process::Command::new("setpriv");
    if nix::unistd::geteuid().is_root() {
        cmd.arg(format!("--reuid={uid}"))
            .arg(format!("--regid={uid}"))
            .arg("--clear-groups");
    }
    cmd.arg("--")
        .args(wrapper)
        .arg(env!("CARGO_BIN_EXE_paddock"));
    cmd.arg("--data-dir")
        .arg(home.data())
        .arg("--jobs-dir")
        .arg(home.jobs())
        .args(args)
        .env("HOME", home.path())
        .env_remove("PADDOCK_DB")
        .stdin(std::process::Stdio::null());
    cmd.output().await.unwrap()
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

/// A job spec on `rung` whose engine is a stand-in `codex` running `body`
/// in the work tree, everything under `home` chowned to `uid`.
fn stand_in_job(home: &Home, repo: &Path, body: &str, rung: &str, uid: u32) -> std::path::PathBuf {
    let bin = home.path().join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let codex = bin.join("codex");
    paddock_test_support::script::write_script(
        &codex,
        &format!(
            "#!/bin/sh\n[ \"$1\" = --version ] && {{ echo 'codex-cli {}'; exit 0; }}\n{body}",
            paddock::engines::codex::PIN.version,
        ),
    );
    let spec = job(
        home.path(),
        "codex",
        repo,
        SCRIPTED,
        Some("[[turn]]\ntext = \"hi\"\n"),
    );
    use_engine_binary(&spec, &codex);
    on_rung(&spec, rung);
    let chown = std::process::Command::new("chown")
        .args(["-R", &format!("{uid}:{uid}")])
        .arg(home.path())
        .status()
        .unwrap();
    assert!(chown.success());
    spec
}

async fn closed_directories_are_removed(rung: &str) {
    if !user_namespaces() {
        return;
    }
    let uid = user();
    let home = Home::new();
    let repo = repo(home.path());
    let outside = home.path().join("outside");
    std::fs::create_dir_all(outside.join("inner")).unwrap();
    std::fs::write(outside.join("inner/keep"), "k").unwrap();
    let body = format!(
        "mkdir -p locked/inner open/sub && echo x > locked/inner/f && echo y > open/sub/g\n\
         ln -s '{}' locked/inner/out && ln -s '{}' open/out\n\
         chmod 000 locked/inner locked && chmod 500 open/sub open\n",
        outside.display(),
        outside.display(),
    );
    let spec = stand_in_job(&home, &repo, &finishing(&body), rung, uid);
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o500)).unwrap();
    let out = paddock_as(uid, &home, &["run", "--json", spec.to_str().unwrap()]).await;
    let rec = record(&out);
    // What the run's own remover has not done yet, a pass of the reaper
    // does (before the fix, it failed as the run's did).
    let gc = paddock_as(uid, &home, &["gc"]).await;
    // A remover that held the trash then (the run's own, detached) has
    // finished once its lock is free.
    let lock = std::fs::File::open(home.jobs().join(".trash.lock")).unwrap();
    let lock = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive).unwrap();
    drop(lock);
    let left: Vec<String> = [home.jobs(), home.jobs().join(".trash")]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("job-"))
        .collect();
    assert_eq!(
        (
            rec.status,
            rec.reason.clone(),
            left,
            String::from_utf8_lossy(&gc.stderr).into_owned(),
            mode(&outside),
            std::fs::read_to_string(outside.join("inner/keep")).unwrap(),
        ),
        (
            JobStatus::Done,
            None,
            Vec::<String>::new(),
            String::new(),
            0o500,
            "k".to_string(),
        ),
        "rung {rung}, uid {uid}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o700)).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn closed_directories_are_removed_on_the_process_rung() {
    closed_directories_are_removed("process").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn closed_directories_are_removed_on_the_sandbox_rung() {
    if !sandbox_available() {
        return;
    }
    closed_directories_are_removed("sandbox").await;
}

/// The job's directories left in `<jobs>` and its trash.
fn left_behind(home: &Home) -> Vec<String> {
    [home.jobs(), home.jobs().join(".trash")]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("job-"))
        .collect()
}

/// Files the job closed (`chmod 000`, an executable `chmod 100`) are in its
/// patch as root's would have them (content, the execute bit), with Paddock
/// running as the user. Before, Paddock's git could not open them and the
/// job had no patch at all ("cannot compute the patch ... Permission
/// denied").
async fn closed_files_are_in_the_patch(rung: &str) {
    let uid = user();
    let home = Home::new();
    let repo = repo(home.path());
    let body = "mkdir -p sub && echo s > secret && echo t > sub/hidden && echo x > tool\n\
                chmod 000 secret sub/hidden && chmod 100 tool\n";
    let spec = stand_in_job(&home, &repo, body, rung, uid);
    let out = paddock_as(uid, &home, &["run", "--json", spec.to_str().unwrap()]).await;
    let rec = record(&out);
    let gc = paddock_as(uid, &home, &["gc"]).await;
    let lock = std::fs::File::open(home.jobs().join(".trash.lock")).unwrap();
    let lock = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive).unwrap();
    drop(lock);
    let patch = rec
        .patch_path
        .as_ref()
        .map(|p| std::fs::read_to_string(p).unwrap());
    assert_eq!(
        (
            rec.status,
            rec.changed_files.clone(),
            patch,
            left_behind(&home),
            String::from_utf8_lossy(&gc.stderr).into_owned(),
        ),
        (
            JobStatus::Failed,
            vec![
                "secret".to_string(),
                "sub/hidden".to_string(),
                "tool".to_string()
            ],
            Some(
                "diff --git a/secret b/secret\nnew file mode 100644\nindex 0000000..b478595\n\
                 --- /dev/null\n+++ b/secret\n@@ -0,0 +1 @@\n+s\n\
                 diff --git a/sub/hidden b/sub/hidden\nnew file mode 100644\nindex 0000000..718f4d2\n\
                 --- /dev/null\n+++ b/sub/hidden\n@@ -0,0 +1 @@\n+t\n\
                 diff --git a/tool b/tool\nnew file mode 100755\nindex 0000000..587be6b\n\
                 --- /dev/null\n+++ b/tool\n@@ -0,0 +1 @@\n+x\n"
                    .to_string()
            ),
            Vec::<String>::new(),
            String::new(),
        ),
        "rung {rung}, uid {uid}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn closed_files_are_in_the_patch_on_the_process_rung() {
    closed_files_are_in_the_patch("process").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn closed_files_are_in_the_patch_on_the_sandbox_rung() {
    if !sandbox_available() {
        return;
    }
    closed_files_are_in_the_patch("sandbox").await;
}

/// The `setup_cache` lines of a run's output, each without its key and
/// commit (which name the temporary source).
fn setup_cache_lines(out: &std::process::Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|l| l.split_once("setup_cache: "))
        .map(|(_, l)| match l.split_once(" (key") {
            Some((head, rest)) => {
                format!("{head}{}", rest.split_once(')').map_or("", |(_, t)| t))
            }
            None => l.to_string(),
        })
        .collect()
}

/// What a setup command made and closed (`chmod 000`) is stored in the
/// setup cache and restored by the next job, as with Paddock running as
/// root. Before, the store could not open the file and the cache was never
/// stored ("cannot copy work/deps/f: Permission denied").
async fn closed_files_are_stored_in_the_setup_cache(rung: &str) {
    let uid = user();
    let home = Home::new();
    let repo = repo(home.path());
    let spec = stand_in_job(&home, &repo, "true\n", rung, uid);
    append_to_spec(
        &spec,
        "[setup]\ncommands = ['''mkdir -p deps && echo a > deps/f && chmod 000 deps/f''']\n",
    );
    let first = paddock_as(uid, &home, &["run", spec.to_str().unwrap()]).await;
    let second = paddock_as(uid, &home, &["run", spec.to_str().unwrap()]).await;
    assert_eq!(
        (setup_cache_lines(&first), setup_cache_lines(&second)),
        (
            vec![
                "not in the setup cache; the setup commands run".to_string(),
                "stored in the setup cache: 2 entries, 2 bytes".to_string(),
            ],
            vec![
                "restored from the setup cache: 2 entries, 2 bytes; the setup commands did not run"
                    .to_string()
            ],
        ),
        "rung {rung}, uid {uid}: {}",
        String::from_utf8_lossy(&first.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn closed_files_are_stored_in_the_setup_cache_on_the_process_rung() {
    closed_files_are_stored_in_the_setup_cache("process").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn closed_files_are_stored_in_the_setup_cache_on_the_sandbox_rung() {
    if !sandbox_available() {
        return;
    }
    closed_files_are_stored_in_the_setup_cache("sandbox").await;
}

/// Whether the user Paddock runs as here can make a user namespace of its
/// own (as it counts a directory its job closed); else says why (a
/// failure in CI).
fn user_namespaces() -> bool {
    let as_uid = nix::unistd::geteuid().is_root().then_some(UNPRIVILEGED_UID);
    user_namespaces_available(as_uid)
}

/// A job on `rung` whose stand-in engine runs `work` and finishes its
/// turn, its disk held to `limit` bytes, run by Paddock as the user; its
/// record and the run's stderr.
async fn closing_job(rung: &str, work: &str, limit: u64) -> (paddock_protocol::JobRecord, String) {
    let uid = user();
    let home = Home::new();
    let repo = repo(home.path());
    let spec = stand_in_job(&home, &repo, &finishing(work), rung, uid);
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        "[limits]\n",
        &format!("[limits]\nmax_disk_bytes = {limit}\n"),
    );
    std::fs::write(&spec, text).unwrap();
    let out = paddock_as(uid, &home, &["run", "--json", spec.to_str().unwrap()]).await;
    (
        record(&out),
        format!(
            "rung {rung}, uid {uid}: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// A job that closes directories (`mkdir d; chmod 000 d`, as a test of
/// permission errors does; one holding a small file) finishes `done`
/// with Paddock running as the user: the closed directories are counted
/// in a user namespace of Paddock's own, where they are readable.
/// Before, the disk watcher could not read them and stopped the job.
async fn closed_directories_do_not_stop_the_job(rung: &str) {
    if !user_namespaces() {
        return;
    }
    let (rec, stderr) = closing_job(
        rung,
        "mkdir d && chmod 000 d\n\
         mkdir -p c/e && echo small > c/e/f && chmod 000 c/e c",
        10 << 30,
    )
    .await;
    assert_eq!(
        (rec.status, rec.reason, rec.changed_files),
        (JobStatus::Done, None, vec!["c/e/f".to_string()]),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn closed_directories_do_not_stop_the_job_on_the_process_rung() {
    closed_directories_do_not_stop_the_job("process").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn closed_directories_do_not_stop_the_job_on_the_sandbox_rung() {
    if !sandbox_available() {
        return;
    }
    closed_directories_do_not_stop_the_job("sandbox").await;
}

/// A job that hides 8 MiB in a directory it closed (the file written
/// through a descriptor opened before `chmod 000`, so no walk ever sees
/// it outside the closed directory) is still stopped past its 4 MiB
/// limit, naming the size, with Paddock running as the user: counting
/// closed directories is no way to hide disk. Before, it was stopped as
/// unreadable, the size never seen.
async fn disk_hidden_in_a_closed_directory_is_charged(rung: &str) {
    if !user_namespaces() {
        return;
    }
    let limit: u64 = 4 << 20;
    let (rec, stderr) = closing_job(
        rung,
        "mkdir h && exec 3>h/big && chmod 000 h && head -c 8388608 /dev/zero >&3 && sleep 60",
        limit,
    )
    .await;
    let reason = rec.reason.clone().unwrap_or_default();
    let seen: Option<u64> = reason
        .strip_prefix(&format!(
            "the job wrote more than limits.max_disk_bytes ({limit} bytes) to its directory ("
        ))
        .map(|rest| rest.strip_prefix("at least ").unwrap_or(rest))
        .and_then(|rest| rest.split_once(' '))
        .filter(|(_, rest)| {
            *rest
                == "bytes more than it was given, counted in allocated blocks and at least 4096 \
                    bytes a file); it was stopped"
        })
        .and_then(|(n, _)| n.parse().ok());
    assert_eq!(
        (rec.status, seen.is_some_and(|n| n > limit)),
        (JobStatus::Failed, true),
        "{reason}; {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn disk_hidden_in_a_closed_directory_is_charged_on_the_process_rung() {
    disk_hidden_in_a_closed_directory_is_charged("process").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn disk_hidden_in_a_closed_directory_is_charged_on_the_sandbox_rung() {
    if !sandbox_available() {
        return;
    }
    disk_hidden_in_a_closed_directory_is_charged("sandbox").await;
}

/// Where Paddock, running as the user, cannot make a user namespace (here:
/// it runs in one whose ids are not mapped, so the kernel refuses it
/// another, as it does where unprivileged user namespaces are turned off),
/// a job that closes a directory is still stopped, and the reason names
/// the step that failed.
#[tokio::test(flavor = "multi_thread")]
async fn a_closed_directory_without_a_user_namespace_stops_the_job_naming_why() {
    if !user_namespaces() {
        return;
    }
    let uid = user();
    let home = Home::new();
    let repo = repo(home.path());
    let spec = stand_in_job(
        &home,
        &repo,
        &finishing("mkdir d && chmod 000 d"),
        "process",
        uid,
    );
    let out = paddock_as_in(
        uid,
        &["unshare", "--user", "--"],
        &home,
        &["run", "--json", spec.to_str().unwrap()],
    )
    .await;
    let rec = record(&out);
    let reason = rec.reason.clone().unwrap_or_default();
    // The helper's pid is in the reason: everything around it is compared.
    let (head, tail) = reason.split_once(" (pid ").unwrap_or((&reason, ""));
    let tail = tail.split_once(')').map_or("", |(_, t)| t);
    assert_eq!(
        (rec.status, head, tail),
        (
            JobStatus::Failed,
            "the job's directory holds a directory Paddock cannot read to count against \
             limits.max_disk_bytes (10737418240 bytes); Paddock runs as uid 65534, not root, \
             and could not count it in a user namespace of its own either: __disk-walk",
            " could not count there: unshare(CLONE_NEWUSER), a user namespace of its own: \
             EPERM: Operation not permitted; it was stopped",
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

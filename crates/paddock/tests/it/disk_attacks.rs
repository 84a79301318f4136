//! Attack probes of a job's disk (`limits.max_disk_bytes`, the host's
//! reserve): a hostile job (a stand-in engine, or its setup commands)
//! writes past a small limit (4 MiB) on the `process` and the `sandbox`
//! rung, each way a naive watcher misses (a plain file, `fallocate` beside
//! a sparse GiB, thousands of empty files, a tree deeper than the count
//! enters, a file hard-linked outside its directory, a file removed
//! while held open or mapped, a daemon still writing after the engine
//! exited, a setup command), and a host below its
//! reserve. Each job must end `failed` naming the limit and the size seen,
//! said by a `policy` event of rule `limits`, stopped well before its
//! timeout, its workspace removed like any failed job's. No probe writes
//! more than 8 MiB. A sparse file, which holds no disk, is left out of the
//! patch past the length its staging reads, the job `done`. And the
//! watcher's own cost: a process holding 65,000 mappings of a file with
//! a long path, whose `/proc/PID/maps` (250 MB) each measurement read
//! whole into Paddock's memory.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use paddock_protocol::{EventBody, JobRecord, JobStatus};
use paddock_test_support::prelude::*;

/// The limit every probe sets: 4 MiB.
const LIMIT: u64 = 4 << 20;

const TURN: &str = "echo '{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":1,\"cached_input_tokens\":0,\"output_tokens\":1}}'";

/// The rungs a probe runs on here: `process`, and `sandbox` where one
/// starts (else said: CI fails instead, `sandbox_available`).
fn rungs() -> Vec<&'static str> {
    if sandbox_available() {
        vec!["process", "sandbox"]
    } else {
        vec!["process"]
    }
}

/// Runs a job on `rung` whose engine is `script` (and `setup`, a setup
/// command, first), with the 4 MiB limit and a 60 s timeout; its record
/// and events.
async fn probe(
    rung: &str,
    script: &str,
    setup: Option<&str>,
    env: &[(&str, &str)],
) -> (JobRecord, Vec<EventBody>, Vec<String>) {
    let home = Home::new();
    let spec = fake_codex_job(&home, rung, script, 60);
    let mut text = std::fs::read_to_string(&spec).unwrap().replace(
        "timeout_secs = 60",
        &format!("timeout_secs = 60\nmax_disk_bytes = {LIMIT}"),
    );
    if let Some(line) = setup {
        text.push_str(&format!(
            "\n[setup]\ncommands = [{}]\ncache = false\n",
            toml_string(line)
        ));
    }
    std::fs::write(&spec, text).unwrap();
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], env)
        .await;
    let rec = record(&out);
    let events = home.event_bodies(&rec.id).await;
    (rec, events, home.leftover_workspaces())
}

fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The size a disk-limit reason names, when it is one.
fn seen(reason: &str) -> Option<u64> {
    let rest = reason.strip_prefix(&format!(
        "the job wrote more than limits.max_disk_bytes ({LIMIT} bytes) to its directory ("
    ))?;
    let rest = rest.strip_prefix("at least ").unwrap_or(rest);
    let (n, rest) = rest.split_once(' ')?;
    (rest
        == "bytes more than it was given, counted in allocated blocks and at least 4096 bytes a \
            file); it was stopped")
        .then(|| n.parse().ok())
        .flatten()
}

/// What a probe must end with: `failed` for `reason` (said by a `policy`
/// event), its workspace gone.
fn ended(rung: &str, (rec, events, left): &(JobRecord, Vec<EventBody>, Vec<String>)) -> String {
    let reason = rec.reason.clone().unwrap_or_default();
    assert_eq!(
        (
            rec.status,
            events.contains(&EventBody::Policy {
                rule: "limits".into(),
                message: reason.clone(),
            }),
            left.clone()
        ),
        (JobStatus::Failed, true, Vec::<String>::new()),
        "{rung}: {reason}; events {events:?}"
    );
    // The host kept its reserve (512 MiB, the default).
    let fs = nix::sys::statvfs::statvfs(std::env::temp_dir().as_path()).unwrap();
    #[allow(clippy::useless_conversion)]
    let free = u64::from(fs.blocks_available()) * u64::from(fs.fragment_size());
    assert!(free > 512 << 20, "{rung}: {free} bytes free");
    reason
}

/// Asserts the job on `rung` failed past the 4 MiB limit, having written
/// at least `at_least` bytes.
fn past_limit(rung: &str, probed: &(JobRecord, Vec<EventBody>, Vec<String>), at_least: u64) {
    let reason = ended(rung, probed);
    let n = seen(&reason);
    assert!(
        n.is_some_and(|n| n > LIMIT && n >= at_least.min(LIMIT)),
        "{rung}: {reason}"
    );
}

/// A plain file past the limit in the work tree: the engine is stopped
/// while it runs (it would sleep a minute).
#[tokio::test(flavor = "multi_thread")]
async fn a_file_past_the_limit_stops_the_job() {
    for rung in rungs() {
        let probed = probe(rung, "head -c 8388608 /dev/zero > big; sleep 60", None, &[]).await;
        past_limit(rung, &probed, 8 << 20);
    }
}

/// A sparse GiB holds nothing and is not charged; an `fallocate`d file
/// holds what it reserved, unwritten, and is.
#[tokio::test(flavor = "multi_thread")]
async fn fallocate_is_charged_and_a_sparse_file_is_not() {
    for rung in rungs() {
        let probed = probe(
            rung,
            "truncate -s 1G \"$TMPDIR/sparse\"; fallocate -l 8388608 \"$TMPDIR/reserved\"; sleep 60",
            None,
            &[],
        )
        .await;
        past_limit(rung, &probed, 8 << 20);
    }
}

/// Two thousand empty files hold no block but an inode each: 4 KiB each.
#[tokio::test(flavor = "multi_thread")]
async fn many_empty_files_are_charged() {
    for rung in rungs() {
        let probed = probe(
            rung,
            "mkdir \"$HOME/many\" && cd \"$HOME/many\" && seq 1 2000 | xargs touch; sleep 60",
            None,
            &[],
        )
        .await;
        past_limit(rung, &probed, 2000 * 4096);
    }
}

/// A tree deeper than the count enters cannot hide a file in it: the job
/// is stopped for the tree.
#[tokio::test(flavor = "multi_thread")]
async fn a_tree_too_deep_to_count_stops_the_job() {
    for rung in rungs() {
        let probed = probe(
            rung,
            "d=\"$TMPDIR\"; for i in $(seq 300); do d=\"$d/d\"; done; mkdir -p \"$d\" && \
             head -c 1000000 /dev/zero > \"$d/hidden\"; sleep 60",
            None,
            &[],
        )
        .await;
        let reason = ended(rung, &probed);
        assert_eq!(
            reason,
            format!(
                "the job's directory holds directories deeper than 256 levels, deeper than \
                 Paddock counts against limits.max_disk_bytes ({LIMIT} bytes); it was stopped"
            ),
            "{rung}"
        );
    }
}

/// A file removed while the job still holds it open keeps its blocks,
/// and no walk of the directory sees it (it has no name): before, a job
/// held as much as it liked that way (`exec 3>big; rm big`, then writing
/// on), past its limit until the host's reserve stopped it and every
/// other job. Held open past the limit, it stops the job as a named file
/// does.
#[tokio::test(flavor = "multi_thread")]
async fn a_removed_file_held_open_is_charged() {
    for rung in rungs() {
        let probed = probe(
            rung,
            "exec 3>\"$TMPDIR/held\"; rm \"$TMPDIR/held\"; head -c 8388608 /dev/zero >&3; \
             sleep 60",
            None,
            &[],
        )
        .await;
        past_limit(rung, &probed, 8 << 20);
    }
}

/// The same file held by a mapping only (mapped, its descriptor closed,
/// then removed: no descriptor names it) is charged too.
#[tokio::test(flavor = "multi_thread")]
async fn a_removed_file_held_by_a_mapping_is_charged() {
    for rung in rungs() {
        let probed = probe(
            rung,
            "python3 -c 'import mmap, os, time; p = os.path.join(os.environ[\"TMPDIR\"], \
             \"mapped\"); f = open(p, \"w+b\"); os.posix_fallocate(f.fileno(), 0, 8388608); \
             m = mmap.mmap(f.fileno(), 8388608); f.close(); os.unlink(p); time.sleep(60)'",
            None,
            &[],
        )
        .await;
        past_limit(rung, &probed, 8 << 20);
    }
}

/// A process of the job holding 65,000 mappings of one removed file
/// whose path is 3,800 bytes long (15 directories of 250 characters):
/// its `/proc/PID/maps` is 250 MB, which each of the disk watcher's
/// measurements read whole into Paddock's memory (and where that
/// allocation failed, skipped: the mappings went uncounted). Paddock's
/// peak resident memory, read from its `/proc/PID/status` while the job
/// runs, was over 256 MiB before; now `maps` is read a line at a time.
#[tokio::test(flavor = "multi_thread")]
async fn a_process_holding_many_mappings_of_a_long_path_is_measured_in_bounded_memory() {
    for rung in rungs() {
        let home = Home::new();
        let script = finishing(
            "python3 -c 'import ctypes, os, time\n\
             libc = ctypes.CDLL(None)\n\
             libc.mmap.restype = ctypes.c_void_p\n\
             libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]\n\
             d = os.environ[\"TMPDIR\"]\n\
             for i in range(15): d = os.path.join(d, chr(97 + i) * 250)\n\
             os.makedirs(d)\n\
             f = os.path.join(d, \"f\")\n\
             open(f, \"wb\").write(bytes(4096))\n\
             fd = os.open(f, os.O_RDONLY)\n\
             for i in range(65000): libc.mmap(None, 4096, 1, 2, fd, 0)\n\
             os.close(fd)\n\
             os.unlink(f)\n\
             time.sleep(5)\n'",
        );
        let spec = fake_codex_job(&home, rung, &script, 60);
        let child = home
            .command(&["run", "--json", spec.to_str().unwrap()])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let (out, peak) = paddock_test_support::processes::output_and_peak_kib(child).await;
        assert_eq!(
            (record(&out).status, peak < 160 << 10),
            (JobStatus::Done, true),
            "{rung}: paddock's peak resident memory {peak} KiB"
        );
    }
}

/// A file with a second name outside the job's directory (in the jobs
/// directory, which the `process` rung's job can write; the sandbox's
/// cannot reach it) counts whole, not half: a walk dividing a file among
/// its links would see 3 MiB here.
#[tokio::test(flavor = "multi_thread")]
async fn a_file_linked_outside_counts_whole() {
    for rung in rungs() {
        let (rec, events, mut left) = probe(
            rung,
            "head -c 6291456 /dev/zero > \"$TMPDIR/big\"; \
             ln \"$TMPDIR/big\" \"$TMPDIR/../../linked-outside\" 2>/dev/null; sleep 60",
            None,
            &[],
        )
        .await;
        let linked = left.iter().any(|n| n == "linked-outside");
        left.retain(|n| n != "linked-outside");
        assert_eq!(linked, rung == "process", "{rung}: {left:?}");
        past_limit(rung, &(rec, events, left), 6 << 20);
    }
}

/// A daemon the engine left keeps writing after the engine exited (its
/// turn done): the job still fails.
#[tokio::test(flavor = "multi_thread")]
async fn a_daemon_writing_after_the_engine_exits_fails_the_job() {
    for rung in rungs() {
        let script = format!(
            "(setsid sh -c 'head -c 8388608 /dev/zero > \"$TMPDIR/d\"; sleep 60' &)\n\
             while [ \"$(stat -c %s \"$TMPDIR/d\" 2>/dev/null)\" != 8388608 ]; do sleep 0.05; done\n\
             {TURN}"
        );
        let probed = probe(rung, &script, None, &[]).await;
        past_limit(rung, &probed, 8 << 20);
    }
}

/// A setup command past the limit is stopped before the engine starts.
#[tokio::test(flavor = "multi_thread")]
async fn a_setup_command_past_the_limit_stops_the_job() {
    for rung in rungs() {
        let probed = probe(
            rung,
            &format!("touch engine-started; {TURN}"),
            Some("head -c 8388608 /dev/zero > big; sleep 60"),
            &[],
        )
        .await;
        past_limit(rung, &probed, 8 << 20);
        assert!(
            !probed.1.iter().any(|e| matches!(
                e,
                EventBody::Status {
                    phase: paddock_protocol::Phase::TurnCompleted,
                    ..
                }
            )),
            "{rung}: the engine started: {:?}",
            probed.1
        );
    }
}

/// The host's floor: with the jobs file system below the reserve (here a
/// reserve no disk has free) the job is refused at provisioning, before
/// its base is checked out (`workspace/checkout_size.rs`), nothing left
/// behind. (Before 0328f4e3 it started and the disk watcher stopped it;
/// the watcher's floor, for a host that falls below it while a job runs,
/// is `runner::disk_watch::tests::a_file_system_below_the_reserve_stops_the_job`.)
#[tokio::test(flavor = "multi_thread")]
async fn a_host_below_its_reserve_stops_the_job() {
    for rung in rungs() {
        let (rec, _, left) = probe(
            rung,
            "sleep 60",
            None,
            &[("PADDOCK_DISK_RESERVE_MB", "1000000000000")],
        )
        .await;
        let reason = rec.reason.clone().unwrap_or_default();
        assert_eq!(
            (
                rec.status,
                left,
                reason.contains(
                    "less the host's reserve of 1048576000000000000 bytes \
                     (PADDOCK_DISK_RESERVE_MB); nothing was checked out"
                )
            ),
            (JobStatus::Failed, Vec::<String>::new(), true),
            "{rung}: {reason}"
        );
    }
}

/// A job within its disk whose result is larger (three MiB of empty lines
/// are a six MiB patch): its diff is stopped once past the limit (not read
/// whole into Paddock's memory), neither the patch nor the branch's bundle
/// is kept, and the job fails saying so.
#[tokio::test(flavor = "multi_thread")]
async fn a_result_past_the_limit_is_not_kept() {
    for rung in rungs() {
        let home = Home::new();
        let spec = fake_codex_job(
            &home,
            rung,
            &format!("yes '' | head -c 3145728 > lines.txt\n{TURN}"),
            60,
        );
        let text = std::fs::read_to_string(&spec).unwrap().replace(
            "timeout_secs = 60",
            &format!("timeout_secs = 60\nmax_disk_bytes = {LIMIT}"),
        );
        std::fs::write(&spec, text).unwrap();
        let out = home
            .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
            .await;
        let rec = record(&out);
        let events: Vec<EventBody> = home.event_bodies(&rec.id).await;
        let reason = ended(rung, &(rec.clone(), events, home.leftover_workspaces()));
        let artifacts = home.data().join("artifacts").join(&rec.id);
        let mut kept: Vec<String> = std::fs::read_dir(&artifacts)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("patch") || n.contains("bundle"))
            .collect();
        kept.sort();
        // The diff is stopped once past the limit, never read whole.
        assert_eq!(
            (reason.as_str(), kept),
            (
                format!(
                    "the job's result is larger than limits.max_disk_bytes or the {} bytes \
                     Paddock reads of a patch, whichever is less ({LIMIT} bytes): its diff was \
                     stopped past them; neither the patch nor the branch's bundle is kept",
                    paddock::workspace::MAX_PATCH_BYTES
                )
                .as_str(),
                Vec::<String>::new()
            ),
            "{rung}"
        );
    }
}

/// A host profile's `max_disk_mb` caps what a spec asks for: a job asking
/// for a TiB under a profile of 4 MiB is stopped past 4 MiB.
#[tokio::test(flavor = "multi_thread")]
async fn a_host_profiles_cap_holds_a_spec_asking_more() {
    for rung in rungs() {
        let home = Home::new();
        home.add_profile(r#"{"id":"disk-capped","max_disk_mb":4}"#)
            .await;
        let spec = fake_codex_job(&home, rung, "head -c 8388608 /dev/zero > big; sleep 60", 60);
        let text = std::fs::read_to_string(&spec).unwrap().replace(
            "timeout_secs = 60",
            "timeout_secs = 60\nmax_disk_bytes = 1099511627776",
        );
        std::fs::write(
            &spec,
            format!("{text}\n[policy]\nprofile = \"disk-capped\"\n"),
        )
        .unwrap();
        let out = home
            .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
            .await;
        let rec = record(&out);
        let events: Vec<EventBody> = home.event_bodies(&rec.id).await;
        past_limit(rung, &(rec, events, home.leftover_workspaces()), 8 << 20);
    }
}

/// A sparse file of 50 GiB (`truncate -s`: no block held, within the
/// 4 MiB limit) beside the job's work: the job is `done`, its patch holds
/// the work and not the file, and a warning (in its events and closeout)
/// names the file, its length and the bound. Before, the patch's
/// `update-index` read and hashed all 50 GiB (a minute a 4 GiB here), for
/// up to git's 600 s timeout, and the job then had no patch at all.
#[tokio::test(flavor = "multi_thread")]
async fn a_huge_sparse_file_is_left_out_of_the_patch_and_said() {
    for rung in rungs() {
        let home = Home::new();
        let spec = fake_codex_job(
            &home,
            rung,
            &format!("truncate -s 50G huge.bin && echo work > work.txt\n{TURN}"),
            60,
        );
        let text = std::fs::read_to_string(&spec).unwrap().replace(
            "timeout_secs = 60",
            &format!("timeout_secs = 60\nmax_disk_bytes = {LIMIT}"),
        );
        std::fs::write(&spec, text).unwrap();
        let out = home
            .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
            .await;
        let rec = record(&out);
        let said = format!(
            "huge.bin ({} bytes): left out of the patch, longer than Paddock stages: it reads \
             at most {} bytes of the files the job changed, together, the most of a patch it \
             reads",
            50u64 << 30,
            1u64 << 30
        );
        let warned = home
            .event_bodies(&rec.id)
            .await
            .contains(&EventBody::Error {
                source: Some("paddock".into()),
                message: said.clone(),
                fatal: false,
            });
        let artifacts = home.data().join("artifacts").join(&rec.id);
        let closeout = std::fs::read_to_string(artifacts.join("closeout.md")).unwrap_or_default();
        let patch = std::fs::read_to_string(artifacts.join("patch.diff")).unwrap_or_default();
        assert_eq!(
            (
                rec.status,
                rec.changed_files.clone(),
                warned,
                closeout.contains(&said[..120]),
                patch.contains("huge.bin"),
            ),
            (
                JobStatus::Done,
                vec!["work.txt".to_string()],
                true,
                true,
                false
            ),
            "{rung}: {:?}\n{closeout}",
            rec.reason
        );
    }
}

/// A hostile source repository whose base checks out to far more than
/// the job's disk: one 64 MiB blob of a repeated line (a few hundred KiB
/// packed) at 4 paths, 256 MiB checked out, under the 4 MiB limit, in the
/// clone layout and the default one (the overlay's shared snapshot where
/// the host mounts one). The job fails at provisioning naming the size
/// and the limit, before anything is checked out: neither the job's
/// directory nor `.snapshots` ever holds the files, and nothing is left
/// behind. Before, the checkout was bounded only by the checkout's CPU
/// (8 GB written in 21 s of it) and never charged to the job: the job ran
/// `done` on 256 MiB it was never given.
#[tokio::test(flavor = "multi_thread")]
async fn a_base_checking_out_past_the_limit_is_refused_before_its_checkout() {
    for layout in ["clone", "auto"] {
        let home = Home::new();
        let spec = fake_codex_job(&home, "process", TURN, 60);
        let text = std::fs::read_to_string(&spec).unwrap().replace(
            "timeout_secs = 60",
            &format!("timeout_secs = 60\nmax_disk_bytes = {LIMIT}"),
        );
        std::fs::write(&spec, text).unwrap();
        // The blob: written once to a temporary file, hashed in, deleted.
        let repo = home.path().join("repo");
        let blob_file = home.path().join("blob.txt");
        let line = b"all work and no play makes a hostile repository\n";
        let big = line.repeat((64 << 20) / line.len() + 1);
        std::fs::write(&blob_file, &big[..64 << 20]).unwrap();
        drop(big);
        let id = git(&repo, &["hash-object", "-w", blob_file.to_str().unwrap()]);
        std::fs::remove_file(&blob_file).unwrap();
        for n in 0..4 {
            let info = format!("100644,{},big/{n}.txt", id.trim());
            git(&repo, &["update-index", "--add", "--cacheinfo", &info]);
        }
        git(&repo, &["commit", "-q", "-m", "big"]);
        let commit = git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
        let env: &[(&str, &str)] = match layout {
            "clone" => &[("PADDOCK_WORKSPACE_LAYOUT", "clone")],
            _ => &[],
        };
        let out = home
            .paddock(&["run", "--json", spec.to_str().unwrap()], env)
            .await;
        let rec = record(&out);
        let reason = rec.reason.clone().unwrap_or_default();
        // README.md (one block), the directory big/ (one block), then the
        // first 64 MiB file: the listing stops there.
        let said = reason.split_once(": ").map(|(at, said)| {
            (
                at.starts_with(&format!("workspace {}/", home.jobs().display())),
                said.to_string(),
            )
        });
        assert_eq!(
            (rec.status, said),
            (
                JobStatus::Failed,
                Some((
                    true,
                    format!(
                        "the base commit {commit} checks out to at least {} bytes, past \
                         limits.max_disk_bytes ({LIMIT} bytes); nothing was checked out",
                        4096 + 4096 + (64 << 20)
                    )
                ))
            ),
            "{layout}: {reason}"
        );
        assert_eq!(home.leftover_workspaces(), Vec::<String>::new(), "{layout}");
        // What the jobs directory holds now: the lock and mirror files,
        // nothing of the checkout.
        assert!(
            held(&home.jobs()) < LIMIT,
            "{layout}: {} bytes under {}",
            held(&home.jobs()),
            home.jobs().display()
        );
    }
}

/// A base of one small file 1,100 directories deep: each directory the
/// checkout makes is a block the disk watcher counts, 1,100 blocks past
/// the 4 MiB limit (1,024 blocks). Refused at provisioning as a base of
/// large files is. Before, directories were not counted: the listing
/// saw one small file, and the job ran.
#[tokio::test(flavor = "multi_thread")]
async fn a_base_of_deep_directories_is_counted_by_its_directories() {
    let home = Home::new();
    let spec = fake_codex_job(&home, "process", TURN, 60);
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        "timeout_secs = 60",
        &format!("timeout_secs = 60\nmax_disk_bytes = {LIMIT}"),
    );
    std::fs::write(&spec, text).unwrap();
    let repo = home.path().join("repo");
    let deep: std::path::PathBuf = std::iter::repeat_n("d", 1100).collect();
    std::fs::create_dir_all(repo.join(&deep)).unwrap();
    std::fs::write(repo.join(&deep).join("f.txt"), "x\n").unwrap();
    git(&repo, &["add", "d"]);
    git(&repo, &["commit", "-q", "-m", "deep"]);
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    let rec = record(&out);
    let reason = rec.reason.clone().unwrap_or_default();
    assert_eq!(
        (
            rec.status,
            reason.contains(&format!(
                "past limits.max_disk_bytes ({LIMIT} bytes); nothing was checked out"
            ))
        ),
        (JobStatus::Failed, true),
        "{reason}"
    );
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
}

/// The bytes of every file under `dir` (no link followed).
fn held(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .map(|e| {
            let e = e.unwrap();
            let meta = std::fs::symlink_metadata(e.path()).unwrap();
            match meta.is_dir() {
                true => held(&e.path()),
                false => meta.len(),
            }
        })
        .sum()
}

//! The sandbox probe's last success, kept in the host directory so that a
//! `paddock run` need not start a whole sandbox (`true` in a minimal
//! policy: about 6.5 ms of CPU, issue #14's start-up path) to learn again
//! what the previous job of this host learnt a moment ago.
//!
//! Only a success is kept, and only for [`FRESH_FOR`], under a key of what
//! decides whether a sandbox starts ([`key`]): the boot, the helper binary
//! (device, inode, size, times), the caller's ids, namespaces, capability
//! sets, seccomp and no-new-privileges state and security label, and the
//! kernel's switches for unprivileged namespaces and its security modules.
//! Any of them different, the record too old (or dated in the future), a
//! record that is not Paddock's own file (a link, a FIFO, too long, owned
//! by another user or writable by others: a host directory shared with
//! them, `--host-dir`, let another user plant a record under this user's
//! key, which anyone can compute, and fail every `auto` job) or not its
//! shape: the probe runs as before. A failed probe is never kept,
//! so a host that cannot start a sandbox says why on every run.
//!
//! Why a stale record cannot weaken a job: a kept success only makes the
//! job start on the `sandbox` rung, whose helper sets up every protection
//! itself and fails the job (exit 125, the step named) when one cannot be
//! set; it never runs a job with less. A `process`-rung job, which runs as
//! Paddock's user, could write the record: it can then only make the next
//! job try the sandbox. A helper that ended in its set-up (its "the
//! command runs" pipe closed unwritten and its exit 125: `sandbox.rs`'s
//! `SandboxRun`) clears the record ([`ProbeCache::forget`]), so the job
//! after it probes again; the job's own command exiting 125 does not (it
//! ran, so the sandbox started). An `auto` job whose set-up failed at its
//! first launch asks afresh and moves to the `process` rung where no
//! sandbox starts (`runner/rung_fallback.rs`); any other fails with the
//! helper's words (`RungError::SandboxSetup`).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

/// How long a success is taken as the answer.
pub const FRESH_FOR: Duration = Duration::from_secs(3600);

/// The record's file name in the host directory.
pub const FILE: &str = "sandbox-probe.json";

/// The most of the record read.
const MAX_RECORD: u64 = 16 * 1024;

/// The kernel's switches read into the key (absent ones as absent).
const SWITCHES: &[&str] = &[
    "/proc/sys/kernel/unprivileged_userns_clone",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_unconfined",
    "/proc/sys/user/max_user_namespaces",
    "/proc/sys/user/max_mnt_namespaces",
    "/proc/sys/user/max_pid_namespaces",
    "/proc/sys/user/max_net_namespaces",
    "/proc/sys/user/max_ipc_namespaces",
    "/proc/sys/user/max_uts_namespaces",
    "/proc/sys/user/max_cgroup_namespaces",
    "/proc/sys/kernel/seccomp/actions_avail",
    "/sys/kernel/security/lsm",
    "/proc/self/attr/current",
];

/// The caller's namespaces read into the key.
const NAMESPACES: &[&str] = &["user", "mnt", "pid", "net", "ipc", "uts", "cgroup"];

/// The lines of `/proc/self/status` read into the key.
const STATUS_FIELDS: &[&str] = &[
    "Uid:",
    "Gid:",
    "CapInh:",
    "CapPrm:",
    "CapEff:",
    "CapBnd:",
    "CapAmb:",
    "NoNewPrivs:",
    "Seccomp:",
];

/// The record on disk.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Record {
    key: String,
    /// When the probe succeeded, seconds since the epoch.
    at: u64,
}

/// The record of one host directory.
#[derive(Debug, Clone)]
pub struct ProbeCache {
    path: PathBuf,
}

impl ProbeCache {
    /// The record in `host_dir` (made when a success is kept).
    pub fn in_dir(host_dir: &Path) -> ProbeCache {
        ProbeCache {
            path: host_dir.join(FILE),
        }
    }

    /// The record's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether a success under `key` is kept and fresh at `now`.
    pub fn holds(&self, key: &str, now: SystemTime) -> bool {
        let Ok(text) = crate::own_file::read_own(&self.path, MAX_RECORD) else {
            return false;
        };
        let Ok(record) = serde_json::from_str::<Record>(&text) else {
            return false;
        };
        let Some(at) = SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(record.at)) else {
            return false;
        };
        record.key == key && now.duration_since(at).is_ok_and(|age| age < FRESH_FOR)
    }

    /// Keeps a success under `key` at `now`: written to a new file beside
    /// the record and renamed over it (`own_file::replace`: a reader never
    /// sees half of one; a link planted there is replaced, not followed,
    /// and nothing planted beside it is written through). The host
    /// directory is made when missing.
    pub fn keep(&self, key: &str, now: SystemTime) -> std::io::Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let at = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_err(std::io::Error::other)?
            .as_secs();
        let text = serde_json::to_string(&Record {
            key: key.to_string(),
            at,
        })
        .map_err(std::io::Error::other)?;
        // A new file (`O_EXCL`, no link followed) renamed over the
        // record: a file planted at a name it may be written under (a
        // hard link to another of this user's files, in a directory
        // shared with another user) is never written through.
        crate::own_file::replace(&self.path, text.as_bytes())
    }

    /// Clears the record (a sandbox that did not set up): the next job
    /// probes again. Absent already is fine.
    pub fn forget(&self) {
        if let Err(e) = std::fs::remove_file(&self.path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(path = %self.path.display(), error = %e, "clear the sandbox probe's record");
            }
        }
    }
}

/// What decides whether a sandbox starts for this process with the helper
/// `exe` (module text), as one text; an error when the boot or the helper
/// cannot be read (then nothing is kept or taken).
pub fn key(exe: &Path) -> std::io::Result<String> {
    use std::fmt::Write as _;
    use std::os::unix::fs::MetadataExt as _;

    let mut key = String::new();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")?;
    let _ = writeln!(key, "boot {}", boot.trim());
    let m = std::fs::metadata(exe)?;
    let _ = writeln!(
        key,
        "exe {} {} {} {} {}.{} {}.{}",
        exe.display(),
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec()
    );
    let status = std::fs::read_to_string("/proc/self/status")?;
    for field in STATUS_FIELDS {
        let line = status
            .lines()
            .find(|l| l.starts_with(field))
            .unwrap_or("absent");
        let _ = writeln!(key, "{field} {}", line.trim_start_matches(field).trim());
    }
    for ns in NAMESPACES {
        let link = std::fs::read_link(format!("/proc/self/ns/{ns}"))
            .map(|l| l.display().to_string())
            .unwrap_or_else(|e| format!("unreadable {}", e.kind()));
        let _ = writeln!(key, "ns {ns} {link}");
    }
    for switch in SWITCHES {
        let value = match std::fs::read(switch) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).trim().replace('\n', " "),
            Err(e) => format!("unreadable {}", e.kind()),
        };
        let _ = writeln!(key, "{switch} {value}");
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
    }

    /// A success kept is taken under the same key while fresh; another
    /// key, an old record, one dated ahead, a forgotten one are not.
    #[test]
    fn a_success_is_taken_only_under_its_key_while_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ProbeCache::in_dir(&dir.path().join("host"));
        assert!(!cache.holds("k", now()));
        cache.keep("k", now()).unwrap();
        assert!(cache.holds("k", now()));
        assert!(cache.holds("k", now() + FRESH_FOR - Duration::from_secs(1)));
        assert!(!cache.holds("k", now() + FRESH_FOR));
        assert!(!cache.holds("k", now() - Duration::from_secs(60)));
        assert!(!cache.holds("other", now()));
        cache.forget();
        assert!(!cache.holds("k", now()));
        cache.forget();
        // Nothing but the record is left in the directory.
        cache.keep("k", now()).unwrap();
        let names: Vec<String> = std::fs::read_dir(dir.path().join("host"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec![FILE.to_string()]);
    }

    /// A record that is not Paddock's own file or not its shape is no
    /// success; a link planted where it is kept is replaced, its target
    /// untouched.
    #[test]
    fn a_record_that_is_not_paddocks_own_is_no_success() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ProbeCache::in_dir(dir.path());
        let good = serde_json::to_string(&Record {
            key: "k".into(),
            at: 1_800_000_000,
        })
        .unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, &good).unwrap();
        std::os::unix::fs::symlink(&elsewhere, cache.path()).unwrap();
        assert!(!cache.holds("k", now()), "a link is not the record");
        cache.keep("k", now()).unwrap();
        assert!(cache.holds("k", now()));
        assert!(std::fs::symlink_metadata(cache.path()).unwrap().is_file());
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), good);

        for bad in [
            "",
            "{",
            "{\"key\":\"k\"}",
            "[1,2]",
            "{\"key\":\"k\",\"at\":-1}",
        ] {
            std::fs::write(cache.path(), bad).unwrap();
            assert!(!cache.holds("k", now()), "{bad:?}");
        }
        let long = format!(
            "{{\"key\":\"{}\",\"at\":1800000000}}",
            "k".repeat(MAX_RECORD as usize)
        );
        std::fs::write(cache.path(), long).unwrap();
        assert!(!cache.holds(&"k".repeat(MAX_RECORD as usize), now()));
        std::fs::remove_file(cache.path()).unwrap();
        nix::unistd::mkfifo(cache.path(), nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(!cache.holds("k", now()), "a FIFO is not waited on");
    }

    /// A hard link planted where the record's new text was written (its
    /// name then: `.sandbox-probe.json.PID.tmp`, opened without
    /// `O_EXCL`) to another file of this user's is not written through:
    /// that file keeps its text. Before, keeping a success emptied it and
    /// wrote the record into it.
    #[test]
    fn a_hard_link_planted_beside_the_record_is_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let host = dir.path().join("host");
        std::fs::create_dir(&host).unwrap();
        let mine = dir.path().join("bashrc");
        std::fs::write(&mine, "mine").unwrap();
        std::fs::hard_link(
            &mine,
            host.join(format!(".{FILE}.{}.tmp", std::process::id())),
        )
        .unwrap();
        let cache = ProbeCache::in_dir(&host);
        cache.keep("k", now()).unwrap();
        assert_eq!(
            (
                cache.holds("k", now()),
                std::fs::read_to_string(&mine).unwrap()
            ),
            (true, "mine".to_string())
        );
    }

    /// A record another user wrote (in a host directory shared with
    /// them), or one others may write, is no success, whatever it says;
    /// this user's own is. Before, another user could plant a success
    /// under this user's key (which anyone can compute) and have every
    /// `auto` job of this user's try a sandbox that cannot start.
    #[test]
    fn a_record_of_another_user_is_no_success() {
        use std::os::unix::fs::PermissionsExt as _;
        if !nix::unistd::geteuid().is_root() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "giving a file to another user needs root in CI"
            );
            eprintln!("skipping: giving a file to another user needs root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let cache = ProbeCache::in_dir(dir.path());
        cache.keep("k", now()).unwrap();
        let own = cache.holds("k", now());
        let nobody = nix::unistd::Uid::from_raw(65534);
        nix::unistd::chown(cache.path(), Some(nobody), None).unwrap();
        let theirs = cache.holds("k", now());
        nix::unistd::chown(cache.path(), Some(nix::unistd::geteuid()), None).unwrap();
        std::fs::set_permissions(cache.path(), std::fs::Permissions::from_mode(0o666)).unwrap();
        let writable = cache.holds("k", now());
        assert_eq!((own, theirs, writable), (true, false, false));
    }

    /// The key names the helper binary as it is: another binary, or the
    /// same one rewritten, is another key; the same process and binary
    /// read it twice alike.
    #[test]
    fn the_key_changes_with_the_helper_binary() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::fs::write(&a, b"one").unwrap();
        std::fs::write(&b, b"one").unwrap();
        let ka = key(&a).unwrap();
        assert_eq!(key(&a).unwrap(), ka);
        assert_ne!(key(&b).unwrap(), ka);
        std::fs::write(&a, b"two!").unwrap();
        assert_ne!(key(&a).unwrap(), ka);
        assert!(key(&dir.path().join("missing")).is_err());
        // What the module names is in it.
        for part in [
            "boot ",
            "CapEff:",
            "Seccomp:",
            "NoNewPrivs:",
            "ns user ",
            "ns mnt ",
        ] {
            assert!(ka.contains(part), "{part} in {ka}");
        }
    }
}

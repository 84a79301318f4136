//! The sandbox a job's engine runs in on the `sandbox` rung
//! (`rung/sandbox.rs` starts it): the running `paddock` binary re-executed
//! as the sandbox helper with the policy built here, the engine's install
//! directories read-only, the job's work, home and tmp writable, and the
//! broker reachable only through the forwarder at
//! `127.0.0.1:`[`SANDBOX_BROKER_PORT`] inside the job's network namespace
//! (and its egress proxy, when it has one, at [`SANDBOX_EGRESS_PORT`]);
//! a host profile's caps, hidden programs and hook paths applied.

use std::path::{Path, PathBuf};

use paddock_sandbox::policy::{ETC_RO, SYSTEM_RO};
use paddock_sandbox::{protected_in, Forward, Limits, NetMode, Policy};

use crate::engines::CommandSpec;
use crate::policy::JobPolicy;

/// The loopback port of the broker forwarder inside a sandbox.
pub const SANDBOX_BROKER_PORT: u16 = 8080;

/// The loopback port of the egress proxy's forwarder inside a sandbox
/// (a job with a `[setup]` or `[network]` list only; docs/egress.md).
pub const SANDBOX_EGRESS_PORT: u16 = 8081;

/// Size of a sandboxed job's private /tmp.
const SANDBOX_TMP_MB: u64 = 512;

/// The default cap on a sandboxed job's processes and threads (a cgroup
/// `pids.max`): far above what the engines use (Node's and tokio's thread
/// pools, a build's compilers), low enough to stop a fork bomb.
pub const SANDBOX_PIDS: u64 = 1024;

/// The caps every sandboxed job gets: the default pids cap. It is best
/// effort (`allow_without_cgroups` in [`SandboxPaths`]): a host where the
/// job's cgroup cannot be created (an ordinary user without a delegated
/// cgroup) runs the job without it, and the runner says so once on the
/// job's stream (the helper's notice, `SandboxPaths::notices`). A host
/// profile's memory and CPU caps are enforced.
pub fn default_limits() -> Limits {
    Limits {
        memory_mb: None,
        pids: Some(SANDBOX_PIDS),
        cpu_percent: None,
    }
}

/// The job's paths a sandbox needs.
#[derive(Debug, Clone)]
pub struct SandboxPaths {
    pub job_id: String,
    pub work: PathBuf,
    pub home: PathBuf,
    pub tmp: PathBuf,
    /// The broker's Unix socket for this job.
    pub broker_socket: PathBuf,
    /// The egress proxy's Unix socket, when the job has one: forwarded
    /// from `127.0.0.1:`[`SANDBOX_EGRESS_PORT`].
    pub egress_socket: Option<PathBuf>,
    /// The direct-connection watcher's report socket and the command's
    /// phase (docs/egress.md, "Direct connections"), when watched.
    pub direct: Option<paddock_sandbox::DirectWatch>,
    /// Backstop wall-clock limit (the runner's own timeout comes first).
    pub timeout_secs: u64,
    /// Further read-only and writable paths (the host profile's hook).
    pub extra_ro: Vec<PathBuf>,
    pub extra_rw: Vec<PathBuf>,
    /// cgroup caps (the host profile's `mem_limit_mb` and `cpu_limit`).
    pub limits: Limits,
    /// Run without the caps when this host cannot apply them (the spec
    /// accepted them as degraded).
    pub allow_without_cgroups: bool,
    /// Where the job's cgroups are made (`PADDOCK_CGROUP_ROOT`, a delegated
    /// cgroup); None: `/sys/fs/cgroup`.
    pub cgroup_root: Option<PathBuf>,
    /// Where the helper writes the caps it ran without (outside the job's
    /// view), for the runner to report once; None: the command's stderr.
    pub notices: Option<PathBuf>,
    /// Host files absent from the view (the host profile's denied programs).
    pub hidden: Vec<PathBuf>,
}

/// Applies a host profile to a sandboxed job: its memory and CPU caps
/// become cgroup caps, the programs it denies by name are hidden
/// (`policy::hidden`), and the engine hook (`paddock hook pre-tool-use`)
/// gets what it needs inside: the `paddock` binary and the profile
/// read-only, the denial record writable.
pub fn apply_profile(
    paths: &mut SandboxPaths,
    policy: &JobPolicy,
    accepted_degraded: &[String],
    paddock_exe: Option<&Path>,
    meta: &Path,
    engine_path: Option<&str>,
) -> std::io::Result<()> {
    paths.hidden = crate::policy::hidden::hidden_programs(&policy.matcher, engine_path);
    paths.limits = Limits {
        memory_mb: policy.profile.mem_limit_mb,
        pids: paths.limits.pids,
        cpu_percent: policy.profile.cpu().map(|c| u64::from(c.centi_cpus)),
    };
    // The profile's caps are enforced unless the spec accepted them as
    // degraded; without any, the default pids cap stays best effort.
    if paths.limits.memory_mb.is_some() || paths.limits.cpu_percent.is_some() {
        paths.allow_without_cgroups = accepted_degraded
            .iter()
            .map(|rule| paddock_protocol::profile_key(rule))
            .any(|rule| rule == Some("mem_limit_mb") || rule == Some("cpu_limit"));
    }
    let profile = meta.join("profile.json");
    if crate::own_file::is_file(&profile) {
        let record = crate::policy::job::record_path(meta);
        if std::fs::symlink_metadata(&record).is_err() {
            crate::own_file::write(&record, b"")?;
        }
        // Bound into the sandbox writable: a link would bind what it names.
        if !crate::own_file::is_file(&record) {
            return Err(std::io::Error::other(format!(
                "{} is not a regular file",
                record.display()
            )));
        }
        let (ro, rw) = hook_paths(meta, paddock_exe);
        paths.extra_ro.extend(ro);
        paths.extra_rw.extend(rw);
    }
    Ok(())
}

/// What the engine hook needs inside (`apply_profile`): the profile and
/// the `paddock` binary read-only, the denial record writable.
pub fn hook_paths(meta: &Path, paddock_exe: Option<&Path>) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut ro = vec![meta.join("profile.json")];
    ro.extend(paddock_exe.map(Path::to_path_buf));
    (ro, vec![crate::policy::job::record_path(meta)])
}

/// Where a path of a sandboxed command's view comes from, for a refusal
/// to name ([`unbindable`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The engine's package tree or a directory of its PATH.
    Engine,
    /// The job's work, home and tmp.
    Job,
    /// What the host profile's hook needs (`apply_profile`).
    Hook,
    /// The system directories and /etc's shared files, bound into every
    /// view ([`system_bound`]).
    System,
}

/// The host paths a sandboxed command's view binds, read-only then
/// writable, each with where it comes from: resolved once, here (the
/// helper follows no link in them); the job's own directories are
/// Paddock's, the job cannot replace them.
fn bound(spec: &CommandSpec, paths: &SandboxPaths) -> [Vec<(PathBuf, Source)>; 2] {
    let with = |source: Source| move |p: &PathBuf| (resolved(p), source);
    let mut rw: Vec<(PathBuf, Source)> = [&paths.work, &paths.home, &paths.tmp]
        .into_iter()
        .map(with(Source::Job))
        .collect();
    rw.extend(paths.extra_rw.iter().map(with(Source::Hook)));
    let mut ro: Vec<(PathBuf, Source)> = engine_dirs(spec)
        .into_iter()
        .map(|d| (d, Source::Engine))
        .collect();
    ro.extend(paths.extra_ro.iter().map(with(Source::Hook)));
    [ro, rw]
}

/// `p` with its links resolved, or as given when it cannot be.
fn resolved(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

/// The first path of the command's view that the sandbox would refuse
/// to bind, with where it comes from: the check the helper's planning
/// makes at launch (`paddock_sandbox::own_parts::place`, the one set of
/// rules), made by admission before the job exists.
pub fn unbindable(
    spec: &CommandSpec,
    paths: &SandboxPaths,
) -> Option<(Source, paddock_sandbox::own_parts::Replaced)> {
    let watched = paths.direct.is_some();
    bound(spec, paths)
        .into_iter()
        .flatten()
        .find_map(|(p, source)| {
            paddock_sandbox::own_parts::place(&p, watched)
                .err()
                .map(|e| (source, e))
        })
}

/// A place of the host that no read-only path of a job's view may show
/// ([`shows_private`]): Paddock's own directories (every job's
/// workspace and sockets, the store, the artifacts), the home directory
/// of the user Paddock runs as and the stores of keys and tokens in it
/// (`runner/user_home.rs`), a file a credential of the job is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Private {
    pub path: PathBuf,
    /// What it holds, for the refusal to say.
    pub what: String,
    /// A path inside it is refused too (Paddock's own directories: another
    /// job's directory, the store's; a directory of keys, `~/.ssh`); not
    /// inside a home directory, where the engines and tools are installed
    /// (`~/.nvm`, `~/.cargo/bin`), nor an engine's home (`~/.claude/local`).
    pub inside_too: bool,
}

/// The first read-only path of the command's view (its own, then those
/// every view has: [`system_bound`]) that would show the job one of
/// `private`: the path is it or holds it, or (for one
/// `inside_too`) lies inside it, not within `own` (the job's own
/// directory, whose profile the hook reads). A bind is read-only, but
/// read-only is enough to read another job's work and the store, and to
/// connect to another job's broker or egress socket (a Unix socket is not
/// written through its mount). `None` when none does.
pub fn shows_private<'a>(
    spec: &CommandSpec,
    paths: &SandboxPaths,
    private: &'a [Private],
    own: &Path,
) -> Option<(Source, PathBuf, &'a Private)> {
    let [ro, _] = bound(spec, paths);
    let system = system_bound().into_iter().map(|p| (p, Source::System));
    ro.into_iter().chain(system).find_map(|(bind, source)| {
        private
            .iter()
            .find(|p| {
                p.path.starts_with(&bind)
                    || (p.inside_too && bind.starts_with(&p.path) && !bind.starts_with(own))
            })
            .map(|p| (source, bind, p))
    })
}

/// The host paths every sandbox's view shows read-only, whatever the
/// job: the system directories (`SYSTEM_RO`: `/usr`, `/opt`, …) and the
/// shared entries of /etc (`ETC_RO`) that are on this host, as the
/// helper's planning binds them (`paddock_sandbox::fs::plan`: a link is
/// made as a link, not followed). A place of Paddock's in one of them
/// (a jobs directory under `/opt`, a key under `/usr/local/etc`) is in
/// every job's view.
fn system_bound() -> Vec<PathBuf> {
    let etc = ETC_RO.iter().map(|name| Path::new("/etc").join(name));
    SYSTEM_RO
        .iter()
        .map(PathBuf::from)
        .chain(etc)
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| !m.file_type().is_symlink()))
        .collect()
}

/// The sandbox policy for an engine command.
pub fn sandbox_policy(spec: &CommandSpec, paths: &SandboxPaths) -> Policy {
    let mut argv = vec![spec.program.display().to_string()];
    argv.extend(spec.args.iter().cloned());
    let [ro, rw] = bound(spec, paths).map(|b| b.into_iter().map(|(p, _)| p).collect::<Vec<_>>());
    let work = resolved(&paths.work);
    Policy {
        argv,
        env: spec.env.clone(),
        cwd: spec.cwd.clone(),
        ro,
        protect: protected(
            &work,
            &spec
                .protect
                .iter()
                .map(|p| match (p.parent(), p.file_name()) {
                    (Some(dir), Some(name)) => resolved(dir).join(name),
                    _ => p.clone(),
                })
                .collect::<Vec<_>>(),
        ),
        rw,
        hidden: paths.hidden.clone(),
        tmp_mb: SANDBOX_TMP_MB,
        net: NetMode::Broker {
            socket: paths.broker_socket.clone(),
            port: SANDBOX_BROKER_PORT,
            more: paths
                .egress_socket
                .iter()
                .map(|socket| Forward {
                    socket: socket.clone(),
                    port: SANDBOX_EGRESS_PORT,
                    // The proxy serves the job's socket itself: one relay.
                    hand_off: true,
                })
                .collect(),
        },
        direct: paths.direct.clone(),
        limits: paths.limits.clone(),
        allow_without_cgroups: paths.allow_without_cgroups,
        notices: paths.notices.clone(),
        timeout_secs: Some(paths.timeout_secs + 30),
        cgroup_root: paths.cgroup_root.clone(),
        name: paths.job_id.clone(),
        started: None,
    }
}

/// Paths that stay read-only inside the writable ones: the workspace's git
/// hooks, git config and shell rc files, and those of the engine's home its
/// adapter protects (its copy of the host profile's rules: Claude Code's
/// `--settings` file with the deny hook, Codex's execpolicy rules), so the
/// agent cannot lift them.
fn protected(work: &Path, engine: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = protected_in(work);
    out.extend(
        engine
            .iter()
            .filter(|p| std::fs::symlink_metadata(p).is_ok())
            .cloned(),
    );
    out
}

/// Read-only directories the engine needs besides the system ones: the
/// package tree (`node_modules`) holding its binary, and the non-system
/// directories of its PATH (node's, for example).
fn engine_dirs(spec: &CommandSpec) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let system = |p: &Path| SYSTEM_RO.iter().any(|s| p.starts_with(s));
    let mut candidates = vec![spec.program.clone()];
    if let Ok(real) = spec.program.canonicalize() {
        candidates.push(real);
    }
    for c in candidates {
        let tree = c
            .ancestors()
            .find(|a| a.file_name().is_some_and(|n| n == "node_modules"))
            .map(Path::to_path_buf)
            .or_else(|| c.parent().map(Path::to_path_buf));
        if let Some(t) = tree.and_then(|t| t.canonicalize().ok()) {
            dirs.push(t);
        }
    }
    if let Some((_, path)) = spec.env.iter().find(|(k, _)| k == "PATH") {
        for d in path.split(':').map(PathBuf::from) {
            if let Ok(d) = d.canonicalize() {
                dirs.push(d);
            }
        }
    }
    dirs.retain(|d| !system(d) && d.is_dir());
    dirs.sort();
    dirs.dedup();
    // Drop directories nested in another one.
    let all = dirs.clone();
    dirs.retain(|d| !all.iter().any(|o| o != d && d.starts_with(o)));
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paths of job `j` whose directory is `own` (work, home and tmp
    /// in it), with `extra_ro` read-only besides.
    fn job_paths(own: &Path, extra_ro: Vec<PathBuf>) -> SandboxPaths {
        SandboxPaths {
            job_id: "j".into(),
            work: own.join("work"),
            home: own.join("home"),
            tmp: own.join("tmp"),
            broker_socket: own.join("meta/broker.sock"),
            egress_socket: None,
            direct: None,
            timeout_secs: 1,
            extra_ro,
            extra_rw: vec![],
            limits: default_limits(),
            allow_without_cgroups: true,
            cgroup_root: None,
            notices: None,
            hidden: vec![],
        }
    }

    /// The first path the sandbox's planning would refuse, with where it
    /// comes from: the engine's directory (a binary directly in /tmp),
    /// the job's own (a jobs directory under /proc), the hook's; none
    /// when every path can be bound.
    #[test]
    fn unbindable_names_where_the_refused_path_comes_from() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let engine = |program: &Path| CommandSpec {
            program: program.to_path_buf(),
            args: vec![],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            cwd: root.clone(),
            stdin: None,
            protect: vec![],
        };
        let paths = |jobs: &Path, extra_ro: Vec<PathBuf>| job_paths(&jobs.join("j"), extra_ro);
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let found = |cmd: &CommandSpec, paths: &SandboxPaths| {
            unbindable(cmd, paths).map(|(source, e)| (source, e.path))
        };
        assert_eq!(
            [
                found(&engine(&bin.join("codex")), &paths(&root, vec![])),
                found(&engine(Path::new("/tmp/codex")), &paths(&root, vec![])),
                found(
                    &engine(&bin.join("codex")),
                    &paths(Path::new("/proc/jobs"), vec![])
                ),
                found(
                    &engine(&bin.join("codex")),
                    &paths(&root, vec![PathBuf::from("/dev/pts/paddock")])
                ),
            ],
            [
                None,
                Some((Source::Engine, PathBuf::from("/tmp"))),
                Some((Source::Job, PathBuf::from("/proc/jobs/j/work"))),
                Some((Source::Hook, PathBuf::from("/dev/pts/paddock"))),
            ]
        );
    }

    /// A read-only path that is, holds or (for Paddock's own places) lies
    /// inside a private place is found, with where it comes from; a path
    /// inside the job's own directory (the hook's profile), one inside a
    /// home directory (an engine under `~/.nvm`) and one beside the
    /// private places are not.
    #[test]
    fn shows_private_finds_a_read_only_path_that_is_holds_or_is_inside_one() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = root.join("home");
        let jobs = home.join(".local/state/paddock/jobs");
        let own = jobs.join("j");
        let engine_dir = home.join(".nvm/bin");
        let elsewhere = root.join("opt/tool");
        for d in [
            &own.join("meta"),
            &engine_dir,
            &elsewhere,
            &jobs.join("k/meta"),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        let key = root.join("opt/key");
        std::fs::write(&key, "k").unwrap();
        let private = vec![
            Private {
                path: home.clone(),
                what: "home".into(),
                inside_too: false,
            },
            Private {
                path: jobs.clone(),
                what: "jobs".into(),
                inside_too: true,
            },
            Private {
                path: key.clone(),
                what: "key".into(),
                inside_too: false,
            },
        ];
        let cmd = CommandSpec {
            program: engine_dir.join("codex"),
            args: vec![],
            env: vec![("PATH".into(), format!("{}:/usr/bin", engine_dir.display()))],
            cwd: own.join("work"),
            stdin: None,
            protect: vec![],
        };
        let paths = |extra_ro: Vec<PathBuf>| job_paths(&own, extra_ro);
        let found = |extra: Vec<PathBuf>| {
            shows_private(&cmd, &paths(extra), &private, &own)
                .map(|(source, bind, p)| (source, bind, p.what.clone()))
        };
        assert_eq!(
            [
                found(vec![]),
                found(vec![own.join("meta"), elsewhere.clone()]),
                found(vec![home.clone()]),
                found(vec![home.join(".local")]),
                found(vec![jobs.join("k/meta")]),
                found(vec![root.join("opt")]),
                found(vec![key.clone()]),
            ],
            [
                None,
                None,
                Some((Source::Hook, home.clone(), "home".to_string())),
                Some((Source::Hook, home.join(".local"), "jobs".to_string())),
                Some((Source::Hook, jobs.join("k/meta"), "jobs".to_string())),
                Some((Source::Hook, root.join("opt"), "key".to_string())),
                Some((Source::Hook, key.clone(), "key".to_string())),
            ]
        );
    }

    /// The system directories every view binds are read-only paths of it
    /// too: a private place under `/usr` (a key under `/usr/local/etc`)
    /// is found there, whatever the command's own paths; one beside them
    /// is not.
    #[test]
    fn shows_private_finds_a_private_place_in_the_system_directories() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let own = root.join("jobs/j");
        std::fs::create_dir_all(own.join("meta")).unwrap();
        let cmd = CommandSpec {
            program: PathBuf::from("/bin/sh"),
            args: vec![],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            cwd: own.join("work"),
            stdin: None,
            protect: vec![],
        };
        let paths = job_paths(&own, vec![]);
        let found = |at: &str| {
            let private = [Private {
                path: PathBuf::from(at),
                what: "key".into(),
                inside_too: false,
            }];
            shows_private(&cmd, &paths, &private, &own)
                .map(|(source, bind, p)| (source, bind, p.what.clone()))
        };
        assert_eq!(
            [
                found("/usr/local/etc/paddock/key"),
                found(&root.join("key").display().to_string()),
            ],
            [
                Some((Source::System, PathBuf::from("/usr"), "key".to_string())),
                None,
            ]
        );
    }

    #[test]
    fn engine_dirs_are_the_package_tree_and_non_system_path_entries() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let bin = root.join("node_modules/.bin");
        let pkg = root.join("node_modules/@openai/codex/bin");
        let node = root.join("node/bin");
        for d in [&bin, &pkg, &node] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(pkg.join("codex.js"), "").unwrap();
        std::os::unix::fs::symlink("../@openai/codex/bin/codex.js", bin.join("codex")).unwrap();
        let spec = CommandSpec {
            program: bin.join("codex"),
            args: vec![],
            env: vec![(
                "PATH".into(),
                format!("{}:{}:/usr/bin:/bin", bin.display(), node.display()),
            )],
            cwd: root.clone(),
            stdin: None,
            protect: vec![],
        };
        assert_eq!(
            engine_dirs(&spec),
            vec![node.clone(), root.join("node_modules")]
        );
    }
}

//! The sandbox escape suite: every isolation claim of `paddock sandbox`
//! (docs/sandbox.md) is attacked by a probe that must fail inside the
//! sandbox, and each probe has a positive twin, the same attack run
//! unconfined, which must work, so that a probe cannot pass by being broken.
//! The suite runs twice: as root, and as a throwaway unprivileged user (via
//! `setpriv`) with a delegated cgroup. Twins that need privileges the user
//! does not have are skipped in the unprivileged pass (printed); their
//! confined probe still runs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const PROBE_PY: &str = include_str!("escape/probe.py");
const UNPRIVILEGED_UID: u32 = 64_123;

/// How the positive twin runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Twin {
    /// The same script, unconfined.
    Same,
    /// The same script, unconfined, only meaningful with root privileges.
    RootOnly,
    /// Another script, which sets up the target (in namespaces the test
    /// creates itself) and then attacks it the same way.
    Script(&'static str),
}

/// How success is judged.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Judge {
    /// Exit status 0 means the attack worked.
    Exit,
    /// The attack worked when `$MARK` exists a few seconds after the run
    /// (a process outlived it). The run gets a 1 s timeout.
    Outlives,
}

struct Probe {
    name: &'static str,
    script: &'static str,
    twin: Twin,
    judge: Judge,
}

const fn p(name: &'static str, script: &'static str) -> Probe {
    Probe {
        name,
        script,
        twin: Twin::Same,
        judge: Judge::Exit,
    }
}

const fn root(name: &'static str, script: &'static str) -> Probe {
    Probe {
        name,
        script,
        twin: Twin::RootOnly,
        judge: Judge::Exit,
    }
}

/// The probe program; `$PY` in scripts (paths without spaces).
const PY: &str = "/usr/bin/python3 $PROBES/probe.py";

fn probes() -> Vec<Probe> {
    vec![
        // Files of the host and of other users and jobs.
        p("read a host secret file", "grep -q host-secret \"$SECRET\""),
        p("read /etc/machine-id", "cat /etc/machine-id >/dev/null"),
        root("read /etc/shadow", "head -c1 /etc/shadow >/dev/null"),
        p("list /home", "ls /home/ | grep -q ."),
        p("read another job's workspace", "grep -q other-job \"$OTHER_WS/file\""),
        p("list /sys", "ls /sys/class/net | grep -q ."),
        p("see host block devices or kmsg", "ls /dev | grep -qE '^(kmsg|mem|vda|sda|nvme0n1|loop0)$'"),
        // Writes outside the workspace.
        p("write outside the workspace", "echo x > \"$OUTSIDE/pwned\""),
        p("write /var/tmp", "echo x > /var/tmp/paddock-escape-$$ && rm /var/tmp/paddock-escape-$$"),
        root("write /usr", "touch /usr/paddock-escape && rm /usr/paddock-escape"),
        root("write the root directory", "touch /paddock-escape && rm /paddock-escape"),
        root("write /dev", "touch /dev/paddock-escape && rm /dev/paddock-escape"),
        root("write /proc/sys", "cat /proc/sys/kernel/hostname > /proc/sys/kernel/hostname"),
        root("create a device node", "mknod \"$WORK/nulldev\" c 1 3"),
        // Workspace files the host would execute.
        p("write .git/hooks", "echo 'exit 0' > \"$WORK/.git/hooks/pre-commit\""),
        p("write .git/config", "echo '[core]' >> \"$WORK/.git/config\""),
        p("rename .git/hooks away", "mv \"$WORK/.git/hooks\" \"$WORK/.git/hooks-moved\""),
        p("write a shell rc file", "echo 'echo pwned' >> \"$WORK/.bashrc\""),
        // Links out of the workspace.
        p("symlink out of the workspace", "ln -s \"$SECRET\" \"$WORK/link\" && grep -q host-secret \"$WORK/link\""),
        p("hardlink out of the workspace", "ln \"$SECRET\" \"$WORK/hard\" && grep -q host-secret \"$WORK/hard\""),
        // Other processes.
        p("read a host process's environment", "tr '\\0' '\\n' < /proc/$HOST_PID/environ | grep -q PADDOCK_HOST_SECRET"),
        p("see a host process", "grep -q sleep /proc/$HOST_PID/cmdline"),
        p("signal a host process", "kill -0 $HOST_PID"),
        p("inherit the caller's environment", "env | grep -q PADDOCK_HOST_SECRET"),
        p("ptrace a sibling", "$PY ptrace"),
        p("process_vm_readv a sibling", "$PY vm_readv"),
        root("join a host namespace", "nsenter -t $HOST_PID -n true"),
        // Namespaces and mounts.
        p("create a user namespace", "unshare -U true"),
        p("mount in a new user namespace", "unshare -rm mount -t tmpfs none \"$WORK\""),
        root("mount directly", "$PY mount \"$WORK\""),
        root("chroot", "chroot / true"),
        // Kernel interfaces.
        p("open a netlink socket", "$PY family netlink"),
        root("open a packet socket", "$PY family packet"),
        p("open a vsock socket", "$PY family vsock"),
        root("open a raw socket", "$PY family raw"),
        p("set up io_uring", "$PY io_uring"),
        p("use the kernel keyring", "$PY keyctl"),
        root("create a bpf map", "$PY bpf"),
        root("open a perf event", "$PY perf"),
        // Network.
        p("connect to a host loopback port", "$PY tcp 127.0.0.1 $PORT"),
        p("connect to a host port over IPv6", "$PY tcp ::1 $PORT6"),
        p("send UDP to the host", "$PY udp 127.0.0.1 $UPORT"),
        Probe {
            name: "connect to 10.0.0.1",
            script: "$PY tcp 10.0.0.1 80",
            twin: Twin::Script("unshare -rn sh -c 'ip link set lo up && ip addr add 10.0.0.1/32 dev lo && $PY listen_connect 10.0.0.1'"),
            judge: Judge::Exit,
        },
        Probe {
            name: "connect to the metadata address",
            script: "$PY tcp 169.254.169.254 80",
            twin: Twin::Script("unshare -rn sh -c 'ip link set lo up && ip addr add 169.254.169.254/32 dev lo && $PY listen_connect 169.254.169.254'"),
            judge: Judge::Exit,
        },
        p("reach another job's broker socket", "$PY unix \"$OTHER_SOCK\""),
        p("reach a host abstract socket", "$PY abstract \"$ABSTRACT\""),
        // Resources.
        p("fork bomb past the pids cap", "$PY fork_bomb 100"),
        p("memory bomb past the memory cap", "$PY memory_bomb 400"),
        p("fill /tmp past its size cap", "dd if=/dev/zero of=/tmp/fill-$$ bs=1M count=64 2>/dev/null && rm -f /tmp/fill-$$"),
        // Lifetime.
        Probe {
            name: "outlive the timeout with a double-forked daemon",
            script: "(setsid sh -c 'sleep 2; echo alive > \"$MARK\"' &); sleep 30",
            twin: Twin::Same,
            judge: Judge::Outlives,
        },
        Probe {
            name: "outlive the command with a double-forked daemon",
            script: "(setsid sh -c 'sleep 2; echo alive > \"$MARK\"' &); exit 0",
            twin: Twin::Same,
            judge: Judge::Outlives,
        },
    ]
}

/// What must keep working inside the sandbox (so that a sandbox which
/// blocks everything, or a probe program that cannot run there, fails the
/// suite instead of passing it).
fn controls() -> Vec<Probe> {
    vec![
        p(
            "write the workspace",
            "echo ok > \"$WORK/ok.txt\" && grep -q ok \"$WORK/ok.txt\"",
        ),
        p("run the probe program", "$PY memory_bomb 8"),
        p("fork under the pids cap", "$PY fork_bomb 10"),
        p(
            "write /tmp under its size cap",
            "dd if=/dev/zero of=/tmp/fill-$$ bs=1M count=4 2>/dev/null && rm /tmp/fill-$$",
        ),
        p("use loopback inside", "$PY loopback"),
        p(
            "read system files",
            "grep -q . /etc/os-release && ls /usr/bin | grep -q sh",
        ),
        p("git in the workspace", "git -C \"$WORK\" status --short"),
    ]
}

/// The host side every probe attacks: files, listeners, a process.
struct Fixture {
    dir: tempfile::TempDir,
    uid: u32,
    env: Vec<(String, String)>,
    host: std::process::Child,
    cgroot: Option<(PathBuf, Vec<PathBuf>)>,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.host.kill();
        let _ = self.host.wait();
        if let Some((_, delegated)) = &self.cgroot {
            for d in delegated {
                let _ = std::fs::remove_dir(d.join("paddock"));
                let _ = std::fs::remove_dir(d);
            }
        }
    }
}

fn git_repo(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    common::git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join(".bashrc"), "# rc\n").unwrap();
    std::fs::create_dir_all(dir.join(".git/hooks")).unwrap();
}

fn chown_tree(path: &Path, uid: u32) {
    let st = Command::new("chown")
        .args(["-R", &format!("{uid}:{uid}")])
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success());
}

fn accept_forever(listener: std::net::TcpListener) {
    std::thread::spawn(move || {
        for c in listener.incoming() {
            drop(c);
        }
    });
}

impl Fixture {
    fn new(uid: u32) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_path_buf();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        let probes = d.join("probes");
        std::fs::create_dir_all(&probes).unwrap();
        std::fs::write(probes.join("probe.py"), PROBE_PY).unwrap();
        git_repo(&d.join("work"));
        git_repo(&d.join("twin-work"));
        std::fs::create_dir_all(d.join("outside")).unwrap();
        std::fs::write(d.join("secret.txt"), "host-secret\n").unwrap();
        std::fs::set_permissions(d.join("secret.txt"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        std::fs::create_dir_all(d.join("otherjob/work")).unwrap();
        std::fs::write(d.join("otherjob/work/file"), "other-job\n").unwrap();
        if uid != 0 {
            chown_tree(&d, uid);
        }

        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = tcp.local_addr().unwrap().port();
        accept_forever(tcp);
        let tcp6 = std::net::TcpListener::bind("[::1]:0").unwrap();
        let port6 = tcp6.local_addr().unwrap().port();
        accept_forever(tcp6);
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let uport = udp.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            while let Ok((n, from)) = udp.recv_from(&mut buf) {
                let _ = udp.send_to(&buf[..n], from);
            }
        });
        let sock = d.join("otherjob/broker.sock");
        let other = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        if uid != 0 {
            chown_tree(&sock, uid);
        }
        std::thread::spawn(move || {
            for c in other.incoming() {
                drop(c);
            }
        });
        let abstract_name = format!("paddock-escape-{}-{uid}", std::process::id());
        let addr = {
            use std::os::linux::net::SocketAddrExt as _;
            std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap()
        };
        let abs = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
        std::thread::spawn(move || {
            for c in abs.incoming() {
                drop(c);
            }
        });
        // A host process of the same user, holding a secret in its environment.
        let mut host = as_user(uid, "sleep");
        host.arg("300")
            .env_clear()
            .env("PADDOCK_HOST_SECRET", "host-env-secret")
            .stdin(Stdio::null());
        let host = host.spawn().unwrap();

        let cgroot = (uid != 0).then(|| delegate_cgroups(&d, uid));
        let env = vec![
            ("PROBES", probes.display().to_string()),
            ("SECRET", d.join("secret.txt").display().to_string()),
            ("OUTSIDE", d.join("outside").display().to_string()),
            ("OTHER_WS", d.join("otherjob/work").display().to_string()),
            ("OTHER_SOCK", sock.display().to_string()),
            ("ABSTRACT", abstract_name),
            ("PORT", port.to_string()),
            ("PORT6", port6.to_string()),
            ("UPORT", uport.to_string()),
            ("HOST_PID", host.id().to_string()),
            ("PY", PY.replace("$PROBES", &probes.display().to_string())),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        Fixture {
            dir,
            uid,
            env,
            host,
            cgroot,
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// A cgroup v1 subtree per controller, owned by `uid`, presented as one
/// root (symlinks) for `PADDOCK_CGROUP_ROOT`.
fn delegate_cgroups(dir: &Path, uid: u32) -> (PathBuf, Vec<PathBuf>) {
    let root = dir.join("cgroot");
    std::fs::create_dir_all(&root).unwrap();
    let mut delegated = Vec::new();
    for c in ["memory", "pids", "cpu"] {
        let d = PathBuf::from(format!(
            "/sys/fs/cgroup/{c}/paddock-escape-{}-{uid}",
            std::process::id()
        ));
        std::fs::create_dir_all(&d).unwrap();
        chown_tree(&d, uid);
        std::os::unix::fs::symlink(&d, root.join(c)).unwrap();
        delegated.push(d);
    }
    (root, delegated)
}

fn as_user(uid: u32, program: &str) -> Command {
    if uid == 0 {
        return Command::new(program);
    }
    let mut c = Command::new("setpriv");
    c.arg(format!("--reuid={uid}"))
        .arg(format!("--regid={uid}"))
        .arg("--clear-groups")
        .arg("--")
        .arg(program);
    c
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Worked,
    Blocked,
    Skipped,
    /// The sandbox itself failed to start (exit 125): never acceptable.
    SetupFailed(String),
}

fn run(mut cmd: Command, judge: Judge, mark: &Path) -> Outcome {
    let _ = std::fs::remove_file(mark);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    if status.code() == Some(125) && stderr.contains("paddock sandbox:") {
        return Outcome::SetupFailed(stderr);
    }
    let worked = match judge {
        Judge::Exit => status.success(),
        Judge::Outlives => {
            std::thread::sleep(Duration::from_secs(3));
            mark.exists()
        }
    };
    if worked {
        Outcome::Worked
    } else {
        Outcome::Blocked
    }
}

fn script_env(cmd: &mut Command, fx: &Fixture, work: &Path, mark: &Path) {
    cmd.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
        .env("HOME", fx.path())
        .env("PADDOCK_HOST_SECRET", "host-env-secret")
        .env("WORK", work)
        .env("MARK", mark);
    for (k, v) in &fx.env {
        cmd.env(k, v);
    }
}

fn twin(probe: &Probe, fx: &Fixture) -> Outcome {
    let script = match probe.twin {
        Twin::RootOnly if fx.uid != 0 => return Outcome::Skipped,
        Twin::Same | Twin::RootOnly => probe.script,
        Twin::Script(s) => s,
    };
    let work = fx.path().join("twin-work");
    let mark = work.join("twin-mark");
    let mut cmd = as_user(fx.uid, "sh");
    if probe.judge == Judge::Outlives && probe.name.contains("timeout") {
        cmd = as_user(fx.uid, "timeout");
        cmd.args(["1", "sh"]);
    }
    cmd.arg("-c").arg(script);
    script_env(&mut cmd, fx, &work, &mark);
    run(cmd, probe.judge, &mark)
}

fn confined(probe: &Probe, fx: &Fixture) -> Outcome {
    let work = fx.path().join("work");
    let mark = work.join("mark");
    let mut cmd = as_user(fx.uid, env!("CARGO_BIN_EXE_paddock"));
    cmd.arg("sandbox")
        .arg("--rw")
        .arg(&work)
        .arg("--ro")
        .arg(fx.path().join("probes"))
        .args(["--tmp-size", "16", "--pids", "64", "--memory", "128"]);
    let timeout = if probe.name.contains("timeout") {
        "1"
    } else {
        "60"
    };
    cmd.args(["--timeout", timeout]);
    for name in ["WORK", "MARK"].iter().chain(
        [
            "PROBES",
            "SECRET",
            "OUTSIDE",
            "OTHER_WS",
            "OTHER_SOCK",
            "ABSTRACT",
            "PORT",
            "PORT6",
            "UPORT",
            "HOST_PID",
            "PY",
        ]
        .iter(),
    ) {
        cmd.args(["--env", name]);
    }
    cmd.args(["--", "sh", "-c", probe.script]);
    script_env(&mut cmd, fx, &work, &mark);
    if let Some((root, _)) = &fx.cgroot {
        cmd.env("PADDOCK_CGROUP_ROOT", root);
    }
    cmd.env("PADDOCK_DATA_DIR", fx.path().join("data"))
        .env("PADDOCK_JOBS_DIR", fx.path().join("jobs"));
    run(cmd, probe.judge, &mark)
}

fn suite(uid: u32) {
    if !common::sandbox_available() {
        return;
    }
    for tool in ["setpriv", "unshare", "ip", "nsenter", "/usr/bin/python3"] {
        if which::which(tool).is_err() {
            if common::in_ci() {
                panic!("the escape suite needs `{tool}` (see .ci/run)");
            }
            eprintln!("skipping: the escape suite needs `{tool}`");
            return;
        }
    }
    let fx = Fixture::new(uid);
    let probes = probes();
    assert!(probes.len() >= 40, "{} probes", probes.len());
    let mut got = Vec::new();
    let mut want = Vec::new();
    for probe in &probes {
        let t = twin(probe, &fx);
        let c = confined(probe, &fx);
        if t == Outcome::Skipped {
            eprintln!("{}: unprivileged twin skipped (needs root)", probe.name);
        }
        let expected_twin = if t == Outcome::Skipped {
            Outcome::Skipped
        } else {
            Outcome::Worked
        };
        got.push((probe.name, t, c));
        want.push((probe.name, expected_twin, Outcome::Blocked));
    }
    for control in &controls() {
        got.push((control.name, twin(control, &fx), confined(control, &fx)));
        want.push((control.name, Outcome::Worked, Outcome::Worked));
    }
    let _ = std::io::stderr().flush();
    assert_eq!(got, want);
}

#[test]
fn escapes_fail_as_root() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipping: the root pass needs root");
        return;
    }
    suite(0);
}

#[test]
fn escapes_fail_as_an_unprivileged_user() {
    if !nix::unistd::geteuid().is_root() {
        // Already unprivileged: run the suite as this user.
        eprintln!("running the unprivileged pass as the current user");
        suite(nix::unistd::geteuid().as_raw());
        return;
    }
    suite(UNPRIVILEGED_UID);
}

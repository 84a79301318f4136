//! The sandbox escape suite: every isolation claim of `paddock sandbox`
//! (docs/sandbox.md) is attacked by a probe that must fail inside the
//! sandbox, and each probe has a positive twin, the same attack run
//! unconfined, which must work, so that a probe cannot pass by being broken.
//! The suite runs twice: as root, and as a throwaway unprivileged user (via
//! `setpriv`) with a delegated cgroup. Twins that need privileges the user
//! does not have are skipped in the unprivileged pass (printed); their
//! confined probe still runs.
//!
//! Every run, confined or not, holds three descriptors of the caller:
//! 7 reads a host secret, 8 appends to a host file, 9 is a host directory.
//! Probes with a `plant` step run in a fresh writable directory where the
//! plant (a symbolic link, as a committed file of a repository or an
//! earlier job would leave) is made first, on the host as the caller; the
//! attack's run is where the host side of the set-up could follow the link.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const PROBE_PY: &str = include_str!("../escape/probe.py");
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
    /// The attack worked when the host path in this fixture variable
    /// exists after the run (it is removed before).
    HostPath(&'static str),
}

struct Probe {
    name: &'static str,
    script: &'static str,
    twin: Twin,
    judge: Judge,
    /// A first run, in the same fresh writable directory, before the attack.
    plant: Option<&'static str>,
    /// Extra `paddock sandbox` arguments of the attack (`$WORK` replaced).
    args: &'static [&'static str],
    /// Runs (twin and confined) in a fresh writable directory whose `.git`
    /// has no `hooks`.
    no_hooks: bool,
}

const fn p(name: &'static str, script: &'static str) -> Probe {
    Probe {
        name,
        script,
        twin: Twin::Same,
        judge: Judge::Exit,
        plant: None,
        args: &[],
        no_hooks: false,
    }
}

const fn root(name: &'static str, script: &'static str) -> Probe {
    Probe {
        twin: Twin::RootOnly,
        ..p(name, script)
    }
}

/// A two-run probe: `plant`, then `script`.
const fn planted(name: &'static str, plant: &'static str, script: &'static str) -> Probe {
    Probe {
        plant: Some(plant),
        ..p(name, script)
    }
}

/// A one-run probe in a fresh repository without `.git/hooks`.
const fn no_hooks(name: &'static str, script: &'static str) -> Probe {
    Probe {
        no_hooks: true,
        ..p(name, script)
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
        // Protected names that do not exist when the run starts.
        p("create a missing .bash_login", "echo 'echo pwned' > \"$WORK/.bash_login\""),
        p("create a missing .profile by renaming a file onto it", "echo 'echo pwned' > \"$WORK/p-$$\" && mv \"$WORK/p-$$\" \"$WORK/.profile\""),
        p("create a missing .zshenv as a link", "ln -sf \"$SECRET\" \"$WORK/.zshenv\""),
        no_hooks("create a missing .git/hooks", "mkdir -p \"$WORK/.git/hooks\" && echo 'exit 0' > \"$WORK/.git/hooks/pre-commit\""),
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
        // Families the kernel looks up (a distribution kernel loads their
        // module on demand): AF_ALG, AF_TIPC, AF_RDS, AF_CAN, Bluetooth,
        // AF_SMC. Twin: the kernel answers itself, with a socket or its
        // own refusal; confined, the filter stops the call before.
        p("ask the kernel for the AF_ALG socket family", "$PY reach_family 38"),
        p("ask the kernel for the AF_TIPC socket family", "$PY reach_family 30"),
        p("ask the kernel for the AF_RDS socket family", "$PY reach_family 21"),
        p("ask the kernel for the AF_CAN socket family", "$PY reach_family 29"),
        p("ask the kernel for the Bluetooth socket family", "$PY reach_family 31"),
        p("ask the kernel for the AF_SMC socket family", "$PY reach_family 43"),
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
            ..p("", "")
        },
        Probe {
            name: "connect to the metadata address",
            script: "$PY tcp 169.254.169.254 80",
            twin: Twin::Script("unshare -rn sh -c 'ip link set lo up && ip addr add 169.254.169.254/32 dev lo && $PY listen_connect 169.254.169.254'"),
            ..p("", "")
        },
        p("reach another job's broker socket", "$PY unix \"$OTHER_SOCK\""),
        p("reach a host abstract socket", "$PY abstract \"$ABSTRACT\""),
        // Resources.
        p("fork bomb past the pids cap", "$PY fork_bomb 100"),
        p("memory bomb past the memory cap", "$PY memory_bomb 400"),
        p("fill /tmp past its size cap", "dd if=/dev/zero of=/tmp/fill-$$ bs=1M count=64 2>/dev/null && rm -f /tmp/fill-$$"),
        // Symbolic links planted in a writable directory, followed by the
        // host side of the next run's set-up (protected paths, --ro/--rw).
        Probe {
            judge: Judge::HostPath("TMP_PWNED"),
            ..planted("plant .profile -> /tmp, then write the host's /tmp", "ln -s /tmp \"$WORK/.profile\"", "echo x > \"$TMP_PWNED\"")
        },
        Probe {
            judge: Judge::HostPath("TMP_PWNED"),
            ..planted("plant a chain of links at .zshenv, then write the host's /tmp", "ln -s /tmp \"$WORK/hop\" && ln -s \"$WORK/hop\" \"$WORK/.zshenv\"", "echo x > \"$TMP_PWNED\"")
        },
        planted("plant .bash_profile -> a host secret, then read it", "ln -s \"$SECRET\" \"$WORK/.bash_profile\"", "grep -q host-secret \"$SECRET\""),
        Probe {
            twin: Twin::RootOnly,
            ..planted("plant .bash_login -> /etc/shadow, then read it", "ln -s /etc/shadow \"$WORK/.bash_login\"", "head -c1 /etc/shadow >/dev/null")
        },
        planted("plant .zshrc -> another job's workspace, then read it", "ln -s \"$OTHER_WS\" \"$WORK/.zshrc\"", "grep -q other-job \"$OTHER_WS/file\""),
        planted("plant a relative .zprofile link, then read what it names", "ln -s ../outside \"$WORK/.zprofile\"", "grep -q host-file \"$OUTSIDE/host-file\""),
        planted("plant .git -> another job's directory, then read its config", "mv \"$WORK/.git\" \"$WORK/.git-old\" && ln -s \"$OTHER_WS\" \"$WORK/.git\"", "grep -q other-job \"$OTHER_WS/config\""),
        Probe {
            // What the planner did with it: `mkdir .git/hooks`, through the link.
            twin: Twin::Script("mkdir -p \"$WORK/.git/hooks\""),
            judge: Judge::HostPath("GIT_HOOKS"),
            ..planted("plant .git -> a host directory, so that the set-up makes hooks there", "mv \"$WORK/.git\" \"$WORK/.git-old\" && ln -s \"$GITDIR\" \"$WORK/.git\"", "true")
        },
        Probe {
            args: &["--ro", "$WORK/sub"],
            ..planted("plant a link as a --ro path, then read what it names", "ln -s \"$OTHER_WS\" \"$WORK/sub\"", "grep -q other-job \"$WORK/sub/file\"")
        },
        Probe {
            args: &["--rw", "$WORK/sub"],
            judge: Judge::HostPath("OUT_PWNED"),
            ..planted("plant a link as a --rw path, then write what it names", "ln -s \"$OUTSIDE\" \"$WORK/sub\"", "echo x > \"$WORK/sub/pwned\"")
        },
        Probe {
            args: &["--ro", "$WORK/dir/file"],
            ..planted("plant a link on the way of a --ro path, then read what it names", "ln -s \"$OTHER_WS\" \"$WORK/dir\"", "grep -q other-job \"$OTHER_WS/file\" || grep -q other-job \"$WORK/dir/file\"")
        },
        // Descriptors the caller left open.
        p("read a descriptor inherited from the caller", "cat <&7 | grep -q host-secret"),
        p("write a descriptor inherited from the caller", "echo pwned >&8"),
        p("open a host directory through an inherited descriptor", "grep -q host-file /proc/self/fd/9/host-file"),
        // Files that keep root's (or the caller's) power after the run.
        p("leave a setuid file (chmod)", "cp /bin/true \"$WORK/s-chmod\" && chmod 4755 \"$WORK/s-chmod\" && test -u \"$WORK/s-chmod\""),
        p("leave a setgid file (chmod g+s)", "cp /bin/true \"$WORK/g-chmod\" && chmod 2755 \"$WORK/g-chmod\" && test -g \"$WORK/g-chmod\""),
        p("leave a setuid file (install -m 4755)", "install -m 4755 /bin/true \"$WORK/s-install\" && test -u \"$WORK/s-install\""),
        p("create a setuid file (open O_CREAT)", "$PY mode_bits open \"$WORK/s-open\""),
        p("create a setuid file (O_TMPFILE, then link)", "$PY mode_bits tmpfile \"$WORK/s-tmpfile\""),
        p("create a setuid file (mknod)", "$PY mode_bits mknod \"$WORK/s-mknod\""),
        p("create a setuid file (openat2)", "$PY mode_bits openat2 \"$WORK/s-openat2\""),
        p("set the setuid bit (fchmod)", "$PY mode_bits fchmod \"$WORK/s-fchmod\""),
        p("set the setuid bit (fchmodat2)", "$PY mode_bits fchmodat2 \"$WORK/s-fchmodat2\""),
        root("copy a setuid binary with its mode", "cp -p \"$(find /usr/bin -perm -4000 -type f | head -1)\" \"$WORK/s-copy\" && test -u \"$WORK/s-copy\""),
        root("leave a file capability", "$PY file_capability \"$WORK/s-fcap\""),
        root("create a block device node", "mknod \"$WORK/blockdev\" b 7 0"),
        root("read a root-only file of /etc", "for f in $(find /etc -type f ! -perm -o=r 2>/dev/null); do head -c1 \"$f\" >/dev/null 2>&1 && exit 0; done; exit 1"),
        root("list a root-only directory of /etc", "for d in $(find /etc -type d ! -perm -o=r 2>/dev/null); do ls \"$d\" >/dev/null 2>&1 && exit 0; done; exit 1"),
        // Root-only files of the system directories bound whole (/usr,
        // /opt); the fixture plants them under /usr/local when it is root.
        root("read a root-only file of /usr", "grep -q sys-secret \"$SYS_ONLY/secret\""),
        root("list a root-only directory of /usr", "ls \"$SYS_ONLY/private\" | grep -q ."),
        root("read a file of /usr only group root may read", "grep -q sys-secret \"$SYS_ONLY/group-only\""),
        root("run a program of /usr only root may run", "\"$SYS_ONLY/program\""),
        // Memory of other processes (PID 1 is Paddock's; siblings of the
        // same job share one trust domain, docs/sandbox.md).
        Probe {
            twin: Twin::Script("$PY proc_mem $HOST_PID"),
            ..p("read PID 1's memory through /proc", "$PY proc_mem 1")
        },
        Probe {
            twin: Twin::Script("$PY proc_mem_write child"),
            ..p("write PID 1's memory through /proc", "$PY proc_mem_write 1")
        },
        Probe {
            twin: Twin::Script("tr '\\0' '\\n' < /proc/$HOST_PID/environ | grep -q PADDOCK_HOST_SECRET"),
            ..p("read PID 1's environment (the caller's)", "tr '\\0' '\\n' < /proc/1/environ | grep -q PADDOCK_HOST_SECRET")
        },
        p("read a host process's memory through /proc", "$PY proc_mem $HOST_PID"),
        p("process_vm_writev a sibling", "$PY vm_writev"),
        p("take a sibling's descriptor with pidfd_getfd", "$PY getfd"),
        // Lifetime.
        Probe {
            name: "outlive the timeout with a double-forked daemon",
            script: "(setsid sh -c 'sleep 2; echo alive > \"$MARK\"' &); sleep 30",
            judge: Judge::Outlives,
            ..p("", "")
        },
        Probe {
            name: "outlive the command with a double-forked daemon",
            script: "(setsid sh -c 'sleep 2; echo alive > \"$MARK\"' &); exit 0",
            judge: Judge::Outlives,
            ..p("", "")
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
        if let Some(p) = self.var("TMP_PWNED") {
            let _ = std::fs::remove_file(p);
        }
        if let Some(p) = self.var("SYS_ONLY") {
            let _ = std::fs::remove_dir_all(p);
        }
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
    paddock_test_support::prelude::git(dir, &["init", "-q", "-b", "main"]);
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
        std::fs::create_dir_all(d.join("outside/gitdir")).unwrap();
        std::fs::write(d.join("outside/host-file"), "host-file\n").unwrap();
        std::fs::write(d.join("secret.txt"), "host-secret\n").unwrap();
        std::fs::set_permissions(d.join("secret.txt"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        std::fs::create_dir_all(d.join("otherjob/work")).unwrap();
        std::fs::write(d.join("otherjob/work/file"), "other-job\n").unwrap();
        std::fs::write(d.join("otherjob/work/config"), "other-job\n").unwrap();
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
        let sys_only = PathBuf::from(format!(
            "/usr/local/share/paddock-escape-{}-{uid}",
            std::process::id()
        ));
        if nix::unistd::geteuid().is_root() {
            system_only_files(&sys_only);
        }
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
            (
                "TMP_PWNED",
                format!("/tmp/paddock-escape-{}-{uid}-pwned", std::process::id()),
            ),
            ("GITDIR", d.join("outside/gitdir").display().to_string()),
            (
                "GIT_HOOKS",
                d.join("outside/gitdir/hooks").display().to_string(),
            ),
            ("OUT_PWNED", d.join("outside/pwned").display().to_string()),
            ("SYS_ONLY", sys_only.display().to_string()),
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

    fn var(&self, name: &str) -> Option<PathBuf> {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| PathBuf::from(v))
    }

    /// A fresh writable directory (a git repository) for one two-run probe.
    fn fresh_work(&self, name: &str) -> PathBuf {
        let n = FRESH.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let work = self.path().join(format!("{name}-{n}"));
        git_repo(&work);
        if self.uid != 0 {
            chown_tree(&work, self.uid);
        }
        work
    }

    /// [`Fixture::fresh_work`] whose `.git` has no `hooks`.
    fn fresh_work_without_hooks(&self, name: &str) -> PathBuf {
        let work = self.fresh_work(name);
        std::fs::remove_dir_all(work.join(".git/hooks")).unwrap();
        work
    }
}

static FRESH: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Files of a system directory that only root may read, list or run
/// (the host keeps such files; none is needed by a job): mode 0600, a
/// 0700 directory, a file of another owner only group root may read
/// (0040), a 0700 program.
fn system_only_files(dir: &Path) {
    let mode =
        |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    std::fs::create_dir_all(dir.join("private")).unwrap();
    mode(dir, 0o755);
    std::fs::write(dir.join("secret"), "sys-secret\n").unwrap();
    mode(&dir.join("secret"), 0o600);
    std::fs::write(dir.join("private/file"), "sys-secret\n").unwrap();
    mode(&dir.join("private"), 0o700);
    std::fs::write(dir.join("group-only"), "sys-secret\n").unwrap();
    std::os::unix::fs::chown(dir.join("group-only"), Some(12_345), Some(0)).unwrap();
    mode(&dir.join("group-only"), 0o040);
    paddock_test_support::script::write_executable(
        &dir.join("program"),
        b"#!/bin/sh\nexit 0\n",
        0o700,
    );
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

/// `program` as `uid`, holding the caller's descriptors 7 (a host secret,
/// read), 8 (a host file, append) and 9 (a host directory).
fn with_fds(uid: u32, program: &str) -> Command {
    let mut c = as_user(uid, "sh");
    c.arg("-c")
        .arg("exec 7<\"$SECRET\" 8>>\"$OUTSIDE/fd8\" 9<\"$OUTSIDE\"; exec \"$@\"")
        .arg("sh")
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

fn run(mut cmd: Command, judge: Judge, mark: &Path, fx: &Fixture) -> Outcome {
    let _ = std::fs::remove_file(mark);
    let host = match judge {
        Judge::HostPath(var) => fx.var(var),
        _ => None,
    };
    if let Some(h) = &host {
        let _ = std::fs::remove_file(h);
        let _ = std::fs::remove_dir(h);
    }
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
        Judge::HostPath(_) => {
            let made = host.as_ref().is_some_and(|h| h.symlink_metadata().is_ok());
            if let Some(h) = &host {
                let _ = std::fs::remove_file(h);
                let _ = std::fs::remove_dir(h);
            }
            made
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
    let work = match (probe.plant, probe.no_hooks) {
        (_, true) => fx.fresh_work_without_hooks("twin-no-hooks"),
        (Some(_), false) => fx.fresh_work("twin-plant"),
        (None, false) => fx.path().join("twin-work"),
    };
    let mark = work.join("twin-mark");
    let unconfined = |script: &str| {
        let mut cmd = with_fds(fx.uid, "sh");
        if probe.judge == Judge::Outlives && probe.name.contains("timeout") {
            cmd = with_fds(fx.uid, "timeout");
            cmd.args(["1", "sh"]);
        }
        cmd.arg("-c").arg(script);
        script_env(&mut cmd, fx, &work, &mark);
        cmd
    };
    if let Some(plant) = probe.plant {
        assert_eq!(
            run(unconfined(plant), Judge::Exit, &mark, fx),
            Outcome::Worked,
            "{}: the unconfined plant",
            probe.name
        );
    }
    run(unconfined(script), probe.judge, &mark, fx)
}

fn confined(probe: &Probe, fx: &Fixture) -> Outcome {
    let work = match (probe.plant, probe.no_hooks) {
        (_, true) => fx.fresh_work_without_hooks("no-hooks"),
        (Some(_), false) => fx.fresh_work("plant"),
        (None, false) => fx.path().join("work"),
    };
    if let Some(plant) = probe.plant {
        // As a checkout of committed files (or an earlier job) leaves it:
        // a job can no longer create the protected names itself (see the
        // "create a missing ..." probes).
        let mark = work.join("plant-mark");
        let mut cmd = with_fds(fx.uid, "sh");
        cmd.arg("-c").arg(plant);
        script_env(&mut cmd, fx, &work, &mark);
        assert_eq!(
            run(cmd, Judge::Exit, &mark, fx),
            Outcome::Worked,
            "{}: the plant",
            probe.name
        );
    }
    sandboxed(probe, fx, &work)
}

/// One `paddock sandbox` run of `probe`'s script, writable `work`.
fn sandboxed(probe: &Probe, fx: &Fixture, work: &Path) -> Outcome {
    let mark = work.join("mark");
    let mut cmd = with_fds(fx.uid, env!("CARGO_BIN_EXE_paddock"));
    cmd.arg("sandbox")
        .arg("--rw")
        .arg(work)
        .arg("--ro")
        .arg(fx.path().join("probes"))
        .args(["--tmp-size", "16", "--pids", "64", "--memory", "128"]);
    for a in probe.args {
        cmd.arg(a.replace("$WORK", &work.display().to_string()));
    }
    let timeout = if probe.name.contains("timeout") {
        "1"
    } else {
        "60"
    };
    cmd.args(["--timeout", timeout]);
    for name in ["WORK", "MARK"]
        .into_iter()
        .chain(fx.env.iter().map(|(k, _)| k.as_str()))
    {
        cmd.args(["--env", name]);
    }
    cmd.args(["--", "sh", "-c", probe.script]);
    script_env(&mut cmd, fx, work, &mark);
    if let Some((root, _)) = &fx.cgroot {
        cmd.env("PADDOCK_CGROUP_ROOT", root);
    }
    cmd.env("PADDOCK_DATA_DIR", fx.path().join("data"))
        .env("PADDOCK_JOBS_DIR", fx.path().join("jobs"));
    run(cmd, probe.judge, &mark, fx)
}

fn suite(uid: u32) {
    if !paddock_test_support::prelude::sandbox_available() {
        return;
    }
    for tool in ["setpriv", "unshare", "ip", "nsenter", "/usr/bin/python3"] {
        if which::which(tool).is_err() {
            if paddock_test_support::prelude::in_ci() {
                panic!("the escape suite needs `{tool}` (see .ci/run)");
            }
            eprintln!("skipping: the escape suite needs `{tool}`");
            return;
        }
    }
    let fx = Fixture::new(uid);
    let probes = probes();
    assert!(probes.len() >= 80, "{} probes", probes.len());
    eprintln!("{} probes, {} controls", probes.len(), controls().len());
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
        if paddock_test_support::prelude::in_ci() {
            panic!("the escape suite's root pass needs root");
        }
        eprintln!("skipping: the root pass needs root");
        return;
    }
    suite(0);
}

#[test]
fn escapes_fail_as_an_unprivileged_user() {
    // The fixture delegates cgroups and makes files owned by other users,
    // which only root can: run as root, this pass drops to
    // `UNPRIVILEGED_UID` itself.
    if !nix::unistd::geteuid().is_root() {
        let why = "the escape suite's fixture needs root (it delegates cgroups under \
                   /sys/fs/cgroup and makes files owned by other users); as root, this pass \
                   runs the probes as an unprivileged user itself";
        if paddock_test_support::prelude::in_ci() {
            panic!("{why}");
        }
        eprintln!("skipping: {why}");
        return;
    }
    suite(UNPRIVILEGED_UID);
}

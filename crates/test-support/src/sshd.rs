//! A real OpenSSH server on loopback for tests (Debian's
//! `openssh-server`): its own host key, one authorized key, no password
//! or keyboard-interactive login, no PAM, the current user. Git pushes
//! to `ssh://USER@127.0.0.1:PORT/ABSOLUTE/PATH.git` run its
//! `git-receive-pack` through it. [`Sshd::start`] returns `None` (a
//! printed reason locally, a failure in CI) where `sshd` is not
//! installed. Also [`Stall`], an "SSH server" that accepts connections
//! and never says a word (a remote that stalls mid-push).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const SSHD: &str = "/usr/sbin/sshd";

/// A running `sshd`, stopped when dropped.
pub struct Sshd {
    pub port: u16,
    /// The user whose login the pushes use (this process's).
    pub user: String,
    /// A `known_hosts` file naming the server's host key.
    pub known_hosts: PathBuf,
    child: Child,
}

/// A new ed25519 key pair at `path` (and `path.pub`), no passphrase.
pub fn keygen(path: &Path) {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "paddock-test", "-f"])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

impl Sshd {
    /// Serves logins with the key whose public half is `authorized` (an
    /// OpenSSH public key line), its files under `dir`.
    pub fn start(dir: &Path, authorized: &str) -> Option<Sshd> {
        if !Path::new(SSHD).exists() {
            if crate::in_ci() {
                panic!("{SSHD} is not installed in CI (Debian's openssh-server)");
            }
            eprintln!("skipping: {SSHD} is not installed (Debian's openssh-server)");
            return None;
        }
        std::fs::create_dir_all(dir).unwrap();
        let host_key = dir.join("host_key");
        keygen(&host_key);
        let authorized_keys = dir.join("authorized_keys");
        std::fs::write(&authorized_keys, format!("{}\n", authorized.trim())).unwrap();
        let root = nix_is_root();
        if root {
            // sshd started by root wants its privilege separation
            // directory, which Debian's service makes at boot.
            std::fs::create_dir_all("/run/sshd").unwrap();
        }
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nAuthorizedKeysFile {}\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
                 StrictModes no\nPidFile none\nLogLevel ERROR\n",
                host_key.display(),
                authorized_keys.display()
            ),
        )
        .unwrap();
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let host_pub = std::fs::read_to_string(host_key.with_extension("pub")).unwrap();
        let mut fields = host_pub.split_whitespace();
        let (kind, key) = (fields.next().unwrap(), fields.next().unwrap());
        let known_hosts = dir.join("known_hosts");
        std::fs::write(&known_hosts, format!("[127.0.0.1]:{port} {kind} {key}\n")).unwrap();
        let user = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout)
            .unwrap()
            .trim()
            .to_string();
        let sshd = Sshd {
            port,
            user,
            known_hosts,
            child,
        };
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(sshd);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("sshd did not listen on 127.0.0.1:{port}");
    }

    /// The `ssh://` URL of the repository at the absolute `path`.
    pub fn url(&self, path: &Path) -> String {
        format!(
            "ssh://{}@127.0.0.1:{}{}",
            self.user,
            self.port,
            path.display()
        )
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn nix_is_root() -> bool {
    String::from_utf8_lossy(&Command::new("id").arg("-u").output().unwrap().stdout).trim() == "0"
}

/// A loopback TCP server that accepts connections, counts them and never
/// answers (the peer waits for an SSH banner that never comes).
pub struct Stall {
    pub port: u16,
    accepted: Arc<AtomicUsize>,
}

impl Stall {
    pub fn start() -> Stall {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counted = accepted.clone();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for conn in listener.incoming().flatten() {
                counted.fetch_add(1, Ordering::SeqCst);
                held.push(conn);
            }
        });
        Stall { port, accepted }
    }

    /// How many connections it has accepted.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

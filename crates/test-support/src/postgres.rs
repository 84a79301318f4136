//! A real, throwaway PostgreSQL cluster for the store's tests (Debian's
//! `postgresql`, version 15): one per test process, started lazily by the
//! first [`database`] call, listening only on a Unix socket in its own
//! temporary directory (no TCP port, so no port races between test
//! processes), with password (SCRAM) authentication for its one superuser
//! [`USER`]. Each [`database`] is a fresh `CREATE DATABASE` on it.
//!
//! initdb and postgres refuse to run as root: under root they run as
//! `nobody` (`setpriv`), the directory chowned to it. The server runs under
//! a small shell that `setpriv --pdeathsig TERM` ties to a thread of this
//! process that lives as long as the process: when the test process exits
//! (or is killed), the shell stops the server (fast shutdown) and removes
//! the directory (`/tmp/paddock-pg-…`). Only a test process killed while
//! `initdb` runs leaves that directory behind, under `/tmp`.
//!
//! Where PostgreSQL is not installed, [`database`] returns `None` after
//! printing why (a failure with `CI=true`, see [`crate::skip`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use sqlx::Connection;

/// Where Debian's `postgresql` package puts version 15's programs.
pub const BIN_DIR: &str = "/usr/lib/postgresql/15/bin";

/// The cluster's superuser.
pub const USER: &str = "paddock";

/// Its password (tests check that it never shows in an error).
pub const PASSWORD: &str = "pw-9c1e-never-shown";

/// The port named in the socket's file name (`.s.PGSQL.5432`); the server
/// listens on no TCP port.
pub const PORT: u16 = 5432;

/// A running cluster.
#[derive(Debug)]
pub struct Cluster {
    /// The directory holding the server's socket (and its data, under
    /// `data/`).
    pub socket_dir: PathBuf,
}

/// One fresh database on the process's cluster.
#[derive(Debug, Clone)]
pub struct Database {
    pub name: String,
    /// `postgres://USER:PASSWORD@localhost:5432/NAME?host=SOCKET_DIR`.
    pub url: String,
    pub socket_dir: PathBuf,
}

impl Database {
    /// The URL with another password (a wrong one).
    pub fn url_with_password(&self, password: &str) -> String {
        url(&self.socket_dir, &self.name, Some(password))
    }

    /// The URL without a password.
    pub fn url_without_password(&self) -> String {
        url(&self.socket_dir, &self.name, None)
    }
}

fn url(socket_dir: &Path, name: &str, password: Option<&str>) -> String {
    let auth = match password {
        Some(p) => format!("{USER}:{p}"),
        None => USER.to_owned(),
    };
    format!(
        "postgres://{auth}@localhost:{PORT}/{name}?host={}",
        socket_dir.display()
    )
}

static CLUSTER: OnceLock<Option<Cluster>> = OnceLock::new();
static NEXT: AtomicU64 = AtomicU64::new(1);

/// True when PostgreSQL 15 is installed; otherwise prints why and returns
/// false locally, and fails in CI.
pub fn available() -> bool {
    let missing: Vec<String> = ["initdb", "postgres", "pg_isready"]
        .iter()
        .map(|b| Path::new(BIN_DIR).join(b))
        .filter(|p| !p.exists())
        .map(|p| p.display().to_string())
        .collect();
    if missing.is_empty() {
        return true;
    }
    if crate::in_ci() {
        panic!(
            "PostgreSQL is not installed in CI (Debian's postgresql): no {}",
            missing.join(", ")
        );
    }
    eprintln!(
        "skipping: PostgreSQL 15 is not installed (Debian's postgresql): no {}",
        missing.join(", ")
    );
    false
}

/// The process's cluster, started on first use; `None` (with a printed
/// reason, a failure in CI) where PostgreSQL is missing.
pub fn cluster() -> Option<&'static Cluster> {
    CLUSTER.get_or_init(|| available().then(start)).as_ref()
}

/// A fresh, empty database on the process's cluster; `None` where
/// PostgreSQL is missing (see [`cluster`]).
pub async fn database() -> Option<Database> {
    let cluster = tokio::task::spawn_blocking(cluster).await.unwrap()?;
    let name = format!(
        "t{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    );
    let admin = url(&cluster.socket_dir, "postgres", Some(PASSWORD));
    let mut conn = sqlx::PgConnection::connect(&admin).await.unwrap();
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    Some(Database {
        url: url(&cluster.socket_dir, &name, Some(PASSWORD)),
        name,
        socket_dir: cluster.socket_dir.clone(),
    })
}

fn is_root() -> bool {
    String::from_utf8_lossy(&Command::new("id").arg("-u").output().unwrap().stdout).trim() == "0"
}

/// `setpriv` arguments that run a program as `nobody` when this process
/// is root (PostgreSQL refuses root), nothing otherwise.
fn as_unprivileged(root: bool) -> Vec<&'static str> {
    if root {
        vec!["--reuid=65534", "--regid=65534", "--clear-groups"]
    } else {
        Vec::new()
    }
}

/// initdb, then the server on a thread that lives as long as the process
/// (the server's `--pdeathsig` follows the thread that started it).
fn start() -> Cluster {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("postgres-cluster".into())
        .spawn(move || {
            let (cluster, mut server) = start_here();
            tx.send(cluster).unwrap();
            // Lives as long as the server (normally, the process).
            let _ = server.wait();
        })
        .unwrap();
    rx.recv().unwrap()
}

fn start_here() -> (Cluster, std::process::Child) {
    let root = is_root();
    // Under /tmp: short enough for a socket path, and reachable by
    // `nobody`.
    let dir = tempfile::Builder::new()
        .prefix("paddock-pg-")
        .tempdir_in("/tmp")
        .unwrap()
        .keep();
    let pwfile = dir.join("pw");
    std::fs::write(&pwfile, PASSWORD).unwrap();
    if root {
        std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
        std::os::unix::fs::chown(&pwfile, Some(65534), Some(65534)).unwrap();
    }
    let data = dir.join("data");
    let out = Command::new("setpriv")
        .args(as_unprivileged(root))
        .arg("--")
        .arg(Path::new(BIN_DIR).join("initdb"))
        .arg("-D")
        .arg(&data)
        .args([
            "-U",
            USER,
            "-A",
            "scram-sha-256",
            "-E",
            "UTF8",
            "--no-locale",
        ])
        .arg("--no-sync")
        .arg(format!("--pwfile={}", pwfile.display()))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &dir)
        .env("LC_ALL", "C")
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "initdb failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_file(&pwfile).unwrap();
    // The shell stops the server (SIGINT: fast shutdown) when this thread
    // dies, waits for it and removes the directory.
    let script = r#"
"$1/postgres" -D "$2/data" -k "$2" -p "$3" -c listen_addresses= \
  -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
  -c max_connections=300 -c log_min_messages=panic &
pg=$!
trap 'kill -INT $pg' TERM INT HUP
while kill -0 $pg 2>/dev/null; do wait $pg; done
rm -rf "$2"
"#;
    let mut server = Command::new("setpriv")
        .args(as_unprivileged(root))
        .args(["--pdeathsig", "TERM", "--", "/bin/sh", "-c", script, "sh"])
        .arg(BIN_DIR)
        .arg(&dir)
        .arg(PORT.to_string())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &dir)
        .env("LC_ALL", "C")
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    for _ in 0..300 {
        let ready = Command::new(Path::new(BIN_DIR).join("pg_isready"))
            .arg("-q")
            .arg("-h")
            .arg(&dir)
            .args(["-p", &PORT.to_string()])
            .status()
            .is_ok_and(|s| s.success());
        if ready {
            return (Cluster { socket_dir: dir }, server);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = server.kill();
    let _ = server.wait();
    panic!("PostgreSQL did not start in {}", dir.display());
}

//! What a job will do on this host, done once for `paddock doctor`: the
//! kernel may support every sandbox feature and jobs still fail because of
//! where they live (a state directory that cannot be written, a
//! filesystem without Unix sockets, a path the sandbox cannot enter). So
//! the check works where jobs work: it makes a job-shaped directory under
//! the real jobs directory (`doctor-<uuid>`, as long as a job's name, with
//! `work/` and `meta/`), binds a broker socket in it the way a job's broker
//! does, and starts a sandbox whose working directory is that `work/` and
//! whose command (this binary, [`CONNECT_ARG`]) reaches the socket through
//! the sandbox's forwarder, as an engine reaches its broker. The directory
//! is removed afterwards. Each failed step says how to fix it.

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use paddock_sandbox::{launch, Limits, NetMode, Policy};
use serde::Serialize;

use crate::launcher::SANDBOX_BROKER_PORT;
use crate::paths::Paths;

/// The hidden subcommand the check runs inside its sandbox: connect to the
/// broker forwarder's port and expect [`GREETING`].
pub const CONNECT_ARG: &str = "__doctor-connect";

/// What the check's broker socket answers.
const GREETING: &[u8] = b"paddock-broker\n";

/// How long the sandbox's command may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// One step of the check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// `state directory`, `data directory`, `broker socket`, `sandbox job`.
    pub name: std::borrow::Cow<'static, str>,
    pub ok: bool,
    /// What was done, or why it failed.
    pub detail: String,
    /// How to fix a failure.
    pub fix: Option<String>,
}

impl Check {
    fn ok(name: &'static str, detail: String) -> Check {
        Check {
            name: name.into(),
            ok: true,
            detail,
            fix: None,
        }
    }

    fn failed(name: &'static str, detail: String, fix: String) -> Check {
        Check {
            name: name.into(),
            ok: false,
            detail,
            fix: Some(fix),
        }
    }
}

/// Runs the check under `paths` with `exe` (this `paddock` binary); the
/// sandbox step only when `sandbox` (the kernel side works).
pub fn run(paths: &Paths, exe: &Path, sandbox: bool) -> Vec<Check> {
    let mut checks = Vec::new();
    let data = paths.artifacts.parent().unwrap_or(&paths.artifacts);
    checks.push(match std::fs::create_dir_all(&paths.artifacts) {
        Ok(()) => Check::ok("data directory", format!("{} is writable", data.display())),
        Err(e) => Check::failed(
            "data directory",
            format!("create {}: {e}", paths.artifacts.display()),
            "point XDG_DATA_HOME (or --data-dir / PADDOCK_DATA_DIR) at a directory you can write"
                .into(),
        ),
    });
    let scratch = paths
        .jobs
        .join(format!("doctor-{}", uuid::Uuid::now_v7().simple()));
    let made = std::fs::create_dir_all(scratch.join("work"))
        .and_then(|()| std::fs::create_dir_all(scratch.join("meta")));
    if let Err(e) = made {
        checks.push(Check::failed(
            "state directory",
            format!("create a job directory {}: {e}", scratch.display()),
            "point XDG_STATE_HOME (or --jobs-dir / PADDOCK_JOBS_DIR) at a directory you can write"
                .into(),
        ));
        let _ = std::fs::remove_dir_all(&scratch);
        return checks;
    }
    checks.push(Check::ok(
        "state directory",
        format!("{} is writable", paths.jobs.display()),
    ));
    checks.extend(socket_and_sandbox(&scratch, exe, sandbox));
    let _ = std::fs::remove_dir_all(&scratch);
    checks
}

/// The broker socket in `scratch/meta`, then the sandbox that reaches it.
fn socket_and_sandbox(scratch: &Path, exe: &Path, sandbox: bool) -> Vec<Check> {
    let socket = scratch.join("meta/broker.sock");
    let listener = match paddock_sandbox::unix_path::bind(&socket) {
        Ok(l) => l,
        Err(e) => {
            return vec![Check::failed(
                "broker socket",
                format!("bind {}: {e}", socket.display()),
                "put the jobs directory on a local filesystem that supports Unix sockets \
                 (not NFS, 9p or a FUSE mount): XDG_STATE_HOME, --jobs-dir or PADDOCK_JOBS_DIR"
                    .into(),
            )]
        }
    };
    let mut checks = vec![Check::ok(
        "broker socket",
        format!(
            "bound {} ({} bytes)",
            socket.display(),
            socket.as_os_str().len()
        ),
    )];
    if !sandbox {
        return checks;
    }
    // Answers the one connection the sandbox's command makes.
    std::thread::spawn(move || {
        if let Ok((mut conn, _)) = listener.accept() {
            let _ = conn.write_all(GREETING);
        }
    });
    let work = scratch.join("work");
    checks.push(match start(exe, &work, &socket, scratch) {
        Ok(()) => Check::ok(
            "sandbox job",
            format!(
                "a sandbox working in {} reached its broker socket",
                work.display()
            ),
        ),
        Err(e) => Check::failed(
            "sandbox job",
            e,
            "jobs on the sandbox rung fail with this jobs directory: fix what the error names, \
             or point XDG_STATE_HOME (or --jobs-dir / PADDOCK_JOBS_DIR) at a local directory; \
             `isolation = \"process\"` runs jobs unconfined meanwhile"
                .into(),
        ),
    });
    checks
}

/// Starts the sandbox a job would get (its working directory `work`, the
/// broker forwarder to `socket`) running [`CONNECT_ARG`].
fn start(exe: &Path, work: &Path, socket: &Path, scratch: &Path) -> Result<(), String> {
    let exe = exe
        .canonicalize()
        .map_err(|e| format!("locate the paddock binary {}: {e}", exe.display()))?;
    let name = scratch
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "doctor".into());
    let policy = Policy {
        argv: vec![
            exe.display().to_string(),
            CONNECT_ARG.into(),
            SANDBOX_BROKER_PORT.to_string(),
        ],
        env: vec![],
        cwd: work.to_path_buf(),
        ro: vec![exe.clone()],
        rw: vec![work.to_path_buf()],
        protect: vec![],
        hidden: vec![],
        tmp_mb: 1,
        net: NetMode::Broker {
            socket: socket.to_path_buf(),
            port: SANDBOX_BROKER_PORT,
            more: Vec::new(),
        },
        direct: None,
        limits: Limits::default(),
        allow_without_cgroups: true,
        notices: None,
        timeout_secs: Some(TIMEOUT.as_secs()),
        cgroup_root: None,
        name,
        started: None,
    };
    let mut cmd = launch::command(&exe, &policy).map_err(|e| e.to_string())?;
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("start the sandbox helper: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    Err(if stderr.is_empty() {
        format!("the sandbox exited with {}", out.status)
    } else {
        stderr
    })
}

/// Why [`connect`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("paddock {CONNECT_ARG}: expected a port")]
    NoPort,
    #[error("the broker socket answered {got:?}, not the check's greeting")]
    Greeting { got: String },
    #[error("reach the broker socket through the forwarder on 127.0.0.1:{port}: {source}")]
    Reach {
        port: u16,
        #[source]
        source: std::io::Error,
    },
}

impl ConnectError {
    /// The process's exit code: 2 for a missing port, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            ConnectError::NoPort => 2,
            ConnectError::Greeting { .. } | ConnectError::Reach { .. } => 1,
        }
    }
}

/// [`CONNECT_ARG`]`PORT`: inside the check's sandbox, connects to the
/// forwarder on `127.0.0.1:PORT` and expects the broker socket's greeting
/// (the binary prints the error and exits with its code).
pub fn connect(port: Option<&str>) -> Result<(), ConnectError> {
    let port = port
        .and_then(|p| p.parse::<u16>().ok())
        .ok_or(ConnectError::NoPort)?;
    let got = std::net::TcpStream::connect(("127.0.0.1", port))
        .and_then(|mut tcp| {
            tcp.set_read_timeout(Some(TIMEOUT))?;
            let mut got = Vec::new();
            tcp.read_to_end(&mut got)?;
            Ok(got)
        })
        .map_err(|source| ConnectError::Reach { port, source })?;
    if got == GREETING {
        Ok(())
    } else {
        Err(ConnectError::Greeting {
            got: String::from_utf8_lossy(&got).into_owned(),
        })
    }
}

//! `paddock sandbox [OPTIONS] -- COMMAND ARGS...`: runs any command
//! confined by Paddock's sandbox (crates/sandbox), passes stdio through and
//! exits with the command's status or a documented sandbox code
//! (docs/sandbox.md). A `paddock sandbox` process is freshly exec'd,
//! single-threaded and dedicated to the one run, so it is the helper
//! itself; the long-lived `paddock run` starts `paddock __sandbox-init`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Parser, ValueEnum};
use paddock_sandbox::policy::DEFAULT_PATH;
use paddock_sandbox::{launch, protected_in, Limits, NetMode, Policy};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Net {
    /// Loopback only.
    None,
    /// Loopback plus a forwarder to --broker-socket on 127.0.0.1:--broker-port.
    Broker,
}

/// A cap's value: a positive number (a cap of 0 killed the command at
/// once and said it was the cap, exit 123).
fn at_least_one(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err("give at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("`{s}` is not a number: {e}")),
    }
}

#[derive(Debug, Args)]
pub struct SandboxArgs {
    /// A writable path (repeatable).
    #[arg(long, value_name = "PATH")]
    rw: Vec<PathBuf>,
    /// An extra read-only path (repeatable); system dirs are always read-only.
    #[arg(long, value_name = "PATH")]
    ro: Vec<PathBuf>,
    /// Memory cap in MB (cgroup).
    #[arg(long, value_name = "MB", value_parser = at_least_one)]
    memory: Option<u64>,
    /// Process cap (cgroup).
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pids: Option<u64>,
    /// CPU cap in percent of one core (cgroup).
    #[arg(long, value_name = "PCT", value_parser = at_least_one)]
    cpu: Option<u64>,
    /// Run without the cgroup caps when this host cannot apply them.
    #[arg(long)]
    allow_without_cgroups: bool,
    /// Wall-clock limit; the whole tree is killed when it passes (exit 124).
    #[arg(long, value_name = "SECS", value_parser = at_least_one)]
    timeout: Option<u64>,
    /// The network the command gets: none at all, or only the broker's socket.
    #[arg(long, value_enum, default_value_t = Net::None)]
    net: Net,
    /// The broker's Unix socket (with --net broker).
    #[arg(long, value_name = "PATH")]
    broker_socket: Option<PathBuf>,
    /// The loopback port the forwarder listens on inside the sandbox.
    #[arg(long, default_value_t = 8080)]
    broker_port: u16,
    /// An environment entry: NAME copies this process's value, NAME=VALUE
    /// sets one (repeatable). Nothing else is passed but PATH.
    #[arg(long, value_name = "NAME[=VALUE]")]
    env: Vec<String>,
    /// Size of the private /tmp in MB.
    #[arg(long, default_value_t = 256, value_name = "MB")]
    tmp_size: u64,
    /// Working directory (default: the current one when it is visible
    /// inside, else the first --rw path, else /).
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// The command and its arguments.
    #[arg(required = true, last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// Builds the policy; errors are bad input.
pub fn policy(args: SandboxArgs) -> anyhow::Result<Policy> {
    let net = match args.net {
        Net::None => NetMode::None,
        Net::Broker => {
            let socket = args
                .broker_socket
                .context("--net broker needs --broker-socket PATH")?;
            NetMode::Broker {
                socket,
                port: args.broker_port,
                more: Vec::new(),
            }
        }
    };
    let mut env = vec![("PATH".to_string(), DEFAULT_PATH.to_string())];
    for (k, v) in launch::resolve_env(&args.env, |k| std::env::var(k).ok()) {
        env.retain(|(name, _)| *name != k);
        env.push((k, v));
    }
    // Resolved once, here: the helper opens these exact paths and follows
    // no link on the way. A path that is itself a link is refused (in a
    // writable directory the job may have planted it).
    // Each named by its option (`--rw /nope: No such file…`).
    let canon = |flag: &str, p: &PathBuf| -> anyhow::Result<PathBuf> {
        let meta = std::fs::symlink_metadata(p)
            .with_context(|| format!("sandbox path {flag} {}", p.display()))?;
        if meta.file_type().is_symlink() {
            anyhow::bail!(
                "sandbox path {flag} {} is a symbolic link; pass the path it points to",
                p.display()
            );
        }
        p.canonicalize()
            .with_context(|| format!("sandbox path {flag} {}", p.display()))
    };
    let rw = args
        .rw
        .iter()
        .map(|p| canon("--rw", p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let ro = args
        .ro
        .iter()
        .map(|p| canon("--ro", p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for p in args.rw.iter().chain(&args.ro) {
        no_link_inside(p, &rw)?;
    }
    // A path on a part the view makes itself (`/etc`, `/tmp`, under
    // `/proc`) is the caller's mistake, told as bad input (exit 2) before
    // the helper starts; the helper's planning refuses it too (exit 125),
    // for the runner's own policies.
    for (flag, paths) in [("--rw", &rw), ("--ro", &ro)] {
        for p in paths {
            paddock_sandbox::own_parts::place(p, false)
                .map_err(anyhow::Error::new)
                .with_context(|| format!("sandbox path {flag} {}", p.display()))?;
        }
    }
    let cwd = match args.cwd {
        Some(c) => c,
        None => {
            let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
            let visible = |p: &Path| rw.iter().chain(ro.iter()).any(|r| p.starts_with(r));
            if visible(&here) {
                here
            } else {
                rw.first().cloned().unwrap_or_else(|| PathBuf::from("/"))
            }
        }
    };
    let protect = rw.iter().flat_map(|d| protected_in(d)).collect();
    let limits = Limits {
        memory_mb: args.memory,
        pids: args.pids,
        cpu_percent: args.cpu,
    };
    // The name only names the run's cgroup: without caps there is none,
    // and no random id is drawn (a static binary's random source costs
    // four system calls on every start).
    let capped =
        limits.memory_mb.is_some() || limits.pids.is_some() || limits.cpu_percent.is_some();
    let name = if capped {
        format!(
            "sbx-{}-{}",
            std::process::id(),
            uuid::Uuid::now_v7().simple()
        )
    } else {
        format!("sbx-{}", std::process::id())
    };
    Ok(Policy {
        argv: args.command,
        env,
        cwd,
        ro,
        rw,
        protect,
        hidden: Vec::new(),
        tmp_mb: args.tmp_size,
        net,
        direct: None,
        limits,
        allow_without_cgroups: args.allow_without_cgroups,
        notices: None,
        timeout_secs: args.timeout,
        cgroup_root: std::env::var_os("PADDOCK_CGROUP_ROOT").map(PathBuf::from),
        name,
        started: None,
    })
}

/// Refuses `path` when resolving it goes through a symbolic link inside
/// one of the writable directories `rw` (resolved): the job may have
/// planted it there (`--rw W --ro W/a/b` with `W/a` a link). Links outside
/// them (a `/home` that is a link) are followed as usual.
fn no_link_inside(path: &Path, rw: &[PathBuf]) -> anyhow::Result<()> {
    use std::path::Component;
    let abs =
        std::path::absolute(path).with_context(|| format!("sandbox path {}", path.display()))?;
    let mut cur = PathBuf::from("/");
    for c in abs.components() {
        match c {
            Component::Normal(name) => {
                let next = cur.join(name);
                let inside = rw.iter().any(|w| next.starts_with(w) && next != *w);
                let is_link =
                    std::fs::symlink_metadata(&next).is_ok_and(|m| m.file_type().is_symlink());
                if inside && is_link {
                    anyhow::bail!(
                        "sandbox path {} goes through {}, a symbolic link inside a writable path",
                        path.display(),
                        next.display()
                    );
                }
                cur = next.canonicalize().unwrap_or(next);
            }
            Component::ParentDir => {
                cur.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Ok(())
}

/// `paddock sandbox` on its own: the parser of the subcommand alone (the
/// rest of the command line's subcommands are not built).
#[derive(Debug, Parser)]
#[command(
    name = "paddock sandbox",
    bin_name = "paddock sandbox",
    about = "Run a command confined by Paddock's sandbox (docs/sandbox.md)"
)]
struct SandboxCli {
    #[command(flatten)]
    args: SandboxArgs,
}

/// Parses `args` (starting with `sandbox`) and runs it, as [`main`] does.
pub fn main_from_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> ExitCode {
    match SandboxCli::try_parse_from(args) {
        Ok(cli) => main(cli.args),
        Err(e) => {
            let _ = e.print();
            ExitCode::from(if e.use_stderr() { 2 } else { 0 })
        }
    }
}

/// Builds the policy and runs it in this process: a `paddock sandbox`
/// process is freshly exec'd, single-threaded (no runtime is started for
/// it) and dedicated to this one run, so it is the helper itself (the
/// long-lived `paddock run` starts a separate helper instead). Returns the
/// run's exit code, or 2 for bad input.
pub fn main(args: SandboxArgs) -> ExitCode {
    // Already started on the fast path; here for `paddock --db X sandbox`.
    paddock_sandbox::trace::init();
    let policy = match policy(args) {
        Ok(p) => p,
        Err(e) => {
            errln!("paddock: {}", paddock::error_chain::chain(e.as_ref()));
            return ExitCode::from(2);
        }
    };
    paddock_sandbox::trace::step("parsed");
    let code = paddock_sandbox::init::run_policy(policy);
    ExitCode::from(u8::try_from(code).unwrap_or(paddock_sandbox::exit::SETUP_FAILED as u8))
}

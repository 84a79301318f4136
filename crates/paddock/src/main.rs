//! The `paddock` binary: the helper entry points that must run before
//! anything else (the sandbox helper, the `process` rung's supervisor,
//! doctor's connect probe, the disk walk in a user namespace, the
//! `paddock sandbox` fast path), then the command line, parsed and
//! dispatched by `cli/` (one file per subcommand). Exit codes are part of
//! the interface (docs/cli.md): 0 done, 1 failed, 2 bad input, 3 held by
//! budget, 4 timed out, 5 cancelled, 70 internal error.

use std::ffi::OsStr;
use std::process::ExitCode;

use clap::Parser as _;
use cli::args::{Cli, Cmd};
use cli::exit;

#[macro_use]
mod stdio;

mod cli;

fn main() -> ExitCode {
    // No descriptor the caller left open reaches anything this process
    // starts: the sandbox helper and its command, an engine on the
    // `process` rung, git (docs/sandbox.md, threat model).
    if let Err(e) = paddock_sandbox::caps::cloexec_inherited() {
        errln!("paddock: cannot mark inherited file descriptors close-on-exec: {e}");
        return ExitCode::from(exit::INTERNAL);
    }
    if let Some(code) = helper_entry() {
        return code;
    }
    // Paddock holds the provider keys: its /proc entries (environ, mem)
    // belong to root from now on, so a job's engine of the same uid cannot
    // read them (a root engine with CAP_SYS_PTRACE still can; docs/host-profile.md).
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        errln!("paddock: cannot make this process non-dumpable: {e}");
        return ExitCode::from(exit::INTERNAL);
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            let code = if e.use_stderr() {
                exit::BAD_INPUT
            } else {
                exit::DONE
            };
            return ExitCode::from(code);
        }
    };
    cli::init_output(&cli);
    match cli.command {
        Cmd::Hook { cmd } => ExitCode::from(cli::hook::exec(&cmd)),
        // `paddock sandbox` needs no runtime: it becomes the helper (exec).
        Cmd::Sandbox(args) => cli::sandbox::main(args),
        command => cli::run_async(Cli { command, ..cli }),
    }
}

/// The entry points that run instead of the command line, each before
/// anything else of this binary: `None` when this process is `paddock`
/// itself.
fn helper_entry() -> Option<ExitCode> {
    let first = std::env::args_os().nth(1)?;
    let code = |c: i32| ExitCode::from(u8::try_from(c).unwrap_or(exit::INTERNAL));
    // The sandbox helper: freshly exec'd, single-threaded (docs/sandbox.md).
    if first == OsStr::new(paddock_sandbox::launch::INIT_ARG) {
        return Some(code(paddock_sandbox::init::main()));
    }
    // Inside `paddock doctor`'s sandbox: reach the broker socket.
    if first == OsStr::new(paddock::host_check::CONNECT_ARG) {
        let port = std::env::args().nth(2);
        return Some(match paddock::host_check::connect(port.as_deref()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                errln!("{e}");
                ExitCode::from(e.exit_code())
            }
        });
    }
    // The `process` rung's supervisor: single-threaded, no runtime.
    if first == OsStr::new(paddock::supervise::SUPERVISE_ARG) {
        return Some(code(paddock::supervise::main(std::env::args_os().skip(2))));
    }
    // The count of a job's directory in a user namespace of Paddock's
    // own (a directory the job closed): single-threaded, no runtime.
    if first == OsStr::new(paddock::workspace::disk_walk::WALK_ARG) {
        return Some(code(paddock::workspace::disk_walk::main(
            std::env::args_os().skip(2),
        )));
    }
    // The detached remover `paddock run` leaves the trash (and the
    // caches' size cap) to.
    if first == OsStr::new(paddock::workspace::trash::EMPTY_ARG) {
        // Out of whatever directory `paddock run` ran in (it does not
        // give its child one: `trash::empty_detached`).
        let _ = std::env::set_current_dir("/");
        // Started ahead by `paddock run` (`trash::start_waiting`): nothing
        // is done before its standard input ends (released, or that
        // `paddock` gone); started by `trash::empty_detached`, it is
        // empty (`/dev/null`) and this returns at once.
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        return Some(code(paddock::cache_cap::after_job_main(
            std::env::args_os().skip(2),
        )));
    }
    // `paddock sandbox ...` is on the start-up path of every confined
    // command: it parses only its own arguments and sets up no logging
    // (`paddock --db X sandbox ...` still works, through the full parser).
    if first == OsStr::new("sandbox") {
        paddock_sandbox::trace::init();
        return Some(cli::sandbox::main_from_args(std::env::args_os().skip(1)));
    }
    None
}

//! `paddock doctor`: what this host supports for each isolation rung, and
//! whether a job works where jobs live here.

use anyhow::Context as _;

use paddock::doctor::{self, Report};
use paddock::host_check::Check;
use paddock::paths::Paths;

use super::{exit, Failure};

#[derive(clap::Args)]
pub struct DoctorArgs {
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub fn exec(
    args: DoctorArgs,
    paths: &Paths,
    host_dir: Option<std::path::PathBuf>,
) -> Result<u8, Failure> {
    let mut report = doctor::report(paths, super::run::cgroup_root().as_deref());
    let (checks, tools) = config_checks(super::run::config_location().as_deref());
    report.setup.extend(checks);
    if let Some(tools) = tools {
        report.setup.extend(engine_views(paths, host_dir, &tools));
    }
    if args.json {
        outln!(
            "{}",
            paddock::terminal_text::json::to_string(&report).context("serialize the report")?
        );
    } else {
        out!("{}", render(&report));
    }
    Ok(
        if report.rungs.iter().all(|r| r.supported)
            && report.checks.iter().chain(&report.setup).all(|c| c.ok)
        {
            exit::DONE
        } else {
            exit::FAILED
        },
    )
}

/// What `[jobs]` not reading leaves unchecked, said in its check's fix:
/// the engine views are judged with the host's tools, so they are not
/// judged at all rather than reported as a second failure of the same
/// part.
const VIEWS_UNCHECKED: &str =
    "whether the engines bind into a job's sandbox is checked once it reads";

/// The config file read once, part by part: one failed check for each
/// part that does not read (every one, where a command names the first of
/// the parts it reads), naming the commands it stops; else one passed
/// check naming the file (or saying there is none). `[jobs]` naming a
/// path this host lacks is its part's failure, as `paddock run` refuses
/// it. With the checks, the host's tools from `[jobs]` when it reads
/// (what the engine views are judged with), `None` when it does not:
/// before, doctor loaded the file a second time for the engine views and
/// reported a broken `[jobs]` twice, the second time without the commands
/// it stops.
fn config_checks(
    file: Option<&std::path::Path>,
) -> (Vec<Check>, Option<paddock::runner::JobTools>) {
    use paddock::config::Section;
    let check = |ok: bool, detail: String, fix: Option<String>| Check {
        name: "config file".into(),
        ok,
        detail,
        fix,
    };
    let Some(file) = file else {
        return (
            vec![check(
                true,
                "none (neither XDG_CONFIG_HOME nor HOME is set): the defaults".into(),
                None,
            )],
            Some(Default::default()),
        );
    };
    let sections = match paddock::config::load_sections(file) {
        Ok(sections) => sections,
        Err(e) => {
            return (
                vec![check(
                    false,
                    paddock::error_chain::chain(&e),
                    Some(format!(
                        "fix the config file (docs/cli.md#config-file): until then every command \
                         that reads it refuses to start, and {VIEWS_UNCHECKED}"
                    )),
                )],
                None,
            )
        }
    };
    let mut errors: Vec<(Section, String)> = sections
        .errors()
        .into_iter()
        .map(|(section, e)| (section, paddock::error_chain::chain(e)))
        .collect();
    let tools = match sections.jobs().map(super::run::job_tools) {
        Some(Ok(tools)) => Some(tools),
        Some(Err(Failure::BadInput(e) | Failure::Internal(e))) => {
            errors.push((Section::Jobs, paddock::error_chain::chain(e.as_ref())));
            None
        }
        None => None,
    };
    if errors.is_empty() {
        let detail = if file.exists() {
            format!("{}: every part reads", file.display())
        } else {
            format!("{}: none, the defaults", file.display())
        };
        return (vec![check(true, detail, None)], tools);
    }
    let checks = errors
        .into_iter()
        .map(|(section, e)| {
            let stops = super::config_reads::stopped_by(section);
            let unchecked = if section == Section::Jobs {
                format!(", and {VIEWS_UNCHECKED}")
            } else {
                String::new()
            };
            check(
                false,
                format!("{}: {e}", section.name()),
                Some(format!(
                    "fix it (docs/cli.md#config-file): until then {stops} {} to start{unchecked}",
                    if stops.contains(',') || stops.contains(" and ") {
                        "refuse"
                    } else {
                        "refuses"
                    }
                )),
            )
        })
        .collect();
    (checks, tools)
}

/// Whether each engine on PATH binds into a sandboxed job's view
/// (`doctor::engine_views`), on the host `paddock run` would run it on
/// here (PATH, this directory, the config file's `[jobs]` as `tools`,
/// these paths).
fn engine_views(
    paths: &Paths,
    host_dir: Option<std::path::PathBuf>,
    tools: &paddock::runner::JobTools,
) -> Vec<Check> {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            return vec![Check {
                name: "engine views".into(),
                ok: false,
                detail: format!(
                    "cannot tell whether the engines bind into a job's sandbox: locate the \
                     paddock binary: {e}"
                ),
                fix: None,
            }]
        }
    };
    let host_path = std::env::var_os("PATH");
    let cwd = std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("/"));
    let host_dir = super::run::host_dir_of(paths, host_dir.as_deref());
    doctor::engine_views(&paddock::runner::ViewHost {
        paths,
        host_path: host_path.as_deref(),
        cwd: &cwd,
        host_dir: &host_dir,
        helper_exe: &exe,
        tools,
        host_secrets: &[],
    })
}

/// The report as text: the host's facts, the rungs, this host's jobs, what
/// is installed; each failed check with its fix.
pub fn render(r: &Report) -> String {
    let yes = |b: bool| if b { "yes" } else { "no" };
    let h = &r.host;
    let mut out = String::new();
    out.push_str(&format!(
        "user namespaces  {} ({})\n",
        yes(h.user_namespaces),
        h.user_namespaces_detail
    ));
    out.push_str(&format!(
        "landlock         {}\n",
        h.landlock_abi
            .map(|a| format!("ABI {a}"))
            .unwrap_or_else(|| "no".into())
    ));
    out.push_str(&format!("seccomp          {}\n", yes(h.seccomp)));
    out.push_str(&format!(
        "cgroups          {} ({})\n",
        h.cgroup.as_deref().unwrap_or("none"),
        h.cgroup_detail
    ));
    out.push_str(&format!("overlayfs        {}\n", yes(h.overlayfs)));
    out.push_str(&format!("uid              {}\n", r.uid));
    out.push_str("\nrungs:\n");
    for rung in &r.rungs {
        out.push_str(&format!(
            "  {:<9} {:<3}  {}\n",
            rung.name,
            yes(rung.supported),
            rung.detail
        ));
    }
    if !r.checks.is_empty() {
        out.push_str("\nthis host's jobs:\n");
    }
    render_checks(&mut out, &r.checks);
    if !r.setup.is_empty() {
        out.push_str("\ninstalled:\n");
    }
    render_checks(&mut out, &r.setup);
    out
}

fn render_checks(out: &mut String, checks: &[Check]) {
    for c in checks {
        out.push_str(&format!(
            "  {:<16} {:<3}  {}\n",
            c.name,
            if c.ok { "ok" } else { "no" },
            c.detail
        ));
        if let Some(fix) = &c.fix {
            out.push_str(&format!("  {:<16}       fix: {fix}\n", ""));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use paddock::doctor::Rung;
    use paddock_sandbox::probe::HostSupport;

    #[test]
    fn renders_the_host_and_the_rungs() {
        let report = Report {
            host: HostSupport {
                user_namespaces: true,
                user_namespaces_detail: "max_user_namespaces=96365".into(),
                landlock_abi: Some(7),
                seccomp: true,
                cgroup: Some("v1".into()),
                cgroup_detail: "/sys/fs/cgroup/{memory,pids,cpu}".into(),
                overlayfs: true,
            },
            uid: 1000,
            rungs: vec![
                Rung {
                    name: "process",
                    supported: true,
                    detail: "always available (no isolation)".into(),
                },
                Rung {
                    name: "sandbox",
                    supported: false,
                    detail: "unshare the user, mount, network, IPC, UTS and cgroup namespaces: EPERM: Operation not permitted".into(),
                },
            ],
            checks: vec![
                Check {
                    name: "data directory".into(),
                    ok: true,
                    detail: "/home/u/.local/share/paddock is writable".into(),
                    fix: None,
                },
                Check {
                    name: "state directory".into(),
                    ok: false,
                    detail: "create a job directory /home/u/.local/state/paddock/jobs/doctor-1: Permission denied (os error 13)".into(),
                    fix: Some("point XDG_STATE_HOME (or --jobs-dir / PADDOCK_JOBS_DIR) at a directory you can write".into()),
                },
            ],
            setup: vec![
                Check {
                    name: "engine codex".into(),
                    ok: true,
                    detail: "/opt/engines/codex (codex-cli 0.171.0)".into(),
                    fix: None,
                },
                Check {
                    name: "engine claude".into(),
                    ok: false,
                    detail: "`claude` is not on PATH".into(),
                    fix: Some(paddock::engines::claude::PIN.install_hint()),
                },
            ],
        };
        insta::assert_snapshot!(render(&report));
    }
}

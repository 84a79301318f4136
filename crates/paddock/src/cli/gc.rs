//! `paddock gc`: clean up after jobs whose `paddock` process died.

use anyhow::Context as _;
use paddock::paths::Paths;
use paddock::reaper::Report;
use paddock::workspace::prune::Reason;

use super::{exit, open_store, Failure};

#[derive(clap::Args)]
pub struct GcArgs {
    /// Print the report as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

pub async fn exec(args: GcArgs, paths: &Paths) -> Result<u8, Failure> {
    let store = open_store(paths).await?;
    let config = super::run::user_config(super::config_reads::GC)?;
    let max_bytes = config.caches.max_bytes();
    let liveness = super::run::liveness(paths, &config.hosts)?;
    let mut report = paddock::reaper::reap(paths, &*store, &liveness).await;
    // What the pass left in the trash (it empties for a bounded time),
    // emptied whole: another remover at it is waited for.
    let jobs = paths.jobs.clone();
    let emptied =
        tokio::task::spawn_blocking(move || paddock::workspace::trash::empty(&jobs, true))
            .await
            .context("empty the trash")?;
    report.errors.extend(emptied);
    // The caches held to their size cap, after the age pruning.
    if let Some(max_bytes) = max_bytes {
        let jobs = paths.jobs.clone();
        let capped =
            tokio::task::spawn_blocking(move || paddock::cache_cap::enforce(&jobs, max_bytes))
                .await
                .context("hold the caches to their size cap")?;
        report.pruned.extend(capped.removed);
        report.errors.extend(capped.errors);
    }
    if args.json {
        outln!(
            "{}",
            paddock::terminal_text::json::to_string(&report).context("serialize the report")?
        );
    } else {
        let lines = render(&report);
        if lines.is_empty() {
            outln!("nothing to clean up");
        }
        for line in lines {
            outln!("{line}");
        }
    }
    let clean = report.errors.is_empty() && report.jobs.iter().all(|j| j.errors.is_empty());
    Ok(if clean { exit::DONE } else { exit::FAILED })
}

/// One line per thing the pass did, for `paddock gc` and the start of
/// `paddock run` (without a trailing newline; empty when it did nothing),
/// each safe to print on a terminal (`terminal_text::line`).
pub fn render(report: &Report) -> Vec<String> {
    let mut out = Vec::new();
    for r in &report.jobs {
        let mut did = Vec::new();
        if r.killed > 0 {
            did.push(format!("killed {} process(es) it left running", r.killed));
        }
        if !r.cgroups.is_empty() {
            did.push(format!("removed {} cgroup(s)", r.cgroups.len()));
        }
        if let Some(p) = &r.patch {
            did.push(format!(
                "saved its patch so far ({} file(s)) to {}",
                p.changed_files.len(),
                p.path.display()
            ));
        }
        if r.workspace_removed {
            did.push("removed its workspace".to_string());
        }
        if r.kept {
            did.push("left its kept workspace".to_string());
        }
        if r.marked_failed {
            did.push("marked it failed".to_string());
        }
        if r.marked_cancelled {
            did.push("marked it cancelled (a cancel had been asked of it)".to_string());
        }
        let did = if did.is_empty() {
            "removed its lease".to_string()
        } else {
            did.join(", ")
        };
        match &r.reclaimed_from {
            Some(host) => out.push(format!(
                "{}: its paddock process on host {host} stopped renewing its heartbeat; \
                 {did} (that host's workspace and processes are its own to clean up)",
                r.name
            )),
            None => out.push(format!(
                "{}: its paddock process ended mid-job; {did}",
                r.name
            )),
        }
        for e in &r.errors {
            out.push(format!("{}: cannot clean up: {e}", r.name));
        }
    }
    for cg in &report.sandbox_cgroups {
        out.push(format!(
            "removed the cgroup {} of a `paddock sandbox` run that ended",
            cg.display()
        ));
    }
    for lease in &report.stale_leases {
        out.push(format!(
            "removed {}, a lease file a killed process left half-placed",
            lease.display()
        ));
    }
    if !report.orphaned_gits.is_empty() {
        out.push(format!(
            "killed {} git process(es) a killed paddock process had started (pids {})",
            report.orphaned_gits.len(),
            report
                .orphaned_gits
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for entry in &report.pruned {
        out.push(match entry.reason {
            Reason::Age => format!(
                "removed {}, unused for {} days",
                entry.path.display(),
                paddock::workspace::prune::UNUSED_FOR.as_secs() / 86_400
            ),
            Reason::Cap => format!(
                "removed {} ({}), the least recently used while the caches were over their size cap",
                entry.path.display(),
                mib(entry.bytes.unwrap_or(0))
            ),
        });
    }
    out.extend(
        report
            .errors
            .iter()
            .map(|e| format!("cannot clean up: {e}")),
    );
    // What a removal left is named by its path in the job's tree, and
    // other errors quote what a job wrote too: each line is made safe to
    // print (its controls and newlines escaped), as a job's text is.
    out.into_iter()
        .map(|line| paddock::terminal_text::line(&line).into_owned())
        .collect()
}

/// `bytes` in MiB, one decimal.
fn mib(bytes: u64) -> String {
    let tenths = bytes.saturating_mul(10) / (1 << 20);
    format!("{}.{} MiB", tenths / 10, tenths % 10)
}

#[cfg(test)]
mod tests {
    use super::*;
    use paddock::reaper::{Reaped, SavedPatch};

    #[test]
    fn the_report_says_what_was_done_for_each_job() {
        let report = Report {
            jobs: vec![
                Reaped {
                    name: "job-1".into(),
                    killed: 2,
                    cgroups: vec!["/sys/fs/cgroup/pids/paddock/job-1".into()],
                    patch: Some(SavedPatch {
                        path: "/d/artifacts/job-1/patch.diff".into(),
                        changed_files: vec!["a".into()],
                        bytes: 10,
                    }),
                    workspace_removed: true,
                    marked_failed: true,
                    ..Reaped::default()
                },
                Reaped {
                    name: "job-2".into(),
                    kept: true,
                    errors: vec!["remove /j/job-2: EBUSY".into()],
                    ..Reaped::default()
                },
            ],
            sandbox_cgroups: vec!["/sys/fs/cgroup/memory/paddock/sbx-9-1".into()],
            stale_leases: vec!["/j/.leases/job-3.lock.newAbC123".into()],
            orphaned_gits: vec![41, 42],
            pruned: vec![
                paddock::workspace::prune::PrunedEntry::unused("/j/.mirrors/0123abcd.git".into()),
                paddock::workspace::prune::PrunedEntry {
                    path: "/j/.snapshots/c0ffee-12ab".into(),
                    reason: Reason::Cap,
                    bytes: Some(3 << 19),
                },
            ],
            errors: vec!["list running jobs: locked".into()],
        };
        assert_eq!(
            render(&report),
            vec![
                "job-1: its paddock process ended mid-job; killed 2 process(es) it left running, removed 1 cgroup(s), saved its patch so far (1 file(s)) to /d/artifacts/job-1/patch.diff, removed its workspace, marked it failed",
                "job-2: its paddock process ended mid-job; left its kept workspace",
                "job-2: cannot clean up: remove /j/job-2: EBUSY",
                "removed the cgroup /sys/fs/cgroup/memory/paddock/sbx-9-1 of a `paddock sandbox` run that ended",
                "removed /j/.leases/job-3.lock.newAbC123, a lease file a killed process left half-placed",
                "killed 2 git process(es) a killed paddock process had started (pids 41, 42)",
                "removed /j/.mirrors/0123abcd.git, unused for 14 days",
                "removed /j/.snapshots/c0ffee-12ab (1.5 MiB), the least recently used while the caches were over their size cap",
                "cannot clean up: list running jobs: locked",
            ]
        );
    }

    /// A removal's error naming a path a job chose (its names hold an
    /// escape that writes the clipboard, a newline that starts a forged
    /// line) is printed as one line with those escaped. Before, the line
    /// went to the terminal as it was: since a removal names what it left
    /// by its path in the job's tree, the job's bytes reached it.
    #[test]
    fn what_a_job_named_is_printed_escaped() {
        let report = Report {
            errors: vec![
                "remove /j/.trash/job-4: /j/.trash/job-4/work/\x1b]52;c;ZXZpbA==\x07\u{202e}\ndone: \
                 Operation not permitted"
                    .into(),
            ],
            ..Report::default()
        };
        assert_eq!(
            render(&report),
            vec![
                "cannot clean up: remove /j/.trash/job-4: /j/.trash/job-4/work/\\u{1b}]52;c;ZXZpbA==\
                 \\u{7}\\u{202e}\\u{a}done: Operation not permitted"
            ]
        );
    }
}

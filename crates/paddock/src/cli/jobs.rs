//! `paddock jobs`: list jobs, newest first, as an aligned table (local
//! times) or as JSONL, each with the host that runs or ran it (its owner
//! in the store: the machine's name and its jobs directory's id, docs/store.md,
//! "Several hosts, one database").

use std::collections::HashMap;

use anyhow::Context as _;
use comfy_table::{presets, CellAlignment, Table};
use jiff::tz::TimeZone;
use paddock::broker::prices::format_usd;
use paddock::paths::Paths;
use paddock::store::{JobQuery, Owner};
use paddock::terminal_text;
use paddock_protocol::{JobRecord, JobStatus};

use super::{exit, local_time, open_store_or_empty, Failure};

#[derive(clap::Args)]
pub struct JobsArgs {
    /// Show at most this many jobs.
    #[arg(long, short = 'n', default_value_t = 50, value_parser = limit)]
    pub limit: u32,
    /// Print one job record per line as JSON (JSONL).
    #[arg(long)]
    pub json: bool,
    /// Only jobs with this status (as `GET /v1/jobs?status=` filters).
    #[arg(long, value_parser = status)]
    pub status: Option<JobStatus>,
    /// Only jobs of this engine.
    #[arg(long, value_parser = ["codex", "claude"])]
    pub engine: Option<String>,
    /// Only jobs on this isolation rung.
    #[arg(long, value_parser = ["process", "sandbox"])]
    pub rung: Option<String>,
}

/// A `--limit` value: a number of jobs, at least 1 (0 listed nothing and
/// said nothing).
fn limit(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(0) => Err("give at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("`{s}` is not a number of jobs: {e}")),
    }
}

/// A `--status` value: one of the job statuses.
fn status(s: &str) -> Result<JobStatus, String> {
    JobStatus::parse(s).ok_or_else(|| {
        format!(
            "`{s}` is not a job status (queued, running, done, failed, held, timed_out, \
             cancelled, bounced)"
        )
    })
}

pub async fn exec(args: JobsArgs, paths: &Paths) -> Result<u8, Failure> {
    let store = open_store_or_empty(paths).await?;
    let filtered = args.status.is_some() || args.engine.is_some() || args.rung.is_some();
    let (jobs, owners): (_, HashMap<String, Owner>) = if filtered {
        let jobs = store
            .list_jobs(&JobQuery {
                status: args.status,
                engine: args.engine.clone(),
                isolation: args.rung.clone(),
                after: None,
                limit: args.limit,
                branch: None,
            })
            .await
            .context("list jobs")?;
        // The newest jobs' owners are not these: each asked for.
        let mut owners = HashMap::new();
        for job in &jobs {
            if let Some(owner) = store
                .job_owner(&job.id)
                .await
                .context("look up a job's host")?
            {
                owners.insert(job.id.clone(), owner);
            }
        }
        (jobs, owners)
    } else {
        let jobs = store.jobs(args.limit).await.context("list jobs")?;
        let owners = store
            .job_owners(args.limit)
            .await
            .context("list the jobs' hosts")?
            .into_iter()
            .collect();
        (jobs, owners)
    };
    if args.json {
        for j in &jobs {
            let line = Listed {
                job: j,
                host: owners.get(&j.id).map(|o| Host {
                    name: &o.name,
                    id: &o.host,
                }),
            };
            outln!(
                "{}",
                paddock::terminal_text::json::to_string(&line).context("serialize a job")?
            );
        }
    } else {
        outln!("{}", table(&jobs, &owners, &local_time::system()));
    }
    if jobs.is_empty() {
        errln!("{}", none_note(&args, paths));
    }
    // A `running` job whose process stopped renewing its heartbeat.
    let shown = jobs
        .iter()
        .filter(|j| j.status == JobStatus::Running)
        .map(|j| j.id.as_str())
        .collect();
    for line in super::stale_note::lines(&*store, &shown).await {
        errln!("{line}");
    }
    Ok(exit::DONE)
}

/// What `paddock jobs` says (on stderr) when it lists no job: none in the
/// store yet (a fresh install, its store not made yet), or none that the
/// filters given match; the store named, so that a `--db` naming another
/// file than meant shows. Before, an empty list was a bare header (and a
/// fresh install exit 2).
fn none_note(args: &JobsArgs, paths: &Paths) -> String {
    let filters: Vec<String> = [
        args.status.map(|s| format!("--status {}", s.as_str())),
        args.engine.as_ref().map(|e| format!("--engine {e}")),
        args.rung.as_ref().map(|r| format!("--rung {r}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    let db = terminal_text::line(&paths.db.to_string()).into_owned();
    if filters.is_empty() {
        format!("no jobs yet in {db} (`paddock run SPEC` runs one)")
    } else {
        format!("no jobs with {} in {db}", filters.join(" "))
    }
}

/// A line of `--json`: the record and its host.
#[derive(serde::Serialize)]
struct Listed<'a> {
    #[serde(flatten)]
    job: &'a JobRecord,
    /// `null` for a job that never ran (queued, held) or was recorded
    /// before jobs had owners.
    host: Option<Host<'a>>,
}

/// The host that runs or ran a job.
#[derive(serde::Serialize)]
struct Host<'a> {
    /// The machine's name.
    name: &'a str,
    /// Its jobs directory's id (`<jobs>/.host-id`).
    id: &'a str,
}

/// A job's host as the table shows it: the machine's name and the first
/// eight digits of its jobs directory's id (two jobs directories on one
/// machine are two hosts).
fn host_cell(owner: Option<&Owner>) -> String {
    owner.map_or_else(
        || "-".to_owned(),
        |o| {
            let id: String = o.host.chars().take(8).collect();
            format!("{} ({id})", terminal_text::line(&o.name))
        },
    )
}

/// The jobs as a table: times in `tz`, ids in full (any unique prefix
/// names a job), hosts from `owners` (by job id).
pub fn table(jobs: &[JobRecord], owners: &HashMap<String, Owner>, tz: &TimeZone) -> String {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING).set_header(vec![
        "JOB",
        "STATUS",
        "TICKET",
        "ATTEMPT",
        "ENGINE",
        "MODEL",
        "ISOLATION",
        "DURATION",
        "COST",
        "CREATED",
        "HOST",
    ]);
    // The spec's free text (the model; a dispatcher writes specs through
    // `paddock serve`'s API) is escaped like a job's; the rest is
    // validated or Paddock's own, escaped all the same.
    let cell = |s: &str| terminal_text::line(s).into_owned();
    for j in jobs {
        t.add_row(vec![
            cell(&j.id),
            j.status.as_str().to_owned(),
            cell(&j.ticket_id),
            j.attempt.to_string(),
            cell(&j.engine),
            cell(&j.model),
            cell(&j.isolation),
            j.duration_ms
                .map(duration)
                .unwrap_or_else(|| "-".to_owned()),
            format_usd(j.cost_micros),
            local_time::format(j.created_at, tz, "%Y-%m-%d %H:%M"),
            host_cell(owners.get(&j.id)),
        ]);
    }
    for c in t.column_iter_mut() {
        c.set_padding((0, 2));
    }
    for col in [3, 7, 8] {
        if let Some(c) = t.column_mut(col) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t.lines()
        .map(|l| l.trim_end().to_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A duration as people read it: `42.1s`, `3m05s`, `1h02m`.
fn duration(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..=59 => format!("{:.1}s", ms as f64 / 1000.0),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use paddock_protocol::event::TokenUsage;
    use paddock_protocol::JobStatus;
    use time::macros::datetime;

    fn job(id: &str, status: JobStatus, duration_ms: Option<u64>, cost: i64) -> JobRecord {
        JobRecord {
            id: id.to_owned(),
            ticket_id: "T-1".to_owned(),
            project: "acme/widgets".to_owned(),
            attempt: 1,
            engine: "codex".to_owned(),
            model: "gpt-5-codex".to_owned(),
            isolation: "sandbox".to_owned(),
            status,
            reason: None,
            branch: "paddock/T-1".to_owned(),
            base_ref: "main".to_owned(),
            patch_path: None,
            changed_files: Vec::new(),
            tokens: TokenUsage::default(),
            model_calls: 0,
            cost_micros: cost,
            engine_exit_code: None,
            created_at: datetime!(2025-06-01 12:30:45 UTC),
            finished_at: None,
            duration_ms,
            disposed_at: None,
        }
    }

    fn owner(name: &str, digit: char) -> Owner {
        Owner {
            host: digit.to_string().repeat(32),
            name: name.to_owned(),
        }
    }

    #[test]
    fn jobs_table_is_aligned_in_local_time() {
        let tz = TimeZone::get("Europe/Berlin").unwrap();
        let mut jobs = [
            job("01J0AAAA", JobStatus::Done, Some(42_100), 12_345),
            job("01J0BBBB", JobStatus::TimedOut, Some(185_000), 1_234_567),
            job("01J0CCCC", JobStatus::Running, None, 0),
        ];
        // A ticket's attempts (`--attempt-after`) are told apart.
        jobs[0].attempt = 12;
        // Another host's name is its own text: escaped.
        let owners = HashMap::from([
            ("01J0AAAA".to_owned(), owner("build-7", '3')),
            ("01J0CCCC".to_owned(), owner("evil\u{1b}[2J", 'f')),
        ]);
        insta::assert_snapshot!(table(&jobs, &owners, &tz));
    }

    #[test]
    fn a_model_name_with_terminal_control_is_shown_escaped() {
        let tz = TimeZone::get("Europe/Berlin").unwrap();
        let mut hostile = job("01J0AAAA", JobStatus::Done, Some(42_100), 12_345);
        hostile.model = "gpt\u{1b}]52;c;ZXZpbA==\u{7}\u{9b}2K\u{202e}x\u{2066}".to_owned();
        assert_eq!(
            table(&[hostile], &HashMap::new(), &tz).lines().nth(1),
            Some(
                "01J0AAAA  done    T-1           1  codex   gpt\\u{1b}]52;c;ZXZpbA==\\u{7}\\u{9b}2K\\u{202e}x\\u{2066}  sandbox       42.1s  $0.012345  2025-06-01 14:30  -"
            )
        );
    }

    #[test]
    fn durations() {
        assert_eq!(
            [999, 42_100, 185_000, 3_725_000].map(duration),
            ["1.0s", "42.1s", "3m05s", "1h02m"].map(str::to_owned)
        );
    }
}

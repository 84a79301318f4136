//! A job the store has `running` whose heartbeat its process stopped
//! renewing (`heartbeat.rs`: every `[hosts] heartbeat_secs`) for longer
//! than `[hosts] heartbeat_ttl_secs`: its `paddock` was most likely killed
//! (`kill -9`, out of memory, a reboot), and it stays `running` until a
//! reaper pass (`paddock gc`, the next `paddock run` or `paddock serve` on
//! its host) ends it. `paddock jobs` and `paddock show`, which only read,
//! say so on stderr with what to do, where before they showed such a job
//! `running` without a word. The note only reads the store: it takes no
//! lease and changes nothing.

use std::collections::HashSet;

use paddock::store::Store;
use time::OffsetDateTime;

/// The heartbeat TTL of the user's config file (`[hosts]`), else the
/// default; a config file that does not load is read as the defaults here
/// (`jobs` and `show` never needed it).
fn ttl() -> std::time::Duration {
    super::run::user_config(&[paddock::config::Section::Hosts])
        .ok()
        .and_then(|c| c.hosts.timing().ok())
        .map_or(paddock::config::DEFAULT_HEARTBEAT_TTL, |(_, ttl)| ttl)
}

/// One line for each of `shown` (job ids) that is running with a
/// heartbeat older than the TTL; nothing when the store cannot say.
pub async fn lines(store: &dyn Store, shown: &HashSet<&str>) -> Vec<String> {
    // No running job shown: no store read, no config file read.
    if shown.is_empty() {
        return Vec::new();
    }
    let Ok(running) = store.running_jobs().await else {
        return Vec::new();
    };
    let ttl = ttl();
    let now = OffsetDateTime::now_utc();
    running
        .into_iter()
        .filter(|j| shown.contains(j.id.as_str()))
        .filter_map(|j| {
            let (owner, beat) = j.owner?;
            let age = (now - beat).whole_seconds();
            (age > i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX)).then(|| {
                format!(
                    "paddock: job {} is recorded running, but its heartbeat is {age} s old (more \
                     than [hosts] heartbeat_ttl_secs, {} s): the paddock process running it on \
                     host {} most likely died; `paddock gc` there (or its next `paddock run` or \
                     `paddock serve`) cleans up after it and marks it failed",
                    j.id,
                    ttl.as_secs(),
                    paddock::terminal_text::text(&owner.name),
                )
            })
        })
        .collect()
}

//! What a server runs with: the address, the queue's concurrency, the
//! drain's grace. Each setting comes from a flag, else the config file's
//! `[serve]` table (`config::ServeFile`), else its default here.

use std::net::SocketAddr;
use std::time::Duration;

use crate::config::ServeFile;

/// The address `paddock serve` listens on by default (loopback only).
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8012);
/// How many queued jobs run at once by default.
pub const DEFAULT_MAX_CONCURRENT_JOBS: u32 = 2;
/// How long SIGTERM waits for running jobs by default.
pub const DEFAULT_DRAIN_GRACE_SECS: u64 = 30;
/// How long a job may wait passed over by every server that claimed it,
/// by default (a day).
pub const DEFAULT_MAX_PASSED_OVER_SECS: u64 = 86_400;

/// A server's settings, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    /// How many jobs run at once (the host's `max_concurrent_jobs` slots a
    /// host profile adds are waited for inside each job as well).
    pub max_concurrent_jobs: u32,
    /// How long a drain waits for running jobs before cancelling them.
    pub drain_grace: Duration,
    /// How long a job may wait queued, passed over by every server that
    /// claimed it (`server::queue`), before the server passing it over
    /// fails it with why.
    pub max_passed_over: Duration,
    /// Where final records are POSTed, and the reference to the HMAC key.
    pub webhook_url: Option<String>,
    pub webhook_secret: Option<String>,
    /// The queued jobs this server takes; empty: every job.
    pub lanes: Vec<crate::store::Lane>,
    /// A submission this server cannot run but another server of the
    /// fleet may (`NotHere`) is stored queued for it; false (the
    /// default): refused, as `paddock run` refuses it.
    pub accept_for_fleet: bool,
    /// What a submitted spec may name on this host (flags and file
    /// together).
    pub submissions: super::submissions::Submissions,
    /// The bounds on the server's connections (`connections.rs`; their
    /// defaults, not a setting).
    pub connections: super::connections::ConnectionLimits,
}

impl Default for ServeConfig {
    fn default() -> ServeConfig {
        ServeConfig::resolve(&ServeFile::default(), &ServeFile::default())
    }
}

impl ServeConfig {
    /// `flags` over `file` over the defaults.
    pub fn resolve(flags: &ServeFile, file: &ServeFile) -> ServeConfig {
        ServeConfig::resolve_with_profile(flags, file, None)
    }

    /// `flags` over `file` over the defaults; the concurrency without a
    /// flag or setting is the default host profile's `max_concurrent_jobs`
    /// (`profile_cap`) when it has one.
    pub fn resolve_with_profile(
        flags: &ServeFile,
        file: &ServeFile,
        profile_cap: Option<u32>,
    ) -> ServeConfig {
        ServeConfig {
            listen: flags.listen.or(file.listen).unwrap_or(DEFAULT_LISTEN),
            max_concurrent_jobs: flags
                .max_concurrent_jobs
                .or(file.max_concurrent_jobs)
                .or(profile_cap)
                .unwrap_or(DEFAULT_MAX_CONCURRENT_JOBS)
                .max(1),
            lanes: flags
                .lanes
                .clone()
                .or(file.lanes.clone())
                .unwrap_or_default(),
            drain_grace: Duration::from_secs(
                flags
                    .drain_grace_secs
                    .or(file.drain_grace_secs)
                    .unwrap_or(DEFAULT_DRAIN_GRACE_SECS),
            ),
            max_passed_over: Duration::from_secs(
                flags
                    .max_passed_over_secs
                    .or(file.max_passed_over_secs)
                    .unwrap_or(DEFAULT_MAX_PASSED_OVER_SECS),
            ),
            accept_for_fleet: flags
                .accept_for_fleet
                .or(file.accept_for_fleet)
                .unwrap_or(false),
            webhook_url: flags.webhook_url.clone().or(file.webhook_url.clone()),
            webhook_secret: flags.webhook_secret.clone().or(file.webhook_secret.clone()),
            submissions: super::submissions::Submissions {
                refs: both(&flags.allow_refs, &file.allow_refs),
                paths: both(&flags.allow_paths, &file.allow_paths),
                hosts: both(&flags.allow_hosts, &file.allow_hosts),
                profiles: both(&flags.allow_profiles, &file.allow_profiles),
                // The config file's, set by the server (`AppState::new`).
                default_profile: None,
                process: flags.allow_process.or(file.allow_process).unwrap_or(false),
                ci_changes: flags
                    .allow_ci_changes
                    .or(file.allow_ci_changes)
                    .unwrap_or(false),
                // The server's own, set by `AppState::new`.
                server_own: Vec::new(),
            },
            connections: Default::default(),
        }
    }
}

/// A list from the flags and one from the file, together.
fn both<T: Clone>(flags: &Option<Vec<T>>, file: &Option<Vec<T>>) -> Vec<T> {
    flags.iter().chain(file.iter()).flatten().cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_over_the_file_over_the_defaults() {
        let file = ServeFile {
            listen: Some(SocketAddr::from(([0, 0, 0, 0], 9000))),
            max_concurrent_jobs: Some(3),
            drain_grace_secs: None,
            max_passed_over_secs: Some(600),
            webhook_url: None,
            webhook_secret: None,
            log_format: None,
            lanes: None,
            allow_refs: None,
            allow_paths: None,
            allow_hosts: None,
            allow_profiles: None,
            allow_process: None,
            allow_ci_changes: None,
            accept_for_fleet: None,
        };
        let flags = ServeFile {
            listen: None,
            max_concurrent_jobs: Some(0),
            drain_grace_secs: Some(5),
            max_passed_over_secs: None,
            webhook_url: None,
            webhook_secret: None,
            log_format: None,
            lanes: None,
            allow_refs: None,
            allow_paths: None,
            allow_hosts: None,
            allow_profiles: None,
            allow_process: None,
            allow_ci_changes: None,
            accept_for_fleet: None,
        };
        assert_eq!(
            (ServeConfig::resolve(&flags, &file), ServeConfig::default()),
            (
                ServeConfig {
                    listen: SocketAddr::from(([0, 0, 0, 0], 9000)),
                    max_concurrent_jobs: 1,
                    drain_grace: Duration::from_secs(5),
                    max_passed_over: Duration::from_secs(600),
                    webhook_url: None,
                    webhook_secret: None,
                    lanes: vec![],
                    accept_for_fleet: false,
                    submissions: Default::default(),
                    connections: super::super::connections::ConnectionLimits {
                        max: 1024,
                        header_read_timeout: Duration::from_secs(30),
                        body_read_timeout: Duration::from_secs(30),
                        write_stall: Duration::from_secs(30),
                    },
                },
                ServeConfig {
                    listen: SocketAddr::from(([127, 0, 0, 1], 8012)),
                    max_concurrent_jobs: 2,
                    drain_grace: Duration::from_secs(30),
                    max_passed_over: Duration::from_secs(86_400),
                    webhook_url: None,
                    webhook_secret: None,
                    lanes: vec![],
                    accept_for_fleet: false,
                    submissions: Default::default(),
                    connections: Default::default(),
                }
            )
        );
    }

    #[test]
    fn the_default_profile_s_slots_cap_the_queue_unless_a_setting_does() {
        let set = ServeFile {
            max_concurrent_jobs: Some(3),
            ..ServeFile::default()
        };
        let none = ServeFile::default();
        let cap = |flags: &ServeFile, file: &ServeFile, profile: Option<u32>| {
            ServeConfig::resolve_with_profile(flags, file, profile).max_concurrent_jobs
        };
        assert_eq!(
            (
                cap(&none, &none, Some(5)),
                cap(&none, &set, Some(5)),
                cap(&set, &none, Some(1)),
                cap(&none, &none, None)
            ),
            (5, 3, 3, 2)
        );
    }
}

//! What every handler shares: the store, the runner, the queue, the live
//! events, the settings, the user's spec defaults, and the token that
//! closes long-lived responses when the server stops. Built once by
//! [`serve`](super::serve) from the dependencies it is given.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::config::ServeConfig;
use super::hub::Hub;
use super::queue::Queue;
use crate::config::Config;
use crate::runner::Runner;
use crate::store::SharedStore;

#[derive(Debug, Clone)]
pub struct AppState {
    pub store: SharedStore,
    pub runner: Runner,
    pub queue: Arc<Queue>,
    pub hub: Hub,
    pub config: Arc<ServeConfig>,
    /// The user's config: defaults a submitted spec leaves unset, as for
    /// `paddock run`.
    pub defaults: Arc<Config>,
    /// Cancelled when the server stops: event streams end.
    pub closing: CancellationToken,
    /// The Prometheus recorder, when this process has it.
    pub metrics: Option<super::metrics::Metrics>,
    /// The event streams each token holds open (`outbox.rs`).
    pub streams: super::outbox::Streams,
}

impl AppState {
    pub fn new(
        store: SharedStore,
        runner: Runner,
        config: ServeConfig,
        defaults: Config,
        webhooks: Option<super::webhooks::Webhooks>,
    ) -> AppState {
        let hub = Hub::default();
        let mut config = config;
        // A submitted spec may always name the profile the server gives
        // a spec that names none.
        config.submissions.default_profile = defaults
            .host_profile
            .clone()
            .or_else(|| defaults.profile.clone());
        // Never the server's own places.
        let paths = &runner.config().paths;
        let mut own = vec![paths.jobs.clone(), paths.artifacts.clone()];
        if let Some(db) = paths.db.file() {
            // The SQLite file and its journals beside it.
            for end in ["", "-wal", "-shm", "-journal"] {
                let mut name = db.as_os_str().to_owned();
                name.push(end);
                own.push(name.into());
            }
        }
        config.submissions.server_own = own
            .into_iter()
            .map(|p| std::path::absolute(&p).unwrap_or(p))
            .collect();
        // Nor the rung the server gives a spec that leaves it `auto`
        // (stored with the spec, checked again when another server or a
        // restart claims it).
        if defaults.isolation == Some(paddock_protocol::Isolation::Process) {
            config.submissions.process = true;
        }
        let queue = Arc::new(
            Queue::new(
                store.clone(),
                runner.clone(),
                hub.clone(),
                config.max_concurrent_jobs,
                config.lanes.clone(),
                config.submissions.clone(),
                webhooks,
            )
            .passing_over_at_most(config.max_passed_over)
            .accepting_for_fleet(config.accept_for_fleet),
        );
        AppState {
            store,
            runner,
            queue,
            hub,
            config: Arc::new(config),
            defaults: Arc::new(defaults),
            closing: CancellationToken::new(),
            metrics: None,
            streams: super::outbox::Streams::default(),
        }
    }
}

//! The live events of the jobs this server runs: each running job's
//! runner updates are forwarded into a broadcast of its stored events
//! that any number of followers subscribe to. The entry goes when the
//! job's updates end (the runner is done with it), which closes every
//! follower's receiver. A follower that falls behind loses events here,
//! never in the store: followers fill gaps from the store (`events.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use paddock_protocol::AgentEvent;
use tokio::sync::broadcast;

use crate::runner::JobUpdate;

/// How many events a follower may fall behind before it misses some.
const BACKLOG: usize = 1024;

/// The live events of this server's running jobs, by job id.
#[derive(Debug, Clone, Default)]
pub struct Hub {
    live: Arc<Mutex<HashMap<String, broadcast::Sender<AgentEvent>>>>,
}

impl Hub {
    fn live(&self) -> MutexGuard<'_, HashMap<String, broadcast::Sender<AgentEvent>>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forwards the events of job `id` from its runner `updates` until they
    /// end.
    pub fn attach(&self, id: &str, mut updates: broadcast::Receiver<JobUpdate>) {
        use broadcast::error::RecvError;
        let (events, _) = broadcast::channel(BACKLOG);
        self.live().insert(id.to_owned(), events.clone());
        let hub = self.clone();
        let id = id.to_owned();
        tokio::spawn(async move {
            loop {
                match updates.recv().await {
                    Ok(JobUpdate::Event(e)) => {
                        let _ = events.send(e);
                    }
                    Ok(JobUpdate::Call { .. }) | Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => break,
                }
            }
            hub.live().remove(&id);
        });
    }

    /// The live events of job `id` from now on, if this server runs it.
    pub fn subscribe(&self, id: &str) -> Option<broadcast::Receiver<AgentEvent>> {
        self.live().get(id).map(broadcast::Sender::subscribe)
    }
}

//! Wake-ups for a cancel asked through the store (`Store::request_cancel`):
//! the job's owner learns of it at once instead of at its next poll of
//! `cancel_requested` (`heartbeat::Liveness::cancel_poll`, 1 s by
//! default). A request made in this process is announced to its
//! subscribers directly; on PostgreSQL it is also sent with `NOTIFY` on
//! [`CHANNEL`] (the job id as payload), which a listener task of every
//! other process on the database that runs a job (one connection of its
//! pool, `LISTEN`ing, started by the first subscription) announces to its
//! own. On SQLite a request touches a file beside the database, which a
//! watcher of every other process on it that runs a job (inotify, started
//! by the first subscription) announces as [`ANY_JOB`]
//! (`sqlite/cancel_file.rs`). A notice is only a wake-up: the owner reads
//! the request from the store, and one missed (a lagging subscriber) is
//! found by the poll, which stays; the listener, once its lost connection
//! is back, announces [`ANY_JOB`] so a request asked meanwhile is read at
//! once.

use std::sync::Mutex;

use tokio::sync::broadcast;

/// The PostgreSQL channel cancels are announced on.
pub const CHANNEL: &str = "paddock_cancel";

/// A notice that a cancel of some job was asked (SQLite's wake-up names
/// none): every subscriber reads its own job's request.
pub(crate) const ANY_JOB: &str = "*";

/// How many notices a subscriber may fall behind before it misses some
/// (the poll finds those).
const BACKLOG: usize = 256;

/// One store's cancel notices: the in-process broadcast, and on
/// PostgreSQL the listener task feeding it.
pub(crate) struct CancelNotices {
    tx: broadcast::Sender<String>,
    /// The `LISTEN`ing task (PostgreSQL), once started; `Err`: it could
    /// not start, and is not tried again.
    listener: tokio::sync::Mutex<Option<Result<tokio::task::JoinHandle<()>, ()>>>,
    /// Set by `stop`: nothing is started any more.
    stopped: Mutex<bool>,
}

impl std::fmt::Debug for CancelNotices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelNotices")
            .field("subscribers", &self.tx.receiver_count())
            .finish_non_exhaustive()
    }
}

impl CancelNotices {
    pub(crate) fn new() -> CancelNotices {
        CancelNotices {
            tx: broadcast::channel(BACKLOG).0,
            listener: tokio::sync::Mutex::new(None),
            stopped: Mutex::new(false),
        }
    }

    /// Tells this process's subscribers that a cancel of job `id` was
    /// asked.
    pub(crate) fn announce(&self, id: &str) {
        // No subscriber: nobody here runs a job.
        let _ = self.tx.send(id.to_owned());
    }

    /// The job ids announced from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<String> {
        self.tx.subscribe()
    }

    /// The job ids announced from now on, the listener on `pool` started
    /// first (once) and `LISTEN`ing when this returns, so a cancel asked
    /// after it is seen. A listener that cannot start is logged and the
    /// subscription gets this process's announcements only.
    pub(crate) async fn subscribe_listening(
        &self,
        pool: &sqlx::PgPool,
    ) -> broadcast::Receiver<String> {
        let rx = self.tx.subscribe();
        let mut listener = self.listener.lock().await;
        let stopped = self.stopped.lock().map(|s| *s).unwrap_or(true);
        if listener.is_none() && !stopped {
            *listener = Some(match listen(pool).await {
                Ok(l) => Ok(tokio::spawn(relay(pool.clone(), l, self.tx.clone()))),
                Err(e) => {
                    tracing::warn!(
                        "store: cannot listen for cancels on {CHANNEL} (a cancel asked by \
                         another process is seen at the next poll): {e}"
                    );
                    Err(())
                }
            });
        }
        rx
    }

    /// The job ids announced from now on, the watcher of the SQLite
    /// database's cancel file `path` started first (once) and watching
    /// when this returns. A watcher that cannot start is logged and the
    /// subscription gets this process's announcements only.
    pub(crate) async fn subscribe_watching(
        &self,
        path: &std::path::Path,
    ) -> broadcast::Receiver<String> {
        let rx = self.tx.subscribe();
        let mut listener = self.listener.lock().await;
        let stopped = self.stopped.lock().map(|s| *s).unwrap_or(true);
        if listener.is_none() && !stopped {
            *listener = Some(
                crate::store::sqlite::cancel_file::watch(path, self.tx.clone()).map_err(|e| {
                    tracing::warn!(
                        "store: cannot watch {} for cancels (a cancel asked by another process \
                         is seen at the next poll): {e}",
                        path.display()
                    );
                }),
            );
        }
        rx
    }

    /// Stops the listener (its connection dropped) as the store closes,
    /// and starts none after.
    pub(crate) async fn stop(&self) {
        if let Ok(mut s) = self.stopped.lock() {
            *s = true;
        }
        if let Some(Ok(task)) = self.listener.lock().await.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for CancelNotices {
    fn drop(&mut self) {
        if let Some(Some(Ok(task))) = self.listener.try_lock().ok().map(|mut l| l.take()) {
            task.abort();
        }
    }
}

/// The listener task: relays each `NOTIFY` on [`CHANNEL`] (its job id)
/// to `tx`. When its connection is lost (a server restart, a dropped
/// network, `pg_terminate_backend`), a `NOTIFY` sent until it is back is
/// lost with it: once it is `LISTEN`ing again it announces [`ANY_JOB`],
/// so every subscriber reads its job's request again at once (one asked
/// while it was away is found then, not at the job's next poll; one asked
/// after is notified). sqlx's `try_recv` connects again itself before it
/// reports the loss (`Ok(None)`); an error leaves the listener in no known
/// state, so it is replaced by a new one, tried every [`RETRY`] until it
/// connects. (`recv` hides the loss: nothing would look.)
async fn relay(
    pool: sqlx::PgPool,
    mut listener: sqlx::postgres::PgListener,
    tx: broadcast::Sender<String>,
) {
    loop {
        match listener.try_recv().await {
            Ok(Some(n)) => {
                let _ = tx.send(n.payload().to_owned());
            }
            Ok(None) => {
                tracing::debug!("store: cancel notices: the connection was lost, listening again");
                let _ = tx.send(ANY_JOB.to_owned());
            }
            Err(e) => {
                tracing::debug!("store: cancel notices: {e}");
                tokio::time::sleep(RETRY).await;
                listener = loop {
                    match listen(&pool).await {
                        Ok(l) => break l,
                        Err(e) => {
                            tracing::debug!("store: cancel notices: cannot listen again: {e}");
                            tokio::time::sleep(RETRY).await;
                        }
                    }
                };
                let _ = tx.send(ANY_JOB.to_owned());
            }
        }
    }
}

/// How long the listener waits before it tries again to connect.
const RETRY: std::time::Duration = std::time::Duration::from_secs(1);

async fn listen(pool: &sqlx::PgPool) -> Result<sqlx::postgres::PgListener, sqlx::Error> {
    let mut listener = sqlx::postgres::PgListener::connect_with(pool).await?;
    listener.listen(CHANNEL).await?;
    Ok(listener)
}

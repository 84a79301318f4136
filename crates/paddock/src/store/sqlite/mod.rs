//! The SQLite backend of the [`Store`]: jobs, their normalized events, the
//! broker's ledger rows (model calls) and host profiles in one SQLite file
//! (WAL journal, foreign keys on), migrated at open (one query when the
//! schema is current already). Queries use `$N` placeholders and a portable column
//! subset (BIGINT, TEXT, BOOLEAN) so a PostgreSQL backend can share the
//! schema; `docs/store.md` documents the tables for operators.

pub(super) mod cancel_file;
pub(super) mod checkpoint;
pub(super) mod codec;
mod egress;
pub(super) mod events;
pub(super) mod jobs;
pub(super) mod ledger;
pub(super) mod profiles;
pub(super) mod queue;
pub(super) mod spend;
pub(super) mod tokens;
pub(super) mod usage;
mod webhooks;

use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::fcntl::{Flock, FlockArg};
use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use paddock_protocol::event::AgentEvent;
use paddock_protocol::job::{JobRecord, JobStatus};
use paddock_protocol::ledger::ModelCall;
use paddock_protocol::{EgressRecord, HostProfile};
use time::OffsetDateTime;

use super::retry;
use super::{
    CancelRequest, ClaimStanding, Follows, JobQuery, Lane, Owner, Reclaim, RunningJob, SpendScope,
    Store, StoreError,
};

use super::{UsageCalls, UsageJob};
use crate::api_token::StoredToken;

/// The schema, embedded from `crates/paddock/migrations/` at compile time.
pub(super) static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// How long a statement waits for another connection's (or process's) write
/// lock before failing with "database is locked".
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections to a file database: SQLite serializes writers anyway; readers
/// run concurrently under WAL.
const MAX_CONNECTIONS: u32 = 8;

/// The sidecar file whose `flock` serializes migrations of `db`.
fn migrate_lock_path(db: &Path) -> PathBuf {
    let mut name = db.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push("-migrate.lock");
    db.with_file_name(name)
}

/// A handle to the store. Cheap to clone (it wraps a connection pool); every
/// clone talks to the same database.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    notices: std::sync::Arc<crate::store::cancel_notices::CancelNotices>,
    /// `<database>-cancels` (`cancel_file.rs`); none in memory.
    cancel_file: Option<PathBuf>,
    /// Whether subscriptions watch the cancel file
    /// (`Store::watch_other_processes`), shared by the clones.
    watching: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl SqliteStore {
    /// Tells this process's subscribers that a cancel of job `id` was
    /// asked, then other processes on the database (the cancel file
    /// touched; one that misses it finds the request at its poll).
    pub(super) async fn announce_cancel(&self, id: &str) {
        self.notices.announce(id);
        if let Some(path) = self.cancel_file.clone() {
            let touched = tokio::task::spawn_blocking(move || {
                cancel_file::touch(&path).map_err(|e| format!("{}: {e}", path.display()))
            })
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r);
            if let Err(e) = touched {
                tracing::warn!(
                    "store: cannot tell other processes of the cancel of job {id} (they see it at \
                     their next poll): {e}"
                );
            }
        }
    }

    /// Opens the database file at `path`, creating its parent directories and
    /// the file if missing, and brings its schema up to date. Opening the same
    /// file again (even from another process) is fine: migrations already
    /// applied are skipped.
    pub async fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|source| StoreError::CreateDir {
                    path: path.to_owned(),
                    dir: dir.to_owned(),
                    source,
                })?;
        }
        SqliteStore::open_file(path, true).await
    }

    /// Opens the existing database file at `path` for a command that only
    /// reads: a missing file fails with `Missing` (naming `path`), and
    /// neither it nor its directory is created.
    pub async fn open_existing(path: &Path) -> Result<SqliteStore, StoreError> {
        match tokio::fs::symlink_metadata(path).await {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(StoreError::Missing {
                path: path.to_owned(),
            }),
            // Anything else (a directory, no permission) fails naming the
            // path when SQLite opens it.
            _ => SqliteStore::open_file(path, false).await,
        }
    }

    async fn open_file(path: &Path, create: bool) -> Result<SqliteStore, StoreError> {
        // sqlx does not lock migrations on SQLite: two processes creating
        // the same new file would both apply them (or trip over each
        // other switching it to WAL), and all but one fail. An exclusive
        // `flock` on a sidecar file serializes opening and migrating (never
        // on the database file itself: closing any descriptor of it would
        // drop SQLite's own POSIX locks of this process).
        let lock_path = migrate_lock_path(path);
        let lock = tokio::task::spawn_blocking({
            let lock_path = lock_path.clone();
            move || {
                // Beside the database, in a directory others may write
                // (a shared host directory): a link or a FIFO there is
                // refused, never followed or waited on.
                let file = crate::own_file::open_lock(&lock_path)?;
                Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| e.into())
            }
        })
        .await
        .map_err(std::io::Error::other)
        .and_then(|r: std::io::Result<Flock<std::fs::File>>| r)
        .map_err(|source| StoreError::MigrateLock {
            path: lock_path,
            source,
        })?;
        // Under the lock: a file another `paddock` is creating right now is
        // migrated (not empty) by the time this one looks.
        refuse_empty(path)?;
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(create)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT);
        let pool = SqlitePoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .connect_with(options)
            .await
            .map_err(|source| StoreError::Open {
                path: path.to_owned(),
                source,
            })?;
        let store = SqliteStore::migrated(pool, path.to_owned()).await;
        drop(lock);
        store
    }

    /// A private, empty in-memory database (for tests). The pool holds exactly
    /// one connection that never expires, so the data lives as long as the
    /// `SqliteStore` (and its clones).
    pub async fn open_in_memory() -> Result<SqliteStore, StoreError> {
        let path = PathBuf::from(":memory:");
        let options = SqliteConnectOptions::new()
            .in_memory(true)
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options)
            .await
            .map_err(|source| StoreError::Open {
                path: path.clone(),
                source,
            })?;
        SqliteStore::migrated(pool, path).await
    }

    async fn migrated(pool: SqlitePool, path: PathBuf) -> Result<SqliteStore, StoreError> {
        let cancel_file = (path != Path::new(":memory:")).then(|| cancel_file::path_for(&path));
        if !schema_current(&pool).await {
            MIGRATOR
                .run(&pool)
                .await
                .map_err(|source| StoreError::Migrate { path, source })?;
        }
        Ok(SqliteStore {
            pool,
            notices: std::sync::Arc::new(crate::store::cancel_notices::CancelNotices::new()),
            cancel_file,
            watching: Default::default(),
        })
    }
}

/// True when the database already holds exactly the embedded migrations,
/// each applied successfully with the same checksum: one query instead of
/// the migrator's table creation, dirty check and listing. Anything else
/// (a new database, a missing, failed, changed or unknown migration, an
/// error) is left to the migrator, which applies or refuses as before.
async fn schema_current(pool: &SqlitePool) -> bool {
    let applied: Vec<(i64, Vec<u8>, bool)> = match sqlx::query_as(
        "SELECT version, checksum, success FROM _sqlx_migrations ORDER BY version",
    )
    .fetch_all(pool)
    .await
    {
        Ok(rows) => rows,
        Err(_) => return false,
    };
    let mut wanted: Vec<(i64, &[u8])> = MIGRATOR
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
        .map(|m| (m.version, m.checksum.as_ref()))
        .collect();
    wanted.sort_by_key(|(v, _)| *v);
    applied.len() == wanted.len()
        && applied
            .iter()
            .zip(&wanted)
            .all(|((v, sum, ok), (want_v, want_sum))| {
                *ok && v == want_v && sum.as_slice() == *want_sum
            })
}

/// The SQLite queries live in one file per table (`jobs.rs`, `events.rs`,
/// `ledger.rs`, `spend.rs`, `profiles.rs`, `tokens.rs`, `usage.rs`); this is the seam.
#[async_trait::async_trait]
impl Store for SqliteStore {
    async fn insert_job(&self, job: &JobRecord, spec_json: &str) -> Result<(), StoreError> {
        SqliteStore::insert_job(self, job, spec_json).await
    }

    async fn finish_job(&self, job: &JobRecord, from: JobStatus) -> Result<(), StoreError> {
        retry::transient("finish_job", |attempt| async move {
            match SqliteStore::finish_job(self, job, from).await {
                // An earlier attempt's commit landed, its answer was lost.
                Err(StoreError::StatusChanged { .. })
                    if attempt > 0 && retry::finished_already(self, job).await =>
                {
                    Ok(())
                }
                done => done,
            }
        })
        .await
    }

    async fn job(&self, id: &str) -> Result<Option<JobRecord>, StoreError> {
        retry::transient("job", |_| SqliteStore::job(self, id)).await
    }

    async fn job_spec(&self, id: &str) -> Result<Option<String>, StoreError> {
        SqliteStore::job_spec(self, id).await
    }

    async fn set_closeout(&self, id: &str, text: &str) -> Result<(), StoreError> {
        retry::transient("set_closeout", |_| {
            SqliteStore::set_closeout(self, id, text)
        })
        .await
    }

    async fn closeout(&self, id: &str) -> Result<Option<String>, StoreError> {
        SqliteStore::closeout(self, id).await
    }

    async fn set_engine_session(&self, id: &str, session: &str) -> Result<(), StoreError> {
        retry::transient("set_engine_session", |_| {
            SqliteStore::set_engine_session(self, id, session)
        })
        .await
    }

    async fn engine_session(&self, id: &str) -> Result<Option<String>, StoreError> {
        SqliteStore::engine_session(self, id).await
    }

    async fn jobs(&self, limit: u32) -> Result<Vec<JobRecord>, StoreError> {
        SqliteStore::jobs(self, limit).await
    }

    async fn insert_owned_job(
        &self,
        job: &JobRecord,
        spec_json: &str,
        owner: &Owner,
        at: OffsetDateTime,
    ) -> Result<(), StoreError> {
        retry::transient("insert_owned_job", |attempt| async move {
            match SqliteStore::insert_owned_job(self, job, spec_json, owner, at).await {
                // An earlier attempt's commit landed, its answer was lost.
                Err(StoreError::JobExists { .. })
                    if attempt > 0 && retry::finished_already(self, job).await =>
                {
                    Ok(())
                }
                done => done,
            }
        })
        .await
    }

    async fn heartbeat(
        &self,
        id: &str,
        host: &str,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        retry::transient("heartbeat", |_| SqliteStore::heartbeat(self, id, host, at)).await
    }

    async fn reclaim_job(&self, reclaim: &Reclaim<'_>) -> Result<bool, StoreError> {
        retry::transient("reclaim_job", |attempt| async move {
            match SqliteStore::reclaim_job(self, reclaim).await {
                // An earlier attempt's commit landed, its answer was lost.
                Ok(false) if attempt > 0 && retry::reclaimed_already(self, reclaim.job).await => {
                    Ok(true)
                }
                done => done,
            }
        })
        .await
    }

    async fn running_jobs(&self) -> Result<Vec<RunningJob>, StoreError> {
        SqliteStore::running_jobs(self).await
    }

    async fn request_cancel(
        &self,
        id: &str,
        by: &str,
        at: OffsetDateTime,
    ) -> Result<Option<Owner>, StoreError> {
        SqliteStore::request_cancel(self, id, by, at).await
    }

    async fn cancel_requested(&self, id: &str) -> Result<Option<CancelRequest>, StoreError> {
        retry::transient("cancel_requested", |_| {
            SqliteStore::cancel_requested(self, id)
        })
        .await
    }

    async fn cancel_notices(&self) -> tokio::sync::broadcast::Receiver<String> {
        let watching = self.watching.load(std::sync::atomic::Ordering::SeqCst);
        match &self.cancel_file {
            Some(path) if watching => self.notices.subscribe_watching(path).await,
            Some(_) | None => self.notices.subscribe(),
        }
    }

    fn watch_other_processes(&self) {
        self.watching
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    async fn job_owner(&self, id: &str) -> Result<Option<Owner>, StoreError> {
        SqliteStore::job_owner(self, id).await
    }

    async fn claim_standing(&self, id: &str) -> Result<Option<ClaimStanding>, StoreError> {
        retry::transient("claim_standing", |_| SqliteStore::claim_standing(self, id)).await
    }

    async fn job_owners(&self, limit: u32) -> Result<Vec<(String, Owner)>, StoreError> {
        SqliteStore::job_owners(self, limit).await
    }

    async fn enqueue_job(
        &self,
        job: &JobRecord,
        spec_json: &str,
        priority: i64,
        follows: Option<&Follows>,
    ) -> Result<(), StoreError> {
        SqliteStore::enqueue_job(self, job, spec_json, priority, follows).await
    }

    async fn job_follows(&self, id: &str) -> Result<Option<Follows>, StoreError> {
        SqliteStore::job_follows(self, id).await
    }

    async fn claim_job(
        &self,
        lanes: &[Lane],
        owner: &Owner,
        at: OffsetDateTime,
        skip: &[String],
    ) -> Result<Option<JobRecord>, StoreError> {
        retry::transient("claim_job", |attempt| async move {
            // An earlier attempt's commit may have landed, its answer lost:
            // the job it claimed is this claim's (keyed on host and time).
            if attempt > 0 {
                if let Some(job) = SqliteStore::claimed_by(self, owner, at).await? {
                    return Ok(Some(job));
                }
            }
            SqliteStore::claim_job(self, lanes, owner, at, skip).await
        })
        .await
    }

    async fn unclaim_job(&self, id: &str, host: &str, reason: &str) -> Result<bool, StoreError> {
        retry::transient("unclaim_job", |attempt| async move {
            match SqliteStore::unclaim_job(self, id, host, reason).await {
                // An earlier attempt's commit landed, its answer was lost.
                Ok(false) if attempt > 0 && retry::unclaimed_already(self, id, reason).await => {
                    Ok(true)
                }
                done => done,
            }
        })
        .await
    }

    async fn queue_depth(&self) -> Result<u64, StoreError> {
        SqliteStore::queue_depth(self).await
    }

    async fn still_queued(&self, ids: &[String]) -> Result<Vec<String>, StoreError> {
        retry::transient("still_queued", |_| SqliteStore::still_queued(self, ids)).await
    }

    async fn pass_over(
        &self,
        id: &str,
        at: OffsetDateTime,
    ) -> Result<Option<crate::store::PassedOver>, StoreError> {
        retry::transient("pass_over", |_| SqliteStore::pass_over(self, id, at)).await
    }

    async fn mark_able(
        &self,
        id: &str,
        owner: &Owner,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        retry::transient("mark_able", |_| SqliteStore::mark_able(self, id, owner, at)).await
    }

    async fn passed_over_queued(
        &self,
        lanes: &[Lane],
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        retry::transient("passed_over_queued", |_| {
            SqliteStore::passed_over_queued(self, lanes, limit)
        })
        .await
    }

    async fn job_counts(&self) -> Result<Vec<(JobStatus, u64)>, StoreError> {
        SqliteStore::job_counts(self).await
    }

    async fn list_jobs(&self, query: &JobQuery) -> Result<Vec<JobRecord>, StoreError> {
        SqliteStore::list_jobs(self, query).await
    }

    async fn job_ids_with_prefix(
        &self,
        prefix: &str,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        SqliteStore::job_ids_with_prefix(self, prefix, limit).await
    }

    async fn append_event(&self, event: &AgentEvent) -> Result<(), StoreError> {
        retry::transient("append_event", |_| SqliteStore::append_event(self, event)).await
    }

    async fn last_event_seq(&self, job_id: &str) -> Result<u64, StoreError> {
        retry::transient("last_event_seq", |_| {
            SqliteStore::last_event_seq(self, job_id)
        })
        .await
    }

    async fn events_page(
        &self,
        job_id: &str,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<AgentEvent>, StoreError> {
        let page = retry::transient("events_page", |_| {
            SqliteStore::events_page(self, job_id, after_seq, limit)
        })
        .await?;
        #[cfg(test)]
        crate::store::event_pages::most_read::note(&page);
        Ok(page)
    }

    async fn insert_model_call(&self, call: &ModelCall) -> Result<(), StoreError> {
        retry::transient("insert_model_call", |_| {
            SqliteStore::insert_model_call(self, call)
        })
        .await
    }

    async fn settle_model_call(&self, call: &ModelCall) -> Result<bool, StoreError> {
        retry::transient("settle_model_call", |_| {
            SqliteStore::settle_model_call(self, call)
        })
        .await
    }

    async fn interrupt_model_calls(&self, job_id: &str, why: &str) -> Result<u64, StoreError> {
        retry::transient("interrupt_model_calls", |_| {
            SqliteStore::interrupt_model_calls(self, job_id, why)
        })
        .await
    }

    async fn model_calls(&self, job_id: &str) -> Result<Vec<ModelCall>, StoreError> {
        retry::transient("model_calls", |_| SqliteStore::model_calls(self, job_id)).await
    }

    async fn spent_micros(&self, scope: &SpendScope, except_job: &str) -> Result<i64, StoreError> {
        SqliteStore::spent_micros(self, scope, except_job).await
    }

    async fn record_egress(
        &self,
        job_id: &str,
        seq: u64,
        record: &EgressRecord,
    ) -> Result<(), StoreError> {
        retry::transient("record_egress", |_| {
            SqliteStore::record_egress(self, job_id, seq, record)
        })
        .await
    }

    async fn egress(&self, job_id: &str) -> Result<Vec<EgressRecord>, StoreError> {
        SqliteStore::egress(self, job_id).await
    }

    async fn put_profile(&self, profile: &HostProfile) -> Result<(), StoreError> {
        SqliteStore::put_profile(self, profile).await
    }

    async fn profile(&self, id: &str) -> Result<Option<HostProfile>, StoreError> {
        SqliteStore::profile(self, id).await
    }

    async fn remove_profile(&self, id: &str) -> Result<bool, StoreError> {
        SqliteStore::remove_profile(self, id).await
    }

    async fn profiles(&self) -> Result<Vec<HostProfile>, StoreError> {
        SqliteStore::profiles(self).await
    }

    async fn insert_api_token(&self, token: &StoredToken) -> Result<(), StoreError> {
        SqliteStore::insert_api_token(self, token).await
    }

    async fn api_token(&self, id: &str) -> Result<Option<StoredToken>, StoreError> {
        SqliteStore::api_token(self, id).await
    }

    async fn api_tokens(&self) -> Result<Vec<StoredToken>, StoreError> {
        SqliteStore::api_tokens(self).await
    }

    async fn revoke_api_token(
        &self,
        id: &str,
        at: OffsetDateTime,
    ) -> Result<Option<StoredToken>, StoreError> {
        SqliteStore::revoke_api_token(self, id, at).await
    }

    async fn record_webhook_attempt(
        &self,
        attempt: &crate::store::WebhookAttempt,
    ) -> Result<(), StoreError> {
        SqliteStore::record_webhook_attempt(self, attempt).await
    }

    async fn webhook_attempts(
        &self,
        job_id: &str,
    ) -> Result<Vec<crate::store::WebhookAttempt>, StoreError> {
        SqliteStore::webhook_attempts(self, job_id).await
    }

    async fn owe_webhook(&self, job_id: &str, at: OffsetDateTime) -> Result<(), StoreError> {
        retry::transient("owe_webhook", |_| {
            SqliteStore::owe_webhook(self, job_id, at)
        })
        .await
    }

    async fn lease_owed_webhooks(
        &self,
        lease: &crate::store::WebhookLease<'_>,
    ) -> Result<Vec<String>, StoreError> {
        SqliteStore::lease_owed_webhooks(self, lease).await
    }

    async fn renew_webhook_lease(
        &self,
        job_id: &str,
        by: &str,
        until: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        SqliteStore::renew_webhook_lease(self, job_id, by, until).await
    }

    async fn settle_owed_webhook(
        &self,
        job_id: &str,
        by: &str,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        SqliteStore::settle_owed_webhook(self, job_id, by, at).await
    }

    async fn ledger(
        &self,
        after: Option<i64>,
        limit: u32,
    ) -> Result<Vec<(i64, ModelCall)>, StoreError> {
        SqliteStore::ledger(self, after, limit).await
    }

    async fn usage(&self) -> Result<(Vec<UsageJob>, Vec<UsageCalls>), StoreError> {
        SqliteStore::usage(self).await
    }

    /// Closes every connection (checkpointing the WAL into the database
    /// file). Other clones of this `SqliteStore` fail afterwards.
    async fn close(&self) {
        self.notices.stop().await;
        self.pool.close().await;
    }

    async fn settle(&self) {
        checkpoint::settle(&self.pool).await;
    }
}

/// Refuses an existing, zero-byte database file: SQLite would take it for a
/// new database (history gone, silently). A missing file is fine (the open
/// creates it), and so is an empty one whose write-ahead log holds data.
fn refuse_empty(path: &Path) -> Result<(), StoreError> {
    let len = |p: &Path| {
        std::fs::metadata(p)
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len())
    };
    let mut wal = path.as_os_str().to_os_string();
    wal.push("-wal");
    match (len(path), len(Path::new(&wal))) {
        (Some(0), None | Some(0)) => Err(StoreError::EmptyFile {
            path: path.to_owned(),
        }),
        _ => Ok(()),
    }
}

/// Whether a failed statement hit a foreign key (the row names a job the
/// store does not have).
pub(super) fn is_foreign_key_violation(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Database(db) => {
            matches!(db.kind(), sqlx::error::ErrorKind::ForeignKeyViolation)
        }
        _ => false,
    }
}

/// Whether a failed statement hit a primary key or unique constraint.
pub(super) fn is_unique_violation(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Database(db) => matches!(db.kind(), sqlx::error::ErrorKind::UniqueViolation),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fixtures::{event, job};
    use paddock_protocol::event::{EventBody, Phase};

    #[tokio::test]
    async fn open_twice_is_idempotent_and_data_persists() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/deeper/paddock.db");
        let written = job("j1", 0);

        let store = SqliteStore::open(&path).await.unwrap();
        store.insert_job(&written, r#"{"spec":1}"#).await.unwrap();
        let ev = event(
            "j1",
            1,
            EventBody::Status {
                phase: Phase::Provisioning,
                detail: None,
            },
        );
        store.append_event(&ev).await.unwrap();
        store.close().await;
        drop(store);
        assert!(path.is_file());

        let store = SqliteStore::open(&path).await.unwrap();
        assert_eq!(store.job("j1").await.unwrap(), Some(written));
        assert_eq!(
            store.job_spec("j1").await.unwrap().as_deref(),
            Some(r#"{"spec":1}"#)
        );
        assert_eq!(store.events("j1", 0).await.unwrap(), vec![ev]);

        // A second pool on the same file, at the same time.
        let again = SqliteStore::open(&path).await.unwrap();
        assert_eq!(again.jobs(10).await.unwrap().len(), 1);
    }

    /// Several processes (here: pools) creating the same brand-new file at
    /// once: each migration runs once, every opener gets the full schema.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_opens_of_a_new_file_migrate_once() {
        for round in 0..10 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("paddock.db");
            let opens: Vec<_> = (0..4)
                .map(|_| {
                    let path = path.clone();
                    tokio::spawn(async move {
                        SqliteStore::open(&path).await.map(|_| ()).map_err(|e| {
                            let mut text = e.to_string();
                            let mut cause = std::error::Error::source(&e);
                            while let Some(c) = cause {
                                text = format!("{text}: {c}");
                                cause = c.source();
                            }
                            text
                        })
                    })
                })
                .collect();
            let mut results = Vec::new();
            for o in opens {
                results.push(o.await.unwrap());
            }
            assert_eq!(results, vec![Ok(()); 4], "round {round}");
            let store = SqliteStore::open(&path).await.unwrap();
            let applied: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations")
                .fetch_one(&store.pool)
                .await
                .unwrap();
            assert_eq!(applied as usize, MIGRATOR.iter().count(), "round {round}");
        }
    }

    /// A reopened, current database skips the migrator; one whose applied
    /// migrations differ from the embedded ones (a changed checksum, a
    /// failed one) is still handed to it, which refuses as before.
    #[tokio::test]
    async fn a_current_schema_skips_the_migrator_and_a_changed_one_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("paddock.db");
        let store = SqliteStore::open(&path).await.unwrap();
        assert!(schema_current(&store.pool).await);
        let first = MIGRATOR.iter().next().unwrap().version;
        sqlx::query("UPDATE _sqlx_migrations SET checksum = x'00' WHERE version = $1")
            .bind(first)
            .execute(&store.pool)
            .await
            .unwrap();
        assert!(!schema_current(&store.pool).await);
        store.close().await;
        drop(store);
        let err = SqliteStore::open(&path).await.unwrap_err();
        assert!(
            matches!(
                &err,
                StoreError::Migrate {
                    source: sqlx::migrate::MigrateError::VersionMismatch(v),
                    ..
                } if *v == first
            ),
            "{err:?}"
        );

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("paddock.db");
        let store = SqliteStore::open(&path).await.unwrap();
        let last = MIGRATOR.iter().last().unwrap().version;
        sqlx::query("UPDATE _sqlx_migrations SET success = FALSE WHERE version = $1")
            .bind(last)
            .execute(&store.pool)
            .await
            .unwrap();
        assert!(!schema_current(&store.pool).await);
        store.close().await;
        drop(store);
        let err = SqliteStore::open(&path).await.unwrap_err();
        assert!(
            matches!(
                &err,
                StoreError::Migrate {
                    source: sqlx::migrate::MigrateError::Dirty(v),
                    ..
                } if *v == last
            ),
            "{err:?}"
        );
    }

    /// A database with egress attempts stored before they had a seq
    /// (migration 0030) migrates: each job's rows numbered 1, 2, 3... in
    /// the order they were inserted, the next one appended after them and
    /// a taken seq refused.
    #[tokio::test]
    async fn egress_attempts_stored_before_seqs_are_numbered_per_job() {
        use crate::store::fixtures::egress_attempt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("paddock.db");
        let store = SqliteStore::open(&path).await.unwrap();
        for id in ["j1", "j2"] {
            store.insert_job(&job(id, 0), "{}").await.unwrap();
        }
        for (n, (id, host)) in [("j1", "a"), ("j2", "x"), ("j1", "b"), ("j1", "c")]
            .into_iter()
            .enumerate()
        {
            Store::record_egress(&store, id, 100 + n as u64, &egress_attempt(host))
                .await
                .unwrap();
        }
        // Back to the schema before migration 0030.
        for statement in [
            "DROP INDEX egress_attempts_seq",
            "ALTER TABLE egress_attempts DROP COLUMN seq",
            "DELETE FROM _sqlx_migrations WHERE version = 30",
        ] {
            sqlx::query(statement).execute(&store.pool).await.unwrap();
        }
        store.close().await;
        drop(store);
        let store = SqliteStore::open(&path).await.unwrap();
        let rows: Vec<(String, i64, String)> =
            sqlx::query_as("SELECT job_id, seq, host FROM egress_attempts ORDER BY id")
                .fetch_all(&store.pool)
                .await
                .unwrap();
        crate::store::fixtures::pre_seq_egress_numbered(&store, rows).await;
    }

    /// Another process holding the write lock past the busy timeout (a
    /// long `paddock gc`): a job's event and egress attempt wait it out
    /// (retried), each stored once; without the retry they would fail
    /// with SQLITE_BUSY.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_event_waits_out_a_writer_holding_the_lock_past_the_busy_timeout() {
        use sqlx::{ConnectOptions, Connection};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("paddock.db");
        let store = SqliteStore::open(&path).await.unwrap();
        store.insert_job(&job("j1", 0), "{}").await.unwrap();
        let mut other = SqliteConnectOptions::new()
            .filename(&path)
            .connect()
            .await
            .unwrap();
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut other)
            .await
            .unwrap();
        let holder = tokio::spawn(async move {
            tokio::time::sleep(BUSY_TIMEOUT + Duration::from_secs(1)).await;
            sqlx::query("COMMIT").execute(&mut other).await.unwrap();
            other.close().await.unwrap();
        });
        let ev = event(
            "j1",
            1,
            EventBody::Status {
                phase: Phase::Provisioning,
                detail: None,
            },
        );
        let attempt = paddock_protocol::EgressRecord {
            host: "registry.npmjs.org".to_owned(),
            port: 443,
            method: None,
            address: None,
            bytes_up: 1,
            bytes_down: 2,
            duration_ms: 3,
            phase: paddock_protocol::EgressPhase::Setup,
            allowed: true,
            rule: None,
            reason: None,
            credential: None,
            substituted: None,
        };
        let started = std::time::Instant::now();
        let (appended, recorded) = tokio::join!(
            Store::append_event(&store, &ev),
            Store::record_egress(&store, "j1", 1, &attempt)
        );
        appended.unwrap();
        recorded.unwrap();
        assert!(started.elapsed() > BUSY_TIMEOUT, "{:?}", started.elapsed());
        holder.await.unwrap();
        assert_eq!(store.events("j1", 0).await.unwrap(), vec![ev]);
        assert_eq!(Store::egress(&store, "j1").await.unwrap(), vec![attempt]);
    }

    #[tokio::test]
    async fn file_stores_use_wal_foreign_keys_and_a_busy_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("paddock.db"))
            .await
            .unwrap();
        let mut conn = store.pool.acquire().await.unwrap();
        let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        assert_eq!(mode, "wal");
        let fk: i64 = sqlx::query_scalar("PRAGMA foreign_keys")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        assert_eq!(fk, 1);
        let timeout: i64 = sqlx::query_scalar("PRAGMA busy_timeout")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        assert_eq!(timeout, 5000);
        let indexes: Vec<String> = sqlx::query_scalar(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs' ORDER BY name",
        )
        .fetch_all(&mut *conn)
        .await
        .unwrap();
        assert!(
            indexes.contains(&"jobs_created_at".to_owned()),
            "{indexes:?}"
        );
    }

    #[tokio::test]
    async fn open_under_a_file_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, "x").unwrap();
        let path = file.join("paddock.db");
        let err = SqliteStore::open(&path).await.unwrap_err();
        assert!(matches!(err, StoreError::CreateDir { .. }), "{err:?}");
        assert!(
            err.to_string().contains(&path.display().to_string()),
            "{err}"
        );
    }

    /// A zero-byte file where the database should be is refused, naming
    /// it (it used to be taken for a new database, its history gone); a
    /// path that does not exist yet is created as before.
    #[tokio::test]
    async fn an_empty_database_file_is_refused_and_a_missing_one_created() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("paddock.db");
        std::fs::write(&empty, b"").unwrap();
        let err = SqliteStore::open(&empty)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string());
        assert_eq!(
            err,
            Err(format!(
                "the store at {} is an empty file (0 bytes): its history is gone or it is not \
                 Paddock's database; restore it from a backup, or move it away (or delete it) \
                 to start a new store there",
                empty.display()
            ))
        );
        assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0);
        let fresh = dir.path().join("new/paddock.db");
        let store = SqliteStore::open(&fresh).await.unwrap();
        store.close().await;
        drop(store);
        assert!(std::fs::metadata(&fresh).unwrap().len() > 0);
        assert!(SqliteStore::open(&fresh).await.is_ok());
    }

    #[tokio::test]
    async fn open_a_directory_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let err = SqliteStore::open(dir.path()).await.unwrap_err();
        assert!(matches!(err, StoreError::Open { .. }), "{err:?}");
        assert!(
            err.to_string().contains(&dir.path().display().to_string()),
            "{err}"
        );
    }

    #[tokio::test]
    async fn in_memory_stores_are_separate() {
        let a = SqliteStore::open_in_memory().await.unwrap();
        let b = SqliteStore::open_in_memory().await.unwrap();
        a.insert_job(&job("j1", 0), "{}").await.unwrap();
        assert_eq!(a.clone().jobs(10).await.unwrap().len(), 1);
        assert!(b.jobs(10).await.unwrap().is_empty());
    }
}

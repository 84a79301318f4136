//! The store's write-ahead log folded back into its database file after a
//! `paddock run`, off the job's path. SQLite folds it in when the last
//! connection closes, but that close writes the logged pages into the
//! database file and syncs both files (tens of ms on a busy disk), and
//! `paddock run` exits without waiting for it: its connections are left
//! open (`cli/run.rs`), and the detached pass that empties the trash after
//! it (`cache_cap::after_job_main`) checkpoints instead, with `TRUNCATE`
//! (every frame folded in, the log emptied even while another process,
//! `paddock serve` or a second job, still has the database open). The next
//! `paddock` then opens a database whose log holds nothing to recover;
//! before, the log was left with every frame of the job and the next start
//! read them all back.
//!
//! The pass then starts the next log itself: an emptied log is restarted by
//! the next write, which writes a new log header and must sync it (and, as
//! the first sync of a log that process opened, the directory) before
//! anything else is written: two `fsync`s on the next job's path, before
//! its first event. So the pass makes that write (`PRAGMA user_version`
//! set to the value it has: nothing read from the database changes), whose
//! header sync is then the pass's, and leaves its connection open when it
//! exits: the last connection's close would fold the new log in and delete
//! it again. The next job's first write appends to that log, which with
//! `synchronous = NORMAL` syncs nothing.

use std::path::Path;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::ConnectOptions as _;

use super::BUSY_TIMEOUT;
use crate::store::StoreError;

/// Folds the write-ahead log of the database file at `path` into it and
/// empties the log (`PRAGMA wal_checkpoint(TRUNCATE)`), then starts the
/// next log (module text); a database not in WAL mode is left as it is,
/// and a missing file is not created. A checkpoint that another
/// connection's write kept from finishing (SQLite reports it busy after
/// [`BUSY_TIMEOUT`]) is not an error: that writer's process checkpoints or
/// leaves it to the next pass, and the log, not emptied, is not restarted
/// either. The connection is left open (module text): call this from a
/// process that exits after it.
pub async fn checkpoint(path: &Path) -> Result<(), StoreError> {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(false)
        .busy_timeout(BUSY_TIMEOUT);
    let mut conn = options.connect().await.map_err(|source| StoreError::Open {
        path: path.to_owned(),
        source,
    })?;
    let failed = |source| StoreError::Checkpoint {
        path: path.to_owned(),
        source,
    };
    let started = async {
        // (busy, frames in the log, frames folded in): the log is empty
        // only when nothing kept the checkpoint from finishing.
        let (busy, _, _): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)")
            .fetch_one(&mut conn)
            .await?;
        let (mode,): (String,) = sqlx::query_as("PRAGMA journal_mode")
            .fetch_one(&mut conn)
            .await?;
        if busy == 0 && mode.eq_ignore_ascii_case("wal") {
            let (version,): (i64,) = sqlx::query_as("PRAGMA user_version")
                .fetch_one(&mut conn)
                .await?;
            sqlx::query(&format!("PRAGMA user_version = {version}"))
                .execute(&mut conn)
                .await?;
        }
        Ok(())
    }
    .await
    .map_err(failed);
    // Never closed: its close, the last connection's, would fold the log
    // just started in and delete it (module text).
    std::mem::forget(conn);
    started
}

/// [`checkpoint`] for a process without a runtime (the detached pass).
pub fn checkpoint_blocking(path: &Path) -> Result<(), StoreError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| StoreError::CheckpointRuntime {
            path: path.to_owned(),
            source,
        })?;
    rt.block_on(checkpoint(path))
}

/// How long [`settle`] waits for connections to come back to the pool at
/// most (a return is one task of the runtime: well under this).
const SETTLE_MAX: std::time::Duration = std::time::Duration::from_millis(250);

/// Waits (up to [`SETTLE_MAX`]) until every connection of `pool` is idle
/// in it: a connection's return to the pool is a task sqlx spawns when
/// the query that used it ends, and a runtime shut down before that task
/// ran drops it, closing the connection. For a process that leaves its
/// store open as it exits (`cli::open_store`), that close was the last
/// connection's whenever no other process had the database open: it
/// folded the log in and deleted it on the exit path, and the next job
/// started a new log (module text). `Store::settle`.
///
/// For its first [`SETTLE_YIELDING`] it yields to the runtime's other tasks
/// between looks instead of sleeping: a return takes tens of µs (its task
/// pings the connection's worker thread), and the runtime's timer sleeps
/// a whole ms at least, which every `paddock run` paid on its exit path
/// (issue #14): its last statement has just ended when it settles.
pub(super) async fn settle(pool: &sqlx::SqlitePool) {
    let started = tokio::time::Instant::now();
    let until = started + SETTLE_MAX;
    while pool.num_idle() < pool.size() as usize && tokio::time::Instant::now() < until {
        if started.elapsed() < SETTLE_YIELDING {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }
}

/// How long [`settle`] yields before it sleeps between looks.
const SETTLE_YIELDING: std::time::Duration = std::time::Duration::from_millis(2);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store as _;

    /// The size of `db`'s write-ahead log, 0 when there is none.
    fn wal_len(db: &Path) -> u64 {
        let mut wal = db.as_os_str().to_owned();
        wal.push("-wal");
        std::fs::metadata(wal).map(|m| m.len()).unwrap_or(0)
    }

    /// A store still open (another process's, as `paddock run` leaves its
    /// own) keeps its log's frames through any close; the checkpoint
    /// empties the log all the same (down to the one frame that starts the
    /// next), and what was written is in the database file (read back by a
    /// store opened after both closed).
    #[tokio::test]
    async fn the_checkpoint_empties_the_log_while_another_store_is_open() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("paddock.db");
        let open = crate::store::SqliteStore::open(&db).await.unwrap();
        let record = crate::store::fixtures::job("job-1", 0);
        open.insert_job(&record, "{}").await.unwrap();
        let before = wal_len(&db);
        checkpoint(&db).await.unwrap();
        let after = wal_len(&db);
        open.close().await;
        let reopened = crate::store::SqliteStore::open(&db).await.unwrap();
        let read = reopened.job("job-1").await.unwrap().map(|r| r.id);
        reopened.close().await;
        assert_eq!(
            (before > 0, after, read),
            (true, 32 + 24 + 4096, Some("job-1".to_string()))
        );
    }

    /// The log's header: its checkpoint sequence number and salts, which a
    /// restarted log changes (bytes 12..24).
    fn wal_header(db: &Path) -> Vec<u8> {
        let mut wal = db.as_os_str().to_owned();
        wal.push("-wal");
        std::fs::read(wal).unwrap()[12..24].to_vec()
    }

    /// The pass leaves a log started (its header written and synced by the
    /// pass, one frame after it), and the next store's first write appends
    /// to that log: the same header, so no restart and no header sync on
    /// the next job's path. What the database holds is unchanged.
    #[tokio::test]
    async fn the_pass_starts_the_next_log_and_the_next_write_appends_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("paddock.db");
        let open = crate::store::SqliteStore::open(&db).await.unwrap();
        open.insert_job(&crate::store::fixtures::job("job-1", 0), "{}")
            .await
            .unwrap();
        open.close().await;
        checkpoint(&db).await.unwrap();
        let page = 4096;
        let started = (wal_len(&db), wal_header(&db));
        let next = crate::store::SqliteStore::open(&db).await.unwrap();
        next.insert_job(&crate::store::fixtures::job("job-2", 0), "{}")
            .await
            .unwrap();
        let ids: Vec<String> = next
            .jobs(10)
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect();
        let appended = (wal_len(&db) > started.0, wal_header(&db));
        std::mem::forget(next);
        assert_eq!(
            (started.0, appended, ids.len()),
            (32 + 24 + page, (true, started.1.clone()), 2)
        );
    }

    /// A store left open as a command exits (`cli::open_store`) keeps
    /// its log only when the connection it used last is back in the pool
    /// before the runtime goes: that return is a task of the runtime, and
    /// a current-thread runtime dropped right after the query drops it,
    /// closing the connection, here the only one, which deletes the log.
    /// [`settle`] lets it run first.
    #[test]
    fn a_settled_pool_left_open_keeps_its_log_past_the_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let mut kept = Vec::new();
        for settled in [false, true] {
            let db = dir.path().join(format!("paddock-{settled}.db"));
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let pool = rt.block_on(async {
                let options = SqliteConnectOptions::new()
                    .filename(&db)
                    .create_if_missing(true)
                    .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal);
                let pool = sqlx::sqlite::SqlitePoolOptions::new()
                    .max_connections(1)
                    .connect_with(options)
                    .await
                    .unwrap();
                sqlx::query("CREATE TABLE t (x)")
                    .execute(&pool)
                    .await
                    .unwrap();
                settle(&pool).await;
                sqlx::query("INSERT INTO t VALUES (1)")
                    .execute(&pool)
                    .await
                    .unwrap();
                if settled {
                    settle(&pool).await;
                }
                pool
            });
            drop(rt);
            // A close is the connection's worker thread's: given time.
            let mut len = wal_len(&db);
            for _ in 0..100 {
                if len == 0 {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
                len = wal_len(&db);
            }
            kept.push(len > 0);
            // Left open, as `paddock` leaves its stores.
            std::mem::forget(pool);
        }
        assert_eq!(kept, [false, true]);
    }

    /// A missing database file is an error naming it, and is not created.
    #[tokio::test]
    async fn a_missing_database_is_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("missing.db");
        let err = checkpoint(&db).await.unwrap_err();
        assert_eq!(
            (err.to_string(), db.exists()),
            (format!("cannot open the store at {}", db.display()), false)
        );
    }
}

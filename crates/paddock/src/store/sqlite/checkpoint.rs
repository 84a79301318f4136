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

use std::path::Path;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions as _, Connection as _};

use super::BUSY_TIMEOUT;
use crate::store::StoreError;

/// Folds the write-ahead log of the database file at `path` into it and
/// empties the log (`PRAGMA wal_checkpoint(TRUNCATE)`); a database not in
/// WAL mode is left as it is, and a missing file is not created. A
/// checkpoint that another connection's write kept from finishing (SQLite
/// reports it busy after [`BUSY_TIMEOUT`]) is not an error: that writer's
/// process checkpoints or leaves it to the next pass.
pub async fn checkpoint(path: &Path) -> Result<(), StoreError> {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(false)
        .busy_timeout(BUSY_TIMEOUT);
    let mut conn = options.connect().await.map_err(|source| StoreError::Open {
        path: path.to_owned(),
        source,
    })?;
    let folded = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&mut conn)
        .await
        .map(drop)
        .map_err(|source| StoreError::Checkpoint {
            path: path.to_owned(),
            source,
        });
    let closed = conn.close().await.map_err(|source| StoreError::Checkpoint {
        path: path.to_owned(),
        source,
    });
    folded.and(closed)
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
    /// empties the log all the same, and what was written is in the
    /// database file (read back by a store opened after both closed).
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
            (true, 0, Some("job-1".to_string()))
        );
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

//! The store's error type: one variant per failing step, each naming what it
//! was working on (the database path, the job, the event's seq, the column),
//! with the underlying `sqlx`/I/O error as its `source`.

use std::path::PathBuf;

/// Everything that can go wrong in the store. The `Display` of each variant
/// names the step and its subject; the cause is in `source()` (print the chain,
/// e.g. `{:#}` with anyhow, to see it).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The directory that should hold the database file could not be created.
    #[error("cannot create the directory {dir} for the store at {path}")]
    CreateDir {
        path: PathBuf,
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The database could not be opened (or created, or configured).
    #[error("cannot open the store at {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: sqlx::Error,
    },
    /// The write-ahead log could not be folded into the database file
    /// (`store/sqlite/checkpoint.rs`).
    #[error("cannot checkpoint the store at {path}")]
    Checkpoint {
        path: PathBuf,
        #[source]
        source: sqlx::Error,
    },
    /// The runtime the checkpoint of the detached pass runs on could not
    /// be started.
    #[error("cannot start a runtime to checkpoint the store at {path}")]
    CheckpointRuntime {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The database file exists but is empty: not a store Paddock made, or
    /// one whose contents were lost; opening it would silently start a new,
    /// empty history.
    #[error(
        "the store at {path} is an empty file (0 bytes): its history is gone or it is not \
         Paddock's database; restore it from a backup, or move it away (or delete it) to \
         start a new store there"
    )]
    EmptyFile { path: PathBuf },
    /// The lock that serializes migrations across processes could not be
    /// taken.
    #[error("cannot lock {path} to migrate the store")]
    MigrateLock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The schema migrations failed (or the database was migrated by a newer
    /// or different Paddock).
    #[error("cannot migrate the store at {path}")]
    Migrate {
        path: PathBuf,
        #[source]
        source: sqlx::migrate::MigrateError,
    },
    /// `--db` (or `PADDOCK_DB`) looks like a PostgreSQL URL but is not
    /// one; the URL itself is not repeated (it may hold a password).
    #[error("the store URL is not a valid PostgreSQL URL: {message}")]
    PgUrl { message: String },
    /// The PostgreSQL server could not be reached, or refused the login.
    #[error("cannot connect to the store at {target}")]
    PgConnect {
        target: String,
        #[source]
        source: sqlx::Error,
    },
    /// The PostgreSQL schema migrations failed (or the database was
    /// migrated by a newer or different Paddock).
    #[error("cannot migrate the store at {target}")]
    PgMigrate {
        target: String,
        #[source]
        source: sqlx::migrate::MigrateError,
    },
    /// A read-only command found no Paddock schema, or an older or newer
    /// one, in the PostgreSQL database (it never migrates).
    #[error(
        "the store at {target} {problem}; a command that writes (paddock run, paddock gc) \
         creates or upgrades it"
    )]
    PgSchema { target: String, problem: String },
    /// A read-only command's check of the PostgreSQL schema could not
    /// read it (retried while the failure passes: `retry.rs`).
    #[error("cannot read the schema of the store at {target}")]
    PgSchemaRead {
        target: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot insert job {job_id}")]
    InsertJob {
        job_id: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("job {job_id} already exists in the store")]
    JobExists { job_id: String },
    #[error("cannot update job {job_id}")]
    UpdateJob {
        job_id: String,
        #[source]
        source: sqlx::Error,
    },
    /// A job was to be finished from a status it no longer has: another
    /// finisher (the runner, the reaper) came first.
    #[error("job {job_id} is {found} in the store, not {expected}: another process finished it")]
    StatusChanged {
        job_id: String,
        expected: &'static str,
        found: String,
    },
    /// A read-only command named a store that does not exist (it is never
    /// created for reading).
    #[error("no store at {path}: nothing has run with this database (check --db)")]
    Missing { path: PathBuf },
    /// An update, an event or a model call named a job the store does not have.
    #[error("no job {job_id} in the store")]
    NoSuchJob { job_id: String },
    #[error("cannot read job {job_id}")]
    ReadJob {
        job_id: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot list jobs")]
    ListJobs {
        #[source]
        source: sqlx::Error,
    },
    /// The queue's next job could not be claimed.
    #[error("cannot claim the next queued job")]
    ClaimJob {
        #[source]
        source: sqlx::Error,
    },
    /// The ids a claim passes over could not be written as its JSON
    /// parameter.
    #[error("cannot write the ids the claim passes over")]
    SkipList {
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot append event {seq} of job {job_id}")]
    AppendEvent {
        job_id: String,
        seq: u64,
        #[source]
        source: sqlx::Error,
    },
    /// An event's seq is not the job's last seq + 1 (events are dense per job,
    /// starting at 1).
    #[error(
        "event seq {seq} of job {job_id} is not dense: the last stored seq is {last}, so the next must be {}",
        .last.saturating_add(1)
    )]
    EventSeq { job_id: String, seq: u64, last: u64 },
    /// An event's seq is taken by a different event (another writer's,
    /// a reaper's): an identical one counts as stored (a retried append
    /// whose first commit landed), this one does not.
    #[error(
        "event seq {seq} of job {job_id} is already stored as a different event \
         (stored: {stored}; given: {given}); the last stored seq is {last}"
    )]
    EventConflict {
        job_id: String,
        seq: u64,
        last: u64,
        stored: Box<str>,
        given: Box<str>,
    },
    /// A model call's `(job_id, seq)` is taken by a different row: an
    /// identical one counts as written (a retried write whose first commit
    /// landed), this one does not.
    #[error(
        "model call {seq} of job {job_id} is already on the ledger as a different row \
         (stored: {stored}; given: {given})"
    )]
    ModelCallConflict {
        job_id: String,
        seq: u64,
        stored: Box<str>,
        given: Box<str>,
    },
    #[error("cannot read the events of job {job_id}")]
    ReadEvents {
        job_id: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot insert model call {seq} of job {job_id}")]
    InsertModelCall {
        job_id: String,
        seq: u64,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot settle the in-flight model calls of job {job_id} as interrupted")]
    InterruptModelCalls {
        job_id: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot read the ledger after position {after:?}")]
    ReadLedger {
        after: Option<i64>,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot read the model calls of job {job_id}")]
    ReadModelCalls {
        job_id: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot record egress attempt {seq} of job {job_id}")]
    RecordEgress {
        job_id: String,
        seq: u64,
        #[source]
        source: sqlx::Error,
    },
    /// An egress attempt's `(job_id, seq)` is taken by a different one:
    /// an identical one counts as written (a retried write whose first
    /// commit landed), this one does not.
    #[error(
        "egress attempt {seq} of job {job_id} is already stored as a different attempt; \
         the last stored seq is {last}"
    )]
    EgressConflict { job_id: String, seq: u64, last: u64 },
    #[error("cannot read the egress attempts of job {job_id}")]
    ReadEgress {
        job_id: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot sum the spend of {scope}")]
    ReadSpend {
        scope: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot save host profile {id}")]
    SaveProfile {
        id: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot remove host profile {id}")]
    RemoveProfile {
        id: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot read host profile {id}")]
    ReadProfile {
        id: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot record a webhook delivery attempt of job {job_id}")]
    RecordWebhook {
        job_id: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot read the webhook delivery attempts of job {job_id}")]
    ReadWebhooks {
        job_id: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot record the final record of job {job_id} as owed to the webhooks")]
    OweWebhook {
        job_id: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot lease the final records owed to the webhooks (by {by})")]
    LeaseWebhooks {
        by: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot renew or settle the webhook lease of job {job_id} (by {by})")]
    SettleWebhook {
        job_id: String,
        by: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("API token {id} already exists in the store")]
    TokenExists { id: String },
    #[error("cannot insert API token {id}")]
    InsertToken {
        id: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot read API token {id}")]
    ReadTokens {
        id: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot revoke API token {id}")]
    RevokeToken {
        id: String,
        #[source]
        source: sqlx::Error,
    },
    /// A value cannot be written as its column (an integer too large for
    /// BIGINT, a timestamp outside RFC 3339's years...).
    #[error("cannot store {table}.{column} of {row}: {message}")]
    Encode {
        table: &'static str,
        column: &'static str,
        row: String,
        message: String,
    },
    /// A stored value cannot be read back as its wire type (a corrupt or
    /// hand-edited row, or one written by a newer Paddock).
    #[error("cannot decode {table}.{column} of {row}: {message}")]
    Decode {
        table: &'static str,
        column: &'static str,
        row: String,
        message: String,
    },
}

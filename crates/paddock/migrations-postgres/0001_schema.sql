-- The PostgreSQL store: the same tables, columns and indexes as the SQLite
-- store's migrations 0001-0022 (crates/paddock/migrations/), in
-- PostgreSQL's dialect. Integers are BIGINT, text and JSON are TEXT,
-- timestamps are RFC 3339 TEXT in UTC with nine fractional digits (so they
-- sort as text), flags are BOOLEAN. Every text column is COLLATE "C", so it
-- compares and sorts by bytes as SQLite does, whatever the database's
-- locale. SQLite's rowid and AUTOINCREMENT keys are identity columns here.
-- Never edit this file once released: add a migration instead (sqlx checks
-- the checksum of every applied migration), and the same change to the
-- SQLite migrations.

CREATE TABLE jobs (
    id                  TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    ticket_id           TEXT COLLATE "C" NOT NULL,
    project             TEXT COLLATE "C" NOT NULL,
    attempt             BIGINT  NOT NULL,
    engine              TEXT COLLATE "C" NOT NULL,
    model               TEXT COLLATE "C" NOT NULL,
    isolation           TEXT COLLATE "C" NOT NULL,
    status              TEXT COLLATE "C" NOT NULL,
    reason              TEXT COLLATE "C",
    branch              TEXT COLLATE "C" NOT NULL,
    base_ref            TEXT COLLATE "C" NOT NULL,
    patch_path          TEXT COLLATE "C",
    changed_files       TEXT COLLATE "C" NOT NULL,
    input_tokens        BIGINT  NOT NULL,
    cached_input_tokens BIGINT  NOT NULL,
    cache_write_tokens  BIGINT  NOT NULL,
    output_tokens       BIGINT  NOT NULL,
    reasoning_tokens    BIGINT  NOT NULL,
    model_calls         BIGINT  NOT NULL,
    cost_micros         BIGINT  NOT NULL,
    engine_exit_code    BIGINT,
    created_at          TEXT COLLATE "C" NOT NULL,
    finished_at         TEXT COLLATE "C",
    duration_ms         BIGINT,
    spec_json           TEXT COLLATE "C" NOT NULL,
    closeout            TEXT COLLATE "C",
    priority            BIGINT  NOT NULL DEFAULT 0,
    engine_session      TEXT COLLATE "C"
);

CREATE INDEX jobs_created_at ON jobs (created_at);
CREATE INDEX jobs_project_ticket ON jobs (project, ticket_id);
CREATE INDEX jobs_queue ON jobs (status, priority DESC, created_at, id);
CREATE INDEX jobs_ticket_status ON jobs (project, ticket_id, status);

-- The primary key (job_id, seq) is the index events are read by.
CREATE TABLE events (
    job_id  TEXT COLLATE "C" NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    seq     BIGINT  NOT NULL,
    at      TEXT COLLATE "C" NOT NULL,
    kind    TEXT COLLATE "C" NOT NULL,
    body    TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (job_id, seq)
);

-- `position` is the ledger's paging position (SQLite's rowid).
CREATE TABLE model_calls (
    position            BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    job_id              TEXT COLLATE "C" NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt             BIGINT  NOT NULL,
    seq                 BIGINT  NOT NULL,
    provider            TEXT COLLATE "C" NOT NULL,
    requested_model     TEXT COLLATE "C" NOT NULL,
    served_model        TEXT COLLATE "C",
    input_tokens        BIGINT  NOT NULL,
    cached_input_tokens BIGINT  NOT NULL,
    cache_write_tokens  BIGINT  NOT NULL,
    output_tokens       BIGINT  NOT NULL,
    reasoning_tokens    BIGINT  NOT NULL,
    ttft_ms             BIGINT,
    duration_ms         BIGINT  NOT NULL,
    status              TEXT COLLATE "C" NOT NULL,
    http_status         BIGINT,
    error               TEXT COLLATE "C",
    estimated           BOOLEAN NOT NULL,
    price_version       TEXT COLLATE "C" NOT NULL,
    cost_micros         BIGINT  NOT NULL,
    started_at          TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (job_id, seq)
);

CREATE INDEX model_calls_started_at ON model_calls (started_at);

CREATE TABLE host_profiles (
    id          TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    body        TEXT COLLATE "C" NOT NULL,
    updated_at  TEXT COLLATE "C" NOT NULL
);

CREATE TABLE egress_attempts (
    id       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id   TEXT COLLATE "C" NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    host     TEXT COLLATE "C" NOT NULL,
    port     BIGINT  NOT NULL,
    phase    TEXT COLLATE "C" NOT NULL,
    allowed  BOOLEAN NOT NULL,
    rule     TEXT COLLATE "C",
    body     TEXT COLLATE "C" NOT NULL
);
CREATE INDEX egress_attempts_job ON egress_attempts (job_id, id);

CREATE TABLE api_tokens (
    id          TEXT COLLATE "C" PRIMARY KEY,
    name        TEXT COLLATE "C",
    scope       TEXT COLLATE "C" NOT NULL,
    salt        TEXT COLLATE "C" NOT NULL,
    hash        TEXT COLLATE "C" NOT NULL,
    created_at  TEXT COLLATE "C" NOT NULL,
    revoked_at  TEXT COLLATE "C"
);

CREATE TABLE webhook_deliveries (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id       TEXT COLLATE "C" NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    url          TEXT COLLATE "C" NOT NULL,
    attempt      BIGINT  NOT NULL,
    at           TEXT COLLATE "C" NOT NULL,
    delivered    BOOLEAN NOT NULL,
    http_status  BIGINT,
    error        TEXT COLLATE "C"
);
CREATE INDEX webhook_deliveries_job ON webhook_deliveries (job_id, id);

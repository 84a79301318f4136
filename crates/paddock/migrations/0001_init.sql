-- Store v1: jobs, their normalized events, and the broker's ledger rows.
--
-- Portable subset shared with the later PostgreSQL backend: integers are
-- BIGINT, text and JSON are TEXT, timestamps are RFC 3339 TEXT in UTC with
-- nine fractional digits (so they sort as text), flags are BOOLEAN.
-- Never edit this file once released: add 0002_*.sql instead (sqlx checks
-- the checksum of every applied migration).

CREATE TABLE jobs (
    id                  TEXT    NOT NULL PRIMARY KEY,
    ticket_id           TEXT    NOT NULL,
    project             TEXT    NOT NULL,
    attempt             BIGINT  NOT NULL,
    engine              TEXT    NOT NULL,
    model               TEXT    NOT NULL,
    isolation           TEXT    NOT NULL,
    status              TEXT    NOT NULL,
    reason              TEXT,
    branch              TEXT    NOT NULL,
    base_ref            TEXT    NOT NULL,
    patch_path          TEXT,
    changed_files       TEXT    NOT NULL,
    input_tokens        BIGINT  NOT NULL,
    cached_input_tokens BIGINT  NOT NULL,
    cache_write_tokens  BIGINT  NOT NULL,
    output_tokens       BIGINT  NOT NULL,
    reasoning_tokens    BIGINT  NOT NULL,
    model_calls         BIGINT  NOT NULL,
    cost_micros         BIGINT  NOT NULL,
    engine_exit_code    BIGINT,
    created_at          TEXT    NOT NULL,
    finished_at         TEXT,
    duration_ms         BIGINT,
    spec_json           TEXT    NOT NULL
);

CREATE INDEX jobs_created_at ON jobs (created_at);

-- The primary key (job_id, seq) is the index events are read by.
CREATE TABLE events (
    job_id  TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    seq     BIGINT  NOT NULL,
    at      TEXT    NOT NULL,
    kind    TEXT    NOT NULL,
    body    TEXT    NOT NULL,
    PRIMARY KEY (job_id, seq)
);

CREATE TABLE model_calls (
    job_id              TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt             BIGINT  NOT NULL,
    seq                 BIGINT  NOT NULL,
    provider            TEXT    NOT NULL,
    requested_model     TEXT    NOT NULL,
    served_model        TEXT,
    input_tokens        BIGINT  NOT NULL,
    cached_input_tokens BIGINT  NOT NULL,
    cache_write_tokens  BIGINT  NOT NULL,
    output_tokens       BIGINT  NOT NULL,
    reasoning_tokens    BIGINT  NOT NULL,
    ttft_ms             BIGINT,
    duration_ms         BIGINT  NOT NULL,
    status              TEXT    NOT NULL,
    http_status         BIGINT,
    error               TEXT,
    estimated           BOOLEAN NOT NULL,
    price_version       TEXT    NOT NULL,
    cost_micros         BIGINT  NOT NULL,
    started_at          TEXT    NOT NULL,
    PRIMARY KEY (job_id, seq)
);

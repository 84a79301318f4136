-- Completion webhooks owed: the same table as the SQLite store's migration
-- 0026_webhooks_owed.sql (docs/serve.md, "Webhooks").
-- Never edit this file once released: add a migration instead.
CREATE TABLE webhooks_owed (
    job_id       TEXT COLLATE "C" NOT NULL PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    since        TEXT COLLATE "C" NOT NULL,
    lease_by     TEXT COLLATE "C",
    lease_until  TEXT COLLATE "C",
    settled_at   TEXT COLLATE "C"
);
CREATE INDEX webhooks_owed_since ON webhooks_owed (since, job_id);

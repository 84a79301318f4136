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
-- The passes read the rows not settled, oldest first; settled rows stay
-- (one per job), so they are kept out of the passes' way by the index.
CREATE INDEX webhooks_owed_pending ON webhooks_owed (settled_at, since, job_id);

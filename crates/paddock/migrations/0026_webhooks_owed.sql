-- Completion webhooks owed (docs/serve.md, "Webhooks"): a row per job whose
-- final record a server with webhooks must still send, written when such a
-- server queues, claims, runs or reclaims the job. While a server delivers it,
-- the row is leased to that server (`lease_by`, until `lease_until`, RFC
-- 3339 UTC, renewed before each attempt); a lease that ran out is a server
-- that died delivering, and any server with webhooks takes the row over,
-- its attempts continuing from the last one recorded. A row is settled
-- (`settled_at`), never removed, once every URL has had the record or
-- every attempt: owing it again changes nothing, so it is sent once.
CREATE TABLE webhooks_owed (
    job_id       TEXT NOT NULL PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    since        TEXT NOT NULL,
    lease_by     TEXT,
    lease_until  TEXT,
    settled_at   TEXT
);
-- The passes read the rows not settled, oldest first; settled rows stay
-- (one per job), so they are kept out of the passes' way by the index.
CREATE INDEX webhooks_owed_pending ON webhooks_owed (settled_at, since, job_id);

-- Completion webhooks of `paddock serve` (issue #11): one row per delivery
-- attempt of a job's final record to a URL, in the order they were made:
-- delivered (a 2xx answer) or failed (another status, a timeout, a refused
-- connection), with the HTTP status and the error.
CREATE TABLE webhook_deliveries (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id       TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    url          TEXT    NOT NULL,
    attempt      INTEGER NOT NULL,
    at           TEXT    NOT NULL,
    delivered    INTEGER NOT NULL,
    http_status  INTEGER,
    error        TEXT
);
CREATE INDEX webhook_deliveries_job ON webhook_deliveries (job_id, id);

-- When a server first passed a queued job over, and the last mark of a
-- server able to run it but busy: the same columns as the SQLite store's
-- migration 0031_job_passed_over.sql (docs/store.md).
-- Never edit this file once released: add a migration instead.
ALTER TABLE jobs ADD COLUMN passed_over_at TEXT;
ALTER TABLE jobs ADD COLUMN able_at TEXT;
ALTER TABLE jobs ADD COLUMN able_host TEXT;
ALTER TABLE jobs ADD COLUMN able_name TEXT;

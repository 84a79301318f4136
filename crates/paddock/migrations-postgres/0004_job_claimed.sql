-- When a server's queue claimed a job: the same column as the SQLite
-- store's migration 0025_job_claimed.sql (docs/store.md, "Several hosts,
-- one database").
-- Never edit this file once released: add a migration instead.
ALTER TABLE jobs ADD COLUMN claimed_at TEXT COLLATE "C";

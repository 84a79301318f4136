-- When a job was disposed of: the same column as the SQLite store's
-- migration 0028_job_disposed.sql (docs/store.md).
-- Never edit this file once released: add a migration instead.
ALTER TABLE jobs ADD COLUMN disposed_at TEXT COLLATE "C";

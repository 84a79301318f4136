-- Why the prior job a queued next attempt follows had its pull request
-- closed without a merge: the same column as the SQLite store's migration
-- 0029_job_follows_closed.sql (docs/store.md).
-- Never edit this file once released: add a migration instead.
ALTER TABLE jobs ADD COLUMN follows_closed TEXT;

-- The prior job a queued job is the next attempt after: the same columns
-- as the SQLite store's migration 0027_job_follows.sql (docs/store.md).
-- Never edit this file once released: add a migration instead.
ALTER TABLE jobs ADD COLUMN follows_job TEXT COLLATE "C";
ALTER TABLE jobs ADD COLUMN follows_ended TEXT;

-- Which jobs directory runs a job, and when it last said it was alive:
-- the same columns as the SQLite store's migration 0023_job_owner.sql
-- (docs/store.md, "Several hosts, one database"). Jobs recorded before
-- this migration have none: the reaper treats them as it did before.
-- Never edit this file once released: add a migration instead.
ALTER TABLE jobs ADD COLUMN owner_host   TEXT COLLATE "C";
ALTER TABLE jobs ADD COLUMN owner_name   TEXT COLLATE "C";
ALTER TABLE jobs ADD COLUMN heartbeat_at TEXT COLLATE "C";

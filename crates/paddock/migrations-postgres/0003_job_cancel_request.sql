-- A cancel asked of a running job by a process that does not run it: the
-- same columns as the SQLite store's migration 0024_job_cancel_request.sql
-- (docs/store.md, "Several hosts, one database").
-- Never edit this file once released: add a migration instead.
ALTER TABLE jobs ADD COLUMN cancel_requested_at TEXT COLLATE "C";
ALTER TABLE jobs ADD COLUMN cancel_requested_by TEXT COLLATE "C";

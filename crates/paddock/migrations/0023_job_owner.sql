-- Which jobs directory runs a job, and when it last said it was alive
-- (docs/store.md, "Several hosts, one database"): `owner_host` is the
-- random id of the jobs directory whose `paddock` process runs the job
-- (`<jobs>/.host-id`), `owner_name` that host's name (for messages only),
-- `heartbeat_at` the RFC 3339 time of its last renewal. Set when a job
-- starts running (inserted, or claimed from the queue), renewed while it
-- runs, kept afterwards. Jobs recorded before this migration have none:
-- the reaper treats them as it did before (owned by whoever reaps).
ALTER TABLE jobs ADD COLUMN owner_host TEXT;
ALTER TABLE jobs ADD COLUMN owner_name TEXT;
ALTER TABLE jobs ADD COLUMN heartbeat_at TEXT;

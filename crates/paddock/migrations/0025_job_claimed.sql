-- When a server's queue claimed a job (docs/store.md, "Several hosts, one
-- database"): the RFC 3339 time of the claim, `NULL` for a job its own
-- process recorded (`paddock run`, a turn). A reaper that reclaims a job
-- claimed from the queue queues a new attempt of it (`[hosts]
-- requeue_reclaimed`), with the queue priority it had.
ALTER TABLE jobs ADD COLUMN claimed_at TEXT;

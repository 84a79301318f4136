-- A queued job the fleet's servers pass over (docs/serve.md, "A job no
-- server runs"): when a server first passed it over (`passed_over_at`,
-- RFC 3339 UTC, set once), and the last time a server that can run it
-- but had no free slot said so (`able_at`, with that server's jobs
-- directory id `able_host` and host name `able_name`). A job is failed
-- for waiting passed over past `[serve] max_passed_over_secs`, counted
-- from `passed_over_at` on every server and across restarts, only while
-- no such mark is fresh. NULL: never passed over, never marked.
ALTER TABLE jobs ADD COLUMN passed_over_at TEXT;
ALTER TABLE jobs ADD COLUMN able_at TEXT;
ALTER TABLE jobs ADD COLUMN able_host TEXT;
ALTER TABLE jobs ADD COLUMN able_name TEXT;

-- A cancel asked of a running job by a process that does not run it
-- (`POST /v1/jobs/{id}/cancel` or `DELETE /v1/jobs/{id}` on another
-- server sharing the store; docs/store.md, "Several hosts, one
-- database"): `cancel_requested_at` is the RFC 3339 time of the first
-- request, `cancel_requested_by` the name of the host that asked. The
-- process running the job reads them while it renews its heartbeat and
-- stops the job as a local cancel does. Set only on a `running` job with
-- an owner; kept afterwards.
ALTER TABLE jobs ADD COLUMN cancel_requested_at TEXT;
ALTER TABLE jobs ADD COLUMN cancel_requested_by TEXT;

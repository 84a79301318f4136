-- The server's persistent queue (issue #11): a job submitted to
-- `paddock serve` is stored `queued` with a priority (higher runs first,
-- then the oldest) and claimed by a compare-and-set to `running`. The
-- index serves the claim (queued jobs by priority and age) and the list's
-- filters. Jobs recorded before this migration have priority 0.
ALTER TABLE jobs ADD COLUMN priority BIGINT NOT NULL DEFAULT 0;
CREATE INDEX jobs_queue ON jobs (status, priority DESC, created_at, id);
CREATE INDEX jobs_ticket_status ON jobs (project, ticket_id, status);

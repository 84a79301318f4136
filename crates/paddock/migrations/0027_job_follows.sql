-- The prior job a queued job is the next attempt after (`POST
-- /v1/jobs?attempt_after=JOB`, docs/api.md): its id, and, when its pull
-- request was merged on the forge, why its branch is not built on. A
-- server that claims the job reads them to resume or fork that job's
-- engine session on its branch (docs/results.md), whichever server admitted
-- it. NULL for a job that follows none.
ALTER TABLE jobs ADD COLUMN follows_job TEXT;
ALTER TABLE jobs ADD COLUMN follows_ended TEXT;

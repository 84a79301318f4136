-- The engine's own session id of a job (Codex `thread.started` thread_id,
-- Claude Code `system/init` session_id): what `paddock run --attempt-after`
-- resumes. NULL when the engine announced none.
ALTER TABLE jobs ADD COLUMN engine_session TEXT;

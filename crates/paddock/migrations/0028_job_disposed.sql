-- When a job was disposed of (`DELETE /v1/jobs/{id}`, docs/api.md): its
-- artifacts, the patch among them, removed, its `patch_path` cleared; its
-- record, events and ledger rows kept. NULL for a job that was not.
ALTER TABLE jobs ADD COLUMN disposed_at TEXT;

-- Budgets sum the ledger per ticket (across attempts) and per project per
-- UTC day before each job starts; these indexes keep both sums cheap.
CREATE INDEX jobs_project_ticket ON jobs (project, ticket_id);
CREATE INDEX model_calls_started_at ON model_calls (started_at);

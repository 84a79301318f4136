-- Each egress attempt's number in its job (1, 2, 3... in the order they
-- ended), unique per job: a retried write whose first commit landed but
-- whose answer was lost finds its own row at that number and counts as
-- written, never stored twice (docs/store.md). Rows stored before are
-- numbered in the order they were inserted.
ALTER TABLE egress_attempts ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
UPDATE egress_attempts SET seq = (
    SELECT COUNT(*) FROM egress_attempts AS before
    WHERE before.job_id = egress_attempts.job_id AND before.id <= egress_attempts.id
);
CREATE UNIQUE INDEX egress_attempts_seq ON egress_attempts (job_id, seq);

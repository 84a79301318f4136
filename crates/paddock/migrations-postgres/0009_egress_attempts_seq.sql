-- Each egress attempt's number in its job, unique per job: the same
-- column as the SQLite store's migration 0030_egress_attempts_seq.sql
-- (docs/store.md). Rows stored before are numbered in insertion order.
-- Never edit this file once released: add a migration instead.
ALTER TABLE egress_attempts ADD COLUMN seq BIGINT;
UPDATE egress_attempts SET seq = numbered.seq
FROM (
    SELECT id, ROW_NUMBER() OVER (PARTITION BY job_id ORDER BY id) AS seq
    FROM egress_attempts
) AS numbered
WHERE egress_attempts.id = numbered.id;
ALTER TABLE egress_attempts ALTER COLUMN seq SET NOT NULL;
CREATE UNIQUE INDEX egress_attempts_seq ON egress_attempts (job_id, seq);

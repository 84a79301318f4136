-- The egress proxy's record (issue #15): one row per connection a job
-- tried through its proxy, allowed or refused, in the order they ended.
-- The record is kept whole as JSON; host, port, phase, allowed and rule
-- are columns too, for the closeout's list of denied destinations.
CREATE TABLE egress_attempts (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id   TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    host     TEXT    NOT NULL,
    port     INTEGER NOT NULL,
    phase    TEXT    NOT NULL,
    allowed  INTEGER NOT NULL,
    rule     TEXT,
    body     TEXT    NOT NULL
);
CREATE INDEX egress_attempts_job ON egress_attempts (job_id, id);

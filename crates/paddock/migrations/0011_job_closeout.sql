-- A job's closeout (issue #14): the text posted on its pull request or
-- written to its outbox, kept in the job's record as well as in its
-- artifacts directory. NULL until the job's results are published.
ALTER TABLE jobs ADD COLUMN closeout TEXT;

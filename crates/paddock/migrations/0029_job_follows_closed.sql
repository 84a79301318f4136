-- Why the prior job a queued next attempt follows had its pull request
-- closed on the forge without being merged (`its pull request URL was
-- closed on the forge without being merged`), read when the attempt was
-- submitted: the server that runs it says so in its session status event
-- and closeout (docs/results.md). NULL when it was not (or none follows).
ALTER TABLE jobs ADD COLUMN follows_closed TEXT;
